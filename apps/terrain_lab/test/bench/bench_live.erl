%% Benchmark of the live topology and of placed groups (issue 26) on a 24-VM,
%% three-level emulated cluster (2 sites x 3 racks x 4 nodes; one-way 250 us in a rack,
%% 2.5 ms between racks, 25 ms between sites), started as `terrain up --live' would:
%%
%% 1. join: a 25th node is added to rack s1r2 (`terrain up --add'); every node's
%%    subscriber records when it takes the version that holds the node. Goal: in rack
%%    s1r2 on every node <= 5 s after the node connected (to this node, which then
%%    connects it to the cluster), measuring <= 3 x levels x (max branching) = 36 pairs;
%%    one version on every node.
%% 2. leave: that node is stopped (`terrain down --nodes'). Goal: gone from every
%%    node's tree <= grace (5 s here) + 2 s after its nodedown; one version everywhere.
%% 3. heal: a placed group of 8 on 3 nodes (3 + 3 + 2) runs on one node of the
%%    cluster; the VM with 3 of them is killed with kill -9. Goal: 8 running again,
%%    on matching nodes, <= 2 s after nodedown. Then a group of 6 spread over the
%%    6 racks ({depth, 2}); a member's VM is killed: 6 again, one per rack.
-module(bench_live).
-export([run/0, run/1]).

%% Internal exports: spawned on the cluster's nodes.
-export([subscriber/1]).

-define(GRACE, 5000).

run() ->
    Dir = "/tmp/bench_live_" ++ os:getpid(),
    Spec = filename:join(Dir, "live24.cluster"),
    ok = filelib:ensure_dir(Spec),
    ok = file:write_file(Spec, spec_text()),
    run(Dir, Spec, ?GRACE).

%% @doc The same on the cluster of a spec file whose nodes are named sXrYnZ in groups sX
%% and sXrY (`examples/scale_spec.py N --latency ...'), with a grace in ms, e.g.
%% `-eval 'bench_live:run(["d256.cluster", "3000"]), halt().''. The node added is
%% s1r2x1.
-spec run([string()]) -> ok.
run([Spec, Grace]) ->
    run("/tmp/bench_live_" ++ os:getpid(), Spec, list_to_integer(Grace)).

run(Dir, Spec, Grace) ->
    Prefix = "bl" ++ os:getpid() ++ "_",
    Add = filename:join(Dir, "add.cluster"),
    ok = filelib:ensure_dir(Add),
    ok = file:write_file(Add, "{group, s1, #{}, [{group, s1r2, #{}, [{node, s1r2x1, #{schedulers => 1}}]}]}.\n"),
    {ok, Null} = file:open("/dev/null", [write]),
    Quiet = #{out => Null, err => Null},
    T0 = now_ms(),
    {ok, Records} = terrain_lab_launch:up(Spec, #{prefix => Prefix, timeout => undefined, netem => "auto",
                                                  live => #{grace => Grace, remeasure => false}},
                                          Dir, Quiet),
    Nodes = [N || #{node := N} <- Records],
    try
        io:format("~b VMs up and settled in ~.1f s; machine load ~ts~n", [length(Nodes), (now_ms() - T0) / 1000, load()]),
        settle(Nodes),
        join_and_leave(Nodes, Prefix, Add, Dir, Quiet, Grace),
        heal(Nodes)
    after
        terrain_lab_launch_stop:stop(Dir, 5000, #{io => Quiet, force => true})
    end.

%%--------------------------------------------------------------------

join_and_leave(Nodes, Prefix, Add, Dir, Io, Grace) ->
    Self = self(),
    %% the subscriber runs this module's code: load it on the nodes
    {?MODULE, Bin, File} = code:get_object_code(?MODULE),
    [{module, ?MODULE} = erpc:call(N, code, load_binary, [?MODULE, File, Bin]) || N <- Nodes],
    [_ = erpc:call(N, erlang, spawn, [?MODULE, subscriber, [Self]]) || N <- Nodes],
    [receive {subscribed, N} -> ok after 5000 -> error({no_subscriber, N}) end || N <- Nodes],
    New = list_to_atom(Prefix ++ "s1r2x1@" ++ host()),
    ok = net_kernel:monitor_nodes(true, [{node_type, all}]),
    {ok, _} = terrain_lab_launch_change:add(Add, #{}, Dir, Io),
    Connected = receive {nodeup, New, _} -> now_ms() after 0 -> error(no_nodeup_seen) end,
    Taken = await_all(Nodes, fun({join, N, _, _}) -> N =:= New; (_) -> false end, 30000),
    [{_, _, {join, New, Siblings, Pairs}, _} | _] = Taken,
    Versions = lists:usort([V || {_, V, _, _} <- Taken]),
    Last = lists:max([T || {_, _, _, T} <- Taken]),
    Rack = lists:sort([N || N <- Nodes, rack(N) =:= s1r2]),
    io:format("join: on all ~b nodes ~.2f s after the node connected (first ~.2f s); ~b pairs measured; "
              "version(s) ~w; siblings ~ts (its true rack: ~w)~n",
              [length(Nodes), (Last - Connected) / 1000, (lists:min([T || {_, _, _, T} <- Taken]) - Connected) / 1000,
               Pairs, Versions, short(Siblings), Siblings =:= Rack]),
    io:format("  tree on ~s after the join: ~ts~n", [hd(Nodes), short(place(hd(Nodes), New))]),
    %% the nodedown is timed by a process of its own: stop_some/4 returns only once the
    %% VM's OS process is gone, which can be a while after its connections closed
    Watcher = spawn_link(fun() -> erlang:monitor_node(New, true),
                                  receive {nodedown, New} -> Self ! {down_at, now_ms()} end end),
    {ok, _} = terrain_lab_launch_change:stop_some(Dir, ["s1r2x1"], 5000, Io),
    Down = receive {down_at, T} -> T after 10000 -> error({no_nodedown, New, Watcher}) end,
    Gone = await_all(Nodes, fun({leave, N}) -> N =:= New; (_) -> false end, Grace + 30000),
    LastGone = lists:max([T || {_, _, _, T} <- Gone]),
    io:format("leave: gone from all ~b trees ~.2f s after its nodedown (grace ~.1f s + 2 s = ~.1f s); version(s) ~w~n",
              [length(Nodes), (LastGone - Down) / 1000, Grace / 1000, (Grace + 2000) / 1000,
               lists:usort([V || {_, V, _, _} <- Gone])]).

heal(Nodes) ->
    Host = hd(Nodes),
    [A, B, C | _] = [N || N <- Nodes, N =/= Host],
    ok = erpc:call(Host, application, set_env, [kernel, logger_level, error]),
    {ok, _} = erpc:call(Host, terrain, start_placed, [g8, #{start => {gen_event, start, []}, count => 8,
                                                             candidates => [A, B, C]}]),
    Before = erpc:call(Host, terrain, placed, [g8]),
    Counts = counts([N || {_, N} <- Before]),
    [Victim | _] = [N || {N, 3} <- maps:to_list(Counts)],
    io:format("heal: 8 members on ~w; kill -9 of ~s (3 of them)~n", [lists:sort(maps:values(Counts)), Victim]),
    Healed = kill_and_wait(Host, g8, 8, Victim),
    After = erpc:call(Host, terrain, placed, [g8]),
    io:format("  8 running again ~.2f s after nodedown, on ~w~n",
              [Healed / 1000, lists:sort(maps:values(counts([N || {_, N} <- After])))]),
    {ok, _} = erpc:call(Host, terrain, start_placed, [racks, #{start => {gen_event, start, []}, count => 6,
                                                                spread => {depth, 2},
                                                                candidates => Nodes -- [Host, Victim]}]),
    Racks = fun(Members) -> lists:sort([rack(N) || {_, N} <- Members]) end,
    R0 = erpc:call(Host, terrain, placed, [racks]),
    {_, RVictim} = hd(R0),
    io:format("spread {depth, 2}: 6 members in racks ~w; kill -9 of ~s~n", [Racks(R0), RVictim]),
    Healed2 = kill_and_wait(Host, racks, 6, RVictim),
    R1 = erpc:call(Host, terrain, placed, [racks]),
    io:format("  6 running again ~.2f s after nodedown, racks ~w (one per rack: ~w)~n",
              [Healed2 / 1000, Racks(R1), length(lists:usort(Racks(R1))) =:= 6]).

kill_and_wait(Host, Group, K, Victim) ->
    OsPid = erpc:call(Victim, os, getpid, []),
    _ = os:cmd("kill -9 " ++ OsPid),
    Down = receive {nodedown, Victim, _} -> now_ms() after 10000 -> error({no_nodedown, Victim}) end,
    poll(fun() ->
                 M = erpc:call(Host, terrain, placed, [Group]),
                 length(M) =:= K andalso not lists:keymember(Victim, 2, M)
         end, 20000),
    now_ms() - Down.

%%--------------------------------------------------------------------

subscriber(Bench) ->
    {ok, _} = terrain:subscribe(topology, #{}),
    Bench ! {subscribed, node()},
    subscriber_loop(Bench).

subscriber_loop(Bench) ->
    receive
        {terrain_topology, _, #{version := V, change := C}} -> Bench ! {taken, node(), V, C}, subscriber_loop(Bench)
    end.

%% Waits until every node reports a change that Match accepts; [{Node, V, Change, ArrivalMs}].
await_all(Nodes, Match, Timeout) ->
    Deadline = now_ms() + Timeout,
    [receive {taken, N, V, C} when N =:= Node -> case Match(C) of true -> {N, V, C, now_ms()}; false -> wait_one(Node, Match, Deadline) end
     after max(0, Deadline - now_ms()) -> error({no_change_on, Node})
     end || Node <- Nodes].

wait_one(Node, Match, Deadline) ->
    receive {taken, Node, V, C} -> case Match(C) of true -> {Node, V, C, now_ms()}; false -> wait_one(Node, Match, Deadline) end
    after max(0, Deadline - now_ms()) -> error({no_change_on, Node})
    end.

settle(Nodes) ->
    poll(fun() -> lists:all(fun(N) -> length(maps:get(members, erpc:call(N, terrain, live_status, []))) =:= length(Nodes)
                            end, Nodes) end, 30000).

place(Node, New) ->
    {network, _, _, _} = Tree = erpc:call(Node, terrain, topology, []),
    Find = fun F({node, N}, Path) when N =:= New -> lists:reverse(Path);
               F({node, _}, _) -> [];
               F({network, Name, _, Kids}, Path) -> lists:append([F(K, [Name | Path]) || K <- Kids])
           end,
    Find(Tree, []).

rack(Node) -> list_to_atom(lists:sublist(lists:last(string:split(hd(string:split(atom_to_list(Node), "@")), "_")), 4)).

counts(Keys) ->
    lists:foldl(fun(K, Acc) -> maps:update_with(K, fun(X) -> X + 1 end, 1, Acc) end, #{}, Keys).

poll(Fun, Timeout) ->
    Deadline = now_ms() + Timeout,
    poll_until(Fun, Deadline).

poll_until(Fun, Deadline) ->
    case Fun() of
        true -> ok;
        false ->
            case now_ms() > Deadline of
                true -> error(poll_timeout);
                false -> receive after 20 -> poll_until(Fun, Deadline) end
            end
    end.

short(Nodes) when is_list(Nodes) ->
    lists:join(",", [hd(string:split(atom_to_list(N), "@")) || N <- Nodes]).

host() ->
    [_, H] = string:split(atom_to_list(node()), "@"),
    H.

load() ->
    {ok, Bin} = file:read_file("/proc/loadavg"),
    string:trim(Bin).

now_ms() -> erlang:monotonic_time(millisecond).

spec_text() ->
    Rack = fun(S, R) ->
                   io_lib:format("    {group, s~br~b, #{latency => 250}, [~ts]}",
                                 [S, R, lists:join(", ", [io_lib:format("{node, s~br~bn~b, #{schedulers => 1}}", [S, R, I])
                                                          || I <- lists:seq(1, 4)])])
           end,
    ["{cluster, live24, #{latency => 25000}}.\n",
     [io_lib:format("{group, s~b, #{latency => 2500}, [~n~ts]}.~n", [S, lists:join(",\n", [Rack(S, R) || R <- lists:seq(1, 3)])])
      || S <- [1, 2]]].
