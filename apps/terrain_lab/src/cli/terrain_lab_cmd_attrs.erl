%% @private
%% @doc `terrain attrs [NAME...]': the attributes of the running cluster's nodes (or of
%% `--nodes'), asked all at once under one deadline.
%%
%% With names, one table: a row per node, a column per attribute. Without, every
%% attribute of every node, node by node. A node that cannot be asked shows why
%% (timeout, no connection, terrain not running) instead of values.
-module(terrain_lab_cmd_attrs).

%% API (command table and CLI handler)
-export([commands/0,
         run/3,
         format_error/1]).

-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "attrs",
       summary => "Print the attributes of the running cluster's nodes",
       usage => "[NAME...]",
       description => "Asks every node of the cluster that 'terrain up' started (or --nodes) for the named "
                      "attributes, all at once under one deadline, and prints one row per node and one "
                      "column per attribute. Without names, prints every attribute of every node. A node "
                      "that cannot be asked shows why (no answer before the deadline, no connection, "
                      "terrain not running).",
       args => {0, infinity},
       options => [#{name => nodes, long => "nodes", type => string, metavar => "NODE,...",
                     help => "nodes to ask instead of the running cluster"},
                   #{name => timeout, long => "timeout", type => integer, default => 2000, range => {1, inf},
                     metavar => "MS",
                     help => "deadline for all the answers"},
                   terrain_lab_cli_options:state_dir()],
       run => {?MODULE, run}}].

%% @doc Runs `terrain attrs'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, Args, Io) ->
    Names = case Args of
                [] -> all;
                _ -> [list_to_atom(A) || A <- Args, length(A) =< 255]
            end,
    terrain_lab_steps:run([fun(_) -> check_names(Args) end,
                           fun terrain_lab_cluster_state:connect/1,
                           fun(Nodes) -> ask(Nodes, Names, maps:get(timeout, Options), Io) end],
                          Options).

%% @doc A sentence for the errors of this command.
-spec format_error({attrs, term()}) -> iolist().
format_error({attrs, {none_answered, N}}) ->
    io_lib:format("none of the ~b nodes answered (each row above says why)", [N]).

%%--------------------------------------------------------------------
%% Internal

%% An attribute name is an atom: at most 255 characters.
check_names(Args) ->
    case [A || A <- Args, length(A) > 255] of
        [] -> ok;
        [Long | _] -> {error, {usage, io_lib:format("attribute name ~ts... has ~b characters; a name has at most 255",
                                                    [lists:sublist(Long, 40), length(Long)])}}
    end.

ask(Nodes, Names, Timeout, Io) ->
    case terrain:attrs(Nodes, Names, #{timeout => Timeout}) of
        {error, _} = Error ->
            Error;
        Results ->
            print(Names, Nodes, Results, Io),
            Answered = length([ok || {ok, _} <- maps:values(Results)]),
            Silent = [N || N <- Nodes, element(1, maps:get(N, Results)) =:= error],
            case {Answered, Silent} of
                {_, []} ->
                    terrain_lab_io:progress(Io, "~b of ~b nodes answered~n", [Answered, length(Nodes)]);
                {0, _} ->
                    {error, {attrs, {none_answered, length(Nodes)}}};
                _ ->
                    terrain_lab_io:progress(Io, "~b of ~b nodes answered; no answer from ~ts~n",
                                            [Answered, length(Nodes),
                                             lists:join(", ", [atom_to_list(N) || N <- Silent])])
            end
    end.

print(all, Nodes, Results, Io) ->
    lists:foreach(
      fun(Node) ->
              case maps:get(Node, Results) of
                  {ok, Values} ->
                      terrain_lab_io:out(Io, "~ts~n", [Node]),
                      Width = lists:max([0 | [length(atom_to_list(K)) || K <- maps:keys(Values)]]),
                      [terrain_lab_io:out(Io, "  ~-*ts  ~ts~n", [Width, atom_to_list(K), text(V)])
                       || {K, V} <- lists:sort(maps:to_list(Values))];
                  {error, Why} ->
                      terrain_lab_io:out(Io, "~ts~n  (~ts)~n", [Node, terrain:format_error(Why)])
              end
      end, Nodes);
print(Names, Nodes, Results, Io) ->
    Header = ["NODE" | [atom_to_list(N) || N <- Names]],
    Rows = [case maps:get(Node, Results) of
                {ok, Values} -> [atom_to_list(Node) | [text(maps:get(N, Values)) || N <- Names]];
                {error, Why} ->
                    [atom_to_list(Node), "(" ++ lists:flatten(io_lib:format("~ts", [terrain:format_error(Why)])) ++ ")"]
            end || Node <- Nodes],
    Widths = widths([Header | Rows]),
    [terrain_lab_io:out(Io, "~ts~n", [string:trim(line(Row, Widths), trailing)]) || Row <- [Header | Rows]],
    ok.

text(Value) ->
    lists:flatten(io_lib:format("~0tp", [Value])).

%% The width of each column, from the rows that fill it (an error row spans the rest).
widths(Rows) ->
    Columns = lists:max([length(R) || R <- Rows]),
    [lists:max([string:length(lists:nth(I, R)) || R <- Rows, length(R) >= I, length(R) =:= Columns orelse I =:= 1])
     || I <- lists:seq(1, Columns)].

line(Row, Widths) ->
    lists:join("  ", [string:pad(Cell, W) || {Cell, W} <- lists:zip(Row, lists:sublist(Widths, length(Row)))]).
