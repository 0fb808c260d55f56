%% @private
%% @doc The probe's files in a run directory: `latency.json' (format
%% `terrain.latency/1', docs/DESIGN.md), `latency.csv', with the tree strategy
%% `topology.json' (`terrain.topology/1'), and `manifest.json' listing them.
%%
%% The same {@link write/3} writes the final files and every checkpoint (a result
%% marked `partial'). Each file is written whole to `FILE.tmp' and renamed over `FILE'
%% (`terrain_lab_files:write/2'): a reader, or a probe interrupted by SIGINT or SIGKILL,
%% sees the old file or the new one, and a failed write (a full disk) leaves no
%% temporary file and returns `{write, FILE, Reason}' (`cannot write FILE: REASON').
%% The manifest is written even then, listing the files that are on disk, so a run
%% that could not write everything still keeps what it measured.
-module(terrain_lab_probe_files).

%% API
-export([write/3]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_LATENCY).
-define(CSV_COLUMNS, [from, to, exchanges, min_us, median_us, mean_us, p95_us, stddev_us, status]).
-define(STATS, [min, median, mean, p95, stddev]).

%%--------------------------------------------------------------------
%% API

%% @doc Writes `latency.json', `latency.csv' (and `topology.json' for a tree probe)
%% and `manifest.json' into `Dir'; `Extra' is merged into the manifest entry's
%% parameters. Returns the files written, or the first that could not be written.
-spec write(terrain_lab_probe:result(), file:filename(), map()) ->
          {ok, [file:filename()]} | {error, term()}.
write(#{nodes := Nodes, pairs := Pairs} = Result, Dir, Extra) ->
    Data = [{"latency.json", #{kind => latency, parameters => parameters(Result, Extra)},
             fun(File) -> terrain_lab_files:write(File, [terrain_json:encode(latency_json(Result),
                                                                             #{pretty => true}), $\n])
             end},
            {"latency.csv", #{kind => latency_csv}, fun(File) -> write_csv(File, Nodes, Pairs) end}
           | topology(Result)],
    Written = [{Name, Entry, Fun(filename:join(Dir, Name))} || {Name, Entry, Fun} <- Data],
    %% a file not written now may be on disk from an earlier checkpoint: listed too
    Outputs = [Entry#{file => list_to_binary(Name)} || {Name, Entry, Status} <- Written,
                                                       Status =:= ok
                                                           orelse filelib:is_regular(filename:join(Dir, Name))],
    Manifest = case terrain_lab_run:write_manifest(Dir, probe, Outputs) of
                   ok -> ok;
                   {error, {file, File, Why}} -> {error, {write, File, Why}}
               end,
    case [Error || {_, _, {error, _} = Error} <- Written] ++ [Manifest] of
        [ok] -> {ok, [filename:join(Dir, Name) || {Name, _, _} <- Data] ++ [filename:join(Dir, "manifest.json")]};
        [{error, _} = First | _] -> First
    end.

%%--------------------------------------------------------------------
%% Internal functions

parameters(#{nodes := Nodes, options := Opts} = Result, Extra) ->
    maps:merge(#{strategy => maps:get(strategy, Opts), batches => maps:get(batches, Opts),
                 messages => maps:get(messages, Opts), payload_bytes => maps:get(payload, Opts),
                 warmup => maps:get(warmup, Opts), nodes => length(Nodes),
                 partial => maps:get(partial, Result, false)}, Extra).

%% The tree strategy's tree, as `terrain.topology/1' JSON.
topology(#{topology := Tree, options := Opts} = Result) ->
    [{"topology.json",
      #{kind => topology,
        parameters => #{source => probe, strategy => tree, statistic => maps:get(statistic, Opts, min),
                        unplaced => maps:get(unplaced, Result, []), waves => maps:get(waves, Result, 0),
                        reinserted => maps:get(reinserted, Result, 0), partial => maps:get(partial, Result, false)}},
      fun(File) ->
              case terrain:render_topology(Tree, json) of
                  {ok, Text} -> terrain_lab_files:write(File, Text);
                  {error, _} = Error -> Error
              end
      end}];
topology(#{}) ->
    [].

latency_json(#{nodes := Nodes, options := Opts, pairs := Pairs, started_at := Started, finished_at := Finished,
               duration_ms := Duration} = Result) ->
    Cell = fun(A, B, Value) ->
                   case A =:= B of
                       true -> 0;
                       false -> case maps:get({A, B}, Pairs) of
                                    {ok, S} -> Value(S);
                                    {error, _} -> null
                                end
                   end
           end,
    Matrix = fun(Value) -> [[Cell(A, B, Value) || B <- Nodes] || A <- Nodes] end,
    Measured = length([P || {P, {ok, _}} <- maps:to_list(Pairs)]),
    #{format => ?FORMAT,
      nodes => [atom_to_binary(N) || N <- Nodes],
      unit => <<"us">>,
      pairs_measured => Measured,
      pairs_total => length(Nodes) * (length(Nodes) - 1),
      ended_by => maps:get(ended_by, Result, complete),
      strategy => maps:get(strategy, Opts),
      batches => maps:get(batches, Opts),
      messages => maps:get(messages, Opts),
      warmup => maps:get(warmup, Opts),
      payload_bytes => maps:get(payload, Opts),
      started_at => Started,
      finished_at => Finished,
      duration_ms => Duration,
      partial => maps:get(partial, Result, false),
      precision => maps:get(precision, Opts, none),
      budget_ms => maps:get(budget_ms, Opts, infinity),
      batches_per_pair => Matrix(fun(S) -> maps:get(batches, S, null) end),
      diagonal => <<"zero: a node is not probed against itself">>,
      stats => maps:from_list([{S, Matrix(fun(Stats) -> maps:get(S, Stats) end)} || S <- ?STATS]),
      failed => [#{from => A, to => B, reason => iolist_to_binary(io_lib:format("~0tP", [Why, 12]))}
                 || {{A, B}, {error, Why}} <- lists:sort(maps:to_list(Pairs)), Why =/= not_measured]}.

%% One row per ordered pair.
write_csv(File, Nodes, Pairs) ->
    Rows = [case maps:get({A, B}, Pairs) of
                {ok, #{exchanges := X} = S} ->
                    #{from => A, to => B, exchanges => X, min_us => maps:get(min, S),
                      median_us => maps:get(median, S), mean_us => maps:get(mean, S),
                      p95_us => maps:get(p95, S), stddev_us => maps:get(stddev, S), status => ok};
                {error, not_measured} ->
                    #{from => A, to => B, exchanges => 0, status => not_measured};
                {error, _} ->
                    #{from => A, to => B, exchanges => 0, status => failed}
            end || A <- Nodes, B <- Nodes, A =/= B],
    terrain_lab_files:write(File, terrain_lab_csv:encode(?CSV_COLUMNS, Rows)).
