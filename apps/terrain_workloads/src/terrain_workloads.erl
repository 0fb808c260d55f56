%% @doc terrain_workloads: applications of the source documents, run on nodes that
%% terrain chooses, to show what placement and the runtime's choices buy.
%%
%% This is the one public module of the `terrain_workloads' application; every other
%% module (`terrain_emas*', `terrain_aco*', `terrain_windtunnel*') is internal. Each workload has its own block of
%% functions below.
%% ```
%% {ok, _} = application:ensure_all_started(terrain_workloads),
%% %% EMAS, exactly 200 steps of the sequential model on two islands: reproducible
%% Options = #{model => sequential, islands => 2, population => 20, dimensions => 10,
%%             steps => 200, seed => 42},
%% {ok, #{summary := #{best_fitness := Best}}} = terrain_workloads:emas(Options),
%% {ok, #{summary := #{best_fitness := Best}}} = terrain_workloads:emas(Options),
%% true = Best =< 0.
%% '''
%%
%% == EMAS ==
%%
%% The evolutionary multi-agent system of Anielski &amp; Stypka ("Boosting Evolution:
%% Scaling Erlang up to 64 cores", AGH Kraków): agents — a solution of Rastrigin's
%% function, its fitness and an energy — live on islands. Agents without energy die,
%% rich ones reproduce (recombination, then Cauchy mutation; children take energy
%% from their parents), the others fight (the fitter takes energy from the other),
%% and now and then one migrates to another island. Four models run the same
%% algorithm: `sequential' (one process), `hybrid' (a process per island),
%% `concurrent' (a process per agent, meeting in arenas) and `skel' (a map/feedback
%% farm over the islands). See docs/EXPERIMENTS.md for what limits their scaling.
%% ```
%% {ok, #{summary := #{best_fitness := Best, reproductions_per_s := Rate}}} =
%%     terrain_workloads:emas(#{model => hybrid, time_ms => 2000, seed => 42}).
%% %% islands on chosen nodes, migrants preferring near islands:
%% Nodes = terrain:choose_nodes(all, [{vm_num_processors, ge, 2}]),
%% terrain_workloads:emas(#{model => hybrid, nodes => Nodes, topology => nearest_first}).
%% '''
%% Every random choice comes from `rand' states derived from `seed' (never the
%% process-global state); with `steps' the sequential and skel models are
%% reproducible exactly.
%%
%% == The wind tunnel ==
%%
%% The wind tunnel (Bjørndalen, Anshus and Bongo, PATHS and EventSpace, §5–6): a
%% 2-D lattice split into slices of rows, one slice per worker process; every step
%% each worker sends its border rows to the workers above and below, reads theirs,
%% and computes its slice. It is the application EventSpace watches
%% (docs/EVENTS.md): give it an `instrument' fun and it reports its communication
%% and computation as events.
%% ```
%% {ok, #{elapsed_us := Us, placement := Placement}} =
%%     terrain_workloads:windtunnel(#{nodes => [node() | nodes()], workers => 16, steps => 500,
%%                                    instrument => fun terrain_events:emit/3}).
%% '''
%%
%% == ML-ACO ==
%%
%% ML-ACO (RELEASE D3.5 §3.4): multi-level ant colony optimisation for the single-machine
%% total weighted tardiness problem, on OR-Library instances:
%% ```
%% {ok, I} = terrain_workloads:aco_read_instance("wt40.txt", auto, 1),
%% Tree = terrain_workloads:aco_tree(length(Nodes), 3),
%% {ok, #{best_cost := C}} = terrain_workloads:aco_run(I, Tree, Assignment, #{seed => 1}).
%% '''
-module(terrain_workloads).

%% API: EMAS
-export([emas/1,
         emas_defaults/0,
         emas_validate/1,
         emas_message_cost/1]).

%% API: ML-ACO
-export([aco_read_instance/3,
         aco_generate_instance/2,
         aco_read_optimum/2,
         aco_tree/2,
         aco_process_tree/1,
         aco_run/4,
         aco_defaults/0,
         aco_cost/2,
         aco_format_error/1]).

%% API: wind tunnel
-export([windtunnel/1,
         format_windtunnel_error/1]).

%% API: general
-export([format_error/1]).

%% exports_not_used: the public API (docs/EXPERIMENTS.md), of which the lab uses part.
-ignore_xref([{emas_defaults, 0}, {emas_message_cost, 1}, {aco_cost, 2}, {aco_run, 4}]).

-export_type([emas_options/0, emas_result/0, windtunnel_options/0, windtunnel_result/0,
              aco_options/0, aco_tree/0, aco_result/0]).

-type aco_tree() :: {master | submaster | colony, Name :: [non_neg_integer()], [aco_tree()]}.
%% The master → submasters → colonies tree of an ML-ACO run ({@link aco_tree/2}).
-type aco_result() :: #{best_cost := non_neg_integer(), best := [pos_integer()],
                        setup_s := float(), main_s := float()}.
%% The best schedule an ML-ACO run found, its cost, and the time spent setting up and running.
-type aco_options() ::
        #{ants => pos_integer(),
          global => pos_integer(),
          local => pos_integer(),
          local_search => none | interchange | insertion,
          seed => integer(),
          alpha => number(), beta => number(), rho => number(), q0 => number(),
          timeout => pos_integer()}.
%% Options of {@link aco_run/4} (defaults: {@link aco_defaults/0}).
%% <ul>
%% <li>`ants' — ants per colony (default 10)</li>
%% <li>`global' — global iterations (default 20)</li>
%% <li>`local' — generations per colony per global iteration (default 10)</li>
%% <li>`local_search' — on each generation's best (default none)</li>
%% <li>`seed' — the run's seed (default 1): the same seed repeats the run</li>
%% <li>`alpha' — ACS (1, 2, 0.1, 0.9)</li>
%% <li>`timeout' — ms for the whole run (default 600000)</li>
%% </ul>

-type windtunnel_options() ::
        #{nodes => [node()],
          predicates => [term()],
          workers => pos_integer(),
          workers_per_scheduler => pos_integer(),
          steps => pos_integer(),
          slice_rows => pos_integer(),
          lattice_rows => pos_integer(),
          columns => pos_integer(),
          work_per_cell => pos_integer(),
          instrument => fun(([atom()], map(), map()) -> term()) | none,
          on_start => fun(([{non_neg_integer(), pid()}]) -> term()),
          timeout => pos_integer()}.
%% Options of {@link windtunnel/1}.
%% <ul>
%% <li>`nodes' — candidate nodes (default [node()])</li>
%% <li>`predicates' — terrain predicates the nodes must satisfy (default [])</li>
%% <li>`workers' — worker processes (default 8)</li>
%% <li>`workers_per_scheduler' — instead of workers: K per online scheduler of each node</li>
%% <li>`steps' — default 100</li>
%% <li>`slice_rows' — rows per worker (default 16), unless lattice_rows</li>
%% <li>`lattice_rows' — total rows, split among the workers (fixed problem size)</li>
%% <li>`columns' — default 256</li>
%% <li>`work_per_cell' — rounds of the cell rule per cell and step (default 16)</li>
%% <li>`instrument' — called by the workers with events (default none)</li>
%% <li>`on_start' — called with the workers before they start (e.g. to trace them)</li>
%% <li>`timeout' — ms for the whole run (default 600000)</li>
%% </ul>
-type windtunnel_result() :: #{elapsed_us := non_neg_integer(),
                               workers := pos_integer(),
                               steps := pos_integer(),
                               lattice := {pos_integer(), pos_integer()},
                               placement := [{non_neg_integer(), node()}],
                               nodes := [node()],
                               checksum := non_neg_integer(),
                               worker_us := [non_neg_integer()]}.
%% What a wind tunnel run returns: its time, size, placement, checksum and each worker's time.
%% <ul>
%% <li>`elapsed_us' — from the start signal to the last worker done</li>
%% <li>`worker_us' — each worker's own time, by worker</li>
%% </ul>

-type emas_options() ::
        #{model => sequential | hybrid | concurrent | skel,
          islands => pos_integer(),
          population => pos_integer(),
          dimensions => pos_integer(),
          time_ms => pos_integer(),
          steps => pos_integer(),
          seed => integer(),
          initial_energy => pos_integer(),
          reproduction_threshold => non_neg_integer(),
          reproduction_transfer => pos_integer(),
          fight_transfer => pos_integer(),
          recombination_probability => number(),
          mutation_probability => number(),
          mutation_rate => number(),
          mutation_range => number(),
          migration_probability => number(),
          topology => ring | mesh | nearest_first,
          solution => binary | list,
          arena_call => cast | call,
          arena_timeout => pos_integer(),
          time_check_interval => pos_integer(),
          skel_workers => pos_integer() | islands,
          nodes => [node()],
          progress => pid()}.
%% Options of {@link emas/1} (defaults: {@link emas_defaults/0}; docs/EXPERIMENTS.md).
%% <ul>
%% <li>`model' — default hybrid</li>
%% <li>`islands' — 4</li>
%% <li>`population' — agents per island at the start, 100</li>
%% <li>`dimensions' — Rastrigin's n, 100</li>
%% <li>`time_ms' — run time, 5000</li>
%% <li>`steps' — sequential, skel: exactly this many steps instead</li>
%% <li>`seed' — root of every rand state, 1</li>
%% <li>`initial_energy' — 10</li>
%% <li>`reproduction_threshold' — reproduce above this energy, 11</li>
%% <li>`reproduction_transfer' — energy a parent gives its child at most, 5</li>
%% <li>`fight_transfer' — energy the loser gives at most, 10</li>
%% <li>`recombination_probability' — 0.3</li>
%% <li>`mutation_probability' — per child, 0.75</li>
%% <li>`mutation_rate' — share of genes mutated, 0.1</li>
%% <li>`mutation_range' — Cauchy scale, 0.05</li>
%% <li>`migration_probability' — per agent and step, 0.0001</li>
%% <li>`topology' — where migrants go, mesh</li>
%% <li>`solution' — how solutions are held and sent, binary</li>
%% <li>`arena_call' — concurrent: cast + receive (default) or gen_server:call</li>
%% <li>`arena_timeout' — concurrent: ms a lone agent waits in an arena, 1000</li>
%% <li>`time_check_interval' — read the clock every N steps or meetings, 1</li>
%% <li>`skel_workers' — skel: farm workers, one per island</li>
%% <li>`nodes' — hybrid, skel: island nodes in turn, [node()]</li>
%% </ul>

-type emas_result() ::
        #{model := atom(),
          params := map(),
          rows := [#{second := pos_integer(), island := pos_integer(), reproductions := non_neg_integer(),
                     fights := non_neg_integer(), deaths := non_neg_integer(),
                     migrations := non_neg_integer(), best_fitness := float() | null}],
          summary := map()}.
%% What an EMAS run returns: the model, the validated parameters, per-second rows per island and the
%% summary.
%% <ul>
%% <li>`params' — the validated options</li>
%% <li>`summary' — model, initial_best_fitness, best_fitness, reproductions_per_s, utilisation, ...
%%     (docs/EXPERIMENTS.md)</li>
%% </ul>

%%--------------------------------------------------------------------
%% API: EMAS

%% @doc Runs EMAS once. `rows' hold, for every second and island, the agents that
%% reproduced, fought, died and migrated in that second and the island's best
%% fitness so far (the last row covers the part of a second at the end); `summary'
%% the totals, rates, the scheduler utilisation over the run (OTP's
%% `scheduler_wall_time') and the energy before and after. With the option
%% `progress => Pid', Pid gets `{emas_progress, Rows}' after every second, the rows of
%% that second: the result so far of a run its caller may abandon (`terrain emas' keeps
%% them on SIGTERM).
-spec emas(emas_options()) -> {ok, emas_result()} | {error, term()}.
emas(Options) ->
    case terrain_emas:validate(Options) of
        {ok, Params} -> terrain_emas_run:run(Params);
        {error, _} = Error -> Error
    end.

%% @doc The defaults, those of the public erlang-emas configuration.
-spec emas_defaults() -> emas_options().
emas_defaults() ->
    terrain_emas:defaults().

%% @doc Checks options without running: the merged parameters or the first error.
-spec emas_validate(emas_options()) -> {ok, emas_options()} | {error, term()}.
emas_validate(Options) ->
    terrain_emas:validate(Options).

%% @doc The cost of sending one EMAS solution back and forth between two processes
%% (Anielski &amp; Stypka's lists-vs-binaries lesson): `#{solution => list | binary, messages =>
%% N, dimensions => D (100), node => Node (this node)}'. Returns the mean round trip
%% in µs and the bytes one send copies.
-spec emas_message_cost(#{solution := binary | list, messages := pos_integer(), dimensions => pos_integer(),
                          node => node()}) -> #{atom() => term()}.
emas_message_cost(Options) ->
    terrain_emas_messages:cost(Options).

%%--------------------------------------------------------------------
%% API: ML-ACO

%% @doc Instance `K' (from 1) of an OR-Library SMTWTP file; `Jobs' per instance or
%% `auto' (from the digits of the file name).
-spec aco_read_instance(file:filename(), pos_integer() | auto, pos_integer()) ->
          {ok, terrain_aco_instance:instance()} | {error, terrain_aco_instance:error_reason()}.
aco_read_instance(File, Jobs, K) ->
    terrain_aco_instance:read(File, Jobs, K).

%% @doc A random instance of `Jobs' jobs made as the OR-Library's were; the same seed
%% gives the same instance.
-spec aco_generate_instance(pos_integer(), integer()) -> terrain_aco_instance:instance().
aco_generate_instance(Jobs, Seed) ->
    terrain_aco_instance:generate(Jobs, Seed).

%% @doc The optimum (or best known) cost of instance `K' from an OR-Library optimum file.
-spec aco_read_optimum(file:filename(), pos_integer()) ->
          {ok, non_neg_integer()} | {error, terrain_aco_instance:error_reason()}.
aco_read_optimum(File, K) ->
    terrain_aco_instance:read_optimum(File, K).

%% @doc The master → submasters → colonies tree for `Nodes' nodes and degree `Degree'.
-spec aco_tree(pos_integer(), pos_integer()) -> aco_tree().
aco_tree(Nodes, Degree) ->
    terrain_aco_tree:shape(Nodes, Degree).

%% @doc The tree as a process tree for `terrain:place_tree/2'.
-spec aco_process_tree(aco_tree()) -> terrain:process_tree().
aco_process_tree(Tree) ->
    terrain_aco_tree:process_tree(Tree).

%% @doc Runs ML-ACO with the tree's vertices on the nodes of `Assignment' (vertex name
%% → node; a vertex not in it runs on this node).
-spec aco_run(terrain_aco_instance:instance(), aco_tree(), #{list() => node()}, aco_options()) ->
          {ok, aco_result()} | {error, term()}.
aco_run(Instance, Tree, Assignment, Options) ->
    terrain_aco_tree:run(Instance, Tree, Assignment, maps:merge(aco_defaults(), Options)).

%% @doc The default options.
-spec aco_defaults() -> #{atom() => term()}.
aco_defaults() ->
    #{ants => 10, global => 20, local => 10, local_search => none, seed => 1,
      alpha => 1, beta => 2, rho => 0.1, q0 => 0.9, timeout => 600000}.

%% @doc The total weighted tardiness of a schedule (job numbers in order).
-spec aco_cost(terrain_aco_instance:instance(), [pos_integer()]) -> non_neg_integer().
aco_cost(Instance, Schedule) ->
    terrain_aco_ant:cost(Instance, Schedule).

%% @doc A sentence for an ML-ACO error.
-spec aco_format_error(term()) -> iolist().
aco_format_error({aco_instance, _} = Reason) ->
    terrain_aco_instance:format_error(Reason);
aco_format_error(aco_timeout) ->
    "the ML-ACO run did not finish before its deadline";
aco_format_error({aco_vertex_failed, noconnection}) ->
    "a vertex of the ML-ACO tree failed: its node went down or was cut off (noconnection)";
aco_format_error({aco_vertex_failed, Why}) ->
    io_lib:format("a vertex of the ML-ACO tree failed: ~0tP", [Why, 12]).

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

%%--------------------------------------------------------------------
%% API: general

%% @doc A sentence for an error this application returned.
-spec format_error(term()) -> iolist().
format_error({emas, _} = Reason) ->
    terrain_emas:format_error(Reason);
format_error({windtunnel, _} = Reason) ->
    terrain_windtunnel:format_error(Reason);
format_error({aco_vertex_failed, _} = Reason) ->
    aco_format_error(Reason);
format_error(aco_timeout) ->
    aco_format_error(aco_timeout);
format_error(Reason) ->
    io_lib:format("~0tp", [Reason]).
