%% @private
%% @doc The tracing collector: records the sends and receives of chosen processes of
%% this node into the `trace' collector, for code that cannot be changed.
%%
%% One tracer process per call of `terrain_events:trace/2' on a node: it turns on
%% `send' and `receive' tracing of its processes with itself as the tracer and
%% monotonic trace timestamps, and writes one event per trace message, stamped with
%% the trace's time: `[trace, send]' with metadata `to'
%% and `[trace, receive]'. The emitting processes only pay the runtime's cost of
%% generating the trace message; the copy into the ring happens in the tracer. The
%% tracer's queue is the one place that could grow under a burst, so it is watched:
%% above `max_queue' messages the tracer turns tracing off until it has caught up,
%% and counts the pauses. Tracing stops when the tracer stops or its owner exits.
-module(terrain_events_tracer).

%% API
-export([start/3,
         start_link/3,
         stop/1]).

%% Internal exports (proc_lib)
-export([init/4]).

%% exports_not_used: start_link/3 is the child spec of terrain_events_tracer_sup; init/4 is
%% proc_lib's entry.
-ignore_xref([{start_link, 3}, {init, 4}]).

-export_type([options/0]).

-type options() :: terrain_events:trace_options().

-define(FLAGS, [send, 'receive', monotonic_timestamp]).

%% @doc Starts a tracer of `Pids' (all on this node) under the tracer supervisor,
%% owned by `Owner' (any node): it stops when the owner exits.
-spec start([pid()], options(), pid()) -> {ok, pid()} | {error, term()}.
start(Pids, Options, Owner) ->
    supervisor:start_child(terrain_events_tracer_sup, [Pids, Options, Owner]).

-spec start_link([pid()], options(), pid()) -> {ok, pid()} | {error, term()}.
start_link(Pids, Options, Owner) ->
    proc_lib:start_link(?MODULE, init, [Pids, Options, Owner, self()]).

%% @doc Turns tracing off, stops the tracer once it has recorded what it had queued,
%% and returns its statistics.
-spec stop(pid()) -> #{recorded := non_neg_integer(), pauses := non_neg_integer()}.
stop(Tracer) ->
    call(Tracer, stop).

call(Tracer, Request) ->
    Ref = monitor(process, Tracer),
    Tracer ! {Request, self(), Ref},
    receive
        {Ref, Reply} -> demonitor(Ref, [flush]), Reply;
        {'DOWN', Ref, process, _, Reason} -> exit({Reason, {?MODULE, Request, [Tracer]}})
    after 10000 ->
        demonitor(Ref, [flush]),
        exit({timeout, {?MODULE, Request, [Tracer]}})
    end.

%%--------------------------------------------------------------------
%% The tracer process

-spec init([pid()], options(), pid(), pid()) -> no_return().
init(Pids, Options, Owner, Parent) ->
    case terrain_events_space:ring(trace) of
        undefined ->
            proc_lib:init_ack(Parent, {error, {no_collector, trace}}),
            exit(normal);
        Ring ->
            Traced = [P || P <- Pids, trace(P, true) =:= 1],
            proc_lib:init_ack(Parent, {ok, self()}),
            OwnerRef = monitor(process, Owner),
            loop(#{ring => Ring, traced => Traced, owner => OwnerRef, paused => false,
                   max_queue => maps:get(max_queue, Options, 100000), recorded => 0, pauses => 0})
    end.

trace(Pid, How) ->
    try erlang:trace(Pid, How, [{tracer, self()} || How] ++ ?FLAGS)
    catch error:badarg -> 0   % gone already
    end.

loop(#{ring := Ring, recorded := N} = S) ->
    receive
        {trace_ts, Pid, send, _Message, To, Ts} ->
            true = terrain_events_ring:write(Ring, Ts, [trace, send], #{}, #{to => To}, Pid),
            loop(check(S#{recorded := N + 1}));
        {trace_ts, Pid, send_to_non_existing_process, _Message, To, Ts} ->
            true = terrain_events_ring:write(Ring, Ts, [trace, send], #{}, #{to => To, exists => false}, Pid),
            loop(check(S#{recorded := N + 1}));
        {trace_ts, Pid, 'receive', _Message, Ts} ->
            true = terrain_events_ring:write(Ring, Ts, [trace, 'receive'], #{}, #{}, Pid),
            loop(check(S#{recorded := N + 1}));
        {stats, From, Ref} ->
            From ! {Ref, maps:with([recorded, pauses], S)},
            loop(S);
        {stop, From, Ref} ->
            Final = finish(S),
            From ! {Ref, maps:with([recorded, pauses], Final)},
            exit(normal);
        {'DOWN', Ref, process, _, _} when Ref =:= map_get(owner, S) ->
            _ = finish(S),
            exit(normal);
        _Other ->
            loop(S)
    end.

%% Every 1024 messages: pause above max_queue, resume once the queue is short.
check(#{recorded := N} = S) when N band 1023 =/= 0 ->
    S;
check(#{paused := Paused, max_queue := Max, traced := Traced, pauses := Pauses} = S) ->
    {message_queue_len, Len} = process_info(self(), message_queue_len),
    if not Paused, Len > Max ->
            [trace(P, false) || P <- Traced],
            S#{paused := true, pauses := Pauses + 1};
       Paused, Len < Max div 10 ->
            [trace(P, true) || P <- Traced],
            S#{paused := false};
       true ->
            S
    end.

%% Tracing off, then what is queued recorded.
finish(#{traced := Traced} = S) ->
    [trace(P, false) || P <- Traced],
    drain(S).

drain(#{ring := Ring, recorded := N} = S) ->
    receive
        {trace_ts, Pid, send, _Message, To, Ts} ->
            true = terrain_events_ring:write(Ring, Ts, [trace, send], #{}, #{to => To}, Pid),
            drain(S#{recorded := N + 1});
        {trace_ts, Pid, 'receive', _Message, Ts} ->
            true = terrain_events_ring:write(Ring, Ts, [trace, 'receive'], #{}, #{}, Pid),
            drain(S#{recorded := N + 1})
    after 0 ->
        S
    end.
