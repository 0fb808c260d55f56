%% @private
%% @doc The concurrent (fine-grained) EMAS model: one process per agent
%% (erlang-mas's `mas_conc_agent'); per island a fight arena and a reproduction
%% arena (`terrain_emas_arena') where agents meet in pairs, and a port where
%% migrants leave and arrive.
%%
%% ```
%% coordinator ──link── per island: fight arena, reproduction arena, port
%%             ──link── reporter (reads the counters for the sampler)
%% agents (spawned, not linked): enter arenas; die; or go to the port, which starts
%%                               them again on the destination island
%% '''
%% Counting is lock-free, as the seed's switch from a logger to counters: one
%% `counters' array (per island: reproductions, fights, deaths, migrations; then the
%% live agents and the lost ones) and one `atomics' array of each island's best
%% fitness (IEEE bits, raised with compare-and-exchange). At the deadline the arenas
%% close (each on its own clock, and on the coordinator's `close'); every agent's next
%% entry returns `close' and it sends itself to the coordinator. The run ends when no
%% agent is live. Local only: counters are per node.
-module(terrain_emas_concurrent).

%% API
-export([run/2]).

%% exports_not_used: run/2 is called through terrain_emas_run's model table (Module:run/2).
-ignore_xref([{run, 2}]).

%% Internal exports
-export([agent/5,
         port/4,
         reporter/3]).

-define(LIVE(N), (4 * (N) + 1)).
-define(LOST(N), (4 * (N) + 2)).
-define(FINISH_GRACE_MS, 5000).

-type env() :: #{counters := counters:counters_ref(),
                 best := atomics:atomics_ref(),
                 islands := pos_integer(),
                 coordinator := pid(),
                 params := terrain_emas:params(),
                 timeout := pos_integer()}.

%% @doc Runs the model; the calling process is the coordinator.
-spec run(terrain_emas:params(), terrain_emas_run:context()) -> terrain_emas_run:final().
run(#{islands := N, population := P, seed := Seed, time_ms := Duration} = Params, Ctx) ->
    Counters = counters:new(4 * N + 2, [write_concurrency]),
    Best = atomics:new(N, [{signed, true}]),
    Env = #{counters => Counters, best => Best, islands => N, coordinator => self(), params => Params,
            timeout => terrain_emas_arena:agent_timeout(Params)},
    Populations = [begin
                       {Agents, S} = population(P, Params, terrain_emas:island_seed(Seed, I), []),
                       atomics:put(Best, I, to_bits(terrain_emas:best(Agents))),
                       {I, Agents, S}
                   end || I <- lists:seq(1, N)],
    Initial = [{I, terrain_emas:best(A)} || {I, A, _} <- Populations],
    Deadline = erlang:monotonic_time(millisecond) + Duration,
    Islands = list_to_tuple([start_island(I, Env, Deadline) || I <- lists:seq(1, N)]),
    lists:foreach(fun({_, _, Port}) -> Port ! {emas_islands, Islands} end, tuple_to_list(Islands)),
    Reporter = spawn_link(?MODULE, reporter, [Counters, Best, N]),
    terrain_emas_run:register_reporters(Ctx, [Reporter]),
    counters:add(Counters, ?LIVE(N), N * P),
    lists:foreach(fun({I, Agents, IslandRand}) ->
                          Arenas = element(I, Islands),
                          lists:foldl(fun(A, S0) ->
                                              {AgentSeed, S1} = rand:uniform_s(1 bsl 56, S0),
                                              _ = spawn(?MODULE, agent, [A, I, Arenas, AgentSeed, Env]),
                                              S1
                                      end, IslandRand, Agents)
                  end, Populations),
    receive after max(0, Deadline - erlang:monotonic_time(millisecond)) -> ok end,
    lists:foreach(fun({F, R, Port}) ->
                          terrain_emas_arena:close(F),
                          terrain_emas_arena:close(R),
                          Port ! emas_close
                  end, tuple_to_list(Islands)),
    Finals = collect(Counters, N, erlang:monotonic_time(millisecond) + maps:get(timeout, Env) + ?FINISH_GRACE_MS,
                     #{}),
    [begin
         ok = terrain_emas_arena:stop(F),
         ok = terrain_emas_arena:stop(R),
         unlink(Port),
         exit(Port, shutdown)
     end || {F, R, Port} <- tuple_to_list(Islands)],
    unlink(Reporter),
    exit(Reporter, shutdown),
    Live = counters:get(Counters, ?LIVE(N)),
    #{islands => [#{island => I, node => node(), agents => maps:get(I, Finals, []),
                    counts => read_counts(Counters, I), best => from_bits(atomics:get(Best, I)),
                    initial_best => IB}
                  || {I, IB} <- Initial],
      lost_agents => counters:get(Counters, ?LOST(N)) + Live}.

population(0, _Params, S, Acc) -> {Acc, S};
population(K, Params, S0, Acc) ->
    {A, S1} = terrain_emas:new_agent(Params, S0),
    population(K - 1, Params, S1, [A | Acc]).

start_island(I, #{counters := Counters, best := Best, params := #{seed := Seed} = Params} = Env, Deadline) ->
    Port = spawn_link(?MODULE, port, [I, Env, terrain_emas:island_seed(Seed, {port, I}), self()]),
    Setup = fun(Kind) ->
                    #{kind => Kind, island => I, params => Params, seed => Seed, deadline => Deadline,
                      spawn_child => fun(Child, ChildSeed) ->
                                             counters:add(Counters, ?LIVE(maps:get(islands, Env)), 1),
                                             Port ! {emas_born, Child, ChildSeed}
                                     end,
                      record => fun(fight, Entrants, _) ->
                                        counters:add(Counters, index(I, fights), Entrants);
                                   (reproduction, Entrants, Children) ->
                                        counters:add(Counters, index(I, reproductions), Entrants),
                                        raise_best(Best, I, terrain_emas:best(Children))
                                end}
            end,
    {ok, Fight} = terrain_emas_arena:start_link(Setup(fight), []),
    {ok, Reproduction} = terrain_emas_arena:start_link(Setup(reproduction), []),
    {Fight, Reproduction, Port}.

%% Waits until no agent is live (or the deadline), gathering the agents' final states.
collect(Counters, N, Deadline, Acc) ->
    receive
        {emas_final, I, Agent} ->
            collect(Counters, N, Deadline, maps:update_with(I, fun(L) -> [Agent | L] end, [Agent], Acc))
    after 5 ->
            case counters:get(Counters, ?LIVE(N)) =< 0 orelse erlang:monotonic_time(millisecond) > Deadline of
                true -> drain(Acc);
                false -> collect(Counters, N, Deadline, Acc)
            end
    end.

drain(Acc) ->
    receive
        {emas_final, I, Agent} -> drain(maps:update_with(I, fun(L) -> [Agent | L] end, [Agent], Acc))
    after 0 -> Acc
    end.

index(I, reproductions) -> 4 * (I - 1) + 1;
index(I, fights) -> 4 * (I - 1) + 2;
index(I, deaths) -> 4 * (I - 1) + 3;
index(I, migrations) -> 4 * (I - 1) + 4.

read_counts(Counters, I) ->
    {counters:get(Counters, index(I, reproductions)), counters:get(Counters, index(I, fights)),
     counters:get(Counters, index(I, deaths)), counters:get(Counters, index(I, migrations))}.

to_bits(F) ->
    <<Bits:64/signed>> = <<F:64/float>>,
    Bits.

from_bits(Bits) ->
    <<F:64/float>> = <<Bits:64/signed>>,
    F.

raise_best(_Best, _I, undefined) ->
    ok;
raise_best(Best, I, F) ->
    Old = atomics:get(Best, I),
    case from_bits(Old) >= F of
        true -> ok;
        false ->
            case atomics:compare_exchange(Best, I, Old, to_bits(F)) of
                ok -> ok;
                _Changed -> raise_best(Best, I, F)
            end
    end.

%%--------------------------------------------------------------------
%% Agents

%% @doc An agent's life: choose a behaviour, act, again.
-spec agent(terrain_emas:agent(), pos_integer(), {pid(), pid(), pid()}, integer(), env()) -> ok.
agent(Agent, I, Arenas, Seed, Env) ->
    live(Agent, I, Arenas, rand:seed_s(exsss, Seed), Env).

live(Agent, I, {Fight, Reproduction, Port} = Arenas, S0,
     #{params := #{arena_call := Mode} = Params, timeout := Timeout, counters := Counters,
       islands := N, coordinator := Coordinator} = Env) ->
    case terrain_emas:behaviour(Agent, Params, S0) of
        {death, _} ->
            counters:add(Counters, index(I, deaths), 1),
            counters:sub(Counters, ?LIVE(N), 1);
        {migration, S1} ->
            {Seed, _} = rand:uniform_s(1 bsl 56, S1),
            Port ! {emas_emigrate, Agent, Seed},
            ok;
        {Kind, S1} ->
            Arena = case Kind of fight -> Fight; reproduction -> Reproduction end,
            case terrain_emas_arena:enter(Arena, Agent, Mode, Timeout) of
                {agent, After} ->
                    live(After, I, Arenas, S1, Env);
                close ->
                    Coordinator ! {emas_final, I, Agent},
                    counters:sub(Counters, ?LIVE(N), 1);
                timeout ->
                    counters:add(Counters, ?LOST(N), 1),
                    counters:sub(Counters, ?LIVE(N), 1)
            end
    end,
    ok.

%%--------------------------------------------------------------------
%% Ports

%% @doc An island's port: sends emigrants to their destination island's port,
%% starts immigrants and newborn agents on this island.
-spec port(pos_integer(), env(), rand:state(), pid()) -> ok.
port(I, #{params := #{topology := Topology}} = Env, S, Coordinator) ->
    receive
        {emas_islands, Islands} ->
            Nodes = list_to_tuple([node() || _ <- tuple_to_list(Islands)]),
            Ds = terrain_emas:destinations(Topology, I, {Nodes, fun terrain:level/2}),
            port_loop(I, Islands, Ds, S, true, Env, Coordinator)
    end.

port_loop(I, Islands, Ds, S0, Open, #{counters := Counters, best := Best, islands := N} = Env, Coordinator) ->
    receive
        {emas_emigrate, Agent, Seed} ->
            {To, S1} = terrain_emas:destination(Ds, S0),
            counters:add(Counters, index(I, migrations), 1),
            element(3, element(To, Islands)) ! {emas_immigrant, Agent, Seed},
            port_loop(I, Islands, Ds, S1, Open, Env, Coordinator);
        {Why, Agent, Seed} when Why =:= emas_immigrant; Why =:= emas_born ->
            case Open of
                true ->
                    _ = Why =:= emas_immigrant andalso raise_best(Best, I, terrain_emas:best([Agent])),
                    _ = spawn(?MODULE, agent, [Agent, I, element(I, Islands), Seed, Env]),
                    ok;
                false ->
                    Coordinator ! {emas_final, I, Agent},
                    counters:sub(Counters, ?LIVE(N), 1)
            end,
            port_loop(I, Islands, Ds, S0, Open, Env, Coordinator);
        emas_close ->
            port_loop(I, Islands, Ds, S0, false, Env, Coordinator)
    end.

%%--------------------------------------------------------------------
%% The reporter

%% @doc Answers the sampler from the counters.
-spec reporter(counters:counters_ref(), atomics:atomics_ref(), pos_integer()) -> no_return().
reporter(Counters, Best, N) ->
    receive
        {emas_report, Sampler, Ref} ->
            terrain_emas_run:answer_report(Sampler, Ref, [{I, read_counts(Counters, I), from_bits(atomics:get(Best, I))}
                                                          || I <- lists:seq(1, N)]),
            reporter(Counters, Best, N)
    end.
