"""Plots of a discovered topology: RELEASE D3.5's heatmap, dendrogram and non-binary tree.

* :func:`heatmap_figure` — the round-trip matrix with rows and columns in the order
  of the tree's leaves, red for fast and yellow to white for slow, as RELEASE D3.5's
  Figure 16 of the Athos cluster; the lowest clusters are outlined. Pairs not
  measured in either direction are drawn in :data:`MISSING_COLOUR` (green, a
  colour the ``hot`` map never takes) and named in a legend.
* :func:`dendrogram_figure` — the binary complete-linkage dendrogram of the same
  matrix (scipy), as R's ``hclust`` drew RELEASE D3.5's Figures 9–14; over a partial
  matrix the same linkage over the measured pairs
  (:func:`terrain_analysis.topology.binary_linkage`).

Nodes whose place the measured pairs do not determine
(:func:`terrain_analysis.topology.undetermined`) have their labels drawn in
:data:`UNDETERMINED_COLOUR` and are counted in the title.
* :func:`tree_figure` — the non-binary α tree (RELEASE D3.5's Figures 19–26 were drawn
  with Graphviz): leaves at the bottom, each cluster at its height (µs) above its
  children; the lowest clusters are labelled with their size and diameter.

:func:`write_topology_plots` saves all three as PNG and SVG. Figures are built on the
Agg canvas, never through ``pyplot``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from scipy.cluster.hierarchy import dendrogram, linkage
from scipy.spatial.distance import squareform

from terrain_analysis.output import save_figure
from terrain_analysis.topology import Cluster, Discovery, binary_linkage

__all__ = [
    "DENDROGRAM_NAME",
    "FORMATS",
    "HEATMAP_NAME",
    "MISSING_COLOUR",
    "TREE_NAME",
    "UNDETERMINED_COLOUR",
    "dendrogram_figure",
    "heatmap_figure",
    "tree_figure",
    "write_topology_plots",
]

HEATMAP_NAME = "topology_heatmap"
"""File stem of the heatmap ordered by the tree."""

DENDROGRAM_NAME = "topology_dendrogram"
"""File stem of the binary dendrogram."""

TREE_NAME = "topology_tree"
"""File stem of the non-binary α tree."""

FORMATS = ("png", "svg")
"""Formats :func:`write_topology_plots` writes."""

MISSING_COLOUR = "#66c2a5"
"""Heatmap cells of pairs with no round trip in either direction (green: ``hot`` runs black-red-yellow-white)."""

UNDETERMINED_COLOUR = "tab:purple"
"""Labels of nodes whose place the measured pairs do not determine."""

_LABEL_LIMIT = 64


def _undetermined_nodes(discovery: Discovery) -> set[int]:
    return {node for found in discovery.undetermined() for node in found.nodes}


def _mark_undetermined(labels: list[Any], undetermined: set[str]) -> None:
    for label in labels:
        if label.get_text() in undetermined:
            label.set_color(UNDETERMINED_COLOUR)


def _undetermined_note(discovery: Discovery, count: int) -> str:
    if not count:
        return ""
    labelled = " (labels in purple)" if len(discovery.nodes) <= _LABEL_LIMIT else ""
    return f"\n{count} nodes placed without a measured pair to decide{labelled}"


def _bottom_clusters(tree: Cluster) -> list[Cluster]:
    return [c for c in tree.clusters() if all(isinstance(child, int) for child in c.children)]


def heatmap_figure(discovery: Discovery, statistic_label: str = "round trip") -> Figure:
    """The matrix in the order of the tree's leaves (RELEASE D3.5, Figure 16).

    Parameters
    ----------
    discovery : Discovery
    statistic_label : str
        Names the values in the colour bar's label.

    Returns
    -------
    matplotlib.figure.Figure
    """
    order = discovery.tree.leaves()
    position = {leaf: k for k, leaf in enumerate(order)}
    matrix = discovery.distances[np.ix_(order, order)]
    n = len(order)
    figure = Figure(figsize=(7.5, 6.5))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    colours = matplotlib.colormaps["hot"].with_extremes(bad=MISSING_COLOUR)
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=colours, interpolation="nearest", origin="upper")
    colour_bar = figure.colorbar(image, ax=ax)
    colour_bar.set_label(f"{statistic_label} (µs)")
    for cluster in _bottom_clusters(discovery.tree):
        first = min(position[leaf] for leaf in cluster.leaves())
        size = len(cluster.children)
        ax.add_patch(Rectangle((first - 0.5, first - 0.5), size, size, fill=False, edgecolor="tab:blue", linewidth=0.8))
    undetermined = _undetermined_nodes(discovery)
    if n <= _LABEL_LIMIT:
        labels = [discovery.nodes[leaf] for leaf in order]
        ax.set_xticks(range(n), labels, rotation=90, fontsize=6)
        ax.set_yticks(range(n), labels, fontsize=6)
        names = {discovery.nodes[i] for i in undetermined}
        _mark_undetermined(ax.get_xticklabels() + ax.get_yticklabels(), names)
    else:
        ax.set_xlabel("node (in tree order)")
        ax.set_ylabel("node (in tree order)")
    if discovery.missing:
        pairs = n * (n - 1) // 2
        _legend_missing(ax, f"not measured: {discovery.missing} of {pairs} node pairs")
    ax.set_title(f"Round trips of {n} nodes, ordered by the topology{_undetermined_note(discovery, len(undetermined))}")
    figure.tight_layout()
    if discovery.missing:
        figure.tight_layout()  # the legend hangs below the axes and moves with them: a second pass keeps it in
    return figure


def _legend_missing(ax: Axes, label: str) -> None:
    ax.legend(
        handles=[Patch(facecolor=MISSING_COLOUR, edgecolor="none", label=label)],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.02 if not ax.get_xticklabels() else -0.12),
        fontsize=7,
        frameon=False,
    )


def dendrogram_figure(discovery: Discovery) -> Figure:
    """The binary complete-linkage dendrogram of the clustered matrix.

    Parameters
    ----------
    discovery : Discovery

    Returns
    -------
    matplotlib.figure.Figure
    """
    n = len(discovery.nodes)
    figure = Figure(figsize=(max(6.0, min(16.0, 0.18 * n)), 5.0))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    undetermined = _undetermined_nodes(discovery)
    if n >= 2:
        if discovery.missing:
            z = binary_linkage(discovery.distances)
        else:
            z = linkage(squareform(discovery.distances, checks=False), method="complete")
        dendrogram(
            z,
            ax=ax,
            labels=discovery.nodes if n <= _LABEL_LIMIT else None,
            no_labels=n > _LABEL_LIMIT,
            color_threshold=0,
            above_threshold_color="black",
            leaf_font_size=6,
            leaf_rotation=90,
        )
        if n <= _LABEL_LIMIT:
            _mark_undetermined(ax.get_xticklabels(), {discovery.nodes[i] for i in undetermined})
    ax.set_ylabel("height (µs)")
    title = "Complete-linkage dendrogram (binary)"
    if discovery.missing:
        title += f" over the measured pairs\n({discovery.missing} of {n * (n - 1) // 2} node pairs not measured)"
    ax.set_title(title + _undetermined_note(discovery, len(undetermined)), fontsize=10 if discovery.missing else None)
    figure.tight_layout()
    return figure


def tree_figure(discovery: Discovery) -> Figure:
    """The non-binary α tree: each cluster drawn at its height above its children.

    Parameters
    ----------
    discovery : Discovery

    Returns
    -------
    matplotlib.figure.Figure
    """
    tree = discovery.tree
    order = tree.leaves()
    n = len(order)
    x_of = {leaf: float(k) for k, leaf in enumerate(order)}
    figure = Figure(figsize=(max(6.0, min(16.0, 0.18 * n)), 5.0))
    FigureCanvasAgg(figure)
    ax = figure.subplots()

    def draw(node: Cluster | int) -> tuple[float, float]:
        if isinstance(node, int):
            return x_of[node], 0.0
        spots = [draw(child) for child in node.children]
        xs = [x for x, _ in spots]
        x = float(np.mean(xs))
        for cx, cy in spots:
            ax.plot([cx, cx], [cy, node.height], color="black", linewidth=0.8)
        ax.plot([min(xs), max(xs)], [node.height, node.height], color="black", linewidth=0.8)
        bottom = all(isinstance(child, int) for child in node.children)
        ax.plot(
            [x], [node.height], marker="o" if bottom else "s", markersize=4, color="tab:red" if bottom else "tab:blue"
        )
        if bottom or len(node.children) > 2:
            ax.annotate(
                f"{len(node.leaves())} / {node.height:.0f}",
                (x, node.height),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=6,
            )
        return x, node.height

    draw(tree)
    undetermined = _undetermined_nodes(discovery)
    if n <= _LABEL_LIMIT:
        labels = [discovery.nodes[leaf] for leaf in order]
        ax.set_xticks(range(n), labels, rotation=90, fontsize=6)
        _mark_undetermined(ax.get_xticklabels(), {discovery.nodes[i] for i in undetermined})
    else:
        ax.set_xticks([])
        ax.set_xlabel("node (in tree order)")
    ax.set_ylabel("height (µs)")
    alphas = [f"{lv.alpha:.2f}" for lv in discovery.levels if lv.alpha is not None]
    how = f"α per level {', '.join(alphas)}" if alphas else f"α = {discovery.options.get('alpha')}"
    ax.set_title(
        f"Non-binary α tree ({how}); labels: nodes / diameter µs{_undetermined_note(discovery, len(undetermined))}",
        fontsize=9,
    )
    figure.tight_layout()
    return figure


def write_topology_plots(discovery: Discovery, directory: str | os.PathLike[str]) -> list[Path]:
    """Save the heatmap, dendrogram and tree as PNG and SVG.

    Parameters
    ----------
    discovery : Discovery
    directory : str or path-like
        An existing directory.

    Returns
    -------
    list of Path
        ``topology_heatmap``, ``topology_dendrogram``, ``topology_tree``, each ``.png``
        and ``.svg``.
    """
    directory = Path(directory)
    written = []
    with matplotlib.rc_context({"svg.hashsalt": "terrain", "svg.fonttype": "none"}):
        for stem, figure in (
            (HEATMAP_NAME, heatmap_figure(discovery, str(discovery.options.get("statistic", "round trip")))),
            (DENDROGRAM_NAME, dendrogram_figure(discovery)),
            (TREE_NAME, tree_figure(discovery)),
        ):
            for extension in FORMATS:
                path = directory / f"{stem}.{extension}"
                metadata = {"Date": None} if extension == "svg" else {}
                save_figure(figure, path, format=extension, dpi=150, metadata=metadata)
                written.append(path)
    return written
