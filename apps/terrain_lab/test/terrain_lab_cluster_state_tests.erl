%% The running cluster's state as read back: a cluster.json that is not what `up'
%% writes is an error naming what is wrong (never a crash), and node names as users
%% write them resolve through it.
-module(terrain_lab_cluster_state_tests).
-include_lib("eunit/include/eunit.hrl").

with_state(Json, Test) ->
    Dir = filename:join("/tmp", "terrain_state_test_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    ok = file:write_file(filename:join(Dir, "cluster.json"), Json),
    try Test(Dir)
    after _ = os:cmd("rm -rf '" ++ Dir ++ "'")
    end.

state(Nodes) ->
    terrain_json:encode(#{<<"format">> => <<"terrain.state/1">>, <<"nodes">> => Nodes}).

record(Name, Node, Path) ->
    #{<<"name">> => Name, <<"node">> => Node, <<"group_path">> => Path, <<"os_pid">> => null}.

bad(Json, Expected) ->
    with_state(Json, fun(Dir) ->
                             {error, Reason} = terrain_lab_cluster_state:read(Dir),
                             Text = lists:flatten(terrain_lab:format_error(Reason)),
                             ?assertNotEqual(nomatch, string:find(Text, Expected))
                     end).

state_without_nodes_is_an_error_test() ->
    bad(<<"{\"format\": \"terrain.state/1\"}">>, "it has no \"nodes\"").

node_that_is_not_a_string_is_an_error_test() ->
    bad(state([#{<<"node">> => 7}]), "\"node\" 7 is not a string").

node_without_host_is_an_error_test() ->
    bad(state([#{<<"node">> => <<"eu1">>}]), "is not name@host").

node_over_255_characters_is_an_error_test() ->
    bad(state([#{<<"node">> => list_to_binary(lists:duplicate(300, $n) ++ "@h")}]), "more than 255 characters").

os_pid_that_is_not_digits_is_an_error_test() ->
    bad(state([#{<<"node">> => <<"a@h">>, <<"os_pid">> => <<"../1">>}]), "not a string of digits").

not_json_says_down_force_removes_it_test() ->
    bad(<<"{\"format\"">>, "'terrain down --force' removes it").

names_resolve_short_full_group_and_outside_test() ->
    Json = state([record(<<"eu1">>, <<"d_eu1@h">>, [<<"eu">>, <<"r1">>]),
                  record(<<"eu2">>, <<"d_eu2@h">>, [<<"eu">>, <<"r1">>]),
                  record(<<"us1">>, <<"d_us1@h">>, [<<"us">>])]),
    with_state(Json, fun(Dir) ->
                             R = fun(Names) -> terrain_lab_cluster_state:resolve(Names, Dir) end,
                             ?assertEqual({ok, ['d_eu1@h']}, R(["eu1"])),
                             ?assertEqual({ok, ['d_eu2@h']}, R(["d_eu2@h"])),
                             ?assertEqual({ok, ['d_eu1@h', 'd_eu2@h']}, R(["r1"])),
                             ?assertEqual({ok, ['d_eu1@h', 'd_us1@h']}, R(["eu1", "us", "eu1"])),
                             ?assertEqual({ok, ['other@h']}, R(["other@h"])),
                             {error, Unknown} = R(["eu1", "xx"]),
                             ?assertEqual("unknown node xx; the cluster knows eu1, eu2, us1, eu, r1, us "
                                          "(or their full node names)",
                                          lists:flatten(terrain_lab:format_error(Unknown))),
                             {error, Long} = R([lists:duplicate(300, $x) ++ "@h"]),
                             ?assertMatch({cluster_state, {name_too_long, _}}, Long),
                             ?assertEqual({ok, 'd_us1@h'}, terrain_lab_cluster_state:resolve_node("us1", Dir)),
                             ?assertMatch({error, {cluster_state, {not_one_node, "eu", _}}},
                                          terrain_lab_cluster_state:resolve_node("eu", Dir))
                     end).

short_name_without_a_cluster_says_so_test() ->
    Dir = "/tmp/terrain_no_state_" ++ os:getpid(),
    {error, Reason} = terrain_lab_cluster_state:resolve(["eu1"], Dir),
    ?assertNotEqual(nomatch, string:find(lists:flatten(terrain_lab:format_error(Reason)),
                                         "no cluster is recorded in " ++ Dir ++ ", so only full node names")).

%% An `up' stopped by SIGINT while its VMs booted (handson row 16) left its cookie, its
%% lock and an empty nodes directory, and no cluster.json: `down' removes them and
%% says so (it used to say "no cluster is recorded" and leave them), and keeps a file
%% terrain did not make.
down_removes_what_an_interrupted_start_left_test() ->
    Dir = leftover_dir("left"),
    try
        ok = file:write_file(filename:join(Dir, "mine.txt"), <<"keep">>),
        {0, Out, Err} = terrain_lab_test_io:run(["down", "--state-dir", Dir]),
        ?assertEqual("", Out),
        ?assertNotEqual(nomatch, string:find(Err, "no cluster is recorded in " ++ Dir ++ "; removing what an "
                                             "interrupted start left there: cookie, up.lock, nodes")),
        ?assertEqual({ok, ["mine.txt"]}, file:list_dir(Dir))
    after _ = os:cmd("rm -rf '" ++ Dir ++ "'")
    end.

%% The same files with the lock held by a live process are a start under way: `down'
%% touches nothing.
down_leaves_a_start_under_way_alone_test() ->
    Dir = leftover_dir("busy"),
    try
        ok = file:write_file(filename:join(Dir, "up.lock"), os:getpid()),
        ?assertEqual([], terrain_lab_cluster_state:leftovers(Dir)),
        {1, "", Err} = terrain_lab_test_io:run(["down", "--state-dir", Dir]),
        ?assertNotEqual(nomatch, string:find(Err, "no cluster is recorded in " ++ Dir)),
        ?assertEqual(["cookie", "nodes", "up.lock"], lists:sort(element(2, file:list_dir(Dir))))
    after _ = os:cmd("rm -rf '" ++ Dir ++ "'")
    end.

%% A state directory as an interrupted start leaves it: cookie, an empty nodes
%% directory, and a lock naming an OS pid that is gone (above the kernel's pid_max).
leftover_dir(Tag) ->
    Dir = filename:join("/tmp", "terrain_leftover_" ++ Tag ++ "_" ++ os:getpid()),
    ok = filelib:ensure_dir(filename:join([Dir, "nodes", "x"])),
    ok = file:write_file(filename:join(Dir, "cookie"), <<"c0ffee">>),
    ok = file:write_file(filename:join(Dir, "up.lock"), <<"99999999">>),
    Dir.
