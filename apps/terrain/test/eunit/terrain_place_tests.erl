%% Process-tree placement: children near parents, at most one slow link per path where
%% the topology allows it, eligibility and capacity respected, cost against random.
-module(terrain_place_tests).
-include_lib("eunit/include/eunit.hrl").

%% 2 sites x 4 racks x 8 nodes = 64 nodes.
topology() ->
    Sites = [{network, site(S), [{network, rack(S, R), [{node, node(S, R, I)} || I <- lists:seq(1, 8)]}
                                 || R <- lists:seq(1, 4)]} || S <- [1, 2]],
    {ok, T} = terrain_topology:new({network, dc, Sites}),
    T.

site(S) -> list_to_atom("s" ++ integer_to_list(S)).
rack(S, R) -> list_to_atom(lists:flatten(io_lib:format("r~b_~b", [S, R]))).
node(S, R, I) -> list_to_atom(lists:flatten(io_lib:format("n~b_~b_~b", [S, R, I]))).

%% ML-ACO shape: a master, 8 submasters, 8 colonies each.
aco_tree() ->
    {vertex, master, [{vertex, {sub, S}, [{vertex, {colony, S, C}, []} || C <- lists:seq(1, 8)]} || S <- lists:seq(1, 8)]}.

aco_tree_keeps_each_subtree_in_one_rack_test() ->
    T = topology(),
    {ok, #{assignment := A, cost := Cost, random := Random}} =
        terrain_place:place(aco_tree(), T, #{nodes => terrain_topology:nodes(T)}),
    ?assertEqual(73, map_size(A)),
    [begin
         Sub = maps:get({sub, S}, A),
         [?assert(terrain_topology:distance(T, Sub, maps:get({colony, S, C}, A)) =< 0.25) || C <- lists:seq(1, 8)]
     end || S <- lists:seq(1, 8)],
    ?assertEqual(1, maps:get(max_slow, Cost)),
    ?assert(maps:get(max, Cost) =< 1.25),
    ?assert(maps:get(sum, Cost) < maps:get(sum, Random)),
    ?assert(maps:get(max_slow, Random) >= 2).

capacity_spreads_the_tree_over_all_nodes_test() ->
    T = topology(),
    {ok, #{assignment := A}} = terrain_place:place(aco_tree(), T, #{nodes => terrain_topology:nodes(T)}),
    Load = lists:foldl(fun(N, M) -> maps:update_with(N, fun(C) -> C + 1 end, 1, M) end, #{}, maps:values(A)),
    ?assertEqual(64, map_size(Load)),
    ?assert(lists:max(maps:values(Load)) =< 2).

eligibility_is_respected_test() ->
    T = topology(),
    Big = [node(2, 3, I) || I <- lists:seq(1, 8)],
    Tree = {vertex, root, [{vertex, {c, I}, Big, []} || I <- lists:seq(1, 4)]},
    {ok, #{assignment := A}} = terrain_place:place(Tree, T, #{nodes => terrain_topology:nodes(T)}),
    [?assert(lists:member(maps:get({c, I}, A), Big)) || I <- lists:seq(1, 4)],
    %% the root joins its children's rack
    ?assertEqual(0.25, terrain_topology:distance(T, maps:get(root, A), maps:get({c, 1}, A))).

no_eligible_node_is_an_error_test() ->
    T = topology(),
    Tree = {vertex, root, [{vertex, picky, [elsewhere@nowhere], []}]},
    ?assertEqual({error, {no_node, {vertex, picky}}},
                 terrain_place:place(Tree, T, #{nodes => terrain_topology:nodes(T)})).

full_capacity_spills_instead_of_failing_test() ->
    T = topology(),
    Rack1 = [node(1, 1, I) || I <- lists:seq(1, 8)],
    Rack2 = [node(1, 2, I) || I <- lists:seq(1, 3)],
    %% 21 vertices, 2 per node: rack 1 holds 16, the rest must spill into rack 2.
    Tree = {vertex, root, [{vertex, {leaf, I}, []} || I <- lists:seq(1, 20)]},
    {ok, #{assignment := A}} = terrain_place:place(Tree, T, #{nodes => Rack1 ++ Rack2, capacity => 2}),
    ?assertEqual(21, map_size(A)),
    Used = lists:usort(maps:values(A)),
    ?assertEqual(Rack1, [N || N <- Used, lists:member(N, Rack1)]),
    ?assertNotEqual([], [N || N <- Used, lists:member(N, Rack2)]),
    %% 18 places for 21 vertices: capacity is a target, the three extra go to the least loaded.
    {ok, #{assignment := Over}} = terrain_place:place(Tree, T, #{nodes => Rack1 ++ [node(1, 2, 1)], capacity => 2}),
    Load = lists:foldl(fun(N, M) -> maps:update_with(N, fun(C) -> C + 1 end, 1, M) end, #{}, maps:values(Over)),
    ?assertEqual(21, lists:sum(maps:values(Load))),
    ?assertEqual(9, map_size(Load)),
    ?assert(lists:max(maps:values(Load)) =< 3).

constrained_vertices_overflow_onto_eligible_nodes_test() ->
    T = topology(),
    Big = [node(2, 1, I) || I <- [1, 2]],
    %% 6 leaves that only fit on 2 nodes, capacity 1: they share those 2 nodes.
    Tree = {vertex, root, [{vertex, {leaf, I}, Big, []} || I <- lists:seq(1, 6)]},
    {ok, #{assignment := A}} = terrain_place:place(Tree, T, #{nodes => terrain_topology:nodes(T), capacity => 1}),
    ?assertEqual(Big, lists:usort([maps:get({leaf, I}, A) || I <- lists:seq(1, 6)])).

nodes_outside_the_topology_are_used_last_test() ->
    T = topology(),
    Tree = {vertex, root, [{vertex, leaf, []}]},
    {ok, #{assignment := A}} = terrain_place:place(Tree, T, #{nodes => [stranger@host, node(1, 1, 1), node(1, 1, 2)]}),
    ?assertNot(lists:member(stranger@host, maps:values(A))).

cost_counts_paths_and_slow_edges_test() ->
    T = topology(),
    Tree = {vertex, a, [{vertex, b, [{vertex, c, []}]}, {vertex, d, []}]},
    A = #{a => node(1, 1, 1), b => node(2, 1, 1), c => node(1, 1, 2), d => node(1, 1, 1)},
    ?assertEqual(#{sum => 2.0, max => 2.0, max_slow => 2, paths => 2}, terrain_place:cost(Tree, A, T)).
