%% @private
%% @doc Asks many nodes for attribute values at once, under one deadline, in the
%% calling process.
%%
%% For each distinct node: the local node is read directly; a node in backoff answers
%% `{error, Reason}' at once; values in the cache that are fresh enough (static ones
%% always, volatile ones younger than `max_age') are used; the rest is requested from
%% the node's attribute server. Every request is sent before any reply is awaited,
%% and one deadline bounds the whole wait: the call never takes much longer than its
%% timeout however many nodes are slow, down or gone. A monitor on each remote server
%% turns "no such process" and "no connection" into immediate answers; the monitor is
%% also the reply alias, so a reply that arrives after the deadline is dropped by the
%% runtime and never reaches the caller's mailbox.
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
              maps:map(fun(_Node, V) -> {ok, V} end, Values), Errors).

%% @doc As {@link fetch/4}, split into the values of the nodes that answered and the
%% errors of those that did not (what selection needs).
-spec gather([node()], [terrain:attr_name()] | all, non_neg_integer(), non_neg_integer() | infinity) ->
          {#{node() => #{terrain:attr_name() => term()}}, #{node() => terrain_attr_cache:failure()}}.
gather(Nodes, Names, Timeout, MaxAge) ->
    Now = erlang:monotonic_time(millisecond),
    Deadline = Now + Timeout,
    {Values, Errors, Pending, Local, Hits, Skips} =
        plan(lists:usort(Nodes), Names, Now, MaxAge, is_alive(), #{}, #{}, #{}, false, 0, 0),
    count(Hits, Skips, map_size(Pending)),
    %% the local node is read while the remote answers travel
    {Values1, Errors1} = case Local of
                             false -> {Values, Errors};
                             true ->
                                 case local(Names) of
                                     {ok, V} -> {Values#{node() => V}, Errors};
                                     {error, Reason} -> {Values, Errors#{node() => Reason}}
                                 end
                         end,
    {Fetched, Failed} = collect(Pending, Deadline, [], []),
    terrain_attr_cache:store(Now, [{Node, Entries} || {Node, Entries, _} <- Fetched]),
    terrain_attr_cache:failed(Now, Failed),
    {lists:foldl(fun({Node, Entries, Cached}, Acc) -> Acc#{Node => values(Names, Entries, Cached)} end,
                 Values1, Fetched),
     lists:foldl(fun({Node, Reason}, Acc) -> Acc#{Node => Reason} end, Errors1, Failed)}.

%%--------------------------------------------------------------------
%% Internal

%% One pass over the nodes: answer from the cache or the backoff when possible, send
%% a request for what is missing, note whether the local node is among them.
plan([], _Names, _Now, _MaxAge, _Alive, Values, Errors, Pending, Local, Hits, Skips) ->
    {Values, Errors, Pending, Local, Hits, Skips};
plan([Node | Nodes], Names, Now, MaxAge, Alive, Values, Errors, Pending, _Local, Hits, Skips)
  when Node =:= node() ->
    plan(Nodes, Names, Now, MaxAge, Alive, Values, Errors, Pending, true, Hits, Skips);
plan([Node | Nodes], Names, Now, MaxAge, Alive, Values, Errors, Pending, Local, Hits, Skips) ->
    case terrain_attr_cache:lookup(Node) of
        {_, {Until, Reason, _}} when Now < Until ->
            plan(Nodes, Names, Now, MaxAge, Alive, Values, Errors#{Node => Reason}, Pending, Local,
                 Hits, Skips + 1);
        {Cache, _} ->
            case from_cache(Names, Cache, Now, MaxAge, #{}, []) of
                {Fresh, []} ->
                    plan(Nodes, Names, Now, MaxAge, Alive, Values#{Node => Fresh}, Errors, Pending, Local,
                         Hits + 1, Skips);
                {_, _} when not Alive ->
                    terrain_attr_table:count(noconnection),
                    plan(Nodes, Names, Now, MaxAge, Alive, Values, Errors#{Node => noconnection}, Pending,
                         Local, Hits, Skips);
                {Fresh, Missing} ->
                    MRef = send(Node, Missing),
                    plan(Nodes, Names, Now, MaxAge, Alive, Values, Errors, Pending#{MRef => {Node, Fresh}},
                         Local, Hits, Skips)
            end
    end.

%% The names the cache can answer (static always, volatile while younger than
%% MaxAge), and the names it cannot, in their order.
from_cache(all, _Cache, _Now, _MaxAge, _Fresh, _Missing) ->
    {#{}, all};
from_cache([], _Cache, _Now, _MaxAge, Fresh, Missing) ->
    {Fresh, lists:reverse(Missing)};
from_cache([Name | Names], Cache, Now, MaxAge, Fresh, Missing) ->
    case Cache of
        #{Name := {Value, static, _}} ->
            from_cache(Names, Cache, Now, MaxAge, Fresh#{Name => Value}, Missing);
        #{Name := {Value, volatile, Stamp}} when Now - Stamp < MaxAge ->
            from_cache(Names, Cache, Now, MaxAge, Fresh#{Name => Value}, Missing);
        _ ->
            from_cache(Names, Cache, Now, MaxAge, Fresh, [Name | Missing])
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
        {ok, values(Names, Entries, #{})}
    catch
        error:badarg -> {error, not_running}   % the attribute tables do not exist
    end.

send(Node, Names) ->
    Dest = {?SERVER, Node},
    MRef = monitor(process, Dest, [{alias, demonitor}]),
    Dest ! {'$terrain_attrs', 1, MRef, Names},
    MRef.

collect(Pending, _Deadline, Fetched, Failed) when map_size(Pending) =:= 0 ->
    {Fetched, Failed};
collect(Pending, Deadline, Fetched, Failed) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {MRef, Entries} when is_map_key(MRef, Pending), is_list(Entries) ->
            demonitor(MRef, [flush]),
            {{Node, Cached}, Rest} = maps:take(MRef, Pending),
            collect(Rest, Deadline, [{Node, Entries, Cached} | Fetched], Failed);
        {'DOWN', MRef, process, _, Info} when is_map_key(MRef, Pending) ->
            {{Node, _}, Rest} = maps:take(MRef, Pending),
            Reason = case Info of
                         noconnection -> noconnection;
                         _ -> not_running
                     end,
            terrain_attr_table:count(Reason),
            collect(Rest, Deadline, Fetched, [{Node, Reason} | Failed])
    after Wait ->
            TimedOut = [begin demonitor(MRef, [flush]), {Node, timeout} end
                        || {MRef, {Node, _}} <- maps:to_list(Pending)],
            terrain_attr_table:count(timeouts, length(TimedOut)),
            {Fetched, TimedOut ++ Failed}
    end.

%% The answer for one node: every requested name, `undefined' where it has no value.
values(all, Entries, _Cached) ->
    maps:from_list([{Name, Value} || {Name, Value, _} <- Entries, is_atom(Name)]);
values(Names, Entries, Cached) ->
    Got = maps:merge(Cached, maps:from_list([{Name, Value} || {Name, Value, _} <- Entries, is_atom(Name)])),
    maps:from_list([{Name, maps:get(Name, Got, undefined)} || Name <- Names]).
