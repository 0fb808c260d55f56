%% @private
%% @doc The skeleton-based EMAS model: a map/feedback farm over the islands, as the
%% seed's skel program, written with plain processes instead of the skel library.
%%
%% ```
%% feedback(while clock < end):           master (the coordinator)
%%   map over islands:                      ├── island i ──► worker (i − 1) rem W + 1
%%     tag → group → migrate → work → shuffle   (terrain_emas:step/3 + destinations)
%%   gather; emigrants join their destination islands
%% '''
%% The master holds the population between iterations and sends each island's
%% agents, with that island's `rand' state, to a worker; so every iteration copies
%% the whole population twice between processes (the cost the seed cut by sending
%% solutions as binaries). Workers run on `nodes' in turn. With `steps' the run is a
%% pure function of the parameters and the seed: each island's random choices come
%% from its own state and the master merges results in island order.
-module(terrain_emas_skel).

%% API
-export([run/2]).

%% exports_not_used: run/2 is called through terrain_emas_run's model table (Module:run/2).
-ignore_xref([{run, 2}]).

%% Internal exports
-export([worker/3]).

%% exports_not_used: worker/3 is spawned on the worker's node (spawn_monitor/4).
-ignore_xref([{worker, 3}]).

-define(WORK_TIMEOUT, 60000).

%% @doc Runs the farm; the calling process is the master.
-spec run(terrain_emas:params(), terrain_emas_run:context()) -> terrain_emas_run:final().
run(#{islands := N, population := P, seed := Seed, topology := Topology, nodes := Nodes} = Params, Ctx) ->
    W = case maps:get(skel_workers, Params) of islands -> N; K -> K end,
    Workers = [spawn_monitor(lists:nth((J - 1) rem length(Nodes) + 1, Nodes), ?MODULE, worker, [self(), Params, J])
               || J <- lists:seq(1, W)],
    WorkerOf = list_to_tuple([element((I - 1) rem W + 1, list_to_tuple(Workers)) || I <- lists:seq(1, N)]),
    IslandNodes = list_to_tuple([node(Pid) || {Pid, _} <- tuple_to_list(WorkerOf)]),
    try
        Islands = [begin
                       {Agents, S} = population(P, Params, terrain_emas:island_seed(Seed, I), []),
                       Ds = terrain_emas:destinations(Topology, I, {IslandNodes, fun terrain:level/2}),
                       Best = terrain_emas:best(Agents),
                       #{island => I, agents => Agents, rand => S, destinations => Ds, best => Best,
                         initial_best => Best, counts => terrain_emas_run:zero_counts(),
                         node => element(I, IslandNodes)}
                   end || I <- lists:seq(1, N)],
        terrain_emas_run:register_reporters(Ctx, [self()]),
        Until = case Ctx of
                    #{steps := undefined, duration_ms := D} -> {deadline, erlang:monotonic_time(millisecond) + D};
                    #{steps := Limit} -> {steps, Limit}
                end,
        {Final, Iterations} = feedback(Islands, WorkerOf, Params, Until, 0),
        #{islands => [maps:without([rand, destinations], I#{steps => Iterations}) || I <- Final],
          vms => vm_usage(Workers)}
    after
        [begin exit(Pid, kill), demonitor(MRef, [flush]) end || {Pid, MRef} <- Workers]
    end.

population(0, _Params, S, Acc) -> {Acc, S};
population(K, Params, S0, Acc) ->
    {A, S1} = terrain_emas:new_agent(Params, S0),
    population(K - 1, Params, S1, [A | Acc]).

feedback(Islands, WorkerOf, #{time_check_interval := Every} = Params, Until, Done) ->
    answer_reports(Islands),
    case finished(Until, Done, Every) of
        true ->
            {Islands, Done};
        false ->
            Ref = make_ref(),
            lists:foreach(fun(#{island := I, agents := Agents, rand := S, destinations := Ds}) ->
                                  {Pid, _} = element(I, WorkerOf),
                                  Pid ! {emas_work, self(), Ref, I, Agents, S, Ds}
                          end, Islands),
            Results = [gather(Ref, I, element(I, WorkerOf)) || #{island := I} <- Islands],
            Moves = lists:append([M || {_, _, M, _, _} <- Results]),
            Next = [begin
                        {Agents, S, _, Counts, Best} = Result,
                        In = [A || {To, A} <- Moves, To =:= I],
                        Island#{agents := Agents ++ In, rand := S,
                                counts := terrain_emas_run:add_counts(C0, Counts),
                                best := max_best(max_best(B0, Best), terrain_emas:best(In))}
                    end || {#{island := I, counts := C0, best := B0} = Island, Result} <- lists:zip(Islands, Results)],
            feedback(Next, WorkerOf, Params, Until, Done + 1)
    end.

%% The usage of every other node that ran workers, asked of one worker there.
vm_usage(Workers) ->
    Remote = lists:ukeysort(1, [{node(Pid), W} || {Pid, _} = W <- Workers, node(Pid) =/= node()]),
    [begin
         Ref = make_ref(),
         Pid ! {emas_vm, self(), Ref},
         receive
             {emas_vm, Ref, Usage} -> Usage;
             {'DOWN', MRef, process, Pid, Why} -> throw({emas_error, {worker_failed, N, Why}})
         after ?WORK_TIMEOUT -> throw({emas_error, {worker_timeout, N}})
         end
     end || {N, {Pid, MRef}} <- Remote].

gather(Ref, I, {Pid, MRef}) ->
    receive
        {emas_done, Ref, I, Agents, S, Moves, Counts, Best} -> {Agents, S, Moves, Counts, Best};
        {'DOWN', MRef, process, Pid, Why} -> throw({emas_error, {worker_failed, node(Pid), Why}})
    after ?WORK_TIMEOUT ->
            throw({emas_error, {worker_timeout, node(Pid)}})
    end.

finished({steps, Steps}, Done, _Every) -> Done >= Steps;
finished({deadline, Deadline}, Done, Every) ->
    Done rem Every =:= 0 andalso erlang:monotonic_time(millisecond) >= Deadline.

answer_reports(Islands) ->
    receive
        {emas_report, Sampler, Ref} ->
            terrain_emas_run:answer_report(Sampler, Ref, [{I, C, B} || #{island := I, counts := C, best := B}
                                                                           <- Islands]),
            answer_reports(Islands)
    after 0 ->
            ok
    end.

max_best(undefined, B) -> B;
max_best(A, undefined) -> A;
max_best(A, B) -> max(A, B).

%%--------------------------------------------------------------------
%% Workers

%% @doc A farm worker: steps the islands it is sent; ends with the master.
-spec worker(pid(), terrain_emas:params(), pos_integer()) -> ok.
worker(Master, Params, _Index) ->
    MRef = monitor(process, Master),
    work(Master, Params, MRef, terrain_emas_run:vm_sample()).

work(Master, Params, MRef, Vm) ->
    receive
        {emas_work, Master, Ref, I, Agents, S0, Ds} ->
            %% tag → group → work → shuffle, then migrate: the emigrants' destinations
            {New, Emigrants, Counts, S1} = terrain_emas:step(Agents, Params, S0),
            {Moves, S2} = lists:mapfoldl(fun(A, S) ->
                                                 {To, S3} = terrain_emas:destination(Ds, S),
                                                 {{To, A}, S3}
                                         end, S1, Emigrants),
            Master ! {emas_done, Ref, I, New, S2, Moves, Counts, terrain_emas:best(New)},
            work(Master, Params, MRef, Vm);
        {emas_vm, Master, Ref} ->
            Master ! {emas_vm, Ref, terrain_emas_run:vm_usage(Vm, terrain_emas_run:vm_sample())},
            work(Master, Params, MRef, Vm);
        {'DOWN', MRef, process, Master, _} ->
            ok
    end.
