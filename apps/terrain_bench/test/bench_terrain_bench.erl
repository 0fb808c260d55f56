%% Benchmark (issue 14): the harness's own cost per recorded operation — worker loop,
%% operation choice, two timestamps, histogram record — measured by running the real
%% benchmark with the `noop' operation against a bare loop (the end-time check alone)
%% in the same run, alternating (goal: <= 0.25 us per operation at the median); and
%% the histogram record alone against a loop that calls a no-op in its place (goal:
%% <= 100 ns).
-module(bench_terrain_bench).
-export([run/0]).

-define(ROUNDS, 7).
-define(ROUND_S, 1).
-define(RECORDS, 200000).
-define(RECORD_ROUNDS, 25).

run() ->
    ok = terrain_test_peers:ensure_distributed(),
    {ok, _} = application:ensure_all_started(terrain_bench),
    Idle = terrain_test_peers:wait_quiet(0.5, 10000),
    io:format("terrain_bench harness: CPU ~.1f% idle before measuring; load ~ts (2 cores shared with other work)~n",
              [100 * Idle, string:trim(os:cmd("cut -d' ' -f1-3 /proc/loadavg"))]),
    Dir = filename:join("/tmp", "bench_terrain_bench_" ++ os:getpid()),
    {ok, Config} = terrain_bench:validate_config([{duration, ?ROUND_S}, {concurrent, 1}, {report_interval, ?ROUND_S},
                                                  {operations, [{noop, 1}]}]),
    Rounds = [begin
                  Bare = bare_ns_per_iteration(?ROUND_S * 1000),
                  Out = filename:join(Dir, integer_to_list(I)),
                  {ok, #{total := #{count := Count}}} = terrain_bench:run([node()], Config, Out, #{}),
                  Harness = ?ROUND_S * 1.0e9 / Count,
                  {Harness, Bare, Harness - Bare}
              end || I <- lists:seq(1, ?ROUNDS)],
    ok = file:del_dir_r(Dir),
    Overheads = lists:sort([O || {_, _, O} <- Rounds]),
    io:format("harness per noop operation, ~b alternating rounds of ~b s (ns): harness ~s; bare loop ~s~n",
              [?ROUNDS, ?ROUND_S, fmt([H || {H, _, _} <- Rounds]), fmt([B || {_, B, _} <- Rounds])]),
    io:format("  overhead (harness - bare): median ~.1f ns = ~.3f us per operation (goal <= 0.25 us), min ~.1f, max ~.1f~n",
              [median(Overheads), median(Overheads) / 1000, hd(Overheads), lists:last(Overheads)]),
    Records = lists:sort([record_ns() || _ <- lists:seq(1, ?RECORD_ROUNDS)]),
    io:format("histogram record alone (record loop - no-op loop, alternating), ~b x ~b records: median ~.1f ns "
              "(goal <= 100 ns), min ~.1f, max ~.1f~n",
              [?RECORD_ROUNDS, ?RECORDS, median(Records), hd(Records), lists:last(Records)]),
    ok.

%% The worker loop's skeleton without the operation: the end-time check.
bare_ns_per_iteration(Ms) ->
    End = erlang:monotonic_time() + erlang:convert_time_unit(Ms, millisecond, native),
    Parent = self(),
    {Pid, Ref} = spawn_monitor(fun() -> Parent ! {bare, self(), bare(End, 0)} end),
    receive {bare, Pid, N} -> erlang:demonitor(Ref, [flush]), Ms * 1.0e6 / N
    after Ms + 5000 -> error(bare_loop_timeout)
    end.

bare(End, N) ->
    case erlang:monotonic_time() >= End of
        true -> N;
        false -> bare(End, N + 1)
    end.

%% record/2 against the same loop calling a no-op, both over the same values.
record_ns() ->
    Values = list_to_tuple([rand:uniform(100000) || _ <- lists:seq(1, 1024)]),
    R = terrain_bench_hdr:new_recorder(),
    Noop = fun(_, _) -> ok end,
    Record = fun terrain_bench_hdr:record/2,
    {TNoop, ok} = timer:tc(fun() -> loop(Noop, R, Values, ?RECORDS) end),
    {TRecord, ok} = timer:tc(fun() -> loop(Record, R, Values, ?RECORDS) end),
    (TRecord - TNoop) * 1000 / ?RECORDS.

loop(_F, _R, _Values, 0) -> ok;
loop(F, R, Values, N) ->
    F(R, element((N band 1023) + 1, Values)),
    loop(F, R, Values, N - 1).

median(Sorted) ->
    lists:nth((length(Sorted) + 1) div 2, Sorted).

fmt(Values) ->
    lists:join(" ", [integer_to_list(round(V)) || V <- Values]).
