%% @private
%% @doc `terrain probe': all-pairs round-trip times between the nodes of the running
%% cluster (or of `--nodes'), into a run directory.
%%
%% The measurement is `terrain_lab_probe:probe/2' (its method and statistics are
%% described there); this module turns the options into probe options, joins the
%% cluster, prints progress with an ETA on stderr, and writes `latency.json',
%% `latency.csv' and `manifest.json' into `RUNS_DIR/<UTC stamp>/'. A pair that failed
%% is `null' in the files and makes the command fail after writing them.
%%
%% Without `--batches' the probe is adaptive: batches of 10 exchanges per pair until
%% the median's 95% confidence interval is within ±5% (at most 100 batches), within a
%% `--budget' of 60 s for the whole probe; `--batches 100 --messages 100' is RELEASE D3.5's
%% fixed method. `--strategy tree' builds the topology while it measures
%% (terrain_lab_tree_probe) and also writes `topology.json'. A probe its budget ended
%% exits 0 (marked partial, said on stderr). The files are written after every round, marked `"partial": true'
%% until the probe has finished, so Ctrl-C (which OTP 25 lets no escript handle) leaves
%% the finished rounds on disk; SIGTERM stops the probe cleanly: every client reports
%% what it has measured, the files are written marked partial, and the command exits 1.
-module(terrain_lab_cmd_probe).

%% The tree strategy's pairs: a short warm-up and one batch (the minimum of 10
%% exchanges is what insertion uses) unless --batches, --messages, --warmup say otherwise.
-define(TREE_BATCHES, 1).
-define(TREE_WARMUP, 2).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "probe",
       summary => "Measure round trips between every pair of nodes into latency.json",
       usage => "",
       description => "For every ordered pair of nodes of the running cluster (or --nodes), a client on the "
                      "first exchanges messages with an echo process on the second: a warm-up, then batches "
                      "of MESSAGES timed exchanges. Without --batches, each pair stops when the 95% "
                      "confidence interval of its median is within +-5% (at most 100 batches), and the whole "
                      "probe within --budget; --batches 100 --messages 100 is RELEASE D3.5's fixed method. "
                      "--strategy sequential runs one source node at a time, concurrent all pairs at once, tree "
                      "places the nodes one by one into the tree built so far, measuring each against a "
                      "representative of every subtree level by level (far fewer pairs; also writes "
                      "topology.json). Every strategy ends within --budget; when the budget ends it, the files "
                      "are marked partial and the command exits 0. "
                      "Writes RUNS_DIR/<UTC stamp>/latency.json (min, median, mean, p95, stddev in us per "
                      "pair), latency.csv and manifest.json, after every round (marked partial until the "
                      "end); progress and an ETA go to stderr. SIGTERM stops it, keeping what was measured. "
                      "Feed latency.json to 'terrain topology'.",
       args => {0, 0},
       options => [#{name => batches, long => "batches", type => integer, range => {1, limit(batches)},
                     metavar => "N", help => "batches per pair (default: adaptive, at most 100)"},
                   #{name => messages, long => "messages", type => integer, range => {1, limit(messages)},
                     metavar => "N", help => "exchanges per batch (default 10 adaptive, 100 with --batches)"},
                   #{name => budget, long => "budget", type => integer, range => {1, limit(budget_ms) div 1000},
                     metavar => "SECONDS",
                     help => "time for the whole probe (default 60 adaptive, none with --batches)"},
                   #{name => payload, long => "payload", type => integer, default => 0, range => {0, limit(payload)},
                     metavar => "BYTES", help => "payload of each message"},
                   #{name => strategy, long => "strategy", type => string, default => "sequential",
                     choices => ["sequential", "concurrent", "tree"], metavar => "sequential|concurrent|tree",
                     help => "one source at a time, all pairs at once, or tree-guided: place each node by "
                             "measuring it against a few representatives of the tree built so far"},
                   #{name => wave, long => "wave", type => integer, range => {1, limit(wave)}, metavar => "N",
                     help => "tree: most nodes placed at once (default 4)"},
                   #{name => statistic, long => "statistic", type => string,
                     choices => ["min", "median", "mean", "p95"], metavar => "min|median|mean|p95",
                     help => "tree: the per-pair statistic that places a node (median where links let a "
                             "message through early now and then, as the testbed's rate shaping does; "
                             "default min)"},
                   #{name => warmup, long => "warmup", type => integer, range => {0, limit(warmup)}, metavar => "N",
                     help => "unrecorded exchanges per pair first (default: MESSAGES)"},
                   #{name => timeout, long => "timeout", type => integer, default => 5000, range => {1, limit(timeout)},
                     metavar => "MS", help => "deadline of one exchange"},
                   terrain_lab_cli_options:runs_dir(),
                   #{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to probe instead of the running cluster"},
                   terrain_lab_cli_options:state_dir()],
       run => {?MODULE, run}}].

%% @doc `terrain probe'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [], Io) ->
    ProbeOptions = probe_options(Options, Io),
    Steps = [fun(_) -> strategy_options(Options) end,
             fun(_) -> terrain_lab_probe:validate_options(ProbeOptions) end,
             fun(_) -> terrain_lab_cluster_state:connect(Options) end,
             fun(Nodes) -> guard(Nodes, ProbeOptions) end,
             fun(Nodes) -> measure(Nodes, ProbeOptions, maps:get(runs_dir, Options), Io) end],
    case terrain_lab_steps:run(Steps, Options) of
        {error, {probe, {Failed, _}}} = Error when Failed =:= unreachable; Failed =:= failed_pairs ->
            %% nodes that did not answer or stopped answering: with the VMs that exited
            terrain_lab_launch_status:explain(terrain_lab_cluster_state:state_dir(Options), Error);
        Result ->
            Result
    end.

%%--------------------------------------------------------------------
%% Internal functions

limit(Key) ->
    terrain_lab_probe:limit(Key).

%% The tree's own options with another strategy are a usage error (exit 2): they would
%% be ignored.
strategy_options(#{strategy := "tree"}) ->
    ok;
strategy_options(#{strategy := Strategy} = Options) ->
    case [Option || Option <- [wave, statistic], maps:get(Option, Options, undefined) =/= undefined] of
        [] -> ok;
        [Option | _] -> {error, {usage, io_lib:format("--~s is an option of --strategy tree; --strategy ~ts does not "
                                                      "use it", [Option, Strategy])}}
    end.

%% The resource guard: the clients running at once (every ordered pair with
%% --strategy concurrent, a source's pairs or a wave's otherwise) each hold a payload
%% and the one in flight, and their samples (a float in a list: about 40 bytes,
%% twice while sorted).
guard(Nodes, #{strategy := Strategy, payload := Payload, batches := Batches, messages := Messages}) ->
    N = length(Nodes),
    Clients = max(1, case Strategy of concurrent -> N * (N - 1); _ -> N - 1 end),
    case terrain_lab_guard:memory([{"--payload", Clients, 4 * Payload},
                                   {"--batches x --messages", Clients, 80 * Batches * Messages}]) of
        ok -> {ok, Nodes};
        {error, _} = Refused -> Refused
    end.

%% Measures into a new run directory (removed again when the probe cannot start):
%% the files after every round, then the final ones; SIGTERM interrupts.
measure(Nodes, ProbeOptions, RunsDir, Io) ->
    case terrain_lab_run:create(RunsDir) of
        {ok, Dir} ->
            announce(Nodes, ProbeOptions, Io),
            ok = terrain_lab_cli_signals:on_interrupt(self(), {terrain_lab_probe, interrupt}),
            Checkpoint = fun(Partial) -> terrain_lab_probe_files:write(Partial, Dir, #{}) end,
            Result = try terrain_lab_probe:probe(Nodes, ProbeOptions#{checkpoint => Checkpoint})
                     after terrain_lab_cli_signals:clear()
                     end,
            case Result of
                {ok, Measured} ->
                    save(Measured, Dir, Io);
                {error, _} = Error ->
                    _ = file:del_dir(Dir),
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

probe_options(Options, Io) ->
    Strategy = case maps:get(strategy, Options) of
                   "concurrent" -> concurrent;
                   "sequential" -> sequential;
                   "tree" -> tree;
                   Other -> Other
               end,
    Adaptive = maps:get(batches, Options, undefined) =:= undefined andalso Strategy =/= tree,
    Messages = case {maps:get(messages, Options, undefined), Adaptive} of
                   {undefined, true} -> 10;
                   {undefined, false} when Strategy =:= tree -> 10;
                   {undefined, false} -> 100;
                   {M, _} -> M
               end,
    Budget = case {maps:get(budget, Options, undefined), Adaptive} of
                 {undefined, _} when Strategy =:= tree -> 60000;
                 {undefined, true} -> 60000;
                 {undefined, false} -> infinity;
                 {Seconds, _} -> Seconds * 1000
             end,
    Batches = case {Adaptive, maps:get(batches, Options, undefined)} of
                  {true, _} -> 100;
                  {false, undefined} -> ?TREE_BATCHES;
                  {false, B} -> B
              end,
    ProbeOptions = #{batches => Batches,
                     messages => Messages, budget_ms => Budget,
                     precision => case Adaptive of true -> 0.05; false -> none end,
                     payload => maps:get(payload, Options), strategy => Strategy,
                     timeout => maps:get(timeout, Options), progress => progress_printer(Io)},
    WithWave0 = case maps:get(wave, Options, undefined) of
                   undefined -> ProbeOptions;
                   Wave -> ProbeOptions#{wave => Wave}
               end,
    WithWave = case Strategy of
                   tree -> WithWave0#{statistic => statistic(maps:get(statistic, Options, undefined))};
                   _ -> WithWave0
               end,
    case {maps:get(warmup, Options, undefined), Strategy} of
        {undefined, tree} -> WithWave#{warmup => ?TREE_WARMUP};
        {undefined, _} -> WithWave;
        {W, _} -> WithWave#{warmup => W}
    end.

statistic(undefined) -> min;
statistic("min") -> min;
statistic("median") -> median;
statistic("mean") -> mean;
statistic("p95") -> p95.

announce(Nodes, #{batches := B, messages := M, strategy := tree, budget_ms := Budget} = Opts, Io) ->
    terrain_lab_io:progress(Io, "probe: ~b nodes, tree-guided: each node against a few representatives of the tree "
                            "so far (~b ordered pairs in all), ~b batches x ~b messages per pair, placed by their "
                            "~s~ts~n",
                            [length(Nodes), length(Nodes) * (length(Nodes) - 1), B, M,
                             maps:get(statistic, Opts, min), budget(Budget)]);
announce(Nodes, #{batches := B, messages := M, strategy := Strategy, precision := none, budget_ms := Budget}, Io) ->
    terrain_lab_io:progress(Io, "probe: ~b nodes, ~b ordered pairs, ~s, ~b batches x ~b messages~ts~n",
                            [length(Nodes), length(Nodes) * (length(Nodes) - 1), Strategy, B, M, budget(Budget)]);
announce(Nodes, #{batches := B, messages := M, strategy := Strategy, precision := P, budget_ms := Budget}, Io) ->
    terrain_lab_io:progress(Io, "probe: ~b nodes, ~b ordered pairs, ~s, batches of ~b messages until the median "
                            "is within +-~b% (at most ~b)~ts~n",
                            [length(Nodes), length(Nodes) * (length(Nodes) - 1), Strategy, M, round(P * 100), B,
                             budget(Budget)]).

budget(infinity) -> "";
budget(Ms) -> io_lib:format(", budget ~b s", [Ms div 1000]).

progress_printer(Io) ->
    fun(#{done := Done, total := Total, elapsed_ms := Elapsed, eta_ms := Eta, unit := nodes}) ->
            terrain_lab_io:progress(Io, "probe: ~b of ~b nodes placed, ~ts elapsed, ETA ~ts~n",
                                    [Done, Total, duration(Elapsed), duration(Eta)]);
       (#{done := Done, total := Total, elapsed_ms := Elapsed, eta_ms := Eta}) ->
            terrain_lab_io:progress(Io, "probe: ~b of at most ~b batches, ~ts elapsed, ETA ~ts~n",
                                    [Done, Total, duration(Elapsed), duration(Eta)])
    end.

duration(unknown) -> "unknown";
duration(Ms) when Ms < 60000 -> io_lib:format("~bs", [Ms div 1000]);
duration(Ms) -> io_lib:format("~bm~2..0bs", [Ms div 60000, (Ms rem 60000) div 1000]).

%% Writes the final files, names them, and fails when a pair failed or the probe was
%% interrupted. A probe the budget ended succeeds (the user chose the budget) and
%% says so on stderr.
save(#{pairs := Pairs, nodes := Nodes} = Result, Dir, Io) ->
    EndedBy = maps:get(ended_by, Result, complete),
    Steps = [fun(_) -> terrain_lab_probe_files:write(Result, Dir, #{}) end,
             fun(Files) ->
                     [terrain_lab_io:out(Io, "wrote ~ts~n", [F]) || F <- Files],
                     Measured = length([P || {P, {ok, _}} <- maps:to_list(Pairs)]),
                     Total = length(Nodes) * (length(Nodes) - 1),
                     tree_summary(Result, Measured, Total, Io),
                     Failed = [{P, Why} || {P, {error, Why}} <- maps:to_list(Pairs), Why =/= not_measured,
                                          Why =/= interrupted],
                     case {EndedBy, Failed} of
                         {interrupt, _} ->
                             {error, {probe, {interrupted, Measured, map_size(Pairs)}}};
                         {budget, _} ->
                             #{options := #{budget_ms := Budget}} = Result,
                             terrain_lab_io:progress(Io, "probe: the budget of ~ts ended the probe: ~b of ~b pairs "
                                                     "were measured; the files are marked \"partial\": true~n",
                                                     [duration(Budget), Measured, Total]),
                             ok;
                         {complete, []} ->
                             ok;
                         {complete, _} ->
                             {error, {probe, {failed_pairs, length(Failed), lists:sublist(lists:sort(Failed), 3)}}}
                     end
             end],
    terrain_lab_steps:run(Steps, Dir).

tree_summary(#{topology := _, unplaced := Unplaced} = Result, Measured, Total, Io) ->
    terrain_lab_io:progress(Io, "probe: tree-guided: ~b of ~b ordered pairs measured (~.1f%), ~b waves, "
                            "~b nodes placed again by the repair~ts~n",
                            [Measured, Total, 100 * Measured / max(1, Total), maps:get(waves, Result, 0),
                             maps:get(reinserted, Result, 0),
                             case Unplaced of
                                 [] -> "";
                                 _ -> io_lib:format("; not placed: ~ts",
                                                    [lists:join(", ", [atom_to_list(N) || N <- Unplaced])])
                             end]);
tree_summary(_, _, _, _) ->
    ok.
