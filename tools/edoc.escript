#!/usr/bin/env escript
%% -*- erlang -*-
%% `make docs': the library's API documentation (edoc, in OTP).
%%
%% 1. Every module of every application goes through edoc's parser: an edoc error
%%    anywhere (an unescaped `&' or `<', a bad tag, a broken link) fails the build,
%%    internal modules included, since they become `-moduledoc' when OTP 27 arrives.
%% 2. Every exported function and every exported type of a public module is documented
%%    (a function by @doc or @equiv, a type by the comment that follows it).
%% 3. HTML for the public modules (one per library application) and their types,
%%    in _build/docs, with docs/overview.edoc as the index page.
%%
%% Exit status 0 when all three hold, 1 otherwise (each problem on stderr).
-include_lib("xmerl/include/xmerl.hrl").

-define(OUT, "_build/docs").

main(_) ->
    %% xmerl also logs each XML error as an error report; edoc's own line says it all
    ok = logger:set_primary_config(level, critical),
    Files = lists:sort(filelib:wildcard("apps/*/src/**/*.erl")),
    %% one public module per library application (every application but the lab), named after it
    Public = [source(filename:basename(App), Files) || App <- lists:sort(filelib:wildcard("apps/*")),
                                                       filename:basename(App) =/= "terrain_lab"],
    Parse = [F || F <- Files, not parses(F)],
    Undocumented = lists:append([undocumented(F) || F <- Public, not lists:member(F, Parse)]),
    [io:format(standard_error, "~s: ~s has no documentation~n", [F, FA]) || {F, FA} <- Undocumented],
    Html = case Parse of [] -> html(Public); _ -> not_written end,
    case {Parse, Undocumented, Html} of
        {[], [], ok} ->
            io:format("API documentation of ~b public modules in ~s/index.html "
                      "(~b modules checked)~n", [length(Public), ?OUT, length(Files)]);
        _ ->
            [io:format(standard_error, "edoc failed on ~s~n", [F]) || F <- Parse],
            lists:member(Html, [ok, not_written])
                orelse io:format(standard_error, "edoc could not write the HTML: ~p~n", [Html]),
            halt(1)
    end.

source(Module, Files) ->
    [File] = [F || F <- Files, filename:basename(F, ".erl") =:= Module],
    File.

%% edoc reports its errors on stderr itself; `{dir, ...}' keeps its output away.
parses(File) ->
    Tmp = filename:join(?OUT, ".check"),
    try edoc:files([File], [{dir, Tmp}, {private, true}, {hidden, true}]) of
        ok -> true
    catch
        _:_ -> false
    end.

undocumented(File) ->
    {_, #xmlElement{content = Module}} = edoc:get_doc(File, []),
    [{File, name(F)} || #xmlElement{name = functions, content = Fs} <- Module,
                        #xmlElement{name = function} = F <- Fs,
                        attribute(exported, F) =:= "yes",
                        not has_description(F)]
    ++ [{File, "type " ++ type_name(T)} || #xmlElement{name = typedecls, content = Ts} <- Module,
                                           #xmlElement{name = typedecl} = T <- Ts,
                                           not has_description(T)].

type_name(#xmlElement{content = C}) ->
    hd([attribute(name, E) || #xmlElement{name = typedef, content = D} <- C,
                              #xmlElement{name = erlangName} = E <- D] ++ ["?"]).

name(F) ->
    attribute(name, F) ++ "/" ++ attribute(arity, F).

attribute(Name, #xmlElement{attributes = As}) ->
    hd([V || #xmlAttribute{name = N, value = V} <- As, N =:= Name] ++ [undefined]).

has_description(#xmlElement{content = C}) ->
    lists:any(fun(#xmlElement{name = N}) -> lists:member(N, [description, equiv]); (_) -> false end, C).

html(Public) ->
    {ok, Vsn} = file:read_file("VERSION"),
    try edoc:files(Public, [{dir, ?OUT}, {overview, "docs/overview.edoc"},
                            {title, "terrain " ++ string:trim(binary_to_list(Vsn)) ++ " API"}]) of
        ok -> ok
    catch
        Class:Reason -> {Class, Reason}
    end.
