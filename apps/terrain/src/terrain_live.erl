%% @private
%% @doc The live topology (RELEASE D3.5, §5.1.5): one tree per cluster that follows
%% nodes joining and leaving, the same on every node, changed in one order.
%%
%% Every node that runs `terrain' with the app env key `live' set joins the `pg'
%% group `nodes' of the scope `terrain_live_scope' with this server, and connects
%% to the nodes of the tree it starts with (a node that joins later connects to any
%% one node of the cluster, which names it to every member at once so that they connect
%% to it; distribution's full mesh does the rest). The
%% <b>sequencer</b> is the member with the smallest node name among those that hold a
%% tree (the group `candidates': a node that joins is no candidate until it has taken a
%% tree, so it never numbers changes of the part of the cluster it has seen so far):
%% every node computes it from the groups' membership, so there is no election and no
%% message to agree on it; when the sequencer goes, the next smallest takes over with
%% the state every node holds. Every second the sequencer tells every member its
%% version and digest, so that a member that missed the last change catches up. Only
%% the sequencer changes the tree. A change gets the next version
%% and is sent, with the whole new tree, to every member; a node takes a tree only
%% when its version is higher than the one it holds, so changes apply in the
%% sequencer's order everywhere (messages between two processes keep their order).
%%
%% The sequencer:
%% <ul>
%% <li>asks each member that appears for its version and tree; when they differ from
%%     its own, the higher version wins (at equal versions the tree with more nodes,
%%     then its own) and is published as the higher version plus one, so that the
%%     nodes of both sides of a healed partition take it (a node that was cut off
%%     catches up this way);</li>
%% <li>places a member that is not in the tree with `terrain:insert_node/4',
%%     measuring round trips from the new node (`{join, Node, Siblings}'); several new
%%     members are measured at once (up to four), and an insertion computed on a tree
%%     that changed meanwhile is computed again on the current one with the round trips
%%     it measured (only pairs not measured yet are measured); the level model is the
%%     tree's own (its networks' heights), with the median jitter of the latest round
%%     trips the sequencer measured as its noise floor (`noise');</li>
%% <li>removes a node of the tree that is no longer a member once the grace period
%%     has passed without it coming back (`{leave, Node}'); while the cluster still
%%     holds the tree it started with (version 0), a node of that tree this node has
%%     never seen as a member is still starting (the nodes of a cluster come up one
%%     after another, for minutes at 256 VMs on a small machine): it is given up to
%%     `start_grace' from this server's start, so that a slow start does not remove
%%     and place again every node that is late;</li>
%% <li>re-measures one node every `remeasure' ms, round robin: takes it out of the
%%     tree, inserts it again, and when its lowest network's other members differ,
%%     publishes `{move, Node, From, To}' (the lists of siblings before and after);
%%     only when its new place contradicts fewer of its round trips than the old one
%%     (`terrain_live_tree:misplaced/5'): otherwise the tree is stale about the nodes
%%     those round trips contradict (they moved), and they are re-measured first, then
%%     the node again.</li>
%% </ul>
%% Subscribers (`terrain:subscribe(topology, #{})') get `{terrain_topology, Ref,
%% #{version, change, topology}}' for every version this node takes.
-module(terrain_live).
-behaviour(gen_server).

%% API
-export([start_link/0,
         status/0,
         forget/0,
         delta_message/4,
         subscribe/1,
         unsubscribe/1,
         round_trip/2]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

%% exports_not_used: start_link/0 is named in terrain_sup's child spec; round_trip/2
%% is called on the joining node by erpc (the measurement of an insertion).
%% delta_message/4 is what bench_live_delta measures.
-ignore_xref([{start_link, 0}, {round_trip, 2}, {delta_message, 4}]).

-define(SCOPE, terrain_live_scope).
%% The version this node holds and its tree's digest, kept for a restart of the server
%% (the tree itself outlives it in terrain_topology_server).
-define(VERSION_KEY, {?MODULE, version}).
-define(GROUP, nodes).
%% The members that hold a tree (from their start, or taken from a sequencer): only they
%% can be the sequencer (docs/RELIABILITY.md, finding 8).
-define(CANDIDATES, candidates).
-define(DEFAULT_GRACE, 10000).
-define(DEFAULT_START_GRACE, 300000).
-define(DEFAULT_REMEASURE, 60000).
-define(RTT_SAMPLES, 5).
-define(MAX_INSERTIONS, 4).      % new members measured at once by the sequencer
%% The noise floor of the level model (`noise' of terrain:insert_node/4): the median
%% jitter (median minus minimum of a round trip's samples) of the latest this many
%% round trips the sequencer measured.
-define(JITTERS, 64).
-define(RPC_TIMEOUT, 2000).
%% Reconnection to nodes that went away: the first retry after RETRY_MIN ms, each next
%% one twice as late up to RETRY_MAX, for `reconnect' ms after the node went away; at
%% most RETRY_BATCH attempts at a time, the longest waiting first (one connection
%% across a healed partition is enough: distribution's full mesh makes the others).
-define(RETRY_MIN, 250).
-define(RETRY_MAX, 2000).
-define(RETRY_BATCH, 8).
-define(DEFAULT_RECONNECT, 600000).
%% How long a follower that asked the sequencer for the whole tree waits before it may
%% ask again.
-define(FETCH_TIMEOUT, 2000).
%% How often the sequencer tells every member its version and digest, so that a member
%% that missed the last change notices without a later one (docs/RELIABILITY.md, finding 12).
-define(BEAT, 1000).

-type config() :: #{grace := non_neg_integer(), start_grace := non_neg_integer(),
                    remeasure := non_neg_integer() | false,
                    reconnect := non_neg_integer(), insert := terrain:insert_options()}.

%% The server's state: off (no `live' configuration: only subscriptions, never told of a
%% change), or the live topology. `leaving', `inserting', `measured' and `remeasuring'
%% are the sequencer's only.
-type state() :: #{live := false, subscribers := subscribers()}
               | #{live := true,
                   config := config(),
                   version := non_neg_integer(),
                   tree := terrain:topology_tree() | undefined,
                   pg := reference(),                              % the pg group's monitor
                   members := [node()],
                   cpg := reference(),                             % the candidates group's monitor
                   candidates := [node()],                         % members that hold a tree
                   beat := reference() | undefined,                % the sequencer's beat timer
                   seen := #{node() => true},                      % every node seen as a member
                   started := integer(),                           % this server's start (monotonic ms)
                   subscribers := subscribers(),
                   leaving := #{node() => reference()},            % the grace timer of each
                   inserting := #{pid() => {node(), Version :: non_neg_integer()}}, % insertions under way
                   measured := #{node() => #{node() => number()}},  % a new member's round trips (µs)
                   remeasure := reference() | undefined,           % the re-measurement timer
                   next := [node()],                               % whom to re-measure next
                   remeasuring := {node(), pid(), Version :: non_neg_integer(), terrain:topology_tree()}
                                | undefined,
                   role := sequencer | follower,
                   lost := #{node() => lost()},                    % nodes that went away
                   connecting := #{pid() => node()},               % reconnection attempts under way
                   retry := reference() | undefined,               % the reconnection timer
                   jitters := [number()],                          % of the latest round trips, µs
                   change := term(),                               % the change of the version held
                   fetching := integer() | undefined}.             % asked for the whole tree until then

%% A node that went away: when (monotonic ms), the current back-off, when to try next.
-type lost() :: {Since :: integer(), Backoff :: pos_integer(), Due :: integer()}.

%% Subscribers' processes, by the monitor of each.
-type subscribers() :: #{reference() => pid()}.

%%--------------------------------------------------------------------
%% API

-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc The live topology's state on this node: `disabled', or its version, the
%% sequencer, the members, and the nodes waiting out their grace period.
-spec status() -> disabled | #{version := non_neg_integer(), digest := non_neg_integer(), sequencer := node(),
                               members := [node()], leaving := [node()]}.
status() ->
    gen_server:call(?MODULE, status).

%% @doc Forgets the version kept for a restart of the server; for the application's
%% stop.
-spec forget() -> ok.
forget() ->
    _ = persistent_term:erase(?VERSION_KEY),
    ok.

%% @doc Subscribes a process to the changes; `{error, not_live}' when disabled.
-spec subscribe(pid()) -> {ok, reference()} | {error, not_live}.
subscribe(Pid) ->
    gen_server:call(?MODULE, {subscribe, Pid}).

%% @doc Ends a subscription; `not_found' if the reference is not one of ours.
-spec unsubscribe(reference()) -> ok | not_found.
unsubscribe(Ref) ->
    gen_server:call(?MODULE, {unsubscribe, Ref}).

%% @doc The smallest of a few round trips from this node to `Other', in µs (a
%% remote call of `erlang:node/0', after one warm-up call).
-spec round_trip(node(), pos_integer()) -> {ok, number(), Jitter :: number()} | {error, term()}.
round_trip(Other, Samples) ->
    try
        _ = erpc:call(Other, erlang, node, [], ?RPC_TIMEOUT),
        Times = lists:sort([begin
                                T0 = erlang:monotonic_time(microsecond),
                                _ = erpc:call(Other, erlang, node, [], ?RPC_TIMEOUT),
                                erlang:monotonic_time(microsecond) - T0
                            end || _ <- lists:seq(1, Samples)]),
        %% the path: the fastest; its jitter: the median's distance from it
        {ok, hd(Times), median(Times) - hd(Times)}
    catch
        Class:Reason -> {error, {Class, Reason}}
    end.

%% @doc The live configuration from the app env key `live': `false' (default), `true'
%% or a map of `grace' (ms), `start_grace' (ms: the grace of a node of the tree not yet
%% seen as a member), `remeasure' (ms or `false'), `insert' (options of
%% `terrain:insert_node/4').
-spec config() -> false | config().
config() ->
    Defaults = #{grace => ?DEFAULT_GRACE, start_grace => ?DEFAULT_START_GRACE, remeasure => ?DEFAULT_REMEASURE,
                 reconnect => ?DEFAULT_RECONNECT, insert => #{}},
    Valid = fun(grace, G) -> is_integer(G) andalso G >= 0;
               (start_grace, G) -> is_integer(G) andalso G >= 0;
               (reconnect, R) -> is_integer(R) andalso R >= 0;
               (remeasure, R) -> R =:= false orelse (is_integer(R) andalso R >= 0);
               (insert, I) -> is_map(I);
               (_, _) -> false
            end,
    case application:get_env(terrain, live, false) of
        true ->
            Defaults;
        Map when is_map(Map) ->
            {Good, Bad} = lists:partition(fun({K, V}) -> Valid(K, V) end, maps:to_list(Map)),
            [logger:error("terrain: ignoring the live option ~0tp => ~0tP (grace, start_grace: ms >= 0; remeasure: ms >= 0 or "
                          "false; reconnect: ms >= 0; insert: a map of terrain:insert_node/4 options)", [K, V, 8], #{domain => [terrain, live]})
             || {K, V} <- Bad],
            maps:merge(Defaults, maps:from_list(Good));
        false ->
            false;
        Other ->
            logger:error("terrain: the live app env value ~0tP is neither a boolean nor a map; no live topology",
                         [Other, 8], #{domain => [terrain, live]}),
            false
    end.

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init([]) -> {ok, state()}.
init([]) ->
    case config() of
        false ->
            {ok, #{live => false, subscribers => #{}}};
        Config ->
            ok = net_kernel:monitor_nodes(true),
            Tree = case terrain_topology_server:current() of
                       undefined -> undefined;
                       T -> terrain_topology:term(T)
                   end,
            ok = pg:join(?SCOPE, ?GROUP, self()),
            ok = candidate(Tree),
            {MonRef, Pids} = pg:monitor(?SCOPE, ?GROUP),
            {CandRef, CandPids} = pg:monitor(?SCOPE, ?CANDIDATES),
            %% the nodes of the tree it starts with are the cluster: connect to them
            %% (in the background; distribution gives each attempt its own deadline)
            _ = Tree =/= undefined andalso
                spawn(fun() -> [net_kernel:connect_node(N) || N <- tree_nodes(Tree), N =/= node()] end),
            %% a restarted server carries on at the version of the tree it left
            Version = case persistent_term:get(?VERSION_KEY, {0, 0}) of
                          {V, Digest} when Tree =/= undefined -> case terrain_live_tree:digest(Tree) of
                                                                     Digest -> V;
                                                                     _ -> 0
                                                                 end;
                          _ -> 0
                      end,
            State = #{live => true, config => Config, version => Version, tree => Tree,
                      pg => MonRef, members => members(Pids), seen => maps:from_keys(members(Pids), true),
                      cpg => CandRef, candidates => members(CandPids), beat => undefined,
                      started => erlang:monotonic_time(millisecond),
                      subscribers => #{},
                      leaving => #{},          % Node => timer (sequencer only)
                      inserting => #{},        % Pid => {Node, Version} (sequencer only)
                      measured => #{},         % Node => #{Other => round trip} (sequencer only)
                      remeasure => undefined, next => [],
                      remeasuring => undefined, % {Node, Pid, Version, Tree} (sequencer only)
                      role => follower, lost => #{}, connecting => #{}, retry => undefined,
                      change => {sync, Version}, fetching => undefined, jitters => []},
            {ok, sequence(State)}
    end.

-spec handle_call(term(), gen_server:from(), state()) -> {reply, term(), state()}.
handle_call(status, _From, #{live := false} = State) ->
    {reply, disabled, State};
handle_call(status, _From, #{version := V, tree := Tree, members := Members, leaving := Leaving} = State) ->
    {reply, #{version => V, digest => terrain_live_tree:digest(Tree), sequencer => sequencer(State),
              members => Members, leaving => lists:sort(maps:keys(Leaving))}, State};
handle_call({subscribe, _Pid}, _From, #{live := false} = State) ->
    {reply, {error, not_live}, State};
handle_call({subscribe, Pid}, _From, #{subscribers := Subs} = State) ->
    Ref = erlang:monitor(process, Pid),
    {reply, {ok, Ref}, State#{subscribers := Subs#{Ref => Pid}}};
handle_call({unsubscribe, Ref}, _From, #{subscribers := Subs} = State) ->
    case maps:take(Ref, Subs) of
        {_, Rest} -> erlang:demonitor(Ref, [flush]), {reply, ok, State#{subscribers := Rest}};
        error -> {reply, not_found, State}
    end;
handle_call(_Request, _From, State) ->
    {reply, {error, unknown_request}, State}.

-spec handle_cast(term(), state()) -> {noreply, state()}.
handle_cast(_Request, State) ->
    {noreply, State}.

-spec handle_info(term(), state()) -> {noreply, state()}.
handle_info({Ref, Kind, ?GROUP, Pids}, #{pg := Ref, members := Members, seen := Seen} = State) ->
    New = case Kind of
              join -> lists:usort(Members ++ members(Pids));
              leave -> Members -- members(Pids)
          end,
    {noreply, sequence(State#{members := New, seen := maps:merge(Seen, maps:from_keys(New, true))},
                       members(Pids), Kind)};
handle_info({Ref, Kind, ?CANDIDATES, Pids}, #{cpg := Ref, candidates := Candidates} = State) ->
    New = case Kind of
              join -> lists:usort(Candidates ++ members(Pids));
              leave -> Candidates -- members(Pids)
          end,
    {noreply, sequence(State#{candidates := New}, [], Kind)};
handle_info(beat, State) ->
    {noreply, beat(State#{beat := undefined})};
handle_info({terrain_live_beat, From, V, Digest}, State) ->
    {noreply, beat_in(From, V, Digest, State)};
handle_info({terrain_live_sync_request, From}, #{version := V, tree := Tree} = State) ->
    From ! {terrain_live_state, node(), V, Tree},
    {noreply, State};
handle_info({terrain_live_state, Node, V, Tree}, State) ->
    case is_sequencer(State) of
        true -> {noreply, reconcile(merge(Node, V, Tree, State))};
        false -> {noreply, State}
    end;
handle_info({terrain_live_change, V, Change, Tree}, #{version := Own, tree := OwnTree} = State)
  when V > Own; OwnTree =:= undefined ->
    {noreply, take(V, Tree, Change, State#{fetching := undefined})};
handle_info({terrain_live_delta, From, V, Base, Change, Delta, Digest}, State) ->
    {noreply, delta_in(From, {V, Base, Change, Delta, Digest}, State)};
handle_info({terrain_live_fetch, From}, #{version := V, tree := Tree, change := Change} = State)
  when Tree =/= undefined ->
    From ! {terrain_live_change, V, Change, Tree},
    {noreply, State};
handle_info({terrain_live_change, _V, _Change, _Tree}, State) ->
    {noreply, State};
handle_info({jitter, Jitter}, #{jitters := Jitters} = State) ->
    {noreply, State#{jitters := lists:sublist([Jitter | Jitters], ?JITTERS)}};
handle_info({grace_over, Node}, #{leaving := Leaving, version := 0, seen := Seen, started := Started,
                                  config := #{grace := Grace, start_grace := StartGrace}} = State)
  when not is_map_key(Node, Seen), is_map_key(Node, Leaving) ->
    %% a node of the starting tree that has not come up yet: looked at again after the grace
    case erlang:monotonic_time(millisecond) - Started < StartGrace of
        true -> {noreply, State#{leaving := Leaving#{Node := erlang:send_after(max(Grace, 100), self(),
                                                                                 {grace_over, Node})}}};
        false -> grace_over(Node, State)
    end;
handle_info({grace_over, Node}, State) ->
    grace_over(Node, State);
handle_info({inserted, Pid, Node, Result}, #{inserting := Inserting} = State) when is_map_key(Pid, Inserting) ->
    #{Pid := {Node, Base}} = Inserting,
    State1 = State#{inserting := maps:remove(Pid, Inserting)},
    {noreply, reconcile(inserted(Node, Result, Base, State1))};
handle_info({'DOWN', Ref, process, _, _}, #{subscribers := Subs} = State) when is_map_key(Ref, Subs) ->
    {noreply, State#{subscribers := maps:remove(Ref, Subs)}};
handle_info({'DOWN', _, process, Pid, Reason}, #{inserting := Inserting} = State) when is_map_key(Pid, Inserting) ->
    #{Pid := {Node, _}} = Inserting,
    logger:warning("terrain: the insertion of ~0p into the live topology failed: ~0tP", [Node, Reason, 12],
                   #{domain => [terrain, live]}),
    {noreply, reconcile(State#{inserting := maps:remove(Pid, Inserting)})};
handle_info({remeasured, Pid, Node, Result}, #{remeasuring := {Node, Pid, Base, Old}, version := V} = State) ->
    State1 = State#{remeasuring := undefined},
    case Result of
        {ok, New, Pairs} when V =:= Base ->
            case terrain_live_tree:misplaced(Node, Old, New, Pairs, noise(State)) of
                move -> {noreply, moved(Node, Old, New, State1)};
                {keep, []} -> {noreply, State1};
                {keep, Others} -> {noreply, State1#{next := stale_first(Node, Others, maps:get(next, State1))}}
            end;
        {error, {topology, _, _} = Why} ->
            logger:warning("terrain: the re-measurement of ~0p gave a tree that is not valid, kept the tree of "
                           "version ~b: ~ts", [Node, V, terrain:format_error(Why)], #{domain => [terrain, live]}),
            {noreply, State1};
        _ -> {noreply, State1}   % the tree changed meanwhile, or the node could not be measured
    end;
handle_info({'DOWN', _, process, Pid, _}, #{remeasuring := {_, Pid, _, _}} = State) ->
    {noreply, State#{remeasuring := undefined}};
handle_info({nodedown, Node}, #{tree := Tree, members := Members, lost := Lost0} = State) ->
    case lists:member(Node, Members) orelse lists:member(Node, terrain_live_tree:nodes_of(Tree)) of
        true ->
            Now = erlang:monotonic_time(millisecond),
            %% a follower never retries: it forgets the nodes lost for longer than the bound here
            Bound = maps:get(reconnect, maps:get(config, State)),
            Lost = maps:filter(fun(_, {Since, _, _}) -> Now - Since =< Bound end, Lost0),
            {noreply, schedule_retry(State#{lost := Lost#{Node => {Now, ?RETRY_MIN, Now + ?RETRY_MIN}}})};
        false ->
            {noreply, State}
    end;
handle_info({nodeup, Node}, #{lost := Lost} = State) ->
    {noreply, introduce(Node, State#{lost := maps:remove(Node, Lost)})};
handle_info({terrain_live_meet, Node}, #{connecting := Connecting} = State) ->
    case lists:member(Node, [node() | nodes()]) orelse lists:member(Node, maps:values(Connecting)) of
        true -> {noreply, State};
        false -> {noreply, State#{connecting := Connecting#{connect(Node) => Node}}}
    end;
handle_info(retry, State) ->
    {noreply, schedule_retry(retry(State#{retry := undefined}))};
handle_info({'DOWN', _, process, Pid, _}, #{connecting := Connecting} = State) when is_map_key(Pid, Connecting) ->
    {noreply, State#{connecting := maps:remove(Pid, Connecting)}};
handle_info(remeasure, State) ->
    {noreply, schedule_remeasure(remeasure(State#{remeasure := undefined}))};
handle_info(_Msg, State) ->
    {noreply, State}.

%%--------------------------------------------------------------------
%% Internal: sequencing

%% A node's grace period is over: the sequencer removes it unless it is back.
-spec grace_over(node(), state()) -> {noreply, state()}.
grace_over(Node, #{leaving := Leaving} = State) ->
    State1 = State#{leaving := maps:remove(Node, Leaving)},
    case is_sequencer(State1) andalso not lists:member(Node, maps:get(members, State1)) of
        true -> {noreply, remove(Node, State1)};
        false -> {noreply, State1}
    end.

members(Pids) ->
    lists:usort([node(P) || P <- Pids]).

%% The smallest member that holds a tree (a candidate): a node that joins, and sees the
%% members one connection at a time, is no candidate until it has taken a tree, so it
%% never numbers changes of the part it has seen (finding 8); the sides of a healed
%% partition all hold trees, so their nodes meet as candidates and elect one. With no
%% candidate among the members (nobody holds a tree), the smallest member.
sequencer(#{members := Members, candidates := Candidates}) ->
    All = [node() | Members],
    case [N || N <- Candidates, lists:member(N, All)] of
        [] -> lists:min(All);
        Placed -> lists:min(Placed)
    end.

is_sequencer(State) ->
    sequencer(State) =:= node().

%% After a membership change: the sequencer asks the new members for their state
%% and reconciles; everybody else waits for the sequencer. A node that has just become
%% the sequencer (the old one went, or a partition healed) asks every member: a member
%% may hold a version the old sequencer sent it and this node missed.
-spec sequence(state()) -> state().
sequence(State) ->
    sequence(State, maps:get(members, State), join).

-spec sequence(state(), [node()], join | leave) -> state().
sequence(#{role := Role, members := Members} = State, Changed, Kind) ->
    case is_sequencer(State) of
        false ->
            cancel_leaving(State#{role := follower});
        true ->
            Ask = case Role of
                      follower -> Members;
                      sequencer when Kind =:= join -> Changed;
                      sequencer -> []
                  end,
            _ = [{?MODULE, N} ! {terrain_live_sync_request, self()} || N <- Ask, N =/= node()],
            schedule_beat(schedule_retry(schedule_remeasure(reconcile(State#{role := sequencer}))))
    end.

%% A member's state at the sequencer. The same version and tree (by digest): nothing to
%% do. Else the union of both trees by network names, the higher version's (at equal
%% versions the larger tree's) as the base, is published as version max + 1, so that
%% the nodes of both sides of a healed partition take it and no node holds another tree
%% at the same version. When the union is the sequencer's own tree at a higher version,
%% only the member is behind: it gets the sequencer's tree as it is (at an equal version
%% the member holds another tree there, and the union is published above it).
-spec merge(node(), non_neg_integer(), terrain:topology_tree() | undefined, state()) -> state().
merge(Node, V, Tree, #{version := Own, tree := OwnTree, members := Members} = State) ->
    Digest = terrain_live_tree:digest(Tree),
    case {V, Digest} =:= {Own, terrain_live_tree:digest(OwnTree)} of
        true ->
            State;
        false when Tree =:= undefined, OwnTree =/= undefined ->
            %% a node that starts without a tree (it joins) takes ours as it is (only it: the
            %% others hold it)
            resend(Node, State);
        false ->
            {Base, Other} = case {V, size_of(Tree)} > {Own, size_of(OwnTree)} of
                                true -> {Tree, OwnTree};
                                false -> {OwnTree, Tree}
                            end,
            %% alive: the members, the node that sent this state (its request may have
            %% reached it before its membership reached us: it replies as it resumes from a
            %% hang), and every node connected (a healed partition's other side, whose
            %% membership arrives node by node)
            Alive = lists:usort([node(), Node | Members] ++ nodes()),
            case Base =/= undefined andalso terrain_live_tree:union(Base, Other, Alive) of
                false -> State;
                OwnTree when Own > V -> resend(Node, State);
                Union -> publish({sync, max(V, Own)}, Union, State#{version := max(V, Own)})
            end
    end.

%% Our version and tree to a member that is behind, as they are.
-spec resend(node(), state()) -> state().
resend(Node, #{version := Own, tree := OwnTree} = State) ->
    {?MODULE, Node} ! {terrain_live_change, Own, {sync, Own}, OwnTree},
    State.

-spec size_of(terrain:topology_tree() | undefined) -> non_neg_integer().
size_of(Tree) -> length(terrain_live_tree:nodes_of(Tree)).

%%--------------------------------------------------------------------
%% Internal: reconnection

%% Nodes that went away are tried again by the sequencer (each side of a partition has
%% one), with a back-off, for `reconnect' ms after they went. Every node keeps the list,
%% so that a new sequencer carries on. Tree nodes that are not connected are added when
%% the sequencer looks (it may never have seen them go). One attempt per node at a time,
%% each in a process of its own under distribution's set-up deadline (net_setuptime).
-spec retry(state()) -> state().
retry(#{lost := Lost, connecting := Connecting, tree := Tree, config := #{reconnect := Bound}} = State) ->
    case is_sequencer(State) of
        false ->
            State;
        true ->
            Now = erlang:monotonic_time(millisecond),
            Connected = [node() | nodes()],
            Unseen = [N || N <- terrain_live_tree:nodes_of(Tree), not lists:member(N, Connected),
                           not is_map_key(N, Lost)],
            Lost1 = maps:merge(maps:from_list([{N, {Now, ?RETRY_MIN, Now}} || N <- Unseen]), Lost),
            Lost2 = maps:filter(fun(N, {Since, _, _}) -> Now - Since =< Bound andalso not lists:member(N, Connected)
                                end, Lost1),
            Busy = maps:values(Connecting),
            Due = lists:sublist([N || {At, N} <- lists:sort([{At, N} || {N, {_, _, At}} <- maps:to_list(Lost2)]),
                                      At =< Now, not lists:member(N, Busy)],
                                max(0, ?RETRY_BATCH - length(Busy))),
            Started = maps:from_list([{connect(N), N} || N <- Due]),
            Lost3 = lists:foldl(fun(N, Acc) ->
                                        {Since, Backoff, _} = maps:get(N, Acc),
                                        Next = min(2 * Backoff, ?RETRY_MAX),
                                        Acc#{N := {Since, Next, Now + Backoff}}
                                end, Lost2, Due),
            State#{lost := Lost3, connecting := maps:merge(Connecting, Started)}
    end.

%% A node that connects here and is neither a member nor in the tree (it joins through
%% this node) is named to every member, which connects to it: should this node die
%% before distribution's full mesh is made (global's synchronisation takes round trips
%% between the two), the new node would otherwise be cut off with no tree and no node
%% to go back to, unknown to the cluster (docs/RELIABILITY.md, finding 2). A node this
%% server is connecting itself (it was named here, or is retried) is not named again.
-spec introduce(node(), state()) -> state().
introduce(Node, #{members := Members, tree := Tree, connecting := Connecting} = State) ->
    Known = lists:member(Node, Members) orelse lists:member(Node, terrain_live_tree:nodes_of(Tree))
        orelse lists:member(Node, maps:values(Connecting)),
    _ = Known orelse [{?MODULE, N} ! {terrain_live_meet, Node} || N <- Members, N =/= node(), N =/= Node],
    State.

-spec connect(node()) -> pid().
connect(Node) ->
    %% the outcome comes as nodeup (or not at all); the monitor tells when the attempt is over
    {Pid, _} = spawn_monitor(fun() -> _ = net_kernel:connect_node(Node), ok end),
    Pid.

%% The next look, on the sequencer while nodes are lost: when the earliest is due.
-spec schedule_retry(state()) -> state().
schedule_retry(#{retry := undefined, lost := Lost} = State) when map_size(Lost) > 0 ->
    case is_sequencer(State) of
        true ->
            Now = erlang:monotonic_time(millisecond),
            Wait = max(0, lists:min([At || {_, _, At} <- maps:values(Lost)]) - Now),
            State#{retry := erlang:send_after(max(Wait, ?RETRY_MIN div 5), self(), retry)};
        false ->
            State
    end;
schedule_retry(#{retry := undefined, tree := Tree} = State) when Tree =/= undefined ->
    %% nodes of the tree that are not connected (a sequencer that never saw them go)
    case is_sequencer(State) andalso terrain_live_tree:nodes_of(Tree) -- [node() | nodes()] =/= [] of
        true -> State#{retry := erlang:send_after(?RETRY_MIN, self(), retry)};
        false -> State
    end;
schedule_retry(State) ->
    State.

%% Joins for members not in the tree (several measured at once), grace timers for
%% nodes of the tree that are not members, timers cancelled for those back.
reconcile(#{tree := undefined} = State) ->
    State;
reconcile(#{tree := Tree, members := Members, leaving := Leaving} = State) ->
    case is_sequencer(State) of
        false ->
            State;
        true ->
            InTree = tree_nodes(Tree),
            Live = lists:usort([node() | Members]),
            Gone = InTree -- Live,
            Back = [N || N <- maps:keys(Leaving), lists:member(N, Live)],
            _ = [erlang:cancel_timer(maps:get(N, Leaving)) || N <- Back],
            Grace = maps:get(grace, maps:get(config, State)),
            Leaving1 = maps:merge(maps:from_list([{N, erlang:send_after(Grace, self(), {grace_over, N})}
                                                  || N <- Gone, not maps:is_key(N, Leaving)]),
                                  maps:without(Back, Leaving)),
            Joining = Live -- InTree,
            start_insertion(Joining, State#{leaving := Leaving1,
                                            measured := maps:with(Joining, maps:get(measured, State))})
    end.

cancel_leaving(#{leaving := Leaving} = State) ->
    _ = [erlang:cancel_timer(T) || T <- maps:values(Leaving)],
    State#{leaving := #{}};
cancel_leaving(State) ->
    State.

%% Up to MAX_INSERTIONS new members measured at once, each on the current tree, with
%% the round trips measured for it before.
start_insertion(Joining, #{inserting := Inserting, tree := Tree, version := V, config := Config,
                           measured := Measured, members := Members} = State) ->
    Busy = [N || {N, _} <- maps:values(Inserting)],
    New = lists:sublist(Joining -- Busy, max(0, ?MAX_INSERTIONS - map_size(Inserting))),
    Self = self(),
    Started = [begin
                   Options = maps:merge(#{name => Node, noise => noise(State)}, maps:get(insert, Config)),
                   Known = maps:get(Node, Measured, #{}),
                   Peers = #{known => Known, reachable => [node() | Members]},
                   {Pid, _} = spawn_monitor(fun() ->
                                                    Self ! {inserted, self(), Node, insert(Node, Tree, Options, Self,
                                                                                           Peers)}
                                            end),
                   {Pid, {Node, V}}
               end || Node <- New],
    State#{inserting := maps:merge(Inserting, maps:from_list(Started))}.

%% The insertion (in a process of its own); round trips measured from Node before
%% (`known': Other => µs) are taken as they are; a node of the tree that is not a member
%% the sequencer sees (`reachable': across a partition, or gone and not yet removed) is
%% not measured: the round trip would wait out its deadline (2 s per try) and the
%% insertion picks another node of that network; each new round trip's jitter goes to
%% the server, whose median of the latest is the next insertions' noise floor.
-spec insert(node(), terrain:topology_tree(), terrain:insert_options(), pid(),
             #{known := #{node() => number()}, reachable := [node()]}) ->
          {ok, terrain:topology_tree(), list()} | {error, term()}.
insert(Node, Tree, Options, Server, #{known := Known, reachable := Reachable}) ->
    Measure = fun(A, B) when A =:= Node, is_map_key(B, Known) ->
                      {ok, maps:get(B, Known)};
                 (A, B) when A =:= Node ->
                      case lists:member(B, Reachable) of
                          true -> round_trip_from(A, B, Server);
                          false -> {error, {not_a_member, B}}
                      end;
                 (A, B) ->
                      round_trip_from(A, B, Server)
              end,
    valid(terrain:insert_node(Node, Tree, Measure, Options)).

%% The round trip from A to B, measured on A; its jitter goes to the server.
-spec round_trip_from(node(), node(), pid()) -> {ok, number()} | {error, term()}.
round_trip_from(A, B, Server) ->
    try erpc:call(A, ?MODULE, round_trip, [B, ?RTT_SAMPLES], ?RPC_TIMEOUT * (?RTT_SAMPLES + 2)) of
        {ok, D, Jitter} -> Server ! {jitter, Jitter}, {ok, D};
        Other -> Other
    catch Class:Reason -> {error, {Class, Reason}}
    end.

%% A tree the insertion returned that terrain_topology refuses (finding 10 of
%% docs/RELIABILITY.md: a network higher than its parent) is an error, logged by the
%% server, which keeps its version, rather than a crash of the server in siblings/2.
-spec valid({ok, terrain:topology_tree(), list()} | {error, term()}) ->
          {ok, terrain:topology_tree(), list()} | {error, term()}.
valid({ok, Tree, _Pairs} = Result) ->
    case terrain_topology:new(Tree) of
        {ok, _} -> Result;
        {error, _} = Error -> Error
    end;
valid(Error) ->
    Error.

%% The noise floor of the level model: the median jitter of the latest round trips
%% (0 before any).
-spec noise(state()) -> number().
noise(#{jitters := []}) -> 0;
noise(#{jitters := Jitters}) -> median(lists:sort(Jitters)).

-spec median([number(), ...]) -> number().
median(Sorted) ->
    lists:nth((length(Sorted) + 1) div 2, Sorted).

%% An insertion is applied only on the tree it was computed from; otherwise the
%% reconciliation starts it again on the current tree.
inserted(Node, {ok, NewTree, Pairs}, Base, #{version := Base, members := Members, measured := Measured} = State) ->
    case lists:member(Node, Members) of
        true -> publish({join, Node, siblings(NewTree, Node), length(Pairs)}, NewTree,
                        State#{measured := maps:remove(Node, Measured)});
        false -> State
    end;
inserted(Node, {ok, _OldTree, Pairs}, _Base, #{measured := Measured} = State) ->
    %% computed on a tree that has changed since: the reconciliation computes it again
    %% on the current tree, measuring only what this one did not
    Known = maps:from_list([{B, D} || {A, B, D} <- Pairs, A =:= Node]),
    State#{measured := Measured#{Node => maps:merge(maps:get(Node, Measured, #{}), Known)}};
inserted(Node, {error, Why}, _Base, State) ->
    logger:warning("terrain: could not place ~0p into the live topology: ~ts", [Node, terrain:format_error(Why)],
                   #{domain => [terrain, live]}),
    State;
inserted(_Node, _Result, _Base, State) ->
    State.

remove(Node, #{tree := Tree} = State) ->
    case terrain_live_tree:remove(Node, Tree) of
        {ok, NewTree} -> publish({leave, Node}, NewTree, State);
        {error, _} -> State
    end.

%% The sequencer's change: next version, taken here, sent to every member as a delta
%% from the tree before it (with the digests before and after). Only the sequencer
%% publishes: a node that was the sequencer when it started an insertion or a
%% re-measurement, and is not any more, drops the result.
-spec publish(term(), terrain:topology_tree(), state()) -> state().
publish(Change, Tree, State) ->
    case is_sequencer(State) of
        true -> publish_next(Change, Tree, State);
        false -> State   % an insertion or a re-measurement that ended after a new sequencer took over
    end.

-spec publish_next(term(), terrain:topology_tree(), state()) -> state().
publish_next(Change, Tree, #{version := V, tree := Old, members := Members} = State) ->
    Next = V + 1,
    Message = case Old of
                  undefined -> {terrain_live_change, Next, Change, Tree};
                  _ -> delta_message(Next, Change, Old, Tree)
              end,
    _ = [{?MODULE, N} ! Message || N <- Members, N =/= node()],
    take(Next, Tree, Change, State).

%% @doc The message of one change: who sends it, the version, the digest of the tree
%% it applies to, the change, the delta, the digest of the tree it makes.
-spec delta_message(pos_integer(), term(), terrain:topology_tree(), terrain:topology_tree()) -> tuple().
delta_message(V, Change, Old, New) ->
    {terrain_live_delta, self(), V, terrain_live_tree:digest(Old), Change, terrain_live_tree:delta(Old, New),
     terrain_live_tree:digest(New)}.

%% A follower takes a delta made from the version and tree it holds; one that missed
%% a version (or holds another tree at it) asks the sender for the whole tree, once
%% until the answer comes or FETCH_TIMEOUT has passed.
-spec delta_in(pid(), {pos_integer(), non_neg_integer(), term(), terrain_live_tree:delta(), non_neg_integer()},
               state()) -> state().
delta_in(_From, {V, _, _, _, _}, #{version := Own, tree := OwnTree} = State) when V =< Own, OwnTree =/= undefined ->
    State;
delta_in(From, {V, Base, Change, Delta, Digest}, #{version := Own, tree := OwnTree} = State) ->
    Fits = V =:= Own + 1 andalso OwnTree =/= undefined andalso terrain_live_tree:digest(OwnTree) =:= Base,
    Patched = Fits andalso terrain_live_tree:patch(OwnTree, Delta),
    case Patched of
        {ok, New} when is_tuple(New) ->
            case terrain_live_tree:digest(New) of
                Digest -> take(V, New, Change, State#{fetching := undefined});
                _ -> fetch(From, State)
            end;
        _ ->
            fetch(From, State)
    end.

-spec fetch(pid(), state()) -> state().
fetch(From, #{fetching := Until} = State) ->
    Now = erlang:monotonic_time(millisecond),
    case Until =:= undefined orelse Now > Until of
        true ->
            From ! {terrain_live_fetch, self()},
            State#{fetching := Now + ?FETCH_TIMEOUT};
        false ->
            State
    end.

%% A node that holds a tree joins the candidates for the sequencer (once: at its start
%% with a tree, or when it takes its first).
-spec candidate(terrain:topology_tree() | undefined) -> ok.
candidate(undefined) -> ok;
candidate(_Tree) -> pg:join(?SCOPE, ?CANDIDATES, self()).

%% The sequencer's beat: its version and digest to every member, every BEAT ms while it
%% is the sequencer and holds a tree.
-spec schedule_beat(state()) -> state().
schedule_beat(#{beat := undefined} = State) ->
    State#{beat := erlang:send_after(?BEAT, self(), beat)};
schedule_beat(State) ->
    State.

-spec beat(state()) -> state().
beat(#{version := V, tree := Tree, members := Members} = State) ->
    case is_sequencer(State) of
        true ->
            _ = Tree =/= undefined andalso
                begin
                    Beat = {terrain_live_beat, self(), V, terrain_live_tree:digest(Tree)},
                    [{?MODULE, N} ! Beat || N <- Members, N =/= node()]
                end,
            schedule_beat(State);
        false ->
            State
    end.

%% A member told the sequencer's version and digest: behind (it missed the last change
%% and no later one came), it asks for the whole tree; at the same version with
%% another tree, or ahead, it sends the sequencer its state, which the sequencer merges
%% (published above both).
-spec beat_in(pid(), non_neg_integer(), non_neg_integer(), state()) -> state().
beat_in(From, V, _Digest, #{version := Own, tree := OwnTree} = State) when V > Own; OwnTree =:= undefined ->
    fetch(From, State);
beat_in(From, V, Digest, #{version := Own, tree := OwnTree} = State) ->
    case {V, Digest} =:= {Own, terrain_live_tree:digest(OwnTree)} of
        true -> State;
        false -> From ! {terrain_live_state, node(), Own, OwnTree}, State
    end.

%% Takes a version: stores the tree in the topology server, tells the subscribers.
take(V, Tree, Change, #{subscribers := Subs} = State) ->
    case terrain_topology:new(Tree) of
        {ok, T} ->
            ok = terrain_topology_server:put(T),
            ok = case maps:get(tree, State) of
                     undefined -> candidate(Tree);
                     _ -> ok
                 end,
            persistent_term:put(?VERSION_KEY, {V, terrain_live_tree:digest(Tree)}),
            _ = [Pid ! {terrain_topology, Ref, #{version => V, change => Change, topology => Tree}}
             || {Ref, Pid} <- maps:to_list(Subs)],
            State#{version := V, tree := Tree, change := Change};
        {error, Why} ->
            logger:error("terrain: refused live topology version ~b: ~ts", [V, terrain_topology:format_error(Why)],
                         #{domain => [terrain, live]}),
            State
    end.

%%--------------------------------------------------------------------
%% Internal: re-measurement

schedule_remeasure(#{config := #{remeasure := Ms}, remeasure := undefined} = State) when is_integer(Ms), Ms > 0 ->
    State#{remeasure := erlang:send_after(Ms, self(), remeasure)};
schedule_remeasure(State) ->
    State.

%% One node per round, round robin over the tree: out of the tree, in again; a
%% different lowest network is a move.
remeasure(#{tree := undefined} = State) ->
    State;
remeasure(#{tree := Tree, next := Next, version := V, members := Members, config := Config} = State) ->
    case is_sequencer(State) andalso map_size(maps:get(inserting, State)) =:= 0
        andalso maps:get(remeasuring, State) =:= undefined of
        false ->
            State;
        true ->
            Live = [N || N <- tree_nodes(Tree), lists:member(N, [node() | Members])],
            case [N || N <- Next, lists:member(N, Live)] ++ (Live -- Next) of
                [] ->
                    State;
                [Node | Rest] ->
                    State1 = State#{next := Rest},
                    %% in a process of its own: the round trips take a while (50 ms each across
                    %% sites) and the server must keep answering
                    Self = self(),
                    Options = maps:merge(#{name => own_network(Tree, Node), noise => noise(State)},
                                         maps:get(insert, Config)),
                    Peers = #{known => #{}, reachable => [node() | Members]},
                    {Pid, _} = spawn_monitor(fun() ->
                                                     Self ! {remeasured, self(), Node,
                                                             reinsert(Node, Tree, Options, Self, Peers)}
                                             end),
                    State1#{remeasuring := {Node, Pid, V, Tree}}
            end
    end.

%% Out of the tree and in again (the networks keep their names; a network the removal
%% emptied comes back under its name, `name').
-spec reinsert(node(), terrain:topology_tree(), terrain:insert_options(), pid(),
               #{known := #{node() => number()}, reachable := [node()]}) ->
          {ok, terrain:topology_tree(), list()} | {error, term()}.
reinsert(Node, Tree, Options, Server, Peers) ->
    case terrain_live_tree:remove(Node, Tree) of
        {ok, Without} -> insert(Node, Without, Options, Server, Peers);
        {error, Why} -> {error, {insert, {Why, Node}}}
    end.

%% The tree is stale about Others (they moved): they are re-measured first, then Node again.
-spec stale_first(node(), [node()], [node()]) -> [node()].
stale_first(Node, Others, Next) ->
    Others ++ [Node | Next -- [Node | Others]].

moved(Node, Old, New, State) ->
    From = siblings(Old, Node),
    case siblings(New, Node) of
        From -> State;
        To -> publish({move, Node, From, To}, New, State)
    end.

%%--------------------------------------------------------------------
%% Internal: trees

tree_nodes(Tree) ->
    {ok, T} = terrain_topology:new(Tree),
    lists:usort(terrain_topology:nodes(T)).

%% The name of a node's lowest network (the node itself when it hangs off the root).
own_network(Tree, Node) ->
    {ok, T} = terrain_topology:new(Tree),
    case terrain_topology:domain(T, very_near, Node) of
        {node, _} -> Node;
        Id -> terrain_topology:network_name(T, Id)
    end.

%% The other nodes of a node's lowest network, sorted.
siblings(Tree, Node) ->
    {ok, T} = terrain_topology:new(Tree),
    Disc = terrain_topology:disc(T, Node, smallest_nonzero(T, Node)),
    lists:sort(Disc -- [Node]).

smallest_nonzero(T, Node) ->
    case [terrain_topology:distance(T, Node, N) || N <- terrain_topology:nodes(T), N =/= Node] of
        [] -> 0;
        Ds -> lists:min(Ds)
    end.
