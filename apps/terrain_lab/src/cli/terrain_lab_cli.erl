%% @private
%% @doc The `terrain' command line: the escript's main module.
%%
%% Subcommands are data: each command module `terrain_lab_cmd_NAME' exports
%% `commands() -> [command()]', one map per subcommand with its options, argument
%% count and handler, and {@link commands/0} is those lists in the order of
%% {@link command_modules/0}. Parsing, help and errors are handled here once, so a
%% handler only sees validated options and prints its results:
%% ```
%% run(Options :: #{atom() => term()}, Args :: [string()], Io :: io()) -> ok | {error, Reason}
%% '''
%% Output goes to `Io''s `out' device (results) and `err' device (progress, errors),
%% through `terrain_lab_io', so tests run the CLI in-process and capture both. A
%% returned `{error, Reason}' is printed on `err' with exit status 1 (its sentence from
%% the one table of error tags, terrain_lab_cli_errors); usage errors exit with 2.
%%
%% Command-line options are checked here from their definitions: a value not of its
%% `type' (`{list, integer}': comma-separated integers), a missing `required' option, a
%% value (a list's element) outside its `range', not among its `choices' or failing its
%% `check' is a usage error (exit 2) that names the option, the value and what was
%% expected. A handler that finds a usage error the definitions cannot express (two
%% options that only make sense together) returns `{error, {usage, Message}}', also
%% exit 2. A closed stdout (`terrain attrs | head -1') ends the command quietly with
%% exit 141, the status of a program killed by SIGPIPE.
-module(terrain_lab_cli).

%% API
-export([main/1,
         run/2,
         command_modules/0,
         commands/0,
         list_of/2,
         number/1]).

-export_type([io/0, command/0, option/0, element_type/0]).

-ifdef(TEST).
-export([parse/2]).
-endif.

-type io() :: terrain_lab_io:io().    % results on `out', progress and errors on `err'

-type option() ::
        #{name := atom(),              % key in the handler's options map
          long := string(),            % --long
          short => char(),             % -s
          type := flag | string | integer | float | list | {list, element_type()},
                                       % list: repeatable, comma-separated strings; {list, T}: of T
          default => term(),           % value when absent (flags default to false, lists to [])
          required => boolean(),       % the command needs it: absent is a usage error; --help says so
          range => {number() | '-inf', number() | inf}, % integer, float (a list's: each element):
                                       % inclusive bounds
          choices => [string()],       % string (a list's: each element): the value must be one of these
          check => {fun((term()) -> boolean()), Expected :: string()}, % any other rule on the (whole) value
          metavar => string(),         % placeholder in the help text
          help := string()}.

%% The elements of a `{list, T}' option.
-type element_type() :: integer | float | string.

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
-define(EXIT_PIPE, 141).         % 128 + SIGPIPE: stdout was closed under us
-define(STDOUT_GRACE_MS, 50).    % how long a failed write takes to close stdout's port (1-7 ms measured)

%%--------------------------------------------------------------------
%% API

%% @doc The escript entry point.
-spec main([string()]) -> no_return().
main(Args) ->
    ok = terrain_lab_cli_log:install(),
    ok = terrain_lab_cli_signals:install(),
    ok = terrain_lab_cli_tls:child_init(),
    %% A command on a TLS cluster runs in a child VM with TLS distribution (terrain_lab_cli_tls).
    ok = crash_dump(),
    %% stdout and stderr carry UTF-8: non-ASCII input is echoed as typed (the
    %% escript's devices default to Latin-1 bytes)
    ok = io:setopts(standard_io, [{encoding, unicode}]),
    ok = io:setopts(standard_error, [{encoding, unicode}]),
    Code = case tls_optfile(Args) of
               {ok, OptFile} -> terrain_lab_cli_tls:relaunch(Args, OptFile);
               none -> stdout_kept(run(unicode_args(Args), terrain_lab_io:standard()))
           end,
    ok = terrain_lab_cli_signals:settled(),   % a SIGTERM being handled ends with 143, not Code
    _ = terrain_lab_cleanup:run(),       % whatever a failed command left (the one exit path)
    terrain_lab_cli_log:finish(),
    erlang:halt(Code).

%% @doc Runs the command line `Args' and returns the exit status.
-spec run([string()], io()) -> non_neg_integer().
run([], Io) ->
    usage_error(Io, "no command given");
run([Help | _], Io) when Help =:= "--help"; Help =:= "-h" ->
    terrain_lab_io:out(Io, "~ts", [top_help()]),
    ?EXIT_OK;
run(["--version" | _], Io) ->
    terrain_lab_io:out(Io, "terrain ~s~n", [version()]),
    ?EXIT_OK;
run(["help"], Io) ->
    terrain_lab_io:out(Io, "~ts", [top_help()]),
    ?EXIT_OK;
run(["help", Name | _], Io) ->
    case find(Name) of
        {ok, Command} -> terrain_lab_io:out(Io, "~ts", [command_help(Command)]), ?EXIT_OK;
        error -> usage_error(Io, io_lib:format("unknown command '~ts'", [Name]))
    end;
run(["-" ++ _ = Option | _], Io) ->
    usage_error(Io, io_lib:format("unknown option '~ts'", [Option]));
run([Name | Rest], Io) ->
    case find(Name) of
        {ok, Command} -> run_command(Command, Rest, Io);
        error -> usage_error(Io, io_lib:format("unknown command '~ts'", [Name]))
    end.

%% @doc The modules that define the commands, in the order `terrain --help' lists
%% their commands. Each exports `commands() -> [command()]'.
-spec command_modules() -> [module()].
command_modules() ->
    [terrain_lab_cmd_demo,
     terrain_lab_cmd_cluster,      % up, status, down
     terrain_lab_cmd_netem,
     terrain_lab_cmd_chaos,
     terrain_lab_cmd_write_test,
     terrain_lab_cmd_time_task,
     terrain_lab_cmd_attrs,
     terrain_lab_cmd_dashboard,
     terrain_lab_cmd_choose,
     terrain_lab_cmd_probe,
     terrain_lab_cmd_topology,
     terrain_lab_cmd_collective,
     terrain_lab_cmd_bench,
     terrain_lab_cmd_emas,
     terrain_lab_cmd_events,
     terrain_lab_cmd_aco,
     terrain_lab_cmd_experiment,
     terrain_lab_cmd_report,
     terrain_lab_cmd_hostlist,
     terrain_lab_cmd_testbed].

%% @doc Every subcommand, in the order `terrain --help' lists them: the commands of
%% {@link command_modules/0}, module by module.
-spec commands() -> [command()].
commands() ->
    lists:append([Module:commands() || Module <- command_modules()]).

%% A sentence for an error a command returned: the CLI's one table of error tags
%% (terrain_lab_cli_errors).
-spec format_error(term()) -> iolist().
format_error(Reason) ->
    terrain_lab_cli_errors:format(Reason).

%%--------------------------------------------------------------------
%% Internal functions

%% A command that succeeded but whose results did not reach stdout (a reader such as
%% `head' or `true' closed the pipe, or /dev/full) ends with 141 as the others do. The
%% escript's stdout process writes through a port that closes when a write fails, a
%% few milliseconds after the write was handed over; so after a round trip to that
%% process (every result handed over), the exit waits up to ?STDOUT_GRACE_MS for the
%% port to close. (A descriptor closed before the start, `>&-', cannot be told from a
%% working one.)
stdout_kept(?EXIT_OK) ->
    case whereis(user) of
        undefined ->
            ?EXIT_OK;
        User ->
            Ports = case process_info(User, links) of
                        {links, Links} -> [P || P <- Links, is_port(P)];
                        undefined -> []
                    end,
            Monitors = [erlang:monitor(port, P) || P <- Ports] ++ [erlang:monitor(process, User)],
            _ = io:getopts(standard_io),
            Deadline = erlang:monotonic_time(millisecond) + ?STDOUT_GRACE_MS,
            Down = lists:any(fun(M) ->
                                     Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
                                     receive {'DOWN', M, _, _, _} -> true after Left -> false end
                             end, Monitors),
            [erlang:demonitor(M, [flush]) || M <- Monitors],
            case Down of
                true -> ?EXIT_PIPE;
                false -> ?EXIT_OK
            end
    end;
stdout_kept(Code) ->
    Code.

%% Command-line arguments as characters. Under a Latin-1 file name encoding (a C or
%% POSIX locale) the VM hands over UTF-8 arguments as their bytes; an argument that is
%% valid UTF-8 is decoded, so non-ASCII input is echoed as typed.
unicode_args(Args) ->
    case file:native_name_encoding() of
        utf8 -> Args;
        latin1 -> [unicode_arg(A) || A <- Args]
    end.

unicode_arg(Arg) ->
    case lists:all(fun(C) -> C < 256 end, Arg) andalso unicode:characters_to_list(list_to_binary(Arg), utf8) of
        Chars when is_list(Chars) -> Chars;
        _ -> Arg
    end.

%% No command writes erl_crash.dump into the working directory: should the VM
%% crash (a bug), the dump goes to the CLI's log directory, at most 100 MB of it; the
%% nodes the CLI starts inherit the same (they start in its environment).
crash_dump() ->
    case os:getenv("ERL_CRASH_DUMP") of
        false -> os:putenv("ERL_CRASH_DUMP",
                           filename:join(filename:dirname(terrain_lab_cli_log:file()), "erl_crash.dump"));
        _ -> true
    end,
    case os:getenv("ERL_CRASH_DUMP_BYTES") of
        false -> os:putenv("ERL_CRASH_DUMP_BYTES", integer_to_list(100 * 1024 * 1024));
        _ -> true
    end,
    ok.

%% The TLS option file the command line `Args' needs this CLI to run with, or none;
%% a command line that does not parse runs as it is (and reports its usage error).
tls_optfile([Name | Rest]) ->
    case find(Name) of
        {ok, Command} ->
            case parse(Command, Rest) of
                {ok, Options, CommandArgs} -> terrain_lab_cli_tls:optfile(Name, Options, CommandArgs);
                _ -> none
            end;
        error ->
            none
    end;
tls_optfile([]) ->
    none.

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
            terrain_lab_io:out(Io, "~ts", [command_help(Command)]),
            ?EXIT_OK;
        {error, Message} ->
            command_usage_error(Io, Name, Message);
        {ok, Options, Args} ->
            try Module:Function(Options, Args, Io) of
                ok ->
                    ?EXIT_OK;
                {error, {usage, Message}} ->
                    command_usage_error(Io, Name, Message);
                {error, Reason} ->
                    ok = terrain_lab_cli_signals:settled(),   % a child SIGTERM stopped is not the failure
                    terrain_lab_io:progress(Io, "terrain ~ts: ~ts~n", [Name, format_error(Reason)]),
                    ?EXIT_ERROR
            catch
                Class:Reason:Stack ->
                    case closed_output(Io, Class, Reason) of
                        true ->
                            ?EXIT_PIPE;
                        false ->
                            ok = terrain_lab_cli_signals:settled(),
                            terrain_lab_io:progress(Io, "terrain ~ts: internal error: ~0tP:~0tP~n  ~0tP~n",
                                                    [Name, Class, 5, Reason, 20, Stack, 20]),
                            ?EXIT_INTERNAL
                    end
            end
    end.

command_usage_error(Io, Name, Message) ->
    Text = case is_tuple(Message) of
               true -> format_error(Message);  % a reason, e.g. {hosts, _}
               false -> Message                % a sentence already (iodata)
           end,
    terrain_lab_io:progress(Io, "terrain ~ts: ~ts~nRun 'terrain ~ts --help' for usage.~n", [Name, Text, Name]),
    ?EXIT_USAGE.

%% Did the command fail because its `out' device is gone (a reader such as `head'
%% closed the pipe)? Writing to it then raises `terminated'; the device process (the
%% escript's `user', or a test's capture) is dead.
closed_output(#{out := Device}, error, terminated) ->
    Pid = case Device of
              standard_io -> group_leader();
              Name when is_atom(Name) -> whereis(Name);
              P when is_pid(P) -> P
          end,
    not (is_pid(Pid) andalso is_process_alive(Pid));
closed_output(_Io, _Class, _Reason) ->
    false.

usage_error(Io, Message) ->
    terrain_lab_io:progress(Io, "terrain: ~ts~nRun 'terrain --help' for usage.~n", [Message]),
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
            Missing = [L || #{name := N, long := L, required := true} = Spec <- Specs,
                       maps:get(N, Options) =:= default(Spec)],
            if
                Missing =/= [] ->
                    {error, io_lib:format("option~s ~ts required", [plural(length(Missing)),
                                                                  [lists:join(", ", ["--" ++ L || L <- Missing]),
                                                                   case Missing of [_] -> " is"; _ -> " are" end]])};
                Count < Min ->
                    {error, io_lib:format("expected at least ~b argument~s, got ~b", [Min, plural(Min), Count])};
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
take_value(#{name := Name, type := Type} = Spec, Flag, {value, Text}, Rest, Specs, Options, Positional) ->
    case convert(Type, Text) of
        {ok, Value} ->
            case valid(Spec, Value) of
                true when Type =:= list; element(1, Type) =:= list ->
                    Previous = case maps:get(Name, Options) of L when is_list(L), L =/= [] -> L; _ -> [] end,
                    parse(Rest, Specs, Options#{Name => Previous ++ Value}, Positional);
                true ->
                    parse(Rest, Specs, Options#{Name => Value}, Positional);
                false ->
                    {error, io_lib:format("option '~ts' expects ~ts, got '~ts'", [Flag, expected(Spec), Text])}
            end;
        error ->
            {error, io_lib:format("option '~ts' expects ~ts, got '~ts'", [Flag, expected(Spec), Text])}
    end.

%% Is a converted value (each element of a list) within the option's range, among its
%% choices, and does it (the whole value) pass its check?
valid(#{type := Type} = Spec, Value) ->
    Elements = case Type of {list, _} -> Value; list -> Value; _ -> [Value] end,
    lists:all(fun(E) -> in_range(maps:get(range, Spec, {'-inf', inf}), E)
                            andalso (not maps:is_key(choices, Spec) orelse lists:member(E, maps:get(choices, Spec)))
              end, Elements)
        andalso case Spec of
                    #{check := {Check, _}} -> Check(Value);
                    #{} -> true
                end.

in_range({Min, Max}, Value) ->
    (Min =:= '-inf' orelse Value >= Min) andalso (Max =:= inf orelse Value =< Max).

%% What an option's value must be, in words: "an integer >= 1", "one of a, b".
expected(#{check := {_, Expected}}) ->
    Expected;
expected(#{choices := Choices}) ->
    ["one of ", lists:join(", ", Choices)];
expected(#{type := Type, range := {Min, Max}}) ->
    [type_name(Type),
     case {Min, Max} of
         {'-inf', inf} -> "";
         {_, inf} -> [" >= ", show(Min)];
         {'-inf', _} -> [" <= ", show(Max)];
         _ -> [" from ", show(Min), " to ", show(Max)]
     end];
expected(#{type := Type}) ->
    type_name(Type).

%% @doc The comma-separated `Text' as a list of `Type' (empty elements skipped; a
%% number's blanks trimmed): the one parser of `{list, T}' options, also for a command
%% whose option is a list of T in one use and something else in another.
-spec list_of(element_type(), string()) -> {ok, list()} | error.
list_of(string, Text) ->
    {ok, [T || T <- string:split(Text, ",", all), T =/= ""]};
list_of(Type, Text) ->
    Converted = [convert(Type, string:trim(T)) || T <- string:split(Text, ",", all), string:trim(T) =/= ""],
    case lists:member(error, Converted) of
        true -> error;
        false -> {ok, [V || {ok, V} <- Converted]}
    end.

%% @doc A number as the `float' options read it (2.5, 10, 1e300, 1.5e-3), for a
%% command that reads numbers out of a string option (a comma-separated list).
-spec number(string()) -> {ok, float()} | error.
number(Text) ->
    convert(float, Text).

convert(string, Text) -> {ok, Text};
convert(list, Text) -> list_of(string, Text);
convert({list, Type}, Text) -> list_of(Type, Text);
convert(integer, Text) ->
    try {ok, list_to_integer(Text)} catch error:badarg -> error end;
convert(float, Text) ->
    %% 2.5, 10, 1e300 and 1.5e-3: Erlang's own syntax wants a fraction before the exponent
    Normal = case string:split(string:lowercase(Text), "e") of
                 [Mantissa, Exponent] when Mantissa =/= "" -> with_fraction(Mantissa) ++ "e" ++ Exponent;
                 [Mantissa] -> with_fraction(Mantissa);
                 _ -> Text
             end,
    try {ok, list_to_float(Normal)}
    catch error:badarg -> error
    end.

with_fraction(Mantissa) ->
    case lists:member($., Mantissa) of
        true -> Mantissa;
        false -> Mantissa ++ ".0"
    end.

type_name(integer) -> "an integer";
type_name(float) -> "a number";
type_name({list, integer}) -> "integers";
type_name({list, float}) -> "numbers";
type_name(_) -> "a value".

default(#{default := Default}) -> Default;
default(#{type := flag}) -> false;
default(#{type := list}) -> [];
default(#{type := {list, _}}) -> [];
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
               _ -> [$\s | maps:get(metavar, Spec, metavar(Type))]
           end,
    lists:flatten([Short, "--", Long, Meta]).

metavar({list, Type}) -> string:uppercase(atom_to_list(Type)) ++ ",...";
metavar(Type) -> string:uppercase(atom_to_list(Type)).

option_help(#{help := Help} = Spec) ->
    case Spec of
        #{required := true} -> [Help, " (required)"];
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
