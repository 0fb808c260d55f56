%% @doc The CLI's one table of error sentences: one clause per error tag, naming the module
%% that turns a reason of that tag into a sentence. The commands' own tags, the tags of the
%% lab's tools above the clusters (experiments, measurements) and, through
%% {@link terrain_lab:format_error/1}, the facade's and the library's errors. Every
%% command's `{error, Reason}' reaches the user through `format/1'.
%%
%% Internal to `terrain_lab'; it sits in the CLI layer because it names modules of every
%% folder below (docs/INTERNALS.md, "The lab's folders").
-module(terrain_lab_cli_errors).

%% API
-export([format/1]).

%% @doc A sentence (without the `terrain: error:' prefix) for any reason a command returns.
-spec format(term()) -> iolist().
format({attrs, _} = Reason) ->
    terrain_lab_cmd_attrs:format_error(Reason);
format({dashboard, _} = Reason) ->
    terrain_lab_cmd_dashboard:format_error(Reason);
format({topology_cmd, _} = Reason) ->
    terrain_lab_cmd_topology:format_error(Reason);
format({experiment_cmd, _} = Reason) ->
    terrain_lab_cmd_experiment:format_error(Reason);
format({aco_cmd, _} = Reason) ->
    terrain_lab_cmd_aco:format_error(Reason);
format({events_cmd, _} = Reason) ->
    terrain_lab_cmd_events:format_error(Reason);
format({emas_cmd, _} = Reason) ->
    terrain_lab_cmd_emas:format_error(Reason);
format({collective_cmd, _} = Reason) ->
    terrain_lab_cmd_collective:format_error(Reason);
format({Tag, _} = Reason) when Tag =:= bench_cmd; Tag =:= bench_lab; Tag =:= bench_config; Tag =:= bench ->
    terrain_lab_cmd_bench:format_error(Reason);
format({chaos_cmd, _} = Reason) ->
    terrain_lab_cmd_chaos:format_error(Reason);
format({chaos, _} = Reason) ->
    terrain_lab_chaos:format_error(Reason);
format({experiment, _} = Reason) ->
    terrain_lab_experiment:format_error(Reason);
format({scale, _} = Reason) ->
    terrain_lab_scale:format_error(Reason);
format({aco, _} = Reason) ->
    terrain_lab_aco:format_error(Reason);
format({write_test, _} = Reason) ->
    terrain_lab_write_test:format_error(Reason);
format({time_task, _} = Reason) ->
    terrain_lab_time_task:format_error(Reason);
format({probe, _} = Reason) ->
    terrain_lab_probe:format_error(Reason);
format({simulate, _} = Reason) ->
    terrain_lab_simulate:format_error(Reason);
format({replay, _} = Reason) ->
    terrain_lab_replay:format_error(Reason);
format({emas_lab, _} = Reason) ->
    terrain_lab_emas:format_error(Reason);
format({collective, _} = Reason) ->
    terrain_lab_collective:format_error(Reason);
format({paths, _} = Reason) ->
    terrain_paths:format_error(Reason);
format({vm_exits, Reason, Exited}) ->
    [format(Reason), terrain_lab:format_exits(Exited)];
format({net_events, Reason, Dir, Lines}) ->
    [format(Reason), terrain_lab:format_net_events(Dir, Lines)];
format(Reason) ->
    terrain_lab:format_error(Reason).
