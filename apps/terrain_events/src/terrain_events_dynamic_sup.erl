%% @private
%% @doc A `simple_one_for_one' supervisor of temporary children of one module: the
%% scopes (`terrain_events_scope') and the tracers (`terrain_events_tracer'). A child
%% that ends is not restarted: its owner sees it go and decides.
-module(terrain_events_dynamic_sup).
-behaviour(supervisor).

%% supervisor callbacks
-export([init/1]).

-spec init(module()) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init(Module) ->
    Flags = #{strategy => simple_one_for_one, intensity => 10, period => 10},
    {ok, {Flags, [#{id => Module, start => {Module, start_link, []}, restart => temporary,
                    shutdown => 5000}]}}.
