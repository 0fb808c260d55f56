%% @private
%% @doc Distance-aware placement of a process tree (RELEASE D3.5, §4.6, Figures 27–28):
%% assign the vertices of an application's process tree to nodes so that children sit
%% near their parents and no root-to-leaf path crosses more than one slow link where
%% the topology allows it.
%%
%% A process tree: `{vertex, Name, Children}' or `{vertex, Name, Eligible, Children}'
%% where `Eligible' is the list of nodes the vertex may run on (the caller resolves a
%% vertex's predicates to it; {@link terrain:place_tree/2} does). Names are unique.
%%
%% The method follows the hierarchy of the topology top-down. A vertex is placed
%% within a network; its children's subtrees are packed into that network's child
%% networks, largest subtree first, each into the child network with the most free
%% capacity that can hold it whole (so a subtree, once it has crossed a link, stays
%% below it), and the vertex itself goes to a node of the child network that received
%% most of its children. Capacity per node is `capacity' vertices (default ⌈V / N⌉, so
%% a tree is spread over all the nodes). Where a subtree cannot stay below one link
%% (not enough capacity, or predicates exclude the nodes there), it spills to the
%% parent network. Capacity is a target, not a limit: a vertex whose eligible nodes
%% are all full goes to the least loaded of them. Placement fails only for a vertex
%% that no candidate node is eligible for.
%%
%% Cost: every tree edge costs the distance between its endpoints' nodes. Reported: the
%% sum and the maximum over root-to-leaf paths, the largest number of slow edges
%% (level `far' or beyond) on one path, and the same for uniformly random placements
%% under the same eligibility and capacity, averaged over `random_rounds' draws.
-module(terrain_place).

%% API
-export([check_tree/1,
         place_tree/4,
         place/3,
         cost/3,
         vertices/1]).

%% exports_not_used: The placement algorithm on resolved trees, checked on its own by terrain_place_tests
%% and prop_place.
-ignore_xref([{cost, 3}, {place, 3}, {vertices, 1}]).

-export_type([process_tree/0, placement/0, cost/0]).

-type process_tree() :: {vertex, term(), [process_tree()]}
                      | {vertex, term(), [node()] | #{node() => true} | all, [process_tree()]}.
-type placement() :: #{term() => node()}.
-type cost() :: #{sum := number(), max := number(), max_slow := non_neg_integer(), paths := non_neg_integer()}.

-type options() :: #{capacity => pos_integer(),     % vertices per node (default ⌈V / N⌉)
                     random_rounds => pos_integer(), % random placements to average (default 20)
                     rand_state => rand:state()}.    % for the random baseline (default seeded from the tree)

%%--------------------------------------------------------------------
%% API

%% @doc `ok' for a process tree as {@link terrain:place_tree/2} takes it: vertices
%% `{vertex, Name, Children}' or `{vertex, Name, Preds, Children}' with valid
%% predicates and unique names.
-spec check_tree(term()) -> ok | {error, {bad_process_tree, iodata()} | {bad_predicate, term()}}.
check_tree(Tree) ->
    try
        Names = tree_names(Tree),
        case Names -- lists:usort(Names) of
            [] -> ok;
            [Dup | _] -> {error, {bad_process_tree, io_lib:format("vertex name ~0tp is used more than once", [Dup])}}
        end
    catch
        throw:{bad_vertex, V} ->
            {error, {bad_process_tree, io_lib:format("expected {vertex, Name, Children} or {vertex, Name, Preds, Children}, got ~0tP", [V, 6])}};
        throw:{bad_predicate, _} = Bad ->
            {error, Bad}
    end.

%% @doc Resolves every vertex's predicates to its eligible candidates (attributes
%% fetched once for the whole tree, from the candidates that answer) and places the
%% tree on those candidates; see {@link terrain:place_tree/2}.
-spec place_tree(terrain:process_tree(), terrain_topology:topology(), [node()], terrain:place_options()) ->
          {ok, #{assignment := placement(), cost := cost(), random := cost()}} | {error, term()}.
place_tree(Tree, Topology, Candidates, Opts) ->
    Vertices = vertices(Tree),
    AllPreds = [P || {_, P, _, _} <- Vertices, P =/= all],
    Names = lists:usort(lists:append([terrain_select:attr_names(P) || P <- AllPreds])),
    case terrain_choose:context(AllPreds) of
        {ok, Ctx} ->
            {Values, Unreachable} = terrain_choose:fetch(Candidates, Names, Opts),
            Reachable = [N || N <- Candidates, not maps:is_key(N, Unreachable)],
            Resolved = resolve_tree(Tree, Reachable, Values, Ctx),
            place(Resolved, Topology, maps:merge(maps:with([capacity, random_rounds], Opts), #{nodes => Reachable}));
        {error, _} = Error ->
            Error
    end.

%% @doc Places `Tree' on `Nodes' (which must all be in the topology or not; nodes
%% outside it count as `anywhere'). Returns the placement and its cost against random.
-spec place(process_tree(), terrain_topology:topology(), #{nodes := [node()]} | options()) ->
          {ok, #{assignment := placement(), cost := cost(), random := cost()}}
        | {error, {no_node, term()}}.
place(Tree0, Topology, #{nodes := Nodes} = Options) ->
    Tree = as_sets(Tree0),
    Vertices = vertices(Tree),
    Capacity = maps:get(capacity, Options, ceil_div(length(Vertices), max(1, length(Nodes)))),
    Free0 = maps:from_list([{N, Capacity} || N <- Nodes]),
    case check_eligible(Vertices, Nodes) of
        ok ->
            Known = [N || N <- Nodes, terrain_topology:member(Topology, N)],
            Root = #{topology => Topology, unknown => Nodes -- Known, parent => none},
            improved(place_vertex(Tree, [1], Root, Free0, #{}), Tree, Topology, Nodes, Capacity, Options);
        {error, _} = Error ->
            Error
    end.

%% The last steps of place/3: improve the greedy placement, if there is one, and
%% compare it with random placements.
improved({ok, Greedy, _Free}, Tree, Topology, Nodes, Capacity, Options) ->
    Assignment = improve(Tree, Greedy, Topology, Nodes, Capacity),
    Rounds = maps:get(random_rounds, Options, 20),
    Rand = maps:get(rand_state, Options, rand:seed_s(exsss, erlang:phash2(Tree))),
    {ok, #{assignment => Assignment,
           cost => cost(Tree, Assignment, Topology),
           random => random_cost(Tree, Topology, Nodes, #{capacity => Capacity,
                                                          random_rounds => Rounds,
                                                          rand_state => Rand})}};
improved({error, _} = Error, _Tree, _Topology, _Nodes, _Capacity, _Options) ->
    Error.

%% @doc The cost of a placement: sum and maximum over root-to-leaf paths of the summed
%% edge distances, and the most slow edges on one path.
-spec cost(process_tree(), placement(), terrain_topology:topology()) -> cost().
cost(Tree, Assignment, Topology) ->
    Paths = paths(Tree, Assignment, {Topology, terrain_topology:slow_distance(Topology)}, 0, 0, []),
    #{sum => lists:sum([C || {C, _} <- Paths]),
      max => lists:max([C || {C, _} <- Paths]),
      max_slow => lists:max([S || {_, S} <- Paths]),
      paths => length(Paths)}.

%% The average cost of random placements with the same eligibility and capacity.
-spec random_cost(process_tree(), terrain_topology:topology(), [node()], options()) -> cost().
random_cost(Tree0, Topology, Nodes, Options) ->
    Tree = as_sets(Tree0),
    Rounds = maps:get(random_rounds, Options, 20),
    Vertices = vertices(Tree),
    Capacity = maps:get(capacity, Options, ceil_div(length(Vertices), max(1, length(Nodes)))),
    {Costs, _} = lists:mapfoldl(fun(_, R0) ->
                                        {A, R1} = random_assignment(Vertices, Nodes, Capacity, R0),
                                        {cost(Tree, A, Topology), R1}
                                end, maps:get(rand_state, Options, rand:seed_s(exsss, 1)), lists:seq(1, Rounds)),
    Mean = fun(K) -> lists:sum([maps:get(K, C) || C <- Costs]) / Rounds end,
    #{sum => Mean(sum), max => Mean(max), max_slow => round(Mean(max_slow)), paths => maps:get(paths, hd(Costs))}.

%% @doc The vertices as `{Name, Eligible, Children, SubtreeSize}', depth-first.
-spec vertices(process_tree()) -> [{term(), [node()] | #{node() => true} | all, [process_tree()], pos_integer()}].
vertices({vertex, Name, Children}) ->
    vertices({vertex, Name, all, Children});
vertices({vertex, Name, Eligible, Children}) ->
    Below = lists:append([vertices(C) || C <- Children]),
    [{Name, Eligible, Children, 1 + length(Below)} | Below].

%%--------------------------------------------------------------------
%% Placement

%% Eligible node lists become sets (maps) once, so that membership is cheap.
as_sets({vertex, Name, Children}) ->
    {vertex, Name, all, [as_sets(C) || C <- Children]};
as_sets({vertex, Name, all, Children}) ->
    {vertex, Name, all, [as_sets(C) || C <- Children]};
as_sets({vertex, Name, Eligible, Children}) when is_list(Eligible) ->
    {vertex, Name, maps:from_list([{N, true} || N <- Eligible]), [as_sets(C) || C <- Children]};
as_sets({vertex, Name, Eligible, Children}) when is_map(Eligible) ->
    {vertex, Name, Eligible, [as_sets(C) || C <- Children]}.

check_eligible(Vertices, Nodes) ->
    case [Name || {Name, Eligible, _, _} <- Vertices, Eligible =/= all,
                  [N || N <- Nodes, eligible(N, Eligible)] =:= []] of
        [] -> ok;
        [Name | _] -> {error, {no_node, {vertex, Name}}}
    end.

%% place_vertex(Tree, GroupId, Ctx, Free, Acc) places a subtree within the network
%% GroupId (a path of child positions in the topology).
place_vertex({vertex, Name, Children}, Group, Ctx, Free, Acc) ->
    place_vertex({vertex, Name, all, Children}, Group, Ctx, Free, Acc);
place_vertex({vertex, _, _, _} = Tree, Group, Ctx, Free, Acc) ->
    SubGroups = subgroups(Ctx, Group),
    %% A subtree that fits whole into a child network goes down into it first, so that
    %% all of its edges stay below that network's link.
    case pick_subgroup(subtree_size(Tree), SubGroups, maps:from_list([{G, room(Ctx, G, Free)} || G <- SubGroups])) of
        none -> place_here(Tree, Group, SubGroups, Ctx, Free, Acc);
        Below -> place_vertex(Tree, Below, Ctx, Free, Acc)
    end.

place_here({vertex, Name, Eligible, Children}, Group, SubGroups, Ctx, Free, Acc) ->
    %% Pack the children's subtrees into the child networks, largest first.
    Sized = lists:sort(fun({S1, _}, {S2, _}) -> S1 >= S2 end, [{subtree_size(C), C} || C <- Children]),
    {Packing, _} = lists:mapfoldl(fun({Size, Child}, Room) ->
                                          Target = pick_subgroup(Size, SubGroups, Room),
                                          Room1 = case Target of
                                                      none -> Room;
                                                      _ -> maps:update_with(Target, fun(R) -> R - Size end, Room)
                                                  end,
                                          {{Child, Target}, Room1}
                                  end, maps:from_list([{G, room(Ctx, G, Free)} || G <- SubGroups]), Sized),
    %% The vertex goes where most of its children go.
    Preferred = most_common([T || {_, T} <- Packing, T =/= none]),
    case pick_node(Eligible, Ctx, Preferred, Group, Free) of
        {ok, Node} ->
            Free1 = maps:update_with(Node, fun(C) -> C - 1 end, Free),
            lists:foldl(fun({Child, Target}, {ok, A, F}) ->
                                Within = case Target of none -> Group; _ -> Target end,
                                place_vertex(Child, Within, Ctx#{parent => Node}, F, A);
                           (_, Error) ->
                                Error
                        end, {ok, Acc#{Name => Node}, Free1}, Packing);
        error ->
            {error, {no_node, {vertex, Name}}}
    end.

subtree_size({vertex, _, Children}) -> 1 + lists:sum([subtree_size(C) || C <- Children]);
subtree_size({vertex, _, _, Children}) -> 1 + lists:sum([subtree_size(C) || C <- Children]).

subgroups(#{topology := T}, Group) ->
    terrain_topology:subnetworks(T, Group).

%% The nodes of a network; the root also holds the nodes the topology does not know.
members(#{topology := T, unknown := Unknown}, [1]) ->
    terrain_topology:nodes(T) ++ Unknown;
members(#{topology := T}, Group) ->
    terrain_topology:network_members(T, Group).

room(Ctx, Group, Free) ->
    lists:sum([maps:get(N, Free, 0) || N <- members(Ctx, Group)]).

%% The child network with the most room among those that can hold the subtree whole;
%% `none' (stay in the parent network) when none can.
pick_subgroup(Size, SubGroups, Room) ->
    case lists:sort(fun(A, B) -> maps:get(A, Room) >= maps:get(B, Room) end,
                    [G || G <- SubGroups, maps:get(G, Room) >= Size]) of
        [Best | _] -> Best;
        [] -> none
    end.

most_common([]) -> none;
most_common(Targets) ->
    Counts = lists:foldl(fun(T, M) -> maps:update_with(T, fun(C) -> C + 1 end, 1, M) end, #{}, Targets),
    element(2, lists:max([{C, T} || {T, C} <- maps:to_list(Counts)])).

%% A node with room for the vertex: its parent's node when that lies where the vertex
%% is to go (distance 0), else the node with the most room in the preferred child
%% network, else in this network, else anywhere; first in order on ties.
pick_node(Eligible, #{parent := Parent} = Ctx, Preferred, Group, Free) ->
    Where = case Preferred of none -> Group; _ -> Preferred end,
    case Parent =/= none andalso maps:get(Parent, Free, 0) > 0 andalso eligible(Parent, Eligible)
         andalso lists:member(Parent, members(Ctx, Where)) of
        true -> {ok, Parent};
        false -> pick_in([G || G <- [Preferred, Group, [1]], G =/= none], Eligible, Ctx, Free)
    end.

pick_in([], Eligible, Ctx, Free) ->
    %% Every eligible node is full: capacity is a balancing target, so the least
    %% loaded eligible node takes the vertex.
    case [N || N <- members(Ctx, [1]), eligible(N, Eligible)] of
        [] -> error;
        Candidates ->
            {_, Node} = lists:min([{-maps:get(N, Free, 0), N} || N <- Candidates]),
            {ok, Node}
    end;
pick_in([Group | Rest], Eligible, Ctx, Free) ->
    case [N || N <- members(Ctx, Group), maps:get(N, Free, 0) > 0, eligible(N, Eligible)] of
        [] -> pick_in(Rest, Eligible, Ctx, Free);
        Candidates ->
            {_, Node} = lists:min([{-maps:get(N, Free), N} || N <- Candidates]),
            {ok, Node}
    end.

eligible(_Node, all) -> true;
eligible(Node, Eligible) -> maps:is_key(Node, Eligible).

%%--------------------------------------------------------------------
%% Local improvement
%%
%% The sum over root-to-leaf paths equals the sum over tree edges of (leaves below
%% the edge) × (distance of the edge), so moving one vertex, or swapping two, changes
%% it only through the edges at those vertices. Moves to a node with room and swaps are
%% applied while they lower the sum (at most ?IMPROVE_PASSES passes), with distances
%% between nodes precomputed in a tuple matrix.

-define(IMPROVE_PASSES, 4).

improve(Tree, Assignment, Topology, Nodes, Capacity) ->
    NodeList = lists:usort(maps:values(Assignment) ++ Nodes),
    Index = maps:from_list(lists:zip(NodeList, lists:seq(1, length(NodeList)))),
    Dist = list_to_tuple([list_to_tuple([terrain_topology:distance(Topology, A, B) || B <- NodeList]) || A <- NodeList]),
    Vertices = vertices(Tree),
    Adj = adjacency(Tree),
    Eligible = maps:from_list([{Name, case E of
                                          all -> all;
                                          _ -> maps:from_list([{maps:get(N, Index), true} || N <- NodeList, eligible(N, E)])
                                      end} || {Name, E, _, _} <- Vertices]),
    Pos0 = maps:map(fun(_, N) -> maps:get(N, Index) end, Assignment),
    Load0 = lists:foldl(fun(I, L) -> maps:update_with(I, fun(C) -> C + 1 end, 1, L) end,
                        maps:from_list([{maps:get(N, Index), 0} || N <- Nodes]), maps:values(Pos0)),
    Names = [Name || {Name, _, _, _} <- Vertices],
    Ctx = #{dist => Dist, adj => Adj, eligible => Eligible, capacity => Capacity,
            open => [maps:get(N, Index) || N <- Nodes]},
    %% `open': the nodes the caller offered (the assignment may only use those).
    Pos = passes(?IMPROVE_PASSES, Names, Ctx, Pos0, Load0),
    Nodes1 = list_to_tuple(NodeList),
    maps:map(fun(_, I) -> element(I, Nodes1) end, Pos).

passes(0, _Names, _Ctx, Pos, _Load) ->
    Pos;
passes(N, Names, Ctx, Pos0, Load0) ->
    {Pos1, Load1, Moved} = lists:foldl(fun(V, Acc) -> best_move(V, Ctx, Acc) end, {Pos0, Load0, false}, Names),
    {Pos2, Swapped} = swaps(Names, Ctx, Pos1),
    case Moved orelse Swapped of
        true -> passes(N - 1, Names, Ctx, Pos2, Load1);
        false -> Pos2
    end.

%% Edge cost of vertex V sitting on node I, given the others where they are.
local(V, I, #{dist := Dist, adj := Adj}, Pos, Except) ->
    lists:sum([W * element(maps:get(O, Pos), element(I, Dist)) || {O, W} <- maps:get(V, Adj), O =/= Except]).

best_move(V, #{eligible := Eligible, capacity := Capacity, open := Open} = Ctx, {Pos, Load, Moved}) ->
    From = maps:get(V, Pos),
    Now = local(V, From, Ctx, Pos, none),
    Allowed = maps:get(V, Eligible),
    Options = [{local(V, I, Ctx, Pos, none), I} || I <- Open, I =/= From, may_use(I, Allowed),
                                                    maps:get(I, Load, 0) < Capacity],
    case Options of
        [] -> {Pos, Load, Moved};
        _ ->
            {Best, To} = lists:min(Options),
            case Best < Now - 1.0e-12 of
                true ->
                    Load1 = maps:update_with(To, fun(C) -> C + 1 end, 1, maps:update_with(From, fun(C) -> C - 1 end, Load)),
                    {Pos#{V => To}, Load1, true};
                false ->
                    {Pos, Load, Moved}
            end
    end.

%% A swap can only help by bringing a vertex onto a node its tree neighbours use, so
%% the partners tried for V are the vertices sitting on its neighbours' nodes.
swaps(Names, #{adj := Adj} = Ctx, Pos0) ->
    lists:foldl(
      fun(V, {Pos, Swapped}) ->
              Occupants = occupants(Pos),
              Targets = lists:usort([maps:get(O, Pos) || {O, _} <- maps:get(V, Adj)]) -- [maps:get(V, Pos)],
              lists:foldl(fun(U, {P, S}) -> try_swap(V, U, Ctx, P, S) end,
                          {Pos, Swapped}, lists:append([maps:get(I, Occupants, []) || I <- Targets]))
      end, {Pos0, false}, Names).

occupants(Pos) ->
    maps:fold(fun(V, I, Acc) -> maps:update_with(I, fun(L) -> [V | L] end, [V], Acc) end, #{}, Pos).

try_swap(V, U, #{eligible := Eligible} = Ctx, Pos, Swapped) ->
    IV = maps:get(V, Pos),
    IU = maps:get(U, Pos),
    case IV =/= IU andalso may_use(IU, maps:get(V, Eligible)) andalso may_use(IV, maps:get(U, Eligible)) of
        false ->
            {Pos, Swapped};
        true ->
            Before = local(V, IV, Ctx, Pos, U) + local(U, IU, Ctx, Pos, V),
            After = local(V, IU, Ctx, Pos, U) + local(U, IV, Ctx, Pos, V),
            case After < Before - 1.0e-12 of
                true -> {Pos#{V => IU, U => IV}, true};
                false -> {Pos, Swapped}
            end
    end.

may_use(_I, all) -> true;
may_use(I, Allowed) -> maps:is_key(I, Allowed).

%% For every vertex, its tree neighbours with the edge weight (leaves below the edge).
adjacency(Tree) ->
    adjacency(Tree, none, #{}).

adjacency({vertex, Name, Children}, Parent, Acc) ->
    adjacency({vertex, Name, all, Children}, Parent, Acc);
adjacency({vertex, Name, _, Children}, Parent, Acc0) ->
    Acc1 = case Parent of
               none -> maps:put(Name, maps:get(Name, Acc0, []), Acc0);
               {P, W} ->
                   maps:update_with(P, fun(L) -> [{Name, W} | L] end, [{Name, W}],
                                    maps:update_with(Name, fun(L) -> [{P, W} | L] end, [{P, W}], Acc0))
           end,
    lists:foldl(fun(C, A) -> adjacency(C, {Name, leaves(C)}, A) end, Acc1, Children).

leaves({vertex, _, []}) -> 1;
leaves({vertex, _, _, []}) -> 1;
leaves({vertex, _, Children}) -> lists:sum([leaves(C) || C <- Children]);
leaves({vertex, _, _, Children}) -> lists:sum([leaves(C) || C <- Children]).

%%--------------------------------------------------------------------
%% Cost and random baseline

paths({vertex, Name, Children}, A, T, Cost, Slow, Parent) ->
    paths({vertex, Name, all, Children}, A, T, Cost, Slow, Parent);
paths({vertex, Name, _, Children}, A, T, Cost, Slow, Parent) ->
    Node = maps:get(Name, A),
    {Cost1, Slow1} = case Parent of
                         [] -> {Cost, Slow};
                         P ->
                             {Topology, SlowAt} = T,
                             D = terrain_topology:distance(Topology, P, Node),
                             {Cost + D, Slow + case D >= SlowAt of true -> 1; false -> 0 end}
                     end,
    case Children of
        [] -> [{Cost1, Slow1}];
        _ -> lists:append([paths(C, A, T, Cost1, Slow1, Node) || C <- Children])
    end.

%% Each vertex on a uniformly random eligible node that still has room (or on any
%% eligible node when none has). Eligible nodes are found by drawing from the open
%% nodes and rejecting ineligible ones (uniform over the eligible open nodes); after
%% a few misses the open nodes are filtered instead.
random_assignment(Vertices, Nodes, Capacity, Rand0) ->
    {Assignment, _, _, Rand} =
        lists:foldl(fun({Name, Eligible, _, _}, {A, Open, Free, R}) ->
                            {Node, R1} = random_node(Open, Eligible, Nodes, R),
                            Left = maps:get(Node, Free, 1) - 1,
                            Open1 = case Left > 0 of true -> Open; false -> lists:delete(Node, Open) end,
                            {A#{Name => Node}, Open1, Free#{Node => Left}, R1}
                    end, {#{}, Nodes, maps:from_list([{N, Capacity} || N <- Nodes]), Rand0}, Vertices),
    {Assignment, Rand}.

-define(DRAWS, 8).

random_node(Open, Eligible, Nodes, R) ->
    case draw(Open, length(Open), Eligible, ?DRAWS, R) of
        {ok, Node, R1} -> {Node, R1};
        {miss, R1} ->
            Pool = case [N || N <- Open, eligible(N, Eligible)] of
                       [] -> [N || N <- Nodes, eligible(N, Eligible)];
                       P -> P
                   end,
            {I, R2} = rand:uniform_s(length(Pool), R1),
            {lists:nth(I, Pool), R2}
    end.

draw(_Open, 0, _Eligible, _Left, R) -> {miss, R};
draw(_Open, _Len, _Eligible, 0, R) -> {miss, R};
draw(Open, Len, Eligible, Left, R) ->
    {I, R1} = rand:uniform_s(Len, R),
    Node = lists:nth(I, Open),
    case eligible(Node, Eligible) of
        true -> {ok, Node, R1};
        false -> draw(Open, Len, Eligible, Left - 1, R1)
    end.

ceil_div(A, B) -> (A + B - 1) div B.

%%--------------------------------------------------------------------
%% Process trees with predicates

tree_names({vertex, Name, Children}) when is_list(Children) ->
    [Name | lists:append([tree_names(C) || C <- Children])];
tree_names({vertex, Name, Preds, Children}) when is_list(Children) ->
    case terrain_select:validate(Preds) of
        ok -> [Name | lists:append([tree_names(C) || C <- Children])];
        {error, Bad} -> throw(Bad)
    end;
tree_names(Other) ->
    throw({bad_vertex, Other}).

resolve_tree({vertex, Name, Children}, Nodes, Values, Ctx) ->
    {vertex, Name, [resolve_tree(C, Nodes, Values, Ctx) || C <- Children]};
resolve_tree({vertex, Name, Preds, Children}, Nodes, Values, Ctx) ->
    {vertex, Name, terrain_select:select(Nodes, Preds, Values, Ctx),
     [resolve_tree(C, Nodes, Values, Ctx) || C <- Children]}.
