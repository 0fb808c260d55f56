%% `terrain collective bench|tune' on a small emulated spec (2 racks x 2 nodes):
%% in-process with output captured, and once through the real escript with bad
%% invocations.
-module(terrain_lab_collective_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([bench_writes_json_table_and_manifest/0, bench_writes_json_table_and_manifest/1,
         tune_writes_rules_that_auto_reads/0, tune_writes_rules_that_auto_reads/1,
         bad_invocations/0, bad_invocations/1,
         real_escript/0, real_escript/1,
         killed_vm_named_with_cause_and_log/0, killed_vm_named_with_cause_and_log/1,
         failed_boot_leaves_manifest_with_error/0, failed_boot_leaves_manifest_with_error/1,
         cut_connection_named_from_the_vms_logs/0, cut_connection_named_from_the_vms_logs/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [bench_writes_json_table_and_manifest, tune_writes_rules_that_auto_reads, bad_invocations, real_escript,
     killed_vm_named_with_cause_and_log, failed_boot_leaves_manifest_with_error,
     cut_connection_named_from_the_vms_logs].

init_per_suite(Config) ->
    terrain_test_peers:ensure_distributed(),
    Spec = filename:join(?config(priv_dir, Config), "small.cluster"),
    ok = file:write_file(Spec, "{cluster, small, #{latency => 1000}}.\n"
                               "{group, r1, #{latency => 100}, [{node, a, #{}}, {node, b, #{}}]}.\n"
                               "{group, r2, #{latency => 100}, [{node, c, #{}}, {node, d, #{}}]}.\n"),
    [{spec, Spec} | Config].

end_per_suite(_Config) ->
    ok.

bench_writes_json_table_and_manifest() ->
    [{doc, "bench measures every algorithm, size and rank order asked for, prints a table, and writes "
      "collective.json (terrain.collective/1, hierarchical with its lower bounds, in the first order asked for) "
      "and manifest.json."}].
bench_writes_json_table_and_manifest(Config) ->
    Out = filename:join(?config(priv_dir, Config), "bench"),
    {0, Table, Err} = terrain_lab_test_io:run(["collective", "bench", "--spec", ?config(spec, Config),
                                                "--algorithms", "flat,binomial,hierarchical", "--sizes", "8,1024",
                                                "--rank-order", "random,block", "--seeds", "2", "--rounds", "2",
                                                "--out", Out]),
    ct:pal("~ts~ts", [Err, Table]),
    [Header | Rows] = string:lexemes(Table, "\n"),
    ?assertEqual(["ALGORITHM", "BYTES", "ORDER", "MEDIAN_US", "P95_US", "BOUND_US"], string:lexemes(Header, " ")),
    %% flat and binomial in both orders, hierarchical once (it reads the topology), in the
    %% first order asked for: 2 sizes
    ?assertEqual(10, length(Rows)),
    ?assertEqual(["random", "random"],
                 [Order || R <- Rows, ["hierarchical", _, Order | _] <- [string:lexemes(R, " ")]]),
    {ok, Doc} = terrain_json:read_file(filename:join(Out, "collective.json")),
    ?assertMatch(#{<<"format">> := <<"terrain.collective/1">>, <<"nodes">> := 4, <<"members">> := 4}, Doc),
    Results = maps:get(<<"results">>, Doc),
    [H8] = [R || #{<<"algorithm">> := <<"hierarchical">>, <<"size_bytes">> := 8} = R <- Results],
    ?assertMatch(#{<<"rank_order">> := <<"random">>, <<"seeds_used">> := 2}, H8),
    %% up and down inside a rack (2 x 100 us) and once across (1000 us); a tree pays each twice
    ?assertMatch(#{<<"lower_bound_us">> := 1200, <<"tree_lower_bound_us">> := 2200,
                   <<"exchange">> := <<"direct">>}, H8),
    ?assert(lists:all(fun(#{<<"median_us">> := M, <<"p95_us">> := P}) -> M > 0 andalso P >= M end, Results)),
    %% no time below what the emulated links allow: the 1 ms link is crossed there and
    %% back by a tree (flat, binomial), once by hierarchical's exchange
    ?assert(lists:all(fun(#{<<"algorithm">> := <<"hierarchical">>, <<"median_us">> := M}) -> M >= 1200;
                         (#{<<"median_us">> := M}) -> M >= 2000
                      end, Results)),
    {ok, #{<<"outputs">> := [#{<<"kind">> := <<"collective">>}]}} =
        terrain_json:read_file(filename:join(Out, "manifest.json")),
    ?assertNotEqual(nomatch, string:find(Err, "starting 4 nodes")).

killed_vm_named_with_cause_and_log() ->
    [{doc, "A VM killed with -9 while bench measures: the error names its node, its exit status (137, KILL) and "
      "its log in the run directory (which ends with that status); the manifest keeps the error."}].
killed_vm_named_with_cause_and_log(Config) ->
    Out = filename:join(?config(priv_dir, Config), "killed"),
    {Runner, Victim} = measuring(Config, Out, "coll_b@"),
    OsPid = erpc:call(Victim, os, getpid, []),
    "" = os:cmd("kill -9 " ++ OsPid),
    {1, _, Err} = receive {Runner, Result} -> Result after 120000 -> ct:fail(no_result) end,
    ct:pal("~ts", [Err]),
    Log = filename:join([Out, "vms", "b.log"]),
    ?assertNotEqual(nomatch, string:find(Err, "went down")),
    ?assertNotEqual(nomatch, string:find(Err, atom_to_list(Victim))),
    ?assertNotEqual(nomatch, string:find(Err, "exited with status 137 (killed by signal 9, KILL)")),
    ?assertNotEqual(nomatch, string:find(Err, "its log: " ++ Log)),
    {ok, Text} = file:read_file(Log),
    ?assertMatch({match, _}, re:run(Text, "exited with status 137\n$")),
    {ok, Manifest} = terrain_json:read_file(filename:join(Out, "manifest.json")),
    ?assertMatch(#{<<"vm_logs">> := <<"vms">>, <<"error">> := _}, Manifest),
    ?assertNotEqual(nomatch, string:find(maps:get(<<"error">>, Manifest), "status 137")).

cut_connection_named_from_the_vms_logs() ->
    [{doc, "A node cut off by a partition while bench measures, no VM dead: the error quotes what the VMs logged "
      "about the lost connections (which node, why) and names the logs' directory."}].
cut_connection_named_from_the_vms_logs(Config) ->
    Out = filename:join(?config(priv_dir, Config), "cut"),
    {Runner, Victim} = measuring(Config, Out, "coll_c@"),
    ok = terrain_lab:isolate(Victim),
    {1, _, Err} = receive {Runner, Result} -> Result after 120000 -> ct:fail(no_result) end,
    ct:pal("~ts", [Err]),
    ?assertNotEqual(nomatch, string:find(Err, "no VM exited; their logs (" ++ filename:join(Out, "vms") ++ ") say:")),
    %% the cut connection, from either end: which of the VMs logs it first is a race
    %% (c's own line came after the error once, the peers' lines about c were there)
    ?assertMatch({match, _}, re:run(Err, "[abd]: terrain netem: the connection to coll_c@\\S+ went down: |"
                                         "c: terrain netem: the connection to coll_[abd]@\\S+ went down: ")),
    ?assertNotEqual(nomatch, string:find(Err, "coll_c@")),
    {ok, Manifest} = terrain_json:read_file(filename:join(Out, "manifest.json")),
    ?assertMatch(#{<<"error">> := _, <<"vm_logs">> := <<"vms">>}, Manifest).

failed_boot_leaves_manifest_with_error() ->
    [{doc, "A run that fails before its first measurement (a VM that halts while it boots) leaves its manifest "
      "with the error, which names the VM, its exit status and its log."}].
failed_boot_leaves_manifest_with_error(Config) ->
    Spec = filename:join(?config(priv_dir, Config), "halts.cluster"),
    ok = file:write_file(Spec, "{cluster, halts, #{latency => 100}}.\n"
                               "{node, a, #{}}.\n{node, b, #{args => [\"-eval\", \"erlang:halt(7)\"]}}.\n"),
    Out = filename:join(?config(priv_dir, Config), "halts"),
    {1, _, Err} = terrain_lab_test_io:run(["collective", "bench", "--spec", Spec, "--algorithms", "binomial",
                                           "--sizes", "8", "--rank-order", "block", "--seeds", "1", "--out", Out]),
    ct:pal("~ts", [Err]),
    Log = filename:join([Out, "vms", "b.log"]),
    ?assertNotEqual(nomatch, string:find(Err, "exited with status 7; its log: " ++ Log)),
    {ok, Manifest} = terrain_json:read_file(filename:join(Out, "manifest.json")),
    ?assertMatch(#{<<"format">> := <<"terrain.manifest/1">>, <<"outputs">> := [], <<"vm_logs">> := <<"vms">>},
                 Manifest),
    ?assertNotEqual(nomatch, string:find(maps:get(<<"error">>, Manifest), "exited with status 7")),
    ?assertNot(filelib:is_file(filename:join(Out, "collective.json"))).

%% A long bench (30,000 rounds) in a process of its own that sends its exit status,
%% output and error when it ends; returns once the node `Prefix ++ Host' runs terrain and
%% the members have started on it.
measuring(Config, Out, Prefix) ->
    Self = self(),
    Runner = spawn_link(fun() ->
                                Self ! {self(), terrain_lab_test_io:run(["collective", "bench", "--spec",
                                                                         ?config(spec, Config),
                                                                         "--algorithms", "binomial", "--sizes", "8",
                                                                         "--rank-order", "block", "--seeds", "1",
                                                                         "--rounds", "30000", "--out", Out])}
                        end),
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Node = list_to_atom(Prefix ++ Host),
    ok = wait_until(fun() -> net_adm:ping(Node) =:= pong andalso
                                 lists:keymember(terrain, 1, erpc:call(Node, application, which_applications, []))
                    end, 60000),
    timer:sleep(1000),
    {Runner, Node}.

wait_until(Fun, Timeout) when Timeout =< 0 ->
    {timeout, Fun};
wait_until(Fun, Timeout) ->
    case catch Fun() of
        true -> ok;
        _ -> timer:sleep(100), wait_until(Fun, Timeout - 100)
    end.

tune_writes_rules_that_auto_reads() ->
    [{doc, "tune writes a terrain.collective_rules/1 file naming a measured algorithm per size range, "
      "and prints auto's time (with those rules) against the best measured."}].
tune_writes_rules_that_auto_reads(Config) ->
    File = filename:join(?config(priv_dir, Config), "rules.json"),
    {0, Out, Err} = terrain_lab_test_io:run(["collective", "tune", "--spec", ?config(spec, Config),
                                              "--algorithms", "flat,binomial,hierarchical", "--sizes", "8,4096",
                                              "--rounds", "2", "--out", File]),
    ct:pal("~ts~ts", [Err, Out]),
    {ok, Rules} = terrain_paths:read_rules(File),
    %% one rule per size, or one for both when the same algorithm won; they cover every
    %% size without a gap, switching at the geometric middle of the values' external
    %% sizes (16 and 4615 bytes: 272)
    ?assertMatch([#{operation := allreduce, min_bytes := 0} | _], Rules),
    ?assertMatch(#{max_bytes := infinity}, lists:last(Rules)),
    ?assert(lists:all(fun({#{max_bytes := Hi}, #{min_bytes := Lo}}) -> Hi =:= Lo andalso Hi =:= 272 end,
                      lists:zip(lists:droplast(Rules), tl(Rules)))),
    ?assert(lists:all(fun(#{algorithm := A}) -> lists:member(A, [flat, binomial, hierarchical]) end, Rules)),
    ?assertEqual(2, length([L || L <- string:lexemes(Out, "\n"), lists:prefix("8 ", L) orelse lists:prefix("4096 ", L)])).

bad_invocations() ->
    [{doc, "Unknown action, missing --spec, bad sizes, algorithms, rank orders and rules files are refused "
      "with a sentence before any node starts: exit 2 for usage errors, 1 for a bad rules file."}].
bad_invocations(Config) ->
    Spec = ?config(spec, Config),
    Out = filename:join(?config(priv_dir, Config), "never"),
    BadRules = filename:join(?config(priv_dir, Config), "bad_rules.json"),
    ok = file:write_file(BadRules, "{\"format\": \"terrain.latency/1\"}"),
    %% usage errors (exit 2, docs/CLI.md's conventions) and a rules file that cannot be read (exit 1)
    Cases = [{["collective", "frob", "--spec", Spec, "--out", Out], 2, "unknown action 'frob'"},
             {["collective", "bench", "--out", Out], 2, "--spec is required"},
             {["collective", "bench", "--spec", Spec, "--out", Out, "--sizes", "8,big"], 2,
              "option '--sizes' expects integers >= 1, got '8,big'"},
             {["collective", "bench", "--spec", Spec, "--out", Out, "--algorithms", "fastest"], 2,
              "bad value for --algorithms: 'fastest'"},
             {["collective", "bench", "--spec", Spec, "--out", Out, "--rank-order", "sorted"], 2,
              "bad value for --rank-order: 'sorted'"},
             {["collective", "bench", "--spec", Spec, "--out", Out, "--rules", BadRules], 1,
              "not a terrain.collective_rules/1 file"}],
    [begin
         {Status, "", Err} = terrain_lab_test_io:run(Args),
         ?assertEqual({Args, Code}, {Args, Status}),
         ?assertNotEqual(nomatch, string:find(Err, Expected), Err)
     end || {Args, Code, Expected} <- Cases],
    ?assertNot(filelib:is_file(Out)).

real_escript() ->
    [{doc, "The escript: --help lists the actions; no action, a bad one or a missing --spec is a usage error (2)."}].
real_escript(Config) ->
    Escript = terrain_lab_test_escript:path(),
    {0, Help, _} = terrain_lab_test_escript:run(Escript, ?config(priv_dir, Config), ["collective", "--help"]),
    ?assertNotEqual(nomatch, string:find(Help, "bench | tune")),
    {2, "", _} = terrain_lab_test_escript:run(Escript, ?config(priv_dir, Config), ["collective"]),
    {2, "", Err} = terrain_lab_test_escript:run(Escript, ?config(priv_dir, Config),
                                                ["collective", "frob", "--spec", "s", "--out", "o"]),
    ?assertNotEqual(nomatch, string:find(Err, "unknown action")),
    {2, "", Missing} = terrain_lab_test_escript:run(Escript, ?config(priv_dir, Config), ["collective", "frob"]),
    ?assertNotEqual(nomatch, string:find(Missing, "options --spec, --out are required")).
