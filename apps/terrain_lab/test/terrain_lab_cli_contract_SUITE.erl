%% The CLI's contract where a user can reach it: results alone on stdout (also when
%% stdout is closed, also when the cluster's nodes log), exit statuses that say
%% whether the purpose was met, node names as users write them, `time-task --at'
%% and `--warmup', and `up'/`down' that refuse or recover instead of hanging.
%%
%% Three peer nodes run terrain; a hand-written state directory records them under
%% the spec names a, b, c (groups r1, r2), so the CLI resolves short names through it
%% exactly as for a cluster that `terrain up' started. The `up'/`down' cases start
%% small clusters of their own through the real escript and stop them.
-module(terrain_lab_cli_contract_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([closed_stdout_ends_quietly/0, closed_stdout_ends_quietly/1,
         remote_log_events_stay_off_stdout/0, remote_log_events_stay_off_stdout/1,
         time_task_fails_when_every_run_failed/0, time_task_fails_when_every_run_failed/1,
         attrs_fails_when_no_node_answered/0, attrs_fails_when_no_node_answered/1,
         short_names_resolve_through_the_state/0, short_names_resolve_through_the_state/1,
         time_task_at_a_node_after_warmup/0, time_task_at_a_node_after_warmup/1,
         up_refuses_a_name_clash_at_once/0, up_refuses_a_name_clash_at_once/1,
         up_refuses_what_cannot_start/0, up_refuses_what_cannot_start/1,
         down_recovers_an_unreadable_state/0, down_recovers_an_unreadable_state/1,
         probe_defaults_finish_within_the_budget/0, probe_defaults_finish_within_the_budget/1,
         probe_interrupted_writes_what_it_measured/0, probe_interrupted_writes_what_it_measured/1]).

suite() ->
    [{timetrap, {minutes, 4}}].

all() ->
    [closed_stdout_ends_quietly, remote_log_events_stay_off_stdout, time_task_fails_when_every_run_failed,
     attrs_fails_when_no_node_answered, short_names_resolve_through_the_state, time_task_at_a_node_after_warmup,
     up_refuses_a_name_clash_at_once, up_refuses_what_cannot_start, down_recovers_an_unreadable_state,
     probe_defaults_finish_within_the_budget, probe_interrupted_writes_what_it_measured].

init_per_suite(Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    Prefix = "ctr" ++ os:getpid() ++ "_",
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ L) || L <- ["a", "b", "c"]], []),
    Nodes = [N || {_, N} <- Peers],
    State = filename:join(?config(priv_dir, Config), "state"),
    ok = write_state(State, Nodes),
    Host = lists:last(string:split(atom_to_list(node()), "@")),
    [{peers, Peers}, {nodes, Nodes}, {state, State}, {host, Host},
     {dead, Prefix ++ "gone@" ++ Host} | Config].

end_per_suite(Config) ->
    terrain_test_peers:stop(?config(peers, Config)),
    ok.

%% A state as `terrain up' writes it, for the peers, with no cookie file (the peers
%% have this node's cookie, which the CLI then keeps).
write_state(Dir, [A, B, C]) ->
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Record = fun(Name, Node, Path) ->
                     #{name => Name, node => Node, group_path => Path, os_pid => null, schedulers => 1}
             end,
    terrain_json:write_file(filename:join(Dir, "cluster.json"),
                            #{format => <<"terrain.state/1">>, cluster => ctr, spec => <<"none">>,
                              cookie_file => <<"none">>, started_at => <<"now">>, netem => false, levels => [],
                              nodes => [Record(a, A, [r1]), Record(b, B, [r1]), Record(c, C, [r2])]}).

cli(Args, Config) ->
    terrain_lab_test_io:run([hd(Args), "--state-dir", ?config(state, Config) | tl(Args)]).

escript(Config, Args) ->
    terrain_lab_test_escript:run(?config(priv_dir, Config), Args).

%% Runs a shell command line with the escript as "$T"; returns {Status, Stdout, Stderr}.
shell(Config, Line) ->
    ErrFile = filename:join(?config(priv_dir, Config), "sh-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Port = open_port({spawn_executable, "/bin/bash"},
                     [{args, ["-c", Line ++ " 2>" ++ ErrFile]}, {env, [{"T", terrain_lab_test_escript:path()}]},
                      exit_status, binary, stream]),
    {Status, Out} = collect(Port, []),
    {ok, Err} = file:read_file(ErrFile),
    {Status, binary_to_list(Out), binary_to_list(Err)}.

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc]);
        {Port, {exit_status, S}} -> {S, iolist_to_binary(lists:reverse(Acc))}
    after 60000 -> error(shell_timeout)
    end.

lines(Text) ->
    string:lexemes(Text, "\n").

found(Text, Part) ->
    string:find(Text, Part) =/= nomatch.

%%--------------------------------------------------------------------

closed_stdout_ends_quietly() ->
    [{doc, "attrs, status and netem show into a pipe whose reader has gone (| true) or stops after a line "
           "(| head -1) end with status 0 or 141 and no 'internal error' or report on stderr."}].
closed_stdout_ends_quietly(Config) ->
    State = ?config(state, Config),
    Lines = ["\"$T\" attrs --state-dir " ++ State ++ " | true; exit ${PIPESTATUS[0]}",
             "\"$T\" attrs --state-dir " ++ State ++ " | head -1 >/dev/null; exit ${PIPESTATUS[0]}",
             "\"$T\" status --state-dir " ++ State ++ " | true; exit ${PIPESTATUS[0]}",
             "\"$T\" status --state-dir " ++ State ++ " | head -4 >/dev/null; exit ${PIPESTATUS[0]}"],
    [begin
         {Status, _, Err} = shell(Config, "sleep 0; " ++ L),
         ct:pal("~ts~n-> ~b~n~ts", [L, Status, Err]),
         ?assert(lists:member(Status, [0, 141])),
         ?assertNot(found(Err, "internal error")),
         ?assertNot(found(Err, "REPORT")),
         ?assertNot(found(Err, "terrain: error"))
     end || L <- Lines].

remote_log_events_stay_off_stdout() ->
    [{doc, "A warning logged on the cluster's nodes by a process the CLI started (it has the CLI's group "
           "leader, so logger forwards it to the CLI's node) is one line on stderr, never a report on stdout."}].
remote_log_events_stay_off_stdout(Config) ->
    Csv = filename:join(?config(priv_dir, Config), "logged.csv"),
    %% 6 runs (1 warm-up) x 3 nodes = 18 warnings; logger forwards them asynchronously, so those of the last
    %% run may still be on their way when the CLI halts, but those of the first runs have long arrived
    {0, Out, Err} = escript(Config, ["time-task", "--state-dir", ?config(state, Config), "--runs", "5",
                                     "--rpc-all", "logger:warning:[\"hello from a node\"]", "--out", Csv]),
    ct:pal("stdout:~n~ts~nstderr:~n~ts", [Out, Err]),
    ?assertEqual("", Out),
    ?assert(found(Err, "terrain: warning: hello from a node")),
    ?assertNot(found(Err, "WARNING REPORT")),
    %% one line each, at most three of a kind shown (how many arrive before the CLI halts depends on the
    %% machine's load: forwarding is asynchronous), never a report
    Shown = length([L || L <- lines(Err), found(L, "hello from a node")]),
    ?assert(Shown >= 1 andalso Shown =< 3, Shown),
    ?assertEqual(Shown, length([L || L <- lines(Err), found(L, "terrain: warning: hello from a node")])).

time_task_fails_when_every_run_failed() ->
    [{doc, "time-task exits 1 when every run failed (an undefined function; a dead node), 0 when all ran."}].
time_task_fails_when_every_run_failed(Config) ->
    Dir = ?config(priv_dir, Config),
    {1, "", Undef} = cli(["time-task", "--runs", "2", "--rpc-all", "no_such_module:f:[]",
                          "--out", filename:join(Dir, "undef.csv")], Config),
    ?assert(found(Undef, "all 2 runs failed")),
    {1, "", Dead} = cli(["time-task", "--runs", "2", "--timeout", "500", "--rpc-all", "erlang:node:[]",
                         "--nodes", ?config(dead, Config), "--out", filename:join(Dir, "dead.csv")], Config),
    ?assert(found(Dead, "all 2 runs failed")),
    {0, "", Ok} = cli(["time-task", "--runs", "2", "--rpc-all", "erlang:node:[]",
                       "--out", filename:join(Dir, "ok.csv")], Config),
    ?assertNot(found(Ok, "failed")).

attrs_fails_when_no_node_answered() ->
    [{doc, "attrs exits 1 when none of the nodes answered; when some did, 0 and one stderr line naming the others."}].
attrs_fails_when_no_node_answered(Config) ->
    Dead = ?config(dead, Config),
    {1, Out, Err} = cli(["attrs", "--nodes", Dead, "vm_schedulers_online"], Config),
    ?assert(found(Out, "no connection")),
    ?assert(found(Err, "none of the 1 nodes answered")),
    {0, _, Partial} = cli(["attrs", "--nodes", "a," ++ Dead, "vm_schedulers_online"], Config),
    ?assert(found(Partial, "1 of 2 nodes answered; no answer from " ++ Dead)).

short_names_resolve_through_the_state() ->
    [{doc, "--nodes and --at take the spec's short names, groups and full names; an unknown name is an error "
           "listing the known ones; a distance predicate without --at is a usage error."}].
short_names_resolve_through_the_state(Config) ->
    [A, B, C] = ?config(nodes, Config),
    {0, Out, _} = cli(["attrs", "--nodes", "a," ++ atom_to_list(B), "vm_schedulers_online"], Config),
    ?assertEqual(["NODE", atom_to_list(A), atom_to_list(B)], [hd(string:lexemes(L, " ")) || L <- lines(Out)]),
    {0, Group, _} = cli(["choose", "--nodes", "r2", "{vm_schedulers_online, exists}"], Config),
    ?assertEqual([atom_to_list(C)], lines(Group)),
    {0, At, _} = cli(["choose", "--at", "a", "--nodes", "a,c", "{vm_schedulers_online, exists}"], Config),
    ?assertEqual([atom_to_list(A), atom_to_list(C)], lines(At)),
    {1, "", Unknown} = cli(["attrs", "--nodes", "eu1", "load"], Config),
    ?assert(found(Unknown, "unknown node eu1; the cluster knows a, b, c, r1, r2")),
    {1, "", Group2} = cli(["choose", "--at", "r1", "{load, exists}"], Config),
    ?assert(found(Group2, "r1 names 2 nodes")),
    {2, "", Distance} = cli(["choose", "{level, le, near}"], Config),
    ?assert(found(Distance, "measures distances from a node: give the node with --at NODE")),
    {2, "", Order} = cli(["choose", "--order-by", "distance", "{load, exists}"], Config),
    ?assert(found(Order, "--at NODE")).

time_task_at_a_node_after_warmup() ->
    [{doc, "time-task --at a times the runs on node a (resolved from its short name); --warmup runs are "
           "not in the CSV."}].
time_task_at_a_node_after_warmup(Config) ->
    [A | _] = ?config(nodes, Config),
    Csv = filename:join(?config(priv_dir, Config), "at.csv"),
    {0, "", Err} = cli(["time-task", "--at", "a", "--warmup", "2", "--runs", "3", "--rpc-all", "erlang:node:[]",
                        "--out", Csv], Config),
    ?assert(found(Err, "from " ++ atom_to_list(A) ++ ", 3 runs after 2 warm-up runs")),
    {ok, Text} = file:read_file(Csv),
    [_Header | Rows] = lines(binary_to_list(Text)),
    ?assertEqual(["1", "2", "3"], [hd(string:split(R, ",")) || R <- Rows]),
    {1, "", Gone} = cli(["time-task", "--at", ?config(dead, Config), "--runs", "1", "--warmup", "0",
                         "--timeout", "300", "--rpc-all", "erlang:node:[]",
                         "--out", filename:join(?config(priv_dir, Config), "at_dead.csv")], Config),
    ?assert(found(Gone, "all 1 runs failed")).

up_refuses_a_name_clash_at_once() ->
    [{doc, "A second up with the same names in another state directory is refused in under a second, "
           "naming the clashing names and suggesting --prefix; it leaves no state behind."}].
up_refuses_a_name_clash_at_once(Config) ->
    {Spec, Prefix} = spec(Config, "clash"),
    First = filename:join(?config(priv_dir, Config), "clash_1"),
    Second = filename:join(?config(priv_dir, Config), "clash_2"),
    {0, _, _} = escript(Config, ["up", "--state-dir", First, "--prefix", Prefix, Spec]),
    try
        T0 = erlang:monotonic_time(millisecond),
        {1, "", Err} = escript(Config, ["up", "--state-dir", Second, "--prefix", Prefix, Spec]),
        Ms = erlang:monotonic_time(millisecond) - T0,
        ct:pal("refused in ~b ms: ~ts", [Ms, Err]),
        ?assert(Ms < 1000 + escript_start_ms(Config)),
        ?assert(found(Err, Prefix ++ "a, " ++ Prefix ++ "b, " ++ Prefix ++ "c are already registered")),
        ?assert(found(Err, "--prefix")),
        ?assertNot(filelib:is_dir(Second))
    after
        {0, _, _} = escript(Config, ["down", "--state-dir", First])
    end.

up_refuses_what_cannot_start() ->
    [{doc, "up refuses before creating anything: a node name over 255 characters (no cookie or nodes/ left) "
           "and a spec whose VMs would not fit in memory (with the estimate; emulated, with the warning that names "
           "the network emulation's limit first)."}].
up_refuses_what_cannot_start(Config) ->
    Dir = ?config(priv_dir, Config),
    Long = filename:join(Dir, "long.cluster"),
    ok = file:write_file(Long, ["{cluster, l, #{}}.\n{group, g, #{}, [{node, ", lists:duplicate(250, $q), ", #{}}]}.\n"]),
    LongState = filename:join(Dir, "long_state"),
    {1, "", LongErr} = escript(Config, ["up", "--state-dir", LongState, "--prefix", "pfx_", Long]),
    Chars = length("pfx_") + 250 + 1 + length(?config(host, Config)),
    ?assert(found(LongErr, io_lib:format("has ~b characters; a node name has at most 255", [Chars]))),
    ?assertNot(filelib:is_dir(LongState)),
    Big = filename:join(Dir, "big.cluster"),
    {ok, MemKb} = mem_available_kb(),
    Count = MemKb div 1024 div terrain_lab_guard:vm_memory_mb(1, true) + 10,
    ok = file:write_file(Big, ["{cluster, big, #{}}.\n{group, g, #{}, [",
                               lists:join(", ", [io_lib:format("{node, n~b, #{}}", [I]) || I <- lists:seq(1, Count)]),
                               "]}.\n"]),
    BigState = filename:join(Dir, "big_state"),
    {1, "", BigErr} = escript(Config, ["up", "--state-dir", BigState, Big]),
    ?assert(found(BigErr, io_lib:format("~b nodes need about", [Count]))),
    ?assert(found(BigErr, "--force")),
    ?assertNot(filelib:is_dir(BigState)),
    %% emulated, the same spec is warned about first, naming the limit on this machine
    {1, "", EmulatedErr} = escript(Config, ["up", "--state-dir", BigState, "--netem", "on", Big]),
    ?assert(found(EmulatedErr, io_lib:format("warning: network emulation of ~b nodes in a full mesh", [Count]))),
    ?assert(found(EmulatedErr, "round trips drift beyond the spec's +-10% + 100 us")),
    ?assert(found(EmulatedErr, io_lib:format("~b nodes need about", [Count]))),
    ?assertNot(filelib:is_dir(BigState)).

down_recovers_an_unreadable_state() ->
    [{doc, "With cluster.json corrupt, status fails naming the file, and down stops every node its pid files "
           "name by full node name (no kill, no report on either stream) and removes the state."}].
down_recovers_an_unreadable_state(Config) ->
    {Spec, Prefix} = spec(Config, "corrupt"),
    State = filename:join(?config(priv_dir, Config), "corrupt_state"),
    {0, _, _} = escript(Config, ["up", "--state-dir", State, "--prefix", Prefix, Spec]),
    {ok, Recorded} = terrain_json:read_file(filename:join(State, "cluster.json")),
    OsPids = [binary_to_list(P) || #{<<"os_pid">> := P} <- maps:get(<<"nodes">>, Recorded)],
    try
        ok = file:write_file(filename:join(State, "cluster.json"), "{\"format\": \"terrain.state/1\", \"nod"),
        {1, "", StatusErr} = escript(Config, ["status", "--state-dir", State]),
        ?assert(found(StatusErr, "cluster.json is not valid JSON")),
        {0, Out, Err} = escript(Config, ["down", "--state-dir", State]),
        ct:pal("down:~n~ts~ts", [Out, Err]),
        ?assertEqual(3, length([L || L <- lines(Out), found(L, "stopped")])),
        ?assert(found(Err, "stopping the 3 nodes named by the pid files")),
        ?assertNot(found(Out ++ Err, "REPORT")),
        ?assertEqual([], terrain_lab_os:await_exit(OsPids, 5000)),
        ?assertNot(filelib:is_dir(State))
    after
        [terrain_lab_os:kill(P) || P <- OsPids]
    end.

probe_defaults_finish_within_the_budget() ->
    [{doc, "probe without --batches is adaptive: every pair gets 1 to 100 batches of 10 exchanges, the files are "
           "complete (partial false), and the whole probe keeps to --budget (plus the time to start and write)."}].
probe_defaults_finish_within_the_budget(Config) ->
    Runs = filename:join(?config(priv_dir, Config), "adaptive_runs"),
    T0 = erlang:monotonic_time(millisecond),
    {0, Out, Err} = cli(["probe", "--budget", "6", "--runs-dir", Runs], Config),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ct:pal("~b ms~n~ts~ts", [Ms, Out, Err]),
    ?assert(found(Err, "batches of 10 messages until the median is within +-5% (at most 100), budget 6 s")),
    ?assert(Ms < 6000 + 5000),
    [Dir] = filelib:wildcard(filename:join(Runs, "*")),
    {ok, Latency} = terrain_json:read_file(filename:join(Dir, "latency.json")),
    ?assertEqual(false, maps:get(<<"partial">>, Latency)),
    Batches = [B || Row <- maps:get(<<"batches_per_pair">>, Latency), B <- Row, B =/= 0],
    ?assertEqual(6, length(Batches)),
    ?assert(lists:all(fun(B) -> is_integer(B) andalso B >= 1 andalso B =< 100 end, Batches)).

probe_interrupted_writes_what_it_measured() ->
    [{doc, "SIGTERM to the escript during a long fixed probe: it exits 1 saying it was interrupted, and "
           "latency.json holds the pairs measured so far, marked partial."}].
probe_interrupted_writes_what_it_measured(Config) ->
    Runs = filename:join(?config(priv_dir, Config), "interrupted_runs"),
    Port = open_port({spawn_executable, terrain_lab_test_escript:path()},
                     [{args, ["probe", "--state-dir", ?config(state, Config), "--runs-dir", Runs,
                              "--batches", "100000", "--messages", "10"]},
                      exit_status, binary, stderr_to_stdout]),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    %% interrupt once the first batches are measured (the progress line says so)
    ok = await_output(Port, "batches, ", erlang:monotonic_time(millisecond) + 60000, []),
    _ = os:cmd("kill -TERM " ++ integer_to_list(OsPid)),
    {Status, Text} = collect(Port, []),
    ct:pal("exit ~b~n~ts", [Status, Text]),
    ?assertEqual(1, Status),
    ?assert(found(binary_to_list(Text), "interrupted: ")),
    [Dir] = filelib:wildcard(filename:join(Runs, "*")),
    {ok, Latency} = terrain_json:read_file(filename:join(Dir, "latency.json")),
    ?assertEqual(true, maps:get(<<"partial">>, Latency)),
    Measured = [B || Row <- maps:get(<<"batches_per_pair">>, Latency), B <- Row, is_integer(B), B > 0],
    ?assertNotEqual([], Measured).

await_output(Port, Part, Deadline, Acc) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Port, {data, D}} ->
            Text = iolist_to_binary([Acc, D]),
            case binary:match(Text, list_to_binary(Part)) of
                nomatch -> await_output(Port, Part, Deadline, Text);
                _ -> ok
            end
    after Wait ->
            ct:fail({no_output, Part, Acc})
    end.

%%--------------------------------------------------------------------

spec(Config, Name) ->
    File = filename:join(?config(priv_dir, Config), Name ++ ".cluster"),
    ok = file:write_file(File, "{cluster, small, #{}}.\n"
                               "{group, r1, #{}, [{node, a, #{schedulers => 1}}, {node, b, #{schedulers => 1}}]}.\n"
                               "{group, r2, #{}, [{node, c, #{schedulers => 1}}]}.\n"),
    {File, "ctr" ++ os:getpid() ++ Name ++ "_"}.

%% What starting the escript costs on this machine, so the refusal's own time is
%% compared with 1 s.
escript_start_ms(Config) ->
    T0 = erlang:monotonic_time(millisecond),
    {0, _, _} = escript(Config, ["--version"]),
    erlang:monotonic_time(millisecond) - T0.

mem_available_kb() ->
    {ok, Text} = file:read_file("/proc/meminfo"),
    {match, [Kb]} = re:run(Text, "MemAvailable:\\s+(\\d+) kB", [{capture, all_but_first, list}]),
    {ok, list_to_integer(Kb)}.
