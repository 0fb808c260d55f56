%% `terrain topology' writes what the library reads: a topology written by the CLI
%% (`show --out', `discover --out', in term and JSON) loads with
%% terrain:load_topology/1, and a cluster spec becomes the same tree through the one
%% spec-to-tree conversion (terrain_lab_spec:topology/3).
-module(terrain_lab_cmd_topology_tests).
-include_lib("eunit/include/eunit.hrl").

example(Name) ->
    filename:join([terrain_lab_test_escript:root(), "examples", Name]).

tmp(Name) ->
    Dir = filename:join("/tmp", "terrain_lab_cmd_topology_tests_" ++ os:getpid()),
    ok = filelib:ensure_path(Dir),
    filename:join(Dir, Name).

load_topology_reads_what_terrain_topology_show_writes_test_() ->
    {setup,
     fun() -> {ok, Started} = application:ensure_all_started(terrain), Started end,
     fun(Started) -> [ok = application:stop(App) || App <- lists:reverse(Started)] end,
     fun(_) ->
             {ok, [Expected]} = file:consult(example("dc.topology")),
             [?_test(begin
                         Out = tmp("dc." ++ Format),
                         ?assertMatch({0, "", _}, terrain_lab_test_io:run(["topology", "show", example("dc.topology"),
                                                                           "--format", Format, "--out", Out])),
                         ?assertEqual(ok, terrain:load_topology(Out)),
                         ?assertEqual(Expected, terrain:topology())
                     end) || Format <- ["term", "json"]]
     end}.

load_topology_reads_what_topology_discovery_writes_test_() ->
    {setup,
     fun() -> {ok, Started} = application:ensure_all_started(terrain), Started end,
     fun(Started) -> [ok = application:stop(App) || App <- lists:reverse(Started)] end,
     fun(_) ->
             Latency = tmp("latency.json"),
             ok = file:write_file(Latency, latency_json()),
             [?_test(begin
                         Out = tmp("found." ++ Format),
                         ?assertMatch({0, "", _}, terrain_lab_test_io:run(["topology", Latency, "--out", Out])),
                         ?assertEqual(ok, terrain:load_topology(Out)),
                         %% two racks of two: a and b near, a and c far
                         ?assert(terrain:distance(a@h, b@h) < terrain:distance(a@h, c@h)),
                         ?assertEqual(lists:sort([a@h, b@h, c@h, d@h]), lists:sort(terrain:disc(a@h, 1.0e9)))
                     end) || Format <- ["term", "json"]]
     end}.

%% A latency.json (terrain.latency/1) of four nodes in two racks of two.
latency_json() ->
    Nodes = [a@h, b@h, c@h, d@h],
    Rack = fun(N) -> lists:member(N, [a@h, b@h]) end,
    Row = fun(From) -> [if From =:= To -> 0; true -> case Rack(From) =:= Rack(To) of true -> 50; false -> 900 end end
                        || To <- Nodes] end,
    Matrix = [Row(N) || N <- Nodes],
    terrain_json:encode(#{format => <<"terrain.latency/1">>, nodes => Nodes, unit => us,
                          stats => #{min => Matrix, median => Matrix, mean => Matrix, p95 => Matrix,
                                     stddev => [[0 || _ <- Nodes] || _ <- Nodes]}}).

spec_becomes_the_tree_of_its_groups_in_file_order_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms(
                   [{cluster, c, #{latency => 1000}},
                    {node, top1, #{}},
                    {group, g1, #{latency => 100}, [{node, a, #{}}, {group, g2, #{latency => 10}, [{node, b, #{}}]},
                                                    {node, c, #{}}]},
                    {node, top2, #{}}], undefined),
    Id = fun(N) -> N end,
    ?assertEqual({network, c, [{node, top1}, {network, g1, [{node, a}, {network, g2, [{node, b}]}, {node, c}]},
                               {node, top2}]},
                 terrain_lab_spec:topology(Spec, Id, #{heights => false})),
    ?assertEqual({network, c, #{height => 2000},
                  [{node, top1}, {network, g1, #{height => 200}, [{node, a}, {network, g2, #{height => 20}, [{node, b}]},
                                                                 {node, c}]},
                   {node, top2}]},
                 terrain_lab_spec:topology(Spec, Id)).

%% Discovery prints its evidence: on the AMD 7950X (quantized results), the strict groups
%% it adds beside the alpha rule's two core complexes, and that one alpha alone does not
%% give them.
strict_groups_are_named_on_stderr_test() ->
    Matrix = filename:join([terrain_lab_test_escript:root(), "apps", "terrain", "test", "data", "real",
                            "cpu-amd-ryzen9-7950x.latency.json"]),
    {0, _Tree, Err} = terrain_lab_test_io:run(["topology", Matrix]),
    ?assertNotEqual(nomatch, string:find(Err, "15 strict groups added as networks")),
    ?assertNotEqual(nomatch, string:find(Err, "gives the same tree but the strict groups")).
