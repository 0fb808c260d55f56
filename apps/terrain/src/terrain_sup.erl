%% @private
%% @doc Top supervisor of the `terrain' application.
%%
%% `rest_for_one': a child listed later may depend on the ones before it, so when an
%% earlier child restarts the later ones restart with it. See docs/INTERNALS.md.
%%
%% Attribute children, in order:
%% <ol>
%% <li>`terrain_attr_table' — creates and inherits the attribute tables, so that they
%%     survive a crash of the attribute server;</li>
%% <li>`terrain_attr_cache' — other nodes' values, failed-node backoff, push
%%     subscriptions;</li>
%% <li>`terrain_attr_server' — this node's attributes; claims the tables from the
%%     keeper.</li>
%% </ol>
%% Then `terrain_topology_server' (the node's topology), and last
%% `terrain_attr_responder', which answers other nodes' attribute requests from the
%% tables; then `terrain_placed_sup' (placed groups), the `pg' scope
%% `terrain_live_scope' and `terrain_live' (the live topology, idle unless the app
%% env key `live' is set). A restart of the tables'
%% keeper restarts everything after it; the responder and the processes after it hold
%% no state the others need.
-module(terrain_sup).
-behaviour(supervisor).

%% API
-export([start_link/0]).

%% supervisor callbacks
-export([init/1]).

-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

-spec init([]) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    Flags = #{strategy => rest_for_one, intensity => 10, period => 10},
    Children = [worker(terrain_attr_table),
                worker(terrain_attr_cache),
                worker(terrain_attr_server),
                worker(terrain_topology_server),
                worker(terrain_attr_responder),
                %% placed groups and the live topology: only their own state
                supervisor(terrain_placed_sup),
                #{id => terrain_live_scope,
                  start => {pg, start_link, [terrain_live_scope]},
                  restart => permanent, shutdown => 5000, type => worker, modules => [pg]},
                worker(terrain_live)],
    {ok, {Flags, Children}}.

worker(Module) ->
    #{id => Module,
      start => {Module, start_link, []},
      restart => permanent,
      shutdown => 5000,
      type => worker,
      modules => [Module]}.

supervisor(Module) ->
    #{id => Module,
      start => {Module, start_link, []},
      restart => permanent,
      shutdown => infinity,
      type => supervisor,
      modules => [Module]}.
