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

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

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
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, terrain_lab_analysis:error_reason()}.
run(Options, RunDirs, Io) ->
    %% the one output rule: a given --out is a new file and none of the runs' inputs
    %% (their manifests and the files they list); the default RUN_DIR/report.html is
    %% the report's own and is replaced
    {Out, Check} = case maps:get(out, Options, undefined) of
                       undefined -> {filename:join(hd(RunDirs), "report.html"), ok};
                       File -> {File, terrain_lab_files:new_output(file, File, inputs(RunDirs))}
                   end,
    case Check of
        ok ->
            case terrain_lab_analysis:report(RunDirs, Out) of
                ok -> terrain_lab_io:out(Io, "~ts~n", [Out]);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% Every file the report reads: each run's manifest.json and the files it lists.
inputs(RunDirs) ->
    lists:append([begin
                      Manifest = filename:join(Dir, "manifest.json"),
                      Listed = case terrain_json:read_file(Manifest) of
                                   {ok, #{<<"outputs">> := Outputs}} when is_list(Outputs) ->
                                       [filename:join(Dir, F) || #{<<"file">> := F} <- Outputs, is_binary(F)];
                                   _ -> []
                               end,
                      [Manifest | Listed]
                  end || Dir <- RunDirs]).
