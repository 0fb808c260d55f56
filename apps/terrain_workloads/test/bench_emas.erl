%% Benchmark: EMAS's hybrid model on 1 and 2 schedulers (goal: 2 schedulers give at
%% least 1.8x the reproductions per second of 1), each run in a VM of its own
%% (+S N:N, no scheduler busy-waiting), three pairs alternately; the median of each.
%% Also prints the CPU each VM was given (erlang:statistics(runtime)), since on a shared machine a VM may
%% get far less than its schedulers ask for. `terrain emas scaling' measures every
%% model; this is the goal's own check.
-module(bench_emas).

-export([run/0]).

-define(TIME_MS, 2000).
-define(PAIRS, 3).

run() ->
    Idle = terrain_test_peers:wait_quiet(0.7, 30000),
    io:format("CPU ~.1f% idle before measuring~n", [100 * Idle]),
    Runs = lists:append([[{S, measure(S)} || S <- [1, 2]] || _ <- lists:seq(1, ?PAIRS)]),
    Median = fun(S) ->
                     Sorted = lists:sort([R || {S1, R} <- Runs, S1 =:= S]),
                     lists:nth((length(Sorted) + 1) div 2, Sorted)
             end,
    [io:format("  +S ~b: ~b reproductions/s, ~.2f cores of CPU~n", [S, round(Rate), Cpu]) || {S, {Rate, Cpu}} <- Runs],
    {One, _} = Median(1),
    {Two, _} = Median(2),
    Ratio = Two / One,
    io:format("hybrid, 4 islands x 100 agents, ~b ms, medians of ~b: 1 scheduler ~b/s, 2 schedulers ~b/s, "
              "ratio ~.2f (goal >= 1.8: ~s)~n",
              [?TIME_MS, ?PAIRS, round(One), round(Two), Ratio, case Ratio >= 1.8 of true -> "met"; false -> "NOT met" end]).

measure(Schedulers) ->
    Paths = [P || P <- code:get_path(), string:find(P, "_build") =/= nomatch],
    Args = ["+S", io_lib:format("~b:~b", [Schedulers, Schedulers]), "+sbwt", "none", "+sbwtdcpu", "none",
            "+sbwtdio", "none"] ++ lists:append([["-pa", P] || P <- Paths]),
    {ok, Peer, _} = peer:start(#{connection => standard_io, args => Args, wait_boot => 60000}),
    try
        {ok, #{summary := #{reproductions_per_s := Rate, cpu_cores := Cores}}} =
            peer:call(Peer, terrain_workloads, emas, [#{model => hybrid, time_ms => ?TIME_MS}], ?TIME_MS + 60000),
        {Rate, Cores}
    after
        peer:stop(Peer)
    end.
