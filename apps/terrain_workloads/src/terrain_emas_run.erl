%% @private
%% @doc One EMAS run: starts the model in a fresh process, samples every island once
%% a second, measures scheduler utilisation, and assembles the result.
%%
%% The model runs in the <em>coordinator</em>, a process of its own (its mailbox
%% holds only the run's messages). A <em>sampler</em> process asks the model's
%% <em>reporters</em> (island processes, the skel master, the concurrent model's
%% counter reader) for their cumulative counts every second:
%% ```
%% sampler ──{emas_report, Sampler, Ref}──► reporter
%% sampler ◄──{emas_report, Ref, [{Island, Counts, Best}]}── reporter
%% '''
%% and turns them into per-second rows. A reporter busy with a step answers when it
%% is done; one that has not answered after 800 ms misses that second.
-module(terrain_emas_run).

%% API
-export([run/1,
         register_reporters/2,
         answer_report/3,
         add_counts/2,
         zero_counts/0,
         vm_sample/0,
         vm_usage/2]).

%% Internal exports
-export([sampler/3]).

-export_type([context/0, final/0, island_final/0, result/0, vm_sample/0, vm_usage/0]).

-opaque vm_sample() :: {[{pos_integer(), non_neg_integer(), non_neg_integer()}], non_neg_integer(), integer()}.
-type vm_usage() :: #{node := node(), utilisation := float(), cpu_cores := float()}.

-type context() :: #{sampler := pid(),
                     coordinator := pid(),
                     duration_ms := pos_integer() | undefined,  % time-bounded run
                     steps := pos_integer() | undefined}.        % step-bounded run
-type island_final() :: #{island := pos_integer(),
                          node := node(),
                          agents := [terrain_emas:agent()],
                          counts := terrain_emas:counts(),
                          best := float() | undefined,
                          initial_best := float(),
                          steps => non_neg_integer()}.
-type final() :: #{islands := [island_final()],
                   lost_agents => non_neg_integer(),
                   vms => [vm_usage()]}.         % usage of the other nodes that ran islands
-type row() :: #{second := pos_integer(), island := pos_integer(), reproductions := non_neg_integer(),
                 fights := non_neg_integer(), deaths := non_neg_integer(), migrations := non_neg_integer(),
                 best_fitness := float() | null}.
-type result() :: #{model := terrain_emas:model(), params := terrain_emas:params(), rows := [row()],
                    summary := map()}.

-define(REPORT_WAIT_MS, 800).
-define(RUN_GRACE_MS, 120000).

%%--------------------------------------------------------------------
%% API

%% @doc Runs EMAS with validated parameters; returns the rows and the summary.
-spec run(terrain_emas:params()) -> {ok, result()} | {error, term()}.
run(#{model := Model} = Params) ->
    Caller = self(),
    Ref = make_ref(),
    {Pid, MRef} = spawn_monitor(fun() -> Caller ! {Ref, coordinate(Model, Params)} end),
    Limit = case Params of
                #{steps := _} -> infinity;
                #{time_ms := T} -> T + ?RUN_GRACE_MS
            end,
    receive
        {Ref, Result} ->
            demonitor(MRef, [flush]),
            Result;
        {'DOWN', MRef, process, Pid, Reason} ->
            {error, {emas, {crashed, Reason}}}
    after Limit ->
            exit(Pid, kill),
            {error, {emas, timeout}}
    end.

%% @doc Tells the sampler which processes answer report requests.
-spec register_reporters(context(), [pid()]) -> ok.
register_reporters(#{sampler := Sampler}, Pids) ->
    Sampler ! {reporters, Pids},
    ok.

%% @doc Answers a report request with cumulative counts per island.
-spec answer_report(pid(), reference(), [{pos_integer(), terrain_emas:counts(), float() | undefined}]) -> ok.
answer_report(Sampler, Ref, Islands) ->
    Sampler ! {emas_report, Ref, Islands},
    ok.

-spec add_counts(terrain_emas:counts(), terrain_emas:counts()) -> terrain_emas:counts().
add_counts({R1, F1, D1, M1}, {R2, F2, D2, M2}) ->
    {R1 + R2, F1 + F2, D1 + D2, M1 + M2}.

%% @doc Scheduler wall time, CPU time and the clock of this VM, to compare with a later
%% sample. Turns `scheduler_wall_time' on for as long as the calling process lives.
-spec vm_sample() -> vm_sample().
vm_sample() ->
    _ = erlang:system_flag(scheduler_wall_time, true),
    {erlang:statistics(scheduler_wall_time), element(1, erlang:statistics(runtime)),
     erlang:monotonic_time(microsecond)}.

%% @doc This node's scheduler utilisation and CPU (in cores) between two samples.
-spec vm_usage(vm_sample(), vm_sample()) -> vm_usage().
vm_usage({W0, C0, T0}, {W1, C1, T1}) ->
    {U, _} = utilisation(W0, W1),
    #{node => node(), utilisation => U, cpu_cores => (C1 - C0) / 1000 / max(1.0e-6, (T1 - T0) / 1.0e6)}.

-spec zero_counts() -> terrain_emas:counts().
zero_counts() ->
    {0, 0, 0, 0}.

%%--------------------------------------------------------------------
%% The coordinator

coordinate(Model, Params) ->
    Sampler = spawn_link(?MODULE, sampler, [self(), erlang:monotonic_time(millisecond),
                                            maps:get(progress, Params, undefined)]),
    Ctx = #{sampler => Sampler, coordinator => self(),
            duration_ms => case Params of #{steps := _} -> undefined; #{time_ms := T} -> T end,
            steps => maps:get(steps, Params, undefined)},
    _ = erlang:system_flag(scheduler_wall_time, true),
    Wall0 = erlang:statistics(scheduler_wall_time),
    {Cpu0, _} = erlang:statistics(runtime),
    Started = erlang:monotonic_time(microsecond),
    StartedAt = calendar:system_time_to_rfc3339(erlang:system_time(second), [{offset, "Z"}]),
    Module = module(Model),
    Outcome = try Module:run(Params, Ctx)
              catch
                  throw:{emas_error, Why} -> {error, {emas, Why}}
              end,
    ElapsedUs = erlang:monotonic_time(microsecond) - Started,
    Wall1 = erlang:statistics(scheduler_wall_time),
    {Cpu1, _} = erlang:statistics(runtime),
    case Outcome of
        {error, _} = Error ->
            unlink(Sampler),
            exit(Sampler, kill),
            Error;
        #{islands := Islands} = Final ->
            Finals = [{I, C, B} || #{island := I, counts := C, best := B} <- Islands],
            Sampler ! {finish, self(), Finals, ElapsedUs div 1000},
            Rows = receive {rows, Sampler, R} -> R end,
            {ok, #{model => Model, params => Params, rows => Rows,
                   summary => summary(Model, Params, Final, ElapsedUs, utilisation(Wall0, Wall1),
                                      (Cpu1 - Cpu0) / 1000, list_to_binary(StartedAt))}}
    end.

module(sequential) -> terrain_emas_sequential;
module(hybrid) -> terrain_emas_hybrid;
module(concurrent) -> terrain_emas_concurrent;
module(skel) -> terrain_emas_skel.

%% Scheduler utilisation of the normal schedulers between two samples: the share of
%% wall time they were active (OTP's scheduler_wall_time), overall and per scheduler.
utilisation(Wall0, Wall1) ->
    Normal = erlang:system_info(schedulers),
    Per = [{Id, (A1 - A0) / max(1, T1 - T0)}
           || {{Id, A0, T0}, {Id, A1, T1}} <- lists:zip(lists:sort(Wall0), lists:sort(Wall1)), Id =< Normal],
    Active = lists:sum([A1 - A0 || {{Id, A0, _}, {Id, A1, _}} <- lists:zip(lists:sort(Wall0), lists:sort(Wall1)),
                                   Id =< Normal]),
    Total = lists:sum([T1 - T0 || {{Id, _, T0}, {Id, _, T1}} <- lists:zip(lists:sort(Wall0), lists:sort(Wall1)),
                                  Id =< Normal]),
    {Active / max(1, Total), [U || {_, U} <- Per]}.

summary(Model, Params, #{islands := Islands} = Final, ElapsedUs, {LocalUtilisation, PerScheduler}, CpuSeconds,
        StartedAt) ->
    Seconds = ElapsedUs / 1.0e6,
    %% islands on other nodes: their VMs' usage, not this (coordinating) VM's
    {Utilisation, Cores, Vms} =
        case [V || #{node := N} = V <- maps:get(vms, Final, []), N =/= node()] of
            [] -> {LocalUtilisation, CpuSeconds / Seconds, []};
            Remote -> {lists:sum([U || #{utilisation := U} <- Remote]) / length(Remote),
                       lists:sum([C || #{cpu_cores := C} <- Remote]), Remote}
        end,
    {R, F, D, M} = lists:foldl(fun(#{counts := C}, Acc) -> add_counts(C, Acc) end, zero_counts(), Islands),
    Agents = lists:append([A || #{agents := A} <- Islands]),
    Bests = [B || #{best := B} <- Islands, B =/= undefined],
    #{model => Model,
      started_at => StartedAt,
      duration_s => Seconds,
      steps => lists:sum([maps:get(steps, I, 0) || I <- Islands]),
      islands => [#{island => I, node => N, agents => length(A), best_fitness => json_float(B),
                    initial_best_fitness => IB, reproductions => element(1, C)}
                  || #{island := I, node := N, agents := A, best := B, initial_best := IB, counts := C} <- Islands],
      initial_best_fitness => lists:max([IB || #{initial_best := IB} <- Islands]),
      best_fitness => case Bests of [] -> null; _ -> lists:max(Bests) end,
      reproductions => R, fights => F, deaths => D, migrations => M,
      reproductions_per_s => R / Seconds,
      fights_per_s => F / Seconds,
      utilisation => Utilisation,
      utilisation_per_scheduler => PerScheduler,
      %% CPU time of the whole VM (all threads) over the run, in cores: on a shared
      %% machine, how much CPU the run was given
      cpu_cores => Cores,
      node_usage => Vms,
      schedulers => erlang:system_info(schedulers_online),
      otp_release => list_to_binary(erlang:system_info(otp_release)),
      agents_final => length(Agents),
      energy_initial => maps:get(islands, Params) * maps:get(population, Params) * maps:get(initial_energy, Params),
      energy_final => terrain_emas:total_energy(Agents),
      lost_agents => maps:get(lost_agents, Final, 0),
      parameters => maps:without([nodes, progress], Params#{nodes_used => lists:usort([N || #{node := N} <- Islands])})}.

json_float(undefined) -> null;
json_float(F) -> F.

%%--------------------------------------------------------------------
%% The sampler

%% @doc The sampler loop (spawned by the coordinator). With `Progress' (the run's
%% `progress' option) it sends each second's rows there as `{emas_progress, Rows}'
%% (the run's result so far, for a caller that may stop early).
-spec sampler(pid(), integer(), pid() | undefined) -> no_return().
sampler(Coordinator, T0, Progress) ->
    _ = erlang:send_after(T0 + 1000, self(), {tick, 1}, [{abs, true}]),
    sample(Coordinator, T0, #{reporters => [], last => #{}, rows => [], second => 0, progress => Progress}).

sample(Coordinator, T0, State) ->
    receive
        {reporters, Pids} ->
            sample(Coordinator, T0, State#{reporters := Pids ++ maps:get(reporters, State)});
        {tick, Second} ->
            _ = erlang:send_after(T0 + 1000 * (Second + 1), self(), {tick, Second + 1}, [{abs, true}]),
            Reports = ask(maps:get(reporters, State)),
            #{rows := Rows} = Next = rows(Second, Reports, State),
            _ = case maps:get(progress, State) of
                undefined -> ok;
                Progress -> Progress ! {emas_progress, lists:reverse(lists:sublist(Rows, length(Rows) - length(maps:get(rows, State))))}
            end,
            sample(Coordinator, T0, Next);
        {finish, Coordinator, Finals, ElapsedMs} ->
            #{second := Last} = State,
            Final = case ElapsedMs > Last * 1000 of
                        true -> rows(Last + 1, Finals, State);
                        false -> State
                    end,
            Coordinator ! {rows, self(), lists:reverse(maps:get(rows, Final))},
            exit(normal);
        {emas_report, _StaleRef, _} ->
            sample(Coordinator, T0, State)
    end.

ask(Reporters) ->
    Ref = make_ref(),
    lists:foreach(fun(P) -> P ! {emas_report, self(), Ref} end, Reporters),
    Deadline = erlang:monotonic_time(millisecond) + ?REPORT_WAIT_MS,
    collect(Ref, length(Reporters), Deadline, []).

collect(_Ref, 0, _Deadline, Acc) ->
    Acc;
collect(Ref, N, Deadline, Acc) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {emas_report, Ref, Islands} -> collect(Ref, N - 1, Deadline, Islands ++ Acc)
    after Wait ->
            Acc
    end.

rows(Second, Reports, #{last := Last, rows := Rows} = State) ->
    {NewRows, NewLast} =
        lists:foldl(fun({Island, Counts, Best}, {RowsAcc, LastAcc}) ->
                            {Previous, PreviousBest} = maps:get(Island, LastAcc, {zero_counts(), undefined}),
                            {R, F, D, M} = minus(Counts, Previous),
                            Shown = better(Best, PreviousBest),
                            Row = #{second => Second, island => Island, reproductions => R, fights => F,
                                    deaths => D, migrations => M, best_fitness => json_float(Shown)},
                            {[Row | RowsAcc], LastAcc#{Island => {Counts, Shown}}}
                    end, {Rows, Last}, lists:keysort(1, Reports)),
    State#{last := NewLast, rows := NewRows, second := Second}.

minus({R1, F1, D1, M1}, {R2, F2, D2, M2}) ->
    {R1 - R2, F1 - F2, D1 - D2, M1 - M2}.

better(undefined, B) -> B;
better(A, undefined) -> A;
better(A, B) -> max(A, B).
