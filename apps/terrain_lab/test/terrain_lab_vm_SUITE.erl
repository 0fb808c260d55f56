%% The launcher's contract with real VMs: one wait under one deadline for several VMs,
%% a VM that misses the deadline reported and killed, a peer that misses it stopped,
%% and a VM found again from its state record and stopped.
-module(terrain_lab_vm_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2, end_per_testcase/2]).
-export([missed_deadline_is_reported_and_killed/0, missed_deadline_is_reported_and_killed/1,
         peer_that_misses_the_deadline_is_stopped/0, peer_that_misses_the_deadline_is_stopped/1,
         recorded_vm_is_stopped_by_its_record/0, recorded_vm_is_stopped_by_its_record/1]).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [missed_deadline_is_reported_and_killed, peer_that_misses_the_deadline_is_stopped,
     recorded_vm_is_stopped_by_its_record].

init_per_suite(Config) ->
    ok = terrain_lab_dist:ensure_started(#{}),   % pings need a distributed VM
    Config.

end_per_suite(_Config) ->
    ok.

init_per_testcase(Case, Config) ->
    Dir = filename:join(?config(priv_dir, Config), atom_to_list(Case)),
    ok = filelib:ensure_dir(filename:join([Dir, "nodes", "x"])),
    ok = file:write_file(filename:join(Dir, "cookie"), atom_to_list(erlang:get_cookie())),
    [{dir, Dir}, {prefix, "v" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:phash2(Case)) ++ "_"} | Config].

end_per_testcase(_Case, Config) ->
    %% whatever a failed case left: the VMs named by the pid files of its directory
    [terrain_lab_os:kill(OsPid) || File <- filelib:wildcard(filename:join([?config(dir, Config), "nodes", "*.pid"])),
                                   {ok, OsPid, _} <- [terrain_lab_vm:read_pid_file(File)]],
    ok.

%%--------------------------------------------------------------------

missed_deadline_is_reported_and_killed() ->
    [{doc, "Two detached VMs under one deadline: the one whose own args never let it go distributed is reported "
           "(not_reachable: it runs but does not answer) and its OS process is gone; the other is up."}].
missed_deadline_is_reported_and_killed(Config) ->
    Good = detached(good, Config, []),
    Stuck = detached(stuck, Config, ["-eval", "receive after infinity -> ok end."]),
    {ok, GoodVm} = terrain_lab_vm:start(Good),
    {ok, StuckVm} = terrain_lab_vm:start(Stuck),
    Deadline = erlang:monotonic_time(millisecond) + 15000,
    [GoodResult, StuckResult] = terrain_lab_vm:await_boot([GoodVm, StuckVm], Deadline),
    ?assertEqual({error, not_reachable}, StuckResult),
    {ok, StuckPid, _} = terrain_lab_vm:read_pid_file(pid_file(stuck, Config)),
    ?assertEqual([], terrain_lab_os:await_exit([StuckPid], 5000)),
    ?assertMatch({ok, #{node := _}}, GoodResult),
    {ok, #{node := GoodNode} = Up} = GoodResult,
    ?assertEqual(GoodNode, maps:get(node, Good)),
    ?assertEqual(pong, net_adm:ping(GoodNode)),
    ?assertEqual(stopped, terrain_lab_vm:stop(Up, 5000)),
    {ok, GoodPid, _} = terrain_lab_vm:read_pid_file(pid_file(good, Config)),
    ?assertNot(terrain_lab_os:alive(GoodPid)).

peer_that_misses_the_deadline_is_stopped() ->
    [{doc, "A linked peer whose deadline has passed is reported as boot_timeout and its control process is gone; "
           "its node never answers."}].
peer_that_misses_the_deadline_is_stopped(Config) ->
    process_flag(trap_exit, true),
    Node = list_to_atom(?config(prefix, Config) ++ "late"),
    {ok, Vm} = terrain_lab_vm:start(#{transport => local_linked, name => late, node => Node,
                                      cookie => erlang:get_cookie()}),
    Peer = terrain_lab_vm:peer(Vm),
    ?assertEqual([{error, boot_timeout}], terrain_lab_vm:await_boot([Vm], erlang:monotonic_time(millisecond))),
    ?assertNot(is_process_alive(Peer)),
    ?assertEqual(pang, net_adm:ping(terrain_lab_dist:node_name(?config(prefix, Config), late))).

recorded_vm_is_stopped_by_its_record() ->
    [{doc, "A detached VM found again from a cluster.json-style record (as terrain down reads it) is alive, is "
           "stopped by its name, and is then neither alive nor running."}].
recorded_vm_is_stopped_by_its_record(Config) ->
    Options = detached(kept, Config, []),
    {ok, Vm} = terrain_lab_vm:start(Options),
    [{ok, _}] = terrain_lab_vm:await_boot([Vm], erlang:monotonic_time(millisecond) + 15000),
    {ok, OsPid, _} = terrain_lab_vm:read_pid_file(pid_file(kept, Config)),
    Record = #{<<"name">> => <<"kept">>, <<"node">> => atom_to_binary(maps:get(node, Options)),
               <<"os_pid">> => list_to_binary(OsPid)},
    Recorded = terrain_lab_vm:from_record(Record, ?config(dir, Config)),
    ?assert(terrain_lab_vm:alive(Recorded, 5000)),
    ?assertEqual(stopped, terrain_lab_vm:stop(Recorded, 5000)),
    ?assertNot(terrain_lab_vm:alive(Recorded, 5000)),
    ?assertNot(terrain_lab_os:alive(OsPid)).

%%--------------------------------------------------------------------

detached(Name, Config, Args) ->
    #{transport => local_detached, name => Name, node => terrain_lab_dist:node_name(?config(prefix, Config), Name),
      dir => ?config(dir, Config), args => Args}.

pid_file(Name, Config) ->
    terrain_lab_cluster_state:pid_file(?config(dir, Config), Name).
