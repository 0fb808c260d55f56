%% @private
%% @doc The shapes collectives run over: trees (flat, binomial, hierarchical,
%% explicit) and the hierarchy of a communicator's members built from the topology.
%%
%% A tree is a term the member processes read to find their parent and children:
%% `{flat, Size, Root}' and `{binomial, Size, Root}' are computed per rank; a
%% hierarchical or explicit tree is a map `Rank => vertex()'.
-module(terrain_paths_plan).

%% API
-export([flat/2,
         binomial/2,
         explicit/2,
         hierarchy/1,
         hierarchical_tree/1,
         parent/2,
         children/2,
         wrappers/2,
         subtree/2,
         root/1]).

-export_type([tree/0, hierarchy/0, wrapper/0, group/0]).

-type wrapper() :: forward | reduce | compress | {delay, non_neg_integer()}
                 | {collect, pid() | {events, atom()} | fun((map()) -> term())}.
-type vertex() :: #{parent := non_neg_integer() | none,
                    children := [non_neg_integer()],
                    wrappers := [wrapper()]}.
-type tree() :: {flat, pos_integer(), non_neg_integer()}
              | {binomial, pos_integer(), non_neg_integer()}
              | {map, non_neg_integer(), #{non_neg_integer() => vertex()}}.
-type group() :: {group, [group()]} | {node, node(), [non_neg_integer()]}.
-type level() :: {Depth :: pos_integer(), SendTo :: [non_neg_integer()], RecvFrom :: [non_neg_integer()]}.
-type hierarchy() ::
        #{groups := group(),                                 % nested groups, single-child groups collapsed
          local_leader := #{non_neg_integer() => non_neg_integer()}, % rank => the leader of its lowest group
          forest := tree(),                                  % inside each lowest group, towards its leader
          exchange := #{non_neg_integer() => [level()]},     % lowest-group leader => its levels, lowest first
          exchange_shape := exchange_shape(),                % how the leaders exchange (below)
          tree := tree()}.                                   % reduce/broadcast tree for the root

%% How the leaders of the lowest groups exchange their partials:
%% `levels' — once per level above them, with one leader of each sibling group
%% (one message per leader per level; the latencies of the levels add up);
%% `direct' — every leader sends its group's partial to every other leader in one
%% step (k − 1 messages per leader for k groups; one latency: the largest).
-type exchange_shape() :: levels | direct.
-export_type([exchange_shape/0]).

-type hierarchy_input() ::
        #{nodes := tuple(),                      % node of each rank (element Rank + 1)
          root := non_neg_integer(),
          topology := term() | undefined,        % a topology term (terrain_topology:tree())
          schedulers := #{node() => non_neg_integer()},
          eligible := [node()] | all,            % leader candidates first
          exchange => exchange_shape() | auto}.  % default auto: direct up to ?DIRECT_MAX lowest groups

%% Up to this many lowest groups, `auto' exchanges directly: k(k − 1) messages
%% (56 at 8 groups) buy one top-level latency instead of the sum over levels.
-define(DIRECT_MAX, 8).

%%--------------------------------------------------------------------
%% API

%% @doc Rank `Root' sends to (and receives from) every other rank directly.
-spec flat(pos_integer(), non_neg_integer()) -> tree().
flat(Size, Root) -> {flat, Size, Root}.

%% @doc The binomial tree of MPI over ranks relative to `Root'.
-spec binomial(pos_integer(), non_neg_integer()) -> tree().
binomial(Size, Root) -> {binomial, Size, Root}.

%% @doc A tree drawn by the user: `{Rank, Children}' or `{Rank, Wrappers, Children}'
%% nested, naming every rank of `0..Size-1' exactly once.
-spec explicit(term(), pos_integer()) -> {ok, tree()} | {error, term()}.
explicit(Vertex, Size) ->
    try
        Map = vertices(Vertex, none, #{}),
        Ranks = lists:sort(maps:keys(Map)),
        case Ranks =:= lists:seq(0, Size - 1) of
            true -> {ok, {map, element(1, vertex_parts(Vertex)), Map}};
            false -> {error, {ranks, Ranks, Size}}
        end
    catch
        throw:{bad_tree, Why} -> {error, Why}
    end.

%% @doc The hierarchy of a communicator: its members grouped by node, then by the
%% networks of the topology that hold the nodes (docs/COLLECTIVES.md).
-spec hierarchy(hierarchy_input()) -> hierarchy().
hierarchy(#{nodes := Nodes, root := Root, topology := Topology} = Input) ->
    Paths = node_paths(Topology),
    Size = tuple_size(Nodes),
    ByNode = lists:foldr(fun(Rank, Acc) ->
                                 maps:update_with(element(Rank + 1, Nodes), fun(L) -> [Rank | L] end, [Rank], Acc)
                         end, #{}, lists:seq(0, Size - 1)),
    Entries = [{maps:get(Node, Paths, []), Node, Ranks} || {Node, Ranks} <- maps:to_list(ByNode)],
    Groups = build(Entries),
    Leader = fun(Ranks) -> case lists:member(Root, Ranks) of true -> Root; false -> hd(Ranks) end end,
    Input1 = Input#{paths => Paths},
    %% Each lowest group (the nodes of one network of the topology) gets a leader:
    %% the root in its own, else chosen as in the tree, relative to the root.
    Locals = [{G, case lists:member(Root, ranks(G)) of
                      true -> Root;
                      false -> choose_leader(G, Root, Input1, Leader)
                  end} || G <- local_groups(Groups)],
    LocalLeader = maps:from_list([{R, L} || {G, L} <- Locals, R <- ranks(G)]),
    ForestEdges = lists:append([lists:reverse(lead(G, L, Input1, Leader, [])) || {G, L} <- Locals]),
    Forest = vertices_of(ranks(Groups), ForestEdges),
    Leaves = replace_locals(Groups, maps:from_list([{G, L} || {G, L} <- Locals])),
    LocalLeaders = [L || {_, L} <- Locals],
    Shape = case maps:get(exchange, Input, auto) of
                auto when length(LocalLeaders) =< ?DIRECT_MAX -> direct;
                auto -> levels;
                Chosen -> Chosen
            end,
    Exchange = case Shape of
                   direct -> direct_exchange(LocalLeaders);
                   levels -> exchange(Leaves, 1)
               end,
    #{groups => Groups, local_leader => LocalLeader,
      forest => {map, Root, Forest},
      exchange => maps:merge(maps:from_list([{L, []} || L <- LocalLeaders]), Exchange),
      exchange_shape => Shape,
      tree => {map, Root, tree(Groups, Root, Input1, Leader)}}.

%% @doc The reduce/broadcast tree of a hierarchy.
-spec hierarchical_tree(hierarchy()) -> tree().
hierarchical_tree(#{tree := Tree}) -> Tree.

%% @doc The root of a tree.
-spec root(tree()) -> non_neg_integer().
root({flat, _, Root}) -> Root;
root({binomial, _, Root}) -> Root;
root({map, Root, _}) -> Root.

%% @doc The parent of `Rank', or `none' at the root.
-spec parent(tree(), non_neg_integer()) -> non_neg_integer() | none.
parent({flat, _, Root}, Root) -> none;
parent({flat, _, Root}, _) -> Root;
parent({binomial, Size, Root}, Rank) ->
    case relative(Rank, Root, Size) of
        0 -> none;
        V -> absolute(V - lowbit(V), Root, Size)
    end;
parent({map, _, Map}, Rank) ->
    maps:get(parent, maps:get(Rank, Map)).

%% @doc The children of `Rank', farthest subtree first.
-spec children(tree(), non_neg_integer()) -> [non_neg_integer()].
children({flat, Size, Root}, Root) -> [R || R <- lists:seq(0, Size - 1), R =/= Root];
children({flat, _, _}, _) -> [];
children({binomial, Size, Root}, Rank) ->
    V = relative(Rank, Root, Size),
    Limit = case V of 0 -> top_bit(Size); _ -> lowbit(V) end,
    [absolute(V + B, Root, Size) || B <- powers_below(Limit), V + B < Size];
children({map, _, Map}, Rank) ->
    maps:get(children, maps:get(Rank, Map)).

%% @doc The wrappers on the edge from `Rank' to its parent.
-spec wrappers(tree(), non_neg_integer()) -> [wrapper()].
wrappers({map, _, Map}, Rank) -> maps:get(wrappers, maps:get(Rank, Map));
wrappers(_, _) -> [].

%% @doc The ranks of the subtree under `Rank' (itself included).
-spec subtree(tree(), non_neg_integer()) -> [non_neg_integer()].
subtree({flat, Size, Root}, Root) -> lists:seq(0, Size - 1);
subtree({flat, _, _}, Rank) -> [Rank];
subtree({binomial, Size, Root}, Rank) ->
    V = relative(Rank, Root, Size),
    Span = case V of 0 -> Size; _ -> lowbit(V) end,
    [absolute(X, Root, Size) || X <- lists:seq(V, min(V + Span, Size) - 1)];
subtree({map, _, _} = Tree, Rank) ->
    [Rank | lists:append([subtree(Tree, C) || C <- children(Tree, Rank)])].

%%--------------------------------------------------------------------
%% Internal functions: binomial

relative(Rank, Root, Size) -> (Rank - Root + Size) rem Size.
absolute(V, Root, Size) -> (V + Root) rem Size.
lowbit(V) -> V band (-V).

top_bit(Size) -> top_bit(Size, 1).
top_bit(Size, B) when B >= Size -> B;
top_bit(Size, B) -> top_bit(Size, B * 2).

%% Powers of two below Limit, largest first.
powers_below(Limit) -> powers_below(Limit div 2, []).
powers_below(0, Acc) -> lists:reverse(Acc);
powers_below(B, Acc) -> powers_below(B div 2, [B | Acc]).

%%--------------------------------------------------------------------
%% Internal functions: explicit trees

vertex_parts({Rank, Children}) when is_list(Children) -> {Rank, [], Children};
vertex_parts({Rank, Wrappers, Children}) when is_list(Wrappers), is_list(Children) -> {Rank, Wrappers, Children};
vertex_parts(Other) -> throw({bad_tree, {vertex, Other}}).

vertices(Vertex, Parent, Acc) ->
    {Rank, Wrappers, Children} = vertex_parts(Vertex),
    is_integer(Rank) andalso Rank >= 0 orelse throw({bad_tree, {rank, Rank}}),
    maps:is_key(Rank, Acc) andalso throw({bad_tree, {duplicate, Rank}}),
    [throw({bad_tree, {wrapper, W}}) || W <- Wrappers, not valid_wrapper(W)],
    ChildRanks = [element(1, vertex_parts(C)) || C <- Children],
    Acc1 = Acc#{Rank => #{parent => Parent, children => ChildRanks, wrappers => Wrappers}},
    lists:foldl(fun(C, A) -> vertices(C, Rank, A) end, Acc1, Children).

valid_wrapper(forward) -> true;
valid_wrapper(reduce) -> true;
valid_wrapper(compress) -> true;
valid_wrapper({delay, Ms}) -> is_integer(Ms) andalso Ms >= 0;
valid_wrapper({collect, {events, Name}}) -> is_atom(Name);
valid_wrapper({collect, C}) -> is_pid(C) orelse is_function(C, 1);
valid_wrapper(_) -> false.

%%--------------------------------------------------------------------
%% Internal functions: hierarchy

%% Node => path of network positions from the root (the root is []).
node_paths(undefined) -> #{};
node_paths(Tree) -> node_paths(Tree, [], #{}).

node_paths({node, Node}, Path, Acc) -> Acc#{Node => lists:reverse(tl_or_empty(Path))};
node_paths({network, _, _, Children}, Path, Acc) -> network_paths(Children, Path, Acc);
node_paths({network, _, Children}, Path, Acc) -> network_paths(Children, Path, Acc);
node_paths({network, Children}, Path, Acc) -> network_paths(Children, Path, Acc).

network_paths(Children, Path, Acc) ->
    {_, Acc1} = lists:foldl(fun(Child, {I, A}) -> {I + 1, node_paths(Child, [I | Path], A)} end,
                            {1, Acc}, Children),
    Acc1.

%% A node's own position is not part of its path: nodes of one network share it.
tl_or_empty([]) -> [];
tl_or_empty([_ | T]) -> T.

%% Nested groups from {Path, Node, Ranks}; a group with one child is that child.
build([{[], Node, Ranks}]) ->
    {node, Node, lists:sort(Ranks)};
build(Entries) ->
    Nodes = [{node, Node, lists:sort(Ranks)} || {[], Node, Ranks} <- Entries],
    Heads = lists:usort([H || {[H | _], _, _} <- Entries]),
    Groups = [build([{T, N, R} || {[H1 | T], N, R} <- Entries, H1 =:= H]) || H <- Heads],
    case sort_groups(Nodes ++ Groups) of
        [Only] -> Only;
        Children -> {group, Children}
    end.

sort_groups(Groups) ->
    [G || {_, G} <- lists:sort([{lists:min(ranks(G)), G} || G <- Groups])].

ranks({node, _, Ranks}) -> Ranks;
ranks({group, Children}) -> lists:append([ranks(C) || C <- Children]).

%% The lowest groups: groups of nodes only, or a node on its own beside groups.
local_groups({node, _, _} = Node) -> [Node];
local_groups({group, Children} = Group) ->
    case lists:all(fun(C) -> element(1, C) =:= node end, Children) of
        true -> [Group];
        false -> lists:append([local_groups(C) || C <- Children])
    end.

replace_locals(Group, Leaders) ->
    case maps:find(Group, Leaders) of
        {ok, L} -> {leaf, L};
        error -> {group, [replace_locals(C, Leaders) || C <- element(2, Group)]}
    end.

leaders({leaf, L}) -> [L];
leaders({group, Children}) -> lists:sort(lists:append([leaders(C) || C <- Children])).

%% At a group of k child groups, each leader receives the partial of one leader of
%% every sibling group (index j takes index j mod size there) and sends its own to
%% those that take it: one one-way latency per level.
exchange({leaf, _}, _Depth) ->
    #{};
exchange({group, Children}, Depth) ->
    Below = lists:foldl(fun(C, Acc) -> maps:merge(Acc, exchange(C, Depth + 1)) end, #{}, Children),
    Sets = [leaders(C) || C <- Children],
    Indexed = lists:zip(lists:seq(1, length(Sets)), Sets),
    Levels = [{M, {Depth,
                   [X || {J, Other} <- Indexed, J =/= I, {K, X} <- enumerate(Other), K rem length(Set) =:= Index],
                   [lists:nth(Index rem length(Other) + 1, Other) || {J, Other} <- Indexed, J =/= I]}}
              || {I, Set} <- Indexed, {Index, M} <- enumerate(Set)],
    lists:foldl(fun({M, Level}, Acc) -> maps:update_with(M, fun(L) -> L ++ [Level] end, [Level], Acc) end,
                Below, Levels).

%% Every leader sends to and receives from every other leader, in one step (depth 1).
direct_exchange([_]) ->
    #{};
direct_exchange(Leaders) ->
    maps:from_list([{L, [{1, Others, Others}]} || L <- Leaders, Others <- [lists:delete(L, Leaders)]]).

node_leaders({node, _, Ranks}, Leader) -> [Leader(Ranks)];
node_leaders({group, Children}, Leader) -> lists:sort(lists:append([node_leaders(C, Leader) || C <- Children])).

enumerate(List) -> lists:zip(lists:seq(0, length(List) - 1), List).

%% The reduce/broadcast tree: the root leads every group it is in; any other group's
%% leader is one of its node leaders: eligible first, then most schedulers, then
%% nearest to the parent's leader, then the lowest rank.
tree(Groups, Root, Input, Leader) ->
    vertices_of(ranks(Groups), lists:reverse(lead(Groups, Root, Input, Leader, []))).

vertices_of(Ranks, Edges) ->
    Base = maps:from_list([{R, #{parent => none, children => [], wrappers => []}} || R <- Ranks]),
    lists:foldl(fun({Child, Parent}, Acc) ->
                        Acc1 = maps:update_with(Child, fun(V) -> V#{parent => Parent} end, Acc),
                        maps:update_with(Parent, fun(V = #{children := C}) -> V#{children => C ++ [Child]} end, Acc1)
                end, Base, Edges).

lead({node, _, Ranks}, L, _Input, _Leader, Edges) ->
    lists:reverse([{R, L} || R <- Ranks, R =/= L], Edges);
lead({group, Children}, L, Input, Leader, Edges) ->
    Chosen = [case lists:member(L, ranks(C)) of
                  true -> {C, L};
                  false -> {C, choose_leader(C, L, Input, Leader)}
              end || C <- Children],
    Edges1 = lists:reverse([{CL, L} || {_, CL} <- Chosen, CL =/= L], Edges),
    lists:foldl(fun({C, CL}, E) -> lead(C, CL, Input, Leader, E) end, Edges1, Chosen).

choose_leader(Group, ParentLeader, #{nodes := Nodes, schedulers := Schedulers, eligible := Eligible,
                                     paths := Paths}, Leader) ->
    ParentPath = maps:get(element(ParentLeader + 1, Nodes), Paths, []),
    Keyed = [{{not (Eligible =:= all orelse lists:member(Node, Eligible)),
               -maps:get(Node, Schedulers, 0),
               -common_length(maps:get(Node, Paths, []), ParentPath),
               R}, R}
             || R <- node_leaders(Group, Leader), Node <- [element(R + 1, Nodes)]],
    element(2, lists:min(Keyed)).

common_length([X | A], [X | B]) -> 1 + common_length(A, B);
common_length(_, _) -> 0.
