%% @private
%% @doc The benchmark's operations, named as DE-Bench names them (Ghaffari, Erlang
%% Workshop 2014, "Distributed Erlang Commands"), and their remote side.
%%
%% P2P operations (`spawn', `rpc', `erpc', `gen_server_call', `fsm_server_call') send
%% `argument_size' bytes of random payload with its CRC-32 to the target node, which
%% checks it on arrival, computes for `compute_us' microseconds (a non-tail-recursive
%% loop, as in DE-Bench, not a sleep) and returns the payload, which the caller
%% checks too. A payload that arrives changed is an error of kind `payload_mismatch'.
%%
%% Name operations form chains per worker, so that none creates an atom:
%% <ul>
%% <li>`global_register' registers the worker under the global name
%% `{terrain_bench, Node, Worker}' (any term may be a global name); when the worker
%% holds its name already, it is first unregistered, unmeasured. `global_unregister'
%% unregisters it; when the worker holds none, it registers first, unmeasured.
%% `global_whereis' looks the name up (registered or not).</li>
%% <li>`local_register', `local_unregister', `local_whereis': the same chain with the
%% worker's local name, an atom from a fixed pool, `terrain_bench_local_<Worker>',
%% made once per worker number (so at most `concurrent' atoms, the same in every
%% run). DE-Bench made a new atom per call and leaked one each time.</li>
%% <li>`pg_join', `pg_leave' the same chain with membership of the group
%% `{terrain_bench, Worker}' of the `terrain_bench_pg' scope; `pg_get_members' reads
%% that group.</li>
%% </ul>
%% `terrain_choose' is `terrain:choose_nodes/2' over the cluster with the target
%% predicates (or `{node, exists}'), served from the attribute cache: terrain's own
%% cost under load. `noop' does nothing: it measures the harness.
-module(terrain_bench_ops).

%% API
-export([new_worker/4,
         prepare/2,
         run/3]).

%% Internal exports (the remote side of P2P operations)
-export([p2p_call/3,
         p2p_spawned/5,
         answer/3]).

%% exports_not_used: run on the target node (spawn/4, rpc:call/4 and erpc:call/4 take them as MFAs).
-ignore_xref([{p2p_call, 3}, {p2p_spawned, 5}]).

-export_type([worker/0, outcome/0]).

-record(worker, {index :: pos_integer(),
                 payload :: binary(),
                 crc :: non_neg_integer(),
                 compute_us :: non_neg_integer(),
                 timeout :: pos_integer(),
                 global_name :: {terrain_bench, node(), pos_integer()},
                 local_name :: atom(),
                 group :: {terrain_bench, pos_integer()},
                 choose :: [term()],
                 nodes :: [node()],
                 holds = #{} :: #{global | local | pg => true}}).

-opaque worker() :: #worker{}.
-type outcome() :: ok | {error, atom()}.

-define(PG_SCOPE, terrain_bench_pg).

%%--------------------------------------------------------------------
%% API

%% @doc A worker's state: its own payload (random, made once, so that making it is
%% not measured), names and deadline.
-spec new_worker(pos_integer(), terrain_bench_config:config(), [node()], [term()]) -> worker().
new_worker(Index, #{argument_size := Size, compute_us := ComputeUs, timeout := Timeout}, Nodes, Choose) ->
    Payload = rand:bytes(Size),
    #worker{index = Index, payload = Payload, crc = erlang:crc32(Payload), compute_us = ComputeUs,
            timeout = Timeout, global_name = {terrain_bench, node(), Index},
            local_name = list_to_atom("terrain_bench_local_" ++ integer_to_list(Index)),
            group = {terrain_bench, Index}, choose = Choose, nodes = Nodes}.

%% @doc The unmeasured setup step of a chain (see the module header), run before the
%% operation's first timestamp: a worker about to register gives up the name it
%% holds; one about to unregister or leave first takes the name or membership.
-spec prepare(terrain_bench_config:operation(), worker()) -> worker().
prepare(Op, W) when Op =:= global_register -> release(global, W);
prepare(Op, W) when Op =:= global_unregister -> acquire(global, W);
prepare(Op, W) when Op =:= local_register -> release(local, W);
prepare(Op, W) when Op =:= local_unregister -> acquire(local, W);
prepare(Op, W) when Op =:= pg_join -> release(pg, W);
prepare(Op, W) when Op =:= pg_leave -> acquire(pg, W);
prepare(_Op, W) -> W.

%% @doc Runs one operation (the measured step) against `Target' (only P2P operations
%% use it). Returns the outcome and the worker's next state.
-spec run(terrain_bench_config:operation(), node(), worker()) -> {outcome(), worker()}.
run(noop, _Target, W) ->
    {ok, W};
run(spawn, Target, #worker{payload = P, crc = Crc, compute_us = C, timeout = T} = W) ->
    Ref = make_ref(),
    {_Pid, MRef} = erlang:spawn_monitor(Target, ?MODULE, p2p_spawned, [self(), Ref, P, Crc, C]),
    Outcome = receive
                  {Ref, Reply} ->
                      demonitor(MRef, [flush]),
                      check(Reply, P);
                  {'DOWN', MRef, process, _, Why} ->
                      {error, kind(Why)}
              after T ->
                      demonitor(MRef, [flush]),
                      {error, timeout}
              end,
    {Outcome, W};
run(rpc, Target, #worker{payload = P, crc = Crc, compute_us = C, timeout = T} = W) ->
    Outcome = case rpc:call(Target, ?MODULE, p2p_call, [P, Crc, C], T) of
                  {badrpc, Why} -> {error, kind(Why)};
                  Reply -> check(Reply, P)
              end,
    {Outcome, W};
run(erpc, Target, #worker{payload = P, crc = Crc, compute_us = C, timeout = T} = W) ->
    Outcome = try erpc:call(Target, ?MODULE, p2p_call, [P, Crc, C], T) of
                  Reply -> check(Reply, P)
              catch
                  error:{erpc, Why} -> {error, kind(Why)};
                  Class:Why -> {error, kind({Class, Why})}
              end,
    {Outcome, W};
run(gen_server_call, Target, W) ->
    {server_call(gen_server, {terrain_bench_server, Target}, W), W};
run(fsm_server_call, Target, W) ->
    {server_call(gen_statem, {terrain_bench_statem, Target}, W), W};
run(global_register, _Target, #worker{global_name = Name} = W) ->
    case global:register_name(Name, self()) of
        yes -> {ok, hold(global, W)};
        no -> {{error, name_taken}, W}
    end;
run(global_unregister, _Target, #worker{global_name = Name} = W) ->
    _ = global:unregister_name(Name),
    {ok, drop(global, W)};
run(global_whereis, _Target, #worker{global_name = Name} = W) ->
    _ = global:whereis_name(Name),
    {ok, W};
run(local_register, _Target, #worker{local_name = Name} = W) ->
    try register(Name, self()) of
        true -> {ok, hold(local, W)}
    catch
        error:badarg -> {{error, name_taken}, W}
    end;
run(local_unregister, _Target, #worker{local_name = Name} = W) ->
    try unregister(Name) of
        true -> {ok, drop(local, W)}
    catch
        error:badarg -> {{error, not_registered}, drop(local, W)}
    end;
run(local_whereis, _Target, #worker{local_name = Name} = W) ->
    _ = whereis(Name),
    {ok, W};
run(pg_join, _Target, #worker{group = Group} = W) ->
    ok = pg:join(?PG_SCOPE, Group, self()),
    {ok, hold(pg, W)};
run(pg_leave, _Target, #worker{group = Group} = W) ->
    _ = pg:leave(?PG_SCOPE, Group, self()),
    {ok, drop(pg, W)};
run(pg_get_members, _Target, #worker{group = Group} = W) ->
    _ = pg:get_members(?PG_SCOPE, Group),
    {ok, W};
run(terrain_choose, _Target, #worker{choose = Preds, nodes = Nodes} = W) ->
    case terrain:choose_nodes(Nodes, Preds) of
        {error, _} -> {{error, choose_failed}, W};
        _ -> {ok, W}
    end.

%%--------------------------------------------------------------------
%% Internal exports: the target's side

%% @doc On the target: checks the payload, computes, returns the payload (rpc, erpc).
-spec p2p_call(binary(), non_neg_integer(), non_neg_integer()) -> binary() | {error, payload_mismatch}.
p2p_call(Payload, Crc, ComputeUs) ->
    answer(Payload, Crc, ComputeUs).

%% @doc On the target: a spawned process that answers its caller (spawn).
-spec p2p_spawned(pid(), reference(), binary(), non_neg_integer(), non_neg_integer()) -> ok.
p2p_spawned(Caller, Ref, Payload, Crc, ComputeUs) ->
    Caller ! {Ref, answer(Payload, Crc, ComputeUs)},
    ok.

%% @doc Checks the payload against its CRC-32, computes for `ComputeUs' µs and
%% returns the payload.
-spec answer(binary(), non_neg_integer(), non_neg_integer()) -> binary() | {error, payload_mismatch}.
answer(Payload, Crc, ComputeUs) ->
    case erlang:crc32(Payload) of
        Crc ->
            _ = compute(erlang:monotonic_time(microsecond) + ComputeUs),
            Payload;
        _ ->
            {error, payload_mismatch}
    end.

%%--------------------------------------------------------------------
%% Internal

%% Non-tail-recursive computation until the deadline (DE-Bench's "non tail recursive
%% function run for Y microseconds"): the depth it reached.
compute(Deadline) ->
    case erlang:monotonic_time(microsecond) >= Deadline of
        true -> 0;
        false -> 1 + compute(Deadline)
    end.

server_call(Behaviour, Server, #worker{payload = P, crc = Crc, compute_us = C, timeout = T}) ->
    try Behaviour:call(Server, {p2p, P, Crc, C}, T) of
        Reply -> check(Reply, P)
    catch
        exit:{Why, _Call} -> {error, kind(Why)}
    end.

check(Payload, Payload) -> ok;
check(_, _) -> {error, payload_mismatch}.

%% Error kinds: a fixed set of atoms, whatever the reason (no atom is made here).
kind(timeout) -> timeout;
kind(noconnection) -> noconnection;
kind(nodedown) -> nodedown;
kind({nodedown, _}) -> nodedown;
kind(noproc) -> noproc;
kind({noproc, _}) -> noproc;
kind(notalive) -> notalive;
kind({exception, _}) -> exception;
kind({exception, _, _}) -> exception;
kind({'EXIT', Why}) -> kind(Why);
kind({error, payload_mismatch}) -> payload_mismatch;
kind(_) -> other.

%% Chains: what the worker holds (a global name, its local name, a pg membership).
hold(What, #worker{holds = H} = W) -> W#worker{holds = H#{What => true}}.
drop(What, #worker{holds = H} = W) -> W#worker{holds = maps:remove(What, H)}.

%% The setup of a chain step: make sure the worker does not hold / does hold the
%% name before the measured step.
release(What, #worker{holds = H} = W) ->
    case maps:is_key(What, H) of
        true -> undo(What, W), drop(What, W);
        false -> W
    end.

acquire(What, #worker{holds = H} = W) ->
    case maps:is_key(What, H) of
        true -> W;
        false -> do(What, W), hold(What, W)
    end.

undo(global, #worker{global_name = Name}) -> _ = global:unregister_name(Name), ok;
undo(local, #worker{local_name = Name}) -> _ = catch_unregister(Name), ok;
undo(pg, #worker{group = Group}) -> _ = pg:leave(?PG_SCOPE, Group, self()), ok.

do(global, #worker{global_name = Name}) -> _ = global:register_name(Name, self()), ok;
do(local, #worker{local_name = Name}) -> _ = catch_register(Name), ok;
do(pg, #worker{group = Group}) -> pg:join(?PG_SCOPE, Group, self()).

catch_unregister(Name) ->
    try unregister(Name) catch error:badarg -> false end.

catch_register(Name) ->
    try register(Name, self()) catch error:badarg -> false end.
