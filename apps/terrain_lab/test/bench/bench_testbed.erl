%% Benchmark: `terrain testbed up --hosts 4 --slurm --topology 2x2' until it returns
%% (every node idle in `sinfo'; goal <= 30 s) and `terrain testbed down', 3 rounds;
%% then, on one more such testbed, `sbatch --wait examples/slurm/pipeline.sbatch'
%% (goal <= 5 min, the discovered tree equal to topology.conf's: compare recall and
%% precision 1.000). Each step is timed from the escript's (or sbatch's) start to its
%% exit. Needs root and Debian's SLURM packages; reports why when it cannot run.
-module(bench_testbed).
-export([run/0]).

-define(ROUNDS, 3).

run() ->
    case terrain_lab_testbed:available(true) of
        {error, Why} ->
            io:format("testbed benchmark not run: ~ts~n", [terrain_lab_testbed:format_error(Why)]);
        ok ->
            Base = filename:join(filename:basedir(user_cache, "terrain-bench"), "testbed-" ++ os:getpid()),
            Prefix = "b" ++ integer_to_list(list_to_integer(os:getpid()) rem 10000) ++ "h",
            Dir = filename:join(Base, "testbed"),
            ok = filelib:ensure_dir(filename:join(Base, "x")),
            Rounds = [round(Base, Prefix, Dir) || _ <- lists:seq(1, ?ROUNDS)],
            Ups = lists:sort([U || {U, _} <- Rounds]),
            Downs = lists:sort([D || {_, D} <- Rounds]),
            io:format("terrain testbed up --hosts 4 --slurm, ~b rounds: up median ~b ms (min ~b, max ~b), "
                      "4 nodes idle each time; down median ~b ms (min ~b, max ~b)~n",
                      [?ROUNDS, median(Ups), hd(Ups), lists:last(Ups), median(Downs), hd(Downs), lists:last(Downs)]),
            pipeline(Base, Prefix, Dir)
    end.

round(Base, Prefix, Dir) ->
    {Up, {0, _, _}} = timed(fun() -> terrain(Base, ["testbed", "up", "--hosts", "4", "--slurm", "--topology", "2x2",
                                                    "--prefix", Prefix, "--dir", Dir]) end),
    {0, Sinfo, _} = env_run(Base, Dir, ["sinfo", "-h", "-N", "-o", "%T"]),
    ["idle", "idle", "idle", "idle"] = string:lexemes(Sinfo, "\n"),
    {Down, {0, _, _}} = timed(fun() -> terrain(Base, ["testbed", "down", "--dir", Dir]) end),
    {Up, Down}.

pipeline(Base, Prefix, Dir) ->
    {0, _, _} = terrain(Base, ["testbed", "up", "--hosts", "4", "--slurm", "--topology", "2x2", "--prefix", Prefix,
                               "--dir", Dir]),
    try
        Root = terrain_lab_test_escript:root(),
        Out = filename:join(Base, "pipeline.out"),
        {Ms, {0, _, _}} = timed(fun() -> env_run(Base, Dir, ["env", "TERRAIN=" ++ terrain_lab_test_escript:path(),
                                                              "RUN=" ++ filename:join(Base, "pipeline"),
                                                              "INSTANCES=" ++ filename:join(Root, "examples/slurm/wt40_first2.txt"),
                                                              "sbatch", "--wait", "--output=" ++ Out,
                                                              filename:join(Root, "examples/slurm/pipeline.sbatch")]) end),
        {ok, Text} = file:read_file(Out),
        [Clades] = [L || L <- string:lexemes(binary_to_list(Text), "\n"), lists:prefix("clades:", L)],
        [Ratio] = [L || L <- string:lexemes(binary_to_list(Text), "\n"), lists:prefix("random / distance", L)],
        io:format("sbatch --wait examples/slurm/pipeline.sbatch on 4 testbed hosts (2x2): ~.1f s; ~ts; ~ts~n",
                  [Ms / 1000, Clades, Ratio])
    after
        terrain(Base, ["testbed", "down", "--dir", Dir])
    end.

terrain(Base, Args) ->
    terrain_lab_test_escript:run("env", Base, ["-u", "SLURM_CONF", "-u", "SLURM_JOB_ID", terrain_lab_test_escript:path() | Args]).

env_run(Base, Dir, Args) ->
    terrain_lab_test_escript:run("env", Base, ["-u", "SLURM_JOB_ID", "SLURM_CONF=" ++ filename:join(Dir, "slurm.conf"),
                                               "ERL_INETRC=" ++ filename:join(Dir, "inetrc") | Args]).

timed(Fun) ->
    T0 = erlang:monotonic_time(millisecond),
    Result = Fun(),
    {erlang:monotonic_time(millisecond) - T0, Result}.

median(Sorted) ->
    lists:nth((length(Sorted) + 1) div 2, Sorted).
