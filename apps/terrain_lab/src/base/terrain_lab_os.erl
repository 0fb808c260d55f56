%% @private
%% @doc OS processes of the lab: the one way to run a program under a deadline
%% ({@link run/3}), the one way to send a signal ({@link signal/2},
%% {@link terminate/3}, {@link kill/1}), and the VMs the lab
%% starts: is one alive, is it still ours ({@link ours/2}), wait for some to exit.
%% Linux /proc based; only BEAM processes are killed by {@link kill/1}, or, with
%% {@link terminate/3} and {@link terminate_all/3}, a process the caller recognises as
%% its own. And the small facts about the OS every part of the lab needs once: a
%% word quoted for a POSIX shell ({@link shell_quote/1}), an OTP program's path
%% ({@link otp_program/1}), the load average ({@link load_average/0}).
%%
%% A program run by {@link run/3} is the leader of a process group of its own (the
%% VM's `erl_child_setup' starts every port program with `setsid'), so at the
%% deadline the signal goes to the group: a shell's children, ssh's proxy command,
%% srun's helpers stop with it. A process that leaves the group on purpose (`setsid
%% srun ...' of a SLURM job step that must outlive the command) is not reached.
%% ```
%% {ok, 0, <<"hello\n">>} = terrain_lab_os:run("echo", ["hello"], #{timeout => 5000}),
%% {error, {run, "sleep", {timeout, 100, <<>>}}} = terrain_lab_os:run("sleep", ["10"], #{timeout => 100}).
%% '''
-module(terrain_lab_os).

%% API
-export([run/3,
         start/3,
         format_error/1,
         alive/1,
         await_exit/2,
         kill/1,
         signal/2,
         terminate/3,
         terminate_all/3,
         ours/2,
         ours_command/2,
         shell_quote/1,
         otp_program/1,
         load_average/0,
         reaper/1,
         reaper_done/1]).

-export_type([run_options/0, start_options/0, signal_name/0, error_reason/0, mark/0]).

%% How {@link run/3} runs a program. Only `timeout' is required.
-type run_options() ::
        #{timeout := pos_integer(),                % ms from the start until the program is stopped
          cwd => file:filename(),                  % its working directory (default: this VM's)
          env => [{string(), string() | false}],   % variables set (false: removed) over this VM's environment
          stdin => iodata(),                       % written to its standard input at the start (which stays
                                                   % open); more than a pipe holds (64 KiB) must be read by it,
                                                   % or the run ends at the deadline
          stderr => merge | inherit,               % merge (default): into the output; inherit: to this VM's stderr
          max_output => pos_integer(),             % bytes of output at most (default 64 MiB); more stops it
          stop_signal => signal_name(),            % sent to its process group at the deadline (default "TERM")
          grace => non_neg_integer()}.             % ms it has after stop_signal before KILL (default 2000)

%% How {@link start/3} starts a program that runs as long as it needs (no deadline).
-type start_options() ::
        #{env => [{string(), string() | false}],   % as in run_options()
          stdio => port | inherit,                 % port (default): stdin/stdout through the port; inherit:
                                                   % this VM's terminal, and the port carries only the exit status
          packet => 1 | 2 | 4}.                    % with stdio port: messages framed by a length of N bytes
                                                   % ({packet, N}; the native netem proxy); absent: a byte stream

%% A signal by name, as kill(1) takes it: "TERM", "KILL", "INT", "CONT"...
-type signal_name() :: string().

%% What makes a process the caller's own ({@link ours/2}): words its command line
%% holds (a pid file, a state directory), or the name of its program (`comm').
-type mark() :: {cmdline, [unicode:chardata()]} | {comm, string()}.

-type error_reason() :: {run, Program :: string(), not_found
                                                 | {spawn, term()}
                                                 | {timeout, Ms :: pos_integer(), Output :: binary()}
                                                 | {output_limit, Bytes :: pos_integer(), Output :: binary()}}.

-include_lib("kernel/include/file.hrl").

-define(POLL_MS, 20).
-define(KILL_WAIT_MS, 1000).     % how long a SIGKILLed process may take to disappear
-define(CLOSE_WAIT_MS, 5000).    % how long a killed port program's exit status may take to arrive
-define(DEFAULT_GRACE_MS, 2000).
-define(DEFAULT_MAX_OUTPUT, 64 * 1024 * 1024).

%%--------------------------------------------------------------------
%% Running a program

%% @doc Runs `Program' (a path, or a name looked up on the PATH) with `Args' and
%% returns its exit status and its output (stdout, and stderr unless `stderr =>
%% inherit'). A program killed by signal N has status 128 + N, as a shell reports it.
%% At `timeout' ms after the start the program's process group gets `stop_signal',
%% and KILL `grace' ms later (and the group gets KILL even when the program exited
%% in the grace time, so that no child of it is left); the result is then `{error,
%% {run, Program, {timeout, Ms, OutputSoFar}}}'. More output than `max_output' bytes
%% stops it the same way. A program that does not exist is `{error, {run, Program,
%% not_found}}'. While it runs, the CLI's exit path (SIGTERM to the escript) stops
%% its group too (terrain_lab_cleanup). Bad options are a `badarg'.
-spec run(Program, Args, Options) -> {ok, Status, Output} | {error, error_reason()} when
      Program :: file:filename(), Args :: [string()], Options :: run_options(),
      Status :: non_neg_integer(), Output :: binary().
run(Program, Args, Options) ->
    ok = check_run_options(Options, Args),
    case executable(Program) of
        {error, Why} ->
            {error, {run, Program, Why}};
        {ok, Path} ->
            PortOptions = [{args, Args}, exit_status, binary, use_stdio, hide]
                ++ [stderr_to_stdout || maps:get(stderr, Options, merge) =:= merge]
                ++ [{cd, Cwd} || #{cwd := Cwd} <- [Options]]
                ++ [{env, Env} || #{env := Env} <- [Options]],
            try open_port({spawn_executable, Path}, PortOptions) of
                Port -> supervise(Port, Program, Options)
            catch
                error:enoent -> {error, {run, Program, not_found}};
                error:Why -> {error, {run, Program, {spawn, Why}}}
            end
    end.

%% @doc Starts `Program' with `Args' as a child with no deadline (the CLI run again
%% under TLS distribution, which lasts as long as the user's command) and returns its
%% port, which sends `{Port, {exit_status, Status}}' when it ends. The caller stops
%% it, if it must, with {@link signal/2} on the port's `os_pid'.
-spec start(file:filename(), [string()], start_options()) -> {ok, port()} | {error, error_reason()}.
start(Program, Args, Options) ->
    Stdio = case maps:get(stdio, Options, port) of
                port -> [use_stdio, binary] ++ [{packet, N} || #{packet := N} <- [Options]];
                inherit -> [nouse_stdio]
            end,
    case executable(Program) of
        {error, Why} ->
            {error, {run, Program, Why}};
        {ok, Path} ->
            try open_port({spawn_executable, Path},
                          [{args, Args}, exit_status | Stdio] ++ [{env, Env} || #{env := Env} <- [Options]]) of
                Port -> {ok, Port}
            catch
                error:enoent -> {error, {run, Program, not_found}};
                error:Why -> {error, {run, Program, {spawn, Why}}}
            end
    end.

%% @doc A sentence for an error of {@link run/3} or {@link start/3}.
-spec format_error(error_reason()) -> iolist().
format_error({run, Program, not_found}) ->
    io_lib:format("cannot run ~ts: no such program (not a file, or not on the PATH)", [Program]);
format_error({run, Program, {spawn, Why}}) ->
    io_lib:format("cannot run ~ts: ~ts", [Program, spawn_error(Why)]);
format_error({run, Program, {timeout, Ms, Output}}) ->
    io_lib:format("~ts did not finish within ~ts and was stopped~ts", [Program, duration(Ms), last_words(Output)]);
format_error({run, Program, {output_limit, Bytes, _Output}}) ->
    io_lib:format("~ts wrote more than ~b bytes of output and was stopped", [Program, Bytes]).

%%--------------------------------------------------------------------
%% Processes and signals

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
    is_beam(OsPid) andalso send_signal("KILL", OsPid).

%% @doc Sends signal `Name' (`"TERM"', `"KILL"', `"CONT"'...) to `OsPid', a numeric
%% pid only; the caller has made sure the process is its own. Returns whether it did.
-spec signal(string(), signal_name()) -> boolean().
signal(OsPid, Name) ->
    is_pid_text(OsPid) andalso send_signal(Name, OsPid).

%% @doc Stops `OsPid' while `Ours()' says it is still the caller's process: SIGTERM,
%% then SIGKILL if it has not exited within `GraceMs'. Returns whether it is gone.
-spec terminate(string(), non_neg_integer(), fun(() -> boolean())) -> boolean().
terminate(OsPid, GraceMs, Ours) ->
    {_Killed, Left} = terminate_all([OsPid], GraceMs, fun(_) -> Ours() end),
    Left =:= [].

%% @doc Stops every process of `OsPids' that `Ours(OsPid)' says is still the caller's:
%% SIGTERM to each, then SIGKILL to those (still the caller's) that have not exited
%% within `GraceMs'. Returns the pids that needed SIGKILL, and those still running.
-spec terminate_all([string()], non_neg_integer(), fun((string()) -> boolean())) ->
          {Killed :: [string()], Left :: [string()]}.
terminate_all(OsPids, GraceMs, Ours) ->
    Signal = fun(OsPid, Name) -> Ours(OsPid) andalso signal(OsPid, Name) end,
    Termed = [P || P <- OsPids, Signal(P, "TERM")],
    Killed = [P || P <- await_exit(Termed, GraceMs), Signal(P, "KILL")],
    {Killed, await_exit(Killed, ?KILL_WAIT_MS)}.

%% @doc Is `OsPid' (on this machine) still the caller's process, by `Mark': its
%% command line holds every word of `{cmdline, Words}', or its program is `{comm,
%% Name}'. A pid that has exited, or was reused by another program, is not.
-spec ours(string(), mark()) -> boolean().
ours(OsPid, {cmdline, Words}) ->
    case proc_file(OsPid, "cmdline") of
        {ok, Cmdline} -> lists:all(fun(W) -> binary:match(Cmdline, unicode:characters_to_binary(W)) =/= nomatch end,
                                   Words);
        error -> false
    end;
ours(OsPid, {comm, Name}) ->
    case proc_file(OsPid, "comm") of
        {ok, Comm} -> string:trim(binary_to_list(Comm)) =:= Name;
        error -> false
    end.

%% @doc The test of {@link ours/2} with `{cmdline, [Word]}' as a POSIX shell
%% condition, for a process on another host (run there over ssh): true while
%% `/proc/OSPID/cmdline' holds `Word'.
-spec ours_command(string(), string()) -> iolist().
ours_command(OsPid, Word) ->
    ["grep -qF ", shell_quote(Word), " /proc/", shell_quote(OsPid), "/cmdline 2>/dev/null"].

%%--------------------------------------------------------------------
%% Small facts about the OS

%% @doc `Word' as one word of a POSIX shell line, whatever it holds: in single quotes,
%% each single quote of it written `'\''' (close, escaped quote, open).
-spec shell_quote(unicode:chardata()) -> iolist().
shell_quote(Word) ->
    ["'", string:replace(Word, "'", "'\\''", all), "'"].

%% @doc The path of an OTP program (`erl', `escript', `epmd'): the one on the PATH,
%% else the one of this VM's installation (an escript run by a full path may not have
%% OTP's `bin' on its PATH).
-spec otp_program(string()) -> file:filename().
otp_program(Name) ->
    case os:find_executable(Name) of
        false -> filename:join([code:root_dir(), "bin", Name]);
        Path -> Path
    end.

%% @doc The load average of the last minute (`/proc/loadavg''s first number), `null'
%% where it cannot be read: the one reader, and the one type (a number) in every JSON
%% file that records it.
-spec load_average() -> float() | null.
load_average() ->
    case file:read_file("/proc/loadavg") of
        {ok, Text} ->
            try binary_to_float(hd(string:lexemes(Text, " ")))
            catch error:badarg -> null
            end;
        {error, _} ->
            null
    end.

%% @doc A reaper for processes this VM leaves behind when it dies in a way no Erlang
%% code sees (SIGINT on OTP 25, whose break handler halts; SIGKILL): a `/bin/sh' script
%% behind a port that waits for a line on its stdin. {@link reaper_done/1} sends the
%% line and the script exits; when this VM is gone first, stdin ends without one and
%% the script sends TERM, then KILL after 2 s, to every process whose command line holds
%% `Word' (a state directory's path: the VMs started for it name it).
-spec reaper(unicode:chardata()) -> {ok, port()} | {error, error_reason()}.
reaper(Word) ->
    Script = "if read -r _; then exit 0; fi\n"
             "pids() { for f in /proc/[0-9]*/cmdline; do\n"
             "  if tr '\\0' ' ' < \"$f\" 2>/dev/null | grep -qF -- \"$TERRAIN_REAP\"; then\n"
             "    p=${f#/proc/}; echo \"${p%/cmdline}\"; fi; done; }\n"
             "for p in $(pids); do kill -TERM \"$p\" 2>/dev/null; done\n"
             "sleep 2\n"
             "for p in $(pids); do kill -KILL \"$p\" 2>/dev/null; done\n",
    start("/bin/sh", ["-c", Script], #{env => [{"TERRAIN_REAP", unicode:characters_to_list(Word)}]}).

%% @doc The reaper's work is done (the caller stopped what it started): it exits and
%% stops nothing.
-spec reaper_done(port()) -> ok.
reaper_done(Port) ->
    _ = (catch port_command(Port, <<"done\n">>)),
    _ = (catch port_close(Port)),
    ok.

%%--------------------------------------------------------------------
%% Internal functions: running a program

check_run_options(#{timeout := Timeout} = Options, Args) when is_integer(Timeout), Timeout > 0, is_list(Args) ->
    Known = [timeout, cwd, env, stdin, stderr, max_output, stop_signal, grace],
    Valid = fun(cwd, V) -> is_list(V) orelse is_binary(V);
               (env,
                V) -> is_list(V) andalso lists:all(fun({K, X}) -> is_list(K) andalso (is_list(X) orelse X =:= false);
                                                         (_) -> false end, V);
               (stdin, V) -> is_list(V) orelse is_binary(V);
               (stderr, V) -> V =:= merge orelse V =:= inherit;
               (max_output, V) -> is_integer(V) andalso V > 0;
               (stop_signal, V) -> is_signal_name(V);
               (grace, V) -> is_integer(V) andalso V >= 0;
               (timeout, _) -> true;
               (_, _) -> false
            end,
    case [{K, V} || {K, V} <- maps:to_list(Options), not (lists:member(K, Known) andalso Valid(K, V))] of
        [] -> ok;
        Bad -> error({badarg, Bad})
    end;
check_run_options(Options, Args) ->
    error({badarg, {Options, Args}}).

%% The program's path; a file that cannot be run is reported here, since the port
%% would only show the exit status of the failed exec.
executable(Program) ->
    case lists:member($/, Program) of
        false ->
            case os:find_executable(Program) of
                false -> {error, not_found};
                Path -> {ok, Path}
            end;
        true ->
            case file:read_file_info(Program) of
                {ok, #file_info{type = regular, mode = Mode}} when Mode band 8#111 =/= 0 -> {ok, Program};
                {ok, _} -> {error, {spawn, eacces}};
                {error, _} -> {error, not_found}
            end
    end.

%% Collects the output until the exit status, the deadline or the output limit.
supervise(Port, Program, #{timeout := Timeout} = Options) ->
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    Pid = integer_to_list(OsPid),
    Grace = maps:get(grace, Options, ?DEFAULT_GRACE_MS),
    Stop = maps:get(stop_signal, Options, "TERM"),
    %% the CLI's exit path (SIGTERM to the escript) stops it too: no child left running
    ok = terrain_lab_cleanup:add({port, Pid}, fun() -> stop_group(Pid, Stop, Grace) end),
    try
        ok = send_stdin(Port, Options),
        Limit = maps:get(max_output, Options, ?DEFAULT_MAX_OUTPUT),
        case collect(Port, erlang:monotonic_time(millisecond) + Timeout, Limit, 0, []) of
            {exit, Status, Output} ->
                {ok, Status, Output};
            {Why, Output} ->
                ok = stop_port(Port, Pid, Stop, Grace),
                {error, {run, Program, case Why of
                                           timeout -> {timeout, Timeout, Output};
                                           output_limit -> {output_limit, Limit, Output}
                                       end}}
        end
    after
        terrain_lab_cleanup:remove({port, Pid}),
        receive {'EXIT', Port, _} -> ok after 0 -> ok end
    end.

%% A program that has exited already (its port closed) reads nothing: its exit
%% status is in the mailbox.
send_stdin(Port, #{stdin := Stdin}) ->
    try port_command(Port, Stdin) of
        true -> ok
    catch
        error:badarg -> ok
    end;
send_stdin(_Port, _Options) ->
    ok.

collect(Port, Deadline, Limit, Size, Acc) ->
    receive
        {Port, {data, Data}} when Size + byte_size(Data) > Limit ->
            {output_limit, output([binary:part(Data, 0, Limit - Size) | Acc])};
        {Port, {data, Data}} ->
            collect(Port, Deadline, Limit, Size + byte_size(Data), [Data | Acc]);
        {Port, {exit_status, Status}} ->
            {exit, Status, output(Acc)}
    after max(0, Deadline - erlang:monotonic_time(millisecond)) ->
        {timeout, output(Acc)}
    end.

output(Acc) ->
    iolist_to_binary(lists:reverse(Acc)).

%% The stop signal to the group; KILL to the group once the program has exited or
%% the grace time is over (a child that ignored the stop signal goes too); then the
%% exit status, or the port is closed.
stop_port(Port, Pid, Stop, Grace) ->
    _ = signal_group(Pid, Stop),
    Exited = await_status(Port, Grace),
    _ = signal_group(Pid, "KILL"),
    case Exited orelse await_status(Port, ?CLOSE_WAIT_MS) of
        true -> ok;
        false -> _ = catch port_close(Port), ok
    end.

%% The exit status arrived (the output in between is dropped), or not in time.
await_status(Port, Timeout) ->
    receive
        {Port, {exit_status, _}} -> true;
        {Port, {data, _}} -> await_status(Port, Timeout)
    after Timeout -> false
    end.

%% The cleanup of the CLI's exit path: the same signals, with no port to read.
stop_group(Pid, Stop, Grace) ->
    _ = signal_group(Pid, Stop),
    _ = await_exit([Pid], Grace),
    signal_group(Pid, "KILL").

spawn_error(Why) when is_atom(Why) ->
    case file:format_error(Why) of
        "unknown POSIX error" ++ _ -> atom_to_list(Why);
        Text -> Text
    end;
spawn_error(Why) ->
    io_lib:format("~0tp", [Why]).

duration(Ms) when Ms rem 1000 =:= 0 -> io_lib:format("~b s", [Ms div 1000]);
duration(Ms) -> io_lib:format("~b ms", [Ms]).

%% The end of the output of a program that was stopped: what it was doing.
last_words(Output) ->
    case string:trim(Output) of
        <<>> -> "";
        Trimmed when byte_size(Trimmed) =< 400 -> [": ", Trimmed];
        Trimmed -> [": ...", binary:part(Trimmed, byte_size(Trimmed) - 400, 400)]
    end.

%%--------------------------------------------------------------------
%% Internal functions: signals

%% Signal `Name' to every process of the process group `OsPid' leads (a port
%% program of this VM: see the module documentation).
signal_group(OsPid, Name) ->
    is_pid_text(OsPid) andalso send_signal(Name, "-" ++ OsPid).

%% kill(1) is the one program run without run/3: it cannot hang, and run/3 stops a
%% program through it. `Target' is a numeric pid, or `-PID' for a process group.
send_signal(Name, Target) ->
    is_signal_name(Name) orelse error({badarg, Name}),
    _ = os:cmd("kill -s " ++ Name ++ " -- " ++ Target),
    true.

is_signal_name(Name) ->
    is_list(Name) andalso Name =/= [] andalso lists:all(fun(C) -> C >= $A andalso C =< $Z end, Name).

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
    case proc_file(OsPid, "comm") of
        {ok, <<"beam", _/binary>>} -> true;
        _ -> false
    end.

%% A file of /proc/OSPID, `error' when OsPid is not a pid or has exited.
proc_file(OsPid, Name) ->
    case is_pid_text(OsPid) andalso file:read_file("/proc/" ++ OsPid ++ "/" ++ Name) of
        {ok, Bin} -> {ok, Bin};
        _ -> error
    end.
