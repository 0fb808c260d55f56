%% @private
%% @doc The router of an emulated node: starts the proxy of each connection this node
%% opens to another node of its cluster, and keeps the partitions.
%%
%% One server per emulated node, registered as `terrain_lab_netem_server' under
%% `terrain_lab_netem_sup'. Proxies are native or Erlang, chosen once at boot by the
%% VM argument `-terrain_netem_proxy native PATH | erlang' (`terrain_lab_netem:vm_args/3'):
%% native, the server owns one port running the C program at PATH, which carries every
%% connection (`terrain_lab_netem_native'); Erlang, one supervised
%% `terrain_lab_netem_proxy' per connection. Should the program fail to start, the node
%% uses the Erlang proxies (and says so in a log warning). The program starts with the
%% node's first proxied connection, not at boot, where the file server is not up yet. Starting proxies and changing
%% partitions go through it,
%% so a partition cannot miss a proxy that is being started: `block/1' refuses new
%% connections to the named nodes and kills the proxies of the existing ones in one
%% step. It owns no table: the link table is a `persistent_term' written at boot
%% (`terrain_lab_netem_epmd:links/0') and replaced only through this server
%% (`set_links/1': nodes added, a node moved), and its state is the set of blocked nodes and
%% the live proxies, each monitored.
%%
%% Nodes are matched by short name (the part before the `@'): an emulated cluster
%% runs on one machine. The controlling node calls `block/1', `unblock/1',
%% `status/0' and `members/0' through `erpc' (see `terrain_lab_netem').
-module(terrain_lab_netem_server).
-behaviour(gen_server).

%% API (on the emulated node)
-export([start_link/0,
         open/2,
         block/1,
         unblock/1,
         status/0,
         members/0,
         set_links/1,
         native_stats/0]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

%% exports_not_used: start_link/0 is named in terrain_lab_netem_sup's child spec; block/1, unblock/1,
%% members/0 and status/0 are called on the emulated nodes by erpc from
%% terrain_lab_netem (the controlling node).
%% native_stats/0 is what the netem suite and examples/netem_at_scale.erl read.
-ignore_xref([{block, 1}, {members, 0}, {start_link, 0}, {status, 0}, {unblock, 1}, {set_links, 1},
              {native_stats, 0}]).

-export_type([status/0, proxy/0]).

-type status() ::
        #{links := #{node() => terrain_lab_spec:link_options()}, % the other nodes of the cluster
          blocked := [node()],                                  % cut off by a partition
          proxy := native | erlang,                             % which proxies carry the connections
          proxies := [{node(), proxy()}]}.                      % live proxies by target node

%% An Erlang proxy (its supervised process) or a connection of the native program.
-type proxy() :: pid() | {native, non_neg_integer()}.

-record(state, {blocked = #{} :: #{string() => true},
                %% the native program, when it carries them; started on the first connection
                %% (at boot, under net_sup, the file server it needs may not run yet)
                native :: port() | {not_started, file:filename()} | undefined,
                next_id = 0 :: non_neg_integer(),      % the native program's next connection id
                proxies = #{} :: #{proxy() => {string(), reference() | native}},
                watching = false :: boolean()}).             % logging lost connections

-define(CALL_TIMEOUT, 5000).

%%--------------------------------------------------------------------
%% API

%% @doc Starts the server, registered as `terrain_lab_netem_server'.
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    case gen_server:start_link({local, ?MODULE}, ?MODULE, [], []) of
        {ok, Pid} -> {ok, Pid};
        {error, _} = Error -> Error;
        ignore -> {error, ignore}
    end.

%% @doc Starts a proxy to the node with short name `Target', listening on a fresh port
%% of this node's own address (`terrain_lab_netem_epmd:own_address/0'; under IPv6
%% distribution, of `Address''s IP) and forwarding to `Address' from that address;
%% returns the proxy's port, or `{error, partitioned}' while `Target' is blocked.
-spec open(Target :: string(), Address :: {inet:ip_address(), inet:port_number()}) ->
          {ok, inet:port_number()} | {error, term()}.
open(Target, Address) ->
    call({open, Target, Address}).

%% @doc Cuts this node's connections to `Nodes' and refuses new ones until they are
%% unblocked.
-spec block([node()]) -> ok | {error, not_emulated | timeout}.
block(Nodes) ->
    call({block, [short_name(N) || N <- Nodes]}).

%% @doc Lets this node connect to `Nodes' (or to every node) again. Connections come
%% back on demand, as after any disconnection.
-spec unblock(all | [node()]) -> ok | {error, not_emulated | timeout}.
unblock(all) ->
    call({unblock, all});
unblock(Nodes) ->
    call({unblock, [short_name(N) || N <- Nodes]}).

%% @doc Replaces this node's link table (nodes added to the cluster, a node moved
%% between groups): new connections follow it, and the proxies of connections whose
%% link changed switch to the new link at once (no disconnection).
-spec set_links(terrain_lab_netem_epmd:links()) -> ok | {error, not_emulated | timeout}.
set_links(Links) ->
    call({set_links, Links}).

%% @doc The links, partitions and proxies of this node.
-spec status() -> status() | {error, not_emulated | timeout}.
status() ->
    call(status).

%% @doc The native program's connections and counters (`{error, not_native}' when this
%% node uses the Erlang proxies).
%% Also the program's OS pid (`os_pid').
-spec native_stats() -> {ok, #{atom() => term()}} | {error, not_native | not_emulated | timeout | term()}.
native_stats() ->
    call(native_stats).

%% @doc The other nodes of this node's emulated cluster.
-spec members() -> [node()].
members() ->
    [full_name(Short) || Short <- lists:sort(maps:keys(terrain_lab_netem_epmd:links()))].

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init([]) -> {ok, #state{}}.
init([]) ->
    case init:get_argument(terrain_netem_proxy) of
        {ok, [["native", Path] | _]} -> {ok, #state{native = {not_started, Path}}};
        _ -> {ok, #state{}}
    end.

-spec handle_call(term(), gen_server:from(), #state{}) -> {reply, term(), #state{}}.
handle_call({open, _, _} = Open, From, #state{watching = false} = State) ->
    %% net_kernel runs by the first connection: from now on every lost connection is
    %% logged with its cause (the VM's log: a tick timeout, a closed connection)
    _ = net_kernel:monitor_nodes(true, #{nodedown_reason => true}),
    handle_call(Open, From, State#state{watching = true});
handle_call({open, _, _} = Open, From, #state{native = {not_started, Path}} = State) ->
    Native = case terrain_lab_netem_native:start(Path) of
                 {ok, Port} ->
                     Port;
                 {error, Why} ->
                     logger:warning("terrain netem: the native proxy did not start (~0tp); using the Erlang proxies",
                                    [Why]),
                     undefined
             end,
    handle_call(Open, From, State#state{native = Native});
handle_call({open, Target, Address}, _From, #state{blocked = Blocked, proxies = Proxies} = State) ->
    case maps:is_key(Target, Blocked) of
        true ->
            {reply, {error, partitioned}, State};
        false when State#state.native =:= undefined ->
            Link = maps:get(Target, terrain_lab_netem_epmd:links(), #{}),
            case supervisor:start_child(terrain_lab_netem_proxy_sup,
                                        [#{target => Target, address => Address, source => source(Address),
                                           link => Link}]) of
                {ok, Pid, Port} ->
                    Ref = monitor(process, Pid),
                    {reply, {ok, Port}, State#state{proxies = Proxies#{Pid => {Target, Ref}}}};
                {error, _} = Error ->
                    {reply, Error, State}
            end;
        false ->
            #state{native = Native, next_id = Id} = State,
            Link = terrain_lab_netem_link:new(maps:get(Target, terrain_lab_netem_epmd:links(), #{})),
            {Accept, Send} = terrain_lab_netem_proxy:timeouts(),
            case terrain_lab_netem_native:open(Native, Id, source(Address), Address, Link, Accept, Send) of
                {ok, Port} ->
                    {reply, {ok, Port}, State#state{next_id = Id + 1,
                                                    proxies = Proxies#{{native, Id} => {Target, native}}}};
                {error, Why} = Error ->
                    logger:warning("terrain netem: no proxy to ~ts: ~0tp", [Target, Why]),
                    {reply, Error, State#state{next_id = Id + 1}}
            end
    end;
handle_call({block, Targets}, _From, #state{blocked = Blocked, proxies = Proxies, native = Native} = State) ->
    logger:notice("terrain netem: a partition cuts this node off from ~ts", [lists:join(", ", Targets)]),
    Cut = maps:filter(fun(_Proxy, {Target, _}) -> lists:member(Target, Targets) end, Proxies),
    maps:foreach(fun({native, Id}, {_, native}) ->
                         terrain_lab_netem_native:close(Native, Id);
                    (Pid, {_, Ref}) ->
                         demonitor(Ref, [flush]),
                         _ = supervisor:terminate_child(terrain_lab_netem_proxy_sup, Pid)
                 end, Cut),
    {reply, ok, State#state{blocked = maps:merge(Blocked, maps:from_keys(Targets, true)),
                            proxies = maps:without(maps:keys(Cut), Proxies)}};
handle_call({unblock, all}, _From, State) ->
    {reply, ok, State#state{blocked = #{}}};
handle_call({unblock, Targets}, _From, #state{blocked = Blocked} = State) ->
    {reply, ok, State#state{blocked = maps:without(Targets, Blocked)}};
handle_call({set_links, Links}, _From, #state{proxies = Proxies} = State) ->
    Old = terrain_lab_netem_epmd:links(),
    ok = terrain_lab_netem_epmd:set_links(Links),
    _ = [case Proxy of
             {native, Id} -> terrain_lab_netem_native:set_link(State#state.native, Id,
                                                               terrain_lab_netem_link:new(maps:get(Target, Links)));
             Pid -> Pid ! {set_link, maps:get(Target, Links)}
         end
         || {Proxy, {Target, _}} <- maps:to_list(Proxies), maps:is_key(Target, Links),
            maps:get(Target, Links) =/= maps:get(Target, Old, undefined)],
    {reply, ok, State};
handle_call(status, _From, #state{blocked = Blocked, proxies = Proxies, native = Native} = State) ->
    Status = #{links => maps:from_list([{full_name(S), L} || {S, L} <- maps:to_list(terrain_lab_netem_epmd:links())]),
               blocked => lists:sort([full_name(S) || S <- maps:keys(Blocked)]),
               proxy => case Native of undefined -> erlang; _ -> native end,
               proxies => lists:sort([{full_name(S), Proxy} || {Proxy, {S, _}} <- maps:to_list(Proxies)])},
    {reply, Status, State};
handle_call(native_stats, _From, #state{native = undefined} = State) ->
    {reply, {error, not_native}, State};
handle_call(native_stats, _From, #state{native = {not_started, _}} = State) ->
    {reply, {ok, #{connections => [], wakeups => 0, os_pid => none,
                   late => #{count => 0, sum_ns => 0, max_ns => 0, histogram => []}}}, State};
handle_call(native_stats, _From, #state{native = Native} = State) ->
    Reply = case terrain_lab_netem_native:stats(Native) of
                {ok, Stats} -> {ok, Stats#{os_pid => element(2, erlang:port_info(Native, os_pid))}};
                {error, _} = Error -> Error
            end,
    {reply, Reply, State};
handle_call(Request, _From, State) ->
    {reply, {error, {unknown_request, Request}}, State}.

-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Request, State) ->
    {noreply, State}.

-spec handle_info(term(), #state{}) -> {noreply, #state{}} | {stop, term(), #state{}}.
handle_info({'DOWN', _Ref, process, Pid, Reason}, #state{proxies = Proxies} = State) ->
    _ = Reason =:= normal orelse Reason =:= {shutdown, closed}
        orelse logger:warning("terrain netem: the proxy to ~ts ended: ~0tP",
                              [element(1, maps:get(Pid, Proxies, {"?", x})), Reason, 10]),
    {noreply, State#state{proxies = maps:remove(Pid, Proxies)}};
handle_info({Native, {data, Event}}, #state{native = Native, proxies = Proxies} = State) ->
    case terrain_lab_netem_native:event(Event) of
        {ended, Id, Why} ->
            %% a close is the connection's end; anything else (eaddrnotavail, emfile, a
            %% write timeout) is the proxy's failure, and the VM's log says it
            _ = Why =:= "closed" orelse Why =:= "cut"
                orelse logger:warning("terrain netem: the proxied connection to ~ts ended: ~ts",
                                      [element(1, maps:get({native, Id}, Proxies, {"?", x})), Why]),
            {noreply, State#state{proxies = maps:remove({native, Id}, Proxies)}};
        unknown ->
            {noreply, State}
    end;
handle_info({nodedown, Node, #{nodedown_reason := Why}}, State) ->
    logger:notice("terrain netem: the connection to ~0tp went down: ~0tp", [Node, Why]),
    {noreply, State};
handle_info({Native, {exit_status, Status}}, #state{native = Native} = State) ->
    logger:error("terrain netem: the native proxy exited with status ~b; its connections are gone", [Status]),
    %% its connections are gone with it; the supervisor restarts the server (and the
    %% Erlang proxies after it, rest_for_one)
    {stop, {native_proxy_exited, Status}, State};
handle_info(_Info, State) ->
    {noreply, State}.

%%--------------------------------------------------------------------
%% Internal functions

call(Request) ->
    try
        gen_server:call(?MODULE, Request, ?CALL_TIMEOUT)
    catch
        exit:{noproc, _} -> {error, not_emulated};
        exit:{timeout, _} -> {error, timeout}
    end.

short_name(Node) ->
    hd(string:split(atom_to_list(Node), "@")).

%% Where a proxy listens and connects from: this node's own address (IPv4), the
%% target's (IPv6).
source({{_, _, _, _}, _Port}) -> terrain_lab_netem_epmd:own_address();
source({Ip, _Port}) -> Ip.

full_name(Short) ->
    [_, Host] = string:split(atom_to_list(node()), "@"),
    list_to_atom(Short ++ "@" ++ Host).
