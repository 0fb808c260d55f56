%% @private
%% @doc The parent of one member of a placed group, on the member's node.
%%
%% A placed group ({@link terrain_placed}) spawns one keeper per member on the chosen
%% node. The keeper runs the group's start function there, as a supervisor would:
%% `{M, F, A}' returns `{ok, Pid}' and usually links `Pid' to its caller, the keeper
%% (a function that does not link, such as `gen_event:start/0', is linked here). It
%% then tells the group `{terrain_placed_started, Keeper, Pid}' and waits:
%% <ul>
%% <li>the member exits (any reason): the keeper exits `{member_exit, Reason}', and
%%     the group, which monitors the keeper, starts a replacement;</li>
%% <li>the group stops the member (`{terrain_placed_stop, Group}'), or the group
%%     goes away (it crashed, or the connection to its node dropped): the keeper
%%     shuts the member down (`shutdown', then `kill' after 5 s) and exits
%%     `normal'. So a member never outlives its group's interest in it.</li>
%% </ul>
%% The start function failing or returning anything else than `{ok, Pid}' makes the
%% keeper exit `{start_failed, Why}'.
-module(terrain_placed_keeper).

%% Internal exports
-export([init/2]).

%% exports_not_used: spawned on the member's node by terrain_placed (erlang:spawn_request/5).
-ignore_xref([{init, 2}]).

-define(SHUTDOWN, 5000).

%%--------------------------------------------------------------------
%% Internal exports

%% @doc Runs the start function and keeps the member (see the module doc).
-spec init(Group :: pid(), Start :: {module(), atom(), [term()]}) -> no_return().
init(Group, {M, F, A}) ->
    process_flag(trap_exit, true),
    GroupRef = erlang:monitor(process, Group),
    Member = try apply(M, F, A) of
                 {ok, Pid} when is_pid(Pid) -> Pid;
                 Other -> exit({start_failed, Other})
             catch
                 Class:Reason -> exit({start_failed, {Class, Reason}})
             end,
    true = link(Member),
    Group ! {terrain_placed_started, self(), Member},
    loop(Group, GroupRef, Member).

%%--------------------------------------------------------------------
%% Internal

-spec loop(pid(), reference(), pid()) -> no_return().
loop(Group, GroupRef, Member) ->
    receive
        {'EXIT', Member, Reason} ->
            exit({member_exit, Reason});
        {terrain_placed_stop, Group} ->
            stop_member(Member);
        {'DOWN', GroupRef, process, Group, _} ->
            stop_member(Member);
        {'EXIT', _Other, _} ->
            loop(Group, GroupRef, Member)
    end.

-spec stop_member(pid()) -> no_return().
stop_member(Member) ->
    exit(Member, shutdown),
    receive
        {'EXIT', Member, _} -> exit(normal)
    after ?SHUTDOWN ->
            exit(Member, kill),
            receive {'EXIT', Member, _} -> exit(normal)
            after ?SHUTDOWN -> exit(normal)
            end
    end.
