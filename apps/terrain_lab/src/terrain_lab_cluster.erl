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
         stop/1]).

%% Internal exports
-export([setup_node/3, lab_vm_args/1]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-export_type([options/0, node_info/0]).

-compile({no_auto_import, [nodes/1]}).

-type options() ::
        #{prefix => string(),          % prepended to every node's short name (default "")
          boot_timeout => pos_integer(),  % ms for all nodes to boot and start terrain (default 60000)
          code_path => [file:filename()], % extra -pa directories for the nodes
          env => [{string(), string()}],  % extra OS environment for the nodes
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
                peers :: #{node() => pid()}}).

-define(DEFAULT_BOOT_TIMEOUT, 60000).
%% Lab nodes are stopped all at once; with global's partition prevention on, every
%% node would report (and act on) the others going down. A node's own `args' come
%% later on the command line and can turn any of these back (docs/CLI.md, "Lean VMs").
%% A node's log events (a crashed instance's report, "SIGTERM received") go to its
%% stderr, which the launcher's own stderr receives: its stdout reaches the CLI's
%% stdout (peer passes it on), which carries results only.
-define(LAB_VM_ARGS, ["-kernel", "prevent_overlapping_partitions", "false",
                      "-kernel", "logger", "[{handler,default,logger_std_h,#{config=>#{type=>standard_error}}}]"]
        ++ ?LEAN).
%% Lean VMs, so that 256 fit on a laptop-sized machine: a process table of 65,536
%% (default 262,144: 2.9 MB less resident per VM), a port table of 8,192 (default
%% 65,536: 0.7 MB), 2 dirty I/O schedulers (default 10 threads), and no busy wait of
%% idle schedulers: with more VMs than cores a spinning idle VM takes the core from
%% one with work.
-define(LEAN, ["+P", "65536", "+Q", "8192", "+SDio", "2"] ++ ?NO_SPIN).
-define(NO_SPIN, ["+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none"]).
-define(STOP_TIMEOUT, 5000).

%%--------------------------------------------------------------------
%% API

%% @doc Starts every node of `Spec' in parallel and returns once all of them run
%% `terrain', or fails with nothing left running.
-spec start_link(terrain_lab_spec:spec(), options()) -> {ok, pid()} | {error, term()}.
start_link(Spec, Options) ->
    case validate_options(Options) of
        ok ->
            Timeout = maps:get(boot_timeout, Options, ?DEFAULT_BOOT_TIMEOUT),
            %% Linked from init/1, so that a failed start returns {error, Reason} without
            %% an exit signal to the caller.
            gen_server:start(?MODULE, {Spec, Options, self()}, [{timeout, Timeout + ?STOP_TIMEOUT * 2}]);
        {error, _} = Error ->
            Error
    end.

%% @doc The running nodes, in the order of the spec.
-spec nodes(pid()) -> [node_info()].
nodes(Cluster) ->
    gen_server:call(Cluster, nodes).

%% @doc Stops every node and waits until their VMs are gone.
-spec stop(pid()) -> ok.
stop(Cluster) ->
    gen_server:stop(Cluster, normal, ?STOP_TIMEOUT * 3).

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init({terrain_lab_spec:spec(), options(), pid()}) -> {ok, #state{}} | {stop, term()}.
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
            {stop, Why}
    end.

-spec handle_call(term(), gen_server:from(), #state{}) -> {reply, term(), #state{}}.
handle_call(nodes, _From, #state{nodes = Nodes} = State) ->
    {reply, Nodes, State};
handle_call(Request, _From, State) ->
    {reply, {error, {unknown_request, Request}}, State}.

-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Request, State) ->
    {noreply, State}.

-spec handle_info(term(), #state{}) -> {noreply, #state{}} | {stop, term(), #state{}}.
handle_info({'EXIT', Caller, Reason}, #state{caller = Caller} = State) ->
    {stop, Reason, State};
handle_info({'EXIT', Pid, Reason}, #state{peers = Peers} = State) ->
    case [Node || {Node, P} <- maps:to_list(Peers), P =:= Pid] of
        [Node] ->
            %% A node went down on its own: forget it, keep the others.
            %% peer's control process ends `normal' whenever the VM is gone, halted or killed
            logger:warning("terrain_lab: node ~p went down: ~ts",
                           [Node, case Reason of
                                      normal -> "its VM exited (halted, crashed or killed)";
                                      _ -> io_lib:format("~0tP", [Reason, 12])
                                  end]),
            {noreply, State#state{peers = maps:remove(Node, Peers)}};
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

validate_options(Options) when is_map(Options) ->
    Bad = maps:filter(fun(prefix, V) -> not io_lib:printable_list(V);
                         (boot_timeout, V) -> not (is_integer(V) andalso V > 0);
                         (code_path, V) -> not (is_list(V) andalso lists:all(fun io_lib:printable_list/1, V));
                         (env, V) -> not is_list(V);
                         (netem, V) -> not is_boolean(V);
                         (_, _) -> true
                      end, Options),
    case maps:to_list(Bad) of
        [] -> ok;
        [{Key, Value} | _] -> {error, {cluster_option, Key, Value}}
    end;
validate_options(Options) ->
    {error, {cluster_option, options, Options}}.

boot(Spec, Options) ->
    Prefix = maps:get(prefix, Options, ""),
    Deadline = erlang:monotonic_time(millisecond) + maps:get(boot_timeout, Options, ?DEFAULT_BOOT_TIMEOUT),
    CodeArgs = maps:get(dist_args, Options, []) ++ terrain_lab_code:vm_args()
        ++ lists:append([["-pa", D] || D <- maps:get(code_path, Options, [])]),
    Specs = terrain_lab_spec:nodes(Spec),
    Netem = maps:get(netem, Options, terrain_lab_netem:enabled(Spec)),
    Started = [start_peer(NodeSpec, Prefix, CodeArgs ++ netem_args(Netem, Spec, Prefix, NodeSpec), Options)
               || NodeSpec <- Specs],
    Pids = maps:from_list([NamePid || {ok, NamePid} <- Started]),
    Booted = await_boot(Pids, Deadline, #{}),
    Failures = [Why || {error, Why} <- Started]
        ++ [{boot_failed, Name, Why} || {Name, {error, Why}} <- maps:to_list(Booted)],
    case Failures of
        [] ->
            Peers = maps:from_list([{Node, maps:get(Name, Pids)} || {Name, {ok, Node}} <- maps:to_list(Booted)]),
            Names = maps:from_list([{Name, Node} || {Name, {ok, Node}} <- maps:to_list(Booted)]),
            Topology = terrain_lab_spec:topology(Spec, fun(Name) -> maps:get(Name, Names) end),
            case setup_all([S#{topology => Topology, cluster => maps:get(name, Spec)} || S <- Specs], Booted, Deadline) of
                {ok, Nodes} ->
                    {ok, {Nodes, Peers}};
                {error, Why, OsPids} ->
                    stop_peers(maps:values(Pids), OsPids),
                    remove_cgroups(Spec, maps:keys(Peers)),
                    {error, Why}
            end;
        [Why | _] ->
            stop_peers(maps:values(Pids), []),
            {error, Why}
    end.

start_peer(#{name := Name} = NodeSpec, Prefix, CodeArgs, Options) ->
    PeerOptions = #{name => Prefix ++ atom_to_list(Name),
                    args => cookie_args() ++ lab_vm_args(NodeSpec) ++ CodeArgs ++ maps:get(args, NodeSpec, []),
                    env => maps:get(env, Options, []),
                    wait_boot => {self(), {boot, Name}}},
    try peer:start_link(PeerOptions) of
        {ok, Pid} -> {ok, {Name, Pid}};
        {error, Why} -> {error, {boot_failed, Name, Why}}
    catch
        error:Why -> {error, {boot_failed, Name, Why}}
    end.

%% The nodes speak this VM's distribution: when it runs TLS (`-proto_dist inet_tls'
%% with `-ssl_dist_optfile FILE'), they start with the same two arguments, so that they
%% present its certificate and trust its CA (the only CA this VM trusts); a spec with
%% `tls => true' needs such a VM and is refused otherwise (terrain_lab_tls).
dist_args(Spec) ->
    case terrain_lab_tls:caller_vm_args() of
        {ok, []} ->
            case terrain_lab_spec:tls(Spec) of
                true -> {error, {tls, not_tls_caller}};
                false -> {ok, []}
            end;
        {ok, _} = TlsArgs ->
            TlsArgs;
        {error, _} = Error ->
            Error
    end.

%% An emulated node routes its connections to the other nodes through netem proxies
%% from boot on (terrain_lab_netem_epmd); its code is on disk through CodeArgs.
netem_args(true, Spec, Prefix, #{name := Name}) ->
    terrain_lab_netem:vm_args(Spec, Prefix, Name);
netem_args(false, _Spec, _Prefix, _NodeSpec) ->
    [].

%% The peers must share this node's cookie. It is passed on the command line only
%% when it differs from the one in ~/.erlang.cookie, which the peers read anyway.
cookie_args() ->
    Cookie = erlang:get_cookie(),
    Home = case init:get_argument(home) of {ok, [[H]]} -> H; _ -> "" end,
    case file:read_file(filename:join(Home, ".erlang.cookie")) of
        {ok, Bin} when Bin =:= <<"">> -> ["-setcookie", atom_to_list(Cookie)];
        {ok, Bin} ->
            case string:trim(Bin) =:= atom_to_binary(Cookie) of
                true -> [];
                false -> ["-setcookie", atom_to_list(Cookie)]
            end;
        {error, _} -> ["-setcookie", atom_to_list(Cookie)]
    end.

%% Waits for every peer to report its boot; a peer whose control process exits
%% first (the VM died while booting) fails at once instead of at the deadline.
await_boot(Pids, _Deadline, Acc) when map_size(Acc) =:= map_size(Pids) ->
    Acc;
await_boot(Pids, Deadline, Acc) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {{boot, Name}, {started, Node, _Pid}} ->
            await_boot(Pids, Deadline, Acc#{Name => {ok, Node}});
        {{boot, Name}, {boot_failed, Why}} ->
            await_boot(Pids, Deadline, Acc#{Name => {error, Why}});
        {'EXIT', Pid, Why} ->
            case [Name || {Name, P} <- maps:to_list(Pids), P =:= Pid, not maps:is_key(Name, Acc)] of
                [Name] -> await_boot(Pids, Deadline, Acc#{Name => {error, {exited_while_booting, Why}}});
                [] -> await_boot(Pids, Deadline, Acc)
            end
    after Wait ->
        maps:merge(maps:map(fun(_, _) -> {error, boot_timeout} end, Pids), Acc)
    end.

%% Loads code, sets the node's attributes and starts terrain on every node at once.
setup_all(Specs, Booted, Deadline) ->
    Self = self(),
    Workers = [{spawn_monitor(fun() -> Self ! {setup, self(), setup_node(NodeSpec, Node, Deadline)} end), Name}
               || #{name := Name} = NodeSpec <- Specs,
                  {ok, Node} <- [maps:get(Name, Booted)]],
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

%% @doc VM arguments a lab node gets before the code path and its own `args': the
%% lab's (lean VMs, no busy-waiting of idle schedulers: `+sbwt none +sbwtdcpu none
%% +sbwtdio none', which would also spend a CPU quota spinning) and its schedulers
%% (`+S N:N').
-spec lab_vm_args(NodeSpec) -> [string()] when
      NodeSpec :: #{schedulers => pos_integer(), cpu => number(), cpu_per_scheduler => number(), _ => _}.
lab_vm_args(NodeSpec) ->
    Schedulers = case NodeSpec of
                     #{schedulers := S} -> ["+S", integer_to_list(S) ++ ":" ++ integer_to_list(S)];
                     #{} -> []
                 end,
    ?LAB_VM_ARGS ++ Schedulers.

%% @doc Prepares a booted node (started with `terrain_lab_code:vm_args()'): sets the
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

%% Stops the peers in parallel, then makes sure their VMs are gone.
stop_peers(Peers, OsPids) ->
    Stoppers = [spawn_monitor(fun() -> stop_peer(Pid) end) || Pid <- Peers],
    lists:foreach(fun({_, Ref}) -> receive {'DOWN', Ref, process, _, _} -> ok end end, Stoppers),
    case terrain_lab_os:await_exit(OsPids, ?STOP_TIMEOUT) of
        [] -> ok;
        Left ->
            Killed = [P || P <- Left, terrain_lab_os:kill(P)],
            logger:warning("terrain_lab: killed VMs that did not halt: ~p", [Killed])
    end.

stop_peer(Pid) ->
    try peer:stop(Pid)
    catch exit:_AlreadyGone -> ok
    end.
