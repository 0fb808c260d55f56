%% @private
%% @doc The one lock of commands that must not run twice on one thing (`terrain up' on
%% a state directory, `terrain testbed up|down' on a prefix): a file created
%% exclusively that holds the OS pid of its holder. A lock whose process is gone (the
%% holder was killed) is stale and taken over; a lock torn between its creation and
%% the write of the pid is taken over too.
%% ```
%% case terrain_lab_lock:take(File) of
%%     ok -> try Work() after terrain_lab_lock:release(File) end;
%%     {error, {locked, File, Pid}} -> ...
%% end
%% '''
-module(terrain_lab_lock).

%% API
-export([take/1,
         release/1]).

-type error_reason() :: {locked, file:filename(), OsPid :: string()}
                      | {write, file:filename(), term()}.
-export_type([error_reason/0]).

%% @doc Takes the lock `File' (its directory must exist), or says which process holds it.
-spec take(file:filename()) -> ok | {error, error_reason()}.
take(File) ->
    case file:open(File, [write, exclusive, raw]) of
        {ok, Fd} ->
            Written = file:write(Fd, os:getpid()),
            _ = file:close(Fd),
            case Written of
                ok -> ok;
                {error, Why} -> _ = file:delete(File), {error, {write, File, Why}}
            end;
        {error, eexist} ->
            case file:read_file(File) of
                {ok, Pid} when Pid =/= <<>> ->
                    case terrain_lab_os:alive(binary_to_list(Pid)) of
                        true -> {error, {locked, File, binary_to_list(Pid)}};
                        false -> _ = file:delete(File), take(File)
                    end;
                _ ->
                    _ = file:delete(File),    % torn by a crash between create and write
                    take(File)
            end;
        {error, Why} ->
            {error, {write, File, Why}}
    end.

%% @doc Releases the lock {@link take/1} took.
-spec release(file:filename()) -> ok.
release(File) ->
    _ = file:delete(File),
    ok.
