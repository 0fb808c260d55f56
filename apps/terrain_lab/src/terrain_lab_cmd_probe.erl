%% @private
%% @doc `terrain probe': all-pairs round-trip times between the nodes of the running
%% cluster (or of `--nodes'), into a run directory.
%%
%% The measurement is `terrain_lab_probe:probe/2' (its method and statistics are
%% described there); this module turns the options into probe options, joins the
%% cluster, prints progress with an ETA on stderr, and writes `latency.json',
%% `latency.csv' and `manifest.json' into `RUNS_DIR/<UTC stamp>/'. A pair that failed
%% is `null' in the files and makes the command fail after writing them.
-module(terrain_lab_cmd_probe).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "probe",
       summary => "Measure round trips between every pair of nodes into latency.json",
       usage => "",
       description => "For every ordered pair of nodes of the running cluster (or --nodes), a client on the "
                      "first exchanges messages with an echo process on the second: a warm-up, then BATCHES "
                      "batches of MESSAGES timed exchanges. --strategy sequential runs one source node at "
                      "a time, concurrent all pairs at once. Writes RUNS_DIR/<UTC stamp>/latency.json "
                      "(min, median, mean, p95, stddev in us per pair), latency.csv and manifest.json; "
                      "progress and an ETA go to stderr. Feed latency.json to 'terrain topology'.",
       args => {0, 0},
       options => [#{name => batches, long => "batches", type => integer, default => 100, metavar => "N",
                     help => "batches per pair"},
                   #{name => messages, long => "messages", type => integer, default => 100, metavar => "N",
                     help => "exchanges per batch"},
                   #{name => payload, long => "payload", type => integer, default => 0, metavar => "BYTES",
                     help => "payload of each message"},
                   #{name => strategy, long => "strategy", type => string, default => "sequential",
                     metavar => "sequential|concurrent", help => "one source at a time, or all pairs at once"},
                   #{name => warmup, long => "warmup", type => integer, metavar => "N",
                     help => "unrecorded exchanges per pair first (default: MESSAGES)"},
                   #{name => timeout, long => "timeout", type => integer, default => 5000, metavar => "MS",
                     help => "deadline of one exchange"},
                   terrain_lab_cli_options:runs_dir(),
                   #{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to probe instead of the running cluster"},
                   terrain_lab_cli_options:state_dir()],
       run => {?MODULE, run}}].

%% @doc `terrain probe'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [], Io) ->
    ProbeOptions = probe_options(Options, Io),
    Steps = [fun(_) -> terrain_lab_probe:validate_options(ProbeOptions) end,
             fun(_) -> terrain_lab_cluster_state:connect(Options) end,
             fun(Nodes) ->
                     announce(Nodes, ProbeOptions, Io),
                     terrain_lab_probe:probe(Nodes, ProbeOptions)
             end,
             fun(Result) -> save(Result, maps:get(runs_dir, Options), Io) end],
    terrain_lab_steps:run(Steps, Options).

%%--------------------------------------------------------------------
%% Internal functions

probe_options(Options, Io) ->
    Strategy = case maps:get(strategy, Options) of
                   "concurrent" -> concurrent;
                   "sequential" -> sequential;
                   Other -> Other
               end,
    ProbeOptions = #{batches => maps:get(batches, Options), messages => maps:get(messages, Options),
                     payload => maps:get(payload, Options), strategy => Strategy,
                     timeout => maps:get(timeout, Options), progress => progress_printer(Io)},
    case maps:get(warmup, Options, undefined) of
        undefined -> ProbeOptions;
        W -> ProbeOptions#{warmup => W}
    end.

announce(Nodes, #{batches := B, messages := M, strategy := Strategy}, Io) ->
    terrain_lab_io:progress(Io, "probe: ~b nodes, ~b ordered pairs, ~s, ~b batches x ~b messages~n",
                            [length(Nodes), length(Nodes) * (length(Nodes) - 1), Strategy, B, M]).

progress_printer(Io) ->
    fun(#{done := Done, total := Total, elapsed_ms := Elapsed, eta_ms := Eta}) ->
            terrain_lab_io:progress(Io, "probe: ~b/~b batches (~.1f%), ~ts elapsed, ETA ~ts~n",
                                    [Done, Total, 100 * Done / Total, duration(Elapsed), duration(Eta)])
    end.

duration(unknown) -> "unknown";
duration(Ms) when Ms < 60000 -> io_lib:format("~bs", [Ms div 1000]);
duration(Ms) -> io_lib:format("~bm~2..0bs", [Ms div 60000, (Ms rem 60000) div 1000]).

%% Writes the files into a new run directory, names them, and fails when a pair failed.
save(Result, RunsDir, Io) ->
    Steps = [fun terrain_lab_run:create/1,
             fun(Dir) -> terrain_lab_probe:write(Result, Dir, #{}) end,
             fun(Files) ->
                     [terrain_lab_io:out(Io, "wrote ~ts~n", [F]) || F <- Files],
                     case [P || {P, {error, _}} <- maps:to_list(maps:get(pairs, Result))] of
                         [] -> ok;
                         Failed -> {error, {probe, {failed_pairs, length(Failed), lists:sublist(lists:sort(Failed), 3)}}}
                     end
             end],
    terrain_lab_steps:run(Steps, RunsDir).
