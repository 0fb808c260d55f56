%% EUnit tests of the testbed's parts that need no root: the --topology forms and their
%% bounds, the link speeds per level, topology.conf as SLURM writes it and as terrain
%% imports it, the record of what was made (files and directories).
-module(terrain_lab_testbed_tests).
-include_lib("eunit/include/eunit.hrl").

names(Switches) ->
    lists:sort([{N, L, Ns, Cs} || #{name := N, level := L, nodes := Ns, switches := Cs} <- Switches]).

one_number_is_one_switch_of_that_many_hosts_test() ->
    {ok, S} = terrain_lab_testbed_switches:switches("3", "tb"),
    ?assertEqual([{"s1", 0, ["tb1", "tb2", "tb3"], []}], names(S)).

comma_sizes_are_leaf_switches_under_root_test() ->
    {ok, S} = terrain_lab_testbed_switches:switches("3,1", "h"),
    ?assertEqual([{"root", 1, [], ["s1", "s2"]}, {"s1", 0, ["h1", "h2", "h3"], []}, {"s2", 0, ["h4"], []}], names(S)).

fanouts_nest_from_the_top_test() ->
    {ok, S2} = terrain_lab_testbed_switches:switches("2x2", "tb"),
    ?assertEqual([{"root", 1, [], ["s1", "s2"]}, {"s1", 0, ["tb1", "tb2"], []}, {"s2", 0, ["tb3", "tb4"], []}],
                 names(S2)),
    {ok, S3} = terrain_lab_testbed_switches:switches("2x2x2", "tb"),
    ?assertEqual([{"root", 2, [], ["s1", "s2"]},
                  {"s1", 1, [], ["s1_1", "s1_2"]}, {"s1_1", 0, ["tb1", "tb2"], []}, {"s1_2", 0, ["tb3", "tb4"], []},
                  {"s2", 1, [], ["s2_1", "s2_2"]}, {"s2_1", 0, ["tb5", "tb6"], []}, {"s2_2", 0, ["tb7", "tb8"], []}],
                 names(S3)).

a_bad_topology_spec_names_the_part_test() ->
    ?assertMatch({error, {testbed, {topology, "2xa", {bad_spec, _}}}},
                 terrain_lab_testbed_switches:switches("2xa", "tb")),
    ?assertMatch({error, {testbed, {topology, "0", {bad_spec, _}}}}, terrain_lab_testbed_switches:switches("0", "tb")),
    {error, Why} = terrain_lab_testbed_switches:switches("2,x", "tb"),
    ?assertMatch({match, _}, re:run(lists:flatten(terrain_lab_testbed:format_error(Why)),
                                    "'x' is not a positive integer")).

rates_fill_the_upper_levels_with_a_tenth_each_test() ->
    ?assertEqual([1000, 100], terrain_lab_testbed_switches:rates([], 1)),
    ?assertEqual([1000, 100, 10, 1, 1], terrain_lab_testbed_switches:rates([], 4)),
    ?assertEqual([500], terrain_lab_testbed_switches:rates([500, 50], 0)),
    ?assertEqual([800, 20, 2], terrain_lab_testbed_switches:rates([800, 20], 2)).

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

%% --topology is counted before a host name is made: the forms over 250 hosts (one /24)
%% or 8 levels are usage errors naming the count, never a list of names.
topology_specs_over_the_bounds_are_usage_errors_before_anything_is_built_test() ->
    Usage = fun(Spec) ->
                    {error, {testbed, {usage, Text}}} = terrain_lab_testbed_switches:switches(Spec, "tb"),
                    Text
            end,
    ?assertEqual("--topology 251: 251 hosts; a testbed has at most 250 (one /24)", Usage("251")),
    ?assertEqual("--topology 10x30: 300 hosts; a testbed has at most 250 (one /24)", Usage("10x30")),
    ?assertEqual("--topology 200,51: 251 hosts; a testbed has at most 250 (one /24)", Usage("200,51")),
    ?assertMatch("--topology 100000x100000: more than 250000 hosts" ++ _, Usage("100000x100000")),
    ?assertMatch("--topology 1x1x1x1x1x1x1x1x2: 9 levels" ++ _, Usage("1x1x1x1x1x1x1x1x2")),
    ?assert(length(Usage(lists:duplicate(5000, $9))) < 200),
    ?assertMatch({ok, _}, terrain_lab_testbed_switches:switches("250", "tb")).

lowest_common_switch_levels_follow_the_tree_test() ->
    {ok, S} = terrain_lab_testbed_switches:switches("2x2", "tb"),
    Levels = terrain_lab_testbed_switches:levels(S),
    ?assertEqual(#{"tb2" => 0, "tb3" => 1, "tb4" => 1}, maps:get("tb1", Levels)),
    ?assertEqual(#{"tb1" => 1, "tb2" => 1, "tb3" => 0}, maps:get("tb4", Levels)).

a_topology_file_that_is_missing_a_directory_too_large_or_not_utf8_is_named_test() ->
    Dir = scratch(),
    Big = filename:join(Dir, "big.conf"),
    ok = file:write_file(Big, ["SwitchName=s1 Nodes=tb1 #", binary:copy(<<"a">>, 1100000), "\n"]),
    Latin1 = filename:join(Dir, "latin1.conf"),
    ok = file:write_file(Latin1, <<"SwitchName=s", 16#e9, " Nodes=tb1\n">>),
    Text = fun(Spec) ->
                   {error, Why} = terrain_lab_testbed_switches:switches(Spec, "tb"),
                   lists:flatten(terrain_lab_testbed:format_error(Why))
           end,
    ?assertEqual("cannot read " ++ Dir ++ ": it is a directory, not a topology.conf file", Text(Dir)),
    ?assertEqual("cannot read missing.conf: no such file or directory", Text("missing.conf")),
    ?assertMatch("cannot read " ++ _, Text(Big)),
    ?assertMatch({match, _}, re:run(Text(Big), "larger than 1048576 bytes")),
    ?assertEqual("cannot read " ++ Latin1 ++ ": line 1: the bytes are not UTF-8", Text(Latin1)),
    ok = file:del_dir_r(Dir).

a_host_list_in_a_message_is_cut_short_test() ->
    Many = ["h" ++ integer_to_list(I) || I <- lists:seq(1, 300000)],
    Text = lists:flatten(terrain_lab_testbed:format_error({testbed, {topology_hosts, ["h1", "h2"], Many}})),
    ?assert(length(Text) < 200),
    ?assertMatch({match, _}, re:run(Text, "\\(300000 in all\\)$")).

%% The record: a thing is named before it is made; a torn last line (a kill while
%% writing) is skipped; remove/1 deletes what was made and keeps the directory when
%% something else was put in it.
the_record_removes_what_was_made_and_keeps_what_was_not_test() ->
    Dir = filename:join(scratch(), "tb"),
    ok = terrain_lab_testbed_record:create(Dir, "tb"),
    ?assertEqual({ok, "tb"}, terrain_lab_testbed_record:prefix(Dir)),
    Mine = filename:join(Dir, "mine.txt"),
    ok = terrain_lab_testbed_record:write_file(Dir, Mine, "made by the testbed\n"),
    ok = terrain_lab_testbed_record:make_dir(Dir, filename:join(Dir, "log")),
    ok = file:write_file(filename:join([Dir, "log", "daemon.log"]), "a daemon's log\n"),
    Sub = filename:join(Dir, "taken"),
    ok = file:make_dir(Sub),                                     % someone else's, made before up's mkdir
    ?assertThrow({testbed, {file, Sub, eexist}}, terrain_lab_testbed_record:make_dir(Dir, Sub)),
    ok = file:write_file(filename:join(Dir, "made.jsonl"), <<"{\"kind\":\"fi">>, [append]),
    ?assertEqual([{dir, made}, {file, made}, {dir, made}, {dir, not_made}],
                 [{K, S} || #{kind := K, state := S} <- terrain_lab_testbed_record:things(Dir)]),
    Theirs = filename:join(Dir, "theirs.txt"),
    ok = file:write_file(Theirs, "the user's\n"),
    [Kept] = terrain_lab_testbed_record:remove(Dir),
    ?assertMatch({match, _}, re:run(Kept, "kept: it holds 2 entries the testbed did not make \\(taken, theirs.txt\\)")),
    ?assertEqual({ok, <<"the user's\n">>}, file:read_file(Theirs)),
    ?assert(filelib:is_dir(Sub)),
    ?assertNot(filelib:is_file(Mine)),
    ?assertNot(filelib:is_file(filename:join(Dir, "log"))),
    ?assertNot(filelib:is_file(filename:join(Dir, "made.jsonl"))),
    ok = file:del_dir_r(filename:dirname(Dir)).

a_directory_that_exists_is_not_made_test() ->
    Dir = scratch(),
    ?assertEqual({error, {testbed, {file, Dir, eexist}}}, terrain_lab_testbed_record:create(Dir, "tb")),
    ?assertEqual([], terrain_lab_testbed_record:things(Dir)),
    ok = file:del_dir_r(Dir).

scratch() ->
    Dir = filename:join("/tmp", "terrain_testbed_tests_" ++ os:getpid() ++ "_"
                        ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = file:make_dir(Dir),
    Dir.

%% A record is read only in a directory closed to others, and only its paths inside the
%% testbed's directory (or its run directory) are ever removed: a record written by
%% someone else cannot make down delete anything else.
a_record_never_reaches_outside_the_testbed_test() ->
    Scratch = scratch(),
    Dir = filename:join(Scratch, "tb"),
    Outside = filename:join(Scratch, "outside.txt"),
    ok = file:write_file(Outside, "not the testbed's\n"),
    ok = terrain_lab_testbed_record:create(Dir, "tb"),
    ok = file:write_file(filename:join(Dir, "made.jsonl"),
                         [terrain_json:encode(#{kind => file, path => list_to_binary(Outside), state => made}), "\n",
                          terrain_json:encode(#{kind => dir, path => list_to_binary(Scratch), state => made}), "\n"],
                         [append]),
    ok = file:change_mode(Dir, 8#755),
    ?assertEqual(error, terrain_lab_testbed_record:prefix(Dir)),
    ?assertEqual([], terrain_lab_testbed_record:remove(Dir)),
    ok = file:change_mode(Dir, 8#700),
    ?assertEqual({ok, "tb"}, terrain_lab_testbed_record:prefix(Dir)),
    ?assertEqual(["directory " ++ Dir ++ " removed"], terrain_lab_testbed_record:remove(Dir)),
    ?assertEqual({ok, <<"not the testbed's\n">>}, file:read_file(Outside)),
    ok = file:del_dir_r(Scratch).
