%% @private
%% @doc `terrain topology': discover a topology from a latency matrix, compare two
%% topologies, show one.
%%
%% ```
%% terrain topology MATRIX.json [--linkage average|complete|single] [--alpha auto|X]
%%                  [--statistic min|median|mean|p95] [--symmetrise min|mean|max]
%%                  [--outliers repair|keep] [--format term|json|dot|newick|text] [--out FILE]
%% terrain topology compare FOUND TRUTH [--prefix P]
%% terrain topology show FILE [--format ...]
%% terrain topology simulate (--shape 10x10x10x10 [--latencies 15000,1500,150,15] | --spec FILE)
%%                  [--noise F] [--outliers F] [--seed N] [--json]
%% '''
%% The first argument chooses: `compare', `show', or else the file to cluster (a
%% matrix file named `compare' or `show' can be given as `./compare').
%%
%% Discovery writes the topology to `--out' (stdout without it) in `--format'; without
%% `--format' the format follows the extension of `--out' (`.json', `.dot'/`.gv',
%% `.nwk'/`.newick', `.txt') and is otherwise `term', the Erlang term that
%% `terrain:load_topology/1' reads. How the tree was found (the α of each level, the
%% outliers repaired) goes to stderr.
%%
%% `compare' prints, for every level of TRUTH, the adjusted Rand index of the two
%% trees' partitions at that depth, then clade recall and precision. FOUND and TRUTH
%% are topology files (Erlang term or `terrain.topology/1' JSON); TRUTH may also be a
%% cluster spec, whose groups are the true tree; its node names are then matched with
%% the local part of FOUND's node names (before `@') after removing `--prefix'.
%%
%% `simulate' runs the tree probe of `terrain probe --strategy tree' against a latency
%% model (terrain_lab_simulate) and scores the tree it finds against the model's:
%% a summary on stdout, or with `--json' one object (`nodes', `pairs_measured',
%% `pairs_total', `clade_recall', `clade_precision', `seconds', …).
-module(terrain_lab_cmd_topology).

-include_lib("terrain_json/include/terrain_formats.hrl").

%% API (command table and CLI handler)
-export([commands/0,
         run/3]).

%% exports_not_used: commands/0 and the handlers are called through the command table.
-ignore_xref([{commands, 0}, {run, 3}]).

%% Internal exports (terrain_lab_cmd_topology_simulate, the simulate part)
-export([format_error/1,
         output_format/1,
         read_tree/1,
         emit/3]).


-define(FORMATS, [term, json, dot, newick, text]).
%% simulate: a noise sigma up to 10 (the jitter exp(sigma Z) and the inflated round
%% trips stay finite); its other bounds are in terrain_lab_cmd_topology_simulate.
-define(MAX_NOISE, 10).
%% A topology file (term, JSON or spec) is at most this large.
-define(MAX_TOPOLOGY_BYTES, 16 * 1024 * 1024).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [command()].

-spec command() -> terrain_lab_cli:command().
command() ->
    #{name => "topology",
      summary => "Discover the topology of a latency matrix; compare or show topologies",
      usage => "MATRIX.json | compare FOUND TRUTH | show FILE | import slurm FILE|--scontrol | load FILE | simulate",
      description => "MATRIX.json (latency.json from 'terrain probe'): clusters the round trips with RELEASE D3.5's "
                     "non-binary alpha algorithm and writes the topology term (or --format) to --out or stdout; "
                     "without --format the format follows --out's extension (.json .dot .gv .nwk .newick .txt), "
                     "else term. --alpha auto chooses alpha per level (docs/TOPOLOGY_DISCOVERY.md); outliers "
                     "are repaired against a robust first pass unless --outliers keep. "
                     "compare FOUND TRUTH: per-level adjusted Rand index and clade recall of FOUND against "
                     "TRUTH (topology term or JSON files; TRUTH may be a cluster spec, matched by node name "
                     "without host and --prefix); with --format json or --out FILE.json the comparison as "
                     "terrain.topology_comparison/1 JSON (what terrain report renders). show FILE: renders a "
                     "topology file. import slurm FILE|--scontrol: the "
                     "switches of a SLURM topology.conf (or of the running cluster's 'scontrol show topology') as a "
                     "topology (one network per switch, its hosts as nodes), for compare and load_topology. load FILE: "
                     "terrain:load_topology/1 of a topology file on every node of the running cluster (what "
                     "distance placement then uses). "
                     "simulate: runs the tree probe ('terrain probe --strategy tree') against a latency model of "
                     "--shape (children per level, top-down) with --latencies (one way, us, per level) or of a "
                     "cluster --spec (its groups' latency), with --noise (lognormal jitter per measurement) and "
                     "--outliers (fraction of pairs inflated 3-20x), and scores the tree it finds against the "
                     "model's; --json prints one object.",
      args => {1, 3},
      options => [#{name => linkage, long => "linkage", type => string, default => "average",
                    choices => ["average", "complete", "single"], metavar => "average|complete|single",
                    help => "cluster distance"},
                  #{name => alpha, long => "alpha", type => string, default => "auto", metavar => "auto|X",
                    check => {fun alpha_text/1, "auto or a number >= 1"},
                    help => "threshold alpha >= 1, or auto (per level)"},
                  #{name => statistic, long => "statistic", type => string, default => "min",
                    choices => ["min", "median", "mean", "p95"], metavar => "min|median|mean|p95",
                    help => "per-pair statistic to cluster"},
                  #{name => symmetrise, long => "symmetrise", type => string, default => "min",
                    choices => ["min", "mean", "max"], metavar => "min|mean|max",
                    help => "how to combine a->b with b->a"},
                  #{name => outliers, long => "outliers", type => string, metavar => "repair|keep|F",
                    help => "repair (default) or keep round trips far from their level's median; "
                            "simulate: the fraction of pairs inflated 3-20x (default 0)"},
                  #{name => outlier_factor, long => "outlier-factor", type => float, default => 3.0,
                    check => {fun(F) -> F > 1 end, "a number > 1"}, metavar => "F",
                    help => "an outlier is more than F times its level's median away"},
                  #{name => format, long => "format", type => string,
                    choices => [atom_to_list(F) || F <- ?FORMATS], metavar => "term|json|dot|newick|text",
                    help => "output format (default: from --out's extension, else term; text for show)"},
                  #{name => out, long => "out", type => string, metavar => "FILE",
                    help => "write here instead of stdout"},
                  #{name => prefix, long => "prefix", type => string, default => "", metavar => "P",
                    help => "compare: node name prefix to drop when TRUTH is a cluster spec"},
                  #{name => shape, long => "shape", type => string, metavar => "AxBx...",
                    help => "simulate: children per level, top-down (10x10x10x10 is 10,000 nodes)"},
                  #{name => latencies, long => "latencies", type => string, metavar => "US,...",
                    help => "simulate: one-way latency per level of --shape in us, top-down "
                            "(default 15000, 1500, 150, ... dividing by 10)"},
                  #{name => spec, long => "spec", type => string, metavar => "FILE",
                    help => "simulate: a cluster spec as the model (its groups' latency)"},
                  #{name => noise, long => "noise", type => float, default => 0.1, metavar => "F",
                    range => {0, ?MAX_NOISE},
                    help => "simulate: sigma of the multiplicative (lognormal) jitter per measurement"},
                  #{name => seed, long => "seed", type => integer, default => 1, range => {0, inf}, metavar => "N",
                    help => "simulate: seed of every random draw"},
                  #{name => json, long => "json", type => flag, help => "simulate: print one JSON object"},
                  #{name => matrix, long => "matrix", type => string, metavar => "LATENCY.json",
                    help => "simulate: replay the tree probe against this measured matrix (terrain.latency/1)"},
                  #{name => truth, long => "truth", type => string, metavar => "TREE",
                    help => "simulate --matrix: score the found tree against this topology (term, JSON or spec)"},
                  terrain_lab_cli_options:state_dir(),
                  #{name => scontrol, long => "scontrol", type => flag,
                    help => "import slurm: read the running cluster's 'scontrol show topology' instead of a file"}],
      run => {?MODULE, run}}.

%% @doc Runs `terrain topology'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, ["compare", Found, Truth], Io) ->
    compare(Options, Found, Truth, Io);
run(_Options, ["compare" | Args], _Io) ->
    usage("compare FOUND TRUTH", Args);
run(Options, ["import", "slurm", File], Io) ->
    case maps:get(scontrol, Options, false) of
        true -> {error, {usage, "import slurm: give a topology.conf FILE or --scontrol, not both"}};
        false -> import(Options, {file, File}, Io)
    end;
run(#{scontrol := true} = Options, ["import", "slurm"], Io) ->
    import(Options, scontrol, Io);
run(_Options, ["import" | _], _Io) ->
    {error, {usage, "expected 'terrain topology import slurm FILE' or 'terrain topology import slurm --scontrol'"}};
run(Options, ["load", File], Io) ->
    load(Options, File, Io);
run(_Options, ["load" | Args], _Io) ->
    usage("load FILE", Args);
run(Options, ["show", File], Io) ->
    show(Options, File, Io);
run(_Options, ["show" | Args], _Io) ->
    usage("show FILE", Args);
run(#{matrix := File} = Options, ["simulate"], Io) when File =/= undefined ->
    terrain_lab_cmd_topology_simulate:replay(Options, File, Io);
run(Options, ["simulate"], Io) ->
    terrain_lab_cmd_topology_simulate:simulate(Options, Io);
run(_Options, ["simulate" | Args], _Io) ->
    usage("simulate", Args);
run(Options, [Matrix], Io) ->
    discover(Options, Matrix, Io);
run(_Options, Args, _Io) ->
    usage("MATRIX.json", Args).

%% Missing or extra arguments: a usage error (exit 2).
usage(Usage, Args) ->
    {error, {usage, {topology_cmd, {usage, Usage, length(Args)}}}}.

%% `--out' must be new and none of the command's inputs (checked before any work).
new_output(Options, Inputs) ->
    case maps:get(out, Options, undefined) of
        undefined -> {ok, stdout};
        Out -> case terrain_lab_files:new_output(file, Out, Inputs) of
                   ok -> {ok, Out};
                   {error, _} = Error -> Error
               end
    end.

%%--------------------------------------------------------------------
%% Discovery

discover(Options, File, Io) ->
    case {discovery_options(Options), output_format(Options), new_output(Options, [File])} of
        {_, _, {error, _} = Error} ->
            Error;
        {{ok, Opts}, {ok, Format}, _} ->
            case terrain:read_latency(File) of
                {ok, Latency} ->
                    terrain_lab_io:progress(Io, "topology: clustering ~b nodes (~ts)~n",
                                             [length(maps:get(nodes, Latency)), describe(Opts)]),
                    case terrain:discover(Latency, Opts) of
                        {ok, Result} ->
                            report(Result, Io),
                            {ok, Text} = terrain:render_topology(Result, Format),
                            emit(Text, Options, Io);
                        {error, _} = Error ->
                            Error
                    end;
                {error, _} = Error ->
                    Error
            end;
        {{error, _} = Error, _, _} ->
            Error;
        {_, {error, _} = Error, _} ->
            Error
    end.

discovery_options(Options) ->
    try
        Linkage = choice(linkage, Options, ["average", "complete", "single"]),
        Statistic = choice(statistic, Options, ["min", "median", "mean", "p95"]),
        Symmetrise = choice(symmetrise, Options, ["min", "mean", "max"]),
        Outliers = case maps:get(outliers, Options, undefined) of
                       undefined -> repair;
                       _ -> choice(outliers, Options, ["repair", "keep"])
                   end,
        Alpha = case maps:get(alpha, Options, "auto") of
                    "auto" -> auto;
                    Text -> case number(Text) of
                                {ok, A} when A >= 1 -> A;
                                _ -> throw({bad_option, "alpha", Text, "auto or a number >= 1"})
                            end
                end,
        Factor = case maps:get(outlier_factor, Options, 3.0) of
                     F when is_number(F), F > 1 -> F;
                     F -> throw({bad_option, "outlier-factor", F, "a number > 1"})
                 end,
        terrain_discovery:validate_options(#{linkage => Linkage, statistic => Statistic, symmetrise => Symmetrise,
                                             outliers => Outliers, alpha => Alpha, outlier_factor => Factor})
    catch
        throw:Reason -> {error, {topology_cmd, Reason}}
    end.

choice(Key, Options, Allowed) ->
    Name = string:replace(atom_to_list(Key), "_", "-", all),
    case maps:get(Key, Options) of
        Value when is_list(Value) ->
            case lists:member(Value, Allowed) of
                true -> list_to_atom(Value);
                false -> throw({bad_option, lists:flatten(Name), Value, lists:join(", ", Allowed)})
            end
    end.

%% Is `--alpha' `auto' or a number >= 1?
alpha_text("auto") -> true;
alpha_text(Text) ->
    case number(Text) of
        {ok, A} -> A >= 1;
        error -> false
    end.

%% 2.5, 10 or 1e3, as the number options read them.
number(Text) ->
    terrain_lab_cli:number(Text).

%% @doc The output format of `--format', else of `--out''s extension, else `term'.
-spec output_format(#{atom() => term()}) -> {ok, terrain:topology_format()} | {error, term()}.
output_format(Options) ->
    case maps:get(format, Options, undefined) of
        undefined ->
            {ok, case maps:get(out, Options, undefined) of
                     undefined -> term;
                     Out -> format_of(string:lowercase(filename:extension(Out)))
                 end};
        Text ->
            case [F || F <- ?FORMATS, atom_to_list(F) =:= Text] of
                [F] -> {ok, F};
                [] -> {error, {topology_cmd, {bad_option, "format", Text, "term, json, dot, newick or text"}}}
            end
    end.

format_of(".json") -> json;
format_of(".dot") -> dot;
format_of(".gv") -> dot;
format_of(".nwk") -> newick;
format_of(".newick") -> newick;
format_of(".txt") -> text;
format_of(_) -> term.

describe(#{linkage := L, alpha := A, statistic := S, symmetrise := Sym, outliers := O}) ->
    io_lib:format("~s of each pair, symmetrised by ~s, outliers ~s, ~s linkage, alpha ~ts",
                  [S, Sym, O, L, case A of auto -> "auto"; _ -> io_lib:format("~p", [A]) end]).

report(#{repaired := Repaired, pairs := Pairs} = Result, Io) ->
    case maps:get(missing, Result, 0) of
        0 -> ok;
        Missing -> terrain_lab_io:progress(Io, "topology: ~b of ~b pairs were measured in neither direction; "
                                           "estimated from the measured ones (minimax path)~n", [Missing, Pairs])
    end,
    case maps:get(undetermined, Result, []) of
        [] -> ok;
        Undetermined -> terrain_lab_io:progress(Io, "topology: ~b node~s undetermined (no measured round trip "
                                                "supports their place): ~ts~n",
                                                [length(Undetermined), case Undetermined of [_] -> ""; _ -> "s" end,
                                                 lists:join(", ", [atom_to_list(U) || U <- Undetermined])])
    end,
    _ = Repaired > 0 andalso
        terrain_lab_io:progress(Io, "topology: repaired ~b of ~b round trips (outliers of their level)~n",
                                [Repaired, Pairs]),
    case Result of
        #{levels := Levels, single_alpha := Single} ->
            lists:foreach(
              fun(#{points := P, clusters := C, silhouette := Sil, best_silhouette := Best, jump := Jump,
                    above := Above}) ->
                      terrain_lab_io:progress(Io, "topology: ~b points -> ~b clusters, the average-linkage cut with "
                                              "the largest jump of merge heights (x~.2f) among those of silhouette "
                                              "within 10% of the best (~.2f; best ~.2f >= 0.5); ~ts~n",
                                              [P, C, min(Jump, 1.0e6), Sil, Best, cut_reason(Above)]);
                 (#{points := P, clusters := 1, alpha := none}) ->
                      terrain_lab_io:progress(Io, "topology: ~b points join under the root~n", [P]);
                 (#{points := P, clusters := C, alpha := A, plateau := {Lo, Hi}}) ->
                      terrain_lab_io:progress(Io, "topology: ~b points -> ~b clusters, alpha ~.2f "
                                              "(same partition for alpha ~.2f..~.2f)~n", [P, C, A, Lo, Hi])
              end, Levels),
            Strict = maps:get(strict_groups, Result, 0),
            case Single of
                {Lo, Hi} when Strict > 0 ->
                    terrain_lab_io:progress(Io, "topology: one alpha in ~.2f..~.2f gives the same tree but the strict "
                                            "groups~n", [Lo, Hi]);
                {Lo, Hi} -> terrain_lab_io:progress(Io, "topology: one alpha in ~.2f..~.2f gives the same tree~n",
                                                    [Lo, Hi]);
                none -> terrain_lab_io:progress(Io, "topology: no single alpha gives this tree~n", [])
            end,
            _ = Strict > 0 andalso
                terrain_lab_io:progress(Io, "topology: ~b strict groups added as networks (every round trip inside "
                                        "25% and twice the noise, ~ts us, shorter than every one leaving them)~n",
                                        [Strict, float_to_list(float(maps:get(noise, Result, 0)),
                                                               [{decimals, 3}, compact])]);
        #{} ->
            ok
    end.

%% @doc `Text' to `--out' (written atomically), else to stdout.
-spec emit(iodata(), #{atom() => term()}, terrain_lab_io:io()) -> ok | {error, term()}.
emit(Text, Options, Io) ->
    case maps:get(out, Options, undefined) of
        undefined ->
            terrain_lab_io:out(Io, "~ts", [Text]);
        Out ->
            case terrain_lab_files:write(Out, Text) of   % temporary file and rename; none left on failure
                ok -> terrain_lab_io:progress(Io, "topology: wrote ~ts~n", [Out]);
                {error, _} = Error -> Error
            end
    end.

%%--------------------------------------------------------------------
%% Show

show(Options, File, Io) ->
    terrain_lab_steps:with(
      [fun() -> case maps:get(format, Options, undefined) of
                    undefined -> {ok, text};
                    _ -> output_format(Options)
                end end,
       fun() -> new_output(Options, [File]) end,
       fun() -> read_tree(File) end],
      fun([Format, _, Tree]) ->
              case terrain:render_topology(Tree, Format) of
                  {ok, Text} -> emit(Text, Options, Io);
                  {error, _} = Error -> Error
              end
      end).

%%--------------------------------------------------------------------
%% Load

%% The topology of FILE (term or JSON) on every node of the running cluster. A tree
%% none of whose nodes is a node of the cluster is refused (it would take every node
%% out of the tree, a live one too); the cluster's nodes it leaves out are named.
load(Options, File, Io) ->
    terrain_lab_steps:with(
      [fun() -> read_tree(File) end,
       fun() -> terrain_lab_cluster_state:connect(Options) end],
      fun([Tree, Nodes]) ->
              case [N || N <- Nodes, not lists:member(N, tree_leaves(Tree))] of
                  Nodes -> {error, {topology_cmd, {foreign_tree, File, tree_leaves(Tree), Nodes}}};
                  [] -> load_tree(Tree, Nodes, File, Io);
                  Missing ->
                      terrain_lab_io:progress(Io, "terrain topology: warning: ~b of the cluster's ~b nodes are not in "
                                              "~ts (~ts): they are outside the tree (at distance anywhere)~n",
                                              [length(Missing), length(Nodes), File, node_list(Missing)]),
                      load_tree(Tree, Nodes, File, Io)
              end
      end).

%% The nodes of a topology tree (a term as read_tree/1 returns it).
tree_leaves({node, N}) -> [N];
tree_leaves({network, _Name, _Options, Children}) when is_list(Children) -> lists:flatmap(fun tree_leaves/1, Children);
tree_leaves({network, _Name, Children}) when is_list(Children) -> lists:flatmap(fun tree_leaves/1, Children);
tree_leaves({network, Children}) when is_list(Children) -> lists:flatmap(fun tree_leaves/1, Children);
tree_leaves(_) -> [].

%% At most 5 node names, then how many more.
node_list(Nodes) when length(Nodes) > 5 ->
    [lists:join(", ", [atom_to_list(N) || N <- lists:sublist(Nodes, 5)]),
     io_lib:format(" and ~b more", [length(Nodes) - 5])];
node_list(Nodes) ->
    lists:join(", ", [atom_to_list(N) || N <- Nodes]).

load_tree(Tree, Nodes, File, Io) ->
    Results = [{N, catch erpc:call(N, terrain, load_topology, [Tree], 10000)} || N <- Nodes],
    case [{N, R} || {N, R} <- Results, R =/= ok] of
        [] -> terrain_lab_io:out(Io, "loaded ~ts on ~b nodes~n", [File, length(Nodes)]);
        [{N, Why} | _] -> {error, {topology_cmd, {load, N, Why}}}
    end.

%%--------------------------------------------------------------------
%% Import

%% SLURM's switches as a topology: a topology.conf file or `scontrol show topology'.
import(Options, Source, Io) ->
    {Name, Read} = case Source of
                       {file, File} -> {File, fun() -> switches_of_file(File) end};
                       scontrol -> {"'scontrol show topology'", fun() -> terrain_lab_slurm:scontrol_topology(10000) end}
                   end,
    Inputs = case Source of {file, F} -> [F]; scontrol -> [] end,
    terrain_lab_steps:with(
      [fun() -> output_format(Options) end,
       fun() -> new_output(Options, Inputs) end,
       fun() -> case Read() of
                    {ok, []} -> {error, {slurm, {topology_empty, Name}}};
                    Other -> Other
                end end],
      fun([Format, _, Switches]) ->
              Tree = terrain_lab_slurm:topology_tree(Switches),
              terrain_lab_io:progress(Io, "topology: ~b switches, ~b nodes from ~ts~n",
                                      [length(Switches), length(terrain_tree_compare:nodes(Tree)), Name]),
              {ok, Text} = terrain:render_topology(Tree, Format),
              emit(Text, Options, Io)
      end).

switches_of_file(File) ->
    terrain_lab_slurm:read_topology(File).

%%--------------------------------------------------------------------
%% Compare

compare(Options, FoundFile, TruthFile, Io) ->
    case {new_output(Options, [FoundFile, TruthFile]), read_tree(FoundFile), read_tree(TruthFile)} of
        {{error, _} = Error, _, _} ->
            Error;
        {_, {ok, Found}, {ok, Truth}} ->
            Found1 = match_names(Found, Truth, maps:get(prefix, Options, "")),
            case terrain:compare_topologies(Found1, Truth) of
                {ok, Report} ->
                    case output_format(Options) of
                        {ok, json} ->
                            %% terrain.topology_comparison/1, what `terrain report' renders
                            Json = terrain_json:encode(Report#{format => ?TERRAIN_FORMAT_TOPOLOGY_COMPARISON,
                                                               found => unicode:characters_to_binary(FoundFile),
                                                               truth => unicode:characters_to_binary(TruthFile)},
                                                      #{pretty => true}),
                            emit([Json, $\n], Options, Io);
                        {ok, _} ->
                            emit(comparison_text(Report), Options, Io);
                        {error, _} = Error ->
                            Error
                    end;
                {error, _} = Error ->
                    Error
            end;
        {_, {error, _} = Error, _} ->
            Error;
        {_, _, {error, _} = Error} ->
            Error
    end.

comparison_text(#{levels := Levels, clade_recall := R, clade_precision := P, truth_clades := TC,
                  found_clades := FC, common_clades := C, nodes := N}) ->
    [[io_lib:format("level ~b: ~b true clusters, ~b found, ARI ~.3f~n", [K, T, F, A])
      || #{level := K, truth_clusters := T, found_clusters := F, ari := A} <- Levels],
     io_lib:format("clades: recall ~.3f (~b of ~b true clades found), "
                   "precision ~.3f (~b of ~b found clades true); ~b nodes~n", [R, C, TC, P, C, FC, N])].

%% When the truth is a spec (short names) and the found tree has full node names,
%% compare by the local part without the prefix.
%% A truth of hosts (SLURM's switches, `import slurm') names each host, and the VMs
%% of `terrain up --hosts|--slurm' are HOST_1..HOST_N: with one VM per host, a VM
%% matches its host.
match_names(Found, Truth, Prefix) ->
    TruthNodes = terrain_tree_compare:nodes(Truth),
    FoundHosts = lists:any(fun has_host/1, terrain_tree_compare:nodes(Found)),
    case lists:any(fun has_host/1, TruthNodes) orelse not FoundHosts of
        true -> Found;
        false ->
            Short = rename(Found, fun(N) -> short(N, Prefix) end),
            ShortNodes = terrain_tree_compare:nodes(Short),
            ByHost = [host_of_vm(N) || N <- ShortNodes],
            case {ShortNodes -- TruthNodes, ByHost -- TruthNodes, ByHost -- lists:usort(ByHost)} of
                {[_ | _], [], []} -> rename(Short, fun host_of_vm/1);
                _ -> Short
            end
    end.

%% `tb1_1' -> tb1 (terrain_lab_hosts:host_group/2's names).
host_of_vm(Node) ->
    case re:run(atom_to_list(Node), "^(.+)_[0-9]+$", [{capture, all_but_first, list}]) of
        {match, [Host]} -> list_to_atom(Host);
        nomatch -> Node
    end.

has_host(Node) ->
    is_atom(Node) andalso lists:member($@, atom_to_list(Node)).

short(Node, Prefix) ->
    [Local | _] = string:split(atom_to_list(Node), "@"),
    list_to_atom(case lists:prefix(Prefix, Local) of
                     true -> lists:nthtail(length(Prefix), Local);
                     false -> Local
                 end).

rename({node, N}, Fun) -> {node, Fun(N)};
rename({network, C}, Fun) -> {network, [rename(X, Fun) || X <- C]};
rename({network, Name, C}, Fun) -> {network, Name, [rename(X, Fun) || X <- C]};
rename({network, Name, Opts, C}, Fun) -> {network, Name, Opts, [rename(X, Fun) || X <- C]}.

%% Reads a topology: a file of one topology term, a cluster spec (its groups as
%% the tree), or a `terrain.topology/1' JSON file (one that starts with `{"'), through
%% the bounded reader (a regular file of at most 16 MB; terms counted before their
%% atoms are made), and checks that it is a valid tree (terrain:check_topology/1).
-spec read_tree(file:filename()) -> {ok, terrain:topology_tree()} | {error, term()}.
read_tree(File) ->
    case terrain_lab_files:read(File, ?MAX_TOPOLOGY_BYTES) of
        {ok, Bin} ->
            Read = case re:run(Bin, "^\\s*{\\s*\"", [{capture, none}]) of
                       match -> json_tree(File, Bin);
                       nomatch -> term_tree(File)
                   end,
            case Read of
                {ok, Tree} -> valid_tree(File, Tree);
                {error, _} = Error -> Error
            end;
        {error, _} = Error ->
            Error
    end.

valid_tree(File, Tree) ->
    case terrain:check_topology(Tree) of
        ok -> {ok, Tree};
        {error, Why} -> {error, {topology_cmd, {bad_topology, File, {invalid, Why}}}}
    end.

json_tree(File, Bin) ->
    case terrain_topology:from_json(Bin) of
        {ok, Tree, _Metric} -> {ok, Tree};
        {error, Why} -> {error, {topology_cmd, {bad_topology, File, Why}}}
    end.

term_tree(File) ->
    Limits = #{max_bytes => ?MAX_TOPOLOGY_BYTES,
               check => fun(Tags) -> terrain_lab_guard:node_count(maps:get(<<"node">>, Tags, 0)) end},
    case terrain_lab_files:consult(File, Limits) of
        {ok, [{cluster, _, _} | _] = Terms} ->
            case terrain_lab_spec:from_terms(Terms, File) of
                {ok, Spec} -> {ok, terrain_lab_spec:topology(Spec, fun(Name) -> Name end, #{heights => false})};
                {error, _} = Error -> Error
            end;
        {ok, [Tree]} ->
            {ok, Tree};
        {ok, Terms} ->
            {error, {topology_cmd, {bad_topology, File, {terms, length(Terms)}}}};
        {error, _} = Error ->
            Error
    end.

%%--------------------------------------------------------------------
%% Errors

%% @doc A sentence for the errors of this command.
-spec format_error({topology_cmd, term()}) -> iolist().
format_error({topology_cmd, {usage, Usage, Count}}) ->
    Plural = case Count of 1 -> ""; _ -> "s" end,
    io_lib:format("expected 'terrain topology ~ts' (~b argument~s after it)", [Usage, Count, Plural]);
format_error({topology_cmd, {simulate, shape_and_spec}}) ->
    "simulate: give --shape or --spec, not both";
format_error({topology_cmd, {simulate, spec_latencies}}) ->
    "simulate: --latencies goes with --shape; a --spec's groups carry their own latency";
format_error({topology_cmd, {simulate, no_model}}) ->
    "simulate needs a model: --shape AxBx... (with --latencies) or --spec FILE";
format_error({topology_cmd, {foreign_tree, File, Leaves, Nodes}}) ->
    io_lib:format("none of the ~b nodes of ~ts (~ts) is a node of the cluster (~ts); nothing was loaded: the tree's "
                  "nodes must be full node names of the cluster",
                  [length(Leaves), File, node_list(Leaves), node_list(Nodes)]);
format_error({topology_cmd, {load, Node, {topology, _, _} = Why}}) ->
    io_lib:format("loading the topology on ~ts failed: ~ts", [Node, terrain:format_error(Why)]);
format_error({topology_cmd, {load, Node, Why}}) ->
    io_lib:format("loading the topology on ~ts failed: ~0tP", [Node, Why, 10]);
format_error({topology_cmd, {bad_option, Name, Value, Allowed}}) ->
    io_lib:format("--~ts ~0tp: expected ~ts", [Name, Value, Allowed]);
format_error({topology_cmd, {bad_topology, File, {format, none}}}) ->
    io_lib:format("~ts: not a topology: no \"format\" field (expected \"terrain.topology/1\")", [File]);
format_error({topology_cmd, {bad_topology, File, {format, F}}}) ->
    io_lib:format("~ts: not a topology: format ~0tp (expected \"terrain.topology/1\")", [File, F]);
format_error({topology_cmd, {bad_topology, File, {terms, N}}}) ->
    io_lib:format("~ts: expected one topology term or a cluster spec, found ~b terms", [File, N]);
format_error({topology_cmd, {bad_topology, File, {json, Offset, Why}}}) ->
    io_lib:format("~ts: invalid JSON at byte ~b: ~ts", [File, Offset, Why]);
format_error({topology_cmd, {bad_topology, File, {invalid, Why}}}) ->
    io_lib:format("~ts is not a valid topology: ~ts", [File, terrain:format_error(Why)]);
format_error({topology_cmd, {bad_topology, File, {Tag, _} = Why}}) when Tag =:= long_name; Tag =:= too_many_names;
                                                                       Tag =:= bad_entry; Tag =:= bad_height ->
    io_lib:format("~ts is not a valid topology: ~ts", [File, terrain:format_error({topology, [], Why})]);
format_error({topology_cmd, {bad_topology, File, Why}}) ->
    io_lib:format("~ts: not a topology: ~0tP", [File, Why, 8]).

%% Why the silhouette cut was asked at a level.
-spec cut_reason(none | float()) -> io_lib:chars().
cut_reason(none) ->
    "no alpha holds a partition";
cut_reason(Top) ->
    io_lib:format("the alpha levels above joined into a top of silhouette ~.2f < 0.5", [Top]).
