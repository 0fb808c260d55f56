%% Properties of terrain_bench_hdr: the percentiles of merged per-node histograms are
%% the percentiles of the pooled samples, within the histogram's precision.
-module(prop_bench_hdr).
-include_lib("proper/include/proper.hrl").
-export([prop_merged_percentiles_equal_pooled/0, prop_merged_percentile_within_precision/0]).

%% Latencies with a heavy tail, per node; some nodes may be empty.
node_samples() ->
    list(oneof([range(0, 3000), range(3000, 100000), range(100000, 50000000)])).

percentile() ->
    oneof([50, 90, 95, 99, 99.9, 100, range(1, 100)]).

%% Merging histograms = histogram of the pooled samples: the same percentiles.
prop_merged_percentiles_equal_pooled() ->
    ?FORALL({Nodes, P}, {non_empty(list(node_samples())), percentile()},
            begin
                Merged = terrain_bench_hdr:merge([terrain_bench_hdr:from_values(S) || S <- Nodes]),
                Pooled = terrain_bench_hdr:from_values(lists:append(Nodes)),
                terrain_bench_hdr:percentile(Merged, P) =:= terrain_bench_hdr:percentile(Pooled, P)
            end).

%% ... and each is the exact pooled sample of HdrHistogram's rank, up to the bucket
%% that holds it: at least that sample and at most a thousandth (plus one) above.
prop_merged_percentile_within_precision() ->
    ?FORALL({Nodes, P}, {non_empty(list(node_samples())), percentile()},
            begin
                All = lists:sort(lists:append(Nodes)),
                Merged = terrain_bench_hdr:merge([terrain_bench_hdr:from_values(S) || S <- Nodes]),
                case All of
                    [] ->
                        terrain_bench_hdr:percentile(Merged, P) =:= 0;
                    _ ->
                        Rank = max(1, trunc(P * length(All) / 100 + 0.5)),
                        Exact = lists:nth(Rank, All),
                        Got = terrain_bench_hdr:percentile(Merged, P),
                        ?WHENFAIL(io:format("exact ~p got ~p~n", [Exact, Got]),
                                  Got >= Exact andalso Got - Exact =< Exact div 1000 + 1)
                end
            end).
