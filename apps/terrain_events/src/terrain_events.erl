%% @doc EventSpace for Erlang: low-perturbation event collection across a cluster.
%%
%% Every node whose events are collected starts the `terrain_events' application:
%% ```
%% {ok, _} = application:ensure_all_started(terrain_events),
%% ok = terrain_events:emit([step, compute], #{duration_us => 812}, #{worker => 3}),
%% ok = terrain_events:emit([step, send], #{bytes => 4096}, #{worker => 3}),
%% {ok, #{events := [#{name := [step, compute], measurements := #{duration_us := 812}}]}} =
%%     terrain_events:read([node()], #{select => #{names => [[step, compute]]}}).
%% '''
%%
%% After Bjørndalen, Anshus and Bongo (PATHS and EventSpace, §4): instrumentation,
%% collection, storage and observation are separate. <em>Collectors</em> record
%% timestamped events into the <em>event space</em>: on every node, one bounded ring
%% per collector. <em>Scopes</em> read the rings of several nodes while the
%% application runs, at a rate and batch size of their choosing, correct each node's
%% clock by an offset estimated from round trips, merge the events into one timeline,
%% select and aggregate them. <em>Monitors</em> consume a scope's events online and
%% call back into the application.
%%
%% Collectors:
%% <ul>
%% <li>explicit: {@link emit/3} has the shape of telemetry's `execute/3' (an event
%%     name as a list of atoms, a map of measurements, a map of metadata) and costs a
%%     `persistent_term' lookup, an `atomics' increment and an ETS insert in the
%%     calling process: it never blocks, never sends a message and never waits on
%%     another process (docs/BENCHMARKS.md has its cost per event);</li>
%% <li>paths: {@link collect/3} records a value passing a communication path; the
%%     `collect' wrapper of terrain_paths calls it for every value;</li>
%% <li>trace: {@link trace/2} records the sends and receives of processes whose code
%%     cannot be changed, with the trace's timestamps.</li>
%% </ul>
%% An event carries its time (system time, microseconds), node, process, collector,
%% name, measurements and metadata. A ring holds at most `capacity' events (the
%% application environment, default 65536): when full, the oldest is overwritten and
%% counted as dropped, so the memory stays bounded under any burst.
%%
%% ```
%% ok = terrain_events:emit([windtunnel, compute], #{duration_us => 812}, #{worker => 3, step => 17}),
%% {ok, Scope} = terrain_events:start_scope(#{nodes => [node() | nodes()], rate => 10,
%%                                            monitors => [#{kind => load_imbalance}]}),
%% ...
%% {[#{kind := load_imbalance, most_waiting := W}], Stats} = terrain_events:stop_scope(Scope),
%% {ok, #{events := Timeline}} = terrain_events:read([node() | nodes()], #{select => #{names => [[windtunnel]]}}).
%% '''
%% See docs/EVENTS.md for the event conventions, the monitors and the file formats.
-module(terrain_events).

%% API: collectors
-export([emit/3,
         emit/4,
         collect/3,
         new_collector/2,
         delete_collector/1,
         trace/2,
         stop_trace/1]).

%% API: the event space
-export([info/0,
         cursors/2,
         read/2]).

%% API: scopes and monitors
-export([start_scope/1,
         stop_scope/1,
         scope_reports/1,
         scope_stats/1,
         configure_scope/2,
         clock_offset/2,
         select/2,
         merge/2,
         aggregate/2]).

%% API: files
-export([write_events/3,
         read_events/1,
         write_perfetto/2]).

%% API: errors
-export([format_error/1]).

%% exports_not_used: the public API of terrain_events (docs/EVENTS.md); the lab uses part of it.
-ignore_xref([{aggregate, 2}, {clock_offset, 2}, {collect, 3}, {configure_scope, 2}, {delete_collector, 1},
              {emit, 4}, {info, 0}, {merge, 2}, {new_collector, 2}, {scope_reports, 1}, {scope_stats, 1},
              {select, 2}]).

-export_type([event/0, selection/0, scope_options/0, monitor/0, scope_stats/0, read_result/0,
              aggregate_options/0, window/0, trace_options/0]).

%% An event: the system time in microseconds of the node that recorded it, corrected
%% to the reader's clock once merged; the node, process and collector that recorded
%% it; its name (a list of atoms) and its two maps, as given to the collector.
-type event() :: #{time := integer(),
                   node := node(),
                   pid := pid(),
                   collector := atom(),
                   name := [atom()],
                   measurements := map(),
                   metadata := map(),
                   seq := pos_integer()}.
%% An event as read/2, a scope and the files give it back (time in µs of system time).

-type selection() ::
        #{names => [[atom()]],
          nodes => [node()],
          pids => [pid()],
          from => integer(),
          to => integer()}.
%% Which events select/2, read/2 and a scope's `select' keep: name prefixes, nodes, pids and a time
%% window (µs, after clock correction); an absent key keeps everything.
%% <ul>
%% <li>`names' — name prefixes: [windtunnel] selects [windtunnel, compute]</li>
%% <li>`from' — time window, microseconds (after clock correction)</li>
%% </ul>

-type scope_options() ::
        #{nodes := [node()],
          collectors => [atom()],
          select => selection(),
          rate => number(),
          batch => pos_integer(),
          monitors => [monitor()],
          start => now | oldest,
          timeout => pos_integer(),
          clock_samples => pos_integer(),
          cursors => #{{node(), atom()} => terrain_events_ring:cursor()}}.
%% Options of start_scope/1 (and of read/2: `collectors', `select', `batch', `timeout',
%% `clock_samples', `cursors').
%% <ul>
%% <li>`nodes' — the event spaces to read</li>
%% <li>`collectors' — default [explicit]</li>
%% <li>`select' — default: everything</li>
%% <li>`rate' — reads per second (default 10)</li>
%% <li>`batch' — events per node and collector per read (default 1000)</li>
%% <li>`start' — read from now (default) or from the oldest kept event</li>
%% <li>`timeout' — ms: deadline of one read of all nodes (default 1000)</li>
%% <li>`clock_samples' — round trips per clock offset estimate (default 8)</li>
%% <li>`cursors' — read_all/2: where to start per node and collector (from cursors/2; default the
%%     oldest kept)</li>
%% </ul>

-type monitor() ::
        #{kind := load_imbalance | slow_pair | custom,
          options => map(),
          init => term(),
          handle => fun(([event()], term()) -> term()),
          report => fun((term()) -> term()),
          callback => fun((term()) -> any())}.
%% An online monitor of a scope: a built-in `kind' (`load_imbalance', `slow_pair') with its `options',
%% or `custom' with `init', `handle' and `report'; `callback' gets each report.
%% <ul>
%% <li>`options' — built-ins: see the module doc</li>
%% <li>`init' — custom: the first state</li>
%% <li>`handle' — custom</li>
%% <li>`report' — custom (default: the state)</li>
%% <li>`callback' — called with the report after each batch</li>
%% </ul>

-type scope_stats() :: #{reads := non_neg_integer(),
                         events := non_neg_integer(),
                         lost := non_neg_integer(),
                         failed := non_neg_integer(),
                         elapsed_ms := non_neg_integer(),
                         observation_rate := float(),
                         read_rate := float(),
                         offsets := #{node() => terrain_events_clock:offset()}}.
%% What a scope has done: read rounds, events observed, events lost and failed reads, rates, and the
%% clock offsets it uses.
%% <ul>
%% <li>`reads' — read rounds done</li>
%% <li>`events' — events observed (after selection)</li>
%% <li>`lost' — overwritten before this scope read them</li>
%% <li>`failed' — node reads that failed or missed the deadline</li>
%% <li>`observation_rate' — events observed per second</li>
%% <li>`read_rate' — read rounds per second</li>
%% </ul>

-type read_result() :: #{events := [event()],
                         offsets := #{node() => terrain_events_clock:offset()},
                         lost := non_neg_integer(),
                         failed := [{node(), term()}]}.
%% What read/2 returns: the events merged by corrected time, each node's clock offset, the events lost
%% and the nodes that failed.

-type aggregate_options() ::
        #{window_us := pos_integer(),
          field => atom()}.
%% Options of aggregate/2: the window width (µs) and the measurement to histogram (`field', default
%% `duration_us').
%% <ul>
%% <li>`window_us' — width of a window</li>
%% <li>`field' — measurement to histogram (default duration_us)</li>
%% </ul>

-type window() :: #{start_us := integer(),
                    counts := #{[atom()] => pos_integer()},
                    rates := #{[atom()] => float()},
                    histograms := #{[atom()] => #{non_neg_integer() => pos_integer()}}}.
%% One window of aggregate/2: counts, rates (events per second) and histograms per event name; bucket B
%% holds values in [2^(B-1), 2^B), bucket 0 those below 1.
%% <ul>
%% <li>`rates' — events per second</li>
%% <li>`histograms' — bucket B holds values in [2^(B-1), 2^B), bucket 0 the values below 1</li>
%% </ul>

-type trace_options() :: #{max_queue => pos_integer()}.
%% Options of trace/2: `max_queue' pauses tracing above this many queued trace messages.

%%--------------------------------------------------------------------
%% API: collectors

%% @doc Records an event in the `explicit' collector of this node, stamped now.
%% A no-op when `terrain_events' is not running.
-spec emit(EventName, Measurements, Metadata) -> ok when
      EventName :: [atom()], Measurements :: map(), Metadata :: map().
emit(EventName, Measurements, Metadata)
  when is_list(EventName), is_map(Measurements), is_map(Metadata) ->
    terrain_events_space:record(explicit, EventName, Measurements, Metadata).

%% @doc Records an event in the named collector (see {@link new_collector/2}).
-spec emit(Collector, EventName, Measurements, Metadata) -> ok when
      Collector :: atom(), EventName :: [atom()], Measurements :: map(), Metadata :: map().
emit(Collector, EventName, Measurements, Metadata)
  when is_atom(Collector), is_list(EventName), is_map(Measurements), is_map(Metadata) ->
    terrain_events_space:record(Collector, EventName, Measurements, Metadata).

%% @doc The paths collector: records that `Value' passed a communication path, as the
%% event `[paths, collect]' with measurement `value' in `Collector' (`paths' exists
%% on every node; others are made with {@link new_collector/2}). The `collect'
%% wrapper of terrain_paths calls this for each value; the value is stored as given,
%% so a path that carries large terms should collect a summary of them.
-spec collect(Collector :: atom(), Value :: term(), Metadata :: map()) -> ok.
collect(Collector, Value, Metadata) when is_atom(Collector), is_map(Metadata) ->
    terrain_events_space:record(Collector, [paths, collect], #{value => Value}, Metadata).

%% @doc Creates a collector (a ring of `Capacity' events) on this node.
-spec new_collector(atom(), pos_integer()) -> ok | {error, {exists, atom(), pos_integer()}}.
new_collector(Collector, Capacity) ->
    terrain_events_space:new_collector(Collector, Capacity).

%% @doc Deletes a collector of this node and the events it kept; `ok' also when there
%% is no such collector. Emitting to it afterwards records nothing.
-spec delete_collector(atom()) -> ok.
delete_collector(Collector) ->
    terrain_events_space:delete_collector(Collector).

%% @doc Starts the tracing collector for `Pids' (on any nodes): one tracer on each of
%% their nodes, each owned by the caller. Returns the tracers.
-spec trace([pid()], trace_options()) -> {ok, [pid()]} | {error, term()}.
trace(Pids, Options) when is_list(Pids), is_map(Options) ->
    ByNode = maps:groups_from_list(fun erlang:node/1, Pids),
    Started = [start_tracer(Node, NodePids, Options) || {Node, NodePids} <- maps:to_list(ByNode)],
    case [E || {error, _} = E <- Started] of
        [] -> {ok, [T || {ok, T} <- Started]};
        [Error | _] -> lists:foreach(fun stop_trace/1, [T || {ok, T} <- Started]), Error
    end.

start_tracer(Node, Pids, Options) when Node =:= node() ->
    terrain_events_tracer:start(Pids, Options, self());
start_tracer(Node, Pids, Options) ->
    try erpc:call(Node, terrain_events_tracer, start, [Pids, Options, self()], 5000) of
        {ok, _} = Ok -> Ok;
        {error, _} = Error -> Error
    catch
        error:{erpc, Why} -> {error, {trace, Node, Why}};
        error:{exception, Why, _} -> {error, {trace, Node, Why}}
    end.

%% @doc Stops a tracer after it has recorded what it had queued.
-spec stop_trace(pid()) -> #{recorded := non_neg_integer(), pauses := non_neg_integer()}.
stop_trace(Tracer) ->
    terrain_events_tracer:stop(Tracer).

%%--------------------------------------------------------------------
%% API: the event space

%% @doc Capacity, events written, dropped and memory of every collector of this node.
-spec info() -> #{atom() => terrain_events_space:info()}.
info() ->
    terrain_events_space:info().

%% @doc Where the nodes' collectors stand now: pass it as `read/2''s `cursors' to read
%% only the events written after this call (e.g. those of one run).
-spec cursors([node()], [atom()]) -> #{{node(), atom()} => term()}.
cursors(Nodes, Collectors) ->
    terrain_events_scope:cursors(Nodes, Collectors, 5000).

%% @doc Reads every event kept in the nodes' collectors, or written after `cursors'
%% (scope options `collectors', `select', `batch', `timeout', `clock_samples' and
%% `cursors' apply), merged by corrected time.
-spec read([node()], map()) -> {ok, read_result()} | {error, term()}.
read(Nodes, Options) ->
    terrain_events_scope:read_all(Nodes, Options).

%%--------------------------------------------------------------------
%% API: scopes and monitors

%% @doc Starts a scope owned by the caller (it stops when the caller exits).
-spec start_scope(scope_options()) -> {ok, pid()} | {error, term()}.
start_scope(Options) ->
    case terrain_events_scope:validate(Options) of
        {ok, Valid} -> terrain_events_scope:start(Valid, self());
        {error, _} = Error -> Error
    end.

%% @doc Reads once more, stops the scope, and returns its monitors' reports (in the
%% order of its `monitors') and its statistics.
-spec stop_scope(pid()) -> {[term()], scope_stats()}.
stop_scope(Scope) ->
    terrain_events_scope:stop(Scope).

%% @doc The current report of each of the scope's monitors, in the order of its
%% `monitors', while the scope keeps running.
-spec scope_reports(pid()) -> [term()].
scope_reports(Scope) ->
    terrain_events_scope:reports(Scope).

%% @doc The scope's statistics so far (reads, events observed and lost, failed
%% reads), while it keeps running.
-spec scope_stats(pid()) -> scope_stats().
scope_stats(Scope) ->
    terrain_events_scope:stats(Scope).

%% @doc Changes a running scope's `rate' and/or `batch'.
-spec configure_scope(pid(), #{rate => number(), batch => pos_integer()}) -> ok | {error, term()}.
configure_scope(Scope, Changes) ->
    terrain_events_scope:configure(Scope, Changes).

%% @doc `Node''s clock minus this node's, estimated from `Samples' round trips
%% (minimum round trip; the error is at most half of `rtt_us').
-spec clock_offset(node(), pos_integer()) ->
          {ok, #{offset_us := integer(), rtt_us := non_neg_integer()}} | {error, term()}.
clock_offset(Node, Samples) ->
    terrain_events_clock:estimate(Node, Samples, 5000).

%% @doc The events a selection keeps, in their order: name prefixes (`names'),
%% `nodes', `pids' and a time window (`from', `to', microseconds); keys absent select
%% everything. Raises `badarg' for a key or value that is not a selection's.
-spec select(selection(), [event()]) -> [event()].
select(Selection, Events) ->
    terrain_events_view:select(terrain_events_view:validate_selection(Selection), Events).

%% @doc Merges the events of several nodes by time, each node's corrected by its
%% offset (`#{Node => OffsetUs}').
-spec merge(#{node() => [event()]}, #{node() => integer()}) -> [event()].
merge(ByNode, Offsets) ->
    terrain_events_view:merge(ByNode, Offsets).

%% @doc Counts, rates and histograms per event name and time window.
-spec aggregate([event()], aggregate_options()) -> [window()].
aggregate(Events, Options) ->
    terrain_events_view:aggregate(Events, Options).

%%--------------------------------------------------------------------
%% API: files

%% @doc Writes events as JSON lines (`terrain.events/1') after a header line that
%% carries `Header''s keys (e.g. nodes, offsets).
-spec write_events(file:filename(), [event()], map()) -> ok | {error, term()}.
write_events(File, Events, Header) ->
    terrain_events_export:write_jsonl(File, Events, Header).

%% @doc Reads an events file: its header and its events (decoded JSON maps).
-spec read_events(file:filename()) -> {ok, map(), [map()]} | {error, term()}.
read_events(File) ->
    terrain_events_export:read_jsonl(File).

%% @doc Writes the Chrome trace-event JSON (Perfetto, chrome://tracing) of events
%% read by {@link read_events/1}.
-spec write_perfetto(file:filename(), [map()]) -> ok | {error, term()}.
write_perfetto(File, JsonEvents) ->
    terrain_events_export:write_perfetto(File, JsonEvents).

%%--------------------------------------------------------------------
%% API: errors

%% @doc A sentence for an error this application returns.
-spec format_error(term()) -> iolist().
format_error({scope_option, Key, Value}) ->
    io_lib:format("bad scope option ~ts: ~0tp", [Key, Value]);
format_error({exists, Collector, Capacity}) ->
    io_lib:format("collector ~ts exists already with capacity ~b", [Collector, Capacity]);
format_error({no_collector, Collector}) ->
    io_lib:format("no collector ~ts on this node", [Collector]);
format_error({clock, Node, Why}) ->
    io_lib:format("could not read the clock of ~ts: ~0tp", [Node, Why]);
format_error({trace, Node, Why}) ->
    io_lib:format("could not start a tracer on ~ts: ~0tp", [Node, Why]);
format_error({events_file, File, empty}) ->
    io_lib:format("~ts: empty events file", [File]);
format_error({events_file, File, not_events}) ->
    io_lib:format("~ts: not a terrain.events/1 file", [File]);
format_error({events_file, File, {line, N, Why}}) ->
    io_lib:format("~ts:~b: not an event (~0tp)", [File, N, Why]);
format_error({file, File, Why}) ->
    io_lib:format("~ts: ~ts", [File, file:format_error(Why)]);
format_error(Other) ->
    io_lib:format("~0tp", [Other]).
