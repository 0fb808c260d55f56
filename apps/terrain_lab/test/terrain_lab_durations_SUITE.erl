%% terrain write-test and terrain time-task: rows per run, O_SYNC, files removed, never
%% overwriting, errors that keep every row already measured.
-module(terrain_lab_durations_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([write_test_writes_one_row_per_run/0, write_test_writes_one_row_per_run/1,
         sync_flag_is_honoured/0, sync_flag_is_honoured/1,
         write_test_never_overwrites/0, write_test_never_overwrites/1,
         disk_full_keeps_measured_rows/0, disk_full_keeps_measured_rows/1,
         read_only_target_is_reported/0, read_only_target_is_reported/1,
         bad_write_test_options/0, bad_write_test_options/1,
         time_task_times_every_node/0, time_task_times_every_node/1,
         time_task_counts_failed_nodes/0, time_task_counts_failed_nodes/1]).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [write_test_writes_one_row_per_run, sync_flag_is_honoured, write_test_never_overwrites,
     disk_full_keeps_measured_rows, read_only_target_is_reported, bad_write_test_options,
     time_task_times_every_node, time_task_counts_failed_nodes].

init_per_testcase(Case, Config) ->
    Dir = filename:join(?config(priv_dir, Config), atom_to_list(Case)),
    Targets = [filename:join(Dir, "t" ++ integer_to_list(I)) || I <- lists:seq(1, 4)],
    [ok = filelib:ensure_dir(filename:join(T, "x")) || T <- Targets],
    [{dir, Dir}, {targets, Targets} | Config].

end_per_testcase(_Case, Config) ->
    [os:cmd("umount " ++ T ++ " 2>/dev/null") || T <- ?config(targets, Config)],
    ok.

%%--------------------------------------------------------------------

write_test_writes_one_row_per_run() ->
    [{doc, "4 targets, 5 runs: 5 rows with every column, bytes = size, the slowest target is one "
           "of the targets, and no part file is left behind."}].
write_test_writes_one_row_per_run(Config) ->
    Out = filename:join(?config(dir, Config), "d.csv"),
    {0, _, Err} = cli(["write-test", "--size", "3", "--stripe", "256", "--runs", "5", "--out", Out,
                       "--targets", lists:join(",", ?config(targets, Config))]),
    ct:pal("~ts", [Err]),
    ?assertNotEqual(nomatch, string:find(Err, "O_SYNC verified")),
    {Header, Rows} = read_csv(Out),
    ?assertEqual(["run", "total_s", "alloc_s", "open_s", "write_s", "close_s", "slowest_target", "slowest_s",
                  "bytes", "status"], Header),
    ?assertEqual(["1", "2", "3", "4", "5"], [R || [R | _] <- Rows]),
    [begin
         Row = maps:from_list(lists:zip(Header, Cells)),
         ?assertEqual("3145728", maps:get("bytes", Row)),
         ?assertEqual("ok", maps:get("status", Row)),
         ?assert(lists:member(maps:get("slowest_target", Row), ?config(targets, Config))),
         [?assert(list_to_float(maps:get(C, Row)) >= 0.0) || C <- ["total_s", "open_s", "write_s", "close_s"]],
         ?assert(list_to_float(maps:get("total_s", Row)) >= list_to_float(maps:get("write_s", Row)))
     end || Cells <- Rows],
    ?assertEqual([], lists:append([filelib:wildcard(filename:join(T, "*")) || T <- ?config(targets, Config)])).

sync_flag_is_honoured() ->
    [{doc, "file:open/2 with sync sets O_SYNC on the descriptor (checked in /proc); without it, not."}].
sync_flag_is_honoured(Config) ->
    [T | _] = ?config(targets, Config),
    Synced = filename:join(T, "synced"),
    Plain = filename:join(T, "plain"),
    {ok, Fd1} = file:open(Synced, [write, raw, binary, sync]),
    {ok, Fd2} = file:open(Plain, [write, raw, binary]),
    try
        ?assertEqual(true, terrain_lab_write_test:o_sync(Synced)),
        ?assertEqual(false, terrain_lab_write_test:o_sync(Plain))
    after
        file:close(Fd1), file:close(Fd2)
    end.

write_test_never_overwrites() ->
    [{doc, "An existing --out, or an existing file where a part file would go, is refused; both stay intact."}].
write_test_never_overwrites(Config) ->
    [T1, T2 | _] = ?config(targets, Config),
    Out = filename:join(?config(dir, Config), "existing.csv"),
    ok = file:write_file(Out, <<"precious\n">>),
    {1, "", Err} = cli(["write-test", "--size", "1", "--runs", "1", "--out", Out, "--targets", T1]),
    ?assertNotEqual(nomatch, string:find(Err, "exists already; terrain never overwrites an output")),
    ?assertEqual({ok, <<"precious\n">>}, file:read_file(Out)),
    %% The part file name of run 1 of this OS process, taken in target 2.
    Squatter = filename:join(T2, "terrain-write-" ++ os:getpid() ++ "-1.part"),
    ok = file:write_file(Squatter, <<"not terrain's">>),
    Out2 = filename:join(?config(dir, Config), "fresh.csv"),
    {1, "", Err2} = cli(["write-test", "--size", "1", "--runs", "2", "--out", Out2, "--targets", T1 ++ "," ++ T2]),
    ct:pal("~ts", [Err2]),
    ?assertNotEqual(nomatch, string:find(Err2, "run 1: open " ++ T2)),
    ?assertNotEqual(nomatch, string:find(Err2, "(EEXIST)")),
    ?assertEqual({ok, <<"not terrain's">>}, file:read_file(Squatter)),
    ?assertEqual([], filelib:wildcard(filename:join(T1, "*"))).

disk_full_keeps_measured_rows() ->
    [{doc, "A target fills up while the test runs: the failing run is named with ENOSPC, every "
           "row before it stays in the CSV, and no part file is left."}].
disk_full_keeps_measured_rows(Config) ->
    [T1, T2 | _] = ?config(targets, Config),
    mount_tmpfs(T2, "size=4m"),
    Out = filename:join(?config(dir, Config), "full.csv"),
    Self = self(),
    Runner = spawn_link(fun() ->
                                Self ! {done, cli(["write-test", "--size", "2", "--stripe", "256", "--runs", "100000",
                                                   "--out", Out, "--targets", T1 ++ "," ++ T2])}
                        end),
    ok = await_rows(Out, 3, erlang:monotonic_time(millisecond) + 60000),
    Filler = filename:join(T2, "filler"),
    {ok, Fd} = file:open(Filler, [write, raw, binary]),
    {1, "", Err} = fill_until_done(Fd),
    file:close(Fd),
    unlink(Runner),
    ct:pal("~ts", [Err]),
    {match, [FailedRun]} = re:run(Err, "run ([0-9]+): (open|write|close) " ++ T2 ++ " failed: no space left on device \\(ENOSPC\\)",
                                  [{capture, [1], list}]),
    {_, Rows} = read_csv(Out),
    ?assertEqual(list_to_integer(FailedRun) - 1, length(Rows)),
    ?assert(length(Rows) >= 3),
    ?assertEqual([integer_to_list(I) || I <- lists:seq(1, length(Rows))], [R || [R | _] <- Rows]),
    ?assertNotEqual(nomatch, string:find(Err, "measured before it are kept in " ++ Out)),
    ?assertEqual([], filelib:wildcard(filename:join(T1, "*"))),
    ?assertEqual([Filler], filelib:wildcard(filename:join(T2, "*"))).

read_only_target_is_reported() ->
    [{doc, "A read-only target fails run 1 at open with EROFS; the CSV keeps its header."}].
read_only_target_is_reported(Config) ->
    [T1, T2 | _] = ?config(targets, Config),
    mount_tmpfs(T2, "ro,size=1m"),
    Out = filename:join(?config(dir, Config), "ro.csv"),
    {1, "", Err} = cli(["write-test", "--size", "1", "--runs", "3", "--out", Out, "--targets", T1 ++ "," ++ T2]),
    ?assertNotEqual(nomatch, string:find(Err, "run 1: open " ++ T2 ++ " failed: read-only file system (EROFS); "
                                              "the 0 runs measured before it are kept in " ++ Out)),
    ?assertMatch({_, []}, read_csv(Out)).

bad_write_test_options() ->
    [{doc, "Missing or out-of-range options are usage errors (exit 2), targets that cannot be used exit 1; "
           "each with a sentence naming them."}].
bad_write_test_options(Config) ->
    [T1 | _] = ?config(targets, Config),
    Out = filename:join(?config(dir, Config), "x.csv"),
    %% usage errors (exit 2): the parser checks required options and ranges
    Usage = [{["--out", Out], "option --targets is required"},
             {["--targets", T1], "option --out is required"},
             {["--targets", T1, "--out", Out, "--size", "0"], "option '--size' expects an integer >= 1, got '0'"}],
    [begin
         {2, "", Err} = cli(["write-test" | Args]),
         ?assertNotEqual(nomatch, string:find(Err, Expected))
     end || {Args, Expected} <- Usage],
    %% the test cannot run (exit 1)
    Cases = [{["--targets", T1 ++ "," ++ T1, "--out", Out], "is given more than once"},
             {["--targets", "/nonexistent", "--out", Out], "target /nonexistent is not a directory"}],
    [begin
         {1, "", Err} = cli(["write-test" | Args]),
         ?assertNotEqual(nomatch, string:find(Err, Expected))
     end || {Args, Expected} <- Cases],
    ?assertNot(filelib:is_file(Out)).

time_task_times_every_node() ->
    [{doc, "time-task --rpc-all on 3 nodes: one row per run, each at least the task's own time, "
           "the slowest node one of them, nothing failed."}].
time_task_times_every_node(Config) ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, tt, #{}}, {node, a, #{}}, {node, b, #{}}, {node, c, #{}}], undefined),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "tt" ++ os:getpid() ++ "_"}),
    try
        Nodes = [atom_to_list(N) || #{node := N} <- terrain_lab:cluster_nodes(Cluster)],
        Out = filename:join(?config(dir, Config), "tasks.csv"),
        {0, _, _} = cli(["time-task", "--rpc-all", "timer:sleep:[20]", "--runs", "5", "--out", Out,
                         "--nodes", lists:join(",", Nodes)]),
        {Header, Rows} = read_csv(Out),
        ?assertEqual(["run", "total_s", "slowest_node", "slowest_s", "nodes", "failed", "status"], Header),
        ?assertEqual(5, length(Rows)),
        [begin
             ?assert(list_to_float(Total) >= 0.020),
             ?assert(list_to_float(Total) >= list_to_float(SlowestS)),
             ?assert(lists:member(Slowest, Nodes))
         end || [_, Total, Slowest, SlowestS, "3", "0", "ok"] <- Rows],
        ?assertEqual(5, length([x || [_, _, _, _, "3", "0", "ok"] <- Rows])),
        {1, "", Err} = cli(["time-task", "--rpc-all", "os:cmd(\"ls\")", "--out", Out ++ "2", "--nodes", hd(Nodes)]),
        ?assertNotEqual(nomatch, string:find(Err, "expected Module:Function:[Args] with literal arguments"))
    after
        terrain_lab:stop_cluster(Cluster)
    end.

time_task_counts_failed_nodes() ->
    [{doc, "A node that does not exist and a task that misses the deadline are counted as failed; "
           "each run still ends at its deadline; when every run failed the command exits 1."}].
time_task_counts_failed_nodes(Config) ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, tf, #{}}, {node, a, #{}}], undefined),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "tf" ++ os:getpid() ++ "_"}),
    try
        [#{node := A}] = terrain_lab:cluster_nodes(Cluster),
        Nobody = "nobody_" ++ os:getpid() ++ "@" ++ terrain_lab_dist:host(),
        Out = filename:join(?config(dir, Config), "failed.csv"),
        %% every run failed (a node of each did): the command failed
        {1, _, AllFailed} = cli(["time-task", "--rpc-all", "erlang:node:[]", "--runs", "2", "--out", Out,
                                 "--nodes", atom_to_list(A) ++ "," ++ Nobody]),
        ?assertNotEqual(nomatch, string:find(AllFailed, "all 2 runs failed")),
        {_, Rows} = read_csv(Out),
        ?assertMatch([[_, _, _, _, "2", "1", "failed"], [_, _, _, _, "2", "1", "failed"]], Rows),
        Slow = filename:join(?config(dir, Config), "slow.csv"),
        {1, _, _} = cli(["time-task", "--rpc-all", "timer:sleep:[3000]", "--runs", "1", "--timeout", "300",
                         "--out", Slow, "--nodes", atom_to_list(A)]),
        {_, [[_, Total, _, _, "1", "1", "failed"]]} = read_csv(Slow),
        ?assert(list_to_float(Total) >= 0.3 andalso list_to_float(Total) < 2.0)
    after
        terrain_lab:stop_cluster(Cluster)
    end.

%%--------------------------------------------------------------------

cli(Args) ->
    terrain_lab_test_io:run(Args).

read_csv(File) ->
    {ok, Bin} = file:read_file(File),
    [Header | Rows] = [string:split(L, ",", all) || L <- string:lexemes(binary_to_list(Bin), "\n")],
    {Header, Rows}.

mount_tmpfs(Dir, Options) ->
    case os:cmd("mount -t tmpfs -o " ++ Options ++ " tmpfs " ++ Dir ++ " 2>&1 && echo mounted") of
        "mounted\n" -> ok;
        Error -> throw({skip, "this test mounts a tmpfs and needs root: " ++ Error})
    end.

await_rows(File, N, Deadline) ->
    Rows = case file:read_file(File) of
               {ok, Bin} -> length(binary:matches(Bin, <<"\n">>)) - 1;
               {error, _} -> 0
           end,
    if
        Rows >= N -> ok;
        true ->
            _ = erlang:monotonic_time(millisecond) < Deadline orelse ct:fail(no_rows),
            receive after 5 -> await_rows(File, N, Deadline) end
    end.

%% Keeps the tmpfs full (writing whenever space frees up) until write-test returns.
fill_until_done(Fd) ->
    receive
        {done, Result} -> Result
    after 0 ->
        _ = file:write(Fd, binary:copy(<<0>>, 65536)),
        receive {done, Result} -> Result after 1 -> fill_until_done(Fd) end
    end.
