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

%%--------------------------------------------------------------------
%% Re-measurements on a stale tree (docs/RELIABILITY.md, finding 9, seed 52)

%% The 8-VM spec's tree as the live cluster held it at seed 52's version 5: j1 in b1's
%% rack, d1 in d2's; and the truth after two `netem move's (d1 into b1's rack, j1 into
%% d2's). a1 is down (killed, within its grace period): its round trips fail.
stale52() ->
    {network, root, #{height => 25000},
     [{network, s1, #{height => 2500}, [rack250(s1r1, [a1, a2]), rack250(s1r2, [b1, j1])]},
      {network, s2, #{height => 2500}, [{node, c1}, rack250(s2r2, [d1, d2])]}]}.

truth52() ->
    {network, root, #{height => 25000},
     [{network, s1, #{height => 2500}, [rack250(s1r1, [a1, a2]), rack250(s1r2, [b1, d1])]},
      {network, s2, #{height => 2500}, [{node, c1}, rack250(s2r2, [d2, j1])]}]}.

rack250(Name, Nodes) -> {network, Name, #{height => 250}, [{node, N} || N <- Nodes]}.

%% The true round trip, up to 5% more (fixed per pair); a1's fail.
measure52() ->
    {ok, T} = terrain_topology:new(truth52()),
    fun(A, B) when A =:= a1; B =:= a1 -> {error, timeout};
       (A, B) -> {ok, terrain_topology:distance(T, A, B) * (1 + (erlang:phash2({A, B}) rem 50) / 1000)}
    end.

%% The live server's re-measurements in the order of Next (terrain_live: out of the
%% tree and in again; a node kept by misplaced/5 goes after the nodes it names).
remeasure_all(Tree, [], _Measure) ->
    Tree;
remeasure_all(Tree, [Node | Rest], Measure) ->
    {ok, Without} = terrain_live_tree:remove(Node, Tree),
    {ok, New, Pairs} = terrain:insert_node(Node, Without, Measure, #{name => Node}),
    case terrain_live_tree:misplaced(Node, Tree, New, Pairs, 0) of
        move -> remeasure_all(New, Rest, Measure);
        {keep, []} -> remeasure_all(Tree, Rest, Measure);
        {keep, Others} -> remeasure_all(Tree, Others ++ [Node | Rest -- [Node | Others]], Measure)
    end.

%% The sets of nodes under the root's networks (the sites).
sites({network, _, _, Children}) ->
    lists:sort([lists:sort(terrain_live_tree:nodes_of(C)) || {network, _, _, _} = C <- Children]).

a_node_in_place_is_kept_when_its_round_trips_show_others_moved_test() ->
    Measure = measure52(),
    {ok, Without} = terrain_live_tree:remove(b1, stale52()),
    {ok, New, Pairs} = terrain:insert_node(b1, Without, Measure, #{name => b1}),
    {keep, Others} = terrain_live_tree:misplaced(b1, stale52(), New, Pairs, 0),
    %% the insertion alone would follow d1 (0.25 ms) into s2: the tree is stale about d1
    ?assert(lists:member(d1, Others)),
    ?assertNot(lists:member(a2, Others)),
    ?assertNotEqual(sites(stale52()), sites(New)).

a_moved_node_is_moved_test() ->
    Measure = measure52(),
    {ok, Without} = terrain_live_tree:remove(d1, stale52()),
    {ok, New, Pairs} = terrain:insert_node(d1, Without, Measure, #{name => d1}),
    ?assertEqual(move, terrain_live_tree:misplaced(d1, stale52(), New, Pairs, 0)),
    ?assert(lists:member([a1, a2, b1, d1, j1], sites(New))).

%% Whatever node is re-measured first, the re-measurements bring the stale tree's
%% sites to the true ones (on the old code, which moved every node its insertion
%% moved, a first b1 followed d1 into s2, and a1, down, ended in a site of its own
%% or in c1's).
re_measurements_bring_a_stale_tree_to_the_true_sites_in_any_order_test() ->
    Measure = measure52(),
    Nodes = [a2, b1, c1, d1, d2, j1],
    Orders = [[First | Nodes -- [First]] || First <- Nodes] ++ [lists:reverse(Nodes)],
    [?assertEqual({Order, sites(truth52())}, {Order, sites(remeasure_all(stale52(), Order ++ Order, Measure))})
     || Order <- Orders].

%% 3 sites x 3 racks x 2 nodes; `x' moved from the first rack of s1 to its second.
grid(XRack) ->
    {network, root, #{height => 25000},
     [{network, S, #{height => 2500},
       [rack250(list_to_atom(lists:concat([S, r, R])),
                [list_to_atom(lists:concat([S, r, R, n, N])) || N <- [1, 2]] ++ [x || {S, R} =:= XRack])
        || R <- [1, 2, 3]]} || S <- [s1, s2, s3]]}.

%% A move within a site changes few round trips (those to the two racks); the node and
%% its old and new rack mates, re-measured first, do not keep each other in place.
a_node_moved_within_its_site_is_moved_whoever_is_re_measured_first_test() ->
    {ok, T} = terrain_topology:new(grid({s1, 2})),
    Measure = fun(A, B) -> {ok, terrain_topology:distance(T, A, B) * (1 + (erlang:phash2({A, B}) rem 50) / 1000)} end,
    Nodes = terrain_live_tree:nodes_of(grid({s1, 1})),
    [?assertEqual({First, lists:sort([x, s1r2n1, s1r2n2])},
                  {First, rack_of(x, remeasure_all(grid({s1, 1}), [First | Nodes -- [First]], Measure))})
     || First <- [x, s1r1n1, s1r2n1, s2r1n1]].

%% The nodes of the lowest network that holds Node.
rack_of(Node, Tree) ->
    {ok, T} = terrain_topology:new(Tree),
    lists:sort(terrain_topology:disc(T, Node, 250)).
