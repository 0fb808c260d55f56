%% @private
%% @doc The running cluster's state: what `terrain up' recorded, and how the CLI's VM
%% joins that cluster.
%%
%% The state directory (`--state-dir', else env `TERRAIN_STATE_DIR', else `.terrain')
%% holds:
%% <ul>
%% <li>`cluster.json' — format `terrain.state/1': cluster name, spec path, cookie file,
%%     whether the network is emulated (`netem') with the spec's link levels
%%     (`levels'), and per node its name, group path, schedulers and OS pid;</li>
%% <li>`cookie' — a random cookie for this cluster, mode 0600, never printed;</li>
%% <li>`nodes/NAME.pid' — each VM writes its OS pid here first thing, so even a node
%%     that never became reachable can be stopped.</li>
%% <li>`cli_host' — only for a cluster on other hosts: this machine's address, the
%%     host part of the CLI's long node name (terrain_lab_hosts).</li>
%% <li>`tls/' — only for a cluster over TLS: the CA certificate, each node's and the
%%     CLI's certificate, key and option file (terrain_lab_tls).</li>
%% </ul>
%% `terrain_lab_launch' writes it; every command that works on the running cluster
%% reads it here and joins the cluster with {@link connect/1}:
%% ```
%% {ok, Nodes} = terrain_lab_cluster_state:connect(#{state_dir => ".terrain"}),
%% '''
%% The CLI's VM joins as a hidden node `terrain_cli_<OS pid>' with the cluster's cookie.
-module(terrain_lab_cluster_state).

%% API: reading the state and joining the cluster
-export([state_dir/1,
         read/1,
         connect/1,
         connect_cli/1]).

%% API: node names as users write them
-export([resolve/2,
         resolve_node/2,
         check_node_name/1]).

%% API: writing the state (terrain_lab_launch)
-export([write/2,
         create_cookie/1,
         lock/1,
         unlock/1,
         pid_file/2,
         pid_files/1,
         vm_log/2,
         vm_logs/1,
         leftovers/1,
         remove/1,
         remove/2]).

%% API: errors
-export([format_error/1]).

-export_type([error_reason/0]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_STATE).
-define(DEFAULT_DIR, ".terrain").
-define(MAX_NAME, 255).          % characters in an atom, so in a node name

-type error_reason() :: {cluster_state, {no_cluster, file:filename()}
                                      | {unknown_format, file:filename(), term()}
                                      | {corrupt_state, file:filename(), term()}
                                      | {bad_state, file:filename(), string()}
                                      | {unknown_nodes, [string()], [binary()], file:filename()}
                                      | {not_one_node, string(), [node()]}
                                      | {name_too_long, string()}}
                      | {file, file:filename(), term()}.   % formatted by terrain_lab:format_error/1

%%--------------------------------------------------------------------
%% Reading the state and joining the cluster

%% @doc The state directory, absolute: option `state_dir', else env
%% `TERRAIN_STATE_DIR', else `.terrain'.
-spec state_dir(#{atom() => term()}) -> file:filename().
state_dir(Options) ->
    case maps:get(state_dir, Options, ?DEFAULT_DIR) of
        ?DEFAULT_DIR ->
            filename:absname(os:getenv("TERRAIN_STATE_DIR", ?DEFAULT_DIR));
        Dir ->
            filename:absname(Dir)
    end.

%% @doc The recorded state of the cluster in `Dir' (`cluster.json' as read), checked:
%% `nodes' is a list of objects, each with a `node' that is a node name (`name@host',
%% at most 255 characters) and, when present, a string `name', a list `group_path'
%% and an `os_pid' that is a string of digits or null.
-spec read(file:filename()) -> {ok, map()} | {error, error_reason()}.
read(Dir) ->
    File = filename:join(Dir, "cluster.json"),
    case terrain_json:read_file(File) of
        {ok, #{<<"format">> := ?FORMAT} = State} ->
            case check_state(State) of
                ok -> {ok, State};
                {bad, What} -> {error, {cluster_state, {bad_state, File, What}}}
            end;
        {ok, #{<<"format">> := Other}} -> {error, {cluster_state, {unknown_format, File, Other}}};
        {ok, _} -> {error, {cluster_state, {unknown_format, File, none}}};
        {error, {file, _, enoent}} -> {error, {cluster_state, {no_cluster, Dir}}};
        {error, {file, _, Why}} -> {error, {file, File, Why}};
        {error, {json, _, _} = Why} -> {error, {cluster_state, {corrupt_state, File, Why}}}
    end.

%% @doc Connects this (CLI) VM to the running cluster as a hidden node and returns
%% its nodes. Option `nodes' (a comma-separated string of names as {@link resolve/2}
%% takes them) names the nodes instead of the recorded state; `state_dir' as in
%% {@link state_dir/1}.
-spec connect(#{atom() => term()}) -> {ok, [node()]} | {error, term()}.
connect(Options) ->
    Dir = state_dir(Options),
    Nodes = case maps:get(nodes, Options, undefined) of
                Names when is_list(Names), Names =/= [] ->
                    case string:lexemes(Names, ", ") of
                        [] -> {error, {cluster_state, {no_nodes_given, Names}}};   % --nodes ',,,'
                        Given -> resolve(Given, Dir)
                    end;
                _ ->
                    case read(Dir) of
                        {ok, #{<<"nodes">> := Recorded}} -> {ok, [binary_to_atom(N) || #{<<"node">> := N} <- Recorded]};
                        {error, _} = ReadError -> ReadError
                    end
            end,
    case Nodes of
        {ok, _} ->
            case connect_cli(Dir) of
                ok -> Nodes;
                {error, _} = ConnectError -> ConnectError
            end;
        {error, _} ->
            Nodes
    end.

%% @doc The nodes that `Names' stand for, as users write them: the spec's short name
%% of a recorded node (`eu1'), its full node name (`demo_eu1@host'), or a group of the
%% spec (all its nodes), resolved through the cluster recorded in `Dir'; a full name
%% (`name@host') that is not recorded is taken as it is (a node outside the cluster).
%% Any other name is an error that lists the names the cluster knows.
-spec resolve([string()], file:filename()) -> {ok, [node()]} | {error, error_reason()}.
resolve(Names, Dir) ->
    Recorded = case read(Dir) of
                   {ok, #{<<"nodes">> := R}} -> R;
                   {error, _} -> []
               end,
    Resolved = [{Name, resolve_one(Name, Recorded)} || Name <- Names],
    case {[N || {N, too_long} <- Resolved], [N || {N, unknown} <- Resolved]} of
        {[Long | _], _} ->
            {error, {cluster_state, {name_too_long, Long}}};
        {[], []} ->
            {ok, unique(lists:append([Nodes || {_, {ok, Nodes}} <- Resolved]))};
        {[], Unknown} ->
            {error, {cluster_state, {unknown_nodes, Unknown, known_names(Recorded), Dir}}}
    end.

%% @doc The one node that `Name' stands for (as in {@link resolve/2}); a group of
%% several nodes is an error.
-spec resolve_node(string(), file:filename()) -> {ok, node()} | {error, error_reason()}.
resolve_node(Name, Dir) ->
    case resolve([Name], Dir) of
        {ok, [Node]} -> {ok, Node};
        {ok, Nodes} -> {error, {cluster_state, {not_one_node, Name, Nodes}}};
        {error, _} = Error -> Error
    end.

%% @doc Is `Name' short enough to be a node name (an atom: at most 255 characters)?
-spec check_node_name(string()) -> ok | {error, error_reason()}.
check_node_name(Name) ->
    case length(Name) =< ?MAX_NAME of
        true -> ok;
        false -> {error, {cluster_state, {name_too_long, Name}}}
    end.

%% @doc Makes this VM the hidden node `terrain_cli_<OS pid>' and gives it the cookie
%% of the cluster in `Dir' (when there is one).
-spec connect_cli(file:filename()) -> ok | {error, term()}.
connect_cli(Dir) ->
    Name = "terrain_cli_" ++ os:getpid(),
    %% A cluster on other hosts (terrain_lab_hosts) recorded the CLI's address: long names.
    Options = case file:read_file(filename:join(Dir, "cli_host")) of
                  {ok, Host} -> #{name => list_to_atom(Name ++ "@" ++ binary_to_list(Host)), name_domain => longnames};
                  {error, _} -> #{name => list_to_atom(Name)}
              end,
    case terrain_lab_dist:ensure_started(Options#{hidden => true}) of
        ok ->
            case read_cookie(Dir) of
                {ok, Cookie} -> true = erlang:set_cookie(Cookie), ok;
                none -> ok
            end;
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Writing the state

%% @doc Writes `cluster.json' (the format key is added here).
-spec write(file:filename(), map()) -> ok | {error, term()}.
write(Dir, State) ->
    terrain_lab_files:write(filename:join(Dir, "cluster.json"),
                            [terrain_json:encode(State#{format => ?FORMAT}, #{pretty => true}), $\n]).

%% @doc Writes a new random cookie to `Dir/cookie' with mode 0600 and returns the
%% file; a directory that refuses it (read-only, full) is `{write, File, Reason}' and
%% leaves no cookie file.
-spec create_cookie(file:filename()) -> {ok, file:filename()} | {error, {write, file:filename(), term()}}.
create_cookie(Dir) ->
    File = cookie_file(Dir),
    Cookie = binary:encode_hex(crypto:strong_rand_bytes(20)),
    _ = file:delete(File),
    case file:open(File, [write, exclusive, raw]) of
        {ok, Fd} ->
            Written = terrain_lab_steps:run([fun(_) -> file:change_mode(File, 8#600) end,
                                             fun(_) -> file:write(Fd, Cookie) end,
                                             fun(_) -> file:sync(Fd) end], none),
            Closed = file:close(Fd),
            case {Written, Closed} of
                {ok, ok} -> {ok, File};
                {{error, Why}, _} -> _ = file:delete(File), {error, {write, File, Why}};
                {_, {error, Why}} -> _ = file:delete(File), {error, {write, File, Why}}
            end;
        {error, Why} ->
            {error, {write, File, Why}}
    end.

%% @doc Takes the state directory's lock (`Dir/up.lock', created exclusively, holding
%% this OS pid): two commands that start or change the cluster (`terrain up', `up
%% --add', `down --nodes', `netem move') on one state directory never run at once. A
%% lock whose process is gone is stale and taken over.
-spec lock(file:filename()) -> ok | {error, term()}.
lock(Dir) ->
    case terrain_lab_files:make_dir(Dir) of
        ok ->
            case terrain_lab_lock:take(filename:join(Dir, "up.lock")) of
                ok -> ok;
                {error, {locked, _, Pid}} -> {error, {cluster_state, {locked, Dir, Pid}}};
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Releases the lock {@link lock/1} took (the directory goes too when empty).
-spec unlock(file:filename()) -> ok.
unlock(Dir) ->
    ok = terrain_lab_lock:release(filename:join(Dir, "up.lock")),
    _ = file:del_dir(Dir),            % only when nothing else is in it
    ok.

%% A lock left by a process that is gone (an `up' stopped by SIGINT or SIGKILL).
stale_lock(Dir) ->
    case file:read_file(filename:join(Dir, "up.lock")) of
        {ok, Pid} -> Pid =:= <<>> orelse not terrain_lab_os:alive(binary_to_list(Pid));
        {error, _} -> false
    end.

%% @doc The file where the VM of the spec node `Name' writes its OS pid.
-spec pid_file(file:filename(), atom()) -> file:filename().
pid_file(Dir, Name) ->
    filename:join([Dir, "nodes", atom_to_list(Name) ++ ".pid"]).

%% @doc The log of the VM of the spec node `Name' (`Dir/nodes/NAME.log').
-spec vm_log(file:filename(), atom()) -> file:filename().
vm_log(Dir, Name) ->
    filename:join([Dir, "nodes", atom_to_list(Name) ++ ".log"]).

%% @doc The VMs' logs in `Dir'.
-spec vm_logs(file:filename()) -> [file:filename()].
vm_logs(Dir) ->
    filelib:wildcard(filename:join([Dir, "nodes", "*.log"])).

%% @doc The pid files present in `Dir'.
-spec pid_files(file:filename()) -> [file:filename()].
pid_files(Dir) ->
    filelib:wildcard(filename:join([Dir, "nodes", "*.pid"])).

%% @doc What a start that was interrupted before it recorded a cluster (`up' stopped by
%% SIGINT while its VMs booted) left in `Dir': of its cookie, a lock whose process is
%% gone, the `nodes' directory, `spec.cluster' and `cli_host', those present. None while
%% a live process holds the lock: that start is still under way.
-spec leftovers(file:filename()) -> [string()].
leftovers(Dir) ->
    Lock = filename:join(Dir, "up.lock"),
    case filelib:is_regular(Lock) andalso not stale_lock(Dir) of
        true -> [];
        false -> [F || F <- ["cookie", "up.lock", "nodes", "spec.cluster", "cli_host"],
                       filelib:is_file(filename:join(Dir, F))]
    end.

%% @doc Removes the state: pid files, `cluster.json', the cookie, the spec as changed
%% by `up --add', `down --nodes' or `netem move' (`spec.cluster'), the TLS files, a
%% lock whose process is gone, the VMs' logs, and the directory itself when it is then
%% empty.
-spec remove(file:filename()) -> ok.
remove(Dir) ->
    remove(Dir, []).

%% @doc As {@link remove/1}, keeping the logs of the spec nodes `Keep' (VMs that had
%% stopped before `down': what they wrote says why), and the directories they are in.
-spec remove(file:filename(), [binary()]) -> ok.
remove(Dir, Keep) ->
    _ = [file:delete(F) || F <- pid_files(Dir)],
    _ = [file:delete(F) || F <- vm_logs(Dir), not lists:member(list_to_binary(filename:basename(F, ".log")), Keep)],
    _ = file:delete(filename:join(Dir, "spec.cluster")),
    _ = stale_lock(Dir) andalso file:delete(filename:join(Dir, "up.lock")),
    _ = file:del_dir(filename:join(Dir, "nodes")),
    _ = file:delete(filename:join(Dir, "cluster.json")),
    _ = file:delete(cookie_file(Dir)),
    _ = file:delete(filename:join(Dir, "cli_host")),
    ok = terrain_lab_tls:remove(Dir),
    _ = file:del_dir(Dir),
    ok.

%%--------------------------------------------------------------------
%% Errors

%% @doc A sentence for the errors of this module.
-spec format_error({cluster_state, term()}) -> iolist().
format_error({cluster_state, {no_nodes_given, Text}}) ->
    io_lib:format("--nodes '~ts' names no node: give node names separated by commas", [Text]);
format_error({cluster_state, {locked, Dir, Pid}}) ->
    io_lib:format("another terrain command (OS pid ~ts: 'terrain up', 'up --add', 'down --nodes' or 'netem move') "
                  "is starting or changing the cluster in ~ts; nothing was done; wait for it, or use another "
                  "--state-dir", [Pid, Dir]);
format_error({cluster_state, {no_cluster, Dir}}) ->
    io_lib:format("no cluster is recorded in ~ts; start one with 'terrain up SPEC'", [Dir]);
format_error({cluster_state, {unknown_format, File, Format}}) ->
    io_lib:format("~ts has format ~0tp, expected ~ts; 'terrain down --force' removes it", [File, Format, ?FORMAT]);
format_error({cluster_state, {corrupt_state, File, Why}}) ->
    io_lib:format("~ts is not valid JSON: ~ts; 'terrain down --force' removes it", [File, terrain:format_error(Why)]);
format_error({cluster_state, {bad_state, File, What}}) ->
    io_lib:format("~ts is not a cluster state: ~ts; 'terrain down --force' removes it", [File, What]);
format_error({cluster_state, {unknown_nodes, Names, [], Dir}}) ->
    io_lib:format("unknown node~s ~ts: no cluster is recorded in ~ts, so only full node names (name@host) can be used",
                  [plural(Names), lists:join(", ", Names), Dir]);
format_error({cluster_state, {unknown_nodes, Names, Known, _Dir}}) ->
    io_lib:format("unknown node~s ~ts; the cluster knows ~ts (or their full node names)",
                  [plural(Names), lists:join(", ", Names), lists:join(", ", Known)]);
format_error({cluster_state, {not_one_node, Name, Nodes}}) ->
    io_lib:format("~ts names ~b nodes (~ts), expected one",
                  [Name, length(Nodes), lists:join(", ", [atom_to_list(N) || N <- Nodes])]);
format_error({cluster_state, {name_too_long, Name}}) ->
    io_lib:format("node name ~ts... has ~b characters; a node name has at most ~b",
                  [lists:sublist(Name, 40), length(Name), ?MAX_NAME]).

%%--------------------------------------------------------------------
%% Internal functions

cookie_file(Dir) ->
    filename:join(Dir, "cookie").

read_cookie(Dir) ->
    case file:read_file(cookie_file(Dir)) of
        {ok, Bin} ->
            case string:trim(Bin) of
                Cookie when byte_size(Cookie) > 0, byte_size(Cookie) =< ?MAX_NAME -> {ok, binary_to_atom(Cookie)};
                _ -> none
            end;
        {error, _} ->
            none
    end.

plural([_]) -> "";
plural(_) -> "s".

resolve_one(Name, _Recorded) when length(Name) > ?MAX_NAME ->
    too_long;
resolve_one(Name, Recorded) ->
    Bin = unicode:characters_to_binary(Name),
    case [binary_to_atom(Node) || #{<<"node">> := Node} = R <- Recorded, matches(Bin, R)] of
        [] ->
            case string:find(Name, "@") of
                nomatch -> unknown;
                _ -> {ok, [list_to_atom(Name)]}
            end;
        Nodes ->
            {ok, Nodes}
    end.

matches(Name, #{<<"node">> := Node} = Record) ->
    Name =:= Node orelse Name =:= maps:get(<<"name">>, Record, undefined)
        orelse lists:member(Name, maps:get(<<"group_path">>, Record, [])).

known_names(Recorded) ->
    Names = [N || #{<<"name">> := N} <- Recorded],
    Groups = lists:usort(lists:append([P || #{<<"group_path">> := P} <- Recorded])) -- Names,
    Names ++ Groups.

unique(Nodes) ->
    lists:reverse(lists:foldl(fun(N, Acc) -> case lists:member(N, Acc) of true -> Acc; false -> [N | Acc] end end,
                              [], Nodes)).

%% What is wrong with a state's `nodes', if anything.
check_state(#{<<"nodes">> := Nodes}) when is_list(Nodes) ->
    case [What || Node <- Nodes, What <- [check_node_record(Node)], What =/= ok] of
        [] -> ok;
        [What | _] -> {bad, What}
    end;
check_state(#{<<"nodes">> := _}) ->
    {bad, "\"nodes\" is not a list"};
check_state(#{}) ->
    {bad, "it has no \"nodes\""}.

check_node_record(#{<<"node">> := Node} = Record) when is_binary(Node) ->
    Text = unicode:characters_to_list(Node),
    if
        length(Text) > ?MAX_NAME -> "a \"node\" has more than 255 characters";
        length(Text) < 3 -> io_lib:format("\"node\" ~0tp is not name@host", [Node]);
        true ->
            case {string:split(Text, "@"), Record} of
                {[Local, Host], _} when Local =:= ""; Host =:= "" ->
                    io_lib:format("\"node\" ~0tp is not name@host", [Node]);
                {[_], _} -> io_lib:format("\"node\" ~0tp is not name@host", [Node]);
                {_, #{<<"name">> := Name}} when not is_binary(Name) ->
                    io_lib:format("\"name\" of ~ts is not a string", [Node]);
                {_, #{<<"os_pid">> := Pid}} when Pid =/= null, not is_binary(Pid); Pid =:= <<>> ->
                    io_lib:format("\"os_pid\" of ~ts is not a string of digits", [Node]);
                {_, #{<<"os_pid">> := <<_, _/binary>> = Pid}} when is_binary(Pid) ->
                    case lists:all(fun(C) -> C >= $0 andalso C =< $9 end, binary_to_list(Pid)) of
                        true -> check_group_path(Node, Record);
                        false -> io_lib:format("\"os_pid\" of ~ts is not a string of digits", [Node])
                    end;
                _ -> check_group_path(Node, Record)
            end
    end;
check_node_record(#{<<"node">> := Node}) ->
    io_lib:format("\"node\" ~0tp is not a string", [Node]);
check_node_record(Other) ->
    io_lib:format("a node record ~0tp has no \"node\"", [Other]).

check_group_path(Node, #{<<"group_path">> := Path}) ->
    case is_list(Path) andalso lists:all(fun is_binary/1, Path) of
        true -> ok;
        false -> io_lib:format("\"group_path\" of ~ts is not a list of strings", [Node])
    end;
check_group_path(_Node, #{}) ->
    ok.
