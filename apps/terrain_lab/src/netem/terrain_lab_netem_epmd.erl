%% @private
%% @doc The `-epmd_module' of an emulated node: erl_epmd, except that a connection
%% this node opens to another node of its emulated cluster goes through a local
%% proxy that delays, paces or cuts it (see `terrain_lab_netem').
%%
%% A node is emulated when it is started with
%% ```
%% -epmd_module terrain_lab_netem_epmd -terrain_netem LINKS
%% '''
%% where LINKS is the Erlang term text of a list `[{ShortName, [{Option, Value}]}]':
%% the other nodes of the cluster (short names, the part before the `@') and the
%% spec's link options to each, e.g. `[{"d_eu2",[{latency,300}]},{"d_us1",[{latency,20000}]}]'
%% (`terrain_lab_netem:vm_args/3' builds it; no spaces, so it survives any shell). The table must be
%% known at boot, since `global' connects the nodes to each other while the launcher
%% is still setting them up; it is kept in a `persistent_term' and never changes.
%%
%% Each node of an emulated cluster has a loopback address of its own, a function of
%% its short name (`address/1'; Linux routes all of 127/8 to the loopback device), so
%% that the connections of different node pairs do not compete for the ports of one
%% address. Distribution calls `address_please/3' twice per connection (once to choose
%% the protocol, once to set up), then `port_please/2' with the address it got, from
%% the process that then connects to that address and the port `port_please/2'
%% returns. For a node in the table, `address_please/3' answers this node's own
%% address (where the proxy will listen), and `port_please/2' starts the proxy: it asks
%% epmd for the real port, has `terrain_lab_netem_server' start a proxy that listens on
%% a fresh port of this node's own address and connects from it to the other node's
%% own address and real port, and returns the proxy's port. Every other node (the
%% controlling node, nodes outside the spec) is connected directly, at the address its
%% host name resolves to.
%% Only the connecting side proxies: each connection crosses exactly one proxy, which
%% applies the link's delay in both directions, so a round trip takes twice the
%% one-way latency. Works with the default `inet_tcp' distribution (and `inet_tls');
%% under IPv6 distribution the proxy listens on the IPv6 address it is given.
%%
%% `start_link/0' is started by kernel (as a child of `net_sup') whenever
%% distribution starts; it starts `terrain_lab_netem_sup', which runs erl_epmd's own
%% server next to the netem processes.
-module(terrain_lab_netem_epmd).

%% epmd module callbacks (kernel's erl_distribution and inet_tcp_dist)
-export([start_link/0,
         register_node/2,
         register_node/3,
         port_please/2,
         port_please/3,
         address_please/3,
         listen_port_please/2,
         names/1]).

%% Internal exports
-export([links/0,
         set_links/1,
         address/1,
         own_address/0,
         encode_links/1,
         decode_links/1]).

%% exports_not_used: The -epmd_module callbacks kernel calls (erl_distribution, net_kernel, inet_tcp_dist),
%% and decode_links/1, the table parser its tests check on their own.
-ignore_xref([{address_please, 3}, {decode_links, 1}, {listen_port_please, 2}, {names, 1},
              {port_please, 2}, {port_please, 3}, {register_node, 2}, {register_node, 3},
              {start_link, 0}]).

-export_type([links/0]).

%% The other nodes of the cluster by short name, with the spec's link options to each.
-type links() :: #{string() => terrain_lab_spec:link_options()}.

-define(LINKS_KEY, {?MODULE, links}).

%%--------------------------------------------------------------------
%% epmd module callbacks

%% @doc Reads the link table from the command line and starts the netem processes
%% with erl_epmd's server.
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    case init:get_argument(terrain_netem) of
        {ok, [[Text] | _]} ->
            case decode_links(Text) of
                {ok, Links} ->
                    persistent_term:put(?LINKS_KEY, Links),
                    terrain_lab_netem_sup:start_link();
                {error, _} = Error ->
                    Error
            end;
        _ ->
            persistent_term:put(?LINKS_KEY, #{}),
            terrain_lab_netem_sup:start_link()
    end.

%% @doc As `erl_epmd:register_node/2'.
-spec register_node(Name :: string(), Port :: non_neg_integer()) -> {ok, integer()} | {error, term()} | term().
register_node(Name, Port) ->
    erl_epmd:register_node(Name, Port).

%% @doc As `erl_epmd:register_node/3'.
-spec register_node(Name :: string(), Port :: non_neg_integer(), Driver :: atom()) ->
          {ok, integer()} | {error, term()} | term().
register_node(Name, Port, Driver) ->
    erl_epmd:register_node(Name, Port, Driver).

%% @doc The port to connect to for node `Name' at address `Host': a fresh proxy's for
%% a node of the emulated cluster (or `noport' while it is cut off by a partition),
%% the node's own otherwise.
-spec port_please(Name :: atom() | string(), Host :: atom() | string() | inet:ip_address()) ->
          {port, inet:port_number(), non_neg_integer()} | noport | closed | {error, term()}.
port_please(Name, Host) ->
    Short = short_name(Name),
    case maps:is_key(Short, links()) of
        false ->
            erl_epmd:port_please(Name, Host);
        true ->
            case getaddr(Host) of
                {ok, EpmdAddress} ->
                    %% epmd listens on every address: asked at this node's own one
                    %% (what address_please/3 gave), it answers as at the host's
                    case erl_epmd:port_please(Name, EpmdAddress) of
                        {port, Port, Version} ->
                            case terrain_lab_netem_server:open(Short, {target(Short, EpmdAddress), Port}) of
                                {ok, ProxyPort} -> {port, ProxyPort, Version};
                                {error, _} -> noport
                            end;
                        Other ->
                            Other
                    end;
                {error, _} ->
                    noport
            end
    end.

%% @doc As `erl_epmd:port_please/3' (distribution does not call it; never proxied).
-spec port_please(Name :: atom() | string(), Host :: atom() | string() | inet:ip_address(),
                  Timeout :: timeout()) ->
          {port, inet:port_number(), non_neg_integer()} | noport | closed | {error, term()}.
port_please(Name, Host, Timeout) ->
    erl_epmd:port_please(Name, Host, Timeout).

%% @doc For a node of the emulated cluster (IPv4 distribution): this node's own
%% loopback address (`address/1'), where its proxy to that node will listen; as
%% `erl_epmd:address_please/3' for every other node.
%% The proxy is chosen in `port_please/2', since distribution also calls this function
%% just to choose the protocol.
-spec address_please(Name :: string(), Host :: string() | inet:ip_address(), Family :: inet | inet6) ->
          {ok, inet:ip_address()} | {error, term()}.
address_please(Name, Host, inet = Family) ->
    Short = short_name(Name),
    case maps:is_key(Short, links()) of
        true -> {ok, own_address()};
        false -> erl_epmd:address_please(Name, Host, Family)
    end;
address_please(Name, Host, Family) ->
    erl_epmd:address_please(Name, Host, Family).

%% @doc As `erl_epmd:listen_port_please/2'.
-spec listen_port_please(Name :: atom() | string(), Host :: atom() | string() | inet:ip_address()) ->
          {ok, inet:port_number()}.
listen_port_please(Name, Host) ->
    erl_epmd:listen_port_please(Name, Host).

%% @doc As `erl_epmd:names/1'.
-spec names(Host :: atom() | string() | inet:ip_address()) ->
          {ok, [{string(), inet:port_number()}]} | {error, term()}.
names(Host) ->
    erl_epmd:names(Host).

%%--------------------------------------------------------------------
%% Internal exports

%% @doc This node's link table (empty when it is not emulated).
-spec links() -> links().
links() ->
    persistent_term:get(?LINKS_KEY, #{}).

%% @doc Replaces the link table (called by `terrain_lab_netem_server' only).
-spec set_links(links()) -> ok.
set_links(Links) ->
    persistent_term:put(?LINKS_KEY, Links).

%% @doc The loopback address of the emulated node with short name (or node name) `Name':
%% 127.A.B.C with A in 1..254, B in 0..255 and C in 1..254, from `erlang:phash2/2' of
%% the short name (the same on every node and OTP release). Never 127.0.x.x (127.0.0.1
%% is localhost, 127.0.1.1 Debian's host name), never a last byte of 0 or 255. Two
%% names may share an address (16.5 million addresses: about 1 in 500 for a cluster of
%% 256 nodes); they then share its ports, as every node did before, and nothing else.
-spec address(atom() | string()) -> inet:ip4_address().
address(Name) ->
    H = erlang:phash2(short_name(Name), 254 * 256 * 254),
    {127, 1 + H div (256 * 254), (H div 254) rem 256, 1 + H rem 254}.

%% @doc This node's own loopback address, when it is an emulated node (distributed).
-spec own_address() -> inet:ip4_address().
own_address() ->
    address(node()).

%% @doc The `-terrain_netem' argument for a link table: Erlang term text, readable in
%% `ps', without spaces (node names and link options need no escaping).
-spec encode_links(links()) -> string().
encode_links(Links) ->
    lists:flatten(io_lib:format("~0p", [[{Name, lists:sort(maps:to_list(Options))}
                                         || {Name, Options} <- lists:sort(maps:to_list(Links))]])).

%% @doc Parses and checks a `-terrain_netem' argument.
-spec decode_links(string()) -> {ok, links()} | {error, {terrain_netem, bad_links, string()}}.
decode_links(Text) ->
    Bad = {error, {terrain_netem, bad_links, Text}},
    case erl_scan:string(Text ++ ".") of
        {ok, Tokens, _} ->
            case erl_parse:parse_term(Tokens) of
                {ok, List} when is_list(List) ->
                    case lists:all(fun valid_link/1, List) of
                        true -> {ok, maps:from_list([{Name, maps:from_list(Options)} || {Name, Options} <- List])};
                        false -> Bad
                    end;
                _ ->
                    Bad
            end;
        _ ->
            Bad
    end.

%%--------------------------------------------------------------------
%% Internal functions

valid_link({Name, Options}) when is_list(Name), is_list(Options) ->
    io_lib:printable_latin1_list(Name) andalso Name =/= []
        andalso lists:all(fun({latency, V}) -> is_integer(V) andalso V >= 0;
                             ({jitter, V}) -> is_integer(V) andalso V >= 0;
                             ({bandwidth, V}) -> is_integer(V) andalso V > 0;
                             (_) -> false
                          end, Options);
valid_link(_) ->
    false.

short_name(Name) when is_atom(Name) -> short_name(atom_to_list(Name));
short_name(Name) -> hd(string:split(Name, "@")).

%% IPv4: the node's own address; IPv6 distribution: the address it was found at.
target(Short, {_, _, _, _}) -> address(Short);
target(_Short, Address) -> Address.

getaddr(Host) when is_tuple(Host) ->
    {ok, Host};
getaddr(Host) ->
    inet:getaddr(Host, inet).
