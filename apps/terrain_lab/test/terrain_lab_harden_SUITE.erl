%% The second hardening pass through the real escript: the resource guard, the one
%% output rule, write failures on a read-only and a full file system, partial results
%% on SIGTERM, the state directory's lock, usage errors, sentences instead of exit 70,
%% a closed stdout, non-ASCII input. Each case runs the commands as a user would and
%% checks exit status, stdout and stderr.
-module(terrain_lab_harden_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([usage_errors_exit_2/0, usage_errors_exit_2/1,
         sigint_keeps_the_experiment_runs_finished_before/0, sigint_keeps_the_experiment_runs_finished_before/1,
         sigint_keeps_the_emas_seconds_measured/0, sigint_keeps_the_emas_seconds_measured/1,
         resource_guard_refuses_before_anything_starts/0, resource_guard_refuses_before_anything_starts/1,
         bad_input_is_a_sentence_not_exit_70/0, bad_input_is_a_sentence_not_exit_70/1,
         outputs_and_inputs_are_never_overwritten/0, outputs_and_inputs_are_never_overwritten/1,
         read_only_and_full_file_systems/0, read_only_and_full_file_systems/1,
         collective_bench_keeps_partial_results_on_sigterm/0, collective_bench_keeps_partial_results_on_sigterm/1,
         concurrent_up_on_one_state_dir/0, concurrent_up_on_one_state_dir/1,
         closed_stdout_exits_141/0, closed_stdout_exits_141/1,
         non_ascii_input_is_echoed_as_utf8/0, non_ascii_input_is_echoed_as_utf8/1,
         sigterm_stops_the_report_child/0, sigterm_stops_the_report_child/1,
         sigterm_removes_the_cgroups_of_a_started_cluster/0, sigterm_removes_the_cgroups_of_a_started_cluster/1,
         emas_scaling_keeps_partial_results_on_sigterm/0, emas_scaling_keeps_partial_results_on_sigterm/1,
         events_record_keeps_partial_results_on_sigterm/0, events_record_keeps_partial_results_on_sigterm/1,
         emas_keeps_the_seconds_measured_on_sigterm/0, emas_keeps_the_seconds_measured_on_sigterm/1,
         sigint_removes_the_cgroups_of_a_started_cluster/0, sigint_removes_the_cgroups_of_a_started_cluster/1,
         sigkill_removes_the_cgroups_of_a_started_cluster/0, sigkill_removes_the_cgroups_of_a_started_cluster/1]).

suite() ->
    [{timetrap, {minutes, 4}}].

all() ->
    [usage_errors_exit_2, resource_guard_refuses_before_anything_starts, bad_input_is_a_sentence_not_exit_70,
     outputs_and_inputs_are_never_overwritten, read_only_and_full_file_systems,
     collective_bench_keeps_partial_results_on_sigterm, concurrent_up_on_one_state_dir, closed_stdout_exits_141,
     non_ascii_input_is_echoed_as_utf8, sigterm_stops_the_report_child, sigterm_removes_the_cgroups_of_a_started_cluster,
     emas_scaling_keeps_partial_results_on_sigterm, events_record_keeps_partial_results_on_sigterm,
     emas_keeps_the_seconds_measured_on_sigterm,
     sigint_removes_the_cgroups_of_a_started_cluster, sigkill_removes_the_cgroups_of_a_started_cluster,
     sigint_keeps_the_experiment_runs_finished_before, sigint_keeps_the_emas_seconds_measured].

init_per_suite(Config) ->
    Dir = ?config(priv_dir, Config),
    Two = filename:join(Dir, "two.cluster"),
    ok = file:write_file(Two, "{cluster, two, #{}}.\n{node, a, #{schedulers => 1}}.\n{node, b, #{schedulers => 1}}.\n"),
    Binary = filename:join(Dir, "wt40.txt"),          % a name that gives the job count, bytes that are not text
    ok = file:write_file(Binary, <<6, 15, 151, 247, 154, 216, 8, 223, 0, 255>>),
    Short = filename:join(Dir, "short.config"),
    ok = file:write_file(Short, "{duration, 2}.\n{warmup, 0}.\n{concurrent, 1}.\n{operations, [{rpc, 1}]}.\n"),
    [{two, Two}, {binary, Binary}, {short_config, Short} | Config].

end_per_suite(Config) ->
    Config.

%%--------------------------------------------------------------------
%% Helpers

escript(Config, Args) ->
    terrain_lab_test_escript:run(?config(priv_dir, Config), Args).

%% Runs Args in Dir (the working directory: where a crash dump would land).
escript_in(Dir, Args) ->
    Line = lists:flatten(["cd ", Dir, " && \"$T\" ", lists:join(" ", [quote(A) || A <- Args])]),
    shell(Dir, Line).

shell(Dir, Line) ->
    terrain_lab_test_escript:shell(Dir, Line).

quote(Arg) ->
    ["'", string:replace(Arg, "'", "'\\''", all), "'"].

found(Text, Part) ->
    string:find(Text, Part) =/= nomatch.

%% {Status, Stderr} of a command that must print nothing on stdout.
quiet(Config, Args) ->
    {Status, Out, Err} = escript(Config, Args),
    ?assertEqual({Args, ""}, {Args, Out}),
    ?assertNot(found(Err, "internal error")),
    {Status, Err}.

mount_tmpfs(Dir, Options) ->
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    case os:cmd("mount -t tmpfs -o " ++ Options ++ " tmpfs " ++ Dir ++ " 2>&1; echo $?") of
        "0\n" -> ok;
        Other -> {skip, "cannot mount a tmpfs (root needed): " ++ Other}
    end.

umount(Dir) ->
    _ = os:cmd("umount " ++ Dir),
    ok.

%%--------------------------------------------------------------------
%% Cases

usage_errors_exit_2() ->
    [{doc, "A missing option marked (required), a value out of range or not a name, a size listed twice: "
           "exit 2 with the usage hint, nothing started."}].
usage_errors_exit_2(Config) ->
    Two = ?config(two, Config),
    Dir = ?config(priv_dir, Config),
    Cases = [{["collective", "bench", "--out", filename:join(Dir, "c0")], "--spec is required"},
             {["collective", "bench", "--spec", Two, "--sizes", "0", "--out", filename:join(Dir, "c0")],
              "option '--sizes' expects integers >= 1, got '0'"},
             {["events", "record", "--workload", "windtunnel", "--out", filename:join(Dir, "e0"), "--scope-rate", "0"],
              "expects a number > 0 and <= 1000, got '0'"},
             {["events", "record", "--workload", "windtunnel", "--out", filename:join(Dir, "e0"), "--scope-rate",
               "1e300"], "expects a number > 0 and <= 1000, got '1e300'"},
             {["events", "record", "--out", filename:join(Dir, "e0")], "record needs --workload"},
             {["aco", ?config(binary, Config), "--local"], "--instance is required"},
             {["bench", "sweep", ?config(short_config, Config), "--spec", Two], "--nodes is required"},
             {["bench", "sweep", ?config(short_config, Config), "--spec", Two, "--nodes", "2,2"], "'2,2'"},
             {["emas", "--time-ms", "99999999999999999", "--out", filename:join(Dir, "m0")],
              "expects an integer from 1 to 4294967295"},
             {["up", "--prefix", "bad prefix", "--state-dir", filename:join(Dir, "s0"), Two], "ASCII letters"}],
    [begin
         {Status, Err} = quiet(Config, Args),
         ?assertEqual({Args, 2}, {Args, Status}),
         ?assert(found(Err, Expected)),
         ?assert(found(Err, "--help' for usage"))
     end || {Args, Expected} <- Cases],
    ?assertNot(filelib:is_dir(filename:join(Dir, "s0"))).

resource_guard_refuses_before_anything_starts() ->
    [{doc, "Values that would exhaust memory, the process table or the atom table are refused with the estimate "
           "before a VM or a process starts (well under the time a node takes to boot), exit 1; no crash dump "
           "in the working directory."}].
resource_guard_refuses_before_anything_starts(Config) ->
    Dir = ?config(priv_dir, Config),
    Two = ?config(two, Config),
    Work = filename:join(Dir, "work_guard"),
    ok = filelib:ensure_dir(filename:join(Work, "x")),
    Big = filename:join(Dir, "big.config"),
    ok = file:write_file(Big, "{duration, 2}.\n{argument_size, 10000000000}.\n{operations, [{rpc, 1}]}.\n"),
    Hosts = filename:join(Dir, "one.hosts"),
    ok = file:write_file(Hosts, "localhost\n"),
    Cases = [{["collective", "bench", "--spec", Two, "--sizes", "100000000000000", "--out", filename:join(Dir, "g1")],
              "mostly for --sizes"},
             {["collective", "bench", "--spec", Two, "--members-per-node", "100000000", "--out", filename:join(Dir, "g2")],
              "--members-per-node asks for 100000000 processes"},
             {["bench", "--spec", Two, Big], "mostly for argument_size"},
             {["emas", "--population", "100000000", "--out", filename:join(Dir, "g3")], "mostly for --population"},
             {["emas", "--islands", "1000000", "--out", filename:join(Dir, "g4")], "--islands asks for 1000000"},
             {["events", "record", "--workload", "windtunnel", "--spec", Two, "--workers-per-scheduler", "100000",
               "--out", filename:join(Dir, "g5")], "mostly for --workers-per-scheduler"},
             {["probe", "--nodes", "x1@nohost,x2@nohost", "--payload", "100000000000", "--strategy", "concurrent",
               "--state-dir", filename:join(Dir, "g8"), "--runs-dir", filename:join(Dir, "g9")], "mostly for --payload"},
             {["write-test", "--targets", Dir, "--stripe", "100000000", "--out", filename:join(Dir, "g10.csv")],
              "mostly for --stripe"},
             {["up", "--hosts", Hosts, "--per-host", "100000000", "--state-dir", filename:join(Dir, "g6")],
              "100000000 nodes are more than terrain starts"},
             {["up", "--hosts", Hosts, "--per-host", "20000", "--spec-out", filename:join(Dir, "g7.spec"),
               "--state-dir", filename:join(Dir, "g7")],
              %% the guard's own estimate: a VM plus its connections in a full mesh of 20000
              lists:flatten(io_lib:format("20000 nodes need about ~b MB",
                                          [20000 * terrain_lab_guard:vm_memory_mb(20000, true)]))}],
    [begin
         T0 = erlang:monotonic_time(millisecond),
         {Status, Out, Err} = escript_in(Work, Args),
         Ms = erlang:monotonic_time(millisecond) - T0,
         ?assertEqual({Args, 1, ""}, {Args, Status, Out}),
         ?assert(found(Err, Expected)),
         ?assert(found(Err, "nothing was started")),
         ?assertNot(found(Err, "starting")),           % no node, no cluster was started
         ?assert(Ms < 10000)
     end || {Args, Expected} <- Cases],
    ?assertEqual([], [F || F <- filelib:wildcard(filename:join(Dir, "g*")), filelib:is_dir(F)]),
    ?assertNot(filelib:is_regular(filename:join(Work, "erl_crash.dump"))).

bad_input_is_a_sentence_not_exit_70() ->
    [{doc, "The inputs that ended in exit 70 with a stack (or an escript crash, 127) are sentences with exit 1 "
           "(2 for SLURM's environment): a binary hosts file, a 300-character host name, a binary instance file "
           "for aco and experiment, --nodes naming no node, SLURM_JOB_NODELIST with a host twice."}].
bad_input_is_a_sentence_not_exit_70(Config) ->
    Dir = ?config(priv_dir, Config),
    Binary = ?config(binary, Config),
    Long = filename:join(Dir, "long.hosts"),
    ok = file:write_file(Long, [lists:duplicate(300, $h), "\n"]),
    Cases = [{["up", "--hosts", Binary, "--state-dir", filename:join(Dir, "b1")], 1, "is not text (UTF-8)"},
             {["up", "--hosts", Long, "--state-dir", filename:join(Dir, "b2")], 1, "has 300 characters"},
             {["aco", Binary, "--instance", "1", "--local"], 1, "is not an OR-Library SMTWTP file: it is not text"},
             {["experiment", "attributes", "--instances", Binary, "--out", filename:join(Dir, "b3"), "--quick"], 1,
              "it is not text"},
             {["experiment", "attributes", "--instances", "/nonexist", "--out", filename:join(Dir, "b4")], 1,
              "cannot read instance file /nonexist: no such file"},
             {["bench", "--nodes", ",,,", ?config(short_config, Config)], 1, "--nodes ',,,' names no node"}],
    [begin
         {Status, Err} = quiet(Config, Args),
         ?assertEqual({Args, Code}, {Args, Status}),
         ?assert(found(Err, Expected))
     end || {Args, Code, Expected} <- Cases],
    %% a failed start leaves no empty --out directory
    ?assertNot(filelib:is_dir(filename:join(Dir, "b3"))),
    ?assertNot(filelib:is_dir(filename:join(Dir, "b4"))),
    Slurm = "SLURM_JOB_NODELIST='n1,n1' SLURM_JOB_ID=1 SLURM_TASKS_PER_NODE='1(x2)' \"$T\" up --slurm --state-dir "
        ++ filename:join(Dir, "b5"),
    {2, "", SlurmErr} = shell(Dir, Slurm),
    ?assert(found(SlurmErr, "SLURM_JOB_NODELIST='n1,n1' lists n1 twice")).

outputs_and_inputs_are_never_overwritten() ->
    [{doc, "report --out RUN/manifest.json, events export --out D/events.jsonl, up --hosts over an existing "
           "FILE.spec, events record --out an existing directory, tune --out into a missing directory: "
           "refused before anything runs, the files unchanged."}].
outputs_and_inputs_are_never_overwritten(Config) ->
    Dir = ?config(priv_dir, Config),
    Run = filename:join(Dir, "run"),
    Manifest = filename:join(Run, "manifest.json"),
    Events = filename:join(Run, "events.jsonl"),
    ok = filelib:ensure_dir(Manifest),
    ManifestText = <<"{\"format\": \"terrain.manifest/1\", \"kind\": \"events\", \"outputs\": "
                     "[{\"kind\": \"events\", \"file\": \"events.jsonl\"}]}\n">>,
    ok = file:write_file(Manifest, ManifestText),
    ok = file:write_file(Events, <<"{\"format\": \"terrain.events/1\"}\n">>),
    Hosts = filename:join(Dir, "edited.hosts"),
    ok = file:write_file(Hosts, "localhost\n"),
    ok = file:write_file(Hosts ++ ".spec", "%% edited by hand\n"),
    {1, E1} = quiet(Config, ["report", Run, "--out", Manifest]),
    ?assert(found(E1, "is one of this command's inputs")),
    {1, E2} = quiet(Config, ["events", "export", Run, "--format", "jsonl", "--out", Events]),
    ?assert(found(E2, "is one of this command's inputs")),
    {1, E3} = quiet(Config, ["events", "export", Run, "--format", "jsonl"]),     % the default is the input
    ?assert(found(E3, "is one of this command's inputs")),
    {1, E4} = quiet(Config, ["up", "--hosts", Hosts, "--state-dir", filename:join(Dir, "o1")]),
    ?assert(found(E4, Hosts ++ ".spec exists already")),
    {1, E5} = quiet(Config, ["events", "record", "--workload", "windtunnel", "--spec", ?config(two, Config),
                             "--out", Run]),
    ?assert(found(E5, Run ++ " exists already")),
    ?assertNot(found(E5, "starting")),
    {1, E6} = quiet(Config, ["collective", "tune", "--spec", ?config(two, Config), "--out", "/nonexist_terrain/x.json"]),
    ?assert(found(E6, "cannot write /nonexist_terrain: no such file or directory")),
    ?assertNot(found(E6, "starting")),
    ?assertEqual({ok, ManifestText}, file:read_file(Manifest)),
    ?assertEqual({ok, <<"{\"format\": \"terrain.events/1\"}\n">>}, file:read_file(Events)),
    ?assertEqual({ok, <<"%% edited by hand\n">>}, file:read_file(Hosts ++ ".spec")).

read_only_and_full_file_systems() ->
    [{doc, "Per command family, a read-only and a full tmpfs (64 KB) as the directory written to: up's state, "
           "bench --out (after its nodes measured), events export --out, testbed up --dir: exit 1 with 'cannot write FILE: ...', "
           "no stack, nothing on stdout, no temporary file and no cookie left."}].
read_only_and_full_file_systems(Config) ->
    Dir = ?config(priv_dir, Config),
    Ro = filename:join(Dir, "ro"),
    Full = filename:join(Dir, "full"),
    case {mount_tmpfs(Ro, "ro,size=64k"), mount_tmpfs(Full, "size=64k")} of
        {ok, ok} ->
            try
                _ = os:cmd("head -c 60k /dev/zero > " ++ Full ++ "/filler"),
                read_only_and_full(Config, Ro, Full)
            after
                umount(Ro), umount(Full)
            end;
        {Skip, _} when Skip =/= ok -> umount(Ro), umount(Full), Skip;
        {_, Skip} -> umount(Ro), umount(Full), Skip
    end.

read_only_and_full(Config, Ro, Full) ->
    Two = ?config(two, Config),
    Prefix = "hd" ++ os:getpid() ++ "_",
    {1, E1} = quiet(Config, ["up", "--prefix", Prefix, "--state-dir", filename:join(Ro, "state"), Two]),
    ?assert(found(E1, "cannot write " ++ filename:join(Ro, "state") ++ ": read-only file system")),
    {1, E2} = quiet(Config, ["up", "--prefix", Prefix, "--state-dir", filename:join(Full, "state"), Two]),
    ?assert(found(E2, "no space left on device")),
    ?assertEqual(["filler"], element(2, file:list_dir(Full))),     % no cookie, no state directory
    {1, E3} = quiet(Config, ["bench", "--spec", Two, ?config(short_config, Config), "--out", filename:join(Ro, "b")]),
    ?assert(found(E3, "read-only file system")),
    {1, E4} = quiet(Config, ["bench", "--spec", Two, ?config(short_config, Config), "--out", filename:join(Full, "b")]),
    ?assert(found(E4, "no space left on device")),
    Run = filename:join(?config(priv_dir, Config), "export_run"),
    ok = filelib:ensure_dir(filename:join(Run, "x")),
    Line = <<"{\"name\": \"send\", \"node\": \"a@h\", \"time_us\": 1, \"padding\": \"",
             (binary:copy(<<"x">>, 200))/binary, "\"}\n">>,
    ok = file:write_file(filename:join(Run, "events.jsonl"),
                         [<<"{\"format\": \"terrain.events/1\"}\n">>, binary:copy(Line, 400)]),
    {1, E5} = quiet(Config, ["events", "export", Run, "--format", "jsonl", "--out", filename:join(Full, "e.jsonl")]),
    ?assert(found(E5, "cannot write " ++ filename:join(Full, "e.jsonl") ++ ": no space left on device")),
    {1, E6} = quiet(Config, ["events", "export", Run, "--format", "jsonl", "--out", filename:join(Ro, "e.jsonl")]),
    ?assert(found(E6, "cannot write " ++ Ro ++ ": read-only file system")),
    ?assertEqual([], [F || F <- filelib:wildcard(filename:join(Full, "**")), filename:extension(F) =:= ".tmp"]),
    ?assertNot(filelib:is_regular(filename:join(Full, "e.jsonl"))),
    %% testbed up: its directory is refused before any namespace or bridge is made
    TbPrefix = "h" ++ integer_to_list(list_to_integer(os:getpid()) rem 1000),
    {1, E7} = quiet(Config, ["testbed", "up", "--hosts", "2", "--prefix", TbPrefix, "--dir", filename:join(Ro, "tb")]),
    ?assert(found(E7, "cannot write " ++ filename:join(Ro, "tb") ++ ": read-only file system")),
    ?assertNot(lists:member("tbr" ++ TbPrefix, string:lexemes(os:cmd("ls /sys/class/net"), "\n"))).

collective_bench_keeps_partial_results_on_sigterm() ->
    [{doc, "SIGTERM in the middle of collective bench: exit 1 naming how many measurements were kept, "
           "collective.json and manifest.json written with \"partial\": true, no node left."}].
collective_bench_keeps_partial_results_on_sigterm(Config) ->
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "coll_partial"),
    Line = lists:flatten(["\"$T\" collective bench --spec ", ?config(two, Config), " --sizes 8,1024,65536 --rounds 3000 ",
                          "--out ", Out, " & P=$!; ",
                          %% wait for a measurement to finish (collective.json exists), then SIGTERM
                          "for i in $(seq 1 600); do [ -f ", Out, "/collective.json ] && break; sleep 0.1; done; ",
                          "kill -TERM $P; wait $P"]),
    {Status, _Out, Err} = shell(Dir, Line),
    ?assertEqual(1, Status),
    ?assert(found(Err, "interrupted (SIGTERM)")),
    ?assert(found(Err, "(marked partial)")),
    {ok, Doc} = terrain_json:read_file(filename:join(Out, "collective.json")),
    ?assertEqual(true, maps:get(<<"partial">>, Doc)),
    ?assert(length(maps:get(<<"results">>, Doc)) >= 1),
    ?assert(filelib:is_regular(filename:join(Out, "manifest.json"))),
    ?assertEqual([], string:lexemes(os:cmd("pgrep -f 'coll_a@' ; true"), "\n")).

concurrent_up_on_one_state_dir() ->
    [{doc, "Two up on one state directory at once: one starts the cluster, the other is refused naming the "
           "first's OS pid; down leaves no lock behind."}].
concurrent_up_on_one_state_dir(Config) ->
    Dir = ?config(priv_dir, Config),
    State = filename:join(Dir, "lock_state"),
    Two = ?config(two, Config),
    Line = lists:flatten(["\"$T\" up --prefix lk1_", os:getpid(), "_ --state-dir ", State, " ", Two,
                          " >/dev/null 2>", Dir, "/up1.err & P=$!; ",
                          "\"$T\" up --prefix lk2_", os:getpid(), "_ --state-dir ", State, " ", Two,
                          " >/dev/null 2>", Dir, "/up2.err; S2=$?; wait $P; S1=$?; echo $S1 $S2"]),
    {0, Statuses, _} = shell(Dir, Line),
    try
        ?assert(lists:member(string:trim(Statuses), ["0 1", "1 0"])),
        {ok, E1} = file:read_file(filename:join(Dir, "up1.err")),
        {ok, E2} = file:read_file(filename:join(Dir, "up2.err")),
        ?assert(found(binary_to_list(<<E1/binary, E2/binary>>), "another terrain command (OS pid "))
    after
        {0, _, _} = escript(Config, ["down", "--state-dir", State])
    end,
    ?assertNot(filelib:is_regular(filename:join(State, "up.lock"))).

closed_stdout_exits_141() ->
    [{doc, "A command whose results cannot be written (the reader closed the pipe at once, or /dev/full) exits "
           "141, even when it printed one line (it exited 0 and lost the results)."}].
closed_stdout_exits_141(Config) ->
    Dir = ?config(priv_dir, Config),
    {0, "141\n", _} = shell(Dir, "\"$T\" hostlist a | (exec 0<&-; sleep 1); echo ${PIPESTATUS[0]}"),
    {0, "141\n", _} = shell(Dir, "\"$T\" hostlist 'a[1-3]' >/dev/full; echo $?"),
    {0, "a1\na2\n0\n", _} = shell(Dir, "\"$T\" hostlist 'a[1-2]' | cat; echo ${PIPESTATUS[0]}").

non_ascii_input_is_echoed_as_utf8() ->
    [{doc, "hostlist echoes non-ASCII input as UTF-8 (not Latin-1 bytes); a non-ASCII --prefix is refused at "
           "once (exit 2), before any node is started."}].
non_ascii_input_is_echoed_as_utf8(Config) ->
    {2, "", Err} = escript(Config, ["hostlist", "ünï[1-2]"]),
    ?assert(found(Err, "'ü' is not allowed here")),
    ?assert(found(Err, "ünï[1-2]")),
    T0 = erlang:monotonic_time(millisecond),
    {2, "", Err2} = escript(Config, ["up", "--prefix", "ünï_", "--state-dir",
                                     filename:join(?config(priv_dir, Config), "u1"), ?config(two, Config)]),
    ?assert(erlang:monotonic_time(millisecond) - T0 < 10000),
    ?assert(found(Err2, "got 'ünï_'")).

sigterm_stops_the_report_child() ->
    [{doc, "SIGTERM during report stops its terrain-analysis child with it (it used to write the page 8 s "
           "later): a stand-in terrain-analysis in the working directory's .venv sleeps 3 s, then writes."}].
sigterm_stops_the_report_child(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "report_child"),
    Fake = filename:join([Dir, ".venv", "bin", "terrain-analysis"]),
    Mark = filename:join(Dir, "written"),
    ok = filelib:ensure_dir(Fake),
    ok = file:write_file(Fake, ["#!/bin/sh\nsleep 3\necho late > ", Mark, "\n"]),
    ok = file:change_mode(Fake, 8#755),
    Run = filename:join(Dir, "run"),
    ok = filelib:ensure_dir(filename:join(Run, "x")),
    Line = lists:flatten(["cd ", Dir, " && { \"$T\" report ", Run, " & P=$!; sleep 1.5; kill -TERM $P; wait $P; ",
                          "echo $?; sleep 3; }"]),
    {0, Status, Err} = shell(Dir, Line),
    ?assertEqual("143\n", Status),
    ?assert(found(Err, "terminated (SIGTERM)")),
    ?assertNot(filelib:is_regular(Mark)).

sigterm_removes_the_cgroups_of_a_started_cluster() ->
    [{doc, "SIGTERM to a command that started a cluster with CPU emulation (emas --spec, as experiment "
           "attributes does) removes the cluster's cgroups with its VMs (they were left behind)."}].
sigterm_removes_the_cgroups_of_a_started_cluster(Config) ->
    Dir = ?config(priv_dir, Config),
    Cluster = "hcg" ++ os:getpid(),
    Group = filename:join(["/sys/fs/cgroup/cpu/terrain", Cluster]),
    case filelib:is_dir("/sys/fs/cgroup/cpu") andalso os:cmd("id -u") =:= "0\n" of
        false ->
            {skip, "needs root and the cgroup v1 cpu controller"};
        true ->
            Spec = filename:join(Dir, "cg.cluster"),
            ok = file:write_file(Spec, ["{cluster, ", Cluster, ", #{}}.\n",
                                        "{node, a, #{schedulers => 1, cpu_per_scheduler => 0.5}}.\n",
                                        "{node, b, #{schedulers => 1, cpu_per_scheduler => 0.5}}.\n"]),
            Line = lists:flatten(["\"$T\" emas --spec ", Spec, " --time-ms 60000 --out ", filename:join(Dir, "cg_out"),
                                  " & P=$!; for i in $(seq 1 600); do [ -d ", Group, " ] && break; sleep 0.1; done; ",
                                  "sleep 1; [ -d ", Group, " ] && echo had_group; kill -TERM $P; wait $P; echo $?"]),
            {0, Out, _Err} = shell(Dir, Line),
            ?assertEqual("had_group\n1\n", Out),
            ?assertNot(filelib:is_dir(Group))
    end.

sigint_removes_the_cgroups_of_a_started_cluster() ->
    [{doc, "SIGINT (Ctrl-C, which an escript cannot handle) to a command that started a cluster with CPU "
           "emulation: exit 130, the cluster's VMs exit and the cleanup sentinel removes its cgroups "
           "(they were left behind)."}].
sigint_removes_the_cgroups_of_a_started_cluster(Config) ->
    killed_cli_leaves_no_cgroup(Config, "INT", "130").

sigkill_removes_the_cgroups_of_a_started_cluster() ->
    [{doc, "SIGKILL to a command that started a cluster with CPU emulation: exit 137, the cluster's VMs exit "
           "and the cleanup sentinel removes its cgroups."}].
sigkill_removes_the_cgroups_of_a_started_cluster(Config) ->
    killed_cli_leaves_no_cgroup(Config, "KILL", "137").

%% `set -m': a background job of a shell without job control ignores SIGINT.
killed_cli_leaves_no_cgroup(Config, Signal, Status) ->
    Dir = ?config(priv_dir, Config),
    Cluster = "hcg" ++ string:lowercase(Signal) ++ os:getpid(),
    Group = filename:join(["/sys/fs/cgroup/cpu/terrain", Cluster]),
    case filelib:is_dir("/sys/fs/cgroup/cpu") andalso os:cmd("id -u") =:= "0\n" of
        false ->
            {skip, "needs root and the cgroup v1 cpu controller"};
        true ->
            Spec = filename:join(Dir, Cluster ++ ".cluster"),
            ok = file:write_file(Spec, ["{cluster, ", Cluster, ", #{}}.\n",
                                        "{node, a, #{schedulers => 1, cpu_per_scheduler => 0.5}}.\n",
                                        "{node, b, #{schedulers => 1, cpu_per_scheduler => 0.5}}.\n"]),
            Line = lists:flatten(["set -m; \"$T\" emas --spec ", Spec, " --time-ms 60000 --out ",
                                  filename:join(Dir, Cluster ++ "_out"),
                                  " & P=$!; for i in $(seq 1 600); do [ -d ", Group, "/emas${P}_b ] && break; sleep 0.1; done; ",
                                  "sleep 1; [ -d ", Group, "/emas${P}_b/scheduler1 ] && echo had_group; ",
                                  "kill -", Signal, " $P; wait $P; echo $?; ",
                                  %% the sentinel's deadline for the VMs to exit is 30 s
                                  "for i in $(seq 1 450); do [ -d ", Group, " ] || break; sleep 0.1; done; ",
                                  "[ -d ", Group, " ] && echo group_left; ",
                                  "for i in $(seq 1 100); do pgrep -f \"emas${P}_\" >/dev/null || break; sleep 0.1; done; ",
                                  "pgrep -f \"emas${P}_\" >/dev/null && echo vm_left; echo end"]),
            {0, Out, _Err} = shell(Dir, Line),
            ?assertEqual("had_group\n" ++ Status ++ "\nend\n", Out),
            ?assertNot(filelib:is_dir(Group))
    end.

sigint_keeps_the_experiment_runs_finished_before() ->
    [{doc, "SIGINT (which the CLI cannot catch) during experiment attributes, once a run has finished: exit 130, "
           "attributes.csv keeps the finished runs and summary.json says partial (the files are written after "
           "every run), and the cleanup sentinel removes the experiment's cgroups (before: nothing kept)."}].
sigint_keeps_the_experiment_runs_finished_before(Config) ->
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "attributes_sigint"),
    Group = "/sys/fs/cgroup/cpu/terrain/exp_attributes",
    case filelib:is_dir("/sys/fs/cgroup/cpu") andalso os:cmd("id -u") =:= "0\n" of
        false ->
            {skip, "needs root and the cgroup v1 cpu controller"};
        true ->
            Csv = filename:join(Out, "attributes.csv"),
            Line = lists:flatten(["set -m; \"$T\" experiment attributes --quick --out ", Out, " & P=$!; ",
                                  "for i in $(seq 1 1200); do [ \"$(wc -l < ", Csv, " 2>/dev/null)\" -ge 2 ] && break; ",
                                  "sleep 0.1; done; kill -INT $P; wait $P; echo $?; ",
                                  "for i in $(seq 1 450); do [ -d ", Group, " ] || break; sleep 0.1; done; ",
                                  "[ -d ", Group, " ] && echo group_left; echo end"]),
            {0, Said, _Err} = shell(Dir, Line),
            ?assertEqual("130\nend\n", Said),
            {ok, Text} = file:read_file(Csv),
            [<<"ants,run,placement,seconds">> | Rows] = binary:split(Text, <<"\n">>, [global, trim_all]),
            ?assert(length(Rows) >= 1),
            {ok, Summary} = terrain_json:read_file(filename:join(Out, "summary.json")),
            ?assertMatch(#{<<"partial">> := true}, Summary),
            ?assertNot(filelib:is_dir(Group))
    end.

emas_keeps_the_seconds_measured_on_sigterm() ->
    [{doc, "SIGTERM during one emas run (after 3 s of 60): exit 1 naming the seconds kept and the best fitness so "
           "far; emas.csv with a row per second and island, manifest.json marking it partial, no summary.json "
           "(nothing was kept before, exit 143)."}].
emas_keeps_the_seconds_measured_on_sigterm(Config) ->
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "emas_partial"),
    Err = filename:join(Dir, "emas.err"),
    Line = lists:flatten(["\"$T\" emas --islands 2 --population 20 --dimensions 10 --time-ms 60000 --out ", Out,
                          " 2>", Err, " & P=$!; ",
                          "for i in $(seq 1 600); do grep -q 'running EMAS' ", Err, " && break; sleep 0.1; done; ",
                          "sleep 3.5; kill -TERM $P; wait $P; echo $?"]),
    {0, Status, _} = shell(Dir, Line),
    ?assertEqual("1\n", Status),
    {ok, ErrText} = file:read_file(Err),
    ?assertMatch({match, _}, re:run(ErrText, "interrupted \\(SIGTERM\\); the [1-9][0-9]* seconds measured before are "
                                             "kept in .*emas.csv .*, best fitness so far -[0-9]")),
    {ok, Csv} = file:read_file(filename:join(Out, "emas.csv")),
    [Header | Lines] = string:lexemes(Csv, "\n"),
    ?assertEqual(<<"second,island,reproductions,fights,deaths,migrations,best_fitness">>, Header),
    ?assert(length(Lines) >= 2 andalso length(Lines) rem 2 =:= 0),
    {ok, #{<<"outputs">> := [#{<<"file">> := <<"emas.csv">>, <<"parameters">> := #{<<"partial">> := true}}]}} =
        terrain_json:read_file(filename:join(Out, "manifest.json")),
    ?assertNot(filelib:is_regular(filename:join(Out, "summary.json"))).

sigint_keeps_the_emas_seconds_measured() ->
    [{doc, "SIGINT (which the CLI cannot catch) during one emas run, after 3 s of 60: exit 130, and emas.csv holds "
           "the seconds measured, marked partial in manifest.json (the rows are written as they come; before, "
           "nothing was kept)."}].
sigint_keeps_the_emas_seconds_measured(Config) ->
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "emas_sigint"),
    Csv = filename:join(Out, "emas.csv"),
    Line = lists:flatten(["set -m; \"$T\" emas --islands 2 --population 20 --dimensions 10 --time-ms 60000 --out ", Out,
                          " 2>/dev/null & P=$!; ",
                          "for i in $(seq 1 600); do [ \"$(wc -l < ", Csv, " 2>/dev/null)\" -ge 5 ] && break; sleep 0.1; done; ",
                          "kill -INT $P; wait $P; echo $?"]),
    {0, Status, _} = shell(Dir, Line),
    ?assertEqual("130\n", Status),
    {ok, Text} = file:read_file(Csv),
    [<<"second,island,reproductions,fights,deaths,migrations,best_fitness">> | Lines] = string:lexemes(Text, "\n"),
    ?assert(length(Lines) >= 4 andalso length(Lines) rem 2 =:= 0),
    {ok, #{<<"outputs">> := [#{<<"file">> := <<"emas.csv">>, <<"parameters">> := #{<<"partial">> := true}}]}} =
        terrain_json:read_file(filename:join(Out, "manifest.json")).

emas_scaling_keeps_partial_results_on_sigterm() ->
    [{doc, "SIGTERM during emas scaling (after two runs): exit 1 naming the runs kept, scaling.json with "
           "\"partial\": true and the configurations measured, manifest.json (nothing was kept before)."}].
emas_scaling_keeps_partial_results_on_sigterm(Config) ->
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "scaling_partial"),
    Err = filename:join(Dir, "scaling.err"),
    Line = lists:flatten(["\"$T\" emas scaling --quick --out ", Out, " 2>", Err, " & P=$!; ",
                          "for i in $(seq 1 600); do [ \"$(grep -c '+S' ", Err, ")\" -ge 2 ] && break; sleep 0.1; done; ",
                          "kill -TERM $P; wait $P; echo $?"]),
    {0, Status, _} = shell(Dir, Line),
    ?assertEqual("1\n", Status),
    {ok, ErrText} = file:read_file(Err),
    ?assert(found(binary_to_list(ErrText), "interrupted (SIGTERM); the ")),
    {ok, Doc} = terrain_json:read_file(filename:join(Out, "scaling.json")),
    ?assertEqual(true, maps:get(<<"partial">>, Doc)),
    ?assert(length(maps:get(<<"rows">>, Doc)) >= 1),
    ?assert(filelib:is_regular(filename:join(Out, "manifest.json"))).

events_record_keeps_partial_results_on_sigterm() ->
    [{doc, "SIGTERM while the wind tunnel runs: exit 1 naming the events kept; events.jsonl (header "
           "\"partial\": true), findings.json (\"partial\": true) and manifest.json are written (the directory "
           "stayed empty)."}].
events_record_keeps_partial_results_on_sigterm(Config) ->
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "events_partial"),
    Err = filename:join(Dir, "events.err"),
    Line = lists:flatten(["\"$T\" events record --workload windtunnel --spec ", ?config(two, Config),
                          " --workers 2 --columns 8 --slice-rows 1 --work-per-cell 20000 --steps 1000000 --no-views",
                          " --out ", Out, " >/dev/null 2>", Err, " & P=$!; ",
                          "for i in $(seq 1 600); do grep -q 'wind tunnel on' ", Err, " && break; sleep 0.1; done; ",
                          "sleep 2; kill -TERM $P; wait $P; echo $?"]),
    {0, Status, _} = shell(Dir, Line),
    ?assertEqual("1\n", Status),
    {ok, ErrText} = file:read_file(Err),
    ?assert(found(binary_to_list(ErrText), "events recorded before are kept in " ++ Out ++ " (marked partial)")),
    {ok, Events} = file:read_file(filename:join(Out, "events.jsonl")),
    [Header | _] = binary:split(Events, <<"\n">>),
    ?assertMatch({ok, #{<<"partial">> := true}}, terrain_json:decode(Header)),
    ?assertMatch({ok, #{<<"partial">> := true}}, terrain_json:read_file(filename:join(Out, "findings.json"))),
    ?assert(filelib:is_regular(filename:join(Out, "manifest.json"))).
