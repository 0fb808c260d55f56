%% @private
%% @doc A chaos run (`terrain chaos SPEC'): the live cluster under a seeded nemesis,
%% the way Jepsen tests a distributed system: a schedule of faults
%% (terrain_lab_chaos_schedule) carried out on a running cluster
%% (terrain_lab_chaos_nemesis) while clients use it (terrain_lab_chaos_clients), every
%% operation and observation in a history (terrain_lab_chaos_history), judged at the
%% end by a checker (terrain_lab_chaos_checker).
%%
%% The run: the spec is copied into the run directory with the attribute
%% `chaos_worker' on every node (false on every fourth: the placed groups' predicate
%% leaves them out), started live and emulated under `OUT/state' (terrain_lab_launch),
%% two placed groups are started on the node with the largest name (never a target of
%% the nemesis), the clients and the nemesis run for the duration, then the run waits
%% for the final settling time (grace + 4 s + one re-measurement round), stops the
%% cluster, looks for anything left, and judges. Files: `spec.cluster', `history.jsonl'
%% (`terrain.chaos_history/1'), `checker.json' (`terrain.checker/1'), `specs/' (the
%% one-node specs of joins), `manifest.json'.
%%
%% Whatever happens, the cluster is stopped: at the end, on SIGTERM (the one exit
%% path's cleanups, terrain_lab_cleanup: the run and its clients are suspended first,
%% the history is kept) and when the CLI dies by SIGINT or SIGKILL (a reaper,
%% terrain_lab_os:reaper/1, stops every VM whose command line names the state's
%% `nodes/' directory).
-module(terrain_lab_chaos).

%% API
-export([run/3,
         format_error/1]).

-include_lib("terrain_json/include/terrain_formats.hrl").

-type options() :: #{seed := integer(),
                     duration_ms := pos_integer(),
                     faults := [terrain_lab_chaos_schedule:fault()],
                     grace_ms := non_neg_integer(),        % the live topology's grace period
                     remeasure_ms := pos_integer(),        % its re-measurement interval
                     prefix := string(),                   % of the node names
                     command := binary(),                  % the command line, for the manifest
                     io := terrain_lab_io:io()}.
-export_type([options/0]).

-define(GROUPS, [chaos_spread, chaos_pair]).
-define(START_WAIT_MS, 120000).
-define(STOP_TIMEOUT, 5000).
-define(SETTLE_MS, 1500).

%%--------------------------------------------------------------------
%% API

%% @doc Runs the chaos run of `SpecFile' into the new directory `Out'. Returns the
%% checker's verdict (also written to `Out'/checker.json).
-spec run(file:filename(), file:filename(), options()) ->
          {ok, terrain_lab_chaos_checker:verdict()} | {error, term()}.
run(SpecFile, Out, Options) ->
    terrain_lab_steps:run([fun(_) -> terrain_lab_spec:read(SpecFile) end,
                           fun(Spec) -> prepare(Spec, Out, Options) end,
                           fun(Prepared) -> with_cluster(Prepared, Out, Options) end,
                           fun(Header) -> judge(Header, Out, Options) end], none).

%% @doc A sentence for an error of a chaos run.
-spec format_error({chaos, term()}) -> iolist().
format_error({chaos, {too_few_nodes, N}}) ->
    io_lib:format("the spec has ~b node(s); a chaos run needs at least 4", [N]);
format_error({chaos, {not_converged, Seen}}) ->
    io_lib:format("the cluster did not settle before the faults (one version on every node): ~0tP", [Seen, 12]);
format_error({chaos, {history, File, Line, Why}}) ->
    io_lib:format("~ts, line ~b: ~ts", [File, Line, Why]);
format_error({chaos, {signal, Name, Signal, OsPid}}) ->
    io_lib:format("could not send SIG~ts to ~ts (OS pid ~ts)", [Signal, Name, OsPid]);
format_error({chaos, {not_running, Name}}) ->
    io_lib:format("~ts is not running", [Name]);
format_error({chaos, {placed, Name, Why}}) ->
    io_lib:format("could not start the placed group ~ts: ~0tP", [Name, Why, 12]);
format_error({chaos, Other}) ->
    io_lib:format("chaos run: ~0tP", [Other, 12]).

%%--------------------------------------------------------------------
%% Internal: before the cluster

%% The spec with the groups' predicate attribute, the model and the schedule.
prepare(#{nodes := Nodes} = Spec, Out, #{seed := Seed} = Options) when length(Nodes) >= 4 ->
    Names = lists:sort([Name || #{name := Name} <- Nodes]),
    Workers = maps:from_list([{Name, I rem 4 =/= 0} || {I, Name} <- lists:enumerate(Names)]),
    Model = #{nodes => [#{name => Name, path => Path, worker => maps:get(Name, Workers)}
                        || #{name := Name, path := Path} <- Nodes],
              racks => lists:usort([Path || #{path := Path} <- Nodes]),
              protected => lists:last(Names)},
    Bursts = terrain_lab_chaos_schedule:plan(Model, maps:with([seed, duration_ms, faults, grace_ms], Options)),
    SpecCopy = filename:join(Out, "spec.cluster"),
    case terrain_lab_spec:consult(maps:get(file, Spec)) of
        {ok, Terms} ->
            Text = [io_lib:format("~tp.~n", [T]) || T <- with_workers(Terms, Workers)],
            case terrain_lab_files:write(SpecCopy, Text) of
                ok -> {ok, #{spec => Spec, spec_copy => SpecCopy, model => Model, bursts => Bursts, seed => Seed}};
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end;
prepare(#{nodes := Nodes}, _Out, _Options) ->
    {error, {chaos, {too_few_nodes, length(Nodes)}}}.

with_workers(Terms, Workers) ->
    [case T of
         {node, Name, Opts} ->
             {node, Name, Opts#{attrs => [{chaos_worker, maps:get(Name, Workers)}
                                          | [A || {K, _} = A <- maps:get(attrs, Opts, []), K =/= chaos_worker]]}};
         {group, G, O, Children} -> {group, G, O, with_workers(Children, Workers)};
         _ -> T
     end || T <- Terms].

%%--------------------------------------------------------------------
%% Internal: the cluster's life

%% Starts the cluster, runs the clients and the nemesis, stops everything; the
%% history is closed whatever happens, with what was left after the stop as its last
%% line. Returns the history's header.
with_cluster(#{spec_copy := SpecCopy, model := Model, bursts := Bursts} = Prepared, Out, Options) ->
    #{grace_ms := Grace, remeasure_ms := Remeasure, prefix := Prefix, io := Io} = Options,
    Dir = filename:join(Out, "state"),
    {ok, Null} = file:open("/dev/null", [write]),
    Quiet = #{out => Null, err => Null},
    Reaper = terrain_lab_os:reaper(filename:join(filename:absname(Dir), "nodes") ++ "/"),
    Cleanup = {chaos_cluster, Dir},
    ok = terrain_lab_cleanup:add(Cleanup, interrupted([self()], none, Dir, Prefix, Quiet#{reaper => Reaper})),
    terrain_lab_io:progress(Io, "chaos: seed ~b, ~b faults in ~b bursts over ~b s; starting ~b nodes~n",
                            [maps:get(seed, Options), terrain_lab_chaos_schedule:count_faults(Bursts), length(Bursts),
                             maps:get(duration_ms, Options) div 1000, length(maps:get(nodes, Model))]),
    Live = #{grace => Grace, remeasure => Remeasure},
    try terrain_lab_launch:up(SpecCopy, #{prefix => Prefix, timeout => undefined, netem => "auto", live => Live},
                              Dir, Quiet) of
        {ok, Records} ->
            Header = header(Prepared, Options),
            case terrain_lab_chaos_history:start(filename:join(Out, "history.jsonl"), Header) of
                {ok, History} ->
                    Context = context(Records, Prepared, History, Out, Dir, Options#{quiet => Quiet}),
                    Result = try running(Context, Prepared, Header,
                                                 Options#{cleanup => Cleanup, dir => Dir, quiet => Quiet,
                                                          reaper => Reaper})
                             after close(Context, Dir, Prefix, Quiet)
                             end,
                    case Result of
                        ok -> {ok, Header};
                        {error, _} = Error -> Error
                    end;
                {error, _} = Error ->
                    Error
            end;
        {error, _} = Error ->
            Error
    after
        _ = stop(Dir, Prefix, Quiet),      % nothing left when it was stopped already
        terrain_lab_cleanup:remove(Cleanup),
        _ = [terrain_lab_os:reaper_done(Port) || {ok, Port} <- [Reaper]],
        ok = file:close(Null)
    end.

header(#{bursts := Bursts, model := #{protected := Protected, racks := Racks}}, Options) ->
    #{seed => maps:get(seed, Options), duration_ms => maps:get(duration_ms, Options),
      faults => maps:get(faults, Options), grace_ms => maps:get(grace_ms, Options),
      remeasure_ms => maps:get(remeasure_ms, Options), prefix => list_to_binary(maps:get(prefix, Options)),
      command => maps:get(command, Options), anchor => Protected,
      planned_faults => terrain_lab_chaos_schedule:count_faults(Bursts), bursts => length(Bursts),
      groups => [#{name => chaos_spread, count => min(3, length(Racks)), spread_depth => spread_depth(Racks),
                   worker => true},
                 #{name => chaos_pair, count => 2, spread_depth => null, worker => false}]}.

spread_depth(Racks) ->
    lists:min([length(R) || R <- Racks]).

%% The nemesis's context: the roster of the started nodes (each with its `node' line).
context(Records, #{model := Model, spec := Spec}, History, Out, Dir, #{io := Io, quiet := Quiet} = Options) ->
    Roster = ets:new(chaos_roster, [public, set]),
    true = ets:insert(Roster, [{Name, Node, binary_to_list(OsPid), alive}
                               || #{name := Name, node := Node, os_pid := OsPid} <- Records]),
    Context = #{dir => Dir, out => Out, prefix => maps:get(prefix, Options), history => History, roster => Roster,
                group_options => maps:from_list(maps:get(groups, Spec)), io => Quiet,
                min_quiet_ms => maps:get(grace_ms, Options) + 2200,
                progress => fun(Text) -> terrain_lab_io:progress(Io, "~ts", [Text]) end},
    _ = [terrain_lab_chaos_nemesis:node_line(Context, Name, up, #{path => Path, worker => Worker})
         || #{name := Name, path := Path, worker := Worker} <- maps:get(nodes, Model)],
    Context.

%% Waits for the cluster to settle, starts the groups and the clients, runs the
%% nemesis, waits for the final settling time.
running(#{roster := Roster, history := History} = Context, #{bursts := Bursts, model := Model}, Header, Options) ->
    #{dir := Dir, prefix := Prefix, quiet := Quiet, cleanup := Cleanup, grace_ms := Grace,
      remeasure_ms := Remeasure, seed := Seed} = Options,
    ok = terrain_lab_cluster_state:connect_cli(Dir),
    [Anchor] = [N || {Name, N, _, _} <- ets:tab2list(Roster), Name =:= maps:get(protected, Model)],
    terrain_lab_steps:run(
      [fun(_) -> settled([N || {_, N, _, _} <- ets:tab2list(Roster)]) end,
       fun(_) -> start_groups(Anchor, maps:get(groups, Header)) end,
       fun(_) ->
               Clients = terrain_lab_chaos_clients:start(#{history => History, roster => Roster, anchor => Anchor,
                                                           groups => ?GROUPS, seed => Seed}),
               ok = terrain_lab_cleanup:remove(Cleanup),
               ok = terrain_lab_cleanup:add(Cleanup, interrupted([self() | Clients], {History, Roster}, Dir, Prefix,
                                                                 Quiet#{reaper => maps:get(reaper, Options)})),
               try
                   ok = terrain_lab_chaos_nemesis:run(Bursts, Context),
                   Alive = length([x || {_, _, _, S} <- ets:tab2list(Roster), S =/= dead]),
                   Settle = Grace + 4000 + Remeasure * Alive,
                   Progress = maps:get(progress, Context),
                   Progress(io_lib:format("faults done; the final check in ~.1f s~n", [Settle / 1000])),
                   receive after Settle -> ok end,
                   terrain_lab_chaos_history:log(History, null, final, ok)
               after
                   terrain_lab_chaos_clients:stop(Clients)
               end
       end], none).

%% Every node a member of the live topology, all at one version.
settled(Nodes) ->
    Deadline = erlang:monotonic_time(millisecond) + ?START_WAIT_MS,
    settled(Nodes, Deadline, none).

settled(Nodes, Deadline, Last) ->
    Seen = [{N, catch erpc:call(N, terrain_lab_chaos_clients, observe_here, [], 2000)} || N <- Nodes],
    Status = [catch erpc:call(N, terrain, live_status, [], 2000) || N <- Nodes],
    Versions = lists:usort([V || {_, {V, _}} <- Seen]),
    Full = lists:all(fun(#{members := M}) -> length(M) >= length(Nodes); (_) -> false end, Status),
    case {Versions, Full, length([x || {_, {_, T}} <- Seen, T =/= undefined]) =:= length(Nodes)} of
        {[_], true, true} -> ok;
        _ ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> {error, {chaos, {not_converged, Last}}};
                false -> receive after 500 -> settled(Nodes, Deadline, Versions) end
            end
    end.

start_groups(Anchor, Groups) ->
    Start = fun(#{name := Name, count := K, spread_depth := D, worker := W}) ->
                    Spec = maps:merge(#{start => {gen_event, start, []}, count => K},
                                      maps:from_list([{spread, {depth, D}} || D =/= null]
                                                     ++ [{rebalance, 1000} || D =/= null]
                                                     ++ [{preds, [{chaos_worker, true}]} || W])),
                    case catch erpc:call(Anchor, terrain, start_placed, [Name, Spec], 30000) of
                        {ok, _} -> ok;
                        Other -> {error, {chaos, {placed, Name, Other}}}
                    end
            end,
    terrain_lab_steps:run([fun(_) -> Start(G) end || G <- Groups], none).

%% The cluster stopped, what is left recorded as the history's last line, the history
%% closed.
close(#{history := History, roster := Roster}, Dir, Prefix, Quiet) ->
    ok = resume(Roster),
    Left = stop(Dir, Prefix, Quiet),
    terrain_lab_chaos_history:log(History, null, leftover, Left),
    _ = terrain_lab_chaos_history:stop(History),
    ets:delete(Roster).

%% Stops the cluster; returns what is left afterwards: VMs of the state (those started
%% late stopped after a settling time, then waited for up to 5 s: a VM killed a moment
%% ago may not be gone yet), epmd names of the prefix, CPU
%% cgroups of the prefix.
stop(Dir, Prefix, Quiet) ->
    _ = terrain_lab_launch_stop:stop(Dir, ?STOP_TIMEOUT, #{io => Quiet, force => true}),
    _ = terrain_lab_launch_stop:stop_unrecorded(Dir, Quiet),
    %% a VM an interrupted `up --add' had asked for may still be booting: once more, a
    %% moment later
    receive after ?SETTLE_MS -> ok end,
    _ = terrain_lab_launch_stop:stop_unrecorded(Dir, Quiet),
    Marker = unicode:characters_to_binary(filename:join(filename:absname(Dir), "nodes") ++ "/"),
    Late = [iolist_to_binary(["VM ", P]) || P <- still_running(Marker, erlang:monotonic_time(millisecond) + 5000)],
    Names = case net_adm:names() of
                {ok, Registered} -> [iolist_to_binary(["epmd name ", N]) || {N, _} <- Registered,
                                                                          lists:prefix(Prefix, N)];
                {error, _} -> []
            end,
    Cgroups = [iolist_to_binary(["cgroup ", G]) || G <- filelib:wildcard("/sys/fs/cgroup/cpu/*" ++ Prefix ++ "*")],
    Late ++ Names ++ Cgroups.

%% The OS pids whose command line names `Marker', once none does or at the deadline.
still_running(Marker, Deadline) ->
    Pids = [P || "/proc/" ++ P <- filelib:wildcard("/proc/[0-9]*"), P =/= os:getpid(),
                 case file:read_file("/proc/" ++ P ++ "/cmdline") of
                     {ok, Cmdline} -> binary:match(Cmdline, Marker) =/= nomatch;
                     {error, _} -> false
                 end],
    case Pids =/= [] andalso erlang:monotonic_time(millisecond) < Deadline of
        true -> receive after 100 -> still_running(Marker, Deadline) end;
        false -> Pids
    end.

%% Stopped VMs (SIGSTOP) get SIGCONT, so that they can halt when asked.
resume(Roster) ->
    _ = [terrain_lab_os:signal(OsPid, "CONT") || {_, _, OsPid, stopped} <- ets:tab2list(Roster)],
    ok.

%% SIGTERM: the run and its clients suspended, the stopped VMs resumed, the cluster
%% stopped, the history closed (`Running': `none' before it is open, else `{History,
%% Roster}').
interrupted(Pids, Running, Dir, Prefix, #{reaper := Reaper} = QuietIo) ->
    Quiet = maps:remove(reaper, QuietIo),
    fun() ->
            _ = [catch erlang:suspend_process(P) || P <- Pids],
            _ = [resume(Roster) || {_, Roster} <- [Running]],
            Left = stop(Dir, Prefix, Quiet),
            _ = [terrain_lab_chaos_history:log(History, null, leftover, Left) || {History, _} <- [Running]],
            _ = [terrain_lab_chaos_history:stop(History) || {History, _} <- [Running]],
            %% the VM halts next: the reaper need not look for anything (its scan would
            %% outlive the CLI by two seconds)
            _ = [terrain_lab_os:reaper_done(Port) || {ok, Port} <- [Reaper]],
            io:format(standard_error, "terrain chaos: interrupted; ~ts; the history so far is in ~ts~n",
                      [case Left of
                           [] -> "its cluster was stopped";
                           _ -> io_lib:format("left: ~ts", [lists:join(", ", Left)])
                       end, filename:join(filename:dirname(Dir), "history.jsonl")])
    end.

%%--------------------------------------------------------------------
%% Internal: the verdict

judge(_Header, Out, #{io := Io} = Options) ->
    History = filename:join(Out, "history.jsonl"),
    case terrain_lab_chaos_history:read(History) of
        {ok, Header, Lines} ->
            Verdict = terrain_lab_chaos_checker:check(Header, Lines),
            Document = maps:merge(maps:with([faults, violations, convergence_ms, bursts, fault_errors, crashes,
                                             divergent_versions, acknowledged], Verdict),
                                  #{format => ?TERRAIN_FORMAT_CHECKER, seed => maps:get(seed, Options),
                                    history => <<"history.jsonl">>, grace_ms => maps:get(grace_ms, Options),
                                    duration_ms => maps:get(duration_ms, Options),
                                    planned_faults => maps:get(<<"planned_faults">>, Header),
                                    load_average => load_average(Lines), finished_at => terrain_lab_run:timestamp()}),
            Parameters = #{command => maps:get(command, Options), seed => maps:get(seed, Options)},
            terrain_lab_steps:run(
              [fun(_) -> terrain_lab_files:write_json(filename:join(Out, "checker.json"), Document) end,
               fun(_) -> terrain_lab_run:write_manifest(Out, checker,
                                                        [#{kind => checker, file => <<"checker.json">>,
                                                           parameters => Parameters},
                                                         #{kind => chaos_history, file => <<"history.jsonl">>,
                                                           parameters => Parameters}]) end,
               fun(_) -> terrain_lab_io:progress(Io, "chaos: judged ~b history lines~n", [length(Lines)]),
                         {ok, Verdict} end], none);
        {error, _} = Error ->
            Error
    end.

%% The mean of the one-minute load averages taken at each burst's start.
load_average(Lines) ->
    case [L || #{<<"op">> := <<"burst_start">>, <<"load">> := L} <- Lines, is_number(L)] of
        [] -> null;
        Loads -> round(100 * lists:sum(Loads) / length(Loads)) / 100
    end.
