%% The `terrain' escript as a real program: exit statuses, stderr, and the
%% persistent cluster commands up / status / down.
-module(terrain_lab_cli_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include_lib("kernel/include/file.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([bad_invocation_exits_non_zero_with_stderr/0, bad_invocation_exits_non_zero_with_stderr/1,
         help_and_version/0, help_and_version/1,
         up_status_down/0, up_status_down/1,
         down_after_a_node_died/0, down_after_a_node_died/1,
         live_up_add_down_nodes/0, live_up_add_down_nodes/1,
         a_node_added_to_a_cut_cluster_joins_its_side/0, a_node_added_to_a_cut_cluster_joins_its_side/1,
         a_node_added_to_a_cut_cluster_after_a_kill_joins_its_side/0,
         a_node_added_to_a_cut_cluster_after_a_kill_joins_its_side/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [bad_invocation_exits_non_zero_with_stderr, help_and_version, up_status_down, down_after_a_node_died,
     live_up_add_down_nodes, a_node_added_to_a_cut_cluster_joins_its_side,
     a_node_added_to_a_cut_cluster_after_a_kill_joins_its_side].

init_per_suite(Config) ->
    [{escript, terrain_lab_test_escript:path()} | Config].

end_per_suite(_Config) ->
    ok.

%%--------------------------------------------------------------------

bad_invocation_exits_non_zero_with_stderr() ->
    [{doc, "terrain bogus: the message is on stderr, stdout is empty, the exit status is 2."}].
bad_invocation_exits_non_zero_with_stderr(Config) ->
    {Code, Out, Err} = terrain(Config, ["bogus"]),
    ?assertEqual(2, Code),
    ?assertEqual("", Out),
    ?assertNotEqual(nomatch, string:find(Err, "terrain: unknown command 'bogus'")),
    {2, "", Err2} = terrain(Config, ["status", "--bogus"]),
    ?assertNotEqual(nomatch, string:find(Err2, "unknown option '--bogus'")).

help_and_version() ->
    [{doc, "--help lists the commands on stdout with status 0; --version prints the version."}].
help_and_version(Config) ->
    {0, Help, ""} = terrain(Config, ["--help"]),
    [?assertNotEqual(nomatch, string:find(Help, "  " ++ C)) || C <- ["up", "status", "down", "demo"]],
    {0, Version, ""} = terrain(Config, ["--version"]),
    ?assertMatch("terrain " ++ _, Version).

up_status_down() ->
    [{doc, "up records detached nodes with a private cookie; status sees them; a second up "
           "refuses; down stops exactly them and removes the state."}].
up_status_down(Config) ->
    {Spec, State, Prefix} = setup(Config, "usd"),
    {0, UpOut, UpErr} = terrain(Config, ["up", "--state-dir", State, "--prefix", Prefix, Spec]),
    ct:pal("up:~n~ts~ts", [UpErr, UpOut]),
    {ok, Recorded} = terrain_json:read_file(filename:join(State, "cluster.json")),
    OsPids = [binary_to_list(P) || #{<<"os_pid">> := P} <- maps:get(<<"nodes">>, Recorded)],
    try
        ?assertEqual(3, length(OsPids)),
        ?assert(lists:all(fun terrain_lab_os:alive/1, OsPids)),
        CookieFile = filename:join(State, "cookie"),
        {ok, #file_info{mode = Mode}} = file:read_file_info(CookieFile),
        ?assertEqual(8#600, Mode band 8#777),
        {ok, Cookie} = file:read_file(CookieFile),
        {0, StatusOut, _} = terrain(Config, ["status", "--state-dir", State]),
        ct:pal("status:~n~ts", [StatusOut]),
        ?assertNotEqual(nomatch, string:find(StatusOut, "3 of 3 nodes reachable")),
        {0, Json, _} = terrain(Config, ["status", "--state-dir", State, "--json"]),
        {ok, Status} = terrain_json:decode(Json),
        ?assertEqual(<<"terrain.status/1">>, maps:get(<<"format">>, Status)),
        ?assertEqual(list_to_binary(CookieFile), maps:get(<<"cookie_file">>, Status)),
        ?assertEqual([<<"up">>, <<"up">>, <<"up">>], [S || #{<<"state">> := S} <- maps:get(<<"nodes">>, Status)]),
        ?assertEqual(OsPids, [binary_to_list(P) || #{<<"os_pid">> := P} <- maps:get(<<"nodes">>, Status)]),
        %% the nodes hold the spec's tree: from a, b (same group r1) is very near, c is not
        [A, B, _C] = [binary_to_list(N) || #{<<"node">> := N} <- maps:get(<<"nodes">>, Recorded)],
        {0, Near, _} = terrain(Config, ["choose", "--state-dir", State, "--at", A, "{level, le, very_near}"]),
        ?assertEqual(A ++ "\n" ++ B ++ "\n", Near),
        {0, Sorted, _} = terrain(Config, ["choose", "--state-dir", State, "--at", A, "--order-by", "distance",
                                          "{in_subtree, r1}"]),
        ?assertEqual(A ++ "\n" ++ B ++ "\n", Sorted),
        {1, "", Refused} = terrain(Config, ["up", "--state-dir", State, "--prefix", Prefix, Spec]),
        ?assertNotEqual(nomatch, string:find(Refused, "is still running")),
        [?assertEqual(nomatch, string:find(Text, binary_to_list(Cookie))) || Text <- [UpOut, UpErr, StatusOut, Json, Refused]],
        {0, DownOut, _} = terrain(Config, ["down", "--state-dir", State]),
        ct:pal("down:~n~ts", [DownOut]),
        ?assertEqual(3, length([L || L <- string:lexemes(DownOut, "\n"), string:find(L, "stopped") =/= nomatch])),
        ?assertEqual([], [P || P <- OsPids, terrain_lab_os:alive(P)]),
        ?assertNot(filelib:is_dir(State))
    after
        [terrain_lab_os:kill(P) || P <- OsPids]
    end.

down_after_a_node_died() ->
    [{doc, "A node killed behind terrain's back shows as down in status; probe fails naming its VM as exited and "
      "its log in the state dir; down still stops the rest."}].
down_after_a_node_died(Config) ->
    {Spec, State, Prefix} = setup(Config, "dead"),
    {0, _, _} = terrain(Config, ["up", "--state-dir", State, "--prefix", Prefix, Spec]),
    {ok, Recorded} = terrain_json:read_file(filename:join(State, "cluster.json")),
    OsPids = [binary_to_list(P) || #{<<"os_pid">> := P} <- maps:get(<<"nodes">>, Recorded)],
    try
        [Victim | Others] = OsPids,
        true = terrain_lab_os:kill(Victim),
        [] = terrain_lab_os:await_exit([Victim], 5000),
        {0, Json, _} = terrain(Config, ["status", "--state-dir", State, "--json"]),
        {ok, #{<<"nodes">> := Nodes}} = terrain_json:decode(Json),
        ?assertEqual([<<"down">>, <<"up">>, <<"up">>], [S || #{<<"state">> := S} <- Nodes]),
        {1, _, ProbeErr} = terrain(Config, ["probe", "--state-dir", State, "--runs-dir",
                                            filename:join(?config(priv_dir, Config), "dead_runs")]),
        ct:pal("probe:~n~ts", [ProbeErr]),
        ?assertNotEqual(nomatch, string:find(ProbeErr, "the VM of node a (" ++ Prefix ++ "a@")),
        ?assertNotEqual(nomatch, string:find(ProbeErr, "exited")),
        ?assertNotEqual(nomatch, string:find(ProbeErr, "its log: " ++ filename:join([State, "nodes", "a.log"]))),
        {0, DownOut, _} = terrain(Config, ["down", "--state-dir", State]),
        ct:pal("down:~n~ts", [DownOut]),
        ?assertNotEqual(nomatch, string:find(DownOut, "was not running")),
        ?assertEqual([], [P || P <- Others, terrain_lab_os:alive(P)]),
        {1, _, NoCluster} = terrain(Config, ["status", "--state-dir", State]),
        ?assertNotEqual(nomatch, string:find(NoCluster, "no cluster is recorded"))
    after
        [terrain_lab_os:kill(P) || P <- OsPids]
    end.

live_up_add_down_nodes() ->
    [{doc, "up --live (stderr names terrain dashboard), up --add of a node into rack r2: status shows it in r2 on "
           "every node at one version; "
           "choose --count 2 --spread depth:1 takes one node per rack; adding the same node again exits 1, adding 5000 "
           "nodes is refused by the resource guard with nothing started; down --nodes "
           "stops it and it leaves every tree after the grace period; then it can be added again"}].
live_up_add_down_nodes(Config) ->
    Dir = ?config(priv_dir, Config),
    {Spec, Add, State, Prefix} = two_racks(Config, "live", 20000),
    {0, _, UpErr} = terrain(Config, ["up", "--state-dir", State, "--prefix", Prefix, "--live", "--live-grace", "1000",
                                     "--live-remeasure", "0", Spec]),
    %% a user is told how to watch it (one stderr line)
    ?assertNotEqual(nomatch, string:find(UpErr, "watch it in a browser: terrain dashboard --state-dir " ++ State)),
    try
        {0, AddOut, _} = terrain(Config, ["up", "--state-dir", State, "--add", Add]),
        ?assertNotEqual(nomatch, string:find(AddOut, Prefix ++ "d@")),
        D = list_to_binary(Prefix ++ "d@"),
        InR2 = fun(Nodes) -> lists:all(fun(#{<<"live_version">> := 1, <<"live_place">> := Place}) -> lists:last(Place) =/= <<>>;
                                          (_) -> false
                                       end, Nodes)
                             andalso [lists:last(P) || #{<<"node">> := N, <<"live_place">> := P} <- Nodes,
                                                       binary:match(N, D) =/= nomatch] =:= [<<"r2">>]
               end,
        ok = poll(fun() -> InR2(status_nodes(Config, State)) end, 30000),
        {0, Text, _} = terrain(Config, ["status", "--state-dir", State]),
        ct:pal("status after the join:~n~ts", [Text]),
        ?assertNotEqual(nomatch, string:find(Text, "PLACE IN THE LIVE TREE")),
        {0, Spread, _} = terrain(Config, ["choose", "--state-dir", State, "--at", "a", "--count", "2", "--spread", "depth:1",
                                          "{vm_schedulers_online, ge, 1}"]),
        ?assertEqual([Prefix ++ "a", Prefix ++ "c"], [hd(string:split(L, "@")) || L <- string:lexemes(Spread, "\n")]),
        %% the same node again: the merged spec would name it twice
        {1, _, Twice} = terrain(Config, ["up", "--state-dir", State, "--add", Add]),
        ?assertNotEqual(nomatch, string:find(Twice, "the spec to add names d, which the cluster has already")),
        %% more VMs than memory allows: the resource guard refuses before any starts
        Big = filename:join(Dir, "big.cluster"),
        ok = file:write_file(Big, ["{group, r3, #{}, [",
                                   lists:join(", ", [io_lib:format("{node, x~b, #{}}", [I]) || I <- lists:seq(1, 5000)]),
                                   "]}.\n"]),
        {1, _, Guarded} = terrain(Config, ["up", "--state-dir", State, "--add", Big]),
        ?assertNotEqual(nomatch, string:find(Guarded, "5000 nodes need about")),
        ?assertEqual(4, length(status_nodes(Config, State))),
        {0, DownOut, _} = terrain(Config, ["down", "--state-dir", State, "--nodes", "d"]),
        ?assertNotEqual(nomatch, string:find(DownOut, "stopped")),
        ok = poll(fun() ->
                          Nodes = status_nodes(Config, State),
                          length(Nodes) =:= 3 andalso
                              lists:all(fun(#{<<"live_version">> := 2}) -> true; (_) -> false end, Nodes)
                  end, 30000),
        %% a node that left can join again (it left the state's spec too)
        {0, Again, _} = terrain(Config, ["up", "--state-dir", State, "--add", Add]),
        ?assertNotEqual(nomatch, string:find(Again, Prefix ++ "d@")),
        ?assertEqual(4, length(status_nodes(Config, State)))
    after
        terrain(Config, ["down", "--state-dir", State, "--force"])
    end.

a_node_added_to_a_cut_cluster_joins_its_side() ->
    [{doc, "netem partition r1 r2, then up --add of d into r2: d is cut from r1's nodes and they from d, as r2's "
           "node c is (d used to join both sides); heal lifts it for d too."}].
a_node_added_to_a_cut_cluster_joins_its_side(Config) ->
    {Spec, Add, State, Prefix} = two_racks(Config, "cut", 2000),
    {0, _, _} = terrain(Config, ["up", "--state-dir", State, "--prefix", Prefix, Spec]),
    try
        {0, _, _} = terrain(Config, ["netem", "--state-dir", State, "partition", "r1", "r2"]),
        {0, _, _} = terrain(Config, ["up", "--state-dir", State, "--add", Add]),
        Full = fun(Names) -> [Prefix ++ N ++ "@" ++ hd(tl(string:split(atom_to_list(node()), "@"))) || N <- Names] end,
        Cut = cut_from(Config, State, Prefix),
        ct:pal("cut from: ~p", [Cut]),
        ?assertEqual(Full(["a", "b"]), maps:get("d", Cut)),
        ?assertEqual(Full(["a", "b"]), maps:get("c", Cut)),
        ?assertEqual(Full(["c", "d"]), maps:get("a", Cut)),
        ?assertEqual(Full(["c", "d"]), maps:get("b", Cut)),
        {0, _, _} = terrain(Config, ["netem", "--state-dir", State, "heal"]),
        ?assertEqual(#{"a" => [], "b" => [], "c" => [], "d" => []}, cut_from(Config, State, Prefix))
    after
        OsPids = case terrain_json:read_file(filename:join(State, "cluster.json")) of
                     {ok, #{<<"nodes">> := Nodes}} ->
                         [binary_to_list(P) || #{<<"os_pid">> := P} <- Nodes, is_binary(P)];
                     _ -> []
                 end,
        terrain(Config, ["down", "--state-dir", State, "--force"]),
        [terrain_lab_os:kill(P) || P <- OsPids]      % when down itself failed (it is not asserted here)
    end.

a_node_added_to_a_cut_cluster_after_a_kill_joins_its_side() ->
    [{doc, "netem partition r1 r2, b of r1 killed (kill -9, still in the record), then up --add of d into r2: "
           "the add succeeds (it used to ask the dead b to cut d off, and failed: 'network emulation failed on "
           "b: not reachable'), d is cut from a only, and a from c and d"}].
a_node_added_to_a_cut_cluster_after_a_kill_joins_its_side(Config) ->
    {Spec, Add, State, Prefix} = two_racks(Config, "cutk", 2000),
    {0, _, _} = terrain(Config, ["up", "--state-dir", State, "--prefix", Prefix, Spec]),
    OsPids = fun() -> {ok, #{<<"nodes">> := Nodes}} = terrain_json:read_file(filename:join(State, "cluster.json")),
                      maps:from_list([{binary_to_list(N), binary_to_list(P)}
                                      || #{<<"name">> := N, <<"os_pid">> := P} <- Nodes, is_binary(P)])
             end,
    try
        {0, _, _} = terrain(Config, ["netem", "--state-dir", State, "partition", "r1", "r2"]),
        true = terrain_lab_os:kill(maps:get("b", OsPids())),
        {Code, Out, Err} = terrain(Config, ["up", "--state-dir", State, "--add", Add]),
        ct:pal("up --add after the kill: exit ~b~n~ts~ts", [Code, Out, Err]),
        ?assertEqual(0, Code),
        Host = hd(tl(string:split(atom_to_list(node()), "@"))),
        Full = fun(Names) -> [Prefix ++ N ++ "@" ++ Host || N <- Names] end,
        {0, Show, _} = terrain(Config, ["netem", "--state-dir", State, "show"]),
        ct:pal("netem show: ~ts", [Show]),
        Cut = cut_from(Config, State, Prefix),
        ?assertEqual(Full(["a"]), maps:get("d", Cut)),
        ?assertEqual(Full(["c", "d"]), maps:get("a", Cut))
    after
        Left = maps:values(OsPids()),
        terrain(Config, ["down", "--state-dir", State, "--force"]),
        [terrain_lab_os:kill(P) || P <- Left]
    end.

%% Racks r1 (a, b) and r2 (c) with `Root' µs between them, a spec that adds d to r2, a
%% state directory and a node prefix, all named after `Name'.
two_racks(Config, Name, Root) ->
    Dir = ?config(priv_dir, Config),
    Spec = filename:join(Dir, Name ++ ".cluster"),
    Add = filename:join(Dir, Name ++ "_add.cluster"),
    ok = file:write_file(Spec, io_lib:format("{cluster, ~s, #{latency => ~b}}.~n", [Name, Root]) ++
                               "{group, r1, #{latency => 250}, [{node, a, #{schedulers => 1}}, {node, b, #{schedulers => 1}}]}.\n"
                               "{group, r2, #{latency => 250}, [{node, c, #{schedulers => 1}}]}.\n"),
    ok = file:write_file(Add, "{group, r2, #{}, [{node, d, #{schedulers => 1}}]}.\n"),
    {Spec, Add, filename:join(Dir, Name ++ "_state"), "cli" ++ os:getpid() ++ Name ++ "_"}.

%% `netem show' as #{ShortName => [the full node names it is cut from]}.
cut_from(Config, State, Prefix) ->
    {0, Show, _} = terrain(Config, ["netem", "--state-dir", State, "show"]),
    maps:from_list([{hd(string:split(string:prefix(Node, Prefix), "@")),
                     case string:trim(string:join(Rest, " ")) of
                         "-" -> [];
                         List -> lists:sort(string:lexemes(List, ", "))
                     end}
                    || [Node, _Proxies | Rest] <- [string:lexemes(L, " ") || L <- tl(string:lexemes(Show, "\n"))]]).

status_nodes(Config, State) ->
    {0, Json, _} = terrain(Config, ["status", "--state-dir", State, "--json"]),
    {ok, #{<<"nodes">> := Nodes}} = terrain_json:decode(Json),
    Nodes.

poll(Fun, Timeout) ->
    terrain_lab_test_poll:poll(Fun, Timeout, 200).

%%--------------------------------------------------------------------

setup(Config, Name) ->
    Dir = ?config(priv_dir, Config),
    Spec = filename:join(Dir, Name ++ ".cluster"),
    ok = file:write_file(Spec, "{cluster, small, #{latency => 2000}}.\n"
                               "{group, r1, #{latency => 100}, [{node, a, #{schedulers => 1}}, {node, b, #{}}]}.\n"
                               "{group, r2, #{}, [{node, c, #{}}]}.\n"),
    {Spec, filename:join(Dir, Name ++ "_state"), "cli" ++ os:getpid() ++ Name ++ "_"}.

%% Runs the escript; returns {ExitStatus, Stdout, Stderr}.
terrain(Config, Args) ->
    terrain_lab_test_escript:run(?config(escript, Config), ?config(priv_dir, Config), Args).
