%% `terrain emas': a run's files, usage errors, a run on a spec cluster with
%% predicates, and the escript once as a real program.
-module(terrain_lab_cmd_emas_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0]).
-export([run_writes_csv_summary_and_manifest/0, run_writes_csv_summary_and_manifest/1,
         bad_values_are_usage_errors/0, bad_values_are_usage_errors/1,
         islands_on_a_spec_cluster_chosen_by_predicate/0, islands_on_a_spec_cluster_chosen_by_predicate/1,
         escript_runs_and_refuses_zero_islands/0, escript_runs_and_refuses_zero_islands/1]).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [run_writes_csv_summary_and_manifest, bad_values_are_usage_errors,
     islands_on_a_spec_cluster_chosen_by_predicate, escript_runs_and_refuses_zero_islands].

run_writes_csv_summary_and_manifest() ->
    [{doc, "terrain emas --model sequential writes emas.csv (the issue's columns, a row per island and second), "
           "summary.json (terrain.emas/1) and manifest entries for both, and prints one summary line."}].
run_writes_csv_summary_and_manifest(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "seq"),
    {0, Out, _Err} = terrain_lab_test_io:run(["emas", "--model", "sequential", "--time-ms", "1200", "--islands", "2",
                                              "--population", "20", "--dimensions", "10", "--out", Dir]),
    ?assertMatch({match, _}, re:run(Out, "^sequential: best fitness -?[0-9.]+ \\(from -?[0-9.]+\\), [0-9]+ "
                                         "reproductions/s")),
    {ok, Csv} = file:read_file(filename:join(Dir, "emas.csv")),
    [Header | Lines] = string:lexemes(binary_to_list(Csv), "\n"),
    ?assertEqual("second,island,reproductions,fights,deaths,migrations,best_fitness", Header),
    %% one full second and the rest, for each of the two islands
    ?assertEqual(4, length(Lines)),
    ?assertMatch(["1", "1" | _], string:split(hd(Lines), ",", all)),
    {ok, Summary} = terrain_json:read_file(filename:join(Dir, "summary.json")),
    ?assertMatch(#{<<"format">> := <<"terrain.emas/1">>, <<"model">> := <<"sequential">>}, Summary),
    [?assert(is_map_key(K, Summary)) || K <- [<<"initial_best_fitness">>, <<"best_fitness">>,
                                              <<"reproductions_per_s">>, <<"utilisation">>]],
    {ok, #{<<"outputs">> := Outputs}} = terrain_json:read_file(filename:join(Dir, "manifest.json")),
    ?assertEqual([<<"emas.csv">>, <<"summary.json">>], lists:sort([F || #{<<"file">> := F} <- Outputs])),
    %% a second run into the same directory replaces its files and entries
    {0, _, _} = terrain_lab_test_io:run(["emas", "--model", "skel", "--steps", "3", "--islands", "2",
                                         "--population", "10", "--dimensions", "5", "--out", Dir]),
    {ok, #{<<"outputs">> := Outputs2}} = terrain_json:read_file(filename:join(Dir, "manifest.json")),
    ?assertEqual(2, length(Outputs2)).

bad_values_are_usage_errors() ->
    [{doc, "Zero islands, negative energy, an unknown model, no --out and an unknown subcommand exit 2 with the "
           "reason on stderr and nothing on stdout."}].
bad_values_are_usage_errors(Config) ->
    Dir = ?config(priv_dir, Config),
    Cases = [{["--islands", "0", "--out", Dir], "--islands"},
             {["--initial-energy", "-5", "--out", Dir], "--initial-energy"},
             {["--model", "pipeline", "--out", Dir], "--model must be one of"},
             {["--migration-probability", "2", "--out", Dir], "probability"},
             {[], "--out DIR is required"},
             {["bogus", "--out", Dir], "unknown emas subcommand"}],
    [begin
         {Code, Out, Err} = terrain_lab_test_io:run(["emas" | Args]),
         ?assertEqual({2, ""}, {Code, Out}),
         ?assertNotEqual(nomatch, string:find(Err, Expected))
     end || {Args, Expected} <- Cases].

islands_on_a_spec_cluster_chosen_by_predicate() ->
    [{doc, "--spec starts the cluster, --pred chooses the island nodes by attribute, the summary names them, "
           "and the cluster is stopped afterwards."}].
islands_on_a_spec_cluster_chosen_by_predicate(Config) ->
    Dir = ?config(priv_dir, Config),
    Spec = filename:join(Dir, "emas.cluster"),
    ok = file:write_file(Spec, "{cluster, emas_ct, #{}}.\n"
                               "{node, big, #{attrs => [{emas_island, true}]}}.\n"
                               "{node, small, #{}}.\n"),
    Out = filename:join(Dir, "spec"),
    {0, _, Err} = terrain_lab_test_io:run(["emas", "--model", "hybrid", "--spec", Spec, "--pred", "[{emas_island, true}, {vm_num_processors, ge, 1}]",
                                           "--time-ms", "800", "--population", "20", "--dimensions", "10",
                                           "--out", Out]),
    ?assertNotEqual(nomatch, string:find(Err, "islands on ")),
    {ok, #{<<"parameters">> := #{<<"nodes_used">> := [Node]}}} = terrain_json:read_file(filename:join(Out,
                                                                                                     "summary.json")),
    ?assertMatch([$b, $i, $g, $@ | _], lists:nthtail(length("emas" ++ os:getpid() ++ "_"), binary_to_list(Node))),
    Prefix = "emas" ++ os:getpid() ++ "_",   % the names terrain emas --spec gives its nodes
    terrain_test_peers:wait_until(fun() -> terrain_test_peers:beam_count(Prefix) =:= 0 end, 10000, "cluster stopped").

escript_runs_and_refuses_zero_islands() ->
    [{doc, "The escript runs the concurrent model (exit 0, summary on stdout) and exits 2 for --islands 0."}].
escript_runs_and_refuses_zero_islands(Config) ->
    Dir = ?config(priv_dir, Config),
    Escript = terrain_lab_test_escript:path(),
    {0, Out, _} = terrain_lab_test_escript:run(Escript, Dir, ["emas", "--model", "concurrent", "--time-ms", "700",
                                                              "--population", "20", "--dimensions", "10",
                                                              "--out", filename:join(Dir, "conc")]),
    ?assertNotEqual(nomatch, string:find(Out, "concurrent: best fitness")),
    {2, "", Err} = terrain_lab_test_escript:run(Escript, Dir, ["emas", "--islands", "0", "--out", Dir]),
    ?assertNotEqual(nomatch, string:find(Err, "--islands")).
