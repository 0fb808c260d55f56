%% @private
%% @doc The netem processes of an emulated node, started by kernel in place of
%% erl_epmd (through `terrain_lab_netem_epmd:start_link/0', as a child of `net_sup').
%%
%% ```
%% net_sup (kernel)
%%  └─ terrain_lab_netem_sup          rest_for_one
%%      ├─ erl_epmd                   kernel's epmd client (registration with epmd)
%%      ├─ terrain_lab_netem_server   routes: partitions, the proxy of each connection
%%      └─ terrain_lab_netem_proxy_sup  simple_one_for_one, one temporary proxy per connection
%% '''
%% `rest_for_one': should the server restart, it has forgotten its proxies and
%% partitions, so the proxies (and with them the connections they carry) go too.
-module(terrain_lab_netem_sup).
-behaviour(supervisor).

%% API
-export([start_link/0]).

%% supervisor callbacks
-export([init/1]).

%%--------------------------------------------------------------------
%% API

%% @doc Starts the supervisor, registered as `terrain_lab_netem_sup'.
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    case supervisor:start_link({local, ?MODULE}, ?MODULE, []) of
        {ok, Pid} -> {ok, Pid};
        {error, _} = Error -> Error;
        ignore -> {error, ignore}
    end.

%%--------------------------------------------------------------------
%% supervisor callbacks

-spec init([] | proxies) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init([]) ->
    Flags = #{strategy => rest_for_one, intensity => 5, period => 10},
    Children = [#{id => erl_epmd,
                  start => {erl_epmd, start_link, []},
                  restart => permanent,
                  shutdown => 2000,
                  type => worker,
                  modules => [erl_epmd]},
                #{id => terrain_lab_netem_server,
                  start => {terrain_lab_netem_server, start_link, []},
                  restart => permanent,
                  shutdown => 2000,
                  type => worker,
                  modules => [terrain_lab_netem_server]},
                #{id => terrain_lab_netem_proxy_sup,
                  start => {supervisor, start_link, [{local, terrain_lab_netem_proxy_sup}, ?MODULE, proxies]},
                  restart => permanent,
                  shutdown => infinity,
                  type => supervisor,
                  modules => [?MODULE]}],
    {ok, {Flags, Children}};
init(proxies) ->
    Flags = #{strategy => simple_one_for_one, intensity => 100, period => 1},
    Proxy = #{id => terrain_lab_netem_proxy,
              start => {terrain_lab_netem_proxy, start_link, []},
              restart => temporary,
              shutdown => brutal_kill,
              type => worker,
              modules => [terrain_lab_netem_proxy]},
    {ok, {Flags, [Proxy]}}.
