%% @private
%% @doc `terrain dashboard': the running cluster in a browser, live (docs/DASHBOARD.md).
%%
%% Starts the view of the cluster of the state directory (`terrain_lab_dashboard') and
%% its HTTP server (`terrain_lab_dashboard_http') in this VM, prints the URL on stdout
%% (with the token when the address is not a loopback one) and serves until SIGTERM or
%% Ctrl-C. `--replay FILE' serves a recorded snapshot instead of a cluster.
-module(terrain_lab_cmd_dashboard).

%% API (command table and CLI handler)
-export([commands/0,
         run/3,
         format_error/1]).

-ignore_xref([{commands, 0}, {run, 3}]).

%% @doc The commands of this module, as `terrain_lab_cli:commands/0' lists them.
-spec commands() -> [terrain_lab_cli:command()].
commands() ->
    [#{name => "dashboard",
       summary => "Serve a live page of the running cluster: tree, states, attributes, placed groups, changes",
       usage => "",
       description => "Serves one self-contained page from this VM, connected to the cluster of the state "
                      "directory: the live tree with heights and version, each node's state (up, joining, "
                      "suspect, leaving), attributes, placed groups, the change log and the last probe's "
                      "latency heatmap beside the spec's model; changes are pushed to the page as they "
                      "happen (Server-Sent Events). Binds 127.0.0.1; any other address needs the token it "
                      "prints (header 'Authorization: Bearer TOKEN' or the printed URL, which sets a "
                      "cookie). Read-only. Runs until SIGTERM or Ctrl-C (docs/DASHBOARD.md).",
       args => {0, 0},
       options => [#{name => port, long => "port", type => integer, default => 8470, range => {0, 65535},
                     metavar => "P", help => "TCP port (0: any free port, printed)"},
                   #{name => bind, long => "bind", type => string, default => "127.0.0.1", metavar => "ADDR",
                     help => "address to listen on; any but 127.0.0.1 and ::1 requires the printed token"},
                   #{name => replay, long => "replay", type => string, metavar => "FILE",
                     help => "serve a recorded snapshot (what /state.json served) instead of the cluster"},
                   terrain_lab_cli_options:state_dir(),
                   (terrain_lab_cli_options:runs_dir())#{help => "where the last probe's latency.json is looked for"}],
       run => {?MODULE, run}}].

%% @doc Runs `terrain dashboard'.
-spec run(#{atom() => term()}, [string()], terrain_lab_io:io()) -> ok | {error, term()}.
run(Options, [], Io) ->
    terrain_lab_steps:run([fun(_) -> address(maps:get(bind, Options)) end,
                           fun(Ip) -> with_page(Ip) end,
                           fun({Ip, Page}) -> with_view(Ip, Page, Options) end,
                           fun(Started) -> serve(Started, Options, Io) end],
                          Options).

%% @doc A sentence for the errors of this command.
-spec format_error({dashboard, term()}) -> iolist().
format_error({dashboard, {listen, {Ip, Port}, eaddrinuse}}) ->
    io_lib:format("port ~b of ~ts is in use (another dashboard?); choose another with --port", [Port, inet:ntoa(Ip)]);
format_error({dashboard, {listen, {Ip, Port}, Why}}) ->
    io_lib:format("cannot listen on ~ts port ~b: ~ts", [inet:ntoa(Ip), Port, inet:format_error(Why)]);
format_error({dashboard, {page, Path}}) ->
    io_lib:format("the dashboard page ~ts is missing from this build of terrain", [Path]);
format_error({dashboard, {read, File, Why}}) ->
    io_lib:format("cannot read ~ts: ~ts", [File, file:format_error(Why)]);
format_error({dashboard, {too_big, File, Size}}) ->
    io_lib:format("~ts has ~b bytes; a recorded snapshot has at most 64 MiB", [File, Size]);
format_error({dashboard, {format, File, Format}}) ->
    io_lib:format("~ts is not a dashboard snapshot (format ~ts, expected terrain.dashboard/1)",
                  [File, case Format of none -> "missing"; _ -> Format end]);
format_error({dashboard, {json, File, {json, Offset, Why}}}) ->
    io_lib:format("~ts is not JSON (byte ~b: ~ts)", [File, Offset, Why]);
format_error({dashboard, {json, File, Why}}) ->
    io_lib:format("~ts is not JSON: ~0tP", [File, Why, 10]);
format_error({dashboard, {view, Why}}) ->
    io_lib:format("the dashboard's view of the cluster ended: ~0tP", [Why, 20]).

%%--------------------------------------------------------------------
%% Internal

address(Text) ->
    case inet:parse_address(Text) of
        {ok, Ip} -> {ok, Ip};
        {error, einval} ->
            {error, {usage, io_lib:format("--bind ~ts is not an IP address (expected e.g. 127.0.0.1 or 0.0.0.0)",
                                          [Text])}}
    end.

with_page(Ip) ->
    case terrain_lab_dashboard:page() of
        {ok, Page} -> {ok, {Ip, Page}};
        {error, _} = Error -> Error
    end.

%% The view: of the recorded snapshot, or of the cluster (this VM joins it first).
with_view(Ip, Page, #{replay := File}) when is_list(File) ->
    case terrain_lab_dashboard:read_snapshot(File) of
        {ok, Snapshot} -> start_view(Ip, Page, #{replay => Snapshot});
        {error, _} = Error -> Error
    end;
with_view(Ip, Page, Options) ->
    case terrain_lab_cluster_state:connect(Options) of
        {ok, _Nodes} ->
            start_view(Ip, Page, #{state_dir => terrain_lab_cluster_state:state_dir(Options),
                                   runs_dir => maps:get(runs_dir, Options)});
        {error, _} = Error ->
            Error
    end.

start_view(Ip, Page, ViewOptions) ->
    {ok, View} = terrain_lab_dashboard:start(ViewOptions),
    Token = case loopback(Ip) of
                true -> none;
                false -> binary:encode_hex(crypto:strong_rand_bytes(16))
            end,
    {ok, {Ip, Page, View, Token}}.

serve({Ip, Page, View, Token}, #{port := Port} = Options, Io) ->
    case terrain_lab_dashboard_http:start(#{ip => Ip, port => Port, token => Token, view => View, page => Page}) of
        {ok, Listen} ->
            Url = url(Ip, terrain_lab_dashboard_http:port(Listen)),
            case Token of
                none -> terrain_lab_io:out(Io, "~ts~n", [Url]);
                _ -> terrain_lab_io:out(Io, "~ts?token=~ts~ntoken: ~ts~n", [Url, Token, Token])
            end,
            terrain_lab_io:progress(Io, "dashboard of ~ts on ~ts; read-only; SIGTERM or Ctrl-C stops it~n",
                                    [source(Options), Url]),
            wait(View);
        {error, _} = Error ->
            ok = terrain_lab_dashboard:stop(View),
            Error
    end.

%% Until SIGTERM (143, as every command) or Ctrl-C; the view ending is a bug.
wait(View) ->
    Ref = erlang:monitor(process, View),
    receive
        {'DOWN', Ref, process, View, Why} -> {error, {dashboard, {view, Why}}}
    end.

%% 127.0.0.1 and ::1 only: any other address, also another of 127/8 (where emulated
%% nodes listen), needs the token.
loopback({127, 0, 0, 1}) -> true;
loopback({0, 0, 0, 0, 0, 0, 0, 1}) -> true;
loopback(_) -> false.

url({_, _, _, _} = Ip, Port) -> io_lib:format("http://~ts:~b/", [inet:ntoa(Ip), Port]);
url(Ip, Port) -> io_lib:format("http://[~ts]:~b/", [inet:ntoa(Ip), Port]).

source(#{replay := File}) when is_list(File) -> "the recorded snapshot " ++ File;
source(Options) -> "the cluster of " ++ terrain_lab_cluster_state:state_dir(Options).
