%% @private
%% @doc The resource guard: every command that starts VMs or allocates memory per
%% item (members, ants, agents, workers, payload bytes) asks here first, before
%% anything starts, so that no option value can exhaust the machine's memory, the
%% atom table or a VM's process table.
%%
%% Memory is estimated from what the items are (documented in docs/CLI.md,
%% "Limits"): a VM of the lab at 23 MB and 55 kB more for each distribution connection
%% it holds (measured, {@link vm_memory_mb/2}), a process at ?PROCESS_BYTES bytes (its
%% initial heap and stack, 338 words, and its control block, rounded up), and per-item
%% data as each command states it. The total is refused when it exceeds ?MEM_SHARE% of
%% `MemAvailable' in /proc/meminfo; process counts when they exceed the process limit
%% of the VM they run on (a lab node's `+P', {@link process_limit/1}, or this VM's), and
%% node counts when their names would not fit in the atom table.
%% ```
%% ok = terrain_lab_guard:vms(Nodes, #{force => false}),
%% ok = terrain_lab_guard:memory([{"--members-per-node", Processes, Bytes}]).
%% '''
-module(terrain_lab_guard).

%% API
-export([vms/2,
         memory/1,
         processes/3,
         process_limit/1,
         node_count/1,
         process_bytes/0,
         vm_memory_mb/2,
         mem_available_mb/0,
         format_error/1]).

-export_type([item/0, target/0]).

%% One kind of item a command allocates: the option that sets its number (for the
%% message), how many there are, and the bytes each takes.
-type item() :: {Option :: string(), Count :: non_neg_integer(), BytesEach :: non_neg_integer()}.

%% The VM processes run on: a node the lab starts (lean: `+P' ?LAB_PROCESS_LIMIT) or
%% this VM (the CLI's, whose limit a VM started without `+P' shares: the default).
-type target() :: lab_node | this_vm.

%% exports_not_used: vm_memory_mb/2 is read by terrain_lab_cli_contract_SUITE to size a spec too big.
-ignore_xref([{vm_memory_mb, 2}]).

%% Memory one node's VM takes (MemAvailable before and after, lab VM flags, two runs
%% of 256 VMs on a quiet machine, docs/BENCHMARKS.md "256 VMs"): 22.3–22.8 MB
%% unconnected, and 53.6–55.5 kB more for each distribution connection it holds: a
%% full mesh of 256 VMs is 37 MB per VM.
-define(VM_BASE_KB, 23 * 1024).
-define(CONNECTION_KB, 55).
-define(MEM_SHARE, 80).          % % of MemAvailable a command may take
-define(PROCESS_BYTES, 3000).    % an Erlang process: 338 words of heap and stack, and its PCB
-define(MAX_NODES, 100000).      % node names are atoms: at most this many per command
%% A lab node's process table (`+P', the launcher's lean flags, terrain_lab_vm): 65,536
%% entries instead of the default 262,144, 2.9 MB less resident per VM.
-define(LAB_PROCESS_LIMIT, 65536).
-define(RUNTIME_PROCESSES, 1000). % room left for the runtime's and terrain's own processes

%%--------------------------------------------------------------------
%% API

%% @doc Refuses `Count' VMs that would not fit in memory (unless `force') or whose
%% names would not fit in the atom table.
%% `full_mesh' (default true): the VMs will hold a connection to every other
%% (`global''s default), each costing memory; false for `connect_all => false'.
-spec vms(non_neg_integer(), #{force => boolean(), full_mesh => boolean()}) -> ok | {error, {guard, term()}}.
vms(Count, Options) ->
    case node_count(Count) of
        ok ->
            NeedMb = Count * vm_memory_mb(max(Count, 1), maps:get(full_mesh, Options, true)),
            case {maps:get(force, Options, false), mem_available_mb()} of
                {false, {ok, Available}} when NeedMb > Available * ?MEM_SHARE div 100 ->
                    {error, {guard, {vms, Count, NeedMb, Available * ?MEM_SHARE div 100}}};
                _ ->
                    ok
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Refuses a node count whose names cannot all be atoms (checked before any
%% name is made: `--per-host 100000000' would exhaust the atom table).
-spec node_count(non_neg_integer()) -> ok | {error, {guard, term()}}.
node_count(Count) when Count > ?MAX_NODES ->
    {error, {guard, {nodes, Count, ?MAX_NODES}}};
node_count(_Count) ->
    ok.

%% @doc Refuses items whose memory together exceeds the share of `MemAvailable'.
-spec memory([item()]) -> ok | {error, {guard, term()}}.
memory(Items) ->
    Need = lists:sum([Count * Bytes || {_, Count, Bytes} <- Items]),
    case mem_available_mb() of
        {ok, Available} when Need > Available * 1024 * 1024 * ?MEM_SHARE div 100 ->
            [{Option, _, _} | _] = lists:reverse(lists:keysort(2, [{O, C * B, B} || {O, C, B} <- Items])),
            {error, {guard, {memory, Option, Need div (1024 * 1024), Available * ?MEM_SHARE div 100}}};
        _ ->
            ok
    end.

%% @doc Refuses `Count' processes on one VM of `Target' when they exceed its process
%% limit, less room for the runtime's own.
-spec processes(string(), non_neg_integer(), target()) -> ok | {error, {guard, term()}}.
processes(Option, Count, Target) ->
    Limit = process_limit(Target) - ?RUNTIME_PROCESSES,
    case Count > Limit of
        true -> {error, {guard, {processes, Option, Count, Limit}}};
        false -> ok
    end.

%% @doc The process limit of a VM of `Target': a lab node's `+P' (the one place its
%% value is written; terrain_lab_vm puts it on every lean VM's command line), or this
%% VM's.
-spec process_limit(target()) -> pos_integer().
process_limit(lab_node) ->
    ?LAB_PROCESS_LIMIT;
process_limit(this_vm) ->
    erlang:system_info(process_limit).

%% @doc The estimated memory of one process, bytes.
-spec process_bytes() -> pos_integer().
process_bytes() ->
    ?PROCESS_BYTES.

%% @doc The memory one node's VM is estimated to take, in MB, in a cluster of
%% `Count' nodes, connected to every other (`global''s full mesh) or not
%% (`connect_all => false': connections on demand, counted as none).
-spec vm_memory_mb(pos_integer(), FullMesh :: boolean()) -> pos_integer().
vm_memory_mb(Count, true) ->
    (?VM_BASE_KB + ?CONNECTION_KB * (Count - 1) + 1023) div 1024;
vm_memory_mb(_Count, false) ->
    (?VM_BASE_KB + 1023) div 1024.

%% @doc A sentence for a refusal.
-spec format_error({guard, term()}) -> iolist().
format_error({guard, {vms, Count, NeedMb, LimitMb}}) ->
    io_lib:format("~b nodes need about ~b MB (~b MB per VM) but only ~b MB are available (~b% of MemAvailable); "
                  "nothing was started; use a smaller spec, or --force to start anyway (terrain up only)",
                  [Count, NeedMb, NeedMb div max(Count, 1), LimitMb, ?MEM_SHARE]);
format_error({guard, {nodes, Count, Max}}) ->
    io_lib:format("~b nodes are more than terrain starts (at most ~b: every node name is an atom); "
                  "nothing was started", [Count, Max]);
format_error({guard, {memory, Option, NeedMb, LimitMb}}) ->
    io_lib:format("this run needs about ~b MB, mostly for ~ts, but only ~b MB are available (~b% of "
                  "MemAvailable); nothing was started; give a smaller ~ts (limits: docs/CLI.md)",
                  [NeedMb, Option, LimitMb, ?MEM_SHARE, Option]);
format_error({guard, {processes, Option, Count, Limit}}) ->
    io_lib:format("~ts asks for ~b processes on one VM, more than its process limit allows (~b); "
                  "nothing was started", [Option, Count, Limit]).

%%--------------------------------------------------------------------
%% Internal functions

%% @doc `MemAvailable' of /proc/meminfo in MB, `unknown' where it cannot be read
%% (exported for the scaling experiment's memory figures).
-spec mem_available_mb() -> {ok, non_neg_integer()} | unknown.
mem_available_mb() ->
    case file:read_file("/proc/meminfo") of
        {ok, Text} ->
            case re:run(Text, "MemAvailable:\\s+(\\d+) kB", [{capture, all_but_first, list}]) of
                {match, [Kb]} -> {ok, list_to_integer(Kb) div 1024};
                nomatch -> unknown
            end;
        {error, _} ->
            unknown
    end.

%%--------------------------------------------------------------------
%% Tests

-ifdef(TEST).
-include_lib("eunit/include/eunit.hrl").

vms_refuses_more_than_memory_test() ->
    ?assertMatch({error, {guard, {vms, 90000, _, _}}}, vms(90000, #{})),   % 3.6 TB
    ?assertEqual(ok, vms(2, #{})).

vms_force_skips_memory_but_not_atoms_test() ->
    ?assertEqual(ok, vms(50000, #{force => true})),
    ?assertMatch({error, {guard, {nodes, 100000000, _}}}, vms(100000000, #{force => true})).

memory_names_the_largest_item_test() ->
    {error, {guard, {memory, Option, _, _}} = Reason} =
        memory([{"--rounds", 10, 8}, {"--sizes", 2, 100000000000000}]),
    ?assertEqual("--sizes", Option),
    ?assertMatch("this run needs about " ++ _, lists:flatten(format_error(Reason))),
    ?assertEqual(ok, memory([{"--sizes", 4, 1048576}])).

processes_test() ->
    ?assertMatch({error, {guard, {processes, "--ants", 100000000, _}}}, processes("--ants", 100000000, this_vm)),
    ?assertEqual(ok, processes("--ants", 100, lab_node)).

%% A lab node's limit is its own, not this VM's: 100,000 processes fit here, not there.
processes_are_checked_against_the_target_vm_test() ->
    ?assertEqual({error, {guard, {processes, "--members-per-node", 100000, 64536}}},
                 processes("--members-per-node", 100000, lab_node)),
    ?assertEqual(ok, processes("--members-per-node", 100000, this_vm)).
-endif.
