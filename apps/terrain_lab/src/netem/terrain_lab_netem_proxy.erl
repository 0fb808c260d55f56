%% @private
%% @doc The proxy of one emulated distribution connection.
%%
%% Started by `terrain_lab_netem_server' under `terrain_lab_netem_proxy_sup' when
%% this node connects to another node of its cluster. It listens on a fresh port of
%% this node's own address (returned to distribution by
%% `terrain_lab_netem_epmd:port_please/2'), accepts the one connection that
%% distribution then opens, connects from that address to the real node, and
%% carries the bytes both ways:
%% ```
%% distribution ──local──► proxy (outbound direction) ──remote──► the other node
%%              ◄─────────  inbound direction (linked)  ◄────────
%% '''
%% Two processes, one per direction: the supervised proxy process reads `local' and
%% writes `remote'; a helper it spawns and links to reads `remote' and writes
%% `local'. Each owns the socket it reads, stamps every chunk on arrival, gives it a
%% due time from the link model (`terrain_lab_netem_link') and writes it when it is
%% due. Chunks leave in arrival order (due times are monotone), whole: nothing is
%% lost, duplicated or reordered.
%%
%% Timing: a direction sleeps (`receive ... after') until about 1.5 ms before the
%% next due time and spins (`receive ... after 0' and `erlang:yield/0') for the rest,
%% since a receive timeout wakes about a millisecond late. Every chunk due by the
%% time the process is awake is written in one `gen_tcp:send/2'.
%%
%% Flow control: a direction stops reading its source while it holds more than the
%% link's window (`terrain_lab_netem_link:window/1') and resumes below half of it, so
%% a fast sender on a slow link is held back by TCP as on a real network.
%%
%% Ending: when either socket closes, the direction that reads it writes what it
%% still holds (at its due time) and exits with `{shutdown, closed}'; the link takes
%% the other direction down and both sockets close, so the close reaches the other
%% side. A partition kills the proxy through its supervisor (`brutal_kill'). A proxy
%% whose connection never arrives gives up after the distribution setup time
%% (`net_setuptime').
-module(terrain_lab_netem_proxy).

%% API
-export([start_link/1,
         timeouts/0]).

%% Internal exports
-export([init/1,
         inbound/4]).

%% exports_not_used: start_link/1 is the simple_one_for_one child start, init/1 and inbound/4 are
%% started by proc_lib.
-ignore_xref([{inbound, 4}, {init, 1}, {start_link, 1}]).

-export_type([options/0]).

-type options() ::
        #{target := string(),                                   % short name of the other node
          address := {inet:ip_address(), inet:port_number()},   % where it really listens
          source := inet:ip_address(),                          % where the proxy listens, connects from
          link := terrain_lab_spec:link_options()}.             % the spec's link options to it

-record(direction, {source :: gen_tcp:socket(),           % read, owned by this process
                    sink :: gen_tcp:socket(),             % written
                    link :: terrain_lab_netem_link:link(),
                    model :: terrain_lab_netem_link:direction(),
                    window :: pos_integer(),               % bytes held before reading pauses
                    queue = queue:new() :: queue:queue({integer(), binary()}),
                    queued = 0 :: non_neg_integer(),       % bytes in the queue
                    reading = active :: active | paused | closed,
                    rand :: rand:state(),
                    %% the other direction (the inbound one, for the outbound process),
                    %% to which a link change is passed on
                    other :: pid() | undefined}).

%% Sleep until this long (ns) before a due time, then spin. A receive timeout wakes
%% about 1 ms late (the timer rounds up to the next millisecond), so the spin lasts
%% 0.5 to 1.5 ms; longer spins only give the OS more chances to preempt the VM.
-define(SPIN_NS, 1500000).
%% Data messages a socket delivers before it must be re-armed ({active, N}).
-define(ACTIVE_N, 64).
%% 256 kB driver buffers: with the default (1460 B) a 1 MB message is 700 messages
%% and the proxy carries an eighth of what a direct connection does.
-define(SOCKET_OPTIONS, [binary, {packet, raw}, {active, false}, {nodelay, true}, {buffer, 262144}]).

%%--------------------------------------------------------------------
%% API

%% @doc Starts a proxy; returns the port it listens on.
-spec start_link(options()) -> {ok, pid(), inet:port_number()} | {error, term()}.
start_link(Options) ->
    proc_lib:start_link(?MODULE, init, [Options]).

%% @doc How long a proxy waits for distribution's connection, and how long a write may
%% make no progress before the connection ends (ms); the native proxy takes the same.
-spec timeouts() -> {Accept :: pos_integer(), Send :: pos_integer()}.
timeouts() ->
    {setup_timeout(), send_timeout()}.

%%--------------------------------------------------------------------
%% Internal exports

%% @doc The proxy process: listen, report the port, accept, connect, carry outbound.
-spec init(options()) -> no_return().
init(#{source := Ip} = Options) ->
    case gen_tcp:listen(0, [{ip, Ip}, {backlog, 1} | family(Ip) ++ socket_options()]) of
        {ok, Listen} ->
            {ok, ProxyPort} = inet:port(Listen),
            proc_lib:init_ack({ok, self(), ProxyPort}),
            connect(Listen, Options);
        {error, Why} ->
            proc_lib:init_ack({error, {listen, Why}}),
            exit(normal)
    end.

%% @doc The inbound direction: waits until `Proxy' has handed it the remote socket.
-spec inbound(pid(), gen_tcp:socket(), gen_tcp:socket(), terrain_lab_netem_link:link()) -> no_return().
inbound(Proxy, Remote, Local, Link) ->
    receive
        {go, Proxy} -> run(Remote, Local, Link, undefined)
    end.

%%--------------------------------------------------------------------
%% Internal functions

connect(Listen, #{address := {Ip, Port}, source := Source, link := LinkOptions}) ->
    Timeout = setup_timeout(),
    Accepted = gen_tcp:accept(Listen, Timeout),
    ok = gen_tcp:close(Listen),
    Local = case Accepted of
                {ok, L} -> L;
                {error, AcceptWhy} -> exit({shutdown, {accept, AcceptWhy}})
            end,
    Remote = case gen_tcp:connect(Ip, Port, [{ip, Source} | family(Ip) ++ socket_options()], Timeout) of
                 {ok, R} -> R;
                 {error, ConnectWhy} -> exit({shutdown, {connect, ConnectWhy}})
             end,
    Link = terrain_lab_netem_link:new(LinkOptions),
    Inbound = proc_lib:spawn_link(?MODULE, inbound, [self(), Remote, Local, Link]),
    case gen_tcp:controlling_process(Remote, Inbound) of
        ok -> Inbound ! {go, self()}, ok;
        {error, Why} -> exit({shutdown, {controlling_process, Why}})
    end,
    run(Local, Remote, Link, Inbound).

family(Ip) when tuple_size(Ip) =:= 8 -> [inet6];
family(_) -> [inet].

%% A write that makes no progress for a net tick time fails and ends the proxy: the
%% node it writes to is frozen, and distribution gives up on it after as long.
socket_options() ->
    [{send_timeout, send_timeout()}, {send_timeout_close, true} | ?SOCKET_OPTIONS].

send_timeout() ->
    Seconds = case net_kernel:get_net_ticktime() of
                  {ongoing_change_to, T} -> T;
                  T when is_integer(T) -> T;
                  ignored -> 60
              end,
    Seconds * 1000.

setup_timeout() ->
    case application:get_env(kernel, net_setuptime) of
        {ok, Seconds} when is_integer(Seconds), Seconds > 0 -> Seconds * 1000;
        _ -> 7000
    end.

run(Source, Sink, Link, Other) ->
    _ = inet:setopts(Source, [{active, ?ACTIVE_N}]),
    loop(#direction{source = Source, sink = Sink, link = Link, other = Other,
                    model = terrain_lab_netem_link:new_direction(),
                    window = terrain_lab_netem_link:window(Link),
                    rand = rand:seed_s(exsss)}).

loop(#direction{queue = Queue, reading = Reading} = D) ->
    case queue:peek(Queue) of
        empty when Reading =:= closed ->
            exit({shutdown, closed});
        empty ->
            receive Message -> loop(handle(Message, D)) end;
        {value, {Due, _}} ->
            wait(Due - now_ns(), D)
    end.

wait(Left, D) when Left =< 0 ->
    loop(deliver(D));
wait(Left, D) when Left > ?SPIN_NS ->
    receive Message -> loop(handle(Message, D))
    after (Left - ?SPIN_NS) div 1000000 -> loop(D)
    end;
wait(_Left, D) ->
    receive Message -> loop(handle(Message, D))
    after 0 -> erlang:yield(), loop(D)
    end.

handle({tcp, Source, Data}, #direction{source = Source} = D) ->
    #direction{link = Link, model = Model, rand = Rand0, queue = Queue, queued = Queued, window = Window} = D,
    {U, Rand} = case Link of
                    #{jitter := 0} -> {0.0, Rand0};
                    #{} -> rand:uniform_s(Rand0)
                end,
    {Due, Model1} = terrain_lab_netem_link:schedule(now_ns(), byte_size(Data), U, Link, Model),
    D1 = D#direction{model = Model1, rand = Rand, queue = queue:in({Due, Data}, Queue),
                     queued = Queued + byte_size(Data)},
    case D1 of
        #direction{reading = active, queued = Q} when Q > Window ->
            _ = inet:setopts(Source, [{active, false}]),
            D1#direction{reading = paused};
        _ ->
            D1
    end;
handle({tcp_passive, Source}, #direction{source = Source, reading = active} = D) ->
    _ = inet:setopts(Source, [{active, ?ACTIVE_N}]),
    D;
handle({tcp_passive, Source}, #direction{source = Source} = D) ->
    D;
handle({tcp_closed, Source}, #direction{source = Source} = D) ->
    D#direction{reading = closed};
handle({tcp_error, Source, Why}, #direction{source = Source}) ->
    exit({shutdown, {tcp_error, Why}});
handle({set_link, LinkOptions}, #direction{other = Other} = D) ->
    %% the link changed (a node moved between groups, terrain_lab_netem:set_links/2):
    %% chunks already queued keep their due times, new ones follow the new link
    _ = is_pid(Other) andalso (Other ! {set_link, LinkOptions}),
    Link = terrain_lab_netem_link:new(LinkOptions),
    D#direction{link = Link, window = terrain_lab_netem_link:window(Link)};
handle(_Unexpected, D) ->
    D.

%% Writes every chunk that is due, in one send.
deliver(#direction{sink = Sink, queue = Queue, queued = Queued, window = Window} = D) ->
    {Chunks, Bytes, Rest} = take_due(now_ns(), Queue, [], 0),
    case gen_tcp:send(Sink, Chunks) of
        ok -> ok;
        {error, Why} -> exit({shutdown, {send, Why}})
    end,
    D1 = D#direction{queue = Rest, queued = Queued - Bytes},
    case D1 of
        #direction{reading = paused, queued = Q} when Q < Window div 2 ->
            _ = inet:setopts(D#direction.source, [{active, ?ACTIVE_N}]),
            D1#direction{reading = active};
        _ ->
            D1
    end.

take_due(Now, Queue, Chunks, Bytes) ->
    case queue:peek(Queue) of
        {value, {Due, Data}} when Due =< Now ->
            take_due(Now, queue:drop(Queue), [Data | Chunks], Bytes + byte_size(Data));
        _ ->
            {lists:reverse(Chunks), Bytes, Queue}
    end.

now_ns() ->
    erlang:monotonic_time(nanosecond).
