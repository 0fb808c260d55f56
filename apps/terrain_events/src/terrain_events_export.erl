%% @private
%% @doc Events as files: raw events as JSON lines (`terrain.events/1') and the Chrome
%% trace-event format that ui.perfetto.dev and chrome://tracing open.
%%
%% events.jsonl: the first line is a header `{"format": "terrain.events/1", "nodes":
%% [...], "offsets_us": {node: offset}, "lost": N}`, then one event per line:
%% `{"time_us", "node", "pid", "collector", "name": "windtunnel.compute",
%% "measurements": {...}, "metadata": {...}}` with times already corrected to the
%% reader's clock. Atoms become strings, pids and other terms their printed form.
%%
%% trace.json: a JSON object with `traceEvents'. Each node is a process (`pid', named
%% by a `process_name' metadata event), each worker (metadata key `worker') or else
%% each Erlang process a thread (`tid', named by `thread_name'). An event with a
%% `duration_us' measurement is a complete slice (`ph' "X", `ts' its start, `dur'),
%% any other an instant (`ph' "i", thread scope); `args' are its metadata (the wind
%% tunnel's step number). Times are microseconds from the first event.
-module(terrain_events_export).

%% API
-export([write_jsonl/3,
         read_jsonl/1,
         write_perfetto/2]).

-include_lib("terrain_json/include/terrain_formats.hrl").
-define(EVENTS_FORMAT, ?TERRAIN_FORMAT_EVENTS).
-define(TRACE_FORMAT, ?TERRAIN_FORMAT_TRACE).

%% @doc Writes merged events and their header to `File' (temporary name, then
%% renamed).
-spec write_jsonl(file:filename(), [terrain_events_view:event()], map()) -> ok | {error, term()}.
write_jsonl(File, Events, Header) ->
    Lines = [terrain_json:encode(json_value(Header#{format => ?EVENTS_FORMAT})), $\n
             | [[terrain_json:encode(to_json(E)), $\n] || E <- Events]],
    write_in_dir(File, Lines).

%% @doc Reads an events file: its header and its events as decoded JSON maps.
-spec read_jsonl(file:filename()) -> {ok, map(), [map()]} | {error, term()}.
read_jsonl(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            case [L || L <- binary:split(Bin, <<"\n">>, [global]), L =/= <<>>] of
                [First | Rest] ->
                    case terrain_json:decode(First) of
                        {ok, #{<<"format">> := ?EVENTS_FORMAT} = Header} -> decode_lines(Rest, Header, [], 2, File);
                        {ok, _} -> {error, {events_file, File, not_events}};
                        {error, Why} -> {error, {events_file, File, {line, 1, Why}}}
                    end;
                [] ->
                    {error, {events_file, File, empty}}
            end;
        {error, Why} ->
            {error, {file, File, Why}}
    end.

decode_lines([], Header, Acc, _N, _File) ->
    {ok, Header, lists:reverse(Acc)};
decode_lines([L | Rest], Header, Acc, N, File) ->
    case terrain_json:decode(L) of
        {ok, #{<<"time_us">> := T, <<"name">> := _} = E} when is_integer(T) -> decode_lines(Rest, Header, [E | Acc], N + 1, File);
        {ok, _} -> {error, {events_file, File, {line, N, not_an_event}}};
        {error, Why} -> {error, {events_file, File, {line, N, Why}}}
    end.

%% @doc Writes the Chrome trace-event JSON of events (decoded JSON maps, as
%% `read_jsonl/1' returns them).
-spec write_perfetto(file:filename(), [map()]) -> ok | {error, term()}.
write_perfetto(File, JsonEvents) ->
    write_in_dir(File, terrain_json:encode(perfetto(JsonEvents))).

%% @doc The Chrome trace-event JSON object of events (decoded JSON maps).
-spec perfetto([map()]) -> map().
perfetto([]) ->
    #{format => ?TRACE_FORMAT, traceEvents => [], displayTimeUnit => <<"ms">>};
perfetto(JsonEvents) ->
    T0 = lists:min([start(E) || E <- JsonEvents]),
    Nodes = lists:usort([N || #{<<"node">> := N} <- JsonEvents]),
    NodeIds = maps:from_list(lists:zip(Nodes, lists:seq(1, length(Nodes)))),
    Threads = lists:usort([{maps:get(N, NodeIds), thread(E)} || #{<<"node">> := N} = E <- JsonEvents]),
    Meta = [#{name => <<"process_name">>, ph => <<"M">>, pid => Id, tid => 0, args => #{name => N}}
            || {N, Id} <- maps:to_list(NodeIds)]
        ++ [#{name => <<"thread_name">>, ph => <<"M">>, pid => Pid, tid => Tid, args => #{name => Name}}
            || {Pid, {Tid, Name}} <- Threads]
        ++ [#{name => <<"thread_sort_index">>, ph => <<"M">>, pid => Pid, tid => Tid, args => #{sort_index => Tid}}
            || {Pid, {Tid, _}} <- Threads],
    Events = [trace_event(E, maps:get(N, NodeIds), T0) || #{<<"node">> := N} = E <- JsonEvents],
    #{format => ?TRACE_FORMAT, displayTimeUnit => <<"ms">>, traceEvents => Meta ++ Events,
      otherData => #{source => <<"terrain events">>, time_origin_us => T0}}.

start(#{<<"time_us">> := T, <<"measurements">> := #{<<"duration_us">> := D}}) when is_number(D) -> T - round(D);
start(#{<<"time_us">> := T}) -> T.

%% A worker's track is its number + 1; any other process's a number from its pid.
thread(#{<<"metadata">> := #{<<"worker">> := W}}) when is_integer(W) ->
    {W + 1, <<"worker ", (integer_to_binary(W))/binary>>};
thread(#{<<"pid">> := Pid}) ->
    {100000 + erlang:phash2(Pid, 1000000), Pid}.

trace_event(#{<<"name">> := Name} = E, Pid, T0) ->
    {Tid, _} = thread(E),
    [Category | _] = Parts = binary:split(Name, <<".">>, [global]),
    Base = #{name => lists:last(Parts), cat => Category, pid => Pid, tid => Tid, ts => start(E) - T0,
             args => maps:get(<<"metadata">>, E, #{})},
    case E of
        #{<<"measurements">> := #{<<"duration_us">> := D}} when is_number(D) -> Base#{ph => <<"X">>, dur => D};
        _ -> Base#{ph => <<"i">>, s => <<"t">>}
    end.

%% @doc One event as a JSON map.
-spec to_json(terrain_events_view:event()) -> map().
to_json(#{time := T, node := Node, pid := Pid, collector := C, name := Name, measurements := M, metadata := Md}) ->
    #{time_us => T, node => atom_to_binary(Node), pid => printed(Pid), collector => C,
      name => iolist_to_binary(lists:join(".", [atom_to_binary(P) || P <- Name])),
      measurements => json_value(M), metadata => json_value(Md)}.

json_value(M) when is_map(M) ->
    maps:from_list([{key(K), json_value(V)} || {K, V} <- maps:to_list(M)]);
json_value(V) when is_binary(V); is_number(V); is_atom(V) -> V;
json_value(L) when is_list(L) ->
    case io_lib:printable_unicode_list(L) of
        true when L =/= [] -> unicode:characters_to_binary(L);
        _ -> [json_value(V) || V <- L]
    end;
json_value(V) -> printed(V).

key(K) when is_atom(K) -> K;
key(K) when is_binary(K) -> K;
key(K) -> printed(K).

printed(Term) ->
    iolist_to_binary(io_lib:format("~0tp", [Term])).

%% The file written whole (terrain_json:write_atomically/2), its directory made first.
write_in_dir(File, Data) ->
    case filelib:ensure_dir(File) of
        ok -> terrain_json:write_atomically(File, Data);
        {error, Why} -> {error, {file, File, Why}}
    end.
