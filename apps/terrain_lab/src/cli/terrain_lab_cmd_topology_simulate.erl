%% @private
%% @doc `terrain topology simulate': the tree probe of `terrain probe --strategy tree'
%% run against a latency model (`--shape' with `--latencies', or `--spec'; see
%% terrain_lab_simulate) or replayed against a measured matrix (`--matrix', see
%% terrain_lab_replay), and the tree it finds scored: a summary on stdout, or with
%% `--json' one object. The options are those of `terrain topology' (its command
%% table, terrain_lab_cmd_topology, which calls {@link simulate/2} and {@link replay/3});
%% the errors are its `topology_cmd' errors.
-module(terrain_lab_cmd_topology_simulate).

-export([simulate/2,
         replay/3]).

%% A shape of at most this many levels (its group names, g_1_2_..., are atoms of at
%% most 255 characters) and one-way latencies up to 1000 s.
-define(MAX_LEVELS, 32).
-define(MAX_LATENCY, 1.0e9).

%% @doc `terrain topology simulate' against a model (`--shape' or `--spec'). A bad
%% model or `--outliers' is a usage error (exit 2); a spec that cannot be read fails.
-spec simulate(#{atom() => term()}, terrain_lab_io:io()) -> ok | {error, term()}.
simulate(Options, Io) ->
    Usage = fun({error, {topology_cmd, _} = Reason}) -> {error, {usage, Reason}};
               ({error, {simulate, {latencies, _, _}} = Reason}) -> {error, {usage, Reason}};
               (Other) -> Other
            end,
    Steps = [fun(_) -> Usage(simulate_model(Options)) end,
             fun(Model) ->
                     case simulate_outliers(Options) of
                         {ok, Outliers} -> {ok, {Model, Outliers}};
                         {error, _} = Error -> Usage(Error)
                     end
             end,
             fun({Model, Outliers}) ->
                     terrain_lab_io:progress(Io, "simulate: ~ts, noise ~p, outliers ~p, seed ~b~n",
                                             [maps:get(description, Model), maps:get(noise, Options), Outliers,
                                              maps:get(seed, Options)]),
                     terrain_lab_simulate:run(#{model => Model, noise => maps:get(noise, Options),
                                                outliers => Outliers, seed => maps:get(seed, Options),
                                                progress => simulate_progress(Io)})
             end,
             fun(Report) -> simulate_report(Report, maps:get(json, Options, false), Io) end],
    terrain_lab_steps:run(Steps, Options).

%% @doc `terrain topology simulate --matrix FILE': the tree probe replayed against a
%% measured matrix (terrain_lab_replay); `--out' writes the tree it found (format from
%% the extension, as for discovery).
-spec replay(#{atom() => term()}, file:filename(), terrain_lab_io:io()) -> ok | {error, term()}.
replay(Options, File, Io) ->
    terrain_lab_steps:with(
      [fun() -> terrain_lab_cmd_topology:output_format(Options) end,
       fun() -> terrain_lab_replay:read(File) end,
       fun() -> truth(Options) end],
      fun([Format, Matrix, Truth]) ->
              terrain_lab_io:progress(Io, "simulate: replaying ~ts, seed ~b~n", [File, maps:get(seed, Options)]),
              case terrain_lab_replay:run(#{matrix => Matrix, truth => Truth, seed => maps:get(seed, Options),
                                            progress => simulate_progress(Io)}) of
                  {ok, #{tree := Found} = Report} ->
                      {ok, Text} = terrain:render_topology(Found, Format),
                      Written = maps:get(out, Options, undefined) =/= undefined
                          andalso terrain_lab_cmd_topology:emit(Text, Options, Io),
                      case Written of
                          {error, _} = Error -> Error;
                          _ -> replay_report(maps:remove(tree, Report), maps:get(json, Options, false), Io)
                      end;
                  {error, _} = Error ->
                      Error
              end
      end).

%% --truth: the tree to score the replay's against, if any.
truth(Options) ->
    case maps:get(truth, Options, undefined) of
        undefined -> {ok, none};
        File -> terrain_lab_cmd_topology:read_tree(File)
    end.

replay_report(Report, true, Io) ->
    simulate_report(Report, true, Io);
replay_report(#{nodes := N, pairs_measured := M, pairs_total := T, clade_recall := R, clade_precision := P,
                seconds := S, unplaced := U}, false, Io) ->
    Score = case R of
                null -> "no --truth to score against";
                _ -> io_lib:format("clade recall ~.3f, precision ~.3f", [R, P])
            end,
    terrain_lab_io:out(Io, "~b nodes: ~b of ~b ordered pairs measured (~.3f%), ~ts, ~.1f s~ts~n",
                       [N, M, T, 100 * M / max(1, T), Score, S,
                        case U of 0 -> ""; _ -> io_lib:format(", ~b nodes not placed", [U]) end]).

simulate_model(Options) ->
    case {maps:get(shape, Options, undefined), maps:get(spec, Options, undefined),
          maps:get(latencies, Options, undefined)} of
        {undefined, undefined, _} -> {error, {topology_cmd, {simulate, no_model}}};
        {Shape, undefined, _} -> shape_model(Shape, Options);
        {undefined, _, Latencies} when Latencies =/= undefined -> {error, {topology_cmd, {simulate, spec_latencies}}};
        {undefined, File, _} -> spec_model(File);
        {_, _, _} -> {error, {topology_cmd, {simulate, shape_and_spec}}}
    end.

%% The shape's node count is checked by the guard before a name is made.
shape_model(Shape, Options) ->
    Bad = fun(Expected) -> {error, {topology_cmd, {bad_option, "shape", Shape, Expected}}} end,
    case shape_numbers(Shape) of
        {ok, Ks} when length(Ks) > ?MAX_LEVELS ->
            Bad(io_lib:format("at most ~b levels", [?MAX_LEVELS]));
        {ok, [_ | _] = Ks} ->
            case lists:all(fun(K) -> K >= 1 end, Ks) of
                true ->
                    Nodes = lists:foldl(fun(K, A) -> K * A end, 1, Ks),
                    case terrain_lab_simulate:guard("--shape", Nodes) of
                        ok -> shape_latencies(Ks, Options);
                        {error, _} = Error -> Error
                    end;
                false ->
                    Bad("children per level, e.g. 10x10x10x10")
            end;
        _ ->
            Bad("children per level, e.g. 10x10x10x10")
    end.

spec_model(File) ->
    case terrain_lab_spec:read(File) of
        {ok, Spec} ->
            case terrain_lab_simulate:guard("--spec", length(terrain_lab_spec:nodes(Spec))) of
                ok -> terrain_lab_simulate:spec_model(Spec);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

shape_latencies(Ks, Options) ->
    Default = [15000 / math:pow(10, I) || I <- lists:seq(0, length(Ks) - 1)],
    case maps:get(latencies, Options, undefined) of
        undefined ->
            terrain_lab_simulate:shape_model(Ks, Default);
        Text ->
            Bad = fun(Expected) -> {error, {topology_cmd, {bad_option, "latencies", Text, Expected}}} end,
            case terrain_lab_cli:list_of(float, Text) of
                {ok, Ls} ->
                    case lists:all(fun(L) -> L >= 0 andalso L =< ?MAX_LATENCY end, Ls) of
                        true -> terrain_lab_simulate:shape_model(Ks, Ls);
                        false -> Bad("one-way us from 0 to 1e9 (1000 s), per level")
                    end;
                error ->
                    Bad("one-way us per level, e.g. 15000,1500,150")
            end
    end.

%% 10x10x4: the children per level (integers; a blank around one is trimmed).
shape_numbers(Shape) ->
    try {ok, [list_to_integer(string:trim(T)) || T <- string:split(Shape, "x", all)]}
    catch error:badarg -> error
    end.

simulate_outliers(Options) ->
    case maps:get(outliers, Options, undefined) of
        undefined ->
            {ok, 0.0};
        Text ->
            case terrain_lab_cli:number(Text) of
                {ok, F} when F >= 0, F =< 1 -> {ok, F};
                _ -> {error, {topology_cmd, {bad_option, "outliers", Text, "a fraction of pairs between 0 and 1"}}}
            end
    end.

simulate_progress(Io) ->
    Last = atomics:new(1, [{signed, true}]),              % when progress was last said, ms
    ok = atomics:put(Last, 1, erlang:monotonic_time(millisecond)),
    fun(#{placed := Placed, total := Total, pairs := Pairs, elapsed_ms := Elapsed}) ->
            Now = erlang:monotonic_time(millisecond),
            case Now - atomics:get(Last, 1) >= 1000 orelse Placed =:= Total of
                true ->
                    ok = atomics:put(Last, 1, Now),
                    terrain_lab_io:progress(Io, "simulate: ~b of ~b nodes placed, ~b pairs measured, ~.1f s~n",
                                            [Placed, Total, Pairs, Elapsed / 1000]);
                false ->
                    ok
            end
    end.

simulate_report(Report, true, Io) ->
    terrain_lab_io:out(Io, "~ts~n", [terrain_json:encode(Report)]);
simulate_report(#{nodes := N, pairs_measured := M, pairs_total := T, clade_recall := R, clade_precision := P,
                  seconds := S, peak_memory_mb := Mem, unplaced := U}, false, Io) ->
    terrain_lab_io:out(Io, "~b nodes: ~b of ~b ordered pairs measured (~.3f%), clade recall ~.3f, precision ~.3f, "
                       "~.1f s, peak memory ~p MB~ts~n",
                       [N, M, T, 100 * M / max(1, T), R, P, S, Mem,
                        case U of 0 -> ""; _ -> io_lib:format(", ~b nodes not placed", [U]) end]).
