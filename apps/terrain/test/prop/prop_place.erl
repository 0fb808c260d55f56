%% Property: on random topologies and process trees, distance-aware placement never
%% costs more than random placement on average (sum over root-to-leaf paths).
-module(prop_place).
-include_lib("proper/include/proper.hrl").
-export([prop_never_worse_than_random/0, prop_every_vertex_placed_within_capacity/0]).

topology() ->
    ?LET({Sites, Racks, PerRack}, {range(1, 3), range(1, 4), range(1, 6)},
         begin
             Tree = {network, dc, [{network, {s, S}, [{network, {r, S, R}, [{node, list_to_atom(lists:flatten(io_lib:format("n~b_~b_~b", [S, R, I])))}
                                                                              || I <- lists:seq(1, PerRack)]}
                                                      || R <- lists:seq(1, Racks)]}
                                  || S <- lists:seq(1, Sites)]},
             {ok, T} = terrain_topology:new(Tree),
             T
         end).

process_tree() ->
    ?LET({Subs, Leaves}, {range(1, 6), range(1, 8)},
         {vertex, root, [{vertex, {sub, S}, [{vertex, {leaf, S, L}, []} || L <- lists:seq(1, Leaves)]} || S <- lists:seq(1, Subs)]}).

prop_never_worse_than_random() ->
    ?FORALL({T, Tree}, {topology(), process_tree()},
            begin
                {ok, #{cost := #{sum := Ours}, random := #{sum := Random}}} =
                    terrain_place:place(Tree, T, #{nodes => terrain_topology:nodes(T), random_rounds => 30}),
                Ours =< Random + 1.0e-9
            end).

prop_every_vertex_placed_within_capacity() ->
    ?FORALL({T, Tree}, {topology(), process_tree()},
            begin
                Nodes = terrain_topology:nodes(T),
                {ok, #{assignment := A}} = terrain_place:place(Tree, T, #{nodes => Nodes, random_rounds => 1}),
                V = length(terrain_place:vertices(Tree)),
                Capacity = (V + length(Nodes) - 1) div length(Nodes),
                Load = lists:foldl(fun(N, M) -> maps:update_with(N, fun(C) -> C + 1 end, 1, M) end, #{}, maps:values(A)),
                map_size(A) =:= V andalso lists:max(maps:values(Load)) =< Capacity
                    andalso lists:all(fun(N) -> lists:member(N, Nodes) end, maps:keys(Load))
            end).
