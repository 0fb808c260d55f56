%% @private
%% @doc ML-ACO runs in the lab: where the tree's vertices go (placement) and one run on
%% one node (`local'), a running cluster or a cluster started from a spec.
%%
%% Placements (by predicates on attributes, never by node names):
%% <ul>
%% <li>`random' — the nodes in a random order (from the seed), vertices in tree order:
%%     the baseline of RELEASE D3.5 §3.4;</li>
%% <li>`attributes' — colonies on the nodes with the most CPU capacity (built-in
%%     `cpu_quota' at least half the largest quota among the nodes, or unlimited: the
%%     predicate `{cpu_quota, ge, Largest / 2}'), the master and submasters on the others;
%%     relaxed to every node when no node qualifies for a role; within a role the picks
%%     are spread round-robin over the suitable nodes so that no two vertices clash on a
%%     node while another suitable node is free (§5.1.3);</li>
%% <li>`distance' — `terrain:place_tree/2' (children near their parents);</li>
%% <li>`attributes_and_distance' — `terrain:place_tree/2' with the colonies restricted
%%     to the big nodes.</li>
%% </ul>
-module(terrain_lab_aco).

-export([place/4,
         run/5,
         format_error/1]).

-export_type([placement/0]).

-type placement() :: random | attributes | distance | attributes_and_distance.

%% @doc A name → node assignment for the vertices of `Tree' on `Nodes'.
-spec place(placement(), terrain_workloads:aco_tree(), [node()], integer()) ->
          {ok, #{list() => node()}} | {error, term()}.
place(random, Tree, Nodes, Seed) ->
    {Shuffled, _} = shuffle(Nodes, rand:seed_s(exsss, {Seed, 16#5eed, 7})),
    {ok, maps:from_list(lists:zip(vertices(Tree), cycle(Shuffled, length(vertices(Tree)))))};
place(attributes, Tree, Nodes, _Seed) ->
    {Big, Small, _} = split(Nodes),
    Colonies = [N || N <- vertices(Tree), is_colony(Tree, N)],
    Others = vertices(Tree) -- Colonies,
    {ok, maps:from_list(lists:zip(Colonies, cycle(Big, length(Colonies)))
                        ++ lists:zip(Others, cycle(Small, length(Others))))};
place(distance, Tree, Nodes, _Seed) ->
    place_tree(terrain_workloads:aco_process_tree(Tree), Nodes);
place(attributes_and_distance, Tree, Nodes, _Seed) ->
    ProcessTree = terrain_workloads:aco_process_tree(Tree),
    case split(Nodes) of
        {Nodes, Nodes, _} -> place_tree(ProcessTree, Nodes);   % relaxed: no node is small, or none big
        {_, _, Threshold} -> place_tree(restrict(ProcessTree, Tree, Threshold), Nodes)
    end;
place(Other, _Tree, _Nodes, _Seed) ->
    {error, {aco, {bad_placement, Other}}}.

%% @doc Runs ML-ACO with the master on the node the assignment gives it (name `[]'),
%% under the run's deadline.
-spec run(terrain_aco_instance:instance(), terrain_workloads:aco_tree(), #{list() => node()},
          terrain_workloads:aco_options(), pos_integer()) -> {ok, terrain_workloads:aco_result()} | {error, term()}.
run(Instance, Tree, Assignment, Options, Timeout) ->
    Master = maps:get([], Assignment, node()),
    try erpc:call(Master, terrain_workloads, aco_run, [Instance, Tree, Assignment, Options#{timeout => Timeout}],
                  Timeout + 5000)
    catch
        Class:Why -> {error, {aco, {master_failed, Master, {Class, Why}}}}
    end.

%% @doc A sentence for an error of this module.
-spec format_error({aco, term()}) -> iolist().
format_error({aco, {bad_placement, P}}) ->
    io_lib:format("unknown placement ~0tp (random, attributes, distance or attributes_and_distance)", [P]);
format_error({aco, {master_failed, Node, Why}}) ->
    io_lib:format("the ML-ACO master on ~0tp failed: ~0tP", [Node, Why, 12]);
format_error({aco, {place_tree, Why}}) ->
    io_lib:format("terrain:place_tree failed: ~0tP", [Why, 10]).

%%--------------------------------------------------------------------
%% Internal functions

%% Tree order: the master, then level by level.
vertices(Tree) ->
    bfs([Tree]).

bfs([]) -> [];
bfs(Level) -> [Name || {_, Name, _} <- Level] ++ bfs(lists:append([C || {_, _, C} <- Level])).

is_colony(Tree, Name) ->
    lists:member(Name, [N || {colony, N, _} <- flatten(Tree)]).

flatten({_, _, Children} = V) -> [V | lists:append([flatten(C) || C <- Children])].

cycle([], _N) -> [];
cycle(List, N) -> lists:sublist(lists:append(lists:duplicate(N div length(List) + 1, List)), N).

shuffle(List, Rand0) ->
    {Keyed, Rand} = lists:foldl(fun(X, {Acc, R0}) -> {U, R1} = rand:uniform_s(R0), {[{U, X} | Acc], R1} end,
                                {[], Rand0}, List),
    {[X || {_, X} <- lists:sort(Keyed)], Rand}.

%% {Big, Small, Threshold}: big nodes are unlimited or have a CPU quota of at least
%% Threshold, half the largest quota among the nodes (so the split follows the cluster:
%% 0.4-core VMs are big next to 0.05-core ones). Relaxed to every node for both roles
%% when no node is big or none small.
split(Nodes) ->
    Values = terrain:attrs(Nodes, [cpu_quota], #{timeout => 5000}),
    Quota = fun(N) ->
                    case maps:get(N, Values, undefined) of
                        {ok, #{cpu_quota := Q}} -> Q;
                        _ -> unknown
                    end
            end,
    Threshold = case [Q || Q <- lists:map(Quota, Nodes), is_number(Q)] of
                    [] -> 0.0;
                    Quotas -> lists:max(Quotas) / 2
                end,
    Big = [N || N <- Nodes,
                case Quota(N) of
                    undefined -> true;
                    unknown -> false;
                    Q -> Q >= Threshold
                end],
    case {Big, Nodes -- Big} of
        {[], _} -> {Nodes, Nodes, Threshold};
        {_, []} -> {Nodes, Nodes, Threshold};
        {B, S} -> {B, S, Threshold}
    end.

%% On the first node, which has the cluster's topology (this VM may not).
place_tree(ProcessTree, [First | _] = Nodes) ->
    case catch erpc:call(First, terrain, place_tree, [ProcessTree, #{candidates => Nodes}], 60000) of
        {ok, #{assignment := Assignment}} -> {ok, Assignment};
        {error, Why} -> {error, {aco, {place_tree, Why}}};
        {'EXIT', Why} -> {error, {aco, {place_tree, Why}}}
    end.

%% Colonies may only go to the big nodes: the predicate of split/1.
restrict({vertex, Name, Children}, Tree, Threshold) ->
    Restricted = [restrict(C, Tree, Threshold) || C <- Children],
    case is_colony(Tree, Name) of
        true -> {vertex, Name, [{'or', [{cpu_quota, ge, Threshold}, {'not', {cpu_quota, exists}}]}], Restricted};
        false -> {vertex, Name, Restricted}
    end.
