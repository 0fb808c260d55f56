%% `terrain bench' and `terrain bench sweep' from the command line: in-process (output
%% captured) on clusters started from a spec, and once through the real escript for
%% bad invocations.
-module(terrain_lab_cmd_bench_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([bad_configuration_is_refused_before_anything_starts/0,
         bad_configuration_is_refused_before_anything_starts/1,
         run_on_a_spec_prints_the_table_and_writes_the_run/0, run_on_a_spec_prints_the_table_and_writes_the_run/1,
         sweep_writes_csv_points_and_manifest/0, sweep_writes_csv_points_and_manifest/1,
         real_escript/0, real_escript/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [bad_configuration_is_refused_before_anything_starts, run_on_a_spec_prints_the_table_and_writes_the_run,
     sweep_writes_csv_points_and_manifest, real_escript].

init_per_suite(Config) ->
    ok = terrain_lab_dist:ensure_started(#{}),
    Dir = ?config(priv_dir, Config),
    Spec = filename:join(Dir, "three.cluster"),
    ok = file:write_file(Spec, "{cluster, three, #{}}.\n{group, g, #{}, [{node, a, #{schedulers => 1}}, "
                               "{node, b, #{schedulers => 1}}, {node, c, #{schedulers => 1}}]}.\n"),
    Good = filename:join(Dir, "short.config"),
    ok = file:write_file(Good, "{duration, 2}.\n{warmup, 1}.\n{concurrent, 2}.\n"
                               "{operations, [{rpc, 2}, {gen_server_call, 1}, {global_whereis, 1}]}.\n"),
    Bad = filename:join(Dir, "bad.config"),
    ok = file:write_file(Bad, "{duration, 2}.\n{operations, [{rpc, 1}]}.\n{mode, open}.\n"),
    [{spec, Spec}, {good, Good}, {bad, Bad} | Config].

end_per_suite(_Config) ->
    ok.

cli(Args) ->
    terrain_lab_test_io:run(Args).

lines(Text) ->
    string:lexemes(Text, "\n").

%%--------------------------------------------------------------------

bad_configuration_is_refused_before_anything_starts() ->
    [{doc, "A configuration with a bad value exits 1 naming the key and the expected value, before any node "
           "starts or any directory is made; a sweep without --spec or with a bad --nodes list is a usage error "
           "(exit 2) saying which option, as is 'bench sweep' alone (the configuration is missing); sizes beyond "
           "the spec exit 1; a configuration that is not a regular file (/dev/zero) or is over 1 MiB exits 1 "
           "saying so, before it is read."}].
bad_configuration_is_refused_before_anything_starts(Config) ->
    Runs = filename:join(?config(priv_dir, Config), "refused"),
    {1, "", Err} = cli(["bench", ?config(bad, Config), "--spec", ?config(spec, Config), "--runs-dir", Runs]),
    ?assertNotEqual(nomatch, string:find(Err, "mode must be closed, {rate, OpsPerSecondPerWorker} or {think, "
                                              "MeanMilliseconds} with a positive number, got open")),
    ?assertNot(filelib:is_dir(Runs)),
    {2, "", NoSpec} = cli(["bench", "sweep", ?config(good, Config), "--nodes", "1,2", "--runs-dir", Runs]),
    ?assertNotEqual(nomatch, string:find(NoSpec, "--spec is required")),
    {2, "", BadList} = cli(["bench", "sweep", ?config(good, Config), "--spec", ?config(spec, Config),
                            "--nodes", "1,x", "--runs-dir", Runs]),
    ?assertNotEqual(nomatch, string:find(BadList, "--nodes must be a comma-separated list")),
    {1, "", TooMany} = cli(["bench", "sweep", ?config(good, Config), "--spec", ?config(spec, Config),
                            "--nodes", "2,5", "--runs-dir", Runs]),
    ?assertNotEqual(nomatch, string:find(TooMany, "cannot sweep to 5 nodes")),
    {1, "", Zero} = cli(["bench", "/dev/zero", "--spec", ?config(spec, Config), "--runs-dir", Runs]),
    ?assertNotEqual(nomatch, string:find(Zero, "/dev/zero: not a regular file")),
    Big = filename:join(?config(priv_dir, Config), "bench_big.config"),
    ok = file:write_file(Big, binary:copy(<<"{duration, 1}.\n">>, 80000)),
    {1, "", TooBig} = cli(["bench", "sweep", Big, "--spec", ?config(spec, Config), "--nodes", "1",
                           "--runs-dir", Runs]),
    ?assertNotEqual(nomatch, string:find(TooBig, "larger than 1048576 bytes")),
    {2, "", Missing} = cli(["bench", "sweep"]),
    ?assertNotEqual(nomatch, string:find(Missing, "give the configuration file")),
    ?assertNot(filelib:is_dir(Runs)).

run_on_a_spec_prints_the_table_and_writes_the_run() ->
    [{doc, "terrain bench CONFIG --spec SPEC starts the 3 nodes, runs 1 + 2 s, stops them: stdout has the "
           "header, one row per operation with a positive count and the total; the run directory has "
           "manifest.json (kind bench) listing bench/summary.json, and each node's directory; no node of the "
           "spec is left running."}].
run_on_a_spec_prints_the_table_and_writes_the_run(Config) ->
    Runs = filename:join(?config(priv_dir, Config), "runs"),
    {0, Out, Err} = cli(["bench", ?config(good, Config), "--spec", ?config(spec, Config), "--runs-dir", Runs]),
    ct:log("~ts~n~ts", [Out, Err]),
    [Header, GenServer, Whereis, Rpc, Total, Files] = lines(Out),
    ?assertEqual(["OP", "COUNT", "ERRORS", "OPS/S", "P50_US", "P99_US", "P999_US", "MAX_US", "NODES_P99"],
                 string:lexemes(Header, " ")),
    [?assertMatch([Op, Count, "0" | _] when Count =/= "0", string:lexemes(Row, " "))
     || {Op, Row} <- [{"gen_server_call", GenServer}, {"global_whereis", Whereis}, {"rpc", Rpc}]],
    ?assertMatch(["total" | _], string:lexemes(Total, " ")),
    ?assertNotEqual(nomatch, string:find(Files, "3 nodes; per node: ")),
    [RunDir] = filelib:wildcard(filename:join(Runs, "*")),
    {ok, #{<<"kind">> := <<"bench">>, <<"outputs">> := Outputs}} =
        terrain_json:read_file(filename:join(RunDir, "manifest.json")),
    ?assertEqual([<<"bench/summary.json">>, <<"bench">>], [F || #{<<"file">> := F} <- Outputs]),
    {ok, #{<<"nodes">> := Nodes}} = terrain_json:read_file(filename:join([RunDir, "bench", "summary.json"])),
    ?assertEqual(3, length(Nodes)),
    [?assert(filelib:is_dir(filename:join([RunDir, "bench", N]))) || N <- Nodes],
    [?assertEqual(pang, net_adm:ping(binary_to_atom(N))) || N <- Nodes].

sweep_writes_csv_points_and_manifest() ->
    [{doc, "terrain bench sweep CONFIG --spec SPEC --nodes 1,2 --no-plots: two points, each a cluster started "
           "and stopped; sweep.csv has its header and one row per point and operation (nodes 1 and 2); the "
           "manifest (kind bench_sweep) lists sweep.csv and both points; progress with an ETA on stderr; the "
           "printed table has one row per point and operation."}].
sweep_writes_csv_points_and_manifest(Config) ->
    Runs = filename:join(?config(priv_dir, Config), "sweeps"),
    Short = filename:join(?config(priv_dir, Config), "sweep.config"),
    ok = file:write_file(Short, "{duration, 1}.\n{concurrent, 1}.\n{operations, [{rpc, 1}, {spawn, 1}]}.\n"),
    {0, Out, Err} = cli(["bench", "sweep", Short, "--spec", ?config(spec, Config), "--nodes", "1,2", "--no-plots",
                         "--runs-dir", Runs]),
    ct:log("~ts~n~ts", [Out, Err]),
    ?assertNotEqual(nomatch, string:find(Err, "ETA")),
    ?assertEqual(1 + 4 + 1, length(lines(Out))),
    [RunDir] = filelib:wildcard(filename:join(Runs, "*")),
    {ok, Csv} = file:read_file(filename:join(RunDir, "sweep.csv")),
    [CsvHeader | Rows] = binary:split(Csv, <<"\n">>, [global, trim_all]),
    ?assertEqual(<<"nodes,argument_size,compute_us,op,count,errors,throughput,p50,p90,p95,p99,p999,max,"
                   "per_node_p99_mean,failed_instances">>, CsvHeader),
    ?assertEqual([{<<"1">>, <<"rpc">>}, {<<"1">>, <<"spawn">>}, {<<"2">>, <<"rpc">>}, {<<"2">>, <<"spawn">>}],
                 [begin [N, _, _, Op | _] = binary:split(R, <<",">>, [global]), {N, Op} end || R <- Rows]),
    {ok, #{<<"kind">> := <<"bench_sweep">>, <<"outputs">> := Outputs}} =
        terrain_json:read_file(filename:join(RunDir, "manifest.json")),
    ?assertEqual([<<"sweep.csv">>, <<"points/n1_a10_c10">>, <<"points/n2_a10_c10">>],
                 [F || #{<<"file">> := F} <- Outputs]).

real_escript() ->
    [{doc, "The escript: 'terrain bench' without a configuration is a usage error (2); a bad configuration "
           "exits 1 with the key in the message; --help describes the sweep."}].
real_escript(Config) ->
    Dir = ?config(priv_dir, Config),
    {2, "", Usage} = terrain_lab_test_escript:run(Dir, ["bench"]),
    ?assertNotEqual(nomatch, string:find(Usage, "terrain bench")),
    {1, "", Bad} = terrain_lab_test_escript:run(Dir, ["bench", ?config(bad, Config), "--nodes", "x@y"]),
    ?assertNotEqual(nomatch, string:find(Bad, "mode must be")),
    {0, Help, _} = terrain_lab_test_escript:run(Dir, ["bench", "--help"]),
    ?assertNotEqual(nomatch, string:find(Help, "bench sweep")).
