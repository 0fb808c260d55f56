%% @private
%% @doc `terrain events': record a workload under EventSpace, export its events.
%%
%% ```
%% terrain events record --workload windtunnel --out DIR [--spec SPEC] [--workers W] [--steps S]
%%                       [--collectors explicit,trace] [--scope-rate HZ] ...
%% terrain events export DIR [--format perfetto|jsonl] [--out FILE]
%% '''
%% `record' runs on the nodes of SPEC (started for the run and stopped after it) or,
%% without `--spec', on the cluster that `terrain up' started. It prints what the
%% monitors found (load imbalance per worker, send-to-receive latency per node pair)
%% and writes the run directory (docs/EVENTS.md). `export' turns a run's
%% events.jsonl into trace.json (Chrome trace-event format, for ui.perfetto.dev) or
%% rewrites the raw events.
-module(terrain_lab_cmd_events).

%% API (CLI handler)
-export([commands/0,
         run/3,
         format_error/1]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%%--------------------------------------------------------------------
%% API

%% @doc The command's entries in `terrain_lab_cli:commands/0'.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "events",
       summary => "Record a workload under EventSpace (monitors, timeline); export its events",
       usage => "record --workload windtunnel --out DIR | export DIR",
       description => "record: runs the wind tunnel on the nodes of --spec (started and stopped for the run) or "
                      "else on the running cluster, with the chosen collectors on and a scope reading every node "
                      "at --scope-rate with the load-imbalance and slow-pair monitors; prints their findings and "
                      "writes DIR/events.jsonl, trace.json, findings.json, the views (timeline, reads; PNG and "
                      "SVG, by terrain-analysis) and manifest.json. export DIR: writes DIR/trace.json (--format "
                      "perfetto, the Chrome trace-event format) or the raw events (--format jsonl) from "
                      "DIR/events.jsonl, or to --out.",
       args => {1, 2},
       options => [#{name => spec, long => "spec", type => string, metavar => "FILE",
                     help => "record: start this cluster for the run (default: the running cluster)"},
                   #{name => state_dir, long => "state-dir", type => string, default => ".terrain",
                     metavar => "DIR", help => "where the running cluster is recorded"},
                   #{name => workload, long => "workload", type => string, metavar => "windtunnel",
                     help => "record: the workload to run"},
                   #{name => workers, long => "workers", type => integer, range => {1, inf}, default => 16,
                     metavar => "W",
                     help => "record: worker processes"},
                   #{name => workers_per_scheduler, long => "workers-per-scheduler", type => integer, range => {1, inf},
                     metavar => "K", help => "record: K workers per online scheduler instead of --workers"},
                   #{name => steps, long => "steps", type => integer, range => {1, inf}, default => 200, metavar => "S",
                     help => "record: steps"},
                   #{name => columns, long => "columns", type => integer, range => {1, inf}, default => 256,
                     metavar => "N",
                     help => "record: lattice columns"},
                   #{name => slice_rows, long => "slice-rows", type => integer, range => {1, inf}, default => 16,
                     metavar => "N",
                     help => "record: lattice rows per worker"},
                   #{name => work_per_cell, long => "work-per-cell", type => integer, range => {1, inf}, default => 16,
                     metavar => "N", help => "record: rounds of the cell rule per cell and step"},
                   #{name => collectors, long => "collectors", type => list,
                     metavar => "explicit,trace", help => "record: the collectors to turn on (default explicit)"},
                   #{name => scope_rate, long => "scope-rate", type => float, default => 10.0, metavar => "HZ",
                     check => {fun(R) -> R > 0 andalso R =< 1000 end, "a number > 0 and <= 1000"},
                     help => "record: reads per second of the monitor scope"},
                   #{name => scope_batch, long => "scope-batch", type => integer, range => {1, inf}, default => 1000,
                     metavar => "N",
                     help => "record: events per node per read of the monitor scope"},
                   #{name => highlight_step, long => "highlight-step", type => integer, range => {0, inf},
                     metavar => "S",
                     help => "record: the step the timeline highlights (default: the middle one)"},
                   #{name => view_worker, long => "view-worker", type => integer, range => {0, inf}, metavar => "I",
                     help => "record: the worker of the reads view (default: the middle one)"},
                   #{name => no_views, long => "no-views", type => flag, help => "record: do not draw the views"},
                   #{name => out, long => "out", type => string, metavar => "DIR|FILE",
                     help => "record: the run directory; export: the file to write"},
                   #{name => format, long => "format", type => string, default => "perfetto",
                     metavar => "perfetto|jsonl", help => "export: what to write"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain events record|export'.
-spec run(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
run(Options, Args, Io) ->
    case action(Options, Args, Io) of
        {error, {events_cmd, {Usage, _}} = Reason} when Usage =:= usage; Usage =:= missing ->
            {error, {usage, Reason}};       % exit 2 (docs/CLI.md, Conventions)
        {error, {events_cmd, {bad_option, _, _, _}} = Reason} ->
            {error, {usage, Reason}};
        Result ->
            Result
    end.

action(Options, ["record"], Io) ->
    record(Options, Io);
action(Options, ["export", Dir], Io) ->
    export(Options, Dir, Io);
action(_Options, Args, _Io) ->
    {error, {events_cmd, {usage, Args}}}.

%% @doc A sentence for an error of `terrain events'.
-spec format_error(term()) -> iolist().
format_error({events_cmd, {usage, Args}}) ->
    io_lib:format("expected 'record' or 'export DIR', got: ~ts", [lists:join(" ", Args)]);
format_error({events_cmd, {missing, Option}}) ->
    io_lib:format("record needs --~ts", [Option]);
format_error({events_cmd, {bad_option, Option, Value, Expected}}) ->
    io_lib:format("bad --~ts '~ts': expected ~ts", [Option, Value, Expected]);
format_error({events_cmd, {events_record, _} = Reason}) ->
    terrain_lab_events:format_error(Reason);
format_error({events_cmd, {windtunnel, _} = Reason}) ->
    terrain_workloads:format_windtunnel_error(Reason);
format_error({events_cmd, Reason}) ->
    terrain_events:format_error(Reason).

%%--------------------------------------------------------------------
%% Output: results on the `out' device, progress and errors on `err'

%%--------------------------------------------------------------------
%% record

record(Options, Io) ->
    case record_options(Options) of
        {ok, Record} ->
            case maps:get(spec, Options, undefined) of
                undefined ->
                    case terrain_lab_cluster_state:connect(Options) of
                        {ok, Nodes} -> record_on(Nodes, Record, Io);
                        {error, _} = Error -> Error
                    end;
                Spec ->
                    with_cluster(Spec, Record, Io)
            end;
        {error, _} = Error ->
            Error
    end.

record_options(Options) ->
    Asked = case maps:get(collectors, Options, undefined) of
                undefined -> ["explicit"];
                [] -> ["explicit"];
                List -> List
            end,
    Collectors = [list_to_atom(C) || C <- Asked, lists:member(C, ["explicit", "trace"])],
    case {maps:get(workload, Options, undefined), maps:get(out, Options, undefined)} of
        {undefined, _} ->
            {error, {events_cmd, {missing, "workload windtunnel"}}};
        {W, _} when W =/= "windtunnel" ->
            {error, {events_cmd, {bad_option, "workload", W, "windtunnel"}}};
        {_, undefined} ->
            {error, {events_cmd, {missing, "out DIR"}}};
        _ when length(Collectors) =/= length(Asked); Collectors =:= [] ->
            {error, {events_cmd, {bad_option, "collectors", lists:join(",", Asked),
                                  "explicit, trace or both"}}};
        {_, Out} ->
            Rate = maps:get(scope_rate, Options),      % 0 < HZ <= 1000: checked by its definition
            case terrain_lab_files:new_output(dir, Out, [F || F <- [maps:get(spec, Options, undefined)],
                                                              F =/= undefined]) of
                {error, _} = Error ->
                    Error;
                ok ->
                    Tunnel = maps:filter(fun(_, V) -> V =/= undefined end,
                                         maps:with([steps, columns, slice_rows, work_per_cell, highlight_step,
                                                    view_worker, scope_batch], Options)),
                    Workers = case maps:get(workers_per_scheduler, Options, undefined) of
                                  undefined -> #{workers => maps:get(workers, Options)};
                                  K -> #{workers_per_scheduler => K}
                              end,
                    {ok, maps:merge(Tunnel, Workers#{out => Out, collectors => lists:usort(Collectors),
                                                     scope_rate => Rate, views => not maps:get(no_views, Options),
                                                     parameters => #{workload => windtunnel}})}
            end
    end.

with_cluster(SpecFile, Record, Io) ->
    case terrain_lab:read_spec(SpecFile) of
        {ok, Spec} ->
            case guard(length(terrain_lab_spec:nodes(Spec)), Record) of
                ok -> with_cluster(SpecFile, Spec, Record, Io);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

with_cluster(SpecFile, Spec, Record, Io) ->
    terrain_lab_io:progress(Io, "events: starting the nodes of ~ts~n", [SpecFile]),
    Parameters = #{workload => windtunnel, spec => list_to_binary(SpecFile)},
    Run = fun(Infos) -> {ran, record_on([N || #{node := N} <- Infos], Record#{parameters => Parameters}, Io)} end,
    case terrain_lab:with_cluster(Spec, #{prefix => "ev" ++ os:getpid() ++ "_"}, Run) of
        {ran, Result} -> terrain_lab_io:progress(Io, "events: cluster stopped~n", []), Result;
        {error, _} = NotStarted -> NotStarted
    end.

record_on(Nodes, Record, Io) ->
    case guard(length(Nodes), Record) of
        ok -> record_guarded(Nodes, Record, Io);
        {error, _} = Error -> Error
    end.

%% The resource guard, before any worker starts: the workers on one node (--workers,
%% or K per scheduler of the node; the nodes run on this machine or its like), each a
%% process holding its slice of the lattice (16 bytes a cell) and the events its
%% collectors buffer (about 200 bytes each, one per step and neighbour).
guard(NodeCount, Record) ->
    {Option, PerNode, Workers} =
        case Record of
            #{workers_per_scheduler := K} ->
                PerScheduler = K * erlang:system_info(schedulers_online),
                {"--workers-per-scheduler", PerScheduler, PerScheduler * max(1, NodeCount)};
            #{workers := W} ->
                {"--workers", W, W}               % W in all, spread over the nodes
        end,
    Cells = maps:get(slice_rows, Record, 16) * maps:get(columns, Record, 256),
    Events = 4 * maps:get(steps, Record, 200),
    terrain_lab_steps:run([fun(_) -> terrain_lab_guard:processes(Option, PerNode, lab_node) end,
                           fun(_) -> terrain_lab_guard:memory([{Option, Workers,
                                                                terrain_lab_guard:process_bytes() + 16 * Cells
                                                                + 200 * Events}])
                           end], none).

record_guarded(Nodes, Record, Io) ->
    Progress = fun(Text) -> terrain_lab_io:progress(Io, "~ts", [Text]) end,
    Last = atomics:new(1, [{signed, true}]),
    atomics:put(Last, 1, erlang:monotonic_time(millisecond) - 1000),   % monotonic time may be negative
    OnReport = fun(#{kind := load_imbalance, most_waiting := W, max_wait_share := S, mean_wait_share := M})
                     when W =/= none ->
                       Now = erlang:monotonic_time(millisecond),
                       case Now - atomics:get(Last, 1) >= 1000 of
                           true ->
                               atomics:put(Last, 1, Now),
                               terrain_lab_io:progress(Io, "monitor: worker ~p waits ~b% of its time "
                                                        "(mean ~b%)~n", [W, round(100 * S), round(100 * M)]);
                           false ->
                               ok
                       end;
                  (_) ->
                       ok
               end,
    %% SIGTERM stops the wind tunnel and keeps the events recorded so far (partial)
    ok = terrain_lab_cli_signals:on_interrupt(self(), {terrain_lab_events, interrupt}),
    Recorded = try terrain_lab_events:record(Record#{nodes => Nodes}, Progress, OnReport)
               after ok = terrain_lab_cli_signals:clear()
               end,
    case Recorded of
        {ok, Result} -> print(Result, Record, Io);
        {error, {windtunnel, _} = Reason} -> {error, {events_cmd, Reason}};
        {error, {events_record, _} = Reason} -> {error, {events_cmd, Reason}};
        {error, _} = Error -> Error
    end.

print(#{windtunnel := T, reports := Reports, scope := S, events := Events, lost := Lost, offsets := Offsets,
        views := Views, files := Files}, #{out := Out}, Io) ->
    Placement = maps:get(placement, T),
    Out1 = fun(F, A) -> terrain_lab_io:out(Io, F, A) end,
    Out1("wind tunnel: ~b workers x ~b steps on ~b nodes in ~.2f s (lattice ~b x ~b, checksum ~b)~n",
         [maps:get(workers, T), maps:get(steps, T), length(maps:get(nodes, T)), maps:get(elapsed_us, T) / 1.0e6,
          element(1, maps:get(lattice, T)), element(2, maps:get(lattice, T)), maps:get(checksum, T)]),
    Out1("scope: ~b reads in ~.1f s (~.1f/s), ~b events observed (~b/s), ~b lost, ~b failed reads~n",
         [maps:get(reads, S), maps:get(elapsed_ms, S) / 1000, maps:get(read_rate, S), maps:get(events, S),
          round(maps:get(observation_rate, S)), maps:get(lost, S), maps:get(failed, S)]),
    Out1("events kept: ~b (~b overwritten before they were read)~n", [Events, Lost]),
    Out1("clock offsets (node minus this node, from the shortest of 8 round trips):~n", []),
    [Out1("  ~-36s ~8s us  (round trip ~b us)~n",
          [N, [case O < 0 of true -> ""; false -> "+" end, integer_to_list(O)], R])
     || {N, #{offset_us := O, rtt_us := R}} <- lists:sort(maps:to_list(Offsets))],
    lists:foreach(fun(R) -> print_report(R, Placement, Out1) end, Reports),
    case Views of
        ok -> ok;
        {skipped, Why} -> terrain_lab_io:progress(Io, "events: views skipped: ~ts~n", [Why]);
        {failed, Status, Output} -> terrain_lab_io:progress(Io, "events: views failed (exit ~b):~n~ts~n",
                                                             [Status, Output])
    end,
    Out1("wrote ~ts: ~ts~n", [Out, lists:join(" ", Files)]).

print_report(#{kind := load_imbalance, workers := Workers} = R, Placement, Out) ->
    Out("~nload imbalance (per worker: time computing vs waiting for its neighbours' borders):~n", []),
    Out("  ~6s  ~-34s ~11s ~11s ~8s~n", ["WORKER", "NODE", "COMPUTE ms", "WAIT ms", "WAITING"]),
    [Out("  ~6b  ~-34s ~11.1f ~11.1f ~7.1f%~n",
         [I, proplists:get_value(I, Placement, '?'), C / 1000, Wt / 1000, 100 * (1 - Share)])
     || {I, #{compute_us := C, wait_us := Wt, compute_share := Share}} <- lists:sort(maps:to_list(Workers))],
    case R of
        #{most_waiting := none} -> Out("  no worker events observed~n", []);
        #{most_waiting := W, max_wait_share := Max, min_wait_share := Min, mean_wait_share := Mean} ->
            Out("  most waiting: worker ~p (~.1f%); waiting share min ~.1f%, mean ~.1f%, max ~.1f%~n",
                [W, 100 * Max, 100 * Min, 100 * Mean, 100 * Max])
    end;
print_report(#{kind := slow_pair, pairs := Pairs, slowest := Slowest, unpaired := Unpaired}, _Placement, Out) ->
    Out("~nslow pairs (border message send -> receive, by node pair, clock-corrected; ranked by p10,~n"
        "the delay of messages whose receiver was already waiting):~n", []),
    Out("  ~-30s ~-30s ~8s ~8s ~10s ~10s ~10s~n",
        ["FROM", "TO", "MESSAGES", "P10 us", "MEDIAN us", "MEAN us", "MAX us"]),
    [Out("  ~-30s ~-30s ~8b ~8b ~10b ~10.1f ~10b~n", [F, T, N, P10, Med, Mean, Max])
     || #{from := F, to := T, count := N, p10_us := P10, median_us := Med, mean_us := Mean, max_us := Max} <- Pairs],
    case Slowest of
        none -> Out("  no message pairs observed~n", []);
        {F, T} -> Out("  slowest pair: ~ts -> ~ts (~b halves unpaired)~n", [F, T, Unpaired])
    end;
print_report(Other, _Placement, Out) ->
    Out("~0tp~n", [Other]).

%%--------------------------------------------------------------------
%% export

export(Options, Dir, Io) ->
    case maps:get(format, Options) of
        Format when Format =:= "perfetto"; Format =:= "jsonl" ->
            case terrain_lab_events:export(Dir, list_to_atom(Format), maps:get(out, Options, undefined)) of
                {ok, File, N} -> terrain_lab_io:out(Io, "wrote ~ts (~b events)~n", [File, N]);
                {error, {events_file, _, _} = Reason} -> {error, {events_cmd, Reason}};
                {error, _} = Error -> Error
            end;
        Other ->
            {error, {events_cmd, {bad_option, "format", Other, "perfetto or jsonl"}}}
    end.
