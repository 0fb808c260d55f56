"""Tests of the experiment figures (``terrain-analysis experiment``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from terrain_analysis.cli import main
from terrain_analysis.experiment_plots import read_summary, write_experiment_plots


def _attributes_run(directory: Path) -> Path:
    rows = ["ants,run,placement,seconds"]
    for ants, with_s, without_s in ((1, 0.5, 0.6), (4, 1.0, 2.0), (16, 2.0, 8.0)):
        for run in (1, 2):
            rows.append(f"{ants},{run},attributes,{with_s}")
            rows.append(f"{ants},{run},random,{without_s}")
    (directory / "attributes.csv").write_text("\n".join(rows) + "\n")
    ratios = [
        {"ants": a, "with_s": w, "without_s": wo, "ratio": wo / w}
        for a, w, wo in ((1, 0.5, 0.6), (4, 1.0, 2.0), (16, 2.0, 8.0))
    ]
    summary = {"format": "terrain.experiment/1", "experiment": "attributes", "ratios": ratios, "parameters": {}}
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def test_attributes_figures_are_written(tmp_path: Path) -> None:
    written = write_experiment_plots(_attributes_run(tmp_path))
    names = sorted(p.name for p in written)
    assert names == sorted(
        ["attributes_times.png", "attributes_times.svg", "attributes_ratio.png", "attributes_ratio.svg"]
    )
    assert all(p.stat().st_size > 1000 for p in written)


def test_distances_figure_is_written(tmp_path: Path) -> None:
    results = [
        {"topology": t, "placement": p, "mean_s": m, "runs_s": [m, m * 1.1]}
        for t, p, m in (("spec", "distance", 1.0), ("spec", "random", 2.0), ("discovered", "distance", 1.1),
                        ("discovered", "random", 2.1))
    ]
    summary = {"format": "terrain.experiment/1", "experiment": "distances", "results": results,
               "ratio_spec": 2.0, "ratio_discovered": 1.9}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "figures"
    written = write_experiment_plots(tmp_path, out)
    assert sorted(p.name for p in written) == ["distances_times.png", "distances_times.svg"]
    assert all(p.parent == out for p in written)


def test_a_partial_distances_run_is_drawn_with_its_missing_ratio_said(tmp_path: Path) -> None:
    # a node killed during the second case: one case kept, both ratios null
    results = [{"topology": "spec", "placement": "distance", "mean_s": 1.0, "runs_s": [1.0, 1.1]}]
    summary = {"format": "terrain.experiment/1", "experiment": "distances", "results": results,
               "ratio_spec": None, "ratio_discovered": None, "partial": True}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    written = write_experiment_plots(tmp_path, tmp_path / "figures")
    assert sorted(p.name for p in written) == ["distances_times.png", "distances_times.svg"]
    svg = (tmp_path / "figures" / "distances_times.svg").read_text()
    assert "n/a (spec topology)" in svg and "partial run" in svg


def test_wrong_format_is_an_error_that_names_it(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"format": "terrain.other/1"}))
    with pytest.raises(ValueError, match="terrain.other/1"):
        read_summary(tmp_path)


def test_cli_reports_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", str(tmp_path / "nope")]) == 1
    assert "nope" in capsys.readouterr().err


def test_cli_draws_an_attributes_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", str(_attributes_run(tmp_path))]) == 0
    assert "attributes_ratio.png" in capsys.readouterr().out


def test_attributes_shape_names_the_emulated_cores() -> None:
    from terrain_analysis.experiment_plots import _attributes_shape

    per_scheduler = {"big_vms": 4, "big_schedulers": 8, "small_vms": 3, "small_schedulers": 1,
                     "cpu_per_scheduler": 0.05, "colonies": 4}
    assert _attributes_shape(per_scheduler) == "4 big VMs x 8 cores, 3 small x 1, each core 0.05 CPU; 4 colonies"
    vm_wide = {"nodes": 12, "big_cores": 0.8, "small_cores": 0.05, "colonies": 8}
    assert _attributes_shape(vm_wide) == "12 VMs: big 0.8 cores, small 0.05 cores (VM-wide quotas); 8 colonies"


def test_attributes_figures_with_the_per_scheduler_parameters(tmp_path: Path) -> None:
    directory = _attributes_run(tmp_path)
    summary = json.loads((directory / "summary.json").read_text())
    summary["parameters"] = {"big_vms": 4, "big_schedulers": 8, "small_vms": 3, "cpu_per_scheduler": 0.05,
                             "colonies": 4}
    (directory / "summary.json").write_text(json.dumps(summary))
    written = write_experiment_plots(directory, tmp_path / "figures")
    assert sorted(p.name for p in written if p.suffix == ".png") == ["attributes_ratio.png", "attributes_times.png"]
