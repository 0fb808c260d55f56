%% @private
%% @doc Benchmarks of collective operations (terrain_paths) on a cluster started
%% from a spec: every algorithm, value size and rank order, side by side in one run;
%% and the tuner that turns such a run into a rules file for `auto'.
%%
%% Members are processes on the cluster's nodes (`members_per_node' each, ranks
%% laid out by the rank order). A measurement: all members pass a barrier on a
%% separate communicator, then each runs the operation `rounds' + 1 times back to
%% back and notes the time after each. Back to back, an allreduce cannot complete
%% anywhere before every member has started it, and no member starts it before it
%% has finished the one before: every member sees completions one period apart,
%% and that period is the operation's latency. A round's time is the median over
%% the members of the interval between their two completions (the maximum would
%% pick the worst OS preemption of 16 VMs each round). The barrier's uneven release
%% only affects the first round, which is discarded with the set-up of connections
%% and monitors.
-module(terrain_lab_collective).

%% API
-export([bench/2,
         tune/2,
         measure/3,
         table/1,
         format_error/1]).

%% Internal exports (member processes on the cluster's nodes)
-export([member/1]).

%% exports_not_used: measure/3 is used by bench_collective (make bench).
-ignore_xref([{measure, 3}]).

-export_type([options/0]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_COLLECTIVE).
-define(SYNC_TIMEOUT, 120000).

-type rank_order() :: block | round_robin | random.
-type options() ::
        #{spec := terrain_lab_spec:spec(),
          algorithms := [terrain_paths:named_algorithm() | auto],
          sizes := [pos_integer()],            % bytes: vectors of size/8 floats
          members_per_node := pos_integer(),
          rounds := pos_integer(),
          rank_orders := [rank_order()],
          seeds := pos_integer(),               % random orders (median over them)
          rules => file:filename(),             % for auto
          exchange => terrain_paths_plan:exchange_shape(), % hierarchical's (default: the communicator's auto)
          prefix => string(),
          log_dir => file:filename(),           % each VM's log, LOG_DIR/NAME.log (terrain_lab_cluster)
          checkpoint => fun((map()) -> ok),    % the document so far (partial) after each measurement
          timeout => pos_integer()}.            % ms per operation            % ms per operation

%%--------------------------------------------------------------------
%% API

%% @doc Starts the spec's cluster, measures, stops it. Returns the
%% `terrain.collective/1' document. `Progress' receives one line per measurement.
-spec bench(options(), fun((iodata()) -> ok)) -> {ok, map()} | {error, term()}.
bench(#{spec := Spec} = Options, Progress) ->
    Progress(io_lib:format("starting ~b nodes of ~ts~n", [length(terrain_lab_spec:nodes(Spec)), spec_name(Spec)])),
    terrain_lab:with_cluster(Spec, maps:merge(#{prefix => maps:get(prefix, Options, "coll_")},
                                              maps:with([log_dir], Options)),
                             fun(Nodes) -> measure_all(Options, Nodes, Progress) end).

%% @doc Measures on running nodes of the spec (as {@link bench/2} does after the start).
-spec measure(options(), [terrain_lab_cluster:node_info()], fun((iodata()) -> ok)) -> {ok, map()} | {error, term()}.
measure(Options, NodeInfos, Progress) ->
    measure_all(Options, NodeInfos, Progress).

%% @doc Measures every algorithm (as {@link bench/2}), writes a rules file choosing
%% the fastest at each size (boundaries at the geometric middle between measured
%% sizes), then measures `auto' with those rules in the same cluster. Returns the
%% rules document and the comparison.
-spec tune(options(), fun((iodata()) -> ok)) -> {ok, map(), [map()]} | {error, term()}.
tune(#{spec := Spec} = Options, Progress) ->
    Progress(io_lib:format("starting ~b nodes of ~ts~n", [length(terrain_lab_spec:nodes(Spec)), spec_name(Spec)])),
    terrain_lab:with_cluster(Spec, #{prefix => maps:get(prefix, Options, "tune_")},
                             fun(Nodes) -> tune_on(Options, Nodes, Progress) end).

tune_on(#{spec := Spec} = Options, Nodes, Progress) ->
    case measure_all(Options, Nodes, Progress) of
        {ok, #{results := Results}} ->
            [Order | _] = maps:get(rank_orders, Options),
            Rules = rules(Results, Order),
            Json = terrain_paths:rules_json(Rules, #{spec => spec_name(Spec), rank_order => Order,
                                                     members_per_node => maps:get(members_per_node, Options)}),
            case check_auto(Options#{algorithms => [auto], rank_orders => [Order]}, Rules, Results, Nodes, Progress) of
                {ok, Check} -> {ok, Json, Check};
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc The members in rank order for a layout: `block' (consecutive ranks on one
%% node, nodes in spec order), `round_robin' (rank r on node r mod n), `random'
%% (a permutation drawn with `Seed').
-spec rank_order(rank_order(), [[pid()]], non_neg_integer()) -> [pid()].
rank_order(block, PerNode, _Seed) ->
    lists:append(PerNode);
rank_order(round_robin, PerNode, _Seed) ->
    round_robin(PerNode, []);
rank_order(random, PerNode, Seed) ->
    State = rand:seed_s(exsss, {Seed, 7, 11}),
    {Keyed, _} = lists:mapfoldl(fun(P, S) -> {X, S1} = rand:uniform_s(S), {{X, P}, S1} end,
                                State, lists:append(PerNode)),
    [P || {_, P} <- lists:sort(Keyed)].

%% @doc Lower bounds of hierarchical allreduce on a spec, µs, for a value of
%% `Bytes' whose group leaders exchange in `Shape': `{Hierarchical, Tree}'. Each
%% level costs its one-way latency, plus Bytes/bandwidth where a bandwidth is set.
%% Hierarchical crosses the lowest level twice (up to the group's leader, and back
%% down) and, between, the levels above it: each once when the leaders exchange
%% level by level (`levels'), only the costliest of them when every leader sends to
%% every other directly (`direct': the messages to the other groups travel at once,
%% each over one path). Tree: every level twice, the bound of a reduce up a tree
%% then a broadcast down (the issue's formula).
-spec lower_bounds(terrain_lab_spec:spec(), pos_integer(), terrain_paths_plan:exchange_shape()) -> {number(), number()}.
lower_bounds(#{options := ClusterOptions, groups := Groups, nodes := Nodes}, Bytes, Shape) ->
    Levels = [{[], ClusterOptions} | Groups],
    Children = fun(Path) ->
                       length([P || {P, _} <- Groups, length(P) =:= length(Path) + 1, lists:prefix(Path, P)])
                           + length([N || #{path := P} = N <- Nodes, P =:= Path])
               end,
    Depths = lists:usort([length(P) || {P, _} <- Levels, Children(P) >= 2]),
    PerDepth = [lists:max([level_cost(O, Bytes) || {P, O} <- Levels, length(P) =:= D, Children(P) >= 2])
                || D <- Depths],
    case {PerDepth, Shape} of
        {[], _} -> {0, 0};
        {[Lowest], _} -> {2 * Lowest, 2 * Lowest};
        {_, levels} -> {lists:sum(PerDepth) + lists:last(PerDepth), 2 * lists:sum(PerDepth)};
        {_, direct} -> {lists:max(lists:droplast(PerDepth)) + 2 * lists:last(PerDepth), 2 * lists:sum(PerDepth)}
    end.

%% @doc The results as a table (one line per algorithm, size and order).
-spec table(map()) -> iodata().
table(#{results := Results}) ->
    [io_lib:format("~-20s ~10s ~-12s ~12s ~12s ~10s~n",
                   ["ALGORITHM", "BYTES", "ORDER", "MEDIAN_US", "P95_US", "BOUND_US"]),
     [io_lib:format("~-20s ~10b ~-12s ~12b ~12b ~10s~n",
                    [A, S, O, round(M), round(P),
                     case R of #{lower_bound_us := B} -> integer_to_list(round(B)); _ -> "-" end])
      || #{algorithm := A, size_bytes := S, rank_order := O, median_us := M, p95_us := P} = R <- Results]].

%% @doc A sentence for an error of this module.
-spec format_error(term()) -> iolist().
format_error({collective, {member_failed, Algorithm, Why}}) ->
    io_lib:format("a member failed while measuring ~0tp: ~ts", [Algorithm, terrain_paths:format_error(Why)]);
format_error({collective, {communicator, Why}}) ->
    terrain_paths:format_error(Why);
format_error({collective, {members_lost, Why}}) ->
    io_lib:format("lost the members: ~0tp", [Why]);
format_error({collective, {member_down, Node, Why}}) ->
    io_lib:format("a member on ~ts went down (~ts)", [Node, case Why of
                                                             noconnection -> "its node was killed or cut off";
                                                             _ -> io_lib:format("~0tP", [Why, 10])
                                                         end]);
format_error({collective, interrupted}) ->
    "interrupted (SIGTERM)";
format_error({collective, Other}) ->
    io_lib:format("~0tp", [Other]).

%%--------------------------------------------------------------------
%% Internal: measuring

measure_all(Options, NodeInfos, Progress) ->
    #{spec := Spec, members_per_node := PerNode} = Options,
    Nodes = [N || #{node := N} <- NodeInfos],
    Names = maps:from_list([{Name, N} || #{name := Name, node := N} <- NodeInfos]),
    Topology = terrain_lab_spec:topology(Spec, fun(Name) -> maps:get(Name, Names) end),
    Started = terrain_lab_run:timestamp(),
    MembersPerNode = [[spawn(Node, ?MODULE, member, [self()]) || _ <- lists:seq(1, PerNode)] || Node <- Nodes],
    All = lists:append(MembersPerNode),
    Doc = fun(Results, Partial) ->
                  #{format => ?FORMAT,
                    spec => spec_name(Spec),
                    nodes => length(Nodes),
                    members => length(All),
                    members_per_node => PerNode,
                    operation => allreduce,
                    rounds => maps:get(rounds, Options),
                    seeds => maps:get(seeds, Options),
                    load_average => terrain_lab_os:load_average(),
                    started_at => Started,
                    finished_at => terrain_lab_run:timestamp(),
                    partial => Partial,
                    results => Results}
          end,
    Checkpoint = maps:get(checkpoint, Options, fun(_) -> ok end),
    try
        {ok, Sync} = terrain_paths:communicator(All, #{algorithm => hierarchical, topology => Topology,
                                                      timeout => ?SYNC_TIMEOUT}),
        %% after every measurement: the document so far to the checkpoint (marked
        %% partial), and a SIGTERM the caller turned into a message stops here
        Done = fun(Result, Results) ->
                       Checkpoint(Doc(Results ++ [Result], true)),
                       receive {?MODULE, interrupt} -> throw({collective_error, interrupted}) after 0 -> ok end,
                       Results ++ [Result]
               end,
        Results = lists:foldl(fun(Algorithm, Acc) ->
                                      measure_algorithm(Options, Algorithm, MembersPerNode, Sync, Topology, Progress,
                                                        {Done, Acc})
                              end, [], maps:get(algorithms, Options)),
        {ok, Doc(Results, false)}
    catch
        throw:{collective_error, Why} -> {error, {collective, Why}}
    after
        [exit(P, kill) || P <- All]
    end.

measure_algorithm(Options, Algorithm, MembersPerNode, Sync, Topology, Progress, {Done, Acc0}) ->
    #{spec := Spec, sizes := Sizes, rank_orders := Orders, seeds := Seeds} = Options,
    %% hierarchical reads the topology, so it is measured once: in the first order asked
    %% for (a random order scatters a group's ranks, and its partials carry runs)
    Orders1 = case Algorithm of hierarchical -> [hd(Orders)]; _ -> Orders end,
    lists:foldl(fun({Size, Order}, Acc) -> Done(
     begin
         Runs = [run_rounds(Options, Algorithm, Size, rank_order(Order, MembersPerNode, Seed), Sync, Topology)
                 || Seed <- case Order of random -> lists:seq(1, Seeds); _ -> [1] end],
         Median = median([M || {M, _, _} <- Runs]),
         P95 = median([P || {_, P, _} <- Runs]),
         Progress(io_lib:format("~-20s ~8b B ~-12s median ~10.1f ms  p95 ~10.1f ms~n",
                                [Algorithm, Size, Order, Median / 1000, P95 / 1000])),
         Bounds = case Algorithm of
                      hierarchical ->
                          [Shape | _] = [S || {_, _, S} <- Runs],
                          {Exchange, Tree} = lower_bounds(Spec, Size, Shape),
                          #{lower_bound_us => Exchange, tree_lower_bound_us => Tree, exchange => Shape};
                      _ -> #{}
                  end,
         Bounds#{algorithm => Algorithm, size_bytes => Size, rank_order => Order,
                 median_us => Median, p95_us => P95,
                 seeds_used => length(Runs)}
     end, Acc) end, Acc0, [{Size, Order} || Size <- Sizes, Order <- Orders1]).

run_rounds(Options, Algorithm, Size, Members, Sync, Topology) ->
    Opts = maps:merge(#{algorithm => Algorithm, topology => Topology, timeout => maps:get(timeout, Options, 60000)},
                      maps:with([rules, exchange], Options)),
    Comm = case terrain_paths:communicator(Members, Opts) of
               {ok, C} -> C;
               {error, Reason} -> throw({collective_error, {communicator, Reason}})
           end,
    Rounds = maps:get(rounds, Options),
    Ref = make_ref(),
    %% a member whose node is killed is noticed at once, not at the deadline
    Monitors = maps:from_list([{erlang:monitor(process, M), M} || M <- Members]),
    _ = [M ! {measure, self(), Ref, Sync, Comm, Size, Rounds + 1} || M <- Members],
    Times = try [receive
                     {Ref, M, {ok, T}} -> T;
                     {Ref, M, {error, Why}} -> throw({collective_error, {member_failed, Algorithm, Why}});
                     {'DOWN', MRef, process, Dead, Why} when is_map_key(MRef, Monitors) ->
                         throw({collective_error, {member_down, node(Dead), Why}});
                     {?MODULE, interrupt} ->      % SIGTERM in a long measurement: it is dropped
                         throw({collective_error, interrupted})
                 after ?SYNC_TIMEOUT * 2 -> throw({collective_error, {members_lost, timeout}})
                 end || M <- Members]
            after [erlang:demonitor(MRef, [flush]) || MRef <- maps:keys(Monitors)]
            end,
    %% per round: the members' median interval between completions; the first is a warm-up
    PerRound = tl([median(Round) || Round <- transpose(Times)]),
    {median(PerRound), percentile(PerRound, 0.95), maps:get(exchange_shape, terrain_paths:hierarchy(Comm))}.

%% A member: on each measure request, a barrier, then Rounds allreduces back to
%% back; it reports the interval before each completion.
-spec member(pid()) -> no_return().
member(Controller) ->
    receive
        {measure, Controller, Ref, Sync, Comm, Size, Rounds} ->
            Value = value(Size, terrain_paths:rank(Comm)),
            Result = rounds(Sync, Comm, Value, Rounds, []),
            Controller ! {Ref, self(), Result},
            member(Controller)
    end.

rounds(Sync, Comm, Value, N, []) ->
    case terrain_paths:barrier(Sync) of
        ok -> back_to_back(Comm, Value, N, erlang:monotonic_time(microsecond), []);
        {error, _} = Error -> Error
    end.

back_to_back(_Comm, _Value, 0, _Last, Acc) ->
    {ok, lists:reverse(Acc)};
back_to_back(Comm, Value, N, Last, Acc) ->
    case terrain_paths:allreduce(Comm, Value, sum) of
        {ok, _} ->
            Now = erlang:monotonic_time(microsecond),
            back_to_back(Comm, Value, N - 1, Now, [Now - Last | Acc]);
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Internal: tuning

%% For each size, the fastest algorithm under the rank order; a rule covers the
%% sizes from the geometric middle below to the geometric middle above, and
%% neighbouring rules with the same algorithm are one. Rules are in external sizes
%% (what `auto' measures: erlang:external_size/1 of the benchmark's float list).
rules(Results, Order) ->
    Sizes = lists:usort([S || #{size_bytes := S} <- Results]),
    External = [erlang:external_size(value(S, 0)) || S <- Sizes],
    Best = [best(Results, S, Order) || S <- Sizes],
    Bounds = [0 | [round(math:sqrt(A * B)) || {A, B} <- lists:zip(lists:droplast(External), tl(External))]],
    Uppers = tl(Bounds) ++ [infinity],
    Rules = [#{operation => allreduce, min_bytes => Lo, max_bytes => Hi, algorithm => Algorithm}
             || {Lo, Hi, Algorithm} <- lists:zip3(Bounds, Uppers, Best)],
    lists:foldr(fun(#{algorithm := A, min_bytes := Lo}, [#{algorithm := A} = Next | Rest]) ->
                        [Next#{min_bytes => Lo} | Rest];
                   (Rule, Acc) ->
                        [Rule | Acc]
                end, [], Rules).

%% The benchmark's value of a size: a list of size/8 floats.
value(Size, Rank) ->
    lists:duplicate(max(1, Size div 8), float(Rank)).

best(Results, Size, Order) ->
    Candidates = [{M, A} || #{algorithm := A, size_bytes := S, rank_order := O, median_us := M} <- Results,
                            S =:= Size, A =/= auto, O =:= Order orelse A =:= hierarchical],
    element(2, lists:min(Candidates)).

check_auto(Options, Rules, Results, Nodes, Progress) ->
    Dir = filename:join(filename:basedir(user_cache, "terrain"), "tune"),
    File = filename:join(Dir, "rules-" ++ os:getpid() ++ ".json"),
    Written = terrain_lab_steps:run([fun(_) -> terrain_lab_files:make_dir(Dir) end,
                                     fun(_) -> terrain_lab_files:write(File, terrain_json:encode(
                                                                                 terrain_paths:rules_json(Rules, #{}),
                                                                                 #{pretty => true}))
                                     end], none),
    case Written of
        ok -> check_auto(Options, Rules, Results, Nodes, Progress, File);
        {error, _} = Error -> Error
    end.

check_auto(Options, Rules, Results, Nodes, Progress, File) ->
    try
        case measure_all(Options#{rules => File}, Nodes, Progress) of
            {ok, #{results := Auto}} ->
                [Order | _] = maps:get(rank_orders, Options),
                {ok, [#{size_bytes => S, auto_us => M, best => best(Results, S, Order),
                        chosen => terrain_paths:rules_choice(Rules, allreduce, erlang:external_size(value(S, 0)),
                                                              length(Nodes)),
                        best_us => best_time(Results, S, Order), ratio => M / best_time(Results, S, Order)}
                      || #{size_bytes := S, median_us := M} <- Auto]};
            {error, _} = Error ->
                Error
        end
    after
        file:delete(File)
    end.

best_time(Results, Size, Order) ->
    lists:min([M || #{algorithm := A, size_bytes := S, rank_order := O, median_us := M} <- Results,
                    S =:= Size, A =/= auto, O =:= Order orelse A =:= hierarchical]).

%%--------------------------------------------------------------------
%% Internal: helpers

level_cost(Options, Bytes) ->
    maps:get(latency, Options, 0) + case maps:find(bandwidth, Options) of
                                        {ok, B} -> Bytes * 1000000 / B;
                                        error -> 0
                                    end.

round_robin(PerNode, Acc) ->
    case [L || L <- PerNode, L =/= []] of
        [] -> lists:reverse(Acc);
        Lists -> round_robin([tl(L) || L <- Lists], lists:reverse([hd(L) || L <- Lists], Acc))
    end.

transpose([[] | _]) -> [];
transpose(Lists) -> [[hd(L) || L <- Lists] | transpose([tl(L) || L <- Lists])].

median(List) -> percentile(List, 0.5).

percentile(List, P) ->
    Sorted = lists:sort(List),
    N = length(Sorted),
    Pos = P * (N - 1),
    Lo = floor(Pos),
    Hi = min(N - 1, Lo + 1),
    A = lists:nth(Lo + 1, Sorted),
    B = lists:nth(Hi + 1, Sorted),
    A + (B - A) * (Pos - Lo).

spec_name(#{file := File}) when File =/= undefined -> list_to_binary(File);
spec_name(#{name := Name}) -> atom_to_binary(Name).
