%% @doc Runs the PropEr properties (`make proper') and the benchmarks (`make bench').
%%
%% Properties live in `apps/*/test/prop/prop_*.erl' as exported `prop_*/0' functions;
%% benchmarks in `apps/*/test/bench/bench_*.erl' exporting `run/0'. rebar3 compiles
%% every test subdirectory into the application's `test' directory under `_build'
%% (`extra_src_dirs' with `recursive'), where both are found on the code path, so a
%% new module needs no registration. Exits non-zero on any failure.
%% (docs/INTERNALS.md, "Tests".)
-module(terrain_test_runner).

-export([proper/0, bench/0, modules/1]).

-define(NUMTESTS, 200).

%% @doc Checks every property of every prop_* module; halts with 1 if any fails.
proper() ->
    Modules = modules("prop_"),
    io:format("PropEr: ~p modules ~p~n", [length(Modules), Modules]),
    Failed = lists:append([failed(M) || M <- Modules]),
    case Failed of
        [] -> io:format("PropEr: all properties passed~n");
        _ -> io:format("PropEr: FAILED ~p~n", [Failed]), halt(1)
    end.

%% Each exported prop_*/0 through proper:quickcheck/2, not proper:module/2: PropEr
%% 1.2's module/2 does not run a property's ?SETUP (so a property that starts peer
%% nodes there would run without them), quickcheck/2 does.
failed(Module) ->
    [{Module, {Module, F, 0}}
     || {F, 0} <- Module:module_info(exports), lists:prefix("prop_", atom_to_list(F)),
        proper:quickcheck(Module:F(), [{numtests, ?NUMTESTS}, {to_file, user}]) =/= true].

%% @doc Runs every bench_* module's run/0; halts with 1 if one raises.
bench() ->
    lists:foreach(fun(M) ->
                          io:format("~n== ~s ==~n", [M]),
                          try M:run()
                          catch Class:Reason:Stack ->
                                  io:format("benchmark ~s failed: ~p:~p~n~p~n", [M, Class, Reason, Stack]),
                                  halt(1)
                          end
                  end, modules("bench_")).

%% @doc The modules on the code path whose name starts with `Prefix' (test dirs only).
modules(Prefix) ->
    lists:usort([list_to_atom(filename:basename(F, ".beam"))
                 || Dir <- code:get_path(),
                    filename:basename(Dir) =:= "test",
                    F <- filelib:wildcard(filename:join(Dir, Prefix ++ "*.beam"))]).
