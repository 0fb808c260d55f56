%% @private
%% @doc `terrain up', `terrain status', `terrain down': a cluster that outlives the CLI.
%%
%% The work is done by `terrain_lab_launch' (starting, checking and stopping detached
%% VMs) on the state that `terrain_lab_cluster_state' reads and writes; this module
%% defines the three commands and prints their results: the started nodes, the status
%% table (or `--json', format `terrain.status/1'), and what became of each node.
-module(terrain_lab_cmd_cluster).

%% API (command table)
-export([commands/0]).

%% API (CLI handlers)
-export([up/3,
         status/3,
         down/3]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {up, 3}, {status, 3}, {down, 3}]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(STATUS_FORMAT, ?TERRAIN_FORMAT_STATUS).
-define(MAX_MS, 4294967295).     % the longest timer (erlang:send_after/3): about 49.7 days

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "up",
       summary => "Start a cluster from a spec and leave it running",
       usage => "SPEC | --hosts FILE [--per-host N] | --slurm [--per-host N | --per-task]",
       description => "Starts the nodes of the cluster spec SPEC as detached VMs with a random cookie "
                      "(stored with mode 0600, never printed) and records them in STATE_DIR/cluster.json. "
                      "Refuses, before starting anything, while a cluster recorded there is still running, "
                      "when a node name is already registered with epmd (choose another --prefix), and when "
                      "the nodes would not fit in memory (23 MB per VM plus 55 kB per connection of the full mesh; "
                      "--force starts anyway). With "
                      "--hosts FILE (one host or hostlist expression a line, '#' comments) instead of SPEC, "
                      "the spec is built from the hosts, --per-host nodes on each, one group per host, "
                      "written to --spec-out (default FILE.spec) and started. With --slurm, inside a SLURM "
                      "allocation, the hosts are SLURM_JOB_NODELIST's (one VM each, --per-host N, or one per task "
                      "of SLURM_TASKS_PER_NODE with --per-task), grouped by 'scontrol show topology' when it "
                      "lists switches, and the VMs start with srun when it is on the PATH, else over ssh. "
                      "--live gives the cluster a live topology; --add SPEC starts the nodes of SPEC into the "
                      "running cluster (groups of SPEC with the name of a cluster group join it; emulated links "
                      "follow the merged spec, kept in STATE_DIR/spec.cluster).",
       args => {0, 1},
       options => [terrain_lab_cli_options:state_dir(),
                   terrain_lab_cli_options:prefix("", "prepended to every node name"),
                   #{name => timeout, long => "timeout", type => integer, range => {1, inf}, metavar => "MS",
                     help => "deadline for all nodes to come up (default 30 s + 1 s per node, at least 60 s)"},
                   #{name => force, long => "force", type => flag,
                     help => "start even when the nodes would not fit in memory"},
                   #{name => netem, long => "netem", type => string, default => "auto",
                     choices => ["auto", "on", "off"], metavar => "auto|on|off",
                     help => "emulate the spec's links (auto: when the spec has link options)"},
                   #{name => hosts, long => "hosts", type => string, metavar => "FILE",
                     help => "build the spec from a hosts file instead of SPEC"},
                   #{name => per_host, long => "per-host", type => integer, default => 1, range => {1, inf},
                     metavar => "N", help => "with --hosts or --slurm: nodes on each host"},
                   %% --slurm (terrain_lab_slurm, docs/HOSTS.md "SLURM")
                   #{name => slurm, long => "slurm", type => flag,
                     help => "build the spec from the SLURM allocation this runs in instead of SPEC"},
                   #{name => per_task, long => "per-task", type => flag,
                     help => "with --slurm: one node per task of SLURM_TASKS_PER_NODE on each host"},
                   #{name => spec_out, long => "spec-out", type => string, metavar => "FILE",
                     help => "with --hosts or --slurm: where the built spec is written (default: the hosts "
                             "file + .spec; terrain-slurm_JOBID.spec)"},
                   #{name => ssh_options, long => "ssh-option", type => list, metavar => "OPT,...",
                     help => "nodes on other hosts: ssh -o options (ConfigFile=F for -F F), repeatable"},
                   #{name => tls, long => "tls", type => flag,
                     help => "distribution over TLS: a CA and a certificate per node, the CLI joins with its own "
                             "(as the spec's tls => true; docs/HOSTS.md)"},
                   #{name => live, long => "live", type => flag,
                     help => "a live topology: nodes that join are placed into the tree by measurement, nodes "
                             "that leave are removed after a grace period (docs/DISTANCES.md, \"Live topology\")"},
                   #{name => live_grace, long => "live-grace", type => integer, range => {0, ?MAX_MS}, metavar => "MS",
                     help => "with --live: how long a node may be gone before it is removed (default 10000)"},
                   #{name => live_remeasure, long => "live-remeasure", type => integer, range => {0, ?MAX_MS},
                     metavar => "MS", help => "with --live: re-measure one node every MS, 0 for never (default 60000)"},
                   #{name => add, long => "add", type => string, metavar => "SPEC",
                     help => "start the nodes of SPEC into the running cluster (its groups may name the "
                             "cluster's groups)"},
                   #{name => code_path, long => "code-path", type => string, metavar => "DIR",
                     help => "nodes on other hosts: terrain's code is in DIR/<app>/ebin there "
                             "(default: the local code directories, for a shared home)"}],
       run => {?MODULE, up}},
     #{name => "status",
       summary => "List the nodes of the running cluster and whether each is reachable",
       usage => "",
       description => "Reads the state that 'terrain up' recorded and checks every node under one "
                      "deadline.",
       args => {0, 0},
       options => [terrain_lab_cli_options:state_dir(),
                   #{name => json, long => "json", type => flag, help => "print JSON for scripts"},
                   #{name => timeout, long => "timeout", type => integer, default => 3000, range => {1, inf},
                     metavar => "MS", help => "deadline for reaching the nodes"}],
       run => {?MODULE, status}},
     #{name => "down",
       summary => "Stop exactly the nodes that 'terrain up' started",
       usage => "[--nodes NAME,...]",
       description => "Stops every recorded node by node name, falling back to its recorded OS pid "
                      "(killed only while it is still that node's VM), and removes the state. An unreadable "
                      "cluster.json does not stop it: the nodes named by the pid files are stopped instead. "
                      "--force removes the state even when it names no node or a node could not be stopped. "
                      "--nodes stops only the named nodes and keeps the others running.",
       args => {0, 0},
       options => [terrain_lab_cli_options:state_dir(),
                   #{name => timeout, long => "timeout", type => integer, default => 5000, range => {1, inf},
                     metavar => "MS", help => "time a node gets to halt before it is killed"},
                   #{name => force, long => "force", type => flag,
                     help => "remove the state even when it is unreadable or a node could not be stopped"},
                   #{name => nodes, long => "nodes", type => string, metavar => "NAME,...",
                     help => "stop only these nodes (spec names or node names)"}],
       run => {?MODULE, down}}].

%% @doc `terrain up SPEC': starts the cluster and prints its nodes.
-spec up(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
up(#{live := false} = Options, _Args, _Io) when map_get(live_grace, Options) =/= undefined;
                                                map_get(live_remeasure, Options) =/= undefined ->
    {error, {usage, {hosts, {usage, "--live-grace and --live-remeasure go with --live"}}}};
up(#{add := AddFile} = Options, [], Io) when AddFile =/= undefined ->
    Dir = terrain_lab_cluster_state:state_dir(Options),
    case terrain_lab_launch_change:add(AddFile, maps:with([timeout], Options), Dir, Io) of
        {ok, Nodes} -> print_nodes(Nodes, Io);
        {error, _} = Error -> Error
    end;
up(#{add := AddFile}, [_ | _], _Io) when AddFile =/= undefined ->
    {error, {usage, {hosts, {usage, "give either SPEC or --add SPEC, not both"}}}};
up(#{slurm := true, hosts := HostsFile}, Args, _Io) when HostsFile =/= undefined; Args =/= [] ->
    {error, {usage, {slurm, {usage, "give one of SPEC, --hosts FILE and --slurm"}}}};
up(#{per_host := PerHost}, _Args, _Io) when PerHost > 100000 ->
    terrain_lab_guard:node_count(PerHost);    % before any node name (an atom) is made
up(#{slurm := true} = Options, [], Io) ->
    up_slurm(Options, Io);
up(#{per_task := true}, _Args, _Io) ->
    {error, {usage, {slurm, {usage, "--per-task goes with --slurm"}}}};
up(#{hosts := HostsFile} = Options, [], Io) when HostsFile =/= undefined ->
    %% --hosts: build the spec from the hosts file, then start it like any spec.
    SpecFile = case maps:get(spec_out, Options) of
                   undefined -> HostsFile ++ ".spec";
                   Given -> Given
               end,
    case hosts_spec(HostsFile, maps:get(per_host, Options), SpecFile, maps:get(force, Options)) of
        {ok, Hosts} ->
            terrain_lab_io:progress(Io, "wrote the spec of ~b host~s to ~ts~n",
                                    [length(Hosts), [$s || length(Hosts) > 1], SpecFile]),
            up(Options#{hosts := undefined}, [SpecFile], Io);
        {error, _} = Error ->
            Error
    end;
up(#{hosts := HostsFile}, [_ | _], _Io) when HostsFile =/= undefined ->
    {error, {usage, {hosts, {usage, "give either SPEC or --hosts FILE, not both"}}}};
up(_Options, [], _Io) ->
    {error, {usage, {hosts, {usage, "give SPEC or --hosts FILE"}}}};
up(Options, [SpecFile], Io) ->
    Dir = terrain_lab_cluster_state:state_dir(Options),
    Live = live(Options),
    UpOptions = maps:with([prefix, timeout, netem, force, ssh_options, code_path, launcher, tls], Options),
    case terrain_lab_launch:up(SpecFile, UpOptions#{live => Live}, Dir, Io) of
        {ok, Nodes} ->
            ok = print_nodes(Nodes, Io),
            case Live of
                false -> ok;
                _ -> terrain_lab_io:progress(Io, "watch it in a browser: terrain dashboard~ts, then open "
                                             "http://127.0.0.1:8470/~n",
                                             [case Dir of ".terrain" -> ""; _ -> " --state-dir " ++ Dir end])
            end;
        {error, _} = Error -> Error
    end.

%% --slurm: the spec of the allocation, started with srun (or ssh); terrain_lab_slurm.
-spec up_slurm(#{atom() => term()}, terrain_lab_io:io()) -> ok | {error, term()}.
up_slurm(Options, Io) ->
    Progress = fun(Text) -> terrain_lab_io:progress(Io, "~ts", [Text]) end,
    case terrain_lab_slurm:prepare(#{per_host => maps:get(per_host, Options), per_task => maps:get(per_task, Options),
                                     spec_out => maps:get(spec_out, Options), progress => Progress}) of
        {ok, #{spec_file := SpecFile, launcher := Launcher}} ->
            up(Options#{slurm := false, per_task := false, launcher => Launcher}, [SpecFile], Io);
        {error, {slurm, Detail} = Reason} when Detail =:= not_in_allocation; element(1, Detail) =:= variable;
                                               element(1, Detail) =:= count; element(1, Detail) =:= usage ->
            {error, {usage, Reason}};   % the allocation's environment is wrong: exit 2
        {error, _} = Error ->
            Error
    end.

%% The launcher's live option from --live, --live-grace and --live-remeasure (0: never).
-spec live(#{atom() => term()}) -> false | true | map().
live(Options) ->
    Given = maps:filter(fun(_, V) -> V =/= undefined end, maps:with([live_grace, live_remeasure], Options)),
    case {maps:get(live, Options, false), Given} of
        {false, _} -> false;
        {true, _} when map_size(Given) =:= 0 -> true;
        {true, _} -> maps:from_list([live_setting(K, V) || {K, V} <- maps:to_list(Given)])
    end.

-spec live_setting(live_grace | live_remeasure, term()) -> {grace | remeasure, term()}.
live_setting(live_grace, V) -> {grace, V};
live_setting(live_remeasure, 0) -> {remeasure, false};
live_setting(live_remeasure, V) -> {remeasure, V}.

%% @doc `terrain status [--json]'.
-spec status(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
status(Options, [], Io) ->
    Dir = terrain_lab_cluster_state:state_dir(Options),
    case terrain_lab_launch_status:status(Dir, maps:get(timeout, Options)) of
        {ok, State} ->
            case maps:get(json, Options) of
                true -> print_status_json(State, Io);
                false -> print_status_table(State, Io)
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc `terrain down': stops the recorded nodes and says what became of each.
-spec down(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
down(#{nodes := Names} = Options, [], Io) when Names =/= undefined ->
    Dir = terrain_lab_cluster_state:state_dir(Options),
    case terrain_lab_launch_change:stop_some(Dir, string:split(Names, ",", all), maps:get(timeout, Options), Io) of
        {ok, Results} ->
            lists:foreach(fun({Node, How}) -> terrain_lab_io:out(Io, "~-28ts ~ts~n", [Node, How]) end, Results),
            case terrain_lab_launch_stop:still_running(Results) of
                [] -> ok;
                Left -> {error, {launch, {still_running, Left}}}
            end;
        {error, _} = Error ->
            Error
    end;
down(Options, [], Io) ->
    Dir = terrain_lab_cluster_state:state_dir(Options),
    Force = maps:get(force, Options),
    case terrain_lab_launch_stop:stop(Dir, maps:get(timeout, Options), #{io => Io, force => Force}) of
        {ok, Results} ->
            lists:foreach(fun({Node, How}) -> terrain_lab_io:out(Io, "~-28ts ~ts~n", [Node, How]) end, Results),
            case {terrain_lab_launch_stop:still_running(Results), Force} of
                {[], _} -> ok;
                {Left, false} -> {error, {launch, {still_running, Left}}};
                {Left, true} ->
                    terrain_lab_io:progress(Io, "could not stop ~ts; the state was removed (--force)~n",
                                            [lists:join(", ", Left)])
            end;
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Internal functions

print_nodes(Nodes, Io) ->
    terrain_lab_io:out(Io, "~-28s ~-24s ~10s ~8s~n", ["NODE", "GROUP PATH", "SCHEDULERS", "OS PID"]),
    lists:foreach(fun(#{node := Node, group_path := Path, schedulers := S, os_pid := P}) ->
                          terrain_lab_io:out(Io, "~-28s ~-24s ~10w ~8s~n", [Node, path_text(Path), S, P])
                  end, Nodes).

print_status_table(#{<<"nodes">> := Nodes} = State, Io) ->
    terrain_lab_io:out(Io, "cluster ~ts (~ts), started ~ts~n",
                       [text(maps:get(<<"cluster">>, State, null)), text(maps:get(<<"spec">>, State, null)),
                        text(maps:get(<<"started_at">>, State, null))]),
    %% an emulated cluster: each node's own loopback address (docs/NETEM.md)
    Address = fun(N) -> case N of #{<<"address">> := A} -> [" ", io_lib:format("~-15ts", [A])]; #{} -> "" end end,
    terrain_lab_io:out(Io, "~-28s ~-24s ~10s ~8s ~8s ~9s~ts ~s~n",
                       ["NODE", "GROUP PATH", "SCHEDULERS", "OS PID", "CPU", "CPU/SCHED",
                        Address(case Nodes of [#{<<"address">> := _} | _] -> #{<<"address">> => "ADDRESS"};
                                    _ -> #{}
                                end), "STATE"]),
    lists:foreach(fun(N) ->
                          terrain_lab_io:out(Io, "~-28ts ~-24ts ~10ts ~8ts ~8ts ~9ts~ts ~s~n",
                                             [maps:get(<<"node">>, N), path_text(maps:get(<<"group_path">>, N, [])),
                                              text(maps:get(<<"schedulers">>, N, null)),
                                              text(maps:get(<<"os_pid">>, N, null)),
                                              cpu_text(maps:get(<<"cpu_quota">>, N, null)),
                                              cpu_text(maps:get(<<"cpu_quota_per_scheduler">>, N, null)),
                                              Address(N), maps:get(<<"state">>, N)])
                  end, Nodes),
    Up = length([x || #{<<"state">> := up} <- Nodes]),
    terrain_lab_io:out(Io, "~b of ~b nodes reachable~n", [Up, length(Nodes)]),
    print_live(State, Io),
    _ = maps:get(<<"tls">>, State, false) =:= true
        andalso terrain_lab_io:out(Io, "distribution over TLS (certificates of the cluster's CA)~n", []),
    print_levels(State, Io).

%% A live cluster: each node's version of the live tree and its place in it.
print_live(#{<<"live">> := Live, <<"nodes">> := Nodes}, Io) when Live =/= false ->
    terrain_lab_io:out(Io, "~nlive topology~n~-28s ~8s ~s~n", ["NODE", "VERSION", "PLACE IN THE LIVE TREE"]),
    lists:foreach(fun(N) ->
                          terrain_lab_io:out(Io, "~-28ts ~8ts ~ts~n",
                                             [maps:get(<<"node">>, N), text(maps:get(<<"live_version">>, N, null)),
                                              case maps:get(<<"live_place">>, N, null) of
                                                  null -> "-";
                                                  [] -> "(not in the tree)";
                                                  Place -> path_text(Place)
                                              end])
                  end, Nodes);
print_live(_State, _Io) ->
    ok.

%% The spec's link levels: between two nodes, the level of their lowest common group
%% applies (recorded by `up'; absent from states written before network emulation).
print_levels(#{<<"levels">> := Levels} = State, Io) when is_list(Levels) ->
    Netem = case maps:get(<<"netem">>, State, false) of
                true -> "on";
                _ -> "off: the spec's links are not applied"
            end,
    terrain_lab_io:out(Io, "~nnetwork emulation ~ts~n", [Netem]),
    terrain_lab_io:out(Io, "~-28s ~12s ~12s ~16s ~12s~n", ["LEVEL", "LATENCY", "JITTER", "BANDWIDTH", "RTT"]),
    lists:foreach(fun(L) when is_map(L) ->
                          Latency = maps:get(<<"latency_us">>, L, null),
                          Rtt = case is_integer(Latency) of
                                    true -> 2 * Latency;
                                    false -> null
                                end,
                          terrain_lab_io:out(Io, "~-28ts ~12ts ~12ts ~16ts ~12ts~n",
                                             [text(maps:get(<<"level">>, L, null)),
                                              unit(Latency, " us"), unit(maps:get(<<"jitter_us">>, L, null), " us"),
                                              unit(maps:get(<<"bandwidth_bytes_per_s">>, L, null), " B/s"),
                                              unit(Rtt, " us")]);
                     (_) ->
                          ok
                  end, Levels);
print_levels(_State, _Io) ->
    ok.

print_status_json(State, Io) ->
    Status = #{format => ?STATUS_FORMAT,
               cluster => maps:get(<<"cluster">>, State, null),
               spec => maps:get(<<"spec">>, State, null),
               cookie_file => maps:get(<<"cookie_file">>, State, null),
               started_at => maps:get(<<"started_at">>, State, null),
               netem => maps:get(<<"netem">>, State, false),
               tls => maps:get(<<"tls">>, State, false),
               levels => maps:get(<<"levels">>, State, []),
               live => maps:get(<<"live">>, State, false),
               nodes => maps:get(<<"nodes">>, State)},
    terrain_lab_io:out(Io, "~ts~n", [terrain_json:encode(Status, #{pretty => true})]).

path_text(Path) ->
    lists:join("/", [to_list(P) || P <- Path]).

to_list(A) when is_atom(A) -> atom_to_list(A);
to_list(B) when is_binary(B) -> binary_to_list(B).

unit(Value, Unit) when is_integer(Value) -> integer_to_list(Value) ++ Unit;
unit(_, _Unit) -> "-".

%% A node's CPU quota in cores ("-": unlimited).
cpu_text(null) -> "-";
cpu_text(Cores) when is_number(Cores) -> float_to_list(float(Cores), [{decimals, 2}]).

%% A recorded value as text; what `up' did not write shows as "-".
text(null) -> "-";
text(I) when is_integer(I) -> integer_to_list(I);
text(B) when is_binary(B) -> B;
text(Other) -> io_lib:format("~0tp", [Other]).
hosts_spec(_HostsFile, PerHost, _SpecFile, _Force) when PerHost < 1 ->
    {error, {usage, {hosts, {usage, "--per-host must be at least 1"}}}};
hosts_spec(HostsFile, PerHost, SpecFile, Force) ->
    %% the resource guard before a node name is made (--per-host 100000000 would
    %% exhaust the atom table), and the spec is a new output, never a hand-edited one
    terrain_lab_steps:run([fun(_) -> terrain_lab_hosts:read_file(HostsFile) end,
                           fun(Hosts) -> terrain_lab_guard:vms(length(Hosts) * PerHost, #{force => Force}) end,
                           fun(_) -> terrain_lab_files:new_output(file, SpecFile, [HostsFile]) end,
                           fun(_) -> terrain_lab_hosts:write_spec(HostsFile, PerHost, SpecFile) end], none).
