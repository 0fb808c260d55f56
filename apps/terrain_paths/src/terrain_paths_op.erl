%% @private
%% @doc Reduction operations and partial results ("runs").
%%
%% A partial result is a list of runs `{Lo, Hi, Value}': Value is the reduction of
%% the values of ranks Lo..Hi in rank order. Merging sorts the runs by Lo and combines
%% two neighbours when the operation is commutative or when the second run starts
%% right after the first (Hi + 1 = Lo); so a non-commutative operation is only ever
%% applied to consecutive rank ranges, left to right, whatever the tree's shape.
%%
%% Packed vectors: a list of at least ?PACK_MIN floats under a built-in operation may
%% travel as `{?PACKED, Binary}' (64-bit IEEE doubles, {@link pack/2}). Erlang floats
%% are such doubles, so combining packed vectors gives bit for bit what combining
%% the lists gives; but a binary crosses distribution as one block (no term to
%% encode and decode element by element) and its arithmetic makes no list cells. A
%% packed vector meeting a list (a member whose vector holds an integer) is unpacked
%% and combined as a list. {@link unpack/2} gives the list back.
-module(terrain_paths_op).

%% API
-export([validate/1,
         combine/3,
         elementwise/2,
         run/2,
         merge/2,
         merge_unreduced/1,
         result/2,
         pack/2,
         unpack/2]).

-export_type([op/0, runs/0]).

-type op() :: sum | min | max | fun((term(), term()) -> term()) | {commutative, fun((term(), term()) -> term())}.
-type runs() :: [{non_neg_integer(), non_neg_integer(), term()}].

-define(PACKED, '$terrain_paths_f64').
%% Shorter lists stay lists: packing pays for itself only once decoding a list
%% costs more than a pass over it.
-define(PACK_MIN, 64).

%%--------------------------------------------------------------------
%% API

%% @doc True for an operation this module knows.
-spec validate(term()) -> boolean().
validate(sum) -> true;
validate(min) -> true;
validate(max) -> true;
validate({commutative, Fun}) -> is_function(Fun, 2);
validate(Fun) -> is_function(Fun, 2).

%% @doc Built-in operations and `{commutative, Fun}' are commutative; a plain fun is not.
-spec commutative(op()) -> boolean().
commutative({commutative, _}) -> true;
commutative(Op) -> is_atom(Op).

%% @doc `A Op B'. Built-in operations take numbers, or lists of numbers of the same
%% length (element by element, as MPI's reductions on arrays).
-spec combine(op(), term(), term()) -> term().
combine(Op, {?PACKED, A}, {?PACKED, B}) when is_atom(Op), byte_size(A) =:= byte_size(B) ->
    {?PACKED, packed(Op, A, B, <<>>)};
combine(Op, {?PACKED, _} = A, B) when is_atom(Op) ->
    combine(Op, unpack(Op, A), unpack(Op, B));
combine(Op, A, {?PACKED, _} = B) when is_atom(Op) ->
    combine(Op, A, unpack(Op, B));
combine(sum, A, B) when is_number(A), is_number(B) -> A + B;
combine(min, A, B) when is_number(A), is_number(B) -> min(A, B);
combine(max, A, B) when is_number(A), is_number(B) -> max(A, B);
combine(Op, A, B) when is_atom(Op), is_list(A), is_list(B) -> elementwise(Op, A, B);
combine({commutative, Fun}, A, B) -> Fun(A, B);
combine(Fun, A, B) when is_function(Fun, 2) -> Fun(A, B).

%% @doc True when the algorithms may cut `Value' into segments: a built-in operation
%% on a list (element-wise).
-spec elementwise(op(), term()) -> boolean().
elementwise(Op, Value) ->
    is_atom(Op) andalso is_list(Value).

%% @doc The partial result of one rank's own value.
-spec run(non_neg_integer(), term()) -> runs().
run(Rank, Value) ->
    [{Rank, Rank, Value}].

%% @doc Merges partial results (see the module doc).
-spec merge(op(), [runs()]) -> runs().
merge(Op, Partials) ->
    Sorted = lists:keysort(1, lists:append(Partials)),
    Commutative = commutative(Op),
    lists:reverse(lists:foldl(fun(Run, []) -> [Run];
                                 ({Lo, Hi, V}, [{L, H, A} | Done]) when Commutative; H + 1 =:= Lo ->
                                      [{min(L, Lo), max(H, Hi), combine(Op, A, V)} | Done];
                                 (Run, Done) -> [Run | Done]
                              end, [], Sorted)).

%% @doc Partial results put side by side without combining (a `forward' wrapper).
-spec merge_unreduced([runs()]) -> runs().
merge_unreduced(Partials) ->
    lists:keysort(1, lists:append(Partials)).

%% @doc The value of a complete partial result (every rank, one run after merging).
-spec result(op(), runs()) -> term().
result(Op, Runs) ->
    [{_, _, Value}] = merge(Op, [Runs]),
    Value.

%% @doc `Value' as the algorithms may carry it: a list of at least ?PACK_MIN floats
%% under a built-in operation becomes a packed vector; anything else is unchanged.
-spec pack(op(), term()) -> term().
pack(Op, [_ | _] = Value) when is_atom(Op) ->
    case length(Value) >= ?PACK_MIN andalso lists:all(fun erlang:is_float/1, Value) of
        true -> {?PACKED, << <<X/float>> || X <- Value >>};
        false -> Value
    end;
pack(_Op, Value) ->
    Value.

%% @doc The list of a packed vector; anything else is unchanged. Only built-in
%% operations pack, so only under them is a `{?PACKED, _}' tuple taken for one.
-spec unpack(op(), term()) -> term().
unpack(Op, {?PACKED, Binary}) when is_atom(Op) -> [X || <<X/float>> <= Binary];
unpack(_Op, Value) -> Value.

%%--------------------------------------------------------------------
%% Internal functions

%% Element by element over two packed vectors of one length, into Acc (appending
%% to a binary in a loop reuses its buffer); sums eight elements per step.
packed(sum, <<X1/float, X2/float, X3/float, X4/float, X5/float, X6/float, X7/float, X8/float, A/binary>>,
       <<Y1/float, Y2/float, Y3/float, Y4/float, Y5/float, Y6/float, Y7/float, Y8/float, B/binary>>, Acc) ->
    packed(sum, A, B, <<Acc/binary, (X1 + Y1)/float, (X2 + Y2)/float, (X3 + Y3)/float, (X4 + Y4)/float,
                        (X5 + Y5)/float, (X6 + Y6)/float, (X7 + Y7)/float, (X8 + Y8)/float>>);
packed(Op, <<X/float, A/binary>>, <<Y/float, B/binary>>, Acc) ->
    packed(Op, A, B, <<Acc/binary, (combine(Op, X, Y))/float>>);
packed(_Op, <<>>, <<>>, Acc) ->
    Acc.

%% One pass, arithmetic inline for numbers (the vectors of the benchmarks).
elementwise(sum, [X | A], [Y | B]) when is_number(X), is_number(Y) -> [X + Y | elementwise(sum, A, B)];
elementwise(min, [X | A], [Y | B]) when is_number(X), is_number(Y) -> [min(X, Y) | elementwise(min, A, B)];
elementwise(max, [X | A], [Y | B]) when is_number(X), is_number(Y) -> [max(X, Y) | elementwise(max, A, B)];
elementwise(Op, [X | A], [Y | B]) -> [combine(Op, X, Y) | elementwise(Op, A, B)];
elementwise(_Op, [], []) -> [];
elementwise(_Op, A, B) -> erlang:error(badarg, [A, B]).
