%% The REAL SLURM (Debian's slurmctld, slurmd, slurm-client and munge, which `make
%% setup' installs) on ONE testbed of 4 hosts for the whole suite, made and removed
%% by the escript's `terrain testbed up|down' (`--slurm --topology 2x2': switches s1
%% (hosts 1-2) and s2 (hosts 3-4) under `root'). The cases run `terrain up --slurm'
%% inside real allocations (`salloc', `sbatch'), read real `scontrol show topology',
%% cancel a real job, stop a real slurmd; the last case takes the testbed down and
%% checks that nothing of it is left. Skipped (with the reason) where the machine
%% cannot run it: not root, or a package missing.
%%
%% Each allocation's commands run from a shell script the case writes; its outputs
%% go to files of the case's directory, read after the allocation has ended.
-module(terrain_lab_testbed_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([testbed_up_shows_four_idle_nodes_and_its_env/1,
         salloc_up_slurm_starts_one_vm_per_host_in_its_namespace_grouped_by_topology_conf/1,
         salloc_per_task_and_per_host_start_that_many_vms_per_host/1,
         topology_import_of_the_file_and_of_scontrol_give_the_same_tree/1,
         the_pipeline_batch_job_finds_slurms_topology_and_writes_its_report/1,
         scancel_of_a_batch_job_leaves_no_vm_and_down_says_so/1,
         a_host_whose_slurmd_is_stopped_fails_up_and_leaves_nothing/1,
         testbed_down_leaves_no_namespace_daemon_or_file/1]).

suite() ->
    [{timetrap, {minutes, 6}}].

all() ->
    [{group, slurm}].

groups() ->
    [{slurm, [sequence], [testbed_up_shows_four_idle_nodes_and_its_env,
                          salloc_up_slurm_starts_one_vm_per_host_in_its_namespace_grouped_by_topology_conf,
                          salloc_per_task_and_per_host_start_that_many_vms_per_host,
                          topology_import_of_the_file_and_of_scontrol_give_the_same_tree,
                          the_pipeline_batch_job_finds_slurms_topology_and_writes_its_report,
                          scancel_of_a_batch_job_leaves_no_vm_and_down_says_so,
                          a_host_whose_slurmd_is_stopped_fails_up_and_leaves_nothing,
                          testbed_down_leaves_no_namespace_daemon_or_file]}].

init_per_suite(Config) ->
    case terrain_lab_testbed:available(true) of
        ok ->
            Prefix = "c" ++ integer_to_list(list_to_integer(os:getpid()) rem 10000) ++ "h",
            Dir = filename:join(?config(priv_dir, Config), "testbed"),
            Config1 = [{prefix, Prefix}, {dir, Dir} | Config],
            {Code, Out, Err} = terrain(Config1, [], ["testbed", "up", "--hosts", "4", "--slurm", "--topology", "2x2",
                                                     "--prefix", Prefix, "--dir", Dir]),
            ct:pal("terrain testbed up: exit ~b~n~ts~ts", [Code, Out, Err]),
            0 = Code,
            {ok, Record} = terrain_lab_testbed:read(Dir),
            [{record, Record}, {hosts, [binary_to_list(N) || #{<<"name">> := N} <- maps:get(<<"hosts">>, Record)]}
             | Config1];
        {error, Why} ->
            {skip, lists:flatten(terrain_lab_testbed:format_error(Why))}
    end.

%% Runs even when cases failed: the testbed never outlives the suite.
end_per_suite(Config) ->
    _ = filelib:is_regular(filename:join(?config(dir, Config), "testbed.json")) andalso
        terrain(Config, [], ["testbed", "down", "--dir", ?config(dir, Config)]),
    ok.

%%--------------------------------------------------------------------

testbed_up_shows_four_idle_nodes_and_its_env(Config) ->
    %% `sinfo' (with the testbed's env): 4 nodes, all idle, in the partition named after the prefix
    {0, Sinfo, _} = run(Config, ["sinfo", "-h", "-N", "-o", "%N %P %T"]),
    ct:pal("sinfo:~n~ts", [Sinfo]),
    Prefix = ?config(prefix, Config),
    ?assertEqual([H ++ " " ++ Prefix ++ "* idle" || H <- ?config(hosts, Config)],
                 lists:sort(string:lexemes(Sinfo, "\n"))),
    {0, Env, _} = terrain(Config, [], ["testbed", "env", "--dir", ?config(dir, Config)]),
    ?assertMatch({match, _}, re:run(Env, "^export SLURM_CONF='" ++ ?config(dir, Config) ++ "/slurm.conf'$", [multiline])),
    ?assertMatch({match, _}, re:run(Env, "^export ERL_INETRC='" ++ ?config(dir, Config) ++ "/inetrc'$", [multiline])),
    %% status: every host with its sshd, epmd and slurmd; every daemon running
    {0, Status, _} = terrain(Config, [], ["testbed", "status", "--dir", ?config(dir, Config)]),
    ct:pal("status:~n~ts", [Status]),
    [?assertMatch({match, _}, re:run(Status, "^" ++ H ++ " +10\\.214\\.[0-9]+\\.[0-9]+  sshd epmd slurmd$", [multiline]))
     || H <- ?config(hosts, Config)],
    ?assertEqual(6, length(string:split(Status, "running (pid", all)) - 1).

salloc_up_slurm_starts_one_vm_per_host_in_its_namespace_grouped_by_topology_conf(Config) ->
    Dir = case_dir(Config, "salloc"),
    State = filename:join(Dir, "state"),
    Script = script(Dir, ["T=", escript(), "\n",
                          "\"$T\" up --slurm --prefix sa_ --state-dir ", State, " --spec-out ", Dir, "/spec > ", Dir, "/up.out 2>&1\n",
                          "echo $? > ", Dir, "/up.code\n",
                          "\"$T\" status --json --state-dir ", State, " > ", Dir, "/status.json\n",
                          "squeue -h -s -j $SLURM_JOB_ID -o '%i %N' > ", Dir, "/steps.txt\n",
                          pids_into_file(Config, Dir ++ "/during.txt"),
                          "\"$T\" down --state-dir ", State, " > ", Dir, "/down.out 2>&1\n",
                          "echo $? > ", Dir, "/down.code\n",
                          pids_into_file(Config, Dir ++ "/after.txt")]),
    {Code, Out, Err} = run(Config, ["salloc", "-N", "4", "sh", Script]),
    ct:pal("salloc: exit ~b~n~ts~ts~nup:~n~ts~nsteps:~n~ts", [Code, Out, Err, read(Dir, "up.out"), read(Dir, "steps.txt")]),
    ?assertEqual("0", string:trim(read(Dir, "up.code"))),
    ?assertMatch({match, _}, re:run(read(Dir, "up.out"), "groups from 'scontrol show topology': 3 switches")),
    ?assertMatch({match, _}, re:run(read(Dir, "up.out"), "starting the VMs with .*/srun")),
    %% 4 job steps, one on each host
    ?assertEqual(?config(hosts, Config), lists:sort([lists:last(string:lexemes(L, " ")) || L <- string:lexemes(read(Dir, "steps.txt"), "\n")])),
    %% every VM up, grouped as topology.conf says, its beam.smp in its own host's namespace
    {ok, #{<<"nodes">> := Nodes}} = terrain_json:decode(list_to_binary(read(Dir, "status.json"))),
    [H1, H2, H3, H4] = [list_to_binary(H) || H <- ?config(hosts, Config)],
    ?assertEqual([[<<"root">>, <<"s1">>, H1], [<<"root">>, <<"s1">>, H2], [<<"root">>, <<"s2">>, H3], [<<"root">>, <<"s2">>, H4]],
                 [P || #{<<"group_path">> := P} <- Nodes]),
    ?assertEqual(lists:duplicate(4, <<"up">>), [S || #{<<"state">> := S} <- Nodes]),
    During = namespace_pids(read(Dir, "during.txt")),
    [?assert(lists:member({binary_to_list(H), binary_to_list(Pid), "beam.smp"}, During))
     || #{<<"host">> := H, <<"os_pid">> := Pid} <- Nodes],
    %% down ends the steps: no VM is left in any namespace
    ?assertEqual("0", string:trim(read(Dir, "down.code"))),
    ?assertEqual(lists:duplicate(4, "stopped"), [lists:last(string:lexemes(L, " ")) || L <- string:lexemes(read(Dir, "down.out"), "\n"),
                                                                                      not lists:prefix("down:", L)]),
    ?assertEqual([], [P || {_, P, "beam.smp"} <- namespace_pids(read(Dir, "after.txt"))]).

salloc_per_task_and_per_host_start_that_many_vms_per_host(Config) ->
    Dir = case_dir(Config, "per"),
    Line = fun(Name, Args) ->
                   State = filename:join(Dir, Name),
                   ["\"$T\" up --slurm ", Args, " --prefix ", Name, "_ --state-dir ", State, " --spec-out ", State, ".spec > ",
                    Dir, "/", Name, ".up 2>&1 && \"$T\" status --json --state-dir ", State, " > ", Dir, "/", Name, ".json; ",
                    "\"$T\" down --state-dir ", State, " > /dev/null 2>&1\n"]
           end,
    Script = script(Dir, ["T=", escript(), "\n", "echo $SLURM_TASKS_PER_NODE > ", Dir, "/tasks\n",
                          Line("pt", "--per-task"), Line("ph", "--per-host 3"),
                          pids_into_file(Config, Dir ++ "/after.txt")]),
    {Code, _, Err} = run(Config, ["salloc", "-N", "4", "--ntasks-per-node=2", "sh", Script]),
    ct:pal("salloc: exit ~b ~ts~nper-task:~n~ts~nper-host:~n~ts", [Code, Err, read(Dir, "pt.up"), read(Dir, "ph.up")]),
    ?assertEqual("2(x4)", string:trim(read(Dir, "tasks"))),
    PerHost = fun(File) ->
                      {ok, #{<<"nodes">> := Nodes}} = terrain_json:decode(list_to_binary(read(Dir, File))),
                      ?assertEqual([], [S || #{<<"state">> := S} <- Nodes, S =/= <<"up">>]),
                      lists:sort(maps:to_list(lists:foldl(fun(#{<<"group_path">> := P}, Acc) ->
                                                                  maps:update_with(lists:last(P), fun(C) -> C + 1 end, 1, Acc)
                                                          end, #{}, Nodes)))
              end,
    Hosts = [list_to_binary(H) || H <- ?config(hosts, Config)],
    ?assertEqual([{H, 2} || H <- Hosts], PerHost("pt.json")),
    ?assertEqual([{H, 3} || H <- Hosts], PerHost("ph.json")),
    ?assertEqual([], [P || {_, P, "beam.smp"} <- namespace_pids(read(Dir, "after.txt"))]).

topology_import_of_the_file_and_of_scontrol_give_the_same_tree(Config) ->
    Dir = case_dir(Config, "import"),
    Conf = filename:join(?config(dir, Config), "topology.conf"),
    {0, FromFile, _} = terrain(Config, [], ["topology", "import", "slurm", Conf]),
    {0, FromScontrol, Err} = terrain(Config, env(Config), ["topology", "import", "slurm", "--scontrol",
                                                         "--out", filename:join(Dir, "slurm.json")]),
    ct:pal("import of ~ts:~n~ts~n--scontrol: ~ts", [Conf, FromFile, Err]),
    ?assertEqual("", FromScontrol),
    {ok, [Tree]} = file:consult(write(Dir, "file.term", FromFile)),
    [H1, H2, H3, H4] = [list_to_atom(H) || H <- ?config(hosts, Config)],
    ?assertEqual({network, root, [{network, s1, [{node, H1}, {node, H2}]}, {network, s2, [{node, H3}, {node, H4}]}]}, Tree),
    ?assertEqual(ok, terrain:check_topology(Tree)),
    %% the JSON of --scontrol reads back as the same tree, and compares as equal to it
    {0, Compare, _} = terrain(Config, [], ["topology", "compare", filename:join(Dir, "slurm.json"), filename:join(Dir, "file.term")]),
    ?assertMatch({match, _}, re:run(Compare, "recall 1.000 .* precision 1.000")).

the_pipeline_batch_job_finds_slurms_topology_and_writes_its_report(Config) ->
    Dir = case_dir(Config, "pipeline"),
    Run = filename:join(Dir, "run"),
    Sbatch = filename:join(terrain_lab_test_escript:root(), "examples/slurm/pipeline.sbatch"),
    {0, JobId, _} = run(Config, ["env", "TERRAIN=" ++ escript(), "RUN=" ++ Run, "BUDGET=20", "RUNS=1", "GLOBAL=5",
                                 "INSTANCES=" ++ filename:join(terrain_lab_test_escript:root(), "examples/slurm/wt40_first2.txt"),
                                 "sbatch", "--parsable", "--wait", "--output=" ++ filename:join(Dir, "job.out"), Sbatch]),
    Out = read(Dir, "job.out"),
    ct:pal("job ~ts:~n~ts", [string:trim(JobId), Out]),
    ?assertMatch({match, _}, re:run(Out, "clades: recall 1.000 \\(2 of 2 true clades found\\), precision 1.000")),
    ?assertMatch({match, _}, re:run(Out, "random / distance: [0-9.]+")),
    Report = read(Run, "report.md"),
    [?assertMatch({match, _}, re:run(Report, "## " ++ N ++ "\\. "), N) || N <- ["1", "2", "3", "4", "5", "6", "7"]],
    %% probed tree-guided, every node placed by the median (the default STRATEGY and STATISTIC)
    ?assertMatch({match, _}, re:run(Out, "tree-guided: .* placed by their median")),
    %% terrain report rendered the run directory: every step, both trees, SLURM's, the comparison, ML-ACO
    Html = read(Run, "report.html"),
    [?assertMatch({match, _}, re:run(Html, "id=\"kind-" ++ K ++ "\"", [unicode]), K)
     || K <- ["latency", "topology", "topology_comparison", "slurm_topology", "aco_placement", "pipeline"]],
    [?assertMatch({match, _}, re:run(Html, "<td>" ++ N ++ "\\. ", [unicode]), N) || N <- ["1", "2", "3", "4", "5", "6", "7"]],
    ?assertEqual(nomatch, re:run(Html, "class=\"error\"", [unicode])),
    ?assertEqual([], [P || {_, P, "beam.smp"} <- current_namespace_pids(Config)]).

scancel_of_a_batch_job_leaves_no_vm_and_down_says_so(Config) ->
    Dir = case_dir(Config, "scancel"),
    State = filename:join(Dir, "state"),
    Script = script(Dir, ["#SBATCH -N 4\n", escript(), " up --slurm --prefix sc_ --state-dir ", State, " --spec-out ", Dir,
                          "/spec > ", Dir, "/up.out 2>&1\n", "touch ", Dir, "/up.done\nsleep 600\n"]),
    {0, JobId0, _} = run(Config, ["sbatch", "--parsable", "--output=" ++ filename:join(Dir, "job.out"), Script]),
    JobId = string:trim(JobId0),
    ?assert(await(fun() -> filelib:is_regular(filename:join(Dir, "up.done")) end, 60000)),
    ct:pal("up in job ~ts:~n~ts", [JobId, read(Dir, "up.out")]),
    ?assertEqual(4, length([x || {_, _, "beam.smp"} <- current_namespace_pids(Config)])),
    {ok, #{<<"nodes">> := Nodes}} = terrain_lab_cluster_state:read(State),
    Sruns = [binary_to_list(P) || #{<<"srun_pid">> := P} <- Nodes],
    ?assertEqual(4, length(Sruns)),
    {0, _, _} = run(Config, ["scancel", JobId]),
    %% SLURM ends the steps: their VMs, then the sruns that held them
    ?assert(await(fun() -> [] =:= [P || {_, P, "beam.smp"} <- current_namespace_pids(Config)] end, 30000)),
    ?assert(await(fun() -> [] =:= [P || P <- Sruns, terrain_lab_os:alive(P)] end, 30000)),
    {0, Down, _} = terrain(Config, env(Config), ["down", "--state-dir", State]),
    ct:pal("down after scancel:~n~ts", [Down]),
    ?assertEqual(4, length(string:split(Down, "was not running (its job step had ended)", all)) - 1).

a_host_whose_slurmd_is_stopped_fails_up_and_leaves_nothing(Config) ->
    Dir = case_dir(Config, "failed"),
    State = filename:join(Dir, "state"),
    Last = lists:last(?config(hosts, Config)),
    {ok, #{<<"daemons">> := Daemons}} = terrain_lab_testbed:read(?config(dir, Config)),
    Slurmd = binary_to_list(maps:get(list_to_binary("slurmd " ++ Last), Daemons)),
    _ = os:cmd("kill -TERM " ++ Slurmd),
    ?assertEqual([], terrain_lab_os:await_exit([Slurmd], 10000)),
    Script = script(Dir, [escript(), " up --slurm --prefix fs_ --timeout 20000 --state-dir ", State, " --spec-out ", Dir,
                              "/spec > ", Dir, "/up.out 2>&1\necho $? > ", Dir, "/up.code\n",
                              pids_into_file(Config, Dir ++ "/after.txt")]),
        {_, _, Err} = run(Config, ["salloc", "-N", "4", "sh", Script]),
        Up = read(Dir, "up.out"),
    ct:pal("slurmd of ~ts stopped; salloc: ~ts~nup:~n~ts", [Last, Err, Up]),
    ?assertEqual("1", string:trim(read(Dir, "up.code"))),
    ?assertMatch({match, _}, re:run(Up, "srun for " ++ Last)),
    ?assertEqual([], [P || {_, P, "beam.smp"} <- namespace_pids(read(Dir, "after.txt"))]),
    ?assertNot(filelib:is_dir(State)).

testbed_down_leaves_no_namespace_daemon_or_file(Config) ->
    Dir = ?config(dir, Config),
    {ok, #{<<"daemons">> := Daemons, <<"bridge">> := Bridge}} = terrain_lab_testbed:read(Dir),
    {Code, Out, Err} = terrain(Config, [], ["testbed", "down", "--dir", Dir]),
    ct:pal("terrain testbed down: exit ~b~n~ts~ts", [Code, Out, Err]),
    ?assertEqual(0, Code),
    ?assertEqual([], [H || H <- ?config(hosts, Config), lists:member(H, string:lexemes(os:cmd("ip netns list"), " \n"))]),
    ?assertEqual([], [P || P <- maps:values(Daemons), terrain_lab_os:alive(binary_to_list(P))]),
    ?assertEqual("", os:cmd("ip link show " ++ binary_to_list(Bridge) ++ " 2>/dev/null")),
    ?assertNot(filelib:is_dir(Dir)),
    ?assertEqual(nomatch, string:find(os:cmd("pgrep -a slurm; pgrep -a munged"), Dir)).

%%--------------------------------------------------------------------

escript() ->
    terrain_lab_test_escript:path().

env(Config) ->
    Dir = ?config(dir, Config),
    ["SLURM_CONF=" ++ filename:join(Dir, "slurm.conf"), "ERL_INETRC=" ++ filename:join(Dir, "inetrc")].

%% The escript with the testbed's env and no SLURM variable of the caller.
terrain(Config, Env, Args) ->
    terrain_lab_test_escript:run("env", ?config(priv_dir, Config),
                                 ["-u", "SLURM_JOB_ID", "-u", "SLURM_JOB_NODELIST", "-u", "SLURM_CONF" | Env]
                                 ++ [escript() | Args]).

%% A program with the testbed's env.
run(Config, [Program | Args]) ->
    terrain_lab_test_escript:run("env", ?config(priv_dir, Config),
                                 ["-u", "SLURM_JOB_ID", "-u", "SLURM_JOB_NODELIST" | env(Config)] ++ [Program | Args]).

case_dir(Config, Name) ->
    Dir = filename:join(?config(priv_dir, Config), Name),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Dir.

script(Dir, Lines) ->
    File = filename:join(Dir, "script.sh"),
    ok = file:write_file(File, ["#!/bin/sh\n" | Lines]),
    ok = file:change_mode(File, 8#755),
    File.

write(Dir, Name, Text) ->
    File = filename:join(Dir, Name),
    ok = file:write_file(File, Text),
    File.

read(Dir, Name) ->
    case file:read_file(filename:join(Dir, Name)) of
        {ok, B} -> unicode:characters_to_list(B);
        {error, _} -> ""
    end.

%% Shell lines that write `NS PID COMM' of every process in the hosts' namespaces.
pids_into_file(Config, File) ->
    [": > ", File, "\n",
     [["for p in $(ip netns pids ", H, "); do echo \"", H, " $p $(cat /proc/$p/comm 2>/dev/null)\" >> ", File, "; done\n"]
      || H <- ?config(hosts, Config)]].

namespace_pids(Text) ->
    [list_to_tuple(string:lexemes(L, " ")) || L <- string:lexemes(Text, "\n"), length(string:lexemes(L, " ")) =:= 3].

current_namespace_pids(Config) ->
    [{H, P, C} || H <- ?config(hosts, Config), {P, C} <- terrain_lab_testbed:host_pids(H)].

await(Fun, Timeout) ->
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    await_until(Fun, Deadline).

await_until(Fun, Deadline) ->
    case Fun() of
        true -> true;
        false ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> false;
                false -> timer:sleep(200), await_until(Fun, Deadline)
            end
    end.
