%% Benchmark of EventSpace's collectors and event space (`make bench'; figures go to
%% docs/BENCHMARKS.md with the command that produced them).
%%
%% <ul>
%% <li>cost per event of `terrain_events:emit/3' and of `terrain_events:collect/3' (the
%%     paths collector), beside a bare loop that calls a no-op function with the same
%%     arguments: batches of 200,000 calls, the three loops in turn in every round,
%%     median per call over 15 rounds, in wall-clock time and in the VM's CPU time
%%     (the machine is shared: wall-clock time includes the time the OS gave the
%%     cores to other work) — goal: ≤ 0.5 µs; then the cost of each step of an emit;</li>
%% <li>the tracing collector: a process sends 20,000 messages to an echo process and
%%     waits for each reply, traced and untraced in turn (ABAB, 7 rounds), until the
%%     tracer has recorded every trace message; cost per traced message, reported;</li>
%% <li>a burst of 10× a ring's capacity (10,000 events into a ring of 1,000 and
%%     100,000 into a ring of 10,000): memory before and after, events dropped.</li>
%% </ul>
-module(bench_events).

-export([run/0]).

%% the bare loop's callee
-export([noop/3]).

-define(ROUNDS, 15).
-define(NAME, [bench, event]).
-define(MEASUREMENTS, #{duration_us => 812}).
-define(METADATA, #{worker => 3, step => 17}).

run() ->
    {ok, _} = application:ensure_all_started(terrain_events),
    io:format("the machine is shared: other work runs on its 2 cores; figures are medians of loops run in turn~n"),
    emit_cost(),
    breakdown(),
    trace_cost(),
    burst(),
    ok.

%%--------------------------------------------------------------------

-spec noop([atom()], map(), map()) -> ok.
noop(_Name, _Measurements, _Metadata) ->
    ok.

bare(0) -> ok;
bare(N) -> ok = ?MODULE:noop(?NAME, ?MEASUREMENTS, ?METADATA), bare(N - 1).

emit(0) -> ok;
emit(N) -> ok = terrain_events:emit(?NAME, ?MEASUREMENTS, ?METADATA), emit(N - 1).

collect(0) -> ok;
collect(N) -> ok = terrain_events:collect(paths, N, ?METADATA), collect(N - 1).

%% Wall-clock and CPU microseconds per call over ?CPU_BATCH calls (CPU: the VM's
%% runtime, which leaves out the time the OS gave the cores to other work).
-define(CPU_BATCH, 200000).
per_call_wall_cpu(Fun) ->
    {R0, _} = erlang:statistics(runtime),
    T0 = erlang:monotonic_time(nanosecond),
    ok = Fun(?CPU_BATCH),
    T1 = erlang:monotonic_time(nanosecond),
    {R1, _} = erlang:statistics(runtime),
    {(T1 - T0) / ?CPU_BATCH / 1000, (R1 - R0) * 1000 / ?CPU_BATCH}.

emit_cost() ->
    Loops = [{"bare loop (no-op call)", fun bare/1}, {"terrain_events:emit/3", fun emit/1},
             {"terrain_events:collect/3 (paths)", fun collect/1}],
    [per_call_wall_cpu(F) || {_, F} <- Loops],   % warm up
    Rounds = [[per_call_wall_cpu(F) || {_, F} <- Loops] || _ <- lists:seq(1, ?ROUNDS)],
    io:format("~ncost per call (us; ~b rounds of ~b calls, the three loops in turn each round):~n",
              [?ROUNDS, ?CPU_BATCH]),
    io:format("  ~-34s ~10s ~8s ~8s ~10s  ~s~n", ["", "wall p50", "p10", "p90", "CPU p50", "goal <= 0.5 us (CPU)"]),
    Medians = [begin
                   Wall = [W || {W, _} <- [lists:nth(I, R) || R <- Rounds]],
                   Cpu = [C || {_, C} <- [lists:nth(I, R) || R <- Rounds]],
                   io:format("  ~-34s ~10.3f ~8.3f ~8.3f ~10.3f  ~s~n",
                             [Label, median(Wall), pct(Wall, 0.1), pct(Wall, 0.9), median(Cpu),
                              case I of 1 -> ""; _ -> verdict(median(Cpu)) end]),
                   {median(Wall), median(Cpu)}
               end || {I, {Label, _}} <- lists:zip(lists:seq(1, length(Loops)), Loops)],
    [{BareW, BareC}, {EmitW, EmitC}, {CollectW, CollectC}] = Medians,
    io:format("  minus the bare loop: emit ~.3f us wall, ~.3f us CPU; collect ~.3f us wall, ~.3f us CPU~n",
              [EmitW - BareW, EmitC - BareC, CollectW - BareW, CollectC - BareC]).

verdict(X) when X =< 0.5 -> "met";
verdict(_) -> "NOT met".

%% Where an emit's time goes: each of its steps in a loop of its own.
breakdown() ->
    Ring = terrain_events_space:ring(explicit),
    A = atomics:new(1, []),
    Tab = ets:new(bench_breakdown, [set, public]),
    Steps = [{"persistent_term:get/2", fun pt/1},
             {"atomics:add_get/3", fun(N) -> at(A, N) end},
             {"erlang:monotonic_time()", fun mt/1},
             {"erlang:system_info(scheduler_id)", fun si/1},
             {"ets:insert/2 of an event tuple", fun(N) -> et(Tab, N) end},
             {"terrain_events_ring:write/5", fun(N) -> rw(Ring, N) end}],
    [per_call_wall_cpu(F) || {_, F} <- Steps],
    Rounds = [[per_call_wall_cpu(F) || {_, F} <- Steps] || _ <- lists:seq(1, 5)],
    io:format("  where the time goes (us per call, median of 5 rounds; wall, CPU):~n"),
    [io:format("    ~-34s ~8.3f ~8.3f~n", [Label, median([element(1, lists:nth(I, R)) || R <- Rounds]),
                                           median([element(2, lists:nth(I, R)) || R <- Rounds])])
     || {I, {Label, _}} <- lists:zip(lists:seq(1, length(Steps)), Steps)],
    ets:delete(Tab).

pt(0) -> ok; pt(N) -> _ = persistent_term:get({terrain_events_space, explicit}, undefined), pt(N - 1).
at(_, 0) -> ok; at(A, N) -> _ = atomics:add_get(A, 1, 1), at(A, N - 1).
mt(0) -> ok; mt(N) -> _ = erlang:monotonic_time(), mt(N - 1).
si(0) -> ok; si(N) -> _ = erlang:system_info(scheduler_id), si(N - 1).
et(_, 0) -> ok; et(T, N) -> true = ets:insert(T, {N band 65535, N, 1, self(), ?NAME, ?MEASUREMENTS, ?METADATA}), et(T, N - 1).
rw(_, 0) -> ok; rw(R, N) -> true = terrain_events_ring:write(R, ?NAME, ?MEASUREMENTS, ?METADATA, self()), rw(R, N - 1).

%%--------------------------------------------------------------------

-define(MESSAGES, 20000).

trace_cost() ->
    Rounds = [begin
                  Untraced = ping_pong(false),
                  Traced = ping_pong(true),
                  {Untraced, Traced}
              end || _ <- lists:seq(1, 7)],
    U = median([A || {A, _} <- Rounds]),
    T = median([B || {_, B} <- Rounds]),
    io:format("~ntracing collector: ~b request/reply pairs to an echo process, traced and untraced in turn "
              "(7 rounds, medians):~n", [?MESSAGES]),
    io:format("  untraced ~.1f ms, traced ~.1f ms (until the tracer recorded all ~b trace messages)~n",
              [U / 1000, T / 1000, 2 * ?MESSAGES]),
    io:format("  cost per traced message (a send or a receive of the echo): ~.2f us~n",
              [(T - U) / (2 * ?MESSAGES)]).

%% Microseconds for the exchanges (and, traced, until the tracer has recorded them).
ping_pong(Trace) ->
    Echo = spawn(fun Loop() -> receive {From, M} -> From ! M, Loop(); stop -> ok end end),
    Tracers = case Trace of
                  true -> {ok, Ts} = terrain_events:trace([Echo], #{}), Ts;
                  false -> []
              end,
    T0 = erlang:monotonic_time(microsecond),
    ok = exchange(Echo, ?MESSAGES),
    Recorded = [maps:get(recorded, terrain_events:stop_trace(Tr)) || Tr <- Tracers],
    T1 = erlang:monotonic_time(microsecond),
    Echo ! stop,
    true = Recorded =:= [] orelse Recorded =:= [2 * ?MESSAGES],
    T1 - T0.

exchange(_Echo, 0) -> ok;
exchange(Echo, N) ->
    Echo ! {self(), N},
    receive N -> exchange(Echo, N - 1) end.

%%--------------------------------------------------------------------

burst() ->
    Shards = erlang:system_info(schedulers),
    io:format("~nburst of 10x a ring's capacity (~b shards, one per scheduler; events of one shape: 2 measurements,~n"
              "2 metadata keys; bound: ~b times the memory of one full shard, measured on a ring of one shard):~n",
              [Shards, Shards]),
    io:format("  ~8s ~9s ~14s ~14s ~9s ~9s ~9s  ~s~n",
              ["capacity", "emitted", "bound bytes", "after bytes", "written", "kept", "dropped", "within bound"]),
    lists:foreach(
      fun(Capacity) ->
              ok = terrain_events:new_collector(bench_burst, Capacity),
              Bound = Shards * full_shard_bytes(terrain_events_ring:capacity(terrain_events_space:ring(bench_burst)) div Shards),
              %% one emitter per scheduler, 10x the capacity between them
              Parent = self(),
              Pids = [spawn(fun() -> [terrain_events:emit(bench_burst, ?NAME, #{i => I, d => 1.5}, ?METADATA)
                                      || I <- lists:seq(1, Capacity * 10 div Shards)],
                                     Parent ! {done, self()} end) || _ <- lists:seq(1, Shards)],
              [receive {done, P} -> ok end || P <- Pids],
              #{bench_burst := #{memory_bytes := After, written := W, dropped := D}} = terrain_events:info(),
              Kept = W - D,
              io:format("  ~8b ~9b ~14b ~14b ~9b ~9b ~9b  ~s~n",
                        [Capacity, W, Bound, After, W, Kept, D,
                         case After =< Bound andalso Kept =< terrain_events_ring:capacity(terrain_events_space:ring(bench_burst))
                         of true -> "yes"; false -> "NO" end]),
              ok = terrain_events:delete_collector(bench_burst)
      end, [1000, 10000]).

full_shard_bytes(ShardCapacity) ->
    Ring = terrain_events_ring:new(bench_reference, ShardCapacity, 1),
    [terrain_events_ring:write(Ring, ?NAME, #{i => I, d => 1.5}, ?METADATA, self()) || I <- lists:seq(1, ShardCapacity)],
    Bytes = terrain_events_ring:memory_bytes(Ring),
    terrain_events_ring:delete(Ring),
    Bytes.

%%--------------------------------------------------------------------

median(Xs) -> pct(Xs, 0.5).

pct(Xs, P) ->
    Sorted = lists:sort(Xs),
    lists:nth(max(1, ceil(P * length(Sorted))), Sorted).
