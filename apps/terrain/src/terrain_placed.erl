%% @private
%% @doc A placed group: K processes kept running on nodes chosen by predicates and
%% spread over failure domains (behind {@link terrain:start_placed/2}).
%%
%% One `gen_server' per group, a dynamic child of `terrain_placed_group_sup'
%% (`simple_one_for_one', `transient'), on the node that started the group. Each
%% member runs under a {@link terrain_placed_keeper} on its node; the group monitors
%% the keepers. The members, `[{Pid, Node}]', are written to the `terrain_placed'
%% table through {@link terrain_placed_registry}, so {@link members/1} reads them in
%% the caller.
%%
%% Placement, at start and whenever members are missing: the candidates are
%% resolved again (`all' is this node and the nodes connected now), the predicates
%% evaluated on fresh attributes, the matches put nearest first, and the missing
%% slots assigned by {@link terrain_spread:assign/5} with repeats (a node may hold
%% several members when there are fewer matches than members) and the surviving
%% members' nodes counted as occupied: the spread rule (max skew 1 over the domains
%% of `spread') holds for the whole group after every repair. A keeper that goes
%% down with `noconnection' (its node died or was cut off) is replaced at once; a
%% member that exits is restarted (at most `max_restarts' in 10 s, else the group
%% stops with `{shutdown, too_many_restarts}'); a node where the start function
%% failed is not chosen again for 5 s. No matches: the group retries every second.
%%
%% Rebalancing (opt-in, `rebalance => IntervalMs'): every interval the group looks
%% again (one selection), and at most one member moves, only when that lowers the
%% picks of its domain and node (the same order as the spread rule): onto a node
%% that joined, or that matches the predicates now. The new member starts
%% first; the old one is stopped once the new one runs, and from then on is no longer
%% listed nor counted (a member that traps exits may take the keeper's 5 s shutdown to
%% go): the next move does not wait for it. A move whose old member's node went away
%% meanwhile replaces nothing: its new member is one of K. State is not handed over.
-module(terrain_placed).
-behaviour(gen_server).

%% API
-export([start/2,
         members/1,
         groups/1,
         stop/1]).

%% Internal exports
-export([start_link/2]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

%% exports_not_used: start_link/2 is the child start of terrain_placed_group_sup.
-ignore_xref([{start_link, 2}]).

-define(RETRY, 1000).
-define(SELECT_TIMEOUT, 2000).
-define(FAILED_BACKOFF, 5000).
-define(RESTART_PERIOD, 10000).
-define(STOP_TIMEOUT, 10000).

-type spec() :: #{start := {module(), atom(), [term()]},
                  count := pos_integer(),
                  preds => terrain:predicate() | [terrain:predicate()],
                  spread => terrain_topology:spread(),
                  candidates => terrain:candidates(),
                  rebalance => false | pos_integer(),
                  max_restarts => non_neg_integer(),
                  start_timeout => pos_integer(),
                  timeout => pos_integer()}.

-export_type([spec/0]).

%% A member's keeper, by the monitor of its spawn request.
-type keeper() :: #{node := node(),
                    pid := pid() | undefined,          % the keeper's, once spawned
                    member := pid() | starting,
                    replaces := reference() | none,    % the keeper it takes over from (rebalance)
                    stopping := boolean()}.            % told to stop by a move: no longer one of K

%% The group process's state.
-type state() :: #{name := term(),
                   spec := spec(),
                   keepers := #{reference() => keeper()},
                   failed := #{node() => integer()},  % retry-after, monotonic ms
                   restarts := [integer()],          % monotonic ms of restarts after member exits
                   restarted := non_neg_integer(),   % members restarted after an exit, since the start
                   replaced := non_neg_integer(),    % members placed again because their node went away
                   waiting := [gen_server:from()],    % callers of await_started
                   retry := reference() | undefined,  % retry timer
                   rebalance := reference() | undefined}. % rebalance timer

%%--------------------------------------------------------------------
%% API

%% @doc Starts a group and waits until its members run (or `start_timeout' passes;
%% members that could not be placed yet are retried in the background).
-spec start(term(), spec()) -> {ok, pid()} | {error, term()}.
start(Name, Spec) ->
    case supervisor:start_child(terrain_placed_group_sup, [Name, Spec]) of
        {ok, Pid} ->
            Timeout = maps:get(start_timeout, Spec, 5000),
            try gen_server:call(Pid, await_started, Timeout + 1000) of
                ok -> {ok, Pid}
            catch
                exit:{timeout, _} -> {ok, Pid}
            end;
        {error, {already_started, Pid}} ->
            {error, {already_started, Pid}};
        {error, _} = Error ->
            Error
    end.

%% @doc The running members of a group, read in the caller.
-spec members(term()) -> [{pid(), node()}] | {error, {no_group, term()}}.
members(Name) ->
    terrain_placed_registry:members(Name).

%% @doc This node's groups as `terrain:placed_groups/1' describes them; a group that
%% does not answer within `Timeout' ms (busy, or stopping) is left out.
-spec groups(timeout()) -> [terrain:placed_group()].
groups(Timeout) ->
    Requests = [{Name, gen_server:send_request(Pid, info)} || {Name, Pid} <- terrain_placed_registry:groups()],
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    lists:append([case gen_server:receive_response(Request, max(0, Deadline - erlang:monotonic_time(millisecond))) of
                      {reply, Info} -> [Info#{name => Name}];
                      _ -> []       % timeout, or the group went away
                  end || {Name, Request} <- Requests]).

%% @doc Stops a group and its members.
-spec stop(term()) -> ok | {error, {no_group, term()}}.
stop(Name) ->
    case terrain_placed_registry:whereis(Name) of
        undefined -> {error, {no_group, Name}};
        Pid -> _ = supervisor:terminate_child(terrain_placed_group_sup, Pid), ok
    end.

%% @doc Starts a group process (the child start of `terrain_placed_group_sup').
-spec start_link(term(), spec()) -> {ok, pid()} | {error, term()}.
start_link(Name, Spec) ->
    gen_server:start_link(?MODULE, {Name, Spec}, []).

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init({term(), spec()}) -> {ok, state()} | {stop, term()}.
init({Name, Spec}) ->
    process_flag(trap_exit, true),
    case terrain_placed_registry:register(Name, self()) of
        ok ->
            ok = net_kernel:monitor_nodes(true),
            State = #{name => Name, spec => Spec,
                      %% Ref (the spawn request's monitor) => #{node, pid (the keeper's, once
                      %% spawned), member (pid | starting), replaces (Ref | none), stopping}
                      keepers => #{},
                      failed => #{},          % Node => retry-after (monotonic ms)
                      restarts => [],         % monotonic ms of restarts after member exits
                      restarted => 0,         % members restarted after an exit, since the start
                      replaced => 0,          % members placed again because their node went away
                      waiting => [],          % callers of await_started
                      retry => undefined,     % retry timer
                      rebalance => undefined}, % rebalance timer
            {ok, schedule_rebalance(fill(State))};
        {error, _} = Error ->
            {stop, Error}
    end.

-spec handle_call(term(), gen_server:from(), state()) -> {reply, term(), state()} | {noreply, state()}.
handle_call(await_started, From, #{waiting := Waiting} = State) ->
    reply_started(State#{waiting := [From | Waiting]});
handle_call(info, _From, #{spec := Spec, keepers := Keepers, restarted := Restarted, replaced := Replaced} = State) ->
    Domain = domain_names(Spec),
    Members = [#{pid => Member, node => Node, domain => Domain(Node)}
               || {_, #{node := Node, member := Member}} <- current(Keepers), is_pid(Member)],
    {reply, #{members => lists:sort(fun(#{node := A}, #{node := B}) -> A =< B end, Members),
              count => maps:get(count, Spec), restarted => Restarted, replaced => Replaced}, State};
handle_call(_Request, _From, State) ->
    {reply, {error, unknown_request}, State}.

-spec handle_cast(term(), state()) -> {noreply, state()}.
handle_cast(_Request, State) ->
    {noreply, State}.

-spec handle_info(term(), state()) -> {noreply, state()} | {stop, term(), state()}.
handle_info({terrain_placed_started, Keeper, Member}, #{keepers := Keepers} = State) ->
    case [R || {R, #{pid := P}} <- maps:to_list(Keepers), P =:= Keeper] of
        [Ref] ->
            #{replaces := Old} = K = maps:get(Ref, Keepers),
            Keepers1 = stopping(Old, Keepers#{Ref := K#{member := Member, replaces := none}}),
            reply_started(publish(State#{keepers := Keepers1}));
        [] ->
            {noreply, State}
    end;
handle_info({spawn_reply, Ref, ok, Keeper}, #{keepers := Keepers} = State) ->
    case Keepers of
        #{Ref := K} -> {noreply, State#{keepers := Keepers#{Ref := K#{pid := Keeper}}}};
        _ -> {noreply, State}
    end;
handle_info({spawn_reply, Ref, error, Why}, #{keepers := Keepers} = State) ->
    %% The keeper could not even be spawned (node gone, module missing): the ref is its key.
    case maps:take(Ref, Keepers) of
        {#{node := Node}, Rest} ->
            {noreply, fill(fail_node(Node, Why, State#{keepers := Rest}))};
        error ->
            {noreply, State}
    end;
handle_info({'DOWN', Keeper, process, _, Reason}, #{keepers := Keepers} = State) ->
    %% spawn_request's monitor: the reference is the keeper's key until it is spawned
    case maps:take(Keeper, Keepers) of
        {#{node := Node, member := starting}, Rest} ->
            {noreply, fill(fail_node(Node, Reason, State#{keepers := Rest}))};
        {#{stopping := true}, Rest} ->
            {noreply, publish(State#{keepers := Rest})};
        {#{node := Node}, Rest0} ->
            %% a move that was to replace it replaces nothing now: its new member counts as one of K
            Rest = maps:map(fun(_, #{replaces := R} = K) when R =:= Keeper -> K#{replaces := none};
                               (_, K) -> K
                            end, Rest0),
            State1 = State#{keepers := Rest},
            case Reason of
                normal -> {noreply, publish(State1)};          % stopped by a move
                noconnection -> {noreply, fill(publish(State1#{replaced := maps:get(replaced, State1) + 1}))};
                _ -> restart_after_exit(Node, Reason, publish(State1))
            end;
        error ->
            {noreply, State}
    end;
handle_info(retry, State) ->
    {noreply, fill(State#{retry := undefined})};
handle_info(rebalance, State) ->
    {noreply, schedule_rebalance(rebalance(State#{rebalance := undefined}))};
handle_info({nodeup, _Node}, State) ->
    {noreply, fill(State)};
handle_info({nodedown, _Node}, State) ->
    {noreply, State};
handle_info({'EXIT', _Pid, _Reason}, State) ->
    {noreply, State}.

-spec terminate(term(), state()) -> ok.
terminate(_Reason, #{keepers := Keepers}) ->
    Running = [R || {R, #{pid := P}} <- maps:to_list(Keepers), is_pid(P)],
    [stop_keeper(R, Keepers) || R <- Running],
    Deadline = erlang:monotonic_time(millisecond) + ?STOP_TIMEOUT,
    lists:foreach(fun(K) ->
                          Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
                          receive {'DOWN', K, process, _, _} -> ok
                          after Left -> ok
                          end
                  end, Running).

%%--------------------------------------------------------------------
%% Internal: placement

%% Starts keepers for the missing members on nodes chosen now.
fill(#{spec := Spec, keepers := Keepers} = State) ->
    Missing = maps:get(count, Spec) - length(current(Keepers))
        + length([1 || #{replaces := R} <- maps:values(Keepers), R =/= none]),
    case Missing > 0 of
        false -> State;
        true ->
            case choose(Missing, State) of
                [] -> schedule_retry(State);
                Nodes -> lists:foldl(fun(Node, S) -> start_keeper(Node, none, S) end, State, Nodes)
            end
    end.

%% The matching nodes now (fresh attributes, live candidates), nearest first,
%% without nodes whose start failed lately; then the spread rule.
choose(Count, #{spec := Spec} = State) ->
    case matches(State) of
        [] -> [];
        Matches ->
            terrain_spread:assign(Matches, domain_of(Spec), Count, occupied(State), true)
    end.

matches(#{spec := Spec, failed := Failed}) ->
    Now = erlang:monotonic_time(millisecond),
    case terrain_choose:nodes(maps:get(candidates, Spec, all), maps:get(preds, Spec, []),
                              #{timeout => maps:get(timeout, Spec, ?SELECT_TIMEOUT)}) of
        Nodes when is_list(Nodes) ->
            terrain_choose:nearest_first([N || N <- Nodes, maps:get(N, Failed, Now) =< Now,
                                               N =:= node() orelse lists:member(N, erlang:nodes())]);
        _ ->
            []
    end.

domain_of(#{spread := Spread}) -> terrain_choose:domain_of(Spread);
domain_of(#{}) -> fun(N) -> {node, N} end.

%% The failure domain of each node as people read it: the name of its network under
%% the group's spread in this node's topology, or `{node, Node}'.
domain_names(#{spread := Spread}) ->
    case terrain_topology_server:current() of
        undefined -> fun(N) -> {node, N} end;
        Topology ->
            fun(N) ->
                    case terrain_topology:domain(Topology, Spread, N) of
                        Id when is_list(Id) -> terrain_topology:network_name(Topology, Id);
                        Own -> Own
                    end
            end
    end;
domain_names(#{}) ->
    fun(N) -> {node, N} end.

%% The nodes of the members that stay (a member being replaced by a move does not).
occupied(#{keepers := Keepers}) ->
    Replaced = [R || #{replaces := R} <- maps:values(Keepers), R =/= none],
    [Node || {K, #{node := Node}} <- current(Keepers), not lists:member(K, Replaced)].

%% The keepers that count as members: all but those a move told to stop (a member that
%% traps exits takes up to the keeper's shutdown time to go).
-spec current(#{reference() => keeper()}) -> [{reference(), keeper()}].
current(Keepers) ->
    [KV || {_, #{stopping := false}} = KV <- maps:to_list(Keepers)].

%% The keeper `Old' (none: no keeper) told to stop and marked, after a move's new member
%% started.
-spec stopping(reference() | none, #{reference() => keeper()}) -> #{reference() => keeper()}.
stopping(Old, Keepers) ->
    case Keepers of
        #{Old := K} -> ok = stop_keeper(Old, Keepers), Keepers#{Old := K#{stopping := true}};
        _ -> Keepers
    end.

start_keeper(Node, Replaces, #{spec := #{start := Start}, keepers := Keepers} = State) ->
    Ref = erlang:spawn_request(Node, terrain_placed_keeper, init, [self(), Start], [monitor]),
    %% keyed by the request until the keeper is known; the monitor carries the same ref
    State#{keepers := Keepers#{Ref => #{node => Node, pid => undefined, member => starting, replaces => Replaces,
                                                      stopping => false}}}.

fail_node(Node, Why, #{failed := Failed, name := Name} = State) ->
    logger:warning("terrain: placed group ~0tp could not start a member on ~0p: ~0tP", [Name, Node, Why, 12],
                   #{domain => [terrain, placed]}),
    State#{failed := Failed#{Node => erlang:monotonic_time(millisecond) + ?FAILED_BACKOFF}}.

restart_after_exit(Node, Reason, #{restarts := Restarts, restarted := Restarted, spec := Spec, name := Name} = State) ->
    Now = erlang:monotonic_time(millisecond),
    Recent = [T || T <- Restarts, T > Now - ?RESTART_PERIOD],
    case length(Recent) >= maps:get(max_restarts, Spec, 10) of
        true ->
            logger:error("terrain: placed group ~0tp stops: more than ~b member restarts in 10 s (last on ~0p: ~0tP)",
                         [Name, maps:get(max_restarts, Spec, 10), Node, Reason, 12], #{domain => [terrain, placed]}),
            {stop, {shutdown, too_many_restarts}, State};
        false ->
            {noreply, fill(State#{restarts := [Now | Recent], restarted := Restarted + 1})}
    end.

schedule_retry(#{retry := undefined} = State) ->
    State#{retry := erlang:send_after(?RETRY, self(), retry)};
schedule_retry(State) ->
    State.

%%--------------------------------------------------------------------
%% Internal: rebalancing (opt-in)

schedule_rebalance(#{spec := #{rebalance := Interval}, rebalance := undefined} = State) when is_integer(Interval) ->
    State#{rebalance := erlang:send_after(Interval, self(), rebalance)};
schedule_rebalance(State) ->
    State.

%% One move when no move is under way and the
%% member whose (domain picks, node picks) is highest goes where a new pick would go,
%% if that is strictly lower after the move.
rebalance(#{keepers := Keepers, spec := Spec} = State) ->
    %% a move is under way until its new member runs and the member it replaces is told
    %% to stop: a member that takes its keeper's shutdown time to go (one that traps
    %% exits) is no longer listed, counted or moved, and the next move need not wait for it
    Moving = [1 || #{replaces := R} <- maps:values(Keepers), R =/= none],
    Starting = [1 || #{member := starting} <- maps:values(Keepers)],
    case {Moving, Starting, matches(State)} of
        {[], [], [_ | _] = Matches} ->
            Domain = domain_of(Spec),
            Members = [{R, N} || {R, #{node := N, member := M}} <- current(Keepers), is_pid(M)],
            Nodes = [N || {_, N} <- Members],
            Load = fun(N, Occ) -> {length([1 || O <- Occ, Domain(O) =:= Domain(N)]), length([1 || O <- Occ, O =:= N])} end,
            case lists:reverse(lists:sort([{Load(N, Nodes), K, N} || {K, N} <- Members])) of
                [{From, Keeper, Node} | _] ->
                    Others = Nodes -- [Node],
                    case terrain_spread:assign(Matches, Domain, 1, Others, true) of
                        [Target] when Target =/= Node ->
                            {D, C} = Load(Target, Others),
                            case {D + 1, C + 1} < From of
                                true -> start_keeper(Target, Keeper, State);
                                false -> State
                            end;
                        _ -> State
                    end;
                [] -> State
            end;
        _ ->
            State
    end.

%%--------------------------------------------------------------------
%% Internal: members

stop_keeper(Ref, Keepers) ->
    case Keepers of
        #{Ref := #{pid := Pid}} when is_pid(Pid) -> Pid ! {terrain_placed_stop, self()}, ok;
        _ -> ok
    end.

%% Writes the running members to the table (through the registry).
publish(#{name := Name, keepers := Keepers} = State) ->
    Members = lists:sort([{M, N} || {_, #{member := M, node := N}} <- current(Keepers), is_pid(M)]),
    ok = terrain_placed_registry:set_members(Name, Members),
    State.

reply_started(#{waiting := []} = State) ->
    {noreply, State};
reply_started(#{waiting := Waiting, keepers := Keepers, spec := #{count := K}} = State) ->
    Running = [1 || {_, #{member := M}} <- current(Keepers), is_pid(M)],
    case length(Running) >= K of
        true ->
            [gen_server:reply(From, ok) || From <- Waiting],
            {noreply, State#{waiting := []}};
        false ->
            {noreply, State}
    end.
