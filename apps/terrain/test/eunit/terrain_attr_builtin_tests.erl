%% EUnit: built-in attributes read /proc, and give `undefined' (never a crash) when it
%% is missing or says something unexpected.
-module(terrain_attr_builtin_tests).
-include_lib("eunit/include/eunit.hrl").

-define(NAMES, [os_type, os_version, otp_release, vm_num_processors, mem_total, cpu_speed, mem_free,
                loadavg1, loadavg5, loadavg15, kernel_entities, num_erlang_processes,
                cpu_model_name, hostname, vm_schedulers_online, run_queue, scheduler_utilisation,
                vm_memory_total, cpu_quota, cpu_quota_per_scheduler]).

every_builtin_is_defined_test() ->
    ?assertEqual(lists:sort(?NAMES), lists:sort([N || {N, _} <- terrain_attr_builtin:definitions()])).

fake_proc(Files) ->
    Dir = filename:join(["_build", "test", "tmp", "proc-" ++ integer_to_list(erlang:unique_integer([positive]))]),
    _ = file:del_dir_r(Dir),
    ok = filelib:ensure_path(Dir),
    [ok = file:write_file(filename:join(Dir, Name), Text) || {Name, Text} <- Files],
    Dir.

values(Proc) ->
    maps:from_list([{Name, evaluate(Def)} || {Name, Def} <- terrain_attr_builtin:definitions(Proc)]).

evaluate({static, V}) -> V;
evaluate({builtin, {M, F, A}}) -> apply(M, F, A);
evaluate({sampled, {M, F, A}, _}) -> apply(M, F, A).

reads_proc_files_test() ->
    Proc = fake_proc([{"loadavg", "0.52 0.58 0.59 2/345 12345\n"},
                      {"meminfo", "MemTotal:       24682416 kB\nMemFree:        22002640 kB\n"},
                      {"cpuinfo", "processor\t: 0\nmodel name\t: Test CPU @ 1.60GHz\ncpu MHz\t\t: 1596.000\n"
                                  "processor\t: 1\ncpu MHz\t\t: 2994.655\n"}]),
    V = values(Proc),
    ?assertEqual(0.52, maps:get(loadavg1, V)),
    ?assertEqual(0.58, maps:get(loadavg5, V)),
    ?assertEqual(0.59, maps:get(loadavg15, V)),
    ?assertEqual({2, 345}, maps:get(kernel_entities, V)),
    ?assertEqual(24682416, maps:get(mem_total, V)),
    ?assertEqual(22002640, maps:get(mem_free, V)),
    ?assertEqual(1596.0, maps:get(cpu_speed, V)),
    ?assertEqual("Test CPU @ 1.60GHz", maps:get(cpu_model_name, V)).

missing_proc_gives_undefined_test() ->
    V = values("/nonexistent/proc"),
    [?assertEqual(undefined, maps:get(N, V), N)
     || N <- [mem_total, cpu_speed, mem_free, loadavg1, loadavg5, loadavg15, kernel_entities, cpu_model_name]],
    ?assert(is_integer(maps:get(num_erlang_processes, V))),
    ?assert(is_integer(maps:get(vm_schedulers_online, V))).

garbled_proc_gives_undefined_test() ->
    Proc = fake_proc([{"loadavg", "not numbers at all\n"}, {"meminfo", "MemTotal: lots\n"},
                      {"cpuinfo", "cpu MHz : fast\n"}]),
    V = values(Proc),
    [?assertEqual(undefined, maps:get(N, V), N)
     || N <- [mem_total, cpu_speed, loadavg1, kernel_entities, cpu_model_name]].

unreadable_proc_gives_undefined_test() ->
    %% a directory where a file should be: open succeeds or fails, read fails
    Proc = fake_proc([]),
    [ok = file:make_dir(filename:join(Proc, F)) || F <- ["loadavg", "meminfo", "cpuinfo"]],
    V = values(Proc),
    [?assertEqual(undefined, maps:get(N, V), N) || N <- [mem_total, cpu_speed, loadavg1, kernel_entities]].

scheduler_utilisation_is_a_fraction_test() ->
    U = terrain_attr_builtin:scheduler_utilisation(),
    ?assert(is_float(U) andalso U >= 0.0 andalso U =< 1.0).

fake_cgroup(Files) ->
    Dir = fake_proc([]),
    [begin ok = filelib:ensure_dir(filename:join(Dir, Name)), ok = file:write_file(filename:join(Dir, Name), Text) end
     || {Name, Text} <- Files],
    Dir.

cpu_quota_reads_the_vms_own_v1_cgroup_test() ->
    Proc = fake_cgroup([{"self/cgroup", "2:cpuacct:/\n1:cpu:/terrain/c/n1\n0::/\n"}]),
    Cgroup = fake_cgroup([{"cpu/terrain/c/n1/cpu.cfs_quota_us", "20000\n"},
                          {"cpu/terrain/c/n1/cpu.cfs_period_us", "100000\n"}]),
    ?assertEqual(0.2, terrain_attr_builtin:cpu_quota(Proc, Cgroup)).

cpu_quota_is_undefined_when_unlimited_test() ->
    Proc = fake_cgroup([{"self/cgroup", "1:cpu,cpuacct:/\n"}]),
    Cgroup = fake_cgroup([{"cpu,cpuacct/cpu.cfs_quota_us", "-1\n"}, {"cpu,cpuacct/cpu.cfs_period_us", "100000\n"}]),
    ?assertEqual(undefined, terrain_attr_builtin:cpu_quota(Proc, Cgroup)),
    ?assertEqual(undefined, terrain_attr_builtin:cpu_quota("/nonexistent/proc", Cgroup)).

cpu_quota_reads_v2_cpu_max_test() ->
    Proc = fake_cgroup([{"self/cgroup", "0::/terrain/c/n2\n"}]),
    Limited = fake_cgroup([{"terrain/c/n2/cpu.max", "150000 100000\n"}]),
    ?assertEqual(1.5, terrain_attr_builtin:cpu_quota(Proc, Limited)),
    Unlimited = fake_cgroup([{"unified/terrain/c/n2/cpu.max", "max 100000\n"}]),
    ?assertEqual(undefined, terrain_attr_builtin:cpu_quota(Proc, Unlimited)).

cpu_quota_per_scheduler_reads_the_scheduler_threads_group_test() ->
    %% The VM's group has 0.4 cores; the thread 1_scheduler sits in a child group of 0.1.
    Proc = fake_cgroup([{"self/cgroup", "1:cpu,cpuacct:/terrain/c/n1\n"},
                        {"self/task/100/comm", "beam.smp\n"},
                        {"self/task/100/cgroup", "1:cpu,cpuacct:/terrain/c/n1\n"},
                        {"self/task/103/comm", "1_scheduler\n"},
                        {"self/task/103/cgroup", "1:cpu,cpuacct:/terrain/c/n1/s1\n"},
                        {"self/task/104/comm", "1_dirty_cpu_sch\n"},
                        {"self/task/104/cgroup", "1:cpu,cpuacct:/terrain/c/n1\n"}]),
    Cgroup = fake_cgroup([{"cpu,cpuacct/terrain/c/n1/cpu.cfs_quota_us", "40000\n"},
                          {"cpu,cpuacct/terrain/c/n1/cpu.cfs_period_us", "100000\n"},
                          {"cpu,cpuacct/terrain/c/n1/s1/cpu.cfs_quota_us", "10000\n"},
                          {"cpu,cpuacct/terrain/c/n1/s1/cpu.cfs_period_us", "100000\n"}]),
    ?assertEqual(0.4, terrain_attr_builtin:cpu_quota(Proc, Cgroup)),
    ?assertEqual(0.1, terrain_attr_builtin:cpu_quota_per_scheduler(Proc, Cgroup)).

cpu_quota_per_scheduler_is_the_vms_quota_without_a_group_of_its_own_test() ->
    Proc = fake_cgroup([{"self/cgroup", "1:cpu:/terrain/c/n1\n"},
                        {"self/task/7/comm", "1_scheduler\n"},
                        {"self/task/7/cgroup", "1:cpu:/terrain/c/n1\n"}]),
    Cgroup = fake_cgroup([{"cpu/terrain/c/n1/cpu.cfs_quota_us", "50000\n"},
                          {"cpu/terrain/c/n1/cpu.cfs_period_us", "100000\n"}]),
    ?assertEqual(0.5, terrain_attr_builtin:cpu_quota_per_scheduler(Proc, Cgroup)),
    %% no limit anywhere, or no /proc: undefined
    Unlimited = fake_cgroup([{"cpu/terrain/c/n1/cpu.cfs_quota_us", "-1\n"},
                             {"cpu/terrain/c/n1/cpu.cfs_period_us", "100000\n"}]),
    ?assertEqual(undefined, terrain_attr_builtin:cpu_quota_per_scheduler(Proc, Unlimited)),
    ?assertEqual(undefined, terrain_attr_builtin:cpu_quota_per_scheduler("/nonexistent/proc", Cgroup)).
