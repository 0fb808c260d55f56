%% terrain_lab_emas's pure parts: the scaling plan, a configuration's row and the
%% ratios from given runs, CPU times from /proc/stat's text; and the lcnt probe.
-module(terrain_lab_emas_tests).
-include_lib("eunit/include/eunit.hrl").

plan_alternates_1_and_2_schedulers_then_4_and_8_test() ->
    {1000, 1, Quick} = terrain_lab_emas:plan(true),
    ?assertEqual([{sequential, 1}, {sequential, 2}, {sequential, 4}, {sequential, 8}], lists:sublist(Quick, 4)),
    ?assertEqual(16, length(Quick)),
    {3000, 3, Full} = terrain_lab_emas:plan(false),
    ?assertEqual([{hybrid, 1}, {hybrid, 2}, {hybrid, 1}, {hybrid, 2}, {hybrid, 1}, {hybrid, 2}, {hybrid, 4}, {hybrid, 8}],
                 [C || {hybrid, _} = C <- Full]),
    ?assertEqual(4 * 8, length(Full)).

the_run_with_the_median_rate_stands_for_the_configuration_test() ->
    Runs = [run(300.0, 0.9, 1.5), run(100.0, 0.5, 1.0), run(200.0, 0.7, 2.0)],
    Row = terrain_lab_emas:scaling_row(concurrent, 4, Runs, 2),
    ?assertMatch(#{model := concurrent, schedulers := 4, reproductions_per_s := 200.0, utilisation := 0.7,
                   cpu_cores := 2.0, reproductions_per_cpu_s := 100.0, runs := 3, oversubscribed := true,
                   runs_reproductions_per_s := [300.0, 100.0, 200.0]}, Row),
    ?assertMatch(#{oversubscribed := false, reproductions_per_cpu_s := null},
                 terrain_lab_emas:scaling_row(skel, 2, [run(50.0, 0.5, null)], 2)).

ratios_are_relative_to_one_scheduler_of_the_same_model_test() ->
    Rows = [terrain_lab_emas:scaling_row(M, S, [run(R, 0.5, 1.0)], 2)
            || {M, S, R} <- [{skel, 1, 100.0}, {skel, 2, 150.0}, {hybrid, 1, 10.0}, {hybrid, 4, 40.0}]],
    ?assertEqual([{skel, 2, 1.5}, {hybrid, 4, 4.0}],
                 [{M, S, R} || #{model := M, schedulers := S, ratio_to_1 := R} <- terrain_lab_emas:ratios(Rows)]).

cpu_times_read_the_first_line_of_proc_stat_test() ->
    Stat = <<"cpu  100 5 50 800 20 3 2 10 0 0\ncpu0 50 2 25 400 10 1 1 5 0 0\nintr 1\n">>,
    %% busy: user nice system irq softirq steal; idle: idle iowait
    ?assertEqual({ok, 170, 990}, terrain_lab_emas:cpu_times(Stat)),
    ?assertEqual(error, terrain_lab_emas:cpu_times(<<"cpu  1 2\n">>)),
    ?assertEqual(error, terrain_lab_emas:cpu_times(<<"garbage here x y z a b c d\n">>)),
    %% between two samples: 30 of 100 ticks busy
    ?assertEqual(0.7, terrain_lab_emas:idle_share({ok, 170, 990}, {ok, 200, 1090})).

cpu_times_of_this_machine_test() ->
    {ok, Stat} = file:read_file("/proc/stat"),
    {ok, Busy, Total} = terrain_lab_emas:cpu_times(Stat),
    ?assert(Busy > 0 andalso Total > Busy).

%% The probe agrees with the emulators this installation has.
lcnt_probe_finds_the_lcnt_emulator_when_it_is_installed_test_() ->
    {timeout, 60,
     fun() ->
             Installed = filelib:wildcard(filename:join([code:root_dir(), "erts-*", "bin", "beam.lcnt.smp"])) =/= [],
             ?assertEqual(Installed, terrain_lab_emas:lcnt_available())
     end}.

run(Rate, Utilisation, Cores) ->
    #{reproductions_per_s => Rate, utilisation => Utilisation, cpu_cores => Cores}.
