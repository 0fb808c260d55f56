%% EUnit tests of the dashboard's reader of a chaos run's history
%% (terrain_lab_dashboard_chaos): rows as the history grows, a line cut in two, the
%% observer's rounds only when the version or the agreement changes.
-module(terrain_lab_dashboard_chaos_tests).

-include_lib("eunit/include/eunit.hrl").

line(Map) ->
    [terrain_json:encode(Map), $\n].

history_read_as_it_grows_test() ->
    Dir = filename:join(["/tmp", "terrain_dashboard_chaos_" ++ os:getpid(), "state"]),
    File = filename:join(filename:dirname(Dir), "history.jsonl"),
    ok = filelib:ensure_dir(File),
    try
        Chaos0 = terrain_lab_dashboard_chaos:new(Dir),
        ?assertMatch({[], _}, terrain_lab_dashboard_chaos:read(Chaos0)),        % no history: nothing
        Kill = line(#{t => 5100, op => kill, node => 'n2@h', result => ok, burst => 1}),
        {Head, Tail} = lists:split(20, binary_to_list(iolist_to_binary(Kill))),
        ok = file:write_file(File, [line(#{format => <<"terrain.chaos_history/1">>, seed => 1}),
                                    line(#{t => 5000, op => burst_start, node => null, result => ok, burst => 1}),
                                    line(#{t => 5050, op => observe,
                                           result => #{<<"a">> => [3, 1], <<"b">> => [3, 1]}}),
                                    line(#{t => 5060, op => choose, node => 'a', result => 3}), Head]),
        {Rows1, Chaos1} = terrain_lab_dashboard_chaos:read(Chaos0),
        ?assertEqual([<<"burst_start">>, versions], [Op || #{op := Op} <- Rows1]),
        ok = file:write_file(File, [Tail,
                                    line(#{t => 5300, op => observe,
                                           result => #{<<"a">> => [3, 1], <<"b">> => [3, 1]}}),
                                    line(#{t => 5550, op => observe,
                                           result => #{<<"a">> => [4, 2], <<"b">> => [3, 1]}})],
                             [append]),
        {Rows2, Chaos2} = terrain_lab_dashboard_chaos:read(Chaos1),
        ?assertMatch([#{op := <<"kill">>, <<"node">> := <<"n2@h">>, <<"result">> := <<"ok">>},
                      #{op := versions, version := 4, pairs := 2}], Rows2),
        ?assertEqual(4, length(terrain_lab_dashboard_chaos:rows(Chaos2)))
    after
        _ = file:del_dir_r(filename:dirname(Dir))
    end.
