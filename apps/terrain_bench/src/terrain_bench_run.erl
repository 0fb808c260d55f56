%% @private
%% @doc The coordinator of a P2P run, on the node that asks for it (the CLI): starts
%% an instance on every node, releases them together (the barrier), leaves them
%% alone until they are done, then gathers their files and writes `summary.json'
%% from the merged histograms.
-module(terrain_bench_run).

%% API
-export([run/4,
         summarise/4]).

%% Internal exports (run on every node of a run by erpc)
-export([connect_peers/1,
         global_state/1]).

%% exports_not_used: both are called on every node of a run by erpc.
-ignore_xref([{connect_peers, 1}, {global_state, 1}]).

-define(CALL_TIMEOUT, 15000).
-define(BARRIER_MS, 1000).
%% The deadline of the full mesh before a run: 0.5 s per node, at least CALL_TIMEOUT
%% (100 VMs on this project's 2 shared cores connected and synchronised in 12 s).
-define(CONNECT_MS_PER_NODE, 500).
%% How often the nodes whose global is behind are asked again.
-define(GLOBAL_POLL_MS, 500).
-include_lib("terrain_json/include/terrain_formats.hrl").
-define(SUMMARY_FORMAT, ?TERRAIN_FORMAT_BENCH).
-define(PERCENTILES, [{p50, 50}, {p90, 90}, {p95, 95}, {p99, 99}, {p999, 99.9}]).

%%--------------------------------------------------------------------
%% API

%% @doc Runs the benchmark on `Nodes', each writing to `OutDir/<node>/', and writes
%% `OutDir/summary.json'. See `terrain_bench:run/4'.
-spec run([node()], terrain_bench_config:config(), file:filename(), map()) -> {ok, map()} | {error, term()}.
run(Nodes, Config, OutDir, Options) ->
    Progress = maps:get(progress, Options, fun(_) -> ok end),
    Ref = make_ref(),
    StartedAt = erlang:system_time(millisecond),
    case connect_then_start(Nodes, Config, OutDir, Ref, Progress) of
        {ok, Instances} ->
            StartAt = erlang:system_time(microsecond) + ?BARRIER_MS * 1000,
            Failed0 = go(Instances, StartAt),
            Progress(io_lib:format("bench: ~b instances released together; ~b s warm-up, ~b s measured~n",
                                   [length(Instances), maps:get(warmup, Config), maps:get(duration, Config)])),
            Failed = wait(Instances, Failed0, Ref, Config, StartAt, Progress),
            summarise(Nodes, Config, OutDir, #{failed => Failed, started_at => StartedAt});
        {error, _} = Error ->
            Error
    end.

%% @doc Reads the files the instances of `Nodes' wrote under `OutDir', merges them
%% and writes `OutDir/summary.json'; returns the summary.
-spec summarise([node()], terrain_bench_config:config(), file:filename(), map()) -> {ok, map()} | {error, term()}.
summarise(Nodes, #{operations := Weighted, duration := Duration} = Config, OutDir, Info) ->
    Ops = [Op || {Op, _} <- Weighted],
    PerNode = [{Node, node_data(Node, OutDir, Ops)} || Node <- Nodes],
    Measured = measured_s(PerNode, Duration),
    Operations = maps:from_list([{Op, operation_summary(Op, PerNode, Measured)} || Op <- Ops]),
    Failed = maps:get(failed, Info, []),
    Count = lists:sum([maps:get(count, S) || S <- maps:values(Operations)]),
    Errors = lists:sum([maps:get(error_count, S) || S <- maps:values(Operations)]),
    Summary = #{format => ?SUMMARY_FORMAT,
                started_at => rfc3339(maps:get(started_at, Info, erlang:system_time(millisecond))),
                config => terrain_bench_config:to_json(Config),
                nodes => [atom_to_binary(N) || N <- Nodes],
                measured_s => Measured,               % the time measured (less than the duration if stopped early)
                duration_s => Duration,
                failed_instances => [#{node => atom_to_binary(N), reason => reason(R)} || {N, R} <- Failed],
                total => #{count => Count, errors => Errors, throughput => Count / Measured},
                operations => Operations},
    case terrain_json:write_file(filename:join(OutDir, "summary.json"), Summary) of
        ok -> {ok, Summary};
        {error, _} = Error -> Error
    end.

%% @doc On a node of the run: connects to every other node of the run; returns the
%% nodes it could not connect to.
-spec connect_peers([node()]) -> {ok, [node()]}.
connect_peers(Nodes) ->
    {ok, [N || N <- Nodes, N =/= node(), net_kernel:connect_node(N) =/= true]}.

%% @doc On a node of the run: the other nodes of the run that this node's `global' has
%% not merged yet (not in its known nodes: their names not exchanged), and those that
%% `global:sync/0' would still wait for (not in its synced nodes). Both empty on a node
%% started with `-connect_all false' (its `global' synchronises with no one). Reads
%% `global''s own `get_known' and `get_synced' (OTP 25's global.erl), each with a deadline.
-spec global_state([node()]) -> {ok, #{unknown := [node()], unsynced := [node()]}}.
global_state(Nodes) ->
    case application:get_env(kernel, connect_all) of
        {ok, false} ->
            {ok, #{unknown => [], unsynced => []}};
        _ ->
            Others = lists:delete(node(), Nodes),
            Known = gen_server:call(global_name_server, get_known, ?CALL_TIMEOUT),
            Synced = gen_server:call(global_name_server, get_synced, ?CALL_TIMEOUT),
            {ok, #{unknown => Others -- Known, unsynced => Others -- Synced}}
    end.

%%--------------------------------------------------------------------
%% Internal

%% `connect': before the instances start, every node connects to every other and
%% global merges them all, so that neither is measured (DE-Bench's cluster was connected
%% before it ran; here the nodes of a spec cluster are connected to the CLI only). Then
%% `global' is in sync: every node's `global' knows every other node of the run (their
%% names exchanged under global's lock). This is not `global:sync/0' on every node:
%% OTP 25's global can leave a node's synced list without a peer it knows for good (at
%% 256 VMs, in most runs: the peer's `in_sync' never came), and `global:sync/0' there
%% waits for ever; the nodes it would wait for are named in the progress line.
connect(_Nodes, #{connect := false}, _Progress) ->
    ok;
connect([_] = _Nodes, _Config, _Progress) ->
    ok;
connect(Nodes, _Config, Progress) ->
    T0 = erlang:monotonic_time(millisecond),
    Deadline = T0 + max(?CALL_TIMEOUT, ?CONNECT_MS_PER_NODE * length(Nodes)),
    Results = erpc:multicall(Nodes, ?MODULE, connect_peers, [Nodes], Deadline - T0),
    case [{N, R} || {N, R} <- lists:zip(Nodes, Results), R =/= {ok, {ok, []}}] of
        [] ->
            connected(Nodes, T0, Deadline, Progress);
        [{Node, {ok, {ok, Others}}} | _] ->
            {error, {bench, {not_connected, Node, Others}}};
        [{Node, {_Class, Why}} | _] ->
            {error, {bench, {connect_failed, Node, Why}}}
    end.

connected(Nodes, T0, Deadline, Progress) ->
    Connected = erlang:monotonic_time(millisecond),
    case global_in_sync(Nodes, Nodes, #{}, Deadline) of
        {ok, Unsynced} ->
            Now = erlang:monotonic_time(millisecond),
            Progress(io_lib:format("bench: ~b nodes connected to each other in ~.1f s, global in sync (every "
                                   "node's global knows every other) ~.1f s later~n",
                                   [length(Nodes), (Connected - T0) / 1000, (Now - Connected) / 1000])),
            _ = [Progress(io_lib:format("bench: global:sync/0 on ~s would still wait for ~ts (known to its global, "
                                        "never marked synced)~n", [N, names(Ns)]))
                 || {N, Ns} <- lists:sort(maps:to_list(Unsynced)), Ns =/= []],
            ok;
        {error, _} = Error ->
            Error
    end.

%% Asks the nodes whose global does not know the whole run yet, again every
%% ?GLOBAL_POLL_MS until every node's does or the deadline passes (each ask within the
%% time left).
global_in_sync(Nodes, Pending, Unsynced, Deadline) ->
    Left = Deadline - erlang:monotonic_time(millisecond),
    Results = lists:zip(Pending, erpc:multicall(Pending, ?MODULE, global_state, [Nodes], max(Left, 1))),
    Unsynced1 = maps:merge(Unsynced, maps:from_list([{N, U} || {N, {ok, {ok, #{unsynced := U}}}} <- Results])),
    case [{N, R} || {N, R} <- Results, not in_sync(R)] of
        [] ->
            {ok, Unsynced1};
        Behind when Left > ?GLOBAL_POLL_MS ->
            timer:sleep(?GLOBAL_POLL_MS),
            global_in_sync(Nodes, [N || {N, _} <- Behind], Unsynced1, Deadline);
        [{Node, {ok, {ok, #{unknown := Unknown}}}} | _] ->
            {error, {bench, {global_not_in_sync, Node, Unknown}}};
        [{Node, {_Class, Why}} | _] ->
            {error, {bench, {connect_failed, Node, Why}}}
    end.

in_sync({ok, {ok, #{unknown := []}}}) -> true;
in_sync(_) -> false.

names(Nodes) ->
    lists:join(", ", [atom_to_list(N) || N <- Nodes]).

connect_then_start(Nodes, Config, OutDir, Ref, Progress) ->
    case connect(Nodes, Config, Progress) of
        ok -> start_instances(Nodes, Config, OutDir, Ref);
        {error, _} = Error -> Error
    end.

start_instances(Nodes, Config, OutDir, Ref) ->
    Results = erpc:multicall(Nodes, terrain_bench, start_instance,
                             [#{config => Config, nodes => Nodes, owner => self(), ref => Ref,
                                dir_root => filename:absname(OutDir)}], ?CALL_TIMEOUT),
    Started = [{N, P} || {N, {ok, {ok, P}}} <- lists:zip(Nodes, Results)],
    case [{N, R} || {N, R} <- lists:zip(Nodes, Results), not is_started(R)] of
        [] ->
            {ok, [{N, P, monitor(process, P)} || {N, P} <- Started]};
        [{Node, Why} | _] ->
            [exit(P, shutdown) || {_, P} <- Started],
            {error, {bench, {start_failed, Node, start_reason(Why)}}}
    end.

is_started({ok, {ok, Pid}}) -> is_pid(Pid);
is_started(_) -> false.

start_reason({ok, {error, Why}}) -> Why;
start_reason({error, {erpc, Why}}) -> Why;
start_reason({Class, Why}) -> {Class, Why}.

%% The barrier: every instance is ready (started); each is told the same absolute
%% start time, in the future, and from then on runs alone.
go(Instances, StartAt) ->
    Calls = [{N, erpc:send_request(N, gen_server, call, [P, {go, StartAt}, ?CALL_TIMEOUT])} || {N, P, _} <- Instances],
    lists:filtermap(fun({N, Req}) ->
                            try erpc:receive_response(Req, ?CALL_TIMEOUT + 1000) of
                                ok -> false;
                                Other -> {true, {N, Other}}
                            catch
                                Class:Why -> {true, {N, {Class, Why}}}
                            end
                    end, Calls).

%% Waits for every instance's `done' (or its death) until the end of the run plus
%% its drain; reports progress once per report interval, and once that the
%% measurement is over.
wait(Instances, Failed, Ref, #{warmup := Warmup, duration := Duration, timeout := Timeout,
                               report_interval := Interval}, StartAt, Progress) ->
    EndMs = StartAt div 1000 + (Warmup + Duration) * 1000,
    Pending = [I || {N, _, _} = I <- Instances, not lists:keymember(N, 1, Failed)],
    wait_loop(Pending, Failed, #{ref => Ref, deadline => EndMs + Timeout + 10000, end_ms => EndMs,
                                 total_s => Warmup + Duration, interval_ms => Interval * 1000,
                                 progress => Progress, draining => false}).

wait_loop([], Failed, _Wait) ->
    lists:reverse(Failed);
wait_loop(Pending, Failed, #{ref := Ref, deadline := Deadline, progress := Progress} = Wait) ->
    Now = erlang:system_time(millisecond),
    case Now >= Deadline of
        true ->
            [erlang:demonitor(M, [flush]) || {_, _, M} <- Pending],
            lists:reverse(Failed) ++ [{N, no_answer} || {N, _, _} <- Pending];
        false ->
            receive
                {terrain_bench, Ref, done, Node} ->
                    {value, {_, _, M}, Rest} = lists:keytake(Node, 1, Pending),
                    erlang:demonitor(M, [flush]),
                    wait_loop(Rest, Failed, Wait);
                {'DOWN', M, process, _, Why} ->
                    case lists:keytake(M, 3, Pending) of
                        {value, {Node, _, _}, Rest} ->
                            Progress(io_lib:format("bench: the instance on ~s failed: ~0tp~n", [Node, Why])),
                            wait_loop(Rest, [{Node, Why} | Failed], Wait);
                        false ->
                            wait_loop(Pending, Failed, Wait)
                    end
            after erlang:min(maps:get(interval_ms, Wait), Deadline - Now) ->
                    wait_loop(Pending, Failed, tell(Pending, Wait))
            end
    end.

tell(_Pending, #{draining := true} = Wait) ->
    Wait;
tell(Pending, #{end_ms := EndMs, total_s := Total, progress := Progress} = Wait) ->
    case (EndMs - erlang:system_time(millisecond)) div 1000 of
        Left when Left > 0 ->
            Progress(io_lib:format("bench: ~b of ~b s, ~b s left, ~b instances running~n",
                                   [Total - Left, Total, Left, length(Pending)])),
            Wait;
        _ ->
            Progress(io_lib:format("bench: measured; waiting for ~b instances to write their last interval~n",
                                   [length(Pending)])),
            Wait#{draining := true}
    end.

%% One node's data, from its files: per operation the histogram of every interval
%% it wrote and its error counts. Files are read here when this node sees them (the
%% lab's nodes share a host), else from the node.
node_data(Node, OutDir, Ops) ->
    Dir = filename:join(OutDir, atom_to_list(Node)),
    Errors = parse_errors(read_node_file(Node, filename:join(Dir, "errors.csv"))),
    maps:from_list(
      [{Op, #{histogram => terrain_bench_hdr:merge([H || {_, _, H} <- Intervals]),
              %% seconds from the start of measurement to the end of the last interval
              measured_s => lists:max([0.0 | [Start + Length || {Start, Length, _} <- Intervals]]),
              errors => maps:get(Op, Errors, #{})}}
       || Op <- Ops,
          Intervals <- [terrain_bench_hdr:parse_log(read_node_file(Node, filename:join(Dir, atom_to_list(Op) ++ ".hlog")))]]).

%% The time the cluster measured: to the end of the last interval any node wrote, at
%% most the configured duration (a run stopped early, by a killed node or a stopped
%% cluster, divides by the time it really measured).
measured_s(PerNode, Duration) ->
    case lists:max([0.0 | [S || {_, Data} <- PerNode, #{measured_s := S} <- maps:values(Data)]]) of
        Measured when Measured > 0, Measured < Duration -> Measured;
        _ -> Duration
    end.

read_node_file(Node, File) ->
    case file:read_file(File) of
        {ok, Bin} -> Bin;
        {error, _} ->
            try erpc:call(Node, file, read_file, [File], ?CALL_TIMEOUT) of
                {ok, Bin} -> Bin;
                {error, _} -> <<>>
            catch
                _:_ -> <<>>
            end
    end.

%% errors.csv: op, kind, count (a torn file reads as no errors: it is replaced
%% whole, by rename, so it is never torn in practice).
parse_errors(Bin) ->
    Rows = [binary:split(L, <<",">>, [global]) || L <- binary:split(Bin, <<"\n">>, [global, trim_all])],
    lists:foldl(fun([Op, Kind, N], Acc) when Op =/= <<"op">> ->
                        Key = binary_to_existing_atom(Op),
                        Kinds = maps:get(Key, Acc, #{}),
                        Acc#{Key => Kinds#{Kind => binary_to_integer(N)}};
                   (_, Acc) ->
                        Acc
                end, #{}, Rows).

%% An operation's cluster figures: percentiles of the merged histograms, and
%% DE-Bench's figure beside them, the unweighted mean over nodes of each node's
%% percentile (over the nodes that completed the operation at least once).
operation_summary(Op, PerNode, Measured) ->
    Data = [{Node, maps:get(Op, D)} || {Node, D} <- PerNode],
    Merged = terrain_bench_hdr:merge([H || {_, #{histogram := H}} <- Data]),
    Errors = lists:foldl(fun({_, #{errors := E}}, Acc) ->
                                 maps:fold(fun(K, N, A) -> A#{K => maps:get(K, A, 0) + N} end, Acc, E)
                         end, #{}, Data),
    Count = terrain_bench_hdr:count(Merged),
    NonEmpty = [H || {_, #{histogram := H}} <- Data, map_size(H) > 0],
    #{count => Count,
      errors => Errors,
      error_count => lists:sum(maps:values(Errors)),
      throughput => Count / Measured,
      latency_us => latency(Merged),
      per_node_percentile_mean => per_node_mean(NonEmpty),
      per_node => maps:from_list(
                    [{atom_to_binary(Node), #{count => terrain_bench_hdr:count(H),
                                              error_count => lists:sum(maps:values(E)),
                                              p50 => terrain_bench_hdr:percentile(H, 50),
                                              p99 => terrain_bench_hdr:percentile(H, 99)}}
                     || {Node, #{histogram := H, errors := E}} <- Data])}.

latency(H) ->
    maps:from_list([{K, terrain_bench_hdr:percentile(H, P)} || {K, P} <- ?PERCENTILES]
                   ++ [{max, terrain_bench_hdr:max(H)}, {min, terrain_bench_hdr:min(H)},
                       {mean, terrain_bench_hdr:mean(H)}]).

per_node_mean([]) ->
    null;
per_node_mean(Hs) ->
    Mean = fun(F) -> lists:sum([F(H) || H <- Hs]) / length(Hs) end,
    maps:from_list([{K, Mean(fun(H) -> terrain_bench_hdr:percentile(H, P) end)} || {K, P} <- ?PERCENTILES]
                   ++ [{max, Mean(fun terrain_bench_hdr:max/1)}]).

reason(Why) ->
    iolist_to_binary(io_lib:format("~0tp", [Why])).

rfc3339(Ms) ->
    list_to_binary(calendar:system_time_to_rfc3339(Ms, [{unit, millisecond}, {offset, "Z"}])).

%%--------------------------------------------------------------------
%% Tests

-ifdef(TEST).
-include_lib("eunit/include/eunit.hrl").

%% A run stopped 4 s into 12 measured seconds divides by 4 s, not 12 (issue: 7,283
%% ops/s reported against about 21,850).
measured_s_is_the_time_measured_when_stopped_early_test() ->
    Stopped = [{a@h, #{rpc => #{measured_s => 4.0}}}, {b@h, #{rpc => #{measured_s => 3.0}}}],
    ?assertEqual(4.0, measured_s(Stopped, 12)),
    Full = [{a@h, #{rpc => #{measured_s => 12.0}}}],
    ?assertEqual(12, measured_s(Full, 12)),
    ?assertEqual(12, measured_s([{a@h, #{rpc => #{measured_s => 0.0}}}], 12)).

node_data_reads_the_measured_time_from_the_interval_log_test() ->
    Dir = filename:join("/tmp", "terrain_bench_run_" ++ os:getpid()),
    NodeDir = filename:join(Dir, atom_to_list(node())),
    ok = filelib:ensure_dir(filename:join(NodeDir, "x")),
    H = terrain_bench_hdr:from_values([100, 200]),
    ok = file:write_file(filename:join(NodeDir, "rpc.hlog"),
                         [terrain_bench_hdr:log_header("t", 0),
                          terrain_bench_hdr:log_line("rpc", 0, 1000, H),
                          terrain_bench_hdr:log_line("rpc", 1000, 1000, H)]),
    #{rpc := #{measured_s := Measured}} = node_data(node(), Dir, [rpc]),
    ?assertEqual(2.0, Measured).
-endif.
