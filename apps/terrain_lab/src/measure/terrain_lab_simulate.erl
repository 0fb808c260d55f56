%% @private
%% @doc `terrain topology simulate': tree-guided probing (terrain_lab_tree_probe, the
%% code `terrain probe --strategy tree' runs) against a latency model instead of VMs,
%% scored against the model's own tree (docs/TOPOLOGY_DISCOVERY.md, "Simulation").
%%
%% == The model ==
%% A hierarchy of groups, from `shape' (children per level, top-down: `[10, 10, 10,
%% 10]' is 10,000 nodes) with one-way `latencies' per level, or from a cluster spec
%% (its groups' `latency', possibly uneven group sizes). The round trip of a pair is
%% twice the one-way latency of its lowest common group, times a jitter exp(noise·Z)
%% per measurement (Z standard normal; multiplicative, lognormal); a fraction
%% `outliers' of the pairs (each pair both ways) is inflated by a factor drawn
%% uniformly from [3, 20], as congestion inflated round trips on RELEASE D3.5's
%% Athos cluster. Every random draw comes from `seed' and the pair, so a run is
%% repeatable.
-module(terrain_lab_simulate).

%% API
-export([run/1,
         guard/2,
         shape_model/2,
         spec_model/1,
         format_error/1]).

-export_type([model/0, options/0, report/0]).

-opaque model() :: #{paths := #{node() => tuple()},       % per node: its groups from the top, as ids
                     latency := #{tuple() => number()},   % one-way µs by the lowest common group's id
                     truth := terrain:topology_tree(),
                     nodes := [node()],
                     description := binary()}.

-type options() :: #{model := model(),
                     noise => number(),          % σ of the lognormal jitter per measurement (default 0.1)
                     outliers => number(),       % fraction of pairs inflated 3–20× (default 0.0)
                     seed => integer(),          % default 1
                     insert => terrain:insert_options(),
                     progress => fun((map()) -> any()) | none}.

-type report() :: #{nodes := non_neg_integer(),
                    pairs_measured := non_neg_integer(),
                    pairs_total := non_neg_integer(),
                    fraction_measured := float(),
                    clade_recall := float(),
                    clade_precision := float(),
                    levels := [map()],
                    unplaced := non_neg_integer(),
                    reinserted := non_neg_integer(),
                    waves := non_neg_integer(),
                    seconds := float(),          % wall clock of the probe and its scoring
                    cpu_seconds := float(),      % CPU time of this VM meanwhile
                    peak_memory_mb := number() | null,
                    model := binary(),
                    noise := number(),
                    outliers := number(),
                    seed := integer()}.

%% The memory of a model's node in the probe and its scoring (10,000 nodes peaked
%% at 269 MB of the VM's VmHWM, docs/BENCHMARKS.md "Simulated: 10,000 nodes").
-define(BYTES_PER_NODE, 25000).

%%--------------------------------------------------------------------
%% API

%% @doc Refuses a model of `Nodes' nodes before anything is made (the node names
%% are atoms): more memory than the guard allows (`Option' named in the message), or
%% more nodes than terrain makes names for (100,000).
-spec guard(string(), non_neg_integer()) -> ok | {error, {guard, term()}}.
guard(Option, Nodes) ->
    case terrain_lab_guard:memory([{Option, Nodes, ?BYTES_PER_NODE}]) of
        ok -> terrain_lab_guard:node_count(Nodes);
        {error, _} = Error -> Error
    end.

%% @doc A model of `prod(Shape)' nodes: `Shape' children per level from the top,
%% `OneWay' µs per level (as long as `Shape').
-spec shape_model([pos_integer(), ...], [number(), ...]) -> {ok, model()} | {error, {simulate, term()}}.
shape_model(Shape, OneWay) when length(Shape) =/= length(OneWay) ->
    {error, {simulate, {latencies, length(Shape), length(OneWay)}}};
shape_model(Shape, OneWay) ->
    N = lists:foldl(fun(K, A) -> K * A end, 1, Shape),
    Width = length(integer_to_list(N - 1)),
    Nodes = [list_to_atom(lists:flatten(io_lib:format("n~*..0b", [Width, I]))) || I <- lists:seq(0, N - 1)],
    %% the digits of a node's index in the mixed radix of the shape are its groups
    Sizes = tl(lists:foldr(fun(K, [S | _] = Acc) -> [K * S | Acc] end, [1], Shape)),
    Paths = maps:from_list([{X, list_to_tuple(group_ids(I, Sizes, Shape))}
                            || {I, X} <- lists:zip(lists:seq(0, N - 1), Nodes)]),
    Latency = maps:from_list([{list_to_tuple(lists:duplicate(D, x)), L}
                              || {D, L} <- lists:zip(lists:seq(0, length(OneWay) - 1), OneWay)]),
    Model = #{paths => Paths, latency => {by_depth, Latency}, nodes => Nodes,
              truth => shape_truth(Shape, OneWay, Nodes),
              description => iolist_to_binary(["shape ", lists:join("x", [integer_to_list(K) || K <- Shape]),
                                               ", one way ", lists:join(" / ", [us(L) || L <- OneWay])])},
    {ok, Model}.

%% @doc A model of a cluster spec: its nodes (by their spec names) and groups; every
%% group and the cluster need a `latency'.
-spec spec_model(terrain_lab_spec:spec()) -> {ok, model()} | {error, {simulate, term()}}.
spec_model(Spec) ->
    Truth = terrain_lab_spec:topology(Spec, fun(N) -> N end),
    case [L || {_, L} <- terrain_lab_spec:levels(Spec), not is_map_key(latency, L)] of
        [_ | _] ->
            {error, {simulate, spec_without_latency}};
        [] ->
            Levels = terrain_lab_spec:levels(Spec),
            Latency = maps:from_list([{case Label of cluster -> {}; P -> list_to_tuple(P) end, maps:get(latency, O)}
                                      || {Label, O} <- Levels]),
            Paths = maps:from_list([{N, list_to_tuple(P)} || #{name := N, path := P} <- terrain_lab_spec:nodes(Spec)]),
            {ok, #{paths => Paths, latency => {by_group, Latency}, nodes => terrain_lab_spec:node_names(Spec),
                   truth => Truth,
                   description => iolist_to_binary(io_lib:format("spec ~ts (~b nodes, ~b groups)",
                                                                 [maps:get(name, Spec), map_size(Paths),
                                                                  length(Levels) - 1]))}}
    end.

%% @doc Runs the tree probe against the model and scores its tree.
-spec run(options()) -> {ok, report()}.
run(#{model := #{nodes := Nodes, truth := Truth, description := Description} = Model} = Opts) ->
    Noise = maps:get(noise, Opts, 0.1),
    Outliers = maps:get(outliers, Opts, 0.0),
    Seed = maps:get(seed, Opts, 1),
    Measure = measure(Model, Noise, Outliers, Seed),
    T0 = erlang:monotonic_time(microsecond),
    {Cpu0, _} = erlang:statistics(runtime),
    Order = shuffle(Nodes, Seed),
    Result = terrain_lab_tree_probe:build(Order, Measure, #{insert => maps:get(insert, Opts, #{}),
                                                            progress => maps:get(progress, Opts, none)}),
    #{tree := Found, pairs := Pairs, unplaced := Unplaced, reinserted := Reinserted, waves := Waves} = Result,
    Seconds = (erlang:monotonic_time(microsecond) - T0) / 1.0e6,
    {Cpu1, _} = erlang:statistics(runtime),
    N = length(Nodes),
    Score = case Unplaced of
                [] -> terrain:compare_topologies(Found, Truth);
                _ -> {ok, #{clade_recall => 0.0, clade_precision => 0.0, levels => []}}
            end,
    {ok, #{clade_recall := Recall, clade_precision := Precision, levels := Levels}} = Score,
    {ok, #{nodes => N, pairs_measured => map_size(Pairs), pairs_total => N * (N - 1),
           fraction_measured => map_size(Pairs) / max(1, N * (N - 1)),
           clade_recall => Recall, clade_precision => Precision, levels => Levels,
           unplaced => length(Unplaced), reinserted => Reinserted, waves => Waves,
           seconds => Seconds, cpu_seconds => (Cpu1 - Cpu0) / 1000, peak_memory_mb => peak_memory_mb(),
           model => Description, noise => Noise,
           outliers => Outliers, seed => Seed}}.

%% @doc A sentence for an error of this module.
-spec format_error({simulate, term()}) -> iolist().
format_error({simulate, {latencies, Levels, Given}}) ->
    io_lib:format("--latencies gives ~b value~s for a shape of ~b level~s: give one one-way latency (us) per level",
                  [Given, plural(Given), Levels, plural(Levels)]);
format_error({simulate, spec_without_latency}) ->
    "the spec must give a 'latency' (one way, us) to the cluster and to every group to be simulated".

plural(1) -> "";
plural(_) -> "s".

%%--------------------------------------------------------------------
%% The model

group_ids(I, Sizes, Shape) ->
    [I div S || {S, _} <- lists:zip(Sizes, Shape)].

shape_truth(Shape, OneWay, Nodes) ->
    {Tree, []} = shape_truth(Shape, OneWay, Nodes, "g"),
    Tree.

shape_truth([], [], [X | Rest], _Name) ->
    {{node, X}, Rest};
shape_truth([K | Shape], [L | OneWay], Nodes, Name) ->
    Child = fun(I, Acc) -> shape_truth(Shape, OneWay, Acc, Name ++ "_" ++ integer_to_list(I)) end,
    {Children, Rest} = lists:mapfoldl(Child, Nodes, lists:seq(1, K)),
    {{network, list_to_atom(Name), #{height => 2 * L}, Children}, Rest}.

%% The measuring callback of a model: noise σ, fraction of outlier pairs, seed.
-spec measure(model(), number(), number(), integer()) -> terrain_lab_tree_probe:measure().
measure(#{paths := Paths, latency := Latency}, Noise, Outliers, Seed) ->
    fun(A, B) ->
            OneWay = one_way(maps:get(A, Paths), maps:get(B, Paths), Latency),
            {Z, _} = rand:normal_s(rand:seed_s(exsss, erlang:phash2({A, B, Seed}))),
            Pair = case A < B of true -> {A, B}; false -> {B, A} end,
            {U, S1} = rand:uniform_s(rand:seed_s(exsss, erlang:phash2({Pair, Seed, outlier}))),
            Factor = case U < Outliers of
                         true -> {V, _} = rand:uniform_s(S1), 3 + 17 * V;
                         false -> 1
                     end,
            {ok, 2 * OneWay * math:exp(Noise * Z) * Factor}
    end.

%% The one-way latency of the lowest common group of two paths.
one_way(PA, PB, {by_depth, Latency}) ->
    maps:get(list_to_tuple(lists:duplicate(common(PA, PB, 1), x)), Latency);
one_way(PA, PB, {by_group, Latency}) ->
    maps:get(list_to_tuple(lists:sublist(tuple_to_list(PA), common(PA, PB, 1))), Latency).

%% How many leading groups two paths share.
common(PA, PB, I) when I =< tuple_size(PA), I =< tuple_size(PB) ->
    case element(I, PA) =:= element(I, PB) of
        true -> common(PA, PB, I + 1);
        false -> I - 1
    end;
common(_, _, I) ->
    I - 1.

shuffle(List, Seed) ->
    {Keyed, _} = lists:mapfoldl(fun(X, S) -> {U, S1} = rand:uniform_s(S), {{U, X}, S1} end,
                                rand:seed_s(exsss, Seed), List),
    [X || {_, X} <- lists:sort(Keyed)].

%% The peak resident memory of this OS process (Linux: VmHWM), in MB.
peak_memory_mb() ->
    case file:read_file("/proc/self/status") of
        {ok, Status} ->
            case re:run(Status, "VmHWM:\\s+(\\d+) kB", [{capture, all_but_first, list}]) of
                {match, [Kb]} -> list_to_integer(Kb) / 1024;
                nomatch -> null
            end;
        {error, _} ->
            null
    end.

us(L) when L >= 1000 -> io_lib:format("~s ms", [float_to_list(L / 1000, [{decimals, 3}, compact])]);
us(L) when is_integer(L) -> io_lib:format("~s us", [integer_to_list(L)]);
us(L) -> io_lib:format("~s us", [float_to_list(L, [{decimals, 3}, compact])]).
