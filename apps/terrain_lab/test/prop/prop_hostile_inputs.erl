%% Hostile files through every parser of user files (issue 33, "Deliver" 4): a
%% topology.conf with loops, cliques, unknown and duplicate switches, huge hostlists,
%% long names and bytes that are not UTF-8; cluster specs; topology terms and
%% `terrain.topology/1' JSON; `terrain.latency/1' JSON; and devices, FIFOs and
%% directories in their place.
%%
%% Each case writes one file and runs the real command that reads it in-process
%% (`terrain_lab_cli:run/2' with captured output) in a process of its own, under a
%% time limit (10 s) and a memory limit (the process's heap capped at 500 MB, and the
%% VM's total memory sampled every 20 ms). It checks that the command ends with 0, 1
%% or 2, never 70; that a failure ends stderr with a sentence (`terrain topology: ...'; no internal
%% error, no stack trace, at most 2,000 characters: a 1 MB line is not echoed); and
%% that no case makes more than 20,000 atoms (names are counted before they become
%% atoms). The generators describe a file (a small term that shrinks); the property
%% builds its bytes.
-module(prop_hostile_inputs).
-include_lib("proper/include/proper.hrl").

-export([prop_hostile_files_end_with_a_sentence/0]).

-define(TIME_LIMIT_MS, 10000).
-define(MEMORY_LIMIT, 500 * 1024 * 1024).
-define(ATOM_LIMIT, 20000).
-define(MAX_ERR, 2000).

prop_hostile_files_end_with_a_sentence() ->
    ?FORALL({Input, Command}, input(),
            begin
                Dir = fresh_dir(),
                try
                    File = make_input(Dir, Input),
                    Line = command_line(Command, File, Dir),
                    Result = run_limited(Line),
                    ?WHENFAIL(io:format("input ~0tP~nterrain ~ts~n-> ~0tP~n", [Input, 12, lists:join(" ", Line), Result, 20]),
                              acceptable(Result))
                catch
                    Class:Reason:Stack -> io:format("the case raised ~p:~0tP~n~0tP~n", [Class, Reason, 12, Stack, 12]), false
                after
                    _ = os:cmd("rm -rf '" ++ Dir ++ "'")
                end
            end).

acceptable({done, Code, Err, #{atoms := Atoms, peak := Peak, ms := Ms}}) ->
    lists:member(Code, [0, 1, 2])
        andalso (Code =:= 0 orelse string:prefix(last_line(Err), "terrain ") =/= nomatch)
        andalso string:find(Err, "internal error") =:= nomatch
        andalso length(Err) =< ?MAX_ERR
        andalso Atoms =< ?ATOM_LIMIT
        andalso Peak =< ?MEMORY_LIMIT
        andalso Ms =< ?TIME_LIMIT_MS;
acceptable(_Killed) ->
    false.

last_line(Err) ->
    case string:lexemes(Err, "\n") of
        [] -> "";
        Lines -> lists:last(Lines)
    end.

%%--------------------------------------------------------------------
%% Running one command under limits

%% Runs the command line in a process of its own with a capped heap; the caller
%% samples the VM's memory above the level before the case until it ends.
run_limited(Line) ->
    Atoms0 = erlang:system_info(atom_count),
    Base = erlang:memory(total),
    T0 = erlang:monotonic_time(millisecond),
    Self = self(),
    {Pid, Ref} = spawn_monitor(fun() ->
                                       process_flag(max_heap_size, #{size => ?MEMORY_LIMIT div 8, kill => true,
                                                                     error_logger => false}),
                                       Self ! {self(), terrain_lab_test_io:run(Line)}
                               end),
    Result = wait(Pid, Ref, T0 + ?TIME_LIMIT_MS, 0, Base),
    case Result of
        {done, Code, Err, Peak} ->
            {done, Code, Err, #{atoms => erlang:system_info(atom_count) - Atoms0, peak => Peak,
                                ms => erlang:monotonic_time(millisecond) - T0}};
        Other ->
            Other
    end.

wait(Pid, Ref, Deadline, Peak, Base) ->
    receive
        {Pid, {Code, _Out, Err}} ->
            demonitor(Ref, [flush]),
            {done, Code, Err, Peak};
        {'DOWN', Ref, process, Pid, Why} ->
            {died, Why}
    after 20 ->
            Peak1 = max(Peak, erlang:memory(total) - Base),
            case erlang:monotonic_time(millisecond) > Deadline orelse Peak1 > ?MEMORY_LIMIT of
                true -> exit(Pid, kill), {killed, #{peak => Peak1}};
                false -> wait(Pid, Ref, Deadline, Peak1, Base)
            end
    end.

%%--------------------------------------------------------------------
%% Generators: {Input, Command}

input() ->
    frequency([{4, {conf(), oneof([import, import_json])}},
               {3, {spec(), oneof([simulate_spec, show, compare_truth])}},
               {3, {term_file(), oneof([show, compare_truth, compare_found, load])}},
               {3, {topology_json(), oneof([show, compare_truth, load])}},
               {2, {latency_json(), discover}},
               {1, {special(), oneof([import, show, compare_truth, simulate_spec, discover, load])}}]).

%% topology.conf
conf() ->
    oneof([{conf_graph, list({range(1, 8), list(range(1, 10)), list(range(1, 6))})},
           {conf_clique, range(2, 40)},
           {conf_hostlist, oneof([range(1, 20), 100001, 2000000, 1000000000000])},
           {conf_long_name, oneof([range(250, 260), 1000, 300000])},
           {conf_bytes, binary()},
           {conf_lines, list(oneof(["SwitchName=", "Nodes=", "Switches=", "Level=", "#", "\n", " ", "=", ",", "[", "]",
                                    "-", "s1", "h[1-3]", "\r", <<16#e9>>, <<16#ff, 16#fe>>]))}]).

%% cluster specs
spec() ->
    oneof([{spec_deep, oneof([range(1, 20), 999, 1001, 5000])},
           {spec_nodes, oneof([range(1, 20), 100001, 200001])},
           {spec_long_name, range(250, 400)},
           {spec_bytes, binary()},
           {spec_tokens, list(token())}]).

%% topology terms (term/0 is PropEr's)
term_file() ->
    oneof([{term_deep, oneof([range(1, 20), 257, 500, 1001, 100000])},
           {term_nodes, oneof([range(1, 20), 100001, 250000])},
           {term_long_atom, range(250, 400)},
           {term_value, term_value()},
           {term_bytes, binary()},
           {term_tokens, list(token())}]).

%% terrain.topology/1 JSON
topology_json() ->
    oneof([{json_deep, oneof([range(1, 20), 256, 257, 2000, 20000])},
           {json_names, oneof([range(1, 20), 200001])},
           {json_long_name, range(250, 400)},
           {json_value, json_value()},
           {json_bytes, binary()}]).

%% terrain.latency/1 JSON
latency_json() ->
    oneof([{latency_deep, oneof([range(1, 20), 513, 20000])},
           {latency_nodes, oneof([range(0, 6), 100001]), oneof([square, ragged, strings, huge])},
           {latency_long_name, range(250, 400)},
           {latency_value, json_value()},
           {latency_bytes, binary()}]).

special() ->
    oneof([dev_zero, directory, fifo, missing]).

token() ->
    oneof(["{", "}", "[", "]", "(", ")", ",", ".", " ", "\n", "network", "node", "group", "cluster", "#{", "=>",
           "latency", "'", "\"", "$", "%", "1", "-1", "1.0e308", "a", "'q q'", "<<", ">>", "_", "X",
           <<16#e9>>]).

term_value() ->
    ?SIZED(S, term_value(min(S, 4))).

term_value(0) ->
    oneof([integer(), atom_name(), "str", {network, r, []}, {node, a}]);
term_value(N) ->
    oneof([term_value(0),
           {network, atom_name(), list(term_value(N - 1))},
           {network, list(term_value(N - 1))},
           ?LET({Name, H, C}, {atom_name(), oneof([integer(), float(), a]), list(term_value(N - 1))},
                {network, Name, #{height => H}, C}),
           {node, oneof([atom_name(), integer()])},
           list(term_value(N - 1))]).

atom_name() ->
    oneof([a, b, c, r, root, 'x y']).

json_value() ->
    ?SIZED(S, json_value(min(S, 4))).

json_value(0) ->
    oneof([integer(), float(), <<"s">>, null, true, exactly(#{})]);
json_value(N) ->
    oneof([json_value(0),
           list(json_value(N - 1)),
           ?LET({F, T, Ns, S}, {oneof([<<"terrain.topology/1">>, <<"terrain.latency/1">>, <<"x">>]),
                                json_value(N - 1), json_value(N - 1), json_value(N - 1)},
                #{<<"format">> => F, <<"tree">> => T, <<"nodes">> => Ns, <<"stats">> => S}),
           ?LET({Name, C}, {oneof([<<"r">>, 1, null]), list(json_value(N - 1))},
                #{<<"name">> => Name, <<"children">> => C}),
           ?LET({Node, H}, {oneof([<<"a">>, <<"b">>, 1, <<>>]), json_value(0)},
                #{<<"node">> => Node, <<"height">> => H})]).

%%--------------------------------------------------------------------
%% Files

make_input(Dir, dev_zero) -> _ = Dir, "/dev/zero";
make_input(Dir, directory) -> Dir;
make_input(Dir, fifo) -> File = filename:join(Dir, "fifo"), "" = os:cmd("mkfifo '" ++ File ++ "'"), File;
make_input(Dir, missing) -> filename:join(Dir, "missing");
make_input(Dir, Input) ->
    File = filename:join(Dir, "input"),
    ok = file:write_file(File, bytes(Input)),
    File.

bytes({conf_graph, Switches}) ->
    [io_lib:format("SwitchName=s~b~ts~ts~n", [S, list_field(" Switches=s", Cs), list_field(" Nodes=h", Hs)])
     || {S, Cs, Hs} <- Switches];
bytes({conf_clique, N}) ->
    [io_lib:format("SwitchName=s~b Switches=s[1-~b] Nodes=h~b~n", [I, N, I]) || I <- lists:seq(1, N)];
bytes({conf_hostlist, N}) ->
    io_lib:format("SwitchName=s1 Nodes=h[1-~b]~n", [N]);
bytes({conf_long_name, N}) ->
    ["SwitchName=", lists:duplicate(N, $L), " Nodes=h1,h2\n"];
bytes({conf_bytes, Bin}) ->
    [<<"SwitchName=s">>, Bin, <<" Nodes=h1\n">>];
bytes({conf_lines, Parts}) ->
    Parts;
bytes({spec_deep, D}) ->
    ["{cluster, c, #{latency => 100}}.\n", lists:duplicate(D, "{group, g, #{latency => 10}, ["), "{node, n, #{}}",
     lists:duplicate(D, "]}"), ".\n"];
bytes({spec_nodes, N}) ->
    ["{cluster, c, #{latency => 100}}.\n{group, g, #{latency => 10}, [",
     lists:join(",", [["{node,zqs", integer_to_list(I), ",#{}}"] || I <- lists:seq(1, N)]), "]}.\n"];
bytes({spec_long_name, N}) ->
    ["{cluster, c, #{}}.\n{group, g, #{}, [{node, '", lists:duplicate(N, $n), "', #{}}]}.\n"];
bytes({spec_bytes, Bin}) ->
    [<<"{cluster, c, #{}}.\n">>, Bin];
bytes({spec_tokens, Tokens}) ->
    ["{cluster, c, #{}}.\n", Tokens];
bytes({term_deep, D}) ->
    [lists:duplicate(D, "{network, r, ["), "{node, a}", lists:duplicate(D, "]}"), ".\n"];
bytes({term_nodes, N}) ->
    ["{network, r, [", lists:join(",", [["{node, zqt", integer_to_list(I), "}"] || I <- lists:seq(1, N)]), "]}.\n"];
bytes({term_long_atom, N}) ->
    ["{network, r, [{node, '", lists:duplicate(N, $x), "'}]}.\n"];
bytes({term_value, Term}) ->
    io_lib:format("~tp.~n", [Term]);
bytes({term_bytes, Bin}) ->
    Bin;
bytes({term_tokens, Tokens}) ->
    Tokens;
bytes({json_deep, D}) ->
    ["{\"format\":\"terrain.topology/1\",\"tree\":", lists:duplicate(D, "{\"name\":\"r\",\"children\":["),
     "{\"node\":\"a\"}", lists:duplicate(D, "]}"), "}\n"];
bytes({json_names, N}) ->
    ["{\"format\":\"terrain.topology/1\",\"tree\":{\"name\":\"r\",\"children\":[",
     lists:join(",", [["{\"node\":\"zqj", integer_to_list(I), "\"}"] || I <- lists:seq(1, N)]), "]}}\n"];
bytes({json_long_name, N}) ->
    ["{\"format\":\"terrain.topology/1\",\"tree\":{\"name\":\"", lists:duplicate(N, $r),
     "\",\"children\":[{\"node\":\"a\"}]}}\n"];
bytes({json_value, Value}) ->
    terrain_json:encode(Value);
bytes({json_bytes, Bin}) ->
    [<<"{\"">>, Bin];
bytes({latency_deep, D}) ->
    ["{\"format\":\"terrain.latency/1\",\"nodes\":[\"a\"],\"stats\":{\"min\":", lists:duplicate(D, "["),
     lists:duplicate(D, "]"), "}}\n"];
bytes({latency_nodes, N, Kind}) ->
    Names = [<<"zql", (integer_to_binary(I))/binary, "@h">> || I <- lists:seq(1, N)],
    Small = lists:seq(1, min(N, 6)),
    Row = fun(I) -> case Kind of
                        square -> [abs(I - J) * 100 || J <- Small];
                        ragged -> lists:seq(1, I);
                        strings -> [<<"x">> || _ <- Small];
                        huge -> [1.0e308 || _ <- Small]
                    end end,
    terrain_json:encode(#{format => <<"terrain.latency/1">>, nodes => Names,
                          stats => #{min => [Row(I) || I <- Small]}});
bytes({latency_long_name, N}) ->
    terrain_json:encode(#{format => <<"terrain.latency/1">>, nodes => [binary:copy(<<"n">>, N), <<"b">>],
                          stats => #{min => [[0, 1], [1, 0]]}});
bytes({latency_value, Value}) ->
    terrain_json:encode(Value);
bytes({latency_bytes, Bin}) ->
    [<<"{\"format\":\"terrain.latency/1\",">>, Bin].

list_field(_Key, []) -> "";
list_field(Key, Items) -> [Key, lists:join(",", [integer_to_list(I) || I <- Items])].

%% The command that reads the file; a second file (a valid tree) where it needs one.
command_line(import, File, _Dir) -> ["topology", "import", "slurm", File];
command_line(import_json, File, _Dir) -> ["topology", "import", "slurm", File, "--format", "json"];
command_line(simulate_spec, File, _Dir) -> ["topology", "simulate", "--spec", File, "--noise", "0"];
command_line(show, File, _Dir) -> ["topology", "show", File];
command_line(compare_truth, File, Dir) -> ["topology", "compare", good_tree(Dir), File];
command_line(compare_found, File, Dir) -> ["topology", "compare", File, good_tree(Dir)];
command_line(load, File, Dir) -> ["topology", "load", File, "--state-dir", filename:join(Dir, "no-cluster")];
command_line(discover, File, _Dir) -> ["topology", File].

good_tree(Dir) ->
    File = filename:join(Dir, "good.term"),
    ok = file:write_file(File, "{network, r, [{network, a, [{node, a}, {node, b}]}, {node, c}]}.\n"),
    File.

fresh_dir() ->
    Dir = filename:join("/tmp", "prop_hostile_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_path(Dir),
    Dir.
