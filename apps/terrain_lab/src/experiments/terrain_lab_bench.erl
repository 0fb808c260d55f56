%% @private
%% @doc The lab side of `terrain bench': a DE-Bench run on the running cluster or on
%% a cluster started from a spec for the run, and sweeps over cluster sizes, argument
%% sizes and computation times (Ghaffari, Erlang Workshop 2014), each recorded in a
%% run directory with its manifest. Progress goes through the caller's callback.
-module(terrain_lab_bench).

%% API
-export([run/2,
         sweep/3,
         format_error/1]).

-export_type([run_options/0, sweep_options/0]).

-type progress() :: fun((iodata()) -> ok).

-type run_options() ::
        #{nodes := [node()] | {spec, file:filename()},  % the cluster: its nodes, or a spec to start and stop
          out => file:filename(),                      % output directory (default RUNS_DIR/<stamp>/bench)
          runs_dir => file:filename(),                 % where the run directory is created (default "runs")
          progress => progress()}.                     % progress lines (default: none)

-type sweep_options() ::
        #{nodes := [pos_integer()],                    % cluster sizes: the first N nodes of the spec
          argument_size => [non_neg_integer()],        % argument sizes to sweep (default: the config's)
          compute_us => [non_neg_integer()],           % computation times to sweep (default: the config's)
          runs_dir => file:filename(),                 % where the run directory is created (default "runs")
          progress => progress(),                      % progress lines with an ETA (default: none)
          plots => boolean()}.                         % draw the plots with terrain-analysis (default true)

-define(SWEEP_COLUMNS, "nodes,argument_size,compute_us,op,count,errors,throughput,p50,p90,p95,p99,p999,max,"
                       "per_node_p99_mean,failed_instances").
-define(SPEC_PREFIX_TAG, "bench").

%%--------------------------------------------------------------------
%% API

%% @doc One run of a validated configuration. Returns the output directory and the
%% summary (`terrain.bench/1').
-spec run(terrain_bench:config(), run_options()) -> {ok, file:filename(), map()} | {error, term()}.
run(Config, #{nodes := Where} = Options) ->
    Progress = maps:get(progress, Options, fun(_) -> ok end),
    case out_dir(Options) of
        {ok, RunDir, Out} ->
            Result = with_cluster(Where, Progress,
                                  fun(Nodes) -> terrain_bench:run(Nodes, Config, Out, #{progress => Progress}) end),
            case Result of
                {ok, Summary} ->
                    ok = manifest(RunDir, Out, Config, Where),
                    {ok, Out, Summary};
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc A sweep: for every argument size, computation time and cluster size (the
%% first N nodes of the spec; emulated when the spec has link options) a cluster is
%% started, the configuration runs on it, and it is stopped. Writes
%% `RUNS_DIR/<stamp>/sweep.csv' (one row per point and operation), every run's
%% directory under `points/', the plots (terrain-analysis bench) and the manifest.
-spec sweep(terrain_bench:config(), file:filename(), sweep_options()) ->
          {ok, file:filename(), [list()]} | {error, term()}.
sweep(Config, SpecFile, #{nodes := Sizes} = Options) ->
    Progress = maps:get(progress, Options, fun(_) -> ok end),
    case terrain_lab:read_spec(SpecFile) of
        {ok, #{nodes := SpecNodes} = Spec} ->
            case [N || N <- Sizes, N > length(SpecNodes) orelse N < 1] of
                [Bad | _] ->
                    {error, {bench_lab, {too_many_nodes, Bad, length(SpecNodes), SpecFile}}};
                [] ->
                    case terrain_lab_run:create(maps:get(runs_dir, Options, "runs")) of
                        {ok, RunDir} -> sweep_points(Config, Spec, SpecFile, Options, RunDir, Progress);
                        {error, _} = Error -> Error
                    end
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc A sentence for the errors of this module.
-spec format_error(term()) -> iolist().
format_error({bench_lab, {too_many_nodes, N, Have, Spec}}) ->
    io_lib:format("cannot sweep to ~b nodes: ~ts has ~b", [N, Spec, Have]);
format_error({bench_lab, {point_failed, Point, {Tag, _} = Why}}) when Tag =:= bench; Tag =:= bench_config ->
    io_lib:format("sweep point ~ts failed: ~ts", [point_label(Point), terrain_bench:format_error(Why)]);
format_error({bench_lab, {point_failed, Point, Why}}) ->
    io_lib:format("sweep point ~ts failed: ~ts", [point_label(Point), terrain_lab:format_error(Why)]).

%%--------------------------------------------------------------------
%% Internal

out_dir(#{out := Out}) ->
    case filelib:is_dir(Out) andalso element(2, file:list_dir(Out)) =/= [] of
        true -> {error, {output_exists, Out}};
        false ->
            %% made here, so that a directory that refuses it says why (read-only: erofs)
            case terrain_lab_files:make_dir(Out) of
                ok -> {ok, Out, Out};
                {error, _} = Error -> Error
            end
    end;
out_dir(Options) ->
    case terrain_lab_run:create(maps:get(runs_dir, Options, "runs")) of
        {ok, RunDir} -> {ok, RunDir, filename:join(RunDir, "bench")};
        {error, _} = Error -> Error
    end.

%% Runs Fun on the given nodes, or on a cluster started from a spec (and stopped
%% after, whatever happens).
with_cluster({spec, File}, Progress, Fun) ->
    case terrain_lab:read_spec(File) of
        {ok, Spec} -> with_spec_cluster(Spec, Progress, Fun);
        {error, _} = Error -> Error
    end;
with_cluster(Nodes, _Progress, Fun) when is_list(Nodes) ->
    Fun(Nodes).

with_spec_cluster(#{nodes := SpecNodes} = Spec, Progress, Fun) ->
    Prefix = ?SPEC_PREFIX_TAG ++ os:getpid() ++ "_",
    Progress(io_lib:format("bench: starting ~b nodes of ~s~n", [length(SpecNodes), maps:get(name, Spec)])),
    terrain_lab:with_cluster(Spec, #{prefix => Prefix}, fun(Infos) -> Fun([N || #{node := N} <- Infos]) end).

manifest(RunDir, Out, Config, Where) ->
    Relative = fun(F) -> list_to_binary(relative(F, RunDir)) end,
    Parameters = #{config => terrain_bench:config_to_json(Config), cluster => where_json(Where)},
    Outputs = [#{kind => bench_summary, file => Relative(filename:join(Out, "summary.json")),
                 parameters => Parameters},
               #{kind => bench_node_files, file => Relative(Out),
                 parameters => #{files => [list_to_binary(F) || F <- terrain_bench:files(Config)]}}],
    terrain_lab_run:write_manifest(RunDir, bench, Outputs).

where_json({spec, File}) -> #{spec => list_to_binary(filename:absname(File))};
where_json(Nodes) -> #{nodes => [atom_to_binary(N) || N <- Nodes]}.

relative(File, Dir) ->
    Abs = filename:split(filename:absname(File)),
    Base = filename:split(filename:absname(Dir)),
    case lists:prefix(Base, Abs) of
        true when Abs =:= Base -> ".";
        true -> filename:join(lists:nthtail(length(Base), Abs));
        false -> filename:absname(File)
    end.

%% Every point of the sweep, in the order argument size, computation time, nodes.
sweep_points(Config, Spec, SpecFile, Options, RunDir, Progress) ->
    Sizes = maps:get(nodes, Options),
    ArgSizes = maps:get(argument_size, Options, [maps:get(argument_size, Config)]),
    Computes = maps:get(compute_us, Options, [maps:get(compute_us, Config)]),
    Points = [#{nodes => N, argument_size => A, compute_us => C} || A <- ArgSizes, C <- Computes, N <- Sizes],
    CsvFile = filename:join(RunDir, "sweep.csv"),
    case terrain_lab_files:write(CsvFile, [?SWEEP_COLUMNS, $\n]) of
        ok -> sweep_all(Config, Options, RunDir, CsvFile, {Spec, SpecFile, Sizes, ArgSizes, Computes, Points},
                        Progress);
        {error, _} = Error -> Error
    end.

sweep_all(Config, Options, RunDir, CsvFile, {Spec, SpecFile, Sizes, ArgSizes, Computes, Points}, Progress) ->
    T0 = erlang:monotonic_time(millisecond),
    Progress(io_lib:format("sweep: ~b points (nodes ~w, argument_size ~w, compute_us ~w) into ~ts~n",
                           [length(Points), Sizes, ArgSizes, Computes, RunDir])),
    case run_points(Points, 1, length(Points), Config, Spec, RunDir, CsvFile, T0, Progress, []) of
        {ok, Rows} ->
            Plots = plots(RunDir, CsvFile, Options, Progress),
            Outputs = [#{kind => bench_sweep, file => <<"sweep.csv">>,
                         parameters => #{spec => list_to_binary(filename:absname(SpecFile)),
                                         nodes => Sizes, argument_size => ArgSizes, compute_us => Computes,
                                         config => terrain_bench:config_to_json(Config)}}]
                ++ [#{kind => bench_point, file => list_to_binary(filename:join("points", point_label(P))),
                      parameters => P} || P <- Points]
                ++ [#{kind => plot, file => list_to_binary(relative(F, RunDir)),
                      parameters => #{source => <<"sweep.csv">>}} || F <- Plots],
            case terrain_lab_run:write_manifest(RunDir, bench_sweep, Outputs) of
                ok -> {ok, RunDir, Rows};
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            _ = terrain_lab_run:write_manifest(RunDir, bench_sweep,
                                               [#{kind => bench_sweep, file => <<"sweep.csv">>,
                                                  parameters => #{complete => false}}]),
            Error
    end.

run_points([], _I, _Total, _Config, _Spec, _RunDir, _Csv, _T0, _Progress, Acc) ->
    {ok, lists:reverse(Acc)};
run_points([Point | Rest], I, Total, Config, Spec, RunDir, Csv, T0, Progress, Acc) ->
    #{nodes := N, argument_size := A, compute_us := C} = Point,
    PointConfig = Config#{argument_size := A, compute_us := C},
    Out = filename:join([RunDir, "points", point_label(Point)]),
    SubSpec = first_nodes(Spec, N),
    Progress(io_lib:format("sweep: point ~b/~b: ~ts~n", [I, Total, point_label(Point)])),
    Result = with_spec_cluster(SubSpec, fun(_) -> ok end,
                               fun(Nodes) -> terrain_bench:run(Nodes, PointConfig, Out, #{}) end),
    case Result of
        {ok, Summary} ->
            Rows = sweep_rows(Point, Summary),
            case terrain_lab_files:append(Csv, [csv_line(R) || R <- Rows]) of
                ok -> next_point(Rest, I, Total, Config, Spec, RunDir, Csv, T0, Progress, lists:reverse(Rows, Acc));
                {error, _} = Error -> Error
            end;
        {error, Why} ->
            {error, {bench_lab, {point_failed, Point, Why}}}
    end.

next_point(Rest, I, Total, Config, Spec, RunDir, Csv, T0, Progress, Acc) ->
    Elapsed = erlang:monotonic_time(millisecond) - T0,
    Eta = Elapsed * (Total - I) div I,
    Progress(io_lib:format("sweep: ~b/~b points done, ~ts elapsed, ETA ~ts~n",
                           [I, Total, duration(Elapsed), duration(Eta)])),
    run_points(Rest, I + 1, Total, Config, Spec, RunDir, Csv, T0, Progress, Acc).

%% The spec's first N nodes, and the groups that still hold one of them (an empty
%% group is not a valid topology).
first_nodes(#{nodes := Nodes, groups := Groups} = Spec, N) ->
    Kept = lists:sublist(Nodes, N),
    Spec#{nodes := Kept,
          groups := [G || {Path, _} = G <- Groups, lists:any(fun(#{path := P}) -> lists:prefix(Path, P) end, Kept)]}.

point_label(#{nodes := N, argument_size := A, compute_us := C}) ->
    lists:flatten(io_lib:format("n~b_a~b_c~b", [N, A, C])).

sweep_rows(#{nodes := N, argument_size := A, compute_us := C}, #{operations := Ops, failed_instances := Failed}) ->
    [begin
         #{count := Count, error_count := Errors, throughput := T, latency_us := L,
           per_node_percentile_mean := Mean} = S,
         [N, A, C, Op, Count, Errors, T, maps:get(p50, L), maps:get(p90, L), maps:get(p95, L), maps:get(p99, L),
          maps:get(p999, L), maps:get(max, L), case Mean of null -> ""; #{p99 := M} -> M end, length(Failed)]
     end || {Op, S} <- lists:sort(maps:to_list(Ops))].

csv_line(Cells) ->
    [lists:join($,, [cell(C) || C <- Cells]), $\n].

cell(F) when is_float(F) -> float_to_list(F, [{decimals, 3}, compact]);
cell(I) when is_integer(I) -> integer_to_list(I);
cell(A) when is_atom(A) -> atom_to_list(A);
cell(S) when is_list(S) -> S.

duration(Ms) when Ms < 60000 -> io_lib:format("~b s", [Ms div 1000]);
duration(Ms) -> io_lib:format("~b min ~2..0b s", [Ms div 60000, (Ms rem 60000) div 1000]).

%% The sweep's figures, drawn by terrain-analysis (the project's virtualenv, else
%% PATH); without it the sweep is complete, only without plots.
plots(RunDir, CsvFile, Options, Progress) ->
    case {maps:get(plots, Options, true), terrain_lab_analysis:command()} of
        {false, _} ->
            [];
        {true, false} ->
            Progress("sweep: plots skipped: terrain-analysis is not installed here (make setup installs it)\n"),
            [];
        {true, Command} ->
            PlotDir = filename:join(RunDir, "plots"),
            case terrain_lab_analysis:run(Command, 120000, ["bench", CsvFile, "--out", PlotDir]) of
                {0, _} ->
                    [filename:join(PlotDir, F) || F <- lists:sort(element(2, file:list_dir(PlotDir)))];
                {Status, Output} ->
                    Progress(io_lib:format("sweep: terrain-analysis bench failed (exit ~b):~n~ts~n", [Status, Output])),
                    []
            end
    end.

