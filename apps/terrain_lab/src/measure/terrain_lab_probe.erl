%% @private
%% @doc `terrain probe': all-pairs round-trip times between Erlang nodes (RELEASE D3.5,
%% §4.3.1 and §4.4).
%%
%% == Method ==
%% For every ordered pair (A, B) a <em>client</em> process on A exchanges messages with
%% its own <em>echo</em> process on B, which replies at once (RELEASE D3.5's server; one per
%% client so that clients never queue behind each other at the server). After
%% `warmup' unrecorded exchanges (connection set-up, code loading, caches), the client
%% runs `batches' batches of `messages' exchanges, each a `{ping, Client, Seq,
%% Payload}' answered by `{pong, Echo, Seq, Payload}' with a payload of
%% `payload_bytes' bytes, and times every exchange with the monotonic clock.
%% RELEASE D3.5's figure per pair, the mean time of 100 batches of 100 exchanges, is the
%% `mean' here.
%%
%% Strategies (RELEASE D3.5's two):
%% <ul>
%% <li>`sequential' (strategy 1, the default): one source node at a time runs its
%%     clients to all other nodes at once; then the next source. Little traffic: it
%%     measures the network rather than the load the probe itself creates.</li>
%% <li>`concurrent' (strategy 2): every pair at once; the clients start their batches
%%     together after all have warmed up. High traffic, which made the hierarchy
%%     visible on RELEASE D3.5's Athos cluster; on a small machine running many nodes
%%     the contention for CPU dominates.</li>
%% </ul>
%%
%% Per pair the client reports, over all its recorded exchanges, the minimum, median,
%% mean, 95th percentile (linear interpolation between order statistics) and sample
%% standard deviation in µs. `latency.json' (docs/DESIGN.md, format `terrain.latency/1')
%% holds each as an n × n matrix, row = the client's node (source), column = the echo's
%% node; the diagonal is 0 (a node is not probed against itself) and a failed pair is
%% `null'. `latency.csv' has one row per ordered pair.
%%
%% Every exchange has a deadline (`timeout', default 5 s); a pair whose exchange times
%% out or whose node goes down fails alone and the others go on. The controller gives up
%% when no client has reported for `messages' × `timeout' + 10 s.
%%
%% == Adaptive batches and a time budget ==
%% With `precision' P (e.g. 0.05) a client stops after the batch at which the 95%
%% confidence interval of its median is within ±P of the median (the distribution-free
%% interval between the order statistics n/2 ∓ 1.96·√n/2), and at the latest after
%% `batches' batches. With `budget_ms' the whole probe gets that much time: each round
%% (a source node in `sequential', everything in `concurrent') gets an equal share of
%% what is left, and its clients stop measuring when their share is spent (after one
%% batch at least). `terrain probe' uses both by default (±5%, 60 s); `precision'
%% `none' and `budget_ms' `infinity' give the fixed `batches' × `messages' of RELEASE D3.5.
%%
%% == ETA ==
%% Progress reports an ETA from the measured time of whole rounds: the mean duration of
%% the rounds finished so far times the rounds left, plus what the current round still
%% needs; before the first round has finished, from the current round's progress
%% (batches done, or time spent of its budget). With a budget, never more than the
%% budget left.
%%
%% == Partial results ==
%% After each round (after the first at once, later at most every 5 s) `checkpoint'
%% (when given) receives the result so far, marked `partial', so an interrupted probe
%% leaves what it measured on disk (`terrain_lab_probe_files:write/3'). A message
%% `{terrain_lab_probe, interrupt}' to the process running {@link probe/2} stops the
%% probe: its clients report what they have measured after their current batch, pairs
%% without a batch are `{error, interrupted}', and the result is `partial'.
%%
%% == Modules ==
%% This module validates the options, checks the nodes and runs the rounds of the
%% sequential and concurrent strategies; `terrain_lab_probe_tree' runs the tree
%% strategy, `terrain_lab_probe_client' is the client and echo on the probed nodes,
%% and `terrain_lab_probe_files' writes the files.
%%
%% == Limits ==
%% Every numeric option has a range ({@link limit/1}) that the whole computation can
%% hold: a budget, a batch at the exchange deadline and the waits built from them stay
%% within what `receive ... after' and `erpc' accept (2^32 - 1 ms), so no value that
%% passes validation crashes the probe later on a node.
-module(terrain_lab_probe).

%% API
-export([probe/2,
         validate_options/1,
         limit/1,
         format_error/1]).

-export_type([options/0, result/0]).

-define(CLIENT, terrain_lab_probe_client).
-define(CALL_TIMEOUT, 10000).
-define(GRACE_MS, 2000).      % after the deadline: clients report what they have
-define(CHECKPOINT_MS, 5000).   % at most one checkpoint file set per 5 s
%% The largest value of each numeric option (the smallest is 1, or 0 for payload and
%% warmup): a budget of 30 days and an exchange deadline of an hour keep every wait
%% below 2^32 - 1 ms; a million exchanges per batch and 100,000 batches per pair are
%% far beyond RELEASE D3.5's 100 x 100 (the CLI's resource guard checks their memory).
-define(LIMITS, #{batches => 100000, messages => 1000000, payload => 64 * 1024 * 1024, warmup => 1000000,
                  timeout => 3600000, wave => 100000, budget_ms => 30 * 24 * 3600 * 1000}).

-type options() ::
        #{batches => pos_integer(),            % batches per pair (default 100)
          messages => pos_integer(),           % exchanges per batch (default 100)
          payload => non_neg_integer(),        % payload bytes per message (default 0)
          strategy => sequential | concurrent | tree, % default sequential
          insert => terrain:insert_options(),  % tree: options of every insertion (default #{})
          wave => pos_integer(),               % tree: most nodes placed at once (default 4)
          statistic => min | median | mean | p95, % tree: the per-pair statistic insertion uses (default min)
          warmup => non_neg_integer(),         % unrecorded exchanges first (default: messages)
          timeout => pos_integer(),            % ms deadline of one exchange (default 5000)
          progress => fun((progress()) -> any()) | none, % called at most once a second
          precision => float() | none,         % stop a pair at a median CI of +-precision (default none)
          budget_ms => pos_integer() | infinity, % time for the whole probe (default infinity)
          checkpoint => fun((result()) -> any()) | none}. % the partial result after each round

-type progress() :: #{done := non_neg_integer(),   % batches finished, all pairs
                      total := pos_integer(),
                      elapsed_ms := non_neg_integer(),
                      eta_ms := non_neg_integer() | unknown}.

-type stats() :: #{min := float(), median := float(), mean := float(), p95 := float(), stddev := float(),
                   exchanges := pos_integer(), batches := pos_integer()}.

-type result() :: #{nodes := [node()],
                    options := options(),
                    started_at := binary(),
                    finished_at := binary(),
                    duration_ms := non_neg_integer(),
                    partial := boolean(),      % not every pair was measured (budget, interrupt, checkpoint)
                    ended_by => complete | budget | interrupt | running,
                    pairs := #{{node(), node()} => {ok, stats()} | {error, term()}},
                    %% the tree strategy only:
                    topology => terrain:topology_tree(),
                    unplaced => [node()],
                    reinserted => non_neg_integer(),
                    waves => non_neg_integer()}.

-define(DEFAULTS, #{batches => 100, messages => 100, payload => 0, strategy => sequential, timeout => 5000,
                    progress => none, precision => none, budget_ms => infinity, checkpoint => none}).

%%--------------------------------------------------------------------
%% API

%% @doc Validates options and fills in the defaults.
-spec validate_options(term()) -> {ok, options()} | {error, {probe, term()}}.
validate_options(Options) when is_map(Options) ->
    try
        maps:foreach(fun check/2, Options),
        Full = maps:merge(?DEFAULTS, Options),
        {ok, maps:merge(#{warmup => maps:get(messages, Full)}, Full)}
    catch
        throw:Reason -> {error, {probe, Reason}}
    end;
validate_options(Options) ->
    {error, {probe, {bad_options, Options}}}.

check(Key, V) when is_map_key(Key, ?LIMITS), is_integer(V), V =< map_get(Key, ?LIMITS),
                   V >= 1 orelse (V >= 0 andalso (Key =:= payload orelse Key =:= warmup)) -> ok;
check(strategy, V) when V =:= sequential; V =:= concurrent; V =:= tree -> ok;
check(insert, V) when is_map(V) -> ok;
check(statistic, V) when V =:= min; V =:= median; V =:= mean; V =:= p95 -> ok;
check(progress, V) when V =:= none; is_function(V, 1) -> ok;
check(precision, V) when V =:= none; is_float(V), V > 0, V < 1 -> ok;
check(budget_ms, infinity) -> ok;
check(checkpoint, V) when V =:= none; is_function(V, 1) -> ok;
check(Key, Value) ->
    case maps:is_key(Key, ?DEFAULTS) orelse maps:is_key(Key, ?LIMITS) orelse Key =:= statistic
        orelse Key =:= insert of
        true -> throw({bad_option, Key, Value});
        false -> throw({unknown_option, Key})
    end.

%% @doc The largest value of a numeric option (`batches', `messages', `payload',
%% `warmup', `timeout', `wave', `budget_ms').
-spec limit(atom()) -> pos_integer().
limit(Key) ->
    maps:get(Key, ?LIMITS).

%% @doc Probes every ordered pair of `Nodes' (at least two, all running terrain_lab's
%% code). Returns when every pair has finished or failed.
-spec probe([node()], options()) -> {ok, result()} | {error, {probe, term()}}.
probe(Nodes, Options) ->
    terrain_lab_steps:run([fun validate_options/1,
                           fun(Opts) -> check_nodes(lists:usort(Nodes), Nodes, maps:get(timeout, Opts)) end,
                           fun(Opts) -> {ok, measure(Nodes, Opts)} end],
                          Options).

%% @doc A sentence for the errors of the probe.
-spec format_error({probe, term()}) -> iolist().
format_error({probe, {bad_option, strategy, V}}) ->
    io_lib:format("--strategy ~0tp: expected sequential, concurrent or tree", [V]);
format_error({probe, {bad_option, Key, V}}) ->
    io_lib:format("bad value for ~s: ~0tp (expected ~s)", [Key, V, expected(Key)]);
format_error({probe, {unknown_option, Key}}) ->
    io_lib:format("unknown probe option ~0tp", [Key]);
format_error({probe, {bad_options, Options}}) ->
    io_lib:format("probe options must be a map, got ~0tP", [Options, 8]);
format_error({probe, too_few_nodes}) ->
    "at least two nodes are needed to probe";
format_error({probe, {duplicate_nodes, Nodes}}) ->
    io_lib:format("nodes listed more than once: ~ts", [lists:join(", ", [atom_to_list(N) || N <- Nodes])]);
format_error({probe, {unreachable, Failures}}) ->
    ["cannot probe: ",
     lists:join("; ", [io_lib:format("~s ~ts", [N, why(W)]) || {N, W} <- Failures])];
format_error({probe, {failed_pairs, Count, Examples}}) ->
    io_lib:format("~b pair~s failed (e.g. ~ts); their entries in latency.json are null",
                  [Count, case Count of 1 -> ""; _ -> "s" end,
                   lists:join(", ", [io_lib:format("~s -> ~s: ~ts", [A, B, pair_why(Why)])
                                     || {{A, B}, Why} <- Examples])]);
format_error({probe, {interrupted, Measured, Total}}) ->
    io_lib:format("interrupted: ~b of ~b pairs were measured; the files are marked \"partial\": true",
                  [Measured, Total]);
format_error({probe, stalled}) ->
    "no client reported for longer than a batch may take; the probe was stopped".

expected(Key) when Key =:= payload; Key =:= warmup ->
    io_lib:format("an integer from 0 to ~b", [limit(Key)]);
expected(budget_ms) ->
    io_lib:format("infinity or milliseconds from 1 to ~b", [limit(budget_ms)]);
expected(Key) when is_map_key(Key, ?LIMITS) ->
    io_lib:format("an integer from 1 to ~b", [limit(Key)]);
expected(progress) -> "none or a fun of one argument";
expected(checkpoint) -> "none or a fun of one argument";
expected(precision) -> "none or a number between 0 and 1";
expected(statistic) -> "min, median, mean or p95";
expected(_) -> "see the documentation".

%% Why a pair failed, in a few words.
pair_why({echo_not_started, Node, noconnection}) -> io_lib:format("~s could not be connected to", [Node]);
pair_why({echo_not_started, Node, Why}) -> io_lib:format("its echo on ~s did not start (~0tP)", [Node, Why, 6]);
pair_why({echo_down, _}) -> "its echo ended";
pair_why(noconnection) -> "a node went down";
pair_why(stalled) -> "no report in time";
pair_why(Why) -> io_lib:format("~0tP", [Why, 6]).

why(noconnection) -> "is not reachable";
why(timeout) -> "did not answer in time";
why({no_code, What}) -> io_lib:format("does not have terrain_lab's code (~0tp)", [What]);
why(Other) -> io_lib:format("~0tp", [Other]).

%%--------------------------------------------------------------------
%% Checking the nodes

check_nodes(Unique, Nodes, _Timeout) when length(Unique) =/= length(Nodes) ->
    {error, {probe, {duplicate_nodes, lists:usort(Nodes -- Unique)}}};
check_nodes(Unique, _Nodes, _Timeout) when length(Unique) < 2 ->
    {error, {probe, too_few_nodes}};
check_nodes(Nodes, _, Timeout) ->
    Deadline = erlang:monotonic_time(millisecond) + max(Timeout, ?CALL_TIMEOUT),
    Requests = lists:foldl(fun(N, Acc) -> erpc:send_request(N, code, ensure_loaded, [?CLIENT], N, Acc) end,
                           erpc:reqids_new(), Nodes),
    case collect_checks(Requests, Deadline, []) of
        [] -> ok;
        Failures -> {error, {probe, {unreachable, lists:sort(Failures)}}}
    end.

collect_checks(Requests, Deadline, Failures) ->
    case erpc:reqids_size(Requests) of
        0 ->
            Failures;
        _ ->
            try erpc:receive_response(Requests, {abs, Deadline}, true) of
                {{module, ?CLIENT}, _Node, Rest} -> collect_checks(Rest, Deadline, Failures);
                {Other, Node, Rest} -> collect_checks(Rest, Deadline, [{Node, {no_code, Other}} | Failures])
            catch
                error:{erpc, timeout} ->
                    Failures ++ [{N, timeout} || N <- pending(Requests)];
                error:{{erpc, noconnection}, Node, Rest} ->
                    collect_checks(Rest, Deadline, [{Node, noconnection} | Failures]);
                Class:{Reason, Node, Rest} ->
                    collect_checks(Rest, Deadline, [{Node, {Class, Reason}} | Failures])
            end
    end.

pending(Requests) ->
    [Label || {_, Label} <- erpc:reqids_to_list(Requests)].

%%--------------------------------------------------------------------
%% Measuring

measure(Nodes, #{strategy := tree} = Opts) ->
    terrain_lab_probe_tree:measure(Nodes, Opts);
measure(Nodes, #{strategy := Strategy, batches := Batches, progress := Progress} = Opts) ->
    Started = terrain_lab_run:timestamp(),
    T0 = erlang:monotonic_time(millisecond),
    Pairs = [{A, B} || A <- Nodes, B <- Nodes, A =/= B],
    Rounds = case Strategy of
                 concurrent -> [Pairs];
                 sequential -> [[{A, B} || {A1, B} <- Pairs, A1 =:= A] || A <- Nodes]
             end,
    Deadline = ?CLIENT:deadline(T0, Opts),
    Tracker0 = #{t0 => T0, last => T0, progress => Progress, rounds => length(Rounds), rounds_done => 0,
                 rounds_ms => 0, batches => Batches, deadline => Deadline, total => length(Pairs) * Batches,
                 done => 0, last_checkpoint => never},
    Base = #{nodes => Nodes, options => Opts, started_at => Started},
    {Results, _, EndedBy} =
        lists:foldl(fun(_Round, {Acc, Tracker, Ended}) when Ended =/= complete ->
                            {Acc, Tracker, Ended};
                       (Round, {Acc, #{rounds_done := Done} = Tracker, complete}) ->
                            case ?CLIENT:past(Deadline) of
                                true ->
                                    {Acc, Tracker, budget};
                                false ->
                                    RoundBudget = round_budget(Deadline, length(Rounds) - Done),
                                    {R, Tracker1, Stop} = round(Round, Opts, RoundBudget, Tracker),
                                    Acc1 = maps:merge(Acc, R),
                                    Tracker2 = checkpoint(Opts, Base, Acc1, Pairs, Tracker1),
                                    {Acc1, Tracker2, case Stop of
                                                         true -> interrupt;
                                                         false -> ended(Deadline, length(Rounds) - Done - 1)
                                                     end}
                            end
                    end, {#{}, Tracker0, complete}, Rounds),
    Missing = maps:from_list([{P, {error, case EndedBy of interrupt -> interrupted; _ -> not_measured end}}
                              || P <- Pairs, not is_map_key(P, Results)]),
    Base#{finished_at => terrain_lab_run:timestamp(), duration_ms => erlang:monotonic_time(millisecond) - T0,
          partial => EndedBy =/= complete orelse not_measured(Results), ended_by => EndedBy,
          pairs => maps:merge(Missing, Results)}.

%% Did the budget end the probe? Only when rounds were left to run, or a pair of the
%% last round stopped because the time was up.
ended(_Deadline, 0) -> complete;
ended(Deadline, _RoundsLeft) ->
    case ?CLIENT:past(Deadline) of
        true -> budget;
        false -> complete
    end.

not_measured(Results) ->
    lists:any(fun({error, not_measured}) -> true; (_) -> false end, maps:values(Results)).

round_budget(infinity, _RoundsLeft) ->
    infinity;
round_budget(Deadline, RoundsLeft) ->
    max(1, (Deadline - erlang:monotonic_time(millisecond)) div max(1, RoundsLeft)).

%% The result so far, to the checkpoint fun (after the first round, then at most every
%% 5 s: a latency.json of 128 nodes takes a noticeable part of a second to write):
%% pairs not measured yet are null.
checkpoint(#{checkpoint := none}, _Base, _Results, _Pairs, Tracker) ->
    Tracker;
checkpoint(#{checkpoint := Fun}, Base, Results, Pairs, #{t0 := T0, last_checkpoint := Last} = Tracker) ->
    Now = erlang:monotonic_time(millisecond),
    case Last =:= never orelse Now - Last >= ?CHECKPOINT_MS of
        true ->
            Missing = maps:from_list([{P, {error, not_measured}} || P <- Pairs, not is_map_key(P, Results)]),
            _ = Fun(Base#{finished_at => terrain_lab_run:timestamp(), duration_ms => Now - T0,
                          partial => true, ended_by => running, pairs => maps:merge(Missing, Results)}),
            Tracker#{last_checkpoint => erlang:monotonic_time(millisecond)};
        false ->
            Tracker
    end.

%% One round: a client per pair, all warmed up, then all measuring at once (for at
%% most `Budget' ms, warm-up included). Returns the pairs' results, the tracker, and
%% whether the probe was interrupted.
round(Pairs, Opts, Budget, Tracker) ->
    Ref = make_ref(),
    RoundT0 = erlang:monotonic_time(millisecond),
    Stall = ?CLIENT:stall_ms(Opts),
    %% the clients stop measuring at the end of the round's share of the budget; the
    %% controller waits a grace period longer for their reports, then gives up on them
    EndAt = case Budget of
                infinity -> infinity;
                _ -> RoundT0 + Budget + ?GRACE_MS
            end,
    Config = (?CLIENT:config(Opts))#{stop_in => Budget},
    Clients = maps:from_list([begin
                                  {MRef, Pid} = ?CLIENT:start(A, B, Ref, Config),
                                  {MRef, {Pid, {A, B}}}
                              end || {A, B} <- Pairs]),
    case await_ready(Ref, Clients, maps:size(Clients), #{}, #{}, Stall, EndAt) of
        {Ready, Failed, interrupted} ->
            stop_clients(Ready),
            Interrupted = maps:from_list([{Pair, {error, interrupted}} || {_, {_, Pair}} <- maps:to_list(Ready)]),
            {maps:merge(Failed, Interrupted), Tracker, true};
        {Ready, Failed, ok} ->
            Left = case Budget of
                       infinity -> infinity;
                       _ -> max(1, Budget - (erlang:monotonic_time(millisecond) - RoundT0))
                   end,
            maps:foreach(fun(_, {Pid, _}) -> Pid ! {Ref, go, Left} end, Ready),
            RoundTracker = Tracker#{round_t0 => RoundT0, round_budget => Budget,
                                    round_total => maps:size(Ready) * maps:get(batches, Opts), round_done => 0},
            {Results, Tracker1, Stop} = collect(Ref, Ready, Failed, RoundTracker, Stall, EndAt, false),
            #{rounds_done := Done, rounds_ms := Ms} = Tracker1,
            Now = erlang:monotonic_time(millisecond),
            {Results, round_done(Tracker1#{rounds_done => Done + 1, rounds_ms => Ms + Now - RoundT0}, Now), Stop}
    end.

await_ready(_Ref, _Clients, 0, Ready, Failed, _Stall, _EndAt) ->
    {Ready, Failed, ok};
await_ready(Ref, Clients, Left, Ready, Failed, Stall, EndAt) ->
    receive
        {Ref, ready, Pid} ->
            [MRef] = [M || {M, {P, _}} <- maps:to_list(Clients), P =:= Pid],
            await_ready(Ref, Clients, Left - 1, Ready#{MRef => maps:get(MRef, Clients)}, Failed, Stall, EndAt);
        {'DOWN', MRef, process, _, Why} when is_map_key(MRef, Clients) ->
            {_, Pair} = maps:get(MRef, Clients),
            await_ready(Ref, Clients, Left - 1, Ready, Failed#{Pair => {error, Why}}, Stall, EndAt);
        {?MODULE, interrupt} ->
            {Clients, Failed, interrupted}
    after ?CLIENT:wait_ms(Stall, EndAt) ->
            Why = ?CLIENT:late(EndAt),
            Waiting = [{M, C} || {M, {_, Pair} = C} <- maps:to_list(Clients), not is_map_key(M, Ready),
                                 not is_map_key(Pair, Failed)],
            stop_clients(maps:from_list(Waiting)),
            {Ready, maps:merge(Failed, maps:from_list([{P, {error, Why}} || {_, {_, P}} <- Waiting])), ok}
    end.

collect(_Ref, Running, Results, Tracker, _Stall, _EndAt, Stop) when map_size(Running) =:= 0 ->
    {Results, Tracker, Stop};
collect(Ref, Running, Results, Tracker, Stall, EndAt, Stop) ->
    receive
        {Ref, batch, _Pid} ->
            collect(Ref, Running, Results, tick(Tracker), Stall, EndAt, Stop);
        {Ref, done, Pid, Stats} ->
            [MRef] = [M || {M, {P, _}} <- maps:to_list(Running), P =:= Pid],
            {{_, Pair}, Running1} = maps:take(MRef, Running),
            erlang:demonitor(MRef, [flush]),
            Result = case Stats of
                         none when Stop -> {error, interrupted};
                         none -> {error, not_measured};
                         _ -> {ok, Stats}
                     end,
            collect(Ref, Running1, Results#{Pair => Result}, Tracker, Stall, EndAt, Stop);
        {'DOWN', MRef, process, _, Why} when is_map_key(MRef, Running) ->
            {{_, Pair}, Running1} = maps:take(MRef, Running),
            collect(Ref, Running1, Results#{Pair => {error, Why}}, Tracker, Stall, EndAt, Stop);
        {?MODULE, interrupt} ->
            %% every client reports what it has after its current exchange
            maps:foreach(fun(_, {Pid, _}) -> Pid ! {Ref, stop} end, Running),
            collect(Ref, Running, Results, Tracker, Stall, EndAt, true)
    after ?CLIENT:wait_ms(Stall, EndAt) ->
            Why = ?CLIENT:late(EndAt),
            stop_clients(Running),
            {maps:merge(Results, maps:from_list([{Pair, {error, Why}} || {_, {_, Pair}} <- maps:to_list(Running)])),
             Tracker, Stop}
    end.

stop_clients(Clients) ->
    maps:foreach(fun(MRef, {Pid, _}) -> erlang:demonitor(MRef, [flush]), exit(Pid, kill) end, Clients).

tick(#{done := Done, round_done := RoundDone, last := Last, progress := Progress} = Tracker) ->
    Now = erlang:monotonic_time(millisecond),
    Tracker1 = Tracker#{done => Done + 1, round_done => RoundDone + 1},
    case Progress =/= none andalso Now - Last >= 1000 of
        true ->
            Progress(#{done => Done + 1, total => maps:get(total, Tracker), elapsed_ms => Now - maps:get(t0, Tracker),
                       eta_ms => eta(Tracker1, Now)}),
            Tracker1#{last => Now};
        false ->
            Tracker1
    end.

%% Progress at the end of every round: the rounds left at the mean duration of those
%% done (at most the budget left).
round_done(#{progress := none} = Tracker, _Now) ->
    Tracker;
round_done(#{progress := Progress, rounds := Rounds, rounds_done := Done, rounds_ms := Ms, deadline := Deadline,
             t0 := T0} = Tracker, Now) ->
    Eta = round(Ms / Done * (Rounds - Done)),
    Progress(#{done => maps:get(done, Tracker), total => maps:get(total, Tracker), elapsed_ms => Now - T0,
               eta_ms => case Deadline of infinity -> Eta; _ -> max(0, min(Eta, Deadline - Now)) end}),
    Tracker#{last => Now}.

%% The time left: the rounds still to come at the mean duration of the finished ones
%% (or, before one has finished, at the current round's estimated duration), plus what
%% the current round still needs; at most the budget left.
eta(#{rounds := Rounds, rounds_done := RoundsDone, rounds_ms := RoundsMs, round_t0 := RoundT0,
      round_done := RoundDone, round_total := RoundTotal, round_budget := RoundBudget, deadline := Deadline}, Now) ->
    InRound = Now - RoundT0,
    Fraction = max(RoundDone / max(1, RoundTotal),
                   case RoundBudget of infinity -> 0.0; _ -> InRound / max(1, RoundBudget) end),
    Current = case Fraction > 0 of
                  true -> InRound / min(1.0, Fraction);
                  false -> undefined
              end,
    PerRound = case RoundsDone of
                   0 -> Current;
                   _ -> RoundsMs / RoundsDone
               end,
    case {PerRound, Current} of
        {undefined, _} -> unknown;
        {_, undefined} -> unknown;
        _ ->
            Eta = round(PerRound * (Rounds - RoundsDone - 1) + max(0.0, Current - InRound)),
            case Deadline of
                infinity -> Eta;
                _ -> max(0, min(Eta, Deadline - Now))
            end
    end.
