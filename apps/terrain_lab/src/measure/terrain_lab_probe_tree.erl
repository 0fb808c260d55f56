%% @private
%% @doc The controller of `terrain probe --strategy tree': runs
%% `terrain_lab_tree_probe:build/3' (the waves of insertions and the repair) with a
%% measuring callback that probes one pair with one client (`terrain_lab_probe_client',
%% as in the other strategies, its batches cut short at the deadline), a wave's first
%% pass in parallel, progress after every wave, and a checkpoint after every wave.
%%
%% == Checkpoints ==
%% After a wave the result so far — the pairs measured, the tree of the nodes placed,
%% marked `partial' and `ended_by' `running' — goes to the `checkpoint' fun (the CLI
%% writes it with `terrain_lab_probe_files:write/3'): after every wave, except that
%% writing takes at most a tenth of the time (at 128 nodes, where a checkpoint takes a
%% noticeable part of a second and waves follow each other quickly, some are skipped).
%% So SIGINT or SIGKILL after the first wave leaves `latency.json', `topology.json' and
%% `manifest.json' with what was measured.
%%
%% == Interrupt ==
%% `{terrain_lab_probe, interrupt}' to the probing process stops the build: no wave
%% starts after it, and the pairs of the running wave stop at their next check. The
%% message is noted in an atomics flag, which the first pass's workers read.
%%
%% The pairs measured live in an ETS table owned by the probing process (workers of
%% the first pass write to it), deleted when the probe returns.
-module(terrain_lab_probe_tree).

%% API
-export([measure/2]).

-define(GRACE_MS, 2000).
%% The tree strategy places at most this many nodes at once: more measure at once
%% and, on a loaded machine, inflate each other's round trips (docs/BENCHMARKS.md).
-define(TREE_WAVE, 4).
%% Checkpoints take at most this share of the time (a latency.json of 128 nodes takes a
%% noticeable part of a second to write).
-define(CHECKPOINT_SHARE, 10).
%% The atomics of one probe: the interrupt flag, the time and nodes placed of the last
%% wave (the ETA), the waves so far, and when the last checkpoint ended and how long it took.
-define(INTERRUPTED, 1).
-define(WAVE_MS, 2).
-define(WAVE_PLACED, 3).
-define(WAVES, 4).
-define(CHECKPOINT_AT, 5).
-define(CHECKPOINT_TOOK, 6).

%%--------------------------------------------------------------------
%% API

%% @doc Builds the tree of `Nodes' while measuring; the probe's result with its
%% `topology', `unplaced', `reinserted' and `waves'.
-spec measure([node(), ...], map()) -> terrain_lab_probe:result().
measure(Nodes, Opts) ->
    T0 = erlang:monotonic_time(millisecond),
    Probe = #{nodes => Nodes, options => Opts, started_at => terrain_lab_run:timestamp(), t0 => T0,
              deadline => terrain_lab_probe_client:deadline(T0, Opts), table => ets:new(?MODULE, [set, public]),
              self => self(), flags => atomics:new(6, [])},
    atomics:put(maps:get(flags, Probe), ?WAVE_MS, T0),
    try build(Probe) of
        Build -> result(Probe, Build)
    after
        ets:delete(maps:get(table, Probe))
    end.

%%--------------------------------------------------------------------
%% Internal functions

build(#{nodes := Nodes, options := Opts, deadline := Deadline} = Probe) ->
    Stop = fun() -> terrain_lab_probe_client:past(Deadline) orelse interrupted(Probe) end,
    Statistic = maps:get(statistic, Opts, min),
    Measure = fun(A, B) ->
                      case Stop() of
                          true -> {error, not_measured};
                          false -> record(Probe, A, B, Statistic, pair(A, B, Opts, Deadline))
                      end
              end,
    terrain_lab_tree_probe:build(Nodes, Measure,
                                 #{map => fun(F, Xs) -> pmap(F, Xs, Probe) end, stop => Stop,
                                   wave => maps:get(wave, Opts, ?TREE_WAVE), insert => maps:get(insert, Opts, #{}),
                                   progress => fun(Wave) -> after_wave(Probe, Wave) end}).

%% The final result: how the build ended, the pairs measured, the tree.
result(Probe, #{tree := Tree, unplaced := Unplaced, ended_by := Ended, reinserted := Reinserted, waves := Waves}) ->
    EndedBy = case Ended of
                  complete -> complete;
                  stopped -> case interrupted(Probe) of true -> interrupt; false -> budget end
              end,
    (snapshot(Probe, EndedBy))#{topology => Tree, unplaced => Unplaced, reinserted => Reinserted, waves => Waves}.

%% The pairs measured so far (the others `not_measured', or `interrupted' when the user
%% stopped the probe), with the times of the run.
snapshot(#{nodes := Nodes, options := Opts, started_at := Started, t0 := T0, table := Table}, EndedBy) ->
    NotMeasured = case EndedBy of interrupt -> interrupted; _ -> not_measured end,
    Pairs = maps:merge(maps:from_list([{{A, B}, {error, NotMeasured}} || A <- Nodes, B <- Nodes, A =/= B]),
                       maps:from_list(ets:tab2list(Table))),
    #{nodes => Nodes, options => Opts, started_at => Started, finished_at => terrain_lab_run:timestamp(),
      duration_ms => erlang:monotonic_time(millisecond) - T0, partial => EndedBy =/= complete,
      ended_by => EndedBy, pairs => Pairs}.

%% After every wave: progress, and a checkpoint of the tree so far.
after_wave(#{flags := Flags} = Probe, Wave) ->
    Waves = atomics:add_get(Flags, ?WAVES, 1),
    progress(Probe, Wave),
    checkpoint(Probe, Wave, Waves).

%% Progress: nodes placed of all; the ETA from the nodes left at the rate of the last
%% wave (nodes per ms), at most the budget left.
progress(#{options := #{progress := none}}, _Wave) ->
    ok;
progress(#{options := #{progress := Progress}, flags := Flags, deadline := Deadline},
         #{placed := Placed, total := Total, elapsed_ms := Elapsed}) ->
    Now = erlang:monotonic_time(millisecond),
    Rate = (Placed - atomics:get(Flags, ?WAVE_PLACED)) / max(1, Now - atomics:get(Flags, ?WAVE_MS)),
    atomics:put(Flags, ?WAVE_MS, Now),
    atomics:put(Flags, ?WAVE_PLACED, Placed),
    Eta = case Rate > 0 of
              true -> round((Total - Placed) / Rate);
              false -> unknown
          end,
    _ = Progress(#{done => Placed, total => Total, elapsed_ms => Elapsed, unit => nodes,
                   eta_ms => case {Eta, Deadline} of
                                 {unknown, _} -> unknown;
                                 {_, infinity} -> Eta;
                                 _ -> max(0, min(Eta, Deadline - Now))
                             end}),
    ok.

%% The result so far to the checkpoint fun: after the first wave, then after every wave
%% unless the last checkpoint ended less than ten times its duration ago.
checkpoint(#{options := Opts} = Probe, #{tree := Tree}, Waves) ->
    #{flags := Flags, nodes := Nodes, t0 := T0} = Probe,
    %% ms since the start, plus one: 0 is "never" (monotonic time itself may be negative)
    Now = erlang:monotonic_time(millisecond) - T0 + 1,
    Last = atomics:get(Flags, ?CHECKPOINT_AT),
    Due = Last =:= 0 orelse Now - Last >= ?CHECKPOINT_SHARE * atomics:get(Flags, ?CHECKPOINT_TOOK),
    case maps:get(checkpoint, Opts, none) of
        Fun when is_function(Fun, 1), Due ->
            Placed = leaves(Tree),
            _ = Fun((snapshot(Probe, running))#{topology => Tree, waves => Waves, reinserted => 0,
                                                unplaced => [N || N <- Nodes, not lists:member(N, Placed)]}),
            End = erlang:monotonic_time(millisecond) - T0 + 1,
            atomics:put(Flags, ?CHECKPOINT_AT, End),
            atomics:put(Flags, ?CHECKPOINT_TOOK, End - Now),
            ok;
        _ ->
            ok
    end.

leaves({node, N}) -> [N];
leaves({network, _, _, Children}) -> lists:append([leaves(C) || C <- Children]).

%% The pair's round trip as insertion sees it: the chosen statistic of its exchanges
%% (min by default; median where a link lets a message through early now and then,
%% as rate shaping does on the testbed, docs/TESTBED.md).
%% With the jitter the level model's noise floor comes from: median minus minimum of
%% the exchanges (robust to the long tail a loaded machine gives some exchanges: at load
%% 40 the standard deviation merged racks with sites).
record(#{table := Table}, A, B, Statistic, {ok, Stats}) ->
    true = ets:insert(Table, {{A, B}, {ok, Stats}}),
    case Stats of
        #{median := Median, min := Min} when is_number(Median), is_number(Min) ->
            {ok, maps:get(Statistic, Stats), Median - Min};
        #{} ->
            {ok, maps:get(Statistic, Stats)}
    end;
record(#{table := Table}, A, B, _Statistic, {error, Why} = Error) ->
    case Why of
        not_measured -> ok;
        _ -> true = ets:insert(Table, {{A, B}, Error})
    end,
    Error.

%% Has the user interrupted? The probing process looks for the message; the first
%% pass's workers read the flag it sets (and stop when the probing process is gone).
interrupted(#{self := Self, flags := Flags}) ->
    case atomics:get(Flags, ?INTERRUPTED) of
        1 ->
            true;
        0 when Self =:= self() ->
            receive
                {terrain_lab_probe, interrupt} -> atomics:put(Flags, ?INTERRUPTED, 1), true
            after 0 ->
                    false
            end;
        0 ->
            not is_process_alive(Self)
    end.

%% One pair measured by one client: warm-up, batches (cut short at the deadline).
pair(A, B, Opts, Deadline) ->
    Ref = make_ref(),
    StopIn = case Deadline of
                 infinity -> infinity;
                 _ -> max(1, Deadline - erlang:monotonic_time(millisecond))
             end,
    Config = (terrain_lab_probe_client:config(Opts))#{stop_in => StopIn},
    {MRef, Pid} = terrain_lab_probe_client:start(A, B, Ref, Config),
    EndAt = case Deadline of infinity -> infinity; _ -> Deadline + ?GRACE_MS end,
    Wait = fun() -> terrain_lab_probe_client:wait_ms(terrain_lab_probe_client:stall_ms(Opts), EndAt) end,
    Result = receive
                 {Ref, ready, Pid} ->
                     Pid ! {Ref, go, infinity},
                     pair_done(Ref, Pid, MRef, Wait);
                 {'DOWN', MRef, process, _, Why} ->
                     {error, Why}
             after Wait() ->
                     {error, terrain_lab_probe_client:late(EndAt)}
             end,
    erlang:demonitor(MRef, [flush]),
    exit(Pid, kill),
    Result.

pair_done(Ref, Pid, MRef, Wait) ->
    receive
        {Ref, batch, Pid} -> pair_done(Ref, Pid, MRef, Wait);
        {Ref, done, Pid, none} -> {error, not_measured};
        {Ref, done, Pid, Stats} -> {ok, Stats};
        {'DOWN', MRef, process, _, Why} -> {error, Why}
    after Wait() ->
            {error, stalled}
    end.

%% The first pass of a wave: every insertion in its own process; one that has not
%% returned by the deadline (plus grace) counts as not placed.
pmap(F, Xs, #{deadline := Deadline} = Probe) ->
    Self = self(),
    Workers = [spawn_monitor(fun() -> Self ! {self(), result, F(X)} end) || X <- Xs],
    Until = case Deadline of infinity -> infinity; _ -> Deadline + 2 * ?GRACE_MS end,
    [pmap_result(Pid, MRef, Until, Probe) || {Pid, MRef} <- Workers].

pmap_result(Pid, MRef, Until, #{flags := Flags} = Probe) ->
    receive
        {Pid, result, R} ->
            erlang:demonitor(MRef, [flush]),
            R;
        {'DOWN', MRef, process, Pid, Why} ->
            {error, Why};
        {terrain_lab_probe, interrupt} ->
            %% noted for the workers, which ask before every pair
            atomics:put(Flags, ?INTERRUPTED, 1),
            pmap_result(Pid, MRef, Until, Probe)
    after terrain_lab_probe_client:wait_ms(infinity, Until) ->
            exit(Pid, kill),
            receive {'DOWN', MRef, process, Pid, _} -> ok end,
            {error, not_measured}
    end.
