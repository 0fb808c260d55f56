%% The JSON codec: decoding of every value kind, errors with byte offsets, encoding.
-module(terrain_json_tests).
-include_lib("eunit/include/eunit.hrl").

decodes_every_kind_test() ->
    {ok, V} = terrain_json:decode(<<" {\"a\": [1, -2.5e3, 0.25, true, false, null], \"b\": {\"c\": \"x\\ny\\u00e9\\ud83d\\ude00\"}, \"d\": {}} ">>),
    ?assertEqual(#{<<"a">> => [1, -2500.0, 0.25, true, false, null],
                   <<"b">> => #{<<"c">> => <<"x\ny", 16#e9/utf8, 16#1F600/utf8>>},
                   <<"d">> => #{}}, V).

encodes_sorted_keys_and_escapes_test() ->
    ?assertEqual(<<"{\"a\":\"q\\\"\\n\",\"b\":[1,2.5,null,\"atom\"]}">>,
                 terrain_json:encode(#{b => [1, 2.5, null, atom], a => <<"q\"\n">>})).

pretty_output_decodes_to_the_same_value_test() ->
    V = #{<<"nodes">> => [#{<<"x">> => 1}, #{<<"y">> => [<<"a">>]}], <<"e">> => [], <<"m">> => #{}},
    ?assertEqual({ok, V}, terrain_json:decode(terrain_json:encode(V, #{pretty => true}))).

errors_name_the_byte_offset_test() ->
    ?assertEqual({error, {json, 7, "expected ',' or '}' in object"}}, terrain_json:decode(<<"{\"a\":1 \"b\":2}">>)),
    ?assertEqual({error, {json, 4, "unexpected data after the value"}}, terrain_json:decode(<<"[1] x">>)),
    ?assertEqual({error, {json, 4, "unterminated string"}}, terrain_json:decode(<<"\"abc">>)),
    ?assertEqual({error, {json, 0, "unexpected character"}}, terrain_json:decode(<<"nul">>)),
    ?assertMatch({error, {json, _, "lone surrogate"}}, terrain_json:decode(<<"\"\\ud800\"">>)),
    ?assertEqual({error, {json, 1, "invalid number"}}, terrain_json:decode(<<"[-]">>)).

leading_zero_is_not_a_number_prefix_test() ->
    ?assertMatch({error, {json, _, _}}, terrain_json:decode(<<"012">>)).

write_file_is_atomic_and_readable_test() ->
    File = "/tmp/terrain_json_" ++ os:getpid() ++ ".json",
    try
        ok = terrain_json:write_file(File, #{format => <<"terrain.test/1">>}),
        ?assertEqual({ok, #{<<"format">> => <<"terrain.test/1">>}}, terrain_json:read_file(File)),
        ?assertNot(filelib:is_file(File ++ ".tmp"))
    after
        file:delete(File)
    end.
