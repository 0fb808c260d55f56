%% @private
%% @doc Spread over failure domains (pure): which K of the matching nodes to take so
%% that they fall into as many distinct domains as the matches allow, evenly.
%%
%% The rule, for `choose_nodes(..., #{count => K, spread => Level})' and for placed
%% groups: nodes are taken one at a time; each time from the domain that holds the
%% fewest picks so far (counting the `occupied' nodes the caller already uses), among
%% domains that still have a node to give; ties go to the domain whose first node
%% comes first in the candidates' order (nearest first), and within a domain to the
%% node with the fewest picks, then to the earlier node. So the counts of any two
%% domains differ by at most one unless the smaller one ran out of nodes (max skew 1):
%% with 4 racks and K = 4, one node per rack; with K = 6, 2, 2, 1, 1 (the two nearest
%% racks get the second node).
%%
%% Without `repeat' a node is taken at most once (and never an occupied one); with it
%% (placed groups with more processes than nodes) a node can take several picks, and
%% the same rule spreads them.
-module(terrain_spread).

%% API
-export([assign/5,
         best/3,
         shortfall/4,
         format_shortfall/1]).

-export_type([shortfall/0]).

-type domain() :: term().

-type shortfall() :: #{count := pos_integer(),
                       spread := terrain_topology:spread() | none,
                       matched := non_neg_integer(),
                       picked := non_neg_integer(),
                       domains := non_neg_integer(),
                       shared := [{domain(), pos_integer()}]}.
%% Why a spread was not met: K asked, how many nodes matched, how many were picked,
%% over how many distinct domains, and the domains that got more than one pick.

%%--------------------------------------------------------------------
%% API

%% @doc K picks from `Candidates' (ordered nearest first) under the rule above.
-spec assign(Candidates :: [node()], DomainOf :: fun((node()) -> domain()), K :: non_neg_integer(),
             Occupied :: [node()], Repeat :: boolean()) -> [node()].
assign(Candidates, DomainOf, K, Occupied, Repeat) ->
    State = init(Candidates, DomainOf, Occupied),
    assign_loop(State, K, Repeat, []).

%% @doc The candidates a single pick may take, in their order: those tied for the
%% lowest (domain picks, node picks) given the occupied nodes; `[]' when there are
%% no candidates. A node is never excluded for being occupied (one node, several
%% processes), it just ranks behind free ones.
-spec best(Candidates :: [node()], DomainOf :: fun((node()) -> domain()), Occupied :: [node()]) -> [node()].
best([], _DomainOf, _Occupied) ->
    [];
best(Candidates, DomainOf, Occupied) ->
    #{nodes := Nodes} = State = init(Candidates, DomainOf, Occupied),
    Keyed = [{element(1, load_key(N, State)), element(2, load_key(N, State)), N} || {N, _, _} <- Nodes],
    Min = lists:min([{D, C} || {D, C, _} <- Keyed]),
    [N || {D, C, N} <- Keyed, {D, C} =:= Min].

%% @doc `none' when the picks meet the spread (K nodes, no domain with two while
%% another matched domain has none), else what fell short.
-spec shortfall([node()], fun((node()) -> domain()), pos_integer(), {[node()], terrain_topology:spread() | none}) ->
          none | shortfall().
shortfall(Picked, DomainOf, K, {Matched, Spread}) ->
    Counts = lists:foldl(fun(N, Acc) -> maps:update_with(DomainOf(N), fun(C) -> C + 1 end, 1, Acc) end,
                         #{}, Picked),
    Shared = lists:sort([{D, C} || {D, C} <- maps:to_list(Counts), C > 1]),
    case length(Picked) < K orelse Shared =/= [] of
        false -> none;
        true -> #{count => K, spread => Spread, matched => length(lists:usort(Matched)),
                  picked => length(Picked), domains => map_size(Counts), shared => Shared}
    end.

%% @doc A sentence (or two) for a shortfall.
-spec format_shortfall(shortfall()) -> iolist().
format_shortfall(#{count := K, spread := Spread, matched := M, picked := P, domains := D, shared := Shared}) ->
    [io_lib:format("spread not met: ~b node~s asked, ~b matched, ~b picked", [K, plural(K), M, P]),
     case Spread of
         none -> "";
         _ -> io_lib:format(" over ~b distinct domain~s of ~0tp", [D, plural(D), Spread])
     end,
     case Shared of
         [] -> "";
         _ -> io_lib:format("; too few domains have matching nodes, so ~ts",
                            [lists:join(", ", [io_lib:format("~ts holds ~b", [domain_text(Dom), C]) || {Dom, C} <- Shared])])
     end,
     case P < K of
         true -> io_lib:format("; only ~b node~s matched the predicates", [M, plural(M)]);
         false -> ""
     end,
     "\n"].

%%--------------------------------------------------------------------
%% Internal

%% State: nodes with their domain and index; domain order by first appearance; picks
%% per domain and per node (occupied nodes counted).
init(Candidates, DomainOf, Occupied) ->
    Unique = terrain_choose:dedup(Candidates),
    Nodes = [{N, DomainOf(N), I} || {I, N} <- lists:zip(lists:seq(1, length(Unique)), Unique)],
    DomainIndex = lists:foldl(fun({_, D, I}, Acc) -> maps:merge(#{D => I}, Acc) end, #{}, Nodes),
    Count = fun(Key, Acc) -> maps:update_with(Key, fun(C) -> C + 1 end, 1, Acc) end,
    #{nodes => Nodes,
      domain_index => DomainIndex,
      domain_picks => lists:foldl(fun(N, Acc) -> Count(DomainOf(N), Acc) end, #{}, Occupied),
      node_picks => lists:foldl(Count, #{}, Occupied)}.

load_key(N, #{nodes := Nodes, domain_index := DI, domain_picks := DP, node_picks := NP}) ->
    {N, D, I} = lists:keyfind(N, 1, Nodes),
    {maps:get(D, DP, 0), maps:get(N, NP, 0), maps:get(D, DI), I}.

assign_loop(_State, 0, _Repeat, Acc) ->
    lists:reverse(Acc);
assign_loop(#{nodes := Nodes, node_picks := NP, domain_picks := DP} = State, K, Repeat, Acc) ->
    Eligible = case Repeat of
                   true -> Nodes;
                   false -> [E || {N, _, _} = E <- Nodes, not maps:is_key(N, NP)]
               end,
    case Eligible of
        [] ->
            lists:reverse(Acc);
        _ ->
            {_, {N, D, _}} = lists:min([{load_key(N, State), E} || {N, _, _} = E <- Eligible]),
            Inc = fun(C) -> C + 1 end,
            assign_loop(State#{node_picks := maps:update_with(N, Inc, 1, NP),
                               domain_picks := maps:update_with(D, Inc, 1, DP)},
                        K - 1, Repeat, [N | Acc])
    end.

domain_text({node, N}) -> io_lib:format("~0tp", [N]);
domain_text(Other) -> io_lib:format("~0tp", [Other]).

plural(1) -> "";
plural(_) -> "s".
