%% Properties of the online GEV check: the upper tail probability is a probability,
%% never increases with the duration, and upper + lower = 1 where both are resolvable.
-module(prop_variability).
-include_lib("proper/include/proper.hrl").
-export([prop_upper_tail_is_monotone/0, prop_tails_sum_to_one/0]).

params() ->
    ?LET({Mu, Sigma, Xi}, {range(-100, 100), range(1, 1000), range(-80, 80)},
         #{location => float(Mu), scale => Sigma / 100, shape => Xi / 100}).

prop_upper_tail_is_monotone() ->
    ?FORALL({P, X1, X2}, {params(), real(), real()},
            begin
                {Lo, Hi} = {min(X1, X2), max(X1, X2)},
                A = terrain_variability:tail_probability(P, Lo),
                B = terrain_variability:tail_probability(P, Hi),
                A >= 0.0 andalso A =< 1.0 andalso B >= 0.0 andalso B =< 1.0 andalso B =< A
            end).

prop_tails_sum_to_one() ->
    ?FORALL({P, X}, {params(), real()},
            begin
                ok = terrain_variability:load(P, #{name => prop_sum, side => lower, tail => 0.01}),
                {_, Lower} = terrain_variability:check(prop_sum, X),
                Upper = terrain_variability:tail_probability(P, X),
                terrain_variability:unload(prop_sum),
                abs(Lower + Upper - 1.0) < 1.0e-9
            end).
