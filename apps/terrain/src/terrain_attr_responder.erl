%% @private
%% @doc Answers other nodes' attribute requests. Registered as
%% `terrain_attr_responder'.
%%
%% Requests are `{'$terrain_attrs', 1, ReplyTo, Names}' (Names: atoms, or `all'); the
%% answer is `ReplyTo ! {ReplyTo, [{Name, Value, Class}]}'. The responder reads the
%% attribute tables directly (they are protected: anyone may read) and writes nothing.
%% Requests carry names only; nothing received is ever evaluated; anything malformed is
%% dropped and counted (`malformed_dropped').
%%
%% Why a process of its own, and why a plain receive loop (a `proc_lib' special
%% process, `sys'-compliant) rather than the attribute server: a fresh query wakes every
%% asked node once, and on a crowded machine the time of a fan-out is the sum of what
%% those wake-ups cost. A request here runs one small loop — no `gen_server'
%% dispatch, no statistics lookup by name — so that asking a node costs close to a
%% plain round trip (docs/BENCHMARKS.md, "Node attributes"). It also keeps answering
%% while the attribute server is busy with a write or restarting.
%%
%% Names that need a user-defined dynamic attribute (and `all') are answered by a
%% short-lived process, so a hanging function never blocks the responder.
-module(terrain_attr_responder).

%% API
-export([start_link/0]).

%% proc_lib and sys callbacks
-export([init/1,
         system_continue/3,
         system_terminate/4,
         system_code_change/4]).

%% exports_not_used: start_link/0 is named in terrain_sup's child spec, init/1 is started by proc_lib,
%% and the system_* functions are the sys callbacks of this special process.
-ignore_xref([{init, 1}, {start_link, 0}, {system_code_change, 4}, {system_continue, 3},
              {system_terminate, 4}]).

-define(MAX_NAMES, 10000).

-record(state, {parent :: pid(),
                %% the statistics counters: reference, index of requests_served and of
                %% malformed_dropped
                counters :: {counters:counters_ref(), pos_integer(), pos_integer()} | undefined}).

%%--------------------------------------------------------------------
%% API

%% @doc Starts the responder, registered as `terrain_attr_responder'.
-spec start_link() -> {ok, pid()}.
start_link() ->
    proc_lib:start_link(?MODULE, init, [self()]).

%%--------------------------------------------------------------------
%% proc_lib and sys callbacks

%% @private
-spec init(pid()) -> no_return().
init(Parent) ->
    true = register(?MODULE, self()),
    Counters = case {terrain_attr_table:counter(requests_served), terrain_attr_table:counter(malformed_dropped)} of
                   {{Ref, Served}, {Ref, Dropped}} -> {Ref, Served, Dropped};
                   _ -> undefined
               end,
    proc_lib:init_ack(Parent, {ok, self()}),
    loop(#state{parent = Parent, counters = Counters}, []).

%% @private
-spec system_continue(pid(), [sys:dbg_opt()], #state{}) -> no_return().
system_continue(_Parent, Debug, State) ->
    loop(State, Debug).

%% @private
-spec system_terminate(term(), pid(), [sys:dbg_opt()], #state{}) -> no_return().
system_terminate(Reason, _Parent, _Debug, _State) ->
    exit(Reason).

%% @private
-spec system_code_change(#state{}, module(), term(), term()) -> {ok, #state{}}.
system_code_change(State, _Module, _OldVsn, _Extra) ->
    {ok, State}.

%%--------------------------------------------------------------------
%% Internal

loop(#state{parent = Parent} = State, Debug) ->
    receive
        {'$terrain_attrs', 1, ReplyTo, Names} when is_reference(ReplyTo) ->
            answer(ReplyTo, Names, State),
            loop(State, Debug);
        {system, From, Request} ->
            sys:handle_system_msg(Request, From, Parent, ?MODULE, Debug, State);
        _Other ->
            count(dropped, State),
            loop(State, Debug)
    end.

answer(ReplyTo, Names, State) ->
    try entries(Names, ?MAX_NAMES, []) of
        {ok, Entries} ->
            ReplyTo ! {ReplyTo, Entries},
            count(served, State);
        dynamic ->
            _ = spawn(fun() -> ReplyTo ! {ReplyTo, read(Names)} end),
            count(served, State);
        malformed ->
            count(dropped, State)
    catch
        error:badarg -> ok    % the attribute tables are being recreated: no answer
    end.

%% One pass over the names: the answer, or `dynamic' when a name needs a user-defined
%% dynamic attribute (or all are asked for), or `malformed'.
entries([Name | Names], Left, Acc) when is_atom(Name), Left > 0 ->
    case terrain_attr_server:plain_entry(Name) of
        {ok, Entry} -> entries(Names, Left - 1, [Entry | Acc]);
        dynamic -> check(Names, Left - 1)
    end;
entries([], _Left, Acc) ->
    {ok, lists:reverse(Acc)};
entries(all, _Left, _Acc) ->
    dynamic;
entries(_Names, _Left, _Acc) ->
    malformed.

%% The rest of a request that needs the responder process: is it well formed?
check([Name | Names], Left) when is_atom(Name), Left > 0 -> check(Names, Left - 1);
check([], _Left) -> dynamic;
check(_Names, _Left) -> malformed.

read(all) -> terrain_attr_server:read_all();
read(Names) -> terrain_attr_server:read(Names).

count(_What, #state{counters = undefined}) ->
    ok;
count(served, #state{counters = {Ref, Served, _}}) ->
    counters:add(Ref, Served, 1);
count(dropped, #state{counters = {Ref, _, Dropped}}) ->
    counters:add(Ref, Dropped, 1).
