%% @private
%% @doc The node's cache of other nodes' attributes, its memory of failed nodes, and the
%% subscriber side of push mode. Registered as `terrain_attr_cache'.
%%
%% Table `terrain_attr_cache' (`protected', read by querying processes, written only
%% here), one row per node, `{Node, Values, Stamps, Backoff, Watched}', so that a query
%% reads one row per node and selects on Values as they are:
%% <ul>
%% <li>Values — `#{Name => Value}', the node's cached values.</li>
%% <li>Stamps — `#{Name => static | StampMs}'. `static' values stay until the node goes
%%     down (or tells us its configuration changed); the others are used only while
%%     younger than a query's `max_age'. Values come from queries ({@link store/3}) and
%%     pushes.</li>
%% <li>Backoff — `none' or `{UntilMs, Reason, Failures}': a node that failed a query is
%%     not asked again until UntilMs or until it comes back (nodeup). The backoff counts
%%     from the moment the failure was observed, and lasts 500 ms plus the time the
%%     failure cost the query (the whole deadline for a `timeout', about nothing for
%%     `noconnection' and `not_running'), doubling with each consecutive failure, at
%%     most 30 s (or that first backoff, if longer). A node that cost a deadline is thus
%%     skipped for longer than that deadline: the calls after it do not wait on it
%%     again.</li>
%% <li>Watched — whether this server holds a monitor on the node's attribute responder.
%%     The first answer from a node starts the watch; it ends when the responder stops or
%%     the connection goes. While a node is watched and connected, queries send their
%%     requests without a monitor of their own (a monitor and its removal are two more
%%     distribution signals per node and query, and wake the remote VM once more); a
%%     node that is not watched is asked under a monitor, which answers "no such
%%     process" (`not_running') and "no connection" at once.</li>
%% </ul>
%%
%% Push mode: {@link subscribe/4} asks each node's attribute server for a pusher that
%% sends the named values every Interval ms (only the changed ones; an empty push is a
%% heartbeat that keeps the others fresh). A subscription belongs to the calling
%% process and ends with it; lost pushers (node down, server restarted) are asked for
%% again when the node comes back, or after 1 s.
-module(terrain_attr_cache).
-behaviour(gen_server).

%% API
-export([start_link/0,
         store/3,
         merge/4,
         failed/3,
         snapshot/0,
         generation/0,
         row/1,
         row/2,
         backoff/1,
         cached/1,
         subscribe/4,
         unsubscribe/1]).

%% gen_server callbacks
-export([init/1,
         handle_call/3,
         handle_cast/2,
         handle_info/2]).

%% exports_not_used: start_link/0 is named in terrain_sup's child spec; the others are read by the
%% Common Test suites and bench_attrs to observe the cache.
-ignore_xref([{backoff, 1}, {cached, 1}, {generation, 0}, {row, 1}, {start_link, 0}]).

-define(CACHE, terrain_attr_cache).
%% the table's id, so that readers skip the name lookup (a query reads many rows), and
%% the generation counter (atomics), bumped whenever values are forgotten or pushed
-define(TABLE_KEY, {?MODULE, table}).
-define(BACKOFF_BASE_MS, 500).
-define(BACKOFF_MAX_MS, 30000).
-define(RESUBSCRIBE_MS, 1000).
%% How long a query whose deadline has passed still waits for its failures to be
%% recorded (terrain_attr_cache:failed/3): the most it returns after its deadline.
-define(FAILED_MIN_WAIT, 20).

-type stamps() :: #{terrain:attr_name() => static | integer()}.
-type failure() :: timeout | noconnection | not_running.
-type backoff() :: none | {integer(), failure(), pos_integer()}.
-export_type([stamps/0, failure/0, backoff/0]).

-type per_node() :: {pending, reference()} | {active, pid(), reference(), reference()} | waiting.
-type subscription() :: #{owner := pid(), owner_monitor := reference(), names := [atom()],
                          interval := pos_integer(), nodes := #{node() => per_node()}}.
-type state() :: #{subs := #{reference() => subscription()},
                   %% monitor/alias reference => {subscription, node}
                   refs := #{reference() => {reference(), node()}},
                   %% the monitors on other nodes' attribute responders, both ways
                   watching := #{node() => reference()},
                   watches := #{reference() => node()},
                   generation := atomics:atomics_ref()}.

%%--------------------------------------------------------------------
%% API

%% @doc Starts the cache server, registered as `terrain_attr_cache'.
-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Records rows built from values fetched at StampMs: `{Node, Entries, Values,
%% Stamps}', where Values and Stamps are the node's cached maps as read at generation
%% Gen with Entries merged in ({@link merge/4}). Clears those nodes' backoff. When no
%% values were forgotten or pushed since Gen, the rows are stored as they are (one
%% insert for all); otherwise only the Entries are merged into the rows as they are now.
-spec store(integer(), non_neg_integer(),
            [{node(), [{terrain:attr_name(), term(), terrain_attr_server:class()}], #{terrain:attr_name() => term()},
              stamps()}]) -> ok.
store(_Stamp, _Gen, []) ->
    ok;
store(Stamp, Gen, Rows) ->
    gen_server:cast(?MODULE, {store, Stamp, Gen, Rows}).

%% @doc Merges entries fetched at StampMs into a node's values and stamps.
-spec merge([{terrain:attr_name(), term(), terrain_attr_server:class()}], integer(),
            #{terrain:attr_name() => term()}, stamps()) -> {#{terrain:attr_name() => term()}, stamps()}.
merge([], _Stamp, Values, Stamps) ->
    {Values, Stamps};
merge([{Name, Value, Class} | Entries], Stamp, Values, Stamps) when is_atom(Name) ->
    merge(Entries, Stamp, Values#{Name => Value},
          Stamps#{Name => case Class of static -> static; _ -> Stamp end});
merge([_ | Entries], Stamp, Values, Stamps) ->
    merge(Entries, Stamp, Values, Stamps).

%% @doc Records nodes that failed a query started at StartedMs, extending their
%% backoff: `{Node, Reason, ObservedMs}', where ObservedMs is when the failure was
%% observed. Returns once they are recorded, so that the caller's next query skips
%% them, waiting no longer than until the query's `DeadlineMs' (monotonic), or
%% FAILED_MIN_WAIT ms when that has passed (a query's timeouts are seen at its
%% deadline): a cache too busy to answer by then records them when it gets to the
%% request (it was sent), after the query returned; a cache that is not running
%% records nothing.
-spec failed(integer(), [{node(), failure(), integer()}], integer()) -> ok.
failed(_Started, [], _Deadline) ->
    ok;
failed(Started, Failures, Deadline) ->
    Wait = max(?FAILED_MIN_WAIT, Deadline - erlang:monotonic_time(millisecond)),
    try gen_server:call(?MODULE, {failed, Started, Failures}, Wait)
    catch exit:_ -> ok    % not running, or too busy: the request stays in its queue
    end.

%% @doc What a query reads before it reads rows: the cache table, for {@link row/2}
%% (`undefined' when the cache is not running), and the cache's generation, for the
%% {@link store/3} that will build on those rows.
-spec snapshot() -> {ets:tid() | undefined, non_neg_integer()}.
snapshot() ->
    case persistent_term:get(?TABLE_KEY, undefined) of
        {Table, Generation} -> {Table, atomics:get(Generation, 1)};
        undefined -> {undefined, 0}
    end.

%% @doc The cache's generation.
-spec generation() -> non_neg_integer().
generation() ->
    element(2, snapshot()).

%% @doc One node's row, read in the caller: its cached values, their stamps, its
%% backoff and whether it is watched.
-spec row(node()) -> {#{terrain:attr_name() => term()}, stamps(), backoff(), boolean()}.
row(Node) ->
    row(element(1, snapshot()), Node).

%% @doc As {@link row/1}, in the table that {@link snapshot/0} gave.
-spec row(ets:tid() | undefined, node()) -> {#{terrain:attr_name() => term()}, stamps(), backoff(), boolean()}.
row(undefined, _Node) ->
    {#{}, #{}, none, false};
row(Table, Node) ->
    try ets:lookup(Table, Node) of
        [{_, Values, Stamps, Backoff, Watched}] -> {Values, Stamps, Backoff, Watched};
        [] -> {#{}, #{}, none, false}
    catch
        error:badarg -> {#{}, #{}, none, false}    % the cache is not running
    end.

%% @doc The backoff of one node, read in the caller.
-spec backoff(node()) -> backoff().
backoff(Node) ->
    element(3, row(Node)).

%% @doc The cached values of one node, read in the caller.
-spec cached(node()) -> #{terrain:attr_name() => term()}.
cached(Node) ->
    element(1, row(Node)).

%% @doc Subscribes the caller (Owner) to pushes of Names from Nodes every Interval ms.
-spec subscribe([node()], [terrain:attr_name()], pos_integer(), pid()) -> {ok, reference()}.
subscribe(Nodes, Names, Interval, Owner) ->
    gen_server:call(?MODULE, {subscribe, Nodes, Names, Interval, Owner}, infinity).

%% @doc Ends a subscription. Unknown references are ignored.
-spec unsubscribe(reference()) -> ok.
unsubscribe(Ref) ->
    gen_server:call(?MODULE, {unsubscribe, Ref}, infinity).

%%--------------------------------------------------------------------
%% gen_server callbacks

%% @private
-spec init([]) -> {ok, state()}.
init([]) ->
    Options = [named_table, protected, set],
    ?CACHE = ets:new(?CACHE, Options),
    Generation = atomics:new(1, [{signed, false}]),
    persistent_term:put(?TABLE_KEY, {ets:whereis(?CACHE), Generation}),
    ok = net_kernel:monitor_nodes(true),
    {ok, #{subs => #{}, refs => #{}, watching => #{}, watches => #{}, generation => Generation}}.

%% @private
-spec handle_call(term(), gen_server:from(), state()) -> {reply, term(), state()}.
handle_call(Request, {Pid, _}, State) when node(Pid) =/= node() ->
    terrain_attr_table:count(remote_writes_refused),
    logger:notice("terrain: refused cache request ~0tP from remote process ~0p", [Request, 10, Pid],
                  #{domain => [terrain, attr]}),
    {reply, {error, not_local}, State};
handle_call({subscribe, Nodes, Names, Interval, Owner}, _From, #{subs := Subs} = State) ->
    Ref = make_ref(),
    Sub = #{owner => Owner, owner_monitor => monitor(process, Owner), names => Names,
            interval => Interval, nodes => #{}},
    State1 = State#{subs := Subs#{Ref => Sub}},
    {reply, {ok, Ref}, lists:foldl(fun(Node, S) -> request_pusher(Ref, Node, S) end, State1,
                                   lists:usort(Nodes))};
handle_call({unsubscribe, Ref}, _From, State) ->
    {reply, ok, cancel(Ref, State)};
handle_call({failed, Started, Failures}, _From, #{watching := Watching} = State) ->
    _ = [begin
             {Values, Stamps, Backoff, _} = row(Node),
             Count = case Backoff of
                         {_, _, C} -> C + 1;
                         none -> 1
                     end,
             ets:insert(?CACHE, {Node, Values, Stamps, {Observed + backoff_ms(Observed - Started, Count), Reason, Count},
                                 maps:is_key(Node, Watching)})
         end || {Node, Reason, Observed} <- Failures],
    {reply, ok, State};
handle_call(_Request, _From, State) ->
    terrain_attr_table:count(malformed_dropped),
    {reply, {error, unknown_request}, State}.

%% @private
-spec handle_cast(term(), state()) -> {noreply, state()}.
handle_cast({store, Stamp, Gen, Results}, #{generation := Generation} = State) ->
    Current = atomics:get(Generation, 1) =:= Gen,
    {Rows, State1} = lists:mapfoldl(fun({Node, _Entries, Values, Stamps}, S) when Current ->
                                            {Watched, S1} = watch(Node, S),
                                            {{Node, Values, Stamps, none, Watched}, S1};
                                       ({Node, Entries, _, _}, S) ->
                                            store_node(Node, Entries, Stamp, S)
                                    end, State, Results),
    true = ets:insert(?CACHE, Rows),
    {noreply, State1};
handle_cast(_Msg, State) ->
    terrain_attr_table:count(malformed_dropped),
    {noreply, State}.

%% @private
-spec handle_info(term(), state()) -> {noreply, state()}.
handle_info({nodeup, Node}, #{subs := Subs} = State) ->
    case row(Node) of
        {Values, _, _, _} when map_size(Values) =:= 0 -> ets:delete(?CACHE, Node);
        _ -> ets:update_element(?CACHE, Node, {4, none})
    end,
    Waiting = [Ref || {Ref, #{nodes := #{Node := waiting}}} <- maps:to_list(Subs)],
    {noreply, lists:foldl(fun(Ref, S) -> request_pusher(Ref, Node, S) end, State, Waiting)};
handle_info({nodedown, Node}, State) ->
    forget_values(Node, State),
    {noreply, State};
handle_info({'$terrain_attr_invalidate', Node}, State) when is_atom(Node) ->
    forget_values(Node, State),
    {noreply, State};
handle_info({'$terrain_attr_push', Ref, Node, Changed}, #{refs := Refs} = State) when is_list(Changed) ->
    case Refs of
        #{Ref := {SubRef, Node}} ->
            terrain_attr_table:count(pushes_received),
            pushed(SubRef, Node, Changed, State);
        _ ->
            terrain_attr_table:count(malformed_dropped)
    end,
    {noreply, State};
handle_info({Ref, {'$terrain_attr_subscribed', Pusher}}, #{refs := Refs} = State) when is_pid(Pusher) ->
    case Refs of
        #{Ref := {SubRef, Node}} ->
            demonitor(Ref, [flush]),
            PusherMonitor = monitor(process, Pusher),
            State1 = set_node(SubRef, Node, {active, Pusher, Ref, PusherMonitor}, State),
            {noreply, State1#{refs := Refs#{PusherMonitor => {SubRef, Node}}}};
        _ ->
            %% A late answer to a cancelled subscription: stop that pusher.
            Pusher ! {'$terrain_attr_unsubscribe', Ref},
            {noreply, State}
    end;
handle_info({Ref, {'$terrain_attr_subscribe_refused', Why}}, #{refs := Refs} = State) ->
    case Refs of
        #{Ref := {SubRef, Node}} ->
            demonitor(Ref, [flush]),
            logger:warning("terrain: ~0p refused an attribute subscription: ~0tp", [Node, Why],
                           #{domain => [terrain, attr]}),
            {noreply, retry_later(SubRef, Node, forget(SubRef, Node, State))};
        _ ->
            {noreply, State}
    end;
handle_info({'DOWN', MRef, process, _, _}, #{watches := Watches} = State) when is_map_key(MRef, Watches) ->
    {noreply, unwatch(map_get(MRef, Watches), MRef, State)};
handle_info({'DOWN', MRef, process, _, _}, #{subs := Subs, refs := Refs} = State) ->
    case Refs of
        #{MRef := {SubRef, Node}} ->
            %% The node's server (while pending) or its pusher went away.
            {noreply, retry_later(SubRef, Node, forget(SubRef, Node, State))};
        _ ->
            case [Ref || {Ref, #{owner_monitor := M}} <- maps:to_list(Subs), M =:= MRef] of
                [Ref] -> {noreply, cancel(Ref, State)};
                [] -> {noreply, State}
            end
    end;
handle_info({resubscribe, SubRef, Node}, #{subs := Subs} = State) ->
    case Subs of
        #{SubRef := #{nodes := #{Node := waiting}}} -> {noreply, request_pusher(SubRef, Node, State)};
        _ -> {noreply, State}
    end;
handle_info(_Msg, State) ->
    terrain_attr_table:count(malformed_dropped),
    {noreply, State}.

%%--------------------------------------------------------------------
%% Internal

%% How long a node is not asked after its Count-th consecutive failure, which cost the
%% query CostMs: 500 ms plus the cost, doubled with each failure, at most 30 s or the
%% first backoff, whichever is longer.
backoff_ms(CostMs, Count) ->
    First = ?BACKOFF_BASE_MS + max(0, CostMs),
    min(max(?BACKOFF_MAX_MS, First), First bsl min(Count - 1, 16)).

%% Values fetched from a node, merged into its row as it is now: its new row (backoff
%% cleared) and the state.
store_node(Node, Entries, Stamp, State) ->
    {Values1, Stamps1} = case ets:lookup(?CACHE, Node) of
                             [{_, Values, Stamps, _, _}] -> merge(Entries, Stamp, Values, Stamps);
                             [] -> merge(Entries, Stamp, #{}, #{})
                         end,
    {Watched, State1} = watch(Node, State),
    {{Node, Values1, Stamps1, none, Watched}, State1}.

%% A node answered: watch its attribute responder from now on if nobody does yet.
watch(Node, #{watching := Watching, watches := Watches} = State) ->
    case Watching of
        #{Node := _} ->
            {true, State};
        _ ->
            try monitor(process, {terrain_attr_responder, Node}) of
                MRef -> {true, State#{watching := Watching#{Node => MRef}, watches := Watches#{MRef => Node}}}
            catch
                error:badarg -> {false, State}    % this node is not distributed (any more)
            end
    end.

%% The watch on a node's attribute responder ended (it stopped, or the connection went):
%% its next queries carry a monitor again.
unwatch(Node, MRef, #{watching := Watching, watches := Watches} = State) ->
    _ = ets:update_element(?CACHE, Node, {5, false}),
    State#{watching := case Watching of
                           #{Node := MRef} -> maps:remove(Node, Watching);
                           _ -> Watching
                       end,
           watches := maps:remove(MRef, Watches)}.

%% Drops a node's values but keeps its backoff (the row goes when there is none).
forget_values(Node, #{generation := Generation}) ->
    atomics:add(Generation, 1, 1),
    _ = case row(Node) of
            {_, _, none, _} -> ets:delete(?CACHE, Node);
            {_, _, Backoff, Watched} -> ets:insert(?CACHE, {Node, #{}, #{}, Backoff, Watched})
        end,
    ok.

%% A push: store the changed values and mark every subscribed value fresh as of now.
pushed(SubRef, Node, Changed, #{subs := Subs, watching := Watching, generation := Generation}) ->
    atomics:add(Generation, 1, 1),
    Now = erlang:monotonic_time(millisecond),
    #{SubRef := #{names := Names}} = Subs,
    {Values, Stamps, Backoff, _} = row(Node),
    Refreshed = lists:foldl(fun(Name, Acc) ->
                                    case Acc of
                                        #{Name := Stamp} when is_integer(Stamp) -> Acc#{Name := Now};
                                        _ -> Acc
                                    end
                            end, Stamps, Names),
    {Values1, Stamps1} = merge(Changed, Now, Values, Refreshed),
    true = ets:insert(?CACHE, {Node, Values1, Stamps1, Backoff, maps:is_key(Node, Watching)}),
    ok.

request_pusher(SubRef, Node, #{subs := Subs, refs := Refs} = State) ->
    #{SubRef := #{names := Names, interval := Interval}} = Subs,
    case is_alive() of
        true ->
            Dest = {terrain_attr_server, Node},
            MRef = monitor(process, Dest, [{alias, demonitor}]),
            Dest ! {'$terrain_attr_subscribe', 1, MRef, self(), Names, Interval},
            set_node(SubRef, Node, {pending, MRef}, State#{refs := Refs#{MRef => {SubRef, Node}}});
        false ->
            retry_later(SubRef, Node, State)
    end.

retry_later(SubRef, Node, #{subs := Subs} = State) ->
    case maps:is_key(SubRef, Subs) of
        true ->
            _ = erlang:send_after(?RESUBSCRIBE_MS, self(), {resubscribe, SubRef, Node}),
            set_node(SubRef, Node, waiting, State);
        false ->
            State
    end.

%% Drops every reference that belongs to one node of one subscription.
forget(SubRef, Node, #{refs := Refs} = State) ->
    State#{refs := maps:filter(fun(_Ref, Owner) -> Owner =/= {SubRef, Node} end, Refs)}.

set_node(SubRef, Node, PerNode, #{subs := Subs} = State) ->
    case Subs of
        #{SubRef := #{nodes := Nodes} = Sub} ->
            State#{subs := Subs#{SubRef := Sub#{nodes := Nodes#{Node => PerNode}}}};
        _ ->
            State
    end.

cancel(SubRef, #{subs := Subs, refs := Refs} = State) ->
    case maps:take(SubRef, Subs) of
        {#{owner_monitor := OwnerMonitor, nodes := Nodes}, Subs1} ->
            demonitor(OwnerMonitor, [flush]),
            Dropped = lists:append(
                        [case PerNode of
                             {pending, MRef} ->
                                 demonitor(MRef, [flush]),
                                 [MRef];
                             {active, Pusher, PushRef, PusherMonitor} ->
                                 demonitor(PusherMonitor, [flush]),
                                 _ = erlang:send(Pusher, {'$terrain_attr_unsubscribe', PushRef}, [noconnect]),
                                 [PushRef, PusherMonitor];
                             waiting ->
                                 []
                         end || PerNode <- maps:values(Nodes)]),
            State#{subs := Subs1, refs := maps:without(Dropped, Refs)};
        error ->
            State
    end.
