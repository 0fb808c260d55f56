%% @private
%% @doc The placed groups of this node (`terrain:start_placed/2').
%%
%% `rest_for_one': {@link terrain_placed_registry} (the `terrain_placed' table: names
%% and members) first, then `terrain_placed_group_sup', a `simple_one_for_one'
%% supervisor of the groups ({@link terrain_placed}, `transient': a group that
%% crashes is started again and places all its members afresh; one stopped by
%% `terrain:stop_placed/1' or that gave up after too many member restarts is not).
-module(terrain_placed_sup).
-behaviour(supervisor).

%% API
-export([start_link/0,
         start_group_sup/0]).

%% supervisor callbacks
-export([init/1]).

%% exports_not_used: child starts named in child specs.
-ignore_xref([{start_link, 0}, {start_group_sup, 0}]).

-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, top).

%% @doc Starts the supervisor of the groups, `terrain_placed_group_sup'.
-spec start_group_sup() -> {ok, pid()} | ignore | {error, term()}.
start_group_sup() ->
    supervisor:start_link({local, terrain_placed_group_sup}, ?MODULE, groups).

-spec init(top | groups) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init(top) ->
    {ok, {#{strategy => rest_for_one, intensity => 10, period => 10},
          [#{id => terrain_placed_registry,
             start => {terrain_placed_registry, start_link, []},
             restart => permanent, shutdown => 5000, type => worker,
             modules => [terrain_placed_registry]},
           #{id => terrain_placed_group_sup,
             start => {?MODULE, start_group_sup, []},
             restart => permanent, shutdown => infinity, type => supervisor,
             modules => [?MODULE]}]}};
init(groups) ->
    {ok, {#{strategy => simple_one_for_one, intensity => 10, period => 10},
          [#{id => terrain_placed,
             start => {terrain_placed, start_link, []},
             restart => transient, shutdown => 15000, type => worker,
             modules => [terrain_placed]}]}}.
