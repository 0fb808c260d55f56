%% The online GEV check: tail probabilities against scipy's genextreme (c = -xi),
%% the Gumbel limit, the support bounds, thresholds, sides, and loading errors.
-module(terrain_variability_tests).
-include_lib("eunit/include/eunit.hrl").

%% Reference values: scipy 1.x, genextreme.sf(x, -xi, loc=mu, scale=sigma), printed with repr.
-define(SCIPY_SF,
        [{{11.1679, 0.2120, -0.00105}, [{11.0, 0.889974099533281}, {12.0, 0.01939217585328145},
                                        {13.0, 0.00016969398750755994}]},
         {{10.0, 2.0, 0.3}, [{8.0, 0.9625040187092457}, {15.0, 0.14344473383473727}, {60.0, 0.0007975605581651539}]},
         {{10.0, 2.0, -0.3}, [{8.0, 0.9090813532511605}, {14.0, 0.04606104989541944}, {16.6, 2.1544344579523024e-07}]},
         {{0.0, 1.0, 0.0}, [{0.0, 0.6321205588285577}, {30.0, 9.357622968839737e-14}]}]).

params({Mu, Sigma, Xi}) -> #{location => Mu, scale => Sigma, shape => Xi}.

matches_scipy_upper_tail_test() ->
    [?assert(abs(terrain_variability:tail_probability(params(P), X) - Expected) =< 1.0e-9 * Expected + 1.0e-15)
     || {P, Points} <- ?SCIPY_SF, {X, Expected} <- Points].

gumbel_limit_is_continuous_test() ->
    At = fun(Xi, X) -> terrain_variability:tail_probability(#{location => 0, scale => 1, shape => Xi}, X) end,
    [?assert(abs(At(Xi, X) - At(0.0, X)) < 1.0e-6) || Xi <- [1.0e-8, -1.0e-8, 1.0e-7, -1.0e-7, 2.0e-7], X <- [-1.0, 0.0, 2.0, 5.0]].

support_bounds_test() ->
    %% xi > 0: bounded below at mu - sigma/xi = 10 - 2/0.5 = 6; xi < 0: bounded above at 10 + 2/0.5 = 14.
    ?assertEqual(1.0, terrain_variability:tail_probability(#{location => 10, scale => 2, shape => 0.5}, 5.0)),
    ?assertEqual(0.0, terrain_variability:tail_probability(#{location => 10, scale => 2, shape => -0.5}, 14.5)).

check_flags_only_the_unlikely_test() ->
    ok = terrain_variability:load(#{location => 11.1679, scale => 0.2120, shape => -0.00105}, #{tail => 0.001}),
    try
        ?assertMatch({ok, P} when P > 0.5, terrain_variability:check(11.0)),
        ?assertMatch({ok, _}, terrain_variability:check(12.0)),
        {unlikely, P13} = terrain_variability:check(13.0),
        ?assert(abs(P13 - 0.00016969398750755994) < 1.0e-12)
    after
        terrain_variability:unload(default)
    end.

lower_and_both_sides_test() ->
    Fit = #{location => 10.0, scale => 2.0, shape => 0.3},
    ok = terrain_variability:load(Fit, #{name => low, side => lower, tail => 0.05}),
    ok = terrain_variability:load(Fit, #{name => two, side => both, tail => 0.05}),
    try
        %% F(8) = 0.0375 (scipy cdf): unlikely as a lower tail; both sides: 2 * 0.0375 = 0.075, not unlikely.
        {unlikely, Low} = terrain_variability:check(low, 8.0),
        ?assert(abs(Low - 0.03749598129075428) < 1.0e-12),
        {ok, Both} = terrain_variability:check(two, 8.0),
        ?assert(abs(Both - 2 * 0.03749598129075428) < 1.0e-12),
        ?assertMatch({unlikely, _}, terrain_variability:check(two, 60.0))
    after
        terrain_variability:unload(low),
        terrain_variability:unload(two)
    end.

loads_fit_json_test() ->
    File = "/tmp/terrain_fit_" ++ os:getpid() ++ ".json",
    ok = file:write_file(File, <<"{\"format\": \"terrain.gev/1\", \"n\": 400, \"location\": 11.1679, "
                                 "\"scale\": 0.212, \"shape\": -0.00105, \"se\": {}, \"nll\": -1.0}">>),
    try
        ok = terrain_variability:load(File, #{name => from_file}),
        ?assertMatch(#{location := 11.1679, scale := 0.212, shape := -0.00105, tail := 0.001, side := upper},
                     terrain_variability:model(from_file))
    after
        terrain_variability:unload(from_file),
        file:delete(File)
    end.

check_without_model_raises_test() ->
    ?assertError({no_model, nothing_here}, terrain_variability:check(nothing_here, 1.0)).

bad_input_is_an_error_with_a_sentence_test() ->
    Cases = [{#{location => 1, scale => 0, shape => 0}, #{}, "GEV parameter 'scale' must be a number above 0, got 0.0"},
             {#{location => 1, scale => 1}, #{}, "GEV fit lacks 'shape'"},
             {#{<<"location">> => <<"x">>, <<"scale">> => 1, <<"shape">> => 0}, #{}, "GEV parameter 'location' must be a number"},
             {#{location => 1, scale => 1, shape => 0}, #{tail => 0.7}, "option tail: bad value 0.7"},
             {#{location => 1, scale => 1, shape => 0}, #{colour => red}, "unknown option colour"},
             {"/nonexistent/fit.json", #{}, "cannot read GEV fit /nonexistent/fit.json: no such file or directory"},
             {42, #{}, "expected a fit.json path or a map"}],
    [begin
         {error, Reason} = terrain_variability:load(Fit, Options),
         Message = lists:flatten(terrain_variability:format_error(Reason)),
         ?assertNotEqual(nomatch, string:find(Message, Expected))
     end || {Fit, Options, Expected} <- Cases],
    ?assertEqual(undefined, terrain_variability:model(default)).

wrong_format_is_rejected_test() ->
    File = "/tmp/terrain_fit_fmt_" ++ os:getpid() ++ ".json",
    ok = file:write_file(File, <<"{\"format\": \"terrain.latency/1\"}">>),
    try
        {error, Reason} = terrain_variability:load(File),
        ?assertEqual("GEV fit has format <<\"terrain.latency/1\">>, expected terrain.gev/1",
                     lists:flatten(terrain_variability:format_error(Reason)))
    after
        file:delete(File)
    end.

fit_that_did_not_converge_is_refused_test() ->
    File = "/tmp/terrain_fit_nc_" ++ os:getpid() ++ ".json",
    ok = file:write_file(File, <<"{\"format\": \"terrain.gev/1\", \"converged\": false, \"location\": 1.0, "
                                 "\"scale\": 1.0, \"shape\": -0.9, \"se\": null}">>),
    try
        {error, Reason} = terrain_variability:load(File, #{name => nc}),
        ?assertNotEqual(nomatch, string:find(lists:flatten(terrain_variability:format_error(Reason)), "did not converge")),
        ?assertEqual(undefined, terrain_variability:model(nc))
    after
        file:delete(File)
    end.

loads_the_analysis_output_of_a_real_fit_test() ->
    %% fit.json as terrain-analysis gev writes it carries "converged": true and many more keys.
    File = "/tmp/terrain_fit_ok_" ++ os:getpid() ++ ".json",
    ok = file:write_file(File, <<"{\"format\": \"terrain.gev/1\", \"converged\": true, \"n\": 100, \"location\": 0.286445, "
                                 "\"scale\": 0.0404445, \"shape\": -0.138747, \"se\": {\"location\": 0.0046}, \"nll\": -170.59}">>),
    try
        ok = terrain_variability:load(File, #{name => real}),
        ?assertMatch({ok, P} when P > 0.4, terrain_variability:check(real, 0.29)),
        ?assertMatch({unlikely, _}, terrain_variability:check(real, 0.60))
    after
        terrain_variability:unload(real),
        file:delete(File)
    end.
