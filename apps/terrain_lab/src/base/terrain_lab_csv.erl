%% @private
%% @doc Durations CSV files (docs/DESIGN.md): a header, then one row per run, each row on
%% disk as soon as it is written, so a failure or a kill never loses a measured run.
%% A file is only ever created, never overwritten.
-module(terrain_lab_csv).

%% API
-export([create/2,
         write_row/2,
         close/1,
         encode/2]).

-export_type([csv/0]).

-opaque csv() :: {file:fd(), file:filename(), [atom()]}.

%% @doc Creates `File' with a header line; refuses if the file exists.
-spec create(file:filename(), [atom()]) -> {ok, csv()} | {error, {csv, file:filename(), term()}}.
create(File, Columns) ->
    case filelib:ensure_dir(File) of
        ok ->
            case file:open(File, [write, exclusive, raw, binary]) of
                {ok, Fd} ->
                    Csv = {Fd, File, Columns},
                    case write_lines(Csv, [[atom_to_list(C) || C <- Columns]]) of
                        ok -> {ok, Csv};
                        {error, _} = Error -> _ = file:close(Fd), Error
                    end;
                {error, Why} ->
                    {error, {csv, File, Why}}
            end;
        {error, Why} ->
            {error, {csv, File, Why}}
    end.

%% @doc Appends one row (a map from column to value) and syncs it to disk.
-spec write_row(csv(), #{atom() => term()}) -> ok | {error, {csv, file:filename(), term()}}.
write_row({_, _, Columns} = Csv, Row) ->
    write_lines(Csv, [[cell(maps:get(C, Row, "")) || C <- Columns]]).

%% @doc Closes the file.
-spec close(csv()) -> ok.
close({Fd, _, _}) ->
    _ = file:close(Fd),
    ok.

%% @doc A whole file's text: the header and one line per row, for a file written
%% whole with `terrain_lab_files:write/2' (the probe's `latency.csv', 16,256 pairs at
%% 128 nodes, rewritten at every checkpoint).
-spec encode([atom()], [#{atom() => term()}]) -> iodata().
encode(Columns, Rows) ->
    lines([[atom_to_list(C) || C <- Columns] | [[cell(maps:get(C, Row, "")) || C <- Columns] || Row <- Rows]]).

lines(Lines) ->
    [[lists:join($,, Cells), $\n] || Cells <- Lines].

%% Lines of cells, with one write and one sync.
write_lines({Fd, File, _}, Lines) ->
    case file:write(Fd, lines(Lines)) of
        ok ->
            case file:datasync(Fd) of
                ok -> ok;
                {error, Why} -> {error, {csv, File, Why}}
            end;
        {error, Why} ->
            {error, {csv, File, Why}}
    end.

cell(F) when is_float(F), abs(F) < 1.0e15 -> float_to_list(F, [{decimals, 6}, compact]);
cell(F) when is_float(F) -> float_to_list(F, [short]);
cell(I) when is_integer(I) -> integer_to_list(I);
cell(A) when is_atom(A) -> quote(atom_to_list(A));
cell(B) when is_binary(B) -> quote(binary_to_list(B));
cell(S) when is_list(S) -> quote(S).

quote(S) ->
    case lists:any(fun(C) -> C =:= $, orelse C =:= $" orelse C =:= $\n end, S) of
        true -> [$", string:replace(S, "\"", "\"\"", all), $"];
        false -> S
    end.
