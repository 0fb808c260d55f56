%% @private
%% @doc Rules files (`terrain.collective_rules/1'): per operation and range of value
%% sizes, the algorithm `auto' runs (Open MPI's dynamic rules, filled with the
%% cluster's own measurements by `terrain collective tune').
%%
%% ```
%% {"format": "terrain.collective_rules/1",
%%  "created_at": "...", "source": {...},
%%  "rules": [{"operation": "allreduce", "min_bytes": 0, "max_bytes": 4096,
%%             "algorithm": "hierarchical"}, ...]}
%% '''
%% A rule applies to values of `min_bytes' ≤ size &lt; `max_bytes' (`max_bytes' null: no
%% upper end); the first rule that applies wins. The size is the value's external
%% size (`erlang:external_size/1').
-module(terrain_paths_rules).

%% API
-export([read/1,
         from_json/1,
         to_json/2,
         choose/4,
         algorithms/0]).

%% exports_not_used: from_json/1 is checked on its own by terrain_paths_tests.
-ignore_xref([{from_json, 1}]).

-export_type([rules/0, rule/0]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_COLLECTIVE_RULES).

-type rule() :: #{operation := terrain_paths_collective:operation(),
                  min_bytes := non_neg_integer(),
                  max_bytes := pos_integer() | infinity,
                  algorithm := terrain_paths:named_algorithm()}.
-type rules() :: [rule()].

%%--------------------------------------------------------------------
%% API

%% @doc The algorithms a rule may name.
-spec algorithms() -> [terrain_paths:named_algorithm()].
algorithms() ->
    [flat, binomial, recursive_doubling, ring, rabenseifner, hierarchical].

%% @doc The operations a rule may name.
-spec operations() -> [terrain_paths_collective:operation()].
operations() ->
    [allreduce, reduce, broadcast, barrier, gather, allgather, scatter].

%% @doc Reads a rules file.
-spec read(file:filename()) -> {ok, rules()} | {error, term()}.
read(File) ->
    case terrain_json:read_file(File) of
        {ok, Json} ->
            case from_json(Json) of
                {ok, _} = Ok -> Ok;
                {error, Why} -> {error, {paths, {rules, File, Why}}}
            end;
        {error, {json, Offset, Message}} -> {error, {paths, {rules, File, {json, Offset, Message}}}};
        {error, _} = Error -> Error
    end.

%% @doc Validates decoded JSON as a rules document.
-spec from_json(term()) -> {ok, rules()} | {error, term()}.
from_json(#{<<"format">> := ?FORMAT, <<"rules">> := Rules}) when is_list(Rules) ->
    Parsed = [rule(R) || R <- Rules],
    case [Bad || {error, Bad} <- Parsed] of
        [] -> {ok, [R || {ok, R} <- Parsed]};
        [Bad | _] -> {error, Bad}
    end;
from_json(#{<<"format">> := Other}) ->
    {error, {format, Other}};
from_json(_) ->
    {error, not_rules}.

%% @doc The JSON document of a list of rules.
-spec to_json(rules(), map()) -> map().
to_json(Rules, Source) ->
    #{format => ?FORMAT,
      created_at => list_to_binary(calendar:system_time_to_rfc3339(erlang:system_time(second), [{offset, "Z"}])),
      source => Source,
      rules => [#{operation => Op, min_bytes => Min,
                  max_bytes => case Max of infinity -> null; _ -> Max end,
                  algorithm => Alg}
                || #{operation := Op, min_bytes := Min, max_bytes := Max, algorithm := Alg} <- Rules]}.

%% @doc The algorithm for `Operation' on a value of `Bytes', or the built-in default.
-spec choose(rules(), terrain_paths_collective:operation(), non_neg_integer(), #{nodes := pos_integer()}) ->
          terrain_paths:named_algorithm().
choose(Rules, Operation, Bytes, #{nodes := Nodes}) ->
    case [A || #{operation := O, min_bytes := Min, max_bytes := Max, algorithm := A} <- Rules,
               O =:= Operation, Bytes >= Min, Max =:= infinity orelse Bytes < Max] of
        [Algorithm | _] -> Algorithm;
        [] when Nodes > 1 -> hierarchical;
        [] when Operation =:= allreduce, Bytes > 2048 -> rabenseifner;
        [] when Operation =:= allreduce; Operation =:= allgather; Operation =:= barrier -> recursive_doubling;
        [] -> binomial
    end.

%%--------------------------------------------------------------------
%% Internal functions

rule(#{<<"operation">> := Op, <<"min_bytes">> := Min, <<"algorithm">> := Alg} = R)
  when is_binary(Op), is_integer(Min), Min >= 0, is_binary(Alg) ->
    Max = maps:get(<<"max_bytes">>, R, null),
    case {known(Op, operations()), known(Alg, algorithms()), Max} of
        {error, _, _} -> {error, {operation, Op}};
        {_, error, _} -> {error, {algorithm, Alg}};
        {{ok, O}, {ok, A}, null} -> {ok, #{operation => O, min_bytes => Min, max_bytes => infinity, algorithm => A}};
        {{ok, O}, {ok, A}, M} when is_integer(M), M > Min ->
            {ok, #{operation => O, min_bytes => Min, max_bytes => M, algorithm => A}};
        _ -> {error, {max_bytes, Max}}
    end;
rule(Other) ->
    {error, {rule, Other}}.

known(Name, Known) ->
    case [K || K <- Known, atom_to_binary(K) =:= Name] of
        [K] -> {ok, K};
        [] -> error
    end.
