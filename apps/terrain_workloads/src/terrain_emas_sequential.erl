%% @private
%% @doc The sequential EMAS model: one process steps every island in turn
%% (erlang-mas's `mas_sequential'), moving each step's emigrants to their
%% destination islands after the step. With `steps' the run is a pure function of
%% the parameters and the seed.
-module(terrain_emas_sequential).

%% API
-export([run/2]).

%% exports_not_used: run/2 is called through terrain_emas_run's model table (Module:run/2).
-ignore_xref([{run, 2}]).

-record(island, {id :: pos_integer(),
                 agents :: [terrain_emas:agent()],
                 rand :: rand:state(),
                 destinations :: terrain_emas:destinations(),
                 counts :: terrain_emas:counts(),
                 best :: float() | undefined,
                 initial_best :: float()}).

%% @doc Runs the model in the calling process (the coordinator).
-spec run(terrain_emas:params(), terrain_emas_run:context()) -> terrain_emas_run:final().
run(#{islands := N, population := P, seed := Seed, topology := Topology} = Params, Ctx) ->
    Nodes = list_to_tuple(lists:duplicate(N, node())),
    Islands = [begin
                   {Agents, S} = population(P, Params, terrain_emas:island_seed(Seed, I), []),
                   Best = terrain_emas:best(Agents),
                   #island{id = I, agents = Agents, rand = S, counts = terrain_emas_run:zero_counts(),
                           destinations = terrain_emas:destinations(Topology, I, {Nodes, fun terrain:level/2}),
                           best = Best, initial_best = Best}
               end || I <- lists:seq(1, N)],
    terrain_emas_run:register_reporters(Ctx, [self()]),
    Until = case Ctx of
                #{steps := undefined, duration_ms := D} -> {deadline, erlang:monotonic_time(millisecond) + D};
                #{steps := Limit} -> {steps, Limit}
            end,
    {Final, Steps} = loop(Islands, Params, Until, 0),
    #{islands => [#{island => I, node => node(), agents => A, counts => C, best => B, initial_best => IB,
                    steps => Steps}
                  || #island{id = I, agents = A, counts = C, best = B, initial_best = IB} <- Final]}.

population(0, _Params, S, Acc) -> {Acc, S};
population(K, Params, S0, Acc) ->
    {A, S1} = terrain_emas:new_agent(Params, S0),
    population(K - 1, Params, S1, [A | Acc]).

loop(Islands, #{time_check_interval := Every} = Params, Until, Done) ->
    answer_reports(Islands),
    case finished(Until, Done, Every) of
        true ->
            {Islands, Done};
        false ->
            {Stepped, Migrants} = lists:mapfoldl(fun(I, Acc) -> step(I, Params, Acc) end, [], Islands),
            loop(arrive(lists:reverse(Migrants), Stepped), Params, Until, Done + 1)
    end.

finished({steps, Steps}, Done, _Every) -> Done >= Steps;
finished({deadline, Deadline}, Done, Every) ->
    Done rem Every =:= 0 andalso erlang:monotonic_time(millisecond) >= Deadline.

step(#island{agents = Agents, rand = S0, counts = Counts, best = Best, destinations = Ds} = I, Params, Acc) ->
    {New, Emigrants, StepCounts, S1} = terrain_emas:step(Agents, Params, S0),
    {Moves, S2} = lists:mapfoldl(fun(A, S) ->
                                         {To, S3} = terrain_emas:destination(Ds, S),
                                         {{To, A}, S3}
                                 end, S1, Emigrants),
    {I#island{agents = New, rand = S2, counts = terrain_emas_run:add_counts(Counts, StepCounts),
              best = max_best(Best, terrain_emas:best(New))},
     lists:reverse(Moves, Acc)}.

arrive([], Islands) ->
    Islands;
arrive(Moves, Islands) ->
    [case [A || {To, A} <- Moves, To =:= Id] of
         [] -> I;
         In -> I#island{agents = Agents ++ In, best = max_best(Best, terrain_emas:best(In))}
     end || #island{id = Id, agents = Agents, best = Best} = I <- Islands].

max_best(undefined, B) -> B;
max_best(A, undefined) -> A;
max_best(A, B) -> max(A, B).

answer_reports(Islands) ->
    receive
        {emas_report, Sampler, Ref} ->
            terrain_emas_run:answer_report(Sampler, Ref, [{Id, C, B} || #island{id = Id, counts = C, best = B}
                                                                           <- Islands]),
            answer_reports(Islands)
    after 0 ->
            ok
    end.
