%% @private
%% @doc Chains of steps that may fail, read top to bottom instead of as nested `case's.
%%
%% A step returns `{ok, Value}', `ok' (nothing new to pass on) or `{error, Reason}';
%% the chain stops at the first error and returns it, else it returns what its last
%% step returned.
%%
%% {@link run/2} threads one value through the steps, each receiving what the one
%% before returned (or, after a step that returned `ok', what that step received):
%% ```
%% terrain_lab_steps:run([fun read/1, fun validate/1, fun(Spec) -> start(Spec, Options) end], File)
%% '''
%% {@link with/2} runs steps that do not depend on each other, in order, and hands
%% their values to a last function:
%% ```
%% terrain_lab_steps:with([fun() -> parse(Args) end,
%%                         fun() -> terrain_lab_cluster_state:connect(Options) end],
%%                        fun([Parsed, Nodes]) -> act(Parsed, Nodes) end)
%% '''
-module(terrain_lab_steps).

%% API
-export([run/2,
         with/2]).

-export_type([step/0]).

-type step() :: fun((Value :: term()) -> ok | {ok, term()} | {error, term()}).

%% @doc Runs `Steps' in order, each on the value the step before returned (`Initial'
%% for the first; a step that returns `ok' passes its own input on). Returns what the
%% last step returned, or the first error (`{ok, Initial}' when there are no steps).
-spec run([step()], Initial :: term()) -> ok | {ok, term()} | {error, term()}.
run([], Value) ->
    {ok, Value};
run([Last], Value) ->
    Last(Value);
run([Step | Rest], Value) ->
    case Step(Value) of
        {ok, Next} -> run(Rest, Next);
        ok -> run(Rest, Value);
        {error, _} = Error -> Error
    end.

%% @doc Runs the independent `Steps' in order and calls `Then' with the list of their
%% values; returns the first error instead if a step fails (later steps do not run).
-spec with([fun(() -> {ok, term()} | {error, term()})], fun(([term()]) -> Result)) -> Result | {error, term()}.
with(Steps, Then) ->
    case collect(Steps, []) of
        {ok, Values} -> Then(Values);
        {error, _} = Error -> Error
    end.

collect([], Values) ->
    {ok, lists:reverse(Values)};
collect([Step | Rest], Values) ->
    case Step() of
        {ok, Value} -> collect(Rest, [Value | Values]);
        {error, _} = Error -> Error
    end.
