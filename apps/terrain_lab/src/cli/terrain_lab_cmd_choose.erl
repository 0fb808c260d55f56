%% @private
%% @doc `terrain choose PRED...': the nodes of the running cluster (or of `--nodes')
%% that satisfy the predicates, one per line; when none does, why not (on stderr,
%% with exit status 1).
%%
%% Each PRED is an Erlang term in the predicate language of `terrain:choose_nodes/3',
%% e.g. `'{vm_num_processors, ge, 8}'' or `'{loadavg5, low}''; several are combined
%% with `and'. Terms are parsed as literals, never evaluated.
-module(terrain_lab_cmd_choose).

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "choose",
       summary => "Print the nodes that satisfy predicates, or why none does",
       usage => "PRED...",
       description => "Chooses among the nodes of the cluster that 'terrain up' started (or --nodes) with the "
                      "predicate language of terrain:choose_nodes/3. Each PRED is one Erlang term, e.g. "
                      "'{vm_num_processors, ge, 8}' '{loadavg5, low}' \"{'not', {gpu, true}}\"; several "
                      "are combined with and. Prints the chosen nodes in the cluster's order (or --order-by), "
                      "one per line. When none matches, prints which predicate removed the last candidates "
                      "and their values, on stderr, and exits with status 1. --relax drops predicates from "
                      "the end until a node matches; --pick prints one node. --count K --spread LEVEL|depth:D "
                      "prints K nodes spread over failure domains, with --at NODE (depth:2 is the racks of a "
                      "sites/racks/nodes tree; when the spread cannot be met the nodes are printed and "
                      "why on stderr). Distance predicates "
                      "({dist, le, R}, {level, le, near}, {in_subtree, Net}) need a topology: --at NODE asks a "
                      "node of the cluster (which holds the cluster's topology) to choose, as that node.",
       args => {1, infinity},
       options => [#{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to choose from instead of the running cluster"},
                   #{name => order_by, long => "order-by", type => string, metavar => "ATTR[:asc|desc]",
                     check => {fun order_by_text/1, "ATTR, ATTR:asc, ATTR:desc or distance"},
                     help => "sort the chosen nodes by an attribute, or by 'distance' from the --at node"},
                   #{name => at, long => "at", type => string, metavar => "NODE",
                     help => "evaluate on NODE, with its topology: distances and levels are from NODE"},
                   #{name => relax, long => "relax", type => flag,
                     help => "drop predicates from the end until a node matches"},
                   #{name => pick, long => "pick", type => string, metavar => "HOW",
                     choices => ["random", "first", "least_loaded", "round_robin"],
                     help => "print one chosen node: random, first, least_loaded or round_robin"},
                   #{name => load_attr, long => "load-attr", type => string, metavar => "ATTR",
                     check => {fun attr_name/1, "an attribute name of 1 to 255 characters"},
                     help => "the attribute least_loaded compares (default scheduler_utilisation)"},
                   #{name => count, long => "count", type => integer, range => {1, inf}, metavar => "K",
                     help => "print at most K of the matches (nearest to the --at node first)"},
                   #{name => spread, long => "spread", type => string, metavar => "LEVEL|depth:D",
                     check => {fun spread_text/1, "a level name (same_node, very_near, near, far, very_far, "
                                                  "anywhere) or depth:D"},
                     help => "take them from as many distinct failure domains as possible, evenly: "
                             "a level name or depth:D (the subtrees D levels below the root)"},
                   #{name => timeout, long => "timeout", type => integer, default => 2000, range => {1, inf}, metavar => "MS",
                     help => "deadline for asking all the nodes"},
                   terrain_lab_cli_options:state_dir()],
       run => {?MODULE, run}}].

%% @doc Runs `terrain choose'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(#{pick := Pick, count := Count}, _Args, _Io) when is_list(Pick), is_integer(Count) ->
    {error, {usage, io_lib:format("--pick ~ts prints one node and --count ~b prints ~b: give one of them",
                                  [Pick, Count, Count])}};
run(Options, Args, Io) ->
    terrain_lab_steps:with([fun() -> predicates(Args, Io) end,
                            fun() -> choose_options(Options) end],
                           fun([Preds, ChooseOptions]) ->
                                   terrain_lab_steps:with([fun() -> needs_at(Preds, ChooseOptions, maps:get(at, Options, undefined)) end,
                                                           fun() -> terrain_lab_cluster_state:connect(Options) end,
                                                           fun() -> at_node(Options) end],
                                                          fun([_, Nodes, At]) ->
                                                                  choose(Nodes, Preds, maps:merge(ChooseOptions, At),
                                                                         pick(Options), Io)
                                                          end)
                           end).

%%--------------------------------------------------------------------
%% Internal

choose(Nodes, Preds, Options, undefined, Io) ->
    case at(Options, choose_nodes, [Nodes, Preds, maps:remove(at, Options#{explain => true})]) of
        {[], Explanation} when is_map(Explanation) ->
            terrain_lab_io:progress(Io, "~ts", [terrain:format_explanation(Explanation)]),
            {error, none};
        {Chosen, Shortfall} when is_map(Shortfall) ->
            terrain_lab_io:progress(Io, "~ts", [terrain:format_explanation(Shortfall)]),
            print(Chosen, Io);
        {Chosen, Dropped} when is_list(Dropped) ->
            [terrain_lab_io:progress(Io, "relaxed: dropped ~0tp~n", [P]) || P <- Dropped],
            print(Chosen, Io);
        {error, _} = Error ->
            Error;
        Chosen ->
            print(Chosen, Io)
    end;
choose(Nodes, Preds, Options, {Pick, LoadAttr}, Io) ->
    case at(Options, choose_node, [Nodes, Preds, maps:without([at, count], maps:merge(Options, LoadAttr#{pick => Pick}))]) of
        {ok, Node} -> print([Node], Io);
        {error, none} ->
            %% ask again for the explanation
            _ = choose(Nodes, Preds, maps:remove(relax, Options), undefined, Io),
            {error, none};
        {error, _} = Error -> Error
    end.

%% Runs terrain:F(Args...) here, or on the --at node under the query's deadline plus
%% a second.
at(#{at := Node, timeout := Timeout}, F, Args) ->
    try erpc:call(Node, terrain, F, Args, Timeout + 1000)
    catch
        Class:Reason -> {error, {at_failed, Node, {Class, Reason}}}
    end;
at(_Options, F, Args) ->
    apply(terrain, F, Args).

pick(Options) ->
    case maps:get(pick, Options, undefined) of
        undefined ->
            undefined;
        Text ->
            LoadAttr = case maps:get(load_attr, Options, undefined) of
                           undefined -> #{};
                           Attr -> #{load_attr => list_to_atom(Attr)}
                       end,
            {list_to_atom(Text), LoadAttr}
    end.

print(Nodes, Io) ->
    [terrain_lab_io:out(Io, "~ts~n", [N]) || N <- Nodes],
    ok.

%% One predicate per argument, parsed as a literal term; several mean `and'.
predicates(Args, Io) ->
    Parsed = [terrain_lab_cli_options:parse_term(A) || A <- Args],
    case [{A, Why} || {A, {error, Why}} <- lists:zip(Args, Parsed)] of
        [{Text, Why} | _] ->
            terrain_lab_io:progress(Io, "terrain choose: cannot read ~ts: ~ts~n", [Text, Why]),
            {error, {bad_predicate, Text}};
        [] ->
            case [P || {ok, P} <- Parsed] of
                [One] -> {ok, One};
                Many -> {ok, Many}
            end
    end.

%% Distances and levels are measured from a node: without --at there is none.
needs_at(_Preds, _ChooseOptions, At) when At =/= undefined ->
    {ok, ok};
needs_at(_Preds, #{spread := _}, undefined) ->
    {error, {usage, "--spread takes failure domains from the cluster's topology, which a node holds: give the node "
                    "to choose as with --at NODE"}};
needs_at(_Preds, #{order_by := distance}, undefined) ->
    {error, {usage, "--order-by distance sorts by the distance from a node: give the node with --at NODE"}};
needs_at(Preds, #{}, undefined) ->
    case from_a_node(Preds) of
        [] -> {ok, ok};
        [Pred | _] -> {error, {usage, io_lib:format("~0tp measures distances from a node: give the node with --at NODE",
                                                    [Pred])}}
    end.

%% The predicates (anywhere in and/or/not) that need a node to measure from.
from_a_node({Key, _, _} = Pred) when Key =:= dist; Key =:= level -> [Pred];
from_a_node(Tuple) when is_tuple(Tuple) -> from_a_node(tuple_to_list(Tuple));
from_a_node(List) when is_list(List) -> lists:append([from_a_node(T) || T <- List]);
from_a_node(_) -> [].

%% The --at node, resolved through the cluster's state (a short name works).
at_node(Options) ->
    case maps:get(at, Options, undefined) of
        undefined -> {ok, #{}};
        Name ->
            case terrain_lab_cluster_state:resolve_node(Name, terrain_lab_cluster_state:state_dir(Options)) of
                {ok, Node} -> {ok, #{at => Node}};
                {error, _} = Error -> Error
            end
    end.

order_by_text("distance") -> true;
order_by_text(Text) ->
    case string:split(Text, ":") of
        [Attr] -> attr_name(Attr);
        [Attr, Dir] -> attr_name(Attr) andalso lists:member(Dir, ["asc", "desc"])
    end.

attr_name(Text) ->
    Text =/= "" andalso length(Text) =< 255.

spread_text(Text) ->
    spread_term(Text) =/= error.

spread_term("depth:" ++ D) ->
    case string:to_integer(D) of
        {Depth, ""} when Depth >= 0 -> {depth, Depth};
        _ -> error
    end;
spread_term(Level) ->
    %% the levels of terrain:levels/0 (docs/DISTANCES.md), no other atom
    case [L || L <- terrain:levels(), atom_to_list(L) =:= Level] of
        [Known] -> Known;
        [] -> error
    end.

choose_options(Options) ->
    Base = maps:merge(#{timeout => maps:get(timeout, Options), relax => maps:get(relax, Options, false)},
                      maps:merge(maps:filter(fun(_, V) -> V =/= undefined end, maps:with([count], Options)),
                                 case maps:get(spread, Options, undefined) of
                                     undefined -> #{};
                                     SpreadText -> #{spread => spread_term(SpreadText)}
                                 end)),
    case maps:get(order_by, Options, undefined) of
        undefined ->
            {ok, Base};
        "distance" ->
            {ok, Base#{order_by => distance}};
        Text ->
            case string:split(Text, ":") of
                [Attr] -> {ok, Base#{order_by => {list_to_atom(Attr), asc}}};
                [Attr, "asc"] -> {ok, Base#{order_by => {list_to_atom(Attr), asc}}};
                [Attr, "desc"] -> {ok, Base#{order_by => {list_to_atom(Attr), desc}}};
                _ -> {error, {bad_option, order_by, Text}}
            end
    end.
