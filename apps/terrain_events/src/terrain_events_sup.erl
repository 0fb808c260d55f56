%% @private
%% @doc The top supervisor of `terrain_events' (rest_for_one): the event space server
%% first (it owns the rings' tables), then the supervisors of scopes and tracers, which
%% read and write those rings.
-module(terrain_events_sup).
-behaviour(supervisor).

%% API
-export([start_link/0]).

%% supervisor callbacks
-export([init/1]).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

-spec init([]) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    Flags = #{strategy => rest_for_one, intensity => 10, period => 10},
    Children = [#{id => terrain_events_space, start => {terrain_events_space, start_link, []}},
                dynamic(terrain_events_scope_sup, terrain_events_scope),
                dynamic(terrain_events_tracer_sup, terrain_events_tracer)],
    {ok, {Flags, Children}}.

%% A simple_one_for_one supervisor (this module again, with another init argument).
dynamic(Name, Module) ->
    #{id => Name, type => supervisor,
      start => {supervisor, start_link, [{local, Name}, terrain_events_dynamic_sup, Module]}}.
