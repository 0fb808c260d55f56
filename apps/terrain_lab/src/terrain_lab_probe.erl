%% @private
%% @doc `terrain probe': all-pairs round-trip times between Erlang nodes (seed 000,
%% §4.3.1 and §4.4).
%%
%% == Method ==
%% For every ordered pair (A, B) a <em>client</em> process on A exchanges messages with
%% its own <em>echo</em> process on B, which replies at once (the seed's server; one per
%% client so that clients never queue behind each other at the server). After
%% `warmup' unrecorded exchanges (connection set-up, code loading, caches), the client
%% runs `batches' batches of `messages' exchanges, each a `{ping, Client, Seq,
%% Payload}' answered by `{pong, Echo, Seq, Payload}' with a payload of
%% `payload_bytes' bytes, and times every exchange with the monotonic clock. The
%% seed's figure per pair, the mean time of 100 batches of 100 exchanges, is the
%% `mean' here.
%%
%% Strategies (the seed's two):
%% <ul>
%% <li>`sequential' (strategy 1, the default): one source node at a time runs its
%%     clients to all other nodes at once; then the next source. Little traffic: it
%%     measures the network rather than the load the probe itself creates.</li>
%% <li>`concurrent' (strategy 2): every pair at once; the clients start their batches
%%     together after all have warmed up. High traffic, which made the hierarchy
%%     visible on the seed's Athos cluster; on a small machine running many nodes
%%     the contention for CPU dominates.</li>
%% </ul>
%%
%% Per pair the client reports, over all its recorded exchanges, the minimum, median,
%% mean, 95th percentile (linear interpolation between order statistics) and sample
%% standard deviation in µs. `latency.json' (DESIGN.md, format `terrain.latency/1')
%% holds each as an n × n matrix, row = the client's node (source), column = the echo's
%% node; the diagonal is 0 (a node is not probed against itself) and a failed pair is
%% `null'. `latency.csv' has one row per ordered pair.
%%
%% Every exchange has a deadline (`timeout', default 5 s); a pair whose exchange times
%% out or whose node goes down fails alone and the others go on. The controller gives up
%% when no client has reported for `messages' × `timeout' + 10 s.
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

-define(FORMAT, <<"terrain.latency/1">>).
-define(CSV_COLUMNS, [from, to, exchanges, min_us, median_us, mean_us, p95_us, stddev_us, status]).
-define(STATS, [min, median, mean, p95, stddev]).
-define(CALL_TIMEOUT, 10000).

-type options() ::
        #{batches => pos_integer(),            % batches per pair (default 100)
          messages => pos_integer(),           % exchanges per batch (default 100)
          payload => non_neg_integer(),        % payload bytes per message (default 0)
          strategy => sequential | concurrent, % default sequential
          warmup => non_neg_integer(),         % unrecorded exchanges first (default: messages)
          timeout => pos_integer(),            % ms deadline of one exchange (default 5000)
          progress => fun((progress()) -> any()) | none}. % called at most once a second

-type progress() :: #{done := non_neg_integer(),   % batches finished, all pairs
                      total := pos_integer(),
                      elapsed_ms := non_neg_integer(),
                      eta_ms := non_neg_integer() | unknown}.

-type stats() :: #{min := float(), median := float(), mean := float(), p95 := float(), stddev := float(),
                   exchanges := pos_integer()}.

-type result() :: #{nodes := [node()],
                    options := options(),
                    started_at := binary(),
                    finished_at := binary(),
                    duration_ms := non_neg_integer(),
                    pairs := #{{node(), node()} => {ok, stats()} | {error, term()}}}.

-define(DEFAULTS, #{batches => 100, messages => 100, payload => 0, strategy => sequential, timeout => 5000,
                    progress => none}).

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
check(strategy, V) when V =:= sequential; V =:= concurrent -> ok;
check(warmup, V) when is_integer(V), V >= 0 -> ok;
check(timeout, V) when is_integer(V), V > 0 -> ok;
check(progress, V) when V =:= none; is_function(V, 1) -> ok;
check(Key, Value) ->
    case maps:is_key(Key, ?DEFAULTS) orelse Key =:= warmup of
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
    Files = [Json, Csv, filename:join(Dir, "manifest.json")],
    Steps = [fun(_) -> terrain_json:write_file(Json, latency_json(Result)) end,
             fun(_) -> write_csv(Csv, Nodes, Pairs) end,
             fun(_) -> terrain_lab_run:write_manifest(Dir, probe,
                                                      [#{kind => latency, file => <<"latency.json">>,
                                                         parameters => Parameters},
                                                       #{kind => latency_csv, file => <<"latency.csv">>}])
             end,
             fun(_) -> {ok, Files} end],
    terrain_lab_steps:run(Steps, Dir).

%% @doc A sentence for the errors of the probe.
-spec format_error({probe, term()}) -> iolist().
format_error({probe, {bad_option, strategy, V}}) ->
    io_lib:format("--strategy ~0tp: expected concurrent or sequential", [V]);
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
format_error({probe, stalled}) ->
    "no client reported for longer than a batch may take; the probe was stopped".

expected(batches) -> "an integer > 0";
expected(messages) -> "an integer > 0";
expected(payload) -> "an integer >= 0";
expected(warmup) -> "an integer >= 0";
expected(timeout) -> "milliseconds > 0";
expected(progress) -> "none or a fun of one argument";
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

measure(Nodes, #{strategy := Strategy, batches := Batches, progress := Progress} = Opts) ->
    Started = terrain_lab_run:timestamp(),
    T0 = erlang:monotonic_time(millisecond),
    Pairs = [{A, B} || A <- Nodes, B <- Nodes, A =/= B],
    Total = length(Pairs) * Batches,
    Rounds = case Strategy of
                 concurrent -> [Pairs];
                 sequential -> [[{A, B} || {A1, B} <- Pairs, A1 =:= A] || A <- Nodes]
             end,
    Tracker0 = #{done => 0, total => Total, t0 => T0, last => T0, progress => Progress},
    {Results, _} = lists:foldl(fun(Round, {Acc, Tracker}) ->
                                       {R, Tracker1} = round(Round, Opts, Tracker),
                                       {maps:merge(Acc, R), Tracker1}
                               end, {#{}, Tracker0}, Rounds),
    #{nodes => Nodes, options => Opts, started_at => Started, finished_at => terrain_lab_run:timestamp(),
      duration_ms => erlang:monotonic_time(millisecond) - T0, pairs => Results}.

%% One round: a client per pair, all warmed up, then all measuring at once.
round(Pairs, #{messages := Messages, timeout := Timeout} = Opts, Tracker) ->
    Ref = make_ref(),
    Stall = Messages * Timeout + 10000,
    Clients = maps:from_list([begin
                                  Pid = spawn(A, ?MODULE, client, [self(), Ref, B, client_config(Opts)]),
                                  {erlang:monitor(process, Pid), {Pid, {A, B}}}
                              end || {A, B} <- Pairs]),
    {Ready, Failed} = await_ready(Ref, Clients, maps:size(Clients), #{}, #{}, Stall),
    maps:foreach(fun(_, {Pid, _}) -> Pid ! {Ref, go} end, Ready),
    collect(Ref, Ready, Failed, Tracker, Stall).

client_config(#{batches := B, messages := M, payload := P, warmup := W, timeout := T}) ->
    #{batches => B, messages => M, payload => P, warmup => W, timeout => T}.

await_ready(_Ref, _Clients, 0, Ready, Failed, _Stall) ->
    {Ready, Failed};
await_ready(Ref, Clients, Left, Ready, Failed, Stall) ->
    receive
        {Ref, ready, Pid} ->
            [MRef] = [M || {M, {P, _}} <- maps:to_list(Clients), P =:= Pid],
            await_ready(Ref, Clients, Left - 1, Ready#{MRef => maps:get(MRef, Clients)}, Failed, Stall);
        {'DOWN', MRef, process, _, Why} when is_map_key(MRef, Clients) ->
            {_, Pair} = maps:get(MRef, Clients),
            await_ready(Ref, Clients, Left - 1, Ready, Failed#{Pair => {error, Why}}, Stall)
    after Stall ->
            stop_clients(Clients),
            Waiting = [Pair || {M, {_, Pair}} <- maps:to_list(Clients), not is_map_key(M, Ready),
                               not is_map_key(Pair, Failed)],
            {Ready, maps:merge(Failed, maps:from_list([{P, {error, stalled}} || P <- Waiting]))}
    end.

collect(_Ref, Running, Results, Tracker, _Stall) when map_size(Running) =:= 0 ->
    {Results, Tracker};
collect(Ref, Running, Results, Tracker, Stall) ->
    receive
        {Ref, batch, _Pid} ->
            collect(Ref, Running, Results, tick(Tracker), Stall);
        {Ref, done, Pid, Stats} ->
            [MRef] = [M || {M, {P, _}} <- maps:to_list(Running), P =:= Pid],
            {{_, Pair}, Running1} = maps:take(MRef, Running),
            erlang:demonitor(MRef, [flush]),
            collect(Ref, Running1, Results#{Pair => {ok, Stats}}, Tracker, Stall);
        {'DOWN', MRef, process, _, Why} when is_map_key(MRef, Running) ->
            {{_, Pair}, Running1} = maps:take(MRef, Running),
            collect(Ref, Running1, Results#{Pair => {error, Why}}, Tracker, Stall)
    after Stall ->
            stop_clients(Running),
            {maps:merge(Results, maps:from_list([{Pair, {error, stalled}} || {_, {_, Pair}} <- maps:to_list(Running)])),
             Tracker}
    end.

stop_clients(Clients) ->
    maps:foreach(fun(MRef, {Pid, _}) -> erlang:demonitor(MRef, [flush]), exit(Pid, kill) end, Clients).

tick(#{done := Done, total := Total, t0 := T0, last := Last, progress := Progress} = Tracker) ->
    Now = erlang:monotonic_time(millisecond),
    Done1 = Done + 1,
    case Progress =/= none andalso (Now - Last >= 1000 orelse Done1 =:= Total) of
        true ->
            Elapsed = Now - T0,
            Progress(#{done => Done1, total => Total, elapsed_ms => Elapsed,
                       eta_ms => round(Elapsed * (Total - Done1) / Done1)}),
            Tracker#{done => Done1, last => Now};
        false ->
            Tracker#{done => Done1}
    end.

%%--------------------------------------------------------------------
%% Client and echo (on the probed nodes)

%% @doc A client on node A: spawns its echo on `Target', warms up, reports ready,
%% waits for `go', runs the batches (reporting each) and reports its statistics.
-spec client(pid(), reference(), node(), map()) -> ok.
client(Controller, Ref, Target, #{batches := Batches, messages := Messages, payload := PayloadBytes,
                                  warmup := Warmup, timeout := Timeout}) ->
    ControllerMon = erlang:monitor(process, Controller),
    Echo = spawn(Target, ?MODULE, echo, [self()]),
    EchoMon = erlang:monitor(process, Echo),
    Payload = binary:copy(<<0>>, PayloadBytes),
    Exchange = fun(Seq) -> exchange(Echo, EchoMon, Seq, Payload, Timeout) end,
    lists:foreach(Exchange, lists:seq(1, Warmup)),
    Controller ! {Ref, ready, self()},
    receive
        {Ref, go} -> ok;
        {'DOWN', ControllerMon, process, _, Why} -> exit({controller_down, Why})
    after Messages * Timeout + 10000 ->
            exit(no_go)
    end,
    Samples = lists:foldl(fun(Batch, Acc) ->
                                  Times = [Exchange(Batch * Messages + I) || I <- lists:seq(1, Messages)],
                                  Controller ! {Ref, batch, self()},
                                  Times ++ Acc
                          end, [], lists:seq(1, Batches)),
    Controller ! {Ref, done, self(), stats(Samples)},
    ok.

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

stats(Samples) ->
    Sorted = lists:sort(Samples),
    N = length(Sorted),
    T = list_to_tuple(Sorted),
    Mean = lists:sum(Sorted) / N,
    Var = case N of
              1 -> 0.0;
              _ -> lists:sum([(X - Mean) * (X - Mean) || X <- Sorted]) / (N - 1)
          end,
    #{min => element(1, T), median => quantile(T, 0.5), mean => Mean, p95 => quantile(T, 0.95),
      stddev => math:sqrt(Var), exchanges => N}.

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
               duration_ms := Duration}) ->
    Matrix = fun(Stat) ->
                     [[case A =:= B of
                           true -> 0;
                           false -> case maps:get({A, B}, Pairs) of
                                        {ok, S} -> maps:get(Stat, S);
                                        {error, _} -> null
                                    end
                       end || B <- Nodes] || A <- Nodes]
             end,
    #{format => ?FORMAT,
      nodes => [atom_to_binary(N) || N <- Nodes],
      unit => <<"us">>,
      strategy => maps:get(strategy, Opts),
      batches => maps:get(batches, Opts),
      messages => maps:get(messages, Opts),
      warmup => maps:get(warmup, Opts),
      payload_bytes => maps:get(payload, Opts),
      started_at => Started,
      finished_at => Finished,
      duration_ms => Duration,
      diagonal => <<"zero: a node is not probed against itself">>,
      stats => maps:from_list([{S, Matrix(S)} || S <- ?STATS]),
      failed => [#{from => A, to => B, reason => iolist_to_binary(io_lib:format("~0tP", [Why, 12]))}
                 || {{A, B}, {error, Why}} <- lists:sort(maps:to_list(Pairs))]}.

write_csv(File, Nodes, Pairs) ->
    case terrain_lab_csv:create(File, ?CSV_COLUMNS) of
        {ok, Csv} ->
            try
                lists:foldl(fun({A, B}, ok) ->
                                    Row = case maps:get({A, B}, Pairs) of
                                              {ok, #{exchanges := X} = S} ->
                                                  #{from => A, to => B, exchanges => X, min_us => maps:get(min, S),
                                                    median_us => maps:get(median, S), mean_us => maps:get(mean, S),
                                                    p95_us => maps:get(p95, S), stddev_us => maps:get(stddev, S),
                                                    status => ok};
                                              {error, _} ->
                                                  #{from => A, to => B, exchanges => 0, status => failed}
                                          end,
                                    terrain_lab_csv:write_row(Csv, Row);
                               (_, Error) ->
                                    Error
                            end, ok, [{A, B} || A <- Nodes, B <- Nodes, A =/= B])
            after
                terrain_lab_csv:close(Csv)
            end;
        {error, _} = Error ->
            Error
    end.
