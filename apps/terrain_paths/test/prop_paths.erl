%% Properties of the collective operations (terrain_paths) over 1–64 member
%% processes spread over this node and two local peer nodes, with a topology that
%% puts the peers in another network than this node (so `hierarchical' has levels).
-module(prop_paths).
-include_lib("proper/include/proper.hrl").

-export([prop_allreduce_is_the_fold/0,
         prop_non_commutative_keeps_rank_order/0,
         prop_operations_agree_with_their_definition/0,
         prop_floats_within_rounding_of_the_fold/0,
         prop_killed_member_gives_member_down/0]).

-define(ALGORITHMS, [flat, binomial, recursive_doubling, ring, rabenseifner, hierarchical, auto]).

prop_allreduce_is_the_fold() ->
    with_nodes(
      ?FORALL({Values, Algorithm, Op}, {non_empty_values(integer()), oneof(?ALGORITHMS), oneof([sum, min, max])},
              begin
                  Expected = fold(Op, Values),
                  Results = on_members(Values, Algorithm,
                                       fun(C, R) -> terrain_paths:allreduce(C, lists:nth(R + 1, Values), Op) end),
                  ?WHENFAIL(io:format("~p ~p: ~p~n", [Algorithm, Op, Results]),
                            lists:all(fun(X) -> X =:= {ok, Expected} end, Results))
              end)).

%% 2 × 2 integer matrices multiply associatively but not commutatively; vectors of
%% them (element-wise) exercise ring's and rabenseifner's fallbacks too.
prop_non_commutative_keeps_rank_order() ->
    with_nodes(
      ?FORALL({Values, Algorithm}, {non_empty_values(matrix()), oneof(?ALGORITHMS)},
              begin
                  Expected = lists:foldl(fun(V, Acc) -> multiply(Acc, V) end, hd(Values), tl(Values)),
                  Results = on_members(Values, Algorithm,
                                       fun(C, R) -> terrain_paths:allreduce(C, lists:nth(R + 1, Values),
                                                                            fun multiply/2) end),
                  ?WHENFAIL(io:format("~p: ~p~n", [Algorithm, Results]),
                            lists:all(fun(X) -> X =:= {ok, Expected} end, Results))
              end)).

prop_operations_agree_with_their_definition() ->
    with_nodes(
      ?FORALL({Values, Algorithm}, {non_empty_values(integer()), oneof(?ALGORITHMS)},
              begin
                  N = length(Values),
                  Results = on_members(Values, Algorithm,
                                       fun(C, R) ->
                                               V = lists:nth(R + 1, Values),
                                               [terrain_paths:reduce(C, V, sum),
                                                terrain_paths:broadcast(C, {from, R}),
                                                terrain_paths:gather(C, V),
                                                terrain_paths:allgather(C, V),
                                                terrain_paths:scatter(C, [{to, I} || I <- lists:seq(0, N - 1)]),
                                                terrain_paths:barrier(C),
                                                terrain_paths:allreduce(C, [V, 2 * V, 3 * V], sum)]
                                       end),
                  Sum = lists:sum(Values),
                  Expected = fun(0) -> [{ok, Sum}, {ok, {from, 0}}, {ok, Values}, {ok, Values}, {ok, {to, 0}}, ok,
                                        {ok, [Sum, 2 * Sum, 3 * Sum]}];
                                (R) -> [ok, {ok, {from, 0}}, ok, {ok, Values}, {ok, {to, R}}, ok,
                                        {ok, [Sum, 2 * Sum, 3 * Sum]}]
                             end,
                  ?WHENFAIL(io:format("~p: ~p~n", [Algorithm, Results]),
                            Results =:= [Expected(R) || R <- lists:seq(0, N - 1)])
              end)).

%% Floats: flat folds at the root in rank order, so it is the fold exactly; every
%% other algorithm groups the additions differently and is within rounding.
prop_floats_within_rounding_of_the_fold() ->
    with_nodes(
      ?FORALL({Values, Algorithm}, {non_empty_values(float()), oneof(?ALGORITHMS)},
              begin
                  Expected = fold(sum, Values),
                  Results = on_members(Values, Algorithm,
                                       fun(C, R) -> terrain_paths:allreduce(C, lists:nth(R + 1, Values), sum) end),
                  Bound = 1.0e-12 * length(Values) * lists:sum([abs(V) || V <- Values]) + 1.0e-300,
                  Close = fun({ok, X}) -> abs(X - Expected) =< Bound; (_) -> false end,
                  ?WHENFAIL(io:format("~p: ~p vs ~p~n", [Algorithm, Results, Expected]),
                            lists:all(Close, Results)
                            andalso (Algorithm =/= flat orelse lists:all(fun(X) -> X =:= {ok, Expected} end, Results)))
              end)).

%% One member is killed while the others loop on allreduce: every survivor returns
%% {error, {member_down, Rank, Node}} naming it, long before the 30 s deadline.
prop_killed_member_gives_member_down() ->
    with_nodes(
      ?FORALL({N, Algorithm, KillAfterMs}, {range(2, 24), oneof(?ALGORITHMS), range(0, 20)},
              ?FORALL(Victim, range(0, N - 1),
                      begin
                          Members = terrain_paths_test_members:start(N, nodes_used()),
                          {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => Algorithm,
                                                                             timeout => 30000,
                                                                             topology => topology()}),
                          Loop = fun Loop(C, R, Count) ->
                                         case terrain_paths:allreduce(C, R, sum) of
                                             {ok, _} -> Loop(C, R, Count + 1);
                                             Error -> Error
                                         end
                                 end,
                          Self = self(),
                          Killer = spawn(fun() ->
                                                 receive go -> ok end,
                                                 timer:sleep(KillAfterMs),
                                                 exit(lists:nth(Victim + 1, Members), kill),
                                                 Self ! killed
                                         end),
                          Started = erlang:monotonic_time(millisecond),
                          Killer ! go,
                          Results = terrain_paths_test_members:run(Members, Comm, fun(C, R) -> Loop(C, R, 0) end, 10000),
                          Elapsed = erlang:monotonic_time(millisecond) - Started,
                          receive killed -> ok end,
                          terrain_paths_test_members:stop(Members),
                          VictimNode = node(lists:nth(Victim + 1, Members)),
                          Survivors = [X || {R, X} <- lists:zip(lists:seq(0, N - 1), Results), R =/= Victim],
                          ?WHENFAIL(io:format("~p victim ~p after ~p ms: ~p (~p ms)~n",
                                              [Algorithm, Victim, KillAfterMs, Results, Elapsed]),
                                    lists:all(fun(X) -> X =:= {error, {member_down, Victim, VictimNode}} end, Survivors)
                                    andalso Elapsed < 10000)
                      end))).

%%--------------------------------------------------------------------
%% Helpers

non_empty_values(Gen) ->
    ?LET(N, range(1, 64), vector(N, Gen)).

matrix() ->
    {range(-3, 3), range(-3, 3), range(-3, 3), range(-3, 3)}.

multiply({A, B, C, D}, {E, F, G, H}) ->
    {A * E + B * G, A * F + B * H, C * E + D * G, C * F + D * H}.

fold(Op, [First | Rest]) ->
    lists:foldl(fun(V, Acc) -> terrain_paths_op:combine(Op, Acc, V) end, First, Rest).

on_members(Values, Algorithm, Script) ->
    Members = terrain_paths_test_members:start(length(Values), nodes_used()),
    try
        {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => Algorithm, topology => topology()}),
        terrain_paths_test_members:run(Members, Comm, Script)
    after
        terrain_paths_test_members:stop(Members)
    end.

nodes_used() ->
    [node() | [N || {_, N} <- persistent_term:get({?MODULE, peers}, [])]].

%% This node in one network, the two peers in another.
topology() ->
    {network, top, [{network, here, [{node, node()}]},
                    {network, there, [{node, N} || {_, N} <- persistent_term:get({?MODULE, peers}, [])]}]}.

with_nodes(Property) ->
    ?SETUP(fun() ->
                   terrain_test_peers:ensure_distributed(),
                   Prefix = terrain_test_peers:unique_prefix(prop_paths),
                   Peers = terrain_test_peers:start([list_to_atom(Prefix ++ integer_to_list(I)) || I <- [1, 2]], []),
                   persistent_term:put({?MODULE, peers}, Peers),
                   fun() ->
                           terrain_test_peers:stop(Peers),
                           persistent_term:erase({?MODULE, peers}),
                           ok
                   end
           end, Property).
