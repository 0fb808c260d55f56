%% @private
%% @doc OS processes of the VMs the lab starts: is one alive, wait for some to exit,
%% and kill one as a last resort. Linux /proc based; only BEAM processes are killed,
%% or, with {@link terminate/3}, a process the caller recognises as its own.
-module(terrain_lab_os).

%% API
-export([alive/1,
         await_exit/2,
         kill/1,
         signal/2,
         terminate/3]).

-define(POLL_MS, 20).
-define(KILL_WAIT_MS, 1000).     % how long a SIGKILLed process may take to disappear

%% @doc Is there a process with this OS pid?
-spec alive(string()) -> boolean().
alive(OsPid) ->
    filelib:is_dir("/proc/" ++ OsPid).

%% @doc Waits up to `Timeout' ms for every process to exit. Returns the pids still
%% running at the deadline.
-spec await_exit([string()], non_neg_integer()) -> [string()].
await_exit(OsPids, Timeout) ->
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    await(OsPids, Deadline).

%% @doc Sends SIGKILL to `OsPid' if it is a BEAM VM. Returns whether it did.
-spec kill(string()) -> boolean().
kill(OsPid) ->
    case is_beam(OsPid) of
        true -> _ = os:cmd("kill -9 " ++ OsPid), true;
        false -> false
    end.

%% @doc Sends signal `Name' (`"TERM"', `"KILL"', `"CONT"'...) to `OsPid', a numeric
%% pid only; the caller has made sure the process is its own. Returns whether it did.
-spec signal(string(), string()) -> boolean().
signal(OsPid, Name) ->
    is_pid_text(OsPid) andalso lists:all(fun(C) -> C >= $A andalso C =< $Z end, Name) andalso
        begin _ = os:cmd("kill -" ++ Name ++ " " ++ OsPid), true end.

%% @doc Stops `OsPid' while `Ours()' says it is still the caller's process: SIGTERM,
%% then SIGKILL if it has not exited within `GraceMs'. Returns whether it is gone.
-spec terminate(string(), non_neg_integer(), fun(() -> boolean())) -> boolean().
terminate(OsPid, GraceMs, Ours) ->
    Signal = fun(Name) ->
                     is_pid_text(OsPid) andalso Ours() andalso begin _ = os:cmd("kill -" ++ Name ++ " " ++ OsPid), true end
             end,
    _ = Signal("TERM"),
    _ = await_exit([OsPid], GraceMs) =:= [] orelse Signal("KILL"),
    await_exit([OsPid], ?KILL_WAIT_MS) =:= [].

is_pid_text(OsPid) ->
    OsPid =/= [] andalso lists:all(fun(C) -> C >= $0 andalso C =< $9 end, OsPid).

await(OsPids, Deadline) ->
    case [P || P <- OsPids, alive(P)] of
        [] ->
            [];
        Alive ->
            case erlang:monotonic_time(millisecond) >= Deadline of
                true ->
                    Alive;
                false ->
                    receive after ?POLL_MS -> await(Alive, Deadline) end
            end
    end.

is_beam(OsPid) ->
    is_pid_text(OsPid) andalso
        case file:read_file("/proc/" ++ OsPid ++ "/comm") of
            {ok, <<"beam", _/binary>>} -> true;
            _ -> false
        end.
