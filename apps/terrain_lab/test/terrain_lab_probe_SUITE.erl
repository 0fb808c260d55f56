%% The latency probe on real local nodes: both strategies, the files it writes, a node
%% that dies mid-probe, unreachable nodes, and `terrain probe' / `terrain topology' from
%% the command line (in-process, and the escript for bad invocations).
-module(terrain_lab_probe_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2, end_per_testcase/2]).
-export([both_strategies_measure_every_ordered_pair/0, both_strategies_measure_every_ordered_pair/1,
         files_follow_the_latency_format/0, files_follow_the_latency_format/1,
         a_node_that_dies_fails_only_its_pairs/0, a_node_that_dies_fails_only_its_pairs/1,
         unreachable_nodes_are_named/0, unreachable_nodes_are_named/1,
         bad_options_are_refused/0, bad_options_are_refused/1,
         cli_probe_topology_compare/0, cli_probe_topology_compare/1,
         escript_bad_invocations/0, escript_bad_invocations/1,
         an_echo_node_reachable_only_later_is_measured/0, an_echo_node_reachable_only_later_is_measured/1,
         an_unreachable_echo_node_fails_its_pair_without_warnings/0,
         an_unreachable_echo_node_fails_its_pair_without_warnings/1,
         the_tree_probe_checkpoints_after_the_first_wave/0, the_tree_probe_checkpoints_after_the_first_wave/1,
         a_failed_write_leaves_no_temporary_file_and_a_manifest/0,
         a_failed_write_leaves_no_temporary_file_and_a_manifest/1,
         numeric_options_are_bounded_and_tree_options_need_the_tree/0,
         numeric_options_are_bounded_and_tree_options_need_the_tree/1]).
%% a logger handler that sends every event to the test case
-export([log/2]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [both_strategies_measure_every_ordered_pair, files_follow_the_latency_format, a_node_that_dies_fails_only_its_pairs,
     unreachable_nodes_are_named, bad_options_are_refused, cli_probe_topology_compare, escript_bad_invocations,
     an_echo_node_reachable_only_later_is_measured, an_unreachable_echo_node_fails_its_pair_without_warnings,
     the_tree_probe_checkpoints_after_the_first_wave, a_failed_write_leaves_no_temporary_file_and_a_manifest,
     numeric_options_are_bounded_and_tree_options_need_the_tree].

init_per_suite(Config) ->
    ok = terrain_lab_dist:ensure_started(#{}),
    Config.

end_per_suite(_Config) ->
    ok.

init_per_testcase(Case, Config) ->
    Prefix = "pr" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:phash2(Case, 1000)) ++ "_",
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, probe, #{}},
                                              {group, g, #{}, [{node, list_to_atom("n" ++ integer_to_list(I)),
                                                                #{schedulers => 1}} || I <- lists:seq(1, 4)]}],
                                             undefined),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => Prefix, netem => false}),
    Infos = terrain_lab:cluster_nodes(Cluster),
    [{cluster, Cluster}, {infos, Infos}, {nodes, [N || #{node := N} <- Infos]}, {prefix, Prefix} | Config].

end_per_testcase(_Case, Config) ->
    Infos = ?config(infos, Config),
    ok = terrain_lab:stop_cluster(?config(cluster, Config)),
    ?assertEqual([], [P || #{os_pid := P} <- Infos, terrain_lab_os:alive(P)]).

%%--------------------------------------------------------------------

both_strategies_measure_every_ordered_pair() ->
    [{doc, "4 nodes, 5 x 10 exchanges per pair: with either strategy every one of the 12 ordered pairs has "
           "50 recorded exchanges and min <= median <= p95, min <= mean, all positive."}].
both_strategies_measure_every_ordered_pair(Config) ->
    Nodes = ?config(nodes, Config),
    [begin
         {ok, #{pairs := Pairs, options := #{strategy := Strategy}}} =
             terrain_lab_probe:probe(Nodes, #{batches => 5, messages => 10, warmup => 5, strategy => Strategy}),
         ?assertEqual(lists:sort([{A, B} || A <- Nodes, B <- Nodes, A =/= B]), lists:sort(maps:keys(Pairs))),
         [begin
              ?assertMatch({ok, #{exchanges := 50}}, Result, Pair),
              {ok, #{min := Min, median := Median, p95 := P95, mean := Mean, stddev := Sd}} = Result,
              ?assert(0 < Min andalso Min =< Median andalso Median =< P95 andalso Min =< Mean andalso Sd >= 0,
                      {Pair, Result})
          end || {Pair, Result} <- maps:to_list(Pairs)]
     end || Strategy <- [sequential, concurrent]],
    ok.

files_follow_the_latency_format() ->
    [{doc, "write/3 produces latency.json (terrain.latency/1: nodes, unit us, strategy, batches, messages, "
           "payload_bytes, started_at, five n x n matrices with a zero diagonal) that terrain_discovery reads, "
           "latency.csv with a row per ordered pair, and manifest.json listing both."}].
files_follow_the_latency_format(Config) ->
    Nodes = ?config(nodes, Config),
    {ok, Result} = terrain_lab_probe:probe(Nodes, #{batches => 3, messages => 4, payload => 64}),
    {ok, Dir} = terrain_lab_run:create(?config(priv_dir, Config)),
    {ok, [Json, Csv, Manifest]} = terrain_lab_probe_files:write(Result, Dir, #{}),
    {ok, Doc} = terrain_json:read_file(Json),
    Names = [atom_to_binary(N) || N <- Nodes],
    ?assertMatch(#{<<"format">> := <<"terrain.latency/1">>, <<"unit">> := <<"us">>, <<"strategy">> := <<"sequential">>,
                   <<"batches">> := 3, <<"messages">> := 4, <<"payload_bytes">> := 64, <<"started_at">> := <<_/binary>>,
                   <<"failed">> := []}, Doc),
    ?assertEqual(Names, maps:get(<<"nodes">>, Doc)),
    Stats = maps:get(<<"stats">>, Doc),
    ?assertEqual([<<"mean">>, <<"median">>, <<"min">>, <<"p95">>, <<"stddev">>], lists:sort(maps:keys(Stats))),
    [begin
         ?assertEqual(4, length(Rows)),
         [?assertEqual(0, lists:nth(I, lists:nth(I, Rows))) || I <- lists:seq(1, 4)],
         [?assert(is_float(X) andalso X >= 0) || {I, Row} <- lists:zip(lists:seq(1, 4), Rows),
                                                  {J, X} <- lists:zip(lists:seq(1, 4), Row), I =/= J]
     end || Rows <- maps:values(Stats)],
    ?assertMatch({ok, #{nodes := [_, _, _, _]}}, terrain_discovery:read_latency(Json)),
    {ok, CsvText} = file:read_file(Csv),
    [Header | Rows] = string:lexemes(CsvText, "\n"),
    ?assertEqual(<<"from,to,exchanges,min_us,median_us,mean_us,p95_us,stddev_us,status">>, Header),
    ?assertEqual(12, length(Rows)),
    {ok, #{<<"kind">> := <<"probe">>, <<"outputs">> := Outputs}} = terrain_json:read_file(Manifest),
    ?assertEqual([<<"latency.csv">>, <<"latency.json">>], lists:sort([F || #{<<"file">> := F} <- Outputs])).

a_node_that_dies_fails_only_its_pairs() ->
    [{doc, "A node halted while the probe runs: exactly the pairs from and to it fail (null in latency.json); "
           "the other 6 pairs are measured in full."}].
a_node_that_dies_fails_only_its_pairs(Config) ->
    [_, _, _, Victim] = Nodes = ?config(nodes, Config),
    Self = self(),
    Probe = spawn_link(fun() ->
                               Result = terrain_lab_probe:probe(Nodes, #{batches => 400, messages => 50, strategy => concurrent,
                                                                         timeout => 2000,
                                                                         progress => fun(P) -> Self ! {progress, P} end}),
                               Self ! {probe_result, Result}
                       end),
    receive {progress, _} -> ok after 60000 -> ct:fail(no_progress) end,
    erpc:cast(Victim, erlang, halt, []),
    Result = receive {probe_result, R} -> R after 120000 -> ct:fail({probe_did_not_finish, Probe}) end,
    {ok, #{pairs := Pairs} = Full} = Result,
    Failed = lists:sort([P || {P, {error, _}} <- maps:to_list(Pairs)]),
    Expected = lists:sort([{A, B} || A <- Nodes, B <- Nodes, A =/= B, A =:= Victim orelse B =:= Victim]),
    ?assertEqual(Expected, Failed),
    [?assertMatch({ok, #{exchanges := 20000}}, maps:get({A, B}, Pairs))
     || A <- Nodes, B <- Nodes, A =/= B, A =/= Victim, B =/= Victim],
    {ok, Dir} = terrain_lab_run:create(?config(priv_dir, Config)),
    {ok, [Json | _]} = terrain_lab_probe_files:write(Full, Dir, #{}),
    {ok, #{<<"stats">> := #{<<"min">> := Rows}, <<"failed">> := FailedJson}} = terrain_json:read_file(Json),
    ?assertEqual(6, length(FailedJson)),
    ?assertEqual([null, null, null, 0], lists:nth(4, Rows)).

unreachable_nodes_are_named() ->
    [{doc, "A node that is not there is named in the error before anything is measured; one node is too few."}].
unreachable_nodes_are_named(Config) ->
    [N1 | _] = ?config(nodes, Config),
    Missing = list_to_atom("nobody" ++ os:getpid() ++ "@localhost"),
    {error, {probe, {unreachable, [{Missing, Why}]}} = Reason} = terrain_lab_probe:probe([N1, Missing], #{}),
    ?assert(Why =:= noconnection orelse Why =:= timeout, Why),
    Text = lists:flatten(io_lib:format("~ts", [terrain_lab_cli_errors:format(Reason)])),
    ?assertNotEqual(nomatch, string:find(Text, atom_to_list(Missing))),
    ?assertEqual({error, {probe, too_few_nodes}}, terrain_lab_probe:probe([N1], #{})),
    ?assertEqual({error, {probe, {duplicate_nodes, [N1]}}}, terrain_lab_probe:probe([N1, N1], #{})).

bad_options_are_refused() ->
    [{doc, "Options are checked once, with a sentence for each error."}].
bad_options_are_refused(_Config) ->
    ?assertEqual({error, {probe, {bad_option, batches, 0}}}, terrain_lab_probe:validate_options(#{batches => 0})),
    ?assertEqual({error, {probe, {bad_option, strategy, fast}}}, terrain_lab_probe:validate_options(#{strategy => fast})),
    ?assertEqual({error, {probe, {unknown_option, colour}}}, terrain_lab_probe:validate_options(#{colour => red})),
    ?assertEqual({error, {probe, {bad_option, statistic, max}}}, terrain_lab_probe:validate_options(#{statistic => max})),
    ?assertMatch({ok, #{statistic := median}}, terrain_lab_probe:validate_options(#{statistic => median})),
    ?assertEqual("bad value for statistic: max (expected min, median, mean or p95)",
                 lists:flatten(terrain_lab_cli_errors:format({probe, {bad_option, statistic, max}}))),
    ?assertMatch({ok, #{batches := 100, messages := 100, warmup := 100, strategy := sequential, payload := 0}},
                 terrain_lab_probe:validate_options(#{})),
    ?assertEqual("--strategy fast: expected sequential, concurrent or tree",
                 lists:flatten(terrain_lab_cli_errors:format({probe, {bad_option, strategy, fast}}))).

cli_probe_topology_compare() ->
    [{doc, "terrain probe --nodes ... writes a run directory; terrain topology clusters its latency.json into a "
           "JSON topology; terrain topology compare prints per-level ARI and clade recall; show renders it."}].
cli_probe_topology_compare(Config) ->
    Nodes = ?config(nodes, Config),
    Priv = ?config(priv_dir, Config),
    RunsDir = filename:join(Priv, "runs"),
    NodeList = lists:join(",", [atom_to_list(N) || N <- Nodes]),
    {0, Out, Err} = terrain_lab_test_io:run(["probe", "--nodes", lists:flatten(NodeList), "--batches", "3",
                                             "--messages", "5", "--runs-dir", RunsDir,
                                             "--state-dir", filename:join(Priv, "state")]),
    ?assertNotEqual(nomatch, string:find(Err, "probe: 4 nodes, 12 ordered pairs, sequential, 3 batches x 5 messages")),
    ?assertNotEqual(nomatch, string:find(Err, "ETA")),
    [Json] = [string:prefix(string:trim(L), "wrote ") || L <- string:lexemes(Out, "\n"),
                                                      string:find(L, "latency.json") =/= nomatch],
    Topology = filename:join(Priv, "found.json"),
    {0, "", Err2} = terrain_lab_test_io:run(["topology", Json, "--out", Topology]),
    ?assertNotEqual(nomatch, string:find(Err2, "topology: clustering 4 nodes")),
    {ok, #{<<"format">> := <<"terrain.topology/1">>, <<"discovery">> := #{<<"statistic">> := <<"min">>}}} =
        terrain_json:read_file(Topology),
    {0, Compared, _} = terrain_lab_test_io:run(["topology", "compare", Topology, Topology]),
    ?assertNotEqual(nomatch, string:find(Compared, "clades: recall 1.000")),
    %% an Erlang term file (which also starts with '{') against the JSON, and against
    %% the cluster spec as the truth, its short names matched after the prefix
    TermFile = filename:join(Priv, "found.term"),
    {0, "", _} = terrain_lab_test_io:run(["topology", Json, "--out", TermFile]),
    {0, Compared2, _} = terrain_lab_test_io:run(["topology", "compare", TermFile, Topology]),
    ?assertNotEqual(nomatch, string:find(Compared2, "clades: recall 1.000")),
    SpecFile = filename:join(Priv, "probe.cluster"),
    ok = file:write_file(SpecFile, "{cluster, probe, #{}}.\n{group, g, #{}, [{node, n1, #{}}, {node, n2, #{}}, "
                                   "{node, n3, #{}}, {node, n4, #{}}]}.\n"),
    {0, Compared3, _} = terrain_lab_test_io:run(["topology", "compare", TermFile, SpecFile,
                                                 "--prefix", ?config(prefix, Config)]),
    ?assertNotEqual(nomatch, string:find(Compared3, "level 1: 1 true clusters")),
    {1, "", Different} = terrain_lab_test_io:run(["topology", "compare", TermFile, SpecFile]),
    ?assertNotEqual(nomatch, string:find(Different, "the trees have different nodes")),
    {0, Shown, _} = terrain_lab_test_io:run(["topology", "show", Topology]),
    [?assertNotEqual(nomatch, string:find(Shown, atom_to_list(N))) || N <- Nodes],
    {0, Term, _} = terrain_lab_test_io:run(["topology", Json, "--alpha", "1.5", "--linkage", "average"]),
    {ok, Tokens, _} = erl_scan:string(Term),
    {ok, Tree} = erl_parse:parse_term(Tokens),
    ?assertMatch({ok, _}, terrain_topology:new(Tree)),
    {2, "", BadAlpha} = terrain_lab_test_io:run(["topology", Json, "--alpha", "0.5"]),
    ?assertNotEqual(nomatch, string:find(BadAlpha, "option '--alpha' expects auto or a number >= 1, got '0.5'")).

escript_bad_invocations() ->
    [{doc, "The escript: a bad strategy is a usage error (exit 2), a missing matrix exits 1, each with a "
           "sentence on stderr; topology without arguments is a usage error (exit 2)."}].
escript_bad_invocations(Config) ->
    Dir = ?config(priv_dir, Config),
    {2, "", Err1} = terrain_lab_test_escript:run(Dir, ["probe", "--strategy", "fast", "--nodes", "a@b"]),
    ?assertNotEqual(nomatch, string:find(Err1, "terrain probe: option '--strategy' expects one of sequential, "
                                               "concurrent, tree, got 'fast'")),
    {1, "", Err2} = terrain_lab_test_escript:run(Dir, ["topology", "/nonexistent/latency.json"]),
    ?assertNotEqual(nomatch, string:find(Err2, "/nonexistent/latency.json")),
    {2, "", Err3} = terrain_lab_test_escript:run(Dir, ["topology"]),
    ?assertNotEqual(nomatch, string:find(Err3, "expected at least 1 argument")).

%%--------------------------------------------------------------------
%% The echo's start (issue 39: "Can not start terrain_lab_probe:echo" on a fresh run)

log(#{msg := Msg}, #{config := #{pid := Pid}}) ->
    Text = case Msg of
               {string, String} -> String;
               {report, Report} -> io_lib:format("~0tp", [Report]);
               {Format, Args} -> io_lib:format(Format, Args)
           end,
    Pid ! {logged, lists:flatten(io_lib:format("~ts", [Text]))},
    ok.

%% Every log event of this node (where the probe's clients' events arrive: their group
%% leader is here) while Fun runs; Fun's result and the texts that mention "Can not start".
capture_warnings(Fun) ->
    ok = logger:add_handler(probe_capture, ?MODULE, #{config => #{pid => self()}}),
    try Fun() of
        Result ->
            _ = erpc:multicall(nodes(), erlang, statistics, [runtime], 5000),   % events in flight arrive first
            {Result, drain_logged([])}
    after
        logger:remove_handler(probe_capture)
    end.

drain_logged(Acc) ->
    receive
        {logged, Text} ->
            case string:find(Text, "Can not start") of
                nomatch -> drain_logged(Acc);
                _ -> drain_logged([Text | Acc])
            end
    after 1000 ->
            lists:reverse(Acc)
    end.

%% Node A refuses connections from and to B (a cookie B does not know), and is not
%% connected to it: as when a cluster's nodes are still connecting to each other.
cut(A, B) ->
    true = erpc:call(A, erlang, set_cookie, [B, list_to_atom("not_the_cookie_" ++ os:getpid())]),
    _ = erpc:call(A, erlang, disconnect_node, [B]),
    ok.

heal(A, B) ->
    true = erpc:call(A, erlang, set_cookie, [B, erlang:get_cookie()]),
    ok.

an_echo_node_reachable_only_later_is_measured() ->
    [{doc, "A client whose echo's node cannot be connected at first (the connection is refused until the client "
           "is running, then allowed) measures its pair once the connection succeeds: both pairs of A and B are "
           "measured and no 'Can not start' warning is logged. erlang:spawn/4 gave up on the first failed "
           "connection with that warning."}].
an_echo_node_reachable_only_later_is_measured(Config) ->
    [A, B | _] = ?config(nodes, Config),
    ok = cut(A, B),
    Self = self(),
    {Result, Warnings} =
        capture_warnings(
          fun() ->
                  Probe = spawn_link(fun() ->
                                             Self ! {probe_result, terrain_lab_probe:probe([A, B], #{batches => 2,
                                                                                              messages => 5,
                                                                                              timeout => 5000})}
                                     end),
                  %% the connection is allowed once A's client is trying to reach B
                  _ = wait_for_client(A, erlang:monotonic_time(millisecond) + 3000),
                  ok = heal(A, B),
                  receive {probe_result, R} -> R after 60000 -> ct:fail({probe_did_not_finish, Probe}) end
          end),
    {ok, #{pairs := Pairs}} = Result,
    ?assertMatch({ok, #{exchanges := 10}}, maps:get({A, B}, Pairs)),
    ?assertMatch({ok, #{exchanges := 10}}, maps:get({B, A}, Pairs)),
    ?assertEqual([], Warnings).

wait_for_client(Node, Deadline) ->
    Clients = [P || P <- erpc:call(Node, erlang, processes, []),
                    erpc:call(Node, proc_lib, initial_call, [P]) =:= false andalso
                        erpc:call(Node, erlang, process_info, [P, initial_call]) =:=
                        {initial_call, {terrain_lab_probe_client, client, 4}}],
    case Clients =/= [] orelse erlang:monotonic_time(millisecond) > Deadline of
        true -> Clients;
        false -> receive after 20 -> wait_for_client(Node, Deadline) end
    end.

an_unreachable_echo_node_fails_its_pair_without_warnings() ->
    [{doc, "When A can never connect to B, the pairs between them fail with a reason that names B "
           "({echo_not_started, B, noconnection}) after the exchange deadline, the others are measured, and no "
           "raw 'Can not start' warning is logged."}].
an_unreachable_echo_node_fails_its_pair_without_warnings(Config) ->
    [A, B, C | _] = ?config(nodes, Config),
    ok = cut(A, B),
    {Result, Warnings} = capture_warnings(fun() -> terrain_lab_probe:probe([A, B, C], #{batches => 2, messages => 5,
                                                                                       timeout => 1000})
                                          end),
    ok = heal(A, B),
    {ok, #{pairs := Pairs}} = Result,
    ?assertEqual({error, {echo_not_started, B, noconnection}}, maps:get({A, B}, Pairs)),
    ?assertEqual({error, {echo_not_started, A, noconnection}}, maps:get({B, A}, Pairs)),
    [?assertMatch({ok, #{exchanges := 10}}, maps:get(P, Pairs)) || P <- [{A, C}, {C, A}, {B, C}, {C, B}]],
    ?assertEqual([], Warnings).

%%--------------------------------------------------------------------
%% Checkpoints, files, options (issue 33)

the_tree_probe_checkpoints_after_the_first_wave() ->
    [{doc, "--strategy tree hands the result so far to the checkpoint after the seed's first round: marked "
           "partial and running, with the round's two disjoint pairs of the 4 nodes measured (in parallel, one "
           "direction each) and the flat tree of the nodes measured; written, it is a partial latency.json, a "
           "topology.json of those nodes and a manifest listing both, so SIGINT or SIGKILL after round 1 keeps "
           "them."}].
the_tree_probe_checkpoints_after_the_first_wave(Config) ->
    Nodes = ?config(nodes, Config),
    Self = self(),
    {ok, Final} = terrain_lab_probe:probe(Nodes, #{strategy => tree, batches => 1, messages => 5, warmup => 2,
                                                   checkpoint => fun(Partial) -> Self ! {checkpoint, Partial} end}),
    Checkpoint = receive {checkpoint, C} -> C after 0 -> ct:fail(no_checkpoint) end,
    ?assertMatch(#{partial := true, ended_by := running, waves := 1, topology := _}, Checkpoint),
    #{pairs := Pairs, topology := Tree, unplaced := Unplaced} = Checkpoint,
    %% the seed's first round: two disjoint pairs of the four nodes, each measured in one direction
    Round = lists:sort([lists:sort([A, B]) || {{A, B}, {ok, _}} <- maps:to_list(Pairs)]),
    ?assertMatch([[_, _], [_, _]], Round),
    ?assertEqual(lists:sort(Nodes), lists:sort(lists:append(Round))),
    ?assertEqual(lists:sort(Nodes), lists:sort(leaves(Tree))),
    ?assertEqual([], Unplaced),
    ?assertMatch(#{partial := false, ended_by := complete}, Final),
    {ok, Dir} = terrain_lab_run:create(?config(priv_dir, Config)),
    {ok, _} = terrain_lab_probe_files:write(Checkpoint, Dir, #{}),
    {ok, #{<<"partial">> := true, <<"pairs_measured">> := Measured}} =
        terrain_json:read_file(filename:join(Dir, "latency.json")),
    ?assert(Measured >= 1),
    {ok, Found} = terrain_topology:read(filename:join(Dir, "topology.json")),
    ?assertEqual(lists:sort(Nodes), lists:sort(terrain_topology:nodes(Found))),
    {ok, #{<<"outputs">> := Outputs}} = terrain_json:read_file(filename:join(Dir, "manifest.json")),
    ?assertEqual([<<"latency.csv">>, <<"latency.json">>, <<"topology.json">>],
                 lists:sort([F || #{<<"file">> := F} <- Outputs])).

leaves({node, N}) -> [N];
leaves({network, _, _, Children}) -> lists:append([leaves(C) || C <- Children]).

a_failed_write_leaves_no_temporary_file_and_a_manifest() ->
    [{doc, "A file that cannot be written (topology.json is a directory there) is named in 'cannot write FILE: "
           "REASON'; no FILE.tmp or FILE.part is left, and manifest.json lists the files that were written."}].
a_failed_write_leaves_no_temporary_file_and_a_manifest(Config) ->
    Nodes = ?config(nodes, Config),
    {ok, Result} = terrain_lab_probe:probe(Nodes, #{strategy => tree, batches => 1, messages => 5, warmup => 2}),
    {ok, Dir} = terrain_lab_run:create(?config(priv_dir, Config)),
    Topology = filename:join(Dir, "topology.json"),
    ok = file:make_dir(Topology),
    ok = file:write_file(filename:join(Topology, "occupied"), "x"),
    {error, Reason} = terrain_lab_probe_files:write(Result, Dir, #{}),
    Text = lists:flatten(io_lib:format("~ts", [terrain_lab_cli_errors:format(Reason)])),
    ?assertEqual("cannot write " ++ Topology ++ ": ", lists:sublist(Text, length("cannot write " ++ Topology) + 2)),
    {ok, Files} = file:list_dir(Dir),
    ?assertEqual(["latency.csv", "latency.json", "manifest.json", "topology.json"], lists:sort(Files)),
    {ok, #{<<"outputs">> := Outputs}} = terrain_json:read_file(filename:join(Dir, "manifest.json")),
    ?assertEqual([<<"latency.csv">>, <<"latency.json">>], lists:sort([F || #{<<"file">> := F} <- Outputs])).

numeric_options_are_bounded_and_tree_options_need_the_tree() ->
    [{doc, "Numeric options beyond what the probe's waits can hold (--budget 99999999999999999999, --timeout "
           "5000000000, --messages 1000000000) and the tree's options with another strategy (--statistic, --wave) "
           "are usage errors (exit 2) with a sentence, before anything is measured; the API refuses the same "
           "values."}].
numeric_options_are_bounded_and_tree_options_need_the_tree(Config) ->
    Priv = ?config(priv_dir, Config),
    NodeList = lists:flatten(lists:join(",", [atom_to_list(N) || N <- ?config(nodes, Config)])),
    RunsDir = filename:join(Priv, "refused_runs"),
    Run = fun(Args) -> terrain_lab_test_io:run(["probe", "--nodes", NodeList, "--runs-dir", RunsDir,
                                                "--state-dir", filename:join(Priv, "state") | Args])
          end,
    Refused = [{["--strategy", "tree", "--budget", "99999999999999999999"],
                "option '--budget' expects an integer from 1 to 2592000, got '99999999999999999999'"},
               {["--strategy", "tree", "--timeout", "5000000000", "--budget", "10"],
                "option '--timeout' expects an integer from 1 to 3600000, got '5000000000'"},
               {["--batches", "1", "--messages", "1", "--timeout", "5000000000"], "option '--timeout' expects"},
               {["--strategy", "tree", "--messages", "1000000000", "--budget", "5"],
                "option '--messages' expects an integer from 1 to 1000000, got '1000000000'"},
               {["--strategy", "sequential", "--statistic", "median"],
                "--statistic is an option of --strategy tree; --strategy sequential does not use it"},
               {["--strategy", "concurrent", "--wave", "3"],
                "--wave is an option of --strategy tree; --strategy concurrent does not use it"}],
    [begin
         {2, "", Err} = Run(Args),
         ?assertNotEqual(nomatch, string:find(Err, Sentence), {Args, Err})
     end || {Args, Sentence} <- Refused],
    %% refused before a run directory was made
    ?assertEqual({error, enoent}, file:list_dir(RunsDir)),
    [?assertMatch({error, {probe, {bad_option, Key, _}}}, terrain_lab_probe:validate_options(#{Key => Value}))
     || {Key, Value} <- [{timeout, 5000000000}, {budget_ms, 99999999999999999999000}, {messages, 1000000000},
                         {batches, 0}, {payload, -1}]],
    ?assertEqual("bad value for timeout: 5000000000 (expected an integer from 1 to 3600000)",
                 lists:flatten(terrain_lab_cli_errors:format({probe, {bad_option, timeout, 5000000000}}))).
