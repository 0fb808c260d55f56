%% Test helper: N "hosts" on this machine, each a network namespace joined to a bridge
%% by a veth pair, with its own address, `lo' up, its own sshd bound to that address
%% (a generated host key, an authorized test key) and its own epmd.
%%
%% ```
%% {ok, Hosts} = terrain_lab_test_hosts:start(4, Dir),
%% SshOption = terrain_lab_test_hosts:ssh_option(Hosts),   % "ConfigFile=Dir/ssh_config"
%% ...
%% ok = terrain_lab_test_hosts:stop(Hosts).
%% '''
%% The ssh client configuration (key, known hosts with the generated host keys,
%% StrictHostKeyChecking yes) is written to `Dir/ssh_config' and given to terrain the
%% way a user's would be (`--ssh-option ConfigFile=FILE', ssh's `-F'). {@link stop/1}
%% kills every process left in each namespace (sshd, epmd, and anything a test left),
%% deletes the namespaces and the bridge; it is safe to call twice. Names carry the OS
%% pid of the test VM, so concurrent runs do not collide, and the subnet is
%% 10.213.<pid mod 250>.0/24 on a bridge of this machine only: nothing is routed off it.
-module(terrain_lab_test_hosts).

-export([available/0, start/2, stop/1, ssh_option/1, addresses/1, namespaces/1,
         pids/1, netns_of_pid/1, netns_inode/1]).

-define(DEADLINE_MS, 15000).

%% @doc `true', or `{false, Why}' when this machine cannot make test hosts.
available() ->
    Missing = [P || P <- ["ip", "ssh", "ssh-keygen", "/usr/sbin/sshd"],
                    os:find_executable(P) =:= false andalso not filelib:is_regular(P)],
    case {os:cmd("id -u"), Missing} of
        {"0\n", []} -> true;
        {"0\n", _} -> {false, {missing, Missing}};
        _ -> {false, not_root}
    end.

%% @doc Makes `N' hosts; their keys and configuration go to `Dir'. On a failure
%% everything made so far is removed again.
start(N, Dir) ->
    Id = os:getpid(),
    Net = integer_to_list(list_to_integer(Id) rem 250),
    Bridge = "trnbr" ++ Id,
    Base = #{id => Id, dir => Dir, bridge => Bridge, hosts => []},
    try
        ok = filelib:ensure_dir(filename:join(Dir, "x")),
        ok = filelib:ensure_dir("/run/sshd/x"),
        sh(["ip link add ", Bridge, " type bridge"]),
        sh(["ip addr add 10.213.", Net, ".1/24 dev ", Bridge]),
        sh(["ip link set ", Bridge, " up"]),
        Key = filename:join(Dir, "id_test"),
        sh(["rm -f ", Key, " ", Key, ".pub && ssh-keygen -q -t ed25519 -N '' -C terrain-test -f ", Key]),
        ok = file:write_file(filename:join(Dir, "authorized_keys"), element(2, file:read_file(Key ++ ".pub"))),
        Hosts = lists:foldl(fun(I, Acc) ->
                                    Host = make_host(I, Net, Base),
                                    Acc#{hosts := maps:get(hosts, Acc) ++ [Host]}
                            end, Base, lists:seq(1, N)),
        write_client_config(Hosts),
        [await_sshd(H) || H <- maps:get(hosts, Hosts)],
        {ok, Hosts}
    catch
        Class:Reason:Stack ->
            Partial = partial(Base),
            stop(Partial),
            erlang:raise(Class, Reason, Stack)
    end.

%% @doc Removes the hosts: kills every process in their namespaces, deletes the
%% namespaces and the bridge. Returns ok even when some were already gone.
stop(#{bridge := Bridge, id := Id}) ->
    Namespaces = [NS || NS <- existing_namespaces(), lists:prefix("trn" ++ Id ++ "-", NS)],
    lists:foreach(fun(NS) ->
                          [os:cmd("kill -9 " ++ P) || P <- netns_pids(NS)],
                          await(fun() -> netns_pids(NS) =:= [] end),
                          os:cmd("ip netns del " ++ NS)
                  end, Namespaces),
    _ = os:cmd("ip link del " ++ Bridge ++ " 2>/dev/null"),
    ok.

%% @doc The value of terrain's `--ssh-option' for these hosts.
ssh_option(#{dir := Dir}) ->
    "ConfigFile=" ++ filename:join(Dir, "ssh_config").

%% @doc The hosts' addresses, in order.
addresses(#{hosts := Hosts}) ->
    [A || #{address := A} <- Hosts].

%% @doc The hosts' namespaces, in order.
namespaces(#{hosts := Hosts}) ->
    [NS || #{ns := NS} <- Hosts].

%% @doc `[{Pid, Command}]' of the processes running in namespace `NS'.
pids(NS) ->
    [{P, string:trim(os:cmd("cat /proc/" ++ P ++ "/comm 2>/dev/null"))} || P <- netns_pids(NS)].

%% @doc The network namespace (inode) of an OS process.
netns_of_pid(OsPid) ->
    case file:read_link("/proc/" ++ OsPid ++ "/ns/net") of
        {ok, "net:[" ++ Rest} -> {ok, string:trim(Rest, trailing, "]")};
        Other -> Other
    end.

%% @doc The inode of a named namespace, comparable with {@link netns_of_pid/1}.
netns_inode(NS) ->
    string:trim(os:cmd("stat -L -c %i /run/netns/" ++ NS)).

%%--------------------------------------------------------------------

make_host(I, Net, #{id := Id, dir := Dir, bridge := Bridge}) ->
    NS = "trn" ++ Id ++ "-" ++ integer_to_list(I),
    Veth = "trv" ++ Id ++ "x" ++ integer_to_list(I),
    Address = "10.213." ++ Net ++ "." ++ integer_to_list(I + 1),
    sh(["ip netns add ", NS]),
    sh(["ip link add ", Veth, " type veth peer name eth0 netns ", NS]),
    sh(["ip link set ", Veth, " master ", Bridge, " up"]),
    sh(["ip -n ", NS, " addr add ", Address, "/24 dev eth0"]),
    sh(["ip -n ", NS, " link set eth0 up"]),
    sh(["ip -n ", NS, " link set lo up"]),
    HostDir = filename:join(Dir, NS),
    ok = filelib:ensure_dir(filename:join(HostDir, "x")),
    HostKey = filename:join(HostDir, "host_key"),
    sh(["rm -f ", HostKey, " ", HostKey, ".pub && ssh-keygen -q -t ed25519 -N '' -C ", NS, " -f ", HostKey]),
    Config = filename:join(HostDir, "sshd_config"),
    ok = file:write_file(Config, ["ListenAddress ", Address, "\nPort 22\nHostKey ", HostKey,
                                  "\nAuthorizedKeysFile ", filename:join(Dir, "authorized_keys"),
                                  "\nPidFile ", filename:join(HostDir, "sshd.pid"),
                                  "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                                  "PermitRootLogin prohibit-password\nMaxStartups 100\n"]),
    sh(["ip netns exec ", NS, " /usr/sbin/sshd -f ", Config, " -E ", filename:join(HostDir, "sshd.log")]),
    sh(["ip netns exec ", NS, " epmd -daemon"]),
    #{ns => NS, address => Address, host_key => HostKey}.

write_client_config(#{dir := Dir, hosts := Hosts}) ->
    Known = [[A, " ", hd(string:split(element(2, file:read_file(K ++ ".pub")), " ", trailing)), "\n"]
             || #{address := A, host_key := K} <- Hosts],
    ok = file:write_file(filename:join(Dir, "known_hosts"), Known),
    ok = file:write_file(filename:join(Dir, "ssh_config"),
                         ["Host ", lists:join(" ", [Addr || #{address := Addr} <- Hosts]), "\n",
                          "  IdentityFile ", filename:join(Dir, "id_test"),
                          "\n  UserKnownHostsFile ", filename:join(Dir, "known_hosts"),
                          "\n  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n"]).

await_sshd(#{address := Address} = Host) ->
    {ok, Ip} = inet:parse_address(Address),
    true = await(fun() -> case gen_tcp:connect(Ip, 22, [], 200) of
                              {ok, S} -> gen_tcp:close(S), true;
                              {error, _} -> false
                          end end) orelse error({sshd_not_listening, Host}).

partial(#{id := Id} = Base) ->
    Base#{hosts := [#{ns => NS} || NS <- existing_namespaces(), lists:prefix("trn" ++ Id ++ "-", NS)]}.

existing_namespaces() ->
    [hd(string:split(L, " ")) || L <- string:split(os:cmd("ip netns list"), "\n", all), L =/= ""].

netns_pids(NS) ->
    [P || P <- string:lexemes(os:cmd("ip netns pids " ++ NS ++ " 2>/dev/null"), "\n "), P =/= ""].

await(Fun) ->
    await(Fun, erlang:monotonic_time(millisecond) + ?DEADLINE_MS).

await(Fun, Deadline) ->
    case Fun() of
        true -> true;
        false ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> false;
                false -> receive after 50 -> await(Fun, Deadline) end
            end
    end.

sh(Command) ->
    Flat = lists:flatten(Command),
    Port = open_port({spawn_executable, "/bin/sh"}, [{args, ["-c", Flat]}, exit_status, stderr_to_stdout, binary]),
    collect(Port, Flat, []).

collect(Port, Command, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, Command, [D | Acc]);
        {Port, {exit_status, 0}} -> ok;
        {Port, {exit_status, Code}} -> error({command_failed, Command, Code, iolist_to_binary(lists:reverse(Acc))})
    after ?DEADLINE_MS ->
        port_close(Port),
        error({command_timeout, Command})
    end.
