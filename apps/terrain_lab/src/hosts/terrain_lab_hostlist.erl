%% @private
%% @doc SLURM hostlist expressions: expand `atcn[019-036,073-126]' into host names and
%% compress a list of host names back into such an expression.
%%
%% SLURM hands an allocation's nodes out in this form (`SLURM_JOB_NODELIST'; the Athos
%% allocations of RELEASE D3.5 §4.4.4 look like `atcn[127-144,163-180,217-288]'). The
%% grammar understood here:
%% ```
%% expression := group ("," group)*
%% group      := (name-chars | "[" ranges "]")+
%% ranges     := range ("," range)*
%% range      := digits | digits "-" digits
%% name-chars := letters, digits, "-", ".", "_"
%% '''
%% A group with several bracketed parts (`rack[1-2]-n[01-04]') expands to every
%% combination, the leftmost part varying slowest, as SLURM does. A range keeps the
%% width of its lower bound: `[08-11]' gives `08 09 10 11', `[8-11]' gives `8 9 10 11'.
%% Host names keep the order of the expression; duplicates are kept.
%%
%% {@link compress/1} is the inverse for any list of names made of name characters:
%% `expand(compress(Hosts))' returns `Hosts' (property `prop_hostlist').
-module(terrain_lab_hostlist).

%% API
-export([expand/1,
         compress/1,
         format_error/1]).

%% exports_not_used: compress/1 is the inverse of expand/1, used by the hostlist
%% property and by scripts that hand an allocation on.
-ignore_xref([{compress, 1}]).

-export_type([error_reason/0]).

%% Column is the 1-based position of the offending character in the expression.
-type error_reason() :: {hostlist, {Expression :: string(), Column :: pos_integer(), Why :: why()}}.
-type why() :: empty_name | unclosed_bracket | nested_bracket | unopened_bracket
             | empty_range | {bad_character, char()} | {descending, string(), string()}
             | {too_many, pos_integer()} | {too_long, string()}.

%% An expression larger than this is refused rather than expanded.
-define(MAX_HOSTS, 1000000).
%% A host name is at most this long (DNS: 253 characters); terrain makes node names
%% and spec group names (atoms, at most 255 characters) from it.
-define(MAX_NAME, 253).

%%--------------------------------------------------------------------
%% API

%% @doc The host names of a hostlist expression, in its order.
-spec expand(string()) -> {ok, [string()]} | {error, error_reason()}.
expand(Expression) when is_list(Expression) ->
    try
        Groups = groups(Expression, 1, [], []),
        Count = lists:sum([group_size(G) || {_, G} <- Groups]),
        Count =< ?MAX_HOSTS orelse throw({1, {too_many, Count}}),
        Hosts = lists:append([expand_group(G) || {_, G} <- Groups]),
        _ = [throw({1, {too_long, H}}) || H <- Hosts, length(H) > ?MAX_NAME],
        {ok, Hosts}
    catch
        throw:{Column, Why} -> {error, {hostlist, {Expression, Column, Why}}}
    end;
expand(Other) ->
    error(badarg, [Other]).

%% @doc A hostlist expression of `Hosts' that {@link expand/1} turns back into `Hosts':
%% consecutive names that differ only in a trailing number of the same width share
%% brackets.
-spec compress([string()]) -> string().
compress(Hosts) when is_list(Hosts) ->
    lists:flatten(lists:join(",", [format_run(Run) || Run <- runs(Hosts)])).

%% @doc The error, the expression and a caret under the offending character.
-spec format_error(error_reason()) -> iolist().
format_error({hostlist, {Expression, Column, Why}}) ->
    io_lib:format("bad hostlist expression: ~ts at column ~b~n  ~ts~n  ~ts^",
                  [why(Why), Column, Expression, lists:duplicate(Column - 1, $\s)]).

%%--------------------------------------------------------------------
%% Parsing: a group is a list of parts, each {literal, String} or
%% {ranges, [{First, Last, Width}]}.

groups([], Column, Parts, Acc) ->
    lists:reverse([finish_group(Column, Parts) | Acc]);
groups([$, | Rest], Column, Parts, Acc) ->
    groups(Rest, Column + 1, [], [finish_group(Column, Parts) | Acc]);
groups([$[ | Rest], Column, Parts, Acc) ->
    {Ranges, Rest1, Column1} = ranges(Rest, Column + 1, Column),
    groups(Rest1, Column1, [{ranges, Ranges} | Parts], Acc);
groups([$] | _], Column, _Parts, _Acc) ->
    throw({Column, unopened_bracket});
groups([C | Rest], Column, Parts, Acc) ->
    name_char(C) orelse throw({Column, {bad_character, C}}),
    Parts1 = case Parts of
                 [{literal, L} | More] -> [{literal, [C | L]} | More];
                 _ -> [{literal, [C]} | Parts]
             end,
    groups(Rest, Column + 1, Parts1, Acc).

%% The group ends at Column (a comma or the end): it must not be empty.
finish_group(Column, []) ->
    throw({Column, empty_name});
finish_group(Column, Parts) ->
    {Column, [case P of {literal, L} -> {literal, lists:reverse(L)}; _ -> P end || P <- lists:reverse(Parts)]}.

%% Reads "a-b,c]" after an opening bracket at Open.
ranges(Chars, Column, Open) ->
    ranges(Chars, Column, Open, []).

ranges(Chars, Column, Open, Acc) ->
    {Range, Rest, Column1} = range(Chars, Column, Open),
    case Rest of
        [$, | Rest1] -> ranges(Rest1, Column1 + 1, Open, [Range | Acc]);
        [$] | Rest1] -> {lists:reverse([Range | Acc]), Rest1, Column1 + 1};
        [$[ | _] -> throw({Column1, nested_bracket});
        [C | _] -> throw({Column1, {bad_character, C}});
        [] -> throw({Open, unclosed_bracket})
    end.

range(Chars, Column, Open) ->
    case digits(Chars) of
        {[], [], _} -> throw({Open, unclosed_bracket});
        {[], [C | _], _} when C =:= $,; C =:= $] -> throw({Column, empty_range});
        {[], [$[ | _], _} -> throw({Column, nested_bracket});
        {[], [C | _], _} -> throw({Column, {bad_character, C}});
        {First, [$- | Rest], N} ->
            case digits(Rest) of
                {[], [], _} -> throw({Open, unclosed_bracket});
                {[], [C | _], _} when C =:= $,; C =:= $] -> throw({Column + N + 1, empty_range});
                {[], [C | _], _} -> throw({Column + N + 1, {bad_character, C}});
                {Last, Rest1, M} ->
                    list_to_integer(First) =< list_to_integer(Last)
                        orelse throw({Column, {descending, First, Last}}),
                    {{list_to_integer(First), list_to_integer(Last), length(First)}, Rest1, Column + N + 1 + M}
            end;
        {First, Rest, N} ->
            {{list_to_integer(First), list_to_integer(First), length(First)}, Rest, Column + N}
    end.

digits(Chars) ->
    {Digits, Rest} = lists:splitwith(fun(C) -> C >= $0 andalso C =< $9 end, Chars),
    {Digits, Rest, length(Digits)}.

name_char(C) ->
    (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z) orelse (C >= $0 andalso C =< $9)
        orelse C =:= $- orelse C =:= $. orelse C =:= $_.

%%--------------------------------------------------------------------
%% Expansion

group_size(Parts) ->
    lists:foldl(fun({literal, _}, Size) -> Size;
                   ({ranges, Ranges}, Size) -> Size * lists:sum([L - F + 1 || {F, L, _} <- Ranges])
                end, 1, Parts).

expand_group(Parts) ->
    lists:foldl(fun(Part, Prefixes) -> [P ++ S || P <- Prefixes, S <- part_strings(Part)] end, [""], Parts).

part_strings({literal, L}) ->
    [L];
part_strings({ranges, Ranges}) ->
    [pad(N, Width) || {First, Last, Width} <- Ranges, N <- lists:seq(First, Last)].

pad(N, Width) ->
    Digits = integer_to_list(N),
    lists:duplicate(max(0, Width - length(Digits)), $0) ++ Digits.

%%--------------------------------------------------------------------
%% Compression: runs of consecutive names with the same prefix and the same width of
%% trailing number; within a run, ranges of consecutive numbers.

runs(Hosts) ->
    lists:reverse(lists:foldl(fun add_host/2, [], Hosts)).

add_host(Host, Runs) ->
    case split_number(Host) of
        {Prefix, none} ->
            [{literal, Prefix} | Runs];
        {Prefix, {N, Width}} ->
            case Runs of
                [{Prefix, Width, [{First, Last} | Ranges]} | More] when N =:= Last + 1 ->
                    [{Prefix, Width, [{First, N} | Ranges]} | More];
                [{Prefix, Width, Ranges} | More] ->
                    [{Prefix, Width, [{N, N} | Ranges]} | More];
                _ ->
                    [{Prefix, Width, [{N, N}]} | Runs]
            end
    end.

%% "atcn019" -> {"atcn", {19, 3}}; "login" -> {"login", none}.
split_number(Host) ->
    {RevDigits, RevPrefix} = lists:splitwith(fun(C) -> C >= $0 andalso C =< $9 end, lists:reverse(Host)),
    case RevDigits of
        [] -> {Host, none};
        _ -> {lists:reverse(RevPrefix), {list_to_integer(lists:reverse(RevDigits)), length(RevDigits)}}
    end.

format_run({literal, Name}) ->
    Name;
format_run({Prefix, Width, [{N, N}]}) ->
    Prefix ++ pad(N, Width);
format_run({Prefix, Width, Ranges}) ->
    Prefix ++ "[" ++ lists:join(",", [format_range(R, Width) || R <- lists:reverse(Ranges)]) ++ "]".

format_range({N, N}, Width) -> pad(N, Width);
format_range({First, Last}, Width) -> pad(First, Width) ++ "-" ++ pad(Last, Width).

why(empty_name) -> "empty host name";
why(unclosed_bracket) -> "'[' is never closed";
why(nested_bracket) -> "brackets do not nest";
why(unopened_bracket) -> "']' without '['";
why(empty_range) -> "empty range";
why({bad_character, C}) -> io_lib:format("'~tc' is not allowed here", [C]);
why({descending, First, Last}) -> io_lib:format("range ~ts-~ts runs backwards", [First, Last]);
why({too_many, Count}) -> io_lib:format("~b hosts are more than the ~b allowed", [Count, ?MAX_HOSTS]);
why({too_long, Host}) ->
    io_lib:format("the host name ~ts... has ~b characters, more than the ~b a host name may have",
                  [string:slice(Host, 0, 20), length(Host), ?MAX_NAME]).
