%% @private
%% @doc The processes the attribute server starts: samplers and pushers.
%%
%% A <b>sampler</b> evaluates one sampled attribute's function every `interval' ms
%% (isolated, under its `timeout'), keeps the last `window' numeric samples and sends
%% their mean to the server, which stores it. Non-numeric samples are skipped.
%%
%% A <b>pusher</b> serves one subscription from another node (push mode): every
%% `Interval' ms it reads the subscribed attributes and sends the subscriber
%% `{'$terrain_attr_push', Ref, node(), Changed}', where Changed lists only the values
%% that changed since the last push (all of them the first time). The message is also
%% the heartbeat that keeps the subscriber's unchanged values fresh. It stops when the
%% subscriber goes away, on `{'$terrain_attr_unsubscribe', Ref}', or with the server.
%%
%% Both are monitored by the server and monitor it in turn; neither is linked.
-module(terrain_attr_worker).

%% API
-export([start_sampler/4,
         start_pusher/5]).

%% Internal exports
-export([sampler/4,
         pusher/5]).

%% exports_not_used: Spawned by the attribute server as {M, F, A} (proc_lib).
-ignore_xref([{pusher, 5}, {sampler, 4}]).

%%--------------------------------------------------------------------
%% API

%% @doc Starts a sampler for one attribute; returns its pid and a monitor on it.
-spec start_sampler(pid(), atom(), {module(), atom(), [term()]},
                    #{interval := pos_integer(), window := pos_integer(), timeout := pos_integer()}) ->
          {pid(), reference()}.
start_sampler(Server, Name, MFA, Opts) ->
    spawn_monitor(?MODULE, sampler, [Server, Name, MFA, Opts]).

%% @doc Starts a pusher for one subscription; returns its pid and a monitor on it.
-spec start_pusher(pid(), reference(), pid(), [atom()], pos_integer()) -> {pid(), reference()}.
start_pusher(Server, Ref, Subscriber, Names, Interval) ->
    spawn_monitor(?MODULE, pusher, [Server, Ref, Subscriber, Names, Interval]).

%%--------------------------------------------------------------------
%% Internal exports

%% @private
-spec sampler(pid(), atom(), {module(), atom(), [term()]},
              #{interval := pos_integer(), window := pos_integer(), timeout := pos_integer()}) -> no_return().
sampler(Server, Name, MFA, Opts) ->
    MRef = monitor(process, Server),
    sample_loop(Server, MRef, Name, MFA, Opts, [], false).

%% @private
-spec pusher(pid(), reference(), pid(), [atom()], pos_integer()) -> no_return().
pusher(Server, Ref, Subscriber, Names, Interval) ->
    ServerRef = monitor(process, Server),
    SubscriberRef = monitor(process, Subscriber),
    push_loop(#{server => ServerRef, subscriber => SubscriberRef, ref => Ref, to => Subscriber,
                names => Names, interval => Interval}, #{}).

%%--------------------------------------------------------------------
%% Internal

sample_loop(Server, MRef, Name, MFA, #{interval := Interval, window := Size, timeout := Timeout} = Opts,
            Window, Warned) ->
    {Window1, Warned1} =
        case terrain_attr_eval:one(Name, MFA, Timeout) of
            V when is_number(V) ->
                W = lists:sublist([V | Window], Size),
                Server ! {'$terrain_sample', self(), Name, lists:sum(W) / length(W)},
                {W, Warned};
            undefined ->
                {Window, Warned};
            Other when not Warned ->
                logger:warning("terrain: sampled attribute ~0tp returned ~0tP, not a number; "
                               "non-numeric samples are skipped", [Name, Other, 10],
                               #{domain => [terrain, attr]}),
                {Window, true};
            _ ->
                {Window, Warned}
        end,
    wait(erlang:monotonic_time(millisecond) + Interval, [MRef], none),
    sample_loop(Server, MRef, Name, MFA, Opts, Window1, Warned1).

push_loop(#{server := ServerRef, subscriber := SubscriberRef, ref := Ref, to := To,
            names := Names, interval := Interval} = S, Last) ->
    Entries = terrain_attr_server:read(Names),
    Changed = [E || {Name, Value, Class} = E <- Entries, maps:get(Name, Last, none) =/= {Value, Class}],
    _ = erlang:send(To, {'$terrain_attr_push', Ref, node(), Changed}, [noconnect]),
    terrain_attr_table:count(pushes_sent),
    Last1 = maps:from_list([{Name, {Value, Class}} || {Name, Value, Class} <- Entries]),
    wait(erlang:monotonic_time(millisecond) + Interval, [ServerRef, SubscriberRef], Ref),
    push_loop(S, Last1).

%% Sleeps until Deadline; exits normally when one of the monitors fires or the
%% subscription is cancelled. Anything else in the mailbox is dropped.
wait(Deadline, Monitors, Ref) ->
    receive
        {'DOWN', MRef, process, _, _} = Down ->
            case lists:member(MRef, Monitors) of
                true -> exit(normal);
                false -> drop(Down), wait(Deadline, Monitors, Ref)
            end;
        {'$terrain_attr_unsubscribe', Ref} ->
            exit(normal);
        Other ->
            drop(Other),
            wait(Deadline, Monitors, Ref)
    after max(0, Deadline - erlang:monotonic_time(millisecond)) ->
            ok
    end.

drop(_Message) ->
    terrain_attr_table:count(malformed_dropped).
