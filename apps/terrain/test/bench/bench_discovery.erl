%% Benchmark of topology discovery (issue 6): terrain_linkage on random matrices of
%% n = 1,000 and n = 5,000 points (goals ≤ 1 s and ≤ 30 s; working memory ≤ 3× the
%% n(n−1)/2 doubles), and the whole discovery pipeline (outlier repair, automatic α)
%% on the synthetic 1,000-node hierarchy. scipy's time on the same matrices is measured
%% by python/bench/bench_topology.py.
%%
%% Memory is the peak of erlang:memory(total) above its level before the call, sampled
%% every 2 ms by another process, beside the n(n−1)/2 doubles of the input.
-module(bench_discovery).
-export([run/0, linkage/2]).

run() ->
    io:format("terrain_linkage: nearest-neighbour chain, uniform random distances, "
              "schedulers ~b~n", [erlang:system_info(schedulers_online)]),
    [linkage(N, Method) || N <- [1000, 5000], Method <- [complete, average, single]],
    pipeline(),
    ok.

%% @doc Times terrain_linkage:linkage/2 once on a random matrix of N points.
linkage(N, Method) ->
    rand:seed(exsss, {2026, 11, N}),
    Matrix = terrain_linkage:from_fun(N, fun(_, _) -> rand:uniform() end),
    Doubles = N * (N - 1) div 2 * 8,
    erlang:garbage_collect(),
    {Micros, Peak, Merges} = measure(fun() -> terrain_linkage:linkage(Matrix, Method) end),
    true = length(Merges) =:= N - 1,
    io:format("  n = ~b ~-8s ~8.3f s   peak extra memory ~7.1f MB = ~.2f x the ~.1f MB of n(n-1)/2 doubles~n",
              [N, Method, Micros / 1.0e6, Peak / 1.0e6, Peak / Doubles, Doubles / 1.0e6]).

pipeline() ->
    [begin
         {Latency, Truth} = terrain_synthetic:hierarchy(#{shape => [5, 10, 20], heights => [8000, 1000, 100],
                                                           jitter => 0.1, inflate => Inflate, seed => 2026}),
         {Micros, Peak, {ok, Result}} = measure(fun() -> terrain_discovery:discover(Latency, #{}) end),
         {ok, #{levels := Levels}} = terrain_tree_compare:compare(terrain_discovery:topology(Result), Truth),
         {Fraction, Factor} = Inflate,
         io:format("terrain_discovery:discover/2 (defaults), synthetic 5 x 10 x 20 (1,000 nodes), ~g of pairs x~b: "
                   "~.2f s, peak extra memory ~.1f MB, per-level ARI ~w, ~b round trips repaired~n",
                   [Fraction, Factor, Micros / 1.0e6, Peak / 1.0e6, [round(A * 1000) / 1000 || #{ari := A} <- Levels],
                    maps:get(repaired, Result)])
     end || Inflate <- [{0.0, 1}, {0.01, 5}]].

measure(Fun) ->
    Base = erlang:memory(total),
    Sampler = spawn_link(fun() -> sample(Base, 0) end),
    {Micros, Value} = timer:tc(Fun),
    Sampler ! {stop, self()},
    Peak = receive {peak, P} -> P after 5000 -> error(sampler_timeout) end,
    {Micros, Peak, Value}.

sample(Base, Peak) ->
    receive
        {stop, From} -> From ! {peak, max(Peak, erlang:memory(total) - Base)}
    after 2 ->
            sample(Base, max(Peak, erlang:memory(total) - Base))
    end.
