%% @private
%% @doc Changes to a running detached cluster (terrain_lab_launch): `terrain up --add'
%% starts nodes into it, `terrain down --nodes' stops some of its nodes, `terrain netem
%% move' moves a node to another group of its spec.
%%
%% Each change holds the state directory's lock for as long as it runs, the lock `up'
%% takes (terrain_lab_cluster_state:lock/1), so that two changes, or a change and an
%% `up', never interleave: the second is refused with a sentence. The cluster's spec
%% as changed is kept in `STATE/spec.cluster', and `cluster.json' and that spec always
%% name the same nodes: a node that leaves leaves both (so it can be added again), and
%% an add that fails stops its new nodes and leaves both as they were.
%%
%% `up --add' checks everything before it makes a name (an atom) or starts a VM: the
%% nodes of the spec to add are counted in its text and the resource guard asked
%% (terrain_lab_guard), the spec must name no node the cluster has, every new full node
%% name must fit in an atom, and no new name may be registered with epmd already. The
%% new nodes are recorded in `cluster.json' before their VMs start, so `terrain down'
%% stops them even when `up --add' is killed halfway (each VM also writes its pid file
%% first thing, which `terrain down' reads too: terrain_lab_launch_stop).
-module(terrain_lab_launch_change).

%% API
-export([add/4,
         move/3,
         stop_some/4]).

-include_lib("kernel/include/file.hrl").

-define(MAX_NAME, 255).          % characters in an atom
-define(MAX_SPEC_BYTES, 64 * 1024 * 1024).   % a spec to add: far above 100,000 nodes (terrain_lab_guard)

%%--------------------------------------------------------------------
%% API

%% @doc `terrain up --add SPEC': starts the nodes of `AddFile' into the cluster recorded
%% in `Dir' (terrain_lab_spec:merge/2: its groups may name the cluster's). The merged
%% spec is written to `Dir'/spec.cluster and recorded; with network emulation the
%% running nodes get the merged link tables before the new nodes start, so every
%% connection to a new node crosses its links. On a live cluster the new nodes start
%% without a topology: the sequencer places them (terrain_live); otherwise they get
%% the merged spec's tree. Returns the new nodes' records.
-spec add(file:filename(), #{timeout => pos_integer() | undefined}, file:filename(), terrain_lab_io:io()) ->
          {ok, [terrain_lab_launch:node_record()]} | {error, term()}.
add(AddFile, Options, Dir, Io) ->
    Steps = [fun(_) -> guard_count(AddFile) end,
             fun(_) -> terrain_lab_cluster_state:read(Dir) end,
             fun(State) -> merged(State, AddFile) end,
             fun({State, Spec, Terms}) -> new_nodes(State, Spec, Terms) end,
             fun(Change) ->
                     case terrain_lab_cluster_state:connect_cli(Dir) of
                         ok -> add_nodes(Change, Options, Dir, Io);
                         {error, _} = Error -> Error
                     end
             end],
    terrain_lab_launch:with_lock(Dir, fun() -> terrain_lab_steps:run(Steps, none) end).

%% @doc `terrain netem move NODE GROUP': moves a node of the emulated cluster in `Dir'
%% into another group of its spec: every node gets the links of the new spec (the
%% connections stay up, their delays change at once), the merged spec is written to
%% `Dir'/spec.cluster and the node's recorded group path changes. The node itself
%% does not restart; a live topology finds the move by re-measurement.
-spec move(file:filename(), string(), string()) -> {ok, [atom()]} | {error, term()}.
move(Dir, NodeName, Group) ->
    Steps = [fun(_) -> terrain_lab_cluster_state:read(Dir) end,
             fun(State) -> spec_path(State) end,
             fun(State) -> moved_spec(State, NodeName, Group, Dir) end,
             fun(Moved) -> apply_move(Moved, Dir) end],
    terrain_lab_launch:with_lock(Dir, fun() -> terrain_lab_steps:run(Steps, none) end).

%% @doc `terrain down --nodes NAME,...': stops those nodes of the cluster in `Dir' and
%% removes them from its state and its spec (so that they can be added again); the
%% others keep running. When no node is left the whole state goes, as after `down'.
-spec stop_some(file:filename(), [string()], pos_integer(), terrain_lab_io:io()) ->
          {ok, [terrain_lab_launch_stop:stop_result()]} | {error, term()}.
stop_some(Dir, Names, Timeout, Io) ->
    Steps = [fun(_) -> terrain_lab_cluster_state:read(Dir) end,
             fun(State) ->
                     case recorded_nodes(Names, State, Dir) of
                         {ok, Nodes} -> {ok, {State, [atom_to_binary(N) || N <- Nodes]}};
                         {error, _} = Error -> Error
                     end
             end,
             fun({State, Stop}) ->
                     case terrain_lab_cluster_state:connect_cli(Dir) of
                         ok -> stop_recorded(State, Stop, Timeout, Dir, Io);
                         {error, _} = Error -> Error
                     end
             end],
    terrain_lab_launch:with_lock(Dir, fun() -> terrain_lab_steps:run(Steps, none) end).

%%--------------------------------------------------------------------
%% up --add: the checks

%% The resource guard before any name is made: the nodes of the spec to add, counted
%% in its text (a regular file, read whole: file:consult/1 would make every name an atom).
-spec guard_count(file:filename()) -> ok | {error, term()}.
guard_count(AddFile) ->
    case file:read_file_info(AddFile) of
        {ok, #file_info{type = regular, size = Size}} when Size > ?MAX_SPEC_BYTES ->
            {error, {launch, {spec_too_large, AddFile, Size, ?MAX_SPEC_BYTES}}};
        {ok, #file_info{type = regular}} ->
            case file:read_file(AddFile) of
                {ok, Text} ->
                    case terrain_lab_guard:vms(count_nodes(Text), #{}) of
                        {error, {guard, {nodes, _Counted, Max}}} -> {error, {launch, {too_many_nodes, AddFile, Max}}};
                        Checked -> Checked
                    end;
                {error, Why} -> {error, {spec, AddFile, [], {file, Why}}}
            end;
        {ok, #file_info{type = Type}} -> {error, {launch, {not_regular, AddFile, Type}}};
        {error, Why} -> {error, {spec, AddFile, [], {file, Why}}}
    end.

%% The `{node, ...}' terms in a spec's text (at least as many as the spec has nodes),
%% counted only as far as the guard's node limit allows: one more is enough to refuse.
-spec count_nodes(binary()) -> non_neg_integer().
count_nodes(Text) ->
    {ok, Node} = re:compile(<<"\\{\\s*node\\b">>),
    count_nodes(Text, Node, 0, 0).

count_nodes(Text, Node, Offset, Count) ->
    case Count rem 1024 =:= 0 andalso terrain_lab_guard:node_count(Count) =/= ok of
        true ->
            Count;                  % over the limit already
        false ->
            case re:run(Text, Node, [{offset, Offset}, {capture, first, index}]) of
                {match, [{At, Length}]} -> count_nodes(Text, Node, At + Length, Count + 1);
                nomatch -> Count
            end
    end.

%% The merged spec; a spec that names a node the cluster has already is refused
%% before the merge would call it a duplicate.
merged(#{<<"spec">> := SpecPath} = State, AddFile) when is_binary(SpecPath) ->
    case file:consult(AddFile) of
        {ok, Added} ->
            Recorded = [N || #{<<"name">> := N} <- maps:get(<<"nodes">>, State)],
            case [N || N <- spec_node_names(Added), lists:member(atom_to_binary(N), Recorded)] of
                [] ->
                    case terrain_lab_spec:merge(binary_to_list(SpecPath), AddFile) of
                        {ok, Spec, Terms} -> {ok, {State, Spec, Terms}};
                        {error, _} = Error -> Error
                    end;
                Present ->
                    {error, {launch, {already_in_cluster, [atom_to_list(N) || N <- Present]}}}
            end;
        {error, _} ->
            terrain_lab_spec:read(AddFile)      % its sentence for a file that does not parse
    end;
merged(_State, _AddFile) ->
    {error, {launch, no_spec_recorded}}.

%% The names of the `{node, Name, _}' terms anywhere in spec terms.
spec_node_names(Terms) when is_list(Terms) ->
    lists:append([spec_node_names(T) || T <- Terms]);
spec_node_names({node, Name, _}) when is_atom(Name) -> [Name];
spec_node_names({group, _, _, Children}) -> spec_node_names(Children);
spec_node_names(_) -> [].

%% The nodes the merged spec adds, with their full names, once the names are checked:
%% each fits in an atom (refused as `up' refuses it), and none is registered with epmd
%% (a VM of another cluster, or a stale one of this: refused at once, as by `up').
new_nodes(#{<<"nodes">> := Records} = State, Spec, Terms) ->
    Prefix = binary_to_list(maps:get(<<"prefix">>, State, <<>>)),
    Known = [N || #{<<"name">> := N} <- Records],
    New = [NS || #{name := Name} = NS <- terrain_lab_spec:nodes(Spec), not lists:member(atom_to_binary(Name), Known)],
    Names = [Name || #{name := Name} <- New],
    terrain_lab_steps:run(
      [fun(_) -> case New of [] -> {error, {launch, nothing_to_add}}; _ -> ok end end,
       fun(_) -> terrain_lab_launch:check_full_names(Names, Prefix) end,
       fun(_) ->
               case terrain_lab_launch:refuse_clashes(Names, Prefix) of
                   {error, {launch, {name_clash, Clashes}}} -> {error, {launch, {add_clash, Clashes}}};
                   Checked -> Checked
               end
       end,
       fun(_) ->
               NewNodes = [{NS, terrain_lab_dist:node_name(Prefix, Name)} || #{name := Name} = NS <- New],
               {ok, #{state => State, spec => Spec, terms => Terms, prefix => Prefix, new => NewNodes}}
       end], none).

%%--------------------------------------------------------------------
%% up --add: the start

%% Records the new nodes, writes the merged spec, sets the links, starts the VMs and
%% brings the nodes up; when one does not come up, every new node is stopped again and
%% the state and the spec are as before.
add_nodes(#{state := State, spec := Spec, terms := Terms, new := NewNodes} = Change, Options, Dir, Io) ->
    SpecFile = filename:join(Dir, "spec.cluster"),
    Pending = [pending_record(NodeSpec, Node) || {NodeSpec, Node} <- NewNodes],
    Before = spec_backup(State, SpecFile),
    Cleanup = {up_add, Dir},
    ok = terrain_lab_cleanup:add(Cleanup, fun() -> interrupted_add(NewNodes, Dir) end),
    Prepared = fun(_) ->
                       case terrain_lab_steps:run([fun(_) -> record(State, SpecFile, Pending, Dir) end,
                                                   fun(_) -> write_terms(SpecFile, Terms) end,
                                                   fun(_) -> set_links(Change, Spec) end], none) of
                           {error, _} = Error -> _ = restore(Before, State, SpecFile, Dir), Error;
                           _ -> ok
                       end
               end,
    try
        terrain_lab_steps:run(
          [Prepared,
           fun(_) -> start_new(Change, Options, Dir, Io) end,
           fun(Results) -> recorded_add(Change, Results, SpecFile, Before, Dir, Io) end], none)
    after
        terrain_lab_cleanup:remove(Cleanup)
    end.

%% On SIGTERM (the one exit path's cleanups): what was being added is recorded, and
%% the user is told so.
interrupted_add(NewNodes, Dir) ->
    io:format(standard_error, "terrain up --add: interrupted; the nodes being added (~ts) are recorded in ~ts: "
              "'terrain status' shows them, 'terrain down --nodes ~ts --state-dir ~ts' stops them~n",
              [names_text(NewNodes), Dir, names_text(NewNodes), Dir]).

names_text(NewNodes) ->
    lists:join(",", [atom_to_list(Name) || {#{name := Name}, _Node} <- NewNodes]).

%% The record of a node about to start (its OS pid comes with its pid file).
pending_record(#{name := Name, path := Path}, Node) ->
    terrain_lab_launch:json_record(#{name => Name, node => Node, group_path => Path, os_pid => null,
                                     schedulers => null, cpu_quota => null, cpu_quota_per_scheduler => null}).

%% The spec file and its text before the change, to put back when the add fails.
spec_backup(#{<<"spec">> := SpecPath}, SpecFile) ->
    {SpecPath, case file:read_file(SpecFile) of {ok, Text} -> Text; {error, _} -> none end}.

record(#{<<"nodes">> := Records} = State, SpecFile, Added, Dir) ->
    terrain_lab_cluster_state:write(Dir, State#{<<"spec">> => list_to_binary(filename:absname(SpecFile)),
                                                <<"nodes">> => Records ++ Added}).

set_links(#{state := State, prefix := Prefix}, Spec) ->
    case maps:get(<<"netem">>, State, false) of
        true -> terrain_lab_netem:set_links(Spec, Prefix, reachable_names(State));
        _ -> ok
    end.

%% The recorded nodes that answer: a node that is down gets its links when it is
%% started again, and does not stop a change of the others.
reachable_names(State) ->
    maps:filter(fun(_Name, Node) -> net_kernel:connect_node(Node) end, recorded_names(State)).

recorded_names(#{<<"nodes">> := Records}) ->
    maps:from_list([{binary_to_atom(N), binary_to_atom(Node)} || #{<<"name">> := N, <<"node">> := Node} <- Records]).

start_new(#{state := State, spec := Spec, prefix := Prefix, new := NewNodes}, Options, Dir, Io) ->
    Timeout = case maps:get(timeout, Options, undefined) of
                  undefined -> terrain_lab_launch:default_timeout(length(NewNodes));
                  T -> T
              end,
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    Netem = maps:get(<<"netem">>, State, false) =:= true,
    Names = recorded_names(State),
    terrain_lab_io:progress(Io, "adding ~b node~s to cluster ~ts~n",
                            [length(NewNodes), [$s || length(NewNodes) > 1], maps:get(name, Spec)]),
    NetemOption = case Netem of true -> #{netem => {Spec, Prefix}}; false -> #{} end,
    Started = [terrain_lab_vm:start(maps:merge(terrain_lab_launch:vm_options(NodeSpec, Node, Dir), NetemOption))
               || {NodeSpec, Node} <- NewNodes],
    AllNames = maps:merge(Names, maps:from_list([{Name, Node} || {#{name := Name}, Node} <- NewNodes])),
    Extra = case terrain_lab_launch:live_option(maps:get(<<"live">>, State, false)) of
                false -> #{topology => terrain_lab_spec:topology(Spec, fun(N) -> maps:get(N, AllNames) end)};
                Live -> #{live => Live}
            end,
    Cuts = cuts(Netem, State, NewNodes, Deadline),
    Self = self(),
    Workers = [spawn_monitor(fun() ->
                                     Result = terrain_lab_launch:bring_up(
                                                Start, maps:merge(NodeSpec#{cluster => maps:get(name, Spec)}, Extra),
                                                Node, Deadline, cut(maps:get(Node, Cuts, []), Deadline)),
                                     Self ! {self(), join_cluster(Result, Node, maps:values(Names), Deadline)}
                             end) || {{NodeSpec, Node}, Start} <- lists:zip(NewNodes, Started)],
    {ok, terrain_lab_launch:collect(Workers, "up", Io)}.

%% The partitions a node added to a cut cluster joins: it takes the side of its
%% nearest recorded node in the spec (the longest common group path, the first such
%% node in the record), and is cut from the nodes that node is cut from. Without
%% this, a node added into s1 while s0 and s1 are partitioned joined both sides. Only
%% reachable nodes are cut from: a node of the record that is down (killed while the
%% partition lasts) is still on its side's blocked lists, and cutting the new node from
%% it would ask the dead node, fail, and stop the add; it gets its links when started again.
cuts(false, _State, _NewNodes, _Deadline) ->
    #{};
cuts(true, #{<<"nodes">> := Records} = State, NewNodes, Deadline) ->
    Reachable = maps:values(reachable_names(State)),
    Timeout = max(1, Deadline - erlang:monotonic_time(millisecond)),
    Blocked = maps:fold(fun(Node, #{blocked := B}, Acc) ->
                                case [N || N <- B, lists:member(N, Reachable)] of
                                    [] -> Acc;
                                    Up -> Acc#{Node => Up}
                                end;
                           (_Node, _Status, Acc) -> Acc
                        end, #{}, terrain_lab_netem:status(Reachable, #{timeout => Timeout})),
    Paths = [{binary_to_atom(N), [binary_to_atom(G) || G <- P]}
             || #{<<"node">> := N, <<"group_path">> := P} <- Records, lists:member(binary_to_atom(N), Reachable)],
    case map_size(Blocked) of
        0 -> #{};
        _ -> maps:from_list([{Node, nearest_cut(Path, Paths, Blocked)} || {#{path := Path}, Node} <- NewNodes])
    end.

nearest_cut(_Path, [], _Blocked) ->
    [];
nearest_cut(Path, Paths, Blocked) ->
    Shared = fun(Other) -> N = min(length(Path), length(Other)),
                           length(lists:takewhile(fun({A, B}) -> A =:= B end,
                                                  lists:zip(lists:sublist(Path, N), lists:sublist(Other, N))))
             end,
    {_, Nearest} = lists:max([{{Shared(P), -I}, N} || {I, {N, P}} <- lists:enumerate(Paths)]),
    maps:get(Nearest, Blocked, []).

cut([], _Deadline) ->
    fun(_Node) -> ok end;
cut(Others, Deadline) ->
    fun(Node) ->
            Timeout = max(1, Deadline - erlang:monotonic_time(millisecond)),
            terrain_lab_netem:partition([Node], Others, #{timeout => Timeout})
    end.

%% A node that joins connects to the first running node of the cluster; the mesh
%% (and, on a live cluster, the sequencer) follows from there.
join_cluster({ok, _} = Result, Node, [_ | _] = Existing, Deadline) ->
    Timeout = max(1, Deadline - erlang:monotonic_time(millisecond)),
    case lists:any(fun(Other) -> erpc:call(Node, net_kernel, connect_node, [Other], Timeout) end, Existing) of
        true -> Result;
        false -> {error, {text, "could not connect to any node of the cluster"}}
    end;
join_cluster(Result, _Node, _Existing, _Deadline) ->
    Result.

%% The started nodes recorded; or, when one did not come up, all of them stopped and
%% the state and the spec put back as they were.
recorded_add(#{state := #{<<"nodes">> := Records} = State, new := NewNodes} = Change, Results, SpecFile,
             Before, Dir, Io) ->
    Ssh = terrain_lab_ssh:context(Dir, [], undefined),
    Added = [terrain_lab_launch:node_record(NodeSpec, Node, Dir, Result, Ssh)
             || {{NodeSpec, Node}, Result} <- lists:zip(NewNodes, Results)],
    case [{atom_to_list(Node), terrain_lab_launch:format_reason(Why)}
          || {{_, Node}, {error, Why}} <- lists:zip(NewNodes, Results)] of
        [] ->
            case record(State, SpecFile, [terrain_lab_launch:json_record(R) || R <- Added], Dir) of
                ok -> {ok, Added};
                {error, _} = Error -> Error
            end;
        Failed ->
            Stopping = State#{<<"nodes">> := [terrain_lab_launch:json_record(R) || R <- Added]},
            _ = terrain_lab_launch_stop:stop_nodes(Stopping, 5000, Dir, Io),
            ok = remove_pid_files(maps:get(<<"nodes">>, Stopping), Dir),
            {SpecPath, _} = Before,
            _ = restore(Before, State#{<<"nodes">> := Records}, SpecFile, Dir),
            _ = case terrain_lab_spec:read(binary_to_list(SpecPath)) of
                    {ok, BaseSpec} -> set_links(Change, BaseSpec);
                    {error, _} -> ok
                end,
            {error, {launch, {not_added, Failed}}}
    end.

%% The state and the spec file as they were before the add.
restore({SpecPath, Text}, State, SpecFile, Dir) ->
    _ = case Text of
            none -> file:delete(SpecFile);
            _ -> terrain_lab_files:write(SpecFile, Text)
        end,
    terrain_lab_cluster_state:write(Dir, State#{<<"spec">> => SpecPath}).

%% The merged spec, written whole (terrain_lab_files: a temporary file, then a rename).
write_terms(File, Terms) ->
    terrain_lab_files:write(File, unicode:characters_to_binary([io_lib:format("~tp.~n", [T]) || T <- Terms])).

remove_pid_files(Records, Dir) ->
    lists:foreach(fun(#{<<"name">> := Name}) ->
                          _ = file:delete(terrain_lab_cluster_state:pid_file(Dir, binary_to_atom(Name)))
                  end, Records).

%%--------------------------------------------------------------------
%% netem move

spec_path(#{<<"spec">> := SpecPath} = State) when is_binary(SpecPath) -> {ok, State};
spec_path(_State) -> {error, {launch, no_spec_recorded}}.

%% The node (one recorded node: a group, or a full name the cluster does not have, is
%% refused) and the spec with it moved.
moved_spec(#{<<"spec">> := SpecPath, <<"nodes">> := Records} = State, NodeName, Group, Dir) ->
    case {recorded_nodes([NodeName], State, Dir), length(Group) =< ?MAX_NAME} of
        {_, false} ->
            {error, {launch, {group_too_long, Group}}};
        {{ok, [Node]}, true} ->
            [Name] = [binary_to_atom(N) || #{<<"name">> := N, <<"node">> := B} <- Records, B =:= atom_to_binary(Node)],
            case terrain_lab_spec:move(binary_to_list(SpecPath), Name, list_to_atom(Group)) of
                {ok, Spec, Terms} -> {ok, {State, Name, Spec, Terms}};
                {error, _} = Error -> Error
            end;
        {{ok, Nodes}, true} ->
            {error, {cluster_state, {not_one_node, NodeName, Nodes}}};
        {{error, _} = Error, true} ->
            Error
    end.

apply_move({#{<<"nodes">> := Records} = State, Name, Spec, Terms}, Dir) ->
    SpecFile = filename:join(Dir, "spec.cluster"),
    Prefix = binary_to_list(maps:get(<<"prefix">>, State, <<>>)),
    [#{path := Path}] = [NS || #{name := N} = NS <- terrain_lab_spec:nodes(Spec), N =:= Name],
    Bin = atom_to_binary(Name),
    Moved = [case R of
                 #{<<"name">> := Bin} -> R#{<<"group_path">> => [atom_to_binary(P) || P <- Path]};
                 _ -> R
             end || R <- Records],
    terrain_lab_steps:run(
      [fun(_) -> write_terms(SpecFile, Terms) end,
       fun(_) -> terrain_lab_cluster_state:connect_cli(Dir) end,
       fun(_) -> terrain_lab_netem:set_links(Spec, Prefix, reachable_names(State)) end,
       fun(_) ->
               Recorded = State#{<<"spec">> => list_to_binary(filename:absname(SpecFile)), <<"nodes">> => Moved},
               case terrain_lab_cluster_state:write(Dir, Recorded) of
                   ok -> {ok, Path};
                   {error, _} = Error -> Error
               end
       end], ok).

%%--------------------------------------------------------------------
%% down --nodes

%% The recorded nodes that `Names' stand for: names that name no node (`--nodes ',,,''),
%% and a full name the cluster does not have, are errors.
recorded_nodes(Names, #{<<"nodes">> := Records}, Dir) ->
    case [string:trim(N) || N <- Names, string:trim(N) =/= ""] of
        [] ->
            {error, {cluster_state, {no_nodes_given, lists:join(",", Names)}}};
        Given ->
            case terrain_lab_cluster_state:resolve(Given, Dir) of
                {ok, Nodes} ->
                    Recorded = [binary_to_atom(N) || #{<<"node">> := N} <- Records],
                    case [atom_to_list(N) || N <- Nodes, not lists:member(N, Recorded)] of
                        [] -> {ok, Nodes};
                        Unknown -> {error, {cluster_state, {unknown_nodes, Unknown, known_names(Records), Dir}}}
                    end;
                {error, _} = Error ->
                    Error
            end
    end.

known_names(Records) ->
    [N || #{<<"name">> := N} <- Records].

%% Stops the nodes, then keeps in the state and the spec only the nodes still running.
stop_recorded(#{<<"nodes">> := Records} = State, Stop, Timeout, Dir, Io) ->
    {Stopping, Staying} = lists:partition(fun(#{<<"node">> := N}) -> lists:member(N, Stop) end, Records),
    Results = terrain_lab_launch_stop:stop_nodes(State#{<<"nodes">> := Stopping}, Timeout, Dir, Io),
    Left = terrain_lab_launch_stop:still_running(Results),
    {Gone, StillUp} = lists:partition(fun(#{<<"node">> := N}) -> not lists:member(N, Left) end, Stopping),
    ok = remove_pid_files(Gone, Dir),
    case Staying ++ StillUp of
        [] ->
            ok = terrain_lab_launch_stop:remove_cgroups(State),
            terrain_lab_cluster_state:remove(Dir),
            {ok, Results};
        Kept ->
            case without_nodes(State, [binary_to_atom(N) || #{<<"name">> := N} <- Gone], Dir) of
                {ok, SpecPath} ->
                    ok = terrain_lab_cluster_state:write(Dir, State#{<<"nodes">> := Kept, <<"spec">> => SpecPath}),
                    {ok, Results};
                {error, _} = Error ->
                    ok = terrain_lab_cluster_state:write(Dir, State#{<<"nodes">> := Kept}),
                    Error
            end
    end.

%% The cluster's spec without the nodes that left, written to `Dir'/spec.cluster;
%% returns its path as the state records it.
without_nodes(#{<<"spec">> := SpecPath}, Names, Dir) when is_binary(SpecPath) ->
    case file:consult(binary_to_list(SpecPath)) of
        {ok, Terms} ->
            SpecFile = filename:join(Dir, "spec.cluster"),
            case write_terms(SpecFile, remove_nodes(Terms, Names)) of
                ok -> {ok, list_to_binary(filename:absname(SpecFile))};
                {error, _} = Error -> Error
            end;
        {error, _} ->
            {ok, SpecPath}      % a spec that is gone or unreadable stays as recorded
    end;
without_nodes(#{} = State, _Names, _Dir) ->
    {ok, maps:get(<<"spec">>, State, null)}.

%% Spec terms without the nodes `Names'; a group left empty goes too.
remove_nodes(Terms, Names) ->
    lists:filtermap(fun({node, N, _}) -> not lists:member(N, Names);
                       ({group, G, O, Children}) ->
                            case remove_nodes(Children, Names) of
                                [] when Children =/= [] -> false;
                                Kept -> {true, {group, G, O, Kept}}
                            end;
                       (_) -> true
                    end, Terms).
