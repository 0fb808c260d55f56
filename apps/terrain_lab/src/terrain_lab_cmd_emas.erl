%% @private
%% @doc `terrain emas': one EMAS run (Anielski &amp; Stypka, "Boosting Evolution") into
%% `emas.csv' and `summary.json', and `terrain emas scaling': the scaling table
%% and Anielski &amp; Stypka's lessons measured on this machine, each configuration in a VM of
%% its own, into `scaling.json'. Both list their files in `DIR/manifest.json'.
-module(terrain_lab_cmd_emas).

%% API (CLI)
-export([commands/0,
         run/3,
         format_error/1]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(SUMMARY_FORMAT, ?TERRAIN_FORMAT_EMAS).
-define(SCALING_FORMAT, ?TERRAIN_FORMAT_EMAS_SCALING).
-define(CSV_COLUMNS, [second, island, reproductions, fights, deaths, migrations, best_fitness]).
-define(MODELS, [sequential, hybrid, concurrent, skel]).
-define(SCHEDULERS, [1, 2, 4, 8]).
%% VM arguments of every measured VM: no scheduler busy-waiting, so that the CPU an
%% idle scheduler would spin away goes to the work (and to the machine's other users).
-define(PEER_TIMEOUT, 60000).

%%--------------------------------------------------------------------
%% The command

%% @doc The command's entry for `terrain_lab_cli:commands/0'.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "emas",
       summary => "Run EMAS (evolutionary multi-agent system) in one of four models, or its scaling table",
       usage => "[scaling]",
       description => "Runs the evolutionary multi-agent system of Anielski & Stypka on Rastrigin's function "
                      "with erlang-emas's defaults (4 islands of 100 agents, 100 dimensions) in the model "
                      "MODEL for --time-ms, and writes DIR/emas.csv (per second and island: reproductions, "
                      "fights, deaths, migrations, best fitness), DIR/summary.json (terrain.emas/1) and "
                      "DIR/manifest.json; prints a summary line. --spec starts that cluster and puts the "
                      "islands (hybrid, skel) on the nodes that satisfy --pred (one term of terrain's "
                      "predicate language; a list means and), in turn. "
                      "'terrain emas scaling' runs every model with 1, 2, 4 and 8 schedulers (+S, a VM per "
                      "configuration; above the machine's cores is marked oversubscribed) and the lessons "
                      "(call vs cast arenas, binary vs list solutions between processes and nodes, the clock "
                      "read every step vs every 100), prints the tables and writes DIR/scaling.json "
                      "(terrain.emas_scaling/1). 1 and 2 schedulers run three times each, alternately, and the median "
                      "counts; --quick runs everything once for 1 s instead of 3 s.",
       args => {0, 1},
       options => [#{name => model, long => "model", type => string, default => "hybrid",
                     metavar => "sequential|hybrid|concurrent|skel", help => "how the islands run"},
                   #{name => time_ms, long => "time-ms", type => integer, range => {1, 4294967295}, default => 5000, metavar => "T",
                     help => "run time in ms"},
                   #{name => steps, long => "steps", type => integer, range => {1, inf}, metavar => "N",
                     help => "sequential, skel: run exactly N steps instead (reproducible)"},
                   #{name => islands, long => "islands", type => integer, range => {1, inf}, default => 4, metavar => "I",
                     help => "islands"},
                   #{name => population, long => "population", type => integer, range => {1, inf}, default => 100, metavar => "P",
                     help => "agents per island at the start"},
                   #{name => dimensions, long => "dimensions", type => integer, range => {1, inf}, default => 100, metavar => "D",
                     help => "Rastrigin dimensions"},
                   #{name => seed, long => "seed", type => integer, range => {'-inf', inf}, default => 1, metavar => "S",
                     help => "seed of every random choice"},
                   #{name => initial_energy, long => "initial-energy", type => integer, range => {1, inf}, default => 10,
                     metavar => "E", help => "energy of a new agent"},
                   #{name => migration_probability, long => "migration-probability", type => float,
                     default => 0.0001, metavar => "P", help => "chance an agent migrates in a step"},
                   #{name => topology, long => "topology", type => string, default => "mesh",
                     metavar => "ring|mesh|nearest_first", help => "where migrants go"},
                   #{name => solution, long => "solution", type => string, default => "binary",
                     metavar => "binary|list", help => "how solutions are held and sent"},
                   #{name => arena_call, long => "arena-call", type => string, default => "cast",
                     metavar => "cast|call", help => "concurrent: how agents enter arenas"},
                   #{name => arena_timeout, long => "arena-timeout", type => integer, range => {1, inf}, default => 1000,
                     metavar => "MS", help => "concurrent: how long a lone agent waits in an arena"},
                   #{name => time_check_interval, long => "time-check-interval", type => integer, range => {1, inf}, default => 1,
                     metavar => "N", help => "read the clock every N steps or meetings"},
                   #{name => spec, long => "spec", type => string, metavar => "SPEC",
                     help => "start this cluster spec and put the islands on its nodes (hybrid, skel)"},
                   #{name => pred, long => "pred", type => string, metavar => "TERM",
                     help => "with --spec: the predicate island nodes must satisfy (a list means and)"},
                   #{name => quick, long => "quick", type => flag,
                     help => "scaling: 1 s per configuration instead of 3 s"},
                   #{name => out, long => "out", type => string, metavar => "DIR",
                     help => "directory for the results (created if needed)"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain emas' or `terrain emas scaling'.
-spec run(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
run(#{out := undefined}, _Args, _Io) ->
    {error, {usage, "--out DIR is required"}};
run(Options, [], Io) ->
    case emas_options(Options) of
        {ok, EmasOptions} -> single(EmasOptions, Options, Io);
        {error, _} = Error -> Error
    end;
run(Options, ["scaling"], Io) ->
    scaling(Options, Io);
run(_Options, [Other], _Io) ->
    {error, {usage, io_lib:format("unknown emas subcommand '~ts' (expected scaling)", [Other])}}.

%% @doc A sentence for this command's errors.
-spec format_error({emas_cmd, term()}) -> iolist().
format_error({emas_cmd, {workload, Reason}}) ->
    terrain_workloads:format_error(Reason);
format_error({emas_cmd, {no_nodes, Preds}}) ->
    io_lib:format("no node of the cluster satisfies ~0tp", [Preds]);
format_error({emas_cmd, {peer, Config, Why}}) ->
    io_lib:format("the VM for ~ts failed: ~0tp", [Config, Why]);
format_error({emas_cmd, {bad_predicate, Text, Why}}) ->
    io_lib:format("cannot read the predicate ~ts: ~ts", [Text, Why]);
format_error({emas_cmd, {scaling_interrupted, Done, All, File}}) ->
    io_lib:format("interrupted (SIGTERM); the ~b of ~b runs finished before are kept in ~ts (marked partial)",
                  [Done, All, File]);
format_error({emas_cmd, {run_interrupted, Seconds, Best, File}}) ->
    [io_lib:format("interrupted (SIGTERM); the ~b seconds measured before are kept in ~ts (per second and island, "
                   "marked partial in manifest.json; no summary.json)", [Seconds, File]),
     case Best of
         none -> "";
         _ -> io_lib:format(", best fitness so far ~.2f", [Best])
     end];
format_error({emas_cmd, Other}) ->
    io_lib:format("~0tp", [Other]).

%%--------------------------------------------------------------------
%% Options

emas_options(Options) ->
    Atoms = [{model, ["sequential", "hybrid", "concurrent", "skel"]},
             {topology, ["ring", "mesh", "nearest_first"]},
             {solution, ["binary", "list"]},
             {arena_call, ["cast", "call"]}],
    case [{K, V} || {K, Allowed} <- Atoms, V <- [maps:get(K, Options)], not lists:member(V, Allowed)] of
        [{K, V} | _] ->
            {error, {usage, io_lib:format("--~ts must be one of ~ts, got '~ts'",
                                          [flag(K), lists:join(", ", proplists:get_value(K, Atoms)), V])}};
        [] ->
            Keys = [model, time_ms, islands, population, dimensions, seed, initial_energy, migration_probability,
                    topology, solution, arena_call, arena_timeout, time_check_interval],
            Base = maps:from_list([{K, value(K, maps:get(K, Options))} || K <- Keys]),
            EmasOptions = case maps:get(steps, Options) of
                              undefined -> Base;
                              Steps -> Base#{steps => Steps}
                          end,
            %% bad values are usage errors: the same checks the library makes
            case terrain_workloads:emas_validate(EmasOptions) of
                {ok, _} ->
                    case guard(EmasOptions) of
                        ok -> {ok, EmasOptions};
                        {error, _} = Error -> Error
                    end;
                {error, {emas, {bad_option, K, _}} = Reason} ->
                    {error, {usage, io_lib:format("--~ts: ~ts", [flag(K), terrain_workloads:format_error(Reason)])}};
                {error, Reason} ->
                    {error, {usage, terrain_workloads:format_error(Reason)}}
            end
    end.

%% The resource guard: every agent holds its solution (8 bytes a dimension as a
%% binary, 32 as a list of floats), twice while it reproduces, and about 300 bytes
%% more; in the concurrent model each agent is a process as well.
guard(#{islands := Islands, population := Population, dimensions := Dimensions, solution := Solution,
        model := Model}) ->
    Agents = Islands * Population,
    PerDimension = case Solution of binary -> 8; list -> 32 end,
    Processes = case Model of concurrent -> Agents; _ -> Islands end,
    terrain_lab_steps:run([fun(_) -> terrain_lab_guard:processes(process_option(Model), Processes) end,
                           fun(_) -> terrain_lab_guard:memory([{"--population", Agents,
                                                                2 * PerDimension * Dimensions + 300},
                                                               {process_option(Model), Processes,
                                                                terrain_lab_guard:process_bytes()}])
                           end], none).

process_option(concurrent) -> "--population";
process_option(_) -> "--islands".

value(K, V) when K =:= model; K =:= topology; K =:= solution; K =:= arena_call -> list_to_atom(V);
value(_, V) -> V.

flag(K) -> lists:flatten(string:replace(atom_to_list(K), "_", "-", all)).

%%--------------------------------------------------------------------
%% One run

single(EmasOptions, #{spec := undefined, out := Dir}, Io) ->
    execute(EmasOptions, Dir, Io);
single(EmasOptions, #{spec := SpecFile, pred := PredText, out := Dir}, Io) ->
    case predicates(PredText) of
        {ok, Preds} ->
            terrain_lab_io:progress(Io, "starting the cluster of ~ts...~n", [SpecFile]),
            case terrain_lab:start_cluster(SpecFile, #{prefix => "emas" ++ os:getpid() ++ "_"}) of
                {ok, Cluster} ->
                    try
                        Nodes = [N || #{node := N} <- terrain_lab:cluster_nodes(Cluster)],
                        {ok, _} = application:ensure_all_started(terrain),
                        case terrain:choose_nodes(Nodes, Preds) of
                            [] -> {error, {emas_cmd, {no_nodes, Preds}}};
                            Chosen ->
                                terrain_lab_io:progress(Io, "islands on ~ts~n",
                                                         [lists:join(", ", [atom_to_list(N) || N <- Chosen])]),
                                execute(EmasOptions#{nodes => Chosen}, Dir, Io)
                        end
                    after
                        terrain_lab:stop_cluster(Cluster)
                    end;
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

%% No --pred: every node of the cluster.
predicates(undefined) ->
    {ok, []};
predicates(Text) ->
    case terrain_lab_cli_options:parse_term(Text) of
        {ok, Pred} -> {ok, Pred};
        {error, Why} -> {error, {emas_cmd, {bad_predicate, Text, Why}}}
    end.

%% The run goes on in a process of its own; this one collects its rows second by
%% second, so that on SIGTERM it writes them (emas.csv, marked partial in the
%% manifest; no summary.json: the summary needs the islands' final state).
execute(EmasOptions, Dir, Io) ->
    #{model := Model} = EmasOptions,
    terrain_lab_io:progress(Io, "running EMAS (~ts) for ~ts...~n", [Model, extent(EmasOptions)]),
    Self = self(),
    Ref = make_ref(),
    ok = terrain_lab_cli_signals:on_interrupt(Self, {?MODULE, interrupt}),
    {Pid, MRef} = spawn_monitor(fun() -> Self ! {Ref, terrain_workloads:emas(EmasOptions#{progress => Self})} end),
    %% the rows so far are written (marked partial) as they come, so that a SIGINT or
    %% SIGKILL, which the CLI cannot catch, keeps the seconds measured too
    Checkpoint = fun(Rows) -> _ = write_partial(Dir, Rows, EmasOptions), ok end,
    Outcome = try await_run(Ref, Pid, MRef, Checkpoint, [])
              after ok = terrain_lab_cli_signals:clear()
              end,
    case Outcome of
        {interrupted, SoFar} ->
            exit(Pid, kill),
            run_partial(Dir, SoFar, EmasOptions);
        {done, Result} ->
            finish_run(Result, Dir, EmasOptions, Io)
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
            {error, {emas_cmd, {run_interrupted, Seconds, case Bests of [] -> none; _ -> lists:max(Bests) end, Csv}}};
        {error, _} = Error ->
            Error
    end.

%% emas.csv with the rows so far and a manifest that marks it partial.
write_partial(Dir, Rows, EmasOptions) ->
    Parameters = (json_parameters(EmasOptions))#{partial => true},
    steps([fun() -> filelib:ensure_dir(filename:join(Dir, "x")) end,
           fun() -> write_csv(filename:join(Dir, "emas.csv"), Rows) end,
           fun() -> manifest(Dir, [#{kind => emas, file => <<"emas.csv">>, parameters => Parameters}]) end]).

finish_run(Result, Dir, EmasOptions, Io) ->
    case Result of
        {ok, #{rows := Rows, summary := Summary}} ->
            case write_run(Dir, Rows, Summary, EmasOptions) of
                ok ->
                    print_summary(Summary, Io),
                    terrain_lab_io:out(Io, "results in ~ts~n", [Dir]);
                {error, _} = Error ->
                    Error
            end;
        {error, Reason} ->
            {error, {emas_cmd, {workload, Reason}}}
    end.

extent(#{steps := Steps}) -> io_lib:format("~b steps", [Steps]);
extent(#{time_ms := T}) -> io_lib:format("~b ms", [T]).

print_summary(#{model := Model, initial_best_fitness := Initial, best_fitness := Best, reproductions_per_s := Rate,
                utilisation := U, schedulers := S, energy_initial := E0, energy_final := E1, cpu_cores := Cpu} = Summary,
              Io) ->
    Where = case maps:get(node_usage, Summary, []) of
                [] -> io_lib:format("on ~b schedulers", [S]);
                Nodes -> io_lib:format("over ~b nodes", [length(Nodes)])
            end,
    terrain_lab_io:out(Io, "~ts: best fitness ~.2f (from ~.2f), ~b reproductions/s, utilisation ~.2f ~ts "
                        "(~.2f cores of CPU), ~b migrations, energy ~b -> ~b~n",
                        [Model, float(Best), float(Initial), round(Rate), U, Where, Cpu, maps:get(migrations, Summary),
                         E0, E1]).

write_run(Dir, Rows, Summary, EmasOptions) ->
    Csv = filename:join(Dir, "emas.csv"),
    Json = filename:join(Dir, "summary.json"),
    steps([fun() -> filelib:ensure_dir(filename:join(Dir, "x")) end,
           fun() -> write_csv(Csv, Rows) end,
           fun() -> terrain_json:write_file(Json, Summary#{format => ?SUMMARY_FORMAT}) end,
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
        {error, Why} when is_atom(Why) -> {error, {file, "output directory", Why}};
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
%% Scaling

scaling(#{out := Dir, quick := Quick}, Io) ->
    Cores = erlang:system_info(logical_processors_available),
    TimeMs = case Quick of true -> 1000; false -> 3000 end,
    Rounds = case Quick of true -> 1; false -> 3 end,
    Idle = idle_cpu(),
    terrain_lab_io:progress(Io, "CPU ~.1f% idle before measuring (~p logical processors); ~b ms per run~n",
                             [100 * Idle, Cores, TimeMs]),
    Base = #{time_ms => TimeMs, seed => 1},
    Started = erlang:monotonic_time(millisecond),
    Configs = [{M, S} || M <- ?MODELS, S <- ?SCHEDULERS],
    %% per model: 1 and 2 schedulers alternately, Rounds times each (the median counts), then 4 and 8
    Plan = lists:append([lists:append(lists:duplicate(Rounds, [{M, 1}, {M, 2}])) ++ [{M, 4}, {M, 8}]
                         || M <- ?MODELS]),
    %% SIGTERM stops after the current run: the configurations measured so far are
    %% written, marked partial (no lessons, no ratios)
    ok = terrain_lab_cli_signals:on_interrupt(self(), {?MODULE, interrupt}),
    Measured = try measure_plan(Plan, Base, Io, [])
               after ok = terrain_lab_cli_signals:clear()
               end,
    Done = lists:sublist(Plan, length(Measured)),
    Rows = [scaling_row(M, S, Runs, Cores)
            || {M, S} <- Configs,
               Runs <- [[R || {{M1, S1}, R} <- lists:zip(Done, Measured), M1 =:= M, S1 =:= S]], Runs =/= []],
    case length(Done) =:= length(Plan) of
        true -> scaling_done(Dir, Quick, {Cores, Idle, TimeMs, Rounds, Started, Base}, Rows, Io);
        false -> scaling_partial(Dir, Quick, {Cores, Idle, TimeMs, Rounds, Started}, Rows, {length(Done), length(Plan)})
    end.

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
        ok -> {error, {emas_cmd, {scaling_interrupted, Done, All, File}}};
        {error, _} = Error -> Error
    end.

scaling_done(Dir, Quick, {Cores, Idle, TimeMs, Rounds, Started, Base}, Rows, Io) ->
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
    print_scaling(Rows, Lessons, Io),
    File = filename:join(Dir, "scaling.json"),
    steps([fun() -> filelib:ensure_dir(File) end,
           fun() -> terrain_json:write_file(File, Document) end,
           fun() -> manifest(Dir, [#{kind => emas_scaling, file => <<"scaling.json">>,
                                     parameters => #{quick => Quick, time_ms => TimeMs}}]) end,
           fun() -> terrain_lab_io:out(Io, "scaling in ~ts (~b s)~n", [File, round(Elapsed)]) end]).

%% The run with the median rate stands for the configuration (rates and utilisations of
%% every run are kept).
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
                                                Extra#{cpu_cores => Cores, reproductions_per_cpu_s => per_cpu(Rate, Cores)}),
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

show_rate(null) -> "?";
show_rate(Rate) -> integer_to_list(round(Rate)).

show_ratio(null) -> "?";
show_ratio(Ratio) -> io_lib:format("~.2f", [Ratio]).

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
                     ratio_per_cpu => ratio(maps:get(reproductions_per_cpu_s, RB), maps:get(reproductions_per_cpu_s, RA))}
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
                              [peer:call(Peer, terrain_workloads, emas_message_cost, [#{solution => K, messages => Count}],
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
    _ = os:cmd("epmd -daemon"),   % returns at once when epmd runs; named nodes need it
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

print_scaling(Rows, Lessons, Io) ->
    terrain_lab_io:out(Io, "~-11s ~10s ~16s ~11s ~9s ~9s ~12s~n", ["MODEL", "SCHEDULERS", "REPRODUCTIONS/S",
                                                                     "UTILISATION", "RATIO", "CPU", "REPR/CPU-S"]),
    [terrain_lab_io:out(Io, "~-11s ~10ts ~16b ~11.2f ~9.2f ~9ts ~12ts~n",
                         [M, [integer_to_list(S), case O of true -> "*"; false -> "" end], round(R), U,
                          R / max(1.0e-9, one(M, Rows)), show_cores(C), show_rate(P)])
     || #{model := M, schedulers := S, reproductions_per_s := R, utilisation := U, oversubscribed := O,
          cpu_cores := C, reproductions_per_cpu_s := P} <- Rows],
    terrain_lab_io:out(Io, "* oversubscribed: more schedulers than logical processors~n"
                        "CPU: CPU time the VM was given during the run, in cores (2.00 = both cores all the time)~n~n", []),
    #{call_vs_cast := CC, list_vs_binary := LB, time_check := TC, messages := Msgs} = Lessons,
    terrain_lab_io:out(Io, "~-12s ~-20s ~16s ~16s ~7s ~13s~n", ["MODEL", "OPTION", "A (REPR/S)", "B (REPR/S)", "B/A",
                                                                 "B/A PER CPU"]),
    [terrain_lab_io:out(Io, "~-12s ~-20ts ~16ts ~16ts ~7.2f ~13ts~n",
                         [M, K, io_lib:format("~0tp ~b", [A, round(maps:get(reproductions_per_s, RA))]),
                          io_lib:format("~0tp ~b", [B, round(maps:get(reproductions_per_s, RB))]), Ratio,
                          show_ratio(PerCpu)])
     || #{model := M, option := K, values := [A, B], results := [RA, RB], ratio := Ratio, ratio_per_cpu := PerCpu}
            <- [CC | LB] ++ [TC]],
    terrain_lab_io:out(Io, "~n~-14s ~-8s ~14s ~14s~n", ["MESSAGES", "SOLUTION", "ROUND TRIP US", "BYTES"]),
    [terrain_lab_io:out(Io, "~-14s ~-8ts ~14.1f ~14b~n", [Where, maps:get(solution, R), maps:get(round_trip_us, R),
                                                          maps:get(bytes, R)])
     || {Where, Rs} <- [{"local", maps:get(local, Msgs)}, {"between nodes", maps:get(between_nodes, Msgs)}],
        is_list(Rs), R <- Rs],
    ok.

%% The share of the machine's CPU time that was idle over one second (/proc/stat).
idle_cpu() ->
    case {cpu_times(), receive after 1000 -> ok end, cpu_times()} of
        {{ok, B0, T0}, ok, {ok, B1, T1}} -> 1 - (B1 - B0) / max(1, T1 - T0);
        _ -> null
    end.

cpu_times() ->
    case file:read_file("/proc/stat") of
        {ok, Bin} ->
            [Line | _] = binary:split(Bin, <<"\n">>),
            [_Cpu | Fields] = string:lexemes(binary_to_list(Line), " "),
            [User, Nice, System, Idle, IoWait, Irq, SoftIrq, Steal | _] = [list_to_integer(F) || F <- Fields],
            Busy = User + Nice + System + Irq + SoftIrq + Steal,
            {ok, Busy, Busy + Idle + IoWait};
        {error, _} ->
            error
    end.

%% Whether this installation has the lock-counting emulator lcnt needs.
lcnt_available() ->
    Erl = filename:join([code:root_dir(), "bin", "erl"]),
    Port = open_port({spawn_executable, Erl}, [{args, ["-emu_type", "lcnt", "-noshell", "-eval", "halt()."]},
                                               exit_status, stderr_to_stdout]),
    wait_exit(Port).

wait_exit(Port) ->
    receive
        {Port, {exit_status, Status}} -> Status =:= 0;
        {Port, {data, _}} -> wait_exit(Port)
    after 30000 ->
            port_close(Port),
            false
    end.
