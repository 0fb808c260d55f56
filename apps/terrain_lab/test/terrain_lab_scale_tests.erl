%% EUnit: the scaling experiment's pure parts (terrain_lab_scale).
-module(terrain_lab_scale_tests).
-include_lib("eunit/include/eunit.hrl").

sizes_stop_at_the_maximum_test() ->
    ?assertEqual([16], terrain_lab_scale:sizes(16)),
    ?assertEqual([16, 32, 64], terrain_lab_scale:sizes(100)),
    ?assertEqual([16, 32, 64, 128, 256], terrain_lab_scale:sizes(256)).

spec_of_n_nodes_is_a_valid_spec_of_n_one_scheduler_nodes_test() ->
    [begin
         {ok, Spec} = terrain_lab_spec:from_terms(terrain_lab_scale:spec_terms(N, none), undefined),
         Nodes = terrain_lab_spec:nodes(Spec),
         ?assertEqual(N, length(Nodes)),
         ?assertEqual([1], lists:usort([S || #{schedulers := S} <- Nodes])),
         %% sites of 4 racks: three levels of groups above every node
         ?assertEqual([2], lists:usort([length(P) || #{path := P} <- Nodes])),
         %% connections on demand, no emulated links
         ?assertNot(terrain_lab_spec:connect_all(Spec)),
         ?assertNot(terrain_lab_netem:enabled(Spec))
     end || N <- [16, 32, 64, 128, 256]].

spec_with_latency_has_a_link_per_level_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms(terrain_lab_scale:spec_terms(64, {20000, 2000, 200}), undefined),
    ?assert(terrain_lab_netem:enabled(Spec)),
    ?assertNot(terrain_lab_spec:connect_all(Spec)),
    %% the spec's tree carries the round trips: 2 x the one-way latency of each level
    Tree = terrain_lab_spec:topology(Spec, fun(Name) -> Name end),
    {network, scale64, #{height := 40000}, [{network, s1, #{height := 4000}, [Rack | _]} | _]} = Tree,
    ?assertMatch({network, s1r1, #{height := 400}, [{node, s1r1n1} | _]}, Rack).

a_bad_latency_is_a_usage_error_with_a_sentence_test() ->
    [?assertEqual({error, {usage, "--latency " ++ Text ++ ": expected three one-way latencies in microseconds "
                           "from 1 to 10000000 (10 s), SITE,RACK,NODE (e.g. 20000,2000,200)"}},
                  terrain_lab_cmd_experiment:run(#{latency => Text, max_nodes => 16, probe_budget => 1,
                                                   probe_strategy => "tree", prefix => "x_"}, ["scale"], undefined))
     || Text <- ["20000,2000", "a,b,c", "20000,2000,0", "99999999999999999999999,1,1", "1,10000001,1"]].

growth_exponent_is_the_slope_on_log_log_axes_test() ->
    ?assert(abs(terrain_lab_scale:growth_exponent([{N, 0.5 * N * N} || N <- [16, 32, 64]]) - 2.0) < 1.0e-9),
    ?assert(abs(terrain_lab_scale:growth_exponent([{N, 7.0} || N <- [16, 32, 64, 128]])) < 1.0e-9),
    ?assertEqual(null, terrain_lab_scale:growth_exponent([{16, 1.0}])).

too_small_a_maximum_is_refused_with_a_sentence_test() ->
    {error, Reason} = terrain_lab_scale:run("/nonexistent", #{max_nodes => 8, probe_budget_s => 1, prefix => "x_",
                                                              probe_strategy => tree, latency => none,
                                                              io => undefined}, fun(_) -> ok end),
    ?assertEqual("--max-nodes must be at least 16 (the smallest size measured), got 8",
                 lists:flatten(terrain_lab_scale:format_error(Reason))).
