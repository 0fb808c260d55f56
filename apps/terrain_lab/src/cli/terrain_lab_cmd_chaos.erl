%% @private
%% @doc `terrain chaos SPEC [--duration S] [--seed N] [--faults LIST] [--out DIR]': the
%% live cluster of SPEC under a seeded nemesis, with clients, a history and a checker
%% (terrain_lab_chaos; docs/RELIABILITY.md). Prints the verdict; the first violation
%% makes the command fail (exit 1), named with its time and operation.
-module(terrain_lab_cmd_chaos).

%% API (command table and CLI handler)
-export([commands/0,
         run/3,
         format_error/1]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

-define(FAULTS, ["kill", "stop", "partition", "slow", "join", "leave", "move"]).
-define(MAX_DURATION_S, 7 * 24 * 3600).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "chaos",
       summary => "Run the live cluster of a spec under a seeded nemesis of faults and judge its history",
       usage => "SPEC",
       description => "Starts the cluster of SPEC (emulated, with a live topology) and two placed groups, then "
                      "injects faults in bursts with quiet periods between them: kill -9 of a VM, SIGSTOP and "
                      "SIGCONT, a partition (sites or arbitrary halves) and its heal, a slow link (10 times the "
                      "latency, as much jitter), a join (up --add), a leave (down --nodes), a move (netem move), "
                      "and the sequencer killed during a join. Clients beside it choose nodes, read the placed "
                      "groups and follow topology subscriptions. Everything goes to DIR/history.jsonl; the checker "
                      "writes DIR/checker.json (terrain.checker/1): faults, violations, convergence times. The same "
                      "seed gives the same schedule of faults. Exit 1 at the first violation (docs/RELIABILITY.md).",
       args => {1, 1},
       options => [#{name => duration, long => "duration", type => integer, default => 60,
                     range => {10, ?MAX_DURATION_S}, metavar => "S", help => "seconds of faults"},
                   #{name => seed, long => "seed", type => integer, range => {0, 1 bsl 62}, metavar => "N",
                     help => "the schedule's seed (default: from the clock; printed)"},
                   #{name => faults, long => "faults", type => list, metavar => "LIST",
                     check => {fun(L) -> L =/= [] andalso lists:all(fun(F) -> lists:member(F, ?FAULTS) end, L) end,
                               "a comma-separated list of " ++ lists:join(",", ?FAULTS)},
                     help => "the faults to inject (default: all of " ++ lists:join(",", ?FAULTS) ++ ")"},
                   #{name => grace, long => "grace", type => integer, default => 3000, range => {0, 600000},
                     metavar => "MS", help => "the live topology's grace period"},
                   #{name => remeasure, long => "remeasure", type => integer, default => 1000,
                     range => {100, 600000}, metavar => "MS", help => "the live topology's re-measurement interval"},
                   #{name => out, long => "out", type => string, metavar => "DIR",
                     help => "the run directory to create (default: a new one under --runs-dir)"},
                   terrain_lab_cli_options:runs_dir(),
                   terrain_lab_cli_options:prefix("chaos_", "prepended to every node name")],
       run => {?MODULE, run}}].

%% @doc `terrain chaos SPEC'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [SpecFile], Io) ->
    Seed = case maps:get(seed, Options, undefined) of
               undefined -> erlang:system_time(microsecond) rem (1 bsl 32);
               S -> S
           end,
    %% sorted: the schedule depends on the set of faults, not on the order they are named in
    Faults = [list_to_atom(F) || F <- lists:usort(case maps:get(faults, Options, []) of
                                                      [] -> ?FAULTS;
                                                      Given -> Given
                                                  end)],
    case out_dir(Options) of
        {ok, Out} ->
            %% everything the schedule depends on (the grace period sets the quiet periods)
            Command = iolist_to_binary(lists:join(" ", ["terrain chaos", SpecFile, "--seed", integer_to_list(Seed),
                                                        "--duration", integer_to_list(maps:get(duration, Options)),
                                                        "--faults", lists:join(",", [atom_to_list(F) || F <- Faults]),
                                                        "--grace", integer_to_list(maps:get(grace, Options)),
                                                        "--remeasure",
                                                        integer_to_list(maps:get(remeasure, Options))])),
            terrain_lab_io:progress(Io, "chaos: seed ~b (reproduce: ~ts)~n", [Seed, Command]),
            Run = #{seed => Seed, duration_ms => maps:get(duration, Options) * 1000, faults => Faults,
                    grace_ms => maps:get(grace, Options), remeasure_ms => maps:get(remeasure, Options),
                    prefix => maps:get(prefix, Options), io => Io, command => Command},
            case terrain_lab_chaos:run(SpecFile, Out, Run) of
                {ok, Verdict} -> verdict(Verdict, Seed, Out, Io);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc A sentence for an error of this command.
-spec format_error({chaos_cmd, term()}) -> iolist().
format_error({chaos_cmd, {violation, Seed, #{t := T, invariant := Invariant, op := Op, detail := Detail}, N}}) ->
    io_lib:format("~b violation(s) (seed ~b); the first at t = ~b ms, ~ts, after ~ts: ~ts",
                  [N, Seed, T, Invariant, Op, Detail]);
format_error({chaos_cmd, {out_exists, Dir}}) ->
    io_lib:format("~ts exists and is not empty; give a new directory", [Dir]).

%%--------------------------------------------------------------------
%% Internal

out_dir(#{out := Out}) when is_list(Out) ->
    case file:list_dir(Out) of
        {ok, [_ | _]} -> {error, {chaos_cmd, {out_exists, Out}}};
        _ -> case terrain_lab_files:ensure_dir(filename:join(Out, "x")) of
                 ok -> {ok, Out};
                 {error, _} = Error -> Error
             end
    end;
out_dir(Options) ->
    terrain_lab_run:create(maps:get(runs_dir, Options)).

verdict(#{faults := Faults, violations := Violations, convergence_ms := C} = Verdict, Seed, Out, Io) ->
    terrain_lab_io:out(Io, "seed ~b: ~b faults injected, ~b violation(s), convergence p50 ~ts ms, p99 ~ts ms "
                           "(~b bursts), ~b crash report(s)~n",
                       [Seed, Faults, length(Violations), number(maps:get(p50, C)), number(maps:get(p99, C)),
                        maps:get(samples, C), maps:get(crashes, Verdict)]),
    [terrain_lab_io:out(Io, "fault not injected at t = ~b ms: ~ts ~ts: ~ts~n", [T, Op, text(N), R])
     || #{t := T, op := Op, node := N, result := R} <- maps:get(fault_errors, Verdict)],
    terrain_lab_io:out(Io, "~ts~n", [filename:join(Out, "checker.json")]),
    case Violations of
        [] -> ok;
        [First | _] -> {error, {chaos_cmd, {violation, Seed, First, length(Violations)}}}
    end.

number(null) -> "-";
number(N) -> integer_to_list(round(N)).

text(null) -> "";
text(B) -> B.
