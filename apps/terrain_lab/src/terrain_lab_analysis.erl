%% @private
%% @doc Runs `terrain-analysis' (the Python half of terrain, python/) from the lab:
%% the one place that finds it and waits for it, under a deadline.
%%
%% The command is the project's virtualenv's (`.venv/bin/terrain-analysis', made by
%% `make setup') when there is one under the working directory, else the first on
%% PATH.
-module(terrain_lab_analysis).

%% API
-export([command/0,
         run/3]).

%% @doc The `terrain-analysis' executable, or `false' when it is not installed.
-spec command() -> file:filename() | false.
command() ->
    Local = filename:absname(".venv/bin/terrain-analysis"),
    case filelib:is_regular(Local) of
        true -> Local;
        false -> os:find_executable("terrain-analysis")
    end.

%% @doc Runs `Command' with `Args' (at most `TimeoutMs') and returns its exit status and its output
%% (stdout and stderr together). A run that has not finished `TimeoutMs' after it
%% started is abandoned with status 124, as timeout(1) reports it.
-spec run(file:filename(), pos_integer(), [string()]) -> {non_neg_integer(), binary()}.
run(Command, TimeoutMs, Args) ->
    Port = open_port({spawn_executable, Command}, [{args, Args}, exit_status, stderr_to_stdout, binary]),
    collect(Port, erlang:monotonic_time(millisecond) + TimeoutMs, TimeoutMs, []).

collect(Port, Deadline, TimeoutMs, Acc) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Port, {data, Data}} -> collect(Port, Deadline, TimeoutMs, [Data | Acc]);
        {Port, {exit_status, Status}} -> {Status, iolist_to_binary(lists:reverse(Acc))}
    after Left ->
        catch port_close(Port),
        {124, iolist_to_binary(io_lib:format("terrain-analysis did not finish within ~b s", [TimeoutMs div 1000]))}
    end.
