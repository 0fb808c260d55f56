%% Properties of topology discovery.
%%
%% The fast algorithms agree with naive references that follow the definitions
%% literally (recompute every cluster distance from the points, merge the globally
%% closest pair): the nearest-neighbour chain linkage for complete, average and single
%% linkage, and the α algorithm for any α. Random matrices have distinct distances, so
%% the answer is unique. α trees have heights that never grow towards the leaves, a
%% large α gives one cluster, and automatic α recovers random hierarchies exactly.
-module(prop_discovery).
-include_lib("proper/include/proper.hrl").

-export([prop_linkage_matches_naive/0,
         prop_alpha_matches_naive/0,
         prop_alpha_heights_never_grow_downwards/0,
         prop_large_alpha_gives_one_cluster/0,
         prop_auto_recovers_random_hierarchies/0,
         prop_adjusted_rand_index_is_symmetric_and_bounded/0]).

%% Reference implementations, also used by the EUnit tests.
-export([naive_linkage/2, naive_alpha/3, realise/3]).

%%--------------------------------------------------------------------
%% Generators

method() ->
    oneof([complete, average, single]).

%% {N, Rows}: a symmetric matrix of positive distances drawn from a seeded uniform
%% distribution: distinct, and no two means of subsets are equal either, so that
%% average linkage has no ties.
matrix() ->
    ?LET({N, Seed}, {range(2, 11), integer(1, 1 bsl 30)},
         begin
             {Values, _} = lists:mapfoldl(fun(_, S) -> {U, S1} = rand:uniform_s(S), {1 + 999 * U, S1} end,
                                          rand:seed_s(exsss, Seed), lists:seq(1, N * (N - 1) div 2)),
             {N, rows(N, Values)}
         end).

rows(N, Upper) ->
    T = list_to_tuple(Upper),
    [[if I =:= J -> 0;
         I < J -> element(terrain_linkage:index(N, I, J), T);
         true -> element(terrain_linkage:index(N, J, I), T)
      end || J <- lists:seq(0, N - 1)] || I <- lists:seq(0, N - 1)].

%% A random hierarchy: every network has 2..4 children, networks or nodes; at most 3
%% levels of networks.
hierarchy() ->
    ?SIZED(Size, hierarchy(min(3, 1 + Size div 30))).

hierarchy(0) ->
    ?LET(K, range(2, 4), {net, lists:duplicate(K, leaf)});
hierarchy(Depth) ->
    ?LET(Kids, vector_between(2, 4, oneof([leaf, ?LAZY(hierarchy(Depth - 1))])), {net, Kids}).

vector_between(Lo, Hi, G) ->
    ?LET(N, range(Lo, Hi), vector(N, G)).

%%--------------------------------------------------------------------
%% Properties

prop_linkage_matches_naive() ->
    ?FORALL({{N, Rows}, Method}, {matrix(), method()},
            begin
                Merges = terrain_linkage:linkage(terrain_linkage:from_rows(Rows), Method),
                Fast = [{members(C, N, Merges), H} || {_, _, H, _} = C <- Merges],
                Naive = naive_linkage(Rows, Method),
                Heights = [H || {_, _, H, _} <- Merges],
                ?WHENFAIL(io:format("fast ~p~nnaive ~p~n", [Fast, Naive]),
                          same_merges(lists:sort(Fast), lists:sort(Naive))
                          andalso Heights =:= lists:sort(Heights)
                          andalso [S || {_, _, _, S} <- Merges] =:= [length(M) || {M, _} <- Fast])
            end).

prop_alpha_matches_naive() ->
    ?FORALL({{_N, Rows}, Method, Tenths}, {matrix(), method(), range(10, 30)},
            begin
                Alpha = Tenths / 10,
                Fast = canonical(terrain_alpha:run(terrain_linkage:from_rows(Rows), Method, Alpha)),
                Naive = canonical(naive_alpha(Rows, Method, Alpha)),
                ?WHENFAIL(io:format("alpha ~p ~p~nfast ~p~nnaive ~p~n", [Alpha, Method, Fast, Naive]),
                          same_tree(Fast, Naive))
            end).

prop_alpha_heights_never_grow_downwards() ->
    ?FORALL({{_N, Rows}, Method, Tenths}, {matrix(), method(), range(10, 40)},
            monotone(terrain_alpha:run(terrain_linkage:from_rows(Rows), Method, Tenths / 10))).

prop_large_alpha_gives_one_cluster() ->
    ?FORALL({{N, Rows}, Method}, {matrix(), method()},
            begin
                Ds = [D || R <- Rows, D <- R, D > 0],
                %% just above the ratio: exactly at it, the rounding of α δ decides
                %% (regression: terrain_discovery_tests:alpha_at_the_exact_ratio_test)
                Alpha = lists:max(Ds) / lists:min(Ds) * (1 + 1.0e-9),
                {cluster, _, Children} = terrain_alpha:run(terrain_linkage:from_rows(Rows), Method, Alpha),
                length(Children) =:= N
            end).

%% Levels at least 6× apart: automatic α finds the exact tree, with the default
%% average linkage under lognormal jitter σ = 0.04, and with complete linkage under
%% σ = 0.02. (Complete linkage compares the largest of many jittered round trips with
%% single ones; at σ = 0.04 two nodes directly under the root can form a spurious
%% cluster: terrain_discovery_tests:complete_linkage_spurious_pair_test.)
prop_auto_recovers_random_hierarchies() ->
    ?FORALL({H, Seed, {Method, Sigma}}, {hierarchy(), integer(1, 1000000),
                                         oneof([{average, 0.04}, {complete, 0.02}])},
            begin
                {Truth, Rows, Nodes} = realise(H, Seed, Sigma),
                {ok, R} = terrain_discovery:discover(#{nodes => Nodes, stats => #{min => Rows}},
                                                     #{linkage => Method}),
                Found = terrain_discovery:topology(R),
                {ok, Report} = terrain_tree_compare:compare(Found, Truth),
                ?WHENFAIL(io:format("truth ~p~nfound ~p~nreport ~p~n", [Truth, Found, Report]),
                          lists:all(fun(#{ari := A}) -> A == 1.0 end, maps:get(levels, Report))
                          andalso maps:get(clade_recall, Report) == 1.0
                          andalso maps:get(clade_precision, Report) == 1.0)
            end).

prop_adjusted_rand_index_is_symmetric_and_bounded() ->
    ?FORALL({A, B}, {vector(12, range(1, 4)), vector(12, range(1, 4))},
            begin
                P1 = partition(A),
                P2 = partition(B),
                X = terrain_tree_compare:adjusted_rand_index(P1, P2),
                Y = terrain_tree_compare:adjusted_rand_index(P2, P1),
                abs(X - Y) < 1.0e-12 andalso X =< 1.0 + 1.0e-12 andalso X >= -1.0
                    andalso terrain_tree_compare:adjusted_rand_index(P1, P1) == 1.0
            end).

%%--------------------------------------------------------------------
%% Naive references

%% The merges as {Members, Height}, merging the globally closest pair each time.
naive_linkage(Rows, Method) ->
    N = length(Rows),
    D = dist(Rows),
    naive_linkage(D, Method, [[I] || I <- lists:seq(0, N - 1)], []).

naive_linkage(_D, _Method, [_], Acc) ->
    lists:reverse(Acc);
naive_linkage(D, Method, Clusters, Acc) ->
    {H, A, B} = lists:min([{cluster_distance(D, Method, A, B), A, B} || A <- Clusters, B <- Clusters, A < B]),
    naive_linkage(D, Method, [lists:sort(A ++ B) | (Clusters -- [A, B])], [{lists:sort(A ++ B), float(H)} | Acc]).

%% RELEASE D3.5's α algorithm, literally: trees over point lists.
naive_alpha(Rows, Method, Alpha) ->
    N = length(Rows),
    naive_alpha(dist(Rows), Method, Alpha, [{[I], {point, I}, 0.0} || I <- lists:seq(0, N - 1)]).

naive_alpha(_D, _Method, _Alpha, [{_, Tree, _}]) ->
    Tree;
naive_alpha(D, Method, Alpha, Clusters) ->
    {Dab, {Pa, Ta, Ha} = A, {Pb, Tb, Hb} = B} =
        lists:min([{cluster_distance(D, Method, Pa, Pb), Ca, Cb}
                   || {Pa, _, _} = Ca <- Clusters, {Pb, _, _} = Cb <- Clusters, Pa < Pb]),
    Delta = lists:max([float(Dab), Ha, Hb]),
    expand(D, Method, Alpha, Pa ++ Pb, Delta, [Ta, Tb], Clusters -- [A, B]).

expand(D, Method, Alpha, Points, Delta, Children, []) ->
    naive_alpha(D, Method, Alpha, [{lists:sort(Points), {cluster, Delta, Children}, Delta}]);
expand(D, Method, Alpha, Points, Delta, Children, Others) ->
    {Dx, {Px, Tx, Hx} = X} = lists:min([{cluster_distance(D, Method, Points, P), C} || {P, _, _} = C <- Others]),
    case Dx =< Alpha * Delta of
        true -> expand(D, Method, Alpha, Points ++ Px, lists:max([Delta, float(Dx), Hx]), [Tx | Children], Others -- [X]);
        false -> naive_alpha(D, Method, Alpha, [{lists:sort(Points), {cluster, Delta, Children}, Delta} | Others])
    end.

dist(Rows) ->
    T = list_to_tuple([list_to_tuple(R) || R <- Rows]),
    fun(I, J) -> element(J + 1, element(I + 1, T)) end.

cluster_distance(D, complete, A, B) -> lists:max([D(I, J) || I <- A, J <- B]);
cluster_distance(D, single, A, B) -> lists:min([D(I, J) || I <- A, J <- B]);
cluster_distance(D, average, A, B) -> lists:sum([D(I, J) || I <- A, J <- B]) / (length(A) * length(B)).

%%--------------------------------------------------------------------
%% Helpers

members({A, B, _, _}, N, Merges) ->
    lists:sort(cluster_members(A, N, Merges) ++ cluster_members(B, N, Merges)).

cluster_members(C, N, _Merges) when C < N -> [C];
cluster_members(C, N, Merges) -> members(lists:nth(C - N + 1, Merges), N, Merges).

same_merges(A, B) ->
    length(A) =:= length(B)
        andalso lists:all(fun({{Ma, Ha}, {Mb, Hb}}) -> Ma =:= Mb andalso close(Ha, Hb) end, lists:zip(A, B)).

close(A, B) -> abs(A - B) =< 1.0e-9 * max(1.0, abs(B)).

%% {Members, Height, SortedChildren}
canonical({point, P}) -> {[P], 0.0, []};
canonical({cluster, H, Children}) ->
    Kids = lists:sort([canonical(C) || C <- Children]),
    {lists:sort(lists:append([M || {M, _, _} <- Kids])), H, Kids}.

same_tree({M, Ha, Ka}, {M, Hb, Kb}) ->
    close(Ha, Hb) andalso length(Ka) =:= length(Kb) andalso lists:all(fun({A, B}) -> same_tree(A, B) end, lists:zip(Ka, Kb));
same_tree(_, _) ->
    false.

monotone({point, _}) -> true;
monotone({cluster, H, Children}) ->
    lists:all(fun({point, _}) -> true;
                 ({cluster, Hc, _} = C) -> Hc =< H andalso monotone(C)
              end, Children).

partition(Labels) ->
    Groups = lists:foldl(fun({I, L}, Acc) -> maps:update_with(L, fun(Is) -> [I | Is] end, [I], Acc) end,
                         #{}, lists:zip(lists:seq(1, length(Labels)), Labels)),
    maps:values(Groups).

%% A hierarchy made concrete: the true tree, round trips (a network's level ℓ — 1 for
%% one holding only nodes, one more than its highest child network otherwise — gives
%% the round trip 10 × 6^(ℓ−1) µs between nodes whose lowest common network it is,
%% jittered), and node names.
realise(H, Seed, Sigma) ->
    {Tree, _} = name(H, 0, "t"),
    Nodes = terrain_tree_compare:nodes(Tree),
    N = length(Nodes),
    Index = maps:from_list(lists:zip(Nodes, lists:seq(0, N - 1))),
    Heights = heights(Tree, Index, #{}),
    S0 = rand:seed_s(exsss, Seed),
    {Upper, _} = lists:mapfoldl(fun({I, J}, S) ->
                                        {Z, S1} = rand:normal_s(S),
                                        {maps:get({I, J}, Heights) * math:exp(Sigma * Z), S1}
                                end, S0, [{I, J} || I <- lists:seq(0, N - 1), J <- lists:seq(I + 1, N - 1)]),
    {Tree, rows(N, Upper), Nodes}.

name(leaf, Next, _Prefix) ->
    {{node, list_to_atom("n" ++ integer_to_list(Next))}, Next + 1};
name({net, Kids}, Next, Prefix) ->
    {Children, Next1} = lists:mapfoldl(fun({K, Kid}, Acc) -> name(Kid, Acc, Prefix ++ "_" ++ integer_to_list(K)) end,
                                       Next, lists:zip(lists:seq(1, length(Kids)), Kids)),
    {{network, list_to_atom(Prefix), Children}, Next1}.

level({node, _}) -> 0;
level({network, _, Children}) -> 1 + lists:max([level(C) || C <- Children]).

%% The round trip of every pair {I, J}, I < J, from its lowest common network.
heights({node, _}, _Index, Acc) ->
    Acc;
heights({network, _, Children} = Net, Index, Acc) ->
    H = 10 * math:pow(6, level(Net) - 1),
    Sets = [[maps:get(N, Index) || N <- terrain_tree_compare:nodes(C)] || C <- Children],
    Acc1 = lists:foldl(fun(C, A) -> heights(C, Index, A) end, Acc, Children),
    cross(Sets, H, Acc1).

cross([], _H, Acc) -> Acc;
cross([S | Rest], H, Acc) ->
    Acc1 = lists:foldl(fun(I, A) -> lists:foldl(fun(J, B) -> B#{{min(I, J), max(I, J)} => H} end, A, lists:append(Rest)) end,
                       Acc, S),
    cross(Rest, H, Acc1).
