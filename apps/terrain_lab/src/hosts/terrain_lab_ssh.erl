%% @private
%% @doc The system `ssh' client for VMs on other hosts (the remote part of `terrain
%% up', `status' and `down'; docs/HOSTS.md): their names, directories, pids, liveness
%% and kill. The VMs themselves are started by `terrain_lab_vm' (transport `ssh').
%%
%% Every ssh call runs `ssh -o BatchMode=yes -o ConnectTimeout=S [user options] HOST
%% COMMAND' under a deadline (the ssh process is killed when it passes), so the user's
%% `~/.ssh/config', keys and known hosts apply and nothing ever prompts. The remote
%% command is a POSIX shell line; every argument in it is single-quoted here.
%%
%% A node on host H runs in the remote directory `.cache/terrain/remote/<id>/H'
%% (relative to the remote home; `<id>' is a hash of the local state directory):
%% `ssh' creates it with umask 077, reads the cluster's cookie from its standard input
%% into `cookie' there (mode 0600), makes sure epmd runs, and starts `erl -detached'.
%% The VM writes its OS pid and node name to `nodes/NAME.pid', reads the cookie file and
%% only then starts distribution with the long name `NAME@H' — the cookie never appears
%% on a command line, on either host. The VM's standard output and error go to
%% `nodes/NAME.log' there. The shell line is `terrain_lab_vm:shell_line/2''s; `terrain
%% up --slurm' runs the same line, with the VM in the foreground, in an srun job step
%% (transport `srun', chosen by the context's `launcher').
%%
%% With TLS distribution the node's certificate, key and CA certificate follow the
%% cookie on standard input (terrain_lab_vm; docs/HOSTS.md).
%%
%% terrain's code comes from the same directories as for local VMs
%% (`terrain_lab_code:vm_args/1'; the escript writes them under the home's cache,
%% so hosts that share the home directory see them) or, with the option `code_path',
%% from `DIR/<app>/ebin' for each of terrain's applications on the remote host.
-module(terrain_lab_ssh).

%% API
-export([context/3,
         node_name/3,
         cli_host/1,
         remote_dir/2,
         pid_of/3,
         alive/4,
         kill/4,
         run/4,
         format_error/1]).

-export_type([context/0, ssh_options/0]).

%% What the ssh calls of one cluster share.
-type context() :: #{dir := file:filename(),          % the local state directory
                     ssh_options := ssh_options(),
                     code := local | {root, file:filename()}, % terrain's code for the remote VMs
                                                       % (terrain_lab_vm)
                     %% terrain up --slurm (terrain_lab_slurm): VMs in srun job steps
                     launcher => ssh | srun,
                     deadline => integer(),            % monotonic ms: when a VM must answer
                     tls => boolean()}.                % distribution over TLS (terrain_lab_tls)

%% Extra ssh options, each given to ssh as `-o OPTION' (e.g. "IdentityFile=/k"), or
%% `-F FILE' when written "ConfigFile=FILE".
-type ssh_options() :: [string()].

-type error_reason() :: {ssh, {Host :: string(), timeout | {exit, integer(), string()}
                                                 | {run, terrain_lab_os:error_reason()}}}.

-define(CONNECT_TIMEOUT_S, 5).

%%--------------------------------------------------------------------
%% API

%% @doc The context of a cluster's ssh calls: `Dir' the local state directory,
%% `SshOptions' as given by the user, `CodePath' `undefined' (the local code
%% directories) or a directory that holds `<app>/ebin' on every host.
-spec context(file:filename(), ssh_options(), file:filename() | undefined) -> context().
context(Dir, SshOptions, CodePath) ->
    Code = case CodePath of
               undefined -> local;
               _ -> {root, CodePath}
           end,
    #{dir => Dir, ssh_options => SshOptions, code => Code}.

%% @doc The long node name of spec node `Name' on `Host'. Erlang's long names need a
%% host part with a dot: a host named without one (`atcn127', the node names of a
%% SLURM allocation, `tb1' of a testbed) is written as its IPv4 address, resolved
%% here (the resolver of this VM: DNS, /etc/hosts, or the `ERL_INETRC' file that
%% `terrain testbed env' exports); a name that does not resolve is kept as it is.
-spec node_name(string(), atom(), string()) -> node().
node_name(Prefix, Name, Host) ->
    list_to_atom(Prefix ++ atom_to_list(Name) ++ "@" ++ dist_host(Host)).

%% The host part of the long node names of VMs on `Host' (see node_name/3).
-spec dist_host(string()) -> string().
dist_host(Host) ->
    case {lists:member($., Host) orelse lists:member($:, Host), inet:getaddr(Host, inet)} of
        {true, _} -> Host;
        {false, {ok, Address}} -> inet:ntoa(Address);
        {false, {error, _}} -> Host
    end.

%% @doc The address of this machine that `Host' is reached from (the local end of
%% the route to it), for the CLI's long node name. Nothing is sent: a UDP socket is
%% only connected.
-spec cli_host(string()) -> {ok, string()} | {error, term()}.
cli_host(Host) ->
    case inet:getaddr(Host, inet) of
        {ok, Address} ->
            {ok, Socket} = gen_udp:open(0, [inet]),
            try gen_udp:connect(Socket, Address, 4369) of
                ok ->
                    {ok, {Local, _Port}} = inet:sockname(Socket),
                    {ok, inet:ntoa(Local)};
                {error, _} = Error ->
                    Error
            after
                gen_udp:close(Socket)
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc The directory (relative to the remote home) of the cluster recorded in `Dir'
%% on `Host'.
-spec remote_dir(file:filename(), string()) -> string().
remote_dir(Dir, Host) ->
    Id = binary_to_list(binary:part(binary:encode_hex(crypto:hash(sha256, filename:absname(Dir))), 0, 12)),
    filename:join([".cache/terrain/remote", Id, Host]).

%% @doc The OS pid that the VM of spec node `Name' on `Host' wrote (its pid file also
%% holds its node name, after the pid).
-spec pid_of(string(), atom() | binary(), context() | map()) -> {ok, string()} | error.
pid_of(Host, Name, #{dir := Dir} = Context) ->
    File = filename:join([remote_dir(Dir, Host), "nodes", to_list(Name) ++ ".pid"]),
    case run(Host, ["cat ", terrain_lab_os:shell_quote(File), " 2>/dev/null"], [], Context#{timeout => 10000}) of
        {ok, Text} ->
            case string:lexemes(Text, " \n") of
                [Pid | _] -> {ok, Pid};
                [] -> error
            end;
        _ -> error
    end.

%% @doc Whether `OsPid' on `Host' is still a VM of this cluster: `true', `false', or
%% `{error, Why}' when the host cannot be reached.
-spec alive(string(), string(), pos_integer(), context() | map()) -> boolean() | {error, error_reason()}.
alive(Host, OsPid, Timeout, #{dir := Dir} = Context) ->
    Check = [ours(Dir, Host, OsPid), " && echo yes || echo no"],
    case run(Host, Check, [], Context#{timeout => Timeout}) of
        {ok, "yes" ++ _} -> true;
        {ok, _} -> false;
        {error, _} = Error -> Error
    end.

%% @doc Kills `OsPid' on `Host' if it is still a VM of this cluster. Returns whether
%% it did (`{error, _}' when the host cannot be reached). The lab's one signal to a
%% process on another host (local ones go through `terrain_lab_os'): a shell line run
%% over ssh that sends SIGKILL only if the process's command line still names this
%% cluster's remote directory, checked on the host just before.
-spec kill(string(), string(), pos_integer(), context() | map()) -> boolean() | {error, error_reason()}.
kill(Host, OsPid, Timeout, #{dir := Dir} = Context) ->
    Kill = [ours(Dir, Host, OsPid), " && kill -9 ", terrain_lab_os:shell_quote(OsPid), " && echo killed || echo no"],
    case run(Host, Kill, [], Context#{timeout => Timeout}) of
        {ok, "killed" ++ _} -> true;
        {ok, _} -> false;
        {error, _} = Error -> Error
    end.

%% @doc Runs the shell line `Command' on `Host' over ssh with `Stdin' on its standard
%% input, and returns its standard output; killed at `timeout' ms.
-spec run(string(), iodata(), iodata(), #{ssh_options := ssh_options(), timeout := pos_integer(),
                                          atom() => term()}) ->
          {ok, string()} | {error, error_reason()}.
run(Host, Command, Stdin, #{ssh_options := SshOptions, timeout := Timeout}) ->
    Args = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=" ++ integer_to_list(?CONNECT_TIMEOUT_S)]
        ++ lists:append([ssh_option(O) || O <- SshOptions]) ++ [Host, lists:flatten(io_lib:format("~ts", [Command]))],
    case terrain_lab_os:run("ssh", Args, #{timeout => Timeout, stdin => Stdin}) of
        {ok, 0, Output} -> {ok, unicode:characters_to_list(Output)};
        {ok, Code, Output} -> {error, {ssh, {Host, {exit, Code, unicode:characters_to_list(Output)}}}};
        {error, {run, _, {timeout, _, _}}} -> {error, {ssh, {Host, timeout}}};
        {error, Reason} -> {error, {ssh, {Host, {run, Reason}}}}
    end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason() | terrain_lab_slurm:error_reason()) -> iolist().
format_error({slurm, _} = Reason) ->
    terrain_lab_slurm:format_error(Reason);
format_error({ssh, {Host, timeout}}) ->
    io_lib:format("ssh to ~ts did not finish in time", [Host]);
format_error({ssh, {Host, {exit, 255, Output}}}) ->
    io_lib:format("ssh could not reach ~ts: ~ts", [Host, string:trim(Output)]);
format_error({ssh, {Host, {exit, 127, Output}}}) ->
    io_lib:format("a command is missing on ~ts (is Erlang/OTP installed and erl on the PATH?): ~ts",
                  [Host, string:trim(Output)]);
format_error({ssh, {Host, {exit, Code, Output}}}) ->
    io_lib:format("the remote command on ~ts failed with exit status ~b: ~ts", [Host, Code, string:trim(Output)]);
format_error({ssh, {Host, {run, Reason}}}) ->
    io_lib:format("ssh to ~ts: ~ts", [Host, terrain_lab_os:format_error(Reason)]).

%%--------------------------------------------------------------------
%% Internal functions

%% The remote shell test that `OsPid' is a VM of the cluster recorded in `Dir' (its
%% command line names the cluster's remote directory).
ours(Dir, Host, OsPid) ->
    terrain_lab_os:ours_command(OsPid, remote_dir(Dir, Host)).

ssh_option("ConfigFile=" ++ File) -> ["-F", File];
ssh_option(Option) -> ["-o", Option].

to_list(Name) when is_atom(Name) -> atom_to_list(Name);
to_list(Name) when is_binary(Name) -> binary_to_list(Name).
