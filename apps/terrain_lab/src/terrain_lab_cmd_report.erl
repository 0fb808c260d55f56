%% @private
%% @doc `terrain report RUN_DIR [RUN_DIR ...] [--out FILE]': one self-contained HTML
%% page of one or more run directories, written by `terrain-analysis report' (the
%% Python package in `python/'; docs/REPORT.md).
%%
%% The page is built from each run directory's `manifest.json' alone: a section per
%% kind of output (cluster, attributes, latency, topology, durations, GEV fit, and
%% the kinds later tools add), the figures inline, no scripts, no requests. Several
%% run directories are shown side by side. Without `--out' the page is
%% `RUN_DIR/report.html' of the first directory. The path of the page is printed on
%% stdout.
%%
%% `terrain-analysis' is looked for, in this order, in `.venv/bin/' under the working
%% directory (where `make setup' puts it), in `.venv/bin/' of each directory above the
%% escript (the checkout whose `bin/terrain' runs), and on `PATH'.
%%
%% ```
%% $ terrain report runs/20261123T214048Z
%% runs/20261123T214048Z/report.html
%% $ terrain report runs/20261123T214048Z runs/20261123T220130Z --out compare.html
%% compare.html
%% '''
-module(terrain_lab_cmd_report).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

-ignore_xref([{commands, 0}, {run, 3}]).

%% Internal exports (the demo writes its report with these)
-export([build/2,
         analysis_command/0,
         format_error/1]).

-define(ANALYSIS, "terrain-analysis").
-define(DEADLINE_MS, 300000).

-type error_reason() :: {report, {no_analysis, [file:filename()]}
                                | {failed, integer(), binary()}
                                | {timeout, non_neg_integer()}}.
-export_type([error_reason/0]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "report",
       summary => "Write one self-contained HTML page of one or more run directories",
       usage => "RUN_DIR [RUN_DIR ...]",
       description => "Reads each RUN_DIR's manifest.json and writes one HTML file (through "
                      "terrain-analysis report) with a section per kind of output - cluster, attributes, "
                      "latency, topology, durations, GEV fit, and others as tools add them; kinds it does "
                      "not know are listed with their files - every figure inline, no scripts, no "
                      "requests. Several run directories are shown side by side. Prints the path of "
                      "the page (default RUN_DIR/report.html of the first).",
       args => {1, infinity},
       options => [#{name => out, long => "out", type => string, metavar => "FILE",
                     help => "the HTML file to write (default RUN_DIR/report.html)"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain report'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, error_reason()}.
run(Options, RunDirs, Io) ->
    Out = case maps:get(out, Options, undefined) of
              undefined -> filename:join(hd(RunDirs), "report.html");
              File -> File
          end,
    case build(RunDirs, Out) of
        ok -> terrain_lab_io:out(Io, "~ts~n", [Out]);
        {error, _} = Error -> Error
    end.

%% @doc Writes the report of `RunDirs' to `Out' with `terrain-analysis report'.
-spec build([file:filename()], file:filename()) -> ok | {error, error_reason()}.
build(RunDirs, Out) ->
    case analysis_command() of
        {ok, Command} ->
            Args = ["report" | RunDirs] ++ ["--out", Out],
            case run_command(Command, Args) of
                {0, _Output} -> ok;
                {timeout, Ms} -> {error, {report, {timeout, Ms}}};
                {Status, Output} -> {error, {report, {failed, Status, Output}}}
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Where `terrain-analysis' is: the working directory's `.venv', the one next to
%% the escript's directory, or `PATH'.
-spec analysis_command() -> {ok, file:filename()} | {error, error_reason()}.
analysis_command() ->
    Candidates = [filename:absname(filename:join([".venv", "bin", ?ANALYSIS]))] ++ beside_escript(),
    case [C || C <- Candidates, filelib:is_regular(C)] of
        [Found | _] ->
            {ok, Found};
        [] ->
            case os:find_executable(?ANALYSIS) of
                false -> {error, {report, {no_analysis, Candidates}}};
                OnPath -> {ok, OnPath}
            end
    end.

%% @doc A sentence for an error of this command.
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

%% `.venv/bin/terrain-analysis' in each directory above the escript, nearest first
%% (the checkout that `bin/terrain' or `_build/default/bin/terrain' was built in);
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

run_command(Command, Args) ->
    Port = open_port({spawn_executable, Command}, [{args, Args}, exit_status, stderr_to_stdout, binary]),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    Deadline = erlang:monotonic_time(millisecond) + ?DEADLINE_MS,
    collect(Port, OsPid, Deadline, []).

collect(Port, OsPid, Deadline, Acc) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Port, {data, Data}} -> collect(Port, OsPid, Deadline, [Data | Acc]);
        {Port, {exit_status, Status}} -> {Status, iolist_to_binary(lists:reverse(Acc))}
    after Left ->
        %% Stop exactly the process this port started; closing the port alone leaves it running.
        _ = os:cmd("kill " ++ integer_to_list(OsPid)),
        receive
            {Port, {exit_status, _}} -> ok
        after 5000 ->
            port_close(Port)
        end,
        {timeout, ?DEADLINE_MS}
    end.
