%% @doc terrain_paths: communication paths with wrappers, and collective operations
%% shaped by the cluster's topology (Bjørndalen et al., PATHS, §2–3).
%%
%% This is the one public module of `terrain_paths'; the `terrain_paths_*' modules
%% are internal.
%% ```
%% {ok, _} = application:ensure_all_started(terrain_paths),
%% Parent = self(),
%% %% a member stays until every member is done: one that exits is `member_down' to the others
%% Member = fun() -> receive {go, Comm, V} -> Parent ! {self(), terrain_paths:allreduce(Comm, V, sum)} end,
%%                   receive stop -> ok end
%%          end,
%% Pids = [spawn(Member) || _ <- lists:seq(1, 4)],
%% {ok, Comm} = terrain_paths:communicator(Pids, #{algorithm => binomial}),
%% [Pid ! {go, Comm, Rank + 1} || {Rank, Pid} <- lists:enumerate(0, Pids)],
%% Sums = [receive {Pid, Sum} -> Sum after 5000 -> timeout end || Pid <- Pids],
%% [Pid ! stop || Pid <- Pids],
%% %% every member got 1 + 2 + 3 + 4
%% [{ok, 10}, {ok, 10}, {ok, 10}, {ok, 10}] = Sums.
%% '''
%%
%% == Communicators and collectives ==
%%
%% A <em>communicator</em> is a term naming member processes in rank order. Every
%% member calls the same collective operations in the same order with its own value,
%% as in MPI; the operation runs in the calling processes (the application has no
%% processes of its own):
%% ```
%% {ok, Comm} = terrain_paths:communicator(Pids, #{algorithm => hierarchical}),
%% [Pid ! {go, Comm} || Pid <- Pids],
%% %% in each member:
%% {ok, Sum} = terrain_paths:allreduce(Comm, MyValue, sum).
%% '''
%% Operations: {@link allreduce/3}, {@link reduce/3}, {@link broadcast/2},
%% {@link barrier/1}, {@link gather/2}, {@link allgather/2}, {@link scatter/2}. The
%% root of `reduce', `broadcast', `gather' and `scatter' is the communicator's `root'
%% (rank 0 unless set; an explicit tree's own root).
%%
%% Every call has a deadline (`timeout'). A member that has done its part of a call
%% may leave (exit) at once: the others still complete that call. When a call needs
%% a message from a member that is gone (the member, or its node, died first), it
%% returns `{error, {member_down, Rank, Node}}' as soon as the `DOWN' of its monitor
%% arrives, and tells the other members, whose current calls return the same error.
%% After any error the communicator is broken: later calls return the same error.
%%
%% == Operations ==
%%
%% `sum', `min' and `max' take numbers, or lists of numbers of one length (element by
%% element, like MPI's reductions on arrays; `ring' and `rabenseifner' cut such lists
%% into segments). A fun of two arguments must be associative; it is taken to be
%% non-commutative unless given as `{commutative, Fun}', and is then only ever
%% applied to consecutive rank ranges, left before right, so the result is the fold
%% of the values in rank order whatever the algorithm.
%%
%% == Algorithms ==
%%
%% `flat', `binomial', `recursive_doubling', `ring', `rabenseifner', `hierarchical'
%% (from the topology: docs/COLLECTIVES.md), `{tree, Vertex}' (a tree drawn by the
%% user, with wrappers on its edges: a PATHS configuration) and `auto' (by the rules
%% of a `terrain.collective_rules/1' file, by operation and value size).
%% {@link reconfigure/2} replaces the algorithm or configuration of a running
%% communicator at an operation boundary, without restarting anything.
-module(terrain_paths).

%% API: communicators
-export([communicator/2,
         reconfigure/2,
         rank/1,
         size/1,
         members/1,
         algorithm/1,
         free/1]).

%% API: collective operations
-export([allreduce/3,
         reduce/3,
         broadcast/2,
         barrier/1,
         gather/2,
         allgather/2,
         scatter/2]).

%% API: configurations, rules and errors
-export([read_config/1,
         read_rules/1,
         rules_json/2,
         choose/3,
         rules_choice/4,
         hierarchy/1,
         format_error/1]).

%% exports_not_used: the public API of terrain_paths (docs/COLLECTIVES.md); the lab uses only part of it.
-ignore_xref([{algorithm, 1}, {allgather, 2}, {broadcast, 2}, {choose, 3}, {free, 1}, {gather, 2},
              {hierarchy, 1}, {members, 1}, {read_config, 1}, {reconfigure, 2}, {reduce, 3}, {scatter, 2},
              {size, 1}]).

-export_type([comm/0, options/0, algorithm/0, named_algorithm/0, op/0, wrapper/0, vertex/0]).

-compile({no_auto_import, [size/1]}).

%%--------------------------------------------------------------------
%% Types

-type named_algorithm() :: flat | binomial | recursive_doubling | ring | rabenseifner | hierarchical.
%% The algorithms by name: MPI's, and `hierarchical', built from the topology (docs/COLLECTIVES.md).

-type vertex() :: {Rank :: non_neg_integer(), Children :: [vertex()]}
                | {Rank :: non_neg_integer(), Wrappers :: [wrapper()], Children :: [vertex()]}.
%% A vertex of a tree drawn by hand: the member of rank `Rank' reduces what its
%% children send (and its own value) and passes the result to its parent; a
%% broadcast goes the other way.

-type wrapper() :: forward | reduce | compress | {delay, Ms :: non_neg_integer()}
                 | {collect, pid() | {events, atom()} | fun((map()) -> term())}.
%% A stage on the edge from a vertex to its parent (PATHS' wrappers):
%% <ul>
%% <li>`reduce' (the default) — combine the children's partial results and the
%%     vertex's own value before sending;</li>
%% <li>`forward' — send them on side by side, uncombined (more data on the link, no
%%     work at the vertex);</li>
%% <li>`compress' — `term_to_binary(Data, [compressed])' on the link;</li>
%% <li>`{delay, Ms}' — hold the data `Ms' milliseconds first (experiments);</li>
%% <li>`{collect, Collector}' — report each passage as an event map (rank, to,
%%     node, direction, bytes, time) to a pid (`{terrain_paths_event, Event}') or a fun,
%%     or, with `{collect, {events, Collector}}', into EventSpace's collector on the
%%     vertex's node: `terrain_events:collect(Collector, Bytes, Event)' (docs/EVENTS.md).</li>
%% </ul>

-type algorithm() :: named_algorithm() | auto | {tree, vertex()}.
%% A named algorithm, `auto' (chosen by the rules, per operation and value size) or a tree drawn by hand.

-type op() :: sum | min | max | fun((term(), term()) -> term()) | {commutative, fun((term(), term()) -> term())}.
%% A reduction: built-in (numbers, or lists of numbers element by element), or an associative fun,
%% taken to be non-commutative unless given as `{commutative, Fun}'.

-type options() ::
        #{algorithm => algorithm(),
          timeout => pos_integer(),
          root => non_neg_integer(),
          topology => term() | undefined,
          leader => terrain:predicate() | [terrain:predicate()],
          exchange => direct | levels | auto,
          rules => file:filename() | [map()],
          attr_timeout => pos_integer()}.
%% Options of {@link communicator/2}:
%% <ul>
%% <li>`algorithm' — default auto</li>
%% <li>`timeout' — ms for each call, default 5000</li>
%% <li>`root' — root of reduce, broadcast, gather, scatter (default 0)</li>
%% <li>`topology' — a topology term; default: this node's (terrain:topology())</li>
%% <li>`leader' — group leaders of the hierarchical tree come from the nodes these predicates
%%     select when a group has any</li>
%% <li>`exchange' — how hierarchical's group leaders exchange (docs/COLLECTIVES.md); default auto:
%%     direct up to 8 lowest groups, else level by level</li>
%% <li>`rules' — rules for auto: a terrain.collective_rules/1 file or parsed rules; default:
%%     built-in choice</li>
%% <li>`attr_timeout' — ms for asking the nodes' schedulers (default 2000)</li>
%% </ul>

%% A communicator: treat it as opaque (its fields may change).
-type comm() :: #{id := reference(),
                    members := tuple(),
                    nodes := tuple(),
                    timeout := pos_integer(),
                    root := non_neg_integer(),
                    algorithm := algorithm(),
                    rules := terrain_paths_rules:rules(),
                    hierarchy := terrain_paths_plan:hierarchy(),
                    explicit => terrain_paths_plan:tree()}.
%% A communicator: its members in rank order and how its operations run. Made by
%% {@link communicator/2}; pass it as it is (its keys may change).

-define(DEFAULT_TIMEOUT, 5000).
-define(DEFAULT_ATTR_TIMEOUT, 2000).

%%--------------------------------------------------------------------
%% API: communicators

%% @doc A communicator over `Members' (pids in rank order). Builds the hierarchy of
%% the members' nodes from the topology (for `hierarchical' and `auto'), asking
%% the nodes for their schedulers once; reads the rules file of `auto'.
-spec communicator(Members :: [pid()], Opts :: options()) -> {ok, comm()} | {error, term()}.
communicator(Members, Opts) when is_list(Members), Members =/= [], is_map(Opts) ->
    [erlang:error(badarg, [Members, Opts]) || M <- Members, not is_pid(M)],
    length(lists:usort(Members)) =:= length(Members) orelse erlang:error(badarg, [Members, Opts]),
    Size = length(Members),
    case check_options(Opts, Size) of
        ok ->
            Nodes = list_to_tuple([node(M) || M <- Members]),
            Root = maps:get(root, Opts, 0),
            Base = #{id => make_ref(), members => list_to_tuple(Members), nodes => Nodes,
                     timeout => maps:get(timeout, Opts, ?DEFAULT_TIMEOUT), root => Root,
                     algorithm => maps:get(algorithm, Opts, auto)},
            with_rules(Opts, fun(Rules) ->
                                     Hierarchy = build_hierarchy(Nodes, Root, Opts),
                                     with_algorithm(Base#{rules => Rules, hierarchy => Hierarchy},
                                                    maps:get(algorithm, Base))
                             end);
        {error, _} = Error ->
            Error
    end;
communicator(Members, Opts) ->
    erlang:error(badarg, [Members, Opts]).

%% @doc Replaces the algorithm (or the hand-drawn configuration) of a running
%% communicator. Collective: every member calls it; the root's `Algorithm' is
%% broadcast, so all members switch at the same operation boundary. Returns the new
%% communicator (same members, same monitors).
-spec reconfigure(comm(), algorithm()) -> {ok, comm()} | {error, term()}.
reconfigure(Comm, Algorithm) ->
    case terrain_paths_collective:call(reconfigure, Comm, binomial, Algorithm) of
        {ok, Chosen} -> with_algorithm(Comm, Chosen);
        {error, _} = Error -> Error
    end.

%% @doc The calling process's rank in the communicator.
-spec rank(comm()) -> non_neg_integer().
rank(#{members := Members}) ->
    case [I - 1 || I <- lists:seq(1, tuple_size(Members)), element(I, Members) =:= self()] of
        [Rank] -> Rank;
        [] -> erlang:error(badarg)
    end.

%% @doc The number of members.
-spec size(comm()) -> pos_integer().
size(#{members := Members}) -> tuple_size(Members).

%% @doc The members in rank order.
-spec members(comm()) -> [pid()].
members(#{members := Members}) -> tuple_to_list(Members).

%% @doc The communicator's algorithm (as configured: `auto' stays `auto').
-spec algorithm(comm()) -> algorithm().
algorithm(#{algorithm := Algorithm}) -> Algorithm.

%% @doc Drops the calling member's monitors of the other members.
-spec free(comm()) -> ok.
free(Comm) -> terrain_paths_collective:forget(Comm).

%%--------------------------------------------------------------------
%% API: collective operations

%% @doc Every member gets `V0 Op V1 Op ... Op Vn-1' (ranks in order).
-spec allreduce(comm(), term(), op()) -> {ok, term()} | {error, term()}.
allreduce(Comm, Value, Op) ->
    check_op(Op),
    call(allreduce, Comm, {Value, Op}, erlang:external_size(Value)).

%% @doc The root gets `{ok, V0 Op ... Op Vn-1}'; the other members get `ok'.
-spec reduce(comm(), term(), op()) -> {ok, term()} | ok | {error, term()}.
reduce(Comm, Value, Op) ->
    check_op(Op),
    call(reduce, Comm, {Value, Op}, erlang:external_size(Value)).

%% @doc Every member gets the root's `Value' (the others' are ignored).
-spec broadcast(comm(), term()) -> {ok, term()} | {error, term()}.
broadcast(Comm, Value) ->
    call(broadcast, Comm, Value, 0).

%% @doc Returns when every member has called it.
-spec barrier(comm()) -> ok | {error, term()}.
barrier(Comm) ->
    call(barrier, Comm, none, 0).

%% @doc The root gets `{ok, [V0, ..., Vn-1]}'; the other members get `ok'.
-spec gather(comm(), term()) -> {ok, [term()]} | ok | {error, term()}.
gather(Comm, Value) ->
    call(gather, Comm, Value, erlang:external_size(Value)).

%% @doc Every member gets `[V0, ..., Vn-1]'.
-spec allgather(comm(), term()) -> {ok, [term()]} | {error, term()}.
allgather(Comm, Value) ->
    call(allgather, Comm, Value, erlang:external_size(Value)).

%% @doc The root passes one value per rank (a list in rank order; the others'
%% `Values' are ignored); each member gets its own.
-spec scatter(comm(), [term()] | term()) -> {ok, term()} | {error, term()}.
scatter(Comm, Values) ->
    call(scatter, Comm, Values, 0).

%%--------------------------------------------------------------------
%% API: configurations, rules and errors

%% @doc Reads an algorithm from a file holding one Erlang term: an algorithm name or
%% `{tree, Vertex}' (a configuration drawn by hand; docs/COLLECTIVES.md).
-spec read_config(file:filename()) -> {ok, algorithm()} | {error, term()}.
read_config(File) ->
    case file:consult(File) of
        {ok, [Algorithm]} ->
            case valid_algorithm(Algorithm) of
                true -> {ok, Algorithm};
                false -> {error, {paths, {config, File, {bad_algorithm, Algorithm}}}}
            end;
        {ok, Terms} -> {error, {paths, {config, File, {expected_one_term, length(Terms)}}}};
        {error, {Line, Mod, Term}} -> {error, {paths, {config, File, {syntax, Line, Mod:format_error(Term)}}}};
        {error, Why} -> {error, {file, File, Why}}
    end.

%% @doc Reads a `terrain.collective_rules/1' file.
-spec read_rules(file:filename()) -> {ok, terrain_paths_rules:rules()} | {error, term()}.
read_rules(File) ->
    terrain_paths_rules:read(File).

%% @doc The JSON document (`terrain.collective_rules/1') of rules, with a map saying
%% where they come from.
-spec rules_json(terrain_paths_rules:rules(), map()) -> map().
rules_json(Rules, Source) ->
    terrain_paths_rules:to_json(Rules, Source).

%% @doc The algorithm `auto' runs for an operation on a value of `Bytes'.
-spec choose(comm(), terrain_paths_collective:operation(), non_neg_integer()) -> named_algorithm().
choose(#{rules := Rules, nodes := Nodes}, Operation, Bytes) ->
    terrain_paths_rules:choose(Rules, Operation, Bytes, #{nodes => length(lists:usort(tuple_to_list(Nodes)))}).

%% @doc The algorithm a rules file names for an operation on a value of `Bytes'
%% (its external size) among members on `Nodes' nodes: what `auto' would run.
-spec rules_choice(terrain_paths_rules:rules(), terrain_paths_collective:operation(), non_neg_integer(),
                   pos_integer()) -> named_algorithm().
rules_choice(Rules, Operation, Bytes, Nodes) ->
    terrain_paths_rules:choose(Rules, Operation, Bytes, #{nodes => Nodes}).

%% @doc The hierarchy the communicator's members form: nested groups of ranks
%% (`{group, Children}' and `{node, Node, Ranks}'), the levels each node leader
%% exchanges at, and the reduce/broadcast tree.
-spec hierarchy(comm()) -> terrain_paths_plan:hierarchy().
hierarchy(#{hierarchy := Hierarchy}) -> Hierarchy.

%% @doc A sentence for an error of this application.
-spec format_error(term()) -> iolist().
format_error({member_down, Rank, Node}) ->
    io_lib:format("member ~b (on ~0tp) went down during a collective operation", [Rank, Node]);
format_error(timeout) ->
    "a collective operation did not complete before its deadline";
format_error({paths, {option, Key, Value}}) ->
    io_lib:format("bad communicator option ~0tp: ~0tp", [Key, Value]);
format_error({paths, {bad_tree, Why}}) ->
    io_lib:format("bad tree configuration: ~0tp", [Why]);
format_error({paths, {rules, File, {json, Offset, Message}}}) ->
    io_lib:format("~ts: not a terrain.collective_rules/1 file: not JSON (~ts at byte ~b)", [File, Message, Offset]);
format_error({paths, {rules, File, Why}}) ->
    io_lib:format("~ts: not a terrain.collective_rules/1 file: ~0tp", [File, Why]);
format_error({paths, {config, File, Why}}) ->
    io_lib:format("~ts: bad paths configuration: ~0tp", [File, Why]);
format_error({file, File, Why}) ->
    io_lib:format("~ts: ~ts", [File, file:format_error(Why)]);
format_error(Other) ->
    io_lib:format("~0tp", [Other]).

%%--------------------------------------------------------------------
%% Internal functions

call(Operation, #{algorithm := auto} = Comm, Args, Bytes) ->
    terrain_paths_collective:call(Operation, Comm, choose(Comm, Operation, Bytes), Args);
call(Operation, #{algorithm := Algorithm} = Comm, Args, _Bytes) ->
    terrain_paths_collective:call(Operation, Comm, Algorithm, Args).

check_op(Op) ->
    terrain_paths_op:validate(Op) orelse erlang:error(badarg, [Op]).

check_options(Opts, Size) ->
    Checks = #{algorithm => fun valid_algorithm/1,
               timeout => fun(T) -> is_integer(T) andalso T > 0 end,
               root => fun(R) -> is_integer(R) andalso R >= 0 andalso R < Size end,
               topology => fun(_) -> true end,
               leader => fun(P) -> is_list(P) orelse is_tuple(P) end,
               exchange => fun(E) -> lists:member(E, [direct, levels, auto]) end,
               rules => fun(R) -> is_list(R) end,
               attr_timeout => fun(T) -> is_integer(T) andalso T > 0 end},
    case [{K, V} || {K, V} <- maps:to_list(Opts), not (maps:is_key(K, Checks) andalso (maps:get(K, Checks))(V))] of
        [] -> ok;
        [{K, V} | _] -> {error, {paths, {option, K, V}}}
    end.

valid_algorithm(auto) -> true;
valid_algorithm({tree, _}) -> true;
valid_algorithm(A) -> lists:member(A, terrain_paths_rules:algorithms()).

with_rules(#{rules := [C | _] = File}, Fun) when is_integer(C) ->
    case terrain_paths_rules:read(File) of
        {ok, Rules} -> Fun(Rules);
        {error, _} = Error -> Error
    end;
with_rules(#{rules := Rules}, Fun) ->
    Fun(Rules);
with_rules(#{}, Fun) ->
    Fun([]).

with_algorithm(#{members := Members} = Comm, {tree, Vertex} = Algorithm) ->
    case terrain_paths_plan:explicit(Vertex, tuple_size(Members)) of
        {ok, Tree} -> {ok, Comm#{algorithm => Algorithm, explicit => Tree, root => terrain_paths_plan:root(Tree)}};
        {error, Why} -> {error, {paths, {bad_tree, Why}}}
    end;
with_algorithm(Comm, Algorithm) ->
    case valid_algorithm(Algorithm) of
        true -> {ok, maps:remove(explicit, Comm#{algorithm => Algorithm})};
        false -> {error, {paths, {option, algorithm, Algorithm}}}
    end.

build_hierarchy(Nodes, Root, Opts) ->
    Unique = lists:usort(tuple_to_list(Nodes)),
    AttrTimeout = maps:get(attr_timeout, Opts, ?DEFAULT_ATTR_TIMEOUT),
    Topology = case maps:find(topology, Opts) of
                   {ok, T} -> T;
                   error -> terrain:topology()
               end,
    {Schedulers, Eligible} =
        case Unique of
            [_] -> {#{}, all};
            _ -> {schedulers(Unique, AttrTimeout), eligible(Unique, Opts, AttrTimeout)}
        end,
    terrain_paths_plan:hierarchy(#{nodes => Nodes, root => Root, topology => Topology,
                                   schedulers => Schedulers, eligible => Eligible,
                                   exchange => maps:get(exchange, Opts, auto)}).

schedulers(Nodes, Timeout) ->
    case terrain:attrs(Nodes, [vm_schedulers_online], #{timeout => Timeout}) of
        #{} = Answers ->
            maps:from_list([{N, S} || {N, {ok, #{vm_schedulers_online := S}}} <- maps:to_list(Answers),
                                      is_integer(S)]);
        {error, _} ->
            #{}
    end.

eligible(Nodes, #{leader := Preds}, Timeout) ->
    case terrain:choose_nodes(Nodes, Preds, #{timeout => Timeout}) of
        Chosen when is_list(Chosen) -> Chosen;
        _ -> all
    end;
eligible(_Nodes, #{}, _Timeout) ->
    all.
