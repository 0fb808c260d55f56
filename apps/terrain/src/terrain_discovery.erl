%% @private
%% @doc Topology discovery: from a latency matrix (`latency.json', written by
%% `terrain probe') to a topology term with measured heights, with OTP alone, so a
%% production node can rediscover its own topology (RELEASE D3.5, §4.3–4.5).
%%
%% == Pipeline ==
%% <ol>
%% <li><b>Statistic</b>: one of the per-pair matrices of `latency.json' — `min'
%%     (default), `median', `mean' or `p95' of the per-exchange round-trip time.
%%     Queueing and scheduling only ever add time, so the fastest of thousands of
%%     exchanges estimates the path itself; the median mixes in the contention of the
%%     moment (on a loaded machine a 0.1 ms path showed medians of 6 ms). Choose
%%     `median' or `mean' to see congestion, as RELEASE D3.5 did on Athos.</li>
%% <li><b>Symmetrisation</b>: d(a, b) combines the round trip measured from a with the
%%     one measured from b: `min' (default: noise only ever adds time, so the smaller
%%     is the better estimate of the path), `mean' or `max'. A missing value (`null')
%%     takes the other direction's. A pair missing both ways (a partial matrix, e.g.
%%     from the tree probe or a budget that ended) gets the minimax estimate over
%%     the measured pairs (see minimax_fill/2); the result counts them (`missing')
%%     and names the nodes whose place rests on estimates only (`undetermined': no
%%     measured round trip to another member of the cluster they were put in).</li>
%% <li><b>Outliers</b> (`repair', the default): a first pass clusters with `average'
%%     linkage and automatic α. An inflated pair weighs 1/(|A||B|) in the mean
%%     distance between clusters A and B, so a few outliers cannot move a cluster,
%%     whereas one of them decides a complete-linkage distance (RELEASE D3.5's weakness:
%%     1% of pairs ×5 turns a clean 1,000-node hierarchy into noise). In that tree the
%%     round trips whose lowest common cluster is C all cross the same level; one more
%%     than `outlier_factor' (3) times their median is an outlier and is replaced by
%%     the median. Only upwards: delays only add, and a value far below its level's
%%     median is structure the first pass missed, not noise. `keep' skips this.</li>
%% <li><b>Clustering</b>: RELEASE D3.5's α algorithm ({@link terrain_alpha}) on the
%%     repaired matrix with the chosen linkage: `average' by default, `complete' as in
%%     RELEASE D3.5, or `single'. Average linkage separates levels that are only twice as
%%     far apart under 10% jitter, where complete linkage's δ — set by the closest
%%     pair, then by the largest of many jittered values — leaves no range of α that
%%     holds (docs/TOPOLOGY_DISCOVERY.md). `alpha' a number runs the algorithm with
%%     that α; `auto' (default) chooses α per level.</li>
%% <li><b>The topology term</b>: `{network, Name, #{height => Us}, Children}' and
%%     `{node, Node}', names `c' (the root), `c1', `c1_2', … by position, children in
%%     the order of the matrix. A height is the cluster's diameter in µs of round trip,
%%     the largest round trip between two of its nodes after the repair, as in
%%     RELEASE D3.5's figures (with `complete' linkage this is the α algorithm's δ); never
%%     below a child's.</li>
%% </ol>
%%
%% ```
%% %% users call it through the facade:
%% {ok, Latency} = terrain:read_latency("runs/20261121T160258Z/latency.json"),
%% {ok, #{topology := Tree} = Found} = terrain:discover(Latency, #{}),
%% {ok, Text} = terrain:render_topology(Found, text),
%% io:put_chars(Text).
%% '''
-module(terrain_discovery).

%% API
-export([read_latency/1,
         discover/2,
         topology/1,
         render/2,
         repair/3,
         validate_options/1,
         format_error/1]).

%% exports_not_used: Called by the unit tests, properties and bench_discovery (the repair step and the
%% tree of a result, checked on their own).
-ignore_xref([{repair, 3}, {topology, 1}]).

-export_type([options/0, latency/0, result/0, error_reason/0]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(LATENCY_FORMAT, ?TERRAIN_FORMAT_LATENCY).
-define(SAMPLE, 50000).
-define(MAX_NODES, 100000).      % a matrix's node names become atoms: at most this many
-define(MAX_ROUND_TRIP, 1.0e300). % µs; α × a distance (α up to 4, sums of heights) stays a finite float

-type options() :: terrain:discovery_options().

-type latency() :: terrain:latency().

-type result() :: terrain:discovery().

-type error_reason() :: {discovery, term()}.

-define(DEFAULTS, #{statistic => min, symmetrise => min, linkage => average, alpha => auto,
                    outliers => repair, outlier_factor => 3, alpha_range => {1, 4}, alpha_steps => 31,
                    alpha_min_plateau => 1.2, strict => true}).

%%--------------------------------------------------------------------
%% API

%% @doc Reads a `latency.json' file (format `terrain.latency/1').
-spec read_latency(file:filename()) -> {ok, latency()} | {error, error_reason() | term()}.
read_latency(File) ->
    case terrain_json:read_file(File) of
        {ok, Doc} -> latency_from_json(Doc, File);
        {error, _} = Error -> Error
    end.

%% @doc Discovers the topology of a latency matrix.
-spec discover(latency(), options()) -> {ok, result()} | {error, error_reason()}.
discover(#{nodes := Nodes} = Latency, Options) ->
    case validate_options(Options) of
        {ok, Opts} -> clustered(Nodes, matrix(Latency, Opts), Opts, noise(Latency));
        {error, _} = Error -> Error
    end.

%% The last step of discover/2: cluster the matrix, if there is one; say how many
%% pairs were missing and which nodes the measured pairs leave undetermined.
clustered(Nodes, {ok, Matrix, #{missing := 0}}, Opts, Noise) ->
    {AlphaTree, Result} = cluster(Nodes, Matrix, Opts, Noise),
    _ = AlphaTree,
    {ok, Result#{missing => 0, undetermined => []}};
clustered(Nodes, {ok, Matrix, #{missing := Missing, measured := Measured}}, Opts, Noise) ->
    {AlphaTree, Result} = cluster(Nodes, Matrix, Opts, Noise),
    {ok, Result#{missing => Missing, undetermined => undetermined(AlphaTree, Measured, Nodes)}};
clustered(_Nodes, {error, _} = Error, _Opts, _Noise) -> Error.

%% @doc The topology term of a result.
-spec topology(result()) -> terrain_topology:tree().
topology(#{topology := Tree}) ->
    Tree.

%% @doc Renders a result: `term', `text', `dot', `newick' as `terrain_topology'
%% renders the topology; `json' is `terrain.topology/1' with a `discovery' object
%% saying how the tree was found.
-spec render(result(), terrain_topology:format()) -> iodata().
render(#{topology := Tree} = Result, Format) ->
    {ok, T} = terrain_topology:new(Tree),
    case Format of
        json ->
            {ok, Doc} = terrain_json:decode(terrain_topology:render(T, json)),
            [terrain_json:encode(Doc#{<<"discovery">> => discovery_json(Result)}, #{pretty => true}), $\n];
        _ ->
            terrain_topology:render(T, Format)
    end.

%% @doc The symmetric matrix to cluster: the chosen statistic, symmetrised.
-spec matrix(latency(), options()) ->
          {ok, terrain_linkage:matrix(), #{missing := non_neg_integer(), measured := tuple()}} | {error, error_reason()}.
matrix(#{nodes := Nodes, stats := Stats}, Options) ->
    #{statistic := Statistic, symmetrise := Symmetrise} = maps:merge(?DEFAULTS, Options),
    N = length(Nodes),
    case maps:find(Statistic, Stats) of
        {ok, Rows} when length(Rows) =:= N ->
            case lists:all(fun(Row) -> is_list(Row) andalso length(Row) =:= N end, Rows) of
                true -> symmetric(Nodes, list_to_tuple([list_to_tuple(R) || R <- Rows]), Symmetrise, Statistic);
                false -> {error, {discovery, {not_square, Statistic, N}}}
            end;
        {ok, _} ->
            {error, {discovery, {not_square, Statistic, N}}};
        error ->
            {error, {discovery, {no_statistic, Statistic}}}
    end.

%% @doc Repairs outliers against a tree of the matrix's points: for every cluster of
%% `Tree', the distances whose lowest common cluster it is are one population; a
%% distance more than `Factor' times its population's median is set to the median
%% (values below the median are kept: delays only add). A population of more than 50,000 pairs is represented by a sample for
%% its median: about 50,000 pairs {I, J}, I &lt; J, those with (I n + J) mod s = 0.
%% Returns the repaired copy and the number of distances changed.
-spec repair(terrain_linkage:matrix(), terrain_alpha:tree(), number()) -> {terrain_linkage:matrix(), non_neg_integer()}.
repair(Matrix, Tree, Factor) ->
    Copy = terrain_linkage:copy(Matrix),
    {_, Count} = repair_tree(Copy, Tree, float(Factor)),
    {Copy, Count}.

%% @doc The topology term of an α tree whose point i is `Nodes''s i-th node.
-spec to_topology(terrain_alpha:tree(), [node()]) -> terrain_topology:tree().
to_topology({point, I}, [_ | _] = Nodes) ->
    {network, c, #{height => 0.0}, [{node, lists:nth(I + 1, Nodes)}]};
to_topology(Tree, Nodes) ->
    term(Tree, list_to_tuple(Nodes), "c").

%% @doc Validates options and fills in the defaults.
-spec validate_options(term()) -> {ok, options()} | {error, error_reason()}.
validate_options(Options) when is_map(Options) ->
    try
        maps:foreach(fun check_option/2, Options),
        {ok, maps:merge(?DEFAULTS, Options)}
    catch
        throw:Reason -> {error, {discovery, Reason}}
    end;
validate_options(Options) ->
    {error, {discovery, {bad_options, Options}}}.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({discovery, {bad_option, Key, Value}}) ->
    io_lib:format("bad value for option ~0tp: ~0tp (~ts)", [Key, Value, option_help(Key)]);
format_error({discovery, {unknown_option, Key}}) ->
    io_lib:format("unknown option ~0tp (known: ~ts)",
                  [Key, lists:join(", ", [atom_to_list(K) || K <- lists:sort(maps:keys(?DEFAULTS))])]);
format_error({discovery, {bad_options, Options}}) ->
    io_lib:format("options must be a map, got ~0tP", [Options, 10]);
format_error({discovery, {no_statistic, Statistic}}) ->
    io_lib:format("the latency matrix has no '~ts' statistic", [Statistic]);
format_error({discovery, {not_square, Statistic, N}}) ->
    io_lib:format("the '~ts' matrix is not ~b x ~b, one row and column per node", [Statistic, N, N]);
format_error({discovery, {bad_value, A, B, Value}}) ->
    io_lib:format("round trip ~0tp -> ~0tp is ~0tP: expected a number of microseconds from 0 to 1e300, or null",
                  [A, B, Value, 6]);
format_error({discovery, {latency, File, Why}}) ->
    io_lib:format("~ts: not a latency matrix: ~ts", [File, latency_why(Why)]).

%%--------------------------------------------------------------------
%% Options

check_option(statistic, V) when V =:= min; V =:= median; V =:= mean; V =:= p95 -> ok;
check_option(symmetrise, V) when V =:= min; V =:= mean; V =:= max -> ok;
check_option(linkage, V) when V =:= complete; V =:= average; V =:= single -> ok;
check_option(alpha, auto) -> ok;
check_option(alpha, V) when is_number(V), V >= 1 -> ok;
check_option(outliers, V) when V =:= repair; V =:= keep -> ok;
check_option(outlier_factor, V) when is_number(V), V > 1 -> ok;
check_option(alpha_range, {Lo, Hi} = V) when is_number(Lo), is_number(Hi), Lo >= 1, Hi > Lo -> _ = V, ok;
check_option(alpha_steps, V) when is_integer(V), V >= 2 -> ok;
check_option(alpha_min_plateau, V) when is_number(V), V > 1 -> ok;
check_option(strict, V) when is_boolean(V) -> ok;
check_option(Key, Value) ->
    case maps:is_key(Key, ?DEFAULTS) of
        true -> throw({bad_option, Key, Value});
        false -> throw({unknown_option, Key})
    end.

option_help(statistic) -> "min, median, mean or p95";
option_help(symmetrise) -> "min, mean or max";
option_help(linkage) -> "complete, average or single";
option_help(alpha) -> "auto or a number >= 1";
option_help(outliers) -> "repair or keep";
option_help(outlier_factor) -> "a number > 1";
option_help(alpha_range) -> "{Lo, Hi} with 1 =< Lo < Hi";
option_help(alpha_steps) -> "an integer >= 2";
option_help(alpha_min_plateau) -> "a number > 1";
option_help(strict) -> "true or false";
option_help(_) -> "".

%%--------------------------------------------------------------------
%% Reading latency.json

latency_from_json(#{<<"format">> := ?LATENCY_FORMAT, <<"nodes">> := Names}, File)
  when is_list(Names), length(Names) > ?MAX_NODES ->
    {error, {discovery, {latency, File, {too_many_nodes, length(Names)}}}};   % counted before any atom
latency_from_json(#{<<"format">> := ?LATENCY_FORMAT, <<"nodes">> := Names, <<"stats">> := Stats} = Doc, File)
  when is_list(Names), is_map(Stats) ->
    case Names =/= [] andalso lists:all(fun node_name/1, Names) andalso length(lists:usort(Names)) =:= length(Names) of
        true ->
            Matrices = maps:from_list([{binary_to_atom(K), V} || {K, V} <- maps:to_list(Stats),
                                                                 lists:member(K, [<<"min">>, <<"median">>, <<"mean">>,
                                                                                  <<"p95">>, <<"stddev">>])]),
            Extra = maps:from_list([{binary_to_atom(K), V} || {K, V} <- maps:to_list(Doc),
                                                              lists:member(K, [<<"strategy">>, <<"batches">>,
                                                                               <<"messages">>, <<"payload_bytes">>,
                                                                               <<"started_at">>, <<"unit">>])]),
            {ok, Extra#{nodes => [binary_to_atom(N) || N <- Names], stats => Matrices}};
        false ->
            {error, {discovery, {latency, File, bad_nodes}}}
    end;
latency_from_json(#{<<"format">> := ?LATENCY_FORMAT}, File) ->
    {error, {discovery, {latency, File, missing_fields}}};
latency_from_json(#{<<"format">> := Other}, File) ->
    {error, {discovery, {latency, File, {format, Other}}}};
latency_from_json(_, File) ->
    {error, {discovery, {latency, File, {format, none}}}}.

latency_why(bad_nodes) -> "'nodes' must be a non-empty list of distinct node names of at most 255 characters";
latency_why({too_many_nodes, N}) ->
    io_lib:format("it names ~b nodes, more than the ~b terrain reads (node names become atoms)", [N, ?MAX_NODES]);
latency_why(missing_fields) -> "it needs 'nodes' (a list) and 'stats' (an object of matrices)";
latency_why({format, none}) -> "no \"format\" field (expected \"terrain.latency/1\")";
latency_why({format, F}) -> io_lib:format("unknown format ~0tp (expected \"terrain.latency/1\")", [F]).

%% A node name becomes an atom: a string of 1 to 255 characters.
node_name(Name) ->
    is_binary(Name) andalso Name =/= <<>> andalso
        case unicode:characters_to_list(Name) of
            Chars when is_list(Chars) -> length(Chars) =< 255;
            _ -> false
        end.

%%--------------------------------------------------------------------
%% The matrix

symmetric(Nodes, Rows, How, _Statistic) ->
    N = tuple_size(Rows),
    Names = list_to_tuple(Nodes),
    try
        Combined = list_to_tuple([list_to_tuple([case I =:= J of
                                                     true -> 0.0;
                                                     false -> combine(How, value(Rows, Names, I, J),
                                                                      value(Rows, Names, J, I))
                                                 end || J <- lists:seq(0, N - 1)])
                                  || I <- lists:seq(0, N - 1)]),
        Missing = length([x || I <- lists:seq(0, N - 1), J <- lists:seq(I + 1, N - 1),
                               element(J + 1, element(I + 1, Combined)) =:= null]),
        Filled = case Missing of
                     0 -> Combined;
                     _ -> minimax_fill(Combined, N)
                 end,
        {ok, terrain_linkage:from_fun(N, fun(I, J) -> element(J + 1, element(I + 1, Filled)) end),
         #{missing => Missing, measured => Combined}}
    catch
        throw:Reason -> {error, {discovery, Reason}}
    end.

value(Rows, Names, I, J) ->
    case element(J + 1, element(I + 1, Rows)) of
        null -> null;
        V when is_number(V), V >= 0, V =< ?MAX_ROUND_TRIP -> float(V);
        V -> throw({bad_value, element(I + 1, Names), element(J + 1, Names), V})
    end.

combine(_How, null, null) -> null;
combine(_How, X, null) -> X;
combine(_How, null, Y) -> Y;
combine(min, X, Y) -> min(X, Y);
combine(max, X, Y) -> max(X, Y);
combine(mean, X, Y) -> (X + Y) / 2.

%% A pair measured in neither direction gets the minimax estimate: over the paths of
%% measured pairs between the two nodes, the smallest largest round trip. On an
%% ultrametric it is exact as soon as the measured pairs inside the two nodes' lowest
%% common cluster connect them (d(x, y) =< max(d(x, z), d(z, y)), with equality for
%% a z inside that cluster). Computed on the minimum spanning tree of the measured
%% pairs (Kruskal), from every node (O(n^2)). Nodes the measured pairs do not connect
%% are estimated at twice the largest round trip measured: they join at the root.
minimax_fill(Combined, N) ->
    Edges = lists:sort([{D, I, J} || I <- lists:seq(0, N - 1), J <- lists:seq(I + 1, N - 1),
                                      D <- [element(J + 1, element(I + 1, Combined))], D =/= null]),
    Far = 2 * lists:max([1.0 | [D || {D, _, _} <- Edges]]),
    Tree = kruskal(Edges, maps:from_list([{I, I} || I <- lists:seq(0, N - 1)]), #{}),
    list_to_tuple([begin
                       Row = element(I + 1, Combined),
                       Reach = widest(Tree, [{I, 0.0}], #{I => 0.0}),
                       list_to_tuple([case element(J + 1, Row) of
                                          null -> maps:get(J, Reach, Far);
                                          D -> D
                                      end || J <- lists:seq(0, N - 1)])
                   end || I <- lists:seq(0, N - 1)]).

kruskal([], _Parent, Adj) ->
    Adj;
kruskal([{D, I, J} | Rest], Parent, Adj) ->
    {RI, P1} = find(I, Parent),
    {RJ, P2} = find(J, P1),
    case RI =:= RJ of
        true -> kruskal(Rest, P2, Adj);
        false -> kruskal(Rest, P2#{RI => RJ},
                         maps:update_with(J, fun(L) -> [{I, D} | L] end, [{I, D}],
                                          maps:update_with(I, fun(L) -> [{J, D} | L] end, [{J, D}], Adj)))
    end.

find(I, Parent) ->
    case maps:get(I, Parent) of
        I -> {I, Parent};
        P -> {R, P1} = find(P, Parent), {R, P1#{I => R}}
    end.

%% The largest round trip on the tree path from the start to every node it reaches.
widest(_Tree, [], Seen) ->
    Seen;
widest(Tree, [{I, Max} | Rest], Seen) ->
    Next = [{J, max(Max, D)} || {J, D} <- maps:get(I, Tree, []), not is_map_key(J, Seen)],
    widest(Tree, Next ++ Rest, lists:foldl(fun({J, M}, S) -> S#{J => M} end, Seen, Next)).

%% The nodes whose place rests on estimates only: a node directly in a cluster with
%% no measured round trip (either direction) to another node directly in it, or to
%% any member of one of the cluster's subclusters (it might belong inside that one).
undetermined(Tree, Measured, Nodes) ->
    Names = list_to_tuple(Nodes),
    Seen = fun(P, Qs) -> lists:any(fun(Q) -> Q =/= P andalso element(Q + 1, element(P + 1, Measured)) =/= null end,
                                   Qs) end,
    lists:sort([element(P + 1, Names)
                || {cluster, _, Kids} <- clusters(Tree),
                   Direct <- [[P || {point, P} <- Kids]],
                   Subs <- [[points(K) || {cluster, _, _} = K <- Kids]],
                   P <- Direct,
                   (length(Direct) > 1 andalso not Seen(P, Direct))
                       orelse lists:any(fun(Members) -> not Seen(P, Members) end, Subs)]).

clusters({point, _}) -> [];
clusters({cluster, _, Kids} = C) -> [C | lists:append([clusters(K) || K <- Kids])].

%%--------------------------------------------------------------------
%% Clustering

cluster(Nodes, Matrix, #{linkage := Linkage, alpha := Alpha, outliers := Outliers,
                         outlier_factor := Factor, strict := Strict} = Opts, Noise) ->
    Auto = #{range => float_range(maps:get(alpha_range, Opts)), steps => maps:get(alpha_steps, Opts),
             min_plateau => float(maps:get(alpha_min_plateau, Opts))},
    N = terrain_linkage:size(Matrix),
    {Clean, Repaired} = case Outliers of
                            repair when N > 2 ->
                                {First, _} = terrain_alpha:auto(Matrix, average, Auto),
                                repair(Matrix, First, Factor);
                            _ ->
                                {Matrix, 0}
                        end,
    Base = #{nodes => Nodes, options => Opts, repaired => Repaired, pairs => N * (N - 1) div 2},
    case Alpha of
        auto ->
            {AlphaTree, Levels} = terrain_alpha:auto(Clean, Linkage, Auto),
            Groups = case Strict of
                         true -> strict_groups(Clean, Noise);
                         false -> []
                     end,
            Tree = lists:foldl(fun(Group, T) -> add_group(T, maps:from_keys(Group, true)) end, AlphaTree, Groups),
            Added = length(clusters(Tree)) - length(clusters(AlphaTree)),
            {Tree, Base#{topology => to_topology(diameters(Tree, Clean), Nodes), levels => Levels,
                         strict_groups => Added, noise => Noise,
                         single_alpha => single_alpha(Levels)}};
        _ ->
            Tree = terrain_alpha:run(Clean, Linkage, Alpha),
            {Tree, Base#{topology => to_topology(diameters(Tree, Clean), Nodes)}}
    end.

float_range({Lo, Hi}) -> {float(Lo), float(Hi)}.

%% The α range that every level's plateau contains, if any.
single_alpha([]) ->
    none;
single_alpha(Levels) ->
    case [P || #{plateau := P} <- Levels] of
        Plateaus when is_tuple(hd(Plateaus)) ->
            case lists:member(none, Plateaus) of
                true ->
                    none;
                false ->
                    Lo = lists:max([L || {L, _} <- Plateaus]),
                    Hi = lists:min([H || {_, H} <- Plateaus]),
                    case Lo =< Hi of
                        true -> {Lo, Hi};
                        false -> none
                    end
            end;
        _ ->
            none
    end.

%% Every cluster's height becomes its diameter: the largest distance between two of
%% its points (each pair counted at its lowest common cluster, so O(n²) in all).
diameters({point, _} = Point, _M) ->
    Point;
diameters({cluster, _, Children}, M) ->
    Kids = [diameters(C, M) || C <- Children],
    Sets = [points(C) || C <- Kids],
    Across = fold_cross(fun(I, J, Max) -> max(Max, terrain_linkage:get(M, I, J)) end, 0.0, Sets),
    {cluster, lists:max([Across | [H || {cluster, H, _} <- Kids]]), Kids}.

points({point, P}) -> [P];
points({cluster, _, Children}) -> lists:append([points(C) || C <- Children]).

%%--------------------------------------------------------------------
%% Strict groups

%% A strict group is a set of two or more nodes, not all, whose every round trip inside
%% is shorter than every round trip from it to a node outside, by ?STRICT_MARGIN and by
%% twice the noise: what latency shows beyond doubt, whatever α sees (the α rule needs a
%% range of α over which a level's partition holds; results quantized to a few steps,
%% such as SMT pairs at 10 and 21 ns under core complexes at 31-42 ns, hold none).
%% Strict groups are nested or disjoint; every one is a cluster of the single-linkage
%% dendrogram, where the height at which it joins the rest is the shortest round trip
%% leaving it. Returns them, largest first.
-define(STRICT_MARGIN, 1.25).

strict_groups(M, Noise) ->
    N = terrain_linkage:size(M),
    Merges = terrain_linkage:linkage(M, single),
    Init = maps:from_list([{I, {[I], 0.0}} || I <- lists:seq(0, N - 1)]),
    {Clusters, _} = lists:foldl(
                      fun({A, B, H, _}, {Acc, Id}) ->
                              {MA, DA} = maps:get(A, Acc),
                              {MB, DB} = maps:get(B, Acc),
                              Cross = lists:max([terrain_linkage:get(M, I, J) || I <- MA, J <- MB]),
                              {Acc#{Id => {MA ++ MB, max(Cross, max(DA, DB))}, {joins, A} => H, {joins, B} => H},
                               Id + 1}
                      end, {Init, N}, Merges),
    Strict = [{length(Ms), lists:sort(Ms)}
              || {Id, {Ms, Diameter}} <- maps:to_list(Clusters), is_integer(Id), length(Ms) >= 2,
                 {ok, Leaving} <- [maps:find({joins, Id}, Clusters)],
                 Diameter * ?STRICT_MARGIN < Leaving, Diameter + 2 * Noise < Leaving],
    [Ms || {_, Ms} <- lists:reverse(lists:sort(Strict))].

%% The α tree with a strict group as a cluster: the lowest cluster holding the group
%% gets a new child cluster of the children the group is made of. A group that cuts
%% through a cluster of the α tree is left out (the α tree stands).
add_group({cluster, H, Kids} = Cluster, Group) ->
    Parts = [{K, classify(points(K), Group)} || K <- Kids],
    case {[K || {K, inside} <- Parts], [K || {K, partly} <- Parts]} of
        {[], [Holder]} ->
            {cluster, H, [case K of Holder -> add_group(Holder, Group); _ -> K end || K <- Kids]};
        {[_, _ | _] = Inside, []} when length(Inside) < length(Kids) ->
            {cluster, H, [{cluster, 0.0, Inside} | Kids -- Inside]};
        _ ->
            Cluster
    end;
add_group(Point, _Group) ->
    Point.

classify(Points, Group) ->
    case [P || P <- Points, is_map_key(P, Group)] of
        [] -> outside;
        Points -> inside;
        _ -> partly
    end.

%% The noise of a latency matrix with `min' and `median': the median over the pairs of
%% median minus min (the jitter of one round trip); 0 without both.
noise(#{stats := #{min := Mins, median := Medians}}) when is_list(Mins), is_list(Medians) ->
    Jitters = [Md - Mn || {RowMin, RowMed} <- lists:zip(Mins, Medians), is_list(RowMin), is_list(RowMed),
                          length(RowMin) =:= length(RowMed),
                          {Mn, Md} <- lists:zip(RowMin, RowMed), is_number(Mn), is_number(Md), Md >= Mn],
    median(Jitters);
noise(_Latency) ->
    0.

%%--------------------------------------------------------------------
%% Outliers

%% Returns the cluster's points and the repairs made in it and below.
repair_tree(_M, {point, P}, _Factor) ->
    {[P], 0};
repair_tree(M, {cluster, _, Children}, Factor) ->
    Parts = [repair_tree(M, C, Factor) || C <- Children],
    Below = lists:sum([C || {_, C} <- Parts]),
    Sets = [Ps || {Ps, _} <- Parts],
    Total = cross_pairs(Sets),
    %% Large populations: the median of a sample, pair {I, J} (I < J) taken when
    %% (I n + J) mod Stride = 0, which does not depend on the order of the points.
    Stride = max(1, (Total + ?SAMPLE - 1) div ?SAMPLE),
    N = terrain_linkage:size(M),
    Sample = fold_cross(fun(I, J, Acc) ->
                                case (min(I, J) * N + max(I, J)) rem Stride of
                                    0 -> [terrain_linkage:get(M, I, J) | Acc];
                                    _ -> Acc
                                end
                        end, [], Sets),
    Median = median(Sample),
    Here = fold_cross(fun(I, J, Count) ->
                              V = terrain_linkage:get(M, I, J),
                              case V > Factor * Median of
                                  true -> terrain_linkage:set(M, I, J, Median), Count + 1;
                                  false -> Count
                              end
                      end, 0, Sets),
    {lists:append(Sets), Below + Here}.

cross_pairs([]) -> 0;
cross_pairs([S | Rest]) -> length(S) * length(lists:append(Rest)) + cross_pairs(Rest).

%% Folds over every pair of points in two different sets.
fold_cross(_Fun, Acc, []) ->
    Acc;
fold_cross(Fun, Acc, [Set | Rest]) ->
    Others = lists:append(Rest),
    Acc1 = lists:foldl(fun(I, A) -> lists:foldl(fun(J, B) -> Fun(I, J, B) end, A, Others) end, Acc, Set),
    fold_cross(Fun, Acc1, Rest).

median([]) ->
    0.0;
median(Xs) ->
    Sorted = lists:sort(Xs),
    Len = length(Sorted),
    case Len rem 2 of
        1 -> lists:nth(Len div 2 + 1, Sorted);
        0 -> (lists:nth(Len div 2, Sorted) + lists:nth(Len div 2 + 1, Sorted)) / 2
    end.

%%--------------------------------------------------------------------
%% The topology term

term({point, I}, Nodes, _Name) ->
    {node, element(I + 1, Nodes)};
term({cluster, H, Children}, Nodes, Name) ->
    Ordered = lists:sort([{first_point(C), C} || C <- Children]),
    Numbered = lists:zip(lists:seq(1, length(Ordered)), [C || {_, C} <- Ordered]),
    {network, list_to_atom(Name), #{height => H},
     [term(C, Nodes, child_name(Name, K)) || {K, C} <- Numbered]}.

child_name("c", K) -> "c" ++ integer_to_list(K);
child_name(Name, K) -> Name ++ "_" ++ integer_to_list(K).

first_point({point, P}) -> P;
first_point({cluster, _, Children}) -> lists:min([first_point(C) || C <- Children]).

%%--------------------------------------------------------------------
%% JSON

discovery_json(#{options := Opts, repaired := Repaired, pairs := Pairs} = Result) ->
    Base = #{missing_pairs => maps:get(missing, Result, 0),
             undetermined => maps:get(undetermined, Result, []),
             statistic => maps:get(statistic, Opts),
             symmetrise => maps:get(symmetrise, Opts),
             linkage => maps:get(linkage, Opts),
             alpha => maps:get(alpha, Opts),
             outliers => #{mode => maps:get(outliers, Opts),
                           factor => maps:get(outlier_factor, Opts),
                           repaired => Repaired,
                           pairs => Pairs}},
    case Result of
        #{levels := Levels, single_alpha := Single} ->
            Base#{levels => [#{points => P, clusters => C, alpha => null_if_none(A),
                               plateau => case Plateau of {Lo, Hi} -> [Lo, Hi]; none -> null end,
                               silhouette => maps:get(silhouette, L, null),
                               best_silhouette => maps:get(best_silhouette, L, null),
                               jump => json_jump(maps:get(jump, L, null)),
                               alpha_top_silhouette => null_if_none(maps:get(above, L, none))}
                             || #{points := P, clusters := C, alpha := A, plateau := Plateau} = L <- Levels],
                  single_alpha => case Single of none -> null; {Lo, Hi} -> [Lo, Hi] end};
        #{} ->
            Base
    end.

null_if_none(none) -> null;
null_if_none(X) -> X.

%% A jump of merge heights from a height 0 is 1.0e308 inside: JSON says null.
-spec json_jump(term()) -> float() | null.
json_jump(Jump) when is_float(Jump), Jump < 1.0e300 -> Jump;
json_jump(_) -> null.
