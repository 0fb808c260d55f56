%% PropEr: the ring (bound, drop count, order) and merging with clock offsets.
-module(prop_events).

-include_lib("proper/include/proper.hrl").

-export([prop_ring_bound_drops_and_order/0,
         prop_merge_with_offsets_restores_true_order/0,
         prop_clock_estimate_within_half_rtt/0]).

%% Any number of writes, read in batches of any size: the table never holds more than
%% the capacity, dropped is written minus capacity, and the reader sees the newest
%% events in write order with the rest counted as lost.
prop_ring_bound_drops_and_order() ->
    ?FORALL({Capacity, Writes, Batch}, {range(1, 64), range(0, 300), range(1, 50)},
            begin
                Ring = {ring, _, {Table}, _} = terrain_events_ring:new(prop_ring, Capacity, 1),
                [terrain_events_ring:write(Ring, [p], #{i => I}, #{}, self()) || I <- lists:seq(1, Writes)],
                Size = ets:info(Table, size),
                {Seen, Lost} = read_all(Ring, 0, Batch, [], 0),
                terrain_events_ring:delete(Ring),
                Kept = min(Capacity, Writes),
                Size =< Capacity
                    andalso terrain_events_ring:dropped(Ring) =:= max(0, Writes - Capacity)
                    andalso Seen =:= lists:seq(Writes - Kept + 1, Writes)
                    andalso Lost =:= Writes - Kept
            end).

read_all(Ring, Cursor, Batch, Acc, Lost) ->
    case terrain_events_ring:read(Ring, Cursor, Batch) of
        #{entries := [], lost := L} ->
            {lists:append(lists:reverse(Acc)), Lost + L};
        #{entries := Entries, cursor := Next, lost := L} ->
            read_all(Ring, Next, Batch, [[I || {_, _, _, _, #{i := I}, _} <- Entries] | Acc], Lost + L)
    end.

%% Events at distinct true times on several nodes whose clocks are off by arbitrary
%% offsets: merging with those offsets gives the true order.
prop_merge_with_offsets_restores_true_order() ->
    ?FORALL({Times, Offsets}, {non_empty(list({oneof([a, b, c]), range(0, 1000000)})),
                               {range(-100000, 100000), range(-100000, 100000), range(-100000, 100000)}},
            begin
                Distinct = lists:ukeysort(2, Times),
                OffsetMap = maps:from_list(lists:zip([a, b, c], tuple_to_list(Offsets))),
                ByNode = lists:foldl(
                           fun({{N, T}, Seq}, Acc) ->
                                   E = #{time => T + maps:get(N, OffsetMap), node => N, pid => self(),
                                         collector => explicit, name => [x], measurements => #{},
                                         metadata => #{true => T}, seq => Seq},
                                   maps:update_with(N, fun(L) -> L ++ [E] end, [E], Acc)
                           end, #{}, lists:zip(lists:keysort(2, Distinct), lists:seq(1, length(Distinct)))),
                Merged = terrain_events_view:merge(ByNode, OffsetMap),
                [T || #{metadata := #{true := T}} <- Merged] =:= [T || {_, T} <- lists:keysort(2, Distinct)]
                    andalso [T || #{time := T} <- Merged] =:= [T || {_, T} <- lists:keysort(2, Distinct)]
            end).

%% Whatever the delays each way, the estimate is within half the chosen round trip of
%% the true offset.
prop_clock_estimate_within_half_rtt() ->
    ?FORALL({Offset, Delays}, {range(-1000000, 1000000), non_empty(list({range(0, 5000), range(0, 5000), range(0, 10000)}))},
            begin
                Samples = [{Start, Start + There + Offset, Start + There + Back} || {There, Back, Start} <- Delays],
                #{offset_us := Estimate, rtt_us := Rtt} = terrain_events_clock:from_samples(Samples),
                Rtt =:= lists:min([T + B || {T, B, _} <- Delays]) andalso abs(Estimate - Offset) =< Rtt div 2 + 1
            end).
