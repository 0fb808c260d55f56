"""Figures of the placement experiments (``terrain experiment``).

``summary.json`` (format ``terrain.experiment/1``) names the experiment:

* ``attributes`` -- RELEASE D3.5 §3.4, Figures 2 and 3: the mean ML-ACO time with and
  without attribute placement against the number of ants, and their ratio. The run
  times of every run come from ``attributes.csv`` and are drawn as points.
* ``distances`` -- RELEASE D3.5 §4.6: the mean time of each placement with the spec's
  and with the discovered topology, and the ratios random / distance; the placed trees
  (``placement_*.dot``, like the seed's Figures 27-28) are rendered to PNG with
  Graphviz ``dot`` when it is installed.

Figures are drawn on an Agg canvas (never through ``pyplot``) as PNG and SVG.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from terrain_analysis.formats import read_document, tag
from terrain_analysis.output import make_directory, save_figure, write_atomically
from terrain_analysis.values import measurement

__all__ = ["ATTRIBUTES_COLUMNS", "FORMAT", "read_attribute_times", "read_summary", "write_experiment_plots"]

FORMAT = tag("experiment")
FORMATS = ("png", "svg")
NOISE_NOTE = "one 2-core machine shared with other work: times are noisy"

matplotlib.use("Agg")


def read_summary(directory: Path) -> dict[str, Any]:
    """Read ``summary.json`` of an experiment's run directory.

    Parameters
    ----------
    directory : Path
        The directory ``terrain experiment --out`` wrote.

    Returns
    -------
    dict
        The summary.

    Raises
    ------
    ValueError
        If the file is not JSON or its format is not ``terrain.experiment/1``.
    OSError
        If it cannot be read.
    """
    path = directory / "summary.json"
    summary = read_document(path, FORMAT)
    if summary.get("experiment") not in ("attributes", "distances"):
        raise ValueError(f"{path}: unknown experiment {summary.get('experiment')!r}")
    return summary


def write_experiment_plots(directory: Path, out: Path | None = None) -> list[Path]:
    """Draw the figures of the experiment in ``directory``.

    Parameters
    ----------
    directory : Path
        The experiment's run directory (``summary.json`` and its CSV file).
    out : Path, optional
        Where to write the figures; default ``directory``.

    Returns
    -------
    list of Path
        The files written.
    """
    summary = read_summary(directory)
    target = directory if out is None else out
    make_directory(target)
    if summary["experiment"] == "attributes":
        figures = _attributes_figures(summary, read_attribute_times(directory / "attributes.csv"))
    else:
        figures = _distances_figures(summary)
    written = _render_dot_files(directory, target)
    for name, figure in figures:
        for extension in FORMATS:
            path = target / f"{name}.{extension}"
            FigureCanvasAgg(figure)
            save_figure(figure, path, dpi=120)
            written.append(path)
    return written


def _render_dot_files(directory: Path, target: Path) -> list[Path]:
    dot = shutil.which("dot")
    if dot is None:
        return []
    written = []
    for source in sorted(directory.glob("placement_*.dot")):
        path = target / (source.stem + ".png")
        drawn = subprocess.run([dot, "-Tpng", str(source)], check=True, capture_output=True)
        written.append(write_atomically(path, drawn.stdout))
    return written


ATTRIBUTES_COLUMNS = ("ants", "run", "placement", "seconds")
"""Header of ``attributes.csv``: one row per run, ``seconds`` the ML-ACO main loop's time."""


def read_attribute_times(path: Path) -> list[dict[str, Any]]:
    """Read ``attributes.csv`` of an attributes experiment.

    Parameters
    ----------
    path : Path

    Returns
    -------
    list of dict
        One per row: ``ants`` and ``run`` (int), ``placement`` (str), ``seconds`` (float).

    Raises
    ------
    ValueError
        If the header is not :data:`ATTRIBUTES_COLUMNS` or a row's ``ants``, ``run`` or
        ``seconds`` is not a number, not finite or negative (the file is rejected, naming
        the line).
    """
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != ATTRIBUTES_COLUMNS:
            raise ValueError(f"{path}: header must be {','.join(ATTRIBUTES_COLUMNS)}, got {header!r}")
        rows = []
        for cells in reader:
            if not cells:
                continue
            where = f"{path} line {reader.line_num}"
            if len(cells) != len(ATTRIBUTES_COLUMNS):
                raise ValueError(f"{where}: {len(cells)} fields, expected {len(ATTRIBUTES_COLUMNS)}")
            try:
                ants, run, seconds = int(cells[0]), int(cells[1]), float(cells[3])
            except ValueError:
                raise ValueError(f"{where}: ants, run and seconds must be numbers, got {cells!r}") from None
            for name, value in (("ants", ants), ("run", run), ("seconds", seconds)):
                measurement(value, where, name)
            rows.append({"ants": ants, "run": run, "placement": cells[2].strip(), "seconds": seconds})
    return rows


def _attributes_figures(summary: dict[str, Any], rows: list[dict[str, Any]]) -> list[tuple[str, Figure]]:
    ratios = summary["ratios"]
    ants = [r["ants"] for r in ratios]
    parameters = summary.get("parameters", {})
    shape = _attributes_shape(parameters)
    times = Figure(figsize=(7, 4.5))
    axes = times.add_subplot()
    lines = (("attributes", "with attributes", "tab:blue"), ("random", "without (random)", "tab:red"))
    for placement, label, colour in lines:
        xs = [int(r["ants"]) for r in rows if r["placement"] == placement]
        ys = [float(r["seconds"]) for r in rows if r["placement"] == placement]
        axes.scatter(xs, ys, s=12, alpha=0.4, color=colour)
        means = [r["with_s" if placement == "attributes" else "without_s"] for r in ratios]
        axes.plot(ants, means, marker="o", color=colour, label=label + " (mean)")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("ants per colony")
    axes.set_ylabel("ML-ACO main loop (s)")
    axes.set_title(f"ML-ACO time with and without attribute placement\n{shape}", fontsize=10)
    axes.legend()
    times.text(0.01, 0.01, NOISE_NOTE, fontsize=7, color="grey")
    times.tight_layout(rect=(0, 0.03, 1, 1))
    ratio = Figure(figsize=(7, 4.5))
    axes = ratio.add_subplot()
    axes.plot(ants, [r["ratio"] for r in ratios], marker="o", color="black")
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    big_schedulers = parameters.get("big_schedulers")
    if isinstance(big_schedulers, int) and big_schedulers > 1:
        axes.axhline(big_schedulers, color="tab:green", linewidth=0.8, linestyle="--",
                     label=f"limit: {big_schedulers} emulated cores per big VM")
        axes.legend(loc="upper left")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("ants per colony")
    axes.set_ylabel("time without / time with attributes")
    axes.set_title(f"Ratio of the mean times (RELEASE D3.5 Fig. 3 analogue)\n{shape}", fontsize=10)
    ratio.text(0.01, 0.01, NOISE_NOTE, fontsize=7, color="grey")
    ratio.tight_layout(rect=(0, 0.03, 1, 1))
    return [("attributes_times", times), ("attributes_ratio", ratio)]


def _attributes_shape(parameters: dict[str, Any]) -> str:
    """Describe the emulated cluster of an attributes run from its ``parameters``.

    Parameters
    ----------
    parameters : dict
        The ``parameters`` of ``summary.json``; runs written before the per-scheduler
        emulation have ``big_cores`` and ``small_cores`` only.

    Returns
    -------
    str
        One line for a figure title.
    """
    colonies = parameters.get("colonies", "?")
    if "cpu_per_scheduler" in parameters:
        return (
            f"{parameters.get('big_vms', '?')} big VMs x {parameters.get('big_schedulers', '?')} cores, "
            f"{parameters.get('small_vms', '?')} small x {parameters.get('small_schedulers', 1)}, "
            f"each core {parameters['cpu_per_scheduler']} CPU; {colonies} colonies"
        )
    return (
        f"{parameters.get('nodes', '?')} VMs: big {parameters.get('big_cores', '?')} cores, "
        f"small {parameters.get('small_cores', '?')} cores (VM-wide quotas); {colonies} colonies"
    )


def _distances_figures(summary: dict[str, Any]) -> list[tuple[str, Figure]]:
    results = summary["results"]
    figure = Figure(figsize=(7, 4.5))
    axes = figure.add_subplot()
    labels = [f"{r['placement']}\n({r['topology']})" for r in results]
    means = [r["mean_s"] for r in results]
    colours = ["tab:blue" if r["placement"] == "distance" else "tab:red" for r in results]
    axes.bar(range(len(results)), means, color=colours)
    for index, result in enumerate(results):
        axes.scatter([index] * len(result["runs_s"]), result["runs_s"], color="black", s=10, zorder=3)
    axes.set_xticks(range(len(results)), labels)
    axes.set_ylabel("ML-ACO main loop (s)")
    axes.set_title(
        f"Distance vs random placement: ratio {summary['ratio_spec']:.2f} (spec topology), "
        f"{summary['ratio_discovered']:.2f} (discovered)",
        fontsize=10,
    )
    figure.text(0.01, 0.01, NOISE_NOTE, fontsize=7, color="grey")
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    return [("distances_times", figure)]
