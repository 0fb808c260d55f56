%% `terrain attrs' and `terrain choose' against three peer nodes: in-process (output
%% captured) and once through the real escript, including bad invocations.
-module(terrain_lab_cmd_attrs_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([attrs_prints_a_table/0, attrs_prints_a_table/1,
         attrs_without_names_prints_everything/0, attrs_without_names_prints_everything/1,
         choose_prints_nodes_or_why_not/0, choose_prints_nodes_or_why_not/1,
         choose_options/0, choose_options/1,
         real_escript/0, real_escript/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [attrs_prints_a_table, attrs_without_names_prints_everything, choose_prints_nodes_or_why_not, choose_options,
     real_escript].

init_per_suite(Config) ->
    case is_alive() of
        true -> ok;
        false ->
            _ = os:cmd("epmd -daemon"),
            {ok, _} = net_kernel:start(list_to_atom("terrain_cmd_ct_" ++ os:getpid()), #{name_domain => shortnames})
    end,
    Prefix = "cmd" ++ os:getpid() ++ "_",
    Attrs = #{a => [{rack, r1}, {gpu, true}, {load, 0.2}],
              b => [{rack, r1}, {load, 0.9}],
              c => [{rack, r2}, {gpu, false}, {load, 0.1}]},
    Peers = [start_peer(list_to_atom(Prefix ++ atom_to_list(L)), maps:get(L, Attrs)) || L <- [a, b, c]],
    Nodes = [N || {_, N} <- Peers],
    Dead = list_to_atom(Prefix ++ "gone@" ++ lists:last(string:split(atom_to_list(node()), "@"))),
    [{peers, Peers}, {nodes, Nodes}, {dead, Dead},
     {node_list, lists:join(",", [atom_to_list(N) || N <- Nodes])} | Config].

end_per_suite(Config) ->
    [peer:stop(P) || {P, _} <- ?config(peers, Config)],
    ok.

start_peer(Name, Attrs) ->
    Paths = lists:append([["-pa", P] || P <- code:get_path(), string:find(P, "_build") =/= nomatch]),
    {ok, Pid, Node} = peer:start(#{name => Name, connection => standard_io,
                                   args => ["-setcookie", atom_to_list(erlang:get_cookie()),
                                            "-kernel", "logger_level", "warning"] ++ Paths}),
    ok = peer:call(Pid, application, load, [terrain], 10000),
    ok = peer:call(Pid, application, set_env, [terrain, attrs, Attrs], 10000),
    {ok, _} = peer:call(Pid, application, ensure_all_started, [terrain], 10000),
    {Pid, Node}.

%% The CLI in-process, on the suite's nodes (a state dir with no cookie: this node's
%% cookie is the peers' cookie).
cli(Args, Config) ->
    terrain_lab_test_io:run([hd(Args), "--state-dir", ?config(priv_dir, Config) | tl(Args)]).

lines(Text) ->
    string:lexemes(Text, "\n").

%%--------------------------------------------------------------------

attrs_prints_a_table() ->
    [{doc, "terrain attrs NAME... prints a row per node, a column per name, and why a node did not answer."}].
attrs_prints_a_table(Config) ->
    [A, B, C] = ?config(nodes, Config),
    Nodes = ?config(node_list, Config) ++ "," ++ atom_to_list(?config(dead, Config)),
    {0, Out, Err} = cli(["attrs", "--nodes", Nodes, "rack", "gpu", "load"], Config),
    ct:pal("~ts~ts", [Out, Err]),
    [Header, RowA, RowB, RowC, RowDead] = lines(Out),
    ?assertEqual(["NODE", "rack", "gpu", "load"], string:lexemes(Header, " ")),
    ?assertEqual([atom_to_list(A), "r1", "true", "0.2"], string:lexemes(RowA, " ")),
    ?assertEqual([atom_to_list(B), "r1", "undefined", "0.9"], string:lexemes(RowB, " ")),
    ?assertEqual([atom_to_list(C), "r2", "false", "0.1"], string:lexemes(RowC, " ")),
    ?assertNotEqual(nomatch, string:find(RowDead, "(no connection to the node)")),
    ?assertNotEqual(nomatch, string:find(Err, "3 of 4 nodes answered")).

attrs_without_names_prints_everything() ->
    [{doc, "terrain attrs with no names prints every attribute of every node, built-ins included."}].
attrs_without_names_prints_everything(Config) ->
    {0, Out, _} = cli(["attrs", "--nodes", ?config(node_list, Config)], Config),
    [?assertNotEqual(nomatch, string:find(Out, atom_to_list(N))) || N <- ?config(nodes, Config)],
    [?assertEqual(3, length(string:split(Out, Name, all)) - 1, Name)
     || Name <- ["  os_type ", "  rack ", "  vm_schedulers_online "]].

choose_prints_nodes_or_why_not() ->
    [{doc, "terrain choose prints the matching nodes; when none matches, the explanation on stderr and exit 1; "
           "a malformed or unparsable predicate is an error."}].
choose_prints_nodes_or_why_not(Config) ->
    [A, B, C] = ?config(nodes, Config),
    Nodes = ?config(node_list, Config),
    {0, Out, _} = cli(["choose", "--nodes", Nodes, "{rack, eq, r1}"], Config),
    ?assertEqual([atom_to_list(A), atom_to_list(B)], lines(Out)),
    {0, Out2, _} = cli(["choose", "--nodes", Nodes, "{load, lt, 0.5}", "{'not', {gpu, true}}"], Config),
    ?assertEqual([atom_to_list(C)], lines(Out2)),
    {1, "", Err} = cli(["choose", "--nodes", Nodes, "{rack, eq, r1}", "{load, lt, 0.5}", "{gpu, false}"], Config),
    ct:pal("~ts", [Err]),
    ?assertNotEqual(nomatch, string:find(Err, "no node matched: 3 candidates")),
    ?assertNotEqual(nomatch, string:find(Err, "{gpu,false} removed the last 1")),
    ?assertNotEqual(nomatch, string:find(Err, atom_to_list(A) ++ ": gpu = true")),
    ?assertNotEqual(nomatch, string:find(Err, "no node satisfies the predicates")),
    {1, "", Bad} = cli(["choose", "--nodes", Nodes, "{rack, is, r1}"], Config),
    ?assertNotEqual(nomatch, string:find(Bad, "malformed predicate: {rack,is,r1}")),
    {1, "", Unparsable} = cli(["choose", "--nodes", Nodes, "os:cmd(\"touch /tmp/evaluated\")"], Config),
    ?assertNotEqual(nomatch, string:find(Unparsable, "cannot read")),
    ?assertNot(filelib:is_regular("/tmp/evaluated")).

choose_options() ->
    [{doc, "--relax reports what it dropped, --order-by sorts, --pick prints one node; a bad --pick or "
           "--order-by is a usage error (exit 2)."}].
choose_options(Config) ->
    [A, B, C] = ?config(nodes, Config),
    Nodes = ?config(node_list, Config),
    {0, Out, Err} = cli(["choose", "--nodes", Nodes, "--relax", "{rack, eq, r1}", "{gpu, false}"], Config),
    ?assertEqual([atom_to_list(A), atom_to_list(B)], lines(Out)),
    ?assertNotEqual(nomatch, string:find(Err, "relaxed: dropped {gpu,false}")),
    {0, Sorted, _} = cli(["choose", "--nodes", Nodes, "--order-by", "load:desc", "{load, exists}"], Config),
    ?assertEqual([atom_to_list(N) || N <- [B, A, C]], lines(Sorted)),
    {0, First, _} = cli(["choose", "--nodes", Nodes, "--pick", "first", "{load, exists}"], Config),
    ?assertEqual([atom_to_list(A)], lines(First)),
    {0, Least, _} = cli(["choose", "--nodes", Nodes, "--pick", "least_loaded", "--load-attr", "load",
                         "{load, exists}"], Config),
    ?assertEqual([atom_to_list(C)], lines(Least)),
    {2, "", BadPick} = cli(["choose", "--nodes", Nodes, "--pick", "best", "{load, exists}"], Config),
    ?assertNotEqual(nomatch, string:find(BadPick, "option '--pick' expects one of random, first, least_loaded, "
                                                  "round_robin, got 'best'")),
    {2, "", BadOrder} = cli(["choose", "--nodes", Nodes, "--order-by", "load:up", "{load, exists}"], Config),
    ?assertNotEqual(nomatch, string:find(BadOrder, "option '--order-by' expects ATTR, ATTR:asc, ATTR:desc or "
                                                   "distance, got 'load:up'")).

real_escript() ->
    [{doc, "The escript: choose prints nodes on stdout (exit 0); no match and bad predicates exit 1 with "
           "stderr; a missing argument is a usage error (exit 2)."}].
real_escript(Config) ->
    Escript = escript(),
    [A, B, _C] = ?config(nodes, Config),
    Base = ["--state-dir", ?config(priv_dir, Config), "--nodes", ?config(node_list, Config)],
    {0, Out, _} = run(Config, Escript, ["choose" | Base] ++ ["{rack, eq, r1}"]),
    ?assertEqual([atom_to_list(A), atom_to_list(B)], lines(Out)),
    {0, Table, _} = run(Config, Escript, ["attrs" | Base] ++ ["rack"]),
    ?assertEqual(4, length(lines(Table))),
    {1, "", None} = run(Config, Escript, ["choose" | Base] ++ ["{rack, eq, r9}"]),
    ?assertNotEqual(nomatch, string:find(None, "removed the last 3")),
    {1, "", Bad} = run(Config, Escript, ["choose" | Base] ++ ["{rack, is, r1}"]),
    ?assertNotEqual(nomatch, string:find(Bad, "malformed predicate")),
    {2, "", Usage} = run(Config, Escript, ["choose"]),
    ?assertNotEqual(nomatch, string:find(Usage, "terrain choose")).

escript() ->
    terrain_lab_test_escript:path().

%% Runs the escript; returns {ExitStatus, Stdout, Stderr}.
run(Config, Escript, Args) ->
    terrain_lab_test_escript:run(Escript, ?config(priv_dir, Config), Args).
