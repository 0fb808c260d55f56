%% Test helper: runs the `terrain' escript as a real program and returns its exit
%% status, stdout and stderr separately; finds the repository and the escript.
-module(terrain_lab_test_escript).

-export([run/2, run/3, shell/2, path/0, root/0]).

-define(TIMEOUT, 120000).

%% @doc Runs the escript with Args; stderr goes through a file in Dir.
%% Returns {ExitStatus, Stdout, Stderr}.
run(Dir, Args) ->
    run(path(), Dir, Args).

run(Escript, Dir, Args) ->
    ErrFile = filename:join(Dir, "stderr-" ++ integer_to_list(erlang:unique_integer([positive])) ++ ".txt"),
    Command = lists:flatten(["sh -c '\"$0\" \"$@\" 2>", ErrFile, "' ", Escript, " ",
                             lists:join(" ", [quote(A) || A <- Args])]),
    Port = open_port({spawn, Command}, [exit_status, binary, stream]),
    {Code, Out} = collect(Port, []),
    {ok, Err} = file:read_file(ErrFile),
    ok = file:delete(ErrFile),
    {Code, Out, unicode:characters_to_list(Err)}.

%% @doc Runs a bash command line in which `$T' is the escript (for pipes, background
%% jobs and signals); stderr goes through a file in Dir. Returns {ExitStatus, Stdout,
%% Stderr}.
shell(Dir, Line) ->
    ErrFile = filename:join(Dir, "sh-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Port = open_port({spawn_executable, "/bin/bash"},
                     [{args, ["-c", "{ " ++ Line ++ "; } 2>" ++ ErrFile]}, {env, [{"T", path()}]},
                      exit_status, binary, stream]),
    {Status, Out} = collect(Port, []),
    {ok, Err} = file:read_file(ErrFile),
    {Status, Out, unicode:characters_to_list(Err)}.

%% @doc The escript: the newer of bin/terrain and _build/default/bin/terrain (`make
%% build' copies the one to the other). Fails the test when neither exists.
path() ->
    Candidates = [filename:join(root(), "bin/terrain"), filename:join(root(), "_build/default/bin/terrain")],
    case lists:reverse(lists:sort([{filelib:last_modified(E), E} || E <- Candidates, filelib:is_regular(E)])) of
        [{_, E} | _] -> E;
        [] -> error({escript_missing, "run 'make build' first", Candidates})
    end.

%% @doc The repository: five levels above the ebin directory of terrain_lab_cli
%% (ROOT/_build/PROFILE/lib/terrain_lab/ebin).
root() ->
    Ebin = filename:split(filename:absname(filename:dirname(code:which(terrain_lab_cli)))),
    filename:join(lists:sublist(Ebin, length(Ebin) - 5)).

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc]);
        {Port, {exit_status, Code}} -> {Code, unicode:characters_to_list(lists:reverse(Acc))}
    after ?TIMEOUT ->
        port_close(Port),
        error(escript_timeout)
    end.

quote(Arg) ->
    ["'", string:replace(Arg, "'", "'\\''", all), "'"].
