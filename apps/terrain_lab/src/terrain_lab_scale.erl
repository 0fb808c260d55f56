%% @private
%% @doc The scaling experiment (`terrain experiment scale'): the lab's operations at
%% 16, 32, 64, 128 and 256 VMs (up to `max_nodes'), each timed as a user runs it,
%% and each operation's growth exponent fitted.
%%
%% For every size n: a spec of n one-scheduler nodes in sites × 4 racks (no emulated
%% links) is written into `Dir/specs/', started with the detached launcher (`terrain
%% up', state in `Dir/state'), then, from this VM joined as a hidden node as the CLI
%% joins: `attrs' (one attribute of every node, all must answer), `choose' (a
%% predicate every node satisfies), `probe' (all ordered pairs, concurrently, one
%% batch of 10 round trips each) and `down'. The probe has a budget: a probe of
%% n(n−1) pairs costs about its pairs, so when the last size's probe time scaled by
%% the pairs exceeds the budget the probe is not run and that prediction is recorded
%% instead (`predicted', left out of the fit). `MemAvailable' is read before `up' and
%% after it. `scale.json' is rewritten after every size (`partial' until the last).
%% A warm-up round at the smallest size comes first and is not recorded. The growth exponent b of an operation is the slope of log(time) against
%% log(n) by least squares (time ∝ n^b): 1 is linear, 2 quadratic.
%%
%% Writes `scale.json' (`terrain.scale/1') and `manifest.json' (kind `scale'); the
%% plot is drawn by `terrain-analysis scale'.
-module(terrain_lab_scale).

%% API
-export([run/3,
         sizes/1,
         spec_terms/1,
         growth_exponent/1,
         format_error/1]).

%% exports_not_used: sizes/1, spec_terms/1 and growth_exponent/1 are the experiment's pure parts,
%% checked by terrain_lab_scale_tests.
-ignore_xref([{sizes, 1}, {spec_terms, 1}, {growth_exponent, 1}]).

-export_type([options/0]).

-type options() :: #{max_nodes := pos_integer(),          % the largest size (at least 16)
                     probe_budget_s := pos_integer(),     % seconds the probe may take at one size
                     prefix := string(),                  % node names' prefix
                     io := terrain_lab_io:io()}.

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(SIZES, [16, 32, 64, 128, 256]).
-define(QUERY_TIMEOUT, 30000).
-define(STOP_TIMEOUT, 10000).

%%--------------------------------------------------------------------
%% API

%% @doc The sizes measured up to `MaxNodes'.
-spec sizes(pos_integer()) -> [pos_integer()].
sizes(MaxNodes) ->
    [N || N <- ?SIZES, N =< MaxNodes].

%% @doc The spec of `N' one-scheduler nodes: 4 sites (2 below 64 nodes) of 4 racks.
-spec spec_terms(pos_integer()) -> [tuple()].
spec_terms(N) ->
    Sites = case N >= 64 of true -> 4; false -> 2 end,
    PerRack = N div (Sites * 4),
    Name = fun(Format, Args) -> list_to_atom(lists:flatten(io_lib:format(Format, Args))) end,
    [{cluster, Name("scale~b", [N]), #{}}
     | [{group, Name("s~b", [S]), #{},
         [{group, Name("s~br~b", [S, R]), #{},
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
                        #{format => ?TERRAIN_FORMAT_SCALE, sizes => lists:usort([N || #{nodes := N} <- Rows]), rows => Rows,
                          growth_exponents => exponents(Rows), partial => Partial,
                          probe_budget_s => maps:get(probe_budget_s, Options), started_at => Started,
                          finished_at => terrain_lab_run:timestamp(), machine_at_start => Machine}
                end,
    Checkpoint = fun(Rows) -> terrain_json:write_file(filename:join(Dir, "scale.json"), Summarise(Rows, true)) end,
    %% A warm-up at the smallest size, not recorded: the first start copies terrain's code
    %% to the nodes' cache and the first queries load modules into this VM (in a first run
    %% they made 16 VMs slower than 32).
    Progress("warm-up (not recorded): "),
    case measure(hd(?SIZES), Dir, Options#{previous => []}, Progress) of
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
format_error({scale, {failed, N, Operation, Why}}) ->
    io_lib:format("at ~b nodes, ~s failed: ~0tp", [N, Operation, Why]);
format_error({scale, {write, File, Why}}) ->
    io_lib:format("cannot write ~ts: ~ts", [File, file:format_error(Why)]).

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

measure(N, Dir, #{prefix := Prefix, io := Io} = Options, Progress) ->
    SpecFile = filename:join([Dir, "specs", "scale" ++ integer_to_list(N) ++ ".cluster"]),
    State = filename:join(Dir, "state"),
    ok = filelib:ensure_dir(SpecFile),
    case file:write_file(SpecFile, [io_lib:format("~tp.~n", [T]) || T <- spec_terms(N)]) of
        ok ->
            MemBefore = terrain_lab_guard:mem_available_mb(),
            {UpS, Up} = timed(fun() -> terrain_lab_launch:up(SpecFile, #{prefix => Prefix, timeout => undefined,
                                                                         netem => "off"}, State, Io) end),
            case Up of
                {ok, Records} ->
                    MemAfter = terrain_lab_guard:mem_available_mb(),
                    Nodes = [maps:get(node, R) || R <- Records],
                    %% the nodes are stopped whatever happened while they ran
                    Result = try measure_running(N, Nodes, State, Options, Progress)
                             catch error:Crash:Stack -> {error, {crashed, Crash, Stack}}
                             end,
                    {DownS, _} = timed(fun() -> terrain_lab_launch:stop(State, ?STOP_TIMEOUT,
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
        {error, Why} ->
            {error, {scale, {write, SpecFile, Why}}}
    end.

measure_running(N, Nodes, State, #{probe_budget_s := Budget} = Options, Progress) ->
    ok = terrain_lab_cluster_state:connect_cli(State),
    {AttrsS, Answers} = timed(fun() -> terrain:attrs(Nodes, [vm_schedulers_online], #{timeout => ?QUERY_TIMEOUT}) end),
    Answered = case Answers of
                   #{} -> length([ok || {ok, _} <- maps:values(Answers)]);
                   _ -> 0
               end,
    {ChooseS, Chosen} = timed(fun() -> terrain:choose_nodes(Nodes, [{vm_schedulers_online, ge, 1}],
                                                            #{timeout => ?QUERY_TIMEOUT}) end),
    ChosenCount = case Chosen of L when is_list(L) -> length(L); _ -> 0 end,
    Pairs = N * (N - 1),
    ProbeRow = case predicted_probe_s(N, maps:get(previous, Options, [])) of
                   {From, Predicted} when Predicted > Budget ->
                       Progress(io_lib:format("  probe not run: ~.1f s predicted from ~b nodes, over the budget "
                                              "of ~b s~n", [Predicted, From, Budget])),
                       #{nodes => N, operation => probe, seconds => Predicted, predicted => true,
                         detail => #{pairs => Pairs, predicted_from_nodes => From, budget_s => Budget}};
                   _ ->
                       {ProbeS, Probe} = timed(fun() -> terrain_lab_probe:probe(Nodes, #{strategy => concurrent,
                                                                                         batches => 1, messages => 10,
                                                                                         warmup => 2}) end),
                       Measured = case Probe of
                                      {ok, #{pairs := P}} -> length([ok || {ok, _} <- maps:values(P)]);
                                      {error, _} -> 0
                                  end,
                       Progress(io_lib:format("  probe ~.1f s (~b of ~b pairs)~n", [ProbeS, Measured, Pairs])),
                       #{nodes => N, operation => probe, seconds => ProbeS,
                         detail => #{pairs => Pairs, pairs_measured => Measured, budget_s => Budget,
                                     strategy => concurrent}}
               end,
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

timed(Fun) ->
    T0 = erlang:monotonic_time(microsecond),
    Result = Fun(),
    {(erlang:monotonic_time(microsecond) - T0) / 1.0e6, Result}.

write(Dir, Summary, #{max_nodes := Max, probe_budget_s := Budget}) ->
    File = filename:join(Dir, "scale.json"),
    case terrain_json:write_file(File, Summary) of
        ok ->
            Command = iolist_to_binary(io_lib:format("terrain experiment scale --max-nodes ~b --probe-budget ~b --out ~ts",
                                                     [Max, Budget, Dir])),
            Plots = draw(Dir, File),
            case terrain_lab_run:write_manifest(Dir, scale, [#{kind => scale, file => <<"scale.json">>,
                                                               parameters => #{command => Command,
                                                                               plots => Plots}}]) of
                ok -> {ok, Summary#{plots => Plots}};
                {error, _} = Error -> Error
            end;
        {error, Why} ->
            {error, {scale, {write, File, Why}}}
    end.

%% The plot, by `terrain-analysis scale'; none when the Python side is not installed.
draw(Dir, File) ->
    case terrain_lab_analysis:command() of
        false -> [];
        Command ->
            case terrain_lab_analysis:run(Command, 120000, ["scale", File, "--out", Dir]) of
                {0, Output} ->
                    [list_to_binary(filename:basename(string:trim(L))) || L <- string:lexemes(binary_to_list(Output), "\n"),
                                                                          lists:suffix(".png", string:trim(L))];
                {_, _} -> []
            end
    end.
