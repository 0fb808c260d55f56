%% @doc Waiting for a condition in tests: asks `Fun' every `Every' ms until it returns
%% true (`ok') or `Timeout' ms have passed (`{error, timeout}').
-module(terrain_lab_test_poll).

-export([poll/3]).

-spec poll(fun(() -> boolean()), non_neg_integer(), pos_integer()) -> ok | {error, timeout}.
poll(Fun, Timeout, Every) ->
    until(Fun, erlang:monotonic_time(millisecond) + Timeout, Every).

until(Fun, Deadline, Every) ->
    case Fun() of
        true -> ok;
        false ->
            case erlang:monotonic_time(millisecond) > Deadline of
                true -> {error, timeout};
                false -> receive after Every -> until(Fun, Deadline, Every) end
            end
    end.
