%% Test helper: member processes for collective operations, spread round-robin over
%% nodes; each runs a script (a fun of the communicator) and reports its result.
-module(terrain_paths_test_members).

-export([start/2, run/3, run/4, stop/1, member/1]).

%% @doc Spawns N members, round-robin over Nodes, each waiting for a script.
-spec start(pos_integer(), [node()]) -> [pid()].
start(N, Nodes) ->
    Parent = self(),
    [spawn(lists:nth(I rem length(Nodes) + 1, Nodes), ?MODULE, member, [Parent]) || I <- lists:seq(0, N - 1)].

%% @doc Runs `Script(Comm, Rank)' in every member; returns the results in rank order
%% (`{died, Reason}' for a member that died, `timeout' for one that did not answer
%% in time).
-spec run([pid()], term(), fun()) -> [term()].
run(Members, Comm, Script) ->
    run(Members, Comm, Script, 30000).

-spec run([pid()], term(), fun(), timeout()) -> [term()].
run(Members, Comm, Script, Timeout) ->
    Ref = make_ref(),
    Monitors = [erlang:monitor(process, M) || M <- Members],
    [M ! {run, Ref, Comm, Script, Rank} || {Rank, M} <- lists:zip(lists:seq(0, length(Members) - 1), Members)],
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    Results = [receive
                   {Ref, M, Result} -> Result;
                   {'DOWN', MRef, process, M, Why} -> {died, Why}
               after max(0, Deadline - erlang:monotonic_time(millisecond)) -> timeout
               end || {M, MRef} <- lists:zip(Members, Monitors)],
    [erlang:demonitor(MRef, [flush]) || MRef <- Monitors],
    Results.

%% @doc Stops the members.
-spec stop([pid()]) -> ok.
stop(Members) ->
    [exit(M, kill) || M <- Members],
    ok.

%% @doc A member's loop.
-spec member(pid()) -> no_return().
member(Parent) ->
    receive
        {run, Ref, Comm, Script, Rank} ->
            Parent ! {Ref, self(), Script(Comm, Rank)},
            member(Parent)
    end.
