%% Properties of EMAS's operators: energy is conserved by fights and reproduction,
%% recombination stays between the parents, mutation keeps the length, solutions
%% survive encoding.
-module(prop_emas).
-include_lib("proper/include/proper.hrl").

-export([prop_fight_conserves_energy/0, prop_reproduction_conserves_energy/0,
         prop_recombination_between_parents/0, prop_mutation_keeps_length/0, prop_encode_round_trip/0]).

params() ->
    {ok, P} = terrain_emas:validate(#{dimensions => 8}),
    P.

agent() ->
    ?LET({Genes, E}, {vector(8, float(-50.0, 50.0)), range(0, 30)},
         begin Sol = terrain_emas:encode(Genes, binary), {Sol, terrain_emas:evaluate(Sol), E} end).

prop_fight_conserves_energy() ->
    ?FORALL(Agents, oneof([[agent()], [agent(), agent()]]),
            begin
                After = terrain_emas:fight(Agents, params()),
                terrain_emas:total_energy(After) =:= terrain_emas:total_energy(Agents)
                    andalso lists:all(fun({_, _, E}) -> E >= 0 end, After)
            end).

prop_reproduction_conserves_energy() ->
    ?FORALL({Agents, Seed}, {oneof([[agent()], [agent(), agent()]]), integer()},
            begin
                {After, _} = terrain_emas:reproduce(Agents, params(), terrain_emas:island_seed(Seed, 0)),
                terrain_emas:total_energy(After) =:= terrain_emas:total_energy(Agents)
                    andalso length(After) =:= 2 * length(Agents)
                    andalso lists:all(fun({S, F, E}) -> E >= 0 andalso F =:= terrain_emas:evaluate(S) end, After)
            end).

prop_recombination_between_parents() ->
    ?FORALL({A, B, Seed}, {vector(6, float(-50.0, 50.0)), vector(6, float(-50.0, 50.0)), integer()},
            begin
                {{C, D}, _} = terrain_emas:recombine(A, B, terrain_emas:island_seed(Seed, 0)),
                Between = fun(X, Y, Z) -> Z >= min(X, Y) andalso Z =< max(X, Y) end,
                lists:all(fun({X, Y, Z}) -> Between(X, Y, Z) end, lists:zip3(A, B, C))
                    andalso lists:all(fun({X, Y, Z}) -> Between(X, Y, Z) end, lists:zip3(A, B, D))
            end).

prop_mutation_keeps_length() ->
    ?FORALL({Genes, Seed}, {non_empty(list(float(-50.0, 50.0))), integer()},
            begin
                {M, _} = terrain_emas:mutate(Genes, params(), terrain_emas:island_seed(Seed, 0)),
                length(M) =:= length(Genes)
                    %% at most rate × length genes change (at least one when that is below one)
                    andalso length([x || {X, Y} <- lists:zip(Genes, M), X =/= Y]) =< max(1, trunc(0.1 * length(Genes)))
            end).

prop_encode_round_trip() ->
    ?FORALL(Genes, list(float()),
            terrain_emas:decode(terrain_emas:encode(Genes, binary)) =:= Genes).
