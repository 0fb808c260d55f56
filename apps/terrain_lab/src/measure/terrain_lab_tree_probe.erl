%% @private
%% @doc Tree-guided probing: builds the topology while it measures, inserting the
%% nodes in waves with `terrain:insert_node/4' (docs/TOPOLOGY_DISCOVERY.md,
%% "Tree-guided probing"). The same code runs against VMs (`terrain probe --strategy
%% tree', whose measuring callback probes a pair) and against a latency model
%% (`terrain topology simulate').
%%
%% == Waves ==
%% The tree starts with the first node. A wave takes the next nodes, at most as many
%% as the tree holds already and at most `wave' (1, 1, 2, 4, … so the tree always
%% outnumbers the newcomers). Every node of a wave is placed into the same tree,
%% independently, through `map' (in parallel for VMs); then the wave's nodes are
%% inserted into the tree one after the other, with the round trips the first pass
%% measured answered from memory: only the pairs the grown tree asks for anew are
%% measured then (typically a newcomer against another newcomer of its own group).
%%
%% == Repair ==
%% After the last wave, every measured round trip is compared with the tree's
%% distance for its pair. One below distance/√gap contradicts the tree (delays only
%% add: a round trip cannot come out shorter than its path); one above distance·√gap
%% may be an outlier. A node with a too-short round trip, or with too-long ones making
%% up at least three and a quarter of its round trips, is taken out and inserted again
%% with one more representative per child (its measured round trips kept), at most
%% `repair_rounds' times.
%%
%% == Strict pairs ==
%% After the repair, two node children of one network that are each other's nearest by
%% a margin (every other round trip measured from either 25% longer) become a network,
%% where the model has a level below (`strict_pairs/2').
%%
%% == Budget ==
%% No wave (and no repair) starts once `stop' says so; the nodes not placed by then are
%% returned as `unplaced'. The measuring callback keeps its own deadline.
-module(terrain_lab_tree_probe).

%% API
-export([build/3]).

-export_type([options/0, result/0, measure/0]).

%% A round trip (µs), with the jitter of its exchanges (median minus minimum, µs)
%% when the measurement knows it: the seed's median jitter is the level model's noise.
-type measure() :: fun((node(), node()) -> {ok, number()} | {ok, number(), number()} | {error, term()}).

-type options() ::
        #{insert => terrain:insert_options(),  % options of every insertion (gap, confirm, representatives …)
          wave => pos_integer(),                % most nodes placed at once (default 32)
          %% runs a wave's first pass, and a round of the seed's pairs (default lists:map)
          map => fun((fun((term()) -> term()), [term()]) -> [term()]),
          stop => fun(() -> boolean()),         % asked before every wave and repair: true ends the build
                                                % (the budget is spent, or the user interrupted)
          repair_rounds => non_neg_integer(),   % passes of the repair (default 2)
          progress => fun((progress()) -> any()) | none}. % after every wave

-type progress() :: #{placed := non_neg_integer(), total := non_neg_integer(), pairs := non_neg_integer(),
                      elapsed_ms := non_neg_integer(),
                      tree := terrain:topology_tree()}.   % the nodes placed so far (a checkpoint's)

-type result() :: #{tree := terrain:topology_tree(),      % the nodes placed (names c, c1, c1_2 … by position)
                    placed := [node()],
                    unplaced := [node()],                  % not placed: the budget ended, or nothing measurable
                    pairs := #{{node(), node()} => number()}, % every round trip measured, {A, B} as measured
                    waves := non_neg_integer(),
                    reinserted := non_neg_integer(),       % nodes the repair placed again
                    ended_by := complete | stopped}.

-define(DEFAULT_WAVE, 32).
%% A wave is at most a quarter of the tree: newcomers that join one another measure
%% each other anew in the second pass (a wave as large as the tree: 77 pairs of 240 on
%% a 16-thread CPU; a quarter: 68).
-define(TREE_PER_NEWCOMER, 4).
%% Strict pairs: a pair's round trip at least this much shorter than every other one
%% measured from its two nodes (full discovery's margin for strict groups), with at
%% least ?STRICT_EVIDENCE other round trips measured from each.
-define(STRICT_MARGIN, 1.25).
-define(STRICT_EVIDENCE, 2).

%%--------------------------------------------------------------------
%% API

%% @doc Builds the tree of `Nodes' (at least one), in their order, with `Measure'.
-spec build([node(), ...], measure(), options()) -> result().
build([First | Rest0] = Nodes, Measure0, Opts) ->
    T0 = erlang:monotonic_time(millisecond),
    Measure = fun(A, B) -> case Measure0(A, B) of
                               {ok, D, _Jitter} -> {ok, D};
                               Other -> Other
                           end
              end,
    State00 = #{tree => {network, c, #{height => 0}, [{node, First}]}, placed => [First], unplaced => [],
                pairs => #{}, waves => 0, t0 => T0, total => length(Nodes)},
    {State0, Rest} = case is_map_key(gap, maps:get(insert, Opts, #{})) of
                         true -> {State00, Rest0};
                         false -> seed(Nodes, Measure0, Opts, State00)
                     end,
    {State1, EndedBy} = waves(Rest, Measure, Opts, State0),
    State2 = case EndedBy of
                 complete -> strict_pairs(Opts, repair(Measure, Opts, maps:get(repair_rounds, Opts, 2),
                                                       State1#{reinserted => 0}));
                 stopped -> State1#{reinserted => 0}
             end,
    #{tree := Tree, placed := Placed, unplaced := Unplaced, pairs := Pairs, waves := Waves,
      reinserted := Reinserted} = State2,
    #{tree => canonical(Tree), placed => lists:reverse(Placed), unplaced => Unplaced, pairs => Pairs,
      waves => Waves, reinserted => Reinserted, ended_by => EndedBy}.

%% The tree with its networks named by position as `terrain topology' names them
%% (`c' the root, `c1', `c1_2', …) and every height at least its children's.
-spec canonical(terrain:topology_tree()) -> terrain:topology_tree().
canonical(Tree) ->
    canonical(Tree, "c").

canonical({node, _} = Leaf, _Name) ->
    Leaf;
canonical({network, _, #{height := H} = Opts, Children}, Name) ->
    Prefix = case Name of "c" -> "c"; _ -> Name ++ "_" end,
    {Kids, _} = lists:mapfoldl(fun({node, _} = L, I) -> {L, I};
                                  (Net, I) -> {canonical(Net, Prefix ++ integer_to_list(I)), I + 1}
                               end, 1, Children),
    %% never below a child (a lowered height can leave one a little higher)
    Top = lists:max([H | [Hc || {network, _, #{height := Hc}, _} <- Kids]]),
    {network, list_to_atom(Name), Opts#{height => Top}, Kids}.

%%--------------------------------------------------------------------
%% The seed

%% The first nodes of the order, measured all pairs (one direction each) and clustered
%% by full discovery: the tree the insertions start from, with each network's height
%% the median round trip between its children, and so the first level model. Its
%% size grows as √(n(n−1)/10), at least 8 and at most 100: a twentieth of the ordered
%% pairs or fewer (5% at n = 256, 12% at n = 16, 0.5% at n = 941, 0.005% at n = 10,000).
%% The seed is measured in rounds of disjoint pairs (a round-robin tournament: every
%% node in at most one pair of a round, s − 1 rounds for an even s, s for an odd one),
%% each round's pairs at once through `map', with progress after each round, so that a
%% checkpoint keeps what an interrupted seed measured.
seed(Nodes, Measure, Opts, State) ->
    N = length(Nodes),
    Size = min(N, max(8, min(100, round(math:sqrt(0.1 * N * (N - 1)))))),
    {Seed, Rest} = lists:split(Size, Nodes),
    {Pairs, Jitters} = seed_rounds(rounds(Seed), Seed, [], Measure, Opts, State, {#{}, []}),
    Noise = case Jitters of
                [] -> 0.0;
                _ -> median(Jitters)
            end,
    Rows = [[case Pairs of
                 #{{A, B} := D} -> D;
                 #{{B, A} := D} -> D;
                 _ when A =:= B -> 0;
                 _ -> null
             end || B <- Seed] || A <- Seed],
    case terrain:discover(#{nodes => Seed, stats => #{min => Rows}}, #{strict => false}) of
        {ok, #{topology := Tree}} when map_size(Pairs) > 0 ->
            Typical = within_noise(typical_heights(Tree, Pairs), Noise),
            %% the modes only for a seed full discovery left flat (one level)
            Modes = case terrain:topology_levels(Typical) of
                        [_, _ | _] -> [];
                        _ -> modes(maps:values(Pairs))
                    end,
            {State#{tree => Typical, placed => lists:reverse(Seed), pairs => Pairs, modes => Modes,
                    noise => Noise}, Rest};
        _ ->
            {State, tl(Nodes)}
    end.

%% The rounds of a round-robin tournament of Xs by the circle method: the first stays,
%% the others turn one place a round; a round pairs the i-th from the start with the
%% i-th from the end. With an odd count a stand-in (`none') sits out with one node
%% a round. Every pair once, {Earlier, Later} in the order of Xs.
-spec rounds([node()]) -> [[{node(), node()}]].
rounds(Xs) when length(Xs) < 2 ->
    [];
rounds(Xs) ->
    Indexed = lists:zip(lists:seq(1, length(Xs)), Xs) ++ [{length(Xs) + 1, none} || length(Xs) rem 2 =:= 1],
    [First | Others] = Indexed,
    M = length(Indexed),
    [begin
         {Front, Back} = lists:split(R, Others),
         Circle = [First | Back ++ Front],
         [case {A, B} of
              {{I, X}, {J, Y}} when I < J -> {X, Y};
              {{_, X}, {_, Y}} -> {Y, X}
          end || {A, B} <- lists:zip(lists:sublist(Circle, M div 2), lists:reverse(lists:nthtail(M div 2, Circle))),
                 element(2, A) =/= none, element(2, B) =/= none]
     end || R <- lists:seq(0, M - 2)].

%% The rounds measured one after the other, the pairs of a round at once; after each
%% round, progress with a flat tree of the nodes measured so far (Seen, in seed order).
%% Returns the round trips and the jitters measured.
-spec seed_rounds([[{node(), node()}]], [node()], [node()], measure(), options(), map(),
                  {#{{node(), node()} => number()}, [number()]}) -> {#{{node(), node()} => number()}, [number()]}.
seed_rounds([], _Seed, _Seen, _Measure, _Opts, _State, Acc) ->
    Acc;
seed_rounds([Round | Later], Seed, Seen0, Measure, Opts, State, Acc0) ->
    Map = maps:get(map, Opts, fun lists:map/2),
    Results = Map(fun({A, B}) -> Measure(A, B) end, Round),
    {Pairs, _} = Acc = lists:foldl(fun({P, {ok, D}}, {Ps, Js}) when is_number(D) -> {Ps#{P => D}, Js};
                                      ({P, {ok, D, J}}, {Ps, Js}) when is_number(D), is_number(J) ->
                                           {Ps#{P => D}, [J | Js]};
                                      ({P, {ok, D, _}}, {Ps, Js}) when is_number(D) -> {Ps#{P => D}, Js};
                                      (_, A) -> A
                                   end, Acc0, lists:zip(Round, Results)),
    Ends = lists:append([[A, B] || {A, B} <- Round]),
    Seen = [X || X <- Seed, lists:member(X, Seen0) orelse lists:member(X, Ends)],
    Tree = {network, c, #{height => 0}, [{node, X} || X <- Seen]},
    progress(Opts, State#{placed => lists:reverse(Seen), pairs => Pairs, tree => Tree}),
    seed_rounds(Later, Seed, Seen, Measure, Opts, State, Acc).

%% The seed's tree without the networks the noise made: a child network whose height
%% is within the band of its parent's (under the model of the tree, noise included) is
%% the same level, and its children move up (a rack of 0 µs nodes whose round trips
%% spread by load is one network, not two nested ones).
-spec within_noise(terrain:topology_tree(), number()) -> terrain:topology_tree().
within_noise(Tree, Noise) ->
    case terrain:topology_levels(Tree) of
        [] -> Tree;
        Levels -> dissolve(Tree, fun(H) -> terrain:level_bounds(H, Levels, Noise) end)
    end.

dissolve({node, _} = Leaf, _Bounds) ->
    Leaf;
dissolve({network, Name, #{height := H} = Opts, Children}, Bounds) ->
    {Lo, _} = Bounds(H),
    Kids = lists:append([case dissolve(C, Bounds) of
                             {network, _, #{height := Hc}, Sub} when Hc >= Lo -> Sub;
                             Kid -> [Kid]
                         end || C <- Children]),
    {network, Name, Opts, Kids}.

median(Xs) ->
    lists:nth((length(Xs) + 1) div 2, lists:sort(Xs)).

%% The modes of the seed's round trips, for a seed that full discovery leaves flat
%% (levels only 1.5x apart: a sample of a few dozen nodes holds no partition over a
%% range of alpha): the sorted logarithms split where two neighbours are further apart
%% than twenty times their median spacing and 0.05 (5%); a mode holding less than 1/40
%% of the round trips (a stray value at either end, or between two modes) joins the
%% neighbouring mode it is nearer to. Returns the modes' median round trips ([] with
%% fewer than 20 round trips).
-spec modes([number()]) -> [float()].
modes(Values) ->
    Logs = lists:sort([math:log(V) || V <- Values, V > 0]),
    case length(Logs) >= 20 of
        false ->
            [];
        true ->
            Gaps = [B - A || {A, B} <- lists:zip(lists:droplast(Logs), tl(Logs))],
            Split = max(0.05, 20 * lists:nth((length(Gaps) + 1) div 2, lists:sort(Gaps))),
            Rev = lists:foldl(fun({L, G}, [Cur | Done]) when G > Split -> [[L], lists:reverse(Cur) | Done];
                                 ({L, _}, [Cur | Done]) -> [[L | Cur] | Done]
                              end, [[hd(Logs)]], lists:zip(tl(Logs), Gaps)),
            [Last | Done] = Rev,
            Modes = join_small(lists:reverse([lists:reverse(Last) | Done]), length(Logs) / 40),
            [math:exp(lists:nth((length(M) + 1) div 2, M)) || M <- Modes]
    end.

%% Modes (ascending lists of logarithms, in order) with fewer than Min values joined
%% to the nearer neighbour, the smallest first, until none is left or one mode remains.
-spec join_small([[float()]], float()) -> [[float()]].
join_small([_] = Modes, _Min) ->
    Modes;
join_small(Modes, Min) ->
    case lists:sort([{length(M), I} || {I, M} <- lists:zip(lists:seq(1, length(Modes)), Modes), length(M) < Min]) of
        [] ->
            Modes;
        [{_, I} | _] ->
            T = list_to_tuple(Modes),
            M = element(I, T),
            Below = case I > 1 of true -> hd(M) - lists:last(element(I - 1, T)); false -> infinity end,
            Above = case I < tuple_size(T) of true -> hd(element(I + 1, T)) - lists:last(M); false -> infinity end,
            J = case Below =< Above of true -> I - 1; false -> I end,
            {Front, [A, B | Back]} = lists:split(J - 1, Modes),
            join_small(Front ++ [A ++ B | Back], Min)
    end.

%% Every network's height the median of the measured round trips between two of its
%% children (discovery's heights are diameters, the insertion's typical round trips).
typical_heights({node, _} = Leaf, _Pairs) ->
    Leaf;
typical_heights({network, Name, Opts, Children}, Pairs) ->
    Members = [leaves(C) || C <- Children],
    Across = [D || {I, Ms} <- lists:zip(lists:seq(1, length(Members)), Members),
                   {J, Ns} <- lists:zip(lists:seq(1, length(Members)), Members), I < J,
                   A <- Ms, B <- Ns, D <- pair(A, B, Pairs)],
    Height = case Across of
                 [] -> maps:get(height, Opts, 0);
                 _ -> lists:nth((length(Across) + 1) div 2, lists:sort(Across))
             end,
    {network, Name, Opts#{height => Height}, [typical_heights(C, Pairs) || C <- Children]}.

leaves({node, X}) -> [X];
leaves({network, _, _, Children}) -> lists:append([leaves(C) || C <- Children]).

pair(A, B, Pairs) ->
    case (known(Pairs))(A, B) of
        undefined -> [];
        D -> [D]
    end.

%%--------------------------------------------------------------------
%% Waves

waves([], _Measure, _Opts, State) ->
    {State, complete};
waves(Left, Measure, Opts, #{placed := Placed, waves := W} = State) ->
    case past(Opts) of
        true ->
            {State#{unplaced => maps:get(unplaced, State) ++ Left}, stopped};
        false ->
            Size = max(1, min(maps:get(wave, Opts, ?DEFAULT_WAVE), length(Placed) div ?TREE_PER_NEWCOMER)),
            {Wave, Rest} = lists:split(min(Size, length(Left)), Left),
            State1 = wave(Wave, Measure, Opts, State),
            progress(Opts, State1),
            waves(Rest, Measure, Opts, State1#{waves => W + 1})
    end.

past(Opts) ->
    case maps:get(stop, Opts, none) of
        none -> false;
        Stop -> Stop()
    end.

%% The first pass places every node of the wave into the same tree (through `map');
%% the second inserts them one by one, answering from what the first pass measured.
wave(Wave, Measure, Opts, #{tree := Tree, pairs := Pairs0} = State) ->
    InsertOpts = insert_options(Opts, Tree, State),
    Map = maps:get(map, Opts, fun lists:map/2),
    First = Map(fun(X) -> terrain:insert_node(X, Tree, Measure, InsertOpts#{known => known(Pairs0)}) end, Wave),
    Pairs1 = lists:foldl(fun({ok, _, Ps}, Acc) -> add_pairs(Ps, Acc);
                            (_, Acc) -> Acc
                         end, Pairs0, First),
    lists:foldl(fun(X, S) -> insert(X, Measure, InsertOpts, S) end, State#{pairs => Pairs1}, Wave).

%% Inserts X into the state's tree, round trips measured before answered from memory.
insert(X, Measure, InsertOpts, #{tree := Tree, pairs := Pairs, placed := Placed, unplaced := Unplaced} = State) ->
    Known = known(Pairs),
    Remembered = fun(A, B) ->
                         case Known(A, B) of
                             undefined -> Measure(A, B);
                             D -> {ok, D}
                         end
                 end,
    case terrain:insert_node(X, Tree, Remembered, InsertOpts#{known => Known}) of
        {ok, Tree1, Ps} -> State#{tree => Tree1, pairs => add_pairs(Ps, Pairs), placed => [X | Placed]};
        {error, _} -> State#{unplaced => Unplaced ++ [X]}
    end.

%% The insertion options of a wave: the user's, with the level model of the tree as it
%% stands (re-estimated every wave) unless the user gave `gap' or `levels', and the
%% seed's noise unless the user gave `noise'.
%% Modes: those of a seed; they stand in for the tree's levels while the tree has
%% fewer levels than the seed's round trips have modes (a seed discovery left flat).
-spec insert_options(options(), terrain:topology_tree(), map()) -> terrain:insert_options().
insert_options(Opts, Tree, State) ->
    Modes = maps:get(modes, State, []),
    InsertOpts = maps:merge(#{noise => maps:get(noise, State, 0.0)}, maps:get(insert, Opts, #{})),
    case is_map_key(gap, InsertOpts) orelse is_map_key(levels, InsertOpts) of
        true -> InsertOpts;
        false -> case terrain:topology_levels(Tree) of
                     Levels when length(Modes) > length(Levels) -> InsertOpts#{levels => Modes};
                     [] -> InsertOpts;
                     Levels -> InsertOpts#{levels => Levels}
                 end
    end.

%% The round trips measured so far between two nodes, for the insertion's order of a
%% twin's search (its latency profile).
-spec known(#{{node(), node()} => number()}) -> fun((node(), node()) -> number() | undefined).
known(Pairs) ->
    fun(A, B) ->
            case Pairs of
                #{{A, B} := D} -> D;
                #{{B, A} := D} -> D;
                _ -> undefined
            end
    end.

add_pairs(Ps, Acc) ->
    lists:foldl(fun({A, B, D}, M) ->
                        case M of
                            #{{B, A} := _} -> M;
                            _ -> M#{{A, B} => D}
                        end
                end, Acc, Ps).

progress(#{progress := Fun}, #{placed := Placed, total := Total, pairs := Pairs, t0 := T0, tree := Tree})
  when is_function(Fun) ->
    _ = Fun(#{placed => length(Placed), total => Total, pairs => map_size(Pairs),
              elapsed_ms => erlang:monotonic_time(millisecond) - T0, tree => canonical(Tree)}),
    ok;
progress(_, _) ->
    ok.

%%--------------------------------------------------------------------
%% Strict pairs

%% Two node children X and Y of one network N whose round trip is shorter than every
%% other round trip measured from either of them, by ?STRICT_MARGIN and by twice the
%% noise, become a network of their own (height: their round trip), when the model has
%% a level below N's: the pair is what latency shows beyond doubt (full discovery's
%% strict groups, docs/TOPOLOGY_DISCOVERY.md), but its round trip lies in N's band (the
%% AMD 7950X's SMT pairs of 21 ns round trip among 10 and 31-42 ns, quantized). Each of
%% the two needs ?STRICT_EVIDENCE other round trips measured. Nothing is measured.
-spec strict_pairs(options(), map()) -> map().
strict_pairs(Opts, #{tree := Tree, pairs := Pairs} = State) ->
    case insert_options(Opts, Tree, State) of
        #{gap := _} ->
            State;
        #{levels := Levels} = InsertOpts ->
            Noise = maps:get(noise, InsertOpts, 0.0),
            State#{tree => strict_pairs(Tree, by_node(Pairs), Levels, Noise)};
        #{} ->
            State
    end.

-spec strict_pairs(terrain:topology_tree(), #{node() => #{node() => number()}}, [number()], number()) ->
          terrain:topology_tree().
strict_pairs({node, _} = Leaf, _ByNode, _Levels, _Noise) ->
    Leaf;
strict_pairs({network, Name, #{height := H} = Opts, Children0}, ByNode, Levels, Noise) ->
    Children = [strict_pairs(C, ByNode, Levels, Noise) || C <- Children0],
    {Lo, _} = terrain:level_bounds(H, Levels, Noise),
    Xs = [X || {node, X} <- Children],
    Found = case lists:any(fun(L) -> L < Lo end, Levels) andalso length(Children) > 2 of
                true -> [{X, Y, D} || X <- Xs, {Y, D} <- [nearest(X, ByNode)], X < Y, lists:member(Y, Xs),
                                      strict(X, Y, D, ByNode, Noise), strict(Y, X, D, ByNode, Noise)];
                false -> []
            end,
    Paired = lists:append([[X, Y] || {X, Y, _} <- Found]),
    Kids = [C || C <- Children, not (element(1, C) =:= node andalso lists:member(element(2, C), Paired))]
        ++ [{network, list_to_atom(atom_to_list(Name) ++ "_strict" ++ integer_to_list(I)), #{height => D},
             [{node, X}, {node, Y}]} || {I, {X, Y, D}} <- lists:zip(lists:seq(1, length(Found)), Found)],
    {network, Name, Opts, Kids}.

%% The node X's nearest by its measured round trips ({none, infinity} without any).
nearest(X, ByNode) ->
    maps:fold(fun(Y, D, {_, Best}) when D < Best -> {Y, D};
                 (_, _, Acc) -> Acc
              end, {none, infinity}, maps:get(X, ByNode, #{})).

%% Every other round trip measured from X longer than D by the margin and twice the noise.
strict(X, Y, D, ByNode, Noise) ->
    Others = [E || {Z, E} <- maps:to_list(maps:get(X, ByNode, #{})), Z =/= Y],
    length(Others) >= ?STRICT_EVIDENCE andalso
        lists:all(fun(E) -> D * ?STRICT_MARGIN < E andalso D + 2 * Noise < E end, Others).

%% The measured round trips per node: X => #{Y => D} (both directions).
by_node(Pairs) ->
    maps:fold(fun({A, B}, D, Acc) ->
                      Acc1 = Acc#{A => (maps:get(A, Acc, #{}))#{B => D}},
                      Acc1#{B => (maps:get(B, Acc1, #{}))#{A => D}}
              end, #{}, Pairs).

%%--------------------------------------------------------------------
%% Repair

repair(_Measure, _Opts, 0, State) ->
    State;
repair(Measure, Opts, Rounds, #{tree := Tree, pairs := Pairs, reinserted := N} = State) ->
    InsertOpts = insert_options(Opts, Tree, State),
    Bounds = case InsertOpts of
                 #{gap := Gap} -> fun(H) -> {H / math:sqrt(Gap), H * math:sqrt(Gap)} end;
                 #{levels := Levels, noise := Noise} -> fun(H) -> terrain:level_bounds(H, Levels, Noise) end;
                 #{} -> fun(H) -> {H / math:sqrt(10), H * math:sqrt(10)} end
             end,
    Suspects = suspects(Tree, Pairs, Bounds) -- maps:get(settled, State, []),
    case Suspects =:= [] orelse past(Opts) of
        true ->
            State;
        false ->
            Reps = maps:get(representatives, InsertOpts, 1) + 1,
            State1 = lists:foldl(fun(X, St) -> reinsert(X, Measure, InsertOpts#{representatives => Reps}, St) end,
                                 State, Suspects),
            repair(Measure, Opts, Rounds - 1, State1#{reinserted => N + length(Suspects)})
    end.

%% X taken out and inserted again. A node that comes back beside the same siblings is
%% settled: measured again with more representatives, its place stands, and the round
%% trip that contradicted it is taken for an outlier (a later round would only draw
%% other representatives: at levels 1.5x apart with two-sided jitter, a site pair 4%
%% below the rack band sent a node into the wrong rack at its second reinsertion).
reinsert(X, Measure, InsertOpts, #{tree := Tree, placed := Placed} = State) ->
    case terrain:remove_node(X, Tree) of
        {ok, Without} ->
            State1 = insert(X, Measure, InsertOpts, State#{tree => Without, placed => Placed -- [X]}),
            case siblings(X, maps:get(tree, State1)) =:= siblings(X, Tree) of
                true -> State1#{settled => [X | maps:get(settled, State1, [])]};
                false -> State1
            end;
        {error, _} ->
            State
    end.

%% The members of X's parent network other than X ([] when X is not in the tree).
siblings(X, {network, _, _, Children} = Net) ->
    case lists:member({node, X}, Children) of
        true -> lists:sort(leaves(Net) -- [X]);
        false -> lists:append([siblings(X, C) || C <- Children])
    end;
siblings(_X, {node, _}) ->
    [].

%% The nodes whose measured round trips contradict the tree: one too short (delays
%% only add, so that is a misplacement), or too long ones making up at least three and
%% a quarter of the node's round trips (a few outliers are expected; on a loaded
%% machine emulated links inflate many round trips).
suspects(Tree, Pairs, Bounds) ->
    Paths = paths(Tree),
    Counts = maps:fold(fun({A, B}, D, Acc) ->
                               case {Paths, Paths} of
                                   {#{A := PA}, #{B := PB}} ->
                                       {Lo, Hi} = Bounds(lca_height(PA, PB)),
                                       Kind = if D < Lo -> short; D > Hi -> long; true -> fine end,
                                       count(A, Kind, count(B, Kind, Acc));
                                   _ ->
                                       Acc
                               end
                       end, #{}, Pairs),
    lists:sort([X || {X, {Short, Long, All}} <- maps:to_list(Counts),
                     Short >= 1 orelse (Long >= 3 andalso Long >= All / 4)]).

count(X, Kind, Acc) ->
    {Short, Long, All} = maps:get(X, Acc, {0, 0, 0}),
    Acc#{X => case Kind of
                  short -> {Short + 1, Long, All + 1};
                  long -> {Short, Long + 1, All + 1};
                  fine -> {Short, Long, All + 1}
              end}.

%% Per node: its networks from the root down as [{Position, Height}].
paths(Tree) ->
    paths(Tree, [], #{}).

paths({node, X}, Rev, Acc) ->
    Acc#{X => lists:reverse(Rev)};
paths({network, _, #{height := H}, Children}, Rev, Acc) ->
    {_, Acc1} = lists:foldl(fun(C, {I, A}) -> {I + 1, paths(C, [{I, H} | Rev], A)} end, {1, Acc}, Children),
    Acc1.

%% The height of the lowest common network: where the two paths part.
lca_height([{I, _} | A], [{I, _} | B]) -> lca_height(A, B);
lca_height([{_, H} | _], _) -> H.
