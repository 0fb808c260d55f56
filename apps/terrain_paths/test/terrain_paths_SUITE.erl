%% Collective operations across local peer nodes: the hierarchy from a topology,
%% a hand-drawn tree with wrappers, reconfiguration at run time, auto from a rules
%% file, and a member's node stopped in the middle of allreduce.
-module(terrain_paths_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([hierarchical_follows_the_topology/0, hand_drawn_tree_with_wrappers/0, collect_wrapper_feeds_the_event_space/0,
         reconfigure_switches_at_an_operation_boundary/0, auto_reads_the_rules_file/0,
         node_stopped_mid_allreduce_gives_member_down/0, hung_member_gives_timeout/0,
         members_leaving_after_their_calls_break_nothing/0]).
-export([hierarchical_follows_the_topology/1,
         hand_drawn_tree_with_wrappers/1,
         collect_wrapper_feeds_the_event_space/1,
         reconfigure_switches_at_an_operation_boundary/1,
         auto_reads_the_rules_file/1,
         node_stopped_mid_allreduce_gives_member_down/1,
         hung_member_gives_timeout/1,
         members_leaving_after_their_calls_break_nothing/1]).

suite() -> [{timetrap, {minutes, 2}}].

all() ->
    [hierarchical_follows_the_topology, hand_drawn_tree_with_wrappers, collect_wrapper_feeds_the_event_space,
     reconfigure_switches_at_an_operation_boundary, auto_reads_the_rules_file,
     node_stopped_mid_allreduce_gives_member_down, hung_member_gives_timeout,
     members_leaving_after_their_calls_break_nothing].

init_per_suite(Config) ->
    terrain_test_peers:ensure_distributed(),
    Prefix = terrain_test_peers:unique_prefix(?MODULE),
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ N) || N <- ["a1", "a2", "b1", "b2"]], []),
    [{peers, Peers} | Config].

end_per_suite(Config) ->
    terrain_test_peers:stop(?config(peers, Config)).

%% Racks a = {a1, a2} and b = {b1, b2}.
topology(Config) ->
    [A1, A2, B1, B2] = [N || {_, N} <- ?config(peers, Config)],
    {network, top, [{network, a, [{node, A1}, {node, A2}]}, {network, b, [{node, B1}, {node, B2}]}]}.

peer_nodes(Config) -> [N || {_, N} <- ?config(peers, Config)].

hierarchical_follows_the_topology() ->
    [{doc, "12 members on 4 nodes in 2 racks: the groups are racks of nodes, one leader per rack, "
      "the leaders exchange once per level, and allreduce/allgather give the fold in rank order."}].
hierarchical_follows_the_topology(Config) ->
    Members = terrain_paths_test_members:start(12, peer_nodes(Config)),
    {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => hierarchical, topology => topology(Config)}),
    [A1, A2, B1, B2] = peer_nodes(Config),
    #{groups := Groups, local_leader := Leaders, exchange := Exchange} = terrain_paths:hierarchy(Comm),
    ?assertEqual({group, [{group, [{node, A1, [0, 4, 8]}, {node, A2, [1, 5, 9]}]},
                          {group, [{node, B1, [2, 6, 10]}, {node, B2, [3, 7, 11]}]}]}, Groups),
    %% racks lead by rank 0 (the root) and rank 2; the two leaders exchange once
    ?assertEqual([0, 0, 2, 2, 0, 0, 2, 2, 0, 0, 2, 2], [maps:get(R, Leaders) || R <- lists:seq(0, 11)]),
    ?assertEqual(#{0 => [{1, [2], [2]}], 2 => [{1, [0], [0]}]}, Exchange),
    Results = terrain_paths_test_members:run(Members, Comm, fun(C, R) ->
                                                                   {terrain_paths:allreduce(C, [R], fun erlang:'++'/2),
                                                                    terrain_paths:allgather(C, R)}
                                                           end),
    All = lists:seq(0, 11),
    ?assertEqual(lists:duplicate(12, {{ok, All}, {ok, All}}), Results),
    terrain_paths_test_members:stop(Members).

hand_drawn_tree_with_wrappers() ->
    [{doc, "A tree read from a file, with compress, forward and collect wrappers: allreduce, reduce, "
      "broadcast and scatter follow it, and the collector hears every passage of the edges it is on."}].
hand_drawn_tree_with_wrappers(Config) ->
    Members = terrain_paths_test_members:start(6, peer_nodes(Config)),
    File = filename:join(?config(priv_dir, Config), "tree.config"),
    ok = file:write_file(File, "{tree, {2, [{0, [compress], [{4, []}]}, {1, [forward], [{3, []}, {5, []}]}]}}.\n"),
    {ok, {tree, Vertex}} = terrain_paths:read_config(File),
    Self = self(),
    %% add a collector on the edge 5 -> 1
    {tree, {2, [V0, {1, [forward], [V3, {5, []}]}]}} = {tree, Vertex},
    Collected = {tree, {2, [V0, {1, [forward], [V3, {5, [{collect, Self}], []}]}]}},
    {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => Collected}),
    Results = terrain_paths_test_members:run(Members, Comm,
                                             fun(C, R) ->
                                                     [terrain_paths:allreduce(C, [R], fun erlang:'++'/2),
                                                      terrain_paths:reduce(C, R, sum),
                                                      terrain_paths:broadcast(C, {root_is, R}),
                                                      terrain_paths:scatter(C, [x0, x1, x2, x3, x4, x5])]
                                             end),
    Expect = fun(2) -> [{ok, lists:seq(0, 5)}, {ok, 15}, {ok, {root_is, 2}}, {ok, x2}];
                (R) -> [{ok, lists:seq(0, 5)}, ok, {ok, {root_is, 2}}, {ok, lex(R)}]
             end,
    ?assertEqual([Expect(R) || R <- lists:seq(0, 5)], Results),
    Events = receive_events([]),
    %% rank 5's edge: up (5 -> 1) in allreduce and reduce, down (1 -> 5) in allreduce,
    %% broadcast and scatter; no other edge has the collector
    ?assertEqual([{down, 1, 5}, {down, 1, 5}, {down, 1, 5}, {up, 5, 1}, {up, 5, 1}],
                 lists:sort([{D, From, To} || #{rank := From, to := To, direction := D} <- Events])),
    {error, {paths, {bad_tree, {duplicate, 1}}}} =
        terrain_paths:communicator(Members, #{algorithm => {tree, {0, [{1, []}, {1, []}]}}}),
    terrain_paths_test_members:stop(Members).

collect_wrapper_feeds_the_event_space() ->
    [{doc, "A {collect, {events, paths}} wrapper records every value passing its edge in EventSpace's paths "
      "collector of the vertex's node ([paths, collect], the bytes as value, the passage as metadata), "
      "read back with terrain_events:read/2."}].
collect_wrapper_feeds_the_event_space(_Config) ->
    {ok, Started} = application:ensure_all_started(terrain_events),
    try
        Members = terrain_paths_test_members:start(3, [node()]),
        Tree = {tree, {0, [{1, [{collect, {events, paths}}], []}, {2, []}]}},
        {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => Tree}),
        Results = terrain_paths_test_members:run(Members, Comm,
                                                 fun(C, R) -> [terrain_paths:allreduce(C, R + 1, sum)] end),
        ?assertEqual(lists:duplicate(3, [{ok, 6}]), Results),
        terrain_paths_test_members:stop(Members),
        {ok, #{events := Events, failed := []}} = terrain_events:read([node()], #{collectors => [paths]}),
        Passages = lists:sort([{D, From, To} || #{name := [paths, collect], measurements := #{value := Bytes},
                                                  metadata := #{rank := From, to := To, direction := D}} <- Events,
                                                is_integer(Bytes), Bytes > 0]),
        %% rank 1's edge only: its value goes up (1 -> 0), the result comes down (0 -> 1)
        ?assertEqual([{down, 0, 1}, {up, 1, 0}], Passages)
    after
        [ok = application:stop(App) || App <- lists:reverse(Started)]
    end.

lex(R) -> list_to_atom("x" ++ integer_to_list(R)).

receive_events(Acc) ->
    receive {terrain_paths_event, E} -> receive_events([E | Acc])
    after 200 -> Acc
    end.

reconfigure_switches_at_an_operation_boundary() ->
    [{doc, "reconfigure/2 called by every member adopts the root's algorithm for all: the next "
      "operations run with it (a hand-drawn tree rooted at 3 changes reduce's root) and agree."}].
reconfigure_switches_at_an_operation_boundary(Config) ->
    Members = terrain_paths_test_members:start(4, peer_nodes(Config)),
    {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => binomial}),
    Tree = {tree, {3, [{2, []}, {1, [{0, []}]}]}},
    Results = terrain_paths_test_members:run(Members, Comm,
                                             fun(C, R) ->
                                                     Proposal = case R of 0 -> Tree; _ -> flat end,
                                                     {ok, C2} = terrain_paths:reconfigure(C, Proposal),
                                                     {terrain_paths:algorithm(C2), terrain_paths:reduce(C2, R, sum)}
                                             end),
    ?assertEqual([{Tree, ok}, {Tree, ok}, {Tree, ok}, {Tree, {ok, 6}}], Results),
    terrain_paths_test_members:stop(Members).

auto_reads_the_rules_file() ->
    [{doc, "auto picks the algorithm of the first matching rule of a terrain.collective_rules/1 file "
      "by operation and value size, and its results are right."}].
auto_reads_the_rules_file(Config) ->
    File = filename:join(?config(priv_dir, Config), "rules.json"),
    Rules = [#{operation => allreduce, min_bytes => 0, max_bytes => 100, algorithm => ring},
             #{operation => allreduce, min_bytes => 100, max_bytes => infinity, algorithm => flat}],
    ok = terrain_json:write_file(File, terrain_paths:rules_json(Rules, #{test => true})),
    Members = terrain_paths_test_members:start(5, peer_nodes(Config)),
    {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => auto, rules => File}),
    ?assertEqual(ring, terrain_paths:choose(Comm, allreduce, 8)),
    ?assertEqual(flat, terrain_paths:choose(Comm, allreduce, 1000)),
    ?assertEqual(hierarchical, terrain_paths:choose(Comm, gather, 8)),   % no rule: members span nodes
    Results = terrain_paths_test_members:run(Members, Comm,
                                             fun(C, R) -> {terrain_paths:allreduce(C, R, sum),
                                                           terrain_paths:allreduce(C, lists:duplicate(50, R), sum)}
                                             end),
    ?assertEqual(lists:duplicate(5, {{ok, 10}, {ok, lists:duplicate(50, 10)}}), Results),
    Bad = filename:join(?config(priv_dir, Config), "bad.json"),
    ok = file:write_file(Bad, "{\"format\": \"terrain.collective_rules/1\", \"rules\": [{\"operation\": "
                              "\"allreduce\", \"min_bytes\": 0, \"algorithm\": \"fastest\"}]}"),
    ?assertMatch({error, {paths, {rules, _, {algorithm, <<"fastest">>}}}},
                 terrain_paths:communicator(Members, #{rules => Bad})),
    terrain_paths_test_members:stop(Members).

node_stopped_mid_allreduce_gives_member_down() ->
    [{doc, "A peer running members is stopped while 8 members loop on hierarchical allreduce: every "
      "survivor returns {error, {member_down, Rank, Node}} naming a member of that node within seconds "
      "(the deadline is 60 s), and later calls return the same error at once."}].
node_stopped_mid_allreduce_gives_member_down(Config) ->
    Prefix = terrain_test_peers:unique_prefix(node_stopped),
    [{VictimPeer, Victim}] = terrain_test_peers:start([list_to_atom(Prefix ++ "v")], []),
    Nodes = peer_nodes(Config) ++ [Victim],
    Members = terrain_paths_test_members:start(10, Nodes),
    {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => hierarchical, timeout => 60000,
                                                       topology => topology(Config)}),
    Loop = fun Loop(C, R, Count) ->
                   case terrain_paths:allreduce(C, R, sum) of
                       {ok, 45} -> Loop(C, R, Count + 1);
                       Error -> {Count, Error, terrain_paths:allreduce(C, R, sum)}
                   end
           end,
    Self = self(),
    spawn_link(fun() -> timer:sleep(300), peer:stop(VictimPeer), Self ! {stopped, erlang:monotonic_time(millisecond)} end),
    Results = terrain_paths_test_members:run(Members, Comm, fun(C, R) -> Loop(C, R, 0) end, 30000),
    Done = erlang:monotonic_time(millisecond),
    Stopped = receive {stopped, T} -> T end,
    VictimRanks = [R || {R, M} <- lists:zip(lists:seq(0, 9), Members), node(M) =:= Victim],
    Survivors = [X || {R, X} <- lists:zip(lists:seq(0, 9), Results), not lists:member(R, VictimRanks)],
    ct:pal("ranks on ~p: ~p; stopped, all returned ~p ms later; ~p", [Victim, VictimRanks, Done - Stopped, Results]),
    lists:foreach(fun({Count, {error, {member_down, Rank, Node}}, Again}) ->
                          ?assert(Count > 0),
                          ?assert(lists:member(Rank, VictimRanks)),
                          ?assertEqual(Victim, Node),
                          ?assertEqual({error, {member_down, Rank, Node}}, Again)
                  end, Survivors),
    ?assert(Done - Stopped < 10000),
    terrain_paths_test_members:stop(Members).

hung_member_gives_timeout() ->
    [{doc, "A member that never calls the operation: the others return {error, timeout} at the deadline."}].
hung_member_gives_timeout(Config) ->
    Members = terrain_paths_test_members:start(3, peer_nodes(Config)),
    {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => flat, timeout => 300}),
    Results = terrain_paths_test_members:run(Members, Comm,
                                             fun(_C, 2) -> hung;
                                                (C, R) -> terrain_paths:allreduce(C, R, sum)
                                             end),
    ?assertEqual([{error, timeout}, {error, timeout}, hung], Results),
    terrain_paths_test_members:stop(Members).

members_leaving_after_their_calls_break_nothing() ->
    [{doc, "Regression (a check outside the project): 13 local members each call allreduce twice (sum, then "
      "list append) and exit as soon as both return; with every algorithm, 10 times, every member gets both "
      "results (binomial, recursive_doubling and ring used to fail the second call with member_down naming a "
      "member that had completed it)."}].
members_leaving_after_their_calls_break_nothing(_Config) ->
    N = 13,
    Expected = {{ok, lists:sum(lists:seq(0, N - 1))}, {ok, [[R] || R <- lists:seq(0, N - 1)]}},
    Self = self(),
    Run = fun(Algorithm) ->
                  Ref = make_ref(),
                  Members = [spawn(fun() ->
                                           C = receive {go, Given} -> Given end,
                                           R = terrain_paths:rank(C),
                                           Sum = terrain_paths:allreduce(C, R, sum),
                                           Append = terrain_paths:allreduce(C, [[R]], fun erlang:'++'/2),
                                           Self ! {Ref, self(), {Sum, Append}}
                                   end) || _ <- lists:seq(1, N)],
                  {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => Algorithm, timeout => 10000,
                                                                     topology => {network, top, [{node, node()}]}}),
                  [M ! {go, Comm} || M <- Members],
                  [receive {Ref, M, Result} -> Result after 20000 -> {M, no_answer} end || M <- Members]
          end,
    [?assertEqual({Algorithm, lists:duplicate(N, Expected)}, {Algorithm, Run(Algorithm)})
     || Algorithm <- [flat, binomial, recursive_doubling, ring, rabenseifner, hierarchical], _ <- lists:seq(1, 10)],
    ok.
