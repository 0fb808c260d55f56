%% EUnit: selection, merging with clock offsets, aggregation, clock estimates and the
%% built-in monitors (pure functions).
-module(terrain_events_view_tests).

-include_lib("eunit/include/eunit.hrl").

ev(Node, Seq, Time, Name, M, Md) ->
    #{time => Time, node => Node, pid => self(), collector => explicit, name => Name, measurements => M,
      metadata => Md, seq => Seq}.

select_by_name_prefix_node_and_window_test() ->
    Es = [ev(a, 1, 10, [wt, compute], #{}, #{}), ev(b, 1, 20, [wt, read], #{}, #{}),
          ev(a, 2, 30, [other], #{}, #{})],
    ?assertEqual([10, 20], [T || #{time := T} <- terrain_events:select(#{names => [[wt]]}, Es)]),
    ?assertEqual([10, 30], [T || #{time := T} <- terrain_events:select(#{nodes => [a]}, Es)]),
    ?assertEqual([20], [T || #{time := T} <- terrain_events:select(#{from => 15, to => 25}, Es)]),
    ?assertError(badarg, terrain_events:select(#{colour => red}, Es)).

merge_corrects_each_node_by_its_offset_test() ->
    %% true order: a1 (100), b1 (150), a2 (200), b2 (250); b's clock runs 1000 us ahead
    ByNode = #{a => [ev(a, 1, 100, [x], #{}, #{}), ev(a, 2, 200, [x], #{}, #{})],
               b => [ev(b, 1, 1150, [x], #{}, #{}), ev(b, 2, 1250, [x], #{}, #{})]},
    Merged = terrain_events:merge(ByNode, #{b => 1000}),
    ?assertEqual([{a, 100}, {b, 150}, {a, 200}, {b, 250}], [{N, T} || #{node := N, time := T} <- Merged]),
    %% without the correction, b's events all come last
    ?assertEqual([a, a, b, b], [N || #{node := N} <- terrain_events:merge(ByNode, #{})]).

clock_estimate_uses_the_shortest_round_trip_test() ->
    %% the other clock is 5000 us ahead; the request takes 10, the answer 30 (rtt 40),
    %% and a slower sample with asymmetric delays that would mislead
    Samples = [{0, 0 + 10 + 5000, 40}, {100, 100 + 400 + 5000, 500}],
    #{offset_us := Offset, rtt_us := Rtt} = terrain_events_clock:from_samples(Samples),
    ?assertEqual(40, Rtt),
    ?assert(abs(Offset - 5000) =< Rtt div 2).

aggregate_counts_rates_and_histograms_per_window_test() ->
    Es = [ev(a, 1, 5, [c], #{duration_us => 3}, #{}), ev(a, 2, 7, [c], #{duration_us => 100}, #{}),
          ev(a, 3, 12, [r], #{}, #{}), ev(a, 4, -1, [c], #{duration_us => 0.5}, #{})],
    [W0, W1, W2] = terrain_events:aggregate(Es, #{window_us => 10}),
    ?assertMatch(#{start_us := -10, counts := #{[c] := 1}, histograms := #{[c] := #{0 := 1}}}, W0),
    ?assertMatch(#{start_us := 0, counts := #{[c] := 2}, histograms := #{[c] := #{2 := 1, 7 := 1}}}, W1),
    ?assertEqual(2.0e5, maps:get([c], maps:get(rates, W1))),
    ?assertMatch(#{start_us := 10, counts := #{[r] := 1}, histograms := H} when map_size(H) =:= 0, W2).

load_imbalance_shares_compute_and_wait_per_worker_test() ->
    M0 = terrain_events_monitor:new(#{kind => load_imbalance}),
    Es = [ev(a, 1, 1, [windtunnel, compute], #{duration_us => 300}, #{worker => 0, step => 1}),
          ev(a, 2, 2, [windtunnel, read], #{duration_us => 100}, #{worker => 0, step => 1, from => above}),
          ev(a, 3, 3, [windtunnel, compute], #{duration_us => 100}, #{worker => 1, step => 1}),
          ev(a, 4, 4, [windtunnel, read], #{duration_us => 300}, #{worker => 1, step => 1, from => below}),
          ev(a, 5, 5, [windtunnel, send], #{}, #{worker => 1, step => 1, message => 7})],
    R = terrain_events_monitor:report(terrain_events_monitor:handle(Es, M0)),
    ?assertMatch(#{kind := load_imbalance, most_waiting := 1,
                   workers := #{0 := #{compute_us := 300, wait_us := 100}, 1 := #{compute_us := 100, wait_us := 300}}},
                 R),
    ?assertEqual(0.75, maps:get(max_wait_share, R)),
    ?assertEqual(0.5, maps:get(mean_wait_share, R)).

slow_pair_pairs_sends_and_receives_in_either_order_test() ->
    M0 = terrain_events_monitor:new(#{kind => slow_pair}),
    Send = fun(Node, T, Id) -> ev(Node, T, T, [windtunnel, send], #{}, #{message => Id}) end,
    Recv = fun(Node, T, Id) -> ev(Node, T, T, [windtunnel, 'receive'], #{}, #{message => Id}) end,
    %% a -> b takes 500 us; b -> a takes 50 us; the second batch has a receive before its send
    M1 = terrain_events_monitor:handle([Send(a, 0, 1), Recv(b, 500, 1), Send(b, 600, 2), Recv(a, 650, 2)], M0),
    M2 = terrain_events_monitor:handle([Recv(b, 1500, 3)], M1),
    M3 = terrain_events_monitor:handle([Send(a, 1000, 3)], M2),
    #{pairs := Pairs, slowest := Slowest, unpaired := 0} = terrain_events_monitor:report(M3),
    ?assertEqual({a, b}, Slowest),
    ?assertMatch([#{from := a, to := b, count := 2, p10_us := 500, max_us := 500},
                  #{from := b, to := a, count := 1, p10_us := 50}], Pairs).

monitor_callback_gets_the_report_test() ->
    Self = self(),
    M = terrain_events_monitor:new(#{kind => custom, init => 0, handle => fun(Es, N) -> N + length(Es) end,
                                     callback => fun(R) -> Self ! {report, R} end}),
    ok = terrain_events_monitor:notify(terrain_events_monitor:handle([ev(a, 1, 1, [x], #{}, #{})], M)),
    ?assertEqual(1, receive {report, R} -> R after 1000 -> timeout end).

bad_monitor_is_badarg_test() ->
    ?assertError(badarg, terrain_events_monitor:new(#{kind => imaginary})).
