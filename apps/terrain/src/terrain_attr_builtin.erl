%% @private
%% @doc terrain's built-in attributes: RELEASE D3.5's Tables 1 and 2 and a few more.
%%
%% Static (evaluated once, when the attribute server loads them):
%% <ul>
%% <li>`os_type' — `os:type()', e.g. `{unix, linux}'</li>
%% <li>`os_version' — `os:version()', e.g. `{6, 1, 0}'</li>
%% <li>`otp_release' — `erlang:system_info(otp_release)', e.g. `"25"'</li>
%% <li>`vm_num_processors' — logical processors available to the VM (its CPU affinity)</li>
%% <li>`mem_total' — total memory in kB, from `/proc/meminfo'</li>
%% <li>`cpu_model_name' — the first CPU's `model name' in `/proc/cpuinfo', a string</li>
%% <li>`hostname' — `inet:gethostname()', a string</li>
%% </ul>
%% Dynamic (evaluated at every lookup):
%% <ul>
%% <li>`cpu_speed' — the first CPU's current clock in MHz (`cpu MHz' in `/proc/cpuinfo').
%%     RELEASE D3.5's Table 2 says GHz but its Appendix A shows MHz (`1596.0'); terrain
%%     follows the data and `/proc'.</li>
%% <li>`mem_free' — free memory in kB (`MemFree' in `/proc/meminfo')</li>
%% <li>`loadavg1', `loadavg5', `loadavg15' — the load averages in `/proc/loadavg'</li>
%% <li>`kernel_entities' — `{Runnable, Total}' scheduling entities, from `/proc/loadavg'</li>
%% <li>`num_erlang_processes' — `erlang:system_info(process_count)'</li>
%% <li>`vm_schedulers_online' — `erlang:system_info(schedulers_online)'</li>
%% <li>`run_queue' — `erlang:statistics(total_run_queue_lengths_all)'</li>
%% <li>`vm_memory_total' — `erlang:memory(total)', bytes; where erts_alloc is off
%%     (`+Mea min', the lab's VMs: `erlang:memory/1' raises `notsup') the VM's resident
%%     set instead (`VmRSS' in `/proc/self/status'), bytes</li>
%% <li>`cpu_quota' — the CPU time the VM's own cgroup may use, in cores (cgroup v1
%%     `cpu.cfs_quota_us' / `cpu.cfs_period_us', or v2 `cpu.max'), from
%%     `/proc/self/cgroup'; `undefined' when unlimited. The lab's `cpu' node option sets it.</li>
%% <li>`cpu_quota_per_scheduler' — the CPU time one normal scheduler thread may use, in
%%     cores: the smaller of the quota of the cgroup of the thread `1_scheduler' (from
%%     `/proc/self/task/TID/cgroup') and `cpu_quota'; `undefined' when neither is limited.
%%     The lab's `cpu_per_scheduler' node option sets it (an emulated core's speed).</li>
%% </ul>
%% Sampled (a moving average the attribute server keeps):
%% <ul>
%% <li>`scheduler_utilisation' — the fraction (0.0–1.0) of scheduler time spent working,
%%     measured over 50 ms once a second, averaged over the last 10 samples.</li>
%% </ul>
%% Where `/proc' is missing, unreadable or in an unexpected format the value is
%% `undefined'; nothing here raises. Every function takes the `/proc' root as an
%% argument so that tests can point it elsewhere.
-module(terrain_attr_builtin).

%% API
-export([definitions/0,
         definitions/1]).

%% Internal exports (the functions named by the built-in definitions)
-export([cpu_speed/1,
         meminfo/2,
         loadavg/2,
         kernel_entities/1,
         system_info/1,
         run_queue/0,
         vm_memory_total/1,
         scheduler_utilisation/0,
         cpu_quota/2,
         cpu_quota_per_scheduler/2]).

%% exports_not_used: Named as {M, F, A} by the built-in attribute definitions (called through the
%% attribute server and its evaluators); definitions/1 is the entry of the unit
%% tests, which read a fake /proc.
-ignore_xref([{cpu_speed, 1}, {definitions, 1}, {kernel_entities, 1}, {loadavg, 2}, {meminfo, 2},
              {run_queue, 0}, {scheduler_utilisation, 0}, {system_info, 1}, {vm_memory_total, 1}, {cpu_quota, 2},
              {cpu_quota_per_scheduler, 2}]).

-define(UTILISATION_WINDOW_MS, 50).

%% @doc The built-in definitions, reading `/proc'.
-spec definitions() -> [terrain_attr_config:entry()].
definitions() ->
    definitions("/proc").

%% @doc The built-in definitions, reading the given `/proc' root.
-spec definitions(file:filename()) -> [terrain_attr_config:entry()].
definitions(Proc) ->
    Static = [{os_type, os:type()},
              {os_version, os:version()},
              {otp_release, erlang:system_info(otp_release)},
              {vm_num_processors, case erlang:system_info(logical_processors_available) of
                                      N when is_integer(N) -> N;
                                      unknown -> undefined
                                  end},
              {mem_total, meminfo(Proc, "MemTotal")},
              {cpu_model_name, cpuinfo(Proc, "model name", fun(V) -> V end)},
              {hostname, element(2, inet:gethostname())}],
    Dynamic = [{cpu_speed, {?MODULE, cpu_speed, [Proc]}},
               {mem_free, {?MODULE, meminfo, [Proc, "MemFree"]}},
               {loadavg1, {?MODULE, loadavg, [Proc, 1]}},
               {loadavg5, {?MODULE, loadavg, [Proc, 5]}},
               {loadavg15, {?MODULE, loadavg, [Proc, 15]}},
               {kernel_entities, {?MODULE, kernel_entities, [Proc]}},
               {num_erlang_processes, {?MODULE, system_info, [process_count]}},
               {vm_schedulers_online, {?MODULE, system_info, [schedulers_online]}},
               {run_queue, {?MODULE, run_queue, []}},
               {vm_memory_total, {?MODULE, vm_memory_total, [Proc]}},
               {cpu_quota, {?MODULE, cpu_quota, [Proc, "/sys/fs/cgroup"]}},
               {cpu_quota_per_scheduler, {?MODULE, cpu_quota_per_scheduler, [Proc, "/sys/fs/cgroup"]}}],
    Sampled = [{scheduler_utilisation,
                {sampled, {?MODULE, scheduler_utilisation, []},
                 #{interval => 1000, window => 10, timeout => 500}}}],
    [{Name, {static, V}} || {Name, V} <- Static]
        ++ [{Name, {builtin, MFA}} || {Name, MFA} <- Dynamic]
        ++ Sampled.

%%--------------------------------------------------------------------
%% Internal exports

%% @doc The first CPU's clock in MHz, from `cpuinfo'.
-spec cpu_speed(file:filename()) -> float() | undefined.
cpu_speed(Proc) ->
    cpuinfo(Proc, "cpu MHz", fun to_number/1).

%% @doc A field of `meminfo' in kB.
-spec meminfo(file:filename(), string()) -> non_neg_integer() | undefined.
meminfo(Proc, Field) ->
    kb_field(Proc, "meminfo", Field).

%% A `Field: N kB' line of a /proc file (meminfo, self/status): N.
kb_field(Proc, File, Field) ->
    case read_lines(Proc, File) of
        undefined ->
            undefined;
        Lines ->
            first([case string:split(L, ":") of
                       [Field, Rest] ->
                           case string:lexemes(Rest, " \t") of
                               [Number | _] -> to_integer(Number);
                               [] -> undefined
                           end;
                       _ -> undefined
                   end || L <- Lines])
    end.

%% @doc A load average (1, 5 or 15 minutes) from `loadavg'.
-spec loadavg(file:filename(), 1 | 5 | 15) -> float() | undefined.
loadavg(Proc, Minutes) ->
    case loadavg_fields(Proc) of
        [L1, L5, L15 | _] ->
            to_number(case Minutes of 1 -> L1; 5 -> L5; 15 -> L15 end);
        _ ->
            undefined
    end.

%% @doc `{Runnable, Total}' kernel scheduling entities, from `loadavg'.
-spec kernel_entities(file:filename()) -> {non_neg_integer(), non_neg_integer()} | undefined.
kernel_entities(Proc) ->
    case loadavg_fields(Proc) of
        [_, _, _, Entities | _] ->
            case string:split(Entities, "/") of
                [R, E] ->
                    case {to_integer(R), to_integer(E)} of
                        {Ri, Ei} when is_integer(Ri), is_integer(Ei) -> {Ri, Ei};
                        _ -> undefined
                    end;
                _ -> undefined
            end;
        _ ->
            undefined
    end.

%% @doc `erlang:system_info/1' for the items the built-ins use.
-spec system_info(process_count | schedulers_online) -> non_neg_integer().
system_info(process_count) -> erlang:system_info(process_count);
system_info(schedulers_online) -> erlang:system_info(schedulers_online).

%% @doc The total length of the run queues.
-spec run_queue() -> non_neg_integer().
run_queue() ->
    erlang:statistics(total_run_queue_lengths_all).

%% @doc Bytes allocated by the emulator; on a VM without erts_alloc (`+Mea min', where
%% `erlang:memory/1' raises `notsup') the VM's resident set, `VmRSS' of `self/status'.
-spec vm_memory_total(file:filename()) -> non_neg_integer() | undefined.
vm_memory_total(Proc) ->
    try erlang:memory(total)
    catch error:notsup ->
            case kb_field(Proc, "self/status", "VmRSS") of
                undefined -> undefined;
                Kb -> Kb * 1024
            end
    end.

%% @doc The fraction of scheduler time spent working over the next 50 ms (one sample
%% of the `scheduler_utilisation' moving average). Scheduler wall-time accounting is
%% switched on by this (short-lived) process only and so switches off when it exits.
-spec scheduler_utilisation() -> float() | undefined.
scheduler_utilisation() ->
    _ = erlang:system_flag(scheduler_wall_time, true),
    First = erlang:statistics(scheduler_wall_time),
    receive after ?UTILISATION_WINDOW_MS -> ok end,
    Second = erlang:statistics(scheduler_wall_time),
    case {First, Second} of
        {L1, L2} when is_list(L1), is_list(L2) ->
            {Active, Total} =
                lists:foldl(fun({{I, A1, T1}, {I, A2, T2}}, {A, T}) -> {A + A2 - A1, T + T2 - T1} end,
                            {0, 0}, lists:zip(lists:sort(L1), lists:sort(L2))),
            case Total of
                0 -> 0.0;
                _ -> Active / Total
            end;
        _ ->
            undefined
    end.

%% @doc The CPU quota of this VM's own cgroup in cores, `undefined' when unlimited or
%% unknown. `Proc' is the `/proc' root, `Cgroup' where the cgroup hierarchies are
%% mounted (v1: `Cgroup/cpu'; v2: `Cgroup' or `Cgroup/unified').
-spec cpu_quota(file:filename(), file:filename()) -> float() | undefined.
cpu_quota(Proc, Cgroup) ->
    group_quota(read_lines(Proc, "self/cgroup"), Cgroup).

%% @doc The CPU time one normal scheduler thread of this VM may use, in cores: the
%% smaller of the quota of the cgroup of the thread named `1_scheduler' and the VM's
%% own ({@link cpu_quota/2}); `undefined' when neither is limited or known. `Proc' and
%% `Cgroup' as for {@link cpu_quota/2}.
-spec cpu_quota_per_scheduler(file:filename(), file:filename()) -> float() | undefined.
cpu_quota_per_scheduler(Proc, Cgroup) ->
    Thread = case scheduler_thread(Proc) of
                 undefined -> undefined;
                 Tid -> group_quota(read_lines(Proc, filename:join(["self", "task", Tid, "cgroup"])), Cgroup)
             end,
    case {cpu_quota(Proc, Cgroup), Thread} of
        {undefined, T} -> T;
        {V, undefined} -> V;
        {V, T} -> min(V, T)
    end.

%% The thread id of the first normal scheduler (its name in `comm' is `1_scheduler').
scheduler_thread(Proc) ->
    Tasks = filename:join([Proc, "self", "task"]),
    case file:list_dir(Tasks) of
        {ok, Tids} ->
            first([case read_lines(filename:join(Tasks, Tid), "comm") of
                       ["1_scheduler" | _] -> Tid;
                       _ -> undefined
                   end || Tid <- lists:sort(Tids)]);
        {error, _} ->
            undefined
    end.

%% The CPU quota of the cgroup named in the lines of a `/proc/.../cgroup' file.
group_quota(undefined, _Cgroup) ->
    undefined;
group_quota(Lines, Cgroup) ->
    Entries = [string:split(L, ":", all) || L <- Lines],
    V1 = [Path || [_, Controllers, Path] <- Entries, lists:member("cpu", string:lexemes(Controllers, ","))],
    V2 = [Path || ["0", "", Path] <- Entries],
    case {V1, V2} of
        {[Path | _], _} ->
            first([quota_v1(filename:join([Cgroup, Mount | relative(Path)]))
                   || Mount <- ["cpu", "cpu,cpuacct"]]);
        {[], [Path | _]} ->
            first([quota_v2(filename:join([Cgroup | Unified ++ relative(Path)]))
                   || Unified <- [[], ["unified"]]]);
        {[], []} ->
            undefined
    end.

relative(Path) ->
    [P || P <- string:lexemes(Path, "/")].

quota_v1(Dir) ->
    case {read_lines(Dir, "cpu.cfs_quota_us"), read_lines(Dir, "cpu.cfs_period_us")} of
        {[Q | _], [P | _]} -> cores(to_integer(Q), to_integer(P));
        _ -> undefined
    end.

quota_v2(Dir) ->
    case read_lines(Dir, "cpu.max") of
        [Line | _] ->
            case string:lexemes(Line, " ") of
                [Q, P] -> cores(to_integer(Q), to_integer(P));
                _ -> undefined
            end;
        _ -> undefined
    end.

cores(Q, P) when is_integer(Q), is_integer(P), Q > 0, P > 0 -> Q / P;
cores(_, _) -> undefined.

%%--------------------------------------------------------------------
%% Reading /proc

cpuinfo(Proc, Field, Convert) ->
    case read_lines(Proc, "cpuinfo") of
        undefined ->
            undefined;
        Lines ->
            first([case string:split(L, ":") of
                       [Key, Value] ->
                           case string:trim(Key) of
                               Field -> Convert(string:trim(Value));
                               _ -> undefined
                           end;
                       _ -> undefined
                   end || L <- Lines])
    end.

loadavg_fields(Proc) ->
    case read_lines(Proc, "loadavg") of
        [Line | _] -> string:lexemes(Line, " \t");
        _ -> undefined
    end.

%% Files in /proc report size 0, so read in chunks; raw mode keeps the file server
%% out of the way. Any failure is `undefined'.
read_lines(Proc, Name) ->
    case file:open(filename:join(Proc, Name), [read, raw, binary]) of
        {ok, Fd} ->
            try read_all(Fd, []) of
                undefined -> undefined;
                Bin -> string:split(unicode:characters_to_list(Bin, latin1), "\n", all)
            after
                ok = file:close(Fd)
            end;
        {error, _} ->
            undefined
    end.

read_all(Fd, Acc) ->
    case file:read(Fd, 65536) of
        {ok, Data} -> read_all(Fd, [Acc, Data]);
        eof -> iolist_to_binary(Acc);
        {error, _} -> undefined
    end.

first(Values) ->
    case [V || V <- Values, V =/= undefined] of
        [V | _] -> V;
        [] -> undefined
    end.

to_number(S) ->
    try list_to_float(S)
    catch error:badarg -> to_integer(S)
    end.

to_integer(S) ->
    try list_to_integer(S)
    catch error:badarg -> undefined
    end.
