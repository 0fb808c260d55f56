%% @private
%% @doc `terrain write-test': the timed parallel write of one file striped over
%% directories (the test itself, its CSV row and its errors: `terrain_lab_write_test').
-module(terrain_lab_cmd_write_test).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "write-test",
       summary => "Time parallel synchronous writes of one file striped over directories",
       usage => "",
       description => "Writes one logical file of SIZE MiB striped round-robin over the target directories "
                      "in STRIPE KiB stripes, one writer per target, all at once, with O_SYNC writes; RUNS "
                      "times. One CSV row per run (open, write, close, total, slowest target), on disk as it "
                      "goes. Never overwrites a file; removes its part files; a failed run keeps the rows "
                      "measured before it.",
       args => {0, 0},
       options => [#{name => size, long => "size", type => integer, default => 64, range => {1, inf}, metavar => "MiB",
                     help => "size of the logical file"},
                   #{name => targets, long => "targets", type => list, required => true, metavar => "DIR,...",
                     help => "target directories (repeatable or comma-separated)"},
                   #{name => stripe, long => "stripe", type => integer, default => 1024, range => {1, inf},
                     metavar => "KiB",
                     help => "stripe size"},
                   #{name => runs, long => "runs", type => integer, default => 10, range => {1, inf}, metavar => "N",
                     help => "number of runs"},
                   #{name => out, long => "out", type => string, required => true, metavar => "FILE",
                     help => "durations CSV to create"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain write-test'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(#{stripe := StripeKiB, targets := Targets} = Options, [], Io) ->
    %% the resource guard: each target's writer allocates a stripe buffer
    case terrain_lab_guard:memory([{"--stripe", max(1, length(Targets)), StripeKiB * 1024}]) of
        ok -> terrain_lab_write_test:run(maps:with([targets, size, stripe, runs, out], Options), Io);
        {error, _} = Refused -> Refused
    end.
