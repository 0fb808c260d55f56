%% @private
%% @doc The pure parts of ML-ACO for the single-machine total weighted tardiness
%% problem (SMTWTP): schedule cost, the EDD schedule, the modified-due-date (MDD)
%% heuristic, an ant's construction with the ACS rule, the pheromone matrix and its
%% update, and the local searches.
%%
%% The pheromone τ(i, j) is the desire to put job j at position i (a tuple of rows,
%% one per position). An ant fills the positions in order; at time T (the sum of the
%% processing times scheduled so far) job j has the MDD heuristic
%% η_j = 1 / max(T + p_j, d_j). With probability q0 it takes the job with the largest
%% τ(i, j)^α·η_j^β, else it draws one with probability proportional to that product
%% (the ACS rule of Dorigo &amp; Gambardella, as in the ML-ACO of RELEASE D3.5 §3.4).
-module(terrain_aco_ant).

-export([cost/2,
         edd/1,
         mdd/3,
         tau0/2,
         new_pheromone/2,
         update/4,
         construct/4,
         local_search/3]).

%% exports_not_used: edd/1 and mdd/3 are checked on their own by terrain_aco_tests.
-ignore_xref([{edd, 1}, {mdd, 3}]).

-export_type([params/0, pheromone/0, schedule/0]).

-type schedule() :: [pos_integer()].   % job numbers in processing order
-type pheromone() :: tuple().          % rows (positions) of columns (jobs), floats
-type params() :: #{alpha := number(), beta := number(), rho := number(), q0 := number()}.

%% @doc The total weighted tardiness of a schedule.
-spec cost(terrain_aco_instance:instance(), schedule()) -> non_neg_integer().
cost(#{p := P, w := W, d := D}, Schedule) ->
    {_, Total} = lists:foldl(fun(J, {T, Acc}) ->
                                     C = T + element(J, P),
                                     {C, Acc + element(J, W) * max(0, C - element(J, D))}
                             end, {0, 0}, Schedule),
    Total.

%% @doc The earliest-due-date schedule (ties by job number).
-spec edd(terrain_aco_instance:instance()) -> schedule().
edd(#{jobs := N, d := D}) ->
    [J || {_, J} <- lists:sort([{element(J, D), J} || J <- lists:seq(1, N)])].

%% @doc The MDD heuristic of job J at time T: 1 / max(T + p_J, d_J) (1 when both are 0).
-spec mdd(terrain_aco_instance:instance(), non_neg_integer(), pos_integer()) -> float().
mdd(#{p := P, d := D}, T, J) ->
    1 / max(1, max(T + element(J, P), element(J, D))).

%% @doc The initial pheromone: 1 / (Ants × T_EDD), with T_EDD at least 1.
-spec tau0(terrain_aco_instance:instance(), pos_integer()) -> float().
tau0(Instance, Ants) ->
    1 / (Ants * max(1, cost(Instance, edd(Instance)))).

%% @doc An N × N pheromone matrix filled with Tau0.
-spec new_pheromone(pos_integer(), float()) -> pheromone().
new_pheromone(N, Tau0) ->
    Row = erlang:make_tuple(N, Tau0),
    erlang:make_tuple(N, Row).

%% @doc The global update on the best schedule: τ(i, π_i) ← (1−ρ)τ(i, π_i) + ρ / T_best
%% (T_best at least 1, so that a schedule of cost 0 keeps the values finite).
-spec update(pheromone(), schedule(), non_neg_integer(), params()) -> pheromone().
update(Tau, Best, BestCost, #{rho := Rho}) ->
    Deposit = Rho / max(1, BestCost),
    {Updated, _} = lists:foldl(fun(J, {T, I}) ->
                                       Row = element(I, T),
                                       New = (1 - Rho) * element(J, Row) + Deposit,
                                       {setelement(I, T, setelement(J, Row, New)), I + 1}
                               end, {Tau, 1}, Best),
    Updated.

%% @doc One ant's schedule, and the new random state.
-spec construct(terrain_aco_instance:instance(), pheromone(), params(), rand:state()) -> {schedule(), rand:state()}.
construct(#{jobs := N, p := P} = Instance, Tau, #{alpha := Alpha, beta := Beta, q0 := Q0}, Rand0) ->
    {Schedule, _, _, Rand} =
        lists:foldl(fun(I, {Acc, T, Left, R0}) ->
                            Row = element(I, Tau),
                            Scored = [{J, pow(element(J, Row), Alpha) * pow(mdd(Instance, T, J), Beta)} || J <- Left],
                            {Q, R1} = rand:uniform_s(R0),
                            {J, R2} = case Q < Q0 of
                                          true -> {best(Scored), R1};
                                          false -> roulette(Scored, R1)
                                      end,
                            {[J | Acc], T + element(J, P), lists:delete(J, Left), R2}
                    end, {[], 0, lists:seq(1, N), Rand0}, lists:seq(1, N)),
    {lists:reverse(Schedule), Rand}.

%% @doc Local search until no move improves: `interchange' swaps adjacent jobs,
%% `insertion' moves one job to another position (the original's o1 and o2);
%% `none' returns the schedule as it is. Returns the schedule and its cost.
-spec local_search(terrain_aco_instance:instance(), schedule(), none | interchange | insertion) ->
          {schedule(), non_neg_integer()}.
local_search(Instance, Schedule, none) ->
    {Schedule, cost(Instance, Schedule)};
local_search(Instance, Schedule, Kind) ->
    improve(Instance, list_to_tuple(Schedule), cost(Instance, Schedule), Kind).

%%--------------------------------------------------------------------
%% Internal functions

pow(X, 1) -> X;
pow(X, 2) -> X * X;
pow(X, E) -> math:pow(X, E).

best([{J, S} | Rest]) ->
    element(1, lists:foldl(fun({J1, S1}, {_, S0}) when S1 > S0 -> {J1, S1};
                              (_, Acc) -> Acc
                           end, {J, S}, Rest)).

roulette(Scored, R0) ->
    Total = lists:sum([S || {_, S} <- Scored]),
    {U, R1} = rand:uniform_s(R0),
    {pick(Scored, U * Total), R1}.

pick([{J, _}], _) -> J;
pick([{J, S} | _], X) when X < S -> J;
pick([{_, S} | Rest], X) -> pick(Rest, X - S).

%% First improvement, scanning the neighbourhood's moves cyclically from where the last
%% improvement was found; stops after a whole cycle of moves without one.
improve(Instance, S, Cost, Kind) ->
    N = tuple_size(S),
    Moves = case Kind of
                interchange -> [{I, I + 1} || I <- lists:seq(1, N - 1)];
                insertion -> [{I, J} || I <- lists:seq(1, N), J <- lists:seq(1, N), I =/= J]
            end,
    scan(Instance, S, Cost, Kind, Moves, Moves, length(Moves)).

scan(_Instance, S, Cost, _Kind, _Left, _Moves, 0) ->
    {tuple_to_list(S), Cost};
scan(Instance, S, Cost, Kind, [], Moves, Untried) ->
    scan(Instance, S, Cost, Kind, Moves, Moves, Untried);
scan(Instance, S, Cost, Kind, [{I, J} | Left], Moves, Untried) ->
    S1 = move(Kind, S, I, J),
    case cost(Instance, tuple_to_list(S1)) of
        C1 when C1 < Cost -> scan(Instance, S1, C1, Kind, Left, Moves, length(Moves));
        _ -> scan(Instance, S, Cost, Kind, Left, Moves, Untried - 1)
    end.

move(interchange, S, I, J) ->
    setelement(I, setelement(J, S, element(I, S)), element(J, S));
move(insertion, S, I, J) ->
    L = tuple_to_list(S),
    Job = element(I, S),
    {Before, After} = lists:split(J - 1, lists:delete(Job, L)),
    list_to_tuple(Before ++ [Job | After]).
