%% @private
%% @doc `terrain topology simulate --matrix': the tree probe (terrain_lab_tree_probe, the
%% code `terrain probe --strategy tree' runs) replayed against a measured latency matrix
%% (`terrain.latency/1'), every round trip it asks for answered from the matrix
%% (docs/TOPOLOGY_DISCOVERY.md, "Replaying a measured matrix").
%%
%% A pair is answered from its cell of the `min' matrix (the statistic the probe itself
%% uses); a `null' cell takes the other direction's value; a pair `null' both ways fails as
%% a measurement that failed would (the insertion tries another member). The nodes are
%% inserted in a random order from `seed'. The report has the keys of
%% `terrain topology simulate' (terrain_lab_simulate); with a truth tree the found tree is
%% scored against it as `terrain topology compare' does, without one `clade_recall',
%% `clade_precision' are `null' and `levels' is empty.
-module(terrain_lab_replay).

%% API
-export([read/1,
         run/1,
         format_error/1]).

-export_type([options/0, matrix/0]).

-opaque matrix() :: #{nodes := [node(), ...],
                      index := #{node() => pos_integer()},
                      rows := tuple(),
                      file := file:filename()}.

-type options() :: #{matrix := matrix(),
                     truth => terrain:topology_tree() | none,
                     seed => integer(),                       % default 1
                     insert => terrain:insert_options(),
                     progress => fun((map()) -> any()) | none}.

%%--------------------------------------------------------------------
%% API

%% @doc Reads a `terrain.latency/1' file with a `min' matrix of at least two nodes.
-spec read(file:filename()) -> {ok, matrix()} | {error, term()}.
read(File) ->
    case terrain:read_latency(File) of
        {ok, #{nodes := Nodes, stats := #{min := Rows}}} when length(Nodes) >= 2 ->
            checked(File, Nodes, Rows);
        {ok, #{nodes := [_]}} ->
            {error, {replay, {one_node, File}}};
        {ok, #{}} ->
            {error, {replay, {no_min, File}}};
        {error, _} = Error ->
            Error
    end.

%% @doc Runs the tree probe against the matrix and scores its tree against the truth.
-spec run(options()) -> {ok, map()} | {error, term()}.
run(#{matrix := #{nodes := Nodes, file := File} = Matrix} = Opts) ->
    Seed = maps:get(seed, Opts, 1),
    T0 = erlang:monotonic_time(microsecond),
    {Cpu0, _} = erlang:statistics(runtime),
    Result = terrain_lab_tree_probe:build(shuffle(Nodes, Seed), measure(Matrix),
                                          #{insert => maps:get(insert, Opts, #{}),
                                            progress => maps:get(progress, Opts, none)}),
    #{tree := Found, pairs := Pairs, unplaced := Unplaced, reinserted := Reinserted, waves := Waves} = Result,
    Seconds = (erlang:monotonic_time(microsecond) - T0) / 1.0e6,
    {Cpu1, _} = erlang:statistics(runtime),
    N = length(Nodes),
    case score(Found, Unplaced, maps:get(truth, Opts, none)) of
        {error, _} = Error -> Error;
        Score -> {ok, Score#{nodes => N, pairs_measured => map_size(Pairs), pairs_total => N * (N - 1),
                fraction_measured => map_size(Pairs) / (N * (N - 1)),
                unplaced => length(Unplaced), reinserted => Reinserted, waves => Waves,
                seconds => Seconds, cpu_seconds => (Cpu1 - Cpu0) / 1000, peak_memory_mb => null,
                model => iolist_to_binary(["matrix ", File]), seed => Seed, tree => Found}}
    end.

%% @doc A sentence for an error of this module.
-spec format_error({replay, term()}) -> iolist().
format_error({replay, {one_node, File}}) ->
    io_lib:format("~ts has one node: the probe needs at least two", [File]);
format_error({replay, {no_min, File}}) ->
    io_lib:format("~ts has no 'min' matrix in its 'stats' (the statistic the tree probe measures)", [File]);
format_error({replay, {bad_value, File, A, B, V}}) ->
    io_lib:format("~ts: round trip ~ts -> ~ts is ~0tP: expected a number >= 0 (us) or null", [File, A, B, V, 6]);
format_error({replay, {not_square, File, N}}) ->
    io_lib:format("~ts: the 'min' matrix is not ~b x ~b, one row and column per node", [File, N, N]).

%%--------------------------------------------------------------------
%% Internal

%% Every row as long as the node list, every value a number >= 0 or null.
checked(File, Nodes, Rows) ->
    N = length(Nodes),
    case length(Rows) =:= N andalso lists:all(fun(R) -> is_list(R) andalso length(R) =:= N end, Rows) of
        false ->
            {error, {replay, {not_square, File, N}}};
        true ->
            Bad = [{A, B, V} || {A, R} <- lists:zip(Nodes, Rows), {B, V} <- lists:zip(Nodes, R),
                                not (V =:= null orelse (is_number(V) andalso V >= 0))],
            case Bad of
                [] ->
                    Index = maps:from_list(lists:zip(Nodes, lists:seq(1, N))),
                    {ok, #{nodes => Nodes, index => Index, file => File,
                           rows => list_to_tuple([list_to_tuple(R) || R <- Rows])}};
                [{A, B, V} | _] ->
                    {error, {replay, {bad_value, File, A, B, V}}}
            end
    end.

%% The measuring callback: the cell (A, B), else (B, A); a pair with neither fails.
measure(#{index := Index, rows := Rows}) ->
    fun(A, B) ->
            I = maps:get(A, Index),
            J = maps:get(B, Index),
            case {element(J, element(I, Rows)), element(I, element(J, Rows))} of
                {null, null} -> {error, not_measured};
                {null, D} -> {ok, D};
                {D, _} -> {ok, D}
            end
    end.

score(_Found, _Unplaced, none) ->
    #{clade_recall => null, clade_precision => null, levels => []};
score(Found, [], Truth) ->
    case terrain:compare_topologies(Found, Truth) of
        {ok, #{clade_recall := R, clade_precision := P, levels := Levels}} ->
            #{clade_recall => R, clade_precision => P, levels => Levels};
        {error, _} = Error ->
            Error
    end;
score(_Found, _Unplaced, _Truth) ->
    #{clade_recall => 0.0, clade_precision => 0.0, levels => []}.

shuffle(List, Seed) ->
    {Keyed, _} = lists:mapfoldl(fun(X, S) -> {U, S1} = rand:uniform_s(S), {{U, X}, S1} end,
                                rand:seed_s(exsss, Seed), List),
    [X || {_, X} <- lists:sort(Keyed)].
