%% @private
%% @doc The predicate language of `terrain:choose_nodes/3': validation and evaluation.
%%
%% Pure functions. The caller fetches the attribute values, resolves group members and
%% supplies distance and level functions (the context); this module decides which
%% candidates match, explains an empty result and relaxes predicates.
%%
%% <b>Three-valued logic.</b> Every predicate gives `true', `false' or `unknown' for a
%% node. It is `unknown' when a value it needs is `undefined' (an attribute the node
%% lacks, a distance the topology cannot give). `not' turns true into false and back
%% but leaves unknown alone; `and' is false if any part is false, otherwise unknown if
%% any part is unknown; `or' is true if any part is true, otherwise unknown if any part
%% is unknown. A node is selected only when the whole predicate is `true'. So `or' is
%% the union of the parts' selections, `and' their intersection, and `not' the
%% complement among the nodes where the value is defined: ``{'not', {load, lt, 1}}''
%% never selects a node without a `load'. `{A, exists}' is never unknown.
%%
%% <b>Relative predicates</b> are judged against all the distinct candidates that have
%% a defined value for the attribute (not against those left by earlier predicates,
%% so `and' stays an intersection). With n such values:
%% <ul>
%% <li>`{A, low}' holds for value v when at least as many candidates have a greater
%%     value as have a smaller one: `#{w > v} >= #{w < v}'. `{A, high}' is the mirror:
%%     `#{w < v} >= #{w > v}'. Every defined node is low, high or both; the median is
%%     both; when all values are equal every node is both.</li>
%% <li>`{A, top, K}' holds for the K candidates with the greatest values and
%%     `{A, bottom, K}' for the K with the smallest; ties are broken by candidate order,
%%     so exactly min(K, n) nodes qualify.</li>
%% </ul>
%% Values are compared with Erlang's term order, numbers by value (`==' semantics, as
%% in RELEASE D3.5: `1 == 1.0').
-module(terrain_select).

%% API
-export([validate/1,
         attr_names/1,
         select/4,
         explain/5,
         relax/4,
         order_by/4,
         format_explanation/1]).

-export_type([context/0, explanation/0, values/0]).

-type values() :: #{node() => #{terrain:attr_name() => term()}}.
%% Attribute values by node; a missing node or name means `undefined'.

-type context() :: #{self := node(),
                     groups := #{{atom(), term()} => [node()]},
                     distance := fun((node(), node()) -> number() | undefined),
                     level := fun((node(), node()) -> terrain:level() | undefined),
                     subtree := fun((term()) -> [node()])}.
%% `groups' holds the member nodes of every `{group, Scope, Group}' in the predicates;
%% `distance', `level' and `subtree' (the nodes under a named network) come from the
%% topology.

-type explanation() :: terrain:explanation().
%% Why a selection came out empty: how many distinct candidates there were, which of
%% them could not be asked (and why), how many remained after each predicate of the
%% top-level `and' in turn, the predicate that removed the last ones (`none' when there
%% were no reachable candidates), and those last candidates' values for it.

-define(OPS, [eq, ne, lt, le, gt, ge]).
-define(BOOLS, [true, false, yes, no]).

%%--------------------------------------------------------------------
%% API

%% @doc Checks a predicate (or a list of them) and returns the first malformed part.
-spec validate(term()) -> ok | {error, {bad_predicate, term()}}.
validate(Preds) when is_list(Preds) ->
    try
        _ = length(Preds),
        first_error([validate(P) || P <- Preds])
    catch
        error:badarg -> {error, {bad_predicate, Preds}}
    end;
validate({'not', P}) -> validate(P);
validate({'or', Ps} = P) when is_list(Ps) -> nested(P, Ps);
validate({'and', Ps} = P) when is_list(Ps) -> nested(P, Ps);
validate({dist, Op, R}) when is_number(R) -> op(Op, {dist, Op, R});
validate({dist, From, Op, R}) when is_atom(From), is_number(R) -> op(Op, {dist, From, Op, R});
validate({level, Op, Level} = P) ->
    case lists:member(Level, terrain_topology:levels()) of
        true -> op(Op, P);
        false -> {error, {bad_predicate, P}}
    end;
validate({group, Scope, _Group} = P) when is_atom(Scope) -> ok_if(true, P);
validate({in_subtree, _Network}) -> ok;
validate({A, Op, K} = P) when Op =:= top; Op =:= bottom ->
    ok_if(attribute(A) andalso is_integer(K) andalso K > 0, P);
validate({A, Op, _} = P) when is_atom(Op) ->
    ok_if(attribute(A) andalso (lists:member(Op, ?OPS)
                                orelse (Op =:= in andalso is_proper_list(element(3, P)))), P);
validate({A, What} = P) ->
    ok_if(attribute(A) andalso (lists:member(What, ?BOOLS) orelse lists:member(What, [exists, low, high])), P);
validate(P) ->
    {error, {bad_predicate, P}}.

%% @doc The attribute names a (valid) predicate reads, sorted.
-spec attr_names(terrain:predicate() | [terrain:predicate()]) -> [terrain:attr_name()].
attr_names(Preds) ->
    lists:usort(names(Preds)).

%% @doc The candidates (in their order, duplicates kept) for which the predicate is true.
-spec select([node()], terrain:predicate() | [terrain:predicate()], values(), context()) -> [node()].
select(Candidates, Preds, Values, Ctx) ->
    Compiled = compile(Preds, fun() -> distinct(Candidates) end, Values, Ctx),
    [N || N <- Candidates, eval(Compiled, N, node_values(N, Values), Ctx) =:= true].

%% @doc Explains an empty selection: applies the top-level predicates one after the
%% other and reports the one that removed the last candidates. Unreachable nodes are
%% not candidates here; they are listed with their errors.
-spec explain([node()], terrain:predicate() | [terrain:predicate()], values(), #{node() => term()},
              context()) -> explanation().
explain(Candidates, Preds, Values, Unreachable, Ctx) ->
    Distinct = distinct(Candidates),
    Reachable = [N || N <- Distinct, not maps:is_key(N, Unreachable)],
    Base = #{candidates => length(Distinct), unreachable => Unreachable, steps => [],
             removed_by => none, last => #{}},
    explain_steps(top_level(Preds), Reachable, Distinct, Values, Ctx, Base).

%% @doc Drops predicates from the end of the top-level `and' until some candidate
%% matches. Returns the selection and the dropped predicates, in their original order.
-spec relax([node()], terrain:predicate() | [terrain:predicate()], values(), context()) ->
          {[node()], [terrain:predicate()]}.
relax(Candidates, Preds, Values, Ctx) ->
    relax(Candidates, lists:reverse(top_level(Preds)), [], Values, Ctx).

%% @doc Sorts a selection by an attribute, `asc' or `desc'; nodes without a value come
%% last in both directions; ties keep their order.
-spec order_by([node()], terrain:attr_name(), asc | desc, values()) -> [node()].
order_by(Nodes, Attr, Direction, Values) ->
    Keyed = [{value(N, Attr, Values), I, N} || {I, N} <- lists:enumerate(Nodes)],
    {Undefined, Defined} = lists:partition(fun({V, _, _}) -> V =:= undefined end, Keyed),
    Sorted = lists:sort(fun({Va, Ia, _}, {Vb, Ib, _}) -> before(Va, Ia, Vb, Ib, Direction) end, Defined),
    [N || {_, _, N} <- Sorted ++ Undefined].

%% @doc Renders an explanation as lines of text.
-spec format_explanation(explanation()) -> iolist().
format_explanation(#{candidates := N, unreachable := Unreachable, steps := Steps,
                     removed_by := RemovedBy, last := Last}) ->
    Header = io_lib:format("no node matched: ~b candidate~s", [N, plural(N)]),
    Unreach = case maps:size(Unreachable) of
                  0 -> [];
                  U -> [io_lib:format(", ~b could not be asked:~n", [U]),
                        [io_lib:format("    ~0p: ~ts~n", [Node, terrain:format_error(Why)])
                         || {Node, Why} <- lists:sort(maps:to_list(Unreachable))]]
              end,
    Body = case RemovedBy of
               none ->
                   ["\n  no reachable candidates to choose from\n"];
               _ ->
                   [[io_lib:format("  ~-50ts ~b remain~s~n", [pred_text(P), R, plural_verb(R)])
                     || {P, R} <- Steps],
                    io_lib:format("  ~ts removed the last ~b:~n", [pred_text(RemovedBy), maps:size(Last)]),
                    [io_lib:format("    ~0p: ~ts~n",
                                   [Node, lists:join(", ", [io_lib:format("~0tp = ~0tp", [K, V])
                                                            || {K, V} <- lists:sort(maps:to_list(Vs))])])
                     || {Node, Vs} <- lists:sort(maps:to_list(Last))]]
           end,
    [Header, case Unreach of [] -> "\n"; _ -> Unreach end, Body].

%%--------------------------------------------------------------------
%% Validation helpers

nested(P, Ps) ->
    try
        _ = length(Ps),
        first_error([validate(Q) || Q <- Ps])
    catch
        error:badarg -> {error, {bad_predicate, P}}
    end.

op(Op, P) ->
    ok_if(lists:member(Op, ?OPS), P).

ok_if(true, _P) -> ok;
ok_if(false, P) -> {error, {bad_predicate, P}}.

first_error(Results) ->
    case [E || {error, _} = E <- Results] of
        [E | _] -> E;
        [] -> ok
    end.

attribute(A) ->
    is_atom(A) andalso not lists:member(A, terrain_attr_config:reserved_names()).

is_proper_list(L) when is_list(L) ->
    try length(L) of _ -> true catch error:badarg -> false end;
is_proper_list(_) ->
    false.

names(Preds) when is_list(Preds) -> lists:append([names(P) || P <- Preds]);
names({'not', P}) -> names(P);
names({'or', Ps}) -> names(Ps);
names({'and', Ps}) -> names(Ps);
names({dist, _, _}) -> [];
names({dist, _, _, _}) -> [];
names({level, _, _}) -> [];
names({group, _, _}) -> [];
names({in_subtree, _}) -> [];
names(P) -> [element(1, P)].

%%--------------------------------------------------------------------
%% Evaluation

top_level(Preds) when is_list(Preds) -> Preds;
top_level(P) -> [P].

distinct(Nodes) ->
    distinct(Nodes, #{}, []).

distinct([], _Seen, Acc) -> lists:reverse(Acc);
distinct([N | Ns], Seen, Acc) ->
    case Seen of
        #{N := _} -> distinct(Ns, Seen, Acc);
        _ -> distinct(Ns, Seen#{N => true}, [N | Acc])
    end.

%% Relative predicates become the set of nodes for which they hold; the rest is kept.
%% Distinct gives the distinct candidates, computed only if a relative predicate
%% needs them.
compile(Preds, Distinct, Values, Ctx) when is_list(Preds) ->
    {'and', [compile(P, Distinct, Values, Ctx) || P <- Preds]};
compile({'not', P}, D, V, C) -> {'not', compile(P, D, V, C)};
compile({'or', Ps}, D, V, C) -> {'or', [compile(P, D, V, C) || P <- Ps]};
compile({'and', Ps}, D, V, C) -> {'and', [compile(P, D, V, C) || P <- Ps]};
compile({group, Scope, Group}, _D, _V, #{groups := Groups}) ->
    {members, maps:from_list([{N, true} || N <- maps:get({Scope, Group}, Groups, [])])};
compile({in_subtree, Network}, _D, _V, #{subtree := Subtree}) ->
    {members, maps:from_list([{N, true} || N <- Subtree(Network)])};
compile({A, Rel}, Distinct, Values, _Ctx) when Rel =:= low; Rel =:= high ->
    {set, A, relative(A, Rel, Distinct(), Values)};
compile({A, Rel, K}, Distinct, Values, _Ctx) when Rel =:= top; Rel =:= bottom ->
    {set, A, ranked(A, Rel, K, Distinct(), Values)};
compile(P, _D, _V, _C) ->
    P.

relative(A, Rel, Distinct, Values) ->
    Defined = [{value(N, A, Values), N} || N <- Distinct, value(N, A, Values) =/= undefined],
    Sorted = lists:sort(fun({Va, _}, {Vb, _}) -> not (Vb < Va) end, Defined),
    Total = length(Sorted),
    Groups = group_equal(Sorted, []),
    {Set, _} = lists:foldl(
                 fun(Group, {Acc, Below}) ->
                         Size = length(Group),
                         Above = Total - Below - Size,
                         Holds = case Rel of
                                     low -> Above >= Below;
                                     high -> Below >= Above
                                 end,
                         Acc1 = case Holds of
                                    true -> lists:foldl(fun({_, N}, M) -> M#{N => true} end, Acc, Group);
                                    false -> Acc
                                end,
                         {Acc1, Below + Size}
                 end, {#{}, 0}, Groups),
    Set.

%% Runs of values equal under ==, in ascending order.
group_equal([], Acc) ->
    lists:reverse(Acc);
group_equal([{V, _} | _] = Sorted, Acc) ->
    {Same, Rest} = lists:splitwith(fun({W, _}) -> W == V end, Sorted),
    group_equal(Rest, [Same | Acc]).

ranked(A, Rel, K, Distinct, Values) ->
    Defined = [{value(N, A, Values), I, N} || {I, N} <- lists:enumerate(Distinct),
                                              value(N, A, Values) =/= undefined],
    Direction = case Rel of top -> desc; bottom -> asc end,
    Sorted = lists:sort(fun({Va, Ia, _}, {Vb, Ib, _}) -> before(Va, Ia, Vb, Ib, Direction) end, Defined),
    maps:from_list([{N, true} || {_, _, N} <- lists:sublist(Sorted, K)]).

before(Va, Ia, Vb, Ib, asc) when Va == Vb -> Ia =< Ib;
before(Va, _, Vb, _, asc) -> Va < Vb;
before(Va, Ia, Vb, Ib, desc) when Va == Vb -> Ia =< Ib;
before(Va, _, Vb, _, desc) -> Va > Vb.

value(Node, Attr, Values) ->
    case Values of
        #{Node := #{Attr := V}} -> V;
        _ -> undefined
    end.

%% Predicates are evaluated against one node's values, looked up once per node.
node_values(Node, Values) ->
    case Values of
        #{Node := NodeValues} -> NodeValues;
        _ -> #{}
    end.

attr(Attr, NodeValues) ->
    case NodeValues of
        #{Attr := V} -> V;
        _ -> undefined
    end.

eval({'and', Ps}, N, V, C) -> eval_and(Ps, N, V, C, true);
eval({'or', Ps}, N, V, C) -> eval_or(Ps, N, V, C, false);
eval({'not', P}, N, V, C) -> not3(eval(P, N, V, C));
eval({members, Set}, N, _V, _C) -> maps:is_key(N, Set);
eval({set, A, Set}, N, V, _C) ->
    case attr(A, V) of
        undefined -> unknown;
        _ -> maps:is_key(N, Set)
    end;
eval({dist, Op, R}, N, V, #{self := Self} = C) ->
    eval({dist, Self, Op, R}, N, V, C);
eval({dist, From, Op, R}, N, _V, #{distance := Distance}) ->
    case Distance(From, N) of
        undefined -> unknown;
        D -> compare(Op, D, R)
    end;
eval({level, Op, Level}, N, _V, #{self := Self, level := LevelOf}) ->
    case LevelOf(Self, N) of
        undefined -> unknown;
        L -> compare(Op, terrain_topology:level_rank(L), terrain_topology:level_rank(Level))
    end;
eval({A, exists}, _N, V, _C) ->
    attr(A, V) =/= undefined;
eval({A, in, List}, _N, V, _C) ->
    case attr(A, V) of
        undefined -> unknown;
        X -> lists:any(fun(Y) -> X == Y end, List)
    end;
eval({A, Op, Const}, _N, V, _C) ->
    case attr(A, V) of
        undefined -> unknown;
        X -> compare(Op, X, Const)
    end;
eval({A, Bool}, _N, V, _C) ->
    case attr(A, V) of
        undefined -> unknown;
        X when Bool =:= true; Bool =:= yes -> X =:= true;
        X -> X =:= false
    end.

compare(eq, X, Y) -> X == Y;
compare(ne, X, Y) -> X /= Y;
compare(lt, X, Y) -> X < Y;
compare(le, X, Y) -> X =< Y;
compare(gt, X, Y) -> X > Y;
compare(ge, X, Y) -> X >= Y.

%% false wins, then unknown; stops at the first false.
eval_and([], _N, _V, _C, Acc) -> Acc;
eval_and([P | Ps], N, V, C, Acc) ->
    case eval(P, N, V, C) of
        false -> false;
        true -> eval_and(Ps, N, V, C, Acc);
        unknown -> eval_and(Ps, N, V, C, unknown)
    end.

%% true wins, then unknown; stops at the first true.
eval_or([], _N, _V, _C, Acc) -> Acc;
eval_or([P | Ps], N, V, C, Acc) ->
    case eval(P, N, V, C) of
        true -> true;
        false -> eval_or(Ps, N, V, C, Acc);
        unknown -> eval_or(Ps, N, V, C, unknown)
    end.

not3(true) -> false;
not3(false) -> true;
not3(unknown) -> unknown.

%%--------------------------------------------------------------------
%% Explain and relax

explain_steps(_Preds, [], _Distinct, _Values, _Ctx, Acc) ->
    Acc;
explain_steps([], _Remaining, _Distinct, _Values, _Ctx, Acc) ->
    Acc;
explain_steps([P | Ps], Remaining, Distinct, Values, Ctx, #{steps := Steps} = Acc) ->
    Compiled = compile(P, fun() -> Distinct end, Values, Ctx),
    Kept = [N || N <- Remaining, eval(Compiled, N, node_values(N, Values), Ctx) =:= true],
    Acc1 = Acc#{steps := Steps ++ [{P, length(Kept)}]},
    case Kept of
        [] ->
            Acc1#{removed_by := P,
                  last := maps:from_list([{N, subject(P, N, Values, Ctx)} || N <- Remaining])};
        _ ->
            explain_steps(Ps, Kept, Distinct, Values, Ctx, Acc1)
    end.

%% What a predicate looked at for one node: attribute values, the distance, the level
%% or the group membership.
subject(P, N, Values, Ctx) ->
    Attrs = maps:from_list([{A, value(N, A, Values)} || A <- attr_names(P)]),
    maps:merge(Attrs, maps:from_list(lists:append([extra(Q, N, Ctx) || Q <- flatten(P)]))).

flatten(Ps) when is_list(Ps) -> lists:append([flatten(P) || P <- Ps]);
flatten({'not', P}) -> flatten(P);
flatten({'or', Ps}) -> flatten(Ps);
flatten({'and', Ps}) -> flatten(Ps);
flatten(P) -> [P].

extra({dist, _, _}, N, #{self := Self} = Ctx) -> extra({dist, Self, x, 0}, N, Ctx);
extra({dist, From, _, _}, N, #{distance := Distance}) -> [{{dist, From}, Distance(From, N)}];
extra({level, _, _}, N, #{self := Self, level := LevelOf}) -> [{level, LevelOf(Self, N)}];
extra({in_subtree, Network}, N, #{subtree := Subtree}) ->
    [{{in_subtree, Network}, lists:member(N, Subtree(Network))}];
extra({group, Scope, Group}, N, #{groups := Groups}) ->
    [{{group, Scope, Group}, lists:member(N, maps:get({Scope, Group}, Groups, []))}];
extra(_, _, _) -> [].

relax(Candidates, [], Dropped, _Values, _Ctx) ->
    {Candidates, Dropped};
relax(Candidates, [Last | Earlier] = Reversed, Dropped, Values, Ctx) ->
    case select(Candidates, lists:reverse(Reversed), Values, Ctx) of
        [] -> relax(Candidates, Earlier, [Last | Dropped], Values, Ctx);
        Selected -> {Selected, Dropped}
    end.

%%--------------------------------------------------------------------
%% Text

pred_text(P) ->
    io_lib:format("~0tp", [P]).

plural(1) -> "";
plural(_) -> "s".

plural_verb(1) -> "s";
plural_verb(_) -> "".
