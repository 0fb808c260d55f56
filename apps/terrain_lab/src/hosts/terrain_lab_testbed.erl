%% @private
%% @doc `terrain testbed': hosts on this machine for anything multi-host (docs/TESTBED.md).
%%
%% `up' makes N hosts `P1'..`PN' (P the prefix): each a network namespace of that
%% name joined by a veth pair to a bridge of this machine, with its own address on a
%% /24 of 10.214.0.0/16 that no interface here uses yet, `lo' up, its own sshd (a
%% generated host key, an authorised generated key) and its own epmd. Its directory
%% (`--dir', default /tmp/terrain-testbed-P, which must not exist yet: `up' makes it)
%% holds everything else: `ssh_config' (`Host P1' with `HostName ADDRESS', the key,
%% the known hosts), `hosts' (a hosts file for `terrain up --hosts'), `inetrc' (the
%% hosts' names for Erlang's resolver, exported as `ERL_INETRC' by `terrain testbed
%% env': every host here shares /etc/hosts, which is not touched), `testbed.json' (what
%% the testbed is: prefix, hosts, switches, rates) and `made.jsonl', the record of
%% every thing made, written before each is made (terrain_lab_testbed_record).
%%
%% The hosts are joined by switches (`--topology', terrain_lab_testbed_switches), and
%% traffic between two hosts is shaped at the sender by the kernel's `htb' to the link
%% speed of their lowest common switch's level (`--rates', Mbit/s per level): this
%% kernel has no `netem', so the structure shows as transfer time, which `terrain
%% probe --payload BYTES' measures. With `--slurm' it also runs SLURM
%% (terrain_lab_testbed_slurm).
%%
%% Every option is checked before the machine is looked at; then the prefix's lock is
%% taken (two `up' or `down' of one prefix never run at once), and every name the
%% testbed would take (its directory, namespaces, bridge, veths, SLURM's run directory)
%% must be free. `down', and `up' when a step fails or SIGTERM arrives, remove exactly
%% what the record says was made.
-module(terrain_lab_testbed).

-include_lib("terrain_json/include/terrain_formats.hrl").

%% API
-export([up/1,
         down/2,
         status/1,
         env_lines/1,
         read/1,
         default_dir/1,
         valid_prefix/1,
         valid_dir/1,
         host_pids/1,
         available/1,
         format_error/1]).

%% exports_not_used: what the test suites read of a testbed.
-ignore_xref([{host_pids, 1}, {available, 1}, {read, 1}]).

-export_type([options/0, testbed/0, error_reason/0]).

-import(terrain_lab_testbed_record, [sh/1]).
-import(terrain_lab_os, [shell_quote/1]).

-type options() :: #{hosts := pos_integer() | undefined,   % N, or from the topology
                     prefix := string(),                   % host names P1..PN
                     dir := file:filename(),               % must not exist: up makes it
                     slurm := boolean(),
                     topology := string() | undefined,     % AxB.., N,M,.. or a topology.conf file
                     rates := [pos_integer()],              % Mbit/s per switch level, [] = default
                     progress := fun((iodata()) -> ok)}.

%% What testbed.json holds, decoded (binary keys and strings), with the daemons made.
-type testbed() :: #{binary() => term()}.

-type error_reason() ::
        {testbed, {usage, string()}}
      | {testbed, not_root}
      | {testbed, {missing, [string()]}}
      | {testbed, {exists, file:filename()}}
      | {testbed, {not_ours, file:filename()}}
      | {testbed, {namespace_exists, string()}}
      | {testbed, {link_exists, string()}}
      | {testbed, {locked, string(), string()}}
      | {testbed, {not_up, file:filename()}}
      | {testbed, no_subnet}
      | {testbed, interrupted}
      | {testbed, {topology, file:filename(), term()}}
      | {testbed, {topology_hosts, [string()], [string()]}}
      | {testbed, {command, string(), integer() | timeout, string()}}
      | {testbed, {file, file:filename(), term()}}
      | {testbed, {run, terrain_lab_os:error_reason()}}
      | {testbed, {slurm_not_ready, [string()]}}.

-define(COMMAND_MS, 15000).
-define(READY_MS, 30000).
-define(NET, "10.214").
-define(SHOWN, 8).                       % names listed in a message at most
-define(MAX_RATE, 100000).               % Mbit/s (100 Gbit/s): what tc's htb takes
-define(MAX_RATES, 16).
-define(HOST_PROGRAMS, ["ip", "tc", "nsenter", "ssh", "ssh-keygen", "/usr/sbin/sshd", "epmd"]).
-define(SLURM_PROGRAMS, ["munged", "slurmctld", "slurmd", "sinfo", "scontrol"]).

%%--------------------------------------------------------------------
%% API

%% @doc The directory of the testbed of prefix `Prefix' when `--dir' is not given.
-spec default_dir(string()) -> file:filename().
default_dir(Prefix) ->
    "/tmp/terrain-testbed-" ++ Prefix.

%% @doc Is `Prefix' a testbed prefix: 1 to 8 lower-case letters and digits, a letter first.
-spec valid_prefix(string()) -> boolean().
valid_prefix(Prefix) ->
    re:run(Prefix, "^[a-z][a-z0-9]{0,7}$") =/= nomatch.

%% @doc Can `Dir' be a testbed's directory: ASCII letters, digits and `/._+,=@%:~-'
%% only (its paths are written unquoted into sshd_config, ssh_config and slurm.conf,
%% where a space, a quote or `#' would change their meaning).
-spec valid_dir(string()) -> boolean().
valid_dir(Dir) ->
    Dir =/= "" andalso re:run(Dir, "^[A-Za-z0-9/._+,=@%:~-]+$") =/= nomatch.

%% @doc `ok', or why this machine cannot make a testbed (`Slurm': with SLURM).
-spec available(boolean()) -> ok | {error, error_reason()}.
available(Slurm) ->
    Programs = ?HOST_PROGRAMS ++ [P || Slurm, P <- ?SLURM_PROGRAMS],
    case {terrain_lab_testbed_record:output("id", ["-u"]), [P || P <- Programs, find(P) =:= false]} of
        {"0\n", []} -> ok;
        {"0\n", Missing} -> {error, {testbed, {missing, Missing}}};
        _ -> {error, {testbed, not_root}}
    end.

%% @doc Makes the testbed; returns its record. On a failure (or SIGTERM: the message
%% `{terrain_lab_testbed, interrupt}'), what was made is removed again.
-spec up(options()) -> {ok, testbed()} | {error, error_reason()}.
up(#{prefix := Prefix, dir := Dir0, slurm := Slurm} = Options) ->
    Dir = filename:absname(Dir0),
    %% usage first (a bad option is reported before the machine is looked at)
    Steps = [fun(_) -> check_prefix(Prefix) end,
             fun(_) -> check_dir(Dir0) end,
             fun(_) -> check_rates(maps:get(rates, Options, [])) end,
             fun(_) -> host_count(Options) end,
             fun(Count) -> topology(Options, Prefix, Count) end,
             fun(Switches) -> case available(Slurm) of ok -> {ok, Switches}; Error -> Error end end,
             fun(Switches) -> with_lock(Prefix, fun() -> prepare(Dir, Switches, Options) end) end],
    terrain_lab_steps:run(Steps, none).

%% @doc Removes what the testbed recorded in `Dir' made: daemons, the processes left in
%% its namespaces, the namespaces, the links, the files and directories. Returns one
%% line per thing removed.
-spec down(file:filename(), fun((iodata()) -> ok)) -> {ok, [string()]} | {error, error_reason()}.
down(Dir0, _Progress) ->
    Dir = filename:absname(Dir0),
    case terrain_lab_testbed_record:prefix(Dir) of
        {ok, Prefix} -> with_lock(Prefix, fun() -> {ok, terrain_lab_testbed_record:remove(Dir)} end);
        error -> {error, {testbed, {not_up, Dir}}}
    end.

%% @doc The record of the testbed in `Dir' and the state of each of its parts.
-spec status(file:filename()) -> {ok, testbed(), [{string(), string()}]} | {error, error_reason()}.
status(Dir0) ->
    Dir = filename:absname(Dir0),
    case read(Dir) of
        {ok, #{<<"hosts">> := Hosts} = Record} ->
            Things = terrain_lab_testbed_record:things(Dir),
            Namespaces = maps:from_list([{N, Id} || #{kind := namespace, state := made, name := N, id := Id}
                                                        <- Things]),
            HostLines = [{binary_to_list(Name), host_state(binary_to_list(Name), Address, Namespaces)}
                         || #{<<"name">> := Name, <<"address">> := Address} <- Hosts],
            Daemons = [{Name, case terrain_lab_testbed_record:own_pid(T) of
                                  none -> "not running";
                                  Pid -> "running (pid " ++ Pid ++ ")"
                              end} || #{kind := process, daemon := true, name := Name} = T <- Things],
            Slurm = case maps:get(<<"slurm">>, Record, false) of
                        true -> [{"sinfo", string:trim(element(2, terrain_lab_testbed_slurm:sinfo(Dir, "%N %T")))}];
                        false -> []
                    end,
            {ok, Record, HostLines ++ lists:sort(Daemons) ++ Slurm};
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
                        true -> ["export SLURM_CONF=", shell_quote(filename:join(Dir, "slurm.conf")), "\n"];
                        false -> []
                    end,
            {ok, [Slurm,
                  "export ERL_INETRC=", shell_quote(filename:join(Dir, "inetrc")), "\n",
                  "export TERRAIN_TESTBED=", shell_quote(Dir), "\n",
                  "# ssh: terrain up --hosts ", filename:join(Dir, "hosts"), " --ssh-option ConfigFile=",
                  filename:join(Dir, "ssh_config"), "\n"]};
        {error, _} = Error ->
            Error
    end.

%% @doc The record `Dir/testbed.json', with `daemons' (name to OS pid) from the record
%% of what was made.
-spec read(file:filename()) -> {ok, testbed()} | {error, error_reason()}.
read(Dir) ->
    Made = filelib:is_regular(filename:join(Dir, "made.jsonl")),
    case terrain_json:read_file(record_file(Dir)) of
        {ok, #{<<"format">> := ?TERRAIN_FORMAT_TESTBED} = Record} when Made ->
            {ok, Record#{<<"daemons">> => terrain_lab_testbed_record:daemons(Dir)}};
        _ ->
            {error, {testbed, {not_up, Dir}}}
    end.

%% @doc `[{Pid, Command}]' of the processes in the namespace `NS'.
-spec host_pids(string()) -> [{string(), string()}].
host_pids(NS) ->
    [{P, case terrain_lab_testbed_record:process_id(P) of
             #{comm := C} -> C;
             none -> ""
         end} || P <- string:lexemes(terrain_lab_testbed_record:output("ip", ["netns", "pids", NS]), "\n ")].

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
format_error({testbed, {not_ours, Path}}) ->
    io_lib:format("~ts exists already and is not a testbed's: 'terrain testbed up' makes its directories itself, so "
                  "that 'down' removes only what it made; give a --dir (or --prefix) whose directory does not exist "
                  "yet",
                  [Path]);
format_error({testbed, {namespace_exists, NS}}) ->
    io_lib:format("a network namespace ~ts exists already (not this testbed's): choose another --prefix", [NS]);
format_error({testbed, {link_exists, Name}}) ->
    io_lib:format("a network interface ~ts exists already (not this testbed's): choose another --prefix", [Name]);
format_error({testbed, {locked, Prefix, Pid}}) ->
    io_lib:format("another 'terrain testbed' with --prefix ~ts is running (OS pid ~ts); wait until it has finished, "
                  "or choose another --prefix", [Prefix, Pid]);
format_error({testbed, {not_up, Dir}}) ->
    io_lib:format("no testbed is recorded in ~ts (no testbed.json and made.jsonl); start one with 'terrain testbed "
                  "up'", [Dir]);
format_error({testbed, no_subnet}) ->
    "every /24 of 10.214.0.0/16 is in use on this machine: remove a testbed first";
format_error({testbed, interrupted}) ->
    "interrupted (SIGTERM); everything 'testbed up' had made was removed again";
format_error({testbed, {topology, File, Why}}) ->
    topology_error(File, Why);
format_error({testbed, {topology_hosts, Expected, Found}}) ->
    io_lib:format("the topology's nodes must be the testbed's hosts ~ts; it lists ~ts",
                  [shown(Expected), shown(Found)]);
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

topology_error(File, no_switch) ->
    io_lib:format("~ts lists no switch", [File]);
topology_error(Spec, {bad_spec, Why}) ->
    io_lib:format("--topology ~ts: ~ts (expected N, A,B,... or AxB[x...], or a topology.conf file)", [Spec, Why]);
topology_error(File, {slurm, _} = Why) ->
    io_lib:format("~ts: ~ts", [File, terrain_lab_slurm:format_error(Why)]);
topology_error(File, {not_a_file, Type}) ->
    io_lib:format("cannot read ~ts: it is a ~ts, not a topology.conf file", [File, Type]);
topology_error(File, {too_large, Max}) ->
    io_lib:format("cannot read ~ts: larger than ~b bytes (a testbed's topology.conf is far smaller)", [File, Max]);
topology_error(File, {not_utf8, Line}) ->
    io_lib:format("cannot read ~ts: line ~b: the bytes are not UTF-8", [File, Line]);
topology_error(File, Why) ->
    io_lib:format("cannot read ~ts: ~ts", [File, file:format_error(Why)]).

%% A list of names, the first few only: "a, b, c, ... (300000 in all)".
shown(Names) when length(Names) > ?SHOWN ->
    [lists:join(",", lists:sublist(Names, ?SHOWN)), io_lib:format(",... (~b in all)", [length(Names)])];
shown(Names) ->
    lists:join(",", Names).

%%--------------------------------------------------------------------
%% Internal functions: options

check_prefix(Prefix) ->
    case valid_prefix(Prefix) of
        true -> ok;
        false -> {error, {testbed, {usage, "--prefix: 1 to 8 lower-case letters and digits, a letter first (host "
                                           "names PREFIX1..N are network namespace and SLURM node names)"}}}
    end.

check_dir(Dir) ->
    case valid_dir(Dir) of
        true -> ok;
        false -> {error, {testbed, {usage, "--dir: ASCII letters, digits and /._+,=@%:~- only (the testbed writes its "
                                           "paths into sshd_config, ssh_config and slurm.conf)"}}}
    end.

check_rates(Rates) when length(Rates) =< ?MAX_RATES ->
    case [R || R <- Rates, not (is_integer(R) andalso R >= 1 andalso R =< ?MAX_RATE)] of
        [] -> ok;
        _ -> {error, {testbed, {usage, io_lib:format("--rates: Mbit/s from 1 to ~b", [?MAX_RATE])}}}
    end;
check_rates(_) ->
    {error, {testbed, {usage, io_lib:format("--rates: at most ~b levels", [?MAX_RATES])}}}.

host_count(#{hosts := undefined, topology := undefined}) ->
    {error, {testbed, {usage, "give --hosts N, --topology, or both"}}};
host_count(#{hosts := N}) when is_integer(N) ->
    case N > terrain_lab_testbed_switches:max_hosts() of
        true -> {error, {testbed, {usage, "--hosts: at most 250 (one /24)"}}};
        false -> {ok, N}
    end;
host_count(#{}) ->
    {ok, undefined}.

topology(#{topology := undefined}, Prefix, Count) ->
    terrain_lab_testbed_switches:switches(integer_to_list(Count), Prefix);
topology(#{topology := Spec}, Prefix, Count) ->
    case terrain_lab_testbed_switches:switches(Spec, Prefix) of
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

%%--------------------------------------------------------------------
%% Internal functions: the lock, and the names the testbed takes

lock_file(Prefix) ->
    "/run/terrain-testbed-" ++ Prefix ++ ".lock".

with_lock(Prefix, Fun) ->
    File = lock_file(Prefix),
    case terrain_lab_lock:take(File) of
        ok -> try Fun() after terrain_lab_lock:release(File) end;
        {error, {locked, _, Pid}} -> {error, {testbed, {locked, Prefix, Pid}}};
        {error, {write, Path, Why}} -> {error, {testbed, {file, Path, Why}}}
    end.

%% Under the lock: every name the testbed takes is free; then it is made.
prepare(Dir, Switches, #{prefix := Prefix, slurm := Slurm, progress := Progress} = Options) ->
    Names = lists:sort(fun(A, B) -> host_number(A, Prefix) =< host_number(B, Prefix) end,
                       lists:usort([H || #{nodes := Ns} <- Switches, H <- Ns])),
    Links = ["tbr" ++ Prefix | ["tv" ++ Prefix ++ integer_to_list(I) || I <- lists:seq(1, length(Names))]],
    Existing = existing_namespaces(),
    Steps = [fun(_) -> free_dir(Dir) end,
             fun(_) -> case [Slurm || Slurm, filelib:is_file(terrain_lab_testbed_slurm:run_dir(Prefix))] of
                           [] -> ok;
                           _ -> {error, {testbed, {not_ours, terrain_lab_testbed_slurm:run_dir(Prefix)}}}
                       end end,
             fun(_) -> case [NS || NS <- Names, lists:member(NS, Existing)] of
                           [] -> ok;
                           [NS | _] -> {error, {testbed, {namespace_exists, NS}}}
                       end end,
             fun(_) -> case [L || L <- Links, terrain_lab_testbed_record:link_id(L) =/= none] of
                           [] -> ok;
                           [L | _] -> {error, {testbed, {link_exists, L}}}
                       end end,
             fun(_) -> free_subnet(Prefix) end,
             fun(Net) ->
                     Levels = lists:max([L || #{level := L} <- Switches]),
                     Rates = terrain_lab_testbed_switches:rates(maps:get(rates, Options, []), Levels),
                     make(Dir, #{prefix => Prefix, names => Names, switches => Switches, net => Net, rates => Rates,
                                 slurm => Slurm, progress => Progress})
             end],
    terrain_lab_steps:run(Steps, none).

%% `Dir' must not exist: a directory that does is not the testbed's to take.
free_dir(Dir) ->
    case file:read_link_info(Dir) of
        {error, enoent} -> ok;
        {ok, _} ->
            case terrain_lab_testbed_record:prefix(Dir) of
                {ok, _} -> {error, {testbed, {exists, Dir}}};
                error -> {error, {testbed, {not_ours, Dir}}}
            end;
        {error, Why} -> {error, {testbed, {file, Dir, Why}}}
    end.

host_number(Host, Prefix) ->
    list_to_integer(lists:nthtail(length(Prefix), Host)).

record_file(Dir) ->
    filename:join(Dir, "testbed.json").

%%--------------------------------------------------------------------
%% Internal functions: making it

make(Dir, #{prefix := Prefix, names := Names, net := Net} = Plan) ->
    Hosts = [#{name => list_to_binary(H), address => list_to_binary(Net ++ "." ++ integer_to_list(I + 1)),
               veth => list_to_binary("tv" ++ Prefix ++ integer_to_list(I))}
             || {I, H} <- lists:enumerate(Names)],
    case terrain_lab_testbed_record:create(Dir, Prefix) of
        ok ->
            try build(Dir, Hosts, Plan) of
                ok -> read(Dir)
            catch
                throw:{testbed, _} = Reason ->
                    _ = terrain_lab_testbed_record:remove(Dir),
                    {error, Reason};
                Class:Reason:Stack ->
                    _ = terrain_lab_testbed_record:remove(Dir),
                    erlang:raise(Class, Reason, Stack)
            end;
        {error, _} = Error ->
            Error
    end.

build(Dir, Hosts, #{prefix := Prefix, switches := Switches, net := Net, rates := Rates, slurm := Slurm,
                    progress := Progress} = Plan) ->
    T0 = erlang:monotonic_time(millisecond),
    Bridge = "tbr" ++ Prefix,
    ok = terrain_lab_testbed_record:write_file(Dir, record_file(Dir), description(Dir, Bridge, Hosts, Plan)),
    ok = make_bridge(Dir, Bridge, Net),
    ok = make_keys(Dir),
    ok = terrain_lab_testbed_record:make_dir(Dir, filename:join(Dir, "hosts.d")),
    _ = [make_host(Dir, Bridge, H) || H <- Hosts],
    Progress(io_lib:format("~b hosts ~ts..~ts on ~ts.0/24 (bridge ~ts)~n",
                           [length(Hosts), maps:get(name, hd(Hosts)), maps:get(name, lists:last(Hosts)), Net, Bridge])),
    shape(Hosts, Switches, Rates),
    Progress(io_lib:format("links shaped by switch level: ~ts~n",
                           [lists:join(", ", [io_lib:format("level ~b ~b Mbit/s", [L, R])
                                             || {L, R} <- lists:enumerate(0, Rates)])])),
    write_client_files(Dir, Hosts),
    _ = [await_port(binary_to_list(A), 22) || #{address := A} <- Hosts],
    _ = Slurm andalso terrain_lab_testbed_slurm:start(Dir, Prefix, Hosts, Switches, Net, Progress),
    Progress(io_lib:format("testbed up in ~.1f s; its directory: ~ts~n",
                           [(erlang:monotonic_time(millisecond) - T0) / 1000, Dir])).

description(Dir, Bridge, Hosts, #{prefix := Prefix, switches := Switches, net := Net, rates := Rates,
                                  slurm := Slurm}) ->
    Record = #{format => ?TERRAIN_FORMAT_TESTBED, prefix => list_to_binary(Prefix), dir => list_to_binary(Dir),
               bridge => list_to_binary(Bridge), bridge_address => list_to_binary(Net ++ ".1"),
               hosts => Hosts, slurm => Slurm, rates_mbit => Rates,
               switches => [#{name => list_to_binary(N), level => L, nodes => [list_to_binary(H) || H <- Ns],
                              switches => [list_to_binary(C) || C <- Cs]}
                            || #{name := N, level := L, nodes := Ns, switches := Cs} <- Switches]},
    [terrain_json:encode(Record, #{pretty => true}), $\n].

make_bridge(Dir, Bridge, Net) ->
    ok = terrain_lab_testbed_record:make(Dir, #{kind => link, name => Bridge},
                                         fun() ->
                                                 sh(["ip link add ", Bridge, " type bridge"]),
                                                 [terrain_lab_testbed_record:link_id(Bridge)]
                                         end),
    sh(["ip addr add ", Net, ".1/24 dev ", Bridge, " && ip link set ", Bridge, " up"]).

%% A key pair from ssh-keygen; a full file system is the lab's one write error
%% ("cannot write KEY: no space left on device"), not ssh-keygen's command line.
keygen(Key, Comment) ->
    try sh(["ssh-keygen -q -t ed25519 -N '' -C ", Comment, " -f ", shell_quote(Key)])
    catch throw:{testbed, {command, _, _, Output}} = Why ->
            case string:find(Output, "No space left on device") of
                nomatch -> throw(Why);
                _ -> throw({testbed, {file, Key, enospc}})
            end
    end.

%% The client's key (ssh-keygen writes the key and KEY.pub) and authorized_keys.
make_keys(Dir) ->
    Key = filename:join(Dir, "id_testbed"),
    ok = terrain_lab_testbed_record:make(Dir, [#{kind => file, path => Key}, #{kind => file, path => Key ++ ".pub"}],
                                         fun() -> keygen(Key, "terrain-testbed") end),
    {ok, Pub} = file:read_file(Key ++ ".pub"),
    %% sshd's privilege separation directory: the machine's, made when missing and kept
    case filelib:ensure_dir("/run/sshd/x") of
        ok -> ok;
        {error, Why} -> throw({testbed, {file, "/run/sshd", Why}})
    end,
    terrain_lab_testbed_record:write_file(Dir, filename:join(Dir, "authorized_keys"), Pub).


%% A host: its namespace and veth (each recorded before it is made, with its inode
%% and ifindex after), its directory, sshd and epmd (recorded with pid and start time).
make_host(Dir, Bridge, #{name := NameB, address := AddressB, veth := VethB}) ->
    [NS, Address, Veth] = [binary_to_list(B) || B <- [NameB, AddressB, VethB]],
    Record = fun(Thing, Make) -> ok = terrain_lab_testbed_record:make(Dir, Thing, Make) end,
    Record(#{kind => namespace, name => NS},
           fun() -> sh(["ip netns add ", NS]), [terrain_lab_testbed_record:namespace_id(NS)] end),
    Record(#{kind => link, name => Veth},
           fun() -> sh(["ip link add ", Veth, " type veth peer name eth0 netns ", NS]),
                    [terrain_lab_testbed_record:link_id(Veth)] end),
    sh(["ip link set ", Veth, " master ", Bridge, " up",
        " && ip -n ", NS, " addr add ", Address, "/24 dev eth0",
        " && ip -n ", NS, " link set eth0 up && ip -n ", NS, " link set lo up"]),
    HostDir = filename:join([Dir, "hosts.d", NS]),
    ok = terrain_lab_testbed_record:make_dir(Dir, HostDir),
    HostKey = filename:join(HostDir, "host_key"),
    keygen(HostKey, NS),
    Config = filename:join(HostDir, "sshd_config"),
    PidFile = filename:join(HostDir, "sshd.pid"),
    ok = terrain_lab_testbed_record:write_file(
           Dir, Config, ["ListenAddress ", Address, "\nPort 22\nHostKey ", HostKey,
                         "\nAuthorizedKeysFile ", filename:join(Dir, "authorized_keys"), "\nPidFile ", PidFile,
                         "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                         "PermitRootLogin prohibit-password\nMaxStartups 100\nAcceptEnv LANG LC_*\n"]),
    Record(#{kind => process, name => "sshd " ++ NS, comm => "sshd", pid_path => PidFile},
           fun() ->
                   sh(["ip netns exec ", NS, " /usr/sbin/sshd -f ", shell_quote(Config), " -E ",
                       shell_quote(filename:join(HostDir, "sshd.log"))]),
                   [running(terrain_lab_testbed_record:pid_file(PidFile), "sshd")]
           end),
    Record(#{kind => process, name => "epmd " ++ NS, comm => "epmd"},
           fun() ->
                   sh(["ip netns exec ", NS, " epmd -daemon"]),
                   [running(hd([P || {P, "epmd"} <- host_pids(NS)] ++ [""]), "epmd")]
           end).

%% The id of a process just started, or a failure when it is not running.
running(Pid, Comm) ->
    case Pid =/= "" andalso terrain_lab_testbed_record:process_id(Pid) of
        #{comm := Comm} = Id -> Id;
        _ -> throw({testbed, {command, "start " ++ Comm, 1, Comm ++ " is not running"}})
    end.

%% At each host, traffic to each other host leaves through the htb class of their
%% lowest common switch's level; other traffic (this machine, slurmctld) is not
%% shaped (htb's default 0: unclassified packets pass directly).
shape(Hosts, Switches, Rates) ->
    Address = maps:from_list([{binary_to_list(N), binary_to_list(A)} || #{name := N, address := A} <- Hosts]),
    Levels = terrain_lab_testbed_switches:levels(Switches),
    lists:foreach(
      fun(#{name := NameB}) ->
              Name = binary_to_list(NameB),
              Classes = [["tc class add dev eth0 parent 1: classid 1:", integer_to_list(10 + L), " htb rate ",
                          integer_to_list(R), "mbit burst 1600b cburst 1600b quantum 1514"]
                         || {L, R} <- lists:enumerate(0, Rates)],
              Filters = [["tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst ", A,
                          "/32 flowid 1:", integer_to_list(10 + Level)]
                         || {Other, Level} <- lists:sort(maps:to_list(maps:get(Name, Levels))),
                            A <- [maps:get(Other, Address)]],
              sh(["ip netns exec ", Name, " sh -c ",
                  shell_quote(lists:flatten(lists:join(" && ", ["tc qdisc add dev eth0 root handle 1: htb default 0"
                                                         | Classes ++ Filters])))])
      end, Hosts).

write_client_files(Dir, Hosts) ->
    Write = fun(Name, Content) ->
                    ok = terrain_lab_testbed_record:write_file(Dir, filename:join(Dir, Name), Content)
            end,
    Known = [[N, ",", A, " ", hd(string:split(element(2, file:read_file(filename:join([Dir, "hosts.d", N,
                                                                                       "host_key.pub"]))),
                                              " ", trailing)), "\n"]
             || #{name := N, address := A} <- Hosts],
    Write("known_hosts", Known),
    Common = ["  IdentityFile ", filename:join(Dir, "id_testbed"),
              "\n  UserKnownHostsFile ", filename:join(Dir, "known_hosts"),
              "\n  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"],
    Write("ssh_config", [[["Host ", N, "\n  HostName ", A, "\n", Common] || #{name := N, address := A} <- Hosts],
                         "Host ", lists:join(" ", [A || #{address := A} <- Hosts]), "\n", Common]),
    Write("hosts", ["# the hosts of the testbed in ", Dir, "\n", [[N, "\n"] || #{name := N} <- Hosts]]),
    Write("inetrc", ["%% Erlang's resolver (ERL_INETRC): the testbed's host names\n",
                     [io_lib:format("{host, ~w, [~tp]}.~n", [element(2, inet:parse_address(binary_to_list(A))),
                                                            binary_to_list(N)])
                      || #{name := N, address := A} <- Hosts],
                     "{lookup, [file, native]}.\n"]).

%%--------------------------------------------------------------------
%% Internal functions: the machine

%% A host's state for `status': its address and the processes in its namespace while
%% the namespace is the one made; what is left of it otherwise.
host_state(Name, Address, Namespaces) ->
    Id = maps:get(Name, Namespaces, none),
    case {Id =/= none andalso terrain_lab_testbed_record:namespace_id(Name) =:= Id, Id} of
        {true, _} ->
            lists:flatten(io_lib:format("~ts  ~ts", [Address, string:join([C || {_, C} <- host_pids(Name)], " ")]));
        {false, none} ->
            "namespace gone";
        {false, _} ->
            case terrain_lab_testbed_record:processes_in(Id) of
                [] -> "namespace gone";
                Left ->
                    "namespace deleted from outside; still running in it: " ++ string:join([C || {_, C} <- Left], " ")
            end
    end.

%% The first /24 of 10.214.0.0/16 that no interface here uses, searched from a
%% place that depends on the prefix, so that two testbeds made at once (the test
%% suites of two checkouts) are unlikely to race for the same one.
free_subnet(Prefix) ->
    Used = terrain_lab_testbed_record:output("ip", ["-o", "-4", "addr", "show"]),
    Start = erlang:phash2(Prefix, 250),
    case [X || I <- lists:seq(0, 249), X <- [1 + (Start + I) rem 250],
               string:find(Used, " " ++ ?NET ++ "." ++ integer_to_list(X) ++ ".") =:= nomatch] of
        [X | _] -> {ok, ?NET ++ "." ++ integer_to_list(X)};
        [] -> {error, {testbed, no_subnet}}
    end.

existing_namespaces() ->
    Listed = terrain_lab_testbed_record:output("ip", ["netns", "list"]),
    [hd(string:split(L, " ")) || L <- string:split(Listed, "\n", all), L =/= ""].

await_port(Address, Port) ->
    {ok, Ip} = inet:parse_address(Address),
    Deadline = erlang:monotonic_time(millisecond) + ?COMMAND_MS,
    await_port(Ip, Port, Deadline).

await_port(Ip, Port, Deadline) ->
    ok = terrain_lab_testbed_record:check_interrupt(),
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
