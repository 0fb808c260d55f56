%% The topology model: RELEASE D3.5's ultrametric, the measured metric, levels, discs,
%% missing nodes, validation messages, and the renderings.
-module(terrain_topology_tests).
-include_lib("eunit/include/eunit.hrl").

%% dc > {s1 > {r1: a b, r2: c}, s2 > {d, r3: e}}
tree() ->
    {network, dc, [{network, s1, [{network, r1, [{node, a}, {node, b}]}, {network, r2, [{node, c}]}]},
                   {network, s2, [{node, d}, {network, r3, [{node, e}]}]}]}.

new(Tree) -> {ok, T} = terrain_topology:new(Tree), T.

ultrametric_is_two_to_minus_shared_path_test() ->
    T = new(tree()),
    ?assertEqual(ultrametric, terrain_topology:metric(T)),
    ?assertEqual(0, terrain_topology:distance(T, a, a)),
    ?assertEqual(0.25, terrain_topology:distance(T, a, b)),   % share dc-s1-r1: 2 edges
    ?assertEqual(0.5, terrain_topology:distance(T, a, c)),    % share dc-s1: 1 edge
    ?assertEqual(1.0, terrain_topology:distance(T, a, e)),    % share only the root
    ?assertEqual(0.5, terrain_topology:distance(T, d, e)),
    ?assertEqual(terrain_topology:distance(T, e, a), terrain_topology:distance(T, a, e)).

measured_metric_is_height_of_lowest_common_network_test() ->
    T = new({network, root, #{height => 8000},
             [{network, x, #{height => 600}, [{node, a}, {node, b}]},
              {network, y, #{height => 500}, [{node, c}, {node, d}]}]}),
    ?assertEqual(measured, terrain_topology:metric(T)),
    ?assertEqual(600, terrain_topology:distance(T, a, b)),
    ?assertEqual(8000, terrain_topology:distance(T, b, c)),
    ?assertEqual(16000, terrain_topology:anywhere(T)),
    {ok, U} = terrain_topology:new(terrain_topology:term(T), #{metric => ultrametric}),
    ?assertEqual(0.5, terrain_topology:distance(U, a, b)).

missing_nodes_are_anywhere_test() ->
    T = new(tree()),
    ?assertEqual(2.0, terrain_topology:distance(T, a, stranger)),
    ?assertEqual(anywhere, terrain_topology:level(T, a, stranger)),
    ?assertEqual(anywhere, terrain_topology:level(T, stranger, other)),
    ?assertEqual(same_node, terrain_topology:level(T, stranger, stranger)),
    ?assertEqual([stranger], terrain_topology:disc(T, stranger, 1.0)),
    ?assertEqual([stranger, a, b, c, d, e], terrain_topology:disc(T, stranger, 2.0)).

levels_follow_the_rank_of_the_distance_test() ->
    T = new(tree()),
    ?assertEqual(very_near, terrain_topology:level(T, a, b)),
    ?assertEqual(near, terrain_topology:level(T, a, c)),
    ?assertEqual(very_far, terrain_topology:level(T, a, e)),
    %% four distinct distances: very_near, near, far, very_far
    Deep = new({network, l0, [{network, l1, [{network, l2, [{network, l3, [{node, p}, {node, q}]}, {node, r}]}, {node, s}]},
                              {node, t}]}),
    ?assertEqual([very_near, near, far, very_far],
                 [terrain_topology:level(Deep, p, X) || X <- [q, r, s, t]]),
    Flat = new({network, [{node, x}, {node, y}]}),
    ?assertEqual(near, terrain_topology:level(Flat, x, y)).

disc_is_the_closed_ball_test() ->
    T = new(tree()),
    ?assertEqual([a], terrain_topology:disc(T, a, 0)),
    ?assertEqual([a, b], terrain_topology:disc(T, a, 0.25)),
    ?assertEqual([a, b, c], terrain_topology:disc(T, a, 0.5)),
    ?assertEqual([a, b, c, d, e], terrain_topology:disc(T, a, 1)).

subtree_and_groups_test() ->
    T = new(tree()),
    ?assertEqual([a, b, c], terrain_topology:subtree(T, s1)),
    ?assertEqual([d, e], terrain_topology:subtree(T, s2)),
    ?assertEqual([], terrain_topology:subtree(T, nowhere)),
    ?assertEqual([a, b, c, d, e], terrain_topology:nodes(T)),
    ?assertEqual([dc, s1, r1, r2, s2, r3], [N || {N, _, _, _} <- terrain_topology:groups(T)]).

unnamed_networks_get_names_test() ->
    T = new({network, [{network, [{node, a}]}, {node, b}]}),
    ?assertEqual([net, net_1], [N || {N, _, _, _} <- terrain_topology:groups(T)]).

invalid_trees_are_rejected_with_a_sentence_test() ->
    Cases = [{{network, r, []}, "topology at r: the network is empty"},
             {{network, r, [{network, s, [{node, a}]}, {node, a}]}, "topology at r: node a appears more than once"},
             {{network, r, #{height => -1}, [{node, a}]}, "at r: height -1 must be a non-negative number"},
             {{network, r, #{height => 10}, [{network, s, #{height => 20}, [{node, a}]}]},
              "at r: a child network has height 20 above its parent's 10"},
             {{network, r, #{weight => 1}, [{node, a}]}, "unknown network option weight"},
             {{network, r, [{host, a}]}, "at r: unknown term {host,a}"},
             {{node, a}, "the root must be a network"},
             {{network, r, [{node, "a"}]}, "node name \"a\" must be an atom"},
             {[a, b], "unknown term [a,b]"},
             {{network, r, [{node, a} | b]}, "at r: the children [{node,a}|b] are not a proper list"}],
    [begin
         {error, Reason} = terrain_topology:new(Tree),
         Message = lists:flatten(terrain_topology:format_error(Reason)),
         ?assert(string:find(Message, Expected) =/= nomatch, Message)
     end || {Tree, Expected} <- Cases],
    {error, R} = terrain_topology:new(tree(), #{metric => measured}),
    ?assertEqual("topology: the measured metric needs a height on every network",
                 lists:flatten(terrain_topology:format_error(R))).

check_accepts_only_what_new_builds_test() ->
    {ok, T} = terrain_topology:new(tree()),
    ?assertEqual({ok, T}, terrain_topology:check(T)),
    {ok, M} = terrain_topology:new({network, r, #{height => 10}, [{node, a}, {node, b}]}),
    ?assertEqual({ok, M}, terrain_topology:check(M)),
    Message = fun({error, Reason}) -> lists:flatten(terrain_topology:format_error(Reason)) end,
    [?assertEqual("topology: not a topology (build one with terrain_topology:new/1,2 or read/1)",
                  Message(terrain_topology:check(Bad)))
     || Bad <- [garbage, tree(), #{}, maps:remove(paths, T), maps:put(extra, 1, T)]],
    ?assertMatch("topology: the topology's tables do not match its tree" ++ _,
                 Message(terrain_topology:check(maps:put(distances, [], T)))),
    ?assertMatch("topology: the topology's tables do not match its tree" ++ _,
                 Message(terrain_topology:check(maps:put(metric, ultrametric, M)))),
    ?assertMatch("topology at r: the network is empty" ++ _,
                 Message(terrain_topology:check(maps:put(tree, {network, r, []}, T)))).

read_file_test() ->
    File = "/tmp/terrain_topo_" ++ os:getpid() ++ ".term",
    ok = file:write_file(File, io_lib:format("~p.~n", [tree()])),
    try
        {ok, T} = terrain_topology:read(File),
        ?assertEqual(tree(), terrain_topology:term(T)),
        ok = file:write_file(File, "{network, r, [{node, a}]}.\n{network, s, [{node, b}]}.\n"),
        {error, R} = terrain_topology:read(File),
        ?assertNotEqual(nomatch, string:find(lists:flatten(terrain_topology:format_error(R)), "expected one topology term, found 2"))
    after
        file:delete(File)
    end.

renderings_test() ->
    T = new({network, root, #{height => 8000},
             [{network, x, #{height => 600}, [{node, a}, {node, b}]}, {node, c}]}),
    ?assertEqual("((a:600,b:600)x:7400,c:8000)root;\n", lists:flatten(io_lib:format("~s", [terrain_topology:render(T, newick)]))),
    {ok, Json} = terrain_json:decode(iolist_to_binary(terrain_topology:render(T, json))),
    ?assertMatch(#{<<"format">> := <<"terrain.topology/1">>, <<"metric">> := <<"measured">>,
                   <<"tree">> := #{<<"name">> := <<"root">>, <<"height">> := 8000,
                                   <<"children">> := [#{<<"name">> := <<"x">>, <<"height">> := 600,
                                                        <<"children">> := [#{<<"node">> := <<"a">>}, #{<<"node">> := <<"b">>}]},
                                                      #{<<"node">> := <<"c">>}]}}, Json),
    Dot = lists:flatten(io_lib:format("~s", [terrain_topology:render(T, dot)])),
    ?assertNotEqual(nomatch, string:find(Dot, "shape=ellipse, label=\"x\\n2 nodes\\nheight 600 us\\na\\nb\"")),
    ?assertNotEqual(nomatch, string:find(Dot, "shape=box, label=\"root\\nheight 8000 us\"")),
    {ok, Tokens, _} = erl_scan:string(lists:flatten(io_lib:format("~s", [terrain_topology:render(T, term)]))),
    {ok, Term} = erl_parse:parse_term(Tokens),
    ?assertEqual(terrain_topology:term(T), Term),
    Text = lists:flatten(io_lib:format("~s", [terrain_topology:render(T, text)])),
    ?assertEqual("root (3 nodes, height 8000 us)\n  x (2 nodes, height 600 us)\n    a\n    b\n  c\n", Text).

a_network_of_one_node_says_node_test() ->
    {ok, T} = terrain_topology:new({network, root, [{network, solo, [{node, a}]}, {network, pair, [{node, b}, {node, c}]}]}),
    Text = lists:flatten(io_lib:format("~s", [terrain_topology:render(T, text)])),
    ?assertEqual("root (3 nodes)\n  solo (1 node)\n    a\n  pair (2 nodes)\n    b\n    c\n", Text),
    Dot = lists:flatten(io_lib:format("~s", [terrain_topology:render(T, dot)])),
    ?assertNotEqual(nomatch, string:find(Dot, "label=\"solo\\n1 node\\na\"")).

%%--------------------------------------------------------------------
%% Reading what the writers write: terrain_topology:read/1 and terrain:load_topology/1
%% accept every whole-tree format render/2 writes (term and JSON).

measured_tree() ->
    {network, dc, #{height => 8000},
     [{network, s1, #{height => 600}, [{network, r1, #{height => 40}, [{node, a@h}, {node, b@h}]},
                                       {network, r2, #{height => 30}, [{node, c@h}]}]},
      {network, s2, #{height => 500}, [{node, d@h}, {network, r3, #{height => 20}, [{node, e@h}]}]}]}.

write_rendered(T, Format) ->
    File = filename:join(test_dir(), "topology." ++ atom_to_list(Format)),
    ok = file:write_file(File, terrain_topology:render(T, Format)),
    File.

test_dir() ->
    Dir = filename:join(["/tmp", "terrain_topology_tests_" ++ os:getpid()]),
    ok = filelib:ensure_path(Dir),
    Dir.

read_accepts_term_and_json_as_render_writes_them_test() ->
    [begin
         T = new(Tree),
         [begin
              {ok, Read} = terrain_topology:read(write_rendered(T, Format)),
              ?assertEqual({Format, Tree}, {Format, terrain_topology:term(Read)}),
              ?assertEqual({Format, terrain_topology:metric(T)}, {Format, terrain_topology:metric(Read)})
          end || Format <- [term, json]]
     end || Tree <- [tree(), measured_tree()]].

read_keeps_the_metric_written_in_json_test() ->
    {ok, T} = terrain_topology:new(measured_tree(), #{metric => ultrametric}),
    {ok, Read} = terrain_topology:read(write_rendered(T, json)),
    ?assertEqual(ultrametric, terrain_topology:metric(Read)).

read_explains_json_that_is_not_a_topology_test() ->
    File = filename:join(test_dir(), "other.json"),
    ok = file:write_file(File, <<"{\"format\": \"terrain.latency/1\"}">>),
    {error, Reason} = terrain_topology:read(File),
    ?assertMatch({topology, [{file, File}], {format, <<"terrain.latency/1">>}}, Reason),
    ?assertEqual("topology at {file,\"" ++ File ++ "\"}: not a topology: format <<\"terrain.latency/1\">> "
                 "(expected \"terrain.topology/1\")",
                 lists:flatten(terrain_topology:format_error(Reason))),
    ok = file:write_file(File, <<"{\"format\": ">>),
    ?assertMatch({error, {topology, [{file, File}], {json, _, _}}}, terrain_topology:read(File)).

load_topology_accepts_every_format_terrain_topology_writes_test_() ->
    {setup,
     fun() -> {ok, Started} = application:ensure_all_started(terrain), Started end,
     fun(Started) -> [ok = application:stop(App) || App <- lists:reverse(Started)] end,
     fun(_) ->
             [?_test(begin
                         T = new(Tree),
                         ok = terrain:load_topology(write_rendered(T, Format)),
                         ?assertEqual(Tree, terrain:topology()),
                         ?assertEqual(terrain_topology:distance(T, a@h, c@h), terrain:distance(a@h, c@h))
                     end) || Tree <- [tree_at_h(), measured_tree()], Format <- [term, json]]
     end}.

tree_at_h() ->
    {network, dc, [{network, s1, [{network, r1, [{node, a@h}, {node, b@h}]}, {network, r2, [{node, c@h}]}]},
                   {network, s2, [{node, d@h}, {network, r3, [{node, e@h}]}]}]}.

read_keeps_the_syntax_error_of_a_broken_term_file_test() ->
    File = filename:join(test_dir(), "broken.term"),
    ok = file:write_file(File, <<"{network, a, [{node, x}\n">>),
    ?assertMatch({error, {topology, [{file, File}, {line, _}], {syntax, _}}}, terrain_topology:read(File)).

%% Bounds of the model (issue 33, row 12): a tree nests at most 256 networks, and the
%% names of a JSON tree are counted and measured before they become atoms.
a_tree_deeper_than_256_networks_is_refused_test() ->
    Chain = fun(D) -> lists:foldl(fun(_, Child) -> {network, r, [Child]} end, {node, a}, lists:seq(1, D)) end,
    ?assertMatch({ok, _}, terrain_topology:new(Chain(256))),
    {error, Reason} = terrain_topology:new(Chain(257)),
    ?assertMatch({topology, _, {too_deep, 256}}, Reason),
    ?assertMatch("topology at " ++ _, lists:flatten(terrain_topology:format_error(Reason))).

json_names_are_checked_before_atoms_are_made_test_() ->
    {timeout, 120, fun json_names_are_checked_before_atoms_are_made/0}.

json_names_are_checked_before_atoms_are_made() ->
    Doc = fun(Children) -> terrain_json:encode(#{format => <<"terrain.topology/1">>,
                                                 tree => #{name => <<"r">>, children => Children}}) end,
    Long = binary:copy(<<"q">>, 300),
    ?assertMatch({error, {long_name, _}}, terrain_topology:from_json(Doc([#{node => Long}]))),
    Before = erlang:system_info(atom_count),
    Many = [#{node => <<"zq_json_", (integer_to_binary(I))/binary>>} || I <- lists:seq(1, 200001)],
    ?assertEqual({error, {too_many_names, 200000}}, terrain_topology:from_json(Doc(Many))),
    ?assert(erlang:system_info(atom_count) - Before < 100).

json_names_a_metric_only_for_a_tree_with_heights_test() ->
    {ok, Plain} = terrain_topology:new({network, r, [{node, a}, {node, b}]}),
    {ok, PlainDoc} = terrain_json:decode(terrain_topology:render(Plain, json)),
    ?assertNot(is_map_key(<<"metric">>, PlainDoc)),
    {ok, Measured} = terrain_topology:new({network, r, #{height => 10}, [{node, a}, {node, b}]}),
    {ok, MeasuredDoc} = terrain_json:decode(terrain_topology:render(Measured, json)),
    ?assertEqual(<<"measured">>, maps:get(<<"metric">>, MeasuredDoc)).

read_takes_only_regular_files_test() ->
    ?assertEqual({error, {topology, [{file, "/dev/zero"}], {file, not_regular}}}, terrain_topology:read("/dev/zero")),
    ?assertEqual("topology at {file,\"/dev/zero\"}: not a regular file",
                 lists:flatten(terrain_topology:format_error({topology, [{file, "/dev/zero"}], {file, not_regular}}))).
