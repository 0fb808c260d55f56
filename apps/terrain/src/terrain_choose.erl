%% @private
%% @doc Selection orchestration behind {@link terrain:choose_nodes/3} and
%% {@link terrain:choose_node/3}: resolves the candidates, builds the evaluation
%% context (group members, distances and levels from this node's topology), fetches
%% the attributes the predicates need once for all candidates, and hands them to the
%% pure evaluator {@link terrain_select}. Options arrive validated by `terrain'.
%%
%% {@link terrain_spawn} and {@link terrain_place} use the same steps
%% (`resolve_candidates/1', `context/1', `fetch/3') for spawning and placement.
-module(terrain_choose).

%% API
-export([nodes/3,
         node/3,
         resolve_candidates/1,
         check_nodes/1,
         context/1,
         fetch/3,
         dedup/1,
         topology_distance/3,
         topology_level/3,
         domain_of/1,
         nearest_first/1]).

-define(DEFAULT_TIMEOUT, 1000).

%%--------------------------------------------------------------------
%% API

%% @doc The candidates that satisfy the predicates, as {@link terrain:choose_nodes/3}
%% returns them.
-spec nodes(terrain:candidates(), terrain:predicate() | [terrain:predicate()], terrain:choose_options()) ->
          [node()] | {[node()], terrain:explanation()} | {[node()], [terrain:predicate()]} | {error, term()}.
nodes(Candidates, Preds, Opts) ->
    case select(Candidates, Preds, Opts, []) of
        {ok, {[], _Dropped, Explain}} when map_get(explain, Opts) =:= true ->
            {[], explain(Explain)};
        {ok, {Nodes, Dropped, _}} when map_get(relax, Opts) =:= true ->
            {spread(Nodes, Opts), Dropped};
        {ok, {Nodes, _, _}} ->
            case {spread(Nodes, Opts), maps:get(explain, Opts, false)} of
                {Picked, true} when is_map_key(count, Opts); is_map_key(spread, Opts) ->
                    case shortfall(Picked, Nodes, Opts) of
                        none -> Picked;
                        Shortfall -> {Picked, Shortfall}
                    end;
                {Picked, _} ->
                    Picked
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc One node that satisfies the predicates, picked by `pick' (default `random').
-spec node(terrain:candidates(), terrain:predicate() | [terrain:predicate()], terrain:choose_node_options()) ->
          {ok, node()} | {error, term()}.
node(Candidates, Preds, Opts) ->
    Pick = maps:get(pick, Opts, random),
    LoadAttr = maps:get(load_attr, Opts, scheduler_utilisation),
    Extra = case Pick of least_loaded -> [LoadAttr]; _ -> [] end,
    case select(Candidates, Preds, Opts, Extra) of
        {ok, {[], _, _}} -> {error, none};
        {ok, {Nodes, _, {Values, _}}} -> {ok, pick(Pick, spread_best(Nodes, Opts), LoadAttr, Values)};
        {error, _} = Error -> Error
    end.

%% @doc The failure domain of a node under a spread and this node's topology (each
%% node its own domain without a topology).
-spec domain_of(terrain_topology:spread()) -> fun((node()) -> term()).
domain_of(Spread) ->
    case terrain_topology_server:current() of
        undefined -> fun(N) -> {node, N} end;
        T -> fun(N) -> terrain_topology:domain(T, Spread, N) end
    end.

%% @doc Nodes nearest first from this node (stable: ties keep their order).
-spec nearest_first([node()]) -> [node()].
nearest_first(Nodes) ->
    Topology = terrain_topology_server:current(),
    order_by_distance(Nodes, #{self => node(), distance => fun(A, B) -> topology_distance(Topology, A, B) end}).

%% @doc The nodes that `candidates()' stands for.
-spec resolve_candidates(term()) -> {ok, [node()]} | {error, term()}.
resolve_candidates(all) ->
    {ok, [node() | erlang:nodes()]};
resolve_candidates({group, Scope, Group}) when is_atom(Scope) ->
    group_nodes(Scope, Group);
resolve_candidates(Nodes) when is_list(Nodes) ->
    case check_nodes(Nodes) of
        ok -> {ok, Nodes};
        {error, _} -> {error, {bad_candidates, Nodes}}
    end;
resolve_candidates(Other) ->
    {error, {bad_candidates, Other}}.

%% @doc `ok' for a proper list of node names.
-spec check_nodes(term()) -> ok | {error, {bad_nodes, term()}}.
check_nodes(Nodes) ->
    case all_atoms(Nodes) of
        true -> ok;
        false -> {error, {bad_nodes, Nodes}}
    end.

%% @doc The evaluation context: group members now; distances, levels and subtrees
%% from the node's topology. Without a topology every other node is `anywhere'
%% (distance 2.0) and no network exists.
-spec context(terrain:predicate() | [terrain:predicate()]) -> {ok, terrain_select:context()} | {error, term()}.
context(Preds) ->
    Groups = lists:usort([{Scope, Group} || {group, Scope, Group} <- flatten(Preds)]),
    Members = [{Key, group_nodes(Scope, Group)} || {Scope, Group} = Key <- Groups],
    case [Error || {_, {error, _} = Error} <- Members] of
        [Error | _] ->
            Error;
        [] ->
            Topology = terrain_topology_server:current(),
            {ok, #{self => node(),
                   groups => maps:from_list([{Key, Nodes} || {Key, {ok, Nodes}} <- Members]),
                   distance => fun(From, To) -> topology_distance(Topology, From, To) end,
                   level => fun(From, To) -> topology_level(Topology, From, To) end,
                   subtree => fun(Network) -> topology_subtree(Topology, Network) end}}
    end.

%% @doc The attribute values of `Nodes' and the nodes that could not be asked. No
%% attributes needed (only group, distance or level predicates): nobody is asked.
-spec fetch([node()], [terrain:attr_name()], terrain:query_options() | map()) ->
          {terrain_select:values(), #{node() => term()}}.
fetch(_Nodes, [], _Opts) ->
    {#{}, #{}};
fetch(Nodes, Names, Opts) ->
    terrain_attr_query:gather(Nodes, Names, maps:get(timeout, Opts, ?DEFAULT_TIMEOUT), maps:get(max_age, Opts, 0)).

%% @doc The nodes in their order, each once.
-spec dedup([node()]) -> [node()].
dedup(Nodes) ->
    {Kept, _} = lists:foldl(fun(N, {Acc, Seen}) ->
                                    case Seen of
                                        #{N := _} -> {Acc, Seen};
                                        _ -> {[N | Acc], Seen#{N => true}}
                                    end
                            end, {[], #{}}, Nodes),
    lists:reverse(Kept).

%% @doc The distance between two nodes under a topology, or without one (`undefined').
-spec topology_distance(terrain_topology:topology() | undefined, node(), node()) -> number().
topology_distance(_T, Same, Same) -> 0;
topology_distance(undefined, _A, _B) -> 2.0;
topology_distance(T, A, B) -> terrain_topology:distance(T, A, B).

%% @doc The level of two nodes under a topology, or without one (`undefined').
-spec topology_level(terrain_topology:topology() | undefined, node(), node()) -> terrain_topology:level().
topology_level(_T, Same, Same) -> same_node;
topology_level(undefined, _A, _B) -> anywhere;
topology_level(T, A, B) -> terrain_topology:level(T, A, B).

%%--------------------------------------------------------------------
%% Internal

%% Resolves candidates, fetches the attributes the predicates need, and selects.
%% Returns the selection, the predicates relax dropped, and what explain needs.
select(Candidates, Preds, Opts, ExtraNames) ->
    case {resolve_candidates(Candidates), context(Preds)} of
        {{ok, Nodes}, {ok, Ctx}} ->
            Names = lists:usort(terrain_select:attr_names(Preds) ++ ExtraNames
                                ++ [A || {A, _} <- [maps:get(order_by, Opts, none)]]),
            {Values, Unreachable} = fetch(Nodes, Names, Opts),
            Reachable = case map_size(Unreachable) of
                            0 -> Nodes;
                            _ -> [N || N <- Nodes, not maps:is_key(N, Unreachable)]
                        end,
            {Selected, Dropped} =
                case maps:get(relax, Opts, false) of
                    true -> terrain_select:relax(Reachable, Preds, Values, Ctx);
                    false -> {terrain_select:select(Reachable, Preds, Values, Ctx), []}
                end,
            Ordered = case maps:get(order_by, Opts, none) of
                          distance -> order_by_distance(Selected, Ctx);
                          {Attr, Direction} -> terrain_select:order_by(Selected, Attr, Direction, Values);
                          none -> Selected
                      end,
            {ok, {Ordered, Dropped, {Values, {Nodes, Preds, Unreachable, Ctx}}}};
        {{error, _} = Error, _} ->
            Error;
        {_, {error, _} = Error} ->
            Error
    end.

%% count / spread (docs/DISTANCES.md, "Spread"): K of the matches, spread over the
%% domains, nearest first within that unless order_by gave an order.
spread(Nodes, Opts) when is_map_key(count, Opts); is_map_key(spread, Opts) ->
    K = maps:get(count, Opts, length(Nodes)),
    Ordered = case maps:is_key(order_by, Opts) of
                  true -> Nodes;
                  false -> nearest_first(Nodes)
              end,
    terrain_spread:assign(Ordered, spread_domain(Opts), K, maps:get(occupied, Opts, []), false);
spread(Nodes, _Opts) ->
    Nodes.

spread_best(Nodes, #{spread := _} = Opts) ->
    Ordered = case maps:is_key(order_by, Opts) of
                  true -> Nodes;
                  false -> nearest_first(Nodes)
              end,
    terrain_spread:best(Ordered, spread_domain(Opts), maps:get(occupied, Opts, []));
spread_best(Nodes, _Opts) ->
    Nodes.

spread_domain(#{spread := Spread}) -> domain_of(Spread);
spread_domain(#{}) -> fun(N) -> {node, N} end.

shortfall(Picked, Matched, Opts) ->
    K = maps:get(count, Opts, length(Matched)),
    Spread = maps:get(spread, Opts, none),
    case terrain_spread:shortfall(Picked, spread_domain(Opts), K, {Matched, Spread}) of
        none -> none;
        #{shared := Shared} = S -> S#{shared := [{domain_name(D), C} || {D, C} <- Shared]}
    end.

domain_name({node, _} = D) -> D;
domain_name(Id) ->
    case terrain_topology_server:current() of
        undefined -> Id;
        T -> terrain_topology:network_name(T, Id)
    end.

explain({Values, {Nodes, Preds, Unreachable, Ctx}}) ->
    terrain_select:explain(Nodes, Preds, Values, Unreachable, Ctx).

topology_subtree(undefined, _Network) -> [];
topology_subtree(T, Network) -> terrain_topology:subtree(T, Network).

%% Nearest first; a stable sort keeps the candidates' order among equals.
order_by_distance(Nodes, #{self := Self, distance := Distance}) ->
    [N || {_, _, N} <- lists:sort([{Distance(Self, N), I, N} || {I, N} <- lists:zip(lists:seq(1, length(Nodes)), Nodes)])].

%% The nodes of a pg group's members, in member order, each once. (pg answers `[]'
%% for a scope that does not exist, so check that the scope is running.)
group_nodes(Scope, Group) ->
    case whereis(Scope) of
        undefined -> {error, {no_scope, Scope}};
        _ -> {ok, dedup([node(P) || P <- pg:get_members(Scope, Group)])}
    end.

flatten(Ps) when is_list(Ps) -> lists:append([flatten(P) || P <- Ps]);
flatten({'not', P}) -> flatten(P);
flatten({'or', Ps}) -> flatten(Ps);
flatten({'and', Ps}) -> flatten(Ps);
flatten(P) -> [P].

%% A proper list of atoms (a tight loop: candidate lists are checked on every query).
all_atoms([N | Ns]) when is_atom(N) -> all_atoms(Ns);
all_atoms([]) -> true;
all_atoms(_) -> false.

pick(first, [Node | _], _LoadAttr, _Values) ->
    Node;
pick(random, Nodes, _LoadAttr, _Values) ->
    lists:nth(rand:uniform(length(Nodes)), Nodes);
pick(round_robin, Nodes, _LoadAttr, _Values) ->
    lists:nth(1 + (terrain_attr_table:next_round_robin() rem length(Nodes)), Nodes);
pick(least_loaded, Nodes, LoadAttr, Values) ->
    Loads = [{maps:get(LoadAttr, maps:get(N, Values, #{}), undefined), N} || N <- Nodes],
    case [{L, N} || {L, N} <- Loads, L =/= undefined] of
        [] ->
            pick(random, Nodes, LoadAttr, Values);
        Defined ->
            Min = lists:min([L || {L, _} <- Defined]),
            pick(random, [N || {L, N} <- Defined, L == Min], LoadAttr, Values)
    end.
