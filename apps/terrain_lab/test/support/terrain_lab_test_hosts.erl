%% Test helper: N "hosts" on this machine for the ssh and SLURM suites: a testbed of
%% `terrain_lab_testbed' (the code of `terrain testbed up', one place for both): each
%% host a network namespace joined to a bridge by a veth pair, with its own address,
%% `lo' up, its own sshd (a generated host key, an authorized test key) and its own epmd.
%%
%% ```
%% {ok, Hosts} = terrain_lab_test_hosts:start(4, Dir),
%% SshOption = terrain_lab_test_hosts:ssh_option(Hosts),   % "ConfigFile=Dir/ssh_config"
%% ...
%% ok = terrain_lab_test_hosts:stop(Hosts).
%% '''
%% The ssh client configuration (key, known hosts with the generated host keys,
%% StrictHostKeyChecking yes) is the testbed's `Dir/ssh_config', given to terrain the
%% way a user's would be (`--ssh-option ConfigFile=FILE', ssh's `-F'); the hosts are
%% reached by address. {@link stop/1} is `terrain testbed down': it ends every process
%% left in each namespace (sshd, epmd, and anything a test left), deletes the
%% namespaces and the bridge; it is safe to call twice. The prefix carries the OS pid
%% of the test VM (`t<pid>h1'..), so concurrent runs do not collide; the subnet is a
%% free /24 of 10.214.0.0/16 on a bridge of this machine only.
-module(terrain_lab_test_hosts).

-export([available/0, start/2, stop/1, ssh_option/1, addresses/1, namespaces/1, bridge/1,
         pids/1, netns_of_pid/1, netns_inode/1]).

%% @doc `true', or `{false, Why}' when this machine cannot make test hosts.
available() ->
    case terrain_lab_testbed:available(false) of
        ok -> true;
        {error, Why} -> {false, lists:flatten(terrain_lab_testbed:format_error(Why))}
    end.

%% @doc Makes `N' hosts; their keys and configuration go to `Dir'. On a failure
%% everything made so far is removed again.
start(N, Dir) ->
    Prefix = "t" ++ integer_to_list(list_to_integer(os:getpid()) rem 100000) ++ "h",
    case terrain_lab_testbed:up(#{hosts => N, prefix => Prefix, dir => Dir, slurm => false, topology => undefined,
                                  rates => [], progress => fun(_) -> ok end}) of
        {ok, Testbed} -> {ok, Testbed};
        {error, Why} -> error({test_hosts, lists:flatten(terrain_lab_testbed:format_error(Why))})
    end.

%% @doc Removes the hosts (`terrain testbed down'). Returns ok even when they were
%% already gone.
stop(#{<<"dir">> := Dir}) ->
    _ = terrain_lab_testbed:down(binary_to_list(Dir), fun(_) -> ok end),
    ok.

%% @doc The value of terrain's `--ssh-option' for these hosts.
ssh_option(#{<<"dir">> := Dir}) ->
    "ConfigFile=" ++ filename:join(binary_to_list(Dir), "ssh_config").

%% @doc The hosts' addresses, in order.
addresses(#{<<"hosts">> := Hosts}) ->
    [binary_to_list(A) || #{<<"address">> := A} <- Hosts].

%% @doc The hosts' namespaces, in order.
namespaces(#{<<"hosts">> := Hosts}) ->
    [binary_to_list(N) || #{<<"name">> := N} <- Hosts].

%% @doc The bridge that joins the hosts.
bridge(#{<<"bridge">> := Bridge}) ->
    binary_to_list(Bridge).

%% @doc `[{Pid, Command}]' of the processes running in namespace `NS'.
pids(NS) ->
    terrain_lab_testbed:host_pids(NS).

%% @doc The network namespace (inode) of an OS process.
netns_of_pid(OsPid) ->
    case file:read_link("/proc/" ++ OsPid ++ "/ns/net") of
        {ok, "net:[" ++ Rest} -> {ok, string:trim(Rest, trailing, "]")};
        Other -> Other
    end.

%% @doc The inode of a named namespace, comparable with {@link netns_of_pid/1}.
netns_inode(NS) ->
    string:trim(os:cmd("stat -L -c %i /run/netns/" ++ NS)).
