%% @private
%% @doc The CPU cgroups this VM made are removed even when it dies in a way no Erlang
%% code sees: SIGINT (Ctrl-C; an escript on OTP 25 cannot handle it, the break handler
%% halts), SIGKILL, a crash. Before a group directory is made it is given to a cleanup
%% sentinel, a shell script behind a port (script/0, started by terrain_lab_os:start/3):
%% when this VM is gone its stdin ends, and it removes the directories still on its
%% list once their processes have exited (the lab's VMs halt when their controlling
%% VM's connection drops). A directory removed here ({@link forget_gone/0}) leaves the
%% list; when the list is empty the port is closed and the script exits.
%%
%% One registered process, not linked (the cluster launcher that makes groups may
%% stop; the list must stay), started by the first {@link track/1}.
-module(terrain_lab_cgroup_sentinel).
-behaviour(gen_server).

%% API
-export([track/1,
         forget_gone/0]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-ignore_xref([{init, 1}, {handle_call, 3}, {handle_cast, 2}, {handle_info, 2}, {terminate, 2}]).

-record(state, {port :: port() | undefined,
                dirs :: #{file:filename() => true}}).

-define(CALL_TIMEOUT, 10000).
-define(DEADLINE_S, 30).         % how long the script waits for a directory's processes to exit

%%--------------------------------------------------------------------
%% API

%% @doc The sentinel removes `Dirs' (absolute paths) when this VM is gone, unless they
%% are removed before.
-spec track([file:filename()]) -> ok.
track(Dirs) ->
    case gen_server:start({local, ?MODULE}, ?MODULE, [], []) of
        {ok, _} -> ok;
        {error, {already_started, _}} -> ok
    end,
    gen_server:call(?MODULE, {track, Dirs}, ?CALL_TIMEOUT).

%% @doc Forgets the directories that no longer exist (removed by this VM).
-spec forget_gone() -> ok.
forget_gone() ->
    case whereis(?MODULE) of
        undefined -> ok;
        _ -> gen_server:call(?MODULE, forget_gone, ?CALL_TIMEOUT)
    end.

%%--------------------------------------------------------------------
%% gen_server callbacks

%% @private
-spec init([]) -> {ok, #state{}}.
init([]) ->
    {ok, #state{port = undefined, dirs = #{}}}.

%% @private
-spec handle_call(term(), gen_server:from(), #state{}) -> {reply, ok, #state{}}.
handle_call({track, Dirs}, _From, #state{port = Port0, dirs = Known} = State) ->
    Port = case Port0 of undefined -> start_script(); _ -> Port0 end,
    New = [D || D <- lists:usort(Dirs), not is_map_key(D, Known)],
    lists:foreach(fun(D) -> send(Port, $+, D) end, New),
    {reply, ok, State#state{port = Port, dirs = maps:merge(Known, maps:from_keys(New, true))}};
handle_call(forget_gone, _From, #state{port = Port, dirs = Known} = State) ->
    Gone = [D || D <- maps:keys(Known), not filelib:is_dir(D)],
    lists:foreach(fun(D) -> send(Port, $-, D) end, Gone),
    Left = maps:without(Gone, Known),
    case map_size(Left) of
        0 when Port =/= undefined ->
            true = port_close(Port),        % stdin ends with nothing on the list: the script exits
            {reply, ok, State#state{port = undefined, dirs = Left}};
        _ ->
            {reply, ok, State#state{dirs = Left}}
    end;
handle_call(_Request, _From, State) ->
    {reply, ok, State}.

%% @private
-spec handle_cast(term(), #state{}) -> {noreply, #state{}}.
handle_cast(_Request, State) ->
    {noreply, State}.

%% @private
-spec handle_info(term(), #state{}) -> {noreply, #state{}}.
handle_info(_Info, State) ->
    {noreply, State}.

%% @private
-spec terminate(term(), #state{}) -> ok.
terminate(_Reason, _State) ->
    ok.

%%--------------------------------------------------------------------
%% Internal functions: the script

%% A port to the script: a `/bin/sh' script that reads directory names from its stdin
%% (line `+DIR': remove DIR when I am gone; `-DIR': forget it) and does nothing else
%% until its stdin ends. Then (the port was closed, or this VM died by any means:
%% SIGINT, SIGKILL, a crash) it removes every directory still on its list, deepest
%% first, each once the `tasks' (cgroup v1) or `cgroup.procs' (cgroup v2) file in it is
%% empty or after a deadline of ?DEADLINE_S s; with `rmdir', so a directory that still
%% holds anything stays. It ignores SIGINT and SIGHUP (Ctrl-C in a terminal reaches the
%% whole process group) and writes nothing.
-spec start_script() -> port().
start_script() ->
    {ok, Port} = terrain_lab_os:start("/bin/sh", ["-c", script()], #{env => [{"LC_ALL", "C"}]}),
    Port.

%% Asks the script to remove (`$+') or forget (`$-') `Dir', an absolute path with no
%% newline.
-spec send(port(), $+ | $-, file:filename()) -> ok.
send(Port, Op, [$/ | _] = Dir) ->
    case lists:member($\n, Dir) of
        true -> error({badarg, Dir});
        false -> true = port_command(Port, [Op, unicode:characters_to_binary(Dir), $\n]), ok
    end.

-spec script() -> string().
script() ->
    "trap '' INT HUP\n"
    "dirs=\n"
    "while IFS= read -r line; do\n"
    "  case $line in\n"
    "    +/*) dirs=\"$dirs\n${line#+}\" ;;\n"
    "    -/*) dirs=$(printf '%s\\n' \"$dirs\" | grep -vxF -e \"${line#-}\") ;;\n"
    "  esac\n"
    "done\n"
    "exec >/dev/null 2>&1\n"
    "end=$(( $(date +%s) + " ++ integer_to_list(?DEADLINE_S) ++ " ))\n"
    "printf '%s\\n' \"$dirs\" | sort -ru | while IFS= read -r d; do\n"
    "  [ -n \"$d\" ] && [ -d \"$d\" ] || continue\n"
    "  f=\"$d/tasks\"; [ -e \"$f\" ] || f=\"$d/cgroup.procs\"\n"
    "  while [ -n \"$(cat \"$f\" 2>/dev/null)\" ] && [ \"$(date +%s)\" -lt \"$end\" ]; do sleep 0.2; done\n"
    "  rmdir \"$d\"\n"
    "done\n".
