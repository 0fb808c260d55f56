%% `terrain topology' against hostile inputs (issue 33, the parsing rows of
%% ../shared/reports/handson-wave3-commands.md): every case runs the real command
%% in-process and checks its exit status and the sentence on stderr. Inputs are never
%% outputs (row 3); devices and directories are refused (9); depth, name and count
%% limits hold before any atom is made (11, 12, 26, 28, 39); topology.conf is read
%% as a tree (8, 24, 44); wrong argument counts are usage errors (58); invalid trees
%% are named as such (27, 49, 53); simulate's numbers have ranges (10, 29, 30, 63, 65).
-module(terrain_lab_topology_inputs_tests).
-include_lib("eunit/include/eunit.hrl").

dir() ->
    Dir = filename:join("/tmp", "terrain_lab_topology_inputs_" ++ os:getpid()
                        ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_path(Dir),
    Dir.

file(Dir, Name, Content) ->
    File = filename:join(Dir, Name),
    ok = file:write_file(File, Content),
    File.

-define(GOOD, "{network, root, [{network, a, [{node, s1r1n1}, {node, s1r1n2}]}, {network, b, [{node, s2r1n1}]}]}.\n").

%% Runs `terrain topology ARGS'; returns {Code, Stderr} and checks that a failure
%% is one line naming the command, never an internal error.
topology(Args) ->
    {Code, _Out, Err} = terrain_lab_test_io:run(["topology" | Args]),
    ?assertEqual(nomatch, string:find(Err, "internal error")),
    {Code, Err}.

%% Each case has two minutes: a busy machine is slow, and no limit here is a timing goal.
has(Err, Text) ->
    ?assertNotEqual(nomatch, string:find(Err, Text)).

an_output_that_is_an_input_is_refused_and_the_input_kept_test_() ->
    {timeout, 120, fun an_output_that_is_an_input_is_refused_and_the_input_kept/0}.

an_output_that_is_an_input_is_refused_and_the_input_kept() ->
    Dir = dir(),
    Conf = file(Dir, "g.conf", "SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h3\nSwitchName=r Switches=s1,s2\n"),
    Term = file(Dir, "t.term", ?GOOD),
    Good = file(Dir, "good.term", ?GOOD),
    Cases = [["import", "slurm", Conf, "--out", Conf],
             ["show", Term, "--out", Term, "--format", "json"],
             ["show", Term, "--out", filename:join([Dir, ".", "t.term"])],
             ["compare", Term, Good, "--out", Term],
             ["compare", Good, Term, "--out", Term]],
    [begin
         {Code, Err} = topology(Args),
         ?assertEqual(1, Code),
         has(Err, "is one of this command's inputs")
     end || Args <- Cases],
    ?assertEqual({ok, <<"SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h3\nSwitchName=r Switches=s1,s2\n">>},
                 file:read_file(Conf)),
    ?assertEqual({ok, <<?GOOD>>}, file:read_file(Term)),
    %% an output that exists already is refused too
    {1, Exists} = topology(["show", Term, "--out", Good]),
    has(Exists, "exists already").

devices_fifos_and_directories_are_not_read_test_() ->
    {timeout, 120, fun devices_fifos_and_directories_are_not_read/0}.

devices_fifos_and_directories_are_not_read() ->
    Dir = dir(),
    Fifo = filename:join(Dir, "fifo"),
    "" = os:cmd("mkfifo " ++ Fifo),
    Good = file(Dir, "good.term", ?GOOD),
    [begin
         {Code, Err} = topology(Args),
         ?assertEqual(1, Code),
         has(Err, ": not a regular file")
     end || Input <- ["/dev/zero", Fifo, Dir],
            Args <- [["import", "slurm", Input], ["show", Input], ["compare", Input, Good], ["compare", Good, Input],
                     ["simulate", "--spec", Input], [Input], ["load", Input, "--state-dir", Dir]]].

deep_json_and_terms_are_refused_by_depth_test_() ->
    {timeout, 120, fun deep_json_and_terms_are_refused_by_depth/0}.

deep_json_and_terms_are_refused_by_depth() ->
    Dir = dir(),
    Json = file(Dir, "deep.json", ["{\"format\":\"terrain.topology/1\",\"tree\":",
                                   lists:duplicate(20000, "{\"name\":\"r\",\"children\":["), "{\"node\":\"a\"}",
                                   lists:duplicate(20000, "]}"), "}\n"]),
    {1, JsonErr} = topology(["show", Json]),
    has(JsonErr, "nested more than 512 deep"),
    Term300 = file(Dir, "deep300.term", [lists:duplicate(300, "{network, r, ["), "{node, a}",
                                         lists:duplicate(300, "]}"), ".\n"]),
    {1, DepthErr} = topology(["show", Term300]),          % within the reader's depth, past the tree's
    has(DepthErr, "networks nest more than 256 deep"),
    Term = file(Dir, "deep.term", [lists:duplicate(100000, "{network, r, ["), "{node, a}",
                                   lists:duplicate(100000, "]}"), ".\n"]),
    {1, TermErr} = topology(["show", Term]),
    has(TermErr, "nested more than 1000 levels deep").

names_are_counted_before_they_become_atoms_test_() ->
    {timeout, 120, fun names_are_counted_before_they_become_atoms/0}.

names_are_counted_before_they_become_atoms() ->
    Dir = dir(),
    Long = lists:duplicate(300, $q),
    LongJson = file(Dir, "long.json", ["{\"format\":\"terrain.topology/1\",\"tree\":{\"name\":\"r\",\"children\":[",
                                       "{\"node\":\"", Long, "\"}]}}"]),
    {1, LongErr} = topology(["show", LongJson]),
    has(LongErr, "longer than 255 characters"),
    LongTerm = file(Dir, "long.term", ["{network, r, [{node, '", Long, "'}]}.\n"]),
    {1, LongTermErr} = topology(["show", LongTerm]),
    has(LongTermErr, "a name is longer than 255 characters"),
    Before = erlang:system_info(atom_count),
    Many = file(Dir, "many.term", ["{network, r, [", lists:join(",", [["{node, zq", integer_to_list(I), "}"]
                                                                        || I <- lists:seq(1, 100001)]), "]}.\n"]),
    {1, ManyErr} = topology(["show", Many]),
    has(ManyErr, "100001 nodes are more than terrain starts"),
    ?assert(erlang:system_info(atom_count) - Before < 1000).

a_topology_conf_is_read_as_a_tree_test_() ->
    {timeout, 120, fun a_topology_conf_is_read_as_a_tree/0}.

a_topology_conf_is_read_as_a_tree() ->
    Dir = dir(),
    Clique = lists:append([io_lib:format("SwitchName=s~b Switches=s[1-14] Nodes=h~b~n", [I, I]) || I <- lists:seq(1, 14)]),
    Cases = [{"SwitchName=s1 Switches=s2 Nodes=h1\nSwitchName=s2 Switches=s1 Nodes=h2\n", "switch loop s1 -> s2 -> s1"},
             {lists:flatten(Clique), "switch loop s1 -> s1"},
             {"SwitchName=root Switches=s1,sX\nSwitchName=s1 Nodes=h1,h2\n", "switch root lists switch sX, which is not"},
             {"SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h2,h3\nSwitchName=s1 Nodes=h9\n"
              "SwitchName=root Switches=s1,s2\n", "switch s1 is defined twice (lines 1 and 3)"},
             {"SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h2,h3\nSwitchName=root Switches=s1,s2\n",
              "host h2 is under both switch s1 and switch s2"},
             {<<"SwitchName=s", 16#e9, " Nodes=h1\n">>, "line 1: the bytes are not UTF-8"},
             {"SwitchName=" ++ lists:duplicate(300, $L) ++ " Nodes=h1,h2\n", "the switch name has 300 characters"},
             {"SwitchName=s1 Nodes=h[1-2000000]\n", "the hostlist h[1-2000000] is too large"}],
    [begin
         {Code, Err} = topology(["import", "slurm", file(Dir, "t.conf", Text)]),
         ?assertEqual({1, true}, {Code, string:find(Err, Expected) =/= nomatch})
     end || {Text, Expected} <- Cases].

wrong_argument_counts_are_usage_errors_test_() ->
    {timeout, 120, fun wrong_argument_counts_are_usage_errors/0}.

wrong_argument_counts_are_usage_errors() ->
    [?assertMatch({2, _}, topology(Args))
     || Args <- [["show", "a", "b"], ["show"], ["compare", "a"], ["compare", "a", "b", "c"], ["simulate", "extra"],
                 ["load", "a", "b"], ["load"], ["a", "b"]]],
    {2, Err} = topology(["load", "a", "b"]),
    has(Err, "expected 'terrain topology load FILE' (2 arguments after it)").

a_file_that_is_no_valid_tree_is_named_test_() ->
    {timeout, 120, fun a_file_that_is_no_valid_tree_is_named/0}.

a_file_that_is_no_valid_tree_is_named() ->
    Dir = dir(),
    Good = file(Dir, "good.term", ?GOOD),
    Cases = [{file(Dir, "t42.term", "42.\n"), "unknown term 42"},
             {file(Dir, "tdupe.term", "{network, r, [{network, a, [{node, a}, {node, a}]}]}.\n"),
              "node a appears more than once"},
             {file(Dir, "tempty.term", "{network, r, []}.\n"), "the network is empty"}],
    [begin
         {1, E1} = topology(["compare", Good, Bad]),
         {1, E2} = topology(["compare", Bad, Good]),
         {1, E3} = topology(["load", Bad, "--state-dir", Dir]),    % refused before any cluster is asked
         [?assertNotEqual(nomatch, string:find(E, Bad ++ " is not a valid topology: ")) || E <- [E1, E2, E3]],
         [?assertNotEqual(nomatch, string:find(E, Why)) || E <- [E1, E2, E3]]
     end || {Bad, Why} <- Cases].

simulate_refuses_what_it_cannot_hold_before_making_it_test_() ->
    {timeout, 120, fun simulate_refuses_what_it_cannot_hold_before_making_it/0}.

simulate_refuses_what_it_cannot_hold_before_making_it() ->
    Before = erlang:system_info(atom_count),
    {1, Huge} = topology(["simulate", "--shape", "100000x100000"]),
    has(Huge, "mostly for --shape"),
    {1, Atoms} = topology(["simulate", "--shape", "1100000"]),
    ?assert(string:find(Atoms, "mostly for --shape") =/= nomatch orelse string:find(Atoms, "1100000 nodes") =/= nomatch),
    ?assert(erlang:system_info(atom_count) - Before < 1000),
    Deep = lists:flatten(lists:join("x", lists:duplicate(200, "1") ++ ["2"])),
    {2, DeepErr} = topology(["simulate", "--shape", Deep]),
    has(DeepErr, "at most 32 levels"),
    {2, Lat} = topology(["simulate", "--shape", "2", "--latencies", "1.0e308"]),
    has(Lat, "one-way us from 0 to 1e9"),
    [?assertMatch({2, _}, topology(["simulate", "--shape", "4x4", "--noise", Noise])) || Noise <- ["1000", "1.0e308"]],
    {2, Both} = topology(["simulate", "--spec", "x.cluster", "--latencies", "1,2"]),
    has(Both, "--latencies goes with --shape").

simulate_reads_exponent_notation_test_() ->
    {timeout, 120, fun simulate_reads_exponent_notation/0}.

simulate_reads_exponent_notation() ->
    {Code, _Out, _Err} = terrain_lab_test_io:run(["topology", "simulate", "--shape", "2x2", "--latencies", "1e3,1e2",
                                                  "--outliers", "1e-3", "--noise", "0"]),
    ?assertEqual(0, Code).
