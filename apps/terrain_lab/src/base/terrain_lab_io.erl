%% @private
%% @doc Where the lab's commands print: results on one device, progress on another.
%%
%% An `io()' names two devices: `out' for results (stdout in the escript) and `err'
%% for progress, warnings and errors (stderr). The CLI passes one to every command
%% handler; domain code that reports progress receives the same map and prints through
%% {@link progress/3}, so the lab's domain modules never call the CLI. Tests pass
%% capturing devices (see `terrain_lab_test_io').
%% ```
%% Io = terrain_lab_io:standard(),
%% terrain_lab_io:out(Io, "~ts~n", [Node]),          % a result line
%% terrain_lab_io:progress(Io, "run ~b/~b~n", [I, N]).  % progress on stderr
%% '''
-module(terrain_lab_io).

%% API
-export([standard/0,
         out/3,
         progress/3]).

-export_type([io/0]).

-type io() :: #{out := io:device(),   % results (stdout)
                err := io:device()}.  % progress, warnings and errors (stderr)

%% @doc The escript's devices: results on stdout, progress on stderr.
-spec standard() -> io().
standard() ->
    #{out => standard_io, err => standard_error}.

%% @doc Prints a result on the `out' device.
-spec out(io(), io:format(), [term()]) -> ok.
out(#{out := Device}, Format, Args) ->
    io:format(Device, Format, Args).

%% @doc Prints progress (or a warning) on the `err' device.
-spec progress(io(), io:format(), [term()]) -> ok.
progress(#{err := Device}, Format, Args) ->
    io:format(Device, Format, Args).
