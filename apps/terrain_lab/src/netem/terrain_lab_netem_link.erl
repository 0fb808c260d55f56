%% @private
%% @doc The model of one direction of an emulated link: when does a chunk of bytes
%% that arrived at the proxy leave it? Pure functions, no processes.
%%
%% A direction is a FIFO wire with a serialisation rate (the link's `bandwidth') and a
%% propagation delay (`latency' with `jitter'). For a chunk of `Bytes' that arrives at
%% time `Arrival':
%% ```
%% Start  = max(Arrival, FreeAt)              the wire is busy until FreeAt
%% End    = Start + Bytes / bandwidth          serialisation (0 without a bandwidth)
%% Delay  = latency + (2U - 1) * jitter        U uniform in [0, 1); truncated at 0
%% Due    = max(End + Delay, PreviousDue)      never before the chunk in front of it
%% FreeAt = End
%% '''
%% Jitter is therefore uniform on `[latency - jitter, latency + jitter]' (mean
%% `latency', as `tc netem delay L J' without a distribution table), truncated at 0
%% when `jitter > latency'. Bytes are never reordered: a chunk whose sampled delay
%% would let it overtake the one in front leaves right after it, which is what an
%% application sees over a jittery network with TCP (the receiver holds back bytes
%% until the gap before them is filled). On a sparse stream (request and reply) every
%% chunk gets its own sample; on a dense stream delays are the running maximum.
%%
%% Times are integers in nanoseconds (`erlang:monotonic_time(nanosecond)'), so that
%% the serialisation of small chunks at high rates does not round away: 100 bytes at
%% 1 GB/s take 100 ns.
-module(terrain_lab_netem_link).

%% API
-export([new/1,
         new_direction/0,
         schedule/5,
         delay/2,
         serialisation/2,
         window/1]).

%% exports_not_used: The link model, checked on its own by terrain_lab_netem_tests.
-ignore_xref([{delay, 2}, {serialisation, 2}]).

-export_type([link/0, direction/0]).

-type link() ::
        #{latency := non_neg_integer(),          % one-way delay, ns
          jitter := non_neg_integer(),           % half-width of the uniform delay, ns
          bandwidth := pos_integer() | infinity}. % bytes/s

-type direction() ::
        #{free_at := integer() | undefined,     % ns: when the wire is free again
          last_due := integer() | undefined}.   % ns: when the previous chunk leaves

%% Bytes a direction may hold before the proxy stops reading from its source (the
%% emulated TCP window). Unthrottled: 8 MiB, enough for 400 MB/s at 20 ms one way.
%% Throttled: a quarter second of the bandwidth on top of what is in flight during
%% the largest delay, at least 1 MiB; more would only add queueing delay.
-define(UNTHROTTLED_WINDOW, 8 * 1024 * 1024).
-define(MIN_WINDOW, 1024 * 1024).

%%--------------------------------------------------------------------
%% API

%% @doc A link from the spec's link options (µs, bytes/s).
-spec new(terrain_lab_spec:link_options()) -> link().
new(Options) ->
    #{latency => 1000 * maps:get(latency, Options, 0),
      jitter => 1000 * maps:get(jitter, Options, 0),
      bandwidth => maps:get(bandwidth, Options, infinity)}.

%% @doc A direction that has carried nothing yet.
-spec new_direction() -> direction().
new_direction() ->
    #{free_at => undefined, last_due => undefined}.

%% @doc When a chunk of `Bytes' that arrived at `Arrival' (ns) leaves, given a
%% uniform sample `U' in [0, 1) for its jitter; and the direction after it.
-spec schedule(Arrival :: integer(), Bytes :: non_neg_integer(), U :: float(), link(), direction()) ->
          {Due :: integer(), direction()}.
schedule(Arrival, Bytes, U, #{bandwidth := Bandwidth} = Link, #{free_at := FreeAt, last_due := LastDue}) ->
    Start = later(Arrival, FreeAt),
    End = Start + serialisation(Bytes, Bandwidth),
    Due = later(End + delay(U, Link), LastDue),
    {Due, #{free_at => End, last_due => Due}}.

%% @doc The propagation delay (ns) for the uniform sample `U' in [0, 1).
-spec delay(U :: float(), link()) -> non_neg_integer().
delay(_U, #{latency := Latency, jitter := 0}) ->
    Latency;
delay(U, #{latency := Latency, jitter := Jitter}) ->
    max(0, Latency + round((2 * U - 1) * Jitter)).

%% @doc The time (ns) that `Bytes' take on a wire of `Bandwidth' bytes/s.
-spec serialisation(Bytes :: non_neg_integer(), Bandwidth :: pos_integer() | infinity) -> non_neg_integer().
serialisation(_Bytes, infinity) ->
    0;
serialisation(Bytes, Bandwidth) ->
    Bytes * 1000000000 div Bandwidth.

%% @doc How many bytes a direction may queue before its source is paused.
-spec window(link()) -> pos_integer().
window(#{bandwidth := infinity}) ->
    ?UNTHROTTLED_WINDOW;
window(#{bandwidth := Bandwidth, latency := Latency, jitter := Jitter}) ->
    max(?MIN_WINDOW, Bandwidth div 4 + Bandwidth * (Latency + Jitter) div 1000000000).

%%--------------------------------------------------------------------
%% Internal functions

later(Time, undefined) -> Time;
later(Time, Other) -> max(Time, Other).
