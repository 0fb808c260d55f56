%% @private
%% @doc Makes terrain's code available on a node the lab starts.
%%
%% When this node loaded terrain from directories on disk (a release, `rebar3 shell',
%% tests) new nodes get `-pa' arguments for them. When it runs from an archive (the
%% `terrain' escript) the directories do not exist for other VMs, so the object code
%% and application specs are sent over distribution instead.
-module(terrain_lab_code).

%% API
-export([vm_args/0,
         ensure_loaded/2]).

-define(APPS, [terrain, terrain_lab]).

%% @doc `-pa' arguments for the applications' ebin directories that exist on disk.
-spec vm_args() -> [string()].
vm_args() ->
    lists:append([["-pa", Dir] || Dir <- disk_dirs()]).

%% @doc Loads terrain's modules and application specs on `Node' unless it has them
%% already. Every remote call carries `Timeout' (ms).
-spec ensure_loaded(node(), timeout()) -> ok | {error, {code_load, node(), term()}}.
ensure_loaded(Node, Timeout) ->
    try erpc:call(Node, code, which, [terrain], Timeout) of
        non_existing -> push(Node, Timeout);
        _ -> ok
    catch
        Class:Reason -> {error, {code_load, Node, {Class, Reason}}}
    end.

disk_dirs() ->
    [Dir || App <- ?APPS,
            Dir <- [filename:dirname(code:which(app_module(App)))],
            filelib:is_dir(Dir)].

app_module(terrain) -> terrain;
app_module(terrain_lab) -> terrain_lab_cli.

push(Node, Timeout) ->
    try
        lists:foreach(fun(App) -> push_app(Node, App, Timeout) end, ?APPS)
    catch
        throw:{load_failed, What} -> {error, {code_load, Node, What}};
        Class:Reason -> {error, {code_load, Node, {Class, Reason}}}
    end.

push_app(Node, App, Timeout) ->
    _ = application:load(App),
    {ok, Keys} = application:get_all_key(App),
    {ok, Modules} = application:get_key(App, modules),
    Binaries = [object_code(M) || M <- Modules],
    case erpc:call(Node, code, atomic_load, [Binaries], Timeout) of
        ok -> ok;
        {error, Failed} -> throw({load_failed, Failed})
    end,
    Spec = {application, App, [KV || {K, _} = KV <- Keys, K =/= start_phases orelse element(2, KV) =/= undefined]},
    case erpc:call(Node, application, load, [Spec], Timeout) of
        ok -> ok;
        {error, {already_loaded, App}} -> ok;
        {error, Why} -> throw({load_failed, {App, Why}})
    end.

object_code(Module) ->
    case code:get_object_code(Module) of
        {Module, Binary, File} -> {Module, File, Binary};
        error -> throw({load_failed, {no_object_code, Module}})
    end.
