%% @private
%% @doc `terrain testbed': hosts on this machine for anything multi-host (docs/TESTBED.md).
%%
%% `up' makes N hosts `P1'..`PN' (P the prefix): each a network namespace of that
%% name joined by a veth pair to a bridge of this machine, with its own address on a
%% /24 of 10.214.0.0/16 that no interface here uses yet, `lo' up, its own sshd (a
%% generated host key, an authorised generated key) and its own epmd. Its directory
%% (`--dir', default /tmp/terrain-testbed-P) holds everything else: `ssh_config'
%% (`Host P1' with `HostName ADDRESS', the key, the known hosts), `hosts' (a hosts
%% file for `terrain up --hosts'), `inetrc' (the hosts' names for Erlang's resolver,
%% exported as `ERL_INETRC' by `terrain testbed env': every host here shares
%% /etc/hosts, which is not touched) and `testbed.json', the record of every name
%% and process made, which `status' and `down' read.
%%
%% The hosts are joined by switches (`--topology': `AxB[xC...]', `N,M,...' or a
%% topology.conf file; default one switch), and traffic between two hosts is shaped
%% at the sender by the kernel's `htb' to the link speed of their lowest common
%% switch's level (`--rates', Mbit/s per level, default 1000,100,10): this kernel has
%% no `netem', so the structure shows as transfer time, which `terrain probe
%% --payload BYTES' measures (docs/TESTBED.md, "Emulated switches").
%%
%% With `--slurm' it also runs SLURM (Debian's 22.05): munged with its own key and
%% socket in the directory (the machine's munge is left alone), slurmctld in this
%% namespace as `SlurmctldHost=HOSTNAME(BRIDGE ADDRESS)' on a free port, one slurmd
%% per host (`slurmd -N P1' started in the host's namespace with `nsenter --net',
%% which keeps /sys and so the cgroup mount that slurmd reads), slurm.conf and
%% topology.conf (`topology/tree') written from the switches. Unix socket paths are
%% limited to 108 bytes, so munged's socket and the slurmd spool (slurmstepd's
%% sockets) go to /run/terrain-testbed-P. `up' returns when `sinfo' shows every
%% node idle.
%%
%% `down' stops the recorded daemons (only while each pid is still the program it
%% was), ends every process left in the hosts' namespaces (a VM a user left there),
%% deletes the namespaces and the bridge, and removes the two directories: exactly
%% what `up' made. A failed `up' does the same before it returns its error.
-module(terrain_lab_testbed).

-include_lib("terrain_json/include/terrain_formats.hrl").

%% API
-export([up/1,
         down/2,
         status/1,
         env_lines/1,
         read/1,
         default_dir/1,
         switches/2,
         rates/2,
         host_pids/1,
         available/1,
         format_error/1]).

%% exports_not_used: the parts of up/1 tested on their own (terrain_lab_testbed_tests),
%% and what the test suites read of a testbed.
-ignore_xref([{switches, 2}, {rates, 2}, {host_pids, 1}, {available, 1}, {read, 1}]).

-export_type([options/0, testbed/0, error_reason/0]).

-type options() :: #{hosts := pos_integer() | undefined,   % N, or from the topology
                     prefix := string(),                   % host names P1..PN
                     dir := file:filename(),
                     slurm := boolean(),
                     topology := string() | undefined,     % AxB.., N,M,.. or a topology.conf file
                     rates := [pos_integer()],              % Mbit/s per switch level, [] = default
                     progress := fun((iodata()) -> ok)}.

%% What testbed.json holds, decoded (binary keys and strings).
-type testbed() :: #{binary() => term()}.

-type error_reason() ::
        {testbed, {usage, string()}}
      | {testbed, not_root}
      | {testbed, {missing, [string()]}}
      | {testbed, {exists, file:filename()}}
      | {testbed, {namespace_exists, string()}}
      | {testbed, {not_up, file:filename()}}
      | {testbed, no_subnet}
      | {testbed, {topology, file:filename(), term()}}
      | {testbed, {topology_hosts, [string()], [string()]}}
      | {testbed, {command, string(), integer() | timeout, string()}}
      | {testbed, {file, file:filename(), file:posix() | badarg}}
      | {testbed, {run, terrain_lab_os:error_reason()}}
      | {testbed, {slurm_not_ready, [string()]}}.

-define(COMMAND_MS, 15000).
-define(READY_MS, 30000).
-define(STOP_MS, 5000).
-define(NET, "10.214").
-define(PORTS, lists:seq(16817, 16899, 2)).   % slurmctld's port: the first free one
-define(DEFAULT_RATES, [1000, 100, 10]).
-define(HOST_PROGRAMS, ["ip", "tc", "nsenter", "ssh", "ssh-keygen", "/usr/sbin/sshd", "epmd"]).
-define(SLURM_PROGRAMS, ["munged", "slurmctld", "slurmd", "sinfo", "scontrol"]).

%%--------------------------------------------------------------------
%% API

%% @doc The directory of the testbed of prefix `Prefix' when `--dir' is not given.
-spec default_dir(string()) -> file:filename().
default_dir(Prefix) ->
    "/tmp/terrain-testbed-" ++ Prefix.

%% @doc `ok', or why this machine cannot make a testbed (`Slurm': with SLURM).
-spec available(boolean()) -> ok | {error, error_reason()}.
available(Slurm) ->
    Programs = ?HOST_PROGRAMS ++ [P || Slurm, P <- ?SLURM_PROGRAMS],
    case {output("id", ["-u"]), [P || P <- Programs, find(P) =:= false]} of
        {"0\n", []} -> ok;
        {"0\n", Missing} -> {error, {testbed, {missing, Missing}}};
        _ -> {error, {testbed, not_root}}
    end.

%% @doc Makes the testbed; returns its record. On a failure, what was made is
%% removed again.
-spec up(options()) -> {ok, testbed()} | {error, error_reason()}.
up(#{prefix := Prefix, dir := Dir0, slurm := Slurm, progress := Progress} = Options) ->
    Dir = filename:absname(Dir0),
    %% usage first (a bad option is reported before the machine is looked at)
    Steps = [fun(_) -> check_prefix(Prefix) end,
             fun(_) -> host_count(Options) end,
             fun(Count) -> topology(Options, Prefix, Count) end,
             fun(Switches) ->
                     case available(Slurm) of
                         ok -> {ok, Switches};
                         {error, _} = Error -> Error
                     end
             end,
             fun(_) -> case filelib:is_regular(record_file(Dir)) of
                           true -> {error, {testbed, {exists, Dir}}};
                           false -> ok
                       end end,
             fun(Switches) ->
                     Hosts = lists:usort([H || #{nodes := Ns} <- Switches, H <- Ns]),
                     case [H || H <- Hosts, lists:member(H, existing_namespaces())] of
                         [] -> {ok, Switches};
                         [NS | _] -> {error, {testbed, {namespace_exists, NS}}}
                     end
             end,
             fun(Switches) ->
                     case free_subnet(Prefix) of
                         {ok, Net} -> {ok, {Switches, Net}};
                         {error, _} = Error -> Error
                     end
             end,
             fun({Switches, Net}) ->
                     Rates = rates(maps:get(rates, Options, []), lists:max([L || #{level := L} <- Switches])),
                     make(Dir, Prefix, Switches, Net, Rates, Slurm, Progress)
             end],
    terrain_lab_steps:run(Steps, none).

%% @doc Removes the testbed recorded in `Dir': daemons, the processes left in its
%% namespaces, the namespaces, the bridge, the directory. Returns one line per thing
%% removed.
-spec down(file:filename(), fun((iodata()) -> ok)) -> {ok, [string()]} | {error, error_reason()}.
down(Dir0, Progress) ->
    Dir = filename:absname(Dir0),
    case read(Dir) of
        {ok, Record} -> {ok, remove(Dir, Record, Progress)};
        {error, _} = Error -> Error
    end.

%% @doc The record of the testbed in `Dir' and the state of each of its parts.
-spec status(file:filename()) -> {ok, testbed(), [{string(), string()}]} | {error, error_reason()}.
status(Dir0) ->
    Dir = filename:absname(Dir0),
    case read(Dir) of
        {ok, #{<<"hosts">> := Hosts} = Record} ->
            Namespaces = existing_namespaces(),
            HostLines = [{binary_to_list(Name),
                          case lists:member(binary_to_list(Name), Namespaces) of
                              false -> "namespace gone";
                              true ->
                                  Pids = host_pids(binary_to_list(Name)),
                                  lists:flatten(io_lib:format("~ts  ~ts", [Address, string:join([C || {_, C} <- Pids], " ")]))
                          end} || #{<<"name">> := Name, <<"address">> := Address} <- Hosts],
            Daemons = [{binary_to_list(What), case ours(binary_to_list(Pid), comm(What)) of
                                                  true -> "running (pid " ++ binary_to_list(Pid) ++ ")";
                                                  false -> "not running"
                                              end}
                       || {What, Pid} <- lists:sort(maps:to_list(maps:get(<<"daemons">>, Record, #{})))],
            Slurm = case maps:get(<<"slurm">>, Record, false) of
                        true -> [{"sinfo", string:trim(element(2, sinfo(Dir, "%N %T")))}];
                        false -> []
                    end,
            {ok, Record, HostLines ++ Daemons ++ Slurm};
        {error, _} = Error ->
            Error
    end.

%% @doc The shell lines that point SLURM's commands, Erlang's resolver and ssh at
%% the testbed in `Dir'.
-spec env_lines(file:filename()) -> {ok, iolist()} | {error, error_reason()}.
env_lines(Dir0) ->
    Dir = filename:absname(Dir0),
    case read(Dir) of
        {ok, Record} ->
            Slurm = case maps:get(<<"slurm">>, Record, false) of
                        true -> ["export SLURM_CONF=", quote(filename:join(Dir, "slurm.conf")), "\n"];
                        false -> []
                    end,
            {ok, [Slurm,
                  "export ERL_INETRC=", quote(filename:join(Dir, "inetrc")), "\n",
                  "export TERRAIN_TESTBED=", quote(Dir), "\n",
                  "# ssh: terrain up --hosts ", filename:join(Dir, "hosts"), " --ssh-option ConfigFile=",
                  filename:join(Dir, "ssh_config"), "\n"]};
        {error, _} = Error ->
            Error
    end.

%% @doc The record `Dir/testbed.json'.
-spec read(file:filename()) -> {ok, testbed()} | {error, error_reason()}.
read(Dir) ->
    case terrain_json:read_file(record_file(Dir)) of
        {ok, #{<<"format">> := ?TERRAIN_FORMAT_TESTBED} = Record} -> {ok, Record};
        _ -> {error, {testbed, {not_up, Dir}}}
    end.

%% @doc The switches of the testbed: from a topology.conf file (its hosts must be
%% `Prefix'1..N), or from a SPEC: `N' (one switch of N hosts), `A,B,...' (switches
%% of A, B, ... hosts under a switch `root'), `AxBx...xK' (A switches under `root',
%% each with B switches, ..., the lowest with K hosts). Hosts are numbered in order.
-spec switches(string(), string()) -> {ok, [terrain_lab_slurm:switch()]} | {error, error_reason()}.
switches(Spec, Prefix) ->
    case filelib:is_regular(Spec) of
        true ->
            case file:read_file(Spec) of
                {ok, Bin} ->
                    case terrain_lab_slurm:parse_topology(unicode:characters_to_list(Bin)) of
                        {ok, []} -> {error, {testbed, {topology, Spec, no_switch}}};
                        {ok, Switches} -> {ok, Switches};
                        {error, Why} -> {error, {testbed, {topology, Spec, Why}}}
                    end;
                {error, Why} ->
                    {error, {testbed, {topology, Spec, Why}}}
            end;
        false ->
            spec_switches(Spec, Prefix)
    end.

%% @doc The link speed of each switch level, Mbit/s: `Given' (level 0 first), each
%% level beyond it a tenth of the one below (at least 1).
-spec rates([pos_integer()], non_neg_integer()) -> [pos_integer()].
rates([], MaxLevel) ->
    rates(?DEFAULT_RATES, MaxLevel);
rates(Given, MaxLevel) ->
    lists:sublist(Given ++ extend(lists:last(Given), MaxLevel + 1 - length(Given)), MaxLevel + 1).

%% @doc `[{Pid, Command}]' of the processes in the namespace `NS'.
-spec host_pids(string()) -> [{string(), string()}].
host_pids(NS) ->
    [{P, string:trim(case file:read_file("/proc/" ++ P ++ "/comm") of
                         {ok, C} -> binary_to_list(C);
                         {error, _} -> ""
                     end)} || P <- netns_pids(NS)].

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({testbed, {usage, Text}}) ->
    Text;
format_error({testbed, not_root}) ->
    "a testbed makes network namespaces and runs daemons: run 'terrain testbed' as root";
format_error({testbed, {missing, Programs}}) ->
    io_lib:format("the testbed needs ~ts, not found on the PATH (Debian: iproute2 openssh-server openssh-client "
                  "erlang; with --slurm also munge slurmctld slurmd slurm-client)", [lists:join(", ", Programs)]);
format_error({testbed, {exists, Dir}}) ->
    io_lib:format("a testbed is already up in ~ts ('terrain testbed down --dir ~ts' first, or give another "
                  "--prefix or --dir)", [Dir, Dir]);
format_error({testbed, {namespace_exists, NS}}) ->
    io_lib:format("a network namespace ~ts exists already (not this testbed's): choose another --prefix", [NS]);
format_error({testbed, {not_up, Dir}}) ->
    io_lib:format("no testbed is recorded in ~ts (no testbed.json); start one with 'terrain testbed up'", [Dir]);
format_error({testbed, no_subnet}) ->
    "every /24 of 10.214.0.0/16 is in use on this machine: remove a testbed first";
format_error({testbed, {topology, File, no_switch}}) ->
    io_lib:format("~ts lists no switch", [File]);
format_error({testbed, {topology, Spec, {bad_spec, Why}}}) ->
    io_lib:format("--topology ~ts: ~ts (expected N, A,B,... or AxB[x...], or a topology.conf file)", [Spec, Why]);
format_error({testbed, {topology, File, {slurm, _} = Why}}) ->
    io_lib:format("~ts: ~ts", [File, terrain_lab_slurm:format_error(Why)]);
format_error({testbed, {topology, File, Why}}) ->
    io_lib:format("cannot read ~ts: ~ts", [File, file:format_error(Why)]);
format_error({testbed, {topology_hosts, Expected, Found}}) ->
    io_lib:format("the topology's nodes must be the testbed's hosts ~ts; it lists ~ts",
                  [lists:join(",", Expected), lists:join(",", Found)]);
format_error({testbed, {command, Command, timeout, Output}}) ->
    io_lib:format("'~ts' did not finish in time: ~ts", [Command, string:trim(Output)]);
format_error({testbed, {command, Command, Code, Output}}) ->
    io_lib:format("'~ts' failed with exit status ~b: ~ts", [Command, Code, string:trim(Output)]);
format_error({testbed, {file, Path, Reason}}) ->
    io_lib:format("cannot write ~ts: ~ts", [Path, file:format_error(Reason)]);
format_error({testbed, {run, Reason}}) ->
    terrain_lab_os:format_error(Reason);
format_error({testbed, {slurm_not_ready, Lines}}) ->
    io_lib:format("SLURM's nodes were not all idle within ~b s: ~ts (see the logs in the testbed's log/)",
                  [?READY_MS div 1000, lists:join("; ", Lines)]).

%%--------------------------------------------------------------------
%% Internal functions: options

check_prefix(Prefix) ->
    case re:run(Prefix, "^[a-z][a-z0-9]{0,7}$") of
        {match, _} -> ok;
        nomatch -> {error, {testbed, {usage, "--prefix: 1 to 8 lower-case letters and digits, a letter first (host "
                                             "names PREFIX1..N are network namespace and SLURM node names)"}}}
    end.

host_count(#{hosts := undefined, topology := undefined}) ->
    {error, {testbed, {usage, "give --hosts N, --topology, or both"}}};
host_count(#{hosts := N}) when is_integer(N), N > 250 ->
    {error, {testbed, {usage, "--hosts: at most 250 (one /24)"}}};
host_count(#{hosts := N}) ->
    {ok, N}.

topology(#{topology := undefined}, Prefix, Count) ->
    spec_switches(integer_to_list(Count), Prefix);
topology(#{topology := Spec}, Prefix, Count) ->
    case switches(Spec, Prefix) of
        {ok, Switches} ->
            Hosts = lists:usort([H || #{nodes := Ns} <- Switches, H <- Ns]),
            N = case Count of undefined -> length(Hosts); _ -> Count end,
            Expected = lists:sort([Prefix ++ integer_to_list(I) || I <- lists:seq(1, N)]),
            case Hosts of
                Expected -> {ok, Switches};
                _ -> {error, {testbed, {topology_hosts, Expected, Hosts}}}
            end;
        {error, _} = Error ->
            Error
    end.

spec_switches(Spec, Prefix) ->
    Error = fun(Why) -> {error, {testbed, {topology, Spec, {bad_spec, Why}}}} end,
    Ints = fun(Parts) -> [case string:to_integer(P) of
                              {I, ""} when I >= 1 -> I;
                              _ -> throw(P)
                          end || P <- Parts]
           end,
    Host = fun(I) -> Prefix ++ integer_to_list(I) end,
    Switch = fun(Name, Level, Nodes, Switches) ->
                     #{name => Name, level => Level, nodes => Nodes, switches => Switches}
             end,
    try
        case {string:split(Spec, ",", all), string:split(Spec, "x", all)} of
            {[One], [One]} ->
                [N] = Ints([One]),
                {ok, [Switch("s1", 0, [Host(I) || I <- lists:seq(1, N)], [])]};
            {[_, _ | _] = Parts, _} ->
                {Leaves, _} = lists:foldl(
                                fun({K, Size}, {Acc, First}) ->
                                        {Acc ++ [Switch("s" ++ integer_to_list(K), 0,
                                                        [Host(I) || I <- lists:seq(First, First + Size - 1)], [])],
                                         First + Size}
                                end, {[], 1}, lists:enumerate(Ints(Parts))),
                {ok, Leaves ++ [Switch("root", 1, [], [N || #{name := N} <- Leaves])]};
            {_, [_, _ | _] = Parts} ->
                Fanouts = Ints(Parts),
                {Switches, _} = nested(Fanouts, "s", length(Fanouts) - 1, 1, Host),
                Top = [S || #{level := L} = S <- Switches, L =:= length(Fanouts) - 2],
                {ok, Switches ++ [Switch("root", length(Fanouts) - 1, [], [N || #{name := N} <- Top])]}
        end
    catch
        throw:Part -> Error(io_lib:format("'~ts' is not a positive integer", [Part]))
    end.

%% The switches below one switch named Name, for fan-outs [A | Rest]: A children,
%% each a switch (Rest has more than one entry) or a host. Returns the switches of
%% the level below Name (and theirs) and the next host number.
nested([_], _Name, _Level, Next, _Host) ->
    {[], Next};
nested([A | Rest], Name, Level, Next, Host) ->
    lists:foldl(fun(K, {Acc, N}) ->
                        Child = Name ++ case Name of "s" -> ""; _ -> "_" end ++ integer_to_list(K),
                        case Rest of
                            [Count] ->
                                Nodes = [Host(I) || I <- lists:seq(N, N + Count - 1)],
                                {Acc ++ [#{name => Child, level => 0, nodes => Nodes, switches => []}], N + Count};
                            _ ->
                                {Below, N1} = nested(Rest, Child, Level - 1, N, Host),
                                Direct = [C || #{name := C, level := L} <- Below, L =:= Level - 2],
                                {Acc ++ Below ++ [#{name => Child, level => Level - 1, nodes => [], switches => Direct}],
                                 N1}
                        end
                end, {[], Next}, lists:seq(1, A)).

extend(_Last, N) when N =< 0 -> [];
extend(Last, N) -> Next = max(1, Last div 10), [Next | extend(Next, N - 1)].

%%--------------------------------------------------------------------
%% Internal functions: making it

make(Dir, Prefix, Switches, Net, Rates, Slurm, Progress) ->
    T0 = erlang:monotonic_time(millisecond),
    Names = lists:sort(fun(A, B) -> host_number(A, Prefix) =< host_number(B, Prefix) end,
                       lists:usort([H || #{nodes := Ns} <- Switches, H <- Ns])),
    Hosts = [#{name => list_to_binary(H), address => list_to_binary(Net ++ "." ++ integer_to_list(I + 1)),
               veth => list_to_binary("tv" ++ Prefix ++ integer_to_list(I))}
             || {I, H} <- lists:enumerate(Names)],
    Record0 = #{format => ?TERRAIN_FORMAT_TESTBED, prefix => list_to_binary(Prefix), dir => list_to_binary(Dir),
                bridge => list_to_binary("tbr" ++ Prefix), bridge_address => list_to_binary(Net ++ ".1"),
                hosts => Hosts, slurm => Slurm, rates_mbit => Rates,
                switches => [#{name => list_to_binary(N), level => L, nodes => [list_to_binary(H) || H <- Ns],
                               switches => [list_to_binary(C) || C <- Cs]}
                             || #{name := N, level := L, nodes := Ns, switches := Cs} <- Switches],
                daemons => #{}},
    try
        ok = ensure_dir(filename:join(Dir, "x")),
        ok = change_mode(Dir, 8#700),
        %% recorded before anything is made, so that down (or a failure here) finds it all
        ok = write_record(Dir, Record0),
        Bridge = binary_to_list(maps:get(bridge, Record0)),
        sh(["ip link add ", Bridge, " type bridge && ip addr add ", Net, ".1/24 dev ", Bridge,
            " && ip link set ", Bridge, " up"]),
        ok = ensure_dir("/run/sshd/x"),
        Key = filename:join(Dir, "id_testbed"),
        sh(["ssh-keygen -q -t ed25519 -N '' -C terrain-testbed -f ", quote(Key)]),
        {ok, Pub} = file:read_file(Key ++ ".pub"),
        ok = write_file(filename:join(Dir, "authorized_keys"), Pub),
        [make_host(Dir, Bridge, H) || H <- Hosts],
        Progress(io_lib:format("~b hosts ~ts..~ts on ~ts.0/24 (bridge ~ts)~n",
                               [length(Hosts), hd(Names), lists:last(Names), Net, Bridge])),
        shape(Hosts, Switches, Rates),
        Progress(io_lib:format("links shaped by switch level: ~ts~n",
                               [lists:join(", ", [io_lib:format("level ~b ~b Mbit/s", [L, R])
                                                 || {L, R} <- lists:enumerate(0, Rates)])])),
        write_client_files(Dir, Hosts),
        [await_port(binary_to_list(A), 22) || #{address := A} <- Hosts],
        Daemons = case Slurm of
                      true -> start_slurm(Dir, Prefix, Hosts, Switches, Net, Progress);
                      false -> #{}
                  end,
        {ok, Written} = read(Dir),
        ok = write_record(Dir, Written#{<<"daemons">> => Daemons}),
        Progress(io_lib:format("testbed up in ~.1f s; its directory: ~ts~n",
                               [(erlang:monotonic_time(millisecond) - T0) / 1000, Dir])),
        read(Dir)
    catch
        throw:{testbed, _} = Reason ->
            _ = remove(Dir, recorded(Dir, Record0), fun(_) -> ok end),
            {error, Reason};
        Class:Reason:Stack ->
            _ = remove(Dir, recorded(Dir, Record0), fun(_) -> ok end),
            erlang:raise(Class, Reason, Stack)
    end.

%% What the record says was made; when even the record could not be written,
%% nothing was made but the directory.
recorded(Dir, #{prefix := Prefix}) ->
    case read(Dir) of
        {ok, Record} -> Record;
        {error, _} -> #{<<"prefix">> => Prefix}
    end.

host_number(Host, Prefix) ->
    list_to_integer(lists:nthtail(length(Prefix), Host)).

make_host(Dir, Bridge, #{name := NameB, address := AddressB, veth := VethB}) ->
    [NS, Address, Veth] = [binary_to_list(B) || B <- [NameB, AddressB, VethB]],
    sh(["ip netns add ", NS,
        " && ip link add ", Veth, " type veth peer name eth0 netns ", NS,
        " && ip link set ", Veth, " master ", Bridge, " up",
        " && ip -n ", NS, " addr add ", Address, "/24 dev eth0",
        " && ip -n ", NS, " link set eth0 up && ip -n ", NS, " link set lo up"]),
    HostDir = filename:join([Dir, "hosts.d", NS]),
    ok = ensure_dir(filename:join(HostDir, "x")),
    HostKey = filename:join(HostDir, "host_key"),
    sh(["ssh-keygen -q -t ed25519 -N '' -C ", NS, " -f ", quote(HostKey)]),
    Config = filename:join(HostDir, "sshd_config"),
    ok = write_file(Config, ["ListenAddress ", Address, "\nPort 22\nHostKey ", HostKey,
                                  "\nAuthorizedKeysFile ", filename:join(Dir, "authorized_keys"),
                                  "\nPidFile ", filename:join(HostDir, "sshd.pid"),
                                  "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                                  "PermitRootLogin prohibit-password\nMaxStartups 100\nAcceptEnv LANG LC_*\n"]),
    sh(["ip netns exec ", NS, " /usr/sbin/sshd -f ", quote(Config), " -E ", quote(filename:join(HostDir, "sshd.log")),
        " && ip netns exec ", NS, " epmd -daemon"]).

%% At each host, traffic to each other host leaves through the htb class of their
%% lowest common switch's level; other traffic (this machine, slurmctld) is not
%% shaped (htb's default 0: unclassified packets pass directly).
shape(Hosts, Switches, Rates) ->
    Address = maps:from_list([{binary_to_list(N), binary_to_list(A)} || #{name := N, address := A} <- Hosts]),
    lists:foreach(
      fun(#{name := NameB}) ->
              Name = binary_to_list(NameB),
              Classes = [["tc class add dev eth0 parent 1: classid 1:", integer_to_list(10 + L), " htb rate ",
                          integer_to_list(R), "mbit burst 1600b cburst 1600b quantum 1514"]
                         || {L, R} <- lists:enumerate(0, Rates)],
              Filters = [["tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst ",
                          maps:get(Other, Address), "/32 flowid 1:", integer_to_list(10 + lca_level(Name, Other, Switches))]
                         || Other <- maps:keys(Address), Other =/= Name],
              sh(["ip netns exec ", Name, " sh -c ",
                  quote(lists:flatten(lists:join(" && ", ["tc qdisc add dev eth0 root handle 1: htb default 0"
                                                         | Classes ++ Filters])))])
      end, Hosts).

%% The level of the lowest switch above both hosts; above the top level when they
%% share none (a forest).
lca_level(A, B, Switches) ->
    Below = fun(S) -> hosts_below(S, Switches, []) end,
    case [L || #{level := L} = S <- Switches, Hs <- [Below(S)], lists:member(A, Hs), lists:member(B, Hs)] of
        [] -> lists:max([L || #{level := L} <- Switches]);
        Levels -> lists:min(Levels)
    end.

hosts_below(#{name := Name, nodes := Ns, switches := Cs}, Switches, Seen) ->
    Ns ++ lists:append([hosts_below(S, Switches, [Name | Seen])
                        || #{name := C} = S <- Switches, lists:member(C, Cs), not lists:member(C, [Name | Seen])]).

write_client_files(Dir, Hosts) ->
    Known = [[N, ",", A, " ", hd(string:split(element(2, file:read_file(filename:join([Dir, "hosts.d", N, "host_key.pub"]))),
                                              " ", trailing)), "\n"]
             || #{name := N, address := A} <- Hosts],
    ok = write_file(filename:join(Dir, "known_hosts"), Known),
    Common = ["  IdentityFile ", filename:join(Dir, "id_testbed"),
              "\n  UserKnownHostsFile ", filename:join(Dir, "known_hosts"),
              "\n  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"],
    ok = write_file(filename:join(Dir, "ssh_config"),
                         [[["Host ", N, "\n  HostName ", A, "\n", Common] || #{name := N, address := A} <- Hosts],
                          "Host ", lists:join(" ", [A || #{address := A} <- Hosts]), "\n", Common]),
    ok = write_file(filename:join(Dir, "hosts"),
                         ["# the hosts of the testbed in ", Dir, "\n", [[N, "\n"] || #{name := N} <- Hosts]]),
    ok = write_file(filename:join(Dir, "inetrc"),
                         ["%% Erlang's resolver (ERL_INETRC): the testbed's host names\n",
                          [io_lib:format("{host, ~w, [~tp]}.~n", [element(2, inet:parse_address(binary_to_list(A))),
                                                                 binary_to_list(N)])
                           || #{name := N, address := A} <- Hosts],
                          "{lookup, [file, native]}.\n"]).

%%--------------------------------------------------------------------
%% Internal functions: SLURM

start_slurm(Dir, Prefix, Hosts, Switches, Net, Progress) ->
    [ok = ensure_dir(filename:join([Dir, D, "x"])) || D <- ["munge", "state", "log"]],
    ok = change_mode(filename:join(Dir, "munge"), 8#700),
    MungeKey = filename:join([Dir, "munge", "munge.key"]),
    ok = write_file(MungeKey, crypto:strong_rand_bytes(1024)),
    ok = change_mode(MungeKey, 8#600),
    Munge = fun(F) -> filename:join([Dir, "munge", F]) end,
    %% sockets (munged's, slurmstepd's in the spool) need a short path: < 108 bytes
    Run = run_dir(Prefix),
    ok = ensure_dir(filename:join([Run, "spool", "x"])),
    ok = change_mode(Run, 8#700),
    %% each daemon is recorded as soon as it runs: if a later step fails, down stops it
    Start = fun(Key, Line, PidFile) ->
                    sh(Line),
                    Pid = pid_file(PidFile),
                    {ok, Record} = read(Dir),
                    ok = write_record(Dir, Record#{<<"daemons">> => (maps:get(<<"daemons">>, Record))#{Key => Pid}})
            end,
    Start(<<"munged">>, ["munged --force --socket=", quote(filename:join(Run, "munge.socket")), " --key-file=", quote(MungeKey),
                         " --log-file=", quote(Munge("munged.log")), " --pid-file=", quote(Munge("munged.pid")),
                         " --seed-file=", quote(Munge("munged.seed"))], Munge("munged.pid")),
    Port = free_port(Prefix),
    ok = write_file(filename:join(Dir, "slurm.conf"), slurm_conf(Dir, Prefix, Hosts, Net, Port)),
    ok = write_file(filename:join(Dir, "topology.conf"), topology_conf(Switches)),
    Conf = quote(filename:join(Dir, "slurm.conf")),
    Start(<<"slurmctld">>, ["slurmctld -i -f ", Conf], filename:join(Dir, "slurmctld.pid")),
    [Start(<<"slurmd ", N/binary>>, ["nsenter --net=/var/run/netns/", N, " slurmd -f ", Conf, " -N ", N],
           filename:join([Run, "spool", "slurmd." ++ binary_to_list(N) ++ ".pid"])) || #{name := N} <- Hosts],
    {ok, #{<<"daemons">> := All}} = read(Dir),
    await_idle(Dir, length(Hosts), erlang:monotonic_time(millisecond) + ?READY_MS),
    Progress(io_lib:format("SLURM up: slurmctld on ~ts:~b, ~b slurmd idle, partition ~ts; munged with its own key "
                           "and socket~n", [Net ++ ".1", Port, length(Hosts), Prefix])),
    All.

slurm_conf(Dir, Prefix, Hosts, Net, Port) ->
    {ok, Hostname} = inet:gethostname(),
    CPUs = erlang:system_info(logical_processors_available),
    J = fun(F) -> filename:join(Dir, F) end,
    ["# Written by 'terrain testbed up --slurm' (docs/TESTBED.md); removed by 'terrain testbed down'.\n",
     "ClusterName=terrain", Prefix, "\n",
     "SlurmctldHost=", Hostname, "(", Net, ".1)\n",
     "SlurmctldPort=", integer_to_list(Port), "\nSlurmdPort=6818\n",
     "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=", filename:join(run_dir(Prefix), "munge.socket"), "\n",
     "SlurmUser=root\nSlurmdUser=root\n",
     "StateSaveLocation=", J("state"), "\n",
     "SlurmdSpoolDir=", filename:join(run_dir(Prefix), "spool/%n"), "\n",
     "SlurmctldPidFile=", J("slurmctld.pid"), "\nSlurmdPidFile=", filename:join(run_dir(Prefix), "spool/slurmd.%n.pid"), "\n",
     "SlurmctldLogFile=", J("log/slurmctld.log"), "\nSlurmdLogFile=", J("log/slurmd.%n.log"), "\n",
     "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\nMpiDefault=none\n",
     "ReturnToService=2\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n",
     "TopologyPlugin=topology/tree\n",
     "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n",
     "SlurmctldTimeout=30\nSlurmdTimeout=30\nInactiveLimit=0\nKillWait=5\nMinJobAge=30\n",
     [["NodeName=", N, " NodeAddr=", A, " CPUs=", integer_to_list(CPUs), " State=UNKNOWN\n"]
      || #{name := N, address := A} <- Hosts],
     "PartitionName=", Prefix, " Nodes=", lists:join(",", [N || #{name := N} <- Hosts]),
     " Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n"].

topology_conf(Switches) ->
    ["# Written by 'terrain testbed up --slurm' from its switches (topology/tree).\n",
     [["SwitchName=", N, [[" Switches=", lists:join(",", Cs)] || Cs =/= []], [[" Nodes=", lists:join(",", Ns)] || Ns =/= []], "\n"]
      || #{name := N, nodes := Ns, switches := Cs} <- lists:sort(fun(#{level := A}, #{level := B}) -> A =< B end, Switches)]].

await_idle(Dir, Count, Deadline) ->
    case sinfo(Dir, "%N %T") of
        {ok, Out} ->
            Lines = string:lexemes(Out, "\n"),
            case length([L || L <- Lines, lists:suffix(" idle", L)]) of
                Count -> ok;
                _ -> retry_idle(Dir, Count, Deadline, Lines)
            end;
        {error, Why} ->
            retry_idle(Dir, Count, Deadline, [Why])
    end.

retry_idle(Dir, Count, Deadline, Lines) ->
    case erlang:monotonic_time(millisecond) > Deadline of
        true -> throw({testbed, {slurm_not_ready, Lines}});
        false -> receive after 200 -> await_idle(Dir, Count, Deadline) end
    end.

sinfo(Dir, Format) ->
    case command(["SLURM_CONF=", quote(filename:join(Dir, "slurm.conf")), " sinfo -h -N -o ", quote(Format)], 10000) of
        {ok, Out} -> {ok, Out};
        {error, {testbed, {command, _, _, Out}}} -> {error, string:trim(Out)}
    end.

%% slurmctld's port: the first free one of ?PORTS, searched from a place that depends
%% on the prefix (as the subnet), so that two testbeds made at once rarely race.
free_port(Prefix) ->
    Used = output("ss", ["-Htln"]),
    {Before, After} = lists:split(erlang:phash2(Prefix, length(?PORTS)), ?PORTS),
    case [P || P <- After ++ Before, string:find(Used, ":" ++ integer_to_list(P) ++ " ") =:= nomatch,
               string:find(Used, ":" ++ integer_to_list(P + 1) ++ " ") =:= nomatch] of
        [P | _] -> P;
        [] -> throw({testbed, {command, "choose slurmctld's port", 1, "16817..16899 all in use"}})
    end.

pid_file(File) ->
    Deadline = erlang:monotonic_time(millisecond) + ?COMMAND_MS,
    pid_file(File, Deadline).

pid_file(File, Deadline) ->
    case file:read_file(File) of
        {ok, Bin} when byte_size(Bin) > 0 -> string:trim(Bin);
        _ ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> throw({testbed, {command, "read " ++ File, timeout, "the daemon wrote no pid file"}});
                false -> receive after 50 -> pid_file(File, Deadline) end
            end
    end.

%%--------------------------------------------------------------------
%% Internal functions: removing it

remove(Dir, Record, _Progress) ->
    Daemons = maps:get(<<"daemons">>, Record, #{}),
    %% slurmd first (they end their job steps), then slurmctld, then munged; each
    %% group TERMed at once, KILLed after the grace time
    Slurmds = [K || K <- maps:keys(Daemons), lists:prefix("slurmd ", binary_to_list(K))],
    Stopped = lists:append([stop_daemons([{binary_to_list(K), binary_to_list(maps:get(K, Daemons)), comm(K)}
                                          || K <- Group, is_map_key(K, Daemons)])
                            || Group <- [Slurmds, [<<"slurmctld">>], [<<"munged">>]]]),
    Namespaces = existing_namespaces(),
    Hosts = [NS || #{<<"name">> := N} <- maps:get(<<"hosts">>, Record, []), NS <- [binary_to_list(N)],
                   lists:member(NS, Namespaces)],
    Removed = remove_namespaces(Hosts),
    Bridge = binary_to_list(maps:get(<<"bridge">>, Record, <<>>)),
    BridgeLines = case Bridge =/= "" andalso command(["ip link del ", Bridge], ?COMMAND_MS) of
                      {ok, _} -> ["bridge " ++ Bridge ++ " deleted"];
                      _ -> []
                  end,
    Run = run_dir(binary_to_list(maps:get(<<"prefix">>, Record))),
    RunLines = case filelib:is_dir(Run) of
                   true -> _ = file:del_dir_r(Run), ["directory " ++ Run ++ " removed"];
                   false -> []
               end,
    _ = file:del_dir_r(Dir),
    Stopped ++ Removed ++ BridgeLines ++ RunLines ++ ["directory " ++ Dir ++ " removed"].

%% Sockets and the slurmd spool: a short path of this testbed's own (one testbed per
%% prefix runs at a time, since its hosts are namespaces of those names).
run_dir(Prefix) ->
    "/run/terrain-testbed-" ++ Prefix.

%% TERM to every daemon that is still the program it was, KILL to those left after
%% the grace time.
stop_daemons(Daemons) ->
    Ours = [D || {_, Pid, Comm} = D <- Daemons, ours(Pid, Comm)],
    _ = [terrain_lab_os:signal(Pid, "TERM") || {_, Pid, _} <- Ours],
    Left = terrain_lab_os:await_exit([Pid || {_, Pid, _} <- Ours], ?STOP_MS),
    _ = [terrain_lab_os:signal(Pid, "KILL") || {_, Pid, Comm} <- Ours, lists:member(Pid, Left), ours(Pid, Comm)],
    _ = terrain_lab_os:await_exit(Left, 1000),
    [What ++ case lists:member(Pid, Left) of
                 true -> " killed (pid " ++ Pid ++ ")";
                 false -> " stopped (pid " ++ Pid ++ ")"
             end || {What, Pid, _} <- Ours].

comm(<<"slurmd", _/binary>>) -> "slurmd";
comm(Key) -> binary_to_list(Key).

ours(Pid, Comm) ->
    case file:read_file("/proc/" ++ Pid ++ "/comm") of
        {ok, C} -> string:trim(binary_to_list(C)) =:= Comm;
        {error, _} -> false
    end.

%% Every process left in the namespaces (sshd, epmd, and whatever a user left
%% there), TERM then KILL, then the namespaces.
remove_namespaces(Namespaces) ->
    Left = [{NS, host_pids(NS)} || NS <- Namespaces],
    All = [P || {_, Ps} <- Left, {P, _} <- Ps],
    _ = [terrain_lab_os:signal(P, "TERM") || P <- All],
    _ = terrain_lab_os:await_exit(All, 2000),
    Stubborn = lists:append([netns_pids(NS) || NS <- Namespaces]),
    _ = [terrain_lab_os:signal(P, "KILL") || P <- Stubborn],
    _ = terrain_lab_os:await_exit(Stubborn, 2000),
    [begin
         _ = command(["ip netns del ", NS], ?COMMAND_MS),
         Others = [C || {_, C} <- Ps, C =/= "sshd", C =/= "epmd"],
         "host " ++ NS ++ " removed (namespace, sshd, epmd" ++ [", left there: " ++ string:join(Others, " ") || Others =/= []]
             ++ ")"
     end || {NS, Ps} <- Left].

%%--------------------------------------------------------------------
%% Internal functions: the machine

record_file(Dir) ->
    filename:join(Dir, "testbed.json").

%% The testbed's own files: a directory that refuses them (read-only, full) is a
%% `{testbed, {file, Path, Reason}}' error, which rolls back what was made.
write_file(File, Content) ->
    file_ok(file:write_file(File, Content), File).

change_mode(File, Mode) ->
    file_ok(file:change_mode(File, Mode), File).

ensure_dir(Path) ->
    file_ok(filelib:ensure_dir(Path), filename:dirname(Path)).

file_ok(ok, _Path) -> ok;
file_ok({error, Reason}, Path) -> throw({testbed, {file, Path, Reason}}).

write_record(Dir, Record) ->
    case terrain_json:write_file(record_file(Dir), Record) of
        ok -> ok;
        {error, Why} -> throw({testbed, {command, "write " ++ record_file(Dir), 1, io_lib:format("~0tp", [Why])}})
    end.

%% The first /24 of 10.214.0.0/16 that no interface here uses, searched from a
%% place that depends on the prefix, so that two testbeds made at once (the test
%% suites of two checkouts) are unlikely to race for the same one.
free_subnet(Prefix) ->
    Used = output("ip", ["-o", "-4", "addr", "show"]),
    Start = erlang:phash2(Prefix, 250),
    case [X || I <- lists:seq(0, 249), X <- [1 + (Start + I) rem 250],
               string:find(Used, " " ++ ?NET ++ "." ++ integer_to_list(X) ++ ".") =:= nomatch] of
        [X | _] -> {ok, ?NET ++ "." ++ integer_to_list(X)};
        [] -> {error, {testbed, no_subnet}}
    end.

existing_namespaces() ->
    [hd(string:split(L, " ")) || L <- string:split(output("ip", ["netns", "list"]), "\n", all), L =/= ""].

netns_pids(NS) ->
    [P || P <- string:lexemes(output("ip", ["netns", "pids", NS]), "\n "), P =/= ""].

await_port(Address, Port) ->
    {ok, Ip} = inet:parse_address(Address),
    Deadline = erlang:monotonic_time(millisecond) + ?COMMAND_MS,
    await_port(Ip, Port, Deadline).

await_port(Ip, Port, Deadline) ->
    case gen_tcp:connect(Ip, Port, [], 200) of
        {ok, S} -> gen_tcp:close(S);
        {error, Why} ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> throw({testbed, {command, "connect to " ++ inet:ntoa(Ip) ++ ":" ++ integer_to_list(Port),
                                         timeout, atom_to_list(Why)}});
                false -> receive after 50 -> await_port(Ip, Port, Deadline) end
            end
    end.

find(Program) ->
    case lists:prefix("/", Program) of
        true -> filelib:is_regular(Program) andalso Program;
        false -> os:find_executable(Program)
    end.

sh(Command) ->
    case command(Command, ?COMMAND_MS) of
        {ok, _} -> ok;
        {error, Reason} -> throw(Reason)
    end.

%% A shell line under a deadline: its output, or why not.
command(Command, Timeout) ->
    Flat = unicode:characters_to_list(Command),
    case terrain_lab_os:run("/bin/sh", ["-c", Flat], #{timeout => Timeout}) of
        {ok, 0, Output} -> {ok, unicode:characters_to_list(Output)};
        {ok, Code, Output} -> {error, {testbed, {command, Flat, Code, unicode:characters_to_list(Output)}}};
        {error, {run, _, {timeout, _, Output}}} -> {error, {testbed, {command, Flat, timeout, unicode:characters_to_list(Output)}}};
        {error, Reason} -> {error, {testbed, {run, Reason}}}
    end.

%% What a program that only reports (id, ss, ip) writes, under the deadline; "" when
%% it fails, with what it said about it (2>/dev/null, as it were).
output(Program, Args) ->
    case terrain_lab_os:run(Program, Args, #{timeout => ?COMMAND_MS}) of
        {ok, 0, Output} -> unicode:characters_to_list(Output);
        {ok, _, _} -> "";
        {error, _} -> ""
    end.

quote(Arg) ->
    ["'", string:replace(Arg, "'", "'\\''", all), "'"].
