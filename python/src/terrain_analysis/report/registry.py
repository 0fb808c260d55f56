"""Kind → renderer, and the kinds the report lists without drawing; both checked against the registry of
manifest kinds (``spec/formats.json``, :mod:`terrain_analysis.formats`)."""

from __future__ import annotations

from terrain_analysis.bench import read_sweep
from terrain_analysis.collective import read_collective
from terrain_analysis.experiment_plots import read_attribute_times
from terrain_analysis.formats import KINDS, tag
from terrain_analysis.report.chaos import render_checker
from terrain_analysis.report.cluster import render_attributes, render_cluster
from terrain_analysis.report.durations import render_durations, render_gev_fit
from terrain_analysis.report.model import Renderer
from terrain_analysis.report.pipeline import render_aco_placement, render_pipeline, render_slurm_topology
from terrain_analysis.report.tools import render_events, summary_renderer
from terrain_analysis.report.topology import render_latency, render_topology, render_topology_comparison


def _formats(kind: str) -> tuple[str, ...]:
    return KINDS[kind].formats


RENDERERS: dict[str, Renderer] = {
    "cluster": render_cluster,
    "attributes": render_attributes,
    "latency": render_latency,
    "topology": render_topology,
    "topology_comparison": render_topology_comparison,
    "durations": render_durations,
    "gev_fit": render_gev_fit,
    "bench": summary_renderer("DE-Bench", _formats("bench"), {"sweep.csv": read_sweep}),
    "collective": summary_renderer(
        "Collective operations", _formats("collective"), {tag("collective"): read_collective}
    ),
    "events": render_events,
    "emas": summary_renderer("EMAS", _formats("emas")),
    "experiment": summary_renderer("Experiments", _formats("experiment")),
    "summary": summary_renderer("Experiment summary", _formats("summary")),
    "attributes_times": summary_renderer(
        "Times with and without attribute placement",
        _formats("attributes_times"),
        {"attributes.csv": read_attribute_times},
    ),
    "live": summary_renderer("Live cluster", _formats("live")),
    "checker": render_checker,
    "scale": summary_renderer("Scaling with the cluster size", _formats("scale")),
    "bench_summary": summary_renderer("DE-Bench summary", _formats("bench_summary")),
    "bench_sweep": summary_renderer("DE-Bench sweep", _formats("bench_sweep"), {"sweep.csv": read_sweep}),
    "plot": summary_renderer("Plots", _formats("plot")),
    "emas_summary": summary_renderer("EMAS summary", _formats("emas_summary")),
    "emas_scaling": summary_renderer("EMAS scaling", _formats("emas_scaling")),
    "trace_events": render_events,
    "events_timeline": summary_renderer("Event timelines", _formats("events_timeline")),
    "events_reads": summary_renderer("Read times", _formats("events_reads")),
    "event_findings": summary_renderer("Monitors' findings", _formats("event_findings")),
    "slurm_topology": render_slurm_topology,
    "aco_placement": render_aco_placement,
    "pipeline": render_pipeline,
}
"""Kind → renderer, in the order the sections appear. Every kind here is registered in
``spec/formats.json`` with ``"report": "rendered"``; its JSON files must carry one of the
kind's registered formats."""

LISTED_KINDS: dict[str, str] = {name: kind.what for name, kind in KINDS.items() if kind.report == "listed"}
"""Kinds the report lists under "Other outputs" without drawing them, each with why
(``spec/formats.json``, ``"report": "listed"``): ``latency_csv``, ``bench_point``,
``bench_node_files``, ``placement_dot``."""
