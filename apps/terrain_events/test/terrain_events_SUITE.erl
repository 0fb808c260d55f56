%% EventSpace on this node and two peers: emitting without waiting, the bound under a
%% burst, scopes reading remote event spaces while they are written, merged reads
%% with clock offsets, the built-in monitors on the wind tunnel, the tracing collector.
-module(terrain_events_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([emit_does_not_wait_on_the_space_server/0, emit_does_not_wait_on_the_space_server/1,
         burst_of_ten_times_capacity_stays_within_bound/0, burst_of_ten_times_capacity_stays_within_bound/1,
         scope_reads_remote_spaces_while_they_are_written/0, scope_reads_remote_spaces_while_they_are_written/1,
         read_merges_nodes_with_estimated_offsets/0, read_merges_nodes_with_estimated_offsets/1,
         monitors_on_the_wind_tunnel_across_nodes/0, monitors_on_the_wind_tunnel_across_nodes/1,
         tracer_records_sends_and_receives/0, tracer_records_sends_and_receives/1,
         scope_options_are_checked/0, scope_options_are_checked/1]).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [emit_does_not_wait_on_the_space_server, burst_of_ten_times_capacity_stays_within_bound,
     scope_reads_remote_spaces_while_they_are_written, read_merges_nodes_with_estimated_offsets,
     monitors_on_the_wind_tunnel_across_nodes, tracer_records_sends_and_receives, scope_options_are_checked].

init_per_suite(Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    {ok, _} = application:ensure_all_started(terrain_events),
    Prefix = terrain_test_peers:unique_prefix(?MODULE),
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ "a"), list_to_atom(Prefix ++ "b")], []),
    [{ok, _} = terrain_test_peers:call(P, application, ensure_all_started, [terrain_events]) || P <- Peers],
    [{peers, Peers}, {nodes, [terrain_test_peers:node_of(P) || P <- Peers]} | Config].

end_per_suite(Config) ->
    terrain_test_peers:stop(?config(peers, Config)),
    ok = application:stop(terrain_events).

written(Collector) ->
    maps:get(written, maps:get(Collector, terrain_events:info())).

%%--------------------------------------------------------------------

emit_does_not_wait_on_the_space_server() ->
    [{doc, "With the event space's server suspended, emit/3 and collect/3 still record every event."}].
emit_does_not_wait_on_the_space_server(_Config) ->
    Before = written(explicit),
    PathsBefore = written(paths),
    ok = sys:suspend(terrain_events_space),
    try
        Caller = spawn_monitor(fun() ->
                                       [ok = terrain_events:emit([t, emit], #{i => I}, #{}) || I <- lists:seq(1, 1000)],
                                       [ok = terrain_events:collect(paths, I, #{path => p}) || I <- lists:seq(1, 10)]
                               end),
        {_, Ref} = Caller,
        receive {'DOWN', Ref, process, _, normal} -> ok after 5000 -> ct:fail(emit_blocked) end,
        ?assertEqual(Before + 1000, written(explicit)),
        ?assertEqual(PathsBefore + 10, written(paths))
    after
        sys:resume(terrain_events_space)
    end.

burst_of_ten_times_capacity_stays_within_bound() ->
    [{doc, "A burst of 10x a ring's capacity keeps its memory at that of a full ring, dropped counts the rest."}].
burst_of_ten_times_capacity_stays_within_bound(_Config) ->
    ok = terrain_events:new_collector(burst, 1000),
    try
        Shards = erlang:system_info(schedulers),
        Capacity = terrain_events_ring:capacity(terrain_events_space:ring(burst)),
        %% the most a ring can hold: every shard full (measured on a ring of one shard)
        Reference = terrain_events_ring:new(reference, Capacity div Shards, 1),
        [terrain_events_ring:write(Reference, [b], #{v => I}, #{w => 1}, self()) || I <- lists:seq(1, Capacity div Shards)],
        Bound = Shards * terrain_events_ring:memory_bytes(Reference),
        terrain_events_ring:delete(Reference),
        %% one emitter per scheduler, 10x the capacity between them
        Parent = self(),
        Pids = [spawn_link(fun() -> [terrain_events:emit(burst, [b], #{v => I}, #{w => 1})
                                     || I <- lists:seq(1, 10 * Capacity div Shards)],
                                    Parent ! {done, self()} end) || _ <- lists:seq(1, Shards)],
        [receive {done, P} -> ok end || P <- Pids],
        #{burst := #{memory_bytes := After, dropped := Dropped, written := Written}} = terrain_events:info(),
        ct:pal("capacity ~b in ~b shards, bound ~b bytes; after a 10x burst ~b bytes, ~b written, ~b dropped",
               [Capacity, Shards, Bound, After, Written, Dropped]),
        ?assertEqual(10 * Capacity, Written),
        ?assert(After =< Bound),
        ?assert(Written - Dropped =< Capacity),
        ?assert(Dropped >= 9 * Capacity)
    after
        terrain_events:delete_collector(burst)
    end.

scope_reads_remote_spaces_while_they_are_written() ->
    [{doc, "A scope at 20 Hz over two peers delivers their events in several batches while emitters still run, "
           "losing none."}].
scope_reads_remote_spaces_while_they_are_written(Config) ->
    Nodes = ?config(nodes, Config),
    Self = self(),
    Counter = #{kind => custom, init => 0, handle => fun(Es, N) -> N + length(Es) end,
                callback => fun(N) -> Self ! {observed, N} end},
    {ok, Scope} = terrain_events:start_scope(#{nodes => Nodes, rate => 20, batch => 500, monitors => [Counter],
                                              select => #{names => [[scope_test]]}}),
    %% each peer: 20 bursts of 100 events, 20 ms apart (about 0.4 s)
    Emitters = [spawn_monitor(N, fun() ->
                                          [begin
                                               [terrain_events:emit([scope_test, tick], #{}, #{burst => B, i => I})
                                                || I <- lists:seq(1, 100)],
                                               receive after 20 -> ok end
                                           end || B <- lists:seq(1, 20)]
                                  end) || N <- Nodes],
    Seen = [receive {'DOWN', Ref, process, _, normal} -> seen_before_done()
            after 10000 -> ct:fail(emitter_stuck)
            end || {_, Ref} <- Emitters],
    {[Total], #{events := Events, lost := Lost, reads := Reads}} = terrain_events:stop_scope(Scope),
    ct:pal("batches seen before the emitters ended: ~p; ~b reads, ~b events", [Seen, Reads, Events]),
    ?assertEqual(4000, Total),
    ?assertEqual(4000, Events),
    ?assertEqual(0, Lost),
    ?assert(hd(Seen) >= 2).

%% The observations delivered so far (messages already in the mailbox).
seen_before_done() ->
    receive {observed, _} -> 1 + seen_before_done() after 0 -> 0 end.

read_merges_nodes_with_estimated_offsets() ->
    [{doc, "read/2 over this node and two peers returns every node's events in time order; peers share this "
           "machine's clock, so each estimated offset is within half its round trip of zero."}].
read_merges_nodes_with_estimated_offsets(Config) ->
    Nodes = ?config(nodes, Config),
    T0 = erlang:system_time(microsecond),
    [ok = erpc:call(N, fun() -> [terrain_events:emit([merge_test], #{}, #{i => I}) || I <- lists:seq(1, 50)], ok end)
     || N <- Nodes],
    ok = terrain_events:emit([merge_test], #{}, #{i => 0}),
    {ok, #{events := Events, offsets := Offsets, failed := []}} =
        terrain_events:read([node() | Nodes], #{select => #{names => [[merge_test]], from => T0}}),
    ?assertEqual(101, length(Events)),
    Times = [T || #{time := T} <- Events],
    ?assertEqual(lists:sort(Times), Times),
    ?assertEqual(lists:sort([node() | Nodes]), lists:usort([N || #{node := N} <- Events])),
    [begin
         ct:pal("~s: offset ~b us, rtt ~b us", [N, O, R]),
         ?assert(abs(O) =< R div 2 + 1)
     end || {N, #{offset_us := O, rtt_us := R}} <- maps:to_list(Offsets), N =/= node()].

monitors_on_the_wind_tunnel_across_nodes() ->
    [{doc, "The wind tunnel on two peers under a scope: load imbalance reports every worker, slow pair counts "
           "exactly one border message per step each way between the nodes and two within each node, and the "
           "callbacks are called while it runs."}].
monitors_on_the_wind_tunnel_across_nodes(Config) ->
    Nodes = ?config(nodes, Config),
    Self = self(),
    Callback = fun(Report) -> Self ! {report, maps:get(kind, Report)} end,
    {ok, Scope} = terrain_events:start_scope(#{nodes => Nodes, rate => 20,
                                              monitors => [#{kind => load_imbalance, callback => Callback},
                                                           #{kind => slow_pair, callback => Callback}]}),
    Steps = 40,
    {ok, #{placement := Placement}} =
        terrain_workloads:windtunnel(#{nodes => Nodes, workers => 4, steps => Steps, columns => 64,
                                       slice_rows => 4, instrument => fun terrain_events:emit/3}),
    {[Imbalance, Slow], _Stats} = terrain_events:stop_scope(Scope),
    [A, B] = Nodes,
    ?assertEqual([{0, A}, {1, A}, {2, B}, {3, B}], Placement),
    #{workers := Workers, most_waiting := Worst} = Imbalance,
    ?assertEqual([0, 1, 2, 3], lists:sort(maps:keys(Workers))),
    ?assert(lists:member(Worst, [0, 1, 2, 3])),
    [?assert(C > 0) || #{compute_us := C} <- maps:values(Workers)],
    #{pairs := Pairs, unpaired := 0} = Slow,
    Counts = maps:from_list([{{F, T}, N} || #{from := F, to := T, count := N} <- Pairs]),
    ?assertEqual(#{{A, B} => Steps, {B, A} => Steps, {A, A} => 2 * Steps, {B, B} => 2 * Steps}, Counts),
    ?assert(receive {report, load_imbalance} -> true after 0 -> false end),
    ?assert(receive {report, slow_pair} -> true after 0 -> false end).

tracer_records_sends_and_receives() ->
    [{doc, "The tracing collector on a peer records each message an unchanged process receives and sends, "
           "with the trace's timestamps."}].
tracer_records_sends_and_receives(Config) ->
    [Node | _] = ?config(nodes, Config),
    Echo = spawn(Node, fun Loop() -> receive {From, M} -> From ! {echo, M}, Loop(); stop -> ok end end),
    {ok, #{written := Before}} = erpc:call(Node, terrain_events_space, read, [trace, 0, 1]),
    {ok, [Tracer]} = terrain_events:trace([Echo], #{}),
    T0 = erlang:system_time(microsecond),
    [receive {echo, I} -> ok after 5000 -> ct:fail(no_echo) end || I <- lists:seq(1, 100), (Echo ! {self(), I}) =/= x],
    T1 = erlang:system_time(microsecond),
    #{recorded := 200, pauses := 0} = terrain_events:stop_trace(Tracer),
    Echo ! stop,
    {ok, #{entries := Entries}} = erpc:call(Node, terrain_events_space, read, [trace, Before, 1000]),
    Names = [Name || {_, _, Pid, Name, _, _} <- Entries, Pid =:= Echo],
    ?assertEqual(100, length([x || [trace, 'receive'] <- Names])),
    ?assertEqual(100, length([x || [trace, send] <- Names])),
    [?assert(T >= T0 - 1000 andalso T =< T1 + 1000) || {_, T, _, _, _, _} <- Entries].

scope_options_are_checked() ->
    [{doc, "Bad scope options are errors with a sentence; a running scope can be reconfigured."}].
scope_options_are_checked(Config) ->
    Nodes = ?config(nodes, Config),
    {error, {scope_option, rate, 0} = R1} = terrain_events:start_scope(#{nodes => Nodes, rate => 0}),
    ?assertMatch("bad scope option rate: 0", lists:flatten(terrain_events:format_error(R1))),
    {error, {scope_option, colour, red}} = terrain_events:start_scope(#{nodes => Nodes, colour => red}),
    {error, {scope_option, nodes, []}} = terrain_events:start_scope(#{nodes => []}),
    {ok, Scope} = terrain_events:start_scope(#{nodes => Nodes, rate => 5}),
    ok = terrain_events:configure_scope(Scope, #{rate => 50, batch => 10}),
    {error, {scope_option, rate, -1}} = terrain_events:configure_scope(Scope, #{rate => -1}),
    {error, {scope_option, nodes, _}} = terrain_events:configure_scope(Scope, #{nodes => []}),
    {[], #{reads := Reads}} = terrain_events:stop_scope(Scope),
    ?assert(Reads >= 1).
