%% @private
%% @doc CPU emulation for lab nodes: a node with the spec option `cpu => Cores' runs
%% its VM in a cgroup of its own whose CPU bandwidth is `Cores' × the period; a node
%% with `cpu_per_scheduler => C' also has each of its normal scheduler threads in a
%% group of its own capped at `C' cores — K schedulers emulate K cores of speed C.
%%
%% cgroup v1 (the `cpu' controller mounted at `/sys/fs/cgroup/cpu'): the group
%% `/sys/fs/cgroup/cpu/terrain/<cluster>/<node>' gets `cpu.cfs_quota_us' = Cores ×
%% `cpu.cfs_period_us'. cgroup v2 (the unified hierarchy at `/sys/fs/cgroup' with the
%% `cpu' controller): the group `/sys/fs/cgroup/terrain/<cluster>/<node>' gets
%% `cpu.max' = "Quota Period". The VM's OS process is moved into the group (all its
%% threads) right after it boots; the group is removed when the node stops, also
%% after a failed start, and so are the `terrain/<cluster>' and `terrain' groups
%% above it once they are empty. Should this VM die before it removes them (SIGINT,
%% SIGKILL), a cleanup sentinel removes them once their VMs have exited
%% (terrain_lab_cgroup_sentinel).
%%
%% A quota alone limits CPU time, not parallelism: a VM at 0.5 cores may still run two
%% schedulers at once, each for a quarter of the time, and one busy process gets all
%% 0.5 cores. It emulates capacity, not cores. With `cpu_per_scheduler' (cgroup v1
%% only: it moves single threads, through the group's `tasks' file) the threads named
%% `N_scheduler' in `/proc/PID/task/*/comm' go into child groups `scheduler<N>' of the
%% node's group, each with quota C × the period; the VM's quota is then `cpu' when the
%% spec gives it, else C × the schedulers found (dirty schedulers and the VM's other
%% threads stay in the node's group, under that total). One busy process then runs at
%% speed C whatever the VM, and only K runnable processes use a K-scheduler VM's K × C.
%% These groups use a 20 ms period (longer when C × 20 ms would be below the kernel's
%% minimum quota of 1 ms), so that a slow core runs in short slices, not in bursts.
%%
%% Where no CPU controller is mounted (a container, a chroot) or this VM is not root,
%% {@link usable/1} says so in a sentence before anything starts. The cgroup mount is
%% `/sys/fs/cgroup' unless the application env `terrain_lab' `cgroup_mount' names
%% another directory (tests point it at one without a controller).
-module(terrain_lab_cgroup).

%% API
-export([check/1,
         usable/1,
         attach/4,
         remove/2,
         format_error/1]).

-export_type([limits/0, quotas/0, error_reason/0]).

%% What a node spec asks for (at least one key).
-type limits() :: #{cpu => number(),                  % the VM's quota in cores
                    cpu_per_scheduler => number()}.   % each scheduler thread's quota in cores

%% What the kernel was given, read back from the groups' files.
-type quotas() :: #{cpu_quota := float(),                 % the VM's group, cores
                    cpu_quota_per_scheduler => float(),   % each scheduler thread's group, cores
                    capped_schedulers => pos_integer()}.  % how many scheduler threads were capped

-type error_reason() :: {cgroup, {not_writable, string()} | {per_scheduler_needs_v1, string()}
                                 | {attach, string(), term()} | {no_scheduler_threads, string()}}.

-define(MOUNT, "/sys/fs/cgroup").
-define(TOP, "terrain").
-define(DEFAULT_PERIOD_US, 100000).
-define(MIN_QUOTA_US, 1000).
-define(SCHEDULER_PERIOD_US, 20000).

%%--------------------------------------------------------------------
%% API

%% @doc `ok' when the spec's nodes need no CPU limit or the CPU cgroups they need can be
%% created here; else an error that says why.
-spec check(terrain_lab_spec:spec()) -> ok | {error, error_reason()}.
check(Spec) ->
    Limited = [N || N <- terrain_lab_spec:nodes(Spec), limits(N) =/= #{}],
    case {Limited, [N || #{cpu_per_scheduler := _} = N <- Limited]} of
        {[], _} -> ok;
        {_, []} -> usable(quota);
        {_, _} -> usable(per_scheduler)
    end.

%% @doc `ok' when CPU cgroups of the kind given can be created here: `quota' (a quota
%% for a whole VM, `cpu') or `per_scheduler' (one group per scheduler thread,
%% `cpu_per_scheduler', cgroup v1 only); else an error that says why.
-spec usable(quota | per_scheduler) -> ok | {error, {cgroup, {not_writable | per_scheduler_needs_v1, string()}}}.
usable(Kind) ->
    case root() of
        {error, Why} -> {error, {cgroup, {not_writable, Why}}};
        {ok, v2, _} when Kind =:= per_scheduler ->
            {error, {cgroup, {per_scheduler_needs_v1, "only cgroup v2 is mounted here"}}};
        {ok, _, _} -> ok
    end.

%% @doc Limits the VM with OS pid `OsPid' as `Limits' says, in the group of node
%% `Short' (its full short name) of cluster `Cluster', and returns the quotas now in
%% force.
-spec attach(atom(), string(), string(), limits()) -> {ok, quotas()} | {error, error_reason()}.
attach(Cluster, Short, OsPid, Limits) when map_size(Limits) > 0 ->
    case root() of
        {ok, v2, _} when is_map_key(cpu_per_scheduler, Limits) ->
            {error, {cgroup, {per_scheduler_needs_v1, "only cgroup v2 is mounted here"}}};
        {ok, Version, Root} ->
            Dir = filename:join([Root, ?TOP, atom_to_list(Cluster), Short]),
            case maps:find(cpu_per_scheduler, Limits) of
                error ->
                    SetQuota = fun(D) -> set_quota(Version, D, maps:get(cpu, Limits)) end,
                    attach_vm(Version, Root, Dir, OsPid, SetQuota);
                {ok, PerScheduler} ->
                    attach_schedulers(Root, Dir, OsPid, maps:get(cpu, Limits, undefined), PerScheduler)
            end;
        {error, Why} ->
            {error, {cgroup, {not_writable, Why}}}
    end.

%% @doc Removes the groups of the nodes `Shorts' of cluster `Cluster' (those that
%% exist, with their scheduler groups), then the cluster's and terrain's groups when
%% they are empty. Threads still in a group (its VM has not exited) are moved back to
%% the root group first.
-spec remove(atom(), [string()]) -> ok.
remove(Cluster, Shorts) ->
    case root() of
        {ok, _, Root} ->
            ClusterDir = filename:join([Root, ?TOP, atom_to_list(Cluster)]),
            lists:foreach(fun(Short) -> remove_group(Root, filename:join(ClusterDir, Short)) end, Shorts),
            _ = file:del_dir(ClusterDir),
            _ = file:del_dir(filename:join(Root, ?TOP)),
            terrain_lab_cgroup_sentinel:forget_gone();
        {error, _} ->
            ok
    end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({cgroup, {not_writable, Why}}) ->
    ["the spec gives nodes a 'cpu' or 'cpu_per_scheduler' quota, but no CPU cgroup can be created here (", Why,
     "); run as root with the cgroup v1 'cpu' controller at ", v1_root(), " or cgroup v2 with the 'cpu' "
     "controller at ", mount(), ", or remove the 'cpu' options"];
format_error({cgroup, {per_scheduler_needs_v1, Why}}) ->
    ["the spec gives nodes 'cpu_per_scheduler', which puts single scheduler threads into groups of their own and "
     "needs the cgroup v1 'cpu' controller at ", v1_root(), " (", Why, "); use 'cpu' alone (a quota for the whole VM)"];
format_error({cgroup, {no_scheduler_threads, OsPid}}) ->
    io_lib:format("cannot cap the schedulers of the VM with OS pid ~ts: no thread named N_scheduler in /proc/~ts/task",
                  [OsPid, OsPid]);
format_error({cgroup, {attach, Dir, Why}}) ->
    io_lib:format("cannot limit the node's CPU in cgroup ~ts: ~ts", [Dir, file:format_error(Why)]).

%%--------------------------------------------------------------------
%% Internal functions

limits(NodeSpec) ->
    maps:with([cpu, cpu_per_scheduler], NodeSpec).

%% The VM's group, its quota set by SetQuota; the whole process in it.
attach_vm(Version, Root, Dir, OsPid, SetQuota) ->
    try
        ok = make_groups(Version, Root, Dir),
        ok = SetQuota(Dir),
        ok = write(filename:join(Dir, "cgroup.procs"), OsPid),
        {ok, #{cpu_quota => read_quota(Version, Dir)}}
    catch
        error:{badmatch, {error, Why}} -> {error, {cgroup, {attach, Dir, Why}}}
    end.

%% cgroup v1: the VM's group (quota Cpu, or PerScheduler × the schedulers), the whole
%% process in it, then each normal scheduler thread in a child group of quota
%% PerScheduler. A child's quota may not exceed its parent's (the kernel refuses it),
%% which the spec's check (cpu >= cpu_per_scheduler) guarantees.
attach_schedulers(Root, Dir, OsPid, Cpu, PerScheduler) ->
    case scheduler_threads(OsPid) of
        [] ->
            {error, {cgroup, {no_scheduler_threads, OsPid}}};
        Threads ->
            Total = case Cpu of undefined -> PerScheduler * length(Threads); _ -> Cpu end,
            Period = scheduler_period(PerScheduler),
            case attach_vm(v1, Root, Dir, OsPid, fun(D) -> set_quota(v1, D, Total, Period) end) of
                {ok, Quotas} ->
                    try
                        Groups = [begin
                                      Group = filename:join(Dir, "scheduler" ++ integer_to_list(N)),
                                      ok = make_groups(v1, Root, Group),
                                      ok = set_quota(v1, Group, PerScheduler, Period),
                                      ok = write(filename:join(Group, "tasks"), Tid),
                                      Group
                                  end || {N, Tid} <- Threads],
                        {ok, Quotas#{cpu_quota_per_scheduler => read_quota(v1, hd(Groups)),
                                     capped_schedulers => length(Groups)}}
                    catch
                        error:{badmatch, {error, Why}} -> {error, {cgroup, {attach, Dir, Why}}}
                    end;
                {error, _} = Error ->
                    Error
            end
    end.

%% The normal scheduler threads of a VM as {N, ThreadId}: the BEAM names them
%% `N_scheduler' (dirty schedulers are `N_dirty_cpu_sch' and `N_dirty_io_sche').
scheduler_threads(OsPid) ->
    Tasks = filename:join(["/proc", OsPid, "task"]),
    case file:list_dir(Tasks) of
        {ok, Tids} ->
            lists:sort([{binary_to_integer(N), Tid}
                        || Tid <- Tids,
                           {ok, Comm} <- [file:read_file(filename:join([Tasks, Tid, "comm"]))],
                           {match, [N]} <- [re:run(Comm, "^([0-9]+)_scheduler\n?$",
                                                   [{capture, all_but_first, binary}])]]);
        {error, _} ->
            []
    end.

%% The writable CPU hierarchy: v1 first (its quota file is in the mount's root), else v2.
root() ->
    V1 = filelib:is_regular(filename:join(v1_root(), "cpu.cfs_quota_us")),
    V2 = case file:read_file(filename:join(mount(), "cgroup.controllers")) of
             {ok, Controllers} -> lists:member(<<"cpu">>, string:lexemes(Controllers, " \n"));
             {error, _} -> false
         end,
    if
        V1 -> writable(v1, v1_root());
        V2 -> writable(v2, mount());
        true -> {error, lists:flatten(io_lib:format("neither a cgroup v1 'cpu' hierarchy nor cgroup v2 with the "
                                                    "'cpu' controller is mounted at ~ts", [mount()]))}
    end.

%% Where the cgroup hierarchies are mounted (v2's root, v1's `cpu' below it).
mount() ->
    application:get_env(terrain_lab, cgroup_mount, ?MOUNT).

v1_root() ->
    filename:join(mount(), "cpu").

writable(Version, Root) ->
    case file:read_file_info(Root) of
        {ok, _} ->
            case is_root_user() of
                true -> {ok, Version, Root};
                false -> {error, "creating cgroups needs root, and this VM does not run as root"}
            end;
        {error, Why} ->
            {error, lists:flatten(io_lib:format("~ts: ~ts", [Root, file:format_error(Why)]))}
    end.

is_root_user() ->
    terrain_lab_os:run("id", ["-u"], #{timeout => 10000}) =:= {ok, 0, <<"0\n">>}.

%% Every group is handed to the cleanup sentinel before it is made, so that it goes
%% however this VM ends (terrain_lab_cgroup_sentinel).
make_groups(Version, Root, Dir) ->
    Parts = filename:split(lists:nthtail(length(Root) + 1, Dir)),
    ok = terrain_lab_cgroup_sentinel:track(lists:droplast(lists:foldl(fun(Part, [Parent | _] = Acc) ->
                                                                   [filename:join(Parent, Part) | Acc]
                                                           end, [Root], Parts))),
    {_, Result} =
        lists:foldl(fun(Part, {Parent, ok}) ->
                            _ = Version =:= v2 andalso write(filename:join(Parent, "cgroup.subtree_control"), "+cpu"),
                            Group = filename:join(Parent, Part),
                            case file:make_dir(Group) of
                                ok -> {Group, ok};
                                {error, eexist} -> {Group, ok};
                                {error, _} = Error -> {Group, Error}
                            end;
                       (_, Acc) -> Acc
                    end, {Root, ok}, Parts),
    Result.

set_quota(v1, Dir, Cores) ->
    Period = period(filename:join(Dir, "cpu.cfs_period_us")),
    write(filename:join(Dir, "cpu.cfs_quota_us"), integer_to_list(max(?MIN_QUOTA_US, round(Cores * Period))));
set_quota(v2, Dir, Cores) ->
    write(filename:join(Dir, "cpu.max"),
          io_lib:format("~b ~b", [max(?MIN_QUOTA_US, round(Cores * ?DEFAULT_PERIOD_US)), ?DEFAULT_PERIOD_US])).

%% cgroup v1 with a period of our choice (written first: a quota is checked against it).
set_quota(v1, Dir, Cores, Period) ->
    ok = write(filename:join(Dir, "cpu.cfs_period_us"), integer_to_list(Period)),
    write(filename:join(Dir, "cpu.cfs_quota_us"), integer_to_list(max(?MIN_QUOTA_US, round(Cores * Period)))).

%% The period of the groups of a VM with capped schedulers: short, so that a slow
%% emulated core runs in small slices (C × period of CPU, then a pause of the rest)
%% rather than in bursts of a default 100 ms period, but long enough for a quota of at
%% least the kernel's minimum of 1 ms.
scheduler_period(PerScheduler) ->
    max(?SCHEDULER_PERIOD_US, ceil(?MIN_QUOTA_US / PerScheduler)).

period(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            try binary_to_integer(string:trim(Bin)) catch error:badarg -> ?DEFAULT_PERIOD_US end;
        {error, _} ->
            ?DEFAULT_PERIOD_US
    end.

read_quota(v1, Dir) ->
    Read = fun(Name) -> file:read_file(filename:join(Dir, Name)) end,
    case {Read("cpu.cfs_quota_us"), Read("cpu.cfs_period_us")} of
        {{ok, Q}, {ok, P}} -> cores(string:trim(Q), string:trim(P));
        _ -> undefined
    end;
read_quota(v2, Dir) ->
    case file:read_file(filename:join(Dir, "cpu.max")) of
        {ok, Max} ->
            case string:lexemes(Max, " \n") of
                [Q, P] -> cores(Q, P);
                _ -> undefined
            end;
        {error, _} -> undefined
    end.

cores(Quota, Period) ->
    try {binary_to_integer(Quota), binary_to_integer(Period)} of
        {Q, P} when Q > 0, P > 0 -> Q / P;
        _ -> undefined
    catch
        error:badarg -> undefined
    end.

%% A group that still holds threads cannot be removed, nor one with child groups:
%% remove the children first (the scheduler groups), move the threads left to the root
%% group, then remove the group.
remove_group(Root, Dir) ->
    case file:list_dir(Dir) of
        {ok, Entries} ->
            lists:foreach(fun(Child) -> remove_group(Root, Child) end,
                          [filename:join(Dir, E) || E <- lists:sort(Entries), filelib:is_dir(filename:join(Dir, E))]),
            move_to_root(Root, Dir),
            case file:del_dir(Dir) of
                ok -> ok;
                {error, Why} -> logger:warning("terrain_lab: cannot remove cgroup ~ts: ~0p", [Dir, Why])
            end;
        {error, _} ->
            ok
    end.

%% v1 lists every thread in `tasks'; v2 (no thread groups here) the processes in
%% `cgroup.procs'.
move_to_root(Root, Dir) ->
    File = case filelib:is_regular(filename:join(Dir, "tasks")) of
               true -> "tasks";
               false -> "cgroup.procs"
           end,
    case file:read_file(filename:join(Dir, File)) of
        {ok, Ids} -> lists:foreach(fun(Id) -> _ = write(filename:join(Root, File), Id) end, string:lexemes(Ids, "\n"));
        {error, _} -> ok
    end.

write(File, Data) ->
    file:write_file(File, Data).
