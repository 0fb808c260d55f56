"""The scaling experiment: read ``scale.json`` and plot each operation's time against the cluster size.

``terrain experiment scale`` writes ``scale.json`` (format ``terrain.scale/1``): one row per cluster size
and lab operation (``up``, ``attrs``, ``choose``, ``probe``, ``down``) with its wall time in seconds,
and each operation's growth exponent b, the least-squares slope of log(time) on log(n)
(time ∝ nᵇ). :func:`scale_figure` draws the times on log-log axes, one line per operation,
with the fitted power law dashed and b in the legend; :func:`write_scale_plot` saves it as PNG
and SVG. Figures are built on the Agg canvas, never through ``pyplot``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from terrain_analysis.formats import read_document, tag

__all__ = ["FORMAT", "PLOT_NAME", "ScaleRow", "growth_exponent", "read_scale", "scale_figure", "write_scale_plot"]

FORMAT = tag("scale")
PLOT_NAME = "scale_time_vs_nodes"
_OPERATIONS = ("up", "attrs", "choose", "probe", "down")


@dataclass(frozen=True)
class ScaleRow:
    """One row of ``scale.json``: ``operation`` on ``nodes`` VMs took ``seconds`` (``predicted``: not run
    because the prediction was over the budget; drawn hollow and left out of the fit; ``strategy``: the
    probe's, ``tree`` or ``concurrent``, shown in the legend)."""

    nodes: int
    operation: str
    seconds: float
    predicted: bool = False
    strategy: str | None = None


def read_scale(path: str | os.PathLike[str]) -> tuple[dict, list[ScaleRow]]:
    """Read ``scale.json``.

    Parameters
    ----------
    path : path-like
        A ``terrain.scale/1`` document.

    Returns
    -------
    (dict, list of ScaleRow)
        The document and its rows.

    Raises
    ------
    ValueError
        If it is not a ``terrain.scale/1`` document or a row lacks a field.
    """
    document = read_document(path, FORMAT)
    rows = []
    for k, row in enumerate(document.get("rows") or []):
        try:
            strategy = (row.get("detail") or {}).get("strategy")
            rows.append(ScaleRow(int(row["nodes"]), str(row["operation"]), float(row["seconds"]),
                                 bool(row.get("predicted", False)), None if strategy is None else str(strategy)))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: 'rows'[{k}] must have 'nodes', 'operation' and 'seconds', got {row!r}") from None
        if not (math.isfinite(rows[-1].seconds) and rows[-1].seconds >= 0):
            raise ValueError(f"{path}: 'rows'[{k}] seconds is {rows[-1].seconds}, expected a finite number >= 0")
    return document, rows


def growth_exponent(points: list[tuple[int, float]]) -> float | None:
    """The least-squares slope of log(seconds) on log(nodes); ``None`` below two sizes."""
    logs = [(math.log(n), math.log(max(t, 1e-6))) for n, t in points]
    if len({x for x, _ in logs}) < 2:
        return None
    mean_x = sum(x for x, _ in logs) / len(logs)
    mean_y = sum(y for _, y in logs) / len(logs)
    sxx = sum((x - mean_x) ** 2 for x, _ in logs)
    return sum((x - mean_x) * (y - mean_y) for x, y in logs) / sxx


def scale_figure(rows: list[ScaleRow], title: str) -> Figure:
    """Times against cluster size, log-log, one line per operation with its fitted power law."""
    figure = Figure(figsize=(7.5, 4.8))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    operations = [op for op in _OPERATIONS if any(r.operation == op for r in rows)]
    operations += sorted({r.operation for r in rows} - set(operations))
    for colour, operation in zip(("C0", "C1", "C2", "C3", "C4", "C5", "C6"), operations, strict=False):
        points = sorted((r.nodes, r.seconds) for r in rows if r.operation == operation and not r.predicted)
        predicted = sorted((r.nodes, r.seconds) for r in rows if r.operation == operation and r.predicted)
        if predicted:
            axes.plot([n for n, _ in predicted], [t for _, t in predicted], "o", color=colour, fillstyle="none")
        b = growth_exponent(points)
        strategies = sorted({r.strategy for r in rows if r.operation == operation and r.strategy})
        name = ", ".join([operation, *strategies])
        label = f"{name} (b = {b:.2f})" if b is not None else name
        axes.plot([n for n, _ in points], [t for _, t in points], "o-", color=colour, label=label)
        if b is not None:
            logs = [(math.log(n), math.log(max(t, 1e-6))) for n, t in points]
            mean_x = sum(x for x, _ in logs) / len(logs)
            mean_y = sum(y for _, y in logs) / len(logs)
            ns = [points[0][0], points[-1][0]]
            axes.plot(ns, [math.exp(mean_y + b * (math.log(n) - mean_x)) for n in ns], "--", color=colour,
                      linewidth=0.8)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    sizes = sorted({r.nodes for r in rows})
    axes.set_xticks(sizes, [str(n) for n in sizes])
    axes.set_xlabel("cluster size (VMs)")
    axes.set_ylabel("wall time (s)")
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    title = "operation (time ∝ nᵇ, fit dashed"
    title += "; hollow: predicted, not run)" if any(r.predicted for r in rows) else ")"
    axes.legend(fontsize=8, title=title, title_fontsize=8)
    figure.tight_layout()
    return figure


def write_scale_plot(rows: list[ScaleRow], directory: str | os.PathLike[str], title: str) -> list[Path]:
    """Save :func:`scale_figure` as ``scale_time_vs_nodes.png`` and ``.svg`` in ``directory``."""
    figure = scale_figure(rows, title)
    written = []
    for suffix in (".png", ".svg"):
        path = Path(directory) / (PLOT_NAME + suffix)
        figure.savefig(path, dpi=120)
        written.append(path)
    return written
