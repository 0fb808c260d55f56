%% Property: every JSON value survives encode then decode, compact or pretty.
-module(prop_json).
-include_lib("proper/include/proper.hrl").
-export([prop_roundtrip/0]).

prop_roundtrip() ->
    ?FORALL({Value, Pretty}, {json_value(3), boolean()},
            terrain_json:decode(terrain_json:encode(Value, #{pretty => Pretty})) =:= {ok, Value}).

json_value(0) ->
    oneof([integer(), real(), boolean(), null, text()]);
json_value(N) ->
    ?LAZY(frequency([{3, json_value(0)},
                     {1, list(json_value(N - 1))},
                     {1, ?LET(Pairs, list({text(), json_value(N - 1)}), maps:from_list(Pairs))}])).

text() ->
    ?LET(Chars, list(oneof([range($\s, $~), $\n, $\t, $", $\\, range(16#a0, 16#3ff), 16#1F600])),
         unicode:characters_to_binary(Chars)).
