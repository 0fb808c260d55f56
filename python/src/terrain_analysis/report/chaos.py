"""The section of a chaos run (``checker``): the checker's verdict (``checker.json``) as tables, and the
timeline of faults, versions and convergence times drawn from the run's history (``history.jsonl``,
the manifest's ``chaos_history`` entry)."""

from __future__ import annotations

from typing import Any

from terrain_analysis.chaos import plot_timeline, read_checker, read_history
from terrain_analysis.report.model import (
    Block,
    Entry,
    Run,
    Section,
    Table,
    Text,
    figure_from_matplotlib,
    report_command,
)

VIOLATIONS_SHOWN = 40


def render_checker(entry: Entry, run: Run) -> Section:
    """``checker``: the verdict, the violations and the timeline of a chaos run."""
    checker = read_checker(run.path(entry))
    convergence = checker.get("convergence_ms") or {}
    summary: list[list[Any]] = [
        ["seed", checker.get("seed")],
        ["faults injected", checker.get("faults")],
        ["violations", len(checker["violations"])],
        ["convergence p50 (ms)", convergence.get("p50")],
        ["convergence p99 (ms)", convergence.get("p99")],
        ["convergence max (ms)", convergence.get("max")],
        ["bursts judged", convergence.get("samples")],
        ["crash reports", checker.get("crashes")],
        ["faults not injected", len(checker.get("fault_errors", []))],
        ["load average (mean at the bursts)", checker.get("load_average")],
    ]
    blocks: list[Block] = [
        Text(f"{entry.file} ({checker.get('format')}), made by {run.command(entry)}."),
        Table(["", "value"], summary, "The checker's verdict."),
    ]
    violations = checker["violations"]
    if violations:
        rows = [[v.get("t"), v.get("invariant"), v.get("op"), v.get("detail")] for v in violations[:VIOLATIONS_SHOWN]]
        more = f" (the first {VIOLATIONS_SHOWN} of {len(violations)})" if len(violations) > VIOLATIONS_SHOWN else ""
        blocks.append(Table(["t (ms)", "invariant", "after", "what"], rows, f"Violations{more}."))
    history = run.first("chaos_history")
    if history is None:
        blocks.append(Text("No history in the manifest (kind chaos_history): no timeline."))
    else:
        timeline = read_history(run.path(history))
        blocks.append(
            figure_from_matplotlib(
                plot_timeline(timeline, checker),
                title="Faults, versions and convergence",
                caption=(
                    "Top: each fault as it was injected (grey bands: the bursts; bars: a stopped VM, a partition, "
                    "a slow link from start to end). Middle: the highest live version the observer saw in each "
                    "round, and how many distinct (version, tree) pairs the nodes held (1 when they agree). "
                    "Bottom: how long after each burst's end all nodes held one version and the true tree, "
                    "against the limit of grace + 2 s; red lines mark violations."
                ),
                command=f"{report_command(run)} (from {entry.file} and {history.file}, made by {run.command(entry)})",
            )
        )
    return Section("Chaos run", blocks)
