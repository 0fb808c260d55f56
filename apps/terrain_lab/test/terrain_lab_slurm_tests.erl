%% EUnit tests of terrain_lab_slurm: SLURM_TASKS_PER_NODE, the allocation read from
%% the environment, `scontrol show topology' output and the spec groups made of it.
-module(terrain_lab_slurm_tests).
-include_lib("eunit/include/eunit.hrl").

tasks(Text) ->
    {ok, Counts} = terrain_lab_slurm:tasks_per_node(Text),
    Counts.

env(Vars) ->
    fun(Name) -> proplists:get_value(Name, Vars, false) end.

%% A topology as scontrol prints it for topology/tree: leaf switches list nodes,
%% upper ones their switches and (as SLURM does) the nodes below them.
-define(TREE, "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=atcn[001-002]\n"
              "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=atcn[003-004]\n"
              "SwitchName=s2 Level=0 LinkSpeed=1 Nodes=atcn[005-006]\n"
              "SwitchName=s3 Level=1 LinkSpeed=1 Nodes=atcn[001-004] Switches=s[0-1]\n"
              "SwitchName=s4 Level=2 LinkSpeed=1 Nodes=atcn[001-006] Switches=s[2-3]\n").

%%--------------------------------------------------------------------
%% SLURM_TASKS_PER_NODE

a_single_count_is_one_node_test() ->
    ?assertEqual([4], tasks("4")).

a_repeat_count_covers_that_many_nodes_test() ->
    ?assertEqual([2, 2, 2, 1], tasks("2(x3),1")),
    ?assertEqual([24, 24, 1, 1], tasks("24(x2),1(x2)")).

bad_tasks_per_node_are_errors_naming_the_item_test() ->
    [?assertMatch({error, {Text, {Why, _}}} when is_atom(Why), terrain_lab_slurm:tasks_per_node(Text))
     || Text <- ["", "2(x3", "x3", "2(3)", "2,,1", "-1", "2(x0)", "0", "1.5", "2(x3),a"]],
    ?assertEqual({error, {"2,(x2)", {bad_item, "(x2)"}}}, terrain_lab_slurm:tasks_per_node("2,(x2)")).

%%--------------------------------------------------------------------
%% The allocation from the environment

the_allocation_pairs_hosts_with_task_counts_test() ->
    ?assertEqual({ok, [{"n01", 2}, {"n02", 2}, {"n03", 1}]},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n[01-03]"},
                                                   {"SLURM_TASKS_PER_NODE", "2(x2),1"}]))).

outside_an_allocation_is_its_own_error_test() ->
    ?assertEqual({error, {slurm, not_in_allocation}}, terrain_lab_slurm:allocation(env([]))).

missing_empty_and_bad_variables_name_the_variable_test() ->
    ?assertEqual({error, {slurm, {variable, "SLURM_JOB_NODELIST", missing}}},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_ID", "7"}, {"SLURM_TASKS_PER_NODE", "1"}]))),
    ?assertEqual({error, {slurm, {variable, "SLURM_JOB_NODELIST", empty}}},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", " "}, {"SLURM_TASKS_PER_NODE", "1"}]))),
    ?assertEqual({error, {slurm, {variable, "SLURM_TASKS_PER_NODE", missing}}},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n1"}]))),
    ?assertMatch({error, {slurm, {variable, "SLURM_JOB_NODELIST", {bad, "n[1-", {hostlist, _}}}}},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n[1-"}, {"SLURM_TASKS_PER_NODE", "1"}]))),
    ?assertMatch({error, {slurm, {variable, "SLURM_TASKS_PER_NODE", {bad, "2(x", _}}}},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_TASKS_PER_NODE", "2(x"}]))),
    [?assertMatch({match, _}, re:run(terrain_lab_slurm:format_error(Reason), Name))
     || {error, {slurm, {variable, Name, _}} = Reason} <-
            [terrain_lab_slurm:allocation(env(Vars))
             || Vars <- [[{"SLURM_JOB_ID", "7"}], [{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_TASKS_PER_NODE", "x"}]]]].

task_counts_must_cover_exactly_the_nodes_test() ->
    ?assertEqual({error, {slurm, {count, 3, 2}}},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}]))),
    ?assertMatch({error, {slurm, {variable, "SLURM_JOB_NODELIST", {bad, _, {duplicate, "n1"}}}}},
                 terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n1,n1"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}]))).

%%--------------------------------------------------------------------
%% scontrol show topology

switch_lines_are_read_with_their_hostlists_test() ->
    {ok, [S0 | _] = Switches} = terrain_lab_slurm:parse_topology(?TREE),
    ?assertEqual(5, length(Switches)),
    ?assertEqual(#{name => "s0", level => 0, nodes => ["atcn001", "atcn002"], switches => []}, S0),
    ?assertEqual(#{name => "s4", level => 2, nodes => [lists:flatten(io_lib:format("atcn~3..0b", [I]))
                                                       || I <- lists:seq(1, 6)],
                   switches => ["s2", "s3"]}, lists:last(Switches)).

lines_without_a_switch_are_skipped_test() ->
    ?assertEqual({ok, []}, terrain_lab_slurm:parse_topology("No topology information available\n")),
    ?assertEqual({ok, []}, terrain_lab_slurm:parse_topology("")).

a_broken_switch_line_is_an_error_naming_the_line_test() ->
    [?assertMatch({error, {slurm, {topology_line, 2, _}}}, terrain_lab_slurm:parse_topology("\n" ++ Line))
     || Line <- ["SwitchName=s0 Level=0 LinkSpeed=1",                 % neither nodes nor switches
                 "SwitchName=s0 Level=x Nodes=n1",                    % level not a number
                 "SwitchName=s0 Level=0 Nodes=n[1-",                  % not a hostlist
                 "SwitchName=s0 Level=0 Nodes"]].                     % no value

%%--------------------------------------------------------------------
%% The spec's groups

groups_nest_by_switch_pruned_to_the_allocation_test() ->
    {ok, Switches} = terrain_lab_slurm:parse_topology(?TREE),
    {Terms, Orphans} = terrain_lab_slurm:spec_terms(job, [{"atcn001", 1}, {"atcn003", 2}, {"atcn005", 1}], Switches),
    ?assertEqual([], Orphans),
    ?assertEqual([{cluster, job, #{}},
                  {group, s4, #{},
                   [{group, s2, #{}, [{group, atcn005, #{}, [{node, atcn005_1, #{host => "atcn005"}}]}]},
                    {group, s3, #{},
                     [{group, s0, #{}, [{group, atcn001, #{}, [{node, atcn001_1, #{host => "atcn001"}}]}]},
                      {group, s1, #{}, [{group, atcn003, #{},
                                         [{node, atcn003_1, #{host => "atcn003"}},
                                          {node, atcn003_2, #{host => "atcn003"}}]}]}]}]}], Terms),
    ?assertMatch({ok, _}, terrain_lab_spec:from_terms(Terms, undefined)).

hosts_under_no_switch_are_named_and_put_at_the_top_test() ->
    {ok, Switches} = terrain_lab_slurm:parse_topology("SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-2]\n"),
    {Terms, Orphans} = terrain_lab_slurm:spec_terms(job, [{"n1", 1}, {"n9", 1}], Switches),
    ?assertEqual(["n9"], Orphans),
    ?assertEqual([{cluster, job, #{}},
                  {group, s0, #{}, [{group, n1, #{}, [{node, n1_1, #{host => "n1"}}]}]},
                  {group, n9, #{}, [{node, n9_1, #{host => "n9"}}]}], Terms).

without_switches_the_hosts_form_one_group_test() ->
    {Terms, []} = terrain_lab_slurm:spec_terms(job, [{"n1", 1}, {"n2", 1}], []),
    ?assertEqual([{cluster, job, #{}},
                  {group, allocation, #{}, [{group, n1, #{}, [{node, n1_1, #{host => "n1"}}]},
                                            {group, n2, #{}, [{node, n2_1, #{host => "n2"}}]}]}], Terms).

%%--------------------------------------------------------------------
%% A topology that is not a tree, or that terrain cannot hold (issue 33: rows 8,
%% 24-26, 44, 52): an error naming the problem, never a crash or a search of every path.

graph_error(Text) ->
    {error, {slurm, {topology_graph, Why}} = Reason} = terrain_lab_slurm:parse_topology(Text),
    {Why, lists:flatten(terrain_lab_slurm:format_error(Reason))}.

a_switch_loop_is_an_error_naming_the_loop_test() ->
    ?assertEqual({{switch_loop, ["s1", "s2", "s1"]}, "topology: switch loop s1 -> s2 -> s1 (the switches must form a tree)"},
                 graph_error("SwitchName=s1 Switches=s2 Nodes=h1\nSwitchName=s2 Switches=s1 Nodes=h2\n")),
    ?assertMatch({{switch_loop, ["a", "b", "a"]}, _},
                 graph_error("SwitchName=r Switches=x Nodes=n0\nSwitchName=x Nodes=n9\n"
                             "SwitchName=a Level=1 LinkSpeed=1 Switches=b\n"
                             "SwitchName=b Level=1 LinkSpeed=1 Switches=a Nodes=n1\n")),
    ?assertMatch({{switch_loop, ["s1", "s1"]}, _}, graph_error("SwitchName=s1 Switches=s1 Nodes=h1\n")).

every_switch_listing_every_switch_is_refused_at_once_test() ->
    %% 14 switches each listing s[1-14]: the old level computation followed every simple path (row 8)
    Text = lists:append([io_lib:format("SwitchName=s~b Switches=s[1-14] Nodes=h~b~n", [I, I]) || I <- lists:seq(1, 14)]),
    ?assertMatch({{switch_loop, ["s1", "s1"]}, _}, graph_error(lists:flatten(Text))).

an_unknown_child_switch_is_an_error_naming_it_test() ->
    ?assertEqual({{unknown_switch, "root", "sX"}, "topology: switch root lists switch sX, which is not defined"},
                 graph_error("SwitchName=root Switches=s1,sX\nSwitchName=s1 Nodes=h1,h2\n")).

a_switch_defined_twice_is_an_error_naming_both_lines_test() ->
    ?assertEqual({{duplicate_switch, "s1", 1, 3}, "topology: switch s1 is defined twice (lines 1 and 3)"},
                 graph_error("SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h3\nSwitchName=s1 Nodes=h9\n"
                             "SwitchName=root Switches=s1,s2\n")).

a_switch_under_two_parents_is_an_error_test() ->
    ?assertMatch({{two_parents, "s0", "a", "b"}, _},
                 graph_error("SwitchName=s0 Nodes=h1\nSwitchName=a Switches=s0\nSwitchName=b Switches=s0\n")).

a_host_under_two_unrelated_switches_is_an_error_test() ->
    ?assertEqual({{host_twice, "h2", "s1", "s2"},
                  "topology: host h2 is under both switch s1 and switch s2, and neither is above the other"},
                 graph_error("SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h2,h3\nSwitchName=root Switches=s1,s2\n")),
    %% an upper switch listing the hosts below it (as scontrol prints) is no error
    ?assertMatch({ok, [_, _, _, _, _]}, terrain_lab_slurm:parse_topology(?TREE)).

bytes_that_are_not_utf8_are_an_error_naming_the_line_test() ->
    Reason = {slurm, {topology_not_utf8, 2}},
    ?assertEqual({error, Reason}, terrain_lab_slurm:parse_topology(<<"SwitchName=a Nodes=h1\nSwitchName=s", 16#e9,
                                                                     " Nodes=h2\n">>)),
    ?assertEqual("topology, line 2: the bytes are not UTF-8", lists:flatten(terrain_lab_slurm:format_error(Reason))).

a_name_longer_than_an_atom_is_refused_before_it_is_made_test() ->
    {error, Reason} = terrain_lab_slurm:parse_topology("SwitchName=" ++ lists:duplicate(300, $L) ++ " Nodes=h1\n"),
    ?assertMatch({slurm, {topology_line, 1, _, {long_name, 300}}}, Reason),
    ?assertEqual("topology, line 1: the switch name has 300 characters, more than the 255 a name may have",
                 lists:flatten(terrain_lab_slurm:format_error(Reason))).

a_huge_hostlist_is_said_to_be_too_large_test() ->
    {error, Reason} = terrain_lab_slurm:parse_topology("SwitchName=s1 Nodes=h[1-2000000]\n"),
    ?assertEqual("topology, line 1: the hostlist h[1-2000000] is too large (2000000 hosts; terrain reads at most "
                 "100000)", lists:flatten(terrain_lab_slurm:format_error(Reason))),
    ?assertMatch({error, {slurm, {topology_too_large, hosts, 150000, 100000}}},
                 terrain_lab_slurm:parse_topology("SwitchName=s1 Nodes=h[1-75000]\nSwitchName=s2 Nodes=g[1-75000]\n")).

a_topology_file_is_read_only_when_it_is_a_regular_file_test() ->
    ?assertEqual({error, {read, "/dev/zero", not_regular}}, terrain_lab_slurm:read_topology("/dev/zero")),
    ?assertEqual({error, {read, "/tmp", not_regular}}, terrain_lab_slurm:read_topology("/tmp")),
    ?assertEqual("/dev/zero: not a regular file",
                 lists:flatten(terrain_lab:format_error({read, "/dev/zero", not_regular}))).

srun_runs_one_overlapping_task_on_the_named_node_test() ->
    ?assertEqual(["--nodes=1", "--ntasks=1", "--nodelist=atcn019", "--overlap", "--kill-on-bad-exit=1",
                  "--job-name=terrain-atcn019_1"], terrain_lab_slurm:srun_args("atcn019", atcn019_1)).

%% A host listed twice is a sentence (format_error crashed on it: exit 127).
a_host_listed_twice_is_a_sentence_test() ->
    {error, Reason} = terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n1,n1"},
                                                        {"SLURM_TASKS_PER_NODE", "1(x2)"}])),
    ?assertEqual("SLURM_JOB_NODELIST='n1,n1' lists n1 twice", lists:flatten(terrain_lab_slurm:format_error(Reason))).
