%% @private
%% @doc The non-binary clustering with a threshold α ≥ 1 of RELEASE D3.5, §4.5, and
%% an automatic choice of α, level by level.
%%
%% == The α algorithm ==
%% Exactly as RELEASE D3.5 describes it, on the clusters of a linkage (`complete' in
%% RELEASE D3.5: d(x, K) is the largest distance between a point of x and a point of K):
%% <ol>
%% <li>Start with every point in a cluster of its own.</li>
%% <li>Merge the two closest clusters into K. Let δ = diam(K).</li>
%% <li>Expand K by adding clusters x with d(x, K) ≤ αδ, the closest first; after each
%%     addition δ is the diameter of the current K and d(·, K) is re-measured.</li>
%% <li>Repeat from 2 until one cluster is left.</li>
%% </ol>
%% K's children are the two merged clusters and every cluster it absorbed, so the tree
%% is not binary. With `complete' linkage δ is exactly diam(K); with the other linkages
%% δ is the largest linkage distance at which K's parts were joined (and never below
%% a child's δ), so heights never decrease towards the root. α = 1 gives the binary
%% dendrogram (equal distances aside: they join one cluster); a large α one cluster.
%%
%% The closest pair is found with a nearest-neighbour array (Müllner's "generic"
%% algorithm): each cluster keeps its nearest neighbour; after a step only clusters
%% whose neighbour was merged are searched again (the linkages are reducible, so no
%% other neighbour changes). Typically O(n²); O(n³) in the worst case.
%%
%% == Automatic α, level by level ==
%% {@link auto/3} chooses α separately for each level of the hierarchy, bottom up:
%% <ol>
%% <li>For every α of a geometric grid over [1, 4] (31 values) run the α algorithm on
%%     the current points and take its <em>bottom partition</em>: the clusters whose
%%     children are all points, and every other point on its own.</li>
%% <li>A level that really exists shows as a partition that stays the same over a wide
%%     range of α: α must exceed the spread inside its clusters and stay below the gap
%%     to the next level. Among the partitions other than the single block, take the
%%     widest run of equal partitions over the grid (width: the ratio of its end α's;
%%     ties: the smaller α, the finer structure), if it is at least `min_plateau'
%%     (1.2) wide, and α in its middle.</li>
%% <li>Its clusters become the points of the next level (distances between them: the
%%     same linkage over their members) and the search repeats. When no partition
%%     qualifies, the points join under the root. (The single block is not a
%%     candidate: it holds for every α above some value, so its width would only
%%     measure where the grid stops.)</li>
%% </ol>
%% Each level thus has its own α, which answers RELEASE D3.5's open problem that one α may
%% not fit all scales; when the levels' ranges overlap, one α (reported as
%% `single_alpha') gives the same tree with the plain algorithm.
%%
%% == The silhouette cut (wide-area networks) ==
%% Geographic latency grows with distance continuously: the α rule finds no level, or
%% narrow plateaus at every step that join continents at the top. At a level of at
%% least six points, at least half as many as the nodes, the cut of the points'
%% average-linkage dendrogram chosen by silhouette_cut/3 becomes the top level (its
%% groups join under the root) when no α holds a partition there, or when the α levels
%% built above it end in a top whose silhouette is below 0.5 and the cut scores higher
%% (top_check/7). docs/TOPOLOGY_DISCOVERY.md, §2.4, says why and what can fool it.
-module(terrain_alpha).

%% API
-export([run/3,
         auto/3,
         bottom_partition/1]).

%% exports_not_used: Called by the unit tests (terrain_discovery_tests), which check the bottom
%% partition that automatic α starts from.
-ignore_xref([{bottom_partition, 1}]).

-export_type([tree/0, auto_options/0, level/0]).

-type tree() :: {point, non_neg_integer()}
              | {cluster, Height :: float(), Children :: [tree(), ...]}.

-type auto_options() ::
        #{range => {float(), float()},   % α searched over [Lo, Hi], 1 ≤ Lo < Hi (default {1.0, 4.0})
          steps => pos_integer(),        % grid values, geometric, ends included (default 31)
          min_plateau => float(),        % a level's partition must stay the same while α
                                         % grows by this factor (default 1.2)
          workers => pos_integer()}.     % concurrent runs (default: schedulers online)

-type level() ::
        #{points := pos_integer(),       % points clustered at this level
          clusters := pos_integer(),     % blocks of the chosen partition (1: the root)
          alpha := float() | none,       % α chosen: the middle of the plateau (none: the root)
          plateau := {float(), float()} | none, % grid α at the two ends of the plateau; for
                                         % the root, the α from which the plain algorithm
                                         % joins these points in one block (none: not in range)
          silhouette => float(),         % a silhouette cut's (see silhouette_cut/3): its silhouette,
          best_silhouette => float(),    % the best of its k, the jump of merge heights that chose
          jump => float(),               % it, and the silhouette of the α levels' top it replaced
          above => float() | none}.      % (none: no α held a partition)

%% A point of a level: its tree, height and number of nodes.
-type point() :: {tree(), float(), pos_integer()}.

%% A silhouette cut: its groups of points and its evidence (`above': the silhouette of
%% the α levels' top it replaces, `none' when no α held a partition).
-type cut() :: #{silhouette := float(), best_silhouette := float(), jump := float(),
                 blocks => [{[non_neg_integer()], float()}], loose => [non_neg_integer()],
                 above => float() | none}.

%% Points of a level: their initial heights and sizes (weights for `average').
-type points() :: #{heights := tuple(), sizes := tuple()}.

%%--------------------------------------------------------------------
%% API

%% @doc The α tree of the points of `Matrix', each a point of height 0 and size 1.
-spec run(terrain_linkage:matrix(), terrain_linkage:method(), Alpha :: number()) -> tree().
run(Matrix, Method, Alpha) ->
    N = terrain_linkage:size(Matrix),
    run(Matrix, Method, Alpha, #{heights => erlang:make_tuple(N, 0.0), sizes => erlang:make_tuple(N, 1)}).

%% @doc The α tree of points with initial heights and sizes (clusters of a lower
%% level standing for points). `Matrix' is left unchanged.
-spec run(terrain_linkage:matrix(), terrain_linkage:method(), Alpha :: number(), points()) -> tree().
run(Matrix, Method, Alpha, #{heights := Heights, sizes := Sizes}) when Alpha >= 1 ->
    N = terrain_linkage:size(Matrix),
    case N of
        0 -> error(badarg, [Matrix]);
        1 -> {point, 0};
        _ ->
            D = atomics:new(N * (N - 1) div 2, [{signed, true}]),
            S = #{n => N, d => D, method => Method, alpha => float(Alpha),
                  nn => atomics:new(N, [{signed, true}]),
                  nd => atomics:new(N, [{signed, true}]),
                  size => atomics:new(N, [{signed, false}])},
            lists:foreach(fun(I) -> atomics:put(maps:get(size, S), I + 1, element(I + 1, Sizes)) end,
                          lists:seq(0, N - 1)),
            init_neighbours(S, terrain_linkage:cells(Matrix)),
            Trees = maps:from_list([{I, {point, I}} || I <- lists:seq(0, N - 1)]),
            Hs = maps:from_list([{I, float(element(I + 1, Heights))} || I <- lists:seq(0, N - 1)]),
            agglomerate(S, lists:seq(0, N - 1), Trees, Hs)
    end.

%% @doc The tree of {@link run/3} with α chosen automatically for each level (see the
%% module documentation), and the levels bottom up.
-spec auto(terrain_linkage:matrix(), terrain_linkage:method(), auto_options()) -> {tree(), [level()]}.
auto(Matrix, Method, Options) ->
    Opts = maps:merge(default_auto_options(), Options),
    N = terrain_linkage:size(Matrix),
    Points = [{{point, I}, 0.0, 1} || I <- lists:seq(0, N - 1)],
    level(Matrix, Method, Points, grid(Opts), Opts#{original => Matrix}, []).

%% @doc The bottom partition of an α tree: the point sets of its clusters whose
%% children are all points, and every other point alone; blocks and their members in
%% ascending order.
-spec bottom_partition(tree()) -> [[non_neg_integer()]].
bottom_partition(Tree) ->
    {Blocks, Loose} = bottom(Tree, {[], []}),
    lists:sort([lists:sort(B) || {B, _} <- Blocks] ++ [[P] || P <- Loose]).

%% @doc The defaults of {@link auto/3}.
-spec default_auto_options() -> #{range := {float(), float()}, steps := pos_integer(), min_plateau := float(),
                                  workers := pos_integer()}.
default_auto_options() ->
    #{range => {1.0, 4.0}, steps => 31, min_plateau => 1.2, workers => erlang:system_info(schedulers_online)}.

%%--------------------------------------------------------------------
%% The α algorithm

%% Copies the distances from `Original' and finds every cluster's nearest neighbour,
%% reading each pair once.
init_neighbours(#{n := N, d := D, nn := NN, nd := ND}, Original) ->
    Infinity = terrain_linkage:float_to_bits(1.0e308),
    lists:foreach(fun(I) -> atomics:put(ND, I + 1, Infinity), atomics:put(NN, I + 1, -1) end,
                  lists:seq(0, N - 1)),
    lists:foreach(fun(I) ->
                          Base = terrain_linkage:index(N, I, I + 1) - (I + 1),
                          {Best, BestD} = row(Original, D, NN, ND, I, Base, I + 1, N, atomics:get(NN, I + 1),
                                              atomics:get(ND, I + 1)),
                          atomics:put(NN, I + 1, Best),
                          atomics:put(ND, I + 1, BestD)
                  end, lists:seq(0, N - 2)).

%% Copies d(I, J) for J > I, keeping I's best and improving each J's.
row(_Original, _D, _NN, _ND, _I, _Base, J, N, Best, BestD) when J >= N ->
    {Best, BestD};
row(Original, D, NN, ND, I, Base, J, N, Best, BestD) ->
    Dist = atomics:get(Original, Base + J),
    atomics:put(D, Base + J, Dist),
    case Dist < atomics:get(ND, J + 1) of
        true -> atomics:put(ND, J + 1, Dist), atomics:put(NN, J + 1, I);
        false -> ok
    end,
    case Dist < BestD of
        true -> row(Original, D, NN, ND, I, Base, J + 1, N, J, Dist);
        false -> row(Original, D, NN, ND, I, Base, J + 1, N, Best, BestD)
    end.

agglomerate(_S, [Last], Trees, _Hs) ->
    maps:get(Last, Trees);
agglomerate(#{nn := NN, nd := ND} = S, Active, Trees, Hs) ->
    A = closest(ND, Active),
    B = atomics:get(NN, A + 1),
    {K, X} = {min(A, B), max(A, B)},
    Dab = terrain_linkage:bits_to_float(atomics:get(ND, A + 1)),
    Delta = max(Dab, max(maps:get(K, Hs), maps:get(X, Hs))),
    {Active1, Near} = merge(S, K, X, Active),
    expand(S, K, Delta, [maps:get(K, Trees), maps:get(X, Trees)], [X], Active1, Near, Trees, Hs).

%% Adds the closest cluster to K while it is within α δ. `Near' is K's nearest active
%% cluster, found by the merge that made the current K.
expand(#{alpha := Alpha, nn := NN, nd := ND} = S, K, Delta, Children, Removed, Active, Near, Trees, Hs) ->
    case Near of
        {Y, Dy} when Y >= 0 ->
            DyF = terrain_linkage:bits_to_float(Dy),
            case DyF =< Alpha * Delta of
                true ->
                    Delta1 = max(Delta, max(DyF, maps:get(Y, Hs))),
                    {Active1, Near1} = merge(S, K, Y, Active),
                    expand(S, K, Delta1, [maps:get(Y, Trees) | Children], [Y | Removed], Active1, Near1, Trees, Hs);
                false ->
                    atomics:put(NN, K + 1, Y),
                    atomics:put(ND, K + 1, Dy),
                    finish(S, K, Delta, Children, Removed, Active, Trees, Hs)
            end;
        {_None, _} ->
            finish(S, K, Delta, Children, Removed, Active, Trees, Hs)
    end.

finish(#{nn := NN} = S, K, Delta, Children, Removed, Active, Trees, Hs) ->
    refresh_stale(S, NN, K, [K | Removed], Active, Active),
    Tree = {cluster, Delta, lists:reverse(Children)},
    Trees1 = maps:without(Removed, Trees#{K => Tree}),
    agglomerate(S, Active, Trees1, (maps:without(Removed, Hs))#{K => Delta}).

%% Searches again the neighbour of every cluster whose neighbour was merged.
refresh_stale(_S, _NN, _K, _Stale, [], _Active) ->
    ok;
refresh_stale(S, NN, K, Stale, [K | Rest], Active) ->
    refresh_stale(S, NN, K, Stale, Rest, Active);
refresh_stale(S, NN, K, Stale, [Z | Rest], Active) ->
    case lists:member(atomics:get(NN, Z + 1), Stale) of
        true -> refresh(S, Z, Active);
        false -> ok
    end,
    refresh_stale(S, NN, K, Stale, Rest, Active).

refresh(#{nn := NN, nd := ND} = S, Z, Active) ->
    {Y, Dy} = nearest(S, Z, Active),
    atomics:put(NN, Z + 1, Y),
    atomics:put(ND, Z + 1, Dy).

%% The active cluster with the smallest neighbour distance (lowest index on ties).
closest(ND, [First | Rest]) ->
    closest(ND, Rest, First, atomics:get(ND, First + 1)).

closest(_ND, [], Best, _BestD) ->
    Best;
closest(ND, [I | Rest], Best, BestD) ->
    case atomics:get(ND, I + 1) of
        D when D < BestD -> closest(ND, Rest, I, D);
        _ -> closest(ND, Rest, Best, BestD)
    end.

%% X's nearest active cluster: {-1, _} when X is the only one.
nearest(#{n := N, d := D}, X, Active) ->
    nearest(D, N, X, Active, -1, infinity).

nearest(_D, _N, _X, [], Best, BestD) ->
    {Best, BestD};
nearest(D, N, X, [X | Rest], Best, BestD) ->
    nearest(D, N, X, Rest, Best, BestD);
nearest(D, N, X, [I | Rest], Best, BestD) when I < X ->
    case atomics:get(D, terrain_linkage:index(N, I, X)) of
        Dist when Dist < BestD -> nearest(D, N, X, Rest, I, Dist);
        _ -> nearest(D, N, X, Rest, Best, BestD)
    end;
nearest(D, N, X, [I | _] = Above, Best, BestD) ->
    nearest_above(D, terrain_linkage:index(N, X, I) - I, Above, Best, BestD).

nearest_above(_D, _Base, [], Best, BestD) ->
    {Best, BestD};
nearest_above(D, Base, [I | Rest], Best, BestD) ->
    case atomics:get(D, Base + I) of
        Dist when Dist < BestD -> nearest_above(D, Base, Rest, I, Dist);
        _ -> nearest_above(D, Base, Rest, Best, BestD)
    end.

%% Merges cluster X into the slot of K: d(K ∪ X, Z) for every other active Z. Returns
%% the active clusters without X and K's nearest neighbour among them ({-1, _} when
%% K is the only one; the lowest index on ties, as nearest/3).
merge(#{n := N, d := D, method := Method, size := Size}, K, X, Active) ->
    Nk = atomics:get(Size, K + 1),
    Nx = atomics:get(Size, X + 1),
    BaseK = terrain_linkage:index(N, K, K + 1) - (K + 1),
    BaseX = terrain_linkage:index(N, X, X + 1) - (X + 1),
    Near = update(Active, D, N, Method, K, X, BaseK, BaseX, Nk, Nx, -1, infinity),
    atomics:put(Size, K + 1, Nk + Nx),
    {lists:delete(X, Active), Near}.

%% The indices of (K, Z) and (X, Z), each below or above Z.
update([], _D, _N, _Method, _K, _X, _BaseK, _BaseX, _Nk, _Nx, Best, BestD) ->
    {Best, BestD};
update([Z | Rest], D, N, Method, K, X, BaseK, BaseX, Nk, Nx, Best, BestD) when Z =:= K; Z =:= X ->
    update(Rest, D, N, Method, K, X, BaseK, BaseX, Nk, Nx, Best, BestD);
update([Z | Rest], D, N, Method, K, X, BaseK, BaseX, Nk, Nx, Best, BestD) ->
    KZ = if Z < K -> terrain_linkage:index(N, Z, K); true -> BaseK + Z end,
    XZ = if Z < X -> terrain_linkage:index(N, Z, X); true -> BaseX + Z end,
    New = terrain_linkage:lance_williams(Method, atomics:get(D, KZ), atomics:get(D, XZ), Nk, Nx),
    atomics:put(D, KZ, New),
    case New < BestD of
        true -> update(Rest, D, N, Method, K, X, BaseK, BaseX, Nk, Nx, Z, New);
        false -> update(Rest, D, N, Method, K, X, BaseK, BaseX, Nk, Nx, Best, BestD)
    end.

%%--------------------------------------------------------------------
%% Automatic α

%% The silhouette cut: at least this many points, at most this many nodes (its cost is
%% 19 silhouettes of n² distances), the silhouette it needs, and the fraction of the
%% best silhouette among which the largest jump of merge heights chooses.
-define(SILHOUETTE_POINTS, 6).
-define(SILHOUETTE_NODES, 1000).
-define(SILHOUETTE_MIN, 0.5).
-define(SILHOUETTE_NEAR, 0.9).

grid(#{range := {Lo, Hi}, steps := 1}) ->
    [float(Lo) | [float(Hi) || Hi =/= Lo]];
grid(#{range := {Lo, Hi}, steps := Steps}) ->
    Ratio = math:pow(Hi / Lo, 1 / (Steps - 1)),
    [Lo * math:pow(Ratio, K) || K <- lists:seq(0, Steps - 2)] ++ [float(Hi)].

%% One level: choose α on the current points, or join them under the root.
level(_Matrix, _Method, [{Tree, _, _}], _Grid, _Opts, Levels) ->
    {Tree, lists:reverse(Levels)};
level(Matrix, _Method, Points, _Grid, #{silhouette_done := true}, Levels) ->
    Root = {cluster, root_height(Matrix, Points), [T || {T, _, _} <- Points]},
    {Root, lists:reverse([#{points => length(Points), clusters => 1, alpha => none, plateau => none} | Levels])};
level(Matrix, Method, Points, Grid, Opts, Levels) ->
    PointInfo = #{heights => list_to_tuple([H || {_, H, _} <- Points]),
                  sizes => list_to_tuple([S || {_, _, S} <- Points])},
    M = length(Points),
    Results = parallel_map(fun(Alpha) ->
                                   Tree = run(Matrix, Method, Alpha, PointInfo),
                                   {Blocks, Loose} = bottom(Tree, {[], []}),
                                   Signature = lists:sort([lists:sort(B) || {B, _} <- Blocks]),
                                   {Signature, [{lists:sort(B), H} || {B, H} <- Blocks], Loose}
                           end, Grid, maps:get(workers, Opts)),
    Runs = runs([Sig || {Sig, _, _} <- Results], Grid),
    All = [lists:seq(0, M - 1)],
    OneBlock = [Lo || {_, _, Lo, _, Sig} <- Runs, Sig =:= All],
    Candidates = [Run || {_, _, Lo, Hi, Sig} = Run <- Runs, Sig =/= All, Hi / Lo >= maps:get(min_plateau, Opts)],
    case widest(Candidates) of
        none ->
            case silhouette_cut(Matrix, Points, Opts) of
                none ->
                    Root = {cluster, root_height(Matrix, Points), [T || {T, _, _} <- Points]},
                    Level = #{points => M, clusters => 1, alpha => none,
                              plateau => case OneBlock of [] -> none; [Lo | _] -> {Lo, lists:last(Grid)} end},
                    {Root, lists:reverse([Level | Levels])};
                Cut ->
                    cut_level(Matrix, Method, Points, Grid, Opts, Levels, Cut#{above => none})
            end;
        {First, Last, Lo, Hi, _} ->
            Middle = (First + Last) div 2,
            {_, Blocks, Loose} = lists:nth(Middle + 1, Results),
            Level = #{points => M, clusters => length(Blocks) + length(Loose),
                      alpha => lists:nth(Middle + 1, Grid), plateau => {Lo, Hi}},
            Alpha = next_level(Matrix, Method, Points, Blocks, Loose, Grid, Opts, [Level | Levels]),
            top_check(Alpha, Matrix, Method, Points, Grid, Opts, Levels)
    end.

%% One level from the silhouette cut: its groups join under the root.
-spec cut_level(terrain_linkage:matrix(), terrain_linkage:method(), [point()], [float()], map(), [level()],
                cut()) -> {tree(), [level()]}.
cut_level(Matrix, Method, Points, Grid, Opts, Levels, #{blocks := Blocks, loose := Loose} = Cut) ->
    Level = (maps:without([blocks, loose], Cut))#{points => length(Points), clusters => length(Blocks) + length(Loose),
                                                  alpha => none, plateau => none},
    next_level(Matrix, Method, Points, Blocks, Loose, Grid, Opts#{silhouette_done => true}, [Level | Levels]).

%% The α levels above these points stand if their top (the root's children) is a
%% reasonable structure, a silhouette of at least ?SILHOUETTE_MIN over the original
%% nodes; otherwise these points' silhouette cut replaces them, if it scores higher.
%% (Geographic tables: latency grows with distance, so the α rule can find small
%% plateaus at every step and join continents at the top; CPU levels keep a top of
%% 0.53-0.80 on the real matrices, so this never replaces them.)
-spec top_check({tree(), [level()]}, terrain_linkage:matrix(), terrain_linkage:method(), [point()], [float()],
                map(), [level()]) -> {tree(), [level()]}.
top_check({Tree, _} = Alpha, Matrix, Method, Points, Grid, #{original := Original} = Opts, Levels) ->
    case cut_allowed(length(Points), terrain_linkage:size(Original), Opts) of
        false ->
            Alpha;
        true ->
            Top = top_silhouette(Tree, Original),
            case Top < ?SILHOUETTE_MIN andalso silhouette_cut(Matrix, Points, Opts) of
                #{silhouette := Score} = Cut when Score > Top ->
                    cut_level(Matrix, Method, Points, Grid, Opts, Levels, Cut#{above => Top});
                _ ->
                    Alpha
            end
    end.

%% The clusters of a level become the points of the next.
next_level(Matrix, Method, Points, Blocks, Loose, Grid, Opts, Levels) ->
            PointTuple = list_to_tuple(Points),
            Groups = lists:keysort(1, Blocks ++ [{[P], none} || P <- Loose]),
            New = [case Group of
                       {[P], none} ->
                           element(P + 1, PointTuple);
                       {Members, H} ->
                           Trees = [element(P + 1, PointTuple) || P <- Members],
                           {{cluster, H, [T || {T, _, _} <- Trees]}, H, lists:sum([S || {_, _, S} <- Trees])}
                   end || Group <- Groups],
            Contracted = contract(Matrix, Method, Points, [Ms || {Ms, _} <- Groups]),
            level(Contracted, Method, New, Grid, Opts, Levels).

%%--------------------------------------------------------------------
%% The silhouette cut (when no α holds a partition, or the α levels above give no
%% reasonable top)

%% The cuts of the points' average-linkage dendrogram into k = 2 … 20 groups are
%% scored by the mean silhouette (Rousseeuw 1987) of the original nodes, labelled by
%% the group their point falls in. If the best silhouette is at least ?SILHOUETTE_MIN
%% ("reasonable structure", Kaufman and Rousseeuw), the cut is chosen among those
%% within ?SILHOUETTE_NEAR of the best (the silhouette cannot tell them apart: on the
%% AWS table 7 and 8 groups score 0.548 and 0.552) by the largest jump of the merge
%% heights: the height of the merge that would join two of its groups over the height
%% of the last merge inside them (a level, as the α rule sees one). Returns `none' or
%% the level's evidence with its `blocks' and `loose' points, as a level of the α rule.
-spec silhouette_cut(terrain_linkage:matrix(), [point()], map()) -> cut() | none.
silhouette_cut(_Matrix, _Points, #{silhouette_done := true}) ->
    none;
silhouette_cut(Matrix, Points, #{original := Original} = Opts) ->
    M = length(Points),
    N = terrain_linkage:size(Original),
    case cut_allowed(M, N, Opts) of
        false ->
            none;
        true ->
            Members = list_to_tuple([tree_points(T) || {T, _, _} <- Points]),
            Merges = terrain_linkage:linkage(Matrix, average),
            Rows = rows(Original),
            Scored = [{silhouette(Rows, N, Members, Labels), Jump, Labels}
                      || {Jump, Labels} <- cuts(Merges, M, min(M - 1, 20))],
            case lists:max([S || {S, _, _} <- Scored]) of
                Best when Best >= ?SILHOUETTE_MIN ->
                    {Jump, Score, Labels} = lists:max([{J, S, L} || {S, J, L} <- Scored, S >= ?SILHOUETTE_NEAR * Best]),
                    {Blocks, Loose} = blocks(Matrix, Labels),
                    #{silhouette => Score, best_silhouette => Best, jump => Jump, blocks => Blocks, loose => Loose};
                _ ->
                    none
            end
    end.

%% The silhouette cut is tried among M >= ?SILHOUETTE_POINTS points that are at least
%% half as many as the N nodes (the levels below found no large structure), for at
%% most ?SILHOUETTE_NODES nodes (its cost: 19 silhouettes of N² distances), once.
-spec cut_allowed(non_neg_integer(), non_neg_integer(), map()) -> boolean().
cut_allowed(M, N, Opts) ->
    M >= ?SILHOUETTE_POINTS andalso 2 * M >= N andalso N =< ?SILHOUETTE_NODES
        andalso not maps:get(silhouette_done, Opts, false).

%% The distances of the original nodes, a tuple of rows.
-spec rows(terrain_linkage:matrix()) -> tuple().
rows(Original) ->
    N = terrain_linkage:size(Original),
    list_to_tuple([list_to_tuple([terrain_linkage:get(Original, I, J) || J <- lists:seq(0, N - 1)])
                   || I <- lists:seq(0, N - 1)]).

%% The silhouette of a tree's top level: the original nodes labelled by the root's
%% child they fall in (a node directly under the root alone: silhouette 0).
-spec top_silhouette(tree(), terrain_linkage:matrix()) -> float().
top_silhouette({point, _}, _Original) ->
    0.0;
top_silhouette({cluster, _, Children}, Original) ->
    Members = list_to_tuple([tree_points(C) || C <- Children]),
    silhouette(rows(Original), terrain_linkage:size(Original), Members,
               list_to_tuple(lists:seq(0, tuple_size(Members) - 1))).

tree_points({point, I}) -> [I];
tree_points({cluster, _, Children}) -> lists:append([tree_points(C) || C <- Children]).

%% The cuts of the dendrogram into k groups, for every k from KMax down to 2: {Jump,
%% Labels}, the labels a tuple (point i's group at i + 1) and Jump the height of the
%% next merge over the height of the last one.
-spec cuts([{non_neg_integer(), non_neg_integer(), float(), pos_integer()}], pos_integer(), pos_integer()) ->
          [{float(), tuple()}].
cuts(Merges, M, KMax) ->
    Heights = list_to_tuple([H || {_, _, H, _} <- Merges]),
    Init = list_to_tuple(lists:seq(0, M - 1)),
    {_, _, Cuts} = lists:foldl(
                     fun({A, B, _, _}, {Labels, Id, Acc}) ->
                             %% cluster ids: points 0..M-1, merge i makes M + i
                             New = list_to_tuple([case L of A -> Id; B -> Id; _ -> L end
                                                  || L <- tuple_to_list(Labels)]),
                             K = M - (Id - M + 1),
                             {New, Id + 1, case K >= 2 andalso K =< KMax of
                                               true -> [{jump(element(Id - M + 1, Heights),
                                                              element(Id - M + 2, Heights)), New} | Acc];
                                               false -> Acc
                                           end}
                     end, {Init, M, []}, Merges),
    Cuts.

-spec jump(float(), float()) -> float().
jump(Last, Next) when Last > 0 -> Next / Last;
jump(_Last, Next) when Next > 0 -> 1.0e308;
jump(_Last, _Next) -> 1.0.

%% {Blocks, Loose} of a labelling: groups of two or more points with their height (the
%% largest distance between two of their points), and the points alone.
blocks(Matrix, Labels) ->
    Groups = maps:values(maps:groups_from_list(fun({_, L}) -> L end, fun({P, _}) -> P end,
                                               lists:zip(lists:seq(0, tuple_size(Labels) - 1),
                                                         tuple_to_list(Labels)))),
    Blocks = [{lists:sort(G), lists:max([terrain_linkage:get(Matrix, I, J) || I <- G, J <- G, I < J])}
              || G <- Groups, length(G) >= 2],
    {Blocks, lists:append([G || G <- Groups, length(G) =:= 1])}.

%% The mean silhouette of the N original nodes (Rows: their distances) under the
%% labelling of their points.
silhouette(Rows, N, Members, Labels) ->
    Label = list_to_tuple([L || {_, L} <- lists:sort([{I, element(P + 1, Labels)}
                                                      || P <- lists:seq(0, tuple_size(Members) - 1),
                                                         I <- element(P + 1, Members)])]),
    lists:sum([node_silhouette(element(I + 1, Rows), N, I, Label) || I <- lists:seq(0, N - 1)]) / N.

node_silhouette(Row, N, I, Label) ->
    Sums = sums(Row, Label, I, N - 1, #{}),
    case maps:take(element(I + 1, Label), Sums) of
        {{SA, CA}, Others} when map_size(Others) > 0 ->
            A = SA / CA,
            B = lists:min([S / C || {S, C} <- maps:values(Others)]),
            case max(A, B) of
                Max when Max > 0 -> (B - A) / Max;
                _ -> 0.0
            end;
        _ ->
            0.0
    end.

%% Per label: the sum of the distances from node I and their count.
sums(_Row, _Label, _I, -1, Acc) ->
    Acc;
sums(Row, Label, I, I, Acc) ->
    sums(Row, Label, I, I - 1, Acc);
sums(Row, Label, I, J, Acc) ->
    D = element(J + 1, Row),
    sums(Row, Label, I, J - 1, maps:update_with(element(J + 1, Label), fun({S, C}) -> {S + D, C + 1} end, {D, 1}, Acc)).

%% Runs of equal signatures over the grid: {FirstIndex, LastIndex, LoAlpha, HiAlpha, Signature}.
runs(Signatures, Grid) ->
    Indexed = lists:zip(lists:seq(0, length(Grid) - 1), lists:zip(Signatures, Grid)),
    lists:reverse(
      lists:foldl(fun({I, {Sig, A}}, [{F, _, Lo, _, Sig} | Rest]) -> [{F, I, Lo, A, Sig} | Rest];
                     ({I, {Sig, A}}, Acc) -> [{I, I, A, A, Sig} | Acc]
                  end, [], Indexed)).

%% The widest run (by the ratio of its ends); the smallest α on ties.
widest([]) ->
    none;
widest([First | Rest]) ->
    lists:foldl(fun({_, _, Lo, Hi, _} = Run, {_, _, BLo, BHi, _} = Best) ->
                        case Hi / Lo > BHi / BLo of
                            true -> Run;
                            false -> Best
                        end
                end, First, Rest).

%% The root's height: the largest distance between two of its parts, and never
%% below a part's height.
root_height(Matrix, Points) ->
    M = terrain_linkage:size(Matrix),
    Cells = terrain_linkage:cells(Matrix),
    MaxBits = lists:foldl(fun(I, Acc) -> max(Acc, atomics:get(Cells, I)) end, 0, lists:seq(1, M * (M - 1) div 2)),
    max(terrain_linkage:bits_to_float(MaxBits), lists:max([H || {_, H, _} <- Points])).

%% {Blocks, Loose}: clusters whose children are all points (with their heights), and
%% the points that are children of other clusters.
bottom({point, P}, {Blocks, Loose}) ->
    {Blocks, [P | Loose]};
bottom({cluster, H, Children}, {Blocks, Loose}) ->
    case [P || {point, P} <- Children] of
        Points when length(Points) =:= length(Children) ->
            {[{Points, H} | Blocks], Loose};
        Points ->
            lists:foldl(fun bottom/2, {Blocks, Points ++ Loose}, [C || {cluster, _, _} = C <- Children])
    end.

%% The linkage distances between the groups of points (each a list of point indices,
%% in the order of the new points): complete the largest, single the smallest and
%% average the size-weighted mean of the distances between their points.
contract(Matrix, Method, Points, Groups) ->
    N = terrain_linkage:size(Matrix),
    G = length(Groups),
    Of = list_to_tuple([Gi || {_, Gi} <- lists:sort([{P, Gi} || {Gi, Members} <- lists:zip(lists:seq(0, G - 1), Groups),
                                                              P <- Members])]),
    Sizes = list_to_tuple([S || {_, _, S} <- Points]),
    New = terrain_linkage:new(G),
    Cells = terrain_linkage:cells(New),
    Pairs = G * (G - 1) div 2,
    _ = Method =:= single andalso
        lists:foreach(fun(I) -> atomics:put(Cells, I, terrain_linkage:float_to_bits(1.0e308)) end, lists:seq(1, Pairs)),
    Old = terrain_linkage:cells(Matrix),
    lists:foreach(
      fun(I) ->
              Gi = element(I + 1, Of),
              Base = terrain_linkage:index(N, I, I + 1) - (I + 1),
              lists:foreach(
                fun(J) ->
                        case element(J + 1, Of) of
                            Gi -> ok;
                            Gj ->
                                Index = terrain_linkage:index(G, min(Gi, Gj), max(Gi, Gj)),
                                atomics:put(Cells, Index, combine(Method, atomics:get(Cells, Index),
                                                                  atomics:get(Old, Base + J), I, J, Sizes))
                        end
                end, lists:seq(I + 1, N - 1))
      end, lists:seq(0, N - 2)),
    _ = Method =:= average andalso
        begin
            GroupSizes = list_to_tuple([lists:sum([element(P + 1, Sizes) || P <- Members]) || Members <- Groups]),
            [atomics:put(Cells, terrain_linkage:index(G, A, B),
                         terrain_linkage:float_to_bits(
                           terrain_linkage:bits_to_float(atomics:get(Cells, terrain_linkage:index(G, A, B)))
                           / (element(A + 1, GroupSizes) * element(B + 1, GroupSizes))))
             || A <- lists:seq(0, G - 2), B <- lists:seq(A + 1, G - 1)]
        end,
    New.

combine(complete, Acc, Bits, _I, _J, _Sizes) -> max(Acc, Bits);
combine(single, Acc, Bits, _I, _J, _Sizes) -> min(Acc, Bits);
combine(average, Acc, Bits, I, J, Sizes) ->
    terrain_linkage:float_to_bits(terrain_linkage:bits_to_float(Acc)
                                  + terrain_linkage:bits_to_float(Bits) * element(I + 1, Sizes) * element(J + 1, Sizes)).

%% Runs Fun on every element with at most Workers processes at once; results in order.
%% A crash in a worker is raised in the caller after the other workers are stopped.
parallel_map(Fun, List, Workers) ->
    Indexed = lists:zip(lists:seq(1, length(List)), List),
    parallel_map(Fun, Indexed, max(1, Workers), #{}, #{}).

parallel_map(_Fun, [], _Free, Running, Done) when map_size(Running) =:= 0 ->
    [V || {_, V} <- lists:sort(maps:to_list(Done))];
parallel_map(Fun, [{I, X} | Rest], Free, Running, Done) when Free > 0 ->
    Parent = self(),
    {Pid, Ref} = spawn_monitor(fun() -> Parent ! {alpha_result, self(), Fun(X)} end),
    parallel_map(Fun, Rest, Free - 1, Running#{Ref => {Pid, I}}, Done);
parallel_map(Fun, Pending, Free, Running, Done) ->
    receive
        {'DOWN', Ref, process, Pid, normal} when is_map_key(Ref, Running) ->
            %% the result was sent before the worker ended
            Value = receive {alpha_result, Pid, V} -> V end,
            {{_, I}, Running1} = maps:take(Ref, Running),
            parallel_map(Fun, Pending, Free + 1, Running1, Done#{I => Value});
        {'DOWN', Ref, process, _, Reason} when is_map_key(Ref, Running) ->
            maps:foreach(fun(R, {Pid, _}) -> erlang:demonitor(R, [flush]), exit(Pid, kill) end,
                         maps:remove(Ref, Running)),
            error({alpha_worker_failed, Reason})
    end.
