%% EUnit: the bounded ring of one collector (terrain_events_ring).
-module(terrain_events_ring_tests).

-include_lib("eunit/include/eunit.hrl").

write(Ring, N) ->
    [terrain_events_ring:write(Ring, [test, event], #{i => I}, #{}, self()) || I <- lists:seq(1, N)].

seqs(Entries) ->
    [S || {S, _, _, _, _, _} <- Entries].

values(Entries) ->
    [I || {_, _, _, _, #{i := I}, _} <- Entries].

never_holds_more_than_capacity_test() ->
    Ring = terrain_events_ring:new(t1, 8, 1),
    write(Ring, 100),
    {ring, _, {Table}, 8} = Ring,
    ?assertEqual(8, ets:info(Table, size)),
    ?assertEqual(100, terrain_events_ring:written(Ring)),
    terrain_events_ring:delete(Ring).

dropped_counts_the_overwritten_test() ->
    Ring = terrain_events_ring:new(t2, 10, 1),
    write(Ring, 7),
    ?assertEqual(0, terrain_events_ring:dropped(Ring)),
    write(Ring, 30),
    ?assertEqual(27, terrain_events_ring:dropped(Ring)),
    terrain_events_ring:delete(Ring).

read_returns_events_in_write_order_test() ->
    Ring = terrain_events_ring:new(t3, 16, 1),
    write(Ring, 10),
    #{entries := Entries, cursor := Cursor, lost := Lost, more := false} = terrain_events_ring:read(Ring, 0, 100),
    ?assertEqual(lists:seq(1, 10), seqs(Entries)),
    ?assertEqual(lists:seq(1, 10), values(Entries)),
    ?assertEqual({[10], 0}, {Cursor, Lost}),
    terrain_events_ring:delete(Ring).

read_after_wrap_keeps_the_newest_in_order_and_counts_lost_test() ->
    Ring = terrain_events_ring:new(t4, 5, 1),
    write(Ring, 12),
    #{entries := Entries, cursor := Cursor, lost := Lost} = terrain_events_ring:read(Ring, 0, 100),
    ?assertEqual(lists:seq(8, 12), seqs(Entries)),
    ?assertEqual({[12], 7}, {Cursor, Lost}),
    terrain_events_ring:delete(Ring).

read_in_batches_continues_from_the_cursor_test() ->
    Ring = terrain_events_ring:new(t5, 100, 1),
    write(Ring, 25),
    #{entries := B1, cursor := C1, lost := 0, more := true} = terrain_events_ring:read(Ring, 0, 10),
    #{entries := B2, cursor := C2, lost := 0, more := true} = terrain_events_ring:read(Ring, C1, 10),
    #{entries := B3, cursor := C3, lost := 0, more := false} = terrain_events_ring:read(Ring, C2, 10),
    #{entries := [], cursor := C3, lost := 0, more := false} = terrain_events_ring:read(Ring, C3, 10),
    ?assertEqual(lists:seq(1, 25), seqs(B1 ++ B2 ++ B3)),
    ?assertEqual([25], C3),
    terrain_events_ring:delete(Ring).

read_stops_before_a_slot_claimed_but_not_yet_written_test() ->
    Ring = {ring, Counter, _, _} = terrain_events_ring:new(t6, 8, 1),
    write(Ring, 3),
    %% a writer that has claimed sequence number 4 and not stored it yet
    atomics:add(Counter, 1, 1),
    ?assertMatch(#{entries := [_, _, _], cursor := [3], lost := 0}, terrain_events_ring:read(Ring, 0, 10)),
    terrain_events_ring:delete(Ring).

explicit_time_is_read_as_system_time_test() ->
    Ring = terrain_events_ring:new(t7, 4, 1),
    Monotonic = erlang:monotonic_time(),
    terrain_events_ring:write(Ring, Monotonic, [trace, send], #{}, #{}, self()),
    Expected = erlang:convert_time_unit(Monotonic + erlang:time_offset(), native, microsecond),
    ?assertMatch(#{entries := [{1, Expected, _, [trace, send], #{}, #{}}]}, terrain_events_ring:read(Ring, 0, 1)),
    terrain_events_ring:delete(Ring).

shards_together_hold_the_capacity_and_read_in_time_order_test() ->
    Ring = {ring, _, Tables, 3} = terrain_events_ring:new(t8, 10, 4),
    ?assertEqual(12, terrain_events_ring:capacity(Ring)),
    %% writers on every scheduler at once
    Parent = self(),
    Pids = [spawn_opt(fun() -> write(Ring, 50), Parent ! {done, self()} end, [link]) || _ <- lists:seq(1, 8)],
    [receive {done, P} -> ok end || P <- Pids],
    ?assertEqual(400, terrain_events_ring:written(Ring)),
    [?assert(ets:info(T, size) =< 3) || T <- tuple_to_list(Tables)],
    #{entries := Entries} = terrain_events_ring:read(Ring, 0, 100),
    Kept = length(Entries),
    ?assertEqual(400 - Kept, terrain_events_ring:dropped(Ring)),
    Times = [T || {_, T, _, _, _, _} <- Entries],
    ?assertEqual(lists:sort(Times), Times),
    ?assertEqual(Kept, length(lists:usort(seqs(Entries)))),
    terrain_events_ring:delete(Ring).
