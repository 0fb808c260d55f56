%% @private
%% @doc `terrain aco FILE --instance K': one ML-ACO run (RELEASE D3.5 section 3.4) on an
%% OR-Library SMTWTP instance, on one node (`--local'), on a cluster started from
%% `--spec' for the run, or on the running cluster; prints the best cost, its gap to
%% the optimum and the times.
-module(terrain_lab_cmd_aco).

%% API (command table and CLI handler)
-export([commands/0,
         run/3,
         format_error/1]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_ACO).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    Defaults = terrain_workloads:aco_defaults(),
    [#{name => "aco",
       summary => "Run ML-ACO on an OR-Library SMTWTP instance and print the best cost and its gap",
       usage => "FILE",
       description => "Multi-level ant colony optimisation (master -> submasters -> colonies -> ants, "
                      "RELEASE D3.5 section 3.4) for instance K of the OR-Library file FILE (jobs per instance "
                      "from the file name, e.g. wt40.txt, or --jobs). The tree's shape comes from the "
                      "number of nodes and --degree. --local runs every vertex as a process of this node "
                      "(--nodes-count virtual nodes shape the tree); --spec starts that cluster for the run "
                      "and stops it; otherwise the running cluster is used. The same --seed repeats a run. "
                      "Prints the best cost, the gap (best - optimum) / max(optimum, 1) and the setup and "
                      "main-loop times; --json prints them as one object (format terrain.aco/1).",
       args => {1, 1},
       options => [#{name => instance, long => "instance", type => integer, range => {1, inf}, metavar => "K",
                     required => true, help => "instance number, from 1"},
                   #{name => jobs, long => "jobs", type => integer, range => {1, inf}, metavar => "N",
                     help => "jobs per instance (default: from the file name)"},
                   #{name => optimum, long => "optimum", type => string, metavar => "FILE",
                     help => "OR-Library optimum / best-known file, for the gap"},
                   #{name => ants, long => "ants", type => integer, range => {1, inf},
                     default => maps:get(ants, Defaults),
                     metavar => "A", help => "ants per colony"},
                   #{name => global, long => "global", type => integer, range => {1, inf},
                     default => maps:get(global, Defaults),
                     metavar => "G", help => "global iterations"},
                   #{name => local, long => "local-iterations", type => integer, range => {1, inf},
                     default => maps:get(local, Defaults), metavar => "L",
                     help => "generations per colony per global iteration"},
                   #{name => degree, long => "degree", type => integer, range => {1, inf}, default => 3, metavar => "P",
                     help => "vertex degree of the tree"},
                   #{name => local_search, long => "local-search", type => string, default => "none",
                     metavar => "none|interchange|insertion", help => "local search on each generation's best"},
                   #{name => placement, long => "placement", type => string, default => "random",
                     metavar => "random|attributes|distance|attributes_and_distance",
                     help => "where the vertices go"},
                   #{name => seed, long => "seed", type => integer, range => {'-inf', inf}, default => 1,
                     metavar => "N",
                     help => "the run's seed"},
                   #{name => spec, long => "spec", type => string, metavar => "SPEC",
                     help => "start this cluster for the run"},
                   #{name => local_run, long => "local", type => flag, help => "run on this node only"},
                   #{name => nodes_count, long => "nodes-count", type => integer, range => {1, inf}, metavar => "N",
                     help => "with --local: virtual nodes that shape the tree (default 1 + P^2)"},
                   #{name => json, long => "json", type => flag, help => "print one JSON object"},
                   #{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to use instead of the running cluster"},
                   terrain_lab_cli_options:state_dir()],
       run => {?MODULE, run}}].

%% @doc `terrain aco FILE --instance K ...'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [File], Io) ->
    Steps = [fun(_) -> check_options(Options) end,
             fun(_) -> terrain_workloads:aco_read_instance(File, opt(jobs, Options, auto),
                                                           maps:get(instance, Options)) end,
             fun(Instance) ->
                     case opt(optimum, Options, none) of
                         OptFile when OptFile =/= none ->
                             case terrain_workloads:aco_read_optimum(OptFile, maps:get(instance, Options)) of
                                 {ok, O} -> {ok, {Instance, O}};
                                 Error -> Error
                             end;
                         none -> {ok, {Instance, null}}
                     end
             end,
             fun({Instance, _} = InstanceOptimum) ->
                     case guard(Instance, Options) of
                         ok -> {ok, InstanceOptimum};
                         {error, _} = Error -> Error
                     end
             end,
             fun({Instance, Optimum}) ->
                     case on_nodes(Options, fun(Nodes) -> run_on(Instance, Nodes, Options, Io) end) of
                         {ok, Result} -> {ok, {Result, Optimum}};
                         Error -> Error
                     end
             end,
             fun({Result, Optimum}) -> print(File, Result, Optimum, Options, Io) end],
    terrain_lab_steps:run(Steps, Options).

%% @doc A sentence for an error of this command.
-spec format_error({aco_cmd, term()}) -> iolist().
format_error({aco_cmd, missing_instance}) ->
    "give the instance number with --instance K (from 1)";
format_error({aco_cmd, {bad_option, Name, Value, Expected}}) ->
    io_lib:format("--~ts ~0tp: expected ~ts", [Name, Value, Expected]);
format_error({aco_cmd, {run, Why}}) ->
    terrain_workloads:aco_format_error(Why).

%%--------------------------------------------------------------------
%% Internal functions

check_options(Options) ->
    Positive = [{"ants", ants}, {"global", global}, {"local-iterations", local}, {"degree", degree}],
    Bad = [{Flag, maps:get(Key, Options), "an integer >= 1"} || {Flag, Key} <- Positive, maps:get(Key, Options) < 1]
        ++ [{"local-search", LS, "none, interchange or insertion"}
            || LS <- [maps:get(local_search, Options)], not lists:member(LS, ["none", "interchange", "insertion"])]
        ++ [{"placement", P, "random, attributes, distance or attributes_and_distance"}
            || P <- [maps:get(placement, Options)],
               not lists:member(P, ["random", "attributes", "distance", "attributes_and_distance"])]
        ++ [{"nodes-count", N, "an integer >= 1"} || N <- [opt(nodes_count, Options, 1)], N < 1],
    case {opt(instance, Options, none) =/= none, Bad} of
        {false, _} -> {error, {aco_cmd, missing_instance}};
        {true, [{Flag, Value, Expected} | _]} -> {error, {aco_cmd, {bad_option, Flag, Value, Expected}}};
        {true, []} -> {ok, Options}
    end.

%% The resource guard, before any vertex starts. Colonies: at most one per node of
%% the tree (--nodes-count with --local, else the cluster's nodes, which the launcher's
%% guard bounds); each holds a pheromone matrix of jobs^2 floats (24 bytes each);
%% each ant is a process with its tour (a list of jobs, 16 bytes each) and one more
%% in the colony's generation.
guard(#{jobs := Jobs}, Options) ->
    Colonies = case maps:get(local_run, Options) of
                   true -> opt(nodes_count, Options, 1 + maps:get(degree, Options) * maps:get(degree, Options));
                   false -> 1
               end,
    Ants = maps:get(ants, Options),
    %% with --local every colony runs here, else one on each node of a lab cluster
    {Option, Target} = case maps:get(local_run, Options) of
                           true -> {"--nodes-count x --ants", this_vm};
                           false -> {"--ants", lab_node}
                       end,
    terrain_lab_steps:run([fun(_) -> terrain_lab_guard:processes("--ants", Ants, Target) end,
                           fun(_) -> terrain_lab_guard:processes(Option, Colonies * Ants, Target) end,
                           fun(_) -> terrain_lab_guard:memory([{"--ants", Colonies * Ants,
                                                                terrain_lab_guard:process_bytes() + 32 * Jobs},
                                                               {"--nodes-count", Colonies, 24 * Jobs * Jobs}])
                           end], none).

%% Runs Fun on the nodes: this node (N times) with --local, a cluster started from
%% --spec (stopped afterwards), or the running cluster.
on_nodes(#{local_run := true} = Options, Fun) ->
    P = maps:get(degree, Options),
    Fun(lists:duplicate(opt(nodes_count, Options, 1 + P * P), node()));
on_nodes(#{spec := SpecFile}, Fun) when SpecFile =/= undefined ->
    terrain_lab:with_cluster(SpecFile, #{prefix => "aco" ++ os:getpid() ++ "_"},
                             fun(Infos) -> Fun([N || #{node := N} <- Infos]) end);
on_nodes(Options, Fun) ->
    case terrain_lab_cluster_state:connect(Options) of
        {ok, Nodes} -> Fun(Nodes);
        {error, _} = Error -> Error
    end.

run_on(Instance, Nodes, Options, Io) ->
    Tree = terrain_workloads:aco_tree(length(Nodes), maps:get(degree, Options)),
    Placement = list_to_atom(maps:get(placement, Options)),
    Seed = maps:get(seed, Options),
    Assignment = case maps:get(local_run, Options) of
                     true -> {ok, #{}};
                     false -> terrain_lab_aco:place(Placement, Tree, Nodes, Seed)
                 end,
    case Assignment of
        {ok, A} ->
            terrain_lab_io:progress(Io, "ML-ACO: ~b jobs, ~b colonies on ~b nodes~n",
                                    [maps:get(jobs, Instance), colonies(Tree), length(lists:usort(Nodes))]),
            RunOptions = #{ants => maps:get(ants, Options), global => maps:get(global, Options),
                           local => maps:get(local, Options), seed => Seed,
                           local_search => list_to_atom(maps:get(local_search, Options))},
            case terrain_lab_aco:run(Instance, Tree, A, RunOptions, 600000) of
                {ok, Result} -> {ok, Result#{colonies => colonies(Tree), nodes => length(lists:usort(Nodes))}};
                {error, {aco, _} = Why} -> {error, Why};
                {error, Why} -> {error, {aco_cmd, {run, Why}}}
            end;
        {error, _} = Error ->
            Error
    end.

%% An option without a default is `undefined' when not given.
opt(Key, Options, Default) ->
    case maps:get(Key, Options, undefined) of
        undefined -> Default;
        Value -> Value
    end.

colonies({colony, _, _}) -> 1;
colonies({_, _, Children}) -> lists:sum([colonies(C) || C <- Children]).

print(File, #{best_cost := Best, setup_s := Setup, main_s := Main} = Result, Optimum, Options, Io) ->
    Gap = case Optimum of
              null -> null;
              _ -> (Best - Optimum) / max(Optimum, 1)
          end,
    case maps:get(json, Options) of
        true ->
            terrain_lab_io:out(Io, "~ts~n", [terrain_json:encode(
                #{format => ?FORMAT, file => list_to_binary(File), instance => maps:get(instance, Options),
                  best_cost => Best, optimum => Optimum, gap => Gap, setup_s => Setup, main_s => Main,
                  colonies => maps:get(colonies, Result), nodes => maps:get(nodes, Result),
                  placement => list_to_binary(maps:get(placement, Options)),
                  local_search => list_to_binary(maps:get(local_search, Options)),
                  seed => maps:get(seed, Options), best => maps:get(best, Result)})]);
        false ->
            terrain_lab_io:out(Io, "best cost  ~b~n", [Best]),
            case Optimum of
                null -> ok;
                _ -> terrain_lab_io:out(Io, "optimum    ~b~ngap        ~.2f %~n", [Optimum, 100 * Gap])
            end,
            terrain_lab_io:out(Io, "setup      ~.3f s~nmain loop  ~.3f s~n", [Setup, Main])
    end.
