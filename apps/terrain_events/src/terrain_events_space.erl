%% @private
%% @doc The event space of this node: one bounded ring per collector.
%%
%% This server creates and deletes rings and owns their tables; it is never on the
%% path of an event. Each ring is published as a `persistent_term'
%% (`{terrain_events_space, Collector}'), so that a collector writes into it from the
%% emitting process (`record/4') and a reader, local or sent by another node's scope,
%% reads it in its own process (`read/3'). Collectors are created rarely (at start and
%% by `terrain_events:new_collector/2'): a `persistent_term' update is a global
%% operation and is meant to be rare.
-module(terrain_events_space).
-behaviour(gen_server).

%% API
-export([start_link/0,
         record/4,
         ring/1,
         new_collector/2,
         delete_collector/1,
         collectors/0,
         read/3,
         cursor/1,
         info/0,
         forget_all/0]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, terminate/2]).

%% exports_not_used: start_link/0 is the child spec of terrain_events_sup; cursor/1 and
%% read/3 are called on every node a scope reads (erpc); collectors/0 lists them for users.
-ignore_xref([{start_link, 0}, {cursor, 1}, {read, 3}, {collectors, 0}]).

-export_type([read_result/0, info/0]).

-define(KEY(Collector), {?MODULE, Collector}).
-define(LIST, {?MODULE, collectors}).
-define(BUILTIN, [explicit, paths, trace]).

-type read_result() :: #{entries := [terrain_events_ring:entry()],
                         cursor := [non_neg_integer()],
                         lost := non_neg_integer(),
                         more := boolean(),                  % a shard has more to read
                         written := non_neg_integer(),
                         dropped := non_neg_integer()}.
-type info() :: #{capacity := pos_integer(),
                  written := non_neg_integer(),
                  dropped := non_neg_integer(),
                  memory_bytes := non_neg_integer()}.

%%--------------------------------------------------------------------
%% API

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Writes an event into `Collector''s ring; a no-op when there is no such
%% collector (the application is not running, or the collector was never created).
-spec record(atom(), [atom()], map(), map()) -> ok.
record(Collector, Name, Measurements, Metadata) ->
    case persistent_term:get(?KEY(Collector), undefined) of
        undefined ->
            ok;
        Ring ->
            try terrain_events_ring:write(Ring, Name, Measurements, Metadata, self()) of
                true -> ok
            catch
                error:badarg -> ok   % the ring's owner is restarting right now
            end
    end.

%% @doc The ring of a collector, for a writer that stamps its own times (the tracer).
-spec ring(atom()) -> terrain_events_ring:ring() | undefined.
ring(Collector) ->
    persistent_term:get(?KEY(Collector), undefined).

%% @doc Creates a collector's ring (`ok' if it exists with that capacity already).
-spec new_collector(atom(), pos_integer()) -> ok | {error, {exists, atom(), pos_integer()}}.
new_collector(Collector, Capacity) when is_atom(Collector), is_integer(Capacity), Capacity > 0 ->
    gen_server:call(?MODULE, {new, Collector, Capacity}).

-spec delete_collector(atom()) -> ok.
delete_collector(Collector) when is_atom(Collector) ->
    gen_server:call(?MODULE, {delete, Collector}).

%% @doc The collectors of this node.
-spec collectors() -> [atom()].
collectors() ->
    persistent_term:get(?LIST, []).

%% @doc Reads at most `Max' events per shard of `Collector' after the cursor `After'
%% (`0': from the oldest kept).
-spec read(atom(), terrain_events_ring:cursor(), pos_integer()) ->
          {ok, read_result()} | {error, {no_collector, atom()} | {bad_cursor, term()}}.
read(Collector, After, Max) ->
    case persistent_term:get(?KEY(Collector), undefined) of
        undefined ->
            {error, {no_collector, Collector}};
        Ring ->
            try terrain_events_ring:read(Ring, After, Max) of
                Result ->
                    {ok, Result#{written => terrain_events_ring:written(Ring),
                                 dropped => terrain_events_ring:dropped(Ring)}}
            catch
                error:function_clause -> {error, {bad_cursor, After}}   % the ring was made again
            end
    end.

%% @doc The cursor after the last event of `Collector' written so far.
-spec cursor(atom()) -> {ok, [non_neg_integer()]} | {error, {no_collector, atom()}}.
cursor(Collector) ->
    case persistent_term:get(?KEY(Collector), undefined) of
        undefined -> {error, {no_collector, Collector}};
        Ring -> {ok, terrain_events_ring:cursor(Ring)}
    end.

%% @doc Capacity, events written, dropped and memory of every collector.
-spec info() -> #{atom() => info()}.
info() ->
    maps:from_list([{C, #{capacity => terrain_events_ring:capacity(R),
                          written => terrain_events_ring:written(R),
                          dropped => terrain_events_ring:dropped(R),
                          memory_bytes => terrain_events_ring:memory_bytes(R)}}
                    || C <- collectors(), R <- [persistent_term:get(?KEY(C), undefined)], R =/= undefined]).

%% @doc Unpublishes every ring (the application is stopping).
-spec forget_all() -> ok.
forget_all() ->
    lists:foreach(fun(C) -> _ = persistent_term:erase(?KEY(C)) end, collectors()),
    _ = persistent_term:erase(?LIST),
    ok.

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init([]) -> {ok, #{atom() => pos_integer()}}.
init([]) ->
    process_flag(trap_exit, true),
    forget_all(),   % a restart: the old rings went with the old owner
    {ok, Capacity} = application:get_env(terrain_events, capacity),
    Extra = application:get_env(terrain_events, collectors, []),
    State = lists:foldl(fun(C, S) -> {ok, S1} = create(C, Capacity, S), S1 end, #{},
                        lists:usort(?BUILTIN ++ Extra)),
    {ok, State}.

-spec handle_call(term(), gen_server:from(), #{atom() => pos_integer()}) ->
          {reply, term(), #{atom() => pos_integer()}}.
handle_call({new, Collector, Capacity}, _From, State) ->
    case create(Collector, Capacity, State) of
        {ok, State1} -> {reply, ok, State1};
        {error, _} = Error -> {reply, Error, State}
    end;
handle_call({delete, Collector}, _From, State) ->
    case persistent_term:get(?KEY(Collector), undefined) of
        undefined ->
            {reply, ok, State};
        Ring ->
            _ = persistent_term:erase(?KEY(Collector)),
            persistent_term:put(?LIST, collectors() -- [Collector]),
            true = terrain_events_ring:delete(Ring),
            {reply, ok, maps:remove(Collector, State)}
    end.

-spec handle_cast(term(), State) -> {noreply, State}.
handle_cast(_Message, State) ->
    {noreply, State}.

-spec terminate(term(), term()) -> ok.
terminate(_Reason, _State) ->
    forget_all().

%%--------------------------------------------------------------------
%% Internal functions

create(Collector, Capacity, State) ->
    case maps:find(Collector, State) of
        {ok, Capacity} ->
            {ok, State};
        {ok, Other} ->
            {error, {exists, Collector, Other}};
        error ->
            persistent_term:put(?KEY(Collector), terrain_events_ring:new(Collector, Capacity)),
            persistent_term:put(?LIST, lists:usort([Collector | collectors()])),
            {ok, State#{Collector => Capacity}}
    end.
