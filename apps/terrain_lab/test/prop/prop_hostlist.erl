%% @doc PropEr properties of terrain_lab_hostlist: compress/1 and expand/1 are inverses.
-module(prop_hostlist).
-include_lib("proper/include/proper.hrl").

-export([prop_expand_inverts_compress/0,
         prop_compress_of_a_range_is_one_bracket/0]).

%% Any list of host names (duplicates and any order allowed) survives
%% compress-then-expand unchanged.
prop_expand_inverts_compress() ->
    ?FORALL(Hosts, non_empty(list(host())),
            ?WHENFAIL(io:format("hosts ~p~ncompressed ~p~n", [Hosts, terrain_lab_hostlist:compress(Hosts)]),
                      terrain_lab_hostlist:expand(terrain_lab_hostlist:compress(Hosts)) =:= {ok, Hosts})).

%% Consecutive numbers of one width under one prefix compress to a single bracketed
%% range whose expansion is the list again.
prop_compress_of_a_range_is_one_bracket() ->
    ?FORALL({Prefix, MinWidth, First, Count}, {prefix(), range(1, 4), range(0, 50), range(2, 30)},
            begin
                Numbers = lists:seq(First, First + Count - 1),
                Width = max(MinWidth, length(integer_to_list(lists:last(Numbers)))),
                Hosts = [Prefix ++ lists:duplicate(Width - length(integer_to_list(N)), $0) ++ integer_to_list(N)
                         || N <- Numbers],
                Expr = terrain_lab_hostlist:compress(Hosts),
                length([C || C <- Expr, C =:= $[]) =:= 1
                    andalso terrain_lab_hostlist:expand(Expr) =:= {ok, Hosts}
            end).

host() ->
    ?LET({Prefix, Digits}, {prefix(), oneof(["", list(digit())])}, Prefix ++ Digits).

prefix() ->
    ?LET({First, Rest}, {letter(), list(oneof([letter(), digit(), $-, $., $_]))},
         [First | Rest]).

letter() -> oneof([range($a, $e), range($A, $B)]).
digit() -> range($0, $9).
