%% Project-wide checks, run by EUnit with the lab's public module (the lab depends on every
%% other application). They keep the docs and the build metadata true to the code.
%% - each public module (one per library application, named after it) opens with a
%%   usage example, the first ``` block of its module documentation, and that example
%%   runs: it is evaluated, as a user would type it in a shell, in a fresh VM (a
%%   `peer' with no distribution) whose working directory is an empty directory;
%% - docs/INTERNALS.md's module map names every module under apps/*/src and no other;
%% - the version is written once (VERSION) and every application and `terrain --version'
%%   agree with it;
%% - every application declares in its .app.src each application whose modules it calls.
-module(terrain_lab_tests).
-include_lib("eunit/include/eunit.hrl").

%%--------------------------------------------------------------------
%% Usage examples

examples_run_test_() ->
    [{atom_to_list(M) ++ "'s usage example runs", {timeout, 120, fun() -> run_example(M) end}}
     || M <- public_modules()].

%% The first ``` ... ''' block of a module's documentation, before `-module'.
example_text(Module) ->
    Header = lists:takewhile(fun(L) -> not lists:prefix("-module(", L) end, source_lines(Module)),
    Comment = [string:prefix(L, "%%") || L <- Header, string:trim(L) =/= ""],
    ?assertNot(lists:member(nomatch, Comment), {Module, "module header is not one comment"}),
    Body = lists:dropwhile(fun(L) -> string:trim(L) =/= "```" end, Comment),
    ?assertNotEqual([], Body, {Module, "no ``` block in the module documentation"}),
    Code = lists:takewhile(fun(L) -> string:trim(L) =/= "'''" end, tl(Body)),
    lists:flatten(lists:join("\n", [case L of [$\s | Rest] -> Rest; _ -> L end || L <- Code])).

%% Statements separated by `.' as in the shell, evaluated in order with their bindings
%% (one expression sequence: every `.' but the last becomes `,').
example_exprs(Module) ->
    {ok, Tokens, _} = erl_scan:string(example_text(Module)),
    {Dots, [Last]} = lists:split(length(Tokens) - 1, Tokens),
    ?assertMatch({dot, _}, Last),
    Joined = [case T of {dot, A} -> {',', A}; _ -> T end || T <- Dots] ++ [Last],
    {ok, Exprs} = erl_parse:parse_exprs(Joined),
    Exprs.

run_example(Module) ->
    Exprs = example_exprs(Module),
    Dir = filename:join(temp_root(), atom_to_list(Module)),
    ok = filelib:ensure_path(Dir),
    {ok, Peer, _} = peer:start_link(#{connection => standard_io, wait_boot => 60000,
                                      args => lists:append([["-pa", D] || D <- code:get_path(),
                                                                          lists:prefix(root(), D)])}),
    try
        ok = peer:call(Peer, file, set_cwd, [Dir]),
        {value, _, _} = peer:call(Peer, erl_eval, exprs, [Exprs, erl_eval:new_bindings()], 60000)
    after
        peer:stop(Peer)
    end.

temp_root() ->
    Root = filename:join(root(), "_build/test/doc_examples"),
    _ = file:del_dir_r(Root),
    Root.

%%--------------------------------------------------------------------
%% docs/INTERNALS.md's module map

%% A module is in the map when it is named in backquotes in a table row of the
%% "Module map" section.
module_map_names_every_module_and_no_other_test() ->
    Mapped = mapped_modules(),
    Code = [list_to_atom(filename:basename(F, ".erl")) || F <- filelib:wildcard(filename:join(root(), "apps/*/src/**/*.erl"))],
    ?assertEqual(#{missing_from_the_map => [], in_the_map_but_not_in_the_code => []},
                 #{missing_from_the_map => lists:usort(Code) -- Mapped,
                   in_the_map_but_not_in_the_code => Mapped -- Code}).

mapped_modules() ->
    {ok, Text} = file:read_file(filename:join(root(), "docs/INTERNALS.md")),
    [_, AfterHeading] = string:split(Text, "\n## Module map\n"),
    Section = hd(string:split(AfterHeading, "\n## ")),
    Rows = [L || L <- string:split(Section, "\n", all), string:prefix(L, "|") =/= nomatch],
    Names = lists:append([[M || [M] <- re(Row, "`(terrain[a-z0-9_]*)`")] || Row <- Rows]),
    lists:usort([list_to_atom(N) || N <- Names, not lists:suffix("_", N)]).

re(Subject, Pattern) ->
    case re:run(Subject, Pattern, [global, {capture, all_but_first, list}]) of
        {match, Ms} -> Ms;
        nomatch -> []
    end.

%%--------------------------------------------------------------------
%% One port with a deadline, one place for signals (docs/INTERNALS.md, "OS processes
%% and signals")

%% Code lines (comments dropped) of apps/*/src that open a port, run a shell command
%% with os:cmd, or hold a kill(1) command line (`"kill -', `&& kill -'...): only
%% terrain_lab_os may, and terrain_lab_ssh once, for the remote kill it runs over ssh.
ports_and_signals_only_in_terrain_lab_os_test() ->
    Checks = [{open_port, "open_port\\(", #{terrain_lab_os => any}},
              {os_cmd, "os:cmd\\(", #{terrain_lab_os => any}},
              {kill_command, kill_command(), #{terrain_lab_os => any, terrain_lab_ssh => 1}}],
    Found = [{Check, Module, N, string:trim(Line)}
             || File <- filelib:wildcard(filename:join(root(), "apps/*/src/**/*.erl")),
                Module <- [list_to_atom(filename:basename(File, ".erl"))],
                {N, Line} <- code_lines(File),
                {Check, Pattern, _} <- Checks, match(Line, Pattern)],
    Misplaced = [F || {Check, Module, _, _} = F <- Found,
                      not maps:is_key(Module, element(3, lists:keyfind(Check, 1, Checks)))],
    Over = [{Check, Module, Count, Allowed}
            || {Check, _, Allowed0} <- Checks, {Module, Allowed} <- maps:to_list(Allowed0), Allowed =/= any,
               Count <- [length([x || {C, M, _, _} <- Found, C =:= Check, M =:= Module])], Count > Allowed],
    ?assertEqual(#{misplaced => [], more_than_allowed => []}, #{misplaced => Misplaced, more_than_allowed => Over}).

%% The check finds what it looks for (a test that cannot fail is a defect).
ports_and_signals_check_sees_each_form_test() ->
    Kill = kill_command(),
    ?assert(match("    Port = open_port({spawn_executable, Erl}, []),", "open_port\\(")),
    ?assert(match("    _ = os:cmd(\"kill -9 \" ++ OsPid),", Kill)),
    ?assert(match("            \" && kill -9 \", quote(OsPid)", Kill)),
    ?assertNot(match("    terrain_lab_io:out(Io, \"$ kill -9 ~ts~n\", [OsPid]),", Kill)),
    ?assertNot(match("    E = Event(\"killed\", io_lib:format(\"kill -9 of ~ts\", [Victim])),", Kill)),
    ?assertEqual([{2, "b() -> open_port(x)."}], code_lines_of(["%% open_port( in a comment", "b() -> open_port(x)."])).

%% kill(1) with a signal (-9, -TERM, -s NAME) before a pid, a string's end or `--':
%% a command line, not a sentence about one ("kill -9 of a member's VM").
kill_command() ->
    "(^|[\"&;|])\\s*kill\\s+-(s\\b|[0-9]+|[A-Z]+)\\s*(\"|\\$|[0-9]|--)".

match(Line, Pattern) ->
    re:run(Line, Pattern, [unicode]) =/= nomatch.

code_lines(File) ->
    {ok, Bin} = file:read_file(File),
    code_lines_of(string:split(unicode:characters_to_list(Bin), "\n", all)).

code_lines_of(Lines) ->
    [{N, L} || {N, L} <- lists:zip(lists:seq(1, length(Lines)), Lines), not lists:prefix("%", string:trim(L, leading))].

%%--------------------------------------------------------------------
%% One version

version_is_written_once_test() ->
    {ok, File} = file:read_file(filename:join(root(), "VERSION")),
    Version = string:trim(binary_to_list(File)),
    ?assertMatch({match, _}, re:run(Version, "^[0-9]+\\.[0-9]+\\.[0-9]+$")),
    [begin
         ok = ensure_loaded(App),
         ?assertEqual({App, {ok, Version}}, {App, application:get_key(App, vsn)})
     end || App <- applications()],
    ?assertMatch({0, _, ""}, terrain_lab_test_io:run(["--version"])),
    ?assertEqual({0, "terrain " ++ Version ++ "\n", ""}, terrain_lab_test_io:run(["--version"])).

%%--------------------------------------------------------------------
%% Declared dependencies

%% For every call from one of our applications' modules to another's, the callee's
%% application is in the caller's `applications'.
applications_declare_what_they_call_test() ->
    Apps = applications(),
    Owner = maps:from_list([{M, App} || App <- Apps, M <- modules(App)]),
    {ok, Xref} = xref:start([]),
    try
        ok = xref:set_default(Xref, [{warnings, false}, {verbose, false}]),
        [{ok, _} = xref:add_module(Xref, code:which(M)) || M <- maps:keys(Owner)],
        {ok, Calls} = xref:q(Xref, "(Mod) XC"),
        Undeclared = lists:usort([{maps:get(From, Owner), calls, maps:get(To, Owner)}
                                  || {From, To} <- Calls,
                                     maps:is_key(From, Owner), maps:is_key(To, Owner),
                                     maps:get(From, Owner) =/= maps:get(To, Owner),
                                     not declared(maps:get(From, Owner), maps:get(To, Owner))]),
        ?assertEqual([], Undeclared)
    after
        xref:stop(Xref)
    end.

declared(App, Dependency) ->
    {ok, Deps} = application:get_key(App, applications),
    lists:member(Dependency, Deps).

%%--------------------------------------------------------------------
%% Helpers

root() ->
    Source = proplists:get_value(source, ?MODULE:module_info(compile)),
    filename:dirname(filename:dirname(filename:dirname(filename:dirname(Source)))).

%% Our applications: apps/*; the library's public modules: one per library
%% application (every one but terrain_lab), named after it.
applications() ->
    lists:sort([list_to_atom(filename:basename(D)) || D <- filelib:wildcard(filename:join(root(), "apps/*"))]).

public_modules() ->
    applications() -- [terrain_lab].

modules(App) ->
    ok = ensure_loaded(App),
    {ok, Modules} = application:get_key(App, modules),
    Modules.

ensure_loaded(App) ->
    case application:load(App) of
        ok -> ok;
        {error, {already_loaded, App}} -> ok
    end.

source_lines(Module) ->
    Source = proplists:get_value(source, Module:module_info(compile)),
    {ok, Bin} = file:read_file(Source),
    string:split(unicode:characters_to_list(Bin), "\n", all).
