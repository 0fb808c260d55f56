%% @private
%% @doc The dashboard's view of a running cluster: one process that follows the
%% cluster of a state directory and keeps what `terrain dashboard' shows, as a JSON
%% snapshot (`terrain.dashboard/1') and as events pushed to the page's clients.
%%
%% What it follows, and how:
%% <ul>
%% <li>the live tree and its version: a subscription (`terrain:subscribe(topology,
%%     #{pid => self()})' called on one member; another member when that one goes);
%%     every change message is a row of the change log;</li>
%% <li>each node's state: the recorded nodes (`cluster.json', reread when it
%%     changes), this VM's own connections (`nodedown' at once after a `kill -9') and
%%     the sequencer's members and leaving nodes (`terrain:live_status/0', once a second);</li>
%% <li>attributes (`terrain:attrs/3') and placed groups (`terrain:placed_groups/0' on
%%     every node) every 5 s while a page is open, sent when they changed;</li>
%% <li>the newest `latency.json' of the runs directory (the last probe).</li>
%% </ul>
%% Every remote call runs in a worker process under a deadline, so the view answers
%% the HTTP server at once. A recorded snapshot (`replay') is served as it is.
%%
%% A node's state: `up' (in the tree, connected), `joining' (recorded, connected, not
%% yet placed), `suspect' (in the tree, still recorded, but not connected or left by
%% the sequencer: a crash, removed after the grace period unless it comes back),
%% `leaving' (in the tree, no longer recorded: `terrain down --nodes' stopped it).
%%
%% A chaos run (`terrain chaos', whose cluster's state directory is `OUT/state'): its
%% history is read as it grows (terrain_lab_dashboard_chaos) and its timeline is the
%% snapshot key `chaos' and the event `chaos' (new rows); another producer of
%% timelines would add its key and event the same way.
-module(terrain_lab_dashboard).
-behaviour(gen_server).

-include_lib("kernel/include/file.hrl").

%% API
-export([start/1,
         stop/1,
         page/0,
         snapshot/1,
         attributes/2,
         subscribe/1,
         read_snapshot/1]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_DASHBOARD).
-define(TICK, 1000).            % ms between state file and live status checks
-define(POLL, 5000).            % ms between attribute and placed group polls, while pages are open
-define(CALL, 2000).            % deadline of each remote call
-define(CHANGES, 200).          % change log rows kept
-define(MAX_SNAPSHOT, 64 * 1024 * 1024).

-type options() :: #{state_dir := file:filename(),   % the running cluster's state
                     runs_dir := file:filename()}    % where the last probe's latency.json is looked for
                 | #{replay := map()}.               % a recorded snapshot, served as it is
-export_type([options/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Starts the view (not linked: the caller monitors it).
-spec start(options()) -> {ok, pid()} | {error, term()}.
start(Options) ->
    gen_server:start(?MODULE, Options, []).

%% @doc Stops the view.
-spec stop(pid()) -> ok.
stop(View) ->
    gen_server:stop(View).

%% @doc The page (`priv/dashboard.html'), from the build or from the escript's archive.
-spec page() -> {ok, binary()} | {error, {dashboard, {page, file:filename()}}}.
page() ->
    Path = case code:priv_dir(terrain_lab) of
               {error, bad_name} -> "terrain_lab/priv/dashboard.html";
               Priv -> filename:join(Priv, "dashboard.html")
           end,
    case erl_prim_loader:get_file(Path) of
        {ok, Page, _} -> {ok, Page};
        error -> {error, {dashboard, {page, Path}}}
    end.

%% @doc The current snapshot as JSON (`terrain.dashboard/1'), with every node's
%% attributes: what `--replay' serves again.
-spec snapshot(pid()) -> iodata().
snapshot(View) ->
    gen_server:call(View, snapshot, 5000).

%% @doc The attributes of one node (its name as the page has it) as JSON: an object of
%% name to value as `terrain attrs' prints it, `{"error": Sentence}', or `null'.
-spec attributes(pid(), binary()) -> iodata().
attributes(View, Node) ->
    gen_server:call(View, {attributes, Node}, 5000).

%% @doc Subscribes the caller to the view's events: `{terrain_dashboard, Name,
%% JsonData}' messages, Name one of `tree', `nodes', `attributes' (per node, the names
%% whose values changed: new value or `null'), `groups', `change', `probe', `chaos' (rows
%% of a chaos run's timeline). Returns the
%% snapshot the events build on, without attributes (a page asks for a node's).
-spec subscribe(pid()) -> iodata().
subscribe(View) ->
    gen_server:call(View, {subscribe, self()}, 5000).

%% @doc Reads a recorded snapshot (what `/state.json' served), for `replay'.
-spec read_snapshot(file:filename()) -> {ok, map()} | {error, term()}.
read_snapshot(File) ->
    case file:read_file_info(File) of
        {ok, #file_info{type = regular, size = Size}} when Size =< ?MAX_SNAPSHOT ->
            case file:read_file(File) of
                {ok, Binary} -> decode_snapshot(File, Binary);
                {error, Why} -> {error, {dashboard, {read, File, Why}}}
            end;
        {ok, #file_info{type = regular, size = Size}} -> {error, {dashboard, {too_big, File, Size}}};
        {ok, _} -> {error, {dashboard, {read, File, eisdir}}};
        {error, Why} -> {error, {dashboard, {read, File, Why}}}
    end.

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init(options()) -> {ok, map()}.
init(#{replay := Snapshot}) ->
    {ok, #{replay => maps:remove(<<"attributes">>, Snapshot), attributes => maps:get(<<"attributes">>, Snapshot, #{}),
           clients => #{}}};
init(#{state_dir := Dir, runs_dir := RunsDir}) ->
    ok = net_kernel:monitor_nodes(true, [{node_type, all}]),
    State = #{dir => Dir, runs_dir => RunsDir, clients => #{}, workers => #{},
              cluster => null, levels => [], recorded => [], state_mtime => undefined,
              live => unknown, tree => null, version => null, sequencer => null,
              members => [], leaving => [], subscription => none,
              attributes => #{}, groups => [], changes => [], probe => null, probe_file => none,
              node_states => #{}, chaos => terrain_lab_dashboard_chaos:new(Dir)},
    %% connected and subscribed before the first page asks
    #{recorded := Recorded} = State1 = read_state(State),
    ok = connect_recorded(Recorded),
    self() ! tick,
    erlang:send_after(?POLL, self(), poll),
    {ok, resubscribe(State1)}.

-spec handle_call(term(), gen_server:from(), map()) -> {reply, term(), map()}.
handle_call(snapshot, _From, #{attributes := Attributes} = State) ->
    {reply, terrain_json:encode((snapshot_of(State))#{attributes => Attributes}), State};
handle_call({attributes, Node}, _From, #{attributes := Attributes} = State) ->
    {reply, terrain_json:encode(maps:get(Node, Attributes, null)), State};
handle_call({subscribe, Pid}, _From, #{clients := Clients} = State) ->
    Ref = erlang:monitor(process, Pid),
    First = map_size(Clients) =:= 0,
    State1 = State#{clients := Clients#{Pid => Ref}},
    Polled = case First andalso not is_map_key(replay, State) of
                 true -> poll(State1);                  % the first page: fresh attributes and groups
                 false -> State1
             end,
    {reply, terrain_json:encode(snapshot_of(State1)), Polled};
handle_call(_Request, _From, State) ->
    {reply, {error, unknown_request}, State}.

-spec handle_cast(term(), map()) -> {noreply, map()}.
handle_cast(_Request, State) ->
    {noreply, State}.

-spec handle_info(term(), map()) -> {noreply, map()}.
handle_info({'DOWN', Ref, process, Pid, _}, #{clients := Clients} = State) when is_map_key(Pid, Clients) ->
    #{Pid := Ref} = Clients,
    {noreply, State#{clients := maps:remove(Pid, Clients)}};
handle_info(_Msg, #{replay := _} = State) ->
    {noreply, State};
handle_info(tick, State) ->
    erlang:send_after(?TICK, self(), tick),
    {noreply, tick(State)};
handle_info(poll, #{clients := Clients} = State) ->
    erlang:send_after(?POLL, self(), poll),
    {noreply, case map_size(Clients) of 0 -> State; _ -> poll(State) end};
handle_info({terrain_topology, Ref, #{version := V, change := Change, topology := Tree}},
            #{subscription := {_, Ref}} = State) ->
    {noreply, take_version(V, Change, Tree, State)};
handle_info({terrain_topology, _, _}, State) ->
    {noreply, State};                                  % an old subscription's message
handle_info({nodedown, Node, _}, #{subscription := {Node, _}} = State) ->
    {noreply, node_states(resubscribe(State#{subscription := none}))};
handle_info({nodedown, _Node, _}, State) ->
    {noreply, node_states(State)};
handle_info({nodeup, _Node, _}, State) ->
    {noreply, node_states(State)};
handle_info({worker_done, Pid, Result}, #{workers := Workers} = State) when is_map_key(Pid, Workers) ->
    {{Kind, Ref}, Rest} = maps:take(Pid, Workers),
    true = erlang:demonitor(Ref, [flush]),
    {noreply, worker_done(Kind, {done, Result}, State#{workers := Rest})};
handle_info({'DOWN', _, process, Pid, _}, #{workers := Workers} = State) when is_map_key(Pid, Workers) ->
    {noreply, State#{workers := maps:remove(Pid, Workers)}};   % it failed: the next round asks again
handle_info(_Msg, State) ->
    {noreply, State}.

%%--------------------------------------------------------------------
%% Internal: the once-a-second check

%% The state file when it changed; a subscription when there is none; the live status
%% and connections to recorded nodes in a worker.
tick(State) ->
    #{recorded := Recorded, subscription := Subscription} = State1 = resubscribe(chaos(read_state(State))),
    worker(status, fun() -> status(Recorded, Subscription) end, State1).

%% The rows a chaos run's history gained since the last tick, sent to the pages.
chaos(#{chaos := Chaos} = State) ->
    case terrain_lab_dashboard_chaos:read(Chaos) of
        {[], Chaos1} -> State#{chaos := Chaos1};
        {Rows, Chaos1} -> broadcast(chaos, Rows, State#{chaos := Chaos1})
    end.

read_state(#{dir := Dir, state_mtime := Seen} = State) ->
    File = filename:join(Dir, "cluster.json"),
    %% a rewrite is a rename: a new inode, even within the second of the last one
    case file:read_file_info(File, [{time, posix}]) of
        {ok, #file_info{mtime = M, size = Size, inode = Inode}} when {M, Size, Inode} =:= Seen ->
            State;
        {ok, #file_info{mtime = M, size = Size, inode = Inode}} ->
            MTime = {M, Size, Inode},
            case terrain_lab_cluster_state:read(Dir) of
                {ok, Recorded} ->
                    node_states(State#{state_mtime := MTime,
                                       cluster := maps:get(<<"cluster">>, Recorded, null),
                                       levels := maps:get(<<"levels">>, Recorded, []),
                                       recorded := maps:get(<<"nodes">>, Recorded, [])});
                {error, _} ->
                    State                                % being rewritten: next time
            end;
        {error, _} ->
            node_states(State#{recorded := [], state_mtime := undefined})   % `terrain down'
    end.

%% Runs in a worker (given only what it needs: the closure's terms are copied):
%% connects to recorded nodes not connected yet (in parallel), then asks the node
%% followed for the sequencer's view.
status(Recorded, Subscription) ->
    ok = connect_recorded(Recorded),
    case Subscription of
        {Node, _} -> call(Node, terrain, live_status, []);
        none -> unknown
    end.

%% Connects to the recorded nodes not connected yet, in parallel, under one deadline.
connect_recorded(Recorded) ->
    Connected = erlang:nodes(connected),
    Missing = [N || N <- recorded_nodes(Recorded), not lists:member(N, Connected)],
    Connecting = [spawn_monitor(net_kernel, connect_node, [N]) || N <- Missing],
    Deadline = erlang:monotonic_time(millisecond) + ?CALL,
    lists:foreach(fun({Pid, Ref}) ->
                          receive {'DOWN', Ref, process, Pid, _} -> ok
                          after max(0, Deadline - erlang:monotonic_time(millisecond)) -> exit(Pid, kill)
                          end
                  end, Connecting).

recorded_nodes(Recorded) ->
    [binary_to_atom(N) || #{<<"node">> := N} <- Recorded].

%% A subscription on a connected recorded node (the first that takes it), with its
%% tree and version, when there is none.
resubscribe(#{subscription := none, recorded := Recorded} = State) ->
    Connected = erlang:nodes(connected),
    subscribe_on([N || N <- recorded_nodes(Recorded), lists:member(N, Connected)], State);
resubscribe(State) ->
    State.

subscribe_on([], State) ->
    State;
subscribe_on([Node | Rest], State) ->
    case call(Node, terrain, subscribe, [topology, #{pid => self()}]) of
        {ok, Ref} ->
            Status = call(Node, terrain, live_status, []),
            Tree = call(Node, terrain, topology, []),
            State1 = State#{subscription := {Node, Ref}, live := true},
            case {Status, Tree} of
                {#{version := V}, _} when Tree =/= unknown ->
                    State2 = status_taken(Status, State1),
                    take_version(V, {subscribed, Node}, Tree, State2);
                _ ->
                    State1
            end;
        {error, not_live} ->
            static_tree(Node, State#{live := false});
        _ ->
            subscribe_on(Rest, State)
    end.

%% A cluster without a live topology: the tree a node holds (the spec's), no versions.
static_tree(Node, #{tree := Old} = State) ->
    case call(Node, terrain, topology, []) of
        unknown -> State;
        Tree ->
            Json = tree_json(Tree),
            case Json =:= Old of
                true -> State;
                false -> node_states(broadcast(tree, tree_event(State#{tree := Json}), State#{tree := Json}))
            end
    end.

call(Node, M, F, A) ->
    try erpc:call(Node, M, F, A, ?CALL)
    catch
        error:{exception, Reason, _} -> {error, Reason};
        error:{erpc, _} -> unknown;
        exit:{exception, _} -> unknown
    end.

%%--------------------------------------------------------------------
%% Internal: versions and the change log

take_version(V, Change, _Tree, #{version := Own} = State) when is_integer(Own), V =< Own,
                                                             element(1, Change) =/= subscribed ->
    log_change(V, Change, State);                       % a version we had: log only
take_version(V, Change, Tree, #{version := Own} = State) ->
    Gap = case Own of
              Own when is_integer(Own), V > Own + 1 ->
                  Missed = io_lib:format("versions ~b to ~b were not seen", [Own + 1, V - 1]),
                  [#{kind => gap, version => V, detail => iolist_to_binary(Missed)}];
              _ -> []
          end,
    State1 = State#{tree := tree_json(Tree), version := V},
    State2 = broadcast(tree, tree_event(State1), State1),
    State3 = lists:foldl(fun(Row, S) -> add_change(Row, S) end, State2, Gap),
    node_states(log_change(V, Change, State3)).

log_change(V, Change, State) ->
    add_change((change_row(Change))#{version => V}, State).

add_change(Row0, #{changes := Changes} = State) ->
    Row = Row0#{at => terrain_lab_run:timestamp(), received_ms => erlang:system_time(millisecond)},
    broadcast(change, Row, State#{changes := lists:sublist([Row | Changes], ?CHANGES)}).

%% A change message as a row: kind, node, and what was measured or moved.
change_row({join, Node, Siblings, Pairs}) ->
    #{kind => join, node => Node, siblings => Siblings, pairs => Pairs};
change_row({leave, Node}) ->
    #{kind => leave, node => Node};
change_row({move, Node, From, To}) ->
    #{kind => move, node => Node, from => From, to => To};
change_row({sync, _}) ->
    #{kind => sync, detail => <<"state adopted after a partition healed or a new sequencer">>};
change_row({subscribed, Node}) ->
    #{kind => subscribed, node => Node, detail => <<"the dashboard follows the live tree from here">>};
change_row(Other) ->
    #{kind => other, detail => iolist_to_binary(io_lib:format("~0tP", [Other, 8]))}.

%%--------------------------------------------------------------------
%% Internal: workers and their results

worker(Kind, Fun, #{workers := Workers} = State) ->
    case lists:keymember(Kind, 1, maps:values(Workers)) of
        true -> State;                                  % one at a time per kind
        false ->
            View = self(),
            {Pid, Ref} = spawn_monitor(fun() -> View ! {worker_done, self(), Fun()} end),
            State#{workers := Workers#{Pid => {Kind, Ref}}}
    end.

poll(#{recorded := Recorded, runs_dir := RunsDir, probe_file := Seen} = State) ->
    Nodes = [N || N <- recorded_nodes(Recorded), lists:member(N, erlang:nodes(connected))],
    State1 = worker(attributes, fun() -> attributes(Nodes) end, State),
    State2 = worker(groups, fun() -> groups(Nodes) end, State1),
    worker(probe, fun() -> probe(RunsDir, Seen) end, State2).

worker_done(status, {done, #{} = Status}, State) ->
    node_states(status_taken(Status, State));
worker_done(attributes, {done, Attributes}, #{attributes := Old} = State) ->
    Changed = maps:filter(fun(_, Diff) -> map_size(Diff) > 0 end,
                          maps:map(fun(N, New) -> changed(maps:get(N, Old, #{}), New) end, Attributes)),
    case map_size(Changed) of
        0 -> State;
        _ -> broadcast(attributes, Changed, State#{attributes := maps:merge(Old, Attributes)})
    end;
worker_done(groups, {done, Groups}, #{groups := Groups} = State) ->
    State;
worker_done(groups, {done, Groups}, State) ->
    broadcast(groups, Groups, State#{groups := Groups});
worker_done(probe, {done, {File, Probe}}, State) ->
    broadcast(probe, Probe, State#{probe := Probe, probe_file := File});
worker_done(_Kind, _Result, State) ->
    State.                                              % nothing new, or the worker failed

status_taken(#{version := _, sequencer := Sequencer, members := Members, leaving := Leaving}, State) ->
    State#{sequencer := Sequencer, members := Members, leaving := Leaving};
status_taken(_, State) ->
    State.

%% The names whose values differ: the new value, or `null' for a name that went.
changed(Old, New) ->
    maps:merge(maps:map(fun(_, _) -> null end, maps:without(maps:keys(New), Old)),
               maps:filter(fun(K, V) -> maps:get(K, Old, undefined) =/= V end, New)).

%% Every attribute of every node, each value as `terrain attrs' prints it.
attributes(Nodes) ->
    case terrain:attrs(Nodes, all, #{timeout => ?CALL}) of
        Results when is_map(Results) ->
            maps:from_list([{atom_to_binary(N), case R of
                                    {ok, Values} -> maps:map(fun(_, V) -> text(V) end, Values);
                                    {error, Why} -> #{error => iolist_to_binary(terrain:format_error(Why))}
                                end} || {N, R} <- maps:to_list(Results)]);
        {error, _} ->
            #{}
    end.

%% The placed groups of every node, at once under one deadline.
groups(Nodes) ->
    Answers = erpc:multicall(Nodes, terrain, placed_groups, [], ?CALL),
    lists:sort([group_json(Owner, G) || {Owner, {ok, Groups}} <- lists:zip(Nodes, Answers), is_list(Groups),
                                        G <- Groups]).

group_json(Owner, #{name := Name, count := Count, members := Members, restarted := Restarted,
                    replaced := Replaced}) ->
    #{name => text(Name), owner => Owner, count => Count, restarted => Restarted, replaced => Replaced,
      members => [#{node => N, domain => text(D), pid => text(P)} || #{node := N, domain := D, pid := P} <- Members]}.

%% The newest latency.json under the runs directory, when it is not the one shown.
probe(RunsDir, Seen) ->
    Files = lists:sort(filelib:wildcard(filename:join([RunsDir, "*", "latency.json"]))),
    case lists:reverse(Files) of
        [Seen | _] -> none;
        [File | _] ->
            case terrain:read_latency(File) of
                {ok, #{nodes := Nodes, stats := #{median := Median}}} when length(Nodes) =< 1024 ->
                    {File, (heatmap(Median))#{file => list_to_binary(File), nodes => Nodes}};
                _ -> none
            end;
        [] -> none
    end.

%% The median round trips for a heatmap, compactly (a 256-node matrix in 87 KB): each
%% cell one byte, 0 for not measured (and the diagonal), else 1 + 254 steps of the
%% logarithm between the smallest and the largest round trip; base64.
heatmap(Matrix) ->
    Values = [V || Row <- Matrix, V <- Row, is_number(V), V > 0],
    case Values of
        [] -> #{min_us => null, max_us => null, cells => <<>>};
        _ ->
            {Low, High} = {lists:min(Values), lists:max(Values)},
            Span = max(math:log(High) - math:log(Low), 1.0e-9),
            Cell = fun(V) when is_number(V), V > 0 -> 1 + round(254 * (math:log(V) - math:log(Low)) / Span);
                      (_) -> 0
                   end,
            #{min_us => Low, max_us => High, cells => base64:encode(<< <<(Cell(V))>> || Row <- Matrix, V <- Row >>)}
    end.

%%--------------------------------------------------------------------
%% Internal: node states, events, the snapshot

node_states(#{node_states := Old} = State) ->
    New = states_now(State),
    case New =:= Old of
        true -> State;
        false -> broadcast(nodes, nodes_json(State#{node_states := New}), State#{node_states := New})
    end.

states_now(#{tree := Tree, recorded := Recorded, leaving := Leaving}) ->
    InTree = tree_nodes(Tree),
    Record = recorded_nodes(Recorded),
    Connected = erlang:nodes(connected),
    maps:from_list(
      [{N, case {lists:member(N, InTree), lists:member(N, Record), lists:member(N, Connected)} of
               {true, false, _} -> leaving;
               {true, true, true} -> case lists:member(N, Leaving) of true -> suspect; false -> up end;
               {true, true, false} -> suspect;
               {false, true, true} -> joining;
               {false, true, false} -> down
           end} || N <- lists:usort(InTree ++ Record)]).

nodes_json(#{node_states := States, recorded := Recorded}) ->
    Paths = maps:from_list([{binary_to_atom(N), P} || #{<<"node">> := N} = R <- Recorded,
                                                       P <- [maps:get(<<"group_path">>, R, [])]]),
    [#{node => N, state => S, group_path => maps:get(N, Paths, [])} || {N, S} <- lists:sort(maps:to_list(States))].

tree_event(#{tree := Tree, version := V, sequencer := Sequencer, live := Live}) ->
    #{tree => Tree, version => V, sequencer => Sequencer, live => Live}.

broadcast(Name, Data, #{clients := Clients} = State) ->
    Json = terrain_json:encode(Data),
    _ = [Pid ! {terrain_dashboard, Name, Json} || Pid <- maps:keys(Clients)],
    State.

snapshot_of(#{replay := Snapshot}) ->
    Snapshot;
snapshot_of(#{cluster := Cluster, levels := Levels, changes := Changes, groups := Groups, probe := Probe} = State) ->
    (tree_event(State))#{format => ?FORMAT, cluster => Cluster, levels => Levels, nodes => nodes_json(State),
                         groups => Groups, changes => Changes, probe => Probe,
                         chaos => terrain_lab_dashboard_chaos:rows(maps:get(chaos, State)),
                         taken_at => terrain_lab_run:timestamp()}.

decode_snapshot(File, Binary) ->
    case terrain_json:decode(Binary) of
        {ok, #{<<"format">> := ?FORMAT} = Snapshot} -> {ok, Snapshot};
        {ok, #{<<"format">> := Other}} -> {error, {dashboard, {format, File, Other}}};
        {ok, _} -> {error, {dashboard, {format, File, none}}};
        {error, Why} -> {error, {dashboard, {json, File, Why}}}
    end.

%% The tree as JSON: networks with name, height (µs or null) and children; nodes.
tree_json(undefined) -> null;
tree_json({node, Node}) -> #{node => Node};
tree_json({network, Children}) -> network_json(null, #{}, Children);
tree_json({network, Name, Children}) -> network_json(Name, #{}, Children);
tree_json({network, Name, Options, Children}) -> network_json(Name, Options, Children).

network_json(Name, Options, Children) ->
    #{name => case Name of null -> null; _ -> text(Name) end, height => maps:get(height, Options, null),
      children => [tree_json(C) || C <- Children]}.

tree_nodes(null) -> [];
tree_nodes(#{node := Node}) -> [Node];
tree_nodes(#{children := Children}) -> lists:append([tree_nodes(C) || C <- Children]).

text(Value) when is_atom(Value) -> atom_to_binary(Value);
text(Value) when is_binary(Value) -> Value;
text(Value) -> iolist_to_binary(io_lib:format("~0tp", [Value])).
