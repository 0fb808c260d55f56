%% The certificates of a TLS cluster (terrain_lab_tls): files and modes, what the CA
%% verifies, the certificates' extensions, the option files, bad input, and the linked
%% start path refusing a TLS spec from a VM that does not run TLS distribution.
-module(terrain_lab_tls_tests).
-include_lib("eunit/include/eunit.hrl").
-include_lib("kernel/include/file.hrl").
%% public_key.hrl's records, as terrain_lab_tls copies them (its untyped records fail the build)
-record('OTPCertificate', {tbsCertificate :: term(), signatureAlgorithm :: term(), signature :: term()}).
-record('OTPTBSCertificate', {version = asn1_DEFAULT :: term(), serialNumber :: term(), signature :: term(),
                              issuer :: term(), validity :: term(), subject :: term(),
                              subjectPublicKeyInfo :: term(), issuerUniqueID = asn1_NOVALUE :: term(),
                              subjectUniqueID = asn1_NOVALUE :: term(), extensions = asn1_NOVALUE :: term()}).
-record('Extension', {extnID :: term(), critical = asn1_DEFAULT :: term(), extnValue :: term()}).
-record('BasicConstraints', {cA = asn1_DEFAULT :: term(), pathLenConstraint = asn1_NOVALUE :: term()}).
-define('id-kp-clientAuth', {1,3,6,1,5,5,7,3,2}).
-define('id-kp-serverAuth', {1,3,6,1,5,5,7,3,1}).
-define('id-ce-extKeyUsage', {2,5,29,37}).
-define('id-ce-basicConstraints', {2,5,29,19}).
-define('id-ce-subjectAltName', {2,5,29,17}).
-define('id-ce-keyUsage', {2,5,29,15}).

-define(NODES, [{a, "10.213.1.2"}, {b, "10.213.1.3"}, {c, "vm-host.example"}]).

with_dir(Fun) ->
    Dir = filename:join(["/tmp", "terrain_tls_tests_" ++ os:getpid() ++ "_" ++ integer_to_list(erlang:unique_integer([positive]))]),
    try Fun(Dir)
    after
        os:cmd("rm -rf " ++ Dir)
    end.

created(Dir) ->
    ok = terrain_lab_tls:create(Dir, #{nodes => ?NODES, cli_host => "10.213.1.1"}),
    filename:join(Dir, "tls").

mode(File) ->
    {ok, #file_info{mode = Mode}} = file:read_file_info(File),
    Mode band 8#777.

cert(File) ->
    {ok, Pem} = file:read_file(File),
    [Der | _] = [D || {'Certificate', D, not_encrypted} <- public_key:pem_decode(Pem)],
    public_key:pkix_decode_cert(Der, otp).

extension(Id, #'OTPCertificate'{tbsCertificate = #'OTPTBSCertificate'{extensions = Extensions}}) ->
    [Value] = [V || #'Extension'{extnID = I, extnValue = V} <- Extensions, I =:= Id],
    Value.

every_file_is_mode_0600_in_directories_of_mode_0700_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(Dir),
                     Files = filelib:wildcard(filename:join(Tls, "**/*.*")),
                     ?assertEqual(lists:sort(["ca.pem", "cli.conf", "cli.pem"] ++
                                                 [filename:join("nodes", N) || N <- ["a.conf", "a.pem", "b.conf", "b.pem",
                                                                                     "c.conf", "c.pem"]]),
                                  lists:sort([string:prefix(F, Tls ++ "/") || F <- Files])),
                     ?assertEqual([{F, 8#600} || F <- Files], [{F, mode(F)} || F <- Files]),
                     ?assertEqual([8#700, 8#700], [mode(Tls), mode(filename:join(Tls, "nodes"))])
             end).

the_ca_verifies_every_node_and_the_cli_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(Dir),
                     Ca = filename:join(Tls, "ca.pem"),
                     Leaves = [filename:join([Tls, "nodes", atom_to_list(N) ++ ".pem"]) || {N, _} <- ?NODES]
                         ++ [filename:join(Tls, "cli.pem")],
                     ?assertEqual([{L, ok} || L <- Leaves], [{L, terrain_lab_tls:verify(Ca, L)} || L <- Leaves])
             end).

a_certificate_of_another_ca_is_not_verified_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(filename:join(Dir, "one")),
                     Other = created(filename:join(Dir, "other")),
                     ?assertMatch({error, _}, terrain_lab_tls:verify(filename:join(Tls, "ca.pem"),
                                                                     filename:join([Other, "nodes", "a.pem"])))
             end).

the_ca_is_a_v3_ca_and_its_key_is_not_written_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(Dir),
                     Ca = cert(filename:join(Tls, "ca.pem")),
                     ?assertEqual(v3, Ca#'OTPCertificate'.tbsCertificate#'OTPTBSCertificate'.version),
                     ?assertMatch(#'BasicConstraints'{cA = true}, extension(?'id-ce-basicConstraints', Ca)),
                     ?assertEqual([keyCertSign, cRLSign], extension(?'id-ce-keyUsage', Ca)),
                     {ok, CaPem} = file:read_file(filename:join(Tls, "ca.pem")),
                     ?assertEqual(['Certificate'], [T || {T, _, _} <- public_key:pem_decode(CaPem)])
             end).

a_leaf_is_for_server_and_client_and_names_its_host_the_clis_also_this_machine_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(Dir),
                     A = cert(filename:join([Tls, "nodes", "a.pem"])),
                     ?assertMatch(#'BasicConstraints'{cA = false}, extension(?'id-ce-basicConstraints', A)),
                     ?assertEqual([?'id-kp-serverAuth', ?'id-kp-clientAuth'], extension(?'id-ce-extKeyUsage', A)),
                     ?assertEqual([{dNSName, "10.213.1.2"}, {iPAddress, <<10, 213, 1, 2>>}],
                                  extension(?'id-ce-subjectAltName', A)),
                     ?assert(public_key:pkix_verify_hostname(A, [{ip, {10, 213, 1, 2}}])),
                     ?assertNot(public_key:pkix_verify_hostname(A, [{ip, {10, 213, 1, 3}}])),
                     Cli = cert(filename:join(Tls, "cli.pem")),
                     {ok, Local} = inet:gethostname(),
                     ?assertEqual([{dNSName, "10.213.1.1"}, {iPAddress, <<10, 213, 1, 1>>},
                                   {dNSName, hd(string:split(Local, "."))}],
                                  extension(?'id-ce-subjectAltName', Cli)),
                     C = cert(filename:join([Tls, "nodes", "c.pem"])),
                     ?assert(public_key:pkix_verify_hostname(C, [{dns_id, "vm-host.example"}])),
                     {ok, Pem} = file:read_file(filename:join([Tls, "nodes", "a.pem"])),
                     ?assertEqual(['Certificate', 'ECPrivateKey'], [T || {T, _, _} <- public_key:pem_decode(Pem)])
             end).

the_option_file_requires_a_peer_certificate_both_ways_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(Dir),
                     {ok, [Terms]} = file:consult(terrain_lab_tls:optfile(Dir, a)),
                     Server = proplists:get_value(server, Terms),
                     Client = proplists:get_value(client, Terms),
                     ?assertEqual(verify_peer, proplists:get_value(verify, Server)),
                     ?assertEqual(true, proplists:get_value(fail_if_no_peer_cert, Server)),
                     ?assertEqual(verify_peer, proplists:get_value(verify, Client)),
                     Ca = filename:join(Tls, "ca.pem"),
                     ?assertEqual([Ca, Ca], [proplists:get_value(cacertfile, O) || O <- [Server, Client]]),
                     ?assertEqual(filename:join(Tls, "cli.conf"), terrain_lab_tls:cli_optfile(Dir)),
                     ?assert(terrain_lab_tls:recorded(Dir))
             end).

remote_stdin_holds_the_ca_and_the_nodes_pem_each_ended_by_a_dot_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(Dir),
                     Lines = string:split(iolist_to_binary(terrain_lab_tls:remote_stdin(Dir, b)), "\n", all),
                     {CaLines, [<<".">> | Rest]} = lists:splitwith(fun(L) -> L =/= <<".">> end, Lines),
                     {LeafLines, [<<".">>, <<>>]} = lists:splitwith(fun(L) -> L =/= <<".">> end, Rest),
                     {ok, Ca} = file:read_file(filename:join(Tls, "ca.pem")),
                     {ok, Leaf} = file:read_file(filename:join([Tls, "nodes", "b.pem"])),
                     ?assertEqual(Ca, iolist_to_binary([[L, "\n"] || L <- CaLines])),
                     ?assertEqual(Leaf, iolist_to_binary([[L, "\n"] || L <- LeafLines]))
             end).

create_again_replaces_the_certificates_test() ->
    with_dir(fun(Dir) ->
                     Tls = created(Dir),
                     {ok, Old} = file:read_file(filename:join(Tls, "ca.pem")),
                     ok = terrain_lab_tls:create(Dir, #{nodes => [{a, "h"}], cli_host => "h"}),
                     {ok, New} = file:read_file(filename:join(Tls, "ca.pem")),
                     ?assertNotEqual(Old, New),
                     ?assertNot(filelib:is_regular(filename:join([Tls, "nodes", "b.pem"]))),
                     ok = terrain_lab_tls:remove(Dir),
                     ?assertNot(filelib:is_dir(Tls)),
                     ?assertNot(terrain_lab_tls:recorded(Dir))
             end).

bad_input_is_an_error_with_a_sentence_test_() ->
    Bad = [{#{nodes => [{a, "has space"}], cli_host => "h"}, "cannot make a certificate for host \"has space\""},
           {#{nodes => [{a, ""}], cli_host => "h"}, "cannot make a certificate for host []"},
           {#{nodes => [{a, "h"}], cli_host => "bad/host"}, "cannot make a certificate for host \"bad/host\""},
           {#{nodes => [{"a", "h"}], cli_host => "h"}, "cannot make a certificate for node \"a\""},
           {#{nodes => [{a, "h"}, {a, "g"}], cli_host => "h"}, "node a is given more than once"}],
    [{Expected, fun() ->
                        with_dir(fun(Dir) ->
                                         {error, Reason} = terrain_lab_tls:create(Dir, Options),
                                         Message = lists:flatten(terrain_lab:format_error(Reason)),
                                         ?assertEqual(Expected, string:slice(Message, 0, length(Expected))),
                                         ?assertNot(filelib:is_dir(filename:join(Dir, "tls")))
                                 end)
                end} || {Options, Expected} <- Bad].

an_unwritable_directory_is_an_error_test() ->
    {error, Reason} = terrain_lab_tls:create("/proc/terrain_tls_test", #{nodes => [{a, "h"}], cli_host => "h"}),
    ?assertMatch({tls, {file, _, _}}, Reason),
    ?assertMatch("cannot write /proc" ++ _, lists:flatten(terrain_lab:format_error(Reason))).

options_that_are_not_a_map_of_nodes_are_badarg_test() ->
    ?assertError(badarg, terrain_lab_tls:create("/tmp/x", #{nodes => []})).

a_tls_spec_is_refused_by_start_cluster_from_a_plain_vm_test() ->
    ?assertNot(terrain_lab_tls:running_tls()),
    {ok, Spec} = terrain_lab_spec:from_terms([{cluster, c, #{tls => true}}, {node, a, #{}}], undefined),
    {error, Reason} = terrain_lab:start_cluster(Spec, #{}),
    ?assertEqual({tls, not_tls_caller}, Reason),
    ?assertMatch("the spec asks for TLS distribution" ++ _, lists:flatten(terrain_lab:format_error(Reason))).
