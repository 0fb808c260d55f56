%% EUnit tests of terrain_lab_cleanup: the one exit path's list of what to undo.
-module(terrain_lab_cleanup_tests).
-include_lib("eunit/include/eunit.hrl").

%% Cleanups run newest first, once; removed ones do not run; without the table
%% (in-process use) add/remove do nothing.
cleanups_run_newest_first_and_once_test() ->
    Self = self(),
    {Owner, Ref} = spawn_monitor(fun() ->
                                         ok = terrain_lab_cleanup:init(),
                                         ok = terrain_lab_cleanup:add(a, fun() -> Self ! a end),
                                         ok = terrain_lab_cleanup:add(b, fun() -> Self ! b end),
                                         ok = terrain_lab_cleanup:add(c, fun() -> Self ! c end),
                                         ok = terrain_lab_cleanup:remove(b),
                                         Self ! {ran, terrain_lab_cleanup:run(), terrain_lab_cleanup:run()}
                                 end),
    receive {ran, 2, 0} -> ok after 5000 -> error(no_run) end,
    ?assertEqual([c, a], [receive M -> M after 1000 -> none end || _ <- [1, 2]]),
    receive {'DOWN', Ref, process, Owner, _} -> ok end,
    ok = terrain_lab_cleanup:add(d, fun() -> Self ! d end),      % no table: nothing kept
    ?assertEqual(0, terrain_lab_cleanup:run()).

%% A temporary file of terrain_lab_files:write/2 is registered while it exists: a
%% SIGTERM during the write removes it.
a_failing_cleanup_does_not_stop_the_others_test() ->
    Self = self(),
    {_, Ref} = spawn_monitor(fun() ->
                                     ok = terrain_lab_cleanup:init(),
                                     ok = terrain_lab_cleanup:add(ok1, fun() -> Self ! ok1 end),
                                     ok = terrain_lab_cleanup:add(bad, fun() -> error(boom) end),
                                     Self ! {ran, terrain_lab_cleanup:run()}
                             end),
    receive {ran, 2} -> ok after 5000 -> error(no_run) end,
    receive ok1 -> ok after 1000 -> error(other_cleanup_skipped) end,
    receive {'DOWN', Ref, process, _, _} -> ok end.
