%% @private
%% @doc Option definitions that several commands share, written once so that their
%% help reads the same everywhere. Called by the `terrain_lab_cmd_*' modules only.
-module(terrain_lab_cli_options).

%% API
-export([state_dir/0,
         runs_dir/0]).

%% @doc `--state-dir DIR': where `terrain up' recorded the running cluster
%% (see `terrain_lab_cluster_state:state_dir/1').
-spec state_dir() -> terrain_lab_cli:option().
state_dir() ->
    #{name => state_dir, long => "state-dir", type => string, default => ".terrain",
      metavar => "DIR", help => "where the running cluster is recorded (env TERRAIN_STATE_DIR)"}.

%% @doc `--runs-dir DIR': where a command creates its run directory (`terrain_lab_run').
-spec runs_dir() -> terrain_lab_cli:option().
runs_dir() ->
    #{name => runs_dir, long => "runs-dir", type => string, default => "runs",
      metavar => "DIR", help => "where the run directory is created"}.
