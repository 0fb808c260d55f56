%% @private
%% @doc The nemesis of a chaos run (`terrain chaos'): carries out the schedule's bursts
%% (terrain_lab_chaos_schedule) on the running cluster at their times, through the
%% lab's own ways of changing a cluster:
%% <ul>
%% <li>`kill': SIGKILL to the VM (terrain_lab_os:kill/1, a BEAM only);</li>
%% <li>`stop' / `cont': SIGSTOP, then SIGCONT;</li>
%% <li>`partition' / `heal': terrain_lab_netem:partition/3 and heal/0 (what `terrain
%%     netem partition|heal' runs); a node that joins during the partition takes the side
%%     of its nearest node in the spec (`up --add' does that);</li>
%% <li>`slow' / `restore': the links of a group get 10 times their latency and as much
%%     jitter (the emulated links carry TCP, which never loses bytes: a lost segment is
%%     a late one), then the spec's links again (terrain_lab_netem:set_links/3);</li>
%% <li>`join': `terrain up --add' of a one-node spec (terrain_lab_launch_change:add/4);</li>
%% <li>`leave': `terrain down --nodes' (terrain_lab_launch_change:stop_some/4);</li>
%% <li>`move': `terrain netem move' (terrain_lab_launch_change:move/3).</li>
%% </ul>
%% Every action becomes a history line (`op', `result' `ok' or the error's sentence,
%% `burst', `planned_ms'), and the changes to the cluster's membership `node' lines
%% (`up', `down', `moved', with the node's group path and whether it matches the
%% groups' predicate): the checker's picture of the spec as it now stands. The roster
%% (an ETS table of the run) follows the nodes: `{Name, Node, OsPid, alive | stopped | dead}'.
-module(terrain_lab_chaos_nemesis).

%% API
-export([run/2,
         node_line/4]).

-type context() :: #{dir := file:filename(),          % the cluster's state directory
                     out := file:filename(),          % the run directory (one-node specs go to specs/)
                     prefix := string(),
                     history := terrain_lab_chaos_history:history(),
                     roster := ets:tid(),
                     group_options := #{[atom()] => map()},   % each group's link options in the spec
                     io := terrain_lab_io:io(),       % where the lab's changes print (quiet)
                     min_quiet_ms := non_neg_integer(),   % the least time between a burst's end and the next
                     progress := fun((iodata()) -> ok)}.
-export_type([context/0]).

-define(NETEM_TIMEOUT, 5000).

%%--------------------------------------------------------------------
%% API

%% @doc Runs the bursts at their times (ms since the history's start).
-spec run([terrain_lab_chaos_schedule:burst()], context()) -> ok.
run(Bursts, Context) ->
    _ = lists:foldl(fun(Burst, State) -> burst(Burst, Context, State) end,
                    #{partition => none, ended => 0}, Bursts),
    ok.

%% @doc The `node' line of a node of the roster (`up', `down' or `moved').
-spec node_line(context(), atom(), up | down | moved, map()) -> ok.
node_line(#{history := H, roster := Roster}, Name, What, Extra) ->
    [{Name, Node, _, _}] = ets:lookup(Roster, Name),
    terrain_lab_chaos_history:log(H, Node, node, What, Extra#{name => Name}).

%%--------------------------------------------------------------------
%% Internal: bursts

%% A burst starts at its planned time, or later when the previous one overran: the
%% quiet period after a burst's end is never shorter than `min_quiet_ms' (the checker's
%% window). The actions keep their times relative to the burst's start.
burst(#{burst := B, at := Planned, actions := Actions}, #{history := H, progress := Progress} = Context,
      #{ended := Ended} = State) ->
    At = max(Planned, Ended + maps:get(min_quiet_ms, Context)),
    wait_until(H, At),
    terrain_lab_chaos_history:log(H, null, burst_start, ok, #{burst => B, load => terrain_lab_os:load_average()}),
    Progress(io_lib:format("burst ~b at ~.1f s: ~ts~n",
                           [B, At / 1000, lists:join(", ", [describe(A) || A <- Actions])])),
    State1 = lists:foldl(fun(#{at := T} = Action, S) ->
                                 wait_until(H, At + T),
                                 act(Action, B, Context, S)
                         end, State, Actions),
    Last = case Actions of [] -> none; _ -> describe(lists:last(Actions)) end,
    terrain_lab_chaos_history:log(H, null, burst_end, ok, #{burst => B, last_op => iolist_to_binary(Last)}),
    State1#{ended := terrain_lab_chaos_history:now_ms(H)}.

wait_until(H, T) ->
    Left = T - terrain_lab_chaos_history:now_ms(H),
    receive after max(0, Left) -> ok end.

describe(#{op := Op} = A) ->
    Target = case A of
                 #{node := N} -> [" ", atom_to_list(N)];
                 #{group := G} -> [" ", lists:join("/", [atom_to_list(X) || X <- G])];
                 _ -> []
             end,
    [atom_to_list(Op), Target, [" (sequencer)" || maps:get(sequencer, A, false)]].

%% One action: done, logged with its result and time.
act(#{op := Op, at := T} = Action, B, #{history := H} = Context, State) ->
    T0 = erlang:monotonic_time(millisecond),
    {Result, State1} = try do(Action, Context, State)
                       catch Class:Why:Stack -> {{error, {crashed, Class, Why, hd(Stack ++ [none])}}, State}
                       end,
    Text = case Result of
               ok -> ok;
               {error, Reason} -> iolist_to_binary(sentence(Reason))
           end,
    Node = case Action of
               #{node := Name} -> node_of(Context, Name);
               _ -> null
           end,
    Extra = maps:without([op, at, node], Action),
    terrain_lab_chaos_history:log(H, Node, Op, Text,
                                  Extra#{burst => B, planned_ms => T,
                                                       took_ms => erlang:monotonic_time(millisecond) - T0}),
    State1.

sentence(Reason) ->
    try terrain_lab:format_error(Reason)
    catch _:_ -> io_lib:format("~0tP", [Reason, 12])
    end.

%%--------------------------------------------------------------------
%% Internal: the actions

do(#{op := kill, node := Name}, Context, State) ->
    Node = node_of(Context, Name),
    erlang:monitor_node(Node, true),
    case signal(Context, Name, "KILL") of
        ok ->
            %% the next action (a join, a heal) must not count the node as reachable
            receive {nodedown, Node} -> ok after ?NETEM_TIMEOUT -> ok end,
            set(Context, Name, dead), node_line(Context, Name, down, #{}), {ok, State};
        Error ->
            erlang:monitor_node(Node, false),
            {Error, State}
    end;
do(#{op := stop, node := Name}, Context, State) ->
    {with_status(signal(Context, Name, "STOP"), Context, Name, stopped), State};
do(#{op := cont, node := Name}, Context, State) ->
    {with_status(signal(Context, Name, "CONT"), Context, Name, alive), State};
do(#{op := partition, a := A, b := B}, Context, State) ->
    {NodesA, NodesB} = {running(Context, A), running(Context, B)},
    case NodesA =/= [] andalso NodesB =/= [] of
        true -> {terrain_lab_netem:partition(NodesA, NodesB, #{timeout => ?NETEM_TIMEOUT}),
                 State#{partition := {A, B}}};
        false -> {ok, State#{partition := {A, B}}}
    end;
do(#{op := heal}, _Context, State) ->
    %% every node this VM is connected to: the running nodes (a dead node's name is in
    %% the others' tables, so heal/2 of the running nodes would ask it too)
    {terrain_lab_netem:heal(), State#{partition := none}};
do(#{op := slow, group := Group, factor := Factor}, Context, State) ->
    {links(Context, fun(Terms) -> slowed(Terms, Group, Factor) end), State};
do(#{op := restore}, Context, State) ->
    {links(Context, fun(Terms) -> Terms end), State};
do(#{op := join} = Action, Context, State) ->
    {join(Action, Context, State), State};
do(#{op := leave, node := Name}, #{dir := Dir, io := Io} = Context, State) ->
    case terrain_lab_launch_change:stop_some(Dir, [atom_to_list(Name)], 5000, Io) of
        {ok, _} -> set(Context, Name, dead), node_line(Context, Name, down, #{}), {ok, State};
        {error, _} = Error -> {Error, State}
    end;
do(#{op := move, node := Name, path := Path}, #{dir := Dir} = Context, State) ->
    case terrain_lab_launch_change:move(Dir, atom_to_list(Name), atom_to_list(lists:last(Path))) of
        {ok, NewPath} -> node_line(Context, Name, moved, #{path => NewPath}), {ok, State};
        {error, _} = Error -> {Error, State}
    end.

signal(#{roster := Roster}, Name, Signal) ->
    case ets:lookup(Roster, Name) of
        [{_, _, OsPid, Status}] when Status =/= dead ->
            Sent = case Signal of
                       "KILL" -> terrain_lab_os:kill(OsPid);
                       _ -> terrain_lab_os:signal(OsPid, Signal)
                   end,
            case Sent of
                true -> ok;
                false -> {error, {chaos, {signal, Name, Signal, OsPid}}}
            end;
        _ ->
            {error, {chaos, {not_running, Name}}}
    end.

with_status(ok, Context, Name, Status) -> set(Context, Name, Status), ok;
with_status(Error, _Context, _Name, _Status) -> Error.

set(#{roster := Roster}, Name, Status) ->
    true = ets:update_element(Roster, Name, {4, Status}).

node_of(#{roster := Roster}, Name) ->
    case ets:lookup(Roster, Name) of
        [{_, Node, _, _}] -> Node;
        [] -> null
    end.

%% The nodes of the names (or of every name) that are neither dead nor stopped.
running(#{roster := Roster}, all) ->
    [N || {_, N, _, alive} <- ets:tab2list(Roster)];
running(#{roster := Roster}, Names) ->
    [N || Name <- Names, {_, N, _, alive} <- ets:lookup(Roster, Name)].

%%--------------------------------------------------------------------
%% Internal: links

%% Every running node gets the links of the state's spec as `Change' makes it.
links(#{dir := Dir, prefix := Prefix, roster := Roster}, Change) ->
    terrain_lab_steps:run([fun(_) -> terrain_lab_cluster_state:read(Dir) end,
                           fun(#{<<"spec">> := SpecFile}) -> terrain_lab_spec:consult(binary_to_list(SpecFile)) end,
                           fun(Terms) -> terrain_lab_spec:from_terms(Change(Terms), undefined) end,
                           fun(Spec) ->
                                   Nodes = maps:from_list([{Name, N} || {Name, N, _, alive} <- ets:tab2list(Roster)]),
                                   terrain_lab_netem:set_links(Spec, Prefix, Nodes)
                           end], none).

%% The spec's terms with the group at `Path' slowed: latency × Factor, and as much jitter.
slowed(Terms, Path, Factor) ->
    [slowed_term(T, Path, Factor) || T <- Terms].

slowed_term({group, Name, Options, Children}, [Name], Factor) ->
    Latency = maps:get(latency, Options, 100) * Factor,
    {group, Name, Options#{latency => Latency, jitter => Latency}, Children};
slowed_term({group, Name, Options, Children}, [Name | Rest], Factor) ->
    {group, Name, Options, slowed(Children, Rest, Factor)};
slowed_term(Term, _Path, _Factor) ->
    Term.

%%--------------------------------------------------------------------
%% Internal: a join

%% `up --add' of a one-node spec into the group at `Path' (each group with its link
%% options in the spec, so that a group the cluster no longer has comes back as it
%% was). During a partition `up --add' puts the new node on the side of its nearest
%% node in the spec (terrain_lab_launch_change).
join(#{node := Name, path := Path, worker := Worker}, Context, _State) ->
    #{dir := Dir, out := Out, io := Io, roster := Roster, group_options := Options} = Context,
    File = filename:join([Out, "specs", atom_to_list(Name) ++ ".cluster"]),
    Node = {node, Name, #{schedulers => 1, attrs => [{chaos_worker, Worker}]}},
    Term = lists:foldr(fun(I, Inner) ->
                               Sub = lists:sublist(Path, I),
                               {group, lists:last(Sub), maps:get(Sub, Options, #{}), [Inner]}
                       end, Node, lists:seq(1, length(Path))),
    Steps = [fun(_) -> terrain_lab_files:ensure_dir(File) end,
             fun(_) -> terrain_lab_files:write(File, io_lib:format("~tp.~n", [Term])) end,
             fun(_) -> terrain_lab_launch_change:add(File, #{}, Dir, Io) end,
             fun([#{node := New, os_pid := OsPid}]) ->
                     true = ets:insert(Roster, {Name, New, binary_to_list(OsPid), alive}),
                     node_line(Context, Name, up, #{path => Path, worker => Worker})
             end],
    terrain_lab_steps:run(Steps, none).
