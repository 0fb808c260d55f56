%% @private
%% @doc One wind-tunnel worker: a band of lattice rows. Every step it sends its top
%% row to the worker above and its bottom row to the worker below, reads theirs
%% (timing each read: Fig. 4 of Bjørndalen et al.), and computes its band (Fig. 3's light
%% bars; the sends and reads are the dark ones). Neighbours can be at most one step
%% apart: a worker cannot compute step S before both neighbours have sent step S.
%%
%% With an `instrument' fun it reports, per step: `[windtunnel, send]' and
%% `[windtunnel, receive]' for each border message (metadata `message', an id unique
%% in the run, for pairing), `[windtunnel, read]' (measurement `duration_us',
%% metadata `from' = above | below), `[windtunnel, communicate]' (the sends and both
%% reads) and `[windtunnel, compute]', each with metadata `worker' and `step'.
-module(terrain_windtunnel_worker).

%% Internal exports (spawned by terrain_windtunnel)
-export([init/1]).

-ifdef(TEST).
-export([initial/3, step_band/4]).
-endif.

%% @doc The worker's process: waits for its neighbours, runs every step, reports to
%% the coordinator.
-spec init(#{atom() => term()}) -> ok.
init(#{worker := I, first_row := First, rows := Rows, columns := Cols, steps := Steps,
       coordinator := Coordinator} = Args) ->
    Band = initial(First, Rows, Cols),
    {Above, Below} = receive {go, A, B} -> {A, B} end,
    T0 = erlang:monotonic_time(microsecond),
    Final = steps(1, Steps, Band, Args#{above => Above, below => Below, zero => lists:duplicate(Cols, 0)}),
    Elapsed = erlang:monotonic_time(microsecond) - T0,
    Coordinator ! {windtunnel_done, I, #{checksum => lists:sum([lists:sum(R) || R <- Final]), elapsed_us => Elapsed}},
    ok.

%% @doc The initial band: rows First.. of the lattice, a fixed pattern of each cell's
%% global position.
-spec initial(non_neg_integer(), non_neg_integer(), pos_integer()) -> [[0..255]].
initial(First, Rows, Cols) ->
    [[(R * 7 + C * 13 + (R * C) rem 11) band 255 || C <- lists:seq(0, Cols - 1)]
     || R <- lists:seq(First, First + Rows - 1)].

steps(Step, Steps, Band, _Args) when Step > Steps ->
    Band;
steps(Step, Steps, Band, #{worker := I, workers := W, above := Above, below := Below, zero := Zero,
                           work_per_cell := Work, instrument := Instrument} = Args) ->
    C0 = now_us(),
    send(Above, Step, from_below, hd(Band), I, W, Instrument),
    send(Below, Step, from_above, lists:last(Band), I, W, Instrument),
    Up = read(Above, Step, from_above, Zero, I, Instrument),
    Down = read(Below, Step, from_below, Zero, I, Instrument),
    C1 = now_us(),
    New = step_band(Up, Band, Down, Work),
    C2 = now_us(),
    _ = Instrument =/= none andalso
        begin
            Instrument([windtunnel, communicate], #{duration_us => C1 - C0}, #{worker => I, step => Step}),
            Instrument([windtunnel, compute], #{duration_us => C2 - C1}, #{worker => I, step => Step})
        end,
    steps(Step + 1, Steps, New, Args).

now_us() ->
    erlang:monotonic_time(microsecond).

%% The message id: unique per (sender, step, direction) in the run.
send(none, _Step, _Side, _Row, _I, _W, _Instrument) ->
    ok;
send(To, Step, Side, Row, I, W, Instrument) ->
    Id = (Step * W + I) * 2 + case Side of from_below -> 0; from_above -> 1 end,
    _ = Instrument =/= none andalso
        Instrument([windtunnel, send], #{}, #{worker => I, step => Step, message => Id,
                                              to => case Side of from_below -> above; from_above -> below end}),
    To ! {border, Step, Side, Row, Id},
    ok.

read(none, _Step, _Side, Zero, _I, _Instrument) ->
    Zero;
read(_From, Step, Side, _Zero, I, Instrument) ->
    T0 = now_us(),
    receive
        {border, Step, Side, Row, Id} ->
            _ = Instrument =/= none andalso
                begin
                    Instrument([windtunnel, 'receive'], #{}, #{worker => I, step => Step, message => Id}),
                    Instrument([windtunnel, read], #{duration_us => now_us() - T0},
                               #{worker => I, step => Step,
                                 from => case Side of from_above -> above; from_below -> below end})
                end,
            Row
    end.

%% @doc One step of the band between the row above it and the row below it: each
%% cell applies the rule `work_per_cell' times to itself and the sum of its four
%% neighbours (zero beyond the left and right edges).
-spec step_band([0..255], [[0..255]], [0..255], pos_integer()) -> [[0..255]].
step_band(Up, Band, Down, Work) ->
    rows([Up | Band] ++ [Down], Work).

rows([Up, Mid, Down | Rest], Work) ->
    [row(Up, Mid, Down, Work) | rows([Mid, Down | Rest], Work)];
rows(_, _Work) ->
    [].

row(Up, Mid, Down, Work) ->
    cells(Up, [0 | Mid], Down, Work).

%% Walks the row with the left neighbour, the cell and the right neighbour.
cells([U | Us], [L, M | Rest], [D | Ds], Work) ->
    R = case Rest of [X | _] -> X; [] -> 0 end,
    [rule(M, U + D + L + R, Work) | cells(Us, [M | Rest], Ds, Work)];
cells([], _, [], _Work) ->
    [].

rule(X, _Sum, 0) -> X;
rule(X, Sum, K) -> rule((X * 31 + Sum + K) band 255, Sum, K - 1).
