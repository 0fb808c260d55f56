"""Sections of run durations: ``durations`` (the runs and their summary) and ``gev_fit`` (``fit.json`` read with
:func:`terrain_analysis.fit_json.read_fit_json`, the diagnostics)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from terrain_analysis.durations import read_duration_table
from terrain_analysis.fit_json import read_fit_json
from terrain_analysis.report.model import (
    Block,
    Entry,
    Run,
    Section,
    Table,
    Text,
    figure_from_file,
    figure_from_matplotlib,
    new_figure,
    preferred_images,
    report_command,
)


def render_durations(entry: Entry, run: Run) -> Section:
    """``durations``: a durations CSV (``run, total_s, ..., status``) — the runs over time, a summary."""
    column = str(entry.parameters.get("column", "total_s"))
    table = read_duration_table(run.path(entry), column)
    values, failed = table.values, table.failed
    blocks: list[Block] = []
    described = ", ".join(f"{k} {v}" for k, v in entry.parameters.items() if k not in ("command",))
    if values.size:
        summary: list[list[Any]] = [
            ["runs ok / failed", f"{values.size} / {failed}"],
            ["min (ms)", 1000 * float(values.min())],
            ["median (ms)", 1000 * float(np.median(values))],
            ["95th percentile (ms)", 1000 * float(np.percentile(values, 95))],
            ["max (ms)", 1000 * float(values.max())],
        ]
        blocks.append(Table(["", "value"], summary, f"{entry.file}, column {column}: {described}."))
        figure, ax = new_figure(7.0, 3.2)
        ok_runs = table.runs
        ax.plot(ok_runs, 1000 * values, "o-", markersize=3, linewidth=0.8, color="tab:blue")
        ax.axhline(1000 * float(np.median(values)), color="grey", linestyle="--", linewidth=0.8, label="median")
        ax.set_xlabel("run")
        ax.set_ylabel(f"{column} (ms)")
        ax.set_title(f"Duration of each run ({values.size} runs)")
        ax.legend(loc="upper right", frameon=False, fontsize="small")
        blocks.append(
            figure_from_matplotlib(
                figure,
                title="Durations run by run",
                caption=(
                    f"The {column} of every successful run in the order they ran (ms); slow outliers are the upper "
                    "tail the GEV fit below describes."
                ),
                command=f"{report_command(run)} (from {entry.file}, made by {run.command(entry)})",
            )
        )
    else:
        blocks.append(Text(f"{entry.file}: no successful runs ({failed} failed)."))
    return Section("Durations", blocks)


def render_gev_fit(entry: Entry, run: Run) -> Section:
    """``gev_fit``: ``fit.json`` (``terrain.gev/1``) — estimates, tests, return levels, the diagnostics plots."""
    document = read_fit_json(run.path(entry))
    se = document.get("se") or {}
    interval = document.get("shape_interval") or {}
    test = document.get("gumbel_test") or {}
    estimates = [
        ["location μ (s)", document.get("location"), se.get("location")],
        ["scale σ (s)", document.get("scale"), se.get("scale")],
        ["shape ξ", document.get("shape"), se.get("shape")],
    ]
    source = document.get("source") or {}
    blocks: list[Block] = [
        Text(
            f"GEV fit of {document.get('n')} durations ({source.get('file', '?')}, "
            f"column {source.get('column', '?')}); "
            f"converged: {document.get('converged')}. Shape ξ > 0: Fréchet type (heavy upper tail), ξ < 0: Weibull "
            f"type (bounded); {_percent(interval.get('level'))} profile interval for ξ "
            f"[{_number(interval.get('lower'))}, {_number(interval.get('upper'))}]. Gumbel (ξ = 0) likelihood-ratio "
            f"test: statistic {_number(test.get('statistic'))}, p = {_number(test.get('p_value'))}."
        ),
        Table(["parameter", "estimate", "standard error"], estimates, "Maximum-likelihood estimates (Henwood et al.)."),
    ]
    models = document.get("models") or []
    if models:
        blocks.append(
            Table(
                ["model", "parameters", "nll", "AIC", "ΔAIC"],
                [
                    [m.get("name"), m.get("n_parameters"), m.get("nll"), m.get("aic"), m.get("delta_aic")]
                    for m in models
                ],
                "Models fitted to the same durations, lowest AIC first.",
            )
        )
    levels = document.get("return_levels") or []
    if levels:
        confidence = _percent(document.get("return_level_confidence"))
        blocks.append(
            Table(
                [
                    "period (runs)",
                    "return level (ms)",
                    "se (ms)",
                    f"{confidence} lower (ms)",
                    f"{confidence} upper (ms)",
                ],
                [
                    [lv.get("period")] + [_milli(lv.get(k)) for k in ("level", "se", "lower", "upper")]
                    for lv in levels
                ],
                "The duration exceeded by one run in T on average, with delta-method limits.",
            )
        )
    fit_directory = os.path.dirname(entry.file)
    command = run.command(entry)
    captions = {
        "gev_diagnostics": (
            "GEV diagnostics",
            "Probability plot (empirical against fitted probability), quantile plot (observed duration against the "
            "fitted quantile, s, with the pointwise band; red points lie outside it) and histogram with the fitted "
            "density — "
            "Henwood et al.'s Figure 2.",
        ),
        "gev_return_levels": (
            "Return levels",
            "Return level (s) against return period (runs, log scale) with delta-method limits and the observed "
            "durations at their plotting positions.",
        ),
    }
    plots = [str(p) for p in document.get("plots") or []]
    for file in preferred_images([os.path.join(fit_directory, p) for p in plots]):
        stem = os.path.splitext(os.path.basename(file))[0]
        title, caption = captions.get(stem, (stem, f"{os.path.basename(file)}, written with the fit."))
        blocks.append(figure_from_file(run, file, title=title, caption=caption, command=command))
    return Section("GEV fit of the durations", blocks)


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _percent(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "?"


def _milli(value: Any) -> float | None:
    return 1000 * value if isinstance(value, int | float) else None
