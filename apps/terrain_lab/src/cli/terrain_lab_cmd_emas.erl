%% @private
%% @doc `terrain emas': one EMAS run (Anielski &amp; Stypka, "Boosting Evolution") into
%% `emas.csv' and `summary.json', and `terrain emas scaling': the scaling table
%% and Anielski &amp; Stypka's lessons measured on this machine, each configuration in a VM of
%% its own, into `scaling.json'. Both list their files in `DIR/manifest.json'. This
%% module reads the arguments and prints the results; the runs, the measuring and the
%% files are terrain_lab_emas's.
-module(terrain_lab_cmd_emas).

%% API (CLI)
-export([commands/0,
         run/3,
         format_error/1]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).


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
                   #{name => time_ms, long => "time-ms", type => integer, range => {1, 4294967295}, default => 5000,
                     metavar => "T",
                     help => "run time in ms"},
                   #{name => steps, long => "steps", type => integer, range => {1, inf}, metavar => "N",
                     help => "sequential, skel: run exactly N steps instead (reproducible)"},
                   #{name => islands, long => "islands", type => integer, range => {1, inf}, default => 4,
                     metavar => "I",
                     help => "islands"},
                   #{name => population, long => "population", type => integer, range => {1, inf}, default => 100,
                     metavar => "P",
                     help => "agents per island at the start"},
                   #{name => dimensions, long => "dimensions", type => integer, range => {1, inf}, default => 100,
                     metavar => "D",
                     help => "Rastrigin dimensions"},
                   #{name => seed, long => "seed", type => integer, range => {'-inf', inf}, default => 1,
                     metavar => "S",
                     help => "seed of every random choice"},
                   #{name => initial_energy, long => "initial-energy", type => integer, range => {1, inf},
                     default => 10,
                     metavar => "E", help => "energy of a new agent"},
                   #{name => migration_probability, long => "migration-probability", type => float,
                     default => 0.0001, metavar => "P", help => "chance an agent migrates in a step"},
                   #{name => topology, long => "topology", type => string, default => "mesh",
                     metavar => "ring|mesh|nearest_first", help => "where migrants go"},
                   #{name => solution, long => "solution", type => string, default => "binary",
                     metavar => "binary|list", help => "how solutions are held and sent"},
                   #{name => arena_call, long => "arena-call", type => string, default => "cast",
                     metavar => "cast|call", help => "concurrent: how agents enter arenas"},
                   #{name => arena_timeout, long => "arena-timeout", type => integer, range => {1, inf},
                     default => 1000,
                     metavar => "MS", help => "concurrent: how long a lone agent waits in an arena"},
                   #{name => time_check_interval, long => "time-check-interval", type => integer, range => {1, inf},
                     default => 1,
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
run(#{out := Dir, quick := Quick}, ["scaling"], Io) ->
    case terrain_lab_emas:scaling(Dir, #{io => Io, quick => Quick, interruptible => fun interruptible/1,
                                         tables => fun(Rows, Lessons) -> print_scaling(Rows, Lessons, Io) end}) of
        {ok, File, Elapsed} -> terrain_lab_io:out(Io, "scaling in ~ts (~b s)~n", [File, round(Elapsed)]);
        {error, _} = Error -> Error
    end;
run(_Options, [Other], _Io) ->
    {error, {usage, io_lib:format("unknown emas subcommand '~ts' (expected scaling)", [Other])}}.

%% @doc A sentence for this command's errors.
-spec format_error({emas_cmd, term()}) -> iolist().
format_error({emas_cmd, {bad_predicate, Text, Why}}) ->
    io_lib:format("cannot read the predicate ~ts: ~ts", [Text, Why]);
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
                    case guard(EmasOptions, maps:get(spec, Options, undefined)) of
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
%% more; in the concurrent model each agent is a process as well. Without --spec every
%% island runs on this VM; with it the islands spread over the lab's nodes, and an
%% island's agents are on one node.
guard(#{islands := Islands, population := Population, dimensions := Dimensions, solution := Solution,
        model := Model}, Spec) ->
    Agents = Islands * Population,
    PerDimension = case Solution of binary -> 8; list -> 32 end,
    Processes = case Model of concurrent -> Agents; _ -> Islands end,
    {Option, OnOneVm, Target} = case {Spec, Model} of
                                    {undefined, _} -> {process_option(Model), Processes, this_vm};
                                    {_, concurrent} -> {"--population", Population, lab_node};
                                    {_, _} -> {"--islands", 1, lab_node}
                                end,
    terrain_lab_steps:run([fun(_) -> terrain_lab_guard:processes(Option, OnOneVm, Target) end,
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

single(EmasOptions, #{spec := SpecFile, pred := PredText, out := Dir}, Io) ->
    Cluster = case SpecFile of
                  undefined -> {ok, #{}};
                  _ -> case predicates(PredText) of
                           {ok, Preds} -> {ok, #{cluster => {SpecFile, Preds}}};
                           {error, _} = Bad -> Bad
                       end
              end,
    case Cluster of
        {ok, Options} ->
            case terrain_lab_emas:run(EmasOptions, Dir, Options#{io => Io, interruptible => fun interruptible/1}) of
                {ok, Summary} ->
                    print_summary(Summary, Io),
                    terrain_lab_io:out(Io, "results in ~ts~n", [Dir]);
                {error, _} = Failed ->
                    Failed
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

%% Runs `Fun' with SIGTERM turned into a message to this process, which
%% terrain_lab_emas's measuring receives between seconds or configurations.
interruptible(Fun) ->
    ok = terrain_lab_cli_signals:on_interrupt(self(), {terrain_lab_emas, interrupt}),
    try Fun()
    after ok = terrain_lab_cli_signals:clear()
    end.

print_summary(#{model := Model, initial_best_fitness := Initial, best_fitness := Best, reproductions_per_s := Rate,
                utilisation := U, schedulers := S, energy_initial := E0, energy_final := E1,
                cpu_cores := Cpu} = Summary,
              Io) ->
    Where = case maps:get(node_usage, Summary, []) of
                [] -> io_lib:format("on ~b schedulers", [S]);
                Nodes -> io_lib:format("over ~b nodes", [length(Nodes)])
            end,
    terrain_lab_io:out(Io, "~ts: best fitness ~.2f (from ~.2f), ~b reproductions/s, utilisation ~.2f ~ts "
                        "(~.2f cores of CPU), ~b migrations, energy ~b -> ~b~n",
                        [Model, float(Best), float(Initial), round(Rate), U, Where, Cpu, maps:get(migrations, Summary),
                         E0, E1]).

%%--------------------------------------------------------------------
%% Scaling

print_scaling(Rows, Lessons, Io) ->
    terrain_lab_io:out(Io, "~-11s ~10s ~16s ~11s ~9s ~9s ~12s~n", ["MODEL", "SCHEDULERS", "REPRODUCTIONS/S",
                                                                     "UTILISATION", "RATIO", "CPU", "REPR/CPU-S"]),
    [terrain_lab_io:out(Io, "~-11s ~10ts ~16b ~11.2f ~9.2f ~9ts ~12ts~n",
                         [M, [integer_to_list(S), case O of true -> "*"; false -> "" end], round(R), U,
                          R / max(1.0e-9, one(M, Rows)), show_cores(C), show_rate(P)])
     || #{model := M, schedulers := S, reproductions_per_s := R, utilisation := U, oversubscribed := O,
          cpu_cores := C, reproductions_per_cpu_s := P} <- Rows],
    terrain_lab_io:out(Io, "* oversubscribed: more schedulers than logical processors~n"
                        "CPU: CPU time the VM was given during the run, in cores "
                        "(2.00 = both cores all the time)~n~n", []),
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

one(Model, Rows) ->
    hd([R || #{model := M, schedulers := 1, reproductions_per_s := R} <- Rows, M =:= Model]).

show_rate(null) -> "?";
show_rate(Rate) -> integer_to_list(round(Rate)).

show_ratio(null) -> "?";
show_ratio(Ratio) -> io_lib:format("~.2f", [Ratio]).

show_cores(null) -> "?";
show_cores(Cores) -> io_lib:format("~.2f", [Cores]).
