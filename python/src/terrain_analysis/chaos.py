"""A chaos run of ``terrain chaos``: its verdict (``checker.json``, ``terrain.checker/1``) and its history
(``history.jsonl``, ``terrain.chaos_history/1``) read into a timeline of faults, versions and convergence
times, and that timeline drawn."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as MplFigure

from terrain_analysis.formats import check_format, tag
from terrain_analysis.values import loads_json

__all__ = ["FAULT_OPS", "ChaosTimeline", "read_checker", "read_history", "plot_timeline"]

FAULT_OPS = ("kill", "stop", "partition", "slow", "join", "leave", "move")
"""The operations that inject a fault, in the order the timeline's rows show them."""

ENDS = {"cont": "stop", "heal": "partition", "restore": "slow"}
"""Operations that end a lasting fault, and the fault they end."""

MAX_HISTORY_BYTES = 512 * 1024 * 1024


@dataclass
class ChaosTimeline:
    """What the timeline figure shows, in seconds since the run's start.

    Attributes
    ----------
    faults : list of (float, str, str)
        Each fault injected: time, operation, node (or ``""``).
    spans : list of (float, float, str)
        Lasting faults: start, end and operation (``stop``, ``partition``, ``slow``).
    bursts : list of (float, float)
        Each burst's start and end.
    rounds : list of (float, int, int)
        Each observation round: time, the highest version seen and the number of distinct
        (version, tree) pairs among the nodes that answered.
    """

    faults: list[tuple[float, str, str]] = field(default_factory=list)
    spans: list[tuple[float, float, str]] = field(default_factory=list)
    bursts: list[tuple[float, float]] = field(default_factory=list)
    rounds: list[tuple[float, int, int]] = field(default_factory=list)


def read_checker(path: str | Path) -> dict[str, Any]:
    """Read ``checker.json`` and check its format and its fields.

    Raises
    ------
    ValueError
        If the file is not JSON, not ``terrain.checker/1``, or lacks ``faults``, ``violations`` or
        ``convergence_ms``.
    """
    path = Path(path)
    try:
        document = loads_json(path.read_text(), str(path))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    check_format(document, [tag("checker")], str(path))
    for key in ("faults", "violations", "convergence_ms", "seed"):
        if key not in document:
            raise ValueError(f"{path}: 'checker.json' lacks {key!r}")
    if not isinstance(document["violations"], list):
        raise ValueError(f"{path}: 'violations' must be a list, got {type(document['violations']).__name__}")
    return document


def read_history(path: str | Path) -> ChaosTimeline:
    """Read ``history.jsonl`` into a :class:`ChaosTimeline`.

    Raises
    ------
    ValueError
        If a line is not a JSON object, the header is not ``terrain.chaos_history/1``, or the file is
        larger than 512 MB.
    """
    path = Path(path)
    if path.stat().st_size > MAX_HISTORY_BYTES:
        raise ValueError(f"{path}: larger than {MAX_HISTORY_BYTES} bytes")
    timeline = ChaosTimeline()
    open_spans: dict[str, float] = {}
    burst_start: float | None = None
    with path.open() as lines:
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                line = loads_json(text, f"{path}:{number}")
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}: not JSON ({error})") from None
            if not isinstance(line, dict):
                raise ValueError(f"{path}, line {number}: not a JSON object")
            if number == 1:
                check_format(line, [tag("chaos_history")], str(path))
                continue
            burst_start = _add_line(timeline, line, open_spans, burst_start)
    return timeline


def _add_line(timeline: ChaosTimeline, line: dict[str, Any], spans: dict[str, float],
              burst_start: float | None) -> float | None:
    op = line.get("op")
    t = float(line.get("t", 0)) / 1000
    ok = line.get("result") == "ok"
    if op in FAULT_OPS and ok:
        timeline.faults.append((t, op, str(line.get("node") or "")))
        if op in ENDS.values():
            spans[f"{op}:{line.get('node') or ''}"] = t
    elif op in ENDS:
        key = f"{ENDS[op]}:{line.get('node') or ''}"
        if key in spans:
            timeline.spans.append((spans.pop(key), t, ENDS[op]))
    elif op == "burst_start":
        return t
    elif op == "burst_end" and burst_start is not None:
        timeline.bursts.append((burst_start, t))
        return None
    elif op == "observe" and isinstance(line.get("result"), dict) and line["result"]:
        pairs = {tuple(v) for v in line["result"].values() if isinstance(v, list) and len(v) == 2}
        versions = [v for v, _ in pairs if isinstance(v, int)]
        if versions:
            timeline.rounds.append((t, max(versions), len(pairs)))
    return burst_start


def plot_timeline(timeline: ChaosTimeline, checker: dict[str, Any]) -> MplFigure:
    """The run as three rows sharing the time axis: the faults (lasting ones as bars), the highest live
    version and the number of distinct (version, tree) pairs seen in each observation round, and each
    burst's convergence time against the limit (grace + 2 s), with the violations marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = MplFigure(figsize=(10.0, 6.4), layout="constrained")
    FigureCanvasAgg(figure)
    faults_ax, versions_ax, convergence_ax = figure.subplots(3, 1, sharex=True, height_ratios=[1.3, 1.0, 1.0])
    for ax in (faults_ax, versions_ax, convergence_ax):
        for start, end in timeline.bursts:
            ax.axvspan(start, max(end, start + 0.05), color="0.9", zorder=0)
    rows = {op: i for i, op in enumerate(FAULT_OPS)}
    colours = {"kill": "tab:red", "stop": "tab:orange", "partition": "tab:purple", "slow": "tab:brown",
               "join": "tab:green", "leave": "tab:grey", "move": "tab:blue"}
    for start, end, op in timeline.spans:
        faults_ax.plot([start, end], [rows[op], rows[op]], color=colours[op], linewidth=4, alpha=0.5)
    for op in FAULT_OPS:
        times = [t for t, o, _ in timeline.faults if o == op]
        faults_ax.plot(times, [rows[op]] * len(times), "|", markersize=12, markeredgewidth=2, color=colours[op])
    faults_ax.set_yticks(range(len(FAULT_OPS)), FAULT_OPS)
    faults_ax.set_ylim(-0.7, len(FAULT_OPS) - 0.3)
    faults_ax.invert_yaxis()
    faults_ax.set_title(f"Chaos run, seed {checker.get('seed')}: {checker.get('faults')} faults, "
                        f"{len(checker.get('violations', []))} violation(s)")
    _versions(versions_ax, timeline)
    _convergence(convergence_ax, checker)
    convergence_ax.set_xlabel("time since the start (s)")
    return figure


def _versions(ax: Any, timeline: ChaosTimeline) -> None:
    if not timeline.rounds:
        ax.text(0.5, 0.5, "no observation rounds", transform=ax.transAxes, ha="center")
        return
    times = [t for t, _, _ in timeline.rounds]
    ax.step(times, [v for _, v, _ in timeline.rounds], where="post", color="tab:blue", linewidth=1)
    ax.set_ylabel("live version", color="tab:blue")
    twin = ax.twinx()
    twin.step(times, [n for _, _, n in timeline.rounds], where="post", color="tab:red", linewidth=0.8)
    twin.set_ylabel("version/tree pairs", color="tab:red")
    twin.set_ylim(0, max(3, max(n for _, _, n in timeline.rounds) + 1))


def _convergence(ax: Any, checker: dict[str, Any]) -> None:
    limit = float(checker.get("grace_ms", 0)) + 2000
    bursts = checker.get("bursts", [])
    done = [(b["end"] / 1000, b["convergence_ms"]) for b in bursts if b.get("convergence_ms") is not None]
    if done:
        ax.plot([t for t, _ in done], [c for _, c in done], "o", markersize=3, color="tab:green",
                label="converged after the burst")
    missed = [b["end"] / 1000 for b in bursts if b.get("convergence_ms") is None]
    if missed:
        ax.plot(missed, [limit] * len(missed), "x", color="tab:red", markersize=7, label="not converged")
    ax.axhline(limit, color="grey", linestyle="--", linewidth=0.8, label="grace + 2 s")
    for violation in checker.get("violations", []):
        ax.axvline(float(violation.get("t", 0)) / 1000, color="tab:red", linewidth=0.5, alpha=0.5)
    ax.set_ylabel("convergence (ms)")
    ax.set_ylim(0, limit * 1.25)
    ax.legend(loc="upper left", frameon=False, fontsize="x-small", ncol=3)
