%% @private
%% @doc The clients of a chaos run (`terrain chaos'), beside the nemesis, in the CLI's
%% VM; each writes what it does and sees to the history (terrain_lab_chaos_history):
%% <ul>
%% <li>the observer: every 250 ms asks every node not known dead for its live version
%%     and tree (one round, one deadline of 1 s) and writes one `observe' line (node =>
%%     [version, tree hash]) and a `tree' line for every tree not seen before; it also
%%     installs the crash handler (terrain_lab_chaos_log) on every node it meets;</li>
%% <li>subscribers: three topology subscriptions (`terrain:subscribe(topology, ...)')
%%     on different nodes, a `notify' line per message; one whose node goes down
%%     subscribes again on another node;</li>
%% <li>the chooser: every second, on a node alive, `terrain:choose_nodes/3' with a
%%     count, a spread and a deadline, timed on that node (`choose' lines);</li>
%% <li>the placed watcher: every second `terrain:placed/1' of each group on the node
%%     that runs the groups, and every 5 s `terrain:placed_groups/0' timed.</li>
%% </ul>
%% The nodes come from the roster, an ETS table of the run: `{Name, Node, OsPid,
%% alive | stopped | dead}'.
-module(terrain_lab_chaos_clients).

%% API
-export([start/1,
         stop/1,
         observe_here/0]).

%% exports_not_used: observe_here/0 runs on the cluster's nodes (erpc).
-ignore_xref([{observe_here, 0}]).

-define(OBSERVE_MS, 250).
-define(ROUND_MS, 1000).
-define(CHOOSE_DEADLINE, 2000).
-define(GROUPS_DEADLINE, 1000).
-define(SUBSCRIBERS, 3).

-type context() :: #{history := terrain_lab_chaos_history:history(),
                     roster := ets:tid(),
                     anchor := node(),            % the node that runs the placed groups
                     groups := [atom()],
                     seed := integer()}.
-export_type([context/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Starts the clients, linked to the caller.
-spec start(context()) -> [pid()].
start(Context) ->
    Collector = spawn_link(fun() -> collect(Context) end),
    [Collector,
     spawn_link(fun() -> observe(Context#{collector => Collector}, #{}, #{}) end),
     spawn_link(fun() -> choose(Context, rand:seed_s(exsss, maps:get(seed, Context))) end),
     spawn_link(fun() -> watch(Context, 0) end)
     | [spawn_link(fun() -> subscribe(Context, I, 0, #{}) end) || I <- lists:seq(1, ?SUBSCRIBERS)]].

%% @doc Stops the clients.
-spec stop([pid()]) -> ok.
stop(Pids) ->
    [begin unlink(P), exit(P, kill) end || P <- Pids],
    ok.

%% @doc On a cluster node: its live version and tree.
-spec observe_here() -> {non_neg_integer(), terrain:topology_tree() | undefined} | {error, term()}.
observe_here() ->
    case terrain:live_status() of
        #{version := V} -> {V, terrain:topology()};
        Other -> {error, Other}
    end.

%% The history's `tree' line of a tree: its hash, nodes and networks (each as the
%% sorted list of its nodes).
-spec tree_line(terrain:topology_tree()) -> {integer(), map()}.
tree_line(Tree) ->
    Hash = erlang:phash2(Tree),
    {Hash, #{hash => Hash, nodes => lists:sort(leaves(Tree)), clades => clades(Tree)}}.

%%--------------------------------------------------------------------
%% Internal: the observer

observe(#{history := H, roster := Roster, collector := Collector} = Context, Seen, Installed) ->
    T = terrain_lab_chaos_history:now_ms(H),
    Nodes = [N || {_, N, _, S} <- ets:tab2list(Roster), S =/= dead],
    Installed1 = install(Nodes, Collector, Installed),
    Deadline = erlang:monotonic_time(millisecond) + ?ROUND_MS,
    Requests = [{N, erpc:send_request(N, ?MODULE, observe_here, [])} || N <- Nodes],
    Answers = [{N, answer(R, Deadline)} || {N, R} <- Requests],
    {Result, Seen1} = lists:foldl(fun({N, {V, Tree}}, {Acc, S}) when is_integer(V) ->
                                          {Hash, S1} = seen(Tree, S, H),
                                          {Acc#{N => [V, Hash]}, S1};
                                     (_, Acc) -> Acc
                                  end, {#{}, Seen}, Answers),
    Unreachable = [N || {N, _} <- Answers, not is_map_key(N, Result)],
    H1 = maps:get(pid, H),
    H1 ! {line, #{t => T, node => null, op => observe, result => Result, unreachable => Unreachable}},
    Left = ?OBSERVE_MS - (erlang:monotonic_time(millisecond) - (Deadline - ?ROUND_MS)),
    receive after max(0, Left) -> observe(Context, Seen1, Installed1) end.

answer(Request, Deadline) ->
    try erpc:receive_response(Request, max(0, Deadline - erlang:monotonic_time(millisecond)))
    catch _:Why -> {error, Why}
    end.

%% The hash of a tree, and a `tree' line the first time it is seen.
seen(undefined, Seen, _H) ->
    {null, Seen};
seen(Tree, Seen, H) ->
    Hash = erlang:phash2(Tree),
    case Seen of
        #{Hash := _} -> {Hash, Seen};
        _ ->
            {Hash, Line} = tree_line(Tree),
            terrain_lab_chaos_history:log(H, null, tree, ok, Line),
            {Hash, Seen#{Hash => true}}
    end.

install(Nodes, Collector, Installed) ->
    lists:foldl(fun(N, Acc) when is_map_key(N, Acc) -> Acc;
                   (N, Acc) ->
                        try erpc:call(N, terrain_lab_chaos_log, install, [Collector], ?ROUND_MS) of
                            ok -> Acc#{N => true};
                            _ -> Acc
                        catch _:_ -> Acc        % not reachable now: tried again next round
                        end
                end, Installed, Nodes).

%% Crash reports from the nodes' handlers.
collect(#{history := H} = Context) ->
    receive
        {terrain_chaos_crash, Node, Text} ->
            terrain_lab_chaos_history:log(H, Node, crash, Text),
            collect(Context)
    end.

%%--------------------------------------------------------------------
%% Internal: subscribers

subscribe(#{history := H, roster := Roster} = Context, I, K, Seen) ->
    Nodes = lists:sort([N || {_, N, _, alive} <- ets:tab2list(Roster)]),
    Sub = iolist_to_binary(io_lib:format("s~b.~b", [I, K])),
    case Nodes of
        [] ->
            receive after 500 -> subscribe(Context, I, K, Seen) end;
        _ ->
            Node = lists:nth((I + K - 1) rem length(Nodes) + 1, Nodes),
            try erpc:call(Node, terrain, subscribe, [topology, #{pid => self()}], ?ROUND_MS) of
                {ok, Ref} ->
                    erlang:monitor_node(Node, true),
                    terrain_lab_chaos_history:log(H, Node, subscribed, ok, #{sub => Sub}),
                    listen(Context#{sub => Sub, ref => Ref, node => Node}, I, K, Seen);
                Other ->
                    terrain_lab_chaos_history:log(H, Node, subscribed, text(Other), #{sub => Sub}),
                    receive after 500 -> subscribe(Context, I, K + 1, Seen) end
            catch _:Why ->
                    terrain_lab_chaos_history:log(H, Node, subscribed, text(Why), #{sub => Sub}),
                    receive after 500 -> subscribe(Context, I, K + 1, Seen) end
            end
    end.

listen(#{history := H, sub := Sub, ref := Ref, node := Node} = Context, I, K, Seen) ->
    receive
        {terrain_topology, Ref, #{version := V, change := Change, topology := Tree}} ->
            {Hash, Seen1} = seen(Tree, Seen, H),
            terrain_lab_chaos_history:log(H, Node, notify, ok, #{sub => Sub, version => V, hash => Hash,
                                                                 change => change_kind(Change)}),
            listen(Context, I, K, Seen1);
        {nodedown, Node} ->
            terrain_lab_chaos_history:log(H, Node, unsubscribed, nodedown, #{sub => Sub}),
            receive after 500 -> subscribe(maps:without([sub, ref, node], Context), I, K + 1, Seen) end
    end.

change_kind(Change) when is_tuple(Change) -> element(1, Change);
change_kind(Change) -> Change.

%%--------------------------------------------------------------------
%% Internal: the chooser and the placed watcher

choose(#{history := H, roster := Roster} = Context, S) ->
    receive after 1000 -> ok end,
    case [N || {_, N, _, alive} <- ets:tab2list(Roster)] of
        [] ->
            choose(Context, S);
        Nodes ->
            {I, S1} = rand:uniform_s(length(Nodes), S),
            Node = lists:nth(I, Nodes),
            Options = #{count => 3, spread => {depth, 2}, timeout => ?CHOOSE_DEADLINE},
            Args = [terrain, choose_nodes, [all, [{chaos_worker, true}], Options]],
            timed(H, Node, choose, Args, ?CHOOSE_DEADLINE,
                  fun(L) when is_list(L) -> length(L); (Other) -> text(Other) end),
            choose(Context, S1)
    end.

watch(#{history := H, anchor := Anchor, groups := Groups} = Context, N) ->
    receive after 1000 -> ok end,
    _ = [try erpc:call(Anchor, terrain, placed, [G], ?ROUND_MS) of
             Members when is_list(Members) ->
                 terrain_lab_chaos_history:log(H, Anchor, placed, ok,
                                               #{group => G, members => [[Node, text(Pid)] || {Pid, Node} <- Members]});
             Other ->
                 terrain_lab_chaos_history:log(H, Anchor, placed, text(Other), #{group => G})
         catch _:Why ->
                 terrain_lab_chaos_history:log(H, Anchor, placed, text(Why), #{group => G})
         end || G <- Groups],
    _ = N rem 5 =:= 0 andalso
        timed(H, Anchor, placed_groups, [terrain, placed_groups, []], ?GROUPS_DEADLINE,
              fun(L) when is_list(L) -> length(L); (Other) -> text(Other) end),
    watch(Context, N + 1).

%% A library call timed on its node (timer:tc there), with its deadline; a node that
%% does not answer within the deadline + 5 s is `no_answer' (no time).
timed(H, Node, Op, [M, F, A], Deadline, Result) ->
    try erpc:call(Node, timer, tc, [M, F, A], Deadline + 5000) of
        {Us, Value} ->
            terrain_lab_chaos_history:log(H, Node, Op, Result(Value),
                                          #{deadline_ms => Deadline, elapsed_ms => Us div 1000})
    catch _:Why ->
            terrain_lab_chaos_history:log(H, Node, Op, <<"no_answer">>, #{deadline_ms => Deadline, why => text(Why)})
    end.

text(Term) ->
    iolist_to_binary(io_lib:format("~0tP", [Term, 10])).

%%--------------------------------------------------------------------
%% Internal: trees

leaves({node, N}) -> [N];
leaves(Network) -> lists:append([leaves(C) || C <- children(Network)]).

children({network, _, _, C}) -> C;
children({network, _, C}) when is_list(C) -> C;
children({network, C}) -> C.

clades({node, _}) -> [];
clades(Network) ->
    [lists:sort(leaves(Network)) | lists:append([clades(C) || C <- children(Network)])].
