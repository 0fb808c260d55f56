%% Benchmark: collective operations shaped by the topology (docs/COLLECTIVES.md).
%%
%% 1. Goals on examples/paths.cluster (2 sites x 2 racks x 4 nodes; one way 20 ms,
%%    2 ms, 200 us), allreduce at 8 B and 64 KiB, every algorithm side by side in one
%%    cluster: hierarchical against binomial and recursive_doubling under random rank
%%    orders (goal >= 2x), against the best topology-blind algorithm under block order
%%    (goal <= 1.1x its time), against its lower bound at 8 B (goal <= 1.3x).
%% 2. flat against hierarchical with 1 and 4 members per node (16 and 64 members):
%%    flat's root handles every message.
%% 3. The WAN curve (Bjørndalen et al., PATHS, §3): examples/paths_wan.cluster, two
%%    sites of 4 nodes joined by 20 ms one way and 1 MB/s per connection, 4 members per
%%    node; time against size for hierarchical (one message each way across the WAN)
%%    and recursive doubling and flat in block order (several messages on each
%%    connection across the WAN: they share its bandwidth). Then with 1 member per
%%    node: the several messages cross on different connections, each with its own
%%    bandwidth (netem has no shared uplink).
%%
%% Latency-dominated comparisons (ms-scale emulated links) are robust to the CPU
%% contention of a shared machine; CPU-dominated ones (large values) are not. The
%% load average is printed before each part.
-module(bench_collective).
-export([run/0]).
%% The parts, to run one on its own: erl ... -eval 'bench_collective:wan(), halt().'
-export([goals/0, exchange_shapes/0, flat_against_hierarchical/0, wan/0, wan/3]).

-define(BLIND, [flat, binomial, recursive_doubling, ring, rabenseifner]).

run() ->
    goals(),
    exchange_shapes(),
    flat_against_hierarchical(),
    wan().

goals() ->
    load(),
    {ok, Spec} = terrain_lab:read_spec("examples/paths.cluster"),
    Options = #{spec => Spec, algorithms => [hierarchical | ?BLIND], sizes => [8, 65536], members_per_node => 1,
                rounds => 8, rank_orders => [block, random], seeds => 3},
    {ok, Doc} = terrain_lab_collective:bench(Options, fun quiet/1),
    io:put_chars(terrain_lab_collective:table(Doc)),
    #{results := Results} = Doc,
    Median = fun(A, S, O) -> hd([M || #{algorithm := A1, size_bytes := S1, rank_order := O1, median_us := M} <- Results,
                                      A1 =:= A, S1 =:= S, O1 =:= O]) end,
    io:format("~ngoals (hierarchical H; ratios of medians measured in this run):~n"),
    lists:foreach(
      fun(Size) ->
              H = Median(hierarchical, Size, block),
              [#{lower_bound_us := Bound}] = [R || #{algorithm := hierarchical, size_bytes := S} = R <- Results, S =:= Size],
              {BestTime, BestBlind} = lists:min([{Median(A, Size, block), A} || A <- ?BLIND]),
              Binomial = Median(binomial, Size, random) / H,
              Doubling = Median(recursive_doubling, Size, random) / H,
              io:format("  ~b B: binomial(random)/H = ~.2f (goal >= 2: ~s), recursive_doubling(random)/H = ~.2f "
                        "(goal >= 2: ~s)~n", [Size, Binomial, met(Binomial >= 2), Doubling, met(Doubling >= 2)]),
              io:format("  ~b B: H/best blind in block order (~s, ~.1f ms) = ~.2f (goal <= 1.1: ~s); "
                        "H/lower bound (~.1f ms) = ~.2f~s~n",
                        [Size, BestBlind, BestTime / 1000, H / BestTime, met(H / BestTime =< 1.1), Bound / 1000,
                         H / Bound, case Size of 8 -> io_lib:format(" (goal <= 1.3: ~s)", [met(H / Bound =< 1.3)]);
                                                 _ -> "" end]),
              io:format("  ~b B: flat(block)/H = ~.2f, flat(random)/H = ~.2f~n",
                        [Size, Median(flat, Size, block) / H, Median(flat, Size, random) / H])
      end, [8, 65536]).

%% hierarchical with its leaders exchanging directly (one 20 ms crossing) and level by
%% level (2 ms, then 20 ms), alternating 3 times in one cluster, with
%% recursive_doubling under one random order beside them: docs/COLLECTIVES.md.
exchange_shapes() ->
    load(),
    {ok, Spec} = terrain_lab:read_spec("examples/paths.cluster"),
    Sizes = [8, 65536],
    Runs = terrain_lab:with_cluster(
             Spec, #{prefix => "xs_"},
             fun(Nodes) ->
                     [begin
                          Base = #{spec => Spec, sizes => Sizes, members_per_node => 1, rounds => 8, seeds => 1},
                          {ok, #{results := H}} =
                              terrain_lab_collective:measure(Base#{algorithms => [hierarchical], rank_orders => [block],
                                                                   exchange => Shape}, Nodes, fun quiet/1),
                          {ok, #{results := B}} =
                              terrain_lab_collective:measure(Base#{algorithms => [recursive_doubling],
                                                                   rank_orders => [random]}, Nodes, fun quiet/1),
                          {Shape, H ++ B}
                      end || _ <- [1, 2, 3], Shape <- [direct, levels]]
             end),
    io:format("~nhierarchical by exchange shape, 3 alternations in one cluster (median ms; RD = recursive_doubling, "
              "one random order):~n~8s ~8s ~10s ~10s ~10s ~10s~n", ["shape", "bytes", "H", "bound", "RD", "RD/H"]),
    [io:format("~8s ~8b ~10.1f ~10.1f ~10.1f ~10.2f~n", [Shape, S, H / 1000, Bound / 1000, RD / 1000, RD / H])
     || {Shape, R} <- Runs, S <- Sizes,
        #{algorithm := hierarchical, size_bytes := S1, median_us := H, lower_bound_us := Bound} <- R, S1 =:= S,
        #{algorithm := recursive_doubling, size_bytes := S2, median_us := RD} <- R, S2 =:= S],
    ok.

flat_against_hierarchical() ->
    load(),
    {ok, Spec} = terrain_lab:read_spec("examples/paths.cluster"),
    io:format("~nflat against hierarchical, block order, by members per node:~n"),
    io:format("~10s ~8s ~12s ~12s ~8s~n", ["members", "bytes", "flat_ms", "hier_ms", "ratio"]),
    terrain_lab:with_cluster(
      Spec, #{prefix => "fh_"},
      fun(Nodes) ->
              lists:foreach(
                fun(PerNode) ->
                        {ok, #{results := R, members := Members}} =
                            terrain_lab_collective:measure(#{spec => Spec, algorithms => [flat, hierarchical],
                                                             sizes => [8, 1024, 16384, 65536], members_per_node => PerNode,
                                                             rounds => 6, rank_orders => [block], seeds => 1},
                                                           Nodes, fun quiet/1),
                        [begin
                             F = hd([M || #{algorithm := flat, size_bytes := S1, median_us := M} <- R, S1 =:= S]),
                             H = hd([M || #{algorithm := hierarchical, size_bytes := S1, median_us := M} <- R, S1 =:= S]),
                             io:format("~10b ~8b ~12.1f ~12.1f ~8.2f~n", [Members, S, F / 1000, H / 1000, F / H])
                         end || S <- [8, 1024, 16384, 65536]]
                end, [1, 4])
      end).

wan() ->
    {ok, Spec} = terrain_lab:read_spec("examples/paths_wan.cluster"),
    [wan(Spec, PerNode, Sizes) || {PerNode, Sizes} <- [{4, [8, 1024, 4096, 16384, 65536, 262144]},
                                                       {1, [8, 4096, 16384, 65536]}]],
    ok.

wan(Spec, PerNode, Sizes) ->
    load(),
    {ok, #{results := R, members := Members}} =
        terrain_lab_collective:bench(#{spec => Spec, algorithms => [hierarchical, recursive_doubling, flat],
                                       sizes => Sizes, members_per_node => PerNode, rounds => 6,
                                       rank_orders => [block], seeds => 1}, fun quiet/1),
    io:format("~nWAN (20 ms one way, 1 MB/s per connection), ~b members, block order, median ms:~n", [Members]),
    io:format("~10s ~14s ~20s ~10s ~10s ~10s~n", ["bytes", "hierarchical", "recursive_doubling", "flat", "rd/hier",
                                                 "flat/hier"]),
    [begin
         T = fun(A) -> hd([M || #{algorithm := A1, size_bytes := S1, median_us := M} <- R, A1 =:= A, S1 =:= S]) end,
         io:format("~10b ~14.1f ~20.1f ~10.1f ~10.2f ~10.2f~n",
                   [S, T(hierarchical) / 1000, T(recursive_doubling) / 1000, T(flat) / 1000,
                    T(recursive_doubling) / T(hierarchical), T(flat) / T(hierarchical)])
     end || S <- Sizes].

met(true) -> "met";
met(false) -> "MISSED".

quiet(_) -> ok.

load() ->
    {ok, Load} = file:read_file("/proc/loadavg"),
    [L1, L5, L15 | _] = string:lexemes(binary_to_list(Load), " "),
    io:format("~nload average (1, 5, 15 min): ~s ~s ~s on ~b cores~n",
              [L1, L5, L15, erlang:system_info(logical_processors_available)]).
