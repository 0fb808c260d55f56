%% terrain_lab_analysis:run/3 on terrain_lab_os:run/3: the exit status and output of
%% the command, and the statuses a shell would give when it was stopped or could not
%% be run, with the sentence that says why as the output.
-module(terrain_lab_analysis_tests).
-include_lib("eunit/include/eunit.hrl").

status_and_output_of_the_command_test() ->
    ?assertEqual({2, <<"out\nerr\n">>}, terrain_lab_analysis:run("/bin/sh", 10000, ["-c", "echo out; echo err >&2; exit 2"])).

a_command_past_its_deadline_is_stopped_with_status_124_test() ->
    {124, Sentence} = terrain_lab_analysis:run("/bin/sh", 300, ["-c", "echo started; sleep 30"]),
    ?assertEqual(<<"/bin/sh did not finish within 300 ms and was stopped: started">>, Sentence).

a_missing_command_has_status_127_test() ->
    ?assertMatch({127, <<"cannot run /nonexistent/terrain-analysis: no such program", _/binary>>},
                 terrain_lab_analysis:run("/nonexistent/terrain-analysis", 1000, ["report"])).
