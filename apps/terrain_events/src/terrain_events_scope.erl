%% @private
%% @doc Event scopes: views over the event spaces of several nodes.
%%
%% A running scope is a process that, `rate' times a second, asks every node for the
%% events of its collectors after its cursor there (at most `batch' per node and
%% collector, all nodes at once, under one deadline), corrects their times by the
%% nodes' clock offsets (estimated when it starts, see `terrain_events_clock'),
%% merges them into one timeline, keeps the selected ones and feeds them to its
%% monitors. Rate and batch are EventSpace's trade-off (Bjørndalen et al.) between observation rate and
%% perturbation: each read costs every observed node a short-lived process and a
%% copy of the events; `configure/2' changes them while it runs.
%%
%% `read_all/2' is the same reading done once, to the end, in the caller.
-module(terrain_events_scope).
-behaviour(gen_server).

%% API
-export([start/2,
         start_link/2,
         stop/1,
         reports/1,
         stats/1,
         configure/2,
         read_all/2,
         cursors/3,
         validate/1]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

%% exports_not_used: start_link/2 is the child spec of terrain_events_scope_sup.
-ignore_xref([{start_link, 2}]).

-export_type([options/0, stats/0, result/0]).

-type options() :: terrain_events:scope_options().

-type stats() :: terrain_events:scope_stats().

-type result() :: terrain_events:read_result().

-define(DEFAULTS, #{collectors => [explicit], select => #{}, rate => 10, batch => 1000, monitors => [],
                    start => now, timeout => 1000, clock_samples => 8, cursors => #{}}).

%%--------------------------------------------------------------------
%% API

%% @doc Checks the options and fills in the defaults; `{error, {scope_option, Key,
%% Value}}' for a bad one.
-spec validate(map()) -> {ok, options()} | {error, {scope_option, atom(), term()}}.
validate(Options) ->
    O = maps:merge(?DEFAULTS, Options),
    Checks = [{nodes, fun(Ns) -> is_list(Ns) andalso Ns =/= [] andalso lists:all(fun is_atom/1, Ns) end},
              {collectors, fun(Cs) -> is_list(Cs) andalso Cs =/= [] andalso lists:all(fun is_atom/1, Cs) end},
              {select, fun(S) -> try is_map(terrain_events_view:validate_selection(S)) catch error:badarg -> false end end},
              {rate, fun(R) -> is_number(R) andalso R > 0 andalso R =< 1000 end},
              {batch, fun(B) -> is_integer(B) andalso B > 0 end},
              {monitors, fun(Ms) -> is_list(Ms) andalso
                                        lists:all(fun(M) -> try _ = terrain_events_monitor:new(M), true
                                                            catch error:badarg -> false end end, Ms) end},
              {start, fun(S) -> S =:= now orelse S =:= oldest end},
              {timeout, fun(T) -> is_integer(T) andalso T > 0 end},
              {clock_samples, fun(N) -> is_integer(N) andalso N > 0 end},
              {cursors, fun is_map/1}],
    case [{K, maps:get(K, O, undefined)} || {K, Ok} <- Checks, not (maps:is_key(K, O) andalso Ok(maps:get(K, O)))] of
        [] ->
            case maps:keys(O) -- [K || {K, _} <- Checks] of
                [] -> {ok, O};
                [Unknown | _] -> {error, {scope_option, Unknown, maps:get(Unknown, O)}}
            end;
        [{Key, Value} | _] ->
            {error, {scope_option, Key, Value}}
    end.

%% @doc Starts a scope under the scope supervisor; it stops when `Owner' exits.
-spec start(options(), pid()) -> {ok, pid()} | {error, term()}.
start(Options, Owner) ->
    supervisor:start_child(terrain_events_scope_sup, [Options, Owner]).

-spec start_link(options(), pid()) -> {ok, pid()} | {error, term()}.
start_link(Options, Owner) ->
    gen_server:start_link(?MODULE, {Options, Owner}, []).

%% @doc Reads once more, stops the scope and returns its monitors' final reports and
%% its statistics.
-spec stop(pid()) -> {[term()], stats()}.
stop(Scope) ->
    gen_server:call(Scope, stop, infinity).

-spec reports(pid()) -> [term()].
reports(Scope) ->
    gen_server:call(Scope, reports).

-spec stats(pid()) -> stats().
stats(Scope) ->
    gen_server:call(Scope, stats).

%% @doc Changes the rate and/or batch of a running scope.
-spec configure(pid(), #{rate => number(), batch => pos_integer()}) -> ok | {error, term()}.
configure(Scope, Changes) ->
    gen_server:call(Scope, {configure, Changes}).

%% @doc Reads every event of the nodes' collectors (oldest kept first) in the caller,
%% corrected by clock offsets estimated now, merged and selected.
-spec read_all([node()], map()) -> {ok, result()} | {error, term()}.
read_all(Nodes, Options) ->
    case validate(Options#{nodes => Nodes}) of
        {ok, #{collectors := Collectors, batch := Batch, timeout := Timeout, select := Select, cursors := From} = O} ->
            {Offsets, ClockFailed} = offsets(Nodes, O),
            Live = Nodes -- [N || {N, _} <- ClockFailed],
            Cursors = maps:from_list([{{N, C}, maps:get({N, C}, From, 0)} || N <- Live, C <- Collectors]),
            {ByNode, Lost, Failed} = drain(Cursors, Batch, Timeout, #{}, 0, []),
            Events = terrain_events_view:select(Select, merge(ByNode, Offsets)),
            {ok, #{events => Events, offsets => Offsets, lost => Lost, failed => ClockFailed ++ Failed}};
        {error, _} = Error ->
            Error
    end.

%% @doc Where every node's collectors stand now, for `read_all/2''s `cursors': a
%% read from there sees only later events. Nodes that cannot be asked are left out.
-spec cursors([node()], [atom()], timeout()) -> #{{node(), atom()} => terrain_events_ring:cursor()}.
cursors(Nodes, Collectors, Timeout) ->
    Keys = [{N, C} || N <- Nodes, C <- Collectors],
    Answers = [{Key, catch_call(N, C, Timeout)} || {N, C} = Key <- Keys],
    maps:from_list([{Key, Cursor} || {Key, {ok, Cursor}} <- Answers]).

catch_call(Node, Collector, Timeout) ->
    try erpc:call(Node, terrain_events_space, cursor, [Collector], Timeout)
    catch error:_ -> {error, unreachable}
    end.

drain(Cursors, _Batch, _Timeout, Acc, Lost, Failed) when map_size(Cursors) =:= 0 ->
    {maps:map(fun(_, Lists) -> lists:append(lists:reverse(Lists)) end, Acc), Lost, Failed};
drain(Cursors, Batch, Timeout, Acc, Lost, Failed) ->
    Replies = read_round(Cursors, Batch, Timeout),
    {Next, Acc1, Lost1, Failed1} =
        lists:foldl(fun({{Node, C} = Key, {ok, #{entries := Entries, cursor := Cursor, lost := L, more := More}}},
                        {N, A, LAcc, F}) ->
                            Events = terrain_events_view:events(Node, C, Entries),
                            N1 = case More andalso Entries =/= [] of
                                     false -> N;                 % read to the end
                                     true -> N#{Key => Cursor}
                                 end,
                            {N1, maps:update_with(Node, fun(Ls) -> [Events | Ls] end, [Events], A), LAcc + L, F};
                       ({{Node, _}, {error, Why}}, {N, A, LAcc, F}) ->
                            {N, A, LAcc, [{Node, Why} | F]}
                    end, {#{}, Acc, Lost, Failed}, Replies),
    drain(Next, Batch, Timeout, Acc1, Lost1, Failed1).

%%--------------------------------------------------------------------
%% gen_server callbacks

-record(state, {options :: options(),
                owner :: reference(),
                cursors :: #{{node(), atom()} => terrain_events_ring:cursor()},
                offsets :: #{node() => terrain_events_clock:offset()},
                monitors :: [terrain_events_monitor:state()],
                started :: integer(),
                reads = 0 :: non_neg_integer(),
                events = 0 :: non_neg_integer(),
                lost = 0 :: non_neg_integer(),
                failed = 0 :: non_neg_integer()}).

-spec init({options(), pid()}) -> {ok, #state{}} | {stop, term()}.
init({Options, Owner}) ->
    case validate(Options) of
        {ok, #{nodes := Nodes, collectors := Collectors, monitors := Monitors, start := Start} = O} ->
            {Offsets, _Failed} = offsets(Nodes, O),
            Cursors = maps:from_list([{{N, C}, start_cursor(N, C, Start, O)} || N <- Nodes, C <- Collectors]),
            State = #state{options = O, owner = monitor(process, Owner), cursors = Cursors, offsets = Offsets,
                           monitors = [terrain_events_monitor:new(M) || M <- Monitors],
                           started = erlang:monotonic_time(millisecond)},
            schedule(O),
            {ok, State};
        {error, Reason} ->
            {stop, Reason}
    end.

-spec handle_call(term(), gen_server:from(), #state{}) -> {reply, term(), #state{}} | {stop, normal, term(), #state{}}.
handle_call(stop, _From, State) ->
    State1 = read_once(State),
    {stop, normal, {reports_of(State1), stats_of(State1)}, State1};
handle_call(reports, _From, State) ->
    {reply, reports_of(State), State};
handle_call(stats, _From, State) ->
    {reply, stats_of(State), State};
handle_call({configure, Changes}, _From, #state{options = O} = State) ->
    case maps:keys(Changes) -- [rate, batch] of
        [] ->
            case validate(maps:merge(O, Changes)) of
                {ok, O1} -> {reply, ok, State#state{options = O1}};
                {error, _} = Error -> {reply, Error, State}
            end;
        [Key | _] ->
            {reply, {error, {scope_option, Key, maps:get(Key, Changes)}}, State}
    end.

-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Message, State) ->
    {noreply, State}.

-spec handle_info(term(), #state{}) -> {noreply, #state{}} | {stop, normal, #state{}}.
handle_info(read, #state{options = O} = State) ->
    State1 = read_once(State),
    schedule(O),
    {noreply, State1};
handle_info({'DOWN', Ref, process, _, _}, #state{owner = Ref} = State) ->
    {stop, normal, State};
handle_info(_Other, State) ->
    {noreply, State}.

%%--------------------------------------------------------------------
%% Internal functions

schedule(#{rate := Rate}) ->
    erlang:send_after(max(1, round(1000 / Rate)), self(), read).

start_cursor(_Node, _Collector, oldest, _O) ->
    0;
start_cursor(Node, Collector, now, #{timeout := Timeout}) ->
    try erpc:call(Node, terrain_events_space, cursor, [Collector], Timeout) of
        {ok, Cursor} -> Cursor;
        {error, _} -> 0
    catch
        error:_ -> 0
    end.

read_once(#state{options = #{batch := Batch, timeout := Timeout, select := Select}, cursors = Cursors,
                 offsets = Offsets, monitors = Monitors} = State) ->
    Replies = read_round(Cursors, Batch, Timeout),
    {Cursors1, ByNode, Lost, Failed} =
        lists:foldl(fun({{Node, C} = Key, {ok, #{entries := Entries, cursor := Cursor, lost := L}}}, {Cs, B, LAcc, F}) ->
                            {Cs#{Key := Cursor},
                             maps:update_with(Node, fun(Es) -> Es ++ terrain_events_view:events(Node, C, Entries) end,
                                              terrain_events_view:events(Node, C, Entries), B),
                             LAcc + L, F};
                       ({_Key, {error, _}}, {Cs, B, LAcc, F}) ->
                            {Cs, B, LAcc, F + 1}
                    end, {Cursors, #{}, 0, 0}, Replies),
    Events = terrain_events_view:select(Select, merge(ByNode, Offsets)),
    Monitors1 = [begin M1 = terrain_events_monitor:handle(Events, M),
                       _ = Events =/= [] andalso terrain_events_monitor:notify(M1) =:= ok,
                       M1
                 end || M <- Monitors],
    State#state{cursors = Cursors1, monitors = Monitors1, reads = State#state.reads + 1,
                events = State#state.events + length(Events), lost = State#state.lost + Lost,
                failed = State#state.failed + Failed}.

%% One read of every {Node, Collector}: all requests out at once, one deadline.
read_round(Cursors, Batch, Timeout) ->
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    Requests = [{Key, erpc:send_request(Node, terrain_events_space, read, [C, Cursor, Batch])}
                || {{Node, C} = Key, Cursor} <- maps:to_list(Cursors)],
    [{Key, receive_reply(Request, Deadline)} || {Key, Request} <- Requests].

receive_reply(Request, Deadline) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    try erpc:receive_response(Request, Left) of
        {ok, _} = Ok -> Ok;
        {error, _} = Error -> Error
    catch
        error:{erpc, Reason} -> {error, Reason};
        error:{exception, Reason, _} -> {error, Reason}
    end.

offsets(Nodes, #{clock_samples := Samples, timeout := Timeout}) ->
    Parent = self(),
    Tag = make_ref(),
    %% estimated for all nodes at once, one process each (every estimate has its own deadline)
    lists:foreach(fun(N) -> spawn_link(fun() -> Parent ! {Tag, N, terrain_events_clock:estimate(N, Samples, Timeout)} end)
                  end, Nodes),
    Results = [receive {Tag, N, R} -> {N, R} end || N <- Nodes],
    {maps:from_list([{N, O} || {N, {ok, O}} <- Results]), [{N, Why} || {N, {error, Why}} <- Results]}.

merge(ByNode, Offsets) ->
    terrain_events_view:merge(ByNode, maps:map(fun(_, #{offset_us := O}) -> O end, Offsets)).

reports_of(#state{monitors = Monitors}) ->
    [terrain_events_monitor:report(M) || M <- Monitors].

stats_of(#state{started = Started, reads = Reads, events = Events, lost = Lost, failed = Failed,
                offsets = Offsets}) ->
    Elapsed = max(1, erlang:monotonic_time(millisecond) - Started),
    #{reads => Reads, events => Events, lost => Lost, failed => Failed, elapsed_ms => Elapsed,
      observation_rate => Events * 1000 / Elapsed, read_rate => Reads * 1000 / Elapsed, offsets => Offsets}.
