%% @private
%% @doc One benchmark instance: the part of a run that lives on one node (DE-Bench's
%% peer-to-peer design: every node runs the same instance, and after the start
%% barrier no instance waits for another or for the coordinator).
%%
%% The instance opens its files, starts `concurrent' workers and waits for `go'
%% (the barrier: the coordinator sends it to every instance once all are ready, with
%% an absolute start time, so that all nodes start together). Workers pick an
%% operation by weight and, for P2P operations, a target node at random among the
%% other nodes (never skipping an iteration, as DE-Bench did when the random target
%% was itself), and record each latency in the operation's recorder (an `atomics'
%% HDR histogram shared by the node's workers) or its error in the error table.
%%
%% Every `report_interval' seconds after the warm-up the instance takes a snapshot of
%% the recorders; the difference to the previous snapshot is the interval, written as
%% one row of `<op>_latencies.csv', one line of `<op>.hlog' (HdrHistogram interval
%% log) and one row of `summary.csv', and `errors.csv' is rewritten. Every file is
%% synced to disk each interval, so a crash loses at most one interval.
%%
%% Closed loop: a worker starts its next operation when the last one returned.
%% Open loop (`{rate, R}'): worker k's i-th operation is due at start + i/R seconds;
%% its latency is measured from that intended start (or from its real start, if it
%% started early), so time spent waiting behind a slow operation counts, as it would
%% for a client that does not wait for the system (coordinated omission corrected).
%% Think time (`{think, MeanMs}'): a closed loop whose worker waits before each
%% operation for an exponentially distributed time of mean `MeanMs' (basho_bench's
%% `{rate, R}' mode, R = 1000 / MeanMs), so that a node offers about the same load
%% whatever the size of the cluster; latency is measured from the operation's start.
-module(terrain_bench_instance).
-behaviour(gen_server).

%% API
%% exports_not_used: start_link/1 is the child spec of terrain_bench_instance_sup.
-ignore_xref([{start_link, 1}]).

-export([start_link/1,
         files/1]).

%% gen_server callbacks
-export([init/1,
         handle_call/3,
         handle_cast/2,
         handle_info/2,
         terminate/2]).

%% Internal exports
-export([worker/6]).

-record(state, {config :: terrain_bench_config:config(),
                dir :: file:filename(),
                owner :: pid(),
                ref :: reference(),
                ops :: [terrain_bench_config:operation()],
                recorders :: #{terrain_bench_config:operation() => terrain_bench_hdr:recorder()},
                errors :: ets:tid(),
                workers = [] :: [pid()],
                files = #{} :: #{term() => file:io_device()},
                measure_start_ms = 0 :: integer(),
                end_ms = 0 :: integer(),
                last_tick_ms = 0 :: integer(),
                previous = #{} :: #{terrain_bench_config:operation() => terrain_bench_hdr:histogram()},
                previous_errors = #{} :: #{{atom(), atom()} => non_neg_integer()},
                baseline_errors = #{} :: #{{atom(), atom()} => non_neg_integer()},
                phase = ready :: ready | warmup | measuring | draining}).

-define(LATENCY_COLUMNS, "elapsed,window,n,min,mean,median,95th,99th,99_9th,max,errors").
-define(SUMMARY_COLUMNS, "elapsed,window,total,successful,failed").
-define(DRAIN_GRACE_MS, 1000).

%%--------------------------------------------------------------------
%% API

%% @doc Starts an instance. `Args': `config', `dir' (this node's output directory,
%% created), `nodes' (the cluster), `owner' (the coordinator, told `{terrain_bench,
%% Ref, done, node()}' at the end), `ref'.
-spec start_link(#{config := terrain_bench_config:config(), dir := file:filename(), nodes := [node()],
                   owner := pid(), ref := reference()}) -> {ok, pid()} | {error, term()}.
start_link(Args) ->
    gen_server:start_link(?MODULE, Args, []).

%% @doc The files an instance writes for a configuration, relative to its directory.
-spec files(terrain_bench_config:config()) -> [string()].
files(#{operations := Ops}) ->
    ["summary.csv", "errors.csv"]
        ++ lists:append([[atom_to_list(Op) ++ "_latencies.csv", atom_to_list(Op) ++ ".hlog"] || {Op, _} <- Ops]).

%%--------------------------------------------------------------------
%% gen_server callbacks

%% @doc Opens the files, resolves the targets and starts the workers, which wait
%% for `go'.
-spec init(map()) -> {ok, #state{}} | {stop, term()}.
init(#{config := Config, dir := Dir, nodes := Nodes, owner := Owner, ref := Ref}) ->
    process_flag(trap_exit, true),
    #{operations := Weighted, concurrent := Concurrent} = Config,
    Ops = [Op || {Op, _} <- Weighted],
    case targets(Config, Nodes) of
        {ok, Targets} ->
            case open_files(Dir, Ops) of
                {ok, Files} ->
                    Recorders = maps:from_list([{Op, terrain_bench_hdr:new_recorder()} || Op <- Ops]),
                    Errors = ets:new(terrain_bench_errors, [set, public, {write_concurrency, true}]),
                    Choose = choose_predicates(Config),
                    Table = op_table(Weighted, Recorders),
                    Workers = [spawn_link(?MODULE, worker,
                                          [terrain_bench_ops:new_worker(I, Config, Nodes, Choose),
                                           Table, list_to_tuple(Targets), Errors, Config, self()])
                               || I <- lists:seq(1, Concurrent)],
                    {ok, #state{config = Config, dir = Dir, owner = Owner, ref = Ref, ops = Ops,
                                recorders = Recorders, errors = Errors, workers = Workers, files = Files}};
                {error, _} = Error ->
                    {stop, Error}
            end;
        {error, _} = Error ->
            {stop, Error}
    end.

%% @doc `{go, StartSystemUs}': start at that wall-clock time (microseconds since the
%% epoch), the same on every node.
-spec handle_call(term(), gen_server:from(), #state{}) ->
          {reply, term(), #state{}} | {stop, term(), term(), #state{}}.
handle_call({go, StartSystemUs}, _From, #state{phase = ready, config = Config, workers = Workers} = State) ->
    #{warmup := Warmup, duration := Duration} = Config,
    StartUs = erlang:monotonic_time(microsecond) + (StartSystemUs - erlang:system_time(microsecond)),
    StartMs = StartUs div 1000,
    MeasureStartMs = StartMs + Warmup * 1000,
    EndMs = MeasureStartMs + Duration * 1000,
    PerUs = erlang:convert_time_unit(1, microsecond, native),
    _ = [W ! {go, StartUs * PerUs, EndMs * 1000 * PerUs} || W <- Workers],
    _ = erlang:start_timer(MeasureStartMs, self(), measure, [{abs, true}]),
    case written(State, fun() -> write_headers(State, StartSystemUs div 1000 + Warmup * 1000) end) of
        {stop, Reason, _} -> {stop, Reason, {error, Reason}, State};
        ok -> {reply, ok, State#state{measure_start_ms = MeasureStartMs, end_ms = EndMs, phase = warmup}}
    end;
handle_call(_Request, _From, State) ->
    {reply, {error, unexpected}, State}.

%% @doc No casts are expected.
-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Msg, State) ->
    {noreply, State}.

%% @doc Timers (start of measurement, intervals, end of the drain) and workers'
%% exits.
-spec handle_info(term(), #state{}) -> {noreply, #state{}} | {stop, term(), #state{}}.
handle_info({timeout, _, measure}, #state{recorders = Recorders, measure_start_ms = Start} = State) ->
    Baseline = maps:map(fun(_, R) -> terrain_bench_hdr:snapshot(R) end, Recorders),
    written(State, fun() -> schedule_tick(State#state{previous = Baseline, baseline_errors = error_counts(State),
                                                      previous_errors = error_counts(State), last_tick_ms = Start,
                                                      phase = measuring}) end);
handle_info({timeout, _, tick}, #state{phase = measuring} = State) ->
    written(State, fun() -> schedule_tick(report(State)) end);
handle_info({timeout, _, drained}, #state{phase = draining} = State) ->
    written(State, fun() -> finish(State) end);
handle_info({'EXIT', Pid, Why}, #state{workers = Workers} = State) ->
    case lists:member(Pid, Workers) of
        true ->
            _ = Why =:= normal orelse
                logger:warning("terrain_bench: a worker on ~s crashed: ~0tp", [node(), Why]),
            Left = lists:delete(Pid, Workers),
            case {Left, State#state.phase} of
                {[], draining} -> written(State, fun() -> finish(State#state{workers = []}) end);
                _ -> {noreply, State#state{workers = Left}}
            end;
        false ->
            {noreply, State}
    end;
handle_info(_Msg, State) ->
    {noreply, State}.

%% @doc Closes the files (each row is on disk already).
-spec terminate(term(), #state{}) -> ok.
terminate(_Reason, #state{files = Files, workers = Workers}) ->
    [exit(W, kill) || W <- Workers],
    _ = [file:close(F) || F <- maps:values(Files)],
    ok.

%%--------------------------------------------------------------------
%% Workers

%% @doc A worker: waits for `go', then runs operations until the end time.
-spec worker(terrain_bench_ops:worker(), tuple(), tuple(), ets:tid(), terrain_bench_config:config(), pid()) -> ok.
worker(W, Table, Targets, Errors, #{mode := Mode}, _Instance) ->
    receive
        {go, Start, End} ->
            wait_until(Start),
            PerUs = erlang:convert_time_unit(1, microsecond, native),
            case Mode of
                closed ->
                    closed(W, Table, Targets, Errors, End, PerUs, erlang:monotonic_time());
                {think, MeanMs} ->
                    Loop = #{table => Table, targets => Targets, errors => Errors, end_time => End,
                             per_us => PerUs, think_ms => MeanMs},
                    think(W, Loop, erlang:monotonic_time());
                {rate, Rate} ->
                    Loop = #{table => Table, targets => Targets, errors => Errors, end_time => End,
                             per_us => PerUs},
                    open(W, Loop, Start, round(erlang:convert_time_unit(1, second, native) / Rate))
            end
    end.

wait_until(NativeTime) ->
    case (NativeTime - erlang:monotonic_time()) div erlang:convert_time_unit(1, millisecond, native) of
        Ms when Ms > 0 -> receive after Ms -> ok end;
        _ -> ok
    end.

%% The end time is checked against the previous operation's stop time (its second
%% timestamp): two clock reads per operation.
closed(_W, _Table, _Targets, _Errors, End, _PerUs, Now) when Now >= End ->
    ok;
closed(W, Table, Targets, Errors, End, PerUs, _Now) ->
    {W2, Stop} = operation(W, Table, Targets, Errors, PerUs, now),
    closed(W2, Table, Targets, Errors, End, PerUs, Stop).

%% Think time: a wait drawn before each operation (none is started after the end
%% time), then the operation, measured from its start.
think(_W, #{end_time := End}, Now) when Now >= End ->
    ok;
think(W, #{table := Table, targets := Targets, errors := Errors, per_us := PerUs, end_time := End,
           think_ms := MeanMs} = Loop, Now) ->
    Wait = think_ms(MeanMs, rand:uniform_real()),
    case Now + Wait * PerUs * 1000 >= End of
        true ->
            ok;
        false ->
            _ = Wait > 0 andalso receive after Wait -> ok end,
            {W2, Stop} = operation(W, Table, Targets, Errors, PerUs, now),
            think(W2, Loop, Stop)
    end.

%% @doc A think time in whole milliseconds: the exponential distribution of mean
%% `MeanMs' at the uniform draw `U' in (0, 1] (inverse transform: -MeanMs * ln U),
%% rounded to the millisecond.
-spec think_ms(number(), float()) -> non_neg_integer().
think_ms(MeanMs, U) when MeanMs > 0, U > 0, U =< 1 ->
    round(-MeanMs * math:log(U)).

open(_W, #{end_time := End}, Intended, _Interval) when Intended >= End ->
    ok;
open(W, #{table := Table, targets := Targets, errors := Errors, per_us := PerUs} = Loop, Intended, Interval) ->
    wait_until(Intended),
    {W2, _Stop} = operation(W, Table, Targets, Errors, PerUs, Intended),
    open(W2, Loop, Intended + Interval, Interval).

%% One operation drawn from the table, run and recorded; its latency is measured from
%% its start (`now') or, in the open loop, from its intended start when that was
%% earlier (a late start counts: no coordinated omission). Returns the worker's state
%% and the stop time.
operation(W, Table, Targets, Errors, PerUs, Intended) ->
    {Op, Recorder, P2P} = pick(Table),
    Target = target(P2P, Targets),
    W1 = terrain_bench_ops:prepare(Op, W),
    Start = erlang:monotonic_time(),
    {Outcome, W2} = terrain_bench_ops:run(Op, Target, W1),
    Stop = erlang:monotonic_time(),
    From = case Intended of
               now -> Start;
               _ -> erlang:min(Start, Intended)
           end,
    record(Outcome, Op, Recorder, (Stop - From) div PerUs, Errors),
    {W2, Stop}.

record(ok, _Op, Recorder, Us, _Errors) ->
    terrain_bench_hdr:record(Recorder, Us);
record({error, Kind}, Op, _Recorder, _Us, Errors) ->
    _ = ets:update_counter(Errors, {Op, Kind}, 1, {{Op, Kind}, 0}),
    ok.

%% The operation table: {Op, Recorder, P2P} for one operation, or {TotalWeight,
%% [{CumulativeWeight, {Op, Recorder, P2P}}]}.
op_table([{Op, _}], Recorders) ->
    {single, {Op, maps:get(Op, Recorders), p2p(Op)}};
op_table(Weighted, Recorders) ->
    {Total, Rows} = lists:foldl(fun({Op, W}, {Sum, Acc}) ->
                                        {Sum + W, [{Sum + W, {Op, maps:get(Op, Recorders), p2p(Op)}} | Acc]}
                                end, {0, []}, Weighted),
    {Total, lists:reverse(Rows)}.

pick({single, Entry}) ->
    Entry;
pick({Total, Rows}) ->
    pick_row(rand:uniform(Total), Rows).

pick_row(R, [{Cumulative, Entry} | _]) when R =< Cumulative -> Entry;
pick_row(R, [_ | Rows]) -> pick_row(R, Rows).

target(false, _Targets) -> undefined;
target(true, {Only}) -> Only;
target(true, Targets) -> element(rand:uniform(tuple_size(Targets)), Targets).

p2p(Op) ->
    lists:member(Op, [spawn, rpc, erpc, gen_server_call, fsm_server_call]).

%%--------------------------------------------------------------------
%% Internal

%% The nodes P2P operations go to: the others (this node when it is alone), those
%% of them that satisfy the predicates, or the nodes of a pg group's members.
targets(#{target := random}, Nodes) ->
    non_empty(Nodes -- [node()], Nodes);
targets(#{target := {group, Scope, Group}}, _Nodes) ->
    try pg:get_members(Scope, Group) of
        Pids -> non_empty(lists:usort([node(P) || P <- Pids]), [])
    catch
        error:badarg -> {error, {bench, {no_targets, node()}}}
    end;
targets(#{target := Preds}, Nodes) ->
    case terrain:choose_nodes(Nodes -- [node()], Preds) of
        Chosen when is_list(Chosen) -> non_empty(Chosen, []);
        _ -> {error, {bench, {no_targets, node()}}}
    end.

non_empty([], [Self]) when Self =:= node() -> {ok, [Self]};
non_empty([], _) -> {error, {bench, {no_targets, node()}}};
non_empty(Targets, _) -> {ok, Targets}.

choose_predicates(#{target := Preds}) when is_list(Preds) -> Preds;
choose_predicates(_Config) -> [{vm_schedulers_online, ge, 1}].

open_files(Dir, Ops) ->
    Names = [{summary, "summary.csv"}]
        ++ lists:append([[{{latencies, Op}, atom_to_list(Op) ++ "_latencies.csv"},
                          {{log, Op}, atom_to_list(Op) ++ ".hlog"}] || Op <- Ops]),
    case filelib:ensure_dir(filename:join(Dir, "x")) of
        ok -> open_each(Dir, Names, #{});
        {error, Why} -> {error, {bench, {file, Dir, Why}}}
    end.

open_each(_Dir, [], Files) ->
    {ok, Files};
open_each(Dir, [{Key, Name} | Rest], Files) ->
    File = filename:join(Dir, Name),
    case file:open(File, [write, exclusive, raw, binary]) of
        {ok, Fd} ->
            open_each(Dir, Rest, Files#{Key => Fd});
        {error, Why} ->
            _ = [file:close(F) || F <- maps:values(Files)],
            {error, {bench, {file, File, Why}}}
    end.

write_headers(#state{files = Files, ops = Ops}, MeasureStartMs) ->
    put_file(maps:get(summary, Files), [?SUMMARY_COLUMNS, $\n]),
    [begin
         put_file(maps:get({latencies, Op}, Files), [?LATENCY_COLUMNS, $\n]),
         Comment = io_lib:format("terrain bench ~s on ~s, latencies in microseconds", [Op, node()]),
         put_file(maps:get({log, Op}, Files), terrain_bench_hdr:log_header(Comment, MeasureStartMs))
     end || Op <- Ops],
    sync(Files).

schedule_tick(#state{end_ms = EndMs, last_tick_ms = Last, config = #{report_interval := Interval}} = State) ->
    case Last + Interval * 1000 >= EndMs of
        true ->
            %% the last interval ends at the end time: written once every worker has
            %% finished its last operation (at most its deadline later)
            #{timeout := Timeout} = State#state.config,
            _ = erlang:start_timer(EndMs + Timeout + ?DRAIN_GRACE_MS, self(), drained, [{abs, true}]),
            case State#state.workers of
                [] -> finish(State#state{phase = draining});
                _ -> {noreply, State#state{phase = draining}}
            end;
        false ->
            _ = erlang:start_timer(Last + Interval * 1000, self(), tick, [{abs, true}]),
            {noreply, State}
    end.

%% One interval: the difference of the recorders to the previous snapshot.
report(#state{recorders = Recorders, previous = Previous, files = Files, ops = Ops,
              measure_start_ms = Start, last_tick_ms = Last} = State) ->
    Now = erlang:min(erlang:monotonic_time(millisecond), erlang:max(State#state.end_ms, Last)),
    TickMs = erlang:max(Now, Last),
    Snapshots = maps:map(fun(_, R) -> terrain_bench_hdr:snapshot(R) end, Recorders),
    Errors = error_counts(State),
    WindowErrors = maps:map(fun(K, N) -> N - maps:get(K, State#state.previous_errors, 0) end, Errors),
    Elapsed = (TickMs - Start) / 1000,
    Window = (TickMs - Last) / 1000,
    Rows = [begin
                H = terrain_bench_hdr:subtract(maps:get(Op, Snapshots), maps:get(Op, Previous)),
                OpErrors = lists:sum([N || {{O, _}, N} <- maps:to_list(WindowErrors), O =:= Op]),
                put_file(maps:get({latencies, Op}, Files), latency_row(Elapsed, Window, H, OpErrors)),
                put_file(maps:get({log, Op}, Files),
                                terrain_bench_hdr:log_line(atom_to_list(Op), Last - Start, TickMs - Last, H)),
                {terrain_bench_hdr:count(H), OpErrors}
            end || Op <- Ops],
    Successful = lists:sum([N || {N, _} <- Rows]),
    Failed = lists:sum([E || {_, E} <- Rows]),
    put_file(maps:get(summary, Files),
                    io_lib:format("~s,~s,~b,~b,~b~n", [num(Elapsed), num(Window), Successful + Failed,
                                                         Successful, Failed])),
    write_errors(State, Errors),
    sync(Files),
    State#state{previous = Snapshots, previous_errors = Errors, last_tick_ms = TickMs}.

latency_row(Elapsed, Window, H, Errors) ->
    P = fun(Q) -> terrain_bench_hdr:percentile(H, Q) end,
    io_lib:format("~s,~s,~b,~b,~s,~b,~b,~b,~b,~b,~b~n",
                  [num(Elapsed), num(Window), terrain_bench_hdr:count(H), terrain_bench_hdr:min(H),
                   num(terrain_bench_hdr:mean(H)), P(50), P(95), P(99), P(99.9), terrain_bench_hdr:max(H),
                   Errors]).

num(F) -> float_to_list(float(F), [{decimals, 3}, compact]).

error_counts(#state{errors = Errors}) ->
    maps:from_list(ets:tab2list(Errors)).

%% errors.csv: op, kind, count since the start of measurement; rewritten whole each
%% interval (to a temporary name, then renamed).
write_errors(#state{dir = Dir, baseline_errors = Baseline}, Errors) ->
    Rows = lists:sort([{Op, Kind, N - maps:get(K, Baseline, 0)} || {{Op, Kind} = K, N} <- maps:to_list(Errors),
                                                                   N > maps:get(K, Baseline, 0)]),
    File = filename:join(Dir, "errors.csv"),
    Tmp = File ++ ".tmp",
    Text = ["op,kind,count\n" | [io_lib:format("~s,~s,~b~n", [Op, Kind, N]) || {Op, Kind, N} <- Rows]],
    case file:write_file(Tmp, Text, [sync]) of
        ok -> checked(file:rename(Tmp, File));
        {error, Why} -> _ = file:delete(Tmp), throw({bench_write, File, Why})
    end.

sync(Files) ->
    [checked(file:datasync(F)) || F <- maps:values(Files)],
    ok.

%% Writes that a full or read-only disk refuses stop the instance with
%% {bench, {file, Dir, Reason}} (written/2), never with a badmatch and a crash report.
put_file(Fd, Data) ->
    checked(file:write(Fd, Data)).

checked(ok) -> ok;
checked({error, Why}) -> throw({bench_write, undefined, Why}).

%% Runs a step that writes; a refused write stops the instance, naming the error.
written(#state{dir = Dir} = State, Step) ->
    try Step()
    catch throw:{bench_write, File, Why} ->
            {stop, {bench, {file, case File of undefined -> Dir; _ -> File end, Why}}, State}
    end.

%% The last interval, then tell the coordinator and stop.
finish(#state{owner = Owner, ref = Ref, workers = Workers} = State) ->
    [exit(W, kill) || W <- Workers],
    State1 = report(State#state{workers = []}),
    Owner ! {terrain_bench, Ref, done, node()},
    {stop, normal, State1}.

%%--------------------------------------------------------------------
%% Tests

-ifdef(TEST).
-include_lib("eunit/include/eunit.hrl").

think_ms_is_the_exponential_quantile_rounded_to_the_millisecond_test() ->
    ?assertEqual(0, think_ms(100, 1.0)),
    ?assertEqual(100, think_ms(100, math:exp(-1))),
    ?assertEqual(69, think_ms(100, 0.5)),
    ?assertEqual(230, think_ms(100, 0.1)),
    ?assertError(function_clause, think_ms(100, 0.0)),
    ?assertError(function_clause, think_ms(0, 0.5)).

think_ms_has_the_mean_it_is_given_test() ->
    _ = rand:seed(exsss, {24, 3, 2014}),
    Draws = [think_ms(40, rand:uniform_real()) || _ <- lists:seq(1, 20000)],
    Mean = lists:sum(Draws) / length(Draws),
    %% the standard error of the mean of 20,000 draws is 40 / sqrt(20000) = 0.28 ms
    ?assert(abs(Mean - 40) < 1.5),
    ?assert(lists:min(Draws) >= 0).
-endif.
