%% @doc DE-Bench on terrain: a peer-to-peer benchmark of distributed Erlang whose
%% cluster percentiles are right.
%%
%% Every benchmarked node starts `terrain_bench' (and with it `terrain'); a run on
%% this node alone, for one second:
%% ```
%% {ok, _} = application:ensure_all_started(terrain_bench),
%% {ok, Config} = terrain_bench:validate_config(#{duration => 1, concurrent => 2,
%%                                                operations => [{rpc, 1}, {spawn, 1}]}),
%% {ok, #{operations := #{rpc := #{count := Calls, latency_us := #{p99 := _P99}}}}} =
%%     terrain_bench:run([node()], Config, "bench_out", #{}),
%% true = Calls > 0,
%% true = filelib:is_regular("bench_out/summary.json").
%% '''
%%
%% After Ghaffari, "Investigating the Scalability Limits of Distributed Erlang"
%% (Erlang Workshop 2014): one benchmark instance runs on every node of a cluster,
%% with `concurrent' workers that pick operations by weight (spawn, rpc, gen_server
%% and gen_statem calls, global and local name registration, and beyond DE-Bench
%% erpc, pg and `terrain:choose_nodes/2') and, for peer-to-peer operations, a random
%% target node. Each instance writes its own files every `report_interval' (DE-Bench's
%% CSV files and one HdrHistogram interval log per operation); at the end the
%% coordinator merges the nodes' histograms into `summary.json'
%% (`terrain.bench/1'), so the cluster's percentiles are percentiles of all the
%% cluster's operations, not DE-Bench's mean of per-node percentiles (which is
%% reported beside them as `per_node_percentile_mean').
%%
%% ```
%% {ok, Config} = terrain_bench:read_config("examples/bench/p2p.config"),
%% {ok, Summary} = terrain_bench:run([node() | nodes()], Config, "out", #{}),
%% #{operations := #{rpc := #{latency_us := #{p99 := P99}}}} = Summary.
%% '''
%% A configuration is a file of Erlang terms:
%% ```
%% {duration, 30}.              % measured seconds
%% {warmup, 5}.                 % seconds run first and discarded
%% {concurrent, 4}.             % workers per node
%% {report_interval, 1}.        % seconds per row
%% {operations, [{rpc, 1}, {gen_server_call, 1}, {global_register, 1}]}.
%% {argument_size, 10}.         % bytes of payload of P2P operations
%% {compute_us, 10}.            % computation on the target
%% {target, random}.            % or terrain predicates, or {group, Scope, Group}
%% {mode, closed}.              % or {rate, OpsPerSecondPerWorker}: open loop,
%%                              % or {think, MeanMs}: closed loop with think time
%% {timeout, 5000}.             % deadline of one operation, ms
%% {connect, true}.             % full mesh and global in sync before the start
%% '''
%% See docs/BENCH.md.
-module(terrain_bench).

%% API: configurations
-export([read_config/1,
         validate_config/1,
         config_to_json/1,
         operations/0]).

%% API: runs
-export([run/4,
         summarise/4,
         files/1]).

%% API: errors
-export([format_error/1]).

%% Internal exports (called on every node of a run by the coordinator)
-export([start_instance/1]).

%% exports_not_used: the public API (docs/BENCH.md), of which the lab uses part; start_instance/1
%% is called on every node of a run by erpc.
-ignore_xref([{operations, 0}, {start_instance, 1}, {summarise, 4}, {read_config, 1}]).

-export_type([config/0, operation/0, run_options/0]).

-type config() ::
        #{duration := pos_integer(),
          concurrent := pos_integer(),
          report_interval := pos_integer(),
          operations := [{operation(), pos_integer()}],
          argument_size := non_neg_integer(),
          compute_us := non_neg_integer(),
          target := terrain_bench_config:target(),
          mode := terrain_bench_config:mode(),
          warmup := non_neg_integer(),
          timeout := pos_integer(),
          connect := boolean()}.
%% A validated configuration ({@link read_config/1}, {@link validate_config/1}); the keys are those of
%% the configuration file (docs/BENCH.md).
%% <ul>
%% <li>`duration' — measured seconds</li>
%% <li>`concurrent' — workers per node</li>
%% <li>`report_interval' — seconds between rows</li>
%% <li>`operations' — operation and its weight</li>
%% <li>`argument_size' — payload bytes of P2P operations</li>
%% <li>`compute_us' — computation on the target, µs</li>
%% <li>`target' — which nodes P2P operations go to</li>
%% <li>`mode' — closed loop, open loop at a rate per worker, or closed loop with a think time</li>
%% <li>`warmup' — seconds run before measuring, discarded</li>
%% <li>`timeout' — deadline of one operation, ms</li>
%% <li>`connect' — connect every node to every other and wait for `global' before the start</li>
%% </ul>

-type operation() :: spawn | rpc | erpc | gen_server_call | fsm_server_call
                   | global_register | global_unregister | global_whereis
                   | local_register | local_unregister | local_whereis
                   | pg_join | pg_leave | pg_get_members | terrain_choose | noop.
%% An operation of the benchmark, by the name the configuration's `operations' uses.
-type run_options() ::
        #{progress => fun((iodata()) -> ok)}.
%% Options of {@link run/4}: `progress', a function given each progress line (default: none).

%%--------------------------------------------------------------------
%% API

%% @doc Reads a configuration file (`file:consult/1' syntax; a regular file of at most
%% 1 MiB) and validates it.
-spec read_config(file:filename()) -> {ok, config()} | {error, term()}.
read_config(File) ->
    terrain_bench_config:read(File).

%% @doc Validates a configuration given as a proplist or map and fills in defaults;
%% an error names the key and the expected value.
-spec validate_config([{atom(), term()}] | map()) -> {ok, config()} | {error, term()}.
validate_config(Terms) ->
    terrain_bench_config:validate(Terms).

%% @doc A configuration as JSON terms (as `summary.json' holds it).
-spec config_to_json(config()) -> map().
config_to_json(Config) ->
    terrain_bench_config:to_json(Config).

%% @doc Every operation, by the name the configuration uses.
-spec operations() -> [operation()].
operations() ->
    terrain_bench_config:operations().

%% @doc Runs a validated configuration on `Nodes' (each must run `terrain' and have
%% terrain_bench's code): starts an instance on every node, releases them together,
%% waits for the end, then writes `OutDir/summary.json' from the files each node
%% wrote to `OutDir/<node>/'. An instance that fails is named in
%% `failed_instances'; what it wrote before stays in the figures.
-spec run([node()], config(), file:filename(), run_options()) -> {ok, map()} | {error, term()}.
run(Nodes, Config, OutDir, Options) when is_list(Nodes), Nodes =/= [], is_map(Config), is_map(Options) ->
    terrain_bench_run:run(Nodes, Config, OutDir, Options).

%% @doc Writes `OutDir/summary.json' again from the nodes' files under `OutDir'.
-spec summarise([node()], config(), file:filename(), #{failed => [{node(), term()}]}) ->
          {ok, map()} | {error, term()}.
summarise(Nodes, Config, OutDir, Info) ->
    terrain_bench_run:summarise(Nodes, Config, OutDir, Info).

%% @doc The files each node writes, relative to its directory.
-spec files(config()) -> [string()].
files(Config) ->
    terrain_bench_instance:files(Config).

%% @doc A sentence for the errors of this application.
-spec format_error(term()) -> iolist().
format_error({bench_config, _} = Reason) ->
    terrain_bench_config:format_error(Reason);
format_error({bench, {start_failed, Node, Why}}) ->
    io_lib:format("the benchmark instance on ~s did not start: ~ts", [Node, format_error(Why)]);
format_error({bench, {not_connected, Node, Others}}) ->
    io_lib:format("~s could not connect to ~ts before the start",
                  [Node, lists:join(", ", [atom_to_list(N) || N <- Others])]);
format_error({bench, {global_not_in_sync, Node, Unknown}}) ->
    io_lib:format("global on ~s did not know ~ts before the start (not in sync within the connect deadline)",
                  [Node, lists:join(", ", [atom_to_list(N) || N <- Unknown])]);
format_error({bench, {connect_failed, Node, Why}}) ->
    io_lib:format("~s did not connect to the other nodes and synchronise global before the start: ~0tp",
                  [Node, Why]);
format_error({bench, {no_targets, Node}}) ->
    io_lib:format("no target node for ~s: the configuration's target matches no other node", [Node]);
format_error({bench, {file, File, Why}}) ->
    io_lib:format("~ts: ~ts", [File, file:format_error(Why)]);
format_error({file, File, Why}) ->
    io_lib:format("~ts: ~ts", [File, file:format_error(Why)]);
format_error({error, Reason}) ->            % an instance's start result, as erpc returned it
    format_error(Reason);
format_error(Reason) ->
    io_lib:format("~0tp", [Reason]).

%%--------------------------------------------------------------------
%% Internal exports

%% @doc On a node of the run: makes sure the application runs and starts this node's
%% instance, writing to `DirRoot/<node>/'.
-spec start_instance(#{config := config(), nodes := [node()], owner := pid(), ref := reference(),
                       dir_root := file:filename()}) -> {ok, pid()} | {error, term()}.
start_instance(#{dir_root := Root} = Args) ->
    case application:ensure_all_started(terrain_bench) of
        {ok, _} ->
            Dir = filename:join(Root, atom_to_list(node())),
            terrain_bench_sup:start_instance(maps:put(dir, Dir, maps:remove(dir_root, Args)));
        {error, _} = Error ->
            Error
    end.
