%% @private
%% @doc The one exit path's list of what to undo: temporary files, child OS processes,
%% clusters (their VMs and CPU cgroups). Whoever creates such a thing adds a cleanup
%% and removes it once it has undone the thing itself; when the CLI is stopped by
%% SIGTERM, or ends any other way, it runs the cleanups left ({@link run/0}) before
%% it halts, so nothing is left behind.
%%
%% The table exists only in the escript (made by {@link init/0} at its start); in a
%% test or in an application using the lab, {@link add/2} and {@link remove/1} do
%% nothing, and the callers undo what they made as before.
%% ```
%% terrain_lab_cleanup:add({port, OsPid}, fun() -> kill(OsPid) end),
%% ... wait for the process ...
%% terrain_lab_cleanup:remove({port, OsPid}).
%% '''
-module(terrain_lab_cleanup).

%% API
-export([init/0,
         add/2,
         remove/1,
         run/0]).

-define(TABLE, ?MODULE).

%% @doc Creates the table, owned by the calling process (the escript's main process,
%% which lives until the VM halts).
-spec init() -> ok.
init() ->
    case ets:whereis(?TABLE) of
        undefined -> ?TABLE = ets:new(?TABLE, [named_table, public, ordered_set]), ok;
        _ -> ok
    end.

%% @doc Adds (or replaces) the cleanup `Key'.
-spec add(term(), fun(() -> term())) -> ok.
add(Key, Fun) when is_function(Fun, 0) ->
    _ = ets:whereis(?TABLE) =/= undefined andalso ets:insert(?TABLE, {{erlang:monotonic_time(), Key}, Key, Fun}),
    ok.

%% @doc Removes the cleanup `Key' (its thing is undone).
-spec remove(term()) -> ok.
remove(Key) ->
    _ = ets:whereis(?TABLE) =/= undefined andalso ets:match_delete(?TABLE, {'_', Key, '_'}),
    ok.

%% @doc Runs every cleanup left, newest first (a temporary file before the cluster
%% that wrote it), and returns how many ran. A cleanup that fails is reported on
%% stderr and the others still run.
-spec run() -> non_neg_integer().
run() ->
    case ets:whereis(?TABLE) of
        undefined ->
            0;
        _ ->
            Entries = lists:reverse(ets:tab2list(?TABLE)),
            lists:foreach(fun({Id, Key, Fun}) ->
                                  ets:delete(?TABLE, Id),
                                  try Fun()
                                  catch Class:Reason ->
                                          io:format(standard_error, "terrain: could not clean up ~0tp: ~0tp:~0tp~n",
                                                    [Key, Class, Reason])
                                  end
                          end, Entries),
            length(Entries)
    end.
