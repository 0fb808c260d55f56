%% @private
%% @doc `terrain hostlist EXPR...': SLURM hostlist expressions expanded, one host a line.
%%
%% ```
%% $ terrain hostlist 'rack[1-2]-n[01-02]'
%% rack1-n01
%% rack1-n02
%% rack2-n01
%% rack2-n02
%% '''
%% The grammar is `terrain_lab_hostlist''s. A bad expression is a usage error (exit 2):
%% the message shows the expression with a caret under the offending character.
-module(terrain_lab_cmd_hostlist).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

%% exports_not_used: commands/0 and the handler are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "hostlist",
       summary => "Expand SLURM hostlist expressions, one host a line",
       usage => "EXPR...",
       description => "Prints the hosts of each SLURM hostlist expression (as in SLURM_JOB_NODELIST), "
                      "one a line, in order: 'atcn[019-036,073-126]' (ranges keep the width of their "
                      "lower bound), comma-separated groups, several brackets ('rack[1-2]-n[01-04]', "
                      "leftmost slowest). A bad expression is a usage error that points at the character.",
       args => {1, infinity},
       options => [],
       run => {?MODULE, run}}].

%% @doc Runs `terrain hostlist'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(_Options, Expressions, Io) ->
    Expanded = [terrain_lab_hostlist:expand(E) || E <- Expressions],
    case [Reason || {error, Reason} <- Expanded] of
        [] ->
            lists:foreach(fun({ok, Hosts}) -> [terrain_lab_io:out(Io, "~ts~n", [H]) || H <- Hosts] end, Expanded);
        [Reason | _] ->
            {error, {usage, Reason}}
    end.
