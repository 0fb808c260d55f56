%% EMAS with islands on other nodes: hybrid islands and skel workers on peers chosen
%% with terrain predicates, migration over distribution (nearest_first), and a node
%% lost in the middle of a run.
-module(terrain_workloads_emas_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([hybrid_islands_migrate_between_nodes/0, hybrid_islands_migrate_between_nodes/1,
         skel_workers_on_peers/0, skel_workers_on_peers/1,
         islands_on_nodes_chosen_by_predicates/0, islands_on_nodes_chosen_by_predicates/1,
         island_node_lost_is_an_error/0, island_node_lost_is_an_error/1]).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [hybrid_islands_migrate_between_nodes, skel_workers_on_peers, islands_on_nodes_chosen_by_predicates,
     island_node_lost_is_an_error].

init_per_suite(Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    {ok, _} = application:ensure_all_started(terrain),
    Prefix = terrain_test_peers:unique_prefix(?MODULE),
    [A, B] = Names = [list_to_atom(Prefix ++ N) || N <- ["emas_a", "emas_b"]],
    Peers = terrain_test_peers:start(Names, fun(N) when N =:= A -> [{attrs, [{emas_host, true}]}];
                                               (_) -> [{attrs, [{emas_host, false}]}]
                                            end),
    Nodes = [terrain_test_peers:node_of(P) || P <- Peers],
    %% two sites: each peer alone in its own; the test node elsewhere
    Topology = {network, emas, [{network, site_a, [{node, lists:nth(1, Nodes)}]},
                                {network, site_b, [{node, lists:nth(2, Nodes)}]},
                                {network, here, [{node, node()}]}]},
    [ok = terrain_test_peers:call(P, terrain, load_topology, [Topology]) || P <- Peers],
    ok = terrain:load_topology(Topology),
    _ = B,
    [{peers, Peers}, {nodes, Nodes} | Config].

end_per_suite(Config) ->
    terrain_test_peers:stop(?config(peers, Config)),
    ok.

small(Overrides) ->
    maps:merge(#{islands => 4, population => 30, dimensions => 20, time_ms => 1500,
                 migration_probability => 0.02}, Overrides).

conserved(Summary) ->
    ?assertEqual(maps:get(energy_initial, Summary), maps:get(energy_final, Summary)),
    ?assertEqual(0, maps:get(lost_agents, Summary)).

%%--------------------------------------------------------------------

hybrid_islands_migrate_between_nodes() ->
    [{doc, "Hybrid islands on two peers in turn, nearest_first: every island runs on its node, migrants "
           "cross the distribution, the usage reported is the peers', and the energy of all agents is conserved."}].
hybrid_islands_migrate_between_nodes(Config) ->
    [A, B] = Nodes = ?config(nodes, Config),
    {ok, #{summary := S, rows := Rows}} =
        terrain_workloads:emas(small(#{model => hybrid, nodes => Nodes, topology => nearest_first})),
    ?assertEqual([A, B, A, B], [N || #{node := N} <- maps:get(islands, S)]),
    ?assert(maps:get(migrations, S) > 0),
    ?assert(maps:get(reproductions, S) > 0),
    ?assert(length(Rows) >= 4),
    %% utilisation and CPU are those of the island nodes, not of this coordinating node
    ?assertEqual(Nodes, lists:sort([N || #{node := N} <- maps:get(node_usage, S)])),
    conserved(S).

skel_workers_on_peers() ->
    [{doc, "The skel farm's workers run on the peers; the master gathers every island each step."}].
skel_workers_on_peers(Config) ->
    [A, B] = Nodes = ?config(nodes, Config),
    {ok, #{summary := S}} = terrain_workloads:emas(small(#{model => skel, nodes => Nodes, time_ms => 1000})),
    ?assertEqual([A, B, A, B], [N || #{node := N} <- maps:get(islands, S)]),
    ?assert(maps:get(steps, S) > 0),
    conserved(S).

islands_on_nodes_chosen_by_predicates() ->
    [{doc, "Nodes chosen with terrain:choose_nodes/2 on an attribute carry every island."}].
islands_on_nodes_chosen_by_predicates(Config) ->
    [A, _B] = Nodes = ?config(nodes, Config),
    Chosen = terrain:choose_nodes(Nodes, [{emas_host, true}]),
    ?assertEqual([A], Chosen),
    {ok, #{summary := S}} = terrain_workloads:emas(small(#{model => hybrid, nodes => Chosen, time_ms => 800,
                                                           topology => ring})),
    ?assertEqual([A], maps:get(nodes_used, maps:get(parameters, S))),
    conserved(S).

island_node_lost_is_an_error() ->
    [{doc, "A node that goes down during a run ends it with {error, {emas, {island_failed, ...}}} within the "
           "run's deadline, and leaves no island behind on the other nodes."}].
island_node_lost_is_an_error(Config) ->
    [A, _] = ?config(nodes, Config),
    Prefix = terrain_test_peers:unique_prefix(lost),
    [Doomed] = terrain_test_peers:start([list_to_atom(Prefix ++ "emas_c")], []),
    C = terrain_test_peers:node_of(Doomed),
    Self = self(),
    Runner = spawn_link(fun() -> Self ! {result, terrain_workloads:emas(small(#{model => hybrid, nodes => [A, C],
                                                                                  time_ms => 20000}))} end),
    First = hd(?config(peers, Config)),
    terrain_test_peers:wait_until(fun() -> islands_on(First) >= 1 end, 10000, "islands on the first peer"),
    terrain_test_peers:stop([Doomed]),
    Result = receive {result, R} -> R after 30000 -> error(no_result) end,
    ?assertMatch({error, {emas, {island_failed, _, C, _}}}, Result),
    unlink(Runner),
    terrain_test_peers:wait_until(fun() -> islands_on(First) =:= 0 end, 10000, "islands gone from the first peer").

%% The hybrid islands running on a peer (counting all its processes raced with the
%% connection and call processes a lost node makes and leaves there for a while).
islands_on(Peer) ->
    Island = {initial_call, {terrain_emas_hybrid, island, 4}},
    length([P || P <- terrain_test_peers:call(Peer, erlang, processes, []),
                 terrain_test_peers:call(Peer, erlang, process_info, [P, initial_call]) =:= Island]).
