"""EMAS runs and scaling tables: reading ``terrain emas`` output and drawing it.

``terrain emas --model M --out DIR`` writes ``DIR/emas.csv`` (per second and island:
``second, island, reproductions, fights, deaths, migrations, best_fitness``) and
``DIR/summary.json`` (format ``terrain.emas/1``); ``terrain emas scaling --out DIR``
writes ``DIR/scaling.json`` (format ``terrain.emas_scaling/1``).

* :func:`fitness_figure` — the best Rastrigin value found so far (−fitness, log scale)
  against time, one line per run, so the models can be compared;
* :func:`throughput_figure` — reproductions per second per model (from the runs'
  summaries) and, with a scaling table, per model and number of schedulers;
* :func:`utilisation_figure` — from a scaling table: each model's speed-up over one
  scheduler beside its scheduler utilisation.

:func:`write_emas_plots` saves what the inputs allow as PNG and SVG. Figures are built
on the Agg canvas, never through ``pyplot``.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from terrain_analysis.formats import read_document, tag
from terrain_analysis.output import make_directory, save_figure

__all__ = [
    "CSV_COLUMNS",
    "FITNESS_NAME",
    "FORMATS",
    "SCALING_FORMAT",
    "SUMMARY_FORMAT",
    "THROUGHPUT_NAME",
    "UTILISATION_NAME",
    "EmasRun",
    "fitness_figure",
    "read_run",
    "read_scaling",
    "throughput_figure",
    "utilisation_figure",
    "write_emas_plots",
]

SUMMARY_FORMAT = tag("emas")
"""Format of ``summary.json``."""

SCALING_FORMAT = tag("emas_scaling")
"""Format of ``scaling.json``."""

CSV_COLUMNS = ("second", "island", "reproductions", "fights", "deaths", "migrations", "best_fitness")
"""Header of ``emas.csv``."""

FITNESS_NAME = "emas_fitness"
THROUGHPUT_NAME = "emas_throughput"
UTILISATION_NAME = "emas_utilisation"
FORMATS = ("png", "svg")
"""Formats :func:`write_emas_plots` writes."""

MODELS = ("sequential", "hybrid", "concurrent", "skel")
_COLOURS = {"sequential": "#4c72b0", "hybrid": "#dd8452", "concurrent": "#55a868", "skel": "#c44e52"}


@dataclass(frozen=True)
class EmasRun:
    """One ``terrain emas`` run.

    Attributes
    ----------
    directory : Path
        Where it was read from.
    model : str
        ``sequential``, ``hybrid``, ``concurrent`` or ``skel``.
    rows : numpy.ndarray
        Structured array with the columns of :data:`CSV_COLUMNS`; ``best_fitness`` is NaN
        where the island reported none.
    summary : dict
        ``summary.json`` as read.
    """

    directory: Path
    model: str
    rows: np.ndarray
    summary: dict[str, Any]

    def best_over_time(self) -> tuple[np.ndarray, np.ndarray]:
        """The best fitness of all islands up to each second.

        Returns
        -------
        seconds, best : numpy.ndarray
            Seconds in increasing order and the maximum ``best_fitness`` over the islands
            and the seconds so far (a second without values keeps the previous best).
        """
        seconds = np.unique(self.rows["second"])
        per_second = []
        for second in seconds:
            values = self.rows["best_fitness"][self.rows["second"] == second]
            values = values[~np.isnan(values)]
            per_second.append(values.max() if values.size else np.nan)
        return seconds, np.fmax.accumulate(np.array(per_second, dtype=float))


def read_run(directory: str | os.PathLike[str]) -> EmasRun:
    """Read ``emas.csv`` and ``summary.json`` of one run directory.

    Parameters
    ----------
    directory : path
        The ``--out`` directory of ``terrain emas``.

    Returns
    -------
    EmasRun

    Raises
    ------
    ValueError
        If a file has the wrong format or header, or the summary names no known model.
    OSError
        If a file cannot be read.
    """
    path = Path(directory)
    summary = read_document(path / "summary.json", SUMMARY_FORMAT)
    model = summary.get("model")
    if model not in MODELS:
        raise ValueError(f"{path / 'summary.json'}: 'model' must be one of {', '.join(MODELS)}, got {model!r}")
    with open(path / "emas.csv", encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header) != CSV_COLUMNS:
            raise ValueError(f"{path / 'emas.csv'}: header must be {','.join(CSV_COLUMNS)}, got {header!r}")
        records = []
        for number, row in enumerate(reader, start=2):
            if len(row) != len(CSV_COLUMNS):
                raise ValueError(f"{path / 'emas.csv'}: line {number} has {len(row)} fields, expected 7")
            try:
                records.append((*(int(v) for v in row[:6]), float(row[6]) if row[6] != "" else np.nan))
            except ValueError:
                raise ValueError(f"{path / 'emas.csv'}: line {number} is not numeric: {row!r}") from None
    dtype = [(c, "i8") for c in CSV_COLUMNS[:6]] + [("best_fitness", "f8")]
    return EmasRun(path, str(model), np.array(records, dtype=dtype), summary)


def read_scaling(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``scaling.json``.

    Parameters
    ----------
    path : path
        Written by ``terrain emas scaling``.

    Returns
    -------
    dict
        The document; ``rows`` holds ``model``, ``schedulers``, ``reproductions_per_s``,
        ``utilisation`` and ``oversubscribed``.

    Raises
    ------
    ValueError
        If the format is not :data:`SCALING_FORMAT` or a row misses a field.
    """
    document = read_document(path, SCALING_FORMAT)
    rows = document.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: 'rows' must be a non-empty list")
    for row in rows:
        missing = [k for k in ("model", "schedulers", "reproductions_per_s", "utilisation") if k not in row]
        if missing:
            raise ValueError(f"{path}: a row misses {', '.join(missing)}: {row!r}")
    return document


def _label(run: EmasRun, runs: Sequence[EmasRun]) -> str:
    if sum(1 for r in runs if r.model == run.model) > 1:
        return f"{run.model} ({run.directory.name})"
    return run.model


def fitness_figure(runs: Sequence[EmasRun]) -> Figure:
    """Best Rastrigin value (−fitness, lower is better) against time, one line per run.

    Parameters
    ----------
    runs : sequence of EmasRun
        Typically one run of each model with the same seed and time.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not runs:
        raise ValueError("'runs' must not be empty")
    figure = Figure(figsize=(7.5, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for run in runs:
        seconds, best = run.best_over_time()
        initial = float(run.summary.get("initial_best_fitness", np.nan))
        # the last row covers the part of a second before the end of the run
        duration = float(run.summary.get("duration_s", seconds[-1] if len(seconds) else 0))
        xs = np.concatenate([[0], np.minimum(seconds, duration)])
        ys = -np.concatenate([[initial], best])
        axes.plot(xs, ys, marker="o", markersize=3, label=_label(run, runs), color=_COLOURS.get(run.model))
    axes.set_yscale("log")
    axes.set_xlabel("time since the start (s)")
    axes.set_ylabel("best Rastrigin f(x) found (log; lower is better)")
    dims = {r.summary.get("parameters", {}).get("dimensions") for r in runs}
    axes.set_title("EMAS: best solution over time" + (f", {dims.pop()} dimensions" if len(dims) == 1 else ""))
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    return figure


def throughput_figure(runs: Sequence[EmasRun], scaling: dict[str, Any] | None = None) -> Figure:
    """Reproductions per second per model.

    Parameters
    ----------
    runs : sequence of EmasRun
        Each contributes a bar (its summary's ``reproductions_per_s``).
    scaling : dict, optional
        A scaling table: a second panel with a bar per model and number of schedulers
        (hatched when oversubscribed).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not runs and scaling is None:
        raise ValueError("'runs' and 'scaling' must not both be empty")
    panels = int(bool(runs)) + int(scaling is not None)
    figure = Figure(figsize=(6.0 * panels + 1.0, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    index = 1
    if runs:
        axes = figure.add_subplot(1, panels, index)
        index += 1
        labels = [_label(r, runs) for r in runs]
        rates = [float(r.summary["reproductions_per_s"]) for r in runs]
        bars = axes.bar(labels, rates, color=[_COLOURS.get(r.model, "grey") for r in runs])
        cores = [r.summary.get("cpu_cores") for r in runs]
        axes.bar_label(
            bars,
            labels=[
                f"{v:,.0f}" + (f"\n{c:.2f} cores of CPU" if isinstance(c, float) else "")
                for v, c in zip(rates, cores, strict=True)
            ],
            fontsize=8,
        )
        axes.set_ylim(0, max(rates) * 1.2 if max(rates) > 0 else 1)
        schedulers = {r.summary.get("schedulers") for r in runs}
        axes.set_title("one run each" + (f" ({schedulers.pop()} schedulers)" if len(schedulers) == 1 else ""))
        axes.set_ylabel("reproductions per second")
        axes.tick_params(axis="x", labelrotation=20)
    if scaling is not None:
        axes = figure.add_subplot(1, panels, index)
        rows = scaling["rows"]
        counts = sorted({int(r["schedulers"]) for r in rows})
        models = [m for m in MODELS if any(r["model"] == m for r in rows)]
        width = 0.8 / len(counts)
        for k, count in enumerate(counts):
            for i, model in enumerate(models):
                row = next((r for r in rows if r["model"] == model and int(r["schedulers"]) == count), None)
                if row is None:
                    continue
                axes.bar(
                    i + (k - (len(counts) - 1) / 2) * width,
                    float(row["reproductions_per_s"]),
                    width,
                    color=_COLOURS.get(model, "grey"),
                    alpha=0.35 + 0.65 * (k + 1) / len(counts),
                    hatch="//" if row.get("oversubscribed") else None,
                    edgecolor="black",
                    linewidth=0.5,
                )
        axes.set_xticks(range(len(models)), models)
        axes.set_ylabel("reproductions per second")
        axes.set_title(
            "by schedulers: " + ", ".join(str(c) for c in counts) + " (left to right; hatched: oversubscribed)",
            fontsize=9,
        )
    figure.suptitle("EMAS throughput")
    return figure


def utilisation_figure(scaling: dict[str, Any]) -> Figure:
    """Speed-up over one scheduler and scheduler utilisation, per model.

    Parameters
    ----------
    scaling : dict
        A scaling table (:func:`read_scaling`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    rows = scaling["rows"]
    cores = scaling.get("cores")
    figure = Figure(figsize=(11.0, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    speed, util = figure.subplots(1, 2)
    for model in [m for m in MODELS if any(r["model"] == m for r in rows)]:
        mine = sorted((r for r in rows if r["model"] == model), key=lambda r: int(r["schedulers"]))
        xs = np.array([int(r["schedulers"]) for r in mine])
        rates = np.array([float(r["reproductions_per_s"]) for r in mine])
        base = rates[xs == 1][0] if np.any(xs == 1) else rates[0]
        colour = _COLOURS.get(model)
        speed.plot(xs, rates / base, marker="o", label=model, color=colour)
        util.plot(xs, [float(r["utilisation"]) for r in mine], marker="o", label=model, color=colour)
    counts = sorted({int(r["schedulers"]) for r in rows})
    for axes in (speed, util):
        axes.set_xscale("log", base=2)
        axes.set_xticks(counts, [str(c) for c in counts])
        axes.set_xlabel("schedulers (+S)")
        if cores:
            axes.axvspan(cores, max(counts) * 1.2, color="grey", alpha=0.12, label=f"oversubscribed (> {cores} cores)")
        axes.grid(True, alpha=0.3)
    speed.plot(counts, [min(c, cores or c) for c in counts], "k--", linewidth=0.8, label="ideal")
    speed.set_ylabel("reproductions/s relative to 1 scheduler")
    speed.set_title("speed-up")
    util.set_ylim(0, 1.05)
    util.set_ylabel("scheduler utilisation (scheduler_wall_time)")
    util.set_title("utilisation")
    speed.legend(fontsize=8)
    idle = scaling.get("idle_cpu_before")
    figure.suptitle(
        "EMAS scaling" + (f" (machine {100 * idle:.0f}% idle before measuring)" if isinstance(idle, float) else "")
    )
    return figure


def write_emas_plots(
    directory: str | os.PathLike[str],
    runs: Sequence[EmasRun],
    scaling: dict[str, Any] | None = None,
) -> list[Path]:
    """Save the figures the inputs allow.

    Parameters
    ----------
    directory : path
        Created if needed.
    runs : sequence of EmasRun
        Runs for the fitness and throughput figures.
    scaling : dict, optional
        A scaling table for the throughput and utilisation figures.

    Returns
    -------
    list of Path
        The files written.
    """
    out = Path(directory)
    make_directory(out)
    figures: list[tuple[str, Figure]] = []
    if runs:
        figures.append((FITNESS_NAME, fitness_figure(runs)))
    if runs or scaling is not None:
        figures.append((THROUGHPUT_NAME, throughput_figure(runs, scaling)))
    if scaling is not None:
        figures.append((UTILISATION_NAME, utilisation_figure(scaling)))
    written = []
    with matplotlib.rc_context({"svg.hashsalt": "terrain", "svg.fonttype": "none"}):
        for name, figure in figures:
            for extension in FORMATS:
                path = out / f"{name}.{extension}"
                metadata = {"Date": None} if extension == "svg" else {}
                save_figure(figure, path, format=extension, dpi=120, metadata=metadata)
                written.append(path)
    return written
