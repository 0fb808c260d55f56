%% @private
%% @doc The local cluster launcher: one process that starts the nodes of a cluster
%% spec in parallel with `peer', runs the `terrain' application on each, and stops
%% them.
%%
%% The launcher process is linked to its caller and owns the `peer' control processes.
%% Each peer node halts when its control process goes away, so no node outlives the
%% launcher: not after {@link stop/1}, not when the caller dies, and not when the
%% controlling VM is killed (the distribution connection drops and the peers halt).
%%
%% With network emulation (option `netem', on by default when the spec has link
%% options), every node boots with `terrain_lab_netem:vm_args/3': its connections to
%% the other nodes of the spec cross emulated links; the launcher's own connections
%% to the nodes stay direct.
%%
%% The nodes use this VM's distribution protocol: a VM that runs TLS distribution
%% passes its `-proto_dist inet_tls -ssl_dist_optfile FILE' on to them; a spec with
%% `tls => true' is refused unless this VM runs TLS (`{error, {tls, not_tls_caller}}').
-module(terrain_lab_cluster).
-behaviour(gen_server).

%% API
-export([start_link/2,
         nodes/1,
         diagnose/1,
         net_events/2,
         exited_info/1,
         stop/1]).

%% Internal exports
-export([setup_node/3]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-export_type([options/0, node_info/0]).

-compile({no_auto_import, [nodes/1]}).

-type options() ::
        #{prefix => string(),          % prepended to every node's short name (default "")
          boot_timeout => pos_integer(),  % ms for all nodes to boot and start terrain (default as
                                          % `terrain up': terrain_lab_launch:default_timeout/1)
          code_path => [file:filename()], % extra -pa directories for the nodes
          env => [{string(), string()}],  % extra OS environment for the nodes
          log_dir => file:filename(),     % each node's VM logs to LOG_DIR/NAME.log (output, log
                                          % events, exit status); absent: to this VM's stderr
          netem => boolean()}.            % emulate the spec's links and allow partitions
                                          % (default: true when the spec has link options)

-type node_info() ::
        #{name := atom(),              % the name in the spec
          node := node(),              % the running node
          path := [atom()],            % its group path in the spec
          schedulers := pos_integer(), % schedulers online
          os_pid := string(),          % the OS process id of its VM
          cpu_quota => float(),        % its CPU quota in cores, when the spec gives one
          cpu_quota_per_scheduler => float()}. % each scheduler thread's quota in cores
                                               % (spec option cpu_per_scheduler)

-record(state, {caller :: pid(),
                spec :: terrain_lab_spec:spec(),
                nodes :: [node_info()],
                peers :: #{node() => terrain_lab_vm:vm()},    % the VMs still running
                exited = #{} :: #{node() => terrain_lab_vm:vm()}}). % the VMs that exited on their own

%% What diagnose/1 says of a VM that exited on its own.
-type exited() :: #{name := atom(), node := node(), log => file:filename(),
                    status => non_neg_integer() | undefined, tail => [binary()]}.

-define(STOP_TIMEOUT, 5000).
-define(CLEANUP_MARGIN, 60000).

%%--------------------------------------------------------------------
%% API

%% @doc Starts every node of `Spec' in parallel and returns once all of them run
%% `terrain', or fails with nothing left running.
-spec start_link(terrain_lab_spec:spec(), options()) -> {ok, pid()} | {error, term()}.
start_link(Spec, Options) ->
    case validate_options(Options) of
        ok ->
            Timeout = boot_timeout(Spec, Options),
            %% Linked from init/1, so that a failed start returns {error, Reason} without
            %% an exit signal to the caller; and ended with {shutdown, Reason}, so that it
            %% is not logged as a crash (a missing cgroup controller is a sentence, not a
            %% crash report: the caller says it).
            %% the boot's own deadline comes first; this one leaves the time to stop
            %% what did boot (hundreds of VMs at a high load: tens of seconds), so that the
            %% error is the boot's, not a timeout of this call
            case gen_server:start(?MODULE, {Spec, Options, self()}, [{timeout, Timeout + ?CLEANUP_MARGIN}]) of
                {error, {shutdown, Why}} -> {error, Why};
                Started -> Started
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc The running nodes, in the order of the spec.
-spec nodes(pid()) -> [node_info()].
nodes(Cluster) ->
    gen_server:call(Cluster, nodes).

%% @doc The VMs of the cluster that exited on their own (not stopped by {@link stop/1}),
%% each with its log, its exit status and the last lines of its log when it has one.
%% Called right after an operation failed, which may have noticed a VM's death (its
%% connection closing) before this process has: it waits up to a second for a first
%% exit, and then until the VMs whose OS processes are gone have all been seen.
-spec diagnose(pid()) -> [exited()].
diagnose(Cluster) ->
    diagnose(Cluster, erlang:monotonic_time(millisecond) + 1000).

diagnose(Cluster, Deadline) ->
    Exited = gen_server:call(Cluster, exited),
    Gone = [N || #{node := N, os_pid := P} <- nodes(Cluster), not terrain_lab_os:alive(P)],
    Waiting = map_size(Exited) =:= 0 orelse Gone -- maps:keys(Exited) =/= [],
    case Waiting andalso erlang:monotonic_time(millisecond) < Deadline of
        true ->
            timer:sleep(50),
            diagnose(Cluster, Deadline);
        false ->
            [exited_info(Vm) || {_, Vm} <- lists:sort(maps:to_list(Exited))]
    end.

%% @doc The last `Max' lines the VMs logged in `LogDir' about their connections
%% (`terrain netem: ...': lost, with the cause; a proxy that failed), by VM name.
-spec net_events(file:filename(), pos_integer()) -> [{atom(), binary()}].
net_events(LogDir, Max) ->
    Found = [{list_to_atom(filename:basename(File, ".log")), Line}
             || File <- lists:sort(filelib:wildcard(filename:join(LogDir, "*.log"))),
                {ok, Text} <- [file:read_file(File)],
                Line <- binary:split(Text, <<"\n">>, [global, trim_all]),
                binary:match(Line, <<"terrain netem: ">>) =/= nomatch],
    lists:nthtail(max(0, length(Found) - Max), Found).

%% @doc A VM that exited, as `diagnose/1' returns it: with its log, the log's last
%% lines and its exit status when the log has them.
-spec exited_info(#{name := atom(), node := node(), log => file:filename()}) -> exited().
exited_info(#{name := Name, node := Node, log := Log}) ->
    case terrain_lab_vm:log_tail(Log, 8) of
        {ok, Tail, Status} -> #{name => Name, node => Node, log => Log, status => Status, tail => Tail};
        {error, _} -> #{name => Name, node => Node, log => Log}
    end;
exited_info(#{name := Name, node := Node}) ->
    #{name => Name, node => Node}.

%% @doc Stops every node and waits until their VMs are gone.
-spec stop(pid()) -> ok.
stop(Cluster) ->
    gen_server:stop(Cluster, normal, ?STOP_TIMEOUT * 3).

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init({terrain_lab_spec:spec(), options(), pid()}) -> {ok, #state{}} | {stop, {shutdown, term()}}.
init({Spec, Options, Caller}) ->
    process_flag(trap_exit, true),
    link(Caller),
    Result = terrain_lab_steps:run([fun(_) -> terrain_lab_guard:vms(length(terrain_lab_spec:nodes(Spec)), #{}) end,
                                    fun(_) -> dist_args(Spec) end,
                                    fun(_) -> terrain_lab_dist:ensure_started(#{}) end,
                                    fun(_) -> terrain_lab_cgroup:check(Spec) end,
                                    fun(DistArgs) -> boot(Spec, Options#{dist_args => DistArgs}) end], Spec),
    case Result of
        {ok, {Nodes, Peers}} ->
            %% stopped (VMs, cgroups) by the CLI's exit path too, should it halt first
            Self = self(),
            ok = terrain_lab_cleanup:add({cluster, Self}, fun() -> stop(Self) end),
            {ok, #state{caller = Caller, spec = Spec, nodes = Nodes, peers = Peers}};
        {error, Why} ->
            unlink(Caller),
            {stop, {shutdown, Why}}
    end.

-spec handle_call(term(), gen_server:from(), #state{}) -> {reply, term(), #state{}}.
handle_call(nodes, _From, #state{nodes = Nodes} = State) ->
    {reply, Nodes, State};
handle_call(exited, _From, #state{exited = Exited} = State) ->
    {reply, Exited, State};
handle_call(Request, _From, State) ->
    {reply, {error, {unknown_request, Request}}, State}.

-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Request, State) ->
    {noreply, State}.

-spec handle_info(term(), #state{}) -> {noreply, #state{}} | {stop, term(), #state{}}.
handle_info({'EXIT', Caller, Reason}, #state{caller = Caller} = State) ->
    {stop, Reason, State};
handle_info({'EXIT', Pid, Reason}, #state{peers = Peers} = State) ->
    case [Node || {Node, Vm} <- maps:to_list(Peers), terrain_lab_vm:peer(Vm) =:= Pid] of
        [Node] ->
            %% A node went down on its own: forget it, keep the others.
            %% peer's control process ends `normal' whenever the VM is gone, halted or killed
            logger:warning("terrain_lab: node ~p went down: ~ts",
                           [Node, case Reason of
                                      normal -> "its VM exited (halted, crashed or killed)";
                                      _ -> io_lib:format("~0tP", [Reason, 12])
                                  end]),
            {noreply, State#state{peers = maps:remove(Node, Peers),
                                  exited = (State#state.exited)#{Node => maps:get(Node, Peers)}}};
        [] ->
            {noreply, State}
    end;
handle_info(_Info, State) ->
    {noreply, State}.

-spec terminate(term(), #state{}) -> ok.
terminate(_Reason, #state{peers = Peers, nodes = Nodes, spec = Spec}) ->
    ok = terrain_lab_cleanup:remove({cluster, self()}),
    stop_peers(maps:values(Peers), [OsPid || #{os_pid := OsPid} <- Nodes]),
    remove_cgroups(Spec, [Node || #{node := Node} <- Nodes]).

%%--------------------------------------------------------------------
%% Internal functions

%% The cluster's options through the one checker (terrain_options); `env' and
%% `code_path' are handed to every node's VM, so they are checked as the VM checks them.
%% A refusal keeps this module's shape, `{cluster_option, Key, Value}'.
validate_options(Options) ->
    Vm = terrain_lab_vm:option_checks(),
    Checks = #{prefix => fun io_lib:printable_list/1,
               boot_timeout => fun(V) -> is_integer(V) andalso V > 0 end,
               code_path => maps:get(code_path, Vm),
               env => maps:get(env, Vm),
               log_dir => fun io_lib:printable_unicode_list/1,
               netem => fun erlang:is_boolean/1},
    case terrain_options:check(Options, Checks) of
        ok -> ok;
        {error, {bad_option, Key, Value}} -> {error, {cluster_option, Key, Value}};
        {error, {unknown_option, Key}} -> {error, {cluster_option, Key, maps:get(Key, Options)}};
        {error, {bad_options, Term}} -> {error, {cluster_option, options, Term}}
    end.

boot(Spec, Options) ->
    Prefix = maps:get(prefix, Options, ""),
    Deadline = erlang:monotonic_time(millisecond) + boot_timeout(Spec, Options),
    Specs = terrain_lab_spec:nodes(Spec),
    VmOptions = maps:merge(#{transport => local_linked, cookie => erlang:get_cookie(),
                             env => maps:get(env, Options, []), code_path => maps:get(code_path, Options, [])},
                           maps:get(dist_args, Options, #{})),
    Netem = case maps:get(netem, Options, terrain_lab_netem:enabled(Spec)) of
                true -> #{netem => {Spec, Prefix}};
                false -> #{}
            end,
    Log = fun(Name) -> case Options of
                           #{log_dir := Dir} -> #{log => filename:join(Dir, atom_to_list(Name) ++ ".log")};
                           #{} -> #{}
                       end
          end,
    _ = maps:is_key(log_dir, Options) andalso filelib:ensure_path(maps:get(log_dir, Options)),
    Started = [start_vm(maps:merge(VmOptions#{name => Name, node => list_to_atom(Prefix ++ atom_to_list(Name)),
                                              args => maps:get(args, NodeSpec, [])},
                                   maps:merge(maps:merge(Netem, Log(Name)), maps:with([schedulers], NodeSpec))))
               || #{name := Name} = NodeSpec <- Specs],
    Vms = [Vm || {ok, Vm} <- Started],
    Results = terrain_lab_vm:await_boot(Vms, Deadline),
    Booted = maps:from_list([{Name, Result} || {#{name := Name}, Result} <- lists:zip(Vms, Results)]),
    Peers = maps:from_list([{Node, Vm} || {ok, #{node := Node} = Vm} <- maps:values(Booted)]),
    Failures = [Why || {error, Why} <- Started]
        ++ [{boot_failed, Name, Why} || {Name, {error, Why}} <- maps:to_list(Booted)],
    case Failures of
        [] ->
            Names = maps:from_list([{Name, Node} || {Name, {ok, #{node := Node}}} <- maps:to_list(Booted)]),
            Topology = terrain_lab_spec:topology(Spec, fun(Name) -> maps:get(Name, Names) end),
            Placed = [S#{topology => Topology, cluster => maps:get(name, Spec)} || S <- Specs],
            case setup_all(Placed, Names, Deadline) of
                {ok, Nodes} ->
                    {ok, {Nodes, Peers}};
                {error, Why, OsPids} ->
                    stop_peers(maps:values(Peers), OsPids),
                    remove_cgroups(Spec, maps:keys(Peers)),
                    {error, Why}
            end;
        [Why | _] ->
            stop_peers(maps:values(Peers), []),
            {error, Why}
    end.

%% The nodes start in parallel but share the machine's cores: by default the deadline
%% grows with their number, as `terrain up''s (30 s plus 1 s per node, at least 60 s).
boot_timeout(Spec, Options) ->
    maps:get(boot_timeout, Options, terrain_lab_launch:default_timeout(length(terrain_lab_spec:nodes(Spec)))).

%% A node's VM (terrain_lab_vm, transport local_linked: an OTP peer).
start_vm(#{name := Name} = VmOptions) ->
    case terrain_lab_vm:start(VmOptions) of
        {ok, _} = Ok -> Ok;
        {error, {vm, {spawn, Name, Why}}} -> {error, {boot_failed, Name, Why}};
        {error, _} = Error -> Error
    end.

%% The nodes speak this VM's distribution: when it runs TLS (`-proto_dist inet_tls'
%% with `-ssl_dist_optfile FILE'), they start with the same option file, so that they
%% present its certificate and trust its CA (the only CA this VM trusts); a spec with
%% `tls => true' needs such a VM and is refused otherwise (terrain_lab_tls).
dist_args(Spec) ->
    case terrain_lab_tls:caller_vm_args() of
        {ok, []} ->
            case terrain_lab_spec:tls(Spec) of
                true -> {error, {tls, not_tls_caller}};
                false -> {ok, #{}}
            end;
        {ok, ["-proto_dist", "inet_tls", "-ssl_dist_optfile", OptFile]} ->
            {ok, #{tls_optfile => OptFile}};
        {error, _} = Error ->
            Error
    end.

%% Loads code, sets the node's attributes and starts terrain on every node at once.
setup_all(Specs, Names, Deadline) ->
    Self = self(),
    Workers = [{spawn_monitor(fun() -> Self ! {setup, self(), setup_node(NodeSpec, Node, Deadline)} end), Name}
               || #{name := Name} = NodeSpec <- Specs,
                  Node <- [maps:get(Name, Names)]],
    Results = [{Name, await_setup(Worker, Ref)} || {{Worker, Ref}, Name} <- Workers],
    OsPids = [OsPid || {_, {ok, #{os_pid := OsPid}}} <- Results],
    case [{Name, Why} || {Name, {error, Why}} <- Results] of
        [] -> {ok, [Info || {_, {ok, Info}} <- Results]};
        [{Name, Why} | _] -> {error, {setup_failed, Name, Why}, OsPids}
    end.

await_setup(Worker, Ref) ->
    receive
        {setup, Worker, Result} ->
            erlang:demonitor(Ref, [flush]),
            Result;
        {'DOWN', Ref, process, Worker, Reason} ->
            {error, {setup_crashed, Reason}}
    end.

%% @doc Prepares a booted node (started by `terrain_lab_vm'): sets the
%% attributes of its spec and the cluster's topology (the node spec's `topology' key,
%% see {@link terrain_lab_spec:topology/2}), the live topology (`live': the terrain app
%% env key of that name) and starts the `terrain' application, all
%% before `Deadline' (monotonic ms).
%% A node spec with `cpu' or `cpu_per_scheduler' and `cluster' (the cluster's name)
%% has its VM put in CPU cgroups (terrain_lab_cgroup) first.
-spec setup_node(terrain_lab_spec:node_spec() | #{topology => terrain:topology_tree(), cluster => atom(),
                                                  live => true | map()},
                 node(), integer()) ->
          {ok, node_info()} | {error, term()}.
setup_node(#{name := Name, path := Path} = NodeSpec, Node, Deadline) ->
    Timeout = max(1, Deadline - erlang:monotonic_time(millisecond)),
    try
        OsPid = erpc:call(Node, os, getpid, [], Timeout),
        Cpu = limit_cpu(NodeSpec, Node, OsPid),
        ok = load_app(Node, Timeout),
        _ = maps:is_key(attrs, NodeSpec)
            andalso erpc:call(Node, application, set_env, [terrain, attrs, maps:get(attrs, NodeSpec)], Timeout),
        _ = maps:is_key(topology, NodeSpec)
            andalso erpc:call(Node, application, set_env, [terrain, topology, maps:get(topology, NodeSpec)], Timeout),
        _ = maps:is_key(live, NodeSpec)
            andalso erpc:call(Node, application, set_env, [terrain, live, maps:get(live, NodeSpec)], Timeout),
        {ok, _} = erpc:call(Node, application, ensure_all_started, [terrain], Timeout),
        Schedulers = erpc:call(Node, erlang, system_info, [schedulers_online], Timeout),
        {ok, maps:merge(#{name => Name, node => Node, path => Path, schedulers => Schedulers, os_pid => OsPid}, Cpu)}
    catch
        Class:Reason -> {error, {Class, Reason}}
    end.

limit_cpu(#{cluster := Cluster} = NodeSpec, Node, OsPid) ->
    case maps:with([cpu, cpu_per_scheduler], NodeSpec) of
        Limits when map_size(Limits) =:= 0 ->
            #{};
        Limits ->
            case terrain_lab_cgroup:attach(Cluster, short_name(Node), OsPid, Limits) of
                {ok, Quotas} -> maps:with([cpu_quota, cpu_quota_per_scheduler], Quotas);
                {error, Why} -> error(Why)
            end
    end;
limit_cpu(_NodeSpec, _Node, _OsPid) ->
    #{}.

%% @doc Removes the CPU cgroups of `Nodes' of the cluster of `Spec' (those there are).
-spec remove_cgroups(terrain_lab_spec:spec(), [node()]) -> ok.
remove_cgroups(#{name := Cluster}, Nodes) ->
    terrain_lab_cgroup:remove(Cluster, [short_name(N) || N <- Nodes]).

short_name(Node) ->
    hd(string:split(atom_to_list(Node), "@")).

load_app(Node, Timeout) ->
    case erpc:call(Node, application, load, [terrain], Timeout) of
        ok -> ok;
        {error, {already_loaded, terrain}} -> ok;
        {error, Why} -> error({load_terrain, Why})
    end.

%% Stops the VMs in parallel (terrain_lab_vm:stop/2), then makes sure they are gone.
stop_peers(Vms, OsPids) ->
    Stoppers = [spawn_monitor(fun() -> terrain_lab_vm:stop(Vm, ?STOP_TIMEOUT) end) || Vm <- Vms],
    lists:foreach(fun({_, Ref}) -> receive {'DOWN', Ref, process, _, _} -> ok end end, Stoppers),
    case terrain_lab_os:await_exit(OsPids, ?STOP_TIMEOUT) of
        [] -> ok;
        Left ->
            Killed = [P || P <- Left, terrain_lab_os:kill(P)],
            logger:warning("terrain_lab: killed VMs that did not halt: ~p", [Killed])
    end.
