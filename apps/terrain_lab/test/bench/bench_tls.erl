%% Benchmark: distribution over TLS (terrain_lab_tls, as `terrain up --tls' sets it up)
%% against plain TCP, in the same run. Two pairs of VMs on this machine run side by side,
%% one pair with `-proto_dist inet_tls' and the certificates terrain makes, one with the
%% default inet_tcp; each pair measures from its first VM to its second:
%%
%% - round trip of a small message (`{self(), Seq, ping}', answered `{Echo, Seq, pong}')
%%   by a process on the other VM, ?ROUND_TRIPS after ?WARMUP, median and p95 in µs;
%% - stream throughput: ?STREAM_MB MiB in 64 KiB binaries sent to a process on the other
%%   VM, timed from the first send to its answer after the last byte, MB/s (10^6 bytes).
%%
%% The pairs take turns, ?ROUNDS rounds, the order alternating, and each figure is the
%% median over rounds; the ratio TLS/TCP is the one to compare across machines.
-module(bench_tls).
-export([run/0]).
%% run on the first VM of a pair
-export([measure/2, echo/0, sink/2]).

-define(ROUNDS, 3).
-define(WARMUP, 1000).
-define(ROUND_TRIPS, 20000).
-define(CHUNK, 65536).
-define(STREAM_MB, 128).

run() ->
    Dir = filename:join(filename:basedir(user_cache, "terrain-bench"), "tls-" ++ os:getpid()),
    {ok, Host} = inet:gethostname(),
    Short = hd(string:split(Host, ".")),
    Id = os:getpid(),
    Names = #{tls => [list_to_atom("btls" ++ Id ++ "_" ++ S) || S <- ["a", "b"]],
              tcp => [list_to_atom("btcp" ++ Id ++ "_" ++ S) || S <- ["a", "b"]]},
    ok = terrain_lab_tls:create(Dir, #{nodes => [{N, Short} || N <- maps:get(tls, Names)], cli_host => Short}),
    Cookie = list_to_atom("bench" ++ Id),
    Paths = lists:append([["-pa", P] || P <- code:get_path(), string:find(P, "_build") =/= nomatch]),
    Start = fun(Name, Args) ->
                    {ok, Peer, Node} = peer:start_link(#{name => Name, connection => standard_io,
                                                         args => Args ++ Paths}),
                    true = peer:call(Peer, erlang, set_cookie, [Cookie]),
                    {Peer, Node}
            end,
    Pairs = #{tls => [Start(N, terrain_lab_tls:vm_args(terrain_lab_tls:optfile(Dir, N))) || N <- maps:get(tls, Names)],
              tcp => [Start(N, []) || N <- maps:get(tcp, Names)]},
    try
        Rounds = [[{Kind, measure_pair(maps:get(Kind, Pairs))} || Kind <- order(R)] || R <- lists:seq(1, ?ROUNDS)],
        Results = maps:from_list([{Kind, combine([M || Round <- Rounds, {K, M} <- Round, K =:= Kind])}
                                  || Kind <- [tcp, tls]]),
        report(Results)
    after
        [peer:stop(P) || {P, _} <- lists:append(maps:values(Pairs))],
        os:cmd("rm -rf " ++ Dir)
    end.

order(R) when R rem 2 =:= 1 -> [tcp, tls];
order(_) -> [tls, tcp].

measure_pair([{A, _}, {_, B}]) ->
    peer:call(A, ?MODULE, measure, [B, #{}], 300000).

%% On the pair's first VM: round trips to, then a stream into, a process on `Other'.
measure(Other, _Options) ->
    pong = net_adm:ping(Other),
    Echo = spawn(Other, ?MODULE, echo, []),
    _ = round_trips(Echo, ?WARMUP),
    Times = lists:sort(round_trips(Echo, ?ROUND_TRIPS)),
    exit(Echo, kill),
    Protocol = element(4, proplists:get_value(address, proplists:get_value(Other, element(2, net_kernel:nodes_info())))),
    Chunks = ?STREAM_MB * 1048576 div ?CHUNK,
    Sink = spawn(Other, ?MODULE, sink, [self(), Chunks * ?CHUNK]),
    Chunk = crypto:strong_rand_bytes(?CHUNK),
    T0 = erlang:monotonic_time(microsecond),
    _ = [Sink ! Chunk || _ <- lists:seq(1, Chunks)],
    receive {Sink, done} -> ok after 120000 -> error(stream_timeout) end,
    Us = erlang:monotonic_time(microsecond) - T0,
    #{protocol => Protocol,
      rtt_median_us => percentile(Times, 50), rtt_p95_us => percentile(Times, 95),
      mb_per_s => Chunks * ?CHUNK / Us}.

round_trips(Echo, N) ->
    [begin
         T0 = erlang:monotonic_time(nanosecond),
         Echo ! {self(), I, ping},
         receive {Echo, I, pong} -> (erlang:monotonic_time(nanosecond) - T0) / 1000 end
     end || I <- lists:seq(1, N)].

echo() ->
    receive {From, I, ping} -> From ! {self(), I, pong}, echo() end.

sink(From, Left) when Left =< 0 ->
    From ! {self(), done};
sink(From, Left) ->
    receive Bin when is_binary(Bin) -> sink(From, Left - byte_size(Bin)) end.

percentile(Sorted, P) ->
    lists:nth(max(1, round(P / 100 * length(Sorted))), Sorted).

combine(Measures) ->
    Median = fun(Key) -> median(lists:sort([maps:get(Key, M) || M <- Measures])) end,
    #{protocols => lists:usort([maps:get(protocol, M) || M <- Measures]),
      rtt_median_us => Median(rtt_median_us), rtt_p95_us => Median(rtt_p95_us), mb_per_s => Median(mb_per_s)}.

median(Sorted) ->
    lists:nth((length(Sorted) + 1) div 2, Sorted).

report(#{tcp := Tcp, tls := Tls}) ->
    io:format("distribution over TLS vs TCP, two local VM pairs, ~b rounds alternating (medians over rounds); "
              "~b round trips of a small message after ~b, a ~b MiB stream of 64 KiB binaries~n",
              [?ROUNDS, ?ROUND_TRIPS, ?WARMUP, ?STREAM_MB]),
    io:format("  ~-10s ~14s ~14s ~12s~n", ["", "RTT median us", "RTT p95 us", "stream MB/s"]),
    [io:format("  ~-10s ~14.1f ~14.1f ~12.1f   (connection protocol ~p)~n",
               [Label, float(maps:get(rtt_median_us, M)), float(maps:get(rtt_p95_us, M)), float(maps:get(mb_per_s, M)),
                maps:get(protocols, M)])
     || {Label, M} <- [{"tcp", Tcp}, {"tls", Tls}]],
    io:format("  ~-10s ~14.2f ~14.2f ~12.2f~n",
              ["tls/tcp", maps:get(rtt_median_us, Tls) / maps:get(rtt_median_us, Tcp),
               maps:get(rtt_p95_us, Tls) / maps:get(rtt_p95_us, Tcp), maps:get(mb_per_s, Tls) / maps:get(mb_per_s, Tcp)]).
