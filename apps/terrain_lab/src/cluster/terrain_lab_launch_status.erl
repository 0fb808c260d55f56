%% @private
%% @doc `terrain status': the recorded state of a detached cluster (terrain_lab_launch)
%% with every node checked at once under one deadline and, on a live cluster, each
%% node's version of the live tree and its place in it.
-module(terrain_lab_launch_status).

%% API
-export([status/2,
         explain/2,
         await_live/3]).

%% @doc The recorded state of the cluster in `Dir' with every node checked at once
%% under one deadline: each entry of `<<"nodes">>' gets `<<"state">>' `up' (it
%% answered), `unreachable' (its OS process is alive) or `down', and on an emulated
%% cluster `<<"address">>', the node's own loopback address
%% (`terrain_lab_netem_epmd:address/1').
-spec status(file:filename(), pos_integer()) -> {ok, map()} | {error, term()}.
status(Dir, Timeout) ->
    terrain_lab_steps:run(
      [fun(_) -> terrain_lab_cluster_state:read(Dir) end,
       fun(State) ->
               case terrain_lab_cluster_state:connect_cli(Dir) of
                   ok ->
                       Checked = addresses(State, check_nodes(State, Timeout, Dir)),
                       {ok, State#{<<"nodes">> := case maps:get(<<"live">>, State, false) of
                                                      false -> Checked;
                                                      _ -> live_places(Checked, Timeout)
                                                  end}};
                   {error, _} = ConnectError ->
                       ConnectError
               end
       end], Dir).

%% @doc A command's error on the cluster recorded in `Dir' (a member that went down, a
%% node that stopped answering), with the recorded VMs that are gone: `{error,
%% {vm_exits, Reason, Exited}}', each with its exit status, log and the log's last lines
%% (as `terrain_lab:with_cluster/3' names a run's VMs). A VM killed just before the
%% error may still be exiting: when none is gone yet, they are looked at again for up to
%% a second. Without a gone VM (or a readable state) the error stays as it is.
-spec explain(file:filename(), {error, term()}) -> {error, term()}.
explain(Dir, {error, Reason} = Error) ->
    case terrain_lab_cluster_state:read(Dir) of
        {ok, #{<<"nodes">> := Records}} ->
            case exited(Records, Dir, erlang:monotonic_time(millisecond) + 1000) of
                [] -> Error;
                Exited -> {error, {vm_exits, Reason, Exited}}
            end;
        {error, _} ->
            Error
    end.

%% @doc Waits until the live cluster of `Nodes' has settled: every node is connected to
%% every other and holds the version most nodes hold, with all of them as members of
%% its live group; asked once a second (a call with a deadline of its own), with
%% progress every 10 s. `{error, {live_not_settled, Settled, Total, Ms}}' at `Until'
%% (monotonic ms).
-spec await_live([node()], integer(), terrain_lab_io:io()) ->
          ok | {error, {live_not_settled, non_neg_integer(), pos_integer(), non_neg_integer()}}.
await_live(Nodes, Until, Io) ->
    await_live(Nodes, Until, Io, erlang:monotonic_time(millisecond), 0).

await_live(Nodes, Until, Io, T0, Reported) ->
    Settled = settled(Nodes, max(1000, min(5000, Until - erlang:monotonic_time(millisecond)))),
    Now = erlang:monotonic_time(millisecond),
    Total = length(Nodes),
    if
        Settled =:= Total ->
            terrain_lab_io:progress(Io, "live: ~b nodes meshed, one version, after ~.1f s~n", [Total, (Now - T0) / 1000]);
        Now >= Until ->
            {error, {live_not_settled, Settled, Total, Now - T0}};
        true ->
            Report = (Now - T0) div 10000,
            _ = Report > Reported andalso
                terrain_lab_io:progress(Io, "live: ~b of ~b nodes meshed at one version, ~.1f s~n",
                                        [Settled, Total, (Now - T0) / 1000]),
            receive after 1000 -> await_live(Nodes, Until, Io, T0, max(Report, Reported)) end
    end.

%% How many nodes answer with all the others connected, all of them as live members,
%% and the version most of them hold.
settled(Nodes, Timeout) ->
    Statuses = erpc:multicall(Nodes, terrain, live_status, [], Timeout),
    Connected = erpc:multicall(Nodes, erlang, nodes, [], Timeout),
    All = lists:sort(Nodes),
    Versions = [V || {ok, #{version := V}} <- Statuses],
    Common = case Versions of
                 [] -> none;
                 _ -> element(2, lists:max([{C, V} || {V, C} <- maps:to_list(count(Versions))]))
             end,
    length([N || {N, {ok, #{version := V, members := Members}}, {ok, Others}}
                     <- lists:zip3(Nodes, Statuses, Connected),
                 V =:= Common, lists:usort(Members) =:= All, (All -- [N]) -- Others =:= []]).

count(Values) ->
    lists:foldl(fun(V, Acc) -> maps:update_with(V, fun(C) -> C + 1 end, 1, Acc) end, #{}, Values).

%%--------------------------------------------------------------------
%% Internal functions

%% The local VMs of the records whose OS process is gone, as terrain_lab:format_exits/1
%% words them (a VM on another host is not asked here: its host may be what failed).
exited(Records, Dir, Deadline) ->
    Gone = [Record || #{<<"name">> := _} = Record <- Records, not maps:is_key(<<"host">>, Record),
                      terrain_lab_vm:alive(terrain_lab_vm:from_record(Record, Dir), 1000) =:= false],
    case Gone =:= [] andalso erlang:monotonic_time(millisecond) < Deadline of
        true ->
            receive after 100 -> exited(Records, Dir, Deadline) end;
        false ->
            [terrain_lab_cluster:exited_info(#{name => binary_to_atom(Name), node => binary_to_atom(Node),
                                               log => terrain_lab_cluster_state:vm_log(Dir, binary_to_atom(Name))})
             || #{<<"name">> := Name, <<"node">> := Node} <- Gone]
    end.

%% An emulated node's own address, which the other nodes of its cluster reach it at.
addresses(#{<<"netem">> := true}, Records) ->
    [R#{<<"address">> => list_to_binary(inet:ntoa(terrain_lab_netem_epmd:address(binary_to_list(N))))}
     || #{<<"node">> := N} = R <- Records];
addresses(_State, Records) ->
    Records.

%% Every node is checked at once under one deadline.
check_nodes(#{<<"nodes">> := Nodes}, Timeout, Dir) ->
    Self = self(),
    Checks = [{Node, spawn_monitor(fun() -> Self ! {self(), check_node(Node, Timeout, Dir)} end)} || Node <- Nodes],
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    [begin
         Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
         State = receive {Pid, S} -> erlang:demonitor(Ref, [flush]), S;
                         {'DOWN', Ref, process, Pid, _} -> unreachable
                 after Wait -> exit(Pid, kill), unreachable
                 end,
         Node#{<<"state">> => State}
     end || {Node, {Pid, Ref}} <- Checks].

%% `up' (it answered), `unreachable' (its VM runs), `down', or `host_unreachable'
%% (a VM on another host that ssh cannot ask).
check_node(#{<<"node">> := Name} = Record, Timeout, Dir) ->
    case net_kernel:connect_node(binary_to_atom(Name)) of
        true -> up;
        false ->
            case terrain_lab_vm:alive(terrain_lab_vm:from_record(Record, Dir), Timeout) of
                true -> unreachable;
                false -> down;
                {error, _} -> host_unreachable
            end
    end.

%% On a live cluster: each reachable node's version of the live tree and its place
%% in its own tree (the network names from the root down), asked at once.
live_places(Records, Timeout) ->
    Requests = [{maps:get(<<"node">>, R),
                 [erpc:send_request(binary_to_atom(maps:get(<<"node">>, R)), terrain, F, [])
                  || F <- [live_status, topology]]}
                || #{<<"state">> := up} = R <- Records],
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    Answers = maps:from_list([{N, [answer(Req, Deadline) || Req <- Reqs]} || {N, Reqs} <- Requests]),
    [case maps:get(N, Answers, unknown) of
         [#{version := Version}, Tree] when Tree =/= undefined, Tree =/= unknown ->
             R#{<<"live_version">> => Version,
                <<"live_place">> => [atom_to_binary(P) || P <- tree_place(Tree, binary_to_atom(N), [])]};
         _ ->
             R
     end || #{<<"node">> := N} = R <- Records].

answer(Request, Deadline) ->
    try erpc:receive_response(Request, max(0, Deadline - erlang:monotonic_time(millisecond)))
    catch
        error:_ -> unknown;
        exit:_ -> unknown
    end.

%% The names of the networks from the root down to a node's own ([] when absent).
tree_place({node, Node}, Node, Above) ->
    lists:reverse(Above);
tree_place({node, _}, _Node, _Above) ->
    [];
tree_place(Network, Node, Above) ->
    {Name, Children} = case Network of
                           {network, N, _, C} -> {N, C};
                           {network, N, C} when is_list(C) -> {N, C};
                           {network, C} -> {network, C}
                       end,
    Label = case is_atom(Name) of true -> Name; false -> list_to_atom(lists:flatten(io_lib:format("~0tp", [Name]))) end,
    lists:foldl(fun(Child, []) -> tree_place(Child, Node, [Label | Above]);
                   (_, Found) -> Found
                end, [], Children).
