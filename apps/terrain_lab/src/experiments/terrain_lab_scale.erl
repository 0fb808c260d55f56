%% @private
%% @doc The scaling experiment (`terrain experiment scale'): the lab's operations at
%% 16, 32, 64, 128 and 256 VMs (up to `max_nodes'), each timed as a user runs it,
%% and each operation's growth exponent fitted.
%%
%% For every size n: a spec of n one-scheduler nodes in sites × 4 racks (`spec_terms/2':
%% no emulated links unless `latency' says so; connections on demand) is written into
%% `Dir/specs/', started with the detached launcher (`terrain
%% up', state in `Dir/state'), then, from this VM joined as a hidden node as the CLI
%% joins: `attrs' (one attribute of every node, all must answer), `choose' (a
%% predicate every node satisfies), `probe' and `down'. `MemAvailable' is read before
%% `up' and after it. `scale.json' is rewritten after every size (`partial' until the
%% last). A warm-up round at the smallest size comes first and is not recorded.
%%
%% The probe (`probe_strategy'):
%% <ul>
%% <li>`tree' (the default): `terrain probe --strategy tree' (terrain_lab_tree_probe:
%%     waves of 4 nodes, each inserted into the tree so far against a few
%%     representatives, one batch of 10 round trips per pair), under the budget: nodes
%%     not placed when it ends are recorded (`unplaced'), never guessed. The row
%%     records the ordered pairs measured against the n(n−1) in all.</li>
%% <li>`concurrent': all ordered pairs at once, one batch of 10 round trips each. A
%%     probe of n(n−1) pairs costs about its pairs, so when the last size's probe time
%%     scaled by the pairs exceeds the budget the probe is not run and that prediction
%%     is recorded instead (`predicted', left out of the fit).</li>
%% </ul>
%% Without emulated links every pair is a loopback round trip: the spec's sites and
%% racks are not visible to a measurement, and the tree the probe finds is made of
%% noise (docs/BENCHMARKS.md, "Scaling").
%%
%% The growth exponent b of an operation is the slope of log(time) against log(n) by
%% least squares (time ∝ n^b): 1 is linear, 2 quadratic.
%%
%% Writes `scale.json' (`terrain.scale/1') and `manifest.json' (kind `scale'); the
%% plot is drawn by `terrain-analysis scale'.
-module(terrain_lab_scale).

%% API
-export([run/3,
         sizes/1,
         spec_terms/2,
         growth_exponent/1,
         format_error/1]).

%% exports_not_used: sizes/1, spec_terms/2 and growth_exponent/1 are the experiment's pure parts,
%% checked by terrain_lab_scale_tests.
-ignore_xref([{sizes, 1}, {spec_terms, 2}, {growth_exponent, 1}]).

-export_type([options/0, latency/0]).

%% One-way µs between sites, between the racks of a site, between the nodes of a rack.
-type latency() :: {Site :: pos_integer(), Rack :: pos_integer(), Node :: pos_integer()}.

-type options() :: #{max_nodes := pos_integer(),          % the largest size (at least 16)
                     probe_budget_s := pos_integer(),     % seconds the probe may take at one size
                     probe_strategy := tree | concurrent, % tree-guided, or all pairs at once
                     latency := none | latency(),         % emulated links (netem), none by default
                     prefix := string(),                  % node names' prefix
                     io := terrain_lab_io:io()}.

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(SIZES, [16, 32, 64, 128, 256]).
-define(QUERY_TIMEOUT, 30000).
-define(STOP_TIMEOUT, 10000).
-define(SETTLE_MS, 1000).         % SIGTERM: for a VM being started to show (its pid file, its command line)

%%--------------------------------------------------------------------
%% API

%% @doc The sizes measured up to `MaxNodes'.
-spec sizes(pos_integer()) -> [pos_integer()].
sizes(MaxNodes) ->
    [N || N <- ?SIZES, N =< MaxNodes].

%% @doc The spec of `N' one-scheduler nodes: 4 sites (2 below 64 nodes) of 4 racks,
%% `connect_all => false' (the probe's connections are its own, not `global''s full
%% mesh), and with `{Site, Rack, Node}' one-way latencies the links of the three
%% levels (emulated by netem).
-spec spec_terms(pos_integer(), none | latency()) -> [tuple()].
spec_terms(N, Latency) ->
    Sites = case N >= 64 of true -> 4; false -> 2 end,
    PerRack = N div (Sites * 4),
    Name = fun(Format, Args) -> list_to_atom(lists:flatten(io_lib:format(Format, Args))) end,
    Link = fun(_Level) when Latency =:= none -> #{};
              (Level) -> #{latency => element(Level, Latency)}
           end,
    [{cluster, Name("scale~b", [N]), (Link(1))#{connect_all => false}}
     | [{group, Name("s~b", [S]), Link(2),
         [{group, Name("s~br~b", [S, R]), Link(3),
           [{node, Name("s~br~bn~b", [S, R, K]), #{schedulers => 1}} || K <- lists:seq(1, PerRack)]}
          || R <- lists:seq(1, 4)]}
        || S <- lists:seq(1, Sites)]].

%% @doc The least-squares slope of log(Seconds) against log(Nodes).
-spec growth_exponent([{pos_integer(), float()}]) -> float() | null.
growth_exponent(Points) ->
    Logs = [{math:log(N), math:log(max(T, 1.0e-6))} || {N, T} <- Points],
    case length(Logs) of
        K when K < 2 -> null;
        K ->
            MeanX = lists:sum([X || {X, _} <- Logs]) / K,
            MeanY = lists:sum([Y || {_, Y} <- Logs]) / K,
            Sxx = lists:sum([(X - MeanX) * (X - MeanX) || {X, _} <- Logs]),
            Sxy = lists:sum([(X - MeanX) * (Y - MeanY) || {X, Y} <- Logs]),
            Sxy / Sxx
    end.

%% @doc Runs the experiment into `Dir' (which exists and is empty) and returns the
%% summary written to `scale.json'.
-spec run(file:filename(), options(), fun((iodata()) -> ok)) -> {ok, map()} | {error, term()}.
run(Dir, #{max_nodes := Max} = Options, Progress) when Max >= 16 ->
    Started = terrain_lab_run:timestamp(),
    Machine = terrain_lab_experiment:machine(),
    Summarise = fun(Rows, Partial) ->
                        Sizes = lists:usort([N || #{nodes := N} <- Rows]),
                        #{format => ?TERRAIN_FORMAT_SCALE, sizes => Sizes, rows => Rows,
                          growth_exponents => exponents(Rows), partial => Partial,
                          probe_budget_s => maps:get(probe_budget_s, Options),
                          probe_strategy => maps:get(probe_strategy, Options),
                          latency_us => latency_json(maps:get(latency, Options)), started_at => Started,
                          finished_at => terrain_lab_run:timestamp(), machine_at_start => Machine}
                end,
    Checkpoint = fun(Rows) -> terrain_lab_files:write_json(filename:join(Dir, "scale.json"), Summarise(Rows, true)) end,
    Progress(io_lib:format("the clusters are recorded in ~ts; SIGTERM stops them, and so do Ctrl-C and SIGKILL "
                           "(then 'terrain down --state-dir ~ts' removes what is left)~n",
                           [state_dir(Dir), state_dir(Dir)])),
    %% A warm-up at the smallest size, not recorded: the first start copies terrain's code
    %% to the nodes' cache and the first queries load modules into this VM (in a first run
    %% they made 16 VMs slower than 32).
    WarmUp = io_lib:format("warm-up at ~b nodes (not recorded)~n", [hd(?SIZES)]),
    case terrain_lab_steps:run([fun(_) -> Checkpoint([]) end,
                                fun(_) -> write_manifest(Dir, Options, []) end,
                                fun(_) -> Progress(WarmUp), ok end,
                                fun(_) -> measure(hd(?SIZES), Dir, Options#{previous => []}, Progress) end], none) of
        {ok, _} ->
            case measure_sizes(sizes(Max), Dir, Options#{checkpoint => Checkpoint}, Progress, []) of
                {ok, Rows} -> write(Dir, Summarise(Rows, false), Options);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end;
run(_Dir, #{max_nodes := Max}, _Progress) ->
    {error, {scale, {too_small, Max}}}.

%% @doc A sentence for an error of the experiment.
-spec format_error({scale, term()}) -> iolist().
format_error({scale, {too_small, Max}}) ->
    io_lib:format("--max-nodes must be at least 16 (the smallest size measured), got ~b", [Max]);
format_error({scale, {failed, N, up, Why}}) ->
    io_lib:format("at ~b nodes, up failed: ~ts", [N, terrain_lab:format_error(Why)]);
format_error({scale, {failed, N, measure, {not_every_node, #{answered := Answered, chosen := Chosen}}}}) ->
    io_lib:format("at ~b nodes, ~b answered attrs and ~b were chosen: every node must", [N, Answered, Chosen]);
format_error({scale, {failed, N, Operation, Why}}) ->
    io_lib:format("at ~b nodes, ~s failed: ~0tp", [N, Operation, Why]).

%%--------------------------------------------------------------------
%% Internal functions

%% Each operation's growth exponent over the measured (not predicted) sizes.
exponents(Rows) ->
    maps:from_list([{Op, growth_exponent([{N, S} || #{nodes := N, operation := O, seconds := S} = R <- Rows,
                                                     O =:= Op, not maps:get(predicted, R, false)])}
                    || Op <- [up, attrs, choose, probe, down]]).

measure_sizes([], _Dir, _Options, _Progress, Acc) ->
    {ok, lists:append(lists:reverse(Acc))};
measure_sizes([N | Rest], Dir, #{checkpoint := Checkpoint} = Options, Progress, Acc) ->
    Progress(io_lib:format("~b nodes~n", [N])),
    case measure(N, Dir, Options#{previous => lists:append(Acc)}, Progress) of
        {ok, Rows} ->
            _ = Checkpoint(lists:append(lists:reverse([Rows | Acc]))),
            measure_sizes(Rest, Dir, Options, Progress, [Rows | Acc]);
        {error, _} = Error ->
            Error
    end.

%% The probe's time at `N' nodes predicted from the largest measured size: it grows
%% with the pairs.
predicted_probe_s(N, Previous) ->
    case lists:reverse(lists:sort([{M, S} || #{nodes := M, operation := probe, seconds := S} = R <- Previous,
                                             not maps:get(predicted, R, false)])) of
        [{M, S} | _] -> {M, S * (N * (N - 1)) / (M * (M - 1))};
        [] -> none
    end.

%% The state directory of the experiment's clusters.
state_dir(Dir) ->
    filename:join(Dir, "state").

%% Measures one size. Its cluster is stopped whatever happens: also on SIGTERM (the
%% one exit path's cleanups: terrain_lab_cleanup), which says what was stopped, and
%% when this VM dies by SIGINT or SIGKILL (a reaper, terrain_lab_os:reaper/1, stops
%% the VMs whose command line names the state's `nodes/' directory).
measure(N, Dir, #{io := Io} = Options, Progress) ->
    State = state_dir(Dir),
    Cleanup = {scale_cluster, State},
    Self = self(),
    Reaper = terrain_lab_os:reaper(filename:join(filename:absname(State), "nodes") ++ "/"),
    ok = terrain_lab_cleanup:add(Cleanup, fun() -> interrupted(Self, N, Dir, Io) end),
    try measure_size(N, Dir, Options, Progress)
    after
        terrain_lab_cleanup:remove(Cleanup),
        _ = [terrain_lab_os:reaper_done(Port) || {ok, Port} <- [Reaper]]
    end.

%% SIGTERM: the run stops starting VMs (its process is suspended), the VMs being started
%% get a moment to write their pid files, and the cluster of this size is stopped (by
%% its state: the nodes recorded, named by pid files, or started for it), and the user
%% told what is kept.
interrupted(Run, N, Dir, Io) ->
    _ = erlang:suspend_process(Run),
    timer:sleep(?SETTLE_MS),
    Stopped = terrain_lab_launch_stop:stop(state_dir(Dir), ?STOP_TIMEOUT, #{io => Io, force => false}),
    timer:sleep(?SETTLE_MS),
    Late = terrain_lab_launch_stop:stop_unrecorded(state_dir(Dir), Io),
    Left = case Stopped of
               {ok, Results} -> terrain_lab_launch_stop:still_running(Results ++ Late);
               {error, _} -> terrain_lab_launch_stop:still_running(Late)
           end,
    io:format(standard_error, "terrain experiment scale: interrupted at ~b nodes; ~ts; the sizes done are in ~ts "
              "(\"partial\": true), which 'terrain report ~ts' shows~n",
              [N, case Left of
                      [] -> "its cluster was stopped";
                      _ -> io_lib:format("could not stop ~ts: 'terrain down --state-dir ~ts' stops them",
                                         [lists:join(", ", Left), state_dir(Dir)])
                  end, filename:join(Dir, "scale.json"), Dir]).

measure_size(N, Dir, #{prefix := Prefix, io := Io} = Options, Progress) ->
    SpecFile = filename:join([Dir, "specs", "scale" ++ integer_to_list(N) ++ ".cluster"]),
    State = state_dir(Dir),
    Terms = spec_terms(N, maps:get(latency, Options)),
    SpecText = [io_lib:format("~tp.~n", [T]) || T <- Terms],
    case terrain_lab_steps:run([fun(_) -> terrain_lab_files:ensure_dir(SpecFile) end,
                                fun(_) -> terrain_lab_files:write(SpecFile, SpecText) end], none) of
        ok ->
            MemBefore = terrain_lab_guard:mem_available_mb(),
            {UpS, Up} = timed(fun() -> terrain_lab_launch:up(SpecFile, #{prefix => Prefix, timeout => undefined,
                                                                         netem => "auto"}, State, Io) end),
            case Up of
                {ok, Records} ->
                    MemAfter = terrain_lab_guard:mem_available_mb(),
                    Nodes = [maps:get(node, R) || R <- Records],
                    %% the nodes are stopped whatever happened while they ran
                    Result = try measure_running(N, Nodes, State, Options#{spec_terms => Terms}, Progress)
                             catch error:Crash:Stack -> {error, {crashed, Crash, Stack}}
                             end,
                    {DownS, _} = timed(fun() -> terrain_lab_launch_stop:stop(State, ?STOP_TIMEOUT,
                                                                        #{io => Io, force => false}) end),
                    Progress(io_lib:format("  up ~.1f s, down ~.1f s~n", [UpS, DownS])),
                    case Result of
                        {ok, Rows} ->
                            Memory = case {MemBefore, MemAfter} of
                                         {{ok, B}, {ok, A}} -> #{mem_available_drop_mb => B - A,
                                                                 mb_per_vm => (B - A) / N};
                                         _ -> #{}
                                     end,
                            {ok, [#{nodes => N, operation => up, seconds => UpS, detail => Memory},
                                  #{nodes => N, operation => down, seconds => DownS, detail => #{}} | Rows]};
                        {error, Why} ->
                            {error, {scale, {failed, N, measure, Why}}}
                    end;
                {error, Why} ->
                    {error, {scale, {failed, N, up, Why}}}
            end;
        {error, _} = WriteError ->
            WriteError
    end.

measure_running(N, Nodes, State, Options, Progress) ->
    ok = terrain_lab_cluster_state:connect_cli(State),
    {AttrsS, Answers} = timed(fun() -> terrain:attrs(Nodes, [vm_schedulers_online], #{timeout => ?QUERY_TIMEOUT}) end),
    Answered = case Answers of
                   #{} -> length([ok || {ok, _} <- maps:values(Answers)]);
                   _ -> 0
               end,
    {ChooseS, Chosen} = timed(fun() -> terrain:choose_nodes(Nodes, [{vm_schedulers_online, ge, 1}],
                                                            #{timeout => ?QUERY_TIMEOUT}) end),
    ChosenCount = case Chosen of L when is_list(L) -> length(L); _ -> 0 end,
    ProbeRow = probe(N, Nodes, Options, Progress),
    Progress(io_lib:format("  attrs ~.2f s (~b of ~b answered), choose ~.2f s (~b chosen)~n",
                           [AttrsS, Answered, N, ChooseS, ChosenCount])),
    case {Answered, ChosenCount} of
        {N, N} ->
            {ok, [#{nodes => N, operation => attrs, seconds => AttrsS, detail => #{answered => Answered}},
                  #{nodes => N, operation => choose, seconds => ChooseS, detail => #{chosen => ChosenCount}},
                  ProbeRow]};
        _ ->
            {error, {not_every_node, #{answered => Answered, chosen => ChosenCount, nodes => N}}}
    end.

%% The probe's row at `N' nodes, by the options' strategy.
probe(N, Nodes, #{probe_strategy := tree, probe_budget_s := Budget, spec_terms := Terms, prefix := Prefix},
      Progress) ->
    Pairs = N * (N - 1),
    {ProbeS, Probe} = timed(fun() -> terrain_lab_probe:probe(Nodes, #{strategy => tree, batches => 1, messages => 10,
                                                                      warmup => 2, budget_ms => Budget * 1000}) end),
    Detail = case Probe of
                 {ok, #{pairs := P, unplaced := Unplaced, ended_by := EndedBy, waves := Waves,
                        reinserted := Reinserted, topology := Tree}} ->
                     maps:merge(#{pairs_measured => length([ok || {ok, _} <- maps:values(P)]),
                                  unplaced => length(Unplaced), ended_by => EndedBy, waves => Waves,
                                  reinserted => Reinserted, networks => networks(Tree), depth => depth(Tree)},
                                compared(Tree, Unplaced, Terms, Prefix, hd(Nodes)));
                 {error, Why} ->
                     #{pairs_measured => 0, unplaced => N, ended_by => error,
                       error => iolist_to_binary(terrain_lab_probe:format_error(Why))}
             end,
    Progress(io_lib:format("  probe (tree) ~.1f s: ~b of ~b ordered pairs measured, ~b nodes not placed (~s)~n",
                           [ProbeS, maps:get(pairs_measured, Detail), Pairs, maps:get(unplaced, Detail),
                            maps:get(ended_by, Detail)])),
    #{nodes => N, operation => probe, seconds => ProbeS,
      detail => Detail#{pairs => Pairs, budget_s => Budget, strategy => tree}};
probe(N, Nodes, #{probe_strategy := concurrent, probe_budget_s := Budget} = Options, Progress) ->
    Pairs = N * (N - 1),
    case predicted_probe_s(N, maps:get(previous, Options, [])) of
        {From, Predicted} when Predicted > Budget ->
            Progress(io_lib:format("  probe not run: ~.1f s predicted from ~b nodes, over the budget "
                                   "of ~b s~n", [Predicted, From, Budget])),
            #{nodes => N, operation => probe, seconds => Predicted, predicted => true,
              detail => #{pairs => Pairs, predicted_from_nodes => From, budget_s => Budget,
                          strategy => concurrent}};
        _ ->
            {ProbeS, Probe} = timed(fun() -> terrain_lab_probe:probe(Nodes, #{strategy => concurrent,
                                                                              batches => 1, messages => 10,
                                                                              warmup => 2}) end),
            Measured = case Probe of
                           {ok, #{pairs := P}} -> length([ok || {ok, _} <- maps:values(P)]);
                           {error, _} -> 0
                       end,
            Progress(io_lib:format("  probe (concurrent) ~.1f s (~b of ~b pairs)~n", [ProbeS, Measured, Pairs])),
            #{nodes => N, operation => probe, seconds => ProbeS,
              detail => #{pairs => Pairs, pairs_measured => Measured, budget_s => Budget, strategy => concurrent}}
    end.

%% The tree the probe found against the spec's (clade recall and precision, as
%% `terrain topology compare'), when it placed every node.
compared(Tree, [], Terms, Prefix, AnyNode) ->
    [_, Host] = string:split(atom_to_list(AnyNode), "@"),
    {ok, Spec} = terrain_lab_spec:from_terms(Terms, undefined),
    Truth = terrain_lab_spec:topology(Spec, fun(Name) -> list_to_atom(Prefix ++ atom_to_list(Name) ++ "@" ++ Host) end,
                                      #{heights => false}),
    case terrain:compare_topologies(Tree, Truth) of
        {ok, #{clade_recall := Recall, clade_precision := Precision}} ->
            #{clade_recall => Recall, clade_precision => Precision};
        {error, _} ->
            #{}
    end;
compared(_Tree, _Unplaced, _Terms, _Prefix, _AnyNode) ->
    #{}.

latency_json(none) -> null;
latency_json({Site, Rack, Node}) -> #{site => Site, rack => Rack, node => Node}.

%% The networks of the tree the probe found, and its levels of networks.
networks({node, _}) -> 0;
networks({network, _, _, Children}) -> 1 + lists:sum([networks(C) || C <- Children]).

depth({node, _}) -> 0;
depth({network, _, _, Children}) -> 1 + lists:max([depth(C) || C <- Children]).

timed(Fun) ->
    T0 = erlang:monotonic_time(microsecond),
    Result = Fun(),
    {(erlang:monotonic_time(microsecond) - T0) / 1.0e6, Result}.

write(Dir, Summary, Options) ->
    File = filename:join(Dir, "scale.json"),
    case terrain_lab_files:write_json(File, Summary) of
        ok ->
            Plots = draw(Dir, File),
            case write_manifest(Dir, Options, Plots) of
                ok -> {ok, Summary#{plots => Plots}};
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% The run's manifest (kind scale), written at the start too: an interrupted run keeps
%% a partial scale.json that `terrain report' reads.
write_manifest(Dir, #{max_nodes := Max, probe_budget_s := Budget, probe_strategy := Strategy, latency := Latency},
               Plots) ->
    LatencyOption = case Latency of
                        none -> "";
                        {S, R, Nd} -> io_lib:format(" --latency ~b,~b,~b", [S, R, Nd])
                    end,
    Command = iolist_to_binary(io_lib:format("terrain experiment scale --max-nodes ~b --probe-strategy ~s "
                                             "--probe-budget ~b~s --out ~ts",
                                             [Max, Strategy, Budget, LatencyOption, Dir])),
    terrain_lab_run:write_manifest(Dir, scale, [#{kind => scale, file => <<"scale.json">>,
                                                  parameters => #{command => Command, plots => Plots}}]).

%% The plot, by `terrain-analysis scale'; none when the Python side is not installed.
draw(Dir, File) ->
    case terrain_lab_analysis:command() of
        false -> [];
        Command ->
            case terrain_lab_analysis:run(Command, 120000, ["scale", File, "--out", Dir]) of
                {0, Output} ->
                    Lines = [string:trim(L) || L <- string:lexemes(binary_to_list(Output), "\n")],
                    [list_to_binary(filename:basename(L)) || L <- Lines, lists:suffix(".png", L)];
                {_, _} -> []
            end
    end.
