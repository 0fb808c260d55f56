%% @private
%% @doc `terrain testbed up|env|status|down': hosts (and a SLURM cluster) on this
%% machine to try multi-host features on (terrain_lab_testbed, docs/TESTBED.md).
%%
%% ```
%% # terrain testbed up --hosts 4 --slurm --topology 2x2
%% # eval "$(terrain testbed env)"
%% # sinfo; salloc -N 4 terrain up --slurm; sbatch examples/slurm/pipeline.sbatch
%% # terrain testbed down
%% '''
%% The testbed is found by `--dir', default /tmp/terrain-testbed-PREFIX (`--prefix',
%% default `tb'); `--prefix', `--dir' and `--rates' are checked by the option table for
%% every action (exit 2). `up' prints the hosts (name, address, namespace) on stdout,
%% progress on stderr, and stops at its next step on SIGTERM, removing what it made;
%% `env' prints shell lines; `status' one line per host and daemon; `down' one line
%% per thing it removed.
-module(terrain_lab_cmd_testbed).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

%% exports_not_used: commands/0 and the handler are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "testbed",
       summary => "Test hosts on this machine (namespaces with sshd, epmd; optionally SLURM)",
       usage => "up | env | status | down",
       description => "up makes hosts PREFIX1..N on this machine: network namespaces with their own address, "
                      "sshd and epmd, joined by emulated switches (--topology: N, A,B,... or AxB[x...], or a "
                      "topology.conf file; traffic between two hosts is shaped to the --rates of their lowest "
                      "common switch's level). With --slurm it also runs munge, slurmctld and one slurmd per "
                      "host, with slurm.conf and topology.conf in the testbed's directory. env prints the shell "
                      "lines that point sinfo/salloc/sbatch, Erlang's resolver and ssh at it; status shows it; "
                      "down removes exactly what up recorded as made (namespaces, links, processes, files), nothing "
                      "else. Needs root.",
       args => {1, 1},
       options => [#{name => hosts, long => "hosts", type => integer, range => {1, 250}, metavar => "N",
                     help => "up: number of hosts (default: the topology's)"},
                   #{name => slurm, long => "slurm", type => flag,
                     help => "up: also run munge, slurmctld and a slurmd per host"},
                   #{name => topology, long => "topology", type => string, metavar => "SPEC|FILE",
                     help => "up: the switches: N, A,B,... (switches of A, B hosts under a root), AxB[x...] "
                             "(fan-outs from the root), or a topology.conf file; at most 250 hosts and 8 levels "
                             "(default: one switch)"},
                   #{name => rates, long => "rates", type => list, metavar => "MBIT,...",
                     check => {fun valid_rates/1, "1 to 16 link speeds in Mbit/s, each from 1 to 100000"},
                     help => "up: link speed in Mbit/s per switch level, leaf level first (default 1000,100,10; "
                             "each further level a tenth)"},
                   #{name => prefix, long => "prefix", type => string, default => "tb", metavar => "P",
                     check => {fun terrain_lab_testbed:valid_prefix/1,
                               "1 to 8 lower-case letters and digits, a letter first"},
                     help => "host names P1..PN (1-8 lower-case letters and digits)"},
                   #{name => dir, long => "dir", type => string, metavar => "DIR",
                     check => {fun terrain_lab_testbed:valid_dir/1,
                               "a path of ASCII letters, digits and /._+,=@%:~- that does not exist yet (up makes it)"},
                     help => "the testbed's directory, which up makes: it must not exist yet "
                             "(default /tmp/terrain-testbed-PREFIX)"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain testbed'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(#{prefix := Prefix} = Options, [Action], Io) ->
    Dir = case maps:get(dir, Options, undefined) of
              undefined -> terrain_lab_testbed:default_dir(Prefix);
              D -> D
          end,
    Progress = fun(Text) -> terrain_lab_io:progress(Io, "~ts", [Text]) end,
    case Action of
        "up" -> up(Options, Dir, Progress, Io);
        "env" -> env(Dir, Io);
        "status" -> status(Dir, Io);
        "down" -> down(Dir, Progress, Io);
        _ -> {error, {usage, io_lib:format("unknown action '~ts' (expected up, env, status or down)", [Action])}}
    end.

%% SIGTERM while up runs: it stops at its next step and removes what it made.
up(Options, Dir, Progress, Io) ->
    Rates = [list_to_integer(R) || R <- maps:get(rates, Options, [])],
    ok = terrain_lab_cli_signals:on_interrupt(self(), {terrain_lab_testbed, interrupt}),
    Result = try terrain_lab_testbed:up(#{hosts => maps:get(hosts, Options, undefined),
                                          prefix => maps:get(prefix, Options), dir => Dir,
                                          slurm => maps:get(slurm, Options),
                                          topology => maps:get(topology, Options, undefined),
                                          rates => Rates, progress => Progress})
             after ok = terrain_lab_cli_signals:clear()
             end,
    case Result of
        {ok, #{<<"hosts">> := Hosts}} ->
            [terrain_lab_io:out(Io, "~ts ~ts~n", [N, A]) || #{<<"name">> := N, <<"address">> := A} <- Hosts],
            ok;
        {error, {testbed, {usage, _}} = Reason} -> {error, {usage, Reason}};
        {error, {testbed, {topology, _, {bad_spec, _}}} = Reason} -> {error, {usage, Reason}};
        {error, {testbed, {topology_hosts, _, _}} = Reason} -> {error, {usage, Reason}};
        {error, _} = Error -> Error
    end.

%% 1 to 16 integers from 1 to 100000 (an empty --rates, or ',,', names none).
valid_rates(Texts) ->
    length(Texts) >= 1 andalso length(Texts) =< 16
        andalso lists:all(fun(T) -> case string:to_integer(T) of
                                        {N, ""} -> N >= 1 andalso N =< 100000;
                                        _ -> false
                                    end
                          end, Texts).

env(Dir, Io) ->
    case terrain_lab_testbed:env_lines(Dir) of
        {ok, Lines} -> terrain_lab_io:out(Io, "~ts", [Lines]);
        {error, _} = Error -> Error
    end.

status(Dir, Io) ->
    case terrain_lab_testbed:status(Dir) of
        {ok, #{<<"dir">> := D, <<"slurm">> := Slurm}, Lines} ->
            terrain_lab_io:out(Io, "testbed in ~ts~ts~n", [D, case Slurm of true -> " (with SLURM)"; false -> "" end]),
            [terrain_lab_io:out(Io, "~-18ts ~ts~n", [What, string:replace(State, "\n", "; ", all)])
             || {What, State} <- Lines],
            ok;
        {error, _} = Error ->
            Error
    end.

down(Dir, Progress, Io) ->
    case terrain_lab_testbed:down(Dir, Progress) of
        {ok, Lines} -> [terrain_lab_io:out(Io, "~ts~n", [L]) || L <- Lines], ok;
        {error, _} = Error -> Error
    end.
