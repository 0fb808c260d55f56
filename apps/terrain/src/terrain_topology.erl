%% @private
%% @doc The topology model: a tree of networks whose leaves are Erlang nodes, and the
%% communication distances it defines (RELEASE D3.5, §4.1–4.2).
%%
%% A topology term, as in RELEASE D3.5, optionally with measured heights:
%% ```
%% {network, Name, Children} | {network, Children}
%% {network, Name, #{height => Microseconds}, Children}
%% {node, Node}
%% '''
%% Two metrics on the leaves:
%% <ul>
%% <li>`ultrametric' — RELEASE D3.5's d(x, y) = 2^−ℓ(x, y), where ℓ is the number of edges
%%     the paths from the root to x and to y share; 0 for x = y. Nodes whose lowest
%%     common network is the root are at distance 1.</li>
%% <li>`measured' — the height of the lowest common network (µs, e.g. the diameter of
%%     the cluster that topology discovery found); 0 for x = y. Needs a height on
%%     every network.</li>
%% </ul>
%% Both are ultrametrics. The default metric is `measured' when every network has a
%% height, else `ultrametric'. A node that is not in the tree is `anywhere': at a
%% distance beyond every distance in the tree (2 for the ultrametric, twice the root's
%% height for the measured metric).
%%
%% Levels name distances without numbers (RELEASE D3.5, §5.1.1): `same_node', then by the rank
%% of the distance among the distinct distances the tree can produce, smallest first,
%% `very_near' (the smallest), `near' (in the lower half of the ranks), `far' (the
%% upper half), `very_far' (the largest), and `anywhere'. In a tree whose root holds
%% only nodes, every pair is `near'. See docs/DISTANCES.md for a worked example.
%%
%% ```
%% {ok, T} = terrain_topology:new({network, dc, [{network, r1, [{node, a@h}, {node, b@h}]},
%%                                               {network, r2, [{node, c@h}]}]}),
%% 0.5 = terrain_topology:distance(T, a@h, b@h),
%% 1.0 = terrain_topology:distance(T, a@h, c@h),
%% very_near = terrain_topology:level(T, a@h, b@h).
%% '''
-module(terrain_topology).

%% API
-export([new/1,
         new/2,
         read/1,
         check/1,
         from_json/1,
         metric/1,
         nodes/1,
         member/2,
         distance/3,
         anywhere/1,
         level/3,
         levels/0,
         level_rank/1,
         slow_distance/1,
         disc/3,
         subtree/2,
         groups/1,
         subnetworks/2,
         network_members/2,
         domain/3,
         network_name/2,
         check_spread/1,
         term/1,
         render/2,
         format_error/1]).

%% exports_not_used: Read by terrain_topology_tests and prop_topology to check the model.
-ignore_xref([{anywhere, 1}, {groups, 1}, {metric, 1}, {new, 2}]).

-export_type([topology/0, tree/0, metric/0, level/0, format/0, network_id/0, error_reason/0, spread/0]).

-compile({no_auto_import, [nodes/1]}).

-type tree() :: terrain:topology_tree().
-type metric() :: ultrametric | measured.
%% The levels, nearest first (defined in terrain, the public module); levels/0 is the
%% same list as a value, and every other module takes the levels and their order from there.
-type level() :: terrain:level().
-type format() :: terrain:topology_format().
-type spread() :: terrain:spread().
%% The failure domains a selection spreads over (docs/DISTANCES.md, "Spread"): the
%% subtrees `D' levels below the root (`{depth, 0}' is the whole tree, `{depth, 2}' the
%% racks of a sites/racks/nodes tree), or the classes of nodes at most `Level' apart.

%% A network of the tree is identified by its position path from the root: `[1]' is
%% the root, `[1, 2]' its second child, and so on.
-type network_id() :: [pos_integer(), ...].
-type group_id() :: network_id().

-opaque topology() ::
        #{tree := tree(),
          metric := metric(),
          %% per node: the ids of its networks from the root down
          paths := #{node() => [group_id()]},
          %% per network: name (or generated), height, depth, member nodes
          groups := #{group_id() => #{name := term(), height := number() | undefined,
                                      depth := non_neg_integer(), members := [node()]}},
          %% the distinct distances between two different nodes, ascending
          distances := [number()]}.

-type error_reason() :: {topology, [term()], term()}.

%% Why a JSON document is not a topology: not JSON, not `terrain.topology/1', or a
%% tree entry that is neither a node nor a network.
-type json_error() :: {json, non_neg_integer(), string()} | {format, term()} | {bad_height, term()}
                    | {bad_entry, term()} | {long_name, binary()} | {too_many_names, non_neg_integer()}.

-include_lib("kernel/include/file.hrl").
-include_lib("terrain_json/include/terrain_formats.hrl").
-define(JSON_FORMAT, ?TERRAIN_FORMAT_TOPOLOGY).
%% A tree nests at most this many networks (the deepest real ones have a handful of
%% levels; a deeper file is refused before its distances are computed).
-define(MAX_DEPTH, 256).
%% The names of a JSON tree become atoms: at most this many different ones, each at
%% most 255 characters, counted before the first atom is made.
-define(MAX_NAMES, 200000).
%% read/1 reads regular files of at most this size (`terrain topology' reads through
%% the lab's bounded reader, which also counts a term file's atoms before parsing it).
-define(MAX_FILE_BYTES, 16 * 1024 * 1024).

%%--------------------------------------------------------------------
%% API

%% @doc Validates a topology term with the default metric.
-spec new(tree()) -> {ok, topology()} | {error, error_reason()}.
new(Tree) ->
    new(Tree, #{}).

%% @doc Validates a topology term; `#{metric => ultrametric | measured}' overrides
%% the default.
-spec new(tree(), #{metric => metric()}) -> {ok, topology()} | {error, error_reason()}.
new(Tree, Options) ->
    try
        Groups = walk(Tree, [], [1], 0, #{}),
        Paths = node_paths(Groups),
        HasHeights = lists:all(fun(#{height := H}) -> H =/= undefined end, maps:values(Groups)),
        Metric = case maps:get(metric, Options, default) of
                     default when HasHeights -> measured;
                     default -> ultrametric;
                     measured when not HasHeights -> throw({[], measured_without_heights});
                     M when M =:= measured; M =:= ultrametric -> M;
                     Other -> throw({[], {bad_metric, Other}})
                 end,
        T = #{tree => Tree, metric => Metric, paths => Paths, groups => Groups, distances => []},
        {ok, T#{distances => distinct_distances(T)}}
    catch
        throw:{Where, Why} -> {error, {topology, Where, Why}}
    end.

%% @doc Checks that a term is a topology as {@link new/2} builds it: its tree valid and
%% every table derived from it exactly what `new/2' derives. For a process that stores
%% topologies it did not build itself (the topology server).
-spec check(term()) -> {ok, topology()} | {error, error_reason()}.
check(#{tree := Tree, metric := Metric} = T) when map_size(T) =:= 5 ->
    case new(Tree, #{metric => Metric}) of
        {ok, T} -> {ok, T};
        {ok, _} -> {error, {topology, [], inconsistent}};
        {error, _} = Error -> Error
    end;
check(_Term) ->
    {error, {topology, [], not_a_topology}}.

%% @doc Reads a topology from a file in any format {@link render/2} writes that
%% holds the whole tree: one topology term (`file:consult/1' syntax) or a
%% `terrain.topology/1' JSON document (whose `metric' is kept). Only a regular file
%% of at most 16 MB is read (not a device, a FIFO or a directory).
-spec read(file:filename()) -> {ok, topology()} | {error, error_reason()}.
read(File) ->
    case file:read_file_info(File) of
        {ok, #file_info{type = regular, size = Size}} when Size =< ?MAX_FILE_BYTES -> read_regular(File);
        {ok, #file_info{type = regular}} -> {error, {topology, [{file, File}], {file, too_large}}};
        {ok, #file_info{}} -> {error, {topology, [{file, File}], {file, not_regular}}};
        {error, Why} -> {error, {topology, [{file, File}], {file, Why}}}
    end.

read_regular(File) ->
    case file:consult(File) of
        {ok, [Tree]} ->
            new(Tree);
        {ok, Terms} ->
            {error, {topology, [{file, File}], {terms, length(Terms)}}};
        {error, {Line, Mod, Term}} ->
            case read_json(File) of
                {ok, Tree, Options} -> new(Tree, Options);
                not_json -> {error, {topology, [{file, File}, {line, Line}], {syntax, Mod:format_error(Term)}}};
                {error, Why} -> {error, {topology, [{file, File}], Why}}
            end;
        {error, Why} ->
            {error, {topology, [{file, File}], {file, Why}}}
    end.

%% @doc The topology term (and metric) of a `terrain.topology/1' JSON document, as
%% {@link render/2} writes it with `json'.
%% Its names become atoms only after they are counted (at most 200,000 different
%% ones, each at most 255 characters).
-spec from_json(binary()) -> {ok, tree(), #{metric => metric()}} | {error, json_error()}.
from_json(Bin) ->
    case terrain_json:decode(Bin) of
        {ok, #{<<"format">> := ?JSON_FORMAT, <<"tree">> := Tree} = Doc} ->
            try
                Room = erlang:system_info(atom_limit) - erlang:system_info(atom_count) - 100000,
                _ = json_names(Tree, #{}, max(0, min(?MAX_NAMES, Room))),
                {ok, tree_from_json(Tree), metric_from_json(maps:get(<<"metric">>, Doc, null))}
            catch throw:Why -> {error, Why}
            end;
        {ok, #{<<"format">> := Other}} ->
            {error, {format, Other}};
        {ok, _} ->
            {error, {format, none}};
        {error, _} = Error ->
            Error
    end.

%% @doc The metric in use.
-spec metric(topology()) -> metric().
metric(#{metric := Metric}) ->
    Metric.

%% @doc The nodes of the tree, in the order of the term.
-spec nodes(topology()) -> [node()].
nodes(#{groups := Groups}) ->
    maps:get(members, maps:get([1], Groups)).

%% @doc Is `Node' a leaf of the tree?
-spec member(topology(), node()) -> boolean().
member(#{paths := Paths}, Node) ->
    maps:is_key(Node, Paths).

%% @doc d(A, B) under the topology's metric; {@link anywhere/1} if either is missing.
-spec distance(topology(), node(), node()) -> number().
distance(_T, Same, Same) ->
    0;
distance(#{paths := Paths} = T, A, B) ->
    case {Paths, Paths} of
        {#{A := PathA}, #{B := PathB}} -> lca_distance(T, lca(PathA, PathB));
        _ -> anywhere(T)
    end.

%% @doc The distance of a node that is not in the tree: beyond every distance in it.
-spec anywhere(topology()) -> number().
anywhere(#{metric := ultrametric}) ->
    2.0;
anywhere(#{metric := measured, groups := #{[1] := #{height := Root}}}) ->
    case Root of
        0 -> 1;
        _ -> 2 * Root
    end.

%% @doc The level of the distance between two nodes.
-spec level(topology(), node(), node()) -> level().
level(_T, Same, Same) ->
    same_node;
level(#{distances := Distances} = T, A, B) ->
    D = distance(T, A, B),
    case D =:= anywhere(T) andalso not (member(T, A) andalso member(T, B)) of
        true -> anywhere;
        false -> level_of(rank(D, Distances, 0), length(Distances))
    end.

%% @doc The smallest distance whose level is `far' or beyond: an edge at least this
%% long is a slow link (RELEASE D3.5, §4.6, Figures 27–28).
-spec slow_distance(topology()) -> number().
slow_distance(#{distances := Distances} = T) ->
    Count = length(Distances),
    case [D || {R, D} <- lists:zip(lists:seq(0, Count - 1), Distances),
               level_rank(level_of(R, Count)) >= level_rank(far)] of
        [First | _] -> First;
        [] -> anywhere(T)
    end.

%% @doc The levels, nearest first: the one list every other module uses (the
%% predicate `{level, Op, Level}' compares levels in this order).
-spec levels() -> [level(), ...].
levels() ->
    [same_node, very_near, near, far, very_far, anywhere].

%% @doc A level's position in {@link levels/0}, from 0 for `same_node', for
%% comparisons (`{level, le, near}').
-spec level_rank(level()) -> 0..5.
level_rank(Level) ->
    rank_of(Level, levels(), 0).

rank_of(Level, [Level | _], Rank) -> Rank;
rank_of(Level, [_ | Rest], Rank) -> rank_of(Level, Rest, Rank + 1).

%% @doc The closed disc D(Node, R) = {y : d(Node, y) ≤ R} over the nodes of the
%% tree and Node itself, in the order of the tree.
-spec disc(topology(), node(), number()) -> [node()].
disc(T, Node, R) ->
    Candidates = case member(T, Node) of
                     true -> nodes(T);
                     false -> [Node | nodes(T)]
                 end,
    [Y || Y <- Candidates, distance(T, Node, Y) =< R].

%% @doc The nodes under the network named `Name' (`[]' if there is none).
-spec subtree(topology(), term()) -> [node()].
subtree(#{groups := Groups}, Name) ->
    case [M || #{name := N, members := M} <- maps:values(Groups), N =:= Name] of
        [Members | _] -> Members;
        [] -> []
    end.

%% @doc Every network as `{Name, Depth, Height, Members}', root first, depth-first.
-spec groups(topology()) -> [{term(), non_neg_integer(), number() | undefined, [node()]}].
groups(#{groups := Groups}) ->
    [{N, D, H, M} || {_, #{name := N, depth := D, height := H, members := M}} <- lists:sort(maps:to_list(Groups))].

%% @doc The child networks of a network, in the order of the term (`[]' for a
%% lowest-level network). The root is `[1]'.
-spec subnetworks(topology(), network_id()) -> [network_id()].
subnetworks(T, Id) ->
    children(T, Id).

%% @doc The nodes under a network, in the order of the term.
-spec network_members(topology(), network_id()) -> [node()].
network_members(#{groups := Groups}, Id) ->
    maps:get(members, maps:get(Id, Groups)).

%% @doc The failure domain of a node under a spread: the id of its network `D' levels
%% below the root (`{depth, D}'), or of its highest network whose distance is at most
%% the largest distance of level `Level' (a level name: the distance classes of an
%% ultrametric are exactly these subtrees). A node outside the tree, or above depth
%% `D', or alone under `same_node', is a domain of its own: `{node, Node}'.
-spec domain(topology(), spread(), node()) -> network_id() | {node, node()}.
domain(#{paths := Paths} = T, Spread, Node) ->
    case Paths of
        #{Node := Path} -> path_domain(T, Spread, Path, Node);
        _ -> {node, Node}
    end.

%% @doc The name of a network (generated for unnamed ones).
-spec network_name(topology(), network_id()) -> term().
network_name(#{groups := Groups}, Id) ->
    maps:get(name, maps:get(Id, Groups)).

%% @doc `ok' for a spread: a level name or `{depth, D}' with D >= 0.
-spec check_spread(term()) -> boolean().
check_spread({depth, D}) -> is_integer(D) andalso D >= 0;
check_spread(Level) -> lists:member(Level, levels()).

%% @doc The topology term it was made from.
-spec term(topology()) -> tree().
term(#{tree := Tree}) ->
    Tree.

%% @doc Renders the topology: `term' (Erlang term, consultable), `text' (indented),
%% `dot' (Graphviz, in RELEASE D3.5's style: lowest-level networks as ellipses listing
%% their members with size and height, higher ones as boxes with their height: the
%% diameter of a discovered cluster, the typical round trip of a tree probe's level),
%% `newick' (branch lengths from heights when measured), `json' (`terrain.topology/1';
%% its `metric' only for a tree with heights, where the metric is a choice).
-spec render(topology(), format()) -> iodata().
render(#{tree := Tree}, term) ->
    io_lib:format("~tp.~n", [Tree]);
render(T, text) ->
    text(T, [1], 0);
render(T, dot) ->
    dot(T);
render(T, newick) ->
    [newick(T, [1], undefined), ";\n"];
render(#{groups := Groups} = T, json) ->
    %% `metric' records a choice, which only a tree with heights has: a tree without
    %% heights (SLURM's switches) carries no distances to name
    Doc = case lists:all(fun(#{height := H}) -> H =/= undefined end, maps:values(Groups)) of
              true -> #{metric => metric(T)};
              false -> #{}
          end,
    [terrain_json:encode(Doc#{format => ?JSON_FORMAT, tree => json_tree(T, [1])}, #{pretty => true}), $\n].

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({topology, Where, Why}) ->
    ["topology", where(Where), ": ", why(Why)].

%%--------------------------------------------------------------------
%% Validation

%% walk(Tree, NamePath, Id, Depth, Groups) -> Groups; throws {Where, Why}.
walk({network, Children}, NamePath, Id, Depth, Groups) when is_list(Children) ->
    walk({network, generated_name(Id), #{}, Children}, NamePath, Id, Depth, Groups);
walk({network, Name, Children}, NamePath, Id, Depth, Groups) when is_list(Children) ->
    walk({network, Name, #{}, Children}, NamePath, Id, Depth, Groups);
walk({network, Name, _Options, _Children}, NamePath, _Id, Depth, _Groups) when Depth >= ?MAX_DEPTH ->
    throw({NamePath ++ [Name], {too_deep, ?MAX_DEPTH}});
walk({network, Name, Options, Children}, NamePath, Id, Depth, Groups) when is_map(Options), is_list(Children) ->
    Where = NamePath ++ [Name],
    _ = Children =:= [] andalso throw({Where, empty_network}),
    _ = is_proper_list(Children) orelse throw({Where, {children_not_a_list, Children}}),
    maps:foreach(fun(height, H) when is_number(H), H >= 0 -> ok;
                    (height, H) -> throw({Where, {bad_height, H}});
                    (Key, _) -> throw({Where, {unknown_option, Key}})
                 end, Options),
    Height = maps:get(height, Options, undefined),
    Numbered = lists:zip(lists:seq(1, length(Children)), Children),
    Groups1 = lists:foldl(fun({I, Child}, Acc) -> walk(Child, Where, Id ++ [I], Depth + 1, Acc) end,
                          Groups, Numbered),
    ChildIds = [Id ++ [I] || {I, Child} <- Numbered, element(1, Child) =:= network],
    Members = lists:append([case Child of
                                {node, N} -> [N];
                                _ -> maps:get(members, maps:get(Id ++ [I], Groups1))
                            end || {I, Child} <- Numbered]),
    check_heights(Where, Height, [maps:get(height, maps:get(C, Groups1)) || C <- ChildIds]),
    case Members -- lists:usort(Members) of
        [] -> ok;
        [Dup | _] -> throw({Where, {duplicate_node, Dup}})
    end,
    Groups1#{Id => #{name => Name, height => Height, depth => Depth, members => Members}};
walk({node, Node}, _NamePath, _Id, 0, _Groups) ->
    throw({[], {root_is_a_node, Node}});
walk({node, Node}, _NamePath, _Id, _Depth, Groups) when is_atom(Node) ->
    Groups;
walk({node, Node}, NamePath, _Id, _Depth, _Groups) ->
    throw({NamePath, {bad_node, Node}});
walk(Other, NamePath, _Id, _Depth, _Groups) ->
    throw({NamePath, {unknown_shape, Other}}).

is_proper_list([_ | T]) -> is_proper_list(T);
is_proper_list([]) -> true;
is_proper_list(_) -> false.

check_heights(_Where, undefined, _ChildHeights) ->
    ok;
check_heights(Where, Height, ChildHeights) ->
    case [H || H <- ChildHeights, H =/= undefined, H > Height] of
        [] -> ok;
        [H | _] -> throw({Where, {child_higher, H, Height}})
    end.

generated_name(Id) ->
    list_to_atom("net" ++ lists:append(["_" ++ integer_to_list(I) || I <- tl(Id)])).

node_paths(Groups) ->
    Sorted = lists:sort(maps:to_list(Groups)),
    lists:foldl(fun({Id, #{members := Members}}, Acc) ->
                        lists:foldl(fun(N, A) -> maps:update_with(N, fun(P) -> P ++ [Id] end, [Id], A) end,
                                    Acc, Members)
                end, #{}, Sorted).

%%--------------------------------------------------------------------
%% Spread domains

path_domain(_T, {depth, D}, Path, Node) ->
    case length(Path) > D of
        true -> lists:nth(D + 1, Path);
        false -> {node, Node}
    end;
path_domain(#{distances := Distances} = T, Level, Path, Node) ->
    Count = length(Distances),
    Rank = level_rank(Level),
    Within = [D || {R, D} <- lists:zip(lists:seq(0, Count - 1), Distances),
                   level_rank(level_of(R, Count)) =< Rank],
    case {Level, Within} of
        {anywhere, _} -> hd(Path);
        {_, []} -> {node, Node};
        {_, _} ->
            Radius = lists:max(Within),
            case [G || G <- Path, lca_distance(T, G) =< Radius] of
                [Domain | _] -> Domain;
                [] -> {node, Node}
            end
    end.

%%--------------------------------------------------------------------
%% Distances and levels

lca([X | A], [X | B]) -> lca(A, B, X);
lca(_, _) -> [1].

lca([X | A], [X | B], _) -> lca(A, B, X);
lca(_, _, Last) -> Last.

lca_distance(#{metric := ultrametric}, Id) ->
    math:pow(2, -(length(Id) - 1));
lca_distance(#{metric := measured, groups := Groups}, Id) ->
    maps:get(height, maps:get(Id, Groups)).

%% The distances the tree can produce between two different nodes: one per network
%% that is the lowest common network of some pair (it has two or more members).
distinct_distances(#{groups := Groups} = T) ->
    %% per network: its child networks and the members they hold, in one pass
    Below = maps:fold(fun([_], _, Acc) -> Acc;
                         (Id, #{members := M}, Acc) ->
                             maps:update_with(lists:droplast(Id), fun({C, N}) -> {C + 1, N + length(M)} end,
                                              {1, length(M)}, Acc)
                      end, #{}, Groups),
    lists:usort([lca_distance(T, Id) || {Id, #{members := [_, _ | _] = M}} <- maps:to_list(Groups),
                                        is_lca(length(M), maps:get(Id, Below, {0, 0}))]).

%% A network is the lowest common network of some pair when two of its members lie
%% in different children (or directly under it).
is_lca(Members, {Children, InChildren}) ->
    Members - InChildren + Children >= 2.

rank(D, [X | _], R) when D =< X -> R;
rank(D, [_ | Rest], R) -> rank(D, Rest, R + 1);
rank(_D, [], R) -> R.

level_of(_Rank, Count) when Count =< 1 -> near;
level_of(0, _) -> very_near;
level_of(Rank, Count) when Rank >= Count - 1 -> very_far;
level_of(Rank, Count) when Rank / (Count - 1) =< 0.5 -> near;
level_of(_, _) -> far.

%%--------------------------------------------------------------------
%% Rendering

children(#{groups := Groups}, Id) ->
    lists:sort([C || C <- maps:keys(Groups), length(C) =:= length(Id) + 1, lists:prefix(Id, C)]).

%% The children of a network in term order: {group, Id} or {node, N}.
ordered_children(#{groups := Groups} = T, Id) ->
    Groups0 = [{lists:last(C), {group, C}} || C <- children(T, Id)],
    GroupMembers = lists:append([maps:get(members, maps:get(C, Groups)) || C <- children(T, Id)]),
    Direct = [N || N <- maps:get(members, maps:get(Id, Groups)), not lists:member(N, GroupMembers)],
    %% Position of direct nodes: recover from the term.
    Positions = direct_positions(T, Id),
    [C || {_, C} <- lists:keysort(1, Groups0 ++ [{maps:get(N, Positions), {node, N}} || N <- Direct])].

direct_positions(#{tree := Tree}, Id) ->
    Sub = lists:foldl(fun(I, Node) -> lists:nth(I, tree_children(Node)) end, Tree, tl(Id)),
    Numbered = lists:zip(lists:seq(1, length(tree_children(Sub))), tree_children(Sub)),
    maps:from_list([{N, I} || {I, {node, N}} <- Numbered]).

tree_children({network, C}) -> C;
tree_children({network, _, C}) -> C;
tree_children({network, _, _, C}) -> C.

info(#{groups := Groups}, Id) ->
    maps:get(Id, Groups).

text(T, Id, Indent) ->
    #{name := Name, height := H, members := M} = info(T, Id),
    Pad = lists:duplicate(Indent, $\s),
    [io_lib:format("~s~tp (~ts~s)~n", [Pad, Name, node_count(M), height_text(H)]),
     [case C of
          {group, G} -> text(T, G, Indent + 2);
          {node, N} -> io_lib:format("~s  ~tp~n", [Pad, N])
      end || C <- ordered_children(T, Id)]].

node_count([_]) -> "1 node";
node_count(M) -> io_lib:format("~b nodes", [length(M)]).

height_text(undefined) -> "";
height_text(H) -> io_lib:format(", height ~s us", [num(H)]).

num(H) when is_integer(H) -> integer_to_list(H);
num(H) when abs(H) < 1.0e15 -> float_to_list(float(H), [{decimals, 1}, compact]);
num(H) -> float_to_list(float(H), [short]).     % {decimals, _} fails for huge floats

dot(T) ->
    ["graph topology {\n  node [fontname=\"Helvetica\"];\n",
     dot_group(T, [1]),
     "}\n"].

dot_group(T, Id) ->
    #{name := Name, height := H, members := M} = info(T, Id),
    Kids = ordered_children(T, Id),
    Label = dot_id(Id),
    case [G || {group, G} <- Kids] of
        [] ->
            %% lowest level: an ellipse listing its members, with size and diameter
            [io_lib:format("  ~s [shape=ellipse, label=\"~ts\\n~ts~ts\\n~ts\"];~n",
                           [Label, escape(Name), node_count(M), dot_height(H),
                            lists:join("\\n", [escape(N) || N <- M])])];
        Groups ->
            [io_lib:format("  ~s [shape=box, label=\"~ts~ts\"];~n", [Label, escape(Name), dot_height(H)]),
             [[dot_group(T, G), io_lib:format("  ~s -- ~s;~n", [Label, dot_id(G)])] || G <- Groups],
             [io_lib:format("  \"~ts\" [shape=plaintext];~n  ~s -- \"~ts\";~n", [escape(N), Label, escape(N)])
              || {node, N} <- Kids]]
    end.

dot_id(Id) ->
    "g" ++ lists:append(["_" ++ integer_to_list(I) || I <- Id]).

dot_height(undefined) -> "";
dot_height(H) -> io_lib:format("\\nheight ~s us", [num(H)]).

escape(Term) ->
    Text = case Term of
               A when is_atom(A) -> atom_to_list(A);
               _ -> io_lib:format("~tp", [Term])
           end,
    string:replace(string:replace(Text, "\\", "\\\\", all), "\"", "\\\"", all).

%% Newick: branch length = parent height − own height (leaves height 0) when measured.
newick(T, Id, ParentHeight) ->
    #{name := Name, height := H} = info(T, Id),
    Kids = [case C of
                {group, G} -> newick(T, G, H);
                {node, N} -> [newick_label(N), branch(H, 0)]
            end || C <- ordered_children(T, Id)],
    ["(", lists:join(",", Kids), ")", newick_label(Name), branch(ParentHeight, H)].

branch(undefined, _) -> "";
branch(_, undefined) -> "";
branch(Parent, Own) -> [":", num(Parent - Own)].

newick_label(Term) ->
    Text = lists:flatten(escape(Term)),
    case lists:any(fun(C) -> lists:member(C, " ()[]':;,") end, Text) of
        true -> ["'", string:replace(Text, "'", "''", all), "'"];
        false -> Text
    end.

json_tree(T, Id) ->
    #{name := Name, height := H} = info(T, Id),
    Base = #{name => json_name(Name),
             children => [case C of
                              {group, G} -> json_tree(T, G);
                              {node, N} -> #{node => N}
                          end || C <- ordered_children(T, Id)]},
    case H of
        undefined -> Base;
        _ -> Base#{height => H}
    end.

json_name(A) when is_atom(A) -> A;
json_name(Other) -> iolist_to_binary(io_lib:format("~tp", [Other])).

%% A file that does not parse as Erlang terms is read as JSON when it starts like a
%% JSON object (`{' then a string key or `}'); a broken term file such as
%% `{network, ...' keeps its Erlang syntax error.
read_json(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            Json = string:trim(Bin, leading),
            case Json of
                <<"{", Rest/binary>> ->
                    case string:trim(Rest, leading) of
                        <<C, _/binary>> when C =:= $"; C =:= $} -> from_json(Json);
                        _ -> not_json
                    end;
                _ ->
                    not_json
            end;
        {error, Why} ->
            {error, {file, Why}}
    end.

%% The distinct names of a JSON tree (node names and network names), refused past
%% `Max' or when one is longer than an atom may be; no atom is made.
json_names(#{<<"node">> := Node}, Names, Max) when is_binary(Node) ->
    json_name(Node, Names, Max);
json_names(#{<<"children">> := Children} = Network, Names, Max) when is_list(Children) ->
    Names1 = case maps:get(<<"name">>, Network, null) of
                 B when is_binary(B) -> json_name(B, Names, Max);
                 _ -> Names
             end,
    lists:foldl(fun(C, Acc) -> json_names(C, Acc, Max) end, Names1, Children);
json_names(_Other, Names, _Max) ->
    Names.                                            % tree_from_json/1 names the bad entry

json_name(Name, Names, Max) ->
    _ = byte_size(Name) > 255 andalso string:length(Name) > 255
        andalso throw({long_name, binary:part(Name, 0, 40)}),
    _ = map_size(Names) >= Max andalso not is_map_key(Name, Names) andalso throw({too_many_names, Max}),
    Names#{Name => true}.

tree_from_json(#{<<"node">> := Node}) when is_binary(Node) ->
    {node, binary_to_atom(Node)};
tree_from_json(#{<<"children">> := Children} = Network) when is_list(Children) ->
    Name = case maps:get(<<"name">>, Network, null) of
               B when is_binary(B) -> binary_to_atom(B);
               _ -> undefined
           end,
    Kids = [tree_from_json(C) || C <- Children],
    case {Name, maps:get(<<"height">>, Network, null)} of
        {undefined, null} -> {network, Kids};
        {_, null} -> {network, Name, Kids};
        {_, H} when is_number(H) -> {network, Name, #{height => H}, Kids};
        {_, H} -> throw({bad_height, H})
    end;
tree_from_json(Other) ->
    throw({bad_entry, Other}).

metric_from_json(<<"measured">>) -> #{metric => measured};
metric_from_json(<<"ultrametric">>) -> #{metric => ultrametric};
metric_from_json(_) -> #{}.

%%--------------------------------------------------------------------
%% Errors

where([]) -> "";
where(Where) -> [" at ", lists:join(" > ", [io_lib:format("~0tp", [W]) || W <- Where])].

why({too_deep, Max}) -> io_lib:format("networks nest more than ~b deep", [Max]);
why({long_name, Start}) -> io_lib:format("the name starting ~0tp is longer than 255 characters", [Start]);
why({too_many_names, Max}) -> io_lib:format("more than ~b different names (a name becomes an atom)", [Max]);
why({children_not_a_list, Children}) -> io_lib:format("the children ~0tP are not a proper list", [Children, 8]);
why(empty_network) -> "the network is empty: a network needs at least one node or network";
why({bad_height, H}) -> io_lib:format("height ~0tp must be a non-negative number of microseconds", [H]);
why({unknown_option, Key}) -> io_lib:format("unknown network option ~0tp (known: height)", [Key]);
why({child_higher, Child, Parent}) ->
    io_lib:format("a child network has height ~s above its parent's ~s (children may not be higher than parents)",
                  [num(Child), num(Parent)]);
why({duplicate_node, N}) -> io_lib:format("node ~0tp appears more than once", [N]);
why({root_is_a_node, N}) -> io_lib:format("the root must be a network, got {node, ~0tp}", [N]);
why({bad_node, N}) -> io_lib:format("node name ~0tp must be an atom", [N]);
why({unknown_shape, Term}) ->
    io_lib:format("unknown term ~0tP: expected {network, Name, Children}, {network, Children}, "
                  "{network, Name, #{height => Us}, Children} or {node, Node}", [Term, 8]);
why(measured_without_heights) -> "the measured metric needs a height on every network";
why({bad_metric, M}) -> io_lib:format("unknown metric ~0tp (known: ultrametric, measured)", [M]);
why({terms, N}) -> io_lib:format("expected one topology term, found ~b", [N]);
why({syntax, Message}) -> ["syntax error: ", Message];
why({file, not_regular}) -> "not a regular file";
why({file, too_large}) -> io_lib:format("larger than ~b bytes", [?MAX_FILE_BYTES]);
why({file, Why}) -> file:format_error(Why);
why(not_a_topology) -> "not a topology (build one with terrain_topology:new/1,2 or read/1)";
why(inconsistent) ->
    "the topology's tables do not match its tree (it was not built by terrain_topology:new/1,2, or was altered)";
why({json, Offset, Why}) -> io_lib:format("invalid JSON at byte ~b: ~ts", [Offset, Why]);
why({format, none}) -> "not a topology: no \"format\" field (expected \"terrain.topology/1\")";
why({format, F}) -> io_lib:format("not a topology: format ~0tp (expected \"terrain.topology/1\")", [F]);
why({bad_entry, Entry}) -> io_lib:format("not a topology: ~0tP", [{bad_entry, Entry}, 8]).
