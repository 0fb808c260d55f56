%% CPU emulation: a node with `cpu => Cores' in its spec runs in a CPU cgroup with that
%% quota; the built-in attribute `cpu_quota' sees it; the group is gone after stop.
-module(terrain_lab_cgroup_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([quota_limits_a_busy_loop/0, quota_limits_a_busy_loop/1,
         bad_cpu_option_is_rejected/0, bad_cpu_option_is_rejected/1]).
%% Run on the nodes.
-export([spin/1]).

-define(LOOP_MS, 3000).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [quota_limits_a_busy_loop, bad_cpu_option_is_rejected].

init_per_suite(Config) ->
    case terrain_lab_cgroup:check(spec([{node, x, #{cpu => 0.5}}])) of
        ok -> Config;
        {error, Why} -> {skip, lists:flatten(terrain_lab:format_error(Why))}
    end.

end_per_suite(_Config) ->
    ok.

quota_limits_a_busy_loop() ->
    [{doc, "Side by side, a busy loop on a 0.2-core VM does 15-30% of the iterations of an unlimited "
           "VM; cpu_quota is 0.2 and undefined; no cgroup is left after stop."}].
quota_limits_a_busy_loop(_Config) ->
    Prefix = "cg" ++ os:getpid() ++ "_",
    Spec = spec([{node, slow, #{schedulers => 1, cpu => 0.2}}, {node, fast, #{schedulers => 1}}]),
    {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => Prefix}),
    Group = "/sys/fs/cgroup/cpu/terrain/cgtest/" ++ Prefix ++ "slow",
    try
        [#{node := Slow, cpu_quota := Quota} = SlowInfo, #{node := Fast} = FastInfo] = terrain_lab:cluster_nodes(Cluster),
        ?assertEqual(0.2, Quota),
        ?assertNot(maps:is_key(cpu_quota, FastInfo)),
        ?assertEqual([maps:get(os_pid, SlowInfo)],
                     [binary_to_list(P) || P <- binary:split(element(2, file:read_file(Group ++ "/cgroup.procs")),
                                                             <<"\n">>, [global, trim_all])]),
        ?assertEqual(0.2, erpc:call(Slow, terrain, attr, [cpu_quota], 5000)),
        ?assertEqual(undefined, erpc:call(Fast, terrain, attr, [cpu_quota], 5000)),
        %% The machine is shared (load averages of 20 on 2 cores happen): an unlimited VM
        %% in the root group would get less than 0.2 cores and the quota would never bind.
        %% So the unlimited VM goes into an unlimited group next to the limited one, and
        %% the cluster's group gets a large CPU weight for the 3 s of the loops: the two
        %% VMs then compete with each other rather than with the rest of the machine.
        %% stop_cluster removes the group (it has the node's name).
        FastGroup = "/sys/fs/cgroup/cpu/terrain/cgtest/" ++ Prefix ++ "fast",
        ok = file:make_dir(FastGroup),
        ok = file:write_file(FastGroup ++ "/cgroup.procs", maps:get(os_pid, FastInfo)),
        ok = file:write_file("/sys/fs/cgroup/cpu/terrain/cgtest/cpu.shares", "262144"),
        {?MODULE, Bin, File} = code:get_object_code(?MODULE),
        [{module, ?MODULE} = erpc:call(N, code, load_binary, [?MODULE, File, Bin], 5000) || N <- [Slow, Fast]],
        %% Both loops start together and run for the same wall time; the CPU time each VM
        %% used (/proc/PID/stat) says what the machine gave it.
        OsPids = [maps:get(os_pid, I) || I <- [SlowInfo, FastInfo]],
        Cpu0 = [cpu_seconds(P) || P <- OsPids],
        Throttled0 = throttled(Group),
        Runs = [erpc:send_request(N, ?MODULE, spin, [?LOOP_MS]) || N <- [Slow, Fast]],
        [SlowCount, FastCount] = [erpc:receive_response(R, ?LOOP_MS + 10000) || R <- Runs],
        [SlowCores, FastCores] = [(cpu_seconds(P) - C0) / (?LOOP_MS / 1000) || {P, C0} <- lists:zip(OsPids, Cpu0)],
        Ratio = SlowCount / FastCount,
        ct:pal("busy loop for ~b ms: 0.2-core VM ~b iterations on ~.2f cores, unlimited VM ~b on ~.2f cores; "
               "iteration ratio ~.3f; load ~ts",
               [?LOOP_MS, SlowCount, SlowCores, FastCount, FastCores, Ratio, os:cmd("cut -d' ' -f1 /proc/loadavg")]),
        %% The quota binds: the limited VM used at most 0.2 cores (+ accounting slack) and was throttled.
        ?assert(SlowCores =< 0.25, {slow_cores, SlowCores}),
        ?assert(throttled(Group) > Throttled0),
        %% The iteration ratio is only meaningful when the unlimited VM could run: on a
        %% machine this loaded, it may get less than the quota itself.
        case FastCores >= 0.67 of
            true -> ?assert(Ratio >= 0.15 andalso Ratio =< 0.30, {ratio, Ratio});
            false -> ct:comment("machine overloaded: the unlimited VM got ~.2f cores, iteration ratio ~.3f not checked",
                                [FastCores, Ratio])
        end,
        {comment, io_lib:format("iteration ratio ~.3f; cores ~.2f vs ~.2f", [Ratio, SlowCores, FastCores])}
    after
        ok = terrain_lab:stop_cluster(Cluster),
        ?assertNot(filelib:is_dir(Group)),
        ?assertNot(filelib:is_dir("/sys/fs/cgroup/cpu/terrain/cgtest"))
    end.

bad_cpu_option_is_rejected() ->
    [{doc, "cpu must be a number of cores greater than 0; the error says so."}].
bad_cpu_option_is_rejected(_Config) ->
    [begin
         {error, Why} = terrain_lab_spec:from_terms([{cluster, cgtest, #{}}, {node, x, #{cpu => Bad}}], undefined),
         Text = lists:flatten(terrain_lab:format_error(Why)),
         ?assertNotEqual(nomatch, string:find(Text, "number of cores greater than 0"), Text)
     end || Bad <- [0, -1.0, "half", half]].

%%--------------------------------------------------------------------

%% @doc Counts iterations of a busy loop for `Ms' milliseconds of wall time.
spin(Ms) ->
    Deadline = erlang:monotonic_time(millisecond) + Ms,
    spin(Deadline, 0).

spin(Deadline, N) ->
    case N rem 1000 =:= 0 andalso erlang:monotonic_time(millisecond) >= Deadline of
        true -> N;
        false -> spin(Deadline, N + 1)
    end.

%% User + system CPU time of an OS process, in seconds (clock ticks of 1/100 s).
cpu_seconds(OsPid) ->
    {ok, Stat} = file:read_file("/proc/" ++ OsPid ++ "/stat"),
    [_, AfterComm] = string:split(Stat, ") ", trailing),
    Fields = string:lexemes(AfterComm, " "),
    (binary_to_integer(lists:nth(12, Fields)) + binary_to_integer(lists:nth(13, Fields))) / 100.

throttled(Group) ->
    {ok, Stat} = file:read_file(Group ++ "/cpu.stat"),
    [N] = [binary_to_integer(V) || [<<"nr_throttled">>, V] <- [string:lexemes(L, " ") || L <- string:split(Stat, "\n", all)]],
    N.

spec(Terms) ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, cgtest, #{}} | Terms], undefined),
    Spec.
