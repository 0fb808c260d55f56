%% @private
%% @doc Hierarchical agglomerative clustering of a distance matrix: complete, average
%% and single linkage with the nearest-neighbour chain algorithm, in O(n²) time and
%% n(n−1)/2 doubles of working memory.
%%
%% == Terms ==
%% <ul>
%% <li>A <em>matrix</em> holds the distances between n points 0..n−1 in condensed form:
%%     only the pairs i &lt; j, as raw IEEE doubles in an `atomics' array (8 bytes a
%%     pair, off the process heap, updated in place). Distances are finite and
%%     non-negative; the diagonal is 0 and not stored.</li>
%% <li>A <em>linkage</em> says how far apart two clusters are: `complete' (the largest
%%     distance between their points: RELEASE D3.5's choice, §4.3.2, an upper bound on
%%     communication time), `average' (the mean, UPGMA) or `single' (the smallest).</li>
%% <li>The result is scipy's linkage matrix: n−1 merges `{A, B, Height, Size}' in order
%%     of height (stable), where points are clusters 0..n−1 and merge k creates
%%     cluster n+k; `A &lt; B'. It equals `scipy.cluster.hierarchy.linkage(y, method)'
%%     for condensed input `y', including the order of equal heights.</li>
%% </ul>
%%
%% == Algorithm ==
%% The nearest-neighbour chain (Murtagh 1983; the formulation of Müllner, "Modern
%% hierarchical, agglomerative clustering algorithms", 2011, and of scipy's
%% `nn_chain'): follow nearest neighbours from any cluster until two clusters are each
%% other's nearest neighbour, merge them, and continue from the rest of the chain.
%% The three linkages are reducible (d(A∪B, C) ≥ min(d(A, C), d(B, C))), so the rest
%% of the chain stays valid after a merge and every merge found is one that the naive
%% "merge the globally closest pair" loop would make: the same dendrogram in O(n²)
%% distance look-ups instead of O(n³). Distances after a merge follow Lance and
%% Williams (complete: max; single: min; average: the size-weighted mean).
%%
%% Non-negative doubles order like their bit patterns read as signed integers, so the
%% search compares integers and only `average' converts to floating point.
%%
%% ```
%% M = terrain_linkage:from_rows([[0, 1, 5], [1, 0, 4], [5, 4, 0]]),
%% [{0, 1, 1.0, 2}, {2, 3, 5.0, 3}] = terrain_linkage:linkage(M, complete).
%% '''
-module(terrain_linkage).

%% API: matrices
-export([new/1,
         from_rows/1,
         from_fun/2,
         from_binary/2,
         size/1,
         get/3,
         set/4,
         copy/1,
         memory/1]).

%% API: clustering
-export([linkage/2]).

%% Internal exports (for terrain_alpha, which runs its own agglomeration on the
%% same representation)
-export([index/3,
         cells/1,
         lance_williams/5,
         float_to_bits/1,
         bits_to_float/1]).

%% exports_not_used: The building blocks the EUnit tests, PropEr properties and the pytest comparison
%% with scipy (python/tests/test_topology_erlang.py) call directly.
-ignore_xref([{from_binary, 2}, {from_rows, 1}, {linkage, 2}, {memory, 1}]).

-export_type([matrix/0, method/0, merge/0]).

-record(matrix, {size :: non_neg_integer(),
                 cells :: atomics:atomics_ref()}).

-opaque matrix() :: #matrix{}.
-type method() :: complete | average | single.
-type merge() :: {A :: non_neg_integer(), B :: non_neg_integer(), Height :: float(), Size :: pos_integer()}.

-compile({inline, [index/3, float_to_bits/1, bits_to_float/1, lance_williams/5]}).
-compile({no_auto_import, [size/1, get/1]}).

%%--------------------------------------------------------------------
%% API: matrices

%% @doc A matrix of `N' points with every distance 0.
-spec new(N :: non_neg_integer()) -> matrix().
new(N) when is_integer(N), N >= 0 ->
    Pairs = N * (N - 1) div 2,
    #matrix{size = N, cells = atomics:new(max(1, Pairs), [{signed, true}])}.

%% @doc A matrix from the upper triangle of a square list of rows (row i, column j
%% for i &lt; j). Raises `badarg' for a row of the wrong length or a distance that is
%% not a finite non-negative number.
-spec from_rows([[number()]]) -> matrix().
from_rows(Rows) ->
    N = length(Rows),
    M = new(N),
    Cells = M#matrix.cells,
    _ = lists:foldl(fun(Row, I) ->
                            length(Row) =:= N orelse error(badarg, [Rows]),
                            Upper = lists:nthtail(I + 1, Row),
                            _ = lists:foldl(fun(D, J) -> put_cell(Cells, index(N, I, J), D), J + 1 end,
                                            I + 1, Upper),
                            I + 1
                    end, 0, Rows),
    M.

%% @doc A matrix of `N' points with d(i, j) = `Fun(I, J)' for 0 ≤ i &lt; j &lt; n.
-spec from_fun(N :: non_neg_integer(), fun((non_neg_integer(), non_neg_integer()) -> number())) -> matrix().
from_fun(N, Fun) when is_function(Fun, 2) ->
    M = new(N),
    Cells = M#matrix.cells,
    lists:foreach(fun(I) ->
                          Base = index(N, I, I + 1),
                          lists:foreach(fun(J) -> put_cell(Cells, Base + J - I - 1, Fun(I, J)) end,
                                        lists:seq(I + 1, N - 1))
                  end, lists:seq(0, N - 2)),
    M.

%% @doc A matrix from condensed distances as little-endian doubles, in scipy's order
%% (d(0,1), d(0,2), …, d(0,n−1), d(1,2), …), as numpy's `y.astype("<f8").tobytes()'.
-spec from_binary(N :: non_neg_integer(), binary()) -> matrix().
from_binary(N, Bin) when byte_size(Bin) =:= 8 * (N * (N - 1) div 2) ->
    M = new(N),
    Cells = M#matrix.cells,
    _ = fill_binary(Cells, Bin, 1),
    M;
from_binary(N, Bin) ->
    error(badarg, [N, Bin]).

%% @doc The number of points.
-spec size(matrix()) -> non_neg_integer().
size(#matrix{size = N}) ->
    N.

%% @doc d(i, j); 0.0 for i = j.
-spec get(matrix(), non_neg_integer(), non_neg_integer()) -> float().
get(#matrix{}, I, I) ->
    0.0;
get(#matrix{size = N, cells = Cells}, I, J) when I < J, J < N ->
    bits_to_float(atomics:get(Cells, index(N, I, J)));
get(#matrix{size = N, cells = Cells}, I, J) when J < I, I < N ->
    bits_to_float(atomics:get(Cells, index(N, J, I))).

%% @doc Sets d(i, j) = d(j, i) for i ≠ j.
-spec set(matrix(), non_neg_integer(), non_neg_integer(), number()) -> ok.
set(#matrix{size = N, cells = Cells}, I, J, D) when I < J, J < N ->
    put_cell(Cells, index(N, I, J), D);
set(#matrix{size = N, cells = Cells}, I, J, D) when J < I, I < N ->
    put_cell(Cells, index(N, J, I), D).

%% @doc An independent copy.
-spec copy(matrix()) -> matrix().
copy(#matrix{size = N, cells = Cells}) ->
    #matrix{cells = To} = Copy = new(N),
    Last = N * (N - 1) div 2,
    copy_cells(Cells, To, 1, Last),
    Copy.

%% @doc Bytes held by the matrix (its `atomics' array).
-spec memory(matrix()) -> non_neg_integer().
memory(#matrix{cells = Cells}) ->
    maps:get(memory, atomics:info(Cells)).

%%--------------------------------------------------------------------
%% API: clustering

%% @doc Clusters the points of `Matrix' (left unchanged) and returns the n−1 merges
%% in scipy's form; see the module documentation.
-spec linkage(matrix(), method()) -> [merge()].
linkage(#matrix{size = N}, _Method) when N < 2 ->
    [];
linkage(#matrix{size = N} = Matrix, Method) when Method =:= complete; Method =:= average; Method =:= single ->
    #matrix{cells = D} = copy(Matrix),
    Sizes = atomics:new(N, [{signed, false}]),
    lists:foreach(fun(I) -> atomics:put(Sizes, I + 1, 1) end, lists:seq(0, N - 1)),
    Raw = chain(D, N, Sizes, Method, lists:seq(0, N - 1), [], N - 1, []),
    label(lists:keysort(3, lists:reverse(Raw)), N).

%%--------------------------------------------------------------------
%% Internal exports

%% @doc The 1-based `atomics' index of the pair i &lt; j among n points.
-spec index(pos_integer(), non_neg_integer(), non_neg_integer()) -> pos_integer().
index(N, I, J) ->
    I * (2 * N - I - 1) div 2 + (J - I - 1) + 1.

%% @doc The `atomics' array of a matrix (condensed, bit patterns of doubles).
-spec cells(matrix()) -> atomics:atomics_ref().
cells(#matrix{cells = Cells}) ->
    Cells.

%% @doc The distance from the union of clusters X (size `Nx') and Y (size `Ny') to a
%% third cluster, from the bit patterns of d(X, ·) and d(Y, ·); a bit pattern.
-spec lance_williams(method(), integer(), integer(), pos_integer(), pos_integer()) -> integer().
lance_williams(complete, Dx, Dy, _Nx, _Ny) ->
    max(Dx, Dy);
lance_williams(single, Dx, Dy, _Nx, _Ny) ->
    min(Dx, Dy);
lance_williams(average, Dx, Dy, Nx, Ny) ->
    float_to_bits((Nx * bits_to_float(Dx) + Ny * bits_to_float(Dy)) / (Nx + Ny)).

%% @doc The bit pattern of a double as a signed 64-bit integer; for non-negative
%% doubles its order is the order of the doubles.
-spec float_to_bits(float()) -> integer().
float_to_bits(F) ->
    <<I:64/signed>> = <<F:64/float>>,
    I.

%% @doc The inverse of {@link float_to_bits/1}.
-spec bits_to_float(integer()) -> float().
bits_to_float(I) ->
    <<F:64/float>> = <<I:64/signed>>,
    F.

%%--------------------------------------------------------------------
%% Internal functions

put_cell(Cells, Index, D) when is_number(D), D >= 0 ->
    F = float(D),
    %% -0.0 would order below every positive distance as a bit pattern
    atomics:put(Cells, Index, case F == 0.0 of true -> 0; false -> float_to_bits(F) end);
put_cell(_Cells, _Index, D) ->
    error(badarg, [D]).

fill_binary(_Cells, <<>>, I) ->
    I;
fill_binary(Cells, <<D:64/little-float, Rest/binary>>, I) when D >= 0 ->
    atomics:put(Cells, I, case D == 0.0 of true -> 0; false -> float_to_bits(D) end),
    fill_binary(Cells, Rest, I + 1);
fill_binary(_Cells, _Bin, I) ->
    error({badarg, {bad_distance_at, I}}).

copy_cells(From, To, I, Last) when I =< Last ->
    atomics:put(To, I, atomics:get(From, I)),
    copy_cells(From, To, I + 1, Last);
copy_cells(_From, _To, _I, _Last) ->
    ok.

%% The nearest-neighbour chain, as scipy's nn_chain: `Active' is ascending; `Chain'
%% has its last element first. The merged cluster takes the slot of the larger index.
chain(_D, _N, _Sizes, _Method, _Active, _Chain, 0, Merges) ->
    Merges;
chain(D, N, Sizes, Method, Active, [], Left, Merges) ->
    chain(D, N, Sizes, Method, Active, [hd(Active)], Left, Merges);
chain(D, N, Sizes, Method, Active, [X | Rest] = Chain, Left, Merges) ->
    {Y, Dxy} = case Rest of
                   [Prev | _] -> nearest(D, N, X, Active, Prev, atomics:get(D, pair(N, X, Prev)));
                   [] -> nearest(D, N, X, Active, none, infinity)
               end,
    case Rest of
        [Y | Rest1] ->
            %% X and Y are reciprocal nearest neighbours: merge them
            {Lo, Hi} = {min(X, Y), max(X, Y)},
            Nx = atomics:get(Sizes, Lo + 1),
            Ny = atomics:get(Sizes, Hi + 1),
            Active1 = lists:delete(Lo, Active),
            update(D, N, Sizes, Method, Lo, Hi, Nx, Ny, Active1),
            atomics:put(Sizes, Lo + 1, 0),
            atomics:put(Sizes, Hi + 1, Nx + Ny),
            chain(D, N, Sizes, Method, Active1, Rest1, Left - 1, [{Lo, Hi, bits_to_float(Dxy), Nx + Ny} | Merges]);
        _ ->
            chain(D, N, Sizes, Method, Active, [Y | Chain], Left, Merges)
    end.

pair(N, I, J) when I < J -> index(N, I, J);
pair(N, I, J) -> index(N, J, I).

%% The nearest active cluster to X; `Best' (the previous chain element) wins ties.
nearest(_D, _N, _X, [], Best, BestD) ->
    {Best, BestD};
nearest(D, N, X, [X | Rest], Best, BestD) ->
    nearest(D, N, X, Rest, Best, BestD);
nearest(D, N, X, [I | Rest], Best, BestD) when I < X ->
    case atomics:get(D, index(N, I, X)) of
        Dist when Dist < BestD -> nearest(D, N, X, Rest, I, Dist);
        _ -> nearest(D, N, X, Rest, Best, BestD)
    end;
nearest(D, N, X, [I | Rest], Best, BestD) ->
    Base = index(N, X, I) - I,
    nearest_above(D, X, Base, [I | Rest], Best, BestD).

%% The rest of the active list is above X: index(N, X, I) = Base + I.
nearest_above(_D, _X, _Base, [], Best, BestD) ->
    {Best, BestD};
nearest_above(D, X, Base, [I | Rest], Best, BestD) ->
    case atomics:get(D, Base + I) of
        Dist when Dist < BestD -> nearest_above(D, X, Base, Rest, I, Dist);
        _ -> nearest_above(D, X, Base, Rest, Best, BestD)
    end.

%% d(Lo ∪ Hi, I) into the slot of Hi, for every active I other than Hi.
update(_D, _N, _Sizes, _Method, _Lo, _Hi, _Nx, _Ny, []) ->
    ok;
update(D, N, Sizes, Method, Lo, Hi, Nx, Ny, [Hi | Rest]) ->
    update(D, N, Sizes, Method, Lo, Hi, Nx, Ny, Rest);
update(D, N, Sizes, Method, Lo, Hi, Nx, Ny, [I | Rest]) ->
    IHi = pair(N, I, Hi),
    New = lance_williams(Method, atomics:get(D, pair(N, I, Lo)), atomics:get(D, IHi), Nx, Ny),
    atomics:put(D, IHi, New),
    update(D, N, Sizes, Method, Lo, Hi, Nx, Ny, Rest).

%% scipy's `label': name clusters by the order of their merges with a union-find.
%% A slot is a point of the cluster it holds, so `find' of a slot is its cluster.
label(Sorted, N) ->
    {Merges, _, _, _} =
        lists:foldl(fun({X, Y, H, _}, {Acc, Parent0, Sizes, Next}) ->
                            {Rx, Parent1} = find(Parent0, X),
                            {Ry, Parent2} = find(Parent1, Y),
                            Size = maps:get(Rx, Sizes, 1) + maps:get(Ry, Sizes, 1),
                            {[{min(Rx, Ry), max(Rx, Ry), H, Size} | Acc],
                             Parent2#{Rx => Next, Ry => Next}, Sizes#{Next => Size}, Next + 1}
                    end, {[], #{}, #{}, N}, Sorted),
    lists:reverse(Merges).

%% The root of X, with the path to it compressed.
find(Parent, X) ->
    case Parent of
        #{X := P} ->
            {Root, Parent1} = find(Parent, P),
            {Root, Parent1#{X => Root}};
        #{} ->
            {X, Parent}
    end.
