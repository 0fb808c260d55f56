"""Tests for terrain_analysis.emas and the ``terrain-analysis emas`` command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from terrain_analysis.cli import main
from terrain_analysis.emas import (
    CSV_COLUMNS,
    fitness_figure,
    read_run,
    read_scaling,
    throughput_figure,
    utilisation_figure,
    write_emas_plots,
)


def make_run(directory: Path, model: str = "hybrid", rate: float = 1000.0) -> Path:
    directory.mkdir(parents=True)
    lines = [",".join(CSV_COLUMNS)]
    for second in (1, 2, 3):
        for island in (1, 2):
            best = -1000.0 / second - island
            lines.append(f"{second},{island},10,20,5,0,{best}")
    lines.append("4,1,1,2,0,0,")
    (directory / "emas.csv").write_text("\n".join(lines) + "\n")
    summary = {
        "format": "terrain.emas/1",
        "model": model,
        "initial_best_fitness": -50000.0,
        "best_fitness": -334.3,
        "reproductions_per_s": rate,
        "utilisation": 0.9,
        "schedulers": 2,
        "duration_s": 3.2,
        "parameters": {"dimensions": 100},
    }
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def make_scaling(path: Path) -> Path:
    rows = [
        {
            "model": m,
            "schedulers": s,
            "reproductions_per_s": 1000.0 * min(s, 2) * k,
            "utilisation": 0.5 + 0.1 * k,
            "oversubscribed": s > 2,
        }
        for k, m in enumerate(["sequential", "hybrid", "concurrent", "skel"], start=1)
        for s in (1, 2, 4, 8)
    ]
    path.write_text(json.dumps({"format": "terrain.emas_scaling/1", "cores": 2, "idle_cpu_before": 0.5, "rows": rows}))
    return path


def test_read_run_gives_the_best_of_all_islands_per_second(tmp_path: Path) -> None:
    run = read_run(make_run(tmp_path / "r"))
    assert run.model == "hybrid"
    seconds, best = run.best_over_time()
    assert list(seconds) == [1, 2, 3, 4]
    # island 1 is the better one; the last second reports no value and keeps the best so far
    assert best[0] == pytest.approx(-1001.0)
    assert best[2] == pytest.approx(-1000.0 / 3 - 1)
    assert np.isnan(run.rows["best_fitness"][-1])
    assert best[3] == best[2]


def test_read_run_rejects_a_wrong_format(tmp_path: Path) -> None:
    directory = make_run(tmp_path / "r")
    (directory / "summary.json").write_text(json.dumps({"format": "terrain.emas/2", "model": "hybrid"}))
    with pytest.raises(ValueError, match="summary.json: format 'terrain.emas/2', expected 'terrain.emas/1'"):
        read_run(directory)


def test_read_run_rejects_a_wrong_header(tmp_path: Path) -> None:
    directory = make_run(tmp_path / "r")
    (directory / "emas.csv").write_text("second,island\n1,1\n")
    with pytest.raises(ValueError, match="header must be"):
        read_run(directory)


def test_read_scaling_needs_rows(tmp_path: Path) -> None:
    path = tmp_path / "scaling.json"
    path.write_text(json.dumps({"format": "terrain.emas_scaling/1", "rows": [{"model": "hybrid"}]}))
    with pytest.raises(ValueError, match="misses schedulers"):
        read_scaling(path)


def test_figures_have_a_line_or_bar_per_model(tmp_path: Path) -> None:
    runs = [read_run(make_run(tmp_path / m, m)) for m in ("sequential", "hybrid", "concurrent", "skel")]
    assert len(fitness_figure(runs).axes[0].get_lines()) == 4
    scaling = read_scaling(make_scaling(tmp_path / "scaling.json"))
    throughput = throughput_figure(runs, scaling)
    assert len(throughput.axes) == 2
    assert len(throughput.axes[0].patches) == 4
    assert len(throughput.axes[1].patches) == 16
    # the speed-up panel: 4 models and the ideal line
    assert len(utilisation_figure(scaling).axes[0].get_lines()) == 5


def test_write_emas_plots_writes_what_the_inputs_allow(tmp_path: Path) -> None:
    runs = [read_run(make_run(tmp_path / "a"))]
    written = write_emas_plots(tmp_path / "only-runs", runs)
    assert sorted(p.name for p in written) == [
        "emas_fitness.png",
        "emas_fitness.svg",
        "emas_throughput.png",
        "emas_throughput.svg",
    ]
    scaling = read_scaling(make_scaling(tmp_path / "scaling.json"))
    written = write_emas_plots(tmp_path / "only-scaling", [], scaling)
    assert sorted(p.name for p in written)[0:2] == ["emas_throughput.png", "emas_throughput.svg"]
    assert all(p.stat().st_size > 0 for p in written)


def test_command_prints_each_run_and_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "run", "skel", 2500.0)
    scaling = make_scaling(tmp_path / "scaling.json")
    assert main(["emas", str(run), "--scaling", str(scaling), "--out", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "skel: best fitness -334.30 after 3.2 s, 2,500 reproductions/s, utilisation 0.90" in out
    assert (tmp_path / "plots" / "emas_utilisation.png").exists()


def test_command_without_inputs_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emas", "--out", str(tmp_path / "plots")]) == 1
    assert "give at least one RUN_DIR or --scaling FILE" in capsys.readouterr().err


def test_a_partial_run_without_summary_is_named_with_what_a_sigterm_keeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "partial")
    (run / "summary.json").unlink()  # what terrain emas keeps on SIGTERM: emas.csv alone
    assert main(["emas", str(run), "--out", str(tmp_path / "plots")]) == 1
    error = capsys.readouterr().err
    assert f"cannot read '{run / 'summary.json'}'" in error
    assert "a run stopped by SIGTERM keeps only emas.csv" in error
