%% @doc terrain_json: the JSON codec (RFC 8259) of every `terrain.<kind>/<version>'
%% file, so that terrain's applications depend on OTP alone; OTP 27's `json' module
%% replaces it once OTP 25 support ends.
%%
%% It is the one module of the `terrain_json' application, a library with no
%% processes that terrain, terrain_paths, terrain_events, terrain_bench and the lab
%% declare as a dependency. Programs that read terrain's files (a `summary.json', a
%% `latency.json') may use it too.
%% ```
%% Json = terrain_json:encode(#{format => <<"terrain.example/1">>, nodes => [<<"a@h1">>, <<"b@h2">>]}),
%% {ok, #{<<"format">> := <<"terrain.example/1">>, <<"nodes">> := [<<"a@h1">>, <<"b@h2">>]}} =
%%     terrain_json:decode(Json),
%% ok = terrain_json:write_file("example.json", #{ratio => 1.5, ok => true, missing => null}),
%% {ok, #{<<"ratio">> := 1.5, <<"ok">> := true, <<"missing">> := null}} =
%%     terrain_json:read_file("example.json"),
%% %% errors name the byte offset of the problem:
%% {error, {json, 6, _Why}} = terrain_json:decode(<<"{\"a\": }">>).
%% '''
%%
%% Input is bounded: {@link decode/1} refuses arrays and objects nested more than
%% 512 deep (an explicit counter: the decoder recurses), and {@link read_file/1}
%% reads only regular files of at most 256 MB (not `/dev/zero', a FIFO or a
%% directory), so that no file exhausts the memory of the VM that reads it.
%%
%% Decoding gives maps with binary keys, lists, binaries, integers, floats and the
%% atoms `true', `false' and `null'. Encoding accepts the same, plus atom keys and
%% other atoms (written as strings). Strings must be binaries: a list is always an
%% array.
-module(terrain_json).

-include_lib("kernel/include/file.hrl").

%% API
-export([decode/1,
         encode/1,
         encode/2,
         read_file/1,
         write_file/2,
         write_atomically/2]).

%% exports_not_used: the codec's public API; encode/1 (compact) is for users, the
%% project's code writes pretty JSON with encode/2.
-ignore_xref([{encode, 1}]).

-export_type([json/0]).

-define(MAX_DEPTH, 512).
-define(MAX_FILE_BYTES, 256 * 1024 * 1024).

-type json() :: #{binary() | atom() => json()} | [json()] | binary() | number() | boolean()
              | null | atom().
%% A JSON value: objects are maps (binary keys when decoded), arrays lists, strings
%% binaries; `true', `false' and `null' are atoms.

%% @doc Decodes one JSON document. Errors name the byte offset of the problem;
%% arrays and objects may nest 512 deep.
-spec decode(iodata()) -> {ok, json()} | {error, {json, non_neg_integer(), string()}}.
decode(Data) ->
    Bin = iolist_to_binary(Data),
    try
        {Value, Rest} = value(skip_ws(Bin), {Bin, ?MAX_DEPTH}),
        case skip_ws(Rest) of
            <<>> -> {ok, Value};
            Trailing -> throw({error, byte_size(Bin) - byte_size(Trailing), "unexpected data after the value"})
        end
    catch
        throw:{error, Where, Why} -> {error, {json, Where, Why}}
    end.

%% @doc Encodes a term as compact JSON.
-spec encode(json()) -> binary().
encode(Term) ->
    encode(Term, #{}).

%% @doc Encodes a term as JSON; `#{pretty => true}' indents by two spaces.
-spec encode(json(), #{pretty => boolean()}) -> binary().
encode(Term, Opts) ->
    Indent = case maps:get(pretty, Opts, false) of true -> 0; false -> none end,
    iolist_to_binary(enc(Term, Indent)).

%% @doc Reads and decodes a JSON file: a regular file (`not_regular' for a device,
%% a FIFO or a directory) of at most 256 MB (`{too_large, Max}').
-spec read_file(file:name_all()) ->
          {ok, json()} | {error, {file, file:name_all(), file:posix() | badarg | terminated | system_limit
                                                        | not_regular | {too_large, pos_integer()}}}
                        | {error, {json, non_neg_integer(), string()}}.
read_file(File) ->
    Read = case file:read_file_info(File) of
               {ok, #file_info{type = regular, size = Size}} when Size =< ?MAX_FILE_BYTES -> file:read_file(File);
               {ok, #file_info{type = regular}} -> {error, {too_large, ?MAX_FILE_BYTES}};
               {ok, #file_info{}} -> {error, not_regular};
               {error, _} = Error -> Error
           end,
    case Read of
        {ok, Bin} when byte_size(Bin) > ?MAX_FILE_BYTES -> {error, {file, File, {too_large, ?MAX_FILE_BYTES}}};
        {ok, Bin} -> decode(Bin);
        {error, Why} -> {error, {file, File, Why}}
    end.

%% @doc Writes a term as pretty JSON with a final newline, atomically (see
%% {@link write_atomically/2}), so that a reader never sees half a file.
-spec write_file(file:name_all(), json()) -> ok | {error, {file, file:name_all(), term()}}.
write_file(File, Term) ->
    write_atomically(File, [encode(Term, #{pretty => true}), $\n]).

%% @doc Writes `Data' to `File' through `File.tmp' and a rename: on failure nothing
%% is left but the old `File' (if any); a full disk leaves no partial `File.tmp'
%% behind. The directory must exist.
-spec write_atomically(file:name_all(), iodata()) -> ok | {error, {file, file:name_all(), term()}}.
write_atomically(File, Data) ->
    Tmp = unicode:characters_to_list([File, ".tmp"]),
    case file:write_file(Tmp, Data) of
        ok ->
            case file:rename(Tmp, File) of
                ok -> ok;
                {error, Why} -> _ = file:delete(Tmp), {error, {file, File, Why}}
            end;
        {error, Why} ->
            _ = file:delete(Tmp),
            {error, {file, File, Why}}
    end.

%%--------------------------------------------------------------------
%% Decoding

%% W, the whole input, travels with the depth left: {Whole, Depth}.
offset({Whole, _Depth}, Rest) ->
    byte_size(Whole) - byte_size(Rest).

skip_ws(<<C, Rest/binary>>) when C =:= $\s; C =:= $\t; C =:= $\n; C =:= $\r ->
    skip_ws(Rest);
skip_ws(Bin) ->
    Bin.

value(<<C, _/binary>> = Bin, W) when C =:= ${; C =:= $[ -> nested(Bin, W);
value(<<$", Rest/binary>>, W) -> string(Rest, W, []);
value(<<"true", Rest/binary>>, _W) -> {true, Rest};
value(<<"false", Rest/binary>>, _W) -> {false, Rest};
value(<<"null", Rest/binary>>, _W) -> {null, Rest};
value(<<C, _/binary>> = Bin, W) when C =:= $-; C >= $0, C =< $9 -> number(Bin, W);
value(<<>>, W) -> throw({error, offset(W, <<>>), "unexpected end of input"});
value(Bin, W) -> throw({error, offset(W, Bin), "unexpected character"}).

%% An object or array one level deeper: the depth left counts down to 0.
nested(Bin, {_, 0} = W) ->
    throw({error, offset(W, Bin), lists:flatten(io_lib:format("nested more than ~b deep", [?MAX_DEPTH]))});
nested(<<${, Rest/binary>>, {Whole, Depth}) -> object(skip_ws(Rest), {Whole, Depth - 1}, #{});
nested(<<$[, Rest/binary>>, {Whole, Depth}) -> array(skip_ws(Rest), {Whole, Depth - 1}, []).

object(<<$}, Rest/binary>>, _W, Acc) when map_size(Acc) =:= 0 ->
    {Acc, Rest};
object(<<$", Rest/binary>>, W, Acc) ->
    {Key, R1} = string(Rest, W, []),
    case skip_ws(R1) of
        <<$:, R2/binary>> ->
            {Value, R3} = value(skip_ws(R2), W),
            Acc1 = Acc#{Key => Value},
            case skip_ws(R3) of
                <<$,, R4/binary>> -> object(skip_ws(R4), W, Acc1);
                <<$}, R4/binary>> -> {Acc1, R4};
                Other -> throw({error, offset(W, Other), "expected ',' or '}' in object"})
            end;
        Other ->
            throw({error, offset(W, Other), "expected ':' after object key"})
    end;
object(Bin, W, _Acc) ->
    throw({error, offset(W, Bin), "expected a string key in object"}).

array(<<$], Rest/binary>>, _W, []) ->
    {[], Rest};
array(Bin, W, Acc) ->
    {Value, R1} = value(Bin, W),
    case skip_ws(R1) of
        <<$,, R2/binary>> -> array(skip_ws(R2), W, [Value | Acc]);
        <<$], R2/binary>> -> {lists:reverse([Value | Acc]), R2};
        Other -> throw({error, offset(W, Other), "expected ',' or ']' in array"})
    end.

string(<<$", Rest/binary>>, _W, Acc) ->
    {unicode:characters_to_binary(lists:reverse(Acc)), Rest};
string(<<$\\, E, Rest/binary>> = Bin, W, Acc) ->
    case E of
        $" -> string(Rest, W, [$" | Acc]);
        $\\ -> string(Rest, W, [$\\ | Acc]);
        $/ -> string(Rest, W, [$/ | Acc]);
        $b -> string(Rest, W, [$\b | Acc]);
        $f -> string(Rest, W, [$\f | Acc]);
        $n -> string(Rest, W, [$\n | Acc]);
        $r -> string(Rest, W, [$\r | Acc]);
        $t -> string(Rest, W, [$\t | Acc]);
        $u -> unicode_escape(Rest, W, Acc);
        _ -> throw({error, offset(W, Bin), "invalid escape in string"})
    end;
string(<<C/utf8, Rest/binary>>, W, Acc) when C >= 16#20 ->
    string(Rest, W, [C | Acc]);
string(<<>>, W, _Acc) ->
    throw({error, offset(W, <<>>), "unterminated string"});
string(Bin, W, _Acc) ->
    throw({error, offset(W, Bin), "invalid character in string"}).

unicode_escape(<<H:4/binary, Rest/binary>> = Bin, W, Acc) ->
    case hex(H) of
        High when High >= 16#D800, High =< 16#DBFF ->
            case Rest of
                <<"\\u", L:4/binary, Rest2/binary>> ->
                    case hex(L) of
                        Low when Low >= 16#DC00, Low =< 16#DFFF ->
                            C = 16#10000 + ((High - 16#D800) bsl 10) + (Low - 16#DC00),
                            string(Rest2, W, [C | Acc]);
                        _ -> throw({error, offset(W, Bin), "invalid surrogate pair"})
                    end;
                _ -> throw({error, offset(W, Bin), "lone surrogate"})
            end;
        Low when Low >= 16#DC00, Low =< 16#DFFF ->
            throw({error, offset(W, Bin), "lone surrogate"});
        error ->
            throw({error, offset(W, Bin), "invalid \\u escape"});
        C ->
            string(Rest, W, [C | Acc])
    end;
unicode_escape(Bin, W, _Acc) ->
    throw({error, offset(W, Bin), "invalid \\u escape"}).

hex(H) ->
    try binary_to_integer(H, 16) catch error:badarg -> error end.

number(Bin, W) ->
    {Int, R1} = take_int(Bin),
    {Frac, R2} = take_frac(R1),
    {Exp, R3} = take_exp(R2),
    Text = binary:part(Bin, 0, byte_size(Bin) - byte_size(R3)),
    _ = Int =:= <<>> andalso throw({error, offset(W, Bin), "invalid number"}),
    Value = case {Frac, Exp} of
                {<<>>, <<>>} ->
                    binary_to_integer(Text);
                _ ->
                    Mantissa = [Int, case Frac of <<>> -> ".0"; _ -> Frac end],
                    Float = iolist_to_binary([Mantissa, normalise_exp(Exp)]),
                    try binary_to_float(Float)
                    catch error:badarg -> throw({error, offset(W, Bin), "number out of range"})
                    end
            end,
    {Value, R3}.

take_int(<<$-, Rest/binary>>) ->
    {Digits, R} = take_int_digits(Rest),
    case Digits of <<>> -> {<<>>, Rest}; _ -> {<<$-, Digits/binary>>, R} end;
take_int(Bin) ->
    take_int_digits(Bin).

take_int_digits(<<$0, Rest/binary>>) -> {<<$0>>, Rest};
take_int_digits(Bin) -> digits(Bin, <<>>).

digits(<<C, Rest/binary>>, Acc) when C >= $0, C =< $9 -> digits(Rest, <<Acc/binary, C>>);
digits(Rest, Acc) -> {Acc, Rest}.

take_frac(<<$., Rest/binary>> = Bin) ->
    case digits(Rest, <<>>) of
        {<<>>, _} -> {<<>>, Bin};
        {D, R} -> {<<$., D/binary>>, R}
    end;
take_frac(Bin) ->
    {<<>>, Bin}.

take_exp(<<E, Rest/binary>> = Bin) when E =:= $e; E =:= $E ->
    {Sign, R1} = case Rest of
                     <<S, R/binary>> when S =:= $+; S =:= $- -> {<<S>>, R};
                     _ -> {<<>>, Rest}
                 end,
    case digits(R1, <<>>) of
        {<<>>, _} -> {<<>>, Bin};
        {D, R2} -> {<<$e, Sign/binary, D/binary>>, R2}
    end;
take_exp(Bin) ->
    {<<>>, Bin}.

normalise_exp(<<>>) -> <<>>;
normalise_exp(<<$e, $+, D/binary>>) -> <<$e, D/binary>>;
normalise_exp(Exp) -> Exp.

%%--------------------------------------------------------------------
%% Encoding

enc(true, _) -> <<"true">>;
enc(false, _) -> <<"false">>;
enc(null, _) -> <<"null">>;
enc(A, _) when is_atom(A) -> enc_string(atom_to_binary(A, utf8));
enc(B, _) when is_binary(B) -> enc_string(B);
enc(I, _) when is_integer(I) -> integer_to_binary(I);
enc(F, _) when is_float(F) -> float_to_binary(F, [short]);
enc([], _) -> <<"[]">>;
enc(L, Indent) when is_list(L) ->
    Items = [enc(V, deeper(Indent)) || V <- L],
    wrap($[, $], Items, Indent);
enc(M, _) when is_map(M), map_size(M) =:= 0 -> <<"{}">>;
enc(M, Indent) when is_map(M) ->
    Sep = case Indent of none -> <<":">>; _ -> <<": ">> end,
    Items = [[enc_key(K), Sep, enc(V, deeper(Indent))] || {K, V} <- lists:sort(maps:to_list(M))],
    wrap(${, $}, Items, Indent);
enc(Other, _) ->
    error({not_json, Other}).

enc_key(K) when is_binary(K) -> enc_string(K);
enc_key(K) when is_atom(K) -> enc_string(atom_to_binary(K, utf8));
enc_key(K) when is_integer(K) -> enc_string(integer_to_binary(K));
enc_key(K) -> error({not_json_key, K}).

deeper(none) -> none;
deeper(N) -> N + 2.

wrap(Open, Close, Items, none) ->
    [Open, lists:join($,, Items), Close];
wrap(Open, Close, Items, N) ->
    Pad = lists:duplicate(N + 2, $\s),
    [Open, $\n, Pad, lists:join([$,, $\n, Pad], Items), $\n, lists:duplicate(N, $\s), Close].

enc_string(B) ->
    [$", escape(B, <<>>), $"].

escape(<<>>, Acc) -> Acc;
escape(<<$", R/binary>>, Acc) -> escape(R, <<Acc/binary, "\\\"">>);
escape(<<$\\, R/binary>>, Acc) -> escape(R, <<Acc/binary, "\\\\">>);
escape(<<$\n, R/binary>>, Acc) -> escape(R, <<Acc/binary, "\\n">>);
escape(<<$\r, R/binary>>, Acc) -> escape(R, <<Acc/binary, "\\r">>);
escape(<<$\t, R/binary>>, Acc) -> escape(R, <<Acc/binary, "\\t">>);
escape(<<C, R/binary>>, Acc) when C < 16#20 ->
    Hex = iolist_to_binary(io_lib:format("\\u~4.16.0b", [C])),
    escape(R, <<Acc/binary, Hex/binary>>);
escape(<<C, R/binary>>, Acc) -> escape(R, <<Acc/binary, C>>).
