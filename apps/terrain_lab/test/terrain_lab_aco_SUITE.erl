%% ML-ACO on a real cluster: the tree's vertices run on the nodes their placement
%% names, and a distributed run finds exactly what a local run with the same seed finds.
-module(terrain_lab_aco_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0]).
-export([distributed_run_matches_local_run/0, distributed_run_matches_local_run/1,
         attributes_placement_follows_the_largest_quotas/0, attributes_placement_follows_the_largest_quotas/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [distributed_run_matches_local_run, attributes_placement_follows_the_largest_quotas].

distributed_run_matches_local_run() ->
    [{doc, "On a 5-node cluster, random and distance placements use several nodes, and the run's "
           "best schedule equals that of a local run with the same seed."}].
distributed_run_matches_local_run(_Config) ->
    File = filename:join([code:lib_dir(terrain_workloads), "test", "wt40_first2.txt"]),
    DataFile = case filelib:is_regular(File) of
                   true -> File;
                   false -> filename:join([filename:dirname(code:which(terrain_aco_tests)), "wt40_first2.txt"])
               end,
    {ok, Instance} = terrain_workloads:aco_read_instance(DataFile, 40, 2),
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, acot, #{}} |
                                              [{node, list_to_atom("a" ++ integer_to_list(I)), #{schedulers => 1}}
                                               || I <- lists:seq(1, 5)]], undefined),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "aco" ++ os:getpid() ++ "_"}),
    try
        Nodes = [N || #{node := N} <- terrain_lab:cluster_nodes(Cluster)],
        Tree = terrain_workloads:aco_tree(length(Nodes), 2),
        Options = #{ants => 4, global => 3, local => 3, local_search => interchange, seed => 11},
        {ok, Local} = terrain_workloads:aco_run(Instance, Tree, #{}, Options),
        [begin
             {ok, Assignment} = terrain_lab_aco:place(Placement, Tree, Nodes, 3),
             Used = lists:usort(maps:values(Assignment)),
             ?assert(length(Used) >= 3, {Placement, Used}),
             ?assert(lists:all(fun(N) -> lists:member(N, Nodes) end, Used)),
             {ok, Remote} = terrain_workloads:aco_run(Instance, Tree, Assignment, Options),
             ct:pal("~p: ~b colonies on ~b nodes, best ~b (local ~b), main ~.3f s",
                    [Placement, length(colonies(Tree)), length(Used), maps:get(best_cost, Remote),
                     maps:get(best_cost, Local), maps:get(main_s, Remote)]),
             ?assertEqual(maps:get(best, Local), maps:get(best, Remote))
         end || Placement <- [random, distance]]
    after
        ok = terrain_lab:stop_cluster(Cluster)
    end.

attributes_placement_follows_the_largest_quotas() ->
    [{doc, "attributes placement: with cpu_quota 0.4 on 4 nodes and 0.05 on 3 (set as attributes), the 4 colonies "
           "go to the 4 big nodes, one each, and the master and submasters to the small ones, whatever the nodes' "
           "order; among the big nodes alone (no small one) the placement is relaxed to all of them."}].
attributes_placement_follows_the_largest_quotas(_Config) ->
    Quotas = [0.4, 0.4, 0.4, 0.4, 0.05, 0.05, 0.05],
    Names = [list_to_atom("q" ++ integer_to_list(I)) || I <- lists:seq(1, length(Quotas))],
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, acoq, #{}} |
                                              [{node, N, #{schedulers => 1, attrs => [{cpu_quota, Q}]}}
                                               || {N, Q} <- lists:zip(Names, Quotas)]], undefined),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "acoq" ++ os:getpid() ++ "_"}),
    try
        Nodes = [N || #{node := N} <- terrain_lab:cluster_nodes(Cluster)],
        {Big, Small} = lists:split(4, Nodes),
        Tree = terrain_workloads:aco_tree(length(Nodes), 2),
        Colonies = colonies(Tree),
        ?assertEqual(4, length(Colonies)),
        %% Whatever the order of the nodes, the roles follow the attribute.
        [begin
             {ok, Assignment} = terrain_lab_aco:place(attributes, Tree, Order, 1),
             ColonyNodes = [maps:get(C, Assignment) || C <- Colonies],
             ?assertEqual(lists:sort(Big), lists:sort(ColonyNodes)),
             Others = [maps:get(V, Assignment) || V <- maps:keys(Assignment), not lists:member(V, Colonies)],
             ?assertEqual(lists:sort(Small), lists:sort(Others))
         end || Order <- [Nodes, lists:reverse(Nodes), Small ++ Big]],
        %% Only the 0.4 nodes: none is small, so every role may use every node.
        {ok, Relaxed} = terrain_lab_aco:place(attributes, Tree, Big, 1),
        ?assertEqual(lists:sort(Big), lists:usort(maps:values(Relaxed)))
    after
        ok = terrain_lab:stop_cluster(Cluster)
    end.

colonies({colony, N, _}) -> [N];
colonies({_, _, C}) -> lists:append([colonies(X) || X <- C]).
