%% @private
%% @doc The one option checker of terrain's applications and its lab: an option map
%% is checked against a map of checks, one predicate per known key, and a refusal
%% has one of four shapes, each a sentence through {@link format_error/1}:
%% <ul>
%% <li>`{bad_option, Key, Value}': a known key with a value its check refuses;</li>
%% <li>`{unknown_option, Key}': a key with no check;</li>
%% <li>`{missing_option, Key}': a key {@link required/2} needs is absent;</li>
%% <li>`{bad_options, Term}': the options are not a map.</li>
%% </ul>
%% A module that tags its errors wraps the reason (`{insert, {bad_option, gap, 1}}')
%% and may say more (what the value must be) in its own `format_error/1'.
%% ```
%% Checks = #{timeout => fun(T) -> is_integer(T) andalso T >= 0 end},
%% ok = terrain_options:check(#{timeout => 10}, Checks),
%% {error, {bad_option, timeout, -1}} = terrain_options:check(#{timeout => -1}, Checks),
%% {error, {unknown_option, colour}} = terrain_options:check(#{colour => red}, Checks).
%% '''
-module(terrain_options).

%% API
-export([check/2,
         required/2,
         format_error/1]).

-export_type([checks/0, reason/0]).

%% A predicate per known option key.
-type checks() :: #{term() => fun((term()) -> boolean())}.

-type reason() :: {bad_option, term(), term()}
                | {unknown_option, term()}
                | {missing_option, term()}
                | {bad_options, term()}.

%%--------------------------------------------------------------------
%% API

%% @doc `ok' when `Options' is a map whose every key has a check in `Checks' that its
%% value passes; else the first refusal, in the order of the keys.
-spec check(term(), checks()) -> ok | {error, reason()}.
check(Options, Checks) when is_map(Options) ->
    Refused = [case Checks of
                   #{Key := _} -> {bad_option, Key, Value};
                   #{} -> {unknown_option, Key}
               end || {Key, Value} <- lists:sort(maps:to_list(Options)),
                      not (is_map_key(Key, Checks) andalso (maps:get(Key, Checks))(Value))],
    case Refused of
        [] -> ok;
        [First | _] -> {error, First}
    end;
check(Options, _Checks) ->
    {error, {bad_options, Options}}.

%% @doc `ok' when the map `Options' has every key of `Keys'; else the first missing.
-spec required(term(), [term()]) -> ok | {error, reason()}.
required(Options, Keys) when is_map(Options) ->
    case [K || K <- Keys, not is_map_key(K, Options)] of
        [] -> ok;
        [Missing | _] -> {error, {missing_option, Missing}}
    end;
required(Options, _Keys) ->
    {error, {bad_options, Options}}.

%% @doc A sentence for a refusal.
-spec format_error(reason()) -> iolist().
format_error({bad_option, Key, Value}) ->
    io_lib:format("bad value for option ~0tp: ~0tp", [Key, Value]);
format_error({unknown_option, Key}) ->
    io_lib:format("unknown option ~0tp", [Key]);
format_error({missing_option, Key}) ->
    io_lib:format("the option ~0tp is required", [Key]);
format_error({bad_options, Options}) ->
    io_lib:format("options must be a map, got ~0tp", [Options]).
