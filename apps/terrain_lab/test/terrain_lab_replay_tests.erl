%% The tree probe replayed against the real matrices of apps/terrain/test/data/real
%% (terrain_lab_replay, `terrain topology simulate --matrix'), at its defaults.
-module(terrain_lab_replay_tests).
-include_lib("eunit/include/eunit.hrl").

dir() ->
    filename:join([filename:dirname(?FILE), "..", "..", "terrain", "test", "data", "real"]).

replay(Name) ->
    replay_seed(Name, 1).

replay_seed(Name, Seed) ->
    {ok, Matrix} = terrain_lab_replay:read(filename:join(dir(), Name ++ ".latency.json")),
    {ok, Json} = file:read_file(filename:join(dir(), Name ++ ".truth.json")),
    {ok, Truth, _} = terrain_topology:from_json(Json),
    {ok, Report} = terrain_lab_replay:run(#{matrix => Matrix, truth => Truth, seed => Seed}),
    Report.

cpus() ->
    [filename:basename(F, ".latency.json") || F <- filelib:wildcard(filename:join(dir(), "cpu-*.latency.json"))].

%% The goal (issue 35): recall and precision >= 0.95 on every CPU. The 7950X (quantized
%% round trips: SMT pairs of 21 ns round trip one step from CCD pairs of 31 ns) met it
%% once the probe made its strict pairs networks (recall 0.647 before); the 3960X
%% (0.906 / 0.967 at seed 1 with waves as large as the tree) meets it since waves are
%% at most a quarter of the tree.
cpu_recall_and_precision_test_() ->
    [{Name, {timeout, 60, fun() ->
                                  #{clade_recall := R, clade_precision := P} = replay(Name),
                                  ?assert({Name, R >= 0.95, P >= 0.95} =:= {Name, true, true})
                          end}} || Name <- cpus()].

%% The 7950X's six SMT pairs at 21 ns round trip (CCD pairs 31-42 ns, other SMT pairs
%% 10-11 ns) lie in the CCD's band of the level model; they are strict pairs (every
%% other round trip of both nodes at least 25% longer), and the probe finds all 15 SMT
%% pairs in any node order. The loose pair (two CPUs at 21 ns, one of them 21 ns from
%% an SMT pair too) is not a strict pair and stays apart: precision 1.
quantized_smt_pairs_are_found_at_any_seed_test_() ->
    {timeout, 60, fun() ->
                          Results = [begin
                                         #{clade_recall := R, clade_precision := P} = replay_seed(
                                                                                       "cpu-amd-ryzen9-7950x", S),
                                         {S, R, P}
                                     end || S <- [1, 2, 3, 4]],
                          ?assertEqual([{S, 1.0, 1.0} || S <- [1, 2, 3, 4]], Results)
                  end}.

%% The pair bound of the goal (<= 30% of the ordered pairs for n < 100, <= 20% from
%% 100), on the CPUs that meet it today. The 2700X, 7950X, POWER7 and SPARC T4 (16-32
%% threads) met it once a flat group sampled 2 more members, not 4, a confirmation
%% reused what the descent measured, the descent stopped at the one near child and
%% waves were at most a quarter of the tree. The Xeon Phi (32 tiles of 2) and the
%% Xeon 8375C (32 cores of 2 per socket) met it once a twin was searched in the order
%% of its latency profile and the search stopped at a twin at the model's lowest level.
%% The i9-12900K (8 HT pairs beside 8 E-cores, whose search for a twin they do not have
%% measured every sibling: 30.07%) met it once a profile rules children out
%% (docs/TOPOLOGY_DISCOVERY.md, "Children a profile rules out"); it is checked at
%% seeds 1-3 below.
cpu_pairs_bound_test_() ->
    [{Name, {timeout, 60, fun() ->
                                  #{nodes := N, fraction_measured := F} = replay(Name),
                                  Bound = case N < 100 of true -> 0.30; false -> 0.20 end,
                                  ?assert({Name, F =< Bound} =:= {Name, true})
                          end}} || Name <- cpus()].

%% The i9-12900K at three node orders: 30.07%, 34.96% and 33.33% of the ordered pairs
%% before the profile ruled children out; 23.7%, 29.0%, 25.5% since.
i9_pairs_bound_at_three_seeds_test_() ->
    {timeout, 60, fun() ->
                          Over = [{S, F} || S <- [1, 2, 3],
                                            #{fraction_measured := F} <- [replay_seed("cpu-intel-core-i9-12900k", S)],
                                            F > 0.30],
                          ?assertEqual([], Over)
                  end}.

flat_mesh_measures_few_pairs_test() ->
    %% Graviton2: 64 CPUs, no group stands out; a flat group is sampled, not measured whole
    #{fraction_measured := F, clade_precision := P} = replay("cpu-aws-graviton2"),
    ?assert(F =< 0.15),
    ?assertEqual(1.0, P).

same_keys_as_simulate_test() ->
    Report = replay("cpu-amd-ryzen9-5950x"),
    ?assertEqual([], [K || K <- [nodes, pairs_measured, pairs_total, clade_recall, clade_precision, levels, seconds],
                           not is_map_key(K, Report)]),
    ?assertEqual(32 * 31, maps:get(pairs_total, Report)).

write(Doc) ->
    File = filename:join("/tmp", "terrain_lab_replay_tests_" ++ integer_to_list(erlang:unique_integer([positive]))
                         ++ ".json"),
    ok = file:write_file(File, terrain_json:encode(Doc)),
    File.

null_both_ways_is_not_measured_test() ->
    %% a and c never measured either way: every node is still placed (through b)
    File = write(#{<<"format">> => <<"terrain.latency/1">>, <<"nodes">> => [<<"a">>, <<"b">>, <<"c">>],
                   <<"stats">> => #{<<"min">> => [[0, 10, null], [10, 0, 1000], [null, 1000, 0]]}}),
    {ok, M} = terrain_lab_replay:read(File),
    {ok, #{unplaced := 0, nodes := 3, clade_recall := null}} = terrain_lab_replay:run(#{matrix => M}),
    ok = file:delete(File).

bad_matrices_test() ->
    One = write(#{<<"format">> => <<"terrain.latency/1">>, <<"nodes">> => [<<"a">>],
                  <<"stats">> => #{<<"min">> => [[0]]}}),
    ?assertMatch({error, {replay, {one_node, _}}}, terrain_lab_replay:read(One)),
    Neg = write(#{<<"format">> => <<"terrain.latency/1">>, <<"nodes">> => [<<"a">>, <<"b">>],
                  <<"stats">> => #{<<"min">> => [[0, -1], [1, 0]]}}),
    {error, Reason} = terrain_lab_replay:read(Neg),
    ?assert(length(lists:flatten(terrain_lab_replay:format_error(Reason))) > 0),
    ?assertMatch({replay, {bad_value, _, a, b, -1}}, Reason),
    NoMin = write(#{<<"format">> => <<"terrain.latency/1">>, <<"nodes">> => [<<"a">>, <<"b">>],
                    <<"stats">> => #{<<"mean">> => [[0, 1], [1, 0]]}}),
    ?assertMatch({error, {replay, {no_min, _}}}, terrain_lab_replay:read(NoMin)),
    lists:foreach(fun file:delete/1, [One, Neg, NoMin]).

%% The command: without --truth the text line says there is nothing to score against
%% (it crashed with exit 70 on the null recall); with it, recall and precision; --out
%% writes the tree found.
command_test_() ->
    {timeout, 60,
     fun() ->
             M = filename:join(dir(), "cpu-amd-ryzen9-5950x.latency.json"),
             T = filename:join(dir(), "cpu-amd-ryzen9-5950x.truth.json"),
             Out = "/tmp/terrain_lab_replay_tests_out.json",
             {0, Text, _} = terrain_lab_test_io:run(["topology", "simulate", "--matrix", M, "--out", Out]),
             ?assertNotEqual(nomatch, string:find(Text, "no --truth to score against")),
             {ok, _, _} = terrain_topology:from_json(element(2, file:read_file(Out))),
             {0, Scored, _} = terrain_lab_test_io:run(["topology", "simulate", "--matrix", M, "--truth", T]),
             ?assertNotEqual(nomatch, string:find(Scored, "clade recall 1.000, precision 1.000")),
             {1, _, Err} = terrain_lab_test_io:run(["topology", "simulate", "--matrix", "/tmp/terrain_no_such.json"]),
             ?assertNotEqual(nomatch, string:find(Err, "no such file")),
             ok = file:delete(Out)
     end}.
