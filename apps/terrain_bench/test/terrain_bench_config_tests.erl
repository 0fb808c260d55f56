%% EUnit tests of configuration validation: defaults, and errors that name the key
%% and the expected value.
-module(terrain_bench_config_tests).
-include_lib("eunit/include/eunit.hrl").

defaults_are_filled_in_test() ->
    {ok, C} = terrain_bench:validate_config([{operations, [{rpc, 1}]}]),
    ?assertMatch(#{duration := 60, concurrent := 4, report_interval := 1, argument_size := 10,
                   compute_us := 10, target := random, mode := closed, warmup := 0, timeout := 5000,
                   connect := true}, C).

bad_values_name_key_and_expectation_test_() ->
    Cases = [{[{operations, []}], operations},
             {[{operations, [{rcp, 1}]}], operations},
             {[{operations, [{rpc, 0}]}], operations},
             {[{operations, [{rpc, 1}, {rpc, 2}]}], operations},
             {[{operations, [{rpc, 1}]}, {duration, 0}], duration},
             {[{operations, [{rpc, 1}]}, {concurrent, 1.5}], concurrent},
             {[{operations, [{rpc, 1}]}, {argument_size, -1}], argument_size},
             {[{operations, [{rpc, 1}]}, {mode, {rate, 0}}], mode},
             {[{operations, [{rpc, 1}]}, {mode, open}], mode},
             {[{operations, [{rpc, 1}]}, {mode, {think, 0}}], mode},
             {[{operations, [{rpc, 1}]}, {mode, {think, fast}}], mode},
             {[{operations, [{rpc, 1}]}, {connect, yes}], connect},
             {[{operations, [{rpc, 1}]}, {target, {group, "s", g}}], target},
             {[{operations, [{rpc, 1}]}, {target, [{load, frobnicate, 3}]}], target},
             {[{operations, [{rpc, 1}]}, {warmup, -1}], warmup}],
    [?_assertMatch({error, {bench_config, {bad_value, Key, _}}}, terrain_bench:validate_config(Terms))
     || {Terms, Key} <- Cases].

messages_say_key_and_expected_value_test() ->
    {error, E} = terrain_bench:validate_config([{operations, [{rpc, 1}]}, {mode, open}]),
    ?assertEqual("configuration: mode must be closed, {rate, OpsPerSecondPerWorker} or {think, MeanMilliseconds} "
                 "with a positive number, got open",
                 lists:flatten(terrain_bench:format_error(E))),
    {error, U} = terrain_bench:validate_config([{operations, [{rpc, 1}]}, {durration, 5}]),
    ?assertMatch("configuration: unknown key durration; known keys: duration, " ++ _,
                 lists:flatten(terrain_bench:format_error(U))),
    ?assertMatch({error, {bench_config, {missing_key, operations}}}, terrain_bench:validate_config([])),
    ?assertMatch({error, {bench_config, {duplicate_key, duration}}},
                 terrain_bench:validate_config([{operations, [{rpc, 1}]}, {duration, 1}, {duration, 2}])),
    ?assertMatch({error, {bench_config, {not_a_key_value, oops}}}, terrain_bench:validate_config([oops])).

read_config_file_test() ->
    Dir = filename:join(["/tmp", "terrain_bench_config_" ++ os:getpid()]),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Good = filename:join(Dir, "good.config"),
    ok = file:write_file(Good, "{duration, 30}.\n{operations, [{spawn, 1}, {rpc, 1}]}.\n{mode, {rate, 100}}.\n"),
    ?assertMatch({ok, #{duration := 30, mode := {rate, 100}}}, terrain_bench:read_config(Good)),
    Think = filename:join(Dir, "think.config"),
    ok = file:write_file(Think, "{operations, [{rpc, 1}]}.\n{mode, {think, 12.5}}.\n{connect, false}.\n"),
    {ok, ThinkConfig} = terrain_bench:read_config(Think),
    ?assertMatch(#{mode := {think, 12.5}, connect := false}, ThinkConfig),
    ?assertMatch(#{mode := #{think_ms := 12.5}, connect := false}, terrain_bench:config_to_json(ThinkConfig)),
    Bad = filename:join(Dir, "bad.config"),
    ok = file:write_file(Bad, "{duration, 30}\n"),
    ?assertMatch({error, {bench_config, {syntax, _, _, _}}}, terrain_bench:read_config(Bad)),
    ?assertMatch({error, {bench_config, {file, _, enoent}}}, terrain_bench:read_config(filename:join(Dir, "none"))),
    ok = file:del_dir_r(Dir).

%% A device is never read (file:consult of /dev/zero read until memory ran out), nor
%% a file over 1 MiB; each error names the file.
a_device_or_a_huge_file_is_refused_before_it_is_read_test() ->
    ?assertEqual({error, {bench_config, {file, "/dev/zero", not_regular}}}, terrain_bench:read_config("/dev/zero")),
    ?assertEqual("cannot read configuration /dev/zero: not a regular file",
                 lists:flatten(terrain_bench:format_error({bench_config, {file, "/dev/zero", not_regular}}))),
    File = filename:join("/tmp", "terrain_bench_huge_" ++ os:getpid() ++ ".config"),
    ok = file:write_file(File, binary:copy(<<"{duration, 1}.\n">>, 80000)),
    try
        ?assertEqual({error, {bench_config, {file, File, too_large}}}, terrain_bench:read_config(File))
    after
        file:delete(File)
    end.
