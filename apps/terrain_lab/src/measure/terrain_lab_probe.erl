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
%% After each round `checkpoint' (when given) receives the result so far, marked
%% `partial', so an interrupted probe leaves what it measured on disk. A message
%% `{terrain_lab_probe, interrupt}' to the process running {@link probe/2} stops the
%% probe: its clients report what they have measured after their current batch, pairs
%% without a batch are `{error, interrupted}', and the result is `partial'.
-module(terrain_lab_probe).

%% API
-export([probe/2,
         write/3,
         validate_options/1,
         format_error/1]).

%% Internal exports (spawned on the probed nodes)
-export([client/4,
         echo/1]).

-export_type([options/0, result/0]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_LATENCY).
-define(CSV_COLUMNS, [from, to, exchanges, min_us, median_us, mean_us, p95_us, stddev_us, status]).
-define(STATS, [min, median, mean, p95, stddev]).
-define(CALL_TIMEOUT, 10000).
-define(GRACE_MS, 2000).
%% The tree strategy places at most this many nodes at once: more measure at once
%% and, on a loaded machine, inflate each other's round trips (docs/BENCHMARKS.md).
-define(TREE_WAVE, 4).        % after the deadline: clients report what they have
-define(CHECKPOINT_MS, 5000).   % at most one checkpoint file set per 5 s

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

check(batches, V) when is_integer(V), V > 0 -> ok;
check(messages, V) when is_integer(V), V > 0 -> ok;
check(payload, V) when is_integer(V), V >= 0 -> ok;
check(strategy, V) when V =:= sequential; V =:= concurrent; V =:= tree -> ok;
check(insert, V) when is_map(V) -> ok;
check(wave, V) when is_integer(V), V > 0 -> ok;
check(statistic, V) when V =:= min; V =:= median; V =:= mean; V =:= p95 -> ok;
check(warmup, V) when is_integer(V), V >= 0 -> ok;
check(timeout, V) when is_integer(V), V > 0 -> ok;
check(progress, V) when V =:= none; is_function(V, 1) -> ok;
check(precision, V) when V =:= none; is_float(V), V > 0, V < 1 -> ok;
check(budget_ms, V) when V =:= infinity; is_integer(V), V > 0 -> ok;
check(checkpoint, V) when V =:= none; is_function(V, 1) -> ok;
check(Key, Value) ->
    case maps:is_key(Key, ?DEFAULTS) orelse Key =:= warmup orelse Key =:= statistic of
        true -> throw({bad_option, Key, Value});
        false -> throw({unknown_option, Key})
    end.

%% @doc Probes every ordered pair of `Nodes' (at least two, all running terrain_lab's
%% code). Returns when every pair has finished or failed.
-spec probe([node()], options()) -> {ok, result()} | {error, {probe, term()}}.
probe(Nodes, Options) ->
    terrain_lab_steps:run([fun validate_options/1,
                           fun(Opts) -> check_nodes(lists:usort(Nodes), Nodes, maps:get(timeout, Opts)) end,
                           fun(Opts) -> {ok, measure(Nodes, Opts)} end],
                          Options).

%% @doc Writes `latency.json', `latency.csv' and `manifest.json' into `Dir';
%% `Extra' is merged into the manifest entry's parameters. Returns the files written.
-spec write(result(), file:filename(), map()) -> {ok, [file:filename()]} | {error, term()}.
write(#{nodes := Nodes, options := Opts, pairs := Pairs} = Result, Dir, Extra) ->
    Json = filename:join(Dir, "latency.json"),
    Csv = filename:join(Dir, "latency.csv"),
    Parameters = maps:merge(#{strategy => maps:get(strategy, Opts), batches => maps:get(batches, Opts),
                              messages => maps:get(messages, Opts), payload_bytes => maps:get(payload, Opts),
                              warmup => maps:get(warmup, Opts), nodes => length(Nodes)}, Extra),
    Topology = filename:join(Dir, "topology.json"),
    {TreeFiles, TreeEntries, TreeStep} =
        case Result of
            #{topology := Tree} ->
                {[Topology],
                 [#{kind => topology, file => <<"topology.json">>,
                    parameters => #{source => probe, strategy => tree,
                                    statistic => maps:get(statistic, Opts, min),
                                    unplaced => maps:get(unplaced, Result, []),
                                    waves => maps:get(waves, Result, 0),
                                    reinserted => maps:get(reinserted, Result, 0)}}],
                 fun(_) -> write_topology(Topology, Tree) end};
            #{} ->
                {[], [], fun(_) -> ok end}
        end,
    Files = [Json, Csv] ++ TreeFiles ++ [filename:join(Dir, "manifest.json")],
    Steps = [fun(_) -> terrain_json:write_file(Json, latency_json(Result)) end,
             fun(_) -> write_csv(Csv, Nodes, Pairs) end,
             TreeStep,
             fun(_) -> terrain_lab_run:write_manifest(Dir, probe,
                                                      [#{kind => latency, file => <<"latency.json">>,
                                                         parameters => Parameters},
                                                       #{kind => latency_csv, file => <<"latency.csv">>}]
                                                      ++ TreeEntries)
             end,
             fun(_) -> {ok, Files} end],
    terrain_lab_steps:run(Steps, Dir).

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
                   lists:join(", ", [io_lib:format("~s -> ~s", [A, B]) || {A, B} <- Examples])]);
format_error({probe, {interrupted, Measured, Total}}) ->
    io_lib:format("interrupted: ~b of ~b pairs were measured; the files are marked \"partial\": true", [Measured, Total]);
format_error({probe, stalled}) ->
    "no client reported for longer than a batch may take; the probe was stopped".

expected(batches) -> "an integer > 0";
expected(messages) -> "an integer > 0";
expected(payload) -> "an integer >= 0";
expected(warmup) -> "an integer >= 0";
expected(timeout) -> "milliseconds > 0";
expected(progress) -> "none or a fun of one argument";
expected(checkpoint) -> "none or a fun of one argument";
expected(precision) -> "none or a number between 0 and 1";
expected(budget_ms) -> "infinity or milliseconds > 0";
expected(statistic) -> "min, median, mean or p95";
expected(_) -> "see the documentation".

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
    Requests = lists:foldl(fun(N, Acc) -> erpc:send_request(N, code, ensure_loaded, [?MODULE], N, Acc) end,
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
                {{module, ?MODULE}, _Node, Rest} -> collect_checks(Rest, Deadline, Failures);
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
    measure_tree(Nodes, Opts);
measure(Nodes, #{strategy := Strategy, batches := Batches, progress := Progress} = Opts) ->
    Started = terrain_lab_run:timestamp(),
    T0 = erlang:monotonic_time(millisecond),
    Pairs = [{A, B} || A <- Nodes, B <- Nodes, A =/= B],
    Rounds = case Strategy of
                 concurrent -> [Pairs];
                 sequential -> [[{A, B} || {A1, B} <- Pairs, A1 =:= A] || A <- Nodes]
             end,
    Deadline = deadline(T0, Opts),
    Tracker0 = #{t0 => T0, last => T0, progress => Progress, rounds => length(Rounds), rounds_done => 0,
                 rounds_ms => 0, batches => Batches, deadline => Deadline, total => length(Pairs) * Batches,
                 done => 0, last_checkpoint => T0},
    Base = #{nodes => Nodes, options => Opts, started_at => Started},
    {Results, _, EndedBy} =
        lists:foldl(fun(_Round, {Acc, Tracker, Ended}) when Ended =/= complete ->
                            {Acc, Tracker, Ended};
                       (Round, {Acc, #{rounds_done := Done} = Tracker, complete}) ->
                            case past(Deadline) of
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
    case past(Deadline) of
        true -> budget;
        false -> complete
    end.

not_measured(Results) ->
    lists:any(fun({error, not_measured}) -> true; (_) -> false end, maps:values(Results)).

deadline(T0, Opts) ->
    case maps:get(budget_ms, Opts) of
        infinity -> infinity;
        Budget -> T0 + Budget
    end.

past(infinity) -> false;
past(Deadline) -> erlang:monotonic_time(millisecond) >= Deadline.

round_budget(infinity, _RoundsLeft) ->
    infinity;
round_budget(Deadline, RoundsLeft) ->
    max(1, (Deadline - erlang:monotonic_time(millisecond)) div max(1, RoundsLeft)).

%%--------------------------------------------------------------------
%% Tree-guided probing

%% The tree strategy: terrain_lab_tree_probe builds the topology while it measures,
%% each pair with one client as in the other strategies (its own share of nothing:
%% it runs its batches, cut short at the deadline); a wave's first pass runs its
%% insertions in parallel.
measure_tree(Nodes, #{progress := Progress} = Opts) ->
    Started = terrain_lab_run:timestamp(),
    T0 = erlang:monotonic_time(millisecond),
    Deadline = deadline(T0, Opts),
    Table = ets:new(?MODULE, [set, public]),
    Self = self(),
    put({?MODULE, interrupted}, false),
    Stop = fun() -> past(Deadline) orelse interrupted(Self) end,
    Statistic = maps:get(statistic, Opts, min),
    Measure = fun(A, B) ->
                      case Stop() of
                          true -> {error, not_measured};
                          false -> record(Table, A, B, Statistic, pair(A, B, Opts, Deadline))
                      end
              end,
    put({?MODULE, eta}, {T0, 0}),
    Build = terrain_lab_tree_probe:build(Nodes, Measure,
                                         #{map => fun(F, Xs) -> pmap(F, Xs, Deadline) end, stop => Stop,
                                           wave => maps:get(wave, Opts, ?TREE_WAVE),
                                           insert => maps:get(insert, Opts, #{}),
                                           progress => tree_progress(Progress, Deadline)}),
    #{tree := Tree, unplaced := Unplaced, ended_by := Ended, reinserted := Reinserted, waves := Waves} = Build,
    Measured = maps:from_list([{Pair, Result} || {Pair, Result} <- ets:tab2list(Table)]),
    ets:delete(Table),
    EndedBy = case Ended of
                  complete -> complete;
                  stopped -> case interrupted(Self) of true -> interrupt; false -> budget end
              end,
    NotMeasured = case EndedBy of interrupt -> interrupted; _ -> not_measured end,
    Pairs = maps:merge(maps:from_list([{{A, B}, {error, NotMeasured}} || A <- Nodes, B <- Nodes, A =/= B]),
                       Measured),
    #{nodes => Nodes, options => Opts, started_at => Started, finished_at => terrain_lab_run:timestamp(),
      duration_ms => erlang:monotonic_time(millisecond) - T0, partial => EndedBy =/= complete,
      ended_by => EndedBy, pairs => Pairs, topology => Tree, unplaced => Unplaced, reinserted => Reinserted,
      waves => Waves}.

%% The pair's round trip as insertion sees it: the chosen statistic of its exchanges
%% (min by default; median where a link lets a message through early now and then,
%% as rate shaping does on the testbed, docs/TESTBED.md).
record(Table, A, B, Statistic, {ok, Stats}) ->
    true = ets:insert(Table, {{A, B}, {ok, Stats}}),
    {ok, maps:get(Statistic, Stats)};
record(Table, A, B, _Statistic, {error, Why} = Error) ->
    case Why of
        not_measured -> ok;
        _ -> true = ets:insert(Table, {{A, B}, Error})
    end,
    Error.

%% Has the user interrupted? The message stays noted in the process dictionary of
%% the probing process (pmap's workers ask through the flag the probe sets).
interrupted(Self) when Self =:= self() ->
    case get({?MODULE, interrupted}) of
        true ->
            true;
        _ ->
            receive
                {?MODULE, interrupt} -> put({?MODULE, interrupted}, true), true
            after 0 ->
                    false
            end
    end;
interrupted(Self) ->
    %% a worker of pmap: the probing process answers for itself while it waits
    case erlang:process_info(Self, dictionary) of
        {dictionary, Dict} -> proplists:get_value({?MODULE, interrupted}, Dict, false) =:= true;
        undefined -> true
    end.

%% One pair measured by one client: warm-up, batches (cut short at the deadline).
pair(A, B, #{messages := Messages, timeout := Timeout} = Opts, Deadline) ->
    Ref = make_ref(),
    StopIn = case Deadline of
                 infinity -> infinity;
                 _ -> max(1, Deadline - erlang:monotonic_time(millisecond))
             end,
    Pid = spawn(A, ?MODULE, client, [self(), Ref, B, (client_config(Opts))#{stop_in => StopIn}]),
    MRef = erlang:monitor(process, Pid),
    Wait = fun() -> wait_ms(Messages * Timeout + 10000, case Deadline of infinity -> infinity;
                                                                   _ -> Deadline + ?GRACE_MS end)
           end,
    Result = receive
                 {Ref, ready, Pid} ->
                     Pid ! {Ref, go, infinity},
                     pair_done(Ref, Pid, MRef, Wait);
                 {'DOWN', MRef, process, _, Why} ->
                     {error, Why}
             after Wait() ->
                     {error, late(Deadline + ?GRACE_MS)}
             end,
    erlang:demonitor(MRef, [flush]),
    exit(Pid, kill),
    Result.

pair_done(Ref, Pid, MRef, Wait) ->
    receive
        {Ref, batch, Pid} -> pair_done(Ref, Pid, MRef, Wait);
        {Ref, done, Pid, none} -> {error, not_measured};
        {Ref, done, Pid, Stats} -> {ok, Stats};
        {'DOWN', MRef, process, _, Why} -> {error, Why}
    after Wait() ->
            {error, stalled}
    end.

%% The first pass of a wave: every insertion in its own process; one that has not
%% returned by the deadline (plus grace) counts as not placed.
pmap(F, Xs, Deadline) ->
    Self = self(),
    Workers = [spawn_monitor(fun() -> Self ! {self(), result, F(X)} end) || X <- Xs],
    Until = case Deadline of infinity -> infinity; _ -> Deadline + 2 * ?GRACE_MS end,
    [pmap_result(Pid, MRef, Until) || {Pid, MRef} <- Workers].

pmap_result(Pid, MRef, Until) ->
    receive
        {Pid, result, R} ->
            erlang:demonitor(MRef, [flush]),
            R;
        {'DOWN', MRef, process, Pid, Why} ->
            {error, Why};
        {?MODULE, interrupt} ->
            %% noted for the workers, which ask before every pair
            put({?MODULE, interrupted}, true),
            pmap_result(Pid, MRef, Until)
    after wait_ms(infinity, Until) ->
            exit(Pid, kill),
            receive {'DOWN', MRef, process, Pid, _} -> ok end,
            {error, not_measured}
    end.

%% Progress after every wave: nodes placed of all; the ETA from the nodes left at the
%% rate of the last wave (nodes per ms), at most the budget left.
tree_progress(none, _Deadline) ->
    none;
tree_progress(Progress, Deadline) ->
    fun(#{placed := Placed, total := Total, elapsed_ms := Elapsed}) ->
            {LastMs, LastPlaced} = get({?MODULE, eta}),
            Now = erlang:monotonic_time(millisecond),
            put({?MODULE, eta}, {Now, Placed}),
            Rate = (Placed - LastPlaced) / max(1, Now - LastMs),
            Eta = case Rate > 0 of
                      true -> round((Total - Placed) / Rate);
                      false -> unknown
                  end,
            Progress(#{done => Placed, total => Total, elapsed_ms => Elapsed, unit => nodes,
                       eta_ms => case {Eta, Deadline} of
                                     {unknown, _} -> unknown;
                                     {_, infinity} -> Eta;
                                     _ -> max(0, min(Eta, Deadline - Now))
                                 end})
    end.

%% The result so far, to the checkpoint fun (at most every 5 s: a latency.json of 128
%% nodes takes a noticeable part of a second to write): pairs not measured yet are null.
checkpoint(#{checkpoint := none}, _Base, _Results, _Pairs, Tracker) ->
    Tracker;
checkpoint(#{checkpoint := Fun}, Base, Results, Pairs, #{t0 := T0, last_checkpoint := Last} = Tracker) ->
    Now = erlang:monotonic_time(millisecond),
    case Now - Last >= ?CHECKPOINT_MS of
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
round(Pairs, #{messages := Messages, timeout := Timeout} = Opts, Budget, Tracker) ->
    Ref = make_ref(),
    RoundT0 = erlang:monotonic_time(millisecond),
    Stall = Messages * Timeout + 10000,
    %% the clients stop measuring at the end of the round's share of the budget; the
    %% controller waits a grace period longer for their reports, then gives up on them
    EndAt = case Budget of
                infinity -> infinity;
                _ -> RoundT0 + Budget + ?GRACE_MS
            end,
    Config = (client_config(Opts))#{stop_in => Budget},
    Clients = maps:from_list([begin
                                  Pid = spawn(A, ?MODULE, client, [self(), Ref, B, Config]),
                                  {erlang:monitor(process, Pid), {Pid, {A, B}}}
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

client_config(#{batches := B, messages := M, payload := P, warmup := W, timeout := T} = Opts) ->
    #{batches => B, messages => M, payload => P, warmup => W, timeout => T,
      precision => maps:get(precision, Opts, none)}.

%% How long to wait for the next report: until a client has stalled, or until the
%% round's end plus the grace period, whichever comes first.
wait_ms(Stall, infinity) -> Stall;
wait_ms(Stall, EndAt) -> max(0, min(Stall, EndAt - erlang:monotonic_time(millisecond))).

%% The error of a client that did not report in time: past the round's end it ran out
%% of budget (not measured), else it stalled.
late(infinity) -> stalled;
late(EndAt) ->
    case erlang:monotonic_time(millisecond) >= EndAt of
        true -> not_measured;
        false -> stalled
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
    after wait_ms(Stall, EndAt) ->
            Why = late(EndAt),
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
    after wait_ms(Stall, EndAt) ->
            Why = late(EndAt),
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

%%--------------------------------------------------------------------
%% Client and echo (on the probed nodes)

%% @doc A client on node A: spawns its echo on `Target', warms up, reports ready,
%% waits for `go', runs the batches (reporting each) and reports its statistics.
-spec client(pid(), reference(), node(), map()) -> ok.
client(Controller, Ref, Target, #{batches := Batches, messages := Messages, payload := PayloadBytes,
                                  warmup := Warmup, timeout := Timeout} = Config) ->
    Start = erlang:monotonic_time(millisecond),
    %% the end of this client's share of the budget, on this node's clock
    StopAt = case maps:get(stop_in, Config, infinity) of
                 infinity -> infinity;
                 StopIn -> Start + StopIn
             end,
    ControllerMon = erlang:monitor(process, Controller),
    Echo = spawn(Target, ?MODULE, echo, [self()]),
    EchoMon = erlang:monitor(process, Echo),
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
             after Messages * Timeout + 10000 ->
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

%%--------------------------------------------------------------------
%% Output

latency_json(#{nodes := Nodes, options := Opts, pairs := Pairs, started_at := Started, finished_at := Finished,
               duration_ms := Duration} = Result) ->
    Matrix = fun(Stat) ->
                     [[case A =:= B of
                           true -> 0;
                           false -> case maps:get({A, B}, Pairs) of
                                        {ok, S} -> maps:get(Stat, S);
                                        {error, _} -> null
                                    end
                       end || B <- Nodes] || A <- Nodes]
             end,
    Measured = length([P || {P, {ok, _}} <- maps:to_list(Pairs)]),
    #{format => ?FORMAT,
      nodes => [atom_to_binary(N) || N <- Nodes],
      unit => <<"us">>,
      pairs_measured => Measured,
      pairs_total => length(Nodes) * (length(Nodes) - 1),
      ended_by => maps:get(ended_by, Result, complete),
      strategy => maps:get(strategy, Opts),
      batches => maps:get(batches, Opts),
      messages => maps:get(messages, Opts),
      warmup => maps:get(warmup, Opts),
      payload_bytes => maps:get(payload, Opts),
      started_at => Started,
      finished_at => Finished,
      duration_ms => Duration,
      partial => maps:get(partial, Result, false),
      precision => maps:get(precision, Opts, none),
      budget_ms => maps:get(budget_ms, Opts, infinity),
      batches_per_pair => [[case A =:= B of
                                true -> 0;
                                false -> case maps:get({A, B}, Pairs) of
                                             {ok, S} -> maps:get(batches, S, null);
                                             {error, _} -> null
                                         end
                            end || B <- Nodes] || A <- Nodes],
      diagonal => <<"zero: a node is not probed against itself">>,
      stats => maps:from_list([{S, Matrix(S)} || S <- ?STATS]),
      failed => [#{from => A, to => B, reason => iolist_to_binary(io_lib:format("~0tP", [Why, 12]))}
                 || {{A, B}, {error, Why}} <- lists:sort(maps:to_list(Pairs)), Why =/= not_measured]}.

%% The tree the tree strategy found, as `terrain.topology/1' JSON (written whole, then
%% renamed over the old one).
write_topology(File, Tree) ->
    case terrain:render_topology(Tree, json) of
        {ok, Text} ->
            Part = File ++ ".part",
            case file:write_file(Part, Text) of
                ok -> case file:rename(Part, File) of
                          ok -> ok;
                          {error, Why} -> {error, {file, File, Why}}
                      end;
                {error, Why} -> {error, {file, File, Why}}
            end;
        {error, _} = Error ->
            Error
    end.

%% Written next to its place and renamed over it: the files are rewritten after every
%% round, and a reader (or an interrupted probe) never sees half a file.
write_csv(File, Nodes, Pairs) ->
    Part = File ++ ".part",
    _ = file:delete(Part),
    case write_csv_part(Part, Nodes, Pairs) of
        ok -> case file:rename(Part, File) of
                  ok -> ok;
                  {error, Why} -> {error, {file, File, Why}}
              end;
        {error, _} = Error -> Error
    end.

write_csv_part(File, Nodes, Pairs) ->
    case terrain_lab_csv:create(File, ?CSV_COLUMNS) of
        {ok, Csv} ->
            Rows = [case maps:get({A, B}, Pairs) of
                        {ok, #{exchanges := X} = S} ->
                            #{from => A, to => B, exchanges => X, min_us => maps:get(min, S),
                              median_us => maps:get(median, S), mean_us => maps:get(mean, S),
                              p95_us => maps:get(p95, S), stddev_us => maps:get(stddev, S), status => ok};
                        {error, not_measured} ->
                            #{from => A, to => B, exchanges => 0, status => not_measured};
                        {error, _} ->
                            #{from => A, to => B, exchanges => 0, status => failed}
                    end || A <- Nodes, B <- Nodes, A =/= B],
            try terrain_lab_csv:write_rows(Csv, Rows)
            after terrain_lab_csv:close(Csv)
            end;
        {error, _} = Error ->
            Error
    end.
