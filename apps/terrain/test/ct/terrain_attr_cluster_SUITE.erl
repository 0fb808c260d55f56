%% Attributes across nodes: eight peers with different attributes, plus throwaway
%% peers that are stopped, cut off, hung or without terrain. Queries with one
%% deadline, backoff, caching, push mode, selection, groups and the refusal of remote
%% writes.
-module(terrain_attr_cluster_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2, end_per_testcase/2]).
-export([fan_out_reaches_every_node/0, fan_out_reaches_every_node/1,
         choose_nodes_over_the_cluster/0, choose_nodes_over_the_cluster/1,
         choose_node_picks/0, choose_node_picks/1,
         explain_and_relax_over_the_cluster/0, explain_and_relax_over_the_cluster/1,
         groups_as_candidates_and_predicates/0, groups_as_candidates_and_predicates/1,
         stopped_and_disconnected_nodes/0, stopped_and_disconnected_nodes/1,
         hung_server_and_missing_application/0, hung_server_and_missing_application/1,
         sigstopped_node_is_waited_on_once/0, sigstopped_node_is_waited_on_once/1,
         a_busy_cache_does_not_hold_a_call_past_its_deadline/0,
         a_busy_cache_does_not_hold_a_call_past_its_deadline/1,
         watched_nodes_are_asked_without_a_monitor/0, watched_nodes_are_asked_without_a_monitor/1,
         remote_server_killed_keeps_values/0, remote_server_killed_keeps_values/1,
         cache_honours_max_age_and_nodedown/0, cache_honours_max_age_and_nodedown/1,
         push_subscription_feeds_the_cache/0, push_subscription_feeds_the_cache/1,
         remote_writes_are_refused/0, remote_writes_are_refused/1,
         topology_writes_are_refused_and_validated/0, topology_writes_are_refused_and_validated/1,
         remote_dynamic_attributes_that_hang_or_crash/0, remote_dynamic_attributes_that_hang_or_crash/1,
         bad_configuration_on_a_remote_node/0, bad_configuration_on_a_remote_node/1]).

%% run on peers
-export([hold/2, join_forever/2, remote_write/1, remote_topology_write/1, send_junk/1]).

-define(LABELS, [p1, p2, p3, p4, p5, p6, p7, p8]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [fan_out_reaches_every_node, choose_nodes_over_the_cluster, choose_node_picks,
     explain_and_relax_over_the_cluster, groups_as_candidates_and_predicates, stopped_and_disconnected_nodes,
     hung_server_and_missing_application, sigstopped_node_is_waited_on_once,
     a_busy_cache_does_not_hold_a_call_past_its_deadline,
     watched_nodes_are_asked_without_a_monitor,
     remote_server_killed_keeps_values, cache_honours_max_age_and_nodedown,
     push_subscription_feeds_the_cache, remote_writes_are_refused, topology_writes_are_refused_and_validated,
     remote_dynamic_attributes_that_hang_or_crash,
     bad_configuration_on_a_remote_node].

%% Attributes of the eight peers: rack, cores, load (p8 has none), gpu on p2 and p6.
attrs_of(p1) -> [{rack, r1}, {cores, 2}, {load, 0.1}];
attrs_of(p2) -> [{rack, r1}, {cores, 8}, {load, 0.9}, {gpu, true}];
attrs_of(p3) -> [{rack, r1}, {cores, 4}, {load, 0.5}];
attrs_of(p4) -> [{rack, r1}, {cores, 8}, {load, 0.2}];
attrs_of(p5) -> [{rack, r2}, {cores, 16}, {load, 0.7}];
attrs_of(p6) -> [{rack, r2}, {cores, 2}, {load, 0.3}, {gpu, true}];
attrs_of(p7) -> [{rack, r2}, {cores, 8}, {load, 0.05}];
attrs_of(p8) -> [{rack, r2}, {cores, 4}].

init_per_suite(Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    Prefix = terrain_test_peers:unique_prefix(?MODULE),
    Names = [list_to_atom(Prefix ++ atom_to_list(L)) || L <- ?LABELS],
    Label = maps:from_list(lists:zip(Names, ?LABELS)),
    Peers = terrain_test_peers:start(Names,
                                     fun(Name) -> [{attrs, attrs_of(maps:get(Name, Label))}] end,
                                     fun(Name) -> case maps:get(Name, Label) of
                                                      L when L =:= p1; L =:= p2; L =:= p3; L =:= p4 -> ["+S", "1:1"];
                                                      _ -> ["+S", "2:2"]
                                                  end
                                     end),
    _ = application:load(terrain),
    {ok, _} = application:ensure_all_started(terrain),
    [{peers, maps:from_list(lists:zip(?LABELS, Peers))}, {prefix, Prefix} | Config].

end_per_suite(Config) ->
    terrain_test_peers:stop(maps:values(?config(peers, Config))),
    _ = application:stop(terrain),
    terrain_test_peers:wait_until(fun() -> terrain_test_peers:beam_count(?config(prefix, Config)) =:= 0 end,
                                  10000, "peers gone"),
    ok.

%% The peer that sigstopped_node_is_waited_on_once stops with SIGSTOP is started here,
%% so that end_per_testcase can always send it SIGCONT (and stop it), also when the case
%% fails or its timetrap strikes (then end_per_testcase runs in another process).
init_per_testcase(sigstopped_node_is_waited_on_once, Config) ->
    [Peer] = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "x_sigstop")],
                                      [{attrs, [{rack, r3}]}]),
    OsPid = terrain_test_peers:call(Peer, os, getpid, []),
    [{sigstopped, {Peer, OsPid}} | Config];
init_per_testcase(_Case, Config) ->
    Config.

%% Throwaway peers a case started are listed under `extra' and stopped here.
end_per_testcase(sigstopped_node_is_waited_on_once, Config) ->
    {Peer, OsPid} = ?config(sigstopped, Config),
    ok = signal(OsPid, "CONT"),
    terrain_test_peers:stop([Peer]),
    Config;
end_per_testcase(_Case, Config) ->
    case get(extra_peers) of
        undefined -> ok;
        Extra -> terrain_test_peers:stop(Extra), erase(extra_peers)
    end,
    Config.

%%--------------------------------------------------------------------
%% Run on peers

%% Spawns a process that sets Name and keeps it (it is the owner) until told otherwise.
hold(Name, Value) ->
    Parent = self(),
    Pid = spawn(fun() ->
                        ok = terrain:set_attr(Name, Value),
                        Parent ! {held, self()},
                        hold_loop(Name)
                end),
    receive {held, Pid} -> Pid after 5000 -> error(hold_timeout) end.

hold_loop(Name) ->
    receive
        {set, Value, From} -> ok = terrain:set_attr(Name, Value), From ! {done, self()}, hold_loop(Name);
        stop -> ok
    end.

join_forever(Scope, Group) ->
    Parent = self(),
    Pid = spawn(fun() ->
                        _ = case whereis(Scope) of
                                undefined -> pg:start(Scope);
                                _ -> ok
                            end,
                        ok = pg:join(Scope, Group, self()),
                        Parent ! {joined, self()},
                        receive stop -> ok end
                end),
    receive {joined, Pid} -> Pid after 5000 -> error(join_timeout) end.

remote_write(Target) ->
    [gen_server:call({terrain_attr_server, Target}, {set, evil, 1, persistent}, 5000),
     gen_server:call({terrain_attr_server, Target}, {install, [{evil, {static, 1}}]}, 5000),
     gen_server:call({terrain_attr_cache, Target}, {subscribe, [], [a], 100, self()}, 5000)].

%% Tries to replace Target's topology: with garbage, and with a valid topology of its own.
remote_topology_write(Target) ->
    {ok, Valid} = terrain_topology:new({network, dc, [{node, node()}, {node, Target}]}),
    Server = {terrain_topology_server, Target},
    gen_server:cast(Server, {put, garbage}),
    Server ! {put, garbage},
    [gen_server:call(Server, {put, garbage}, 5000), gen_server:call(Server, {put, Valid}, 5000)].

send_junk(Target) ->
    [{Server, Target} ! J || Server <- [terrain_attr_server, terrain_attr_responder],
                             J <- [junk, {'$terrain_attrs', 1, self(), [a]}, {'$terrain_attrs', 1, alias(), [{m, f, []}]},
                                   {'$terrain_attrs', 1, alias(), "string"}]],
    {terrain_attr_cache, Target} ! {'$terrain_attr_push', make_ref(), node(), []},
    ok.

%%--------------------------------------------------------------------
%% Helpers

peer(L, Config) -> maps:get(L, ?config(peers, Config)).
node_of(L, Config) -> terrain_test_peers:node_of(peer(L, Config)).
nodes_of(Ls, Config) -> [node_of(L, Config) || L <- Ls].
all_nodes(Config) -> nodes_of(?LABELS, Config).

%% Back from node names to labels, for readable comparisons.
labels(Nodes, Config) ->
    ByNode = maps:from_list([{node_of(L, Config), L} || L <- ?LABELS]),
    [maps:get(N, ByNode, N) || N <- Nodes].

choose(Preds, Config) ->
    labels(terrain:choose_nodes(all_nodes(Config), Preds), Config).

extra_peers(Labels, Config) ->
    extra_peers(Labels, [{attrs, [{rack, r3}, {cores, 1}]}], Config).

extra_peers(Labels, Env, Config) ->
    Names = [list_to_atom(?config(prefix, Config) ++ atom_to_list(L)) || L <- Labels],
    Peers = terrain_test_peers:start(Names, Env),
    put(extra_peers, Peers ++ case get(extra_peers) of undefined -> []; E -> E end),
    Peers.

stat(Name) ->
    maps:get(Name, terrain:stats()).

%% Sends a signal ("STOP", "CONT") to an OS process.
signal(OsPid, Signal) ->
    Port = open_port({spawn_executable, os:find_executable("kill")},
                     [{args, ["-" ++ Signal, OsPid]}, exit_status, stderr_to_stdout]),
    receive {Port, {exit_status, 0}} -> ok;
            {Port, {exit_status, Status}} -> error({kill_failed, OsPid, Signal, Status})
    after 5000 -> error({kill_timeout, OsPid, Signal})
    end.

%% Whether every thread of an OS process is stopped (Linux /proc): a signal stops the
%% threads one by one, and a thread still running could still answer.
os_state(OsPid) ->
    Dir = "/proc/" ++ OsPid ++ "/task",
    {ok, Threads} = file:list_dir(Dir),
    States = [begin
                  {ok, Status} = file:read_file(filename:join([Dir, T, "status"])),
                  {match, [State]} = re:run(Status, "^State:\\s+(\\S)", [multiline, {capture, all_but_first, list}]),
                  State
              end || T <- Threads],
    case lists:usort(States) of
        ["T"] -> stopped;
        Other -> Other
    end.

elapsed_ms(Fun) ->
    T0 = erlang:monotonic_time(millisecond),
    R = Fun(),
    {erlang:monotonic_time(millisecond) - T0, R}.

%%--------------------------------------------------------------------
%% Cases

fan_out_reaches_every_node() ->
    [{doc, "attrs/3 asks all eight peers and this node at once; each answers every name asked."}].
fan_out_reaches_every_node(Config) ->
    Nodes = all_nodes(Config) ++ [node()],
    Result = terrain:attrs(Nodes, [rack, vm_schedulers_online, no_such_attribute]),
    ?assertEqual(lists:sort(Nodes), lists:sort(maps:keys(Result))),
    [begin
         #{N := {ok, V}} = Result,
         {rack, Rack} = lists:keyfind(rack, 1, attrs_of(L)),
         Schedulers = case L of _ when L =:= p1; L =:= p2; L =:= p3; L =:= p4 -> 1; _ -> 2 end,
         ?assertEqual(#{rack => Rack, vm_schedulers_online => Schedulers, no_such_attribute => undefined}, V)
     end || L <- ?LABELS, N <- [node_of(L, Config)]],
    Me = node(),
    #{Me := {ok, #{rack := undefined}}} = Result,
    %% all attributes of one node
    P1 = node_of(p1, Config),
    #{P1 := {ok, All}} = terrain:attrs([P1], all),
    ?assertMatch(#{rack := r1, cores := 2, load := 0.1, os_type := _, scheduler_utilisation := _}, All).

choose_nodes_over_the_cluster() ->
    [{doc, "Comparisons, booleans, in, exists, not, or, relative low/bottom and order_by over the eight peers."}].
choose_nodes_over_the_cluster(Config) ->
    ?assertEqual([p2, p3, p4], choose([{rack, eq, r1}, {cores, ge, 4}], Config)),
    ?assertEqual([p2, p5, p6], choose({'or', [{gpu, true}, {cores, ge, 16}]}, Config)),
    ?assertEqual([p2, p6], choose([{gpu, yes}], Config)),
    ?assertEqual([p1, p3, p6, p8], choose([{cores, in, [2, 4]}], Config)),
    ?assertEqual([p8], choose([{'not', {load, exists}}], Config)),
    %% p8 has no load: it is in neither {load, lt, 0.5} nor its negation
    ?assertEqual([p1, p4, p6, p7], choose([{load, lt, 0.5}], Config)),
    ?assertEqual([p2, p3, p5], choose([{'not', {load, lt, 0.5}}], Config)),
    %% loads .05 .1 .2 .3 .5 .7 .9: the lower half is the four smallest
    ?assertEqual([p1, p4, p6, p7], choose([{load, low}], Config)),
    ?assertEqual([p2, p3, p5, p6], choose([{load, high}], Config)),
    ?assertEqual([p1, p7], choose([{load, bottom, 2}], Config)),
    ?assertEqual([p5], choose([{cores, top, 1}], Config)),
    ?assertEqual([p5, p6, p7, p8], choose([{vm_schedulers_online, eq, 2}], Config)),
    ?assertEqual([p5, p7, p8, p6],
                 labels(terrain:choose_nodes(all_nodes(Config), [{rack, eq, r2}], #{order_by => {cores, desc}}),
                        Config)),
    ?assertEqual([p7, p1, p4, p6, p3, p5, p2, p8],
                 labels(terrain:choose_nodes(all_nodes(Config), [], #{order_by => {load, asc}}), Config)),
    %% `all' is this node and every connected node
    ?assertEqual(lists:sort(all_nodes(Config)), lists:sort(terrain:choose_nodes(all, [{rack, exists}]))).

choose_node_picks() ->
    [{doc, "choose_node: first, random within the matches, round_robin through all of them, least_loaded."}].
choose_node_picks(Config) ->
    Preds = [{cores, ge, 8}],                     % p2 p4 p5 p7
    Matches = nodes_of([p2, p4, p5, p7], Config),
    Cands = all_nodes(Config),
    ?assertEqual({ok, node_of(p2, Config)}, terrain:choose_node(Cands, Preds, #{pick => first})),
    Randoms = [element(2, terrain:choose_node(Cands, Preds, #{})) || _ <- lists:seq(1, 20)],
    ?assertEqual([], [R || R <- Randoms, not lists:member(R, Matches)]),
    RoundRobin = [element(2, terrain:choose_node(Cands, Preds, #{pick => round_robin})) || _ <- lists:seq(1, 4)],
    ?assertEqual(lists:sort(Matches), lists:sort(RoundRobin)),
    ?assertEqual({ok, node_of(p7, Config)},
                 terrain:choose_node(Cands, Preds, #{pick => least_loaded, load_attr => load})),
    {ok, Least} = terrain:choose_node(Cands, Preds, #{pick => least_loaded}),
    ?assert(lists:member(Least, Matches)),
    ?assertEqual({error, none}, terrain:choose_node(Cands, [{cores, gt, 100}], #{})),
    ?assertEqual({ok, node_of(p2, Config)},
                 terrain:choose_node(Cands, [{cores, ge, 8}, {cores, gt, 100}], #{relax => true, pick => first})).

explain_and_relax_over_the_cluster() ->
    [{doc, "explain names the predicate that removed the last candidates and their values; relax drops "
           "predicates from the end until a node matches."}].
explain_and_relax_over_the_cluster(Config) ->
    Preds = [{rack, eq, r1}, {gpu, true}, {load, lt, 0.5}],
    P2 = node_of(p2, Config),
    {[], Why} = terrain:choose_nodes(all_nodes(Config), Preds, #{explain => true}),
    ?assertMatch(#{candidates := 8, steps := [{{rack, eq, r1}, 4}, {{gpu, true}, 1}, {{load, lt, 0.5}, 0}],
                   removed_by := {load, lt, 0.5}, last := #{P2 := #{load := 0.9}}}, Why),
    ct:pal("~ts", [terrain:format_explanation(Why)]),
    ?assertEqual({[P2], [{load, lt, 0.5}]}, terrain:choose_nodes(all_nodes(Config), Preds, #{relax => true})).

groups_as_candidates_and_predicates() ->
    [{doc, "A pg group as candidates ({group, Scope, Group}) and as a predicate, mixed with attributes."}].
groups_as_candidates_and_predicates(Config) ->
    Scope = terrain_test_scope,
    {ok, ScopePid} = pg:start(Scope),
    try
        Members = [terrain_test_peers:call(peer(L, Config), ?MODULE, join_forever, [Scope, workers]) || L <- [p3, p5]],
        terrain_test_peers:wait_until(fun() -> length(pg:get_members(Scope, workers)) =:= 2 end, 10000,
                                      "group members visible"),
        ?assertEqual(lists:sort(nodes_of([p3, p5], Config)), lists:sort(terrain:choose_nodes({group, Scope, workers}, []))),
        ?assertEqual([node_of(p5, Config)], terrain:choose_nodes({group, Scope, workers}, [{cores, ge, 8}])),
        ?assertEqual([p5], choose([{group, Scope, workers}, {cores, ge, 8}], Config)),
        ?assertEqual([p1, p3, p5, p6], choose({'or', [{group, Scope, workers}, {cores, eq, 2}]}, Config)),
        ?assertEqual([], terrain:choose_nodes({group, Scope, nobody}, [])),
        [Pid ! stop || Pid <- Members]
    after
        gen_server:stop(ScopePid)
    end.

stopped_and_disconnected_nodes() ->
    [{doc, "A stopped node and a node that refuses the connection answer {error, noconnection} within the "
           "deadline, without disturbing the others; afterwards they are skipped (backoff) until they "
           "come back; choose_nodes leaves them out and explain lists them."}].
stopped_and_disconnected_nodes(Config) ->
    [Stopped, Cut] = extra_peers([x_stopped, x_cut], Config),
    [S, C] = [terrain_test_peers:node_of(P) || P <- [Stopped, Cut]],
    Nodes = all_nodes(Config) ++ [S, C],
    %% vm_memory_total is volatile: every call asks the nodes for it
    Before = terrain:attrs(Nodes, [rack, vm_memory_total]),
    ?assertEqual(10, length([ok || {ok, _} <- maps:values(Before)])),
    %% stop one; make the other refuse our cookie and drop the connection
    terrain_test_peers:stop([Stopped]),
    true = terrain_test_peers:call(Cut, erlang, set_cookie, [node(), not_the_cookie]),
    true = terrain_test_peers:call(Cut, erlang, disconnect_node, [node()]),
    terrain_test_peers:wait_until(fun() -> not lists:member(C, nodes()) andalso not lists:member(S, nodes()) end,
                                  5000, "both disconnected"),
    {Ms, After} = elapsed_ms(fun() -> terrain:attrs(Nodes, [rack, vm_memory_total], #{timeout => 2000}) end),
    ct:pal("with a stopped and a cut-off node: ~b ms", [Ms]),
    ?assertEqual({error, noconnection}, maps:get(S, After)),
    ?assertEqual({error, noconnection}, maps:get(C, After)),
    ?assertEqual(8, length([ok || {ok, _} <- maps:values(After)])),
    ?assert(Ms < 2000),
    %% the next call does not ask them again (their failures are recorded before the
    %% call returns)
    ?assertMatch([{_, noconnection, 1}, {_, noconnection, 1}], [terrain_attr_cache:backoff(N) || N <- [S, C]]),
    {Skips, Requests} = {stat(backoff_skips), stat(node_requests)},
    After2 = terrain:attrs(Nodes, [rack, vm_memory_total]),
    ?assertEqual({error, noconnection}, maps:get(S, After2)),
    ?assertEqual(Skips + 2, stat(backoff_skips)),
    ?assertEqual(Requests + 8, stat(node_requests)),
    %% selection leaves them out and explain says why
    ?assertEqual([p5, p6, p7, p8], labels(terrain:choose_nodes(Nodes, [{rack, eq, r2}]), Config)),
    {[], Why} = terrain:choose_nodes(Nodes, [{rack, eq, r3}], #{explain => true}),
    ?assertMatch(#{candidates := 10, unreachable := #{S := noconnection, C := noconnection}}, Why),
    ct:pal("~ts", [terrain:format_explanation(Why)]),
    %% the cut-off node comes back: nodeup clears its backoff
    true = terrain_test_peers:call(Cut, erlang, set_cookie, [node(), erlang:get_cookie()]),
    pong = terrain_test_peers:call(Cut, net_adm, ping, [node()]),
    terrain_test_peers:wait_until(fun() -> maps:get(C, terrain:attrs([C], [rack])) =:= {ok, #{rack => r3}} end,
                                  5000, "cut-off node back").

hung_server_and_missing_application() ->
    [{doc, "A node whose attribute responder hangs answers {error, timeout} at the deadline, one deadline for the "
           "whole call; a node without terrain answers {error, not_running} at once."}].
hung_server_and_missing_application(Config) ->
    [Hung, Bare] = extra_peers([x_hung, x_bare], Config),
    [H, B] = [terrain_test_peers:node_of(P) || P <- [Hung, Bare]],
    ok = terrain_test_peers:call(Hung, sys, suspend, [terrain_attr_responder]),
    ok = terrain_test_peers:call(Bare, application, stop, [terrain]),
    Nodes = all_nodes(Config) ++ [H, B],
    {Ms, Result} = elapsed_ms(fun() -> terrain:attrs(Nodes, [rack], #{timeout => 500}) end),
    ct:pal("with a hung and a bare node, deadline 500 ms: ~b ms", [Ms]),
    ?assertEqual({error, timeout}, maps:get(H, Result)),
    ?assertEqual({error, not_running}, maps:get(B, Result)),
    ?assertEqual(8, length([ok || {ok, _} <- maps:values(Result)])),
    ?assert(Ms >= 500),
    ?assert(Ms < 500 + 1500),
    %% choose_nodes does not crash on them
    ?assertEqual([p1, p2, p3, p4], labels(terrain:choose_nodes(Nodes, [{rack, eq, r1}], #{timeout => 300}), Config)),
    %% once resumed, it answers again when its backoff expires
    ok = terrain_test_peers:call(Hung, sys, resume, [terrain_attr_responder]),
    terrain_test_peers:wait_until(fun() -> maps:get(H, terrain:attrs([H], [rack])) =:= {ok, #{rack => r3}} end,
                                  10000, "hung node answers again").

a_busy_cache_does_not_hold_a_call_past_its_deadline() ->
    [{doc, "A choose_nodes call with a 500 ms deadline over the eight peers and a node that does not exist, while "
           "this node's cache server is held (suspended: a cache too busy to answer): the call returns the "
           "matching peers within deadline + 300 ms; it used to wait up to 5 s for the cache to record the "
           "failed node after the deadline (the chaos run's choose_nodes of 3050 ms with a 2 s deadline)"}].
a_busy_cache_does_not_hold_a_call_past_its_deadline(Config) ->
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Absent = list_to_atom(?config(prefix, Config) ++ "absent@" ++ Host),
    Cache = whereis(terrain_attr_cache),
    Timeout = 500,
    true = erlang:suspend_process(Cache),
    {Ms, Chosen} = try elapsed_ms(fun() -> terrain:choose_nodes(all_nodes(Config) ++ [Absent], [{cores, ge, 1}],
                                                                 #{timeout => Timeout})
                                  end)
                   after true = erlang:resume_process(Cache)
                   end,
    ct:pal("choose_nodes with the cache held, deadline ~b ms: ~b ms, ~p", [Timeout, Ms, Chosen]),
    ?assertEqual(lists:sort(all_nodes(Config)), lists:sort(Chosen)),
    ?assert(Ms =< Timeout + 300),
    %% the failure was recorded once the cache went on
    terrain_test_peers:wait_until(fun() -> terrain_attr_cache:backoff(Absent) =/= none end, 5000, "absent recorded").

sigstopped_node_is_waited_on_once() ->
    [{doc, "A node stopped with SIGSTOP (connected, silent) costs one deadline: the first call returns within "
           "deadline + 300 ms with {error, timeout} for it; the next ten calls (attrs and choose_nodes on a "
           "volatile attribute) skip it while it is in backoff, take at most 150 ms each and leave it out; after "
           "SIGCONT it answers again once its backoff has ended."}].
sigstopped_node_is_waited_on_once(Config) ->
    {Peer, OsPid} = ?config(sigstopped, Config),
    H = terrain_test_peers:node_of(Peer),
    Nodes = all_nodes(Config) ++ [H],
    Timeout = 1000,
    %% vm_memory_total is volatile: every call must ask the nodes for it
    ?assertMatch(#{H := {ok, #{vm_memory_total := _}}}, terrain:attrs([H], [vm_memory_total])),
    terrain_test_peers:wait_until(fun() -> element(4, terrain_attr_cache:row(H)) end, 5000, "node watched"),
    ok = signal(OsPid, "STOP"),
    terrain_test_peers:wait_until(fun() -> os_state(OsPid) =:= stopped end, 5000, "peer stopped"),
    {Ms1, First} = elapsed_ms(fun() -> terrain:attrs(Nodes, [vm_memory_total], #{timeout => Timeout}) end),
    ct:pal("first call with a SIGSTOP'd node, deadline ~b ms: ~b ms", [Timeout, Ms1]),
    ?assertEqual({error, timeout}, maps:get(H, First)),
    ?assertEqual(8, length([ok || {ok, _} <- maps:values(First)])),
    ?assert(Ms1 =< Timeout + 300),
    Skips = stat(backoff_skips),
    Next = [elapsed_ms(fun() ->
                               case I rem 2 of
                                   0 -> terrain:choose_nodes(Nodes, [{vm_memory_total, gt, 0}], #{timeout => Timeout});
                                   1 -> terrain:attrs(Nodes, [vm_memory_total], #{timeout => Timeout})
                               end
                       end) || I <- lists:seq(1, 10)],
    ct:pal("the next ten calls: ~w ms", [[Ms || {Ms, _} <- Next]]),
    ?assertEqual([], [Ms || {Ms, _} <- Next, Ms > 150]),
    Expected = lists:sort(all_nodes(Config)),
    [case Result of
         #{} ->
             ?assertEqual({error, timeout}, maps:get(H, Result)),
             ?assertEqual(Expected, lists:sort([N || {N, {ok, _}} <- maps:to_list(Result)]));
         _ ->
             ?assertEqual(Expected, lists:sort(Result))
     end || {_, Result} <- Next],
    ?assertEqual(Skips + 10, stat(backoff_skips)),
    %% resumed: it answers again once its backoff has ended
    {Until, timeout, 1} = terrain_attr_cache:backoff(H),
    ok = signal(OsPid, "CONT"),
    terrain_test_peers:wait_until(
      fun() -> case terrain:attrs([H], [vm_memory_total]) of
                   #{H := {ok, #{vm_memory_total := M}}} -> is_integer(M);
                   #{H := {error, timeout}} -> false
               end
      end,
      Until - erlang:monotonic_time(millisecond) + 5000, "resumed node answers again"),
    ?assert(erlang:monotonic_time(millisecond) >= Until),
    %% (the answer is stored, and the backoff cleared, by a cast to the cache server)
    terrain_test_peers:wait_until(fun() -> terrain_attr_cache:backoff(H) =:= none end, 5000, "backoff cleared").

watched_nodes_are_asked_without_a_monitor() ->
    [{doc, "After a node's first answer the cache server watches its attribute responder, and queries ask it "
           "with a reply alias alone: while a request is out the responder is monitored by the cache server only; "
           "a reply after the deadline never reaches the caller; when terrain stops there the watch ends and the "
           "next query answers not_running at once."}].
watched_nodes_are_asked_without_a_monitor(Config) ->
    [Peer] = extra_peers([x_watch], Config),
    N = terrain_test_peers:node_of(Peer),
    Cache = whereis(terrain_attr_cache),
    ?assertMatch(#{N := {ok, #{rack := r3}}}, terrain:attrs([N], [rack, vm_memory_total])),
    terrain_test_peers:wait_until(fun() -> element(4, terrain_attr_cache:row(N)) end, 5000, "node watched"),
    Server = terrain_test_peers:call(Peer, erlang, whereis, [terrain_attr_responder]),
    MonitoredBy = fun() -> [P || P <- element(2, terrain_test_peers:call(Peer, erlang, process_info,
                                                                         [Server, monitored_by])),
                                 is_pid(P), node(P) =:= node()] end,
    ?assertEqual([Cache], MonitoredBy()),
    %% hold the request in the responder's queue and look at its monitors meanwhile
    ok = terrain_test_peers:call(Peer, sys, suspend, [terrain_attr_responder]),
    Self = self(),
    Asker = spawn(fun() ->
                          Result = terrain:attrs([N], [vm_memory_total], #{timeout => 1000}),
                          Self ! {answered, self(), Result},
                          receive check_mailbox -> Self ! {mailbox, self(), process_info(self(), messages)} end
                  end),
    terrain_test_peers:wait_until(fun() -> terrain_test_peers:call(Peer, erlang, process_info,
                                                                    [Server, message_queue_len])
                                               =:= {message_queue_len, 1} end, 1000, "request queued"),
    ?assertEqual([Cache], MonitoredBy()),
    receive {answered, Asker, Result} -> ?assertEqual(#{N => {error, timeout}}, Result)
    after 3000 -> ct:fail(no_answer)
    end,
    %% the responder answers the old request now; the reply must not reach the asker
    ok = terrain_test_peers:call(Peer, sys, resume, [terrain_attr_responder]),
    terrain_test_peers:wait_until(fun() -> terrain_test_peers:call(Peer, erlang, process_info,
                                                                    [Server, message_queue_len])
                                               =:= {message_queue_len, 0} end, 1000, "request answered"),
    _ = terrain_test_peers:call(Peer, erlang, node, []),   % the reply, if any, has crossed the connection
    Asker ! check_mailbox,
    receive {mailbox, Asker, Mailbox} -> ?assertEqual({messages, []}, Mailbox)
    after 3000 -> ct:fail(no_mailbox)
    end,
    %% terrain stops there: the watch ends, and the next query knows at once
    ok = terrain_test_peers:call(Peer, application, stop, [terrain]),
    terrain_test_peers:wait_until(fun() -> not element(4, terrain_attr_cache:row(N)) end, 5000, "watch ended"),
    %% (the timeout above put the node in backoff for 500 ms + the 1000 ms it cost)
    terrain_test_peers:wait_until(fun() -> case terrain_attr_cache:backoff(N) of
                                               none -> true;
                                               {Until, _, _} -> erlang:monotonic_time(millisecond) >= Until
                                           end
                                  end, 5000, "backoff over"),
    {Ms, After} = elapsed_ms(fun() -> terrain:attrs([N], [vm_memory_total], #{timeout => 2000}) end),
    ?assertEqual(#{N => {error, not_running}}, After),
    ?assert(Ms < 1000).

remote_server_killed_keeps_values() ->
    [{doc, "On another node, the attribute server is killed: queries see its configured values and the values "
           "of live owners again; so they do after its responder is killed; a value whose owner is then killed "
           "disappears."}].
remote_server_killed_keeps_values(Config) ->
    [Peer] = extra_peers([x_restart], Config),
    N = terrain_test_peers:node_of(Peer),
    Holder = terrain_test_peers:call(Peer, ?MODULE, hold, [held, v1]),
    ?assertEqual({ok, #{rack => r3, held => v1}}, maps:get(N, terrain:attrs([N], [rack, held]))),
    Old = terrain_test_peers:call(Peer, erlang, whereis, [terrain_attr_server]),
    true = terrain_test_peers:call(Peer, erlang, exit, [Old, kill]),
    terrain_test_peers:wait_until(
      fun() -> maps:get(N, terrain:attrs([N], [rack, held])) =:= {ok, #{rack => r3, held => v1}} end,
      10000, "values back after the restart"),
    ?assertNotEqual(Old, terrain_test_peers:call(Peer, erlang, whereis, [terrain_attr_server])),
    %% the responder killed: restarted, and it answers again
    OldResponder = terrain_test_peers:call(Peer, erlang, whereis, [terrain_attr_responder]),
    true = terrain_test_peers:call(Peer, erlang, exit, [OldResponder, kill]),
    terrain_test_peers:wait_until(
      fun() -> maps:get(N, terrain:attrs([N], [rack, held])) =:= {ok, #{rack => r3, held => v1}} end,
      10000, "answers again after the responder's restart"),
    ?assertNotEqual(OldResponder, terrain_test_peers:call(Peer, erlang, whereis, [terrain_attr_responder])),
    true = terrain_test_peers:call(Peer, erlang, exit, [Holder, kill]),
    terrain_test_peers:wait_until(
      fun() -> maps:get(N, terrain:attrs([N], [rack, held])) =:= {ok, #{rack => r3, held => undefined}} end,
      5000, "owned value gone").

cache_honours_max_age_and_nodedown() ->
    [{doc, "Cached values are used within max_age; static ones always (even when the node hangs); nodedown "
           "empties the node's cache."}].
cache_honours_max_age_and_nodedown(Config) ->
    Peer = peer(p8, Config),
    N = node_of(p8, Config),
    Holder = terrain_test_peers:call(Peer, ?MODULE, hold, [counter, 1]),
    try
        ?assertEqual({ok, #{counter => 1, rack => r2, cores => 4}}, maps:get(N, terrain:attrs([N], [counter, rack, cores]))),
        terrain_test_peers:call(Peer, erlang, send, [Holder, {set, 2, self()}]),
        terrain_test_peers:wait_until(fun() -> maps:get(N, terrain:attrs([N], [counter])) =:= {ok, #{counter => 2}} end,
                                      5000, "new value"),
        terrain_test_peers:call(Peer, erlang, send, [Holder, {set, 3, self()}]),
        terrain_test_peers:wait_until(fun() -> terrain_test_peers:call(Peer, terrain, attr, [counter]) =:= 3 end,
                                      5000, "value set on the peer"),
        Requests = stat(node_requests),
        ?assertEqual({ok, #{counter => 2}}, maps:get(N, terrain:attrs([N], [counter], #{max_age => 60000}))),
        ?assertEqual(Requests, stat(node_requests)),
        ?assertEqual({ok, #{counter => 3}}, maps:get(N, terrain:attrs([N], [counter], #{max_age => 0}))),
        ?assertEqual(Requests + 1, stat(node_requests)),
        %% static values come from the cache even when the node cannot answer
        ok = terrain_test_peers:call(Peer, sys, suspend, [terrain_attr_responder]),
        ?assertEqual({ok, #{rack => r2, cores => 4}}, maps:get(N, terrain:attrs([N], [rack, cores], #{timeout => 300}))),
        ok = terrain_test_peers:call(Peer, sys, resume, [terrain_attr_responder]),
        %% nodedown forgets the node
        ?assertNotEqual(#{}, terrain_attr_cache:cached(N)),
        true = erlang:disconnect_node(N),
        terrain_test_peers:wait_until(fun() -> terrain_attr_cache:cached(N) =:= #{} end, 5000, "cache emptied"),
        ?assertEqual({ok, #{rack => r2}}, maps:get(N, terrain:attrs([N], [rack])))
    after
        terrain_test_peers:call(Peer, erlang, send, [Holder, stop])
    end.

push_subscription_feeds_the_cache() ->
    [{doc, "subscribe/3: the peers push changed values into the local cache, so queries within max_age are "
           "answered without asking; unsubscribing (or the subscriber dying) stops the pushers."}].
push_subscription_feeds_the_cache(Config) ->
    [Peer1, Peer2] = [peer(L, Config) || L <- [p1, p2]],
    [N1, N2] = nodes_of([p1, p2], Config),
    H1 = terrain_test_peers:call(Peer1, ?MODULE, hold, [pushed, a]),
    H2 = terrain_test_peers:call(Peer2, ?MODULE, hold, [pushed, b]),
    Pushers = fun(Peer) -> map_size(maps:get(pushers, terrain_test_peers:call(Peer, sys, get_state, [terrain_attr_server]))) end,
    try
        {ok, Sub} = terrain:subscribe([N1, N2], [pushed, load], 50),
        terrain_test_peers:wait_until(fun() -> maps:is_key(pushed, terrain_attr_cache:cached(N1)) andalso
                                                   maps:is_key(pushed, terrain_attr_cache:cached(N2)) end,
                                      5000, "first pushes"),
        Requests = stat(node_requests),
        ?assertEqual(#{N1 => {ok, #{pushed => a, load => 0.1}}, N2 => {ok, #{pushed => b, load => 0.9}}},
                     terrain:attrs([N1, N2], [pushed, load], #{max_age => 500})),
        terrain_test_peers:call(Peer1, erlang, send, [H1, {set, changed, self()}]),
        terrain_test_peers:wait_until(
          fun() -> maps:get(N1, terrain:attrs([N1], [pushed], #{max_age => 500})) =:= {ok, #{pushed => changed}} end,
          5000, "pushed change"),
        ?assertEqual(Requests, stat(node_requests)),
        ?assert(stat(pushes_received) > 0),
        ?assertEqual([1, 1], [Pushers(P) || P <- [Peer1, Peer2]]),
        ok = terrain:unsubscribe(Sub),
        terrain_test_peers:wait_until(fun() -> [Pushers(P) || P <- [Peer1, Peer2]] =:= [0, 0] end, 5000,
                                      "pushers stopped"),
        %% a subscription ends with its owner
        Owner = spawn(fun() -> {ok, _} = terrain:subscribe([N1], [pushed], 50), receive stop -> ok end end),
        terrain_test_peers:wait_until(fun() -> Pushers(Peer1) =:= 1 end, 5000, "owner's pusher"),
        Owner ! stop,
        terrain_test_peers:wait_until(fun() -> Pushers(Peer1) =:= 0 end, 5000, "owner's pusher stopped")
    after
        [terrain_test_peers:call(P, erlang, send, [H, stop]) || {P, H} <- [{Peer1, H1}, {Peer2, H2}]]
    end.

remote_writes_are_refused() ->
    [{doc, "Another node cannot set, install or subscribe through this node's servers; malformed messages "
           "from it are dropped and counted."}].
remote_writes_are_refused(Config) ->
    Peer = peer(p1, Config),
    {Refused, Dropped} = {stat(remote_writes_refused), stat(malformed_dropped)},
    ?assertEqual([{error, not_local}, {error, not_local}, {error, not_local}],
                 terrain_test_peers:call(Peer, ?MODULE, remote_write, [node()])),
    ?assertEqual(Refused + 3, stat(remote_writes_refused)),
    ?assertEqual(undefined, terrain:attr(evil)),
    ok = terrain_test_peers:call(Peer, ?MODULE, send_junk, [node()]),
    terrain_test_peers:wait_until(fun() -> stat(malformed_dropped) >= Dropped + 9 end, 5000, "junk counted"),
    ?assertEqual(Dropped + 9, stat(malformed_dropped)),
    ?assert(is_process_alive(whereis(terrain_attr_server))).

topology_writes_are_refused_and_validated() ->
    [{doc, "Another node cannot replace this node's topology, neither with garbage nor with a valid topology "
           "(refused, counted in remote_writes_refused; its casts and messages are dropped and counted); a local "
           "write of anything but a topology that terrain_topology builds is refused too; through all of it the "
           "topology stays in force and level/2, distance/2 and distance predicates keep working."}].
topology_writes_are_refused_and_validated(Config) ->
    [P1, P2] = nodes_of([p1, p2], Config),
    Tree = {network, site, [{network, r1, [{node, node()}, {node, P1}]}, {network, r2, [{node, P2}]}]},
    ok = terrain:load_topology(Tree),
    try
        Works = fun() ->
                        ?assertEqual(Tree, terrain:topology()),
                        ?assertEqual(very_near, terrain:level(node(), P1)),
                        ?assertEqual(very_far, terrain:level(node(), P2)),
                        ?assertEqual(0.5, terrain:distance(node(), P1)),
                        ?assertEqual([P1], terrain:choose_nodes([P1, P2], [{dist, le, 0.5}]))
                end,
        Works(),
        {Refused, Dropped} = {stat(remote_writes_refused), stat(malformed_dropped)},
        ?assertEqual([{error, not_local}, {error, not_local}],
                     terrain_test_peers:call(peer(p1, Config), ?MODULE, remote_topology_write, [node()])),
        ?assertEqual(Refused + 2, stat(remote_writes_refused)),
        terrain_test_peers:wait_until(fun() -> stat(malformed_dropped) >= Dropped + 2 end, 5000, "junk counted"),
        ?assertEqual(Dropped + 2, stat(malformed_dropped)),
        Works(),
        %% local writes: only what terrain_topology builds
        {ok, Good} = terrain_topology:new({network, other, [{node, node()}, {node, P2}]}),
        Tampered = maps:put(distances, [], Good),
        [?assertMatch({error, {topology, _, _}}, gen_server:call(terrain_topology_server, {put, Bad}))
         || Bad <- [garbage, #{}, #{tree => {node, x}, metric => ultrametric}, Tampered, {put, Tree}]],
        ?assertEqual({error, {topology, [], not_a_topology}}, terrain_topology_server:put(garbage)),
        Works(),
        ct:pal("~ts", [terrain_topology:format_error(element(2, terrain_topology_server:put(Tampered)))])
    after
        terrain_topology_server:forget()
    end.

remote_dynamic_attributes_that_hang_or_crash() ->
    [{doc, "On another node, a dynamic attribute that hangs and one that crashes answer undefined within their "
           "timeout; the node's other values come with them, well before the query's deadline, and the node "
           "keeps answering; eight requests for the hanging attribute sent at once (released together) are all "
           "answered in about one hang time, not eight: they do not queue behind each other."}].
remote_dynamic_attributes_that_hang_or_crash(Config) ->
    [Peer] = extra_peers([x_dyn], [{attrs, [{rack, r3},
                                            {hangs, {dynamic, {terrain_attr_SUITE, hang, []}, #{timeout => 300}}},
                                            {crashes, {dynamic, {terrain_attr_SUITE, crash, []}}}]}], Config),
    N = terrain_test_peers:node_of(Peer),
    {Ms, Result} = elapsed_ms(fun() -> terrain:attrs([N | all_nodes(Config)], [rack, hangs, crashes],
                                                      #{timeout => 3000}) end),
    ct:pal("hanging (300 ms) and crashing attributes on one of 9 nodes: ~b ms", [Ms]),
    ?assertEqual({ok, #{rack => r3, hangs => undefined, crashes => undefined}}, maps:get(N, Result)),
    ?assertEqual(9, length([ok || {ok, _} <- maps:values(Result)])),
    ?assert(Ms < 3000),
    #{dynamic_timeouts := T, dynamic_crashes := C} = terrain_test_peers:call(Peer, terrain, stats, []),
    ?assertEqual({1, 1}, {T, C}),
    %% several requests at once do not queue behind each other: Requesters processes
    %% wait for one release message, then each asks for the hanging attribute; all are
    %% done in about one hang time (300 ms), far from the Requesters hang times they
    %% would take one after another
    Requesters = 8,
    Self = self(),
    Pids = [spawn_link(fun() ->
                               receive go -> ok end,
                               {Each, R} = elapsed_ms(fun() -> terrain:attrs([N], [hangs], #{timeout => 5000}) end),
                               Self ! {done, self(), Each, R}
                       end) || _ <- lists:seq(1, Requesters)],
    T0 = erlang:monotonic_time(millisecond),
    [Pid ! go || Pid <- Pids],
    Done = [receive {done, Pid, Each, R} -> {Each, R} after 10000 -> ct:fail({no_answer, Pid}) end || Pid <- Pids],
    Together = erlang:monotonic_time(millisecond) - T0,
    ct:pal("~b requests at once for an attribute that hangs 300 ms: all done after ~b ms (each: ~w ms)",
           [Requesters, Together, [Each || {Each, _} <- Done]]),
    ?assertEqual([#{N => {ok, #{hangs => undefined}}} || _ <- Pids], [R || {_, R} <- Done]),
    ?assertEqual([], [Each || {Each, _} <- Done, Each < 300]),
    %% one after another would take 8 × 300 = 2400 ms; at once, one hang time plus the
    %% start of 8 processes on a busy machine
    ?assert(Together < 3 * 300),
    ?assertEqual([r3], [V || #{N := {ok, #{rack := V}}} <- [terrain:attrs([N], [rack])]]).

bad_configuration_on_a_remote_node() ->
    [{doc, "A node started with a bad attr_config file runs with its other attributes; load_attrs of a bad file "
           "there returns the error and changes nothing; the node answers throughout."}].
bad_configuration_on_a_remote_node(Config) ->
    Dir = ?config(priv_dir, Config),
    Bad = filename:join(Dir, "remote_bad.attrs"),
    ok = file:write_file(Bad, "[{fine, 1},\n {fine, 2}].\n"),
    [Peer] = extra_peers([x_badconf], [{attr_config, Bad}, {attrs, [{rack, r3}]}], Config),
    N = terrain_test_peers:node_of(Peer),
    ?assertEqual({ok, #{rack => r3, fine => undefined}}, maps:get(N, terrain:attrs([N], [rack, fine]))),
    Unknown = filename:join(Dir, "remote_unknown_kind.attrs"),
    ok = file:write_file(Unknown, "{fine, 1}.\n{worse, {dynamc, {erlang, node}}}.\n"),
    ?assertEqual({error, {config, Unknown, {line, 2}, {unknown_kind, worse, dynamc}}},
                 terrain_test_peers:call(Peer, terrain, load_attrs, [Unknown])),
    ?assertEqual({ok, #{rack => r3, fine => undefined, worse => undefined}},
                 maps:get(N, terrain:attrs([N], [rack, fine, worse]))).
