%% EUnit tests of the testbed's parts that need no root: the --topology forms, the
%% link speeds per level, topology.conf as SLURM writes it and as terrain imports it.
-module(terrain_lab_testbed_tests).
-include_lib("eunit/include/eunit.hrl").

names(Switches) ->
    lists:sort([{N, L, Ns, Cs} || #{name := N, level := L, nodes := Ns, switches := Cs} <- Switches]).

one_number_is_one_switch_of_that_many_hosts_test() ->
    {ok, S} = terrain_lab_testbed:switches("3", "tb"),
    ?assertEqual([{"s1", 0, ["tb1", "tb2", "tb3"], []}], names(S)).

comma_sizes_are_leaf_switches_under_root_test() ->
    {ok, S} = terrain_lab_testbed:switches("3,1", "h"),
    ?assertEqual([{"root", 1, [], ["s1", "s2"]}, {"s1", 0, ["h1", "h2", "h3"], []}, {"s2", 0, ["h4"], []}], names(S)).

fanouts_nest_from_the_top_test() ->
    {ok, S2} = terrain_lab_testbed:switches("2x2", "tb"),
    ?assertEqual([{"root", 1, [], ["s1", "s2"]}, {"s1", 0, ["tb1", "tb2"], []}, {"s2", 0, ["tb3", "tb4"], []}], names(S2)),
    {ok, S3} = terrain_lab_testbed:switches("2x2x2", "tb"),
    ?assertEqual([{"root", 2, [], ["s1", "s2"]},
                  {"s1", 1, [], ["s1_1", "s1_2"]}, {"s1_1", 0, ["tb1", "tb2"], []}, {"s1_2", 0, ["tb3", "tb4"], []},
                  {"s2", 1, [], ["s2_1", "s2_2"]}, {"s2_1", 0, ["tb5", "tb6"], []}, {"s2_2", 0, ["tb7", "tb8"], []}],
                 names(S3)).

a_bad_topology_spec_names_the_part_test() ->
    ?assertMatch({error, {testbed, {topology, "2xa", {bad_spec, _}}}}, terrain_lab_testbed:switches("2xa", "tb")),
    ?assertMatch({error, {testbed, {topology, "0", {bad_spec, _}}}}, terrain_lab_testbed:switches("0", "tb")),
    {error, Why} = terrain_lab_testbed:switches("2,x", "tb"),
    ?assertMatch({match, _}, re:run(lists:flatten(terrain_lab_testbed:format_error(Why)), "'x' is not a positive integer")).

rates_fill_the_upper_levels_with_a_tenth_each_test() ->
    ?assertEqual([1000, 100], terrain_lab_testbed:rates([], 1)),
    ?assertEqual([1000, 100, 10, 1, 1], terrain_lab_testbed:rates([], 4)),
    ?assertEqual([500], terrain_lab_testbed:rates([500, 50], 0)),
    ?assertEqual([800, 20, 2], terrain_lab_testbed:rates([800, 20], 2)).

topology_conf_is_read_with_comments_any_case_and_computed_levels_test() ->
    Conf = "# a site\nswitchname=leaf1 nodes=n[1-2]   # two\nSwitchName=leaf2 Nodes=n[3-4]\n\n"
           "SWITCHNAME=spine Switches=leaf[1-2]\n",
    {ok, Switches} = terrain_lab_slurm:parse_topology(Conf),
    ?assertEqual([{"leaf1", 0, ["n1", "n2"], []}, {"leaf2", 0, ["n3", "n4"], []}, {"spine", 1, [], ["leaf1", "leaf2"]}],
                 [{N, L, Ns, Cs} || #{name := N, level := L, nodes := Ns, switches := Cs} <- Switches]),
    ?assertEqual({network, spine, [{network, leaf1, [{node, n1}, {node, n2}]}, {network, leaf2, [{node, n3}, {node, n4}]}]},
                 terrain_lab_slurm:topology_tree(Switches)).

scontrol_output_lists_hosts_at_every_level_but_each_host_appears_once_test() ->
    {ok, Switches} = terrain_lab_slurm:parse_topology("SwitchName=s1 Level=0 LinkSpeed=1 Nodes=tb[1-2]\n"
                                                      "SwitchName=s2 Level=0 LinkSpeed=1 Nodes=tb[3-4]\n"
                                                      "SwitchName=root Level=1 LinkSpeed=1 Nodes=tb[1-4] Switches=s[1-2]\n"),
    Tree = terrain_lab_slurm:topology_tree(Switches),
    ?assertEqual({network, root, [{network, s1, [{node, tb1}, {node, tb2}]}, {network, s2, [{node, tb3}, {node, tb4}]}]},
                 Tree),
    ?assertEqual(ok, terrain:check_topology(Tree)).

several_top_switches_join_under_one_network_test() ->
    {ok, Switches} = terrain_lab_slurm:parse_topology("SwitchName=a Nodes=x1\nSwitchName=b Nodes=x2,x3\n"),
    ?assertEqual({network, slurm, [{network, a, [{node, x1}]}, {network, b, [{node, x2}, {node, x3}]}]},
                 terrain_lab_slurm:topology_tree(Switches)).

a_switch_line_without_nodes_or_switches_is_an_error_naming_its_line_test() ->
    ?assertMatch({error, {slurm, {topology_line, 2, "SwitchName=b"}}},
                 terrain_lab_slurm:parse_topology("SwitchName=a Nodes=x1\nSwitchName=b\n")).
