%% @private
%% @doc The `terrain_events' application: starts the supervision tree and removes the
%% rings' `persistent_term' entries when it stops.
-module(terrain_events_app).
-behaviour(application).

%% application callbacks
-export([start/2, stop/1]).

-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_Type, _Args) ->
    terrain_events_sup:start_link().

-spec stop(term()) -> ok.
stop(_State) ->
    terrain_events_space:forget_all().
