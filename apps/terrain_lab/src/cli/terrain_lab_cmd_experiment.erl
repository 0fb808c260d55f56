%% @private
%% @doc `terrain experiment attributes|distances [--quick] --out DIR': the placement
%% experiments of RELEASE D3.5 (terrain_lab_experiment) into a run directory; and
%% `terrain experiment scale --max-nodes N --out DIR': the lab's operations at 16 to
%% 256 VMs with their growth exponents (terrain_lab_scale).
-module(terrain_lab_cmd_experiment).

%% API (command table and CLI handler)
-export([commands/0,
         run/3,
         format_error/1]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% The longest one-way latency of `scale --latency': 10 s, far above any network's.
-define(MAX_LATENCY_US, 10000000).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "experiment",
       summary => "Run a placement experiment (attributes or distances) with ML-ACO, or the scaling experiment",
       usage => "attributes|distances|scale",
       description => "attributes: an emulated cluster of 4 big VMs (8 schedulers) and 3 small ones (1 scheduler), "
                      "every scheduler capped at 0.05 cores (cpu_per_scheduler: 8 or 1 emulated cores of one speed); "
                      "ML-ACO with attribute placement against random, for growing numbers of ants "
                      "(RELEASE D3.5 section 3.4). Writes attributes.csv and summary.json (terrain.experiment/1) "
                      "into DIR; draw them with 'terrain-analysis experiment DIR'. "
                      "distances: an emulated network of 2 sites x 2 racks x 3 nodes (netem, 10 ms / 1 ms / 0 "
                      "one way); ML-ACO with distance placement (terrain:place_tree) against random, with the "
                      "spec's topology and with the one discovered by probe + topology (RELEASE D3.5 section 4.6). "
                      "Writes summary.json (ratio_spec, ratio_discovered), the placements as dot files, "
                      "probe/latency.json and discovered.term. "
                      "--quick takes at most about 3 minutes. "
                      "scale: the lab's operations (up, attrs, choose, probe under --probe-budget, down) at 16, "
                      "32, 64, 128 and 256 one-scheduler VMs up to --max-nodes; the probe is tree-guided "
                      "(terrain probe --strategy tree) or, with --probe-strategy concurrent, all pairs at once "
                      "(not run, but predicted, where the prediction is over the budget); "
                      "writes scale.json (terrain.scale/1: seconds per operation and size, the pairs the probe "
                      "measured, each operation's fitted growth exponent), the plot scale_time_vs_nodes.png and "
                      "a manifest (kind scale). 256 VMs need about 9 GB of memory and 10 minutes on 2 cores.",
       args => {1, 1},
       options => [#{name => quick, long => "quick", type => flag, help => "a small run (<= 3 minutes)"},
                   #{name => out, long => "out", type => string, metavar => "DIR",
                     help => "the run directory to create (required)"},
                   #{name => instances, long => "instances", type => string, metavar => "FILE",
                     help => "an OR-Library SMTWTP file for the workload (default: a generated instance of 100 jobs for attributes, 40 for distances)"},
                   #{name => instance, long => "instance", type => integer, range => {1, inf}, default => 1, metavar => "K",
                     help => "with --instances: the instance"},
                   #{name => max_nodes, long => "max-nodes", type => integer, range => {16, 256}, default => 256,
                     metavar => "N", help => "scale: the largest cluster (16 to 256)"},
                   #{name => probe_budget, long => "probe-budget", type => integer, range => {1, inf}, default => 120,
                     metavar => "SECONDS", help => "scale: time for the probe at each size"},
                   #{name => probe_strategy, long => "probe-strategy", type => string, default => "tree",
                     choices => ["tree", "concurrent"], metavar => "tree|concurrent",
                     help => "scale: tree-guided probe, or all pairs at once"},
                   #{name => latency, long => "latency", type => string, metavar => "SITE,RACK,NODE",
                     help => "scale: emulated links (netem), one-way microseconds between sites, racks of a "
                             "site and nodes of a rack (default: none, loopback)"},
                   terrain_lab_cli_options:prefix("xs_", "scale: prepended to every node name")],
       run => {?MODULE, run}}].

%% @doc `terrain experiment NAME --out DIR'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [Name], Io) ->
    Progress = fun(Text) -> terrain_lab_io:progress(Io, "~ts", [Text]) end,
    %% the instance is read before the output directory is made: a failed start
    %% leaves no empty directory behind
    Steps = [fun(_) ->
                     case latency(maps:get(latency, Options, undefined)) of
                         {ok, Latency} ->
                             case instance(Options) of
                                 {ok, I} -> {ok, I#{latency => Latency}};
                                 Error -> Error
                             end;
                         Error ->
                             Error
                     end
             end,
             fun(I) ->
                     case check(Name, Options) of
                         {ok, Dir} -> {ok, {Dir, I}};
                         Error -> Error
                     end
             end,
             fun({Dir, Instance}) ->
                     ExpOptions = maps:merge(#{quick => maps:get(quick, Options)}, maps:remove(latency, Instance)),
                     case Name of
                         "attributes" ->
                             %% SIGTERM stops it after the current run, keeping the runs done
                             %% (marked partial); its cluster and cgroups go with the cluster
                             ok = terrain_lab_cli_signals:on_interrupt(self(), {terrain_lab_experiment, interrupt}),
                             try terrain_lab_experiment:attributes(Dir, ExpOptions, Progress)
                             after ok = terrain_lab_cli_signals:clear()
                             end;
                         "distances" ->
                             %% SIGTERM stops it after the current case, keeping the cases done
                             ok = terrain_lab_cli_signals:on_interrupt(self(), {terrain_lab_experiment, interrupt}),
                             try terrain_lab_experiment:distances(Dir, ExpOptions, Progress)
                             after ok = terrain_lab_cli_signals:clear()
                             end;
                         "scale" -> terrain_lab_scale:run(Dir, #{max_nodes => maps:get(max_nodes, Options),
                                                                 latency => maps:get(latency, Instance),
                                                                 probe_budget_s => maps:get(probe_budget, Options),
                                                                 probe_strategy => list_to_existing_atom(
                                                                                     maps:get(probe_strategy, Options)),
                                                                 prefix => maps:get(prefix, Options), io => Io},
                                                          Progress)
                     end
             end,
             fun(Summary) -> print(Name, Summary, Options, Io) end],
    case terrain_lab_steps:run(Steps, Options) of
        {error, _} = Error ->
            %% a run that failed before writing anything leaves no empty --out behind
            _ = is_list(maps:get(out, Options, undefined)) andalso file:del_dir(maps:get(out, Options)),
            Error;
        Result ->
            Result
    end.

%% @doc A sentence for an error of this command.
-spec format_error({experiment_cmd, term()}) -> iolist().
format_error({experiment_cmd, {unknown_experiment, Name}}) ->
    io_lib:format("unknown experiment '~ts' (attributes, distances or scale)", [Name]);
format_error({experiment_cmd, missing_out}) ->
    "give the output directory with --out DIR";
format_error({experiment_cmd, {out_exists, Dir}}) ->
    io_lib:format("~ts exists and is not empty; give a new directory", [Dir]).

%%--------------------------------------------------------------------
%% Internal functions

check(Name, Options) ->
    case {lists:member(Name, ["attributes", "distances", "scale"]), maps:get(out, Options, undefined)} of
        {false, _} -> {error, {experiment_cmd, {unknown_experiment, Name}}};
        {true, undefined} -> {error, {experiment_cmd, missing_out}};
        {true, Dir} ->
            case file:list_dir(Dir) of
                {ok, [_ | _]} -> {error, {experiment_cmd, {out_exists, Dir}}};
                _ ->
                    case filelib:ensure_path(Dir) of
                        ok -> {ok, Dir};
                        {error, Why} -> {error, {file, Dir, Why}}
                    end
            end
    end.

%% `--latency SITE,RACK,NODE': three positive integers (a usage error otherwise).
latency(undefined) ->
    {ok, none};
latency(Text) ->
    Bad = {error, {usage, lists:flatten(io_lib:format("--latency ~ts: expected three one-way latencies in "
                                                      "microseconds from 1 to ~b (10 s), SITE,RACK,NODE (e.g. 20000,2000,200)",
                                                      [Text, ?MAX_LATENCY_US]))}},
    try [list_to_integer(string:trim(F)) || F <- string:split(Text, ",", all)] of
        [Site, Rack, Node] when Site > 0, Rack > 0, Node > 0, Site =< ?MAX_LATENCY_US, Rack =< ?MAX_LATENCY_US,
                                Node =< ?MAX_LATENCY_US ->
            {ok, {Site, Rack, Node}};
        _ -> Bad
    catch
        error:badarg -> Bad
    end.

instance(Options) ->
    case maps:get(instances, Options, undefined) of
        undefined -> {ok, #{}};
        File ->
            case terrain_workloads:aco_read_instance(File, auto, maps:get(instance, Options)) of
                {ok, I} -> {ok, #{instance => I}};
                Error -> Error
            end
    end.

print("attributes", #{ratios := Ratios}, Options, Io) ->
    terrain_lab_io:out(Io, "~6s ~12s ~12s ~8s~n", ["ANTS", "WITH (s)", "WITHOUT (s)", "RATIO"]),
    lists:foreach(fun(#{ants := A, with_s := W, without_s := WO, ratio := R}) ->
                          terrain_lab_io:out(Io, "~6b ~12.3f ~12.3f ~8.2f~n", [A, W, WO, R])
                  end, Ratios),
    terrain_lab_io:out(Io, "written to ~ts~n", [maps:get(out, Options)]);
print("scale", #{rows := Rows, growth_exponents := Exponents} = Summary, Options, Io) ->
    terrain_lab_io:out(Io, "~6s ~10s ~10s ~10s ~10s ~17s ~10s~n", ["NODES", "UP (s)", "ATTRS (s)", "CHOOSE (s)",
                                                                   "PROBE (s)", "PAIRS MEASURED", "DOWN (s)"]),
    lists:foreach(fun(N) ->
                          Row = fun(Op) -> hd([R || #{nodes := M, operation := O} = R <- Rows, M =:= N, O =:= Op]) end,
                          [Up, Attrs, Choose, Probe, Down] = [maps:get(seconds, Row(Op))
                                                              || Op <- [up, attrs, choose, probe, down]],
                          terrain_lab_io:out(Io, "~6b ~10.2f ~10.2f ~10.2f ~10.2f ~17s ~10.2f~n",
                                             [N, Up, Attrs, Choose, Probe, pairs(Row(probe)), Down])
                  end, maps:get(sizes, Summary)),
    terrain_lab_io:out(Io, "probe: ~s; growth exponent (time ~~ n^b): ~ts~nwritten to ~ts~n",
                       [maps:get(probe_strategy, Summary),
                        lists:join(", ", [io_lib:format("~s ~ts", [Op, exponent(maps:get(Op, Exponents))])
                                          || Op <- [up, attrs, choose, probe, down]]),
                        maps:get(out, Options)]);
print("distances", #{results := Results} = Summary, Options, Io) ->
    terrain_lab_io:out(Io, "~-11s ~-9s ~10s ~22s~n", ["TOPOLOGY", "PLACEMENT", "MEAN (s)", "SLOW LINKS/PATH (max)"]),
    lists:foreach(fun(#{topology := T, placement := P, mean_s := M, slow_links := L}) ->
                          All = lists:append(L),
                          terrain_lab_io:out(Io, "~-11s ~-9s ~10.3f ~14.2f (~b)~n",
                                             [T, P, M, lists:sum(All) / length(All), lists:max(All)])
                  end, Results),
    terrain_lab_io:out(Io, "ratio random/distance: ~.2f (spec topology), ~.2f (discovered)~nwritten to ~ts~n",
                       [maps:get(ratio_spec, Summary), maps:get(ratio_discovered, Summary), maps:get(out, Options)]).

%% "measured/total" ordered pairs of a probe row; "predicted" where it was not run.
pairs(#{predicted := true}) -> "predicted";
pairs(#{detail := #{pairs := Total, pairs_measured := Measured}}) -> io_lib:format("~b/~b", [Measured, Total]).

exponent(null) -> "-";
exponent(B) -> io_lib:format("~.2f", [B]).
