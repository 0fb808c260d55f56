%% @private
%% @doc Option definitions that several commands share, written once so that their
%% help reads the same everywhere. Called by the `terrain_lab_cmd_*' modules only.
-module(terrain_lab_cli_options).

%% API
-export([state_dir/0,
         prefix/2,
         runs_dir/0,
         parse_term/1]).

-define(MAX_PREFIX, 200).

%% @doc `--state-dir DIR': where `terrain up' recorded the running cluster
%% (see `terrain_lab_cluster_state:state_dir/1').
-spec state_dir() -> terrain_lab_cli:option().
state_dir() ->
    #{name => state_dir, long => "state-dir", type => string, default => ".terrain",
      metavar => "DIR", help => "where the running cluster is recorded (env TERRAIN_STATE_DIR)"}.

%% @doc `--prefix TEXT': prepended to every node name a command starts; checked at
%% once (a usage error): ASCII letters, digits, `_' and `-', at most ?MAX_PREFIX
%% characters (the full node name, prefix, name, `@' and host, must fit in an atom).
-spec prefix(string(), string()) -> terrain_lab_cli:option().
prefix(Default, Help) ->
    #{name => prefix, long => "prefix", type => string, default => Default,
      check => {fun(P) -> length(P) =< ?MAX_PREFIX andalso lists:all(fun prefix_char/1, P) end,
                lists:flatten(io_lib:format("at most ~b ASCII letters, digits, '_' and '-' (it starts node names)",
                                            [?MAX_PREFIX]))},
      metavar => "TEXT", help => Help}.

prefix_char(C) ->
    (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z) orelse (C >= $0 andalso C =< $9)
        orelse C =:= $_ orelse C =:= $-.

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
