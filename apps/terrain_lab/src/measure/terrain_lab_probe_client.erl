%% @private
%% @doc The probe's two processes on the probed nodes, and the protocol between them
%% and the controller (`terrain_lab_probe' for the sequential and concurrent rounds,
%% `terrain_lab_probe_tree' for the tree strategy).
%%
%% A <em>client</em> on node A starts its own <em>echo</em> on node B, warms up, sends
%% `{Ref, ready, Client}', waits for `{Ref, go, Budget}', runs its batches (sending
%% `{Ref, batch, Client}' after each) and ends with `{Ref, done, Client, Stats | none}'.
%% `{Ref, stop}' makes it report after its current exchange.
%%
%% The client connects to B first (trying again until the exchange deadline: a
%% connection attempt between the VMs of a cluster that is still forming its mesh can
%% fail once), then starts the echo with `erlang:spawn_request/5' and waits for its
%% reply: a node the client cannot reach is an error of the pair (`{echo_not_started,
%% B, Why}'), never `erlang:spawn/4''s `** Can not start ... **' warning with a dead
%% stand-in process.
%%
%% Every wait here and in the controllers goes through {@link wait_ms/2} and {@link
%% stall_ms/1}, which keep it within what `receive ... after' can hold.
-module(terrain_lab_probe_client).

%% API (the controllers)
-export([start/4,
         config/1,
         deadline/2,
         past/1,
         stall_ms/1,
         wait_ms/2,
         late/1]).

%% Internal exports (spawned on the probed nodes)
-export([client/4,
         echo/1]).
%% exports_not_used: echo/1 is started with erlang:spawn_request/5, which xref does not follow.
-ignore_xref([{echo, 1}]).

%% The longest `receive ... after' (2^32 - 1 ms, about 49.7 days).
-define(MAX_WAIT, 16#FFFFFFFF).
%% Between two attempts to connect to the echo's node.
-define(CONNECT_RETRY_MS, 200).

-type config() :: #{batches := pos_integer(), messages := pos_integer(), payload := non_neg_integer(),
                    warmup := non_neg_integer(), timeout := pos_integer(), precision := float() | none,
                    stop_in => pos_integer() | infinity}.  % ms until this client's share of the budget ends
-export_type([config/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Starts a client on `A' measuring against `B' for the calling controller,
%% monitored. Returns the monitor and the client.
-spec start(node(), node(), reference(), config()) -> {reference(), pid()}.
start(A, B, Ref, Config) ->
    Pid = spawn(A, ?MODULE, client, [self(), Ref, B, Config]),
    {erlang:monitor(process, Pid), Pid}.

%% @doc What a client needs of the probe's options.
-spec config(map()) -> config().
config(#{batches := B, messages := M, payload := P, warmup := W, timeout := T} = Opts) ->
    #{batches => B, messages => M, payload => P, warmup => W, timeout => T,
      precision => maps:get(precision, Opts, none)}.

%% @doc The monotonic time (ms) at which the probe's budget ends.
-spec deadline(integer(), map()) -> integer() | infinity.
deadline(T0, Opts) ->
    case maps:get(budget_ms, Opts) of
        infinity -> infinity;
        Budget -> T0 + Budget
    end.

%% @doc Is the deadline past?
-spec past(integer() | infinity) -> boolean().
past(infinity) -> false;
past(Deadline) -> erlang:monotonic_time(millisecond) >= Deadline.

%% @doc How long a client may stay silent before it counts as stalled: a whole batch
%% at the exchange deadline, plus 10 s.
-spec stall_ms(config() | map()) -> non_neg_integer().
stall_ms(#{messages := Messages, timeout := Timeout}) ->
    min(?MAX_WAIT, Messages * Timeout + 10000).

%% @doc How long to wait for the next report: until a client has stalled, or until
%% the end (plus the grace period) `EndAt', whichever comes first.
-spec wait_ms(non_neg_integer() | infinity, integer() | infinity) -> non_neg_integer() | infinity.
wait_ms(Stall, infinity) -> cap(Stall);
wait_ms(infinity, EndAt) -> cap(max(0, EndAt - erlang:monotonic_time(millisecond)));
wait_ms(Stall, EndAt) -> cap(max(0, min(Stall, EndAt - erlang:monotonic_time(millisecond)))).

%% @doc The error of a client that did not report in time: past the end it ran out
%% of budget (not measured), else it stalled.
-spec late(integer() | infinity) -> not_measured | stalled.
late(infinity) -> stalled;
late(EndAt) ->
    case erlang:monotonic_time(millisecond) >= EndAt of
        true -> not_measured;
        false -> stalled
    end.

cap(infinity) -> infinity;
cap(Ms) -> min(?MAX_WAIT, Ms).

%%--------------------------------------------------------------------
%% The client and the echo (on the probed nodes)

%% @doc A client on node A: starts its echo on `Target', warms up, reports ready,
%% waits for `go', runs the batches (reporting each) and reports its statistics.
-spec client(pid(), reference(), node(), config()) -> ok.
client(Controller, Ref, Target, #{batches := Batches, messages := Messages, payload := PayloadBytes,
                                  warmup := Warmup, timeout := Timeout} = Config) ->
    Start = erlang:monotonic_time(millisecond),
    %% the end of this client's share of the budget, on this node's clock
    StopAt = case maps:get(stop_in, Config, infinity) of
                 infinity -> infinity;
                 StopIn -> Start + StopIn
             end,
    ControllerMon = erlang:monitor(process, Controller),
    {Echo, EchoMon} = start_echo(Target, Timeout),
    Payload = binary:copy(<<0>>, PayloadBytes),
    Exchange = fun(Seq) -> exchange(Echo, EchoMon, Seq, Payload, Timeout) end,
    %% the warm-up takes at most a quarter of the share
    WarmupUntil = case StopAt of
                      infinity -> infinity;
                      _ -> Start + (StopAt - Start) div 4
                  end,
    warmup(1, Warmup, Exchange, WarmupUntil),
    Controller ! {Ref, ready, self()},
    Budget = receive
                 {Ref, go, B} -> B;
                 {'DOWN', ControllerMon, process, _, Why} -> exit({controller_down, Why})
             after stall_ms(Config) ->
                     exit(no_go)
             end,
    Until = case Budget of
                infinity -> StopAt;
                _ -> min(StopAt, erlang:monotonic_time(millisecond) + Budget)
            end,
    Precision = maps:get(precision, Config, none),
    Samples = batches(1, Batches, Messages, Exchange, Controller, Ref, Until, Precision, []),
    Stats = case Samples of
                [] -> none;
                _ -> stats(Samples, Messages)
            end,
    Controller ! {Ref, done, self(), Stats},
    ok.

%% The echo on `Target', monitored, once its node has said it runs. The connection to
%% `Target' is made first, and a failed attempt is tried again until `Timeout': the
%% nodes of a cluster that has just started are still connecting to each other (global's
%% full mesh, through the emulated links' proxies), and on a busy or cold machine an
%% attempt can fail where the next succeeds. A node that stays unreachable ends the
%% client with a reason that names it.
start_echo(Target, Timeout) ->
    case connect(Target, erlang:monotonic_time(millisecond) + Timeout) of
        true ->
            Request = erlang:spawn_request(Target, ?MODULE, echo, [self()], [monitor]),
            receive
                {spawn_reply, Request, ok, Echo} -> {Echo, Request};
                {spawn_reply, Request, error, Why} -> exit({echo_not_started, Target, Why})
            after Timeout ->
                    exit({echo_not_started, Target, timeout})
            end;
        false ->
            exit({echo_not_started, Target, noconnection})
    end.

connect(Target, Until) ->
    case lists:member(Target, nodes()) orelse net_kernel:connect_node(Target) of
        true ->
            true;
        _ ->
            case erlang:monotonic_time(millisecond) + ?CONNECT_RETRY_MS > Until of
                true -> false;
                false -> receive after ?CONNECT_RETRY_MS -> connect(Target, Until) end
            end
    end.

warmup(I, Warmup, Exchange, Until) when I =< Warmup ->
    case Until =/= infinity andalso erlang:monotonic_time(millisecond) >= Until of
        true -> ok;
        false -> _ = Exchange(-I), warmup(I + 1, Warmup, Exchange, Until)
    end;
warmup(_I, _Warmup, _Exchange, _Until) ->
    ok.

%% Batch after batch until `Max', the median is precise enough (checked after each
%% batch), the time is up or the controller says stop (checked after every exchange:
%% the last batch may be cut short, its exchanges kept).
batches(Batch, Max, _Messages, _Exchange, _Controller, _Ref, _Until, _Precision, Samples) when Batch > Max ->
    Samples;
batches(Batch, Max, Messages, Exchange, Controller, Ref, Until, Precision, Samples0) ->
    case batch(1, Messages, Batch * Messages, Exchange, Ref, Until, Samples0) of
        {cut, Samples} ->
            Samples;
        {full, Samples} ->
            Controller ! {Ref, batch, self()},
            case precise(Samples, Precision) of
                true -> Samples;
                false -> batches(Batch + 1, Max, Messages, Exchange, Controller, Ref, Until, Precision, Samples)
            end
    end.

batch(I, Messages, _Base, _Exchange, _Ref, _Until, Samples) when I > Messages ->
    {full, Samples};
batch(I, Messages, Base, Exchange, Ref, Until, Samples) ->
    Samples1 = [Exchange(Base + I) | Samples],
    Stop = receive {Ref, stop} -> true after 0 -> false end,
    case Stop orelse (Until =/= infinity andalso erlang:monotonic_time(millisecond) >= Until) of
        true -> {cut, Samples1};
        false -> batch(I + 1, Messages, Base, Exchange, Ref, Until, Samples1)
    end.

%% Is the 95% confidence interval of the median within +-Precision of it? The
%% distribution-free interval between the order statistics n/2 -+ 1.96 sqrt(n)/2.
precise(_Samples, none) ->
    false;
precise(Samples, Precision) ->
    N = length(Samples),
    Half = 1.96 * math:sqrt(N) / 2,
    Lo = floor(N / 2 - Half),
    Hi = ceil(N / 2 + Half) + 1,
    case Lo >= 1 andalso Hi =< N of
        false ->
            false;
        true ->
            T = list_to_tuple(lists:sort(Samples)),
            Median = quantile(T, 0.5),
            Median > 0 andalso element(Hi, T) - element(Lo, T) =< 2 * Precision * Median
    end.

%% One timed exchange in µs; exits on a timeout or when the echo is gone.
exchange(Echo, EchoMon, Seq, Payload, Timeout) ->
    T0 = erlang:monotonic_time(),
    Echo ! {ping, self(), Seq, Payload},
    receive
        {pong, Echo, Seq, _} ->
            erlang:convert_time_unit(erlang:monotonic_time() - T0, native, nanosecond) / 1000;
        {'DOWN', EchoMon, process, _, Why} ->
            exit({echo_down, Why})
    after Timeout ->
            exit({timeout, Seq})
    end.

%% @doc The echo: answers every ping of its client, and ends with it.
-spec echo(pid()) -> ok.
echo(Client) ->
    Mon = erlang:monitor(process, Client),
    echo_loop(Client, Mon).

echo_loop(Client, Mon) ->
    receive
        {ping, Client, Seq, Payload} ->
            Client ! {pong, self(), Seq, Payload},
            echo_loop(Client, Mon);
        {'DOWN', Mon, process, _, _} ->
            ok
    end.

stats(Samples, Messages) ->
    Sorted = lists:sort(Samples),
    N = length(Sorted),
    T = list_to_tuple(Sorted),
    Mean = lists:sum(Sorted) / N,
    Var = case N of
              1 -> 0.0;
              _ -> lists:sum([(X - Mean) * (X - Mean) || X <- Sorted]) / (N - 1)
          end,
    #{min => element(1, T), median => quantile(T, 0.5), mean => Mean, p95 => quantile(T, 0.95),
      stddev => math:sqrt(Var), exchanges => N, batches => N div Messages}.

%% Linear interpolation between order statistics (numpy's default).
quantile(T, Q) ->
    Pos = Q * (tuple_size(T) - 1),
    Lo = floor(Pos),
    Frac = Pos - Lo,
    case Lo + 1 >= tuple_size(T) of
        true -> element(tuple_size(T), T);
        false -> element(Lo + 1, T) + Frac * (element(Lo + 2, T) - element(Lo + 1, T))
    end.
