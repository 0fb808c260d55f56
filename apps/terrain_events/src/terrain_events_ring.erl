%% @private
%% @doc A bounded ring of events: the storage of one collector on one node.
%%
%% A ring is one shard per scheduler. A shard is an `atomics' counter (events ever
%% written to it) and an ETS `set' of at most `ShardCapacity' slots. Writing picks the
%% shard of the scheduler the writer runs on, claims the shard's next sequence number
%% with one `atomics:add_get/3' and stores the event in slot
%% `(Seq - 1) rem ShardCapacity' with one `ets:insert/2', in the writing process: no
%% message, no wait on another process, and no lock shared between schedulers (the
%% shard's table has no fine-grained locking: only the processes of one scheduler
%% write it, one at a time, so its one lock is never contended except by a reader).
%% When a shard is full the new event overwrites its oldest; those are the `dropped'
%% count, `Written - ShardCapacity' per shard. No table ever holds more than
%% `ShardCapacity' rows, so the memory is bounded by the capacity times the size of an
%% event, whatever the burst.
%%
%% Times are stored as the writer's `erlang:monotonic_time()' (native units, the
%% cheapest clock, and what trace timestamps are) and turned into system time in
%% microseconds when read, with the node's time offset at that moment (exact in the
%% default `no_time_warp' mode).
%%
%% A reader keeps a cursor (the last sequence number it has read in each shard) and
%% reads forward; events overwritten before it read them are counted as lost to it. A
%% slot that still holds an older event than the one its writer has claimed is being
%% written right now: the read of that shard stops before it.
-module(terrain_events_ring).

%% API
-export([new/2,
         new/3,
         write/5,
         write/6,
         written/1,
         dropped/1,
         capacity/1,
         memory_bytes/1,
         cursor/1,
         read/3,
         delete/1]).

%% exports_not_used: new/3 (a ring with a given shard count) is used by the tests, bench_events and
%% prop_events.
-ignore_xref([{new, 3}]).

-export_type([ring/0, entry/0, cursor/0]).

-opaque ring() :: {ring, atomics:atomics_ref(), tuple(), pos_integer()}.

%% The last sequence number read in each shard; `0' is the start of every shard.
-type cursor() :: 0 | [non_neg_integer()].

%% What a read returns for one event: a sequence number unique in the ring, system
%% time (µs), process, name, measurements, metadata.
-type entry() :: {Seq :: pos_integer(), Time :: integer(), pid(), Name :: [atom()], map(), map()}.

%% Counters of different shards sit a cache line apart.
-define(STRIDE, 8).

%% @doc A new empty ring of (at least) `Capacity' events, one shard per scheduler,
%% its tables owned by the caller.
-spec new(atom(), pos_integer()) -> ring().
new(Collector, Capacity) ->
    new(Collector, Capacity, erlang:system_info(schedulers)).

%% @doc A new empty ring of `Shards' shards of `ceil(Capacity / Shards)' events.
-spec new(atom(), pos_integer(), pos_integer()) -> ring().
new(Collector, Capacity, Shards) when is_atom(Collector), is_integer(Capacity), Capacity > 0,
                                      is_integer(Shards), Shards > 0 ->
    Tables = list_to_tuple([ets:new(Collector, [set, public]) || _ <- lists:seq(1, Shards)]),
    {ring, atomics:new(Shards * ?STRIDE, [{signed, false}]), Tables, (Capacity + Shards - 1) div Shards}.

%% @doc Records one event, stamped now.
-spec write(ring(), [atom()], map(), map(), pid()) -> true.
write(Ring, Name, Measurements, Metadata, Pid) ->
    write(Ring, erlang:monotonic_time(), Name, Measurements, Metadata, Pid).

%% @doc Records one event that happened at `Monotonic' (`erlang:monotonic_time()',
%% native units), e.g. a trace message's timestamp.
-spec write(ring(), integer(), [atom()], map(), map(), pid()) -> true.
write({ring, Counters, Tables, Capacity}, Monotonic, Name, Measurements, Metadata, Pid) ->
    Shard = shard(tuple_size(Tables)),
    Seq = atomics:add_get(Counters, (Shard - 1) * ?STRIDE + 1, 1),
    ets:insert(element(Shard, Tables), {(Seq - 1) rem Capacity, Seq, Monotonic, Pid, Name, Measurements, Metadata}).

shard(1) ->
    1;
shard(Shards) ->
    %% 0 on a dirty scheduler; schedulers come and go only between 1 and `schedulers'
    case erlang:system_info(scheduler_id) of
        0 -> 1;
        Id -> (Id - 1) rem Shards + 1
    end.

%% @doc The number of events ever written.
-spec written(ring()) -> non_neg_integer().
written({ring, _, Tables, _} = Ring) ->
    lists:sum(shard_counts(Ring, tuple_size(Tables))).

shard_counts({ring, Counters, _, _}, Shards) ->
    [atomics:get(Counters, (S - 1) * ?STRIDE + 1) || S <- lists:seq(1, Shards)].

%% @doc The number of events overwritten: each shard's writes beyond its capacity.
-spec dropped(ring()) -> non_neg_integer().
dropped({ring, _, Tables, Capacity} = Ring) ->
    lists:sum([max(0, W - Capacity) || W <- shard_counts(Ring, tuple_size(Tables))]).

%% @doc The most events the ring holds.
-spec capacity(ring()) -> pos_integer().
capacity({ring, _, Tables, Capacity}) ->
    Capacity * tuple_size(Tables).

%% @doc The memory the ring's tables hold, in bytes.
-spec memory_bytes(ring()) -> non_neg_integer().
memory_bytes({ring, _, Tables, _}) ->
    lists:sum([ets:info(T, memory) || T <- tuple_to_list(Tables)]) * erlang:system_info(wordsize).

%% @doc The cursor after the last event written so far: a reader starting here sees
%% only later events.
-spec cursor(ring()) -> [non_neg_integer()].
cursor({ring, _, Tables, _} = Ring) ->
    shard_counts(Ring, tuple_size(Tables)).

%% @doc Reads at most `Max' events of each shard after `Cursor'. Returns the events in
%% time order (a shard's events in the order they were stored where times tie), the new cursor, how many events after the cursor were overwritten
%% before this read (lost to this reader), and whether any shard has more to read.
-spec read(ring(), cursor(), pos_integer()) ->
          #{entries := [entry()], cursor := [non_neg_integer()], lost := non_neg_integer(), more := boolean()}.
read({ring, _, Tables, _} = Ring, 0, Max) ->
    read(Ring, lists:duplicate(tuple_size(Tables), 0), Max);
read({ring, _, Tables, Capacity} = Ring, Cursor, Max) when is_list(Cursor), length(Cursor) =:= tuple_size(Tables),
                                                          is_integer(Max), Max > 0 ->
    Shards = tuple_size(Tables),
    Offset = erlang:time_offset(),
    Results = [read_shard(element(S, Tables), S, Shards, Capacity, After, W, Max, Offset)
               || {S, After, W} <- lists:zip3(lists:seq(1, Shards), Cursor, shard_counts(Ring, Shards))],
    Entries = case Results of
                  [{Only, _, _, _}] -> Only;
                  _ -> lists:keysort(2, lists:append([Es || {Es, _, _, _} <- Results]))
              end,
    #{entries => Entries, cursor => [C || {_, C, _, _} <- Results], lost => lists:sum([L || {_, _, L, _} <- Results]),
      more => lists:any(fun({_, _, _, More}) -> More end, Results)}.

read_shard(Table, Shard, Shards, Capacity, After, Written, Max, Offset) ->
    From = max(After + 1, Written - Capacity + 1),
    To = min(Written, From + Max - 1),
    {Entries, Cursor, Overwritten} = read_range(Table, Shard, Shards, Capacity, Offset, From, To, [], 0),
    {Entries, Cursor, From - (After + 1) + Overwritten, To < Written}.

read_range(_Table, _Shard, _Shards, _Capacity, _Offset, Seq, To, Acc, Lost) when Seq > To ->
    {lists:reverse(Acc), To, Lost};
read_range(Table, Shard, Shards, Capacity, Offset, Seq, To, Acc, Lost) ->
    case ets:lookup(Table, (Seq - 1) rem Capacity) of
        [{_, Seq, Monotonic, Pid, Name, M, Md}] ->
            Time = erlang:convert_time_unit(Monotonic + Offset, native, microsecond),
            Entry = {(Seq - 1) * Shards + Shard, Time, Pid, Name, M, Md},
            read_range(Table, Shard, Shards, Capacity, Offset, Seq + 1, To, [Entry | Acc], Lost);
        [{_, Newer, _, _, _, _, _}] when Newer > Seq ->
            read_range(Table, Shard, Shards, Capacity, Offset, Seq + 1, To, Acc, Lost + 1);
        _ ->
            %% claimed but not yet stored: stop here, read it next time
            {lists:reverse(Acc), Seq - 1, Lost}
    end.

%% @doc Deletes the ring's tables.
-spec delete(ring()) -> true.
delete({ring, _, Tables, _}) ->
    lists:foreach(fun ets:delete/1, tuple_to_list(Tables)),
    true.
