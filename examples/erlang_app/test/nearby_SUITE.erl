%% nearby on a cluster of four nodes: this one (the Common Test node) and three peers,
%% each running terrain with the same topology:
%%
%%   dc ── rack1: this node, A
%%      └─ rack2: B (with a GPU), C
-module(nearby_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([candidates_are_nearest_first/0, candidates_are_nearest_first/1,
         runs_where_the_attribute_is/0, runs_where_the_attribute_is/1,
         runs_near_when_asked/0, runs_near_when_asked/1,
         says_when_no_node_matches/0, says_when_no_node_matches/1]).

suite() -> [{timetrap, {seconds, 60}}].

all() -> [candidates_are_nearest_first, runs_where_the_attribute_is, runs_near_when_asked,
          says_when_no_node_matches].

init_per_suite(Config) ->
    %% this node must be distributed to start peers (a name of its own: runs never collide)
    {ok, _} = net_kernel:start(list_to_atom("nearby_ct_" ++ os:getpid()), #{name_domain => shortnames}),
    {ok, _} = application:ensure_all_started(terrain),
    %% the peers get this node's code: terrain's applications and nearby
    CodePath = lists:append([["-pa", D] || D <- code:get_path(), lists:prefix(code:root_dir(), D) =:= false]),
    Peers = [begin
                 %% not linked: the process that runs init_per_suite exits after it; controlled over
                 %% stdin/stdout, then connected as an ordinary (visible) node
                 {ok, Peer, Node} = peer:start(#{name => peer:random_name(nearby), connection => standard_io,
                                                 wait_boot => 60000,
                                                 args => ["-setcookie", atom_to_list(erlang:get_cookie())
                                                          | CodePath]}),
                 true = net_kernel:connect_node(Node),
                 {ok, _} = erpc:call(Node, application, ensure_all_started, [terrain], 10000),
                 {Peer, Node}
             end || _ <- [a, b, c]],
    [A, B, C] = [Node || {_, Node} <- Peers],
    Topology = {network, dc, [{network, rack1, [{node, node()}, {node, A}]},
                              {network, rack2, [{node, B}, {node, C}]}]},
    [ok = erpc:call(N, terrain, load_topology, [Topology], 10000) || N <- [node(), A, B, C]],
    ok = erpc:call(B, terrain, set_attr, [gpu, true, #{owner => persistent}], 10000),
    [{peers, Peers}, {a, A}, {b, B}, {c, C} | Config].

end_per_suite(Config) ->
    [peer:stop(Peer) || {Peer, _} <- ?config(peers, Config)],
    ok = application:stop(terrain),
    ok = net_kernel:stop().

candidates_are_nearest_first() ->
    [{doc, "Every node is a candidate of no predicates; this node first, then A in its rack, then B and C."}].
candidates_are_nearest_first(Config) ->
    [Here, A | Far] = nearby:candidates([]),
    ?assertEqual({node(), ?config(a, Config)}, {Here, A}),
    ?assertEqual(lists:sort([?config(b, Config), ?config(c, Config)]), lists:sort(Far)).

runs_where_the_attribute_is() ->
    [{doc, "A function asked to run on a GPU node runs on B, the only one, and returns its result."}].
runs_where_the_attribute_is(Config) ->
    B = ?config(b, Config),
    ?assertEqual([B], nearby:candidates([{gpu, true}])),
    ?assertEqual({ok, B, B}, nearby:run([{gpu, true}], {erlang, node, []})).

runs_near_when_asked() ->
    [{doc, "A function asked to run very near, on another node, runs on A."}].
runs_near_when_asked(Config) ->
    A = ?config(a, Config),
    ?assertEqual({ok, A, 6}, nearby:run([{level, eq, very_near}], {erlang, '*', [2, 3]})).

says_when_no_node_matches() ->
    [{doc, "No node is very near and has a GPU: run returns terrain's error, and spawns nothing."}].
says_when_no_node_matches(_Config) ->
    ?assertEqual([], nearby:candidates([{gpu, true}, {level, eq, very_near}])),
    ?assertEqual({error, {no_node, none}}, nearby:run([{gpu, true}, {level, eq, very_near}], {erlang, node, []})).
