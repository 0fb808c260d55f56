%% @private
%% @doc `terrain time-task': times a repeated parallel task across the cluster into
%% the durations CSV of `terrain write-test', for the same extreme-value analysis.
%%
%% `--rpc-all M:F:A' calls `M:F(A...)' on every node at once (A is a literal Erlang
%% list, never evaluated: `timer:sleep:[10]'), and a run lasts until every node has
%% answered. Each run's row:
%%
%% `run, total_s, slowest_node, slowest_s, nodes, failed, status'
%%
%% Every run has one deadline (`--timeout'); a node that fails or misses it is counted
%% in `failed', the run's status is `failed' and its `total_s' is the time until the
%% deadline or the last answer. Analyses should keep rows with status `ok'.
%%
%% `--at NODE' times the runs on NODE (with `erpc'), so the calls cross the cluster's
%% emulated links the way a task started inside the cluster does; from the CLI's own
%% node they would not. `--warmup N' runs (default 1) come first and are not recorded:
%% the first run pays for loading code and setting up connections.
-module(terrain_lab_time_task).

%% API
-export([validate/1,
         run/3,
         columns/0,
         format_error/1]).

%% Internal exports (terrain_lab_cmd_demo runs one_run/4 on a cluster node with erpc)
-export([one_run/4]).

-ignore_xref([{one_run, 4}]).

-export_type([task/0]).

-define(COLUMNS, [run, total_s, slowest_node, slowest_s, nodes, failed, status]).

%% A validated task (see validate/1).
-type task() :: #{mfa := {module(), atom(), [term()]},
                  runs := pos_integer(),
                  warmup := non_neg_integer(),  % unrecorded runs first
                  at := node() | undefined,     % the node that times the runs (undefined: this one)
                  timeout := pos_integer(),     % ms, deadline of each run
                  out := file:filename()}.      % the durations CSV to create

%% @doc Checks the options of `terrain time-task' (`rpc_all' as `M:F:A' text, `runs',
%% `timeout', `out'; `undefined' for a missing one) and returns the task.
-spec validate(#{rpc_all := string() | undefined, runs := term(), timeout := term(),
                 out := file:filename() | undefined, warmup => non_neg_integer(), at => node()}) ->
          {ok, task()} | {error, {time_task, term()}}.
validate(#{rpc_all := undefined}) ->
    {error, {time_task, {missing_option, "rpc-all"}}};
validate(#{out := undefined}) ->
    {error, {time_task, {missing_option, "out"}}};
validate(#{runs := Runs}) when not (is_integer(Runs) andalso Runs > 0) ->
    {error, {time_task, {bad_option, "runs", Runs}}};
validate(#{timeout := Timeout}) when not (is_integer(Timeout) andalso Timeout > 0) ->
    {error, {time_task, {bad_option, "timeout", Timeout}}};
validate(#{rpc_all := Text, runs := Runs, timeout := Timeout, out := Out} = Options) ->
    case parse_mfa(Text) of
        {ok, MFA} -> {ok, #{mfa => MFA, runs => Runs, timeout => Timeout, out => Out,
                            warmup => maps:get(warmup, Options, 1), at => maps:get(at, Options, undefined)}};
        {error, _} = Error -> Error
    end.

%% @doc Runs the task on `Nodes' `runs' times, one CSV row per run on disk as it goes;
%% progress goes to `Io''s `err' device.
-spec run(task(), [node()], terrain_lab_io:io()) -> ok | {error, term()}.
run(_Task, [], _Io) ->
    {error, {time_task, no_nodes}};
run(#{mfa := {M, F, A} = MFA, runs := Runs, timeout := Timeout, out := Out} = Task, Nodes, Io) ->
    case terrain_lab_csv:create(Out, ?COLUMNS) of
        {ok, Csv} ->
            At = maps:get(at, Task, undefined),
            Warmup = maps:get(warmup, Task, 1),
            terrain_lab_io:progress(Io, "time-task: ~s:~s/~b on ~b nodes from ~s, ~b runs after ~b warm-up run~s~n",
                                    [M, F, length(A), length(Nodes), case At of undefined -> node(); _ -> At end,
                                     Runs, Warmup, case Warmup of 1 -> ""; _ -> "s" end]),
            _ = [timed_run(At, MFA, Nodes, Timeout, -W) || W <- lists:seq(1, Warmup)],
            Result = try
                         lists:foldl(fun(Run, {ok, Failed}) ->
                                             Row = timed_run(At, MFA, Nodes, Timeout, Run),
                                             terrain_lab_io:progress(Io, "run ~b/~b: ~.4f s~s~n",
                                                                     [Run, Runs, maps:get(total_s, Row),
                                                                      failed_note(maps:get(failed, Row))]),
                                             case terrain_lab_csv:write_row(Csv, Row) of
                                                 ok -> {ok, Failed + min(1, maps:get(failed, Row))};
                                                 {error, _} = Error -> Error
                                             end;
                                        (_Run, Error) ->
                                             Error
                                     end, {ok, 0}, lists:seq(1, Runs))
                     after
                         terrain_lab_csv:close(Csv)
                     end,
            outcome(Result, Runs, Out, Io);
        {error, _} = Error ->
            Error
    end.

%% What a run's progress line adds when nodes failed.
failed_note(0) -> "";
failed_note(N) -> io_lib:format(" (~b failed)", [N]).

%% Every run failed: the command failed. Some failed: success, with one line saying so.
outcome({ok, 0}, _Runs, _Out, _Io) ->
    ok;
outcome({ok, Runs}, Runs, Out, _Io) ->
    {error, {time_task, {every_run_failed, Runs, Out}}};
outcome({ok, Failed}, Runs, Out, Io) ->
    terrain_lab_io:progress(Io, "time-task: ~b of ~b runs failed (status failed in ~ts)~n", [Failed, Runs, Out]);
outcome({error, _} = Error, _Runs, _Out, _Io) ->
    Error.

%% One run, timed here or on the --at node (whose answer comes within the run's
%% deadline plus a margin; a node that does not answer makes a failed row).
timed_run(undefined, MFA, Nodes, Timeout, Run) ->
    one_run(MFA, Nodes, Timeout, Run);
timed_run(At, MFA, Nodes, Timeout, Run) ->
    try erpc:call(At, ?MODULE, one_run, [MFA, Nodes, Timeout, Run], Timeout + 5000)
    catch
        _:_ -> #{run => Run, total_s => Timeout / 1000, slowest_node => <<>>, slowest_s => 0.0,
                 nodes => length(Nodes), failed => length(Nodes), status => failed}
    end.

%% Parses `M:F:A' where A is a literal list, e.g. `timer:sleep:[10]'.
-spec parse_mfa(string()) -> {ok, {module(), atom(), [term()]}} | {error, {time_task, term()}}.
parse_mfa(Text) ->
    case string:split(Text, ":", all) of
        [M, F | ArgParts] when M =/= "", F =/= "" ->
            ArgText = case lists:join(":", ArgParts) of [] -> "[]"; Joined -> lists:flatten(Joined) end,
            case {literal(M), literal(F), literal(ArgText)} of
                {{ok, Mod}, {ok, Fun}, {ok, Args}} when is_atom(Mod), is_atom(Fun), is_list(Args) ->
                    {ok, {Mod, Fun, Args}};
                _ ->
                    {error, {time_task, {bad_mfa, Text}}}
            end;
        _ ->
            {error, {time_task, {bad_mfa, Text}}}
    end.

%% @doc A sentence for the errors of this module.
-spec format_error(term()) -> iolist().
format_error({time_task, {missing_option, Name}}) ->
    io_lib:format("--~s is required", [Name]);
format_error({time_task, {bad_option, Name, Value}}) ->
    io_lib:format("--~s ~0tp: expected a positive integer", [Name, Value]);
format_error({time_task, {bad_mfa, Text}}) ->
    io_lib:format("--rpc-all ~ts: expected Module:Function:[Args] with literal arguments, e.g. timer:sleep:[10]",
                  [Text]);
format_error({time_task, {every_run_failed, Runs, Out}}) ->
    io_lib:format("all ~b runs failed (a node raised or missed the deadline; the rows are in ~ts)", [Runs, Out]);
format_error({time_task, no_nodes}) ->
    "no nodes to run the task on".

literal(Text) ->
    case erl_scan:string(Text ++ ".") of
        {ok, Tokens, _} ->
            case erl_parse:parse_term(Tokens) of
                {ok, Term} -> {ok, Term};
                {error, _} -> error
            end;
        {error, _, _} ->
            error
    end.

%% @doc The CSV columns of a run's row.
-spec columns() -> [atom()].
columns() ->
    ?COLUMNS.

%% @doc One run: all requests go out at once; answers are collected as they come,
%% under one deadline. Returns the CSV row.
-spec one_run({module(), atom(), [term()]}, [node()], pos_integer(), pos_integer()) -> #{atom() => term()}.
one_run({M, F, A}, Nodes, Timeout, Run) ->
    T0 = erlang:monotonic_time(),
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    Requests = lists:foldl(fun(Node, Coll) -> erpc:send_request(Node, M, F, A, Node, Coll) end,
                           erpc:reqids_new(), Nodes),
    {Answers, Failed} = collect(Requests, Deadline, T0, [], 0),
    Tn = erlang:monotonic_time(),
    {SlowestNode, SlowestS} = case Answers of
                                  [] -> {none, 0.0};
                                  _ -> lists:last(lists:keysort(2, Answers))
                              end,
    #{run => Run,
      total_s => seconds(Tn - T0),
      slowest_node => case SlowestNode of none -> <<>>; _ -> atom_to_binary(SlowestNode) end,
      slowest_s => SlowestS,
      nodes => length(Nodes),
      failed => Failed,
      status => case Failed of 0 -> ok; _ -> failed end}.

%% erpc raises for a failed request with its label and the remaining collection, and
%% raises `{erpc, timeout}' (abandoning what is left) at the deadline.
collect(Requests, Deadline, T0, Answers, Failed) ->
    case erpc:reqids_size(Requests) of
        0 ->
            {Answers, Failed};
        Left ->
            try erpc:receive_response(Requests, {abs, Deadline}, true) of
                {_Result, Node, Rest} ->
                    At = seconds(erlang:monotonic_time() - T0),
                    collect(Rest, Deadline, T0, [{Node, At} | Answers], Failed)
            catch
                error:{erpc, timeout} ->
                    {Answers, Failed + Left};
                _Class:{_Reason, _Node, Rest} ->
                    collect(Rest, Deadline, T0, Answers, Failed + 1)
            end
    end.

seconds(Native) ->
    erlang:convert_time_unit(Native, native, nanosecond) / 1.0e9.
