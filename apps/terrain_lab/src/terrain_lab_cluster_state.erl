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

%% API: writing the state (terrain_lab_launch)
-export([write/2,
         create_cookie/1,
         pid_file/2,
         pid_files/1,
         remove/1]).

%% API: errors
-export([format_error/1]).

-export_type([error_reason/0]).

-define(FORMAT, <<"terrain.state/1">>).
-define(DEFAULT_DIR, ".terrain").

-type error_reason() :: {cluster_state, {no_cluster, file:filename()}
                                      | {unknown_format, file:filename(), term()}
                                      | {corrupt_state, file:filename(), term()}}
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

%% @doc The recorded state of the cluster in `Dir' (`cluster.json' as read).
-spec read(file:filename()) -> {ok, map()} | {error, error_reason()}.
read(Dir) ->
    File = filename:join(Dir, "cluster.json"),
    case terrain_json:read_file(File) of
        {ok, #{<<"format">> := ?FORMAT} = State} -> {ok, State};
        {ok, #{<<"format">> := Other}} -> {error, {cluster_state, {unknown_format, File, Other}}};
        {ok, _} -> {error, {cluster_state, {unknown_format, File, none}}};
        {error, {file, _, enoent}} -> {error, {cluster_state, {no_cluster, Dir}}};
        {error, {file, _, Why}} -> {error, {file, File, Why}};
        {error, {json, _, _} = Why} -> {error, {cluster_state, {corrupt_state, File, Why}}}
    end.

%% @doc Connects this (CLI) VM to the running cluster as a hidden node and returns
%% its nodes. Option `nodes' (a comma-separated string) names the nodes instead of the
%% recorded state; `state_dir' as in {@link state_dir/1}.
-spec connect(#{atom() => term()}) -> {ok, [node()]} | {error, term()}.
connect(Options) ->
    Dir = state_dir(Options),
    case maps:get(nodes, Options, undefined) of
        Names when is_list(Names), Names =/= [] ->
            ok = connect_cli(Dir),
            {ok, [list_to_atom(N) || N <- string:lexemes(Names, ",")]};
        _ ->
            case read(Dir) of
                {ok, #{<<"nodes">> := Nodes}} ->
                    ok = connect_cli(Dir),
                    {ok, [binary_to_atom(N) || #{<<"node">> := N} <- Nodes]};
                {error, _} = Error ->
                    Error
            end
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
            _ = filelib:is_regular(cookie_file(Dir)) andalso erlang:set_cookie(read_cookie(Dir)),
            ok;
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Writing the state

%% @doc Writes `cluster.json' (the format key is added here).
-spec write(file:filename(), map()) -> ok | {error, term()}.
write(Dir, State) ->
    terrain_json:write_file(filename:join(Dir, "cluster.json"), State#{format => ?FORMAT}).

%% @doc Writes a new random cookie to `Dir/cookie' with mode 0600 and returns the file.
-spec create_cookie(file:filename()) -> file:filename().
create_cookie(Dir) ->
    File = cookie_file(Dir),
    Cookie = binary:encode_hex(crypto:strong_rand_bytes(20)),
    _ = file:delete(File),
    {ok, Fd} = file:open(File, [write, exclusive, raw]),
    ok = file:change_mode(File, 8#600),
    ok = file:write(Fd, Cookie),
    ok = file:close(Fd),
    File.

%% @doc The file where the VM of the spec node `Name' writes its OS pid.
-spec pid_file(file:filename(), atom()) -> file:filename().
pid_file(Dir, Name) ->
    filename:join([Dir, "nodes", atom_to_list(Name) ++ ".pid"]).

%% @doc The pid files present in `Dir'.
-spec pid_files(file:filename()) -> [file:filename()].
pid_files(Dir) ->
    filelib:wildcard(filename:join([Dir, "nodes", "*.pid"])).

%% @doc Removes the state: pid files, `cluster.json', the cookie, and the directory
%% itself when it is then empty.
-spec remove(file:filename()) -> ok.
remove(Dir) ->
    _ = [file:delete(F) || F <- pid_files(Dir)],
    _ = file:del_dir(filename:join(Dir, "nodes")),
    _ = file:delete(filename:join(Dir, "cluster.json")),
    _ = file:delete(cookie_file(Dir)),
    _ = file:delete(filename:join(Dir, "cli_host")),
    _ = file:del_dir(Dir),
    ok.

%%--------------------------------------------------------------------
%% Errors

%% @doc A sentence for the errors of this module.
-spec format_error({cluster_state, term()}) -> iolist().
format_error({cluster_state, {no_cluster, Dir}}) ->
    io_lib:format("no cluster is recorded in ~ts; start one with 'terrain up SPEC'", [Dir]);
format_error({cluster_state, {unknown_format, File, Format}}) ->
    io_lib:format("~ts has format ~0tp, expected ~ts", [File, Format, ?FORMAT]);
format_error({cluster_state, {corrupt_state, File, Why}}) ->
    io_lib:format("~ts is not valid JSON: ~ts", [File, terrain:format_error(Why)]).

%%--------------------------------------------------------------------
%% Internal functions

cookie_file(Dir) ->
    filename:join(Dir, "cookie").

read_cookie(Dir) ->
    {ok, Bin} = file:read_file(cookie_file(Dir)),
    binary_to_atom(string:trim(Bin)).
