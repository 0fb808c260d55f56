%% @private
%% @doc The target of `fsm_server_call': a `gen_statem' (DE-Bench used `gen_fsm',
%% deprecated since OTP 20) with one state that answers P2P operations like
%% `terrain_bench_server'.
-module(terrain_bench_statem).
-behaviour(gen_statem).

%% API
-export([start_link/0]).

%% exports_not_used: start_link/0 is named in terrain_bench_sup's child spec; ready/3 is the
%% gen_statem state function.
-ignore_xref([{start_link, 0}, {ready, 3}]).

%% gen_statem callbacks
-export([init/1,
         callback_mode/0,
         ready/3]).

%% @doc Starts the state machine, registered as `terrain_bench_statem'.
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_statem:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc One state, `ready'.
-spec init([]) -> {ok, ready, nodata}.
init([]) ->
    {ok, ready, nodata}.

%% @doc State functions.
-spec callback_mode() -> state_functions.
callback_mode() ->
    state_functions.

%% @doc `{p2p, Payload, Crc, ComputeUs}' calls are answered; anything else is ignored.
-spec ready(gen_statem:event_type(), term(), nodata) -> gen_statem:event_handler_result(ready).
ready({call, From}, {p2p, Payload, Crc, ComputeUs}, Data) ->
    {keep_state, Data, [{reply, From, terrain_bench_ops:answer(Payload, Crc, ComputeUs)}]};
ready(_Type, _Event, _Data) ->
    keep_state_and_data.
