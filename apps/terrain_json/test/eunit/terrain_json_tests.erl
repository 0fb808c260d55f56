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

%% Nesting is counted explicitly (the decoder recurses): 512 levels decode, 513 and a
%% 20,000-deep document are refused at once (issue 33, row 12).
nesting_deeper_than_512_is_refused_test() ->
    Nested = fun(D) -> iolist_to_binary([lists:duplicate(D, "["), lists:duplicate(D, "]")]) end,
    ?assertMatch({ok, [_]}, terrain_json:decode(Nested(512))),
    ?assertEqual({error, {json, 512, "nested more than 512 deep"}}, terrain_json:decode(Nested(513))),
    ?assertMatch({error, {json, _, "nested more than 512 deep"}},
                 terrain_json:decode(iolist_to_binary([lists:duplicate(20000, "{\"a\":"), "1",
                                                       lists:duplicate(20000, "}")]))).

read_file_reads_only_regular_files_test() ->
    ?assertEqual({error, {file, "/dev/zero", not_regular}}, terrain_json:read_file("/dev/zero")),
    ?assertEqual({error, {file, "/tmp", not_regular}}, terrain_json:read_file("/tmp")).
