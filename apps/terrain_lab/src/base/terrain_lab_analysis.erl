%% @private
%% @doc Runs `terrain-analysis' (the Python half of terrain, python/) from the lab:
%% the one place that finds it and waits for it, under a deadline. `terrain report',
%% the demo's GEV fit and report, bench sweep plots and event views all go through it.
%%
%% The command is the first of: the working directory's `.venv/bin/terrain-analysis'
%% (made by `make setup'), the `.venv' of each directory above the escript, nearest
%% first (the checkout `bin/terrain' was built in), and `terrain-analysis' on PATH.
-module(terrain_lab_analysis).

%% API
-export([command/0,
         run/3,
         report/2,
         format_error/1]).

-export_type([error_reason/0]).

-type error_reason() :: {report, {no_analysis, [file:filename()]}
                                | {failed, non_neg_integer(), binary()}
                                | terrain_lab_os:error_reason()}.

-define(ANALYSIS, "terrain-analysis").
-define(REPORT_DEADLINE_MS, 300000).

%% @doc The `terrain-analysis' executable, or `false' when it is not installed.
-spec command() -> file:filename() | false.
command() ->
    case [C || C <- candidates(), filelib:is_regular(C)] of
        [Found | _] -> Found;
        [] -> os:find_executable(?ANALYSIS)
    end.

%% @doc Runs `Command' with `Args' (at most `TimeoutMs') and returns its exit status
%% and its output (stdout and stderr together), through `terrain_lab_os:run/3'. A run
%% that has not finished `TimeoutMs' after it started is stopped (its process group)
%% and reported with status 124, as timeout(1) reports it; a command that cannot be
%% run with 127 (not found) or 126, as a shell reports them; the output is then the
%% sentence that says so.
-spec run(file:filename(), pos_integer(), [string()]) -> {non_neg_integer(), binary()}.
run(Command, TimeoutMs, Args) ->
    case terrain_lab_os:run(Command, Args, #{timeout => TimeoutMs}) of
        {ok, Status, Output} -> {Status, Output};
        {error, {run, _, Why} = Reason} -> {shell_status(Why), iolist_to_binary(terrain_lab_os:format_error(Reason))}
    end.

%% @doc Writes the report of `RunDirs' to `Out' with `terrain-analysis report'
%% (docs/REPORT.md).
-spec report([file:filename()], file:filename()) -> ok | {error, error_reason()}.
report(RunDirs, Out) ->
    case command() of
        false ->
            {error, {report, {no_analysis, candidates()}}};
        Command ->
            case terrain_lab_os:run(Command, ["report" | RunDirs] ++ ["--out", Out],
                                    #{timeout => ?REPORT_DEADLINE_MS}) of
                {ok, 0, _Output} -> ok;
                {ok, Status, Output} -> {error, {report, {failed, Status, Output}}};
                {error, Reason} -> {error, {report, Reason}}
            end
    end.

%% @doc A sentence for an error of {@link report/2}.
-spec format_error(error_reason()) -> iolist().
format_error({report, {no_analysis, Tried}}) ->
    io_lib:format("terrain-analysis is not installed: looked at ~ts and on PATH; 'make setup' installs it "
                  "into .venv", [lists:join(", ", Tried)]);
format_error({report, {failed, Status, Output}}) ->
    io_lib:format("terrain-analysis report failed (exit status ~b):~n~ts", [Status, string:trim(Output)]);
format_error({report, {run, _, _} = Reason}) ->
    ["terrain-analysis report: ", terrain_lab_os:format_error(Reason)].

%%--------------------------------------------------------------------
%% Internal functions

candidates() ->
    [filename:absname(filename:join([".venv", "bin", ?ANALYSIS])) | beside_escript()].

%% `.venv/bin/terrain-analysis' in each directory above the escript, nearest first;
%% nothing when not run as an escript.
beside_escript() ->
    case init:get_argument(escript) of   % the `-escript main' flag of the escript's header
        {ok, _} ->
            Parts = filename:split(filename:dirname(filename:absname(escript:script_name()))),
            [filename:join([filename:join(lists:sublist(Parts, K)), ".venv", "bin", ?ANALYSIS])
             || K <- lists:seq(length(Parts) - 1, 1, -1)];
        _ ->
            []
    end.

shell_status({timeout, _, _}) -> 124;
shell_status({output_limit, _, _}) -> 124;
shell_status(not_found) -> 127;
shell_status({spawn, _}) -> 126.
