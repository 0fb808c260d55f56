%% The launcher's contract on its pure part: the command line each transport gets from
%% an option map, and options that are refused with a sentence.
-module(terrain_lab_vm_tests).
-include_lib("eunit/include/eunit.hrl").

-define(LEAN, ["+P", "65536", "+Q", "8192", "+SDio", "2", "+Mea", "min", "-env", "MALLOC_ARENA_MAX", "1"]).
-define(NO_SPIN, ["+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none"]).

args(Options) ->
    {ok, Args} = terrain_lab_vm:command_line(Options),
    Args.

detached() ->
    #{transport => local_detached, name => a, node => 'p_a@host', dir => "/state"}.

ssh(Extra) ->
    maps:merge(#{transport => ssh, name => a, node => 'a@10.0.0.1', host => "h1",
                 ssh => #{dir => "/state", ssh_options => [], code => {root, "/opt/terrain"}}}, Extra).

%% Is `Sub' a contiguous part of `List'?
has(Sub, List) ->
    lists:prefix(Sub, List) orelse (List =/= [] andalso has(Sub, tl(List))).

index(X, List) ->
    length(lists:takewhile(fun(Y) -> Y =/= X end, List)) + 1.

evals(Args) ->
    [E || {"-eval", E} <- lists:zip(lists:droplast(Args), tl(Args))].

%%--------------------------------------------------------------------
%% The command line from options

detached_vm_starts_detached_and_lean_test() ->
    Args = args(detached()),
    ?assertMatch(["-detached", "-noinput" | _], Args),
    ?assert(has(?LEAN, Args)),
    ?assert(has(?NO_SPIN, Args)),
    ?assert(has(["-kernel", "prevent_overlapping_partitions", "false"], Args)),
    %% the process limit the resource guard checks a lab node's processes against
    ?assert(has(["+P", integer_to_list(terrain_lab_guard:process_limit(lab_node))], Args)).

detached_vm_with_a_log_writes_its_log_events_there_test() ->
    Args = args((detached())#{log => "/tmp/state/nodes/a.log"}),
    ?assert(has(["-kernel", "logger", "[{handler,default,logger_std_h,#{config=>#{file=>\"/tmp/state/nodes/a.log\"}}}]"],
                Args)),
    ?assertNot(lists:member("[{handler,default,logger_std_h,#{config=>#{type=>standard_error}}}]", Args)).

schedulers_become_plus_s_test() ->
    ?assert(has(["+S", "4:4"], args((detached())#{schedulers => 4}))),
    ?assertNot(lists:member("+S", args(detached()))).

detached_vm_writes_its_pid_first_and_reads_the_cookie_from_a_file_test() ->
    Args = args((detached())#{args => ["-eval", "own()."]}),
    [WritePid, Own, Distribute] = evals(Args),
    ?assertNotEqual(nomatch, string:find(WritePid, "/state/nodes/a.pid")),
    ?assertEqual("own().", Own),
    ?assertNotEqual(nomatch, string:find(Distribute, "/state/cookie")),
    ?assertNotEqual(nomatch, string:find(Distribute, "shortnames")),
    ?assertNotEqual(nomatch, string:find(Distribute, "p_a")),
    ?assertNot(lists:member("-setcookie", Args)).

own_args_come_after_the_lab_flags_test() ->
    Args = args((detached())#{args => ["-kernel", "prevent_overlapping_partitions", "true"]}),
    ?assert(index("true", Args) > index("false", Args)).

tls_and_code_path_are_on_the_command_line_test() ->
    Args = args((detached())#{tls_optfile => "/state/tls/a.conf", code_path => ["/extra/ebin"]}),
    ?assert(has(["-proto_dist", "inet_tls", "-ssl_dist_optfile", "/state/tls/a.conf"], Args)),
    ?assert(has(["-pa", "/extra/ebin"], Args)).

netem_starts_the_emulating_epmd_module_test() ->
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, c, #{latency => 100}},
                                              {group, g, #{}, [{node, a, #{}}, {node, b, #{}}]}], undefined),
    Args = args((detached())#{netem => {Spec, "p_"}}),
    ?assert(has(["-epmd_module", "terrain_lab_netem_epmd", "-terrain_netem"], Args)).

measured_vm_is_not_lean_but_does_not_spin_test() ->
    Args = args(#{transport => local_linked, name => emas, control => standard_io, lean => false, schedulers => 2}),
    ?assert(has(?NO_SPIN, Args)),
    ?assertNot(has(?LEAN, Args)),
    ?assertNot(lists:member("-detached", Args)),
    ?assertEqual([], evals(Args)).

linked_vm_gets_a_cookie_unlike_the_home_one_test() ->
    Args = args(#{transport => local_linked, name => a, node => p_a, cookie => 'terrain_vm_tests_cookie'}),
    ?assert(has(["-setcookie", "terrain_vm_tests_cookie"], Args)).

remote_vm_uses_remote_code_and_long_names_test() ->
    Args = args(ssh(#{})),
    ?assertMatch(["-detached", "-noinput" | _], Args),
    ?assert(has(["-pa", "/opt/terrain/terrain/ebin"], Args)),
    [WritePid, Distribute] = evals(Args),
    ?assertNotEqual(nomatch, string:find(WritePid, ".cache/terrain/remote/")),
    ?assertNotEqual(nomatch, string:find(Distribute, "longnames")),
    ?assertNotEqual(nomatch, string:find(Distribute, "'a@10.0.0.1'")).

%% `terrain up --code-path DIR': every application a node loads, and every one those
%% need (from the .app files: terrain needs terrain_json, terrain_paths needs
%% terrain_events), is on the remote VM's code path as DIR/<app>/ebin.
remote_code_path_has_every_application_a_node_needs_test() ->
    Args = args(ssh(#{})),
    Needed = needed_applications([terrain_lab]),
    ?assertEqual([], [App || App <- Needed,
                             not has(["-pa", filename:join(["/opt/terrain", App, "ebin"])], Args)]).

%% docs/HOSTS.md ("Code") names the applications --code-path needs, and no other.
hosts_doc_names_the_code_path_applications_test() ->
    Source = proplists:get_value(source, ?MODULE:module_info(compile)),
    Root = filename:dirname(filename:dirname(filename:dirname(filename:dirname(Source)))),
    {ok, Text} = file:read_file(filename:join(Root, "docs/HOSTS.md")),
    [_, Code] = string:split(Text, "**Code.**"),
    Paragraph = hd(string:split(Code, "\n\n")),
    {match, Named} = re:run(Paragraph, "`(terrain[a-z_]*)`", [global, {capture, all_but_first, list}]),
    ?assertEqual(lists:sort([atom_to_list(A) || A <- terrain_lab_code:applications()]),
                 lists:usort(lists:append(Named)) -- ["terrain_lab_code"]).

%% terrain_lab and the applications it needs, transitively, but OTP's own.
needed_applications(Apps) ->
    More = lists:usort(Apps ++ [D || A <- Apps, D <- dependencies(A), lists:prefix("terrain", atom_to_list(D))]),
    case More of
        Apps -> [atom_to_list(A) || A <- Apps];
        _ -> needed_applications(More)
    end.

dependencies(App) ->
    _ = application:load(App),
    {ok, Deps} = application:get_key(App, applications),
    Deps.

remote_tls_files_are_the_ones_the_shell_line_writes_test() ->
    Args = args(ssh(#{ssh => #{dir => "/state", ssh_options => [], code => local, tls => true}})),
    [OptFile] = [F || {"-ssl_dist_optfile", F} <- lists:zip(lists:droplast(Args), tl(Args))],
    ?assertEqual("/tls/a.conf", string:find(OptFile, "/tls/")).

srun_vm_runs_in_the_foreground_test() ->
    Args = args(ssh(#{transport => srun})),
    ?assertMatch(["-noinput" | _], Args),
    ?assertNot(lists:member("-detached", Args)).

%%--------------------------------------------------------------------
%% Bad options

unknown_option_is_refused_with_a_sentence_test() ->
    Error = terrain_lab_vm:command_line((detached())#{colour => red}),
    ?assertEqual({error, {vm, {unknown_option, colour}}}, Error),
    {error, Reason} = Error,
    ?assertNotEqual(nomatch, string:find(lists:flatten(terrain_lab_vm:format_error(Reason)), "colour")).

bad_value_is_refused_naming_the_option_test() ->
    {error, Reason} = terrain_lab_vm:command_line((detached())#{schedulers => 0}),
    ?assertEqual({vm, {bad_option, schedulers, 0}}, Reason),
    ?assertEqual("VM option schedulers: 0 is not a positive integer",
                 lists:flatten(terrain_lab_vm:format_error(Reason))).

missing_option_of_a_transport_is_named_test() ->
    {error, Reason} = terrain_lab_vm:command_line(maps:remove(dir, detached())),
    ?assertEqual({vm, {missing, local_detached, dir}}, Reason),
    ?assertEqual("a VM started by local_detached needs the option dir",
                 lists:flatten(terrain_lab_vm:format_error(Reason))).

unknown_transport_is_refused_test() ->
    {error, Reason} = terrain_lab_vm:command_line((detached())#{transport => telnet}),
    ?assertEqual({vm, {bad_option, transport, telnet}}, Reason),
    ?assertNotEqual(nomatch, string:find(lists:flatten(terrain_lab_vm:format_error(Reason)), "telnet")).

start_refuses_bad_options_before_starting_anything_test() ->
    ?assertEqual({error, {vm, {bad_options, not_a_map}}}, terrain_lab_vm:start(not_a_map)).
