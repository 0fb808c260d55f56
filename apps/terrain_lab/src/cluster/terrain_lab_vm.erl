%% @private
%% @doc The one way the lab starts a VM: a command line built from a validated option
%% map, a transport that starts it, one wait for its boot under a deadline, and a
%% record of what was started, the way `peer:init/1' is OTP's one path to a peer.
%%
%% Terms: a <em>transport</em> is how the VM is started and owned:
%% <ul>
%% <li>`local_linked': an OTP `peer' on this machine, linked to the caller's process
%%     (the cluster of `terrain_lab:start_cluster/2', the VMs `terrain emas' measures
%%     in); it halts when its control process goes;</li>
%% <li>`local_detached': `erl -detached' on this machine, outliving the caller
%%     (`terrain up');</li>
%% <li>`ssh': `erl -detached' on another host, started over the system ssh client
%%     (`terrain up --hosts', a testbed's hosts);</li>
%% <li>`srun': the VM in the foreground of a SLURM job step of its own (`terrain up
%%     --slurm', a testbed's slurmd).</li>
%% </ul>
%% The detached, ssh and srun VMs start undistributed, write their OS pid and node name
%% to their pid file, read the cluster's cookie from a file and only then start
%% distribution (the cookie is never on a command line; over ssh and srun it arrives on
%% standard input). {@link command_line/1} builds every transport's `erl' arguments:
%% the lab's flags (lean VMs, no busy wait), schedulers, cookie, TLS distribution,
%% terrain's code path, network emulation, the node's own `args' (last, so that they
%% can turn any of the others back) and the boot `-eval's.
%%
%% Usage:
%% ```
%% {ok, Vm} = terrain_lab_vm:start(#{transport => local_detached, name => a,
%%                                   node => 'a@host', dir => StateDir}),
%% [{ok, Booted}] = terrain_lab_vm:await_boot([Vm], Deadline),
%% stopped = terrain_lab_vm:stop(Booted, 5000).
%% '''
%% {@link await_boot/2} returns when every VM answers or at the deadline; a VM that
%% failed or missed the deadline is stopped (killed, when it does not halt) before its
%% error is returned, so nothing it started is left behind.
-module(terrain_lab_vm).

%% API
-export([command_line/1,
         start/1,
         await_boot/2,
         from_record/2,
         alive/2,
         stop/2,
         peer/1,
         read_pid_file/1,
         log_tail/2,
         option_checks/0,
         format_error/1]).

%% exports_not_used: command_line/1 is start/1's first step, tested on its own
%% (terrain_lab_vm_tests).
-ignore_xref([{command_line, 1}]).

-export_type([options/0, transport/0, vm/0, stop_result/0, error_reason/0]).

-type transport() :: local_linked | local_detached | ssh | srun.

-type options() ::
        #{transport := transport(),
          name := atom(),                   % the node's name in its spec (files, errors)
          %% local_linked: the short node name given to peer (absent: not distributed,
          %% control standard_io); the other transports: the full node name
          node => node(),
          schedulers => pos_integer(),      % +S N:N
          lean => boolean(),                % the lab's flags and lean VMs (default true); false:
                                            % only no busy wait (a VM that is measured, terrain emas)
          code => local | {root, file:filename()}, % terrain's code: this VM's (default) or
                                            % ROOT/<app>/ebin on the VM's host
          code_path => [file:filename()],   % extra -pa directories
          cookie => atom(),                 % local_linked: -setcookie when ~/.erlang.cookie differs
          tls_optfile => file:filename(),   % distribution over TLS with this option file
          netem => {terrain_lab_spec:spec(), Prefix :: string()}, % emulated links (terrain_lab_netem)
          args => [string()],               % the node's own VM arguments (last)
          env => [{string(), string()}],    % local_linked: extra OS environment
          control => distribution | standard_io, % local_linked: how peer talks to the VM
          dir => file:filename(),           % local_detached, ssh, srun: the state directory
          log => file:filename(),           % local_linked, local_detached: the VM's log (its
                                            % logger; local_linked: its output and exit status)
          host => string(),                 % ssh, srun: where the VM runs
          ssh => terrain_lab_ssh:context()}. % ssh, srun: ssh options, code, TLS

%% What was started: enough to wait for it, check it and stop it.
-type vm() :: #{transport := transport(),
                name := atom(),
                node := node() | undefined,   % undefined: a peer not booted yet, or not distributed
                peer => pid(),                % local_linked: the peer's control process
                boot_tag => term(),           % local_linked: the tag of its boot message
                os_pid => string(),           % as recorded (else its pid file says)
                pid_file => file:filename(),  % local_detached
                dir => file:filename(),
                host => string(),             % ssh, srun
                ssh => terrain_lab_ssh:context(),
                srun_pid => string(),         % srun: the OS pid of the step's srun (this machine)
                log => file:filename()}.      % srun: srun's output; local: the VM's log

%% What stop/2 did: halted it by name (`stopped'; a VM in a job step: `{stopped,
%% job_step}', srun was running), found it gone, killed its OS process, or could not.
-type stop_result() :: stopped | {stopped, job_step}
                     | not_running | {not_running, no_os_pid | job_step_ended}
                     | {killed, OsPid :: string()}
                     | {still_running, no_os_pid | term()}.

-type error_reason() :: {vm, terrain_options:reason()}
                      | {vm, {missing, transport(), atom()}}
                      | {vm, {spawn, atom(), term()}}.

-define(EXIT_LINE, "terrain: the VM exited with status ").
-define(DETACH_TIMEOUT, 10000).      % ms for `erl -detached' to return
-define(SSH_START_TIMEOUT, 20000).   % ms for ssh to start a VM on its host
-define(POLL_MS, 50).
-define(STOP_TIMEOUT, 5000).
%% Lab nodes are stopped all at once; with global's partition prevention on, every
%% node would report (and act on) the others going down. A node's log events go to
%% its stderr: a peer's stdout reaches the CLI's stdout, which carries results only.
-define(LAB_FLAGS, ["-kernel", "prevent_overlapping_partitions", "false",
                    "-kernel", "logger", "[{handler,default,logger_std_h,#{config=>#{type=>standard_error}}}]"]).
%% Lean VMs, so that 256 fit on a laptop-sized machine: a process table of 65,536
%% (terrain_lab_guard:process_limit(lab_node), the limit the guard checks; default
%% 262,144: 2.9 MB less resident per VM), a port table of 8,192 (default 65,536: 0.7 MB),
%% 2 dirty I/O schedulers (default 10 threads), and erts_alloc off (`+Mea min', every
%% allocation through one glibc arena: 3.5 MB less resident per idle VM and 16 kB instead
%% of 48 kB per connection and side; `erlang:memory/0,1' then raise `notsup', and the
%% attribute vm_memory_total falls back to the resident set) (docs/CLI.md, "Lean VMs").
-define(LEAN, ["+P", integer_to_list(terrain_lab_guard:process_limit(lab_node)), "+Q", "8192", "+SDio", "2",
               "+Mea", "min", "-env", "MALLOC_ARENA_MAX", "1"]).
%% No busy wait of idle schedulers: with more VMs than cores a spinning idle VM takes
%% the core from one with work, and spends a CPU quota spinning.
-define(NO_SPIN, ["+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none"]).

%%--------------------------------------------------------------------
%% API

%% @doc The arguments of `erl' (for `local_linked': of `peer', which adds the node
%% name) that start the VM `Options' describe; `{error, Reason}' for options that
%% validate/1 refuses.
-spec command_line(options()) -> {ok, [string()]} | {error, error_reason()}.
command_line(Options) ->
    case validate(Options) of
        ok -> {ok, args(Options)};
        {error, _} = Error -> Error
    end.

%% @doc Starts the VM `Options' describe. Returns once its transport has started it
%% (a peer's boot, a VM's answer: {@link await_boot/2}).
-spec start(options()) -> {ok, vm()} | {error, error_reason() | term()}.
start(Options) ->
    case command_line(Options) of
        {ok, Args} -> start(maps:get(transport, Options), Args, Options);
        {error, _} = Error -> Error
    end.

%% @doc Waits until every VM of `Vms' answers, fails, or `Deadline' (monotonic ms)
%% passes; returns a result per VM in their order: the VM with its node, or why not.
%% A VM that did not come up is stopped (killed, when it does not halt).
-spec await_boot([vm()], integer()) -> [{ok, vm()} | {error, term()}].
await_boot(Vms, Deadline) ->
    Indexed = maps:from_list(lists:enumerate(Vms)),
    Results = await(Indexed, Deadline, #{}, #{}),
    [maps:get(I, Results) || I <- lists:seq(1, length(Vms))].

%% @doc The VM a node record of a cluster's state names (`cluster.json' or a pid file,
%% terrain_lab_cluster_state; `Dir' its state directory): what `terrain up' started,
%% for `terrain status' and `terrain down'. A record with a `host' is a VM on another
%% host (in a job step when it has an `srun_pid'); any other a detached VM here.
-spec from_record(#{binary() => term()}, file:filename()) -> vm().
from_record(#{<<"name">> := NameBin} = Record, Dir) ->
    Name = binary_to_atom(NameBin),
    Node = case maps:get(<<"node">>, Record, null) of
               B when is_binary(B) -> binary_to_atom(B);
               _ -> undefined
           end,
    Base = maps:merge(#{name => Name, node => Node, dir => Dir},
                      case maps:get(<<"os_pid">>, Record, null) of
                          P when is_binary(P) -> #{os_pid => binary_to_list(P)};
                          _ -> #{}
                      end),
    case Record of
        #{<<"host">> := Host} ->
            Ssh = #{dir => Dir, ssh_options => [binary_to_list(O) || O <- maps:get(<<"ssh_options">>, Record, [])],
                    code => local},
            Remote = Base#{host => binary_to_list(Host), ssh => Ssh},
            case maps:get(<<"srun_pid">>, Record, null) of
                S when is_binary(S) -> Remote#{transport => srun, srun_pid => binary_to_list(S)};
                _ -> Remote#{transport => ssh}
            end;
        #{} ->
            Base#{transport => local_detached, pid_file => terrain_lab_cluster_state:pid_file(Dir, Name)}
    end.

%% @doc Whether the VM still runs: `true', `false', or `{error, Why}' when its host
%% cannot be asked within `Timeout' ms. A detached VM counts only while its OS pid is
%% still the VM that was started (its command line names its pid file).
-spec alive(vm(), pos_integer()) -> boolean() | {error, term()}.
alive(#{transport := local_linked, peer := Peer}, _Timeout) ->
    is_process_alive(Peer);
alive(#{transport := local_detached} = Vm, _Timeout) ->
    owned_pid(Vm) =/= undefined;
alive(#{transport := srun, srun_pid := SrunPid}, _Timeout) ->
    %% a VM in a job step lives as long as its step, whose handle is its srun (on this
    %% machine): once srun has exited, SLURM has ended the step's processes
    terrain_lab_os:alive(SrunPid);
alive(#{transport := ssh, host := Host, ssh := Ssh} = Vm, Timeout) ->
    case os_pid(Vm) of
        undefined -> false;
        OsPid -> terrain_lab_ssh:alive(Host, OsPid, Timeout, Ssh)
    end.

%% @doc Stops the VM: halted by its node name when it answers and waited for (a
%% detached VM: until its OS process exits) up to `Timeout' ms; else its OS process is
%% killed, only while that is still the VM that was started (on another host over
%% ssh; a VM in a job step: its srun gets TERM, then KILL, and SLURM ends the step).
-spec stop(vm(), pos_integer()) -> stop_result().
stop(#{transport := local_linked, peer := Peer}, _Timeout) ->
    try peer:stop(Peer), stopped
    catch exit:_AlreadyGone -> not_running
    end;
stop(#{node := Node} = Vm, Timeout) ->
    %% a VM that this call could not reach (its connection not made in time on a loaded
    %% machine) and that exits meanwhile was running when asked to stop: not `not_running'
    WasRunning = was_running(Vm),
    Halted = Node =/= undefined andalso halt_node(Node),
    Result = case {gone(Vm, Halted, Timeout), Halted orelse WasRunning} of
                 {true, true} -> stopped;
                 {true, false} -> not_running;
                 {false, _} -> kill(Vm)
             end,
    ok = end_step(Vm, Timeout),
    Result.

%% @doc The control process of a `local_linked' VM (for `peer:call/4,5').
-spec peer(vm()) -> pid().
peer(#{transport := local_linked, peer := Peer}) ->
    Peer.

%% The OS pid the VM wrote to its pid file (on its host), when it has.
-spec os_pid(vm()) -> string() | undefined.
os_pid(#{os_pid := OsPid}) ->
    OsPid;
os_pid(#{transport := local_detached, pid_file := File}) ->
    case read_pid_file(File) of
        {ok, OsPid, _Node} -> OsPid;
        error -> undefined
    end;
os_pid(#{transport := Remote, host := Host, name := Name, ssh := Ssh}) when Remote =:= ssh; Remote =:= srun ->
    case terrain_lab_ssh:pid_of(Host, Name, Ssh) of
        {ok, OsPid} -> OsPid;
        error -> undefined
    end;
os_pid(#{}) ->
    undefined.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({vm, {bad_options, Options}}) ->
    io_lib:format("VM options must be a map, got ~0tp", [Options]);
format_error({vm, {bad_option, transport, Transport}}) ->
    io_lib:format("unknown VM transport ~0tp: expected local_linked, local_detached, ssh or srun", [Transport]);
format_error({vm, {bad_option, Key, Value}}) ->
    io_lib:format("VM option ~ts: ~0tp is not ~ts", [Key, Value, expected(Key)]);
format_error({vm, {unknown_option, Key}}) ->
    io_lib:format("unknown VM option ~0tp (known: ~ts; docs/INTERNALS.md, \"Launching\")",
                  [Key, lists:join(", ", [atom_to_list(K) || K <- lists:sort(maps:keys(option_checks()))])]);
format_error({vm, {missing, undefined, Key}}) ->
    io_lib:format("VM options need ~ts", [Key]);
format_error({vm, {missing, Transport, Key}}) ->
    io_lib:format("a VM started by ~ts needs the option ~ts", [Transport, Key]);
format_error({vm, {spawn, Name, {run, _, _} = Why}}) ->
    io_lib:format("cannot start the VM of node ~ts: ~ts", [Name, terrain_lab_os:format_error(Why)]);
format_error({vm, {spawn, Name, Why}}) ->
    io_lib:format("cannot start the VM of node ~ts: ~0tp", [Name, Why]).

%%--------------------------------------------------------------------
%% Internal functions: the options

%% `ok' when `Options' are options of a VM: every key known, every value of its
%% type (terrain_options, the one checker), and the keys its transport needs present.
-spec validate(term()) -> ok | {error, error_reason()}.
validate(Options) ->
    Transport = case Options of #{transport := T} -> T; _ -> undefined end,
    Steps = [fun() -> terrain_options:check(Options, option_checks()) end,
             fun() -> terrain_options:required(Options, [transport]) end,
             fun() -> case [K || K <- [name | required(Transport, Options)], not is_map_key(K, Options)] of
                          [] -> ok;
                          [Missing | _] -> {error, {missing, Transport, Missing}}
                      end
             end],
    case lists:foldl(fun(Step, ok) -> Step(); (_, Error) -> Error end, ok, Steps) of
        ok -> ok;
        {error, {missing_option, transport}} -> {error, {vm, {missing, undefined, transport}}};
        {error, Reason} -> {error, {vm, Reason}}
    end.

%% @doc The check of every VM option (terrain_options). `env' and `code_path' are also
%% the cluster's options (terrain_lab_cluster), which it hands to every node's VM.
-spec option_checks() -> terrain_options:checks().
option_checks() ->
    Strings = fun(V) -> is_list(V) andalso lists:all(fun io_lib:printable_unicode_list/1, V) end,
    #{transport => fun(V) -> lists:member(V, [local_linked, local_detached, ssh, srun]) end,
      name => fun erlang:is_atom/1,
      node => fun erlang:is_atom/1,
      schedulers => fun(V) -> is_integer(V) andalso V > 0 end,
      lean => fun erlang:is_boolean/1,
      code => fun(local) -> true; ({root, Dir}) -> io_lib:printable_unicode_list(Dir); (_) -> false end,
      code_path => Strings,
      cookie => fun erlang:is_atom/1,
      tls_optfile => fun io_lib:printable_unicode_list/1,
      netem => fun({Spec, Prefix}) -> is_map(Spec) andalso io_lib:printable_list(Prefix); (_) -> false end,
      args => Strings,
      env => fun(V) -> is_list(V) andalso lists:all(fun({K, X}) -> io_lib:printable_list(K)
                                                                     andalso io_lib:printable_list(X);
                                                      (_) -> false
                                                   end, V)
             end,
      control => fun(V) -> V =:= distribution orelse V =:= standard_io end,
      dir => fun io_lib:printable_unicode_list/1,
      log => fun(V) -> io_lib:printable_unicode_list(V) andalso V =/= "" end,
      host => fun(V) -> io_lib:printable_list(V) andalso V =/= "" end,
      ssh => fun(#{dir := Dir, ssh_options := O}) -> io_lib:printable_unicode_list(Dir) andalso is_list(O);
                (_) -> false
             end}.

expected(name) -> "an atom (the node's name in its spec)";
expected(node) -> "an atom (a node name)";
expected(schedulers) -> "a positive integer";
expected(lean) -> "true or false";
expected(code) -> "local or {root, Directory}";
expected(code_path) -> "a list of directories";
expected(cookie) -> "an atom";
expected(tls_optfile) -> "a file name";
expected(netem) -> "{Spec, Prefix}: a cluster spec and a node name prefix";
expected(args) -> "a list of strings";
expected(env) -> "a list of {Name, Value} strings";
expected(control) -> "distribution or standard_io";
expected(dir) -> "a directory name";
expected(log) -> "a file name";
expected(host) -> "a host name";
expected(ssh) -> "an ssh context (terrain_lab_ssh:context/3)".

required(local_linked, #{control := standard_io}) -> [];
required(local_linked, _) -> [node];
required(local_detached, _) -> [node, dir];
required(undefined, _) -> [];
required(_Remote, _) -> [node, host, ssh].

%%--------------------------------------------------------------------
%% Internal functions: the command line

%% Every transport's arguments, in one order: how it runs, the lab's flags, schedulers,
%% cookie, TLS, code, network emulation, the node's own args, the boot.
args(#{transport := Transport} = Options) ->
    Mode = case Transport of
               local_linked -> [];
               srun -> ["-noinput"];            % the job step's foreground
               _ -> ["-detached", "-noinput"]
           end,
    Flags = case maps:get(lean, Options, true) of
                true -> lab_flags(Options) ++ ?LEAN ++ ?NO_SPIN;
                false -> ?NO_SPIN
            end,
    Schedulers = case Options of
                     #{schedulers := S} -> ["+S", integer_to_list(S) ++ ":" ++ integer_to_list(S)];
                     #{} -> []
                 end,
    {WritePid, Distribute} = boot_args(Options),
    Mode ++ Flags ++ Schedulers ++ cookie_args(Options) ++ tls_args(Options) ++ code_args(Options)
        ++ netem_args(Options) ++ WritePid ++ maps:get(args, Options, []) ++ Distribute.

%% The lab's flags; a detached VM with a `log' writes its log events to that file (its
%% standard error goes nowhere), every other VM to its standard error (a peer's with a
%% `log': the file, start/3).
lab_flags(#{transport := local_detached, log := Log}) ->
    lists:droplast(?LAB_FLAGS)
        ++ [lists:flatten(io_lib:format("[{handler,default,logger_std_h,#{config=>#{file=>~0tp}}}]", [Log]))];
lab_flags(#{}) ->
    ?LAB_FLAGS.

%% A peer shares this node's cookie: on the command line only when it differs from
%% the one in ~/.erlang.cookie, which the peer reads anyway.
cookie_args(#{transport := local_linked, cookie := Cookie}) ->
    Home = case init:get_argument(home) of {ok, [[H]]} -> H; _ -> "" end,
    case file:read_file(filename:join(Home, ".erlang.cookie")) of
        {ok, <<>>} -> ["-setcookie", atom_to_list(Cookie)];
        {ok, Bin} ->
            case string:trim(Bin) =:= atom_to_binary(Cookie) of
                true -> [];
                false -> ["-setcookie", atom_to_list(Cookie)]
            end;
        {error, _} -> ["-setcookie", atom_to_list(Cookie)]
    end;
cookie_args(#{}) ->
    [].

%% The POSIX shell line that starts an `ssh' or `srun' VM on its host, reading
%% the cookie (and with TLS the node's key material, stdin/1) from its standard
%% input: it makes the VM's directory (umask 077), writes the cookie and TLS files,
%% makes sure epmd runs and `exec's `erl' with `Args' ({@link command_line/1}),
%% standard output and error to `nodes/NAME.log' there. It starts in the home directory.
-spec shell_line(options(), [string()]) -> iolist().
shell_line(#{name := Name, host := Host, ssh := #{dir := Dir} = Ssh}, Args) ->
    RDir = terrain_lab_ssh:remote_dir(Dir, Host),
    ["cd && umask 077 && mkdir -p ", terrain_lab_os:shell_quote(RDir ++ "/nodes"),
     " && IFS= read -r c && printf '%s' \"$c\" > ", terrain_lab_os:shell_quote(RDir ++ "/cookie"),
     tls_command(maps:get(tls, Ssh, false), RDir, Name),
     " && { command -v epmd >/dev/null && epmd -daemon; true; }",
     " && exec erl ", lists:join(" ", [terrain_lab_os:shell_quote(A) || A <- Args]),
     " </dev/null >", terrain_lab_os:shell_quote(RDir ++ "/nodes/" ++ atom_to_list(Name) ++ ".log"), " 2>&1"].

%% What shell_line/2 reads on its standard input: the cookie and, with
%% TLS distribution, the node's key material (never on a command line).
-spec stdin(options()) -> iodata().
stdin(#{name := Name, ssh := #{dir := Dir} = Ssh}) ->
    {ok, Cookie} = file:read_file(filename:join(Dir, "cookie")),
    case maps:get(tls, Ssh, false) of
        true -> [Cookie, "\n", terrain_lab_tls:remote_stdin(Dir, Name)];
        false -> [Cookie, "\n"]
    end.

%% A VM on another host writes its TLS files from its standard input (shell_line/2).
tls_args(#{transport := Remote, name := Name, host := Host, ssh := #{tls := true, dir := Dir}})
  when Remote =:= ssh; Remote =:= srun ->
    terrain_lab_tls:vm_args(remote_tls_file(terrain_lab_ssh:remote_dir(Dir, Host), Name, ".conf"));
tls_args(#{tls_optfile := File}) ->
    terrain_lab_tls:vm_args(File);
tls_args(#{}) ->
    [].

code_args(Options) ->
    Default = case Options of
                  #{ssh := #{code := SshCode}} -> SshCode;
                  #{} -> local
              end,
    terrain_lab_code:vm_args(maps:get(code, Options, Default))
        ++ lists:append([["-pa", D] || D <- maps:get(code_path, Options, [])]).

netem_args(#{netem := {Spec, Prefix}, name := Name}) ->
    terrain_lab_netem:vm_args(Spec, Prefix, Name);
netem_args(#{}) ->
    [].

%% The VM writes its OS pid and node name first (before its own `args' run, so that a
%% VM that never goes distributed can still be found and killed), reads the cookie,
%% and only then goes distributed; any failure halts it with status 3.
boot_args(#{transport := local_linked}) ->
    {[], []};
boot_args(#{transport := local_detached, name := Name, node := Node, dir := Dir}) ->
    [Short, _Host] = string:split(atom_to_list(Node), "@"),
    boot_evals(terrain_lab_cluster_state:pid_file(Dir, Name), filename:join(Dir, "cookie"), Node,
               list_to_atom(Short), shortnames);
boot_args(#{name := Name, node := Node, host := Host, ssh := #{dir := Dir}}) ->
    RDir = terrain_lab_ssh:remote_dir(Dir, Host),
    boot_evals(filename:join([RDir, "nodes", atom_to_list(Name) ++ ".pid"]), filename:join(RDir, "cookie"), Node,
               Node, longnames).

boot_evals(PidFile, CookieFile, Node, DistName, Domain) ->
    {["-eval", lists:flatten(io_lib:format("try ok = file:write_file(~0tp, [os:getpid(), ~0tp]) "
                                           "catch _:_ -> erlang:halt(3) end.",
                                           [PidFile, " " ++ atom_to_list(Node)]))],
     ["-eval", lists:flatten(io_lib:format("try {ok, C} = file:read_file(~0tp), "
                                           "{ok, _} = net_kernel:start(~0tp, #{name_domain => ~0tp}), "
                                           "true = erlang:set_cookie(binary_to_atom(string:trim(C))) "
                                           "catch _:_ -> erlang:halt(3) end.",
                                           [CookieFile, DistName, Domain]))]}.

%% TLS distribution on another host: the node's CA certificate and its certificate and
%% key follow the cookie on standard input, each up to a line "."; the shell writes
%% them (umask 077: mode 0600) to RDIR/tls/NAME.ca.pem and NAME.pem, and the option
%% file, which holds only paths, to NAME.conf. Each node has its own copy of the CA
%% certificate, so that no node's VM reads a file that another session is writing.
%% The paths are relative to the remote home, the VM's working directory.
tls_command(false, _RDir, _Name) ->
    [];
tls_command(true, RDir, Name) ->
    File = fun(Suffix) -> terrain_lab_os:shell_quote(remote_tls_file(RDir, Name, Suffix)) end,
    ReadUpToDot = "{ while IFS= read -r l && [ \"$l\" != . ]; do printf '%s\\n' \"$l\"; done; }",
    [" && mkdir -p ", terrain_lab_os:shell_quote(RDir ++ "/tls"),
     " && ", ReadUpToDot, " > ", File(".ca.pem"),
     " && ", ReadUpToDot, " > ", File(".pem"),
     " && printf '%s' ", terrain_lab_os:shell_quote(
                            lists:flatten(terrain_lab_tls:optfile_text(remote_tls_file(RDir, Name, ".ca.pem"),
                                                                       remote_tls_file(RDir, Name, ".pem")))),
     " > ", File(".conf")].

remote_tls_file(RDir, Name, Suffix) ->
    RDir ++ "/tls/" ++ atom_to_list(Name) ++ Suffix.

%%--------------------------------------------------------------------
%% Internal functions: the transports

start(local_linked, Args, #{name := Name} = Options) ->
    Tag = {?MODULE, boot, make_ref()},
    Control = case maps:get(control, Options, distribution) of
                  standard_io -> #{connection => standard_io};
                  distribution -> #{}
              end,
    Named = maps:with([name], #{name => maps:get(node, Options, undefined)}),
    PeerOptions = maps:merge(#{args => Args, wait_boot => {self(), Tag}, env => maps:get(env, Options, [])},
                             maps:merge(maps:merge(Control, logged(Options)),
                                        maps:filter(fun(_, V) -> V =/= undefined end, Named))),
    Logged = maps:with([log], Options),
    try peer:start_link(PeerOptions) of
        {ok, Pid} -> {ok, Logged#{transport => local_linked, name => Name, node => undefined, peer => Pid,
                                  boot_tag => Tag}};
        {error, Why} -> {error, {vm, {spawn, Name, Why}}}
    catch
        error:Why -> {error, {vm, {spawn, Name, Why}}}
    end;
start(local_detached, Args, #{name := Name, node := Node, dir := Dir} = Options) ->
    Vm = (maps:with([log], Options))#{transport => local_detached, name => Name, node => Node, dir => Dir,
                                      pid_file => terrain_lab_cluster_state:pid_file(Dir, Name)},
    %% erl returns once the detached VM (in a session of its own) is forked; whether
    %% the VM came up shows in its pid file and its ping (await_boot/2)
    case terrain_lab_os:run(terrain_lab_os:otp_program("erl"), Args, #{timeout => ?DETACH_TIMEOUT}) of
        {error, {run, _, {timeout, _, _}}} -> {ok, Vm};
        {error, Why} -> {error, {vm, {spawn, Name, Why}}};
        {ok, _Status, _Output} -> {ok, Vm}
    end;
start(ssh, Args, #{name := Name, node := Node, host := Host, ssh := Ssh} = Options) ->
    case terrain_lab_ssh:run(Host, shell_line(Options, Args), stdin(Options), Ssh#{timeout => ?SSH_START_TIMEOUT}) of
        {ok, _} -> {ok, #{transport => ssh, name => Name, node => Node, host => Host, ssh => Ssh}};
        {error, _} = Error -> Error
    end;
start(srun, Args, #{name := Name, node := Node, host := Host, ssh := #{dir := Dir} = Ssh} = Options) ->
    Deadline = maps:get(deadline, Ssh, erlang:monotonic_time(millisecond) + ?SSH_START_TIMEOUT),
    Line = lists:flatten(io_lib:format("~ts", [shell_line(Options, Args)])),
    case terrain_lab_slurm:start_step(#{name => Name, host => Host}, Line, stdin(Options), Dir, Deadline) of
        {ok, SrunPid, Log} ->
            {ok, #{transport => srun, name => Name, node => Node, host => Host, ssh => Ssh,
                   srun_pid => SrunPid, log => Log}};
        {error, _} = Error ->
            Error
    end.

%% A peer with a `log' (controlled over distribution) runs in the foreground of a
%% shell (which drops the `-detached' that peer passes even with `detached => false'
%% on OTP 25) that sends the VM's standard output and error to the log and, when the
%% VM exits, appends a line with its exit status (log_tail/2 reads it back).
logged(#{log := Log, control := standard_io}) ->
    _ = Log,
    #{};
logged(#{log := Log}) ->
    Script = ["for a; do shift; [ \"$a\" = -detached ] || set -- \"$@\" \"$a\"; done; \"$0\" \"$@\" >>", terrain_lab_os:shell_quote(Log), " 2>&1; s=$?; printf '", ?EXIT_LINE,
              "%s\\n' \"$s\" >>", terrain_lab_os:shell_quote(Log)],
    #{exec => {"/bin/sh", ["-c", lists:flatten(Script), terrain_lab_os:otp_program("erl")]}};
logged(#{}) ->
    #{}.

%% @doc The last `Lines' lines of a VM's log and, when the VM has exited and its log
%% says so (a peer with a `log'), its exit status; `error' when the log cannot be read.
-spec log_tail(file:filename(), pos_integer()) ->
          {ok, [binary()], non_neg_integer() | undefined} | {error, term()}.
log_tail(Log, Lines) ->
    case file:read_file(Log) of
        {ok, Text} ->
            All = binary:split(Text, <<"\n">>, [global, trim_all]),
            Exit = [binary_to_integer(S) || <<?EXIT_LINE, S/binary>> <- All,
                                            S =/= <<>>, lists:all(fun(C) -> C >= $0 andalso C =< $9 end,
                                                                 binary_to_list(S))],
            Own = [L || L <- All, binary:match(L, <<?EXIT_LINE>>) =:= nomatch],
            {ok, lists:nthtail(max(0, length(Own) - Lines), Own), case Exit of [] -> undefined; _ -> lists:last(Exit) end};
        {error, _} = Error ->
            Error
    end.

%% One loop for every transport: a peer reports its boot in a message (or its control
%% process exits); the other VMs are asked by ping (and a VM in a job step fails as
%% soon as its srun has exited). `Received': the peers' boot messages taken so far,
%% by boot tag.
await(Pending, Deadline, Done, Received) when map_size(Pending) =:= 0 ->
    _ = {Deadline, Received},
    Done;
await(Pending, Deadline, Done, Received) ->
    Checked = maps:map(fun(_, Vm) -> booted(Vm, Received) end, Pending),
    Finished = maps:filter(fun(_, R) -> R =/= booting end, Checked),
    Done1 = maps:merge(Done, maps:map(fun(I, R) -> finish(maps:get(I, Pending), R) end, Finished)),
    Left = maps:without(maps:keys(Finished), Pending),
    Remaining = Deadline - erlang:monotonic_time(millisecond),
    case map_size(Left) of
        0 ->
            Done1;
        _ when Remaining =< 0 ->
            maps:merge(Done1, maps:map(fun(_, Vm) -> finish(Vm, {error, timed_out(Vm)}) end, Left));
        _ ->
            Peers = [{Tag, Peer} || #{boot_tag := Tag, peer := Peer} <- maps:values(Left)],
            await(Left, Deadline, Done1, wait_a_little(Peers, min(?POLL_MS, Remaining), Received))
    end.

%% Returns at the first boot message or exit of a pending peer, added to `Received'
%% for booted/2 (the 'EXIT' of a caller that traps exits is taken), or after `Ms'.
wait_a_little([], Ms, Received) ->
    receive after Ms -> Received end;
wait_a_little(Peers, Ms, Received) ->
    Tags = maps:from_list([{T, P} || {T, P} <- Peers]),
    Pids = maps:from_list([{P, T} || {T, P} <- Peers]),
    receive
        {Tag, Result} when is_map_key(Tag, Tags) ->
            Received#{Tag => Result};
        {'EXIT', Pid, Why} when is_map_key(Pid, Pids) ->
            Received#{maps:get(Pid, Pids) => {exited, Why}}
    after Ms ->
        Received
    end.

%% `{ok, Node}', `{error, Why}' or `booting', for a VM not yet finished.
booted(#{transport := local_linked, boot_tag := Tag, peer := Peer}, Received) ->
    Message = case Received of
                  #{Tag := Taken} -> Taken;
                  #{} -> receive {Tag, Taken} -> Taken after 0 -> undefined end
              end,
    case Message of
        {started, Node, _Pid} -> {ok, Node};
        {boot_failed, Why} -> {error, Why};
        {exited, Why} -> {error, {exited_while_booting, Why}};
        undefined ->
            case is_process_alive(Peer) of
                true -> booting;
                false -> {error, {exited_while_booting, noproc}}
            end
    end;
booted(#{transport := srun, node := Node, srun_pid := SrunPid, host := Host, log := Log}, _Received) ->
    case net_adm:ping(Node) of
        pong -> {ok, Node};
        pang ->
            case terrain_lab_os:alive(SrunPid) of
                true -> booting;
                false -> {error, {slurm, {srun, Host, {exited, case file:read_file(Log) of
                                                                   {ok, B} -> binary_to_list(B);
                                                                   {error, _} -> ""
                                                               end}}}}
            end
    end;
booted(#{node := Node}, _Received) ->
    case net_adm:ping(Node) of
        pong -> {ok, Node};
        pang -> booting
    end.

%% The error of a VM that missed the deadline, as its transport has always said it.
timed_out(#{transport := local_linked}) -> boot_timeout;
timed_out(#{transport := srun, host := Host}) -> {slurm, {srun, Host, timeout}};
timed_out(Vm) ->
    case os_pid(Vm) of
        undefined -> vm_did_not_start;       % no pid file: the VM never ran its boot
        _ -> not_reachable                   % it runs, but does not answer
    end.

finish(Vm, {ok, Node}) ->
    {ok, Vm#{node := Node}};
finish(Vm, {error, _} = Error) ->
    _ = stop(Vm, ?STOP_TIMEOUT),
    Error.

%% Whether a detached VM's OS process runs (other transports: not known here, false).
-spec was_running(vm()) -> boolean().
was_running(#{transport := local_detached} = Vm) ->
    owned_pid(Vm) =/= undefined;
was_running(#{}) ->
    false.

halt_node(Node) ->
    %% connect_node/1 is `ignored' when this VM is not distributed: it cannot halt anyone
    case lists:member(Node, nodes(hidden) ++ nodes()) orelse net_kernel:connect_node(Node) of
        true -> erpc:cast(Node, erlang, halt, []), true;
        _ -> false
    end.

await_nodedown(Node, Timeout) ->
    monitor_node(Node, true),
    receive {nodedown, Node} -> true
    after Timeout -> monitor_node(Node, false), false
    end.

%% A halted VM is gone when its node is down (a detached VM here: when its OS
%% process has exited).
gone(#{transport := local_detached, node := Node} = Vm, Halted, Timeout) ->
    case os_pid(Vm) of
        undefined -> Halted andalso await_nodedown(Node, Timeout);
        OsPid -> terrain_lab_os:await_exit([OsPid], Timeout) =:= []
    end;
gone(#{node := Node}, Halted, Timeout) ->
    Halted andalso await_nodedown(Node, Timeout).

%% The VM did not halt by its name (or has none yet): its OS process is killed, only
%% while it is still the VM that was started.
kill(#{transport := local_detached} = Vm) ->
    case {os_pid(Vm), owned_pid(Vm)} of
        {undefined, _} -> {still_running, no_os_pid};
        {_, undefined} -> not_running;
        {_, OsPid} ->
            case terrain_lab_os:kill(OsPid) of
                true -> {killed, OsPid};
                false -> not_running
            end
    end;
kill(#{transport := srun} = Vm) ->
    %% srun is the step's handle: end_step/2 ends it, and SLURM the VM with it
    case {maps:is_key(os_pid, Vm), alive(Vm, ?STOP_TIMEOUT)} of
        {false, _} -> {not_running, no_os_pid};
        {true, true} -> {stopped, job_step};
        {true, false} -> {not_running, job_step_ended}
    end;
kill(#{transport := ssh, host := Host, ssh := Ssh} = Vm) ->
    case os_pid(Vm) of
        undefined -> {not_running, no_os_pid};
        OsPid ->
            case terrain_lab_ssh:kill(Host, OsPid, 10000, Ssh) of
                true -> {killed, OsPid};
                false -> not_running;
                {error, Why} -> {still_running, Why}
            end
    end.

%% A VM's srun (terrain up --slurm) ends with the VM; if it has not within `Timeout'
%% ms (its step hangs), TERM (srun passes it to the step) and then KILL, only while
%% that pid is still an srun of this node.
end_step(#{transport := srun, srun_pid := SrunPid, name := Name}, Timeout) ->
    Ours = fun() -> terrain_lab_os:ours(SrunPid, {cmdline, ["srun", "terrain-" ++ atom_to_list(Name)]}) end,
    _ = terrain_lab_os:await_exit([SrunPid], Timeout) =:= []
        orelse terrain_lab_os:terminate(SrunPid, ?STOP_TIMEOUT, Ours),
    ok;
end_step(#{}, _Timeout) ->
    ok.

%% The OS pid of a detached VM, while that process is still the VM started for this
%% node (its command line names the node's pid file).
owned_pid(#{pid_file := File} = Vm) ->
    case os_pid(Vm) of
        undefined -> undefined;
        OsPid ->
            case terrain_lab_os:ours(OsPid, {cmdline, [File]}) of
                true -> OsPid;
                false -> undefined
            end
    end.

%% @doc The OS pid and full node name (`undefined' when absent) in a VM's pid file.
-spec read_pid_file(file:filename()) -> {ok, string(), string() | undefined} | error.
read_pid_file(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            case string:lexemes(binary_to_list(Bin), " \n") of
                [OsPid | Rest] ->
                    case lists:all(fun(C) -> C >= $0 andalso C =< $9 end, OsPid) of
                        true -> {ok, OsPid, case Rest of [Node] when length(Node) =< 255 -> Node; _ -> undefined end};
                        false -> error
                    end;
                [] ->
                    error
            end;
        {error, _} ->
            error
    end.
