%% `terrain report': in-process (output captured) and once through the real escript,
%% with terrain-analysis from the checkout's .venv (`make setup'); a missing
%% terrain-analysis, a failing one and bad invocations.
-module(terrain_lab_cmd_report_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([report_of_a_run_directory/0, report_of_a_run_directory/1,
         several_runs_into_one_file/0, several_runs_into_one_file/1,
         missing_analysis_is_a_clear_error/0, missing_analysis_is_a_clear_error/1,
         failed_analysis_is_reported/0, failed_analysis_is_reported/1,
         usage_errors/0, usage_errors/1,
         real_escript/0, real_escript/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [report_of_a_run_directory, several_runs_into_one_file, missing_analysis_is_a_clear_error,
     failed_analysis_is_reported, usage_errors, real_escript].

init_per_testcase(_Case, Config) ->
    {ok, Cwd} = file:get_cwd(),
    [{cwd, Cwd}, {path, os:getenv("PATH")} | Config].

end_per_testcase(_Case, Config) ->
    ok = file:set_cwd(?config(cwd, Config)),
    true = os:putenv("PATH", ?config(path, Config)),
    ok.

report_of_a_run_directory() ->
    [{doc, "From the checkout (where .venv is), 'terrain report RUN_DIR' writes RUN_DIR/report.html with the "
           "run's cluster section and prints its path on stdout, exit 0."}].
report_of_a_run_directory(Config) ->
    Run = run_directory(Config, "20261123T100000Z"),
    ok = file:set_cwd(terrain_lab_test_escript:root()),
    {0, Out, _Err} = terrain_lab_test_io:run(["report", Run]),
    Page = filename:join(Run, "report.html"),
    ?assertEqual(Page ++ "\n", Out),
    {ok, Html} = file:read_file(Page),
    ?assertMatch({_, _}, binary:match(Html, <<"<section class=\"kind\" id=\"kind-cluster\"><h2>Cluster</h2>">>)),
    ?assertMatch({_, _}, binary:match(Html, <<"ct_a@host">>)),
    ?assertEqual(nomatch, binary:match(Html, <<"<script">>)).

several_runs_into_one_file() ->
    [{doc, "Two run directories and --out: one file shows both runs side by side; its path is printed."}].
several_runs_into_one_file(Config) ->
    A = run_directory(Config, "20261123T110000Z"),
    B = run_directory(Config, "20261123T120000Z"),
    Out = filename:join(?config(priv_dir, Config), "compare.html"),
    ok = file:set_cwd(terrain_lab_test_escript:root()),
    {0, Printed, _} = terrain_lab_test_io:run(["report", A, B, "--out", Out]),
    ?assertEqual(Out ++ "\n", Printed),
    {ok, Html} = file:read_file(Out),
    ?assertMatch({_, _}, binary:match(Html, <<"--runs: 2">>)),
    ?assertMatch({_, _}, binary:match(Html, <<"<h3>20261123T110000Z</h3>">>)),
    ?assertMatch({_, _}, binary:match(Html, <<"<h3>20261123T120000Z</h3>">>)),
    ?assertNot(filelib:is_regular(filename:join(A, "report.html"))).

missing_analysis_is_a_clear_error() ->
    [{doc, "With no .venv in the working directory and nothing on PATH, the command exits 1 naming where it "
           "looked and how to install terrain-analysis."}].
missing_analysis_is_a_clear_error(Config) ->
    Run = run_directory(Config, "20261123T130000Z"),
    ok = file:set_cwd(?config(priv_dir, Config)),
    true = os:putenv("PATH", ?config(priv_dir, Config)),
    {1, "", Err} = terrain_lab_test_io:run(["report", Run]),
    ?assertNotEqual(nomatch, string:find(Err, "terrain report: terrain-analysis is not installed: looked at "
                                              ++ filename:join([?config(priv_dir, Config), ".venv", "bin",
                                                                "terrain-analysis"]))),
    ?assertNotEqual(nomatch, string:find(Err, "'make setup' installs it")).

failed_analysis_is_reported() ->
    [{doc, "A directory without manifest.json: terrain-analysis fails and its message reaches stderr, exit 1."}].
failed_analysis_is_reported(Config) ->
    Dir = ?config(priv_dir, Config),
    ok = file:set_cwd(terrain_lab_test_escript:root()),
    {1, "", Err} = terrain_lab_test_io:run(["report", Dir]),
    ?assertNotEqual(nomatch, string:find(Err, "terrain-analysis report failed (exit status 1)")),
    ?assertNotEqual(nomatch, string:find(Err, "is not a run directory: it has no manifest.json")).

usage_errors() ->
    [{doc, "No run directory, or an unknown option, is a usage error (exit 2)."}].
usage_errors(_Config) ->
    {2, "", Missing} = terrain_lab_test_io:run(["report"]),
    ?assertNotEqual(nomatch, string:find(Missing, "terrain report")),
    {2, "", Unknown} = terrain_lab_test_io:run(["report", "x", "--colour", "red"]),
    ?assertNotEqual(nomatch, string:find(Unknown, "--colour")).

real_escript() ->
    [{doc, "The escript, run from elsewhere than the checkout, finds terrain-analysis in the checkout it was "
           "built in and writes the report (exit 0); 'terrain report' alone exits 2."}].
real_escript(Config) ->
    Run = run_directory(Config, "20261123T140000Z"),
    {0, Out, _} = terrain_lab_test_escript:run(?config(priv_dir, Config), ["report", Run]),
    ?assertEqual(filename:join(Run, "report.html") ++ "\n", unicode:characters_to_list(Out)),
    ?assert(filelib:is_regular(filename:join(Run, "report.html"))),
    {2, _, _} = terrain_lab_test_escript:run(?config(priv_dir, Config), ["report"]).

%% A run directory with a cluster.json and its manifest, written as terrain demo does.
run_directory(Config, Stamp) ->
    Dir = filename:join(?config(priv_dir, Config), Stamp),
    ok = file:make_dir(Dir),
    Nodes = [#{name => N, node => list_to_atom("ct_" ++ atom_to_list(N) ++ "@host"), group_path => [g, r],
               schedulers => 1} || N <- [a, b]],
    ok = terrain_json:write_file(filename:join(Dir, "cluster.json"),
                                 #{format => <<"terrain.cluster/1">>, cluster => ct, spec => <<"ct.cluster">>,
                                   startup_ms => 10, nodes => Nodes}),
    ok = terrain_lab_run:write_manifest(Dir, ct, [#{kind => cluster, file => <<"cluster.json">>,
                                                    parameters => #{command => <<"ct">>}}]),
    Dir.
