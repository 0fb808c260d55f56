%% Benchmark: `terrain up' of 8 VMs on 4 ssh hosts (network namespaces made by
%% terrain_lab_test_hosts, 2 VMs each) against `terrain up' of the same 8 VMs on this
%% machine, in the same run, alternating (goal: ssh hosts all running within 10 s).
%% Each `up' is timed from the escript's start to its exit (all nodes running terrain)
%% and followed by `down'. Needs root, ip, sshd; reports why when it cannot run.
-module(bench_hosts).
-export([run/0]).

-define(ROUNDS, 3).
-define(HOSTS, 4).
-define(PER_HOST, 2).

run() ->
    case terrain_lab_test_hosts:available() of
        {false, Why} ->
            io:format("hosts benchmark not run: cannot make test hosts here (~p)~n", [Why]);
        true ->
            Dir = filename:join(filename:basedir(user_cache, "terrain-bench"), "hosts-" ++ os:getpid()),
            {ok, Hosts} = terrain_lab_test_hosts:start(?HOSTS, filename:join(Dir, "hosts")),
            try
                Remote = write_spec(Dir, "remote.cluster", terrain_lab_test_hosts:addresses(Hosts)),
                Local = write_spec(Dir, "local.cluster", lists:duplicate(?HOSTS, none)),
                Ssh = ["--ssh-option", terrain_lab_test_hosts:ssh_option(Hosts)],
                Rounds = [{up(Dir, Local, []), up(Dir, Remote, Ssh)} || _ <- lists:seq(1, ?ROUNDS)],
                Locals = lists:sort([L || {L, _} <- Rounds]),
                Remotes = lists:sort([R || {_, R} <- Rounds]),
                io:format("terrain up, ~b VMs, ~b rounds alternating: local median ~b ms (min ~b, max ~b); "
                          "~b ssh hosts median ~b ms (min ~b, max ~b); ratio ~.2f~n",
                          [?HOSTS * ?PER_HOST, ?ROUNDS, median(Locals), hd(Locals), lists:last(Locals),
                           ?HOSTS, median(Remotes), hd(Remotes), lists:last(Remotes),
                           median(Remotes) / max(1, median(Locals))])
            after
                terrain_lab_test_hosts:stop(Hosts)
            end
    end.

up(Dir, Spec, Extra) ->
    State = filename:join(Dir, "state"),
    T0 = erlang:monotonic_time(millisecond),
    {0, _, _} = terrain_lab_test_escript:run(Dir, ["up", Spec, "--state-dir", State | Extra]),
    Ms = erlang:monotonic_time(millisecond) - T0,
    {0, _, _} = terrain_lab_test_escript:run(Dir, ["down", "--state-dir", State]),
    Ms.

write_spec(Dir, Name, Addresses) ->
    File = filename:join(Dir, Name),
    Host = fun(none) -> "#{}"; (A) -> io_lib:format("#{host => ~p}", [A]) end,
    ok = file:write_file(File, ["{cluster, bench, #{}}.\n" |
                                [io_lib:format("{group, h~b, #{}, [~ts]}.~n",
                                               [I, lists:join(", ", [io_lib:format("{node, h~b_~b, ~ts}", [I, J, Host(A)])
                                                                     || J <- lists:seq(1, ?PER_HOST)])])
                                 || {I, A} <- lists:zip(lists:seq(1, length(Addresses)), Addresses)]]),
    File.

median(Sorted) ->
    lists:nth((length(Sorted) + 1) div 2, Sorted).
