%% @private
%% @doc Evaluates user-supplied attribute functions in isolated processes with a deadline.
%%
%% A dynamic attribute's function may hang or crash (the seed's `attr_server' locked up
%% when one never returned, §3.2.1). Here each evaluation runs in its own monitored
%% process; the value comes back as that process's exit reason, so no message can be
%% left behind. A function that does not finish in time is killed; one that crashes
%% or hangs gives `undefined' and is counted in `terrain:stats()' every time, and
%% logged once per cause: per attribute, function and kind of failure (a timeout, or
%% the class and shape of the crash's reason — `{badmatch, 2}' for any
%% `{badmatch, _}'), see {@link terrain_attr_table:first_report/1}. The caller is never
%% linked to the evaluation.
-module(terrain_attr_eval).

%% API
-export([one/3,
         many/1,
         cause/2]).

%% The evaluating process returns the value as its exit reason, on purpose.
-dialyzer({nowarn_function, start/1}).

-type job() :: {Name :: atom(), {module(), atom(), [term()]}, Timeout :: pos_integer()}.
-export_type([job/0]).

%% @doc Evaluates one function; `undefined' if it crashes or takes longer than Timeout.
-spec one(atom(), {module(), atom(), [term()]}, pos_integer()) -> term().
one(Name, MFA, Timeout) ->
    [{Name, Value}] = many([{Name, MFA, Timeout}]),
    Value.

%% @doc Evaluates several functions in parallel; each has its own timeout, counted from
%% the call. Returns `{Name, Value}' in the order of the jobs.
-spec many([job()]) -> [{atom(), term()}].
many([]) ->
    [];
many(Jobs) ->
    Start = erlang:monotonic_time(millisecond),
    Running = [{Name, MFA, Start + Timeout, start(MFA)} || {Name, MFA, Timeout} <- Jobs],
    [{Name, collect(Name, MFA, Deadline, Pid, MRef)} || {Name, MFA, Deadline, {Pid, MRef}} <- Running].

%%--------------------------------------------------------------------
%% Internal

start({M, F, A}) ->
    spawn_monitor(fun() -> exit({'$terrain_value', apply(M, F, A)}) end).

collect(Name, {M, F, A}, Deadline, Pid, MRef) ->
    Wait = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {'DOWN', MRef, process, Pid, {'$terrain_value', Value}} ->
            Value;
        {'DOWN', MRef, process, Pid, Reason} ->
            terrain_attr_table:count(dynamic_crashes),
            _ = terrain_attr_table:first_report({Name, {M, F, length(A)}, down_cause(Reason)}) andalso
                logger:warning("terrain: attribute ~0tp (~0tp:~0tp/~b) crashed: ~0tP; its value is undefined. "
                               "Further crashes of it with this cause are not logged; terrain:stats() counts them "
                               "(dynamic_crashes)", [Name, M, F, length(A), Reason, 30], #{domain => [terrain, attr]}),
            undefined
    after Wait ->
            exit(Pid, kill),
            demonitor(MRef, [flush]),
            terrain_attr_table:count(dynamic_timeouts),
            _ = terrain_attr_table:first_report({Name, {M, F, length(A)}, timeout}) andalso
                logger:warning("terrain: attribute ~0tp (~0tp:~0tp/~b) did not answer within its timeout; "
                               "its value is undefined. Further timeouts of it are not logged; terrain:stats() "
                               "counts them (dynamic_timeouts)", [Name, M, F, length(A)], #{domain => [terrain, attr]}),
            undefined
    end.

%% @doc The cause of a failure, for logging once per cause: the class and the shape of
%% the reason — the reason itself if it is an atom, its tag and size if it is a tagged
%% tuple, its type otherwise — without the stack and the varying details.
-spec cause(error | exit | throw, term()) -> {error | exit | throw, term()}.
cause(Class, Reason) ->
    {Class, shape(Reason)}.

%% The cause of an evaluating process's death: an error (or uncaught throw) carries its
%% stack, an exit does not.
down_cause({Reason, [{_, _, _, _} | _]}) -> cause(error, Reason);
down_cause(Reason) -> cause(exit, Reason).

shape(Reason) when is_atom(Reason) -> Reason;
shape(Reason) when tuple_size(Reason) > 0, is_atom(element(1, Reason)) -> {element(1, Reason), tuple_size(Reason)};
shape(Reason) when is_tuple(Reason) -> tuple;
shape(Reason) when is_list(Reason) -> list;
shape(Reason) when is_number(Reason) -> number;
shape(Reason) when is_binary(Reason) -> binary;
shape(_Reason) -> other.
