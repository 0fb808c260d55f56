%% Benchmark: how long the launcher takes to start and stop 16 local nodes, each
%% running terrain (goal: start under 10 s on this 2-core machine).
-module(bench_cluster).
-export([run/0]).

-define(ROUNDS, 3).
-define(NODES, 16).

run() ->
    Terms = [{cluster, bench, #{}} |
             [{group, list_to_atom("g" ++ integer_to_list(G)), #{},
               [{node, list_to_atom("b" ++ integer_to_list(G) ++ "_" ++ integer_to_list(I)), #{}} || I <- lists:seq(1, 4)]}
              || G <- lists:seq(1, ?NODES div 4)]],
    {ok, Spec} = terrain_lab_spec:from_terms(Terms, undefined),
    Rounds = [round(R, Spec) || R <- lists:seq(1, ?ROUNDS)],
    Starts = lists:sort([S || {S, _} <- Rounds]),
    Stops = lists:sort([S || {_, S} <- Rounds]),
    io:format("launcher, ~b nodes, ~b rounds: start median ~b ms (min ~b, max ~b); "
              "stop median ~b ms (min ~b, max ~b)~n",
              [?NODES, ?ROUNDS, lists:nth(2, Starts), hd(Starts), lists:last(Starts),
               lists:nth(2, Stops), hd(Stops), lists:last(Stops)]).

round(R, Spec) ->
    T0 = erlang:monotonic_time(millisecond),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "bench" ++ os:getpid() ++ "_" ++ integer_to_list(R) ++ "_"}),
    T1 = erlang:monotonic_time(millisecond),
    ?NODES = length(terrain_lab:cluster_nodes(Cluster)),
    ok = terrain_lab:stop_cluster(Cluster),
    T2 = erlang:monotonic_time(millisecond),
    {T1 - T0, T2 - T1}.
