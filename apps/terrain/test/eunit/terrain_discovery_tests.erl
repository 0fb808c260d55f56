%% EUnit for topology discovery: linkage, the α algorithm, automatic α, outlier repair,
%% latency.json reading, rendering, comparison, and the synthetic 1,000-node accuracy
%% checks of issue 6.
-module(terrain_discovery_tests).
-include_lib("eunit/include/eunit.hrl").

%%--------------------------------------------------------------------
%% Linkage

three_points_complete_test() ->
    M = terrain_linkage:from_rows([[0, 1, 5], [1, 0, 4], [5, 4, 0]]),
    ?assertEqual([{0, 1, 1.0, 2}, {2, 3, 5.0, 3}], terrain_linkage:linkage(M, complete)),
    ?assertEqual([{0, 1, 1.0, 2}, {2, 3, 4.0, 3}], terrain_linkage:linkage(M, single)),
    ?assertEqual([{0, 1, 1.0, 2}, {2, 3, 4.5, 3}], terrain_linkage:linkage(M, average)).

linkage_leaves_the_matrix_unchanged_test() ->
    M = terrain_linkage:from_rows([[0, 1, 5], [1, 0, 4], [5, 4, 0]]),
    _ = terrain_linkage:linkage(M, average),
    ?assertEqual([1.0, 5.0, 4.0], [terrain_linkage:get(M, 0, 1), terrain_linkage:get(M, 0, 2), terrain_linkage:get(M, 1, 2)]).

zero_and_one_point_have_no_merges_test() ->
    ?assertEqual([], terrain_linkage:linkage(terrain_linkage:new(0), complete)),
    ?assertEqual([], terrain_linkage:linkage(terrain_linkage:new(1), single)).

matrix_access_is_symmetric_test() ->
    M = terrain_linkage:new(4),
    ok = terrain_linkage:set(M, 3, 1, 2.5),
    ?assertEqual(2.5, terrain_linkage:get(M, 1, 3)),
    ?assertEqual(2.5, terrain_linkage:get(M, 3, 1)),
    ?assertEqual(0.0, terrain_linkage:get(M, 2, 2)),
    ?assertEqual(4, terrain_linkage:size(M)).

matrix_memory_is_eight_bytes_a_pair_test() ->
    M = terrain_linkage:new(1000),
    Pairs = 1000 * 999 div 2,
    ?assert(terrain_linkage:memory(M) >= 8 * Pairs),
    ?assert(terrain_linkage:memory(M) < 8 * Pairs + 1024).

bad_distances_are_refused_test() ->
    ?assertError(badarg, terrain_linkage:from_rows([[0, -1], [-1, 0]])),
    ?assertError(badarg, terrain_linkage:from_rows([[0, 1], [1]])),
    ?assertError(badarg, terrain_linkage:from_rows([[0, x], [x, 0]])),
    ?assertError(badarg, terrain_linkage:from_binary(3, <<0:64>>)).

negative_zero_orders_like_zero_test() ->
    M = terrain_linkage:from_rows([[0, -0.0, 1], [-0.0, 0, 1], [1, 1, 0]]),
    ?assertEqual([{0, 1, 0.0, 2}, {2, 3, 1.0, 3}], terrain_linkage:linkage(M, complete)).

from_binary_reads_scipy_order_test() ->
    Bin = << <<D:64/little-float>> || D <- [1.0, 5.0, 4.0] >>,
    M = terrain_linkage:from_binary(3, Bin),
    ?assertEqual(5.0, terrain_linkage:get(M, 2, 0)),
    ?assertEqual(4.0, terrain_linkage:get(M, 1, 2)).

%%--------------------------------------------------------------------
%% The α algorithm (RELEASE D3.5, §4.5)

%% Two groups: a-b-c within ~1, d-e-f within ~1.3, 10 apart.
six() ->
    terrain_linkage:from_rows([[0,   1.0, 1.2, 10,  10,  10],
                               [1.0, 0,   1.1, 10,  10,  10],
                               [1.2, 1.1, 0,   10,  10,  10],
                               [10,  10,  10,  0,   1.0, 1.25],
                               [10,  10,  10,  1.0, 0,   1.3],
                               [10,  10,  10,  1.25, 1.3, 0]]).

shape({point, P}) -> P;
shape({cluster, _, Children}) -> lists:sort([shape(C) || C <- Children]).

alpha_one_reproduces_the_binary_dendrogram_test() ->
    Tree = terrain_alpha:run(six(), complete, 1.0),
    ?assertEqual([[2, [0, 1]], [5, [3, 4]]], shape(Tree)),
    ?assertMatch({cluster, 10.0, _}, Tree).

alpha_above_the_spread_makes_flat_clusters_test() ->
    Tree = terrain_alpha:run(six(), complete, 1.3),
    ?assertEqual([[0, 1, 2], [3, 4, 5]], shape(Tree)),
    {cluster, 10.0, [{cluster, H1, _}, {cluster, H2, _}]} = Tree,
    %% heights are diameters: the largest distance inside each cluster
    ?assertEqual([1.2, 1.3], lists:sort([H1, H2])).

large_alpha_makes_one_cluster_test() ->
    Tree = terrain_alpha:run(six(), complete, 10.0),
    ?assertEqual([0, 1, 2, 3, 4, 5], shape(Tree)),
    ?assertMatch({cluster, 10.0, _}, Tree).

expansion_remeasures_the_diameter_test() ->
    %% a-b at 1; c is 1.5 from both (absorbed at α = 1.5, δ becomes 1.5); d is 2.2
    %% from a, b, c: absorbed only because δ grew (2.2 ≤ 1.5 × 1.5).
    M = terrain_linkage:from_rows([[0, 1, 1.5, 2.2, 9], [1, 0, 1.5, 2.2, 9], [1.5, 1.5, 0, 2.2, 9],
                                   [2.2, 2.2, 2.2, 0, 9], [9, 9, 9, 9, 0]]),
    ?assertEqual([4, [0, 1, 2, 3]], shape(terrain_alpha:run(M, complete, 1.5))),
    ?assertEqual([4, [3, [2, [0, 1]]]], shape(terrain_alpha:run(M, complete, 1.4))).

%% PropEr counterexample (prop_large_alpha_gives_one_cluster): d = 24, 52, 23. At α
%% exactly 52/23 the test d(x, K) ≤ α δ compares 52 with (52/23) × 23, which rounds
%% below 52: point 0 stays out. Just above the ratio, one cluster.
alpha_at_the_exact_ratio_test() ->
    M = terrain_linkage:from_rows([[0, 24, 52], [24, 0, 23], [52, 23, 0]]),
    ?assert((52 / 23) * 23 < 52),
    ?assertEqual([0, [1, 2]], shape(terrain_alpha:run(M, complete, 52 / 23))),
    ?assertEqual([0, 1, 2], shape(terrain_alpha:run(M, complete, 52 / 23 * (1 + 1.0e-9)))).

%% PropEr counterexample (prop_auto_recovers_random_hierarchies, complete linkage,
%% σ = 0.04): two nodes directly under the root drew a low round trip (327 µs of 360),
%% while complete linkage puts the rest of the tree at its largest round trip (395 µs):
%% the pair held over α in [1, 1.21), wide enough to count as a level. Average linkage,
%% the default, measures the rest by its mean and finds the true tree.
complete_linkage_spurious_pair_test() ->
    H = {net, [leaf, {net, [{net, [leaf, leaf]}, {net, [leaf, leaf]}]}, leaf]},
    {Truth, Rows, Nodes} = prop_discovery:realise(H, 57, 0.04),
    Latency = #{nodes => Nodes, stats => #{min => Rows}},
    {ok, Complete} = terrain_discovery:discover(Latency, #{linkage => complete}),
    ?assertMatch({ok, #{clade_precision := 0.75}}, terrain_tree_compare:compare(terrain_discovery:topology(Complete), Truth)),
    {ok, Average} = terrain_discovery:discover(Latency, #{}),
    ?assertMatch({ok, #{clade_precision := 1.0, clade_recall := 1.0}},
                 terrain_tree_compare:compare(terrain_discovery:topology(Average), Truth)).

bottom_partition_test() ->
    Tree = terrain_alpha:run(six(), complete, 1.0),
    ?assertEqual([[0, 1], [2], [3, 4], [5]], terrain_alpha:bottom_partition(Tree)).

auto_alpha_finds_the_two_groups_test() ->
    {Tree, Levels} = terrain_alpha:auto(six(), complete, #{}),
    ?assertEqual([[0, 1, 2], [3, 4, 5]], shape(Tree)),
    ?assertMatch([#{points := 6, clusters := 2}, #{points := 2, clusters := 1}], Levels),
    [#{alpha := A, plateau := {Lo, Hi}} | _] = Levels,
    ?assert(Lo =< A andalso A =< Hi),
    ?assert(Lo >= 1.3 - 0.1).

%% One α cannot fit all scales (RELEASE D3.5's open problem): 2 sites × 2 racks × 4 nodes;
%% round trips inside a rack spread from 10 to 22 µs (α ≥ 1.7 makes racks flat), racks
%% of a site are 100 apart and sites 150 (α < 1.5 keeps the sites apart).
per_level_alpha_test() ->
    D = fun(I, J) ->
                RackI = I div 4, RackJ = J div 4,
                if
                    RackI =:= RackJ -> 10 + ((I * 7 + J * 3 + RackI * 5) rem 13);
                    RackI div 2 =:= RackJ div 2 -> 100;
                    true -> 150
                end
        end,
    M = terrain_linkage:from_fun(16, D),
    Expected = [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13, 14, 15]]],
    {Tree, Levels} = terrain_alpha:auto(M, complete, #{}),
    ?assertEqual(Expected, shape(Tree)),
    [#{alpha := A1, clusters := 4}, #{alpha := A2, clusters := 2}, #{alpha := none, clusters := 1}] = Levels,
    ?assert(A1 >= 1.7, Levels),
    ?assert(A2 < 1.5, Levels),
    %% no single α on a fine grid gives this tree
    [?assertNotEqual(Expected, shape(terrain_alpha:run(M, complete, 1.0 + K / 20))) || K <- lists:seq(0, 80)],
    %% and discovery reports that no single α fits
    Names = [list_to_atom("n" ++ integer_to_list(I)) || I <- lists:seq(0, 15)],
    Rows = [[if I =:= J -> 0; true -> D(min(I, J), max(I, J)) end || J <- lists:seq(0, 15)] || I <- lists:seq(0, 15)],
    {ok, R} = terrain_discovery:discover(#{nodes => Names, stats => #{min => Rows}}, #{outliers => keep}),
    ?assertMatch(#{single_alpha := none}, R).

%%--------------------------------------------------------------------
%% Discovery: options, latency.json, rendering

latency(Rows) ->
    #{nodes => ['a@h', 'b@h', 'c@h', 'd@h'], stats => #{median => Rows, min => Rows}}.

four_rows() ->
    [[0, 100, 900, 950],
     [110, 0, 920, 940],
     [null, 905, 0, 120],
     [960, 930, 115, 0]].

discover_small_test() ->
    {ok, R} = terrain_discovery:discover(latency(four_rows()), #{}),
    Tree = terrain_discovery:topology(R),
    %% symmetrise min: d(a, b) = min(100, 110); c -> a is null, so d(a, c) = 900
    ?assertMatch({network, c, #{height := 950.0}, [{network, c1, #{height := 100.0}, [{node, 'a@h'}, {node, 'b@h'}]},
                                                   {network, c2, #{height := 115.0}, [{node, 'c@h'}, {node, 'd@h'}]}]},
                 Tree),
    ?assertMatch({ok, _}, terrain_topology:new(Tree)).

symmetrise_options_test() ->
    {ok, Max} = terrain_discovery:discover(latency(four_rows()), #{symmetrise => max, outliers => keep}),
    ?assertMatch({network, c, _, [{network, c1, #{height := 110.0}, _}, {network, c2, #{height := 120.0}, _}]},
                 terrain_discovery:topology(Max)),
    {ok, Mean} = terrain_discovery:discover(latency(four_rows()), #{symmetrise => mean, outliers => keep}),
    ?assertMatch({network, c, _, [{network, c1, #{height := 105.0}, _}, {network, c2, #{height := 117.5}, _}]},
                 terrain_discovery:topology(Mean)).

fixed_alpha_test() ->
    {ok, R} = terrain_discovery:discover(latency(four_rows()), #{alpha => 1.0, linkage => single}),
    ?assertNot(maps:is_key(levels, R)),
    ?assertMatch({network, c, _, [_, _]}, terrain_discovery:topology(R)).

one_node_test() ->
    {ok, R} = terrain_discovery:discover(#{nodes => ['a@h'], stats => #{min => [[0]]}}, #{}),
    ?assertEqual({network, c, #{height => 0.0}, [{node, 'a@h'}]}, terrain_discovery:topology(R)).

bad_options_test_() ->
    L = latency(four_rows()),
    [?_assertMatch({error, {discovery, {bad_option, linkage, ward}}}, terrain_discovery:discover(L, #{linkage => ward})),
     ?_assertMatch({error, {discovery, {bad_option, alpha, 0.5}}}, terrain_discovery:discover(L, #{alpha => 0.5})),
     ?_assertMatch({error, {discovery, {unknown_option, colour}}}, terrain_discovery:discover(L, #{colour => red})),
     ?_assertMatch({error, {discovery, {no_statistic, p95}}}, terrain_discovery:discover(L, #{statistic => p95})),
     ?_assertMatch({error, {discovery, {bad_option, outlier_factor, 1}}},
                   terrain_discovery:discover(L, #{outlier_factor => 1}))].

bad_matrices_test_() ->
    Rows = four_rows(),
    Missing = [[0, null, 1, 1], [null, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]],
    Negative = [[0, -3, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]],
    [?_assertMatch({ok, #{missing := 1}}, terrain_discovery:discover(latency(Missing), #{})),
     ?_assertMatch({error, {discovery, {bad_value, 'a@h', 'b@h', -3}}}, terrain_discovery:discover(latency(Negative), #{})),
     ?_assertMatch({error, {discovery, {not_square, min, 4}}},
                   terrain_discovery:discover(latency(tl(Rows)), #{})),
     ?_assertMatch({error, {discovery, {not_square, min, 4}}},
                   terrain_discovery:discover(latency([tl(R) || R <- Rows]), #{}))].

error_sentences_test_() ->
    [?_assertEqual("bad value for option linkage: ward (complete, average or single)",
                   flat(terrain_discovery:format_error({discovery, {bad_option, linkage, ward}}))),
     ?_assertEqual("x.json: not a latency matrix: unknown format <<\"terrain.durations/1\">> (expected \"terrain.latency/1\")",
                   flat(terrain_discovery:format_error({discovery, {latency, "x.json", {format, <<"terrain.durations/1">>}}})))].

flat(IoList) ->
    lists:flatten(io_lib:format("~ts", [IoList])).

read_latency_test() ->
    Dir = tmp_dir(),
    File = filename:join(Dir, "latency.json"),
    ok = terrain_json:write_file(File, #{format => <<"terrain.latency/1">>, nodes => [<<"a@h">>, <<"b@h">>],
                                         unit => <<"us">>, strategy => <<"concurrent">>, batches => 10,
                                         messages => 5, payload_bytes => 0, started_at => <<"2026-01-01T00:00:00Z">>,
                                         stats => #{median => [[0, 10], [12, 0]], min => [[0, 9], [9, 0]]}}),
    {ok, L} = terrain_discovery:read_latency(File),
    ?assertMatch(#{nodes := ['a@h', 'b@h'], strategy := <<"concurrent">>, stats := #{median := [[0, 10], [12, 0]]}}, L),
    Other = filename:join(Dir, "other.json"),
    ok = terrain_json:write_file(Other, #{format => <<"terrain.manifest/1">>}),
    ?assertMatch({error, {discovery, {latency, _, {format, <<"terrain.manifest/1">>}}}},
                 terrain_discovery:read_latency(Other)),
    ?assertMatch({error, {file, _, enoent}}, terrain_discovery:read_latency(filename:join(Dir, "none.json"))).

render_test() ->
    {ok, R} = terrain_discovery:discover(latency(four_rows()), #{}),
    Dot = iolist_to_binary(terrain_discovery:render(R, dot)),
    ?assertMatch({_, _}, binary:match(Dot, <<"shape=ellipse">>)),
    ?assertMatch({_, _}, binary:match(Dot, <<"shape=box">>)),
    ?assertMatch({_, _}, binary:match(Dot, <<"height 950">>)),
    Newick = iolist_to_binary(terrain_discovery:render(R, newick)),
    %% branch lengths: parent height minus own height (terrain_topology's convention)
    ?assertMatch({match, _}, re:run(Newick, "^\\(\\(a@h:100(\\.0)?,b@h:100(\\.0)?\\)c1:850(\\.0)?,"
                                            "\\(c@h:115(\\.0)?,d@h:115(\\.0)?\\)c2:835(\\.0)?\\)c;\n$")),
    {ok, Json} = terrain_json:decode(terrain_discovery:render(R, json)),
    ?assertMatch(#{<<"format">> := <<"terrain.topology/1">>,
                   <<"discovery">> := #{<<"linkage">> := <<"average">>, <<"alpha">> := <<"auto">>,
                                        <<"statistic">> := <<"min">>, <<"levels">> := [_, _]},
                   <<"tree">> := #{<<"name">> := <<"c">>, <<"height">> := 950.0}}, Json),
    {ok, [Term]} = consult(terrain_discovery:render(R, term)),
    ?assertEqual(terrain_discovery:topology(R), Term).

consult(Text) ->
    File = filename:join(tmp_dir(), "t.term"),
    ok = file:write_file(File, Text),
    file:consult(File).

tmp_dir() ->
    Dir = filename:join(["/tmp", "terrain_discovery_tests_" ++ os:getpid()]),
    ok = filelib:ensure_path(Dir),
    Dir.

%%--------------------------------------------------------------------
%% Outlier repair

repair_replaces_only_far_values_test() ->
    %% two groups; one pair inside the first inflated ×5
    M = terrain_linkage:from_rows([[0, 10, 50, 100], [10, 0, 10, 100], [50, 10, 0, 100], [100, 100, 100, 0]]),
    Tree = {cluster, 100.0, [{cluster, 10.0, [{point, 0}, {point, 1}, {point, 2}]}, {point, 3}]},
    {Repaired, Count} = terrain_discovery:repair(M, Tree, 3),
    ?assertEqual(1, Count),
    ?assertEqual(10.0, terrain_linkage:get(Repaired, 0, 2)),
    ?assertEqual(50.0, terrain_linkage:get(M, 0, 2)),
    ?assertEqual(100.0, terrain_linkage:get(Repaired, 0, 3)).

%%--------------------------------------------------------------------
%% Comparison

compare_identical_test() ->
    T = {network, r, [{network, a, [{node, x1}, {node, x2}]}, {network, b, [{node, y1}, {node, y2}, {node, y3}]}]},
    ?assertMatch({ok, #{levels := [#{level := 1, ari := 1.0, truth_clusters := 2}],
                        clade_recall := 1.0, clade_precision := 1.0, truth_clades := 2}},
                 terrain_tree_compare:compare(T, T)).

compare_flat_found_test() ->
    Truth = {network, r, [{network, a, [{node, x1}, {node, x2}]}, {network, b, [{node, y1}, {node, y2}]}]},
    Flat = {network, r, #{height => 5}, [{node, x1}, {node, x2}, {node, y1}, {node, y2}]},
    {ok, #{levels := [#{ari := Ari, found_clusters := 4}], clade_recall := Recall}} =
        terrain_tree_compare:compare(Flat, Truth),
    ?assertEqual(0.0, Ari),
    ?assertEqual(0.0, Recall).

compare_needs_the_same_nodes_test() ->
    A = {network, [{node, x}, {node, y}]},
    B = {network, [{node, x}, {node, z}]},
    ?assertEqual({error, {compare, {different_nodes, [y], [z]}}}, terrain_tree_compare:compare(A, B)),
    ?assertEqual("the trees have different nodes: only in the found tree y; only in the true tree z",
                 flat(terrain_tree_compare:format_error({compare, {different_nodes, [y], [z]}}))).

adjusted_rand_index_known_value_test() ->
    %% scikit-learn: adjusted_rand_score([0, 0, 1, 1], [0, 0, 1, 2]) = 0.5714285714285715
    ?assert(abs(terrain_tree_compare:adjusted_rand_index([[a, b], [c, d]], [[a, b], [c], [d]]) - 0.5714285714285715) < 1.0e-12).

level_partition_keeps_shallow_nodes_alone_test() ->
    T = {network, r, [{node, z}, {network, a, [{network, a1, [{node, x1}, {node, x2}]}, {node, x3}]}]},
    ?assertEqual([[x1, x2, x3], [z]], terrain_tree_compare:level_partition(T, 1)),
    ?assertEqual([[x1, x2], [x3], [z]], terrain_tree_compare:level_partition(T, 2)),
    ?assertEqual(3, terrain_tree_compare:depth(T)).

%%--------------------------------------------------------------------
%% Accuracy on synthetic 1,000-node matrices (issue 6): 5 × 10 × 20, round trips
%% 8000 / 1000 / 100 µs, 10% lognormal jitter.

synthetic(Inflate) ->
    terrain_synthetic:hierarchy(#{shape => [5, 10, 20], heights => [8000, 1000, 100], jitter => 0.1,
                                  inflate => Inflate, seed => 2026}).

aris(Found, Truth) ->
    {ok, #{levels := Levels} = Report} = terrain_tree_compare:compare(Found, Truth),
    {[A || #{ari := A} <- Levels], Report}.

synthetic_1000_clean_test_() ->
    {timeout, 600,
     fun() ->
             {Latency, Truth} = synthetic({0.0, 1}),
             {ok, R} = terrain_discovery:discover(Latency, #{}),
             {Aris, Report} = aris(terrain_discovery:topology(R), Truth),
             ?assertEqual([1.0, 1.0], Aris),
             ?assertMatch(#{clade_recall := 1.0, clade_precision := 1.0}, Report),
             ?assertMatch({ok, _}, terrain_topology:new(terrain_discovery:topology(R)))
     end}.

synthetic_1000_with_outliers_test_() ->
    {timeout, 600,
     fun() ->
             {Latency, Truth} = synthetic({0.01, 5}),
             {ok, R} = terrain_discovery:discover(Latency, #{}),
             {Aris, _} = aris(terrain_discovery:topology(R), Truth),
             [?assert(A >= 0.95, Aris) || A <- Aris],
             #{repaired := Repaired} = R,
             %% about 1% of 499,500 pairs were inflated
             ?assert(Repaired > 4000 andalso Repaired < 6000, Repaired)
     end}.

%% RELEASE D3.5's method (complete linkage, no repair) on the same matrix: the outliers
%% break the hierarchy — the weakness the repair and average linkage exist for.
synthetic_1000_outliers_break_plain_complete_linkage_test_() ->
    {timeout, 600,
     fun() ->
             {Latency, Truth} = synthetic({0.01, 5}),
             {ok, R} = terrain_discovery:discover(Latency, #{linkage => complete, outliers => keep}),
             {_, #{clade_precision := Precision}} = aris(terrain_discovery:topology(R), Truth),
             ?assert(Precision < 0.95, Precision)
     end}.

%% Partial matrices (a tree probe, a budget that ended): a clean three-level matrix of
%% 256 nodes (4 x 8 x 8, 2% jitter, no outliers) with half of the pairs missing at
%% random, both directions, every node keeping at least 10 measured pairs: the result
%% counts the missing pairs, names undetermined exactly the nodes left without a
%% measured pair to any of their rack mates (with half the pairs gone, one node in
%% 2^7: here n0119, whose rack nothing measured supports), and is exact on the others.
partial_matrix_256_half_missing_test_() ->
    {timeout, 120, fun partial_matrix_256_half_missing/0}.

partial_matrix_256_half_missing() ->
    Options = #{shape => [4, 8, 8], heights => [8000, 1000, 100], jitter => 0.02},
    {#{nodes := Nodes, stats := #{min := Rows}}, Truth} = terrain_synthetic:hierarchy(Options),
    N = length(Nodes),
    {Drop, _} = lists:mapfoldl(fun(_, S) -> rand:uniform_s(S) end, rand:seed_s(exsss, 7),
                               lists:seq(1, N * N)),
    DropT = list_to_tuple(Drop),
    Missing = fun(I, J) -> element(min(I, J) * N + max(I, J) + 1, DropT) < 0.5 end,
    Partial = [[case I =/= J andalso Missing(I, J) of true -> null; false -> V end
                || {J, V} <- lists:zip(lists:seq(0, N - 1), Row)]
               || {I, Row} <- lists:zip(lists:seq(0, N - 1), Rows)],
    Kept = [length([V || V <- Row, V =/= null]) - 1 || Row <- Partial],
    ?assert(lists:min(Kept) >= 10),
    Gone = length([x || I <- lists:seq(0, N - 1), J <- lists:seq(I + 1, N - 1), Missing(I, J)]),
    Alone = [lists:nth(I + 1, Nodes) || I <- lists:seq(0, N - 1),
                                       lists:all(fun(J) -> J =:= I orelse Missing(I, J) end,
                                                 lists:seq(I - I rem 8, I - I rem 8 + 7))],
    {ok, #{missing := Gone, undetermined := Undetermined} = R} =
        terrain_discovery:discover(#{nodes => Nodes, stats => #{min => Partial}}, #{}),
    ?assert(Gone > N * (N - 1) div 2 * 0.45),
    ?assertEqual(Alone, Undetermined),
    %% exact on every other node: the same clades once the undetermined are left out
    ?assertEqual(clades_without(Truth, Undetermined), clades_without(terrain_discovery:topology(R), Undetermined)).

clades_without(Tree, Out) ->
    lists:usort([C || C <- [lists:sort(terrain_tree_compare:nodes(Net) -- Out) || Net <- networks(Tree)],
                      length(C) >= 2]) -- [lists:sort(terrain_tree_compare:nodes(Tree) -- Out)].

networks({node, _}) -> [];
networks(Net) -> [Net | lists:append([networks(C) || C <- element(tuple_size(Net), Net)])].

%% A node measured only against the far side of the tree cannot be placed inside its
%% own group: it is named undetermined, not guessed silently.
undetermined_node_test() ->
    Options = #{shape => [2, 3], heights => [1000, 100], jitter => 0.0},
    {#{nodes := Nodes, stats := #{min := Rows}}, _Truth} = terrain_synthetic:hierarchy(Options),
    %% n0000 is in the first group (n0000..n0002); keep only its pairs to the second group
    [First | _] = Nodes,
    Blind = fun(I, J) -> (I =:= 0 andalso J > 0 andalso J < 3) orelse (J =:= 0 andalso I > 0 andalso I < 3) end,
    Partial = [[case Blind(I, J) of true -> null; false -> V end
                || {J, V} <- lists:zip(lists:seq(0, length(Nodes) - 1), Row)]
               || {I, Row} <- lists:zip(lists:seq(0, length(Nodes) - 1), Rows)],
    {ok, #{missing := 2, undetermined := Undetermined}} =
        terrain_discovery:discover(#{nodes => Nodes, stats => #{min => Partial}}, #{}),
    ?assert(lists:member(First, Undetermined)).
