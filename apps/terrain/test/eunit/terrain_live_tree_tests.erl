%% The live tree's pure functions: a removal keeps network names, the union of two
%% trees by names (a healed partition), the digest.
-module(terrain_live_tree_tests).
-include_lib("eunit/include/eunit.hrl").

site(Name, Racks) -> {network, Name, #{height => 5000}, Racks}.
rack(Name, Nodes) -> {network, Name, #{height => 500}, [{node, N} || N <- Nodes]}.

tree() ->
    {network, dc, #{height => 50000}, [site(s0, [rack(s0r0, [a, b]), rack(s0r1, [c])]),
                                       site(s1, [rack(s1r0, [d, e])])]}.

removing_a_node_keeps_the_name_of_a_rack_left_with_one_node_test() ->
    {ok, T} = terrain_live_tree:remove(a, tree()),
    ?assertEqual({network, dc, #{height => 50000}, [site(s0, [rack(s0r0, [b]), rack(s0r1, [c])]),
                                                    site(s1, [rack(s1r0, [d, e])])]}, T),
    %% the site left with one child stays too, and the root with one site
    {ok, T2} = terrain_live_tree:remove(c, T),
    {ok, T3} = terrain_live_tree:remove(d, T2),
    {ok, T4} = terrain_live_tree:remove(e, T3),
    ?assertEqual({network, dc, #{height => 50000}, [site(s0, [rack(s0r0, [b])])]}, T4),
    ?assertMatch({ok, _}, terrain_topology:new(T4)).

removing_the_last_node_or_a_stranger_is_an_error_test() ->
    Solo = {network, dc, #{height => 1}, [{node, a}]},
    ?assertEqual({error, last_node}, terrain_live_tree:remove(a, Solo)),
    ?assertEqual({error, not_a_member}, terrain_live_tree:remove(z, tree())).

the_union_puts_the_other_sides_nodes_under_their_own_names_test() ->
    %% each side of a partition removed the other and took a join of its own
    {ok, SideA0} = lists:foldl(fun(N, {ok, T}) -> terrain_live_tree:remove(N, T) end, {ok, tree()}, [d, e]),
    SideA = add_to(s0r1, f, SideA0),
    SideB = {network, dc, #{height => 50000}, [site(s1, [rack(s1r0, [d, e]), rack(s1r1, [g])])]},
    Union = terrain_live_tree:union(SideA, SideB, [a, b, c, d, e, f, g]),
    ?assertEqual({network, dc, #{height => 50000},
                  [site(s0, [rack(s0r0, [a, b]), rack(s0r1, [c, f])]),
                   site(s1, [rack(s1r0, [d, e]), rack(s1r1, [g])])]}, Union),
    ?assertEqual(Union, terrain_live_tree:union(Union, SideB, [a, b, c, d, e, f, g])),
    %% only members are taken over
    ?assertEqual([a, b, c, d, e, f], terrain_live_tree:nodes_of(terrain_live_tree:union(SideA, SideB,
                                                                                       [a, b, c, d, e, f]))).

a_node_without_a_place_by_name_is_left_for_measurement_test() ->
    Other = {network, elsewhere, #{height => 50000}, [{node, x}, {node, y}]},
    ?assertEqual(tree(), terrain_live_tree:union(tree(), Other, [x, y])),
    %% a place that would make an invalid tree (a child higher than its parent) is not taken
    ?assertEqual(tree(), terrain_live_tree:union(tree(), {network, dc, #{height => 50000},
                                                          [{network, s9, #{height => 90000}, [{node, z}]}]}, [z])).

equal_versions_with_different_trees_have_different_digests_test() ->
    {ok, T} = terrain_live_tree:remove(a, tree()),
    ?assertNotEqual(terrain_live_tree:digest(tree()), terrain_live_tree:digest(T)),
    ?assertEqual(terrain_live_tree:digest(tree()), terrain_live_tree:digest(tree())),
    ?assertEqual(0, terrain_live_tree:digest(undefined)).

add_to(Rack, Node, {network, Name, Opts, Children}) ->
    {network, Name, Opts, [case C of
                               {network, Rack, O, Kids} -> {network, Rack, O, Kids ++ [{node, Node}]};
                               {network, _, _, _} -> add_to(Rack, Node, C);
                               _ -> C
                           end || C <- Children]}.

%%--------------------------------------------------------------------
%% Deltas

a_delta_patched_onto_its_tree_gives_the_new_tree_test() ->
    Old = tree(),
    {ok, Removed} = terrain_live_tree:remove(c, Old),
    Lowered = {network, dc, #{height => 40000}, [site(s0, [rack(s0r0, [a, b]), rack(s0r1, [c])]),
                                                 site(s1, [rack(s1r0, [d, e])])]},
    Regrouped = {network, dc, #{height => 50000}, [site(s0, [rack(s0r0, [a, b, f]), rack(s0r1, [c])]),
                                                   {network, fresh, #{height => 700}, [{node, g}, {node, h}]},
                                                   site(s1, [rack(s1r0, [d, e])])]},
    Renamed = {network, other_root, #{height => 50000}, [{node, a}]},
    [?assertEqual({ok, New}, terrain_live_tree:patch(Old, terrain_live_tree:delta(Old, New)))
     || New <- [Old, add_to(s0r0, f, Old), Removed, Lowered, Regrouped, Renamed]],
    %% also without options (a tree read from a spec without heights)
    Plain = {network, dc, [{network, r1, [{node, a}, {node, b}]}, {network, r2, [{node, c}]}]},
    Plain2 = {network, dc, [{network, r1, [{node, a}, {node, b}, {node, x}]}, {network, r2, [{node, c}]}]},
    ?assertEqual({ok, Plain2}, terrain_live_tree:patch(Plain, terrain_live_tree:delta(Plain, Plain2))).

a_delta_made_from_another_tree_does_not_fit_test() ->
    Old = tree(),
    Delta = terrain_live_tree:delta(Old, add_to(s0r0, f, Old)),
    ?assertEqual(error, terrain_live_tree:patch({network, dc, #{height => 50000}, [{node, a}]}, Delta)).

a_join_into_a_rack_of_256_nodes_is_a_small_delta_test() ->
    Old = synthetic(4, 8, 8),
    256 = length(terrain_live_tree:nodes_of(Old)),
    New = add_to(r2_5, 'joined_s2r5n9@vm', Old),
    Delta = terrain_live_tree:delta(Old, New),
    ?assertEqual({ok, New}, terrain_live_tree:patch(Old, Delta)),
    ?assert(byte_size(term_to_binary(Delta)) < byte_size(term_to_binary(New)) div 10).

%% A three-level tree: Sites x Racks x PerRack nodes with realistic names.
synthetic(Sites, Racks, PerRack) ->
    {network, cluster, #{height => 50000},
     [{network, list_to_atom("s" ++ integer_to_list(S)), #{height => 5000},
       [{network, list_to_atom(lists:flatten(io_lib:format("r~b_~b", [S, R]))), #{height => 500},
         [{node, list_to_atom(lists:flatten(io_lib:format("lv_s~br~bn~b@vm", [S, R, I])))}
          || I <- lists:seq(1, PerRack)]}
        || R <- lists:seq(1, Racks)]}
      || S <- lists:seq(1, Sites)]}.
