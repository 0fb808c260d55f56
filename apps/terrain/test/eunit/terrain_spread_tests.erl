%% terrain_spread: the issue's cases (4 racks: K = 4 one per rack, K = 6 2,2,1,1),
%% occupied nodes, repeats, domains from a topology, and the shortfall sentence.
-module(terrain_spread_tests).
-include_lib("eunit/include/eunit.hrl").

racks() ->
    Rack = fun(S, R) -> {network, list_to_atom(S ++ "_r" ++ integer_to_list(R)),
                         [{node, list_to_atom(lists:flatten(io_lib:format("~s_r~b_n~b@h", [S, R, I])))}
                          || I <- lists:seq(1, 3)]} end,
    {ok, T} = terrain_topology:new({network, dc, [{network, s1, [Rack("s1", 1), Rack("s1", 2)]},
                                                  {network, s2, [Rack("s2", 1), Rack("s2", 2)]}]}),
    T.

rack_counts(T, Picked) ->
    Counts = lists:foldl(fun(N, Acc) -> maps:update_with(terrain_topology:network_name(T, terrain_topology:domain(T, {depth, 2}, N)),
                                                         fun(C) -> C + 1 end, 1, Acc) end, #{}, Picked),
    lists:reverse(lists:sort(maps:values(Counts))).

four_racks_one_per_rack_test() ->
    T = racks(),
    Picked = terrain_spread:assign(terrain_topology:nodes(T), fun(N) -> terrain_topology:domain(T, {depth, 2}, N) end, 4, [], false),
    ?assertEqual([1, 1, 1, 1], rack_counts(T, Picked)).

six_over_four_racks_is_2_2_1_1_test() ->
    T = racks(),
    Picked = terrain_spread:assign(terrain_topology:nodes(T), fun(N) -> terrain_topology:domain(T, {depth, 2}, N) end, 6, [], false),
    ?assertEqual([2, 2, 1, 1], rack_counts(T, Picked)),
    %% the two nearest racks (first in the candidates' order) get the second node
    ?assertEqual(['s1_r1_n1@h', 's1_r2_n1@h', 's2_r1_n1@h', 's2_r2_n1@h', 's1_r1_n2@h', 's1_r2_n2@h'], Picked).

level_names_are_distance_classes_test() ->
    T = racks(),
    %% very_near: nodes in one rack share a domain; near (0.5): one site
    ?assertEqual(terrain_topology:domain(T, very_near, 's1_r1_n1@h'), terrain_topology:domain(T, very_near, 's1_r1_n2@h')),
    ?assertNotEqual(terrain_topology:domain(T, very_near, 's1_r1_n1@h'), terrain_topology:domain(T, very_near, 's1_r2_n1@h')),
    ?assertEqual(terrain_topology:domain(T, near, 's1_r1_n1@h'), terrain_topology:domain(T, near, 's1_r2_n1@h')),
    ?assertEqual({node, 's1_r1_n1@h'}, terrain_topology:domain(T, same_node, 's1_r1_n1@h')),
    ?assertEqual({node, 'x@h'}, terrain_topology:domain(T, {depth, 2}, 'x@h')).

occupied_domains_are_filled_last_test() ->
    T = racks(),
    Dom = fun(N) -> terrain_topology:domain(T, {depth, 2}, N) end,
    Picked = terrain_spread:assign(terrain_topology:nodes(T), Dom, 2, ['s1_r1_n1@h', 's1_r2_n1@h'], false),
    ?assertEqual(['s2_r1_n1@h', 's2_r2_n1@h'], Picked),
    ?assertEqual(['s2_r1_n1@h', 's2_r1_n2@h', 's2_r1_n3@h'],
                 terrain_spread:best(terrain_topology:nodes(T), Dom,
                                     ['s1_r1_n1@h', 's1_r2_n1@h', 's2_r2_n1@h'])).

repeats_spread_over_nodes_test() ->
    Dom = fun(N) -> N end,
    ?assertEqual([a, b, a, b, a], terrain_spread:assign([a, b], Dom, 5, [], true)),
    ?assertEqual([a, b], terrain_spread:assign([a, b], Dom, 5, [], false)).

shortfall_says_why_test() ->
    Dom = fun(a) -> r1; (b) -> r1; (c) -> r2 end,
    Picked = terrain_spread:assign([a, b, c], Dom, 3, [], false),
    S = terrain_spread:shortfall(Picked, Dom, 3, {[a, b, c], {depth, 2}}),
    ?assertMatch(#{count := 3, matched := 3, picked := 3, domains := 2, shared := [{r1, 2}]}, S),
    Text = lists:flatten(terrain_spread:format_shortfall(S)),
    ?assertNotEqual(nomatch, string:find(Text, "r1 holds 2")),
    ?assertEqual(none, terrain_spread:shortfall([a, c], Dom, 2, {[a, b, c], {depth, 2}})),
    ?assertMatch(#{picked := 1}, terrain_spread:shortfall([a], Dom, 2, {[a], none})).
