%% @private
%% @doc The checker of a chaos run (`terrain chaos'): a pure judgement of a history
%% (terrain_lab_chaos_history: the header and the lines, maps with binary keys).
%%
%% Invariants (docs/RELIABILITY.md, "What the checker checks"):
%% <ul>
%% <li>`convergence': after each burst's end, within grace + 2 s, one observation
%%     round in which every node alive answered, all at one version and one tree, and
%%     that tree holds exactly the nodes alive (the members of the spec as it now
%%     stands);</li>
%% <li>`tree': at the end (after the final settling time) the tree also groups the
%%     nodes as the spec does: each node's lowest network (of two nodes or more) holds
%%     exactly the nodes alive of its smallest group of the spec that has two or more;</li>
%% <li>`placed': at the end of each quiet period every group has exactly K members,
%%     with distinct processes, on nodes alive that match its predicate (`worker'),
%%     spread with a skew of at most 1 over the domains that still have room (when the
%%     tree groups the nodes as the spec does: joins measured, moves re-measured); and
%%     never more than K members at any time;</li>
%% <li>`subscription': each subscription sees increasing versions, and a message
%%     after missed versions carries a whole tree (a topology with nodes, not a change);</li>
%% <li>`acknowledged': no change a client saw acknowledged is lost: the version a
%%     node answered the observer never goes back on that node, and no version was
%%     acknowledged with two different trees outside a partition (a sequencer's successor
%%     that published another tree at a version a client had seen lost that change);</li>
%% <li>`deadline': no timed library call took longer than its deadline + 1 s;</li>
%% <li>`crash': no crash report of a terrain process;</li>
%% <li>`leftover': nothing of the run is left after it (VMs, epmd names, cgroups).</li>
%% </ul>
-module(terrain_lab_chaos_checker).

%% API
-export([check/2,
         percentile/2]).

%% exports_not_used: percentile/2 is checked on its own by terrain_lab_chaos_checker_tests.
-ignore_xref([{percentile, 2}]).

-define(SLACK_MS, 1000).          % a timed call may overrun its deadline by this much

-type verdict() :: #{faults := non_neg_integer(),
                     violations := [map()],
                     convergence_ms := #{p50 := number() | null, p99 := number() | null,
                                         max := number() | null, samples := non_neg_integer()},
                     bursts := [map()],
                     fault_errors := [map()],
                     crashes := non_neg_integer(),
                     divergent_versions := non_neg_integer(),
                     acknowledged := #{versions := non_neg_integer(), sequencer_kills := non_neg_integer()}}.
-export_type([verdict/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Judges the lines of a history (header `Header': `grace_ms', `groups').
-spec check(map(), [map()]) -> verdict().
check(Header, Lines) ->
    Grace = maps:get(<<"grace_ms">>, Header, 0),
    World = world(Lines),
    Bursts = bursts(Lines, World, Grace),
    Samples = [C || #{convergence_ms := C} <- Bursts, C =/= null],
    Violations = lists:sort(fun(A, B) -> maps:get(t, A) =< maps:get(t, B) end,
                            lists:append([[V || #{violation := V} <- Bursts],
                                           final(Lines, World),
                                           placed(Header, Lines, grouped(Bursts, Lines, World)),
                                           subscriptions(Lines, World),
                                           acknowledged(Lines, Bursts, Grace),
                                           deadlines(Lines),
                                           crashes(Lines),
                                           leftovers(Lines)])),
    #{faults => length([L || L <- Lines, is_fault(L), get(<<"result">>, L) =:= <<"ok">>]),
      violations => Violations,
      convergence_ms => #{p50 => percentile(Samples, 50), p99 => percentile(Samples, 99),
                          max => case Samples of [] -> null; _ -> lists:max(Samples) end,
                          samples => length(Samples)},
      bursts => [maps:remove(violation, B) || B <- Bursts],
      fault_errors => [#{t => get(<<"t">>, L), op => get(<<"op">>, L), node => get(<<"node">>, L),
                         result => get(<<"result">>, L)}
                       || L <- Lines, is_fault(L), get(<<"result">>, L) =/= <<"ok">>],
      crashes => length([L || L <- Lines, get(<<"op">>, L) =:= <<"crash">>]),
      divergent_versions => divergent(Lines, World),
      acknowledged => #{versions => length(lists:usort([P || {_T, _Op, _N, P} <- acknowledgements(Lines)])),
                        sequencer_kills => length([L || L <- Lines, get(<<"op">>, L) =:= <<"kill">>,
                                                        get(<<"sequencer">>, L) =:= true,
                                                        get(<<"result">>, L) =:= <<"ok">>])}}.

%% @doc The P-th percentile (nearest rank) of a list of numbers; null when empty.
-spec percentile([number()], 0..100) -> number() | null.
percentile([], _P) ->
    null;
percentile(Samples, P) ->
    Sorted = lists:sort(Samples),
    Rank = max(1, ceil(P / 100 * length(Sorted))),
    lists:nth(Rank, Sorted).

%%--------------------------------------------------------------------
%% Internal: the world as the nemesis made it

%% The trees seen (hash => #{nodes, clades}) and, in time order, the node events.
world(Lines) ->
    Trees = maps:from_list([{get(<<"hash">>, L), #{nodes => lists:sort(get(<<"nodes">>, L)),
                                                    clades => [lists:sort(C) || C <- get(<<"clades">>, L)]}}
                            || L <- Lines, get(<<"op">>, L) =:= <<"tree">>]),
    #{trees => Trees}.

%% The nodes alive (node => #{path, worker}) just after line index I: folded in order.
alive_after(Lines, T) ->
    lists:foldl(fun(L, Acc) ->
                        case get(<<"op">>, L) =:= <<"node">> andalso get(<<"t">>, L) =< T of
                            false -> Acc;
                            true -> node_event(L, Acc)
                        end
                end, #{}, Lines).

node_event(L, Acc) ->
    Node = get(<<"node">>, L),
    case get(<<"result">>, L) of
        <<"up">> -> Acc#{Node => #{path => get(<<"path">>, L), worker => get(<<"worker">>, L)}};
        <<"moved">> -> case Acc of
                           #{Node := Info} -> Acc#{Node := Info#{path := get(<<"path">>, L)}};
                           _ -> Acc
                       end;
        <<"down">> -> maps:remove(Node, Acc)
    end.

is_fault(L) ->
    lists:member(get(<<"op">>, L), [atom_to_binary(F) || F <- terrain_lab_chaos_schedule:fault_ops()]).

get(Key, Map) ->
    maps:get(Key, Map, null).

%%--------------------------------------------------------------------
%% Internal: convergence after each burst

bursts(Lines, World, Grace) ->
    Ends = [{get(<<"burst">>, L), get(<<"t">>, L), get(<<"last_op">>, L)}
            || L <- Lines, get(<<"op">>, L) =:= <<"burst_end">>],
    Starts = [get(<<"t">>, L) || L <- Lines, get(<<"op">>, L) =:= <<"burst_start">>]
        ++ [get(<<"t">>, L) || L <- Lines, get(<<"op">>, L) =:= <<"final">>],
    Observations = [L || L <- Lines, get(<<"op">>, L) =:= <<"observe">>],
    [burst(B, End, LastOp, next_after(End, Starts), Observations, Lines, World, Grace) || {B, End, LastOp} <- Ends].

next_after(T, Times) ->
    case [X || X <- Times, X > T] of
        [] -> infinity;
        Later -> lists:min(Later)
    end.

burst(B, End, LastOp, Next, Observations, Lines, World, Grace) ->
    Deadline = End + Grace + 2000,
    Alive = alive_after(Lines, End),
    Window = [O || O <- Observations, get(<<"t">>, O) >= End, get(<<"t">>, O) =< min(Deadline, Next)],
    case [O || O <- Window, converged(O, Alive, World)] of
        [First | _] ->
            T = get(<<"t">>, First),
            #{burst => B, 'end' => End, converged_at => T, convergence_ms => T - End,
              grouping => grouping_ok(First, Alive, World)};
        [] ->
            Why = case lists:reverse(Window) of
                      [] -> <<"no observation round in the window">>;
                      [Last | _] -> why_not(Last, Alive, World)
                  end,
            #{burst => B, 'end' => End, converged_at => null, convergence_ms => null, grouping => false,
              violation => #{t => Deadline, invariant => convergence, op => LastOp, burst => B,
                             detail => iolist_to_binary(
                                         io_lib:format("not converged ~b ms after the end of burst ~b "
                                                       "(grace + 2 s): ~ts", [Grace + 2000, B, Why]))}}
    end.

%% Every node alive answered, all with one version and one tree, which holds exactly
%% the nodes alive.
converged(O, Alive, #{trees := Trees}) ->
    Seen = get(<<"result">>, O),
    Expected = lists:sort(maps:keys(Alive)),
    case lists:usort(maps:values(Seen)) of
        [[_Version, Hash]] when Hash =/= null ->
            lists:sort(maps:keys(Seen)) =:= Expected
                andalso maps:get(nodes, maps:get(Hash, Trees, #{nodes => none})) =:= Expected;
        _ ->
            false
    end.

why_not(O, Alive, #{trees := Trees}) ->
    Seen = get(<<"result">>, O),
    Expected = lists:sort(maps:keys(Alive)),
    Pairs = lists:usort(maps:values(Seen)),
    Tree = fun(null) -> "no tree";
              (H) -> io_lib:format("tree ~w of ~b nodes",
                                   [H, length(maps:get(nodes, maps:get(H, Trees, #{nodes => []})))])
           end,
    Held = [io_lib:format("version ~w with ~ts (held by ~ts)",
                          [V, Tree(H), names(lists:sort([N || {N, P} <- maps:to_list(Seen), P =:= [V, H]]))])
            || [V, H] <- Pairs],
    io_lib:format("the last round (t = ~b ms) saw ~ts; nodes alive that did not answer: ~ts; nodes alive: ~ts",
                  [get(<<"t">>, O), lists:join("; ", Held), names(Expected -- maps:keys(Seen)), names(Expected)]).

%% Node names (binaries) as text: `a, b, c', `none'.
names([]) -> "none";
names(Nodes) -> lists:join(", ", [text(N) || N <- Nodes]).

text(B) when is_binary(B) -> B;
text(Other) -> io_lib:format("~0tp", [Other]).

%% Each node's lowest network in the tree holds exactly its group's nodes alive.
grouping_ok(O, Alive, #{trees := Trees}) ->
    [[_, Hash] | _] = maps:values(get(<<"result">>, O)),
    misplaced(maps:get(clades, maps:get(Hash, Trees)), Alive) =:= [].

misplaced(Clades, Alive) ->
    [Node || Node <- maps:keys(Alive), lowest(Clades, Node) =/= expected_clade(Node, Alive)].

%% The smallest network of the tree that holds the node and another one (a network
%% left with one node collapses into its parent).
lowest(Clades, Node) ->
    case lists:sort([{length(C), C} || C <- Clades, length(C) > 1, lists:member(Node, C)]) of
        [{_, C} | _] -> C;
        [] -> []
    end.

%% The nodes alive of the smallest group of the spec that holds the node and another
%% node alive (all nodes alive when none does).
expected_clade(Node, Alive) ->
    #{path := Path} = maps:get(Node, Alive),
    In = fun(Prefix) -> lists:sort([N || {N, #{path := P}} <- maps:to_list(Alive), lists:prefix(Prefix, P)]) end,
    case [C || D <- lists:seq(length(Path), 1, -1), length(C = In(lists:sublist(Path, D))) > 1] of
        [C | _] -> C;
        [] -> lists:sort(maps:keys(Alive))
    end.

%%--------------------------------------------------------------------
%% Internal: the final state (membership and grouping)

final(Lines, World) ->
    case [get(<<"t">>, L) || L <- Lines, get(<<"op">>, L) =:= <<"final">>] of
        [] ->
            [];
        [T | _] ->
            Alive = alive_after(Lines, T),
            case lists:reverse([L || L <- Lines, get(<<"op">>, L) =:= <<"observe">>, get(<<"t">>, L) =< T]) of
                [] ->
                    [#{t => T, invariant => tree, op => <<"final">>, detail => <<"no observation before the end">>}];
                [Last | _] ->
                    final_tree(Last, Alive, World, T)
            end
    end.

final_tree(Last, Alive, #{trees := Trees} = World, T) ->
    case converged(Last, Alive, World) of
        false ->
            [#{t => T, invariant => tree, op => <<"final">>,
               detail => iolist_to_binary(["not converged at the end: ", why_not(Last, Alive, World)])}];
        true ->
            [[_, Hash] | _] = maps:values(get(<<"result">>, Last)),
            case misplaced(maps:get(clades, maps:get(Hash, Trees)), Alive) of
                [] -> [];
                Misplaced ->
                    [#{t => T, invariant => tree, op => <<"final">>,
                       detail => iolist_to_binary(
                                   io_lib:format("the final tree groups ~ts unlike the spec (their lowest "
                                                 "networks do not hold exactly their groups' nodes)",
                                                 [names(lists:sort(Misplaced))]))}]
            end
    end.

%%--------------------------------------------------------------------
%% Internal: placed groups

placed(Header, Lines, Grouped) ->
    Groups = maps:from_list([{get(<<"name">>, G), G} || G <- maps:get(<<"groups">>, Header, [])]),
    Placed = [L || L <- Lines, get(<<"op">>, L) =:= <<"placed">>, is_map_key(get(<<"group">>, L), Groups)],
    Over = [#{t => get(<<"t">>, L), invariant => placed, op => <<"placed">>,
              detail => iolist_to_binary(io_lib:format("group ~ts has ~b members, more than its ~b",
                                                       [get(<<"group">>, L), length(get(<<"members">>, L)),
                                                        get(<<"count">>, maps:get(get(<<"group">>, L), Groups))]))}
            || L <- Placed, length(get(<<"members">>, L)) > get(<<"count">>, maps:get(get(<<"group">>, L), Groups))],
    Ends = [get(<<"t">>, L) || L <- Lines, lists:member(get(<<"op">>, L), [<<"burst_start">>, <<"final">>])],
    Settled = [last_before(E, [P || P <- Placed, get(<<"group">>, P) =:= Name])
               || E <- Ends, Name <- maps:keys(Groups)],
    Over ++ lists:append([placed_ok(P, maps:get(get(<<"group">>, P), Groups), alive_after(Lines, get(<<"t">>, P)),
                                    Grouped(get(<<"t">>, P)))
                          || P <- Settled, P =/= none]).

last_before(T, Lines) ->
    case lists:reverse([L || L <- Lines, get(<<"t">>, L) < T]) of
        [L | _] -> L;
        [] -> none
    end.

%% Whether the tree grouped the nodes as the spec did at time T: the grouping of the
%% last burst judged before T (a group spreads over the tree's domains; the spec's
%% become the tree's only once joins are measured and moves re-measured).
grouped(Bursts, Lines, World) ->
    Final = case [get(<<"t">>, L) || L <- Lines, get(<<"op">>, L) =:= <<"final">>] of
                [T | _] -> final(Lines, World) =:= [] andalso {T, true};
                [] -> false
            end,
    fun(T) ->
            case [{E, G} || #{'end' := E, grouping := G} <- Bursts, E =< T] ++ [F || {E, _} = F <- [Final], E =< T] of
                [] -> true;
                Judged -> element(2, lists:max(Judged))
            end
    end.

%% A settled group: K members with distinct pids on live matching nodes, spread (when
%% the tree groups the nodes as the spec does).
placed_ok(P, Group, Alive, Grouped) ->
    Members = get(<<"members">>, P),
    K = get(<<"count">>, Group),
    Nodes = [N || [N, _Pid] <- Members],
    Problems = [io_lib:format("~b members, not ~b", [length(Members), K]) || length(Members) =/= K]
        ++ [io_lib:format("two members share a process", []) || length(lists:usort(Members)) =/= length(Members)]
        ++ [io_lib:format("a member on ~ts, which is not alive", [N]) || N <- Nodes, not is_map_key(N, Alive)]
        ++ [io_lib:format("a member on ~ts, which does not match the predicate", [N])
            || N <- Nodes, get(<<"worker">>, Group) =:= true,
               maps:get(worker, maps:get(N, Alive, #{worker => true})) =/= true]
        ++ [S || Grouped, S <- spread(Nodes, Group, Alive)],
    [#{t => get(<<"t">>, P), invariant => placed, op => <<"placed">>,
       detail => iolist_to_binary(io_lib:format("group ~ts (members on ~ts): ~ts",
                                                [get(<<"name">>, Group), names(Nodes), lists:join("; ", Problems)]))}
     || Problems =/= []].

%% Max skew 1: no domain has two members more than a domain that still has room.
spread(Nodes, Group, Alive) ->
    case get(<<"spread_depth">>, Group) of
        null ->
            [];
        Depth ->
            Domain = fun(N) -> lists:sublist(maps:get(path, maps:get(N, Alive)), Depth) end,
            Eligible = [N || {N, #{worker := W}} <- maps:to_list(Alive),
                             W =:= true orelse get(<<"worker">>, Group) =/= true],
            Domains = lists:usort([Domain(N) || N <- Eligible]),
            Count = fun(D) -> length([N || N <- Nodes, is_map_key(N, Alive), Domain(N) =:= D]) end,
            Room = fun(D) -> length([N || N <- Eligible, Domain(N) =:= D]) > Count(D) end,
            Max = lists:max([0 | [Count(D) || D <- Domains]]),
            [io_lib:format("domain ~ts has ~b members while ~ts has ~b and room for more",
                           [lists:join("/", DMax), Max, lists:join("/", D), Count(D)])
             || D <- Domains, Room(D), Count(D) < Max - 1, DMax <- [hd([X || X <- Domains, Count(X) =:= Max])]]
    end.

%%--------------------------------------------------------------------
%% Internal: subscriptions, deadlines, crashes, leftovers

subscriptions(Lines, #{trees := Trees}) ->
    Notes = [L || L <- Lines, get(<<"op">>, L) =:= <<"notify">>],
    {_, Violations} =
        lists:foldl(fun(L, {Last, Acc}) ->
                            Sub = get(<<"sub">>, L),
                            V = get(<<"version">>, L),
                            Tree = maps:get(get(<<"hash">>, L), Trees, #{nodes => []}),
                            Acc1 = case maps:get(Sub, Last, none) of
                                       Prev when is_integer(Prev), V =< Prev ->
                                           [sub_violation(L, io_lib:format("version ~b after ~b", [V, Prev])) | Acc];
                                       Prev when is_integer(Prev), V > Prev + 1 ->
                                           whole_tree(L, Tree, Prev, Acc);
                                       _ -> Acc
                                   end,
                            {Last#{Sub => V}, Acc1}
                    end, {#{}, []}, Notes),
    lists:reverse(Violations).

%% A message after missed versions must carry a whole tree, not a change to apply to
%% the versions missed: a topology with nodes. (Not necessarily one that holds the
%% subscriber's node: after a partition longer than the grace period the winning side's
%% tree lacks the other side's nodes until they are placed again.)
whole_tree(L, #{nodes := Nodes}, Prev, Acc) ->
    case Nodes of
        [_ | _] -> Acc;
        [] -> [sub_violation(L, io_lib:format("version ~b after ~b (missed versions) without a whole tree",
                                              [get(<<"version">>, L), Prev])) | Acc]
    end.

sub_violation(L, Text) ->
    #{t => get(<<"t">>, L), invariant => subscription, op => <<"notify">>,
      detail => iolist_to_binary(io_lib:format("subscription ~ts on ~ts: ~ts",
                                               [get(<<"sub">>, L), get(<<"node">>, L), Text]))}.

%%--------------------------------------------------------------------
%% Internal: acknowledged changes

%% What a client saw acknowledged: a node's [version, tree] in the observer's answers
%% and a subscription's message, as {T, Op, Node, {Version, Hash}} in history order. A
%% node without a tree (version 0, no hash) acknowledged nothing.
acknowledgements(Lines) ->
    lists:append([acks(get(<<"op">>, L), L) || L <- Lines]).

acks(<<"observe">> = Op, L) ->
    [{get(<<"t">>, L), Op, N, {V, H}} || {N, [V, H]} <- lists:sort(maps:to_list(get(<<"result">>, L))), H =/= null];
acks(<<"notify">> = Op, L) ->
    [{get(<<"t">>, L), Op, get(<<"node">>, L), {get(<<"version">>, L), get(<<"hash">>, L)}}];
acks(_Op, _L) ->
    [].

acknowledged(Lines, Bursts, Grace) ->
    went_back(Lines) ++ forks(acknowledgements(Lines), partitions(Lines, Bursts, Grace)).

%% The version each node answered the observer never goes back (rounds are sequential;
%% a subscription's messages are judged per subscription by `subscription').
went_back(Lines) ->
    {_, Violations} =
        lists:foldl(fun(L, {Last, Acc}) ->
                            Seen = [{N, V} || {N, [V, H]} <- lists:sort(maps:to_list(get(<<"result">>, L))),
                                              H =/= null],
                            Back = [ack_violation(get(<<"t">>, L), <<"observe">>,
                                                  io_lib:format("~ts answered version ~b after it had answered ~b "
                                                                "(t = ~b ms): the version went back",
                                                                [N, V, Prev, PrevT]))
                                    || {N, V} <- Seen, {Prev, PrevT} <- [maps:get(N, Last, {-1, 0})], V < Prev],
                            {maps:merge(Last, maps:from_list([{N, {V, get(<<"t">>, L)}} || {N, V} <- Seen])),
                             lists:reverse(Back, Acc)}
                    end, {#{}, []}, [L || L <- Lines, get(<<"op">>, L) =:= <<"observe">>]),
    lists:reverse(Violations).

%% A version acknowledged with a second tree: a change lost, unless one of the two
%% was seen while a partition lasted (each side numbers its own changes until the sides
%% merge above both).
forks(Acks, Partitions) ->
    First = lists:foldl(fun({T, Op, N, {V, H}}, Acc) ->
                                Trees = maps:get(V, Acc, #{}),
                                case Trees of
                                    #{H := _} -> Acc;
                                    #{} -> Acc#{V => Trees#{H => {T, Op, N}}}
                                end
                        end, #{}, Acks),
    Partitioned = fun(T) -> lists:any(fun({From, To}) -> T >= From andalso T < To end, Partitions) end,
    [ack_violation(T2, Op2,
                   io_lib:format("version ~b was acknowledged with tree ~w (~ts on ~ts, t = ~b ms) and then with "
                                 "tree ~w (~ts on ~ts): a change a client saw was lost",
                                 [V, H1, Op1, N1, T1, H2, Op2, N2]))
     || {V, Trees} <- lists:sort(maps:to_list(First)), map_size(Trees) > 1,
        [{T1, Op1, N1, H1}, {T2, Op2, N2, H2} | _] <- [lists:sort([{T, Op, N, H}
                                                                    || {H, {T, Op, N}} <- maps:to_list(Trees)])],
        not Partitioned(T1), not Partitioned(T2)].

%% The times partitions last: from each `partition' until the sides are one again,
%% which the live topology promises within grace + 2 s of the heal: to the heal + grace
%% + 2 s, or later to the round that converged after it (of the first burst ending at or
%% after the heal that converged; to the end when none did). A round at one version and
%% tree right after a short partition does not end it: the sides may not have met yet,
%% and each removes the other's nodes after the grace period.
partitions(Lines, Bursts, Grace) ->
    Converged = fun(T) ->
                        case [C || #{'end' := E, converged_at := C} <- Bursts, E >= T, C =/= null] of
                            [] -> infinity;
                            Cs -> max(T + Grace + 2000, lists:min(Cs))
                        end
                end,
    Cuts = [{get(<<"op">>, L), get(<<"t">>, L)} || L <- Lines,
                                                   lists:member(get(<<"op">>, L), [<<"partition">>, <<"heal">>]),
                                                   get(<<"result">>, L) =:= <<"ok">>],
    pair_cuts(Cuts, Converged).

pair_cuts([{<<"partition">>, From} | Rest], Converged) ->
    case lists:dropwhile(fun({Op, _}) -> Op =/= <<"heal">> end, Rest) of
        [{_, Heal} | After] -> [{From, Converged(Heal)} | pair_cuts(After, Converged)];
        [] -> [{From, infinity}]
    end;
pair_cuts([_ | Rest], Converged) ->
    pair_cuts(Rest, Converged);
pair_cuts([], _Converged) ->
    [].

ack_violation(T, Op, Text) ->
    #{t => T, invariant => acknowledged, op => Op, detail => iolist_to_binary(Text)}.

deadlines(Lines) ->
    [#{t => get(<<"t">>, L), invariant => deadline, op => get(<<"op">>, L),
       detail => iolist_to_binary(io_lib:format("~ts on ~ts took ~b ms, its deadline is ~b ms",
                                                [get(<<"op">>, L), get(<<"node">>, L), get(<<"elapsed_ms">>, L),
                                                 get(<<"deadline_ms">>, L)]))}
     || L <- Lines, is_integer(get(<<"deadline_ms">>, L)), is_integer(get(<<"elapsed_ms">>, L)),
        get(<<"elapsed_ms">>, L) > get(<<"deadline_ms">>, L) + ?SLACK_MS].

crashes(Lines) ->
    [#{t => get(<<"t">>, L), invariant => crash, op => <<"crash">>,
       detail => iolist_to_binary(io_lib:format("a terrain process crashed on ~ts: ~ts",
                                                [get(<<"node">>, L), get(<<"result">>, L)]))}
     || L <- Lines, get(<<"op">>, L) =:= <<"crash">>].

leftovers(Lines) ->
    [#{t => get(<<"t">>, L), invariant => leftover, op => <<"leftover">>,
       detail => iolist_to_binary(io_lib:format("left after the run: ~ts", [names(get(<<"result">>, L))]))}
     || L <- Lines, get(<<"op">>, L) =:= <<"leftover">>, get(<<"result">>, L) =/= []].

%% Versions seen with more than one tree (a partition's sides at equal versions): not
%% a violation by itself, but the sign of the divergence the convergence check judges.
divergent(Lines, _World) ->
    Pairs = lists:usort(lists:append([[{V, H} || [V, H] <- maps:values(get(<<"result">>, L)), H =/= null]
                                      || L <- Lines, get(<<"op">>, L) =:= <<"observe">>])),
    Versions = [V || {V, _} <- Pairs],
    length(lists:usort(Versions -- lists:usort(Versions))).
