%% @private
%% @doc OS processes of the VMs the lab starts: is one alive, wait for some to exit,
%% and kill one as a last resort. Linux /proc based; only BEAM processes are killed,
%% or, with {@link terminate/3}, a process the caller recognises as its own; and the
%% cleanup sentinel ({@link sentinel/0}), a shell script that removes directories
%% (CPU cgroups) once this VM is gone, however it went.
-module(terrain_lab_os).

%% API
-export([alive/1,
         await_exit/2,
         kill/1,
         signal/2,
         terminate/3,
         sentinel/0,
         sentinel_track/2,
         sentinel_forget/2]).

-define(POLL_MS, 20).
-define(KILL_WAIT_MS, 1000).     % how long a SIGKILLed process may take to disappear
-define(SENTINEL_DEADLINE_S, 30). % how long the sentinel waits for a directory's processes to exit

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

%% @doc Opens a port to a cleanup sentinel: a `/bin/sh' script that reads directory
%% names from its stdin (line `+DIR': remove DIR when I am gone; `-DIR': forget it)
%% and does nothing else until its stdin ends. Then (the port was closed, or this VM
%% died by any means: SIGINT, SIGKILL, a crash) it removes every directory still on
%% its list, deepest first, each once the `tasks' (cgroup v1) or `cgroup.procs'
%% (cgroup v2) file in it is empty or after a deadline of
%% 30 s (SENTINEL_DEADLINE_S); with `rmdir', so a directory that still holds
%% anything stays. It ignores SIGINT and SIGHUP (Ctrl-C in a terminal reaches the
%% whole process group) and writes nothing.
-spec sentinel() -> port().
sentinel() ->
    open_port({spawn_executable, "/bin/sh"},
              [{args, ["-c", sentinel_script()]}, {env, [{"LC_ALL", "C"}]}, binary, use_stdio, hide]).

%% @doc Asks the sentinel to remove `Dir' (an absolute path, no newline) when it ends.
-spec sentinel_track(port(), file:filename()) -> ok.
sentinel_track(Port, Dir) ->
    sentinel_send(Port, $+, Dir).

%% @doc Tells the sentinel that `Dir' is no longer its business (it was removed).
-spec sentinel_forget(port(), file:filename()) -> ok.
sentinel_forget(Port, Dir) ->
    sentinel_send(Port, $-, Dir).

sentinel_send(Port, Op, [$/ | _] = Dir) ->
    case lists:member($\n, Dir) of
        true -> error({badarg, Dir});
        false -> true = port_command(Port, [Op, unicode:characters_to_binary(Dir), $\n]), ok
    end.

sentinel_script() ->
    "trap '' INT HUP\n"
    "dirs=\n"
    "while IFS= read -r line; do\n"
    "  case $line in\n"
    "    +/*) dirs=\"$dirs\n${line#+}\" ;;\n"
    "    -/*) dirs=$(printf '%s\\n' \"$dirs\" | grep -vxF -e \"${line#-}\") ;;\n"
    "  esac\n"
    "done\n"
    "exec >/dev/null 2>&1\n"
    "end=$(( $(date +%s) + " ++ integer_to_list(?SENTINEL_DEADLINE_S) ++ " ))\n"
    "printf '%s\\n' \"$dirs\" | sort -ru | while IFS= read -r d; do\n"
    "  [ -n \"$d\" ] && [ -d \"$d\" ] || continue\n"
    "  f=\"$d/tasks\"; [ -e \"$f\" ] || f=\"$d/cgroup.procs\"\n"
    "  while [ -n \"$(cat \"$f\" 2>/dev/null)\" ] && [ \"$(date +%s)\" -lt \"$end\" ]; do sleep 0.2; done\n"
    "  rmdir \"$d\"\n"
    "done\n".

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
