%% @private
%% @doc A logger handler that a chaos run (`terrain chaos') installs on every node of
%% its cluster: it sends the collector (a process of the run, on the CLI's VM) one
%% message per crash of a terrain process, `{terrain_chaos_crash, Node, Text}'. A crash
%% is a proc_lib crash report, a gen_server or gen_statem termination report, or a
%% supervisor's child_terminated report, of a process whose initial call, registered
%% name or child id names a `terrain' module. Nothing is kept on the node.
-module(terrain_lab_chaos_log).

%% API
-export([install/1,
         crash_text/1]).

%% logger handler callbacks
-export([log/2]).

%% exports_not_used: install/1 is called on the cluster's nodes by erpc; log/2 by logger;
%% crash_text/1 is checked on its own by terrain_lab_chaos_checker_tests.
-ignore_xref([{install, 1}, {log, 2}, {crash_text, 1}]).

-define(HANDLER, terrain_lab_chaos).

%%--------------------------------------------------------------------
%% API

%% @doc Installs the handler on this node, sending to `Collector'; `ok' also when it is
%% installed already.
-spec install(pid()) -> ok | {error, term()}.
install(Collector) ->
    case logger:add_handler(?HANDLER, ?MODULE, #{config => #{collector => Collector}, level => error}) of
        ok -> ok;
        {error, {already_exist, _}} -> logger:update_handler_config(?HANDLER, config, #{collector => Collector});
        {error, _} = Error -> Error
    end.

%% @doc The crash a log event reports, as a line of text; `none' when it is not a crash
%% of a terrain process.
-spec crash_text(logger:log_event()) -> binary() | none.
crash_text(#{msg := {report, #{label := Label} = Report}}) ->
    Who = who(Label, Report),
    case is_crash(Label) andalso is_terrain(Who) of
        true -> iolist_to_binary(io_lib:format("~0tp of ~0tP: ~0tP", [Label, Who, 8, reason(Report), 12]));
        false -> none
    end;
crash_text(_Event) ->
    none.

%%--------------------------------------------------------------------
%% logger handler callbacks

%% @private
-spec log(logger:log_event(), logger:handler_config()) -> ok.
log(Event, #{config := #{collector := Collector}}) ->
    case crash_text(Event) of
        none -> ok;
        Text -> Collector ! {terrain_chaos_crash, node(), Text}, ok
    end.

%%--------------------------------------------------------------------
%% Internal

is_crash({proc_lib, crash}) -> true;
is_crash({gen_server, terminate}) -> true;
is_crash({gen_statem, terminate}) -> true;
is_crash({supervisor, child_terminated}) -> true;
is_crash(_) -> false.

%% The process's names: initial call, registered name, server name, child id.
who({proc_lib, crash}, #{report := [Info | _]}) when is_list(Info) ->
    [proplists:get_value(K, Info) || K <- [initial_call, registered_name]];
who({supervisor, child_terminated}, #{report := Report}) when is_list(Report) ->
    Child = proplists:get_value(offender, Report, []),
    [proplists:get_value(K, Child) || is_list(Child), K <- [id, mfargs]];
who(_Label, Report) ->
    [maps:get(name, Report, undefined)].

is_terrain(Who) ->
    lists:any(fun(W) -> lists:prefix("terrain", lists:flatten(io_lib:format("~0tp", [W]))) end,
              [case W of {M, _, _} -> M; _ -> W end || W <- Who, W =/= undefined, W =/= []]).

reason(#{report := [Info | _]}) when is_list(Info) -> proplists:get_value(error_info, Info);
reason(#{reason := Reason}) -> Reason;
reason(#{report := Report}) when is_list(Report) -> proplists:get_value(reason, Report);
reason(_) -> undefined.
