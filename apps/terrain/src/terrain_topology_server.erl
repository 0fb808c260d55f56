%% @private
%% @doc Holds this node's topology (RELEASE D3.5 §5.1.5: replaceable at run time).
%%
%% The current topology lives in `persistent_term' under `{terrain_topology, current}'
%% so that every distance, level or selection reads it in the caller without a copy
%% and without a message; replacing it (rare) goes through this server, which
%% serialises writers.
%%
%% Only local processes may replace it: a request from another node is refused
%% (`{error, not_local}') and counted as `remote_writes_refused' in `terrain:stats()',
%% as the attribute server refuses remote writes; casts and other messages are dropped
%% and counted as `malformed_dropped'. Every topology is checked before it is stored
%% ({@link terrain_topology:check/1}: exactly what `terrain_topology:new/2' builds), so
%% a bad one never replaces a good one and distances, levels and selection never
%% crash on it.
%%
%% At start the server takes the topology that is already in place (it survives a
%% restart of this server) or else the `terrain' app env key `topology' (a file name
%% or a topology term). A bad app env value is logged and ignored: the node runs
%% without a topology, every other node counting as `anywhere'.
-module(terrain_topology_server).
-behaviour(gen_server).

%% API
-export([start_link/0,
         current/0,
         put/1,
         forget/0]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(KEY, {terrain_topology, current}).
-define(CALL_TIMEOUT, 5000).

%%--------------------------------------------------------------------
%% API

-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc The current topology, read in the caller.
-spec current() -> terrain_topology:topology() | undefined.
current() ->
    persistent_term:get(?KEY, undefined).

%% @doc Replaces the current topology with a validated one; `{error, Reason}' (see
%% {@link terrain_topology:format_error/1}) if it is not a topology that
%% `terrain_topology' built.
-spec put(terrain_topology:topology()) -> ok | {error, terrain_topology:error_reason()}.
put(Topology) ->
    gen_server:call(?MODULE, {put, Topology}, ?CALL_TIMEOUT).

%% @doc Forgets the topology; for the application's stop, once the server is gone. A
%% restart of the server (or of the attribute processes before it in the supervisor)
%% keeps the topology in force.
-spec forget() -> ok.
forget() ->
    _ = persistent_term:erase(?KEY),
    ok.

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init([]) -> {ok, undefined}.
init([]) ->
    case {current(), application:get_env(terrain, topology)} of
        {undefined, {ok, Source}} ->
            case load(Source) of
                {ok, Topology} ->
                    persistent_term:put(?KEY, Topology);
                {error, Reason} ->
                    logger:error("terrain: ignoring the topology in the app env: ~ts",
                                 [terrain_topology:format_error(Reason)])
            end;
        _ ->
            ok
    end,
    {ok, undefined}.

-spec handle_call(term(), gen_server:from(), undefined) -> {reply, ok | {error, term()}, undefined}.
handle_call(Request, {Pid, _}, State) when node(Pid) =/= node() ->
    terrain_attr_table:count(remote_writes_refused),
    logger:notice("terrain: refused topology request ~0tP from remote process ~0p", [Request, 10, Pid],
                  #{domain => [terrain, topology]}),
    {reply, {error, not_local}, State};
handle_call({put, Topology}, _From, State) ->
    case terrain_topology:check(Topology) of
        {ok, Checked} ->
            persistent_term:put(?KEY, Checked),
            {reply, ok, State};
        {error, _} = Error ->
            {reply, Error, State}
    end;
handle_call(Request, _From, State) ->
    terrain_attr_table:count(malformed_dropped),
    {reply, {error, {unknown_request, Request}}, State}.

-spec handle_cast(term(), undefined) -> {noreply, undefined}.
handle_cast(_Request, State) ->
    terrain_attr_table:count(malformed_dropped),
    {noreply, State}.

-spec handle_info(term(), undefined) -> {noreply, undefined}.
handle_info(_Msg, State) ->
    terrain_attr_table:count(malformed_dropped),
    {noreply, State}.

%% The topology outlives any restart of this server (init/1 takes it up again), also
%% the restarts that a crash of an attribute process before it in the supervisor
%% causes; only the application's stop forgets it (terrain_app:stop/1).

%%--------------------------------------------------------------------
%% Internal functions

load(File) when is_list(File); is_binary(File) ->
    terrain_topology:read(File);
load(Tree) ->
    terrain_topology:new(Tree).
