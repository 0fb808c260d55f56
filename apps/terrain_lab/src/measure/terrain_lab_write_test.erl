%% @private
%% @doc `terrain write-test': the timed parallel write of Henwood et al.,
%% on directories instead of Lustre storage targets.
%%
%% One logical file of `--size' MiB is striped round-robin over the `--targets'
%% directories in stripes of `--stripe' KiB (stripe k goes to target k mod T), so each
%% target receives one part file, written by its own process at the same time as the
%% others, in stripe-sized synchronous writes (`file:open/2' with `sync', i.e. O_SYNC;
%% the flag is checked in /proc once per test). Per run the CSV row holds:
%%
%% `run, total_s, alloc_s, open_s, write_s, close_s, slowest_target, slowest_s, bytes, status'
%%
%% where `alloc_s' is the time to allocate the stripe buffer (Henwood et al. timed calloc),
%% `open_s', `write_s' and `close_s' are the largest time any target's writer spent in
%% that phase, `total_s' is the wall time from the start of the run until the last
%% writer finished, and `slowest_target' is that writer's directory with its own time
%% in `slowest_s'. Each row is on disk before the next run starts.
%%
%% Part files are created exclusively (never overwriting a file terrain did not
%% create) and removed after every run. A failing run (no space, no permission, ...)
%% removes its parts, stops the test and names the target and the error; the rows of
%% the runs before it stay in the CSV.
-module(terrain_lab_write_test).

%% API
-export([run/2,
         format_error/1]).

%% Internal exports (checked on its own by terrain_lab_durations_SUITE)
-export([o_sync/1]).

-ignore_xref([{o_sync, 1}]).

-export_type([options/0]).

-define(COLUMNS, [run, total_s, alloc_s, open_s, write_s, close_s, slowest_target, slowest_s, bytes, status]).
-define(O_SYNC, 8#4010000).   % Linux: __O_SYNC | O_DSYNC

%% A writer's times, in native units: start and done are monotonic times, the phases
%% durations.
-type writer_times() :: #{start := integer(), open := integer(), write := integer(), close := integer(),
                          done := integer(), o_sync := boolean() | unknown}.

%% The options of `terrain write-test', as the command line gives them.
-type options() :: #{targets := [file:filename()],      % directories, one writer each
                     size := integer(),                 % MiB of the logical file
                     stripe := integer(),               % KiB per stripe
                     runs := integer(),
                     out := file:filename() | undefined}. % the durations CSV to create

%%--------------------------------------------------------------------
%% API

%% @doc Validates the options and runs the write test; progress goes to `Io''s `err'
%% device.
-spec run(options(), terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, Io) ->
    case validate(Options) of
        {ok, Test} -> start(Test, Io);
        {error, _} = Error -> Error
    end.

%% @doc Whether the file at `Path', open in this OS process, has O_SYNC set: reads
%% `/proc/self/fdinfo' for the descriptor that points at it. `unknown' without /proc.
-spec o_sync(file:filename()) -> boolean() | unknown.
o_sync(Path) ->
    Target = filename:absname(Path),
    Fds = case file:list_dir("/proc/self/fd") of
              {ok, Names} -> Names;
              {error, _} -> []
          end,
    Matching = [Fd || Fd <- Fds, file:read_link("/proc/self/fd/" ++ Fd) =:= {ok, Target}],
    case [flags(Fd) || Fd <- Matching] of
        [] -> unknown;
        Flags -> lists:all(fun(F) -> is_integer(F) andalso F band ?O_SYNC =:= ?O_SYNC end, Flags)
    end.

%% @doc A sentence for the errors of this module.
-spec format_error(term()) -> iolist().
format_error({write_test, {missing_option, Name}}) ->
    io_lib:format("--~s is required", [Name]);
format_error({write_test, {bad_option, Name, Value, Expected}}) ->
    io_lib:format("--~s ~0tp: expected ~s", [Name, Value, Expected]);
format_error({write_test, {not_a_directory, Dir}}) ->
    io_lib:format("target ~ts is not a directory", [Dir]);
format_error({write_test, {duplicate_target, Dir}}) ->
    io_lib:format("target ~ts is given more than once", [Dir]);
format_error({write_test, {run_failed, Run, Target, Phase, Why, Kept, Out}}) ->
    io_lib:format("run ~b: ~s ~ts failed: ~ts; the ~b run~s measured before it ~s kept in ~ts",
                  [Run, Phase, Target, posix(Why), Kept, plural(Kept), is_are(Kept), Out]).

%%--------------------------------------------------------------------
%% Options

validate(#{targets := Targets, size := Size, stripe := Stripe, runs := Runs, out := Out}) ->
    Absolute = [filename:absname(T) || T <- Targets],
    NotDirectories = [T || T <- Absolute, not filelib:is_dir(T)],
    Duplicates = Absolute -- lists:usort(Absolute),
    if
        Targets =:= [] -> {error, {write_test, {missing_option, targets}}};
        Out =:= undefined -> {error, {write_test, {missing_option, out}}};
        not (is_integer(Size) andalso Size > 0) -> {error, {write_test, {bad_option, size, Size, "MiB > 0"}}};
        not (is_integer(Stripe) andalso Stripe > 0) -> {error, {write_test, {bad_option, stripe, Stripe, "KiB > 0"}}};
        not (is_integer(Runs) andalso Runs > 0) -> {error, {write_test, {bad_option, runs, Runs, "a count > 0"}}};
        NotDirectories =/= [] -> {error, {write_test, {not_a_directory, hd(NotDirectories)}}};
        Duplicates =/= [] -> {error, {write_test, {duplicate_target, hd(Duplicates)}}};
        true -> {ok, #{targets => Absolute, size => Size * 1024 * 1024, stripe => Stripe * 1024,
                       runs => Runs, out => Out}}
    end.

%%--------------------------------------------------------------------
%% The test

start(#{targets := Targets, size := Size, stripe := Stripe, runs := Runs, out := Out} = Test, Io) ->
    case terrain_lab_csv:create(Out, ?COLUMNS) of
        {ok, Csv} ->
            terrain_lab_io:progress(Io, "write-test: ~b MiB striped over ~b targets in ~b KiB stripes, ~b runs, "
                                    "O_SYNC~n", [Size div (1024 * 1024), length(Targets), Stripe div 1024, Runs]),
            try
                runs(Test, Csv, 1, Io)
            after
                terrain_lab_csv:close(Csv)
            end;
        {error, _} = Error ->
            Error
    end.

runs(#{runs := Runs, out := Out}, _Csv, Run, Io) when Run > Runs ->
    terrain_lab_io:progress(Io, "write-test: ~b runs written to ~ts~n", [Runs, Out]),
    ok;
runs(#{runs := Runs, out := Out} = Test, Csv, Run, Io) ->
    case one_run(Test, Run) of
        {ok, Row} ->
            case terrain_lab_csv:write_row(Csv, Row) of
                ok ->
                    _ = Run =:= 1 andalso report_sync(Row, Io),
                    terrain_lab_io:progress(Io, "run ~b/~b: ~.3f s (slowest ~ts)~n",
                                            [Run, Runs, maps:get(total_s, Row), maps:get(slowest_target, Row)]),
                    runs(Test, Csv, Run + 1, Io);
                {error, _} = Error ->
                    Error
            end;
        {error, Target, Phase, Why} ->
            {error, {write_test, {run_failed, Run, Target, Phase, Why, Run - 1, Out}}}
    end.

report_sync(#{o_sync := OSync}, Io) ->
    terrain_lab_io:progress(Io, "~ts~n", [sync_sentence(OSync)]).

sync_sentence(true) -> "O_SYNC verified on the open part files";
sync_sentence(false) -> "warning: O_SYNC is NOT set on the open part files";
sync_sentence(unknown) -> "warning: O_SYNC could not be checked (no /proc)".

%% One run: every target's writer starts at once; the run ends when the last is done.
one_run(#{targets := Targets, size := Size, stripe := Stripe}, Run) ->
    T0 = erlang:monotonic_time(),
    Buffer = binary:copy(<<0>>, Stripe),
    T1 = erlang:monotonic_time(),
    Parts = lists:zip(Targets, part_sizes(Size, Stripe, length(Targets))),
    Self = self(),
    Writers = [begin
                   File = part_file(Target, Run),
                   {Pid, Ref} = spawn_monitor(fun() -> Self ! {self(), write_part(File, Bytes, Buffer, Run =:= 1)} end),
                   {Pid, Ref, Target, File}
               end || {Target, Bytes} <- Parts],
    Results = [{Target, File, await_writer(Pid, Ref)} || {Pid, Ref, Target, File} <- Writers],
    %% Only files this run created are removed: a failed exclusive open means the
    %% file belongs to someone else.
    _ = [file:delete(File) || {_, File, Result} <- Results, not is_open_failure(Result)],
    case [{Target, Phase, Why} || {Target, _, {error, Phase, Why}} <- Results] of
        [{Target, Phase, Why} | _] ->
            {error, Target, Phase, Why};
        [] ->
            Done = [{Target, Times} || {Target, _, {ok, Times}} <- Results],
            LaterFirst = fun({_, A}, {_, B}) -> maps:get(done, A) >= maps:get(done, B) end,
            {SlowestTarget, Slowest} = hd(lists:sort(LaterFirst, Done)),
            Phase = fun(P) -> seconds(lists:max([maps:get(P, T) || {_, T} <- Done])) end,
            {ok, #{run => Run,
                   total_s => seconds(maps:get(done, Slowest) - T1),
                   alloc_s => seconds(T1 - T0),
                   open_s => Phase(open),
                   write_s => Phase(write),
                   close_s => Phase(close),
                   slowest_target => list_to_binary(SlowestTarget),
                   slowest_s => seconds(maps:get(done, Slowest) - maps:get(start, Slowest)),
                   bytes => Size,
                   status => ok,
                   o_sync => sync_state([maps:get(o_sync, T) || {_, T} <- Done])}}
    end.

is_open_failure({error, open, _}) -> true;
is_open_failure(_) -> false.

await_writer(Pid, Ref) ->
    receive
        {Pid, Result} -> erlang:demonitor(Ref, [flush]), Result;
        {'DOWN', Ref, process, Pid, Why} -> {error, write, {writer_crashed, Why}}
    end.

%% Bytes per target: whole stripes round-robin, the last stripe possibly partial.
part_sizes(Size, Stripe, Targets) ->
    Full = Size div Stripe,
    Last = Size rem Stripe,
    [Stripe * (Full div Targets + case I < Full rem Targets of true -> 1; false -> 0 end)
     + case Last > 0 andalso I =:= Full rem Targets of true -> Last; false -> 0 end
     || I <- lists:seq(0, Targets - 1)].

part_file(Target, Run) ->
    filename:join(Target, io_lib:format("terrain-write-~s-~b.part", [os:getpid(), Run])).

-spec write_part(file:filename(), non_neg_integer(), binary(), boolean()) ->
          {ok, writer_times()} | {error, open | write | close, term()}.
write_part(File, Bytes, Buffer, CheckSync) ->
    Start = erlang:monotonic_time(),
    case file:open(File, [write, exclusive, raw, binary, sync]) of
        {ok, Fd} -> write_opened(Fd, File, Bytes, Buffer, CheckSync, Start);
        {error, Why} -> {error, open, Why}
    end.

%% The phases of write_part/4, one per function: each takes the times measured so far.
write_opened(Fd, File, Bytes, Buffer, CheckSync, Start) ->
    Opened = erlang:monotonic_time(),
    Sync = case CheckSync of true -> o_sync(File); false -> true end,
    case write_all(Fd, Bytes, Buffer) of
        ok ->
            close_written(Fd, #{start => Start, open => Opened - Start, o_sync => Sync}, Opened);
        {error, Why} ->
            _ = file:close(Fd),
            {error, write, Why}
    end.

close_written(Fd, Times, Opened) ->
    Written = erlang:monotonic_time(),
    case file:close(Fd) of
        ok ->
            Closed = erlang:monotonic_time(),
            {ok, Times#{write => Written - Opened, close => Closed - Written, done => Closed}};
        {error, Why} ->
            {error, close, Why}
    end.

write_all(_Fd, 0, _Buffer) ->
    ok;
write_all(Fd, Bytes, Buffer) when Bytes >= byte_size(Buffer) ->
    case file:write(Fd, Buffer) of
        ok -> write_all(Fd, Bytes - byte_size(Buffer), Buffer);
        {error, _} = Error -> Error
    end;
write_all(Fd, Bytes, Buffer) ->
    file:write(Fd, binary:part(Buffer, 0, Bytes)).

sync_state(States) ->
    case lists:usort(States) of
        [true] -> true;
        S -> case lists:member(false, S) of true -> false; false -> unknown end
    end.

flags(Fd) ->
    case file:read_file("/proc/self/fdinfo/" ++ Fd) of
        {ok, Info} ->
            case re:run(Info, "flags:\\s*([0-7]+)", [{capture, all_but_first, list}]) of
                {match, [Octal]} -> list_to_integer(Octal, 8);
                nomatch -> unknown
            end;
        {error, _} ->
            unknown
    end.

seconds(Native) ->
    erlang:convert_time_unit(Native, native, nanosecond) / 1.0e9.

posix(Why) when is_atom(Why) ->
    case file:format_error(Why) of
        "unknown POSIX error" ++ _ -> io_lib:format("~0tp", [Why]);
        Text -> [Text, " (", string:uppercase(atom_to_list(Why)), ")"]
    end;
posix(Why) ->
    io_lib:format("~0tp", [Why]).

plural(1) -> "";
plural(_) -> "s".

is_are(1) -> "is";
is_are(_) -> "are".
