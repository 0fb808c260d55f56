%% @private
%% @doc The attribute server: one per node, registered as `terrain_attr_server'.
%%
%% It is the only writer of the attribute tables (see {@link terrain_attr_table}).
%% Reads never pass through it: {@link read/1} runs in the caller and reads the tables
%% directly, and other nodes' requests are answered by {@link terrain_attr_responder}.
%%
%% What it does:
%% <ul>
%% <li>loads the configured layer at start: built-ins (unless `builtins' is false),
%%     the `attr_config' file, then the `attrs' list (each overriding the previous);
%%     a bad source is logged and skipped whole, never half-loaded;</li>
%% <li>installs run-time values ({@link set/3}, {@link delete/1}, {@link install/1})
%%     for local callers only, and removes a value when the process that owns it dies;</li>
%% <li>runs one sampler process per sampled attribute and stores its moving average;</li>
%% <li>starts a pusher for `{'$terrain_attr_subscribe', ...}' from any node (push
%%     mode). Anything else that arrives is dropped and counted. Requests carry names
%%     only; nothing received is ever evaluated.</li>
%% </ul>
%%
%% Table rows: `{Name, Kind, Payload, Source}' where Kind is `static' (Payload is the
%% value), `builtin' (Payload is terrain's own bounded function), `dynamic' (Payload is
%% `{MFA, TimeoutMs}') or `sampled' (Payload is the current average or `undefined'),
%% and Source is `config', `persistent' or `{owner, Pid}'.
-module(terrain_attr_server).
-behaviour(gen_server).

%% API
-export([start_link/0,
         install/1,
         set/3,
         delete/1,
         read/1,
         read_all/0,
         plain_entry/1,
         lookup/1]).

%% gen_server callbacks
-export([init/1,
         handle_call/3,
         handle_cast/2,
         handle_info/2]).

-define(TABLE, terrain_attrs).
-define(DEFS, terrain_attr_defs).
-define(MAX_NAMES, 10000).
-define(MAX_PUSHERS, 1000).
-define(MIN_PUSH_INTERVAL, 10).
-define(MAX_PUSH_INTERVAL, 3600000).

-type class() :: static | volatile.
%% `static' values (configured static and automatic attributes) may be cached by
%% other nodes until nodedown; everything else only up to a query's `max_age'.
-export_type([class/0]).

-type state() :: #{owners := #{pid() => reference()},
                   samplers := #{atom() => {pid(), reference()}},
                   pushers := #{reference() => pid()}}.

%%--------------------------------------------------------------------
%% API

%% @doc Starts the attribute server, registered as `terrain_attr_server'.
-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Merges validated, evaluated definitions into the configured layer. Names that
%% hold a run-time value keep it; the configured definition shows again when that
%% value is deleted.
-spec install([terrain_attr_config:entry()]) -> ok.
install(Entries) ->
    gen_server:call(?MODULE, {install, Entries}, infinity).

%% @doc Sets a run-time value owned by a process (removed when it dies) or persistent.
-spec set(terrain:attr_name(), term(), pid() | persistent) -> ok.
set(Name, Value, Owner) ->
    gen_server:call(?MODULE, {set, Name, Value, Owner}, infinity).

%% @doc Deletes the value in force; a run-time value uncovers the configured one.
-spec delete(terrain:attr_name()) -> ok.
delete(Name) ->
    gen_server:call(?MODULE, {delete, Name}, infinity).

%% @doc Reads attributes in the calling process: `{Name, Value, Class}' for each name.
%% Dynamic attributes are evaluated in parallel, each isolated and under its timeout.
-spec read([terrain:attr_name()]) -> [{terrain:attr_name(), term(), class()}].
read(Names) ->
    read_rows([{Name, row(Name)} || Name <- Names]).

read_rows(Rows) ->
    Jobs = [{Name, MFA, Timeout} || {Name, {_, dynamic, {MFA, Timeout}, _}} <- Rows],
    Dynamic = maps:from_list(terrain_attr_eval:many(Jobs)),
    [{Name, value(Row, Dynamic), class(Row)} || {Name, Row} <- Rows].

%% @doc Reads every attribute of this node, in name order.
-spec read_all() -> [{terrain:attr_name(), term(), class()}].
read_all() ->
    read(lists:sort(ets:select(?TABLE, [{{'$1', '_', '_', '_'}, [], ['$1']}]))).


%% @doc The local value of one attribute, `undefined' if it has none.
-spec lookup(terrain:attr_name()) -> term().
lookup(Name) ->
    case row(Name) of
        {_, dynamic, {MFA, Timeout}, _} -> terrain_attr_eval:one(Name, MFA, Timeout);
        Row -> value(Row, #{})
    end.

%%--------------------------------------------------------------------
%% gen_server callbacks

%% @private
-spec init([]) -> {ok, state()}.
init([]) ->
    State0 = #{owners => #{}, samplers => #{}, pushers => #{}},
    State = case terrain_attr_table:claim() of
                fresh -> load_configured(State0);
                restarted -> recover(State0)
            end,
    invalidate_remote_caches(),
    {ok, State}.

%% @private
-spec handle_call(term(), gen_server:from(), state()) -> {reply, term(), state()}.
handle_call(Request, {Pid, _}, State) when node(Pid) =/= node() ->
    terrain_attr_table:count(remote_writes_refused),
    logger:notice("terrain: refused attribute request ~0tP from remote process ~0p",
                  [Request, 10, Pid], #{domain => [terrain, attr]}),
    {reply, {error, not_local}, State};
handle_call({install, Entries}, _From, State) ->
    State1 = lists:foldl(fun({Name, Def}, S) ->
                                 true = ets:insert(?DEFS, {Name, Def}),
                                 case ets:lookup(?TABLE, Name) of
                                     [{_, _, _, Source}] when Source =/= config -> S;
                                     _ -> put_configured(Name, Def, S)
                                 end
                         end, State, Entries),
    invalidate_remote_caches(),
    {reply, ok, State1};
handle_call({set, Name, Value, Owner}, _From, State) ->
    State1 = stop_sampler(Name, State),
    Source = case Owner of persistent -> persistent; Pid -> {owner, Pid} end,
    true = ets:insert(?TABLE, {Name, static, Value, Source}),
    {reply, ok, monitor_owner(Owner, State1)};
handle_call({delete, Name}, _From, State) ->
    State1 = case ets:lookup(?TABLE, Name) of
                 [{_, _, _, config}] ->
                     true = ets:delete(?DEFS, Name),
                     true = ets:delete(?TABLE, Name),
                     stop_sampler(Name, State);
                 [_] ->
                     uncover(Name, State);
                 [] ->
                     State
             end,
    {reply, ok, State1};
handle_call(Request, _From, State) ->
    terrain_attr_table:count(malformed_dropped),
    {reply, {error, {unknown_request, Request}}, State}.

%% @private
-spec handle_cast(term(), state()) -> {noreply, state()}.
handle_cast(_Msg, State) ->
    terrain_attr_table:count(malformed_dropped),
    {noreply, State}.

%% @private
-spec handle_info(term(), state()) -> {noreply, state()}.
handle_info({'$terrain_attr_subscribe', 1, ReplyTo, Subscriber, Names, Interval}, State)
  when is_reference(ReplyTo), is_pid(Subscriber), is_list(Names), is_integer(Interval),
       Interval >= ?MIN_PUSH_INTERVAL, Interval =< ?MAX_PUSH_INTERVAL ->
    case valid_names(Names) andalso Names =/= [] of
        true -> {noreply, subscribe(ReplyTo, Subscriber, Names, Interval, State)};
        false -> terrain_attr_table:count(malformed_dropped), {noreply, State}
    end;
handle_info({'$terrain_sample', Pid, Name, Average}, #{samplers := Samplers} = State) ->
    case Samplers of
        #{Name := {Pid, _}} -> true = ets:update_element(?TABLE, Name, {3, Average});
        _ -> ok
    end,
    {noreply, State};
handle_info({'DOWN', MRef, process, Pid, _Reason}, State) ->
    {noreply, down(MRef, Pid, State)};
handle_info({'ETS-TRANSFER', _Tab, _From, _Data}, State) ->
    {noreply, State};
handle_info(_Msg, State) ->
    terrain_attr_table:count(malformed_dropped),
    {noreply, State}.

%%--------------------------------------------------------------------
%% Loading

load_configured(State) ->
    Builtins = case application:get_env(terrain, builtins, true) of
                   false -> [];
                   _ -> terrain_attr_builtin:definitions()
               end,
    File = case application:get_env(terrain, attr_config) of
               {ok, F} when F =/= undefined -> source(fun() -> terrain_attr_config:parse_file(F) end);
               _ -> []
           end,
    Env = case application:get_env(terrain, attrs) of
              {ok, List} -> source(fun() -> terrain_attr_config:parse_list({application_env, terrain, attrs}, List) end);
              undefined -> []
          end,
    Merged = lists:foldl(fun({Name, Def}, Acc) -> maps:put(Name, Def, Acc) end, #{},
                         Builtins ++ terrain_attr_config:evaluate_automatic(File ++ Env)),
    lists:foldl(fun({Name, Def}, S) ->
                        true = ets:insert(?DEFS, {Name, Def}),
                        put_configured(Name, Def, S)
                end, State, lists:sort(maps:to_list(Merged))).

source(Parse) ->
    case Parse() of
        {ok, Entries} ->
            Entries;
        {error, Reason} ->
            logger:error("terrain: attribute configuration not loaded: ~ts",
                         [terrain:format_error(Reason)], #{domain => [terrain, attr]}),
            []
    end.

%% After a restart the tables are as the previous server left them: monitor the
%% owners again (a dead one gives an immediate 'DOWN') and restart the samplers.
recover(State) ->
    Owners = lists:usort(ets:select(?TABLE, [{{'_', '_', '_', {owner, '$1'}}, [], ['$1']}])),
    State1 = lists:foldl(fun monitor_owner/2, State, Owners),
    Sampled = ets:select(?TABLE, [{{'$1', sampled, '_', config}, [], ['$1']}]),
    lists:foldl(fun(Name, S) ->
                        case ets:lookup(?DEFS, Name) of
                            [{_, {sampled, MFA, Opts}}] -> start_sampler(Name, MFA, Opts, S);
                            _ -> S
                        end
                end, State1, Sampled).

put_configured(Name, Def, State) ->
    State1 = stop_sampler(Name, State),
    case Def of
        {static, Value} ->
            true = ets:insert(?TABLE, {Name, static, Value, config}),
            State1;
        {builtin, MFA} ->
            true = ets:insert(?TABLE, {Name, builtin, MFA, config}),
            State1;
        {dynamic, MFA, Timeout} ->
            true = ets:insert(?TABLE, {Name, dynamic, {MFA, Timeout}, config}),
            State1;
        {sampled, MFA, Opts} ->
            true = ets:insert(?TABLE, {Name, sampled, undefined, config}),
            start_sampler(Name, MFA, Opts, State1)
    end.

%% A run-time value went away: show the configured definition again, if any.
uncover(Name, State) ->
    case ets:lookup(?DEFS, Name) of
        [{_, Def}] -> put_configured(Name, Def, State);
        [] -> true = ets:delete(?TABLE, Name), State
    end.

%% Tell the caches of connected nodes that this node's static values may have changed.
invalidate_remote_caches() ->
    _ = [erlang:send({terrain_attr_cache, N}, {'$terrain_attr_invalidate', node()}, [noconnect])
         || N <- nodes()],
    ok.

%%--------------------------------------------------------------------
%% Owners, samplers, pushers

monitor_owner(persistent, State) ->
    State;
monitor_owner(Pid, #{owners := Owners} = State) ->
    case Owners of
        #{Pid := _} -> State;
        _ -> State#{owners := Owners#{Pid => monitor(process, Pid)}}
    end.

start_sampler(Name, MFA, Opts, #{samplers := Samplers} = State) ->
    {Pid, MRef} = terrain_attr_worker:start_sampler(self(), Name, MFA, Opts),
    State#{samplers := Samplers#{Name => {Pid, MRef}}}.

stop_sampler(Name, #{samplers := Samplers} = State) ->
    case maps:take(Name, Samplers) of
        {{Pid, MRef}, Rest} ->
            demonitor(MRef, [flush]),
            exit(Pid, kill),
            State#{samplers := Rest};
        error ->
            State
    end.

subscribe(ReplyTo, Subscriber, Names, Interval, #{pushers := Pushers} = State) ->
    case map_size(Pushers) >= ?MAX_PUSHERS of
        true ->
            terrain_attr_table:count(subscriptions_refused),
            ReplyTo ! {ReplyTo, {'$terrain_attr_subscribe_refused', too_many_subscriptions}},
            State;
        false ->
            {Pid, MRef} = terrain_attr_worker:start_pusher(self(), ReplyTo, Subscriber, Names, Interval),
            ReplyTo ! {ReplyTo, {'$terrain_attr_subscribed', Pid}},
            State#{pushers := Pushers#{MRef => Pid}}
    end.

down(MRef, Pid, #{owners := Owners, samplers := Samplers, pushers := Pushers} = State) ->
    case Owners of
        #{Pid := MRef} ->
            Owned = ets:select(?TABLE, [{{'$1', '_', '_', {owner, Pid}}, [], ['$1']}]),
            lists:foldl(fun uncover/2, State#{owners := maps:remove(Pid, Owners)}, Owned);
        _ ->
            case maps:is_key(MRef, Pushers) of
                true ->
                    State#{pushers := maps:remove(MRef, Pushers)};
                false ->
                    case [N || {N, {P, R}} <- maps:to_list(Samplers), P =:= Pid, R =:= MRef] of
                        [Name] ->
                            %% A sampler died (it only does when its function is
                            %% rejected repeatedly or the VM is in trouble): restart it.
                            [{_, {sampled, MFA, Opts}}] = ets:lookup(?DEFS, Name),
                            start_sampler(Name, MFA, Opts, State#{samplers := maps:remove(Name, Samplers)});
                        [] ->
                            State
                    end
            end
    end.

%%--------------------------------------------------------------------
%% Requests from other nodes

%% The names of a subscription: a proper list of at most ?MAX_NAMES atoms.
valid_names(Names) ->
    valid_names(Names, ?MAX_NAMES).

valid_names([], _Left) -> true;
valid_names([Name | Names], Left) when is_atom(Name), Left > 0 -> valid_names(Names, Left - 1);
valid_names(_, _Left) -> false.

%% @doc The entry `{Name, Value, Class}' of one attribute that needs no evaluator:
%% static, sampled, built-in or absent (`undefined'); `dynamic' for a user-defined
%% dynamic attribute. Runs in the caller (the responder).
-spec plain_entry(terrain:attr_name()) -> {ok, {terrain:attr_name(), term(), class()}} | dynamic.
plain_entry(Name) ->
    case row(Name) of
        {_, dynamic, _, _} -> dynamic;
        Row -> {ok, {Name, value(Row, #{}), class(Row)}}
    end.

row(Name) ->
    case ets:lookup(?TABLE, Name) of
        [Row] -> Row;
        [] -> undefined
    end.

value(undefined, _Dynamic) -> undefined;
value({_, static, Value, _}, _Dynamic) -> Value;
value({_, sampled, Value, _}, _Dynamic) -> Value;
value({Name, dynamic, _, _}, Dynamic) -> maps:get(Name, Dynamic, undefined);
value({Name, builtin, {M, F, A}, _}, _Dynamic) ->
    try apply(M, F, A)
    catch Class:Reason ->
            terrain_attr_table:count(dynamic_crashes),
            _ = terrain_attr_table:first_report({Name, {M, F, length(A)}, terrain_attr_eval:cause(Class, Reason)})
                andalso logger:warning("terrain: built-in attribute ~0tp failed: ~0tp:~0tP; its value is undefined. "
                                       "Further failures of it with this cause are not logged; terrain:stats() "
                                       "counts them (dynamic_crashes)", [Name, Class, Reason, 30],
                                       #{domain => [terrain, attr]}),
            undefined
    end.

class({_, static, _, config}) -> static;
class(_) -> volatile.
