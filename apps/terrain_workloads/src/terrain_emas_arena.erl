%% @private
%% @doc An arena of the concurrent EMAS model: agents of one island that chose the
%% same behaviour (fight or reproduction) meet here in pairs.
%%
%% An agent enters either with `gen_server:call' (`arena_call => call', the
%% original's first design) or, as the seed's fix for the `make_ref' lock, with a
%% `gen_server:cast' carrying its pid and a `receive' of the answer
%% (`arena_call => cast', the default). Unlike the original, both sides have
%% deadlines: an agent left alone in the arena for `arena_timeout' ms meets alone
%% (a lone fight changes nothing; a lone reproduction has one mutated child), and an
%% agent gives up an arena that has not answered within {@link agent_timeout/1}.
%%
%% A meeting's parents go back to their processes; children become new agent
%% processes on this island. Every `time_check_interval' meetings the arena reads the
%% clock; past the deadline (or on `close') it answers `close' to every agent.
-module(terrain_emas_arena).
-behaviour(gen_server).

%% API
-export([start_link/2,
         enter/4,
         close/1,
         stop/1,
         agent_timeout/1]).

%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-export_type([setup/0]).

-type setup() :: #{kind := fight | reproduction,
                   island := pos_integer(),
                   params := terrain_emas:params(),
                   seed := integer(),
                   deadline := integer(),            % monotonic ms
                   spawn_child := fun((terrain_emas:agent(), integer()) -> any()),
                   record := fun((fight | reproduction, pos_integer(), [terrain_emas:agent()]) -> any())}.
-type from() :: {cast, pid()} | {call, gen_server:from()}.

-record(state, {setup :: setup(),
                waiting :: none | {from(), terrain_emas:agent()},
                rand :: rand:state(),
                meetings = 0 :: non_neg_integer(),
                open = true :: boolean()}).

%%--------------------------------------------------------------------
%% API

%% @doc Starts an arena linked to the caller.
-spec start_link(setup(), [gen_server:start_opt()]) -> {ok, pid()}.
start_link(Setup, Options) ->
    {ok, _} = gen_server:start_link(?MODULE, Setup, Options).

%% @doc An agent enters the arena and waits for the outcome of its meeting:
%% `{agent, Agent}' (itself after the meeting), `close' (the run is over) or
%% `timeout' (the arena did not answer in time).
-spec enter(pid(), terrain_emas:agent(), cast | call, pos_integer()) -> {agent, terrain_emas:agent()} | close | timeout.
enter(Arena, Agent, cast, Timeout) ->
    gen_server:cast(Arena, {interact, self(), Agent}),
    receive
        {emas_arena, Arena, Reply} -> Reply
    after Timeout ->
            timeout
    end;
enter(Arena, Agent, call, Timeout) ->
    try gen_server:call(Arena, {interact, Agent}, Timeout)
    catch
        exit:{timeout, _} -> timeout;
        exit:{noproc, _} -> timeout;
        exit:{normal, _} -> timeout
    end.

%% @doc Closes the arena: every agent gets `close' from now on.
-spec close(pid()) -> ok.
close(Arena) ->
    gen_server:cast(Arena, close).

%% @doc Stops the arena.
-spec stop(pid()) -> ok.
stop(Arena) ->
    gen_server:stop(Arena, normal, 5000).

%% @doc How long an agent waits for an arena: twice the arena's own timeout plus a
%% second, so an arena that is alive always answers first.
-spec agent_timeout(terrain_emas:params()) -> pos_integer().
agent_timeout(#{arena_timeout := T}) ->
    2 * T + 1000.

%%--------------------------------------------------------------------
%% gen_server callbacks

%% @private
-spec init(setup()) -> {ok, #state{}}.
init(#{seed := Seed, island := Island, kind := Kind} = Setup) ->
    {ok, #state{setup = Setup, waiting = none, rand = terrain_emas:island_seed(Seed, {Kind, Island})}}.

%% @private
-spec handle_call({interact, terrain_emas:agent()}, gen_server:from(), #state{}) ->
          {noreply, #state{}} | {noreply, #state{}, pos_integer()}.
handle_call({interact, Agent}, From, State) ->
    interact({call, From}, Agent, State).

%% @private
-spec handle_cast({interact, pid(), terrain_emas:agent()} | close, #state{}) ->
          {noreply, #state{}} | {noreply, #state{}, pos_integer()}.
handle_cast({interact, Pid, Agent}, State) ->
    interact({cast, Pid}, Agent, State);
handle_cast(close, State) ->
    {noreply, closing(State)}.

%% @private
-spec handle_info(timeout | term(), #state{}) -> {noreply, #state{}} | {noreply, #state{}, pos_integer()}.
handle_info(timeout, #state{waiting = {From, Agent}} = State) ->
    %% nobody came: the agent meets alone
    {noreply, meeting([{From, Agent}], State#state{waiting = none})};
handle_info(_Other, #state{waiting = none} = State) ->
    {noreply, State};
handle_info(_Other, #state{setup = #{params := #{arena_timeout := T}}} = State) ->
    {noreply, State, T}.

%%--------------------------------------------------------------------
%% Internal

interact(From, _Agent, #state{open = false} = State) ->
    answer(From, close),
    {noreply, State};
interact(From, Agent, #state{waiting = none, setup = #{params := #{arena_timeout := T}}} = State) ->
    {noreply, State#state{waiting = {From, Agent}}, T};
interact(From, Agent, #state{waiting = {OtherFrom, Other}} = State) ->
    {noreply, meeting([{OtherFrom, Other}, {From, Agent}], State#state{waiting = none})}.

meeting(Entrants, #state{setup = #{kind := Kind, params := Params, spawn_child := Spawn, record := Record},
                         rand = S0, meetings = N} = State) ->
    {Agents, S1} = terrain_emas:meet(Kind, [A || {_, A} <- Entrants], Params, S0),
    {Parents, Children} = lists:split(length(Entrants), Agents),
    {S2, _} = lists:foldl(fun(Child, {S, _}) ->
                                  {Seed, S3} = rand:uniform_s(1 bsl 56, S),
                                  {S3, Spawn(Child, Seed)}
                          end, {S1, ok}, Children),
    Record(Kind, length(Entrants), Children),
    lists:foreach(fun({{From, _}, A}) -> answer(From, {agent, A}) end, lists:zip(Entrants, Parents)),
    check_clock(State#state{rand = S2, meetings = N + 1}).

check_clock(#state{meetings = N, setup = #{params := #{time_check_interval := Every}, deadline := Deadline}} = State) ->
    case N rem Every =:= 0 andalso erlang:monotonic_time(millisecond) >= Deadline of
        true -> closing(State);
        false -> State
    end.

closing(#state{waiting = none} = State) ->
    State#state{open = false};
closing(#state{waiting = {From, _}} = State) ->
    answer(From, close),
    State#state{open = false, waiting = none}.

answer({cast, Pid}, Reply) ->
    Pid ! {emas_arena, self(), Reply},
    ok;
answer({call, From}, Reply) ->
    gen_server:reply(From, Reply).
