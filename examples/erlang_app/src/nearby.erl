%% @doc nearby: run a function on a node chosen by terrain, preferring nodes near
%% this one, and say where it ran.
-module(nearby).

-export([candidates/1, run/2]).

%% @doc The nodes of the cluster that satisfy `Preds', nearest first.
-spec candidates([terrain:predicate()]) -> [node()].
candidates(Preds) ->
    terrain:choose_nodes(all, Preds, #{order_by => distance}).

%% @doc Runs `{M, F, A}' on one of the nearest nodes that satisfy `Preds' and
%% returns its result with the node it ran on.
-spec run([terrain:predicate()], {module(), atom(), [term()]}) -> {ok, node(), term()} | {error, term()}.
run(Preds, {M, F, A}) ->
    Parent = self(),
    Ref = make_ref(),
    Task = fun() -> Parent ! {Ref, node(), apply(M, F, A)} end,
    %% the nearest candidate that can take the process
    case terrain:spawn_on(Preds, Task, #{candidates => candidates(Preds), pick => first, monitor => true}) of
        {ok, _Pid, Node, Monitor} ->
            receive
                {Ref, Node, Result} -> erlang:demonitor(Monitor, [flush]), {ok, Node, Result};
                {'DOWN', Monitor, process, _, Why} -> {error, {crashed, Node, Why}}
            after 5000 ->
                {error, {timeout, Node}}
            end;
        {error, _} = Error ->
            Error
    end.
