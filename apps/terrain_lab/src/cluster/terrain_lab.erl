%% @doc terrain lab: start clusters from a cluster spec and run tools on them.
%%
%% This is the one public module of `terrain_lab'; the `terrain_lab_*' modules are
%% internal. A cluster spec (docs/DESIGN.md, examples/demo.cluster) describes groups nested
%% to any depth with link options, and nodes with `schedulers', `attrs' and `args'.
%%
%% ```
%% {ok, Spec} = terrain_lab:read_spec("examples/demo.cluster"),
%% {ok, Cluster} = terrain_lab:start_cluster(Spec, #{prefix => "demo_"}),
%% [#{node := N1} | _] = terrain_lab:cluster_nodes(Cluster),
%% pong = net_adm:ping(N1),
%% ok = terrain_lab:stop_cluster(Cluster).
%% '''
%% The cluster is linked to the caller: when the caller exits, or this VM dies, its
%% nodes halt too.
%%
%% When the spec has link options (`latency', `jitter', `bandwidth'), the cluster's
%% network is emulated (see `terrain_lab_netem'): a connection between two of its nodes
%% crosses the link of their lowest common group, and can be cut for fault tests:
%% ```
%% ok = terrain_lab:partition([N1], [N2]),   % N1 and N2 can no longer reach each other
%% ok = terrain_lab:heal().
%% '''
-module(terrain_lab).

%% API: clusters
-export([read_spec/1,
         start_cluster/2,
         cluster_nodes/1,
         stop_cluster/1,
         with_cluster/3]).

%% API: network emulation (partitions of a running emulated cluster)
-export([partition/2,
         heal/0,
         heal/1,
         isolate/1]).

%% API: errors
-export([format_error/1,
         format_exits/1,
         format_net_events/2]).

%% exports_not_used: The public API of the lab: called by users (docs/NETEM.md, README), not by the CLI.
-ignore_xref([{read_spec, 1}, {start_cluster, 2}, {cluster_nodes, 1}, {stop_cluster, 1}, {with_cluster, 3},
              {partition, 2}, {heal, 0}, {heal, 1}, {isolate, 1}, {format_error, 1}]).

-export_type([cluster_options/0]).

-type cluster_options() :: terrain_lab_cluster:options().

%% The most lines of lost connections an error quotes from the VMs' logs.
-define(NET_EVENTS, 6).

%% @doc Reads and validates a cluster spec file.
-spec read_spec(file:filename()) -> {ok, terrain_lab_spec:spec()} | {error, terrain_lab_spec:error_reason()}.
read_spec(File) ->
    terrain_lab_spec:read(File).

%% @doc Starts every node of a spec (a validated spec or a file name) in parallel,
%% each running the `terrain' application. Options are described in
%% `terrain_lab_cluster:options()'.
-spec start_cluster(terrain_lab_spec:spec() | file:filename(), cluster_options()) ->
          {ok, pid()} | {error, term()}.
start_cluster(#{nodes := _} = Spec, Options) ->
    terrain_lab_cluster:start_link(Spec, Options);
start_cluster(File, Options) ->
    case read_spec(File) of
        {ok, Spec} -> start_cluster(Spec, Options);
        {error, _} = Error -> Error
    end.

%% @doc The running nodes of a cluster with their spec name, group path, schedulers
%% and OS pid.
-spec cluster_nodes(pid()) -> [terrain_lab_cluster:node_info()].
cluster_nodes(Cluster) ->
    terrain_lab_cluster:nodes(Cluster).

%% @doc Stops every node of the cluster and waits until their VMs are gone.
-spec stop_cluster(pid()) -> ok.
stop_cluster(Cluster) ->
    terrain_lab_cluster:stop(Cluster).

%% @doc Starts the cluster of a spec (as {@link start_cluster/2}), runs `Fun' on its
%% running nodes and stops it, whatever `Fun' returns or raises. A cluster that does
%% not start is its error; `Fun' is not called. When `Fun' fails (`{error, Reason}')
%% after VMs of the cluster exited on their own, the error says which:
%% `{error, {vm_exits, Reason, Exited}}' (`terrain_lab_cluster:diagnose/1': each VM's
%% exit status, log and its last lines, with the option `log_dir'); when none exited,
%% the connections the VMs logged as lost and why (`{net_events, Reason, LogDir, Lines}':
%% a tick timeout, a proxy that failed, `terrain_lab_netem_server').
-spec with_cluster(terrain_lab_spec:spec() | file:filename(), cluster_options(),
                   fun(([terrain_lab_cluster:node_info()]) -> Result)) -> Result | {error, term()}.
with_cluster(Spec, Options, Fun) ->
    case start_cluster(Spec, Options) of
        {ok, Cluster} ->
            try Fun(cluster_nodes(Cluster)) of
                {error, Reason} = Error ->
                    case {terrain_lab_cluster:diagnose(Cluster), Options} of
                        {[], #{log_dir := Dir}} ->
                            %% no VM died: what the VMs logged about their connections
                            case terrain_lab_cluster:net_events(Dir, ?NET_EVENTS) of
                                [] -> Error;
                                Events -> {error, {net_events, Reason, Dir, Events}}
                            end;
                        {[], _} -> Error;
                        {Exited, _} -> {error, {vm_exits, Reason, Exited}}
                    end;
                Result ->
                    Result
            after stop_cluster(Cluster)
            end;
        {error, {Failed, Name, _} = Reason} when (Failed =:= boot_failed orelse Failed =:= setup_failed),
                                                 is_map_key(log_dir, Options) ->
            %% the VM was stopped: its log says how far it came
            Log = filename:join(maps:get(log_dir, Options), atom_to_list(Name) ++ ".log"),
            Vm = case terrain_lab_vm:log_tail(Log, 8) of
                     {ok, Tail, Status} -> #{status => Status, tail => Tail};
                     {error, _} -> #{}
                 end,
            Node = terrain_lab_dist:node_name(maps:get(prefix, Options, ""), Name),
            {error, {vm_exits, Reason, [Vm#{name => Name, node => Node, log => Log}]}};
        {error, _} = Error ->
            Error
    end.

%% @doc Cuts every connection between a node of `NodesA' and a node of `NodesB' of an
%% emulated cluster and refuses new ones until healed (deadline 5 s; see
%% `terrain_lab_netem:partition/3' for options).
-spec partition([node()], [node()]) -> ok | {error, terrain_lab_netem:error_reason()}.
partition(NodesA, NodesB) ->
    terrain_lab_netem:partition(NodesA, NodesB).

%% @doc Heals every partition on every emulated node this node is connected to.
-spec heal() -> ok | {error, terrain_lab_netem:error_reason()}.
heal() ->
    terrain_lab_netem:heal().

%% @doc Heals the partitions of `Nodes'.
-spec heal([node()]) -> ok | {error, terrain_lab_netem:error_reason()}.
heal(Nodes) ->
    terrain_lab_netem:heal(Nodes).

%% @doc Cuts `Node' from every other node of its emulated cluster.
-spec isolate(node()) -> ok | {error, terrain_lab_netem:error_reason()}.
isolate(Node) ->
    terrain_lab_netem:isolate(Node).

%% @doc A sentence for any error this module's API returns (clusters, specs, launching,
%% network emulation, files); falls back to {@link terrain:format_error/1} for errors of
%% the terrain library. The errors of the lab's tools above the clusters (experiments,
%% probes, timing tools) are formatted by the CLI's table, `terrain_lab_cli_errors'.
-spec format_error(term()) -> iolist().
format_error({spec, _, _, _} = Reason) ->
    terrain_lab_spec:format_error(Reason);
format_error({aco_instance, _} = Reason) ->
    terrain_workloads:aco_format_error(Reason);
format_error({aco_vertex_failed, _} = Reason) ->
    terrain_workloads:format_error(Reason);
format_error(aco_timeout) ->
    terrain_workloads:format_error(aco_timeout);
format_error({cgroup, _} = Reason) ->
    terrain_lab_cgroup:format_error(Reason);
format_error({guard, _} = Reason) ->
    terrain_lab_guard:format_error(Reason);
format_error({write, _, _} = Reason) ->
    terrain_lab_files:format_error(Reason);
format_error({read, _, _} = Reason) ->
    terrain_lab_files:format_error(Reason);
format_error({Output, _} = Reason) when Output =:= output_exists; Output =:= output_is_input ->
    terrain_lab_files:format_error(Reason);
format_error({launch, _} = Reason) ->
    terrain_lab_launch:format_error(Reason);
format_error({cluster_state, _} = Reason) ->
    terrain_lab_cluster_state:format_error(Reason);
format_error({netem, _} = Reason) ->
    terrain_lab_netem:format_error(Reason);
format_error({hostlist, _} = Reason) ->
    terrain_lab_hostlist:format_error(Reason);
format_error({hosts, _} = Reason) ->
    terrain_lab_hosts:format_error(Reason);
format_error({slurm, _} = Reason) ->
    terrain_lab_slurm:format_error(Reason);
format_error({testbed, _} = Reason) ->
    terrain_lab_testbed:format_error(Reason);
format_error({tls, _} = Reason) ->
    terrain_lab_tls:format_error(Reason);
format_error({vm, _} = Reason) ->
    terrain_lab_vm:format_error(Reason);
format_error({terrain_netem, bad_links, Text}) ->
    io_lib:format("bad -terrain_netem link table: ~ts", [Text]);
format_error({vm_exits, Reason, Exited}) ->
    [format_error(Reason), format_exits(Exited)];
format_error({net_events, Reason, Dir, Lines}) ->
    [format_error(Reason), format_net_events(Dir, Lines)];
format_error({boot_failed, Name, Why}) ->
    io_lib:format("node ~0tp failed to boot: ~0tp", [Name, Why]);
format_error({setup_failed, Name, Why}) ->
    io_lib:format("node ~0tp booted but terrain could not start on it: ~0tp", [Name, Why]);
format_error({cluster_option, Key, Value}) ->
    io_lib:format("bad cluster option ~0tp: ~0tp", [Key, Value]);
format_error({at_failed, Node, Why}) ->
    io_lib:format("could not choose at ~0tp: ~0tp", [Node, Why]);
format_error({distribution, Why}) ->
    io_lib:format("cannot start distribution on this node (is epmd available?): ~0tp", [Why]);
format_error({code_load, Node, Why}) ->
    io_lib:format("cannot load terrain's code on ~0tp: ~0tp", [Node, Why]);
format_error({report, _} = Reason) ->
    terrain_lab_analysis:format_error(Reason);
format_error({run, _, _} = Reason) ->
    terrain_lab_os:format_error(Reason);
format_error({file, File, Why}) ->
    terrain_lab_files:format_error({read, File, Why});   % a POSIX reason, or a refusal of the bounded reader
format_error(Reason) ->
    terrain:format_error(Reason).

%% @doc What `terrain_lab_cluster:diagnose/1' found, as sentences that follow an
%% error: each VM that exited, its exit status, its log and the log's last lines.
-spec format_exits([map()]) -> iolist().
format_exits(Exited) ->
    [[io_lib:format("~n  the VM of node ~ts (~ts) exited~ts~ts", [Name, Node, status_text(Vm), log_text(Vm)]),
      [io_lib:format("~n    | ~ts", [L]) || L <- maps:get(tail, Vm, [])]]
     || #{name := Name, node := Node} = Vm <- Exited].

%% @doc What the VMs logged about lost connections (`terrain_lab_cluster:net_events/2'),
%% after an error in which no VM exited.
-spec format_net_events(file:filename(), [{atom(), binary()}]) -> iolist().
format_net_events(Dir, Lines) ->
    [io_lib:format("~n  no VM exited; their logs (~ts) say:", [Dir]),
     [io_lib:format("~n    ~ts: ~ts", [Name, Line]) || {Name, Line} <- Lines]].

status_text(#{status := Status}) when is_integer(Status), Status > 128 ->
    io_lib:format(" with status ~b (killed by signal ~b~ts)", [Status, Status - 128, signal_name(Status - 128)]);
status_text(#{status := 0}) ->
    " with status 0 (halted: stopped by the lab after the failure, or by its own code)";
status_text(#{status := Status}) when is_integer(Status) ->
    io_lib:format(" with status ~b", [Status]);
status_text(#{}) ->
    " (exit status unknown)".

signal_name(9) -> ", KILL";
signal_name(15) -> ", TERM";
signal_name(6) -> ", ABRT";
signal_name(11) -> ", SEGV";
signal_name(_) -> "".

log_text(#{log := Log}) -> io_lib:format("; its log: ~ts", [Log]);
log_text(#{}) -> "; no log kept".
