%% The scaling experiment end to end at its smallest size (16 VMs, about 30 s a case
%% with the warm-up): `terrain experiment scale --max-nodes 16' in-process, with the
%% tree-guided probe (the default) and with all pairs at once.
-module(terrain_lab_scale_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([scale_at_sixteen_vms_times_every_operation_and_leaves_nothing/0,
         scale_at_sixteen_vms_times_every_operation_and_leaves_nothing/1,
         scale_with_the_concurrent_probe_measures_all_pairs/0,
         scale_with_the_concurrent_probe_measures_all_pairs/1]).

suite() -> [{timetrap, {minutes, 4}}].

all() -> [scale_at_sixteen_vms_times_every_operation_and_leaves_nothing,
          scale_with_the_concurrent_probe_measures_all_pairs].

init_per_suite(Config) ->
    terrain_test_peers:ensure_distributed(),
    Config.

end_per_suite(_Config) ->
    ok.

scale_at_sixteen_vms_times_every_operation_and_leaves_nothing() ->
    [{doc, "terrain experiment scale --max-nodes 16 --probe-budget 60: scale.json (terrain.scale/1) holds one "
      "time for each of up, attrs, choose, probe and down at 16 nodes, every node answered attrs and was "
      "chosen, the probe was tree-guided (the default), placed every node and measured some of the 240 ordered "
      "pairs, not more; the manifest's kind is scale and its command names the strategy; the table is on "
      "stdout with the pairs measured; no VM of the run is left registered with epmd."}].
scale_at_sixteen_vms_times_every_operation_and_leaves_nothing(Config) ->
    {Summary, Table, Manifest} = run_scale(Config, "tree", tree),
    ?assertMatch(#{<<"format">> := <<"terrain.scale/1">>, <<"sizes">> := [16], <<"probe_strategy">> := <<"tree">>},
                 Summary),
    Rows = maps:get(<<"rows">>, Summary),
    ?assertEqual([<<"attrs">>, <<"choose">>, <<"down">>, <<"probe">>, <<"up">>],
                 lists:sort([Op || #{<<"operation">> := Op, <<"nodes">> := 16} <- Rows])),
    [?assert(S > 0) || #{<<"seconds">> := S} <- Rows],
    ?assertMatch(#{<<"answered">> := 16}, detail(<<"attrs">>, Rows)),
    ?assertMatch(#{<<"chosen">> := 16}, detail(<<"choose">>, Rows)),
    #{<<"pairs_measured">> := Measured} = Probe = detail(<<"probe">>, Rows),
    ?assertMatch(#{<<"strategy">> := <<"tree">>, <<"pairs">> := 240, <<"unplaced">> := 0,
                   <<"ended_by">> := <<"complete">>}, Probe),
    %% every node was placed: it was measured against at least one other
    ?assert(Measured >= 15 andalso Measured =< 240),
    ?assertMatch(#{<<"kind">> := <<"scale">>, <<"outputs">> := [#{<<"kind">> := <<"scale">>,
                                                                   <<"file">> := <<"scale.json">>}]}, Manifest),
    [#{<<"parameters">> := #{<<"command">> := Command}}] = maps:get(<<"outputs">>, Manifest),
    ?assertMatch({match, _}, re:run(Command, "--probe-strategy tree")),
    ?assertMatch({match, _}, re:run(Table, "^ +16 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +"
                                    ++ integer_to_list(Measured) ++ "/240 ", [multiline])).

scale_with_the_concurrent_probe_measures_all_pairs() ->
    [{doc, "terrain experiment scale --max-nodes 16 --probe-strategy concurrent: the probe row records the "
      "concurrent strategy and all 240 ordered pairs measured, and the table shows 240/240; no VM of the run "
      "is left registered with epmd."}].
scale_with_the_concurrent_probe_measures_all_pairs(Config) ->
    {Summary, Table, _Manifest} = run_scale(Config, "concurrent", concurrent),
    ?assertMatch(#{<<"probe_strategy">> := <<"concurrent">>}, Summary),
    ?assertMatch(#{<<"strategy">> := <<"concurrent">>, <<"pairs">> := 240, <<"pairs_measured">> := 240},
                 detail(<<"probe">>, maps:get(<<"rows">>, Summary))),
    ?assertMatch({match, _}, re:run(Table, " 240/240 ")).

%%--------------------------------------------------------------------
%% Helpers

%% Runs the experiment at 16 nodes with the strategy; checks that no VM is left.
run_scale(Config, Strategy, Name) ->
    Dir = filename:join(?config(priv_dir, Config), atom_to_list(Name)),
    Out = filename:join(Dir, "scale"),
    Prefix = terrain_test_peers:unique_prefix(Name),
    ok = filelib:ensure_path(Dir),
    {ok, Stdout} = file:open(filename:join(Dir, "stdout"), [write]),
    {ok, Stderr} = file:open(filename:join(Dir, "stderr"), [write]),
    Io = #{out => Stdout, err => Stderr},
    ok = terrain_lab_cmd_experiment:run(#{out => Out, quick => false, instance => 1, max_nodes => 16,
                                          probe_budget => 60, probe_strategy => Strategy, prefix => Prefix},
                                        ["scale"], Io),
    ok = file:close(Stdout),
    ok = file:close(Stderr),
    {ok, Summary} = terrain_json:read_file(filename:join(Out, "scale.json")),
    {ok, Manifest} = terrain_json:read_file(filename:join(Out, "manifest.json")),
    {ok, Table} = file:read_file(filename:join(Dir, "stdout")),
    {ok, Names} = net_adm:names(),
    ?assertEqual([], [N || {N, _} <- Names, lists:prefix(Prefix, N)]),
    {Summary, Table, Manifest}.

detail(Operation, Rows) ->
    hd([D || #{<<"operation">> := O, <<"detail">> := D} <- Rows, O =:= Operation]).
