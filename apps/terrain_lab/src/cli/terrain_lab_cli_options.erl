%% @private
%% @doc Option definitions that several commands share, written once so that their
%% help reads the same everywhere. Called by the `terrain_lab_cmd_*' modules only.
-module(terrain_lab_cli_options).

%% API
-export([state_dir/0,
         runs_dir/0,
         parse_term/1]).

%% @doc `--state-dir DIR': where `terrain up' recorded the running cluster
%% (see `terrain_lab_cluster_state:state_dir/1').
-spec state_dir() -> terrain_lab_cli:option().
state_dir() ->
    #{name => state_dir, long => "state-dir", type => string, default => ".terrain",
      metavar => "DIR", help => "where the running cluster is recorded (env TERRAIN_STATE_DIR)"}.

%% @doc `--runs-dir DIR': where a command creates its run directory (`terrain_lab_run').
-spec runs_dir() -> terrain_lab_cli:option().
runs_dir() ->
    #{name => runs_dir, long => "runs-dir", type => string, default => "runs",
      metavar => "DIR", help => "where the run directory is created"}.

%% @doc An Erlang term typed on the command line (a predicate, a list of them): the
%% term, or the parser's sentence for what is wrong with it.
-spec parse_term(string()) -> {ok, term()} | {error, string()}.
parse_term(Text) ->
    case erl_scan:string(Text ++ " .") of
        {ok, Tokens, _} ->
            case erl_parse:parse_term(Tokens) of
                {ok, Term} -> {ok, Term};
                {error, {_, Mod, Desc}} -> {error, lists:flatten(Mod:format_error(Desc))}
            end;
        {error, {_, Mod, Desc}, _} ->
            {error, lists:flatten(Mod:format_error(Desc))}
    end.
