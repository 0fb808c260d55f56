%% @doc A capturing I/O device for in-process CLI tests: collects everything written
%% to it, so a test can run `terrain_lab_cli:run/2' and read stdout and stderr.
-module(terrain_lab_test_io).

-export([run/1, start/0, text/1]).

%% @doc Runs the CLI in-process; returns {ExitCode, Stdout, Stderr}.
run(Args) ->
    Out = start(),
    Err = start(),
    Code = terrain_lab_cli:run(Args, #{out => Out, err => Err}),
    {Code, text(Out), text(Err)}.

start() ->
    spawn(fun() -> loop([]) end).

text(Device) ->
    Ref = monitor(process, Device),
    Device ! {text, self(), Ref},
    receive
        {Ref, Text} -> demonitor(Ref, [flush]), exit(Device, normal), Text;
        {'DOWN', Ref, process, Device, Why} -> error({capture_died, Why})
    after 5000 -> error(capture_timeout)
    end.

loop(Acc) ->
    receive
        {io_request, From, ReplyAs, Request} ->
            {Reply, Acc1} = request(Request, Acc),
            From ! {io_reply, ReplyAs, Reply},
            loop(Acc1);
        {text, From, Ref} ->
            From ! {Ref, unicode:characters_to_list(lists:reverse(Acc))},
            loop(Acc)
    end.

request({put_chars, unicode, Chars}, Acc) -> {ok, [Chars | Acc]};
request({put_chars, latin1, Chars}, Acc) -> {ok, [unicode:characters_to_binary(Chars, latin1) | Acc]};
request({put_chars, Enc, M, F, A}, Acc) -> request({put_chars, Enc, apply(M, F, A)}, Acc);
request({requests, Rs}, Acc) ->
    lists:foldl(fun(R, {_, A}) -> request(R, A) end, {ok, Acc}, Rs);
request(_Other, Acc) -> {{error, enotsup}, Acc}.
