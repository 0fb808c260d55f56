"""Tests for terrain_analysis.values and every reader's rule for NaN, infinite and negative values
(docs/CLI.md, "terrain-analysis: the numbers it reads"): tables of measurements are rejected naming the
file and the row; events.jsonl skips the event with a warning naming the line."""

from __future__ import annotations

import csv
import json
import math

import pytest

from terrain_analysis.bench import SWEEP_COLUMNS, read_sweep
from terrain_analysis.cli import main
from terrain_analysis.collective import read_collective
from terrain_analysis.durations import read_durations
from terrain_analysis.events import read_events
from terrain_analysis.experiment_plots import read_attribute_times
from terrain_analysis.report import build_report
from terrain_analysis.values import DataWarning, NonFiniteError, loads_json, measurement, non_finite_path


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_loads_json_rejects_what_json_cannot_hold_naming_the_path(literal):
    with pytest.raises(NonFiniteError, match=rf"f.json: a\[1\].b is {literal if literal[0] != '1' else 'inf'}"):
        loads_json(f'{{"a": [0, {{"b": {literal}}}]}}', "f.json")
    assert loads_json('{"a": [0, {"b": 1.5}]}', "f.json") == {"a": [0, {"b": 1.5}]}


def test_non_finite_path_and_measurement():
    assert non_finite_path({"x": [1.0, {"y": 2}]}) is None
    where, value = non_finite_path({"x": [1.0, {"y": math.inf}]})
    assert where == "x[1].y" and value == math.inf
    assert measurement(0.0, "f line 2", "seconds") == 0.0
    for bad in (-0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"f line 2: seconds is .*, expected a finite number >= 0"):
            measurement(bad, "f line 2", "seconds")


# durations.csv: rejected


@pytest.mark.parametrize("value", ["nan", "-0.5", "inf"])
def test_durations_csv_rejects_nan_infinite_and_negative_naming_the_line(tmp_path, value, capsys):
    path = tmp_path / "durations.csv"
    path.write_text(f"run,total_s,status\n1,0.5,ok\n2,{value},ok\n3,0.6,ok\n")
    with pytest.raises(ValueError, match=rf"line 3 of .*durations.csv' holds '{value}' in column 'total_s'"):
        read_durations(path)
    assert main(["gev", str(path), "--out", str(tmp_path / "gev")]) == 1
    assert f"line 3 of {str(path)!r} holds {value!r} in column 'total_s', not a finite number >= 0" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "gev").exists()


# sweep.csv: rejected


def _sweep(path, **change):
    row = dict(zip(SWEEP_COLUMNS, [2, 64, 0, "rpc", 1000, 0, 400.0, 210, 480, 610, 1900, 5100, 9000, 1200.0, 0],
                   strict=True))
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SWEEP_COLUMNS)
        writer.writerow(row.values())
        writer.writerow({**row, **change}.values())
    return path


@pytest.mark.parametrize(("column", "value"), [("throughput", "nan"), ("p99", "-500"), ("per_node_p99_mean", "inf")])
def test_sweep_csv_rejects_nan_and_negative_naming_line_and_column(tmp_path, column, value, capsys):
    path = _sweep(tmp_path / "sweep.csv", **{column: value})
    with pytest.raises(ValueError, match=rf"sweep.csv:3: {column} is .*, expected a finite number >= 0"):
        read_sweep(path)
    assert main(["bench", str(path), "--out", str(tmp_path / "plots")]) == 1
    assert f"sweep.csv:3: {column} is" in capsys.readouterr().err


# collective.json: rejected


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("median_us", "NaN", r"results\[1\].median_us is NaN, expected a finite number"),
        ("p95_us", "-500", r"results\[1\]: p95_us is -500.0, expected a finite number >= 0"),
        ("lower_bound_us", "-Infinity", r"results\[1\].lower_bound_us is -Infinity"),
    ],
)
def test_collective_json_rejects_nan_and_negative_naming_the_result(tmp_path, field, text, message, capsys):
    good = {"algorithm": "binomial", "size_bytes": 8, "rank_order": "block", "median_us": 40000, "p95_us": 45000,
            "lower_bound_us": 100}
    document = {"format": "terrain.collective/1", "results": [good, {**good, field: "@"}]}
    path = tmp_path / "collective.json"
    path.write_text(json.dumps(document).replace('"@"', text))
    with pytest.raises(ValueError, match=message):
        read_collective(path)
    assert main(["collective", str(path), "--out", str(tmp_path / "plots")]) == 1
    assert "collective.json" in capsys.readouterr().err


# attributes.csv: rejected


@pytest.mark.parametrize("value", ["nan", "-1.5"])
def test_attributes_csv_rejects_nan_and_negative_naming_the_line(tmp_path, value):
    path = tmp_path / "attributes.csv"
    path.write_text(f"ants,run,placement,seconds\n1,1,attributes,0.5\n1,1,random,{value}\n")
    with pytest.raises(ValueError, match=r"attributes.csv line 3: seconds is .*, expected a finite number >= 0"):
        read_attribute_times(path)


# events.jsonl: the event is skipped with a warning naming the line


def test_events_jsonl_skips_nan_and_negative_events_with_a_warning(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    path = run / "events.jsonl"
    lines = [
        '{"format": "terrain.events/1", "nodes": ["a@h"], "workers": 1, "steps": 1, "offsets_us": {"a@h": -12}}',
        '{"time_us": 1000, "name": "windtunnel.compute", "measurements": {"duration_us": 400}, '
        '"metadata": {"worker": 0, "step": 1}}',
        '{"time_us": NaN, "name": "windtunnel.compute", "measurements": {"duration_us": 400}, "metadata": {}}',
        '{"time_us": 2000, "name": "windtunnel.compute", "measurements": {"duration_us": -500}, "metadata": {}}',
        '{"time_us": 3000, "name": "windtunnel.read", "measurements": {"duration_us": 100}, '
        '"metadata": {"worker": 0, "step": 1, "from": "above"}}',
    ]
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(DataWarning) as caught:
        header, events = read_events(path)
    assert header["offsets_us"] == {"a@h": -12}  # a clock offset may be negative
    assert [e["time_us"] for e in events] == [1000, 3000]
    messages = [str(w.message) for w in caught]
    assert messages == [
        f"{path} line 3: time_us is NaN, expected a finite number (JSON has no NaN or infinity); the event is skipped",
        f"{path} line 4: measurements.duration_us is -500.0, expected a finite number >= 0; the event is skipped",
    ]
    assert main(["events", str(run), "--highlight-step", "1", "--worker", "0"]) == 0
    captured = capsys.readouterr()
    assert f"terrain-analysis: warning: {path} line 3: time_us is NaN" in captured.err
    assert "2 events, 1 workers" in captured.out


# The report: never 'nan', never a negative minimum


def test_report_rejects_a_negative_duration_instead_of_showing_a_negative_min(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    path = run / "durations.csv"
    text = path.read_text().splitlines()
    cells = text[5].split(",")
    cells[1] = "-0.5"
    text[5] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    page, errors = build_report([run])
    assert errors == [f"{run}: line 6 of {str(path)!r} holds '-0.5' in column 'total_s', not a finite number >= 0"]
    section = page[page.index('id="kind-durations"') :]
    section = section[: section.index("</section>")]
    assert "Could not render this output: line 6 of" in section
    assert "min (ms)" not in section and "-500" not in section


def test_report_never_shows_nan(tmp_path, make_run):
    run = make_run(tmp_path / "run")
    (run / "emas" / "emas.csv").write_text(
        "second,island,reproductions,fights,deaths,migrations,best_fitness\n1,1,5000,9000,40,1,nan\n"
    )
    collective = run / "collective" / "collective.json"
    collective.write_text(collective.read_text().replace('"median_us": 45000', '"median_us": NaN'))
    page, errors = build_report([run])
    assert f"{run}: emas/emas.csv line 2: best_fitness is 'nan', expected a finite number" in errors
    assert any("collective/collective.json: results[0].median_us is NaN" in e for e in errors)
    assert ">nan<" not in page.lower()
