%% Placed groups (terrain:start_placed/2) on peer nodes: members are placed by the
%% predicates and the spread, listed by terrain:placed/1, started again elsewhere when
%% their node is killed with kill -9, restarted when they exit, and moved (at a bounded
%% rate, opt-in) when a node joins. The group runs on the test node, which holds the
%% topology and is not a candidate (the predicates ask for role = worker).
-module(terrain_placed_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([hung_member_nodes_leave_exactly_k_members_one_per_slot/0,
         hung_member_nodes_leave_exactly_k_members_one_per_slot/1]).
-export([kill_9_of_a_node_with_3_of_8_restarts_them_on_matching_nodes/0,
         kill_9_of_a_node_with_3_of_8_restarts_them_on_matching_nodes/1,
         spread_over_racks_survives_a_killed_node/0, spread_over_racks_survives_a_killed_node/1,
         a_member_that_exits_is_restarted/0, a_member_that_exits_is_restarted/1,
         rebalance_moves_members_onto_a_joining_rack/0, rebalance_moves_members_onto_a_joining_rack/1,
         bad_specs_are_refused_with_a_sentence/0, bad_specs_are_refused_with_a_sentence/1,
         a_move_whose_old_member_dies_keeps_k_members/0, a_move_whose_old_member_dies_keeps_k_members/1,
         a_member_being_stopped_by_a_move_is_not_moved_again/0,
         a_member_being_stopped_by_a_move_is_not_moved_again/1,
         a_second_move_does_not_wait_for_the_first_replaced_member_to_stop/0,
         a_second_move_does_not_wait_for_the_first_replaced_member_to_stop/1]).
%% the start function of a_move_whose_old_member_dies_keeps_k_members' group, run on the peers
-export([slow_start/1]).

suite() -> [{timetrap, {minutes, 3}}].

all() ->
    [bad_specs_are_refused_with_a_sentence,
     kill_9_of_a_node_with_3_of_8_restarts_them_on_matching_nodes,
     spread_over_racks_survives_a_killed_node,
     a_member_that_exits_is_restarted,
     rebalance_moves_members_onto_a_joining_rack,
     hung_member_nodes_leave_exactly_k_members_one_per_slot,
     a_move_whose_old_member_dies_keeps_k_members,
     a_member_being_stopped_by_a_move_is_not_moved_again,
     a_second_move_does_not_wait_for_the_first_replaced_member_to_stop].

%% Racks of two nodes; the test node is outside every rack.
racks(bad_specs_are_refused_with_a_sentence) -> [];
racks(kill_9_of_a_node_with_3_of_8_restarts_them_on_matching_nodes) -> [{r1, [a1, a2]}, {r2, [b1]}, {r3, [c1]}];
racks(spread_over_racks_survives_a_killed_node) -> [{r1, [a1, a2]}, {r2, [b1, b2]}, {r3, [c1, c2]}, {r4, [d1, d2]}];
racks(a_member_that_exits_is_restarted) -> [{r1, [a1]}, {r2, [b1]}];
racks(rebalance_moves_members_onto_a_joining_rack) -> [{r1, [a1]}, {r2, [b1]}];
racks(hung_member_nodes_leave_exactly_k_members_one_per_slot) -> [];
racks(a_move_whose_old_member_dies_keeps_k_members) -> [{r1, [a1, a2]}];
racks(a_member_being_stopped_by_a_move_is_not_moved_again) -> [{r1, [a1, a2]}];
racks(a_second_move_does_not_wait_for_the_first_replaced_member_to_stop) -> [{r1, [a1, a2, a3]}].

%% The topology: the racks, and for the rebalance case the rack of the node that joins.
tree_racks(rebalance_moves_members_onto_a_joining_rack = Case) -> racks(Case) ++ [{r3, [c1]}];
tree_racks(a_move_whose_old_member_dies_keeps_k_members = Case) -> racks(Case) ++ [{r2, [b1]}];
tree_racks(a_member_being_stopped_by_a_move_is_not_moved_again = Case) -> racks(Case) ++ [{r2, [b1]}, {r3, [c1]}];
tree_racks(a_second_move_does_not_wait_for_the_first_replaced_member_to_stop = Case) ->
    racks(Case) ++ [{r2, [b1]}, {r3, [c1]}];
tree_racks(Case) -> racks(Case).

init_per_testcase(Case, Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    {ok, _} = application:ensure_all_started(terrain),
    Prefix = terrain_test_peers:unique_prefix(Case),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Full = fun(Short) -> list_to_atom(Prefix ++ atom_to_list(Short) ++ "@" ++ Host) end,
    Racks = racks(Case),
    Names = [Full(S) || {_, Ns} <- Racks, S <- Ns],
    Short = fun(Node) -> list_to_atom(lists:nthtail(length(Prefix), hd(string:split(atom_to_list(Node), "@")))) end,
    Peers = case Names of
                [] -> [];
                _ -> terrain_test_peers:start([list_to_atom(hd(string:split(atom_to_list(N), "@"))) || N <- Names],
                                              fun(_) -> [{attrs, [{role, worker}]}] end)
            end,
    [true = net_kernel:connect_node(N) || {_, N} <- Peers],
    Tree = {network, dc, [{network, Rack, [{node, Full(S)} || S <- Ns]} || {Rack, Ns} <- tree_racks(Case)]},
    _ = Racks =/= [] andalso (ok =:= terrain:load_topology(Tree)),
    [{peers, Peers}, {full, Full}, {short, Short}, {prefix, Prefix} | Config].

end_per_testcase(_Case, Config) ->
    [terrain:stop_placed(G) || G <- [g8, racks, exits, moves, slow, twice, spreads]],
    terrain_test_peers:stop(?config(peers, Config) ++ [P || {late_peers, Ps} <- Config, P <- Ps]).

%%--------------------------------------------------------------------

bad_specs_are_refused_with_a_sentence() ->
    [{doc, "start_placed/2 refuses a spec without start or count, a bad spread or a bad rebalance, with a sentence"}].
bad_specs_are_refused_with_a_sentence(_Config) ->
    {error, R1} = terrain:start_placed(x, #{count => 2}),
    ?assertEqual("the option start is required", lists:flatten(terrain:format_error(R1))),
    {error, R2} = terrain:start_placed(x, #{start => {gen_event, start, []}, count => 2, spread => {depth, -1}}),
    ?assertEqual({bad_option, spread, {depth, -1}}, R2),
    {error, R3} = terrain:start_placed(x, #{start => {gen_event, start, []}, count => 0}),
    ?assertEqual({bad_option, count, 0}, R3),
    {error, R4} = terrain:start_placed(x, #{start => {gen_event, start, []}, count => 1, rebalance => 5}),
    ?assertEqual({bad_option, rebalance, 5}, R4),
    ?assertEqual({error, {no_group, x}}, terrain:placed(x)).

kill_9_of_a_node_with_3_of_8_restarts_them_on_matching_nodes() ->
    [{doc, "8 members over 4 worker nodes: the node with 3 of them is killed with kill -9; all 8 run again, "
           "on the 3 surviving worker nodes (never on the test node, which does not match)"}].
kill_9_of_a_node_with_3_of_8_restarts_them_on_matching_nodes(Config) ->
    Peers = ?config(peers, Config),
    Workers = [N || {_, N} <- Peers],
    %% spread over nodes: 8 over 4 nodes is 2 each; make one node take 3 by occupying... the
    %% simplest honest setup: a node-level spread over 3 nodes first (3, 3, 2), then a fourth joins
    [Late | Early] = lists:reverse(Workers),
    ok = erpc:call(Late, terrain, set_attr, [role, spare, #{owner => persistent}]),
    {ok, _} = terrain:start_placed(g8, #{start => {gen_event, start, []}, count => 8, start_timeout => 60000,
                                         preds => [{role, eq, worker}]}),
    Before = terrain:placed(g8),
    ?assertEqual(8, length(Before)),
    PerNode = counts([N || {_, N} <- Before]),
    ct:pal("before: ~p", [PerNode]),
    ?assertEqual([2, 3, 3], lists:sort(maps:values(PerNode))),
    ?assertEqual([], maps:keys(PerNode) -- Early),
    ok = erpc:call(Late, terrain, set_attr, [role, worker, #{owner => persistent}]),
    [Victim | _] = [N || {N, 3} <- maps:to_list(PerNode)],
    OsPid = erpc:call(Victim, os, getpid, []),
    ok = net_kernel:monitor_nodes(true),
    Killed = erlang:monotonic_time(millisecond),
    _ = os:cmd("kill -9 " ++ OsPid),
    receive {nodedown, Victim} -> ok after 10000 -> ct:fail({no_nodedown, Victim}) end,
    Down = erlang:monotonic_time(millisecond),
    ok = terrain_test_peers:wait_until(fun() -> healed(g8, 8, Victim) end, 20000, "8 members again"),
    Healed = erlang:monotonic_time(millisecond),
    After = terrain:placed(g8),
    ct:pal("after kill -9 of ~p (nodedown ~b ms after the kill): ~p, healed ~b ms after nodedown",
           [Victim, Down - Killed, counts([N || {_, N} <- After]), Healed - Down]),
    ?assertEqual([], [N || {_, N} <- After, not lists:member(N, Workers -- [Victim])]),
    ?assert(lists:all(fun({P, N}) -> erpc:call(N, erlang, is_process_alive, [P]) end, After)),
    %% the survivors kept their processes: only the victim's 3 were started again
    ?assertEqual(5, length([M || {_, N} = M <- Before, N =/= Victim, lists:member(M, After)])).

spread_over_racks_survives_a_killed_node() ->
    [{doc, "4 members spread over 4 racks of 2 nodes ({depth, 1} under a root of racks): one per rack; kill -9 of "
           "a member's node restarts it on the other node of that rack, still one per rack; placed_groups/0 names "
           "each member's rack and counts one member placed again"}].
spread_over_racks_survives_a_killed_node(Config) ->
    Peers = ?config(peers, Config),
    RackOf = rack_of(Config),
    {ok, _} = terrain:start_placed(racks, #{start => {gen_event, start, []}, count => 4, start_timeout => 60000,
                                            preds => [{role, eq, worker}], spread => {depth, 1}}),
    Before = terrain:placed(racks),
    ?assertEqual([1, 1, 1, 1], lists:sort(maps:values(counts([RackOf(N) || {_, N} <- Before])))),
    {_, Victim} = hd(Before),
    OsPid = erpc:call(Victim, os, getpid, []),
    _ = os:cmd("kill -9 " ++ OsPid),
    ok = terrain_test_peers:wait_until(fun() -> healed(racks, 4, Victim) end, 20000, "4 members again"),
    After = terrain:placed(racks),
    ct:pal("racks before ~p~nafter ~p", [[{RackOf(N), N} || {_, N} <- Before], [{RackOf(N), N} || {_, N} <- After]]),
    ?assertEqual([1, 1, 1, 1], lists:sort(maps:values(counts([RackOf(N) || {_, N} <- After])))),
    ?assertEqual(4, length(Peers) div 2),
    %% placed_groups/0: the members with their racks by name, one node loss, no exit
    [#{name := racks, count := 4, members := Described, restarted := 0, replaced := 1}] = terrain:placed_groups(),
    ?assertEqual(lists:sort(After), lists:sort([{P, N} || #{pid := P, node := N} <- Described])),
    Short = ?config(short, Config),
    RackName = fun(N) -> hd([R || {R, Ns} <- racks(spread_over_racks_survives_a_killed_node), lists:member(Short(N), Ns)]) end,
    ?assertEqual(lists:sort([{N, RackName(N)} || {_, N} <- After]),
                 lists:sort([{N, D} || #{node := N, domain := D} <- Described])).

a_member_that_exits_is_restarted() ->
    [{doc, "a member that is killed is started again; placed/1 lists the new pid; placed_groups/0 counts one restart"}].
a_member_that_exits_is_restarted(_Config) ->
    {ok, _} = terrain:start_placed(exits, #{start => {gen_event, start, []}, count => 2, start_timeout => 60000,
                                            preds => [{role, eq, worker}], spread => {depth, 1}}),
    [{Pid, Node} | _] = Before = terrain:placed(exits),
    true = erpc:call(Node, erlang, exit, [Pid, kill]),
    ok = terrain_test_peers:wait_until(fun() ->
                                               After = terrain:placed(exits),
                                               length(After) =:= 2 andalso not lists:keymember(Pid, 1, After)
                                       end, 10000, "the member restarted"),
    ?assertEqual(lists:sort([N || {_, N} <- Before]), lists:sort([N || {_, N} <- terrain:placed(exits)])),
    [#{name := exits, restarted := 1, replaced := 0}] = terrain:placed_groups().

rebalance_moves_members_onto_a_joining_rack() ->
    [{doc, "with rebalance on, 3 members on 2 racks (2 + 1) move to 1 + 1 + 1 when a node of a third rack "
           "joins; a group without rebalance keeps its places"}].
rebalance_moves_members_onto_a_joining_rack(Config) ->
    RackOf = rack_of(Config),
    Spec = #{start => {gen_event, start, []}, count => 3, preds => [{role, eq, worker}], spread => {depth, 1},
             start_timeout => 60000},
    {ok, _} = terrain:start_placed(moves, Spec#{rebalance => 200}),
    {ok, _} = terrain:start_placed(exits, Spec),
    Fixed = terrain:placed(exits),
    ?assertEqual([1, 2], lists:sort(maps:values(counts([RackOf(N) || {_, N} <- terrain:placed(moves)])))),
    [{_, C1}] = Late = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "c1")],
                                                fun(_) -> [{attrs, [{role, worker}]}] end),
    true = net_kernel:connect_node(C1),
    ok = terrain_test_peers:wait_until(fun() ->
                                               M = terrain:placed(moves),
                                               length(M) =:= 3 andalso
                                                   lists:sort(maps:values(counts([RackOf(N) || {_, N} <- M]))) =:= [1, 1, 1]
                                       end, 10000, "one member per rack"),
    ct:pal("after the join: ~p", [[{RackOf(N), N} || {_, N} <- terrain:placed(moves)]]),
    ?assertEqual(Fixed, terrain:placed(exits)),
    terrain_test_peers:stop(Late).

a_move_whose_old_member_dies_keeps_k_members() ->
    [{doc, "a group of 2 with rebalance on rack r1 (a1, a2), members that take 2 s to start; b1 of rack r2 joins "
           "and a move onto it starts; while the new member starts, a1 and a2 are killed with kill -9: once every "
           "start is over, placed/1 lists exactly 2 members, both on b1, and b1 runs exactly 2 keepers (the move "
           "replaced a member that was gone: it is one of the 2, not a third)"}].
a_move_whose_old_member_dies_keeps_k_members(Config) ->
    Ms = 2000,
    Spec = #{start => {?MODULE, slow_start, [Ms]}, count => 2, preds => [{role, eq, worker}], spread => {depth, 1},
             start_timeout => 60000, rebalance => 200},
    {ok, _} = terrain:start_placed(slow, Spec),
    [_, _] = terrain:placed(slow),
    [{_, B1} = PB] = Late = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ "b1")],
                                                     fun(_) -> [{attrs, [{role, worker}]}] end),
    true = net_kernel:connect_node(B1),
    ok = terrain_test_peers:wait_until(fun() -> terrain_test_peers:call(PB, erlang, apply, [fun keepers/0, []]) =/= []
                                       end, 10000, "a move onto b1 under way"),
    OsPids = [terrain_test_peers:call(P, os, getpid, []) || P <- ?config(peers, Config)],
    _ = [os:cmd("kill -9 " ++ OsPid) || OsPid <- OsPids],
    %% every start begun now (the move's, and any placement after the kills) is over after 2 x Ms
    timer:sleep(2 * Ms + 1000),
    Members = terrain:placed(slow),
    Keepers = terrain_test_peers:call(PB, erlang, apply, [fun keepers/0, []]),
    ct:pal("after the kills: members ~p, keepers on b1 ~p", [Members, Keepers]),
    ?assertEqual([B1, B1], [N || {_, N} <- Members]),
    ?assertEqual(2, length(Keepers)),
    terrain_test_peers:stop(Late).

a_member_being_stopped_by_a_move_is_not_moved_again() ->
    [{doc, "a group of 2 with rebalance on rack r1 (a1, a2); its members (gen_event, which traps exits) take the "
           "keeper's 5 s shutdown to stop; b1 (rack r2) and c1 (rack r3) join: once the moves are over (8 s), "
           "placed/1 lists exactly 2 members on 2 racks and the 4 nodes run exactly 2 keepers (the member a move "
           "stops is not moved a second time, which left a third member)"}].
a_member_being_stopped_by_a_move_is_not_moved_again(Config) ->
    RackOf = rack_of(Config),
    Spec = #{start => {gen_event, start, []}, count => 2, preds => [{role, eq, worker}], spread => {depth, 1},
             start_timeout => 60000, rebalance => 200},
    {ok, _} = terrain:start_placed(twice, Spec),
    Late = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ S) || S <- ["b1", "c1"]],
                                    fun(_) -> [{attrs, [{role, worker}]}] end),
    [true = net_kernel:connect_node(N) || {_, N} <- Late],
    timer:sleep(8000),
    Members = terrain:placed(twice),
    Keepers = lists:append([terrain_test_peers:call(P, erlang, apply, [fun keepers/0, []])
                            || P <- ?config(peers, Config) ++ Late]),
    ct:pal("after the joins: members ~p, keepers ~p", [[{RackOf(N), N} || {_, N} <- Members], Keepers]),
    ?assertEqual(2, length(Members)),
    ?assertEqual(2, length(lists:usort([RackOf(N) || {_, N} <- Members]))),
    ?assertEqual(2, length(Keepers)),
    terrain_test_peers:stop(Late).

a_second_move_does_not_wait_for_the_first_replaced_member_to_stop() ->
    [{doc, "a group of 3 with rebalance on rack r1 (a1, a2, a3); its members (gen_event, which traps exits) take "
           "the keeper's 5 s shutdown to stop; b1 (rack r2) and c1 (rack r3) join: the group reaches one member "
           "per rack (two moves) while both members the moves replaced are still stopping (the second move did "
           "not wait for the first replaced member to be gone), and in the end the 5 nodes run exactly 3 keepers"}].
a_second_move_does_not_wait_for_the_first_replaced_member_to_stop(Config) ->
    RackOf = rack_of(Config),
    Spec = #{start => {gen_event, start, []}, count => 3, preds => [{role, eq, worker}], spread => {depth, 1},
             start_timeout => 60000, rebalance => 200},
    {ok, _} = terrain:start_placed(spreads, Spec),
    Before = terrain:placed(spreads),
    ?assertEqual([a, a, a], [RackOf(N) || {_, N} <- Before]),
    Late = terrain_test_peers:start([list_to_atom(?config(prefix, Config) ++ S) || S <- ["b1", "c1"]],
                                    fun(_) -> [{attrs, [{role, worker}]}] end),
    [true = net_kernel:connect_node(N) || {_, N} <- Late],
    ok = terrain_test_peers:wait_until(
           fun() -> lists:sort([RackOf(N) || {_, N} <- terrain:placed(spreads)]) =:= [a, b, c] end,
           15000, "one member per rack"),
    Replaced = [{P, N} || {P, N} <- Before, not lists:keymember(P, 1, terrain:placed(spreads))],
    Stopping = [P || {P, N} <- Replaced, erpc:call(N, erlang, is_process_alive, [P])],
    ct:pal("spread: ~p; replaced ~p, of which still stopping ~p",
           [[{RackOf(N), N} || {_, N} <- terrain:placed(spreads)], Replaced, Stopping]),
    ?assertEqual(2, length(Replaced)),
    ?assertEqual(2, length(Stopping)),
    ok = terrain_test_peers:wait_until(
           fun() -> length(lists:append([terrain_test_peers:call(P, erlang, apply, [fun keepers/0, []])
                                         || P <- ?config(peers, Config) ++ Late])) =:= 3
           end, 15000, "3 keepers once the replaced members are gone"),
    ?assertEqual(3, length(terrain:placed(spreads))),
    terrain_test_peers:stop(Late).

%% A member that takes `Ms' ms to start.
-spec slow_start(non_neg_integer()) -> {ok, pid()}.
slow_start(Ms) ->
    timer:sleep(Ms),
    gen_event:start().

%%--------------------------------------------------------------------

healed(Group, K, Victim) ->
    case terrain:placed(Group) of
        Members when length(Members) =:= K -> not lists:keymember(Victim, 2, Members);
        _ -> false
    end.

counts(Keys) ->
    lists:foldl(fun(K, Acc) -> maps:update_with(K, fun(C) -> C + 1 end, 1, Acc) end, #{}, Keys).

rack_of(Config) ->
    Short = ?config(short, Config),
    fun(Node) ->
            S = atom_to_list(Short(Node)),
            list_to_atom([hd(S)])
    end.

hung_member_nodes_leave_exactly_k_members_one_per_slot() ->
    [{doc, "A group of 3, one per node, runs on peer g over workers w1..w4 (net tick time 2 s everywhere). Three "
           "times a member's VM hangs (SIGSTOP) until the group has placed that member elsewhere, then resumes "
           "(SIGCONT): afterwards placed/1 lists exactly 3 live members on 3 different workers, the member left on "
           "a hung node is stopped once it resumes, and the workers run exactly 3 keepers (never two for a slot)"}].
hung_member_nodes_leave_exactly_k_members_one_per_slot(Config) ->
    Prefix = ?config(prefix, Config),
    Names = [list_to_atom(Prefix ++ S) || S <- ["g", "w1", "w2", "w3", "w4"]],
    Role = fun(Name) -> case lists:suffix("_g", atom_to_list(Name)) of
                            true -> [{attrs, [{role, group}]}];
                            false -> [{attrs, [{role, worker}]}]
                        end end,
    [G | Workers] = Peers = terrain_test_peers:start(Names, Role, fun(_) -> ["-kernel", "net_ticktime", "2"] end),
    [true = terrain_test_peers:call(G, net_kernel, connect_node, [terrain_test_peers:node_of(W)]) || W <- Workers],
    ByNode = maps:from_list([{terrain_test_peers:node_of(W), W} || W <- Workers]),
    {ok, _} = terrain_test_peers:call(G, terrain, start_placed,
                                      [storm, #{start => {gen_event, start, []}, count => 3, start_timeout => 30000,
                                                preds => [{role, eq, worker}]}]),
    Placed = fun() -> terrain_test_peers:call(G, terrain, placed, [storm]) end,
    Left = lists:map(
             fun(Round) ->
                     {Member, Node} = hd(Placed()),
                     OsPid = terrain_test_peers:call(maps:get(Node, ByNode), os, getpid, []),
                     _ = os:cmd("kill -STOP " ++ OsPid),
                     ok = terrain_test_peers:wait_until(
                            fun() -> M = Placed(), length(M) =:= 3 andalso not lists:keymember(Node, 2, M) end,
                            20000, "the hung node's member placed elsewhere"),
                     _ = os:cmd("kill -CONT " ++ OsPid),
                     ct:pal("round ~b: ~p hung and resumed; members now ~p", [Round, Node, Placed()]),
                     {Member, Node}
             end, [1, 2, 3]),
    Stable = fun() ->
                     M = Placed(),
                     Keepers = lists:append([terrain_test_peers:call(W, erlang, apply, [fun keepers/0, []])
                                             || W <- Workers]),
                     length(M) =:= 3 andalso length(lists:usort([N || {_, N} <- M])) =:= 3 andalso
                         lists:all(fun({P, N}) -> terrain_test_peers:call(maps:get(N, ByNode), erlang,
                                                                          is_process_alive, [P]) end, M) andalso
                         length(Keepers) =:= 3 andalso
                         not lists:any(fun({P, N}) -> terrain_test_peers:call(maps:get(N, ByNode), erlang,
                                                                              is_process_alive, [P]) end, Left -- M)
             end,
    ok = terrain_test_peers:wait_until(Stable, 20000, "3 members, 3 keepers, the hung nodes' members stopped"),
    ct:pal("after three hangs: ~p", [Placed()]),
    terrain_test_peers:stop(Peers).

%% The keepers running on this node.
keepers() ->
    [P || P <- processes(), erlang:process_info(P, initial_call) =:= {initial_call, {terrain_placed_keeper, init, 2}}].
