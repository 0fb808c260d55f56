%% The scaling experiment end to end at its smallest size (16 VMs, about 15 s):
%% `terrain experiment scale --max-nodes 16' in-process.
-module(terrain_lab_scale_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([scale_at_sixteen_vms_times_every_operation_and_leaves_nothing/0,
         scale_at_sixteen_vms_times_every_operation_and_leaves_nothing/1]).

suite() -> [{timetrap, {minutes, 3}}].

all() -> [scale_at_sixteen_vms_times_every_operation_and_leaves_nothing].

init_per_suite(Config) ->
    terrain_test_peers:ensure_distributed(),
    Config.

end_per_suite(_Config) ->
    ok.

scale_at_sixteen_vms_times_every_operation_and_leaves_nothing() ->
    [{doc, "terrain experiment scale --max-nodes 16 --probe-budget 5: scale.json (terrain.scale/1) holds one "
      "time for each of up, attrs, choose, probe and down at 16 nodes, every node answered attrs and was "
      "chosen, the probe measured all 240 pairs; the manifest's kind is scale; the table is on stdout; no VM "
      "of the run is left registered with epmd."}].
scale_at_sixteen_vms_times_every_operation_and_leaves_nothing(Config) ->
    Out = filename:join(?config(priv_dir, Config), "scale"),
    Prefix = terrain_test_peers:unique_prefix(scale_suite),
    {ok, Stdout} = file:open(filename:join(?config(priv_dir, Config), "stdout"), [write]),
    {ok, Stderr} = file:open(filename:join(?config(priv_dir, Config), "stderr"), [write]),
    Io = #{out => Stdout, err => Stderr},
    ok = terrain_lab_cmd_experiment:run(#{out => Out, quick => false, instance => 1, max_nodes => 16,
                                          probe_budget => 5, prefix => Prefix}, ["scale"], Io),
    ok = file:close(Stdout),
    ok = file:close(Stderr),
    {ok, Summary} = terrain_json:read_file(filename:join(Out, "scale.json")),
    ?assertMatch(#{<<"format">> := <<"terrain.scale/1">>, <<"sizes">> := [16]}, Summary),
    Rows = maps:get(<<"rows">>, Summary),
    ?assertEqual([<<"attrs">>, <<"choose">>, <<"down">>, <<"probe">>, <<"up">>],
                 lists:sort([Op || #{<<"operation">> := Op, <<"nodes">> := 16} <- Rows])),
    [?assert(S > 0) || #{<<"seconds">> := S} <- Rows],
    Detail = fun(Op) -> hd([D || #{<<"operation">> := O, <<"detail">> := D} <- Rows, O =:= Op]) end,
    ?assertMatch(#{<<"answered">> := 16}, Detail(<<"attrs">>)),
    ?assertMatch(#{<<"chosen">> := 16}, Detail(<<"choose">>)),
    ?assertMatch(#{<<"pairs">> := 240, <<"pairs_measured">> := 240}, Detail(<<"probe">>)),
    {ok, Manifest} = terrain_json:read_file(filename:join(Out, "manifest.json")),
    ?assertMatch(#{<<"kind">> := <<"scale">>, <<"outputs">> := [#{<<"kind">> := <<"scale">>,
                                                                   <<"file">> := <<"scale.json">>}]}, Manifest),
    {ok, Table} = file:read_file(filename:join(?config(priv_dir, Config), "stdout")),
    ?assertMatch({match, _}, re:run(Table, "^ +16 +[0-9.]+ +[0-9.]+", [multiline])),
    {ok, Names} = net_adm:names(),
    ?assertEqual([], [N || {N, _} <- Names, lists:prefix(Prefix, N)]).
