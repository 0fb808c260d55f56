%% @private
%% @doc Hosts files and the hosts of a spec: `terrain up --hosts FILE [--per-host N]'.
%%
%% A hosts file lists one host a line; a line may also be a SLURM hostlist expression
%% (`atcn[019-036]', expanded by `terrain_lab_hostlist'); `#' starts a comment; blank
%% lines are skipped. {@link spec_terms/2} turns the hosts into a cluster spec: one
%% group per host (named after the host) holding `PerHost' nodes `HOST_1'..`HOST_N',
%% each with the node option `host => "HOST"', in the order of the file.
%%
%% {@link check_placement/1} is the launcher's guard: a spec runs either on this
%% machine (no node names another host: short names, `erl -detached' here) or on other
%% hosts (every node names a host that is not this machine: long names `NAME@HOST',
%% started over ssh by `terrain_lab_vm'); a spec that mixes both is refused before
%% anything starts. For a cluster on other hosts the CLI's VM takes the long name
%% `terrain_cli_<OS pid>@ADDRESS', ADDRESS being this machine's end of the route to
%% the first host (recorded in the state directory's `cli_host'). The remaining
%% functions are the remote halves of the launcher: the node record of a VM on another
%% host, and the removal of its files there once `terrain_lab_vm' has stopped it.
-module(terrain_lab_hosts).

%% API
-export([read_file/1,
         spec_terms/2,
         host_group/2,
         write_spec/3,
         check_placement/1,
         remote/1,
         netem_option/2,
         is_local/1,
         format_error/1]).

%% API (the remote half of terrain_lab_launch)
-export([prepare_cli/2,
         remote_record/3,
         clean_remote/3]).

%% exports_not_used: read_file/1 and spec_terms/2 are the two halves of write_spec/3,
%% tested on their own.
-ignore_xref([{read_file, 1}, {spec_terms, 2}]).

-export_type([error_reason/0]).

-define(MAX_HOSTS_BYTES, 16 * 1024 * 1024).   % as a cluster spec (docs/CLI.md, "Limits")

-type error_reason() ::
        {hosts, {file, file:filename(), file:posix() | not_regular | {too_large, non_neg_integer()}}}
      | {hosts, {line, file:filename(), pos_integer(), terrain_lab_hostlist:error_reason()}}
      | {hosts, {empty, file:filename()}}
      | {hosts, {not_text, file:filename()}}
      | {hosts, {duplicate, file:filename(), string()}}
      | {hosts, {mixed, Local :: [atom()], Remote :: [atom()]}}
      | {hosts, {unroutable, string(), term()}}
      | {hosts, netem_on_other_hosts}
      | {hosts, {cpu_on_other_hosts, [atom()]}}
      | {hosts, {usage, string()}}.                  % CLI: --hosts used the wrong way

%%--------------------------------------------------------------------
%% API

%% @doc The hosts of a hosts file, in its order.
-spec read_file(file:filename()) -> {ok, [string()]} | {error, error_reason()}.
read_file(File) ->
    case terrain_lab_files:read(File, ?MAX_HOSTS_BYTES) of      % `--hosts /dev/zero' read for ever
        {ok, Binary} ->
            case unicode:characters_to_list(Binary) of
                Text when is_list(Text) -> parse(File, string:split(Text, "\n", all));
                _ -> {error, {hosts, {not_text, File}}}    % not UTF-8: a binary file
            end;
        {error, {read, File, Why}} -> {error, {hosts, {file, File, Why}}}
    end.

%% @doc The terms of a cluster spec (as `terrain_lab_spec:from_terms/2' takes them)
%% with `PerHost' nodes on each host.
-spec spec_terms([string()], pos_integer()) -> [tuple()].
spec_terms(Hosts, PerHost) when is_list(Hosts), is_integer(PerHost), PerHost >= 1 ->
    [{cluster, hosts, #{}} | [host_group(Host, PerHost) || Host <- Hosts]];
spec_terms(Hosts, PerHost) ->
    error(badarg, [Hosts, PerHost]).

%% @doc The spec group of one host: named after the host, holding `Count' nodes
%% `HOST_1'..`HOST_Count' with the node option `host => Host' (also used by
%% `terrain_lab_slurm').
-spec host_group(string(), pos_integer()) -> tuple().
host_group(Host, Count) when is_integer(Count), Count >= 1 ->
    {group, list_to_atom(safe(Host)), #{},
     [{node, list_to_atom(safe(Host) ++ "_" ++ integer_to_list(I)), #{host => Host}} || I <- lists:seq(1, Count)]}.

%% @doc Reads the hosts file `HostsFile' and writes the spec with `PerHost' nodes per
%% host to `SpecFile' (validated first); returns the hosts.
-spec write_spec(file:filename(), pos_integer(), file:filename()) ->
          {ok, [string()]} | {error, error_reason() | terrain_lab_spec:error_reason() | terrain_lab_files:reason()}.
write_spec(HostsFile, PerHost, SpecFile) ->
    maybe_write(read_file(HostsFile), PerHost, SpecFile).

%% @doc `{ok, Spec}' when the spec runs on this machine only or on other hosts only
%% (see the module doc) and, for other hosts, the first host can be routed to.
-spec check_placement(terrain_lab_spec:spec()) -> {ok, terrain_lab_spec:spec()} | {error, error_reason()}.
check_placement(Spec) ->
    Nodes = terrain_lab_spec:nodes(Spec),
    Remote = [N || #{name := N, host := H} <- Nodes, not is_local(H)],
    case {[N || #{name := N} <- Nodes, not lists:member(N, Remote)], Remote} of
        {_, []} -> {ok, Spec};
        {[], [_ | _]} ->
            Host = first_host(Spec),
            %% CPU emulation (terrain_lab_cgroup) puts a VM's OS pid in a cgroup of this
            %% machine: for a VM on another host that would be some other process here.
            case {[N || #{name := N} = Node <- Nodes, is_map_key(cpu, Node) orelse is_map_key(cpu_per_scheduler, Node)],
                  terrain_lab_ssh:cli_host(Host)} of
                {[_ | _] = Capped, _} -> {error, {hosts, {cpu_on_other_hosts, Capped}}};
                {[], {ok, _}} -> {ok, Spec};
                {[], {error, Why}} -> {error, {hosts, {unroutable, Host, Why}}}
            end;
        {Local, _} -> {error, {hosts, {mixed, Local, Remote}}}
    end.

%% @doc Whether the nodes of a spec (checked by {@link check_placement/1}) run on
%% other hosts.
-spec remote(terrain_lab_spec:spec()) -> boolean().
remote(Spec) ->
    lists:any(fun(#{host := H}) -> not is_local(H); (#{}) -> false end, terrain_lab_spec:nodes(Spec)).

%% @doc The `--netem' option for a spec: unchanged for a spec that runs here; for
%% one on other hosts the links are not emulated (`auto' becomes `off', `on' is an
%% error): the emulation is made for VMs of one machine.
-spec netem_option(terrain_lab_spec:spec(), string()) -> {ok, string()} | {error, error_reason()}.
netem_option(Spec, Option) ->
    case {remote(Spec), Option} of
        {false, _} -> {ok, Option};
        {true, "on"} -> {error, {hosts, netem_on_other_hosts}};
        {true, "auto"} -> {ok, "off"};
        {true, _} -> {ok, Option}
    end.

%% @doc Records the CLI's address for a cluster on other hosts in `Dir/cli_host', so
%% that every command joins it with a long name
%% (`terrain_lab_cluster_state:connect_cli/1').
-spec prepare_cli(terrain_lab_spec:spec(), file:filename()) -> ok | {error, term()}.
prepare_cli(Spec, Dir) ->
    {ok, Address} = terrain_lab_ssh:cli_host(first_host(Spec)),   % routable: check_placement/1 made sure
    terrain_lab_files:write(filename:join(Dir, "cli_host"), Address).

%% @doc A node record of the state for a node on `Host': the host and the ssh options
%% that reach it are recorded with it, for status and stop; for a VM started in a
%% SLURM job step (`terrain up --slurm'), also the local OS pid of its `srun'.
-spec remote_record(map(), string(), terrain_lab_ssh:context()) -> map().
remote_record(#{name := Name} = Record, Host, #{ssh_options := SshOptions, dir := Dir} = Context) ->
    Remote = Record#{host => list_to_binary(Host), ssh_options => [list_to_binary(O) || O <- SshOptions]},
    case maps:get(launcher, Context, ssh) of
        srun ->
            SrunPid = case file:read_file(srun_file(Dir, Name)) of
                          {ok, Pid} -> string:trim(Pid);
                          {error, _} -> null
                      end,
            Remote#{launcher => srun, srun_pid => SrunPid};
        ssh ->
            Remote
    end.

%% @doc Removes the files of a stopped node on another host (unless `StillRunning'):
%% its pid file and log there, and the cluster's directory there after its last node;
%% for a VM of a job step also its srun's pid file and log here. Nothing for a node of
%% this machine.
-spec clean_remote(map(), boolean(), file:filename()) -> ok.
clean_remote(#{<<"host">> := HostBin} = Record, StillRunning, Dir) ->
    Ssh = #{dir => Dir, ssh_options => [binary_to_list(O) || O <- maps:get(<<"ssh_options">>, Record, [])]},
    _ = StillRunning orelse remove_remote_files(binary_to_list(HostBin), Record, Ssh),
    clean_srun(Record, Dir);
clean_remote(#{}, _StillRunning, _Dir) ->
    ok.

%% @doc Whether `Host' names this machine: `localhost', a loopback address, or this
%% machine's host name (short or fully qualified).
-spec is_local(string()) -> boolean().
is_local(Host) ->
    {ok, Short} = inet:gethostname(),
    lists:member(Host, ["localhost", Short, net_adm:localhost()])
        orelse case inet:parse_address(Host) of
                   {ok, {127, _, _, _}} -> true;
                   {ok, {0, 0, 0, 0, 0, 0, 0, 1}} -> true;
                   _ -> false
               end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({hosts, {file, File, Why}}) ->
    ["cannot read the hosts file ", terrain_lab_files:format_error({read, File, Why})];
format_error({hosts, {not_text, File}}) ->
    io_lib:format("the hosts file ~ts is not text (UTF-8): one host or hostlist expression a line", [File]);
format_error({hosts, {line, File, Line, Reason}}) ->
    io_lib:format("hosts file ~ts, line ~b: ~ts", [File, Line, terrain_lab_hostlist:format_error(Reason)]);
format_error({hosts, {empty, File}}) ->
    io_lib:format("the hosts file ~ts lists no host", [File]);
format_error({hosts, {duplicate, File, Host}}) ->
    io_lib:format("the hosts file ~ts lists ~ts more than once (use --per-host for several VMs on a host)",
                  [File, Host]);
format_error({hosts, {usage, Text}}) ->
    Text;
format_error({hosts, {mixed, Local, Remote}}) ->
    io_lib:format("the spec mixes nodes on this machine (~ts) with nodes on other hosts (~ts); give every node "
                  "a host that is not this machine, or none (docs/HOSTS.md)",
                  [lists:join(", ", [atom_to_list(N) || N <- Local]),
                   lists:join(", ", [atom_to_list(N) || N <- Remote])]);
format_error({hosts, netem_on_other_hosts}) ->
    "--netem on: network emulation is for clusters on this machine; on other hosts the links are real";
format_error({hosts, {cpu_on_other_hosts, Names}}) ->
    io_lib:format("cpu and cpu_per_scheduler emulate CPU capacity with cgroups of this machine; nodes on other hosts "
                  "cannot have them (~ts): their capacity is the host's own",
                  [lists:join(", ", [atom_to_list(N) || N <- Names])]);
format_error({hosts, {unroutable, Host, Why}}) ->
    io_lib:format("cannot find this machine's address towards ~ts: ~0tp", [Host, Why]).

%%--------------------------------------------------------------------
%% Internal functions

parse(File, Lines) ->
    Numbered = lists:zip(lists:seq(1, length(Lines)), Lines),
    Expanded = [{N, terrain_lab_hostlist:expand(Text)}
                || {N, Line} <- Numbered,
                   Text <- [string:trim(hd(string:split(Line, "#")))], Text =/= ""],
    case [{N, R} || {N, {error, R}} <- Expanded] of
        [{N, Reason} | _] ->
            {error, {hosts, {line, File, N, Reason}}};
        [] ->
            Hosts = lists:append([H || {_, {ok, H}} <- Expanded]),
            case {Hosts, Hosts -- lists:usort(Hosts)} of
                {[], _} -> {error, {hosts, {empty, File}}};
                {_, []} -> {ok, Hosts};
                {_, [Dup | _]} -> {error, {hosts, {duplicate, File, Dup}}}
            end
    end.

maybe_write({ok, Hosts}, PerHost, SpecFile) ->
    Terms = spec_terms(Hosts, PerHost),
    case terrain_lab_spec:from_terms(Terms, SpecFile) of
        {ok, _} ->
            Text = ["%% Generated by 'terrain up --hosts': one group per host.\n",
                    [io_lib:format("~tp.~n", [T]) || T <- Terms]],
            case terrain_lab_files:write(SpecFile, Text) of
                ok -> {ok, Hosts};
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end;
maybe_write({error, _} = Error, _PerHost, _SpecFile) ->
    Error.

%% A host name as a spec name: letters, digits, '_' and '-'; anything else becomes '_'.
safe(Host) ->
    [case (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z) orelse (C >= $0 andalso C =< $9)
              orelse C =:= $- of
         true -> C;
         false -> $_
     end || C <- Host].

first_host(Spec) ->
    hd([H || #{host := H} <- terrain_lab_spec:nodes(Spec)]).

%% A VM's srun (terrain up --slurm; ended by terrain_lab_vm:stop/2): its pid file and
%% log here.
clean_srun(#{<<"srun_pid">> := Pid, <<"name">> := Name}, Dir) when is_binary(Pid) ->
    File = srun_file(Dir, binary_to_atom(Name)),
    _ = file:delete(File),
    _ = file:delete(File ++ ".log"),
    ok;
clean_srun(_Record, _Dir) ->
    ok.

srun_file(Dir, Name) ->
    filename:join([Dir, "nodes", atom_to_list(Name) ++ ".srun"]).

%% The node's pid file and log on its host; the cookie and the directory after the
%% host's last node. A VM of a job step (terrain up --slurm) kept them in the home
%% it shares with this machine (as its code, written under the home's cache): they
%% are removed here, without ssh, which a SLURM cluster need not allow.
remove_remote_files(_Host, #{<<"srun_pid">> := P, <<"name">> := Name, <<"host">> := Host}, #{dir := Dir})
  when is_binary(P) ->
    RDir = filename:join(os:getenv("HOME", "/"), terrain_lab_ssh:remote_dir(Dir, binary_to_list(Host))),
    N = binary_to_list(Name),
    _ = [file:delete(filename:join(RDir, F)) || F <- ["nodes/" ++ N ++ ".pid", "nodes/" ++ N ++ ".log",
                                                       "tls/" ++ N ++ ".pem", "tls/" ++ N ++ ".ca.pem",
                                                       "tls/" ++ N ++ ".conf"]],
    case filelib:wildcard(filename:join([RDir, "nodes", "*.pid"])) of
        [] ->
            Logs = filelib:wildcard(filename:join([RDir, "nodes", "*.log"])),
            _ = [file:delete(F) || F <- [filename:join(RDir, "cookie") | Logs]],
            _ = [file:del_dir(D) || D <- [filename:join(RDir, "nodes"), filename:join(RDir, "tls"), RDir,
                                          filename:dirname(RDir)]],
            ok;
        _ ->
            ok
    end;
remove_remote_files(Host, #{<<"name">> := Name}, #{dir := Dir} = Ssh) ->
    RDir = terrain_lab_ssh:remote_dir(Dir, Host),
    N = binary_to_list(Name),
    Clean = ["cd ", terrain_lab_os:shell_quote(RDir), " 2>/dev/null || exit 0; rm -f nodes/",
             terrain_lab_os:shell_quote(N ++ ".pid"),
             " nodes/", terrain_lab_os:shell_quote(N ++ ".log"),
             %% TLS (terrain_lab_ssh): the node's certificate and key, CA certificate, option file
             " tls/", terrain_lab_os:shell_quote(N ++ ".pem"), " tls/", terrain_lab_os:shell_quote(N ++ ".ca.pem"),
             " tls/", terrain_lab_os:shell_quote(N ++ ".conf"),
             "; ls nodes/*.pid >/dev/null 2>&1 || { rm -f cookie nodes/*.log; rmdir nodes; rmdir tls 2>/dev/null;",
             " cd && rmdir ", terrain_lab_os:shell_quote(RDir), " ",
             terrain_lab_os:shell_quote(filename:dirname(RDir)), "; }; true"],
    _ = terrain_lab_ssh:run(Host, Clean, [], Ssh#{timeout => 10000}),
    ok.
