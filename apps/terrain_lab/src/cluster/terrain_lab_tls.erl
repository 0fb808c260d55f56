%% @private
%% @doc Distribution over TLS for a cluster: its certificate authority, one certificate
%% and key per node and one for the CLI, and the `-ssl_dist_optfile' each VM starts with
%% (docs/HOSTS.md, "Distribution over TLS").
%%
%% {@link create/2} makes, under the state directory, the directory `tls/' (mode 0700,
%% and `tls/nodes/'):
%% <ul>
%% <li>`ca.pem' — the cluster's CA certificate (X.509 v3, EC P-256, basicConstraints
%%     CA:TRUE critical, keyUsage keyCertSign and cRLSign). Its private key exists only
%%     in memory while `create/2' runs: it is never written, so nobody can issue another
%%     certificate of this CA once the cluster is up.</li>
%% <li>`nodes/NAME.pem' per node and `cli.pem' for the CLI — the certificate (v3, CA:FALSE,
%%     keyUsage digitalSignature and keyEncipherment, extendedKeyUsage serverAuth and
%%     clientAuth, subjectAltName the host part of the node name as a DNS name and, when
%%     it is an address, as an IP address; the CLI's also this machine's short host
%%     name) followed by its private key.</li>
%% <li>`nodes/NAME.conf' and `cli.conf' — the `-ssl_dist_optfile' terms: server and client
%%     both `{verify, verify_peer}' with the CA as `cacertfile', the server also
%%     `{fail_if_no_peer_cert, true}'.</li>
%% </ul>
%% Every file is created with mode 0600 before anything is written to it. A client
%% checks the server's certificate against the host part of the node name it connects
%% to (OTP's `inet_tls_dist' sets it as server name indication), hence the SANs; a
%% server requires a certificate of the CA from every client.
%%
%% For a node on another host, {@link remote_stdin/2} gives the CA certificate and the
%% node's certificate and key as lines for the standard input of the ssh command that
%% starts it (terrain_lab_ssh), and {@link optfile_text/2} the option file with the
%% paths there: key material is never on a command line.
-module(terrain_lab_tls).

%% The records and object identifiers of public_key.hrl this module uses, copied with
%% the same fields in the same order (that file's records have untyped fields, which
%% the build's warn_untyped_record refuses); public_key:pkix_sign/2 takes them.
-record('OTPTBSCertificate', {version = asn1_DEFAULT :: term(), serialNumber :: term(), signature :: term(),
                              issuer :: term(), validity :: term(), subject :: term(),
                              subjectPublicKeyInfo :: term(), issuerUniqueID = asn1_NOVALUE :: term(),
                              subjectUniqueID = asn1_NOVALUE :: term(), extensions = asn1_NOVALUE :: term()}).
-record('OTPSubjectPublicKeyInfo', {algorithm :: term(), subjectPublicKey :: term()}).
-record('PublicKeyAlgorithm', {algorithm :: term(), parameters = asn1_NOVALUE :: term()}).
-record('SignatureAlgorithm', {algorithm :: term(), parameters = asn1_NOVALUE :: term()}).
-record('Validity', {notBefore :: term(), notAfter :: term()}).
-record('Extension', {extnID :: term(), critical = asn1_DEFAULT :: term(), extnValue :: term()}).
-record('BasicConstraints', {cA = asn1_DEFAULT :: term(), pathLenConstraint = asn1_NOVALUE :: term()}).
-record('AuthorityKeyIdentifier', {keyIdentifier = asn1_NOVALUE :: term(), authorityCertIssuer = asn1_NOVALUE :: term(),
                                   authorityCertSerialNumber = asn1_NOVALUE :: term()}).
-record('ECPoint', {point :: term()}).
-record('ECPrivateKey', {version :: term(), privateKey :: term(), parameters = asn1_NOVALUE :: term(),
                         publicKey = asn1_NOVALUE :: term(), attributes = asn1_NOVALUE :: term()}).
-record('AttributeTypeAndValue', {type :: term(), value :: term()}).
-define('secp256r1', {1,2,840,10045,3,1,7}).
-define('id-ecPublicKey', {1,2,840,10045,2,1}).
-define('ecdsa-with-SHA256', {1,2,840,10045,4,3,2}).
-define('id-kp-clientAuth', {1,3,6,1,5,5,7,3,2}).
-define('id-kp-serverAuth', {1,3,6,1,5,5,7,3,1}).
-define('id-ce-extKeyUsage', {2,5,29,37}).
-define('id-ce-basicConstraints', {2,5,29,19}).
-define('id-ce-subjectAltName', {2,5,29,17}).
-define('id-ce-keyUsage', {2,5,29,15}).
-define('id-ce-subjectKeyIdentifier', {2,5,29,14}).
-define('id-ce-authorityKeyIdentifier', {2,5,29,35}).
-define('id-at-commonName', {2,5,4,3}).

%% API: a cluster's certificates
-export([create/2,
         dir/1,
         optfile/2,
         cli_optfile/1,
         recorded/1,
         vm_args/1,
         optfile_text/2,
         remote_stdin/2,
         remove/1]).

%% API: checking
-export([verify/2,
         running_tls/0,
         caller_vm_args/0,
         format_error/1]).

%% exports_not_used: verify/2 is read by terrain_lab_tls_tests and the TLS test cases to
%% check what the CA verifies.
-ignore_xref([{verify, 2}]).

-export_type([error_reason/0]).

-type error_reason() :: {tls, {bad_host, term()}
                            | {duplicate, atom()}
                            | {bad_name, term()}
                            | {file, file:filename(), file:posix()}
                            | not_tls_caller
                            | not_tls_cli}.

-define(VALID_DAYS, 365).
-define(CURVE, secp256r1).
-define(CLI, {cli}).           % the CLI's files: never a spec node's name

%%--------------------------------------------------------------------
%% API

%% @doc Makes the CA, a certificate and key for each `{Name, Host}' of `Nodes' (Host:
%% the host part of the node's name) and for the CLI (host `CliHost'), and the option
%% files, all under `Dir/tls' (see the module doc). An existing `Dir/tls' is replaced.
-spec create(file:filename(), #{nodes := [{atom(), string()}], cli_host := string()}) ->
          ok | {error, error_reason()}.
create(Dir, #{nodes := Nodes, cli_host := CliHost}) ->
    case check_nodes(Nodes, CliHost) of
        ok ->
            TlsDir = dir(Dir),
            try
                ok = remove(Dir),
                ok = make_dir(TlsDir),
                ok = make_dir(filename:join(TlsDir, "nodes")),
                Ca = new_ca(),
                ok = write_private(filename:join(TlsDir, "ca.pem"), pem_cert(Ca)),
                lists:foreach(fun({Who, Host}) ->
                                      Leaf = new_leaf(Ca, Who, Host),
                                      ok = write_private(pem_file(Dir, Who), [pem_cert(Leaf), pem_key(Leaf)]),
                                      ok = write_private(optfile(Dir, Who),
                                                         optfile_text(filename:join(TlsDir, "ca.pem"),
                                                                      pem_file(Dir, Who)))
                              end, [{?CLI, CliHost} | Nodes])
            catch
                throw:{file, File, Why} ->
                    _ = remove(Dir),
                    {error, {tls, {file, File, Why}}}
            end;
        {error, _} = Error ->
            Error
    end;
create(Dir, Options) ->
    error(badarg, [Dir, Options]).

%% @doc The cluster's TLS directory under the state directory `Dir'.
-spec dir(file:filename()) -> file:filename().
dir(Dir) ->
    filename:join(Dir, "tls").

%% @doc The option file of spec node `Name' (`Dir/tls/nodes/NAME.conf'), or of the CLI
%% (`{cli}': `Dir/tls/cli.conf').
-spec optfile(file:filename(), atom() | {cli}) -> file:filename().
optfile(Dir, Who) ->
    path(Dir, Who, ".conf").

%% @doc The CLI's option file for the cluster of the state directory `Dir'.
-spec cli_optfile(file:filename()) -> file:filename().
cli_optfile(Dir) ->
    optfile(Dir, ?CLI).

%% @doc Whether the cluster recorded in `Dir' runs over TLS (its CLI option file exists).
-spec recorded(file:filename()) -> boolean().
recorded(Dir) ->
    filelib:is_regular(cli_optfile(Dir)).

%% @doc The VM arguments that make a VM use TLS distribution with the option file
%% `OptFile'.
-spec vm_args(file:filename()) -> [string()].
vm_args(OptFile) ->
    ["-proto_dist", "inet_tls", "-ssl_dist_optfile", OptFile].

%% @doc The text of an option file whose node trusts the CA certificate in `CaFile' and
%% presents the certificate and key in `PemFile' (for a node on another host, paths
%% there).
-spec optfile_text(file:filename(), file:filename()) -> iolist().
optfile_text(CaFile, PemFile) ->
    Common = [{certfile, PemFile}, {keyfile, PemFile}, {cacertfile, CaFile}, {verify, verify_peer},
              {secure_renegotiate, true}],
    io_lib:format("%% terrain: TLS distribution of one node (docs/HOSTS.md)~n~tp.~n",
                  [[{server, Common ++ [{fail_if_no_peer_cert, true}]}, {client, Common}]]).

%% @doc The CA certificate and node `Name''s certificate and key as lines for a shell
%% that reads them with `read' up to a line `.' each (terrain_lab_ssh).
-spec remote_stdin(file:filename(), atom()) -> iolist().
remote_stdin(Dir, Name) ->
    {ok, Ca} = file:read_file(filename:join(dir(Dir), "ca.pem")),
    {ok, Leaf} = file:read_file(pem_file(Dir, Name)),
    [Ca, ".\n", Leaf, ".\n"].

%% @doc Removes `Dir/tls' and everything in it.
-spec remove(file:filename()) -> ok.
remove(Dir) ->
    TlsDir = dir(Dir),
    _ = [file:delete(F) || F <- filelib:wildcard(filename:join([TlsDir, "nodes", "*"]))],
    _ = file:del_dir(filename:join(TlsDir, "nodes")),
    _ = [file:delete(F) || F <- filelib:wildcard(filename:join(TlsDir, "*"))],
    _ = file:del_dir(TlsDir),
    ok.

%% @doc Checks that the certificate in `CertFile' (its first certificate) was issued by
%% the CA in `CaFile' and is valid now: `ok', or why not.
-spec verify(file:filename(), file:filename()) -> ok | {error, term()}.
verify(CaFile, CertFile) ->
    [CaDer | _] = certs(CaFile),
    [LeafDer | _] = certs(CertFile),
    case public_key:pkix_path_validation(CaDer, [LeafDer], []) of
        {ok, _} -> ok;
        {error, {bad_cert, Why}} -> {error, Why}
    end.

%% @doc Whether this VM runs TLS distribution (started with `-proto_dist inet_tls').
-spec running_tls() -> boolean().
running_tls() ->
    case init:get_argument(proto_dist) of
        {ok, Protos} -> lists:member("inet_tls", lists:append(Protos));
        error -> false
    end.

%% @doc The distribution arguments of this VM for the VMs it starts linked to it
%% (terrain_lab_cluster): `[]' when it runs plain TCP, its own `-proto_dist inet_tls
%% -ssl_dist_optfile FILE' when it runs TLS with an option file, and an error when it
%% runs TLS without one (its options cannot be passed on).
-spec caller_vm_args() -> {ok, [string()]} | {error, error_reason()}.
caller_vm_args() ->
    case {running_tls(), init:get_argument(ssl_dist_optfile)} of
        {false, _} -> {ok, []};
        {true, {ok, [[File] | _]}} -> {ok, vm_args(File)};
        {true, _} -> {error, {tls, not_tls_caller}}
    end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({tls, {bad_host, Host}}) ->
    io_lib:format("cannot make a certificate for host ~0tp: expected a host name or an IP address", [Host]);
format_error({tls, {bad_name, Name}}) ->
    io_lib:format("cannot make a certificate for node ~0tp: expected an atom", [Name]);
format_error({tls, {duplicate, Name}}) ->
    io_lib:format("node ~0tp is given more than once", [Name]);
format_error({tls, {file, File, Why}}) ->
    io_lib:format("cannot write ~ts: ~ts", [File, file:format_error(Why)]);
format_error({tls, not_tls_caller}) ->
    "the spec asks for TLS distribution (tls => true), but this VM does not run it: start it with "
    "-proto_dist inet_tls -ssl_dist_optfile FILE (its certificate is then shared with the nodes it starts), "
    "or start the cluster with 'terrain up', which makes the certificates (docs/HOSTS.md)";
format_error({tls, not_tls_cli}) ->
    "a TLS cluster is started by a VM that runs TLS distribution and is not distributed yet: the terrain "
    "escript re-executes itself that way for 'terrain up --tls' (docs/HOSTS.md); this VM cannot".

%%--------------------------------------------------------------------
%% Certificates

-record(issued, {cert :: binary(), key :: #'ECPrivateKey'{}, key_id :: binary(), name :: term()}).

new_ca() ->
    Key = public_key:generate_key({namedCurve, ?CURVE}),
    KeyId = key_id(Key),
    Name = rdn("terrain cluster CA " ++ binary_to_list(binary:encode_hex(crypto:strong_rand_bytes(4)))),
    Extensions = [#'Extension'{extnID = ?'id-ce-basicConstraints', critical = true,
                               extnValue = #'BasicConstraints'{cA = true, pathLenConstraint = 0}},
                  #'Extension'{extnID = ?'id-ce-keyUsage', critical = true, extnValue = [keyCertSign, cRLSign]},
                  #'Extension'{extnID = ?'id-ce-subjectKeyIdentifier', critical = false, extnValue = KeyId}],
    Cert = sign(tbs(Name, Name, Key, Extensions), Key),
    #issued{cert = Cert, key = Key, key_id = KeyId, name = Name}.

new_leaf(#issued{key = CaKey, key_id = CaKeyId, name = Issuer}, Who, Host) ->
    Key = public_key:generate_key({namedCurve, ?CURVE}),
    Extensions = [#'Extension'{extnID = ?'id-ce-basicConstraints', critical = true,
                               extnValue = #'BasicConstraints'{cA = false, pathLenConstraint = asn1_NOVALUE}},
                  #'Extension'{extnID = ?'id-ce-keyUsage', critical = true,
                               extnValue = [digitalSignature, keyEncipherment]},
                  #'Extension'{extnID = ?'id-ce-extKeyUsage', critical = false,
                               extnValue = [?'id-kp-serverAuth', ?'id-kp-clientAuth']},
                  #'Extension'{extnID = ?'id-ce-subjectAltName', critical = false,
                               extnValue = subject_alt_names(Who, Host)},
                  #'Extension'{extnID = ?'id-ce-subjectKeyIdentifier', critical = false, extnValue = key_id(Key)},
                  #'Extension'{extnID = ?'id-ce-authorityKeyIdentifier', critical = false,
                               extnValue = #'AuthorityKeyIdentifier'{keyIdentifier = CaKeyId}}],
    Subject = rdn(case Who of ?CLI -> "terrain CLI@" ++ Host; Name -> atom_to_list(Name) ++ "@" ++ Host end),
    #issued{cert = sign(tbs(Subject, Issuer, Key, Extensions), CaKey), key = Key, key_id = key_id(Key), name = Subject}.

tbs(Subject, Issuer, #'ECPrivateKey'{publicKey = Public}, Extensions) ->
    Now = erlang:system_time(second),
    #'OTPTBSCertificate'{
       version = v3,
       serialNumber = binary:decode_unsigned(crypto:strong_rand_bytes(16)) bsr 1,
       signature = #'SignatureAlgorithm'{algorithm = ?'ecdsa-with-SHA256', parameters = asn1_NOVALUE},
       issuer = Issuer,
       %% an hour back: the hosts' clocks may differ a little
       validity = #'Validity'{notBefore = utc_time(Now - 3600), notAfter = utc_time(Now + ?VALID_DAYS * 86400)},
       subject = Subject,
       subjectPublicKeyInfo = #'OTPSubjectPublicKeyInfo'{
                                 algorithm = #'PublicKeyAlgorithm'{algorithm = ?'id-ecPublicKey',
                                                                   parameters = {namedCurve, ?'secp256r1'}},
                                 subjectPublicKey = #'ECPoint'{point = Public}},
       extensions = Extensions}.

sign(Tbs, Key) ->
    public_key:pkix_sign(Tbs, Key).

rdn(CommonName) ->
    {rdnSequence, [[#'AttributeTypeAndValue'{type = ?'id-at-commonName',
                                             value = {utf8String, unicode:characters_to_binary(CommonName)}}]]}.

utc_time(Seconds) ->
    {{Y, Mo, D}, {H, Mi, S}} = calendar:system_time_to_universal_time(Seconds, second),
    {utcTime, lists:flatten(io_lib:format("~2..0b~2..0b~2..0b~2..0b~2..0b~2..0bZ", [Y rem 100, Mo, D, H, Mi, S]))}.

key_id(#'ECPrivateKey'{publicKey = Public}) ->
    binary:part(crypto:hash(sha, Public), 0, 20).

%% A node's certificate names its host; the CLI's names also this machine's short host
%% name, the host of the nodes a CLI relaunched with TLS may start linked to it
%% (terrain_lab_cluster, e.g. `terrain bench --spec' beside a TLS cluster on other hosts).
subject_alt_names(?CLI, Host) ->
    {ok, Local} = inet:gethostname(),
    Short = hd(string:split(Local, ".")),
    alt_names(Host) ++ [Name || Name <- alt_names(Short), not lists:member(Name, alt_names(Host))];
subject_alt_names(_Name, Host) ->
    alt_names(Host).

%% The host as the client checks it: a DNS name, and an IP address when it is one.
alt_names(Host) ->
    case inet:parse_strict_address(Host) of
        {ok, {A, B, C, D}} -> [{dNSName, Host}, {iPAddress, <<A, B, C, D>>}];
        {ok, Address} when tuple_size(Address) =:= 8 ->
            [{dNSName, Host}, {iPAddress, << <<W:16>> || W <- tuple_to_list(Address) >>}];
        {error, _} -> [{dNSName, Host}]
    end.

pem_cert(#issued{cert = Der}) ->
    public_key:pem_encode([{'Certificate', Der, not_encrypted}]).

pem_key(#issued{key = Key}) ->
    public_key:pem_encode([public_key:pem_entry_encode('ECPrivateKey', Key)]).

certs(File) ->
    {ok, Pem} = file:read_file(File),
    [Der || {'Certificate', Der, not_encrypted} <- public_key:pem_decode(Pem)].

%%--------------------------------------------------------------------
%% Files

pem_file(Dir, Who) ->
    path(Dir, Who, ".pem").

path(Dir, ?CLI, Extension) -> filename:join(dir(Dir), "cli" ++ Extension);
path(Dir, Name, Extension) -> filename:join([dir(Dir), "nodes", atom_to_list(Name) ++ Extension]).


make_dir(TlsDir) ->
    case filelib:ensure_dir(TlsDir) of
        ok ->
            case file:make_dir(TlsDir) of
                ok -> chmod(TlsDir, 8#700);
                {error, Why} -> throw({file, TlsDir, Why})
            end;
        {error, Why} ->
            throw({file, filename:dirname(TlsDir), Why})
    end.

%% Created empty with mode 0600 first, then written: the content is never readable by
%% others, not even for a moment.
write_private(File, Content) ->
    case file:open(File, [write, exclusive, raw, binary]) of
        {ok, Fd} ->
            try
                ok = chmod(File, 8#600),
                case file:write(Fd, Content) of
                    ok -> ok;
                    {error, Why} -> throw({file, File, Why})
                end
            after
                file:close(Fd)
            end;
        {error, Why} ->
            throw({file, File, Why})
    end.

chmod(File, Mode) ->
    case file:change_mode(File, Mode) of
        ok -> ok;
        {error, Why} -> throw({file, File, Why})
    end.

check_nodes(Nodes, CliHost) ->
    Names = [N || {N, _} <- Nodes],
    case {[N || N <- Names, not is_atom(N)], [H || H <- [CliHost | [H || {_, H} <- Nodes]], not valid_host(H)],
          Names -- lists:usort(Names)} of
        {[Bad | _], _, _} -> {error, {tls, {bad_name, Bad}}};
        {[], [Bad | _], _} -> {error, {tls, {bad_host, Bad}}};
        {[], [], [Dup | _]} -> {error, {tls, {duplicate, Dup}}};
        {[], [], []} -> ok
    end.

valid_host(Host) when is_list(Host), Host =/= [] ->
    io_lib:printable_latin1_list(Host) andalso
        lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                                orelse (C >= $0 andalso C =< $9) orelse lists:member(C, "-._:")
                  end, Host);
valid_host(_) ->
    false.
