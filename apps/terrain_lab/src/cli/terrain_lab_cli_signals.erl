%% @private
%% @doc SIGTERM for the `terrain' escript: by default it halts the CLI at once (exit
%% 143, as a VM does); a command that can stop cleanly asks for the signal as a
%% message instead, with {@link on_interrupt/2}, for as long as it runs.
%%
%% SIGINT (Ctrl-C) cannot be handled this way on OTP 25: `os:set_signal(sigint,
%% handle)' is `badarg' (only the emulator's break handler sees SIGINT; `+Bi' would
%% ignore it, `+Bd' halts at once). The CLI keeps the default, so Ctrl-C stops any
%% command at once; a command that must leave something behind writes it as it goes
%% (`terrain probe' writes its files after every round). The CPU cgroups a command made are
%% removed after Ctrl-C or SIGKILL by a cleanup sentinel (terrain_lab_cgroup_sentinel).
-module(terrain_lab_cli_signals).
-behaviour(gen_event).

%% API
-export([install/0,
         on_interrupt/2,
         clear/0,
         settled/0]).

%% gen_event callbacks
-export([init/1, handle_event/2, handle_call/2, handle_info/2, terminate/2]).

-ignore_xref([{init, 1}, {handle_event, 2}, {handle_call, 2}, {handle_info, 2}, {terminate, 2}]).

-define(EXIT_TERM, 143).    % 128 + SIGTERM
-define(SETTLE_MS, 120000). % the longest SIGTERM's cleanups may take before a failed command reports

%% @doc Takes SIGTERM over from the VM's default handler `erl_signal_handler' (which
%% would stop the VM with `init:stop/0' whatever else handles the signal).
-spec install() -> ok.
install() ->
    ok = terrain_lab_cleanup:init(),
    ok = os:set_signal(sigterm, handle),
    ok = case lists:member(?MODULE, gen_event:which_handlers(erl_signal_server)) of
             true -> ok;
             false -> gen_event:swap_handler(erl_signal_server, {erl_signal_handler, swapped}, {?MODULE, none})
         end,
    %% A SIGTERM that came while the VM booted went to the default handler, whose
    %% init:stop/0 waits for the boot (the escript's main) to end: the command ran on
    %% and exited 0. init remembers it as `stopping'.
    case init:get_status() of
        {stopping, _} -> terminated();
        _ -> ok
    end.

%% Ends the CLI as SIGTERM does: the one exit path's cleanups (temporary files,
%% child processes, clusters and their cgroups: terrain_lab_cleanup), then exit 143.
-spec terminated() -> no_return().
terminated() ->
    io:format(standard_error, "terrain: terminated (SIGTERM)~n", []),
    _ = terrain_lab_cleanup:run(),
    erlang:halt(?EXIT_TERM).

%% @doc From now on SIGTERM sends `Message' to `Pid' instead of halting.
-spec on_interrupt(pid(), term()) -> ok.
on_interrupt(Pid, Message) ->
    call({target, {Pid, Message}}).

%% @doc SIGTERM halts again.
-spec clear() -> ok.
clear() ->
    call({target, none}).

%% @doc Returns once no SIGTERM is being handled. A SIGTERM's cleanups stop the
%% command's children, so the command may see a child fail and report it while the
%% handler is still at work; a command asks this before it reports a failure or exits,
%% and never returns if the handler is halting the CLI (exit 143, not the command's 1).
-spec settled() -> ok.
settled() ->
    try call({target, keep}, ?SETTLE_MS)
    catch exit:{timeout, _} -> ok
    end.

call(Request) ->
    call(Request, 5000).

call(Request, Timeout) ->
    case lists:member(?MODULE, gen_event:which_handlers(erl_signal_server)) of
        true -> gen_event:call(erl_signal_server, ?MODULE, Request, Timeout);
        false -> ok                 % not the escript (a test runs the CLI in-process)
    end.

%% @private
-spec init({none, term()} | none) -> {ok, none}.
init({none, _Swapped}) ->
    {ok, none};
init(none) ->
    {ok, none}.

%% @private
-spec handle_event(term(), none | {pid(), term()}) -> {ok, none | {pid(), term()}}.
handle_event(sigterm, {Pid, Message} = Target) ->
    Pid ! Message,
    {ok, Target};
handle_event(sigterm, none) ->
    terminated();
handle_event(_Signal, Target) ->
    {ok, Target}.

%% @private
-spec handle_call(term(), none | {pid(), term()}) -> {ok, ok, none | {pid(), term()}}.
handle_call({target, keep}, Target) ->
    {ok, ok, Target};
handle_call({target, Target}, _Old) ->
    {ok, ok, Target}.

%% @private
-spec handle_info(term(), State) -> {ok, State}.
handle_info(_Info, State) ->
    {ok, State}.

%% @private
-spec terminate(term(), term()) -> ok.
terminate(_Reason, _State) ->
    ok.
