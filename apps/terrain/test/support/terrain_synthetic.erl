%% @doc Synthetic latency matrices with a known hierarchy, for the tests and the
%% benchmark of topology discovery.
%%
%% A hierarchy of `Shape' = [5, 10, 20] has 5 top clusters of 10 clusters of 20 nodes
%% (1,000 nodes). The round trip between two nodes is the height of their lowest common
%% cluster (`Heights', root first, e.g. [8000, 1000, 100] µs) times a lognormal jitter
%% exp(σZ), Z standard normal, the same value in both directions; a fraction of the
%% pairs is then multiplied by a factor (outliers). Randomness comes only from the
%% `seed' option (rand's exsss algorithm).
-module(terrain_synthetic).

-export([hierarchy/1, truth/1, matrix/1]).

-type options() :: #{shape := [pos_integer()],       % children per level, root first
                     heights := [number()],          % round trip of each level, root first
                     jitter => float(),              % σ of the lognormal jitter (default 0.1)
                     inflate => {float(), number()}, % {fraction of pairs, factor} (default {0.0, 1})
                     seed => integer()}.             % default 1

%% @doc A latency matrix (as terrain_discovery:read_latency/1 returns) and its true tree.
-spec hierarchy(options()) -> {terrain_discovery:latency(), terrain_topology:tree()}.
hierarchy(Options) ->
    {N, Rows} = rows(Options),
    Nodes = [node_name(I) || I <- lists:seq(0, N - 1)],
    Latency = #{nodes => Nodes, stats => #{median => Rows, min => Rows, mean => Rows, p95 => Rows}},
    {Latency, truth(Options)}.

%% @doc Only the symmetric matrix, as terrain_linkage:matrix().
-spec matrix(options()) -> terrain_linkage:matrix().
matrix(Options) ->
    {_, Rows} = rows(Options),
    terrain_linkage:from_rows(Rows).

%% @doc The true tree of a hierarchy.
-spec truth(options()) -> terrain_topology:tree().
truth(#{shape := Shape}) ->
    {Tree, _} = subtree(Shape, 0, "t"),
    Tree.

subtree([], Next, _Name) ->
    {{node, node_name(Next)}, Next + 1};
subtree([K | Rest], Next, Name) ->
    {Children, Next1} = lists:mapfoldl(fun(I, Acc) -> subtree(Rest, Acc, Name ++ "_" ++ integer_to_list(I)) end,
                                       Next, lists:seq(1, K)),
    {{network, list_to_atom(Name), Children}, Next1}.

node_name(I) ->
    list_to_atom(lists:flatten(io_lib:format("n~4..0b", [I]))).

rows(#{shape := Shape, heights := Heights} = Options) ->
    Sigma = maps:get(jitter, Options, 0.1),
    {Fraction, Factor} = maps:get(inflate, Options, {0.0, 1}),
    N = lists:foldl(fun(K, Acc) -> K * Acc end, 1, Shape),
    %% the size of a cluster at each depth: [200, 20, 1] for [5, 10, 20]
    Sizes = tl(lists:foldr(fun(K, [S | _] = Acc) -> [K * S | Acc] end, [1], Shape)),
    Level = fun(I, J) -> level(I, J, Sizes, Heights) end,
    State0 = rand:seed_s(exsss, maps:get(seed, Options, 1)),
    {Upper, _} = lists:mapfoldl(
                   fun(I, S0) ->
                           lists:mapfoldl(fun(J, S) ->
                                                  {Z, S1} = rand:normal_s(S),
                                                  {U, S2} = rand:uniform_s(S1),
                                                  V = Level(I, J) * math:exp(Sigma * Z),
                                                  {case U < Fraction of true -> V * Factor; false -> V end, S2}
                                          end, S0, lists:seq(I + 1, N - 1))
                   end, State0, lists:seq(0, N - 1)),
    UpperT = list_to_tuple([list_to_tuple(R) || R <- Upper]),
    Get = fun(I, J) when I < J -> element(J - I, element(I + 1, UpperT));
             (I, J) when I > J -> element(I - J, element(J + 1, UpperT));
             (_, _) -> 0.0
          end,
    {N, [[Get(I, J) || J <- lists:seq(0, N - 1)] || I <- lists:seq(0, N - 1)]}.

%% The height of the lowest common cluster: the first depth where I and J part.
level(I, J, [S | Sizes], [H | Heights]) ->
    case I div S =:= J div S of
        true -> level(I, J, Sizes, Heights);
        false -> H
    end.
