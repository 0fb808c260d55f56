%% The attribute server on one node: kinds, configuration, ownership, restarts,
%% isolation of dynamic functions, and what a bad configuration does (nothing).
-module(terrain_attr_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_testcase/2, end_per_testcase/2]).
-export([every_kind_from_a_file/0, every_kind_from_a_file/1,
         application_env_attrs_override_the_file/0, application_env_attrs_override_the_file/1,
         builtins_can_be_omitted_and_overridden/0, builtins_can_be_omitted_and_overridden/1,
         sampled_attribute_is_a_moving_average/0, sampled_attribute_is_a_moving_average/1,
         hanging_dynamic_attribute_is_undefined_and_server_stays_responsive/0,
         hanging_dynamic_attribute_is_undefined_and_server_stays_responsive/1,
         crashing_dynamic_attribute_is_undefined/0, crashing_dynamic_attribute_is_undefined/1,
         failing_attributes_are_logged_once_per_cause/0, failing_attributes_are_logged_once_per_cause/1,
         owner_death_removes_its_values/0, owner_death_removes_its_values/1,
         persistent_values_outlive_their_setter/0, persistent_values_outlive_their_setter/1,
         delete_uncovers_the_configured_value/0, delete_uncovers_the_configured_value/1,
         killed_server_restarts_with_configured_and_owned_values/0,
         killed_server_restarts_with_configured_and_owned_values/1,
         owner_dying_while_server_is_down_is_cleaned_up/0, owner_dying_while_server_is_down_is_cleaned_up/1,
         every_bad_configuration_is_rejected_whole/0, every_bad_configuration_is_rejected_whole/1,
         bad_configuration_at_start_leaves_the_node_running/0,
         bad_configuration_at_start_leaves_the_node_running/1,
         load_attrs_merges_and_replaces/0, load_attrs_merges_and_replaces/1,
         api_rejects_bad_arguments/0, api_rejects_bad_arguments/1,
         malformed_messages_are_dropped_and_counted/0, malformed_messages_are_dropped_and_counted/1,
         choose_on_the_local_node/0, choose_on_the_local_node/1,
         cache_stores_rows_as_built_unless_values_were_forgotten/0,
         cache_stores_rows_as_built_unless_values_were_forgotten/1,
         topology_outlives_restarts_but_not_the_application/0,
         topology_outlives_restarts_but_not_the_application/1]).

%% dynamic attribute functions used by the tests
-export([hang/0, crash/0, crash_with_detail/0, crash_or_exit/0, sample/0, answer/1, slow_answer/1]).

%% logger handler that sends every event to a test process
-export([log/2]).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [every_kind_from_a_file, application_env_attrs_override_the_file, builtins_can_be_omitted_and_overridden,
     sampled_attribute_is_a_moving_average,
     hanging_dynamic_attribute_is_undefined_and_server_stays_responsive, crashing_dynamic_attribute_is_undefined,
     failing_attributes_are_logged_once_per_cause,
     owner_death_removes_its_values, persistent_values_outlive_their_setter, delete_uncovers_the_configured_value,
     killed_server_restarts_with_configured_and_owned_values, owner_dying_while_server_is_down_is_cleaned_up,
     every_bad_configuration_is_rejected_whole, bad_configuration_at_start_leaves_the_node_running,
     load_attrs_merges_and_replaces, api_rejects_bad_arguments, malformed_messages_are_dropped_and_counted,
     choose_on_the_local_node, cache_stores_rows_as_built_unless_values_were_forgotten,
     topology_outlives_restarts_but_not_the_application].

init_per_testcase(_Case, Config) ->
    _ = application:stop(terrain),
    _ = application:unload(terrain),
    ok = application:load(terrain),
    Config.

end_per_testcase(_Case, _Config) ->
    _ = application:stop(terrain),
    _ = application:unload(terrain),
    ok.

%%--------------------------------------------------------------------
%% Functions named by dynamic attributes

hang() -> receive after infinity -> ok end.
crash() -> error(deliberate_crash).
%% the same cause with a different detail every time
crash_with_detail() -> error({deliberate, erlang:unique_integer()}).
%% two causes in turn
crash_or_exit() ->
    case erlang:unique_integer([positive, monotonic]) rem 2 of
        0 -> error(deliberate_crash);
        1 -> exit(deliberate_exit)
    end.

log(Event, #{config := #{to := Pid}}) ->
    Pid ! {logged, Event},
    ok.
sample() -> persistent_term:get({?MODULE, sample}, undefined).
answer(X) -> X.
slow_answer(X) -> receive after 30 -> X end.

%%--------------------------------------------------------------------
%% Helpers

write(Config, Name, Text) ->
    File = filename:join(?config(priv_dir, Config), Name),
    ok = file:write_file(File, Text),
    File.

start(Env) ->
    [ok = application:set_env(terrain, K, V) || {K, V} <- Env],
    {ok, _} = application:ensure_all_started(terrain),
    ok.

stat(Name) ->
    maps:get(Name, terrain:stats()).

server_restarted(Old) ->
    fun() -> case whereis(terrain_attr_server) of
                 undefined -> false;
                 Old -> false;
                 _ -> true
             end
    end.

%%--------------------------------------------------------------------
%% Cases

every_kind_from_a_file() ->
    [{doc, "A configuration file with static, dynamic (both MFA shapes), automatic and sampled attributes."}].
every_kind_from_a_file(Config) ->
    File = write(Config, "kinds.attrs",
                 "[{num_cpus, 4},\n"
                 " {os, \"Linux\"},\n"
                 " {tuple_value, {static, {dynamic, {m, f}}}},\n"
                 " {procs, {dynamic, {erlang, system_info, [process_count]}}},\n"
                 " {node_name, {dynamic, {erlang, node}}},\n"
                 " {loaded_at, {automatic, {erlang, monotonic_time, []}}},\n"
                 " {avg, {sampled, {terrain_attr_SUITE, answer, [3]}, #{interval => 20, window => 4}}}].\n"),
    ok = start([{attr_config, File}]),
    ?assertEqual(4, terrain:attr(num_cpus)),
    ?assertEqual("Linux", terrain:attr(os)),
    ?assertEqual({dynamic, {m, f}}, terrain:attr(tuple_value)),
    ?assert(is_integer(terrain:attr(procs))),
    ?assertEqual(node(), terrain:attr(node_name)),
    Loaded = terrain:attr(loaded_at),
    ?assert(is_integer(Loaded)),
    ?assertEqual(Loaded, terrain:attr(loaded_at)),          % evaluated once
    terrain_test_peers:wait_until(fun() -> terrain:attr(avg) == 3 end, 5000, "first sample"),
    ?assertEqual(undefined, terrain:attr(no_such_attribute)),
    %% built-ins are there too
    ?assertEqual(os:type(), terrain:attr(os_type)),
    Node = node(),
    #{Node := {ok, Values}} = terrain:attrs([node()], [num_cpus, node_name, no_such_attribute]),
    ?assertEqual(#{num_cpus => 4, node_name => node(), no_such_attribute => undefined}, Values).

application_env_attrs_override_the_file() ->
    [{doc, "The attrs environment key (set by the launcher) is loaded after attr_config and overrides it."}].
application_env_attrs_override_the_file(Config) ->
    File = write(Config, "base.attrs", "{rack, r1}.\n{gpu, false}.\n"),
    ok = start([{attr_config, File}, {attrs, [{gpu, true}, {site, eu}]}]),
    ?assertEqual(r1, terrain:attr(rack)),
    ?assertEqual(true, terrain:attr(gpu)),
    ?assertEqual(eu, terrain:attr(site)).

builtins_can_be_omitted_and_overridden() ->
    [{doc, "builtins => false omits every built-in; a configured attribute overrides a built-in."}].
builtins_can_be_omitted_and_overridden(_Config) ->
    ok = start([{builtins, false}, {attrs, [{mine, 1}]}]),
    Node = node(),
    #{Node := {ok, All}} = terrain:attrs([node()], all),
    ?assertEqual(#{mine => 1}, All),
    ok = application:stop(terrain),
    ok = start([{builtins, true}, {attrs, [{loadavg1, 0.25}]}]),
    ?assertEqual(0.25, terrain:attr(loadavg1)),
    ?assert(is_float(terrain:attr(loadavg5)) orelse terrain:attr(loadavg5) =:= undefined).

sampled_attribute_is_a_moving_average() ->
    [{doc, "A sampled attribute holds the mean of its last `window' numeric samples; other samples are skipped."}].
sampled_attribute_is_a_moving_average(_Config) ->
    persistent_term:put({?MODULE, sample}, 10),
    try
        ok = start([{attrs, [{s, {sampled, {?MODULE, sample, []}, #{interval => 10, window => 2}}}]}]),
        terrain_test_peers:wait_until(fun() -> terrain:attr(s) == 10 end, 5000, "average of 10s"),
        persistent_term:put({?MODULE, sample}, 20),
        %% the window of two passes through 15 (one 10, one 20) on its way to 20
        terrain_test_peers:wait_until(fun() -> terrain:attr(s) == 20 end, 5000, "average of 20s"),
        persistent_term:put({?MODULE, sample}, not_a_number),
        ?assert(lists:member(terrain:attr(s), [20.0, 20])),
        persistent_term:put({?MODULE, sample}, 40),
        terrain_test_peers:wait_until(fun() -> terrain:attr(s) == 40 end, 5000, "average of 40s"),
        %% the built-in sampled attribute is a fraction
        terrain_test_peers:wait_until(fun() -> is_float(terrain:attr(scheduler_utilisation)) end, 5000,
                                      "scheduler utilisation"),
        U = terrain:attr(scheduler_utilisation),
        ?assert(U >= 0.0 andalso U =< 1.0)
    after
        persistent_term:erase({?MODULE, sample})
    end.

hanging_dynamic_attribute_is_undefined_and_server_stays_responsive() ->
    [{doc, "A dynamic attribute that never returns gives undefined after its timeout, locally and to "
           "remote-style requests, and the server keeps serving writes meanwhile."}].
hanging_dynamic_attribute_is_undefined_and_server_stays_responsive(_Config) ->
    ok = start([{attrs, [{hangs, {dynamic, {?MODULE, hang, []}, #{timeout => 3000}}},
                         {quick, {dynamic, {?MODULE, hang, []}, #{timeout => 50}}},
                         {fine, 1}]}]),
    Before = stat(dynamic_timeouts),
    ?assertEqual(undefined, terrain:attr(quick)),
    ?assertEqual(Before + 1, stat(dynamic_timeouts)),
    %% Ask the responder the way another node does, five times; each answer takes 3 s.
    Refs = [begin
                Ref = alias(),
                terrain_attr_responder ! {'$terrain_attrs', 1, Ref, [hangs, fine]},
                Ref
            end || _ <- lists:seq(1, 5)],
    %% Meanwhile the server takes writes and the responder answers other requests at once.
    ok = terrain:set_attr(written, yes),
    Ref2 = alias(),
    terrain_attr_responder ! {'$terrain_attrs', 1, Ref2, [fine, written]},
    receive
        {Ref2, Answer} -> ?assertEqual([{fine, 1, static}, {written, yes, volatile}], Answer)
    after 2000 -> ct:fail(server_blocked)
    end,
    ?assertEqual([], [R || R <- Refs, receive {R, _} -> true after 0 -> false end]),
    %% and the hanging requests are answered with undefined when their timeout expires
    [receive {R, A} -> ?assertEqual([{hangs, undefined, volatile}, {fine, 1, static}], A)
     after 10000 -> ct:fail(no_answer)
     end || R <- Refs],
    %% the evaluating processes were killed
    terrain_test_peers:wait_until(
      fun() -> [] =:= [P || P <- processes(),
                            {current_function, {?MODULE, hang, 0}} =:= erlang:process_info(P, current_function)]
      end, 5000, "evaluators killed").

crashing_dynamic_attribute_is_undefined() ->
    [{doc, "A dynamic attribute whose function crashes gives undefined and is counted."}].
crashing_dynamic_attribute_is_undefined(_Config) ->
    ok = start([{attrs, [{boom, {dynamic, {?MODULE, crash, []}}}]}]),
    Before = stat(dynamic_crashes),
    ?assertEqual(undefined, terrain:attr(boom)),
    Node = node(),
    #{Node := {ok, #{boom := undefined}}} = terrain:attrs([node()], [boom]),
    ?assertEqual(Before + 2, stat(dynamic_crashes)),
    ?assert(is_process_alive(whereis(terrain_attr_server))).

failing_attributes_are_logged_once_per_cause() ->
    [{doc, "Dynamic attributes that crash or time out on every evaluation log one warning per cause (attribute, "
           "function, class and shape of the reason; a timeout) however often they are evaluated, while "
           "terrain:stats() counts every failure (dynamic_crashes, dynamic_timeouts) and every report not logged "
           "(reports_not_logged)."}].
failing_attributes_are_logged_once_per_cause(_Config) ->
    ok = start([{attrs, [{boom, {dynamic, {?MODULE, crash, []}}},
                         {detail, {dynamic, {?MODULE, crash_with_detail, []}}},
                         {flip, {dynamic, {?MODULE, crash_or_exit, []}}},
                         {slow, {dynamic, {?MODULE, hang, []}, #{timeout => 20}}}]}]),
    ok = logger:add_handler(capture, ?MODULE, #{config => #{to => self()}}),
    N = 10,
    Before = terrain:stats(),
    try
        Node = node(),
        [case I rem 2 of
             0 -> ?assertEqual([undefined, undefined, undefined, undefined],
                               [terrain:attr(Name) || Name <- [boom, detail, flip, slow]]);
             1 -> ?assertEqual(#{Node => {ok, #{boom => undefined, detail => undefined, flip => undefined,
                                                slow => undefined}}},
                               terrain:attrs([Node], [boom, detail, flip, slow]))
         end || I <- lists:seq(1, N)]
    after
        ok = logger:remove_handler(capture)
    end,
    Reports = [Event || {logged, #{meta := #{domain := [terrain, attr]}} = Event} <- flush()],
    Texts = [lists:flatten(io_lib:format(Format, Args)) || #{msg := {Format, Args}} <- Reports],
    ct:pal("~b reports after ~b evaluations of each:~n~ts", [length(Reports), N, lists:join("\n", Texts)]),
    Starting = fun(Prefix) -> length([T || T <- Texts, lists:prefix(Prefix, T)]) end,
    ?assertEqual(1, Starting("terrain: attribute boom ")),
    ?assertEqual(1, Starting("terrain: attribute detail ")),
    ?assertEqual(2, Starting("terrain: attribute flip ")),
    ?assertEqual(1, Starting("terrain: attribute slow ")),
    ?assertEqual(5, length(Reports)),
    [?assertEqual(warning, Level) || #{level := Level} <- Reports],
    Delta = fun(Name) -> maps:get(Name, terrain:stats()) - maps:get(Name, Before) end,
    ?assertEqual(3 * N, Delta(dynamic_crashes)),
    ?assertEqual(N, Delta(dynamic_timeouts)),
    ?assertEqual(4 * N - 5, Delta(reports_not_logged)).

flush() ->
    receive Message -> [Message | flush()]
    after 0 -> []
    end.

owner_death_removes_its_values() ->
    [{doc, "Values set by a process disappear when it dies (seed §5.1.4); the time it takes is logged."}].
owner_death_removes_its_values(_Config) ->
    ok = start([]),
    Self = self(),
    Owner = spawn(fun() ->
                          ok = terrain:set_attr(running_job, worker),
                          ok = terrain:set_attr(other, 1),
                          Self ! set,
                          receive after infinity -> ok end
                  end),
    receive set -> ok after 5000 -> ct:fail(not_set) end,
    ?assertEqual(worker, terrain:attr(running_job)),
    T0 = erlang:monotonic_time(microsecond),
    exit(Owner, kill),
    terrain_test_peers:wait_until(fun() -> terrain:attr(running_job) =:= undefined andalso
                                               terrain:attr(other) =:= undefined end, 5000, "owner's values gone"),
    ct:pal("owner's values removed ~b us after its death", [erlang:monotonic_time(microsecond) - T0]),
    %% set on behalf of another process
    Other = spawn(fun() -> receive stop -> ok end end),
    ok = terrain:set_attr(for_other, x, #{owner => Other}),
    ?assertEqual(x, terrain:attr(for_other)),
    Other ! stop,
    terrain_test_peers:wait_until(fun() -> terrain:attr(for_other) =:= undefined end, 5000, "value gone").

persistent_values_outlive_their_setter() ->
    [{doc, "A value set with owner => persistent stays after the setter dies, until deleted."}].
persistent_values_outlive_their_setter(_Config) ->
    ok = start([]),
    {Pid, MRef} = spawn_monitor(fun() -> ok = terrain:set_attr(service, up, #{owner => persistent}) end),
    receive {'DOWN', MRef, process, Pid, normal} -> ok after 5000 -> ct:fail(setter_stuck) end,
    %% the server has processed everything the setter sent once it answers a call
    ok = terrain:set_attr(sync, 1),
    ?assertEqual(up, terrain:attr(service)),
    ok = terrain:delete_attr(service),
    ?assertEqual(undefined, terrain:attr(service)).

delete_uncovers_the_configured_value() ->
    [{doc, "A run-time value hides a configured one; deleting it (or its owner dying) shows the configured one "
           "again; deleting a configured attribute removes it."}].
delete_uncovers_the_configured_value(_Config) ->
    ok = start([{attrs, [{role, worker}]}]),
    ok = terrain:set_attr(role, master),
    ?assertEqual(master, terrain:attr(role)),
    ok = terrain:delete_attr(role),
    ?assertEqual(worker, terrain:attr(role)),
    Owner = spawn(fun() -> ok = terrain:set_attr(role, temporary), receive stop -> ok end end),
    terrain_test_peers:wait_until(fun() -> terrain:attr(role) =:= temporary end, 5000, "temporary role"),
    Owner ! stop,
    terrain_test_peers:wait_until(fun() -> terrain:attr(role) =:= worker end, 5000, "configured role back"),
    ok = terrain:delete_attr(role),
    ?assertEqual(undefined, terrain:attr(role)),
    ok = terrain:delete_attr(never_existed).

killed_server_restarts_with_configured_and_owned_values() ->
    [{doc, "Killing the attribute server: it is restarted with its configured values and the values of live "
           "owners (and persistent ones); the restarted server still removes a value when its owner dies."}].
killed_server_restarts_with_configured_and_owned_values(Config) ->
    File = write(Config, "restart.attrs", "[{configured, yes}, {dyn, {dynamic, {erlang, node}}}].\n"),
    ok = start([{attr_config, File}, {attrs, [{from_env, 1}]}]),
    ok = terrain:set_attr(persisted, p, #{owner => persistent}),
    Owner = spawn(fun() -> ok = terrain:set_attr(owned, o), receive stop -> ok end end),
    terrain_test_peers:wait_until(fun() -> terrain:attr(owned) =:= o end, 5000, "owned value"),
    ok = terrain:load_attrs(write(Config, "later.attrs", "{loaded_later, 2}.\n")),
    Old = whereis(terrain_attr_server),
    Cache = whereis(terrain_attr_cache),
    exit(Old, kill),
    terrain_test_peers:wait_until(server_restarted(Old), 5000, "restart"),
    ?assertEqual(yes, terrain:attr(configured)),
    ?assertEqual(node(), terrain:attr(dyn)),
    ?assertEqual(1, terrain:attr(from_env)),
    ?assertEqual(2, terrain:attr(loaded_later)),
    ?assertEqual(p, terrain:attr(persisted)),
    ?assertEqual(o, terrain:attr(owned)),
    ?assertEqual(os:type(), terrain:attr(os_type)),
    Owner ! stop,
    terrain_test_peers:wait_until(fun() -> terrain:attr(owned) =:= undefined end, 5000, "owned value gone"),
    %% the cache server was not restarted with it
    ?assertEqual(Cache, whereis(terrain_attr_cache)).

owner_dying_while_server_is_down_is_cleaned_up() ->
    [{doc, "An owner that dies while the server is down is noticed by the restarted server."}].
owner_dying_while_server_is_down_is_cleaned_up(_Config) ->
    ok = start([]),
    Owner = spawn(fun() -> ok = terrain:set_attr(owned, o), receive stop -> ok end end),
    terrain_test_peers:wait_until(fun() -> terrain:attr(owned) =:= o end, 5000, "owned value"),
    ok = supervisor:terminate_child(terrain_sup, terrain_attr_server),
    exit(Owner, kill),
    {ok, _} = supervisor:restart_child(terrain_sup, terrain_attr_server),
    terrain_test_peers:wait_until(fun() -> terrain:attr(owned) =:= undefined end, 5000, "owned value gone").

every_bad_configuration_is_rejected_whole() ->
    [{doc, "Unreadable file, syntax error, wrong shapes, unknown kinds, duplicate names, oversized terms: "
           "load_attrs returns {error, {config, File, Where, Why}} with a sentence, and loads nothing."}].
every_bad_configuration_is_rejected_whole(Config) ->
    ok = start([]),
    #{value_bytes := Limit} = terrain_attr_config:limits(),
    Cases = [{"unreadable", filename:join(?config(priv_dir, Config), "missing.attrs"), file,
              file, "cannot read the file"},
             {"syntax", "[{good1, 1},\n {good2 2}].\n", {line, 2}, syntax, "syntax error"},
             {"no_full_stop", "[{good1, 1}]\n", {line, 1}, syntax, "missing full stop"},
             {"not_literal", "[{good1, 1}, {good2, self()}].\n", {line, 1}, syntax, "not a literal"},
             {"shape", "[{good1, 1},\n {good2, 2, 3}].\n", {line, 2}, bad_entry, "expected {Name, Definition}"},
             {"name", "[{good1, 1},\n {\"good2\", 2}].\n", {line, 2}, bad_name, "attribute names are atoms"},
             {"reserved", "[{good1, 1},\n {level, 2}].\n", {line, 2}, reserved_name, "reserved"},
             {"bad_kind_shape", "[{good1, 1},\n {good2, {dynamic, not_an_mfa}}].\n", {line, 2}, bad_definition,
              "bad definition of good2"},
             {"unknown_kind", "[{good1, 1},\n {good2, {dinamic, {erlang, node}}}].\n", {line, 2}, unknown_kind,
              "unknown kind dinamic"},
             {"undefined_function", "[{good1, 1},\n {good2, {dynamic, {nomodule, nofunction}}}].\n", {line, 2},
              undefined_function, "does not exist"},
             {"duplicate", "[{good1, 1},\n {good2, 2},\n {good1, 3}].\n", {line, 3}, duplicate,
              "defined more than once"},
             {"oversized", lists:flatten(io_lib:format("[{good1, 1},~n {good2, ~p}].~n",
                                                       [binary:copy(<<"x">>, Limit + 1)])),
              {line, 2}, too_large, "the limit is"}],
    lists:foreach(
      fun({Label, Content, ExpectedWhere, ExpectedWhy, Sentence}) ->
              File = case Label of
                         "unreadable" -> Content;
                         _ -> write(Config, Label ++ ".attrs", Content)
                     end,
              Result = terrain:load_attrs(File),
              ct:pal("~s: ~0tP", [Label, Result, 20]),
              {error, {config, File, Where, Why} = Reason} = Result,
              ?assertEqual(ExpectedWhere, Where, Label),
              ?assertEqual(ExpectedWhy, case Why of W when is_tuple(W) -> element(1, W); W -> W end, Label),
              Text = lists:flatten(io_lib:format("~ts", [terrain:format_error(Reason)])),
              ct:pal("  ~ts", [Text]),
              ?assertNotEqual(nomatch, string:find(Text, Sentence), {Label, Text}),
              ?assertNotEqual(nomatch, string:find(Text, File), {Label, Text}),
              %% nothing half-loaded
              ?assertEqual(undefined, terrain:attr(good1), Label)
      end, Cases),
    ?assert(is_process_alive(whereis(terrain_attr_server))).

bad_configuration_at_start_leaves_the_node_running() ->
    [{doc, "A bad attr_config file or attrs list at start is logged and skipped whole; the application starts "
           "with the other sources."}].
bad_configuration_at_start_leaves_the_node_running(Config) ->
    Bad = write(Config, "bad_at_start.attrs", "[{fine, 1}, {broken, {dynamic, {nomodule, f}}}].\n"),
    ok = start([{attr_config, Bad}, {attrs, [{from_env, 1}]}]),
    ?assertEqual(undefined, terrain:attr(fine)),
    ?assertEqual(1, terrain:attr(from_env)),
    ?assertEqual(os:type(), terrain:attr(os_type)),
    ok = application:stop(terrain),
    Good = write(Config, "good_at_start.attrs", "{fine, 1}.\n"),
    ok = start([{attr_config, Good}, {attrs, [{a, 1}, {a, 2}]}]),
    ?assertEqual(1, terrain:attr(fine)),
    ?assertEqual(undefined, terrain:attr(a)),
    ok = application:stop(terrain),
    ok = start([{attr_config, "/nonexistent/file.attrs"}, {attrs, not_a_list}]),
    ?assertEqual(os:type(), terrain:attr(os_type)).

load_attrs_merges_and_replaces() ->
    [{doc, "load_attrs adds and replaces configured attributes, keeps others, and does not override run-time "
           "values; automatic attributes in it are evaluated at load."}].
load_attrs_merges_and_replaces(Config) ->
    ok = start([{attrs, [{a, 1}, {b, 1}]}]),
    ok = terrain:set_attr(c, runtime),
    ok = terrain:load_attrs(write(Config, "merge.attrs",
                                  "[{b, 2}, {c, configured}, {d, {automatic, {terrain_attr_SUITE, answer, [4]}}}].\n")),
    ?assertEqual({1, 2, runtime, 4}, {terrain:attr(a), terrain:attr(b), terrain:attr(c), terrain:attr(d)}),
    ok = terrain:delete_attr(c),
    ?assertEqual(configured, terrain:attr(c)),
    %% a sampled attribute replaced by a static one stops sampling
    ok = terrain:load_attrs(write(Config, "s1.attrs", "{s, {sampled, {terrain_attr_SUITE, answer, [5]}, #{interval => 10}}}.\n")),
    terrain_test_peers:wait_until(fun() -> terrain:attr(s) == 5 end, 5000, "sampled"),
    ok = terrain:load_attrs(write(Config, "s2.attrs", "{s, 6}.\n")),
    ?assertEqual(6, terrain:attr(s)),
    #{samplers := Samplers} = sys:get_state(terrain_attr_server),
    ?assertNot(maps:is_key(s, Samplers)).

api_rejects_bad_arguments() ->
    [{doc, "Options and arguments are validated at the boundary and rejected with a sentence."}].
api_rejects_bad_arguments(_Config) ->
    ok = start([]),
    Errors = [terrain:set_attr("name", 1),
              terrain:set_attr(dist, 1),
              terrain:set_attr(big, binary:copy(<<0>>, 100000)),
              terrain:set_attr(x, 1, #{owner => nobody}),
              terrain:set_attr(x, 1, #{ownr => persistent}),
              terrain:set_attr(x, 1, not_a_map),
              terrain:delete_attr(42),
              terrain:attrs(not_a_list, [a]),
              terrain:attrs([node()], [<<"a">>]),
              terrain:attrs([node()], [a], #{timeout => -1}),
              terrain:attrs([node()], [a], #{max_age => soon}),
              terrain:subscribe([node()], [], 100),
              terrain:subscribe([node()], [a], 1),
              terrain:choose_nodes(all, [{a, is, 1}]),
              terrain:choose_nodes(all, [{a, low}], #{order_by => a}),
              terrain:choose_nodes(nowhere, [{a, low}]),
              terrain:choose_nodes({group, no_such_scope, g}, []),
              terrain:choose_nodes(all, [{group, no_such_scope, g}]),
              terrain:choose_node(all, [], #{pick => best}),
              terrain:choose_node(all, [], #{explain => true}),
              terrain:load_attrs("/nonexistent")],
    lists:foreach(fun(E) ->
                          ?assertMatch({error, _}, E),
                          {error, Reason} = E,
                          Text = lists:flatten(io_lib:format("~ts", [terrain:format_error(Reason)])),
                          ct:pal("~0tP -> ~ts", [Reason, 8, Text]),
                          %% a sentence, not a printed term
                          ?assertMatch([C | _] when C >= $a andalso C =< $z, Text)
                  end, Errors),
    ?assertEqual(undefined, terrain:attr(x)).

malformed_messages_are_dropped_and_counted() ->
    [{doc, "Messages that are not well-formed requests are dropped and counted; the server and the responder "
           "survive them."}].
malformed_messages_are_dropped_and_counted(_Config) ->
    ok = start([]),
    Before = stat(malformed_dropped),
    Junk = [hello,
            {'$terrain_attrs', 1, not_a_ref, [a]},
            {'$terrain_attrs', 1, make_ref(), [fun() -> ok end]},
            {'$terrain_attrs', 1, make_ref(), [{erlang, halt}]},
            {'$terrain_attrs', 1, make_ref(), improper},
            {'$terrain_attrs', 2, make_ref(), [a]},
            {'$terrain_attr_subscribe', 1, make_ref(), self(), [a], 1},
            {'$terrain_attr_subscribe', 1, make_ref(), self(), [], 100},
            {'$terrain_sample', self(), os_type, evil}],
    [terrain_attr_server ! J || J <- Junk],
    gen_server:cast(terrain_attr_server, {set, x, 1, persistent}),
    %% a call is answered after every message sent before it
    ok = terrain:set_attr(sync, 1),
    ?assertEqual(Before + length(Junk) - 1 + 1, stat(malformed_dropped)),   % the sample is ignored, not counted
    ?assertEqual(os:type(), terrain:attr(os_type)),
    ?assertEqual(undefined, terrain:attr(x)),
    %% the responder: everything but the one well-formed request is dropped and counted
    Responder = whereis(terrain_attr_responder),
    Ok = alias(),
    ForResponder = [hello, {'$terrain_attrs', 1, not_a_ref, [a]}, {'$terrain_attrs', 1, make_ref(), [fun() -> ok end]},
                    {'$terrain_attrs', 1, make_ref(), [{erlang, halt}]}, {'$terrain_attrs', 1, make_ref(), improper},
                    {'$terrain_attrs', 1, make_ref(), [a | b]}, {'$terrain_attrs', 2, make_ref(), [a]},
                    {'$terrain_attrs', 1, make_ref(), lists:duplicate(10001, a)},
                    {'$terrain_attrs', 1, Ok, [os_type]}],
    Dropped = stat(malformed_dropped),
    [Responder ! J || J <- ForResponder],
    receive {Ok, Answer} -> ?assertEqual([{os_type, os:type(), static}], Answer)
    after 2000 -> ct:fail(no_answer)
    end,
    ?assertEqual(Dropped + length(ForResponder) - 1, stat(malformed_dropped)),
    ?assertEqual(Responder, whereis(terrain_attr_responder)).

choose_on_the_local_node() ->
    [{doc, "choose_nodes, choose_node, explain and relax on the local node alone."}].
choose_on_the_local_node(_Config) ->
    ct:pal("this node: ~p (alive: ~p)", [node(), is_alive()]),
    ok = start([{attrs, [{cores, 8}, {gpu, false}]}]),
    Me = node(),
    ?assertEqual([Me], terrain:choose_nodes(all, [{cores, ge, 8}])),
    ?assertEqual([Me], terrain:choose_nodes([Me], {cores, ge, 8.0})),
    ?assertEqual([], terrain:choose_nodes(all, [{cores, ge, 8}, {gpu, true}])),
    {[], Why} = terrain:choose_nodes(all, [{cores, ge, 8}, {gpu, true}], #{explain => true}),
    ?assertMatch(#{removed_by := {gpu, true}, last := #{Me := #{gpu := false}}}, Why),
    ?assertEqual({[Me], [{gpu, true}]}, terrain:choose_nodes(all, [{cores, ge, 8}, {gpu, true}], #{relax => true})),
    ?assertEqual({ok, Me}, terrain:choose_node(all, [{cores, ge, 8}], #{pick => first})),
    ?assertEqual({error, none}, terrain:choose_node(all, [{gpu, true}], #{})),
    ?assertEqual([], terrain:choose_nodes([], [{cores, ge, 8}])),
    ?assertEqual([Me, Me], terrain:choose_nodes([Me, Me], [])).

cache_stores_rows_as_built_unless_values_were_forgotten() ->
    [{doc, "A query hands the cache rows it built on the rows it read; the cache stores them as they are while "
           "nothing was forgotten since, and otherwise merges only the fetched entries into the row as it is, "
           "so a value dropped by an invalidation never comes back."}].
cache_stores_rows_as_built_unless_values_were_forgotten(_Config) ->
    {ok, _} = application:ensure_all_started(terrain),
    N = 'elsewhere@nohost',
    Sync = fun() -> _ = sys:get_state(terrain_attr_cache), ok end,
    %% built on the current generation: stored as built
    Gen0 = terrain_attr_cache:generation(),
    ok = terrain_attr_cache:store(10, Gen0, [{N, [{load, 1, volatile}], #{load => 1, rack => r1},
                                              #{load => 10, rack => static}}]),
    Sync(),
    ?assertMatch({#{load := 1, rack := r1}, #{load := 10, rack := static}, none, _}, terrain_attr_cache:row(N)),
    %% the node's values are forgotten (it reloaded its configuration): a new generation
    terrain_attr_cache ! {'$terrain_attr_invalidate', N},
    Sync(),
    ?assertEqual(#{}, terrain_attr_cache:cached(N)),
    ?assert(terrain_attr_cache:generation() > Gen0),
    %% a row built before that, carrying the old rack: only the fetched entry is kept
    ok = terrain_attr_cache:store(20, Gen0, [{N, [{load, 2, volatile}], #{load => 2, rack => r1},
                                              #{load => 20, rack => static}}]),
    Sync(),
    ?assertMatch({#{load := 2}, #{load := 20}, none, _}, terrain_attr_cache:row(N)),
    ?assertNot(maps:is_key(rack, terrain_attr_cache:cached(N))).

topology_outlives_restarts_but_not_the_application() ->
    [{doc, "A topology loaded at run time stays in force when the attribute server, the attribute tables' "
           "keeper (which restarts every process after it) or the topology server itself is killed; stopping "
           "the application forgets it."}].
topology_outlives_restarts_but_not_the_application(_Config) ->
    ok = start([]),
    Tree = {network, site, [{network, r1, [{node, a@h}, {node, b@h}]}, {node, c@h}]},
    ok = terrain:load_topology(Tree),
    Loaded = terrain:topology(),
    ?assertNotEqual(undefined, Loaded),
    [begin
         Old = whereis(Name),
         Topology = whereis(terrain_topology_server),
         exit(Old, kill),
         terrain_test_peers:wait_until(fun() -> is_pid(whereis(Name)) andalso whereis(Name) =/= Old andalso
                                                    is_pid(whereis(terrain_topology_server)) end,
                                       5000, "restarted"),
         ct:pal("~p killed; topology server ~p -> ~p", [Name, Topology, whereis(terrain_topology_server)]),
         ?assertEqual(Loaded, terrain:topology()),
         ?assertEqual(0.5, terrain:distance(a@h, b@h))
     end || Name <- [terrain_attr_server, terrain_attr_table, terrain_topology_server]],
    ok = application:stop(terrain),
    ?assertEqual(undefined, terrain:topology()).
