%% @private
%% @doc OS processes of the VMs the lab starts: is one alive, wait for some to exit,
%% and kill one as a last resort. Linux /proc based; only BEAM processes are killed.
-module(terrain_lab_os).

%% API
-export([alive/1,
         await_exit/2,
         kill/1]).

-define(POLL_MS, 20).

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
    lists:all(fun(C) -> C >= $0 andalso C =< $9 end, OsPid) andalso OsPid =/= [] andalso
        case file:read_file("/proc/" ++ OsPid ++ "/comm") of
            {ok, <<"beam", _/binary>>} -> true;
            _ -> false
        end.
