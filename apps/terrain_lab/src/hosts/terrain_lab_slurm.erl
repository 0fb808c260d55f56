%% @private
%% @doc `terrain up --slurm': a cluster on the nodes of the SLURM allocation this
%% command runs in (docs/HOSTS.md, "SLURM").
%%
%% The allocation comes from two variables SLURM sets in a batch script or under
%% `salloc': `SLURM_JOB_NODELIST', a hostlist expression (`atcn[127-144,163-180]',
%% expanded by `terrain_lab_hostlist'), and `SLURM_TASKS_PER_NODE', the task count
%% of each of those nodes in SLURM's compressed form (`2(x3),1': 2 on each of the
%% first three nodes, 1 on the fourth; {@link tasks_per_node/1}). terrain starts one
%% VM per node (a BEAM VM uses every core it is given), `PerHost' VMs per node with
%% `--per-host N', or as many as the node has tasks with `--per-task' (the layout of
%% small VMs pinned to cores in RELEASE D3.5 §3.4). `SLURM_TASKS_PER_NODE' is always
%% read and checked against the node list, so a broken allocation environment is
%% found before anything starts.
%%
%% The spec's groups come from the allocation's switches: `scontrol show topology'
%% prints SLURM's tree topology (topology.conf, plugin topology/tree) one switch a
%% line, `SwitchName=s0 Level=0 LinkSpeed=1 Nodes=atcn[001-018]' or
%% `SwitchName=s2 Level=1 LinkSpeed=1 Switches=s[0-1]' (upper switches may list the
%% nodes below them too); {@link parse_topology/1} reads it and {@link spec_terms/3}
%% nests one group per switch (pruned to the switches above allocated nodes) with
%% one group per host inside, each host under the lowest-level switch that lists it.
%% Without `scontrol', or when it prints no switch, the hosts form one group and the
%% user is told to measure the structure with `terrain probe' and `terrain topology'
%% (RELEASE D3.5 §4.4.4: Athos's network was not published, so the plan was to probe
%% each allocation and cluster the timings).
%%
%% The VMs are started with `srun' when it is on the PATH (the `srun' transport of
%% `terrain_lab_vm', through {@link start_step/5}; one job step per VM, the VM in the
%% step's foreground so that SLURM accounts for it and stops it with the job), else
%% over ssh exactly as `--hosts' does. Every external command runs under a deadline.
-module(terrain_lab_slurm).

%% API
-export([allocation/1,
         tasks_per_node/1,
         parse_topology/1,
         read_topology/1,
         topology_tree/1,
         scontrol_topology/1,
         spec_terms/3,
         prepare/1,
         srun_args/2,
         start_step/5,
         format_error/1]).

%% exports_not_used: the parts of prepare/1 and start_step/5, tested on their own
%% (terrain_lab_slurm_tests).
-ignore_xref([{allocation, 1}, {tasks_per_node, 1}, {parse_topology, 1}, {spec_terms, 3}, {srun_args, 2}]).

-export_type([switch/0, error_reason/0, prepare_options/0]).

%% One line of `scontrol show topology'.
-type switch() :: #{name := string(), level := non_neg_integer(),
                    nodes := [string()], switches := [string()]}.

-type error_reason() ::
        {slurm, not_in_allocation}
      | {slurm, {variable, Name :: string(), missing | empty | {bad, string(), term()}}}
      | {slurm, {count, Nodes :: pos_integer(), Tasks :: pos_integer()}}
      | {slurm, {usage, string()}}
      | {slurm, {topology_line, pos_integer(), string()}}
      | {slurm, {topology_line, pos_integer(), string(), term()}}
      | {slurm, {topology_not_utf8, pos_integer()}}
      | {slurm, {topology_too_large, switches | hosts, pos_integer(), pos_integer()}}
      | {slurm, {topology_graph, graph_error()}}
      | {slurm, {topology_empty, string()}}
      | {slurm, {scontrol, string()}}
      | {slurm, {write, file:filename(), file:posix()}}
      | {slurm, {srun, string(), timeout | {exited, string()}}}.

%% Why the switches of a topology do not form a tree (found in linear time).
-type graph_error() :: {duplicate_switch, string(), pos_integer(), pos_integer()}   % name, both lines
                     | {unknown_switch, string(), string()}                          % the parent, the child
                     | {two_parents, string(), string(), string()}                   % the child, both parents
                     | {switch_loop, [string()]}                                     % the loop, first again last
                     | {host_twice, string(), string(), string()}.                   % host, two unrelated switches

-type prepare_options() ::
        #{per_host := pos_integer(),                 % VMs on each node (default 1)
          per_task := boolean(),                     % one VM per SLURM task instead
          spec_out := file:filename() | undefined,   % where the spec is written
          getenv => fun((string()) -> string() | false),  % os:getenv/1 unless a test says otherwise
          progress := fun((iodata()) -> ok)}.

-define(SCONTROL_TIMEOUT, 10000).
%% Bounds of a topology: its file's size, and the switches and hosts it may name
%% (their names become atoms: terrain starts at most 100,000 nodes).
-define(MAX_CONF_BYTES, 16 * 1024 * 1024).
-define(MAX_SWITCHES, 100000).
-define(MAX_HOSTS, 100000).
-define(MAX_NAME, 255).
-define(MAX_LINE, 256 * 1024).

%%--------------------------------------------------------------------
%% API

%% @doc The allocation described by the environment: its hosts in the order of
%% `SLURM_JOB_NODELIST' and the task count of each from `SLURM_TASKS_PER_NODE'.
-spec allocation(fun((string()) -> string() | false)) ->
          {ok, [{string(), pos_integer()}]} | {error, error_reason()}.
allocation(Getenv) ->
    case {Getenv("SLURM_JOB_NODELIST"), Getenv("SLURM_JOB_ID")} of
        {false, false} -> {error, {slurm, not_in_allocation}};
        {NodeList, _} ->
            case {variable("SLURM_JOB_NODELIST", NodeList, fun hosts/1),
                  variable("SLURM_TASKS_PER_NODE", Getenv("SLURM_TASKS_PER_NODE"), fun tasks_per_node/1)} of
                {{ok, Hosts}, {ok, Tasks}} when length(Hosts) =:= length(Tasks) ->
                    {ok, lists:zip(Hosts, Tasks)};
                {{ok, Hosts}, {ok, Tasks}} ->
                    {error, {slurm, {count, length(Hosts), length(Tasks)}}};
                {{error, _} = Error, _} -> Error;
                {_, {error, _} = Error} -> Error
            end
    end.

%% @doc The task counts of `SLURM_TASKS_PER_NODE', one per node: a comma-separated
%% list of `N' or `N(xR)' (N tasks on each of R nodes).
-spec tasks_per_node(string()) -> {ok, [pos_integer()]} | {error, {string(), term()}}.
tasks_per_node(Text) when is_list(Text) ->
    try
        {ok, lists:append([tasks_item(Item) || Item <- string:split(Text, ",", all)])}
    catch
        throw:Why -> {error, {Text, Why}}
    end.

%% @doc The switches of `scontrol show topology' output or of a topology.conf file,
%% in their order. Lines that name no switch (`No topology information available',
%% blank lines, `#' comments) are skipped; keys are read without regard to case, as
%% SLURM reads topology.conf; a switch line that cannot be read is an error naming
%% its line number. topology.conf gives no `Level': each switch's level is computed
%% as SLURM does (0 for a switch of nodes only, else one above its highest child).
%%
%% The switches must form a tree, checked in linear time: a name given twice, a child
%% switch that is not defined, a switch under two parents, a loop of switches, and a
%% host under two switches of which neither is above the other are errors naming
%% them. Text that is not UTF-8, a switch name longer than 255 characters, and more
%% than 100,000 switches or hosts are refused before any name becomes an atom.
-spec parse_topology(string() | binary()) -> {ok, [switch()]} | {error, error_reason()}.
parse_topology(Text) when is_list(Text) ->
    parse_topology(unicode:characters_to_binary(Text));
parse_topology(Bin) when is_binary(Bin) ->
    case unicode:characters_to_binary(Bin) of
        Bin -> parse_lines(lists:enumerate(binary:split(Bin, <<"\n">>, [global])));
        {_, Good, _} -> {error, {slurm, {topology_not_utf8, 1 + length(binary:matches(Good, <<"\n">>))}}}
    end.

parse_lines(Lines) ->
    try
        Numbered = [{N, switch(N, Line)} || {N, Line0} <- Lines, Line <- [switch_line(N, Line0)], Line =/= skip],
        Switches = [S || {_, S} <- Numbered],
        _ = length(Switches) > ?MAX_SWITCHES
            andalso throw({too_large, switches, length(Switches), ?MAX_SWITCHES}),
        Hosts = lists:sum([length(Ns) || #{nodes := Ns} <- Switches]),
        _ = Hosts > ?MAX_HOSTS andalso throw({too_large, hosts, Hosts, ?MAX_HOSTS}),
        Parents = check_tree(Numbered),
        {ok, with_levels(Switches, Parents)}
    catch
        throw:{too_large, What, Count, Max} -> {error, {slurm, {topology_too_large, What, Count, Max}}};
        throw:{graph, Why} -> {error, {slurm, {topology_graph, Why}}};
        throw:{N, Line} -> {error, {slurm, {topology_line, N, Line}}};
        throw:{N, Line, Why} -> {error, {slurm, {topology_line, N, Line, Why}}}
    end.

%% A line without its comment when it defines a switch (at most ?MAX_LINE bytes),
%% else `skip'.
switch_line(N, Line0) ->
    Line = case binary:match(Line0, <<"#">>) of
               {At, _} -> string:trim(binary:part(Line0, 0, At));
               nomatch -> string:trim(Line0)
           end,
    case Line of
        <<Key:11/binary, _/binary>> ->
            case string:lowercase(Key) of
                <<"switchname=">> when byte_size(Line) > ?MAX_LINE ->
                    throw({N, shown(Line), {long_line, ?MAX_LINE}});
                <<"switchname=">> ->
                    Line;
                _ ->
                    skip
            end;
        _ ->
            skip
    end.

%% @doc The switches of a topology.conf file (see {@link parse_topology/1}), read
%% through the bounded reader: a regular file of at most 16 MB. The reader beside
%% the writer of topology.conf, `terrain_lab_testbed'.
-spec read_topology(file:filename()) -> {ok, [switch()]} | {error, error_reason() | terrain_lab_files:read_error()}.
read_topology(File) ->
    case terrain_lab_files:read(File, ?MAX_CONF_BYTES) of
        {ok, Bin} -> parse_topology(Bin);
        {error, _} = Error -> Error
    end.

%% @doc The topology term (`terrain:load_topology/1', `terrain topology compare') of
%% SLURM switches: one `network' per switch, named after it, holding its child
%% switches and the nodes whose lowest switch it is (`{node, HostAtom}'). Several top
%% switches (a forest) are joined under one network `slurm'. The switches are those
%% of {@link parse_topology/1}: a tree.
-spec topology_tree([switch(), ...]) -> terrain:topology_tree().
topology_tree(Switches) ->
    ByName = maps:from_list([{Name, S} || #{name := Name} = S <- Switches]),
    Homes = homes(Switches),
    Own = maps:groups_from_list(fun({_, Home}) -> Home end, fun({H, _}) -> list_to_atom(H) end,
                                lists:sort(maps:to_list(Homes))),
    Tree = fun Tree(#{name := Name, switches := Cs}) ->
                   {network, list_to_atom(Name),
                    [Tree(maps:get(C, ByName)) || C <- Cs] ++ [{node, H} || H <- maps:get(Name, Own, [])]}
           end,
    case roots(Switches) of
        [Root] -> Tree(Root);
        Roots -> {network, slurm, [Tree(R) || R <- Roots]}
    end.

%% @doc The terms of the cluster spec for the allocation: `Hosts' with their VM
%% counts, grouped by `Switches' (`[]': one group `allocation'). Returns the terms
%% and the hosts that no switch lists (put at the top level).
-spec spec_terms(atom(), [{string(), pos_integer()}], [switch()]) -> {[tuple()], [string()]}.
spec_terms(Cluster, Hosts, []) ->
    {[{cluster, Cluster, #{}},
      {group, allocation, #{}, [terrain_lab_hosts:host_group(H, C) || {H, C} <- Hosts]}], []};
spec_terms(Cluster, Hosts, Switches) ->
    ByName = maps:from_list([{Name, S} || #{name := Name} = S <- Switches]),
    Homes = homes(Switches),
    Home = maps:from_list([{H, maps:get(H, Homes, none)} || {H, _} <- Hosts]),
    Roots = roots(Switches),
    Groups = lists:append([switch_group(S, ByName, Hosts, Home, []) || S <- Roots]),
    Orphans = [H || {H, _} <- Hosts, maps:get(H, Home) =:= none],
    {[{cluster, Cluster, #{}} | Groups] ++ [terrain_lab_hosts:host_group(H, C) || {H, C} <- Hosts,
                                                                                lists:member(H, Orphans)],
     Orphans}.

%% @doc Reads the allocation, finds its topology, writes the spec and says on
%% `progress' how the VMs will start. Returns the spec file and the launcher.
-spec prepare(prepare_options()) ->
          {ok, #{spec_file := file:filename(), launcher := srun | ssh, hosts := [string()]}} | {error, error_reason()}.
prepare(#{progress := Progress, per_task := PerTask, per_host := PerHost} = Options) ->
    Getenv = maps:get(getenv, Options, fun os:getenv/1),
    Job = case Getenv("SLURM_JOB_ID") of false -> ""; "" -> ""; Id -> "_" ++ Id end,
    SpecFile = case maps:get(spec_out, Options) of
                   undefined -> "terrain-slurm" ++ Job ++ ".spec";
                   Given -> Given
               end,
    Steps = [fun(_) when PerTask, PerHost > 1 ->
                     {error, {slurm, {usage, "give either --per-host N or --per-task, not both"}}};
                (_) ->
                     allocation(Getenv)
             end,
             fun(Allocation) ->
                     %% VMs per host: the task count with --per-task, else --per-host (default 1).
                     Hosts = [{H, case PerTask of true -> T; false -> PerHost end} || {H, T} <- Allocation],
                     {Terms, Orphans} = spec_terms(list_to_atom("slurm" ++ [C || C <- Job, C =/= $.]), Hosts,
                                                   topology(Progress, length(Hosts))),
                     _ = Orphans =/= [] andalso
                         Progress(io_lib:format("scontrol's topology puts no switch above ~ts: they join the spec "
                                                "at its top level~n", [lists:join(", ", Orphans)])),
                     case write_spec(Terms, SpecFile) of
                         ok -> {ok, Hosts};
                         {error, _} = Error -> Error
                     end
             end,
             fun(Hosts) ->
                     VMs = lists:sum([C || {_, C} <- Hosts]),
                     Progress(io_lib:format("wrote the spec of the allocation (~b node~s, ~b VM~s) to ~ts~n",
                                            [length(Hosts), [$s || length(Hosts) > 1], VMs, [$s || VMs > 1],
                                             SpecFile])),
                     {ok, #{spec_file => SpecFile, launcher => launcher(Progress), hosts => [H || {H, _} <- Hosts]}}
             end],
    terrain_lab_steps:run(Steps, none).

%% @doc The arguments of `srun' that start the VM of spec node `Name' on `Host': one
%% job step of one task on that node, sharing the node with the other VMs' steps
%% (`--overlap'; by default a step gets every CPU the job has on its nodes), stopped
%% as a whole when its task fails, named after the node for `squeue'/`sacct'.
-spec srun_args(string(), atom()) -> [string()].
srun_args(Host, Name) ->
    ["--nodes=1", "--ntasks=1", "--nodelist=" ++ Host, "--overlap", "--kill-on-bad-exit=1",
     "--job-name=terrain-" ++ atom_to_list(Name)].

%% @doc Starts a job step of its own on `Host' for the VM of spec node `Name': `srun
%% ARGS /bin/sh -c LINE' in a new session (so that it outlives this command), LINE
%% being the VM's shell line (`terrain_lab_vm:shell_line/2', the VM in the
%% foreground). `Stdin' (the cookie, and with TLS the node's key material) goes to
%% srun's standard input, which srun forwards to the task. srun's OS pid goes to
%% `Dir/nodes/NAME.srun', its output to `Dir/nodes/NAME.srun.log'. Returns srun's OS
%% pid and log once srun runs; the VM's boot is `terrain_lab_vm:await_boot/2''s.
-spec start_step(#{name := atom(), host := string()}, string(), iodata(), file:filename(), integer()) ->
          {ok, OsPid :: string(), Log :: file:filename()} | {error, error_reason()}.
start_step(#{name := Name, host := Host}, Line, StdinData, Dir, Deadline) ->
    Srun = os:find_executable("srun"),
    Log = srun_file(Dir, Name) ++ ".log",
    Args = [Srun | srun_args(Host, Name)] ++ ["/bin/sh", "-c", Line],
    %% srun's standard input comes from a file of the state directory, mode 0600 from
    %% its creation (the cookie and the certificates are there already), removed once
    %% srun has started: a pipe from this VM would race with the shell, which exits at once.
    Stdin = srun_file(Dir, Name) ++ ".stdin",
    ok = write_private(Stdin, StdinData),
    Q = fun terrain_lab_os:shell_quote/1,
    Shell = ["setsid ", lists:join(" ", [Q(A) || A <- Args]), " <", Q(Stdin), " >", Q(Log), " 2>&1 & echo $!"],
    %% the shell prints srun's pid and exits at once; srun, in a session of its own,
    %% is not in the shell's process group that the deadline would stop
    Launched = terrain_lab_os:run("/bin/sh", ["-c", lists:flatten(Shell)],
                                  #{timeout => max(1, Deadline - erlang:monotonic_time(millisecond)),
                                    stderr => inherit}),
    try launched(Launched, Host, Log, Dir, Name)
    after file:delete(Stdin)
    end.

launched({ok, _Status, Output}, _Host, Log, Dir, Name) ->
    OsPid = string:trim(binary_to_list(Output)),
    ok = file:write_file(srun_file(Dir, Name), OsPid),
    {ok, OsPid, Log};
launched({error, {run, _, {timeout, _, _}}}, Host, _Log, _Dir, _Name) ->
    {error, {slurm, {srun, Host, timeout}}};
launched({error, Reason}, Host, _Log, _Dir, _Name) ->
    {error, {slurm, {srun, Host, {exited, lists:flatten(terrain_lab_os:format_error(Reason))}}}}.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({slurm, not_in_allocation}) ->
    "not inside a SLURM allocation (SLURM_JOB_NODELIST and SLURM_JOB_ID are not set): run 'terrain up --slurm' "
    "in an sbatch script or under salloc (docs/HOSTS.md, \"SLURM\")";
format_error({slurm, {variable, Name, missing}}) ->
    io_lib:format("~ts is not set; SLURM sets it in every allocation", [Name]);
format_error({slurm, {variable, Name, empty}}) ->
    io_lib:format("~ts is empty", [Name]);
format_error({slurm, {variable, "SLURM_JOB_NODELIST", {bad, Value, {duplicate, Host}}}}) ->
    io_lib:format("SLURM_JOB_NODELIST='~ts' lists ~ts twice", [Value, Host]);
format_error({slurm, {variable, "SLURM_JOB_NODELIST", {bad, Value, {hostlist, _} = Why}}}) ->
    io_lib:format("SLURM_JOB_NODELIST='~ts' is not a hostlist: ~ts", [Value, terrain_lab_hostlist:format_error(Why)]);
format_error({slurm, {variable, Name, {bad, Value, Why}}}) ->
    io_lib:format("~ts='~ts' cannot be read: ~ts (expected counts such as 2(x3),1)", [Name, Value, why(Why)]);
format_error({slurm, {count, Nodes, Tasks}}) ->
    io_lib:format("SLURM_TASKS_PER_NODE gives task counts for ~b nodes but SLURM_JOB_NODELIST lists ~b",
                  [Tasks, Nodes]);
format_error({slurm, {usage, Text}}) ->
    Text;
format_error({slurm, {topology_line, N, Line}}) ->
    io_lib:format("topology, line ~b: cannot read '~ts' (expected SwitchName=NAME with Nodes=HOSTLIST "
                  "and/or Switches=HOSTLIST)", [N, Line]);
format_error({slurm, {topology_line, N, _Line, {long_line, Max}}}) ->
    io_lib:format("topology, line ~b: the line is longer than ~b bytes", [N, Max]);
format_error({slurm, {topology_line, N, _Line, {long_name, Length}}}) ->
    io_lib:format("topology, line ~b: the switch name has ~b characters, more than the ~b a name may have",
                  [N, Length, ?MAX_NAME]);
format_error({slurm, {topology_line, N, _Line, {hostlist, {Expression, _, {too_many, Count}}}}}) ->
    io_lib:format("topology, line ~b: the hostlist ~ts is too large (~b hosts; terrain reads at most ~b)",
                  [N, shown(Expression), Count, ?MAX_HOSTS]);
format_error({slurm, {topology_not_utf8, Line}}) ->
    io_lib:format("topology, line ~b: the bytes are not UTF-8", [Line]);
format_error({slurm, {topology_too_large, What, Count, Max}}) ->
    io_lib:format("the topology names ~b ~s, more than the ~b terrain reads", [Count, What, Max]);
format_error({slurm, {topology_graph, {duplicate_switch, Name, First, Again}}}) ->
    io_lib:format("topology: switch ~ts is defined twice (lines ~b and ~b)", [Name, First, Again]);
format_error({slurm, {topology_graph, {unknown_switch, Parent, Child}}}) ->
    io_lib:format("topology: switch ~ts lists switch ~ts, which is not defined", [Parent, Child]);
format_error({slurm, {topology_graph, {two_parents, Child, One, Other}}}) ->
    io_lib:format("topology: switch ~ts is listed under both ~ts and ~ts (the switches must form a tree)",
                  [Child, One, Other]);
format_error({slurm, {topology_graph, {switch_loop, Loop}}}) ->
    io_lib:format("topology: switch loop ~ts (the switches must form a tree)", [lists:join(" -> ", Loop)]);
format_error({slurm, {topology_graph, {host_twice, Host, One, Other}}}) ->
    io_lib:format("topology: host ~ts is under both switch ~ts and switch ~ts, and neither is above the other",
                  [Host, One, Other]);
format_error({slurm, {scontrol, Why}}) ->
    Why;
format_error({slurm, {topology_empty, Source}}) ->
    io_lib:format("~ts lists no switch", [Source]);
format_error({slurm, {write, File, Why}}) ->
    io_lib:format("cannot write the spec ~ts: ~ts", [File, file:format_error(Why)]);
format_error({slurm, {srun, Host, timeout}}) ->
    io_lib:format("srun for ~ts: the VM did not answer in time and the step was stopped", [Host]);
format_error({slurm, {srun, Host, {exited, Output}}}) ->
    io_lib:format("srun for ~ts exited before the VM answered: ~ts", [Host, string:trim(Output)]).

%% @doc The switches of the running cluster, by `scontrol show topology' (the cluster
%% of SLURM's configuration: `SLURM_CONF' or the system's), killed after `Timeout'
%% ms. `{ok, []}' when SLURM has no tree topology.
-spec scontrol_topology(pos_integer()) -> {ok, [switch()]} | {error, error_reason()}.
scontrol_topology(Timeout) ->
    case os:find_executable("scontrol") of
        false ->
            {error, {slurm, {scontrol, "scontrol is not on the PATH"}}};
        Scontrol ->
            case run(Scontrol, ["show", "topology"], Timeout) of
                {ok, Output} -> parse_topology(Output);
                {error, Why} -> {error, {slurm, {scontrol, "'scontrol show topology' failed (" ++ Why ++ ")"}}}
            end
    end.

%%--------------------------------------------------------------------
%% Internal functions: the allocation

variable(Name, false, _Parse) -> {error, {slurm, {variable, Name, missing}}};
variable(Name, Value, Parse) ->
    case string:trim(Value) of
        "" -> {error, {slurm, {variable, Name, empty}}};
        Trimmed ->
            case Parse(Trimmed) of
                {ok, _} = Ok -> Ok;
                {error, {hostlist, _} = Why} -> {error, {slurm, {variable, Name, {bad, Trimmed, Why}}}};
                {error, {_, Why}} -> {error, {slurm, {variable, Name, {bad, Trimmed, Why}}}}
            end
    end.

hosts(Text) ->
    case terrain_lab_hostlist:expand(Text) of
        {ok, Hosts} ->
            case Hosts -- lists:usort(Hosts) of
                [] -> {ok, Hosts};
                [Dup | _] -> {error, {Text, {duplicate, Dup}}}
            end;
        {error, _} = Error ->
            Error
    end.

tasks_item(Item) ->
    case re:run(Item, "^([0-9]+)(?:\\(x([0-9]+)\\))?$", [{capture, all_but_first, list}]) of
        {match, [N]} -> [positive(N, Item)];
        {match, [N, R]} -> lists:duplicate(positive(R, Item), positive(N, Item));
        nomatch -> throw({bad_item, Item})
    end.

positive(Digits, Item) ->
    case list_to_integer(Digits) of
        0 -> throw({zero, Item});
        N when N > 100000 -> throw({too_large, Item});
        N -> N
    end.

why({bad_item, Item}) -> io_lib:format("'~ts' is not N or N(xR)", [Item]);
why({zero, Item}) -> io_lib:format("'~ts' counts zero", [Item]);
why({too_large, Item}) -> io_lib:format("'~ts' is too large", [Item]);
why({duplicate, Host}) -> io_lib:format("~ts is listed twice", [Host]);
why(Other) -> io_lib:format("~0tp", [Other]).

%%--------------------------------------------------------------------
%% Internal functions: the topology

switch(N, Line) ->
    Fields = [case binary:split(F, <<"=">>) of
                  [K, V] when V =/= <<>> -> {canonical_key(unicode:characters_to_list(K)), V};
                  _ -> throw({N, shown(Line)})
              end || F <- binary:split(Line, [<<" ">>, <<"\t">>], [global, trim_all])],
    Expand = fun(Key) ->
                     case proplists:get_value(Key, Fields) of
                         undefined -> [];
                         Value -> case terrain_lab_hostlist:expand(unicode:characters_to_list(Value)) of
                                      {ok, Names} -> Names;
                                      {error, {hostlist, {_, _, {too_many, _}}} = Why} -> throw({N, shown(Line), Why});
                                      {error, _} -> throw({N, shown(Line)})
                                  end
                     end
             end,
    Level = case string:to_integer(proplists:get_value("Level", Fields, <<"0">>)) of
                {L, <<>>} when L >= 0 -> L;
                _ -> throw({N, shown(Line)})
            end,
    Name = proplists:get_value("SwitchName", Fields),
    Length = string:length(Name),
    _ = Length > ?MAX_NAME andalso throw({N, shown(Line), {long_name, Length}}),
    case {Expand("Nodes"), Expand("Switches")} of
        {[], []} -> throw({N, shown(Line)});
        {Nodes, Switches} -> #{name => unicode:characters_to_list(Name), level => Level, nodes => Nodes,
                               switches => Switches}
    end.

%% A line as an error shows it: at most 80 characters.
shown(Line) ->
    case string:length(Line) > 80 of
        true -> unicode:characters_to_list([string:slice(Line, 0, 77), "..."]);
        false -> unicode:characters_to_list(Line)
    end.

canonical_key(Key) ->
    Known = ["SwitchName", "Switches", "Nodes", "Level", "LinkSpeed"],
    case [K || K <- Known, string:lowercase(K) =:= string:lowercase(Key)] of
        [K] -> K;
        [] -> Key
    end.

%% The parent of each switch that has one, after checking in one pass over the
%% switches and their lists that they form a tree (a forest): every name once, every
%% child defined and under one parent, no loop, and every host's switches on one path
%% from a root. Throws `{graph, Why}'.
check_tree(Numbered) ->
    Lines = lists:foldl(fun({N, #{name := Name}}, Acc) ->
                                case Acc of
                                    #{Name := First} -> throw({graph, {duplicate_switch, Name, First, N}});
                                    #{} -> Acc#{Name => N}
                                end
                        end, #{}, Numbered),
    Parents = lists:foldl(
                fun({_, #{name := Parent, switches := Cs}}, Acc0) ->
                        lists:foldl(fun(C, _) when C =:= Parent ->
                                            throw({graph, {switch_loop, [C, C]}});
                                       (C, _) when not is_map_key(C, Lines) ->
                                            throw({graph, {unknown_switch, Parent, C}});
                                       (C, Acc) when is_map_key(C, Acc) ->
                                            throw({graph, {two_parents, C, maps:get(C, Acc), Parent}});
                                       (C, Acc) ->
                                            Acc#{C => Parent}
                                    end, Acc0, Cs)
                end, #{}, Numbered),
    Depths = depths([S || {_, S} <- Numbered], Parents),
    check_hosts([S || {_, S} <- Numbered], Parents, Depths),
    Parents.

%% The depth of each switch below its root; a switch that no root reaches is on a
%% loop (each switch has one parent at most), which is named.
depths(Switches, Parents) ->
    Children = maps:groups_from_list(fun({_, P}) -> P end, fun({C, _}) -> C end, maps:to_list(Parents)),
    Roots = [Name || #{name := Name} <- Switches, not is_map_key(Name, Parents)],
    Depths = walk_down([{R, 0} || R <- Roots], Children, #{}),
    case [Name || #{name := Name} <- Switches, not is_map_key(Name, Depths)] of
        [] -> Depths;
        [Stuck | _] -> throw({graph, {switch_loop, loop(Stuck, Parents, [])}})
    end.

walk_down([], _Children, Depths) ->
    Depths;
walk_down([{Name, D} | Rest], Children, Depths) ->
    walk_down([{C, D + 1} || C <- maps:get(Name, Children, [])] ++ Rest, Children, Depths#{Name => D}).

%% Up the parents from a switch of a loop until a switch comes again: the loop,
%% from that switch round to it.
loop(Name, Parents, Seen) ->
    case lists:member(Name, Seen) of
        true ->
            Cycle = lists:reverse(lists:dropwhile(fun(N) -> N =/= Name end, lists:reverse(Seen))),
            lists:reverse([Name | Cycle]);
        false ->
            loop(maps:get(Name, Parents), Parents, [Name | Seen])
    end.

%% Every switch that lists a host must be its lowest switch or above it (SLURM's
%% upper switches may list the hosts below them).
check_hosts(Switches, Parents, Depths) ->
    Listed = maps:groups_from_list(fun({H, _}) -> H end, fun({_, S}) -> S end,
                                   [{H, Name} || #{name := Name, nodes := Ns} <- Switches, H <- Ns]),
    maps:foreach(fun(_Host, [_]) -> ok;
                    (Host, Names) ->
                         [Low | Higher] = lists:sort([{-maps:get(N, Depths), N} || N <- Names]),
                         Path = ancestors(element(2, Low), Parents, #{}),
                         [throw({graph, {host_twice, Host, element(2, Low), N}})
                          || {_, N} <- Higher, not is_map_key(N, Path)]
                 end, Listed).

ancestors(Name, Parents, Acc) ->
    case Parents of
        #{Name := Parent} -> ancestors(Parent, Parents, Acc#{Parent => true});
        #{} -> Acc
    end.

%% Levels as SLURM computes them when topology.conf gives none (scontrol prints
%% them): 0 for a switch without child switches, else one more than its highest
%% child; the switches form a tree (check_tree/1), so one pass from the leaves up.
with_levels(Switches, Parents) ->
    ByName = maps:from_list([{Name, S} || #{name := Name} = S <- Switches]),
    Level = fun Level(#{switches := Cs}, Acc0) ->
                    lists:foldl(fun(C, {Max, Acc}) ->
                                        {L, Acc1} = Level(maps:get(C, ByName), Acc),
                                        {max(Max, L + 1), Acc1#{C => L}}
                                end, {0, Acc0}, Cs)
            end,
    Levels = lists:foldl(fun(#{name := Name} = S, Acc) when not is_map_key(Name, Parents) ->
                                 {L, Acc1} = Level(S, Acc),
                                 Acc1#{Name => L};
                            (_, Acc) ->
                                 Acc
                         end, #{}, Switches),
    [S#{level := maps:get(Name, Levels)} || #{name := Name} = S <- Switches].

roots(Switches) ->
    Children = maps:from_list([{C, true} || #{switches := Cs} <- Switches, C <- Cs]),
    [S || #{name := Name} = S <- Switches, not is_map_key(Name, Children)].

%% The switch each host belongs to: the lowest-level switch that lists it.
homes(Switches) ->
    lists:foldl(fun({_, Name, Host}, Acc) -> Acc#{Host => Name} end, #{},
                lists:reverse(lists:sort([{L, Name, H} || #{name := Name, level := L, nodes := Ns} <- Switches,
                                                          H <- Ns]))).

%% A switch as a group: its child switches (those above allocated hosts) and its own
%% hosts; [] when no allocated host is below it. `Seen' guards against a cycle in a
%% broken topology.
switch_group(#{name := Name, switches := Cs}, ByName, Hosts, Home, Seen) ->
    case lists:member(Name, Seen) of
        true -> [];
        false ->
            Sub = lists:append([switch_group(maps:get(C, ByName), ByName, Hosts, Home, [Name | Seen])
                                || C <- Cs, is_map_key(C, ByName)]),
            Own = [terrain_lab_hosts:host_group(H, C) || {H, C} <- Hosts, maps:get(H, Home) =:= Name],
            case Sub ++ Own of
                [] -> [];
                Children -> [{group, list_to_atom(Name), #{}, Children}]
            end
    end.

%% `scontrol show topology' when scontrol is on the PATH and prints switches; []
%% otherwise, with the advice to probe.
topology(Progress, Count) ->
    Fallback = fun(Why) ->
                       Progress(io_lib:format(
                                  "~ts: the ~b nodes form one group 'allocation'. To find the allocation's real "
                                  "structure, run 'terrain probe' and then 'terrain topology RUN/latency.json' on "
                                  "its latency matrix (RELEASE D3.5, section 4.4.4)~n", [Why, Count])),
                       []
               end,
    case scontrol_topology(?SCONTROL_TIMEOUT) of
        {ok, []} ->
            Fallback("'scontrol show topology' lists no switch");
        {ok, Switches} ->
            Progress(io_lib:format("groups from 'scontrol show topology': ~b switch~ts~n",
                                   [length(Switches), case Switches of [_] -> ""; _ -> "es" end])),
            Switches;
        {error, {slurm, {scontrol, Why}}} ->
            Fallback(Why);
        {error, Why} ->
            Fallback(format_error(Why))
    end.

write_spec(Terms, SpecFile) ->
    case terrain_lab_spec:from_terms(Terms, SpecFile) of
        {ok, _} ->
            Text = ["%% Generated by 'terrain up --slurm': one group per switch, one per host.\n",
                    [io_lib:format("~tp.~n", [T]) || T <- Terms]],
            case file:write_file(SpecFile, Text) of
                ok -> ok;
                {error, Why} -> {error, {slurm, {write, SpecFile, Why}}}
            end;
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Internal functions: processes

launcher(Progress) ->
    case os:find_executable("srun") of
        false ->
            Progress("srun is not on the PATH: starting the VMs over ssh\n"),
            ssh;
        Srun ->
            Progress(io_lib:format("starting the VMs with ~ts (one job step per VM)~n", [Srun])),
            srun
    end.

%% Runs a program with a deadline; its output, or why not.
run(Program, Args, Timeout) ->
    case terrain_lab_os:run(Program, Args, #{timeout => Timeout}) of
        {ok, 0, Output} ->
            {ok, unicode:characters_to_list(Output)};
        {ok, Code, Output} ->
            Said = string:trim(unicode:characters_to_list(Output)),
            {error, lists:flatten(io_lib:format("exit status ~b: ~ts", [Code, Said]))};
        {error, {run, _, {timeout, _, _}}} ->
            {error, "no answer in time; stopped"};
        {error, Reason} ->
            {error, lists:flatten(terrain_lab_os:format_error(Reason))}
    end.

%% Created empty with mode 0600 first, then written.
write_private(File, Content) ->
    {ok, Fd} = file:open(File, [write, raw, binary]),
    try
        ok = file:change_mode(File, 8#600),
        ok = file:write(Fd, Content)
    after
        file:close(Fd)
    end.

srun_file(Dir, Name) ->
    filename:join([Dir, "nodes", atom_to_list(Name) ++ ".srun"]).
