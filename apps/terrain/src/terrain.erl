%% @doc terrain: choose Erlang nodes by what they are and how far apart they are.
%%
%% This is the one public module of the `terrain' library; every other module
%% (`terrain_*') is internal and may change without notice.
%%
%% A program asks for nodes by their live attributes and by their distance in the
%% cluster's communication hierarchy instead of naming hosts. See the README for the
%% concepts and docs/INTERNALS.md for the processes behind this API.
%%
%% Every node a program runs on starts the `terrain' application (it holds the
%% node's attributes and its topology); here, one node on its own:
%% ```
%% {ok, _} = application:ensure_all_started(terrain),
%% ok = terrain:set_attr(gpu, true),
%% true = terrain:attr(gpu),
%% ok = terrain:load_topology({network, dc, [{network, rack1, [{node, node()}, {node, 'b@host1'}]},
%%                                          {network, rack2, [{node, 'c@host2'}]}]}),
%% very_near = terrain:level(node(), 'b@host1'),
%% very_far = terrain:level(node(), 'c@host2'),
%% %% nodes with a GPU and at least one scheduler, nearest first (here: this one)
%% [Here] = terrain:choose_nodes(all, [{gpu, true}, {vm_schedulers_online, ge, 1}],
%%                               #{order_by => distance}),
%% {ok, _Pid, Here} = terrain:spawn_on([{gpu, true}], fun() -> ok end, #{}).
%% '''
%%
%% == Attributes ==
%%
%% An <em>attribute</em> is a named property of a node: `vm_num_processors',
%% `loadavg5', `gpu'. Every node running the `terrain' application has an attribute
%% server holding its own attributes, of four kinds:
%% <ul>
%% <li><b>static</b> — a term: `{gpu, true}';</li>
%% <li><b>dynamic</b> — a function evaluated at every lookup, in an isolated process
%%     under a timeout (200 ms unless configured): `{procs, {dynamic, {erlang,
%%     system_info, [process_count]}}}'; a function that hangs or crashes gives
%%     `undefined';</li>
%% <li><b>automatic</b> — a function evaluated once, when the configuration is loaded;</li>
%% <li><b>sampled</b> — a function evaluated every `interval' ms whose last `window'
%%     results are averaged: `{sampled, MFA, #{interval => 1000, window => 60}}'.</li>
%% </ul>
%% Built-in attributes (RELEASE D3.5's Tables 1 and 2 and a few more; see
%% docs/ATTRIBUTES.md) are loaded first, then the file named by the application
%% environment key `attr_config', then the list in `attrs'. A program can
%% {@link set_attr/2} values at run time; such a value belongs to the process that set
%% it and disappears when that process dies, unless it is set with
%% `#{owner => persistent}'.
%%
%% {@link attrs/3} asks many nodes at once under one deadline and never raises for a
%% remote failure: each node answers `{ok, Values}' or `{error, timeout | noconnection
%% | not_running}'. Answers are cached: static values until the node goes down,
%% others for as long as the caller's `max_age' allows. A node that failed is not
%% asked again for a while (backoff) unless it reconnects.
%%
%% == Choosing nodes ==
%%
%% {@link choose_nodes/3} filters candidates with predicates; {@link choose_node/3}
%% picks one of the matches.
%% ```
%% %% Big, lightly loaded nodes, least loaded first:
%% terrain:choose_nodes(all, [{vm_num_processors, ge, 8}, {loadavg5, low}],
%%                      #{order_by => {loadavg5, asc}}).
%% %% One of them, spreading repeated calls over the matches:
%% {ok, Node} = terrain:choose_node(all, [{vm_num_processors, ge, 8}], #{pick => round_robin}).
%% %% Why did nothing match?
%% {[], Why} = terrain:choose_nodes(all, [{gpu, true}, {mem_free, gt, 1 bsl 30}], #{explain => true}),
%% io:put_chars(terrain:format_explanation(Why)).
%% '''
%% Predicates: `{Attr, eq|ne|lt|le|gt|ge, Const}' (`==' semantics for numbers),
%% `{Attr, true|false|yes|no}', `{Attr, in, List}', `{Attr, exists}', `{Attr, low|high}',
%% `{Attr, top|bottom, K}', `{dist, Op, R}', `{dist, From, Op, R}', `{level, Op, Level}',
%% `{group, Scope, Group}', ``{'not', P}'', ``{'or', Ps}'', ``{'and', Ps}''; a list means
%% `and'. A predicate on an `undefined' value is neither true nor false, and `not'
%% keeps it so: ``{'not', {load, lt, 1}}'' does not select nodes without a `load'.
%% docs/ATTRIBUTES.md defines `low', `high', `top' and `bottom' precisely.
%%
%% == Topology, distances and placement ==
%%
%% Each node holds a topology: a tree of networks whose leaves are nodes
%% (RELEASE D3.5, §4.1–4.2), loaded with {@link load_topology/1} from a term or a
%% file that `terrain topology' wrote (term or JSON). {@link distance/2} is the
%% ultrametric 2^−ℓ, or the measured height of the lowest common network;
%% {@link level/2} names it (`same_node' … `anywhere'), and the predicates
%% `{dist, ...}', `{level, ...}' and `{in_subtree, Network}' select by it.
%% {@link spawn_on/3} spawns on a chosen node; {@link place_tree/2} places a process
%% tree so that children sit near their parents (docs/DISTANCES.md).
%%
%% == Spread, placed groups and the live topology ==
%%
%% `choose_nodes(all, Preds, #{count => 4, spread => {depth, 2}})' takes four matches
%% from as many racks as possible, evenly. {@link start_placed/2} keeps K processes
%% running on matching nodes, spread over failure domains, and starts them elsewhere
%% when their node dies (no state handoff); {@link placed/1} lists them. With the app env
%% key `live' the topology follows nodes joining, leaving and moving, one version on
%% every node ({@link live_status/0}); {@link subscribe/2} delivers the changes
%% (docs/DISTANCES.md).
%% ```
%% {ok, _} = terrain:start_placed(workers, #{start => {my_worker, start_link, []}, count => 8,
%%                                           preds => [{vm_num_processors, ge, 4}],
%%                                           spread => {depth, 2}}),
%% [{Pid, Node} | _] = terrain:placed(workers),
%% {ok, Ref} = terrain:subscribe(topology, #{}),
%% receive {terrain_topology, Ref, #{version := V, change := Change}} -> {V, Change} end.
%% '''
%%
%% == Topology discovery ==
%%
%% {@link read_latency/1} reads the round trips `terrain probe' measured;
%% {@link discover/2} turns them into a topology with measured heights
%% (RELEASE D3.5, §4.3–4.5, with α chosen per level); {@link compare_topologies/2}
%% scores a found tree against a true one (docs/TOPOLOGY_DISCOVERY.md).
%% {@link insert_node/4} places one more node into a known tree by measuring it
%% against a few representatives of each subtree (the tree probe's step).
%% ```
%% {ok, Latency} = terrain:read_latency("runs/20261121T173306Z/latency.json"),
%% {ok, #{topology := Tree}} = terrain:discover(Latency, #{}),
%% ok = terrain:load_topology(Tree).
%% '''
%%
%% == Variability of durations ==
%%
%% Parallel task durations follow extreme-value statistics (Henwood et al.).
%% {@link load_duration_model/2} loads a GEV fit that `terrain-analysis gev' wrote;
%% {@link check_duration/2} says whether a duration is unlikely under it, in the
%% caller, without a server (docs/GEV.md).
%% ```
%% ok = terrain:load_duration_model("gev/fit.json", #{name => write, tail => 0.001}),
%% case terrain:check_duration(write, Seconds) of
%%     {ok, _P} -> ok;
%%     {unlikely, P} -> logger:warning("write took ~.3f s (p = ~.2g)", [Seconds, P])
%% end.
%% '''
-module(terrain).

%% API: general
-export([version/0,
         format_error/1]).

%% API: attributes
-export([attr/1,
         set_attr/2,
         set_attr/3,
         delete_attr/1,
         load_attrs/1,
         attrs/2,
         attrs/3,
         subscribe/2,
         subscribe/3,
         unsubscribe/1,
         stats/0]).

%% API: selection
-export([choose_nodes/2,
         choose_nodes/3,
         choose_node/3,
         format_explanation/1]).

%% API: topology and placement
-export([load_topology/1,
         check_topology/1,
         topology/0,
         live_status/0,
         render_topology/2,
         distance/2,
         level/2,
         levels/0,
         disc/2,
         spawn_on/3,
         place_tree/2]).

%% API: placed groups
-export([start_placed/2,
         placed/1,
         placed_groups/0,
         stop_placed/1]).

%% API: topology discovery
-export([read_latency/1,
         discover/2,
         compare_topologies/2,
         insert_node/4,
         remove_node/2,
         topology_levels/1,
         level_bounds/2,
         level_bounds/3]).

%% API: variability of durations
-export([load_duration_model/1,
         load_duration_model/2,
         check_duration/1,
         check_duration/2,
         duration_model/1,
         unload_duration_model/1]).

%% exports_not_used: The public API: called by users of the library, not by this project's code.
-ignore_xref([{version, 0}, {format_error, 1}, {attr, 1}, {set_attr, 2}, {set_attr, 3},
              {delete_attr, 1}, {load_attrs, 1}, {attrs, 2}, {attrs, 3}, {subscribe, 2}, {subscribe, 3},
              {unsubscribe, 1}, {stats, 0}, {choose_nodes, 2}, {choose_nodes, 3}, {choose_node, 3},
              {format_explanation, 1}, {load_topology, 1}, {check_topology, 1}, {topology, 0}, {live_status, 0},
              {render_topology, 2}, {distance, 2}, {level, 2}, {disc, 2}, {spawn_on, 3},
              {place_tree, 2}, {start_placed, 2}, {placed, 1}, {placed_groups, 0}, {stop_placed, 1}, {read_latency, 1}, {discover, 2},
              {compare_topologies, 2}, {insert_node, 4}, {remove_node, 2}, {topology_levels, 1}, {level_bounds, 2},
              {level_bounds, 3},
              {load_duration_model, 1}, {load_duration_model, 2}, {check_duration, 1},
              {check_duration, 2}, {duration_model, 1}, {unload_duration_model, 1}]).

-export_type([attr_name/0,
              attr_result/0,
              set_options/0,
              query_options/0,
              candidates/0,
              predicate/0,
              level/0,
              choose_options/0,
              choose_node_options/0,
              explanation/0,
              spread/0,
              spread_shortfall/0,
              spawn_options/0,
              process_tree/0,
              place_options/0,
              placed_spec/0,
              placed_group/0,
              topology_tree/0,
              topology_format/0,
              latency/0,
              discovery_options/0,
              discovery/0,
              comparison/0,
              insert_options/0,
              measure/0,
              measured_pair/0,
              duration_model/0,
              duration_model_options/0]).

%%--------------------------------------------------------------------
%% Types

-type attr_name() :: atom().
%% An attribute's name. `dist', `level', `group', `not', `or', `and' and `undefined'
%% are reserved by the predicate language.

-type attr_result() :: {ok, #{attr_name() => term()}} | {error, timeout | noconnection | not_running}.
%% One node's answer to {@link attrs/3}: every requested name, `undefined' where the
%% node has no value; or why the node did not answer.

-type set_options() :: #{owner => pid() | persistent}.
%% Options of {@link set_attr/3}:
%% <ul>
%% <li>`owner' — the process the value belongs to: it is removed within milliseconds
%%     of that process's death. `persistent' values stay until deleted. Default: the
%%     caller.</li>
%% </ul>

-type query_options() :: #{timeout => non_neg_integer(),
                           max_age => non_neg_integer() | infinity}.
%% Options of {@link attrs/3}, also accepted by {@link choose_nodes/3}:
%% <ul>
%% <li>`timeout' — ms for the whole call, however many nodes (default 1000).</li>
%% <li>`max_age' — accept cached non-static values younger than this many ms
%%     (default 0: ask the nodes). Static values are always taken from the cache.</li>
%% </ul>

-type candidates() :: [node()] | all | {group, Scope :: atom(), Group :: term()}.
%% The nodes to choose from: a list (its order is kept, duplicates too), `all' (this
%% node and every connected node), or the nodes of the members of a `pg' group.

-type level() :: same_node | very_near | near | far | very_far | anywhere.
%% Levels of the communication hierarchy, nearest first (see the topology section).

-type predicate() :: {attr_name(), eq | ne | lt | le | gt | ge, term()}
                   | {attr_name(), true | false | yes | no}
                   | {attr_name(), in, [term()]}
                   | {attr_name(), exists}
                   | {attr_name(), low | high}
                   | {attr_name(), top | bottom, pos_integer()}
                   | {dist, eq | ne | lt | le | gt | ge, number()}
                   | {dist, node(), eq | ne | lt | le | gt | ge, number()}
                   | {level, eq | ne | lt | le | gt | ge, level()}
                   | {group, Scope :: atom(), Group :: term()}
                   | {in_subtree, Network :: term()}
                   | {'not', predicate()}
                   | {'or', [predicate()]}
                   | {'and', [predicate()]}
                   | [predicate()].
%% A predicate of the selection language (docs/ATTRIBUTES.md, docs/DISTANCES.md); a list means `and'.

-type choose_options() :: #{timeout => non_neg_integer(),
                            max_age => non_neg_integer() | infinity,
                            order_by => {attr_name(), asc | desc} | distance,
                            explain => boolean(),
                            relax => boolean(),
                            count => pos_integer(),
                            spread => spread(),
                            occupied => [node()]}.
%% Options of {@link choose_nodes/3}:
%% <ul>
%% <li>`timeout', `max_age' — as in {@link query_options()}.</li>
%% <li>`order_by' — sort the result by an attribute (nodes without it last), or by
%%     `distance' from this node (nearest first, ties in candidate order), instead of
%%     keeping the candidates' order.</li>
%% <li>`explain' — when nothing matches, return `{[], Explanation}' instead of `[]'.</li>
%% <li>`relax' — drop predicates from the end of the list until a node matches; the
%%     result becomes `{Nodes, Dropped}'.</li>
%% <li>`count' — return at most K of the matches (nearest first unless `order_by').</li>
%% <li>`spread' — take them from as many distinct failure domains as the matches
%%     allow, evenly (the counts of two domains differ by at most one unless one ran
%%     out of matches), nearest first within that: a level name (`near': nodes at
%%     most `near' apart share a domain) or `{depth, D}' (the subtrees D levels below
%%     the root; `{depth, 2}' is the racks of a sites/racks/nodes tree). With `explain',
%%     a result that falls short (fewer than K, or two in one domain) is
%%     `{Nodes, Shortfall}'; {@link format_explanation/1} says why.</li>
%% <li>`occupied' — nodes already in use (with multiplicity), counted in their
%%     domains before the spread picks, so that new picks go where there are fewest.</li>
%% </ul>

-type choose_node_options() :: #{timeout => non_neg_integer(),
                                 max_age => non_neg_integer() | infinity,
                                 order_by => {attr_name(), asc | desc} | distance,
                                 relax => boolean(),
                                 pick => random | first | least_loaded | round_robin,
                                 load_attr => attr_name(),
                                 spread => spread(),
                                 occupied => [node()]}.
%% Options of {@link choose_node/3}: those of {@link choose_options()} except
%% `explain', and:
%% <ul>
%% <li>`pick' — which match to return: `random' (default; spreads concurrent
%%     spawners, RELEASE D3.5, §5.1.3), `first', `least_loaded' (smallest `load_attr', ties
%%     at random) or `round_robin' (a node-wide rotation over the matches).</li>
%% <li>`load_attr' — the attribute `least_loaded' compares (default
%%     `scheduler_utilisation', a 10-second moving average).</li>
%% <li>`spread', `occupied' — as in {@link choose_options()}: `pick' chooses among
%%     the matches in the domain with the fewest occupied nodes (then the least
%%     occupied nodes in it).</li>
%% </ul>

-type explanation() :: #{candidates := non_neg_integer(),
                         unreachable := #{node() => term()},
                         steps := [{predicate(), non_neg_integer()}],
                         removed_by := predicate() | none,
                         last := #{node() => #{term() => term()}}}
                     | spread_shortfall().
%% Why nothing matched, or why a spread fell short; render it with
%% {@link format_explanation/1}.

-type spread() :: level() | {depth, non_neg_integer()}.
%% Failure domains to spread over: a level name, or `{depth, D}' (see
%% {@link choose_options()}).

-type spread_shortfall() :: #{count := pos_integer(),
                              spread := spread() | none,
                              matched := non_neg_integer(),
                              picked := non_neg_integer(),
                              domains := non_neg_integer(),
                              shared := [{Domain :: term(), pos_integer()}]}.
%% Why a spread was not met (`explain => true' with `count' or `spread'): K asked,
%% how many nodes matched, how many were picked, over how many distinct domains, and
%% the domains (network names) that got more than one pick.

-type spawn_options() :: #{candidates => candidates(),
                           pick => random | first | least_loaded | round_robin,
                           link => boolean(),
                           monitor => boolean(),
                           attempts => pos_integer(),
                           timeout => non_neg_integer(),
                           max_age => non_neg_integer() | infinity}.
%% Options of {@link spawn_on/3}:
%% <ul>
%% <li>`candidates' — where to look (default `all').</li>
%% <li>`pick' — as in {@link choose_node_options()} (default `random').</li>
%% <li>`link', `monitor' — link to or monitor the new process, atomically with the
%%     spawn (default false). With `monitor' the result carries the monitor reference.</li>
%% <li>`attempts' — how many chosen nodes to try when a chosen node cannot take the
%%     process (it went down, or does not answer within `timeout'), each failed node
%%     being left out of the next choice (default 3).</li>
%% <li>`timeout', `max_age' — as in {@link query_options()}; `timeout' also bounds
%%     each spawn request.</li>
%% </ul>

-type process_tree() :: {vertex, Name :: term(), Children :: [process_tree()]}
                      | {vertex, Name :: term(), Preds :: predicate() | [predicate()], Children :: [process_tree()]}.
%% An application's process tree for {@link place_tree/2}: names are unique; a
%% vertex's predicates restrict the nodes it may run on.

-type place_options() :: #{candidates => candidates(),
                           capacity => pos_integer(),
                           random_rounds => pos_integer(),
                           timeout => non_neg_integer(),
                           max_age => non_neg_integer() | infinity}.
%% Options of {@link place_tree/2}:
%% <ul>
%% <li>`candidates' — the nodes to place on (default `all').</li>
%% <li>`capacity' — vertices per node (default ⌈vertices / nodes⌉, which spreads the
%%     tree over all the candidates).</li>
%% <li>`random_rounds' — random placements averaged for the comparison (default 20).</li>
%% <li>`timeout', `max_age' — for the attributes the vertices' predicates need.</li>
%% </ul>

-type placed_spec() :: #{start := {module(), atom(), [term()]},
                         count := pos_integer(),
                         preds => predicate() | [predicate()],
                         spread => spread(),
                         candidates => candidates(),
                         rebalance => false | pos_integer(),
                         max_restarts => non_neg_integer(),
                         start_timeout => pos_integer(),
                         timeout => pos_integer()}.
%% A placed group for {@link start_placed/2}:
%% <ul>
%% <li>`start' — `{M, F, A}' run on the chosen node, returning `{ok, Pid}' as a
%%     supervisor child's start does (`{gen_event, start, []}', a `start_link');</li>
%% <li>`count' — how many members (K);</li>
%% <li>`preds' — the predicates a member's node must satisfy (default `[]');</li>
%% <li>`spread' — spread the members over the failure domains of this level or
%%     `{depth, D}' (as in {@link choose_options()}), also after every repair;</li>
%% <li>`candidates' — where to look (default `all': this node and the connected ones,
%%     as they are at each placement);</li>
%% <li>`rebalance' — `false' (default) or an interval in ms (at least 100): when nodes
%%     join, move at most one member per interval where that evens the spread;</li>
%% <li>`max_restarts' — member exits tolerated within 10 s before the group stops
%%     (default 10; node failures do not count);</li>
%% <li>`start_timeout' — ms {@link start_placed/2} waits for the members (default 5000).</li>
%% <li>`timeout' — ms each selection may take to ask the candidates' attributes
%%     (default 2000; a node that does not answer in time is not chosen that time).</li>
%% </ul>

-type placed_group() :: #{name := term(),
                          count := pos_integer(),
                          members := [#{pid := pid(), node := node(), domain := term()}],
                          restarted := non_neg_integer(),
                          replaced := non_neg_integer()}.
%% A placed group as {@link placed_groups/0} describes it: its name, the members it
%% keeps (`count'), the running members with their node and failure domain (the name
%% of the node's network under the group's `spread' in this node's topology; `{node,
%% Node}' without a spread or a topology), the members restarted after an exit and those placed again
%% because their node went away, both since the group started.

-type topology_tree() :: {network, term(), [topology_tree()]}
                       | {network, [topology_tree()]}
                       | {network, term(), #{height => number()}, [topology_tree()]}
                       | {node, node()}.
%% A topology term: `{network, Name, Children}', `{network, Children}',
%% `{network, Name, #{height => Microseconds}, Children}' or `{node, Node}'
%% (docs/DISTANCES.md).

-type topology_format() :: term | text | dot | newick | json.
%% `term' (consultable), `text' (indented), `dot' (Graphviz), `newick', `json'
%% (`terrain.topology/1'). {@link load_topology/1} reads `term' and `json'.

-type latency() :: #{nodes := [node()],
                     stats := #{atom() => [[number() | null]]},
                     atom() => term()}.
%% A latency matrix as {@link read_latency/1} returns it: `nodes' and, per statistic,
%% the round trips in µs (docs/TOPOLOGY_DISCOVERY.md).

-type discovery_options() ::
        #{statistic => min | median | mean | p95,
          symmetrise => min | mean | max,
          linkage => terrain_linkage:method(),
          alpha => auto | number(),
          outliers => repair | keep,
          outlier_factor => number(),
          alpha_range => {number(), number()},
          alpha_steps => pos_integer(),
          alpha_min_plateau => number(),
          strict => boolean()}.
%% Options of {@link discover/2}: `statistic', `symmetrise', `linkage', `alpha',
%% `outliers', `outlier_factor', `alpha_range', `alpha_steps', `alpha_min_plateau', `strict'
%% (each documented in docs/TOPOLOGY_DISCOVERY.md).
%% <ul>
%% <li>`statistic' — matrix of latency.json to cluster (default min)</li>
%% <li>`symmetrise' — combine a→b with b→a (default min)</li>
%% <li>`linkage' — average (default), complete or single</li>
%% <li>`alpha' — auto (default, per level) or a fixed α ≥ 1</li>
%% <li>`outliers' — repair outliers first (default) or not</li>
%% <li>`outlier_factor' — > 1: a round trip above this many times its level's median is an outlier
%%     (default 3)</li>
%% <li>`alpha_range' — α grid of auto (default {1, 4})</li>
%% <li>`alpha_steps' — grid values of auto, ≥ 2 (default 31)</li>
%% <li>`alpha_min_plateau' — > 1: auto keeps a level only if its partition holds while α grows this
%%     much (default 1.2)</li>
%% <li>`strict' — with auto α, add the strict groups: sets whose every round trip inside is 25%
%%     (and twice the noise) shorter than every round trip leaving them (default true)</li>
%% </ul>

-type discovery() :: #{topology := topology_tree(),
                       nodes := [node()],
                       options := discovery_options(),
                       levels => [terrain_alpha:level()],
                       single_alpha => {float(), float()} | none,
                       strict_groups => non_neg_integer(),
                       noise => number(),
                       missing => non_neg_integer(),
                       undetermined => [node()],
                       repaired := non_neg_integer(),
                       pairs := non_neg_integer()}.
%% What {@link discover/2} found: the tree under `topology' (load it with
%% {@link load_topology/1}), the α of each level under `levels', the number of
%% round trips `repaired' out of `pairs'; for a matrix with pairs measured in neither
%% direction, how many were `missing' (estimated from the measured ones) and the
%% `undetermined' nodes, whose place no measured round trip supports; with automatic α,
%% how many `strict_groups' became networks besides the α rule's, and the `noise' (µs)
%% they had to stand out by.

-type comparison() ::
        #{levels := [#{level := pos_integer(),
                       truth_clusters := pos_integer(),
                       found_clusters := pos_integer(),
                       ari := float()}],
          clade_recall := float(),
          clade_precision := float(),
          truth_clades := non_neg_integer(),
          found_clades := non_neg_integer(),
          common_clades := non_neg_integer(),
          nodes := non_neg_integer()}.
%% What {@link compare_topologies/2} reports: per-level adjusted Rand index, clade
%% recall and precision.
%% <ul>
%% <li>`levels' — depth in the true tree</li>
%% </ul>

-type insert_options() ::
        #{representatives => pos_integer(),
          confirm => non_neg_integer(),
          gap => number(),
          levels => [number(), ...],
          noise => number(),
          retries => non_neg_integer(),
          attempts => pos_integer(),
          name => term(),
          seed => integer(),
          known => fun((node(), node()) -> number() | undefined)}.
%% Options of {@link insert_node/4}:
%% <ul>
%% <li>`representatives' — members measured per child subtree at each level; the
%%     smallest round trip counts (default 1);</li>
%% <li>`confirm' — confirmation pairs after the placement, one per ancestor network
%%     from the lowest up (default 2);</li>
%% <li>`known' — the round trips the caller holds between nodes of the tree
%%     (`undefined' when none): a node's twin shares its round trips to every other
%%     node, so the node children of a network with a level below it are measured in
%%     the order of how well their round trips match the node's (its latency profile),
%%     and a twin is usually found first (default: random order);</li>
%% <li>`levels' — the level model: the typical round trip of each level (default: the
%%     tree's own, {@link topology_levels/1}); a round trip below the geometric mean of
%%     a network's level and the level under it lies inside a child, one above the
%%     geometric mean with the level over it outside the network
%%     (docs/TOPOLOGY_DISCOVERY.md, "The level model"). A flat group (a network with
%%     no level below it) is sampled: 2 of its node children with `levels' given (a
%%     model the caller measured), 4 with the tree's own;</li>
%% <li>`noise' — the jitter of one measurement, µs (default 0): levels of the model
%%     whose round trips differ by less than twice the noise are one level, and a
%%     band reaches at least twice the noise from its network's height (the tree
%%     probe passes the median over its seed pairs of their exchanges' median minus
%%     minimum); it never widens a band beyond √10 of its level;</li>
%% <li>`gap' — overrides the model: every two adjacent levels this ratio apart, > 1
%%     (e.g. 10): a round trip below height/√gap lies inside a child, one above
%%     height·√gap outside the network;</li>
%% <li>`retries' — new descents, each with one more representative, after a
%%     confirmation contradicts the placement (default 2);</li>
%% <li>`attempts' — members tried per child when measurements fail (default 3);</li>
%% <li>`name' — the name of the network the insertion creates, if it creates one
%%     (default: the node);</li>
%% <li>`seed' — seed of the random choice of representatives (default: from the
%%     node's name, so the same call measures the same pairs).</li>
%% </ul>

-type measure() :: fun((A :: node(), B :: node()) -> {ok, RoundTripMicroseconds :: number()} | {error, term()}).
%% Measures one round trip between two nodes for {@link insert_node/4}.

-type measured_pair() :: {A :: node(), B :: node(), RoundTripMicroseconds :: number()}.
%% A round trip {@link insert_node/4} measured, `A' being the inserted node.

-type duration_model() :: #{location := float(), scale := float(), shape := float(),
                            tail := float(), side := upper | lower | both}.
%% A loaded GEV model of durations: `location', `scale', `shape' (ξ), `tail', `side'.

-type duration_model_options() ::
        #{name => atom(),
          tail => float(),
          side => upper | lower | both}.
%% Options of {@link load_duration_model/2}:
%% <ul>
%% <li>`name' — the model's name (default `default');</li>
%% <li>`tail' — a duration is unlikely when its tail probability is below this
%%     (0 &lt; tail &lt; 0.5, default 0.001);</li>
%% <li>`side' — which tail counts: `upper' (default), `lower' or `both'.</li>
%% </ul>

-define(DEFAULT_TIMEOUT, 1000).

%%====================================================================
%% API: general

%% @doc The version of the `terrain' application.
-spec version() -> string().
version() ->
    _ = application:load(terrain),
    {ok, Vsn} = application:get_key(terrain, vsn),
    Vsn.

%%====================================================================
%% API: attributes

%% @doc The value of one of this node's attributes, read in the caller; `undefined'
%% if the node has no such attribute (or the application is not running).
-spec attr(Name :: attr_name()) -> term().
attr(Name) when is_atom(Name) ->
    try terrain_attr_server:lookup(Name)
    catch error:badarg -> undefined
    end.

%% @equiv set_attr(Name, Value, #{})
-spec set_attr(Name :: attr_name(), Value :: term()) -> ok | {error, term()}.
set_attr(Name, Value) ->
    set_attr(Name, Value, #{}).

%% @doc Sets an attribute of this node at run time. The value is a plain term (kinds
%% are for the configuration) and hides a configured attribute of the same name until
%% it is deleted or its owner dies.
-spec set_attr(Name :: attr_name(), Value :: term(), Opts :: set_options()) -> ok | {error, term()}.
set_attr(Name, Value, Opts) ->
    maybe_run([fun() -> terrain_attr_config:check_name(Name) end,
               fun() -> terrain_attr_config:check_value_size(Name, Value) end,
               fun() -> check_options(Opts, #{owner => fun(P) -> is_pid(P) orelse P =:= persistent end}) end],
              fun() ->
                      Owner = maps:get(owner, Opts, self()),
                      call_server(fun() -> terrain_attr_server:set(Name, Value, Owner) end)
              end).

%% @doc Deletes an attribute of this node. Deleting a run-time value uncovers the
%% configured definition of that name, if there is one; deleting a configured
%% attribute removes it until the configuration is loaded again.
-spec delete_attr(Name :: attr_name()) -> ok | {error, term()}.
delete_attr(Name) ->
    maybe_run([fun() -> terrain_attr_config:check_name(Name) end],
              fun() -> call_server(fun() -> terrain_attr_server:delete(Name) end) end).

%% @doc Loads an attribute configuration file into this node, all or nothing. Its
%% definitions replace configured ones of the same name. Errors are
%% `{config, File, Where, Why}'; see {@link format_error/1}.
-spec load_attrs(File :: file:filename_all()) -> ok | {error, term()}.
load_attrs(File) ->
    case terrain_attr_config:parse_file(File) of
        {ok, Entries} ->
            Evaluated = terrain_attr_config:evaluate_automatic(Entries),
            call_server(fun() -> terrain_attr_server:install(Evaluated) end);
        {error, _} = Error ->
            Error
    end.

%% @equiv attrs(Nodes, Names, #{})
-spec attrs(Nodes :: [node()], Names :: [attr_name()] | all) -> #{node() => attr_result()} | {error, term()}.
attrs(Nodes, Names) ->
    attrs(Nodes, Names, #{}).

%% @doc Asks Nodes for the values of Names (or `all' their attributes) in parallel,
%% under one deadline for the whole call. Never raises for remote failures.
-spec attrs(Nodes :: [node()], Names :: [attr_name()] | all, Opts :: query_options()) ->
          #{node() => attr_result()} | {error, term()}.
attrs(Nodes, Names, Opts) ->
    maybe_run([fun() -> terrain_choose:check_nodes(Nodes) end,
               fun() -> check_names(Names) end,
               fun() -> check_options(Opts, query_checks()) end],
              fun() ->
                      terrain_attr_query:fetch(Nodes, Names, maps:get(timeout, Opts, ?DEFAULT_TIMEOUT),
                                               maps:get(max_age, Opts, 0))
              end).

%% @doc Push mode: asks each of Nodes to send this node the values of Names every
%% IntervalMs (only those that changed; an empty message refreshes the others). The
%% values land in this node's cache, where {@link attrs/3} and {@link choose_nodes/3}
%% use them when their `max_age' allows (use a `max_age' above the interval). The
%% subscription belongs to the caller and ends when it dies or calls
%% {@link unsubscribe/1}; nodes that go away are asked again when they come back.
-spec subscribe(Nodes :: [node()], Names :: [attr_name()], IntervalMs :: pos_integer()) ->
          {ok, reference()} | {error, term()}.
subscribe(Nodes, Names, IntervalMs) ->
    maybe_run([fun() -> terrain_choose:check_nodes(Nodes) end,
               fun() -> case Names of [] -> {error, {bad_names, Names}}; all -> {error, {bad_names, all}}; _ -> check_names(Names) end end,
               fun() -> check_options(#{interval => IntervalMs},
                                      #{interval => fun(I) -> is_integer(I) andalso I >= 10 andalso I =< 3600000 end}) end],
              fun() ->
                      call_server(fun() ->
                                          terrain_attr_cache:subscribe([N || N <- Nodes, N =/= node()], Names,
                                                                       IntervalMs, self())
                                  end)
              end).

%% @doc Subscribes the caller to the changes of the live topology: for every version
%% this node takes, a message `{terrain_topology, Ref, #{version := V, change :=
%% Change, topology := Tree}}', Change being `{join, Node, Siblings, PairsMeasured}',
%% `{leave, Node}', `{move, Node, FromSiblings, ToSiblings}' or `{sync, Version}' (a
%% state adopted after a partition or a new sequencer). `{error, not_live}' when the
%% node runs without a live topology (app env key `live'; docs/DISTANCES.md).
%% Option `pid': the process the messages go to instead of the caller, also on
%% another node (a program that watches the cluster from outside it calls this
%% function on a member with erpc); the subscription ends when that process does.
-spec subscribe(topology, Opts :: #{pid => pid()}) -> {ok, reference()} | {error, term()}.
subscribe(topology, Opts) ->
    maybe_run([fun() -> check_options(Opts, #{pid => fun erlang:is_pid/1}) end],
              fun() -> call_server(fun() -> terrain_live:subscribe(maps:get(pid, Opts, self())) end) end).

%% @doc Ends a subscription made by {@link subscribe/3} or {@link subscribe/2}.
-spec unsubscribe(Ref :: reference()) -> ok.
unsubscribe(Ref) when is_reference(Ref) ->
    case call_server(fun() -> terrain_live:unsubscribe(Ref) end) of
        ok -> ok;
        _ ->
            case call_server(fun() -> terrain_attr_cache:unsubscribe(Ref) end) of
                ok -> ok;
                {error, not_running} -> ok
            end
    end.

%% @doc Counters of this node's attribute traffic since the application started:
%% requests served and malformed messages dropped (`malformed_dropped'), remote write
%% attempts refused, dynamic attributes that timed out or crashed, queries made, node
%% requests sent, cache hits, backoff skips, failures by kind, pushes sent and received,
%% subscriptions refused, and failures of attributes not logged because their cause was
%% logged before (`reports_not_logged'). Remote writes include topology replacements.
-spec stats() -> #{atom() => non_neg_integer()}.
stats() ->
    terrain_attr_table:counters().

%%====================================================================
%% API: selection

%% @equiv choose_nodes(Candidates, Preds, #{})
-spec choose_nodes(Candidates :: candidates(), Preds :: predicate() | [predicate()]) ->
          [node()] | {error, term()}.
choose_nodes(Candidates, Preds) ->
    choose_nodes(Candidates, Preds, #{}).

%% @doc The candidates that satisfy every predicate, in the candidates' order (or
%% `order_by'). Attributes are fetched once, from all candidates in parallel, under
%% one deadline; candidates that cannot be asked are left out (and listed by
%% `explain'). With `explain => true' an empty result is `{[], Explanation}'; with
%% `relax => true' the result is `{Nodes, DroppedPredicates}'.
-spec choose_nodes(Candidates :: candidates(), Preds :: predicate() | [predicate()],
                   Opts :: choose_options()) ->
          [node()] | {[node()], explanation()} | {[node()], [predicate()]} | {error, term()}.
choose_nodes(Candidates, Preds, Opts) ->
    maybe_run([fun() -> terrain_select:validate(Preds) end,
               fun() -> check_options(Opts, choose_checks()) end],
              fun() -> terrain_choose:nodes(Candidates, Preds, Opts) end).

%% @doc One node that satisfies the predicates, picked by `pick' (default `random');
%% `{error, none}' if none does.
-spec choose_node(Candidates :: candidates(), Preds :: predicate() | [predicate()],
                  Opts :: choose_node_options()) -> {ok, node()} | {error, term()}.
choose_node(Candidates, Preds, Opts) ->
    maybe_run([fun() -> terrain_select:validate(Preds) end,
               fun() -> check_options(Opts, maps:merge(maps:without([explain, count], choose_checks()),
                                                       #{pick => fun(P) -> lists:member(P, [random, first, least_loaded, round_robin]) end,
                                                         load_attr => fun is_atom/1})) end],
              fun() -> terrain_choose:node(Candidates, Preds, Opts) end).

%% @doc Renders the explanation that `choose_nodes(..., #{explain => true})' returns
%% for an empty result.
-spec format_explanation(Explanation :: explanation()) -> iolist().
format_explanation(#{shared := _} = Shortfall) ->
    terrain_spread:format_shortfall(Shortfall);
format_explanation(Explanation) ->
    terrain_select:format_explanation(Explanation).

%%====================================================================
%% API: topology and placement

%% @doc Replaces this node's topology: a file in any format `terrain topology'
%% writes that holds the whole tree — one topology term, or a `terrain.topology/1'
%% JSON document — or the term itself (docs/DISTANCES.md). The topology is validated
%% first; a bad one is refused with a sentence and the current one stays.
-spec load_topology(FileOrTerm :: file:filename() | topology_tree()) -> ok | {error, term()}.
load_topology(File) when is_list(File); is_binary(File) ->
    store_topology(terrain_topology:read(File));
load_topology(Tree) ->
    store_topology(terrain_topology:new(Tree)).

%% @doc Validates a topology term without loading it: `ok', or the sentence-ready
%% reason {@link load_topology/1} would refuse it with.
-spec check_topology(Tree :: topology_tree()) -> ok | {error, term()}.
check_topology(Tree) ->
    case terrain_topology:new(Tree) of
        {ok, _} -> ok;
        {error, _} = Error -> Error
    end.

%% @doc Renders a topology term, or the topology a {@link discover/2} found, in a
%% format (for a discovery, `json' adds how the tree was found).
-spec render_topology(TreeOrDiscovery :: topology_tree() | discovery(), Format :: topology_format()) ->
          {ok, iodata()} | {error, term()}.
render_topology(#{topology := _} = Discovery, Format) ->
    {ok, terrain_discovery:render(Discovery, Format)};
render_topology(Tree, Format) ->
    case terrain_topology:new(Tree) of
        {ok, T} -> {ok, terrain_topology:render(T, Format)};
        {error, _} = Error -> Error
    end.

%% @doc The current topology term, or `undefined' when none is loaded.
-spec topology() -> topology_tree() | undefined.
topology() ->
    case terrain_topology_server:current() of
        undefined -> undefined;
        T -> terrain_topology:term(T)
    end.

%% @doc The live topology on this node: `disabled' (the app env key `live' is not
%% set), or the version of the tree it holds with the tree's digest (a hash: two
%% nodes at one version with different digests hold different trees), the sequencer
%% (the member with the smallest name, which orders every change), the members, and
%% the nodes that left and are waiting out the grace period before they are removed.
-spec live_status() -> disabled | #{version := non_neg_integer(), digest := non_neg_integer(), sequencer := node(),
                                   members := [node()], leaving := [node()]} | {error, not_running}.
live_status() ->
    call_server(fun() -> terrain_live:status() end).

%% @doc The communication distance between two nodes under the current topology:
%% RELEASE D3.5's ultrametric 2^−ℓ (§4.2), or the measured height of their lowest common network.
%% A node missing from the topology (or every other node, without a topology) is
%% `anywhere': beyond every distance in the tree.
-spec distance(A :: node(), B :: node()) -> number().
distance(A, B) ->
    terrain_choose:topology_distance(terrain_topology_server:current(), A, B).

%% @doc The distance between two nodes as a level: `same_node', `very_near', `near',
%% `far', `very_far' or `anywhere' (relative to the tree's depth; docs/DISTANCES.md).
-spec level(A :: node(), B :: node()) -> level().
level(A, B) ->
    terrain_choose:topology_level(terrain_topology_server:current(), A, B).

%% @doc The levels, nearest first: `[same_node, very_near, near, far, very_far,
%% anywhere]'. The predicate `{level, Op, Level}' compares levels in this order; a
%% program that ranks levels itself takes the order from here.
-spec levels() -> [level(), ...].
levels() ->
    terrain_topology:levels().

%% @doc The closed disc D(Node, R): the nodes of the topology at distance at most R
%% from Node (Node itself included).
-spec disc(Node :: node(), R :: number()) -> [node()].
disc(Node, R) ->
    case terrain_topology_server:current() of
        undefined -> [Node];
        T -> terrain_topology:disc(T, Node, R)
    end.

%% @doc Spawns `Fun' (or `{M, F, A}') on a node chosen by the predicates. A chosen
%% node that cannot take the process is left out and another is chosen, up to
%% `attempts' times. Returns the process and its node (and the monitor reference with
%% `monitor => true'), or `{error, {no_node, Why}}'.
-spec spawn_on(Preds :: predicate() | [predicate()], What :: fun(() -> term()) | {module(), atom(), [term()]},
               Opts :: spawn_options()) ->
          {ok, pid(), node()} | {ok, pid(), node(), reference()} | {error, term()}.
spawn_on(Preds, What, Opts) ->
    Checks = (query_checks())#{candidates => fun(_) -> true end,
                               pick => fun(P) -> lists:member(P, [random, first, least_loaded, round_robin]) end,
                               link => fun is_boolean/1,
                               monitor => fun is_boolean/1,
                               attempts => fun(N) -> is_integer(N) andalso N > 0 end},
    maybe_run([fun() -> terrain_select:validate(Preds) end,
               fun() -> check_options(Opts, Checks) end,
               fun() -> terrain_spawn:check_spawnable(What) end],
              fun() -> terrain_spawn:spawn_on(Preds, What, Opts) end).

%% @doc Places the vertices of a process tree on nodes so that children sit near
%% their parents and no root-to-leaf path crosses more than one slow link where the
%% topology allows it (RELEASE D3.5, §4.6). Returns the assignment, its cost (sum and
%% maximum over root-to-leaf paths of the edge distances, and the most slow edges on
%% one path) and the average cost of random placements for comparison. Spawning is
%% left to the caller (e.g. with `spawn_on(..., #{candidates => [Node]})').
-spec place_tree(ProcessTree :: process_tree(), Opts :: place_options()) ->
          {ok, #{assignment := #{term() => node()}, cost := map(), random := map()}} | {error, term()}.
place_tree(ProcessTree, Opts) ->
    Checks = (query_checks())#{candidates => fun(_) -> true end,
                               capacity => fun(C) -> is_integer(C) andalso C > 0 end,
                               random_rounds => fun(R) -> is_integer(R) andalso R > 0 end},
    maybe_run([fun() -> terrain_place:check_tree(ProcessTree) end,
               fun() -> check_options(Opts, Checks) end],
              fun() ->
                      case {terrain_topology_server:current(), terrain_choose:resolve_candidates(maps:get(candidates, Opts, all))} of
                          {undefined, _} ->
                              {error, no_topology};
                          {_, {error, _} = Error} ->
                              Error;
                          {Topology, {ok, Candidates}} ->
                              terrain_place:place_tree(ProcessTree, Topology, terrain_choose:dedup(Candidates), Opts)
                      end
              end).

%%====================================================================
%% API: placed groups

%% @doc Starts a placed group on this node: `count' processes started by `start' on
%% nodes that satisfy `preds', spread over `spread' (docs/DISTANCES.md, "Placed
%% groups"). When a member's node dies (or is cut off) the member is started again
%% on a node chosen then, from the live topology and fresh attributes, keeping the
%% spread; when a member exits it is restarted the same way. State is not handed
%% over: a restarted member starts fresh. Returns once the members run (or after
%% `start_timeout'; members that could not be placed are retried every second).
-spec start_placed(Name :: term(), Spec :: placed_spec()) -> {ok, pid()} | {error, term()}.
start_placed(Name, Spec) ->
    Checks = #{start => fun({M, F, A}) -> is_atom(M) andalso is_atom(F) andalso is_list(A); (_) -> false end,
               count => fun(K) -> is_integer(K) andalso K > 0 end,
               preds => fun(P) -> terrain_select:validate(P) =:= ok end,
               spread => fun terrain_topology:check_spread/1,
               candidates => fun(C) -> C =:= all orelse terrain_choose:check_nodes(C) =:= ok
                                           orelse (is_tuple(C) andalso tuple_size(C) =:= 3
                                                   andalso element(1, C) =:= group andalso is_atom(element(2, C)))
                             end,
               rebalance => fun(R) -> R =:= false orelse (is_integer(R) andalso R >= 100) end,
               max_restarts => fun(R) -> is_integer(R) andalso R >= 0 end,
               start_timeout => fun(T) -> is_integer(T) andalso T > 0 end,
               timeout => fun(T) -> is_integer(T) andalso T > 0 end},
    maybe_run([fun() -> required(Spec, [start, count]) end,
               fun() -> check_options(Spec, Checks) end],
              fun() -> call_server(fun() -> terrain_placed:start(Name, Spec) end) end).

%% @doc The running members of a placed group: `[{Pid, Node}]', read in the caller.
-spec placed(Name :: term()) -> [{pid(), node()}] | {error, {no_group, term()}}.
placed(Name) ->
    terrain_placed:members(Name).

%% @doc The placed groups started on this node, each with its members, their nodes and
%% failure domains, and its restarts (`placed_group()'); a group that does not answer
%% within a second (stopping) is left out. A dashboard asks every node.
-spec placed_groups() -> [placed_group()].
placed_groups() ->
    terrain_placed:groups(1000).

%% @doc Stops a placed group and its members.
-spec stop_placed(Name :: term()) -> ok | {error, {no_group, term()}}.
stop_placed(Name) ->
    terrain_placed:stop(Name).

%%====================================================================
%% API: topology discovery

%% @doc Reads a `latency.json' file (format `terrain.latency/1', as `terrain probe'
%% writes it).
-spec read_latency(File :: file:filename()) -> {ok, latency()} | {error, term()}.
read_latency(File) ->
    terrain_discovery:read_latency(File).

%% @doc Discovers the communication hierarchy of a latency matrix: the non-binary
%% clustering with threshold α of RELEASE D3.5, §4.3–4.5, α chosen per level and
%% outlying round trips repaired unless the options say otherwise
%% (docs/TOPOLOGY_DISCOVERY.md).
-spec discover(Latency :: latency(), Opts :: discovery_options()) -> {ok, discovery()} | {error, term()}.
discover(Latency, Opts) ->
    terrain_discovery:discover(Latency, Opts).

%% @doc How well a found topology matches a true one: per level of the truth, the
%% adjusted Rand index of the two partitions at that depth; clade recall and
%% precision. Heights and names are not compared; both trees must have the same nodes.
-spec compare_topologies(Found :: topology_tree(), Truth :: topology_tree()) -> {ok, comparison()} | {error, term()}.
compare_topologies(Found, Truth) ->
    terrain_tree_compare:compare(Found, Truth).

%% @doc Places one node into a known topology by measuring it against a few
%% representatives of each subtree, level by level from the root, then confirming
%% the placement with a few more pairs (docs/TOPOLOGY_DISCOVERY.md, "Tree-guided
%% probing"). `Tree' needs a measured height on every network (µs of round trip, as
%% `terrain topology' and `terrain probe --strategy tree' write them); `Measure' is
%% called for every round trip, so the function is pure given it. Returns the new
%% tree and the round trips measured (failed measurements left out).
%% ```
%% Measure = fun(A, B) -> {ok, Us} = my_probe(A, B), {ok, Us} end,
%% {ok, Tree1, Pairs} = terrain:insert_node(new@host, Tree0, Measure, #{confirm => 2}).
%% '''
-spec insert_node(Node :: node(), Tree :: topology_tree(), Measure :: measure(), Opts :: insert_options()) ->
          {ok, NewTree :: topology_tree(), Pairs :: [measured_pair()]} | {error, term()}.
insert_node(Node, Tree, Measure, Opts) ->
    terrain_insert:insert(Node, Tree, Measure, Opts).

%% @doc Takes a node out of a topology tree: a network left with one child is replaced
%% by that child, an empty one goes; heights stay. The inverse of {@link insert_node/4}
%% for a node that leaves or must be placed again.
-spec remove_node(Node :: node(), Tree :: topology_tree()) -> {ok, topology_tree()} | {error, term()}.
remove_node(Node, Tree) ->
    terrain_insert:remove(Node, Tree).

%% @doc The level model of a tree with heights: the typical round trip of each level,
%% ascending (a network's level is one more than its highest child network's; a level's
%% round trip is the median height of its networks; levels closer than 1.3x are one).
%% {@link insert_node/4} uses it when given neither `gap' nor `levels'
%% (docs/TOPOLOGY_DISCOVERY.md, "The level model").
-spec topology_levels(Tree :: topology_tree()) -> [float()].
topology_levels(Tree) ->
    terrain_insert:levels(Tree).

%% @doc The band of round trips that belong to the level of a network of height `H'
%% under the level model `Levels': below `Lo' a round trip lies inside one of its
%% children, above `Hi' outside it.
-spec level_bounds(H :: number(), Levels :: [number()]) -> {Lo :: float(), Hi :: float()}.
level_bounds(H, Levels) ->
    terrain_insert:bounds(H, Levels).

%% @doc {@link level_bounds/2} with a noise floor: `Noise' is the jitter of one
%% measurement (µs); levels closer than twice the noise are one, and the band reaches
%% at least twice the noise from `H' (the insertion option `noise').
-spec level_bounds(H :: number(), Levels :: [number()], Noise :: number()) -> {Lo :: float(), Hi :: float()}.
level_bounds(H, Levels, Noise) ->
    terrain_insert:bounds(H, Levels, Noise).

%%====================================================================
%% API: variability of durations

%% @equiv load_duration_model(Fit, #{})
-spec load_duration_model(Fit :: file:filename() | binary() | map()) -> ok | {error, term()}.
load_duration_model(Fit) ->
    terrain_variability:load(Fit, #{}).

%% @doc Loads a GEV model of durations (extreme-value statistics, Henwood et al.):
%% a `fit.json' (format `terrain.gev/1') that `terrain-analysis gev' wrote, its
%% decoded map, or `#{location, scale, shape}'. The model is kept in
%% `persistent_term' under its name, so {@link check_duration/2} is a lookup in the
%% caller (docs/GEV.md).
-spec load_duration_model(Fit :: file:filename() | binary() | map(), Opts :: duration_model_options()) ->
          ok | {error, term()}.
load_duration_model(Fit, Opts) ->
    terrain_variability:load(Fit, Opts).

%% @equiv check_duration(default, Duration)
-spec check_duration(Duration :: number()) -> {ok, float()} | {unlikely, float()}.
check_duration(Duration) ->
    terrain_variability:check(Duration).

%% @doc Is this duration unlikely under the named model? `{unlikely, P}' when its
%% tail probability P is below the model's `tail', else `{ok, P}'. Raises
%% `{no_model, Name}' when no model of that name is loaded.
-spec check_duration(Name :: atom(), Duration :: number()) -> {ok, float()} | {unlikely, float()}.
check_duration(Name, Duration) ->
    terrain_variability:check(Name, Duration).

%% @doc The loaded model of that name, or `undefined'.
-spec duration_model(Name :: atom()) -> duration_model() | undefined.
duration_model(Name) ->
    terrain_variability:model(Name).

%% @doc Forgets the model of that name.
-spec unload_duration_model(Name :: atom()) -> ok.
unload_duration_model(Name) ->
    terrain_variability:unload(Name).

%%====================================================================
%% API: errors

%% @doc Turns an `{error, Reason}' returned by this module into a sentence.
-spec format_error(Reason :: term()) -> iolist().
format_error({json, Where, Why}) ->
    io_lib:format("invalid JSON at byte ~b: ~s", [Where, Why]);
format_error({config, Source, Where, Why}) ->
    [io_lib:format("attribute configuration ~ts~ts: ", [source_text(Source), where_text(Where)]),
     config_why(Why)];
format_error({topology, _, _} = Reason) ->
    terrain_topology:format_error(Reason);
format_error({discovery, _} = Reason) ->
    terrain_discovery:format_error(Reason);
format_error({compare, _} = Reason) ->
    terrain_tree_compare:format_error(Reason);
format_error({insert, _} = Reason) ->
    terrain_insert:format_error(Reason);
format_error({variability, _} = Reason) ->
    terrain_variability:format_error(Reason);
format_error(no_topology) ->
    "no topology is loaded on this node (terrain:load_topology/1 or the app env key topology)";
format_error({no_node, {vertex, Name}}) ->
    io_lib:format("no candidate node can take process-tree vertex ~0tp (its predicates or the capacity exclude them all)", [Name]);
format_error({no_node, {tried, Failures}}) ->
    io_lib:format("every chosen node failed to take the process: ~ts",
                  [lists:join(", ", [io_lib:format("~0tp (~0tp)", [N, Why]) || {N, Why} <- Failures])]);
format_error({no_node, none}) ->
    "no node satisfies the predicates";
format_error({no_node, Other}) ->
    io_lib:format("no node to spawn on: ~ts", [format_error(Other)]);
format_error({bad_spawn, What}) ->
    io_lib:format("expected a fun of arity 0 or {Module, Function, Args}, got ~0tP", [What, 6]);
format_error({bad_process_tree, Why}) ->
    io_lib:format("bad process tree: ~ts", [Why]);
format_error({bad_predicate, P}) ->
    io_lib:format("malformed predicate: ~0tp (see the predicate list in docs/ATTRIBUTES.md)", [P]);
format_error({bad_option, _, _} = Reason) ->
    terrain_options:format_error(Reason);
format_error({no_group, Name}) ->
    io_lib:format("no placed group ~0tp is running on this node", [Name]);
format_error({already_started, Pid}) ->
    io_lib:format("a placed group of that name is already running (~0p)", [Pid]);
format_error({Tag, _} = Reason) when Tag =:= missing_option; Tag =:= unknown_option; Tag =:= bad_options ->
    terrain_options:format_error(Reason);
format_error({bad_nodes, Nodes}) ->
    io_lib:format("expected a list of node names, got ~0tp", [Nodes]);
format_error({bad_names, Names}) ->
    io_lib:format("expected a list of attribute names (atoms), got ~0tp", [Names]);
format_error({bad_name, Name}) ->
    io_lib:format("attribute names are atoms, got ~0tp", [Name]);
format_error({reserved_name, Name}) ->
    io_lib:format("~0tp is reserved by the predicate language and cannot name an attribute", [Name]);
format_error({too_large, Name, Bytes, Limit}) ->
    io_lib:format("the value of ~0tp is ~b bytes in external format; the limit is ~b", [Name, Bytes, Limit]);
format_error({bad_candidates, C}) ->
    io_lib:format("candidates must be a list of nodes, all, or {group, Scope, Group}; got ~0tp", [C]);
format_error({no_scope, Scope}) ->
    io_lib:format("no pg scope ~0tp is running on this node", [Scope]);
format_error(none) ->
    "no node satisfies the predicates";
format_error(not_live) ->
    "this node runs without a live topology (set the terrain app env key live, or terrain up --live)";
format_error(not_running) ->
    "the terrain application is not running (on that node)";
format_error(timeout) ->
    "no answer before the deadline";
format_error(noconnection) ->
    "no connection to the node";
format_error(not_local) ->
    "only local processes may change attributes";
format_error(Reason) ->
    io_lib:format("~0tp", [Reason]).

%%====================================================================
%% Internal: topology

store_topology({ok, Topology}) ->
    try terrain_topology_server:put(Topology)
    catch exit:{noproc, _} -> {error, not_running}
    end;
store_topology({error, _} = Error) ->
    Error.

%%====================================================================
%% Internal: validation at the boundary

maybe_run([], Run) ->
    Run();
maybe_run([Check | Checks], Run) ->
    case Check() of
        ok -> maybe_run(Checks, Run);
        {error, _} = Error -> Error
    end.

check_options(Opts, Checks) ->
    terrain_options:check(Opts, Checks).

required(Opts, Keys) ->
    terrain_options:required(Opts, Keys).

query_checks() ->
    #{timeout => fun(T) -> is_integer(T) andalso T >= 0 end,
      max_age => fun(A) -> A =:= infinity orelse (is_integer(A) andalso A >= 0) end}.

choose_checks() ->
    (query_checks())#{order_by => fun({A, D}) -> is_atom(A) andalso (D =:= asc orelse D =:= desc);
                                     (distance) -> true;
                                     (_) -> false
                                  end,
                      explain => fun is_boolean/1,
                      relax => fun is_boolean/1,
                      count => fun(K) -> is_integer(K) andalso K > 0 end,
                      spread => fun terrain_topology:check_spread/1,
                      occupied => fun(Ns) -> terrain_choose:check_nodes(Ns) =:= ok end}.

check_names(all) ->
    ok;
check_names(Names) when is_list(Names) ->
    try lists:all(fun erlang:is_atom/1, Names) of
        true -> ok;
        false -> {error, {bad_names, Names}}
    catch
        error:badarg -> {error, {bad_names, Names}}
    end;
check_names(Names) ->
    {error, {bad_names, Names}}.

%% Calls into a local server of the application; `{error, not_running}' when the
%% application is not started.
call_server(Call) ->
    try Call()
    catch exit:{noproc, _} -> {error, not_running}
    end.

%%====================================================================
%% Internal: error text

source_text({application_env, App, Key}) ->
    io_lib:format("in application environment ~0p/~0p", [App, Key]);
source_text(File) ->
    io_lib:format("~ts", [File]).

where_text(file) -> "";
where_text({line, Line}) -> io_lib:format(", line ~b", [Line]);
where_text({entry, N}) -> io_lib:format(", entry ~b", [N]).

config_why({file, Posix}) ->
    io_lib:format("cannot read the file: ~ts", [file:format_error(Posix)]);
config_why({file_too_large, Bytes, Limit}) ->
    io_lib:format("the file is ~b bytes; the limit is ~b", [Bytes, Limit]);
config_why({too_many, Count, Limit}) ->
    io_lib:format("~b entries; the limit is ~b", [Count, Limit]);
config_why({syntax, Message}) ->
    io_lib:format("syntax error: ~ts", [Message]);
config_why(not_a_list) ->
    "expected one list of attributes, or attribute tuples each followed by a full stop";
config_why({bad_entry, Term}) ->
    io_lib:format("expected {Name, Definition}, got ~0tP", [Term, 12]);
config_why({bad_name, Name}) ->
    io_lib:format("attribute names are atoms, got ~0tP", [Name, 12]);
config_why({reserved_name, Name}) ->
    io_lib:format("~0tp is reserved by the predicate language and cannot name an attribute", [Name]);
config_why({duplicate, Name}) ->
    io_lib:format("attribute ~0tp is defined more than once", [Name]);
config_why({bad_definition, Name, Spec, Detail}) ->
    io_lib:format("bad definition of ~0tp: ~0tP (~ts)", [Name, Spec, 12, Detail]);
config_why({unknown_kind, Name, Kind}) ->
    io_lib:format("unknown kind ~0tp for attribute ~0tp; the kinds are static, dynamic, automatic "
                  "and sampled (write {static, Term} for a literal tuple)", [Kind, Name]);
config_why({undefined_function, Name, {M, F, A}}) ->
    io_lib:format("attribute ~0tp names ~0tp:~0tp/~b, which does not exist", [Name, M, F, A]);
config_why({too_large, Name, Bytes, Limit}) ->
    io_lib:format("the value of ~0tp is ~b bytes in external format; the limit is ~b", [Name, Bytes, Limit]);
config_why(Other) ->
    io_lib:format("~0tp", [Other]).
