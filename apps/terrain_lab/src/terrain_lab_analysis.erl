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
                                | {timeout, pos_integer()}}.

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
%% and its output (stdout and stderr together). A run that has not finished
%% `TimeoutMs' after it started is stopped (its OS process, exactly) and reported
%% with status 124, as timeout(1) reports it.
-spec run(file:filename(), pos_integer(), [string()]) -> {non_neg_integer(), binary()}.
run(Command, TimeoutMs, Args) ->
    Port = open_port({spawn_executable, Command}, [{args, Args}, exit_status, stderr_to_stdout, binary]),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    %% the CLI's exit path (SIGTERM) stops it too: never a child left writing later
    Pid = integer_to_list(OsPid),
    ok = terrain_lab_cleanup:add({port, Pid}, fun() -> terrain_lab_os:terminate(Pid, 2000, fun() -> true end) end),
    try collect(Port, OsPid, erlang:monotonic_time(millisecond) + TimeoutMs, TimeoutMs, [])
    after terrain_lab_cleanup:remove({port, Pid})
    end.

%% @doc Writes the report of `RunDirs' to `Out' with `terrain-analysis report'
%% (docs/REPORT.md).
-spec report([file:filename()], file:filename()) -> ok | {error, error_reason()}.
report(RunDirs, Out) ->
    case command() of
        false ->
            {error, {report, {no_analysis, candidates()}}};
        Command ->
            case run(Command, ?REPORT_DEADLINE_MS, ["report" | RunDirs] ++ ["--out", Out]) of
                {0, _Output} -> ok;
                {124, _} -> {error, {report, {timeout, ?REPORT_DEADLINE_MS}}};
                {Status, Output} -> {error, {report, {failed, Status, Output}}}
            end
    end.

%% @doc A sentence for an error of {@link report/2}.
-spec format_error(error_reason()) -> iolist().
format_error({report, {no_analysis, Tried}}) ->
    io_lib:format("terrain-analysis is not installed: looked at ~ts and on PATH; 'make setup' installs it "
                  "into .venv", [lists:join(", ", Tried)]);
format_error({report, {failed, Status, Output}}) ->
    io_lib:format("terrain-analysis report failed (exit status ~b):~n~ts", [Status, string:trim(Output)]);
format_error({report, {timeout, Ms}}) ->
    io_lib:format("terrain-analysis report did not finish within ~b s and was stopped", [Ms div 1000]).

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

collect(Port, OsPid, Deadline, TimeoutMs, Acc) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Port, {data, Data}} -> collect(Port, OsPid, Deadline, TimeoutMs, [Data | Acc]);
        {Port, {exit_status, Status}} -> {Status, iolist_to_binary(lists:reverse(Acc))}
    after Left ->
        %% Stop exactly the process this port started; closing the port alone leaves it running.
        _ = terrain_lab_os:terminate(integer_to_list(OsPid), 2000, fun() -> true end),
        receive
            {Port, {exit_status, _}} -> ok
        after 5000 ->
            catch port_close(Port)
        end,
        {124, iolist_to_binary(io_lib:format("terrain-analysis did not finish within ~b s and was stopped",
                                             [TimeoutMs div 1000]))}
    end.
