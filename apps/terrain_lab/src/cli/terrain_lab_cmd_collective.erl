%% @private
%% @doc `terrain collective': benchmark and tune the collective operations of
%% terrain_paths on a cluster started from a spec.
%%
%% ```
%% terrain collective bench --spec SPEC [--algorithms A,...] [--sizes B,...]
%%     [--members-per-node N] [--rounds R] [--rank-order block|random|round_robin]
%%     [--seeds K] --out DIR
%% terrain collective tune --spec SPEC [--sizes B,...] [--out FILE]
%% '''
%% `bench' writes DIR/collective.json (`terrain.collective/1') and DIR/manifest.json,
%% and prints a table; `tune' writes a `terrain.collective_rules/1' file for `auto'
%% and prints, per size, auto's time against the best measured.
-module(terrain_lab_cmd_collective).

%% API
-export([commands/0,
         run/3,
         format_error/1]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

-define(ALGORITHMS, "flat,binomial,recursive_doubling,ring,rabenseifner,hierarchical").

%%--------------------------------------------------------------------
%% API

%% @doc The `collective' command.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "collective",
       summary => "Benchmark collective operations per algorithm, size and rank order; tune auto's rules",
       usage => "bench | tune",
       description => "bench starts the cluster of --spec, runs allreduce with every algorithm, value size "
                      "and rank order side by side (after a barrier, R rounds back to back), writes "
                      "OUT/collective.json (terrain.collective/1) and OUT/manifest.json and prints a table; "
                      "hierarchical also gets its lower bounds from the spec's latencies. tune measures every "
                      "algorithm, writes the rules file --out (terrain.collective_rules/1) that picks the fastest "
                      "per size, measures auto with it in the same cluster and prints auto against the best. "
                      "See docs/COLLECTIVES.md.",
       args => {1, 1},
       options => [#{name => spec, long => "spec", type => string, metavar => "SPEC",
                     required => true, help => "cluster spec to start"},
                   #{name => algorithms, long => "algorithms", type => list, metavar => "A,...",
                     help => "algorithms (default " ?ALGORITHMS ")"},
                   #{name => sizes, long => "sizes", type => {list, integer}, range => {1, inf}, metavar => "BYTES,...",
                     help => "value sizes in bytes (default 8,1024,65536,1048576)"},
                   #{name => members_per_node, long => "members-per-node", type => integer, range => {1, inf},
                     default => 1,
                     metavar => "N", help => "member processes per node"},
                   #{name => rounds, long => "rounds", type => integer, range => {1, inf}, default => 10,
                     metavar => "R",
                     help => "timed rounds per measurement"},
                   #{name => rank_order, long => "rank-order", type => list, metavar => "ORDER,...",
                     help => "block, random, round_robin (default all three for bench, block for tune)"},
                   #{name => seeds, long => "seeds", type => integer, range => {1, inf}, default => 3, metavar => "K",
                     help => "random rank orders (median over them)"},
                   #{name => rules, long => "rules", type => string, metavar => "FILE",
                     help => "rules file for the auto algorithm"},
                   #{name => out, long => "out", type => string, metavar => "DIR|FILE", required => true,
                     help => "bench: run directory to create; tune: rules file to write"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain collective bench|tune'.
-spec run(#{atom() => term()}, [string()], terrain_lab_cli:io()) -> ok | {error, term()}.
run(Options, [Action], Io) when Action =:= "bench"; Action =:= "tune" ->
    case parse(Action, Options) of
        {ok, Parsed} ->
            case action(Action, Parsed, Options, Io) of
                ok -> ok;
                {error, {collective_cmd, _}} = Error -> Error;
                {error, Reason} -> {error, {collective_cmd, {failed, Reason}}}
            end;
        {error, {collective_cmd, {bad, _, _}} = Reason} ->
            {error, {usage, Reason}};      % a value not among the choices: exit 2
        {error, _} = Error ->
            Error
    end;
run(_Options, [Action], _Io) ->
    {error, {usage, {collective_cmd, {action, Action}}}}.

%% @doc A sentence for an error of this command.
-spec format_error(term()) -> iolist().
format_error({collective_cmd, {action, Action}}) ->
    io_lib:format("unknown action '~ts' (expected bench or tune)", [Action]);
format_error({collective_cmd, {bad, Option, Value}}) ->
    io_lib:format("bad value for --~ts: '~ts'", [Option, Value]);
format_error({collective_cmd, {partial, File, {error, Reason}}}) ->
    N = case terrain_json:read_file(File) of
            {ok, #{<<"results">> := Results}} -> length(Results);
            _ -> 0
        end,
    io_lib:format("~ts; the ~b measurement~s finished before are kept in ~ts (marked partial)",
                  [format_error({collective_cmd, {failed, Reason}}), N, [$s || N =/= 1], File]);
format_error({collective_cmd, {failed, {collective, _} = Reason}}) ->
    terrain_lab_collective:format_error(Reason);
format_error({collective_cmd, {failed, {paths, _} = Reason}}) ->
    terrain_paths:format_error(Reason);
format_error({collective_cmd, {failed, Reason}}) ->
    terrain_lab_cli_errors:format(Reason).

%%--------------------------------------------------------------------
%% Internal functions

parse(Action, Options) ->
    Steps = [fun() -> names(algorithms, maps:get(algorithms, Options), string:lexemes(?ALGORITHMS, ","),
                            terrain_paths_names() ++ ["auto"]) end,
             fun() -> sizes(maps:get(sizes, Options)) end,
             fun() -> names(rank_order, maps:get(rank_order, Options),
                            case Action of "bench" -> ["block", "round_robin", "random"]; "tune" -> ["block"] end,
                            ["block", "round_robin", "random"]) end,
             fun() -> positive(members_per_node, Options) end,
             fun() -> positive(rounds, Options) end,
             fun() -> positive(seeds, Options) end,
             fun() -> rules(maps:get(rules, Options)) end],
    parse_steps(Steps, #{}).

parse_steps([], Acc) ->
    {ok, Acc};
parse_steps([Step | Rest], Acc) ->
    case Step() of
        {ok, Map} -> parse_steps(Rest, maps:merge(Acc, Map));
        {error, _} = Error -> Error
    end.

terrain_paths_names() ->
    string:lexemes(?ALGORITHMS, ",").

names(Key, [], Default, _Known) ->
    {ok, #{Key => [list_to_atom(N) || N <- Default]}};
names(Key, Given, _Default, Known) ->
    case [N || N <- Given, not lists:member(N, Known)] of
        [] -> {ok, #{Key => [list_to_atom(N) || N <- Given]}};
        [Bad | _] -> {error, {collective_cmd, {bad, option_name(Key), Bad}}}
    end.

sizes([]) ->
    {ok, #{sizes => [8, 1024, 65536, 1048576]}};
sizes(Given) ->                          % checked by the option's definition
    {ok, #{sizes => Given}}.

positive(Key, Options) ->
    case maps:get(Key, Options) of
        N when is_integer(N), N > 0 -> {ok, #{}};
        N -> {error, {collective_cmd, {bad, option_name(Key), integer_to_list(N)}}}
    end.

%% A rules file is read once here, so that a bad one is refused before any node starts.
rules(undefined) ->
    {ok, #{}};
rules(File) ->
    case terrain_paths:read_rules(File) of
        {ok, _} -> {ok, #{}};
        {error, Why} -> {error, {collective_cmd, {failed, Why}}}
    end.

option_name(Key) -> string:replace(atom_to_list(Key), "_", "-", all).

action("bench", Parsed, Options, Io) ->
    Out = maps:get(out, Options),
    case terrain_lab_files:new_output(dir, Out, inputs(Options)) of
        {error, _} = Error -> Error;
        ok ->
            with_spec(Options, fun(Spec) ->
                                       File = filename:join(Out, "collective.json"),
                                       Bench = (bench_options(Spec, Parsed, Options))#{checkpoint => checkpoint(File),
                                                                                       log_dir => vm_logs(Out)},
                                       case interruptible(fun() -> terrain_lab_collective:bench(Bench,
                                                                                                progress(Io)) end) of
                                           {ok, Doc} -> write_bench(Out, Doc, Options, Io);
                                           {error, _} = Error -> kept(Out, File, Options, Error)
                                       end
                               end)
    end;
action("tune", Parsed, Options, Io) ->
    Out = maps:get(out, Options),
    case terrain_lab_files:new_output(file, Out, inputs(Options)) of
        {error, _} = Error -> Error;
        ok -> tune(Out, Parsed, Options, Io)
    end.

%% The files the command reads: never overwritten by its --out.
inputs(Options) ->
    [F || F <- [maps:get(spec, Options), maps:get(rules, Options)], F =/= undefined].

tune(Out, Parsed, Options, Io) ->
    with_spec(Options, fun(Spec) ->
                               Partial = Out ++ ".measurements.json",
                               Bench = (bench_options(Spec, Parsed, Options))#{checkpoint => checkpoint(Partial)},
                               case interruptible(fun() -> terrain_lab_collective:tune(Bench, progress(Io)) end) of
                                   {ok, Json, Check} ->
                                       case terrain_lab_files:write(Out, [terrain_json:encode(Json, #{pretty => true}),
                                                                          $\n]) of
                                           ok -> _ = file:delete(Partial), print_tune(Out, Json, Check, Io);
                                           {error, _} = Error -> Error
                                       end;
                                   {error, _} = Error ->
                                       case filelib:is_file(Partial) of
                                           true -> {error, {collective_cmd, {partial, Partial, Error}}};
                                           false -> Error
                                       end
                               end
                       end).

%% The partial-results writer of both actions: after every measurement the document
%% so far, marked partial, replaces FILE (a failed write is reported at the end).
checkpoint(File) ->
    fun(Doc) ->
            case terrain_lab_files:ensure_dir(File) of
                ok -> _ = terrain_lab_files:write_json(File, Doc), ok;
                {error, _} -> ok
            end
    end.

%% Runs the measurements with SIGTERM turned into a message that stops them after
%% the current measurement (terrain_lab_collective), then SIGTERM halts again.
interruptible(Fun) ->
    ok = terrain_lab_cli_signals:on_interrupt(self(), {terrain_lab_collective, interrupt}),
    try Fun()
    after
        ok = terrain_lab_cli_signals:clear(),
        receive {terrain_lab_collective, interrupt} -> ok after 0 -> ok end
    end.

%% A bench that failed or was interrupted after some measurements: their document
%% (partial) is in OUT/collective.json; the manifest lists it. Either way the manifest
%% keeps the error (`error') and names the VMs' logs (`vm_logs').
kept(Out, File, Options, {error, Reason} = Error) ->
    Text = unicode:characters_to_binary(terrain_lab_cli_errors:format(Reason)),
    case filelib:is_file(File) of
        true ->
            _ = manifest(Out, Options, #{error => Text}),
            {error, {collective_cmd, {partial, File, Error}}};
        false ->
            _ = terrain_lab_files:ensure_dir(File),
            _ = terrain_lab_run:write_manifest(Out, collective, [], manifest_extra(Out, #{error => Text})),
            Error
    end.

manifest(Out, Options) ->
    manifest(Out, Options, #{}).

manifest(Out, Options, Extra) ->
    terrain_lab_run:write_manifest(Out, collective,
                                   [#{kind => collective, file => <<"collective.json">>,
                                      parameters => #{spec => list_to_binary(maps:get(spec, Options))}}],
                                   manifest_extra(Out, Extra)).

%% The run directory's VM logs, one per node (terrain_lab_cluster's `log_dir').
vm_logs(Out) ->
    filename:join(Out, "vms").

manifest_extra(Out, Extra) ->
    case filelib:is_dir(vm_logs(Out)) of
        true -> Extra#{vm_logs => <<"vms">>};
        false -> Extra
    end.

with_spec(Options, Fun) ->
    case terrain_lab:read_spec(maps:get(spec, Options)) of
        {ok, Spec} ->
            case guard(Spec, Options) of
                ok -> Fun(Spec);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% The resource guard, before any node starts: the VMs of the spec, the member
%% processes on one node, and the members' values (a list of size/8 floats is 4 bytes
%% per byte of value; a member holds its own, the one it receives and the sum, and the
%% messages in flight: 16 bytes per byte of the largest size).
guard(Spec, Options) ->
    Nodes = length(terrain_lab_spec:nodes(Spec)),
    Members = maps:get(members_per_node, Options),
    MaxSize = lists:max([8 | maps:get(sizes, Options)]),
    terrain_lab_steps:run([fun(_) -> terrain_lab_guard:vms(Nodes, #{}) end,
                           fun(_) -> terrain_lab_guard:processes("--members-per-node", Members, lab_node) end,
                           fun(_) -> terrain_lab_guard:memory([{"--members-per-node", Nodes * Members,
                                                                terrain_lab_guard:process_bytes()},
                                                               {"--sizes", Nodes * Members, 16 * MaxSize}])
                           end], none).

bench_options(Spec, Parsed, Options) ->
    Base = #{spec => Spec,
             algorithms => maps:get(algorithms, Parsed),
             sizes => maps:get(sizes, Parsed),
             members_per_node => maps:get(members_per_node, Options),
             rounds => maps:get(rounds, Options),
             rank_orders => maps:get(rank_order, Parsed),
             seeds => maps:get(seeds, Options)},
    case maps:get(rules, Options) of
        undefined -> Base;
        File -> Base#{rules => File}
    end.

progress(#{err := Err}) ->
    fun(Line) -> io:put_chars(Err, Line) end.

write_bench(Out, Doc, Options, #{out := Device} = Io) ->
    File = filename:join(Out, "collective.json"),
    Steps = [fun() -> terrain_lab_files:ensure_dir(File) end,
             fun() -> terrain_lab_files:write_json(File, Doc) end,
             fun() -> manifest(Out, Options) end],
    case lists:foldl(fun(Step, ok) -> Step(); (_, Error) -> Error end, ok, Steps) of
        ok ->
            io:put_chars(Device, terrain_lab_collective:table(Doc)),
            terrain_lab_io:progress(Io, "wrote ~ts~n", [File]);
        {error, _} = Error ->
            Error
    end.

print_tune(Out, #{rules := Rules}, Check, #{out := Device} = Io) ->
    io:format(Device, "~-10s ~-10s ~-20s~n", ["MIN_BYTES", "MAX_BYTES", "ALGORITHM"]),
    [io:format(Device, "~-10b ~-10s ~-20s~n", [Min, case Max of null -> "-"; _ -> integer_to_list(Max) end, A])
     || #{min_bytes := Min, max_bytes := Max, algorithm := A} <- Rules],
    io:format(Device, "~n~-10s ~-20s ~12s ~-20s ~12s ~8s~n",
              ["BYTES", "AUTO_RAN", "AUTO_US", "BEST", "BEST_US", "RATIO"]),
    [io:format(Device, "~-10b ~-20s ~12b ~-20s ~12b ~8.2f~n", [S, C, round(A), B, round(BU), R])
     || #{size_bytes := S, chosen := C, auto_us := A, best := B, best_us := BU, ratio := R} <- Check],
    terrain_lab_io:progress(Io, "wrote ~ts~n", [Out]).
