%% Benchmark of `terrain probe' (issue 6): 16 local nodes (no emulation), the default
%% 100 batches × 100 messages and the default (sequential) strategy, twice (goal: each
%% ≤ 2 minutes). Reports the duration of each run and, per ordered pair, the
%% coefficient of variation (stddev / mean) of each statistic across the two runs —
%% how repeatable the matrix is — and the median of the within-run stddev / mean.
-module(bench_probe).
-export([run/0, run/2]).

run() ->
    run(16, #{}).

%% @doc Probes `N' local nodes twice with `Options' (terrain_lab_probe:options()).
run(N, Options) ->
    ok = terrain_lab_dist:ensure_started(#{}),
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, bench_probe, #{}},
                                              {group, g, #{}, [{node, list_to_atom("p" ++ integer_to_list(I)),
                                                                #{schedulers => 1}} || I <- lists:seq(1, N)]}],
                                             undefined),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "bp" ++ os:getpid() ++ "_", netem => false}),
    try
        Nodes = [Node || #{node := Node} <- terrain_lab:cluster_nodes(Cluster)],
        Runs = [begin
                    {ok, #{duration_ms := Ms, pairs := Pairs, options := Opts}} =
                        terrain_lab_probe:probe(Nodes, Options),
                    [] = [P || {P, {error, _}} <- maps:to_list(Pairs)],
                    io:format("probe ~b nodes, ~s, ~b x ~b, run ~b: ~.1f s~n",
                              [N, maps:get(strategy, Opts), maps:get(batches, Opts), maps:get(messages, Opts), K,
                               Ms / 1000]),
                    Pairs
                end || K <- [1, 2]],
        [First, Second] = Runs,
        lists:foreach(
          fun(Stat) ->
                  Cvs = [cv([value(Stat, maps:get(P, First)), value(Stat, maps:get(P, Second))]) || P <- maps:keys(First)],
                  Values = [value(Stat, R) || R <- maps:values(First)],
                  io:format("  ~-6s median over pairs ~7.1f us; CV across the two runs per pair: median ~.3f, "
                            "p90 ~.3f, max ~.3f~n",
                            [Stat, median(Values), median(Cvs), quantile(Cvs, 0.9), lists:max(Cvs)])
          end, [min, median, mean, p95]),
        Within = [maps:get(stddev, S) / maps:get(mean, S) || {ok, S} <- maps:values(First)],
        io:format("  within a run, stddev / mean of the 10,000 exchanges of a pair: median ~.2f~n", [median(Within)])
    after
        terrain_lab:stop_cluster(Cluster)
    end.

value(Stat, {ok, S}) -> maps:get(Stat, S).

cv(Xs) ->
    Mean = lists:sum(Xs) / length(Xs),
    Sd = math:sqrt(lists:sum([(X - Mean) * (X - Mean) || X <- Xs]) / (length(Xs) - 1)),
    Sd / Mean.

median(Xs) -> quantile(Xs, 0.5).

quantile(Xs, Q) ->
    Sorted = lists:sort(Xs),
    lists:nth(max(1, round(Q * length(Sorted))), Sorted).
