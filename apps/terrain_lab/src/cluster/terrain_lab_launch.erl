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
         default_timeout/1,
         format_error/1]).

%% API for the other modules of the launcher (terrain_lab_launch_change, _stop)
-export([with_lock/2,
         check_full_names/2,
         refuse_clashes/2,
         vm_options/3,
         bring_up/5,
         live_option/1,
         node_record/5,
         json_record/1,
         collect/3,
         format_reason/1]).

-export_type([up_options/0, node_record/0]).

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
             fun(SpecNetem) -> check_memory(SpecNetem, Options) end],
    %% the lock is held from the look for a running cluster to the end
    Locked = [fun(SpecNetem) -> refuse_if_running(Dir, SpecNetem) end,
              fun({Spec, _} = SpecNetem) ->
                      case refuse_clashes(terrain_lab_spec:node_names(Spec), maps:get(prefix, Options)) of
                          ok -> {ok, SpecNetem};
                          {error, _} = Error -> Error
                      end
              end,
              fun(SpecNetem) -> check_tls(SpecNetem, Options) end,
              fun({Spec, Netem}) ->
                      start_detached(Spec, Netem, filename:absname(SpecFile), Dir, Options, Io)
              end],
    case terrain_lab_steps:run(Steps, SpecFile) of
        {ok, SpecNetem} -> with_lock(Dir, fun() -> terrain_lab_steps:run(Locked, SpecNetem) end);
        {error, _} = Error -> Error
    end.

%% @doc Runs `Fun' holding the state directory's lock (terrain_lab_cluster_state:lock/1),
%% the one lock of every command that starts or changes the cluster in `Dir' (`up',
%% `up --add', `down --nodes', `netem move'): while one runs, the others are refused.
%% The lock goes when `Fun' returns or fails, and on SIGTERM (terrain_lab_cleanup).
-spec with_lock(file:filename(), fun(() -> Result)) -> Result | {error, term()}.
with_lock(Dir, Fun) ->
    case terrain_lab_cluster_state:lock(Dir) of
        ok ->
            ok = terrain_lab_cleanup:add({up_lock, Dir}, fun() -> terrain_lab_cluster_state:unlock(Dir) end),
            try Fun()
            after
                terrain_lab_cluster_state:unlock(Dir),
                terrain_lab_cleanup:remove({up_lock, Dir})
            end;
        {error, _} = Error ->
            Error
    end.


%% @doc The live option as recorded in cluster.json (JSON: true, false or an object).
-spec live_option(term()) -> false | true | map().
live_option(true) -> true;
live_option(Map) when is_map(Map) -> maps:from_list([{binary_to_atom(K), V} || {K, V} <- maps:to_list(Map)]);
live_option(_) -> false.

live(false, NodeSpec) -> NodeSpec;
live(Live, NodeSpec) -> NodeSpec#{live => Live}.

%% @doc The default deadline for `N' nodes to come up: 30 s plus 1 s per node, at
%% least 60 s (nodes start in parallel, but on a small machine they share its cores).
-spec default_timeout(non_neg_integer()) -> pos_integer().
default_timeout(N) ->
    max(60000, 30000 + 1000 * N).

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
format_error({launch, {add_clash, Clashes}}) ->
    io_lib:format("node name~s ~ts ~s already registered with epmd: a VM of that name runs (of another cluster, or "
                  "left over from this one); nothing was started; stop it first, or add the node under another name",
                  [[$s || length(Clashes) > 1], lists:join(", ", Clashes),
                   case Clashes of [_] -> "is"; _ -> "are" end]);
format_error({launch, no_spec_recorded}) ->
    "the running cluster's state records no spec file to add nodes to";
format_error({launch, {already_in_cluster, Names}}) ->
    io_lib:format("the spec to add names ~ts, which the cluster has already; a node name is used once "
                  "('terrain down --nodes ~ts' stops ~ts, and it can be added again then)",
                  [lists:join(", ", Names), lists:join(",", Names), case Names of [_] -> "it"; _ -> "them" end]);
format_error({launch, {not_added, Failed}}) ->
    io_lib:format("the nodes to add did not come up and were stopped again; the cluster and its spec are as they "
                  "were: ~ts", [lists:join("; ", [io_lib:format("~ts: ~ts", [N, W]) || {N, W} <- Failed])]);
format_error({launch, {not_regular, File, Type}}) ->
    io_lib:format("cluster spec ~ts: not a regular file (a ~s)", [File, Type]);
format_error({launch, {spec_too_large, File, Size, Max}}) ->
    io_lib:format("cluster spec ~ts: ~b bytes, more than a spec can hold (~b bytes: far above the 100,000 nodes "
                  "a command may start)", [File, Size, Max]);
format_error({launch, {too_many_nodes, File, Max}}) ->
    io_lib:format("cluster spec ~ts names more than ~b nodes, more than terrain starts (every node name is an atom); "
                  "nothing was started", [File, Max]);
format_error({launch, {group_too_long, Group}}) ->
    io_lib:format("group name ~ts... has ~b characters; a group name has at most 255",
                  [lists:sublist(Group, 40), length(Group)]);
format_error({launch, nothing_to_add}) ->
    "the spec to add names no node that the cluster does not have already";
format_error({launch, {bad_prefix, Prefix, Char}}) ->
    io_lib:format("--prefix '~ts' cannot start a node name: '~tc' is not an ASCII letter, digit, '_' or '-'; "
                  "nothing was started", [Prefix, Char]);
format_error({launch, {live_not_settled, Settled, Total, Ms, Dir}}) ->
    io_lib:format("the ~b nodes are up (state in ~ts), but their live topology had not settled after ~.1f s: ~b of ~b "
                  "nodes were connected to every other node and held the version the others held; commands may fail "
                  "until it settles ('terrain status' shows each node's version; 'terrain down' stops the cluster)",
                  [Total, Dir, Ms / 1000, Settled, Total]);
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
check_names({Spec, _Netem} = SpecNetem, #{prefix := Prefix}) ->
    case check_full_names(terrain_lab_spec:node_names(Spec), Prefix) of
        ok -> {ok, SpecNetem};
        {error, _} = Error -> Error
    end.

%% @doc Refuses a prefix that cannot start a node name, and a full node name (prefix,
%% name, `@' and this host) longer than an atom can be; no atom is made.
-spec check_full_names([atom()], string()) -> ok | {error, term()}.
check_full_names(Names, Prefix) ->
    case [C || C <- Prefix, not name_char(C)] of
        [] ->
            Host = terrain_lab_dist_host(),
            Steps = [fun(_) ->
                             terrain_lab_cluster_state:check_node_name(Prefix ++ atom_to_list(Name) ++ "@" ++ Host)
                     end || Name <- Names],
            case terrain_lab_steps:run(Steps, none) of
                {error, _} = Error -> Error;
                _ -> ok
            end;
        [Bad | _] ->
            {error, {launch, {bad_prefix, Prefix, Bad}}}
    end.

name_char(C) ->
    (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z) orelse (C >= $0 andalso C =< $9)
        orelse C =:= $_ orelse C =:= $-.

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

%% @doc Refuses node names that epmd already has: a VM of another cluster (or state
%% directory, or a stale one of this cluster) runs under that name, and ours could
%% not register.
-spec refuse_clashes([atom()], string()) -> ok | {error, term()}.
refuse_clashes(Names, Prefix) ->
    Ours = [Prefix ++ atom_to_list(Name) || Name <- Names],
    Registered = case net_adm:names() of
                     {ok, Known} -> [N || {N, _Port} <- Known];
                     {error, _} -> []           % no epmd: nothing registered
                 end,
    case [N || N <- Ours, lists:member(N, Registered)] of
        [] -> ok;
        Clashes -> {error, {launch, {name_clash, Clashes}}}
    end.

refuse_if_running(Dir, Spec) ->
    case terrain_lab_launch_stop:running(Dir, undefined) of
        {ok, []} -> terrain_lab_cluster_state:remove(Dir), {ok, Spec};
        {ok, Running} -> {error, {launch, {already_running, Dir, Running}}};
        {error, {cluster_state, {no_cluster, _}}} -> {ok, Spec};
        {error, _} = Error -> Error
    end.

%% Starts the cluster: prepare (the state directory, certificates, this VM distributed;
%% a step that fails there leaves no state behind and nothing runs yet), start the VMs
%% and bring the nodes up, record them, and roll back (stop every node, remove the
%% state) when a node did not come up or the state could not be written.
-spec start_detached(terrain_lab_spec:spec(), boolean(), file:filename(), file:filename(), up_options(),
                     terrain_lab_io:io()) -> {ok, [node_record()]} | {error, term()}.
start_detached(Spec, Netem, SpecPath, Dir, Options, Io) ->
    case prepare(plan(Spec, Netem, SpecPath, Dir, Options), Io) of
        {ok, Run} ->
            start_and_record(Run, Io);
        {error, _} = Error ->
            terrain_lab_cluster_state:remove(Dir),
            Error
    end.

-spec start_and_record(map(), terrain_lab_io:io()) -> {ok, [node_record()]} | {error, term()}.
start_and_record(#{spec := Spec, dir := Dir, nodes := Nodes, ssh := Ssh} = Run, Io) ->
    Results = start(Run, Io),
    Records = [node_record(NodeSpec, Node, Dir, Result, Ssh)
               || {{NodeSpec, Node}, Result} <- lists:zip(Nodes, Results)],
    Written = record(Run, Records),
    Failed = [{atom_to_list(Node), format_reason(Why)} || {{_, Node}, {error, Why}} <- lists:zip(Nodes, Results)],
    case {Failed, Written} of
        {[], ok} ->
            terrain_lab_io:progress(Io, "cluster ~ts is up; state in ~ts~n", [maps:get(name, Spec), Dir]),
            case settled(Run, Io) of
                ok -> {ok, Records};
                {error, _} = NotSettled -> NotSettled
            end;
        {[], {error, _} = WriteError} ->
            rollback(Records, Dir, Io),
            WriteError;
        _ ->
            rollback(Records, Dir, Io),
            {error, {launch, {not_started, Failed}}}
    end.

%% A live cluster is ready for the next command once its nodes are meshed and hold one
%% version (terrain_lab_launch_status:await_live/3), under the rest of `up''s deadline
%% but at least a minute; until then they connect to each other and the CLI's
%% connections can time out. The cluster stays up when it has not settled by then.
settled(#{live := false}, _Io) ->
    ok;
settled(#{nodes := Nodes, deadline := Deadline, dir := Dir}, Io) ->
    Until = max(Deadline, erlang:monotonic_time(millisecond) + 60000),
    case terrain_lab_launch_status:await_live([Node || {_, Node} <- Nodes], Until, Io) of
        ok -> ok;
        {error, {live_not_settled, Settled, Total, Ms}} -> {error, {launch, {live_not_settled, Settled, Total, Ms, Dir}}}
    end.

%% What `up' will start, worked out before anything is written or started.
-spec plan(terrain_lab_spec:spec(), boolean(), file:filename(), file:filename(), up_options()) -> map().
plan(Spec, Netem, SpecPath, Dir, #{prefix := Prefix} = Options) ->
    Timeout = case maps:get(timeout, Options, undefined) of
                  undefined -> default_timeout(length(terrain_lab_spec:nodes(Spec)));
                  T -> T
              end,
    %% Nodes on other hosts: long names, started over ssh (terrain_lab_ssh).
    Remote = terrain_lab_hosts:remote(Spec),
    Tls = maps:get(tls, Options, false) orelse terrain_lab_spec:tls(Spec),
    Context = terrain_lab_ssh:context(Dir, maps:get(ssh_options, Options, []), maps:get(code_path, Options, undefined)),
    Nodes = [{NodeSpec, case Remote of
                            true -> terrain_lab_ssh:node_name(Prefix, Name, maps:get(host, NodeSpec));
                            false -> terrain_lab_dist:node_name(Prefix, Name)
                        end} || #{name := Name} = NodeSpec <- terrain_lab_spec:nodes(Spec)],
    #{spec => Spec, netem => Netem, spec_path => SpecPath, dir => Dir, prefix => Prefix, timeout => Timeout,
      remote => Remote, tls => Tls, ssh => Context#{launcher => maps:get(launcher, Options, ssh), tls => Tls},
      nodes => Nodes, live => maps:get(live, Options, false)}.

%% The preparation steps, in order; the first error ends `up' before any VM starts. A
%% state directory that refuses a write (read-only, full) fails here.
-spec prepare(map(), terrain_lab_io:io()) -> {ok, map()} | {error, term()}.
prepare(#{spec := Spec, dir := Dir, nodes := Nodes} = Plan, Io) ->
    Steps = [fun(Run) -> keep(Run, terrain_lab_files:make_dir(filename:join(Dir, "nodes"))) end,
             fun(Run) ->
                     case terrain_lab_cluster_state:create_cookie(Dir) of
                         {ok, CookieFile} -> {ok, Run#{cookie_file => CookieFile}};
                         {error, _} = Error -> Error
                     end
             end,
             fun(#{remote := true} = Run) -> keep(Run, terrain_lab_hosts:prepare_cli(Spec, Dir));
                (Run) -> {ok, Run}
             end,
             %% TLS: the certificates exist before this VM goes distributed (it reads cli.conf then).
             fun(#{tls := true} = Run) -> keep(Run, make_certificates(Nodes, Dir, Io));
                (Run) -> {ok, Run}
             end,
             fun(Run) -> keep(Run, terrain_lab_cluster_state:connect_cli(Dir)) end,   % e.g. epmd not answering
             fun(Run) -> {ok, started_clock(Run, Io)} end],
    terrain_lab_steps:run(Steps, Plan).

%% A preparation step's outcome, passing the run on when it succeeded.
-spec keep(map(), ok | {error, term()}) -> {ok, map()} | {error, term()}.
keep(Run, ok) -> {ok, Run};
keep(_Run, {error, _} = Error) -> Error.

%% Says what starts, and sets the deadline from now.
-spec started_clock(map(), terrain_lab_io:io()) -> map().
started_clock(#{spec := Spec, spec_path := SpecPath, nodes := Nodes, netem := Netem, timeout := Timeout} = Run, Io) ->
    terrain_lab_io:progress(Io, "starting ~b nodes of ~ts (deadline ~b s)~n",
                            [length(Nodes), SpecPath, Timeout div 1000]),
    _ = Netem andalso terrain_lab_io:progress(Io, "network emulation on: ~ts~n", [netem_summary(Spec)]),
    Run#{deadline => erlang:monotonic_time(millisecond) + Timeout}.

%% Starts the VMs (local ones a few at a time; a VM on another host by its own worker,
%% in parallel) and brings every node up; the results in the nodes' order.
start(#{spec := Spec, nodes := Nodes, remote := Remote, deadline := Deadline, live := Live} = Run, Io) ->
    VmOptions = [start_options(NodeSpec, Node, Run) || {NodeSpec, Node} <- Nodes],
    Started = case Remote of
                  true -> [remote || _ <- Nodes];
                  false -> spawn_vms([fun() -> terrain_lab_vm:start(O) end || O <- VmOptions], Io)
              end,
    Self = self(),
    Names = maps:from_list([{N, Node} || {#{name := N}, Node} <- Nodes]),
    Topology = terrain_lab_spec:topology(Spec, fun(Name) -> maps:get(Name, Names) end),
    Cluster = maps:get(name, Spec),
    Workers = [spawn_monitor(fun() ->
                                     Start = case Start0 of
                                                 remote -> terrain_lab_vm:start(O);
                                                 _ -> Start0
                                             end,
                                     Setup = live(Live, NodeSpec#{topology => Topology, cluster => Cluster}),
                                     Self ! {self(), bring_up(Start, Setup, Node, Deadline)}
                             end)
               || {{NodeSpec, Node}, O, Start0} <- lists:zip3(Nodes, VmOptions, Started)],
    collect(Workers, "up", Io).

start_options(NodeSpec, Node, #{remote := true, ssh := Ssh, deadline := Deadline}) ->
    remote_vm_options(NodeSpec, Node, Ssh#{deadline => Deadline});
start_options(#{name := Name} = NodeSpec, Node, #{spec := Spec, netem := Netem, tls := Tls, prefix := Prefix,
                                                  dir := Dir}) ->
    maps:merge(vm_options(NodeSpec, Node, Dir),
               maps:merge(case Netem of
                              true -> #{netem => {Spec, Prefix}};
                              false -> #{}
                          end,
                          case Tls of
                              true -> #{tls_optfile => terrain_lab_tls:optfile(Dir, Name)};
                              false -> #{}
                          end)).

record(#{spec := Spec, spec_path := SpecPath, cookie_file := CookieFile, netem := Netem, tls := Tls,
         prefix := Prefix, live := Live, dir := Dir}, Records) ->
    terrain_lab_cluster_state:write(Dir, #{cluster => maps:get(name, Spec),
                                           spec => list_to_binary(SpecPath),
                                           cookie_file => list_to_binary(CookieFile),
                                           started_at => terrain_lab_run:timestamp(),
                                           netem => Netem,
                                           tls => Tls,
                                           prefix => list_to_binary(Prefix),
                                           live => Live,
                                           levels => terrain_lab_netem:level_records(Spec),
                                           nodes => Records}).

%% Nodes that did not come up, or a state that could not be recorded (a full disk):
%% every node is stopped again, by the records in hand, and the state removed.
rollback(Records, Dir, Io) ->
    Recorded = case terrain_lab_cluster_state:read(Dir) of
                   {ok, Read} -> Read;                      % as every later command reads it
                   {error, _} -> #{<<"nodes">> => [json_record(R) || R <- Records]}   % not written
               end,
    _ = terrain_lab_launch_stop:stop_nodes(Recorded, 5000, Dir, Io),
    ok = terrain_lab_launch_stop:remove_cgroups(Recorded),
    terrain_lab_cluster_state:remove(Dir).

%% @doc A node record as cluster.json holds it (binary keys, atoms as text).
-spec json_record(term()) -> term().
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
            Error
    end.

%% @doc The workers' results in the workers' order, collected as they come with "k of N
%% up" progress and an ETA from the pace so far (at most about 20 lines).
-spec collect([{pid(), reference()}], string(), terrain_lab_io:io()) -> [term()].
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
                                     case K < Total of
                                         true -> io_lib:format(", ETA ~.1f s", [Eta / 1000]);
                                         false -> ""
                                     end])
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
    %% each proxied connection keeps 3 ports of its connecting node's own address in use
    %% (terrain_lab_netem:port_capacity/0); a node opens at most N - 1
    case terrain_lab_netem:port_capacity() of
        Capacity when is_integer(Capacity), N - 1 > Capacity ->
            terrain_lab_io:progress(Io, "terrain: warning: a node of ~b may open ~b proxied connections, which keep "
                                    "~b ports of its own address in use (3 each), and this machine's ephemeral range "
                                    "(net.ipv4.ip_local_port_range) has ~b: connections fail above ~b nodes "
                                    "(docs/NETEM.md, \"At scale\"); fewer nodes~n",
                                    [N, N - 1, 3 * (N - 1), 3 * Capacity, Capacity + 1]);
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

%% @doc The options of a node's VM on this machine (terrain_lab_vm): a detached VM that
%% writes its pid file in `Dir', reads the cookie there, and only then goes distributed.
-spec vm_options(map(), node(), file:filename()) -> map().
vm_options(NodeSpec, Node, Dir) ->
    Name = maps:get(name, NodeSpec),
    %% its log events next to its pid file (STATE_DIR/nodes/NAME.log)
    Log = terrain_lab_cluster_state:vm_log(Dir, Name),
    maps:merge(#{transport => local_detached, name => Name, node => Node, dir => Dir, log => Log},
               maps:with([schedulers, args], NodeSpec)).

%% The options of a node's VM on another host: over ssh, or in a job step (the ssh
%% context's `launcher').
remote_vm_options(#{host := Host} = NodeSpec, Node, Ssh) ->
    maps:merge(#{transport => maps:get(launcher, Ssh, ssh), name => maps:get(name, NodeSpec), node => Node,
                 host => Host, ssh => Ssh},
               maps:with([schedulers, args], NodeSpec)).

%% @doc Waits (terrain_lab_vm) for a started VM to answer, then sets its node up.
-spec bring_up({ok, terrain_lab_vm:vm()} | {error, term()}, map(), node(), integer()) -> {ok, map()} | {error, term()}.
bring_up(Start, NodeSpec, Node, Deadline) ->
    bring_up(Start, NodeSpec, Node, Deadline, fun(_) -> ok end).

%% @doc As {@link bring_up/4}, with `Prepare(Node)' run once the VM has booted and
%% before terrain starts on it (e.g. the partitions a node added to a cut cluster joins).
-spec bring_up({ok, terrain_lab_vm:vm()} | {error, term()}, map(), node(), integer(),
               fun((node()) -> ok | {error, term()})) -> {ok, map()} | {error, term()}.
bring_up({ok, Vm}, NodeSpec, Node, Deadline, Prepare) ->
    case terrain_lab_vm:await_boot([Vm], Deadline) of
        [{ok, _}] ->
            case Prepare(Node) of
                ok -> terrain_lab_cluster:setup_node(NodeSpec, Node, Deadline);
                {error, Why} -> {error, boot_error(Why)}
            end;
        [{error, Why}] ->
            {error, with_log(boot_error(Why), Vm)}
    end;
bring_up({error, Why}, _NodeSpec, _Node, _Deadline, _Prepare) ->
    {error, boot_error(Why)}.

%% Why a VM did not come up: not_reachable (it runs, but does not answer),
%% vm_did_not_start (it wrote no pid file), or a sentence.
boot_error(Why) when Why =:= not_reachable; Why =:= vm_did_not_start ->
    Why;
boot_error({ssh, _} = Why) ->
    {text, lists:flatten(terrain_lab_ssh:format_error(Why))};
boot_error(Why) ->
    {text, lists:flatten(terrain_lab:format_error(Why))}.

%% A VM that keeps a log (a detached one here): the error names it.
with_log(Why, #{log := Log}) ->
    {text, lists:flatten(io_lib:format("~ts; its log: ~ts", [format_reason(Why), Log]))};
with_log(Why, #{}) ->
    Why.

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

%% @doc The record of a started node (its OS pid from its pid file when it did not come up).
-spec node_record(map(), node(), file:filename(), {ok, map()} | {error, term()}, map()) -> node_record().
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
%% @doc Why a node did not come up, as text.
-spec format_reason(term()) -> iodata().
format_reason({text, Text}) ->
    Text;
format_reason(Why) ->
    io_lib:format("~0tp", [Why]).

