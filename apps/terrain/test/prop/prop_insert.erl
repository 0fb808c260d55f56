%% Properties of the insertion of one node into a known tree (terrain_insert,
%% terrain:insert_node/4).
%%
%% A random ultrametric tree (2..4 children per network, up to 3 levels of networks,
%% leaves at any depth, so groups are uneven) with heights 10× apart per level; one
%% node is taken out and inserted again, measured against the true tree with
%% multiplicative lognormal noise. Insertion puts it back into its true group: the
%% new tree has exactly the true tree's clades.
-module(prop_insert).
-include_lib("proper/include/proper.hrl").

-export([prop_insertion_recovers_the_true_group/0,
         prop_insertion_measures_few_pairs/0,
         prop_building_by_insertion_recovers_the_tree/0,
         prop_every_inserted_tree_is_valid/0]).

%% Shared with terrain_insert_tests.
-export([truth/1, model/3]).

%%--------------------------------------------------------------------
%% Generators

hierarchy() ->
    ?SIZED(Size, hierarchy(min(3, 1 + Size div 30))).

hierarchy(0) ->
    ?LET(K, range(2, 4), {net, lists:duplicate(K, leaf)});
hierarchy(Depth) ->
    ?LET(Kids, ?LET(N, range(2, 4), vector(N, oneof([leaf, ?LAZY(hierarchy(Depth - 1))]))), {net, Kids}).

%%--------------------------------------------------------------------
%% Properties

prop_insertion_recovers_the_true_group() ->
    ?FORALL({H, Pick, Seed, Sigma}, {hierarchy(), nat(), integer(1, 1 bsl 30), oneof([0.0, 0.05, 0.1])},
            begin
                Truth = truth(H),
                Nodes = terrain_tree_compare:nodes(Truth),
                X = lists:nth(1 + Pick rem length(Nodes), Nodes),
                {ok, Without} = terrain_insert:remove(X, Truth),
                {Measure, _} = model(Truth, Sigma, Seed),
                {ok, Found, Pairs} = terrain:insert_node(X, Without, Measure, #{}),
                {ok, Report} = terrain:compare_topologies(Found, Truth),
                ?WHENFAIL(io:format("truth ~p~nnode ~p~nfound ~p~npairs ~p~nreport ~p~n",
                                    [Truth, X, Found, Pairs, Report]),
                          maps:get(clade_recall, Report) == 1.0 andalso maps:get(clade_precision, Report) == 1.0
                          andalso lists:all(fun({A, _, _}) -> A =:= X end, Pairs))
            end).

%% Without failures and noise, one insertion measures at most two members of each
%% child of the networks it looks into (one, and one more when a structural decision
%% is re-checked), plus the confirmation pairs; never a pair twice. It looks into the
%% networks on the node's path and into a sibling subtree before it decides to stay
%% beside it: a node placed above the old root (removing it had collapsed that root)
%% has compared itself with the old root's children.
prop_insertion_measures_few_pairs() ->
    ?FORALL({H, Pick}, {hierarchy(), nat()},
            begin
                Truth = truth(H),
                Nodes = terrain_tree_compare:nodes(Truth),
                X = lists:nth(1 + Pick rem length(Nodes), Nodes),
                {ok, Without} = terrain_insert:remove(X, Truth),
                {Measure, _} = model(Truth, 0.0, 1),
                {ok, Found, Pairs} = terrain:insert_node(X, Without, Measure, #{confirm => 2}),
                Bound = 2 * (lists:sum(children_on_path(Found, X)) + sibling_children(Found, X)) + 2,
                Others = [B || {_, B, _} <- Pairs],
                ?WHENFAIL(io:format("pairs ~p bound ~p~n", [length(Pairs), Bound]),
                          length(Pairs) =< min(Bound, length(Nodes) - 1)
                          andalso length(lists:usort(Others)) =:= length(Others))
            end).

%% Inserting the nodes one at a time from a one-node tree rebuilds the whole tree.
prop_building_by_insertion_recovers_the_tree() ->
    ?FORALL({H, Seed}, {hierarchy(), integer(1, 1 bsl 30)},
            begin
                Truth = truth(H),
                [First | Rest] = shuffle(terrain_tree_compare:nodes(Truth), Seed),
                {Measure, _} = model(Truth, 0.05, Seed),
                Built = lists:foldl(fun(X, T) -> {ok, T1, _} = terrain:insert_node(X, T, Measure, #{}), T1 end,
                                    {network, c, #{height => 0}, [{node, First}]}, Rest),
                {ok, Report} = terrain:compare_topologies(Built, Truth),
                ?WHENFAIL(io:format("truth ~p~nbuilt ~p~nreport ~p~n", [Truth, Built, Report]),
                          maps:get(clade_recall, Report) == 1.0 andalso maps:get(clade_precision, Report) == 1.0)
            end).

%% Under noisy round trips (up to σ = 0.4) and levels as little as 3× apart, every tree
%% an insertion returns is a valid topology (terrain_topology:new/1: no network higher
%% than its parent), whether the tree is built node by node or a node is taken out and
%% inserted again (a re-measurement) into a tree built from other noisy round trips.
prop_every_inserted_tree_is_valid() ->
    ?FORALL({H, Seed, Sigma, Ratio, Noise}, {hierarchy(), integer(1, 1 bsl 30), oneof([0.1, 0.2, 0.4]),
                                      oneof([1.5, 2.0, 3.0, 10.0]), oneof([0, 50, 300])},
            begin
                Truth = truth(H, Ratio),
                [First | Rest] = Order = shuffle(terrain_tree_compare:nodes(Truth), Seed),
                {Measure, _} = model(Truth, Sigma, Seed),
                Insert = fun(X, T) ->
                                 {ok, T1, _} = terrain:insert_node(X, T, Measure, #{noise => Noise}),
                                 {terrain_topology:new(T1), T1}
                         end,
                {Built, Bad} =
                    lists:foldl(fun(X, {T, Errs}) ->
                                        {Check, T1} = Insert(X, T),
                                        {T1, Errs ++ [{X, T, T1, Check} || element(1, Check) =:= error]}
                                end, {{network, c, #{height => 0}, [{node, First}]}, []}, Rest),
                {_, Bad2} =
                    lists:foldl(fun(X, {T, Errs}) ->
                                        {ok, Without} = terrain_insert:remove(X, T),
                                        {Check, T1} = Insert(X, Without),
                                        {T1, Errs ++ [{X, Without, T1, Check} || element(1, Check) =:= error]}
                                end, {Built, Bad}, Order),
                ?WHENFAIL(io:format("truth ~p~ninvalid ~p~n", [Truth, hd(Bad2)]), Bad2 =:= [])
            end).

%%--------------------------------------------------------------------
%% Helpers

%% The topology term of a generated hierarchy: networks at depth d have height
%% 10^(4 - d) µs (10 ms at the root), nodes named n1, n2, ...
truth(H) ->
    truth(H, 10.0).

%% The same with levels Ratio apart (10 ms at the root).
truth(H, Ratio) ->
    {Tree, _} = truth(H, Ratio, 0, 1),
    Tree.

truth(leaf, _Ratio, _Depth, Next) ->
    {{node, list_to_atom("n" ++ integer_to_list(Next))}, Next + 1};
truth({net, Kids}, Ratio, Depth, Next) ->
    {Children, Next1} = lists:mapfoldl(fun(K, N) -> truth(K, Ratio, Depth + 1, N) end, Next, Kids),
    {{network, list_to_atom("g" ++ integer_to_list(Next)), #{height => 10000 / math:pow(Ratio, Depth)}, Children},
     Next1}.

%% A measuring callback: the true round trip (the height of the lowest common
%% network) times exp(Sigma Z), Z drawn from the pair and the seed, so the same pair
%% gives the same value. Also returns the distance function.
model(Truth, Sigma, Seed) ->
    {ok, T} = terrain_topology:new(Truth),
    Distance = fun(A, B) -> terrain_topology:distance(T, A, B) end,
    Measure = fun(A, B) ->
                      {Z, _} = rand:normal_s(rand:seed_s(exsss, erlang:phash2({A, B, Seed}))),
                      {ok, Distance(A, B) * math:exp(Sigma * Z)}
              end,
    {Measure, Distance}.

%% The number of children of each network that holds X.
children_on_path({node, _}, _X) ->
    [];
children_on_path({network, _, _, Children} = Net, X) ->
    case lists:member(X, terrain_tree_compare:nodes(Net)) of
        true -> [length(Children) | lists:append([children_on_path(C, X) || C <- Children])];
        false -> []
    end.

%% The most children of a network beside `X' (under X's parent), 0 when none is.
sibling_children({node, _}, _X) ->
    0;
sibling_children({network, _, _, Children} = Net, X) ->
    case {lists:member({node, X}, Children), lists:member(X, terrain_tree_compare:nodes(Net))} of
        {true, _} -> lists:max([0 | [length(Cs) || {network, _, _, Cs} <- Children]]);
        {false, true} -> lists:max([sibling_children(C, X) || C <- Children]);
        {false, false} -> 0
    end.

shuffle(List, Seed) ->
    {Keyed, _} = lists:mapfoldl(fun(X, S) -> {U, S1} = rand:uniform_s(S), {{U, X}, S1} end,
                                rand:seed_s(exsss, Seed), List),
    [X || {_, X} <- lists:sort(Keyed)].
