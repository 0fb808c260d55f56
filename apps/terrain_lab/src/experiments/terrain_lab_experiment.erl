%% @private
%% @doc The placement experiments of RELEASE D3.5 on one machine, with ML-ACO as the
%% workload (terrain_workloads):
%% <ul>
%% <li>{@link attributes/3} — §3.4, Figures 2–3: an emulated heterogeneous cluster whose
%%     VMs differ in their number of emulated cores (scheduler threads capped at one
%%     core's speed, terrain_lab_cgroup); ML-ACO with the
%%     `attributes' placement (colonies on the big VMs) against `random' (the VMs in a
%%     shuffled order), for growing numbers of ants.</li>
%% <li>{@link distances/3} — §4.6, Figures 27–28: an emulated 3-level network (netem);
%%     ML-ACO with the `distance' placement against `random', once with the spec's
%%     topology and once with the topology discovered from measured round trips.</li>
%% </ul>
%% Both write their files into a run directory with a `manifest.json' and a
%% `summary.json' (format `terrain.experiment/1'); progress goes to the callback.
-module(terrain_lab_experiment).

-export([attributes/3,
         distances/3,
         machine/0,
         format_error/1]).

-export_type([options/0]).

-type options() :: #{quick := boolean(),
                     instance => terrain_aco_instance:instance(),
                     seed => integer()}.

-type progress() :: fun((iodata()) -> ok).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_EXPERIMENT).
%% The attribute experiment's emulated cluster (see attributes_spec/1).
-define(CORE_SPEED, 0.05).      % cores: the CPU of one emulated core (cpu_per_scheduler)
-define(BIG_VMS, 4).            % one per colony
-define(BIG_SCHEDULERS, 8).     % emulated cores of a big VM
-define(SMALL_VMS, 3).          % the master and the 2 submasters
-define(DEGREE, 2).

%%--------------------------------------------------------------------
%% Experiment 1: attributes

%% @doc The emulated cluster of the attribute experiment: 4 big VMs of 8 schedulers
%% and 3 small VMs of 1, every scheduler thread capped at 0.05 cores
%% (`cpu_per_scheduler', terrain_lab_cgroup): a big VM is 8 emulated cores of speed
%% 0.05 (0.4 cores in all), a small one 1 core of the same speed. One ant runs at the
%% same speed on either; only several ants at once use a big VM's cores, so the ratio
%% of the placements grows with the ants towards 8, as in RELEASE D3.5 Fig. 3 (24-core
%% VMs there). The quotas add up to 1.75 cores, within the machine's 2; a colony has
%% a big VM to itself, as in the seed's runs (the tree of degree 2 on 7 VMs has 4
%% colonies).
-spec attributes_spec(atom()) -> terrain_lab_spec:spec().
attributes_spec(Name) ->
    Big = [{node, list_to_atom("big" ++ integer_to_list(I)),
            #{schedulers => ?BIG_SCHEDULERS, cpu_per_scheduler => ?CORE_SPEED}} || I <- lists:seq(1, ?BIG_VMS)],
    Small = [{node, list_to_atom("small" ++ integer_to_list(I)), #{schedulers => 1, cpu_per_scheduler => ?CORE_SPEED}}
             || I <- lists:seq(1, ?SMALL_VMS)],
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, Name, #{}} | Big ++ Small], undefined),
    Spec.

%% @doc Runs experiment 1 into `Dir' and returns the summary. The workload is a
%% generated 100-job instance unless `instance' is given. Quick: ants 1, 4, 16, 64,
%% 3 runs each, 3 global × 3 local iterations; full: ants 1 to 64 (doubling), 5 runs
%% each, 4 × 3 iterations. The tree has degree 2: 4 colonies (and 2 submasters) on 7 VMs.
-spec attributes(file:filename(), options(), progress()) -> {ok, map()} | {error, term()}.
attributes(Dir, Options, Progress) ->
    Quick = maps:get(quick, Options),
    {AntCounts, Runs, Global, Local} = case Quick of
                                           true -> {[1, 4, 16, 64], 3, 3, 3};
                                           false -> {[1, 2, 4, 8, 16, 32, 64], 5, 4, 3}
                                       end,
    %% 100 jobs: an ant's work (O(n^2)) dominates the messages, as in the seed's runs.
    Instance = maps:get(instance, Options, terrain_workloads:aco_generate_instance(100, 1)),
    Spec = attributes_spec(exp_attributes),
    Progress(io_lib:format("starting ~b VMs: ~b big (~b schedulers) and ~b small (1 scheduler), "
                           "each scheduler capped at ~.2f cores~n",
                           [?BIG_VMS + ?SMALL_VMS, ?BIG_VMS, ?BIG_SCHEDULERS, ?SMALL_VMS, ?CORE_SPEED])),
    terrain_lab:with_cluster(Spec, #{prefix => "xa" ++ os:getpid() ++ "_", boot_timeout => 180000}, fun(Infos) ->
        Nodes = [N || #{node := N} <- Infos],
        Tree = terrain_workloads:aco_tree(length(Nodes), ?DEGREE),
        Parameters = #{quick => Quick, runs => Runs, ants => AntCounts, global => Global,
                       local => Local, degree => ?DEGREE,
                       cpu_per_scheduler => ?CORE_SPEED,
                       big_vms => ?BIG_VMS, big_schedulers => ?BIG_SCHEDULERS,
                       big_cores => ?BIG_SCHEDULERS * ?CORE_SPEED,
                       small_vms => ?SMALL_VMS, small_schedulers => 1,
                       small_cores => ?CORE_SPEED,
                       nodes => length(Nodes), colonies => colonies(Tree)},
        %% one run after another; a run that fails (a node killed) or a SIGTERM
        %% (the caller turned it into a message) stops the experiment, and the
        %% runs finished before are written, marked partial. After every run the
        %% files are written too (marked partial): a SIGINT or SIGKILL, which the
        %% CLI cannot catch, loses at most the run under way.
        Checkpoint = fun(Done) -> _ = write_attributes(Dir, Done, Parameters, true), ok end,
        Runs1 = [{Ants, Run, Placement} || Ants <- AntCounts, Run <- lists:seq(1, Runs),
                                          Placement <- [attributes, random]],
        {Rows, Stopped} = attribute_runs(Runs1, Nodes, Tree, Instance, {Global, Local}, {Progress, Checkpoint}, []),
        case {write_attributes(Dir, Rows, Parameters, Stopped =/= none), Stopped} of
            {{ok, _} = Done, none} -> Done;
            {{ok, _}, Why} -> {error, {experiment, {partial, length(Rows), length(Runs1), Why}}};
            {{error, _} = WriteError, _} -> WriteError
        end
    end).

mean_or_null([]) -> null;
mean_or_null(Values) -> mean(Values).

attribute_runs([], _Nodes, _Tree, _Instance, _Iterations, _Progress, Rows) ->
    {lists:reverse(Rows), none};
attribute_runs([{Ants, Run, Placement} | Rest], Nodes, Tree, Instance, {Global, Local} = Iterations,
               {Progress, Checkpoint} = Reporters, Rows) ->
    receive
        {?MODULE, interrupt} -> {lists:reverse(Rows), interrupted}
    after 0 ->
            {Shuffled, _} = shuffle(Nodes, rand:seed_s(exsss, {Run, Ants, 16#0dd})),
            Result = terrain_lab_steps:run(
                       [fun(_) -> terrain_lab_aco:place(Placement, Tree, Shuffled, Run) end,
                        fun(Assignment) ->
                                terrain_lab_aco:run(Instance, Tree, Assignment,
                                                    #{ants => Ants, global => Global, local => Local, seed => Run},
                                                    600000)
                        end], none),
            case Result of
                {ok, #{main_s := S}} ->
                    Progress(io_lib:format("ants ~3b run ~b ~-10s ~8.3f s~n", [Ants, Run, Placement, S])),
                    Rows1 = [{Ants, Run, Placement, S} | Rows],
                    ok = Checkpoint(lists:reverse(Rows1)),
                    attribute_runs(Rest, Nodes, Tree, Instance, Iterations, Reporters, Rows1);
                {error, Why} ->
                    {lists:reverse(Rows), {run_failed, Ants, Run, Placement, Why}}
            end
    end.

write_attributes(Dir, Rows, Parameters, Partial) ->
    Csv = filename:join(Dir, "attributes.csv"),
    Ratios = [begin
                  %% a partial run may have one placement of an ant count and not the other
                  With = mean_or_null([S || {A, _, attributes, S} <- Rows, A =:= Ants]),
                  Without = mean_or_null([S || {A, _, random, S} <- Rows, A =:= Ants]),
                  #{ants => Ants, with_s => With, without_s => Without,
                    ratio => case is_number(With) andalso is_number(Without) andalso With > 0 of
                                 true -> Without / With;
                                 false -> null
                             end}
              end || Ants <- lists:usort([A || {A, _, _, _} <- Rows])],
    Summary = #{format => ?FORMAT, experiment => attributes, parameters => Parameters, ratios => Ratios,
                partial => Partial, machine => machine()},
    Steps = [fun(_) -> terrain_lab_files:write(Csv, ["ants,run,placement,seconds\n",
                                                     [io_lib:format("~b,~b,~s,~.6f~n", [A, R, P, S])
                                                      || {A, R, P, S} <- Rows]])
             end,
             fun(_) -> terrain_lab_files:write(filename:join(Dir, "summary.json"),
                                                [terrain_json:encode(Summary, #{pretty => true}), $\n])
             end,
             fun(_) -> terrain_lab_run:write_manifest(Dir, experiment_attributes,
                                                      [#{kind => attributes_times, file => <<"attributes.csv">>,
                                                         parameters => Parameters},
                                                       #{kind => summary, file => <<"summary.json">>}])
             end],
    case terrain_lab_steps:run(Steps, none) of
        ok -> {ok, Summary};
        {error, _} = Error -> Error
    end.

%%--------------------------------------------------------------------
%% Experiment 2: distances

%% @doc The emulated network of the distance experiment: 2 sites × 2 racks × 3 nodes
%% (1 scheduler each); one way 10 ms between the sites, 1 ms between the racks of a
%% site, nothing inside a rack. Three levels whose round trips (20 ms, 2 ms, ~0) differ
%% by an order of magnitude each, like the seed's Figure 26.
-spec distances_spec(atom()) -> terrain_lab_spec:spec().
distances_spec(Name) ->
    Rack = fun(S, R) ->
                   G = list_to_atom(lists:flatten(io_lib:format("s~br~b", [S, R]))),
                   {group, G, #{latency => 0},
                    [{node, list_to_atom(lists:flatten(io_lib:format("s~br~bn~b", [S, R, N]))), #{schedulers => 1}}
                     || N <- [1, 2, 3]]}
           end,
    Sites = [{group, list_to_atom("s" ++ integer_to_list(S)), #{latency => 1000}, [Rack(S, 1), Rack(S, 2)]}
             || S <- [1, 2]],
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, Name, #{latency => 10000}} | Sites], undefined),
    Spec.

%% @doc Runs experiment 2 into `Dir' and returns the summary: ML-ACO where communication
%% matters (9 colonies of 2 ants, 1 local generation per global iteration, a 40-job
%% instance) with `distance' and `random' placement, first with the spec's topology
%% (loaded on every node at start), then with the one discovered from measured round
%% trips (`terrain probe' → `terrain topology', loaded on every node). Quick: 20
%% global iterations, 3 runs per case; full: 50 and 5.
-spec distances(file:filename(), options(), progress()) -> {ok, map()} | {error, term()}.
distances(Dir, Options, Progress) ->
    Quick = maps:get(quick, Options),
    {Global, Runs, Batches} = case Quick of
                                  true -> {20, 3, 5};
                                  false -> {50, 5, 20}
                              end,
    Instance = maps:get(instance, Options, terrain_workloads:aco_generate_instance(40, 1)),
    Spec = distances_spec(exp_distances),
    Progress("starting 12 nodes: 2 sites x 2 racks x 3, links 10 ms / 1 ms / 0 one way\n"),
    terrain_lab:with_cluster(Spec, #{prefix => "xd" ++ os:getpid() ++ "_", boot_timeout => 180000}, fun(Infos) ->
        try
            Nodes = [N || #{node := N} <- Infos],
            SpecName = maps:from_list([{N, Name} || #{node := N, name := Name} <- Infos]),
            Tree = terrain_workloads:aco_tree(length(Nodes), 3),
            RunOptions = #{ants => 2, global => Global, local => 1, seed => 1},
            Case = fun(Topology, Placement) ->
                           Results = [begin
                                          A = must(terrain_lab_aco:place(Placement, Tree, Nodes, Run)),
                                          #{main_s := S} = must(terrain_lab_aco:run(Instance, Tree, A, RunOptions, 600000)),
                                          Progress(io_lib:format("~-10s ~-9s run ~b ~8.3f s~n", [Topology, Placement, Run, S])),
                                          {S, A}
                                      end || Run <- lists:seq(1, Runs)],
                           {_, FirstA} = hd(Results),
                           must(write_dot(Dir, Topology, Placement, Tree, FirstA, SpecName, Spec)),
                           #{topology => Topology, placement => Placement,
                             runs_s => [S || {S, _} <- Results], mean_s => mean([S || {S, _} <- Results]),
                             slow_links => [slow_links(Tree, A, SpecName, Spec) || {_, A} <- Results]}
                   end,
            %% the four cases and the discovery between them, one after another; a
            %% step that fails (a node killed) stops the experiment, and the cases
            %% finished before are written, marked partial
            Discover = fun(Done) ->
                               Progress("probing round trips (concurrent) and discovering the topology\n"),
                               Discovered = must(discover(Dir, Nodes, Batches)),
                               _ = [must(load_topology(N, Discovered)) || N <- Nodes],
                               Done
                       end,
            Steps = [fun(Done) -> [Case(spec, distance) | Done] end,
                     fun(Done) -> [Case(spec, random) | Done] end,
                     Discover,
                     fun(Done) -> [Case(discovered, distance) | Done] end,
                     fun(Done) -> [Case(discovered, random) | Done] end],
            Parameters = #{quick => Quick, runs => Runs, global => Global, local => 1, ants => 2,
                           colonies => colonies(Tree), nodes => length(Nodes), degree => 3,
                           latency_us => #{cluster => 10000, site => 1000, rack => 0}, probe_batches => Batches},
            %% after every case the files are written too (marked partial): a SIGINT
            %% or SIGKILL, which the CLI cannot catch, loses at most the case under way
            Checkpoint = fun(Done) -> _ = write_distances(Dir, Parameters, Done, true), ok end,
            {Results, Stopped} = distance_steps(Steps, [], Checkpoint),
            Summary = must(write_distances(Dir, Parameters, Results, Stopped =/= none)),
            case Stopped of
                none -> {ok, Summary};
                Failed -> {error, {experiment, {partial_cases, length(Results), 4, Failed}}}
            end
        catch
            throw:{?MODULE, Why} -> {error, Why}     % a step that failed (a node killed, a full disk)
        end
    end).

%% terrain probe → terrain topology: measured round trips into probe/, the tree found
%% into discovered.term.
discover(Dir, Nodes, Batches) ->
    ProbeDir = filename:join(Dir, "probe"),
    must(terrain_lab_files:make_dir(ProbeDir)),
    Result = must(terrain_lab_probe:probe(Nodes, #{batches => Batches, messages => 10, strategy => concurrent})),
    _ = must(terrain_lab_probe_files:write(Result, ProbeDir, #{})),
    Latency = must(terrain:read_latency(filename:join(ProbeDir, "latency.json"))),
    case terrain:discover(Latency, #{}) of
        {ok, #{topology := Tree}} ->
            must(terrain_lab_files:write(filename:join(Dir, "discovered.term"), io_lib:format("~tp.~n", [Tree]))),
            {ok, Tree};
        {error, _} = Error ->
            Error
    end.

load_topology(Node, Tree) ->
    try erpc:call(Node, terrain, load_topology, [Tree], 10000)
    catch error:{erpc, Why} -> {error, {experiment, {load_topology, Node, Why}}}
    end.

%% The steps of the distance experiment in order, each taking and returning the
%% cases finished so far; the first that fails stops them: {Cases, none | Why}.
distance_steps([], Done, _Checkpoint) ->
    {lists:reverse(Done), none};
distance_steps([Step | Rest], Done, Checkpoint) ->
    receive
        {?MODULE, interrupt} -> {lists:reverse(Done), interrupted}   % SIGTERM, turned into a message by the CLI
    after 0 ->
            try Step(Done) of
                Done1 ->
                    ok = Checkpoint(lists:reverse(Done1)),
                    distance_steps(Rest, Done1, Checkpoint)
            catch
                throw:{?MODULE, Why} -> {lists:reverse(Done), Why}
            end
    end.

%% summary.json and manifest.json of the distance experiment with the cases in
%% `Results' (and the probe's files and the placements drawn so far).
write_distances(Dir, Parameters, Results, Partial) ->
    Summary = #{format => ?FORMAT, experiment => distances, parameters => Parameters,
                ratio_spec => distance_ratio(spec, Results),
                ratio_discovered => distance_ratio(discovered, Results),
                results => Results, partial => Partial, machine => machine()},
    Dots = [#{kind => placement_dot, file => iolist_to_binary(dot_name(T, P))}
            || #{topology := T, placement := P} <- Results],
    Probed = [#{kind => latency, file => <<"probe/latency.json">>}
              || filelib:is_regular(filename:join([Dir, "probe", "latency.json"]))]
        ++ [#{kind => topology_term, file => <<"discovered.term">>}
            || filelib:is_regular(filename:join(Dir, "discovered.term"))],
    Steps = [fun(_) -> terrain_lab_files:write(filename:join(Dir, "summary.json"),
                                                [terrain_json:encode(Summary, #{pretty => true}), $\n])
             end,
             fun(_) -> terrain_lab_run:write_manifest(Dir, experiment_distances,
                                                      [#{kind => summary, file => <<"summary.json">>,
                                                         parameters => Parameters} | Probed ++ Dots])
             end],
    case terrain_lab_steps:run(Steps, none) of
        ok -> {ok, Summary};
        {error, _} = Error -> Error
    end.

%% Random over distance placement's mean time with one topology, or null when a
%% partial run lacks either case.
distance_ratio(Topology, Results) ->
    Mean = fun(Placement) -> [M || #{topology := T, placement := P, mean_s := M} <- Results,
                                   T =:= Topology, P =:= Placement] end,
    case {Mean(random), Mean(distance)} of
        {[R], [D]} when D > 0 -> R / D;
        _ -> null
    end.

%% A step of the distance experiment: its value, or the experiment stops with its
%% error (caught in distances/3, which stops the cluster and returns it).
must(ok) -> ok;
must({ok, Value}) -> Value;
must({error, Why}) -> throw({?MODULE, Why}).

%% Links on each root-to-leaf path of the placed tree that cross the slowest level
%% (the nodes share no group), as a list over the colonies.
slow_links(Tree, Assignment, SpecName, Spec) ->
    [length([x || {A, B} <- Edges, slow(A, B, SpecName, Spec)]) || Edges <- paths(Tree, Assignment, [])].

paths({colony, Name, []}, Assignment, Above) ->
    [edges(lists:reverse([Name | Above]), Assignment)];
paths({_, Name, Children}, Assignment, Above) ->
    lists:append([paths(C, Assignment, [Name | Above]) || C <- Children]).

edges(Names, Assignment) ->
    Nodes = [vertex_node(N, Assignment) || N <- Names],
    lists:zip(lists:droplast(Nodes), tl(Nodes)).

vertex_node(Name, Assignment) ->
    maps:get(Name, Assignment, node()).

slow(A, B, SpecName, Spec) ->
    case {maps:find(A, SpecName), maps:find(B, SpecName)} of
        {{ok, NA}, {ok, NB}} -> terrain_lab_spec:link(Spec, NA, NB) =:= maps:get(options, Spec) andalso NA =/= NB;
        _ -> false
    end.

dot_name(Topology, Placement) ->
    io_lib:format("placement_~s_~s.dot", [Placement, Topology]).

%% The placed tree as Graphviz dot (like the seed's Figures 27–28): one box per site
%% and rack, each vertex inside its node's rack; an edge that crosses sites in red.
write_dot(Dir, Topology, Placement, Tree, Assignment, SpecName, Spec) ->
    Vertices = flatten(Tree),
    Label = fun(Name) -> case Name of [] -> "master"; _ -> lists:join(".", [integer_to_list(I) || I <- Name]) end end,
    Id = fun(Name) -> ["v", [["_", integer_to_list(I)] || I <- Name]] end,
    ByGroup = lists:foldl(fun({Kind, Name, _}, Acc) ->
                                  Node = vertex_node(Name, Assignment),
                                  Path = case maps:find(Node, SpecName) of
                                             {ok, N} -> hd([P || #{name := NN, path := P} <- terrain_lab_spec:nodes(Spec), NN =:= N]);
                                             error -> [outside]
                                         end,
                                  maps:update_with(Path, fun(L) -> [{Kind, Name, Node} | L] end, [{Kind, Name, Node}], Acc)
                          end, #{}, Vertices),
    Sites = lists:usort([hd(P) || P <- maps:keys(ByGroup)]),
    Clusters = [["  subgraph cluster_", atom_to_list(S), " {\n    label=\"", atom_to_list(S), "\";\n",
                 [["    subgraph cluster_", atom_to_list(lists:last(P)), " {\n      label=\"", atom_to_list(lists:last(P)),
                   "\";\n",
                   [["      ", Id(Name), " [label=\"", Label(Name), "\\n", short(Node), "\" shape=",
                     shape(Kind), "];\n"] || {Kind, Name, Node} <- lists:reverse(maps:get(P, ByGroup))],
                   "    }\n"] || P <- lists:sort(maps:keys(ByGroup)), hd(P) =:= S],
                 "  }\n"] || S <- Sites],
    EdgeLines = [["  ", Id(Parent), " -> ", Id(Child),
                  case slow(vertex_node(Parent, Assignment), vertex_node(Child, Assignment), SpecName, Spec) of
                      true -> " [color=red penwidth=2]";
                      false -> ""
                  end, ";\n"]
                 || {_, Parent, Children} <- Vertices, {_, Child, _} <- Children],
    terrain_lab_files:write(filename:join(Dir, dot_name(Topology, Placement)),
                    ["digraph placement {\n  label=\"ML-ACO tree, ", atom_to_list(Placement), " placement, ",
                     atom_to_list(Topology), " topology (red: crosses sites)\";\n  compound=true;\n",
                     Clusters, EdgeLines, "}\n"]).

flatten({_, _, Children} = V) -> [V | lists:append([flatten(C) || C <- Children])].

shape(master) -> "doubleoctagon";
shape(submaster) -> "box";
shape(colony) -> "ellipse".

short(Node) ->
    hd(string:split(atom_to_list(Node), "@")).

%%--------------------------------------------------------------------
%% Errors

%% @doc A sentence for an error of this module.
-spec format_error({experiment, term()}) -> iolist().
format_error({experiment, {partial, Done, All, interrupted}}) ->
    io_lib:format("interrupted (SIGTERM); the ~b of ~b runs finished before are kept, marked partial", [Done, All]);
format_error({experiment, {partial, Done, All, {run_failed, Ants, Run, Placement, Why}}}) ->
    io_lib:format("run ~b with ~b ants (~ts placement) failed: ~ts; the ~b of ~b runs finished before are kept, "
                  "marked partial", [Run, Ants, Placement, terrain_lab:format_error(Why), Done, All]);
format_error({experiment, {partial_cases, Done, All, interrupted}}) ->
    io_lib:format("interrupted (SIGTERM); the ~b of ~b cases finished before are kept in summary.json, marked partial",
                  [Done, All]);
format_error({experiment, {partial_cases, Done, All, Why}}) ->
    io_lib:format("~ts; the ~b of ~b cases finished before are kept in summary.json, marked partial",
                  [terrain_lab:format_error(Why), Done, All]);
format_error({experiment, Why}) ->
    io_lib:format("the experiment failed: ~0tP", [Why, 12]).

%%--------------------------------------------------------------------
%% Internal functions

mean(Xs) -> lists:sum(Xs) / length(Xs).

colonies({colony, _, _}) -> 1;
colonies({_, _, Children}) -> lists:sum([colonies(C) || C <- Children]).

shuffle(List, Rand0) ->
    {Keyed, Rand} = lists:foldl(fun(X, {Acc, R0}) -> {U, R1} = rand:uniform_s(R0), {[{U, X} | Acc], R1} end,
                                {[], Rand0}, List),
    {[X || {_, X} <- lists:sort(Keyed)], Rand}.

%% The machine the run had: its cores and load when the experiment ended (other
%% users of the machine change the results).
%% @doc The machine a run measured on: its logical processors and the load average
%% of the last minute (`null' where /proc/loadavg cannot be read).
-spec machine() -> #{logical_processors := pos_integer(), loadavg1 := binary() | null}.
machine() ->
    Load = case file:read_file("/proc/loadavg") of
               {ok, Bin} -> hd(string:lexemes(Bin, " "));
               {error, _} -> null
           end,
    #{logical_processors => erlang:system_info(logical_processors_available), loadavg1 => Load}.

-ifdef(TEST).
-include_lib("eunit/include/eunit.hrl").

a_failed_step_keeps_the_cases_finished_before_test() ->
    Case = fun(T, P) -> fun(Done) -> [#{topology => T, placement => P, mean_s => 1.0} | Done] end end,
    Killed = fun(_Done) -> must({error, {aco_vertex_failed, noconnection}}) end,
    Nothing = fun(_) -> ok end,
    {Kept, Why} = distance_steps([Case(spec, distance), Case(spec, random), Killed, Case(discovered, distance)], [],
                                 Nothing),
    ?assertEqual([{spec, distance}, {spec, random}], [{T, P} || #{topology := T, placement := P} <- Kept]),
    ?assertEqual({aco_vertex_failed, noconnection}, Why),
    ?assertEqual({Kept, none}, distance_steps([Case(spec, distance), Case(spec, random)], [], Nothing)),
    %% SIGTERM (the CLI's message) stops them before the next step
    self() ! {?MODULE, interrupt},
    ?assertEqual({[], interrupted}, distance_steps([Case(spec, distance), Case(spec, random)], [], Nothing)).

every_finished_case_is_checkpointed_test() ->
    Case = fun(T, P) -> fun(Done) -> [#{topology => T, placement => P, mean_s => 1.0} | Done] end end,
    Self = self(),
    Checkpoint = fun(Done) -> Self ! {checkpoint, [{T, P} || #{topology := T, placement := P} <- Done]}, ok end,
    _ = distance_steps([Case(spec, distance), Case(spec, random)], [], Checkpoint),
    ?assertEqual([[{spec, distance}], [{spec, distance}, {spec, random}]],
                 [receive {checkpoint, C} -> C after 0 -> none end || _ <- [1, 2]]).

a_partial_run_has_a_ratio_only_with_both_placements_test() ->
    Spec = [#{topology => spec, placement => distance, mean_s => 1.0},
            #{topology => spec, placement => random, mean_s => 2.5},
            #{topology => discovered, placement => distance, mean_s => 1.0}],
    ?assertEqual(2.5, distance_ratio(spec, Spec)),
    ?assertEqual(null, distance_ratio(discovered, Spec)).

a_killed_node_is_a_sentence_naming_what_was_kept_test() ->
    Text = lists:flatten(format_error({experiment, {partial_cases, 2, 4, {aco_vertex_failed, noconnection}}})),
    ?assertEqual("a vertex of the ML-ACO tree failed: its node went down or was cut off (noconnection); "
                 "the 2 of 4 cases finished before are kept in summary.json, marked partial", Text).
-endif.
