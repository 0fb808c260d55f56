%% @private
%% @doc The CPU cgroups this VM made are removed even when it dies in a way no Erlang
%% code sees: SIGINT (Ctrl-C; an escript on OTP 25 cannot handle it, the break handler
%% halts), SIGKILL, a crash. Before a group directory is made it is given to a cleanup
%% sentinel, a shell script behind a port ({@link terrain_lab_os:sentinel/0}): when
%% this VM is gone its stdin ends, and it removes the directories still on its list
%% once their processes have exited (the lab's VMs halt when their controlling VM's
%% connection drops). A directory removed here ({@link forget_gone/0}) leaves the
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
    Port = case Port0 of undefined -> terrain_lab_os:sentinel(); _ -> Port0 end,
    New = [D || D <- lists:usort(Dirs), not is_map_key(D, Known)],
    lists:foreach(fun(D) -> terrain_lab_os:sentinel_track(Port, D) end, New),
    {reply, ok, State#state{port = Port, dirs = maps:merge(Known, maps:from_keys(New, true))}};
handle_call(forget_gone, _From, #state{port = Port, dirs = Known} = State) ->
    Gone = [D || D <- maps:keys(Known), not filelib:is_dir(D)],
    lists:foreach(fun(D) -> terrain_lab_os:sentinel_forget(Port, D) end, Gone),
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
