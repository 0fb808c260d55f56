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
-export([fetch/4]).

-type result() :: {ok, #{terrain:attr_name() => term()}} | {error, terrain_attr_cache:failure()}.
-export_type([result/0]).

-define(SERVER, terrain_attr_server).

%% @doc Fetches Names (or `all') from Nodes. Timeout and MaxAge in ms.
-spec fetch([node()], [terrain:attr_name()] | all, non_neg_integer(), non_neg_integer() | infinity) ->
          #{node() => result()}.
fetch(Nodes, Names, Timeout, MaxAge) ->
    terrain_attr_table:count(queries),
    Now = erlang:monotonic_time(millisecond),
    Deadline = Now + Timeout,
    Distinct = lists:usort(Nodes),
    Plans = [{Node, plan(Node, Names, Now, MaxAge)} || Node <- Distinct],
    Pending = maps:from_list([{send(Node, Missing), {Node, Cached}}
                              || {Node, {fetch, Missing, Cached}} <- Plans, is_alive()]),
    Immediate = [{Node, immediate(Node, Plan, Names)} || {Node, Plan} <- Plans,
                                                         not is_fetch(Plan) orelse not is_alive()],
    {Fetched, Failed} = collect(Pending, Deadline, [], []),
    terrain_attr_cache:store(Now, [{Node, Entries} || {Node, Entries, _} <- Fetched]),
    terrain_attr_cache:failed(Now, Failed),
    maps:from_list(Immediate
                   ++ [{Node, {ok, values(Names, Entries, Cached)}} || {Node, Entries, Cached} <- Fetched]
                   ++ [{Node, {error, Reason}} || {Node, Reason} <- Failed]).

%%--------------------------------------------------------------------
%% Internal

%% What to do for one node: read it here, answer from the cache or the backoff table,
%% or fetch the names the cache cannot give.
plan(Node, _Names, _Now, _MaxAge) when Node =:= node() ->
    local;
plan(Node, Names, Now, MaxAge) ->
    case terrain_attr_cache:backoff(Node, Now) of
        {error, Reason} ->
            terrain_attr_table:count(backoff_skips),
            {error, Reason};
        ok when Names =:= all ->
            {fetch, all, #{}};
        ok ->
            Cache = terrain_attr_cache:cached(Node),
            {Fresh, Missing} =
                lists:foldl(fun(Name, {F, M}) ->
                                    case Cache of
                                        #{Name := {Value, static, _}} -> {F#{Name => Value}, M};
                                        #{Name := {Value, volatile, Stamp}} when Now - Stamp < MaxAge ->
                                            {F#{Name => Value}, M};
                                        _ -> {F, [Name | M]}
                                    end
                            end, {#{}, []}, Names),
            case Missing of
                [] -> terrain_attr_table:count(cache_hits), {cached, Fresh};
                _ -> {fetch, lists:reverse(Missing), Fresh}
            end
    end.

is_fetch({fetch, _, _}) -> true;
is_fetch(_) -> false.

immediate(_Node, local, Names) ->
    try
        Entries = case Names of
                      all -> terrain_attr_server:read_all();
                      _ -> terrain_attr_server:read(Names)
                  end,
        {ok, values(Names, Entries, #{})}
    catch
        error:badarg -> {error, not_running}   % the attribute tables do not exist
    end;
immediate(_Node, {error, Reason}, _Names) ->
    {error, Reason};
immediate(_Node, {cached, Values}, _Names) ->
    {ok, Values};
immediate(_Node, {fetch, _, _}, _Names) ->
    terrain_attr_table:count(noconnection),
    {error, noconnection}.   % this node is not distributed

send(Node, Names) ->
    terrain_attr_table:count(node_requests),
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
