%% @private
%% @doc The live cluster walk-through of `terrain demo' (docs/DISTANCES.md, "Live
%% topology" and "Placed groups"): a live, emulated cluster runs a placed group spread
%% over racks; a node joins, and the VM of a node that holds a member is killed with
%% kill -9. It prints the tree before and after and writes `live.json' (format
%% `terrain.live/1': the timeline, every node's place before and after, the members
%% before and after) for the report.
-module(terrain_lab_live).

%% API
-export([run/4]).

-include_lib("terrain_json/include/terrain_formats.hrl").

-define(GRACE, 3000).
-define(WAIT, 30000).
-define(CALL, 5000).

%%--------------------------------------------------------------------
%% API

%% @doc Runs the walk-through on the cluster of `SpecFile' (started live under
%% `Out'/state and stopped at the end), adding the nodes of `AddFile'; writes
%% `Out'/live.json. Returns the file's name relative to `Out'.
-spec run(file:filename(), file:filename(), file:filename(), terrain_lab_io:io()) -> {ok, string()} | {error, term()}.
run(SpecFile, AddFile, Out, Io) ->
    Dir = filename:join(Out, "state"),
    {ok, Null} = file:open("/dev/null", [write]),
    Quiet = #{out => Null, err => Null},
    case terrain_lab_launch:up(SpecFile, #{prefix => "ld" ++ os:getpid() ++ "_", timeout => undefined, netem => "auto",
                                           live => #{grace => ?GRACE, remeasure => false}}, Dir, Quiet) of
        {ok, Records} ->
            try walk(Records, AddFile, Out, Dir, Quiet, Io)
            catch
                error:{badmatch, {error, _} = Error} -> Error
            after
                _ = terrain_lab_launch_stop:stop(Dir, 5000, #{io => Quiet, force => true}),
                ok = file:close(Null)
            end;
        {error, _} = Error ->
            ok = file:close(Null),
            Error
    end.

%%--------------------------------------------------------------------
%% Internal

walk(Records, AddFile, Out, Dir, Quiet, Io) ->
    [Host | _] = Nodes = [N || #{node := N} <- Records],
    T0 = erlang:monotonic_time(millisecond),
    Event = fun(What, Detail) ->
                    #{t_s => round((erlang:monotonic_time(millisecond) - T0) / 100) / 10,
                      what => list_to_binary(What), version => version(Host), detail => iolist_to_binary(Detail)}
            end,
    ok = wait(fun() -> length(maps:get(members, call(Host, terrain, live_status, []))) =:= length(Nodes) end),
    Before = call(Host, terrain, topology, []),
    {ok, _} = call(Host, terrain, start_placed, [demo, #{start => {gen_event, start, []}, count => 4,
                                                         spread => {depth, 2}, candidates => Nodes -- [Host]}]),
    Members0 = call(Host, terrain, placed, [demo]),
    E1 = Event("placed group started", io_lib:format("4 members, spread over the racks ({depth, 2}) on ~ts",
                                                      [nodes_text([N || {_, N} <- Members0])])),
    terrain_lab_io:out(Io, "the live tree at version ~b:~n~ts", [version(Host), text(Before)]),
    terrain_lab_io:out(Io, "placed group demo: ~ts~n", [nodes_text([N || {_, N} <- Members0])]),
    terrain_lab_io:out(Io, "$ terrain up --add ~ts~n", [AddFile]),
    {ok, [#{node := New}]} = terrain_lab_launch_change:add(AddFile, #{}, Dir, Quiet),
    ok = wait(fun() -> lists:member(New, leaves(call(Host, terrain, topology, []))) end),
    E2 = Event("node joined", io_lib:format("~ts placed next to ~ts", [New, nodes_text(siblings(call(Host, terrain, topology, []), New))])),
    terrain_lab_io:out(Io, "~ts joined: version ~b, next to ~ts~n", [New, version(Host), nodes_text(siblings(call(Host, terrain, topology, []), New))]),
    {_, Victim} = hd(Members0),
    OsPid = call(Victim, os, getpid, []),
    erlang:monitor_node(Victim, true),
    terrain_lab_io:out(Io, "$ kill -9 ~ts   # the VM of ~ts, which holds a member~n", [OsPid, Victim]),
    true = terrain_lab_os:signal(OsPid, "KILL"),
    Down = receive {nodedown, Victim} -> erlang:monotonic_time(millisecond) after ?WAIT -> error({no_nodedown, Victim}) end,
    ok = wait(fun() -> M = call(Host, terrain, placed, [demo]), length(M) =:= 4 andalso not lists:keymember(Victim, 2, M) end),
    Healed = erlang:monotonic_time(millisecond) - Down,
    Members1 = call(Host, terrain, placed, [demo]),
    E3 = Event("member's node killed", io_lib:format("kill -9 of ~ts; 4 members again ~b ms after its nodedown, on ~ts",
                                                     [Victim, Healed, nodes_text([N || {_, N} <- Members1])])),
    terrain_lab_io:out(Io, "4 members again ~b ms after the nodedown: ~ts~n", [Healed, nodes_text([N || {_, N} <- Members1])]),
    ok = wait(fun() -> not lists:member(Victim, leaves(call(Host, terrain, topology, []))) end),
    E4 = Event("node left", io_lib:format("~ts removed from the tree after the ~b ms grace period", [Victim, ?GRACE])),
    Survivors = (Nodes -- [Victim]) ++ [New],
    ok = wait(fun() -> length(lists:usort([version(N) || N <- Survivors])) =:= 1 end),
    After = call(Host, terrain, topology, []),
    Versions = lists:usort([version(N) || N <- Survivors]),
    terrain_lab_io:out(Io, "the live tree at version ~b (versions on the nodes: ~w):~n~ts", [version(Host), Versions, text(After)]),
    All = lists:usort(leaves(Before) ++ leaves(After)),
    Document = #{format => ?TERRAIN_FORMAT_LIVE,
                 cluster_nodes => length(Nodes) + 1,
                 grace_ms => ?GRACE,
                 healed_ms => Healed,
                 versions_after => Versions,
                 timeline => [E1, E2, E3, E4],
                 places => [#{node => N, before => place(Before, N), 'after' => place(After, N)} || N <- All],
                 members_before => iolist_to_binary(nodes_text(lists:sort([N || {_, N} <- Members0]))),
                 members_after => iolist_to_binary(nodes_text(lists:sort([N || {_, N} <- Members1])))},
    case terrain_json:write_file(filename:join(Out, "live.json"), Document) of
        ok -> {ok, "live.json"};
        {error, _} = Error -> Error
    end.

call(Node, M, F, A) ->
    erpc:call(Node, M, F, A, ?CALL).

version(Node) ->
    maps:get(version, call(Node, terrain, live_status, [])).

wait(Fun) ->
    Deadline = erlang:monotonic_time(millisecond) + ?WAIT,
    wait(Fun, Deadline).

wait(Fun, Deadline) ->
    case Fun() of
        true -> ok;
        false ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> {error, {live_demo, timeout}};
                false -> receive after 50 -> wait(Fun, Deadline) end
            end
    end.

text(Tree) ->
    {ok, Text} = terrain:render_topology(Tree, text),
    Text.

leaves({node, N}) -> [N];
leaves(Network) -> lists:append([leaves(C) || C <- children(Network)]).

children({network, _, _, C}) -> C;
children({network, _, C}) when is_list(C) -> C;
children({network, C}) -> C.

name({network, N, _, _}) -> N;
name({network, N, C}) when is_list(C) -> N;
name({network, _}) -> network.

%% The networks from the root down to a node, joined with `/' (`-' when absent).
place(Tree, Node) ->
    case path(Tree, Node) of
        none -> <<"-">>;
        Path -> iolist_to_binary(lists:join("/", [io_lib:format("~0tp", [P]) || P <- Path]))
    end.

path({node, N}, N) -> [];
path({node, _}, _) -> none;
path(Network, Node) ->
    case [P || C <- children(Network), (P = path(C, Node)) =/= none] of
        [P | _] -> [name(Network) | P];
        [] -> none
    end.

siblings(Tree, Node) ->
    Lowest = fun L(T) ->
                     Kids = children(T),
                     case lists:member({node, Node}, Kids) of
                         true -> [N || {node, N} <- Kids, N =/= Node];
                         false -> lists:append([L(C) || {network, _, _, _} = C <- Kids] ++
                                               [L(C) || {network, _, C2} = C <- Kids, is_list(C2)])
                     end
             end,
    Lowest(Tree).

nodes_text(Nodes) ->
    lists:join(", ", [atom_to_list(N) || N <- Nodes]).
