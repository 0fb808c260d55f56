%% Clusters on other hosts: 4 test hosts (network namespaces with their own address,
%% sshd and epmd; terrain_lab_test_hosts), `terrain up' of 8 VMs over ssh (2 per
%% host), each VM in its host's namespace, status, choose and probe across the hosts,
%% `terrain down', a failed `up' that stops what it started, and nothing of the test
%% left in any namespace. The escript runs as its own OS process (its CLI node takes a
%% long name, which this CT node, a short-named one, could not).
-module(terrain_lab_hosts_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include_lib("kernel/include/file.hrl").

-export([suite/0, all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([up_starts_8_vms_on_4_hosts/0, up_starts_8_vms_on_4_hosts/1,
         every_vm_runs_in_its_hosts_namespace/0, every_vm_runs_in_its_hosts_namespace/1,
         status_reports_every_node_up/0, status_reports_every_node_up/1,
         choose_at_a_node_orders_by_distance_across_hosts/0, choose_at_a_node_orders_by_distance_across_hosts/1,
         probe_measures_every_pair_across_hosts/0, probe_measures_every_pair_across_hosts/1,
         down_stops_every_vm_on_every_host/0, down_stops_every_vm_on_every_host/1,
         a_failed_up_stops_what_it_started_everywhere/0, a_failed_up_stops_what_it_started_everywhere/1,
         removing_the_hosts_leaves_no_process_or_namespace/0, removing_the_hosts_leaves_no_process_or_namespace/1]).
-export([up_tls_starts_the_host_spec_with_private_certificates/0, up_tls_starts_the_host_spec_with_private_certificates/1,
         a_query_across_the_hosts_runs_through_the_cli_over_tls/0, a_query_across_the_hosts_runs_through_the_cli_over_tls/1,
         every_vm_of_the_tls_cluster_runs_inet_tls/0, every_vm_of_the_tls_cluster_runs_inet_tls/1,
         a_vm_with_the_cookie_but_no_certificate_of_the_ca_cannot_connect/0,
         a_vm_with_the_cookie_but_no_certificate_of_the_ca_cannot_connect/1,
         down_of_the_tls_cluster_leaves_nothing_behind/0, down_of_the_tls_cluster_leaves_nothing_behind/1]).

-define(HOSTS, 4).
-define(PER_HOST, 2).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [{group, cluster}, {group, tls}, a_failed_up_stops_what_it_started_everywhere,
     removing_the_hosts_leaves_no_process_or_namespace].

groups() ->
    [{cluster, [sequence], [up_starts_8_vms_on_4_hosts, every_vm_runs_in_its_hosts_namespace,
                            status_reports_every_node_up, choose_at_a_node_orders_by_distance_across_hosts,
                            probe_measures_every_pair_across_hosts, down_stops_every_vm_on_every_host]},
     %% the TLS case: the same spec with `terrain up --tls' (docs/HOSTS.md)
     {tls, [sequence], [up_tls_starts_the_host_spec_with_private_certificates,
                        a_query_across_the_hosts_runs_through_the_cli_over_tls,
                        every_vm_of_the_tls_cluster_runs_inet_tls,
                        a_vm_with_the_cookie_but_no_certificate_of_the_ca_cannot_connect,
                        down_of_the_tls_cluster_leaves_nothing_behind]}].

init_per_suite(Config) ->
    case terrain_lab_test_hosts:available() of
        true ->
            Dir = ?config(priv_dir, Config),
            {ok, Hosts} = terrain_lab_test_hosts:start(?HOSTS, filename:join(Dir, "hosts")),
            Spec = filename:join(Dir, "hosts.cluster"),
            ok = file:write_file(Spec, spec_text(terrain_lab_test_hosts:addresses(Hosts))),
            [{hosts, Hosts}, {spec, Spec}, {state_dir, filename:join(Dir, "state")} | Config];
        {false, Why} ->
            {skip, io_lib:format("cannot make test hosts here: ~p", [Why])}
    end.

%% Runs even when cases failed: the namespaces never outlive the suite.
end_per_suite(Config) ->
    Hosts = ?config(hosts, Config),
    _ = terrain(Config, ["down", "--state-dir", ?config(state_dir, Config)]),
    _ = terrain(Config, ["down", "--state-dir", tls_state_dir(Config)]),
    terrain_lab_test_hosts:stop(Hosts).

%%--------------------------------------------------------------------

up_starts_8_vms_on_4_hosts() ->
    [{doc, "terrain up of a spec of 8 nodes, 2 on each of 4 ssh hosts, exits 0 and prints the 8 long names."}].
up_starts_8_vms_on_4_hosts(Config) ->
    T0 = erlang:monotonic_time(millisecond),
    {Code, Out, Err} = terrain(Config, ["up", ?config(spec, Config), "--state-dir", ?config(state_dir, Config),
                                        "--ssh-option", terrain_lab_test_hosts:ssh_option(?config(hosts, Config)),
                                        "--timeout", "30000"]),
    Ms = erlang:monotonic_time(millisecond) - T0,
    ct:pal("terrain up: ~b ms~n~ts~ts", [Ms, Out, Err]),
    ?assertEqual(0, Code),
    Expected = [atom_to_list(N) || N <- expected_nodes(Config)],
    ?assertEqual(Expected, [hd(string:lexemes(L, " ")) || L <- tl(string:split(string:trim(Out), "\n", all))]),
    {comment, io_lib:format("8 VMs on 4 hosts up in ~b ms", [Ms])}.

every_vm_runs_in_its_hosts_namespace() ->
    [{doc, "Each recorded OS pid is a beam.smp in the network namespace of the host its node name names."}].
every_vm_runs_in_its_hosts_namespace(Config) ->
    Hosts = ?config(hosts, Config),
    ByAddress = lists:zip(terrain_lab_test_hosts:addresses(Hosts), terrain_lab_test_hosts:namespaces(Hosts)),
    {ok, #{<<"nodes">> := Nodes}} = terrain_lab_cluster_state:read(?config(state_dir, Config)),
    ?assertEqual(?HOSTS * ?PER_HOST, length(Nodes)),
    lists:foreach(fun(#{<<"node">> := Node, <<"host">> := Host, <<"os_pid">> := Pid}) ->
                          [_, NodeHost] = string:split(binary_to_list(Node), "@"),
                          ?assertEqual(binary_to_list(Host), NodeHost),
                          NS = proplists:get_value(NodeHost, ByAddress),
                          ?assertEqual({ok, terrain_lab_test_hosts:netns_inode(NS)},
                                       terrain_lab_test_hosts:netns_of_pid(binary_to_list(Pid))),
                          ?assert(lists:member({binary_to_list(Pid), "beam.smp"}, terrain_lab_test_hosts:pids(NS)))
                  end, Nodes).

status_reports_every_node_up() ->
    [{doc, "terrain status --json: all 8 nodes up, each with its host."}].
status_reports_every_node_up(Config) ->
    {0, Out, _} = terrain(Config, ["status", "--json", "--state-dir", ?config(state_dir, Config)]),
    {ok, #{<<"nodes">> := Nodes}} = terrain_json:decode(list_to_binary(Out)),
    ?assertEqual(lists:duplicate(?HOSTS * ?PER_HOST, <<"up">>), [S || #{<<"state">> := S} <- Nodes]).

choose_at_a_node_orders_by_distance_across_hosts() ->
    [{doc, "terrain choose --at a node of host 1 --order-by distance: its host's two nodes come first, "
           "then the other hosts' nodes; all 8 are chosen."}].
choose_at_a_node_orders_by_distance_across_hosts(Config) ->
    choose_orders_by_host(Config, ?config(state_dir, Config), expected_nodes(Config)).

%% terrain choose --at the first node --order-by distance chooses all `Nodes', the
%% first two (the first host's) first.
choose_orders_by_host(Config, State, [First, Second | Others]) ->
    {Code, Out, Err} = terrain(Config, ["choose", "--state-dir", State, "--at", atom_to_list(First),
                                        "--order-by", "distance", "{vm_num_processors, ge, 1}"]),
    ct:pal("choose: ~ts~ts", [Out, Err]),
    ?assertEqual(0, Code),
    Chosen = [list_to_atom(L) || L <- string:lexemes(Out, "\n")],
    ?assertEqual(lists:sort([First, Second | Others]), lists:sort(Chosen)),
    ?assertEqual(lists:sort([First, Second]), lists:sort(lists:sublist(Chosen, 2))).

probe_measures_every_pair_across_hosts() ->
    [{doc, "terrain probe over the 8 nodes writes a latency matrix with a positive round trip for all 56 "
           "ordered pairs, none failed."}].
probe_measures_every_pair_across_hosts(Config) ->
    RunsDir = filename:join(?config(priv_dir, Config), "runs"),
    {Code, _Out, Err} = terrain(Config, ["probe", "--state-dir", ?config(state_dir, Config), "--batches", "3",
                                         "--messages", "10", "--runs-dir", RunsDir]),
    ?assertEqual(0, Code, Err),
    [Latency] = filelib:wildcard(filename:join([RunsDir, "*", "latency.json"])),
    {ok, #{<<"nodes">> := Nodes, <<"failed">> := Failed, <<"stats">> := #{<<"min">> := Min}}} =
        terrain_json:read_file(Latency),
    ?assertEqual([atom_to_binary(N) || N <- expected_nodes(Config)], Nodes),
    ?assertEqual([], Failed),
    Offdiagonal = [RoundTrip || {I, Row} <- lists:enumerate(Min), {J, RoundTrip} <- lists:enumerate(Row), I =/= J],
    ?assertEqual(?HOSTS * ?PER_HOST * (?HOSTS * ?PER_HOST - 1), length(Offdiagonal)),
    ?assert(lists:all(fun(R) -> is_number(R) andalso R > 0 end, Offdiagonal)).

down_stops_every_vm_on_every_host() ->
    [{doc, "terrain down stops all 8 VMs by name; afterwards only the test's sshd and epmd run in each namespace, "
           "and the cluster's files on the hosts are gone."}].
down_stops_every_vm_on_every_host(Config) ->
    down_leaves_the_hosts_clean(Config, ?config(state_dir, Config)).

%% terrain down of the cluster recorded in `State' stops all 8 VMs; only the hosts'
%% sshd and epmd remain in each namespace; the cluster's files on the hosts are gone.
down_leaves_the_hosts_clean(Config, State) ->
    {Code, Out, Err} = terrain(Config, ["down", "--state-dir", State]),
    ct:pal("down: ~ts~ts", [Out, Err]),
    ?assertEqual(0, Code),
    ?assertEqual(lists:duplicate(?HOSTS * ?PER_HOST, "stopped"),
                 [lists:last(string:lexemes(L, " ")) || L <- string:lexemes(Out, "\n")]),
    [?assertEqual(["epmd", "sshd"], lists:sort([C || {_, C} <- terrain_lab_test_hosts:pids(NS)]))
     || NS <- terrain_lab_test_hosts:namespaces(?config(hosts, Config))],
    ?assertEqual([], [H || H <- terrain_lab_test_hosts:addresses(?config(hosts, Config)),
                           filelib:is_dir(remote_dir(Config, State, H))]).

a_failed_up_stops_what_it_started_everywhere() ->
    [{doc, "A spec with one node on a host nobody answers for: up fails with exit 1 naming that node, and no VM "
           "of it is left on the hosts that did start theirs; the state is removed."}].
a_failed_up_stops_what_it_started_everywhere(Config) ->
    Hosts = ?config(hosts, Config),
    [A1, A2 | _] = terrain_lab_test_hosts:addresses(Hosts),
    Missing = lists:flatten(string:replace(A1, ".2", ".250", trailing)),
    Spec = filename:join(?config(priv_dir, Config), "bad.cluster"),
    ok = file:write_file(Spec, ["{cluster, bad, #{}}.\n",
                                io_lib:format("{node, good1, #{host => ~p}}.~n{node, good2, #{host => ~p}}.~n"
                                              "{node, lost, #{host => ~p}}.~n", [A1, A2, Missing])]),
    State = filename:join(?config(priv_dir, Config), "bad_state"),
    {Code, _Out, Err} = terrain(Config, ["up", Spec, "--state-dir", State, "--timeout", "15000",
                                         "--ssh-option", terrain_lab_test_hosts:ssh_option(Hosts)]),
    ct:pal("failed up: ~ts", [Err]),
    ?assertEqual(1, Code),
    ?assertMatch({match, _}, re:run(Err, "lost@" ++ re_quote(Missing) ++ ": ssh")),
    [?assertEqual(["epmd", "sshd"], lists:sort([C || {_, C} <- terrain_lab_test_hosts:pids(NS)]))
     || NS <- terrain_lab_test_hosts:namespaces(Hosts)],
    ?assertNot(filelib:is_dir(State)).

removing_the_hosts_leaves_no_process_or_namespace() ->
    [{doc, "Removing the test hosts kills their sshd and epmd and deletes every namespace and the bridge."}].
removing_the_hosts_leaves_no_process_or_namespace(Config) ->
    Hosts = ?config(hosts, Config),
    Namespaces = terrain_lab_test_hosts:namespaces(Hosts),
    ok = terrain_lab_test_hosts:stop(Hosts),
    Listed = os:cmd("ip netns list"),
    ?assertEqual([], [NS || NS <- Namespaces, string:find(Listed, NS) =/= nomatch]),
    ?assertEqual([], [P || NS <- Namespaces, P <- terrain_lab_test_hosts:pids(NS)]),
    ?assertEqual("", os:cmd("ip link show " ++ terrain_lab_test_hosts:bridge(Hosts) ++ " 2>/dev/null")).

%%--------------------------------------------------------------------
%% The TLS case

up_tls_starts_the_host_spec_with_private_certificates() ->
    [{doc, "terrain up --tls of the 8-node host spec exits 0 with the 8 long names; the state directory holds the "
           "CA and the CLI's certificate, key and option file, every node's on its host, each file mode 0600 in "
           "directories of mode 0700, and each certificate is verified by the CA."}].
up_tls_starts_the_host_spec_with_private_certificates(Config) ->
    State = tls_state_dir(Config),
    {Code, Out, Err} = terrain(Config, ["up", ?config(spec, Config), "--tls", "--state-dir", State, "--prefix", "tls_",
                                        "--ssh-option", terrain_lab_test_hosts:ssh_option(?config(hosts, Config)),
                                        "--timeout", "30000"]),
    ct:pal("terrain up --tls:~n~ts~ts", [Out, Err]),
    ?assertEqual(0, Code),
    ?assertEqual([atom_to_list(N) || N <- tls_nodes(Config)],
                 [hd(string:lexemes(L, " ")) || L <- tl(string:split(string:trim(Out), "\n", all))]),
    ?assertMatch({match, _}, re:run(Err, "distribution over TLS")),
    Tls = filename:join(State, "tls"),
    Local = [filename:join(Tls, F) || F <- ["ca.pem", "cli.pem", "cli.conf"]],
    Remote = [filename:join([remote_dir(Config, State, Host), "tls", Name ++ Suffix])
              || {Name, Host} <- tls_names_and_hosts(Config), Suffix <- [".pem", ".ca.pem", ".conf"]],
    ?assertEqual([{F, 8#600} || F <- Local ++ Remote], [{F, mode(F)} || F <- Local ++ Remote]),
    Dirs = [Tls, filename:join(Tls, "nodes") | lists:usort([filename:dirname(F) || F <- Remote])],
    ?assertEqual([{D, 8#700} || D <- Dirs], [{D, mode(D)} || D <- Dirs]),
    ?assertEqual(ok, terrain_lab_tls:verify(filename:join(Tls, "ca.pem"), filename:join(Tls, "cli.pem"))),
    [?assertEqual({F, ok}, {F, terrain_lab_tls:verify(filename:join(Tls, "ca.pem"), F)})
     || F <- Remote, lists:suffix(".pem", F), not lists:suffix(".ca.pem", F)].

a_query_across_the_hosts_runs_through_the_cli_over_tls() ->
    [{doc, "On the TLS cluster, terrain status --json reports 8 nodes up and tls true, and terrain choose --at a node "
           "of host 1 --order-by distance chooses all 8 with its host's two nodes first: the CLI joined over TLS."}].
a_query_across_the_hosts_runs_through_the_cli_over_tls(Config) ->
    State = tls_state_dir(Config),
    {0, Status, _} = terrain(Config, ["status", "--json", "--state-dir", State]),
    {ok, #{<<"nodes">> := Nodes, <<"tls">> := true}} = terrain_json:decode(list_to_binary(Status)),
    ?assertEqual(lists:duplicate(?HOSTS * ?PER_HOST, <<"up">>), [S || #{<<"state">> := S} <- Nodes]),
    choose_orders_by_host(Config, State, tls_nodes(Config)).

every_vm_of_the_tls_cluster_runs_inet_tls() ->
    [{doc, "A VM started with the CLI's certificate reaches every node; each was started with -proto_dist "
           "inet_tls, and every distribution connection it has (to the checker and to the other nodes after a "
           "ping round) is a TLS one: protocol tls in net_kernel:nodes_info/0 and a process, not a port, as its "
           "distribution controller."}].
every_vm_of_the_tls_cluster_runs_inet_tls(Config) ->
    State = tls_state_dir(Config),
    Nodes = tls_nodes(Config),
    with_peer(Config, checker, terrain_lab_tls:cli_optfile(State),
              fun(Checker) ->
                      Facts = [dist_facts(Checker, N, Nodes) || N <- Nodes],
                      ct:pal("dist facts: ~p", [Facts]),
                      lists:foreach(fun(#{proto_dist := Proto, connections := Connections}) ->
                                            ?assertEqual({ok, [["inet_tls"]]}, Proto),
                                            %% the other 7 nodes and the checker
                                            ?assert(length(Connections) >= length(Nodes)),
                                            ?assertEqual([], [C || {_, Protocol, IsProcess} = C <- Connections,
                                                                   Protocol =/= tls orelse not IsProcess])
                                    end, Facts)
              end).

a_vm_with_the_cookie_but_no_certificate_of_the_ca_cannot_connect() ->
    [{doc, "Three VMs with the cluster's cookie try to connect to a node of the TLS cluster: one over TLS without "
           "a certificate, one over TLS with a certificate of another CA (trusting the cluster's CA), one over "
           "plain TCP. Each ping is pang, and the node's connected nodes are the same before and after. A direct "
           "TLS client without a certificate is refused by the node's distribution port."}].
a_vm_with_the_cookie_but_no_certificate_of_the_ca_cannot_connect(Config) ->
    State = tls_state_dir(Config),
    [Target | _] = tls_nodes(Config),
    Dir = filename:join(?config(priv_dir, Config), "intruders"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    ClusterCa = filename:join([State, "tls", "ca.pem"]),
    Host = cli_host(State),
    %% no certificate at all (the client still checks the server, as a real client would)
    NoCert = write_optfile(Dir, "no_cert.conf", [{server, [{verify, verify_none}]},
                                                 {client, [{verify, verify_peer}, {cacertfile, ClusterCa}]}]),
    %% a certificate and key of another CA, made the same way, trusting the cluster's CA
    ok = terrain_lab_tls:create(filename:join(Dir, "other"), #{nodes => [{intruder, Host}], cli_host => Host}),
    Other = filename:join([Dir, "other", "tls", "nodes", "intruder.pem"]),
    OtherCa = write_optfile(Dir, "other_ca.conf",
                            [{server, [{certfile, Other}, {keyfile, Other}, {cacertfile, ClusterCa},
                                       {verify, verify_peer}, {fail_if_no_peer_cert, true}]},
                             {client, [{certfile, Other}, {keyfile, Other}, {cacertfile, ClusterCa},
                                       {verify, verify_peer}]}]),
    Connected = fun() -> with_peer(Config, checker2, terrain_lab_tls:cli_optfile(State),
                                   fun(Checker) ->
                                           lists:sort(peer:call(Checker, erpc, call,
                                                                [Target, erlang, nodes, [connected], 10000], 15000))
                                           -- [peer:call(Checker, erlang, node, [])]
                                   end) end,
    Before = Connected(),
    Results = [{Kind, with_peer(Config, Kind, OptFile, fun(Intruder) ->
                                                               peer:call(Intruder, net_adm, ping, [Target], 30000)
                                                       end)}
               || {Kind, OptFile} <- [{tls_no_certificate, NoCert}, {tls_certificate_of_another_ca, OtherCa},
                                      {plain_tcp, none}]],
    After = Connected(),
    Direct = direct_tls_without_certificate(Target, ClusterCa),
    ct:pal("intruders: ~p~nconnected before ~p~nafter ~p~ndirect TLS client without a certificate: ~p",
           [Results, Before, After, Direct]),
    ?assertEqual([{tls_no_certificate, pang}, {tls_certificate_of_another_ca, pang}, {plain_tcp, pang}], Results),
    ?assertEqual(Before, After),
    ?assertMatch({refused, _}, Direct).

down_of_the_tls_cluster_leaves_nothing_behind() ->
    [{doc, "terrain down of the TLS cluster stops all 8 VMs by name; only the hosts' sshd and epmd remain in each "
           "namespace, the cluster's files on the hosts (certificates and keys included) and the local state "
           "directory with its tls/ are gone."}].
down_of_the_tls_cluster_leaves_nothing_behind(Config) ->
    State = tls_state_dir(Config),
    down_leaves_the_hosts_clean(Config, State),
    ?assertNot(filelib:is_dir(State)).

%% Node's distribution arguments and, after it pinged every node, each of its
%% connections' protocol and whether its controller is a process (TLS) or a port (TCP);
%% asked through the checker VM.
dist_facts(Checker, Node, Nodes) ->
    Call = fun(M, F, A) -> peer:call(Checker, erpc, call, [Node, M, F, A, 10000], 15000) end,
    _ = [pong = Call(net_adm, ping, [N]) || N <- Nodes],
    {ok, Info} = Call(net_kernel, nodes_info, []),
    Controllers = Call(erlang, system_info, [dist_ctrl]),
    #{node => Node,
      proto_dist => Call(init, get_argument, [proto_dist]),
      connections => [{N, element(4, proplists:get_value(address, I)), is_pid(proplists:get_value(N, Controllers))}
                      || {N, I} <- Info]}.

%% A VM on this machine named NAME@<the CLI's address>, with the cluster's cookie, over
%% TLS with OptFile (none: plain TCP); stopped after Fun.
with_peer(Config, Name, OptFile, Fun) ->
    State = tls_state_dir(Config),
    Args = case OptFile of
               none -> [];
               _ -> ["-proto_dist", "inet_tls", "-ssl_dist_optfile", OptFile]
           end,
    {ok, Peer, _Node} = peer:start(#{name => Name, host => cli_host(State), longnames => true,
                                     connection => standard_io, args => Args}),
    try
        {ok, Cookie} = file:read_file(filename:join(State, "cookie")),
        true = peer:call(Peer, erlang, set_cookie, [binary_to_atom(Cookie)]),
        Fun(Peer)
    after
        peer:stop(Peer)
    end.

%% An ssl client without a certificate against the node's distribution port (from its
%% host's epmd): the server must end the handshake (TLS 1.2) or the connection right
%% after it (TLS 1.3: the client finishes first, then the server's alert arrives).
direct_tls_without_certificate(Node, CaFile) ->
    [Name, Host] = string:split(atom_to_list(Node), "@"),
    {ok, Ip} = inet:parse_address(Host),
    {port, Port, _} = erl_epmd:port_please(Name, Ip, 5000),
    {ok, _} = application:ensure_all_started(ssl),
    case ssl:connect(Ip, Port, [{verify, verify_peer}, {cacertfile, CaFile}, {server_name_indication, Host},
                                {active, false}, binary], 10000) of
        {error, Why} ->
            {refused, Why};
        {ok, Socket} ->
            Result = case ssl:recv(Socket, 0, 10000) of
                         {error, Why} -> {refused, Why};
                         {ok, Data} -> {accepted, Data}
                     end,
            _ = ssl:close(Socket),
            Result
    end.

write_optfile(Dir, Name, Terms) ->
    File = filename:join(Dir, Name),
    ok = file:write_file(File, io_lib:format("~tp.~n", [Terms])),
    File.

tls_state_dir(Config) ->
    filename:join(?config(priv_dir, Config), "tls_state").

cli_host(State) ->
    {ok, Host} = file:read_file(filename:join(State, "cli_host")),
    binary_to_list(Host).

tls_nodes(Config) ->
    [list_to_atom("tls_" ++ atom_to_list(N)) || N <- expected_nodes(Config)].

tls_names_and_hosts(Config) ->
    [list_to_tuple(string:split(atom_to_list(N), "@")) || N <- expected_nodes(Config)].

mode(File) ->
    {ok, #file_info{mode = Mode}} = file:read_file_info(File),
    Mode band 8#777.

%%--------------------------------------------------------------------

terrain(Config, Args) ->
    terrain_lab_test_escript:run(?config(priv_dir, Config), Args).

spec_text(Addresses) ->
    ["{cluster, hosts, #{}}.\n" |
     [io_lib:format("{group, h~b, #{}, [~ts]}.~n",
                    [I, lists:join(", ", [io_lib:format("{node, h~b_~b, #{host => ~p}}", [I, J, A])
                                          || J <- lists:seq(1, ?PER_HOST)])])
      || {I, A} <- lists:zip(lists:seq(1, length(Addresses)), Addresses)]].

expected_nodes(Config) ->
    Addresses = terrain_lab_test_hosts:addresses(?config(hosts, Config)),
    [list_to_atom(lists:flatten(io_lib:format("h~b_~b@~s", [I, J, A])))
     || {I, A} <- lists:zip(lists:seq(1, length(Addresses)), Addresses), J <- lists:seq(1, ?PER_HOST)].

%% The cluster's directory on host H (the hosts share this machine's file system).
remote_dir(_Config, State, Host) ->
    filename:join(os:getenv("HOME"), terrain_lab_ssh:remote_dir(State, Host)).

re_quote(Text) ->
    lists:flatten(string:replace(Text, ".", "\\.", all)).
