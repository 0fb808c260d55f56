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

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "time-task",
       summary => "Time a repeated parallel task on every node into a durations CSV",
       usage => "",
       description => "Runs the task on every node of the running cluster (or --nodes) at once, RUNS times "
                      "after WARMUP unrecorded runs, and records the time until every node answered. --rpc-all "
                      "M:F:A calls M:F(A...) with A a literal list, e.g. timer:sleep:[10]. --at NODE times the "
                      "runs on NODE, so the calls cross the cluster's emulated links. Exits 1 when every run "
                      "failed; when some did, says how many on stderr.",
       args => {0, 0},
       options => [#{name => rpc_all, long => "rpc-all", type => string, required => true, metavar => "M:F:A",
                     help => "the call to make on every node"},
                   #{name => runs, long => "runs", type => integer, default => 100, range => {1, inf}, metavar => "N",
                     help => "number of runs"},
                   #{name => out, long => "out", type => string, required => true, metavar => "FILE",
                     help => "durations CSV to create"},
                   #{name => timeout, long => "timeout", type => integer, default => 5000, range => {1, inf},
                     metavar => "MS",
                     help => "deadline of each run"},
                   #{name => warmup, long => "warmup", type => integer, default => 1, range => {0, inf},
                     metavar => "N", help => "unrecorded runs first"},
                   #{name => at, long => "at", type => string, metavar => "NODE",
                     help => "time the runs on NODE, so the calls cross the cluster's links"},
                   #{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to use instead of the running cluster"},
                   terrain_lab_cli_options:state_dir()],
       run => {?MODULE, run}}].

%% @doc Runs `terrain time-task'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [], Io) ->
    Dir = terrain_lab_cluster_state:state_dir(Options),
    At = case maps:get(at, Options, undefined) of
             undefined -> fun() -> {ok, #{}} end;
             Name -> fun() -> case terrain_lab_cluster_state:resolve_node(Name, Dir) of
                                  {ok, Node} -> {ok, #{at => Node}};
                                  {error, _} = Error -> Error
                              end
                     end
         end,
    terrain_lab_steps:with([fun() -> terrain_lab_time_task:validate(maps:with([rpc_all, runs, timeout, out, warmup],
                                                                              Options)) end,
                            At,
                            fun() -> terrain_lab_cluster_state:connect(Options) end],
                           fun([Task, AtOption,
                                Nodes]) -> terrain_lab_time_task:run(maps:merge(Task, AtOption), Nodes, Io) end).
