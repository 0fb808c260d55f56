%% Benchmark of the probe's ETA (Hardening issue, item 8): on 6 local nodes, a fixed
%% sequential probe (300 batches x 20 messages per pair), and an adaptive one whose
%% precision (+-0.5%) is out of reach so that its 20 s budget decides; every progress
%% report's ETA is compared with the time the probe then really took. Goal: once 10% of the time has passed, every ETA within +-30%.
%% Reports, per probe, the duration and the largest ETA error after 10% and 25%.
-module(bench_probe_eta).
-export([run/0]).

run() ->
    ok = terrain_lab_dist:ensure_started(#{}),
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, bench_eta, #{}},
                                              {group, g, #{}, [{node, list_to_atom("e" ++ integer_to_list(I)),
                                                                #{schedulers => 1}} || I <- lists:seq(1, 6)]}],
                                             undefined),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "be" ++ os:getpid() ++ "_", netem => false}),
    try
        Nodes = [Node || #{node := Node} <- terrain_lab:cluster_nodes(Cluster)],
        ok = eta("fixed 300 x 20, sequential", Nodes, #{batches => 300, messages => 20}),
        ok = eta("adaptive +-0.5%, budget 20 s", Nodes, #{batches => 100000, messages => 10, warmup => 10,
                                                          precision => 0.005, budget_ms => 20000})
    after
        terrain_lab:stop_cluster(Cluster)
    end.

eta(Label, Nodes, Options) ->
    Self = self(),
    Progress = fun(#{elapsed_ms := E, eta_ms := Eta}) -> Self ! {eta, E, Eta} end,
    {ok, #{duration_ms := Total}} = terrain_lab_probe:probe(Nodes, Options#{progress => Progress}),
    Reports = drain([]),
    Error = fun(From) ->
                    Errors = [abs(E + Eta - Total) / Total || {E, Eta} <- Reports, is_integer(Eta), E >= From * Total],
                    case Errors of [] -> none; _ -> lists:max(Errors) end
            end,
    io:format("~-28s ~.1f s, ~b reports; largest ETA error after 10%: ~ts, after 25%: ~ts~n",
              [Label, Total / 1000, length(Reports), pct(Error(0.10)), pct(Error(0.25))]).

drain(Acc) ->
    receive {eta, E, Eta} -> drain([{E, Eta} | Acc])
    after 0 -> lists:reverse(Acc)
    end.

pct(none) -> "-";
pct(X) -> io_lib:format("~b%", [round(100 * X)]).
