%% @private
%% @doc Cluster specs: read, validate and query the Erlang-term description of a
%% cluster (docs/DESIGN.md, "Cluster spec").
%%
%% A spec file holds one `{cluster, Name, Options}' term followed by groups and nodes:
%% ```
%% {cluster, demo, #{latency => 20000}}.
%% {group, eu, #{latency => 4000}, [
%%     {group, eu_r1, #{latency => 300}, [
%%         {node, n1, #{schedulers => 2}},
%%         {node, n2, #{attrs => [{gpu, true}]}}]}]}.
%% '''
%% Groups nest to any depth. Link options (`latency', `jitter' in µs one way,
%% `bandwidth' in bytes/s) apply between two nodes whose lowest common group is the
%% group that carries them; the cluster's own options join the top-level groups.
%% Node options: `schedulers', `cpu' (a CPU quota in cores, see terrain_lab_cgroup),
%% `cpu_per_scheduler' (each scheduler thread capped at that many cores: an emulated
%% core's speed; `cpu' then defaults to it × the schedulers and may not be below it),
%% `attrs', `args', `host' (the host the node runs on: a host name or address; see
%% terrain_lab_hosts). The cluster term alone may also carry `tls => true': the nodes
%% talk distribution over TLS with certificates of the cluster's own CA
%% (terrain_lab_tls; docs/HOSTS.md); {@link tls/1} reads it.
-module(terrain_lab_spec).
-compile({no_auto_import, [nodes/1]}).

%% API
-export([read/1,
         consult/1,
         from_terms/2,
         nodes/1,
         node_names/1,
         link/3,
         levels/1,
         tls/1,
         connect_all/1,
         topology/2,
         topology/3,
         merge/2,
         move/3,
         format_error/1]).

-export_type([spec/0, node_spec/0, link_options/0, error_reason/0]).

-type link_options() ::
        #{latency => non_neg_integer(),   % one-way delay in µs
          jitter => non_neg_integer(),    % µs; see terrain_lab_netem for its distribution
          bandwidth => pos_integer()}.    % bytes/s per connection

-type node_spec() ::
        #{name := atom(),                 % the node's short name, as written in the spec
          path := [atom()],               % the groups from the top down to the node's own group
          schedulers => pos_integer(),    % scheduler threads (+S N:N)
          cpu => number(),                % CPU quota of the VM in cores (> 0), see terrain_lab_cgroup
          cpu_per_scheduler => number(),  % CPU quota of each scheduler thread in cores (> 0;
                                          % =< cpu): an emulated core's speed, see terrain_lab_cgroup
          attrs => [{atom(), term()}],    % attribute list, as in an attribute config file
          args => [string()],             % extra VM arguments
          host => string()}.              % host name or address the node runs on

-type spec() ::
        #{name := atom(),
          file := file:filename() | undefined,
          options := link_options(),
          %% Groups as {Path, LinkOptions}; Path from the top down, the group last.
          groups := [{[atom()], link_options()}],
          nodes := [node_spec()],
          tls => boolean(),               % distribution over TLS (cluster option `tls')
          connect_all => boolean()}.      % global's full mesh (cluster option `connect_all')

-type where() :: [{cluster | group | node, atom()} | {term, pos_integer()}].
-type error_reason() :: {spec, file:filename() | undefined, where(), term()}.

%% A spec file is at most this large (a 100,000-node spec, the most terrain starts,
%% is about 4 MB).
-define(MAX_BYTES, 16 * 1024 * 1024).

-define(LINK_KEYS, [latency, jitter, bandwidth]).
-define(NODE_KEYS, [schedulers, cpu, cpu_per_scheduler, attrs, args, host]).
-define(MAX_SCHEDULERS, 1024).

%%--------------------------------------------------------------------
%% API

%% @doc Reads and validates a cluster spec file (a regular file of at most 16 MB
%% and 100,000 nodes, counted before any name is made).
-spec read(file:filename()) -> {ok, spec()} | {error, error_reason() | terrain_lab_files:read_error()}.
read(File) ->
    case consult(File) of
        {ok, Terms} -> from_terms(Terms, File);
        {error, _} = Error -> Error
    end.

%% @doc The terms of a spec file, bounded (terrain_lab_files:consult/2): at most
%% ?MAX_BYTES bytes, and no more nodes than the guard allows, counted before a name
%% becomes an atom.
-spec consult(file:filename()) -> {ok, [term()]} | {error, error_reason() | terrain_lab_files:read_error()}.
consult(File) ->
    Limits = #{max_bytes => ?MAX_BYTES,
               check => fun(Tags) -> terrain_lab_guard:node_count(maps:get(<<"node">>, Tags, 0)) end},
    case terrain_lab_files:consult(File, Limits) of
        {ok, Terms} -> {ok, Terms};
        {error, {read, _, {syntax, Line, Message}}} -> {error, {spec, File, [{line, Line}], {syntax, Message}}};
        {error, {read, _, Why}} when is_atom(Why), Why =/= not_regular -> {error, {spec, File, [], {file, Why}}};
        {error, _} = Error -> Error
    end.

%% @doc Validates the terms of a spec (as `file:consult/1' returns them). `File' is
%% only used in error reasons.
-spec from_terms([term()], file:filename() | undefined) -> {ok, spec()} | {error, error_reason()}.
from_terms(Terms, File) ->
    try
        {ok, build(Terms, File)}
    catch
        throw:{spec_error, Where, Why} -> {error, {spec, File, Where, Why}}
    end.

%% @doc The nodes of a spec, in the order of the file.
-spec nodes(spec()) -> [node_spec()].
nodes(#{nodes := Nodes}) ->
    Nodes.

%% @doc The names of the nodes of a spec, in the order of the file.
-spec node_names(spec()) -> [atom()].
node_names(Spec) ->
    [Name || #{name := Name} <- nodes(Spec)].

%% @doc The link options between two nodes of the spec (by spec name): those of their
%% lowest common group, or the cluster's when they share none; `#{}' for a node with
%% itself.
-spec link(spec(), atom(), atom()) -> link_options().
link(_Spec, Same, Same) ->
    #{};
link(#{options := ClusterOptions, groups := Groups} = Spec, A, B) ->
    PathA = path_of(Spec, A),
    PathB = path_of(Spec, B),
    case common_prefix(PathA, PathB) of
        [] -> ClusterOptions;
        Common -> proplists:get_value(Common, Groups)
    end.

%% @doc Whether `global' makes the full mesh among the spec's nodes (cluster option
%% `connect_all', default true).
-spec connect_all(spec()) -> boolean().
connect_all(Spec) ->
    maps:get(connect_all, Spec, true).

%% @doc Whether the spec's nodes run distribution over TLS (cluster option `tls').
-spec tls(spec()) -> boolean().
tls(Spec) ->
    maps:get(tls, Spec, false).

%% @doc The distinct link levels of a spec from the outermost in: a list of
%% `{Label, LinkOptions}' where Label is `cluster' or the group path.
-spec levels(spec()) -> [{cluster | [atom()], link_options()}].
levels(#{options := ClusterOptions, groups := Groups}) ->
    [{cluster, ClusterOptions} | Groups].

%% @equiv topology(Spec, NodeName, #{heights => true})
-spec topology(spec(), fun((atom()) -> node())) -> terrain:topology_tree().
topology(Spec, NodeName) ->
    topology(Spec, NodeName, #{heights => true}).

%% @doc The spec's group hierarchy as a topology term (terrain_topology): the cluster
%% as the root, its groups nested as in the file, the nodes' full names from
%% `NodeName' as leaves, children in the order of the file. This is the one
%% conversion of a spec into a tree (`terrain up', the launcher, `terrain demo',
%% `terrain topology compare|show' on a spec).
%%
%% With `heights => true', each network's height is the round trip of its link
%% (2 × the one-way `latency', µs) when the cluster and every group carry a latency
%% and the heights shrink towards the leaves; otherwise, and with `heights => false',
%% there are no heights (the ultrametric applies).
-spec topology(spec(), fun((atom()) -> node()), #{heights := boolean()}) -> terrain:topology_tree().
topology(#{name := Cluster, options := ClusterOptions, groups := Groups, nodes := Nodes}, NodeName,
         #{heights := WantHeights}) ->
    Heights = [maps:get(latency, O, undefined) || O <- [ClusterOptions | [O || {_, O} <- Groups]]],
    WithHeights = WantHeights andalso not lists:member(undefined, Heights),
    Tree = network(Cluster, ClusterOptions, [], Groups, Nodes, NodeName, WithHeights),
    case WithHeights andalso terrain:check_topology(Tree) =/= ok of
        true -> network(Cluster, ClusterOptions, [], Groups, Nodes, NodeName, false);
        false -> Tree
    end.

network(Name, Options, Path, Groups, Nodes, NodeName, WithHeights) ->
    Children = [case Child of
                    {group, P} -> network(lists:last(P), proplists:get_value(P, Groups), P, Groups, Nodes,
                                          NodeName, WithHeights);
                    {node, N} -> {node, NodeName(N)}
                end || Child <- children(Path, Nodes)],
    case WithHeights of
        true -> {network, Name, #{height => 2 * maps:get(latency, Options)}, Children};
        false -> {network, Name, Children}
    end.

%% The groups and nodes directly below Path in the order of the file: a group comes
%% where its first node does (groups are never empty).
children(Path, Nodes) ->
    Depth = length(Path),
    lists:reverse(
      lists:foldl(fun(#{name := N, path := P}, Acc) when P =:= Path ->
                          [{node, N} | Acc];
                     (#{path := P}, Acc) ->
                          case lists:prefix(Path, P) of
                              true ->
                                  Group = {group, lists:sublist(P, Depth + 1)},
                                  case lists:member(Group, Acc) of
                                      true -> Acc;
                                      false -> [Group | Acc]
                                  end;
                              false ->
                                  Acc
                          end
                  end, [], Nodes)).

%% @doc The spec of a running cluster (file `Base') with the nodes of `Added' joined
%% to it (`terrain up --add'): `Added' holds groups and nodes, with or without a
%% `cluster' term (ignored: the running cluster's stays). A group of `Added' whose
%% name is a group of `Base' at the same place merges into it (its link options are
%% the base's; its children are added), so `{group, s1, #{}, [{group, s1r1, #{},
%% [{node, s1r1n4, #{}}]}]}' adds a node to rack s1r1 of site s1; other groups and
%% nodes are added where they stand. Returns the merged spec and its terms (which
%% `terrain up --add' writes into the state directory).
-spec merge(file:filename(), file:filename()) ->
          {ok, spec(), [term()]} | {error, error_reason() | terrain_lab_files:read_error()}.
merge(Base, Added) ->
    case {consult(Base), consult(Added)} of
        {{ok, BaseTerms}, {ok, AddedTerms}} ->
            Merged = lists:foldl(fun({cluster, _, _}, Acc) -> Acc;
                                    (Term, Acc) -> merge_entry(Term, Acc)
                                 end, BaseTerms, AddedTerms),
            case from_terms(Merged, Added) of
                {ok, Spec} -> {ok, Spec, Merged};
                {error, _} = Error -> Error
            end;
        {{error, _} = Error, _} -> Error;
        {_, {error, _} = Error} -> Error
    end.

%% A group merges into a sibling group of the same name; anything else is appended.
merge_entry({group, Name, _Options, Children} = Group, Siblings) ->
    case lists:partition(fun(T) -> is_tuple(T) andalso element(1, T) =:= group andalso element(2, T) =:= Name end,
                         Siblings) of
        {[{group, Name, BaseOptions, BaseChildren}], _} ->
            [case T of
                 {group, Name, _, _} ->
                     {group, Name, BaseOptions, lists:foldl(fun merge_entry/2, BaseChildren, Children)};
                 _ -> T
             end || T <- Siblings];
        _ ->
            Siblings ++ [Group]
    end;
merge_entry(Term, Siblings) ->
    Siblings ++ [Term].

%% @doc The spec in `File' with node `Node' moved into group `Group' (`terrain netem
%% move': its links become those of its new place). Returns the spec and its terms.
-spec move(file:filename(), atom(), atom()) ->
          {ok, spec(), [term()]} | {error, error_reason() | terrain_lab_files:read_error()}.
move(File, Node, Group) ->
    case consult(File) of
        {ok, Terms} ->
            case take_node(Terms, Node) of
                {none, _} ->
                    {error, {spec, File, [], {unknown_node, Node}}};
                {Entry, Rest} ->
                    case put_node(Rest, Group, Entry) of
                        {Moved, true} ->
                            case from_terms(Moved, File) of
                                {ok, Spec} -> {ok, Spec, Moved};
                                {error, _} = Error -> Error
                            end;
                        {_, false} ->
                            {error, {spec, File, [], {unknown_group, Group}}}
                    end
            end;
        {error, _} = Error ->
            Error
    end.

%% Removes a node's entry from the terms (a group left empty goes too).
take_node(Terms, Node) ->
    lists:foldr(fun({node, N, _} = E, {none, Acc}) when N =:= Node -> {E, Acc};
                   ({group, G, O, Children}, {Found, Acc}) ->
                        case take_node(Children, Node) of
                            {none, _} -> {Found, [{group, G, O, Children} | Acc]};
                            {E, []} -> {E, Acc};
                            {E, Kept} -> {E, [{group, G, O, Kept} | Acc]}
                        end;
                   (T, {Found, Acc}) -> {Found, [T | Acc]}
                end, {none, []}, Terms).

put_node(Terms, Group, Entry) ->
    lists:mapfoldl(fun({group, G, O, Children}, false) when G =:= Group -> {{group, G, O, Children ++ [Entry]}, true};
                      ({group, G, O, Children}, false) ->
                           {Kids, Done} = put_node(Children, Group, Entry),
                           {{group, G, O, Kids}, Done};
                      (T, Done) -> {T, Done}
                   end, false, Terms).

%% @doc A sentence for an error returned by this module.
-spec format_error(error_reason()) -> iolist().
format_error({spec, File, Where, Why}) ->
    [case File of undefined -> "cluster spec"; _ -> io_lib:format("cluster spec ~ts", [File]) end,
     format_where(Where), ": ", why(Why)].

%%--------------------------------------------------------------------
%% Validation

build(Terms, File) ->
    Numbered = lists:zip(lists:seq(1, length(Terms)), Terms),
    {ClusterName, ClusterOptions, Rest} =
        case Numbered of
            [{_, {cluster, Name, Options}} | Tail] when is_atom(Name), is_map(Options) ->
                {Name, cluster_options(Options, [{cluster, Name}]), Tail};
            [{_, {cluster, _, _}} | _] ->
                throw({spec_error, [{term, 1}], bad_cluster_term});
            [] ->
                throw({spec_error, [], no_cluster_term});
            [_ | _] ->
                throw({spec_error, [{term, 1}], no_cluster_term})
        end,
    {Groups, Nodes} = lists:foldl(fun({N, Term}, Acc) -> top_level(N, Term, Acc) end, {[], []}, Rest),
    _ = Nodes =:= [] andalso throw({spec_error, [{cluster, ClusterName}], no_nodes}),
    AllNodes = lists:reverse(Nodes),
    check_unique([Name || #{name := Name} <- AllNodes], duplicate_node),
    check_unique([lists:last(Path) || {Path, _} <- Groups], duplicate_group),
    check_unique([lists:last(Path) || {Path, _} <- Groups] ++ [Name || #{name := Name} <- AllNodes],
                 group_and_node_share_name),
    #{name => ClusterName, file => File, options => maps:without([tls, connect_all], ClusterOptions),
      groups => lists:reverse(Groups), nodes => connect_all(ClusterOptions, AllNodes),
      tls => maps:get(tls, ClusterOptions, false), connect_all => maps:get(connect_all, ClusterOptions, true)}.

%% `connect_all => false': every node starts with `-connect_all false' (before its own
%% `args'), so `global' does not make the full mesh (docs/CLI.md, "Full mesh or on demand").
connect_all(#{connect_all := false}, Nodes) ->
    [Node#{args => ["-connect_all", "false" | maps:get(args, Node, [])]} || Node <- Nodes];
connect_all(#{}, Nodes) ->
    Nodes.

top_level(N, {cluster, _, _}, _Acc) ->
    throw({spec_error, [{term, N}], second_cluster_term});
top_level(_N, Term, Acc) ->
    entry(Term, [], [], Acc).

%% entry(Term, PathAbove, WhereAbove, {Groups, Nodes}) -> {Groups, Nodes}, both reversed.
entry({group, Name, Options, Children}, Path, Where, {Groups, Nodes}) ->
    GroupWhere = Where ++ [{group, Name}],
    _ = is_atom(Name) orelse throw({spec_error, Where, {bad_name, group, Name}}),
    _ = is_map(Options) orelse throw({spec_error, GroupWhere, {not_a_map, Options}}),
    _ = is_list(Children) orelse throw({spec_error, GroupWhere, {bad_children, Children}}),
    _ = Children =:= [] andalso throw({spec_error, GroupWhere, empty_group}),
    GroupPath = Path ++ [Name],
    Acc = {[{GroupPath, link_options(Options, GroupWhere)} | Groups], Nodes},
    lists:foldl(fun(Child, A) -> entry(Child, GroupPath, GroupWhere, A) end, Acc, Children);
entry({node, Name, Options}, Path, Where, {Groups, Nodes}) ->
    NodeWhere = Where ++ [{node, Name}],
    _ = valid_node_name(Name) orelse throw({spec_error, Where, {bad_name, node, Name}}),
    _ = is_map(Options) orelse throw({spec_error, NodeWhere, {not_a_map, Options}}),
    {Groups, [node_options(Options, NodeWhere, #{name => Name, path => Path}) | Nodes]};
entry(Term, _Path, Where, _Acc) ->
    throw({spec_error, Where, {unknown_term, Term}}).

link_options(Options, Where) ->
    maps:foreach(fun(Key, Value) -> check_link(Key, Value, Where) end, Options),
    Options.

%% The cluster's options: its link options, `tls' and `connect_all'.
cluster_options(Options, Where) ->
    maps:foreach(fun(Key, Value) when Key =:= tls; Key =:= connect_all ->
                         is_boolean(Value) orelse throw({spec_error, Where, {bad_value, Key, Value}});
                    (Key, Value) ->
                         case lists:member(Key, ?LINK_KEYS) of
                             true -> check_link(Key, Value, Where);
                             false -> throw({spec_error, Where, {unknown_key, Key, ?LINK_KEYS ++ [tls, connect_all]}})
                         end
                 end, Options),
    Options.

check_link(latency, V, _) when is_integer(V), V >= 0 -> ok;
check_link(jitter, V, _) when is_integer(V), V >= 0 -> ok;
check_link(bandwidth, V, _) when is_integer(V), V > 0 -> ok;
check_link(Key, V, Where) ->
    case lists:member(Key, ?LINK_KEYS) of
        true -> throw({spec_error, Where, {bad_value, Key, V}});
        false -> throw({spec_error, Where, {unknown_key, Key, ?LINK_KEYS}})
    end.

node_options(Options, Where, Node) ->
    Checked = maps:fold(fun(Key, Value, Acc) -> check_node(Key, Value, Where), Acc#{Key => Value} end, Node, Options),
    case Checked of
        #{cpu := Cpu, cpu_per_scheduler := PerScheduler} when Cpu < PerScheduler ->
            throw({spec_error, Where, {cpu_below_cpu_per_scheduler, Cpu, PerScheduler}});
        #{} ->
            Checked
    end.

check_node(schedulers, V, _) when is_integer(V), V >= 1, V =< ?MAX_SCHEDULERS -> ok;
check_node(cpu, V, _) when is_number(V), V > 0 -> ok;
check_node(cpu_per_scheduler, V, _) when is_number(V), V > 0 -> ok;
check_node(attrs, V, Where) when is_list(V) ->
    lists:foreach(fun({Name, _}) when is_atom(Name) -> ok;
                     (Bad) -> throw({spec_error, Where, {bad_attr, Bad}})
                  end, V),
    check_unique_in([Name || {Name, _} <- V], Where, duplicate_attr);
check_node(args, V, Where) when is_list(V) ->
    lists:foreach(fun(Arg) ->
                          _ = io_lib:printable_unicode_list(Arg) andalso Arg =/= []
                              orelse throw({spec_error, Where, {bad_value, args, V}})
                  end, V);
check_node(host, V, Where) when is_list(V), V =/= [] ->
    _ = lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                                orelse (C >= $0 andalso C =< $9) orelse lists:member(C, "-._:")
                  end, V) orelse throw({spec_error, Where, {bad_value, host, V}}),
    ok;
check_node(Key, V, Where) ->
    case lists:member(Key, ?NODE_KEYS) of
        true -> throw({spec_error, Where, {bad_value, Key, V}});
        false -> throw({spec_error, Where, {unknown_key, Key, ?NODE_KEYS}})
    end.

valid_node_name(Name) when is_atom(Name) ->
    Chars = atom_to_list(Name),
    Chars =/= [] andalso
        lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                                orelse (C >= $0 andalso C =< $9) orelse C =:= $_ orelse C =:= $-
                  end, Chars);
valid_node_name(_) ->
    false.

check_unique(Names, Why) ->
    check_unique_in(Names, [], Why).

check_unique_in(Names, Where, Why) ->
    case Names -- lists:usort(Names) of
        [] -> ok;
        [Dup | _] -> throw({spec_error, Where, {Why, Dup}})
    end.

path_of(#{nodes := Nodes}, Name) ->
    case [Path || #{name := N, path := Path} <- Nodes, N =:= Name] of
        [Path] -> Path;
        [] -> error({unknown_node, Name})
    end.

common_prefix([X | A], [X | B]) -> [X | common_prefix(A, B)];
common_prefix(_, _) -> [].

%%--------------------------------------------------------------------
%% Errors

format_where([]) ->
    "";
format_where(Where) ->
    [", in ", lists:join(" > ", [where_part(W) || W <- Where])].

where_part({term, N}) -> io_lib:format("term ~b", [N]);
where_part({line, N}) -> io_lib:format("line ~p", [N]);
where_part({Kind, Name}) -> io_lib:format("~s ~0tp", [Kind, Name]).

why({unknown_node, N}) -> io_lib:format("no node ~0tp in the spec", [N]);
why({unknown_group, G}) -> io_lib:format("no group ~0tp in the spec", [G]);
why({file, enoent}) -> "no such file";
why({file, eacces}) -> "permission denied";
why({file, Why}) -> ["cannot read the file (", file:format_error(Why), ")"];
why({syntax, Message}) -> ["syntax error: ", Message];
why(no_cluster_term) -> "the first term must be {cluster, Name, Options}";
why(bad_cluster_term) -> "the cluster term must be {cluster, Name :: atom(), Options :: map()}";
why(second_cluster_term) -> "only one {cluster, Name, Options} term is allowed";
why(no_nodes) -> "the cluster has no nodes";
why(empty_group) -> "the group is empty: a group needs at least one node or group";
why({duplicate_node, Name}) -> io_lib:format("node name ~0tp appears more than once", [Name]);
why({duplicate_group, Name}) -> io_lib:format("group name ~0tp appears more than once", [Name]);
why({group_and_node_share_name, Name}) -> io_lib:format("~0tp names both a group and a node", [Name]);
why({duplicate_attr, Name}) -> io_lib:format("attribute ~0tp is given more than once", [Name]);
why({bad_name, node, Name}) ->
    io_lib:format("node name ~0tp must be an atom of letters, digits, '_' and '-' (no host part)", [Name]);
why({bad_name, Kind, Name}) -> io_lib:format("~s name ~0tp must be an atom", [Kind, Name]);
why({not_a_map, Options}) -> io_lib:format("options must be a map, got ~0tp", [Options]);
why({bad_children, Children}) -> io_lib:format("the children of a group must be a list, got ~0tp", [Children]);
why({bad_attr, Attr}) -> io_lib:format("attribute ~0tp must be {Name :: atom(), Value}", [Attr]);
why({unknown_term, Term}) ->
    io_lib:format("unknown term ~0tP: expected {group, Name, Options, Children} or {node, Name, Options}",
                  [Term, 8]);
why({unknown_key, Key, Known}) ->
    io_lib:format("unknown option ~0tp (known: ~ts)", [Key, lists:join(", ", [atom_to_list(K) || K <- Known])]);
why({cpu_below_cpu_per_scheduler, Cpu, PerScheduler}) ->
    io_lib:format("cpu (~0tp cores for the VM) is below cpu_per_scheduler (~0tp cores for one scheduler); "
                  "give cpu >= cpu_per_scheduler, or leave cpu out for cpu_per_scheduler x the schedulers",
                  [Cpu, PerScheduler]);
why({bad_value, Key, Value}) ->
    io_lib:format("bad value for ~0tp: ~0tP (~ts)", [Key, Value, 8, expected(Key)]).

expected(latency) -> "expected a non-negative integer of microseconds";
expected(jitter) -> "expected a non-negative integer of microseconds";
expected(bandwidth) -> "expected a positive integer of bytes per second";
expected(schedulers) -> io_lib:format("expected an integer from 1 to ~b", [?MAX_SCHEDULERS]);
expected(cpu) -> "expected a number of cores greater than 0, e.g. 0.5";
expected(cpu_per_scheduler) -> "expected a number of cores greater than 0 for each scheduler, e.g. 0.1";
expected(attrs) -> "expected a list of {Name, Value}";
expected(args) -> "expected a list of non-empty strings";
expected(host) -> "expected a host name or address as a string";
expected(tls) -> "expected true or false";
expected(connect_all) -> "expected true or false".
