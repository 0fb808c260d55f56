%% @private
%% @doc EMAS in the lab, below `terrain emas' (terrain_lab_cmd_emas, which parses the
%% arguments and prints the results): one run, on this node or on the islands of a
%% cluster started from a spec, into `emas.csv' and `summary.json'; and the scaling
%% table with Anielski &amp; Stypka's lessons, each configuration in a VM of its own
%% (`peer', +S), into `scaling.json'. Both list their files in `DIR/manifest.json'. The
%% machine is sampled here too: the share of idle CPU over a second (/proc/stat) before
%% and after the table, and whether the lock-counting emulator lcnt needs is installed
%% (`erl -emu_type lcnt', run under a deadline).
%%
%% A SIGTERM of the CLI stops a run, or the table, at the next second or configuration
%% and keeps what was measured: the caller's `interruptible' fun runs the measuring with
%% SIGTERM turned into the message `{terrain_lab_emas, interrupt}' to this process.
-module(terrain_lab_emas).

%% API
-export([run/3,
         scaling/2,
         format_error/1]).

%% Internal exports (EUnit, terrain_lab_emas_tests: the table from given runs and
%% /proc/stat lines; the probe)
-export([plan/1,
         scaling_row/4,
         ratios/1,
         idle_share/2,
         cpu_times/1,
         lcnt_available/0]).

%% exports_not_used: the internal exports above are called by the tests only.
-ignore_xref([{plan, 1}, {scaling_row, 4}, {ratios, 1}, {idle_share, 2}, {cpu_times, 1}, {lcnt_available, 0}]).

-export_type([options/0, scaling_options/0, error_reason/0]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(SUMMARY_FORMAT, ?TERRAIN_FORMAT_EMAS).
-define(SCALING_FORMAT, ?TERRAIN_FORMAT_EMAS_SCALING).
-define(CSV_COLUMNS, [second, island, reproductions, fights, deaths, migrations, best_fitness]).
-define(MODELS, [sequential, hybrid, concurrent, skel]).
-define(SCHEDULERS, [1, 2, 4, 8]).
%% VM arguments of every measured VM: no scheduler busy-waiting, so that the CPU an
%% idle scheduler would spin away goes to the work (and to the machine's other users).
-define(PEER_TIMEOUT, 60000).
-define(LCNT_PROBE_MS, 30000).

%% How {@link run/3} runs.
-type options() ::
        #{io := terrain_lab_io:io(),                    % progress lines
          interruptible := interruptible(),             % runs the measuring with SIGTERM a message
          cluster => {file:filename(), [term()]}}.      % start this spec for the run; islands on the
                                                        % nodes that satisfy these predicates
%% How {@link scaling/3} runs.
-type scaling_options() ::
        #{io := terrain_lab_io:io(),
          quick := boolean(),                           % 1 s per configuration, once, instead of 3 s, 3 times
          interruptible := interruptible(),
          tables := fun(([map()], map()) -> term())}.   % shows the rows and lessons before they are written

%% Runs the fun with SIGTERM turned into `{terrain_lab_emas, interrupt}' to the caller.
-type interruptible() :: fun((fun(() -> term())) -> term()).

-type error_reason() ::
        {emas_lab, {workload, term()}
                 | {no_nodes, [term()]}
                 | {scaling_interrupted, non_neg_integer(), pos_integer(), file:filename()}
                 | {run_interrupted, non_neg_integer(), float() | none, file:filename()}}.

%%--------------------------------------------------------------------
%% API

%% @doc One EMAS run with `EmasOptions' (checked by `terrain_workloads:emas_validate/1')
%% into `Dir': `emas.csv' (per second and island), `summary.json' and the manifest;
%% returns the summary. With `cluster' the spec's cluster is started for the run (and
%% stopped after it) and the islands go on the nodes that satisfy the predicates. The
%% rows so far are written (marked partial) as they come, so that a SIGINT or SIGKILL,
%% which the CLI cannot catch, keeps the seconds measured too; a SIGTERM ends the run
%% with those rows (no summary.json: the summary needs the islands' final state) and an
%% error that says where they are.
-spec run(map(), file:filename(), options()) -> {ok, map()} | {error, term()}.
run(EmasOptions, Dir, #{io := Io, cluster := {SpecFile, Preds}} = Options) ->
    terrain_lab_io:progress(Io, "starting the cluster of ~ts...~n", [SpecFile]),
    terrain_lab:with_cluster(SpecFile, #{prefix => "emas" ++ os:getpid() ++ "_"}, fun(Infos) ->
        Nodes = [N || #{node := N} <- Infos],
        {ok, _} = application:ensure_all_started(terrain),
        case terrain:choose_nodes(Nodes, Preds) of
            [] -> {error, {emas_lab, {no_nodes, Preds}}};
            Chosen ->
                terrain_lab_io:progress(Io, "islands on ~ts~n",
                                         [lists:join(", ", [atom_to_list(N) || N <- Chosen])]),
                execute(EmasOptions#{nodes => Chosen}, Dir, Options)
        end
    end);
run(EmasOptions, Dir, Options) ->
    execute(EmasOptions, Dir, Options).

%% @doc The scaling table into `Dir/scaling.json': every model with 1, 2, 4 and 8
%% schedulers ({@link plan/1}), then the lessons (call vs cast arenas, binary vs list
%% solutions, the clock read every step vs every 100, message round trips), each run in
%% a VM of its own. A SIGTERM stops after the current run: the configurations measured
%% so far are written, marked partial (no lessons, no ratios), and the error says so.
%% Returns the file and the seconds it took.
-spec scaling(file:filename(), scaling_options()) -> {ok, file:filename(), float()} | {error, term()}.
scaling(Dir, #{io := Io, quick := Quick, interruptible := Interruptible} = Options) ->
    Cores = erlang:system_info(logical_processors_available),
    {TimeMs, Rounds, Plan} = plan(Quick),
    Idle = idle_cpu(),
    terrain_lab_io:progress(Io, "CPU ~.1f% idle before measuring (~p logical processors); ~b ms per run~n",
                             [100 * Idle, Cores, TimeMs]),
    Base = #{time_ms => TimeMs, seed => 1},
    Started = erlang:monotonic_time(millisecond),
    Configs = [{M, S} || M <- ?MODELS, S <- ?SCHEDULERS],
    Measured = Interruptible(fun() -> measure_plan(Plan, Base, Io, []) end),
    Done = lists:sublist(Plan, length(Measured)),
    Rows = [scaling_row(M, S, Runs, Cores)
            || {M, S} <- Configs,
               Runs <- [[R || {{M1, S1}, R} <- lists:zip(Done, Measured), M1 =:= M, S1 =:= S]], Runs =/= []],
    case length(Done) =:= length(Plan) of
        true -> scaling_done(Dir, Quick, {Cores, Idle, TimeMs, Rounds, Started, Base}, Rows, Options);
        false -> scaling_partial(Dir, Quick, {Cores, Idle, TimeMs, Rounds, Started}, Rows, {length(Done), length(Plan)})
    end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({emas_lab, {workload, Reason}}) ->
    terrain_workloads:format_error(Reason);
format_error({emas_lab, {no_nodes, Preds}}) ->
    io_lib:format("no node of the cluster satisfies ~0tp", [Preds]);
format_error({emas_lab, {scaling_interrupted, Done, All, File}}) ->
    io_lib:format("interrupted (SIGTERM); the ~b of ~b runs finished before are kept in ~ts (marked partial)",
                  [Done, All, File]);
format_error({emas_lab, {run_interrupted, Seconds, Best, File}}) ->
    [io_lib:format("interrupted (SIGTERM); the ~b seconds measured before are kept in ~ts (per second and island, "
                   "marked partial in manifest.json; no summary.json)", [Seconds, File]),
     case Best of
         none -> "";
         _ -> io_lib:format(", best fitness so far ~.2f", [Best])
     end].

%%--------------------------------------------------------------------
%% Internal exports

%% @doc The scaling plan: ms per run, rounds, and the runs in order. Per model: 1 and 2
%% schedulers alternately, `Rounds' times each (the median counts), then 4 and 8.
-spec plan(boolean()) -> {pos_integer(), pos_integer(), [{atom(), pos_integer()}]}.
plan(Quick) ->
    TimeMs = case Quick of true -> 1000; false -> 3000 end,
    Rounds = case Quick of true -> 1; false -> 3 end,
    {TimeMs, Rounds, lists:append([lists:append(lists:duplicate(Rounds, [{M, 1}, {M, 2}])) ++ [{M, 4}, {M, 8}]
                                   || M <- ?MODELS])}.

%%--------------------------------------------------------------------
%% Internal functions: one run

%% The run goes on in a process of its own; this one collects its rows second by
%% second, so that on SIGTERM it writes them (emas.csv, marked partial in the
%% manifest; no summary.json: the summary needs the islands' final state).
execute(EmasOptions, Dir, #{io := Io, interruptible := Interruptible}) ->
    #{model := Model} = EmasOptions,
    terrain_lab_io:progress(Io, "running EMAS (~ts) for ~ts...~n", [Model, extent(EmasOptions)]),
    Self = self(),
    Ref = make_ref(),
    {Pid, MRef} = spawn_monitor(fun() -> Self ! {Ref, terrain_workloads:emas(EmasOptions#{progress => Self})} end),
    %% the rows so far are written (marked partial) as they come, so that a SIGINT or
    %% SIGKILL, which the CLI cannot catch, keeps the seconds measured too
    Checkpoint = fun(Rows) -> _ = write_partial(Dir, Rows, EmasOptions), ok end,
    Outcome = Interruptible(fun() -> await_run(Ref, Pid, MRef, Checkpoint, []) end),
    case Outcome of
        {interrupted, SoFar} ->
            exit(Pid, kill),
            run_partial(Dir, SoFar, EmasOptions);
        {done, Result} ->
            finish_run(Result, Dir, EmasOptions)
    end.

await_run(Ref, Pid, MRef, Checkpoint, Rows) ->
    receive
        {emas_progress, New} ->
            ok = Checkpoint(Rows ++ New),
            await_run(Ref, Pid, MRef, Checkpoint, Rows ++ New);
        {?MODULE, interrupt} -> {interrupted, Rows};
        {Ref, Result} -> demonitor(MRef, [flush]), {done, Result};
        {'DOWN', MRef, process, Pid, Reason} -> {done, {error, {emas, {crashed, Reason}}}}
    end.

run_partial(Dir, Rows, EmasOptions) ->
    Csv = filename:join(Dir, "emas.csv"),
    case write_partial(Dir, Rows, EmasOptions) of
        ok ->
            Bests = [B || #{best_fitness := B} <- Rows, is_float(B)],
            Seconds = lists:max([0 | [S || #{second := S} <- Rows]]),
            {error, {emas_lab, {run_interrupted, Seconds, case Bests of [] -> none; _ -> lists:max(Bests) end, Csv}}};
        {error, _} = Error ->
            Error
    end.

%% emas.csv with the rows so far and a manifest that marks it partial.
write_partial(Dir, Rows, EmasOptions) ->
    Parameters = (json_parameters(EmasOptions))#{partial => true},
    steps([fun() -> filelib:ensure_dir(filename:join(Dir, "x")) end,
           fun() -> write_csv(filename:join(Dir, "emas.csv"), Rows) end,
           fun() -> manifest(Dir, [#{kind => emas, file => <<"emas.csv">>, parameters => Parameters}]) end]).

finish_run(Result, Dir, EmasOptions) ->
    case Result of
        {ok, #{rows := Rows, summary := Summary}} ->
            case write_run(Dir, Rows, Summary, EmasOptions) of
                ok ->
                    {ok, Summary};
                {error, _} = Error ->
                    Error
            end;
        {error, Reason} ->
            {error, {emas_lab, {workload, Reason}}}
    end.

extent(#{steps := Steps}) -> io_lib:format("~b steps", [Steps]);
extent(#{time_ms := T}) -> io_lib:format("~b ms", [T]).

write_run(Dir, Rows, Summary, EmasOptions) ->
    Csv = filename:join(Dir, "emas.csv"),
    Json = filename:join(Dir, "summary.json"),
    steps([fun() -> filelib:ensure_dir(filename:join(Dir, "x")) end,
           fun() -> write_csv(Csv, Rows) end,
           fun() -> terrain_lab_files:write_json(Json, Summary#{format => ?SUMMARY_FORMAT}) end,
           fun() ->
                   Parameters = json_parameters(EmasOptions),
                   manifest(Dir, [#{kind => emas, file => <<"emas.csv">>, parameters => Parameters},
                                  #{kind => emas_summary, file => <<"summary.json">>, parameters => Parameters}])
           end]).

json_parameters(Options) ->
    maps:map(fun(nodes, Nodes) -> [atom_to_binary(N) || N <- Nodes];
                (_, V) -> V
             end, Options).

%% One step after another; the first error stops.
steps([]) -> ok;
steps([Step | Rest]) ->
    case Step() of
        ok -> steps(Rest);
        {error, Why} when is_atom(Why) -> {error, {write, "output directory", Why}};
        {error, _} = Error -> Error
    end.

write_csv(File, Rows) ->
    _ = file:delete(File),   % a run directory's emas.csv is the last run's
    case terrain_lab_csv:create(File, ?CSV_COLUMNS) of
        {ok, Csv} ->
            Result = lists:foldl(fun(Row, ok) -> terrain_lab_csv:write_row(Csv, csv_row(Row));
                                    (_, Error) -> Error
                                 end, ok, Rows),
            terrain_lab_csv:close(Csv),
            Result;
        {error, _} = Error ->
            Error
    end.

csv_row(#{best_fitness := null} = Row) -> Row#{best_fitness := ""};
csv_row(Row) -> Row.

%% Adds outputs to DIR/manifest.json, replacing earlier entries for the same files.
manifest(Dir, Outputs) ->
    Files = [F || #{file := F} <- Outputs],
    Earlier = case terrain_json:read_file(filename:join(Dir, "manifest.json")) of
                  {ok, #{<<"outputs">> := Old}} when is_list(Old) ->
                      [O || #{<<"file">> := F} = O <- Old, not lists:member(F, Files)];
                  _ -> []
              end,
    terrain_lab_run:write_manifest(Dir, emas, Earlier ++ Outputs).

%%--------------------------------------------------------------------
%% Internal functions: the scaling table

%% The plan's runs one after another, until a SIGTERM (the caller's message).
measure_plan([], _Base, _Io, Acc) ->
    lists:reverse(Acc);
measure_plan([{M, S} | Rest], Base, Io, Acc) ->
    receive
        {?MODULE, interrupt} -> lists:reverse(Acc)
    after 0 ->
            measure_plan(Rest, Base, Io, [measure(Base#{model => M}, S, Io) | Acc])
    end.

scaling_partial(Dir, Quick, {Cores, Idle, TimeMs, Rounds, Started}, Rows, {Done, All}) ->
    Document = #{format => ?SCALING_FORMAT, created_at => terrain_lab_run:timestamp(), partial => true,
                 cores => Cores, idle_cpu_before => Idle, idle_cpu_after => null, quick => Quick,
                 time_ms => TimeMs, rounds => Rounds,
                 otp_release => list_to_binary(erlang:system_info(otp_release)),
                 lcnt => lcnt_available(), duration_s => (erlang:monotonic_time(millisecond) - Started) / 1000,
                 rows => Rows, ratios => [], lessons => []},
    File = filename:join(Dir, "scaling.json"),
    case steps([fun() -> terrain_lab_files:ensure_dir(File) end,
                fun() -> terrain_lab_files:write(File, [terrain_json:encode(Document, #{pretty => true}), $\n]) end,
                fun() -> manifest(Dir, [#{kind => emas_scaling, file => <<"scaling.json">>,
                                          parameters => #{quick => Quick, time_ms => TimeMs, partial => true}}])
                end]) of
        ok -> {error, {emas_lab, {scaling_interrupted, Done, All, File}}};
        {error, _} = Error -> Error
    end.

scaling_done(Dir, Quick, {Cores, Idle, TimeMs, Rounds, Started, Base}, Rows, #{io := Io, tables := Tables}) ->
    Lessons = lessons(Base, Io),
    Elapsed = (erlang:monotonic_time(millisecond) - Started) / 1000,
    IdleAfter = idle_cpu(),
    Document = #{format => ?SCALING_FORMAT, created_at => terrain_lab_run:timestamp(), partial => false,
                 cores => Cores, idle_cpu_before => Idle, idle_cpu_after => IdleAfter, quick => Quick,
                 time_ms => TimeMs, rounds => Rounds,
                 otp_release => list_to_binary(erlang:system_info(otp_release)),
                 lcnt => lcnt_available(), duration_s => Elapsed,
                 rows => Rows, ratios => ratios(Rows), lessons => Lessons},
    terrain_lab_io:progress(Io, "CPU ~.1f% idle after measuring~n", [100 * IdleAfter]),
    _ = Tables(Rows, Lessons),
    File = filename:join(Dir, "scaling.json"),
    case steps([fun() -> filelib:ensure_dir(File) end,
                fun() -> terrain_lab_files:write_json(File, Document) end,
                fun() -> manifest(Dir, [#{kind => emas_scaling, file => <<"scaling.json">>,
                                          parameters => #{quick => Quick, time_ms => TimeMs}}]) end]) of
        ok -> {ok, File, Elapsed};
        {error, _} = Error -> Error
    end.

%% @doc The row of one configuration: the run with the median rate stands for it
%% (rates and utilisations of every run are kept).
-spec scaling_row(atom(), pos_integer(), [map(), ...], pos_integer()) -> map().
scaling_row(Model, Schedulers, Runs, Cores) ->
    Sorted = lists:sort(fun(A, B) -> maps:get(reproductions_per_s, A) =< maps:get(reproductions_per_s, B) end, Runs),
    #{reproductions_per_s := Rate, utilisation := Util, cpu_cores := Cpu} = lists:nth((length(Sorted) + 1) div 2,
                                                                                      Sorted),
    #{model => Model, schedulers => Schedulers, reproductions_per_s => Rate, utilisation => Util, cpu_cores => Cpu,
      reproductions_per_cpu_s => per_cpu(Rate, Cpu),
      runs => length(Runs), oversubscribed => Schedulers > Cores,
      runs_reproductions_per_s => [maps:get(reproductions_per_s, R) || R <- Runs],
      runs_utilisation => [maps:get(utilisation, R) || R <- Runs],
      runs_cpu_cores => [maps:get(cpu_cores, R) || R <- Runs]}.

ratio(B, A) when is_float(B), is_float(A), A > 0 -> B / A;
ratio(_, _) -> null.

%% @doc Each configuration's rate relative to its model's with 1 scheduler.
-spec ratios([map()]) -> [map()].
ratios(Rows) ->
    [#{model => M, schedulers => S,
       ratio_to_1 => Rate / max(1.0e-9, one(M, Rows)), utilisation => U}
     || #{model := M, schedulers := S, reproductions_per_s := Rate, utilisation := U} <- Rows, S > 1].

one(Model, Rows) ->
    hd([R || #{model := M, schedulers := 1, reproductions_per_s := R} <- Rows, M =:= Model]).

%% One run of EMAS in a VM of its own with +S Schedulers:Schedulers.
measure(Options, Schedulers, Io) ->
    measure(Options, Schedulers, false, Io).

measure(#{model := Model} = Options, Schedulers, Msacc, Io) ->
    with_peer(#{schedulers => Schedulers}, fun(Peer) ->
                            Msacc andalso peer:call(Peer, msacc, start, [], ?PEER_TIMEOUT),
                            {ok, #{summary := Summary}} = peer:call(Peer, terrain_workloads, emas, [Options],
                                                                    maps:get(time_ms, Options) + ?PEER_TIMEOUT),
                            Extra = case Msacc of
                                        true ->
                                            peer:call(Peer, msacc, stop, [], ?PEER_TIMEOUT),
                                            #{msacc => msacc_shares(peer:call(Peer, msacc, stats, [], ?PEER_TIMEOUT))};
                                        false -> #{}
                                    end,
                            #{reproductions_per_s := Rate, cpu_cores := Cores} = Summary,
                            Result = maps:merge(maps:with([reproductions_per_s, utilisation, best_fitness,
                                                           fights_per_s], Summary),
                                                Extra#{cpu_cores => Cores,
                                                       reproductions_per_cpu_s => per_cpu(Rate, Cores)}),
                            terrain_lab_io:progress(Io, "  ~-10s +S ~b ~ts: ~b reproductions/s, utilisation "
                                                     "~.2f, ~ts cores of CPU~n",
                                                     [Model, Schedulers, variant(Options),
                                                      round(maps:get(reproductions_per_s, Result)),
                                                      maps:get(utilisation, Result),
                                                      show_cores(maps:get(cpu_cores, Result))]),
                            Result
                    end).

per_cpu(Rate, Cores) when is_float(Cores), Cores > 0 -> Rate / Cores;
per_cpu(_, _) -> null.

show_cores(null) -> "?";
show_cores(Cores) -> io_lib:format("~.2f", [Cores]).

variant(Options) ->
    lists:join(" ", [io_lib:format("~ts=~0tp", [K, V]) || {K, V} <- maps:to_list(maps:without([model, time_ms, seed],
                                                                                              Options))]).

%% A VM measured on its own (terrain_lab_vm, local_linked over standard I/O: this VM
%% need not be distributed), with no busy wait and none of the lab's other flags.
with_peer(Options, Fun) ->
    Vm = start_vm(maps:merge(#{transport => local_linked, name => emas, control => standard_io, lean => false},
                             Options)),
    try Fun(terrain_lab_vm:peer(Vm))
    after
        _ = terrain_lab_vm:stop(Vm, ?PEER_TIMEOUT)
    end.

start_vm(Options) ->
    {ok, Vm} = terrain_lab_vm:start(Options),
    [{ok, Booted}] = terrain_lab_vm:await_boot([Vm], erlang:monotonic_time(millisecond) + ?PEER_TIMEOUT),
    Booted.

%% msacc: the share of thread time in each state, over all scheduler threads.
msacc_shares(Stats) ->
    Schedulers = [Counters || #{type := scheduler, counters := Counters} <- Stats],
    Totals = lists:foldl(fun(C, Acc) -> maps:fold(fun(K, V, A) -> maps:update_with(K, fun(X) -> X + V end, V, A) end,
                                                  Acc, C) end, #{}, Schedulers),
    All = max(1, lists:sum(maps:values(Totals))),
    maps:map(fun(_, V) -> V / All end, Totals).

%% Anielski &amp; Stypka's lessons, each as a pair measured side by side with 2 schedulers.
lessons(Base, Io) ->
    terrain_lab_io:progress(Io, "lessons (2 schedulers each):~n", []),
    Pair = fun(Model, Key, A, B, Msacc) ->
                   RA = measure(Base#{model => Model, Key => A}, 2, Msacc, Io),
                   RB = measure(Base#{model => Model, Key => B}, 2, Msacc, Io),
                   #{model => Model, option => Key, values => [A, B], results => [RA, RB],
                     ratio => maps:get(reproductions_per_s, RB) / max(1.0e-9, maps:get(reproductions_per_s, RA)),
                     ratio_per_cpu => ratio(maps:get(reproductions_per_cpu_s, RB),
                                            maps:get(reproductions_per_cpu_s, RA))}
           end,
    #{call_vs_cast => Pair(concurrent, arena_call, call, cast, true),
      list_vs_binary => [Pair(skel, solution, list, binary, false), Pair(concurrent, solution, list, binary, false)],
      time_check => Pair(concurrent, time_check_interval, 1, 100, true),
      messages => message_costs(Io)}.

%% Round trips of one solution between two processes on one node, and between two
%% nodes, as a list and as a binary.
message_costs(Io) ->
    Count = 5000,
    Local = with_peer(#{schedulers => 2},
                      fun(Peer) ->
                              [peer:call(Peer, terrain_workloads, emas_message_cost,
                                         [#{solution => K, messages => Count}],
                                         ?PEER_TIMEOUT) || K <- [list, binary]]
                      end),
    Remote = try between_nodes(Count)
             catch
                 Class:Why -> #{error => iolist_to_binary(io_lib:format("~0tp:~0tp", [Class, Why]))}
             end,
    Result = #{local => Local, between_nodes => Remote},
    [terrain_lab_io:progress(Io, "  messages ~ts ~ts: ~.1f us per round trip~n",
                              [Where, maps:get(solution, R), maps:get(round_trip_us, R)])
     || {Where, Rs} <- [{"local", Local}, {"between nodes", Remote}], is_list(Rs), R <- Rs],
    Result.

between_nodes(Count) ->
    ok = terrain_lab_dist:ensure_epmd(),   % named nodes need it
    Prefix = "emas" ++ os:getpid() ++ "_",
    Start = fun(Name) ->
                    %% controlled over stdio: this VM need not be distributed
                    start_vm(#{transport => local_linked, name => list_to_atom(Name), control => standard_io,
                               node => list_to_atom(Prefix ++ Name), lean => false, schedulers => 1,
                               args => ["-kernel", "prevent_overlapping_partitions", "false"]})
            end,
    A = Start("a"),
    try
        #{node := NB} = B = Start("b"),
        try
            [peer:call(terrain_lab_vm:peer(A), terrain_workloads, emas_message_cost,
                       [#{solution => K, messages => Count, node => NB}], ?PEER_TIMEOUT) || K <- [list, binary]]
        after
            _ = terrain_lab_vm:stop(B, ?PEER_TIMEOUT)
        end
    after
        _ = terrain_lab_vm:stop(A, ?PEER_TIMEOUT)
    end.

%%--------------------------------------------------------------------
%% Internal functions: the machine

%% The share of the machine's CPU time that was idle over one second (/proc/stat).
idle_cpu() ->
    case {read_cpu_times(), receive after 1000 -> ok end, read_cpu_times()} of
        {{ok, _, _} = Before, ok, {ok, _, _} = After} -> idle_share(Before, After);
        _ -> null
    end.

read_cpu_times() ->
    case file:read_file("/proc/stat") of
        {ok, Bin} -> cpu_times(Bin);
        {error, _} -> error
    end.

%% @doc The idle share of the CPU time between two samples of {@link cpu_times/1}.
-spec idle_share({ok, non_neg_integer(), non_neg_integer()}, {ok, non_neg_integer(), non_neg_integer()}) -> float().
idle_share({ok, B0, T0}, {ok, B1, T1}) ->
    1 - (B1 - B0) / max(1, T1 - T0).

%% @doc Busy and total CPU time (in ticks, all CPUs) from the text of /proc/stat: its
%% first line, `cpu  user nice system idle iowait irq softirq steal ...'; idle and
%% iowait count as idle.
-spec cpu_times(binary()) -> {ok, Busy :: non_neg_integer(), Total :: non_neg_integer()} | error.
cpu_times(Bin) ->
    [Line | _] = binary:split(Bin, <<"\n">>),
    try [list_to_integer(F) || F <- tl(string:lexemes(binary_to_list(Line), " "))] of
        [User, Nice, System, Idle, IoWait, Irq, SoftIrq, Steal | _] ->
            Busy = User + Nice + System + Irq + SoftIrq + Steal,
            {ok, Busy, Busy + Idle + IoWait};
        _ ->
            error
    catch
        error:badarg -> error
    end.

%% @doc Whether this installation has the lock-counting emulator lcnt needs: `erl
%% -emu_type lcnt' starts and halts with status 0 within 30 s.
-spec lcnt_available() -> boolean().
lcnt_available() ->
    Erl = filename:join([code:root_dir(), "bin", "erl"]),
    case terrain_lab_os:run(Erl, ["-emu_type", "lcnt", "-noshell", "-eval", "halt()."], #{timeout => ?LCNT_PROBE_MS}) of
        {ok, 0, _} -> true;
        _ -> false
    end.
