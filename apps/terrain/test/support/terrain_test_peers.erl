%% Test helper: starts local peer nodes running terrain (in parallel), as OTP's
%% pg_SUITE does with `peer', and stops them.
%%
%% Peers are controlled over their standard input/output (`connection => standard_io'),
%% so a test can cut a peer's distribution connection and still drive it. Each peer
%% gets the code paths of the current node that lie under `_build', the current
%% cookie, and global's partition prevention off (tests stop and isolate nodes on
%% purpose).
-module(terrain_test_peers).

-export([ensure_distributed/0, start/2, start/3, stop/1, call/4, call/5, node_of/1, wait_until/2, wait_until/3,
         beam_count/1, unique_prefix/1, wait_quiet/2]).

-type peer() :: {pid(), node()}.
-export_type([peer/0]).

-define(CALL_TIMEOUT, 10000).

%% @doc Makes this node distributed (short names) if it is not: `rebar3 ct' may run
%% the suite on a node without distribution.
-spec ensure_distributed() -> ok.
ensure_distributed() ->
    case is_alive() of
        true ->
            ok;
        false ->
            _ = os:cmd("epmd -daemon"),
            {ok, _} = net_kernel:start(list_to_atom("terrain_ct_" ++ os:getpid()), #{name_domain => shortnames}),
            ok
    end.

%% @doc Starts one peer per name, in parallel, each running the `terrain' application
%% with the given application environment (a fun of the name, or a list).
-spec start([atom()], [{atom(), term()}] | fun((atom()) -> [{atom(), term()}])) -> [peer()].
start(Names, Env) ->
    start(Names, Env, fun(_) -> [] end).

%% @doc As start/2, with extra VM arguments per name.
-spec start([atom()], [{atom(), term()}] | fun((atom()) -> [{atom(), term()}]),
            fun((atom()) -> [string()])) -> [peer()].
start(Names, Env, ExtraArgs) ->
    EnvFun = case is_function(Env) of true -> Env; false -> fun(_) -> Env end end,
    Parent = self(),
    Starters = [spawn_monitor(fun() -> Parent ! {started, self(), start_one(Name, EnvFun(Name), ExtraArgs(Name))} end)
                || Name <- Names],
    Results = [receive
                   {started, Pid, Result} -> demonitor(MRef, [flush]), Result;
                   {'DOWN', MRef, process, Pid, Reason} -> {error, Reason}
               after 60000 -> {error, timeout}
               end || {Pid, MRef} <- Starters],
    case [R || {error, _} = R <- Results] of
        [] ->
            Results;
        [Error | _] ->
            stop([P || {P, _} = P <- Results, is_pid(element(1, P))]),
            error({peers_not_started, Error})
    end.

start_one(Name, Env, Extra) ->
    Paths = [P || P <- code:get_path(), string:find(P, "_build") =/= nomatch],
    Args = ["-setcookie", atom_to_list(erlang:get_cookie()),
            "-kernel", "prevent_overlapping_partitions", "false",
            "-kernel", "logger_level", "warning"]
        ++ lists:append([["-pa", P] || P <- Paths]) ++ Extra,
    try peer:start(#{name => Name, args => Args, connection => standard_io, wait_boot => 30000}) of
        {ok, Pid, Node} ->
            try
                %% load first: loading sets the .app file's defaults over earlier set_env calls
                ok = peer:call(Pid, application, load, [terrain], ?CALL_TIMEOUT),
                [ok = peer:call(Pid, application, set_env, [terrain, K, V], ?CALL_TIMEOUT) || {K, V} <- Env],
                {ok, _} = peer:call(Pid, application, ensure_all_started, [terrain], ?CALL_TIMEOUT),
                {Pid, Node}
            catch
                Class:Reason ->
                    catch_stop(Pid),
                    {error, {Name, Class, Reason}}
            end;
        {error, Reason} ->
            {error, {Name, Reason}}
    catch
        exit:Reason -> {error, {Name, Reason}}
    end.

%% @doc Stops peers (already stopped ones are fine).
-spec stop([peer()]) -> ok.
stop(Peers) ->
    lists:foreach(fun({Pid, _Node}) -> catch_stop(Pid) end, Peers).

catch_stop(Pid) ->
    try peer:stop(Pid)
    catch exit:_ -> ok   % already gone
    end.

%% @doc Calls a function on a peer over its control connection.
-spec call(peer(), module(), atom(), [term()]) -> term().
call(Peer, M, F, A) ->
    call(Peer, M, F, A, ?CALL_TIMEOUT).

-spec call(peer(), module(), atom(), [term()], timeout()) -> term().
call({Pid, _Node}, M, F, A, Timeout) ->
    peer:call(Pid, M, F, A, Timeout).

-spec node_of(peer()) -> node().
node_of({_Pid, Node}) ->
    Node.

%% @doc Polls Fun every 10 ms until it returns true; fails after Timeout ms.
-spec wait_until(fun(() -> boolean()), pos_integer()) -> ok.
wait_until(Fun, Timeout) ->
    wait_until(Fun, Timeout, "condition").

-spec wait_until(fun(() -> boolean()), pos_integer(), string()) -> ok.
wait_until(Fun, Timeout, What) ->
    Deadline = erlang:monotonic_time(millisecond) + Timeout,
    poll(Fun, Deadline, What).

poll(Fun, Deadline, What) ->
    case Fun() of
        true ->
            ok;
        false ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> error({timeout_waiting_for, What});
                false -> receive after 10 -> poll(Fun, Deadline, What) end
            end
    end.

%% @doc The number of beam.smp processes on this machine.
-spec beam_count(string()) -> non_neg_integer().
beam_count(Prefix) ->
    length([File || File <- filelib:wildcard("/proc/[0-9]*/cmdline"), runs_beam_named(File, Prefix)]).

%% Whether a process's command line is a BEAM (argv[0] ends in beam.smp) with `Prefix'
%% in one of its arguments: this test's peers, never another run's VMs.
runs_beam_named(File, Prefix) ->
    case file:read_file(File) of
        {ok, Cmdline} ->
            case binary:split(Cmdline, <<0>>, [global, trim_all]) of
                [Exe | Args] ->
                    lists:suffix("beam.smp", binary_to_list(Exe))
                        andalso lists:any(fun(Arg) -> binary:match(Arg, list_to_binary(Prefix)) =/= nomatch end, Args);
                [] -> false
            end;
        {error, _} -> false   % the process ended meanwhile
    end.

%% @doc A prefix that makes node names unique per run and test case.
-spec unique_prefix(atom()) -> string().
unique_prefix(Case) ->
    "t" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:phash2(Case, 100000)) ++ "_".

%% @doc For benchmarks: waits until the machine's CPUs are at least `Idle' (0..1) idle
%% over one second (read from /proc/stat), or `MaxMs' have passed. Returns the last
%% idle fraction measured. Freshly booted peers keep the CPUs busy for a while.
-spec wait_quiet(float(), pos_integer()) -> float().
wait_quiet(Idle, MaxMs) ->
    Deadline = erlang:monotonic_time(millisecond) + MaxMs,
    quiet(Idle, Deadline).

quiet(Idle, Deadline) ->
    {Busy0, Total0} = cpu_times(),
    receive after 1000 -> ok end,
    {Busy1, Total1} = cpu_times(),
    Fraction = 1 - (Busy1 - Busy0) / max(1, Total1 - Total0),
    case Fraction >= Idle orelse erlang:monotonic_time(millisecond) > Deadline of
        true -> Fraction;
        false -> quiet(Idle, Deadline)
    end.

%% user + nice + system + irq + softirq + steal, and the total, from the first line.
cpu_times() ->
    {ok, Bin} = file:read_file("/proc/stat"),
    [Line | _] = binary:split(Bin, <<"\n">>),
    [_Cpu | Fields] = string:lexemes(binary_to_list(Line), " "),
    [User, Nice, System, IdleT, IoWait, Irq, SoftIrq, Steal | _] = [list_to_integer(F) || F <- Fields],
    Busy = User + Nice + System + Irq + SoftIrq + Steal,
    {Busy, Busy + IdleT + IoWait}.
