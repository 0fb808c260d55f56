"""The chaos run's files (``checker.json``, ``history.jsonl``): read, drawn, and rendered by the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from terrain_analysis.chaos import plot_timeline, read_checker, read_history
from terrain_analysis.report import build_report


def _history(path: Path) -> Path:
    lines = [
        {"format": "terrain.chaos_history/1", "seed": 4, "grace_ms": 2000},
        {"t": 5000, "op": "burst_start", "node": None, "result": "ok", "burst": 1},
        {"t": 5100, "op": "stop", "node": "n1@h", "result": "ok"},
        {"t": 5200, "op": "kill", "node": "n2@h", "result": "ok"},
        {"t": 5300, "op": "join", "node": None, "result": "network emulation failed"},
        {"t": 5900, "op": "cont", "node": "n1@h", "result": "ok"},
        {"t": 6000, "op": "burst_end", "node": None, "result": "ok", "burst": 1, "last_op": "cont n1"},
        {"t": 6200, "op": "observe", "node": None, "result": {"n1@h": [3, 11], "n3@h": [4, 12]}},
        {"t": 8300, "op": "observe", "node": None, "result": {"n1@h": [5, 13], "n3@h": [5, 13]}},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _checker(path: Path, violations: list[dict] | None = None) -> Path:
    document = {
        "format": "terrain.checker/1", "seed": 4, "faults": 2, "grace_ms": 2000,
        "violations": violations or [],
        "convergence_ms": {"p50": 2300, "p99": 2300, "max": 2300, "samples": 1},
        "bursts": [{"burst": 1, "end": 6000, "converged_at": 8300, "convergence_ms": 2300}],
        "fault_errors": [{"t": 5300, "op": "join", "node": None, "result": "network emulation failed"}],
        "crashes": 0, "load_average": 3.1,
    }
    path.write_text(json.dumps(document))
    return path


def test_history_becomes_faults_spans_bursts_and_rounds(tmp_path):
    timeline = read_history(_history(tmp_path / "history.jsonl"))
    assert [(t, op) for t, op, _ in timeline.faults] == [(5.1, "stop"), (5.2, "kill")]
    assert timeline.spans == [(5.1, 5.9, "stop")]
    assert timeline.bursts == [(5.0, 6.0)]
    assert timeline.rounds == [(6.2, 4, 2), (8.3, 5, 1)]


def test_a_checker_of_another_format_or_without_violations_is_refused(tmp_path):
    path = _checker(tmp_path / "checker.json")
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "format": "terrain.live/1"}))
    with pytest.raises(ValueError, match="terrain.checker/1"):
        read_checker(path)
    del document["violations"]
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="'violations'"):
        read_checker(path)


def test_a_history_line_that_is_not_json_is_named(tmp_path):
    path = _history(tmp_path / "history.jsonl")
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(ValueError, match="line 10"):
        read_history(path)


def test_the_timeline_has_three_rows_titled_with_the_verdict(tmp_path):
    checker = read_checker(_checker(tmp_path / "checker.json", [{"t": 8000, "invariant": "convergence"}]))
    figure = plot_timeline(read_history(_history(tmp_path / "history.jsonl")), checker)
    assert len(figure.axes) == 4  # faults, versions (and its twin), convergence
    assert figure.axes[0].get_title() == "Chaos run, seed 4: 2 faults, 1 violation(s)"


def test_the_report_renders_the_verdict_violations_and_timeline(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    _checker(run / "checker.json", [{"t": 8000, "invariant": "convergence", "op": "heal",
                                     "detail": "not converged 4000 ms after the end of burst 1"}])
    _history(run / "history.jsonl")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["outputs"] += [{"kind": "checker", "file": "checker.json", "parameters": {"command": "terrain chaos x"}},
                            {"kind": "chaos_history", "file": "history.jsonl", "parameters": {}}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    page, errors = build_report([run])
    assert errors == []
    assert 'id="kind-checker"' in page and "Chaos run" in page
    assert "not converged 4000 ms after the end of burst 1" in page
    assert "Faults, versions and convergence" in page
