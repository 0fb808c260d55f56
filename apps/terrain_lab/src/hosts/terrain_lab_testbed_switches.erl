%% @private
%% @doc The switches of a testbed (`terrain testbed up --topology', docs/TESTBED.md,
%% "Emulated switches"), bounded before anything is built: a SPEC `N', `A,B,...' or
%% `AxB[x...]' is counted from its numbers (at most 250 hosts, one /24, and 8 levels)
%% before a host name is made; a topology.conf file must be a regular file of at most
%% 1 MiB, in UTF-8, and is read by the one topology.conf reader
%% (`terrain_lab_slurm:parse_topology/1', which refuses loops, unknown switches and
%% duplicates); its hosts are counted before they are compared with the testbed's.
%% Also the link speed per level and each host pair's lowest common switch level.
-module(terrain_lab_testbed_switches).

-include_lib("kernel/include/file.hrl").

%% API
-export([switches/2,
         rates/2,
         levels/1,
         max_hosts/0]).

-define(MAX_HOSTS, 250).                 % one /24: .2 to .251
-define(MAX_LEVELS, 8).
-define(MAX_SWITCHES, 500).
-define(MAX_FILE_BYTES, 1024 * 1024).
-define(DEFAULT_RATES, [1000, 100, 10]).

%%--------------------------------------------------------------------
%% API

%% @doc The most hosts a testbed has.
-spec max_hosts() -> pos_integer().
max_hosts() ->
    ?MAX_HOSTS.

%% @doc The switches of the testbed: from a topology.conf file (a `Spec' that names an
%% existing path, or holds `/' or `.'; its hosts must then be `Prefix'1..N), or from a
%% SPEC: `N' (one switch of N hosts), `A,B,...' (switches of A, B, ... hosts under a
%% switch `root'), `AxBx...xK' (A switches under `root', each with B switches, ..., the
%% lowest with K hosts). Hosts are numbered in order.
-spec switches(string(), string()) -> {ok, [terrain_lab_slurm:switch()]} | {error, term()}.
switches(Spec, Prefix) ->
    case is_file(Spec) of
        true -> file_switches(Spec);
        false -> spec_switches(Spec, Prefix)
    end.

%% @doc The link speed of each switch level, Mbit/s: `Given' (level 0 first), each
%% level beyond it a tenth of the one below (at least 1).
-spec rates([pos_integer()], non_neg_integer()) -> [pos_integer()].
rates([], MaxLevel) ->
    rates(?DEFAULT_RATES, MaxLevel);
rates(Given, MaxLevel) ->
    lists:sublist(Given ++ extend(lists:last(Given), MaxLevel + 1 - length(Given)), MaxLevel + 1).

%% @doc For each host, the level of the lowest switch above it and each other host
%% (above the top level when they share none: a forest).
-spec levels([terrain_lab_slurm:switch()]) -> #{string() => #{string() => non_neg_integer()}}.
levels(Switches) ->
    Top = lists:max([L || #{level := L} <- Switches]),
    Above = lists:foldl(fun(#{level := L, name := N} = S, Acc) ->
                                Add = fun(H, A) -> maps:update_with(H, fun(Ss) -> [{L, N} | Ss] end, [{L, N}], A) end,
                                lists:foldl(Add, Acc, lists:usort(hosts_below(S, Switches, [])))
                        end, #{}, Switches),
    Hosts = maps:keys(Above),
    maps:from_list([{A, maps:from_list([{B, common_level(maps:get(A, Above), maps:get(B, Above), Top)}
                                        || B <- Hosts, B =/= A])} || A <- Hosts]).

%%--------------------------------------------------------------------
%% Internal functions: a topology.conf file

is_file(Spec) ->
    filelib:is_file(Spec) orelse lists:member($/, Spec) orelse lists:member($., Spec).

file_switches(File) ->
    Steps = [fun(_) -> read_bounded(File) end,
             fun(Bin) ->
                     case unicode:characters_to_list(Bin) of
                         Text when is_list(Text) -> {ok, Text};
                         {_, Good, _} -> {error, {testbed, {topology, File, {not_utf8, line_of(Good)}}}}
                     end
             end,
             fun(Text) ->
                     case terrain_lab_slurm:parse_topology(Text) of
                         {ok, []} -> {error, {testbed, {topology, File, no_switch}}};
                         {ok, Switches} -> bounded(File, Switches);
                         {error, Why} -> {error, {testbed, {topology, File, Why}}}
                     end
             end],
    terrain_lab_steps:run(Steps, none).

read_bounded(File) ->
    case file:read_file_info(File) of
        {ok, #file_info{type = regular, size = Size}} when Size > ?MAX_FILE_BYTES ->
            {error, {testbed, {topology, File, {too_large, ?MAX_FILE_BYTES}}}};
        {ok, #file_info{type = regular}} ->
            case file:read_file(File) of
                {ok, Bin} -> {ok, Bin};
                {error, Why} -> {error, {testbed, {topology, File, Why}}}
            end;
        {ok, #file_info{type = Type}} ->
            {error, {testbed, {topology, File, {not_a_file, Type}}}};
        {error, Why} ->
            {error, {testbed, {topology, File, Why}}}
    end.

line_of(Chars) ->
    1 + length([C || C <- unicode:characters_to_list(Chars), C =:= $\n]).

bounded(File, Switches) ->
    Hosts = lists:usort([H || #{nodes := Ns} <- Switches, H <- Ns]),
    Levels = 1 + lists:max([L || #{level := L} <- Switches]),
    if
        length(Hosts) > ?MAX_HOSTS -> usage("--topology ~ts: ~b hosts; a testbed has at most ~b (one /24)",
                                            [File, length(Hosts), ?MAX_HOSTS]);
        length(Switches) > ?MAX_SWITCHES -> usage("--topology ~ts: ~b switches; a testbed has at most ~b",
                                                  [File, length(Switches), ?MAX_SWITCHES]);
        Levels > ?MAX_LEVELS -> usage("--topology ~ts: ~b levels of switches; a testbed has at most ~b",
                                      [File, Levels, ?MAX_LEVELS]);
        true -> {ok, Switches}
    end.

usage(Format, Args) ->
    {error, {testbed, {usage, lists:flatten(io_lib:format(Format, Args))}}}.

%%--------------------------------------------------------------------
%% Internal functions: a SPEC

spec_switches(Spec, Prefix) ->
    case numbers(Spec) of
        {error, Part} ->
            {error, {testbed, {topology, Spec, {bad_spec, io_lib:format("'~ts' is not a positive integer", [Part])}}}};
        {ok, {fanouts, Fanouts}} when length(Fanouts) > ?MAX_LEVELS ->
            usage("--topology ~ts: ~b levels; a testbed has at most ~b", [shown(Spec), length(Fanouts), ?MAX_LEVELS]);
        {ok, {Form, Numbers}} ->
            within(Spec, count(Form, Numbers), fun() -> build(Form, Numbers, Prefix) end)
    end.

count(single, [N]) -> N;
count(sizes, Sizes) -> lists:sum(Sizes);
count(fanouts, Fanouts) -> product(Fanouts).

build(single, [N], Prefix) -> {ok, [switch("s1", 0, hosts(Prefix, 1, N), [])]};
build(sizes, Sizes, Prefix) -> sized(Sizes, Prefix);
build(fanouts, Fanouts, Prefix) -> fanned(Fanouts, Prefix).

%% The numbers of a SPEC, each a positive integer, before anything is built.
numbers(Spec) ->
    Ints = fun(Parts) -> [case string:to_integer(P) of
                              {I, ""} when I >= 1 -> I;
                              _ -> throw(P)
                          end || P <- Parts]
           end,
    try
        case {string:split(Spec, ",", all), string:split(Spec, "x", all)} of
            {[One], [One]} -> {ok, {single, Ints([One])}};
            {[_, _ | _] = Parts, _} -> {ok, {sizes, Ints(Parts)}};
            {_, Parts} -> {ok, {fanouts, Ints(Parts)}}
        end
    catch
        throw:Part -> {error, Part}
    end.

%% The hosts of fan-outs (at most ?MAX_LEVELS numbers: nothing is built to count them).
product(Fanouts) ->
    lists:foldl(fun(F, P) -> F * P end, 1, Fanouts).

within(_Spec, Hosts, Build) when Hosts =< ?MAX_HOSTS ->
    Build();
within(Spec, Hosts, _Build) ->
    Count = case Hosts > ?MAX_HOSTS * 1000 of
                true -> "more than " ++ integer_to_list(?MAX_HOSTS * 1000);
                false -> integer_to_list(Hosts)
            end,
    usage("--topology ~ts: ~ts hosts; a testbed has at most ~b (one /24)", [shown(Spec), Count, ?MAX_HOSTS]).

%% A SPEC as typed, cut short when long.
shown(Spec) when length(Spec) > 40 -> lists:sublist(Spec, 40) ++ "...";
shown(Spec) -> Spec.

sized(Sizes, Prefix) ->
    {Leaves, _} = lists:foldl(fun({K, Size}, {Acc, First}) ->
                                      {Acc ++ [switch("s" ++ integer_to_list(K), 0,
                                                      hosts(Prefix, First, First + Size - 1), [])],
                                       First + Size}
                              end, {[], 1}, lists:enumerate(Sizes)),
    {ok, Leaves ++ [switch("root", 1, [], [N || #{name := N} <- Leaves])]}.

fanned(Fanouts, Prefix) ->
    Host = fun(I) -> Prefix ++ integer_to_list(I) end,
    {Switches, _} = nested(Fanouts, "s", length(Fanouts) - 1, 1, Host),
    Top = [S || #{level := L} = S <- Switches, L =:= length(Fanouts) - 2],
    {ok, Switches ++ [switch("root", length(Fanouts) - 1, [], [N || #{name := N} <- Top])]}.

switch(Name, Level, Nodes, Switches) ->
    #{name => Name, level => Level, nodes => Nodes, switches => Switches}.

hosts(Prefix, First, Last) ->
    [Prefix ++ integer_to_list(I) || I <- lists:seq(First, Last)].

%% The switches below one switch named Name, for fan-outs [A | Rest]: A children,
%% each a switch (Rest has more than one entry) or a host. Returns the switches of
%% the level below Name (and theirs) and the next host number.
nested([_], _Name, _Level, Next, _Host) ->
    {[], Next};
nested([A | Rest], Name, Level, Next, Host) ->
    lists:foldl(fun(K, {Acc, N}) ->
                        Child = Name ++ case Name of "s" -> ""; _ -> "_" end ++ integer_to_list(K),
                        case Rest of
                            [Count] ->
                                Nodes = [Host(I) || I <- lists:seq(N, N + Count - 1)],
                                {Acc ++ [switch(Child, 0, Nodes, [])], N + Count};
                            _ ->
                                {Below, N1} = nested(Rest, Child, Level - 1, N, Host),
                                Direct = [C || #{name := C, level := L} <- Below, L =:= Level - 2],
                                {Acc ++ Below ++ [switch(Child, Level - 1, [], Direct)], N1}
                        end
                end, {[], Next}, lists:seq(1, A)).

extend(_Last, N) when N =< 0 -> [];
extend(Last, N) -> Next = max(1, Last div 10), [Next | extend(Next, N - 1)].

%%--------------------------------------------------------------------
%% Internal functions: levels

common_level(AboveA, AboveB, Top) ->
    case [L || {L, _} = S <- AboveA, lists:member(S, AboveB)] of
        [] -> Top;
        Common -> lists:min(Common)
    end.

hosts_below(#{name := Name, nodes := Ns, switches := Cs}, Switches, Seen) ->
    Ns ++ lists:append([hosts_below(S, Switches, [Name | Seen])
                        || #{name := C} = S <- Switches, lists:member(C, Cs), not lists:member(C, [Name | Seen])]).
