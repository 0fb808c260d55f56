%% @private
%% @doc `terrain demo': the main job of `make demo'. Starts the demo cluster with the
%% launcher and walks through terrain on it, recording the run under
%% `runs/<UTC stamp>/' (manifest.json lists every file), then stops the cluster:
%% <ol>
%% <li>the nodes, their group paths and schedulers (cluster.json);</li>
%% <li>a few of their attributes, asked all at once under one deadline
%%     (attributes.json);</li>
%% <li>selections made at the first node: attributes, levels, subtrees, nearest first;</li>
%% <li>a process tree placed by distance, its cost against random placement;</li>
%% <li>the round trips between every pair of nodes (latency.json), the topology
%%     discovered from them (topology.json), and how it compares with the spec's tree
%%     (topology_comparison.json);</li>
%% <li>a timed parallel task on every node (durations.csv), fitted with a GEV by
%%     `terrain-analysis gev' when it is installed (gev/fit.json and plots), the fit
%%     loaded into `terrain_variability' and the slowest run checked against it;</li>
%% <li>the report: `report.html' in the run directory, one self-contained page of
%%     everything above (`terrain report'), its path printed last, after the total
%%     time.</li>
%% </ol>
%% Every output in the manifest carries the command that made it (parameter
%% `command'), which the report quotes under each figure.
%% Later parts of terrain add their steps here; it stays one command.
-module(terrain_lab_cmd_demo).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).


-include_lib("terrain_json/include/terrain_formats.hrl").
-define(CLUSTER_FORMAT, ?TERRAIN_FORMAT_CLUSTER).
-define(ATTRIBUTES_FORMAT, ?TERRAIN_FORMAT_ATTRIBUTES).
-define(COMPARISON_FORMAT, ?TERRAIN_FORMAT_TOPOLOGY_COMPARISON).
%% Attributes recorded in attributes.json (the first three are also printed).
-define(SHOWN_ATTRIBUTES, [vm_schedulers_online, gpu, num_erlang_processes]).
-define(RECORDED_ATTRIBUTES, ?SHOWN_ATTRIBUTES ++ [hostname, vm_num_processors, cpu_model_name, mem_total,
                                                   otp_release, loadavg1]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "demo",
       summary => "Start the demo cluster, show its nodes, record the run, stop it",
       usage => "",
       description => "Starts every node of the cluster spec (examples/demo.cluster unless --spec) in "
                      "parallel, each running the terrain application, walks through terrain on it "
                      "(attributes, choices, placement, probe and discovery, a timed task and its GEV fit), "
                      "records every output in RUNS_DIR/<UTC stamp>/manifest.json, stops the cluster, "
                      "runs the lab's other tools into the same run, then a live cluster of its own "
                      "(examples/live.cluster: a node joins and a member's VM is killed under a placed group; "
                      "the tree before and after), writes the run's report.html and prints its path last.",
       args => {0, 0},
       options => [#{name => spec, long => "spec", type => string, default => "examples/demo.cluster",
                     metavar => "FILE", help => "cluster spec to start"},
                   terrain_lab_cli_options:runs_dir()],
       run => {?MODULE, run}}].

%% @doc Runs the demo.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(#{spec := SpecFile, runs_dir := RunsDir}, [], Io) ->
    Start = erlang:monotonic_time(millisecond),
    terrain_lab_steps:with([fun() -> terrain_lab_spec:read(SpecFile) end,
                            fun() -> terrain_lab_run:create(RunsDir) end],
                           fun([Spec, RunDir]) ->
                                   case with_cluster(Spec, SpecFile, RunDir, Io) of
                                       ok ->
                                           ok = lab_steps(SpecFile, RunDir, Io),
                                           report(RunDir, Start, Io);
                                       {error, _} = Error ->
                                           Error
                                   end
                           end).

%% A write of the walkthrough: a refusal (full disk, read-only) ends the demo with
%% its error (caught in with_cluster/4, which stops the cluster), not with a crash.
written(ok) -> ok;
written({error, _} = Error) -> throw({?MODULE, Error}).

%% The steps of the lab's other tools, each run as its command (the words a user would
%% type, printed first) into a directory of the run whose outputs join the run's
%% manifest, so the report shows them. A step that fails is named on stderr and the
%% demo goes on (partial success: the report shows the rest).
lab_steps(SpecFile, RunDir, Io) ->
    Steps = [{"EMAS, hybrid model, 3 s (terrain emas)", "emas",
              ["emas", "--model", "hybrid", "--time-ms", "3000"]},
             {"DE-Bench, 5 s on 4 nodes (terrain bench)", "bench",
              ["bench", "examples/bench/demo.config", "--spec", "examples/bench/four.cluster"]},
             {"collectives on the demo's hierarchy (terrain collective bench)", "collective",
              ["collective", "bench", "--spec", SpecFile, "--algorithms", "binomial,recursive_doubling,hierarchical",
               "--sizes", "8,65536", "--rank-order", "block,random", "--seeds", "1", "--rounds", "4"]},
             {"the wind tunnel under EventSpace (terrain events record)", "events",
              ["events", "record", "--spec", "examples/two_racks.cluster", "--workload", "windtunnel",
               "--workers", "8", "--steps", "200"]},
             {"ML-ACO placed with and without attributes, quick (terrain experiment attributes)", "experiment",
              ["experiment", "attributes", "--quick"]}],
    FailedTools = [Title || {Title, Sub, Args} <- Steps, not lab_step(Title, Sub, Args, RunDir, Io)],
    %% after the tools (explicitly: the operands of ++ have no evaluation order)
    Live = [{"a live cluster: a node joins, one is killed under a placed group", "live"}],
    FailedLive = [Title || {Title, Sub} <- Live, not live_step(Title, Sub, RunDir, Io)],
    Failed = FailedTools ++ FailedLive,
    case Failed of
        [] -> ok;
        _ -> terrain_lab_io:progress(Io, "demo: ~b of ~b steps of the lab's tools failed: ~ts~n",
                                     [length(Failed), length(Steps) + 1, lists:join("; ", Failed)])
    end.

%% The live topology and a placed group (terrain_lab_live): its own cluster, started
%% live from examples/live.cluster; live.json joins the manifest as kind `live'.
live_step(Title, Sub, RunDir, Io) ->
    section(Io, Title),
    Out = filename:join(RunDir, Sub),
    Spec = "examples/live.cluster",
    Add = "examples/live_add.cluster",
    terrain_lab_io:out(Io, "$ terrain up ~ts --live   (then terrain up --add ~ts, kill -9 of a member's VM)~n",
                       [Spec, Add]),
    case terrain_lab_live:run(Spec, Add, Out, Io) of
        {ok, File} ->
            Output = #{kind => live, file => list_to_binary(filename:join(Sub, File)),
                       parameters => #{spec => list_to_binary(Spec), added => list_to_binary(Add),
                                       command => command(["terrain demo (live step)"])}},
            case terrain_lab_run:add_outputs(RunDir, [Output]) of
                ok ->
                    true;
                {error, Reason} ->
                    terrain_lab_io:progress(Io, "demo: live: ~ts~n", [terrain_lab_cli_errors:format(Reason)]),
                    false
            end;
        {error, Reason} ->
            terrain_lab_io:progress(Io, "demo: live: ~0tp~n", [Reason]),
            false
    end.

-spec lab_step(string(), string(), [string()], file:filename(), terrain_lab_io:io()) -> boolean().
lab_step(Title, Sub, Args, RunDir, Io) ->
    case environment_limit(Args) of
        ok ->
            run_lab_step(Title, Sub, Args, RunDir, Io);
        {limit, Why} ->
            terrain_lab_io:progress(Io, "demo: skipped ~ts: ~ts~n", [Title, Why]),
            true
    end.

%% What this machine lacks for a step, said in one sentence instead of the step's
%% failure (a container or a chroot often has no CPU cgroup controller).
-spec environment_limit([string()]) -> ok | {limit, iodata()}.
environment_limit(["experiment" | _]) ->
    case terrain_lab_cgroup:usable(per_scheduler) of
        ok -> ok;
        {error, {cgroup, {_, Why}}} ->
            {limit, ["its nodes' cores are emulated with CPU cgroups, and none can be made here (", Why, ")"]}
    end;
environment_limit(_Args) ->
    ok.

-spec run_lab_step(string(), string(), [string()], file:filename(), terrain_lab_io:io()) -> boolean().
run_lab_step(Title, Sub, Args, RunDir, Io) ->
    section(Io, Title),
    Out = filename:join(RunDir, Sub),
    Command = Args ++ ["--out", Out],
    terrain_lab_io:out(Io, "$ terrain ~ts~n", [lists:join(" ", Command)]),
    case terrain_lab_cli:run(Command, Io) of
        0 ->
            case terrain_lab_steps:run([fun(_) -> terrain_lab_run:include(RunDir, Sub) end,
                                        fun(_) -> figures(hd(Args), RunDir, Sub, Io) end], none) of
                {error, figures_failed} -> false;   % said already
                {error, Reason} ->
                    terrain_lab_io:progress(Io, "demo: ~ts: ~ts~n", [Sub, terrain_lab_cli_errors:format(Reason)]),
                    false;
                _ -> true
            end;
        Status ->
            terrain_lab_io:progress(Io, "demo: terrain ~ts exited with ~b~n", [hd(Args), Status]),
            false
    end.

%% The experiment's figures are drawn by `terrain-analysis experiment DIR' (the
%% command writes the data only); they join the manifest under the experiment's kind.
figures("experiment", RunDir, Sub, Io) ->
    Dir = filename:join(RunDir, Sub),
    case terrain_lab_analysis:command() of
        false ->
            terrain_lab_io:progress(Io, "demo: the experiment's figures skipped: "
                                        "terrain-analysis is not installed~n", []),
            ok;
        Command ->
            case terrain_lab_analysis:run(Command, 120000, ["experiment", Dir]) of
                {0, _} ->
                    Made = iolist_to_binary(["terrain-analysis experiment ", Dir]),
                    Pngs = [F || F <- lists:sort(element(2, file:list_dir(Dir))), filename:extension(F) =:= ".png"],
                    terrain_lab_run:add_outputs(RunDir, [#{kind => experiment,
                                                           file => list_to_binary(filename:join(Sub, F)),
                                                           parameters => #{command => Made}}
                                                         || F <- Pngs]);
                {Status, Output} ->
                    terrain_lab_io:progress(Io, "demo: terrain-analysis experiment ~ts failed (exit ~b):~n~ts~n",
                                            [Dir, Status, Output]),
                    {error, figures_failed}
            end
    end;
figures(_, _RunDir, _Sub, _Io) ->
    ok.

%% The report of the run, then the total time, then the report's path (last). Without
%% terrain-analysis (the demo run outside a checkout set up by make) the report is
%% skipped and the manifest's path comes last instead.
report(RunDir, Start, Io) ->
    section(Io, "report (terrain report)"),
    Report = filename:join(RunDir, "report.html"),
    Result = case terrain_lab_analysis:command() of
                 false -> skipped;
                 _ -> terrain_lab_analysis:report([RunDir], Report)
             end,
    terrain_lab_io:out(Io, "total time ~.1f s~n", [(erlang:monotonic_time(millisecond) - Start) / 1000]),
              case Result of
        ok ->
            terrain_lab_io:out(Io, "~ts~n", [Report]);
        skipped ->
            terrain_lab_io:out(Io, "report skipped: terrain-analysis is not installed here (make demo installs it)~n"
                                   "~ts~n", [filename:join(RunDir, "manifest.json")]);
        {error, _} = Error ->
            Error
    end.

with_cluster(Spec, SpecFile, RunDir, Io) ->
    Count = length(terrain_lab_spec:nodes(Spec)),
    terrain_lab_io:progress(Io, "starting ~b nodes of ~ts in parallel...~n", [Count, SpecFile]),
    T0 = erlang:monotonic_time(millisecond),
    Prefix = "demo" ++ os:getpid() ++ "_",
    Run = fun(Nodes) ->
                  Elapsed = erlang:monotonic_time(millisecond) - T0,
                  terrain_lab_io:progress(Io, "~b nodes running terrain after ~.1f s~n", [Count, Elapsed / 1000]),
                  try {ran, on_cluster(Spec, SpecFile, RunDir, Nodes, Prefix, Elapsed, Io)}
                  catch throw:{?MODULE, {error, _} = Refused} -> {ran, Refused}  % a write the disk refused (written/1)
                  end
          end,
    case terrain_lab:with_cluster(Spec, #{prefix => Prefix}, Run) of
        {ran, Result} -> terrain_lab_io:progress(Io, "cluster stopped~n", []), Result;
        {error, _} = NotStarted -> NotStarted
    end.

on_cluster(Spec, SpecFile, RunDir, Nodes, Prefix, Elapsed, Io) ->
    print_table(Nodes, Io),
    Names = [N || #{node := N} <- Nodes],
    Attributes = show_attributes(Names, RunDir, Io),
    show_choices(Names, Prefix, Io),
    show_placement(Names, Prefix, Io),
    Discovered = probe_and_discover(Spec, SpecFile, Nodes, Prefix, RunDir, Io),
    Outputs = Attributes ++ Discovered ++ time_and_fit(Names, Prefix, RunDir, Io),
    record(Spec, SpecFile, RunDir, Nodes, Elapsed, Outputs, Io).

print_table(Nodes, Io) ->
    terrain_lab_io:out(Io, "~-26s ~-12s ~10s~n", ["NODE", "GROUP PATH", "SCHEDULERS"]),
    lists:foreach(fun(#{node := Node, path := Path, schedulers := S}) ->
                          terrain_lab_io:out(Io, "~-26s ~-12s ~10b~n",
                                             [Node, lists:join("/", [atom_to_list(P) || P <- Path]), S])
                  end, Nodes).

record(Spec, SpecFile, RunDir, Nodes, Elapsed, Outputs, Io) ->
    Cluster = #{format => ?CLUSTER_FORMAT,
                cluster => maps:get(name, Spec),
                spec => list_to_binary(filename:absname(SpecFile)),
                startup_ms => Elapsed,
                levels => terrain_lab_netem:level_records(Spec),
                nodes => [#{name => Name, node => Node, group_path => Path, schedulers => S}
                          || #{name := Name, node := Node, path := Path, schedulers := S} <- Nodes]},
    Command = command(["terrain demo --spec ", SpecFile]),
    Written = [terrain_json:write_file(filename:join(RunDir, "cluster.json"), Cluster),
               terrain_lab_run:write_manifest(RunDir, demo,
                                              [#{kind => cluster, file => <<"cluster.json">>,
                                                 parameters => #{spec => list_to_binary(SpecFile),
                                                                 nodes => length(Nodes),
                                                                 command => Command}}
                                               | Outputs])],
    case [E || {error, _} = E <- Written] of
        [] ->
            terrain_lab_io:out(Io, "run recorded in ~ts~n", [filename:join(RunDir, "manifest.json")]);
        [Error | _] ->
            Error
    end.

%%--------------------------------------------------------------------
%% The walk-through

section(Io, Title) ->
    terrain_lab_io:out(Io, "~n== ~ts ==~n", [Title]).

%% The command that made an output, for the manifest's `command' parameter.
command(Parts) ->
    unicode:characters_to_binary(Parts).

short(Node, Prefix) ->
    [Name, _Host] = string:split(atom_to_list(Node), "@"),
    lists:nthtail(length(Prefix), Name).

show_attributes(Nodes, RunDir, Io) ->
    section(Io, "attributes (terrain:attrs/3, all nodes at once, one deadline)"),
    Names = ?SHOWN_ATTRIBUTES,
    Answers = terrain:attrs(Nodes, ?RECORDED_ATTRIBUTES, #{timeout => 3000}),
    terrain_lab_io:out(Io, "~-26s ~22s ~10s ~22s~n", ["NODE" | [atom_to_list(N) || N <- Names]]),
    lists:foreach(fun(Node) ->
                          Cells = case maps:get(Node, Answers) of
                                      {ok, Values} -> [io_lib:format("~0tp", [maps:get(N, Values)]) || N <- Names];
                                      {error, Why} -> [io_lib:format("(~0tp)", [Why]), "", ""]
                                  end,
                          terrain_lab_io:out(Io, "~-26s ~22ts ~10ts ~22ts~n", [Node | Cells])
                  end, Nodes),
    Document = #{format => ?ATTRIBUTES_FORMAT,
                 names => ?RECORDED_ATTRIBUTES,
                 timeout_ms => 3000,
                 nodes => [case maps:get(Node, Answers) of
                               {ok, Values} ->
                                   #{node => Node,
                                     attributes => maps:map(fun(_, V) -> json_value(V) end, Values)};
                               {error, Why} ->
                                   #{node => Node, error => json_value(Why)}
                           end || Node <- Nodes]},
    written(terrain_json:write_file(filename:join(RunDir, "attributes.json"), Document)),
    [#{kind => attributes, file => <<"attributes.json">>,
       parameters => #{timeout_ms => 3000,
                       command => <<"terrain demo (terrain:attrs/3; alone: terrain attrs NAME...)">>}}].

%% An attribute value as JSON: numbers, booleans and strings as they are, undefined
%% as null, other atoms as strings, any other term as its printed form.
json_value(undefined) -> null;
json_value(V) when is_number(V); is_boolean(V); is_atom(V) -> V;
json_value(V) when is_binary(V) ->
    case unicode:characters_to_list(V) of
        L when is_list(L) -> V;
        _ -> printed(V)
            end;
json_value(V) when is_list(V) ->
    case io_lib:printable_unicode_list(V) of
        true -> unicode:characters_to_binary(V);
        false -> printed(V)
            end;
json_value(V) -> printed(V).

printed(V) ->
    unicode:characters_to_binary(io_lib:format("~0tp", [V])).

%% Selections made at the first node, which holds the cluster's topology.
show_choices([At | _] = Nodes, Prefix, Io) ->
    section(Io, io_lib:format("choose_nodes at ~ts (distances from there)", [short(At, Prefix)])),
    Queries = [{"near, with 2+ schedulers", [{level, le, near}, {vm_schedulers_online, ge, 2}], #{}},
               {"GPUs, nearest first", [{gpu, true}], #{order_by => distance}},
               {"rack us_r2 or a GPU, outside eu",
                [{'or', [{in_subtree, us_r2}, {gpu, true}]}, {'not', {in_subtree, eu}}], #{}},
               {"very near, 4+ schedulers",
                [{level, eq, very_near}, {vm_schedulers_online, ge, 4}], #{explain => true}}],
    lists:foreach(
      fun({Label, Preds, Opts}) ->
              Result = erpc:call(At, terrain, choose_nodes, [Nodes, Preds, Opts#{timeout => 3000}], 5000),
              terrain_lab_io:out(Io, "~-34ts ~0tp~n", [Label, Preds]),
              case Result of
                  {[], Why} ->
                      terrain_lab_io:out(Io, "  none: ~ts", [indent(terrain:format_explanation(Why))]);
                  Chosen when is_list(Chosen) ->
                      terrain_lab_io:out(Io, "  -> ~ts~n", [lists:join(" ", [short(N, Prefix) || N <- Chosen])])
              end
      end, Queries).

indent(Text) ->
    [string:replace(string:trim(lists:flatten(io_lib:format("~ts", [Text])), trailing), "\n", "\n  ", all), $\n].

show_placement([At | _] = Nodes, Prefix, Io) ->
    section(Io, "place_tree: 1 master, 4 submasters, 3 colonies each (colonies need 2+ schedulers)"),
    Tree = {vertex, master, [{vertex, {sub, S}, [{vertex, {colony, S, C}, [{vm_schedulers_online, ge, 2}], []}
                                                 || C <- lists:seq(1, 3)]}
                             || S <- lists:seq(1, 4)]},
    {ok, #{assignment := A, cost := Cost, random := Random}} =
        erpc:call(At, terrain, place_tree, [Tree, #{candidates => Nodes}], 10000),
    lists:foreach(fun(S) ->
                          Colonies = [short(maps:get({colony, S, C}, A), Prefix) || C <- lists:seq(1, 3)],
                          terrain_lab_io:out(Io, "  sub ~b on ~-6ts colonies on ~ts~n",
                                             [S, short(maps:get({sub, S}, A), Prefix), lists:join(" ", Colonies)])
                  end, lists:seq(1, 4)),
    terrain_lab_io:out(Io, "  master on ~ts~n", [short(maps:get(master, A), Prefix)]),
    terrain_lab_io:out(Io, "  cost over root-to-leaf paths (us of round trip): sum ~s, max ~s, slow links per path ~b~n"
                           "  random placement (mean of 20):                 sum ~s, max ~s, slow links per path ~b~n",
                       [num(maps:get(sum, Cost)), num(maps:get(max, Cost)), maps:get(max_slow, Cost),
                        num(maps:get(sum, Random)), num(maps:get(max, Random)), maps:get(max_slow, Random)]).

num(X) when is_integer(X) -> integer_to_list(X);
num(X) when abs(X) < 1.0e15 -> float_to_list(float(X), [{decimals, 1}]);
num(X) -> float_to_list(float(X), [short]).

%% A short probe (all pairs at once), then discovery and a comparison with the spec.
probe_and_discover(Spec, SpecFile, Nodes, Prefix, RunDir, Io) ->
    Names = [N || #{node := N} <- Nodes],
    Options = #{batches => 5, messages => 10, strategy => concurrent},
    section(Io, io_lib:format("probe: round trips between all ~b ordered pairs (concurrent, 5 x 10), "
                              "then topology discovery", [length(Names) * (length(Names) - 1)])),
    case terrain_lab_probe:probe(Names, Options) of
        {ok, Result} ->
            {ok, _Files} = terrain_lab_probe_files:write(Result, RunDir, #{}),
            {ok, Latency} = terrain:read_latency(filename:join(RunDir, "latency.json")),
            {ok, #{topology := Found}} = terrain:discover(Latency, #{}),
            {ok, Json} = terrain:render_topology(Found, json),
            written(terrain_lab_files:write(filename:join(RunDir, "topology.json"), Json)),
            {ok, Text} = terrain:render_topology(Found, text),
            terrain_lab_io:out(Io, "  ~ts", [indent(string:replace(lists:flatten(io_lib:format("~ts", [Text])),
                                                                  Prefix, "", all))]),
            ByName = maps:from_list([{N, Node} || #{name := N, node := Node} <- Nodes]),
            Truth = terrain_lab_spec:topology(Spec, fun(N) -> maps:get(N, ByName) end),
            {ok, #{levels := Levels, clade_recall := Recall} = Comparison} = terrain:compare_topologies(Found, Truth),
            [terrain_lab_io:out(Io, "  against the spec, level ~b: ~b true clusters, ~b found, ARI ~.3f~n",
                                 [L, TC, FC, Ari])
             || #{level := L, truth_clusters := TC, found_clusters := FC, ari := Ari} <- Levels],
            terrain_lab_io:out(Io, "  clade recall ~.3f~n", [Recall]),
            written(terrain_json:write_file(filename:join(RunDir, "topology_comparison.json"),
                                            Comparison#{format => ?COMPARISON_FORMAT,
                                                        found => <<"topology.json">>,
                                                        truth => unicode:characters_to_binary(SpecFile)})),
            LatencyFile = filename:join(RunDir, "latency.json"),
            [#{kind => latency, file => <<"latency.json">>,
               parameters => #{batches => 5, messages => 10, strategy => concurrent,
                               command => <<"terrain demo (alone: terrain probe --strategy concurrent "
                                            "--batches 5 --messages 10)">>}},
             #{kind => topology, file => <<"topology.json">>,
               parameters => #{source => <<"latency.json">>,
                               command => command(["terrain topology ", LatencyFile, " --format json"])}},
             #{kind => topology_comparison, file => <<"topology_comparison.json">>,
               parameters => #{found => <<"topology.json">>, truth => unicode:characters_to_binary(SpecFile),
                               command => command(["terrain topology compare ",
                                                   filename:join(RunDir, "topology.json"), " ", SpecFile,
                                                   " --prefix ", Prefix])}}];
        {error, Reason} ->
            terrain_lab_io:out(Io, "  probe failed: ~ts~n", [terrain_lab_cli_errors:format(Reason)]),
            []
    end.

-define(TASK_RUNS, 60).

%% A timed parallel task from the first node to every node (over the emulated links:
%% the controlling node's own connections are not emulated), then its extreme-value
%% fit and an online check.
time_and_fit([At | _] = Nodes, Prefix, RunDir, Io) ->
    section(Io, io_lib:format("time-task at ~ts: erlang:node() on all ~b nodes at once, ~b runs",
                              [short(At, Prefix), length(Nodes), ?TASK_RUNS])),
    Csv = filename:join(RunDir, "durations.csv"),
    {ok, File} = terrain_lab_csv:create(Csv, terrain_lab_time_task:columns()),
    Rows = try [begin Row = erpc:call(At, terrain_lab_time_task, one_run, [{erlang, node, []}, Nodes, 5000, R], 10000),
                      written(terrain_lab_csv:write_row(File, Row)),
                      Row
                end || R <- lists:seq(1, ?TASK_RUNS)]
           after terrain_lab_csv:close(File)
           end,
    Totals = lists:sort([T || #{total_s := T, status := ok} <- Rows]),
    terrain_lab_io:out(Io, "  ~b runs ok; until every node answered: min ~.1f ms, median ~.1f ms, max ~.1f ms~n",
                       [length(Totals), 1000 * hd(Totals), 1000 * lists:nth((length(Totals) + 1) div 2, Totals),
                        1000 * lists:last(Totals)]),
    Task = #{kind => durations, file => <<"durations.csv">>,
             parameters => #{task => <<"erlang:node/0 on every node">>, runs => ?TASK_RUNS,
                             from => atom_to_binary(At),
                             command => iolist_to_binary(io_lib:format("terrain demo (alone: terrain time-task "
                                                                       "--rpc-all erlang:node:[] --runs ~b)",
                                                                       [?TASK_RUNS]))}},
    case terrain_lab_analysis:command() of
        false ->
            terrain_lab_io:out(Io, "  GEV fit skipped: terrain-analysis is not installed here "
                                   "(make demo installs it)~n", []),
            [Task];
        Command ->
            GevDir = filename:join(RunDir, "gev"),
            case terrain_lab_analysis:run(Command, 120000, ["gev", Csv, "--out", GevDir]) of
                {0, _Output} ->
                    Fit = filename:join(GevDir, "fit.json"),
                    check_slowest(Fit, lists:last(Totals), Io),
                    [Task, #{kind => gev_fit, file => <<"gev/fit.json">>,
                             parameters => #{source => <<"durations.csv">>, column => <<"total_s">>,
                                             command => command(["terrain-analysis gev ", Csv, " --out ", GevDir])}}];
                {Status, Output} ->
                    terrain_lab_io:out(Io, "  GEV fit failed (exit ~b):~n~ts~n", [Status, Output]),
                    [Task]
            end
    end.

check_slowest(Fit, Slowest, Io) ->
    case terrain:load_duration_model(Fit, #{name => demo, tail => 0.01}) of
        ok ->
            #{location := Mu, scale := Sigma, shape := Xi} = terrain:duration_model(demo),
            terrain_lab_io:out(Io, "  GEV fit (gev/fit.json): location ~.2f ms, scale ~.2f ms, shape xi ~.3f~n",
                                [1000 * Mu, 1000 * Sigma, Xi]),
            {Verdict, P} = terrain:check_duration(demo, Slowest),
            terrain_lab_io:out(Io, "  terrain:check_duration(demo, ~.4f) -> ~s, upper tail p = ~.3g "
                                   "(the slowest run, ~.1f ms; unlikely below 0.01)~n",
                                [Slowest, Verdict, P, 1000 * Slowest]),
            terrain:unload_duration_model(demo);
        {error, Reason} ->
            terrain_lab_io:out(Io, "  the fit could not be loaded: ~ts~n", [terrain:format_error(Reason)])
    end.

