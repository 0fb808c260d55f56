%% @private
%% @doc How well a found topology matches a true one: per-level adjusted Rand index and
%% clade recall.
%%
%% == Terms ==
%% <ul>
%% <li>The <em>level k partition</em> of a tree (k ≥ 1) groups its nodes by their
%%     ancestor network at depth k (the root has depth 0); a node that sits higher
%%     than depth k is a block of its own. For a cluster spec of sites, racks and
%%     nodes, level 1 is the partition into sites and level 2 into racks.</li>
%% <li>The <em>adjusted Rand index</em> (ARI; Hubert and Arabie 1985) of two
%%     partitions of the same nodes is 1 when they are equal and about 0 for
%%     unrelated ones. A level's ARI compares the two trees' level k partitions, for
%%     every level of the true tree between the root and its deepest nodes; it is
%%     1.0 at every level only if the trees have the same shape there.</li>
%% <li>A <em>clade</em> is the node set of a network other than the root, with at least
%%     two nodes. <em>Clade recall</em> is the fraction of the true tree's clades that
%%     are also clades of the found tree; <em>clade precision</em> the fraction of the
%%     found tree's clades that are true.</li>
%% </ul>
%% Trees are topology terms (`terrain_topology:tree()'); heights and names are not
%% compared, only which nodes are grouped together.
-module(terrain_tree_compare).

%% API
-export([compare/2,
         nodes/1,
         depth/1,
         level_partition/2,
         adjusted_rand_index/2,
         format_error/1]).

%% exports_not_used: The pieces of the comparison, checked on their own by the tests and properties.
-ignore_xref([{adjusted_rand_index, 2}, {depth, 1}, {level_partition, 2}]).

-export_type([report/0]).

-compile({no_auto_import, [nodes/1]}).

-type partition() :: [[term()]].

-type report() :: terrain:comparison().

%%--------------------------------------------------------------------
%% API

%% @doc Compares a found tree with the true one; both must have the same nodes.
-spec compare(Found :: terrain_topology:tree(), Truth :: terrain_topology:tree()) ->
          {ok, report()} | {error, {compare, term()}}.
compare(Found, Truth) ->
    FoundNodes = lists:sort(nodes(Found)),
    TruthNodes = lists:sort(nodes(Truth)),
    case {FoundNodes -- TruthNodes, TruthNodes -- FoundNodes} of
        {[], []} ->
            Levels = [begin
                          T = level_partition(Truth, K),
                          F = level_partition(Found, K),
                          #{level => K, truth_clusters => length(T), found_clusters => length(F),
                            ari => adjusted_rand_index(F, T)}
                      end || K <- lists:seq(1, depth(Truth) - 1)],
            TruthClades = clades(Truth),
            FoundClades = clades(Found),
            Common = length(ordsets:intersection(TruthClades, FoundClades)),
            {ok, #{levels => Levels,
                   clade_recall => ratio(Common, length(TruthClades)),
                   clade_precision => ratio(Common, length(FoundClades)),
                   truth_clades => length(TruthClades),
                   found_clades => length(FoundClades),
                   common_clades => Common,
                   nodes => length(TruthNodes)}};
        {OnlyFound, OnlyTruth} ->
            {error, {compare, {different_nodes, OnlyFound, OnlyTruth}}}
    end.

%% @doc The nodes of a tree, left to right.
-spec nodes(terrain_topology:tree()) -> [term()].
nodes({node, N}) -> [N];
nodes(Network) -> lists:append([nodes(C) || C <- children(Network)]).

%% @doc The depth of the deepest node (the root has depth 0).
-spec depth(terrain_topology:tree()) -> non_neg_integer().
depth({node, _}) -> 0;
depth(Network) -> 1 + lists:max([depth(C) || C <- children(Network)]).

%% @doc The level `K' partition (see the module documentation); blocks sorted.
-spec level_partition(terrain_topology:tree(), pos_integer()) -> partition().
level_partition(Tree, K) ->
    lists:sort([lists:sort(B) || B <- blocks(Tree, 0, K)]).

%% @doc The clades of a tree, as an ordset of sorted node lists.
-spec clades(terrain_topology:tree()) -> [[term()]].
clades(Tree) ->
    ordsets:from_list([lists:sort(nodes(C)) || Child <- children(Tree), C <- networks(Child),
                                               length(nodes(C)) >= 2]).

%% @doc The adjusted Rand index of two partitions of the same elements; 1.0 when
%% they are equal (also when the index is undefined: both all singletons or both
%% one block).
-spec adjusted_rand_index(partition(), partition()) -> float().
adjusted_rand_index(P1, P2) ->
    Of = maps:from_list([{X, I} || {I, Block} <- lists:zip(lists:seq(1, length(P2)), P2), X <- Block]),
    Table = lists:foldl(fun({I, Block}, Acc) ->
                                lists:foldl(fun(X, A) -> maps:update_with({I, maps:get(X, Of)}, fun(C) -> C + 1 end, 1, A) end,
                                            Acc, Block)
                        end, #{}, lists:zip(lists:seq(1, length(P1)), P1)),
    N = lists:sum([length(B) || B <- P1]),
    Index = lists:sum([choose2(C) || C <- maps:values(Table)]),
    A = lists:sum([choose2(length(B)) || B <- P1]),
    B = lists:sum([choose2(length(Bl)) || Bl <- P2]),
    Expected = case choose2(N) of 0 -> 0.0; Pairs -> A * B / Pairs end,
    Max = (A + B) / 2,
    case Max == Expected of
        true -> case lists:sort([lists:sort(X) || X <- P1]) =:= lists:sort([lists:sort(X) || X <- P2]) of
                    true -> 1.0;
                    false -> 0.0
                end;
        false -> (Index - Expected) / (Max - Expected)
    end.

%% @doc A sentence for an error of {@link compare/2}.
-spec format_error({compare, term()}) -> iolist().
format_error({compare, {different_nodes, OnlyFound, OnlyTruth}}) ->
    io_lib:format("the trees have different nodes: only in the found tree ~ts; only in the true tree ~ts",
                  [some(OnlyFound), some(OnlyTruth)]).

%%--------------------------------------------------------------------
%% Internal functions

children({network, C}) -> C;
children({network, _, C}) -> C;
children({network, _, _, C}) -> C.

networks({node, _}) -> [];
networks(Network) -> [Network | lists:append([networks(C) || C <- children(Network)])].

blocks({node, N}, _Depth, _K) -> [[N]];
blocks(Network, K, K) -> [nodes(Network)];
blocks(Network, Depth, K) -> lists:append([blocks(C, Depth + 1, K) || C <- children(Network)]).

choose2(N) -> N * (N - 1) div 2.

ratio(_, 0) -> 1.0;
ratio(A, B) -> A / B.

some([]) -> "(none)";
some(Nodes) when length(Nodes) > 5 ->
    [lists:join(", ", [io_lib:format("~0tp", [N]) || N <- lists:sublist(Nodes, 5)]),
     io_lib:format(" and ~b more", [length(Nodes) - 5])];
some(Nodes) -> lists:join(", ", [io_lib:format("~0tp", [N]) || N <- Nodes]).
