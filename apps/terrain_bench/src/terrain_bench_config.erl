%% @private
%% @doc Benchmark configurations: Erlang terms read with `file:consult/1', with
%% DE-Bench's keys where it has them (Ghaffari, Erlang Workshop 2014), checked in
%% full before anything starts. Every error names the key and what was expected.
-module(terrain_bench_config).

%% API
-export([read/1,
         validate/1,
         operations/0,
         to_json/1,
         format_error/1]).

-export_type([config/0, operation/0, target/0, mode/0]).

-include_lib("kernel/include/file.hrl").

-type operation() :: terrain_bench:operation().

-type target() :: random | [term()] | {group, atom(), term()}.
-type mode() :: closed | {rate, number()} | {think, number()}.

-type config() :: terrain_bench:config().

-define(MAX_BYTES, 1024 * 1024).   % a configuration is a few lines

-define(DEFAULTS, #{duration => 60, concurrent => 4, report_interval => 1, argument_size => 10,
                    compute_us => 10, target => random, mode => closed, warmup => 0, timeout => 5000,
                    connect => true}).

%%--------------------------------------------------------------------
%% API

%% @doc Reads and validates a configuration file: one `{Key, Value}.' term per key. It
%% must be a regular file of at most ?MAX_BYTES bytes (a device such as /dev/zero is
%% never read).
-spec read(file:filename()) -> {ok, config()} | {error, term()}.
read(File) ->
    case file:read_file_info(File) of
        {ok, #file_info{type = regular, size = Size}} when Size =< ?MAX_BYTES ->
            case file:consult(File) of
                {ok, Terms} -> validate(Terms);
                {error, {Line, Module, Term}} ->
                    {error, {bench_config, {syntax, File, Line, Module:format_error(Term)}}};
                {error, Why} -> {error, {bench_config, {file, File, Why}}}
            end;
        {ok, #file_info{type = regular}} -> {error, {bench_config, {file, File, too_large}}};
        {ok, #file_info{}} -> {error, {bench_config, {file, File, not_regular}}};
        {error, Why} -> {error, {bench_config, {file, File, Why}}}
    end.

%% @doc Validates a configuration (a proplist or a map) and fills in the defaults.
-spec validate([{atom(), term()}] | map()) -> {ok, config()} | {error, term()}.
validate(Map) when is_map(Map) ->
    validate(maps:to_list(Map));
validate(Terms) when is_list(Terms) ->
    case [T || T <- Terms, not (is_tuple(T) andalso tuple_size(T) =:= 2 andalso is_atom(element(1, T)))] of
        [Bad | _] -> {error, {bench_config, {not_a_key_value, Bad}}};
        [] -> check(Terms)
    end.

%% @doc Every operation the benchmark knows.
-spec operations() -> [operation()].
operations() ->
    [spawn, rpc, erpc, gen_server_call, fsm_server_call, global_register, global_unregister,
     global_whereis, local_register, local_unregister, local_whereis, pg_join, pg_leave,
     pg_get_members, terrain_choose, noop].

%% @doc The configuration as JSON terms (for summary.json and manifests).
-spec to_json(config()) -> map().
to_json(Config) ->
    maps:map(fun(operations, Ops) -> maps:from_list([{atom_to_binary(O), W} || {O, W} <- Ops]);
                (target, random) -> <<"random">>;
                (target, T) -> iolist_to_binary(io_lib:format("~0tp", [T]));
                (mode, closed) -> <<"closed">>;
                (mode, {rate, R}) -> #{rate => R};
                (mode, {think, Ms}) -> #{think_ms => Ms};
                (_, V) -> V
             end, Config).

%% @doc A sentence for a configuration error.
-spec format_error(term()) -> iolist().
format_error({bench_config, {syntax, File, Line, Text}}) ->
    io_lib:format("~ts:~p: ~ts", [File, Line, Text]);
format_error({bench_config, {file, File, not_regular}}) ->
    io_lib:format("cannot read configuration ~ts: not a regular file", [File]);
format_error({bench_config, {file, File, too_large}}) ->
    io_lib:format("cannot read configuration ~ts: larger than ~b bytes", [File, ?MAX_BYTES]);
format_error({bench_config, {file, File, Why}}) ->
    io_lib:format("cannot read configuration ~ts: ~ts", [File, file:format_error(Why)]);
format_error({bench_config, {not_a_key_value, Term}}) ->
    io_lib:format("configuration: expected {Key, Value} terms, got ~0tp", [Term]);
format_error({bench_config, {unknown_key, Key}}) ->
    io_lib:format("configuration: unknown key ~0tp; known keys: ~ts",
                  [Key, lists:join(", ", [atom_to_list(K) || K <- keys()])]);
format_error({bench_config, {duplicate_key, Key}}) ->
    io_lib:format("configuration: key ~0tp given twice", [Key]);
format_error({bench_config, {missing_key, Key}}) ->
    io_lib:format("configuration: key ~0tp is required (~ts)", [Key, expected(Key)]);
format_error({bench_config, {bad_value, Key, Value}}) ->
    io_lib:format("configuration: ~0tp must be ~ts, got ~0tp", [Key, expected(Key), Value]).

%%--------------------------------------------------------------------
%% Internal

keys() ->
    [duration, concurrent, report_interval, operations, argument_size, compute_us, target, mode,
     warmup, timeout, connect].

expected(duration) -> "a positive integer (seconds)";
expected(concurrent) -> "a positive integer (workers per node)";
expected(report_interval) -> "a positive integer (seconds)";
expected(operations) ->
    "a non-empty list of {Operation, Weight} with a positive integer weight, each operation once, "
    "Operation one of " ++ lists:join(", ", [atom_to_list(O) || O <- operations()]);
expected(argument_size) -> "a non-negative integer (bytes)";
expected(compute_us) -> "a non-negative integer (microseconds)";
expected(target) -> "random, a list of terrain predicates, or {group, Scope, Group} with an atom Scope";
expected(mode) ->
    "closed, {rate, OpsPerSecondPerWorker} or {think, MeanMilliseconds} with a positive number";
expected(warmup) -> "a non-negative integer (seconds)";
expected(timeout) -> "a positive integer (milliseconds)";
expected(connect) -> "true or false".

check(Terms) ->
    Keys = [K || {K, _} <- Terms],
    case {Keys -- lists:usort(Keys), [K || K <- Keys, not lists:member(K, keys())]} of
        {_, [Unknown | _]} -> {error, {bench_config, {unknown_key, Unknown}}};
        {[Dup | _], []} -> {error, {bench_config, {duplicate_key, Dup}}};
        {[], []} ->
            Config = maps:merge(?DEFAULTS, maps:from_list(Terms)),
            case maps:is_key(operations, Config) of
                false -> {error, {bench_config, {missing_key, operations}}};
                true -> check_values(keys(), Config)
            end
    end.

check_values([], Config) ->
    {ok, Config};
check_values([Key | Keys], Config) ->
    Value = maps:get(Key, Config),
    case valid(Key, Value) of
        true -> check_values(Keys, Config);
        false -> {error, {bench_config, {bad_value, Key, Value}}}
    end.

valid(Key, V) when Key =:= duration; Key =:= concurrent; Key =:= report_interval; Key =:= timeout ->
    is_integer(V) andalso V > 0;
valid(Key, V) when Key =:= argument_size; Key =:= compute_us; Key =:= warmup ->
    is_integer(V) andalso V >= 0;
valid(operations, Ops) ->
    is_list(Ops) andalso Ops =/= []
        andalso lists:all(fun({O, W}) -> lists:member(O, operations()) andalso is_integer(W) andalso W > 0;
                             (_) -> false
                          end, Ops)
        andalso length(lists:usort([O || {O, _} <- Ops])) =:= length(Ops);
valid(target, random) -> true;
valid(target, {group, Scope, _Group}) -> is_atom(Scope);
valid(target, Preds) when is_list(Preds), Preds =/= [] ->
    %% terrain checks the predicates before it looks at a candidate
    not is_tuple(terrain:choose_nodes([], Preds));
valid(target, _) -> false;
valid(mode, closed) -> true;
valid(mode, {rate, R}) -> is_number(R) andalso R > 0;
valid(mode, {think, Ms}) -> is_number(Ms) andalso Ms > 0;
valid(mode, _) -> false;
valid(connect, V) -> is_boolean(V).
