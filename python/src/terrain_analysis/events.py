"""EventSpace views of a recorded wind tunnel (Bjørndalen et al., PATHS and EventSpace, §6).

``terrain events record`` writes ``events.jsonl`` (format ``terrain.events/1``): a
header line, then one event per line with its clock-corrected time ``time_us``, its
``name`` (``windtunnel.compute``, ``windtunnel.communicate``, ``windtunnel.read``, ...),
``measurements`` (``duration_us``) and ``metadata`` (``worker``, ``step``, ``from``).
A span event is recorded when it ends: it started ``duration_us`` before ``time_us``.

* :func:`timeline_figure` — one horizontal bar per worker, communication dark and
  computation light, one step highlighted to show the wavefront (the seed's Fig. 3).
* :func:`reads_figure` — one worker's read times from the worker above (solid) and
  below (dotted) over the steps (the seed's Fig. 4).

:func:`write_event_views` saves both as PNG and SVG. Figures are built on the Agg
canvas, never through ``pyplot``.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from terrain_analysis.formats import check_format, tag
from terrain_analysis.output import save_figure
from terrain_analysis.values import DataWarning, NonFiniteError, loads_json, measurement

__all__ = [
    "EVENTS_FORMAT",
    "FORMATS",
    "READS_NAME",
    "TIMELINE_NAME",
    "Spans",
    "read_events",
    "reads_figure",
    "spans",
    "timeline_figure",
    "write_event_views",
]

EVENTS_FORMAT = tag("events")
"""The format of the events file's header line."""

TIMELINE_NAME = "timeline"
"""File stem of the per-worker timeline (Fig. 3)."""

READS_NAME = "reads"
"""File stem of one worker's read times (Fig. 4)."""

FORMATS = ("png", "svg")
"""Formats :func:`write_event_views` writes."""

_COMMUNICATE = "windtunnel.communicate"
_COMPUTE = "windtunnel.compute"
_READ = "windtunnel.read"


def read_events(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read an events file.

    Parameters
    ----------
    path : str or path-like
        ``events.jsonl`` written by ``terrain events record``.

    Returns
    -------
    header : dict
    events : list of dict

    Raises
    ------
    ValueError
        If the first line is not a ``terrain.events/1`` header (or holds a NaN or an
        infinity), or a line is not JSON or not an event.

    Warns
    -----
    DataWarning
        For each event skipped because it holds a NaN or an infinity, or a negative or
        non-numeric ``time_us`` or ``measurements.duration_us``; the message names the
        file and the line. The other events are kept.
    """
    with open(path, encoding="utf-8") as stream:
        lines = [(number, line) for number, line in enumerate(stream, start=1) if line.strip()]
    if not lines:
        raise ValueError(f"'path' {str(path)!r} is empty, expected a {EVENTS_FORMAT} file")
    header = check_format(_parse_line(path, *lines[0]), EVENTS_FORMAT, f"{path} line {lines[0][0]}")
    events = []
    for number, line in lines[1:]:
        try:
            event = _parse_line(path, number, line)
        except NonFiniteError as error:
            warnings.warn(f"{error}; the event is skipped", DataWarning, stacklevel=2)
            continue
        if not isinstance(event, dict) or "time_us" not in event or "name" not in event:
            raise ValueError(f"'path' {str(path)!r} line {number} is not an event: {line[:80]!r}")
        measurements = event.get("measurements")
        duration = measurements.get("duration_us") if isinstance(measurements, dict) else None
        try:
            _time(event["time_us"], f"{path} line {number}", "time_us")
            if duration is not None:
                _time(duration, f"{path} line {number}", "measurements.duration_us")
        except ValueError as error:
            warnings.warn(f"{error}; the event is skipped", DataWarning, stacklevel=2)
            continue
        events.append(event)
    return header, events


def _parse_line(path: str | os.PathLike[str], number: int, line: str) -> Any:
    try:
        return loads_json(line, f"{path} line {number}")
    except json.JSONDecodeError as error:
        raise ValueError(f"'path' {str(path)!r} line {number} is not JSON: {error.msg}") from None


def _time(value: Any, where: str, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: {name} is {value!r}, expected a finite number >= 0")
    measurement(float(value), where, name)


@dataclass(frozen=True)
class Spans:
    """The spans of one kind of wind-tunnel event, as arrays of equal length.

    Attributes
    ----------
    worker, step : ndarray of int
    start_s, duration_s : ndarray of float
        Start relative to the first event of the run, and duration, in seconds.
    source : ndarray of str
        ``from`` of read events (``above`` or ``below``), else empty strings.
    """

    worker: np.ndarray
    step: np.ndarray
    start_s: np.ndarray
    duration_s: np.ndarray
    source: np.ndarray


def spans(events: list[dict[str, Any]], name: str, origin_us: float | None = None) -> Spans:
    """The span events named ``name`` (with ``duration_us``, ``worker`` and ``step``).

    Parameters
    ----------
    events : list of dict
    name : str
        E.g. ``"windtunnel.compute"``.
    origin_us : float, optional
        Time zero; default the start of the earliest span of any name.

    Returns
    -------
    Spans
    """
    if origin_us is None:
        origin_us = _origin(events)
    rows = [
        (
            e["metadata"]["worker"],
            e["metadata"]["step"],
            e["time_us"] - e["measurements"]["duration_us"] - origin_us,
            e["measurements"]["duration_us"],
            str(e["metadata"].get("from", "")),
        )
        for e in events
        if e["name"] == name and "duration_us" in e.get("measurements", {}) and "worker" in e.get("metadata", {})
    ]
    if not rows:
        empty = np.zeros(0)
        return Spans(empty.astype(int), empty.astype(int), empty, empty, np.zeros(0, dtype=str))
    worker, step, start, duration, source = zip(*rows, strict=True)
    return Spans(
        np.asarray(worker, dtype=int),
        np.asarray(step, dtype=int),
        np.asarray(start, dtype=float) / 1e6,
        np.asarray(duration, dtype=float) / 1e6,
        np.asarray(source, dtype=str),
    )


def _origin(events: list[dict[str, Any]]) -> float:
    starts = [e["time_us"] - e.get("measurements", {}).get("duration_us", 0) for e in events]
    return float(min(starts)) if starts else 0.0


def timeline_figure(events: list[dict[str, Any]], highlight_step: int | None = None) -> Figure:
    """One bar per worker over time: communication dark, computation light (Fig. 3).

    Parameters
    ----------
    events : list of dict
    highlight_step : int, optional
        The step whose communication and computation are drawn in colour, so that the
        wavefront shows as the highlighted slices shift from worker to worker.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If there are no wind-tunnel span events.
    """
    origin = _origin(events)
    communicate = spans(events, _COMMUNICATE, origin)
    compute = spans(events, _COMPUTE, origin)
    if communicate.worker.size == 0 and compute.worker.size == 0:
        raise ValueError("'events' has no windtunnel.communicate or windtunnel.compute events")
    workers = sorted(set(communicate.worker.tolist()) | set(compute.worker.tolist()))
    figure = Figure(figsize=(11, max(3.0, 0.32 * len(workers) + 1.6)))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    for kind, colour in ((compute, "#d0d0d0"), (communicate, "#202020")):
        for w in workers:
            mask = kind.worker == w
            ax.broken_barh(
                list(zip(kind.start_s[mask], kind.duration_s[mask], strict=True)),
                (w - 0.4, 0.8),
                facecolors=colour,
                linewidth=0,
            )
    handles = [Patch(color="#202020", label="communication"), Patch(color="#d0d0d0", label="computation")]
    if highlight_step is not None:
        for kind, colour, label in ((compute, "#ff8c1a", "computation"), (communicate, "#c0142c", "communication")):
            mask = kind.step == highlight_step
            for w in workers:
                m = mask & (kind.worker == w)
                ax.broken_barh(
                    list(zip(kind.start_s[m], kind.duration_s[m], strict=True)),
                    (w - 0.45, 0.9),
                    facecolors=colour,
                    edgecolors=colour,
                    linewidth=1.2,  # a step can be narrower than a pixel: keep it visible
                )
            handles.append(Patch(color=colour, label=f"step {highlight_step} {label}"))
    ax.set_yticks(workers)
    ax.set_ylim(min(workers) - 0.6, max(workers) + 0.6)
    ax.set_xlabel("elapsed time (s, clocks corrected to the recording node)")
    ax.set_ylabel("worker")
    ax.set_title("Wind tunnel: communication and computation per worker")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(handles), frameon=False)
    figure.tight_layout()
    return figure


def reads_figure(events: list[dict[str, Any]], worker: int) -> Figure:
    """One worker's read times over the steps: from the worker above (solid), below (dotted) (Fig. 4).

    Parameters
    ----------
    events : list of dict
    worker : int
        The worker to draw.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``worker`` has no read events.
    """
    reads = spans(events, _READ)
    mask = reads.worker == worker
    if not mask.any():
        known = sorted(set(reads.worker.tolist()))
        raise ValueError(f"'worker' {worker} has no windtunnel.read events (workers with reads: {known})")
    figure = Figure(figsize=(9, 4.2))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    for source, style in (("above", "-"), ("below", ":")):
        m = mask & (reads.source == source)
        order = np.argsort(reads.step[m])
        if m.any():
            ax.plot(
                reads.step[m][order],
                reads.duration_s[m][order] * 1e3,
                linestyle=style,
                color="black",
                linewidth=1.0,
                label=f"from the worker {source}",
            )
    ax.set_xlabel("step")
    ax.set_ylabel("read time (ms)")
    ax.set_title(f"Read times of worker {worker}")
    ax.legend(frameon=False)
    figure.tight_layout()
    return figure


def write_event_views(
    events: list[dict[str, Any]],
    directory: str | os.PathLike[str],
    highlight_step: int | None,
    worker: int,
) -> list[Path]:
    """Save the timeline and the reads view as PNG and SVG.

    Parameters
    ----------
    events : list of dict
    directory : str or path-like
        An existing directory.
    highlight_step : int or None
    worker : int
        The worker of the reads view.

    Returns
    -------
    list of Path
        ``timeline.png``, ``timeline.svg``, ``reads.png``, ``reads.svg``.
    """
    directory = Path(directory)
    written = []
    with matplotlib.rc_context({"svg.hashsalt": "terrain", "svg.fonttype": "none"}):
        for stem, figure in (
            (TIMELINE_NAME, timeline_figure(events, highlight_step)),
            (READS_NAME, reads_figure(events, worker)),
        ):
            for extension in FORMATS:
                path = directory / f"{stem}.{extension}"
                metadata = {"Date": None} if extension == "svg" else {}
                save_figure(figure, path, format=extension, dpi=130, metadata=metadata)
                written.append(path)
    return written
