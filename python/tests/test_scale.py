"""Tests of terrain_analysis.scale: reading scale.json, the growth exponent, the plot and the command."""

import json

import pytest

from terrain_analysis.cli import main
from terrain_analysis.scale import growth_exponent, read_scale, scale_figure


def _document(rows):
    return {"format": "terrain.scale/1", "sizes": sorted({r["nodes"] for r in rows}), "rows": rows,
            "machine_at_start": {"logical_processors": 2, "loadavg1": 1.0}}


def _rows():
    return ([{"nodes": n, "operation": "up", "seconds": 0.25 * n} for n in (16, 32, 64)]
            + [{"nodes": n, "operation": "probe", "seconds": 0.001 * n * n} for n in (16, 32, 64)])


def test_growth_exponent_recovers_a_power_law():
    assert growth_exponent([(n, 3.0 * n**1.5) for n in (16, 32, 64, 128)]) == pytest.approx(1.5)
    assert growth_exponent([(16, 1.0)]) is None


def test_read_scale_names_the_bad_field(tmp_path):
    path = tmp_path / "scale.json"
    path.write_text(json.dumps({"format": "terrain.latency/1"}))
    with pytest.raises(ValueError, match="scale.json: format 'terrain.latency/1', expected 'terrain.scale/1'"):
        read_scale(path)
    path.write_text(json.dumps(_document([{"nodes": 16, "operation": "up", "seconds": -2.0}])))
    with pytest.raises(ValueError, match=r"'rows'\[0\] seconds is -2.0, expected a finite number >= 0"):
        read_scale(path)
    path.write_text(json.dumps(_document([{"nodes": 16, "operation": "up"}])))
    with pytest.raises(ValueError, match=r"'rows'\[0\] must have 'nodes', 'operation' and 'seconds'"):
        read_scale(path)


def test_figure_has_a_line_and_a_fit_per_operation_with_its_exponent(tmp_path):
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(_document(_rows())))
    _, rows = read_scale(path)
    axes = scale_figure(rows, "t").axes[0]
    labels = [t.get_text() for t in axes.get_legend().get_texts()]
    assert labels == ["up (b = 1.00)", "probe (b = 2.00)"]
    assert len(axes.get_lines()) == 4


def test_command_writes_png_and_svg(tmp_path, capsys):
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(_document(_rows())))
    assert main(["scale", str(path), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "scale_time_vs_nodes.png").stat().st_size > 0
    assert "scale_time_vs_nodes.svg" in capsys.readouterr().out


def test_predicted_rows_are_drawn_hollow_and_left_out_of_the_fit(tmp_path):
    rows = _rows() + [{"nodes": 128, "operation": "probe", "seconds": 999.0, "predicted": True}]
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(_document(rows)))
    _, read = read_scale(path)
    assert [r.predicted for r in read if r.nodes == 128] == [True]
    axes = scale_figure(read, "t").axes[0]
    assert "probe (b = 2.00)" in [t.get_text() for t in axes.get_legend().get_texts()]
    assert any(line.get_fillstyle() == "none" for line in axes.get_lines())


def test_the_probe_strategy_is_read_and_named_in_the_legend(tmp_path):
    rows = ([{"nodes": n, "operation": "up", "seconds": 0.25 * n} for n in (16, 32, 64)]
            + [{"nodes": n, "operation": "probe", "seconds": 0.01 * n,
                "detail": {"strategy": "tree", "pairs": n * (n - 1), "pairs_measured": 3 * n}} for n in (16, 32, 64)])
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(_document(rows)))
    _, read = read_scale(path)
    assert {r.strategy for r in read if r.operation == "probe"} == {"tree"}
    assert {r.strategy for r in read if r.operation == "up"} == {None}
    labels = [t.get_text() for t in scale_figure(read, "t").axes[0].get_legend().get_texts()]
    assert labels == ["up (b = 1.00)", "probe, tree (b = 1.00)"]
