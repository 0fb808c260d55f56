%% @private
%% @doc The collective operations, run in the calling member processes.
%%
%% Every member calls the same operations in the same order (SPMD). Each call gets
%% the next sequence number of the communicator in this process, and every message
%% is `{?TAG, CommId, Seq, Step, FromRank, Data}', so a receive picks exactly the
%% message it waits for. The first call monitors every other member. Every wait for
%% data goes through one function, {@link await/5}, with the call's deadline:
%%
%% <ul>
%% <li>A member that is gone (its `DOWN' arrived, in this call or an earlier one)
%%     ends the call with `{error, {member_down, Rank, Node}}' only when the call
%%     still needs a message from it that has not arrived. Erlang delivers the
%%     messages a process sent before its `DOWN', so a member that finished its part
%%     of the call and left (as MPI ranks do at the end of a job) breaks nothing: its
%%     messages are in the mailbox, and only a later call that needs it fails.</li>
%% <li>A member whose call fails tells the others (an `abort' carrying its
%%     sequence number and the reason, sent without opening connections), so that
%%     members who do not need the gone member directly fail at once with the same
%%     reason instead of waiting for their deadline.</li>
%% <li>After an error the communicator is broken in that process: later calls
%%     return the same error.</li>
%% </ul>
-module(terrain_paths_collective).

%% API
-export([call/4,
         forget/1]).

-define(TAG, '$terrain_paths').
-define(STATE(Id), {terrain_paths, Id}).

-type operation() :: allreduce | reduce | broadcast | barrier | gather | allgather | scatter | reconfigure.
-export_type([operation/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Runs `Operation' with `Algorithm' in the calling member.
-spec call(operation(), terrain_paths:comm(), term(), term()) -> term().
call(Operation, #{id := Id, members := Members, timeout := Timeout} = Comm, Algorithm, Args) ->
    case state(Comm) of
        #{error := Reason} ->
            {error, Reason};
        #{seq := Seq, rank := Rank, refs := Refs} = State ->
            put(?STATE(Id), State#{seq := Seq + 1}),
            Ctx = #{id => Id, members => Members, size => tuple_size(Members), rank => Rank, seq => Seq,
                    deadline => erlang:monotonic_time(millisecond) + Timeout, refs => Refs},
            try
                run(Operation, Algorithm, Comm, Ctx, Args)
            catch
                throw:{?MODULE, Reason} ->
                    Broken = (get(?STATE(Id)))#{error => Reason},
                    put(?STATE(Id), Broken),
                    tell_abort(Ctx, maps:get(gone, Broken), Reason),
                    {error, Reason}
            end
    end.

%% @doc Drops this process's monitors and state for the communicator.
-spec forget(terrain_paths:comm()) -> ok.
forget(#{id := Id}) ->
    case erase(?STATE(Id)) of
        #{refs := Refs} -> _ = [demonitor(Ref, [flush]) || Ref <- maps:keys(Refs)], ok;
        undefined -> ok
    end.

%%--------------------------------------------------------------------
%% Internal functions: state

state(#{id := Id, members := Members}) ->
    case get(?STATE(Id)) of
        undefined ->
            Rank = rank_of(self(), Members),
            Refs = maps:from_list([{erlang:monitor(process, element(R + 1, Members)), R}
                                   || R <- lists:seq(0, tuple_size(Members) - 1), R =/= Rank]),
            State = #{seq => 0, rank => Rank, refs => Refs, gone => #{}},
            put(?STATE(Id), State),
            State;
        State ->
            State
    end.

rank_of(Pid, Members) -> rank_of(Pid, Members, 1).
rank_of(Pid, Members, I) when I > tuple_size(Members) -> erlang:error(badarg, [Pid, Members]);
rank_of(Pid, Members, I) when element(I, Members) =:= Pid -> I - 1;
rank_of(Pid, Members, I) -> rank_of(Pid, Members, I + 1).

-spec fail(term()) -> no_return().
fail(Reason) ->
    throw({?MODULE, Reason}).

%% Tells every member still there that this member's call `Seq' failed, and why (a
%% member told of a failure tells the others too: one that waits for this member's
%% message then learns the first reason before this member's `DOWN', if it leaves).
%% `noconnect': a member whose node is unreachable is not waited for.
tell_abort(#{id := Id, members := Members, rank := Rank, seq := Seq}, Gone, Reason) ->
    [erlang:send(element(R + 1, Members), {?TAG, Id, abort, Seq, Rank, Reason}, [noconnect])
     || R <- lists:seq(0, tuple_size(Members) - 1), R =/= Rank, not is_map_key(R, Gone)],
    ok.

%%--------------------------------------------------------------------
%% Internal functions: messages

send(#{id := Id, members := Members, seq := Seq, rank := Rank}, To, Step, Data) ->
    element(To + 1, Members) ! {?TAG, Id, Seq, Step, Rank, Data},
    ok.

recv(Ctx, From, Step) ->
    await(Ctx, Step, [From], fun(_, Data, _) -> Data end, undefined).

%% Receives one message of `Step' from each rank of `From', in any order; returns
%% the data in the order of `From'.
collect(_Ctx, _Step, []) ->
    [];
collect(Ctx, Step, From) ->
    Got = await(Ctx, Step, From, fun(R, Data, Acc) -> Acc#{R => Data} end, #{}),
    [maps:get(R, Got) || R <- From].

%% The one wait of every operation: receives one message of `Step' from each rank of
%% `From', in any order, folding `Fold(Rank, Data, Acc)' over them as they arrive.
%% A rank already gone must have its message in the mailbox (it was sent before the
%% `DOWN'); a rank that goes while its message is pending ends the call, as does
%% another member's abort of this call or an earlier one, and the deadline.
await(#{id := Id, seq := Seq} = Ctx, Step, From, Fold, Acc0) ->
    Gone = maps:get(gone, get(?STATE(Id))),
    {Pending, Acc} =
        lists:foldl(fun(R, {P, A}) when is_map_key(R, Gone) ->
                            receive
                                {?TAG, Id, Seq, Step, R, Data} -> {P, Fold(R, Data, A)};
                                {?TAG, Id, abort, AbortSeq, _From, Reason} when AbortSeq =< Seq -> fail(Reason)
                            after 0 ->
                                    fail({member_down, R, maps:get(R, Gone)})
                            end;
                       (R, {P, A}) ->
                            {P#{R => true}, A}
                    end, {#{}, Acc0}, From),
    await_pending(Ctx, Step, Pending, Fold, Acc).

await_pending(#{id := Id, seq := Seq, refs := Refs, deadline := Deadline} = Ctx, Step, Pending, Fold, Acc)
  when map_size(Pending) > 0 ->
    receive
        {?TAG, Id, Seq, Step, From, Data} when is_map_key(From, Pending) ->
            await_pending(Ctx, Step, maps:remove(From, Pending), Fold, Fold(From, Data, Acc));
        {'DOWN', Ref, process, Pid, _} when is_map_key(Ref, Refs) ->
            Rank = maps:get(Ref, Refs),
            State = get(?STATE(Id)),
            put(?STATE(Id), State#{gone := (maps:get(gone, State))#{Rank => node(Pid)}}),
            is_map_key(Rank, Pending) andalso fail({member_down, Rank, node(Pid)}),
            await_pending(Ctx, Step, Pending, Fold, Acc);
        {?TAG, Id, abort, AbortSeq, _From, Reason} when AbortSeq =< Seq ->
            fail(Reason)
    after remaining(Deadline) ->
            fail(timeout)
    end;
await_pending(_Ctx, _Step, _Pending, _Fold, Acc) ->
    Acc.

remaining(Deadline) ->
    max(0, Deadline - erlang:monotonic_time(millisecond)).

%%--------------------------------------------------------------------
%% Internal functions: operations

run(allreduce, Algorithm, Comm, Ctx, {Value, Op}) ->
    {ok, allreduce(Algorithm, Comm, Ctx, Value, Op)};
run(allgather, Algorithm, Comm, Ctx, Value) ->
    {ok, allreduce(Algorithm, Comm, Ctx, [Value], fun erlang:'++'/2)};
run(barrier, Algorithm, Comm, Ctx, none) ->
    ok = allreduce(Algorithm, Comm, Ctx, ok, {commutative, fun(ok, ok) -> ok end}),
    ok;
run(reduce, Algorithm, Comm, Ctx, {Value, Op}) ->
    Tree = tree(Algorithm, Comm, Ctx),
    case tree_reduce(Ctx, Tree, terrain_paths_op:run(rank(Ctx), Value), Op) of
        {root, Runs} -> {ok, terrain_paths_op:result(Op, Runs)};
        sent -> ok
    end;
run(gather, Algorithm, Comm, Ctx, Value) ->
    Op = fun erlang:'++'/2,
    case tree_reduce(Ctx, tree(Algorithm, Comm, Ctx), terrain_paths_op:run(rank(Ctx), [Value]), Op) of
        {root, Runs} -> {ok, terrain_paths_op:result(Op, Runs)};
        sent -> ok
    end;
run(broadcast, Algorithm, Comm, Ctx, Value) ->
    {ok, tree_broadcast(Ctx, tree(Algorithm, Comm, Ctx), Value)};
run(reconfigure, Algorithm, Comm, Ctx, Value) ->
    {ok, tree_broadcast(Ctx, tree(Algorithm, Comm, Ctx), Value)};
run(scatter, Algorithm, Comm, Ctx, Values) ->
    {ok, tree_scatter(Ctx, tree(Algorithm, Comm, Ctx), Values)}.

rank(#{rank := Rank}) -> Rank.

%% The tree an operation runs over: its own for tree algorithms, binomial otherwise.
tree(flat, #{root := Root}, #{size := Size}) -> terrain_paths_plan:flat(Size, Root);
tree(hierarchical, #{hierarchy := H}, _Ctx) -> terrain_paths_plan:hierarchical_tree(H);
tree({tree, _}, #{explicit := Tree}, _Ctx) -> Tree;
tree(_, #{root := Root}, #{size := Size}) -> terrain_paths_plan:binomial(Size, Root).

allreduce(recursive_doubling, _Comm, Ctx, Value, Op) ->
    recursive_doubling(Ctx, Value, Op);
allreduce(ring, _Comm, Ctx, Value, Op) ->
    case terrain_paths_op:elementwise(Op, Value) of
        true -> ring_vector(Ctx, Value, Op);
        false -> ring_runs(Ctx, Value, Op)
    end;
allreduce(rabenseifner, _Comm, Ctx, Value, Op) ->
    case terrain_paths_op:elementwise(Op, Value) of
        true -> rabenseifner(Ctx, Value, Op);
        false -> recursive_doubling(Ctx, Value, Op)
    end;
allreduce(hierarchical, #{hierarchy := H}, Ctx, Value, Op) ->
    hierarchical(Ctx, H, Value, Op);
allreduce(Algorithm, Comm, Ctx, Value, Op) ->
    Tree = tree(Algorithm, Comm, Ctx),
    Result = case tree_reduce(Ctx, Tree, terrain_paths_op:run(rank(Ctx), Value), Op) of
                 {root, Runs} -> terrain_paths_op:result(Op, Runs);
                 sent -> undefined
             end,
    tree_broadcast(Ctx, Tree, Result).

%%--------------------------------------------------------------------
%% Trees: reduce up, broadcast and scatter down, with the edge's wrappers

tree_reduce(#{rank := Rank} = Ctx, Tree, Own, Op) ->
    Partials = [unwrap(E) || E <- collect(Ctx, up, terrain_paths_plan:children(Tree, Rank))],
    Wrappers = terrain_paths_plan:wrappers(Tree, Rank),
    Runs = case lists:member(forward, Wrappers) of
               true -> terrain_paths_op:merge_unreduced([Own | Partials]);
               false -> terrain_paths_op:merge(Op, [Own | Partials])
           end,
    case terrain_paths_plan:parent(Tree, Rank) of
        none -> {root, Runs};
        Parent -> send(Ctx, Parent, up, wrap(Ctx, Wrappers, {up, Parent}, Runs)), sent
    end.

tree_broadcast(#{rank := Rank} = Ctx, Tree, Value) ->
    V = case terrain_paths_plan:parent(Tree, Rank) of
            none -> Value;
            Parent -> unwrap(recv(Ctx, Parent, down))
        end,
    [send(Ctx, C, down, wrap(Ctx, terrain_paths_plan:wrappers(Tree, C), {down, C}, V))
     || C <- terrain_paths_plan:children(Tree, Rank)],
    V.

tree_scatter(#{rank := Rank, size := Size} = Ctx, Tree, Values) ->
    Mine = case terrain_paths_plan:parent(Tree, Rank) of
               none when is_list(Values), length(Values) =:= Size ->
                   maps:from_list(lists:zip(lists:seq(0, Size - 1), Values));
               none ->
                   erlang:error(badarg, [Values]);
               Parent ->
                   unwrap(recv(Ctx, Parent, down))
           end,
    [send(Ctx, C, down, wrap(Ctx, terrain_paths_plan:wrappers(Tree, C), {down, C},
                             maps:with(terrain_paths_plan:subtree(Tree, C), Mine)))
     || C <- terrain_paths_plan:children(Tree, Rank)],
    maps:get(Rank, Mine).

%% Wrappers on an edge (PATHS): compress the data, delay it, report it to a collector.
wrap(Ctx, Wrappers, Direction, Data) ->
    lists:foreach(fun({delay, Ms}) -> timer:sleep(Ms);
                     ({collect, Collector}) -> collect_event(Collector, Ctx, Direction, Data);
                     (_) -> ok
                  end, Wrappers),
    case lists:member(compress, Wrappers) of
        true -> {compressed, term_to_binary(Data, [compressed])};
        false -> {plain, Data}
    end.

unwrap({plain, Data}) -> Data;
unwrap({compressed, Binary}) -> binary_to_term(Binary).

collect_event(Collector, #{id := Id, rank := Rank, seq := Seq}, {Direction, To}, Data) ->
    Event = #{communicator => Id, rank => Rank, to => To, node => node(), seq => Seq, direction => Direction,
              bytes => erlang:external_size(Data), at_us => erlang:system_time(microsecond)},
    case Collector of
        Pid when is_pid(Pid) -> Pid ! {terrain_paths_event, Event};
        {events, Name} -> terrain_events:collect(Name, erlang:external_size(Data), Event);
        Fun -> Fun(Event)
    end,
    ok.

%%--------------------------------------------------------------------
%% Recursive doubling (and its fold of the ranks beyond a power of two)

%% Ranks below 2 × Rem pair up: the even one hands its value to the odd one and waits.
%% The remaining P (a power of two) ranks exchange with rank xor 1, 2, 4, ...
recursive_doubling(Ctx, Value, Op) ->
    fold_extra(Ctx, terrain_paths_op:run(rank(Ctx), Value), Op,
               fun(NewRank, P, ToRank, Runs) -> rd_rounds(Ctx, Op, NewRank, P, ToRank, Runs, 1) end,
               fun(Runs) -> terrain_paths_op:result(Op, Runs) end).

rd_rounds(_Ctx, _Op, _NewRank, P, _ToRank, Runs, Mask) when Mask >= P ->
    Runs;
rd_rounds(Ctx, Op, NewRank, P, ToRank, Runs, Mask) ->
    Partner = ToRank(NewRank bxor Mask),
    send(Ctx, Partner, {rd, Mask}, Runs),
    Theirs = recv(Ctx, Partner, {rd, Mask}),
    rd_rounds(Ctx, Op, NewRank, P, ToRank, terrain_paths_op:merge(Op, [Runs, Theirs]), Mask * 2).

%% Runs `Core(NewRank, P, ToRank, Partial)' on the largest power of two P of ranks
%% and hands its result to the ranks that sat out; `Finish' makes the value.
fold_extra(#{rank := Rank, size := Size} = Ctx, Own, Op, Core, Finish) ->
    P = pow2_floor(Size),
    Rem = Size - P,
    ToRank = fun(N) when N < Rem -> 2 * N + 1; (N) -> N + Rem end,
    if
        Rank < 2 * Rem, Rank rem 2 =:= 0 ->
            send(Ctx, Rank + 1, extra_in, Own),
            recv(Ctx, Rank + 1, extra_out);
        Rank < 2 * Rem ->
            Theirs = recv(Ctx, Rank - 1, extra_in),
            Result = Finish(Core(Rank div 2, P, ToRank, terrain_paths_op:merge(Op, [Theirs, Own]))),
            send(Ctx, Rank - 1, extra_out, Result),
            Result;
        true ->
            Finish(Core(Rank - Rem, P, ToRank, Own))
    end.

pow2_floor(N) -> pow2_floor(N, 1).
pow2_floor(N, P) when P * 2 > N -> P;
pow2_floor(N, P) -> pow2_floor(N, P * 2).

%%--------------------------------------------------------------------
%% Ring

%% A value that cannot be cut: every partial travels around the ring (n − 1 steps),
%% then each member folds all of them in rank order.
ring_runs(#{rank := Rank, size := Size} = Ctx, Value, Op) ->
    Own = terrain_paths_op:run(Rank, Value),
    Next = (Rank + 1) rem Size,
    Prev = (Rank - 1 + Size) rem Size,
    {_, All} = lists:foldl(fun(Step, {Last, Acc}) ->
                                   send(Ctx, Next, {ring, Step}, Last),
                                   Got = recv(Ctx, Prev, {ring, Step}),
                                   {Got, [Got | Acc]}
                           end, {Own, [Own]}, lists:seq(1, Size - 1)),
    terrain_paths_op:result(Op, terrain_paths_op:merge(Op, All)).

%% A vector: reduce-scatter then allgather around the ring, n − 1 steps each, one
%% segment (1/n of the vector) per message.
ring_vector(#{size := 1}, Value, _Op) ->
    Value;
ring_vector(#{rank := Rank, size := Size} = Ctx, Value, Op) ->
    Segments = list_to_tuple(split(Value, Size)),
    Next = (Rank + 1) rem Size,
    Prev = (Rank - 1 + Size) rem Size,
    Index = fun(I) -> ((I rem Size) + Size) rem Size end,
    Reduced = lists:foldl(fun(Step, Segs) ->
                                  send(Ctx, Next, {rs, Step}, element(Index(Rank - Step) + 1, Segs)),
                                  Got = recv(Ctx, Prev, {rs, Step}),
                                  I = Index(Rank - Step - 1) + 1,
                                  setelement(I, Segs, terrain_paths_op:combine(Op, Got, element(I, Segs)))
                          end, Segments, lists:seq(0, Size - 2)),
    Gathered = lists:foldl(fun(Step, Segs) ->
                                   send(Ctx, Next, {ag, Step}, element(Index(Rank + 1 - Step) + 1, Segs)),
                                   Got = recv(Ctx, Prev, {ag, Step}),
                                   setelement(Index(Rank - Step) + 1, Segs, Got)
                           end, Reduced, lists:seq(0, Size - 2)),
    lists:append(tuple_to_list(Gathered)).

%% Cuts a list into N consecutive segments whose lengths differ by at most one.
split(List, N) ->
    Length = length(List),
    {Segments, []} = lists:foldl(fun(I, {Acc, Rest}) ->
                                         Take = (I + 1) * Length div N - I * Length div N,
                                         {Seg, Rest1} = lists:split(Take, Rest),
                                         {[Seg | Acc], Rest1}
                                 end, {[], List}, lists:seq(0, N - 1)),
    lists:reverse(Segments).

%%--------------------------------------------------------------------
%% Rabenseifner: reduce-scatter by recursive halving, allgather by recursive doubling

rabenseifner(Ctx, Value, Op) ->
    Core = fun(NewRank, P, ToRank, [{_, _, Vector}]) ->
                   Segments = list_to_tuple(split(Vector, P)),
                   {Lo, Hi, Reduced} = halving(Ctx, Op, NewRank, ToRank, Segments, 0, P, P div 2),
                   doubling(Ctx, NewRank, ToRank, Reduced, Lo, Hi, 1, P)
           end,
    Runs = terrain_paths_op:run(rank(Ctx), Value),
    fold_extra(Ctx, Runs, Op, Core, fun(Vector) -> Vector end).

%% Keeps the half of [Lo, Hi) that holds NewRank's segment, sends the other half to
%% the partner and adds the partner's copy of the kept half.
halving(_Ctx, _Op, _NewRank, _ToRank, Segs, Lo, Hi, 0) ->
    {Lo, Hi, Segs};
halving(Ctx, Op, NewRank, ToRank, Segs, Lo, Hi, Mask) ->
    Partner = ToRank(NewRank bxor Mask),
    Mid = (Lo + Hi) div 2,
    {Keep, Give} = case NewRank band Mask of
                       0 -> {{Lo, Mid}, {Mid, Hi}};
                       _ -> {{Mid, Hi}, {Lo, Mid}}
                   end,
    send(Ctx, Partner, {rh, Mask}, slice(Segs, Give)),
    Got = recv(Ctx, Partner, {rh, Mask}),
    {KLo, KHi} = Keep,
    Segs1 = lists:foldl(fun({I, Seg}, S) ->
                                setelement(I + 1, S, terrain_paths_op:combine(Op, element(I + 1, S), Seg))
                        end, Segs, lists:zip(lists:seq(KLo, KHi - 1), Got)),
    halving(Ctx, Op, NewRank, ToRank, Segs1, KLo, KHi, Mask div 2).

doubling(_Ctx, _NewRank, _ToRank, Segs, _Lo, _Hi, Mask, P) when Mask >= P ->
    lists:append(tuple_to_list(Segs));
doubling(Ctx, NewRank, ToRank, Segs, Lo, Hi, Mask, P) ->
    Partner = ToRank(NewRank bxor Mask),
    send(Ctx, Partner, {rd, Mask}, {Lo, slice(Segs, {Lo, Hi})}),
    {TheirLo, Theirs} = recv(Ctx, Partner, {rd, Mask}),
    Segs1 = lists:foldl(fun({I, Seg}, S) -> setelement(I + 1, S, Seg) end,
                        Segs, lists:zip(lists:seq(TheirLo, TheirLo + length(Theirs) - 1), Theirs)),
    doubling(Ctx, NewRank, ToRank, Segs1, min(Lo, TheirLo), max(Hi, TheirLo + length(Theirs)), Mask * 2, P).

slice(Segs, {Lo, Hi}) ->
    [element(I + 1, Segs) || I <- lists:seq(Lo, Hi - 1)].

%%--------------------------------------------------------------------
%% Hierarchical allreduce

%% Inside each lowest group (the nodes of one network), values go up a tree to the
%% group's leader (through the node leaders), each vertex folding its children's
%% partials in as they arrive; the group leaders exchange partials (the hierarchy's
%% `exchange': level by level with one leader of every sibling group, or directly
%% with every other leader) and fold what they receive in rank order, so every
%% leader computes the same value; each leader broadcasts it down its tree.
hierarchical(#{rank := Rank} = Ctx, #{forest := Forest, exchange := Exchange}, Value, Op) ->
    Own = terrain_paths_op:run(Rank, Value),
    Partial = fold_arrivals(Ctx, Op, terrain_paths_plan:children(Forest, Rank), Own),
    case terrain_paths_plan:parent(Forest, Rank) of
        none ->
            Runs = lists:foldl(fun({Depth, SendTo, RecvFrom}, Runs1) ->
                                       [send(Ctx, To, {level, Depth}, Runs1) || To <- SendTo],
                                       terrain_paths_op:merge(Op, [Runs1 | collect(Ctx, {level, Depth}, RecvFrom)])
                               end, Partial, maps:get(Rank, Exchange)),
            tree_broadcast(Ctx, Forest, terrain_paths_op:result(Op, Runs));
        Parent ->
            send(Ctx, Parent, up, {plain, Partial}),
            tree_broadcast(Ctx, Forest, undefined)
    end.

%% Receives one `up' partial from each of `From' in any order and merges each into
%% `Acc' when it arrives (merging runs keeps a non-commutative operation in rank
%% order, whatever the order of arrival): the work overlaps the wait for the last.
fold_arrivals(Ctx, Op, From, Own) ->
    await(Ctx, up, From, fun(_, {plain, Runs}, Acc) -> terrain_paths_op:merge(Op, [Acc, Runs]) end, Own).
