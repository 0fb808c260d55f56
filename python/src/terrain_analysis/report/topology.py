"""Sections of topology discovery: ``latency`` (the heatmap and dendrogram), ``topology`` (the α tree) and
``topology_comparison``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure as MplFigure

from terrain_analysis.formats import KINDS
from terrain_analysis.report.model import (
    Block,
    Entry,
    Run,
    Section,
    Table,
    Text,
    figure_from_matplotlib,
    read_json,
    report_command,
)
from terrain_analysis.topology import Discovery, discover, read_latency, read_topology
from terrain_analysis.topology_plots import dendrogram_figure, heatmap_figure, tree_figure


def clustered_statistic(run: Run, entry: Entry) -> str:
    """The per-pair statistic the run clustered the latency file ``entry`` by.

    A ``topology`` output made from that file names it (``parameters``: ``source``, ``statistic``: ``terrain
    topology --statistic``, the SLURM pipeline job); else terrain's default, ``min``.
    """
    for other in run.entries:
        made_from_it = other.kind == "topology" and other.parameters.get("source") == entry.file
        if made_from_it and other.parameters.get("statistic"):
            return str(other.parameters["statistic"])
    return "min"


def _discovery(run: Run, entry: Entry) -> Discovery:
    """The run's latency matrix clustered as the run clustered it: by :func:`clustered_statistic`, with terrain's
    other defaults (once per run and file)."""
    key = f"discovery:{entry.file}"
    if key not in run.cache:
        run.cache[key] = discover(read_latency(run.path(entry)), statistic=clustered_statistic(run, entry))
    found: Discovery = run.cache[key]
    return found


def render_latency(entry: Entry, run: Run) -> Section:
    """``latency``: ``latency.json`` (``terrain.latency/1``) — the matrix ordered by the tree, the dendrogram."""
    latency = read_latency(run.path(entry))
    found = _discovery(run, entry)
    topology = run.first("topology")
    ordered_by = "the topology terrain-analysis discovers from it (average linkage, automatic α)"
    if topology is not None:
        try:
            tree = read_topology(run.path(topology), found.nodes)
            found = Discovery(
                tree, found.nodes, found.distances, found.levels, found.repaired, found.options, found.missing
            )
            ordered_by = f"the topology the run discovered ({topology.file})"
        except (OSError, ValueError):
            pass  # the topology section reports it; order by the tree found here
    meta = latency.metadata
    statistic = str(found.options.get("statistic", "min"))
    finite = latency.stats.get(statistic, np.zeros((1, 1)))
    off_diagonal = finite[~np.eye(len(latency.nodes), dtype=bool)] if len(latency.nodes) > 1 else np.array([])
    off_diagonal = off_diagonal[np.isfinite(off_diagonal)]
    failed = meta.get("failed") or []
    rows: list[list[Any]] = [
        ["nodes", len(latency.nodes)],
        ["strategy", meta.get("strategy")],
        ["batches × messages per pair", f"{meta.get('batches')} × {meta.get('messages')}"],
        ["payload (bytes)", meta.get("payload_bytes")],
        ["measured in (ms)", meta.get("duration_ms")],
        [f"fastest pair, {statistic} round trip (µs)", float(off_diagonal.min()) if off_diagonal.size else None],
        [f"slowest pair, {statistic} round trip (µs)", float(off_diagonal.max()) if off_diagonal.size else None],
        ["failed pairs", len(failed)],
        ["ordered pairs measured", f"{latency.pairs_measured} of {latency.pairs_total}"],
        ["node pairs missing (no round trip either way)", found.missing],
    ]
    rows += [
        [f"undetermined below {place.cluster}", " ".join(found.nodes[i] for i in place.nodes)]
        for place in found.undetermined()
    ]
    command = run.command(entry)
    made = f"{report_command(run)} (from {entry.file}, measured by {command})"
    return Section(
        "Latency",
        [
            Table(["", "value"], rows, "The probe's parameters and extremes (round trips, µs)."),
            figure_from_matplotlib(
                _labelled_heatmap(found, statistic),
                title="Round trips ordered by the tree",
                caption=(
                    f"The {statistic} round trip of every ordered pair of nodes (µs, row: source, column: target), "
                    "the "
                    f"two directions combined by {found.options.get('symmetrise', 'min')}, rows and columns in the "
                    f"leaf order of {ordered_by}; red is fast, white slow; blue squares outline the lowest clusters "
                    "(as RELEASE D3.5's Figure 16 of the Athos cluster); green cells are pairs not measured in "
                    "either direction."
                ),
                command=made,
            ),
            figure_from_matplotlib(
                _labelled_dendrogram(found),
                title="Complete-linkage dendrogram",
                caption=(
                    "The binary complete-linkage dendrogram of the same matrix: two nodes join at the height of "
                    "the largest round trip between their clusters (µs)."
                ),
                command=made,
            ),
        ],
    )


def _labelled_heatmap(found: Discovery, statistic: str) -> MplFigure:
    figure = heatmap_figure(found, f"{statistic} round trip")
    ax = figure.axes[0]
    ax.set_xlabel("target node (tree order)")
    ax.set_ylabel("source node (tree order)")
    figure.tight_layout()
    return figure


def _labelled_dendrogram(found: Discovery) -> MplFigure:
    figure = dendrogram_figure(found)
    figure.axes[0].set_xlabel("node")
    figure.tight_layout()
    return figure


def render_topology(entry: Entry, run: Run) -> Section:
    """``topology``: ``topology.json`` (``terrain.topology/1``) over the run's ``latency`` matrix — the α tree."""
    document = read_json(run, entry, KINDS["topology"].formats)
    blocks: list[Block] = []
    clusters: list[list[Any]] = []

    def walk(node: Mapping[str, Any], depth: int) -> None:
        if "node" in node:
            return
        leaves = topology_leaves(node)
        clusters.append([node.get("name"), depth, len(leaves), node.get("height"), " ".join(leaves)])
        for child in node.get("children") or []:
            walk(child, depth + 1)

    walk(document.get("tree") or {}, 0)
    blocks.append(
        Table(
            ["cluster", "depth", "nodes", "diameter (µs)", "members"],
            clusters,
            f"The clusters of the discovered tree, from the root down; made by {run.command(entry)}.",
        )
    )
    latency = run.first("latency")
    try:
        found = _discovery(run, latency) if latency is not None else None
    except (OSError, ValueError):
        found = None  # the latency section says why
        source = latency.file if latency is not None else "?"
        blocks.append(Text(f"Not drawn: the run's latency matrix ({source}) could not be read."))
    if latency is not None and found is not None:
        tree = read_topology(run.path(entry), found.nodes)
        drawn = Discovery(
            tree, found.nodes, found.distances, [], found.repaired, {"alpha": "as found by the run"}, found.missing
        )
        figure = tree_figure(drawn)
        figure.axes[0].set_xlabel("node (tree order)")
        figure.axes[0].set_title(
            "Discovered non-binary α tree; labels: nodes / diameter µs", fontsize=9
        )
        figure.tight_layout()
        blocks.append(
            figure_from_matplotlib(
                figure,
                title="The discovered topology",
                caption=(
                    f"The non-binary tree in {entry.file} drawn over the {latency.file} matrix: each cluster at its "
                    "diameter (the largest round trip inside it, µs) above its children; red dots are the lowest "
                    "clusters."
                ),
                command=f"{report_command(run)} (tree made by {run.command(entry)})",
            )
        )
    return Section("Discovered topology", blocks)


def topology_leaves(node: Mapping[str, Any]) -> list[str]:
    if "node" in node:
        return [str(node["node"])]
    return [leaf for child in node.get("children") or [] for leaf in topology_leaves(child)]


def render_topology_comparison(entry: Entry, run: Run) -> Section:
    """``topology_comparison``: ``terrain.topology_comparison/1`` — per-level ARI and clade recall vs the spec."""
    document = read_json(run, entry, KINDS["topology_comparison"].formats)
    levels = document.get("levels") or []
    summary: list[list[Any]] = [
        ["true tree", document.get("truth")],
        ["found tree", document.get("found")],
        ["nodes", document.get("nodes")],
        ["clade recall", document.get("clade_recall")],
        ["clade precision", document.get("clade_precision")],
        ["clades: true / found / common", f"{document.get('truth_clades')} / {document.get('found_clades')} / "
                                          f"{document.get('common_clades')}"],
    ]
    return Section(
        "Discovered topology against the spec",
        [
            Table(
                ["level", "true clusters", "found clusters", "adjusted Rand index"],
                [[lv.get("level"), lv.get("truth_clusters"), lv.get("found_clusters"), lv.get("ari")] for lv in levels],
                "Per level of the true tree (1: below the root), the adjusted Rand index of the two partitions at that "
                "depth (1.0: the same).",
            ),
            Table(["", "value"], summary, f"Clades (clusters as sets of nodes) found; made by {run.command(entry)}."),
        ],
    )
