%% @private
%% @doc The native proxy of an emulated node: one C program (`priv/terrain_netem_proxy',
%% built from `c_src/') that carries every connection this node opens to another node of
%% its cluster, driven by `terrain_lab_netem_server' through an Erlang port.
%%
%% It applies the link model of `terrain_lab_netem_link' (due times in ns, rate, jitter,
%% window) with a timer of nanosecond resolution instead of a spin, and stamps each chunk
%% with the kernel's receive time, so a hop costs neither a spin nor the proxy's own
%% wake-up (docs/NETEM.md, "Native proxy"). This module holds the port protocol
%% (`{packet, 4}' frames, described at the top of the C source) and finds the program:
%% <ul>
%% <li>`executable/0' on the controlling node: the program in terrain_lab's priv dir, or,
%%   when terrain runs from the escript (an archive that nothing can execute from), a copy
%%   written once to the user's cache directory;</li>
%% <li>`start/1', `open/7', `set_link/3', `close/2', `stats/1' on the emulated node.</li>
%% </ul>
-module(terrain_lab_netem_native).

%% API
-export([executable/0,
         start/1,
         open/7,
         set_link/3,
         close/2,
         stats/1,
         event/1]).

-export_type([stats/0, connection_stats/0]).

-type direction_stats() :: #{bytes := non_neg_integer(),    % delivered
                             queued := non_neg_integer(),   % held, not yet due
                             paused := boolean()}.          % source not read (window full)
-type connection_stats() :: #{id := non_neg_integer(),
                              state := accepting | connecting | carrying,
                              out := direction_stats(),     % this node -> the target
                              in := direction_stats()}.
-type stats() :: #{connections := [connection_stats()],
                   wakeups := non_neg_integer(),            % the program's epoll wake-ups so far
                   %% how late the chunks written so far left against their due times
                   late := #{count := non_neg_integer(),
                             sum_ns := non_neg_integer(),
                             max_ns := non_neg_integer(),
                             %% chunks by lateness: below each bound (µs), the last one at or above 1000
                             histogram := [{pos_integer() | above, non_neg_integer()}]}}.

-define(PROGRAM, "terrain_netem_proxy").
-define(REPLY_TIMEOUT, 5000).

%%--------------------------------------------------------------------
%% API

%% @doc The native proxy program, runnable from this machine's file system: terrain_lab's
%% priv dir, or a copy of the escript's in the user cache. `error' when terrain was built
%% without it (no C compiler).
-spec executable() -> {ok, file:filename()} | error.
executable() ->
    case code:priv_dir(terrain_lab) of
        {error, bad_name} ->
            error;
        Priv ->
            Path = filename:join(Priv, ?PROGRAM),
            case file:read_file_info(Path) of
                {ok, _} -> {ok, Path};
                {error, _} -> from_archive(Path)
            end
    end.

%% @doc Starts the program as a port owned by the caller.
-spec start(file:filename()) -> {ok, port()} | {error, term()}.
start(Path) ->
    terrain_lab_os:start(Path, [], #{packet => 4}).

%% @doc A new connection `Id': listen on a fresh port of `Source', accept one
%% connection (within `AcceptMs'), connect it from `Source' to `Address'. Returns the
%% port to connect to. Events for other connections that arrive meanwhile stay in the
%% mailbox. `Source' and `Address''s IP are of one family.
-spec open(port(), non_neg_integer(), inet:ip_address(), {inet:ip_address(), inet:port_number()},
           terrain_lab_netem_link:link(), pos_integer(), pos_integer()) -> {ok, inet:port_number()} | {error, term()}.
open(Port, Id, Source, {Ip, TargetPort}, Link, AcceptMs, SendMs) ->
    {Family, IpBytes} = ip_bytes(Ip),
    {Family, SourceBytes} = ip_bytes(Source),
    true = port_command(Port, [<<"O", Id:32, Family:8>>, IpBytes, SourceBytes, <<TargetPort:16>>, link_bytes(Link),
                               <<AcceptMs:32, SendMs:32>>]),
    receive
        {Port, {data, <<"o", Id:32, Listen:16>>}} -> {ok, Listen};
        {Port, {data, <<"e", Id:32, Why/binary>>}} -> {error, {native_proxy, binary_to_list(Why)}};
        {Port, {exit_status, Status}} -> exit({native_proxy_exited, Status})
    after ?REPLY_TIMEOUT ->
            {error, {native_proxy, no_reply}}
    end.

%% @doc New link options for connection `Id' (both directions); chunks already queued
%% keep their due times.
-spec set_link(port(), non_neg_integer(), terrain_lab_netem_link:link()) -> ok.
set_link(Port, Id, Link) ->
    true = port_command(Port, [<<"L", Id:32>>, link_bytes(Link)]),
    ok.

%% @doc Cuts connection `Id' now (a partition): both sockets close, queued bytes are
%% dropped. The program answers with the connection's end event.
-spec close(port(), non_neg_integer()) -> ok.
close(Port, Id) ->
    true = port_command(Port, <<"C", Id:32>>),
    ok.

%% @doc The program's connections and counters.
-spec stats(port()) -> {ok, stats()} | {error, term()}.
stats(Port) ->
    true = port_command(Port, <<"S">>),
    receive
        {Port, {data, <<"s", Count:32, Rest/binary>>}} -> {ok, decode_stats(Count, Rest, [])}
    after ?REPLY_TIMEOUT ->
            {error, {native_proxy, no_reply}}
    end.

%% @doc Decodes an event the program sent on its own: a connection that ended.
-spec event(binary()) -> {ended, non_neg_integer(), string()} | unknown.
event(<<"x", Id:32, Why/binary>>) -> {ended, Id, binary_to_list(Why)};
event(_) -> unknown.

%%--------------------------------------------------------------------
%% Internal functions

ip_bytes({A, B, C, D}) -> {4, <<A, B, C, D>>};
ip_bytes({_, _, _, _, _, _, _, _} = Ip) -> {6, << <<W:16>> || W <- tuple_to_list(Ip) >>}.

%% Latency and jitter in ns, bandwidth in bytes/s (0: unlimited), window in bytes.
link_bytes(#{latency := Latency, jitter := Jitter, bandwidth := Bandwidth} = Link) ->
    Rate = case Bandwidth of infinity -> 0; _ -> Bandwidth end,
    <<Latency:64, Jitter:64, Rate:64, (terrain_lab_netem_link:window(Link)):64>>.

decode_stats(0, <<Wakeups:64, Count:64, Sum:64, Max:64, Histogram:8/binary-unit:64>>, Acc) ->
    #{connections => lists:reverse(Acc), wakeups => Wakeups,
      late => #{count => Count, sum_ns => Sum, max_ns => Max,
                histogram => lists:zip([10, 20, 50, 100, 200, 500, 1000, above], [N || <<N:64>> <= Histogram])}};
decode_stats(N, <<Id:32, State:8, OB:64, OQ:64, OP:8, IB:64, IQ:64, IP:8, Rest/binary>>, Acc) ->
    Connection = #{id => Id,
                   state => case State of 0 -> accepting; 1 -> connecting; 2 -> carrying end,
                   out => #{bytes => OB, queued => OQ, paused => OP =/= 0},
                   in => #{bytes => IB, queued => IQ, paused => IP =/= 0}},
    decode_stats(N - 1, Rest, [Connection | Acc]).

%% The escript is an archive: its copy of the program is written once (per content) to
%% the user cache, through a temporary file and a rename, so concurrent CLIs agree.
from_archive(Path) ->
    case erl_prim_loader:get_file(Path) of
        {ok, Binary, _} ->
            Hash = binary:part(binary:encode_hex(crypto:hash(sha256, Binary)), 0, 16),
            Dir = filename:join(filename:basedir(user_cache, "terrain"), "netem-" ++ binary_to_list(Hash)),
            Target = filename:join(Dir, ?PROGRAM),
            case filelib:is_regular(Target) of
                true ->
                    {ok, Target};
                false ->
                    Tmp = Target ++ ".tmp" ++ os:getpid(),
                    case filelib:ensure_dir(Target) =:= ok andalso file:write_file(Tmp, Binary) =:= ok
                        andalso file:change_mode(Tmp, 8#755) =:= ok andalso file:rename(Tmp, Target) =:= ok of
                        true -> {ok, Target};
                        false -> _ = file:delete(Tmp), error
                    end
            end;
        error ->
            error
    end.
