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

-ignore_xref([{commands, 0}, {run, 3}]).

%%--------------------------------------------------------------------
%% API

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "netem",
       summary => "Partition, isolate and heal the nodes of the running emulated cluster",
       usage => "partition NODES NODES | isolate NODES | heal [NODES] | show",
       description => "Acts on the cluster that 'terrain up' started with network emulation on. "
                      "partition cuts every connection between the two sets of nodes and refuses new "
                      "ones; isolate cuts NODES from all other nodes; heal lifts the partitions of "
                      "NODES (of every node without NODES); show lists, per node, its proxied "
                      "connections and the nodes it is cut from. NODES is a comma-separated list of "
                      "spec node names, node names or group names (a group stands for its nodes).",
       args => {1, 3},
       options => [terrain_lab_cli_options:state_dir(),
                   #{name => timeout, long => "timeout", type => integer, default => 5000,
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
        _ -> {error, {netem, {usage, [Action | Args]}}}
    end.

%%--------------------------------------------------------------------
%% Internal functions

run_on_cluster(Options, Action, Args, Io) ->
    terrain_lab_steps:with([fun() -> terrain_lab_cluster_state:read(terrain_lab_cluster_state:state_dir(Options)) end,
                            fun() -> terrain_lab_cluster_state:connect(Options) end],
                           fun([#{<<"nodes">> := Recorded}, All]) ->
                                   action(Action, Args, Recorded, All, #{timeout => maps:get(timeout, Options)}, Io)
                           end).

action("partition", [A, B], Recorded, _All, Options, Io) ->
    with_nodes([A, B], Recorded,
               fun([NodesA, NodesB]) ->
                       done(terrain_lab_netem:partition(NodesA, NodesB, Options),
                            "cut ~ts from ~ts~n", [join(NodesA), join(NodesB)], Io)
               end);
action("isolate", [Names], Recorded, All, Options, Io) ->
    with_nodes([Names], Recorded,
               fun([Nodes]) ->
                       case All -- Nodes of
                           [] -> done(ok, "nothing to cut: ~ts is the whole cluster~n", [join(Nodes)], Io);
                           Others -> done(terrain_lab_netem:partition(Nodes, Others, Options),
                                          "isolated ~ts~n", [join(Nodes)], Io)
                       end
               end);
action("heal", [], _Recorded, All, Options, Io) ->
    done(terrain_lab_netem:heal(All, Options), "healed every partition~n", [], Io);
action("heal", [Names], Recorded, _All, Options, Io) ->
    with_nodes([Names], Recorded,
               fun([Nodes]) ->
                       done(terrain_lab_netem:heal(Nodes, Options), "healed ~ts~n", [join(Nodes)], Io)
               end);
action("show", [], _Recorded, All, Options, Io) ->
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

%% Resolves each comma-separated list of names against the recorded nodes.
with_nodes(Lists, Recorded, Fun) ->
    Resolved = [resolve(string:lexemes(List, ","), Recorded) || List <- Lists],
    case [Name || {error, Name} <- lists:append(Resolved)] of
        [] -> Fun([lists:usort(lists:append([Nodes || {ok, Nodes} <- R])) || R <- Resolved]);
        [Unknown | _] -> {error, {netem, {unknown_name, Unknown, names(Recorded)}}}
    end.

resolve(Names, Recorded) ->
    [case [binary_to_atom(Node) || #{<<"node">> := Node} = R <- Recorded, matches(list_to_binary(Name), R)] of
         [] -> {error, Name};
         Nodes -> {ok, Nodes}
     end || Name <- Names].

matches(Name, #{<<"node">> := Node} = Record) ->
    Name =:= Node orelse Name =:= maps:get(<<"name">>, Record, undefined)
        orelse lists:member(Name, maps:get(<<"group_path">>, Record, [])).

names(Recorded) ->
    lists:usort([N || #{<<"name">> := N} <- Recorded]
                ++ lists:append([P || #{<<"group_path">> := P} <- Recorded])).

done(ok, Format, Args, Io) ->
    terrain_lab_io:out(Io, Format, Args);
done({error, _} = Error, _Format, _Args, _Io) ->
    Error.

join(Nodes) ->
    lists:join(", ", [atom_to_list(N) || N <- Nodes]).
