-module(netem_at_scale).
-export([main/1, echo/0]).
%% Emulated links at scale (docs/NETEM.md, "At scale"): against a cluster started by `terrain up` (its state
%% directory), mesh the cluster from one node, then the CPU that the VMs and their native proxy programs use
%% over 10 s with nothing running, then round trips per level (median of 20 per pair, 4 pairs per level),
%% each level's medians checked against the goal (2 x one-way latency, +-10% + 100 us), and the CPU again.
%% examples/netem_at_scale.sh runs it for both proxies at several sizes; by hand:
%%   erlc -o /tmp examples/netem_at_scale.erl
%%   erl -noshell -hidden -sname probe -pa _build/default/lib/*/ebin -pa /tmp \
%%       -eval 'netem_at_scale:main(["/tmp/state", "150", "20000,2000,200"])'
%% main([StateDir, MeshTimeoutS, "TOP,SITE,RACK" one-way latencies in us, as given to scale_spec.py]).
main([Dir, MeshS, Latencies]) ->
    {ok, B} = file:read_file(filename:join(Dir, "cluster.json")),
    #{<<"nodes">> := Recs} = json_decode(B),
    Nodes = [{binary_to_atom(maps:get(<<"node">>, R)), [binary_to_atom(P) || P <- maps:get(<<"group_path">>, R)],
              binary_to_list(maps:get(<<"os_pid">>, R))} || R <- Recs],
    {ok, C} = file:read_file(filename:join(Dir, "cookie")),
    erlang:set_cookie(binary_to_atom(string:trim(C))),
    All = [N || {N, _, _} <- Nodes],
    [{N1, _, _} | _] = Nodes,
    pong = net_adm:ping(N1),
    {Mod, Bin, File} = code:get_object_code(?MODULE),
    [ok = load(N, Mod, Bin, File) || N <- All],
    Proxies = lists:usort([proxy(N) || N <- All]),
    T0 = erlang:monotonic_time(millisecond),
    erpc:call(N1, fun() -> [net_kernel:connect_node(X) || X <- All] end, 120000),
    Deadline = T0 + list_to_integer(MeshS) * 1000,
    Counts = wait_mesh(All, Deadline),
    io:format("mesh: ~b nodes, connections per node min ~b max ~b (of ~b), ~b ms; proxies: ~w~n",
              [length(All), lists:min(Counts), lists:max(Counts), length(All) - 1,
               erlang:monotonic_time(millisecond) - T0, Proxies]),
    %% the native programs are the VMs' children: their CPU is not in the VMs' own counters
    Programs = [{N, [], P} || N <- All, {ok, #{os_pid := P0}} <- [native_stats(N)], P <- [integer_to_list(P0)]],
    Pids = Nodes ++ Programs,
    timer:sleep(2000),
    Cpu1 = cpu(Pids), Vm1 = cpu(Nodes), L1 = loadavg(), timer:sleep(10000), Cpu2 = cpu(Pids), Vm2 = cpu(Nodes),
    io:format("idle: the VMs and their proxy programs used ~.3f cores over 10 s (programs ~.3f), "
              "~.1f us of a core per second per connection (load average ~s)~n",
              [(Cpu2 - Cpu1) / 100 / 10, ((Cpu2 - Cpu1) - (Vm2 - Vm1)) / 100 / 10,
               (Cpu2 - Cpu1) * 10000 / 10 / max(1, lists:sum(Counts) div 2), L1]),
    [Top, Site, Rack] = [list_to_integer(X) || X <- string:lexemes(Latencies, ",")],
    Levels = [{rack, Rack, fun(P1, P2) -> P1 =:= P2 end},
              {site, Site, fun(P1, P2) -> hd(P1) =:= hd(P2) andalso P1 =/= P2 end},
              {top, Top, fun(P1, P2) -> hd(P1) =/= hd(P2) end}],
    Sources = lists:sublist(Nodes, 1, 4),
    Late0 = late(All),
    Met = [begin
               Pairs = [{A, hd([Bn || {Bn, PB, _} <- Nodes, Bn =/= A, Same(PA, PB)])} || {A, PA, _} <- Sources],
               Rtts = [rtt(A, Bn) || {A, Bn} <- Pairs],
               Spec = 2 * OneWay,
               Ok = lists:all(fun(R) -> abs(R - Spec) =< Spec div 10 + 100 end, Rtts),
               io:format("level ~-5s spec ~6b us, goal ~b-~b us; round trips (median of 20 per pair, us): ~w ~s~n",
                         [Level, Spec, Spec - Spec div 10 - 100, Spec + Spec div 10 + 100, Rtts,
                          case Ok of true -> "within"; false -> "OUTSIDE" end]),
               Ok
           end || {Level, OneWay, Same} <- Levels],
    Late1 = late(All),
    _ = Late1 =/= [] andalso
        begin
            #{count := K0, sum_ns := S0, histogram := H0} = Late0,
            #{count := K1, sum_ns := S1, histogram := H1} = Late1,
            io:format("native proxies during the round trips: ~b chunks left ~.1f us after their due time on "
                      "average; by lateness (us): ~w~n",
                      [K1 - K0, (S1 - S0) / 1000 / max(1, K1 - K0),
                       [{Bound, X1 - X0} || {{Bound, X1}, {Bound, X0}} <- lists:zip(H1, H0)]])
        end,
    Cpu3 = cpu(Pids), timer:sleep(5000), Cpu4 = cpu(Pids),
    io:format("after: the VMs and their proxy programs used ~.3f cores over 5 s (load average ~s); "
              "every level within the goal: ~s~n",
              [(Cpu4 - Cpu3) / 100 / 5, loadavg(), lists:all(fun(X) -> X end, Met)]),
    halt(0).
%% The native programs' lateness counters summed over the cluster ([] with the Erlang proxies).
late(All) ->
    case [L || N <- All, {ok, #{late := L}} <- [native_stats(N)]] of
        [] -> [];
        [#{histogram := H} | _] = Late ->
            #{count => lists:sum([K || #{count := K} <- Late]),
              sum_ns => lists:sum([S || #{sum_ns := S} <- Late]),
              histogram => [{B, lists:sum([proplists:get_value(B, Hs) || #{histogram := Hs} <- Late])}
                            || {B, _} <- H]}
    end.
proxy(N) ->
    case erpc:call(N, terrain_lab_netem_server, status, [], 20000) of
        #{proxy := P} -> P;
        _ -> unknown
    end.
native_stats(N) ->
    try erpc:call(N, terrain_lab_netem_server, native_stats, [], 20000) catch _:_ -> {error, unreachable} end.
%% global meshes the cluster after the first node's connections; should it not have within 120 s (it left
%% 128-VM meshes at 77-127 connections per node for minutes), every node connects to the nodes it misses.
wait_mesh(All, Deadline) ->
    wait_mesh(All, Deadline, erlang:monotonic_time(millisecond) + 120000).
wait_mesh(All, Deadline, Nudge) ->
    Counts = [try erpc:call(X, fun() -> length(nodes()) end, 20000) catch _:_ -> 0 end || X <- All],
    Now = erlang:monotonic_time(millisecond),
    case lists:min(Counts) >= length(All) - 1 orelse Now > Deadline of
        true -> Counts;
        false when Now > Nudge ->
            io:format("mesh: ~b connections of ~b after ~b s; every node connects to the nodes it misses~n",
                      [lists:sum(Counts) div 2, length(All) * (length(All) - 1) div 2, (Now - Nudge) div 1000 + 120]),
            Requests = [erpc:send_request(X, fun() -> [net_kernel:connect_node(Y) || Y <- All -- [node() | nodes()]] end)
                        || X <- All],
            [catch erpc:receive_response(R, 120000) || R <- Requests],
            wait_mesh(All, Deadline, infinity);
        false -> timer:sleep(2000), wait_mesh(All, Deadline, Nudge)
    end.
load(N, Mod, Bin, File) ->
    case erpc:call(N, code, load_binary, [Mod, File, Bin], 20000) of {module, _} -> ok; E -> E end.
rtt(A, B) ->
    erpc:call(A, fun() ->
                         E = spawn(B, ?MODULE, echo, []),
                         [begin E ! {self(), x}, receive x -> ok end end || _ <- lists:seq(1, 3)],
                         Ts = [begin T = erlang:monotonic_time(microsecond), E ! {self(), x},
                                     receive x -> ok end, erlang:monotonic_time(microsecond) - T end
                               || _ <- lists:seq(1, 20)],
                         exit(E, kill),
                         lists:nth(11, lists:sort(Ts))
                 end, 60000).
echo() -> receive {P, M} -> P ! M, echo() end.
cpu(Nodes) ->
    lists:sum([case file:read_file("/proc/" ++ Pid ++ "/stat") of
                   {ok, S} -> F = string:lexemes(lists:last(string:split(binary_to_list(S), ")")), " "),
                              list_to_integer(lists:nth(12, F)) + list_to_integer(lists:nth(13, F));
                   _ -> 0
               end || {_, _, Pid} <- Nodes]).
loadavg() -> {ok, B} = file:read_file("/proc/loadavg"), hd(string:lexemes(binary_to_list(B), " ")).
json_decode(B) -> {ok, J} = terrain_json:decode(B), J.
