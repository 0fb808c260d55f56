%% Properties of spread over failure domains (terrain_spread): on random assignments of
%% nodes to domains, the picks are as many as asked (or every node), each node once,
%% and the counts of two domains differ by at most one unless the smaller domain gave
%% all its nodes (max skew 1); with occupied nodes the skew rule holds for the totals.
-module(prop_spread).
-include_lib("proper/include/proper.hrl").
-export([prop_max_skew_one/0, prop_max_skew_one_with_occupied/0, prop_repeat_spreads_over_nodes/0]).

%% Up to 20 nodes, each in one of up to 6 domains.
nodes_in_domains() ->
    ?LET(Domains, non_empty(list(range(1, 6))),
         [{list_to_atom("n" ++ integer_to_list(I)), D} || {I, D} <- lists:zip(lists:seq(1, length(Domains)), Domains)]).

domain_fun(Assignment) ->
    Map = maps:from_list(Assignment),
    fun(N) -> maps:get(N, Map) end.

%% Domain -> {picks (incl. occupied), nodes available}
counts(Picked, Assignment, Occupied) ->
    Dom = domain_fun(Assignment),
    Avail = lists:foldl(fun({_, D}, Acc) -> maps:update_with(D, fun(C) -> C + 1 end, 1, Acc) end, #{}, Assignment),
    Picks = lists:foldl(fun(N, Acc) -> maps:update_with(Dom(N), fun(C) -> C + 1 end, 1, Acc) end,
                        maps:map(fun(_, _) -> 0 end, Avail), Picked ++ Occupied),
    Own = lists:foldl(fun(N, Acc) -> maps:update_with(Dom(N), fun(C) -> C + 1 end, 1, Acc) end,
                      maps:map(fun(_, _) -> 0 end, Avail), Picked),
    {Picks, Avail, Own}.

%% For domains A, B: picks(A) > picks(B) + 1 only if B has no node left to give, or A's
%% excess is all occupied nodes (picks the rule did not make).
skew_ok(Picked, Assignment, Occupied) ->
    {Picks, Avail, Own} = counts(Picked, Assignment, Occupied),
    Free = fun(D) -> maps:get(D, Avail) - length([N || N <- lists:usort(Picked ++ Occupied),
                                                       (domain_fun(Assignment))(N) =:= D,
                                                       lists:keymember(N, 1, Assignment)]) end,
    lists:all(fun({A, PA}) ->
                      lists:all(fun({B, PB}) ->
                                        PA =< PB + 1 orelse Free(B) =:= 0 orelse maps:get(A, Own) =:= 0
                                end, maps:to_list(Picks))
              end, maps:to_list(Picks)).

prop_max_skew_one() ->
    ?FORALL({Assignment, K}, {nodes_in_domains(), range(1, 25)},
            begin
                Nodes = [N || {N, _} <- Assignment],
                Picked = terrain_spread:assign(Nodes, domain_fun(Assignment), K, [], false),
                length(Picked) =:= min(K, length(Nodes))
                    andalso lists:usort(Picked) =:= lists:sort(Picked)
                    andalso skew_ok(Picked, Assignment, [])
            end).

prop_max_skew_one_with_occupied() ->
    ?FORALL({Assignment, K, Seed}, {nodes_in_domains(), range(1, 10), list(range(1, 20))},
            begin
                Nodes = [N || {N, _} <- Assignment],
                Occupied = lists:usort([lists:nth(1 + (S rem length(Nodes)), Nodes) || S <- Seed]),
                Picked = terrain_spread:assign(Nodes, domain_fun(Assignment), K, Occupied, false),
                length(Picked) =:= min(K, length(Nodes) - length(Occupied))
                    andalso [] =:= [N || N <- Picked, lists:member(N, Occupied)]
                    andalso skew_ok(Picked, Assignment, Occupied)
            end).

%% With repeats K picks are always made; domains differ by at most one pick... unless
%% a domain has fewer nodes it is still never more than one behind (repeats never run
%% out), and within a domain nodes differ by at most one.
prop_repeat_spreads_over_nodes() ->
    ?FORALL({Assignment, K}, {nodes_in_domains(), range(1, 40)},
            begin
                Nodes = [N || {N, _} <- Assignment],
                Dom = domain_fun(Assignment),
                Picked = terrain_spread:assign(Nodes, Dom, K, [], true),
                {Picks, _, _} = counts(Picked, Assignment, []),
                PerNode = [{Dom(N), length([P || P <- Picked, P =:= N])} || N <- Nodes],
                length(Picked) =:= K
                    andalso lists:max(maps:values(Picks)) - lists:min(maps:values(Picks)) =< 1
                    andalso lists:all(fun(D) ->
                                              Cs = [C || {D2, C} <- PerNode, D2 =:= D],
                                              lists:max(Cs) - lists:min(Cs) =< 1
                                      end, maps:keys(Picks))
            end).
