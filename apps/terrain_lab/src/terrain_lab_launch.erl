%% @private
%% @doc Clusters that outlive the CLI: starts every node of a spec as a detached VM,
%% checks and stops them again (the work behind `terrain up', `status' and `down').
%%
%% {@link up/4} starts the VMs and records them in the state directory (its layout and
%% format: `terrain_lab_cluster_state'). The cookie never appears on a command line: a
%% node starts undistributed, writes its OS pid file, reads the cookie file, and only
%% then starts distribution. {@link stop/2} stops exactly the recorded nodes, by node
%% name, falling back to the recorded OS pid (checked to still be that node's VM before
%% it is killed).
%%
%% With network emulation on (`netem' `"auto"', the default, turns it on when the spec
%% has link options), every node starts with `terrain_lab_netem:vm_args/3', so that
%% its connections to the other nodes cross the spec's links from boot on.
-module(terrain_lab_launch).

%% API
-export([up/4,
         status/2,
         stop/2,
         still_running/1,
         format_error/1]).

-export_type([up_options/0, node_record/0, stop_result/0]).

-type up_options() :: #{prefix := string(),         % prepended to every node name
                        timeout := pos_integer(),   % ms for all nodes to come up
                        netem := string(),          % "auto" | "on" | "off"
                        %% nodes on other hosts (terrain_lab_ssh, docs/HOSTS.md):
                        ssh_options => terrain_lab_ssh:ssh_options(),
                        code_path => file:filename() | undefined}.

%% A started node as recorded in cluster.json.
-type node_record() :: #{name := atom(), node := node(), group_path := [atom()],
                         os_pid := binary() | null, schedulers := pos_integer() | null}.

%% What became of each recorded node: "stopped", "was not running", "killed (OS pid
%% P)" or "still running (...)".
-type stop_result() :: {NodeName :: binary(), How :: string()}.

%%--------------------------------------------------------------------
%% API

%% @doc Starts the nodes of the spec in `SpecFile' as detached VMs, records them in
%% `Dir' and returns their records; progress goes to `Io''s `err' device. Refused
%% while a cluster recorded in `Dir' is still running. When a node does not come up
%% before the deadline, every node is stopped again and the state removed.
-spec up(file:filename(), up_options(), file:filename(), terrain_lab_io:io()) ->
          {ok, [node_record()]} | {error, term()}.
up(SpecFile, #{netem := NetemOption} = Options, Dir, Io) ->
    Steps = [fun terrain_lab_spec:read/1,
             fun terrain_lab_hosts:check_placement/1,   % nodes on other hosts: docs/HOSTS.md
             fun(Spec) ->
                     case terrain_lab_hosts:netem_option(Spec, NetemOption) of   % off on other hosts
                         {ok, Netem} -> with_netem(Spec, Netem);
                         {error, _} = Error -> Error
                     end
             end,
             fun(SpecNetem) -> refuse_if_running(Dir, SpecNetem) end,
             fun({Spec, Netem}) -> start_detached(Spec, Netem, filename:absname(SpecFile), Dir, Options, Io) end],
    terrain_lab_steps:run(Steps, SpecFile).

%% @doc The recorded state of the cluster in `Dir' with every node checked at once
%% under one deadline: each entry of `<<"nodes">>' gets `<<"state">>' `up' (it
%% answered), `unreachable' (its OS process is alive) or `down'.
-spec status(file:filename(), pos_integer()) -> {ok, map()} | {error, term()}.
status(Dir, Timeout) ->
    case terrain_lab_cluster_state:read(Dir) of
        {ok, State} ->
            ok = terrain_lab_cluster_state:connect_cli(Dir),
            {ok, State#{<<"nodes">> := check_nodes(State, Timeout, Dir)}};
        {error, _} = Error ->
            Error
    end.

%% @doc Stops every node recorded in `Dir' (or, without `cluster.json', named by a pid
%% file) and says what became of each; removes the state unless a node is still
%% running. `Timeout' is the time a node gets to halt before it is killed.
-spec stop(file:filename(), pos_integer()) -> {ok, [stop_result()]} | {error, term()}.
stop(Dir, Timeout) ->
    case read_state_or_pid_files(Dir) of
        {ok, State} ->
            ok = terrain_lab_cluster_state:connect_cli(Dir),
            Results = stop_nodes(State, Timeout, Dir),
            _ = still_running(Results) =:= [] andalso terrain_lab_cluster_state:remove(Dir),
            {ok, Results};
        {error, _} = Error ->
            Error
    end.

%% @doc The nodes that {@link stop/2} could not stop.
-spec still_running([stop_result()]) -> [binary()].
still_running(Results) ->
    [N || {N, "still running" ++ _} <- Results].

%% @doc A sentence for the errors of this module (and of the state it reads).
-spec format_error(term()) -> iolist().
format_error({launch, {already_running, Dir, Nodes}}) ->
    io_lib:format("a cluster recorded in ~ts is still running (~ts); stop it with 'terrain down' first",
                  [Dir, lists:join(", ", Nodes)]);
format_error({launch, {not_started, Failed}}) ->
    io_lib:format("the cluster did not come up and was stopped again: ~ts",
                  [lists:join("; ", [io_lib:format("~ts: ~ts", [N, W]) || {N, W} <- Failed])]);
format_error({launch, {still_running, Nodes}}) ->
    io_lib:format("could not stop ~ts; the state is kept", [lists:join(", ", Nodes)]);
format_error({launch, {bad_netem, Value}}) ->
    io_lib:format("--netem expects auto, on or off, got '~ts'", [Value]).

%%--------------------------------------------------------------------
%% up

with_netem(Spec, "auto") -> {ok, {Spec, terrain_lab_netem:enabled(Spec)}};
with_netem(Spec, "on") -> {ok, {Spec, true}};
with_netem(Spec, "off") -> {ok, {Spec, false}};
with_netem(_Spec, Other) -> {error, {launch, {bad_netem, Other}}}.

refuse_if_running(Dir, Spec) ->
    case read_state_or_pid_files(Dir) of
        {ok, State} ->
            case [binary_to_list(N) || #{<<"node">> := N} = Node <- maps:get(<<"nodes">>, State),
                                       vm_running(Node, Dir)] of
                [] -> terrain_lab_cluster_state:remove(Dir), {ok, Spec};
                Running -> {error, {launch, {already_running, Dir, Running}}}
            end;
        {error, {cluster_state, {no_cluster, _}}} ->
            {ok, Spec};
        {error, _} = Error ->
            Error
    end.

start_detached(Spec, Netem, SpecPath, Dir, #{prefix := Prefix, timeout := Timeout} = Options, Io) ->
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    ok = filelib:ensure_dir(filename:join([Dir, "nodes", "x"])),
    CookieFile = terrain_lab_cluster_state:create_cookie(Dir),
    %% Nodes on other hosts: long names, started over ssh (terrain_lab_ssh).
    Remote = terrain_lab_hosts:remote(Spec),
    SshOptions = maps:get(ssh_options, Options, []),
    Ssh = terrain_lab_ssh:context(Dir, SshOptions, maps:get(code_path, Options, undefined)),
    ok = case Remote of
             true -> terrain_lab_hosts:prepare_cli(Spec, Dir);
             false -> ok
         end,
    ok = terrain_lab_cluster_state:connect_cli(Dir),
    Nodes = [{NodeSpec, case Remote of
                            true -> terrain_lab_ssh:node_name(Prefix, Name, maps:get(host, NodeSpec));
                            false -> terrain_lab_dist:node_name(Prefix, Name)
                        end} || #{name := Name} = NodeSpec <- terrain_lab_spec:nodes(Spec)],
    terrain_lab_io:progress(Io, "starting ~b nodes of ~ts~n", [length(Nodes), SpecPath]),
    _ = Netem andalso terrain_lab_io:progress(Io, "network emulation on: ~ts~n", [netem_summary(Spec)]),
    lists:foreach(fun({#{name := Name} = NodeSpec, Node}) ->
                          NetemArgs = case Netem of
                                          true -> terrain_lab_netem:vm_args(Spec, Prefix, Name);
                                          false -> []
                                      end,
                          Remote orelse spawn_vm(NodeSpec, Node, Dir, NetemArgs)
                  end, Nodes),
    Self = self(),
    Topology = terrain_lab_spec:topology(Spec, fun(Name) -> proplists:get_value(Name, [{N, Node} || {#{name := N}, Node} <- Nodes]) end),
    Workers = [spawn_monitor(fun() -> Self ! {self(), remote_spawn_then_bring_up(Remote, NodeSpec#{topology => Topology},
                                                                                 Node, Dir, Deadline, Ssh)} end)
               || {NodeSpec, Node} <- Nodes],
    Results = [receive {Pid, Result} -> erlang:demonitor(Ref, [flush]), Result;
                       {'DOWN', Ref, process, Pid, Why} -> {error, {crashed, Why}}
               end || {Pid, Ref} <- Workers],
    Records = [node_record(NodeSpec, Node, Dir, Result, Ssh) || {{NodeSpec, Node}, Result} <- lists:zip(Nodes, Results)],
    ok = terrain_lab_cluster_state:write(Dir, #{cluster => maps:get(name, Spec),
                                                spec => list_to_binary(SpecPath),
                                                cookie_file => list_to_binary(CookieFile),
                                                started_at => terrain_lab_run:timestamp(),
                                                netem => Netem,
                                                levels => terrain_lab_netem:level_records(Spec),
                                                nodes => Records}),
    case [{atom_to_list(Node), format_reason(Why)} || {{_, Node}, {error, Why}} <- lists:zip(Nodes, Results)] of
        [] ->
            terrain_lab_io:progress(Io, "cluster ~ts is up; state in ~ts~n", [maps:get(name, Spec), Dir]),
            {ok, Records};
        Failed ->
            {ok, Recorded} = terrain_lab_cluster_state:read(Dir),
            _ = stop_nodes(Recorded, 5000, Dir),
            terrain_lab_cluster_state:remove(Dir),
            {error, {launch, {not_started, Failed}}}
    end.

netem_summary(Spec) ->
    lists:join(", ", [[Level, " ", level_text(Record)]
                      || #{level := Level} = Record <- terrain_lab_netem:level_records(Spec),
                         level_text(Record) =/= "-"]).

level_text(#{latency_us := L, jitter_us := J, bandwidth_bytes_per_s := B}) ->
    case [T || T <- [unit(L, " us"), case J of null -> "-"; _ -> ["+-", unit(J, " us")] end, unit(B, " B/s")],
               T =/= "-"] of
        [] -> "-";
        Parts -> lists:join(" ", Parts)
    end.

unit(null, _Unit) -> "-";
unit(Value, Unit) -> integer_to_list(Value) ++ Unit.

%% A detached VM that writes its pid, reads the cookie, and only then goes distributed
%% (through the netem epmd module when `NetemArgs' say so).
spawn_vm(#{name := Name} = NodeSpec, Node, Dir, NetemArgs) ->
    [Short, _Host] = string:split(atom_to_list(Node), "@"),
    PidFile = terrain_lab_cluster_state:pid_file(Dir, Name),
    Boot = lists:flatten(io_lib:format(
             "try ok = file:write_file(~0tp, os:getpid()), "
             "{ok, C} = file:read_file(~0tp), "
             "{ok, _} = net_kernel:start(~0tp, #{name_domain => shortnames}), "
             "true = erlang:set_cookie(binary_to_atom(string:trim(C))) "
             "catch _:_ -> erlang:halt(3) end.",
             [PidFile, filename:join(Dir, "cookie"), list_to_atom(Short)])),
    Schedulers = case NodeSpec of
                     #{schedulers := S} -> ["+S", integer_to_list(S) ++ ":" ++ integer_to_list(S)];
                     #{} -> []
                 end,
    Args = ["-detached", "-noinput"] ++ terrain_lab_cluster:lab_vm_args() ++ Schedulers ++ terrain_lab_code:vm_args() ++ NetemArgs
        ++ maps:get(args, NodeSpec, []) ++ ["-eval", Boot],
    Erl = erl_executable(),
    Port = open_port({spawn_executable, Erl}, [{args, Args}, exit_status, stderr_to_stdout]),
    receive {Port, {exit_status, _}} -> ok
    after 10000 -> port_close(Port)
    end.

erl_executable() ->
    case os:find_executable("erl") of
        false -> filename:join([code:root_dir(), "bin", "erl"]);
        Erl -> Erl
    end.

%% A node on another host is started over ssh by its own worker, in parallel.
remote_spawn_then_bring_up(false, NodeSpec, Node, Dir, Deadline, Ssh) ->
    bring_up(NodeSpec, Node, Dir, Deadline, Ssh);
remote_spawn_then_bring_up(true, NodeSpec, Node, Dir, Deadline, Ssh) ->
    case terrain_lab_ssh:spawn_vm(NodeSpec, Node, Ssh) of
        ok -> bring_up(NodeSpec, Node, Dir, Deadline, Ssh);
        {error, Why} -> {error, {text, lists:flatten(terrain_lab_ssh:format_error(Why))}}
    end.

bring_up(NodeSpec, Node, Dir, Deadline, Ssh) ->
    case await_ping(Node, Deadline) of
        ok ->
            terrain_lab_cluster:setup_node(NodeSpec, Node, Deadline);
        timeout ->
            case started_pid(NodeSpec, Dir, Ssh) of
                {ok, _} -> {error, not_reachable};
                error -> {error, vm_did_not_start}
            end
    end.

%% The OS pid a started VM wrote (on its host, for a node on another host).
started_pid(#{name := Name} = NodeSpec, Dir, Ssh) ->
    case NodeSpec of
        #{host := Host} ->
            case terrain_lab_hosts:is_local(Host) of
                true -> read_pid(terrain_lab_cluster_state:pid_file(Dir, Name));
                false -> terrain_lab_ssh:pid_of(Host, Name, Ssh)
            end;
        #{} ->
            read_pid(terrain_lab_cluster_state:pid_file(Dir, Name))
    end.

await_ping(Node, Deadline) ->
    case net_adm:ping(Node) of
        pong -> ok;
        pang ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> timeout;
                false -> receive after 50 -> await_ping(Node, Deadline) end
            end
    end.

read_pid(File) ->
    case file:read_file(File) of
        {ok, Bin} when Bin =/= <<>> -> {ok, binary_to_list(Bin)};
        _ -> error
    end.

node_record(#{name := Name, path := Path} = NodeSpec, Node, Dir, Result, Ssh) ->
    OsPid = case Result of
                {ok, #{os_pid := P}} -> list_to_binary(P);
                {error, _} ->
                    case started_pid(NodeSpec, Dir, Ssh) of
                        {ok, P} -> list_to_binary(P);
                        error -> null
                    end
            end,
    Record = #{name => Name, node => Node, group_path => Path, os_pid => OsPid,
               schedulers => case Result of {ok, #{schedulers := S}} -> S; _ -> null end},
    case NodeSpec of
        #{host := Host} -> terrain_lab_hosts:remote_record(Record, Host, Ssh);
        #{} -> Record
    end.

format_reason({text, Text}) ->
    Text;
format_reason(Why) ->
    io_lib:format("~0tp", [Why]).

%%--------------------------------------------------------------------
%% status

%% Every node is checked at once under one deadline.
check_nodes(#{<<"nodes">> := Nodes}, Timeout, Dir) ->
    Self = self(),
    Checks = [{Node, spawn_monitor(fun() -> Self ! {self(), check_node(Node, Timeout, Dir)} end)} || Node <- Nodes],
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    [begin
         Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
         State = receive {Pid, S} -> erlang:demonitor(Ref, [flush]), S;
                         {'DOWN', Ref, process, Pid, _} -> unreachable
                 after Wait -> exit(Pid, kill), unreachable
                 end,
         Node#{<<"state">> => State}
     end || {Node, {Pid, Ref}} <- Checks].

check_node(#{<<"host">> := _} = Node, Timeout, Dir) ->
    terrain_lab_hosts:check_remote(Node, Timeout, Dir);
check_node(#{<<"node">> := Name} = Node, _Timeout, _Dir) ->
    case net_kernel:connect_node(binary_to_atom(Name)) of
        true -> up;
        false ->
            case Node of
                #{<<"os_pid">> := P} when is_binary(P) ->
                    case terrain_lab_os:alive(binary_to_list(P)) of
                        true -> unreachable;
                        false -> down
                    end;
                _ -> down
            end
    end.

%%--------------------------------------------------------------------
%% stop

%% The recorded state; when cluster.json is missing but pid files are there (an `up'
%% that was killed halfway), a state made from the pid files.
read_state_or_pid_files(Dir) ->
    case terrain_lab_cluster_state:read(Dir) of
        {error, {cluster_state, {no_cluster, _}}} = NoCluster ->
            case terrain_lab_cluster_state:pid_files(Dir) of
                [] -> NoCluster;
                Files ->
                    Nodes = [#{<<"node">> => list_to_binary(filename:basename(F, ".pid")),
                               <<"name">> => list_to_binary(filename:basename(F, ".pid")),
                               <<"os_pid">> => case read_pid(F) of {ok, P} -> list_to_binary(P); error -> null end}
                             || F <- Files],
                    {ok, #{<<"nodes">> => Nodes}}
            end;
        Other ->
            Other
    end.

%% Is this recorded node's VM still running? Checked by its OS pid, which must still be
%% a BEAM started for this state directory.
vm_running(#{<<"host">> := _} = Node, Dir) ->
    terrain_lab_hosts:remote_running(Node, Dir);
vm_running(#{<<"os_pid">> := P}, Dir) when is_binary(P) ->
    owned_vm(binary_to_list(P), Dir);
vm_running(_, _) ->
    false.

owned_vm(OsPid, Dir) ->
    terrain_lab_os:alive(OsPid) andalso
        case file:read_file("/proc/" ++ OsPid ++ "/cmdline") of
            {ok, Cmdline} -> binary:match(Cmdline, list_to_binary(filename:join(Dir, "nodes"))) =/= nomatch;
            {error, _} -> false
        end.

stop_nodes(#{<<"nodes">> := Nodes}, Timeout, Dir) ->
    Self = self(),
    Workers = [spawn_monitor(fun() -> Self ! {self(), stop_node(Node, Timeout, Dir)} end) || Node <- Nodes],
    [receive {Pid, Result} -> erlang:demonitor(Ref, [flush]), Result;
             {'DOWN', Ref, process, Pid, Why} -> {maps:get(<<"node">>, Node), io_lib:format("still running (~0p)", [Why])}
     end || {Node, {Pid, Ref}} <- lists:zip(Nodes, Workers)].

stop_node(#{<<"host">> := _} = Record, Timeout, Dir) ->
    terrain_lab_hosts:stop_remote(Record, Timeout, Dir);
stop_node(#{<<"node">> := NodeBin} = Record, Timeout, Dir) ->
    Node = binary_to_atom(NodeBin),
    OsPid = case maps:get(<<"os_pid">>, Record, null) of null -> undefined; P -> binary_to_list(P) end,
    Halted = case lists:member(Node, nodes(hidden) ++ nodes()) orelse net_kernel:connect_node(Node) of
                 true ->
                     erpc:cast(Node, erlang, halt, []),
                     true;
                 false ->
                     false
             end,
    Gone = case OsPid of
               undefined -> Halted andalso await_nodedown(Node, Timeout);
               _ -> await_os_exit(OsPid, Timeout)
           end,
    How = if
              Gone andalso Halted -> "stopped";
              Gone -> "was not running";
              OsPid =/= undefined ->
                  case owned_vm(OsPid, Dir) andalso terrain_lab_os:kill(OsPid) of
                      true -> "killed (OS pid " ++ OsPid ++ ")";
                      false -> "was not running"
                  end;
              true -> "still running (no OS pid recorded)"
          end,
    {NodeBin, How}.

await_os_exit(OsPid, Timeout) ->
    terrain_lab_os:await_exit([OsPid], Timeout) =:= [].

await_nodedown(Node, Timeout) ->
    monitor_node(Node, true),
    receive {nodedown, Node} -> true
    after Timeout -> monitor_node(Node, false), false
    end.
