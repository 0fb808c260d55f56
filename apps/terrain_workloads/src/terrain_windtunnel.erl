%% @private
%% @doc The wind tunnel's coordinator: validates the options, chooses and orders the
%% nodes with terrain, places the workers, starts them together and collects their
%% results under one deadline.
%%
%% Placement: the candidates that satisfy `predicates' (`terrain:choose_nodes/3',
%% ordered by distance from this node when a topology is loaded), each given a
%% contiguous block of workers, so that neighbouring slices share a node, and
%% neighbouring nodes in the list (near each other) hold neighbouring blocks: the
%% lattice crosses a slow link as few times as the order allows. With
%% `workers_per_scheduler' K each node gets K workers per online scheduler (the
%% "four threads per CPU" of Bjørndalen et al. is K = 4); otherwise `workers' are split as evenly
%% as possible.
%%
%% The lattice is `lattice_rows' rows (default `workers * slice_rows') by `columns';
%% worker I holds a contiguous band of rows. The rows above the first and below the
%% last are fixed zero rows. Because each cell's update reads only its neighbours,
%% the final lattice (its checksum) does not depend on the number of workers or
%% their placement.
-module(terrain_windtunnel).

%% API
-export([run/1,
         format_error/1]).

-export_type([options/0, result/0]).

-type options() :: terrain_workloads:windtunnel_options().

-type result() :: terrain_workloads:windtunnel_result().

-define(DEFAULTS, #{nodes => [node()], predicates => [], workers => 8, steps => 100, slice_rows => 16,
                    columns => 256, work_per_cell => 16, instrument => none, on_start => fun(_) -> ok end,
                    timeout => 600000}).

%%--------------------------------------------------------------------
%% API

-spec run(options()) -> {ok, result()} | {error, {windtunnel, term()}}.
run(Options) when is_map(Options) ->
    case validate(maps:merge(?DEFAULTS, Options)) of
        ok ->
            O = maps:merge(?DEFAULTS, Options),
            case choose(O) of
                {ok, []} -> {error, {windtunnel, no_nodes}};
                {ok, Nodes} -> place_and_run(Nodes, O);
                {error, Why} -> {error, {windtunnel, {choose_nodes, Why}}}
            end;
        {error, _} = Error ->
            Error
    end.

-spec format_error({windtunnel, term()}) -> iolist().
format_error({windtunnel, no_nodes}) ->
    "wind tunnel: no candidate node satisfies the predicates";
format_error({windtunnel, {choose_nodes, Why}}) ->
    io_lib:format("wind tunnel: choosing nodes failed: ~0tp", [Why]);
format_error({windtunnel, {option, Key, Value}}) ->
    io_lib:format("wind tunnel: bad option ~ts: ~0tp", [Key, Value]);
format_error({windtunnel, {too_few_rows, Rows, Workers}}) ->
    io_lib:format("wind tunnel: ~b lattice rows cannot be split among ~b workers", [Rows, Workers]);
format_error({windtunnel, {worker_failed, Worker, Node, Why}}) ->
    io_lib:format("wind tunnel: worker ~b on ~ts failed: ~0tp", [Worker, Node, Why]);
format_error({windtunnel, {timeout, Ms, Done, Workers}}) ->
    io_lib:format("wind tunnel: only ~b of ~b workers finished within ~b ms", [Done, Workers, Ms]);
format_error({windtunnel, Other}) ->
    io_lib:format("wind tunnel: ~0tp", [Other]).

%%--------------------------------------------------------------------
%% Internal functions

validate(O) ->
    Checks = [{nodes, fun(Ns) -> is_list(Ns) andalso Ns =/= [] andalso lists:all(fun is_atom/1, Ns) end},
              {predicates, fun is_list/1},
              {workers, fun pos/1}, {workers_per_scheduler, fun pos/1}, {steps, fun pos/1},
              {slice_rows, fun pos/1}, {lattice_rows, fun pos/1}, {columns, fun(C) -> pos(C) andalso C >= 2 end},
              {work_per_cell, fun pos/1},
              {instrument, fun(F) -> F =:= none orelse is_function(F, 3) end},
              {on_start, fun(F) -> is_function(F, 1) end},
              {timeout, fun pos/1}],
    Known = [K || {K, _} <- Checks],
    case [{K, V} || {K, V} <- maps:to_list(O),
                    not lists:member(K, Known) orelse not (element(2, lists:keyfind(K, 1, Checks)))(V)] of
        [] -> ok;
        [{K, V} | _] -> {error, {windtunnel, {option, K, V}}}
    end.

pos(N) -> is_integer(N) andalso N > 0.

choose(#{nodes := Candidates, predicates := []}) ->
    {ok, dedup(Candidates)};
choose(#{nodes := Candidates, predicates := Preds}) ->
    Opts = case terrain:topology() of
               undefined -> #{};
               _ -> #{order_by => distance}
           end,
    case terrain:choose_nodes(Candidates, Preds, Opts) of
        Nodes when is_list(Nodes) -> {ok, Nodes};
        {error, _} = Error -> Error
    end.

dedup(Nodes) ->
    lists:reverse(lists:foldl(fun(N, Acc) -> case lists:member(N, Acc) of true -> Acc; false -> [N | Acc] end end,
                              [], Nodes)).

place_and_run(Nodes, O) ->
    case counts(Nodes, O) of
        {ok, Counts} ->
            Placement = lists:append([lists:duplicate(C, N) || {N, C} <- Counts]),
            Workers = length(Placement),
            Rows = maps:get(lattice_rows, O, Workers * maps:get(slice_rows, O)),
            case Rows >= Workers of
                true -> start(lists:zip(lists:seq(0, Workers - 1), Placement), Rows, O);
                false -> {error, {windtunnel, {too_few_rows, Rows, Workers}}}
            end;
        {error, _} = Error ->
            Error
    end.

%% Workers per node: K per scheduler, or `workers' split evenly in blocks.
counts(Nodes, #{workers_per_scheduler := K, timeout := Timeout}) ->
    try {ok, [{N, K * erpc:call(N, erlang, system_info, [schedulers_online], min(Timeout, 5000))} || N <- Nodes]}
    catch error:{erpc, Why} -> {error, {windtunnel, {schedulers, Why}}}
    end;
counts(Nodes, #{workers := W}) ->
    N = length(Nodes),
    {ok, [{Node, W div N + case I =< W rem N of true -> 1; false -> 0 end}
          || {I, Node} <- lists:zip(lists:seq(1, N), Nodes)]}.

start(Placement, Rows, #{steps := Steps, columns := Cols, work_per_cell := Work, instrument := Instrument,
                         on_start := OnStart, timeout := Timeout}) ->
    Workers = length(Placement),
    Self = self(),
    Spawned = [{I, Node, spawn_opt(Node, terrain_windtunnel_worker, init,
                                   [#{worker => I, workers => Workers, first_row => first_row(I, Rows, Workers),
                                      rows => first_row(I + 1, Rows, Workers) - first_row(I, Rows, Workers),
                                      columns => Cols, steps => Steps, work_per_cell => Work,
                                      instrument => Instrument, coordinator => Self}],
                                   [monitor])}
               || {I, Node} <- Placement],
    Pids = list_to_tuple([Pid || {_, _, {Pid, _}} <- Spawned]),
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    _ = OnStart([{I, Pid} || {I, _, {Pid, _}} <- Spawned]),
    T0 = erlang:monotonic_time(microsecond),
    lists:foreach(fun({I, _, {Pid, _}}) -> Pid ! {go, neighbour(Pids, I - 1), neighbour(Pids, I + 1)} end, Spawned),
    case collect(Spawned, Deadline, #{}) of
        {ok, Done} ->
            Elapsed = erlang:monotonic_time(microsecond) - T0,
            {ok, #{elapsed_us => Elapsed, workers => Workers, steps => Steps, lattice => {Rows, Cols},
                   placement => [{I, N} || {I, N} <- Placement], nodes => dedup([N || {_, N} <- Placement]),
                   checksum => lists:sum([C || {_, #{checksum := C}} <- maps:to_list(Done)]),
                   worker_us => [maps:get(elapsed_us, maps:get(I, Done)) || {I, _} <- Placement]}};
        {error, _} = Error ->
            [exit(Pid, kill) || {_, _, {Pid, _}} <- Spawned],
            [demonitor(Ref, [flush]) || {_, _, {_, Ref}} <- Spawned],
            Error
    end.

first_row(I, Rows, Workers) ->
    I * Rows div Workers.

neighbour(Pids, I) when I < 0; I >= tuple_size(Pids) -> none;
neighbour(Pids, I) -> element(I + 1, Pids).

collect(Spawned, _Deadline, Done) when map_size(Done) =:= length(Spawned) ->
    [demonitor(Ref, [flush]) || {_, _, {_, Ref}} <- Spawned],
    {ok, Done};
collect(Spawned, Deadline, Done) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {windtunnel_done, I, Result} ->
            collect(Spawned, Deadline, Done#{I => Result});
        {'DOWN', Ref, process, _, normal} when is_reference(Ref) ->
            collect(Spawned, Deadline, Done);
        {'DOWN', Ref, process, _, Why} ->
            case lists:keyfind(Ref, 2, [{I, R, N} || {I, N, {_, R}} <- Spawned]) of
                {I, Ref, Node} -> {error, {windtunnel, {worker_failed, I, Node, Why}}};
                false -> collect(Spawned, Deadline, Done)
            end
    after Left ->
        {error, {windtunnel, {timeout, Left + (Deadline - erlang:monotonic_time(millisecond)), map_size(Done),
                              length(Spawned)}}}
    end.
