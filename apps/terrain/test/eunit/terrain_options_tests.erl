%% The one option checker: each refusal's shape and sentence, the first refusal in key
%% order, and the same shape from a library (terrain_insert) and the lab (terrain_lab_vm).
-module(terrain_options_tests).
-include_lib("eunit/include/eunit.hrl").

checks() ->
    #{timeout => fun(T) -> is_integer(T) andalso T >= 0 end, name => fun erlang:is_atom/1}.

each_refusal_has_its_shape_and_sentence_test() ->
    Cases = [{#{timeout => -1}, {bad_option, timeout, -1}, "bad value for option timeout: -1"},
             {#{colour => red}, {unknown_option, colour}, "unknown option colour"},
             {[timeout], {bad_options, [timeout]}, "options must be a map, got [timeout]"}],
    [begin
         ?assertEqual({error, Reason}, terrain_options:check(Options, checks())),
         ?assertEqual(Sentence, lists:flatten(terrain_options:format_error(Reason)))
     end || {Options, Reason, Sentence} <- Cases],
    ?assertEqual(ok, terrain_options:check(#{timeout => 0, name => a}, checks())),
    ?assertEqual({error, {missing_option, name}}, terrain_options:required(#{timeout => 0}, [timeout, name])),
    ?assertEqual("the option name is required", lists:flatten(terrain_options:format_error({missing_option, name}))).

the_first_refusal_in_key_order_is_reported_test() ->
    ?assertEqual({error, {bad_option, name, 1}}, terrain_options:check(#{timeout => -1, name => 1}, checks())),
    ?assertEqual({error, {unknown_option, colour}}, terrain_options:check(#{timeout => -1, colour => red}, checks())).

a_library_and_the_public_api_refuse_in_the_same_shape_test() ->
    Tree = {network, top, #{height => 10}, [{node, a}, {node, b}]},
    Measure = fun(_, _) -> {ok, 1} end,
    ?assertEqual({error, {insert, {unknown_option, colour}}}, terrain:insert_node(c, Tree, Measure, #{colour => red})),
    ?assertEqual({error, {insert, {bad_option, gap, 1}}}, terrain:insert_node(c, Tree, Measure, #{gap => 1})),
    ?assertEqual({error, {unknown_option, colour}}, terrain:attrs([node()], [x], #{colour => red})).
