%% @doc terrain workloads: the source documents' applications, run on a cluster with
%% terrain choosing and placing their processes.
%%
%% The wind tunnel (Bjørndalen, Anshus and Bongo, PATHS and EventSpace, §5–6): a
%% lattice gas automaton on a 2-D lattice split into slices of rows, one slice per
%% worker process; every step each worker sends its border rows to the workers above
%% and below, reads theirs, and computes its slice. It is the application EventSpace
%% watches (docs/EVENTS.md): give it an `instrument' fun and it reports its
%% communication and computation as events.
%%
%% ```
%% {ok, #{elapsed_us := Us, placement := Placement}} =
%%     terrain_workloads:windtunnel(#{nodes => [node() | nodes()], workers => 16, steps => 500,
%%                                    instrument => fun terrain_events:emit/3}).
%% '''
-module(terrain_workloads).

%% API: wind tunnel
-export([windtunnel/1,
         format_windtunnel_error/1]).

-export_type([windtunnel_options/0, windtunnel_result/0]).

-type windtunnel_options() :: terrain_windtunnel:options().
-type windtunnel_result() :: terrain_windtunnel:result().

%%--------------------------------------------------------------------
%% API: wind tunnel

%% @doc Runs the wind tunnel to the end and returns its timing, placement and the
%% lattice's checksum; see `terrain_windtunnel:options()' for the options.
-spec windtunnel(windtunnel_options()) -> {ok, windtunnel_result()} | {error, {windtunnel, term()}}.
windtunnel(Options) ->
    terrain_windtunnel:run(Options).

%% @doc A sentence for an error of {@link windtunnel/1}.
-spec format_windtunnel_error({windtunnel, term()}) -> iolist().
format_windtunnel_error(Reason) ->
    terrain_windtunnel:format_error(Reason).
