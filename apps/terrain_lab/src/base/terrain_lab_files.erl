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
%%
%% Inputs come through one bounded reader: {@link read/2} refuses what is not a
%% regular file (a device such as `/dev/zero', a FIFO, a directory) and a file larger
%% than the caller's limit, before reading it; {@link consult/2} reads Erlang terms
%% (`file:consult/1' syntax) from such a file after counting, without making an atom,
%% the nesting depth and the distinct atoms it would make (file:consult makes every
%% atom while parsing), so that no file can exhaust the memory or the atom table.
%% ```
%% {ok, Bin} = terrain_lab_files:read(File, 16 * 1024 * 1024),
%% {ok, Terms} = terrain_lab_files:consult(File, #{max_bytes => 16 * 1024 * 1024}),
%% '''
-module(terrain_lab_files).

%% API
-export([write/2,
         write_json/2,
         append/2,
         make_dir/1,
         ensure_dir/1,
         new_output/3,
         read/2,
         consult/2,
         format_error/1]).

-include_lib("kernel/include/file.hrl").

-type reason() :: {write, file:filename(), term()}
                | {output_exists, file:filename()}
                | {output_is_input, file:filename()}
                | read_error().
%% Why an input was refused: not a regular file, larger than the limit, nested
%% deeper, more names (atoms) than the budget, a name longer than an atom can be,
%% bytes that are not UTF-8, an Erlang syntax error, or the file system's reason.
-type read_error() :: {read, file:filename(), not_regular | {too_large, non_neg_integer()}
                                              | {too_deep, pos_integer(), pos_integer()}
                                              | {too_many_names, non_neg_integer()}
                                              | {long_name, pos_integer()}
                                              | {not_utf8, pos_integer()}
                                              | {syntax, term(), string()}
                                              | {check, term()}
                                              | file:posix() | badarg}.
%% The bounds of {@link consult/2}: the file's size in bytes, the nesting of brackets,
%% the distinct atoms, and a check of the counts of tagged tuples (`{node, ...}' counts
%% under `<<"node">>') made before anything is parsed.
-type consult_limits() :: #{max_bytes := pos_integer(),
                            max_depth => pos_integer(),          % default 1000
                            max_atoms => pos_integer(),          % default 200,000 (and the atom table's room)
                            check => fun((#{binary() => non_neg_integer()}) -> ok | {error, term()})}.
-export_type([reason/0, read_error/0, consult_limits/0]).

-define(MAX_DEPTH, 1000).
-define(MAX_ATOMS, 200000).
-define(ATOM_ROOM, 100000).      % atoms left free for the runtime after a file's

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

%% @doc The bytes of `File' when it is a regular file of at most `MaxBytes' bytes;
%% a device, a FIFO or a directory is refused before anything is read, and at most
%% `MaxBytes' + 1 bytes are ever read (a file that grows meanwhile is refused too).
-spec read(file:filename(), pos_integer()) -> {ok, binary()} | {error, read_error()}.
read(File, MaxBytes) ->
    case file:read_file_info(File) of
        {ok, #file_info{type = regular, size = Size}} when Size > MaxBytes ->
            {error, {read, File, {too_large, MaxBytes}}};
        {ok, #file_info{type = regular}} ->
            read_at_most(File, MaxBytes);
        {ok, #file_info{}} ->
            {error, {read, File, not_regular}};
        {error, Why} ->
            {error, {read, File, Why}}
    end.

read_at_most(File, MaxBytes) ->
    case file:open(File, [read, raw, binary]) of
        {ok, Fd} ->
            try file:read(Fd, MaxBytes + 1) of
                {ok, Bin} when byte_size(Bin) > MaxBytes -> {error, {read, File, {too_large, MaxBytes}}};
                {ok, Bin} -> {ok, Bin};
                eof -> {ok, <<>>};
                {error, Why} -> {error, {read, File, Why}}
            after
                file:close(Fd)
            end;
        {error, Why} ->
            {error, {read, File, Why}}
    end.

%% @doc The Erlang terms of `File' (each ended by a dot, as `file:consult/1' reads
%% them), read through {@link read/2} and counted before they are parsed: brackets
%% nested deeper than `max_depth', more distinct atoms than `max_atoms' (or than the
%% atom table has room for), an atom longer than 255 characters, bytes that are not
%% UTF-8 or a refusal of `check' (given the count of each tuple tag) make no atom.
-spec consult(file:filename(), consult_limits()) -> {ok, [term()]} | {error, read_error()}.
consult(File, #{max_bytes := MaxBytes} = Limits) ->
    MaxDepth = maps:get(max_depth, Limits, ?MAX_DEPTH),
    Room = erlang:system_info(atom_limit) - erlang:system_info(atom_count) - ?ATOM_ROOM,
    MaxAtoms = max(0, min(maps:get(max_atoms, Limits, ?MAX_ATOMS), Room)),
    Check = maps:get(check, Limits, fun(_) -> ok end),
    Steps = [fun(_) -> read(File, MaxBytes) end,
             fun(Bin) ->
                     case unicode:characters_to_binary(Bin) of
                         Bin -> {ok, Bin};
                         {_, Good, _} -> {error, {read, File, {not_utf8, line_of(Good)}}}
                     end
             end,
             fun(Bin) ->
                     %% the caller's check first: it names what there are too many of
                     case count(Bin, MaxDepth, MaxAtoms) of
                         {error, Why} ->
                             {error, {read, File, Why}};
                         {Counted, Tags} ->
                             case {Check(Tags), Counted} of
                                 {{error, Why}, _} -> {error, {read, File, {check, Why}}};
                                 {ok, ok} -> {ok, unicode:characters_to_list(Bin)};
                                 {ok, {error, Why}} -> {error, {read, File, Why}}
                             end
                     end
             end,
             fun(Chars) -> parse_terms(File, Chars) end],
    terrain_lab_steps:run(Steps, none).

%% @doc A sentence for an error of this module.
-spec format_error(reason()) -> iolist().
format_error({write, File, Why}) ->
    io_lib:format("cannot write ~ts: ~ts", [File, file:format_error(Why)]);
format_error({output_exists, Out}) ->
    io_lib:format("~ts exists already; terrain never overwrites an output: remove it or choose another name",
                  [Out]);
format_error({output_is_input, Out}) ->
    io_lib:format("~ts is one of this command's inputs; terrain never overwrites an input: choose another "
                  "output", [Out]);
format_error({read, File, Why}) ->
    [File, ": ", read_why(Why)].

read_why(not_regular) -> "not a regular file";
read_why({too_large, Max}) -> io_lib:format("larger than ~b bytes, the limit for this kind of file", [Max]);
read_why({too_deep, Line, Max}) -> io_lib:format("line ~b: nested more than ~b levels deep", [Line, Max]);
read_why({too_many_names, Max}) ->
    io_lib:format("names more than ~b different atoms (node, group and other names), the most terrain reads "
                  "from one file", [Max]);
read_why({long_name, Line}) -> io_lib:format("line ~b: a name is longer than 255 characters", [Line]);
read_why({not_utf8, Line}) -> io_lib:format("line ~b: the bytes are not UTF-8", [Line]);
read_why({syntax, Line, Message}) -> io_lib:format("line ~0tp: syntax error: ~ts", [Line, Message]);
read_why({check, {guard, _} = Reason}) -> terrain_lab_guard:format_error(Reason);
read_why(Posix) -> file:format_error(Posix).

%%--------------------------------------------------------------------
%% Internal functions: counting and parsing terms

line_of(Good) ->
    1 + length(binary:matches(Good, <<"\n">>)).

%% One pass over the bytes, as erl_scan would cut them, that makes no atom: the
%% deepest nesting of brackets, the distinct unquoted and quoted atoms (as binaries),
%% and per tag (the atom after `{') how many tuples it begins.
count(Bin, MaxDepth, MaxAtoms) ->
    try scan(Bin, #{line => 1, depth => 0, max_depth => MaxDepth, atoms => #{}, max_atoms => MaxAtoms,
                    over => false, tags => #{}, after_brace => false}) of
        #{over := false, tags := Tags} -> {ok, Tags};
        #{over := true, tags := Tags} -> {{error, {too_many_names, MaxAtoms}}, Tags}
    catch
        throw:{bound, Why} -> {error, Why}
    end.

scan(<<>>, State) ->
    State;
scan(<<$\n, Rest/binary>>, #{line := Line} = S) ->
    scan(Rest, S#{line := Line + 1});
scan(<<C, Rest/binary>>, S) when C =:= $\s; C =:= $\t; C =:= $\r ->
    scan(Rest, S);
scan(<<$%, Rest/binary>>, S) ->
    scan(skip_line(Rest), S);
scan(<<C, Rest/binary>>, #{depth := D, max_depth := Max, line := Line} = S)
  when C =:= ${; C =:= $[; C =:= $( ->
    _ = D >= Max andalso throw({bound, {too_deep, Line, Max}}),
    scan(Rest, S#{depth := D + 1, after_brace := C =:= ${});
scan(<<C, Rest/binary>>, #{depth := D} = S) when C =:= $}; C =:= $]; C =:= $) ->
    scan(Rest, S#{depth := max(0, D - 1), after_brace := false});
scan(<<$$, $\\, _, Rest/binary>>, S) ->
    scan(Rest, S#{after_brace := false});
scan(<<$$, _/utf8, Rest/binary>>, S) ->
    scan(Rest, S#{after_brace := false});
scan(<<$", Rest/binary>>, S) ->
    {Rest1, Lines} = quoted(Rest, $", 0),
    scan(Rest1, S#{line := maps:get(line, S) + Lines, after_brace := false});
scan(<<$', Rest/binary>> = Bin, S) ->
    {Rest1, Lines} = quoted(Rest, $', 0),
    Name = binary:part(Bin, 1, byte_size(Bin) - byte_size(Rest1) - 2),
    scan(Rest1, atom(Name, S#{line := maps:get(line, S) + Lines}));
scan(<<C, _/binary>> = Bin, S) when C >= $a, C =< $z; C >= 16#C0 ->
    {Name, Rest} = word(Bin, 0),
    scan(Rest, atom(Name, S));
scan(<<C, _/binary>> = Bin, S) when C >= $0, C =< $9; C >= $A, C =< $Z; C =:= $_ ->
    {_, Rest} = word(Bin, 0),                              % a number or a variable: no atom
    scan(Rest, S#{after_brace := false});
scan(<<_, Rest/binary>>, S) ->
    scan(Rest, S#{after_brace := false}).

skip_line(Bin) ->
    case binary:match(Bin, <<"\n">>) of
        {At, _} -> binary:part(Bin, At, byte_size(Bin) - At);
        nomatch -> <<>>
    end.

%% The rest after a closing quote (escapes skipped) and the newlines inside.
quoted(<<Q, Rest/binary>>, Q, Lines) -> {Rest, Lines};
quoted(<<$\\, $\n, Rest/binary>>, Q, Lines) -> quoted(Rest, Q, Lines + 1);
quoted(<<$\\, _, Rest/binary>>, Q, Lines) -> quoted(Rest, Q, Lines);
quoted(<<$\n, Rest/binary>>, Q, Lines) -> quoted(Rest, Q, Lines + 1);
quoted(<<_, Rest/binary>>, Q, Lines) -> quoted(Rest, Q, Lines);
quoted(<<>>, _Q, Lines) -> {<<>>, Lines}.                  % unterminated: the parser says so

word(Bin, N) ->
    case Bin of
        <<_:N/binary, C, _/binary>> when C >= $a, C =< $z; C >= $A, C =< $Z; C >= $0, C =< $9; C =:= $_;
                                         C =:= $@; C >= 16#80 ->
            word(Bin, N + 1);
        <<_:N/binary, $., C, _/binary>> when C >= $0, C =< $9 ->   % 1.5, 1.0e3
            word(Bin, N + 2);
        <<Word:N/binary, Rest/binary>> ->
            {Word, Rest}
    end.

atom(Name, #{atoms := Atoms, max_atoms := Max, line := Line, after_brace := AfterBrace, tags := Tags} = S) ->
    _ = byte_size(Name) > 255 andalso length(unicode:characters_to_list(Name)) > 255
        andalso throw({bound, {long_name, Line}}),
    Tags1 = case AfterBrace of
                true -> maps:update_with(Name, fun(N) -> N + 1 end, 1, Tags);
                false -> Tags
            end,
    %% past the budget the names are no longer kept, but the tags are still counted
    case is_map_key(Name, Atoms) orelse map_size(Atoms) < Max of
        true -> S#{atoms := Atoms#{Name => true}, tags := Tags1, after_brace := false};
        false -> S#{over := true, tags := Tags1, after_brace := false}
    end.

%% The terms of the text, each ended by a dot; a syntax error names its line.
parse_terms(File, Chars) ->
    case erl_scan:string(Chars) of
        {ok, Tokens, _} ->
            terms(File, Tokens, [], []);
        {error, {Line, Mod, Why}, _} ->
            {error, {read, File, {syntax, Line, Mod:format_error(Why)}}}
    end.

terms(_File, [], [], Acc) ->
    {ok, lists:reverse(Acc)};
terms(File, [], Partial, _Acc) ->
    {error, {read, File, {syntax, element(2, lists:last(Partial)), "the last term has no final '.'"}}};
terms(File, [{dot, _} = Dot | Rest], Partial, Acc) ->
    case erl_parse:parse_term(lists:reverse([Dot | Partial])) of
        {ok, Term} -> terms(File, Rest, [], [Term | Acc]);
        {error, {Line, Mod, Why}} -> {error, {read, File, {syntax, Line, Mod:format_error(Why)}}}
    end;
terms(File, [Token | Rest], Partial, Acc) ->
    terms(File, Rest, [Token | Partial], Acc).

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

read_refuses_what_is_not_a_regular_file_and_what_is_too_large_test() ->
    Dir = tmp_dir(),
    File = filename:join(Dir, "ten"),
    ok = file:write_file(File, "0123456789"),
    ?assertEqual({ok, <<"0123456789">>}, read(File, 10)),
    ?assertEqual({error, {read, File, {too_large, 9}}}, read(File, 9)),
    [?assertEqual({error, {read, Device, not_regular}}, read(Device, 1000)) || Device <- ["/dev/zero", Dir]],
    ?assertEqual({error, {read, "/nonexist_terrain", enoent}}, read("/nonexist_terrain", 10)),
    ?assertEqual("/dev/zero: not a regular file", lists:flatten(format_error({read, "/dev/zero", not_regular}))).

consult_text(Text, Limits) ->
    File = filename:join(tmp_dir(), "terms"),
    ok = file:write_file(File, Text),
    case consult(File, Limits#{max_bytes => 1000000}) of
        {ok, _} = Ok -> Ok;
        {error, {read, File, Why}} -> {error, Why}
    end.

consult_reads_terms_as_file_consult_does_test() ->
    Text = "%% a comment\n{cluster, c, #{latency => 10}}.\n{group, 'G x', #{}, [{node, n1, #{args => [\"a.b\"]}}]}.\n"
           "{x, $', \"'\", 1.5e3, 16#ff, <<\"b\">>}.\n",
    File = filename:join(tmp_dir(), "terms"),
    ok = file:write_file(File, Text),
    ?assertEqual(file:consult(File), consult(File, #{max_bytes => 1000})).

consult_counts_before_it_parses_test() ->
    ?assertEqual({error, {too_deep, 2, 3}}, consult_text("{a}.\n{[{[x]}]}.\n", #{max_depth => 3})),
    ?assertEqual({error, {long_name, 1}}, consult_text("{'" ++ lists:duplicate(256, $x) ++ "'}.\n", #{})),
    ?assertEqual({error, {too_many_names, 3}}, consult_text("[a, b, 'c', d].\n", #{max_atoms => 3})),
    ?assertEqual({ok, [[a, b, a, b]]}, consult_text("[a, b, 'a', b].\n", #{max_atoms => 2})),
    ?assertEqual({error, {not_utf8, 2}}, consult_text(<<"a.\n'", 16#e9, "'.\n">>, #{})),
    ?assertMatch({error, {syntax, 1, _}}, consult_text("{a, }.\n", #{})),
    ?assertMatch({error, {syntax, _, "the last term has no final '.'"}}, consult_text("{a}", #{})),
    %% the check sees the count of each tag (the atom after a brace), also past the atom budget
    Check = fun(#{<<"node">> := N}) when N > 2 -> {error, {nodes, N}}; (_) -> ok end,
    ?assertEqual({error, {check, {nodes, 3}}},
                 consult_text("[{node, a}, { node, b}, {node, c}].\n", #{check => Check, max_atoms => 2})),
    ?assertEqual({ok, [[{node, a}, {node, b}]]}, consult_text("[{node, a}, {node, b}].\n", #{check => Check})).

consult_makes_no_atom_of_a_refused_file_test() ->
    Before = erlang:system_info(atom_count),
    Names = ["zq_unmade_" ++ integer_to_list(I) || I <- lists:seq(1, 5000)],
    Text = ["[", lists:join(",", Names), "].\n"],
    ?assertEqual({error, {too_many_names, 100}}, consult_text(Text, #{max_atoms => 100})),
    ?assert(erlang:system_info(atom_count) - Before < 100).
-endif.
