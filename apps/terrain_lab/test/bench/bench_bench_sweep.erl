%% Benchmark (issue 14): the wall time of one 16-node DE-Bench sweep point from the
%% command line's domain code: start 16 VMs from a spec, run 5 s of rpc and
%% gen_server_call (1 s warm-up), stop them, write sweep.csv and the manifest.
-module(bench_bench_sweep).
-export([run/0]).

run() ->
    ok = terrain_lab_dist:ensure_started(#{}),
    Dir = filename:join("/tmp", "bench_bench_sweep_" ++ os:getpid()),
    Spec = filename:join(Dir, "flat16.cluster"),
    ok = filelib:ensure_dir(Spec),
    ok = file:write_file(Spec, ["{cluster, flat16, #{}}.\n{group, all, #{}, [",
                                lists:join(",", [io_lib:format("{node, n~2..0b, #{schedulers => 1}}", [I])
                                                 || I <- lists:seq(1, 16)]), "]}.\n"]),
    {ok, Config} = terrain_bench:validate_config([{duration, 5}, {warmup, 1}, {concurrent, 2},
                                                  {operations, [{rpc, 1}, {gen_server_call, 1}]}]),
    T0 = erlang:monotonic_time(millisecond),
    {ok, RunDir, Rows} = terrain_lab_bench:sweep(Config, Spec, #{nodes => [16], runs_dir => Dir, plots => false}),
    Wall = erlang:monotonic_time(millisecond) - T0,
    Throughput = lists:sum([T || [_, _, _, _, _, _, T | _] <- Rows]),
    io:format("one 16-node sweep point (5 s measured + 1 s warm-up, rpc and gen_server_call, 2 workers per node): "
              "wall ~.1f s, of which ~.1f s starting, stopping and writing; ~.1f operations/s in the cluster "
              "(16 VMs on 2 shared cores)~n",
              [Wall / 1000, Wall / 1000 - 6, float(Throughput)]),
    true = filelib:is_regular(filename:join(RunDir, "sweep.csv")),
    ok = file:del_dir_r(Dir).
