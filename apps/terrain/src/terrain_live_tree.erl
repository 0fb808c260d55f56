%% @private
%% @doc Pure functions on the live tree (docs/DISTANCES.md, "Live topology"): a digest
%% that tells two trees apart, the removal of a node that keeps the names of its
%% networks, and the union of two trees by network names (a healed partition).
%%
%% The live tree is a `terrain_topology:tree()' whose networks are named: `{network,
%% Name, Options, Children}' (a three-tuple `{network, Name, Children}' is read with
%% empty options). The names come from the cluster spec or from the insertion that
%% made the network, and the live topology keeps them: a network left with one child
%% stays (with its name), only an empty one goes.
%%
%% A change travels as a delta from the tree before it (`delta/2', `patch/2'): the
%% networks on the way to what changed, each with its new options and its children as
%% runs of unchanged old children (by index), changed old children (their own delta)
%% and new subtrees. A join into a rack of a 256-node tree is a few hundred bytes.
-module(terrain_live_tree).

-export([digest/1,
         nodes_of/1,
         remove/2,
         misplaced/5,
         union/3,
         delta/2,
         patch/2]).

-export_type([delta/0]).

-type tree() :: terrain:topology_tree().

%% A tree's change: `same', a new subtree, or a network kept by name with its new
%% options and its children: runs of unchanged old children (`{same, From, To}', by
%% index in the old list), changed old children, new ones.
-opaque delta() :: same | {new, tree()} | {net, Options :: map() | none, [child_delta()]}.
-type child_delta() :: {same, pos_integer(), pos_integer()} | {old, pos_integer(), delta()} | {new, tree()}.

%% A network's name and options, on the way from the root down to a node.
-type step() :: {Name :: term(), Options :: map()}.

%%--------------------------------------------------------------------
%% API

%% @doc A digest of a tree (0 for none): equal versions with different digests are
%% different trees.
-spec digest(tree() | undefined) -> non_neg_integer().
digest(undefined) ->
    0;
digest(Tree) ->
    erlang:phash2(Tree, 1 bsl 32).

%% @doc The nodes of a tree, sorted ([] for none).
-spec nodes_of(tree() | undefined) -> [node()].
nodes_of(undefined) ->
    [];
nodes_of(Tree) ->
    lists:usort(leaves(Tree)).

%% @doc Removes a node; a network left empty goes, every other network stays with its
%% name and height (also one left with a single child). `{error, last_node}' when the
%% node is the tree's only node, `{error, not_a_member}' when it is not in the tree.
-spec remove(node(), tree()) -> {ok, tree()} | {error, last_node | not_a_member}.
remove(Node, Tree) ->
    case without(Node, Tree) of
        unchanged -> {error, not_a_member};
        empty -> {error, last_node};
        NewTree -> {ok, NewTree}
    end.

%% @doc Whether a re-measurement of `Node' moves it from its place in `Old' to its
%% place in `New' (`Pairs': its round trips `{Node, Other, Us}'; `Noise': the noise
%% floor, µs). A round trip outside the band of the level a tree predicts for it
%% (terrain_insert:bounds/3 with `Old''s levels) contradicts that tree. `move' when
%% `New' contradicts fewer of the round trips than `Old'; otherwise the tree is right
%% about Node and stale about the nodes whose round trips contradict `Old' (they moved:
%% docs/RELIABILITY.md, finding 9): `{keep, Them}', the caller keeps Node where it is
%% and re-measures them first.
-spec misplaced(node(), tree(), tree(), [{node(), node(), number()}], number()) -> move | {keep, [node()]}.
misplaced(Node, Old, New, Pairs, Noise) ->
    Levels = terrain_insert:levels(Old),
    Against = contradicted(Node, Old, Pairs, Levels, Noise),
    case length(contradicted(Node, New, Pairs, Levels, Noise)) < length(Against) of
        true -> move;
        false -> {keep, Against}
    end.

%% The nodes whose round trip from Node lies outside the band Tree predicts.
-spec contradicted(node(), tree(), [{node(), node(), number()}], [float()], number()) -> [node()].
contradicted(Node, Tree, Pairs, Levels, Noise) ->
    {ok, T} = terrain_topology:new(Tree),
    Nodes = terrain_topology:nodes(T),
    lists:usort([B || {A, B, D} <- Pairs, A =:= Node, lists:member(B, Nodes),
                      Predicted <- [terrain_topology:distance(T, Node, B)], Predicted > 0,
                      {Lo, Hi} <- [terrain_insert:bounds(Predicted, Levels, Noise)], D < Lo orelse D > Hi]).

%% @doc The union of two trees by network names: `Base' with every node of `Other'
%% that is in `Keep' and not in `Base', placed under the networks of the same names
%% as in `Other' (the networks `Base' lacks are created with `Other''s names and
%% heights). A node whose place cannot be found that way (different root names) or
%% whose place would make an invalid tree is left out: the caller places it by
%% measurement.
-spec union(tree(), tree() | undefined, [node()]) -> tree().
union(Base, undefined, _Keep) ->
    Base;
union(Base, Other, Keep) ->
    Missing = [N || N <- nodes_of(Other) -- nodes_of(Base), lists:member(N, Keep)],
    lists:foldl(fun(N, Acc) -> add(N, path(Other, N), Acc) end, Base, Missing).

%% @doc The change from `Old' to `New' (see the module doc).
-spec delta(tree(), tree()) -> delta().
delta(Tree, Tree) ->
    same;
delta(Old, New) ->
    case {key(Old), key(New)} of
        {{net, Name}, {net, Name}} ->
            OldChildren = children(Old),
            Index = maps:from_list(lists:zip([key(C) || C <- OldChildren], lists:seq(1, length(OldChildren)))),
            Kids = [case Index of
                        #{K := I} -> child_delta(I, lists:nth(I, OldChildren), C);
                        #{} -> {new, C}
                    end || C <- children(New), K <- [key(C)]],
            {net, options(New), runs(Kids)};
        _ ->
            {new, New}
    end.

%% @doc Applies a delta to the tree it was made from: `{ok, New}', or `error' when the
%% delta does not fit the tree (it was made from another one).
-spec patch(tree(), delta()) -> {ok, tree()} | error.
patch(Tree, Delta) ->
    try {ok, apply_delta(Tree, Delta)}
    catch throw:misfit -> error
    end.

%%--------------------------------------------------------------------
%% Internal

-spec child_delta(pos_integer(), tree(), tree()) -> child_delta().
child_delta(I, C, C) -> {same, I, I};
child_delta(I, Old, New) -> {old, I, delta(Old, New)}.

%% Consecutive unchanged children as one run.
-spec runs([child_delta()]) -> [child_delta()].
runs([{same, A, B}, {same, C, D} | Rest]) when C =:= B + 1 -> runs([{same, A, D} | Rest]);
runs([X | Rest]) -> [X | runs(Rest)];
runs([]) -> [].

-spec apply_delta(tree(), delta()) -> tree().
apply_delta(Tree, same) ->
    Tree;
apply_delta(_Tree, {new, New}) ->
    New;
apply_delta({node, _}, {net, _, _}) ->
    throw(misfit);
apply_delta(Net, {net, Options, Kids}) ->
    Old = list_to_tuple(children(Net)),
    Children = lists:append([child(Old, K) || K <- Kids]),
    case {Net, Options} of
        {{network, Name, _, _}, _} when is_map(Options) -> {network, Name, Options, Children};
        {{network, Name, _}, none} -> {network, Name, Children};
        _ -> throw(misfit)
    end.

-spec child(tuple(), child_delta()) -> [tree()].
child(Old, {same, From, To}) when To =< tuple_size(Old) -> [element(I, Old) || I <- lists:seq(From, To)];
child(Old, {old, I, D}) when I =< tuple_size(Old) -> [apply_delta(element(I, Old), D)];
child(_Old, {new, T}) -> [T];
child(_Old, _) -> throw(misfit).

-spec key(tree()) -> {node, node()} | {net, term()} | {other, term()}.
key({node, N}) -> {node, N};
key({network, Name, _, _}) -> {net, Name};
key({network, Name, C}) when is_list(C) -> {net, Name};
key(Other) -> {other, Other}.

-spec children(tree()) -> [tree()].
children({network, _, _, C}) -> C;
children({network, _, C}) -> C;
children({network, C}) -> C.

-spec options(tree()) -> map() | none.
options({network, _, O, _}) -> O;
options({network, _, _}) -> none.

-spec leaves(tree()) -> [node()].
leaves({node, N}) -> [N];
leaves({network, _, _, Children}) -> lists:append([leaves(C) || C <- Children]);
leaves({network, _, Children}) -> lists:append([leaves(C) || C <- Children]);
leaves({network, Children}) -> lists:append([leaves(C) || C <- Children]).

-spec without(node(), tree()) -> tree() | empty | unchanged.
without(Node, {node, Node}) ->
    empty;
without(_Node, {node, _}) ->
    unchanged;
without(Node, {network, Name, Children}) ->
    without(Node, {network, Name, #{}, Children});
without(Node, {network, Children}) ->
    case without_children(Node, Children) of
        unchanged -> unchanged;
        [] -> empty;
        New -> {network, New}
    end;
without(Node, {network, Name, Opts, Children}) ->
    case without_children(Node, Children) of
        unchanged -> unchanged;
        [] -> empty;
        New -> {network, Name, Opts, New}
    end.

-spec without_children(node(), [tree()]) -> [tree()] | unchanged.
without_children(Node, Children) ->
    {New, Changed} = lists:mapfoldl(fun(C, true) -> {[C], true};
                                       (C, false) ->
                                            case without(Node, C) of
                                                unchanged -> {[C], false};
                                                empty -> {[], true};
                                                NewC -> {[NewC], true}
                                            end
                                    end, false, Children),
    case Changed of
        true -> lists:append(New);
        false -> unchanged
    end.

%% The named networks from the root down to a node's parent ([] if the node is not
%% there or a network on the way has no name).
-spec path(tree(), node()) -> [step()].
path(Tree, Node) ->
    case path(Tree, Node, []) of
        {found, Steps} -> Steps;
        not_found -> []
    end.

-spec path(tree(), node(), [step()]) -> {found, [step()]} | not_found.
path({node, Node}, Node, Acc) ->
    {found, lists:reverse(Acc)};
path({node, _}, _Node, _Acc) ->
    not_found;
path({network, Name, Children}, Node, Acc) ->
    path({network, Name, #{}, Children}, Node, Acc);
path({network, _Children}, _Node, _Acc) ->
    not_found;
path({network, Name, Opts, Children}, Node, Acc) ->
    first_found([fun() -> path(C, Node, [{Name, Opts} | Acc]) end || C <- Children]).

-spec first_found([fun(() -> {found, [step()]} | not_found)]) -> {found, [step()]} | not_found.
first_found([]) -> not_found;
first_found([F | Rest]) ->
    case F() of
        not_found -> first_found(Rest);
        Found -> Found
    end.

%% Adds a node under the path of names, when the root has the path's first name and
%% the result is a valid tree; else the tree as it was.
-spec add(node(), [step()], tree()) -> tree().
add(Node, [{Root, _} | Rest], {network, Root, Opts, Children} = Tree) ->
    checked({network, Root, Opts, add_below(Node, Rest, Children)}, Tree);
add(Node, [{Root, _} | Rest], {network, Root, Children} = Tree) ->
    checked({network, Root, add_below(Node, Rest, Children)}, Tree);
add(_Node, _Path, Tree) ->
    Tree.

-spec checked(tree(), tree()) -> tree().
checked(New, Old) ->
    case terrain_topology:new(New) of
        {ok, _} -> New;
        {error, _} -> Old
    end.

-spec add_below(node(), [step()], [tree()]) -> [tree()].
add_below(Node, [], Children) ->
    Children ++ [{node, Node}];
add_below(Node, [{Name, Opts} | Rest] = Path, Children) ->
    case lists:splitwith(fun(C) -> name(C) =/= {ok, Name} end, Children) of
        {Before, [{network, Name, O, C} | After]} ->
            Before ++ [{network, Name, O, add_below(Node, Rest, C)} | After];
        {Before, [{network, Name, C} | After]} ->
            Before ++ [{network, Name, add_below(Node, Rest, C)} | After];
        {_, []} ->
            _ = Opts,
            Children ++ [chain(Node, Path)]
    end.

-spec chain(node(), [step()]) -> tree().
chain(Node, []) -> {node, Node};
chain(Node, [{Name, Opts} | Rest]) -> {network, Name, Opts, [chain(Node, Rest)]}.

-spec name(tree()) -> {ok, term()} | none.
name({network, Name, _, _}) -> {ok, Name};
name({network, Name, C}) when is_list(C) -> {ok, Name};
name(_) -> none.
