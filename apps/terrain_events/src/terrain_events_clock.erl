%% @private
%% @doc Clock offsets between this node and others, estimated from round trips.
%%
%% Each sample asks the other node for its system time between two readings of ours
%% (`T0', `Remote', `T1'). If the request and the answer take equally long, the
%% other clock read `Remote' at our `(T0 + T1) / 2', so its offset is
%% `Remote - (T0 + T1) / 2', with an error of at most half the round trip
%% `T1 - T0' whatever the asymmetry. The sample with the shortest round trip bounds
%% the error best, and that is the estimate (the minimum-delay filter of NTP).
-module(terrain_events_clock).

%% API
-export([estimate/3,
         from_samples/1]).

%% exports_not_used: from_samples/1 is checked on its own by terrain_events_view_tests and prop_events.
-ignore_xref([{from_samples, 1}]).

-export_type([offset/0, sample/0]).

%% offset_us: the other clock minus ours; subtract it from the other node's times.
%% rtt_us: the round trip of the sample used; the error is at most half of it.
-type offset() :: #{offset_us := integer(), rtt_us := non_neg_integer()}.
-type sample() :: {T0 :: integer(), Remote :: integer(), T1 :: integer()}.

%% @doc Estimates `Node''s clock offset from `Samples' round trips, each under
%% `Timeout' milliseconds. This node's offset is zero.
-spec estimate(node(), pos_integer(), timeout()) -> {ok, offset()} | {error, term()}.
estimate(Node, _Samples, _Timeout) when Node =:= node() ->
    {ok, #{offset_us => 0, rtt_us => 0}};
estimate(Node, Samples, Timeout) ->
    try
        {ok, from_samples([sample(Node, Timeout) || _ <- lists:seq(1, Samples)])}
    catch
        error:{erpc, Reason} -> {error, {clock, Node, Reason}};
        error:{exception, Reason, _} -> {error, {clock, Node, Reason}}
    end.

sample(Node, Timeout) ->
    T0 = erlang:system_time(microsecond),
    Remote = erpc:call(Node, erlang, system_time, [microsecond], Timeout),
    T1 = erlang:system_time(microsecond),
    {T0, Remote, T1}.

%% @doc The estimate from a non-empty list of samples: the offset of the sample with
%% the shortest round trip.
-spec from_samples([sample(), ...]) -> offset().
from_samples([_ | _] = Samples) ->
    [{Rtt, T0, Remote, T1} | _] = lists:sort([{T1 - T0, T0, Remote, T1} || {T0, Remote, T1} <- Samples]),
    #{offset_us => Remote - (T0 + T1) div 2, rtt_us => max(0, Rtt)}.
