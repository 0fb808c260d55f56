%% @private
%% @doc HDR histograms of latencies in microseconds, with HdrHistogram's bucket
%% layout (lowest 1, highest 3,600,000,000 µs = one hour, 3 significant digits), so
%% that they can be written in HdrHistogram's V2 compressed encoding and read back by
%% HdrHistogram's own tools.
%%
%% Two forms:
%% <ul>
%% <li>a <em>recorder</em>: an `atomics' array of counts, one slot per bucket. Any
%% process records into it with one `atomics:add/3' (no message, no copy); its counts
%% only grow, so an interval's histogram is the difference of two snapshots and no
%% recorded value is ever lost or counted twice.</li>
%% <li>a <em>histogram</em>: an immutable sparse map from bucket index to count, which
%% merges by adding counts (histograms of the same layout merge exactly) and answers
%% percentiles the way HdrHistogram does.</li>
%% </ul>
%% The percentile at P is the highest value equivalent (within the precision) to the
%% value of rank `max(1, round(P/100 * N))' — HdrHistogram's definition, so a
%% merged histogram gives exactly what a histogram of the pooled samples gives.
-module(terrain_bench_hdr).

%% API: recording
-export([new_recorder/0,
         record/2,
         snapshot/1]).

%% API: histograms
-export([new/0,
         from_values/1,
         subtract/2,
         merge/1,
         count/1,
         percentile/2,
         min/1,
         max/1,
         mean/1,
         highest_equivalent/1]).

%% API: HdrHistogram V2 compressed encoding and interval logs
-export([encode/1,
         decode/1,
         log_header/2,
         log_line/4,
         parse_log/1]).

%% exports_not_used: checked on their own by terrain_bench_hdr_tests and prop_bench_hdr.
-ignore_xref([{new, 0}, {from_values, 1}, {highest_equivalent, 1}, {encode, 1}, {decode, 1}]).

-export_type([recorder/0, histogram/0]).

-define(SUB_BUCKET_HALF_MAGNITUDE, 10).              % 3 significant digits: 2048 sub-buckets
-define(SUB_BUCKET_HALF, 1024).
-define(SUB_BUCKET_COUNT, 2048).
-define(HIGHEST, 3600000000).                        % one hour in microseconds
-define(BUCKETS, 22).                                % buckets needed to cover HIGHEST
-define(COUNTS_LEN, ((?BUCKETS + 1) * ?SUB_BUCKET_HALF)).
-define(SIGNIFICANT_DIGITS, 3).
-define(ENCODING_COOKIE, 16#1c849313).               % V2 encoding cookie, word size bits 0x10
-define(COMPRESSION_COOKIE, 16#1c849314).            % V2 compressed encoding cookie

-type recorder() :: atomics:atomics_ref().
-type histogram() :: #{non_neg_integer() => pos_integer()}.   % bucket index => count

%%--------------------------------------------------------------------
%% Recording

%% @doc A new recorder (all counts zero).
-spec new_recorder() -> recorder().
new_recorder() ->
    atomics:new(?COUNTS_LEN, [{signed, false}]).

%% @doc Records one value in microseconds (negative values count as 0, values above
%% one hour as one hour).
-spec record(recorder(), integer()) -> ok.
record(Recorder, Value) ->
    atomics:add(Recorder, index(Value) + 1, 1).

%% @doc The recorder's counts now, as a histogram.
-spec snapshot(recorder()) -> histogram().
snapshot(Recorder) ->
    snapshot(Recorder, ?COUNTS_LEN, #{}).

snapshot(_Recorder, 0, Acc) ->
    Acc;
snapshot(Recorder, I, Acc) ->
    case atomics:get(Recorder, I) of
        0 -> snapshot(Recorder, I - 1, Acc);
        N -> snapshot(Recorder, I - 1, Acc#{I - 1 => N})
    end.

%%--------------------------------------------------------------------
%% Histograms

%% @doc The empty histogram.
-spec new() -> histogram().
new() ->
    #{}.

%% @doc The histogram of a list of values (microseconds).
-spec from_values([integer()]) -> histogram().
from_values(Values) ->
    lists:foldl(fun(V, Acc) -> I = index(V), Acc#{I => maps:get(I, Acc, 0) + 1} end, #{}, Values).

%% @doc `Later' minus `Earlier', two snapshots of one recorder: the values recorded in
%% between.
-spec subtract(histogram(), histogram()) -> histogram().
subtract(Later, Earlier) ->
    maps:fold(fun(I, N, Acc) ->
                      case N - maps:get(I, Earlier, 0) of
                          0 -> Acc;
                          D when D > 0 -> Acc#{I => D}
                      end
              end, #{}, Later).

%% @doc The sum of a list of histograms.
-spec merge([histogram()]) -> histogram().
merge(Histograms) ->
    lists:foldl(fun add/2, #{}, Histograms).

-spec add(histogram(), histogram()) -> histogram().
add(A, B) ->
    maps:fold(fun(I, N, Acc) -> Acc#{I => maps:get(I, Acc, 0) + N} end, A, B).

%% @doc The number of recorded values.
-spec count(histogram()) -> non_neg_integer().
count(H) ->
    lists:sum(maps:values(H)).

%% @doc The value at percentile `P' (0..100), HdrHistogram's way; 0 when empty.
-spec percentile(histogram(), number()) -> non_neg_integer().
percentile(H, P) when P >= 0, P =< 100 ->
    case count(H) of
        0 -> 0;
        Total ->
            Rank = erlang:max(1, trunc(P * Total / 100 + 0.5)),
            Index = rank_index(lists:sort(maps:to_list(H)), Rank, 0),
            case P == 0 of
                true -> lowest_equivalent(value_at(Index));
                false -> highest_equivalent(value_at(Index))
            end
    end.

rank_index([{I, N} | Rest], Rank, Seen) ->
    case Seen + N >= Rank of
        true -> I;
        false -> rank_index(Rest, Rank, Seen + N)
    end.

%% @doc The smallest recorded value (its bucket's lowest equivalent); 0 when empty.
-spec min(histogram()) -> non_neg_integer().
min(H) when map_size(H) =:= 0 -> 0;
min(H) -> lowest_equivalent(value_at(lists:min(maps:keys(H)))).

%% @doc The largest recorded value (its bucket's highest equivalent); 0 when empty.
-spec max(histogram()) -> non_neg_integer().
max(H) when map_size(H) =:= 0 -> 0;
max(H) -> highest_equivalent(value_at(lists:max(maps:keys(H)))).

%% @doc The mean, each value taken as its bucket's median equivalent; 0.0 when empty.
-spec mean(histogram()) -> float().
mean(H) when map_size(H) =:= 0 -> 0.0;
mean(H) ->
    Sum = maps:fold(fun(I, N, Acc) -> Acc + N * median_equivalent(value_at(I)) end, 0, H),
    Sum / count(H).

%% @doc The largest value that falls in the same bucket as `Value'.
-spec highest_equivalent(non_neg_integer()) -> non_neg_integer().
highest_equivalent(Value) ->
    lowest_equivalent(Value) + range_size(Value) - 1.

%%--------------------------------------------------------------------
%% Bucket layout (HdrHistogram's, unit magnitude 0)

index(Value) when Value =< 0 -> 0;
index(Value) when Value > ?HIGHEST -> index(?HIGHEST);
index(Value) ->
    Bucket = bucket(Value),
    SubBucket = Value bsr Bucket,
    ((Bucket + 1) bsl ?SUB_BUCKET_HALF_MAGNITUDE) + (SubBucket - ?SUB_BUCKET_HALF).

%% The bucket of a value: its bit length minus 11, at least 0 (a comparison tree:
%% OTP 25 has no bit-length BIF).
bucket(V) when V < 16#800 -> 0;
bucket(V) when V < 16#400000 ->
    if V < 16#1000 -> 1; V < 16#2000 -> 2; V < 16#4000 -> 3; V < 16#8000 -> 4;
       V < 16#10000 -> 5; V < 16#20000 -> 6; V < 16#40000 -> 7; V < 16#80000 -> 8;
       V < 16#100000 -> 9; V < 16#200000 -> 10; true -> 11
    end;
bucket(V) ->
    if V < 16#800000 -> 12; V < 16#1000000 -> 13; V < 16#2000000 -> 14; V < 16#4000000 -> 15;
       V < 16#8000000 -> 16; V < 16#10000000 -> 17; V < 16#20000000 -> 18; V < 16#40000000 -> 19;
       V < 16#80000000 -> 20; true -> 21
    end.

value_at(Index) ->
    Bucket = (Index bsr ?SUB_BUCKET_HALF_MAGNITUDE) - 1,
    SubBucket = (Index band (?SUB_BUCKET_HALF - 1)) + ?SUB_BUCKET_HALF,
    case Bucket < 0 of
        true -> SubBucket - ?SUB_BUCKET_HALF;
        false -> SubBucket bsl Bucket
    end.

range_size(Value) ->
    V = erlang:max(0, Value),
    Bucket = bucket(V),
    SubBucket = V bsr Bucket,
    1 bsl (Bucket + case SubBucket >= ?SUB_BUCKET_COUNT of true -> 1; false -> 0 end).

lowest_equivalent(Value) ->
    V = erlang:max(0, Value),
    Bucket = bucket(V),
    (V bsr Bucket) bsl Bucket.

median_equivalent(Value) ->
    lowest_equivalent(Value) + (range_size(Value) bsr 1).

%%--------------------------------------------------------------------
%% V2 compressed encoding: base64 of [cookie, length, deflate(header ++ counts)],
%% counts as ZigZag LEB128 varints, a run of K zero counts as one varint of -K.

%% @doc The histogram in HdrHistogram's V2 compressed encoding, base64 (as in logs).
-spec encode(histogram()) -> binary().
encode(H) ->
    Limit = case map_size(H) of 0 -> 0; _ -> lists:max(maps:keys(H)) + 1 end,
    Counts = iolist_to_binary(encode_counts(H, 0, Limit, [])),
    Header = <<?ENCODING_COOKIE:32, (byte_size(Counts)):32, 0:32, ?SIGNIFICANT_DIGITS:32,
               1:64, ?HIGHEST:64, 1.0:64/float>>,
    Compressed = zlib:compress([Header, Counts]),
    base64:encode(<<?COMPRESSION_COOKIE:32, (byte_size(Compressed)):32, Compressed/binary>>).

encode_counts(_H, I, Limit, Acc) when I >= Limit ->
    lists:reverse(Acc);
encode_counts(H, I, Limit, Acc) ->
    case maps:get(I, H, 0) of
        0 ->
            Zeros = zero_run(H, I, Limit, 0),
            Word = case Zeros of 1 -> 0; _ -> -Zeros end,
            encode_counts(H, I + Zeros, Limit, [varint(zigzag(Word)) | Acc]);
        N ->
            encode_counts(H, I + 1, Limit, [varint(zigzag(N)) | Acc])
    end.

zero_run(H, I, Limit, N) when I < Limit ->
    case maps:is_key(I, H) of
        false -> zero_run(H, I + 1, Limit, N + 1);
        true -> N
    end;
zero_run(_H, _I, _Limit, N) ->
    N.

zigzag(N) when N >= 0 -> N bsl 1;
zigzag(N) -> ((-N) bsl 1) - 1.

unzigzag(Z) when Z band 1 =:= 0 -> Z bsr 1;
unzigzag(Z) -> -((Z + 1) bsr 1).

%% LEB128 as HdrHistogram writes it: 7 bits a byte, at most 9 bytes (the ninth
%% carries 8 bits).
varint(V) -> varint(V, 1).

varint(V, 9) -> <<V:8>>;
varint(V, _N) when V < 128 -> <<V:8>>;
varint(V, N) -> <<1:1, (V band 127):7, (varint(V bsr 7, N + 1))/binary>>.

read_varint(Bin) -> read_varint(Bin, 0, 0, 1).

read_varint(<<B:8, Rest/binary>>, Shift, Acc, 9) -> {Acc bor (B bsl Shift), Rest};
read_varint(<<0:1, B:7, Rest/binary>>, Shift, Acc, _N) -> {Acc bor (B bsl Shift), Rest};
read_varint(<<1:1, B:7, Rest/binary>>, Shift, Acc, N) -> read_varint(Rest, Shift + 7, Acc bor (B bsl Shift), N + 1).

%% @doc Decodes a histogram from its V2 compressed encoding (base64). Only the layout
%% this module writes is accepted.
-spec decode(binary()) -> {ok, histogram()} | {error, term()}.
decode(Base64) ->
    try
        <<?COMPRESSION_COOKIE:32, Length:32, Compressed:Length/binary>> = base64:decode(Base64),
        <<?ENCODING_COOKIE:32, PayloadLength:32, 0:32, ?SIGNIFICANT_DIGITS:32, 1:64, ?HIGHEST:64,
          _Ratio:64/float, Payload:PayloadLength/binary, _/binary>> = zlib:uncompress(Compressed),
        {ok, decode_counts(Payload, 0, #{})}
    catch
        error:_ -> {error, bad_histogram_encoding}
    end.

decode_counts(<<>>, _I, Acc) ->
    Acc;
decode_counts(Bin, I, Acc) ->
    {Z, Rest} = read_varint(Bin),
    case unzigzag(Z) of
        N when N < 0 -> decode_counts(Rest, I - N, Acc);
        0 -> decode_counts(Rest, I + 1, Acc);
        N -> decode_counts(Rest, I + 1, Acc#{I => N})
    end.

%% @doc The header of an interval log: format version, start time, base time (both
%% in seconds since the epoch: timestamps in the log are relative to the base time)
%% and the legend, as HdrHistogram's HistogramLogWriter writes them.
-spec log_header(Comment :: iodata(), StartMs :: integer()) -> iodata().
log_header(Comment, StartMs) ->
    Seconds = seconds(StartMs),
    Date = calendar:system_time_to_rfc3339(StartMs, [{unit, millisecond}, {offset, "Z"}]),
    ["#", Comment, "\n",
     "#[Histogram log format version 1.3]\n",
     "#[StartTime: ", Seconds, " (seconds since epoch), ", Date, "]\n",
     "#[BaseTime: ", Seconds, " (seconds since epoch)]\n",
     "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"].

%% @doc One interval line: start (ms after the base time), length (ms), the
%% histogram. The max column is in milliseconds (the unit ratio 1000 from µs).
-spec log_line(Tag :: iodata(), OffsetMs :: non_neg_integer(), LengthMs :: non_neg_integer(), histogram()) -> iodata().
log_line(Tag, OffsetMs, LengthMs, H) ->
    ["Tag=", Tag, ",", seconds(OffsetMs), ",", seconds(LengthMs), ",",
     float_to_list(max(H) / 1000, [{decimals, 3}]), ",", encode(H), "\n"].

seconds(Ms) ->
    float_to_list(Ms / 1000, [{decimals, 3}]).

%% @doc Parses an interval log this module wrote: the histograms of its intervals in
%% order, each with its start offset and length in seconds. A torn last line (a crash
%% while writing) is skipped.
-spec parse_log(binary()) -> [{Start :: float(), Length :: float(), histogram()}].
parse_log(Bin) ->
    lists:filtermap(fun parse_line/1, binary:split(Bin, <<"\n">>, [global, trim_all])).

parse_line(<<"Tag=", Rest/binary>>) ->
    case binary:split(Rest, <<",">>, [global]) of
        [_Tag, Start, Length, _Max, Payload] ->
            case decode(Payload) of
                {ok, H} -> {true, {binary_to_float(Start), binary_to_float(Length), H}};
                {error, _} -> false
            end;
        _ ->
            false
    end;
parse_line(_) ->
    false.
