%% `terrain events record' and `terrain events export' in-process on a cluster
%% started from a spec with emulated links, and bad invocations.
-module(terrain_lab_cmd_events_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([record_prints_findings_and_writes_the_run/0, record_prints_findings_and_writes_the_run/1,
         export_writes_the_trace_event_format/0, export_writes_the_trace_event_format/1,
         bad_invocations/0, bad_invocations/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [record_prints_findings_and_writes_the_run, export_writes_the_trace_event_format, bad_invocations].

init_per_suite(Config) ->
    ok = terrain_test_peers:ensure_distributed(),
    Spec = filename:join(?config(priv_dir, Config), "two.cluster"),
    ok = file:write_file(Spec, "{cluster, two, #{latency => 1000}}.\n"
                               "{group, r1, #{latency => 50}, [{node, a, #{schedulers => 1}}]}.\n"
                               "{group, r2, #{latency => 50}, [{node, b, #{schedulers => 1}}]}.\n"),
    [{spec, Spec}, {run, filename:join(?config(priv_dir, Config), "events_run")} | Config].

end_per_suite(_Config) ->
    ok.

record_prints_findings_and_writes_the_run() ->
    [{doc, "record on a two-node emulated cluster prints the wind tunnel, scope and both monitors' findings, "
           "writes events, trace, findings, views and a manifest listing them, and leaves no node running."}].
record_prints_findings_and_writes_the_run(Config) ->
    Run = ?config(run, Config),
    {Code, Out, Err} = terrain_lab_test_io:run(["events", "record", "--spec", ?config(spec, Config),
                                                "--workload", "windtunnel", "--workers", "4", "--steps", "30",
                                                "--columns", "32", "--slice-rows", "4", "--scope-rate", "20",
                                                "--out", Run]),
    ct:pal("exit ~b~n~ts~n~ts", [Code, Out, Err]),
    ?assertEqual(0, Code),
    [?assertNotEqual(nomatch, string:find(Out, Text))
     || Text <- ["wind tunnel: 4 workers x 30 steps on 2 nodes", "load imbalance", "most waiting: worker",
                 "slow pairs", "slowest pair:", "clock offsets"]],
    {ok, #{<<"format">> := <<"terrain.manifest/1">>, <<"kind">> := <<"events">>, <<"outputs">> := Outputs}} =
        terrain_json:read_file(filename:join(Run, "manifest.json")),
    Files = [F || #{<<"file">> := F} <- Outputs],
    Views = case filelib:is_regular(filename:absname(".venv/bin/terrain-analysis"))
                orelse os:find_executable("terrain-analysis") =/= false of
                true -> [<<"timeline.png">>, <<"timeline.svg">>, <<"reads.png">>, <<"reads.svg">>];
                false -> []
            end,
    ?assertEqual([<<"events.jsonl">>, <<"trace.json">>, <<"findings.json">>] ++ Views, Files),
    [?assert(filelib:is_regular(filename:join(Run, binary_to_list(F)))) || F <- Files],
    {ok, #{<<"steps">> := 30, <<"workers">> := 4}, Events} = terrain_events:read_events(filename:join(Run, "events.jsonl")),
    %% per step: 4 computes, 4 communicates, 6 reads, 6 sends, 6 receives
    ?assertEqual(30 * 26, length(Events)),
    {ok, #{<<"format">> := <<"terrain.event_findings/1">>, <<"monitors">> := [_, _]}} =
        terrain_json:read_file(filename:join(Run, "findings.json")),
    %% the nodes the command started (named ev<this OS pid>_...) are gone
    Prefix = "ev" ++ os:getpid() ++ "_",
    terrain_test_peers:wait_until(fun() ->
                                          {ok, Names} = erl_epmd:names(),
                                          not lists:any(fun({N, _}) -> lists:prefix(Prefix, N) end, Names)
                                  end, 10000, "nodes gone"),
    ?assertEqual("", os:cmd("pgrep -f '[-]sname " ++ Prefix ++ "' || true")).

export_writes_the_trace_event_format() ->
    [{doc, "export DIR --format perfetto writes a Chrome trace-event object: a process per node, a named track "
           "per worker, compute and communicate slices with their step."}].
export_writes_the_trace_event_format(Config) ->
    Run = ?config(run, Config),
    Out = filename:join(?config(priv_dir, Config), "exported.json"),
    {0, Printed, _} = terrain_lab_test_io:run(["events", "export", Run, "--format", "perfetto", "--out", Out]),
    ?assertEqual("wrote " ++ Out ++ " (780 events)\n", Printed),
    {ok, #{<<"traceEvents">> := Trace, <<"format">> := <<"terrain.trace/1">>}} = terrain_json:read_file(Out),
    Threads = lists:sort([N || #{<<"ph">> := <<"M">>, <<"name">> := <<"thread_name">>, <<"args">> := #{<<"name">> := N}} <- Trace]),
    ?assertEqual([<<"worker 0">>, <<"worker 1">>, <<"worker 2">>, <<"worker 3">>], Threads),
    ?assertEqual(2, length([x || #{<<"ph">> := <<"M">>, <<"name">> := <<"process_name">>} <- Trace])),
    Slices = [E || #{<<"ph">> := <<"X">>} = E <- Trace],
    ?assertEqual(30 * (4 + 4 + 6), length(Slices)),
    [?assertMatch(#{<<"ts">> := Ts, <<"dur">> := D, <<"args">> := #{<<"step">> := S}}
                      when is_integer(Ts) andalso Ts >= 0 andalso D >= 0 andalso S >= 1 andalso S =< 30, E)
     || E <- Slices],
    ?assertEqual([<<"communicate">>, <<"compute">>, <<"read">>], lists:usort([N || #{<<"name">> := N} <- Slices])).

bad_invocations() ->
    [{doc, "Unknown subcommands, a missing --workload or --out, a bad collector or format, an unknown option are "
           "usage errors that say what is wrong (exit 2, docs/CLI.md's conventions); a directory without "
           "events.jsonl is an error (exit 1)."}].
bad_invocations(Config) ->
    Run = ?config(run, Config),
    {2, _, E1} = terrain_lab_test_io:run(["events", "replay"]),
    ?assertNotEqual(nomatch, string:find(E1, "expected 'record' or 'export DIR'")),
    {2, _, E2} = terrain_lab_test_io:run(["events", "record", "--out", Run]),
    ?assertNotEqual(nomatch, string:find(E2, "record needs --workload windtunnel")),
    {2, _, E3} = terrain_lab_test_io:run(["events", "record", "--workload", "windtunnel"]),
    ?assertNotEqual(nomatch, string:find(E3, "record needs --out DIR")),
    {2, _, E4} = terrain_lab_test_io:run(["events", "record", "--workload", "windtunnel", "--out", Run,
                                          "--collectors", "explicit,sonar"]),
    ?assertNotEqual(nomatch, string:find(E4, "bad --collectors 'explicit,sonar'")),
    {2, _, E5} = terrain_lab_test_io:run(["events", "export", Run, "--format", "svg"]),
    ?assertNotEqual(nomatch, string:find(E5, "bad --format 'svg'")),
    {1, _, E6} = terrain_lab_test_io:run(["events", "export", ?config(priv_dir, Config)]),
    ?assertNotEqual(nomatch, string:find(E6, "events.jsonl")),
    {2, _, _} = terrain_lab_test_io:run(["events", "record", "--frobnicate"]).
