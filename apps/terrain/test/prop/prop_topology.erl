%% Properties of the topology model on random trees: both metrics are ultrametrics,
%% discs are exactly the closed balls, levels never decrease as distance grows.
-module(prop_topology).
-include_lib("proper/include/proper.hrl").
-export([prop_ultrametric_inequality/0, prop_disc_is_closed_ball/0, prop_level_monotone_in_distance/0,
         prop_distance_symmetric_and_zero_only_on_diagonal/0]).

%% A random tree of networks (depth ≤ 4, width ≤ 3, so at most about a hundred nodes)
%% with fresh node names; heights halve with depth.
tree() ->
    ?LET(Shape, shape(3), number(Shape)).

shape(0) -> ?LET(N, range(1, 3), {leaves, N});
shape(D) -> frequency([{1, shape(0)},
                       {3, ?LET({Width, Leaves}, {range(1, 3), range(0, 2)},
                                ?LET(Kids, vector(Width, shape(D - 1)), {net, Kids, Leaves}))}]).

number(Shape) ->
    {Tree, _} = number(Shape, 1, 100000),
    case Tree of
        {node, _} = Leaf -> {network, root, [Leaf]};
        _ -> Tree
    end.

number({leaves, N}, Next, Height) ->
    {{network, list_to_atom("g" ++ integer_to_list(Next)), #{height => Height},
      [{node, list_to_atom("n" ++ integer_to_list(Next + I))} || I <- lists:seq(1, N)]}, Next + N + 1};
number({net, Kids, Leaves}, Next, Height) ->
    {Children, Next1} = lists:mapfoldl(fun(K, Acc) -> number(K, Acc, Height div 2) end, Next + 1, Kids),
    Direct = [{node, list_to_atom("n" ++ integer_to_list(Next1 + I))} || I <- lists:seq(1, Leaves)],
    {{network, list_to_atom("g" ++ integer_to_list(Next)), #{height => Height}, Children ++ Direct}, Next1 + Leaves + 1}.

with_metric() ->
    ?LET({Tree, Metric}, {tree(), oneof([ultrametric, measured])},
         begin {ok, T} = terrain_topology:new(Tree, #{metric => Metric}), T end).

prop_ultrametric_inequality() ->
    ?FORALL(T, with_metric(),
            begin
                Ns = terrain_topology:nodes(T),
                D = fun(X, Y) -> terrain_topology:distance(T, X, Y) end,
                lists:all(fun({X, Y, Z}) -> D(X, Z) =< max(D(X, Y), D(Y, Z)) end,
                          [{X, Y, Z} || X <- Ns, Y <- Ns, Z <- Ns])
            end).

prop_distance_symmetric_and_zero_only_on_diagonal() ->
    ?FORALL(T, with_metric(),
            lists:all(fun({X, Y}) ->
                              D = terrain_topology:distance(T, X, Y),
                              D == terrain_topology:distance(T, Y, X) andalso ((D == 0) =:= (X =:= Y)
                                                                               orelse terrain_topology:metric(T) =:= measured)
                      end, [{X, Y} || X <- terrain_topology:nodes(T), Y <- terrain_topology:nodes(T)])).

prop_disc_is_closed_ball() ->
    ?FORALL({T, R}, {with_metric(), oneof([0, 0.125, 0.25, 0.5, 1.0, 2.0, range(0, 200000)])},
            lists:all(fun(X) ->
                              terrain_topology:disc(T, X, R)
                                  =:= [Y || Y <- terrain_topology:nodes(T), terrain_topology:distance(T, X, Y) =< R]
                      end, terrain_topology:nodes(T))).

prop_level_monotone_in_distance() ->
    ?FORALL(T, with_metric(),
            begin
                Ns = [stranger | terrain_topology:nodes(T)],
                Pairs = [{terrain_topology:distance(T, X, Y), terrain_topology:level_rank(terrain_topology:level(T, X, Y))}
                         || X <- Ns, Y <- Ns],
                lists:all(fun({{D1, L1}, {D2, L2}}) -> D1 > D2 orelse L1 =< L2 end,
                          [{P, Q} || P <- Pairs, Q <- Pairs])
            end).
