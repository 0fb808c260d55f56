%% @private
%% @doc EMAS, the evolutionary multi-agent system (Anielski &amp; Stypka, "Boosting
%% Evolution: Scaling Erlang up to 64 cores"): parameters, the agent and its
%% operators, one step of an island, migration destinations. Pure functions: every
%% random choice takes a `rand' state and returns the next one, so a run is
%% reproducible from its seed and never touches the process-global `rand' state.
%%
%% An <em>agent</em> is `{Solution, Fitness, Energy}'. A solution is a vector of
%% `dimensions' floats, held as a binary of little-endian 64-bit floats (default)
%% or as a list; fitness is −f(x) for Rastrigin's f, so higher is better. An
%% agent's <em>behaviour</em> follows from its energy: none → death; otherwise
%% migration with probability `migration_probability'; above
%% `reproduction_threshold' → reproduction; else fight. Agents with the same
%% behaviour meet in pairs (a lone agent meets alone).
%%
%% The defaults are those of the public erlang-emas and erlang-mas configuration
%% (`etc/emas.config', `etc/mas.config'): energy 10, threshold 11, reproduction
%% transfer 5, fight transfer 10, recombination 0.3, mutation chance 0.75, rate 0.1,
%% range 0.05, migration 0.0001, 4 islands of 100 agents, mesh, 100 dimensions.
-module(terrain_emas).

%% API: parameters
-export([defaults/0,
         validate/1,
         format_error/1]).

%% API: the algorithm
-export([rastrigin/1,
         encode/2,
         decode/1,
         new_agent/2,
         evaluate/1,
         behaviour/3,
         fight/2,
         reproduce/3,
         recombine/3,
         mutate/3,
         meet/4,
         step/3,
         best/1,
         total_energy/1,
         island_seed/2,
         destinations/3,
         destination/2]).

%% exports_not_used: the steps of the algorithm, checked one by one by terrain_emas_tests and prop_emas.
-ignore_xref([{rastrigin, 1}, {encode, 2}, {decode, 1}, {evaluate, 1}, {fight, 2}, {reproduce, 3},
              {recombine, 3}, {mutate, 3}]).

-export_type([params/0, agent/0, solution/0, behaviour/0, counts/0, destinations/0, model/0]).

-type model() :: sequential | hybrid | concurrent | skel.
-type solution() :: binary() | [float()].
-type agent() :: {solution(), Fitness :: float(), Energy :: non_neg_integer()}.
-type behaviour() :: death | migration | reproduction | fight.
%% Agents per behaviour in a step: {Reproductions, Fights, Deaths, Migrations}.
-type counts() :: {non_neg_integer(), non_neg_integer(), non_neg_integer(), non_neg_integer()}.
%% Where migrants of one island go: a list of {CumulativeWeight, [Island]}.
-type destinations() :: [{float(), tuple()}].

-type params() ::
        #{model := model(),
          islands := pos_integer(),                 % islands (default 4)
          population := pos_integer(),              % agents per island at the start (100)
          dimensions := pos_integer(),              % Rastrigin's n (100)
          time_ms := pos_integer(),                 % run time, unless steps is given (5000)
          steps => pos_integer(),                   % sequential, skel: run exactly this many steps
          seed := integer(),                        % root seed of every rand state (1)
          initial_energy := pos_integer(),          % 10
          reproduction_threshold := non_neg_integer(), % reproduce above this energy (11)
          reproduction_transfer := pos_integer(),   % max energy a parent gives its child (5)
          fight_transfer := pos_integer(),          % max energy the loser gives (10)
          recombination_probability := float(),     % 0.3
          mutation_probability := float(),          % per child (0.75)
          mutation_rate := float(),                 % share of genes mutated (0.1)
          mutation_range := float(),                % Cauchy scale (0.05)
          migration_probability := float(),         % 0.0001
          topology := ring | mesh | nearest_first,  % mesh
          solution := binary | list,                % binary
          arena_call := cast | call,                % concurrent: how agents enter arenas (cast)
          arena_timeout := pos_integer(),           % concurrent: ms a lone agent waits (1000)
          time_check_interval := pos_integer(),     % check the clock every N steps/meetings (1)
          skel_workers := pos_integer() | islands,  % skel: worker processes (islands)
          nodes := [node()],                        % hybrid, skel: island nodes, round robin ([node()])
          progress => pid()}.                       % gets {emas_progress, Rows} every second: that second's rows

-define(TWO_PI, 6.283185307179586).
-define(A, 10.0).

%%--------------------------------------------------------------------
%% Parameters

%% @doc The defaults of erlang-emas (and of this implementation's own options).
-spec defaults() -> params().
defaults() ->
    #{model => hybrid,
      islands => 4,
      population => 100,
      dimensions => 100,
      time_ms => 5000,
      seed => 1,
      initial_energy => 10,
      reproduction_threshold => 11,
      reproduction_transfer => 5,
      fight_transfer => 10,
      recombination_probability => 0.3,
      mutation_probability => 0.75,
      mutation_rate => 0.1,
      mutation_range => 0.05,
      migration_probability => 0.0001,
      topology => mesh,
      solution => binary,
      arena_call => cast,
      arena_timeout => 1000,
      time_check_interval => 1,
      skel_workers => islands,
      nodes => [node()]}.

%% @doc Merges options over the defaults and checks every value. Unknown keys and
%% bad values are `{error, {emas, ...}}'.
-spec validate(map()) -> {ok, params()} | {error, {emas, term()}}.
validate(Options) when is_map(Options) ->
    Params = maps:merge(defaults(), Options),
    Known = [steps, progress | maps:keys(defaults())],
    case [K || K <- maps:keys(Options), not lists:member(K, Known)] of
        [Unknown | _] ->
            {error, {emas, {unknown_option, Unknown}}};
        [] ->
            case [{K, maps:get(K, Params)} || K <- lists:sort(maps:keys(Params)),
                                              not valid(K, maps:get(K, Params))] of
                [{K, V} | _] -> {error, {emas, {bad_option, K, V}}};
                [] -> combination(Params)
            end
    end;
validate(Options) ->
    {error, {emas, {bad_options, Options}}}.

valid(model, M) -> lists:member(M, [sequential, hybrid, concurrent, skel]);
valid(topology, T) -> lists:member(T, [ring, mesh, nearest_first]);
valid(solution, S) -> S =:= binary orelse S =:= list;
valid(arena_call, C) -> C =:= cast orelse C =:= call;
valid(seed, S) -> is_integer(S);
valid(reproduction_threshold, V) -> is_integer(V) andalso V >= 0;
valid(skel_workers, islands) -> true;
valid(progress, P) -> is_pid(P);
valid(nodes, Nodes) -> is_list(Nodes) andalso Nodes =/= [] andalso lists:all(fun is_atom/1, Nodes);
valid(K, V) when K =:= recombination_probability; K =:= mutation_probability; K =:= mutation_rate;
                 K =:= migration_probability ->
    is_number(V) andalso V >= 0 andalso V =< 1;
valid(mutation_range, V) -> is_number(V) andalso V >= 0;
valid(_PositiveInteger, V) -> is_integer(V) andalso V > 0.

combination(#{model := Model} = Params) ->
    Local = maps:get(nodes, Params) =:= [node()],
    if
        Model =:= concurrent, not Local ->
            {error, {emas, {model_is_local, Model}}};
        Model =:= sequential, not Local ->
            {error, {emas, {model_is_local, Model}}};
        is_map_key(steps, Params), Model =/= sequential, Model =/= skel ->
            {error, {emas, {steps_need_a_deterministic_model, Model}}};
        true ->
            {ok, floats(Params)}
    end.

floats(Params) ->
    maps:map(fun(K, V) when K =:= recombination_probability; K =:= mutation_probability; K =:= mutation_rate;
                            K =:= migration_probability; K =:= mutation_range -> float(V);
                (_, V) -> V
             end, Params).

%% @doc A sentence for an error of {@link validate/1}.
-spec format_error({emas, term()}) -> iolist().
format_error({emas, {unknown_option, K}}) ->
    io_lib:format("unknown EMAS option ~0tp", [K]);
format_error({emas, {bad_option, K, V}}) ->
    io_lib:format("bad EMAS option ~0tp: ~0tp (~ts)", [K, V, expected(K)]);
format_error({emas, {bad_options, V}}) ->
    io_lib:format("EMAS options must be a map, got ~0tp", [V]);
format_error({emas, {model_is_local, M}}) ->
    io_lib:format("the ~ts model runs on one node: its islands share counters (use hybrid or skel for "
                  "islands on other nodes)", [M]);
format_error({emas, {steps_need_a_deterministic_model, M}}) ->
    io_lib:format("a fixed number of steps needs the sequential or skel model, not ~ts", [M]);
format_error({emas, {island_failed, I, Node, Why}}) ->
    io_lib:format("island ~b on ~ts failed: ~ts", [I, Node, down_reason(Why)]);
format_error({emas, {island_timeout, I, Node}}) ->
    io_lib:format("island ~b on ~ts did not answer in time", [I, Node]);
format_error({emas, {island_did_not_exit, Pid}}) ->
    io_lib:format("an island (~0p) did not stop when told to", [Pid]);
format_error({emas, {worker_failed, Where, Why}}) ->
    io_lib:format("the skel worker ~0tp failed: ~ts", [Where, down_reason(Why)]);
format_error({emas, {worker_timeout, Where}}) ->
    io_lib:format("the skel worker ~0tp did not answer in time", [Where]);
format_error({emas, Other}) ->
    io_lib:format("EMAS: ~0tp", [Other]).

%% Why a monitored process on another node went away, in words.
down_reason(noconnection) -> "its node went down or was cut off";
down_reason(noproc) -> "it was not running";
down_reason(killed) -> "it was killed";
down_reason(Other) -> io_lib:format("~0tP", [Other, 12]).

expected(model) -> "sequential, hybrid, concurrent or skel";
expected(topology) -> "ring, mesh or nearest_first";
expected(solution) -> "binary or list";
expected(arena_call) -> "cast or call";
expected(seed) -> "an integer";
expected(reproduction_threshold) -> "an integer >= 0";
expected(nodes) -> "a non-empty list of node names";
expected(skel_workers) -> "a positive integer or islands";
expected(mutation_range) -> "a number >= 0";
expected(K) when K =:= recombination_probability; K =:= mutation_probability; K =:= mutation_rate;
                 K =:= migration_probability -> "a probability in [0, 1]";
expected(_) -> "a positive integer".

%%--------------------------------------------------------------------
%% Solutions and fitness

%% @doc Rastrigin's function f(x) = A·n + Σ (x_i² − A·cos(2π x_i)), A = 10, of a
%% list or binary solution.
-spec rastrigin(solution()) -> float().
rastrigin(Bin) when is_binary(Bin) ->
    rastrigin_bin(Bin, 0.0);
rastrigin(List) when is_list(List) ->
    rastrigin_list(List, 0.0).

rastrigin_bin(<<X:64/float-little, Rest/binary>>, Sum) ->
    rastrigin_bin(Rest, Sum + ?A + X * X - ?A * math:cos(?TWO_PI * X));
rastrigin_bin(<<>>, Sum) ->
    Sum.

rastrigin_list([X | Rest], Sum) ->
    rastrigin_list(Rest, Sum + ?A + X * X - ?A * math:cos(?TWO_PI * X));
rastrigin_list([], Sum) ->
    Sum.

%% @doc Fitness: −f, higher is better.
-spec evaluate(solution()) -> float().
evaluate(Solution) ->
    -rastrigin(Solution).

%% @doc A list of genes in the representation asked for.
-spec encode([float()], binary | list) -> solution().
encode(Genes, binary) -> << <<X:64/float-little>> || X <- Genes >>;
encode(Genes, list) -> Genes.

%% @doc The genes of a solution, as a list.
-spec decode(solution()) -> [float()].
decode(Bin) when is_binary(Bin) -> [X || <<X:64/float-little>> <= Bin];
decode(List) when is_list(List) -> List.

%% @doc A new agent: genes uniform in [−50, 50], the initial energy.
-spec new_agent(params(), rand:state()) -> {agent(), rand:state()}.
new_agent(#{dimensions := N, solution := Kind, initial_energy := E}, S0) ->
    {Genes, S1} = uniforms(N, S0, []),
    Solution = encode([-50.0 + 100.0 * U || U <- Genes], Kind),
    {{Solution, evaluate(Solution), E}, S1}.

uniforms(0, S, Acc) -> {Acc, S};
uniforms(N, S0, Acc) ->
    {U, S1} = rand:uniform_s(S0),
    uniforms(N - 1, S1, [U | Acc]).

%%--------------------------------------------------------------------
%% Behaviours and meetings

%% @doc What the agent does next.
-spec behaviour(agent(), params(), rand:state()) -> {behaviour(), rand:state()}.
behaviour({_, _, 0}, _Params, S) ->
    {death, S};
behaviour({_, _, Energy}, #{migration_probability := MP, reproduction_threshold := RT}, S0) ->
    {U, S1} = rand:uniform_s(S0),
    if
        U < MP -> {migration, S1};
        Energy > RT -> {reproduction, S1};
        true -> {fight, S1}
    end.

%% @doc A fight: the less fit agent gives the other up to `fight_transfer' energy
%% (all it has if less); on equal fitness the first gives.
-spec fight([agent()], params()) -> [agent()].
fight([{SA, FA, EA}, {SB, FB, EB}], #{fight_transfer := T}) ->
    case FA < FB of
        true -> Tr = min(T, EA), [{SA, FA, EA - Tr}, {SB, FB, EB + Tr}];
        false -> Tr = min(T, EB), [{SA, FA, EA + Tr}, {SB, FB, EB - Tr}]
    end;
fight([A], _Params) ->
    [A].

%% @doc Reproduction: a pair has two children (recombination, then mutation); a lone
%% agent has one (mutation). Each parent gives its child up to
%% `reproduction_transfer' energy. Returns parents first, then children.
-spec reproduce([agent()], params(), rand:state()) -> {[agent()], rand:state()}.
reproduce([{SA, FA, EA}, {SB, FB, EB}], #{reproduction_transfer := T, recombination_probability := RP,
                                          mutation_probability := MP, solution := Kind} = P, S0) ->
    {U, S1} = rand:uniform_s(S0),
    {GA, GB} = {decode(SA), decode(SB)},
    {{CA, CB}, S2} = case U < RP of
                         true -> recombine(GA, GB, S1);
                         false -> {{GA, GB}, S1}
                     end,
    {MA, S3} = maybe_mutate(CA, MP, P, S2),
    {MB, S4} = maybe_mutate(CB, MP, P, S3),
    {XA, XB} = {encode(MA, Kind), encode(MB, Kind)},
    {TA, TB} = {min(T, EA), min(T, EB)},
    {[{SA, FA, EA - TA}, {SB, FB, EB - TB}, {XA, evaluate(XA), TA}, {XB, evaluate(XB), TB}], S4};
reproduce([{SA, FA, EA}], #{reproduction_transfer := T, mutation_probability := MP, solution := Kind} = P, S0) ->
    {M, S1} = maybe_mutate(decode(SA), MP, P, S0),
    X = encode(M, Kind),
    TA = min(T, EA),
    {[{SA, FA, EA - TA}, {X, evaluate(X), TA}], S1}.

maybe_mutate(Genes, MP, P, S0) ->
    {U, S1} = rand:uniform_s(S0),
    case U < MP of
        true -> mutate(Genes, P, S1);
        false -> {Genes, S1}
    end.

%% @doc Recombination: each gene of each child uniform between the parents' genes.
-spec recombine([float()], [float()], rand:state()) -> {{[float()], [float()]}, rand:state()}.
recombine(GA, GB, S0) ->
    recombine(GA, GB, S0, [], []).

recombine([A | RA], [B | RB], S0, AccA, AccB) ->
    Lo = min(A, B),
    Width = abs(A - B),
    {U1, S1} = rand:uniform_s(S0),
    {U2, S2} = rand:uniform_s(S1),
    recombine(RA, RB, S2, [Lo + U1 * Width | AccA], [Lo + U2 * Width | AccB]);
recombine([], [], S, AccA, AccB) ->
    {{lists:reverse(AccA), lists:reverse(AccB)}, S}.

%% @doc Mutation: `mutation_rate' of the genes (chosen at random, repeats merged)
%% take a Cauchy step x + r·tan(π(u − 0.5)) with r = `mutation_range', ×5 or ×0.2
%% with probability 0.2 each.
-spec mutate([float()], params(), rand:state()) -> {[float()], rand:state()}.
mutate(Genes, #{mutation_rate := Rate, mutation_range := Range}, S0) ->
    Len = length(Genes),
    {Count, S1} = how_many(Rate * Len, S0),
    {Indices, S2} = indices(Count, Len, S1, []),
    mutate_genes(Genes, lists:usort(Indices), 1, Range, S2, []).

%% erlang-emas's average_number: below one, one gene with that probability.
how_many(N, S) when N == 0 -> {0, S};
how_many(N, S0) when N < 1 ->
    {U, S1} = rand:uniform_s(S0),
    {case U < N of true -> 1; false -> 0 end, S1};
how_many(N, S) -> {trunc(N), S}.

indices(0, _Len, S, Acc) -> {Acc, S};
indices(K, Len, S0, Acc) ->
    {I, S1} = rand:uniform_s(Len, S0),
    indices(K - 1, Len, S1, [I | Acc]).

mutate_genes(Rest, [], _I, _Range, S, Acc) ->
    {lists:reverse(Acc, Rest), S};
mutate_genes([G | Rest], [I | Is], I, Range, S0, Acc) ->
    {U1, S1} = rand:uniform_s(S0),
    {U2, S2} = rand:uniform_s(S1),
    Scale = if U1 < 0.2 -> 5.0; U1 < 0.4 -> 0.2; true -> 1.0 end,
    mutate_genes(Rest, Is, I + 1, Range, S2, [G + Range * Scale * math:tan(math:pi() * (U2 - 0.5)) | Acc]);
mutate_genes([G | Rest], Is, I, Range, S, Acc) ->
    mutate_genes(Rest, Is, I + 1, Range, S, [G | Acc]).

%% @doc One meeting of agents that chose the same behaviour (a pair or a lone agent).
-spec meet(fight | reproduction, [agent()], params(), rand:state()) -> {[agent()], rand:state()}.
meet(fight, Agents, Params, S) -> {fight(Agents, Params), S};
meet(reproduction, Agents, Params, S) -> reproduce(Agents, Params, S).

%%--------------------------------------------------------------------
%% One step of an island

%% @doc One step of an island (erlang-mas's sequential and hybrid loop): tag every
%% agent with its behaviour, let each group meet in pairs, drop the dead, shuffle.
%% Returns the new population, the emigrants and the agents per behaviour.
-spec step([agent()], params(), rand:state()) ->
          {[agent()], [agent()], counts(), rand:state()}.
step(Agents, Params, S0) ->
    {Groups, S1} = tag(Agents, Params, S0, [], [], 0, []),
    {Reproducing, Fighting, Deaths, Migrants} = Groups,
    {Children, S2} = pairs(reproduction, Reproducing, Params, S1, []),
    {Fought, S3} = pairs(fight, Fighting, Params, S2, Children),
    {Shuffled, S4} = shuffle(Fought, S3),
    {Shuffled, Migrants, {length(Reproducing), length(Fighting), Deaths, length(Migrants)}, S4}.

tag([], _Params, S, R, F, D, M) ->
    {{lists:reverse(R), lists:reverse(F), D, lists:reverse(M)}, S};
tag([A | Rest], Params, S0, R, F, D, M) ->
    case behaviour(A, Params, S0) of
        {death, S1} -> tag(Rest, Params, S1, R, F, D + 1, M);
        {migration, S1} -> tag(Rest, Params, S1, R, F, D, [A | M]);
        {reproduction, S1} -> tag(Rest, Params, S1, [A | R], F, D, M);
        {fight, S1} -> tag(Rest, Params, S1, R, [A | F], D, M)
    end.

pairs(Kind, [A, B | Rest], Params, S0, Acc) ->
    {New, S1} = meet(Kind, [A, B], Params, S0),
    pairs(Kind, Rest, Params, S1, New ++ Acc);
pairs(Kind, [A], Params, S0, Acc) ->
    {New, S1} = meet(Kind, [A], Params, S0),
    {New ++ Acc, S1};
pairs(_Kind, [], _Params, S, Acc) ->
    {Acc, S}.

%% @doc A random permutation.
-spec shuffle([T], rand:state()) -> {[T], rand:state()}.
shuffle(List, S0) ->
    {Keyed, S1} = lists:foldl(fun(X, {Acc, S}) ->
                                      {U, S2} = rand:uniform_s(S),
                                      {[{U, X} | Acc], S2}
                              end, {[], S0}, List),
    {[X || {_, X} <- lists:keysort(1, Keyed)], S1}.

%% @doc The best fitness of a population (`undefined' when empty).
-spec best([agent()]) -> float() | undefined.
best([]) -> undefined;
best(Agents) -> lists:max([F || {_, F, _} <- Agents]).

%% @doc The sum of the agents' energies (conserved by every operator).
-spec total_energy([agent()]) -> non_neg_integer().
total_energy(Agents) ->
    lists:sum([E || {_, _, E} <- Agents]).

%% @doc The rand state of one island (or process), derived from the root seed.
-spec island_seed(integer(), term()) -> rand:state().
island_seed(Seed, Island) ->
    rand:seed_s(exsss, {Seed, erlang:phash2(Island), 16#5EED}).

%%--------------------------------------------------------------------
%% Migration topologies

%% @doc Where migrants of island `From' (1-based) may go, given each island's node:
%% `mesh' — any other island, equally likely; `ring' — a neighbour on either side,
%% equally likely; `nearest_first' — the other islands grouped by the terrain level
%% between their nodes and `From''s, in the order of terrain:levels/0 (nearest
%% first); the k-th distinct level present (k = 0, 1, ...) has weight
%% 2^−k, and an island is uniform within its level. `Level' is the function that
%% names the level between two nodes (terrain:level/2).
-spec destinations(ring | mesh | nearest_first, pos_integer(),
                   {tuple(), fun((node(), node()) -> terrain:level())}) -> destinations().
destinations(_Topology, _From, {Nodes, _Level}) when tuple_size(Nodes) =:= 1 ->
    [{1.0, {1}}];
destinations(mesh, From, {Nodes, _Level}) ->
    [{1.0, list_to_tuple([I || I <- lists:seq(1, tuple_size(Nodes)), I =/= From])}];
destinations(ring, From, {Nodes, _Level}) ->
    N = tuple_size(Nodes),
    Left = (From - 2 + N) rem N + 1,
    Right = From rem N + 1,
    [{1.0, list_to_tuple(lists:usort([Left, Right]))}];
destinations(nearest_first, From, {Nodes, Level}) ->
    Own = element(From, Nodes),
    LevelRank = maps:from_list(lists:zip(terrain:levels(), lists:seq(0, length(terrain:levels()) - 1))),
    Others = [{maps:get(Level(Own, element(I, Nodes)), LevelRank), I} || I <- lists:seq(1, tuple_size(Nodes)), I =/= From],
    Ranks = lists:usort([R || {R, _} <- Others]),
    Weights = [math:pow(2, -K) || K <- lists:seq(0, length(Ranks) - 1)],
    Total = lists:sum(Weights),
    {Cumulative, _} = lists:mapfoldl(fun({Rank, W}, Acc) ->
                                             C = Acc + W / Total,
                                             {{C, list_to_tuple([I || {R, I} <- Others, R =:= Rank])}, C}
                                     end, 0.0, lists:zip(Ranks, Weights)),
    Cumulative.

%% @doc A destination island drawn from {@link destinations/3}.
-spec destination(destinations(), rand:state()) -> {pos_integer(), rand:state()}.
destination(Destinations, S0) ->
    {U, S1} = rand:uniform_s(S0),
    Islands = pick_level(Destinations, U),
    {I, S2} = rand:uniform_s(tuple_size(Islands), S1),
    {element(I, Islands), S2}.

pick_level([{_, Islands}], _U) -> Islands;
pick_level([{C, Islands} | _], U) when U < C -> Islands;
pick_level([_ | Rest], U) -> pick_level(Rest, U).
