"""Tests for terrain_analysis.collective and the ``terrain-analysis collective`` command."""

from __future__ import annotations

import json

import pytest

from terrain_analysis.cli import main
from terrain_analysis.collective import FORMAT, PLOT_NAME, collective_figure, read_collective


def _document(results: list[dict]) -> dict:
    return {"format": FORMAT, "spec": "examples/paths.cluster", "nodes": 16, "members": 16, "results": results}


RESULTS = [
    {"algorithm": "binomial", "size_bytes": 8, "rank_order": "block", "median_us": 40000, "p95_us": 45000},
    {"algorithm": "binomial", "size_bytes": 65536, "rank_order": "block", "median_us": 60000, "p95_us": 70000},
    {"algorithm": "binomial", "size_bytes": 8, "rank_order": "random", "median_us": 120000, "p95_us": 130000},
    {"algorithm": "binomial", "size_bytes": 65536, "rank_order": "random", "median_us": 150000, "p95_us": 160000},
    {"algorithm": "hierarchical", "size_bytes": 8, "rank_order": "block", "median_us": 25000, "p95_us": 27000,
     "lower_bound_us": 22400},
    {"algorithm": "hierarchical", "size_bytes": 65536, "rank_order": "block", "median_us": 35000, "p95_us": 40000,
     "lower_bound_us": 22400},
]


def test_read_collective_keeps_every_result_and_the_bound(tmp_path):
    path = tmp_path / "collective.json"
    path.write_text(json.dumps(_document(RESULTS)))
    header, results = read_collective(path)
    assert header["nodes"] == 16 and "results" not in header
    assert len(results) == 6
    assert [r.lower_bound_us for r in results if r.algorithm == "hierarchical"] == [22400.0, 22400.0]
    assert all(r.lower_bound_us is None for r in results if r.algorithm == "binomial")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"format": "terrain.latency/1", "results": RESULTS}, "format 'terrain.latency/1', expected"),
        (_document([]), "'results' must be a non-empty list"),
        (_document([{"algorithm": "flat"}]), "'results[0]' is not a result"),
        (_document([dict(RESULTS[0], size_bytes=0)]), "'results[0]' needs a positive size"),
    ],
)
def test_read_collective_names_what_is_wrong(tmp_path, document, message):
    path = tmp_path / "collective.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_collective(path)


def test_figure_is_log_log_with_one_line_per_algorithm_and_order_and_the_bound(tmp_path):
    path = tmp_path / "collective.json"
    path.write_text(json.dumps(_document(RESULTS)))
    _, results = read_collective(path)
    axes = collective_figure(results).axes[0]
    assert axes.get_xscale() == "log" and axes.get_yscale() == "log"
    labels = sorted(line.get_label() for line in axes.get_lines())
    assert labels == ["binomial (block)", "binomial (random)", "hierarchical (block)", "hierarchical lower bound"]
    bound = next(line for line in axes.get_lines() if line.get_label() == "hierarchical lower bound")
    assert list(bound.get_ydata()) == [22.4, 22.4]  # milliseconds


def test_command_writes_png_and_svg(tmp_path, capsys):
    path = tmp_path / "collective.json"
    path.write_text(json.dumps(_document(RESULTS)))
    assert main(["collective", str(path), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / f"{PLOT_NAME}.png").stat().st_size > 0
    assert (tmp_path / "plots" / f"{PLOT_NAME}.svg").stat().st_size > 0
    assert f"{PLOT_NAME}.png" in capsys.readouterr().out


def test_command_rejects_another_format(tmp_path, capsys):
    path = tmp_path / "latency.json"
    path.write_text(json.dumps({"format": "terrain.latency/1"}))
    assert main(["collective", str(path), "--out", str(tmp_path)]) == 1
    assert f"{path}: format 'terrain.latency/1', expected 'terrain.collective/1'" in capsys.readouterr().err
