%% @doc terrain's workloads: distributed applications whose placement the lab measures.
%%
%% ML-ACO (RELEASE D3.5 §3.4): multi-level ant colony optimisation for the single-machine
%% total weighted tardiness problem, on OR-Library instances:
%% ```
%% {ok, I} = terrain_workloads:aco_read_instance("wt40.txt", auto, 1),
%% Tree = terrain_workloads:aco_tree(length(Nodes), 3),
%% {ok, #{best_cost := C}} = terrain_workloads:aco_run(I, Tree, Assignment, #{seed => 1}).
%% '''
-module(terrain_workloads).

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

-export_type([aco_options/0, aco_tree/0, aco_result/0]).

-type aco_tree() :: terrain_aco_tree:tree().
-type aco_result() :: terrain_aco_tree:result().
-type aco_options() ::
        #{ants => pos_integer(),          % ants per colony (default 10)
          global => pos_integer(),        % global iterations (default 20)
          local => pos_integer(),         % generations per colony per global iteration (default 10)
          local_search => none | interchange | insertion,  % on each generation's best (default none)
          seed => integer(),              % the run's seed (default 1): the same seed repeats the run
          alpha => number(), beta => number(), rho => number(), q0 => number(),  % ACS (1, 2, 0.1, 0.9)
          timeout => pos_integer()}.      % ms for the whole run (default 600000)

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
aco_format_error({aco_vertex_failed, Why}) ->
    io_lib:format("a vertex of the ML-ACO tree failed: ~0tP", [Why, 12]).
