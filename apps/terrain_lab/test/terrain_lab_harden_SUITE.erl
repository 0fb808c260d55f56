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
         sigkill_removes_the_cgroups_of_a_started_cluster/0, sigkill_removes_the_cgroups_of_a_started_cluster/1,
         testbed_leaves_every_planted_object_alone/0, testbed_leaves_every_planted_object_alone/1,
         testbed_options_are_refused_before_anything_is_made/0, testbed_options_are_refused_before_anything_is_made/1,
         two_testbed_up_with_one_prefix/0, two_testbed_up_with_one_prefix/1,
         testbed_down_ends_the_processes_of_a_namespace_deleted_from_outside/0,
         testbed_down_ends_the_processes_of_a_namespace_deleted_from_outside/1,
         a_cyclic_topology_conf_makes_no_testbed/0, a_cyclic_topology_conf_makes_no_testbed/1]).

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
     sigint_keeps_the_experiment_runs_finished_before, sigint_keeps_the_emas_seconds_measured,
     testbed_leaves_every_planted_object_alone, testbed_options_are_refused_before_anything_is_made,
     two_testbed_up_with_one_prefix, testbed_down_ends_the_processes_of_a_namespace_deleted_from_outside,
     a_cyclic_topology_conf_makes_no_testbed].

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
             {["events", "record", "--workload", "windtunnel", "--spec", Two, "--workers-per-scheduler", "1000",
               "--steps", "100000", "--out", filename:join(Dir, "g5")], "mostly for --workers-per-scheduler"},
             %% a lab node's process limit (+P 65536), not this VM's (262,144): 70000 or more workers on one node
             {["events", "record", "--workload", "windtunnel", "--spec", Two, "--workers-per-scheduler", "70000",
               "--out", filename:join(Dir, "g11")], "--workers-per-scheduler asks for"},
             %% (--payload itself has a range now, so the guard is shown with the samples' memory)
             {["probe", "--nodes", "x1@nohost,x2@nohost", "--messages", "1000000", "--batches", "100000",
               "--strategy", "concurrent", "--state-dir", filename:join(Dir, "g8"), "--runs-dir", filename:join(Dir, "g9")],
              "mostly for --batches x --messages"},
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
    Run = filename:join(Dir, "harden_run"),
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
    ?assertNot(lists:member("tbr" ++ TbPrefix, string:lexemes(os:cmd("ls /sys/class/net"), "\n"))),
    %% on the full one its record is refused: a sentence naming the file, nothing left (not an Erlang term)
    {1, E8} = quiet(Config, ["testbed", "up", "--hosts", "2", "--prefix", TbPrefix, "--dir", filename:join(Full, "tb")]),
    ?assert(found(E8, "cannot write " ++ filename:join(Full, "tb") ++ "/")),
    ?assert(found(E8, ": no space left on device")),
    ?assertNot(lists:member("tb", element(2, file:list_dir(Full)))),
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

%%--------------------------------------------------------------------
%% terrain testbed: own only what it made, bounded options, one prefix at a time

testbed_leaves_every_planted_object_alone() ->
    [{doc, "Objects planted next to testbeds - a file, a non-empty directory of mode 1777, a device node, a bridge "
           "and a veth-like interface named as a testbed's, namespaces named as its hosts with a process named sshd "
           "in them, an sshd-named process here, a file put into the testbed's directory - survive refused ups "
           "(--dir of each, a taken bridge or namespace), an up and its down, and an up stopped by SIGTERM."}].
testbed_leaves_every_planted_object_alone(Config) ->
    with_testbed_root(fun() -> planted(Config) end).

planted(Config) ->
    W = filename:join(?config(priv_dir, Config), "planted"),
    [P, Q, R] = [tb_prefix(L) || L <- "pqr"],
    ok = file:make_dir(W),
    try
        Planted = plant(W, P, Q, R),
        check_planted(Planted),
        Refused = [{["--dir", filename:join(W, "precious.txt")], "precious.txt exists already and is not a testbed's"},
                   {["--dir", filename:join(W, "mydata")], "mydata exists already and is not a testbed's"},
                   {["--dir", filename:join(W, "nulldev")], "nulldev exists already and is not a testbed's"}],
        [?assertEqual({1, true}, tb_refused(Config, ["--prefix", P | Args], Text)) || {Args, Text} <- Refused],
        ?assertEqual({1, true}, tb_refused(Config, ["--prefix", Q, "--dir", filename:join(W, "q")],
                                           "a network interface tbr" ++ Q ++ " exists already")),
        ?assertEqual({1, true}, tb_refused(Config, ["--prefix", R, "--dir", filename:join(W, "r")],
                                           "a network namespace " ++ R ++ "2 exists already")),
        check_planted(Planted),
        planted_up_and_down(Config, W, P, Planted),
        planted_interrupted_up(W, P, Planted)
    after
        unplant(W, P, Q, R),
        [quiet(Config, ["testbed", "down", "--dir", filename:join(W, D)]) || D <- ["p", "p3"],
                                                                             filelib:is_dir(filename:join(W, D))]
    end.

planted_up_and_down(Config, W, P, Planted) ->
    Dir = filename:join(W, "p"),
    {0, Hosts, _} = escript(Config, ["testbed", "up", "--hosts", "2", "--prefix", P, "--dir", Dir]),
    ?assertEqual(2, length(string:lexemes(Hosts, "\n"))),
    check_planted(Planted),
    %% another up of the prefix while it is up: refused, and the first is whole
    ?assertEqual({1, true}, tb_refused(Config, ["--prefix", P, "--dir", filename:join(W, "p2")],
                                       "a network namespace " ++ P ++ "1 exists already")),
    {0, Status, _} = escript(Config, ["testbed", "status", "--dir", Dir]),
    ?assertEqual(2, length(string:split(Status, "sshd epmd", all)) - 1),
    ok = file:write_file(filename:join(Dir, "user.txt"), "the user's\n"),
    {0, Down, _} = escript(Config, ["testbed", "down", "--dir", Dir]),
    ?assert(found(Down, "directory " ++ Dir ++ " kept: it holds 1 entries the testbed did not make (user.txt)")),
    ?assertEqual({ok, <<"the user's\n">>}, file:read_file(filename:join(Dir, "user.txt"))),
    ?assertEqual([], testbed_left(P) -- [P ++ "9", "tv" ++ P ++ "9"]),     % the planted ones
    check_planted(Planted).

%% SIGTERM once up has made its first host: everything it made is removed again.
planted_interrupted_up(W, P, Planted) ->
    Dir = filename:join(W, "p3"),
    Made = "'\"kind\":\"namespace\",\"name\":\"" ++ P ++ "[0-9]*\",\"state\":\"made\"'",
    Line = lists:flatten(["\"$T\" testbed up --hosts 3 --prefix ", P, " --dir ", Dir, " & P=$!; ",
                          "for i in $(seq 1 600); do grep -q ", Made, " ", Dir, "/made.jsonl 2>/dev/null && break; ",
                          "sleep 0.02; done; kill -TERM $P; wait $P"]),
    {Status, _, Err} = shell(W, Line),
    ct:pal("up stopped by SIGTERM: exit ~b~n~ts", [Status, Err]),
    ?assertEqual(1, Status),
    ?assert(found(Err, "interrupted (SIGTERM); everything 'testbed up' had made was removed again")),
    ?assertNot(filelib:is_file(Dir)),
    ?assertEqual([], testbed_left(P) -- [P ++ "9", "tv" ++ P ++ "9"]),     % the planted ones
    check_planted(Planted).

testbed_options_are_refused_before_anything_is_made() ->
    [{doc, "Hosts over 250 by --topology (N, AxB, A,B, a file of 119,999 hosts), a --topology that is a directory "
           "or missing, an empty or huge --rates, a bad --prefix for status/env/down, a --dir with a space or "
           "non-ASCII: exit 2 (1 for the files) at once with a short sentence, and no namespace or bridge made."}].
testbed_options_are_refused_before_anything_is_made(Config) ->
    with_testbed_root(fun() -> refused_options(Config) end).

refused_options(Config) ->
    Dir = ?config(priv_dir, Config),
    P = tb_prefix($o),
    Big = filename:join(Dir, "bigline.conf"),
    ok = file:write_file(Big, ["SwitchName=s2 Nodes=", lists:join(",", [P ++ integer_to_list(I)
                                                                         || I <- lists:seq(1, 119999)]), "\n"]),
    Many = filename:join(Dir, "many.conf"),
    ok = file:write_file(Many, ["SwitchName=s1 Nodes=", P, "[1-300]\n"]),
    Up = fun(Args) -> ["testbed", "up", "--prefix", P | Args] end,
    Cases = [{Up(["--topology", "100000x100000"]), 2, "more than 250000 hosts; a testbed has at most 250"},
             {Up(["--topology", "1000000"]), 2, "a testbed has at most 250 (one /24)"},
             {Up(["--topology", "251"]), 2, "--topology 251: 251 hosts"},
             {Up(["--hosts", "2", "--topology", "300000"]), 2, "a testbed has at most 250"},
             {Up(["--topology", "200,51"]), 2, "251 hosts"},
             {Up(["--topology", Big]), 1, "larger than 1048576 bytes"},
             {Up(["--topology", Many]), 2, "300 hosts; a testbed has at most 250"},
             {Up(["--topology", Dir]), 1, "it is a directory, not a topology.conf file"},
             {Up(["--topology", "missing.conf"]), 1, "cannot read missing.conf: no such file or directory"},
             {Up(["--hosts", "2", "--rates", ""]), 2, "option '--rates' expects 1 to 16 link speeds"},
             {Up(["--hosts", "2", "--rates", ",,"]), 2, "got ',,'"},
             {Up(["--hosts", "2", "--rates", "99999999999999999999"]), 2, "each from 1 to 100000"},
             {Up(["--hosts", "1", "--dir", filename:join(Dir, "a b")]), 2, "option '--dir' expects a path of ASCII"},
             {Up(["--hosts", "1", "--dir", filename:join(Dir, "é")]), 2, "option '--dir' expects a path of ASCII"}]
        ++ [{["testbed", Action, "--prefix", "A B"], 2, "option '--prefix' expects 1 to 8 lower-case letters"}
            || Action <- ["status", "env", "down"]],
    [begin
         {Status, Err} = quiet(Config, Args),
         ?assertEqual({Args, Code}, {Args, Status}),
         ?assert(found(Err, Expected)),
         ?assert(length(Err) < 400)
     end || {Args, Code, Expected} <- Cases],
    ?assertEqual([], testbed_left(P)).

two_testbed_up_with_one_prefix() ->
    [{doc, "Two testbed up with one prefix at once (one in the default directory, one in another): one makes "
           "the testbed, the other is refused (the prefix's lock, or the names taken) and leaves it whole; down "
           "then leaves nothing."}].
two_testbed_up_with_one_prefix(Config) ->
    with_testbed_root(fun() -> two_ups(Config) end).

two_ups(Config) ->
    W = ?config(priv_dir, Config),
    P = tb_prefix($c),
    Other = filename:join(W, "race2"),
    Line = lists:flatten(["\"$T\" testbed up --hosts 2 --prefix ", P, " >/dev/null 2>", W, "/race1.err & A=$!; ",
                          "\"$T\" testbed up --hosts 2 --prefix ", P, " --dir ", Other, " >/dev/null 2>", W,
                          "/race2.err & B=$!; wait $A; echo $? > ", W, "/race1.rc; ",
                          "wait $B; echo $? > ", W, "/race2.rc"]),
    {0, _, _} = shell(W, Line),
    Read = fun(F) -> {ok, B} = file:read_file(filename:join(W, F)), string:trim(binary_to_list(B)) end,
    Results = [{Read("race1.rc"), Read("race1.err")}, {Read("race2.rc"), Read("race2.err")}],
    ct:pal("two ups: ~p", [Results]),
    try
        ?assertEqual(["0", "1"], lists:sort([C || {C, _} <- Results])),
        [{_, Loser}] = [R || {"1", _} = R <- Results],
        ?assert(found(Loser, "is running (OS pid") orelse found(Loser, "exists already")),
        Winner = case Results of [{"0", _}, _] -> terrain_lab_testbed:default_dir(P); _ -> Other end,
        {0, Status, _} = escript(Config, ["testbed", "status", "--dir", Winner]),
        ?assertEqual(2, length(string:split(Status, "sshd epmd", all)) - 1),
        {0, _, _} = escript(Config, ["testbed", "down", "--dir", Winner]),
        ?assertEqual([], testbed_left(P))
    after
        [quiet(Config, ["testbed", "down", "--dir", D]) || D <- [terrain_lab_testbed:default_dir(P), Other],
                                                           filelib:is_dir(D)]
    end.

testbed_down_ends_the_processes_of_a_namespace_deleted_from_outside() ->
    [{doc, "A host's namespace deleted with 'ip netns del' while its sshd and epmd hold it: status says so, and "
           "down ends those recorded processes (by pid and start time) and the veth goes with them."}].
testbed_down_ends_the_processes_of_a_namespace_deleted_from_outside(Config) ->
    with_testbed_root(fun() -> deleted_namespace(Config) end).

deleted_namespace(Config) ->
    P = tb_prefix($d),
    Dir = filename:join(?config(priv_dir, Config), "deleted_ns"),
    {0, _, _} = escript(Config, ["testbed", "up", "--hosts", "2", "--prefix", P, "--dir", Dir]),
    Host = P ++ "2",
    Pids = [binary_to_list(Pid) || #{<<"name">> := N, <<"state">> := <<"made">>, <<"id">> := #{<<"pid">> := Pid}}
                                       <- made_lines(Dir), lists:suffix(" " ++ Host, binary_to_list(N))],
    ?assertEqual(2, length(Pids)),
    "" = os:cmd("ip netns del " ++ Host),
    {0, Status, _} = escript(Config, ["testbed", "status", "--dir", Dir]),
    ?assert(found(Status, "namespace deleted from outside; still running in it: sshd epmd")),
    {0, Down, _} = escript(Config, ["testbed", "down", "--dir", Dir]),
    ct:pal("down:~n~ts", [Down]),
    ?assertEqual([], [Pid || Pid <- Pids, terrain_lab_os:alive(Pid)]),
    ?assertEqual([], terrain_lab_os:await_exit(Pids, 0)),
    ?assert(wait_until(fun() -> testbed_left(P) =:= [] end, 5000)).

a_cyclic_topology_conf_makes_no_testbed() ->
    [{doc, "topology.conf with a switch loop, an unknown switch or a duplicate switch (the one topology.conf "
           "reader refuses them): testbed up exits 1 naming the file, and no namespace or bridge is made."}].
a_cyclic_topology_conf_makes_no_testbed(Config) ->
    with_testbed_root(fun() -> cyclic_topology(Config) end).

cyclic_topology(Config) ->
    Dir = ?config(priv_dir, Config),
    P = tb_prefix($l),
    Files = [{"loop.conf", ["SwitchName=s1 Switches=s2 Nodes=", P, "1\nSwitchName=s2 Switches=s1 Nodes=", P, "2\n"]},
             {"unknown.conf", ["SwitchName=root Switches=s1,sX\nSwitchName=s1 Nodes=", P, "1,", P, "2\n"]},
             {"dup.conf", ["SwitchName=s1 Nodes=", P, "1,", P, "2\nSwitchName=s2 Nodes=", P, "2,", P, "3\n",
                           "SwitchName=s1 Nodes=", P, "4\nSwitchName=root Switches=s1,s2\n"]}],
    Cyclic = filename:join(Dir, "cyclic"),
    try
        [begin
             File = filename:join(Dir, Name),
             ok = file:write_file(File, Text),
             {Status, _, Err} = escript(Config, ["testbed", "up", "--topology", File, "--prefix", P, "--dir", Cyclic]),
             ?assertEqual({Name, 1}, {Name, Status}),
             ?assert(found(Err, File ++ ": ")),
             ?assertEqual([], testbed_left(P))
         end || {Name, Text} <- Files]
    after
        _ = filelib:is_dir(Cyclic) andalso escript(Config, ["testbed", "down", "--dir", Cyclic])
    end.

%% Testbed helpers

with_testbed_root(Fun) ->
    case terrain_lab_testbed:available(false) of
        ok -> Fun();
        {error, Why} -> {skip, lists:flatten(terrain_lab_testbed:format_error(Why))}
    end.

%% A prefix of this run's own: `h', a letter, the OS pid's last digits.
tb_prefix(Letter) ->
    [$h, Letter | integer_to_list(list_to_integer(os:getpid()) rem 10000)].

tb_refused(Config, Args, Text) ->
    {Status, Err} = quiet(Config, ["testbed", "up", "--hosts", "2" | Args]),
    ct:pal("testbed up ~ts: exit ~b ~ts", [lists:join(" ", Args), Status, Err]),
    {Status, found(Err, Text)}.

%% What of the testbed of prefix P is on this machine: its namespaces, bridge, veths.
testbed_left(P) ->
    Namespaces = [N || N <- string:lexemes(os:cmd("ip netns list | cut -d' ' -f1"), "\n"), is_host_of(N, P)],
    Links = [L || L <- string:lexemes(os:cmd("ls /sys/class/net"), "\n"),
                  L =:= "tbr" ++ P orelse is_host_of(lists:nthtail(min(2, length(L)), L), P) andalso
                                          lists:prefix("tv", L)],
    Namespaces ++ Links.

is_host_of(Name, P) ->
    lists:prefix(P, Name) andalso length(Name) > length(P)
        andalso lists:all(fun(C) -> C >= $0 andalso C =< $9 end, lists:nthtail(length(P), Name)).

made_lines(Dir) ->
    {ok, Bin} = file:read_file(filename:join(Dir, "made.jsonl")),
    [M || L <- binary:split(Bin, <<"\n">>, [global]), L =/= <<>>, {ok, M} <- [terrain_json:decode(L)]].

wait_until(Fun, Ms) when Ms =< 0 -> Fun();
wait_until(Fun, Ms) -> Fun() orelse begin timer:sleep(100), wait_until(Fun, Ms - 100) end.

%% The objects: a file, a non-empty directory of mode 1777, a device node, a bridge
%% named as testbed Q's, an interface and a namespace named as testbed P's ninth host,
%% a namespace named as testbed R's second host, a process named sshd in each
%% namespace and one here.
plant(W, P, Q, R) ->
    File = filename:join(W, "precious.txt"),
    ok = file:write_file(File, "data\n"),
    Data = filename:join(W, "mydata"),
    ok = filelib:ensure_dir(filename:join([Data, "sub", "x"])),
    ok = file:write_file(filename:join(Data, "notes.txt"), "important\n"),
    "" = os:cmd("chmod 1777 " ++ Data),
    Dev = filename:join(W, "nulldev"),
    "" = os:cmd("mknod -m 666 " ++ Dev ++ " c 1 3"),
    "" = os:cmd("ip link add tbr" ++ Q ++ " type bridge && ip link add tv" ++ P ++ "9 type bridge"),
    Sshd = filename:join(W, "sshd"),                  % a copy of sleep: its processes are named sshd
    {ok, _} = file:copy(os:find_executable("sleep"), Sshd),
    ok = file:change_mode(Sshd, 8#755),
    Spaces = [R ++ "2", P ++ "9"],
    Procs = [start_planted(W, Sshd, NS) || NS <- Spaces] ++ [start_planted(W, Sshd, none)],
    #{file => File, data => Data, dev => Dev, links => ["tbr" ++ Q, "tv" ++ P ++ "9"], namespaces => Spaces,
      processes => Procs}.

start_planted(W, Sshd, NS) ->
    PidFile = filename:join(W, "planted-" ++ integer_to_list(erlang:unique_integer([positive])) ++ ".pid"),
    Prefix = case NS of none -> ""; _ -> "ip netns add " ++ NS ++ " && ip netns exec " ++ NS ++ " " end,
    _ = os:cmd(Prefix ++ "sh -c 'echo $$ > " ++ PidFile ++ "; exec " ++ Sshd ++ " 600' </dev/null >/dev/null 2>&1 &"),
    true = wait_until(fun() -> filelib:file_size(PidFile) > 0 end, 5000),
    {ok, Pid} = file:read_file(PidFile),
    string:trim(binary_to_list(Pid)).

check_planted(#{file := File, data := Data, dev := Dev, links := Links, namespaces := Spaces, processes := Procs}) ->
    ?assertEqual({ok, <<"data\n">>}, file:read_file(File)),
    {ok, DataInfo} = file:read_file_info(Data),
    ?assertEqual(8#1777, element(8, DataInfo) band 8#7777),
    ?assertEqual({ok, ["notes.txt", "sub"]}, case file:list_dir(Data) of {ok, L} -> {ok, lists:sort(L)}; E -> E end),
    {ok, DevInfo} = file:read_file_info(Dev),
    ?assertEqual(device, element(3, DevInfo)),
    [?assertEqual({L, true}, {L, filelib:is_dir("/sys/class/net/" ++ L)}) || L <- Links],
    [?assertEqual({NS, true}, {NS, filelib:is_file("/run/netns/" ++ NS)}) || NS <- Spaces],
    [?assertEqual({Pid, "sshd"}, {Pid, comm(Pid)}) || Pid <- Procs],
    ok.

comm(Pid) ->
    case file:read_file("/proc/" ++ Pid ++ "/comm") of
        {ok, C} -> string:trim(binary_to_list(C));
        {error, _} -> ""
    end.

%% Whatever of the planted objects exists (also when planting failed half-way).
unplant(W, P, Q, R) ->
    Procs = [string:trim(binary_to_list(B)) || F <- filelib:wildcard(filename:join(W, "planted-*.pid")),
                                               {ok, B} <- [file:read_file(F)]],
    _ = [terrain_lab_os:signal(Pid, "KILL") || Pid <- Procs, comm(Pid) =:= "sshd"],
    _ = terrain_lab_os:await_exit(Procs, 2000),
    _ = [os:cmd("ip link del " ++ L) || L <- ["tbr" ++ Q, "tv" ++ P ++ "9"], filelib:is_dir("/sys/class/net/" ++ L)],
    _ = [os:cmd("ip netns del " ++ NS) || NS <- [R ++ "2", P ++ "9"], filelib:is_file("/run/netns/" ++ NS)],
    ok.
