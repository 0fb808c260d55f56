%% Distances in a real cluster: 12 peers in a 3-level topology (2 sites x 2 racks x 3
%% nodes) answering mixed attribute + distance + group queries, spawn_on when the
%% chosen node is down, the topology replaced while queries run, and place_tree.
-module(terrain_distance_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
%% run on the peers
-export([join_mesh/1, start_scope/1, query_loop/3]).
-export([mixed_queries_return_expected_sets/0, mixed_queries_return_expected_sets/1,
         explain_names_the_distance_or_attribute_predicate/0, explain_names_the_distance_or_attribute_predicate/1,
         spawn_on_skips_a_chosen_node_that_is_down/0, spawn_on_skips_a_chosen_node_that_is_down/1,
         topology_replaced_while_queries_run/0, topology_replaced_while_queries_run/1,
         place_tree_respects_predicates_and_beats_random/0, place_tree_respects_predicates_and_beats_random/1,
         nodes_missing_from_the_topology_are_anywhere/0, nodes_missing_from_the_topology_are_anywhere/1]).

-define(RACKS, [{s1, s1r1, [a1, a2, a3]}, {s1, s1r2, [b1, b2, b3]},
                {s2, s2r1, [c1, c2, c3]}, {s2, s2r2, [d1, d2, d3]}]).
-define(CORES, #{a1 => 8, a2 => 2, a3 => 4, b1 => 8, b2 => 1, b3 => 8,
                 c1 => 8, c2 => 2, c3 => 2, d1 => 16, d2 => 4, d3 => 1}).
-define(GPU, [a2, b3, c1, d1]).
-define(WORKERS, [a1, b1, c1, d1]).

suite() ->
    [{timetrap, {minutes, 4}}].

all() ->
    [mixed_queries_return_expected_sets, explain_names_the_distance_or_attribute_predicate,
     topology_replaced_while_queries_run, place_tree_respects_predicates_and_beats_random,
     nodes_missing_from_the_topology_are_anywhere,
     %% last: it stops d3
     spawn_on_skips_a_chosen_node_that_is_down].

init_per_suite(Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    Prefix = terrain_test_peers:unique_prefix(?MODULE),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Full = fun(Short) -> list_to_atom(Prefix ++ atom_to_list(Short) ++ "@" ++ Host) end,
    Shorts = lists:append([Ns || {_, _, Ns} <- ?RACKS]),
    Topology = topology(Full),
    Env = fun(Name) ->
                  Short = list_to_atom(lists:nthtail(length(Prefix), atom_to_list(Name))),
                  [{topology, Topology},
                   {attrs, [{cores, maps:get(Short, ?CORES)}] ++ [{gpu, true} || lists:member(Short, ?GPU)]}]
          end,
    Peers = terrain_test_peers:start([list_to_atom(Prefix ++ atom_to_list(S)) || S <- Shorts], Env),
    Nodes = [terrain_test_peers:node_of(P) || P <- Peers],
    %% A full mesh, and a pg scope on every node with ?WORKERS in group `workers'.
    [ok = terrain_test_peers:call(P, ?MODULE, join_mesh, [Nodes]) || P <- Peers],
    [ok = terrain_test_peers:call(P, ?MODULE, start_scope, [lists:member(S, ?WORKERS)])
     || {P, S} <- lists:zip(Peers, Shorts)],
    A1 = Full(a1),
    ok = terrain_test_peers:wait_until(
           fun() -> length(erpc:call(A1, pg, get_members, [tscope, workers], 5000)) =:= 4 end, 10000, "pg members"),
    [{peers, Peers}, {nodes, Nodes}, {full, Full}, {topology, Topology} | Config].

end_per_suite(Config) ->
    terrain_test_peers:stop(?config(peers, Config)).

%%--------------------------------------------------------------------
%% Helpers run on the peers

join_mesh(Nodes) ->
    [true = net_kernel:connect_node(N) || N <- Nodes],
    ok.

start_scope(Member) ->
    Parent = self(),
    %% A process that owns the scope (and, on workers, a member) for the suite's life.
    spawn(fun() ->
                  {ok, _} = pg:start(tscope),
                  _ = Member andalso pg:join(tscope, workers, self()) =:= ok,
                  Parent ! scoped,
                  receive stop -> ok end
          end),
    receive scoped -> ok after 5000 -> {error, scope_timeout} end.

%%--------------------------------------------------------------------

mixed_queries_return_expected_sets() ->
    [{doc, "Attribute, level, distance, subtree and group predicates in one choose_nodes call, "
           "evaluated at a1, return the sets the topology and attributes imply."}].
mixed_queries_return_expected_sets(Config) ->
    F = ?config(full, Config),
    Nodes = ?config(nodes, Config),
    At = fun(Preds, Opts) -> erpc:call(F(a1), terrain, choose_nodes, [Nodes, Preds, Opts], 10000) end,
    Names = fun(Shorts) -> [F(S) || S <- Shorts] end,
    %% near a1 (its rack and its site) with at least 4 cores
    ?assertEqual(Names([a1, a3, b1, b3]), At([{level, le, near}, {cores, ge, 4}], #{})),
    %% in rack s2r2 or with a GPU, and at least 4 cores
    ?assertEqual(Names([b3, c1, d1, d2]), At([{'or', [{in_subtree, s2r2}, {gpu, true}]}, {cores, ge, 4}], #{})),
    %% pg workers farther than a1's rack
    ?assertEqual(Names([b1, c1, d1]), At([{group, tscope, workers}, {dist, gt, 0.25}], #{})),
    %% GPUs, nearest first
    ?assertEqual(Names([a2, b3, c1, d1]), At([{gpu, true}], #{order_by => distance})),
    %% around c1 rather than the caller
    ?assertEqual(Names([c1, c2, c3, d1, d2, d3]), At([{dist, F(c1), le, 0.5}], #{})),
    %% not in a1's site, complement among the nodes with a level
    ?assertEqual(Names([c1, c2, c3, d1, d2, d3]), At([{'not', {level, le, far}}], #{})),
    %% one call that mixes everything
    ?assertEqual(Names([c1, d1]), At([{group, tscope, workers}, {level, eq, very_far}, {cores, high}, {gpu, true}], #{})),
    ?assertEqual(0.5, erpc:call(F(a1), terrain, distance, [F(a1), F(b2)], 5000)),
    ?assertEqual(very_far, erpc:call(F(a1), terrain, level, [F(a1), F(d2)], 5000)),
    ?assertEqual(Names([a1, a2, a3, b1, b2, b3]), erpc:call(F(a1), terrain, disc, [F(a1), 0.5], 5000)).

explain_names_the_distance_or_attribute_predicate() ->
    [{doc, "An empty result explains which predicate removed the last candidates, with their levels."}].
explain_names_the_distance_or_attribute_predicate(Config) ->
    F = ?config(full, Config),
    {[], Why} = erpc:call(F(a1), terrain, choose_nodes,
                          [?config(nodes, Config), [{level, eq, very_near}, {cores, ge, 16}], #{explain => true}], 10000),
    ?assertMatch(#{removed_by := {cores, ge, 16}, steps := [{{level, eq, very_near}, 2}, {{cores, ge, 16}, 0}]}, Why),
    Text = lists:flatten(io_lib:format("~ts", [terrain:format_explanation(Why)])),
    ct:pal("~ts", [Text]),
    ?assertNotEqual(nomatch, string:find(Text, "cores")),
    {[], Why2} = erpc:call(F(a1), terrain, choose_nodes,
                           [?config(nodes, Config), [{cores, ge, 16}, {level, le, near}], #{explain => true}], 10000),
    ?assertMatch(#{removed_by := {level, le, near}}, Why2),
    ?assertEqual(#{F(d1) => #{level => very_far}}, maps:get(last, Why2)).

topology_replaced_while_queries_run() ->
    [{doc, "Queries running while the topology is replaced 60 times always see one whole topology "
           "(the old or the new), never a mix or a crash."}].
topology_replaced_while_queries_run(Config) ->
    F = ?config(full, Config),
    Nodes = ?config(nodes, Config),
    T1 = ?config(topology, Config),
    %% T2 moves a1 into rack s2r1
    T2 = topology(F, [{s1, s1r1, [a2, a3]}, {s1, s1r2, [b1, b2, b3]},
                      {s2, s2r1, [a1, c1, c2, c3]}, {s2, s2r2, [d1, d2, d3]}]),
    R1 = [F(a1), F(a2), F(a3)],
    R2 = [F(a1), F(c1), F(c2), F(c3)],
    Results = erpc:call(F(a1), fun() ->
                                       Self = self(),
                                       Querier = spawn_link(fun() -> Self ! {results, query_loop(Nodes, 400, [])} end),
                                       [ok = terrain:load_topology(case I rem 2 of 0 -> T1; 1 -> T2 end)
                                        || I <- lists:seq(1, 60)],
                                       _ = Querier,
                                       receive {results, R} -> R after 60000 -> timeout end
                               end, 90000),
    ?assert(is_list(Results)),
    ?assertEqual(400, length(Results)),
    ?assertEqual([], [R || R <- Results, R =/= R1, R =/= R2]),
    ct:pal("results under T1: ~b, under T2: ~b", [length([x || R <- Results, R =:= R1]), length([x || R <- Results, R =:= R2])]),
    %% the last load (60, even) was T1
    ?assertEqual(R1, erpc:call(F(a1), terrain, choose_nodes, [Nodes, [{level, le, very_near}]], 5000)).

query_loop(_Nodes, 0, Acc) ->
    lists:reverse(Acc);
query_loop(Nodes, N, Acc) ->
    query_loop(Nodes, N - 1, [terrain:choose_nodes(Nodes, [{level, le, very_near}]) | Acc]).

place_tree_respects_predicates_and_beats_random() ->
    [{doc, "place_tree at a1: leaves that need 2 cores avoid b2 and d3, every subtree stays in one "
           "rack, and the cost is below random placement's."}].
place_tree_respects_predicates_and_beats_random(Config) ->
    F = ?config(full, Config),
    Tree = {vertex, root, [{vertex, {sub, S}, [{vertex, {leaf, S, L}, [{cores, ge, 2}], []} || L <- [1, 2]]}
                           || S <- [1, 2, 3, 4]]},
    {ok, #{assignment := A, cost := Cost, random := Random}} =
        erpc:call(F(a1), terrain, place_tree, [Tree, #{candidates => ?config(nodes, Config)}], 10000),
    ct:pal("cost ~p~nrandom ~p~nassignment ~p", [Cost, Random, A]),
    ?assertEqual(13, map_size(A)),
    [?assertNot(lists:member(maps:get({leaf, S, L}, A), [F(b2), F(d3)])) || S <- [1, 2, 3, 4], L <- [1, 2]],
    [?assert(erpc:call(F(a1), terrain, distance, [maps:get({sub, S}, A), maps:get({leaf, S, L}, A)], 5000) =< 0.25)
     || S <- [1, 2, 3, 4], L <- [1, 2]],
    ?assert(maps:get(sum, Cost) < maps:get(sum, Random)),
    ?assertEqual(1, maps:get(max_slow, Cost)).

nodes_missing_from_the_topology_are_anywhere() ->
    [{doc, "The CT node is not in the topology: from a1 it is anywhere, beyond every distance; "
           "a distance predicate leaves it out, and nothing crashes."}].
nodes_missing_from_the_topology_are_anywhere(Config) ->
    F = ?config(full, Config),
    ?assertEqual(anywhere, erpc:call(F(a1), terrain, level, [F(a1), node()], 5000)),
    ?assertEqual(2.0, erpc:call(F(a1), terrain, distance, [F(a1), node()], 5000)),
    ?assertEqual([F(a1)], erpc:call(F(a1), terrain, choose_nodes, [[F(a1), node()], [{dist, le, 1}]], 5000)),
    ?assertEqual([node()], erpc:call(F(a1), terrain, choose_nodes, [[F(a1), node()], [{level, eq, anywhere}]], 5000)).

spawn_on_skips_a_chosen_node_that_is_down() ->
    [{doc, "spawn_on picks d3 first, but d3 went down after the choice's inputs were known: the spawn "
           "fails there with noconnection and the process lands on the next match."}].
spawn_on_skips_a_chosen_node_that_is_down(Config) ->
    F = ?config(full, Config),
    [D3Peer] = [P || P <- ?config(peers, Config), terrain_test_peers:node_of(P) =:= F(d3)],
    terrain_test_peers:stop([D3Peer]),
    %% gone for a1 too (peer:stop can return while the VM is still halting)
    ok = terrain_test_peers:wait_until(fun() -> erpc:call(F(a1), net_adm, ping, [F(d3)], 5000) =:= pang end,
                                       20000, "d3 unreachable from a1"),
    %% a topology-only predicate needs no attribute fetch, so d3 stays a candidate
    Result = erpc:call(F(a1), terrain, spawn_on,
                       [[{in_subtree, s2r2}], {timer, sleep, [60000]}, #{candidates => [F(d3), F(d2)], pick => first}],
                       10000),
    ct:pal("~p", [Result]),
    {ok, Pid, Node} = Result,
    ?assertEqual(F(d2), Node),
    ?assertEqual(F(d2), node(Pid)),
    ?assert(erpc:call(F(d2), erlang, is_process_alive, [Pid], 5000)),
    %% only dead nodes: an error that names them
    {error, Why} = erpc:call(F(a1), terrain, spawn_on, [[{in_subtree, s2r2}], {timer, sleep, [1]},
                                                         #{candidates => [F(d3)], attempts => 2}], 10000),
    ?assertEqual({no_node, {tried, [{F(d3), noconnection}]}}, Why),
    exit(Pid, kill).

%%--------------------------------------------------------------------

topology(Full) ->
    topology(Full, ?RACKS).

topology(Full, Racks) ->
    Sites = lists:usort([S || {S, _, _} <- Racks]),
    {network, dc, [{network, S, [{network, R, [{node, Full(N)} || N <- Ns]} || {S1, R, Ns} <- Racks, S1 =:= S]}
                   || S <- Sites]}.
