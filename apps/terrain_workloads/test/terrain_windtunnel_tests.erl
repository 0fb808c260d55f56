%% EUnit: the wind tunnel on this node (terrain_windtunnel, terrain_windtunnel_worker).
-module(terrain_windtunnel_tests).

-include_lib("eunit/include/eunit.hrl").

result_does_not_depend_on_the_number_of_workers_test() ->
    Run = fun(W) ->
                  {ok, #{checksum := C, workers := W}} =
                      terrain_workloads:windtunnel(#{workers => W, lattice_rows => 24, columns => 16, steps => 15,
                                                     work_per_cell => 2}),
                  C
          end,
    [C1 | Rest] = [Run(W) || W <- [1, 2, 3, 5, 8]],
    ?assertEqual([C1, C1, C1, C1], Rest).

a_band_step_reads_its_neighbour_rows_test() ->
    Zero = [0, 0, 0],
    %% a lone cell of 1 in the middle: with work 1 the rule gives (1*31 + 0 + 1) band 255 = 32
    %% for it, and (0*31 + 1 + 1) = 2 for its four neighbours
    [Up, Mid, Down] = terrain_windtunnel_worker:step_band(Zero, [[0, 0, 0], [0, 1, 0], [0, 0, 0]], Zero, 1),
    ?assertEqual({[1, 2, 1], [2, 32, 2], [1, 2, 1]}, {Up, Mid, Down}).

instrument_gets_every_event_of_every_step_test() ->
    Counts = counters:new(6, []),
    Index = #{send => 1, 'receive' => 2, read => 3, communicate => 4, compute => 5},
    Instrument = fun([windtunnel, Kind], _M, #{worker := _, step := _}) ->
                         counters:add(Counts, maps:get(Kind, Index), 1)
                 end,
    {ok, _} = terrain_workloads:windtunnel(#{workers => 4, steps => 10, columns => 8, slice_rows => 2,
                                             instrument => Instrument}),
    %% 4 workers, 3 borders between them, each crossed both ways every step
    ?assertEqual([60, 60, 60, 40, 40], [counters:get(Counts, I) || I <- lists:seq(1, 5)]).

workers_get_contiguous_blocks_of_the_nodes_test() ->
    Self = self(),
    {ok, #{placement := Placement, nodes := [Node]}} =
        terrain_workloads:windtunnel(#{nodes => [node(), node()], workers => 3, steps => 1, columns => 4,
                                       on_start => fun(Ws) -> Self ! {workers, Ws} end}),
    ?assertEqual(node(), Node),
    ?assertEqual([{0, node()}, {1, node()}, {2, node()}], Placement),
    ?assertMatch([{0, P0}, {1, _}, {2, _}] when is_pid(P0), receive {workers, Ws} -> Ws after 1000 -> none end).

bad_options_are_errors_test() ->
    ?assertMatch({error, {windtunnel, {option, workers, 0}}}, terrain_workloads:windtunnel(#{workers => 0})),
    ?assertMatch({error, {windtunnel, {option, colour, red}}}, terrain_workloads:windtunnel(#{colour => red})),
    ?assertMatch({error, {windtunnel, {too_few_rows, 2, 4}}},
                 terrain_workloads:windtunnel(#{workers => 4, lattice_rows => 2})),
    ?assertEqual("wind tunnel: bad option workers: 0",
                 lists:flatten(terrain_workloads:format_windtunnel_error({windtunnel, {option, workers, 0}}))).

a_failing_worker_fails_the_run_test() ->
    {error, {windtunnel, {worker_failed, _, _, _}}} =
        terrain_workloads:windtunnel(#{workers => 2, steps => 50, columns => 4,
                                       instrument => fun(_, _, #{worker := 1, step := 3}) -> exit(boom);
                                                        (_, _, _) -> ok
                                                     end, timeout => 10000}).
