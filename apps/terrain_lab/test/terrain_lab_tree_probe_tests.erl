%% The tree probe's seed keeps what it measured: progress (and so the CLI's checkpoint)
%% comes after every pair of the seed, not only after the first wave.
-module(terrain_lab_tree_probe_tests).

-include_lib("eunit/include/eunit.hrl").

%% Six nodes are all seed: before this, nothing reached the progress fun until the
%% seed's discovery had run, so an interrupted probe of a small cluster kept no file.
seed_reports_progress_after_every_pair_test() ->
    Nodes = [list_to_atom("n" ++ integer_to_list(I)) || I <- lists:seq(1, 6)],
    Self = self(),
    Measure = fun(A, B) -> Self ! {measured, A, B}, {ok, 100.0} end,
    Progress = fun(#{pairs := Pairs, tree := Tree}) -> Self ! {progress, Pairs, Tree} end,
    #{placed := Placed} = terrain_lab_tree_probe:build(Nodes, Measure, #{progress => Progress}),
    ?assertEqual(lists:sort(Nodes), lists:sort(Placed)),
    Events = collect([]),
    %% the seed measures the 15 pairs of 6 nodes one direction each, and progress follows each
    Measured = [E || {measured, _, _} = E <- Events],
    ?assertEqual(15, length(Measured)),
    FirstProgress = lists:takewhile(fun({progress, _, _}) -> false; (_) -> true end, Events),
    ?assertEqual(1, length(FirstProgress)),          % one pair measured, then its progress
    [{progress, 1, {network, _, _, [_ | _]}} | _] = [E || {progress, _, _} = E <- Events].

collect(Acc) ->
    receive
        Event -> collect([Event | Acc])
    after 0 -> lists:reverse(Acc)
    end.
