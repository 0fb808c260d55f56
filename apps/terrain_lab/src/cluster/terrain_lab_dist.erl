%% @private
%% @doc Distribution for the lab's controlling node: make sure this node is alive
%% (start epmd and net_kernel when it is not), and name nodes on this host.
-module(terrain_lab_dist).

%% API
-export([ensure_started/1,
         ensure_epmd/0,
         host/0,
         node_name/2]).

%% exports_not_used: Used by terrain_lab_durations_SUITE to name nodes on this host.
-ignore_xref([{host, 0}]).

-type options() ::
        #{hidden => boolean(),   % start as a hidden node (the CLI does; default false)
          name => atom(),        % name to take; default terrain_ctl_<OS pid>
          name_domain => shortnames | longnames}.   % default shortnames

%% @doc Makes this node distributed if it is not yet. A node that is already alive is
%% left as it is.
-spec ensure_started(options()) -> ok | {error, {distribution, term()}}.
ensure_started(Options) ->
    case is_alive() of
        true ->
            ok;
        false ->
            ok = ensure_epmd(),
            Name = maps:get(name, Options, list_to_atom("terrain_ctl_" ++ os:getpid())),
            NetOptions = #{name_domain => maps:get(name_domain, Options, shortnames),
                           hidden => maps:get(hidden, Options, false)},
            case net_kernel:start(Name, NetOptions) of
                {ok, _} -> ok;
                {error, {already_started, _}} -> ok;
                {error, Why} -> {error, {distribution, Why}}
            end
    end.

%% @doc The host part of this node's name (this node must be alive).
-spec host() -> string().
host() ->
    [_, Host] = string:split(atom_to_list(node()), "@"),
    Host.

%% @doc The full name of a node on this host: `Prefix ++ Name @ host()'; before this
%% node is alive, with the short host name its own name will get.
-spec node_name(Prefix :: string(), Name :: atom()) -> node().
node_name(Prefix, Name) ->
    Host = case is_alive() of
               true -> host();
               false -> lists:takewhile(fun(C) -> C =/= $. end, net_adm:localhost())
           end,
    list_to_atom(Prefix ++ atom_to_list(Name) ++ "@" ++ Host).

%% @doc Starts epmd, which must run before net_kernel can register or a named peer
%% start; `epmd -daemon' returns at once when one is already running. Whether it
%% worked shows when the node registers.
-spec ensure_epmd() -> ok.
ensure_epmd() ->
    _ = terrain_lab_os:run(terrain_lab_os:otp_program("epmd"), ["-daemon"], #{timeout => 10000}),
    ok.
