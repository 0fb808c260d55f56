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

a_cycle_in_a_broken_topology_ends_test() ->
    {ok, Switches} = terrain_lab_slurm:parse_topology("SwitchName=a Level=1 LinkSpeed=1 Switches=b\n"
                                                      "SwitchName=b Level=1 LinkSpeed=1 Switches=a Nodes=n1\n"
                                                      "SwitchName=r Level=2 LinkSpeed=1 Switches=a\n"),
    {Terms, []} = terrain_lab_slurm:spec_terms(job, [{"n1", 1}], Switches),
    ?assertEqual([{cluster, job, #{}},
                  {group, r, #{}, [{group, a, #{}, [{group, b, #{}, [{group, n1, #{}, [{node, n1_1, #{host => "n1"}}]}]}]}]}],
                 Terms).

srun_runs_one_overlapping_task_on_the_named_node_test() ->
    ?assertEqual(["--nodes=1", "--ntasks=1", "--nodelist=atcn019", "--overlap", "--kill-on-bad-exit=1",
                  "--job-name=terrain-atcn019_1"], terrain_lab_slurm:srun_args("atcn019", atcn019_1)).

%% A host listed twice is a sentence (format_error crashed on it: exit 127).
a_host_listed_twice_is_a_sentence_test() ->
    {error, Reason} = terrain_lab_slurm:allocation(env([{"SLURM_JOB_NODELIST", "n1,n1"},
                                                        {"SLURM_TASKS_PER_NODE", "1(x2)"}])),
    ?assertEqual("SLURM_JOB_NODELIST='n1,n1' lists n1 twice", lists:flatten(terrain_lab_slurm:format_error(Reason))).
