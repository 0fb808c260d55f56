%% Benchmark: the cost of terrain_variability:check/1 per call (it is meant to run on
%% every operation), against an empty loop of the same shape.
-module(bench_variability).
-export([run/0]).

-define(CALLS, 1000000).
-define(ROUNDS, 5).

run() ->
    ok = terrain_variability:load(#{location => 11.1679, scale => 0.2120, shape => -0.00105}, #{name => bench}),
    Durations = list_to_tuple([11.0 + rand:uniform() * 2 || _ <- lists:seq(1, 1024)]),
    Check = [ns_per_call(fun(X) -> terrain_variability:check(bench, X) end, Durations) || _ <- lists:seq(1, ?ROUNDS)],
    Empty = [ns_per_call(fun(X) -> {ok, X} end, Durations) || _ <- lists:seq(1, ?ROUNDS)],
    terrain_variability:unload(bench),
    io:format("terrain_variability:check/2, ~b calls x ~b rounds: median ~.1f ns per call "
              "(empty loop ~.1f ns; check alone ~.1f ns)~n",
              [?CALLS, ?ROUNDS, median(Check), median(Empty), median(Check) - median(Empty)]).

ns_per_call(Fun, Durations) ->
    T0 = erlang:monotonic_time(nanosecond),
    loop(Fun, Durations, ?CALLS),
    (erlang:monotonic_time(nanosecond) - T0) / ?CALLS.

loop(_Fun, _Durations, 0) -> ok;
loop(Fun, Durations, N) ->
    _ = Fun(element((N band 1023) + 1, Durations)),
    loop(Fun, Durations, N - 1).

median(Xs) -> lists:nth((length(Xs) + 1) div 2, lists:sort(Xs)).
