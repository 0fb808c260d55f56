"""Collective-operation benchmarks: read ``collective.json`` and plot time against size.

``terrain collective bench`` writes ``collective.json`` (format ``terrain.collective/1``):
one result per algorithm, value size and rank order with the median and 95th percentile
of the operation's time in µs, and for the hierarchical algorithm its lower bound from the
cluster spec's latencies. :func:`collective_figure` draws the medians against the size on
log-log axes, one colour per algorithm and one line style per rank order, with the
hierarchical lower bound as a dashed grey line; :func:`write_collective_plot` saves it as
PNG and SVG. Figures are built on the Agg canvas, never through ``pyplot``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from terrain_analysis.formats import read_document, tag
from terrain_analysis.output import save_figure
from terrain_analysis.values import measurement

__all__ = ["FORMAT", "PLOT_NAME", "CollectiveResult", "collective_figure", "read_collective", "write_collective_plot"]

FORMAT = tag("collective")
PLOT_NAME = "collective_time_vs_size"
_STYLES = {"block": "-", "round_robin": ":", "random": "--"}


@dataclass(frozen=True)
class CollectiveResult:
    """One measurement of ``collective.json``.

    Attributes
    ----------
    algorithm : str
    size_bytes : int
    rank_order : str
        ``block``, ``round_robin`` or ``random``.
    median_us, p95_us : float
    lower_bound_us : float or None
        Only for ``hierarchical``.
    """

    algorithm: str
    size_bytes: int
    rank_order: str
    median_us: float
    p95_us: float
    lower_bound_us: float | None


def read_collective(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[CollectiveResult]]:
    """Read a ``terrain.collective/1`` document.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    (dict, list of CollectiveResult)
        The document's header (everything but ``results``) and its results.

    Raises
    ------
    ValueError
        When the file is not a ``terrain.collective/1`` document, or holds a NaN, an infinity
        or a negative time (the file is rejected); the message names the file, the offending
        field and value.
    """
    document = read_document(path, FORMAT)
    raw = document.get("results")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path}: 'results' must be a non-empty list, got {raw!r}")
    results = []
    for index, item in enumerate(raw):
        try:
            results.append(
                CollectiveResult(
                    algorithm=str(item["algorithm"]),
                    size_bytes=int(item["size_bytes"]),
                    rank_order=str(item["rank_order"]),
                    median_us=float(item["median_us"]),
                    p95_us=float(item["p95_us"]),
                    lower_bound_us=None if item.get("lower_bound_us") is None else float(item["lower_bound_us"]),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: 'results[{index}]' is not a result: {item!r} ({error})") from None
        if results[-1].size_bytes <= 0 or results[-1].median_us <= 0:
            raise ValueError(f"{path}: 'results[{index}]' needs a positive size and median, got {item!r}")
        for name in ("p95_us", "lower_bound_us"):
            value = getattr(results[-1], name)
            if value is not None:
                measurement(value, f"{path} results[{index}]", name)
    header = {key: value for key, value in document.items() if key != "results"}
    return header, results


def collective_figure(results: list[CollectiveResult], title: str = "") -> Figure:
    """Median time against value size per algorithm and rank order, log-log.

    Parameters
    ----------
    results : list of CollectiveResult
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    figure = Figure(figsize=(11, 5.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    algorithms = sorted({r.algorithm for r in results})
    colours = {a: f"C{i}" for i, a in enumerate(algorithms)}
    for algorithm in algorithms:
        for order in sorted({r.rank_order for r in results if r.algorithm == algorithm}):
            points = sorted(
                (r.size_bytes, r.median_us) for r in results if r.algorithm == algorithm and r.rank_order == order
            )
            axes.plot(
                [p[0] for p in points],
                [p[1] / 1000 for p in points],
                _STYLES.get(order, "-."),
                marker="o",
                color=colours[algorithm],
                label=f"{algorithm} ({order})",
            )
    bound = sorted((r.size_bytes, r.lower_bound_us) for r in results if r.lower_bound_us is not None)
    if bound:
        axes.plot(
            [b[0] for b in bound],
            [b[1] / 1000 for b in bound],
            "--",
            color="grey",
            linewidth=2,
            label="hierarchical lower bound",
        )
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("value size (bytes)")
    axes.set_ylabel("allreduce time, median (ms)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    if title:
        axes.set_title(title)
    figure.tight_layout()
    return figure


def write_collective_plot(
    results: list[CollectiveResult], directory: str | os.PathLike[str], title: str = ""
) -> list[Path]:
    """Save :func:`collective_figure` as PNG and SVG in ``directory`` (which must exist).

    Returns
    -------
    list of Path
    """
    directory = Path(directory)
    figure = collective_figure(results, title)
    written = []
    with matplotlib.rc_context({"svg.hashsalt": "terrain", "svg.fonttype": "none"}):
        for extension in ("png", "svg"):
            path = directory / f"{PLOT_NAME}.{extension}"
            save_figure(figure, path, format=extension, dpi=150, metadata={"Date": None} if extension == "svg" else {})
            written.append(path)
    return written
