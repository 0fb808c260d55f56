%% EUnit tests of the chaos run's checker (terrain_lab_chaos_checker) on hand-made
%% histories, one that holds and one that breaks each invariant; and of its schedule
%% (terrain_lab_chaos_schedule).
-module(terrain_lab_chaos_checker_tests).

-include_lib("eunit/include/eunit.hrl").

-define(GRACE, 3000).

%%--------------------------------------------------------------------
%% Hand-made histories: nodes a and b in group s1/r1, c in s1/r2

header() ->
    #{<<"grace_ms">> => ?GRACE,
      <<"groups">> => [#{<<"name">> => <<"g">>, <<"count">> => 2, <<"spread_depth">> => 2, <<"worker">> => true}]}.

node_up(T, Node, Path, Worker) ->
    #{<<"t">> => T, <<"op">> => <<"node">>, <<"node">> => Node, <<"result">> => <<"up">>,
      <<"path">> => Path, <<"worker">> => Worker}.

node_down(T, Node) ->
    #{<<"t">> => T, <<"op">> => <<"node">>, <<"node">> => Node, <<"result">> => <<"down">>}.

tree(Hash, Nodes, Clades) ->
    #{<<"t">> => 0, <<"op">> => <<"tree">>, <<"hash">> => Hash, <<"nodes">> => Nodes, <<"clades">> => Clades}.

observe(T, Seen) ->
    #{<<"t">> => T, <<"op">> => <<"observe">>, <<"result">> => Seen}.

line(T, Op, Fields) ->
    maps:merge(#{<<"t">> => T, <<"op">> => Op, <<"result">> => <<"ok">>}, Fields).

base() ->
    [node_up(0, <<"a">>, [<<"s1">>, <<"r1">>], true),
     node_up(0, <<"b">>, [<<"s1">>, <<"r1">>], true),
     node_up(0, <<"c">>, [<<"s1">>, <<"r2">>], true),
     tree(1, [<<"a">>, <<"b">>, <<"c">>], [[<<"a">>, <<"b">>, <<"c">>], [<<"a">>, <<"b">>]]),
     tree(2, [<<"a">>, <<"b">>], [[<<"a">>, <<"b">>]]),
     tree(3, [<<"a">>, <<"b">>, <<"c">>], [[<<"a">>, <<"b">>, <<"c">>], [<<"a">>, <<"c">>]])].

%% A burst ending at 1000 ms (its last operation `Op').
burst(Op) ->
    [line(100, <<"burst_start">>, #{<<"burst">> => 1}),
     line(1000, <<"burst_end">>, #{<<"burst">> => 1, <<"last_op">> => Op})].

all_at(T, Version, Hash, Nodes) ->
    observe(T, maps:from_list([{N, [Version, Hash]} || N <- Nodes])).

abc() -> [<<"a">>, <<"b">>, <<"c">>].

check(Lines) ->
    terrain_lab_chaos_checker:check(header(), Lines).

invariants(Lines) ->
    [I || #{invariant := I} <- maps:get(violations, check(Lines))].

%%--------------------------------------------------------------------
%% Convergence and the tree

converged_history_holds_test() ->
    Verdict = check(base() ++ burst(<<"stop a">>) ++ [all_at(1500, 5, 1, abc()), line(9000, <<"final">>, #{})]),
    ?assertEqual([], maps:get(violations, Verdict)),
    ?assertMatch(#{p50 := 500, p99 := 500, samples := 1}, maps:get(convergence_ms, Verdict)).

same_version_different_trees_is_a_convergence_violation_test() ->
    Cut = [line(300, <<"partition">>, #{}), line(900, <<"heal">>, #{})],
    Lines = base() ++ Cut ++ burst(<<"heal">>)
        ++ [observe(T, #{<<"a">> => [7, 1], <<"b">> => [7, 3], <<"c">> => [7, 3]}) || T <- [1500, 3000, 5900]],
    ?assertEqual([convergence], invariants(Lines)),
    [#{t := T, op := Op}] = maps:get(violations, check(Lines)),
    ?assertEqual({1000 + ?GRACE + 2000, <<"heal">>}, {T, Op}).

a_killed_node_left_in_the_tree_is_a_convergence_violation_test() ->
    Lines = base() ++ [node_down(500, <<"c">>)] ++ burst(<<"kill c">>)
        ++ [all_at(T, 6, 1, [<<"a">>, <<"b">>]) || T <- [1500, 3000, 5900]],
    ?assertEqual([convergence], invariants(Lines)),
    Removed = base() ++ [node_down(500, <<"c">>)] ++ burst(<<"kill c">>)
        ++ [all_at(1500, 6, 1, [<<"a">>, <<"b">>]), all_at(4200, 7, 2, [<<"a">>, <<"b">>])],
    ?assertEqual([], invariants(Removed)),
    ?assertMatch(#{p50 := 3200}, maps:get(convergence_ms, check(Removed))).

converging_after_grace_plus_two_seconds_is_a_violation_test() ->
    Late = base() ++ burst(<<"kill c">>) ++ [all_at(1000 + ?GRACE + 2500, 5, 1, abc())],
    ?assertEqual([convergence], invariants(Late)),
    InTime = base() ++ burst(<<"kill c">>) ++ [all_at(1000 + ?GRACE + 1900, 5, 1, abc())],
    ?assertEqual([], invariants(InTime)).

a_node_alive_that_does_not_answer_is_not_converged_test() ->
    Lines = base() ++ burst(<<"stop c">>) ++ [all_at(1500, 5, 1, [<<"a">>, <<"b">>])],
    ?assertEqual([convergence], invariants(Lines)).

final_tree_grouped_unlike_the_spec_is_a_tree_violation_test() ->
    Wrong = base() ++ [all_at(8000, 9, 3, abc()), line(9000, <<"final">>, #{})],
    ?assertEqual([tree], invariants(Wrong)),
    Right = base() ++ [all_at(8000, 9, 1, abc()), line(9000, <<"final">>, #{})],
    ?assertEqual([], invariants(Right)).

a_node_alone_in_its_group_sits_in_the_parent_network_test() ->
    %% c alone in r2: its lowest network of two or more nodes is s1, the whole tree
    Lines = base() ++ [all_at(8000, 9, 1, abc()), line(9000, <<"final">>, #{})],
    ?assertEqual([], invariants(Lines)).

%%--------------------------------------------------------------------
%% Placed groups

placed(T, Members) ->
    line(T, <<"placed">>, #{<<"group">> => <<"g">>, <<"members">> => Members}).

settled_placed(Members) ->
    base() ++ [all_at(500, 5, 1, abc()), placed(800, Members), line(1000, <<"final">>, #{})].

placed_group_with_k_members_spread_holds_test() ->
    ?assertEqual([], invariants(settled_placed([[<<"a">>, <<"<1.1.0>">>], [<<"c">>, <<"<2.1.0>">>]]))).

placed_group_short_of_k_is_a_violation_test() ->
    ?assertEqual([placed], invariants(settled_placed([[<<"a">>, <<"<1.1.0>">>]]))).

placed_group_over_k_at_any_time_is_a_violation_test() ->
    Members = [[<<"a">>, <<"<1.1.0>">>], [<<"c">>, <<"<2.1.0>">>], [<<"b">>, <<"<3.1.0>">>]],
    Lines = base() ++ [all_at(500, 5, 1, abc()), placed(300, Members), placed(800, lists:droplast(Members)),
                       line(1000, <<"final">>, #{})],
    ?assertEqual([placed], invariants(Lines)).

placed_member_on_a_dead_or_unmatching_node_is_a_violation_test() ->
    Dead = base() ++ [node_down(200, <<"c">>), all_at(500, 6, 2, [<<"a">>, <<"b">>]),
                      placed(800, [[<<"a">>, <<"<1.1.0>">>], [<<"c">>, <<"<2.1.0>">>]]), line(1000, <<"final">>, #{})],
    ?assertEqual([placed], invariants(Dead)),
    Unmatching = [node_up(0, <<"d">>, [<<"s1">>, <<"r2">>], false) | base()]
        ++ [all_at(500, 5, 4, [<<"a">>, <<"b">>, <<"c">>, <<"d">>]),
            tree(4, [<<"a">>, <<"b">>, <<"c">>, <<"d">>], [[<<"a">>, <<"b">>, <<"c">>, <<"d">>], [<<"a">>, <<"b">>],
                                                           [<<"c">>, <<"d">>]]),
            placed(800, [[<<"a">>, <<"<1.1.0>">>], [<<"d">>, <<"<2.1.0>">>]]), line(1000, <<"final">>, #{})],
    [#{detail := Detail}] = maps:get(violations, check(Unmatching)),
    ?assertMatch({_, _}, binary:match(Detail, <<"does not match the predicate">>)).

placed_members_in_one_rack_while_another_has_room_is_a_spread_violation_test() ->
    ?assertEqual([placed], invariants(settled_placed([[<<"a">>, <<"<1.1.0>">>], [<<"b">>, <<"<2.1.0>">>]]))).

spread_is_not_judged_before_the_tree_groups_as_the_spec_test() ->
    %% the burst converged to tree 3 (a with c: a move not re-measured yet): the skew is the tree's, not a violation
    Skewed = [[<<"a">>, <<"<1.1.0>">>], [<<"b">>, <<"<2.1.0>">>]],
    Lines = base() ++ burst(<<"move c">>) ++ [all_at(1500, 6, 3, abc()), placed(2000, Skewed),
                                              line(2500, <<"burst_start">>, #{<<"burst">> => 2})],
    ?assertEqual([], invariants(Lines)),
    Grouped = base() ++ burst(<<"move c">>) ++ [all_at(1500, 6, 1, abc()), placed(2000, Skewed),
                                               line(2500, <<"burst_start">>, #{<<"burst">> => 2})],
    ?assertEqual([placed], invariants(Grouped)).

%%--------------------------------------------------------------------
%% Subscriptions, deadlines, crashes, leftovers

notify(T, Sub, Version, Hash) ->
    line(T, <<"notify">>, #{<<"sub">> => Sub, <<"node">> => <<"a">>, <<"version">> => Version, <<"hash">> => Hash}).

subscription_versions_must_increase_test() ->
    ?assertEqual([], invariants(base() ++ [notify(1, <<"s1">>, 3, 1), notify(2, <<"s1">>, 4, 1),
                                           notify(3, <<"s2">>, 2, 1)])),
    ?assertEqual([subscription], invariants(base() ++ [notify(1, <<"s1">>, 4, 1), notify(2, <<"s1">>, 4, 1)])).

subscription_after_missed_versions_gets_the_whole_tree_test() ->
    Whole = base() ++ [notify(1, <<"s1">>, 3, 1), notify(2, <<"s1">>, 8, 1)],
    ?assertEqual([], invariants(Whole)),
    Part = [tree(9, [], []) | base()] ++ [notify(1, <<"s1">>, 3, 1), notify(2, <<"s1">>, 8, 9)],
    ?assertEqual([subscription], invariants(Part)).

%%--------------------------------------------------------------------
%% Acknowledged changes: a kill of the sequencer during a change

%% a, b and c at version 5 (tree 1): acknowledged by the observer and a subscriber; then
%% the sequencer (a) is killed right after the join of c; b and c answer afterwards.
sequencer_killed(After) ->
    base() ++ [all_at(200, 5, 1, abc()), notify(300, <<"s1">>, 5, 1),
               line(400, <<"join">>, #{<<"node">> => <<"c">>}),
               line(450, <<"kill">>, #{<<"node">> => <<"a">>, <<"sequencer">> => true}),
               node_down(460, <<"a">>)] ++ After.

a_sequencer_kill_that_keeps_every_acknowledged_version_holds_test() ->
    Verdict = check(sequencer_killed([all_at(900, 6, 3, [<<"b">>, <<"c">>])])),
    ?assertEqual([], [V || V = #{invariant := acknowledged} <- maps:get(violations, Verdict)]),
    ?assertEqual(#{versions => 2, sequencer_kills => 1}, maps:get(acknowledged, Verdict)).

a_version_acknowledged_with_a_second_tree_is_a_lost_change_test() ->
    %% the successor (b) published another tree at the version a client had seen
    Verdict = check(sequencer_killed([all_at(900, 5, 3, [<<"b">>, <<"c">>])])),
    ?assertMatch([#{invariant := acknowledged, t := 900, op := <<"observe">>}],
                 [V || V = #{invariant := acknowledged} <- maps:get(violations, Verdict)]).

a_version_that_goes_back_on_a_node_is_a_violation_test() ->
    Verdict = check(sequencer_killed([all_at(900, 4, 2, [<<"b">>, <<"c">>])])),
    ?assertMatch([#{invariant := acknowledged, t := 900}, #{invariant := acknowledged, t := 900}],
                 [V || V = #{invariant := acknowledged} <- maps:get(violations, Verdict)]).

partition_sides_may_number_their_changes_alike_until_they_merge_test() ->
    Cut = [line(150, <<"partition">>, #{}), line(250, <<"heal">>, #{}),
           line(100, <<"burst_start">>, #{<<"burst">> => 1}), line(300, <<"burst_end">>, #{<<"burst">> => 1}),
           observe(200, #{<<"a">> => [5, 1], <<"b">> => [5, 2], <<"c">> => [5, 2]}),
           all_at(900, 6, 1, abc())],
    ?assertEqual([], invariants(base() ++ Cut)),
    %% the sides, one again at version 6 at 900 ms, may still number alike until the heal
    %% + grace + 2 s (each removes the other's nodes after the grace period) ...
    Split = fun(T) -> observe(T, #{<<"a">> => [7, 1], <<"b">> => [7, 2], <<"c">> => [7, 2]}) end,
    ?assertEqual([], invariants(base() ++ Cut ++ [Split(250 + ?GRACE + 1000)])),
    %% ... but not after it: two trees at one version then are a change lost
    ?assertEqual([acknowledged], invariants(base() ++ Cut ++ [Split(250 + ?GRACE + 2500)])).

deadline_overrun_is_a_violation_test() ->
    Call = fun(Elapsed) -> line(5, <<"choose">>, #{<<"node">> => <<"a">>, <<"deadline_ms">> => 2000,
                                                  <<"elapsed_ms">> => Elapsed}) end,
    ?assertEqual([], invariants(base() ++ [Call(2900)])),
    ?assertEqual([deadline], invariants(base() ++ [Call(3500)])).

crash_report_is_a_violation_test() ->
    ?assertEqual([crash], invariants(base() ++ [line(7, <<"crash">>, #{<<"node">> => <<"a">>,
                                                                        <<"result">> => <<"terrain_live">>})])).

leftover_is_a_violation_test() ->
    ?assertEqual([], invariants(base() ++ [line(9, <<"leftover">>, #{<<"result">> => []})])),
    ?assertEqual([leftover], invariants(base() ++ [line(9, <<"leftover">>, #{<<"result">> => [<<"VM x">>]})])).

crash_reports_of_terrain_processes_are_recognised_test() ->
    Crash = fun(Initial) -> #{level => error, meta => #{},
                              msg => {report, #{label => {proc_lib, crash},
                                                report => [[{initial_call, Initial}, {registered_name, []},
                                                            {error_info, {error, badarg, []}}], []]}}} end,
    ?assertMatch(<<"{proc_lib,crash} of ", _/binary>>,
                 terrain_lab_chaos_log:crash_text(Crash({terrain_placed_keeper, init, 1}))),
    ?assertEqual(none, terrain_lab_chaos_log:crash_text(Crash({my_app_worker, init, 1}))),
    Server = #{level => error, meta => #{},
               msg => {report, #{label => {gen_server, terminate}, name => terrain_live, reason => boom}}},
    ?assertNotEqual(none, terrain_lab_chaos_log:crash_text(Server)),
    ?assertEqual(none, terrain_lab_chaos_log:crash_text(#{level => error, meta => #{}, msg => {string, "x"}})).

faults_counted_and_failed_ones_listed_test() ->
    Lines = base() ++ [line(1, <<"kill">>, #{<<"node">> => <<"c">>}),
                       line(2, <<"join">>, #{<<"node">> => null, <<"result">> => <<"no room">>}),
                       line(3, <<"cont">>, #{<<"node">> => <<"a">>})],
    Verdict = check(Lines),
    ?assertEqual(1, maps:get(faults, Verdict)),
    ?assertMatch([#{op := <<"join">>, result := <<"no room">>}], maps:get(fault_errors, Verdict)).

percentile_test() ->
    ?assertEqual(null, terrain_lab_chaos_checker:percentile([], 50)),
    ?assertEqual(3, terrain_lab_chaos_checker:percentile([5, 1, 3, 2, 4], 50)),
    ?assertEqual(100, terrain_lab_chaos_checker:percentile(lists:seq(1, 100), 99) + 1).

%%--------------------------------------------------------------------
%% The schedule

model() ->
    #{nodes => [#{name => list_to_atom("n" ++ integer_to_list(I)), path => [site(I), rack(I)], worker => true}
                || I <- lists:seq(1, 12)],
      racks => lists:usort([[site(I), rack(I)] || I <- lists:seq(1, 12)]),
      protected => n9}.

site(I) -> list_to_atom("s" ++ integer_to_list(I rem 2)).
rack(I) -> list_to_atom("r" ++ integer_to_list(I rem 4)).

plan(Seed, Faults) ->
    terrain_lab_chaos_schedule:plan(model(), #{seed => Seed, duration_ms => 300000, faults => Faults,
                                               grace_ms => ?GRACE}).

all_faults() ->
    terrain_lab_chaos_schedule:fault_ops().

same_seed_same_schedule_test() ->
    ?assertEqual(plan(7, all_faults()), plan(7, all_faults())),
    ?assertNotEqual(plan(7, all_faults()), plan(8, all_faults())).

schedule_uses_only_the_faults_allowed_within_the_duration_test() ->
    Bursts = plan(3, [kill, partition]),
    Ops = lists:usort([Op || #{actions := As} <- Bursts, #{op := Op} <- As]),
    ?assertEqual([heal, kill, partition], Ops),
    ?assert(lists:all(fun(#{at := At, length := L}) -> At + L =< 300000 end, Bursts)),
    ?assert(terrain_lab_chaos_schedule:count_faults(Bursts) > 20).

schedule_never_targets_the_protected_node_test() ->
    Targets = [N || #{actions := As} <- plan(5, all_faults()), #{op := Op, node := N} <- As,
                    lists:member(Op, [kill, stop, leave, move])],
    ?assertNot(lists:member(n9, Targets)),
    ?assert(length(Targets) > 10).

schedule_keeps_three_quarters_of_the_nodes_test() ->
    Alive = lists:foldl(fun(#{op := Op, node := N}, Acc) when Op =:= kill; Op =:= leave -> Acc -- [N];
                           (#{op := join, node := N}, Acc) -> [N | Acc];
                           (_, Acc) -> Acc
                        end, [N || #{name := N} <- maps:get(nodes, model())],
                        [A || #{actions := As} <- plan(11, [kill, leave, join]), A <- As]),
    ?assert(length(Alive) >= 9).

schedule_never_stops_a_vm_during_a_partition_test() ->
    Overlap = [B || #{burst := B, actions := As} <- plan(13, all_faults()),
                    lists:any(fun(#{op := stop}) -> true; (_) -> false end, As),
                    lists:any(fun(#{op := partition}) -> true; (_) -> false end, As),
                    overlapping(As)],
    ?assertEqual([], Overlap).

%% A stop whose node is still stopped when a partition starts, or the other way round.
overlapping(Actions) ->
    Stopped = fun(S) -> maps:get(stopped, S, 0) > 0 end,
    {_, Bad} = lists:foldl(fun(#{op := stop}, {S, B}) ->
                                   {S#{stopped => maps:get(stopped, S, 0) + 1}, B orelse is_map_key(partition, S)};
                              (#{op := cont}, {S, B}) -> {S#{stopped => maps:get(stopped, S) - 1}, B};
                              (#{op := partition}, {S, B}) -> {S#{partition => true}, B orelse Stopped(S)};
                              (#{op := heal}, {S, B}) -> {maps:remove(partition, S), B};
                              (_, Acc) -> Acc
                           end, {#{}, false}, Actions),
    Bad.
