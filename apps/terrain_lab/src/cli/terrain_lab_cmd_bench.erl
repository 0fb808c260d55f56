%% @private
%% @doc `terrain bench CONFIG' and `terrain bench sweep CONFIG --spec SPEC --nodes
%% N,...': DE-Bench runs from the command line (docs/BENCH.md).
%%
%% The command table has one entry, `bench'; `sweep' as the first argument selects
%% the sweep (the parser has no subcommands), and `--nodes' means node names for a
%% run and cluster sizes for a sweep.
-module(terrain_lab_cmd_bench).

%% API (CLI handler)
-export([commands/0,
         run/3,
         format_error/1]).

-define(MAX_CONFIG_BYTES, 1024 * 1024).   % a configuration is a few lines

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The subcommands, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "bench",
       summary => "Run DE-Bench on every node of a cluster, or sweep cluster sizes",
       usage => "CONFIG | sweep CONFIG --spec SPEC --nodes N,...",
       description => "CONFIG is a file of Erlang terms (duration, warmup, concurrent, report_interval, "
                      "operations, argument_size, compute_us, target, mode, timeout, connect; docs/BENCH.md), checked "
                      "before anything starts. 'terrain bench CONFIG' runs one instance on every node of the "
                      "cluster 'terrain up' started (or --nodes, or a cluster started from --spec and stopped "
                      "after), released together; each node writes DE-Bench's CSV files and one HdrHistogram "
                      "log per operation to OUT/<node>/ (OUT: --out, else RUNS_DIR/<stamp>/bench), and "
                      "OUT/summary.json holds the cluster's figures from the merged histograms. Prints one "
                      "row per operation. Exits 1 after writing if an instance failed. 'terrain bench sweep "
                      "CONFIG --spec SPEC --nodes 2,4,8' starts a cluster of the first N nodes of SPEC for "
                      "each N (emulated when the spec has links), for every --argument-size and --compute-us, "
                      "and writes RUNS_DIR/<stamp>/sweep.csv, plots and manifest.json; progress and an ETA "
                      "go to stderr.",
       args => {1, 2},
       options => [#{name => spec, long => "spec", type => string, metavar => "SPEC",
                     help => "start this cluster spec for the run and stop it after (sweep: required)"},
                   #{name => nodes, long => "nodes", type => string, metavar => "NODE,...|N,...",
                     help => "run: nodes instead of the running cluster; sweep: cluster sizes"},
                   #{name => argument_size, long => "argument-size", type => string, metavar => "BYTES,...",
                     help => "sweep: argument sizes (default: the config's)"},
                   #{name => compute_us, long => "compute-us", type => string, metavar => "US,...",
                     help => "sweep: computation times (default: the config's)"},
                   #{name => out, long => "out", type => string, metavar => "DIR",
                     help => "run: write here (DIR/<node>/, DIR/summary.json) instead of a run directory"},
                   #{name => runs_dir, long => "runs-dir", type => string, default => "runs", metavar => "DIR",
                     help => "where the run directory is created"},
                   #{name => no_plots, long => "no-plots", type => flag,
                     help => "sweep: do not draw the plots"},
                   #{name => state_dir, long => "state-dir", type => string, default => ".terrain",
                     metavar => "DIR", help => "where the running cluster is recorded (env TERRAIN_STATE_DIR)"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain bench'.
-spec run(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
run(Options, Args, Io) ->
    case bench(Options, Args, Io) of
        {error, {bench_cmd, {Usage, _, _}} = Reason} when Usage =:= bad_list ->
            {error, {usage, Reason}};     % exit 2 (docs/CLI.md, Conventions)
        {error, {bench_cmd, {Usage, _}} = Reason} when Usage =:= missing_option; Usage =:= bad_arguments ->
            {error, {usage, Reason}};
        {error, {bench_cmd, sweep_needs_config} = Reason} ->
            {error, {usage, Reason}};
        Result ->
            Result
    end.

bench(Options, ["sweep", ConfigFile], Io) ->
    maybe_all([fun() -> read_config(ConfigFile) end,
               fun(_) -> sweep_options(Options, Io) end,
               fun([{SpecFile, SweepOptions}, Config]) ->
                       Sizes = maps:get(argument_size, SweepOptions, [maps:get(argument_size, Config)]),
                       case guard(Config#{argument_size := lists:max(Sizes)},
                                  lists:max(maps:get(nodes, SweepOptions))) of
                           ok -> {ok, SpecFile};
                           {error, _} = Error -> Error
                       end
               end],
              fun([Config, {SpecFile, SweepOptions}, _]) -> sweep(Config, SpecFile, SweepOptions, Io) end);
bench(_Options, ["sweep"], _Io) ->
    {error, {bench_cmd, sweep_needs_config}};
bench(Options, [ConfigFile], Io) ->
    case read_config(ConfigFile) of
        {ok, Config} ->
            case where_guarded(Config, Options) of
                {ok, Where} ->
                    RunOptions = maps:merge(#{nodes => Where, runs_dir => maps:get(runs_dir, Options),
                                              progress => progress(Io)},
                                            maps:filter(fun(out, V) -> V =/= undefined;
                                                           (_, _) -> false
                                                        end, Options)),
                    Result = case terrain_lab_bench:run(Config, RunOptions) of
                                 {ok, Out, Summary} -> report(Out, Summary, Io);
                                 {error, _} = Error -> Error
                             end,
                    explained(Where, Options, Result);
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end;
bench(_Options, Args, _Io) ->
    {error, {bench_cmd, {bad_arguments, Args}}}.

%% @doc A sentence for the errors of this command.
-spec format_error(term()) -> iolist().
format_error({bench_cmd, sweep_needs_config}) ->
    "bench sweep: give the configuration file: terrain bench sweep CONFIG --spec SPEC --nodes N,...";
format_error({bench_cmd, {bad_arguments, Args}}) ->
    io_lib:format("bench: expected CONFIG or sweep CONFIG, got ~ts", [lists:join(" ", Args)]);
format_error({bench_cmd, {missing_option, Option}}) ->
    io_lib:format("bench sweep: ~ts is required", [Option]);
format_error({bench_cmd, {bad_list, Option, Text}}) ->
    io_lib:format("bench: ~ts must be a comma-separated list of different non-negative integers, got '~ts'",
                  [Option, Text]);
format_error({bench_cmd, {failed_instances, Failed}}) ->
    io_lib:format("bench: the instance on ~ts failed; what it measured before is in the figures",
                  [lists:join(", ", [N || #{node := N} <- Failed])]);
format_error({bench_lab, _} = Reason) ->
    terrain_lab_bench:format_error(Reason);
format_error(Reason) ->
    terrain_bench:format_error(Reason).

%%--------------------------------------------------------------------
%% Internal

%% A configuration file through the lab's bounded reader (a regular file of at most
%% ?MAX_CONFIG_BYTES bytes, its nesting and atoms counted before it is parsed: `bench
%% /dev/zero' used to read until memory ran out), then validated by terrain_bench.
-spec read_config(file:filename()) -> {ok, terrain_bench:config()} | {error, term()}.
read_config(File) ->
    case terrain_lab_files:consult(File, #{max_bytes => ?MAX_CONFIG_BYTES}) of
        {ok, Terms} -> terrain_bench:validate_config(Terms);
        {error, _} = Error -> Error
    end.

maybe_all(Steps, Then) ->
    maybe_all(Steps, Then, []).

maybe_all([], Then, Acc) ->
    Then(lists:reverse(Acc));
maybe_all([Step | Rest], Then, Acc) ->
    Result = case erlang:fun_info(Step, arity) of
                 {arity, 0} -> Step();
                 {arity, 1} -> Step(Acc)
             end,
    case Result of
        {ok, Value} -> maybe_all(Rest, Then, [Value | Acc]);
        {error, _} = Error -> Error
    end.

%% Where the run goes, once the resource guard let it: the nodes of the spec or the
%% running cluster (or --nodes).
where_guarded(Config, Options) ->
    case where(Options) of
        {ok, {spec, File} = Where} ->
            case terrain_lab:read_spec(File) of
                {ok, Spec} -> guarded(guard(Config, length(terrain_lab_spec:nodes(Spec))), Where);
                {error, _} = Error -> Error
            end;
        {ok, Nodes} ->
            guarded(guard(Config, length(Nodes)), Nodes);
        {error, _} = Error ->
            Error
    end.

guarded(ok, Where) -> {ok, Where};
guarded({error, _} = Error, _Where) -> Error.

%% The resource guard: every worker sends its argument (random bytes) to a target,
%% which holds a copy while it answers; with the copies in flight and the CRC, about
%% four times the argument per worker, `concurrent' workers on every node.
guard(#{argument_size := Bytes, concurrent := Concurrent}, Nodes) ->
    Workers = Concurrent * max(1, Nodes),
    terrain_lab_steps:run([fun(_) -> terrain_lab_guard:processes("concurrent (the configuration)", Concurrent,
                                                                   lab_node) end,
                           fun(_) ->
                                   Option = "argument_size (the configuration or --argument-size)",
                                   terrain_lab_guard:memory([{Option, Workers,
                                                              4 * Bytes + terrain_lab_guard:process_bytes()}])
                           end], none).

%% A run on the cluster `terrain up' recorded that failed: with its VMs that exited
%% (terrain_lab_launch_status:explain/2). A run on a spec's own cluster names them already.
explained(_Where, _Options, ok) ->
    ok;
explained({spec, _}, _Options, Error) ->
    Error;
explained(_Nodes, Options, Error) ->
    terrain_lab_launch_status:explain(terrain_lab_cluster_state:state_dir(Options), Error).

where(#{spec := Spec}) when is_list(Spec) ->
    {ok, {spec, Spec}};
where(Options) ->
    terrain_lab_cluster_state:connect(Options).

sweep_options(#{spec := Spec} = Options, Io) when is_list(Spec) ->
    maybe_all([fun() -> int_list(nodes, "--nodes", Options, required) end,
               fun(_) -> int_list(argument_size, "--argument-size", Options, optional) end,
               fun(_) -> int_list(compute_us, "--compute-us", Options, optional) end],
              fun([Sizes, ArgSizes, Computes]) ->
                      Base = #{nodes => Sizes, runs_dir => maps:get(runs_dir, Options), progress => progress(Io),
                               plots => not maps:get(no_plots, Options, false)},
                      {ok, {Spec, maps:merge(Base, maps:filter(fun(_, V) -> V =/= none end,
                                                               #{argument_size => ArgSizes,
                                                                 compute_us => Computes}))}}
              end);
sweep_options(_Options, _Io) ->
    {error, {bench_cmd, {missing_option, "--spec"}}}.

int_list(Key, Option, Options, Need) ->
    case {maps:get(Key, Options, undefined), Need} of
        {undefined, required} -> {error, {bench_cmd, {missing_option, Option}}};
        {undefined, optional} -> {ok, none};
        {Text, _} ->
            case terrain_lab_cli:list_of(integer, Text) of
                {ok, [_ | _] = Ints} ->
                    %% each value once: a sweep point twice would start its cluster twice
                    case lists:all(fun(I) -> I >= 0 end, Ints) andalso length(lists:usort(Ints)) =:= length(Ints) of
                        true -> {ok, Ints};
                        false -> {error, {bench_cmd, {bad_list, Option, Text}}}
                    end;
                _ ->
                    {error, {bench_cmd, {bad_list, Option, Text}}}
            end
    end.

sweep(Config, SpecFile, Options, Io) ->
    case terrain_lab_bench:sweep(Config, SpecFile, Options) of
        {ok, RunDir, Rows} ->
            terrain_lab_io:out(Io, "~-7s ~-5s ~-5s ~-18s ~10s ~8s ~10s ~9s ~9s~n",
                                ["NODES", "ARG", "US", "OP", "COUNT", "ERRORS", "OPS/S", "P50_US", "P99_US"]),
            [terrain_lab_io:out(Io, "~-7b ~-5b ~-5b ~-18s ~10b ~8b ~10.1f ~9b ~9b~n",
                                 [N, A, C, Op, Count, Errors, float(T), P50, P99])
             || [N, A, C, Op, Count, Errors, T, P50, _P90, _P95, P99 | _] <- Rows],
            terrain_lab_io:out(Io, "sweep: ~ts~n", [filename:join(RunDir, "sweep.csv")]),
            ok;
        {error, _} = Error ->
            Error
    end.

progress(Io) ->
    fun(Text) -> terrain_lab_io:progress(Io, "~ts", [Text]) end.

report(Out, #{operations := Ops, total := Total, failed_instances := Failed, nodes := Nodes}, Io) ->
    terrain_lab_io:out(Io, "~-18s ~9s ~7s ~10s ~8s ~8s ~8s ~9s ~9s~n",
                        ["OP", "COUNT", "ERRORS", "OPS/S", "P50_US", "P99_US", "P999_US", "MAX_US", "NODES_P99"]),
    [begin
         #{count := Count, error_count := Errors, throughput := T, latency_us := L,
           per_node_percentile_mean := Mean} = maps:get(Op, Ops),
         terrain_lab_io:out(Io, "~-18s ~9b ~7b ~10.1f ~8b ~8b ~8b ~9b ~9s~n",
                             [Op, Count, Errors, float(T), maps:get(p50, L), maps:get(p99, L), maps:get(p999, L),
                              maps:get(max, L), mean_p99(Mean)])
     end || Op <- lists:sort(maps:keys(Ops))],
    #{count := C, errors := E, throughput := TT} = Total,
    terrain_lab_io:out(Io, "~-18s ~9b ~7b ~10.1f~n", ["total", C, E, float(TT)]),
    terrain_lab_io:out(Io, "~b nodes; per node: ~ts/<node>/; summary: ~ts~n",
                        [length(Nodes), Out, filename:join(Out, "summary.json")]),
    case Failed of
        [] -> ok;
        _ -> {error, {bench_cmd, {failed_instances, Failed}}}
    end.

mean_p99(null) -> "-";
mean_p99(#{p99 := P}) -> float_to_list(float(P), [{decimals, 0}]).
