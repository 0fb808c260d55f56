%% @private
%% @doc Recording a workload under EventSpace: the domain part of `terrain events
%% record' and `terrain events export'.
%%
%% `record/3' runs the wind tunnel on a cluster's nodes with the chosen collectors
%% on, a scope reading every node at `scope_rate' with the two built-in monitors, then
%% reads every event kept, merged by clock-corrected time, and writes into the output
%% directory: `events.jsonl' (raw events, `terrain.events/1'), `trace.json' (Chrome
%% trace-event format), `findings.json' (the monitors' reports and the scope's
%% statistics, `terrain.event_findings/1'), the two views drawn by
%% `terrain-analysis events' (timeline and reads, PNG and SVG) and `manifest.json'.
%% Progress reaches the user through the `Progress' fun.
-module(terrain_lab_events).

%% API
-export([record/3,
         export/3,
         format_error/1]).

-export_type([record_options/0, record_result/0]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FINDINGS_FORMAT, ?TERRAIN_FORMAT_EVENT_FINDINGS).

-type record_options() ::
        #{nodes := [node()],                 % where the wind tunnel runs
          out := file:filename(),            % the run directory (created)
          workers => pos_integer(),
          workers_per_scheduler => pos_integer(),
          steps => pos_integer(),
          columns => pos_integer(),
          slice_rows => pos_integer(),
          work_per_cell => pos_integer(),
          collectors => [explicit | trace],   % default [explicit]
          scope_rate => number(),            % reads per second of the monitor scope (default 10)
          scope_batch => pos_integer(),      % events per node per read (default 1000)
          views => boolean(),                % draw the views with terrain-analysis (default true)
          highlight_step => pos_integer(),   % the step the timeline highlights (default steps / 2)
          view_worker => non_neg_integer(),  % the worker of the reads view (default the middle one)
          partial => boolean(),              % internal: an interrupted run's files say so
          parameters => map()}.              % recorded in the manifest as they are

-type record_result() :: #{windtunnel := terrain_workloads:windtunnel_result(),
                           reports := [term()],
                           scope := terrain_events:scope_stats(),
                           events := non_neg_integer(),
                           lost := non_neg_integer(),
                           offsets := #{node() => map()},
                           files := [binary()],
                           views := ok | {skipped, string()} | {failed, integer(), binary()}}.

%% @doc Runs the wind tunnel on `Nodes' under EventSpace and writes the run directory.
-spec record(record_options(), fun((iodata()) -> ok), fun((term()) -> ok)) ->
          {ok, record_result()} | {error, term()}.
record(#{nodes := Nodes, out := Out} = Options, Progress, OnReport) ->
    Collectors = maps:get(collectors, Options, [explicit]),
    case start_events([node() | Nodes]) of
        ok ->
            case file:make_dir(Out) of
                Made when Made =:= ok; Made =:= {error, eexist} -> run(Nodes, Collectors, Options, Progress, OnReport);
                {error, Why} -> {error, {write, Out, Why}}
            end;
        {error, _} = Error ->
            Error
    end.

start_events(Nodes) ->
    Results = erpc:multicall(Nodes, application, ensure_all_started, [terrain_events], 10000),
    case [{N, R} || {N, R} <- lists:zip(Nodes, Results), not is_started(R)] of
        [] -> ok;
        [{Node, Why} | _] -> {error, {events_record, {start_failed, Node, Why}}}
    end.

is_started({ok, {ok, _}}) -> true;
is_started(_) -> false.

run(Nodes, Collectors, Options, Progress, OnReport) ->
    Rate = maps:get(scope_rate, Options, 10),
    Monitors = [#{kind => load_imbalance, callback => OnReport}, #{kind => slow_pair, callback => OnReport}],
    {ok, Scope} = terrain_events:start_scope(#{nodes => lists:usort([node() | Nodes]),
                                              collectors => [explicit], rate => Rate,
                                              batch => maps:get(scope_batch, Options, 1000),
                                              monitors => Monitors}),
    Tunnel = maps:with([workers, workers_per_scheduler, steps, columns, slice_rows, work_per_cell], Options),
    %% only this run's events: where every collector stands before it
    Cursors = terrain_events:cursors(lists:usort([node() | Nodes]), Collectors),
    Self = self(),
    Tracing = lists:member(trace, Collectors),
    Instrument = case lists:member(explicit, Collectors) of
                     true -> fun terrain_events:emit/3;
                     false -> none
                 end,
    Progress(io_lib:format("events: wind tunnel on ~b nodes, collectors ~ts, scope at ~p Hz~n",
                           [length(Nodes), lists:join(",", [atom_to_list(C) || C <- Collectors]), Rate])),
    Started = erlang:monotonic_time(microsecond),
    %% the wind tunnel runs in a process of its own, so that a SIGTERM the caller
    %% turned into a message ({?MODULE, interrupt}) stops it and the events recorded so
    %% far are written, marked partial
    Ref = make_ref(),
    OnStart = fun(Workers) when Tracing ->
                      {ok, Tracers} = terrain_events:trace([P || {_, P} <- Workers], #{}),
                      Self ! {tracers, Tracers}, ok;
                 (_) -> ok
              end,
    {Runner, MRef} = spawn_monitor(
                       fun() ->
                               Self ! {Ref, terrain_workloads:windtunnel(
                                              Tunnel#{nodes => Nodes, instrument => Instrument,
                                                      on_start => OnStart})}
                       end),
    Result = receive
                 {Ref, R} -> erlang:demonitor(MRef, [flush]), R;
                 {'DOWN', MRef, process, Runner, Why} -> {error, {events_record, {workload_failed, Why}}};
                 {?MODULE, interrupt} -> erlang:demonitor(MRef, [flush]), exit(Runner, kill), interrupted
             end,
    Tracers = receive {tracers, Ts} -> Ts after 0 -> [] end,
    {Reports, ScopeStats} = terrain_events:stop_scope(Scope),
    _ = [terrain_events:stop_trace(T) || T <- Tracers],
    case Result of
        {ok, Tunnel1} ->
            Progress(io_lib:format("events: ~b workers x ~b steps in ~.2f s; reading the event spaces~n",
                                   [maps:get(workers, Tunnel1), maps:get(steps, Tunnel1),
                                    maps:get(elapsed_us, Tunnel1) / 1.0e6])),
            write_run(Nodes, Collectors, Cursors, Options, Tunnel1, Reports, ScopeStats, Progress);
        interrupted ->
            Progress("events: interrupted; writing the events recorded so far (partial)\n"),
            Partial = #{workers => maps:get(workers, Options, 0), steps => maps:get(steps, Options, 0),
                        elapsed_us => erlang:monotonic_time(microsecond) - Started, checksum => null, placement => []},
            case write_run(Nodes, Collectors, Cursors, Options#{partial => true, views => false}, Partial, Reports,
                           ScopeStats, Progress) of
                {ok, #{events := N}} -> {error, {events_record, {interrupted, maps:get(out, Options), N}}};
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

write_run(Nodes, Collectors, Cursors, #{out := Out} = Options, Tunnel, Reports, ScopeStats, Progress) ->
    Spaces = lists:usort([node() | Nodes]),
    {ok, #{events := Events, offsets := Offsets, lost := Lost, failed := Failed}} =
        terrain_events:read(Spaces, #{collectors => Collectors, batch => 5000, timeout => 10000,
                                      cursors => Cursors}),
    _ = Failed =/= [] andalso Progress(io_lib:format("events: could not read ~0tp~n", [Failed])) =:= ok,
    Steps = maps:get(steps, Tunnel),
    Workers = maps:get(workers, Tunnel),
    Header = #{partial => maps:get(partial, Options, false),
               nodes => [atom_to_binary(N) || N <- Spaces],
               offsets_us => maps:from_list([{atom_to_binary(N),
                                              O} || {N, #{offset_us := O}} <- maps:to_list(Offsets)]),
               rtt_us => maps:from_list([{atom_to_binary(N), R} || {N, #{rtt_us := R}} <- maps:to_list(Offsets)]),
               lost => Lost, workers => Workers, steps => Steps},
    EventsFile = filename:join(Out, "events.jsonl"),
    TraceFile = filename:join(Out, "trace.json"),
    Findings = (findings(Tunnel, Reports, ScopeStats, Lost, length(Events)))#{partial => maps:get(partial, Options,
                                                                                                   false)},
    Parameters = maps:merge(maps:get(parameters, Options, #{}),
                            #{workers => Workers, steps => Steps, nodes => length(Nodes),
                              collectors => Collectors, scope_rate => maps:get(scope_rate, Options, 10)}),
    Highlight = maps:get(highlight_step, Options, max(1, Steps div 2)),
    ViewWorker = maps:get(view_worker, Options, Workers div 2),
    Steps1 = [fun() -> terrain_events:write_events(EventsFile, Events, Header) end,
              fun() -> case terrain_events:read_events(EventsFile) of
                           {ok, _, Json} -> terrain_events:write_perfetto(TraceFile, Json);
                           {error, _} = E -> E
                       end end,
              fun() -> terrain_lab_files:write_json(filename:join(Out, "findings.json"), Findings) end],
    case first_error(Steps1) of
        ok ->
            Views = views(Out, Highlight, ViewWorker, maps:get(views, Options, true), Progress),
            ViewFiles = case Views of
                            ok -> [#{kind => events_timeline, file => F,
                                     parameters => #{highlight_step => Highlight}}
                                   || F <- [<<"timeline.png">>, <<"timeline.svg">>]]
                                      ++ [#{kind => events_reads, file => F, parameters => #{worker => ViewWorker}}
                                          || F <- [<<"reads.png">>, <<"reads.svg">>]];
                            _ -> []
                        end,
            Outputs = [#{kind => events, file => <<"events.jsonl">>, parameters => Parameters},
                       #{kind => trace_events, file => <<"trace.json">>, parameters => #{format => <<"chrome">>}},
                       #{kind => event_findings, file => <<"findings.json">>, parameters => #{}} | ViewFiles],
            case terrain_lab_run:write_manifest(Out, events, Outputs) of
                ok ->
                    {ok, #{windtunnel => Tunnel, reports => Reports, scope => ScopeStats, events => length(Events),
                           lost => Lost, offsets => Offsets, views => Views,
                           files => [F || #{file := F} <- Outputs] ++ [<<"manifest.json">>]}};
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    end.

first_error([]) -> ok;
first_error([F | Rest]) ->
    case F() of
        ok -> first_error(Rest);
        {error, _} = Error -> Error
    end.

findings(Tunnel, Reports, Stats, Lost, Events) ->
    #{format => ?FINDINGS_FORMAT,
      windtunnel => #{elapsed_us => maps:get(elapsed_us, Tunnel), workers => maps:get(workers, Tunnel),
                      steps => maps:get(steps, Tunnel), checksum => maps:get(checksum, Tunnel),
                      placement => [#{worker => I, node => N} || {I, N} <- maps:get(placement, Tunnel)]},
      events => Events, lost => Lost,
      scope => maps:without([offsets], Stats),
      monitors => [json_report(R) || R <- Reports]}.

json_report(#{kind := load_imbalance, workers := Workers} = R) ->
    (maps:without([workers], R))#{workers => [W#{worker => I} || {I, W} <- lists:sort(maps:to_list(Workers))]};
json_report(#{kind := slow_pair, slowest := Slowest} = R) ->
    R#{slowest => case Slowest of none -> null; {F, T} -> [F, T] end};
json_report(R) ->
    R.

%% terrain-analysis events DIR: the two views, when it is installed.
views(_Out, _Highlight, _Worker, false, _Progress) ->
    {skipped, "views not asked for"};
views(Out, Highlight, Worker, true, Progress) ->
    case terrain_lab_analysis:command() of
        false ->
            {skipped, "terrain-analysis is not installed here (make setup installs it)"};
        Command ->
            Progress(io_lib:format("events: drawing the views with ~ts~n", [Command])),
            case terrain_lab_analysis:run(Command, 180000,
                                          ["events", Out, "--highlight-step", integer_to_list(Highlight),
                                        "--worker", integer_to_list(Worker)]) of
                {0, _} -> ok;
                {Status, Output} -> {failed, Status, Output}
            end
    end.


%% @doc `terrain events export DIR': writes `trace.json' (format `perfetto') or
%% checks and rewrites `events.jsonl' (format `jsonl') from the run's events.
-spec export(file:filename(), perfetto | jsonl, file:filename() | undefined) ->
          {ok, file:filename(), non_neg_integer()} | {error, term()}.
export(Dir, Format, Out) ->
    Input = filename:join(Dir, "events.jsonl"),
    File = default(Out, filename:join(Dir, case Format of perfetto -> "trace.json"; jsonl -> "events.jsonl" end)),
    %% the one output rule: never the input; a given --out never an existing file
    %% (the default trace.json is derived from the input and replaced)
    Check = case Out of
                undefined -> terrain_lab_files:new_output(file, filename:join(Dir, "none"), [Input]);
                _ -> terrain_lab_files:new_output(file, Out, [Input])
            end,
    case {Check, filename:absname(File) =:= filename:absname(Input)} of
        {{error, _} = Error, _} -> Error;
        {ok, true} -> {error, {output_is_input, File}};
        {ok, false} -> export(Input, Format, File, terrain_events:read_events(Input))
    end.

export(_Input, perfetto, File, {ok, _Header, Json}) ->
    case terrain_events:write_perfetto(File, Json) of
        ok -> {ok, File, length(Json)};
        {error, _} = Error -> Error
    end;
export(_Input, jsonl, File, {ok, Header, Json}) ->
    Lines = [terrain_json:encode(Header), $\n | [[terrain_json:encode(E), $\n] || E <- Json]],
    case terrain_lab_files:write(File, Lines) of
        ok -> {ok, File, length(Json)};
        {error, _} = Error -> Error
    end;
export(_Input, _Format, _File, {error, _} = Error) ->
    Error.

default(undefined, File) -> File;
default(Out, _File) -> Out.

%% @doc A sentence for an error of this module.
-spec format_error(term()) -> iolist().
format_error({events_record, {interrupted, Out, N}}) ->
    io_lib:format("interrupted (SIGTERM); the ~b events recorded before are kept in ~ts (marked partial)", [N, Out]);
format_error({events_record, {workload_failed, Why}}) ->
    io_lib:format("the wind tunnel failed: ~0tP", [Why, 12]);
format_error({events_record, {start_failed, Node, Why}}) ->
    io_lib:format("could not start terrain_events on ~ts: ~0tp", [Node, Why]).
