#!/usr/bin/env escript
%%! -hidden
%% Makes the full mesh of a running cluster (docs/BENCHMARKS.md, "256 VMs"): its first node connects to every
%% other (global then connects each pair), and the script waits until every node holds n-1 connections or the
%% counts stop changing (at most 180 s). Prints one line: nodes, connections per node (min, max), milliseconds.
%% usage: examples/scale_mesh.escript STATE_DIR
main([State]) ->
    {ok, _} = net_kernel:start(list_to_atom("scale_mesh" ++ os:getpid()), #{name_domain => shortnames}),
    {ok, Cookie} = file:read_file(filename:join(State, "cookie")),
    true = erlang:set_cookie(binary_to_atom(string:trim(Cookie))),
    {ok, B} = file:read_file(filename:join(State, "cluster.json")),
    Nodes = [binary_to_atom(N) || {match, [N]} <- [re:run(L, <<"\"node\": *\"([^\"]+)\"">>,
                                                          [{capture, all_but_first, binary}])
                                                   || L <- binary:split(B, <<",">>, [global])]],
    N1 = hd(Nodes),
    pong = net_adm:ping(N1),
    T0 = erlang:monotonic_time(millisecond),
    _ = erpc:call(N1, fun() -> [net_kernel:connect_node(X) || X <- Nodes] end, 120000),
    Counts = wait(Nodes, T0, none),
    io:format("mesh: ~b nodes, connections per node min ~b max ~b, ~b ms~n",
              [length(Nodes), lists:min(Counts), lists:max(Counts), erlang:monotonic_time(millisecond) - T0]);
main(_) ->
    io:format(standard_error, "usage: scale_mesh.escript STATE_DIR~n", []),
    halt(2).

wait(Nodes, T0, Previous) ->
    Counts = [erpc:call(X, fun() -> length(nodes()) end, 60000) || X <- Nodes],
    Elapsed = erlang:monotonic_time(millisecond) - T0,
    Missing = lists:sum([length(Nodes) - 1 - C || C <- Counts]),
    case Missing =< 0 orelse (Counts =:= Previous andalso Elapsed > 10000) orelse Elapsed > 180000 of
        true -> Counts;
        false -> timer:sleep(2000), wait(Nodes, T0, Counts)
    end.
