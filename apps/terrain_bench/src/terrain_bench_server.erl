%% @private
%% @doc The target of `gen_server_call': one server per node that checks the payload,
%% computes for `compute_us' and returns the payload (DE-Bench's server process).
-module(terrain_bench_server).
-behaviour(gen_server).

%% API
-export([start_link/0]).

%% exports_not_used: named in terrain_bench_sup's child spec.
-ignore_xref([{start_link, 0}]).

%% gen_server callbacks
-export([init/1,
         handle_call/3,
         handle_cast/2]).

%% @doc Starts the server, registered as `terrain_bench_server'.
-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc No state.
-spec init([]) -> {ok, nostate}.
init([]) ->
    {ok, nostate}.

%% @doc `{p2p, Payload, Crc, ComputeUs}': the answer of a P2P operation.
-spec handle_call({p2p, binary(), non_neg_integer(), non_neg_integer()}, gen_server:from(), nostate) ->
          {reply, binary() | {error, payload_mismatch}, nostate}.
handle_call({p2p, Payload, Crc, ComputeUs}, _From, State) ->
    {reply, terrain_bench_ops:answer(Payload, Crc, ComputeUs), State}.

%% @doc No casts are expected.
-spec handle_cast(term(), nostate) -> {noreply, nostate}.
handle_cast(_Msg, State) ->
    {noreply, State}.
