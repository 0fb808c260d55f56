%% EUnit tests of terrain_lab_steps: chains of steps that may fail.
-module(terrain_lab_steps_tests).
-include_lib("eunit/include/eunit.hrl").

run_threads_the_value_through_every_step_test() ->
    ?assertEqual({ok, 12}, terrain_lab_steps:run([fun(X) -> {ok, X + 1} end, fun(X) -> {ok, X * 3} end], 3)).

run_passes_the_input_on_after_a_step_that_returns_ok_test() ->
    Self = self(),
    ?assertEqual({ok, 4}, terrain_lab_steps:run([fun(X) -> Self ! {seen, X}, ok end, fun(X) -> {ok, X + 1} end], 3)),
    ?assertEqual(3, receive {seen, X} -> X after 0 -> none end).

run_returns_what_the_last_step_returns_test() ->
    ?assertEqual(ok, terrain_lab_steps:run([fun(X) -> {ok, X} end, fun(_) -> ok end], 1)),
    ?assertEqual({ok, 1}, terrain_lab_steps:run([], 1)).

run_stops_at_the_first_error_test() ->
    Self = self(),
    ?assertEqual({error, first},
                 terrain_lab_steps:run([fun(_) -> {error, first} end,
                                        fun(_) -> Self ! ran, {error, second} end], x)),
    ?assertEqual(nothing, receive ran -> ran after 0 -> nothing end).

with_hands_every_value_to_the_last_function_in_order_test() ->
    ?assertEqual({a, b}, terrain_lab_steps:with([fun() -> {ok, a} end, fun() -> {ok, b} end],
                                                fun([A, B]) -> {A, B} end)).

with_stops_at_the_first_error_test() ->
    Self = self(),
    ?assertEqual({error, bad},
                 terrain_lab_steps:with([fun() -> {ok, a} end, fun() -> {error, bad} end,
                                         fun() -> Self ! ran, {ok, c} end],
                                        fun(_) -> Self ! called, ok end)),
    ?assertEqual(nothing, receive M -> M after 0 -> nothing end).
