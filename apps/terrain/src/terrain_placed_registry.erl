%% @private
%% @doc The names and members of this node's placed groups.
%%
%% Owns the `protected' table `terrain_placed': `{Name, GroupPid, [{Pid, Node}]}',
%% read in the caller by `terrain:placed/1', written only here. A group registers its
%% name when it starts (a second group of the same name is refused with
%% `{already_started, Pid}') and sends its members whenever they change (a call, so
%% that the members a group reports are in the table when it has reported them); the row goes
%% when the group process dies (monitored). Comes before `terrain_placed_group_sup'
%% under `terrain_placed_sup' (`rest_for_one'): if it restarts, the groups restart too
%% and register again.
-module(terrain_placed_registry).
-behaviour(gen_server).

%% API
-export([start_link/0,
         register/2,
         set_members/2,
         members/1,
         groups/0,
         whereis/1]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

%% exports_not_used: Named in terrain_placed_sup's child spec.
-ignore_xref([{start_link, 0}]).

-define(TABLE, terrain_placed).

%%--------------------------------------------------------------------
%% API

-spec start_link() -> {ok, pid()} | ignore | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc Registers the calling group under its name.
-spec register(term(), pid()) -> ok | {error, {already_started, pid()}}.
register(Name, Pid) ->
    gen_server:call(?MODULE, {register, Name, Pid}).

%% @doc Records a group's running members (a call: once it returns, `members/1' in
%% any process sees them).
-spec set_members(term(), [{pid(), node()}]) -> ok.
set_members(Name, Members) ->
    gen_server:call(?MODULE, {members, Name, self(), Members}).

%% @doc A group's running members, read in the caller.
-spec members(term()) -> [{pid(), node()}] | {error, {no_group, term()}}.
members(Name) ->
    try ets:lookup(?TABLE, Name) of
        [{_, _, Members}] -> Members;
        [] -> {error, {no_group, Name}}
    catch
        error:badarg -> {error, {no_group, Name}}
    end.

%% @doc Every group of this node: `[{Name, GroupPid}]', read in the caller.
-spec groups() -> [{term(), pid()}].
groups() ->
    try ets:select(?TABLE, [{{'$1', '$2', '_'}, [], [{{'$1', '$2'}}]}])
    catch
        error:badarg -> []
    end.

%% @doc The process of a group, or `undefined'.
-spec whereis(term()) -> pid() | undefined.
whereis(Name) ->
    try ets:lookup(?TABLE, Name) of
        [{_, Pid, _}] -> Pid;
        [] -> undefined
    catch
        error:badarg -> undefined
    end.

%%--------------------------------------------------------------------
%% gen_server callbacks

-spec init([]) -> {ok, #{reference() => term()}}.
init([]) ->
    ?TABLE = ets:new(?TABLE, [named_table, protected, set, {read_concurrency, true}]),
    {ok, #{}}.

-spec handle_call(term(), gen_server:from(), map()) -> {reply, term(), map()}.
handle_call({register, Name, Pid}, _From, Monitors) ->
    case ets:lookup(?TABLE, Name) of
        [{_, Other, _}] ->
            {reply, {error, {already_started, Other}}, Monitors};
        [] ->
            true = ets:insert(?TABLE, {Name, Pid, []}),
            {reply, ok, Monitors#{erlang:monitor(process, Pid) => Name}}
    end;
handle_call({members, Name, Pid, Members}, _From, Monitors) ->
    _ = case ets:lookup(?TABLE, Name) of
            [{_, Pid, _}] -> ets:insert(?TABLE, {Name, Pid, Members});
            _ -> false
        end,
    {reply, ok, Monitors};
handle_call(_Request, _From, Monitors) ->
    {reply, {error, unknown_request}, Monitors}.

-spec handle_cast(term(), map()) -> {noreply, map()}.
handle_cast(_Request, Monitors) ->
    {noreply, Monitors}.

-spec handle_info(term(), map()) -> {noreply, map()}.
handle_info({'DOWN', Ref, process, Pid, _}, Monitors) ->
    case maps:take(Ref, Monitors) of
        {Name, Rest} ->
            true = ets:match_delete(?TABLE, {Name, Pid, '_'}),
            {noreply, Rest};
        error ->
            {noreply, Monitors}
    end;
handle_info(_Msg, Monitors) ->
    {noreply, Monitors}.
