%% @private
%% @doc Asks many nodes for attribute values at once, under one deadline, in the
%% calling process.
%%
%% For each distinct node: the local node is read directly; a node in backoff answers
%% `{error, Reason}' at once; values in the cache that are fresh enough (static ones
%% always, volatile ones younger than `max_age') are used; the rest is requested from
%% the node's attribute responder ({@link terrain_attr_responder}). Every request is
%% sent before any reply is awaited, and one deadline bounds the whole wait: the call never takes much longer than its
%% timeout however many nodes are slow, down or gone.
%%
%% Each request carries a reply alias, so a reply that arrives after the deadline is
%% dropped by the runtime and never reaches the caller's mailbox. A node whose
%% attribute responder the cache watches (see {@link terrain_attr_cache}) and that is
%% connected is asked with the alias alone: a request and its reply, as cheap as a
%% plain round trip. Any other node is asked under a monitor that doubles as the
%% alias, which turns "no such process" (`not_running') and "no connection" into
%% immediate answers. A watched node that dies while a request is out is noticed at
%% the deadline (`timeout'), by the watch for the calls after.
%%
%% A node that failed is recorded in the cache's backoff before the call returns (the
%% call waits for the cache until its deadline, or 20 ms when that has passed), with
%% the time its failure was observed and what it cost the call (see
%% {@link terrain_attr_cache:failed/3}): a node that cost a whole deadline is then
%% skipped by the calls that follow, for longer than that deadline.
-module(terrain_attr_query).

%% API
-export([fetch/4,
         gather/4]).

-type result() :: {ok, #{terrain:attr_name() => term()}} | {error, terrain_attr_cache:failure()}.
-export_type([result/0]).

-define(RESPONDER, terrain_attr_responder).

%% @doc Fetches Names (or `all') from Nodes, one answer per node. Timeout and MaxAge in ms.
-spec fetch([node()], [terrain:attr_name()] | all, non_neg_integer(), non_neg_integer() | infinity) ->
          #{node() => result()}.
fetch(Nodes, Names, Timeout, MaxAge) ->
    {Values, Errors} = gather(Nodes, Names, Timeout, MaxAge),
    maps:fold(fun(Node, Reason, Acc) -> Acc#{Node => {error, Reason}} end,
              maps:map(fun(_Node, V) -> {ok, values(Names, V)} end, Values), Errors).

%% @doc As {@link fetch/4}, split into the values of the nodes that answered and the
%% errors of those that did not (what selection needs). A node's values may hold
%% more names than were asked for (what its cache row holds); a name without a value
%% is absent or `undefined'.
-spec gather([node()], [terrain:attr_name()] | all, non_neg_integer(), non_neg_integer() | infinity) ->
          {#{node() => #{terrain:attr_name() => term()}}, #{node() => terrain_attr_cache:failure()}}.
gather(Nodes, Names, Timeout, MaxAge) ->
    Now = erlang:monotonic_time(millisecond),
    Deadline = Now + Timeout,
    %% no sort to drop duplicate candidates (atoms sort by their text): the maps below
    %% drop them, and the requests are made distinct
    {Table, Gen} = terrain_attr_cache:snapshot(),
    {Hits, Skipped, Ask, Local} = plan(Nodes, Table, Names, Now, MaxAge, [], [], [], false),
    HitMap = maps:from_list(Hits),
    SkipMap = maps:from_list(Skipped),
    {Pending, Unsent} = send_all(case Ask of [_, _ | _] -> lists:ukeysort(1, Ask); _ -> Ask end),
    count(map_size(HitMap), map_size(SkipMap), map_size(Pending)),
    %% the local node is read while the remote answers travel
    {Values, Errors} = case Local of
                           false -> {HitMap, SkipMap};
                           true ->
                               case local(Names) of
                                   {ok, V} -> {HitMap#{node() => V}, SkipMap};
                                   {error, Reason} -> {HitMap, SkipMap#{node() => Reason}}
                               end
                       end,
    {Fetched, Failed} = collect(Pending, Deadline, [], []),
    %% the rows the cache stores as they are (see terrain_attr_cache:store/3)
    Rows = [begin
                {Values1, Stamps1} = terrain_attr_cache:merge(Entries, Now, Cached, Stamps),
                {Node, Entries, Values1, Stamps1}
            end || {Node, Entries, Cached, Stamps} <- Fetched],
    terrain_attr_cache:store(Now, Gen, Rows),
    %% recorded before the call returns, so that the caller's next call skips them
    terrain_attr_cache:failed(Now, Failed, Deadline),
    {lists:foldl(fun({Node, _, Values1, _}, Acc) -> Acc#{Node => Values1} end, Values, Rows),
     lists:foldl(fun({Node, Reason}, Acc) -> Acc#{Node => Reason} end, Errors,
                 [{Node, Reason} || {Node, Reason, _} <- Failed] ++ Unsent)}.

%%--------------------------------------------------------------------
%% Internal

%% One pass over the nodes: answer from the cache or the backoff when possible, list
%% what must be asked, note whether the local node is among them. The values of a
%% cache hit are the cached map as it is (it may hold more names than were asked for).
plan([], _Table, _Names, _Now, _MaxAge, Hits, Skipped, Ask, Local) ->
    {Hits, Skipped, Ask, Local};
plan([Node | Nodes], Table, Names, Now, MaxAge, Hits, Skipped, Ask, _Local) when Node =:= node() ->
    plan(Nodes, Table, Names, Now, MaxAge, Hits, Skipped, Ask, true);
plan([Node | Nodes], Table, Names, Now, MaxAge, Hits, Skipped, Ask, Local) ->
    case terrain_attr_cache:row(Table, Node) of
        {_, _, {Until, Reason, _}, _} when Now < Until ->
            plan(Nodes, Table, Names, Now, MaxAge, Hits, [{Node, Reason} | Skipped], Ask, Local);
        {Cached, Stamps, _, Watched} ->
            case fresh(Names, Stamps, Now, MaxAge) of
                true ->
                    plan(Nodes, Table, Names, Now, MaxAge, [{Node, Cached} | Hits], Skipped, Ask, Local);
                false when Names =:= all ->
                    plan(Nodes, Table, Names, Now, MaxAge, Hits, Skipped, [{Node, all, #{}, #{}, Watched} | Ask],
                         Local);
                false ->
                    Missing = stale(Names, Stamps, Now, MaxAge),
                    plan(Nodes, Table, Names, Now, MaxAge, Hits, Skipped,
                         [{Node, Missing, Cached, Stamps, Watched} | Ask], Local)
            end
    end.

%% Whether the cache can answer all these names: static ones always can, the others
%% while younger than MaxAge; `all' never.
fresh([Name | Names], Stamps, Now, MaxAge) ->
    case Stamps of
        #{Name := static} -> fresh(Names, Stamps, Now, MaxAge);
        #{Name := Stamp} when Now - Stamp < MaxAge -> fresh(Names, Stamps, Now, MaxAge);
        _ -> false
    end;
fresh([], _Stamps, _Now, _MaxAge) ->
    true;
fresh(all, _Stamps, _Now, _MaxAge) ->
    false.

%% The names the cache cannot answer, in their order.
stale([Name | Names], Stamps, Now, MaxAge) ->
    case Stamps of
        #{Name := static} -> stale(Names, Stamps, Now, MaxAge);
        #{Name := Stamp} when Now - Stamp < MaxAge -> stale(Names, Stamps, Now, MaxAge);
        _ -> [Name | stale(Names, Stamps, Now, MaxAge)]
    end;
stale([], _Stamps, _Now, _MaxAge) ->
    [].

%% Sends every request: the pending requests, and the nodes that could not be asked
%% (without distribution no remote node can be).
send_all([]) ->
    {#{}, []};
send_all(Ask) ->
    case is_alive() of
        false ->
            terrain_attr_table:count(noconnection, length(Ask)),
            {#{}, [{Node, noconnection} || {Node, _, _, _, _} <- Ask]};
        true ->
            Connected = nodes(),
            {maps:from_list([send(Node, Missing, {Node, Cached, Stamps}, Watched andalso lists:member(Node, Connected))
                             || {Node, Missing, Cached, Stamps, Watched} <- Ask]),
             []}
    end.

count(Hits, Skips, Requests) ->
    terrain_attr_table:count(queries),
    _ = Hits > 0 andalso terrain_attr_table:count(cache_hits, Hits),
    _ = Skips > 0 andalso terrain_attr_table:count(backoff_skips, Skips),
    _ = Requests > 0 andalso terrain_attr_table:count(node_requests, Requests),
    ok.

local(Names) ->
    try
        Entries = case Names of
                      all -> terrain_attr_server:read_all();
                      _ -> terrain_attr_server:read(Names)
                  end,
        {ok, maps:from_list([{Name, Value} || {Name, Value, _Class} <- Entries])}
    catch
        error:badarg -> {error, not_running}   % the attribute tables do not exist
    end.

%% Sends one request; returns its entry in the pending map: the reply reference, then
%% what the reply is for ({Node, CachedValues, CachedStamps}) and how it is awaited
%% (`alias' or `monitor').
send(Node, Names, For, true) ->
    Alias = alias([reply]),
    {?RESPONDER, Node} ! {'$terrain_attrs', 1, Alias, Names},
    {Alias, {For, alias}};
send(Node, Names, For, false) ->
    Dest = {?RESPONDER, Node},
    MRef = monitor(process, Dest, [{alias, demonitor}]),
    Dest ! {'$terrain_attrs', 1, MRef, Names},
    {MRef, {For, monitor}}.

collect(Pending, _Deadline, Fetched, Failed) when map_size(Pending) =:= 0 ->
    {Fetched, Failed};
collect(Pending, Deadline, Fetched, Failed) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Ref, Entries} when is_map_key(Ref, Pending), is_list(Entries) ->
            {{{Node, Cached, Stamps}, How}, Rest} = maps:take(Ref, Pending),
            _ = How =:= monitor andalso demonitor(Ref, [flush]),
            collect(Rest, Deadline, [{Node, Entries, Cached, Stamps} | Fetched], Failed);
        {'DOWN', MRef, process, _, Info} when is_map_key(MRef, Pending) ->
            {{{Node, _, _}, _}, Rest} = maps:take(MRef, Pending),
            Reason = case Info of
                         noconnection -> noconnection;
                         _ -> not_running
                     end,
            terrain_attr_table:count(Reason),
            collect(Rest, Deadline, Fetched, [{Node, Reason, erlang:monotonic_time(millisecond)} | Failed])
    after Wait ->
            Observed = erlang:monotonic_time(millisecond),
            TimedOut = [begin give_up(Ref, How), {Node, timeout, Observed} end
                        || {Ref, {{Node, _, _}, How}} <- maps:to_list(Pending)],
            terrain_attr_table:count(timeouts, length(TimedOut)),
            {Fetched, TimedOut ++ Failed}
    end.

%% After the deadline: a late reply is dropped by the runtime.
give_up(Alias, alias) ->
    unalias(Alias),
    flush(Alias);
give_up(MRef, monitor) ->
    demonitor(MRef, [flush]),
    flush(MRef).

%% A reply that arrived between the deadline and the alias's end.
flush(Ref) ->
    receive
        {Ref, _} -> ok
    after 0 -> ok
    end.

%% The answer for one node: every requested name, `undefined' where it has no value.
values(all, Values) ->
    Values;
values(Names, Values) ->
    maps:from_list([{Name, maps:get(Name, Values, undefined)} || Name <- Names]).
