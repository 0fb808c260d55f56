%% @private
%% @doc The cost of sending EMAS solutions between processes: round trips of one
%% solution, as a list of floats or as a binary, to an echo process on this node or
%% on another. On one node a message is copied into the receiver's heap, except a
%% binary over 64 bytes, which is shared by reference (the seed's reason to send
%% binaries); between nodes both are encoded in the external term format.
-module(terrain_emas_messages).

%% API
-export([cost/1]).

%% Internal exports
-export([echo/1]).

%% exports_not_used: echo/1 is spawned on the measured node (spawn_monitor/4).
-ignore_xref([{echo, 1}]).

-export_type([options/0]).

-type options() :: #{solution := binary | list,
                     messages := pos_integer(),       % timed round trips
                     dimensions => pos_integer(),     % genes (default 100)
                     node => node()}.                 % where the echo runs (default this node)

-define(WARMUP, 200).
-define(TIMEOUT, 5000).

%% @doc Times `messages' round trips; returns the mean round trip in µs and the
%% bytes a send copies (heap words on one node, the external format between nodes).
-spec cost(options()) -> #{atom() => term()}.
cost(#{solution := Kind, messages := Count} = Options) ->
    Node = maps:get(node, Options, node()),
    Dimensions = maps:get(dimensions, Options, 100),
    {Agent, _} = terrain_emas:new_agent((terrain_emas:defaults())#{dimensions => Dimensions, solution => Kind},
                                        terrain_emas:island_seed(1, messages)),
    Solution = element(1, Agent),
    {Echo, MRef} = spawn_monitor(Node, ?MODULE, echo, [self()]),
    try
        ok = round_trips(Echo, MRef, Solution, ?WARMUP),
        T0 = erlang:monotonic_time(nanosecond),
        ok = round_trips(Echo, MRef, Solution, Count),
        Ns = erlang:monotonic_time(nanosecond) - T0,
        Bytes = case Node =:= node() of
                    true -> erts_debug:flat_size(Solution) * erlang:system_info(wordsize);
                    false -> byte_size(term_to_binary(Solution))
                end,
        #{solution => Kind, node => case Node =:= node() of true -> local; false -> remote end,
          messages => Count, round_trip_us => Ns / Count / 1000, bytes => Bytes}
    after
        exit(Echo, kill),
        demonitor(MRef, [flush])
    end.

round_trips(_Echo, _MRef, _Solution, 0) ->
    ok;
round_trips(Echo, MRef, Solution, K) ->
    Echo ! {self(), Solution},
    receive
        {Echo, _Back} -> round_trips(Echo, MRef, Solution, K - 1);
        {'DOWN', MRef, process, Echo, Why} -> error({echo_failed, Why})
    after ?TIMEOUT ->
            error(echo_timeout)
    end.

%% @doc Sends every message back; ends with its caller.
-spec echo(pid()) -> ok.
echo(Caller) ->
    MRef = monitor(process, Caller),
    echo_loop(Caller, MRef).

echo_loop(Caller, MRef) ->
    receive
        {Caller, Term} -> Caller ! {self(), Term}, echo_loop(Caller, MRef);
        {'DOWN', MRef, process, Caller, _} -> ok
    end.
