%% DE-Bench runs on real local nodes (peer): every operation with its files and the
%% merged summary, no atom made by the name operations, the open loop's latency from
%% the intended start, and a target node killed mid-run.
-module(terrain_bench_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([every_operation_writes_its_files_and_the_merged_summary/0,
         every_operation_writes_its_files_and_the_merged_summary/1,
         name_operations_make_no_atoms/0, name_operations_make_no_atoms/1,
         open_loop_counts_queueing_closed_loop_hides_it/0, open_loop_counts_queueing_closed_loop_hides_it/1,
         a_target_killed_mid_run_shows_as_errors_and_the_run_goes_on/0,
         a_target_killed_mid_run_shows_as_errors_and_the_run_goes_on/1,
         the_nodes_are_connected_to_each_other_before_the_start/0,
         the_nodes_are_connected_to_each_other_before_the_start/1,
         think_time_paces_the_closed_loop/0, think_time_paces_the_closed_loop/1,
         the_start_waits_for_global_to_know_the_run_not_for_global_sync/0,
         the_start_waits_for_global_to_know_the_run_not_for_global_sync/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [every_operation_writes_its_files_and_the_merged_summary, name_operations_make_no_atoms,
     open_loop_counts_queueing_closed_loop_hides_it, a_target_killed_mid_run_shows_as_errors_and_the_run_goes_on,
     the_nodes_are_connected_to_each_other_before_the_start, think_time_paces_the_closed_loop,
     the_start_waits_for_global_to_know_the_run_not_for_global_sync].

init_per_suite(Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    Prefix = terrain_test_peers:unique_prefix(bench),
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ [C]) || C <- "abc"], []),
    [{peers, Peers}, {nodes, [terrain_test_peers:node_of(P) || P <- Peers]}, {prefix, Prefix} | Config].

end_per_suite(Config) ->
    terrain_test_peers:stop(?config(peers, Config)).

%%--------------------------------------------------------------------

every_operation_writes_its_files_and_the_merged_summary() ->
    [{doc, "3 nodes, every operation for 2 s after 1 s of warm-up: each node's directory holds exactly the "
           "DE-Bench files with their columns and one HdrHistogram log per operation; summary.json's count per "
           "operation is the sum of the nodes' CSV rows and of their logs, the P2P operations had no errors, "
           "the merged p99 is the p99 of all the intervals the nodes logged, and the per-node counts add up."}].
every_operation_writes_its_files_and_the_merged_summary(Config) ->
    Nodes = ?config(nodes, Config),
    Ops = terrain_bench:operations(),
    {ok, C} = terrain_bench:validate_config([{duration, 2}, {warmup, 1}, {concurrent, 2}, {compute_us, 5},
                                             {argument_size, 100}, {operations, [{Op, 1} || Op <- Ops]}]),
    Out = filename:join(?config(priv_dir, Config), "all_ops"),
    {ok, Summary} = terrain_bench:run(Nodes, C, Out, #{}),
    {ok, Json} = terrain_json:read_file(filename:join(Out, "summary.json")),
    ?assertMatch(#{<<"format">> := <<"terrain.bench/1">>, <<"failed_instances">> := []}, Json),
    Expected = lists:sort(terrain_bench:files(C)),
    [?assertEqual(Expected, lists:sort(element(2, file:list_dir(filename:join(Out, atom_to_list(N)))))) || N <- Nodes],
    #{operations := Operations} = Summary,
    [begin
         #{count := Count, error_count := Errors, latency_us := #{p99 := P99}, per_node := PerNode,
           per_node_percentile_mean := Mean} = maps:get(Op, Operations),
         Rows = lists:append([csv_rows(filename:join([Out, atom_to_list(N), atom_to_list(Op) ++ "_latencies.csv"]))
                              || N <- Nodes]),
         ?assertEqual(Count, lists:sum([binary_to_integer(maps:get(<<"n">>, R)) || R <- Rows]), Op),
         Intervals = [H || N <- Nodes,
                           {_, _, H} <- terrain_bench_hdr:parse_log(
                                          element(2, file:read_file(filename:join([Out, atom_to_list(N),
                                                                                   atom_to_list(Op) ++ ".hlog"]))))],
         Logged = lists:sum([terrain_bench_hdr:count(H) || H <- Intervals]),
         ?assertEqual(Count, Logged, Op),
         ?assert(Count > 0, Op),
         case lists:member(Op, [spawn, rpc, erpc, gen_server_call, fsm_server_call]) of
             true -> ?assertEqual(0, Errors, Op);
             false -> ok
         end,
         %% the cluster's p99 is the p99 of every interval every node logged, merged (not
         %% always between the nodes' own p99s: the rank rule rounds, as HdrHistogram's does)
         ?assertEqual(terrain_bench_hdr:percentile(terrain_bench_hdr:merge(Intervals), 99), P99, Op),
         ?assertEqual(Count, lists:sum([K || #{count := K} <- maps:values(PerNode)]), Op),
         ?assert(is_map(Mean), Op)
     end || Op <- Ops],
    [Header | _] = read_lines(filename:join([Out, atom_to_list(hd(Nodes)), "rpc_latencies.csv"])),
    ?assertEqual(<<"elapsed,window,n,min,mean,median,95th,99th,99_9th,max,errors">>, Header),
    [SummaryHeader | SummaryRows] = read_lines(filename:join([Out, atom_to_list(hd(Nodes)), "summary.csv"])),
    ?assertEqual(<<"elapsed,window,total,successful,failed">>, SummaryHeader),
    ?assertEqual(2, length(SummaryRows)).

name_operations_make_no_atoms() ->
    [{doc, "Two runs of local and global register/unregister/whereis and pg join/leave (2 workers per node, "
           "2 s each, 20 ms mean think time): after the first run, the second adds no atom on any node (DE-Bench "
           "leaked one per local_register). The think time keeps global's one cluster-wide lock below "
           "saturation: in a closed loop without it, where 2 of 8 operations take the lock, its back-off can stall "
           "every worker of a node for seconds (docs/BENCH.md, (e)), and the second run may register no local name."}].
name_operations_make_no_atoms(Config) ->
    Nodes = ?config(nodes, Config),
    {ok, C} = terrain_bench:validate_config([{duration, 2}, {concurrent, 2}, {mode, {think, 20}},
                                             {operations, [{local_register, 1}, {local_unregister, 1},
                                                           {local_whereis, 1}, {global_register, 1},
                                                           {global_unregister, 1}, {global_whereis, 1},
                                                           {pg_join, 1}, {pg_leave, 1}]}]),
    Dir = ?config(priv_dir, Config),
    {ok, _} = terrain_bench:run(Nodes, C, filename:join(Dir, "atoms1"), #{}),
    Before = atom_counts(Nodes),
    {ok, #{operations := #{local_register := #{count := Registered}}}} =
        terrain_bench:run(Nodes, C, filename:join(Dir, "atoms2"), #{}),
    ?assert(Registered > 10, Registered),
    ?assertEqual(Before, atom_counts(Nodes)).

open_loop_counts_queueing_closed_loop_hides_it() ->
    [{doc, "rpc with 20 ms of computation on the target: in the closed loop the median is near 20 ms; in "
           "the open loop at 100 operations per second per worker (twice what one worker can do) the "
           "operations queue behind each other and, measured from their intended start, the median is more "
           "than five times the closed loop's."}].
open_loop_counts_queueing_closed_loop_hides_it(Config) ->
    Nodes = ?config(nodes, Config),
    Base = [{duration, 2}, {concurrent, 1}, {compute_us, 20000}, {operations, [{rpc, 1}]}],
    {ok, Closed} = terrain_bench:validate_config(Base),
    {ok, Open} = terrain_bench:validate_config([{mode, {rate, 100}} | Base]),
    Dir = ?config(priv_dir, Config),
    {ok, #{operations := #{rpc := #{latency_us := #{p50 := ClosedP50}}}}} =
        terrain_bench:run(Nodes, Closed, filename:join(Dir, "closed"), #{}),
    {ok, #{operations := #{rpc := #{latency_us := #{p50 := OpenP50}}}}} =
        terrain_bench:run(Nodes, Open, filename:join(Dir, "open"), #{}),
    ct:log("closed p50 ~b us, open p50 ~b us", [ClosedP50, OpenP50]),
    ?assert(ClosedP50 >= 20000),
    ?assert(OpenP50 > 5 * ClosedP50, {OpenP50, ClosedP50}).

the_nodes_are_connected_to_each_other_before_the_start() ->
    [{doc, "Two new nodes started with -connect_all false (so that global does not connect them through this "
           "node), each connected to this node only: a 1 s run of noop with {connect, false} leaves them "
           "unconnected (noop makes no connection); the same run with the default {connect, true} connects "
           "them to each other before the start."}].
the_nodes_are_connected_to_each_other_before_the_start(Config) ->
    Prefix = ?config(prefix, Config),
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ "mesh" ++ [C]) || C <- "12"], [],
                                     fun(_) -> ["-connect_all", "false"] end),
    try
        [A, B] = Nodes = [terrain_test_peers:node_of(P) || P <- Peers],
        Base = [{duration, 1}, {concurrent, 1}, {operations, [{noop, 1}]}],
        {ok, Unconnected} = terrain_bench:validate_config([{connect, false} | Base]),
        {ok, Connected} = terrain_bench:validate_config(Base),
        ?assertEqual(true, maps:get(connect, Connected)),
        Dir = ?config(priv_dir, Config),
        {ok, _} = terrain_bench:run(Nodes, Unconnected, filename:join(Dir, "mesh_off"), #{}),
        ?assertNot(lists:member(B, erpc:call(A, erlang, nodes, []))),
        {ok, _} = terrain_bench:run(Nodes, Connected, filename:join(Dir, "mesh_on"), #{}),
        ?assert(lists:member(B, erpc:call(A, erlang, nodes, []))),
        ?assert(lists:member(A, erpc:call(B, erlang, nodes, [])))
    after
        terrain_test_peers:stop(Peers)
    end.

the_start_waits_for_global_to_know_the_run_not_for_global_sync() ->
    [{doc, "Nodes a and b, and x whose global never synchronises (started with -connect_all false, its "
           "global_name_server suspended) connected to a: global:sync/0 on a would wait for x for ever, as it "
           "did at 256 VMs for a peer its global knew. A run on a and b starts (every node's global knows the "
           "other) and global:sync/0 on a is named as waiting for no node of the run; a run on a and x fails "
           "at the connect deadline, naming a and the node its global does not know (x)."}].
the_start_waits_for_global_to_know_the_run_not_for_global_sync(Config) ->
    Prefix = ?config(prefix, Config),
    [PA, PB] = Peers = terrain_test_peers:start([list_to_atom(Prefix ++ "g" ++ [C]) || C <- "ab"], []),
    [PX] = terrain_test_peers:start([list_to_atom(Prefix ++ "gx")], [], fun(_) -> ["-connect_all", "false"] end),
    [A, B, X] = [terrain_test_peers:node_of(P) || P <- [PA, PB, PX]],
    try
        ok = sys:suspend({global_name_server, X}),
        true = erpc:call(A, net_kernel, connect_node, [X]),
        %% a's global: x connected, never synced nor known, so a's global:sync/0 would wait
        ?assertMatch({ok, #{unknown := [X], unsynced := [X]}},
                     erpc:call(A, terrain_bench_run, global_state, [[A, X]])),
        {ok, C} = terrain_bench:validate_config([{duration, 1}, {concurrent, 1}, {operations, [{noop, 1}]}]),
        Dir = ?config(priv_dir, Config),
        Self = self(),
        Progress = fun(Line) -> Self ! {progress, lists:flatten(Line)} end,
        {ok, #{nodes := Run}} = terrain_bench:run([A, B], C, filename:join(Dir, "global_ab"), #{progress => Progress}),
        ?assertEqual([atom_to_binary(A), atom_to_binary(B)], Run),
        Lines = receive_progress(),
        ?assertMatch([_], [L || L <- Lines, string:find(L, "global in sync") =/= nomatch]),
        ?assertEqual([], [L || L <- Lines, string:find(L, "would still wait") =/= nomatch]),
        Failed = terrain_bench:run([A, X], C, filename:join(Dir, "global_ax"), #{}),
        ?assertEqual({error, {bench, {global_not_in_sync, A, [X]}}}, Failed),
        Sentence = lists:flatten(terrain_bench:format_error(element(2, Failed))),
        ?assertNotEqual(nomatch, string:find(Sentence, atom_to_list(A) ++ " did not know " ++ atom_to_list(X)))
    after
        _ = catch sys:resume({global_name_server, X}),
        terrain_test_peers:stop([PX | Peers])
    end.

receive_progress() ->
    receive {progress, Line} -> [Line | receive_progress()] after 0 -> [] end.

think_time_paces_the_closed_loop() ->
    [{doc, "noop with a think time of mean 50 ms, 1 worker per node on 3 nodes, 2 s: each worker waits before "
           "every operation, so the cluster completes tens of operations (at most a few hundred: more would "
           "need 2 s to hold hundreds of waits of mean 50 ms), where the closed loop without think time "
           "completes hundreds of thousands; the noop's latency stays that of a noop."}].
think_time_paces_the_closed_loop(Config) ->
    Nodes = ?config(nodes, Config),
    Base = [{duration, 2}, {concurrent, 1}, {operations, [{noop, 1}]}],
    {ok, Think} = terrain_bench:validate_config([{mode, {think, 50}} | Base]),
    {ok, Closed} = terrain_bench:validate_config(Base),
    Dir = ?config(priv_dir, Config),
    {ok, #{operations := #{noop := #{count := Paced, latency_us := #{p50 := P50}}}}} =
        terrain_bench:run(Nodes, Think, filename:join(Dir, "think"), #{}),
    {ok, #{operations := #{noop := #{count := Unpaced}}}} =
        terrain_bench:run(Nodes, Closed, filename:join(Dir, "no_think"), #{}),
    ct:log("think 50 ms: ~b noops (p50 ~b us); closed: ~b", [Paced, P50, Unpaced]),
    ?assert(Paced >= 3, Paced),
    ?assert(Paced =< 3 * 2 * 1000 div 50 * 3, Paced),     % three times the expected 120
    ?assert(P50 < 1000, P50),
    ?assert(Unpaced > 100 * Paced, {Unpaced, Paced}),
    {ok, Json} = terrain_json:read_file(filename:join([Dir, "think", "summary.json"])),
    ?assertMatch(#{<<"config">> := #{<<"mode">> := #{<<"think_ms">> := 50}}}, Json).

a_target_killed_mid_run_shows_as_errors_and_the_run_goes_on() ->
    [{doc, "3 nodes and a fourth that is killed 2 s into a 4 s run of rpc, erpc, spawn and gen_server_call: "
           "the run finishes, the dead node is named in failed_instances, the others' operations to it are "
           "errors by kind (noconnection, nodedown), and the rows the dead node wrote before it died are in "
           "its files and in the summary's counts."}].
a_target_killed_mid_run_shows_as_errors_and_the_run_goes_on(Config) ->
    [Victim] = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "victim")], []),
    VictimNode = terrain_test_peers:node_of(Victim),
    Nodes = ?config(nodes, Config) ++ [VictimNode],
    {ok, C} = terrain_bench:validate_config([{duration, 4}, {concurrent, 2}, {timeout, 1000},
                                             {operations, [{rpc, 1}, {erpc, 1}, {spawn, 1}, {gen_server_call, 1}]}]),
    Out = filename:join(?config(priv_dir, Config), "killed"),
    Self = self(),
    Killer = spawn_link(fun() ->
                                receive go -> ok end,
                                Rows = filename:join([Out, atom_to_list(VictimNode), "summary.csv"]),
                                %% killed once it has written two intervals
                                terrain_test_peers:wait_until(fun() -> length(read_lines(Rows)) >= 3 end, 20000),
                                terrain_test_peers:stop([Victim]),
                                Self ! killed
                        end),
    Killer ! go,
    {ok, Summary} = terrain_bench:run(Nodes, C, Out, #{}),
    receive killed -> ok after 1000 -> ct:fail(victim_not_killed) end,
    #{failed_instances := Failed, operations := Operations} = Summary,
    ?assertMatch([#{node := _}], Failed),
    [#{node := FailedNode}] = Failed,
    ?assertEqual(atom_to_binary(VictimNode), FailedNode),
    AllErrors = lists:foldl(fun(#{errors := E}, Acc) -> maps:merge_with(fun(_, A, B) -> A + B end, Acc, E) end,
                            #{}, maps:values(Operations)),
    ct:log("errors by kind: ~p", [AllErrors]),
    ?assert(maps:size(AllErrors) > 0),
    ?assertEqual([], maps:keys(AllErrors) -- [<<"noconnection">>, <<"nodedown">>, <<"timeout">>, <<"noproc">>]),
    VictimCount = lists:sum([maps:get(count, maps:get(atom_to_binary(VictimNode), PerNode))
                             || #{per_node := PerNode} <- maps:values(Operations)]),
    ?assert(VictimCount > 0),
    ?assertEqual(VictimCount,
                 lists:sum([binary_to_integer(maps:get(<<"successful">>, R))
                            || R <- csv_rows(filename:join([Out, atom_to_list(VictimNode), "summary.csv"]))])).

%%--------------------------------------------------------------------

atom_counts(Nodes) ->
    [erpc:call(N, erlang, system_info, [atom_count], 5000) || N <- Nodes].

read_lines(File) ->
    case file:read_file(File) of
        {ok, Bin} -> binary:split(Bin, <<"\n">>, [global, trim_all]);
        {error, _} -> []
    end.

csv_rows(File) ->
    [Header | Rows] = read_lines(File),
    Columns = binary:split(Header, <<",">>, [global]),
    [maps:from_list(lists:zip(Columns, binary:split(R, <<",">>, [global]))) || R <- Rows].
