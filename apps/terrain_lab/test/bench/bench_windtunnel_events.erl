%% Benchmark of EventSpace watching the wind tunnel on an emulated two-rack cluster
%% (examples/two_racks.cluster: 4 nodes, 100 µs one way inside a rack, 2 ms between
%% racks) (`make bench'; figures go to docs/BENCHMARKS.md with the command).
%%
%% <ul>
%% <li>slowdown of the wind tunnel (8 workers, 150 steps) with collection on (every
%%     worker emits 8 events per step), and with collection and a monitor scope at
%%     its default rate (10 reads per second of every node, both built-in monitors),
%%     against the bare run: the three in turn in each of 7 rounds, the median of the
%%     per-round ratios of wall-clock time — goals ≤ 1.05 and ≤ 1.08 — and of the CPU
%%     time all VMs spent (the work added, which the load of other users of the
%%     machine does not blur);</li>
%% <li>the reconfiguration table: slowdown and observation rate (events delivered per
%%     second) of a scope at 2, 10, 50 and 250 reads per second, each run in turn with
%%     a bare run (5 rounds);</li>
%% <li>the wind tunnel with 16 workers and 500 steps recorded as `terrain events record'
%%     does, into runs/bench-events-&lt;stamp&gt;/ (events, trace.json, the two views).</li>
%% </ul>
%% The machine is shared with other work: run times are noisy, which is why every
%% ratio is taken between runs made one after the other. Every node it starts is
%% stopped before it returns.
-module(bench_windtunnel_events).

-export([run/0]).

-define(SPEC, "examples/two_racks.cluster").
%% The same two racks with the schedulers' busy waiting off, so that a VM's CPU time is
%% its work (it would otherwise grow with the time its schedulers spin while idle).
spec_text() ->
    NoSpin = ["+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none"],
    Node = fun(Name) -> io_lib:format("{node, ~s, #{schedulers => 1, args => ~0tp}}", [Name, NoSpin]) end,
    io_lib:format("{cluster, two_racks, #{latency => 2000}}.~n"
                  "{group, r1, #{latency => 100}, [~s, ~s]}.~n"
                  "{group, r2, #{latency => 100}, [~s, ~s]}.~n",
                  [Node(r1n1), Node(r1n2), Node(r2n1), Node(r2n2)]).

-define(TUNNEL, #{workers => 8, steps => 150}).

run() ->
    ok = terrain_test_peers:ensure_distributed(),
    {ok, _} = application:ensure_all_started(terrain_events),
    {ok, Root} = file:get_cwd(),   % make bench runs in the repository
    SpecFile = filename:join(Root, "runs/bench-two-racks.cluster"),
    ok = filelib:ensure_dir(SpecFile),
    ok = file:write_file(SpecFile, spec_text()),
    {ok, Cluster} = terrain_lab:start_cluster(SpecFile, #{prefix => "bwe" ++ os:getpid() ++ "_"}),
    try
        Nodes = [N || #{node := N} <- terrain_lab:cluster_nodes(Cluster)],
        [{ok, _} = erpc:call(N, application, ensure_all_started, [terrain_events], 10000) || N <- Nodes],
        io:format("cluster ~s (schedulers' busy waiting off): ~b nodes; load average ~s~n",
                  [?SPEC, length(Nodes), loadavg()]),
        {_, _} = tunnel(Nodes, none),   % warm up (connections, code loading)
        slowdown(Nodes),
        reconfiguration(Nodes),
        recorded_run(Nodes, Root)
    after
        ok = terrain_lab:stop_cluster(Cluster)
    end,
    ok.

loadavg() ->
    {ok, Bin} = file:read_file("/proc/loadavg"),
    string:trim(lists:sublist(binary_to_list(Bin), 14)).

%% Seconds of one wind-tunnel run, and the CPU seconds all nodes and this one spent
%% meanwhile (the VMs' runtime: work, whatever else the machine's cores were doing).
tunnel(Nodes, Instrument) ->
    Cpu0 = cpu([node() | Nodes]),
    {ok, #{elapsed_us := Us}} = terrain_workloads:windtunnel(?TUNNEL#{nodes => Nodes, instrument => Instrument}),
    {Us / 1.0e6, (cpu([node() | Nodes]) - Cpu0) / 1000}.

cpu(Nodes) ->
    lists:sum([Ms || {ok, {Ms, _}} <- erpc:multicall(Nodes, erlang, statistics, [runtime], 5000)]).

with_scope(Nodes, ScopeOptions) ->
    Cpu0 = cpu([node() | Nodes]),
    {ok, Scope} = terrain_events:start_scope(ScopeOptions#{nodes => Nodes,
                                                           monitors => [#{kind => load_imbalance},
                                                                        #{kind => slow_pair}]}),
    {T, _} = tunnel(Nodes, fun terrain_events:emit/3),
    {_Reports, Stats} = terrain_events:stop_scope(Scope),
    {{T, (cpu([node() | Nodes]) - Cpu0) / 1000}, Stats}.

slowdown(Nodes) ->
    Rounds = [begin
                  Bare = tunnel(Nodes, none),
                  Collect = tunnel(Nodes, fun terrain_events:emit/3),
                  {Scope, _} = with_scope(Nodes, #{}),
                  {Bare, Collect, Scope}
              end || _ <- lists:seq(1, 7)],
    io:format("~nwind tunnel ~p on ~b nodes, 7 rounds (bare, collection, collection + scope at 10/s in turn):~n",
              [?TUNNEL, length(Nodes)]),
    io:format("  run times (s): ~s~n", [lists:join("  ", [io_lib:format("~.2f/~.2f/~.2f", [A, B, C])
                                                         || {{A, _}, {B, _}, {C, _}} <- Rounds])]),
    io:format("  CPU s, all VMs: ~s~n", [lists:join("  ", [io_lib:format("~.2f/~.2f/~.2f", [A, B, C])
                                                          || {{_, A}, {_, B}, {_, C}} <- Rounds])]),
    Ratio = fun(Pick, Which) -> median([Pick(element(Which, R)) / Pick(element(1, R)) || R <- Rounds]) end,
    Wall = fun({W, _}) -> W end,
    Cpu = fun({_, C}) -> C end,
    io:format("  median bare run ~.2f s, ~.2f CPU s~n",
              [median([W || {{W, _}, _, _} <- Rounds]), median([C || {{_, C}, _, _} <- Rounds])]),
    io:format("  ~-44s ~12s ~12s  ~s~n", ["", "wall ratio", "CPU ratio", "goal (wall)"]),
    io:format("  ~-44s ~12.3f ~12.3f  <= 1.05: ~s~n", ["with collection", Ratio(Wall, 2), Ratio(Cpu, 2),
                                                      met(Ratio(Wall, 2) =< 1.05)]),
    io:format("  ~-44s ~12.3f ~12.3f  <= 1.08: ~s~n", ["with collection + monitor scope at 10/s", Ratio(Wall, 3),
                                                      Ratio(Cpu, 3), met(Ratio(Wall, 3) =< 1.08)]).

reconfiguration(Nodes) ->
    io:format("~nreconfiguration: a scope at R reads/s of all 4 nodes (batch 1000), each run after a bare run, "
              "5 rounds, medians:~n"),
    io:format("  ~10s ~12s ~12s ~14s ~14s ~8s~n",
              ["reads/s", "wall ratio", "CPU ratio", "reads done/s", "events/s seen", "lost"]),
    lists:foreach(
      fun(Rate) ->
              Rounds = [begin
                            {BareW, BareC} = tunnel(Nodes, none),
                            {{W, C}, #{observation_rate := O, read_rate := R, lost := L}} =
                                with_scope(Nodes, #{rate => Rate}),
                            {W / BareW, C / BareC, O, R, L}
                        end || _ <- lists:seq(1, 5)],
              io:format("  ~10b ~12.3f ~12.3f ~14.1f ~14b ~8b~n",
                        [Rate, median([S || {S, _, _, _, _} <- Rounds]), median([S || {_, S, _, _, _} <- Rounds]),
                         median([R || {_, _, _, R, _} <- Rounds]),
                         round(median([O || {_, _, O, _, _} <- Rounds])), lists:sum([L || {_, _, _, _, L} <- Rounds])])
      end, [2, 10, 50, 250]).

recorded_run(Nodes, Root) ->
    Out = filename:join([Root, "runs", "bench-events-" ++ binary_to_list(stamp())]),
    ok = filelib:ensure_dir(filename:join(Out, "x")),
    io:format("~nrecorded run: 16 workers, 500 steps, work per cell 64, collection + scope at 10/s, into ~s~n", [Out]),
    {ok, #{windtunnel := T, reports := [Imbalance, Slow], scope := S, views := Views}} =
        terrain_lab_events:record(#{nodes => Nodes, out => Out, workers => 16, steps => 500, scope_rate => 10,
                                    work_per_cell => 64,
                                    highlight_step => 250},
                                  fun(_) -> ok end, fun(_) -> ok end),
    io:format("  ~.2f s; ~b events observed online (~b/s), ~b lost; views: ~p~n",
              [maps:get(elapsed_us, T) / 1.0e6, maps:get(events, S), round(maps:get(observation_rate, S)),
               maps:get(lost, S), Views]),
    #{most_waiting := W, max_wait_share := Max, mean_wait_share := Mean} = Imbalance,
    io:format("  load imbalance: worker ~p waits most (~.1f%), mean ~.1f%~n", [W, 100 * Max, 100 * Mean]),
    case Slow of
        #{pairs := [#{from := F, to := To, p10_us := P10, median_us := Med} | _]} ->
            io:format("  slowest pair: ~s -> ~s, p10 ~b us, median ~b us~n", [F, To, P10, Med]);
        _ ->
            ok
    end,
    io:format("  timeline: ~s~n  reads:    ~s~n", [filename:join(Out, "timeline.png"), filename:join(Out, "reads.png")]).

stamp() ->
    {{Y, Mo, D}, {H, Mi, Se}} = calendar:universal_time(),
    iolist_to_binary(io_lib:format("~4..0b~2..0b~2..0bT~2..0b~2..0b~2..0bZ", [Y, Mo, D, H, Mi, Se])).

met(true) -> "met";
met(false) -> "NOT met".

median(Xs) ->
    Sorted = lists:sort(Xs),
    lists:nth((length(Sorted) + 1) div 2, Sorted).
