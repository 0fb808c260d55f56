%% @private
%% @doc CPU emulation for lab nodes: a node with the spec option `cpu => Cores' runs
%% its VM in a cgroup of its own whose CPU bandwidth is `Cores' × the period.
%%
%% cgroup v1 (the `cpu' controller mounted at `/sys/fs/cgroup/cpu'): the group
%% `/sys/fs/cgroup/cpu/terrain/<cluster>/<node>' gets `cpu.cfs_quota_us' = Cores ×
%% `cpu.cfs_period_us'. cgroup v2 (the unified hierarchy at `/sys/fs/cgroup' with the
%% `cpu' controller): the group `/sys/fs/cgroup/terrain/<cluster>/<node>' gets
%% `cpu.max' = "Quota Period". The VM's OS process is moved into the group (all its
%% threads) right after it boots; the group is removed when the node stops, also
%% after a failed start, and so are the `terrain/<cluster>' and `terrain' groups
%% above it once they are empty.
%%
%% The quota limits CPU time, not parallelism: a VM at 0.5 cores may still run two
%% schedulers at once, each for a quarter of the time. It emulates capacity, not cores.
-module(terrain_lab_cgroup).

%% API
-export([check/1,
         attach/4,
         remove/2,
         quota/2,
         format_error/1]).

-export_type([error_reason/0]).

-type error_reason() :: {cgroup, {not_writable, string()} | {attach, string(), term()}}.

-define(V1_ROOT, "/sys/fs/cgroup/cpu").
-define(V2_ROOT, "/sys/fs/cgroup").
-define(TOP, "terrain").
-define(DEFAULT_PERIOD_US, 100000).

%%--------------------------------------------------------------------
%% API

%% @doc `ok' when the spec's nodes need no CPU limit or a CPU cgroup can be created
%% here; else an error that says why.
-spec check(terrain_lab_spec:spec()) -> ok | {error, error_reason()}.
check(Spec) ->
    case [N || #{cpu := _} = N <- terrain_lab_spec:nodes(Spec)] of
        [] -> ok;
        [_ | _] ->
            case root() of
                {ok, _, _} -> ok;
                {error, Why} -> {error, {cgroup, {not_writable, Why}}}
            end
    end.

%% @doc Limits the VM with OS pid `OsPid' to `Cores' of CPU time in the group of node
%% `Short' (its full short name) of cluster `Cluster'.
-spec attach(atom(), string(), string(), number()) -> ok | {error, error_reason()}.
attach(Cluster, Short, OsPid, Cores) when is_number(Cores), Cores > 0 ->
    case root() of
        {ok, Version, Root} ->
            Dir = filename:join([Root, ?TOP, atom_to_list(Cluster), Short]),
            try
                ok = make_groups(Version, Root, Dir),
                ok = set_quota(Version, Dir, Cores),
                ok = write(filename:join(Dir, "cgroup.procs"), OsPid)
            catch
                error:{badmatch, {error, Why}} -> {error, {cgroup, {attach, Dir, Why}}}
            end;
        {error, Why} ->
            {error, {cgroup, {not_writable, Why}}}
    end.

%% @doc Removes the groups of the nodes `Shorts' of cluster `Cluster' (those that
%% exist), then the cluster's and terrain's groups when they are empty. A process still
%% in a group (its VM has not exited) is moved back to the root group first.
-spec remove(atom(), [string()]) -> ok.
remove(Cluster, Shorts) ->
    case root() of
        {ok, _, Root} ->
            ClusterDir = filename:join([Root, ?TOP, atom_to_list(Cluster)]),
            lists:foreach(fun(Short) -> remove_group(Root, filename:join(ClusterDir, Short)) end, Shorts),
            _ = file:del_dir(ClusterDir),
            _ = file:del_dir(filename:join(Root, ?TOP)),
            ok;
        {error, _} ->
            ok
    end.

%% @doc The CPU quota in cores of node `Short' of cluster `Cluster', `undefined' when
%% it has no group or no limit.
-spec quota(atom(), string()) -> float() | undefined.
quota(Cluster, Short) ->
    case root() of
        {ok, Version, Root} ->
            read_quota(Version, filename:join([Root, ?TOP, atom_to_list(Cluster), Short]));
        {error, _} ->
            undefined
    end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({cgroup, {not_writable, Why}}) ->
    ["the spec gives nodes a 'cpu' quota, but no CPU cgroup can be created here (", Why,
     "); run as root with the cgroup v1 'cpu' controller at " ?V1_ROOT " or cgroup v2 with the 'cpu' "
     "controller at " ?V2_ROOT ", or remove the 'cpu' options"];
format_error({cgroup, {attach, Dir, Why}}) ->
    io_lib:format("cannot limit the node's CPU in cgroup ~ts: ~ts", [Dir, file:format_error(Why)]).

%%--------------------------------------------------------------------
%% Internal functions

%% The writable CPU hierarchy: v1 first (its quota file is in the mount's root), else v2.
root() ->
    V1 = filelib:is_regular(filename:join(?V1_ROOT, "cpu.cfs_quota_us")),
    V2 = case file:read_file(filename:join(?V2_ROOT, "cgroup.controllers")) of
             {ok, Controllers} -> lists:member(<<"cpu">>, string:lexemes(Controllers, " \n"));
             {error, _} -> false
         end,
    if
        V1 -> writable(v1, ?V1_ROOT);
        V2 -> writable(v2, ?V2_ROOT);
        true -> {error, "neither a cgroup v1 'cpu' hierarchy nor cgroup v2 with the 'cpu' controller is mounted"}
    end.

writable(Version, Root) ->
    case file:read_file_info(Root) of
        {ok, _} ->
            case is_root_user() of
                true -> {ok, Version, Root};
                false -> {error, "creating cgroups needs root, and this VM does not run as root"}
            end;
        {error, Why} ->
            {error, io_lib:format("~ts: ~ts", [Root, file:format_error(Why)])}
    end.

is_root_user() ->
    string:trim(os:cmd("id -u")) =:= "0".

make_groups(Version, Root, Dir) ->
    Parts = filename:split(lists:nthtail(length(Root) + 1, Dir)),
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
    write(filename:join(Dir, "cpu.cfs_quota_us"), integer_to_list(max(1000, round(Cores * Period))));
set_quota(v2, Dir, Cores) ->
    write(filename:join(Dir, "cpu.max"),
          io_lib:format("~b ~b", [max(1000, round(Cores * ?DEFAULT_PERIOD_US)), ?DEFAULT_PERIOD_US])).

period(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            try binary_to_integer(string:trim(Bin)) catch error:badarg -> ?DEFAULT_PERIOD_US end;
        {error, _} ->
            ?DEFAULT_PERIOD_US
    end.

read_quota(v1, Dir) ->
    case {file:read_file(filename:join(Dir, "cpu.cfs_quota_us")), file:read_file(filename:join(Dir, "cpu.cfs_period_us"))} of
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

%% A group that still holds processes cannot be removed: move them to the root first.
remove_group(Root, Dir) ->
    case file:read_file(filename:join(Dir, "cgroup.procs")) of
        {ok, Procs} ->
            lists:foreach(fun(P) -> _ = write(filename:join(Root, "cgroup.procs"), P) end,
                          string:lexemes(Procs, "\n")),
            case file:del_dir(Dir) of
                ok -> ok;
                {error, Why} -> logger:warning("terrain_lab: cannot remove cgroup ~ts: ~0p", [Dir, Why])
            end;
        {error, _} ->
            ok
    end.

write(File, Data) ->
    file:write_file(File, Data).
