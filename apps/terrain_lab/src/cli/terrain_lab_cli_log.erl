%% @private
%% @doc Where the `terrain' CLI's log events go: never to stdout.
%%
%% The CLI's VM is a node of the cluster it works on, and logger forwards an event of
%% a remote process whose group leader is on the CLI's node (every process the CLI
%% spawns there: probe clients and echoes, `erpc' calls) to the CLI's node. Its
%% default handler would print each as a multi-line `=WARNING REPORT====' block on
%% standard_io, which is the command's result stream. {@link install/0} replaces that
%% handler with two:
%% <ul>
%% <li>`terrain_cli_file': every event of level notice and above, in full, to the log
%%     file {@link file/0} (`$TERRAIN_LOG_DIR/cli.log', else
%%     `~/.cache/terrain/cli.log'; rotated at 1 MB, two files kept);</li>
%% <li>`terrain_cli_stderr' (this module): each warning or worse as one line on
%%     stderr, `terrain: warning: ...', at most three of a kind (the same message
%%     format or report label); {@link finish/0} then says how many more went to the
%%     file only. Once stdout is closed (`terrain attrs | head -1') the reports of its
%%     I/O server's crash go to the file only.</li>
%% </ul>
-module(terrain_lab_cli_log).

%% API
-export([install/0,
         finish/0,
         file/0]).  % the log file (its directory also takes a crash dump, terrain_lab_cli)

%% logger handler callback
-export([log/2]).

%% exports_not_used: log/2 is called by logger, as this module is a handler.
-ignore_xref([{log, 2}]).

-define(HANDLER, terrain_cli_stderr).
-define(FILE_HANDLER, terrain_cli_file).
-define(TABLE, terrain_lab_cli_log).
-define(PER_KIND, 3).
-define(LINE_CHARS, 240).

%% @doc Routes this VM's log events (and those forwarded from remote nodes) to the
%% log file and one-line warnings on stderr; nothing goes to stdout any more.
-spec install() -> ok.
install() ->
    _ = logger:remove_handler(default),
    _ = ets:info(?TABLE, name) =:= undefined andalso ets:new(?TABLE, [named_table, public, set]),
    File = file(),
    _ = filelib:ensure_dir(File) =:= ok andalso
        logger:add_handler(?FILE_HANDLER, logger_std_h,
                           #{level => notice,
                             config => #{file => File, max_no_bytes => 1000000, max_no_files => 2,
                                         filesync_repeat_interval => no_repeat},
                             formatter => {logger_formatter, #{single_line => false}}}),
    _ = logger:add_handler(?HANDLER, ?MODULE, #{level => warning}),
    ok.

%% @doc Says on stderr how many warnings were only written to the log file; flushes
%% the file. Called before the escript halts.
-spec finish() -> ok.
finish() ->
    Hidden = case ets:info(?TABLE, name) of
                 undefined -> 0;
                 _ -> lists:sum([max(0, N - ?PER_KIND) || {_, N} <- ets:tab2list(?TABLE)])
             end,
    _ = Hidden > 0 andalso io:format(standard_error, "terrain: ~b more warnings like these are in ~ts~n",
                                     [Hidden, file()]),
    _ = logger_std_h:filesync(?FILE_HANDLER),
    ok.

%% @doc The CLI's log file.
-spec file() -> file:filename().
file() ->
    case os:getenv("TERRAIN_LOG_DIR") of
        Dir when is_list(Dir), Dir =/= "" -> filename:join(Dir, "cli.log");
        _ -> filename:join(filename:basedir(user_cache, "terrain"), "cli.log")
    end.

%% @doc logger handler: one line on stderr, at most ?PER_KIND lines of a kind.
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(#{msg := Msg, level := Level} = Event, _Config) ->
    case whereis(user) of
        undefined -> ok;       % stdout is gone (a closed pipe): the crash of its I/O server is no news
        _ -> print(Msg, Level, Event)
    end.

print(Msg, Level, Event) ->
    Kind = kind(Msg),
    Count = ets:update_counter(?TABLE, Kind, 1, {Kind, 0}),
    case Count =< ?PER_KIND of
        true ->
            Line = logger_formatter:format(Event, #{single_line => true, legacy_header => false,
                                                    chars_limit => ?LINE_CHARS,
                                                    template => [msg]}),
            io:format(standard_error, "terrain: ~s: ~ts~n", [Level, string:trim(Line)]);
        false ->
            ok
    end.

%% Events of one kind: the same format string, the same report label, or the same
%% text up to its first digit.
kind({report, #{label := Label}}) -> {label, Label};
kind({report, Report}) when is_map(Report) -> {report, lists:sort(maps:keys(Report))};
kind({report, Report}) when is_list(Report) -> {report, [K || {K, _} <- Report]};
kind({report, _Report}) -> report;
kind({string, String}) ->
    {string, lists:takewhile(fun(C) -> not (C >= $0 andalso C =< $9) end, unicode:characters_to_list(String))};
kind({Format, _Args}) -> {format, Format}.
