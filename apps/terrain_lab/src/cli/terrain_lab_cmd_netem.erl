%% @private
%% @doc `terrain netem': partitions for manual experiments on the cluster that
%% `terrain up' started (with network emulation on).
%%
%% ```
%% terrain netem partition NODES NODES   cut every connection between the two sets
%% terrain netem isolate NODES           cut NODES from every other node of the cluster
%% terrain netem heal [NODES]            heal the partitions of NODES (default: all)
%% terrain netem show                    per node: proxied connections, nodes cut off
%% '''
%% NODES is a comma-separated list of spec node names (`eu1'), node names
%% (`eu1@host') or group names (`eu_r1', standing for all of its nodes), resolved
%% against the recorded state. The CLI joins the cluster as a hidden node with its
%% cookie; every operation has one deadline (`--timeout') for all nodes.
-module(terrain_lab_cmd_netem).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).


%%--------------------------------------------------------------------
%% API

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "netem",
       summary => "Partition, isolate and heal the nodes of the running emulated cluster",
       usage => "partition NODES NODES | isolate NODES | heal [NODES] | show | move NODE GROUP",
       description => "Acts on the cluster that 'terrain up' started with network emulation on. "
                      "partition cuts every connection between the two sets of nodes and refuses new "
                      "ones; isolate cuts NODES from all other nodes; heal lifts the partitions of "
                      "NODES (of every node without NODES); show lists, per node, its proxied "
                      "connections and the nodes it is cut from. NODES is a comma-separated list of "
                      "spec node names, node names or group names (a group stands for its nodes). "
                      "move puts NODE into GROUP of the spec: every link to it becomes that of its new "
                      "place at once, without disconnecting (a live topology finds the move by "
                      "re-measurement); the moved spec is kept in STATE_DIR/spec.cluster.",
       args => {1, 3},
       options => [terrain_lab_cli_options:state_dir(),
                   #{name => timeout, long => "timeout", type => integer, default => 5000, range => {1, inf},
                     metavar => "MS", help => "deadline for all nodes to apply it"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain netem ACTION ...'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [Action | Args], Io) ->
    case {Action, length(Args)} of
        {"partition", 2} -> run_on_cluster(Options, Action, Args, Io);
        {"isolate", 1} -> run_on_cluster(Options, Action, Args, Io);
        {"heal", N} when N =< 1 -> run_on_cluster(Options, Action, Args, Io);
        {"show", 0} -> run_on_cluster(Options, Action, Args, Io);
        {"move", 2} ->
            [Node, Group] = Args,
            case terrain_lab_launch_change:move(terrain_lab_cluster_state:state_dir(Options), Node, Group) of
                {ok, Path} -> terrain_lab_io:out(Io, "moved ~ts to ~ts~n", [Node, lists:join("/", [atom_to_list(P) || P <- Path])]);
                {error, _} = Error -> Error
            end;
        _ -> {error, {usage, {netem, {usage, [Action | Args]}}}}   % exit 2
    end.

%%--------------------------------------------------------------------
%% Internal functions

run_on_cluster(Options, Action, Args, Io) ->
    Dir = terrain_lab_cluster_state:state_dir(Options),
    terrain_lab_steps:with([fun() -> terrain_lab_cluster_state:read(Dir) end,
                            fun() -> terrain_lab_cluster_state:connect(Options) end],
                           fun([_State, All]) ->
                                   action(Action, Args, Dir, All, #{timeout => maps:get(timeout, Options)}, Io)
                           end).

action("partition", [A, B], Dir, _All, Options, Io) ->
    with_nodes([A, B], Dir,
               fun([NodesA, NodesB]) ->
                       done(terrain_lab_netem:partition(NodesA, NodesB, Options),
                            "cut ~ts from ~ts~n", [join(NodesA), join(NodesB)], Io)
               end);
action("isolate", [Names], Dir, All, Options, Io) ->
    with_nodes([Names], Dir,
               fun([Nodes]) ->
                       case All -- Nodes of
                           [] -> done(ok, "nothing to cut: ~ts is the whole cluster~n", [join(Nodes)], Io);
                           Others -> done(terrain_lab_netem:partition(Nodes, Others, Options),
                                          "isolated ~ts~n", [join(Nodes)], Io)
                       end
               end);
action("heal", [], _Dir, All, Options, Io) ->
    done(terrain_lab_netem:heal(All, Options), "healed every partition~n", [], Io);
action("heal", [Names], Dir, _All, Options, Io) ->
    with_nodes([Names], Dir,
               fun([Nodes]) ->
                       done(terrain_lab_netem:heal(Nodes, Options), "healed ~ts~n", [join(Nodes)], Io)
               end);
action("show", [], _Dir, All, Options, Io) ->
    Status = terrain_lab_netem:status(All, Options),
    terrain_lab_io:out(Io, "~-28s ~8s  ~s~n", ["NODE", "PROXIES", "CUT FROM"]),
    lists:foreach(fun(Node) ->
                          case maps:get(Node, Status) of
                              #{proxies := Proxies, blocked := Blocked} ->
                                  terrain_lab_io:out(Io, "~-28s ~8b  ~ts~n",
                                                     [Node, length(Proxies), case Blocked of [] -> "-"; _ -> join(Blocked) end]);
                              {error, Why} ->
                                  terrain_lab_io:out(Io, "~-28s ~8s  ~ts~n",
                                                     [Node, "?", terrain_lab_netem:format_error({netem, {failed, [{Node, Why}]}})])
                          end
                  end, All).

%% Resolves each comma-separated list of names through the cluster's state.
with_nodes(Lists, Dir, Fun) ->
    Steps = [fun() -> terrain_lab_cluster_state:resolve(string:lexemes(List, ","), Dir) end || List <- Lists],
    terrain_lab_steps:with(Steps, fun(Resolved) -> Fun([lists:usort(Nodes) || Nodes <- Resolved]) end).

done(ok, Format, Args, Io) ->
    terrain_lab_io:out(Io, Format, Args);
done({error, _} = Error, _Format, _Args, _Io) ->
    Error.

join(Nodes) ->
    lists:join(", ", [atom_to_list(N) || N <- Nodes]).
