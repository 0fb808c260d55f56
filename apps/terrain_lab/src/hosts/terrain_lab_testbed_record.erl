%% @private
%% @doc What a testbed made, and the one way it makes and removes a thing of this
%% machine (docs/TESTBED.md, "What up makes, and what down removes").
%%
%% The record is `DIR/made.jsonl': a header line, then one line per step. Before each
%% thing is made a line `intent' names it (a directory, a file, a bridge or veth, a
%% network namespace, a process); once it is made a line `made' adds how to know it
%% again: a namespace's inode, a link's ifindex, a process's OS pid and start time. A
%% creation that fails because the name is taken (`ip netns add', `ip link add' and
%% `mkdir' refuse an existing one) is `not_made', and nothing of that name is ever
%% removed. Lines are appended, so the record costs the same for every thing, and a
%% SIGKILL tears at most the last line, which the reader skips.
%%
%% {@link remove/1} (`down', and `up' rolling back) removes exactly what the record
%% names, each only while it is still the thing made: processes whose start time
%% matches (then every process left in the testbed's namespaces, found by the
%% namespace's inode, so also after the namespace was deleted from outside), namespaces
%% and links whose inode and ifindex match, files, the directories made (with what the
%% testbed's daemons wrote in them), and last `DIR' itself, only when nothing else is
%% left in it. A thing whose `intent' has no `made' (the command was killed between
%% the two) is removed if it exists: the prefix's lock and the checks before `up' made
%% sure no other thing had that name.
%% ```
%% ok = terrain_lab_testbed_record:create(Dir, "tb"),
%% terrain_lab_testbed_record:make(Dir, #{kind => namespace, name => "tb1"},
%%                                 fun() -> sh("ip netns add tb1"), [namespace_id("tb1")] end),
%% Lines = terrain_lab_testbed_record:remove(Dir).
%% '''
-module(terrain_lab_testbed_record).

-include_lib("kernel/include/file.hrl").
-include_lib("terrain_json/include/terrain_formats.hrl").

%% API
-export([create/2,
         prefix/1,
         make/3,
         make_dir/2,
         write_file/3,
         things/1,
         remove/1,
         daemons/1,
         own_pid/1,
         namespace_id/1,
         link_id/1,
         process_id/1,
         processes_in/1,
         pid_file/1,
         check_interrupt/0,
         sh/1,
         command/2,
         output/2]).

-export_type([thing/0]).

%% A thing made. Before it is made: `kind' and its name (`name' for namespaces, links
%% and processes, `path' for files and directories), with a process's `comm', and
%% where it writes its pid (`pid_path') if it does, and whether `status' lists it as
%% a daemon. Read back, it also has `state' and `at' (the intent's time in clock
%% ticks since boot) and, once made, `id'.
-type thing() :: #{kind := dir | file | link | namespace | process,
                   name => string(),
                   path => file:filename(),
                   comm => string(),
                   pid_path => file:filename(),
                   daemon => boolean(),
                   top => boolean(),
                   state => intent | made | not_made,
                   at => integer(),
                   id => term()}.

-define(RECORD, "made.jsonl").
-define(MAX_RECORD_BYTES, 64 * 1024 * 1024).
-define(COMMAND_MS, 15000).
-define(STOP_MS, 5000).
-define(CLK_TCK, 100).                   % Linux's USER_HZ: /proc/PID/stat's start time unit
-define(KINDS, [dir, file, link, namespace, process]).
-define(STATES, [intent, made, not_made]).

%%--------------------------------------------------------------------
%% API

%% @doc Makes `Dir' (which must not exist: only a directory made here is the
%% testbed's) and its record, whose header names the testbed's prefix. `{error,
%% {testbed, {file, Path, Reason}}}' when either is refused; then nothing is left.
-spec create(file:filename(), string()) -> ok | {error, {testbed, {file, file:filename(), term()}}}.
create(Dir, Prefix) ->
    Lines = [json(#{format => ?TERRAIN_FORMAT_TESTBED_MADE, prefix => Prefix}),
             line(made, #{kind => dir, path => Dir, top => true}, #{at => ticks()})],
    case file:make_dir(Dir) of
        ok ->
            %% this user's and closed to others: a record anyone else could write is not read
            case file:change_mode(Dir, 8#700) of
                ok ->
                    case file:write_file(record_file(Dir), Lines, [exclusive]) of
                        ok -> ok;
                        {error, Why} ->
                            _ = file:delete(record_file(Dir)),
                            _ = file:del_dir(Dir),
                            file_error(record_file(Dir), Why)
                    end;
                {error, Why} ->
                    _ = file:del_dir(Dir),
                    file_error(Dir, Why)
            end;
        {error, Why} ->
            file_error(Dir, Why)
    end.

%% @doc Records `Things' (one or a list), runs `Make', which makes them (a
%% `{testbed, _}' throw when it cannot) and returns their ids in order (or `ok' when
%% they have none), then records them as made. A namespace, link or directory whose
%% making failed is recorded as not made: its creation refuses a name that is taken.
%% A SIGTERM that has arrived (see {@link check_interrupt/0}) stops before the intent.
-spec make(file:filename(), thing() | [thing()], fun(() -> ok | [term()])) -> ok.
make(Dir, #{} = Thing, Make) ->
    make(Dir, [Thing], Make);
make(Dir, Things, Make) ->
    ok = check_interrupt(),
    At = ticks(),
    ok = append(Dir, [line(intent, T, #{at => At}) || T <- Things]),
    try Make() of
        ok -> append(Dir, [line(made, T, #{}) || T <- Things]);
        Ids -> append(Dir, [line(made, T, #{id => Id}) || {T, Id} <- lists:zip(Things, Ids)])
    catch
        throw:Reason ->
            NotMade = [line(not_made, T, #{}) || #{kind := K} = T <- Things, K =/= file, K =/= process],
            try append(Dir, NotMade)
            catch throw:{testbed, _} -> ok            % unrecorded: removed only if it exists
            end,
            throw(Reason)
    end.

%% @doc Makes the directory `Path' (which must not exist) for the testbed in `Dir';
%% it is removed with what is written in it.
-spec make_dir(file:filename(), file:filename()) -> ok.
make_dir(Dir, Path) ->
    make(Dir, #{kind => dir, path => Path},
         fun() ->
                 case file:make_dir(Path) of
                     ok -> ok;
                     {error, Why} -> throw({testbed, {file, Path, Why}})
                 end
         end).

%% @doc Writes the file `Path' of the testbed in `Dir' (a temporary file and a
%% rename); a refusal (a full disk) is `{testbed, {file, Path, Reason}}', thrown.
%% `Content' is text (UTF-8 in the file), or a binary written as it is.
-spec write_file(file:filename(), file:filename(), binary() | unicode:chardata()) -> ok.
write_file(Dir, Path, Content) ->
    Bytes = case is_binary(Content) of
                true -> Content;
                false -> unicode:characters_to_binary(Content)
            end,
    make(Dir, #{kind => file, path => Path},
         fun() ->
                 case terrain_lab_files:write(Path, Bytes) of
                     ok -> ok;
                     {error, {write, File, Why}} -> throw({testbed, {file, File, Why}})
                 end
         end).

%% @doc The prefix of the testbed whose record is in `Dir' (also when `up' was killed
%% before it wrote testbed.json), or `error' when there is no record.
-spec prefix(file:filename()) -> {ok, string()} | error.
prefix(Dir) ->
    case is_private(Dir) andalso read_record_bytes(record_file(Dir)) of
        {ok, Bin} ->
            case terrain_json:decode(hd(binary:split(Bin, <<"\n">>))) of
                {ok, #{<<"format">> := ?TERRAIN_FORMAT_TESTBED_MADE, <<"prefix">> := Prefix}} when is_binary(Prefix) ->
                    {ok, binary_to_list(Prefix)};
                _ ->
                    error
            end;
        _ ->
            error
    end.

%% @doc The things recorded in `Dir', in the order they were first named, each with
%% its last state; `[]' when there is no record.
-spec things(file:filename()) -> [thing()].
things(Dir) ->
    case read_record_bytes(record_file(Dir)) of
        {ok, Bin} ->
            [_Header | Lines] = binary:split(Bin, <<"\n">>, [global]),
            fold([T || L <- Lines, {ok, T} <- [decode(L)]]);
        error ->
            []
    end.

%% @doc Removes what the record in `Dir' names, last made first; returns a line per
%% thing removed (and one for a directory kept because it holds what was not made).
%% Only a record in a directory of this user's, closed to others (0700), is read, and
%% of its paths only those in `Dir' or the testbed's run directory.
-spec remove(file:filename()) -> [string()].
remove(Dir) ->
    Roots = case prefix(Dir) of
                {ok, Prefix} -> [Dir, terrain_lab_testbed_slurm:run_dir(Prefix)];
                error -> []
            end,
    Inside = fun(#{path := P}) -> lists:any(fun(Root) -> P =:= Root orelse lists:prefix(Root ++ "/", P) end, Roots);
                (#{}) -> Roots =/= []
             end,
    Things = [T || #{state := S} = T <- things(Dir), S =/= not_made, Inside(T)],
    Of = fun(Kind) -> lists:reverse([T || #{kind := K} = T <- Things, K =:= Kind]) end,
    Stopped = stop_processes(Of(process)),
    Hosts = remove_namespaces(Of(namespace)),
    Links = lists:append([remove_link(T) || T <- Of(link)]),
    _ = [file:delete(P) || #{path := P} <- Of(file), is_type(P, regular)],
    Paths = [P || #{path := P} <- Of(dir)],
    Dirs = lists:append([remove_dir(T, Paths) || T <- Of(dir)]),
    Stopped ++ Hosts ++ Links ++ Dirs.

%% @doc The daemons recorded as made in `Dir' (`status' and `read'): name to OS pid.
-spec daemons(file:filename()) -> #{binary() => binary()}.
daemons(Dir) ->
    maps:from_list([{list_to_binary(Name), list_to_binary(Pid)}
                    || #{kind := process, daemon := true, state := made, name := Name, id := #{pid := Pid}}
                           <- things(Dir)]).

%% @doc The OS pid of a recorded process while it is still the process made (its
%% command and start time), else `none'.
-spec own_pid(thing()) -> string() | none.
own_pid(#{state := made, comm := Comm, id := #{pid := Pid, start := Start}}) ->
    case process_id(Pid) of
        #{comm := Comm, start := Start} -> Pid;
        _ -> none
    end;
own_pid(#{state := intent, comm := Comm, pid_path := File, at := At}) ->
    case file:read_file(File) of
        {ok, Bin} ->
            Pid = string:trim(binary_to_list(Bin)),
            case process_id(Pid) of
                #{comm := Comm, start := Start} when Start >= At - 1 -> Pid;
                _ -> none
            end;
        {error, _} ->
            none
    end;
own_pid(#{}) ->
    none.

%% @doc The inode of the named network namespace, or `none'.
-spec namespace_id(string()) -> non_neg_integer() | none.
namespace_id(Name) ->
    case file:read_file_info("/run/netns/" ++ Name) of
        {ok, #file_info{inode = Inode}} -> Inode;
        {error, _} -> none
    end.

%% @doc The ifindex of the network interface `Name' of this namespace, or `none'.
-spec link_id(string()) -> pos_integer() | none.
link_id(Name) ->
    case lists:member($/, Name) orelse file:read_file("/sys/class/net/" ++ Name ++ "/ifindex") of
        {ok, Bin} -> binary_to_integer(string:trim(Bin));
        _ -> none
    end.

%% @doc The command and start time (clock ticks since boot) of an OS process, or `none'.
-spec process_id(string()) -> #{pid := string(), comm := string(), start := integer()} | none.
process_id(Pid) ->
    case file:read_file("/proc/" ++ Pid ++ "/stat") of
        {ok, Stat} ->
            [Before, After] = string:split(Stat, ")", trailing),
            [_, Comm] = string:split(Before, "("),
            Start = lists:nth(20, string:lexemes(After, " ")),
            #{pid => Pid, comm => binary_to_list(Comm), start => binary_to_integer(Start)};
        {error, _} ->
            none
    end.

%% @doc `{Pid, Command}' of every process in the network namespace of this inode
%% (also of a namespace no longer named: one deleted while processes held it).
-spec processes_in(non_neg_integer()) -> [{string(), string()}].
processes_in(Inode) ->
    Tag = "net:[" ++ integer_to_list(Inode) ++ "]",
    {ok, Entries} = file:list_dir("/proc"),
    [{P, Comm} || P <- Entries, is_digits(P), file:read_link("/proc/" ++ P ++ "/ns/net") =:= {ok, Tag},
                  #{comm := Comm} <- [process_id(P)]].

%% @doc The OS pid a daemon wrote to `File', once it has (a `{testbed, _}' throw
%% when it has not within the deadline).
-spec pid_file(file:filename()) -> string().
pid_file(File) ->
    Deadline = erlang:monotonic_time(millisecond) + ?COMMAND_MS,
    pid_file(File, Deadline).

pid_file(File, Deadline) ->
    case file:read_file(File) of
        {ok, Bin} when byte_size(Bin) > 0 -> binary_to_list(string:trim(Bin));
        _ ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> throw({testbed, {command, "read " ++ File, timeout, "the daemon wrote no pid file"}});
                false -> receive after 50 -> pid_file(File, Deadline) end
            end
    end.

%% @doc Throws `{testbed, interrupted}' when SIGTERM has asked `up' to stop (the CLI
%% sends `{terrain_lab_testbed, interrupt}' to the process making the testbed).
-spec check_interrupt() -> ok.
check_interrupt() ->
    receive
        {terrain_lab_testbed, interrupt} -> throw({testbed, interrupted})
    after 0 ->
            ok
    end.

%% @doc Runs a shell line under the deadline; throws its failure.
-spec sh(iodata()) -> ok.
sh(Command) ->
    ok = check_interrupt(),
    case command(Command, ?COMMAND_MS) of
        {ok, _} -> ok;
        {error, Reason} -> throw(Reason)
    end.

%% @doc A shell line under a deadline: its output, or why not.
-spec command(iodata(), pos_integer()) -> {ok, string()} | {error, {testbed, term()}}.
command(Command, Timeout) ->
    Flat = unicode:characters_to_list(Command),
    case terrain_lab_os:run("/bin/sh", ["-c", Flat], #{timeout => Timeout}) of
        {ok, 0, Output} -> {ok, unicode:characters_to_list(Output)};
        {ok, Code, Output} -> {error, {testbed, {command, Flat, Code, unicode:characters_to_list(Output)}}};
        {error, {run, _, {timeout, _, Output}}} ->
            {error, {testbed, {command, Flat, timeout, unicode:characters_to_list(Output)}}};
        {error, Reason} -> {error, {testbed, {run, Reason}}}
    end.

%% @doc What a program that only reports (id, ss, ip) writes, under the deadline; ""
%% when it fails.
-spec output(string(), [string()]) -> string().
output(Program, Args) ->
    case terrain_lab_os:run(Program, Args, #{timeout => ?COMMAND_MS}) of
        {ok, 0, Output} -> unicode:characters_to_list(Output);
        {ok, _, _} -> "";
        {error, _} -> ""
    end.

%%--------------------------------------------------------------------
%% Internal functions: the record

record_file(Dir) ->
    filename:join(Dir, ?RECORD).

file_error(Path, Why) ->
    {error, {testbed, {file, Path, Why}}}.

append(Dir, Lines) ->
    case file:write_file(record_file(Dir), Lines, [append]) of
        ok -> ok;
        {error, Why} -> throw({testbed, {file, record_file(Dir), Why}})
    end.

line(State, Thing, Extra) ->
    json(maps:merge(maps:merge(Thing, Extra), #{state => State})).

json(Map) ->
    [terrain_json:encode(maps:map(fun(_, V) -> value(V) end, Map)), "\n"].

value(V) when is_list(V) -> unicode:characters_to_binary(V);
value(#{} = M) -> maps:map(fun(_, X) -> value(X) end, M);
value(V) -> V.

decode(Line) ->
    try terrain_json:decode(Line) of
        {ok, #{<<"kind">> := Kind, <<"state">> := State} = M} ->
            {ok, maps:from_list([{K, V} || {Key, Value} <- maps:to_list(M), {K, V} <- [field(Key, Value)]]
                                ++ [{kind, atom(Kind, ?KINDS)}, {state, atom(State, ?STATES)}])};
        _ ->
            error
    catch
        _:_ -> error                 % a line torn by a kill
    end.

field(<<"id">>, #{<<"pid">> := P, <<"start">> := S}) -> {id, #{pid => binary_to_list(P), start => S}};
field(<<"id">>, Id) when is_integer(Id) -> {id, Id};
field(<<"at">>, At) when is_integer(At) -> {at, At};
field(<<"daemon">>, D) when is_boolean(D) -> {daemon, D};
field(<<"top">>, T) when is_boolean(T) -> {top, T};
field(Key, Text) when is_binary(Text) ->
    case lists:member(Key, [<<"name">>, <<"path">>, <<"comm">>, <<"pid_path">>]) of
        true -> {binary_to_atom(Key), unicode:characters_to_list(Text)};
        false -> skip
    end;
field(_, _) ->
    skip.

atom(Text, Atoms) ->
    hd([A || A <- Atoms, atom_to_binary(A) =:= Text]).

%% One thing per name, in the order first named; later lines update it.
fold(Lines) ->
    Key = fun(#{kind := K} = T) -> {K, maps:get(name, T, maps:get(path, T, ""))} end,
    {Order, Things} = lists:foldl(fun(T, {Order, Acc}) ->
                                          K = Key(T),
                                          case Acc of
                                              #{K := Old} -> {Order, Acc#{K := maps:merge(Old, T)}};
                                              _ -> {[K | Order], Acc#{K => T}}
                                          end
                                  end, {[], #{}}, Lines),
    [maps:get(K, Things) || K <- lists:reverse(Order)].

read_record_bytes(File) ->
    case file:read_file_info(File) of
        {ok, #file_info{type = regular, size = Size}} when Size =< ?MAX_RECORD_BYTES ->
            case file:read_file(File) of
                {ok, Bin} -> {ok, Bin};
                {error, _} -> error
            end;
        _ ->
            error
    end.

%% The testbed's directory is this user's and closed to others (a record that anyone
%% else could have written is not read).
is_private(Dir) ->
    case {file:read_link_info(Dir), file:read_file_info("/proc/self")} of
        {{ok, #file_info{type = directory, uid = Uid, mode = Mode}}, {ok, #file_info{uid = Uid}}} ->
            Mode band 8#077 =:= 0;
        _ ->
            false
    end.

ticks() ->
    {ok, Uptime} = file:read_file("/proc/uptime"),
    [Seconds | _] = string:lexemes(binary_to_list(Uptime), " "),
    trunc(list_to_float(Seconds) * ?CLK_TCK).

is_digits(Text) ->
    Text =/= "" andalso lists:all(fun(C) -> C >= $0 andalso C =< $9 end, Text).

is_type(Path, Type) ->
    case file:read_link_info(Path) of
        {ok, #file_info{type = T}} -> T =:= Type;
        {error, _} -> false
    end.

%%--------------------------------------------------------------------
%% Internal functions: removing

%% The recorded processes still running as made, a command at a time (the one made
%% last first: slurmd before slurmctld before munged), TERM then KILL.
stop_processes(Things) ->
    Comms = lists:foldl(fun(#{comm := C}, Acc) -> case lists:member(C, Acc) of true -> Acc; false -> Acc ++ [C] end end,
                        [], Things),
    lists:append([stop_group([{T, P} || #{comm := C} = T <- Things, C =:= Comm, P <- [own_pid(T)], P =/= none])
                  || Comm <- Comms]).

stop_group(Ours) ->
    StillOurs = fun(Pid) -> lists:any(fun({T, P}) -> P =:= Pid andalso own_pid(T) =:= Pid end, Ours) end,
    {Killed, _} = terrain_lab_os:terminate_all([Pid || {_, Pid} <- Ours], ?STOP_MS, StillOurs),
    [Name ++ case lists:member(Pid, Killed) of
                 true -> " killed (pid " ++ Pid ++ ")";
                 false -> " stopped (pid " ++ Pid ++ ")"
             end || {#{daemon := true, name := Name}, Pid} <- Ours].

%% Every process in the namespaces made (by inode: also in one deleted from outside),
%% TERM then KILL, then the namespaces still of that inode.
remove_namespaces(Things) ->
    Ids = [{Name, Id} || #{name := Name} = T <- Things, Id <- [recorded_namespace(T)], Id =/= none],
    Left = [{Name, Id, processes_in(Id)} || {Name, Id} <- Ids],
    All = [P || {_, _, Ps} <- Left, {P, _} <- Ps],
    _ = [terrain_lab_os:signal(P, "TERM") || P <- All],
    _ = terrain_lab_os:await_exit(All, 2000),
    Stubborn = [P || {_, Id} <- Ids, {P, _} <- processes_in(Id)],
    _ = [terrain_lab_os:signal(P, "KILL") || P <- Stubborn],
    _ = terrain_lab_os:await_exit(Stubborn, 2000),
    [host_line(Name, Id, [C || {_, C} <- Ps]) || {Name, Id, Ps} <- Left].

recorded_namespace(#{state := made, id := Id}) -> Id;
recorded_namespace(#{name := Name}) -> namespace_id(Name).   % killed between intent and made

host_line(Name, Id, Comms) ->
    Ended = case Comms of
                [] -> "";
                _ -> "; ended: " ++ string:join(Comms, " ")
            end,
    case namespace_id(Name) of
        Id ->
            _ = command(["ip netns del ", Name], ?COMMAND_MS),
            "host " ++ Name ++ " removed (namespace" ++ Ended ++ ")";
        _ ->
            "host " ++ Name ++ ": its namespace had been deleted already" ++ Ended
    end.

remove_link(#{name := Name} = T) ->
    Now = link_id(Name),
    case maps:get(id, T, Now) of
        Now when Now =/= none ->
            _ = command(["ip link del ", Name], ?COMMAND_MS),
            ["bridge " ++ Name ++ " deleted" || lists:prefix("tbr", Name), link_id(Name) =:= none];
        _ ->
            []
    end.

%% A directory made: below the top one with what the daemons wrote there; the top one
%% (its record last) only when nothing is left in it. A line for each not inside
%% another.
remove_dir(#{path := Path, top := true}, _Paths) ->
    _ = file:delete(record_file(Path)),
    case file:del_dir(Path) of
        ok -> ["directory " ++ Path ++ " removed"];
        {error, enoent} -> [];
        {error, _} ->
            {ok, Left} = file:list_dir(Path),
            Shown = lists:join(", ", lists:sublist(lists:sort(Left), 5)),
            [lists:flatten(io_lib:format("directory ~ts kept: it holds ~b entries the testbed did not make (~ts~ts)",
                                         [Path, length(Left), Shown, [", ..." || length(Left) > 5]]))]
    end;
remove_dir(#{path := Path}, Paths) ->
    case is_type(Path, directory) of
        true ->
            _ = file:del_dir_r(Path),
            ["directory " ++ Path ++ " removed" || not lists:member(filename:dirname(Path), Paths)];
        false ->
            []
    end.
