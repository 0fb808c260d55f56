%% A member's node stopped in the middle of allreduce, on the 3-level emulated cluster
%% (docs/COLLECTIVES.md, "Failure"): 16 members loop on hierarchical allreduce, one
%% node is halted, every survivor returns {error, {member_down, Rank, Node}}.
%%
%%   make build && erlc -pa _build/default/lib/terrain_lab/ebin -o /tmp examples/member_down_demo.erl
%%   erl -noshell -sname demo -pa _build/default/lib/*/ebin -pa /tmp -eval 'member_down_demo:run(), halt().'
-module(member_down_demo).
-export([run/0, member/1]).

%% A member: loops on allreduce until it fails, reports, and stays alive until told
%% (a member that exited right away would be one more member going down for the
%% others still in their call).
member(Parent) ->
    receive {go, Comm} -> Parent ! {self(), loop(Comm, 0)} end,
    receive stop -> ok end.

loop(Comm, N) ->
    T0 = erlang:monotonic_time(millisecond),
    case terrain_paths:allreduce(Comm, terrain_paths:rank(Comm), sum) of
        {ok, 120} -> loop(Comm, N + 1);
        Error -> {N, Error, erlang:monotonic_time(millisecond) - T0, erlang:system_time(millisecond)}
    end.
run() ->
    {ok, Spec} = terrain_lab:read_spec("examples/paths.cluster"),
    {ok, C} = terrain_lab:start_cluster(Spec, #{prefix => "stop_"}),
    Infos = terrain_lab:cluster_nodes(C),
    Names = maps:from_list([{Name, N} || #{name := Name, node := N} <- Infos]),
    Topology = terrain_lab_spec:topology(Spec, fun(Name) -> maps:get(Name, Names) end),
    {Mod, Bin, File} = code:get_object_code(?MODULE),
    _ = erpc:multicall([N || #{node := N} <- Infos], code, load_binary, [Mod, File, Bin], 10000),
    Self = self(),
    Members = [spawn(N, ?MODULE, member, [Self]) || #{node := N} <- Infos],
    {ok, Comm} = terrain_paths:communicator(Members, #{algorithm => hierarchical, topology => Topology, timeout => 60000}),
    [M ! {go, Comm} || M <- Members],
    timer:sleep(1500),
    Victim = maps:get(s2r1n3, Names),
    Stopped = erlang:system_time(millisecond),
    io:format("stopping ~p (rank ~p) mid-allreduce (timeout of each call: 60 s)~n",
              [Victim, hd([R || {R, M} <- lists:zip(lists:seq(0, 15), Members), node(M) =:= Victim])]),
    erpc:cast(Victim, erlang, halt, []),
    Results = [receive {M, R} -> {Rank, node(M), R} after 70000 -> {Rank, node(M), no_answer} end
               || {Rank, M} <- lists:zip(lists:seq(0, 15), Members), node(M) =/= Victim],
    [io:format("rank ~2b on ~-24s after ~b allreduces: ~0p, returned ~b ms after the node was stopped~n",
               [Rank, Node, N, Err, At - Stopped]) || {Rank, Node, {N, Err, _Took, At}} <- Results],
    [io:format("rank ~b: ~p~n", [Rank, R]) || {Rank, _, R} <- Results, not is_tuple(R)],
    [M ! stop || M <- Members],
    terrain_lab:stop_cluster(C).
