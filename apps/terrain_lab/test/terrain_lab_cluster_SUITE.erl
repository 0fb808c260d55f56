%% The local cluster launcher: parallel start of real peer nodes running terrain,
%% clean stop, no VM outliving its controller, and bad specs rejected.
-module(terrain_lab_cluster_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([sixteen_nodes_start_in_parallel_and_stop/0, sixteen_nodes_start_in_parallel_and_stop/1,
         nodes_follow_their_spec/0, nodes_follow_their_spec/1,
         peers_die_when_controller_is_killed/0, peers_die_when_controller_is_killed/1,
         peers_die_when_caller_exits/0, peers_die_when_caller_exits/1,
         failed_boot_leaves_nothing_running/0, failed_boot_leaves_nothing_running/1,
         invalid_specs_are_rejected/0, invalid_specs_are_rejected/1,
         no_cpu_controller_is_a_sentence_not_a_crash/0, no_cpu_controller_is_a_sentence_not_a_crash/1]).
%% logger handler (crash reports to the test process)
-export([log/2]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [sixteen_nodes_start_in_parallel_and_stop, nodes_follow_their_spec, peers_die_when_controller_is_killed,
     peers_die_when_caller_exits, failed_boot_leaves_nothing_running, invalid_specs_are_rejected,
     no_cpu_controller_is_a_sentence_not_a_crash].

init_per_testcase(Case, Config) ->
    [{prefix, "t" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:phash2(Case)) ++ "_"} | Config].

end_per_testcase(_Case, _Config) ->
    ok.

%%--------------------------------------------------------------------

sixteen_nodes_start_in_parallel_and_stop() ->
    [{doc, "16 nodes start in parallel, each runs terrain, and after stop every VM is gone."}].
sixteen_nodes_start_in_parallel_and_stop(Config) ->
    Spec = spec([{group, g1, #{latency => 100}, [{node, list_to_atom("n" ++ integer_to_list(I)), #{}} || I <- lists:seq(1, 8)]},
                 {group, g2, #{latency => 100}, [{node, list_to_atom("m" ++ integer_to_list(I)), #{}} || I <- lists:seq(1, 8)]}]),
    BeamsBefore = beam_count(),
    T0 = erlang:monotonic_time(millisecond),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => ?config(prefix, Config)}),
    StartMs = erlang:monotonic_time(millisecond) - T0,
    Nodes = terrain_lab:cluster_nodes(Cluster),
    BeamsUp = beam_count(),
    ?assertEqual(16, length(Nodes)),
    [?assertMatch({terrain, _, _}, lists:keyfind(terrain, 1, erpc:call(N, application, which_applications, [], 5000)))
     || #{node := N} <- Nodes],
    OsPids = [P || #{os_pid := P} <- Nodes],
    ?assert(lists:all(fun terrain_lab_os:alive/1, OsPids)),
    ok = terrain_lab:stop_cluster(Cluster),
    ?assertEqual([], [P || P <- OsPids, terrain_lab_os:alive(P)]),
    ?assertNot(is_process_alive(Cluster)),
    BeamsAfter = beam_count(),
    ct:pal("16 nodes started in ~b ms; beam.smp processes: before ~b, up ~b, after stop ~b",
           [StartMs, BeamsBefore, BeamsUp, BeamsAfter]),
    {comment, io_lib:format("start ~b ms; beam.smp ~b -> ~b -> ~b", [StartMs, BeamsBefore, BeamsUp, BeamsAfter])}.

nodes_follow_their_spec() ->
    [{doc, "Scheduler counts, extra VM args and attributes of the spec reach the nodes; paths are reported; "
      "the VMs run without erts_alloc and still have the attribute vm_memory_total."}].
nodes_follow_their_spec(Config) ->
    Spec = spec([{group, site, #{latency => 1000},
                  [{group, rack, #{}, [{node, a, #{schedulers => 1, args => ["-env", "TERRAIN_T", "yes"]}},
                                       {node, b, #{schedulers => 3, attrs => [{gpu, true}]}}]}]}]),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => ?config(prefix, Config)}),
    try
        [#{name := a, node := A, path := [site, rack], schedulers := 1},
         #{name := b, node := B, path := [site, rack], schedulers := 3}] = terrain_lab:cluster_nodes(Cluster),
        ?assertEqual(1, erpc:call(A, erlang, system_info, [schedulers_online], 5000)),
        ?assertEqual(3, erpc:call(B, erlang, system_info, [schedulers_online], 5000)),
        ?assertEqual("yes", erpc:call(A, os, getenv, ["TERRAIN_T"], 5000)),
        ?assertEqual({ok, [{gpu, true}]}, erpc:call(B, application, get_env, [terrain, attrs], 5000)),
        ?assertEqual({ok, []}, erpc:call(A, application, get_env, [terrain, attrs], 5000)),
        %% lab VMs run without erts_alloc (+Mea min): erlang:memory/1 raises notsup, and the
        %% built-in attribute vm_memory_total falls back to the VM's resident set
        ?assertError({exception, notsup, _}, erpc:call(A, erlang, memory, [total], 5000)),
        Memory = erpc:call(A, terrain, attr, [vm_memory_total], 5000),
        ?assert(is_integer(Memory) andalso Memory > 10000000 andalso Memory < 1000000000)
    after
        terrain_lab:stop_cluster(Cluster)
    end.

peers_die_when_controller_is_killed() ->
    [{doc, "kill -9 of the controlling VM: all of its cluster's VMs are gone within 5 seconds."}].
peers_die_when_controller_is_killed(Config) ->
    {ok, Controller, CtlNode} = peer:start_link(#{name => ?config(prefix, Config) ++ "ctl",
                                                  args => ["-pa" | code:get_path()]}),
    try
        Prefix = ?config(prefix, Config),
        Spec = spec([{group, g, #{}, [{node, list_to_atom("n" ++ integer_to_list(I)), #{}} || I <- lists:seq(1, 4)]}]),
        Self = self(),
        %% A process on the controller owns the cluster and stays alive.
        _ = erpc:call(CtlNode, erlang, spawn,
                      [fun() ->
                               {ok, C} = terrain_lab:start_cluster(Spec, #{prefix => Prefix}),
                               Self ! {cluster, terrain_lab:cluster_nodes(C), os:getpid()},
                               receive stop -> ok end
                       end], 5000),
        {Nodes, CtlOsPid} = receive {cluster, Ns, P} -> {Ns, P} after 60000 -> ct:fail(cluster_not_started) end,
        OsPids = [P || #{os_pid := P} <- Nodes],
        ?assert(lists:all(fun terrain_lab_os:alive/1, OsPids)),
        _ = os:cmd("kill -9 " ++ CtlOsPid),
        T0 = erlang:monotonic_time(millisecond),
        Left = terrain_lab_os:await_exit(OsPids, 5000),
        Ms = erlang:monotonic_time(millisecond) - T0,
        [terrain_lab_os:kill(P) || P <- Left],
        ?assertEqual([], Left),
        ct:pal("controller ~s killed; its ~b nodes were gone after ~b ms", [CtlOsPid, length(OsPids), Ms]),
        {comment, io_lib:format("nodes gone ~b ms after kill -9", [Ms])}
    after
        catch peer:stop(Controller)
    end.

peers_die_when_caller_exits() ->
    [{doc, "The cluster is linked to its caller: when the caller exits, the nodes halt."}].
peers_die_when_caller_exits(Config) ->
    Self = self(),
    Spec = spec([{node, a, #{}}, {node, b, #{}}]),
    Owner = spawn(fun() ->
                          {ok, C} = terrain_lab:start_cluster(Spec, #{prefix => ?config(prefix, Config)}),
                          Self ! {nodes, terrain_lab:cluster_nodes(C)},
                          receive die -> exit(owner_gone) end
                  end),
    Nodes = receive {nodes, Ns} -> Ns after 60000 -> ct:fail(cluster_not_started) end,
    Owner ! die,
    ?assertEqual([], terrain_lab_os:await_exit([P || #{os_pid := P} <- Nodes], 5000)).

failed_boot_leaves_nothing_running() ->
    [{doc, "If one node cannot start terrain, start fails with a reason and no node is left."}].
failed_boot_leaves_nothing_running(Config) ->
    %% Node b halts as soon as it has booted.
    Spec = spec([{node, a, #{}}, {node, b, #{args => ["-s", "erlang", "halt"]}}]),
    Before = peers_named(?config(prefix, Config)),
    process_flag(trap_exit, true),
    Result = terrain_lab:start_cluster(Spec, #{prefix => ?config(prefix, Config), boot_timeout => 8000}),
    ?assertMatch({error, _}, Result),
    {error, Reason} = Result,
    Message = lists:flatten(io_lib:format("~ts", [terrain_lab:format_error(Reason)])),
    ct:pal("start_cluster -> ~ts", [Message]),
    ?assertNotEqual(nomatch, string:find(Message, "node b")),
    ?assertEqual(Before, peers_named(?config(prefix, Config))).

invalid_specs_are_rejected() ->
    [{doc, "Bad specs and bad options are refused before any node starts."}].
invalid_specs_are_rejected(Config) ->
    Dir = ?config(priv_dir, Config),
    Cases = [{"empty.cluster", "{cluster, c, #{}}.\n{group, g, #{}, []}.\n"},
             {"dup.cluster", "{cluster, c, #{}}.\n{node, a, #{}}.\n{node, a, #{}}.\n"},
             {"key.cluster", "{cluster, c, #{}}.\n{node, a, #{colour => red}}.\n"},
             {"value.cluster", "{cluster, c, #{}}.\n{group, g, #{latency => -3}, [{node, a, #{}}]}.\n"},
             {"syntax.cluster", "{cluster, c, #{}}\n{node, a, #{}}.\n"}],
    Messages = [begin
                    File = filename:join(Dir, Name),
                    ok = file:write_file(File, Text),
                    {error, Reason} = terrain_lab:start_cluster(File, #{}),
                    lists:flatten(io_lib:format("~ts", [terrain_lab:format_error(Reason)]))
                end || {Name, Text} <- Cases],
    [ct:pal("~ts", [M]) || M <- Messages],
    Expected = ["the group is empty", "node name a appears more than once", "unknown option colour",
                "bad value for latency: -3", "syntax error"],
    [?assertNotEqual(nomatch, string:find(M, E)) || {M, E} <- lists:zip(Messages, Expected)],
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, c, #{}}, {node, a, #{}}], undefined),
    ?assertEqual({error, {cluster_option, boot_timeout, -1}}, terrain_lab:start_cluster(Spec, #{boot_timeout => -1})),
    ?assertEqual({error, {cluster_option, colour, red}}, terrain_lab:start_cluster(Spec, #{colour => red})),
    %% env and code_path are refused as the VM refuses them (terrain_lab_vm:option_checks/0),
    %% before any VM starts
    ?assertEqual({error, {cluster_option, env, [bad]}}, terrain_lab:start_cluster(Spec, #{env => [bad]})),
    ?assertEqual({error, {cluster_option, code_path, [dir]}}, terrain_lab:start_cluster(Spec, #{code_path => [dir]})).

no_cpu_controller_is_a_sentence_not_a_crash() ->
    [{doc, "Where no CPU controller is mounted (the cgroup mount pointed at an empty directory), a spec with "
           "'cpu' fails with {cgroup, {not_writable, _}} and a sentence naming the directory, before any VM "
           "starts, and no crash report is logged."}].
no_cpu_controller_is_a_sentence_not_a_crash(Config) ->
    Mount = filename:join(?config(priv_dir, Config), "no_cgroup"),
    ok = filelib:ensure_path(Mount),
    Prefix = ?config(prefix, Config),
    Spec = spec([{node, a, #{cpu => 0.5}}, {node, b, #{}}]),
    ok = application:set_env(terrain_lab, cgroup_mount, Mount),
    ok = logger:add_handler(crash_reports, ?MODULE, #{config => #{pid => self()}}),
    try
        Result = terrain_lab:start_cluster(Spec, #{prefix => Prefix}),
        ?assertMatch({error, {cgroup, {not_writable, _}}}, Result),
        {error, Reason} = Result,
        Message = lists:flatten(io_lib:format("~ts", [terrain_lab:format_error(Reason)])),
        ct:pal("start_cluster -> ~ts", [Message]),
        ?assertNotEqual(nomatch, string:find(Message, "is mounted at " ++ Mount)),
        ?assertEqual([], peers_named(Prefix)),
        %% a crash report is logged by the launcher's process after start_cluster has its answer
        ok = await_launchers_gone(),
        ?assertEqual([], crash_reports())
    after
        ok = logger:remove_handler(crash_reports),
        ok = application:unset_env(terrain_lab, cgroup_mount)
    end.

%%--------------------------------------------------------------------

-spec log(logger:log_event(), logger:handler_config()) -> term().
log(#{msg := {report, #{label := {proc_lib, crash}}}} = Event, #{config := #{pid := Pid}}) ->
    Pid ! {crash_report, Event};
log(_Event, _Config) ->
    ok.

%% Waits until no launcher process (initial call terrain_lab_cluster:init/1) is left; its
%% 'DOWN' comes after anything it logged on its way out.
await_launchers_gone() ->
    Monitors = [monitor(process, P) || P <- processes(),
                                       proc_lib:translate_initial_call(P) =:= {terrain_lab_cluster, init, 1}],
    lists:foreach(fun(Ref) -> receive {'DOWN', Ref, process, _, _} -> ok after 10000 -> ct:fail(launcher_alive) end
                  end, Monitors).

crash_reports() ->
    receive {crash_report, Event} -> [Event | crash_reports()] after 0 -> [] end.

spec(Terms) ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, t, #{latency => 5000}} | Terms], undefined),
    Spec.

beam_count() ->
    list_to_integer(string:trim(os:cmd("pgrep -c beam.smp"))).

%% VMs whose command line carries the test's node name prefix.
peers_named(Prefix) ->
    lists:sort(string:lexemes(os:cmd("pgrep -f -- '-sname " ++ Prefix ++ "' || true"), "\n")).
