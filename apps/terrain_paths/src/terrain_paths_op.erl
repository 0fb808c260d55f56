%% @private
%% @doc Reduction operations and partial results ("runs").
%%
%% A partial result is a list of runs `{Lo, Hi, Value}': Value is the reduction of
%% the values of ranks Lo..Hi in rank order. Merging sorts the runs by Lo and combines
%% two neighbours when the operation is commutative or when the second run starts
%% right after the first (Hi + 1 = Lo); so a non-commutative operation is only ever
%% applied to consecutive rank ranges, left to right, whatever the tree's shape.
-module(terrain_paths_op).

%% API
-export([validate/1,
         combine/3,
         elementwise/2,
         run/2,
         merge/2,
         merge_unreduced/1,
         result/2]).

-export_type([op/0, runs/0]).

-type op() :: sum | min | max | fun((term(), term()) -> term()) | {commutative, fun((term(), term()) -> term())}.
-type runs() :: [{non_neg_integer(), non_neg_integer(), term()}].

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

%%--------------------------------------------------------------------
%% Internal functions

%% One pass, arithmetic inline for numbers (the vectors of the benchmarks).
elementwise(sum, [X | A], [Y | B]) when is_number(X), is_number(Y) -> [X + Y | elementwise(sum, A, B)];
elementwise(min, [X | A], [Y | B]) when is_number(X), is_number(Y) -> [min(X, Y) | elementwise(min, A, B)];
elementwise(max, [X | A], [Y | B]) when is_number(X), is_number(Y) -> [max(X, Y) | elementwise(max, A, B)];
elementwise(Op, [X | A], [Y | B]) -> [combine(Op, X, Y) | elementwise(Op, A, B)];
elementwise(_Op, [], []) -> [];
elementwise(_Op, A, B) -> erlang:error(badarg, [A, B]).
