%% Clusters on other hosts: 4 test hosts (network namespaces with their own address,
%% sshd and epmd; terrain_lab_test_hosts), `terrain up' of 8 VMs over ssh (2 per
%% host), each VM in its host's namespace, status, choose and probe across the hosts,
%% `terrain down', a failed `up' that stops what it started, and nothing of the test
%% left in any namespace. The escript runs as its own OS process (its CLI node takes a
%% long name, which this CT node, a short-named one, could not).
-module(terrain_lab_hosts_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, groups/0, init_per_suite/1, end_per_suite/1]).
-export([up_starts_8_vms_on_4_hosts/0, up_starts_8_vms_on_4_hosts/1,
         every_vm_runs_in_its_hosts_namespace/0, every_vm_runs_in_its_hosts_namespace/1,
         status_reports_every_node_up/0, status_reports_every_node_up/1,
         choose_at_a_node_orders_by_distance_across_hosts/0, choose_at_a_node_orders_by_distance_across_hosts/1,
         probe_measures_every_pair_across_hosts/0, probe_measures_every_pair_across_hosts/1,
         down_stops_every_vm_on_every_host/0, down_stops_every_vm_on_every_host/1,
         a_failed_up_stops_what_it_started_everywhere/0, a_failed_up_stops_what_it_started_everywhere/1,
         removing_the_hosts_leaves_no_process_or_namespace/0, removing_the_hosts_leaves_no_process_or_namespace/1]).

-define(HOSTS, 4).
-define(PER_HOST, 2).

suite() ->
    [{timetrap, {minutes, 3}}].

all() ->
    [{group, cluster}, a_failed_up_stops_what_it_started_everywhere, removing_the_hosts_leaves_no_process_or_namespace].

groups() ->
    [{cluster, [sequence], [up_starts_8_vms_on_4_hosts, every_vm_runs_in_its_hosts_namespace,
                            status_reports_every_node_up, choose_at_a_node_orders_by_distance_across_hosts,
                            probe_measures_every_pair_across_hosts, down_stops_every_vm_on_every_host]}].

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
    [First, Second | Others] = expected_nodes(Config),
    {Code, Out, Err} = terrain(Config, ["choose", "--state-dir", ?config(state_dir, Config), "--at", atom_to_list(First),
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
    {Code, Out, Err} = terrain(Config, ["down", "--state-dir", ?config(state_dir, Config)]),
    ct:pal("down: ~ts~ts", [Out, Err]),
    ?assertEqual(0, Code),
    ?assertEqual(lists:duplicate(?HOSTS * ?PER_HOST, "stopped"),
                 [lists:last(string:lexemes(L, " ")) || L <- string:lexemes(Out, "\n")]),
    [?assertEqual(["epmd", "sshd"], lists:sort([C || {_, C} <- terrain_lab_test_hosts:pids(NS)]))
     || NS <- terrain_lab_test_hosts:namespaces(?config(hosts, Config))],
    ?assertEqual([], [H || H <- terrain_lab_test_hosts:addresses(?config(hosts, Config)),
                           filelib:is_dir(remote_dir(Config, H))]).

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
    ?assertEqual("", os:cmd("ip link show " ++ maps:get(bridge, Hosts) ++ " 2>/dev/null")).

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
remote_dir(Config, Host) ->
    filename:join(os:getenv("HOME"), terrain_lab_ssh:remote_dir(?config(state_dir, Config), Host)).

re_quote(Text) ->
    lists:flatten(string:replace(Text, ".", "\\.", all)).
