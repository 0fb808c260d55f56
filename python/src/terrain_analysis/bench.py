"""DE-Bench results: summary.json, sweep.csv and HdrHistogram interval logs, and their figures.

``terrain bench`` (Ghaffari, "Investigating the Scalability Limits of Distributed Erlang",
Erlang Workshop 2014) writes per node one HdrHistogram interval log per operation
(``<node>/<op>.hlog``) and, for the cluster, ``summary.json`` (format ``terrain.bench/1``)
with percentiles of the merged histograms; ``terrain bench sweep`` writes ``sweep.csv`` with
one row per cluster size, argument size, computation time and operation.

* :func:`read_summary`, :func:`read_sweep` — the two files, checked.
* :func:`read_interval_log`, :func:`merged_log_percentiles` — the logs, read with the
  ``hdrhistogram`` package's own :class:`hdrh.log.HistogramLogReader` (no decoder of ours), so
  the Erlang writer is checked against HdrHistogram's reader.
* :func:`sweep_figures`, :func:`summary_figure`, :func:`write_bench_plots` — throughput vs
  cluster size per operation and latency percentiles vs cluster size (sweeps); merged
  percentiles beside the mean of per-node percentiles (one run). Figures are built on the Agg
  canvas, never through ``pyplot``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from terrain_analysis.formats import read_document, tag
from terrain_analysis.output import make_directory, save_figure
from terrain_analysis.values import measurement

__all__ = [
    "HIGHEST_TRACKABLE_US",
    "SIGNIFICANT_DIGITS",
    "SUMMARY_FORMAT",
    "SWEEP_COLUMNS",
    "SweepRow",
    "merged_log_percentiles",
    "read_interval_log",
    "read_summary",
    "read_sweep",
    "summary_figure",
    "sweep_figures",
    "write_bench_plots",
]

SUMMARY_FORMAT = tag("bench")
HIGHEST_TRACKABLE_US = 3_600_000_000
"""The histograms' range, as terrain_bench writes them: 1 µs to one hour."""
SIGNIFICANT_DIGITS = 3
SWEEP_COLUMNS = (
    "nodes",
    "argument_size",
    "compute_us",
    "op",
    "count",
    "errors",
    "throughput",
    "p50",
    "p90",
    "p95",
    "p99",
    "p999",
    "max",
    "per_node_p99_mean",
    "failed_instances",
)


@dataclass(frozen=True)
class SweepRow:
    """One row of ``sweep.csv``: an operation at one point of a sweep.

    Attributes
    ----------
    nodes, argument_size, compute_us : int
        The point: cluster size, payload bytes, computation on the target (µs).
    op : str
        The operation, as the configuration names it.
    count, errors : int
        Completed and failed operations in the measured window, whole cluster.
    throughput : float
        Completed operations per second, whole cluster.
    p50, p90, p95, p99, p999, max : int
        Latency percentiles of the merged histograms, µs.
    per_node_p99_mean : float or None
        DE-Bench's figure: the mean over nodes of each node's p99 (None when no node had one).
    failed_instances : int
        Nodes whose instance failed at this point.
    """

    nodes: int
    argument_size: int
    compute_us: int
    op: str
    count: int
    errors: int
    throughput: float
    p50: int
    p90: int
    p95: int
    p99: int
    p999: int
    max: int
    per_node_p99_mean: float | None
    failed_instances: int


def read_summary(path: str | Path) -> dict[str, Any]:
    """Read ``summary.json`` written by ``terrain bench``.

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    dict
        The document, with ``operations`` mapping each operation to its figures.

    Raises
    ------
    ValueError
        If the file is not JSON of format ``terrain.bench/1``.
    """
    return read_document(path, SUMMARY_FORMAT)


def read_sweep(path: str | Path) -> list[SweepRow]:
    """Read ``sweep.csv`` written by ``terrain bench sweep``.

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    list of SweepRow
        In file order.

    Raises
    ------
    ValueError
        If the header is not :data:`SWEEP_COLUMNS`, a cell is not a number where one is due, or a
        number is NaN, infinite or negative (the file is rejected, naming the line and column).
    """
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header) != SWEEP_COLUMNS:
            raise ValueError(f"'path' {str(path)!r} must start with the header {','.join(SWEEP_COLUMNS)}, got {header}")
        rows = []
        for line, cells in enumerate(reader, start=2):
            try:
                rows.append(
                    SweepRow(
                        nodes=int(cells[0]),
                        argument_size=int(cells[1]),
                        compute_us=int(cells[2]),
                        op=cells[3],
                        count=int(cells[4]),
                        errors=int(cells[5]),
                        throughput=float(cells[6]),
                        p50=int(cells[7]),
                        p90=int(cells[8]),
                        p95=int(cells[9]),
                        p99=int(cells[10]),
                        p999=int(cells[11]),
                        max=int(cells[12]),
                        per_node_p99_mean=float(cells[13]) if cells[13] else None,
                        failed_instances=int(cells[14]),
                    )
                )
            except (ValueError, IndexError):
                raise ValueError(f"{path}:{line}: malformed row {cells}") from None
            for name, value in zip(SWEEP_COLUMNS, astuple(rows[-1]), strict=True):
                if name != "op" and value is not None:
                    measurement(value, f"{path}:{line}", name)
    return rows


def read_interval_log(path: str | Path) -> list[HdrHistogram]:
    """Read every interval histogram of an HdrHistogram interval log.

    Parameters
    ----------
    path : str or Path
        A ``<op>.hlog`` file.

    Returns
    -------
    list of HdrHistogram
        One per interval line, in order, with start and end time stamps (ms since the epoch).
    """
    reader = HistogramLogReader(str(path), HdrHistogram(1, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS))
    try:
        intervals = []
        while (histogram := reader.get_next_interval_histogram()) is not None:
            intervals.append(histogram)
        return intervals
    finally:
        reader.close()


def merged_log_percentiles(
    paths: Iterable[str | Path], percentiles: Sequence[float] = (50, 90, 95, 99, 99.9)
) -> dict[str, int]:
    """Merge the intervals of several logs (one operation, all nodes) and take percentiles.

    Parameters
    ----------
    paths : iterable of str or Path
        The logs, e.g. ``<run>/*/rpc.hlog``.
    percentiles : sequence of float, default (50, 90, 95, 99, 99.9)
        Percentiles in (0, 100].

    Returns
    -------
    dict
        ``count``, ``max`` and ``p50``... (``p999`` for 99.9) in µs, HdrHistogram's definitions.
    """
    merged = HdrHistogram(1, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS)
    for path in paths:
        for histogram in read_interval_log(path):
            merged.add(histogram)
    result = {"count": merged.get_total_count(), "max": merged.get_max_value()}
    for percentile in percentiles:
        if not 0 < percentile <= 100:
            raise ValueError(f"'percentiles' must lie in (0, 100], got {percentile}")
        key = "p" + f"{percentile:g}".replace(".", "")
        result[key] = merged.get_value_at_percentile(percentile)
    return result


def _series(rows: Sequence[SweepRow]) -> dict[tuple[str, int, int], list[SweepRow]]:
    series: dict[tuple[str, int, int], list[SweepRow]] = {}
    for row in rows:
        series.setdefault((row.op, row.argument_size, row.compute_us), []).append(row)
    return {key: sorted(value, key=lambda r: r.nodes) for key, value in sorted(series.items())}


def _label(op: str, argument_size: int, compute_us: int, variations: bool) -> str:
    return f"{op} ({argument_size} B, {compute_us} us)" if variations else op


def sweep_figures(rows: Sequence[SweepRow], title: str = "") -> dict[str, Figure]:
    """Draw a sweep: throughput vs cluster size, and latency percentiles vs cluster size.

    Parameters
    ----------
    rows : sequence of SweepRow
        From :func:`read_sweep`; must not be empty.
    title : str, default ""
        Prefix of the figures' titles.

    Returns
    -------
    dict
        ``bench_throughput``: completed operations per second (whole cluster) vs nodes, one line
        per operation (and argument size / computation time when the sweep varies them), and beside
        it all operations per second divided by the number of nodes;
        ``bench_latency``: one panel per operation with p50, p99 and p99.9 of the merged histograms
        vs nodes, log scale, and DE-Bench's mean of per-node p99 dotted.
    """
    if not rows:
        raise ValueError("'rows' must not be empty")
    series = _series(rows)
    variations = len({(r.argument_size, r.compute_us) for r in rows}) > 1
    throughput = Figure(figsize=(13, 5), layout="constrained")
    FigureCanvasAgg(throughput)
    axes, per_node = throughput.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    for (op, size, compute), points in series.items():
        axes.plot(
            [p.nodes for p in points],
            [p.throughput for p in points],
            marker="o",
            label=_label(op, size, compute, variations),
        )
    axes.set_xlabel("nodes")
    axes.set_ylabel("completed operations per second (cluster)")
    axes.set_title(f"{title}throughput vs cluster size".strip())
    axes.set_yscale("log")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    for (size, compute), points in _per_node_throughput(rows).items():
        per_node.plot(
            [n for n, _ in points],
            [t for _, t in points],
            marker="o",
            label=f"all operations ({size} B, {compute} us)" if variations else "all operations",
        )
    per_node.set_xlabel("nodes")
    per_node.set_ylabel("completed operations per second per node")
    per_node.set_title("throughput per node (cluster / nodes)")
    per_node.set_ylim(bottom=0)
    per_node.grid(True, alpha=0.3)
    per_node.legend(fontsize="small")

    ops = sorted({r.op for r in rows})
    latency = Figure(figsize=(4.2 * min(len(ops), 3), 3.6 * ((len(ops) + 2) // 3)), layout="constrained")
    FigureCanvasAgg(latency)
    for index, op in enumerate(ops):
        panel = latency.add_subplot((len(ops) + 2) // 3, min(len(ops), 3), index + 1)
        for (name, size, compute), points in series.items():
            if name != op:
                continue
            nodes = [p.nodes for p in points]
            suffix = f" {size} B {compute} us" if variations else ""
            (line,) = panel.plot(nodes, [max(p.p50, 1) for p in points], marker="o", label="p50" + suffix)
            panel.plot(
                nodes,
                [max(p.p99, 1) for p in points],
                marker="s",
                ls="--",
                color=line.get_color(),
                label="p99" + suffix,
            )
            if variations:
                continue  # p99.9 and DE-Bench's mean per variation would hide the lines
            panel.plot(
                nodes,
                [max(p.p999, 1) for p in points],
                marker="^",
                ls="-.",
                color=line.get_color(),
                alpha=0.6,
                label="p99.9",
            )
            means = [(p.nodes, p.per_node_p99_mean) for p in points if p.per_node_p99_mean is not None]
            if means:
                panel.plot(
                    [n for n, _ in means],
                    [max(m, 1) for _, m in means],
                    ls=":",
                    color="grey",
                    label="mean of nodes' p99",
                )
        panel.set_yscale("log")
        panel.set_title(op)
        panel.set_xlabel("nodes")
        panel.set_ylabel("latency (us)")
        panel.grid(True, which="both", alpha=0.3)
        panel.legend(fontsize="x-small")
    latency.suptitle(f"{title}latency vs cluster size (merged histograms)".strip())
    figures = {"bench_throughput": throughput, "bench_latency": latency}
    if len({r.argument_size for r in rows}) > 1:
        figures["bench_argument_size"] = _argument_size_figure(rows, title)
    return figures


def _per_node_throughput(rows: Sequence[SweepRow]) -> dict[tuple[int, int], list[tuple[int, float]]]:
    """All operations' throughput divided by the cluster size, per (argument size, computation time)."""
    totals: dict[tuple[int, int], dict[int, float]] = {}
    for row in rows:
        by_nodes = totals.setdefault((row.argument_size, row.compute_us), {})
        by_nodes[row.nodes] = by_nodes.get(row.nodes, 0.0) + row.throughput
    return {
        key: [(nodes, total / nodes) for nodes, total in sorted(by_nodes.items())]
        for key, by_nodes in sorted(totals.items())
    }


def _argument_size_figure(rows: Sequence[SweepRow], title: str) -> Figure:
    """Throughput and p50 vs argument size, one line per operation, cluster size and computation time."""
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    left = figure.add_subplot(1, 2, 1)
    right = figure.add_subplot(1, 2, 2)
    series: dict[tuple[str, int, int], list[SweepRow]] = {}
    for row in rows:
        series.setdefault((row.op, row.nodes, row.compute_us), []).append(row)
    for (op, nodes, compute), points in sorted(series.items()):
        points = sorted(points, key=lambda r: r.argument_size)
        sizes = [p.argument_size for p in points]
        label = f"{op}, {nodes} nodes, {compute} us"
        (line,) = left.plot(sizes, [p.throughput for p in points], marker="o", label=label)
        right.plot(sizes, [max(p.p50, 1) for p in points], marker="o", color=line.get_color(), label=label + " p50")
        right.plot(sizes, [max(p.p99, 1) for p in points], marker="s", ls="--", color=line.get_color(), label="p99")
    for axes, ylabel in ((left, "completed operations per second (cluster)"), (right, "latency (us)")):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("argument size (bytes)")
        axes.set_ylabel(ylabel)
        axes.grid(True, which="both", alpha=0.3)
    left.legend(fontsize="x-small")
    right.set_title("p50 (solid) and p99 (dashed)")
    left.set_title("throughput")
    figure.suptitle(f"{title}argument size".strip())
    return figure


def summary_figure(summary: dict[str, Any]) -> Figure:
    """Draw one run: per operation the merged p50, p99, p99.9 beside the mean of per-node ones.

    Parameters
    ----------
    summary : dict
        From :func:`read_summary`.

    Returns
    -------
    Figure
        Grouped bars, log scale, µs.
    """
    operations = summary["operations"]
    ops = sorted(operations)
    figure = Figure(figsize=(max(6.0, 1.2 * len(ops) + 2), 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    keys = [("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")]
    width = 0.8 / (2 * len(keys))
    for k, (key, label) in enumerate(keys):
        merged = [max(operations[op]["latency_us"][key], 1) for op in ops]
        means = [
            max((operations[op]["per_node_percentile_mean"] or {}).get(key, 0) or 0, 1) for op in ops
        ]
        positions = [i + (2 * k) * width for i in range(len(ops))]
        axes.bar(positions, merged, width, label=f"{label} merged")
        axes.bar([p + width for p in positions], means, width, label=f"{label} mean of nodes", alpha=0.5)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(ops))], ops, rotation=30, ha="right")
    axes.set_yscale("log")
    axes.set_ylabel("latency (us)")
    nodes = len(summary.get("nodes", []))
    axes.set_title(f"{nodes} nodes, {summary.get('measured_s')} s: merged histograms vs DE-Bench's mean of nodes")
    axes.legend(fontsize="x-small", ncols=3)
    return figure


def write_bench_plots(source: str | Path, directory: str | Path, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Draw the figures of a sweep.csv or a summary.json into ``directory``.

    Parameters
    ----------
    source : str or Path
        ``sweep.csv`` or ``summary.json``.
    directory : str or Path
        Created if missing.
    formats : sequence of str, default ("png", "svg")

    Returns
    -------
    list of Path
        The files written.
    """
    source = Path(source)
    directory = Path(directory)
    make_directory(directory)
    if source.suffix == ".json":
        figures = {"bench_summary": summary_figure(read_summary(source))}
    else:
        figures = sweep_figures(read_sweep(source))
    written = []
    for name, figure in figures.items():
        for extension in formats:
            path = directory / f"{name}.{extension}"
            save_figure(figure, path, dpi=110)
            written.append(path)
    return written
