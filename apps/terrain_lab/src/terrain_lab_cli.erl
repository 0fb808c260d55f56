%% @private
%% @doc The `terrain' command line: the escript's main module.
%%
%% Subcommands are data: {@link commands/0} lists one map per subcommand with its
%% options, argument count and handler. Parsing, help and errors are handled here
%% once, so a handler only sees validated options and prints its results:
%% ```
%% run(Options :: #{atom() => term()}, Args :: [string()], Io :: io()) -> ok | {error, Reason}
%% '''
%% Output goes to `Io''s `out' device (results) and `err' device (progress, errors),
%% so tests run the CLI in-process and capture both. A returned `{error, Reason}' is
%% printed on `err' through {@link terrain_lab:format_error/1} with exit status 1;
%% usage errors exit with 2.
-module(terrain_lab_cli).

%% API
-export([main/1,
         run/2,
         commands/0,
         out/3,
         progress/3]).

-export_type([io/0, command/0, option/0]).

-ifdef(TEST).
-export([parse/2]).
-endif.

-type io() :: #{out := io:device(),   % results (stdout)
                err := io:device()}.  % progress and errors (stderr)

-type option() ::
        #{name := atom(),              % key in the handler's options map
          long := string(),            % --long
          short => char(),             % -s
          type := flag | string | integer | float | list, % list: repeatable, comma-separated
          default => term(),           % value when absent (flags default to false)
          metavar => string(),         % placeholder in the help text
          help := string()}.

-type command() ::
        #{name := string(),
          summary := string(),         % one line for `terrain --help'
          usage := string(),           % the arguments part of the usage line
          description => string(),     % a paragraph for `terrain help CMD'
          args := {non_neg_integer(), non_neg_integer() | infinity},
          options := [option()],
          run := {module(), atom()}}.

-define(EXIT_OK, 0).
-define(EXIT_ERROR, 1).
-define(EXIT_USAGE, 2).
-define(EXIT_INTERNAL, 70).

%%--------------------------------------------------------------------
%% API

%% @doc The escript entry point.
-spec main([string()]) -> no_return().
main(Args) ->
    Code = run(Args, #{out => standard_io, err => standard_error}),
    erlang:halt(Code).

%% @doc Runs the command line `Args' and returns the exit status.
-spec run([string()], io()) -> non_neg_integer().
run([], Io) ->
    usage_error(Io, "no command given");
run([Help | _], Io) when Help =:= "--help"; Help =:= "-h" ->
    out(Io, "~ts", [top_help()]),
    ?EXIT_OK;
run(["--version" | _], Io) ->
    out(Io, "terrain ~s~n", [version()]),
    ?EXIT_OK;
run(["help"], Io) ->
    out(Io, "~ts", [top_help()]),
    ?EXIT_OK;
run(["help", Name | _], Io) ->
    case find(Name) of
        {ok, Command} -> out(Io, "~ts", [command_help(Command)]), ?EXIT_OK;
        error -> usage_error(Io, io_lib:format("unknown command '~ts'", [Name]))
    end;
run(["-" ++ _ = Option | _], Io) ->
    usage_error(Io, io_lib:format("unknown option '~ts'", [Option]));
run([Name | Rest], Io) ->
    case find(Name) of
        {ok, Command} -> run_command(Command, Rest, Io);
        error -> usage_error(Io, io_lib:format("unknown command '~ts'", [Name]))
    end.

%% @doc Every subcommand, in the order `terrain --help' lists them.
-spec commands() -> [command()].
commands() ->
    [#{name => "demo",
       summary => "Start the demo cluster, show its nodes, record the run, stop it",
       usage => "",
       description => "Starts every node of the cluster spec (examples/demo.cluster unless --spec) in "
                      "parallel, each running the terrain application, walks through terrain on it "
                      "(attributes, choices, placement, probe and discovery, a timed task and its GEV fit), "
                      "records every output in RUNS_DIR/<UTC stamp>/manifest.json, stops the cluster, "
                      "writes the run's report.html and prints its path last.",
       args => {0, 0},
       options => [#{name => spec, long => "spec", type => string, default => "examples/demo.cluster",
                     metavar => "FILE", help => "cluster spec to start"},
                   #{name => runs_dir, long => "runs-dir", type => string, default => "runs",
                     metavar => "DIR", help => "where the run directory is created"}],
       run => {terrain_lab_cmd_demo, run}},
     #{name => "up",
       summary => "Start a cluster from a spec and leave it running",
       usage => "SPEC",
       description => "Starts the nodes of the cluster spec SPEC as detached VMs with a random cookie "
                      "(stored with mode 0600, never printed) and records them in STATE_DIR/cluster.json. "
                      "Refuses while a cluster recorded there is still running.",
       args => {1, 1},
       options => [state_dir_option(),
                   #{name => prefix, long => "prefix", type => string, default => "",
                     metavar => "TEXT", help => "prepended to every node name"},
                   #{name => timeout, long => "timeout", type => integer, default => 60000,
                     metavar => "MS", help => "deadline for all nodes to come up"},
                   #{name => netem, long => "netem", type => string, default => "auto",
                     metavar => "auto|on|off",
                     help => "emulate the spec's links (auto: when the spec has link options)"}],
       run => {terrain_lab_up, up}},
     #{name => "status",
       summary => "List the nodes of the running cluster and whether each is reachable",
       usage => "",
       description => "Reads the state that 'terrain up' recorded and checks every node under one "
                      "deadline.",
       args => {0, 0},
       options => [state_dir_option(),
                   #{name => json, long => "json", type => flag, help => "print JSON for scripts"},
                   #{name => timeout, long => "timeout", type => integer, default => 3000,
                     metavar => "MS", help => "deadline for reaching the nodes"}],
       run => {terrain_lab_up, status}},
     #{name => "down",
       summary => "Stop exactly the nodes that 'terrain up' started",
       usage => "",
       description => "Stops every recorded node by node name, falling back to its recorded OS pid, "
                      "and removes the state.",
       args => {0, 0},
       options => [state_dir_option(),
                   #{name => timeout, long => "timeout", type => integer, default => 5000,
                     metavar => "MS", help => "time a node gets to halt before it is killed"}],
       run => {terrain_lab_up, down}},
     #{name => "netem",
       summary => "Partition, isolate and heal the nodes of the running emulated cluster",
       usage => "partition NODES NODES | isolate NODES | heal [NODES] | show",
       description => "Acts on the cluster that 'terrain up' started with network emulation on. "
                      "partition cuts every connection between the two sets of nodes and refuses new "
                      "ones; isolate cuts NODES from all other nodes; heal lifts the partitions of "
                      "NODES (of every node without NODES); show lists, per node, its proxied "
                      "connections and the nodes it is cut from. NODES is a comma-separated list of "
                      "spec node names, node names or group names (a group stands for its nodes).",
       args => {1, 3},
       options => [state_dir_option(),
                   #{name => timeout, long => "timeout", type => integer, default => 5000,
                     metavar => "MS", help => "deadline for all nodes to apply it"}],
       run => {terrain_lab_cmd_netem, run}},
     #{name => "write-test",
       summary => "Time parallel synchronous writes of one file striped over directories",
       usage => "",
       description => "Writes one logical file of SIZE MiB striped round-robin over the target directories "
                      "in STRIPE KiB stripes, one writer per target, all at once, with O_SYNC writes; RUNS "
                      "times. One CSV row per run (open, write, close, total, slowest target), on disk as it "
                      "goes. Never overwrites a file; removes its part files; a failed run keeps the rows "
                      "measured before it.",
       args => {0, 0},
       options => [#{name => size, long => "size", type => integer, default => 64, metavar => "MiB",
                     help => "size of the logical file"},
                   #{name => targets, long => "targets", type => list, metavar => "DIR,...",
                     help => "target directories (repeatable or comma-separated)"},
                   #{name => stripe, long => "stripe", type => integer, default => 1024, metavar => "KiB",
                     help => "stripe size"},
                   #{name => runs, long => "runs", type => integer, default => 10, metavar => "N",
                     help => "number of runs"},
                   #{name => out, long => "out", type => string, metavar => "FILE",
                     help => "durations CSV to create"}],
       run => {terrain_lab_write_test, run}},
     #{name => "time-task",
       summary => "Time a repeated parallel task on every node into a durations CSV",
       usage => "",
       description => "Runs the task on every node of the running cluster (or --nodes) at once, RUNS times, "
                      "and records the time until every node answered. --rpc-all M:F:A calls M:F(A...) "
                      "with A a literal list, e.g. timer:sleep:[10].",
       args => {0, 0},
       options => [#{name => rpc_all, long => "rpc-all", type => string, metavar => "M:F:A",
                     help => "the call to make on every node"},
                   #{name => runs, long => "runs", type => integer, default => 100, metavar => "N",
                     help => "number of runs"},
                   #{name => out, long => "out", type => string, metavar => "FILE",
                     help => "durations CSV to create"},
                   #{name => timeout, long => "timeout", type => integer, default => 5000, metavar => "MS",
                     help => "deadline of each run"},
                   #{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to use instead of the running cluster"},
                   state_dir_option()],
       run => {terrain_lab_time_task, run}}, terrain_lab_cmd_attrs:command(), terrain_lab_cmd_choose:command(),
     terrain_lab_probe:command(), terrain_lab_cmd_topology:command()] ++ terrain_lab_cmd_report:commands().

%% @doc Prints a result line on the `out' device.
-spec out(io(), io:format(), [term()]) -> ok.
out(#{out := Device}, Format, Args) ->
    io:format(Device, Format, Args).

%% @doc Prints progress on the `err' device.
-spec progress(io(), io:format(), [term()]) -> ok.
progress(#{err := Device}, Format, Args) ->
    io:format(Device, Format, Args).

%%--------------------------------------------------------------------
%% Internal functions

state_dir_option() ->
    #{name => state_dir, long => "state-dir", type => string, default => ".terrain",
      metavar => "DIR", help => "where the running cluster is recorded (env TERRAIN_STATE_DIR)"}.

version() ->
    _ = application:load(terrain_lab),
    {ok, Vsn} = application:get_key(terrain_lab, vsn),
    Vsn.

find(Name) ->
    case [C || #{name := N} = C <- commands(), N =:= Name] of
        [Command] -> {ok, Command};
        [] -> error
    end.

run_command(#{name := Name, run := {Module, Function}} = Command, Rest, Io) ->
    case parse(Command, Rest) of
        help ->
            out(Io, "~ts", [command_help(Command)]),
            ?EXIT_OK;
        {error, Message} ->
            progress(Io, "terrain ~ts: ~ts~nRun 'terrain ~ts --help' for usage.~n", [Name, Message, Name]),
            ?EXIT_USAGE;
        {ok, Options, Args} ->
            try Module:Function(Options, Args, Io) of
                ok ->
                    ?EXIT_OK;
                {error, Reason} ->
                    progress(Io, "terrain ~ts: ~ts~n", [Name, terrain_lab:format_error(Reason)]),
                    ?EXIT_ERROR
            catch
                Class:Reason:Stack ->
                    progress(Io, "terrain ~ts: internal error: ~0tp:~0tp~n  ~0tp~n", [Name, Class, Reason, Stack]),
                    ?EXIT_INTERNAL
            end
    end.

usage_error(Io, Message) ->
    progress(Io, "terrain: ~ts~nRun 'terrain --help' for usage.~n", [Message]),
    ?EXIT_USAGE.

%% Parses options (anywhere before `--') and positional arguments.
parse(#{options := Specs, args := {Min, Max}}, Args) ->
    Defaults = maps:from_list([{N, default(S)} || #{name := N} = S <- Specs]),
    case parse(Args, Specs, Defaults, []) of
        help ->
            help;
        {error, _} = Error ->
            Error;
        {ok, Options, Positional} ->
            Count = length(Positional),
            if
                Count < Min -> {error, io_lib:format("expected at least ~b argument~s, got ~b", [Min, plural(Min), Count])};
                Max =/= infinity, Count > Max ->
                    {error, io_lib:format("expected at most ~b argument~s, got ~b: ~ts",
                                          [Max, plural(Max), Count, lists:join(" ", Positional)])};
                true -> {ok, Options, Positional}
            end
    end.

parse([], _Specs, Options, Positional) ->
    {ok, Options, lists:reverse(Positional)};
parse(["--" | Rest], _Specs, Options, Positional) ->
    {ok, Options, lists:reverse(Positional, Rest)};
parse([Help | _], _Specs, _Options, _Positional) when Help =:= "--help"; Help =:= "-h" ->
    help;
parse(["--" ++ Long | Rest], Specs, Options, Positional) ->
    {Key, Inline} = case string:split(Long, "=") of
                        [K, V] -> {K, {value, V}};
                        [K] -> {K, none}
                    end,
    case [S || #{long := L} = S <- Specs, L =:= Key] of
        [Spec] -> take_value(Spec, "--" ++ Key, Inline, Rest, Specs, Options, Positional);
        [] -> {error, io_lib:format("unknown option '--~ts'", [Key])}
    end;
parse(["-" ++ [Short] | Rest], Specs, Options, Positional) ->
    case [S || #{short := C} = S <- Specs, C =:= Short] of
        [Spec] -> take_value(Spec, [$-, Short], none, Rest, Specs, Options, Positional);
        [] -> {error, io_lib:format("unknown option '-~tc'", [Short])}
    end;
parse(["-" ++ [_, _ | _] = Bad | _], _Specs, _Options, _Positional) ->
    {error, io_lib:format("unknown option '-~ts'", [Bad])};
parse([Arg | Rest], Specs, Options, Positional) ->
    parse(Rest, Specs, Options, [Arg | Positional]).

take_value(#{name := Name, type := flag}, Flag, none, Rest, Specs, Options, Positional) ->
    _ = Flag,
    parse(Rest, Specs, Options#{Name => true}, Positional);
take_value(#{type := flag}, Flag, {value, _}, _Rest, _Specs, _Options, _Positional) ->
    {error, io_lib:format("option '~ts' takes no value", [Flag])};
take_value(Spec, Flag, none, [Value | Rest], Specs, Options, Positional) ->
    take_value(Spec, Flag, {value, Value}, Rest, Specs, Options, Positional);
take_value(_Spec, Flag, none, [], _Specs, _Options, _Positional) ->
    {error, io_lib:format("option '~ts' needs a value", [Flag])};
take_value(#{name := Name, type := Type}, Flag, {value, Text}, Rest, Specs, Options, Positional) ->
    case convert(Type, Text) of
        {ok, Value} when Type =:= list ->
            Previous = case maps:get(Name, Options) of L when is_list(L), L =/= [] -> L; _ -> [] end,
            parse(Rest, Specs, Options#{Name => Previous ++ Value}, Positional);
        {ok, Value} ->
            parse(Rest, Specs, Options#{Name => Value}, Positional);
        error ->
            {error, io_lib:format("option '~ts' expects ~s, got '~ts'", [Flag, type_name(Type), Text])}
    end.

convert(string, Text) -> {ok, Text};
convert(list, Text) -> {ok, [T || T <- string:split(Text, ",", all), T =/= ""]};
convert(integer, Text) ->
    try {ok, list_to_integer(Text)} catch error:badarg -> error end;
convert(float, Text) ->
    try {ok, list_to_float(Text)}
    catch error:badarg ->
            try {ok, float(list_to_integer(Text))} catch error:badarg -> error end
    end.

type_name(integer) -> "an integer";
type_name(float) -> "a number";
type_name(_) -> "a value".

default(#{default := Default}) -> Default;
default(#{type := flag}) -> false;
default(#{type := list}) -> [];
default(#{}) -> undefined.

plural(1) -> "";
plural(_) -> "s".

%%--------------------------------------------------------------------
%% Help

top_help() ->
    Commands = commands(),
    Width = lists:max([length(N) || #{name := N} <- Commands]) + 2,
    ["terrain ", version(), " - choose Erlang nodes by what they are and how far apart they are\n\n",
     "Usage: terrain COMMAND [OPTIONS] [ARGS]\n",
     "       terrain help COMMAND\n",
     "       terrain --version\n\n",
     "Commands:\n",
     [io_lib:format("  ~-*ts~ts~n", [Width, N, S]) || #{name := N, summary := S} <- Commands],
     "\nRun 'terrain COMMAND --help' for the options of a command.\n"].

command_help(#{name := Name, summary := Summary, usage := Usage, options := Specs} = Command) ->
    Lines = [{option_label(S), option_help(S)} || S <- Specs] ++ [{"-h, --help", "show this help"}],
    Width = lists:max([length(L) || {L, _} <- Lines]) + 2,
    ["Usage: terrain ", Name, " [OPTIONS]", [[" ", Usage] || Usage =/= ""], "\n\n",
     Summary, ".\n",
     case maps:get(description, Command, "") of
         "" -> [];
         Description -> ["\n", wrap(Description, 80), "\n"]
     end,
     "\nOptions:\n",
     [io_lib:format("  ~-*ts~ts~n", [Width, L, H]) || {L, H} <- Lines]].

option_label(#{long := Long, type := Type} = Spec) ->
    Short = case Spec of #{short := C} -> [$-, C, $,, $\s]; #{} -> "" end,
    Meta = case Type of
               flag -> "";
               _ -> [$\s | maps:get(metavar, Spec, string:uppercase(atom_to_list(Type)))]
           end,
    lists:flatten([Short, "--", Long, Meta]).

option_help(#{help := Help} = Spec) ->
    case Spec of
        #{default := D} when D =/= "", D =/= [], D =/= false -> io_lib:format("~ts (default ~ts)", [Help, show(D)]);
        #{} -> Help
    end.

show(D) when is_integer(D) -> integer_to_list(D);
show(D) when is_float(D) -> float_to_list(D, [short]);
show(D) when is_atom(D) -> atom_to_list(D);
show(D) -> D.

wrap(Text, Width) ->
    Words = string:lexemes(Text, " "),
    {Lines, Last} = lists:foldl(fun(W, {Done, []}) -> {Done, W};
                                   (W, {Done, Line}) ->
                                        case length(Line) + 1 + length(W) > Width of
                                            true -> {[Line | Done], W};
                                            false -> {Done, Line ++ " " ++ W}
                                        end
                                end, {[], []}, Words),
    lists:join("\n", lists:reverse([Last | Lines])).
