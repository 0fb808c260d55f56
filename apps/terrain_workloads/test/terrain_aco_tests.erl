%% EUnit: the OR-Library reader, schedule cost, MDD, τ0, the pheromone update, local
%% search and the tree's shape.
-module(terrain_aco_tests).
-include_lib("eunit/include/eunit.hrl").

data(Name) ->
    filename:join(filename:dirname(?FILE), Name).

tmp(Text) ->
    File = filename:join(["_build", "test", "tmp", "aco-" ++ integer_to_list(erlang:unique_integer([positive])) ++ ".txt"]),
    ok = filelib:ensure_dir(File),
    ok = file:write_file(File, Text),
    File.

%% p = (3, 2), w = (1, 4), d = (2, 1)
small() ->
    #{jobs => 2, p => {3, 2}, w => {1, 4}, d => {2, 1}}.

reads_instances_and_optima_test() ->
    {ok, I1} = terrain_aco_instance:read(data("wt40_first2.txt"), 40, 1),
    {ok, I2} = terrain_aco_instance:read(data("wt40_first2.txt"), 40, 2),
    ?assertEqual(40, maps:get(jobs, I1)),
    ?assertEqual({26, 24, 79}, list_to_tuple(lists:sublist(tuple_to_list(maps:get(p, I1)), 3))),
    ?assertEqual(1, element(1, maps:get(w, I1))),
    ?assertNotEqual(I1, I2),
    ?assertEqual({ok, 913}, terrain_aco_instance:read_optimum(data("wtopt40_first2.txt"), 1)),
    ?assertEqual({ok, 1225}, terrain_aco_instance:read_optimum(data("wtopt40_first2.txt"), 2)),
    ?assertEqual({ok, 40}, terrain_aco_instance:jobs_from_name("/x/wt40.txt")),
    ?assertEqual(error, terrain_aco_instance:jobs_from_name("instances.txt")).

bad_files_and_indexes_are_clear_errors_test() ->
    Text = fun({error, R}) -> lists:flatten(terrain_aco_instance:format_error(R)) end,
    ?assertMatch("there is no instance 3" ++ _,
                 string:find(Text(terrain_aco_instance:read(data("wt40_first2.txt"), 40, 3)), "there is no instance 3")),
    ?assertNotEqual(nomatch, string:find(Text(terrain_aco_instance:read(data("wt40_first2.txt"), 40, 0)), "no instance 0")),
    ?assertNotEqual(nomatch, string:find(Text(terrain_aco_instance:read(data("wt40_first2.txt"), 7, 1)), "multiple of 3 x 7")),
    ?assertNotEqual(nomatch, string:find(Text(terrain_aco_instance:read(tmp("1 2 x\n"), 1, 1)), "\"x\"")),
    ?assertNotEqual(nomatch, string:find(Text(terrain_aco_instance:read("/nonexistent/wt40.txt", 40, 1)), "cannot read")),
    ?assertNotEqual(nomatch, string:find(Text(terrain_aco_instance:read(tmp("1 2 3"), auto, 1)), "--jobs")),
    ?assertNotEqual(nomatch, string:find(Text(terrain_aco_instance:read_optimum(data("wtopt40_first2.txt"), 9)),
                                         "there is no instance 9")).

schedule_cost_test() ->
    I = small(),
    %% 1 then 2: C1 = 3 (tardy 1, w 1), C2 = 5 (tardy 4, w 4) -> 1 + 16
    ?assertEqual(17, terrain_aco_ant:cost(I, [1, 2])),
    %% 2 then 1: C2 = 2 (tardy 1, w 4), C1 = 5 (tardy 3, w 1) -> 4 + 3
    ?assertEqual(7, terrain_aco_ant:cost(I, [2, 1])),
    ?assertEqual([2, 1], terrain_aco_ant:edd(I)).

mdd_and_tau0_test() ->
    I = small(),
    ?assertEqual(1 / 3, terrain_aco_ant:mdd(I, 0, 1)),      % max(0 + 3, 2)
    ?assertEqual(1 / 7, terrain_aco_ant:mdd(I, 5, 2)),      % max(5 + 2, 1)
    ?assertEqual(1 / (10 * 7), terrain_aco_ant:tau0(I, 10)),  % T_EDD = 7
    ?assertEqual(1.0, terrain_aco_ant:mdd(#{p => {0}, d => {0}}, 0, 1)).

update_touches_only_the_best_schedule_test() ->
    Tau = terrain_aco_ant:new_pheromone(2, 0.5),
    New = terrain_aco_ant:update(Tau, [2, 1], 4, #{rho => 0.1}),
    ?assertEqual(0.9 * 0.5 + 0.1 / 4, element(2, element(1, New))),
    ?assertEqual(0.9 * 0.5 + 0.1 / 4, element(1, element(2, New))),
    ?assertEqual(0.5, element(1, element(1, New))),
    ?assertEqual(0.5, element(2, element(2, New))).

ants_build_permutations_and_repeat_with_a_seed_test() ->
    {ok, I} = terrain_aco_instance:read(data("wt40_first2.txt"), 40, 1),
    Tau = terrain_aco_ant:new_pheromone(40, terrain_aco_ant:tau0(I, 5)),
    Params = #{alpha => 1, beta => 2, q0 => 0.9, rho => 0.1},
    {S1, _} = terrain_aco_ant:construct(I, Tau, Params, rand:seed_s(exsss, 42)),
    {S2, _} = terrain_aco_ant:construct(I, Tau, Params, rand:seed_s(exsss, 42)),
    ?assertEqual(lists:seq(1, 40), lists:sort(S1)),
    ?assertEqual(S1, S2).

local_search_never_worsens_and_reaches_a_local_optimum_test() ->
    {ok, I} = terrain_aco_instance:read(data("wt40_first2.txt"), 40, 1),
    Start = lists:seq(1, 40),
    C0 = terrain_aco_ant:cost(I, Start),
    {S1, C1} = terrain_aco_ant:local_search(I, Start, interchange),
    ?assert(C1 < C0),
    ?assertEqual(C1, terrain_aco_ant:cost(I, S1)),
    ?assertEqual(lists:seq(1, 40), lists:sort(S1)),
    %% No adjacent swap improves any more.
    T = list_to_tuple(S1),
    [?assert(terrain_aco_ant:cost(I, tuple_to_list(setelement(K, setelement(K + 1, T, element(K, T)), element(K + 1, T)))) >= C1)
     || K <- lists:seq(1, 39)],
    {_, C2} = terrain_aco_ant:local_search(I, S1, insertion),
    ?assert(C2 =< C1),
    ?assertEqual({Start, C0}, terrain_aco_ant:local_search(I, Start, none)).

colonies(T) -> [N || {colony, N, _} <- flatten(T)].
flatten({_, _, C} = V) -> [V | lists:append([flatten(X) || X <- C])].

tree_shape_follows_the_node_count_test() ->
    %% 1 + P^2 = 10 nodes for P = 3: depth 2, 9 colonies under 3 submasters.
    T2 = terrain_aco_tree:shape(10, 3),
    ?assertMatch({master, [], [{submaster, [1], _}, {submaster, [2], _}, {submaster, [3], _}]}, T2),
    ?assertEqual(9, length(colonies(T2))),
    %% 1 + P + P^3 = 31 nodes: depth 3, 27 colonies; 30 nodes are not enough.
    ?assertEqual(27, length(colonies(terrain_aco_tree:shape(31, 3)))),
    ?assertEqual(9, length(colonies(terrain_aco_tree:shape(30, 3)))),
    %% Too few nodes: two levels, master and min(P, N - 1) colonies (at least one).
    ?assertEqual({master, [], [{colony, [1], []}, {colony, [2], []}, {colony, [3], []}]}, terrain_aco_tree:shape(5, 3)),
    ?assertEqual({master, [], [{colony, [1], []}]}, terrain_aco_tree:shape(1, 3)),
    %% place_tree sees every vertex: the master, the submasters and the colonies.
    {vertex, [], Top} = terrain_aco_tree:process_tree(T2),
    ?assertEqual(3, length(Top)),
    ?assertEqual([3, 3, 3], [length(C) || {vertex, _, C} <- Top]).

a_local_run_repeats_with_its_seed_and_reaches_the_optimum_test_() ->
    {timeout, 120,
     fun() ->
             {ok, I} = terrain_aco_instance:read(data("wt40_first2.txt"), 40, 1),
             Tree = terrain_aco_tree:shape(5, 3),
             Options = #{ants => 5, global => 4, local => 4, local_search => interchange, seed => 7},
             {ok, R1} = terrain_workloads:aco_run(I, Tree, #{}, Options),
             {ok, R2} = terrain_workloads:aco_run(I, Tree, #{}, Options),
             ?assertEqual(maps:get(best, R1), maps:get(best, R2)),
             ?assertEqual(maps:get(best_cost, R1), terrain_aco_ant:cost(I, maps:get(best, R1))),
             ?assert(maps:get(best_cost, R1) =< 913 * 1.05)
     end}.

%% A binary file is an error that says it is not text (it crashed in string:lexemes:
%% exit 70); a missing file says so before the job count is guessed from its name.
a_binary_instance_file_is_an_error_test() ->
    File = tmp(<<6, 15, 151, 247, 154, 216, 8, 223>>),
    {error, Reason} = terrain_workloads:aco_read_instance(File, 40, 1),
    ?assertMatch({aco_instance, {not_a_number, _, _}}, Reason),
    ?assertMatch({match, _}, re:run(terrain_workloads:aco_format_error(Reason), "it is not text")),
    {error, Missing} = terrain_workloads:aco_read_instance("/nonexist", auto, 1),
    ?assertMatch({aco_instance, {file, "/nonexist", enoent}}, Missing).
