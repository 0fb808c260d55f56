%% @private
%% @doc SMTWTP instances in the OR-Library format (Beasley's `wt40', `wt50', `wt100'
%% files, and the optimum / best-known files `wtopt40', `wtbest100a', ...).
%%
%% An instance file concatenates its instances; each is `n' processing times, `n'
%% weights and `n' due dates, whitespace-separated integers. `n' is not in the file:
%% it is given, or read from the digits of the file name (`wt40.txt' → 40). An optimum
%% file holds one integer per instance, in the same order. Instances are numbered from 1.
-module(terrain_aco_instance).

-export([read/3,
         generate/2,
         read_optimum/2,
         jobs_from_name/1,
         format_error/1]).

%% exports_not_used: jobs_from_name/1 is checked on its own by terrain_aco_tests.
-ignore_xref([{jobs_from_name, 1}]).

-export_type([instance/0, error_reason/0]).

-type instance() :: #{jobs := pos_integer(),
                      p := tuple(),    % processing times, job j at element j
                      w := tuple(),    % weights
                      d := tuple()}.   % due dates

-type error_reason() :: {aco_instance, term()}.

%% @doc Instance `K' (from 1) of the file, with `Jobs' jobs per instance (`auto': from
%% the file name).
-spec read(file:filename(), pos_integer() | auto, pos_integer()) -> {ok, instance()} | {error, error_reason()}.
read(File, auto, K) ->
    case {file:read_file_info(File), jobs_from_name(File)} of
        {{error, Why}, _} -> {error, {aco_instance, {file, File, Why}}};   % a missing file says so first
        {_, {ok, Jobs}} -> read(File, Jobs, K);
        {_, error} -> {error, {aco_instance, {no_job_count, File}}}
    end;
read(File, Jobs, K) when is_integer(Jobs), Jobs > 0, is_integer(K) ->
    case numbers(File) of
        {ok, Numbers} ->
            Size = 3 * Jobs,
            Count = length(Numbers) div Size,
            if
                length(Numbers) rem Size =/= 0 ->
                    {error, {aco_instance, {bad_length, File, length(Numbers), Jobs}}};
                K < 1 orelse K > Count ->
                    {error, {aco_instance, {no_such_instance, File, K, Count}}};
                true ->
                    Mine = lists:sublist(Numbers, (K - 1) * Size + 1, Size),
                    {P, Rest} = lists:split(Jobs, Mine),
                    {W, D} = lists:split(Jobs, Rest),
                    {ok, #{jobs => Jobs, p => list_to_tuple(P), w => list_to_tuple(W), d => list_to_tuple(D)}}
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc A random instance of `Jobs' jobs generated as the OR-Library ones were
%% (Potts &amp; Van Wassenhove): p ~ U[1, 100], w ~ U[1, 10], d ~ U[P(1 − TF − RDD/2),
%% P(1 − TF + RDD/2)] with P the total processing time, here TF = 0.6, RDD = 0.6. The
%% same seed gives the same instance.
-spec generate(pos_integer(), integer()) -> instance().
generate(Jobs, Seed) when is_integer(Jobs), Jobs > 0 ->
    R0 = rand:seed_s(exsss, {Seed, Jobs, 16#5417}),
    {P, R1} = draw(Jobs, 1, 100, R0),
    {W, R2} = draw(Jobs, 1, 10, R1),
    Total = lists:sum(P),
    {D, _} = draw(Jobs, max(0, round(Total * 0.1)), max(1, round(Total * 0.7)), R2),
    #{jobs => Jobs, p => list_to_tuple(P), w => list_to_tuple(W), d => list_to_tuple(D)}.

draw(N, Low, High, R0) ->
    lists:foldr(fun(_, {Acc, R}) -> {X, R1} = rand:uniform_s(High - Low + 1, R), {[Low + X - 1 | Acc], R1} end,
                {[], R0}, lists:seq(1, N)).

%% @doc The optimum (or best known) total weighted tardiness of instance `K'.
-spec read_optimum(file:filename(), pos_integer()) -> {ok, non_neg_integer()} | {error, error_reason()}.
read_optimum(File, K) ->
    case numbers(File) of
        {ok, Numbers} when is_integer(K), K >= 1, K =< length(Numbers) -> {ok, lists:nth(K, Numbers)};
        {ok, Numbers} -> {error, {aco_instance, {no_such_instance, File, K, length(Numbers)}}};
        {error, _} = Error -> Error
    end.

%% @doc The job count in a file name: the last run of digits (`wt100.txt' → 100).
-spec jobs_from_name(file:filename()) -> {ok, pos_integer()} | error.
jobs_from_name(File) ->
    case re:run(filename:basename(File), "([0-9]+)[^0-9]*$", [{capture, all_but_first, list}]) of
        {match, [Digits]} when Digits =/= "0" -> {ok, list_to_integer(Digits)};
        _ -> error
    end.

%% @doc A sentence for an error of this module.
-spec format_error(error_reason()) -> iolist().
format_error({aco_instance, {file, File, Why}}) ->
    io_lib:format("cannot read instance file ~ts: ~ts", [File, file:format_error(Why)]);
format_error({aco_instance, {not_a_number, File, Token}}) ->
    case unicode:characters_to_list(Token) of
        Text when is_list(Text) ->
            io_lib:format("~ts is not an OR-Library SMTWTP file: \"~ts\" is not a non-negative integer", [File, Text]);
        _ ->
            io_lib:format("~ts is not an OR-Library SMTWTP file: it is not text", [File])
    end;
format_error({aco_instance, {bad_length, File, Count, Jobs}}) ->
    io_lib:format("~ts holds ~b numbers, not a multiple of 3 x ~b (processing times, weights and due dates "
                  "of ~b jobs per instance); give the right --jobs", [File, Count, Jobs, Jobs]);
format_error({aco_instance, {no_such_instance, File, K, Count}}) ->
    io_lib:format("~ts has ~b instances (numbered from 1); there is no instance ~0tp", [File, Count, K]);
format_error({aco_instance, {no_job_count, File}}) ->
    io_lib:format("cannot tell the number of jobs per instance from the name ~ts (OR-Library names end in "
                  "it: wt40.txt); rename it, or with terrain aco give --jobs", [filename:basename(File)]).

numbers(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            %% bytes, not characters: a binary file is refused, never decoded
            Tokens = [T || T <- re:split(Bin, "[ \t\r\n]+", [{return, binary}]), T =/= <<>>],
            case [T || T <- Tokens, re:run(T, "^[0-9]{1,18}$", [{capture, none}]) =:= nomatch] of
                [] -> {ok, [binary_to_integer(T) || T <- Tokens]};
                [Bad | _] -> {error, {aco_instance, {not_a_number, File, binary:part(Bad, 0, min(20, byte_size(Bad)))}}}
            end;
        {error, Why} ->
            {error, {aco_instance, {file, File, Why}}}
    end.
