%% @private
%% @doc Top supervisor of the `terrain' application.
%%
%% `rest_for_one': a child listed later may depend on the ones before it, so when an
%% earlier child restarts the later ones restart with it. See docs/INTERNALS.md.
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
    {ok, {Flags, []}}.
