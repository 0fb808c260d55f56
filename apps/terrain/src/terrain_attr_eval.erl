%% @private
%% @doc Evaluates user-supplied attribute functions in isolated processes with a deadline.
%%
%% A dynamic attribute's function may hang or crash (RELEASE D3.5's `attr_server' locked up
%% when one never returned, §3.2.1). Here each evaluation runs in its own monitored
%% process; the value comes back as that process's exit reason, so no message can be
%% left behind. A function that does not finish in time is killed; one that crashes
%% or hangs gives `undefined' and a logged warning, and is counted in
%% `terrain:stats()'. The caller is never linked to the evaluation.
-module(terrain_attr_eval).

%% API
-export([one/3,
         many/1]).

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
            logger:warning("terrain: attribute ~0tp (~0tp:~0tp/~b) crashed: ~0tp; its value is undefined",
                           [Name, M, F, length(A), Reason], #{domain => [terrain, attr]}),
            undefined
    after Wait ->
            exit(Pid, kill),
            demonitor(MRef, [flush]),
            terrain_attr_table:count(dynamic_timeouts),
            logger:warning("terrain: attribute ~0tp (~0tp:~0tp/~b) did not answer within its timeout; "
                           "its value is undefined", [Name, M, F, length(A)], #{domain => [terrain, attr]}),
            undefined
    end.
