%% @private
%% @doc The dashboard's HTTP server: a small `gen_tcp' server (no dependency beyond
%% OTP's kernel) for one page, its snapshot and its event stream.
%%
%% Routes (GET and HEAD only, else 405): `/' the page, `/state.json' the snapshot
%% (`terrain.dashboard/1'), `/attributes?node=NAME' one node's attributes, `/events'
%% Server-Sent Events (`snapshot' first, then
%% `tree', `nodes', `attributes', `groups', `change', `probe'); anything else 404.
%%
%% Safe by default. On a loopback address the `Host' header must name a loopback
%% host (a page of another site that rebinds its DNS name to 127.0.0.1 gets 403). On
%% any other address every request needs the token, as `Authorization: Bearer TOKEN',
%% the cookie `terrain_dashboard' or, for `/' only, `?token=TOKEN' (answered with a
%% redirect that sets the cookie); without it 401 and a body that says nothing of the
%% cluster. Bounded: `acceptors' processes accept; at most `max_connections'
%% connections are served at once (one more gets 503); a request head (request line
%% and headers) of more than 16 KB gets 431, more than 64 header lines 431; the whole head must
%% arrive within 5 s (else 408); a client that does not read what is sent within 5 s
%% is dropped. A connection is one process, not linked to anything: whatever it meets,
%% only it ends.
-module(terrain_lab_dashboard_http).

%% API
-export([start/1,
         port/1]).

-define(REQUEST_DEADLINE, 5000).
-define(SEND_TIMEOUT, 5000).
-define(HEAD_MAX, 16384).
-define(HEADERS_MAX, 64).
-define(KEEPALIVE, 15000).
-define(COOKIE, <<"terrain_dashboard">>).

-type options() :: #{ip := inet:ip_address(),
                     port := inet:port_number(),        % 0: any free port
                     token := binary() | none,          % none: loopback only, Host checked instead
                     view := pid(),                     % terrain_lab_dashboard
                     page := binary(),                  % the HTML page
                     acceptors => pos_integer(),        % default 8
                     max_connections => pos_integer()}. % default 200
-export_type([options/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Listens and starts the acceptors, linked to the caller (the listening socket
%% is the caller's: the server ends with it).
-spec start(options()) -> {ok, gen_tcp:socket()} | {error, {dashboard, {listen, term(), term()}}}.
start(#{ip := Ip, port := Port} = Options) ->
    case gen_tcp:listen(Port, [binary, {ip, Ip}, {active, false}, {reuseaddr, true}, {backlog, 1024},
                               {packet, raw}, {nodelay, true},
                               {send_timeout, ?SEND_TIMEOUT}, {send_timeout_close, true}]) of
        {ok, Listen} ->
            {ok, Bound} = inet:port(Listen),
            Config = Options#{port := Bound, connections => counters:new(1, [atomics]),
                              max_connections => maps:get(max_connections, Options, 200)},
            _ = [spawn_link(fun() -> accept(Listen, Config) end) || _ <- lists:seq(1, maps:get(acceptors, Options, 8))],
            {ok, Listen};
        {error, Why} ->
            {error, {dashboard, {listen, {Ip, Port}, Why}}}
    end.

%% @doc The port a listening socket got (for `port => 0').
-spec port(gen_tcp:socket()) -> inet:port_number().
port(Listen) ->
    {ok, Port} = inet:port(Listen),
    Port.

%%--------------------------------------------------------------------
%% Internal: accepting

accept(Listen, Config) ->
    case gen_tcp:accept(Listen) of
        {ok, Socket} ->
            ok = hand_over(Socket, Config),
            accept(Listen, Config);
        {error, closed} ->
            ok;
        {error, _} ->                                  % emfile and the like: wait a little
            receive after 100 -> accept(Listen, Config) end
    end.

%% A connection process for the socket, or 503 when the connections are at their bound.
hand_over(Socket, #{connections := Count, max_connections := Max} = Config) ->
    case counters:get(Count, 1) >= Max of
        true ->
            _ = gen_tcp:send(Socket, response(503, [], <<"busy: too many connections\n">>, get)),
            gen_tcp:close(Socket);
        false ->
            counters:add(Count, 1, 1),
            Pid = spawn(fun() -> receive {go, S} -> connection(S, Config) end end),
            case gen_tcp:controlling_process(Socket, Pid) of
                ok -> Pid ! {go, Socket}, ok;
                {error, _} -> exit(Pid, kill), counters:sub(Count, 1, 1), gen_tcp:close(Socket)
            end
    end.

connection(Socket, #{connections := Count} = Config) ->
    try
        Deadline = erlang:monotonic_time(millisecond) + ?REQUEST_DEADLINE,
        case read_request(Socket, Deadline) of
            {ok, Request} -> serve(Socket, Request, Config);
            {error, closed} -> ok;
            {error, Status} -> refuse(Socket, Status)
        end
    after
        counters:sub(Count, 1, 1),
        gen_tcp:close(Socket)
    end.

%%--------------------------------------------------------------------
%% Internal: reading a request under one deadline

%% The head (request line and headers) is read whole, at most 16 KB, then parsed.
read_request(Socket, Deadline) ->
    case read_head(Socket, Deadline, <<>>) of
        {ok, Head} -> parse_request(Head);
        {error, _} = Error -> Error
    end.

read_head(Socket, Deadline, Acc) ->
    case binary:match(Acc, <<"\r\n\r\n">>) of
        {At, 4} -> {ok, binary:part(Acc, 0, At + 4)};
        nomatch when byte_size(Acc) > ?HEAD_MAX -> {error, 431};
        nomatch ->
            case recv(Socket, Deadline) of
                {ok, Data} -> read_head(Socket, Deadline, <<Acc/binary, Data/binary>>);
                {error, timeout} -> {error, 408};
                {error, _} -> {error, closed}
            end
    end.

parse_request(Head) ->
    case erlang:decode_packet(http_bin, Head, []) of
        {ok, {http_request, Method, {abs_path, Target}, _Version}, Rest} ->
            parse_headers(Rest, #{method => Method, target => Target, headers => #{}}, 0);
        _ ->
            {error, 400}
    end.

parse_headers(_Rest, _Request, N) when N > ?HEADERS_MAX ->
    {error, 431};
parse_headers(Rest, #{headers := Headers} = Request, N) ->
    case erlang:decode_packet(httph_bin, Rest, []) of
        {ok, http_eoh, _} -> {ok, Request};
        {ok, {http_header, _, Name, _, Value}, More} ->
            Key = string:lowercase(if is_atom(Name) -> atom_to_binary(Name); true -> Name end),
            parse_headers(More, Request#{headers := Headers#{Key => Value}}, N + 1);
        _ ->
            {error, 400}
    end.

recv(Socket, Deadline) ->
    case Deadline - erlang:monotonic_time(millisecond) of
        Left when Left > 0 -> gen_tcp:recv(Socket, 0, Left);
        _ -> {error, timeout}
    end.

%%--------------------------------------------------------------------
%% Internal: routes

serve(Socket, #{method := Method} = Request, Config) when Method =:= 'GET'; Method =:= 'HEAD' ->
    {Path, Query} = split_target(maps:get(target, Request)),
    case allowed(Request, Path, Query, Config) of
        ok -> route(Socket, Path, Request#{query => Query}, Config);
        {redirect, Token} ->
            send(Socket, response(303, [{<<"Location">>, <<"/">>},
                                        {<<"Set-Cookie">>, [?COOKIE, $=, Token,
                                                            <<"; Path=/; HttpOnly; SameSite=Strict">>]}],
                                  <<>>, Method));
        {refused, Status} -> send(Socket, response(Status, [], reason(Status), Method))
    end;
serve(Socket, _Request, _Config) ->
    send(Socket, response(405, [{<<"Allow">>, <<"GET, HEAD">>}], reason(405), get)).

route(Socket, <<"/">>, #{method := Method}, #{page := Page}) ->
    send(Socket, response(200, [{<<"Content-Type">>, <<"text/html; charset=utf-8">>}], Page, Method));
route(Socket, <<"/state.json">>, #{method := Method}, #{view := View}) ->
    send(Socket, response(200, [{<<"Content-Type">>, <<"application/json">>}],
                          terrain_lab_dashboard:snapshot(View), Method));
route(Socket, <<"/attributes">>, #{method := Method, query := Query}, #{view := View}) ->
    case proplists:get_value(<<"node">>, Query) of
        Node when is_binary(Node) ->
            send(Socket, response(200, [{<<"Content-Type">>, <<"application/json">>}],
                                  terrain_lab_dashboard:attributes(View, Node), Method));
        _ ->
            send(Socket, response(400, [], <<"400 Bad Request: /attributes?node=NAME\n">>, Method))
    end;
route(Socket, <<"/events">>, #{method := 'GET'}, #{view := View}) ->
    events(Socket, View);
route(Socket, _Path, #{method := Method}, _Config) ->
    send(Socket, response(404, [], reason(404), Method)).

%% The token, or on loopback the Host header.
allowed(#{headers := Headers}, _Path, _Query, #{token := none, port := Port}) ->
    Host = maps:get(<<"host">>, Headers, <<>>),
    Loopback = [iolist_to_binary([H, $:, integer_to_binary(Port)])
                || H <- [<<"127.0.0.1">>, <<"localhost">>, <<"[::1]">>]],
    case lists:member(Host, Loopback) of
        true -> ok;
        false -> {refused, 403}
    end;
allowed(#{headers := Headers}, Path, Query, #{token := Token}) ->
    Given = [T || T <- [bearer(maps:get(<<"authorization">>, Headers, <<>>)),
                        cookie(maps:get(<<"cookie">>, Headers, <<>>))], T =/= none],
    case {lists:any(fun(T) -> same(T, Token) end, Given), Path, proplists:get_value(<<"token">>, Query)} of
        {true, _, _} -> ok;
        {false, <<"/">>, Candidate} when is_binary(Candidate) ->
            case same(Candidate, Token) of
                true -> {redirect, Token};
                false -> {refused, 401}
            end;
        _ -> {refused, 401}
    end.

bearer(<<"Bearer ", Token/binary>>) -> string:trim(Token);
bearer(_) -> none.

cookie(Header) ->
    Pairs = [string:split(string:trim(P), "=") || P <- string:split(Header, ";", all)],
    case [V || [K, V] <- Pairs, K =:= ?COOKIE] of
        [V | _] -> V;
        [] -> none
    end.

%% Compares in time independent of where they differ.
same(A, B) when byte_size(A) =:= byte_size(B) -> crypto:hash_equals(A, B);
same(_, _) -> false.

split_target(Target) ->
    case string:split(Target, "?") of
        [Path] -> {Path, []};
        [Path, Query] -> {Path, uri_string:dissect_query(Query)}
    end.

%%--------------------------------------------------------------------
%% Internal: the event stream

events(Socket, View) ->
    Snapshot = terrain_lab_dashboard:subscribe(View),
    Head = [<<"HTTP/1.1 200 OK\r\n">>, headers([{<<"Content-Type">>, <<"text/event-stream">>}]), <<"\r\n">>],
    case gen_tcp:send(Socket, [Head, <<"retry: 1000\n\n">>, event(snapshot, Snapshot)]) of
        ok ->
            ok = inet:setopts(Socket, [{active, once}]),
            stream(Socket);
        {error, _} ->
            ok
    end.

stream(Socket) ->
    Sent = receive
               {terrain_dashboard, Name, Json} -> gen_tcp:send(Socket, event(Name, Json));
               {tcp, Socket, _} -> inet:setopts(Socket, [{active, once}]);   % nothing is expected: ignored
               {tcp_closed, Socket} -> {error, closed};
               {tcp_error, Socket, Why} -> {error, Why}
           after ?KEEPALIVE ->
               gen_tcp:send(Socket, <<": keepalive\n\n">>)
           end,
    case Sent of
        ok -> stream(Socket);
        {error, _} -> ok
    end.

event(Name, Json) ->
    [<<"event: ">>, atom_to_binary(Name), <<"\ndata: ">>, Json, <<"\n\n">>].

%%--------------------------------------------------------------------
%% Internal: responses

%% An answer before the request was read to its end: the rest is read and dropped
%% (1 s, 64 KB at most) after the answer, so that closing does not reset the
%% connection before the client has read it.
refuse(Socket, Status) ->
    send(Socket, response(Status, [], reason(Status), get)),
    _ = gen_tcp:shutdown(Socket, write),
    drain(Socket, erlang:monotonic_time(millisecond) + 1000, 65536).

drain(_Socket, _Deadline, Left) when Left =< 0 ->
    ok;
drain(Socket, Deadline, Left) ->
    case recv(Socket, Deadline) of
        {ok, Data} -> drain(Socket, Deadline, Left - byte_size(Data));
        {error, _} -> ok
    end.

send(Socket, Response) ->
    _ = gen_tcp:send(Socket, Response),
    ok.

response(Status, Headers, Body, Method) ->
    [<<"HTTP/1.1 ">>, integer_to_binary(Status), $\s, status_text(Status), <<"\r\n">>,
     headers([{<<"Content-Length">>, integer_to_binary(iolist_size(Body))} | Headers]
             ++ [{<<"Content-Type">>, <<"text/plain; charset=utf-8">>}
                 || not lists:keymember(<<"Content-Type">>, 1, Headers)]),
     <<"\r\n">>, case Method of 'HEAD' -> <<>>; _ -> Body end].

headers(Headers) ->
    [[Name, <<": ">>, Value, <<"\r\n">>]
     || {Name, Value} <- Headers ++ [{<<"Cache-Control">>, <<"no-store">>},
                                     {<<"Connection">>, <<"close">>},
                                     {<<"X-Content-Type-Options">>, <<"nosniff">>},
                                     {<<"Referrer-Policy">>, <<"no-referrer">>},
                                     {<<"Content-Security-Policy">>,
                                      <<"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                        "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                        "frame-ancestors 'none'">>}]].

status_text(200) -> <<"OK">>;
status_text(303) -> <<"See Other">>;
status_text(400) -> <<"Bad Request">>;
status_text(401) -> <<"Unauthorized">>;
status_text(403) -> <<"Forbidden">>;
status_text(404) -> <<"Not Found">>;
status_text(405) -> <<"Method Not Allowed">>;
status_text(408) -> <<"Request Timeout">>;
status_text(431) -> <<"Request Header Fields Too Large">>;
status_text(503) -> <<"Service Unavailable">>.

reason(401) -> <<"401 Unauthorized: this dashboard needs its token (Authorization: Bearer TOKEN, "
                 "or the URL 'terrain dashboard' printed)\n">>;
reason(403) -> <<"403 Forbidden: the Host header does not name this loopback address\n">>;
reason(Status) -> [integer_to_binary(Status), $\s, status_text(Status), $\n].
