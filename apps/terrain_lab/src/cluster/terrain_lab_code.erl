%% @private
%% @doc Makes terrain's code available to the VMs the lab starts, as `-pa' arguments.
%%
%% When this VM loaded terrain from directories on disk (a release, `rebar3 shell',
%% tests) those directories are used. When it runs from an archive (the `terrain'
%% escript) other VMs cannot read them, so the object code and `.app' files are
%% written once to a cache directory named by a hash of the code
%% (`$XDG_CACHE_HOME/terrain/code-<hash>/<app>/ebin', see `filename:basedir/2'), and
%% that is used. Code on disk at boot matters: a node's `-epmd_module' (network
%% emulation) is loaded before any code could be sent to it.
-module(terrain_lab_code).

%% API
-export([applications/0,
         vm_args/1]).

%% exports_not_used: applications/0 is the list docs/HOSTS.md names, checked by
%% terrain_lab_vm_tests.
-ignore_xref([{applications, 0}]).

%% The one list of terrain's applications a lab node loads: the lab and every
%% application it depends on (terrain needs terrain_json, terrain_paths needs
%% terrain_events), lower layers first. docs/HOSTS.md ("Code") names them all.
-define(APPS, [terrain_json, terrain, terrain_paths, terrain_events, terrain_bench, terrain_workloads, terrain_lab]).

%% @doc terrain's applications, each of which a lab node needs on its code path.
-spec applications() -> [atom()].
applications() ->
    ?APPS.

%% @doc `-pa' arguments for terrain's ebin directories: this VM's (`local'), or
%% `Root/<app>/ebin' for each application (`{root, Root}', a directory on the VM's host,
%% `terrain up --code-path').
-spec vm_args(local | {root, file:filename()}) -> [string()].
vm_args(local) ->
    lists:append([["-pa", Dir] || Dir <- ebin_dirs()]);
vm_args({root, Root}) ->
    lists:append([["-pa", filename:join([Root, atom_to_list(App), "ebin"])] || App <- ?APPS]).

%% The ebin directories of terrain's applications, on disk.
ebin_dirs() ->
    Loaded = [{App, filename:dirname(code:which(app_module(App)))} || App <- ?APPS],
    case lists:all(fun({_, Dir}) -> filelib:is_dir(Dir) end, Loaded) of
        true -> [Dir || {_, Dir} <- Loaded];
        false -> materialise()
    end.

app_module(terrain_json) -> terrain_json;
app_module(terrain) -> terrain;
app_module(terrain_paths) -> terrain_paths;
app_module(terrain_events) -> terrain_events;
app_module(terrain_bench) -> terrain_bench;
app_module(terrain_workloads) -> terrain_workloads;
app_module(terrain_lab) -> terrain_lab_cli.

%% Writes the applications' code to the cache (once per distinct code) and returns
%% the ebin directories there.
materialise() ->
    Apps = [{App, app_code(App)} || App <- ?APPS],
    Hash = binary:encode_hex(crypto:hash(sha256,
                                         term_to_binary([{A, [B || {_, B} <- Mods]} || {A, {_, Mods}} <- Apps]))),
    Root = filename:join(filename:basedir(user_cache, "terrain"), "code-" ++ binary_to_list(binary:part(Hash, 0, 16))),
    [ensure_written(filename:join([Root, atom_to_list(App), "ebin"]), App, Code) || {App, Code} <- Apps].

app_code(App) ->
    _ = application:load(App),
    {ok, Keys} = application:get_all_key(App),
    {ok, Modules} = application:get_key(App, modules),
    AppFile = io_lib:format("~0tp.~n", [{application, App, [KV || {K, _} = KV <- Keys, K =/= start_phases]}]),
    {AppFile, [{M, object_code(M)} || M <- Modules]}.

object_code(Module) ->
    case code:get_object_code(Module) of
        {Module, Binary, _File} -> Binary;
        error -> error({no_object_code, Module})
    end.

%% Written to a temporary directory and renamed, so that concurrent CLIs never see a
%% half-written cache. The directory is this call's own (OS pid and a unique integer):
%% the launcher's workers start VMs in parallel, each asking for the code.
ensure_written(Ebin, App, {AppFile, Modules}) ->
    case filelib:is_regular(filename:join(Ebin, atom_to_list(App) ++ ".app")) of
        true ->
            Ebin;
        false ->
            Tmp = Ebin ++ ".tmp" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive])),
            Remove = fun() -> _ = [file:delete(F) || F <- filelib:wildcard(filename:join(Tmp, "*"))],
                              file:del_dir(Tmp)
                     end,
            %% a full disk or SIGTERM halfway leaves no partial copy beside the cache
            ok = terrain_lab_cleanup:add({code_cache, Tmp}, Remove),
            Written = terrain_lab_steps:run(
                        [fun(_) -> terrain_lab_files:make_dir(Tmp) end |
                         [fun(_) -> terrain_lab_files:write(filename:join(Tmp, atom_to_list(M) ++ ".beam"), B) end
                          || {M, B} <- Modules]]
                        ++ [fun(_) -> terrain_lab_files:write(filename:join(Tmp, atom_to_list(App) ++ ".app"), AppFile)
                            end], none),
            ok = terrain_lab_cleanup:remove({code_cache, Tmp}),
            case Written of
                ok -> ok;
                {error, Why} -> _ = Remove(), error({code_cache, Why})   % nodes cannot start without it
            end,
            case file:rename(Tmp, Ebin) of
                ok -> Ebin;
                {error, _} ->
                    %% Another CLI wrote it first; theirs is identical.
                    _ = [file:delete(F) || F <- filelib:wildcard(filename:join(Tmp, "*"))],
                    _ = file:del_dir(Tmp),
                    Ebin
            end
    end.
