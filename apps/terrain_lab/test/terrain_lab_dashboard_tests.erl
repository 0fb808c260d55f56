%% Tests of the dashboard's HTTP server (terrain_lab_dashboard_http) against a recorded
%% snapshot, over real loopback sockets: the token, the Host check, bad requests
%% (unknown paths, methods, huge headers, slow clients, too many connections), 100
%% clients at once, the event stream; the snapshot reader and the command's errors.
-module(terrain_lab_dashboard_tests).
-include_lib("eunit/include/eunit.hrl").

-define(TOKEN, <<"0123456789abcdef0123456789abcdef">>).

snapshot() ->
    #{<<"format">> => <<"terrain.dashboard/1">>, <<"cluster">> => <<"recorded">>, <<"version">> => 3,
      <<"tree">> => #{<<"name">> => <<"c">>, <<"height">> => null, <<"children">> => [#{<<"node">> => <<"a@h">>}]},
      <<"nodes">> => [#{<<"node">> => <<"a@h">>, <<"state">> => <<"up">>, <<"group_path">> => []}],
      <<"attributes">> => #{<<"a@h">> => #{<<"loadavg1">> => <<"0.5">>}}}.

%% A server on a free loopback port (or the token on it), its port, and its stop.
server(Extra) ->
    {ok, View} = terrain_lab_dashboard:start(#{replay => snapshot()}),
    Self = self(),
    Owner = spawn(fun() ->
                          Options = #{ip => {127, 0, 0, 1}, port => 0, token => none, view => View,
                                      page => <<"<p>page</p>">>},
                          Result = terrain_lab_dashboard_http:start(maps:merge(Options, Extra)),
                          {ok, Listen} = Result,
                          Self ! {port, terrain_lab_dashboard_http:port(Listen)},
                          receive stop -> ok end
                  end),
    Port = receive {port, P} -> P after 5000 -> error(no_server) end,
    {Port, fun() -> Owner ! stop, terrain_lab_dashboard:stop(View) end}.

with_server(Extra, Test) ->
    {Port, Stop} = server(Extra),
    try Test(Port) after Stop() end.

%% One request as raw bytes; the status and the body.
request(Port, Bytes) ->
    {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}], 2000),
    ok = gen_tcp:send(S, Bytes),
    Reply = read_all(S, <<>>),
    ok = gen_tcp:close(S),
    [Head, Body] = string:split(Reply, <<"\r\n\r\n">>),
    [<<"HTTP/1.1">>, Status | _] = string:split(Head, <<" ">>, all),
    {binary_to_integer(Status), Head, Body}.

read_all(S, Acc) ->
    case gen_tcp:recv(S, 0, 10000) of
        {ok, Data} -> read_all(S, <<Acc/binary, Data/binary>>);
        {error, closed} -> Acc
    end.

get(Port, Path, Headers) ->
    request(Port, ["GET ", Path, " HTTP/1.1\r\n", [[N, ": ", V, "\r\n"] || {N, V} <- Headers], "\r\n"]).

host(Port) -> {"Host", ["127.0.0.1:", integer_to_list(Port)]}.

%%--------------------------------------------------------------------

loopback_serves_the_page_and_the_snapshot_test() ->
    with_server(#{}, fun(Port) ->
        {200, Head, <<"<p>page</p>">>} = get(Port, "/", [host(Port)]),
        ?assertNotEqual(nomatch, string:find(Head, "Content-Security-Policy: default-src 'none'")),
        {200, _, Json} = get(Port, "/state.json", [host(Port)]),
        ?assertMatch({ok, #{<<"format">> := <<"terrain.dashboard/1">>, <<"version">> := 3}}, terrain_json:decode(Json))
    end).

attributes_of_one_node_and_all_in_the_recorded_snapshot_test() ->
    with_server(#{}, fun(Port) ->
        {200, _, A} = get(Port, "/attributes?node=a%40h", [host(Port)]),
        ?assertEqual({ok, #{<<"loadavg1">> => <<"0.5">>}}, terrain_json:decode(A)),
        {200, _, <<"null">>} = get(Port, "/attributes?node=b%40h", [host(Port)]),
        {400, _, _} = get(Port, "/attributes", [host(Port)]),
        {200, _, Json} = get(Port, "/state.json", [host(Port)]),
        ?assertMatch({ok, #{<<"attributes">> := #{<<"a@h">> := #{<<"loadavg1">> := <<"0.5">>}}}},
                     terrain_json:decode(Json))
    end).

loopback_refuses_another_host_header_test() ->
    %% a page of another site whose name was rebound to 127.0.0.1
    with_server(#{}, fun(Port) ->
        {403, _, Body} = get(Port, "/state.json", [{"Host", ["evil.example:", integer_to_list(Port)]}]),
        ?assertEqual(nomatch, string:find(Body, "recorded")),
        {403, _, _} = get(Port, "/", [])
    end).

token_is_required_on_every_path_test() ->
    with_server(#{token => ?TOKEN}, fun(Port) ->
        [begin
             {401, _, Body} = get(Port, Path, []),
             ?assertEqual(nomatch, string:find(Body, "recorded")),
             ?assertEqual(nomatch, string:find(Body, "a@h"))
         end || Path <- ["/", "/state.json", "/events", "/nowhere"]],
        {401, _, _} = get(Port, "/state.json", [{"Authorization", "Bearer wrong"}]),
        {401, _, _} = get(Port, "/state.json", [{"Authorization", ["Bearer ", ?TOKEN, "0"]}]),
        {401, _, _} = get(Port, "/?token=wrong", [])
    end).

token_in_the_header_the_cookie_or_the_printed_url_test() ->
    with_server(#{token => ?TOKEN}, fun(Port) ->
        {200, _, _} = get(Port, "/state.json", [{"Authorization", ["Bearer ", ?TOKEN]}]),
        {200, _, _} = get(Port, "/state.json", [{"Cookie", ["other=1; terrain_dashboard=", ?TOKEN]}]),
        {303, Head, _} = get(Port, ["/?token=", ?TOKEN], []),
        ?assertNotEqual(nomatch, string:find(Head, ["Set-Cookie: terrain_dashboard=", ?TOKEN, "; Path=/; HttpOnly"])),
        ?assertNotEqual(nomatch, string:find(Head, "Location: /\r\n"))
    end).

bad_requests_get_4xx_test() ->
    with_server(#{}, fun(Port) ->
        {404, _, _} = get(Port, "/nowhere", [host(Port)]),
        {405, _, _} = request(Port, ["POST / HTTP/1.1\r\nHost: 127.0.0.1:", integer_to_list(Port), "\r\n\r\n"]),
        {400, _, _} = request(Port, <<"this is not http\r\n\r\n">>),
        {431, _, _} = get(Port, "/", [host(Port), {"X-Big", binary:copy(<<"x">>, 20000)}]),
        {431, _, _} = get(Port, "/", [host(Port) | [{["X-", integer_to_list(I)], "1"} || I <- lists:seq(1, 100)]])
    end).

a_slow_client_gets_408_after_the_deadline_test_() ->
    {timeout, 30, fun() ->
        with_server(#{}, fun(Port) ->
            {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}], 2000),
            ok = gen_tcp:send(S, <<"GET / HTTP/1.1\r\nHost: 127.0.0.1">>),    % and nothing more
            {ok, Reply} = gen_tcp:recv(S, 0, 15000),
            ?assertMatch(<<"HTTP/1.1 408 ", _/binary>>, Reply),
            gen_tcp:close(S)
        end)
    end}.

connections_above_the_limit_get_503_test() ->
    with_server(#{max_connections => 2, acceptors => 1}, fun(Port) ->
        Idle = [begin {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]), S end || _ <- [1, 2]],
        timer:sleep(200),        % the acceptor has handed both over (no message to wait for from outside)
        {503, _, _} = get(Port, "/", [host(Port)]),
        [gen_tcp:close(S) || S <- Idle],
        ok = wait(fun() -> element(1, get(Port, "/", [host(Port)])) =:= 200 end, 5000)
    end).

hundred_clients_at_once_test_() ->
    {timeout, 60, fun() ->
        with_server(#{}, fun(Port) ->
            Self = self(),
            Pids = [spawn(fun() -> Self ! {self(), get(Port, "/state.json", [host(Port)])} end)
                    || _ <- lists:seq(1, 100)],
            Statuses = [receive {P, {Status, _, _}} -> Status after 30000 -> timeout end || P <- Pids],
            ?assertEqual(lists:duplicate(100, 200), Statuses)
        end)
    end}.

events_start_with_the_snapshot_test() ->
    with_server(#{}, fun(Port) ->
        {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}], 2000),
        ok = gen_tcp:send(S, ["GET /events HTTP/1.1\r\nHost: 127.0.0.1:", integer_to_list(Port), "\r\n\r\n"]),
        Stream = read_until(S, <<"\n\n">>, 2, <<>>),
        ?assertNotEqual(nomatch, string:find(Stream, "Content-Type: text/event-stream")),
        ?assertNotEqual(nomatch, string:find(Stream, "event: snapshot\ndata: {")),
        gen_tcp:close(S)
    end).

read_until(S, Separator, N, Acc) ->
    case length(binary:matches(Acc, Separator)) >= N of
        true -> Acc;
        false ->
            {ok, Data} = gen_tcp:recv(S, 0, 5000),
            read_until(S, Separator, N, <<Acc/binary, Data/binary>>)
    end.

wait(Fun, Ms) when Ms =< 0 -> Fun() orelse error(not_in_time), ok;
wait(Fun, Ms) ->
    case Fun() of
        true -> ok;
        false -> timer:sleep(50), wait(Fun, Ms - 50)
    end.

%%--------------------------------------------------------------------
%% The snapshot reader and the command's errors

snapshot_reader_names_each_problem_test() ->
    Dir = filename:join(["/tmp", "terrain_dashboard_tests_" ++ os:getpid()]),
    ok = filelib:ensure_path(Dir),
    try
        Good = filename:join(Dir, "good.json"),
        ok = file:write_file(Good, terrain_json:encode(snapshot())),
        ?assertMatch({ok, #{<<"cluster">> := <<"recorded">>}}, terrain_lab_dashboard:read_snapshot(Good)),
        Other = filename:join(Dir, "other.json"),
        ok = file:write_file(Other, <<"{\"format\": \"terrain.latency/1\"}">>),
        ?assertEqual({error, {dashboard, {format, Other, <<"terrain.latency/1">>}}},
                     terrain_lab_dashboard:read_snapshot(Other)),
        Broken = filename:join(Dir, "broken.json"),
        ok = file:write_file(Broken, <<"{\"format\": ">>),
        ?assertMatch({error, {dashboard, {json, Broken, _}}}, terrain_lab_dashboard:read_snapshot(Broken)),
        ?assertEqual({error, {dashboard, {read, Dir, eisdir}}}, terrain_lab_dashboard:read_snapshot(Dir))
    after
        file:del_dir_r(Dir)
    end.

cli_bad_bind_is_a_usage_error_test() ->
    {2, "", Err} = terrain_lab_test_io:run(["dashboard", "--bind", "not-an-address"]),
    ?assertNotEqual(nomatch, string:find(Err, "--bind not-an-address is not an IP address")).

cli_replay_of_a_missing_file_exits_1_test() ->
    {1, "", Err} = terrain_lab_test_io:run(["dashboard", "--replay", "/nonexistent/state.json"]),
    ?assertNotEqual(nomatch, string:find(Err, "cannot read /nonexistent/state.json: no such file or directory")).

cli_port_in_use_exits_1_test() ->
    {ok, Busy} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Port} = inet:port(Busy),
    File = "/tmp/terrain_dashboard_tests_busy_" ++ os:getpid() ++ ".json",
    ok = file:write_file(File, terrain_json:encode(snapshot())),
    try
        {1, "", Err} = terrain_lab_test_io:run(["dashboard", "--replay", File, "--port", integer_to_list(Port)]),
        ?assertNotEqual(nomatch, string:find(Err, "is in use"))
    after
        gen_tcp:close(Busy),
        file:delete(File)
    end.
