%% @private
%% @doc The top supervisor of `terrain_bench' on every node:
%% ```
%% terrain_bench_sup (one_for_one, intensity 10 / 10 s)
%% ├── terrain_bench_server        target of gen_server_call
%% ├── terrain_bench_statem        target of fsm_server_call
%% ├── terrain_bench_pg            the pg scope of the pg_* operations
%% └── terrain_bench_instance_sup  simple_one_for_one: one benchmark instance per run
%% '''
-module(terrain_bench_sup).
-behaviour(supervisor).

%% API
-export([start_link/0,
         start_instance/1]).

%% supervisor callbacks
-export([init/1]).

%% @doc Starts the top supervisor.
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, top).

%% @doc Starts a benchmark instance (its arguments are those of
%% `terrain_bench_instance:start_link/1').
-spec start_instance(map()) -> {ok, pid()} | {error, term()}.
start_instance(Args) ->
    supervisor:start_child(terrain_bench_instance_sup, [Args]).

%% @doc The two supervisors' child specs.
-spec init(top | instances) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init(top) ->
    Children = [#{id => terrain_bench_server, start => {terrain_bench_server, start_link, []}},
                #{id => terrain_bench_statem, start => {terrain_bench_statem, start_link, []}},
                #{id => terrain_bench_pg, start => {pg, start_link, [terrain_bench_pg]}},
                #{id => terrain_bench_instance_sup, type => supervisor,
                  start => {supervisor, start_link, [{local, terrain_bench_instance_sup}, ?MODULE, instances]}}],
    {ok, {#{strategy => one_for_one, intensity => 10, period => 10}, Children}};
init(instances) ->
    {ok, {#{strategy => simple_one_for_one, intensity => 10, period => 10},
          [#{id => instance, start => {terrain_bench_instance, start_link, []}, restart => temporary,
             shutdown => 5000}]}}.
