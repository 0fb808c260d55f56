%% @doc terrain: choose Erlang nodes by what they are and how far apart they are.
%%
%% This is the one public module of the `terrain' library; every other module
%% (`terrain_*') is internal and may change without notice.
%%
%% A program asks for nodes by their live attributes and by their distance in the
%% cluster's communication hierarchy instead of naming hosts. See the README for the
%% concepts and docs/INTERNALS.md for the processes behind this API.
-module(terrain).

%% API
-export([version/0,
         format_error/1]).

%% @doc The version of the `terrain' application.
-spec version() -> string().
version() ->
    _ = application:load(terrain),
    {ok, Vsn} = application:get_key(terrain, vsn),
    Vsn.

%% @doc Turns an `{error, Reason}' returned by this module into a sentence.
-spec format_error(Reason :: term()) -> iolist().
format_error({json, Where, Why}) ->
    io_lib:format("invalid JSON at byte ~b: ~s", [Where, Why]);
format_error(Reason) ->
    io_lib:format("~0tp", [Reason]).
