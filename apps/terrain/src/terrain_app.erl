%% @private
%% @doc The `terrain' application callback: starts {@link terrain_sup}.
-module(terrain_app).
-behaviour(application).

%% application callbacks
-export([start/2, stop/1]).

-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_StartType, _StartArgs) ->
    terrain_sup:start_link().

-spec stop(term()) -> ok.
stop(_State) ->
    ok = terrain_live:forget(),
    terrain_topology_server:forget().
