%% @private
%% @doc The dashboard's view of a chaos run (`terrain chaos', docs/RELIABILITY.md):
%% when the state directory the dashboard follows is a chaos run's (`OUT/state'), the
%% run's history (`OUT/history.jsonl') is read as it grows, and its timeline lines
%% become rows the page draws: bursts, faults and their ends (with their results),
%% the membership (`node' lines), and the observer's rounds when the highest version
%% or the number of distinct (version, tree) pairs changed.
%%
%% Pure but for the file read: the dashboard's view calls {@link read/1} once a second
%% and sends the new rows to the pages as the event `chaos'.
-module(terrain_lab_dashboard_chaos).

%% API
-export([new/1,
         read/1,
         rows/1]).

-define(MAX_READ, 4 * 1024 * 1024).   % bytes read per call (a long history catches up over several)
-define(KEPT, 2000).                  % rows kept for a page that connects later

-type chaos() :: #{file := file:filename(), offset := non_neg_integer(), rest := binary(),
                   last := {integer(), integer()} | none, rows := [map()]}.
-export_type([chaos/0]).

%%--------------------------------------------------------------------
%% API

%% @doc The chaos run of the state directory `Dir' (its history may not exist: then
%% nothing is ever read).
-spec new(file:filename()) -> chaos().
new(Dir) ->
    #{file => filename:join(filename:dirname(filename:absname(Dir)), "history.jsonl"), offset => 0, rest => <<>>,
      last => none, rows => []}.

%% @doc The rows of the lines appended since the last call, and the new state.
-spec read(chaos()) -> {[map()], chaos()}.
read(#{file := File, offset := Offset, rest := Rest, last := Last, rows := Kept} = Chaos) ->
    case file:open(File, [read, raw, binary]) of
        {ok, Fd} ->
            Data = case file:pread(Fd, Offset, ?MAX_READ) of
                       {ok, D} -> D;
                       _ -> <<>>
                   end,
            ok = file:close(Fd),
            Parts = binary:split(<<Rest/binary, Data/binary>>, <<"\n">>, [global]),
            {Complete, [Partial]} = lists:split(length(Parts) - 1, Parts),
            {New, Last1} = lines_to_rows(Complete, Last),
            {New, Chaos#{offset := Offset + byte_size(Data), rest := Partial, last := Last1,
                         rows := lists:sublist(lists:reverse(New) ++ Kept, ?KEPT)}};
        {error, _} ->
            {[], Chaos}
    end.

%% @doc The rows kept, oldest first (the snapshot's `chaos').
-spec rows(chaos()) -> [map()].
rows(#{rows := Rows}) ->
    lists:reverse(Rows).

%%--------------------------------------------------------------------
%% Internal

lines_to_rows(Lines, Last) ->
    {Rows, Last1} = lists:foldl(fun(Line, {Acc, L}) ->
                                        case terrain_json:decode(Line) of
                                            {ok, #{<<"op">> := _} = Map} -> row(Map, Acc, L);
                                            _ -> {Acc, L}      % the header, or a line not JSON
                                        end
                                end, {[], Last}, Lines),
    {lists:reverse(Rows), Last1}.

row(#{<<"op">> := <<"observe">>, <<"t">> := T, <<"result">> := Seen}, Acc, Last) when is_map(Seen) ->
    Pairs = lists:usort([P || P <- maps:values(Seen), is_list(P)]),
    Versions = [V || [V, _] <- Pairs, is_integer(V)],
    case Versions of
        [] -> {Acc, Last};
        _ ->
            Now = {lists:max(Versions), length(Pairs)},
            case Now =:= Last of
                true -> {Acc, Last};
                false -> {[#{t => T, op => versions, version => element(1, Now), pairs => element(2, Now)} | Acc], Now}
            end
    end;
row(#{<<"op">> := Op, <<"t">> := T} = Line, Acc, Last) ->
    case lists:member(Op, [<<"burst_start">>, <<"burst_end">>, <<"node">>, <<"final">>, <<"leftover">>,
                           <<"kill">>, <<"stop">>, <<"cont">>, <<"partition">>, <<"heal">>, <<"slow">>,
                           <<"restore">>, <<"join">>, <<"leave">>, <<"move">>, <<"crash">>]) of
        true -> {[maps:merge(#{t => T, op => Op}, maps:with([<<"node">>, <<"result">>, <<"burst">>], Line)) | Acc],
                 Last};
        false -> {Acc, Last}
    end;
row(_Line, Acc, Last) ->
    {Acc, Last}.
