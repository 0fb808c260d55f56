%% The live topology on peer nodes: a node that joins is placed into the tree on
%% every node with one version; one that stops is removed after the grace period; a
%% subscriber sees both changes with their versions; a node cut off and back catches up.
-module(terrain_live_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([join_and_leave_reach_every_node_in_one_order/0, join_and_leave_reach_every_node_in_one_order/1,
         a_partitioned_node_catches_up_when_it_reconnects/0, a_partitioned_node_catches_up_when_it_reconnects/1,
         subscribe_without_live_is_refused/0, subscribe_without_live_is_refused/1,
         a_healed_partition_with_joins_on_both_sides_converges/0,
         a_healed_partition_with_joins_on_both_sides_converges/1,
         the_sequencers_death_right_after_an_acknowledged_join_loses_nothing/0,
         the_sequencers_death_right_after_an_acknowledged_join_loses_nothing/1,
         a_successor_whose_live_server_restarted_takes_over_without_divergence/0,
         a_successor_whose_live_server_restarted_takes_over_without_divergence/1,
         a_leave_keeps_the_name_of_a_rack_left_with_one_node/0,
         a_leave_keeps_the_name_of_a_rack_left_with_one_node/1,
         changes_travel_as_deltas_and_a_node_that_missed_one_fetches_the_tree_once/0,
         changes_travel_as_deltas_and_a_node_that_missed_one_fetches_the_tree_once/1,
         a_hung_sequencer_that_resumes_rejoins_at_its_place/0,
         a_hung_sequencer_that_resumes_rejoins_at_its_place/1,
         a_node_that_joins_through_a_node_killed_at_once_gets_the_tree/0,
         a_node_that_joins_through_a_node_killed_at_once_gets_the_tree/1,
         nodes_that_join_at_once_are_measured_at_once_and_no_pair_twice/0,
         nodes_that_join_at_once_are_measured_at_once_and_no_pair_twice/1,
         a_node_of_the_starting_tree_that_comes_up_late_is_not_removed/0,
         a_node_of_the_starting_tree_that_comes_up_late_is_not_removed/1,
         a_new_node_that_sees_part_of_the_cluster_numbers_no_change/0,
         a_new_node_that_sees_part_of_the_cluster_numbers_no_change/1,
         a_follower_that_missed_the_last_change_catches_up_without_a_later_one/0,
         a_follower_that_missed_the_last_change_catches_up_without_a_later_one/1,
         a_join_measures_no_node_that_is_not_a_member/0,
         a_join_measures_no_node_that_is_not_a_member/1]).

suite() -> [{timetrap, {minutes, 2}}].

all() -> [subscribe_without_live_is_refused, join_and_leave_reach_every_node_in_one_order,
          a_partitioned_node_catches_up_when_it_reconnects, a_healed_partition_with_joins_on_both_sides_converges,
          the_sequencers_death_right_after_an_acknowledged_join_loses_nothing,
          a_successor_whose_live_server_restarted_takes_over_without_divergence,
          a_leave_keeps_the_name_of_a_rack_left_with_one_node,
          changes_travel_as_deltas_and_a_node_that_missed_one_fetches_the_tree_once,
          a_hung_sequencer_that_resumes_rejoins_at_its_place,
          a_node_that_joins_through_a_node_killed_at_once_gets_the_tree,
          nodes_that_join_at_once_are_measured_at_once_and_no_pair_twice,
          a_node_of_the_starting_tree_that_comes_up_late_is_not_removed,
          a_new_node_that_sees_part_of_the_cluster_numbers_no_change,
          a_follower_that_missed_the_last_change_catches_up_without_a_later_one,
          a_join_measures_no_node_that_is_not_a_member].

init_per_testcase(Case, Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    Prefix = terrain_test_peers:unique_prefix(Case),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    [{prefix, Prefix}, {host, Host} | Config].

end_per_testcase(_Case, Config) ->
    terrain_test_peers:stop(proplists:get_value(peers, Config, [])).

subscribe_without_live_is_refused() ->
    [{doc, "subscribe(topology, #{}) on a node without the live key is {error, not_live} with a sentence"}].
subscribe_without_live_is_refused(_Config) ->
    {ok, _} = application:ensure_all_started(terrain),
    ?assertEqual(disabled, terrain:live_status()),
    {error, not_live} = terrain:subscribe(topology, #{}),
    ?assertNotEqual(nomatch, string:find(lists:flatten(terrain:format_error(not_live)), "live")).

join_and_leave_reach_every_node_in_one_order() ->
    [{doc, "p1, p2 hold a tree; p3 joins: every node holds p3 at version 1; a subscriber on p2 gets the join; "
           "p3 stops: after the 1 s grace every node holds the tree without it at version 2; a process on p1 "
           "subscribed on p2 with #{pid => Pid} gets the same changes"}].
join_and_leave_reach_every_node_in_one_order(Config) ->
    Prefix = ?config(prefix, Config),
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    Tree = {network, dc, #{height => 100000}, [{node, Full("p1")}, {node, Full("p2")}]},
    Env = [{live, #{grace => 1000, remeasure => false}}, {topology, Tree}],
    [P1, P2] = Two = terrain_test_peers:start([list_to_atom(Prefix ++ "p1"), list_to_atom(Prefix ++ "p2")], Env),
    true = terrain_test_peers:call(P1, net_kernel, connect_node, [terrain_test_peers:node_of(P2)]),
    Collector = terrain_test_peers:call(P2, erlang, spawn, [fun() -> collect([]) end]),
    {ok, _} = terrain_test_peers:call(P2, erlang, apply, [fun() -> subscribe_for(Collector) end, []]),
    %% a subscriber on another node, subscribed by someone else (#{pid => Pid}: how a dashboard watches)
    Remote = terrain_test_peers:call(P1, erlang, spawn, [fun() -> collect([]) end]),
    {ok, _} = terrain_test_peers:call(P2, terrain, subscribe, [topology, #{pid => Remote}]),
    {error, {bad_option, pid, not_a_pid}} = terrain_test_peers:call(P2, terrain, subscribe, [topology, #{pid => not_a_pid}]),
    [P3] = terrain_test_peers:start([list_to_atom(Prefix ++ "p3")], Env),
    Peers = Two ++ [P3],
    true = terrain_test_peers:call(P3, net_kernel, connect_node, [terrain_test_peers:node_of(P1)]),
    N3 = terrain_test_peers:node_of(P3),
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Peers, 1, fun(Ns) -> lists:member(N3, Ns) end) end,
                                       15000, "p3 in every tree at version 1"),
    Joined = terrain_test_peers:call(P1, terrain, topology, []),
    ct:pal("after the join, on every node: version 1~n~p~nstatus on p1: ~p",
           [Joined, terrain_test_peers:call(P1, terrain, live_status, [])]),
    terrain_test_peers:stop([P3]),
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Two, 2, fun(Ns) -> not lists:member(N3, Ns) end) end,
                                       15000, "p3 gone from every tree at version 2"),
    ct:pal("after the leave: ~p", [terrain_test_peers:call(P1, terrain, topology, [])]),
    Changes = terrain_test_peers:call(P2, erlang, apply, [fun() -> Collector ! {get, self()}, receive {changes, C} -> C after 5000 -> timeout end end, []]),
    ct:pal("changes seen by the subscriber on p2: ~p", [Changes]),
    ?assertMatch([{1, {join, N3, _, _}}, {2, {leave, N3}}], Changes),
    RemoteChanges = terrain_test_peers:call(P1, erlang, apply, [fun() -> Remote ! {get, self()}, receive {changes, C} -> C after 5000 -> timeout end end, []]),
    ?assertEqual(Changes, RemoteChanges),
    [{peers, Two}].

a_partitioned_node_catches_up_when_it_reconnects() ->
    [{doc, "p3 is cut off from p1 and p2 for longer than the grace period: each side removes the other and "
           "moves on its own versions; when p3 reconnects, all three hold one tree with all three nodes at one "
           "version, higher than either side's"}].
a_partitioned_node_catches_up_when_it_reconnects(Config) ->
    Prefix = ?config(prefix, Config),
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    [N1, N2, N3] = [Full(S) || S <- ["p1", "p2", "p3"]],
    Tree = {network, dc, #{height => 100000}, [{node, N1}, {node, N2}, {node, N3}]},
    Env = [{live, #{grace => 1000, remeasure => false}}, {topology, Tree}],
    [P1, _P2, P3] = Peers = terrain_test_peers:start([list_to_atom(Prefix ++ S) || S <- ["p1", "p2", "p3"]], Env),
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Peers, 0, fun(Ns) -> length(Ns) =:= 3 end) andalso
                                                    lists:all(fun(P) -> length(maps:get(members, terrain_test_peers:call(P, terrain, live_status, []))) =:= 3 end, Peers)
                                       end, 15000, "three members, one tree of three at version 0"),
    %% the cut: p3 drops both connections and refuses new ones (global's partition
    %% prevention is off on the peers)
    ok = cut([P3], [N1, N2]),
    Side12 = fun() -> same_everywhere(Peers -- [P3], 1, fun(Ns) -> lists:sort(Ns) =:= [N1, N2] end) end,
    Side3 = fun() -> case {terrain_test_peers:call(P3, terrain, live_status, []), terrain_test_peers:call(P3, terrain, topology, [])} of
                         {#{version := V}, T} -> V >= 1 andalso leaves(T) =:= [N3];
                         _ -> false
                     end end,
    ok = terrain_test_peers:wait_until(fun() -> Side12() andalso Side3() end, 15000, "each side without the other"),
    ct:pal("during the partition: p1 ~p ~p~np3 ~p ~p",
           [terrain_test_peers:call(P1, terrain, live_status, []), terrain_test_peers:call(P1, terrain, topology, []),
            terrain_test_peers:call(P3, terrain, live_status, []), terrain_test_peers:call(P3, terrain, topology, [])]),
    ok = heal([P3], [N1, N2]),
    %% the sequencers of both sides try again by themselves: this attempt may race theirs
    _ = terrain_test_peers:call(P3, net_kernel, connect_node, [N1]),
    ok = terrain_test_peers:wait_until(
           fun() ->
                   Versions = [maps:get(version, terrain_test_peers:call(P, terrain, live_status, [])) || P <- Peers],
                   length(lists:usort(Versions)) =:= 1 andalso hd(Versions) >= 2 andalso
                       lists:all(fun(P) -> lists:sort(leaves(terrain_test_peers:call(P, terrain, topology, []))) =:= [N1, N2, N3] end,
                                 Peers)
           end, 15000, "one tree of three again at one version"),
    ct:pal("after the heal: ~p~n~p", [[terrain_test_peers:call(P, terrain, live_status, []) || P <- Peers],
                                       terrain_test_peers:call(P1, terrain, topology, [])]),
    [{peers, Peers}].

a_healed_partition_with_joins_on_both_sides_converges() ->
    [{doc, "Sites sa (a1, a2) and sb (b1, b2); a partition between them, longer than the grace period; a3 joins "
           "side a, b3 side b; the partition heals with no call from the test: within grace + 2 s all six nodes "
           "are connected again and hold one version, higher than either side's, and one tree (one digest) with "
           "all six nodes, a1..a3 under sa and b1..b3 under sb"}].
a_healed_partition_with_joins_on_both_sides_converges(Config) ->
    Prefix = ?config(prefix, Config),
    Grace = 1000,
    Name = fun(S) -> list_to_atom(Prefix ++ S) end,
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    [A1, A2, A3, B1, B2, B3] = [Full(S) || S <- ["a1", "a2", "a3", "b1", "b2", "b3"]],
    Tree = {network, dc, #{height => 100000}, [{network, sa, #{height => 1000}, [{node, A1}, {node, A2}]},
                                               {network, sb, #{height => 1000}, [{node, B1}, {node, B2}]}]},
    Live = {live, #{grace => Grace, remeasure => false}},
    Four = terrain_test_peers:start([Name(S) || S <- ["a1", "a2", "b1", "b2"]], [Live, {topology, Tree}]),
    [PA1, PA2, PB1, PB2] = Four,
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Four, 0, fun(Ns) -> length(Ns) =:= 4 end) andalso
                                                    lists:all(fun(P) -> length(members(P)) =:= 4 end, Four)
                                       end, 15000, "four members, one tree of four at version 0"),
    ok = cut([PA1, PA2], [B1, B2, B3]),
    ok = cut([PB1, PB2], [A1, A2, A3]),
    %% a joining node starts without a tree and connects to one node of its side
    [PA3, PB3] = Joined = terrain_test_peers:start([Name("a3"), Name("b3")], [Live]),
    ok = cut([PA3], [B1, B2, B3]),
    ok = cut([PB3], [A1, A2, A3]),
    true = terrain_test_peers:call(PA3, net_kernel, connect_node, [A1]),
    true = terrain_test_peers:call(PB3, net_kernel, connect_node, [B1]),
    SideA = [PA1, PA2, PA3],
    SideB = [PB1, PB2, PB3],
    Side = fun(Ps, Ns) -> fun() -> one_state(Ps) andalso lists:sort(leaves(topology(hd(Ps)))) =:= Ns end end,
    ok = terrain_test_peers:wait_until(fun() -> (Side(SideA, [A1, A2, A3]))() andalso (Side(SideB, [B1, B2, B3]))() end,
                                       15000, "each side alone, with its own join"),
    [VA, VB] = [maps:get(version, status(P)) || P <- [PA1, PB1]],
    ct:pal("during the partition: side a at version ~b~n~p~nside b at version ~b~n~p",
           [VA, topology(PA1), VB, topology(PB1)]),
    All = Four ++ Joined,
    T0 = erlang:monotonic_time(millisecond),
    [ok = heal([P], [A1, A2, A3, B1, B2, B3]) || P <- All],
    ok = terrain_test_peers:wait_until(
           fun() ->
                   one_state(All) andalso maps:get(version, status(PA1)) > max(VA, VB) andalso
                       places(topology(PA1)) =:= lists:sort([{A, sa} || A <- [A1, A2, A3]] ++
                                                                [{B, sb} || B <- [B1, B2, B3]])
           end, Grace + 2000, "one version and one tree of six, grace + 2 s after the heal"),
    ct:pal("~b ms after the heal, on every node: ~p~n~p",
           [erlang:monotonic_time(millisecond) - T0, status(PA1), topology(PA1)]),
    [{peers, All}].

the_sequencers_death_right_after_an_acknowledged_join_loses_nothing() ->
    [{doc, "p1 (the sequencer), p2, p3; p4 joins; the moment a subscriber on p3 sees the join acknowledged, "
           "p1's VM is killed with kill -9: within grace + 2 s p2, p3, p4 hold one version and one tree (one "
           "digest) without p1, with p4 at the place the acknowledgement named"}].
the_sequencers_death_right_after_an_acknowledged_join_loses_nothing(Config) ->
    {[P1, P2, P3], Grace} = three(Config),
    Collector = terrain_test_peers:call(P3, erlang, spawn, [fun() -> collect([]) end]),
    {ok, _} = terrain_test_peers:call(P3, erlang, apply, [fun() -> subscribe_for(Collector) end, []]),
    N4 = terrain_test_peers:node_of(P4 = hd(terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "p4")],
                                                                     [{live, #{grace => Grace, remeasure => false}}]))),
    OsPid = terrain_test_peers:call(P1, os, getpid, []),
    true = terrain_test_peers:call(P4, net_kernel, connect_node, [terrain_test_peers:node_of(P1)]),
    Acked = fun() -> [X || {_, {join, N, _, _}} = X <- changes(P3, Collector), N =:= N4] end,
    ok = terrain_test_peers:wait_until(fun() -> Acked() =/= [] end, 15000, "the join acknowledged on p3"),
    _ = os:cmd("kill -9 " ++ OsPid),
    [{V, {join, N4, Siblings, _}}] = Acked(),
    ct:pal("acknowledged on p3 at version ~b: ~p joins next to ~p; kill -9 of p1 (OS pid ~s)", [V, N4, Siblings, OsPid]),
    Survivors = [P2, P3, P4],
    N1 = terrain_test_peers:node_of(P1),
    ok = terrain_test_peers:wait_until(
           fun() ->
                   one_state(Survivors) andalso maps:get(version, status(P2)) > V andalso
                       lists:sort(leaves(topology(P2))) =:= lists:sort([terrain_test_peers:node_of(P) || P <- Survivors])
           end, Grace + 2000, "one version and one tree without p1, grace + 2 s after the kill"),
    ?assertEqual(Siblings -- [N1], place_of(N4, topology(P2)) -- [N1]),
    ct:pal("after: ~p~n~p", [status(P2), topology(P2)]),
    [{peers, Survivors ++ [P1]}].

a_successor_whose_live_server_restarted_takes_over_without_divergence() ->
    [{doc, "p1 (the sequencer), p2, p3 at version 0; p4 joins (version 1); p1's VM hangs (SIGSTOP), p2's live "
           "server is killed and restarted by its supervisor (the hung sequencer cannot answer it), then p1's VM "
           "is killed: p2 takes over, and within grace + 2 s p2, p3, p4 hold one version (above 1) and one tree "
           "without p1"}].
a_successor_whose_live_server_restarted_takes_over_without_divergence(Config) ->
    {[P1, P2, P3], Grace} = three(Config),
    [_, _, _, P4] = join_fourth(Config, [P1, P2, P3], Grace),
    OsPid = terrain_test_peers:call(P1, os, getpid, []),
    _ = os:cmd("kill -STOP " ++ OsPid),
    Old = terrain_test_peers:call(P2, erlang, whereis, [terrain_live]),
    true = terrain_test_peers:call(P2, erlang, exit, [Old, kill]),
    ok = terrain_test_peers:wait_until(fun() -> is_pid(New = terrain_test_peers:call(P2, erlang, whereis, [terrain_live]))
                                                    andalso New =/= Old end, 5000, "p2's live server restarted"),
    ct:pal("p2 after its live server's restart: ~p", [status(P2)]),
    _ = os:cmd("kill -9 " ++ OsPid),
    Survivors = [P2, P3, P4],
    ok = terrain_test_peers:wait_until(
           fun() ->
                   one_state(Survivors) andalso maps:get(version, status(P2)) > 1 andalso
                       length(leaves(topology(P2))) =:= 3
           end, Grace + 2000, "one version and one tree of three, grace + 2 s after the kill"),
    ct:pal("after: ~p~n~p", [status(P2), topology(P2)]),
    [{peers, Survivors ++ [P1]}].

a_leave_keeps_the_name_of_a_rack_left_with_one_node() ->
    [{doc, "Racks r1 (p1, p2) and r2 (p3, p4); p4 stops: after the grace period every node's tree still has "
           "rack r2, with p3 alone in it"}].
a_leave_keeps_the_name_of_a_rack_left_with_one_node(Config) ->
    Prefix = ?config(prefix, Config),
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    [N1, N2, N3, N4] = [Full(S) || S <- ["p1", "p2", "p3", "p4"]],
    Tree = {network, dc, #{height => 100000}, [{network, r1, #{height => 1000}, [{node, N1}, {node, N2}]},
                                               {network, r2, #{height => 1000}, [{node, N3}, {node, N4}]}]},
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ S) || S <- ["p1", "p2", "p3", "p4"]],
                                     [{live, #{grace => 1000, remeasure => false}}, {topology, Tree}]),
    [P1, P2, P3, P4] = Peers,
    ok = terrain_test_peers:wait_until(fun() -> lists:all(fun(P) -> length(members(P)) =:= 4 end, Peers) end,
                                       15000, "four members"),
    terrain_test_peers:stop([P4]),
    Three = [P1, P2, P3],
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Three, 1, fun(Ns) -> length(Ns) =:= 3 end) end,
                                       15000, "p4 gone from every tree at version 1"),
    ct:pal("after the leave: ~p", [topology(P1)]),
    ?assertEqual({network, dc, #{height => 100000}, [{network, r1, #{height => 1000}, [{node, N1}, {node, N2}]},
                                                     {network, r2, #{height => 1000}, [{node, N3}]}]},
                 topology(P2)),
    [{peers, Three}].

changes_travel_as_deltas_and_a_node_that_missed_one_fetches_the_tree_once() ->
    [{doc, "p1 (the sequencer), p2, p3; p3's live server is traced. p4 joins: p3 receives the join as a delta "
           "(no whole tree); p3 is then sent a change two versions ahead (as if it had missed one): it asks the "
           "sequencer for the whole tree once, and holds the sequencer's version and tree"}].
changes_travel_as_deltas_and_a_node_that_missed_one_fetches_the_tree_once(Config) ->
    {[P1, P2, P3], Grace} = three(Config),
    Tracer = terrain_test_peers:call(P3, erlang, apply, [fun trace_live/0, []]),
    Four = join_fourth(Config, [P1, P2, P3], Grace),
    Seen = traced(P3, Tracer),
    ct:pal("p3's live server received: ~p", [Seen]),
    %% (the sequencer's beats, version and digest every second, carry no tree)
    ?assertMatch([{in, terrain_live_delta, 1}],
                 [X || {in, K, _} = X <- Seen, K =/= terrain_live_state, K =/= terrain_live_beat]),
    %% a change two versions ahead, from the sequencer's server: p3 has missed version 2
    Sequencer = terrain_test_peers:call(P1, erlang, whereis, [terrain_live]),
    Tree = topology(P1),
    terrain_test_peers:call(P3, erlang, send, [terrain_live, {terrain_live_delta, Sequencer, 3, 0, {sync, 2}, same, 0}]),
    terrain_test_peers:call(P3, erlang, send, [terrain_live, {terrain_live_delta, Sequencer, 4, 0, {sync, 3}, same, 0}]),
    ok = terrain_test_peers:wait_until(fun() -> lists:member({out, terrain_live_fetch, none}, traced(P3, Tracer)) andalso
                                                    maps:get(version, status(P3)) =:= maps:get(version, status(P1))
                                       end, 5000, "p3 asked for the whole tree and took it"),
    Fetches = [X || {out, terrain_live_fetch, _} = X <- traced(P3, Tracer)],
    ct:pal("p3 after the gap: ~p; its fetches ~p", [status(P3), Fetches]),
    ?assertEqual(1, length(Fetches)),
    ?assertEqual(Tree, topology(P3)),
    ?assertEqual(maps:get(version, status(P1)), maps:get(version, status(P3))),
    [{peers, Four}].

a_hung_sequencer_that_resumes_rejoins_at_its_place() ->
    [{doc, "Racks r1 (p1, p2) and r2 (p3), net tick time 2 s: p1, the sequencer, hangs (SIGSTOP); p2 takes over "
           "and removes p1 after the grace period; p1 resumes (SIGCONT) and, with nobody connecting it by hand, "
           "is back in every tree in rack r1 at one version above p2's"}].
a_hung_sequencer_that_resumes_rejoins_at_its_place(Config) ->
    Prefix = ?config(prefix, Config),
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    [N1, N2, N3] = [Full(S) || S <- ["p1", "p2", "p3"]],
    Tree = {network, dc, #{height => 100000}, [{network, r1, #{height => 1000}, [{node, N1}, {node, N2}]},
                                               {network, r2, #{height => 1000}, [{node, N3}]}]},
    [P1, P2, P3] = Peers = terrain_test_peers:start([list_to_atom(Prefix ++ S) || S <- ["p1", "p2", "p3"]],
                                                    [{live, #{grace => 1000, remeasure => false}}, {topology, Tree}],
                                                    fun(_) -> ["-kernel", "net_ticktime", "2"] end),
    ok = terrain_test_peers:wait_until(fun() -> lists:all(fun(P) -> length(members(P)) =:= 3 end, Peers) end,
                                       15000, "three members"),
    Collectors = [begin
                      C = terrain_test_peers:call(P, erlang, spawn, [fun() -> collect([]) end]),
                      {ok, _} = terrain_test_peers:call(P, erlang, apply, [fun() -> subscribe_for(C) end, []]),
                      {P, C}
                  end || P <- Peers],
    OsPid = terrain_test_peers:call(P1, os, getpid, []),
    _ = os:cmd("kill -STOP " ++ OsPid),
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere([P2, P3], 1, fun(Ns) -> length(Ns) =:= 2 end) end,
                                       15000, "p1 gone from p2's and p3's trees"),
    _ = os:cmd("kill -CONT " ++ OsPid),
    try terrain_test_peers:wait_until(
          fun() -> one_state(Peers) andalso maps:get(version, status(P2)) > 1 andalso
                       sorted(topology(P2)) =:= sorted(Tree)
          end, 15000, "p1 back in rack r1 everywhere at one version")
    catch error:{timeout_waiting_for, _} = Timeout ->
        %% what each node holds and took (a failure shows where p1's place was lost)
        [ct:pal("~p: ~p~n~p~nchanges: ~p", [terrain_test_peers:node_of(P), status(P), topology(P), changes(P, C)])
         || {P, C} <- Collectors],
        error(Timeout)
    end,
    ct:pal("after SIGCONT: ~p~n~p", [status(P2), topology(P2)]),
    [{peers, Peers}].

a_join_measures_no_node_that_is_not_a_member() ->
    [{doc, "Racks r1 (p1, p2) and r2 (p3, in the starting tree but not up: no member); p4 joins: it is placed "
           "at version 1 on every node, and the round trips measured from it (traced on p4) go to p1 and p2 "
           "only, never to p3 (a round trip across a partition waits out its deadline, 2 s a try: joins during "
           "a partition took 4.5 s in the chaos run)"}].
a_join_measures_no_node_that_is_not_a_member(Config) ->
    Prefix = ?config(prefix, Config),
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    [N1, N2, N3, N4] = [Full(S) || S <- ["p1", "p2", "p3", "p4"]],
    Tree = {network, dc, #{height => 100000}, [{network, r1, #{height => 1000}, [{node, N1}, {node, N2}]},
                                               {network, r2, #{height => 1000}, [{node, N3}]}]},
    Env = [{live, #{grace => 1000, remeasure => false}}],
    Two = terrain_test_peers:start([list_to_atom(Prefix ++ S) || S <- ["p1", "p2"]], [{topology, Tree} | Env]),
    ok = terrain_test_peers:wait_until(fun() -> lists:all(fun(P) -> length(members(P)) =:= 2 end, Two) end,
                                       15000, "two members"),
    [P4] = terrain_test_peers:start([list_to_atom(Prefix ++ "p4")], Env),
    Peers = Two ++ [P4],
    Tracer = terrain_test_peers:call(P4, erlang, apply, [fun trace_round_trips/0, []]),
    true = terrain_test_peers:call(P4, net_kernel, connect_node, [N1]),
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Peers, 1, fun(Ns) -> lists:member(N4, Ns) end) end,
                                       15000, "p4 in every tree at version 1"),
    Measured = traced(P4, Tracer),
    ct:pal("round trips measured from p4 to: ~p~ntree: ~p", [Measured, topology(P4)]),
    ?assertNotEqual([], Measured),
    ?assertEqual([], lists:usort(Measured) -- [N1, N2]),
    [{peers, Peers}].

%% A tree with every network's children in term order.
sorted({network, Name, Opts, Children}) -> {network, Name, Opts, lists:sort([sorted(C) || C <- Children])};
sorted(Leaf) -> Leaf.

%% On a peer: a process that traces the messages terrain_live receives and sends
%% (their first element, and the version where there is one).
trace_live() ->
    Pid = spawn(fun() -> receive go -> trace_loop([]) end end),
    1 = erlang:trace(whereis(terrain_live), true, [send, 'receive', {tracer, Pid}]),
    Pid ! go,
    Pid.

trace_loop(Acc) ->
    receive
        {trace, _, 'receive', Msg} -> trace_loop(note(in, Msg, Acc));
        {trace, _, send, Msg, _To} -> trace_loop(note(out, Msg, Acc));
        {get, From} -> From ! {traced, lists:reverse(Acc)}, trace_loop(Acc);
        _ -> trace_loop(Acc)
    end.

note(Dir, Msg, Acc) when is_tuple(Msg), tuple_size(Msg) > 2, is_atom(element(1, Msg)) ->
    case atom_to_list(element(1, Msg)) of
        "terrain_live_delta" -> [{Dir, terrain_live_delta, element(3, Msg)} | Acc];
        "terrain_live" ++ _ -> [{Dir, element(1, Msg), element(2, Msg)} | Acc];
        _ -> Acc
    end;
note(Dir, {terrain_live_fetch, _} = Msg, Acc) ->
    [{Dir, element(1, Msg), none} | Acc];
note(_Dir, _Msg, Acc) ->
    Acc.

traced(P, Tracer) ->
    terrain_test_peers:call(P, erlang, apply, [fun() -> Tracer ! {get, self()},
                                                        receive {traced, T} -> T after 5000 -> [] end end, []]).

a_node_that_joins_through_a_node_killed_at_once_gets_the_tree() ->
    [{doc, "p1 (the sequencer), p2, p3; p4, started with -connect_all false (global makes no mesh: the one "
           "connection stands for a mesh not made yet), connects to p3 only, and p3's VM is killed with kill -9 "
           "the moment the connection is up: within grace + 2 s p1, p2, p4 hold one version and one tree of "
           "p1, p2, p4 (p4 placed, not left without a tree)"}].
a_node_that_joins_through_a_node_killed_at_once_gets_the_tree(Config) ->
    {[P1, P2, P3], Grace} = three(Config),
    [P4] = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "p4")],
                                    [{live, #{grace => Grace, remeasure => false}}],
                                    fun(_) -> ["-connect_all", "false"] end),
    OsPid = terrain_test_peers:call(P3, os, getpid, []),
    true = terrain_test_peers:call(P4, net_kernel, connect_node, [terrain_test_peers:node_of(P3)]),
    _ = os:cmd("kill -9 " ++ OsPid),
    Survivors = [P1, P2, P4],
    Nodes = lists:sort([terrain_test_peers:node_of(P) || P <- Survivors]),
    ok = terrain_test_peers:wait_until(
           fun() -> one_state(Survivors) andalso lists:sort(leaves(topology(P4))) =:= Nodes end,
           Grace + 2000, "one version and one tree of p1, p2, p4, grace + 2 s after the kill"),
    ct:pal("after: ~p~n~p", [status(P4), topology(P4)]),
    [{peers, Survivors ++ [P3]}].

nodes_that_join_at_once_are_measured_at_once_and_no_pair_twice() ->
    [{doc, "p1 (the sequencer), p2, p3; p1's live server is suspended while p4 and p5 connect and become members "
           "of the live group, then resumed: each new node is measured against the tree of version 0 (neither "
           "waits for the other's placement: p1 receives an insertion of each computed on a tree without the "
           "other), no pair is measured twice (the insertion computed again on the tree with the first takes the "
           "round trips it measured: calls of round_trip/2 traced on p4 and p5), and every node holds p4 and p5 "
           "at version 2"}].
nodes_that_join_at_once_are_measured_at_once_and_no_pair_twice(Config) ->
    {[P1 | _] = Three, Grace} = three(Config),
    Holder = terrain_test_peers:call(P1, erlang, apply, [fun hold_live/0, []]),
    New = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ S) || S <- ["p4", "p5"]],
                                   [{live, #{grace => Grace, remeasure => false}}]),
    NewNodes = [terrain_test_peers:node_of(P) || P <- New],
    Tracers = [{terrain_test_peers:node_of(P), P,
                terrain_test_peers:call(P, erlang, apply, [fun trace_round_trips/0, []])}
               || P <- New],
    Inserted = terrain_test_peers:call(P1, erlang, apply, [fun trace_inserted/0, []]),
    [true = terrain_test_peers:call(P, net_kernel, connect_node, [terrain_test_peers:node_of(P1)]) || P <- New],
    ok = terrain_test_peers:wait_until(
           fun() -> NewNodes -- [node(Pid) || Pid <- terrain_test_peers:call(P1, pg, get_members,
                                                                              [terrain_live_scope, nodes])] =:= []
           end, 15000, "p4 and p5 members of the live group, seen on p1"),
    terrain_test_peers:call(P1, erlang, send, [Holder, resume]),
    Five = Three ++ New,
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Five, 2, fun(Ns) -> length(Ns) =:= 5 end) end,
                                       15000, "p4 and p5 in every tree at version 2"),
    Results = traced(P1, Inserted),
    Calls = [{N, traced(P, T)} || {N, P, T} <- Tracers],
    ct:pal("insertions received by p1 (node, nodes of the tree it made): ~p~nround trips measured: ~p",
           [Results, Calls]),
    [?assert(lists:any(fun({N, Nodes}) -> N =:= Node andalso not lists:member(Other, Nodes) end, Results))
     || Node <- NewNodes, Other <- NewNodes, Other =/= Node],
    [?assertEqual(lists:usort(Bs), lists:sort(Bs)) || {_, Bs} <- Calls],
    [{peers, Five}].

%% On a peer: a process that holds its live server suspended until it gets `resume'.
hold_live() ->
    Live = whereis(terrain_live),
    Self = self(),
    Pid = spawn(fun() -> true = erlang:suspend_process(Live),
                         Self ! held,
                         receive resume -> true = erlang:resume_process(Live) end
                end),
    receive held -> Pid after 5000 -> error(not_held) end.

%% On a peer: a process that records the nodes round_trip/2 is called to from there.
trace_round_trips() ->
    Pid = spawn(fun() -> calls_loop([]) end),
    _ = erlang:trace_pattern({terrain_live, round_trip, 2}, true, [global]),
    _ = erlang:trace(new_processes, true, [call, {tracer, Pid}]),
    Pid.

calls_loop(Acc) ->
    receive
        {trace, _, call, {terrain_live, round_trip, [Other, _]}} -> calls_loop([Other | Acc]);
        {get, From} -> From ! {traced, lists:reverse(Acc)}, calls_loop(Acc);
        _ -> calls_loop(Acc)
    end.

%% On a peer: a process that records the insertions its live server receives: the new
%% node and the nodes of the tree computed.
trace_inserted() ->
    Pid = spawn(fun() -> receive go -> inserted_loop([]) end end),
    1 = erlang:trace(whereis(terrain_live), true, ['receive', {tracer, Pid}]),
    Pid ! go,
    Pid.

inserted_loop(Acc) ->
    receive
        {trace, _, 'receive', {inserted, _, Node, {ok, Tree, _}}} -> inserted_loop([{Node, leaves(Tree)} | Acc]);
        {get, From} -> From ! {traced, lists:reverse(Acc)}, inserted_loop(Acc);
        _ -> inserted_loop(Acc)
    end.

%%--------------------------------------------------------------------

%% p4 joins p1, p2, p3 (connecting to p1): every node at version 1 with four nodes.
a_node_of_the_starting_tree_that_comes_up_late_is_not_removed() ->
    [{doc, "p1 starts with the tree {p1, p2} and a 300 ms grace; p2 comes up 1.5 s later (a cluster that boots "
           "slowly): both hold the starting tree at version 0, p2 never removed and placed again; then p2 stops: "
           "after the grace it is removed (version 1), as a node that was seen"}].
a_node_of_the_starting_tree_that_comes_up_late_is_not_removed(Config) ->
    Prefix = ?config(prefix, Config),
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    Tree = {network, dc, #{height => 100000}, [{node, Full("p1")}, {node, Full("p2")}]},
    Env = [{live, #{grace => 300, remeasure => false}}, {topology, Tree}],
    [P1] = terrain_test_peers:start([list_to_atom(Prefix ++ "p1")], Env),
    ok = terrain_test_peers:wait_until(fun() -> members(P1) =:= [Full("p1")] end, 5000, "p1 alone in its group"),
    timer:sleep(1500),   % the delay is the test's subject: p2 comes up after five grace periods
    [P2] = terrain_test_peers:start([list_to_atom(Prefix ++ "p2")], Env),
    true = terrain_test_peers:call(P2, net_kernel, connect_node, [Full("p1")]),
    ok = terrain_test_peers:wait_until(fun() -> members(P1) =:= [Full("p1"), Full("p2")] end, 10000, "p2 a member"),
    timer:sleep(600),    % two grace periods more: a removal or a placement would show as a version
    ?assertEqual([{0, Tree}, {0, Tree}], [{maps:get(version, status(P)), topology(P)} || P <- [P1, P2]]),
    terrain_test_peers:stop([P2]),
    ok = terrain_test_peers:wait_until(fun() -> maps:get(version, status(P1)) =:= 1 end, 10000,
                                       "p2 removed after its grace"),
    ?assertEqual([Full("p1")], leaves(topology(P1))),
    [{peers, [P1]}].

a_new_node_that_sees_part_of_the_cluster_numbers_no_change() ->
    [{doc, "p1 (the sequencer), p2, p3 at version 0; p1's and p2's live servers are held (suspended: they neither "
           "connect to a new node nor place it); p25 (its name sorts between p2 and p3), started with -connect_all "
           "false, connects to p3 only and sees p3 and itself as members. It holds no tree, so it is no candidate "
           "for the sequencer: for two grace periods p3 stays at version 0 with the starting tree and p25 names p3 "
           "(the smallest member that holds a tree) its sequencer (it used to make itself the sequencer of that "
           "part and publish version 1 to p3 beside the real sequencer's numbering). Once p1 and p2 go on, every "
           "node holds one version and one tree with p25 placed"}].
a_new_node_that_sees_part_of_the_cluster_numbers_no_change(Config) ->
    {[P1, P2, P3] = Three, Grace} = three(Config),
    Start = topology(P3),
    Holders = [{P, terrain_test_peers:call(P, erlang, apply, [fun hold_live/0, []])} || P <- [P1, P2]],
    [P25] = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "p25")],
                                     [{live, #{grace => Grace, remeasure => false}}],
                                     fun(_) -> ["-connect_all", "false"] end),
    N25 = terrain_test_peers:node_of(P25),
    N3 = terrain_test_peers:node_of(P3),
    true = terrain_test_peers:call(P25, net_kernel, connect_node, [N3]),
    ok = terrain_test_peers:wait_until(fun() -> lists:member(N3, members(P25)) andalso
                                                    lists:member(N25, members(P3)) end,
                                       5000, "p25 and p3 members of each other's live group"),
    timer:sleep(2 * Grace),   % the window is the test's subject: a numbering of p25's would show within it
    Seen = {status(P25), status(P3)},
    ct:pal("p25 and p3 while p1 and p2 are held: ~p", [Seen]),
    [terrain_test_peers:call(P, erlang, send, [Holder, resume]) || {P, Holder} <- Holders],
    ?assertMatch({#{sequencer := N3}, #{version := 0}}, Seen),
    ?assertEqual(Start, topology(P3)),
    Four = Three ++ [P25],
    ok = terrain_test_peers:wait_until(
           fun() -> one_state(Four) andalso lists:sort(leaves(topology(P25))) =:=
                                                 lists:sort([terrain_test_peers:node_of(P) || P <- Four])
           end, 15000, "one version and one tree of p1, p2, p3, p25"),
    [{peers, Four}].

a_follower_that_missed_the_last_change_catches_up_without_a_later_one() ->
    [{doc, "p1 (the sequencer), p2, p3; p4 joins (version 1 everywhere); p3's live server is then set back to "
           "version 0 and the tree before the join, as if it had missed the join, and no change follows: within "
           "a few of the sequencer's beats p3 holds version 1 and p1's tree again (a follower used to notice a "
           "missed version only when a later change came)"}].
a_follower_that_missed_the_last_change_catches_up_without_a_later_one(Config) ->
    {[P1, _P2, P3] = Three, Grace} = three(Config),
    Before = topology(P3),
    Four = join_fourth(Config, Three, Grace),
    #{version := 1, digest := Digest} = status(P1),
    ok = terrain_test_peers:call(P3, erlang, apply,
                                 [fun() -> _ = sys:replace_state(terrain_live, fun(S) -> S#{version := 0,
                                                                                            tree := Before}
                                                                               end),
                                           ok
                                  end, []]),
    ?assertMatch(#{version := 0}, status(P3)),
    ok = terrain_test_peers:wait_until(fun() -> maps:with([version, digest], status(P3)) =:=
                                                    #{version => 1, digest => Digest}
                                       end, 5000, "p3 back at version 1 with p1's tree"),
    ?assertEqual(topology(P1), topology(P3)),
    [{peers, Four}].

join_fourth(Config, [P1 | _] = Three, Grace) ->
    [P4] = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "p4")],
                                    [{live, #{grace => Grace, remeasure => false}}]),
    true = terrain_test_peers:call(P4, net_kernel, connect_node, [terrain_test_peers:node_of(P1)]),
    Four = Three ++ [P4],
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Four, 1, fun(Ns) -> length(Ns) =:= 4 end) end,
                                       15000, "p4 in every tree at version 1"),
    Four.

%% p1, p2, p3 in one network, live with a 1 s grace, at version 0.
three(Config) ->
    Prefix = ?config(prefix, Config),
    Grace = 1000,
    Full = fun(S) -> list_to_atom(Prefix ++ S ++ "@" ++ ?config(host, Config)) end,
    Tree = {network, dc, #{height => 100000}, [{node, Full(S)} || S <- ["p1", "p2", "p3"]]},
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ S) || S <- ["p1", "p2", "p3"]],
                                     [{live, #{grace => Grace, remeasure => false}}, {topology, Tree}]),
    ok = terrain_test_peers:wait_until(fun() -> same_everywhere(Peers, 0, fun(Ns) -> length(Ns) =:= 3 end) andalso
                                                    lists:all(fun(P) -> length(members(P)) =:= 3 end, Peers)
                                       end, 15000, "three members, one tree of three at version 0"),
    {Peers, Grace}.

changes(P, Collector) ->
    terrain_test_peers:call(P, erlang, apply, [fun() -> Collector ! {get, self()},
                                                        receive {changes, C} -> C after 5000 -> [] end end, []]).

%% The other nodes of a node's lowest network, sorted.
place_of(Node, {network, _, _, Children}) ->
    case lists:member({node, Node}, Children) of
        true -> lists:sort([N || {node, N} <- Children, N =/= Node]);
        false -> lists:append([place_of(Node, C) || {network, _, _, _} = C <- Children])
    end.

%% A partition that distribution cannot mend by itself: the peers `Ps' drop their
%% connections to `Nodes' and refuse new ones both ways (each peer uses a cookie of its
%% own with them: the handshake fails in either direction). heal/2 puts the cookie back.
cut(Ps, Nodes) ->
    lists:foreach(fun(P) ->
                          [begin
                               %% a cookie no other peer uses with this one
                               Cookie = list_to_atom("cut_" ++ atom_to_list(terrain_test_peers:node_of(P))),
                               true = terrain_test_peers:call(P, erlang, set_cookie, [N, Cookie]),
                               _ = terrain_test_peers:call(P, erlang, disconnect_node, [N])
                           end || N <- Nodes, N =/= terrain_test_peers:node_of(P)]
                  end, Ps).

heal(Ps, Nodes) ->
    lists:foreach(fun(P) ->
                          Cookie = terrain_test_peers:call(P, erlang, get_cookie, []),
                          [true = terrain_test_peers:call(P, erlang, set_cookie, [N, Cookie])
                           || N <- Nodes, N =/= terrain_test_peers:node_of(P)]
                  end, Ps).

status(P) -> terrain_test_peers:call(P, terrain, live_status, []).
topology(P) -> terrain_test_peers:call(P, terrain, topology, []).
members(P) -> maps:get(members, status(P)).

%% Every peer at the same version with the same tree (by digest and by term).
one_state(Peers) ->
    States = [{maps:with([version, digest], status(P)), topology(P)} || P <- Peers],
    length(lists:usort(States)) =:= 1.

%% Each node with the name of the second network from the root on its way (its site).
places({network, _, _, Children}) ->
    lists:sort([{N, Site} || {network, Site, _, _} = C <- Children, N <- leaves(C)] ++
               [{N, root} || {node, N} <- Children]).

subscribe_for(Collector) ->
    %% the subscription belongs to the collector: subscribe from inside it
    Collector ! {subscribe, self()},
    receive {subscribed, R} -> R after 5000 -> {error, timeout} end.

collect(Acc) ->
    receive
        {subscribe, From} -> From ! {subscribed, terrain:subscribe(topology, #{})}, collect(Acc);
        {terrain_topology, _Ref, #{version := V, change := C}} -> collect([{V, C} | Acc]);
        {get, From} -> From ! {changes, lists:reverse(Acc)}, collect(Acc)
    end.

same_everywhere(Peers, Version, Check) ->
    States = [{terrain_test_peers:call(P, terrain, live_status, []), terrain_test_peers:call(P, terrain, topology, [])}
              || P <- Peers],
    lists:all(fun({#{version := V}, Tree}) -> V =:= Version andalso Check(leaves(Tree)); (_) -> false end, States).

leaves({node, N}) -> [N];
leaves({network, _, _, Children}) -> lists:append([leaves(C) || C <- Children]);
leaves({network, _, Children}) -> lists:append([leaves(C) || C <- Children]);
leaves({network, Children}) -> lists:append([leaves(C) || C <- Children]).
