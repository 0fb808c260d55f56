%% Properties of the `terrain' CLI as a whole: whatever a user types and whatever a
%% file holds, a command ends with status 0, 1 or 2 (never 70, an internal error),
%% says what went wrong on stderr when it fails, and leaves nothing half-written.
%%
%% Each case runs one command in-process (`terrain_lab_cli:run/2' with captured
%% output) in a fresh directory holding random files: a `cluster.json' state, a
%% `latency.json' matrix, a cluster spec. The arguments mix valid and invalid
%% options, values (negative, zero, huge, not numbers, names over 255 characters)
%% and node names. Bounded in time and harmless by construction:
%% <ul>
%% <li>node names are `propcli_*' names that no running VM has, so nothing is ever
%%     measured, halted or run on a node (and no random task is ever executed);</li>
%% <li>`up' and `demo' would start VMs from a valid spec: they get only spec files
%%     that `terrain_lab_spec:read/1' rejects (a case whose random spec happens to be
%%     valid runs `status' instead);</li>
%% <li>`write-test' would write SIZE MiB RUNS times: its targets never exist;</li>
%% <li>counts and deadlines are small (at most 3), so a command that retries or waits
%%     does so briefly; `probe' writes its run directory into the case's directory.</li>
%% </ul>
-module(prop_cli).
-include_lib("proper/include/proper.hrl").

-export([prop_every_command_ends_with_0_1_or_2/0]).

prop_every_command_ends_with_0_1_or_2() ->
    ?FORALL({Command, Files, Args}, {command(), files(), list(argument())},
            begin
                Dir = fresh_dir(),
                try
                    write_files(Dir, Files),
                    Line = command_line(Command, Args, Dir),
                    {Code, _Out, Err} = terrain_lab_test_io:run(Line),
                    Left = vms_of(Dir),
                    ?WHENFAIL(io:format("terrain ~ts~n-> ~p~n~ts~nVMs left: ~p~n",
                                        [lists:join(" ", [printable(A) || A <- Line]), Code, Err, Left]),
                              lists:member(Code, [0, 1, 2])
                              andalso (Code =:= 0 orelse string:find(Err, "terrain") =/= nomatch)
                              andalso string:find(Err, "internal error") =:= nomatch
                              andalso Left =:= []
                              andalso nothing_half_written(hd(Line), Code, Dir))
                after
                    _ = os:cmd("rm -rf '" ++ Dir ++ "'")
                end
            end).

%% A failed topology writes no --out file; an `up' that refused leaves no cookie and
%% no pid directory in its state directory.
nothing_half_written("topology", Code, Dir) when Code =/= 0 ->
    not filelib:is_file(filename:join(Dir, "out.file"));
nothing_half_written("up", _Code, Dir) ->
    not filelib:is_file(filename:join([Dir, "state", "cookie"])) andalso
        not filelib:is_dir(filename:join([Dir, "state", "nodes"]));
nothing_half_written(_Command, _Code, _Dir) ->
    true.

%%--------------------------------------------------------------------
%% Generators

command() ->
    oneof(["status", "down", "attrs", "choose", "netem", "time-task", "write-test", "topology", "probe",
           "up", "demo", "help", "bogus"]).

files() ->
    {oneof([none, json_text(), state_json()]), oneof([none, json_text(), latency_json()]), oneof([none, spec_text()])}.

argument() ->
    frequency([{4, option()},
               {2, value()},
               {1, node_list()},
               {1, predicate()}]).

option() ->
    ?LET({Name, Value}, {oneof(["--state-dir", "--nodes", "--at", "--timeout", "--runs", "--batches", "--messages",
                                "--payload", "--strategy", "--warmup", "--size", "--stripe", "--targets", "--out",
                                "--rpc-all", "--pick", "--order-by", "--relax", "--json", "--force", "--prefix",
                                "--netem", "--alpha", "--outliers", "--outlier-factor", "--format", "--linkage",
                                "--statistic", "--spec", "--runs-dir", "--budget", "--bogus"]),
                         value()},
         case Name of
             "--state-dir" -> [Name, "@STATE"];
             "--out" -> [Name, "@OUT"];
             "--runs-dir" -> [Name, "@DIR"];
             "--spec" -> [Name, "@SPEC"];
             "--targets" -> [Name, "@DIR/no_such_target"];
             "--rpc-all" -> [Name, oneof(["erlang:node:[]", "no_mod:f:[]", "erlang:node", ":::", Value])];
             _ -> oneof([[Name, Value], [Name ++ "=" ++ Value], [Name]])
         end).

value() ->
    oneof(["-1", "0", "1", "2", "3", "1e300", "x", "", "auto", "keep", "json", "dot", "sequential", "random",
           "load:desc", "distance", "a,b", long_name(), "@LATENCY", "@SPEC", "@STATE/cluster.json"]).

node_list() ->
    ?LET(Names, non_empty(list(node_name())), lists:join(",", Names)).

node_name() ->
    oneof(["a", "eu1", "r1", "propcli_x@vm", "propcli_y@nohost", "propcli_z", long_name(), "@", "x@"]).

long_name() ->
    ?LET(N, integer(250, 300), "propcli_" ++ lists:duplicate(N, $n)).

predicate() ->
    oneof(["{load, exists}", "{level, le, near}", "{dist, le, 3}", "{rack, eq, r1}", "{", "os:cmd(\"true\")",
           "{in_subtree, r1}", "{'not', {gpu, true}}"]).

%% Random JSON: any shape.
json_text() ->
    ?LET(Term, json_value(3), terrain_json:encode(Term)).

json_value(0) ->
    oneof([null, true, false, integer(), float(), <<"s">>, 1.0e300]);
json_value(Depth) ->
    frequency([{3, json_value(0)},
               {1, ?LAZY(list(json_value(Depth - 1)))},
               {1, ?LAZY(?LET(Pairs, list({oneof([<<"nodes">>, <<"node">>, <<"format">>, <<"os_pid">>, <<"name">>,
                                                  <<"stats">>, <<"min">>, <<"group_path">>]),
                                           json_value(Depth - 1)}),
                              maps:from_list(Pairs)))}]).

%% A state that is nearly right: the right format, nodes that may be malformed.
state_json() ->
    ?LET(Nodes, list(oneof([node_record(), #{<<"name">> => <<"a">>}, <<"node">>])),
         terrain_json:encode(#{<<"format">> => <<"terrain.state/1">>, <<"cluster">> => <<"c">>,
                               <<"spec">> => <<"s">>, <<"nodes">> => Nodes})).

node_record() ->
    ?LET({Node, Name, Path, OsPid},
         {oneof([<<"propcli_n@vm">>, <<"propcli_bad">>, 7, null,
                 list_to_binary("propcli_" ++ lists:duplicate(260, $n) ++ "@vm")]),
          oneof([<<"a">>, 1]),
          oneof([[<<"r1">>], <<"r1">>, [1]]),
          oneof([null, <<"1">>, <<"x">>, 12])},
         #{<<"node">> => Node, <<"name">> => Name, <<"group_path">> => Path, <<"os_pid">> => OsPid}).

%% A latency matrix that is nearly right: 0 to 3 nodes, values that may be huge,
%% negative, missing or not numbers, rows that may not be square.
latency_json() ->
    ?LET(N, integer(0, 3),
         ?LET({Names, Rows}, {vector(N, oneof([<<"propcli_a@h">>, <<"propcli_b@h">>, <<"propcli_c@h">>, 5,
                                               list_to_binary(lists:duplicate(300, $l))])),
                              list(list(oneof([0, 1, 5.5, 1.0e300, -1, null, <<"x">>])))},
              terrain_json:encode(#{<<"format">> => <<"terrain.latency/1">>, <<"nodes">> => Names,
                                    <<"stats">> => #{<<"min">> => Rows}}))).

%% Spec text: random terms of the spec's shape, or garbage.
spec_text() ->
    oneof([?LET(Terms, list(spec_term()), [io_lib:format("~0tp.~n", [T]) || T <- Terms]),
           "{cluster, c, #{}}.\n{group, g, #{}, [{node, " ++ lists:duplicate(250, $s) ++ ", #{}}]}.\n",
           "not erlang at all",
           ""]).

spec_term() ->
    oneof([{cluster, oneof([c, 1]), oneof([#{}, #{latency => -1}, x])},
           {group, oneof([g, "g"]), #{}, oneof([[], [{node, a, #{schedulers => 0}}], x])},
           {node, a, #{attrs => x}},
           {node, oneof([a, b]), #{args => [1]}},
           x]).

%%--------------------------------------------------------------------
%% Running a case

fresh_dir() ->
    Dir = filename:join("/tmp", "prop_cli_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_dir(filename:join([Dir, "state", "x"])),
    Dir.

write_files(Dir, {State, Latency, Spec}) ->
    _ = State =:= none orelse file:write_file(filename:join([Dir, "state", "cluster.json"]), State),
    _ = Latency =:= none orelse file:write_file(filename:join(Dir, "latency.json"), Latency),
    ok = file:write_file(filename:join(Dir, "spec.cluster"), case Spec of none -> ""; _ -> Spec end),
    ok.

%% The command line with the case's paths filled in; `up' and `demo' only with a spec
%% that does not validate (else `status'), and always in the case's state directory.
command_line(Command, Args, Dir) ->
    Fill = fun("@STATE" ++ Rest) -> filename:join(Dir, "state") ++ Rest;
              ("@OUT") -> filename:join(Dir, "out.file");
              ("@DIR" ++ Rest) -> Dir ++ Rest;
              ("@SPEC") -> filename:join(Dir, "spec.cluster");
              ("@LATENCY") -> filename:join(Dir, "latency.json");
              (A) -> A
           end,
    Filled = [Fill(A) || A <- lists:append([as_args(A) || A <- Args])],
    Spec = filename:join(Dir, "spec.cluster"),
    Safe = [A || A <- Filled, A =/= "--spec"],
    case Command of
        Starts when Starts =:= "up"; Starts =:= "demo" ->
            case terrain_lab_spec:read(Spec) of
                {ok, _} -> ["status", "--state-dir", filename:join(Dir, "state") | Safe];
                {error, _} when Starts =:= "up" ->
                    ["up" | without_state_dir(Safe)] ++ ["--state-dir", filename:join(Dir, "state"), "--", Spec];
                {error, _} ->
                    ["demo" | without_spec(Safe)] ++ ["--spec", Spec, "--runs-dir", Dir]
            end;
        "probe" ->
            ["probe", "--state-dir", filename:join(Dir, "state") | Safe] ++ ["--runs-dir", Dir];
        _ ->
            [Command, "--state-dir", filename:join(Dir, "state") | Safe]
    end.

as_args(L) when is_list(L), L =/= [], is_list(hd(L)) -> L;
as_args(A) -> [A].

%% The last --state-dir wins; drop the random ones so a spec-starting command uses
%% the case's own state directory.
without_state_dir(["--state-dir", _ | Rest]) -> without_state_dir(Rest);
without_state_dir(["--state-dir=" ++ _ | Rest]) -> without_state_dir(Rest);
without_state_dir([A | Rest]) -> [A | without_state_dir(Rest)];
without_state_dir([]) -> [].

without_spec(["--spec=" ++ _ | Rest]) -> without_spec(Rest);
without_spec([A | Rest]) -> [A | without_spec(Rest)];
without_spec([]) -> [].

%% The OS pids of the VMs whose command line names the case's directory (a VM that
%% `up' or `demo' would have started there).
vms_of(Dir) ->
    string:lexemes(os:cmd("pgrep -f '" ++ Dir ++ "/'"), "\n").

printable(A) when length(A) > 60 -> lists:sublist(A, 40) ++ "...(" ++ integer_to_list(length(A)) ++ ")";
printable(A) -> A.
