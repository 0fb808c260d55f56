%% Benchmark of the live topology's change messages at 256 nodes (issue 36, item 5):
%% a synthetic three-level tree of 4 sites x 8 racks x 8 nodes (round trips 0.5 ms in a
%% rack, 5 ms between racks, 50 ms between sites, 3 % jitter); a 257th node is placed
%% with terrain:insert_node/4 (its round trips from that model), as the sequencer does
%% on a join, and the message every member gets for the join is sized with
%% erlang:term_to_binary/1 (goal: <= 2 KB), next to the whole-tree message it replaces.
%% Also the insertion's time (the computation only: on a cluster each pair measured
%% adds its round trips) and the pairs it measured. 20 joins, one into each of 20 racks.
-module(bench_live_delta).
-export([run/0]).

-define(SITES, 4).
-define(RACKS, 8).
-define(PER_RACK, 8).
-define(JOINS, 20).

run() ->
    Tree = tree(),
    256 = length(terrain_live_tree:nodes_of(Tree)),
    Results = [join(Tree, J) || J <- lists:seq(1, ?JOINS)],
    Right = length([1 || #{right := true} <- Results]),
    Sizes = lists:sort([B || #{bytes := B} <- Results]),
    Whole = lists:sort([B || #{whole := B} <- Results]),
    Times = lists:sort([T || #{us := T} <- Results]),
    Pairs = lists:sort([P || #{pairs := P} <- Results]),
    io:format("256-node tree, ~b joins: placed in their true rack ~b/~b~n", [?JOINS, Right, ?JOINS]),
    io:format("join message (delta), term_to_binary bytes: median ~b, max ~b (goal <= 2048)~n",
              [median(Sizes), lists:max(Sizes)]),
    io:format("the same change as a whole-tree message: median ~b bytes~n", [median(Whole)]),
    io:format("placement: median ~.1f ms, max ~.1f ms of computation; pairs measured median ~b, max ~b~n",
              [median(Times) / 1000, lists:max(Times) / 1000, median(Pairs), lists:max(Pairs)]).

join(Tree, J) ->
    S = 1 + J rem ?SITES,
    R = 1 + (J div ?SITES) rem ?RACKS,
    Node = name(S, R, 100 + J),
    Measure = fun(_New, Other) -> {ok, jitter(rtt({S, R}, place(Other)), Other)} end,
    T0 = erlang:monotonic_time(microsecond),
    {ok, New, Pairs} = terrain:insert_node(Node, Tree, Measure, #{name => Node}),
    Us = erlang:monotonic_time(microsecond) - T0,
    Change = {join, Node, siblings(New, Node), length(Pairs)},
    Delta = terrain_live:delta_message(J, Change, Tree, New),
    Whole = {terrain_live_change, J, Change, New},
    {ok, New} = terrain_live_tree:patch(Tree, element(6, Delta)),
    #{right => lists:member(name(S, R, 1), siblings(New, Node)), bytes => byte_size(term_to_binary(Delta)),
      whole => byte_size(term_to_binary(Whole)), us => Us, pairs => length(Pairs)}.

tree() ->
    {network, cluster, #{height => 50000},
     [{network, list_to_atom("s" ++ integer_to_list(S)), #{height => 5000},
       [{network, list_to_atom(lists:flatten(io_lib:format("s~br~b", [S, R]))), #{height => 500},
         [{node, name(S, R, I)} || I <- lists:seq(1, ?PER_RACK)]}
        || R <- lists:seq(1, ?RACKS)]}
      || S <- lists:seq(1, ?SITES)]}.

name(S, R, I) ->
    list_to_atom(lists:flatten(io_lib:format("lv_s~br~bn~b@vm", [S, R, I]))).

place(Node) ->
    {ok, [S, R, _], _} = io_lib:fread("lv_s~dr~dn~d@vm", atom_to_list(Node)),
    {S, R}.

rtt(Place, Place) -> 500;
rtt({S, _}, {S, _}) -> 5000;
rtt(_, _) -> 50000.

jitter(Rtt, Other) ->
    Rtt * (1 + (erlang:phash2(Other, 61) - 30) / 1000).

siblings({network, _, _, Children}, Node) ->
    case lists:member({node, Node}, Children) of
        true -> [N || {node, N} <- Children, N =/= Node];
        false -> lists:append([siblings(C, Node) || {network, _, _, _} = C <- Children])
    end.

median(L) -> lists:nth((length(L) + 1) div 2, L).
