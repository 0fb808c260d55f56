#!/usr/bin/env escript
%% The lab's rooms (docs/INTERNALS.md, "The lab's folders"): apps/terrain_lab/src holds one
%% folder per group, and a group calls only the groups below it. This check reads the
%% folders, asks xref for every call between two lab modules in the compiled code, and
%% fails (exit 1) on any call that goes up, naming caller, callee and their folders.
%% `make xref' (in `make check' and `make test') runs it after `rebar3 xref'.
%%   usage: escript tools/lab_layers.escript [EBIN_DIR]
-mode(compile).

%% top to bottom
-define(ORDER, ["cli", "experiments", "measure", "cluster", "hosts", "netem", "base"]).

main(Args) ->
    Ebin = case Args of [E] -> E; [] -> "_build/default/lib/terrain_lab/ebin" end,
    Src = "apps/terrain_lab/src",
    Folder = maps:from_list([{list_to_atom(filename:basename(F, ".erl")), filename:basename(filename:dirname(F))}
                             || F <- filelib:wildcard(filename:join(Src, "**/*.erl"))]),
    Stray = [M || {M, Dir} <- maps:to_list(Folder), not lists:member(Dir, ?ORDER)],
    Stray =:= [] orelse fail("modules outside the seven folders (~s): ~p", [string:join(?ORDER, ", "), Stray]),
    {ok, _} = xref:start(?MODULE, [{xref_mode, modules}]),
    {ok, _} = xref:add_directory(?MODULE, Ebin, [{warnings, false}]),
    {ok, Edges} = xref:q(?MODULE, "ME || \"terrain_lab.*\" : Mod"),
    Rank = fun(M) -> string:str(lists:reverse(?ORDER), [maps:get(M, Folder)]) end,
    Up = lists:usort([{From, maps:get(From, Folder), To, maps:get(To, Folder)}
                      || {From, To} <- Edges, maps:is_key(From, Folder), maps:is_key(To, Folder),
                         Rank(To) > Rank(From)]),
    Counts = lists:usort([{maps:get(From, Folder), maps:get(To, Folder)}
                          || {From, To} <- Edges, maps:is_key(From, Folder), maps:is_key(To, Folder)]),
    case Up of
        [] ->
            io:format("lab layers: ~b modules in ~b folders, ~b module edges, none upward (~ts)~n",
                      [maps:size(Folder), length(?ORDER), length(Edges), string:join(?ORDER, " > ")]),
            _ = Counts,
            halt(0);
        _ ->
            [io:format(standard_error, "lab layers: ~s (~s) calls ~s (~s), a folder above it~n", [F, FD, T, TD])
             || {F, FD, T, TD} <- Up],
            fail("~b upward calls between the lab's folders (order: ~s)", [length(Up), string:join(?ORDER, " > ")])
    end.

fail(Format, Args) ->
    io:format(standard_error, "lab layers: " ++ Format ++ "~n", Args),
    halt(1).
