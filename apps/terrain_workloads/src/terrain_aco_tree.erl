%% @private
%% @doc The multi-level ML-ACO of RELEASE D3.5 §3.4: a tree of master → submasters →
%% colonies → ants.
%%
%% Shape: vertex degree P; with N nodes, the depth X is the largest with
%% 1 + P + … + P^(X−2) + P^X ≤ N (the master and the submasters down to level X−2 on
%% nodes of their own, the P^X colonies on theirs; a level-(X−1) submaster runs on the
%% node of its first colony). With fewer than 1 + P^2 nodes the tree has two levels:
%% the master and min(P, N−1) colonies — at least one.
%%
%% The master runs in the caller of {@link run/4}; run it on the master's node for its
%% placement to count.
%%
%% Run: every colony runs `local' generations of `ants' ants (processes on its node)
%% and reports its best schedule up; every level keeps the best of its children; the
%% master sends the global best back down and each colony updates its pheromone with
%% it; all repeated `global' times. Every colony's random state comes from the run's
%% seed and its own position, so a run with the same seed repeats exactly.
-module(terrain_aco_tree).

-export([shape/2,
         process_tree/1,
         run/4]).

-export_type([tree/0, options/0, result/0]).

-type tree() :: terrain_workloads:aco_tree().

-type options() :: #{ants := pos_integer(), global := pos_integer(), local := pos_integer(),
                     local_search := none | interchange | insertion, seed := integer(),
                     alpha := number(), beta := number(), rho := number(), q0 := number(),
                     timeout := pos_integer()}.

-type result() :: terrain_workloads:aco_result().

%% @doc The tree for `Nodes' nodes and degree `Degree'. Names are paths of child
%% indexes from the master (`[]').
-spec shape(pos_integer(), pos_integer()) -> tree().
shape(Nodes, Degree) when is_integer(Nodes), Nodes >= 1, is_integer(Degree), Degree >= 1 ->
    case depth(Nodes, Degree) of
        1 -> {master, [], [{colony, [I], []} || I <- lists:seq(1, max(1, min(Degree, Nodes - 1)))]};
        X -> build([], 0, X, Degree)
    end.

%% @doc The tree as a `terrain:process_tree()' for `terrain:place_tree/2' (names as in
%% the tree).
-spec process_tree(tree()) -> {vertex, [non_neg_integer()], list()}.
process_tree({_, Name, Children}) ->
    {vertex, Name, [process_tree(C) || C <- Children]}.

%% @doc Runs ML-ACO on `Instance' with the tree placed by `Assignment' (a name → node
%% map for every master, submaster and colony name; a missing name runs on this node).
-spec run(terrain_aco_instance:instance(), tree(), #{list() => node()}, options()) -> {ok, result()} | {error, term()}.
run(Instance, Tree, Assignment, Options) ->
    T0 = erlang:monotonic_time(),
    Self = self(),
    Params = maps:with([alpha, beta, rho, q0], Options),
    Tau0 = terrain_aco_ant:tau0(Instance, maps:get(ants, Options)),
    Config = #{instance => Instance, params => Params, tau0 => Tau0, options => Options, assignment => Assignment},
    {_, [], Children} = Tree,
    Monitored = [start_monitored(Child, Self, Config) || Child <- Children],
    Pids = [P || {P, _} <- Monitored],
    Deadline = erlang:monotonic_time(millisecond) + maps:get(timeout, Options),
    try
        ok = await_ready(Pids, Deadline),
        T1 = erlang:monotonic_time(),
        {Cost, Best} = loop(maps:get(global, Options), Pids, none, Deadline),
        T2 = erlang:monotonic_time(),
        {ok, #{best_cost => Cost, best => Best, setup_s => seconds(T1 - T0), main_s => seconds(T2 - T1)}}
    catch
        throw:Why -> {error, Why}
    after
        [begin exit(P, shutdown), erlang:demonitor(M, [flush]) end || {P, M} <- Monitored]
    end.

%%--------------------------------------------------------------------
%% Shape

depth(Nodes, P) ->
    depth(Nodes, P, 2, 1).

depth(Nodes, P, X, Best) ->
    Needed = lists:sum([pow(P, L) || L <- lists:seq(0, X - 2)]) + pow(P, X),
    case Needed =< Nodes andalso X < 32 of
        true -> depth(Nodes, P, X + 1, X);
        false -> Best
    end.

pow(P, L) -> round(math:pow(P, L)).

build(Name, Level, Depth, _P) when Level =:= Depth ->
    {colony, Name, []};
build(Name, Level, Depth, P) ->
    Kind = case Level of 0 -> master; _ -> submaster end,
    {Kind, Name, [build(Name ++ [I], Level + 1, Depth, P) || I <- lists:seq(1, P)]}.

%%--------------------------------------------------------------------
%% Processes

%% A child on its node: where the assignment says; a level-(X−1) submaster that it
%% does not name goes where its first colony goes. The master's children are monitored (the caller may not trap exits); below, the links
%% take a subtree down with its root.
start(Vertex, Parent, Config) ->
    spawn_link(node_of(Vertex, Config), fun() -> vertex(Vertex, Parent, Config) end).

start_monitored(Vertex, Parent, Config) ->
    spawn_opt(node_of(Vertex, Config), fun() -> vertex(Vertex, Parent, Config) end, [monitor]).

node_of({Kind, Name, Children}, #{assignment := Assignment}) ->
    Where = case {Kind, Children, maps:is_key(Name, Assignment)} of
                {submaster, [{colony, First, _} | _], false} -> First;
                _ -> Name
            end,
    maps:get(Where, Assignment, node()).

vertex({submaster, _Name, Children}, Parent, Config) ->
    Pids = [start(C, self(), Config) || C <- Children],
    [receive {ready, P} -> ok end || P <- Pids],
    Parent ! {ready, self()},
    submaster(Parent, Pids);
vertex({colony, Name, []}, Parent, #{instance := Instance, params := Params, tau0 := Tau0, options := Options}) ->
    Rand = rand:seed_s(exsss, {maps:get(seed, Options), erlang:phash2(Name), 16#ac0}),
    Tau = terrain_aco_ant:new_pheromone(maps:get(jobs, Instance), Tau0),
    Parent ! {ready, self()},
    colony(Parent, #{instance => Instance, params => Params, options => Options, tau => Tau, rand => Rand,
                     best => none}).

submaster(Parent, Pids) ->
    receive
        {run, Ref, Global} ->
            _ = [P ! {run, Ref, Global} || P <- Pids],
            Parent ! {best, Ref, self(), best_of([receive {best, Ref, P, B} -> B end || P <- Pids])},
            submaster(Parent, Pids)
    end.

colony(Parent, State) ->
    receive
        {run, Ref, Global} ->
            State1 = case Global of
                         none -> State;
                         {Cost, Best} ->
                             #{tau := Tau, params := Params} = State,
                             State#{tau := terrain_aco_ant:update(Tau, Best, Cost, Params), best := best_of([Global, maps:get(best, State)])}
                     end,
            State2 = generations(maps:get(local, maps:get(options, State1)), State1),
            Parent ! {best, Ref, self(), maps:get(best, State2)},
            colony(Parent, State2)
    end.

generations(0, State) ->
    State;
generations(K, #{instance := Instance, params := Params, options := Options, tau := Tau, rand := Rand} = State) ->
    Ants = maps:get(ants, Options),
    {Seed0, Rand1} = rand:uniform_s(1 bsl 56, Rand),
    Self = self(),
    Workers = [spawn_link(fun() ->
                                  R = rand:seed_s(exsss, {Seed0, I, K}),
                                  {S, _} = terrain_aco_ant:construct(Instance, Tau, Params, R),
                                  Self ! {ant, self(), terrain_aco_ant:cost(Instance, S), S}
                          end) || I <- lists:seq(1, Ants)],
    Schedules = [receive {ant, W, C, S} -> {C, S} end || W <- Workers],
    {IterCost, IterBest} = lists:min(Schedules),
    Improved = terrain_aco_ant:local_search(Instance, IterBest, maps:get(local_search, Options)),
    {IterCost1, IterBest1} = min({IterCost, IterBest}, swap(Improved)),
    Best = best_of([{IterCost1, IterBest1}, maps:get(best, State)]),
    {BestCost, BestSchedule} = Best,
    generations(K - 1, State#{tau := terrain_aco_ant:update(Tau, BestSchedule, BestCost, Params),
                              rand := Rand1, best := Best}).

swap({Schedule, Cost}) -> {Cost, Schedule}.

best_of(Bests) ->
    lists:min([B || B <- Bests, B =/= none]).

await_ready([], _Deadline) ->
    ok;
await_ready([P | Rest], Deadline) ->
    receive
        {ready, P} -> await_ready(Rest, Deadline);
        {'DOWN', _, process, _, Why} -> throw({aco_vertex_failed, Why})
    after max(0, Deadline - erlang:monotonic_time(millisecond)) ->
        throw(aco_timeout)
    end.

loop(Global, Pids, Best, Deadline) when Global > 0 ->
    Ref = make_ref(),
    _ = [P ! {run, Ref, Best} || P <- Pids],
    Bests = [receive
                 {best, Ref, P, B} -> B;
                 {'DOWN', _, process, _, Why} -> throw({aco_vertex_failed, Why})
             after max(0, Deadline - erlang:monotonic_time(millisecond)) ->
                 throw(aco_timeout)
             end || P <- Pids],
    loop(Global - 1, Pids, best_of([Best | Bests]), Deadline);
loop(0, _Pids, {Cost, Best}, _Deadline) ->
    {Cost, Best}.

seconds(Native) ->
    erlang:convert_time_unit(Native, native, microsecond) / 1.0e6.
