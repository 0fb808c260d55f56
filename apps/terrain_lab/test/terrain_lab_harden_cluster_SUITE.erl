%% The third hardening pass for the commands that start or change a detached cluster
%% (issue 33's table): `up --add', `down --nodes', `netem move', `choose --count
%% --spread', `up --live', `topology load' and `experiment scale', through the real
%% escript. Concurrent changes are refused by the state directory's lock; checks come
%% before any name or VM is made; the state and its spec never name a node that is not
%% there; SIGTERM and SIGKILL leave nothing that `terrain down' cannot stop.
-module(terrain_lab_harden_cluster_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1]).
-export([usage_errors_exit_2_before_anything_starts/0, usage_errors_exit_2_before_anything_starts/1,
         up_add_checks_before_anything_starts/0, up_add_checks_before_anything_starts/1,
         concurrent_changes_are_refused_and_the_state_kept/0, concurrent_changes_are_refused_and_the_state_kept/1,
         down_nodes_names_and_rejoin/0, down_nodes_names_and_rejoin/1,
         netem_move_bad_names_are_sentences/0, netem_move_bad_names_are_sentences/1,
         topology_load_of_a_foreign_tree_is_refused/0, topology_load_of_a_foreign_tree_is_refused/1,
         sigterm_of_up_add_records_its_nodes/0, sigterm_of_up_add_records_its_nodes/1,
         down_removes_the_whole_state/0, down_removes_the_whole_state/1,
         sigterm_of_experiment_scale_stops_its_vms/0, sigterm_of_experiment_scale_stops_its_vms/1,
         sigkill_of_experiment_scale_stops_its_vms/0, sigkill_of_experiment_scale_stops_its_vms/1]).

suite() ->
    [{timetrap, {minutes, 5}}].

all() ->
    [usage_errors_exit_2_before_anything_starts, up_add_checks_before_anything_starts,
     concurrent_changes_are_refused_and_the_state_kept, down_nodes_names_and_rejoin,
     netem_move_bad_names_are_sentences, topology_load_of_a_foreign_tree_is_refused,
     sigterm_of_up_add_records_its_nodes, down_removes_the_whole_state,
     sigterm_of_experiment_scale_stops_its_vms, sigkill_of_experiment_scale_stops_its_vms].

init_per_suite(Config) ->
    Dir = ?config(priv_dir, Config),
    Spec = filename:join(Dir, "small.cluster"),
    ok = file:write_file(Spec, "{cluster, small, #{latency => 20000}}.\n"
                               "{group, r1, #{latency => 250}, [{node, a, #{schedulers => 1}}, "
                               "{node, b, #{schedulers => 1}}]}.\n"
                               "{group, r2, #{latency => 250}, [{node, c, #{schedulers => 1}}]}.\n"),
    [{spec, Spec} | Config].

end_per_suite(Config) ->
    Config.

%%--------------------------------------------------------------------
%% Helpers

escript(Config, Args) ->
    terrain_lab_test_escript:run(?config(priv_dir, Config), Args).

shell(Dir, Line) ->
    terrain_lab_test_escript:shell(Dir, Line).

found(Text, Part) ->
    string:find(Text, Part) =/= nomatch.

%% A case's own prefix and state directory.
prefix(Case) ->
    "hc" ++ os:getpid() ++ Case ++ "_".

state(Config, Case) ->
    filename:join(?config(priv_dir, Config), Case ++ "_state").

write(Config, Name, Text) ->
    File = filename:join(?config(priv_dir, Config), Name),
    ok = file:write_file(File, Text),
    File.

%% Starts the small cluster (3 nodes, emulated links) and runs Fun(State); stops it
%% after, and checks that no VM of its state directory runs then.
with_cluster(Config, Case, Fun) ->
    State = state(Config, Case),
    {0, _, _} = escript(Config, ["up", "--state-dir", State, "--prefix", prefix(Case), ?config(spec, Config)]),
    try Fun(State)
    after
        _ = escript(Config, ["down", "--state-dir", State, "--force"]),
        ?assertEqual([], vms_of(State))
    end.

%% The OS pids of the VMs started for a state directory: their command line names its
%% pid files.
vms_of(State) ->
    Marker = list_to_binary(filename:join(State, "nodes") ++ "/"),
    {ok, Names} = file:list_dir("/proc"),
    [P || P <- Names, lists:all(fun(C) -> C >= $0 andalso C =< $9 end, P),
          case file:read_file("/proc/" ++ P ++ "/cmdline") of
              {ok, Cmdline} -> binary:match(Cmdline, Marker) =/= nomatch;
              {error, _} -> false
          end].

%% The node names of cluster.json and of spec.cluster (when there is one).
recorded(State) ->
    {ok, #{<<"nodes">> := Nodes}} = terrain_json:read_file(filename:join(State, "cluster.json")),
    lists:sort([binary_to_list(N) || #{<<"name">> := N} <- Nodes]).

spec_nodes(State) ->
    {ok, Spec} = terrain_lab_spec:read(filename:join(State, "spec.cluster")),
    lists:sort([atom_to_list(N) || N <- terrain_lab_spec:node_names(Spec)]).

files(State) ->
    [file:read_file(filename:join(State, F)) || F <- ["cluster.json", "spec.cluster"]].

%%--------------------------------------------------------------------
%% Cases

usage_errors_exit_2_before_anything_starts() ->
    [{doc, "Rows 38, 40, 43, 50, 59, 63: live options beyond a timer or without --live, --spread without --at or "
           "naming no level, --count with --pick, scale's --prefix and --latency: exit 2 with a sentence at once, "
           "no state directory made, no VM started; the documented levels same_node and anywhere pass the check."}].
usage_errors_exit_2_before_anything_starts(Config) ->
    Dir = ?config(priv_dir, Config),
    Spec = ?config(spec, Config),
    State = state(Config, "usage"),
    Up = ["up", Spec, "--prefix", prefix("usage"), "--state-dir", State],
    Pred = "{vm_schedulers_online, ge, 1}",
    Cases = [{Up ++ ["--live", "--live-grace", "99999999999999999999"], "an integer from 0 to 4294967295"},
             {Up ++ ["--live", "--live-remeasure", "4294967296"], "an integer from 0 to 4294967295"},
             {Up ++ ["--live-grace", "5000"], "--live-grace and --live-remeasure go with --live"},
             {["choose", "--state-dir", State, "--count", "3", "--spread", "depth:1", Pred], "give the node"},
             {["choose", "--state-dir", State, "--at", "a", "--count", "3", "--spread", "ok", Pred],
              "a level name (same_node, very_near, near, far, very_far, anywhere) or depth:D, got 'ok'"},
             {["choose", "--state-dir", State, "--count", "2", "--pick", "first", Pred], "give one of them"},
             {["experiment", "scale", "--max-nodes", "16", "--out", filename:join(Dir, "x0"), "--prefix", "ü"],
              "ASCII letters"},
             {["experiment", "scale", "--max-nodes", "16", "--out", filename:join(Dir, "x0"), "--prefix",
               lists:duplicate(201, $p)], "at most 200"},
             {["experiment", "scale", "--max-nodes", "16", "--out", filename:join(Dir, "x0"), "--latency",
               "99999999999999999999999,1,1"], "from 1 to 10000000"}],
    [begin
         {Status, Out, Err} = escript(Config, Args),
         ?assertEqual({Args, 2, ""}, {Args, Status, Out}),
         ?assert(found(Err, Expected), {Args, Err}),
         ?assertNot(found(Err, "internal error"))
     end || {Args, Expected} <- Cases],
    %% the levels docs/DISTANCES.md documents pass the option check (then: no cluster, exit 1)
    [{1, "", _} = escript(Config, ["choose", "--state-dir", State, "--at", "a", "--count", "2", "--spread", L, Pred])
     || L <- ["same_node", "anywhere", "very_near", "depth:2"]],
    ?assertNot(filelib:is_dir(State)),
    ?assertNot(filelib:is_dir(filename:join(Dir, "x0"))),
    ?assertEqual([], vms_of(State)).

up_add_checks_before_anything_starts() ->
    [{doc, "Rows 9, 13, 31, 51, 54: a spec of 200,000 nodes is refused by the guard before a name is made (well "
           "under the time consulting it takes), a device is not a spec, a name too long for an atom, a name "
           "registered with epmd and a node the cluster has are refused with a sentence; the state and its spec "
           "are unchanged and no VM started."}].
up_add_checks_before_anything_starts(Config) ->
    with_cluster(Config, "chk", fun(State) ->
        Before = files(State),
        Many = write(Config, "many.cluster", ["{group, r2, #{}, [",
                                              lists:join(", ", [io_lib:format("{node, m~b, #{schedulers => 1}}", [I])
                                                                || I <- lists:seq(1, 200000)]), "]}.\n"]),
        T0 = erlang:monotonic_time(millisecond),
        {1, "", TooMany} = escript(Config, ["up", "--add", Many, "--state-dir", State]),
        ct:pal("200,000 nodes refused in ~b ms: ~ts", [erlang:monotonic_time(millisecond) - T0, TooMany]),
        ?assert(found(TooMany, "names more than 100000 nodes")),
        {1, "", Device} = escript(Config, ["up", "--add", "/dev/zero", "--state-dir", State]),
        ?assert(found(Device, "not a regular file")),
        Long = write(Config, "long.cluster", ["{group, r2, #{}, [{node, ", lists:duplicate(250, $n),
                                              ", #{schedulers => 1}}]}.\n"]),
        {1, "", TooLong} = escript(Config, ["up", "--add", Long, "--state-dir", State]),
        ?assert(found(TooLong, "a node name has at most 255")),
        Existing = write(Config, "existing.cluster", "{group, r1, #{}, [{node, a, #{schedulers => 1}}]}.\n"),
        {1, "", Has} = escript(Config, ["up", "--add", Existing, "--state-dir", State]),
        ?assert(found(Has, "the spec to add names a, which the cluster has already")),
        %% a VM registered with epmd under the name the new node would take
        Stale = prefix("chk") ++ "s",
        {ok, Peer, _} = peer:start(#{name => list_to_atom(Stale), connection => standard_io}),
        try
            StaleSpec = write(Config, "stale.cluster", "{group, r2, #{}, [{node, s, #{schedulers => 1}}]}.\n"),
            T1 = erlang:monotonic_time(millisecond),
            {1, "", Clash} = escript(Config, ["up", "--add", StaleSpec, "--state-dir", State]),
            ?assert(erlang:monotonic_time(millisecond) - T1 < 30000),
            ?assert(found(Clash, "is already registered with epmd")),
            ?assert(found(Clash, "nothing was started"))
        after
            peer:stop(Peer)
        end,
        ?assertEqual(Before, files(State)),
        ?assertEqual(3, length(vms_of(State)))
    end).

concurrent_changes_are_refused_and_the_state_kept() ->
    [{doc, "Row 18: up --add while another command holds the state's lock is refused with a sentence naming it "
           "(exit 1), nothing added; two up --add at once: when they overlap one is refused, and either way "
           "cluster.json, spec.cluster and the running VMs name the same nodes; down leaves no VM."}].
concurrent_changes_are_refused_and_the_state_kept(Config) ->
    Dir = ?config(priv_dir, Config),
    One = write(Config, "one.cluster", "{group, r1, #{}, [{node, d, #{schedulers => 1}}]}.\n"),
    Two = write(Config, "two.cluster", "{group, r2, #{}, [{node, e, #{schedulers => 1}}]}.\n"),
    with_cluster(Config, "cc", fun(State) ->
        Line = lists:flatten(["\"$T\" up --add ", One, " --state-dir ", State, " >/dev/null 2>", Dir, "/cc1.err & ",
                              "P=$!; \"$T\" up --add ", Two, " --state-dir ", State, " >/dev/null 2>", Dir,
                              "/cc2.err; S2=$?; wait $P; echo $? $S2"]),
        %% a change while another command holds the lock (this test's VM, alive) is refused, nothing changed
        Lock = filename:join(State, "up.lock"),
        ok = file:write_file(Lock, os:getpid()),
        {1, _, Held} = escript(Config, ["up", "--add", One, "--state-dir", State]),
        ?assert(found(Held, "another terrain command (OS pid " ++ os:getpid())),
        ?assertEqual(3, length(recorded(State))),
        ok = file:delete(Lock),
        %% two at once: when they overlap the second is refused; either way the state is whole
        {0, Statuses, _} = shell(Dir, Line),
        {ok, E1} = file:read_file(filename:join(Dir, "cc1.err")),
        {ok, E2} = file:read_file(filename:join(Dir, "cc2.err")),
        ct:pal("~ts: ~ts~n~ts", [Statuses, E1, E2]),
        Added = case string:trim(Statuses) of
                    "0 0" -> 2;                     % one finished before the other began
                    S when S =:= "0 1"; S =:= "1 0" ->
                        ?assert(found(binary_to_list(<<E1/binary, E2/binary>>), "another terrain command (OS pid ")),
                        1
                end,
        ?assertEqual(3 + Added, length(recorded(State))),
        ?assertEqual(recorded(State), spec_nodes(State)),
        ?assertEqual(3 + Added, length(vms_of(State)))
    end).

down_nodes_names_and_rejoin() ->
    [{doc, "Rows 41, 55, 56: down --nodes '' and ',,,' and a full name the cluster does not have: exit 1 with a "
           "sentence, nothing stopped; a node stopped by down --nodes leaves cluster.json and spec.cluster and "
           "can be added again."}].
down_nodes_names_and_rejoin(Config) ->
    Back = write(Config, "back.cluster", "{group, r2, #{}, [{node, c, #{schedulers => 1}}]}.\n"),
    with_cluster(Config, "dn", fun(State) ->
        [begin
             {1, "", Err} = escript(Config, ["down", "--nodes", Names, "--state-dir", State]),
             ?assert(found(Err, Expected), Err)
         end || {Names, Expected} <- [{"", "names no node"}, {",,,", "names no node"},
                                      {"foo@bar", "unknown node foo@bar"}]],
        ?assertEqual(3, length(vms_of(State))),
        {0, Out, _} = escript(Config, ["down", "--nodes", "c", "--state-dir", State]),
        ?assert(found(Out, "stopped")),
        ?assertEqual(["a", "b"], recorded(State)),
        ?assertEqual(["a", "b"], spec_nodes(State)),
        {0, Again, _} = escript(Config, ["up", "--add", Back, "--state-dir", State]),
        ?assert(found(Again, prefix("dn") ++ "c@")),
        ?assertEqual(["a", "b", "c"], recorded(State)),
        ?assertEqual(recorded(State), spec_nodes(State))
    end).

netem_move_bad_names_are_sentences() ->
    [{doc, "Rows 32, 33, 34, 57: netem move of a group, of a full name the cluster does not have, into a group "
           "name of 300 characters: exit 1 with a sentence, the spec unchanged; netem move without its "
           "arguments: exit 2 naming move NODE GROUP; a good move still works."}].
netem_move_bad_names_are_sentences(Config) ->
    with_cluster(Config, "mv", fun(State) ->
        Before = files(State),
        [begin
             {1, "", Err} = escript(Config, ["netem", "move", Node, Group, "--state-dir", State]),
             ?assert(found(Err, Expected), Err),
             ?assertNot(found(Err, "internal error"))
         end || {Node, Group, Expected} <- [{"r1", "r2", "r1 names 2 nodes"},
                                            {"foo@bar", "r2", "unknown node foo@bar"},
                                            {"a", lists:duplicate(300, $g), "a group name has at most 255"}]],
        ?assertEqual(Before, files(State)),
        {2, "", Usage} = escript(Config, ["netem", "move", "--state-dir", State]),
        ?assert(found(Usage, "move NODE GROUP")),
        {0, "moved a to r2\n", _} = escript(Config, ["netem", "move", "a", "r2", "--state-dir", State])
    end).

topology_load_of_a_foreign_tree_is_refused() ->
    [{doc, "Row 42: topology load of a tree none of whose nodes is in the cluster: exit 1 naming both, and "
           "every node keeps its tree (choose --spread still takes one node per rack)."}].
topology_load_of_a_foreign_tree_is_refused(Config) ->
    Foreign = write(Config, "foreign.term", "{network, root, [{network, x, [{node, s1r1n1}, {node, s1r1n2}]}]}.\n"),
    with_cluster(Config, "tl", fun(State) ->
        {1, "", Err} = escript(Config, ["topology", "load", Foreign, "--state-dir", State]),
        ?assert(found(Err, "none of the 2 nodes of " ++ Foreign)),
        ?assert(found(Err, "nothing was loaded")),
        %% the spec's tree still holds: one node per rack (a tree without the nodes gives a and b)
        {0, Spread, _} = escript(Config, ["choose", "--state-dir", State, "--at", "a", "--count", "2", "--spread",
                                          "depth:1", "{vm_schedulers_online, ge, 1}"]),
        ?assertEqual([prefix("tl") ++ "a", prefix("tl") ++ "c"],
                     [hd(string:split(L, "@")) || L <- string:lexemes(Spread, "\n")])
    end).

sigterm_of_up_add_records_its_nodes() ->
    [{doc, "Row 17: SIGTERM of up --add once its first VM has started: exit 143, a sentence naming the nodes "
           "and the command that stops them; cluster.json lists them, and down stops every VM."}].
sigterm_of_up_add_records_its_nodes(Config) ->
    Dir = ?config(priv_dir, Config),
    Add = write(Config, "three.cluster", "{group, r2, #{}, [{node, t1, #{schedulers => 1}}, "
                                         "{node, t2, #{schedulers => 1}}, {node, t3, #{schedulers => 1}}]}.\n"),
    State = state(Config, "st"),
    {0, _, _} = escript(Config, ["up", "--state-dir", State, "--prefix", prefix("st"), ?config(spec, Config)]),
    Line = lists:flatten(["\"$T\" up --add ", Add, " --state-dir ", State, " >/dev/null & P=$!; ",
                          "for i in $(seq 600); do ls ", State, "/nodes | grep -q '^t' && break; sleep 0.05; done; ",
                          "kill -TERM $P; wait $P; echo $?"]),
    {0, Status, Err} = shell(Dir, Line),
    ct:pal("~ts~ts", [Status, Err]),
    ?assertEqual("143\n", Status),
    ?assert(found(Err, "'terrain down --nodes t1,t2,t3 --state-dir " ++ State)),
    ?assertEqual(["a", "b", "c", "t1", "t2", "t3"], recorded(State)),
    {0, _, _} = escript(Config, ["down", "--state-dir", State]),
    ?assertEqual([], vms_of(State)),
    ?assertNot(filelib:is_dir(State)).

down_removes_the_whole_state() ->
    [{doc, "Row 23: after up --add and netem move (spec.cluster), and with a stale up.lock of a process that is "
           "gone, down removes the whole state directory; so does down --nodes of the last nodes."}].
down_removes_the_whole_state(Config) ->
    Add = write(Config, "f.cluster", "{group, r2, #{}, [{node, f, #{schedulers => 1}}]}.\n"),
    State = state(Config, "rm"),
    {0, _, _} = escript(Config, ["up", "--state-dir", State, "--prefix", prefix("rm"), ?config(spec, Config)]),
    {0, _, _} = escript(Config, ["up", "--add", Add, "--state-dir", State]),
    {0, _, _} = escript(Config, ["netem", "move", "f", "r1", "--state-dir", State]),
    ok = file:write_file(filename:join(State, "up.lock"), "999999999"),    % no such process
    {0, _, _} = escript(Config, ["down", "--state-dir", State]),
    ?assertNot(filelib:is_dir(State)),
    {0, _, _} = escript(Config, ["up", "--state-dir", State, "--prefix", prefix("rm"), ?config(spec, Config)]),
    {0, _, _} = escript(Config, ["down", "--nodes", "a,b,c", "--state-dir", State]),
    ?assertNot(filelib:is_dir(State)),
    ?assertEqual([], vms_of(State)).

sigterm_of_experiment_scale_stops_its_vms() ->
    [{doc, "Rows 16, 64: SIGTERM of experiment scale while its VMs start: exit 143, every VM stopped, the user "
           "told what is kept; the run directory has its manifest (kind scale) and a partial scale.json."}].
sigterm_of_experiment_scale_stops_its_vms(Config) ->
    {Out, State, Status, Err} = interrupted_scale(Config, "sc", "TERM"),
    ?assertEqual("143\n", Status),
    ?assert(found(Err, "interrupted at 16 nodes; its cluster was stopped")),
    timer:sleep(2000),
    ?assertEqual([], vms_of(State)),
    {ok, #{<<"kind">> := <<"scale">>}} = terrain_json:read_file(filename:join(Out, "manifest.json")),
    {ok, #{<<"partial">> := true}} = terrain_json:read_file(filename:join(Out, "scale.json")).

sigkill_of_experiment_scale_stops_its_vms() ->
    [{doc, "Row 16 (SIGKILL): experiment scale's VMs are stopped by its reaper when the CLI is killed, with no "
           "terrain command run; terrain down --state-dir OUT/state then removes the state left."}].
sigkill_of_experiment_scale_stops_its_vms(Config) ->
    {_Out, State, Status, Err} = interrupted_scale(Config, "sk", "KILL"),
    ?assertEqual("137\n", Status),
    ?assert(found(Err, "'terrain down --state-dir " ++ State ++ "' removes what is left")),
    ?assertEqual([], no_vms_within(State, 15000)),
    {0, _, DownErr} = escript(Config, ["down", "--state-dir", State]),
    %% the state is gone but for the logs of the VMs the reaper stopped (they had stopped before
    %% 'down'), each named on stderr
    Left = [F || F <- filelib:wildcard(filename:join(State, "**")), filelib:is_regular(F)],
    ?assertEqual([], [F || F <- Left, filename:extension(F) =/= ".log" orelse not found(DownErr, F)]).

%% The VMs of State still running after waiting at most Ms for them to go.
no_vms_within(State, Ms) ->
    case {vms_of(State), Ms =< 0} of
        {[], _} -> [];
        {Left, true} -> Left;
        {_, false} -> timer:sleep(250), no_vms_within(State, Ms - 250)
    end.

%% Runs experiment scale into a new directory and sends it Signal once its first VM
%% has written its pid file: {Out, State, exit status line, stderr}.
interrupted_scale(Config, Case, Signal) ->
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "scale_" ++ Case),
    State = filename:join(Out, "state"),
    Line = lists:flatten(["\"$T\" experiment scale --max-nodes 16 --probe-budget 5 --out ", Out, " --prefix ",
                          prefix(Case), " >/dev/null & P=$!; ",
                          "for i in $(seq 600); do ls ", State, "/nodes 2>/dev/null | grep -q pid && break; ",
                          "sleep 0.05; done; kill -", Signal, " $P; wait $P; echo $?"]),
    {0, Status, Err} = shell(Dir, Line),
    ct:pal("~ts~ts", [Status, Err]),
    {Out, State, Status, Err}.
