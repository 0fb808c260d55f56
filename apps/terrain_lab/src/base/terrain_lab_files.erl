%% @private
%% @doc Writes the user's environment can refuse, as errors instead of crashes, and
%% the one rule for outputs: a command never overwrites one of its inputs or an
%% output that exists already.
%%
%% {@link write/2} (and {@link write_json/2}) writes a whole file to `FILE.tmp' and
%% renames it over `FILE' (terrain_json:write_atomically/2, the project's one atomic
%% write), so a reader sees the old file or the new one, never half of one; on any
%% failure (a full disk, a read-only directory) the temporary file is removed, also on
%% SIGTERM (terrain_lab_cleanup). Every write the environment refuses, here and in
%% terrain_lab_csv and terrain_lab_run, is the one error `{write, File, Reason}' naming
%% the file the caller meant, never the temporary one. {@link append/2} appends rows (a
%% CSV that grows as measurements finish).
%% ```
%% ok = terrain_lab_files:new_output(file, Out, [Input]),    % before measuring anything
%% ...
%% case terrain_lab_files:write(Out, Text) of ok -> ...; {error, {write, _, _}} = E -> E end
%% '''
-module(terrain_lab_files).

%% API
-export([write/2,
         write_json/2,
         append/2,
         make_dir/1,
         ensure_dir/1,
         new_output/3,
         format_error/1]).

-include_lib("kernel/include/file.hrl").

-type reason() :: {write, file:filename(), term()}
                | {output_exists, file:filename()}
                | {output_is_input, file:filename()}.
-export_type([reason/0]).

%%--------------------------------------------------------------------
%% API

%% @doc Writes `Data' to `File' through a temporary file in the same directory and a
%% rename; on failure nothing is left but the old `File' (if any).
-spec write(file:filename(), iodata()) -> ok | {error, {write, file:filename(), term()}}.
write(File, Data) ->
    Tmp = unicode:characters_to_list([File, ".tmp"]),    % terrain_json:write_atomically/2's
    ok = terrain_lab_cleanup:add({tmp, Tmp}, fun() -> file:delete(Tmp) end),   % also on SIGTERM
    Result = case terrain_json:write_atomically(File, Data) of
                 ok -> ok;
                 {error, {file, _, Why}} -> {error, {write, File, Why}}
             end,
    ok = terrain_lab_cleanup:remove({tmp, Tmp}),
    Result.

%% @doc Writes `Term' as pretty JSON with a final newline (terrain_json's layout), as
%% {@link write/2} does.
-spec write_json(file:filename(), terrain_json:json()) -> ok | {error, {write, file:filename(), term()}}.
write_json(File, Term) ->
    write(File, [terrain_json:encode(Term, #{pretty => true}), $\n]).

%% @doc Appends `Data' to `File' (created when missing).
-spec append(file:filename(), iodata()) -> ok | {error, {write, file:filename(), term()}}.
append(File, Data) ->
    case file:write_file(File, Data, [append]) of
        ok -> ok;
        {error, Why} -> {error, {write, File, Why}}
    end.

%% @doc Creates the directory `Dir' and its parents.
-spec make_dir(file:filename()) -> ok | {error, {write, file:filename(), term()}}.
make_dir(Dir) ->
    ensure_dir(filename:join(Dir, "x")).

%% @doc Creates the parent directories of `File'.
-spec ensure_dir(file:filename()) -> ok | {error, {write, file:filename(), term()}}.
ensure_dir(File) ->
    case filelib:ensure_dir(File) of
        ok -> ok;
        {error, Why} -> {error, {write, filename:dirname(File), Why}}
    end.

%% @doc The one rule for outputs, checked before anything is measured: `Out' must
%% not exist yet (a file or a directory), must not be one of `Inputs' (the files the
%% command reads), and where it goes must be writable: a `file''s directory must
%% exist, a `dir''s nearest existing ancestor (its parents are created).
-spec new_output(file | dir, file:filename(), [file:filename()]) -> ok | {error, reason()}.
new_output(Kind, Out, Inputs) ->
    Abs = canonical(Out),
    case [I || I <- Inputs, canonical(I) =:= Abs] of
        [_ | _] ->
            {error, {output_is_input, Out}};
        [] ->
            case file:read_link_info(Out) of
                {ok, _} -> {error, {output_exists, Out}};
                {error, _} when Kind =:= dir -> writable_dir(filename:dirname(Abs));
                {error, _} ->
                    Parent = filename:dirname(Abs),
                    case filelib:is_dir(Parent) of
                        true -> writable_dir(Parent);
                        false -> {error, {write, filename:dirname(Out), enoent}}
                    end
            end
    end.

%% `Dir', or its nearest existing ancestor, is a writable directory (so that an
%% output there can be created; `tune --out /nonexist/x.json' fails before measuring).
-spec writable_dir(file:filename()) -> ok | {error, {write, file:filename(), term()}}.
writable_dir(Dir) ->
    case file:read_file_info(Dir) of
        {ok, #file_info{type = directory}} ->
            %% the real test (mode bits say nothing of a read-only mount): create a file
            Probe = filename:join(Dir, ".terrain-probe-" ++ os:getpid()),
            case file:open(Probe, [write, exclusive, raw]) of
                {ok, Fd} -> _ = file:close(Fd), _ = file:delete(Probe), ok;
                {error, Why} -> {error, {write, Dir, Why}}
            end;
        {ok, _} ->
            {error, {write, Dir, enotdir}};
        {error, enoent} ->
            case filename:dirname(Dir) of
                Dir -> {error, {write, Dir, enoent}};
                Parent ->
                    case writable_dir(Parent) of
                        ok -> ok;
                        {error, {write, _, Why}} -> {error, {write, Dir, Why}}
                    end
            end;
        {error, Why} ->
            {error, {write, Dir, Why}}
    end.

%% @doc A sentence for an error of this module.
-spec format_error(reason()) -> iolist().
format_error({write, File, Why}) ->
    io_lib:format("cannot write ~ts: ~ts", [File, file:format_error(Why)]);
format_error({output_exists, Out}) ->
    io_lib:format("~ts exists already; terrain never overwrites an output: remove it or choose another name",
                  [Out]);
format_error({output_is_input, Out}) ->
    io_lib:format("~ts is one of this command's inputs; terrain never overwrites an input: choose another "
                  "output", [Out]).

%%--------------------------------------------------------------------
%% Internal functions

%% The absolute path with `.' and `..' resolved (not symbolic links).
canonical(Path) ->
    filename:join(lists:reverse(lists:foldl(fun(".", Acc) -> Acc;
                                              ("..", [Root]) -> [Root];
                                              ("..", [_ | Acc]) -> Acc;
                                              (Part, Acc) -> [Part | Acc]
                                           end, [], filename:split(filename:absname(Path))))).


%%--------------------------------------------------------------------
%% Tests

-ifdef(TEST).
-include_lib("eunit/include/eunit.hrl").

tmp_dir() ->
    Dir = filename:join("/tmp",
                        "terrain_lab_files_" ++ os:getpid() ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = make_dir(Dir),
    Dir.

write_replaces_whole_and_leaves_no_tmp_test() ->
    Dir = tmp_dir(),
    File = filename:join(Dir, "a.json"),
    ok = write(File, "one"),
    ok = write(File, "two"),
    ?assertEqual({ok, <<"two">>}, file:read_file(File)),
    ?assertEqual(["a.json"], element(2, file:list_dir(Dir))).

write_into_a_missing_directory_names_the_file_test() ->
    File = "/nonexist_terrain/x.json",
    ?assertEqual({error, {write, File, enoent}}, write(File, "x")),
    ?assertMatch("cannot write /nonexist_terrain/x.json: " ++ _, lists:flatten(format_error({write, File, enoent}))).

new_output_refuses_inputs_and_existing_outputs_test() ->
    Dir = tmp_dir(),
    Manifest = filename:join(Dir, "manifest.json"),
    ok = write(Manifest, "{}"),
    ?assertEqual({error, {output_is_input, Manifest}}, new_output(file, Manifest, [Manifest])),
    Dotted = filename:join([Dir, ".", "manifest.json"]),
    ?assertEqual({error, {output_is_input, Dotted}}, new_output(file, Dotted, [Manifest])),
    ?assertEqual({error, {output_exists, Manifest}}, new_output(file, Manifest, [])),
    ?assertEqual(ok, new_output(file, filename:join(Dir, "new.json"), [Manifest])),
    ?assertEqual(ok, new_output(dir, filename:join([Dir, "sub", "run"]), [])),
    ?assertEqual({error, {write, "/nonexist_terrain", enoent}}, new_output(file, "/nonexist_terrain/x.json", [])).
-endif.
