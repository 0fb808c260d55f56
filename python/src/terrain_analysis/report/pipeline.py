"""Sections of the SLURM pipeline (``examples/slurm/pipeline.sbatch``, RELEASE D3.5 §4.6; docs/TESTBED.md):
``slurm_topology`` (SLURM's switches), ``aco_placement`` (ML-ACO placed by distance against random) and
``pipeline`` (the batch job's steps and what each printed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from terrain_analysis.formats import KINDS
from terrain_analysis.report.model import (
    Block,
    Entry,
    Pre,
    Run,
    Section,
    Table,
    Text,
    figure_from_matplotlib,
    new_figure,
    read_json,
    report_command,
)
from terrain_analysis.report.topology import topology_leaves

_PIPELINE_LINES = 80  # lines of a step's output shown; the rest is in its file


def render_pipeline(entry: Entry, run: Run) -> Section:
    """``pipeline``: ``terrain.pipeline/1`` — the batch job's steps, their times and their outputs."""
    document = read_json(run, entry, KINDS["pipeline"].formats)
    steps = document.get("steps") or []
    blocks: list[Block] = [
        Table(
            ["", "value"],
            [
                ["SLURM job", document.get("job")],
                ["allocated nodes", document.get("nodelist")],
                ["probe strategy", document.get("strategy")],
                ["statistic", document.get("statistic")],
                ["payload (bytes)", document.get("payload_bytes")],
                ["wall time (s)", document.get("seconds")],
            ],
            f"The batch job; made by {run.command(entry)}.",
        ),
        Table(
            ["step", "started at (s)", "took (s)", "output"],
            [[s.get("title"), s.get("started_s"), s.get("seconds"), s.get("output")] for s in steps],
            "Every step of the job, in order, with its start (seconds after the job's start) and duration.",
        ),
    ]
    for step in steps:
        output = step.get("output")
        if not output:
            continue
        lines = run.path(str(output)).read_text(errors="replace").splitlines()
        shown = lines[:_PIPELINE_LINES]
        if len(lines) > len(shown):
            shown.append(f"... {len(lines) - len(shown)} more lines in {output}")
        blocks.append(Pre("\n".join(shown), f"{step.get('title')} ({output})"))
    return Section("Pipeline steps", blocks)


def render_slurm_topology(entry: Entry, run: Run) -> Section:
    """``slurm_topology``: ``terrain.topology/1`` of SLURM's switches (``terrain topology import slurm``)."""
    document = read_json(run, entry, KINDS["slurm_topology"].formats)
    clusters: list[list[Any]] = []

    def walk(node: Mapping[str, Any], depth: int) -> None:
        if "node" in node:
            return
        leaves = topology_leaves(node)
        clusters.append([node.get("name"), depth, len(leaves), " ".join(leaves)])
        for child in node.get("children") or []:
            walk(child, depth + 1)

    walk(document.get("tree") or {}, 0)
    return Section(
        "SLURM topology",
        [
            Table(
                ["switch", "depth", "hosts", "hosts below it"],
                clusters,
                f"SLURM's switches (topology.conf), from the top down; made by {run.command(entry)}.",
            )
        ],
    )


def _read_json_lines(run: Run, entry: Entry) -> list[dict[str, Any]]:
    path = run.path(entry)
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{entry.file}: line {number} is not JSON ({error})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{entry.file}: line {number} is not a JSON object")
        records.append(record)
    return records


def render_aco_placement(entry: Entry, run: Run) -> Section:
    """``aco_placement``: ``terrain aco --json`` lines — ML-ACO placed by distance against random."""
    records = _read_json_lines(run, entry)
    rows = [[r.get("placement"), r.get("seed"), r.get("main_s"), r.get("setup_s"), r.get("best_cost"),
             r.get("colonies"), r.get("nodes")] for r in records]
    by: dict[str, list[float]] = {}
    for r in records:
        if isinstance(r.get("main_s"), (int, float)):
            by.setdefault(str(r.get("placement")), []).append(float(r["main_s"]))
    means = {p: float(np.mean(v)) for p, v in by.items()}
    summary = [[p, len(by[p]), means[p], float(np.min(by[p])), float(np.max(by[p]))] for p in sorted(by)]
    blocks: list[Block] = [
        Table(
            ["placement", "runs", "mean main loop (s)", "fastest (s)", "slowest (s)"],
            summary,
            "Main-loop time of ML-ACO per placement of its colonies.",
        )
    ]
    if means.get("distance"):
        blocks.append(Text(f"random / distance: {means.get('random', float('nan')) / means['distance']:.2f} "
                           "(above 1: placing by distance on the discovered tree was faster)."))
    blocks.append(Table(["placement", "seed", "main loop (s)", "set-up (s)", "best cost", "colonies", "nodes"], rows,
                        f"Every run; made by {run.command(entry)}."))
    if by:
        figure, axes = new_figure(5.5, 2.6)
        names = sorted(by)
        for k, name in enumerate(names):
            values = by[name]
            axes.plot([k] * len(values), [v * 1000 for v in values], "o", alpha=0.7)
            axes.plot([k - 0.2, k + 0.2], [means[name] * 1000] * 2, "-", color="black")
        axes.set_xticks(range(len(names)), names)
        axes.set_xlim(-0.6, len(names) - 0.4)
        axes.set_ylabel("main loop (ms)")
        axes.set_title("ML-ACO main loop per run; bar: mean", fontsize=9)
        blocks.append(
            figure_from_matplotlib(
                figure,
                title="ML-ACO placed by distance against random",
                caption="Each dot one run (one seed); the bar is the mean of the placement's runs.",
                command=f"{report_command(run)} (runs made by {run.command(entry)})",
            )
        )
    return Section("ML-ACO: distance against random placement", blocks)
