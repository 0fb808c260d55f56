%% EUnit: parsing and validating attribute configuration (files and lists).
-module(terrain_attr_config_tests).
-include_lib("eunit/include/eunit.hrl").

-export([answer/0, answer/1]).

answer() -> 42.
answer(X) -> X.

with_file(Text, Fun) ->
    File = filename:join(tmp_dir(), "attrs-" ++ integer_to_list(erlang:unique_integer([positive])) ++ ".attrs"),
    ok = file:write_file(File, Text),
    try Fun(File)
    after file:delete(File)
    end.

tmp_dir() ->
    Dir = filename:join(["_build", "test", "tmp"]),
    ok = filelib:ensure_path(Dir),
    Dir.

parse(Text) ->
    with_file(Text, fun terrain_attr_config:parse_file/1).

%% The error, with the file name replaced by `file', for comparison.
error_of(Text) ->
    case parse(Text) of
        {error, {config, _File, Where, Why}} -> {Where, Why};
        Other -> Other
    end.

one_list_with_every_kind_test() ->
    Text = "%% a comment\n"
           "[{num_cpus, 4},\n"
           " {os, \"Linux\"},\n"
           " {literal, {static, {dynamic, {erlang, now}}}},\n"
           " {procs, {dynamic, {erlang, system_info, [process_count]}}},\n"
           " {slow, {dynamic, {terrain_attr_config_tests, answer}, #{timeout => 50}}},\n"
           " {auto, {automatic, {terrain_attr_config_tests, answer, [7]}}},\n"
           " {avg, {sampled, {terrain_attr_config_tests, answer}, #{interval => 100, window => 5}}},\n"
           " {os_type, {unix, linux}},\n"
           " {platform, {x86, {intel, xeon}}}].\n",
    {ok, Entries} = parse(Text),
    ?assertEqual([{num_cpus, {static, 4}},
                  {os, {static, "Linux"}},
                  {literal, {static, {dynamic, {erlang, now}}}},
                  {procs, {dynamic, {erlang, system_info, [process_count]}, 200}},
                  {slow, {dynamic, {terrain_attr_config_tests, answer, []}, 50}},
                  {auto, {automatic, {terrain_attr_config_tests, answer, [7]}, 2000}},
                  {avg, {sampled, {terrain_attr_config_tests, answer, []},
                         #{interval => 100, window => 5, timeout => 200}}},
                  {os_type, {static, {unix, linux}}},
                  {platform, {static, {x86, {intel, xeon}}}}], Entries),
    ?assertEqual({auto, {static, 7}}, lists:keyfind(auto, 1, terrain_attr_config:evaluate_automatic(Entries))).

sequence_of_terms_test() ->
    ?assertEqual({ok, [{a, {static, 1}}, {b, {static, [x]}}]}, parse("{a, 1}.\n{b, [x]}.\n")).

empty_file_is_no_attributes_test() ->
    ?assertEqual({ok, []}, parse("%% nothing\n")),
    ?assertEqual({ok, []}, parse("[].\n")).

unreadable_file_test() ->
    ?assertMatch({error, {config, "/nonexistent/x.attrs", file, {file, enoent}}},
                 terrain_attr_config:parse_file("/nonexistent/x.attrs")).

syntax_errors_name_the_line_test_() ->
    [?_assertMatch({{line, 2}, {syntax, _}}, error_of("[{a, 1},\n {b 2}].\n")),
     ?_assertMatch({{line, 1}, {syntax, "missing full stop" ++ _}}, error_of("[{a, 1}]\n")),
     ?_assertMatch({{line, 1}, {syntax, "not a literal" ++ _}}, error_of("[{a, os:cmd(\"rm -rf /\")}].\n")),
     ?_assertMatch({{line, 1}, {syntax, "not a literal" ++ _}}, error_of("[{a, X}].\n")),
     ?_assertMatch({{line, 1}, {syntax, _}}, error_of("[{a, \"unterminated}].\n"))].

wrong_shapes_test_() ->
    [?_assertEqual({{line, 1}, {bad_entry, foo}}, error_of("foo.\n")),
     ?_assertEqual({{line, 2}, {bad_entry, {a, 1, 2}}}, error_of("[{ok, 1},\n {a, 1, 2}].\n")),
     ?_assertEqual({{line, 1}, {bad_name, "a"}}, error_of("[{\"a\", 1}].\n")),
     ?_assertEqual({{line, 1}, {reserved_name, dist}}, error_of("[{dist, 1}].\n")),
     ?_assertEqual({{line, 2}, not_a_list}, error_of("{a, 1}.\n[{b, 2}].\n")),
     ?_assertMatch({{line, 1}, {bad_definition, a, {dynamic, foo}, _}}, error_of("[{a, {dynamic, foo}}].\n")),
     ?_assertMatch({{line, 1}, {bad_definition, a, {static, 1, 2}, _}}, error_of("[{a, {static, 1, 2}}].\n")),
     ?_assertMatch({{line, 1}, {bad_definition, a, _, "unknown option" ++ _}},
                   error_of("[{a, {dynamic, {erlang, node}, #{timeot => 5}}}].\n")),
     ?_assertMatch({{line, 1}, {bad_definition, a, _, "option timeout must be" ++ _}},
                   error_of("[{a, {dynamic, {erlang, node}, #{timeout => -5}}}].\n")),
     ?_assertMatch({{line, 1}, {bad_definition, a, _, "interval must be" ++ _}},
                   error_of("[{a, {sampled, {erlang, node}, #{interval => 1}}}].\n"))].

unknown_kinds_test_() ->
    [?_assertEqual({{line, 1}, {unknown_kind, a, dynamc}}, error_of("[{a, {dynamc, {erlang, node}}}].\n")),
     ?_assertEqual({{line, 1}, {unknown_kind, a, sampeld}}, error_of("[{a, {sampeld, {nomod, nofun}, #{}}}].\n")),
     ?_assertEqual({{line, 1}, {unknown_kind, a, live}}, error_of("[{a, {live, {erlang, node, []}}}].\n"))].

undefined_functions_test() ->
    ?assertEqual({{line, 1}, {undefined_function, a, {no_such_module, f, 0}}},
                 error_of("[{a, {dynamic, {no_such_module, f}}}].\n")),
    ?assertEqual({{line, 1}, {undefined_function, a, {erlang, node, 3}}},
                 error_of("[{a, {automatic, {erlang, node, [1, 2, 3]}}}].\n")).

duplicates_test() ->
    ?assertEqual({{line, 3}, {duplicate, a}}, error_of("[{a, 1},\n {b, 2},\n {a, 3}].\n")).

oversized_test_() ->
    #{value_bytes := Limit, file_bytes := FileLimit, entries := MaxEntries} = terrain_attr_config:limits(),
    Big = lists:flatten(io_lib:format("[{big, ~p}].~n", [binary:copy(<<"x">>, Limit)])),
    Many = ["[", lists:join(",\n", [io_lib:format("{a~b, ~b}", [I, I]) || I <- lists:seq(1, MaxEntries + 1)]), "].\n"],
    Huge = ["%% ", binary:copy(<<"y">>, FileLimit), "\n[].\n"],
    [?_assertMatch({{line, 1}, {too_large, big, _, Limit}}, error_of(Big)),
     ?_assertMatch({{line, _}, {too_many, _, MaxEntries}}, error_of(Many)),
     ?_assertMatch({file, {file_too_large, _, FileLimit}}, error_of(Huge))].

list_from_application_env_test_() ->
    Source = {application_env, terrain, attrs},
    [?_assertEqual({ok, [{gpu, {static, true}}]}, terrain_attr_config:parse_list(Source, [{gpu, true}])),
     ?_assertEqual({error, {config, Source, {entry, 2}, {duplicate, gpu}}},
                   terrain_attr_config:parse_list(Source, [{gpu, true}, {gpu, false}])),
     ?_assertEqual({error, {config, Source, {entry, 1}, not_a_list}}, terrain_attr_config:parse_list(Source, gpu)),
     ?_assertEqual({error, {config, Source, {entry, 1}, not_a_list}},
                   terrain_attr_config:parse_list(Source, [{gpu, true} | x]))].

automatic_that_crashes_is_undefined_test() ->
    Entries = [{boom, {automatic, {erlang, error, [boom]}, 1000}}, {ok, {automatic, {erlang, node, []}, 1000}}],
    ?assertEqual([{boom, {static, undefined}}, {ok, {static, node()}}],
                 terrain_attr_config:evaluate_automatic(Entries)).

errors_render_as_sentences_test_() ->
    Render = fun(Text) ->
                     {error, Reason} = parse(Text),
                     lists:flatten(io_lib:format("~ts", [terrain:format_error(Reason)]))
             end,
    [?_assertMatch("attribute configuration " ++ _, Render("[{a, 1},\n {a, 2}].\n")),
     ?_assertNotEqual(nomatch, string:find(Render("[{a, 1},\n {a, 2}].\n"), "line 2: attribute a is defined more than once")),
     ?_assertNotEqual(nomatch, string:find(Render("[{a, {dynamc, {erlang, node}}}].\n"), "unknown kind dynamc")),
     ?_assertNotEqual(nomatch, string:find(Render("[{a, {dynamic, {nomod, f}}}].\n"), "nomod:f/0, which does not exist"))].

%% The example configurations in examples/ load (they are documentation).
examples_parse_test_() ->
    Ebin = filename:split(filename:dirname(code:which(terrain_attr_config))),   % ROOT/_build/PROFILE/lib/terrain/ebin
    Examples = filename:join(lists:sublist(Ebin, length(Ebin) - 5) ++ ["examples"]),
    Files = filelib:wildcard(filename:join(Examples, "*.attrs")),
    [?_assert(length(Files) >= 2)]
        ++ [{filename:basename(F), ?_assertMatch({ok, [_ | _]}, terrain_attr_config:parse_file(F))} || F <- Files].
