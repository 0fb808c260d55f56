%% @private
%% @doc Monitors: online consumers of a scope's events. A scope feeds every batch it
%% reads to each of its monitors (`handle/2') and then calls the monitor's
%% `callback' with its report, which is where a monitor acts on the application.
%%
%% Two are built in. `load_imbalance': per worker (metadata key `worker'), the time
%% spent computing (events named `compute', default `[windtunnel, compute]') against
%% the time spent waiting (events named in `wait', default `[[windtunnel, read]]'),
%% both from the measurement `duration_us'. `slow_pair': send and receive events
%% (default `[windtunnel, send]' and `[windtunnel, receive]') paired by the metadata
%% key `message', the latency of each pair on the merged (clock-corrected) timeline,
%% per pair of nodes. A receive event is recorded when the application takes the
%% message, so a pair's latency is the link's delay plus however late the receiver
%% came to read it; pairs are ranked by their 10th percentile, the delay of messages
%% whose receiver was already waiting, which is the link's own (the median and mean
%% include the receivers' lateness). A `custom' monitor brings its own `init', `handle' and `report'.
-module(terrain_events_monitor).

%% API
-export([new/1,
         handle/2,
         report/1,
         notify/1]).

-export_type([monitor/0, state/0]).

-type monitor() :: terrain_events:monitor().

-opaque state() :: {monitor(), term()}.

-define(SAMPLES, 1024).
-define(MAX_PENDING, 100000).

%% @doc A monitor's initial state; `badarg' for a malformed monitor.
-spec new(monitor()) -> state().
new(#{kind := load_imbalance} = M) ->
    Options = maps:get(options, M, #{}),
    {M#{options => maps:merge(#{compute => [windtunnel, compute], wait => [[windtunnel, read]],
                                key => worker, field => duration_us}, Options)}, #{}};
new(#{kind := slow_pair} = M) ->
    Options = maps:get(options, M, #{}),
    {M#{options => maps:merge(#{send => [windtunnel, send], 'receive' => [windtunnel, 'receive'],
                                key => message}, Options)},
     #{pending => #{}, pairs => #{}, unpaired => 0}};
new(#{kind := custom, handle := Handle} = M) when is_function(Handle, 2) ->
    {M, maps:get(init, M, undefined)};
new(Monitor) ->
    error(badarg, [Monitor]).

%% @doc Feeds a batch of events (in merged time order) to the monitor.
-spec handle([terrain_events_view:event()], state()) -> state().
handle([], State) ->
    State;
handle(Events, {#{kind := load_imbalance, options := O} = M, Workers}) ->
    #{compute := Compute, wait := Wait, key := Key, field := Field} = O,
    {M, lists:foldl(fun(#{name := Name, measurements := #{Field := D}, metadata := #{Key := W}}, Acc)
                          when is_number(D) ->
                            case Name =:= Compute of
                                true -> add(W, D, 0, Acc);
                                false -> case lists:member(Name, Wait) of
                                             true -> add(W, 0, D, Acc);
                                             false -> Acc
                                         end
                            end;
                       (_, Acc) -> Acc
                    end, Workers, Events)};
handle(Events, {#{kind := slow_pair, options := O} = M, S}) ->
    #{send := Send, 'receive' := Receive, key := Key} = O,
    {M, lists:foldl(fun(#{name := Name, metadata := #{Key := Id}, node := Node, time := T}, Acc) ->
                            if Name =:= Send -> pair(Id, send, Node, T, Acc);
                               Name =:= Receive -> pair(Id, 'receive', Node, T, Acc);
                               true -> Acc
                            end;
                       (_, Acc) -> Acc
                    end, S, Events)};
handle(Events, {#{kind := custom, handle := Handle} = M, S}) ->
    {M, Handle(Events, S)}.

add(Worker, Compute, Wait, Acc) ->
    {C, W} = maps:get(Worker, Acc, {0, 0}),
    Acc#{Worker => {C + Compute, W + Wait}}.

pair(Id, Side, Node, T, #{pending := Pending, pairs := Pairs, unpaired := Unpaired} = S) ->
    case maps:take(Id, Pending) of
        {{Other, OtherNode, OtherT}, Rest} when Other =/= Side ->
            {From, To, Latency} = case Side of
                                      'receive' -> {OtherNode, Node, T - OtherT};
                                      send -> {Node, OtherNode, OtherT - T}
                                  end,
            S#{pending := Rest, pairs := maps:update_with({From, To}, fun(P) -> sample(Latency, P) end,
                                                          sample(Latency, {0, 0, Latency, []}), Pairs)};
        _ when map_size(Pending) >= ?MAX_PENDING ->
            %% bounded: forget the unmatched halves rather than grow
            S#{pending := #{Id => {Side, Node, T}}, unpaired := Unpaired + map_size(Pending)};
        _ ->
            S#{pending := Pending#{Id => {Side, Node, T}}}
    end.

sample(L, {N, Sum, Max, Samples}) ->
    Kept = case length(Samples) >= 2 * ?SAMPLES of
               true -> lists:sublist(Samples, ?SAMPLES);
               false -> Samples
           end,
    {N + 1, Sum + L, max(Max, L), [L | Kept]}.

%% @doc The monitor's findings so far.
-spec report(state()) -> term().
report({#{kind := load_imbalance}, Workers}) ->
    PerWorker = maps:map(fun(_, {C, W}) ->
                                 #{compute_us => C, wait_us => W,
                                   compute_share => case C + W of 0 -> 0.0; T -> C / T end}
                         end, Workers),
    Shares = [{1 - S, W} || {W, #{compute_share := S}} <- maps:to_list(PerWorker)],
    case Shares of
        [] ->
            #{kind => load_imbalance, workers => #{}, most_waiting => none, max_wait_share => 0.0,
              mean_wait_share => 0.0, min_wait_share => 0.0};
        _ ->
            {MaxShare, Worst} = lists:max(Shares),
            {MinShare, _} = lists:min(Shares),
            #{kind => load_imbalance, workers => PerWorker, most_waiting => Worst, max_wait_share => MaxShare,
              min_wait_share => MinShare, mean_wait_share => lists:sum([S || {S, _} <- Shares]) / length(Shares)}
    end;
report({#{kind := slow_pair}, #{pairs := Pairs, pending := Pending, unpaired := Unpaired}}) ->
    Rows = lists:sort(fun(#{p10_us := A}, #{p10_us := B}) -> A >= B end,
                      [#{from => From, to => To, count => N, mean_us => Sum / N, max_us => Max,
                         median_us => percentile(Samples, 0.5), p10_us => percentile(Samples, 0.1)}
                       || {{From, To}, {N, Sum, Max, Samples}} <- maps:to_list(Pairs)]),
    #{kind => slow_pair, pairs => Rows, unpaired => Unpaired + map_size(Pending),
      slowest => case Rows of [#{from := F, to := T} | _] -> {F, T}; [] -> none end};
report({#{kind := custom} = M, S}) ->
    (maps:get(report, M, fun(X) -> X end))(S).

%% The nearest-rank percentile of the kept samples.
percentile(Samples, P) ->
    Sorted = lists:sort(Samples),
    lists:nth(max(1, ceil(P * length(Sorted))), Sorted).

%% @doc Calls the monitor's callback with its report (nothing without a callback).
-spec notify(state()) -> ok.
notify({#{callback := Callback}, _} = State) ->
    _ = Callback(report(State)),
    ok;
notify(_State) ->
    ok.
