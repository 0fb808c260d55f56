%% The format tags of terrain's files, one macro each.
%% Generated from spec/formats.json by python/tools/formats_hrl.py (make formats): do not edit;
%% python/tests/test_formats.py fails when this file and the registry differ.
-ifndef(TERRAIN_FORMATS_HRL).
-define(TERRAIN_FORMATS_HRL, true).

-define(TERRAIN_FORMAT_ACO, <<"terrain.aco/1">>).
-define(TERRAIN_FORMAT_ATTRIBUTES, <<"terrain.attributes/1">>).
-define(TERRAIN_FORMAT_BENCH, <<"terrain.bench/1">>).
-define(TERRAIN_FORMAT_CHAOS_HISTORY, <<"terrain.chaos_history/1">>).
-define(TERRAIN_FORMAT_CHECKER, <<"terrain.checker/1">>).
-define(TERRAIN_FORMAT_CLUSTER, <<"terrain.cluster/1">>).
-define(TERRAIN_FORMAT_COLLECTIVE, <<"terrain.collective/1">>).
-define(TERRAIN_FORMAT_COLLECTIVE_RULES, <<"terrain.collective_rules/1">>).
-define(TERRAIN_FORMAT_DASHBOARD, <<"terrain.dashboard/1">>).
-define(TERRAIN_FORMAT_EMAS, <<"terrain.emas/1">>).
-define(TERRAIN_FORMAT_EMAS_SCALING, <<"terrain.emas_scaling/1">>).
-define(TERRAIN_FORMAT_EVENT_FINDINGS, <<"terrain.event_findings/1">>).
-define(TERRAIN_FORMAT_EVENTS, <<"terrain.events/1">>).
-define(TERRAIN_FORMAT_EXPERIMENT, <<"terrain.experiment/1">>).
-define(TERRAIN_FORMAT_GEV, <<"terrain.gev/1">>).
-define(TERRAIN_FORMAT_LATENCY, <<"terrain.latency/1">>).
-define(TERRAIN_FORMAT_LIVE, <<"terrain.live/1">>).
-define(TERRAIN_FORMAT_MANIFEST, <<"terrain.manifest/1">>).
-define(TERRAIN_FORMAT_PIPELINE, <<"terrain.pipeline/1">>).
-define(TERRAIN_FORMAT_SCALE, <<"terrain.scale/1">>).
-define(TERRAIN_FORMAT_STATE, <<"terrain.state/1">>).
-define(TERRAIN_FORMAT_STATUS, <<"terrain.status/1">>).
-define(TERRAIN_FORMAT_TESTBED, <<"terrain.testbed/1">>).
-define(TERRAIN_FORMAT_TESTBED_MADE, <<"terrain.testbed_made/1">>).
-define(TERRAIN_FORMAT_TOPOLOGY, <<"terrain.topology/1">>).
-define(TERRAIN_FORMAT_TOPOLOGY_COMPARISON, <<"terrain.topology_comparison/1">>).
-define(TERRAIN_FORMAT_TRACE, <<"terrain.trace/1">>).

-endif.
