%% @private
%% @doc `terrain time-task': times a repeated parallel task on every node of the
%% running cluster (or of `--nodes') into a durations CSV.
%%
%% The task, its CSV row and its deadline are `terrain_lab_time_task''s; this module
%% defines the command, joins the cluster and hands over.
-module(terrain_lab_cmd_time_task).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "time-task",
       summary => "Time a repeated parallel task on every node into a durations CSV",
       usage => "",
       description => "Runs the task on every node of the running cluster (or --nodes) at once, RUNS times, "
                      "and records the time until every node answered. --rpc-all M:F:A calls M:F(A...) "
                      "with A a literal list, e.g. timer:sleep:[10].",
       args => {0, 0},
       options => [#{name => rpc_all, long => "rpc-all", type => string, metavar => "M:F:A",
                     help => "the call to make on every node"},
                   #{name => runs, long => "runs", type => integer, default => 100, metavar => "N",
                     help => "number of runs"},
                   #{name => out, long => "out", type => string, metavar => "FILE",
                     help => "durations CSV to create"},
                   #{name => timeout, long => "timeout", type => integer, default => 5000, metavar => "MS",
                     help => "deadline of each run"},
                   #{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to use instead of the running cluster"},
                   terrain_lab_cli_options:state_dir()],
       run => {?MODULE, run}}].

%% @doc Runs `terrain time-task'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [], Io) ->
    terrain_lab_steps:with([fun() -> terrain_lab_time_task:validate(maps:with([rpc_all, runs, timeout, out], Options)) end,
                            fun() -> terrain_lab_cluster_state:connect(Options) end],
                           fun([Task, Nodes]) -> terrain_lab_time_task:run(Task, Nodes, Io) end).
