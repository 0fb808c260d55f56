%% @private
%% @doc Persistent clusters for the CLI: `terrain up', `terrain status', `terrain down'.
%%
%% `up' starts every node of a spec as a detached VM and records it in the state
%% directory (default `.terrain/', or `--state-dir', or env `TERRAIN_STATE_DIR'):
%% <ul>
%% <li>`cluster.json' — format `terrain.state/1': cluster name, spec path, cookie file,
%%     whether the network is emulated (`netem') with the spec's link levels
%%     (`levels'), and per node its name, group path, schedulers and OS pid;</li>
%% <li>`cookie' — a random cookie for this cluster, mode 0600, never printed;</li>
%% <li>`nodes/NAME.pid' — each VM writes its OS pid here first thing, so even a node
%%     that never became reachable can be stopped.</li>
%% </ul>
%% The cookie never appears on a command line: a node starts undistributed, reads the
%% cookie file, and only then starts distribution. `down' stops exactly the recorded
%% nodes, by node name, falling back to the recorded OS pid (checked to still be that
%% node's VM before it is killed).
%%
%% With network emulation on (`--netem auto', the default, turns it on when the spec
%% has link options), every node starts with `terrain_lab_netem:vm_args/3', so that
%% its connections to the other nodes cross the spec's links from boot on.
-module(terrain_lab_up).

%% API (CLI handlers)
-export([up/3,
         status/3,
         down/3]).

%% Internal exports
-export([connect/1,
         read_state/1,
         state_dir/1,
         format_error/1]).

-define(STATE_FORMAT, <<"terrain.state/1">>).
-define(STATUS_FORMAT, <<"terrain.status/1">>).
-define(DEFAULT_STATE_DIR, ".terrain").

%%--------------------------------------------------------------------
%% CLI handlers

%% @doc `terrain up SPEC'.
-spec up(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
up(Options, [SpecFile], Io) ->
    Dir = state_dir(Options),
    maybe_ok([fun() -> terrain_lab_spec:read(SpecFile) end,
              fun(Spec) -> with_netem(Spec, maps:get(netem, Options, "auto")) end,
              fun(SpecNetem) -> refuse_if_running(Dir, SpecNetem) end,
              fun({Spec, Netem}) -> start_detached(Spec, Netem, filename:absname(SpecFile), Dir, Options, Io) end]).

%% @doc `terrain status [--json]'.
-spec status(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
status(Options, [], Io) ->
    Dir = state_dir(Options),
    case read_state(Dir) of
        {ok, State} ->
            ok = start_client(Dir),
            Nodes = check_nodes(State, maps:get(timeout, Options)),
            case maps:get(json, Options) of
                true -> print_status_json(State, Nodes, Io);
                false -> print_status_table(State, Nodes, Io)
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc `terrain down'.
-spec down(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
down(Options, [], Io) ->
    Dir = state_dir(Options),
    case read_state_or_pid_files(Dir) of
        {ok, State} ->
            ok = start_client(Dir),
            Results = stop_nodes(State, maps:get(timeout, Options), Dir),
            lists:foreach(fun({Node, How}) -> terrain_lab_cli:out(Io, "~-28ts ~ts~n", [Node, How]) end, Results),
            case [N || {N, "still running" ++ _} <- Results] of
                [] -> remove_state(Dir), ok;
                Left -> {error, {up, {still_running, Left}}}
            end;
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Internal exports

%% @doc Connects this (CLI) VM to the running cluster as a hidden node and returns
%% its nodes. `nodes' (a comma-separated string) names the nodes instead of the
%% recorded state.
-spec connect(#{atom() => term()}) -> {ok, [node()]} | {error, term()}.
connect(Options) ->
    Dir = state_dir(Options),
    case maps:get(nodes, Options, undefined) of
        Names when is_list(Names), Names =/= [] ->
            ok = start_client(Dir),
            {ok, [list_to_atom(N) || N <- string:lexemes(Names, ",")]};
        _ ->
            case read_state(Dir) of
                {ok, #{<<"nodes">> := Nodes}} ->
                    ok = start_client(Dir),
                    {ok, [binary_to_atom(N) || #{<<"node">> := N} <- Nodes]};
                {error, _} = Error ->
                    Error
            end
    end.

%% @doc The recorded state of the cluster in `Dir'.
-spec read_state(file:filename()) -> {ok, map()} | {error, term()}.
read_state(Dir) ->
    File = filename:join(Dir, "cluster.json"),
    case terrain_json:read_file(File) of
        {ok, #{<<"format">> := ?STATE_FORMAT} = State} -> {ok, State};
        {ok, #{<<"format">> := Other}} -> {error, {up, {unknown_format, File, Other}}};
        {ok, _} -> {error, {up, {unknown_format, File, none}}};
        {error, {file, _, enoent}} -> {error, {up, {no_cluster, Dir}}};
        {error, {file, _, Why}} -> {error, {file, File, Why}};
        {error, {json, _, _} = Why} -> {error, {up, {corrupt_state, File, Why}}}
    end.

%% @doc The state directory: `--state-dir', else env `TERRAIN_STATE_DIR', else `.terrain'.
-spec state_dir(#{atom() => term()}) -> file:filename().
state_dir(Options) ->
    case maps:get(state_dir, Options, ?DEFAULT_STATE_DIR) of
        ?DEFAULT_STATE_DIR ->
            filename:absname(os:getenv("TERRAIN_STATE_DIR", ?DEFAULT_STATE_DIR));
        Dir ->
            filename:absname(Dir)
    end.

%% @doc A sentence for the errors of this module.
-spec format_error(term()) -> iolist().
format_error({up, {already_running, Dir, Nodes}}) ->
    io_lib:format("a cluster recorded in ~ts is still running (~ts); stop it with 'terrain down' first",
                  [Dir, lists:join(", ", Nodes)]);
format_error({up, {no_cluster, Dir}}) ->
    io_lib:format("no cluster is recorded in ~ts; start one with 'terrain up SPEC'", [Dir]);
format_error({up, {unknown_format, File, Format}}) ->
    io_lib:format("~ts has format ~0tp, expected ~ts", [File, Format, ?STATE_FORMAT]);
format_error({up, {corrupt_state, File, Why}}) ->
    io_lib:format("~ts is not valid JSON: ~ts", [File, terrain:format_error(Why)]);
format_error({up, {not_started, Failed}}) ->
    io_lib:format("the cluster did not come up and was stopped again: ~ts",
                  [lists:join("; ", [io_lib:format("~ts: ~ts", [N, W]) || {N, W} <- Failed])]);
format_error({up, {still_running, Nodes}}) ->
    io_lib:format("could not stop ~ts; the state is kept", [lists:join(", ", Nodes)]);
format_error({up, {bad_netem, Value}}) ->
    io_lib:format("--netem expects auto, on or off, got '~ts'", [Value]).

%%--------------------------------------------------------------------
%% up

maybe_ok([First | Rest]) ->
    lists:foldl(fun(Step, {ok, Value}) -> Step(Value);
                   (_Step, Error) -> Error
                end, First(), Rest).

with_netem(Spec, "auto") -> {ok, {Spec, terrain_lab_netem:enabled(Spec)}};
with_netem(Spec, "on") -> {ok, {Spec, true}};
with_netem(Spec, "off") -> {ok, {Spec, false}};
with_netem(_Spec, Other) -> {error, {up, {bad_netem, Other}}}.

refuse_if_running(Dir, Spec) ->
    case read_state_or_pid_files(Dir) of
        {ok, State} ->
            case [binary_to_list(N) || #{<<"node">> := N} = Node <- maps:get(<<"nodes">>, State),
                                       vm_running(Node, Dir)] of
                [] -> remove_state(Dir), {ok, Spec};
                Running -> {error, {up, {already_running, Dir, Running}}}
            end;
        {error, {up, {no_cluster, _}}} ->
            {ok, Spec};
        {error, _} = Error ->
            Error
    end.

start_detached(Spec, Netem, SpecPath, Dir, Options, Io) ->
    Prefix = maps:get(prefix, Options),
    Deadline = erlang:monotonic_time(millisecond) + maps:get(timeout, Options),
    ok = filelib:ensure_dir(filename:join([Dir, "nodes", "x"])),
    ok = write_cookie(Dir),
    ok = start_client(Dir),
    Nodes = [{NodeSpec, terrain_lab_dist:node_name(Prefix, Name)} || #{name := Name} = NodeSpec <- terrain_lab_spec:nodes(Spec)],
    terrain_lab_cli:progress(Io, "starting ~b nodes of ~ts~n", [length(Nodes), SpecPath]),
    _ = Netem andalso terrain_lab_cli:progress(Io, "network emulation on: ~ts~n", [netem_summary(Spec)]),
    lists:foreach(fun({#{name := Name} = NodeSpec, Node}) ->
                          NetemArgs = case Netem of
                                          true -> terrain_lab_netem:vm_args(Spec, Prefix, Name);
                                          false -> []
                                      end,
                          spawn_vm(NodeSpec, Node, Dir, NetemArgs)
                  end, Nodes),
    Self = self(),
    Topology = terrain_lab_spec:topology(Spec, fun(Name) -> proplists:get_value(Name, [{N, Node} || {#{name := N}, Node} <- Nodes]) end),
    Workers = [spawn_monitor(fun() -> Self ! {self(), bring_up(NodeSpec#{topology => Topology}, Node, Dir, Deadline)} end)
               || {NodeSpec, Node} <- Nodes],
    Results = [receive {Pid, Result} -> erlang:demonitor(Ref, [flush]), Result;
                       {'DOWN', Ref, process, Pid, Why} -> {error, {crashed, Why}}
               end || {Pid, Ref} <- Workers],
    State = #{format => ?STATE_FORMAT,
              cluster => maps:get(name, Spec),
              spec => list_to_binary(SpecPath),
              cookie_file => list_to_binary(filename:join(Dir, "cookie")),
              started_at => terrain_lab_run:timestamp(),
              netem => Netem,
              levels => terrain_lab_netem:level_records(Spec),
              nodes => [node_record(NodeSpec, Node, Dir, Result)
                        || {{NodeSpec, Node}, Result} <- lists:zip(Nodes, Results)]},
    ok = terrain_json:write_file(filename:join(Dir, "cluster.json"), State),
    case [{atom_to_list(Node), format_reason(Why)} || {{_, Node}, {error, Why}} <- lists:zip(Nodes, Results)] of
        [] ->
            terrain_lab_cli:progress(Io, "cluster ~ts is up; state in ~ts~n", [maps:get(name, Spec), Dir]),
            print_nodes(maps:get(nodes, State), Io);
        Failed ->
            {ok, Recorded} = read_state(Dir),
            _ = stop_nodes(Recorded, 5000, Dir),
            remove_state(Dir),
            {error, {up, {not_started, Failed}}}
    end.

write_cookie(Dir) ->
    File = filename:join(Dir, "cookie"),
    Cookie = binary:encode_hex(crypto:strong_rand_bytes(20)),
    _ = file:delete(File),
    {ok, Fd} = file:open(File, [write, exclusive, raw]),
    ok = file:change_mode(File, 8#600),
    ok = file:write(Fd, Cookie),
    ok = file:close(Fd).

read_cookie(Dir) ->
    {ok, Bin} = file:read_file(filename:join(Dir, "cookie")),
    binary_to_atom(string:trim(Bin)).

start_client(Dir) ->
    case terrain_lab_dist:ensure_started(#{hidden => true, name => list_to_atom("terrain_cli_" ++ os:getpid())}) of
        ok ->
            _ = filelib:is_regular(filename:join(Dir, "cookie")) andalso erlang:set_cookie(read_cookie(Dir)),
            ok;
        {error, _} = Error ->
            Error
    end.

netem_summary(Spec) ->
    lists:join(", ", [[Level, " ", level_text(Record)]
                      || #{level := Level} = Record <- terrain_lab_netem:level_records(Spec),
                         level_text(Record) =/= "-"]).

%% A detached VM that writes its pid, reads the cookie, and only then goes distributed
%% (through the netem epmd module when `NetemArgs' say so).
spawn_vm(NodeSpec, Node, Dir, NetemArgs) ->
    [Short, _Host] = string:split(atom_to_list(Node), "@"),
    PidFile = pid_file(Dir, NodeSpec),
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

pid_file(Dir, #{name := Name}) ->
    filename:join([Dir, "nodes", atom_to_list(Name) ++ ".pid"]).

bring_up(NodeSpec, Node, Dir, Deadline) ->
    case await_ping(Node, Deadline) of
        ok ->
            terrain_lab_cluster:setup_node(NodeSpec, Node, Deadline);
        timeout ->
            case read_pid(pid_file(Dir, NodeSpec)) of
                {ok, _} -> {error, not_reachable};
                error -> {error, vm_did_not_start}
            end
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

node_record(#{name := Name, path := Path} = NodeSpec, Node, Dir, Result) ->
    OsPid = case Result of
                {ok, #{os_pid := P}} -> list_to_binary(P);
                {error, _} -> case read_pid(pid_file(Dir, NodeSpec)) of {ok, P} -> list_to_binary(P); error -> null end
            end,
    #{name => Name, node => Node, group_path => Path, os_pid => OsPid,
      schedulers => case Result of {ok, #{schedulers := S}} -> S; _ -> null end}.

print_nodes(Nodes, Io) ->
    terrain_lab_cli:out(Io, "~-28s ~-24s ~10s ~8s~n", ["NODE", "GROUP PATH", "SCHEDULERS", "OS PID"]),
    lists:foreach(fun(#{node := Node, group_path := Path, schedulers := S, os_pid := P}) ->
                          terrain_lab_cli:out(Io, "~-28s ~-24s ~10w ~8s~n",
                                              [Node, path_text(Path), S, P])
                  end, Nodes).

path_text(Path) ->
    lists:join("/", [to_list(P) || P <- Path]).

to_list(A) when is_atom(A) -> atom_to_list(A);
to_list(B) when is_binary(B) -> binary_to_list(B).

format_reason(Why) ->
    io_lib:format("~0tp", [Why]).

%%--------------------------------------------------------------------
%% status

%% Every node is checked at once under one deadline.
check_nodes(#{<<"nodes">> := Nodes}, Timeout) ->
    Self = self(),
    Checks = [{Node, spawn_monitor(fun() -> Self ! {self(), check_node(Node)} end)} || Node <- Nodes],
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    [begin
         Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
         State = receive {Pid, S} -> erlang:demonitor(Ref, [flush]), S;
                         {'DOWN', Ref, process, Pid, _} -> unreachable
                 after Wait -> exit(Pid, kill), unreachable
                 end,
         Node#{<<"state">> => State}
     end || {Node, {Pid, Ref}} <- Checks].

check_node(#{<<"node">> := Name} = Node) ->
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

print_status_table(State, Nodes, Io) ->
    #{<<"cluster">> := Cluster, <<"spec">> := Spec} = State,
    terrain_lab_cli:out(Io, "cluster ~ts (~ts), started ~ts~n",
                        [Cluster, Spec, maps:get(<<"started_at">>, State)]),
    terrain_lab_cli:out(Io, "~-28s ~-24s ~10s ~8s ~s~n", ["NODE", "GROUP PATH", "SCHEDULERS", "OS PID", "STATE"]),
    lists:foreach(fun(N) ->
                          terrain_lab_cli:out(Io, "~-28ts ~-24ts ~10ts ~8ts ~s~n",
                                              [maps:get(<<"node">>, N), path_text(maps:get(<<"group_path">>, N)),
                                               text(maps:get(<<"schedulers">>, N)), text(maps:get(<<"os_pid">>, N)),
                                               maps:get(<<"state">>, N)])
                  end, Nodes),
    Up = length([x || #{<<"state">> := up} <- Nodes]),
    terrain_lab_cli:out(Io, "~b of ~b nodes reachable~n", [Up, length(Nodes)]),
    print_levels(State, Io).

%% The spec's link levels: between two nodes, the level of their lowest common group
%% applies (recorded by `up'; absent from states written before network emulation).
print_levels(#{<<"levels">> := Levels} = State, Io) ->
    Netem = case maps:get(<<"netem">>, State, false) of
                true -> "on";
                false -> "off: the spec's links are not applied"
            end,
    terrain_lab_cli:out(Io, "~nnetwork emulation ~ts~n", [Netem]),
    terrain_lab_cli:out(Io, "~-28s ~12s ~12s ~16s ~12s~n", ["LEVEL", "LATENCY", "JITTER", "BANDWIDTH", "RTT"]),
    lists:foreach(fun(L) ->
                          Latency = maps:get(<<"latency_us">>, L),
                          terrain_lab_cli:out(Io, "~-28ts ~12ts ~12ts ~16ts ~12ts~n",
                                              [maps:get(<<"level">>, L),
                                               unit(Latency, " us"), unit(maps:get(<<"jitter_us">>, L), " us"),
                                               unit(maps:get(<<"bandwidth_bytes_per_s">>, L), " B/s"),
                                               unit(case Latency of null -> null; _ -> 2 * Latency end, " us")])
                  end, Levels);
print_levels(_State, _Io) ->
    ok.

level_text(#{latency_us := L, jitter_us := J, bandwidth_bytes_per_s := B}) ->
    case [T || T <- [unit(L, " us"), case J of null -> "-"; _ -> ["+-", unit(J, " us")] end, unit(B, " B/s")],
               T =/= "-"] of
        [] -> "-";
        Parts -> lists:join(" ", Parts)
    end.

unit(null, _Unit) -> "-";
unit(Value, Unit) -> integer_to_list(Value) ++ Unit.

print_status_json(State, Nodes, Io) ->
    Status = #{format => ?STATUS_FORMAT,
               cluster => maps:get(<<"cluster">>, State),
               spec => maps:get(<<"spec">>, State),
               cookie_file => maps:get(<<"cookie_file">>, State),
               started_at => maps:get(<<"started_at">>, State),
               netem => maps:get(<<"netem">>, State, false),
               levels => maps:get(<<"levels">>, State, []),
               nodes => Nodes},
    terrain_lab_cli:out(Io, "~ts~n", [terrain_json:encode(Status, #{pretty => true})]).

text(null) -> "-";
text(I) when is_integer(I) -> integer_to_list(I);
text(B) when is_binary(B) -> B.

%%--------------------------------------------------------------------
%% down

%% The recorded state; when cluster.json is missing but pid files are there (an `up'
%% that was killed halfway), a state made from the pid files.
read_state_or_pid_files(Dir) ->
    case read_state(Dir) of
        {error, {up, {no_cluster, _}}} = NoCluster ->
            case filelib:wildcard(filename:join([Dir, "nodes", "*.pid"])) of
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

remove_state(Dir) ->
    _ = [file:delete(F) || F <- filelib:wildcard(filename:join([Dir, "nodes", "*.pid"]))],
    _ = file:del_dir(filename:join(Dir, "nodes")),
    _ = file:delete(filename:join(Dir, "cluster.json")),
    _ = file:delete(filename:join(Dir, "cookie")),
    _ = file:del_dir(Dir),
    ok.
