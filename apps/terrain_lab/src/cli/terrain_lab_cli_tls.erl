%% @private
%% @doc The `terrain' escript on a cluster that runs distribution over TLS
%% (docs/HOSTS.md, "How the CLI joins a TLS cluster").
%%
%% A VM takes its distribution protocol from its command line (`-proto_dist inet_tls
%% -ssl_dist_optfile FILE'), read when distribution starts; a running escript cannot
%% switch to TLS. So when a command works on a TLS cluster (`terrain up --tls', a spec
%% with `tls => true', or any command whose state directory holds the CLI's TLS option
%% file) and this VM does not run TLS yet, {@link main/2} runs the same escript again
%% as a child with those two arguments added to `ERL_FLAGS', and exits with the
%% child's status:
%% <ul>
%% <li>the child inherits standard input, output and error (`nouse_stdio'), so results,
%%     progress and a closed stdout (141) are its own, unchanged;</li>
%% <li>SIGTERM to the parent is passed on to the child, which handles it as any
%%     command does (143, or `probe' writes what it measured and exits 1);</li>
%% <li>the child runs in a session of its own, where a terminal's Ctrl-C does not
%%     reach it: it watches the parent's OS pid and halts (status 130) within a quarter
%%     of a second after the parent is gone, so Ctrl-C still stops the command at
%%     once;</li>
%% <li>the child puts the user's own `ERL_FLAGS' back before it does anything, so the
%%     VMs it starts (`erl -detached', `peer') never inherit the CLI's TLS arguments.</li>
%% </ul>
-module(terrain_lab_cli_tls).

%% API
-export([optfile/3,
         relaunch/2,
         child_init/0]).

-define(PARENT_ENV, "TERRAIN_CLI_PARENT").
-define(FLAGS_ENV, "TERRAIN_CLI_ERL_FLAGS").   % the user's ERL_FLAGS, restored in the child
-define(WATCH_MS, 250).
-define(EXIT_INT, 130).                        % 128 + SIGINT
-define(EXIT_INTERNAL, 70).

%% @doc The TLS option file this CLI must run with for the command `Command' with its
%% parsed `Options' and `Args', or `none' (no TLS cluster, or this VM runs TLS
%% already).
-spec optfile(string(), #{atom() => term()}, [string()]) -> {ok, file:filename()} | none.
optfile(Command, Options, Args) ->
    case terrain_lab_tls:running_tls() orelse not maps:is_key(state_dir, Options) of
        true ->
            none;
        false ->
            Dir = terrain_lab_cluster_state:state_dir(Options),
            Wanted = case Command of
                         "up" -> maps:get(tls, Options, false) orelse spec_wants_tls(Args);
                         _ -> terrain_lab_tls:recorded(Dir)
                     end,
            case Wanted of
                true -> {ok, terrain_lab_tls:cli_optfile(Dir)};
                false -> none
            end
    end.

%% @doc Runs this escript again with `Args' as a child that runs TLS distribution with
%% `OptFile', and returns its exit status.
-spec relaunch([string()], file:filename()) -> non_neg_integer().
relaunch(Args, OptFile) ->
    UserFlags = os:getenv("ERL_FLAGS", ""),
    Flags = UserFlags ++ " -proto_dist inet_tls -ssl_dist_optfile " ++ quote(OptFile),
    Env = [{"ERL_FLAGS", Flags}, {?FLAGS_ENV, UserFlags}, {?PARENT_ENV, os:getpid()}],
    %% no deadline: the child is the user's command, and lasts as long as it does
    case terrain_lab_os:start(terrain_lab_os:otp_program("escript"), [escript:script_name() | Args],
                              #{env => Env, stdio => inherit}) of
        {ok, Port} ->
            ok = terrain_lab_cli_signals:on_interrupt(self(), {?MODULE, sigterm}),
            await_child(Port);
        {error, Why} ->
            io:format(standard_error, "terrain: cannot run the escript again with TLS distribution: ~ts~n",
                      [terrain_lab_os:format_error(Why)]),
            ?EXIT_INTERNAL
    end.

%% @doc In the child of {@link relaunch/2}: restores the user's `ERL_FLAGS' and watches
%% the parent. Does nothing in a CLI that was not relaunched.
-spec child_init() -> ok.
child_init() ->
    case os:getenv(?PARENT_ENV) of
        false ->
            ok;
        Parent ->
            _ = case os:getenv(?FLAGS_ENV, "") of
                    "" -> os:unsetenv("ERL_FLAGS");
                    UserFlags -> os:putenv("ERL_FLAGS", UserFlags)
                end,
            true = os:unsetenv(?FLAGS_ENV),
            true = os:unsetenv(?PARENT_ENV),
            _ = spawn(fun() -> watch(Parent) end),
            ok
    end.

%%--------------------------------------------------------------------
%% Internal functions

spec_wants_tls([SpecFile]) ->
    case terrain_lab_spec:read(SpecFile) of
        {ok, Spec} -> terrain_lab_spec:tls(Spec);
        {error, _} -> false        % the child would only report the same error: no TLS needed
    end;
spec_wants_tls(_) ->
    false.

await_child(Port) ->
    receive
        {Port, {exit_status, Status}} ->
            Status;
        {?MODULE, sigterm} ->
            {os_pid, OsPid} = erlang:port_info(Port, os_pid),
            _ = terrain_lab_os:signal(integer_to_list(OsPid), "TERM"),
            await_child(Port)
    end.

%% The parent's pid was recorded before it started the child; when the parent is gone
%% (Ctrl-C, SIGKILL) the child halts too.
watch(Parent) ->
    case terrain_lab_os:alive(Parent) of
        true ->
            receive after ?WATCH_MS -> watch(Parent) end;
        false ->
            erlang:halt(?EXIT_INT, [{flush, false}])
    end.

%% erlexec splits ERL_FLAGS at spaces and honours double quotes.
quote(Path) ->
    "\"" ++ Path ++ "\"".
