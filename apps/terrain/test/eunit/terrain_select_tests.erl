%% EUnit: the predicate language, on fixed values (no processes).
-module(terrain_select_tests).
-include_lib("eunit/include/eunit.hrl").

-define(NODES, [a, b, c, d, e]).

values() ->
    #{a => #{load => 0.1, cpus => 8, gpu => true, os => linux},
      b => #{load => 0.5, cpus => 8, gpu => false, os => linux},
      c => #{load => 2.0, cpus => 2, os => bsd},
      d => #{cpus => 24, gpu => true},                  % no load
      e => #{load => 0.5, cpus => 4.0, gpu => yes}}.     % gpu not a boolean

ctx() ->
    #{self => a, groups => #{{scope, workers} => [b, d]},
      distance => fun(From, To) -> maps:get({From, To}, #{{a, b} => 0.25, {a, c} => 0.5, {a, e} => 1.0,
                                                          {c, b} => 0.5}, undefined) end,
      level => fun(_From, To) -> maps:get(To, #{a => same_node, b => near, c => far, e => anywhere}, undefined) end}.

sel(Preds) ->
    terrain_select:select(?NODES, Preds, values(), ctx()).

comparisons_use_number_equality_test_() ->
    [?_assertEqual([a, b], sel({cpus, eq, 8.0})),
     ?_assertEqual([c, d, e], sel({cpus, ne, 8})),
     ?_assertEqual([c, e], sel({cpus, lt, 8})),
     ?_assertEqual([a, b, c, e], sel({cpus, le, 8})),
     ?_assertEqual([d], sel({cpus, gt, 8})),
     ?_assertEqual([a, b, d], sel({cpus, ge, 8})),
     ?_assertEqual([e], sel({cpus, eq, 4}))].

booleans_test_() ->
    [?_assertEqual([a, d], sel({gpu, true})),
     ?_assertEqual([a, d], sel({gpu, yes})),
     ?_assertEqual([b], sel({gpu, false})),
     ?_assertEqual([b], sel({gpu, no}))].

in_and_exists_test_() ->
    [?_assertEqual([a, b, c], sel({os, in, [linux, bsd]})),
     ?_assertEqual([a, b, c, e], sel({load, exists})),
     ?_assertEqual([d], sel({'not', {load, exists}}))].

undefined_fails_and_not_keeps_it_unknown_test_() ->
    [?_assertEqual([a, b, e], sel({load, lt, 1})),
     %% d has no load: it is in neither the selection nor its negation
     ?_assertEqual([c], sel({'not', {load, lt, 1}})),
     ?_assertEqual([a, b, c, e], sel({'or', [{load, lt, 1}, {'not', {load, lt, 1}}]}))].

or_and_and_lists_test_() ->
    [?_assertEqual([a, c, d], sel({'or', [{cpus, gt, 8}, {os, eq, bsd}, {load, lt, 0.2}]})),
     ?_assertEqual([a], sel([{cpus, ge, 8}, {load, lt, 1}, {gpu, true}])),
     ?_assertEqual(sel([{cpus, ge, 8}, {gpu, true}]), sel({'and', [{cpus, ge, 8}, {gpu, true}]})),
     ?_assertEqual(?NODES, sel([])),
     ?_assertEqual([], sel({'or', []}))].

low_and_high_are_defined_by_counting_test_() ->
    %% loads: a 0.1, b 0.5, c 2.0, e 0.5 (d undefined). For v: above >= below means low.
    [?_assertEqual([a, b, e], sel({load, low})),
     ?_assertEqual([b, c, e], sel({load, high})),
     %% all equal: everyone is both low and high
     ?_assertEqual([a, b], terrain_select:select([a, b], {cpus, low}, values(), ctx())),
     ?_assertEqual([a, b], terrain_select:select([a, b], {cpus, high}, values(), ctx()))].

low_is_judged_against_all_candidates_not_survivors_test() ->
    %% and stays an intersection: the order of the parts does not matter
    ?assertEqual(sel([{gpu, true}, {load, low}]), sel([{load, low}, {gpu, true}])).

top_and_bottom_break_ties_by_candidate_order_test_() ->
    [?_assertEqual([a, d], sel({cpus, top, 2})),           % 24, then 8 (a before b)
     ?_assertEqual([c, e], sel({cpus, bottom, 2})),
     ?_assertEqual([a, b, c, e], sel({load, bottom, 10}))].

groups_distances_levels_test_() ->
    [?_assertEqual([b, d], sel({group, scope, workers})),
     ?_assertEqual([b, c], sel({dist, le, 0.5})),
     ?_assertEqual([b], sel({dist, c, le, 0.5})),
     ?_assertEqual([a, b], sel({level, le, near})),
     ?_assertEqual([c, e], sel({level, gt, near}))].

duplicates_and_order_are_kept_test() ->
    ?assertEqual([b, a, b], terrain_select:select([b, c, a, b], {cpus, eq, 8}, values(), ctx())).

order_by_puts_undefined_last_test_() ->
    [?_assertEqual([a, b, e, c, d], terrain_select:order_by(?NODES, load, asc, values())),
     ?_assertEqual([c, b, e, a, d], terrain_select:order_by(?NODES, load, desc, values()))].

explain_names_the_predicate_that_removed_the_last_candidates_test() ->
    Preds = [{cpus, ge, 8}, {gpu, true}, {load, lt, 0.05}],
    Expl = terrain_select:explain(?NODES, Preds, values(), #{e => timeout}, ctx()),
    ?assertMatch(#{candidates := 5, unreachable := #{e := timeout},
                   steps := [{{cpus, ge, 8}, 3}, {{gpu, true}, 2}, {{load, lt, 0.05}, 0}],
                   removed_by := {load, lt, 0.05}}, Expl),
    ?assertEqual(#{a => #{load => 0.1}, d => #{load => undefined}}, maps:get(last, Expl)),
    Text = lists:flatten(io_lib:format("~ts", [terrain_select:format_explanation(Expl)])),
    ?assertNotEqual(nomatch, string:find(Text, "{load,lt,0.05} removed the last 2")),
    ?assertNotEqual(nomatch, string:find(Text, "e: no answer before the deadline")).

explain_without_candidates_test() ->
    Expl = terrain_select:explain([], [{cpus, ge, 8}], values(), #{}, ctx()),
    ?assertMatch(#{candidates := 0, removed_by := none, steps := []}, Expl).

relax_drops_from_the_end_test_() ->
    [?_assertEqual({[a, d], [{load, lt, 0.05}]},
                   terrain_select:relax(?NODES, [{gpu, true}, {load, lt, 0.05}], values(), ctx())),
     ?_assertEqual({[a], []}, terrain_select:relax(?NODES, [{gpu, true}, {load, lt, 0.2}], values(), ctx())),
     ?_assertEqual({?NODES, [{cpus, gt, 100}, {gpu, no}]},
                   terrain_select:relax(?NODES, [{cpus, gt, 100}, {gpu, no}], values(), ctx()))].

validate_test_() ->
    Good = [{a, eq, 1}, {a, true}, {a, no}, {a, in, [1]}, {a, exists}, {a, low}, {a, high},
            {a, top, 1}, {a, bottom, 3}, {dist, lt, 0.5}, {dist, n@h, ge, 1}, {level, le, near},
            {group, pg, g}, {'not', {a, exists}}, {'or', [{a, low}]}, {'and', []}, [], [{a, low}]],
    Bad = [{a, is, 1}, {a, maybe}, {a, in, x}, {a, top, 0}, {a, top, x}, {dist, lt, x},
           {level, le, nowhere}, {group, "scope", g}, {"a", eq, 1}, {undefined, exists},
           {'not', {a, is, 1}}, {'or', x}, {'or', [{a, bad}]}, [{a, low} | x], 42, {}],
    [?_assertEqual(ok, terrain_select:validate(P)) || P <- Good]
        ++ [?_assertMatch({error, {bad_predicate, _}}, terrain_select:validate(P)) || P <- Bad].

attr_names_test() ->
    ?assertEqual([a, b, c], terrain_select:attr_names([{c, low}, {'not', {'or', [{a, exists}, {b, eq, 1}]}},
                                                       {dist, lt, 1}, {group, s, g}, {a, true}])).
