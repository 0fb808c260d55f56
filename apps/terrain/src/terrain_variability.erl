%% @private
%% @doc Online checks of operation durations against a fitted generalized extreme
%% value (GEV) model: is this duration unlikely?
%%
%% Parallel task durations (the time until the slowest of many parts is done) follow
%% extreme-value statistics (Henwood et al.). Fit a GEV to durations measured
%% on a quiet system with `terrain-analysis gev durations.csv --out DIR', load the
%% resulting `fit.json' here, and check each new duration as it happens:
%% ```
%% %% users call it through the facade (terrain:load_duration_model/2, check_duration/1,2):
%% ok = terrain:load_duration_model("runs/.../fit.json", #{tail => 0.001}),
%% case terrain:check_duration(Seconds) of
%%     {ok, _P} -> ok;
%%     {unlikely, P} -> logger:warning("write took ~.3f s (p = ~.2g)", [Seconds, P])
%% end.
%% '''
%% Convention (as Henwood et al., R's ismev and evd): location μ, scale σ > 0, shape ξ with
%% ξ > 0 heavy-tailed (Fréchet type), ξ &lt; 0 bounded above (Weibull type), ξ = 0 the
%% Gumbel limit. With z = (x − μ)/σ, F(x) = exp(−(1 + ξz)^(−1/ξ)), and
%% exp(−exp(−z)) at ξ = 0 (used for |ξ| below 1e-7, where the two agree to the
%% precision of a double).
%%
%% `P' is the tail probability of a duration at least as extreme: 1 − F(x) for the
%% upper tail (the default), F(x) for the lower tail, and twice the smaller of the two
%% for `both'. A duration is unlikely when P is below `tail' (default 0.001).
%%
%% Models are kept in `persistent_term' (one key per model name), so `check/1,2' is a
%% lookup and a handful of floating-point operations in the caller; loading a model
%% is rare and costs a global GC of persistent terms, as documented by OTP.
-module(terrain_variability).

%% API
-export([load/1,
         load/2,
         check/1,
         check/2,
         tail_probability/2,
         model/1,
         unload/1,
         format_error/1]).

%% exports_not_used: load/1 and tail_probability/2 are checked on their own by the unit tests and
%% prop_variability (users load through terrain:load_duration_model/1,2).
-ignore_xref([{load, 1}, {tail_probability, 2}]).

-export_type([model/0, load_options/0, params/0]).

-type params() :: #{location := number(),   % μ
                    scale := number(),      % σ > 0
                    shape := number()}.     % ξ, Henwood et al.'s sign convention

-type load_options() :: terrain:duration_model_options().

-type model() :: terrain:duration_model().

-type error_reason() :: {variability, term()}.

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(FORMAT, ?TERRAIN_FORMAT_GEV).
-define(GUMBEL_EPS, 1.0e-7).
-define(KEY(Name), {?MODULE, Name}).

%%--------------------------------------------------------------------
%% API

%% @doc Loads the default model from a `fit.json' file, a decoded fit map, or
%% `#{location, scale, shape}'.
-spec load(file:filename() | binary() | params() | map()) -> ok | {error, error_reason()}.
load(Fit) ->
    load(Fit, #{}).

%% @doc Loads a model with options (see `load_options()').
-spec load(file:filename() | binary() | params() | map(), load_options()) -> ok | {error, error_reason()}.
load(Fit, Options) ->
    case {params(Fit), options(Options)} of
        {{ok, Params}, {ok, Name, Tail, Side}} ->
            persistent_term:put(?KEY(Name), Params#{tail => Tail, side => Side}),
            ok;
        {{error, _} = Error, _} ->
            Error;
        {_, {error, _} = Error} ->
            Error
    end.

%% @doc Checks a duration against the default model.
-spec check(Duration :: number()) -> {ok, float()} | {unlikely, float()}.
check(Duration) ->
    check(default, Duration).

%% @doc Checks a duration against a named model. Raises `{no_model, Name}' if none is
%% loaded under that name.
-spec check(Name :: atom(), Duration :: number()) -> {ok, float()} | {unlikely, float()}.
check(Name, Duration) when is_number(Duration) ->
    case persistent_term:get(?KEY(Name), undefined) of
        undefined ->
            error({no_model, Name});
        #{tail := Tail, side := Side} = Model ->
            P = side_probability(Side, t(Model, Duration)),
            case P < Tail of
                true -> {unlikely, P};
                false -> {ok, P}
            end
    end.

%% @doc The tail probability of `Duration' under GEV parameters, upper tail
%% (1 − F(x)): the pure function behind {@link check/2}.
-spec tail_probability(params(), number()) -> float().
tail_probability(Params, Duration) ->
    side_probability(upper, t(Params, Duration)).

%% @doc A named model.
-spec model(atom()) -> model() | undefined.
model(Name) ->
    persistent_term:get(?KEY(Name), undefined).

%% @doc Forgets a model.
-spec unload(atom()) -> ok.
unload(Name) ->
    _ = persistent_term:erase(?KEY(Name)),
    ok.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({variability, {file, File, Why}}) ->
    io_lib:format("cannot read GEV fit ~ts: ~ts", [File, file:format_error(Why)]);
format_error({variability, {json, File, Offset, Why}}) ->
    io_lib:format("GEV fit ~ts is not valid JSON (byte ~b: ~s)", [File, Offset, Why]);
format_error({variability, {not_converged, File}}) ->
    io_lib:format("GEV fit ~ts did not converge (the likelihood has no maximum for that sample); "
                  "it cannot be used to judge durations", [File]);
format_error({variability, {format, Format}}) ->
    io_lib:format("GEV fit has format ~0tp, expected ~s", [Format, ?FORMAT]);
format_error({variability, {missing, Key}}) ->
    io_lib:format("GEV fit lacks '~s'", [Key]);
format_error({variability, {bad_value, Key, Value}}) ->
    io_lib:format("GEV parameter '~s' must be ~s, got ~0tp", [Key, expected(Key), Value]);
format_error({variability, {bad_option, Key, Value}}) ->
    io_lib:format("option ~0tp: bad value ~0tp (~s)", [Key, Value, expected(Key)]);
format_error({variability, {Tag, _} = Reason}) when Tag =:= unknown_option; Tag =:= bad_options ->
    terrain_options:format_error(Reason);
format_error({variability, {bad_fit, Fit}}) ->
    io_lib:format("expected a fit.json path or a map of location, scale and shape, got ~0tP", [Fit, 6]).

%%--------------------------------------------------------------------
%% Internal functions

params(File) when is_list(File); is_binary(File) ->
    case terrain_json:read_file(File) of
        {ok, #{<<"format">> := ?FORMAT, <<"converged">> := false}} -> {error, {variability, {not_converged, File}}};
        {ok, #{<<"format">> := ?FORMAT} = Fit} -> params(Fit);
        {ok, #{<<"format">> := Other}} -> {error, {variability, {format, Other}}};
        {ok, _} -> {error, {variability, {format, missing}}};
        {error, {file, _, Why}} -> {error, {variability, {file, File, Why}}};
        {error, {json, Offset, Why}} -> {error, {variability, {json, File, Offset, Why}}}
    end;
params(Fit) when is_map(Fit) ->
    try
        Location = number(Fit, location),
        Scale = number(Fit, scale),
        Shape = number(Fit, shape),
        _ = Scale > 0 orelse throw({bad_value, scale, Scale}),
        {ok, #{location => Location, scale => Scale, shape => Shape}}
    catch
        throw:Why -> {error, {variability, Why}}
    end;
params(Fit) ->
    {error, {variability, {bad_fit, Fit}}}.

number(Fit, Key) ->
    Value = case Fit of
                #{Key := V} -> V;
                #{} -> maps:get(atom_to_binary(Key), Fit, missing)
            end,
    if
        Value =:= missing -> throw({missing, Key});
        is_number(Value) -> float(Value);
        true -> throw({bad_value, Key, Value})
    end.

options(Options) ->
    Checks = #{name => fun erlang:is_atom/1,
               tail => fun(V) -> is_float(V) andalso V > 0.0 andalso V < 0.5 end,
               side => fun(V) -> V =:= upper orelse V =:= lower orelse V =:= both end},
    case terrain_options:check(Options, Checks) of
        ok -> {ok, maps:get(name, Options, default), maps:get(tail, Options, 0.001), maps:get(side, Options, upper)};
        {error, Reason} -> {error, {variability, Reason}}
    end.

expected(scale) -> "a number above 0";
expected(tail) -> "a float between 0 and 0.5";
expected(side) -> "upper, lower or both";
expected(name) -> "an atom";
expected(_) -> "a number".

%% t(x) with F(x) = exp(−t(x)): (1 + ξz)^(−1/ξ), or exp(−z) in the Gumbel limit;
%% `infinity' below the support (F = 0) and 0 above it (F = 1).
t(#{location := Mu, scale := Sigma, shape := Xi}, X) ->
    Z = (X - Mu) / Sigma,
    case abs(Xi) < ?GUMBEL_EPS of
        true ->
            safe_exp(-Z);
        false ->
            Base = 1.0 + Xi * Z,
            if
                Base =< 0.0, Xi > 0 -> infinity;
                Base =< 0.0 -> 0.0;
                true -> safe_exp(-math:log(Base) / Xi)
            end
    end.

%% exp/1 that saturates instead of raising for huge arguments.
safe_exp(Y) when Y > 700.0 -> infinity;
safe_exp(Y) -> math:exp(Y).

%% P from t: upper tail 1 − exp(−t), lower tail exp(−t).
side_probability(upper, T) -> upper(T);
side_probability(lower, T) -> lower(T);
side_probability(both, T) -> min(1.0, 2 * min(lower(T), upper(T))).

lower(infinity) -> 0.0;
lower(T) -> math:exp(-T).

%% 1 − exp(−t) without cancellation for small t (OTP 25 has no expm1).
upper(infinity) -> 1.0;
upper(T) when T < 1.0e-5 -> T - T * T / 2 + T * T * T / 6;
upper(T) -> 1.0 - math:exp(-T).
