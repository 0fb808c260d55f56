%% EUnit tests of terrain_bench_hdr: HdrHistogram's bucket layout, percentiles,
%% merging, the V2 encoding and the interval log.
-module(terrain_bench_hdr_tests).
-include_lib("eunit/include/eunit.hrl").

small_values_are_exact_test() ->
    H = terrain_bench_hdr:from_values(lists:seq(0, 2047)),
    ?assertEqual(2048, terrain_bench_hdr:count(H)),
    ?assertEqual(0, terrain_bench_hdr:min(H)),
    ?assertEqual(2047, terrain_bench_hdr:max(H)),
    ?assertEqual(1023, terrain_bench_hdr:percentile(H, 50)).

three_significant_digits_test() ->
    %% every value's bucket spans less than a thousandth of it (above 2048)
    [begin
         High = terrain_bench_hdr:highest_equivalent(V),
         ?assert(High >= V),
         ?assert(High - V =< V div 1000 + 1)
     end || V <- [2048, 2049, 4095, 4096, 123456, 999999, 1000000, 3599999999]].

percentile_follows_hdrhistogram_rank_test() ->
    %% rank max(1, round(P/100 * N)): 100 values 1..100, p50 is the 50th, p99 the 99th
    H = terrain_bench_hdr:from_values(lists:seq(1, 100)),
    ?assertEqual(50, terrain_bench_hdr:percentile(H, 50)),
    ?assertEqual(99, terrain_bench_hdr:percentile(H, 99)),
    ?assertEqual(100, terrain_bench_hdr:percentile(H, 100)),
    ?assertEqual(0, terrain_bench_hdr:percentile(terrain_bench_hdr:new(), 99)).

values_outside_the_range_are_clamped_test() ->
    H = terrain_bench_hdr:from_values([-5, 10000000000]),
    ?assertEqual(0, terrain_bench_hdr:min(H)),
    ?assertEqual(terrain_bench_hdr:highest_equivalent(3600000000), terrain_bench_hdr:max(H)).

recorder_snapshots_subtract_to_the_interval_test() ->
    R = terrain_bench_hdr:new_recorder(),
    [terrain_bench_hdr:record(R, V) || V <- [5, 5, 700, 90000]],
    First = terrain_bench_hdr:snapshot(R),
    [terrain_bench_hdr:record(R, V) || V <- [5, 12345]],
    Second = terrain_bench_hdr:snapshot(R),
    ?assertEqual(terrain_bench_hdr:from_values([5, 12345]), terrain_bench_hdr:subtract(Second, First)),
    ?assertEqual(terrain_bench_hdr:from_values([5, 5, 700, 90000, 5, 12345]), Second).

merge_adds_counts_test() ->
    A = terrain_bench_hdr:from_values([1, 2, 3]),
    B = terrain_bench_hdr:from_values([3, 4000]),
    ?assertEqual(terrain_bench_hdr:from_values([1, 2, 3, 3, 4000]), terrain_bench_hdr:merge([A, B])).

%% The seed's weakness, shown: two nodes, one fast with many operations, one slow
%% with few. The mean of their p99s is far from the p99 of all the operations.
mean_of_per_node_percentiles_differs_test() ->
    Fast = terrain_bench_hdr:from_values(lists:duplicate(9900, 100)),
    Slow = terrain_bench_hdr:from_values(lists:duplicate(100, 10000)),
    Merged = terrain_bench_hdr:merge([Fast, Slow]),
    ?assertEqual(100, terrain_bench_hdr:percentile(Merged, 99)),
    MeanOfP99 = (terrain_bench_hdr:percentile(Fast, 99) + terrain_bench_hdr:percentile(Slow, 99)) / 2,
    ?assertEqual(10007, terrain_bench_hdr:percentile(Slow, 99)),
    ?assertEqual(5053.5, MeanOfP99).

encode_decode_round_trip_test() ->
    rand:seed(exsss, {1, 2, 3}),
    Values = [rand:uniform(5000000) || _ <- lists:seq(1, 5000)] ++ [0, 1, 1, 2048],
    H = terrain_bench_hdr:from_values(Values),
    ?assertEqual({ok, H}, terrain_bench_hdr:decode(terrain_bench_hdr:encode(H))),
    ?assertEqual({ok, #{}}, terrain_bench_hdr:decode(terrain_bench_hdr:encode(#{}))),
    ?assertEqual({error, bad_histogram_encoding}, terrain_bench_hdr:decode(<<"HISTFAAAAnotreally">>)).

encoding_has_hdrhistogram_headers_test() ->
    <<Cookie:32, Length:32, Compressed/binary>> = base64:decode(terrain_bench_hdr:encode(terrain_bench_hdr:from_values([7]))),
    ?assertEqual(16#1c849314, Cookie),
    ?assertEqual(byte_size(Compressed), Length),
    <<Inner:32, _PayloadLength:32, 0:32, 3:32, 1:64, 3600000000:64, 1.0:64/float, _/binary>> = zlib:uncompress(Compressed),
    ?assertEqual(16#1c849313, Inner).

log_round_trip_and_torn_line_test() ->
    H1 = terrain_bench_hdr:from_values([10, 20, 30]),
    H2 = terrain_bench_hdr:from_values([40]),
    Log = iolist_to_binary([terrain_bench_hdr:log_header("test", 1795470517589),
                            terrain_bench_hdr:log_line("rpc", 0, 1000, H1),
                            terrain_bench_hdr:log_line("rpc", 1000, 1000, H2)]),
    ?assertMatch(<<"#test\n#[Histogram log format version 1.3]\n#[StartTime: 1795470517.589 ", _/binary>>, Log),
    ?assertEqual([{0.0, 1.0, H1}, {1.0, 1.0, H2}], terrain_bench_hdr:parse_log(Log)),
    Torn = binary:part(Log, 0, byte_size(Log) - 10),
    ?assertEqual([{0.0, 1.0, H1}], terrain_bench_hdr:parse_log(Torn)).
