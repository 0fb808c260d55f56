%% EUnit: trees, the hierarchy built from a topology, rules, and partial results.
-module(terrain_paths_tests).

-include_lib("eunit/include/eunit.hrl").

binomial_tree_is_a_tree_rooted_anywhere_test() ->
    [begin
         Tree = terrain_paths_plan:binomial(Size, Root),
         Ranks = lists:seq(0, Size - 1),
         %% every rank but the root is the child of its parent, exactly once
         Edges = lists:sort([{C, P} || P <- Ranks, C <- terrain_paths_plan:children(Tree, P)]),
         ?assertEqual(lists:sort([{R, terrain_paths_plan:parent(Tree, R)} || R <- Ranks, R =/= Root]), Edges),
         ?assertEqual(none, terrain_paths_plan:parent(Tree, Root)),
         ?assertEqual(Ranks, lists:sort(terrain_paths_plan:subtree(Tree, Root))),
         %% depth at most ceil(log2(Size))
         Depth = fun D(R) -> case terrain_paths_plan:parent(Tree, R) of none -> 0; P -> 1 + D(P) end end,
         ?assert(lists:max([Depth(R) || R <- Ranks]) =< ceil(math:log2(max(Size, 1))) + 0)
     end || Size <- lists:seq(1, 33), Root <- [0, Size - 1, Size div 2]].

binomial_children_farthest_first_test() ->
    Tree = terrain_paths_plan:binomial(8, 0),
    ?assertEqual([4, 2, 1], terrain_paths_plan:children(Tree, 0)),
    ?assertEqual([6, 5], terrain_paths_plan:children(Tree, 4)),
    ?assertEqual([4, 5, 6, 7], terrain_paths_plan:subtree(Tree, 4)).

explicit_tree_checks_every_rank_once_test() ->
    ?assertMatch({ok, {map, 2, _}}, terrain_paths_plan:explicit({2, [{0, [compress], []}, {1, []}]}, 3)),
    ?assertEqual({error, {duplicate, 1}}, terrain_paths_plan:explicit({0, [{1, []}, {1, []}]}, 2)),
    ?assertEqual({error, {ranks, [0, 1], 3}}, terrain_paths_plan:explicit({0, [{1, []}]}, 3)),
    ?assertEqual({error, {wrapper, shout}}, terrain_paths_plan:explicit({0, [{1, [shout], []}]}, 2)),
    ?assertEqual({error, {vertex, oops}}, terrain_paths_plan:explicit({0, [oops]}, 2)).

%% 2 sites x 2 racks x 2 nodes, one member per node, ranks in node order
hierarchy_of_three_levels_test() ->
    Nodes = [a, b, c, d, e, f, g, h],
    Topology = {network, top, [{network, s1, [{network, r1, [{node, a}, {node, b}]}, {network, r2, [{node, c}, {node, d}]}]},
                               {network, s2, [{network, r3, [{node, e}, {node, f}]}, {network, r4, [{node, g}, {node, h}]}]}]},
    H = terrain_paths_plan:hierarchy(#{nodes => list_to_tuple(Nodes), root => 0, topology => Topology,
                                       schedulers => #{d => 4}, eligible => all, exchange => levels}),
    #{exchange := Exchange, tree := Tree, forest := Forest, local_leader := Local, exchange_shape := levels} = H,
    %% racks are the lowest groups: their leaders are 0 (the root), 3 (most
    %% schedulers), 4 and 6 (lowest rank); the others hand their value to them
    ?assertEqual([0, 0, 3, 3, 4, 4, 6, 6], [maps:get(R, Local) || R <- lists:seq(0, 7)]),
    ?assertEqual([none, 0, 3, none, none, 4, none, 6], [terrain_paths_plan:parent(Forest, R) || R <- lists:seq(0, 7)]),
    %% the leaders exchange once per level: site (depth 2), then top (depth 1)
    ?assertEqual([{2, [3], [3]}, {1, [4], [4]}], maps:get(0, Exchange)),
    ?assertEqual([{2, [4], [4]}, {1, [3], [3]}], maps:get(6, Exchange)),
    ?assertEqual([0, 3, 4, 6], lists:sort(maps:keys(Exchange))),
    %% the tree: rack r2's leader is d (most schedulers); the root leads its groups
    ?assertEqual(0, terrain_paths_plan:parent(Tree, 1)),
    ?assertEqual(0, terrain_paths_plan:parent(Tree, 3)),
    ?assertEqual(3, terrain_paths_plan:parent(Tree, 2)),
    ?assertEqual(lists:seq(0, 7), lists:sort(terrain_paths_plan:subtree(Tree, 0))).

%% The same cluster by default (4 racks, at most 8): every rack leader sends its
%% partial to the 3 others at once, and receives theirs
hierarchy_with_direct_exchange_test() ->
    Nodes = [a, b, c, d, e, f, g, h],
    Topology = {network, top, [{network, s1, [{network, r1, [{node, a}, {node, b}]}, {network, r2, [{node, c}, {node, d}]}]},
                               {network, s2, [{network, r3, [{node, e}, {node, f}]}, {network, r4, [{node, g}, {node, h}]}]}]},
    Input = #{nodes => list_to_tuple(Nodes), root => 0, topology => Topology, schedulers => #{d => 4}, eligible => all},
    #{exchange := Exchange, exchange_shape := direct, local_leader := Local} = terrain_paths_plan:hierarchy(Input),
    ?assertEqual([0, 0, 3, 3, 4, 4, 6, 6], [maps:get(R, Local) || R <- lists:seq(0, 7)]),
    ?assertEqual(#{0 => [{1, [3, 4, 6], [3, 4, 6]}], 3 => [{1, [0, 4, 6], [0, 4, 6]}],
                   4 => [{1, [0, 3, 6], [0, 3, 6]}], 6 => [{1, [0, 3, 4], [0, 3, 4]}]}, Exchange),
    ?assertEqual(Exchange, maps:get(exchange, terrain_paths_plan:hierarchy(Input#{exchange => direct}))),
    %% more than 8 lowest groups: level by level again (18 nodes in 9 racks of 2)
    Racks = [{network, list_to_atom("r" ++ integer_to_list(I)), [{node, {I, 1}}, {node, {I, 2}}]}
             || I <- lists:seq(1, 9)],
    Many = [{I, J} || I <- lists:seq(1, 9), J <- [1, 2]],
    ?assertMatch(#{exchange_shape := levels},
                 terrain_paths_plan:hierarchy(#{nodes => list_to_tuple(Many), root => 0, eligible => all,
                                                topology => {network, top, Racks}, schedulers => #{}})),
    %% one group: nothing to exchange
    ?assertMatch(#{exchange := #{0 := []}},
                 terrain_paths_plan:hierarchy(#{nodes => {a, b}, root => 0, schedulers => #{}, eligible => all,
                                                topology => {network, top, [{network, r, [{node, a}, {node, b}]}]}})).

hierarchy_of_unequal_groups_test() ->
    %% 3 nodes in one network, 1 in another: every leader gets each sibling
    %% group's partial exactly once
    Topology = {network, top, [{network, x, [{node, a}, {node, b}, {node, c}]}, {network, y, [{node, d}]}]},
    #{exchange := Exchange} = terrain_paths_plan:hierarchy(#{nodes => {a, b, c, d, a}, root => 0,
                                                            topology => Topology, schedulers => #{},
                                                            eligible => all}),
    Received = fun(R) -> lists:append([From || {_, _, From} <- maps:get(R, Exchange)]) end,
    ?assertEqual([3], Received(0)),
    ?assertEqual([0], Received(3)),
    %% what is sent is what is received, level by level
    Sent = lists:sort([{To, From, D} || {From, Levels} <- maps:to_list(Exchange), {D, Tos, _} <- Levels, To <- Tos]),
    Got = lists:sort([{To, From, D} || {To, Levels} <- maps:to_list(Exchange), {D, _, Froms} <- Levels, From <- Froms]),
    ?assertEqual(Sent, Got).

merge_combines_only_consecutive_ranks_when_not_commutative_test() ->
    Cat = fun erlang:'++'/2,
    ?assertEqual([{0, 1, "ab"}, {3, 3, "d"}], terrain_paths_op:merge(Cat, [[{3, 3, "d"}], [{1, 1, "b"}], [{0, 0, "a"}]])),
    ?assertEqual([{0, 3, "abcd"}], terrain_paths_op:merge(Cat, [[{0, 1, "ab"}, {3, 3, "d"}], [{2, 2, "c"}]])),
    ?assertEqual([{0, 3, 10}], terrain_paths_op:merge(sum, [[{3, 3, 4}], [{0, 0, 1}, {2, 2, 3}], [{1, 1, 2}]])),
    ?assertEqual([5, 7], terrain_paths_op:combine(sum, [1, 2], [4, 5])),
    ?assertError(badarg, terrain_paths_op:combine(sum, [1, 2], [4])).

rules_choose_by_operation_and_size_test() ->
    Json = #{<<"format">> => <<"terrain.collective_rules/1">>,
             <<"rules">> => [#{<<"operation">> => <<"allreduce">>, <<"min_bytes">> => 0, <<"max_bytes">> => 2048,
                               <<"algorithm">> => <<"recursive_doubling">>},
                             #{<<"operation">> => <<"allreduce">>, <<"min_bytes">> => 2048, <<"max_bytes">> => null,
                               <<"algorithm">> => <<"ring">>}]},
    {ok, Rules} = terrain_paths_rules:from_json(Json),
    ?assertEqual(recursive_doubling, terrain_paths_rules:choose(Rules, allreduce, 2047, #{nodes => 4})),
    ?assertEqual(ring, terrain_paths_rules:choose(Rules, allreduce, 2048, #{nodes => 4})),
    ?assertEqual(hierarchical, terrain_paths_rules:choose(Rules, broadcast, 8, #{nodes => 4})),
    ?assertEqual(binomial, terrain_paths_rules:choose(Rules, broadcast, 8, #{nodes => 1})),
    %% written and read back
    {ok, Again} = terrain_paths_rules:from_json(
                    element(2, terrain_json:decode(terrain_json:encode(terrain_paths_rules:to_json(Rules, #{}))))),
    ?assertEqual(Rules, Again),
    ?assertEqual({error, {format, <<"x/1">>}}, terrain_paths_rules:from_json(#{<<"format">> => <<"x/1">>})),
    ?assertEqual({error, {max_bytes, 0}},
                 terrain_paths_rules:from_json(Json#{<<"rules">> => [#{<<"operation">> => <<"reduce">>, <<"min_bytes">> => 0,
                                                                     <<"max_bytes">> => 0, <<"algorithm">> => <<"flat">>}]})).

communicator_refuses_bad_options_test() ->
    Self = self(),
    ?assertEqual({error, {paths, {option, timeout, 0}}}, terrain_paths:communicator([Self], #{timeout => 0})),
    ?assertEqual({error, {paths, {option, algorithm, fastest}}}, terrain_paths:communicator([Self], #{algorithm => fastest})),
    ?assertEqual({error, {paths, {option, root, 1}}}, terrain_paths:communicator([Self], #{root => 1})),
    ?assertError(badarg, terrain_paths:communicator([Self, Self], #{})),
    ?assertError(badarg, terrain_paths:communicator([], #{})),
    ?assertError(badarg, terrain_paths:allreduce(element(2, terrain_paths:communicator([Self], #{})), 1, plus)),
    %% one member: every operation is local
    {ok, C} = terrain_paths:communicator([Self], #{topology => undefined}),
    ?assertEqual({ok, 5}, terrain_paths:allreduce(C, 5, sum)),
    ?assertEqual({ok, [5]}, terrain_paths:gather(C, 5)),
    ?assertEqual(ok, terrain_paths:free(C)).
