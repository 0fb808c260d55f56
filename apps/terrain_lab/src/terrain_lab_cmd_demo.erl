%% @private
%% @doc `terrain demo': the main job of `make demo'. Starts the demo cluster with the
%% launcher, shows every node, records the run under `runs/<UTC stamp>/' and stops the
%% cluster. Later parts of terrain add their steps here; it stays one command.
-module(terrain_lab_cmd_demo).

%% API (CLI handler)
-export([run/3]).

-define(CLUSTER_FORMAT, <<"terrain.cluster/1">>).

%% @doc Runs the demo.
-spec run(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
run(#{spec := SpecFile, runs_dir := RunsDir}, [], Io) ->
    case terrain_lab_spec:read(SpecFile) of
        {ok, Spec} ->
            case terrain_lab_run:create(RunsDir) of
                {ok, RunDir} -> with_cluster(Spec, SpecFile, RunDir, Io);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

with_cluster(Spec, SpecFile, RunDir, Io) ->
    Count = length(terrain_lab_spec:nodes(Spec)),
    terrain_lab_cli:progress(Io, "starting ~b nodes of ~ts in parallel...~n", [Count, SpecFile]),
    T0 = erlang:monotonic_time(millisecond),
    Prefix = "demo" ++ os:getpid() ++ "_",
    case terrain_lab:start_cluster(Spec, #{prefix => Prefix}) of
        {ok, Cluster} ->
            Elapsed = erlang:monotonic_time(millisecond) - T0,
            terrain_lab_cli:progress(Io, "~b nodes running terrain after ~.1f s~n", [Count, Elapsed / 1000]),
            try
                Nodes = terrain_lab:cluster_nodes(Cluster),
                print_table(Nodes, Io),
                record(Spec, SpecFile, RunDir, Nodes, Elapsed, Io)
            after
                ok = terrain_lab:stop_cluster(Cluster),
                terrain_lab_cli:progress(Io, "cluster stopped~n", [])
            end;
        {error, _} = Error ->
            Error
    end.

print_table(Nodes, Io) ->
    terrain_lab_cli:out(Io, "~-26s ~-12s ~10s~n", ["NODE", "GROUP PATH", "SCHEDULERS"]),
    lists:foreach(fun(#{node := Node, path := Path, schedulers := S}) ->
                          terrain_lab_cli:out(Io, "~-26s ~-12s ~10b~n",
                                              [Node, lists:join("/", [atom_to_list(P) || P <- Path]), S])
                  end, Nodes).

record(Spec, SpecFile, RunDir, Nodes, Elapsed, Io) ->
    Cluster = #{format => ?CLUSTER_FORMAT,
                cluster => maps:get(name, Spec),
                spec => list_to_binary(filename:absname(SpecFile)),
                startup_ms => Elapsed,
                nodes => [#{name => Name, node => Node, group_path => Path, schedulers => S}
                          || #{name := Name, node := Node, path := Path, schedulers := S} <- Nodes]},
    Written = [terrain_json:write_file(filename:join(RunDir, "cluster.json"), Cluster),
               terrain_lab_run:write_manifest(RunDir, demo,
                                              [#{kind => cluster, file => <<"cluster.json">>,
                                                 parameters => #{spec => list_to_binary(SpecFile),
                                                                 nodes => length(Nodes)}}])],
    case [E || {error, _} = E <- Written] of
        [] ->
            terrain_lab_cli:out(Io, "run recorded in ~ts~n", [filename:join(RunDir, "manifest.json")]);
        [Error | _] ->
            Error
    end.
