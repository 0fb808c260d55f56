%% Properties of the predicate language (terrain_select), over random candidates,
%% random attribute values (some undefined) and random predicate trees.
-module(prop_select).
-include_lib("proper/include/proper.hrl").

-export([prop_result_is_an_ordered_subsequence/0,
         prop_or_is_union/0,
         prop_and_is_intersection/0,
         prop_list_is_and/0,
         prop_not_is_complement_over_defined/0,
         prop_low_and_high_cover_the_defined/0,
         prop_top_and_bottom_select_k/0,
         prop_relax_drops_a_suffix/0,
         prop_explain_names_the_last_filter/0]).

-define(POOL, [n1, n2, n3, n4, n5, n6, n7, n8]).
-define(ATTRS, [a, b, c]).

%%--------------------------------------------------------------------
%% Generators

candidates() ->
    list(oneof(?POOL)).

attr_value() ->
    oneof([range(0, 5), ?LET(I, range(0, 10), I / 2), true, false, oneof([x, y])]).

values() ->
    ?LET(PerNode, [{N, list({oneof(?ATTRS), attr_value()})} || N <- ?POOL],
         maps:from_list([{N, maps:from_list(Pairs)} || {N, Pairs} <- PerNode])).

atomic() ->
    A = oneof(?ATTRS),
    oneof([{A, oneof([eq, ne, lt, le, gt, ge]), attr_value()},
           {A, oneof([true, false, yes, no])},
           {A, in, list(attr_value())},
           {A, exists},
           {A, oneof([low, high])},
           {A, oneof([top, bottom]), range(1, 5)}]).

%% Trees of at most three levels, lists of at most four parts.
predicate() ->
    ?SIZED(Size, predicate(min(Size, 27))).

predicate(0) ->
    atomic();
predicate(Size) ->
    Smaller = predicate(Size div 3),
    frequency([{4, atomic()},
               {1, {'not', Smaller}},
               {1, {'or', short_list(Smaller)}},
               {1, {'and', short_list(Smaller)}},
               {1, short_list(Smaller)}]).

short_list(G) ->
    ?LET(N, range(0, 4), vector(N, G)).

ctx() ->
    #{self => n1, groups => #{}, distance => fun(_, _) -> undefined end, level => fun(_, _) -> undefined end}.

sel(C, P, V) ->
    terrain_select:select(C, P, V, ctx()).

%% The candidates whose node is in Set, in candidate order.
keep(C, Set) ->
    [N || N <- C, lists:member(N, Set)].

defined(C, A, V) ->
    [N || N <- C, maps:get(A, maps:get(N, V), undefined) =/= undefined].

%%--------------------------------------------------------------------
%% Properties

prop_result_is_an_ordered_subsequence() ->
    ?FORALL({C, P, V}, {candidates(), predicate(), values()},
            is_subsequence(sel(C, P, V), C)).

prop_or_is_union() ->
    ?FORALL({C, P, Q, V}, {candidates(), predicate(), predicate(), values()},
            sel(C, {'or', [P, Q]}, V) =:= keep(C, sel(C, P, V) ++ sel(C, Q, V))).

prop_and_is_intersection() ->
    ?FORALL({C, P, Q, V}, {candidates(), predicate(), predicate(), values()},
            sel(C, {'and', [P, Q]}, V) =:= [N || N <- sel(C, P, V), lists:member(N, sel(C, Q, V))]).

prop_list_is_and() ->
    ?FORALL({C, Ps, V}, {candidates(), short_list(predicate()), values()},
            sel(C, Ps, V) =:= sel(C, {'and', Ps}, V)).

%% For a predicate on one attribute (other than `exists'), `not' selects exactly the
%% candidates that have the attribute and are not selected.
prop_not_is_complement_over_defined() ->
    ?FORALL({C, P, V}, {candidates(), ?SUCHTHAT(P, atomic(), element(2, P) =/= exists), values()},
            begin
                A = element(1, P),
                Selected = sel(C, P, V),
                sel(C, {'not', P}, V) =:= [N || N <- defined(C, A, V), not lists:member(N, Selected)]
            end).

prop_low_and_high_cover_the_defined() ->
    ?FORALL({C, A, V}, {candidates(), oneof(?ATTRS), values()},
            begin
                Low = sel(C, {A, low}, V),
                High = sel(C, {A, high}, V),
                Defined = defined(C, A, V),
                keep(C, Low ++ High) =:= Defined
                    andalso (Defined =:= [] orelse (Low =/= [] andalso High =/= []))
            end).

prop_top_and_bottom_select_k() ->
    ?FORALL({C, A, K, Dir, V}, {candidates(), oneof(?ATTRS), range(1, 6), oneof([top, bottom]), values()},
            begin
                Chosen = lists:usort(sel(C, {A, Dir, K}, V)),
                Defined = lists:usort(defined(C, A, V)),
                Others = Defined -- Chosen,
                Value = fun(N) -> maps:get(A, maps:get(N, V)) end,
                Better = case Dir of top -> fun(X, Y) -> X >= Y end; bottom -> fun(X, Y) -> X =< Y end end,
                length(Chosen) =:= min(K, length(Defined))
                    andalso lists:all(fun(N) -> lists:all(fun(O) -> Better(Value(N), Value(O)) end, Others) end,
                                      Chosen)
            end).

prop_relax_drops_a_suffix() ->
    ?FORALL({C, Ps, V}, {candidates(), short_list(predicate()), values()},
            begin
                {Result, Dropped} = terrain_select:relax(C, Ps, V, ctx()),
                Kept = lists:sublist(Ps, length(Ps) - length(Dropped)),
                lists:suffix(Dropped, Ps)
                    andalso Result =:= sel(C, Kept, V)
                    andalso (Result =/= [] orelse C =:= [])
                    andalso (Dropped =:= [] orelse sel(C, Ps, V) =:= [])
            end).

prop_explain_names_the_last_filter() ->
    ?FORALL({C, Ps, V}, {non_empty(candidates()), short_list(predicate()), values()},
            ?IMPLIES(sel(C, Ps, V) =:= [],
                     begin
                         #{steps := Steps, removed_by := By, candidates := N} =
                             terrain_select:explain(C, Ps, V, #{}, ctx()),
                         Counts = [R || {_, R} <- Steps],
                         N =:= length(lists:usort(C))
                             andalso lists:member(By, Ps)
                             andalso lists:last(Counts) =:= 0
                             andalso lists:all(fun(R) -> R > 0 end, lists:droplast(Counts))
                             andalso [P || {P, _} <- Steps] =:= lists:sublist(Ps, length(Steps))
                     end)).

is_subsequence([], _) -> true;
is_subsequence(_, []) -> false;
is_subsequence([X | Xs], [X | Ys]) -> is_subsequence(Xs, Ys);
is_subsequence(Xs, [_ | Ys]) -> is_subsequence(Xs, Ys).
