%% Benchmark: how closely emulated links match their spec (docs/NETEM.md).
%%
%% 1. Latency: one cluster whose node a sees the one-way latencies 0, 200 µs, 1 ms,
%%    5 ms and 20 ms to five other nodes; 1,000 round trips to each: the median
%%    against 2 × spec (goal: error ≤ 10% + 100 µs) and the p99.
%% 2. Throughput: a stream of 1 MB messages through an unthrottled proxy (latency 0)
%%    against a direct connection, alternating round by round (goal: median ratio ≥ 50%).
%% 3. Bandwidth: the same stream over links with `bandwidth' set (goal: within ±10%).
%%
%% Figures depend on the machine's load: the load average is printed first, with the
%% proxies measured (native by default, `TERRAIN_NETEM_PROXY=erlang' for the Erlang ones).
-module(bench_netem).
-export([run/0, throughput/0]).

%% Run on the cluster nodes.
-export([round_trips/3, round_trips/4, echo/0, send_stream/3, receive_stream/2]).

-define(ROUND_TRIPS, 1000).
-define(MB, 1000000).
-define(CALL, 120000).

run() ->
    {ok, Load} = file:read_file("/proc/loadavg"),
    [L1, L5, L15 | _] = string:lexemes(binary_to_list(Load), " "),
    io:format("load average before (1, 5, 15 min): ~s ~s ~s on ~b cores; ~s proxies (TERRAIN_NETEM_PROXY)~n",
              [L1, L5, L15, erlang:system_info(logical_processors_available),
               element(1, terrain_lab_netem:idle_cost())]),
    latency(),
    throughput(),
    bandwidth().

%%--------------------------------------------------------------------

latency() ->
    %% a-b meet in g0, a-c in g200, a-d in g1000, a-e in g5000, a-f only in the cluster.
    Terms = [{cluster, bench, #{latency => 20000}},
             {group, g5000, #{latency => 5000},
              [{group, g1000, #{latency => 1000},
                [{group, g200, #{latency => 200},
                  [{group, g0, #{latency => 0}, [{node, a, #{}}, {node, b, #{}}]},
                   {node, c, #{}}]},
                 {node, d, #{}}]},
               {node, e, #{}}]},
             {node, f, #{}}],
    with_cluster(Terms, "lat", #{}, fun(Nodes) ->
        #{a := A} = Nodes,
        io:format("~nround trips from a, ~b each (us):~n", [?ROUND_TRIPS]),
        io:format("~10s ~10s ~10s ~10s ~10s ~10s  ~s~n",
                  ["one-way", "expected", "median", "error", "goal", "p99", "within goal"]),
        lists:foreach(fun({To, OneWay}) ->
                              Times = erpc:call(A, ?MODULE, round_trips, [maps:get(To, Nodes), ?ROUND_TRIPS, 20], ?CALL),
                              Expected = 2 * OneWay,
                              Median = percentile(Times, 50),
                              Goal = Expected div 10 + 100,
                              io:format("~10b ~10b ~10b ~10b ~10b ~10b  ~s~n",
                                        [OneWay, Expected, Median, Median - Expected, Goal, percentile(Times, 99),
                                         yes_no(abs(Median - Expected) =< Goal)])
                      end, [{b, 0}, {c, 200}, {d, 1000}, {e, 5000}, {f, 20000}])
    end),
    %% The same round trip without a proxy, for reference: back to back, and after the
    %% nodes were idle as long as an emulated round trip keeps them (their schedulers
    %% fall asleep, and waking them costs time the emulated one pays too).
    with_cluster([{cluster, bench, #{}}, {node, a, #{}}, {node, b, #{}}], "direct", #{netem => false},
                 fun(#{a := A, b := B}) ->
                         io:format("direct connection, no proxy:~n"),
                         lists:foreach(
                           fun({Idle, N}) ->
                                   Times = erpc:call(A, ?MODULE, round_trips, [B, N, 20, Idle], ?CALL),
                                   io:format("  ~b round trips, ~2b ms idle before each: median ~b, p99 ~b~n",
                                             [N, Idle, percentile(Times, 50), percentile(Times, 99)])
                           end, [{0, ?ROUND_TRIPS}, {2, 200}, {10, 200}, {40, 200}])
                 end).

%% Part 2 alone (`bench_netem:throughput()'). Proxied and direct alternate, round by
%% round, so that each round's ratio has its baseline from the same minute of a shared
%% machine's load; the goal is judged on the median of the rounds' ratios.
throughput() ->
    Count = 200,
    Rounds = 7,
    Terms = [{cluster, bench, #{latency => 0}}, {node, a, #{}}, {node, b, #{}}],
    Rate = fun(Tag, Netem) ->
                   with_cluster(Terms, Tag, #{netem => Netem}, fun(Nodes) -> stream_rate(Nodes, Count) end)
           end,
    Pairs = [begin
                 P = Rate("tp" ++ integer_to_list(I), true),
                 D = Rate("td" ++ integer_to_list(I), false),
                 {P, D}
             end || I <- lists:seq(1, Rounds)],
    {Proxied, Direct} = lists:unzip(Pairs),
    Ratios = [100 * P / D || {P, D} <- Pairs],
    Median = percentile(Ratios, 50),
    io:format("~nstream of ~b messages of 1 MB, a to b (MB/s), ~b rounds, proxied then direct in each:~n"
              "  through an unthrottled proxy: median ~.1f (runs ~ts)~n"
              "  direct connection:            median ~.1f (runs ~ts)~n"
              "  ratio per round (%): ~ts~n"
              "  ratio median ~b%, spread ~b-~b% (goal >= 50%: ~s)~n",
              [Count, Rounds, percentile(Proxied, 50), runs(Proxied), percentile(Direct, 50), runs(Direct),
               runs(Ratios), round(Median), round(lists:min(Ratios)), round(lists:max(Ratios)),
               yes_no(Median >= 50)]).

bandwidth() ->
    io:format("~nstream of 1 MB messages over a link with bandwidth set (receiver: first to last message):~n"),
    lists:foreach(fun({Bandwidth, Count}) ->
                          Terms = [{cluster, bench, #{bandwidth => Bandwidth}}, {node, a, #{}}, {node, b, #{}}],
                          Tag = "bw" ++ integer_to_list(Bandwidth div ?MB),
                          Rate = with_cluster(Terms, Tag, #{}, fun(Nodes) -> paced_rate(Nodes, Count) end),
                          Error = 100 * (Rate * ?MB - Bandwidth) / Bandwidth,
                          io:format("  bandwidth ~6.1f MB/s: measured ~6.2f MB/s over ~b MB, error ~ts% (goal +-10%: ~s)~n",
                                    [Bandwidth / ?MB, Rate, Count, signed(Error), yes_no(abs(Error) =< 10)])
                  end, [{5 * ?MB, 15}, {25 * ?MB, 75}]).

%% MB/s of a stream of `Count' 1 MB messages from a to b, timed at the sender from
%% the first send to the receiver's answer after the last message.
stream_rate(#{a := A, b := B}, Count) ->
    Receiver = erpc:call(B, erlang, spawn, [?MODULE, receive_stream, [self(), Count]], ?CALL),
    #{seconds := Seconds} = erpc:call(A, ?MODULE, send_stream, [Receiver, Count, ?MB], ?CALL),
    receive {received, Receiver, _} -> ok after ?CALL -> error(no_report) end,
    Count / Seconds.

%% MB/s at the receiver, between the arrival of the first and of the last message.
paced_rate(#{a := A, b := B}, Count) ->
    Receiver = erpc:call(B, erlang, spawn, [?MODULE, receive_stream, [self(), Count]], ?CALL),
    _ = erpc:call(A, ?MODULE, send_stream, [Receiver, Count, ?MB], ?CALL),
    receive {received, Receiver, #{first := First, last := Last}} -> (Count - 1) / ((Last - First) / 1.0e6)
    after ?CALL -> error(no_report)
    end.

%%--------------------------------------------------------------------
%% Run on the cluster nodes

%% Round trip times (µs, sorted) to a fresh echo process on `Node'.
round_trips(Node, N, Warm) ->
    round_trips(Node, N, Warm, 0).

%% ... each after `IdleMs' without traffic.
round_trips(Node, N, Warm, IdleMs) ->
    Echo = spawn(Node, ?MODULE, echo, []),
    [begin Echo ! {self(), warm}, receive warm -> ok end end || _ <- lists:seq(1, Warm)],
    Times = [begin
                 _ = IdleMs > 0 andalso receive after IdleMs -> true end,
                 T0 = erlang:monotonic_time(microsecond),
                 Echo ! {self(), ping},
                 receive ping -> erlang:monotonic_time(microsecond) - T0 end
             end || _ <- lists:seq(1, N)],
    exit(Echo, kill),
    lists:sort(Times).

echo() ->
    receive {From, Message} -> From ! Message, echo() end.

%% Sends `Count' binaries of `Size' bytes, then waits for the receiver's answer.
send_stream(Receiver, Count, Size) ->
    Payload = binary:copy(<<"terrain!">>, Size div 8),
    T0 = erlang:monotonic_time(microsecond),
    [Receiver ! {chunk, self(), Payload} || _ <- lists:seq(1, Count)],
    Receiver ! {done, self()},
    receive {done, Receiver} -> ok end,
    #{seconds => (erlang:monotonic_time(microsecond) - T0) / 1.0e6}.

%% Receives `Count' chunks; reports the arrival times (µs) of the first and the last.
receive_stream(Report, Count) ->
    {First, Last} = receive_chunks(Count, undefined, undefined),
    receive {done, Sender} -> Sender ! {done, self()} end,
    Report ! {received, self(), #{first => First, last => Last}}.

receive_chunks(0, First, Last) ->
    {First, Last};
receive_chunks(Count, First, _Last) ->
    receive
        {chunk, _, _} ->
            Now = erlang:monotonic_time(microsecond),
            receive_chunks(Count - 1, case First of undefined -> Now; _ -> First end, Now)
    end.

%%--------------------------------------------------------------------

with_cluster(Terms, Tag, Options, Fun) ->
    {ok, Spec} = terrain_lab_spec:from_terms(Terms, undefined),
    Prefix = "bn" ++ os:getpid() ++ "_" ++ Tag ++ "_",
    {ok, Cluster} = terrain_lab:start_cluster(Spec, Options#{prefix => Prefix,
                                                             code_path => [filename:dirname(code:which(?MODULE))]}),
    try
        Fun(maps:from_list([{Name, Node} || #{name := Name, node := Node} <- terrain_lab:cluster_nodes(Cluster)]))
    after
        ok = terrain_lab:stop_cluster(Cluster)
    end.

percentile(Values, P) ->
    Sorted = lists:sort(Values),
    lists:nth(max(1, min(length(Sorted), round(P / 100 * length(Sorted)))), Sorted).

runs(Rates) ->
    lists:join(", ", [io_lib:format("~.1f", [R]) || R <- Rates]).

signed(X) when X >= 0 -> io_lib:format("+~.1f", [X]);
signed(X) -> io_lib:format("~.1f", [X]).

yes_no(true) -> "yes";
yes_no(false) -> "NO".
