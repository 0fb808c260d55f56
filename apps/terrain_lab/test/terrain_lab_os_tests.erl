%% terrain_lab_os:run/3, the lab's one port with a deadline: exit status and output,
%% the options, the deadline (the program and its children are stopped and the
%% deadline is reported), the output limit, a missing program; and the signals.
-module(terrain_lab_os_tests).
-include_lib("eunit/include/eunit.hrl").

%%--------------------------------------------------------------------
%% Exit status and output

exit_status_and_output_test() ->
    ?assertEqual({ok, 0, <<"hello world\n">>}, terrain_lab_os:run("echo", ["hello", "world"], #{timeout => 10000})),
    ?assertEqual({ok, 3, <<"out">>}, terrain_lab_os:run("/bin/sh", ["-c", "printf out; exit 3"], #{timeout => 10000})).

stderr_is_merged_by_default_or_left_to_this_vm_test() ->
    ?assertEqual({ok, 0, <<"outerr">>}, terrain_lab_os:run("/bin/sh", ["-c", "printf out; printf err >&2"],
                                                           #{timeout => 10000})),
    %% this line goes to the test run's stderr, not into the output
    Line = "printf out; echo '(a program run with stderr => inherit writes this to the VM stderr)' >&2",
    ?assertEqual({ok, 0, <<"out">>}, terrain_lab_os:run("/bin/sh", ["-c", Line], #{timeout => 10000, stderr => inherit})).

a_program_killed_by_a_signal_has_status_128_plus_the_signal_test() ->
    ?assertMatch({ok, 137, _}, terrain_lab_os:run("/bin/sh", ["-c", "kill -s KILL $$"], #{timeout => 10000})).

cwd_env_and_stdin_reach_the_program_test() ->
    Dir = filename:absname(filename:join(["_build", "test", "os_tests_cwd"])),
    ok = filelib:ensure_path(Dir),
    ?assertEqual({ok, 0, iolist_to_binary([Dir, "\nvalue\n\n"])},
                 terrain_lab_os:run("/bin/sh", ["-c", "pwd; echo \"$TERRAIN_X\"; echo \"$HOME\""],
                                    #{timeout => 10000, cwd => Dir, env => [{"TERRAIN_X", "value"}, {"HOME", false}]})),
    ?assertEqual({ok, 0, <<"first\n">>},
                 terrain_lab_os:run("head", ["-n", "1"], #{timeout => 10000, stdin => ["first\n", <<"second\n">>]})).

%%--------------------------------------------------------------------
%% The deadline

%% A shell that starts a child and waits: at the deadline both are gone (the child by
%% the signal to the process group), and the error names the deadline and keeps the
%% output written before it.
timeout_stops_the_program_and_its_children_test() ->
    Line = "sleep 300 & echo child $!; echo shell $$; wait",
    Started = erlang:monotonic_time(millisecond),
    {error, {run, "/bin/sh", {timeout, 500, Output}} = Reason} =
        terrain_lab_os:run("/bin/sh", ["-c", Line], #{timeout => 500}),
    ?assert(erlang:monotonic_time(millisecond) - Started >= 500),
    Pids = pids(Output),
    ?assertEqual([child, shell], lists:sort(maps:keys(Pids))),
    ?assertEqual([], still_running(maps:values(Pids))),
    ?assertEqual("/bin/sh did not finish within 500 ms and was stopped: " ++ binary_to_list(string:trim(Output)),
                 lists:flatten(terrain_lab_os:format_error(Reason))).

%% A child that ignores the stop signal gets KILL after the grace time, even when the
%% program itself exited on the stop signal.
a_child_that_ignores_the_stop_signal_is_killed_after_the_grace_time_test() ->
    Line = "sh -c 'trap \"\" TERM; echo child $$; while :; do sleep 0.05; done' & echo shell $$; wait",
    {error, {run, _, {timeout, 300, Output}}} =
        terrain_lab_os:run("/bin/sh", ["-c", Line], #{timeout => 300, grace => 200}),
    #{child := Child} = pids(Output),
    ?assertEqual([], still_running([Child])).

the_stop_signal_is_the_one_asked_for_test() ->
    %% the shell writes the signal it got to a file (its output after the deadline is
    %% not kept) and exits
    File = filename:absname(filename:join(["_build", "test", "os_tests_signal"])),
    ok = filelib:ensure_dir(File),
    _ = file:delete(File),
    Line = "trap 'echo INT > " ++ File ++ "; exit 9' INT; trap 'echo TERM > " ++ File ++ "; exit 9' TERM; "
           "echo ready; while :; do sleep 0.05; done",
    ?assertEqual({error, {run, "/bin/sh", {timeout, 300, <<"ready\n">>}}},
                 terrain_lab_os:run("/bin/sh", ["-c", Line], #{timeout => 300, stop_signal => "INT", grace => 5000})),
    ?assertEqual({ok, <<"INT\n">>}, file:read_file(File)).

more_output_than_the_limit_stops_the_program_test() ->
    {error, {run, "yes", {output_limit, 1000, Output}} = Reason} =
        terrain_lab_os:run("yes", [], #{timeout => 10000, max_output => 1000}),
    ?assertEqual(1000, byte_size(Output)),
    ?assertEqual("yes wrote more than 1000 bytes of output and was stopped",
                 lists:flatten(terrain_lab_os:format_error(Reason))).

%%--------------------------------------------------------------------
%% Errors

a_missing_program_is_a_clear_error_test() ->
    {error, Reason} = terrain_lab_os:run("terrain-no-such-program", [], #{timeout => 1000}),
    ?assertEqual({run, "terrain-no-such-program", not_found}, Reason),
    ?assertEqual("cannot run terrain-no-such-program: no such program (not a file, or not on the PATH)",
                 lists:flatten(terrain_lab_os:format_error(Reason))),
    ?assertEqual({error, {run, "/nonexistent/terrain", not_found}},
                 terrain_lab_os:run("/nonexistent/terrain", [], #{timeout => 1000})),
    Plain = filename:absname(filename:join(["_build", "test", "os_tests_plain"])),
    ok = filelib:ensure_dir(Plain),
    ok = file:write_file(Plain, "echo not a program\n"),
    ok = file:change_mode(Plain, 8#644),
    {error, {run, Plain, {spawn, eacces}} = NotExecutable} = terrain_lab_os:run(Plain, [], #{timeout => 1000}),
    ?assertEqual("cannot run " ++ Plain ++ ": permission denied", lists:flatten(terrain_lab_os:format_error(NotExecutable))).

bad_options_are_a_badarg_test_() ->
    [?_assertError({badarg, _}, terrain_lab_os:run("true", [], Options))
     || Options <- [#{}, #{timeout => 0}, #{timeout => 1000, grace => -1}, #{timeout => 1000, stderr => drop},
                    #{timeout => 1000, stop_signal => "term"}, #{timeout => 1000, max_output => 0},
                    #{timeout => 1000, cwd => 42}, #{timeout => 1000, env => [{"A", 1}]},
                    #{timeout => 1000, unknown => 1}]].

%%--------------------------------------------------------------------
%% Signals and start/3

signal_refuses_what_is_not_a_pid_test() ->
    ?assertNot(terrain_lab_os:signal("", "TERM")),
    ?assertNot(terrain_lab_os:signal("1 2", "TERM")),
    ?assertNot(terrain_lab_os:signal("-1", "TERM")),
    ?assertError({badarg, "term; rm"}, terrain_lab_os:signal("999999999", "term; rm")).

start_runs_a_child_the_caller_stops_with_a_signal_test() ->
    {ok, Port} = terrain_lab_os:start("/bin/sh", ["-c", "echo up; while :; do sleep 0.05; done"], #{}),
    receive {Port, {data, <<"up\n">>}} -> ok after 10000 -> error(no_output) end,
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    ?assert(terrain_lab_os:signal(integer_to_list(OsPid), "TERM")),
    receive {Port, {exit_status, Status}} -> ?assertEqual(128 + 15, Status) after 10000 -> error(no_exit) end,
    ?assertEqual({error, {run, "/nonexistent/terrain", not_found}}, terrain_lab_os:start("/nonexistent/terrain", [], #{})).

%% A child that ignores TERM is killed after the grace time, one that does not is not;
%% a process the caller does not own gets no signal at all.
terminate_all_terms_then_kills_only_its_own_test() ->
    Mark = "terrain_os_tests_" ++ os:getpid(),
    Start = fun(Trap) ->
                    {ok, Port} = terrain_lab_os:start("/bin/sh", ["-c", Trap ++ "echo " ++ Mark ++ " >/dev/null; "
                                                                  "echo up; while :; do sleep 0.05; done", Mark], #{}),
                    receive {Port, {data, <<"up\n">>}} -> ok after 10000 -> error(no_output) end,
                    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
                    {Port, integer_to_list(OsPid)}
            end,
    {Ports, [Polite, Stubborn, NotOurs]} = lists:unzip([Start(""), Start("trap '' TERM; "), Start("")]),
    Ours = fun(P) -> P =/= NotOurs andalso terrain_lab_os:ours(P, {cmdline, [Mark]}) end,
    ?assert(Ours(Polite)),
    ?assertEqual({[Stubborn], []}, terrain_lab_os:terminate_all([Polite, Stubborn, NotOurs], 300, Ours)),
    ?assertEqual([NotOurs], [P || P <- [Polite, Stubborn, NotOurs], terrain_lab_os:alive(P)]),
    ?assertNot(terrain_lab_os:ours(Polite, {cmdline, [Mark]})),        % gone, so not ours any more
    ?assert(terrain_lab_os:terminate(NotOurs, 1000, fun() -> true end)),
    [exited(Port) || Port <- Ports].

%% The exit status a port sends its owner, taken (not left to the next test).
exited(Port) ->
    receive {Port, {exit_status, Status}} -> Status after 10000 -> error({no_exit_status, Port}) end.

ours_reads_comm_and_refuses_what_is_not_a_pid_test() ->
    ?assert(terrain_lab_os:ours(os:getpid(), {comm, "beam.smp"})),
    ?assertNot(terrain_lab_os:ours(os:getpid(), {comm, "sshd"})),
    ?assertNot(terrain_lab_os:ours("../self", {cmdline, [""]})).

%% Every word, quotes and all, reaches the shell as itself, here and in ours_command/2.
shell_quote_keeps_every_word_whole_test() ->
    Words = ["plain", "two words", "it's", "'", "$HOME `id` \\ \"x\"", ""],
    Line = lists:flatten(io_lib:format("printf '%s|' ~ts", [lists:join(" ", [terrain_lab_os:shell_quote(W)
                                                                             || W <- Words])])),
    ?assertEqual({ok, 0, unicode:characters_to_binary([[W, "|"] || W <- Words])},
                 terrain_lab_os:run("/bin/sh", ["-c", Line], #{timeout => 10000})),
    Mark = "it's terrain_os_tests_" ++ os:getpid(),
    {ok, Port} = terrain_lab_os:start("/bin/sh", ["-c", "echo up; while :; do sleep 0.05; done", Mark], #{}),
    receive {Port, {data, <<"up\n">>}} -> ok after 10000 -> error(no_output) end,
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    Ask = fun(Word) ->
                  Test = lists:flatten(io_lib:format("~ts && echo yes || echo no",
                                                     [terrain_lab_os:ours_command(integer_to_list(OsPid), Word)])),
                  {ok, 0, Answer} = terrain_lab_os:run("/bin/sh", ["-c", Test], #{timeout => 10000}),
                  Answer
          end,
    try ?assertEqual({<<"yes\n">>, <<"no\n">>}, {Ask(Mark), Ask(Mark ++ "x")})
    after
        terrain_lab_os:terminate(integer_to_list(OsPid), 1000, fun() -> true end),
        exited(Port)
    end.

otp_program_and_load_average_test() ->
    ?assert(filelib:is_regular(terrain_lab_os:otp_program("erl"))),
    ?assert(is_float(terrain_lab_os:load_average())).

%%--------------------------------------------------------------------
%% Helpers

%% Lines `NAME PID' of a test's output.
pids(Output) ->
    maps:from_list([{list_to_atom(Name), Pid} || Line <- string:lexemes(binary_to_list(Output), "\n"),
                                                 [Name, Pid] <- [string:lexemes(Line, " ")]]).

%% The pids that are still running a minute's fraction later: a zombie (a dead child
%% whose parent was killed, waiting to be reaped) has stopped running.
still_running(Pids) ->
    Deadline = erlang:monotonic_time(millisecond) + 5000,
    still_running(Pids, Deadline).

still_running(Pids, Deadline) ->
    Running = [P || P <- Pids, running(P)],
    case Running =:= [] orelse erlang:monotonic_time(millisecond) > Deadline of
        true -> Running;
        false -> receive after 20 -> still_running(Running, Deadline) end
    end.

running(Pid) ->
    case file:read_file("/proc/" ++ Pid ++ "/stat") of
        {ok, Stat} ->
            [_, AfterName] = string:split(Stat, ") ", trailing),
            not lists:member(binary:first(AfterName), [$Z, $X]);
        {error, _} ->
            false
    end.
