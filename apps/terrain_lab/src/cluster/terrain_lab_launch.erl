%% @private
%% @doc Clusters that outlive the CLI: starts every node of a spec as a detached VM,
%% checks and stops them again (the work behind `terrain up', `status' and `down').
%%
%% {@link up/4} starts the VMs and records them in the state directory (its layout and
%% format: `terrain_lab_cluster_state'). The cookie never appears on a command line: a
%% node starts undistributed, writes its OS pid file, reads the cookie file, and only
%% then starts distribution. {@link stop/2} stops exactly the recorded nodes, by node
%% name, falling back to the recorded OS pid (checked to still be that node's VM before
%% it is killed).
%%
%% With network emulation on (`netem' `"auto"', the default, turns it on when the spec
%% has link options), every node starts with `terrain_lab_netem:vm_args/3', so that
%% its connections to the other nodes cross the spec's links from boot on.
%%
%% Before anything is started, `up' refuses (in well under a second): a node name
%% longer than an atom can be; a node name that epmd already has registered (a VM of
%% another cluster, another state directory or anything else), naming the clashes and
%% suggesting `--prefix'; and a spec whose VMs would not fit in memory: each VM is
%% estimated by terrain_lab_guard:vm_memory_mb/2 (measured: 23 MB plus 55 kB per
%% connection of the full mesh, docs/CLI.md), and `up' refuses when the nodes would take more
%% than 80% of `MemAvailable' in /proc/meminfo, unless `force' (the resource guard, terrain_lab_guard). Its default
%% deadline grows with the node count ({@link default_timeout/1}); it prints "k of N
%% nodes up" with an ETA on the `Io''s `err' device as the nodes come up.
%%
%% With TLS (option `tls' or the spec's `tls => true'), the cluster's CA and every
%% node's certificate are made in the state directory before this VM goes distributed
%% (terrain_lab_tls), and each VM starts with `-proto_dist inet_tls' and its own option
%% file; this VM must run TLS distribution already (the escript relaunches itself so,
%% terrain_lab_cli_tls).
%%
%% Each VM writes its OS pid and its full node name to its pid file; so `stop/3'
%% halts by the full name even when `cluster.json' is missing or corrupt, and it kills
%% only an OS pid whose command line still names that node's pid file (the VM it
%% started, not whatever process got the pid later).
-module(terrain_lab_launch).

%% API
-export([up/4,
         add/4,
         status/2,
         stop/3,
         stop_some/4,
         move/3,
         still_running/1,
         format_error/1]).


-export_type([up_options/0, node_record/0, stop_result/0]).

-type up_options() :: #{prefix := string(),         % prepended to every node name
                        timeout := pos_integer() | undefined, % ms for all nodes to come up (default_timeout/1)
                        netem := string(),          % "auto" | "on" | "off"
                        force => boolean(),         % start even when the memory estimate says no
                        tls => boolean(),           % distribution over TLS (also the spec's `tls'; terrain_lab_tls)
                        %% nodes on other hosts (terrain_lab_ssh, docs/HOSTS.md):
                        ssh_options => terrain_lab_ssh:ssh_options(),
                        code_path => file:filename() | undefined,
                        launcher => ssh | srun,     % terrain up --slurm: srun job steps (terrain_lab_slurm)
                        live => false | true | map()}. % the terrain app env key live on every node

%% A started node as recorded in cluster.json.
-type node_record() :: #{name := atom(), node := node(), group_path := [atom()],
                         os_pid := binary() | null, schedulers := pos_integer() | null,
                         cpu_quota := float() | null,
                         cpu_quota_per_scheduler := float() | null}.

%% What became of each recorded node: "stopped", "was not running", "killed (OS pid
%% P)" or "still running (...)".
-type stop_result() :: {NodeName :: binary(), How :: string()}.


%%--------------------------------------------------------------------
%% API

%% @doc Starts the nodes of the spec in `SpecFile' as detached VMs, records them in
%% `Dir' and returns their records; progress goes to `Io''s `err' device. Refused
%% while a cluster recorded in `Dir' is still running. When a node does not come up
%% before the deadline, every node is stopped again and the state removed.
-spec up(file:filename(), up_options(), file:filename(), terrain_lab_io:io()) ->
          {ok, [node_record()]} | {error, term()}.
up(SpecFile, #{netem := NetemOption} = Options, Dir, Io) ->
    Steps = [fun terrain_lab_spec:read/1,
             fun(Spec) -> case terrain_lab_cgroup:check(Spec) of ok -> {ok, Spec}; Error -> Error end end,
             fun terrain_lab_hosts:check_placement/1,   % nodes on other hosts: docs/HOSTS.md
             fun(Spec) ->
                     case terrain_lab_hosts:netem_option(Spec, NetemOption) of   % off on other hosts
                         {ok, Netem} -> with_netem(Spec, Netem);
                         {error, _} = Error -> Error
                     end
             end,
             fun({Spec, Netem} = SpecNetem) -> _ = Netem andalso warn_netem_scale(Spec, Io), {ok, SpecNetem} end,
             fun(SpecNetem) -> check_names(SpecNetem, Options) end,
             fun(SpecNetem) -> check_memory(SpecNetem, Options) end,
             fun(SpecNetem) -> locked(Dir, fun() -> refuse_if_running(Dir, SpecNetem) end) end,
             fun(SpecNetem) -> refuse_clashes(SpecNetem, Options) end,
             fun(SpecNetem) -> check_tls(SpecNetem, Options) end,
             fun({Spec, Netem}) ->
                     %% a step that fails before any VM starts leaves no state behind
                     try start_detached(Spec, Netem, filename:absname(SpecFile), Dir, Options, Io)
                     catch throw:{not_started, Error} -> terrain_lab_cluster_state:remove(Dir), Error
                     end
             end],
    %% the lock is taken by the step that looks for a running cluster and held to the end
    try terrain_lab_steps:run(Steps, SpecFile)
    after unlock(Dir)
    end.

%% Runs Fun holding the state directory's lock (kept until up ends: unlock/1).
locked(Dir, Fun) ->
    case terrain_lab_cluster_state:lock(Dir) of
        ok ->
            ok = terrain_lab_cleanup:add({up_lock, Dir}, fun() -> terrain_lab_cluster_state:unlock(Dir) end),
            put({?MODULE, locked}, Dir),
            Fun();
        {error, _} = Error ->
            Error
    end.

unlock(Dir) ->
    case erase({?MODULE, locked}) of
        Dir -> terrain_lab_cluster_state:unlock(Dir), terrain_lab_cleanup:remove({up_lock, Dir});
        _ -> ok
    end.

%% @doc `terrain up --add SPEC': starts the nodes of `AddFile' into the cluster recorded
%% in `Dir' (terrain_lab_spec:merge/2: its groups may name the cluster's). The merged
%% spec is written to `Dir'/spec.cluster and recorded; with network emulation the
%% running nodes get the merged link tables before the new nodes start, so every
%% connection to a new node crosses its links. On a live cluster the new nodes start
%% without a topology: the sequencer places them (terrain_live); otherwise they get
%% the merged spec's tree. Returns the new nodes' records.
-spec add(file:filename(), #{timeout => pos_integer() | undefined}, file:filename(), terrain_lab_io:io()) ->
          {ok, [node_record()]} | {error, term()}.
add(AddFile, Options, Dir, Io) ->
    terrain_lab_steps:run(
      [fun(_) -> terrain_lab_cluster_state:read(Dir) end,
       fun(#{<<"spec">> := SpecPath} = State) when is_binary(SpecPath) ->
               case terrain_lab_spec:merge(binary_to_list(SpecPath), AddFile) of
                   {ok, Spec, Terms} -> {ok, {State, Spec, Terms}};
                   {error, _} = Error -> Error
               end;
          (_) -> {error, {launch, no_spec_recorded}}
       end,
       fun({State, Spec, Terms}) ->
               %% the resource guard, as for up: the VMs the merged spec adds
               Added = length(terrain_lab_spec:nodes(Spec)) - length(maps:get(<<"nodes">>, State, [])),
               case terrain_lab_guard:vms(max(Added, 0), #{}) of
                   ok -> {ok, {State, Spec, Terms}};
                   {error, _} = Error -> Error
               end
       end,
       fun({State, Spec, Terms}) ->
               case terrain_lab_cluster_state:connect_cli(Dir) of
                   ok -> add_nodes(State, Spec, Terms, Options, Dir, Io);
                   {error, _} = Error -> Error
               end
       end], AddFile).

add_nodes(#{<<"nodes">> := Records} = State, Spec, Terms, Options, Dir, Io) ->
    Prefix = binary_to_list(maps:get(<<"prefix">>, State, <<>>)),
    Known = [binary_to_atom(N) || #{<<"name">> := N} <- Records],
    New = [NS || #{name := Name} = NS <- terrain_lab_spec:nodes(Spec), not lists:member(Name, Known)],
    Netem = maps:get(<<"netem">>, State, false) =:= true,
    Live = live_option(maps:get(<<"live">>, State, false)),
    Names = maps:from_list([{binary_to_atom(N), binary_to_atom(Node)} || #{<<"name">> := N, <<"node">> := Node} <- Records]),
    NewNodes = [{NS, terrain_lab_dist:node_name(Prefix, Name)} || #{name := Name} = NS <- New],
    AllNames = maps:merge(Names, maps:from_list([{Name, Node} || {#{name := Name}, Node} <- NewNodes])),
    Timeout = case maps:get(timeout, Options, undefined) of
                  undefined -> default_timeout(length(New));
                  T -> T
              end,
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    SpecFile = filename:join(Dir, "spec.cluster"),
    case {New, write_terms(SpecFile, Terms), Netem andalso terrain_lab_netem:set_links(Spec, Prefix, Names)} of
        {[], _, _} ->
            {error, {launch, nothing_to_add}};
        {_, {error, _} = Error, _} ->
            Error;
        {_, ok, {error, _} = Error} ->
            Error;
        {_, ok, _} ->
            terrain_lab_io:progress(Io, "adding ~b node~s to cluster ~ts~n",
                                    [length(New), [$s || length(New) > 1], maps:get(name, Spec)]),
            NetemOption = case Netem of
                              true -> #{netem => {Spec, Prefix}};
                              false -> #{}
                          end,
            Started = [terrain_lab_vm:start(maps:merge(vm_options(NodeSpec, Node, Dir), NetemOption))
                       || {NodeSpec, Node} <- NewNodes],
            Topology = terrain_lab_spec:topology(Spec, fun(N) -> maps:get(N, AllNames) end),
            Self = self(),
            Ssh = terrain_lab_ssh:context(Dir, [], undefined),
            Workers = [spawn_monitor(fun() ->
                                             Extra = case Live of
                                                         false -> #{topology => Topology};
                                                         _ -> #{live => Live}
                                                     end,
                                             Result = bring_up(Start, maps:merge(NodeSpec#{cluster => maps:get(name, Spec)}, Extra),
                                                               Node, Deadline),
                                             Self ! {self(), join_cluster(Result, Node, maps:values(Names), Deadline)}
                                     end) || {{NodeSpec, Node}, Start} <- lists:zip(NewNodes, Started)],
            Results = collect(Workers, "up", Io),
            Added = [node_record(NodeSpec, Node, Dir, Result, Ssh) || {{NodeSpec, Node}, Result} <- lists:zip(NewNodes, Results)],
            ok = terrain_lab_cluster_state:write(Dir, State#{<<"spec">> => list_to_binary(filename:absname(SpecFile)),
                                                             <<"nodes">> => Records ++ Added}),
            case [{atom_to_list(Node), format_reason(Why)} || {{_, Node}, {error, Why}} <- lists:zip(NewNodes, Results)] of
                [] -> {ok, Added};
                Failed -> {error, {launch, {not_started, Failed}}}
            end
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

%% The live option as recorded in cluster.json (JSON: true, false or an object).
live_option(true) -> true;
live_option(Map) when is_map(Map) -> maps:from_list([{binary_to_atom(K), V} || {K, V} <- maps:to_list(Map)]);
live_option(_) -> false.

live(false, NodeSpec) -> NodeSpec;
live(Live, NodeSpec) -> NodeSpec#{live => Live}.

%% The merged spec, written whole (terrain_lab_files: a temporary file, then a rename).
write_terms(File, Terms) ->
    terrain_lab_files:write(File, unicode:characters_to_binary([io_lib:format("~tp.~n", [T]) || T <- Terms])).

%% @doc `terrain netem move NODE GROUP': moves a node of the emulated cluster in `Dir'
%% into another group of its spec: every node gets the links of the new spec (the
%% connections stay up, their delays change at once), the merged spec is written to
%% `Dir'/spec.cluster and the node's recorded group path changes. The node itself
%% does not restart; a live topology finds the move by re-measurement.
-spec move(file:filename(), string(), string()) -> {ok, [atom()]} | {error, term()}.
move(Dir, NodeName, Group) ->
    terrain_lab_steps:run(
      [fun(_) -> terrain_lab_cluster_state:read(Dir) end,
       fun(#{<<"spec">> := SpecPath, <<"nodes">> := Records} = State) when is_binary(SpecPath) ->
               case terrain_lab_cluster_state:resolve([NodeName], Dir) of
                   {ok, [Node]} ->
                       [Name] = [binary_to_atom(N) || #{<<"name">> := N, <<"node">> := B} <- Records,
                                                      B =:= atom_to_binary(Node)],
                       case terrain_lab_spec:move(binary_to_list(SpecPath), Name, list_to_atom(Group)) of
                           {ok, Spec, Terms} -> {ok, {State, Name, Spec, Terms}};
                           {error, _} = Error -> Error
                       end;
                   {error, _} = Error -> Error
               end;
          (_) -> {error, {launch, no_spec_recorded}}
       end,
       fun({#{<<"nodes">> := Records} = State, Name, Spec, Terms}) ->
               SpecFile = filename:join(Dir, "spec.cluster"),
               Prefix = binary_to_list(maps:get(<<"prefix">>, State, <<>>)),
               Names = maps:from_list([{binary_to_atom(N), binary_to_atom(Node)}
                                       || #{<<"name">> := N, <<"node">> := Node} <- Records]),
               [#{path := Path}] = [NS || #{name := N} = NS <- terrain_lab_spec:nodes(Spec), N =:= Name],
               terrain_lab_steps:run(
                 [fun(_) -> write_terms(SpecFile, Terms) end,
                  fun(_) -> terrain_lab_cluster_state:connect_cli(Dir) end,
                  fun(_) -> terrain_lab_netem:set_links(Spec, Prefix, Names) end,
                  fun(_) ->
                          Bin = atom_to_binary(Name),
                          Moved = [case R of
                                       #{<<"name">> := Bin} ->
                                           R#{<<"group_path">> => [atom_to_binary(P) || P <- Path]};
                                       _ -> R
                                   end || R <- Records],
                          case terrain_lab_cluster_state:write(Dir, State#{<<"spec">> => list_to_binary(filename:absname(SpecFile)),
                                                                           <<"nodes">> => Moved}) of
                              ok -> {ok, Path};
                              {error, _} = Error -> Error
                          end
                  end], ok)
       end], Dir).

%% @doc `terrain down --nodes NAME,...': stops those nodes of the cluster in `Dir' and
%% removes them from its state; the others keep running.
-spec stop_some(file:filename(), [string()], pos_integer(), terrain_lab_io:io()) ->
          {ok, [stop_result()]} | {error, term()}.
stop_some(Dir, Names, Timeout, Io) ->
    terrain_lab_steps:run(
      [fun(_) -> terrain_lab_cluster_state:read(Dir) end,
       fun(State) ->
               case terrain_lab_cluster_state:resolve(Names, Dir) of
                   {ok, Nodes} -> {ok, {State, [atom_to_binary(N) || N <- Nodes]}};
                   {error, _} = Error -> Error
               end
       end,
       fun({#{<<"nodes">> := Records} = State, Stop}) ->
               case terrain_lab_cluster_state:connect_cli(Dir) of
                   ok ->
                       {Stopping, Staying} = lists:partition(fun(#{<<"node">> := N}) -> lists:member(N, Stop) end, Records),
                       Results = stop_nodes(State#{<<"nodes">> := Stopping}, Timeout, Dir, Io),
                       Left = still_running(Results),
                       Kept = Staying ++ [R || #{<<"node">> := N} = R <- Stopping, lists:member(N, Left)],
                       ok = terrain_lab_cluster_state:write(Dir, State#{<<"nodes">> := Kept}),
                       {ok, Results};
                   {error, _} = Error ->
                       Error
               end
       end], Dir).

%% @doc The default deadline for `N' nodes to come up: 30 s plus 1 s per node, at
%% least 60 s (nodes start in parallel, but on a small machine they share its cores).
-spec default_timeout(non_neg_integer()) -> pos_integer().
default_timeout(N) ->
    max(60000, 30000 + 1000 * N).


%% @doc The recorded state of the cluster in `Dir' with every node checked at once
%% under one deadline: each entry of `<<"nodes">>' gets `<<"state">>' `up' (it
%% answered), `unreachable' (its OS process is alive) or `down'.
-spec status(file:filename(), pos_integer()) -> {ok, map()} | {error, term()}.
status(Dir, Timeout) ->
    case terrain_lab_cluster_state:read(Dir) of
        {ok, State} ->
            case terrain_lab_cluster_state:connect_cli(Dir) of
                ok ->
                    Checked = check_nodes(State, Timeout, Dir),
                    {ok, State#{<<"nodes">> := case maps:get(<<"live">>, State, false) of
                                                   false -> Checked;
                                                   _ -> live_places(Checked, Timeout)
                                               end}};
                {error, _} = ConnectError ->
                    ConnectError
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Stops every node recorded in `Dir' (or, without a readable `cluster.json',
%% named by a pid file, which `io''s `err' device then says) and says what became of
%% each; removes the state unless a node is still running, or with `force' anyway.
%% `Timeout' is the time a node gets to halt before it is killed.
-spec stop(file:filename(), pos_integer(), #{io := terrain_lab_io:io(), force := boolean()}) ->
          {ok, [stop_result()]} | {error, term()}.
stop(Dir, Timeout, #{io := Io, force := Force}) ->
    case read_state_or_pid_files(Dir, Io) of
        {error, {cluster_state, {Bad, _, _}}} when Force, Bad =:= corrupt_state orelse Bad =:= bad_state
                                                    orelse Bad =:= unknown_format ->
            terrain_lab_io:progress(Io, "no node is named by a pid file; removing the unreadable state in ~ts~n", [Dir]),
            terrain_lab_cluster_state:remove(Dir),
            {ok, []};
        {ok, State} ->
            case terrain_lab_cluster_state:connect_cli(Dir) of
                ok ->
                    Results = stop_nodes(State, Timeout, Dir, Io),
                    ok = remove_cgroups(State),
                    _ = (Force orelse still_running(Results) =:= []) andalso terrain_lab_cluster_state:remove(Dir),
                    {ok, Results};
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc The nodes that {@link stop/2} could not stop.
-spec still_running([stop_result()]) -> [binary()].
still_running(Results) ->
    [N || {N, "still running" ++ _} <- Results].

%% @doc A sentence for the errors of this module (and of the state it reads).
-spec format_error(term()) -> iolist().
format_error({launch, {already_running, Dir, Nodes}}) ->
    io_lib:format("a cluster recorded in ~ts is still running (~ts); stop it with 'terrain down' first",
                  [Dir, lists:join(", ", Nodes)]);
format_error({launch, {not_started, Failed}}) ->
    io_lib:format("the cluster did not come up and was stopped again: ~ts",
                  [lists:join("; ", [io_lib:format("~ts: ~ts", [N, W]) || {N, W} <- Failed])]);
format_error({launch, {still_running, Nodes}}) ->
    io_lib:format("could not stop ~ts; the state is kept", [lists:join(", ", Nodes)]);
format_error({launch, {name_clash, Clashes}}) ->
    {Plural, Verb} = case Clashes of [_] -> {"", "is"}; _ -> {"s", "are"} end,
    io_lib:format("node name~s ~ts ~s already registered with epmd (a running VM: another cluster or "
                  "--state-dir); nothing was started; choose other names with --prefix, e.g. --prefix ~s_",
                  [Plural, lists:join(", ", Clashes), Verb, os:getenv("USER", "my")]);
format_error({launch, no_spec_recorded}) ->
    "the running cluster's state records no spec file to add nodes to";
format_error({launch, nothing_to_add}) ->
    "the spec to add names no node that the cluster does not have already";
format_error({launch, {bad_prefix, Prefix, Char}}) ->
    io_lib:format("--prefix '~ts' cannot start a node name: '~tc' is not an ASCII letter, digit, '_' or '-'; "
                  "nothing was started", [Prefix, Char]);
format_error({launch, {bad_netem, Value}}) ->
    io_lib:format("--netem expects auto, on or off, got '~ts'", [Value]).

%%--------------------------------------------------------------------
%% up

with_netem(Spec, "auto") -> {ok, {Spec, terrain_lab_netem:enabled(Spec)}};
with_netem(Spec, "on") -> {ok, {Spec, true}};
with_netem(Spec, "off") -> {ok, {Spec, false}};
with_netem(_Spec, Other) -> {error, {launch, {bad_netem, Other}}}.

%% The prefix must make node names epmd and other hosts accept (ASCII letters, digits,
%% `_' and `-'); every full node name must fit in an atom.
check_names(SpecNetem, #{prefix := Prefix}) ->
    case [C || C <- Prefix, not name_char(C)] of
        [] -> check_name_lengths(SpecNetem, Prefix);
        [Bad | _] -> {error, {launch, {bad_prefix, Prefix, Bad}}}
    end.

name_char(C) ->
    (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z) orelse (C >= $0 andalso C =< $9)
        orelse C =:= $_ orelse C =:= $-.

check_name_lengths({Spec, _Netem} = SpecNetem, Prefix) ->
    Host = terrain_lab_dist_host(),
    Steps = [fun(_) -> terrain_lab_cluster_state:check_node_name(Prefix ++ atom_to_list(Name) ++ "@" ++ Host) end
             || Name <- terrain_lab_spec:node_names(Spec)],
    case terrain_lab_steps:run(Steps, none) of
        {error, _} = Error -> Error;
        _ -> {ok, SpecNetem}
    end.

%% The host part of node names; this VM need not be distributed yet.
terrain_lab_dist_host() ->
    case is_alive() of
        true -> terrain_lab_dist:host();
        false -> lists:takewhile(fun(C) -> C =/= $. end, net_adm:localhost())
    end.

%% Refuses a spec whose VMs would not fit in memory (unless forced): the resource guard.
check_memory({Spec, _} = SpecNetem, Options) ->
    case terrain_lab_guard:vms(length(terrain_lab_spec:nodes(Spec)),
                               #{force => maps:get(force, Options, false),
                                 full_mesh => terrain_lab_spec:connect_all(Spec)}) of
        ok -> {ok, SpecNetem};
        {error, _} = Error -> Error
    end.

%% Refuses node names that epmd already has: a VM of another cluster (or state
%% directory) runs under that name, and ours could not register.
refuse_clashes({Spec, _} = SpecNetem, #{prefix := Prefix}) ->
    Ours = [Prefix ++ atom_to_list(Name) || Name <- terrain_lab_spec:node_names(Spec)],
    Registered = case net_adm:names() of
                     {ok, Names} -> [N || {N, _Port} <- Names];
                     {error, _} -> []           % no epmd: nothing registered
                 end,
    case [N || N <- Ours, lists:member(N, Registered)] of
        [] -> {ok, SpecNetem};
        Clashes -> {error, {launch, {name_clash, Clashes}}}
    end.

refuse_if_running(Dir, Spec) ->
    case read_state_or_pid_files(Dir, undefined) of
        {ok, State} ->
            case [binary_to_list(N) || #{<<"node">> := N} = Node <- maps:get(<<"nodes">>, State),
                                       vm_running(Node, Dir)] of
                [] -> terrain_lab_cluster_state:remove(Dir), {ok, Spec};
                Running -> {error, {launch, {already_running, Dir, Running}}}
            end;
        {error, {cluster_state, {no_cluster, _}}} ->
            {ok, Spec};
        {error, _} = Error ->
            Error
    end.

start_detached(Spec, Netem, SpecPath, Dir, #{prefix := Prefix} = Options, Io) ->
    Timeout = case maps:get(timeout, Options, undefined) of
                  undefined -> default_timeout(length(terrain_lab_spec:nodes(Spec)));
                  T -> T
              end,
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    %% a state directory that refuses a write (read-only, full) fails here, before any
    %% VM starts, and leaves nothing
    CookieFile = case terrain_lab_steps:run([fun(_) -> terrain_lab_files:make_dir(filename:join(Dir, "nodes")) end,
                                             fun(_) -> terrain_lab_cluster_state:create_cookie(Dir) end], none) of
                     {ok, Cookie} -> Cookie;
                     {error, _} = NoState -> throw({not_started, NoState})
                 end,
    %% Nodes on other hosts: long names, started over ssh (terrain_lab_ssh).
    Remote = terrain_lab_hosts:remote(Spec),
    SshOptions = maps:get(ssh_options, Options, []),
    Tls = maps:get(tls, Options, false) orelse terrain_lab_spec:tls(Spec),
    Ssh = (terrain_lab_ssh:context(Dir, SshOptions, maps:get(code_path, Options, undefined)))#{launcher => maps:get(launcher, Options, ssh),
                                                                                              tls => Tls},
    case Remote andalso terrain_lab_hosts:prepare_cli(Spec, Dir) of
        {error, _} = NoCliHost -> throw({not_started, NoCliHost});   % a full state directory
        _ -> ok
    end,
    Nodes = [{NodeSpec, case Remote of
                            true -> terrain_lab_ssh:node_name(Prefix, Name, maps:get(host, NodeSpec));
                            false -> terrain_lab_dist:node_name(Prefix, Name)
                        end} || #{name := Name} = NodeSpec <- terrain_lab_spec:nodes(Spec)],
    %% TLS: the certificates exist before this VM goes distributed (it reads cli.conf then).
    _ = Tls andalso make_certificates(Nodes, Dir, Io),
    case terrain_lab_cluster_state:connect_cli(Dir) of
        ok -> ok;
        {error, _} = NoDistribution -> throw({not_started, NoDistribution})   % e.g. epmd not answering
    end,
    terrain_lab_io:progress(Io, "starting ~b nodes of ~ts (deadline ~b s)~n", [length(Nodes), SpecPath, Timeout div 1000]),
    _ = Netem andalso terrain_lab_io:progress(Io, "network emulation on: ~ts~n", [netem_summary(Spec)]),
    VmOptions = [case Remote of
                     true ->
                         remote_vm_options(NodeSpec, Node, Ssh#{deadline => Deadline});
                     false ->
                         maps:merge(vm_options(NodeSpec, Node, Dir),
                                    maps:merge(case Netem of
                                                   true -> #{netem => {Spec, Prefix}};
                                                   false -> #{}
                                               end,
                                               case Tls of
                                                   true -> #{tls_optfile => terrain_lab_tls:optfile(Dir, Name)};
                                                   false -> #{}
                                               end))
                 end || {#{name := Name} = NodeSpec, Node} <- Nodes],
    %% local VMs are started first, a few at a time; a VM on another host by its own
    %% worker, in parallel
    Started = case Remote of
                  true -> [remote || _ <- Nodes];
                  false -> spawn_vms([fun() -> terrain_lab_vm:start(O) end || O <- VmOptions], Io)
              end,
    Self = self(),
    Topology = terrain_lab_spec:topology(Spec, fun(Name) -> proplists:get_value(Name, [{N, Node} || {#{name := N}, Node} <- Nodes]) end),
    Live = maps:get(live, Options, false),
    Workers = [spawn_monitor(fun() ->
                                     Start = case Start0 of
                                                 remote -> terrain_lab_vm:start(O);
                                                 _ -> Start0
                                             end,
                                     Self ! {self(), bring_up(Start, live(Live, NodeSpec#{topology => Topology,
                                                                                         cluster => maps:get(name, Spec)}),
                                                              Node, Deadline)}
                             end)
               || {{NodeSpec, Node}, O, Start0} <- lists:zip3(Nodes, VmOptions, Started)],
    Results = collect(Workers, "up", Io),
    Records = [node_record(NodeSpec, Node, Dir, Result, Ssh) || {{NodeSpec, Node}, Result} <- lists:zip(Nodes, Results)],
    Written = terrain_lab_cluster_state:write(Dir, #{cluster => maps:get(name, Spec),
                                                spec => list_to_binary(SpecPath),
                                                cookie_file => list_to_binary(CookieFile),
                                                started_at => terrain_lab_run:timestamp(),
                                                netem => Netem,
                                                tls => Tls,
                                                prefix => list_to_binary(Prefix),
                                                live => Live,
                                                levels => terrain_lab_netem:level_records(Spec),
                                                nodes => Records}),
    case {[{atom_to_list(Node), format_reason(Why)} || {{_, Node}, {error, Why}} <- lists:zip(Nodes, Results)],
          Written} of
        {[], ok} ->
            terrain_lab_io:progress(Io, "cluster ~ts is up; state in ~ts~n", [maps:get(name, Spec), Dir]),
            {ok, Records};
        {Failed, _} ->
            %% nodes that did not come up, or a state that could not be recorded (a full
            %% disk): every node is stopped again, by the records in hand
            Recorded = case terrain_lab_cluster_state:read(Dir) of
                           {ok, Read} -> Read;                      % as every later command reads it
                           {error, _} -> #{<<"nodes">> => [json_record(R) || R <- Records]}   % not written
                       end,
            _ = stop_nodes(Recorded, 5000, Dir, Io),
            ok = remove_cgroups(Recorded),
            terrain_lab_cluster_state:remove(Dir),
            case {Failed, Written} of
                {[], {error, _} = WriteError} -> WriteError;
                _ -> {error, {launch, {not_started, Failed}}}
            end
    end.

%% A node record as cluster.json holds it (binary keys, atoms as text), for stop_nodes/4.
json_record(Record) when is_map(Record) ->
    maps:from_list([{json_key(K), json_record(V)} || {K, V} <- maps:to_list(Record)]);
json_record([_ | _] = List) ->
    case io_lib:printable_unicode_list(List) of
        true -> unicode:characters_to_binary(List);     % a string, as JSON holds it
        false -> [json_record(V) || V <- List]
    end;
json_record(Atom) when is_atom(Atom), Atom =/= null, not is_boolean(Atom) ->
    atom_to_binary(Atom);
json_record(Value) ->
    Value.

json_key(K) when is_atom(K) -> atom_to_binary(K);
json_key(K) -> K.

%% A TLS cluster needs this VM to run TLS distribution (the escript re-executes itself
%% for that, terrain_lab_cli_tls); it must not be distributed yet, or it cannot read the
%% new cli.conf.
check_tls({Spec, _} = SpecNetem, Options) ->
    case (maps:get(tls, Options, false) orelse terrain_lab_spec:tls(Spec))
        andalso (not terrain_lab_tls:running_tls() orelse is_alive()) of
        true -> {error, {tls, not_tls_cli}};
        false -> {ok, SpecNetem}
    end.

%% The cluster's CA, a certificate for every node and one for the CLI (terrain_lab_tls);
%% each certificate names the host part of its node's name. When they cannot be made
%% (no VM has started yet), `up' returns the error and removes the state.
make_certificates(Nodes, Dir, Io) ->
    CliHost = case file:read_file(filename:join(Dir, "cli_host")) of
                  {ok, Address} -> binary_to_list(Address);
                  {error, _} -> terrain_lab_dist_host()
              end,
    Certified = [{Name, lists:last(string:split(atom_to_list(Node), "@"))} || {#{name := Name}, Node} <- Nodes],
    case terrain_lab_tls:create(Dir, #{nodes => Certified, cli_host => CliHost}) of
        ok ->
            terrain_lab_io:progress(Io, "distribution over TLS: a CA and ~b node certificates in ~ts~n",
                                    [length(Nodes), terrain_lab_tls:dir(Dir)]);
        {error, _} = Error ->
            throw({not_started, Error})
    end.

%% The workers' results in the workers' order, collected as they come with "k of N
%% up" progress and an ETA from the pace so far (at most about 20 lines).
collect(Workers, What, Io) ->
    T0 = erlang:monotonic_time(millisecond),
    Total = length(Workers),
    Step = max(1, Total div 20),
    Indexed = maps:from_list([{Ref, I} || {I, {_Pid, Ref}} <- lists:enumerate(Workers)]),
    Pids = maps:from_list([{Pid, Ref} || {Pid, Ref} <- Workers]),
    Done = collect(Pids, Indexed, #{}, T0, Step, What, Io),
    [maps:get(I, Done) || I <- lists:seq(1, Total)].

collect(Pids, _Indexed, Done, _T0, _Step, _What, _Io) when map_size(Pids) =:= 0 ->
    Done;
collect(Pids, Indexed, Done, T0, Step, What, Io) ->
    {Pid, Result} = receive
                        {P, R} when is_map_key(P, Pids) ->
                            erlang:demonitor(maps:get(P, Pids), [flush]),
                            {P, R};
                        {'DOWN', _Ref, process, P, Why} when is_map_key(P, Pids) ->
                            {P, {error, {crashed, Why}}}
                    end,
    Done1 = Done#{maps:get(maps:get(Pid, Pids), Indexed) => Result},
    K = map_size(Done1),
    Total = map_size(Indexed),
    _ = (K rem Step =:= 0 orelse K =:= Total) andalso begin
            Elapsed = erlang:monotonic_time(millisecond) - T0,
            Eta = Elapsed * (Total - K) div K,
            terrain_lab_io:progress(Io, "~ts: ~b of ~b nodes, ~.1f s elapsed~ts~n",
                                    [What, K, Total, Elapsed / 1000,
                                     case K < Total of true -> io_lib:format(", ETA ~.1f s", [Eta / 1000]); false -> "" end])
        end,
    collect(maps:remove(Pid, Pids), Indexed, Done1, T0, Step, What, Io).

%% Emulated links cost CPU even while the cluster idles: every distribution tick
%% (4 per net_ticktime, both ways) crosses a proxy; the cost per connection depends on
%% the proxies (terrain_lab_netem:idle_cost/0, measured at 128 VMs, docs/NETEM.md "At
%% scale") and grows with the connections, n(n−1)/2 in a full mesh. Above a fifth of the
%% machine's cores the round trips lose their accuracy before any work runs: `up' warns
%% and names the limit.
-define(NETEM_IDLE_SHARE, 0.2).

warn_netem_scale(Spec, Io) ->
    N = length(terrain_lab_spec:nodes(Spec)),
    Connections = case terrain_lab_spec:connect_all(Spec) of
                      true -> N * (N - 1) div 2;
                      false -> N - 1        % on demand: about one node talking to all
                  end,
    Cores = erlang:system_info(logical_processors_available),
    {Proxies, PerConnection} = terrain_lab_netem:idle_cost(),
    Idle = Connections * PerConnection / 1.0e6,
    Limit = netem_node_limit(Cores, PerConnection),
    case Idle > ?NETEM_IDLE_SHARE * Cores of
        true ->
            terrain_lab_io:progress(Io, "terrain: warning: network emulation of ~b nodes in a full mesh (~b proxied "
                                    "connections, ~s proxies) takes about ~.2f of this machine's ~b cores while "
                                    "idle; above ~b nodes here (a fifth of the cores) round trips drift beyond the "
                                    "spec's +-10% + 100 us (docs/NETEM.md, \"At scale\"); fewer nodes, more cores, "
                                    "or connect_all => false~n", [N, Connections, Proxies, Idle, Cores, Limit]);
        false ->
            ok
    end,
    %% each proxied connection keeps 3 local ports in use (terrain_lab_netem:port_capacity/0)
    case terrain_lab_netem:port_capacity() of
        Capacity when is_integer(Capacity), Connections > Capacity ->
            terrain_lab_io:progress(Io, "terrain: warning: ~b proxied connections keep about ~b local ports in use (3 "
                                    "each) and this machine's ephemeral range (net.ipv4.ip_local_port_range) has ~b: "
                                    "above ~b nodes in a full mesh connections fail and other programs here cannot "
                                    "listen (docs/NETEM.md, \"At scale\"); fewer nodes or connect_all => false~n",
                                    [Connections, 3 * Connections, 3 * Capacity, mesh_nodes(Capacity)]);
        _ ->
            ok
    end.

%% The largest full mesh whose idle emulation stays within a fifth of `Cores'.
netem_node_limit(Cores, PerConnection) ->
    mesh_nodes(?NETEM_IDLE_SHARE * Cores * 1.0e6 / PerConnection).

%% The largest full mesh of at most `MaxConnections' connections.
mesh_nodes(MaxConnections) ->
    trunc((1 + math:sqrt(1 + 8 * MaxConnections)) / 2).

netem_summary(Spec) ->
    lists:join(", ", [[Level, " ", level_text(Record)]
                      || #{level := Level} = Record <- terrain_lab_netem:level_records(Spec),
                         level_text(Record) =/= "-"]).

level_text(#{latency_us := L, jitter_us := J, bandwidth_bytes_per_s := B}) ->
    case [T || T <- [unit(L, " us"), case J of null -> "-"; _ -> ["+-", unit(J, " us")] end, unit(B, " B/s")],
               T =/= "-"] of
        [] -> "-";
        Parts -> lists:join(" ", Parts)
    end.

unit(null, _Unit) -> "-";
unit(Value, Unit) -> integer_to_list(Value) ++ Unit.

%% Starts the detached VMs, a few at a time (each `erl -detached' takes 0.1–0.3 s of
%% a core before it returns; one after the other, 256 took 72 s, docs/BENCHMARKS.md),
%% with "started k of N VMs" progress. Returns each start's result, in order.
spawn_vms(Spawns, Io) ->
    Parallel = 2 * erlang:system_info(schedulers_online),
    Total = length(Spawns),
    Step = max(1, Total div 10),
    T0 = erlang:monotonic_time(millisecond),
    Done = spawn_vms(lists:enumerate(Spawns), #{}, #{}, Parallel,
                     fun(K) ->
                             Elapsed = erlang:monotonic_time(millisecond) - T0,
                             _ = (K rem Step =:= 0 andalso K < Total) andalso
                                 terrain_lab_io:progress(Io, "started ~b of ~b VMs, ~.1f s elapsed, ETA ~.1f s~n",
                                                         [K, Total, Elapsed / 1000,
                                                          Elapsed * (Total - K) / K / 1000]),
                             ok
                     end),
    [maps:get(I, Done) || I <- lists:seq(1, Total)].

spawn_vms([], Running, Done, _Parallel, _Progress) when map_size(Running) =:= 0 ->
    Done;
spawn_vms([{I, Spawn} | Rest], Running, Done, Parallel, Progress) when map_size(Running) < Parallel ->
    Self = self(),
    {Pid, Ref} = spawn_monitor(fun() -> Self ! {self(), Spawn()} end),
    spawn_vms(Rest, Running#{Ref => {Pid, I}}, Done, Parallel, Progress);
spawn_vms(Spawns, Running, Done, Parallel, Progress) ->
    receive
        {'DOWN', Ref, process, Pid, Why} when is_map_key(Ref, Running) ->
            {Pid, I} = maps:get(Ref, Running),
            Result = receive {Pid, R} -> R after 0 -> {error, {crashed, Why}} end,
            Done1 = Done#{I => Result},
            ok = Progress(map_size(Done1)),
            spawn_vms(Spawns, maps:remove(Ref, Running), Done1, Parallel, Progress)
    end.

%% The options of a node's VM on this machine (terrain_lab_vm): a detached VM that
%% writes its pid file in `Dir', reads the cookie there, and only then goes distributed.
vm_options(NodeSpec, Node, Dir) ->
    maps:merge(#{transport => local_detached, name => maps:get(name, NodeSpec), node => Node, dir => Dir},
               maps:with([schedulers, args], NodeSpec)).

%% The options of a node's VM on another host: over ssh, or in a job step (the ssh
%% context's `launcher').
remote_vm_options(#{host := Host} = NodeSpec, Node, Ssh) ->
    maps:merge(#{transport => maps:get(launcher, Ssh, ssh), name => maps:get(name, NodeSpec), node => Node,
                 host => Host, ssh => Ssh},
               maps:with([schedulers, args], NodeSpec)).

%% Waits (terrain_lab_vm) for a started VM to answer, then sets its node up.
bring_up({ok, Vm}, NodeSpec, Node, Deadline) ->
    case terrain_lab_vm:await_boot([Vm], Deadline) of
        [{ok, _}] -> terrain_lab_cluster:setup_node(NodeSpec, Node, Deadline);
        [{error, Why}] -> {error, boot_error(Why)}
    end;
bring_up({error, Why}, _NodeSpec, _Node, _Deadline) ->
    {error, boot_error(Why)}.

%% Why a VM did not come up: not_reachable (it runs, but does not answer),
%% vm_did_not_start (it wrote no pid file), or a sentence.
boot_error(Why) when Why =:= not_reachable; Why =:= vm_did_not_start ->
    Why;
boot_error({ssh, _} = Why) ->
    {text, lists:flatten(terrain_lab_ssh:format_error(Why))};
boot_error(Why) ->
    {text, lists:flatten(terrain_lab:format_error(Why))}.

%% The OS pid a started VM wrote (on its host, for a node on another host).
started_pid(#{name := Name} = NodeSpec, Dir, Ssh) ->
    case NodeSpec of
        #{host := Host} ->
            case terrain_lab_hosts:is_local(Host) of
                true -> read_pid(terrain_lab_cluster_state:pid_file(Dir, Name));
                false -> terrain_lab_ssh:pid_of(Host, Name, Ssh)
            end;
        #{} ->
            read_pid(terrain_lab_cluster_state:pid_file(Dir, Name))
    end.

read_pid(File) ->
    case terrain_lab_vm:read_pid_file(File) of
        {ok, OsPid, _Node} -> {ok, OsPid};
        error -> error
    end.

node_record(#{name := Name, path := Path} = NodeSpec, Node, Dir, Result, Ssh) ->
    OsPid = case Result of
                {ok, #{os_pid := P}} -> list_to_binary(P);
                {error, _} ->
                    case started_pid(NodeSpec, Dir, Ssh) of
                        {ok, P} -> list_to_binary(P);
                        error -> null
                    end
            end,
    Record = #{name => Name, node => Node, group_path => Path, os_pid => OsPid,
               schedulers => case Result of {ok, #{schedulers := S}} -> S; _ -> null end,
               cpu_quota => case Result of {ok, #{cpu_quota := C}} -> C; _ -> null end,
               cpu_quota_per_scheduler => case Result of {ok, #{cpu_quota_per_scheduler := C}} -> C; _ -> null end},
    case NodeSpec of
        #{host := Host} -> terrain_lab_hosts:remote_record(Record, Host, Ssh);
        #{} -> Record
    end.

%% The CPU cgroups of the recorded nodes (terrain_lab_cgroup), once they are stopped.
remove_cgroups(#{<<"cluster">> := Cluster, <<"nodes">> := Nodes}) ->
    terrain_lab_cgroup:remove(binary_to_atom(Cluster), [hd(string:split(binary_to_list(N), "@")) || #{<<"node">> := N} <- Nodes]);
remove_cgroups(_StateFromPidFiles) ->
    ok.

format_reason({text, Text}) ->
    Text;
format_reason(Why) ->
    io_lib:format("~0tp", [Why]).

%%--------------------------------------------------------------------
%% status

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
                 [erpc:send_request(binary_to_atom(maps:get(<<"node">>, R)), terrain, F, []) || F <- [live_status, topology]]}
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

%%--------------------------------------------------------------------
%% stop

%% The recorded state; when cluster.json is missing (an `up' that was killed halfway)
%% or cannot be read, but pid files are there, a state made from the pid files (said
%% on `Io''s err device, when given).
read_state_or_pid_files(Dir, Io) ->
    case terrain_lab_cluster_state:read(Dir) of
        {ok, _} = Ok ->
            Ok;
        {error, Why} = Error ->
            case terrain_lab_cluster_state:pid_files(Dir) of
                [] ->
                    Error;
                Files ->
                    _ = Io =/= undefined andalso
                        terrain_lab_io:progress(Io, "~ts; stopping the ~b nodes named by the pid files in ~ts~n",
                                                [case Why of
                                                     {cluster_state, {no_cluster, _}} -> "no cluster.json";
                                                     _ -> terrain_lab:format_error(Why)
                                                 end, length(Files), filename:join(Dir, "nodes")]),
                    {ok, #{<<"nodes">> => [pid_file_record(F) || F <- Files]}}
            end
    end.

pid_file_record(File) ->
    Name = list_to_binary(filename:basename(File, ".pid")),
    case terrain_lab_vm:read_pid_file(File) of
        {ok, OsPid, undefined} -> #{<<"node">> => undefined, <<"name">> => Name, <<"os_pid">> => list_to_binary(OsPid)};
        {ok, OsPid, Node} -> #{<<"node">> => list_to_binary(Node), <<"name">> => Name, <<"os_pid">> => list_to_binary(OsPid)};
        error -> #{<<"node">> => undefined, <<"name">> => Name, <<"os_pid">> => null}
    end.

%% Is this recorded node's VM still running? Checked by its OS pid, which must still be
%% the VM started for this node (terrain_lab_vm:alive/2).
vm_running(#{<<"name">> := _} = Record, Dir) ->
    terrain_lab_vm:alive(terrain_lab_vm:from_record(Record, Dir), 10000) =:= true;
vm_running(_, _) ->
    false.

stop_nodes(#{<<"nodes">> := Nodes}, Timeout, Dir, Io) ->
    Self = self(),
    Workers = [spawn_monitor(fun() -> Self ! {self(), stop_node(Node, Timeout, Dir)} end) || Node <- Nodes],
    Results = collect(Workers, "down", Io),
    [case Result of
         {error, {crashed, Why}} -> {label(Node), lists:flatten(io_lib:format("still running (~0p)", [Why]))};
         _ -> Result
     end || {Node, Result} <- lists:zip(Nodes, Results)].

label(#{<<"node">> := Node}) when is_binary(Node) -> Node;
label(#{<<"name">> := Name}) -> Name.

%% Stops the recorded node (terrain_lab_vm:stop/2: halted by its full name, else its
%% OS process killed while it is still that node's VM) and says what became of it; the
%% files of a node on another host are removed there unless it still runs.
stop_node(Record, Timeout, Dir) ->
    Vm = terrain_lab_vm:from_record(Record, Dir),
    How = stop_text(terrain_lab_vm:stop(Vm, Timeout), Vm),
    ok = terrain_lab_hosts:clean_remote(Record, lists:prefix("still running", How), Dir),
    {label(Record), How}.

stop_text(stopped, _Vm) -> "stopped";
stop_text({stopped, job_step}, _Vm) -> "stopped with its job step";
stop_text(not_running, _Vm) -> "was not running";
stop_text({not_running, job_step_ended}, _Vm) -> "was not running (its job step had ended)";
stop_text({not_running, no_os_pid}, _Vm) -> "was not running (no OS pid recorded)";
stop_text({killed, OsPid}, #{host := Host}) -> "killed (OS pid " ++ OsPid ++ " on " ++ Host ++ ")";
stop_text({killed, OsPid}, #{}) -> "killed (OS pid " ++ OsPid ++ ")";
stop_text({still_running, no_os_pid}, _Vm) -> "still running (no OS pid recorded)";
stop_text({still_running, Why}, _Vm) -> "still running (" ++ lists:flatten(terrain_lab_ssh:format_error(Why)) ++ ")".
