%% @private
%% @doc Run directories: `runs/<UTC stamp>/' with a `manifest.json' that lists what
%% the run produced (kind, file, parameters), so a report can be rebuilt from it alone.
-module(terrain_lab_run).

%% API
-export([timestamp/0,
         write_manifest/4,
         create/1,
         write_manifest/3,
         include/2,
         add_outputs/2]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(MANIFEST_FORMAT, ?TERRAIN_FORMAT_MANIFEST).

-type output() :: #{kind := binary() | atom(),     % what the file holds, e.g. cluster, latency
                    file := binary(),               % relative to the run directory
                    parameters => map()}.           % how it was produced; `command' (a binary):
                                                    % the command that made it, which the report quotes

%% @doc The current UTC time, ISO 8601 with seconds, as a binary.
-spec timestamp() -> binary().
timestamp() ->
    list_to_binary(calendar:system_time_to_rfc3339(erlang:system_time(second), [{offset, "Z"}])).

%% @doc Creates a new run directory under `RunsDir' named by the UTC time
%% (`20261121T160258Z', with a numeric suffix if that exists already).
-spec create(file:filename()) -> {ok, file:filename()} | {error, {write, file:filename(), term()}}.
create(RunsDir) ->
    {{Y, Mo, D}, {H, Mi, S}} = calendar:universal_time(),
    Stamp = lists:flatten(io_lib:format("~4..0b~2..0b~2..0bT~2..0b~2..0b~2..0bZ", [Y, Mo, D, H, Mi, S])),
    create(RunsDir, Stamp, 0).

create(RunsDir, Stamp, N) ->
    Name = case N of 0 -> Stamp; _ -> Stamp ++ "-" ++ integer_to_list(N) end,
    Dir = filename:join(RunsDir, Name),
    case filelib:ensure_dir(filename:join(RunsDir, "x")) of
        ok ->
            case file:make_dir(Dir) of
                ok -> {ok, Dir};
                {error, eexist} -> create(RunsDir, Stamp, N + 1);
                {error, Why} -> {error, {write, Dir, Why}}
            end;
        {error, Why} ->
            {error, {write, RunsDir, Why}}
    end.

%% @doc Writes `manifest.json' into a run directory.
-spec write_manifest(file:filename(), atom() | binary(), [output()]) -> ok | {error, term()}.
write_manifest(Dir, Kind, Outputs) ->
    write_manifest(Dir, Kind, Outputs, #{}).

%% @doc Writes `manifest.json' with extra keys: `error' (the sentence of a run that
%% failed, binary) and `vm_logs' (the directory of the run's VM logs, relative).
-spec write_manifest(file:filename(), atom() | binary(), [output()], #{error => binary(), vm_logs => binary()}) ->
          ok | {error, term()}.
write_manifest(Dir, Kind, Outputs, Extra) ->
    terrain_lab_files:write_json(filename:join(Dir, "manifest.json"),
                                 maps:merge(maps:with([error, vm_logs], Extra),
                                            #{format => ?MANIFEST_FORMAT,
                                              kind => Kind,
                                              created_at => timestamp(),
                                              terrain_version => list_to_binary(terrain:version()),
                                              outputs => Outputs})).

%% @doc Adds the outputs of the run directory `Dir/Sub' (its manifest.json) to the
%% manifest of `Dir', their files relative to `Dir': a tool run inside another
%% run (the demo's steps) shows in that run's report.
-spec include(file:filename(), file:filename()) -> ok | {error, term()}.
include(Dir, Sub) ->
    case terrain_json:read_file(filename:join([Dir, Sub, "manifest.json"])) of
        {ok, #{<<"outputs">> := SubOutputs}} ->
            Prefix = list_to_binary(Sub),
            add_outputs(Dir, [Output#{<<"file">> => filename:join(Prefix, File)}
                              || #{<<"file">> := File} = Output <- SubOutputs]);
        {ok, _} -> {error, {file, filename:join([Dir, Sub, "manifest.json"]), no_outputs}};
        {error, _} = Error -> Error
    end.

%% @doc Appends outputs to the manifest of the run directory `Dir'.
-spec add_outputs(file:filename(), [output() | map()]) -> ok | {error, term()}.
add_outputs(Dir, New) ->
    File = filename:join(Dir, "manifest.json"),
    case terrain_json:read_file(File) of
        {ok, #{<<"outputs">> := Outputs} = Manifest} when is_list(Outputs) ->
            terrain_lab_files:write_json(File, Manifest#{<<"outputs">> => Outputs ++ New});
        {ok, _} -> {error, {file, File, no_outputs}};
        {error, _} = Error -> Error
    end.
