%% @private
%% @doc Placing one node into a known topology by measuring it against a few
%% representatives, top-down (docs/TOPOLOGY_DISCOVERY.md, "Tree-guided probing").
%%
%% The tree is a `terrain_topology:tree()' whose networks all carry a measured
%% `height' (µs of round trip, as `terrain topology' and the tree probe write them).
%% The caller supplies the measurement: `Measure(Node, Other)' returns
%% `{ok, RoundTripMicroseconds}' or `{error, Why}'. Nothing else is touched, so the
%% function is pure given its callback (the random choices come from `seed').
%%
%% == The descent ==
%% At a network N of height H, with children C1 … Ck (networks or nodes), the node
%% is measured against `representatives' members of each child (a member already
%% measured at the level above counts); d(Ci) is the smallest of those round trips
%% (delays only add). With S = √`gap':
%% <ul>
%% <li>d* = min d(Ci) above H·S: the node is outside N; the caller wraps N and the
%%     node in a new network of height d* (a new root at the top).</li>
%% <li>some d(Ci) ≤ H/S: the node belongs to the nearest such child: into a network
%%     child it descends, with a node child it forms a new network of height d(Ci).</li>
%% <li>otherwise: the node joins N directly, as a new child.</li>
%% </ul>
%% A decision that creates structure (a new network, a new direct child, outside)
%% is what one inflated round trip to the right child's representative would cause,
%% so it is re-checked first: one more member of every network child is measured and
%% the level decided again.
%%
%% == Confirmation and repair ==
%% After the placement, `confirm' more members are measured, one per ancestor
%% network from the lowest up, each taken from a child of that ancestor other than
%% the node's own, so that its predicted round trip is the ancestor's height. A round
%% trip below prediction/S or above prediction·S contradicts the placement: the
%% descent is run again from the original tree with one more representative per
%% child, every round trip measured so far taking part (so a member that measured
%% close pulls the node to it). At most `retries' times; the last placement stands.
%%
%% Heights: a network's height is the round trip that created it (a node joining
%% another: their round trip; a network wrapped: the smallest round trip from the
%% node to it), a typical round trip across the network rather than its diameter, so
%% that the thresholds do not drift upwards with the largest of many noisy values.
%% When the node measures near every child of a network (below height/S), the
%% height was overestimated (made from one inflated round trip) and is lowered to
%% the largest of those round trips; re-checked first with one more member of every
%% network child, a near child with a member not near holds a misplaced node (a stale
%% tree: in an ultrametric all members of a sibling are equally far) and does not
%% count as near, nor does a child of several members with only one measured (two
%% children that look near are re-checked even when fewer count as near). When
%% it measures near two or more children but
%% not all, those children are near each other too (ultrametric inequality) and are
%% merged into one new network, which the node then enters (re-checked the same way,
%% merging only the children that count as near). Finally, along the
%% node's path, a child network at least height/S high is the same level as its
%% parent and is dissolved into it, and so are its own child networks that high (a
%% network the node formed below a height lowered under it would be higher than its
%% parent, which terrain_topology refuses).
-module(terrain_insert).

%% API
-export([insert/4,
         remove/2,
         levels/1,
         bounds/2,
         bounds/3,
         format_error/1]).

-export_type([options/0, measure/0, pair/0, error_reason/0, model/0]).

%% The options, documented with the type in the public module.
-type options() :: terrain:insert_options().
-type measure() :: terrain:measure().
-type pair() :: terrain:measured_pair().
-type error_reason() :: {insert, term()}.

-define(DEFAULTS, #{representatives => 1, confirm => 2, retries => 2, attempts => 3}).

%% The separation of levels: `{gap, S}' (the override: every level S² apart) or
%% `{levels, Ls, F}', the typical round trip of each level, ascending, and the noise
%% floor F (µs): two round trips closer than 2F are not told apart.
-type model() :: {gap, float()} | {levels, [float(), ...], float()}.

%% Without a model (a tree without heights yet), levels are assumed this far apart.
-define(DEFAULT_GAP, 10).
%% Two levels of the model closer than this are one level (jitter of a few per cent
%% spreads one level's round trips over about this much).
-define(SAME_LEVEL, 1.3).
%% Two levels whose round trips differ by less than this many times the noise (the
%% jitter of one measurement) are one level, and a band reaches at least this far
%% from its network's height.
-define(NOISE_LEVELS, 2).
%% In a network with no level of the model below it, at most this many of its node
%% children are measured besides those measured already (a flat group: its members
%% are all equally far, and a twin, a member nearer than the group's height, can be
%% told only by measuring it). 2 when the caller gives the levels (option `levels':
%% a model it measured, such as the tree probe's seed measured all pairs; 4 cost 39%
%% of the pairs on a 16-thread CPU of two flat sockets); 4 when the model is read from
%% the tree alone (a tree built by insertion has measured few pairs inside its groups,
%% so a level below its lowest is likelier unseen: with 2, a tree built from one node
%% missed a twin among 3 root nodes, and one among the 4 nodes of a group whose two
%% twin levels the tree had not shown yet).
-define(FLAT_SAMPLE, 2).
-define(FLAT_SAMPLE_TREE_MODEL, 4).

%% The state of one insertion: the options, the random state, and every round trip
%% measured so far (the node against Other), newest first.
%% The structural re-check passes over a network child whose member's latency profile
%% differs from the node's ?FOREIGN_FACTOR times more than from another member's, over
%% at least ?PROFILE_EVIDENCE common members (`foreign/4').
-define(FOREIGN_FACTOR, 4).
-define(PROFILE_EVIDENCE, 3).
-define(TWIN_GAP, 0.02).

-record(ctx, {node :: node(),
              measure :: measure(),
              reps :: pos_integer(),
              attempts :: pos_integer(),
              model :: model(),
              flat_sample :: pos_integer(),
              known :: undefined | fun((node(), node()) -> number() | undefined),
              name :: term(),
              rand :: rand:state(),
              cache = #{} :: #{node() => number() | failed},
              pairs = [] :: [pair()]}).

%%--------------------------------------------------------------------
%% API

%% @doc Inserts `Node' into `Tree' (see the module doc). Returns the new tree and the
%% round trips measured, `{Node, Other, RoundTrip}', in the order they were measured;
%% failed measurements are left out.
-spec insert(node(), terrain_topology:tree(), measure(), options()) ->
          {ok, terrain_topology:tree(), [pair()]} | {error, error_reason()}.
insert(Node, Tree, Measure, Options) when is_atom(Node), is_function(Measure, 2) ->
    case validate_options(Options) of
        {ok, Opts} ->
            case check_tree(Tree, Node) of
                ok -> place(Node, Tree, Measure, Opts);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Removes a node from a tree: a network left with one child is replaced by that
%% child (the root by its only network child, if it has one); a network left empty
%% goes. The heights stay. `{error, _}' if the node is not in the tree or is its only
%% node.
-spec remove(node(), terrain_topology:tree()) -> {ok, terrain_topology:tree()} | {error, error_reason()}.
remove(Node, Tree) ->
    case without(Node, Tree) of
        unchanged -> {error, {insert, {not_a_member, Node}}};
        empty -> {error, {insert, {last_node, Node}}};
        {network, _, _, [{network, _, _, _} = Only]} -> {ok, Only};
        NewTree -> {ok, NewTree}
    end.

%% Validates options and fills in the defaults (except `seed' and `name', which
%% default to values derived from the node).
-spec validate_options(term()) -> {ok, options()} | {error, error_reason()}.
validate_options(Options) ->
    case terrain_options:check(Options, option_checks()) of
        ok -> {ok, maps:merge(?DEFAULTS, Options)};
        {error, Reason} -> {error, {insert, Reason}}
    end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({insert, {bad_option, Key, Value}}) ->
    io_lib:format("bad value for insertion option ~0tp: ~0tp (~ts)", [Key, Value, option_help(Key)]);
format_error({insert, {unknown_option, Key}}) ->
    io_lib:format("unknown insertion option ~0tp (known: attempts, confirm, gap, levels, name, noise, "
                  "representatives, retries, seed)", [Key]);
format_error({insert, {bad_options, Options}}) ->
    io_lib:format("insertion options must be a map, got ~0tP", [Options, 8]);
format_error({insert, {already_a_member, Node}}) ->
    io_lib:format("~0tp is already in the tree", [Node]);
format_error({insert, {not_a_member, Node}}) ->
    io_lib:format("~0tp is not in the tree", [Node]);
format_error({insert, {last_node, Node}}) ->
    io_lib:format("~0tp is the only node of the tree; a tree cannot be empty", [Node]);
format_error({insert, {no_height, Name}}) ->
    io_lib:format("network ~0tp has no measured height: insertion needs a height on every network "
                  "({network, Name, #{height => Us}, Children})", [Name]);
format_error({insert, {bad_tree, Term}}) ->
    io_lib:format("not a topology tree: ~0tP", [Term, 8]);
format_error({insert, {no_measurement, Node, Why}}) ->
    io_lib:format("no round trip to ~0tp could be measured (last error: ~0tP)", [Node, Why, 8]).

%%--------------------------------------------------------------------
%% Options and the tree

%% The check of each option (terrain_options).
-spec option_checks() -> terrain_options:checks().
option_checks() ->
    #{representatives => fun(V) -> is_integer(V) andalso V >= 1 end,
      confirm => fun(V) -> is_integer(V) andalso V >= 0 end,
      gap => fun(V) -> is_number(V) andalso V > 1 end,
      levels => fun(V) -> is_list(V) andalso V =/= [] andalso lists:all(fun is_round_trip/1, V) end,
      noise => fun(V) -> is_number(V) andalso V >= 0 end,
      retries => fun(V) -> is_integer(V) andalso V >= 0 end,
      attempts => fun(V) -> is_integer(V) andalso V >= 1 end,
      seed => fun erlang:is_integer/1,
      known => fun(V) -> is_function(V, 2) end,
      name => fun(_) -> true end}.

-spec is_round_trip(term()) -> boolean().
is_round_trip(L) -> is_number(L) andalso L > 0.

option_help(representatives) -> "an integer >= 1";
option_help(confirm) -> "an integer >= 0";
option_help(gap) -> "a number > 1";
option_help(levels) -> "a non-empty list of round trips > 0, one per level";
option_help(noise) -> "a round trip >= 0 (us): the jitter of one measurement";
option_help(retries) -> "an integer >= 0";
option_help(attempts) -> "an integer >= 1";
option_help(seed) -> "an integer";
option_help(known) -> "a function of two nodes returning their round trip or undefined";
option_help(_) -> "".

%% Every network has a height, the root is a network, and Node is not a leaf. One
%% walk over the tree.
check_tree({network, _, _, _} = Tree, Node) ->
    try check_subtree(Tree, Node)
    catch throw:Why -> {error, {insert, Why}}
    end;
check_tree({network, _, _} = Tree, _Node) ->
    {error, {insert, {no_height, element(2, Tree)}}};
check_tree({network, _}, _Node) ->
    {error, {insert, {no_height, unnamed}}};
check_tree(Other, _Node) ->
    {error, {insert, {bad_tree, Other}}}.

check_subtree({node, Node}, Node) ->
    throw({already_a_member, Node});
check_subtree({node, N}, _Node) when is_atom(N) ->
    ok;
check_subtree({network, Name, #{height := H}, [_ | _] = Children}, Node) when is_number(H), H >= 0 ->
    _ = Name,
    lists:foreach(fun(C) -> check_subtree(C, Node) end, Children);
check_subtree({network, Name, _, _}, _Node) ->
    throw({no_height, Name});
check_subtree({network, Name, _}, _Node) ->
    throw({no_height, Name});
check_subtree({network, _}, _Node) ->
    throw({no_height, unnamed});
check_subtree(Other, _Node) ->
    throw({bad_tree, Other}).

without(Node, {node, Node}) ->
    empty;
without(_Node, {node, _}) ->
    unchanged;
without(Node, {network, Name, Opts, Children}) ->
    case without_children(Node, Children, [], false) of
        unchanged -> unchanged;
        [] -> empty;
        NewChildren -> {network, Name, Opts, NewChildren}
    end.

without_children(_Node, [], _Acc, false) ->
    unchanged;
without_children(_Node, [], Acc, true) ->
    lists:reverse(Acc);
without_children(Node, [C | Rest], Acc, true) ->
    without_children(Node, Rest, [C | Acc], true);
without_children(Node, [C | Rest], Acc, false) ->
    case without(Node, C) of
        unchanged -> without_children(Node, Rest, [C | Acc], false);
        empty -> without_children(Node, Rest, Acc, true);
        {network, _, _, [{node, _} = Only]} -> without_children(Node, Rest, [Only | Acc], true);
        {network, _, _, [{network, _, _, _} = Only]} -> without_children(Node, Rest, [Only | Acc], true);
        NewC -> without_children(Node, Rest, [NewC | Acc], true)
    end.

%%--------------------------------------------------------------------
%% Placement

place(Node, Tree, Measure, #{representatives := Reps, confirm := Confirm, retries := Retries,
                             attempts := Attempts} = Opts) ->
    Seed = maps:get(seed, Opts, erlang:phash2(Node)),
    Noise = maps:get(noise, Opts, 0),
    Model = case Opts of
                #{gap := Gap} -> {gap, math:sqrt(Gap)};
                #{levels := Ls} -> model(Ls, Noise);
                #{} -> model(levels(Tree), Noise)
            end,
    FlatSample = case Opts of
                     #{levels := _} -> ?FLAT_SAMPLE;
                     #{} -> ?FLAT_SAMPLE_TREE_MODEL
                 end,
    Ctx0 = #ctx{node = Node, measure = Measure, reps = Reps, attempts = Attempts, model = Model,
                flat_sample = FlatSample, known = maps:get(known, Opts, undefined),
                name = maps:get(name, Opts, Node), rand = rand:seed_s(exsss, Seed)},
    attempt(Tree, Confirm, Retries, [], Ctx0).

%% One descent from the original tree, then its confirmation; on a contradiction and
%% while retries are left, another descent with one more representative per child
%% and every round trip measured so far.
attempt(Tree, Confirm, Retries, Known, Ctx0) ->
    case descend(Tree, Known, Ctx0) of
        {error, _} = Error ->
            Error;
        {NewTree, Path, Ctx1} ->
            case confirm(NewTree, Path, Confirm, Ctx1) of
                {true, Ctx2} ->
                    {ok, normalise(NewTree, Path, Ctx2#ctx.model), lists:reverse(Ctx2#ctx.pairs)};
                {false, Ctx2} when Retries =:= 0 ->
                    {ok, normalise(NewTree, Path, Ctx2#ctx.model), lists:reverse(Ctx2#ctx.pairs)};
                {false, Ctx2} ->
                    Measured = [{X, D} || {X, D} <- maps:to_list(Ctx2#ctx.cache), is_number(D)],
                    Located = locate(Tree, Measured),
                    attempt(Tree, Confirm, Retries - 1, Located, Ctx2#ctx{reps = Ctx2#ctx.reps + 1})
            end
    end.

%% Along the node's path, a child network above the lower bound of its parent's level
%% is the same level as its parent: its children move up into the parent. Such pairs
%% arise when a height made from an inflated round trip was lowered.
normalise({network, Name, #{height := H} = Opts, Children}, [I | Rest], Model) ->
    Kids = lists:append([case {J, C} of
                             {I, _} -> splice(normalise(C, Rest, Model), H, Model);
                             _ -> splice(C, H, Model)
                         end || {J, C} <- lists:zip(lists:seq(1, length(Children)), Children)]),
    {network, Name, Opts, Kids};
normalise(Leaf, [], _Model) ->
    Leaf.

splice({network, _, #{height := Hc}, Sub} = C, H, Model) ->
    case Hc >= lo(H, Model) of
        %% its own children as high are that level too (a network the node made under
        %% a lowered height can be higher than it: finding 10's child_higher)
        true -> lists:append([splice(S, H, Model) || S <- Sub]);
        false -> [C]
    end;
splice(C, _H, _Model) -> [C].

%% The descent from the root. Known: measurements `{PathInTree, RoundTrip}' to reuse.
%% Returns the new tree and the path of child positions from its root to the node.
descend(Tree, Known, Ctx) ->
    try level(Tree, Known, Ctx) of
        {inside, NewTree, Path, Ctx1} ->
            {NewTree, Path, Ctx1};
        {outside, D, Ctx1} ->
            {wrap(Tree, D, Ctx1), [2], Ctx1}
    catch
        throw:{no_measurement, Why} -> {error, {insert, {no_measurement, Ctx#ctx.node, Why}}}
    end.

%% A new network of height D holding Net and the node; a network of height 0 with a
%% single node (the start of a tree) takes the node in instead.
wrap({network, Name, Opts, [{node, _} = Only]}, D, #ctx{node = Node}) ->
    {network, Name, Opts#{height => max(D, maps:get(height, Opts))}, [Only, {node, Node}]};
wrap(Net, D, #ctx{node = Node, name = Name}) ->
    {network, Name, #{height => D}, [Net, {node, Node}]}.

%% One level of the descent at network Net with the measurements Known (paths
%% relative to Net). Returns {inside, NewNet, PathToNode, Ctx} or {outside, D, Ctx}.
level({network, Name, #{height := H} = Opts, Children}, Known, Ctx0) ->
    Indexed = lists:zip(lists:seq(1, length(Children)), Children),
    Grouped = group_known(Known),
    {Measured, Ctx01} = to_measure(Indexed, Grouped, H, Ctx0),
    {PerChild, Ctx1} = measure_until_near(Measured, Grouped, H, Ctx01),
    Multi = [I || {I, {network, _, _, _} = C} <- Indexed, length(leaves(C)) >= 2],
    %% two children that look near re-check too when decide/4 did not count them both
    %% (one measurement of a child of several): else the node goes into the nearest
    %% unchecked, and the fragments of one level that a merge would join stay apart
    Doubt = looks_near(PerChild, H, Ctx1) >= 2,
    case decide(PerChild, Multi, H, Ctx1) of
        First when element(1, First) =:= structural; element(1, First) =:= lower; element(1, First) =:= merge;
                   Doubt ->
            %% what one inflated round trip would cause: one more member of every
            %% network child, and decide again
            Recheck = [C || {I, Child} = C <- Measured, is_map_key(I, PerChild),
                            not foreign(Child, maps:get(I, PerChild), H, Ctx1)],
            {PerChild2a, Ctx2} = measure_children(Recheck, PerChild, Ctx1#ctx.reps + 1, Ctx1),
            PerChild2 = maps:merge(PerChild, PerChild2a),
            case PerChild2 =:= PerChild of
                true -> apply_decision(First, Name, Opts, Indexed, PerChild, Ctx2);
                false -> apply_decision(decide(PerChild2, Multi, H, Ctx2), Name, Opts, Indexed, PerChild2, Ctx2)
            end;
        Decision ->
            apply_decision(Decision, Name, Opts, Indexed, PerChild, Ctx1)
    end.

%% A network child whose members' latency profile proves it foreign to the node: its
%% measured member's round trips to the members the node measured (outside the child)
%% differ from the node's by more than ?FOREIGN_FACTOR times as much as they differ
%% from another member's of the child (and by more than twice the noise), over at least
%% ?PROFILE_EVIDENCE common members. A node inside the child would share the child's
%% profile (it is as near to everyone outside as the child's members are), so the
%% structural re-check need not measure another member of it. Needs the caller's
%% round trips (`known'); a node child, or too few common members: not foreign.
-spec foreign(term(), [{[pos_integer()], number()}], number(), #ctx{}) -> boolean().
foreign({network, _, _, _} = Child, [{Path, _} | _], H, #ctx{known = Known, cache = Cache} = Ctx)
  when Known =/= undefined ->
    C1 = leaf_at(Child, Path),
    C2 = other_leaf(Child, C1),
    Outside = [{M, D} || {M, D} <- maps:to_list(Cache), is_number(D), D > 0, M =/= C1, M =/= C2],
    Noise = case Ctx#ctx.model of
                {levels, _, N} -> 2 * N / max(H, 1.0e-9);
                _ -> 0.0
            end,
    case {profile_gap(C1, Outside, Known, ?PROFILE_EVIDENCE),
          profile_gap(C1, [{M, E} || {M, _} <- Outside, C2 =/= none, is_number(E = Known(C2, M))], Known,
                      ?PROFILE_EVIDENCE)} of
        {Node, Member} when is_number(Node), is_number(Member) ->
            Node > ?FOREIGN_FACTOR * Member andalso Node > Noise;
        _ ->
            false
    end;
foreign(_Child, _Measured, _H, _Ctx) ->
    false.

%% A node child Y that cannot be the node's twin: its round trips to the members the
%% node measured differ from the node's ?FOREIGN_FACTOR times more than the round trips
%% of two members of any network child among Siblings differ from each other (what
%% members of one network look like here), over at least ?PROFILE_EVIDENCE common
%% members each: a twin shares the node's round trips to everyone else. Without
%% `known', or without a network child to compare with: not foreign.
-spec foreign_node(node(), [term()], #ctx{}) -> boolean().
foreign_node(_Y, _Siblings, #ctx{known = undefined}) ->
    false;
foreign_node(Y, Siblings, #ctx{known = Known, cache = Cache}) ->
    Measured = [{M, D} || {M, D} <- maps:to_list(Cache), is_number(D), D > 0],
    Ref = [R || {network, _, _, _} = Net <- Siblings, C1 <- [first_leaf(Net, fun hd/1)],
                C2 <- [other_leaf(Net, C1)], C2 =/= none,
                R <- [profile_gap(C1, [{M, E} || {M, _} <- Measured, M =/= C2, is_number(E = Known(C2, M))], Known,
                                  ?PROFILE_EVIDENCE)],
                is_number(R)],
    case {profile_gap(Y, Measured, Known, ?PROFILE_EVIDENCE), Ref} of
        {Node, [_ | _]} when is_number(Node) -> Node > ?FOREIGN_FACTOR * max(?TWIN_GAP, lists:max(Ref));
        _ -> false
    end.

%% The mean relative difference of A's round trips and those of Profile ([{M, D}]) to
%% the same members, over at least Min of them (else none).
-spec profile_gap(node(), [{node(), number()}], fun((node(), node()) -> number() | undefined), pos_integer()) ->
          number() | none.
profile_gap(A, Profile, Known, Min) ->
    Ds = [abs(D - E) / max(D, E) || {M, D} <- Profile, M =/= A, is_number(E = Known(A, M)), E > 0],
    case length(Ds) >= Min of
        true -> lists:sum(Ds) / length(Ds);
        false -> none
    end.

leaf_at({node, X}, []) -> X;
leaf_at({network, _, _, Children}, [I | Rest]) -> leaf_at(lists:nth(I, Children), Rest).

%% A member of Net other than X (none for a network of X alone): the first leaf down
%% the first child, else down the last.
other_leaf(Net, X) ->
    case {first_leaf(Net, fun hd/1), first_leaf(Net, fun lists:last/1)} of
        {X, X} -> none;
        {X, Y} -> Y;
        {Y, _} -> Y
    end.

first_leaf({node, X}, _Pick) -> X;
first_leaf({network, _, _, Children}, Pick) -> first_leaf(Pick(Children), Pick).

%% How many children have a round trip below the lower bound of H's level.
-spec looks_near(#{pos_integer() => [{[pos_integer()], number()}]}, number(), #ctx{}) -> non_neg_integer().
looks_near(PerChild, H, #ctx{model = Model}) ->
    Lo = lo(H, Model),
    length([I || {I, [_ | _] = Ms} <- maps:to_list(PerChild), lists:min([D || {_, D} <- Ms]) < Lo]).

%% The decision at a network of height H from the children's measurements (Multi: the
%% children with two members or more).
decide(PerChild, Multi, H, #ctx{model = Model} = Ctx) ->
    Mins = [{lists:min([D || {_, D} <- Ms]), I} || {I, [_ | _] = Ms} <- maps:to_list(PerChild)],
    case Mins of
        [] ->
            throw({no_measurement, nothing_measured});
        _ ->
            {DStar, IStar} = lists:min(Mins),
            {Lo, Hi} = bounds(H, Model),
            Near0 = lists:sort([{I, D} || {D, I} <- Mins, D < Lo]),
            Largest = lists:max([D || {D, _} <- Mins]),
            %% in an ultrametric every member of a child is as far from the node; a near
            %% child with a far member holds a misplaced one (a stale tree: it moved), and
            %% one member near of a child of several may be that one: such children do not
            %% count when two or more look near (no height lowered, no children merged)
            Sure = [{I, D} || {I, D} <- Near0, Ms <- [[X || {_, X} <- maps:get(I, PerChild)]],
                              lists:max(Ms) < Lo, length(Ms) >= 2 orelse not lists:member(I, Multi)],
            Near = case length(Near0) >= 2 of
                       true -> Sure;
                       false -> Near0
                   end,
            if
                DStar > Hi ->
                    {structural, {outside, DStar}};
                length(Near) >= 2, length(Near) =:= map_size(PerChild) ->
                    %% near every child: the height was overestimated (a network made
                    %% from one inflated round trip); lower it to what was measured
                    {lower, Largest, decide(PerChild, Multi, Largest, Ctx)};
                length(Near) >= 2 ->
                    {merge, [I || {I, _} <- Near], lists:max([D || {_, D} <- Near])};
                Near =/= [] ->
                    {DNear, INear} = lists:min([{D, I} || {I, D} <- Near]),
                    {into, INear, DNear};
                DStar < Lo ->
                    {into, IStar, DStar};
                true ->
                    {structural, {direct, DStar}}
            end
    end.

apply_decision({lower, H, Decision}, Name, Opts, Indexed, PerChild, Ctx) ->
    apply_decision(Decision, Name, Opts#{height => H}, Indexed, PerChild, Ctx);
apply_decision({structural, {outside, D}}, _Name, _Opts, _Indexed, _PerChild, Ctx) ->
    {outside, D, Ctx};
apply_decision({structural, {direct, _}}, Name, Opts, Indexed, _PerChild, #ctx{node = Node} = Ctx) ->
    Children = [C || {_, C} <- Indexed],
    {inside, {network, Name, Opts, Children ++ [{node, Node}]},
     [length(Children) + 1], Ctx};
apply_decision({merge, Is, D}, Name, Opts, Indexed, PerChild, #ctx{name = NewName, model = Model} = Ctx) ->
    %% two children both near the node are near each other (d(A, B) =< max(d(x, A),
    %% d(x, B)) in an ultrametric): they belong in one network, which the node then
    %% enters. A near network as high as that network (within S) is the same level:
    %% its children join the new network instead of nesting one level too many.
    {Merged, Known, Names, _} =
        lists:foldl(fun(I, {Kids, Ks, Ns, Next}) ->
                            Ms = maps:get(I, PerChild),
                            Child = lists:nth(I, [C || {_, C} <- Indexed]),
                            case same_level(Child, D, Model) of
                                {true, N, Sub} ->
                                    {Kids ++ Sub, Ks ++ [{[Next + J - 1 | Rest], X} || {[J | Rest], X} <- Ms],
                                     [N | Ns], Next + length(Sub)};
                                false ->
                                    {Kids ++ [Child], Ks ++ [{[Next | Rest], X} || {Rest, X} <- Ms], Ns, Next + 1}
                            end
                    end, {[], [], [], 1}, Is),
    MName = case Names of
                [One] -> One;
                _ -> NewName
            end,
    {inside, NewM, Path, Ctx1} = level({network, MName, #{height => D}, Merged}, Known, Ctx),
    [First | _] = Is,
    Children = [case J of First -> NewM; _ -> C end || {J, C} <- Indexed, J =:= First orelse not lists:member(J, Is)],
    {inside, {network, Name, Opts, Children}, [First | Path], Ctx1};
apply_decision({into, I, D}, Name, Opts1, Indexed, PerChild, #ctx{node = Node, name = NewName} = Ctx) ->
    {Child, Path, Ctx1} =
        case lists:nth(I, [C || {_, C} <- Indexed]) of
            {node, _} = Leaf ->
                {{network, NewName, #{height => D}, [Leaf, {node, Node}]}, [2], Ctx};
            {network, _, _, _} = Net ->
                Below = [{P, X} || {P, X} <- maps:get(I, PerChild)],
                case level(Net, Below, Ctx) of
                    {inside, NewNet, P, C1} -> {NewNet, P, C1};
                    {outside, DOut, C1} -> {wrap(Net, DOut, C1), [2], C1}
                end
        end,
    Children = [case J of I -> Child; _ -> C end || {J, C} <- Indexed],
    {inside, {network, Name, Opts1, Children}, [I | Path], Ctx1}.

%% A network child as high as a new network of height D (within D's level) is that
%% level: its children are taken instead of the child.
same_level({network, N, #{height := H}, Sub}, D, Model) ->
    case H >= lo(D, Model) of
        true -> {true, N, Sub};
        false -> false
    end;
same_level(_Leaf, _D, _Model) ->
    false.

%%--------------------------------------------------------------------
%% The level model

%% @doc The typical round trip of each level of a tree, ascending: a network's level is
%% one more than its highest child network's (a network of nodes only is level 1), and
%% a level's round trip is the median height of its networks. Networks of height 0 (a
%% tree of one node) do not count; `[]' when none is left.
-spec levels(terrain_topology:tree()) -> [float()].
levels(Tree) ->
    {_, ByLevel} = level_of(Tree, #{}),
    [median(Hs) || {_, Hs} <- lists:sort(maps:to_list(ByLevel))].

level_of({node, _}, Acc) ->
    {0, Acc};
level_of({network, _, Opts, Children}, Acc0) ->
    {Levels, Acc1} = lists:mapfoldl(fun level_of/2, Acc0, Children),
    Level = lists:max(Levels) + 1,
    case maps:get(height, Opts, 0) of
        H when is_number(H), H > 0 -> {Level, maps:update_with(Level, fun(Hs) -> [H | Hs] end, [H], Acc1)};
        _ -> {Level, Acc1}
    end;
level_of(_Other, Acc) ->
    {0, Acc}.

median(Xs) ->
    Sorted = lists:sort(Xs),
    N = length(Sorted),
    case N rem 2 of
        1 -> float(lists:nth(N div 2 + 1, Sorted));
        0 -> (lists:nth(N div 2, Sorted) + lists:nth(N div 2 + 1, Sorted)) / 2
    end.

%% The model of a list of level round trips and the noise floor: ascending, levels
%% closer than ?SAME_LEVEL (relative) or ?NOISE_LEVELS times the noise (absolute)
%% merged (their geometric mean); no level: the default gap.
-spec model([number()], number()) -> model().
model([], _Noise) ->
    {gap, math:sqrt(?DEFAULT_GAP)};
model(Levels, Noise) ->
    [First | Rest] = lists:sort([float(L) || L <- Levels]),
    Floor = ?NOISE_LEVELS * Noise,
    Cap = math:sqrt(?DEFAULT_GAP),
    Merge = fun(L, [Prev | Acc]) when L < Prev * ?SAME_LEVEL; L - Prev < Floor, L < Prev * Cap ->
                    [math:sqrt(L * Prev) | Acc];
               (L, Acc) -> [L | Acc]
            end,
    {levels, lists:reverse(lists:foldl(Merge, [First], Rest)), float(Noise)}.

%% @doc The band of round trips that belong to the level of height `H': below the lower
%% bound a round trip lies inside a child, above the upper bound outside the network.
%% With levels L1 &lt; … &lt; Lk, the bounds around the level nearest H are the geometric
%% means with its neighbours, √(Li−1·Li) and √(Li·Li+1); beyond the first and the last
%% level, the smallest ratio between adjacent levels is assumed (10 with one level).
%% A band is never wider than Li/√10 … Li·√10, and a height further than √10 from
%% every level gets H/√10 … H·√10. With `{gap, S}': H/S and H·S.
-spec bounds(number(), model() | [number()]) -> {float(), float()}.
bounds(H, Levels) when is_list(Levels) ->
    bounds(H, Levels, 0);
bounds(H, _Model) when H =< 0 ->
    {0.0, 0.0};
bounds(H, {gap, S}) ->
    {H / S, H * S};
bounds(H, {levels, Ls, Noise}) ->
    %% never narrower than the noise: round trips within ?NOISE_LEVELS jitters of the
    %% height or of its level are not told apart from them; but the noise never widens
    %% a band beyond √10 of them (a load whose jitter reaches the next level must not
    %% make two levels 10x apart one)
    {Lo, Hi, Li} = level_band(H, Ls),
    Floor = ?NOISE_LEVELS * Noise,
    Cap = math:sqrt(?DEFAULT_GAP),
    {Low, High} = {min(H, Li), max(H, Li)},
    {max(0.0, max(min(Lo, Low - Floor), min(Lo, Low / Cap))), min(max(Hi, High + Floor), max(Hi, High * Cap))}.

%% @doc The band of a height under the level model of `Levels' with the noise floor
%% `Noise' (µs: the jitter of one measurement; 0: none): levels closer than twice the
%% noise are one, and the band reaches at least twice the noise from `H'.
-spec bounds(number(), [number()], number()) -> {float(), float()}.
bounds(H, Levels, Noise) ->
    bounds(H, model(Levels, Noise)).

%% The band of H and the level it belongs to (H itself when it is a level of its own).
-spec level_band(number(), [float(), ...]) -> {float(), float(), number()}.
level_band(H, Ls) ->
    %% a virtual level one (smallest) ratio beyond each end
    R = case Ls of
            [_] -> float(?DEFAULT_GAP);
            _ -> lists:min([B / A || {A, B} <- lists:zip(lists:droplast(Ls), tl(Ls))])
        end,
    Padded = list_to_tuple([hd(Ls) / R | Ls] ++ [lists:last(Ls) * R]),
    {Dist, I} = lists:min([{abs(math:log(H / element(J, Padded))), J} || J <- lists:seq(2, length(Ls) + 1)]),
    Li = element(I, Padded),
    %% never wider than the default gap (two levels far apart may have one between
    %% them that the tree does not show yet); a height that far from every level of
    %% the model is a level of its own
    Cap = math:sqrt(?DEFAULT_GAP),
    case Dist > math:log(Cap) of
        true -> {H / Cap, H * Cap, H};
        false -> {min(H, max(Li / Cap, math:sqrt(element(I - 1, Padded) * Li))),
                  max(H, min(Li * Cap, math:sqrt(Li * element(I + 1, Padded)))), Li}
    end.

lo(H, Model) -> element(1, bounds(H, Model)).

%% True when the model has a level below the band of height H: only then can a node
%% child of a network of height H have a twin closer than H.
level_below(_H, {gap, _}) -> true;
level_below(H, {levels, [L1 | _], _} = Model) -> L1 < lo(H, Model).

%% The children to measure at a network of height H: all of them, unless the model has
%% no level below H (a flat group: no child can be nearer than H); then every network
%% child, the node children measured already and the flat sample (?FLAT_SAMPLE with the
%% caller's levels, ?FLAT_SAMPLE_TREE_MODEL with the tree's) more node children at random.
to_measure(Indexed, Grouped, H, #ctx{model = Model, rand = R0} = Ctx) ->
    case level_below(H, Model) of
        true ->
            {Indexed, Ctx};
        false ->
            {Fixed, Leaves} = lists:partition(fun({I, {node, _}}) -> is_map_key(I, Grouped);
                                                 ({_, _}) -> true
                                              end, Indexed),
            {Keyed, R1} = lists:mapfoldl(fun(C, R) -> {U, R2} = rand:uniform_s(R), {{U, C}, R2} end, R0, Leaves),
            Sample = [C || {_, C} <- lists:sublist(lists:sort(Keyed), Ctx#ctx.flat_sample)],
            {lists:sort(Fixed ++ Sample), Ctx#ctx{rand = R1}}
    end.

%% Known measurements grouped by the child they fall in: #{I => [{RestPath, D}]}.
group_known(Known) ->
    lists:foldl(fun({[I | Rest], D}, Acc) -> maps:update_with(I, fun(L) -> [{Rest, D} | L] end, [{Rest, D}], Acc) end,
                #{}, Known).

%% The children measured until one is near: those with measurements first, then the
%% others in random order; it stops once at least three quarters of the children (and
%% two) are measured and exactly one of them lies below the level's lower bound (the
%% node belongs in it: in an ultrametric a second near child would be near that one
%% too). Two near children or none: every child is measured (a merge, a lowered
%% height, the node directly in the network or outside it need all of them). Stopping
%% after half of them saved more pairs but left 10,000 simulated nodes inexact (two
%% networks of one level that a later node would have merged stayed apart).
-spec measure_until_near([{pos_integer(), term()}], map(), number(), #ctx{}) -> {map(), #ctx{}}.
measure_until_near(Indexed, Grouped, H, #ctx{model = Model, reps = Want, rand = R0} = Ctx0) ->
    {Known, Others} = lists:partition(fun({I, _}) -> is_map_key(I, Grouped) end, Indexed),
    {Keyed, R1} = lists:mapfoldl(fun(C, R) -> {U, R2} = rand:uniform_s(R), {{U, C}, R2} end, R0, Others),
    Order = Known ++ [C || {_, C} <- lists:sort(Keyed)],
    Lo = lo(H, Model),
    Need = max(2, (length(Indexed) * 3 + 3) div 4),
    until_near(Order, Grouped, Want, Lo, 0, Need, {#{}, Ctx0#ctx{rand = R1}}).

until_near([], _Grouped, _Want, _Lo, _Near, _Need, Acc) ->
    Acc;
until_near(_Left, _Grouped, _Want, _Lo, Near, Need, {PerChild, _} = Acc)
  when Near =:= twin; Near =:= 1 andalso map_size(PerChild) >= Need ->
    Acc;
until_near([_ | _] = Left, Grouped, Want, Lo, Near, Need, {Acc, Ctx}) ->
    {{I, Child}, Rest} = next_child(Left, Grouped, Ctx),
    case Child of
        {node, Y} when Near =:= 0 ->
            case not is_map_key(I, Grouped) andalso foreign_node(Y, [C || {_, C} <- Left], Ctx) of
                true -> until_near(Rest, Grouped, Want, Lo, Near, Need, {Acc, Ctx});
                false -> until_near_with(I, Child, Rest, Grouped, Want, Lo, Near, Need, {Acc, Ctx})
            end;
        _ ->
            until_near_with(I, Child, Rest, Grouped, Want, Lo, Near, Need, {Acc, Ctx})
    end.

until_near_with(I, Child, Rest, Grouped, Want, Lo, Near, Need, {Acc, #ctx{model = Model} = Ctx}) ->
    Have = maps:get(I, Grouped, []),
    {Ms, Ctx1} = fill(Child, Have, Want, Ctx#ctx.attempts * Want, Ctx),
    Nearest = case Ms of
                  [] -> none;
                  _ -> lists:min([D || {_, D} <- Ms])
              end,
    Near1 = if
                Nearest =:= none; Nearest >= Lo -> Near;
                Near =:= 0 ->
                    case {Child, level_below(Nearest, Model)} of
                        {{node, _}, false} -> twin;
                        _ -> 1
                    end;
                true -> Near + 1
            end,
    until_near(Rest, Grouped, Want, Lo, Near1, Need, {Acc#{I => Ms}, Ctx1}).

%% The next child to measure: the first of Left (children with measurements, then the
%% others in random order), unless the caller holds round trips between nodes (`known'),
%% the node has measured some and the first has no measurement yet: then the unmeasured
%% node child whose round trips to the members the node has measured match the node's
%% best (a twin shares them: the mean of |d(node, m) - d(y, m)| / max of the two). The
%% network children, and node children with no common member, keep their order after.
-spec next_child([{pos_integer(), term()}, ...], map(), #ctx{}) ->
          {{pos_integer(), term()}, [{pos_integer(), term()}]}.
next_child([First | Rest] = Left, Grouped, #ctx{known = Known, cache = Cache}) ->
    Measured = [{M, D} || {M, D} <- maps:to_list(Cache), is_number(D), D > 0],
    case Known =:= undefined orelse Measured =:= [] orelse is_map_key(element(1, First), Grouped) of
        true ->
            {First, Rest};
        false ->
            Scored = [{profile_mismatch(Y, Measured, Known), P, C}
                      || {P, {I, Child} = C} <- lists:zip(lists:seq(1, length(Left)), Left),
                         not is_map_key(I, Grouped), {node, Y} <- [Child]],
            case lists:min([{S, P} || {S, P, _} <- Scored] ++ [{none, 0}]) of
                {none, _} -> {First, Rest};
                {_, P} -> {lists:nth(P, Left), lists:sublist(Left, P - 1) ++ lists:nthtail(P, Left)}
            end
    end.

%% The mean relative difference of Y's and the node's round trips to the members the
%% node measured (`none' when the caller holds none of Y's).
-spec profile_mismatch(node(), [{node(), number()}], fun((node(), node()) -> number() | undefined)) ->
          number() | none.
profile_mismatch(Y, Measured, Known) ->
    profile_gap(Y, Measured, Known, 1).

%% At least Want measurements per child (a node child has one member: one at most),
%% trying up to `attempts' members per missing measurement.
measure_children(Indexed, Grouped, Want, Ctx0) ->
    lists:foldl(fun({I, Child}, {Acc, Ctx}) ->
                        Have = maps:get(I, Grouped, []),
                        {Ms, Ctx1} = fill(Child, Have, Want, Ctx#ctx.attempts * Want, Ctx),
                        {Acc#{I => Ms}, Ctx1}
                end, {#{}, Ctx0}, Indexed).

fill({node, X}, [], _Want, _Tries, Ctx) ->
    case measure(X, Ctx) of
        {ok, D, Ctx1} -> {[{[], D}], Ctx1};
        {error, _, Ctx1} -> {[], Ctx1}
    end;
fill({node, _}, Have, _Want, _Tries, Ctx) ->
    {Have, Ctx};
fill(_Net, Have, Want, Tries, Ctx) when length(Have) >= Want; Tries =< 0 ->
    {Have, Ctx};
fill(Net, Have, Want, Tries, #ctx{rand = R0} = Ctx) ->
    {X, Path, R1} = random_leaf(Net, R0),
    case maps:is_key(X, Ctx#ctx.cache) of
        true ->
            fill(Net, Have, Want, Tries - 1, Ctx#ctx{rand = R1});
        false ->
            case measure(X, Ctx#ctx{rand = R1}) of
                {ok, D, Ctx1} -> fill(Net, [{Path, D} | Have], Want, Tries - 1, Ctx1);
                {error, _, Ctx1} -> fill(Net, Have, Want, Tries - 1, Ctx1)
            end
    end.

-spec leaves(terrain_topology:tree()) -> [node()].
leaves({node, X}) -> [X];
leaves({network, _, _, Children}) -> lists:append([leaves(C) || C <- Children]).

%% A member chosen by a random walk down from the network, and its path.
random_leaf({node, X}, R) ->
    {X, [], R};
random_leaf({network, _, _, Children}, R0) ->
    {I, R1} = rand:uniform_s(length(Children), R0),
    {X, Path, R2} = random_leaf(lists:nth(I, Children), R1),
    {X, [I | Path], R2}.

measure(X, #ctx{node = Node, measure = Measure, cache = Cache, pairs = Pairs} = Ctx) ->
    case maps:find(X, Cache) of
        {ok, failed} ->
            {error, failed, Ctx};
        {ok, D} ->
            {ok, D, Ctx};
        error ->
            case Measure(Node, X) of
                {ok, D} when is_number(D), D >= 0 ->
                    {ok, D, Ctx#ctx{cache = Cache#{X => D}, pairs = [{Node, X, D} | Pairs]}};
                {ok, Bad} ->
                    {error, {bad_round_trip, Bad}, Ctx#ctx{cache = Cache#{X => failed}}};
                {error, Why} ->
                    %% remembered for the error message if nothing can be measured
                    {error, Why, Ctx#ctx{cache = Cache#{X => failed}}}
            end
    end.

%%--------------------------------------------------------------------
%% Confirmation

%% Up to Count members, one per ancestor of the node from the lowest up, each from a
%% child of that ancestor other than the node's own; true when every round trip
%% agrees with the ancestor's height within a factor S.
confirm(_Tree, _Path, 0, Ctx) ->
    {true, Ctx};
confirm(Tree, Path, Count, Ctx) ->
    Ancestors = lists:reverse(ancestors(Tree, Path)),
    confirm_each(lists:sublist(Ancestors, Count), true, Ctx).

confirm_each([], Agree, Ctx) ->
    {Agree, Ctx};
confirm_each([{H, Others} | Rest], Agree, #ctx{model = Model, cache = Cache} = Ctx) ->
    case [D || X <- lists:append([members(C) || C <- Others]), is_number(D = maps:get(X, Cache, failed))] of
        [_, _ | _] = Known ->
            %% the descent decided here with two members or more: they confirm it (the
            %% largest, as a new member would: is the node no further than the level?)
            {Lo, Hi} = bounds(H, Model),
            confirm_each(Rest, Agree andalso lists:max(Known) =< Hi andalso lists:min(Known) >= Lo, Ctx);
        _ ->
            confirm_new(H, Others, Rest, Agree, Ctx)
    end.

members({node, X}) -> [X];
members({network, _, _, Children}) -> lists:append([members(C) || C <- Children]).

confirm_new(H, Others, Rest, Agree, #ctx{model = Model, rand = R0} = Ctx) ->
    {I, R1} = rand:uniform_s(length(Others), R0),
    {X, _, R2} = random_leaf(lists:nth(I, Others), R1),
    case maps:is_key(X, Ctx#ctx.cache) of
        true ->
            confirm_each(Rest, Agree, Ctx#ctx{rand = R2});
        false ->
            case measure(X, Ctx#ctx{rand = R2}) of
                {ok, D, Ctx1} ->
                    {Lo, Hi} = bounds(H, Model),
                    confirm_each(Rest, Agree andalso D >= Lo andalso D =< Hi, Ctx1);
                {error, _, Ctx1} -> confirm_each(Rest, Agree, Ctx1)
            end
    end.

%% The ancestors of the node at Path, root first: {Height, ChildrenOtherThanTheNodes}.
ancestors({node, _}, []) ->
    [];
ancestors({network, _, #{height := H}, Children}, [I | Rest]) ->
    Others = [C || {J, C} <- lists:zip(lists:seq(1, length(Children)), Children), J =/= I],
    Here = case Others of
               [] -> [];
               _ -> [{H, Others}]
           end,
    Here ++ ancestors(lists:nth(I, Children), Rest).

%% The paths in Tree of measured members, for a new descent: [{Path, D}].
locate(Tree, Measured) ->
    Paths = paths(Tree, [], #{}),
    [{lists:reverse(maps:get(X, Paths)), D} || {X, D} <- Measured, is_map_key(X, Paths)].

paths({node, X}, Rev, Acc) ->
    Acc#{X => Rev};
paths({network, _, _, Children}, Rev, Acc) ->
    {_, Acc1} = lists:foldl(fun(C, {I, A}) -> {I + 1, paths(C, [I | Rev], A)} end, {1, Acc}, Children),
    Acc1.
