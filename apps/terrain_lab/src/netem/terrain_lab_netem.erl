%% @private
%% @doc Network emulation for distributed Erlang on one machine: latency, jitter,
%% bandwidth and partitions between the nodes of a cluster spec.
%%
%% The kernel here has no `netem' queueing discipline, so terrain emulates the
%% network inside distributed Erlang. An emulated node runs with
%% `-epmd_module terrain_lab_netem_epmd': every connection it opens to another node of
%% its cluster goes through a local proxy that delays each chunk of bytes by the
%% link's one-way latency (with jitter) and paces it to the link's bandwidth, in both
%% directions. So everything that crosses distribution — messages, rpc, `global',
%% monitors, net ticks — sees the spec's network. Connections to the controlling
%% node (not in the spec) stay direct and fast.
%%
%% Terms:
%% <dl>
%% <dt>link</dt><dd>what connects two nodes: the link options (`latency', `jitter'
%%   in µs one way, `bandwidth' in bytes/s per connection and direction) of their
%%   lowest common group in the spec, or the cluster's own.</dd>
%% <dt>level</dt><dd>a group (or the cluster) whose link options apply between the
%%   nodes that meet there; a round trip across a level takes 2 × its latency.</dd>
%% <dt>jitter</dt><dd>each chunk's delay is uniform on `[latency - jitter,
%%   latency + jitter]' (truncated at 0), and never lets it overtake the chunk in front
%%   (see `terrain_lab_netem_link').</dd>
%% <dt>partition</dt><dd>two sets of nodes whose connections are cut and refused until
%%   healed; connections within each set, and to other nodes, are untouched.</dd>
%% </dl>
%%
%% The launcher turns emulation on when the spec has link options (option `netem'
%% of `terrain_lab:start_cluster/2'). From the controlling node:
%% ```
%% {ok, C} = terrain_lab:start_cluster("examples/demo.cluster", #{prefix => "d_"}),
%% [A, B | _] = [N || #{node := N} <- terrain_lab:cluster_nodes(C)],
%% ok = terrain_lab_netem:partition([A], [B]),
%% pang = erpc:call(A, net_adm, ping, [B], 10000),
%% ok = terrain_lab_netem:heal(),
%% pong = erpc:call(A, net_adm, ping, [B], 10000).
%% '''
%% Every remote call has a deadline (`timeout', default 5 s for all nodes together).
%% Partitions are kept on the nodes themselves, so they outlive the caller and a
%% different controlling node (the `terrain netem' CLI) can heal them.
-module(terrain_lab_netem).

%% API (controlling node)
-export([partition/2, partition/3,
         heal/0, heal/1, heal/2,
         isolate/1,
         status/1, status/2,
         format_error/1]).

%% Internal exports (launcher, CLI)
-export([enabled/1,
         vm_args/3,
         idle_cost/0,
         port_capacity/0,
         set_links/3,
         level_records/1]).

%% exports_not_used: status/1 (default deadline) is what the netem suite polls; the CLI passes options
%% to status/2.
-ignore_xref([{status, 1}]).

-export_type([options/0, error_reason/0]).

-type options() ::
        #{timeout => pos_integer()}.   % ms for all remote calls of one operation (default 5000)

-type error_reason() ::
        {netem, {bad_nodes, term()}}                 % not a non-empty list of node names
      | {netem, {overlapping, [node()]}}             % a node on both sides of a partition
      | {netem, terrain_options:reason()}
      | {netem, {failed, [{node(), term()}]}}        % nodes that could not be reached or are not emulated
      | {netem, {usage, [string()]}}.                % CLI: an action with the wrong arguments

-define(DEFAULT_TIMEOUT, 5000).
%% Idle cost per connection (µs of a core per second), examples/netem_at_scale.sh at 128 VMs in a full mesh
%% (8,128 connections), both proxies in one run on a quiet machine (docs/NETEM.md, "At scale"). The Erlang
%% proxy spins 0.5–1.5 ms before each tick's due time; the native one sleeps, and what is left is mostly the
%% VMs' own tick handling (15: the complete 128-VM mesh; 13 over the 7,400 connections of an incomplete one).
-define(NATIVE_IDLE_US, 15).
-define(PORTS_PER_CONNECTION, 3).
-define(ERLANG_IDLE_US, 50).

%%--------------------------------------------------------------------
%% API

%% @equiv partition(NodesA, NodesB, #{})
-spec partition([node()], [node()]) -> ok | {error, error_reason()}.
partition(NodesA, NodesB) ->
    partition(NodesA, NodesB, #{}).

%% @doc Cuts every connection between a node of `NodesA' and a node of `NodesB' and
%% refuses new ones until healed. Returns when every node has applied it.
-spec partition([node()], [node()], options()) -> ok | {error, error_reason()}.
partition(NodesA, NodesB, Options) ->
    case check(Options, [NodesA, NodesB]) of
        {ok, Timeout} ->
            case [N || N <- NodesA, lists:member(N, NodesB)] of
                [] ->
                    Calls = [{N, block, [NodesB]} || N <- lists:usort(NodesA)]
                        ++ [{N, block, [NodesA]} || N <- lists:usort(NodesB)],
                    all_ok(call_all(Calls, deadline(Timeout)));
                Both ->
                    {error, {netem, {overlapping, lists:usort(Both)}}}
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Heals every partition on every emulated node this node is connected to.
-spec heal() -> ok | {error, error_reason()}.
heal() ->
    Deadline = deadline(?DEFAULT_TIMEOUT),
    Results = call_all([{N, unblock, [all]} || N <- nodes([visible, hidden])], Deadline),
    %% Connected nodes that are not emulated are not part of any partition.
    all_ok([R || {_, Result} = R <- Results, not not_emulated(Result)]).

%% @equiv heal(Nodes, #{})
-spec heal([node()]) -> ok | {error, error_reason()}.
heal(Nodes) ->
    heal(Nodes, #{}).

%% @doc Heals the partitions of `Nodes': they may connect to every node again, and
%% the other nodes of their clusters may connect to them.
-spec heal([node()], options()) -> ok | {error, error_reason()}.
heal(Nodes, Options) ->
    case check(Options, [Nodes]) of
        {ok, Timeout} ->
            Deadline = deadline(Timeout),
            case members(Nodes, Deadline) of
                {ok, Members} ->
                    Calls = [{N, unblock, [all]} || N <- lists:usort(Nodes)]
                        ++ [{M, unblock, [Nodes]} || M <- Members -- Nodes],
                    all_ok(call_all(Calls, Deadline));
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @equiv isolate(Node, #{})
-spec isolate(node()) -> ok | {error, error_reason()}.
isolate(Node) ->
    isolate(Node, #{}).

%% @doc Partitions `Node' from every other node of its cluster.
-spec isolate(node(), options()) -> ok | {error, error_reason()}.
isolate(Node, Options) ->
    case check(Options, [[Node]]) of
        {ok, Timeout} ->
            T0 = erlang:monotonic_time(millisecond),
            case members([Node], deadline(Timeout)) of
                {ok, Members} ->
                    Left = max(1, Timeout - (erlang:monotonic_time(millisecond) - T0)),
                    case Members -- [Node] of
                        [] -> ok;
                        Others -> partition([Node], Others, Options#{timeout => Left})
                    end;
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @equiv status(Nodes, #{})
-spec status([node()]) -> #{node() => terrain_lab_netem_server:status() | {error, term()}}.
status(Nodes) ->
    status(Nodes, #{}).

%% @doc The links, partitions and live proxies of each node (or why it did not say).
-spec status([node()], options()) -> #{node() => terrain_lab_netem_server:status() | {error, term()}}.
status(Nodes, Options) ->
    Timeout = maps:get(timeout, Options, ?DEFAULT_TIMEOUT),
    maps:from_list(call_all([{N, status, []} || N <- Nodes], deadline(Timeout))).

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({netem, {bad_nodes, Nodes}}) ->
    io_lib:format("expected a non-empty list of node names, got ~0tp", [Nodes]);
format_error({netem, {overlapping, Nodes}}) ->
    io_lib:format("cannot partition a node from itself: ~ts on both sides", [join(Nodes)]);
format_error({netem, {bad_option, Key, Value}}) ->
    io_lib:format("bad netem option ~0tp: ~0tp", [Key, Value]);
format_error({netem, {Tag, _} = Reason}) when Tag =:= unknown_option; Tag =:= bad_options ->
    ["netem: ", terrain_options:format_error(Reason)];
format_error({netem, {failed, Failed}}) ->
    ["network emulation failed on ",
     lists:join("; ", [io_lib:format("~0tp: ~ts", [N, why(W)]) || {N, W} <- Failed])];
format_error({netem, {usage, Args}}) ->
    io_lib:format("cannot do '~ts': expected partition NODES NODES | isolate NODES | heal [NODES] | show | "
                  "move NODE GROUP",
                  [lists:join(" ", Args)]).

%%--------------------------------------------------------------------
%% Internal exports

%% @doc Does the spec ask for emulation: does any level carry link options?
-spec enabled(terrain_lab_spec:spec()) -> boolean().
enabled(Spec) ->
    lists:any(fun({_, Options}) -> map_size(Options) > 0 end, terrain_lab_spec:levels(Spec)).

%% @doc The VM arguments that make spec node `Name' (started as `Prefix ++ Name') an
%% emulated node: the epmd module, its link to every other node of the spec, its
%% proxies (`proxy_args/0'), and its own loopback address
%% (`terrain_lab_netem_epmd:address/1'), which its distribution connects from. Its
%% listening socket stays on every address, so that nodes outside the spec (the CLI, a
%% shell) reach it by its host name; the nodes of the cluster reach it at its own.
-spec vm_args(terrain_lab_spec:spec(), string(), atom()) -> [string()].
vm_args(Spec, Prefix, Name) ->
    Short = Prefix ++ atom_to_list(Name),
    ["-epmd_module", "terrain_lab_netem_epmd", "-terrain_netem",
     terrain_lab_netem_epmd:encode_links(links(Spec, Prefix, Name)),
     "-kernel", "inet_dist_connect_options",
     lists:flatten(io_lib:format("[{ip,~0p}]", [terrain_lab_netem_epmd:address(Short)]))
     | proxy_args()].

%% @doc The proxies a cluster started now gets (`proxy_args/0') and what one proxied
%% connection of a full mesh costs while the cluster idles, in µs of a core per second:
%% the VMs' and the proxies' CPU over the connections, measured at 128 VMs
%% (docs/NETEM.md, "At scale"; `terrain up' warns from it).
-spec idle_cost() -> {native | erlang, number()}.
idle_cost() ->
    case proxy_args() of
        ["-terrain_netem_proxy", "native" | _] -> {native, ?NATIVE_IDLE_US};
        _ -> {erlang, ?ERLANG_IDLE_US}
    end.

%% @doc How many proxied connections one emulated node can open at once: each keeps
%% three ports of the node's own address (`terrain_lab_netem_epmd:address/1') in use,
%% from the ephemeral range (`net.ipv4.ip_local_port_range'): the proxy's listening
%% port (its accepted socket keeps it), the node's and the proxy's client ports. Since
%% every node has an address of its own, the limit is per node (a node opens at most
%% n - 1 connections), not per machine as when every node shared one address (a 256-VM
%% full mesh, 32,640 connections, then ran the 28,232 ports here out: docs/NETEM.md "At
%% scale"). `unknown' where the range cannot be read.
-spec port_capacity() -> pos_integer() | unknown.
port_capacity() ->
    try file:read_file("/proc/sys/net/ipv4/ip_local_port_range") of
        {ok, Text} ->
            [Low, High] = [list_to_integer(T) || T <- string:lexemes(string:trim(binary_to_list(Text)), " \t")],
            max(1, (High - Low + 1) div ?PORTS_PER_CONNECTION);
        {error, _} ->
            unknown
    catch
        error:_ -> unknown
    end.

%% Which proxies the emulated nodes use: `-terrain_netem_proxy native PATH' (the
%% default, where the native program was built), or `-terrain_netem_proxy erlang' when
%% the environment says `TERRAIN_NETEM_PROXY=erlang' or there is no native program.
-spec proxy_args() -> [string()].
proxy_args() ->
    case {os:getenv("TERRAIN_NETEM_PROXY"), terrain_lab_netem_native:executable()} of
        {"erlang", _} -> ["-terrain_netem_proxy", "erlang"];
        {_, {ok, Path}} -> ["-terrain_netem_proxy", "native", Path];
        {_, error} -> ["-terrain_netem_proxy", "erlang"]
    end.

%% @doc Gives the running emulated nodes `Nodes' (spec name => node) the link tables of
%% `Spec' (nodes added to the cluster, a node moved to another group): new
%% connections and the existing ones follow the new links. All under one deadline.
-spec set_links(terrain_lab_spec:spec(), string(), #{atom() => node()}) -> ok | {error, error_reason()}.
set_links(Spec, Prefix, Nodes) ->
    Deadline = deadline(?DEFAULT_TIMEOUT),
    all_ok(call_all([{Node, set_links, [links(Spec, Prefix, Name)]} || {Name, Node} <- maps:to_list(Nodes)],
                    Deadline)).

%% One node's link table: every other node of the spec by its short name.
links(Spec, Prefix, Name) ->
    maps:from_list([{Prefix ++ atom_to_list(Other), terrain_lab_spec:link(Spec, Name, Other)}
                    || Other <- terrain_lab_spec:node_names(Spec), Other =/= Name]).

%% @doc The levels of a spec as JSON-ready maps (for the state that `terrain up'
%% records and `terrain status' shows): `level' is `cluster' or the group path joined
%% with `/'; absent options are `null'.
-spec level_records(terrain_lab_spec:spec()) -> [#{atom() => binary() | non_neg_integer() | null}].
level_records(Spec) ->
    [#{level => case Label of
                    cluster -> <<"cluster">>;
                    Path -> iolist_to_binary(lists:join("/", [atom_to_list(P) || P <- Path]))
                end,
       latency_us => maps:get(latency, Options, null),
       jitter_us => maps:get(jitter, Options, null),
       bandwidth_bytes_per_s => maps:get(bandwidth, Options, null)}
     || {Label, Options} <- terrain_lab_spec:levels(Spec)].

%%--------------------------------------------------------------------
%% Internal functions

check(Options, NodeLists) ->
    case terrain_options:check(Options, #{timeout => fun(V) -> is_integer(V) andalso V > 0 end}) of
        ok ->
            case [L || L <- NodeLists, not is_node_list(L)] of
                [] -> {ok, maps:get(timeout, Options, ?DEFAULT_TIMEOUT)};
                [Bad | _] -> {error, {netem, {bad_nodes, Bad}}}
            end;
        {error, Reason} ->
            {error, {netem, Reason}}
    end.

is_node_list(Nodes) ->
    is_list(Nodes) andalso Nodes =/= [] andalso lists:all(fun(N) -> is_atom(N) andalso N =/= nonode@nohost end, Nodes).

deadline(Timeout) ->
    erlang:monotonic_time(millisecond) + Timeout.

%% The other nodes of the clusters of `Nodes', as the nodes themselves know them.
members(Nodes, Deadline) ->
    Results = call_all([{N, members, []} || N <- lists:usort(Nodes)], Deadline),
    case [{N, Why} || {N, {error, Why}} <- Results] of
        [] -> {ok, lists:usort(lists:append([Members || {_, Members} <- Results]))};
        Failed -> {error, {netem, {failed, Failed}}}
    end.

%% Calls terrain_lab_netem_server:Function(Args...) on every node at once; every
%% answer must come before `Deadline'. A node that fails gives {error, Why}.
call_all(Calls, Deadline) ->
    Requests = [{Node, erpc:send_request(Node, terrain_lab_netem_server, Function, Args)}
                || {Node, Function, Args} <- Calls],
    [{Node, receive_response(Request, Deadline)} || {Node, Request} <- Requests].

receive_response(Request, Deadline) ->
    try
        erpc:receive_response(Request, max(0, Deadline - erlang:monotonic_time(millisecond)))
    catch
        error:{erpc, Why} -> {error, Why};
        error:{exception, undef, _} -> {error, not_emulated};
        error:{exception, Why, _} -> {error, Why};
        exit:{exception, Why} -> {error, Why};
        exit:{signal, Why} -> {error, Why}
    end.

all_ok(Results) ->
    case [{N, Why} || {N, {error, Why}} <- Results] of
        [] -> ok;
        Failed -> {error, {netem, {failed, Failed}}}
    end.

not_emulated({error, not_emulated}) -> true;
not_emulated({error, noconnection}) -> true;
not_emulated(_) -> false.

why(timeout) -> "no answer before the deadline";
why(noconnection) -> "not reachable";
why(not_emulated) -> "not an emulated node (started without network emulation)";
why(Other) -> io_lib:format("~0tp", [Other]).

join(Nodes) ->
    lists:join(", ", [atom_to_list(N) || N <- Nodes]).
