%% @private
%% @doc The history of a chaos run (`terrain chaos'): every operation of the nemesis
%% and of the clients, and every observation, as one JSON line each in
%% `history.jsonl'. A line holds at least `t' (ms since the run's start, on this VM's
%% monotonic clock), `node' (the node it is about, or null), `op' and `result'; some
%% operations add fields of their own (docs/RELIABILITY.md lists them).
%%
%% One writer process owns the file; callers send it lines (`log/4') and never wait.
%% The first line is the header: `format' `terrain.chaos_history/1', the seed, the
%% wall-clock start. `read/1' gives the lines back as maps (binary keys), which is what
%% the checker judges (terrain_lab_chaos_checker).
-module(terrain_lab_chaos_history).

%% API
-export([start/2,
         log/4,
         log/5,
         now_ms/1,
         stop/1,
         read/1]).

-include_lib("terrain_json/include/terrain_formats.hrl").

-define(MAX_HISTORY, 512 * 1024 * 1024).

-type history() :: #{pid := pid(), t0 := integer()}.
-export_type([history/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Opens `File' (which must not exist) and writes the header `Header' (a map
%% merged into the header line). The writer is linked to the caller.
-spec start(file:filename(), map()) -> {ok, history()} | {error, {write, file:filename(), term()}}.
start(File, Header) ->
    Self = self(),
    Line = maps:merge(Header, #{format => ?TERRAIN_FORMAT_CHAOS_HISTORY, started_at => terrain_lab_run:timestamp()}),
    Pid = spawn_link(fun() -> open(File, Line, Self) end),
    receive
        {Pid, ok} -> {ok, #{pid => Pid, t0 => erlang:monotonic_time(millisecond)}};
        {Pid, {error, Why}} -> {error, {write, File, Why}}
    end.

%% @equiv log(History, Node, Op, Result, #{})
-spec log(history(), node() | null, atom() | binary(), term()) -> ok.
log(History, Node, Op, Result) ->
    log(History, Node, Op, Result, #{}).

%% @doc Adds a line (stamped now) with extra fields `Extra'.
-spec log(history(), node() | null, atom() | binary(), term(), map()) -> ok.
log(#{pid := Pid} = History, Node, Op, Result, Extra) ->
    Pid ! {line, Extra#{t => now_ms(History), node => Node, op => Op, result => Result}},
    ok.

%% @doc Milliseconds since the run's start.
-spec now_ms(history()) -> non_neg_integer().
now_ms(#{t0 := T0}) ->
    erlang:monotonic_time(millisecond) - T0.

%% @doc Writes what is pending and closes the file.
-spec stop(history()) -> ok | {error, {write, file:filename(), term()}}.
stop(#{pid := Pid}) ->
    Ref = erlang:monitor(process, Pid),
    Pid ! {stop, self(), Ref},
    receive
        {Ref, Result} -> erlang:demonitor(Ref, [flush]), Result;
        {'DOWN', Ref, process, Pid, Why} -> {error, {write, "history.jsonl", Why}}
    end.

%% @doc The lines of a history file: the header, then the lines in the order written.
-spec read(file:filename()) -> {ok, map(), [map()]} | {error, term()}.
read(File) ->
    case terrain_lab_files:read(File, ?MAX_HISTORY) of
        {ok, Text} ->
            Lines = [L || L <- binary:split(Text, <<"\n">>, [global]), L =/= <<>>],
            decode(Lines, File, 1, []);
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Internal

%% The writer: opens the file (a raw file belongs to the process that opened it),
%% writes the header, then every line it is sent.
-spec open(file:filename(), map(), pid()) -> ok.
open(File, Header, Parent) ->
    case file:open(File, [write, exclusive, raw, binary, {delayed_write, 65536, 200}]) of
        {ok, Fd} ->
            case file:write(Fd, [terrain_json:encode(Header), $\n]) of
                ok -> Parent ! {self(), ok}, loop(Fd, File);
                {error, _} = Error -> _ = file:close(Fd), Parent ! {self(), Error}, ok
            end;
        {error, _} = Error ->
            Parent ! {self(), Error},
            ok
    end.

-spec loop(file:fd(), file:filename()) -> ok.
loop(Fd, File) ->
    receive
        {line, Line} ->
            case file:write(Fd, [terrain_json:encode(Line), $\n]) of
                ok -> loop(Fd, File);
                {error, Why} -> exit({write, File, Why})
            end;
        {stop, From, Ref} ->
            Result = case file:close(Fd) of
                         ok -> ok;
                         {error, Why} -> {error, {write, File, Why}}
                     end,
            From ! {Ref, Result},
            ok
    end.

-spec decode([binary()], file:filename(), pos_integer(), [map()]) -> {ok, map(), [map()]} | {error, term()}.
decode([], File, _N, []) ->
    {error, {chaos, {history, File, 0, "the file is empty"}}};
decode([], _File, _N, Acc) ->
    [Header | Lines] = lists:reverse(Acc),
    case maps:get(<<"format">>, Header, undefined) of
        ?TERRAIN_FORMAT_CHAOS_HISTORY -> {ok, Header, Lines};
        Other -> {error, {chaos, {history, "", 1, io_lib:format("format ~0tp, expected ~ts",
                                                                 [Other, ?TERRAIN_FORMAT_CHAOS_HISTORY])}}}
    end;
decode([Line | Rest], File, N, Acc) ->
    case terrain_json:decode(Line) of
        {ok, #{} = Map} -> decode(Rest, File, N + 1, [Map | Acc]);
        {ok, _} -> {error, {chaos, {history, File, N, "a line is not a JSON object"}}};
        {error, {json, _, Why}} -> {error, {chaos, {history, File, N, Why}}}
    end.
