%% @private
%% @doc The hybrid (coarse-grained) EMAS model: one process per island
%% (erlang-mas's `mas_hybrid_island'), on the nodes of `nodes' in turn. An island
%% steps its population, sends each emigrant to its destination island as a message
%% (asynchronously: the seed's "migrants by cast"), and takes in the immigrants that
%% arrived between two steps.
%%
%% Protocol: the coordinator spawns every island (monitored; each island monitors
%% the coordinator and ends with it), each builds its population on its own node and
%% answers `ready'; then `go' carries every island's pid and node. At its deadline
%% (checked every `time_check_interval' steps, on its own clock) an island sends its
%% final population and stays to forward migrants that arrive late; after `exit' it
%% tells every other island it is done and leaves once all have told it, so that no
%% migrant still on its way from another island is lost (energy is conserved).
-module(terrain_emas_hybrid).

%% API
-export([run/2]).

%% exports_not_used: run/2 is called through terrain_emas_run's model table (Module:run/2).
-ignore_xref([{run, 2}]).

%% Internal exports
-export([island/4]).

%% exports_not_used: island/4 is spawned on the island's node (spawn_monitor/4).
-ignore_xref([{island, 4}]).

-define(SETUP_TIMEOUT, 30000).
-define(FINISH_GRACE_MS, 30000).

%% @doc Runs the model; the calling process is the coordinator.
-spec run(terrain_emas:params(), terrain_emas_run:context()) -> terrain_emas_run:final().
run(#{islands := N, nodes := Nodes, time_ms := Duration} = Params, Ctx) ->
    Placement = [{I, lists:nth((I - 1) rem length(Nodes) + 1, Nodes)} || I <- lists:seq(1, N)],
    Spawned = [{I, Node, spawn_monitor(Node, ?MODULE, island, [self(), I, Params, Duration])}
               || {I, Node} <- Placement],
    try
        Initial = [receive
                       {emas_ready, Pid, I, Best} -> {I, Best};
                       {'DOWN', MRef, process, Pid, Why} -> throw({emas_error, {island_failed, I, Node, Why}})
                   after ?SETUP_TIMEOUT -> throw({emas_error, {island_timeout, I, Node}})
                   end || {I, Node, {Pid, MRef}} <- Spawned],
        Pids = list_to_tuple([Pid || {_, _, {Pid, _}} <- Spawned]),
        NodeTuple = list_to_tuple([Node || {_, Node, _} <- Spawned]),
        lists:foreach(fun({_, _, {Pid, _}}) -> Pid ! {emas_go, Pids, NodeTuple} end, Spawned),
        terrain_emas_run:register_reporters(Ctx, tuple_to_list(Pids)),
        Deadline = erlang:monotonic_time(millisecond) + Duration + ?FINISH_GRACE_MS,
        Finals = [receive
                      {emas_final, Pid, Final} -> Final#{initial_best => proplists:get_value(I, Initial)};
                      {'DOWN', MRef, process, Pid, Why} -> throw({emas_error, {island_failed, I, Node, Why}})
                  after max(0, Deadline - erlang:monotonic_time(millisecond)) ->
                          throw({emas_error, {island_timeout, I, Node}})
                  end || {I, Node, {Pid, MRef}} <- Spawned],
        [Pid ! emas_exit || {_, _, {Pid, _}} <- Spawned],
        Late = [collect_late(Pid, MRef, []) || {_, _, {Pid, MRef}} <- Spawned],
        Vms = lists:ukeysort(1, [{VmNode, V} || #{node := VmNode, vm := V} <- Finals]),
        #{islands => [maps:remove(vm, F) || F <- arrive(lists:append(Late), Finals)],
          vms => [V || {_, V} <- Vms]}
    after
        [exit(Pid, kill) || {_, _, {Pid, _}} <- Spawned]
    end.

%% Late migrants forwarded by an island before it exits.
collect_late(Pid, MRef, Acc) ->
    receive
        {emas_late, Pid, To, Agent} -> collect_late(Pid, MRef, [{To, Agent} | Acc]);
        {'DOWN', MRef, process, Pid, _} -> Acc
    after ?SETUP_TIMEOUT ->
            throw({emas_error, {island_did_not_exit, Pid}})
    end.

arrive(Late, Finals) ->
    [case [A || {To, A} <- Late, To =:= I] of
         [] -> F;
         In -> F#{agents := Agents ++ In}
     end || #{island := I, agents := Agents} = F <- Finals].

%%--------------------------------------------------------------------
%% The island process

%% @doc An island: builds its population, waits for `go', runs until its deadline.
-spec island(pid(), pos_integer(), terrain_emas:params(), pos_integer()) -> ok.
island(Coordinator, Id, #{population := P, seed := Seed, topology := Topology} = Params, Duration) ->
    MRef = monitor(process, Coordinator),
    {Agents, S} = population(P, Params, terrain_emas:island_seed(Seed, Id), []),
    Best = terrain_emas:best(Agents),
    Coordinator ! {emas_ready, self(), Id, Best},
    receive
        {emas_go, Pids, Nodes} ->
            Destinations = terrain_emas:destinations(Topology, Id, {Nodes, fun terrain:level/2}),
            Deadline = erlang:monotonic_time(millisecond) + Duration,
            State = #{id => Id, coordinator => Coordinator, pids => Pids, destinations => Destinations,
                      params => Params, deadline => Deadline, counts => terrain_emas_run:zero_counts(),
                      best => Best, steps => 0, monitor => MRef, vm => terrain_emas_run:vm_sample()},
            loop(Agents, S, State);
        {'DOWN', MRef, process, Coordinator, _} ->
            ok
    after ?SETUP_TIMEOUT ->
            ok
    end.

population(0, _Params, S, Acc) -> {Acc, S};
population(K, Params, S0, Acc) ->
    {A, S1} = terrain_emas:new_agent(Params, S0),
    population(K - 1, Params, S1, [A | Acc]).

loop(Agents0, S0, #{params := #{time_check_interval := Every} = Params, steps := Steps, deadline := Deadline,
                    counts := Counts, best := Best, destinations := Ds, pids := Pids} = State) ->
    Agents = mailbox(Agents0, State),
    case Steps rem Every =:= 0 andalso erlang:monotonic_time(millisecond) >= Deadline of
        true ->
            finish(Agents, State);
        false ->
            {New, Emigrants, StepCounts, S1} = terrain_emas:step(Agents, Params, S0),
            S2 = lists:foldl(fun(A, S) ->
                                     {To, S3} = terrain_emas:destination(Ds, S),
                                     element(To, Pids) ! {emas_migrant, A},
                                     S3
                             end, S1, Emigrants),
            loop(New, S2, State#{counts := terrain_emas_run:add_counts(Counts, StepCounts),
                                 best := max_best(Best, terrain_emas:best(New)), steps := Steps + 1})
    end.

%% Immigrants and report requests that arrived during the last step.
mailbox(Agents, #{id := Id, counts := Counts, best := Best, monitor := MRef} = State) ->
    receive
        {emas_migrant, A} ->
            mailbox([A | Agents], State#{best := max_best(Best, terrain_emas:best([A]))});
        {emas_report, Sampler, Ref} ->
            terrain_emas_run:answer_report(Sampler, Ref, [{Id, Counts, Best}]),
            mailbox(Agents, State);
        {'DOWN', MRef, process, _, _} ->
            exit(normal)
    after 0 ->
            Agents
    end.

finish(Agents, #{id := Id, coordinator := Coordinator, counts := Counts, best := Best, steps := Steps,
                 monitor := MRef, vm := Vm, pids := Pids}) ->
    Coordinator ! {emas_final, self(), #{island => Id, node => node(), agents => Agents, counts => Counts,
                                         best => Best, steps => Steps,
                                         vm => terrain_emas_run:vm_usage(Vm, terrain_emas_run:vm_sample())}},
    closed(#{id => Id, coordinator => Coordinator, counts => Counts, best => Best, monitor => MRef,
             others => [P || P <- tuple_to_list(Pids), P =/= self()]}).

%% After the final report: forward late migrants, keep answering reports.
closed(#{id := Id, coordinator := Coordinator, counts := Counts, best := Best, monitor := MRef,
         others := Others} = Closed) ->
    receive
        {emas_migrant, A} ->
            Coordinator ! {emas_late, self(), Id, A},
            closed(Closed);
        {emas_report, Sampler, Ref} ->
            terrain_emas_run:answer_report(Sampler, Ref, [{Id, Counts, Best}]),
            closed(Closed);
        emas_exit ->
            %% Every island has sent its last migrant (its final came before `exit'), but a
            %% migrant from another island may still be on its way: each island tells every
            %% other that it is done, after its migrants on the same path (messages between
            %% two processes keep their order), and leaves once all have told it.
            _ = [P ! {emas_done, self()} || P <- Others],
            flush_late(Id, Coordinator, MRef, Others);
        {'DOWN', MRef, process, _, _} ->
            ok
    after ?SETUP_TIMEOUT + ?FINISH_GRACE_MS ->
            ok
    end.

flush_late(_Id, _Coordinator, _MRef, []) ->
    ok;
flush_late(Id, Coordinator, MRef, Waiting) ->
    receive
        {emas_migrant, A} ->
            Coordinator ! {emas_late, self(), Id, A},
            flush_late(Id, Coordinator, MRef, Waiting);
        {emas_done, From} ->
            flush_late(Id, Coordinator, MRef, lists:delete(From, Waiting));
        {'DOWN', MRef, process, _, _} ->
            ok
    after ?SETUP_TIMEOUT ->
            ok
    end.

max_best(undefined, B) -> B;
max_best(A, undefined) -> A;
max_best(A, B) -> max(A, B).
