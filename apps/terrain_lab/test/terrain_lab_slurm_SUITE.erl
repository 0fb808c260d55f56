%% `terrain up --slurm' on 4 test hosts (network namespaces with their own address,
%% sshd and epmd; terrain_lab_test_hosts) with STAND-INS for SLURM's `srun' and
%% `scontrol' (shell scripts the suite writes into a directory it puts first on the
%% escript's PATH), for what the real commands cannot be made to do on demand: hang,
%% be missing, log their arguments. This machine's own SLURM commands, when installed,
%% are hidden from that PATH, so the cases run the same with and without SLURM.
%%
%% - `srun' logs its arguments (one call a line, tab-separated), finds the host of
%%   `--nodelist=HOST', skips its options and runs the rest of its command line in
%%   that host's namespace (`ip netns exec NS ...') as its child, staying in the
%%   foreground until the command ends, as a real srun stays with its job step. Its
%%   standard input is passed on (the cookie reaches the task that way, as with a
%%   real srun). With STANDIN_SRUN_HANG set it hangs instead, like an srun whose step
%%   never starts.
%% - `scontrol show topology' prints a tree topology (two leaf switches under a
%%   spine) in the format of SLURM's topology/tree plugin; with STANDIN_SCONTROL_HANG
%%   set it hangs instead.
%%
%% The allocation is given as SLURM gives it: SLURM_JOB_NODELIST (the hosts'
%% addresses as a hostlist expression, `10.214.X.[2-5]': addresses need no name
%% resolution, which would take /etc/hosts entries on this machine) and
%% SLURM_TASKS_PER_NODE. The escript runs as its own OS process under `env'.
-module(terrain_lab_slurm_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, groups/0, init_per_suite/1, end_per_suite/1, init_per_group/2, end_per_group/2,
         init_per_testcase/2, end_per_testcase/2]).
-export([up_with_srun_starts_one_vm_per_task_on_each_host/0, up_with_srun_starts_one_vm_per_task_on_each_host/1,
         srun_was_called_once_per_vm_with_the_documented_arguments/0,
         srun_was_called_once_per_vm_with_the_documented_arguments/1,
         every_vm_runs_in_its_hosts_namespace/0, every_vm_runs_in_its_hosts_namespace/1,
         the_groups_come_from_scontrol/0, the_groups_come_from_scontrol/1,
         status_reports_every_node_up/0, status_reports_every_node_up/1,
         down_stops_every_vm_and_every_srun/0, down_stops_every_vm_and_every_srun/1,
         without_scontrol_the_hosts_form_one_group_and_probing_is_advised/0,
         without_scontrol_the_hosts_form_one_group_and_probing_is_advised/1,
         without_srun_the_vms_start_over_ssh/0, without_srun_the_vms_start_over_ssh/1,
         bad_slurm_variables_are_usage_errors_naming_the_variable/0,
         bad_slurm_variables_are_usage_errors_naming_the_variable/1,
         a_hung_srun_fails_up_at_its_deadline_and_leaves_nothing/0,
         a_hung_srun_fails_up_at_its_deadline_and_leaves_nothing/1,
         with_tls_every_srun_vm_runs_inet_tls_with_its_own_certificate/0,
         with_tls_every_srun_vm_runs_inet_tls_with_its_own_certificate/1]).

-define(HOSTS, 4).
-define(TASKS, "2,1(x3)").        % SLURM_TASKS_PER_NODE: 2 tasks on the first host, 1 on the others
-define(VMS, 5).
%% The commands of Debian's slurm-client, slurmctld and slurmd packages that terrain
%% could find on the PATH; the stand-ins replace srun and scontrol, the others are hidden.
-define(SLURM_COMMANDS, ["srun", "scontrol", "salloc", "sbatch", "sinfo", "squeue", "scancel", "sacct", "sstat",
                         "sattach", "sbcast", "scrontab", "sdiag", "sprio", "sreport", "sshare", "strigger",
                         "sacctmgr", "slurmctld", "slurmd", "slurmstepd"]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [{group, srun}, without_scontrol_the_hosts_form_one_group_and_probing_is_advised,
     without_srun_the_vms_start_over_ssh, with_tls_every_srun_vm_runs_inet_tls_with_its_own_certificate,
     bad_slurm_variables_are_usage_errors_naming_the_variable,
     a_hung_srun_fails_up_at_its_deadline_and_leaves_nothing].

groups() ->
    [{srun, [sequence], [up_with_srun_starts_one_vm_per_task_on_each_host,
                         srun_was_called_once_per_vm_with_the_documented_arguments,
                         every_vm_runs_in_its_hosts_namespace, the_groups_come_from_scontrol,
                         status_reports_every_node_up, down_stops_every_vm_and_every_srun]}].

init_per_suite(Config) ->
    case terrain_lab_test_hosts:available() of
        true ->
            Dir = ?config(priv_dir, Config),
            {ok, Hosts} = terrain_lab_test_hosts:start(?HOSTS, filename:join(Dir, "hosts")),
            Addresses = terrain_lab_test_hosts:addresses(Hosts),
            Bins = write_stand_ins(Dir, Hosts),
            [{hosts, Hosts}, {bins, Bins}, {nodelist, nodelist(Addresses)},
             {path_without_slurm, path_without(?SLURM_COMMANDS, filename:join(Dir, "path"))},
             {state_dir, filename:join(Dir, "state")} | Config];
        {false, Why} ->
            {skip, io_lib:format("cannot make test hosts here: ~p", [Why])}
    end.

%% Runs even when cases failed: no VM, srun or namespace outlives the suite.
end_per_suite(Config) ->
    _ = terrain(Config, slurm_env(Config, both, ?TASKS), ["down", "--state-dir", ?config(state_dir, Config)]),
    kill_stand_ins(Config),
    terrain_lab_test_hosts:stop(?config(hosts, Config)).

init_per_group(_Group, Config) ->
    Config.

end_per_group(srun, Config) ->
    down_if_up(Config).

init_per_testcase(_Case, Config) ->
    Config.

%% A case outside the group that failed halfway leaves no cluster to the next.
end_per_testcase(Case, Config) ->
    case lists:member(Case, element(3, hd(groups()))) of
        true -> ok;
        false -> down_if_up(Config)
    end.

down_if_up(Config) ->
    _ = filelib:is_dir(?config(state_dir, Config)) andalso
        terrain(Config, slurm_env(Config, both, ?TASKS), ["down", "--state-dir", ?config(state_dir, Config)]),
    ok.

%%--------------------------------------------------------------------
%% srun and scontrol on the PATH

up_with_srun_starts_one_vm_per_task_on_each_host() ->
    [{doc, "terrain up --slurm --per-task with SLURM_TASKS_PER_NODE=2,1(x3) on 4 hosts exits 0 and prints the "
           "5 nodes: 2 on the first host, 1 on each other; stderr says srun starts them."}].
up_with_srun_starts_one_vm_per_task_on_each_host(Config) ->
    {Code, Out, Err} = up(Config, both, ?TASKS, ["--per-task"]),
    ct:pal("terrain up --slurm:~n~ts~ts", [Out, Err]),
    ?assertEqual(0, Code, Err),
    ?assertEqual([atom_to_list(N) || N <- expected_nodes(Config)],
                 [hd(string:lexemes(L, " ")) || L <- tl(string:split(string:trim(Out), "\n", all))]),
    ?assertMatch({match, _}, re:run(Err, "starting the VMs with .*/srun \\(one job step per VM\\)")).

srun_was_called_once_per_vm_with_the_documented_arguments() ->
    [{doc, "The stand-in srun was called once per VM as 'srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap "
           "--kill-on-bad-exit=1 --job-name=terrain-NAME /bin/sh -c LINE', LINE starting erl in the foreground "
           "(no -detached); the cookie is on no command line."}].
srun_was_called_once_per_vm_with_the_documented_arguments(Config) ->
    Calls = srun_calls(Config),
    Expected = lists:sort([["--nodes=1", "--ntasks=1", "--nodelist=" ++ Host, "--overlap", "--kill-on-bad-exit=1",
                            "--job-name=terrain-" ++ hd(string:split(atom_to_list(Node), "@"))]
                           || Node <- expected_nodes(Config), Host <- [host_of(Node)]]),
    ?assertEqual(Expected, lists:sort([lists:sublist(C, 6) || C <- Calls])),
    [begin
         ?assertMatch(["/bin/sh", "-c", _], lists:nthtail(6, C)),
         Line = lists:last(C),
         ?assertMatch({match, _}, re:run(Line, "exec erl '-noinput'")),
         ?assertEqual(nomatch, string:find(Line, "-detached"))
     end || C <- Calls],
    {ok, Cookie} = file:read_file(filename:join(?config(state_dir, Config), "cookie")),
    {ok, Log} = file:read_file(srun_log(Config)),
    ?assert(byte_size(string:trim(Cookie)) > 0),
    ?assertEqual(nomatch, binary:match(Log, string:trim(Cookie))).

every_vm_runs_in_its_hosts_namespace() ->
    [{doc, "Each recorded OS pid is a beam.smp that 'ip netns pids' lists for the namespace of its host, and its "
           "node's srun (recorded too) is a running process of this machine."}].
every_vm_runs_in_its_hosts_namespace(Config) ->
    Hosts = ?config(hosts, Config),
    ByAddress = lists:zip(terrain_lab_test_hosts:addresses(Hosts), terrain_lab_test_hosts:namespaces(Hosts)),
    {ok, #{<<"nodes">> := Nodes}} = terrain_lab_cluster_state:read(?config(state_dir, Config)),
    ?assertEqual(?VMS, length(Nodes)),
    lists:foreach(fun(#{<<"host">> := Host, <<"os_pid">> := Pid, <<"srun_pid">> := SrunPid}) ->
                          NS = proplists:get_value(binary_to_list(Host), ByAddress),
                          ?assert(lists:member({binary_to_list(Pid), "beam.smp"}, terrain_lab_test_hosts:pids(NS))),
                          ?assert(terrain_lab_os:alive(binary_to_list(SrunPid)))
                  end, Nodes).

the_groups_come_from_scontrol() ->
    [{doc, "The spec written by --slurm nests the stand-in scontrol's switches: spine > leaf1 (hosts 1-2) and "
           "leaf2 (hosts 3-4), one group per host; every node's recorded group path follows it."}].
the_groups_come_from_scontrol(Config) ->
    [A1, A2, A3, A4] = [list_to_atom(safe(A)) || A <- terrain_lab_test_hosts:addresses(?config(hosts, Config))],
    {ok, Spec} = terrain_lab_spec:read(spec_file(Config)),
    ?assertEqual(lists:sort([[spine], [spine, leaf1], [spine, leaf2], [spine, leaf1, A1], [spine, leaf1, A2],
                             [spine, leaf2, A3], [spine, leaf2, A4]]),
                 lists:sort([P || {P, _} <- maps:get(groups, Spec)])),
    {ok, #{<<"nodes">> := Nodes}} = terrain_lab_cluster_state:read(?config(state_dir, Config)),
    ?assertEqual([[<<"spine">>, <<"leaf1">>, atom_to_binary(A1)], [<<"spine">>, <<"leaf1">>, atom_to_binary(A1)],
                  [<<"spine">>, <<"leaf1">>, atom_to_binary(A2)], [<<"spine">>, <<"leaf2">>, atom_to_binary(A3)],
                  [<<"spine">>, <<"leaf2">>, atom_to_binary(A4)]],
                 [P || #{<<"group_path">> := P} <- Nodes]).

status_reports_every_node_up() ->
    [{doc, "terrain status --json: all 5 nodes up."}].
status_reports_every_node_up(Config) ->
    {0, Out, _} = terrain(Config, slurm_env(Config, both, ?TASKS),
                          ["status", "--json", "--state-dir", ?config(state_dir, Config)]),
    {ok, #{<<"nodes">> := Nodes}} = terrain_json:decode(list_to_binary(Out)),
    ?assertEqual(lists:duplicate(?VMS, <<"up">>), [S || #{<<"state">> := S} <- Nodes]).

down_stops_every_vm_and_every_srun() ->
    [{doc, "terrain down stops the 5 VMs by name; their sruns end with them; 'ip netns pids' then lists only the "
           "test's sshd and epmd in each namespace, and no stand-in srun runs."}].
down_stops_every_vm_and_every_srun(Config) ->
    {ok, #{<<"nodes">> := Nodes}} = terrain_lab_cluster_state:read(?config(state_dir, Config)),
    Sruns = [binary_to_list(P) || #{<<"srun_pid">> := P} <- Nodes],
    {Code, Out, Err} = terrain(Config, slurm_env(Config, both, ?TASKS), ["down", "--state-dir", ?config(state_dir, Config)]),
    ct:pal("down: ~ts~ts", [Out, Err]),
    ?assertEqual(0, Code),
    ?assertEqual(lists:duplicate(?VMS, "stopped"), [lists:last(string:lexemes(L, " ")) || L <- string:lexemes(Out, "\n")]),
    assert_hosts_clean(Config),
    ?assertEqual([], [P || P <- Sruns, terrain_lab_os:alive(P)]),
    ?assertEqual([], stand_in_processes(Config)),
    ?assertNot(filelib:is_dir(?config(state_dir, Config))).

%%--------------------------------------------------------------------
%% The other paths

without_scontrol_the_hosts_form_one_group_and_probing_is_advised() ->
    [{doc, "With srun but no scontrol on the PATH: one VM per host (SLURM_TASKS_PER_NODE=1(x4)), all in one group "
           "'allocation'; stderr names the missing scontrol and advises terrain probe + terrain topology; down "
           "leaves nothing."}].
without_scontrol_the_hosts_form_one_group_and_probing_is_advised(Config) ->
    {Code, Out, Err} = up(Config, srun_only, "1(x4)", []),
    ct:pal("terrain up --slurm without scontrol:~n~ts~ts", [Out, Err]),
    ?assertEqual(0, Code, Err),
    ?assertMatch({match, _}, re:run(Err, "scontrol is not on the PATH: the 4 nodes form one group 'allocation'")),
    ?assertMatch({match, _}, re:run(Err, "run 'terrain probe' and then 'terrain topology")),
    {ok, Spec} = terrain_lab_spec:read(spec_file(Config)),
    ?assertEqual([allocation], lists:usort([hd(P) || {P, _} <- maps:get(groups, Spec)])),
    ?assertEqual(?HOSTS, length(terrain_lab_spec:nodes(Spec))),
    down_and_check(Config, ?HOSTS).

without_srun_the_vms_start_over_ssh() ->
    [{doc, "With scontrol but no srun on the PATH: stderr says the VMs start over ssh, srun is not called, the 4 "
           "VMs run in their hosts' namespaces with no srun recorded, and down leaves nothing."}].
without_srun_the_vms_start_over_ssh(Config) ->
    Before = srun_calls(Config),
    {Code, Out, Err} = up(Config, scontrol_only, "1(x4)", []),
    ct:pal("terrain up --slurm without srun:~n~ts~ts", [Out, Err]),
    ?assertEqual(0, Code, Err),
    ?assertMatch({match, _}, re:run(Err, "srun is not on the PATH: starting the VMs over ssh")),
    ?assertEqual(Before, srun_calls(Config)),
    {ok, #{<<"nodes">> := Nodes}} = terrain_lab_cluster_state:read(?config(state_dir, Config)),
    ?assertEqual([], [N || #{<<"srun_pid">> := _} = N <- Nodes]),
    ByAddress = lists:zip(terrain_lab_test_hosts:addresses(?config(hosts, Config)),
                          terrain_lab_test_hosts:namespaces(?config(hosts, Config))),
    [?assert(lists:member({binary_to_list(Pid), "beam.smp"},
                          terrain_lab_test_hosts:pids(proplists:get_value(binary_to_list(H), ByAddress))))
     || #{<<"host">> := H, <<"os_pid">> := Pid} <- Nodes],
    down_and_check(Config, ?HOSTS).

with_tls_every_srun_vm_runs_inet_tls_with_its_own_certificate() ->
    [{doc, "terrain up --slurm --tls: srun gets each VM's key material on its standard input after the cookie (no "
           "certificate or key in any srun call), every VM runs with -proto_dist inet_tls and its own option file "
           "(mode 0600, on its host), the private srun input files are gone, the CLI reaches all 4 over TLS (status: up, and says TLS), and down leaves "
           "nothing."}].
with_tls_every_srun_vm_runs_inet_tls_with_its_own_certificate(Config) ->
    Before = srun_log_text(Config),
    {Code, Out, Err} = up(Config, both, "1(x4)", ["--tls"]),
    ct:pal("terrain up --slurm --tls:~n~ts~ts", [Out, Err]),
    ?assertEqual(0, Code, Err),
    %% the calls of this case (a call's LINE has the option file's text, so it spans lines)
    Calls = string:slice(srun_log_text(Config), string:length(Before)),
    ?assertEqual(?HOSTS, length(string:split(Calls, "--nodes=1\t", all)) - 1),
    ?assertMatch({match, _}, re:run(Calls, "-proto_dist' 'inet_tls'")),
    [?assertEqual(nomatch, string:find(Calls, Secret)) || Secret <- ["PRIVATE KEY", "BEGIN CERTIFICATE"]],
    %% srun read them from a private file of the state directory, gone once the VMs answered
    ?assertEqual([], filelib:wildcard(filename:join([?config(state_dir, Config), "nodes", "*.stdin"]))),
    {ok, #{<<"nodes">> := Nodes}} = terrain_lab_cluster_state:read(?config(state_dir, Config)),
    lists:foreach(
      fun(#{<<"name">> := Name, <<"os_pid">> := Pid}) ->
              {ok, Cmdline} = file:read_file("/proc/" ++ binary_to_list(Pid) ++ "/cmdline"),
              Args = string:split(binary_to_list(Cmdline), [0], all),
              ?assertMatch(["inet_tls" | _], tl(lists:dropwhile(fun(A) -> A =/= "-proto_dist" end, Args))),
              [OptFile | _] = tl(lists:dropwhile(fun(A) -> A =/= "-ssl_dist_optfile" end, Args)),
              ?assertEqual(binary_to_list(Name) ++ ".conf", filename:basename(OptFile)),
              %% the VM's working directory is the (shared) home: the option file is relative to it
              {ok, #{mode := Mode}} = file_mode(filename:join(os:getenv("HOME"), OptFile)),
              ?assertEqual(8#600, Mode band 8#777)
      end, Nodes),
    {0, Status, StatusErr} = terrain(Config, slurm_env(Config, both, "1(x4)"),
                                     ["status", "--json", "--state-dir", ?config(state_dir, Config)]),
    {ok, #{<<"nodes">> := Up} = Json} = terrain_json:decode(list_to_binary(Status)),
    ct:pal("status: ~ts~ts", [Status, StatusErr]),
    ?assertEqual(lists:duplicate(?HOSTS, <<"up">>), [S || #{<<"state">> := S} <- Up]),
    ?assertEqual(true, maps:get(<<"tls">>, Json)),
    down_and_check(Config, ?HOSTS).

bad_slurm_variables_are_usage_errors_naming_the_variable() ->
    [{doc, "Outside an allocation, and with SLURM_JOB_NODELIST or SLURM_TASKS_PER_NODE missing, empty or "
           "malformed, or counting other nodes: exit 2 with the variable named, nothing started, no state."}].
bad_slurm_variables_are_usage_errors_naming_the_variable(Config) ->
    NodeList = ?config(nodelist, Config),
    Cases = [{[], "not inside a SLURM allocation"},
             {[{"SLURM_JOB_ID", "42"}, {"SLURM_TASKS_PER_NODE", "1(x4)"}], "SLURM_JOB_NODELIST is not set"},
             {[{"SLURM_JOB_NODELIST", ""}, {"SLURM_TASKS_PER_NODE", "1(x4)"}], "SLURM_JOB_NODELIST is empty"},
             {[{"SLURM_JOB_NODELIST", "thost[1-"}, {"SLURM_TASKS_PER_NODE", "1(x4)"}],
              "SLURM_JOB_NODELIST='thost\\[1-' is not a hostlist"},
             {[{"SLURM_JOB_NODELIST", NodeList}], "SLURM_TASKS_PER_NODE is not set"},
             {[{"SLURM_JOB_NODELIST", NodeList}, {"SLURM_TASKS_PER_NODE", "2(x"}],
              "SLURM_TASKS_PER_NODE='2\\(x' cannot be read"},
             {[{"SLURM_JOB_NODELIST", NodeList}, {"SLURM_TASKS_PER_NODE", "1(x3)"}],
              "SLURM_TASKS_PER_NODE gives task counts for 3 nodes but SLURM_JOB_NODELIST lists 4"}],
    State = filename:join(?config(priv_dir, Config), "bad_state"),
    lists:foreach(fun({Vars, Expected}) ->
                          {Code, Out, Err} = terrain(Config, env(Config, both, Vars),
                                                     ["up", "--slurm", "--state-dir", State,
                                                      "--spec-out", spec_file(Config)]),
                          ct:pal("~p: exit ~b~n~ts", [Vars, Code, Err]),
                          ?assertEqual(2, Code),
                          ?assertEqual("", Out),
                          ?assertMatch({match, _}, re:run(Err, Expected), Err)
                  end, Cases),
    ?assertNot(filelib:is_dir(State)),
    assert_hosts_clean(Config).

a_hung_srun_fails_up_at_its_deadline_and_leaves_nothing() ->
    [{doc, "An scontrol that never answers and an srun that never starts its step (both stand-ins hang): scontrol "
           "is stopped at its 10 s deadline and the hosts form one group; terrain up --timeout 6000 then exits 1 "
           "within that deadline plus its stop time, naming srun; no stand-in or VM is left, the state is removed."}].
a_hung_srun_fails_up_at_its_deadline_and_leaves_nothing(Config) ->
    T0 = erlang:monotonic_time(millisecond),
    {Code, _Out, Err} = up(Config, both, "1(x4)", ["--timeout", "6000"],
                           [{"STANDIN_SRUN_HANG", "1"}, {"STANDIN_SCONTROL_HANG", "1"}]),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ct:pal("hung scontrol and srun: exit ~b after ~b ms~n~ts", [Code, Ms, Err]),
    ?assertEqual(1, Code),
    ?assert(Ms < 40000),
    ?assertMatch({match, _}, re:run(Err, "'scontrol show topology' failed \\(no answer in time; stopped\\): the 4 "
                                          "nodes form one group")),
    ?assertMatch({match, _}, re:run(Err, "srun for .*: the VM did not answer in time and the step was stopped")),
    ?assertEqual([], stand_in_processes(Config)),
    assert_hosts_clean(Config),
    ?assertNot(filelib:is_dir(?config(state_dir, Config))).

%%--------------------------------------------------------------------

up(Config, Bins, Tasks, Extra) ->
    up(Config, Bins, Tasks, Extra, []).

up(Config, Bins, Tasks, Extra, Vars) ->
    terrain(Config, env(Config, Bins, [{"SLURM_JOB_NODELIST", ?config(nodelist, Config)},
                                       {"SLURM_TASKS_PER_NODE", Tasks}, {"SLURM_JOB_ID", "4242"} | Vars]),
            ["up", "--slurm", "--state-dir", ?config(state_dir, Config), "--spec-out", spec_file(Config),
             "--ssh-option", terrain_lab_test_hosts:ssh_option(?config(hosts, Config)), "--timeout", "30000" | Extra]).

down_and_check(Config, Count) ->
    {Code, Out, Err} = terrain(Config, slurm_env(Config, both, "1(x4)"), ["down", "--state-dir", ?config(state_dir, Config)]),
    ?assertEqual(0, Code, Err),
    ?assertEqual(lists:duplicate(Count, "stopped"), [lists:last(string:lexemes(L, " ")) || L <- string:lexemes(Out, "\n")]),
    assert_hosts_clean(Config),
    ?assertEqual([], stand_in_processes(Config)).

srun_log_text(Config) ->
    case file:read_file(srun_log(Config)) of
        {ok, Bin} -> unicode:characters_to_list(Bin);
        {error, enoent} -> ""
    end.

file_mode(File) ->
    case file:read_file_info(File) of
        {ok, Info} -> {ok, #{mode => element(8, Info)}};
        {error, _} = Error -> Error
    end.

%% Only the test's own sshd and epmd in every namespace, by `ip netns pids'.
assert_hosts_clean(Config) ->
    [?assertEqual(["epmd", "sshd"], lists:sort([C || {_, C} <- terrain_lab_test_hosts:pids(NS)]), NS)
     || NS <- terrain_lab_test_hosts:namespaces(?config(hosts, Config))].

slurm_env(Config, Bins, Tasks) ->
    env(Config, Bins, [{"SLURM_JOB_NODELIST", ?config(nodelist, Config)}, {"SLURM_TASKS_PER_NODE", Tasks},
                       {"SLURM_JOB_ID", "4242"}]).

%% `env' arguments: no SLURM variable but `Vars', the stand-ins `Bins' first on a PATH
%% that hides this machine's own SLURM commands (a login node's /usr/bin/srun would
%% otherwise stand in for a missing stand-in).
env(Config, Bins, Vars) ->
    Path = proplists:get_value(Bins, ?config(bins, Config)) ++ ":" ++ ?config(path_without_slurm, Config),
    lists:append([["-u", V] || V <- ["SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID",
                                      "STANDIN_SRUN_HANG", "STANDIN_SCONTROL_HANG"]])
        ++ ["PATH=" ++ Path] ++ [K ++ "=" ++ V || {K, V} <- Vars].

terrain(Config, Env, Args) ->
    terrain_lab_test_escript:run("env", ?config(priv_dir, Config), Env ++ [terrain_lab_test_escript:path() | Args]).

spec_file(Config) ->
    filename:join(?config(priv_dir, Config), "slurm.spec").

srun_log(Config) ->
    filename:join(?config(priv_dir, Config), "srun.log").

%% The stand-in srun's calls, each its argument list.
srun_calls(Config) ->
    case file:read_file(srun_log(Config)) of
        {ok, Bin} -> [string:split(L, "\t", all) || L <- string:lexemes(unicode:characters_to_list(Bin), "\n")];
        {error, enoent} -> []
    end.

%% Processes of this machine running a stand-in script: the script is the program
%% (`/bin/sh DIR/srun ...', argv[0] or argv[1]); the suite's own `env PATH=DIR:... terrain'
%% runs only name the directory in a later argument.
stand_in_processes(Config) ->
    Dir = list_to_binary(filename:join(?config(priv_dir, Config), "bin")),
    [P || "/proc/" ++ P <- filelib:wildcard("/proc/[0-9]*"),
          case file:read_file("/proc/" ++ P ++ "/cmdline") of
              {ok, Cmdline} ->
                  lists:any(fun(Arg) -> binary:longest_common_prefix([Arg, Dir]) =:= byte_size(Dir) end,
                            lists:sublist(binary:split(Cmdline, <<0>>, [global]), 2));
              {error, _} -> false
          end].

kill_stand_ins(Config) ->
    [os:cmd("kill -9 " ++ P) || P <- stand_in_processes(Config)],
    ok.

expected_nodes(Config) ->
    [A1 | Others] = terrain_lab_test_hosts:addresses(?config(hosts, Config)),
    [list_to_atom(safe(A1) ++ "_1@" ++ A1), list_to_atom(safe(A1) ++ "_2@" ++ A1)]
        ++ [list_to_atom(safe(A) ++ "_1@" ++ A) || A <- Others].

host_of(Node) ->
    lists:last(string:split(atom_to_list(Node), "@")).

safe(Address) ->
    lists:flatten(string:replace(Address, ".", "_", all)).

%% 10.214.X.[2-5]
nodelist(Addresses) ->
    [First | _] = Addresses,
    Net = string:join(lists:droplast(string:split(First, ".", all)), "."),
    Lasts = [lists:last(string:split(A, ".", all)) || A <- Addresses],
    Net ++ ".[" ++ hd(Lasts) ++ "-" ++ lists:last(Lasts) ++ "]".

%% This machine's PATH with every directory that holds one of `Commands' replaced by
%% a directory of `Shadow' with links to all its other entries: the stand-in cases run
%% the same whether or not SLURM is installed here.
path_without(Commands, Shadow) ->
    Dirs = string:lexemes(os:getenv("PATH"), ":"),
    string:join([case [C || C <- Commands, filelib:is_regular(filename:join(D, C))] of
                     [] -> D;
                     _ ->
                         Copy = filename:join(Shadow, integer_to_list(I)),
                         ok = filelib:ensure_dir(filename:join(Copy, "x")),
                         {ok, Entries} = file:list_dir(D),
                         [ok = file:make_symlink(filename:join(D, E), filename:join(Copy, E))
                          || E <- Entries, not lists:member(E, Commands)],
                         Copy
                 end || {I, D} <- lists:enumerate(Dirs)], ":").

%% bin/both (srun + scontrol), bin/srun_only, bin/scontrol_only.
write_stand_ins(Dir, Hosts) ->
    Map = [["  ", A, ") ns=", NS, " ;;\n"]
           || {A, NS} <- lists:zip(terrain_lab_test_hosts:addresses(Hosts), terrain_lab_test_hosts:namespaces(Hosts))],
    [L1, L2, L3, L4] = terrain_lab_test_hosts:addresses(Hosts),
    Srun = ["#!/bin/sh\n"
            "# STAND-IN for SLURM's srun, written by terrain_lab_slurm_SUITE:\n"
            "# logs its arguments, then runs its command in the namespace of the host named by --nodelist.\n"
            "(IFS=\"$(printf '\\t')\"; printf '%s\\n' \"$*\") >> ", filename:join(Dir, "srun.log"), "\n"
            "host=\n"
            "for a in \"$@\"; do case \"$a\" in --nodelist=*) host=${a#--nodelist=} ;; esac; done\n"
            "while [ $# -gt 0 ]; do case \"$1\" in --*) shift ;; *) break ;; esac; done\n"
            "case \"$host\" in\n", Map,
            "  *) echo \"srun: error: no node $host in the allocation\" >&2; exit 1 ;;\n"
            "esac\n"
            "if [ -n \"$STANDIN_SRUN_HANG\" ]; then while :; do sleep 1; done; fi\n"
            "ip netns exec \"$ns\" \"$@\"\n"],
    Scontrol = ["#!/bin/sh\n"
                "# STAND-IN for SLURM's scontrol, written by terrain_lab_slurm_SUITE: 'show topology' prints a\n"
                "# tree topology in the format of SLURM's topology/tree plugin.\n"
                "[ \"$1 $2\" = 'show topology' ] || { echo \"scontrol stand-in: only 'show topology'\" >&2; exit 1; }\n"
                "if [ -n \"$STANDIN_SCONTROL_HANG\" ]; then while :; do sleep 1; done; fi\n"
                "echo 'SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=", L1, ",", L2, "'\n"
                "echo 'SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=", L3, ",", L4, "'\n"
                "echo 'SwitchName=spine Level=1 LinkSpeed=1 Nodes=", L1, ",", L2, ",", L3, ",", L4,
                " Switches=leaf[1-2]'\n"],
    Bins = [{both, [{"srun", Srun}, {"scontrol", Scontrol}]},
            {srun_only, [{"srun", Srun}]},
            {scontrol_only, [{"scontrol", Scontrol}]}],
    [begin
         BinDir = filename:join([Dir, "bin", atom_to_list(Name)]),
         ok = filelib:ensure_dir(filename:join(BinDir, "x")),
         [begin
              File = filename:join(BinDir, Script),
              ok = file:write_file(File, Text),
              ok = file:change_mode(File, 8#755)
          end || {Script, Text} <- Scripts],
         {Name, BinDir}
     end || {Name, Scripts} <- Bins].
