%% @private
%% @doc The stop path of detached clusters (terrain_lab_launch): `terrain down' stops
%% exactly the recorded nodes, by node name, falling back to the recorded OS pid
%% (checked to still be that node's VM before it is killed), and removes the state.
%%
%% The nodes are those of `cluster.json' and, besides, every node named by a pid file
%% that `cluster.json' does not list: a VM writes its pid file first thing, so a node
%% whose start was interrupted before it was recorded (`up' or `up --add' stopped by
%% SIGINT or SIGKILL) is stopped too. Without a readable `cluster.json' the pid files
%% alone name the nodes. Last, a VM of this machine whose command line still names a
%% pid file of this state directory (it was started for it, but had not written its
%% pid file yet when the state was read) is killed as well ({@link stop_unrecorded/2}).
-module(terrain_lab_launch_stop).

%% API
-export([stop/3,
         stop_nodes/4,
         still_running/1,
         running/2,
         remove_cgroups/1,
         stop_unrecorded/2]).

-export_type([stop_result/0]).

%% What became of each recorded node: "stopped", "was not running", "killed (OS pid
%% P)" or "still running (...)".
-type stop_result() :: {NodeName :: binary(), How :: string()}.

%%--------------------------------------------------------------------
%% API
%% @doc Stops every node recorded in `Dir' (or, without a readable `cluster.json',
%% named by a pid file, which `io''s `err' device then says) and says what became of
%% each; removes the state unless a node is still running, or with `force' anyway.
%% With neither, what a start interrupted before it recorded anything left is removed
%% (terrain_lab_cluster_state:leftovers/1), and said. `Timeout' is the time a node gets to halt before it is killed.
-spec stop(file:filename(), pos_integer(), #{io := terrain_lab_io:io(), force := boolean()}) ->
          {ok, [stop_result()]} | {error, term()}.
stop(Dir, Timeout, #{io := Io, force := Force}) ->
    case read_state_or_pid_files(Dir, Io) of
        {error, {cluster_state, {Bad, _, _}}} when Force, Bad =:= corrupt_state orelse Bad =:= bad_state
                                                    orelse Bad =:= unknown_format ->
            terrain_lab_io:progress(Io, "no node is named by a pid file; removing the unreadable state in ~ts~n",
                                    [Dir]),
            terrain_lab_cluster_state:remove(Dir),
            {ok, []};
        {ok, State} ->
            case terrain_lab_cluster_state:connect_cli(Dir) of
                ok ->
                    Results = stop_nodes(State, Timeout, Dir, Io) ++ stop_unrecorded(Dir, Io),
                    ok = remove_cgroups(State),
                    Keep = died_before(State, Results, Dir),
                    _ = (Force orelse still_running(Results) =:= [])
                        andalso terrain_lab_cluster_state:remove(Dir, Keep),
                    ok = say_kept_logs(Keep, Dir, Io),
                    {ok, Results};
                {error, _} = Error ->
                    Error
            end;
        {error, {cluster_state, {no_cluster, _}}} = Error ->
            remove_leftovers(Dir, Io, Error);
        {error, _} = Error ->
            Error
    end.

%% No cluster.json and no pid file: what an interrupted start left (its cookie, a stale
%% lock, an empty `nodes' directory) is removed, with any VM started for this state
%% directory that nothing names; without such leftovers, `Error' (nothing is recorded).
remove_leftovers(Dir, Io, Error) ->
    case terrain_lab_cluster_state:leftovers(Dir) of
        [] ->
            Error;
        Left ->
            Strays = stop_unrecorded(Dir, Io),
            terrain_lab_io:progress(Io, "no cluster is recorded in ~ts; removing what an interrupted start left "
                                    "there: ~ts~n", [Dir, lists:join(", ", Left)]),
            ok = terrain_lab_cluster_state:remove(Dir),
            {ok, Strays}
    end.

%% The spec names of the nodes whose VMs had stopped before `down' and wrote into
%% their logs: those logs say why, and are kept.
died_before(#{<<"nodes">> := Records}, Results, Dir) ->
    Gone = [N || {N, "was not running" ++ _} <- Results],
    Logs = [filename:basename(F, ".log") || F <- terrain_lab_cluster_state:vm_logs(Dir), filelib:file_size(F) > 0],
    [Name || #{<<"name">> := Name} = R <- Records,
             lists:member(label(R), Gone), lists:member(binary_to_list(Name), Logs)];
died_before(_StateFromPidFiles, _Results, _Dir) ->
    [].

say_kept_logs([], _Dir, _Io) ->
    ok;
say_kept_logs(Names, Dir, Io) ->
    terrain_lab_io:progress(Io, "kept the log~s of ~ts, which had stopped before 'down': ~ts~n",
                            [[$s || length(Names) > 1], lists:join(", ", Names),
                             lists:join(", ", [filename:join([Dir, "nodes", <<N/binary, ".log">>]) || N <- Names])]).

%% @doc The nodes that {@link stop/3} could not stop.
-spec still_running([stop_result()]) -> [binary()].
still_running(Results) ->
    [N || {N, "still running" ++ _} <- Results].

%% @doc The names of the nodes recorded in `Dir' (or named by its pid files) whose VMs
%% still run; `{error, _}' when there is no state to read.
-spec running(file:filename(), terrain_lab_io:io() | undefined) -> {ok, [string()]} | {error, term()}.
running(Dir, Io) ->
    case read_state_or_pid_files(Dir, Io) of
        {ok, State} -> {ok, [binary_to_list(label(N)) || N <- maps:get(<<"nodes">>, State), vm_running(N, Dir)]};
        {error, _} = Error -> Error
    end.

%% @doc Stops the nodes of `State' at once (each halted, else killed after `Timeout'
%% ms) and says what became of each, in order.
-spec stop_nodes(map(), pos_integer(), file:filename(), terrain_lab_io:io()) -> [stop_result()].
stop_nodes(#{<<"nodes">> := Nodes}, Timeout, Dir, Io) ->
    Self = self(),
    Workers = [spawn_monitor(fun() -> Self ! {self(), stop_node(Node, Timeout, Dir)} end) || Node <- Nodes],
    Results = terrain_lab_launch:collect(Workers, "down", Io),
    [case Result of
         {error, {crashed, Why}} -> {label(Node), lists:flatten(io_lib:format("still running (~0p)", [Why]))};
         _ -> Result
     end || {Node, Result} <- lists:zip(Nodes, Results)].

%% @doc The CPU cgroups of the recorded nodes (terrain_lab_cgroup), once they are stopped.
-spec remove_cgroups(map()) -> ok.
remove_cgroups(#{<<"cluster">> := Cluster, <<"nodes">> := Nodes}) ->
    terrain_lab_cgroup:remove(binary_to_atom(Cluster), [hd(string:split(binary_to_list(N), "@"))
                                                        || #{<<"node">> := N} <- Nodes, is_binary(N)]);
remove_cgroups(_StateFromPidFiles) ->
    ok.

%% @doc Kills the VMs of this machine started for the state directory `Dir' that no
%% record or pid file names: their command line names a pid file in `Dir/nodes' (as
%% terrain_lab_vm starts every detached VM), so they are this state's and no other's.
-spec stop_unrecorded(file:filename(), terrain_lab_io:io() | undefined) -> [stop_result()].
stop_unrecorded(Dir, Io) ->
    Marker = unicode:characters_to_binary(filename:join(filename:absname(Dir), "nodes") ++ "/"),
    Pids = [P || P <- list_pids(), P =/= os:getpid(), names(P, Marker)],
    _ = Pids =/= [] andalso Io =/= undefined andalso
        terrain_lab_io:progress(Io, "~b VM~s started for ~ts named by no record or pid file; killing ~ts~n",
                                [length(Pids), [$s || length(Pids) > 1], Dir,
                                 case Pids of [_] -> "it"; _ -> "them" end]),
    [{list_to_binary("OS pid " ++ P), case terrain_lab_os:kill(P) of
                                          true -> "killed (a VM of this state that no record named)";
                                          false -> "was not running"
                                      end} || P <- Pids].

list_pids() ->
    case file:list_dir("/proc") of
        {ok, Names} -> [N || N <- Names, N =/= [], lists:all(fun(C) -> C >= $0 andalso C =< $9 end, N)];
        {error, _} -> []
    end.

names(OsPid, Marker) ->
    case file:read_file("/proc/" ++ OsPid ++ "/cmdline") of
        {ok, Cmdline} -> binary:match(Cmdline, Marker) =/= nomatch;
        {error, _} -> false
    end.

%%--------------------------------------------------------------------
%% Internal functions

%% The recorded state; when cluster.json is missing (an `up' that was killed halfway)
%% or cannot be read, but pid files are there, a state made from the pid files (said
%% on `Io''s err device, when given).
read_state_or_pid_files(Dir, Io) ->
    case terrain_lab_cluster_state:read(Dir) of
        {ok, State} ->
            {ok, with_unrecorded(State, Dir, Io)};
        {error, Why} = Error ->
            case terrain_lab_cluster_state:pid_files(Dir) of
                [] ->
                    Error;
                Files ->
                    _ = Io =/= undefined andalso
                        terrain_lab_io:progress(Io, "~ts; stopping the ~b nodes named by the pid files in ~ts~n",
                                                [case Why of
                                                     {cluster_state, {no_cluster, _}} -> "no cluster.json";
                                                     _ -> terrain_lab:format_error(Why)
                                                 end, length(Files), filename:join(Dir, "nodes")]),
                    {ok, #{<<"nodes">> => [pid_file_record(F) || F <- Files]}}
            end
    end.

%% The state with the nodes that only a pid file names (a start interrupted before
%% the node was recorded), said on `Io''s err device when given.
with_unrecorded(#{<<"nodes">> := Records} = State, Dir, Io) ->
    Recorded = [N || #{<<"name">> := N} <- Records],
    case [pid_file_record(F) || F <- terrain_lab_cluster_state:pid_files(Dir),
                                not lists:member(list_to_binary(filename:basename(F, ".pid")), Recorded)] of
        [] ->
            State;
        Strays ->
            _ = Io =/= undefined andalso
                terrain_lab_io:progress(Io, "~ts: not in cluster.json but named by a pid file (a start that was "
                                        "interrupted); stopping ~ts too~n",
                                        [lists:join(", ", [label(S) || S <- Strays]),
                                         case Strays of [_] -> "it"; _ -> "them" end]),
            State#{<<"nodes">> := Records ++ Strays}
    end.

pid_file_record(File) ->
    Name = list_to_binary(filename:basename(File, ".pid")),
    case terrain_lab_vm:read_pid_file(File) of
        {ok, OsPid, undefined} -> #{<<"node">> => undefined, <<"name">> => Name, <<"os_pid">> => list_to_binary(OsPid)};
        {ok, OsPid, Node} ->
            #{<<"node">> => list_to_binary(Node), <<"name">> => Name, <<"os_pid">> => list_to_binary(OsPid)};
        error -> #{<<"node">> => undefined, <<"name">> => Name, <<"os_pid">> => null}
    end.

%% Is this recorded node's VM still running? Checked by its OS pid, which must still be
%% the VM started for this node (terrain_lab_vm:alive/2).
vm_running(#{<<"name">> := _} = Record, Dir) ->
    terrain_lab_vm:alive(terrain_lab_vm:from_record(Record, Dir), 10000) =:= true;
vm_running(_, _) ->
    false.

label(#{<<"node">> := Node}) when is_binary(Node) -> Node;
label(#{<<"name">> := Name}) -> Name.

%% Stops the recorded node (terrain_lab_vm:stop/2: halted by its full name, else its
%% OS process killed while it is still that node's VM) and says what became of it; the
%% files of a node on another host are removed there unless it still runs.
stop_node(Record, Timeout, Dir) ->
    case never_started(Record, Dir) of
        true -> {label(Record), "was not running (it never started: no OS pid, no pid file)"};
        false -> stop_started(Record, Timeout, Dir)
    end.

%% A node recorded by `up --add' before its VM started, whose start never came (the
%% command was stopped first): no OS pid, no pid file, and its name does not answer.
never_started(#{<<"os_pid">> := null, <<"name">> := Name, <<"node">> := Node} = Record, Dir)
  when is_binary(Node), not is_map_key(<<"host">>, Record) ->
    not filelib:is_regular(terrain_lab_cluster_state:pid_file(Dir, binary_to_atom(Name)))
        andalso not net_kernel:connect_node(binary_to_atom(Node));
never_started(_Record, _Dir) ->
    false.

stop_started(Record, Timeout, Dir) ->
    Vm = terrain_lab_vm:from_record(Record, Dir),
    How = stop_text(terrain_lab_vm:stop(Vm, Timeout), Vm),
    ok = terrain_lab_hosts:clean_remote(Record, lists:prefix("still running", How), Dir),
    {label(Record), How}.

stop_text(stopped, _Vm) -> "stopped";
stop_text({stopped, job_step}, _Vm) -> "stopped with its job step";
stop_text(not_running, _Vm) -> "was not running";
stop_text({not_running, job_step_ended}, _Vm) -> "was not running (its job step had ended)";
stop_text({not_running, no_os_pid}, _Vm) -> "was not running (no OS pid recorded)";
stop_text({killed, OsPid}, #{host := Host}) -> "killed (OS pid " ++ OsPid ++ " on " ++ Host ++ ")";
stop_text({killed, OsPid}, #{}) -> "killed (OS pid " ++ OsPid ++ ")";
stop_text({still_running, no_os_pid}, _Vm) -> "still running (no OS pid recorded)";
stop_text({still_running, Why}, _Vm) -> "still running (" ++ lists:flatten(terrain_lab_ssh:format_error(Why)) ++ ")".
