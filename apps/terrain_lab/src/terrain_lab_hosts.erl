%% @private
%% @doc Hosts files and the hosts of a spec: `terrain up --hosts FILE [--per-host N]'.
%%
%% A hosts file lists one host a line; a line may also be a SLURM hostlist expression
%% (`atcn[019-036]', expanded by `terrain_lab_hostlist'); `#' starts a comment; blank
%% lines are skipped. {@link spec_terms/2} turns the hosts into a cluster spec: one
%% group per host (named after the host) holding `PerHost' nodes `HOST_1'..`HOST_N',
%% each with the node option `host => "HOST"', in the order of the file.
%%
%% {@link check_local/1} is the launcher's guard: this version starts VMs on the local
%% machine only, so a spec whose nodes name another host is refused with a message
%% that says so, rather than started in the wrong place.
-module(terrain_lab_hosts).

%% API
-export([read_file/1,
         spec_terms/2,
         write_spec/3,
         check_local/1,
         is_local/1,
         format_error/1]).

%% exports_not_used: is_local/1 is checked by the EUnit tests; read_file/1 and
%% spec_terms/2 are the two halves of write_spec/3, tested on their own.
-ignore_xref([{is_local, 1}, {read_file, 1}, {spec_terms, 2}]).

-export_type([error_reason/0]).

-type error_reason() ::
        {hosts, {file, file:filename(), file:posix()}}
      | {hosts, {line, file:filename(), pos_integer(), terrain_lab_hostlist:error_reason()}}
      | {hosts, {empty, file:filename()}}
      | {hosts, {duplicate, file:filename(), string()}}
      | {hosts, {write, file:filename(), file:posix()}}
      | {hosts, {remote, [string()]}}
      | {hosts, {usage, string()}}.                  % CLI: --hosts used the wrong way

%%--------------------------------------------------------------------
%% API

%% @doc The hosts of a hosts file, in its order.
-spec read_file(file:filename()) -> {ok, [string()]} | {error, error_reason()}.
read_file(File) ->
    case file:read_file(File) of
        {ok, Binary} -> parse(File, string:split(unicode:characters_to_list(Binary), "\n", all));
        {error, Why} -> {error, {hosts, {file, File, Why}}}
    end.

%% @doc The terms of a cluster spec (as `terrain_lab_spec:from_terms/2' takes them)
%% with `PerHost' nodes on each host.
-spec spec_terms([string()], pos_integer()) -> [tuple()].
spec_terms(Hosts, PerHost) when is_list(Hosts), is_integer(PerHost), PerHost >= 1 ->
    [{cluster, hosts, #{}} |
     [{group, list_to_atom(safe(Host)), #{},
       [{node, list_to_atom(safe(Host) ++ "_" ++ integer_to_list(I)), #{host => Host}}
        || I <- lists:seq(1, PerHost)]}
      || Host <- Hosts]];
spec_terms(Hosts, PerHost) ->
    error(badarg, [Hosts, PerHost]).

%% @doc Reads the hosts file `HostsFile' and writes the spec with `PerHost' nodes per
%% host to `SpecFile' (validated first); returns the hosts.
-spec write_spec(file:filename(), pos_integer(), file:filename()) ->
          {ok, [string()]} | {error, error_reason() | terrain_lab_spec:error_reason()}.
write_spec(HostsFile, PerHost, SpecFile) ->
    maybe_write(read_file(HostsFile), PerHost, SpecFile).

%% @doc `{ok, Spec}' when every node of `Spec' runs on this machine (no `host' option,
%% or a local one); the remote hosts otherwise.
-spec check_local(terrain_lab_spec:spec()) -> {ok, terrain_lab_spec:spec()} | {error, error_reason()}.
check_local(Spec) ->
    case lists:usort([H || #{host := H} <- terrain_lab_spec:nodes(Spec), not is_local(H)]) of
        [] -> {ok, Spec};
        Remote -> {error, {hosts, {remote, Remote}}}
    end.

%% @doc Whether `Host' names this machine: `localhost', a loopback address, or this
%% machine's host name (short or fully qualified).
-spec is_local(string()) -> boolean().
is_local(Host) ->
    {ok, Short} = inet:gethostname(),
    lists:member(Host, ["localhost", Short, net_adm:localhost()])
        orelse case inet:parse_address(Host) of
                   {ok, {127, _, _, _}} -> true;
                   {ok, {0, 0, 0, 0, 0, 0, 0, 1}} -> true;
                   _ -> false
               end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({hosts, {file, File, Why}}) ->
    io_lib:format("cannot read the hosts file ~ts: ~ts", [File, file:format_error(Why)]);
format_error({hosts, {line, File, Line, Reason}}) ->
    io_lib:format("hosts file ~ts, line ~b: ~ts", [File, Line, terrain_lab_hostlist:format_error(Reason)]);
format_error({hosts, {empty, File}}) ->
    io_lib:format("the hosts file ~ts lists no host", [File]);
format_error({hosts, {duplicate, File, Host}}) ->
    io_lib:format("the hosts file ~ts lists ~ts more than once (use --per-host for several VMs on a host)",
                  [File, Host]);
format_error({hosts, {write, File, Why}}) ->
    io_lib:format("cannot write the spec ~ts: ~ts", [File, file:format_error(Why)]);
format_error({hosts, {usage, Text}}) ->
    Text;
format_error({hosts, {remote, Hosts}}) ->
    io_lib:format("the spec places nodes on other hosts (~ts); this version of terrain starts VMs on the "
                  "local machine only (docs/HOSTS.md)", [lists:join(", ", Hosts)]).

%%--------------------------------------------------------------------
%% Internal functions

parse(File, Lines) ->
    Numbered = lists:zip(lists:seq(1, length(Lines)), Lines),
    Expanded = [{N, terrain_lab_hostlist:expand(Text)}
                || {N, Line} <- Numbered,
                   Text <- [string:trim(hd(string:split(Line, "#")))], Text =/= ""],
    case [{N, R} || {N, {error, R}} <- Expanded] of
        [{N, Reason} | _] ->
            {error, {hosts, {line, File, N, Reason}}};
        [] ->
            Hosts = lists:append([H || {_, {ok, H}} <- Expanded]),
            case {Hosts, Hosts -- lists:usort(Hosts)} of
                {[], _} -> {error, {hosts, {empty, File}}};
                {_, []} -> {ok, Hosts};
                {_, [Dup | _]} -> {error, {hosts, {duplicate, File, Dup}}}
            end
    end.

maybe_write({ok, Hosts}, PerHost, SpecFile) ->
    Terms = spec_terms(Hosts, PerHost),
    case terrain_lab_spec:from_terms(Terms, SpecFile) of
        {ok, _} ->
            Text = ["%% Generated by 'terrain up --hosts': one group per host.\n",
                    [io_lib:format("~tp.~n", [T]) || T <- Terms]],
            case file:write_file(SpecFile, Text) of
                ok -> {ok, Hosts};
                {error, Why} -> {error, {hosts, {write, SpecFile, Why}}}
            end;
        {error, _} = Error ->
            Error
    end;
maybe_write({error, _} = Error, _PerHost, _SpecFile) ->
    Error.

%% A host name as a spec name: letters, digits, '_' and '-'; anything else becomes '_'.
safe(Host) ->
    [case (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z) orelse (C >= $0 andalso C =< $9)
              orelse C =:= $- of
         true -> C;
         false -> $_
     end || C <- Host].
