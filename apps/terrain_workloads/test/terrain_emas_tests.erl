%% EUnit tests of EMAS: Rastrigin's values, the operators' energy bookkeeping,
%% seeded reproducibility, migration topologies, parameter checks, arena timeouts.
-module(terrain_emas_tests).
-include_lib("eunit/include/eunit.hrl").

params(Overrides) ->
    {ok, P} = terrain_emas:validate(Overrides),
    P.

%%--------------------------------------------------------------------
%% Rastrigin

rastrigin_values_test_() ->
    [?_assertEqual(0.0, terrain_emas:rastrigin(lists:duplicate(100, 0.0))),
     %% cos(2π) = 1: each dimension adds 10 + 1 − 10
     ?_assert(abs(terrain_emas:rastrigin(lists:duplicate(100, 1.0)) - 100.0) < 1.0e-9),
     %% cos(π) = −1: 10 + 0.25 + 10
     ?_assert(abs(terrain_emas:rastrigin([0.5]) - 20.25) < 1.0e-12),
     ?_assert(abs(terrain_emas:rastrigin([2.0, -3.0]) - 13.0) < 1.0e-9),
     %% the binary and list forms agree, and fitness is −f
     ?_assertEqual(terrain_emas:rastrigin([0.5, -1.25, 3.0]),
                   terrain_emas:rastrigin(terrain_emas:encode([0.5, -1.25, 3.0], binary))),
     ?_assertEqual(-20.25, terrain_emas:evaluate([0.5]))].

encode_decode_round_trip_test() ->
    Genes = [-50.0, 0.0, 1.5e-300, 49.999],
    ?assertEqual(Genes, terrain_emas:decode(terrain_emas:encode(Genes, binary))),
    ?assertEqual(Genes, terrain_emas:decode(terrain_emas:encode(Genes, list))),
    ?assertEqual(32, byte_size(terrain_emas:encode(Genes, binary))).

new_agents_start_in_the_box_with_the_initial_energy_test() ->
    P = params(#{dimensions => 50}),
    {{Solution, Fitness, Energy}, _} = terrain_emas:new_agent(P, terrain_emas:island_seed(3, 1)),
    Genes = terrain_emas:decode(Solution),
    ?assertEqual(50, length(Genes)),
    ?assert(lists:all(fun(X) -> X >= -50.0 andalso X =< 50.0 end, Genes)),
    ?assertEqual(-terrain_emas:rastrigin(Solution), Fitness),
    ?assertEqual(10, Energy).

%%--------------------------------------------------------------------
%% Energy in fights and reproduction

fight_moves_energy_to_the_fitter_test_() ->
    P = params(#{}),
    [?_assertEqual([{a, -5.0, 0}, {b, -1.0, 16}], terrain_emas:fight([{a, -5.0, 10}, {b, -1.0, 6}], P)),
     %% the loser gives all it has when that is less than the transfer
     ?_assertEqual([{a, -1.0, 13}, {b, -5.0, 0}], terrain_emas:fight([{a, -1.0, 10}, {b, -5.0, 3}], P)),
     ?_assertEqual([{a, -1.0, 7}], terrain_emas:fight([{a, -1.0, 7}], P))].

reproduction_conserves_energy_test_() ->
    P = params(#{dimensions => 10}),
    S = terrain_emas:island_seed(11, 1),
    {A, S1} = terrain_emas:new_agent(P, S),
    {B, S2} = terrain_emas:new_agent(P, S1),
    Rich = setelement(3, A, 14),
    Poor = setelement(3, B, 3),
    {Pair, _} = terrain_emas:reproduce([Rich, Poor], P, S2),
    {Lone, _} = terrain_emas:reproduce([Rich], P, S2),
    [?_assertEqual(4, length(Pair)),
     ?_assertEqual(17, terrain_emas:total_energy(Pair)),
     %% parents give min(transfer, energy): 5 and 3
     ?_assertEqual([9, 0, 5, 3], [E || {_, _, E} <- Pair]),
     ?_assertEqual([9, 5], [E || {_, _, E} <- Lone]),
     %% children are evaluated
     ?_assert(lists:all(fun({Sol, F, _}) -> F =:= terrain_emas:evaluate(Sol) end, Pair))].

whole_runs_conserve_energy_test_() ->
    {timeout, 60,
     [?_test(begin
                 {ok, #{summary := S}} = terrain_workloads:emas(#{model => M, time_ms => 300, islands => 3,
                                                                  population => 30, dimensions => 20,
                                                                  migration_probability => 0.01}),
                 ?assertEqual(3 * 30 * 10, maps:get(energy_initial, S)),
                 ?assertEqual(maps:get(energy_initial, S), maps:get(energy_final, S)),
                 ?assertEqual(0, maps:get(lost_agents, S)),
                 ?assert(maps:get(reproductions, S) > 0),
                 ?assert(maps:get(best_fitness, S) >= maps:get(initial_best_fitness, S))
             end) || M <- [sequential, hybrid, concurrent, skel]]}.

%%--------------------------------------------------------------------
%% Reproducibility

seeded_runs_are_reproducible_test_() ->
    Run = fun(Model, Seed) ->
                  {ok, #{summary := S}} = terrain_workloads:emas(#{model => Model, steps => 30, seed => Seed,
                                                                   islands => 3, population => 20,
                                                                   dimensions => 10,
                                                                   migration_probability => 0.05}),
                  maps:with([best_fitness, reproductions, fights, deaths, migrations, agents_final, islands], S)
          end,
    {timeout, 60,
     [?_assertEqual(Run(M, 7), Run(M, 7)) || M <- [sequential, skel]]
     ++ [?_assertNotEqual(Run(M, 7), Run(M, 8)) || M <- [sequential, skel]]}.

runs_leave_the_global_rand_state_alone_test() ->
    _ = rand:seed(exsss, 99),
    Before = rand:export_seed(),
    {ok, _} = terrain_workloads:emas(#{model => sequential, steps => 5, population => 10, dimensions => 5}),
    ?assertEqual(Before, rand:export_seed()).

%%--------------------------------------------------------------------
%% Topologies

destinations_test_() ->
    Nodes = {n1, n1, n2, n3},
    NoLevel = fun(_, _) -> error(not_called) end,
    Level = fun(Same, Same) -> same_node; (n1, n2) -> near; (n1, n3) -> very_far end,
    [?_assertEqual([{1.0, {2, 3, 4}}], terrain_emas:destinations(mesh, 1, {Nodes, NoLevel})),
     ?_assertEqual([{1.0, {2, 4}}], terrain_emas:destinations(ring, 1, {Nodes, NoLevel})),
     ?_assertEqual([{1.0, {1, 3}}], terrain_emas:destinations(ring, 4, {Nodes, NoLevel})),
     ?_assertEqual([{1.0, {1}}], terrain_emas:destinations(ring, 1, {{n1}, NoLevel})),
     %% levels present: same_node, near, very_far -> weights 1, 1/2, 1/4 of 7/4
     ?_assertMatch([{W1, {2}}, {W2, {3}}, {W3, {4}}]
                   when abs(W1 - 4 / 7) < 1.0e-9 andalso abs(W2 - 6 / 7) < 1.0e-9 andalso abs(W3 - 1.0) < 1.0e-9,
                   terrain_emas:destinations(nearest_first, 1, {Nodes, Level}))].

nearest_first_prefers_the_nearest_level_test() ->
    Ds = terrain_emas:destinations(nearest_first, 1, {{n1, n1, n2, n3}, fun(Same, Same) -> same_node;
                                                                           (n1, n2) -> near;
                                                                           (n1, n3) -> very_far end}),
    {Picks, _} = lists:mapfoldl(fun(_, S) -> terrain_emas:destination(Ds, S) end,
                                terrain_emas:island_seed(5, x), lists:seq(1, 7000)),
    Share = fun(I) -> length([P || P <- Picks, P =:= I]) / 7000 end,
    ?assert(abs(Share(2) - 4 / 7) < 0.03),
    ?assert(abs(Share(3) - 2 / 7) < 0.03),
    ?assert(abs(Share(4) - 1 / 7) < 0.03).

%%--------------------------------------------------------------------
%% Parameters

defaults_are_erlang_emas_test() ->
    D = terrain_workloads:emas_defaults(),
    ?assertMatch(#{islands := 4, population := 100, dimensions := 100, initial_energy := 10,
                   reproduction_threshold := 11, reproduction_transfer := 5, fight_transfer := 10,
                   recombination_probability := 0.3, mutation_probability := 0.75, mutation_rate := 0.1,
                   mutation_range := 0.05, migration_probability := 0.0001, topology := mesh,
                   solution := binary}, D).

%% The rows sent to the progress pid, second by second, begin the run's rows (the last,
%% partial second comes only with the result); the summary's parameters leave the pid out.
progress_sends_each_seconds_rows_test_() ->
    {timeout, 30,
     fun() ->
             {ok, #{rows := Rows, summary := #{parameters := Parameters}}} =
                 terrain_workloads:emas(#{model => hybrid, islands => 2, population => 20, dimensions => 10,
                                          time_ms => 2500, progress => self()}),
             Sent = progress_rows([]),
             %% a second whose islands did not answer within 800 ms has no rows (a loaded machine)
             ?assertNotEqual([], Sent),
             ?assert(lists:all(fun(#{second := S}) -> S =:= 1 orelse S =:= 2 end, Sent)),
             ?assertEqual(Sent, lists:sublist(Rows, length(Sent))),
             ?assertNot(is_map_key(progress, Parameters))
     end}.

progress_rows(Acc) ->
    receive {emas_progress, New} -> progress_rows(Acc ++ New)
    after 0 -> Acc
    end.

bad_parameters_are_errors_test_() ->
    [?_assertMatch({error, {emas, {bad_option, islands, 0}}}, terrain_workloads:emas(#{islands => 0})),
     ?_assertMatch({error, {emas, {bad_option, initial_energy, -1}}}, terrain_workloads:emas(#{initial_energy => -1})),
     ?_assertMatch({error, {emas, {bad_option, mutation_rate, 1.5}}}, terrain_workloads:emas(#{mutation_rate => 1.5})),
     ?_assertMatch({error, {emas, {unknown_option, energy}}}, terrain_workloads:emas(#{energy => 3})),
     ?_assertMatch({error, {emas, {bad_option, progress, self}}}, terrain_workloads:emas(#{progress => self})),
     ?_assertMatch({error, {emas, {model_is_local, concurrent}}},
                   terrain_workloads:emas(#{model => concurrent, nodes => [other@host]})),
     ?_assertMatch({error, {emas, {steps_need_a_deterministic_model, hybrid}}},
                   terrain_workloads:emas(#{model => hybrid, steps => 3})),
     ?_assertNotEqual(nomatch, string:find(terrain_workloads:format_error({emas, {bad_option, islands, 0}}),
                                           "positive integer"))].

%%--------------------------------------------------------------------
%% Arenas

arena(Kind, Timeout, Deadline) ->
    Self = self(),
    P = params(#{arena_timeout => Timeout, dimensions => 5}),
    Setup = #{kind => Kind, island => 1, params => P, seed => 1, deadline => Deadline,
              spawn_child => fun(Child, _Seed) -> Self ! {child, Child} end,
              record => fun(_, _, _) -> ok end},
    {ok, Arena} = terrain_emas_arena:start_link(Setup, []),
    {Arena, P}.

far() -> erlang:monotonic_time(millisecond) + 60000.

lone_agent_meets_alone_after_the_arena_timeout_test_() ->
    [?_test(begin
                {Arena, P} = arena(fight, 50, far()),
                {Agent, _} = terrain_emas:new_agent(P, terrain_emas:island_seed(1, 1)),
                T0 = erlang:monotonic_time(millisecond),
                ?assertEqual({agent, Agent}, terrain_emas_arena:enter(Arena, Agent, Mode, 5000)),
                ?assert(erlang:monotonic_time(millisecond) - T0 >= 50),
                terrain_emas_arena:stop(Arena)
            end) || Mode <- [cast, call]].

lone_reproduction_has_one_child_and_keeps_the_energy_test() ->
    {Arena, P} = arena(reproduction, 30, far()),
    {{S, F, _}, _} = terrain_emas:new_agent(P, terrain_emas:island_seed(1, 2)),
    {agent, {S, F, E}} = terrain_emas_arena:enter(Arena, {S, F, 12}, cast, 5000),
    Child = receive {child, C} -> C after 1000 -> error(no_child) end,
    ?assertEqual(12, E + element(3, Child)),
    ?assertEqual(7, E),
    terrain_emas_arena:stop(Arena).

pairs_meet_without_waiting_for_the_timeout_test() ->
    {Arena, P} = arena(fight, 60000, far()),
    {A, _} = terrain_emas:new_agent(P, terrain_emas:island_seed(1, 3)),
    {B, _} = terrain_emas:new_agent(P, terrain_emas:island_seed(1, 4)),
    Self = self(),
    spawn_link(fun() -> Self ! {other, terrain_emas_arena:enter(Arena, B, cast, 5000)} end),
    {agent, A1} = terrain_emas_arena:enter(Arena, A, cast, 5000),
    {agent, B1} = receive {other, R} -> R after 5000 -> error(no_partner) end,
    ?assertEqual(20, element(3, A1) + element(3, B1)),
    terrain_emas_arena:stop(Arena).

agent_gives_up_a_dead_arena_test_() ->
    [?_test(begin
                {Arena, P} = arena(fight, 50, far()),
                terrain_emas_arena:stop(Arena),
                {Agent, _} = terrain_emas:new_agent(P, terrain_emas:island_seed(1, 5)),
                ?assertEqual(timeout, terrain_emas_arena:enter(Arena, Agent, Mode, 100))
            end) || Mode <- [cast, call]].

arena_past_its_deadline_answers_close_test() ->
    {Arena, P} = arena(fight, 20, erlang:monotonic_time(millisecond) - 1),
    {Agent, _} = terrain_emas:new_agent(P, terrain_emas:island_seed(1, 6)),
    %% the lone meeting reads the clock and closes the arena; the next entry is refused
    {agent, Agent} = terrain_emas_arena:enter(Arena, Agent, cast, 5000),
    ?assertEqual(close, terrain_emas_arena:enter(Arena, Agent, cast, 5000)),
    terrain_emas_arena:close(Arena),
    ?assertEqual(close, terrain_emas_arena:enter(Arena, Agent, call, 5000)),
    terrain_emas_arena:stop(Arena).

message_cost_measures_both_forms_test() ->
    L = terrain_workloads:emas_message_cost(#{solution => list, messages => 50}),
    B = terrain_workloads:emas_message_cost(#{solution => binary, messages => 50}),
    %% a list of 100 floats is copied whole; a binary over 64 bytes is shared
    ?assert(maps:get(bytes, L) > 3000),
    ?assert(maps:get(bytes, B) < 100),
    ?assert(maps:get(round_trip_us, L) > 0).
