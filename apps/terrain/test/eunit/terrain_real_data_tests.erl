%% Full discovery (terrain:discover/2 at its defaults) on the real latency matrices of
%% apps/terrain/test/data/real (SOURCES.md there): CPUs against their latency-visible
%% truth, cloud region tables against continents.
-module(terrain_real_data_tests).
-include_lib("eunit/include/eunit.hrl").

dir() ->
    filename:join([filename:dirname(?FILE), "..", "data", "real"]).

found_and_truth(Name) ->
    {ok, Latency} = terrain:read_latency(filename:join(dir(), Name ++ ".latency.json")),
    {ok, #{topology := Found}} = terrain:discover(Latency, #{}),
    {ok, Truth, _} = terrain_topology:from_json(element(2, file:read_file(filename:join(dir(), Name ++ ".truth.json")))),
    {Found, Truth}.

cpus() ->
    [filename:basename(F, ".latency.json") || F <- filelib:wildcard(filename:join(dir(), "cpu-*.latency.json"))].

%% Every CPU, the 7950X included: its results are quantized to about 1 ns (one way), so
%% its SMT pairs (5 and 10 ns) and the pairs inside a CCD (15-21 ns) hold no alpha
%% plateau; its SMT pairs are strict groups (every round trip inside 25% shorter than
%% every one leaving them).
cpu_matrices_exact_test_() ->
    [{Name, {timeout, 60, fun() ->
                     {Found, Truth} = found_and_truth(Name),
                     {ok, #{clade_recall := R, clade_precision := P}} = terrain:compare_topologies(Found, Truth),
                     ?assertEqual({Name, 1.0, 1.0}, {Name, R, P})
             end}} || Name <- cpus()].

%% Without the strict groups the alpha rule finds the 7950X's two CCDs only.
strict_groups_find_the_7950x_smt_pairs_test() ->
    {ok, Latency} = terrain:read_latency(filename:join(dir(), "cpu-amd-ryzen9-7950x.latency.json")),
    {ok, #{topology := AlphaOnly}} = terrain:discover(Latency, #{strict => false}),
    {_, Truth} = found_and_truth("cpu-amd-ryzen9-7950x"),
    {ok, #{clade_recall := R}} = terrain:compare_topologies(AlphaOnly, Truth),
    ?assert(R < 0.2).

eighteen_cpus_checked_test() ->
    ?assertEqual(18, length(cpus())).

top_ari(Name) ->
    {Found, Truth} = found_and_truth(Name),
    {ok, #{levels := [#{ari := Ari} | _]}} = terrain:compare_topologies(Found, Truth),
    Ari.

%% Top-level ARI against continents >= 0.8 (the goal of issue 35). The AWS table scored
%% 0.601 before the top check: the alpha rule found a level at every step (21 -> 12 -> 8
%% -> 6 -> 4 points) and its top joined Europe with North America.
cloud_regions_match_continents_test_() ->
    [{Name, {timeout, 60, fun() -> ?assertMatch({Name, Ari} when Ari >= 0.8, {Name, top_ari(Name)}) end}}
     || Name <- ["aws-regions", "azure-regions", "gcp-regions"]].

%% The AWS table's evidence: the alpha levels above 12 points joined into a top of
%% silhouette below 0.5 (4 groups, 0.44), so the silhouette cut of the 12 points
%% replaced them: 7 groups, chosen by the largest jump of merge heights among the cuts
%% within 10% of the best silhouette (the best, 8 groups, splits the US west coast
%% from the east and scores 0.745 against continents).
aws_alpha_top_replaced_by_the_silhouette_cut_test() ->
    {ok, Latency} = terrain:read_latency(filename:join(dir(), "aws-regions.latency.json")),
    {ok, #{levels := Levels}} = terrain:discover(Latency, #{}),
    [Cut] = [L || #{above := Above} = L <- Levels, Above =/= none],
    #{points := 12, clusters := 7, above := Top, silhouette := Sil, best_silhouette := Best, jump := Jump} = Cut,
    ?assert(Top < 0.5),
    ?assert(Sil >= 0.9 * Best andalso Best >= 0.5 andalso Sil < Best),
    ?assert(Jump > 1.5),
    ?assertMatch([#{clusters := 1, alpha := none}], [L || L <- Levels, L =/= Cut, maps:get(points, L) =< 7]).

%% The city mesh (WonderNetwork's servers, 217 cities): top-level ARI against continents
%% >= 0.7 (the goal of issue 35).
city_mesh_matches_continents_test_() ->
    {timeout, 120, fun() -> ?assert(top_ari("wonderproxy-cities") >= 0.7) end}.

%% Not flat where average linkage finds continents: every wide-area table gets at least
%% two top-level groups (the country mesh too, though its ARI against continents is only
%% about 0.5: the mean of every address pair of two countries is a noisy distance;
%% docs/BENCHMARKS.md).
wide_area_tables_not_flat_test_() ->
    [{Name, {timeout, 120, fun() ->
                      {{network, _, _, Children}, _} = found_and_truth(Name),
                      ?assertMatch({Name, [_, _ | _]}, {Name, [C || {network, _, _, _} = C <- Children]})
              end}}
     || Name <- ["aws-regions", "azure-regions", "gcp-regions", "ripe-countries", "wonderproxy-cities"]].

%% A strict group must stand out by twice the noise too: with every pair's median 11 ns
%% above its minimum (the jitter of one round trip, as large as an SMT pair's round
%% trip), the 7950X's SMT pairs (11-21 ns round trip, 21-31 ns to the nearest other
%% CPU) are no longer told apart.
strict_groups_need_twice_the_noise_test() ->
    {ok, #{stats := #{min := Rows}} = Latency} =
        terrain:read_latency(filename:join(dir(), "cpu-amd-ryzen9-7950x.latency.json")),
    Medians = [[case V of null -> null; _ -> V + 0.011 end || V <- Row] || Row <- Rows],
    {ok, #{topology := Found}} = terrain:discover(Latency#{stats => #{min => Rows, median => Medians}}, #{}),
    {_, Truth} = found_and_truth("cpu-amd-ryzen9-7950x"),
    {ok, #{clade_recall := R}} = terrain:compare_topologies(Found, Truth),
    ?assert(R < 0.2).
