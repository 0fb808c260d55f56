%% @private
%% @doc The nemesis's schedule of a chaos run (`terrain chaos'): a pure function of
%% the seed, the spec's nodes and groups, the faults allowed, the duration and the
%% grace period. The same arguments give the same schedule, so a failing run is
%% reproduced by its seed (docs/RELIABILITY.md).
%%
%% Faults come in bursts: each burst lasts 1 to 4 s and holds 2 to 8 faults at
%% increasing times (fewer when some are not possible then); a quiet period of grace +
%% 2.2 to 3.5 s follows, in which the checker
%% expects the cluster to converge. Faults that last (a stopped VM, a partition, a
%% slow link) end within their burst. The schedule keeps a model of the cluster (the
%% nodes alive and their groups, the stopped ones, the partition), so that every
%% target is a node alive at that moment: kills and leaves keep at least three
%% quarters of the starting nodes, joins at most a quarter more (new names `j1',
%% `j2', ...). The protected node (the one that runs the placed groups) is never
%% killed, stopped, moved or stopped by a leave. A join may be followed at once by a
%% kill of the sequencer (the smallest node name alive): the sequencer dies during the
%% change.
-module(terrain_lab_chaos_schedule).

%% API
-export([plan/2,
         fault_ops/0,
         count_faults/1]).

-type fault() :: kill | stop | partition | slow | join | leave | move.
-type action() :: #{op := atom(), at := non_neg_integer(), atom() => term()}.
-type burst() :: #{burst := pos_integer(), at := non_neg_integer(), length := pos_integer(),
                   actions := [action()]}.
-type model() :: #{nodes := [#{name := atom(), path := [atom()], worker := boolean()}],
                   racks := [[atom()]],          % the lowest groups, as paths
                   protected := atom()}.         % never killed, stopped, moved or left
-type options() :: #{seed := integer(), duration_ms := pos_integer(), faults := [fault()],
                     grace_ms := non_neg_integer()}.
-export_type([fault/0, action/0, burst/0, model/0, options/0]).

-define(FIRST_MS, 5000).          % quiet time before the first burst

%%--------------------------------------------------------------------
%% API

%% @doc The bursts of a run of `duration_ms'.
-spec plan(model(), options()) -> [burst()].
plan(#{nodes := Nodes} = Model, #{seed := Seed} = Options) ->
    N0 = length(Nodes),
    State = #{live => maps:from_list([{Name, {P, W}} || #{name := Name, path := P, worker := W} <- Nodes]),
              joined => 0, floor => max(3, (3 * N0 + 3) div 4), ceiling => N0 + max(2, N0 div 4),
              rand => rand:seed_s(exsss, Seed)},
    bursts(1, ?FIRST_MS, Model, Options, State, []).

%% @doc The operations that inject a fault (the others end one: cont, heal, restore).
-spec fault_ops() -> [fault()].
fault_ops() ->
    [kill, stop, partition, slow, join, leave, move].

%% @doc The faults a schedule injects.
-spec count_faults([burst()]) -> non_neg_integer().
count_faults(Bursts) ->
    length([A || #{actions := As} <- Bursts, #{op := Op} = A <- As, lists:member(Op, fault_ops())]).

%%--------------------------------------------------------------------
%% Internal: bursts

bursts(I, At, Model, #{duration_ms := Duration, grace_ms := Grace} = Options, State, Acc) ->
    {Length, S1} = uniform(1000, 4000, maps:get(rand, State)),
    case At + Length > Duration of
        true ->
            lists:reverse(Acc);
        false ->
            {K, S2} = uniform(2, 8, S1),
            {Times, S3} = times(K, Length, S2),
            {Actions, State1} = faults(Times, Length, Model, Options, State#{rand := S3}, #{}, []),
            {Quiet, S4} = uniform(Grace + 2200, Grace + 3500, maps:get(rand, State1)),
            Burst = #{burst => I, at => At, length => Length,
                      actions => lists:sort(fun(A, B) -> maps:get(at, A) =< maps:get(at, B) end, Actions)},
            bursts(I + 1, At + Length + Quiet, Model, Options, State1#{rand := S4}, [Burst | Acc])
    end.

%% K increasing start times within the first 60 % of the burst.
times(K, Length, S) ->
    {Times, S1} = lists:mapfoldl(fun(_, Si) -> uniform(0, Length * 6 div 10, Si) end, S, lists:seq(1, K)),
    {lists:usort(Times), S1}.

%% The faults at `Times', in order; `Active' holds what lasts (stopped nodes with their
%% end, the partition's sides, the slow link).
faults([], _Length, _Model, _Options, State, _Active, Acc) ->
    {Acc, State};
faults([T | Times], Length, Model, #{faults := Allowed} = Options, State, Active, Acc) ->
    Active1 = maps:filter(fun(_, End) -> End > T end, Active),
    case [F || F <- Allowed, feasible(F, Model, State, Active1)] of
        [] ->
            faults(Times, Length, Model, Options, State, Active1, Acc);
        Kinds ->
            {Kind, S1} = pick(Kinds, maps:get(rand, State)),
            {New, State1, Active2} = fault(Kind, T, Length, Model, State#{rand := S1}, Active1),
            {New1, State2} = sequencer_kill(Kind, T, Allowed, Model, State1, Active2, New),
            faults(Times, Length, Model, Options, State2, Active2, New1 ++ Acc)
    end.

feasible(kill, Model, #{live := Live, floor := Floor}, Active) ->
    map_size(Live) > Floor andalso free(Model, Live, Active) =/= [];
feasible(leave, Model, #{live := Live, floor := Floor}, Active) ->
    map_size(Live) > Floor andalso not_alone(free(Model, Live, Active), Live) =/= [];
feasible(stop, Model, #{live := Live}, Active) ->
    not changing(Active) andalso free(Model, Live, Active) =/= [];
feasible(move, #{racks := Racks} = Model, #{live := Live}, Active) ->
    length(Racks) > 1 andalso not stopped(Active) andalso not_alone(free(Model, Live, Active), Live) =/= [];
feasible(partition, _Model, #{live := Live}, Active) ->
    map_size(Live) >= 2 andalso not is_map_key(partition, Active) andalso not stopped(Active);
feasible(slow, _Model, _State, Active) ->
    not is_map_key(slow, Active) andalso not stopped(Active);
feasible(join, _Model, #{live := Live, ceiling := Ceiling}, Active) ->
    map_size(Live) < Ceiling andalso not stopped(Active).

%% Nodes a kill, a stop, a leave or a move may take: alive, not protected, not stopped.
free(#{protected := Protected}, Live, Active) ->
    lists:sort([N || N <- maps:keys(Live), N =/= Protected, not is_map_key({stopped, N}, Active)]).

%% Nodes that are not the last of their group alive (a leave or a move of the last one
%% would take the group out of the spec).
not_alone(Nodes, Live) ->
    [N || N <- Nodes, length([M || {M, {P, _}} <- maps:to_list(Live), P =:= element(1, maps:get(N, Live))]) > 1].

%% A stopped VM answers no remote call: while one is stopped, nothing that must reach
%% every node (a partition, a link change, a join, a move) runs, and the other way round.
stopped(Active) ->
    lists:any(fun({stopped, _}) -> true; (_) -> false end, maps:keys(Active)).

changing(Active) ->
    is_map_key(partition, Active) orelse is_map_key(slow, Active).

%%--------------------------------------------------------------------
%% Internal: one fault

fault(Kind, T, _Length, Model, #{live := Live} = State, Active) when Kind =:= kill; Kind =:= leave ->
    Free = free(Model, Live, Active),
    {Node, S1} = pick(case Kind of kill -> Free; leave -> not_alone(Free, Live) end, maps:get(rand, State)),
    {[#{op => Kind, at => T, node => Node}], State#{live := maps:remove(Node, Live), rand := S1}, Active};
fault(stop, T, Length, Model, #{live := Live} = State, Active) ->
    {Node, S1} = pick(free(Model, Live, Active), maps:get(rand, State)),
    {End, S2} = uniform(T + 500, max(T + 500, Length), S1),
    {[#{op => stop, at => T, node => Node}, #{op => cont, at => End, node => Node}],
     State#{rand := S2}, Active#{{stopped, Node} => End}};
fault(partition, T, Length, _Model, State, Active) ->
    {{A, B}, S1} = sides(State),
    {End, S2} = uniform(T + 500, max(T + 500, Length), S1),
    {[#{op => partition, at => T, a => A, b => B}, #{op => heal, at => End}],
     State#{rand := S2}, Active#{partition => End}};
fault(slow, T, Length, #{racks := Racks}, State, Active) ->
    Groups = lists:usort([lists:sublist(R, D) || R <- Racks, D <- lists:seq(1, length(R))]),
    {Group, S1} = pick(Groups, maps:get(rand, State)),
    {End, S2} = uniform(T + 500, max(T + 500, Length), S1),
    {[#{op => slow, at => T, group => Group, factor => 10}, #{op => restore, at => End}],
     State#{rand := S2}, Active#{slow => End}};
fault(join, T, _Length, #{racks := Racks}, #{live := Live, joined := J} = State, Active) ->
    {Rack, S1} = pick(Racks, maps:get(rand, State)),
    {W, S2} = uniform(1, 4, S1),
    Node = list_to_atom("j" ++ integer_to_list(J + 1)),
    {[#{op => join, at => T, node => Node, path => Rack, worker => W > 1}],
     State#{live := Live#{Node => {Rack, W > 1}}, joined := J + 1, rand := S2}, Active};
fault(move, T, _Length, #{racks := Racks} = Model, #{live := Live} = State, Active) ->
    {Node, S1} = pick(not_alone(free(Model, Live, Active), Live), maps:get(rand, State)),
    {Path, Worker} = maps:get(Node, Live),
    {Rack, S2} = pick(Racks -- [Path], S1),
    {[#{op => move, at => T, node => Node, path => Rack}],
     State#{live := Live#{Node := {Rack, Worker}}, rand := S2}, Active}.

%% A partition: one top-level group against the rest (when there are two or more),
%% or arbitrary halves (side a takes 1 to n/2 nodes), each half the time.
sides(#{live := Live, rand := S}) ->
    Names = lists:sort(maps:keys(Live)),
    Sites = lists:usort([hd(P) || {P, _} <- maps:values(Live), P =/= []]),
    {Coin, S1} = uniform(1, 2, S),
    case Coin =:= 1 andalso length(Sites) >= 2 of
        true ->
            {Site, S2} = pick(Sites, S1),
            {A, B} = lists:partition(fun(N) -> hd(element(1, maps:get(N, Live)) ++ [none]) =:= Site end, Names),
            {{A, B}, S2};
        false ->
            {K, S2} = uniform(1, max(1, length(Names) div 2), S1),
            {Shuffled, S3} = shuffle(Names, S2),
            {A, B} = lists:split(K, Shuffled),
            {{lists:sort(A), lists:sort(B)}, S3}
    end.

%% After a join, in 40 % of cases when kills are allowed: the sequencer (the smallest
%% name alive) is killed at once, while it places the new node.
sequencer_kill(join, T, Allowed, #{protected := Protected}, #{live := Live, floor := Floor} = State, Active, New) ->
    {P, S1} = uniform(1, 10, maps:get(rand, State)),
    Sequencer = lists:min(maps:keys(Live)),
    case lists:member(kill, Allowed) andalso P =< 4 andalso map_size(Live) > Floor
        andalso Sequencer =/= Protected andalso not is_map_key({stopped, Sequencer}, Active) of
        true ->
            {[#{op => kill, at => T + 1, node => Sequencer, sequencer => true} | New],
             State#{live := maps:remove(Sequencer, Live), rand := S1}};
        false ->
            {New, State#{rand := S1}}
    end;
sequencer_kill(_Kind, _T, _Allowed, _Model, State, _Active, New) ->
    {New, State}.

%%--------------------------------------------------------------------
%% Internal: seeded randomness (explicit state)

uniform(Low, High, S) when High =< Low ->
    {Low, S};
uniform(Low, High, S) ->
    {X, S1} = rand:uniform_s(High - Low + 1, S),
    {Low + X - 1, S1}.

pick(List, S) ->
    {I, S1} = rand:uniform_s(length(List), S),
    {lists:nth(I, List), S1}.

shuffle(List, S) ->
    {Keyed, S1} = lists:mapfoldl(fun(X, Si) -> {R, Sj} = rand:uniform_s(Si), {{R, X}, Sj} end, S, List),
    {[X || {_, X} <- lists:sort(Keyed)], S1}.
