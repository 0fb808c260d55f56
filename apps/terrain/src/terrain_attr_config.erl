%% @private
%% @doc Reads and validates attribute configuration: a file of Erlang terms, or the
%% list in the `attrs' application environment key.
%%
%% Nothing here touches the attribute table: {@link parse_file/1} and
%% {@link parse_list/2} turn a configuration into a list of validated definitions, or
%% into one `{error, {config, Source, Where, Why}}' naming the first problem, so that a
%% configuration is either loaded whole or not at all. Automatic attributes are
%% evaluated by {@link evaluate_automatic/1}, in isolated processes with a deadline,
%% before anything is installed.
%%
%% The syntax, as in RELEASE D3.5's `attr' library (§3.2.1), is one list of entries or a
%% sequence of entries each ending with a full stop:
%% ```
%% [{num_cpus, 4},                                          % static
%%  {os, {static, {dynamic, "a literal that looks like a kind"}}},
%%  {processes, {dynamic, {erlang, system_info, [process_count]}}},
%%  {kernel, {automatic, {os, version}}},                   % evaluated once, at load
%%  {procs_avg, {sampled, {erlang, system_info, [process_count]},
%%               #{interval => 1000, window => 60}}}].
%% '''
%% Terms are parsed as literals; nothing in a configuration file is evaluated except
%% the functions that dynamic, automatic and sampled attributes name.
-module(terrain_attr_config).

%% API
-export([parse_file/1,
         parse_list/2,
         evaluate_automatic/1,
         check_name/1,
         check_value_size/2,
         reserved_names/0,
         limits/0]).

%% exports_not_used: Read by the tests that check the configured limits.
-ignore_xref([{limits, 0}]).

-include_lib("kernel/include/file.hrl").

-export_type([definition/0, entry/0, source/0, where/0, why/0, error/0]).

-type mfargs() :: {module(), atom(), [term()]}.

-type definition() :: {static, term()}
                    | {dynamic, mfargs(), Timeout :: pos_integer()}
                    | {automatic, mfargs(), Timeout :: pos_integer()}
                    | {sampled, mfargs(), sample_options()}
                    | {builtin, mfargs()}.
%% A validated definition. `builtin' marks terrain's own dynamic attributes, which are
%% bounded and evaluated in the reading process without isolation.

-type sample_options() :: #{interval := pos_integer(),   % ms between samples
                            window := pos_integer(),     % samples in the moving average
                            timeout := pos_integer()}.   % ms one sample may take

-type entry() :: {terrain:attr_name(), definition()}.
-type source() :: file:filename_all() | {application_env, terrain, attrs}.
-type where() :: file | {line, pos_integer()} | {entry, pos_integer()}.
-type why() :: {file, file:posix() | badarg | terminated | system_limit}
             | {file_too_large, Bytes :: non_neg_integer(), Limit :: pos_integer()}
             | {too_many, Count :: pos_integer(), Limit :: pos_integer()}
             | {syntax, string()}
             | not_a_list
             | {bad_entry, term()}
             | {bad_name, term()}
             | {reserved_name, atom()}
             | {duplicate, atom()}
             | {bad_definition, atom(), term(), string()}
             | {unknown_kind, atom(), atom()}
             | {undefined_function, atom(), {module(), atom(), arity()}}
             | {too_large, atom(), Bytes :: pos_integer(), Limit :: pos_integer()}.
-type error() :: {config, source(), where(), why()}.

-define(MAX_FILE_BYTES, 1048576).
-define(MAX_ENTRIES, 10000).
-define(MAX_VALUE_BYTES, 65536).
-define(DEFAULT_DYNAMIC_TIMEOUT, 200).
-define(DEFAULT_AUTOMATIC_TIMEOUT, 2000).
-define(DEFAULT_SAMPLE, #{interval => 1000, window => 10, timeout => 200}).
-define(KINDS, [static, dynamic, automatic, sampled]).

%%--------------------------------------------------------------------
%% API

%% @doc Reads a configuration file and validates every entry.
-spec parse_file(file:filename_all()) -> {ok, [entry()]} | {error, error()}.
parse_file(File) ->
    try
        Bin = read(File),
        Forms = scan(File, Bin),
        Entries = case Forms of
                      [{list, _, Elements}] -> Elements;
                      _ -> [case F of
                                {list, Where, _} -> throw({config, File, Where, not_a_list});
                                {term, Where, Term} -> {Where, Term}
                            end || F <- Forms]
                  end,
        {ok, validate(File, Entries)}
    catch
        throw:{config, _, _, _} = Error -> {error, Error}
    end.

%% @doc Validates an attribute list given as a term (the `attrs' application
%% environment key, or a cluster spec's node `attrs' option).
-spec parse_list(source(), term()) -> {ok, [entry()]} | {error, error()}.
parse_list(Source, List) when is_list(List) ->
    try
        _ = length(List),
        Indexed = lists:zip([{entry, I} || I <- lists:seq(1, length(List))], List),
        {ok, validate(Source, Indexed)}
    catch
        error:badarg -> {error, {config, Source, {entry, 1}, not_a_list}};
        throw:{config, _, _, _} = Error -> {error, Error}
    end;
parse_list(Source, _) ->
    {error, {config, Source, {entry, 1}, not_a_list}}.

%% @doc Replaces every automatic definition with the static value its function returns,
%% evaluating them all in parallel, each in an isolated process under its own timeout.
%% A function that crashes or hangs gives `undefined' and a logged warning.
-spec evaluate_automatic([entry()]) -> [entry()].
evaluate_automatic(Entries) ->
    Jobs = [{Name, MFA, Timeout} || {Name, {automatic, MFA, Timeout}} <- Entries],
    Values = maps:from_list(terrain_attr_eval:many(Jobs)),
    [case Def of
         {automatic, _, _} -> {Name, {static, maps:get(Name, Values)}};
         _ -> Entry
     end || {Name, Def} = Entry <- Entries].

%% @doc Checks an attribute name given to the run-time API.
-spec check_name(term()) -> ok | {error, {bad_name, term()} | {reserved_name, atom()}}.
check_name(Name) when is_atom(Name) ->
    case lists:member(Name, reserved_names()) of
        true -> {error, {reserved_name, Name}};
        false -> ok
    end;
check_name(Name) ->
    {error, {bad_name, Name}}.

%% @doc Checks that a value is small enough to be an attribute (its external size).
-spec check_value_size(atom(), term()) -> ok | {error, {too_large, atom(), pos_integer(), pos_integer()}}.
check_value_size(Name, Value) ->
    case erlang:external_size(Value) of
        Size when Size > ?MAX_VALUE_BYTES -> {error, {too_large, Name, Size, ?MAX_VALUE_BYTES}};
        _ -> ok
    end.

%% @doc Names that the predicate language uses for itself and so cannot name attributes.
-spec reserved_names() -> [atom()].
reserved_names() ->
    [dist, level, group, in_subtree, 'not', 'or', 'and', undefined].

%% @doc The size limits a configuration must respect.
-spec limits() -> #{file_bytes := pos_integer(), entries := pos_integer(),
                    value_bytes := pos_integer()}.
limits() ->
    #{file_bytes => ?MAX_FILE_BYTES, entries => ?MAX_ENTRIES, value_bytes => ?MAX_VALUE_BYTES}.

%%--------------------------------------------------------------------
%% Reading and scanning

read(File) ->
    case file:read_file_info(File) of
        {ok, #file_info{size = Size}} when Size > ?MAX_FILE_BYTES ->
            throw({config, File, file, {file_too_large, Size, ?MAX_FILE_BYTES}});
        _ ->
            case file:read_file(File) of
                {ok, Bin} when byte_size(Bin) > ?MAX_FILE_BYTES ->
                    throw({config, File, file, {file_too_large, byte_size(Bin), ?MAX_FILE_BYTES}});
                {ok, Bin} ->
                    Bin;
                {error, Why} ->
                    throw({config, File, file, {file, Why}})
            end
    end.

%% Returns the file's forms: `{list, Where, [{Where, Term}]}' for a list (with each
%% element's line) or `{term, Where, Term}' for anything else.
scan(File, Bin) ->
    Text = case unicode:characters_to_list(Bin) of
               L when is_list(L) -> L;
               _ -> throw({config, File, {line, 1}, {syntax, "the file is not valid UTF-8"}})
           end,
    scan_forms(File, Text, 1, []).

scan_forms(File, Text, Line, Acc) ->
    case erl_scan:tokens([], Text, Line) of
        {done, {ok, Tokens, EndLine}, Rest} ->
            scan_forms(File, Rest, EndLine, [form(File, Tokens) | Acc]);
        {done, {error, {ErrLine, Mod, Desc}, _}, _} ->
            throw({config, File, {line, ErrLine}, {syntax, flat(Mod:format_error(Desc))}});
        {more, Continuation} ->
            case erl_scan:tokens(Continuation, eof, Line) of
                {done, {eof, _}, _} ->
                    lists:reverse(Acc);
                {done, {ok, [First | _], _}, _} ->
                    throw({config, File, {line, erl_anno:line(element(2, First))},
                           {syntax, "missing full stop after the last term"}});
                {done, {error, {ErrLine, Mod, Desc}, _}, _} ->
                    throw({config, File, {line, ErrLine}, {syntax, flat(Mod:format_error(Desc))}})
            end
    end.

form(File, Tokens) ->
    Line = erl_anno:line(element(2, hd(Tokens))),
    case erl_parse:parse_exprs(Tokens) of
        {ok, [Expr]} ->
            case is_list_expr(Expr) of
                true -> {list, {line, Line},
                         [{{line, line(E)}, literal(File, E)} || E <- list_elements(File, Expr)]};
                false -> {term, {line, Line}, literal(File, Expr)}
            end;
        {ok, _} ->
            throw({config, File, {line, Line}, {syntax, "expected one term before the full stop"}});
        {error, {ErrLine, Mod, Desc}} ->
            throw({config, File, {line, erl_anno:line(erl_anno:new(ErrLine))},
                   {syntax, flat(Mod:format_error(Desc))}})
    end.

is_list_expr({nil, _}) -> true;
is_list_expr({cons, _, _, _}) -> true;
is_list_expr(_) -> false.

list_elements(_File, {nil, _}) -> [];
list_elements(File, {cons, _, H, T}) -> [H | list_elements(File, T)];
list_elements(File, Other) ->
    throw({config, File, {line, line(Other)}, {syntax, "the list is not a proper list"}}).

line(Expr) ->
    erl_anno:line(element(2, Expr)).

%% Turns an abstract expression into a term if it is a literal; anything else
%% (a variable, a call, a fun) is rejected, so reading a file evaluates nothing.
literal(File, Expr) ->
    try erl_parse:normalise(Expr)
    catch error:_ -> throw({config, File, {line, line(Expr)}, {syntax, "not a literal term (variables, calls and funs are not allowed)"}})
    end.

flat(IoList) ->
    lists:flatten(io_lib:format("~ts", [IoList])).

%%--------------------------------------------------------------------
%% Validation

validate(Source, Entries) ->
    case length(Entries) of
        N when N > ?MAX_ENTRIES ->
            {Where, _} = lists:nth(?MAX_ENTRIES + 1, Entries),
            throw({config, Source, Where, {too_many, N, ?MAX_ENTRIES}});
        _ ->
            ok
    end,
    {Valid, _Seen} =
        lists:foldl(fun({Where, Term}, {Acc, Seen}) ->
                            {Name, Def} = entry(Source, Where, Term),
                            _ = maps:is_key(Name, Seen)
                                andalso throw({config, Source, Where, {duplicate, Name}}),
                            {[{Name, Def} | Acc], Seen#{Name => Where}}
                    end, {[], #{}}, Entries),
    lists:reverse(Valid).

entry(Source, Where, {Name, Spec}) when is_atom(Name) ->
    case check_name(Name) of
        ok -> ok;
        {error, BadName} -> throw({config, Source, Where, BadName})
    end,
    case definition(Name, Spec) of
        {ok, {static, Value} = Def} ->
            case check_value_size(Name, Value) of
                ok -> {Name, Def};
                {error, Why} -> throw({config, Source, Where, Why})
            end;
        {ok, Def} ->
            {Name, Def};
        {error, Why} ->
            throw({config, Source, Where, Why})
    end;
entry(Source, Where, {Name, _}) ->
    throw({config, Source, Where, {bad_name, Name}});
entry(Source, Where, Term) ->
    throw({config, Source, Where, {bad_entry, Term}}).

definition(_Name, {static, Value}) ->
    {ok, {static, Value}};
definition(Name, {Kind, MFA} = Spec) when Kind =:= dynamic; Kind =:= automatic; Kind =:= sampled ->
    kind(Name, Spec, Kind, MFA, #{});
definition(Name, {Kind, MFA, Opts} = Spec) when Kind =:= dynamic; Kind =:= automatic; Kind =:= sampled ->
    kind(Name, Spec, Kind, MFA, Opts);
definition(Name, Spec) when is_tuple(Spec), tuple_size(Spec) >= 1 ->
    Kind = element(1, Spec),
    case lists:member(Kind, ?KINDS) of
        true ->
            {error, {bad_definition, Name, Spec, kind_shape(Kind)}};
        false ->
            case looks_like_kind(Spec) of
                true -> {error, {unknown_kind, Name, Kind}};
                false -> {ok, {static, Spec}}
            end
    end;
definition(_Name, Value) ->
    {ok, {static, Value}}.

kind(Name, Spec, Kind, MFA, Opts) ->
    with_mfa(Name, Spec, MFA,
             fun(M) ->
                     Defaults = case Kind of
                                    dynamic -> #{timeout => ?DEFAULT_DYNAMIC_TIMEOUT};
                                    automatic -> #{timeout => ?DEFAULT_AUTOMATIC_TIMEOUT};
                                    sampled -> ?DEFAULT_SAMPLE
                                end,
                     case {Kind, options(Opts, Defaults)} of
                         {_, {error, Detail}} ->
                             {error, {bad_definition, Name, Spec, Detail}};
                         {sampled, {ok, #{interval := I}}} when I < 10 ->
                             {error, {bad_definition, Name, Spec, "interval must be at least 10 ms"}};
                         {sampled, {ok, #{window := W}}} when W > 10000 ->
                             {error, {bad_definition, Name, Spec, "window must be at most 10000 samples"}};
                         {sampled, {ok, Checked}} ->
                             {ok, {sampled, M, Checked}};
                         {_, {ok, #{timeout := T}}} ->
                             {ok, {Kind, M, T}}
                     end
             end).

kind_shape(static) -> "expected {static, Term}";
kind_shape(dynamic) -> "expected {dynamic, {M, F}}, {dynamic, {M, F, Args}} or {dynamic, MFA, #{timeout => Ms}}";
kind_shape(automatic) -> "expected {automatic, {M, F}}, {automatic, {M, F, Args}} or {automatic, MFA, #{timeout => Ms}}";
kind_shape(sampled) -> "expected {sampled, MFA} or {sampled, MFA, #{interval => Ms, window => N, timeout => Ms}}".

%% A static value never needs to look like a kind, but a misspelt kind always does:
%% `{Kind, {M, F}}', `{Kind, {M, F, Args}}' or either with an options map, where Kind
%% is close to a known kind or the function exists. `{static, Term}' always escapes.
looks_like_kind({Kind, MFA}) -> looks_like_kind(Kind, MFA);
looks_like_kind({Kind, MFA, Opts}) when is_map(Opts) -> looks_like_kind(Kind, MFA);
looks_like_kind(_) -> false.

looks_like_kind(Kind, MFA) when is_atom(Kind) ->
    case mfa(MFA) of
        {ok, {M, F, A}} ->
            lists:any(fun(K) -> edit_distance(atom_to_list(Kind), atom_to_list(K)) =< 2 end, ?KINDS)
                orelse function_exists(M, F, length(A));
        error ->
            false
    end;
looks_like_kind(_, _) ->
    false.

with_mfa(Name, Spec, MFA, Then) ->
    case mfa(MFA) of
        {ok, {M, F, A} = Checked} ->
            case function_exists(M, F, length(A)) of
                true -> Then(Checked);
                false -> {error, {undefined_function, Name, {M, F, length(A)}}}
            end;
        error ->
            {error, {bad_definition, Name, Spec, "expected {Module, Function} or {Module, Function, Args}"}}
    end.

mfa({M, F}) when is_atom(M), is_atom(F) -> {ok, {M, F, []}};
mfa({M, F, A}) when is_atom(M), is_atom(F), is_list(A) ->
    try length(A) of _ -> {ok, {M, F, A}} catch error:badarg -> error end;
mfa(_) -> error.

function_exists(M, F, Arity) ->
    _ = code:ensure_loaded(M),
    erlang:function_exported(M, F, Arity).

options(Opts, Defaults) when is_map(Opts) ->
    maps:fold(fun(K, V, {ok, Acc}) ->
                      case maps:is_key(K, Defaults) of
                          false -> {error, lists:flatten(io_lib:format("unknown option ~0tp", [K]))};
                          true when is_integer(V), V > 0 -> {ok, Acc#{K => V}};
                          true -> {error, lists:flatten(io_lib:format("option ~0tp must be a positive integer, got ~0tp", [K, V]))}
                      end;
                 (_, _, Error) -> Error
              end, {ok, Defaults}, Opts);
options(Opts, _) ->
    {error, lists:flatten(io_lib:format("options must be a map, got ~0tp", [Opts]))}.

%% Levenshtein distance, for "did you mean a kind?" detection on short atoms.
edit_distance(A, B) ->
    First = lists:seq(0, length(B)),
    Last = lists:foldl(fun({I, CA}, Prev) ->
                               row(CA, B, Prev, [I])
                       end, First, lists:zip(lists:seq(1, length(A)), A)),
    lists:last(Last).

row(_CA, [], _Prev, Acc) ->
    lists:reverse(Acc);
row(CA, [CB | B], [Diag, Up | Prev], [Left | _] = Acc) ->
    Cost = case CA =:= CB of true -> 0; false -> 1 end,
    row(CA, B, [Up | Prev], [min(min(Up + 1, Left + 1), Diag + Cost) | Acc]).
