%% @private
%% @doc Keeps the attribute tables alive across restarts of the attribute server.
%%
%% The seed's `attr_server' lost every attribute an application had set when it
%% crashed (§5.1.4). This process creates the two attribute tables, hands them to
%% {@link terrain_attr_server} and is their heir: when the server dies the tables come
%% back here, and the restarted server claims them again with every configured value
%% and every value set by a live owner intact. It holds no other logic, so it has no
%% reason to crash.
%%
%% Tables (both `protected', read in the caller, written only by the attribute server):
%% <ul>
%% <li>`terrain_attrs' — the attributes in force: `{Name, Kind, Payload, Source}'.</li>
%% <li>`terrain_attr_defs' — the configured layer (built-ins, files, the `attrs'
%%     environment key): `{Name, Definition}', restored when a run-time value that
%%     shadowed it is deleted or its owner dies.</li>
%% </ul>
%% It also creates the node's statistics counters ({@link count/1}) and the public
%% table `terrain_attr_reported' of the failure causes already logged
%% ({@link first_report/1}).
-module(terrain_attr_table).
-behaviour(gen_server).

%% API
-export([start_link/0,
         claim/0,
         count/1,
         count/2,
         counters/0,
         counter/1,
         first_report/1,
         next_round_robin/0]).

%% gen_server callbacks
-export([init/1,
         handle_call/3,
         handle_cast/2,
         handle_info/2]).

-define(COUNTERS, [requests_served, malformed_dropped, remote_writes_refused,
                   dynamic_timeouts, dynamic_crashes, queries, node_requests,
                   cache_hits, backoff_skips, timeouts, noconnection, not_running,
                   pushes_sent, pushes_received, subscriptions_refused, reports_not_logged]).
-define(COUNTERS_KEY, {?MODULE, counters}).
%% the causes of failures already logged (first_report/1), and how many it remembers
-define(REPORTED, terrain_attr_reported).
-define(MAX_REPORTED, 1000).

-type state() :: #{claimed := boolean()}.

%%--------------------------------------------------------------------
%% API

%% @doc Starts the table keeper, registered as `terrain_attr_table'.
-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Gives both tables to the calling process. Returns `fresh' the first time and
%% `restarted' afterwards, when the tables still hold the previous server's state.
-spec claim() -> fresh | restarted.
claim() ->
    gen_server:call(?MODULE, claim, infinity).

%% @doc Adds one to a statistics counter.
-spec count(atom()) -> ok.
count(Name) ->
    count(Name, 1).

%% @doc Adds N to a statistics counter. A no-op when the application is not running.
-spec count(atom(), integer()) -> ok.
count(Name, N) ->
    case persistent_term:get(?COUNTERS_KEY, undefined) of
        undefined -> ok;
        {Ref, Index, _} -> counters:add(Ref, maps:get(Name, Index), N)
    end.

%% @doc Where one statistics counter lives, for a process that counts often: the
%% counters reference and the counter's index.
-spec counter(atom()) -> {counters:counters_ref(), pos_integer()} | undefined.
counter(Name) ->
    case persistent_term:get(?COUNTERS_KEY, undefined) of
        undefined -> undefined;
        {Ref, Index, _} -> {Ref, maps:get(Name, Index)}
    end.

%% @doc The values of all statistics counters.
-spec counters() -> #{atom() => integer()}.
counters() ->
    case persistent_term:get(?COUNTERS_KEY, undefined) of
        undefined -> maps:from_list([{Name, 0} || Name <- ?COUNTERS]);
        {Ref, Index, _} -> maps:map(fun(_Name, I) -> counters:get(Ref, I) end, Index)
    end.

%% @doc Whether a failure of this cause is the first one, to be logged: true once per
%% Cause (a term that names what failed and how, without the varying details), false
%% afterwards and counted as `reports_not_logged' — a failing attribute logs one
%% warning, not one per evaluation, as telemetry detaches a failing handler and logs
%% once. At most 1000 causes are remembered per application start; beyond them new
%% causes are counted, not logged. True when the application is not running.
-spec first_report(term()) -> boolean().
first_report(Cause) ->
    try ets:info(?REPORTED, size) < ?MAX_REPORTED andalso ets:insert_new(?REPORTED, {Cause}) of
        true ->
            true;
        false ->
            count(reports_not_logged),
            false
    catch
        error:badarg -> true
    end.

%% @doc The next number of the node-wide rotation `choose_node' uses for `round_robin'.
-spec next_round_robin() -> non_neg_integer().
next_round_robin() ->
    case persistent_term:get(?COUNTERS_KEY, undefined) of
        undefined -> 0;
        {_, _, RoundRobin} -> atomics:add_get(RoundRobin, 1, 1)
    end.

%%--------------------------------------------------------------------
%% gen_server callbacks

%% @private
-spec init([]) -> {ok, state()}.
init([]) ->
    Options = [named_table, protected, set, {read_concurrency, true}, {heir, self(), heir}],
    terrain_attrs = ets:new(terrain_attrs, Options),
    terrain_attr_defs = ets:new(terrain_attr_defs, Options),
    ?REPORTED = ets:new(?REPORTED, [named_table, public, set]),
    Index = maps:from_list(lists:zip(?COUNTERS, lists:seq(1, length(?COUNTERS)))),
    persistent_term:put(?COUNTERS_KEY, {counters:new(length(?COUNTERS), [write_concurrency]), Index,
                                        atomics:new(1, [{signed, false}])}),
    {ok, #{claimed => false}}.

%% @private
-spec handle_call(claim, gen_server:from(), state()) -> {reply, fresh | restarted, state()}.
handle_call(claim, {Pid, _}, #{claimed := Claimed} = State) ->
    %% When the previous server has just died its tables may still be on their way
    %% back (the 'ETS-TRANSFER' message); wait for them.
    [await_return(Tab) || Tab <- [terrain_attrs, terrain_attr_defs]],
    true = ets:give_away(terrain_attrs, Pid, terrain_attr_table),
    true = ets:give_away(terrain_attr_defs, Pid, terrain_attr_table),
    {reply, case Claimed of true -> restarted; false -> fresh end, State#{claimed := true}}.

%% @private
-spec handle_cast(term(), state()) -> {noreply, state()}.
handle_cast(_Msg, State) ->
    {noreply, State}.

%% @private
-spec handle_info(term(), state()) -> {noreply, state()}.
handle_info({'ETS-TRANSFER', _Tab, _From, heir}, State) ->
    {noreply, State};
handle_info(_Msg, State) ->
    {noreply, State}.

%%--------------------------------------------------------------------
%% Internal

await_return(Tab) ->
    Self = self(),
    case ets:info(Tab, owner) of
        Self ->
            ok;
        _ ->
            receive
                {'ETS-TRANSFER', Tab, _From, heir} -> ok
            after 5000 ->
                    exit({table_not_returned, Tab})
            end
    end.
