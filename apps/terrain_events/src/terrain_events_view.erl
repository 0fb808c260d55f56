%% @private
%% @doc Pure functions over events: building them from ring entries, selecting,
%% merging the events of several nodes by time, aggregating them per window.
-module(terrain_events_view).

%% API
-export([events/3,
         validate_selection/1,
         select/2,
         merge/2,
         aggregate/2]).

-export_type([event/0, selection/0, aggregate_options/0, window/0]).

-type event() :: terrain_events:event().

-type selection() :: terrain_events:selection().

-type aggregate_options() :: terrain_events:aggregate_options().

-type window() :: terrain_events:window().

%% @doc Events from the entries of `Collector''s ring on `Node'.
-spec events(node(), atom(), [terrain_events_ring:entry()]) -> [event()].
events(Node, Collector, Entries) ->
    [#{time => Time, node => Node, pid => Pid, collector => Collector, name => Name,
       measurements => M, metadata => Md, seq => Seq} || {Seq, Time, Pid, Name, M, Md} <- Entries].

%% @doc Checks a selection; `badarg' if a key or value is not a selection's.
-spec validate_selection(selection()) -> selection().
validate_selection(Selection) when is_map(Selection) ->
    maps:foreach(fun(names, Names) when is_list(Names) -> [true = is_list(N) || N <- Names];
                    (nodes, Nodes) when is_list(Nodes) -> [true = is_atom(N) || N <- Nodes];
                    (pids, Pids) when is_list(Pids) -> [true = is_pid(P) || P <- Pids];
                    (from, T) when is_integer(T) -> ok;
                    (to, T) when is_integer(T) -> ok;
                    (_, _) -> error(badarg, [Selection])
                 end, Selection),
    Selection;
validate_selection(Selection) ->
    error(badarg, [Selection]).

%% @doc The events that the selection selects, in their order.
-spec select(selection(), [event()]) -> [event()].
select(Selection, Events) when map_size(Selection) =:= 0 ->
    Events;
select(Selection, Events) ->
    [E || E <- Events, selected(Selection, E)].

selected(Selection, #{name := Name, node := Node, pid := Pid, time := Time}) ->
    maps:fold(fun(_, _, false) -> false;
                 (names, Prefixes, true) -> lists:any(fun(P) -> lists:prefix(P, Name) end, Prefixes);
                 (nodes, Nodes, true) -> lists:member(Node, Nodes);
                 (pids, Pids, true) -> lists:member(Pid, Pids);
                 (from, From, true) -> Time >= From;
                 (to, To, true) -> Time =< To
              end, true, Selection).

%% @doc Merges the events of several nodes into one timeline: each node's times are
%% corrected by its clock offset (`#{Node => OffsetUs}', the node's clock minus the
%% reader's; a missing node has offset 0), then all are sorted by corrected time
%% (ties by node and sequence number, so that each node's own order is kept).
-spec merge(#{node() => [event()]}, #{node() => integer()}) -> [event()].
merge(ByNode, Offsets) ->
    Corrected = [[E#{time := T - maps:get(Node, Offsets, 0)} || #{time := T} = E <- Events]
                 || {Node, Events} <- maps:to_list(ByNode)],
    lists:sort(fun(#{time := A, node := NA, seq := SA}, #{time := B, node := NB, seq := SB}) ->
                       {A, NA, SA} =< {B, NB, SB}
               end, lists:append(Corrected)).

%% @doc Counts, rates and histograms (of the measurement `field', default
%% `duration_us', in powers of two) per event name and time window, windows in time
%% order; windows without events are left out.
-spec aggregate([event()], aggregate_options()) -> [window()].
aggregate(Events, #{window_us := Width} = Options) when is_integer(Width), Width > 0 ->
    Field = maps:get(field, Options, duration_us),
    Windows = lists:foldl(
                fun(#{time := T, name := Name, measurements := M}, Acc) ->
                        Start = T - floor_mod(T, Width),
                        {Counts, Hists} = maps:get(Start, Acc, {#{}, #{}}),
                        Counts1 = maps:update_with(Name, fun(C) -> C + 1 end, 1, Counts),
                        Hists1 = case M of
                                     #{Field := V} when is_number(V) ->
                                         B = bucket(V),
                                         maps:update_with(Name, fun(H) -> maps:update_with(B, fun(C) -> C + 1 end, 1, H) end,
                                                          #{B => 1}, Hists);
                                     _ ->
                                         Hists
                                 end,
                        Acc#{Start => {Counts1, Hists1}}
                end, #{}, Events),
    [#{start_us => Start, counts => Counts,
       rates => maps:map(fun(_, C) -> C * 1.0e6 / Width end, Counts),
       histograms => Hists}
     || {Start, {Counts, Hists}} <- lists:keysort(1, maps:to_list(Windows))].

floor_mod(T, W) ->
    ((T rem W) + W) rem W.

%% Bucket B >= 1 holds [2^(B-1), 2^B); bucket 0 holds values below 1.
bucket(V) when V < 1 -> 0;
bucket(V) -> bucket(V, 1, 2).

bucket(V, B, Limit) when V < Limit -> B;
bucket(V, B, Limit) -> bucket(V, B + 1, Limit * 2).
