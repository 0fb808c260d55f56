%% @private
%% @doc Asks many nodes for attribute values at once, under one deadline, in the
%% calling process.
%%
%% For each distinct node: the local node is read directly; a node in backoff answers
%% `{error, Reason}' at once; values in the cache that are fresh enough (static ones
%% always, volatile ones younger than `max_age') are used; the rest is requested from
%% the node's attribute server. Every request is sent before any reply is awaited,
%% and one deadline bounds the whole wait: the call never takes much longer than its
%% timeout however many nodes are slow, down or gone.
%%
%% Each request carries a reply alias, so a reply that arrives after the deadline is
%% dropped by the runtime and never reaches the caller's mailbox. A node whose
%% attribute server the cache watches (see {@link terrain_attr_cache}) and that is
%% connected is asked with the alias alone: a request and its reply, as cheap as a
%% plain round trip. Any other node is asked under a monitor that doubles as the
%% alias, which turns "no such process" (`not_running') and "no connection" into
%% immediate answers. A watched node that dies while a request is out is noticed at
%% the deadline (`timeout'), by the watch for the calls after.
-module(terrain_attr_query).

%% API
-export([fetch/4,
         gather/4]).

-type result() :: {ok, #{terrain:attr_name() => term()}} | {error, terrain_attr_cache:failure()}.
-export_type([result/0]).

-define(SERVER, terrain_attr_server).

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
    {Values, Errors, Ask, Local, Hits, Skips} =
        plan(lists:usort(Nodes), terrain_attr_cache:table(), Names, Now, MaxAge, #{}, #{}, [], false, 0, 0),
    {Pending, Errors1} = send_all(Ask, Errors),
    count(Hits, Skips, map_size(Pending)),
    %% the local node is read while the remote answers travel
    {Values1, Errors2} = case Local of
                             false -> {Values, Errors1};
                             true ->
                                 case local(Names) of
                                     {ok, V} -> {Values#{node() => V}, Errors1};
                                     {error, Reason} -> {Values, Errors1#{node() => Reason}}
                                 end
                         end,
    {Fetched, Failed} = collect(Pending, Deadline, [], []),
    terrain_attr_cache:store(Now, [{Node, Entries} || {Node, Entries, _} <- Fetched]),
    terrain_attr_cache:failed(Now, Failed),
    {lists:foldl(fun({Node, Entries, Cached}, Acc) -> Acc#{Node => merge(Entries, Cached)} end,
                 Values1, Fetched),
     lists:foldl(fun({Node, Reason}, Acc) -> Acc#{Node => Reason} end, Errors2, Failed)}.

%%--------------------------------------------------------------------
%% Internal

%% One pass over the nodes: answer from the cache or the backoff when possible, list
%% what must be asked, note whether the local node is among them. The values of a
%% cache hit are the cached map as it is (it may hold more names than were asked for).
plan([], _Table, _Names, _Now, _MaxAge, Values, Errors, Ask, Local, Hits, Skips) ->
    {Values, Errors, Ask, Local, Hits, Skips};
plan([Node | Nodes], Table, Names, Now, MaxAge, Values, Errors, Ask, _Local, Hits, Skips)
  when Node =:= node() ->
    plan(Nodes, Table, Names, Now, MaxAge, Values, Errors, Ask, true, Hits, Skips);
plan([Node | Nodes], Table, Names, Now, MaxAge, Values, Errors, Ask, Local, Hits, Skips) ->
    case terrain_attr_cache:row(Table, Node) of
        {_, _, {Until, Reason, _}, _} when Now < Until ->
            plan(Nodes, Table, Names, Now, MaxAge, Values, Errors#{Node => Reason}, Ask, Local, Hits, Skips + 1);
        {Cached, Stamps, _, Watched} ->
            case missing(Names, Stamps, Now, MaxAge, []) of
                [] ->
                    plan(Nodes, Table, Names, Now, MaxAge, Values#{Node => Cached}, Errors, Ask, Local,
                         Hits + 1, Skips);
                all ->
                    plan(Nodes, Table, Names, Now, MaxAge, Values, Errors, [{Node, all, #{}, Watched} | Ask],
                         Local, Hits, Skips);
                Missing ->
                    plan(Nodes, Table, Names, Now, MaxAge, Values, Errors, [{Node, Missing, Cached, Watched} | Ask],
                         Local, Hits, Skips)
            end
    end.

%% The names the cache cannot answer (static ones always can, the others while younger
%% than MaxAge), in their order.
missing(all, _Stamps, _Now, _MaxAge, _Missing) ->
    all;
missing([], _Stamps, _Now, _MaxAge, Missing) ->
    lists:reverse(Missing);
missing([Name | Names], Stamps, Now, MaxAge, Missing) ->
    case Stamps of
        #{Name := static} -> missing(Names, Stamps, Now, MaxAge, Missing);
        #{Name := Stamp} when Now - Stamp < MaxAge -> missing(Names, Stamps, Now, MaxAge, Missing);
        _ -> missing(Names, Stamps, Now, MaxAge, [Name | Missing])
    end.

%% Sends every request. Without distribution no remote node can be asked.
send_all([], Errors) ->
    {#{}, Errors};
send_all(Ask, Errors) ->
    case is_alive() of
        false ->
            terrain_attr_table:count(noconnection, length(Ask)),
            {#{}, lists:foldl(fun({Node, _, _, _}, Acc) -> Acc#{Node => noconnection} end, Errors, Ask)};
        true ->
            Connected = maps:from_list([{N, true} || N <- nodes()]),
            {maps:from_list([send(Node, Missing, Cached, Watched andalso is_map_key(Node, Connected))
                             || {Node, Missing, Cached, Watched} <- Ask]),
             Errors}
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
        {ok, merge(Entries, #{})}
    catch
        error:badarg -> {error, not_running}   % the attribute tables do not exist
    end.

%% Sends one request; returns its entry in the pending map: the reply reference, then
%% the node, its cached values and how the reply is awaited (`alias' or `monitor').
send(Node, Names, Cached, true) ->
    Alias = alias([reply]),
    {terrain_attr_server, Node} ! {'$terrain_attrs', 1, Alias, Names},
    {Alias, {Node, Cached, alias}};
send(Node, Names, Cached, false) ->
    Dest = {terrain_attr_server, Node},
    MRef = monitor(process, Dest, [{alias, demonitor}]),
    Dest ! {'$terrain_attrs', 1, MRef, Names},
    {MRef, {Node, Cached, monitor}}.

collect(Pending, _Deadline, Fetched, Failed) when map_size(Pending) =:= 0 ->
    {Fetched, Failed};
collect(Pending, Deadline, Fetched, Failed) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Ref, Entries} when is_map_key(Ref, Pending), is_list(Entries) ->
            {{Node, Cached, How}, Rest} = maps:take(Ref, Pending),
            _ = How =:= monitor andalso demonitor(Ref, [flush]),
            collect(Rest, Deadline, [{Node, Entries, Cached} | Fetched], Failed);
        {'DOWN', MRef, process, _, Info} when is_map_key(MRef, Pending) ->
            {{Node, _, _}, Rest} = maps:take(MRef, Pending),
            Reason = case Info of
                         noconnection -> noconnection;
                         _ -> not_running
                     end,
            terrain_attr_table:count(Reason),
            collect(Rest, Deadline, Fetched, [{Node, Reason} | Failed])
    after Wait ->
            TimedOut = [begin give_up(Ref, How), {Node, timeout} end
                        || {Ref, {Node, _, How}} <- maps:to_list(Pending)],
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

%% Fetched entries over the cached values of the same node.
merge(Entries, Cached) ->
    lists:foldl(fun({Name, Value, _Class}, Acc) when is_atom(Name) -> Acc#{Name => Value};
                   (_, Acc) -> Acc
                end, Cached, Entries).

%% The answer for one node: every requested name, `undefined' where it has no value.
values(all, Values) ->
    Values;
values(Names, Values) ->
    maps:from_list([{Name, maps:get(Name, Values, undefined)} || Name <- Names]).
