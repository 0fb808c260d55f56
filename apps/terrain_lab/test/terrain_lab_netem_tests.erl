%% The pure parts of network emulation: the link model (delay scheduling, jitter
%% bounds, pacing arithmetic, the window), the link table on the command line, and
%% what the launcher derives from a spec.
-module(terrain_lab_netem_tests).
-include_lib("eunit/include/eunit.hrl").

-define(MS, 1000000). % ns

new_link(Options) ->
    terrain_lab_netem_link:new(Options).

%% Schedules chunks {ArrivalNs, Bytes, U} in order; returns the due times.
dues(Link, Chunks) ->
    {Dues, _} = lists:mapfoldl(fun({Arrival, Bytes, U}, Dir) ->
                                       terrain_lab_netem_link:schedule(Arrival, Bytes, U, Link, Dir)
                               end, terrain_lab_netem_link:new_direction(), Chunks),
    Dues.

%%--------------------------------------------------------------------
%% Delay scheduling

latency_alone_delays_every_chunk_by_it_test() ->
    Link = new_link(#{latency => 1500}),
    ?assertEqual([1500000, 2500000, 1501500000],
                 dues(Link, [{0, 100, 0.0}, {1000000, 1, 0.9}, {1500000000, 100000, 0.5}])).

no_options_means_no_delay_test() ->
    Link = new_link(#{}),
    ?assertEqual([7, 7, 9], dues(Link, [{7, 10, 0.3}, {7, 1000000, 0.3}, {9, 1, 0.3}])).

a_chunk_never_leaves_before_the_one_in_front_test() ->
    %% Back-to-back chunks with random jitter: due times are the running maximum.
    Link = new_link(#{latency => 1000, jitter => 800}),
    Rand = rand:seed_s(exsss, {1, 2, 3}),
    {Chunks, _} = lists:mapfoldl(fun(I, R0) -> {U, R} = rand:uniform_s(R0), {{I * 1000, 1000, U}, R} end,
                                 Rand, lists:seq(1, 5000)),
    Dues = dues(Link, Chunks),
    ?assertEqual(Dues, lists:sort(Dues)),
    Own = [A + terrain_lab_netem_link:delay(U, Link) || {A, _, U} <- Chunks],
    ?assert(lists:all(fun({Due, OwnDue}) -> Due >= OwnDue end, lists:zip(Dues, Own))),
    %% ... and exactly its own delay when nothing is in front of it.
    Sparse = [{I * 10 * ?MS, 100, U} || {I, {_, _, U}} <- lists:zip(lists:seq(1, 100), lists:sublist(Chunks, 100))],
    ?assertEqual([A + terrain_lab_netem_link:delay(U, Link) || {A, _, U} <- Sparse], dues(Link, Sparse)).

%%--------------------------------------------------------------------
%% Jitter distribution

jitter_is_uniform_around_the_latency_test() ->
    Link = new_link(#{latency => 1000, jitter => 300}),
    ?assertEqual(700000, terrain_lab_netem_link:delay(0.0, Link)),
    ?assertEqual(1000000, terrain_lab_netem_link:delay(0.5, Link)),
    ?assertEqual(1300000, terrain_lab_netem_link:delay(1.0, Link)),
    {Samples, _} = lists:mapfoldl(fun(_, R0) ->
                                          {U, R} = rand:uniform_s(R0),
                                          {terrain_lab_netem_link:delay(U, Link), R}
                                  end, rand:seed_s(exsss, {4, 5, 6}), lists:seq(1, 20000)),
    ?assert(lists:all(fun(D) -> D >= 700000 andalso D =< 1300000 end, Samples)),
    Mean = lists:sum(Samples) / length(Samples),
    %% Standard error of the mean: 300 µs / sqrt(3) / sqrt(20000) = 1.2 µs; allow 5 µs.
    ?assert(abs(Mean - 1000000) < 5000, Mean),
    %% Uniform: each tenth of the range holds about a tenth of the samples.
    Deciles = [length([D || D <- Samples, D >= 700000 + K * 60000, D < 700000 + (K + 1) * 60000]) || K <- lists:seq(0, 9)],
    ?assert(lists:all(fun(N) -> N > 1800 andalso N < 2200 end, Deciles), Deciles).

jitter_larger_than_latency_is_truncated_at_zero_test() ->
    Link = new_link(#{latency => 100, jitter => 500}),
    ?assertEqual(0, terrain_lab_netem_link:delay(0.0, Link)),
    ?assertEqual(0, terrain_lab_netem_link:delay(0.3, Link)),
    ?assertEqual(600000, terrain_lab_netem_link:delay(1.0, Link)).

%%--------------------------------------------------------------------
%% Pacing

serialisation_takes_bytes_over_bandwidth_test() ->
    ?assertEqual(100, terrain_lab_netem_link:serialisation(100, 1000000000)),
    ?assertEqual(1000000000, terrain_lab_netem_link:serialisation(1000000, 1000000)),
    ?assertEqual(0, terrain_lab_netem_link:serialisation(1000000, infinity)),
    %% Rounds down, at most 1 ns per chunk.
    ?assertEqual(333333333, terrain_lab_netem_link:serialisation(1, 3)).

a_burst_leaves_at_the_bandwidth_test() ->
    %% 10 chunks of 100 kB at once on a 1 MB/s wire with 2 ms latency: the last byte
    %% is out after 1 s, and arrives 2 ms later; the rate is exactly the bandwidth.
    Link = new_link(#{bandwidth => 1000000, latency => 2000}),
    Dues = dues(Link, [{0, 100000, 0.5} || _ <- lists:seq(1, 10)]),
    ?assertEqual([K * 100 * ?MS + 2 * ?MS || K <- lists:seq(1, 10)], Dues),
    %% Many small chunks: the rounding does not add up to a rate error.
    Small = dues(new_link(#{bandwidth => 3000000}), [{0, 1000, 0.5} || _ <- lists:seq(1, 3000)]),
    ?assert(abs(lists:last(Small) - 1000 * ?MS) =< 3000).

an_idle_wire_starts_at_the_arrival_test() ->
    Link = new_link(#{bandwidth => 1000000}),
    %% The second chunk arrives after the wire is free again: no queueing behind the first.
    ?assertEqual([1 * ?MS, 5000 * ?MS + 1 * ?MS], dues(Link, [{0, 1000, 0.5}, {5000 * ?MS, 1000, 0.5}])),
    %% The second arrives while the first is still on the wire: it waits for it.
    ?assertEqual([100 * ?MS, 200 * ?MS], dues(Link, [{0, 100000, 0.5}, {10 * ?MS, 100000, 0.5}])).

window_covers_what_is_in_flight_test() ->
    ?assertEqual(8 * 1024 * 1024, terrain_lab_netem_link:window(new_link(#{latency => 20000}))),
    ?assertEqual(1024 * 1024, terrain_lab_netem_link:window(new_link(#{bandwidth => 1000}))),
    %% 100 MB/s with 20 ms ± 5 ms: a quarter second plus 25 ms of it.
    ?assertEqual(25000000 + 2500000, terrain_lab_netem_link:window(new_link(#{bandwidth => 100000000, latency => 20000,
                                                                          jitter => 5000}))).

%%--------------------------------------------------------------------
%% The link table and the launcher

links_survive_the_command_line_test() ->
    Links = #{"p_a" => #{latency => 300, jitter => 10}, "p_b" => #{}, "p-c" => #{bandwidth => 1000000}},
    Text = terrain_lab_netem_epmd:encode_links(Links),
    ?assertEqual(nomatch, string:find(Text, " ")),
    ?assertEqual({ok, Links}, terrain_lab_netem_epmd:decode_links(Text)).

bad_link_tables_are_refused_test() ->
    [?assertMatch({error, {terrain_netem, bad_links, _}}, terrain_lab_netem_epmd:decode_links(T))
     || T <- ["", "[{", "#{}", "[{\"a\",[{latency,-1}]}]", "[{\"a\",[{colour,red}]}]", "[{a,[]}]",
              "[{\"\",[]}]", "[{\"a\",#{}}]"]].

loopback_address_per_node_test() ->
    %% the same name, the same address, on any node (a full name maps as its short name)
    ?assertEqual(terrain_lab_netem_epmd:address("coll_s1r1n1"), terrain_lab_netem_epmd:address('coll_s1r1n1@vm')),
    Names = ["coll_s" ++ integer_to_list(S) ++ "r" ++ integer_to_list(R) ++ "n" ++ integer_to_list(N)
             || S <- lists:seq(1, 4), R <- lists:seq(1, 4), N <- lists:seq(1, 16)],
    Addresses = [terrain_lab_netem_epmd:address(N) || N <- Names],
    %% in 127/8, never 127.0.x.x (localhost, Debian's 127.0.1.1), never .0 or .255 last
    ?assert(lists:all(fun({127, A, B, C}) -> A >= 1 andalso A =< 254 andalso B >= 0 andalso B =< 255
                                             andalso C >= 1 andalso C =< 254;
                         (_) -> false
                      end, Addresses)),
    %% the 256 nodes of `scale_spec.py 256' under the collective's prefix: all apart
    ?assertEqual(256, length(lists:usort(Addresses))).

vm_args_give_each_node_its_links_to_all_others_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms(
                   [{cluster, c, #{latency => 5000}},
                    {group, s1, #{latency => 1000, bandwidth => 10000000},
                     [{group, r1, #{latency => 200, jitter => 50}, [{node, a, #{}}, {node, b, #{}}]},
                      {node, c, #{}}]},
                    {group, s2, #{}, [{node, d, #{}}]}], undefined),
    ["-epmd_module", "terrain_lab_netem_epmd", "-terrain_netem", Text, "-kernel", "inet_dist_connect_options", Source
     | Proxy] = terrain_lab_netem:vm_args(Spec, "p_", a),
    %% distribution connects from the node's own loopback address
    {A1, B1, C1} = {element(2, terrain_lab_netem_epmd:address("p_a")), element(3, terrain_lab_netem_epmd:address("p_a")),
                    element(4, terrain_lab_netem_epmd:address("p_a"))},
    ?assertEqual(lists:flatten(io_lib:format("[{ip,{127,~b,~b,~b}}]", [A1, B1, C1])), Source),
    %% the native proxy where it was built (it is, in this build), the Erlang proxies on request
    {ok, Program} = terrain_lab_netem_native:executable(),
    ?assertEqual(["-terrain_netem_proxy", "native", Program], Proxy),
    ?assert(filelib:is_regular(Program)),
    true = os:putenv("TERRAIN_NETEM_PROXY", "erlang"),
    try
        ?assertMatch([_, _, _, _, _, _, _, "-terrain_netem_proxy", "erlang"], terrain_lab_netem:vm_args(Spec, "p_", a))
    after
        os:unsetenv("TERRAIN_NETEM_PROXY")
    end,
    ?assertEqual({ok, #{"p_b" => #{latency => 200, jitter => 50},
                        "p_c" => #{latency => 1000, bandwidth => 10000000},
                        "p_d" => #{latency => 5000}}},
                 terrain_lab_netem_epmd:decode_links(Text)),
    ?assert(terrain_lab_netem:enabled(Spec)),
    ?assertEqual([#{level => <<"cluster">>, latency_us => 5000, jitter_us => null, bandwidth_bytes_per_s => null},
                  #{level => <<"s1">>, latency_us => 1000, jitter_us => null, bandwidth_bytes_per_s => 10000000},
                  #{level => <<"s1/r1">>, latency_us => 200, jitter_us => 50, bandwidth_bytes_per_s => null},
                  #{level => <<"s2">>, latency_us => null, jitter_us => null, bandwidth_bytes_per_s => null}],
                 terrain_lab_netem:level_records(Spec)).

a_spec_without_link_options_is_not_emulated_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, c, #{}}, {group, g, #{}, [{node, a, #{}}]}], undefined),
    ?assertNot(terrain_lab_netem:enabled(Spec)).

bad_arguments_are_refused_before_any_remote_call_test() ->
    ?assertEqual({error, {netem, {bad_nodes, []}}}, terrain_lab_netem:partition([], [b@h])),
    ?assertEqual({error, {netem, {overlapping, [a@h]}}}, terrain_lab_netem:partition([a@h, b@h], [a@h])),
    ?assertEqual({error, {netem, {bad_option, timeout, 0}}}, terrain_lab_netem:partition([a@h], [b@h], #{timeout => 0})),
    ?assertEqual({error, {netem, {unknown_option, colour}}}, terrain_lab_netem:partition([a@h], [b@h], #{colour => red})),
    Message = lists:flatten(terrain_lab:format_error({netem, {overlapping, [a@h]}})),
    ?assertEqual("cannot partition a node from itself: a@h on both sides", Message).

example_specs_are_emulated_test() ->
    Root = filename:join(lists:sublist(filename:split(filename:dirname(code:which(terrain_lab_spec))),
                                       length(filename:split(filename:dirname(code:which(terrain_lab_spec)))) - 5)),
    {ok, Wan} = terrain_lab_spec:read(filename:join([Root, "examples", "wan.cluster"])),
    ?assert(terrain_lab_netem:enabled(Wan)),
    ?assertEqual(#{latency => 60000, jitter => 5000, bandwidth => 2000000}, terrain_lab_spec:link(Wan, p1, t4)),
    ?assertEqual(#{latency => 50}, terrain_lab_spec:link(Wan, t3, t4)),
    {ok, Demo} = terrain_lab_spec:read(filename:join([Root, "examples", "demo.cluster"])),
    ?assert(terrain_lab_netem:enabled(Demo)),
    %% the shallower hierarchy of docs/COLLECTIVES.md: 12 nodes, 10 ms / 1 ms / 100 us one way
    {ok, Shallow} = terrain_lab_spec:read(filename:join([Root, "examples", "paths_shallow.cluster"])),
    ?assertEqual(12, length(terrain_lab_spec:node_names(Shallow))),
    ?assertEqual([#{latency => 100}, #{latency => 1000}, #{latency => 10000}],
                 [terrain_lab_spec:link(Shallow, s1r1n1, N) || N <- [s1r1n3, s1r2n1, s2r2n3]]).
