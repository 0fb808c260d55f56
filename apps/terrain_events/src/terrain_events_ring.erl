%% @private
%% @doc A bounded ring of events: the storage of one collector on one node.
%%
%% A ring is an `atomics' counter (events ever written) and an ETS `set' of at most
%% `Capacity' slots. Writing claims the next sequence number with one
%% `atomics:add_get/3' and stores the event in slot `(Seq - 1) rem Capacity' with one
%% `ets:insert/2', in the writing process: no lock, no message, no wait on another
%% process. When the ring is full the new event overwrites the oldest; the events
%% overwritten are the `dropped' count, `Written - Capacity'. The table never holds
%% more than `Capacity' rows, so the memory is bounded by `Capacity' times the size of
%% an event, whatever the burst.
%%
%% A reader keeps a cursor (the last sequence number it has read) and reads forward
%% from it; events overwritten before it read them are counted as lost to it. A slot
%% that still holds an older event than the one its writer has claimed is being
%% written right now: the read stops before it and picks it up next time.
-module(terrain_events_ring).

%% API
-export([new/2,
         write/5,
         write/6,
         written/1,
         dropped/1,
         capacity/1,
         memory_bytes/1,
         read/3,
         delete/1]).

-export_type([ring/0, entry/0]).

-opaque ring() :: {ring, atomics:atomics_ref(), ets:tid(), pos_integer()}.

%% What a read returns for one event: sequence number, system time (µs), process,
%% name, measurements, metadata.
-type entry() :: {Seq :: pos_integer(), Time :: integer(), pid(), Name :: [atom()], map(), map()}.

%% @doc A new empty ring of `Capacity' events, its table owned by the caller.
-spec new(atom(), pos_integer()) -> ring().
new(Collector, Capacity) when is_atom(Collector), is_integer(Capacity), Capacity > 0 ->
    Table = ets:new(Collector, [set, public, {write_concurrency, true}, {read_concurrency, true}]),
    {ring, atomics:new(1, [{signed, false}]), Table, Capacity}.

%% @doc Records one event, stamped with the system time in microseconds.
-spec write(ring(), [atom()], map(), map(), pid()) -> true.
write({ring, Counter, Table, Capacity}, Name, Measurements, Metadata, Pid) ->
    Seq = atomics:add_get(Counter, 1, 1),
    ets:insert(Table, {(Seq - 1) rem Capacity, Seq, erlang:system_time(microsecond), Pid, Name,
                       Measurements, Metadata}).

%% @doc Records one event that happened at `Time' (system time, µs), e.g. a trace
%% message's timestamp.
-spec write(ring(), integer(), [atom()], map(), map(), pid()) -> true.
write({ring, Counter, Table, Capacity}, Time, Name, Measurements, Metadata, Pid) ->
    Seq = atomics:add_get(Counter, 1, 1),
    ets:insert(Table, {(Seq - 1) rem Capacity, Seq, Time, Pid, Name, Measurements, Metadata}).

%% @doc The number of events ever written.
-spec written(ring()) -> non_neg_integer().
written({ring, Counter, _, _}) ->
    atomics:get(Counter, 1).

%% @doc The number of events overwritten before anyone could be sure to read them.
-spec dropped(ring()) -> non_neg_integer().
dropped({ring, _, _, Capacity} = Ring) ->
    max(0, written(Ring) - Capacity).

-spec capacity(ring()) -> pos_integer().
capacity({ring, _, _, Capacity}) ->
    Capacity.

%% @doc The memory the ring's table holds, in bytes.
-spec memory_bytes(ring()) -> non_neg_integer().
memory_bytes({ring, _, Table, _}) ->
    ets:info(Table, memory) * erlang:system_info(wordsize).

%% @doc Reads at most `Max' events after sequence number `After', oldest first.
%% Returns the events, the new cursor, and how many events after `After' were
%% overwritten before this read (lost to this reader).
-spec read(ring(), non_neg_integer(), pos_integer()) ->
          {[entry()], Cursor :: non_neg_integer(), Lost :: non_neg_integer()}.
read({ring, _, _, Capacity} = Ring, After, Max) when is_integer(After), After >= 0, is_integer(Max), Max > 0 ->
    Written = written(Ring),
    From = max(After + 1, Written - Capacity + 1),
    To = min(Written, From + Max - 1),
    {Entries, Cursor, Overwritten} = read_range(Ring, From, To, [], 0),
    {Entries, Cursor, From - (After + 1) + Overwritten}.

read_range(_Ring, Seq, To, Acc, Lost) when Seq > To ->
    {lists:reverse(Acc), To, Lost};
read_range({ring, _, Table, Capacity} = Ring, Seq, To, Acc, Lost) ->
    case ets:lookup(Table, (Seq - 1) rem Capacity) of
        [{_, Seq, Time, Pid, Name, M, Md}] ->
            read_range(Ring, Seq + 1, To, [{Seq, Time, Pid, Name, M, Md} | Acc], Lost);
        [{_, Newer, _, _, _, _, _}] when Newer > Seq ->
            read_range(Ring, Seq + 1, To, Acc, Lost + 1);
        _ ->
            %% claimed but not yet stored: stop here, read it next time
            {lists:reverse(Acc), Seq - 1, Lost}
    end.

%% @doc Deletes the ring's table.
-spec delete(ring()) -> true.
delete({ring, _, Table, _}) ->
    ets:delete(Table).
