%% @private
%% @doc The SLURM of `terrain testbed up --slurm' (docs/TESTBED.md, "What up makes"):
%% munged with its own key and socket in the testbed's directory (the machine's munge
%% is left alone), slurmctld in this namespace as `SlurmctldHost=HOSTNAME(BRIDGE
%% ADDRESS)' on a free port, one slurmd per host (`slurmd -N P1' started in the
%% host's namespace with `nsenter --net', which keeps /sys and so the cgroup mount
%% that slurmd reads), slurm.conf and topology.conf (`topology/tree', read back by
%% `terrain_lab_slurm:parse_topology/1') written from the switches. Unix socket paths
%% are limited to 108 bytes, so munged's socket and the slurmd spool (slurmstepd's
%% sockets) go to /run/terrain-testbed-P, made here and recorded like everything
%% else (terrain_lab_testbed_record). {@link start/6} returns when `sinfo' shows
%% every node idle.
-module(terrain_lab_testbed_slurm).

%% API
-export([start/6,
         run_dir/1,
         sinfo/2]).

-import(terrain_lab_testbed_record, [sh/1]).
-import(terrain_lab_os, [shell_quote/1]).

-define(READY_MS, 30000).
-define(PORTS, lists:seq(16817, 16899, 2)).   % slurmctld's port: the first free one

%%--------------------------------------------------------------------
%% API

%% @doc Sockets and the slurmd spool: a short path of this testbed's own.
-spec run_dir(string()) -> file:filename().
run_dir(Prefix) ->
    "/run/terrain-testbed-" ++ Prefix.

%% @doc Starts munged, slurmctld and the slurmds of the testbed in `Dir' (each
%% recorded before it starts) and waits until every node is idle.
-spec start(file:filename(), string(), [#{name := binary(), address := binary(), atom() => term()}],
            [terrain_lab_slurm:switch()], string(), fun((iodata()) -> ok)) -> ok.
start(Dir, Prefix, Hosts, Switches, Net, Progress) ->
    Make = fun(Path) -> terrain_lab_testbed_record:make_dir(Dir, Path) end,
    _ = [Make(filename:join(Dir, D)) || D <- ["munge", "state", "log"]],
    ok = change_mode(filename:join(Dir, "munge"), 8#700),
    MungeKey = filename:join([Dir, "munge", "munge.key"]),
    ok = terrain_lab_testbed_record:write_file(Dir, MungeKey, crypto:strong_rand_bytes(1024)),
    ok = change_mode(MungeKey, 8#600),
    Munge = fun(F) -> filename:join([Dir, "munge", F]) end,
    %% sockets (munged's, slurmstepd's in the spool) need a short path: < 108 bytes
    Run = run_dir(Prefix),
    ok = Make(Run),
    ok = change_mode(Run, 8#700),
    ok = Make(filename:join(Run, "spool")),
    daemon(Dir, "munged", ["munged --force --socket=", shell_quote(filename:join(Run, "munge.socket")),
                           " --key-file=", shell_quote(MungeKey),
                           " --log-file=", shell_quote(Munge("munged.log")),
                           " --pid-file=", shell_quote(Munge("munged.pid")),
                           " --seed-file=", shell_quote(Munge("munged.seed"))],
           Munge("munged.pid")),
    Port = free_port(Prefix),
    ok = terrain_lab_testbed_record:write_file(Dir, filename:join(Dir, "slurm.conf"),
                                               slurm_conf(Dir, Prefix, Hosts, Net, Port)),
    ok = terrain_lab_testbed_record:write_file(Dir, filename:join(Dir, "topology.conf"), topology_conf(Switches)),
    Conf = shell_quote(filename:join(Dir, "slurm.conf")),
    PidFile = filename:join(Dir, "slurmctld.pid"),
    ok = terrain_lab_testbed_record:make(Dir, #{kind => file, path => PidFile}, fun() -> ok end),
    daemon(Dir, "slurmctld", ["slurmctld -i -f ", Conf], PidFile),
    _ = [daemon(Dir, "slurmd " ++ binary_to_list(N),
                ["nsenter --net=/var/run/netns/", N, " slurmd -f ", Conf, " -N ", N],
                filename:join([Run, "spool", "slurmd." ++ binary_to_list(N) ++ ".pid"])) || #{name := N} <- Hosts],
    await_idle(Dir, length(Hosts), erlang:monotonic_time(millisecond) + ?READY_MS),
    Progress(io_lib:format("SLURM up: slurmctld on ~ts:~b, ~b slurmd idle, partition ~ts; munged with its own key "
                           "and socket~n", [Net ++ ".1", Port, length(Hosts), Prefix])).

%% @doc `sinfo -h -N -o Format' against the testbed in `Dir'.
-spec sinfo(file:filename(), string()) -> {ok, string()} | {error, string()}.
sinfo(Dir, Format) ->
    case terrain_lab_testbed_record:command(["SLURM_CONF=", shell_quote(filename:join(Dir, "slurm.conf")),
                                             " sinfo -h -N -o ", shell_quote(Format)], 10000) of
        {ok, Out} -> {ok, Out};
        {error, {testbed, {command, _, _, Out}}} -> {error, string:trim(Out)};
        {error, Reason} -> {error, lists:flatten(terrain_lab_testbed:format_error(Reason))}
    end.

%%--------------------------------------------------------------------
%% Internal functions

%% A daemon, recorded (with its pid file) before it starts and with its pid and start
%% time once it runs: if a later step fails, or `up' is killed, down stops it.
daemon(Dir, Name, Line, PidFile) ->
    Comm = hd(string:split(lists:last(string:split(Name, "/", all)), " ")),
    terrain_lab_testbed_record:make(
      Dir, #{kind => process, name => Name, comm => Comm, pid_path => PidFile, daemon => true},
      fun() ->
              sh(Line),
              Pid = terrain_lab_testbed_record:pid_file(PidFile),
              case terrain_lab_testbed_record:process_id(Pid) of
                  none -> throw({testbed, {command, unicode:characters_to_list(Line), 1, Name ++ " exited at once"}});
                  Id -> [Id]
              end
      end).

change_mode(Path, Mode) ->
    case file:change_mode(Path, Mode) of
        ok -> ok;
        {error, Why} -> throw({testbed, {file, Path, Why}})
    end.

slurm_conf(Dir, Prefix, Hosts, Net, Port) ->
    {ok, Hostname} = inet:gethostname(),
    CPUs = erlang:system_info(logical_processors_available),
    J = fun(F) -> filename:join(Dir, F) end,
    Run = run_dir(Prefix),
    ["# Written by 'terrain testbed up --slurm' (docs/TESTBED.md); removed by 'terrain testbed down'.\n",
     "ClusterName=terrain", Prefix, "\n",
     "SlurmctldHost=", Hostname, "(", Net, ".1)\n",
     "SlurmctldPort=", integer_to_list(Port), "\nSlurmdPort=6818\n",
     "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=", filename:join(Run, "munge.socket"), "\n",
     "SlurmUser=root\nSlurmdUser=root\n",
     "StateSaveLocation=", J("state"), "\n",
     "SlurmdSpoolDir=", filename:join(Run, "spool/%n"), "\n",
     "SlurmctldPidFile=", J("slurmctld.pid"), "\nSlurmdPidFile=", filename:join(Run, "spool/slurmd.%n.pid"), "\n",
     "SlurmctldLogFile=", J("log/slurmctld.log"), "\nSlurmdLogFile=", J("log/slurmd.%n.log"), "\n",
     "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\nMpiDefault=none\n",
     "ReturnToService=2\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n",
     "TopologyPlugin=topology/tree\n",
     "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n",
     "SlurmctldTimeout=30\nSlurmdTimeout=30\nInactiveLimit=0\nKillWait=5\nMinJobAge=30\n",
     [["NodeName=", N, " NodeAddr=", A, " CPUs=", integer_to_list(CPUs), " State=UNKNOWN\n"]
      || #{name := N, address := A} <- Hosts],
     "PartitionName=", Prefix, " Nodes=", lists:join(",", [N || #{name := N} <- Hosts]),
     " Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n"].

%% topology.conf, as terrain_lab_slurm:parse_topology/1 reads it back.
topology_conf(Switches) ->
    Sorted = lists:sort(fun(#{level := A}, #{level := B}) -> A =< B end, Switches),
    ["# Written by 'terrain testbed up --slurm' from its switches (topology/tree).\n",
     [["SwitchName=", N, [[" Switches=", lists:join(",", Cs)] || Cs =/= []],
       [[" Nodes=", lists:join(",", Ns)] || Ns =/= []], "\n"]
      || #{name := N, nodes := Ns, switches := Cs} <- Sorted]].

await_idle(Dir, Count, Deadline) ->
    ok = terrain_lab_testbed_record:check_interrupt(),
    case sinfo(Dir, "%N %T") of
        {ok, Out} ->
            Lines = string:lexemes(Out, "\n"),
            case length([L || L <- Lines, lists:suffix(" idle", L)]) of
                Count -> ok;
                _ -> retry_idle(Dir, Count, Deadline, Lines)
            end;
        {error, Why} ->
            retry_idle(Dir, Count, Deadline, [Why])
    end.

retry_idle(Dir, Count, Deadline, Lines) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> throw({testbed, {slurm_not_ready, Lines}});
        false -> receive after 200 -> await_idle(Dir, Count, Deadline) end
    end.

%% slurmctld's port: the first free one of ?PORTS, searched from a place that depends
%% on the prefix (as the subnet), so that two testbeds made at once rarely race.
free_port(Prefix) ->
    Used = terrain_lab_testbed_record:output("ss", ["-Htln"]),
    {Before, After} = lists:split(erlang:phash2(Prefix, length(?PORTS)), ?PORTS),
    case [P || P <- After ++ Before, string:find(Used, ":" ++ integer_to_list(P) ++ " ") =:= nomatch,
               string:find(Used, ":" ++ integer_to_list(P + 1) ++ " ") =:= nomatch] of
        [P | _] -> P;
        [] -> throw({testbed, {command, "choose slurmctld's port", 1, "16817..16899 all in use"}})
    end.
