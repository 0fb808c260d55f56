%% EUnit tests of terrain_lab_hostlist and terrain_lab_hosts: SLURM hostlist
%% expressions, hosts files and the specs built from them.
-module(terrain_lab_hostlist_tests).
-include_lib("eunit/include/eunit.hrl").

expand(E) ->
    {ok, Hosts} = terrain_lab_hostlist:expand(E),
    Hosts.

column(E) ->
    {error, {hostlist, {E, Column, _}}} = terrain_lab_hostlist:expand(E),
    Column.

why(E) ->
    {error, {hostlist, {E, _, Why}}} = terrain_lab_hostlist:expand(E),
    Why.

a_plain_name_is_itself_test() ->
    ?assertEqual(["login1"], expand("login1")).

ranges_keep_the_width_of_their_lower_bound_test() ->
    ?assertEqual(["atcn019", "atcn020", "atcn021"], expand("atcn[019-021]")),
    ?assertEqual(["n08", "n09", "n10"], expand("n[08-10]")),
    ?assertEqual(["n8", "n9", "n10"], expand("n[8-10]")).

several_ranges_and_single_numbers_in_one_bracket_test() ->
    ?assertEqual(["a1", "a2", "a5", "a7", "a8"], expand("a[1-2,5,7-8]")).

the_athos_allocation_of_the_release_expands_to_its_size_test() ->
    Hosts = expand("atcn[019-036,073-126,145-216]"),
    ?assertEqual(18 + 54 + 72, length(Hosts)),
    ?assertEqual("atcn019", hd(Hosts)),
    ?assertEqual("atcn216", lists:last(Hosts)).

top_level_commas_separate_groups_test() ->
    ?assertEqual(["a1", "a2", "login", "b07"], expand("a[1-2],login,b07")).

a_prefix_after_a_bracket_multiplies_leftmost_slowest_test() ->
    ?assertEqual(["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"], expand("rack[1-2]-n[01-02]")),
    ?assertEqual(["r1x", "r2x"], expand("r[1-2]x")).

bad_expressions_point_at_the_character_test() ->
    ?assertEqual(5, column("atcn[019-036")),
    ?assertEqual(unclosed_bracket, why("atcn[019-036")),
    ?assertEqual(3, column("a[3-1]")),   % the start of the range
    ?assertEqual({descending, "3", "1"}, why("a[3-1]")),
    ?assertEqual(3, column("a[]")),
    ?assertEqual(empty_range, why("a[]")),
    ?assertEqual(5, column("a[1-]")),
    ?assertEqual(4, column("a[1[2]]")),
    ?assertEqual(nested_bracket, why("a[1[2]]")),
    ?assertEqual(2, column("a]")),
    ?assertEqual(3, column("a,,b")),
    ?assertEqual(empty_name, why("a,,b")),
    ?assertEqual(1, column("")),
    ?assertEqual(2, column("a b")),
    ?assertEqual({bad_character, $\s}, why("a b")),
    ?assertEqual(4, column("a[1x]")).

the_error_message_shows_the_expression_and_a_caret_test() ->
    {error, Reason} = terrain_lab_hostlist:expand("n[1-2,x]"),
    Text = lists:flatten(terrain_lab_hostlist:format_error(Reason)),
    [_Why, Expr, Caret] = string:split(Text, "\n", all),
    ?assertEqual("  n[1-2,x]", Expr),
    ?assertEqual("        ^", Caret).

huge_expressions_are_refused_test() ->
    ?assertMatch({too_many, _}, why("n[0-999999],m[0-9]")).

compress_joins_consecutive_numbers_test() ->
    ?assertEqual("atcn[019-021,030],login", terrain_lab_hostlist:compress(["atcn019", "atcn020", "atcn021",
                                                                         "atcn030", "login"])),
    ?assertEqual("n[8-9],n[10-11]", terrain_lab_hostlist:compress(["n8", "n9", "n10", "n11"])).

%%--------------------------------------------------------------------
%% Hosts files

with_file(Text, Fun) ->
    File = filename:join(filename:basedir(user_cache, "terrain-tests"),
                         "hosts-" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_dir(File),
    ok = file:write_file(File, Text),
    try Fun(File) after file:delete(File), file:delete(File ++ ".spec") end.

hosts_files_skip_comments_and_expand_hostlists_test() ->
    with_file("# allocation\nlogin  # the front end\n\natcn[01-02]\n",
              fun(File) -> ?assertEqual({ok, ["login", "atcn01", "atcn02"]}, terrain_lab_hosts:read_file(File)) end).

a_bad_line_is_reported_with_its_number_test() ->
    with_file("a\nb[1-\n", fun(File) ->
        {error, Reason} = terrain_lab_hosts:read_file(File),
        ?assertMatch({hosts, {line, File, 2, {hostlist, _}}}, Reason),
        ?assertMatch("hosts file " ++ _, lists:flatten(terrain_lab_hosts:format_error(Reason)))
    end).

empty_and_duplicate_hosts_are_errors_test() ->
    with_file("# nothing\n", fun(File) -> ?assertEqual({error, {hosts, {empty, File}}}, terrain_lab_hosts:read_file(File)) end),
    with_file("a\nb\na\n", fun(File) ->
        ?assertEqual({error, {hosts, {duplicate, File, "a"}}}, terrain_lab_hosts:read_file(File)) end).

the_spec_has_one_group_per_host_and_per_host_nodes_test() ->
    with_file("h-1\n10.0.0.2\n", fun(File) ->
        {ok, ["h-1", "10.0.0.2"]} = terrain_lab_hosts:write_spec(File, 2, File ++ ".spec"),
        {ok, Spec} = terrain_lab_spec:read(File ++ ".spec"),
        ?assertEqual(['h-1_1', 'h-1_2', '10_0_0_2_1', '10_0_0_2_2'], terrain_lab_spec:node_names(Spec)),
        ?assertEqual([{['h-1'], "h-1"}, {['h-1'], "h-1"}, {['10_0_0_2'], "10.0.0.2"}, {['10_0_0_2'], "10.0.0.2"}],
                     [{P, H} || #{path := P, host := H} <- terrain_lab_spec:nodes(Spec)])
    end).

a_spec_runs_here_or_on_other_hosts_never_both_test() ->
    {ok, Local} = terrain_lab_spec:from_terms(terrain_lab_hosts:spec_terms(["localhost"], 2), undefined),
    ?assertEqual({ok, Local}, terrain_lab_hosts:check_placement(Local)),
    ?assertNot(terrain_lab_hosts:remote(Local)),
    {ok, Remote} = terrain_lab_spec:from_terms(terrain_lab_hosts:spec_terms(["10.0.0.6", "10.0.0.7"], 1), undefined),
    ?assert(terrain_lab_hosts:remote(Remote)),
    {ok, Mixed} = terrain_lab_spec:from_terms(terrain_lab_hosts:spec_terms(["localhost", "10.0.0.7"], 1), undefined),
    ?assertEqual({error, {hosts, {mixed, [localhost_1], ['10_0_0_7_1']}}}, terrain_lab_hosts:check_placement(Mixed)).

cpu_emulation_is_refused_on_other_hosts_test() ->
    {ok, Capped} = terrain_lab_spec:from_terms([{cluster, c, #{}}, {node, a, #{host => "10.0.0.6"}},
                                                {node, b, #{host => "10.0.0.7", cpu_per_scheduler => 0.1}},
                                                {node, d, #{host => "10.0.0.8", cpu => 0.5}}], undefined),
    ?assertEqual({error, {hosts, {cpu_on_other_hosts, [b, d]}}}, terrain_lab_hosts:check_placement(Capped)),
    ?assertMatch({match, _}, re:run(terrain_lab:format_error({hosts, {cpu_on_other_hosts, [b, d]}}),
                                    "nodes on other hosts cannot have them \\(b, d\\)")),
    {ok, Local} = terrain_lab_spec:from_terms([{cluster, c, #{}}, {node, a, #{host => "localhost", cpu => 0.5}}],
                                              undefined),
    ?assertEqual({ok, Local}, terrain_lab_hosts:check_placement(Local)).

network_emulation_is_off_on_other_hosts_test() ->
    {ok, Local} = terrain_lab_spec:from_terms(terrain_lab_hosts:spec_terms(["localhost"], 1), undefined),
    {ok, Remote} = terrain_lab_spec:from_terms(terrain_lab_hosts:spec_terms(["10.0.0.6"], 1), undefined),
    ?assertEqual({ok, "auto"}, terrain_lab_hosts:netem_option(Local, "auto")),
    ?assertEqual({ok, "on"}, terrain_lab_hosts:netem_option(Local, "on")),
    ?assertEqual({ok, "off"}, terrain_lab_hosts:netem_option(Remote, "auto")),
    ?assertEqual({error, {hosts, netem_on_other_hosts}}, terrain_lab_hosts:netem_option(Remote, "on")).

local_host_names_test() ->
    {ok, Short} = inet:gethostname(),
    ?assert(terrain_lab_hosts:is_local("localhost")),
    ?assert(terrain_lab_hosts:is_local("127.0.0.1")),
    ?assert(terrain_lab_hosts:is_local(Short)),
    ?assertNot(terrain_lab_hosts:is_local("10.0.0.2")).

a_bad_host_in_a_spec_is_rejected_test() ->
    ?assertMatch({error, {spec, _, _, {bad_value, host, "a b"}}},
                 terrain_lab_spec:from_terms([{cluster, c, #{}}, {node, n, #{host => "a b"}}], undefined)).

%%--------------------------------------------------------------------
%% The command

the_command_prints_one_host_a_line_test() ->
    ?assertEqual({0, "r1-n01\nr1-n02\nr2-n01\nr2-n02\nx\n", ""},
                 terrain_lab_test_io:run(["hostlist", "r[1-2]-n[01-02]", "x"])).

a_bad_expression_is_a_usage_error_test() ->
    {Code, Out, Err} = terrain_lab_test_io:run(["hostlist", "atcn[019-036"]),
    ?assertEqual({2, ""}, {Code, Out}),
    ?assertMatch({match, _}, re:run(Err, "\n  atcn\\[019-036\n      \\^\n")).

%% A host name over 253 characters cannot make a node or group name (an atom): an
%% error, not a system_limit crash.
a_host_name_over_253_characters_is_an_error_test() ->
    Long = lists:duplicate(300, $h),
    ?assertMatch({too_long, Long}, why(Long)),
    ?assertMatch({match, _}, re:run(lists:flatten(terrain_lab_hostlist:format_error(
                                                    terrain_lab_hostlist:expand(Long) =:= x orelse
                                                    element(2, terrain_lab_hostlist:expand(Long)))),
                                    "has 300 characters")),
    ?assertEqual([lists:duplicate(253, $h)], expand(lists:duplicate(253, $h))).

%% A hosts file that is not text is an error naming the file (it crashed in string:split).
a_binary_hosts_file_is_an_error_test() ->
    File = filename:join(["_build", "test", "tmp", "binary.hosts"]),
    ok = filelib:ensure_dir(File),
    ok = file:write_file(File, <<6, 15, 151, 247, 154, 216, 255>>),
    ?assertEqual({error, {hosts, {not_text, File}}}, terrain_lab_hosts:read_file(File)),
    ?assertMatch({match, _}, re:run(terrain_lab_hosts:format_error({hosts, {not_text, File}}), "is not text")).

%% A hosts file that is a device is refused before it is read (`up --hosts /dev/zero'
%% read for ever), as is a missing one, each naming the file.
a_hosts_file_that_is_a_device_or_missing_is_refused_test() ->
    {error, Zero} = terrain_lab_hosts:read_file("/dev/zero"),
    ?assertEqual({hosts, {file, "/dev/zero", not_regular}}, Zero),
    ?assertEqual("cannot read the hosts file /dev/zero: not a regular file",
                 lists:flatten(terrain_lab_hosts:format_error(Zero))),
    {error, Missing} = terrain_lab_hosts:read_file("/nonexistent.hosts"),
    ?assertEqual("cannot read the hosts file /nonexistent.hosts: no such file or directory",
                 lists:flatten(terrain_lab_hosts:format_error(Missing))).
