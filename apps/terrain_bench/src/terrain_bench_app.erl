%% @private
%% @doc The `terrain_bench' application: starts {@link terrain_bench_sup}.
-module(terrain_bench_app).
-behaviour(application).

%% application callbacks
-export([start/2,
         stop/1]).

%% @doc Starts the top supervisor.
-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_Type, _Args) ->
    terrain_bench_sup:start_link().

%% @doc Nothing to clean up.
-spec stop(term()) -> ok.
stop(_State) ->
    ok.
