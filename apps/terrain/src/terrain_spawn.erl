%% @private
%% @doc Spawning on a chosen node, behind {@link terrain:spawn_on/3}: choose a node
%% with {@link terrain_choose:node/3}, send an asynchronous spawn request with a
%% deadline, and on failure leave that node out and choose again, up to `attempts'
%% times. Options arrive validated by `terrain'.
-module(terrain_spawn).

%% API
-export([check_spawnable/1,
         spawn_on/3]).

-define(DEFAULT_TIMEOUT, 1000).

%%--------------------------------------------------------------------
%% API

%% @doc `ok' for what `spawn_on/3' can spawn: a fun of arity 0 or `{M, F, A}'.
-spec check_spawnable(term()) -> ok | {error, {bad_spawn, term()}}.
check_spawnable(Fun) when is_function(Fun, 0) -> ok;
check_spawnable({M, F, A}) when is_atom(M), is_atom(F), is_list(A) -> ok;
check_spawnable(What) -> {error, {bad_spawn, What}}.

%% @doc Spawns `What' on a node chosen by the predicates; see {@link terrain:spawn_on/3}.
-spec spawn_on(terrain:predicate() | [terrain:predicate()], fun(() -> term()) | {module(), atom(), [term()]},
               terrain:spawn_options()) ->
          {ok, pid(), node()} | {ok, pid(), node(), reference()} | {error, term()}.
spawn_on(Preds, What, Opts) ->
    case terrain_choose:resolve_candidates(maps:get(candidates, Opts, all)) of
        {ok, Candidates} -> attempts(Preds, What, Opts, Candidates, maps:get(attempts, Opts, 3), []);
        {error, _} = Error -> Error
    end.

%%--------------------------------------------------------------------
%% Internal

attempts(_Preds, _What, _Opts, _Candidates, 0, Failures) ->
    {error, {no_node, {tried, lists:reverse(Failures)}}};
attempts(Preds, What, Opts, Candidates, Left, Failures) ->
    ChooseOpts = maps:with([pick, timeout, max_age], Opts),
    case terrain_choose:node(Candidates, Preds, ChooseOpts) of
        {ok, Node} ->
            case spawn_request_on(Node, What, Opts) of
                {ok, Pid, MRef} when MRef =/= undefined -> {ok, Pid, Node, MRef};
                {ok, Pid, undefined} -> {ok, Pid, Node};
                {error, Why} ->
                    attempts(Preds, What, Opts, lists:delete(Node, Candidates), Left - 1, [{Node, Why} | Failures])
            end;
        {error, none} when Failures =:= [] ->
            {error, {no_node, none}};
        {error, none} ->
            {error, {no_node, {tried, lists:reverse(Failures)}}};
        {error, Why} ->
            {error, {no_node, Why}}
    end.

%% An asynchronous spawn request with a deadline: a node that went down answers
%% `noconnection' at once; one that hangs is given up after `timeout'.
spawn_request_on(Node, What, Opts) ->
    Monitor = maps:get(monitor, Opts, false),
    SpawnOpts = [{reply, yes}] ++ [link || maps:get(link, Opts, false)] ++ [monitor || Monitor],
    ReqId = case What of
                {M, F, A} -> erlang:spawn_request(Node, M, F, A, SpawnOpts);
                Fun -> erlang:spawn_request(Node, Fun, SpawnOpts)
            end,
    receive
        {spawn_reply, ReqId, ok, Pid} ->
            {ok, Pid, case Monitor of true -> ReqId; false -> undefined end};
        {spawn_reply, ReqId, error, Why} ->
            {error, Why}
    after maps:get(timeout, Opts, ?DEFAULT_TIMEOUT) ->
            case erlang:spawn_request_abandon(ReqId) of
                true -> {error, timeout};
                false ->
                    %% The reply raced the abandon: take it.
                    receive
                        {spawn_reply, ReqId, ok, Pid} ->
                            {ok, Pid, case Monitor of true -> ReqId; false -> undefined end};
                        {spawn_reply, ReqId, error, Why} ->
                            {error, Why}
                    end
            end
    end.
