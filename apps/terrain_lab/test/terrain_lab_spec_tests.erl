%% Cluster spec validation: valid specs are read into groups and nodes; every invalid
%% shape is rejected with {error, {spec, ...}} and a sentence that names the problem.
-module(terrain_lab_spec_tests).
-include_lib("eunit/include/eunit.hrl").

-define(CLUSTER, {cluster, c, #{latency => 5000}}).

message(Terms) ->
    {error, Reason} = terrain_lab_spec:from_terms(Terms, "t.cluster"),
    lists:flatten(io_lib:format("~ts", [terrain_lab:format_error(Reason)])).

rejects(Terms, Expected) ->
    Message = message(Terms),
    ?assert(string:find(Message, Expected) =/= nomatch, Message).

demo_spec_reads_into_twelve_nodes_test() ->
    {ok, Spec} = terrain_lab_spec:read(filename:join(root(), "examples/demo.cluster")),
    Nodes = terrain_lab_spec:nodes(Spec),
    ?assertEqual(12, length(Nodes)),
    ?assertEqual([eu, eu_r1], maps:get(path, hd(Nodes))),
    ?assertEqual([2, 1, 1, 2, 2, 1, 4, 1, 2, 1, 2, 1], [maps:get(schedulers, N) || N <- Nodes]),
    ?assertEqual(#{latency => 300}, terrain_lab_spec:link(Spec, eu1, eu2)),
    ?assertEqual(#{latency => 4000}, terrain_lab_spec:link(Spec, eu1, eu4)),
    ?assertEqual(#{latency => 20000}, terrain_lab_spec:link(Spec, eu1, us1)),
    ?assertEqual(#{}, terrain_lab_spec:link(Spec, eu1, eu1)).

groups_nest_to_any_depth_test() ->
    Deep = lists:foldl(fun(I, Inner) -> {group, list_to_atom("g" ++ integer_to_list(I)), #{latency => I}, [Inner]} end,
                       {node, leaf, #{}}, lists:seq(1, 20)),
    {ok, Spec} = terrain_lab_spec:from_terms([?CLUSTER, Deep, {node, top, #{}}], undefined),
    [#{name := leaf, path := Path}, #{name := top, path := []}] = terrain_lab_spec:nodes(Spec),
    ?assertEqual(20, length(Path)),
    ?assertEqual(#{latency => 5000}, terrain_lab_spec:link(Spec, leaf, top)).

missing_file_test() ->
    {error, Reason} = terrain_lab_spec:read("/nonexistent/x.cluster"),
    ?assertEqual("cluster spec /nonexistent/x.cluster: no such file", lists:flatten(terrain_lab:format_error(Reason))).

syntax_error_names_the_line_test() ->
    File = "/tmp/terrain_spec_syntax_" ++ os:getpid() ++ ".cluster",
    ok = file:write_file(File, "{cluster, c, #{}}.\n{node, n1 #{}}.\n"),
    try
        {error, Reason} = terrain_lab_spec:read(File),
        Message = lists:flatten(terrain_lab:format_error(Reason)),
        ?assertNotEqual(nomatch, string:find(Message, "line 2: syntax error"))
    after
        file:delete(File)
    end.

empty_file_test() -> rejects([], "the first term must be {cluster, Name, Options}").
cluster_term_not_first_test() -> rejects([{node, a, #{}}, ?CLUSTER], "term 1: the first term must be").
bad_cluster_term_test() -> rejects([{cluster, "c", #{}}], "the cluster term must be {cluster, Name :: atom()").
second_cluster_term_test() -> rejects([?CLUSTER, {node, a, #{}}, ?CLUSTER], "term 3: only one {cluster").
no_nodes_test() -> rejects([?CLUSTER], "the cluster has no nodes").
unknown_term_test() -> rejects([?CLUSTER, {host, a}], "unknown term {host,a}").
unknown_term_in_group_test() -> rejects([?CLUSTER, {group, g, #{}, [{nod, a, #{}}]}], "in group g: unknown term {nod,a,#{}}").
empty_group_test() -> rejects([?CLUSTER, {group, g, #{}, [{group, h, #{}, []}]}], "in group g > group h: the group is empty").
group_children_not_list_test() -> rejects([?CLUSTER, {group, g, #{}, {node, a, #{}}}], "the children of a group must be a list").
group_name_not_atom_test() -> rejects([?CLUSTER, {group, "g", #{}, [{node, a, #{}}]}], "group name \"g\" must be an atom").
duplicate_node_test() ->
    rejects([?CLUSTER, {group, g, #{}, [{node, a, #{}}]}, {group, h, #{}, [{node, a, #{}}]}],
            "node name a appears more than once").
duplicate_group_test() ->
    rejects([?CLUSTER, {group, g, #{}, [{node, a, #{}}]}, {group, g, #{}, [{node, b, #{}}]}],
            "group name g appears more than once").
group_and_node_same_name_test() ->
    rejects([?CLUSTER, {group, a, #{}, [{node, a, #{}}]}], "a names both a group and a node").
node_name_with_host_test() -> rejects([?CLUSTER, {node, 'a@host', #{}}], "must be an atom of letters, digits").
node_name_not_atom_test() -> rejects([?CLUSTER, {node, "a", #{}}], "node name \"a\" must be an atom").
node_options_not_map_test() -> rejects([?CLUSTER, {node, a, [{schedulers, 2}]}], "in node a: options must be a map").
unknown_node_option_test() ->
    rejects([?CLUSTER, {node, a, #{cores => 2}}], "in node a: unknown option cores (known: schedulers, cpu, cpu_per_scheduler, attrs, args, host)").
unknown_link_option_test() ->
    rejects([?CLUSTER, {group, g, #{delay => 3}, [{node, a, #{}}]}],
            "in group g: unknown option delay (known: latency, jitter, bandwidth)").
unknown_cluster_option_test() -> rejects([{cluster, c, #{loss => 1}}, {node, a, #{}}], "in cluster c: unknown option loss").
negative_latency_test() ->
    rejects([?CLUSTER, {group, g, #{latency => -1}, [{node, a, #{}}]}],
            "bad value for latency: -1 (expected a non-negative integer of microseconds)").
float_latency_test() -> rejects([{cluster, c, #{latency => 1.5}}, {node, a, #{}}], "bad value for latency: 1.5").
negative_jitter_test() -> rejects([?CLUSTER, {group, g, #{jitter => -5}, [{node, a, #{}}]}], "bad value for jitter: -5").
zero_bandwidth_test() ->
    rejects([?CLUSTER, {group, g, #{bandwidth => 0}, [{node, a, #{}}]}],
            "bad value for bandwidth: 0 (expected a positive integer of bytes per second)").
zero_schedulers_test() -> rejects([?CLUSTER, {node, a, #{schedulers => 0}}], "bad value for schedulers: 0 (expected an integer from 1 to 1024)").
too_many_schedulers_test() -> rejects([?CLUSTER, {node, a, #{schedulers => 5000}}], "bad value for schedulers: 5000").
attrs_not_list_test() -> rejects([?CLUSTER, {node, a, #{attrs => #{gpu => true}}}], "bad value for attrs").
attr_not_pair_test() -> rejects([?CLUSTER, {node, a, #{attrs => [gpu]}}], "attribute gpu must be {Name :: atom(), Value}").
duplicate_attr_test() -> rejects([?CLUSTER, {node, a, #{attrs => [{gpu, true}, {gpu, false}]}}], "attribute gpu is given more than once").
args_not_strings_test() -> rejects([?CLUSTER, {node, a, #{args => [foo]}}], "bad value for args: [foo] (expected a list of non-empty strings)").

root() ->
    terrain_lab_test_escript:root().

cpu_option_is_a_positive_number_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms([?CLUSTER, {node, a, #{cpu => 0.25}}, {node, b, #{cpu => 2}}], undefined),
    ?assertEqual([0.25, 2], [C || #{cpu := C} <- terrain_lab_spec:nodes(Spec)]),
    rejects([?CLUSTER, {node, a, #{cpu => 0}}], "bad value for cpu: 0 (expected a number of cores greater than 0").

%% The cluster option `tls' (distribution over TLS, terrain_lab_tls).
tls_true_is_read_and_kept_out_of_the_link_options_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, c, #{latency => 5000, tls => true}},
                                              {node, a, #{}}, {node, b, #{}}], undefined),
    ?assert(terrain_lab_spec:tls(Spec)),
    ?assertEqual(#{latency => 5000}, terrain_lab_spec:link(Spec, a, b)),
    ?assertEqual([{cluster, #{latency => 5000}}], terrain_lab_spec:levels(Spec)).

tls_is_off_unless_given_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms([?CLUSTER, {node, a, #{}}], undefined),
    ?assertNot(terrain_lab_spec:tls(Spec)),
    {ok, Off} = terrain_lab_spec:from_terms([{cluster, c, #{tls => false}}, {node, a, #{}}], undefined),
    ?assertNot(terrain_lab_spec:tls(Off)).

tls_not_a_boolean_test() ->
    rejects([{cluster, c, #{tls => yes}}, {node, a, #{}}], "in cluster c: bad value for tls: yes (expected true or false)").

tls_only_on_the_cluster_test() ->
    rejects([?CLUSTER, {group, g, #{tls => true}, [{node, a, #{}}]}], "in group g: unknown option tls").

unknown_cluster_option_lists_tls_test() ->
    rejects([{cluster, c, #{tsl => true}}, {node, a, #{}}],
            "unknown option tsl (known: latency, jitter, bandwidth, tls, connect_all)").

connect_all_false_puts_the_flag_before_each_nodes_own_args_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, c, #{connect_all => false}}, {node, a, #{}},
                                              {node, b, #{args => ["+P", "1048576"]}}], undefined),
    ?assertNot(terrain_lab_spec:connect_all(Spec)),
    ?assertEqual([["-connect_all", "false"], ["-connect_all", "false", "+P", "1048576"]],
                 [Args || #{args := Args} <- terrain_lab_spec:nodes(Spec)]),
    {ok, Default} = terrain_lab_spec:from_terms([{cluster, c, #{}}, {node, a, #{}}], undefined),
    ?assert(terrain_lab_spec:connect_all(Default)),
    ?assertEqual([#{}], [maps:with([args], N) || N <- terrain_lab_spec:nodes(Default)]),
    rejects([{cluster, c, #{connect_all => no}}, {node, a, #{}}],
            "bad value for connect_all: no (expected true or false)").

cpu_per_scheduler_is_a_positive_number_not_above_cpu_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms([?CLUSTER, {node, a, #{schedulers => 4, cpu_per_scheduler => 0.1}},
                                              {node, b, #{cpu_per_scheduler => 0.1, cpu => 0.1}}], undefined),
    ?assertEqual([0.1, 0.1], [C || #{cpu_per_scheduler := C} <- terrain_lab_spec:nodes(Spec)]),
    rejects([?CLUSTER, {node, a, #{cpu_per_scheduler => 0}}],
            "bad value for cpu_per_scheduler: 0 (expected a number of cores greater than 0 for each scheduler"),
    rejects([?CLUSTER, {node, a, #{cpu_per_scheduler => fast}}], "bad value for cpu_per_scheduler: fast"),
    rejects([?CLUSTER, {node, a, #{cpu_per_scheduler => 0.5, cpu => 0.2}}],
            "in node a: cpu (0.2 cores for the VM) is below cpu_per_scheduler (0.5 cores for one scheduler)").

%% terrain up --add: the added spec's groups merge into the running cluster's groups of
%% the same name; new groups and nodes are appended; the cluster term of the added file
%% is ignored; a node name already there is refused.
merge_adds_into_named_groups_test() ->
    Dir = filename:join(["/tmp", "terrain_spec_tests_" ++ os:getpid()]),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Base = filename:join(Dir, "base.cluster"),
    Add = filename:join(Dir, "add.cluster"),
    Dup = filename:join(Dir, "dup.cluster"),
    ok = file:write_file(Base, "{cluster, c, #{latency => 5000}}.\n"
                               "{group, s1, #{latency => 500}, [{group, r1, #{latency => 50}, [{node, a, #{}}]}]}.\n"),
    ok = file:write_file(Add, "{cluster, other, #{}}.\n"
                              "{group, s1, #{latency => 1}, [{group, r1, #{}, [{node, b, #{}}]}, {group, r2, #{latency => 60}, [{node, c, #{}}]}]}.\n"
                              "{group, s2, #{latency => 500}, [{node, d, #{}}]}.\n"),
    ok = file:write_file(Dup, "{group, s1, #{}, [{node, a, #{}}]}.\n"),
    try
        {ok, Spec, Terms} = terrain_lab_spec:merge(Base, Add),
        ?assertEqual(c, maps:get(name, Spec)),
        ?assertEqual([{a, [s1, r1]}, {b, [s1, r1]}, {c, [s1, r2]}, {d, [s2]}],
                     [{N, P} || #{name := N, path := P} <- terrain_lab_spec:nodes(Spec)]),
        %% the base's link options stay; the new group's are taken
        ?assertEqual(#{latency => 50}, terrain_lab_spec:link(Spec, a, b)),
        ?assertEqual(#{latency => 500}, terrain_lab_spec:link(Spec, a, c)),
        ?assertEqual(#{latency => 5000}, terrain_lab_spec:link(Spec, a, d)),
        {ok, Again} = terrain_lab_spec:from_terms(Terms, undefined),
        ?assertEqual(terrain_lab_spec:nodes(Spec), terrain_lab_spec:nodes(Again)),
        {error, Reason} = terrain_lab_spec:merge(Base, Dup),
        ?assertNotEqual(nomatch, string:find(lists:flatten(terrain_lab:format_error(Reason)), "a"))
    after
        [file:delete(F) || F <- [Base, Add, Dup]],
        file:del_dir(Dir)
    end.

%% terrain netem move: the node leaves its group (an emptied group goes) and joins the
%% named one; its links are those of its new place; unknown names are refused.
move_puts_a_node_into_another_group_test() ->
    Dir = filename:join(["/tmp", "terrain_spec_move_" ++ os:getpid()]),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    File = filename:join(Dir, "base.cluster"),
    ok = file:write_file(File, "{cluster, c, #{latency => 5000}}.\n"
                               "{group, r1, #{latency => 50}, [{node, a, #{}}, {node, b, #{}}]}.\n"
                               "{group, r2, #{latency => 60}, [{node, c, #{}}]}.\n"),
    try
        {ok, Spec, _Terms} = terrain_lab_spec:move(File, c, r1),
        ?assertEqual([{a, [r1]}, {b, [r1]}, {c, [r1]}], [{N, P} || #{name := N, path := P} <- terrain_lab_spec:nodes(Spec)]),
        ?assertEqual(#{latency => 50}, terrain_lab_spec:link(Spec, a, c)),
        {ok, Spec2, _} = terrain_lab_spec:move(File, a, r2),
        ?assertEqual(#{latency => 60}, terrain_lab_spec:link(Spec2, a, c)),
        {error, R1} = terrain_lab_spec:move(File, x, r1),
        ?assertEqual("cluster spec " ++ File ++ ": no node x in the spec", lists:flatten(terrain_lab:format_error(R1))),
        {error, R2} = terrain_lab_spec:move(File, a, r9),
        ?assertEqual("cluster spec " ++ File ++ ": no group r9 in the spec", lists:flatten(terrain_lab:format_error(R2)))
    after
        file:delete(File),
        file:del_dir(Dir)
    end.

%% A spec of more than 100,000 nodes, a device and a deep spec are refused before a
%% name becomes an atom (issue 33, rows 9 and 13).
a_spec_beyond_the_node_limit_is_refused_before_its_names_are_made_test_() ->
    {timeout, 120, fun a_spec_beyond_the_node_limit_is_refused_before_its_names_are_made/0}.

a_spec_beyond_the_node_limit_is_refused_before_its_names_are_made() ->
    File = filename:join("/tmp", "terrain_lab_spec_tests_many_" ++ os:getpid() ++ ".cluster"),
    ok = file:write_file(File, ["{cluster, c, #{}}.\n{group, g, #{}, [",
                                lists:join(",", [["{node,zqm", integer_to_list(I), ",#{}}"] || I <- lists:seq(0, 100000)]),
                                "]}.\n"]),
    Before = erlang:system_info(atom_count),
    {error, Reason} = terrain_lab_spec:read(File),
    ?assertMatch({read, File, {check, {guard, {nodes, 100001, 100000}}}}, Reason),
    ?assert(erlang:system_info(atom_count) - Before < 100),
    ?assertMatch(": 100001 nodes are more than terrain starts" ++ _,
                 lists:flatten(terrain_lab:format_error(Reason)) -- File),
    ?assertEqual({error, {read, "/dev/zero", not_regular}}, terrain_lab_spec:read("/dev/zero")),
    ?assertMatch({error, {read, "/dev/zero", not_regular}}, terrain_lab_spec:merge(filename:join([terrain_lab_test_escript:root(), "examples", "live.cluster"]), "/dev/zero")),
    Deep = filename:join("/tmp", "terrain_lab_spec_tests_deep_" ++ os:getpid() ++ ".cluster"),
    ok = file:write_file(Deep, ["{cluster, c, #{}}.\n", lists:duplicate(2000, "{group, g, #{}, ["), "{node, n, #{}}",
                                lists:duplicate(2000, "]}"), ".\n"]),
    ?assertMatch({error, {read, Deep, {too_deep, 2, 1000}}}, terrain_lab_spec:read(Deep)).
