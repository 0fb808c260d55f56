"""Tests for terrain_analysis.cli: the terrain-analysis command, in-process and as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from terrain_analysis import __version__
from terrain_analysis.cli import SUBCOMMANDS, main
from terrain_analysis.gev import fit_gev


@pytest.fixture
def durations_csv(tmp_path, read_sample):
    """A durations file shaped like terrain write-test's output, around the R Weibull-type sample."""
    path = tmp_path / "durations.csv"
    rows = ["run,open_s,write_s,close_s,total_s"]
    for run, total in enumerate(read_sample("weibull"), start=1):
        total = float(total)
        rows.append(f"{run},0.001,{total - 0.003!r},0.002,{total!r}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_gev_writes_fit_json_and_plots(tmp_path, durations_csv, capsys, fgev_reference):
    out = tmp_path / "gev"
    assert main(["gev", str(durations_csv), "--out", str(out)]) == 0
    document = json.loads((out / "fit.json").read_text())
    for key in ("format", "n", "location", "scale", "shape", "se", "nll"):
        assert key in document
    assert document["format"] == "terrain.gev/1"
    assert set(document["se"]) == {"location", "scale", "shape"}
    assert document["n"] == 250
    assert document["source"] == {"file": str(durations_csv), "column": "total_s"}
    assert document["shape"] == pytest.approx(fgev_reference["samples"]["weibull"]["estimate"]["shape"], rel=1e-4)
    for name in document["plots"]:
        assert (out / name).stat().st_size > 0
    assert len(document["plots"]) == 4
    stdout = capsys.readouterr().out
    assert "GEV fit of 250 durations" in stdout
    assert f"wrote {out / 'fit.json'}" in stdout


def test_gev_fits_the_column_asked_for(tmp_path, durations_csv, read_sample):
    out = tmp_path / "gev"
    assert main(["gev", str(durations_csv), "--column", "write_s", "--out", str(out)]) == 0
    document = json.loads((out / "fit.json").read_text())
    assert document["source"]["column"] == "write_s"
    assert document["location"] == fit_gev(read_sample("weibull") - 0.003).location


def test_gev_with_a_missing_column_fails_with_a_message(tmp_path, durations_csv, capsys):
    status = main(["gev", str(durations_csv), "--column", "wall_s", "--out", str(tmp_path / "gev")])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("terrain-analysis: error: 'column' must name a column of")
    assert "run, open_s, write_s, close_s, total_s" in err
    assert not (tmp_path / "gev" / "fit.json").exists()


def test_gev_with_an_unreadable_file_fails_with_a_message(tmp_path, capsys):
    status = main(["gev", str(tmp_path / "absent.csv"), "--out", str(tmp_path / "gev")])
    assert status == 1
    assert "terrain-analysis: error: cannot read" in capsys.readouterr().err


def test_gev_with_too_few_durations_names_file_and_column(tmp_path, capsys):
    path = tmp_path / "few.csv"
    path.write_text("run,total_s\n" + "".join(f"{i},{i * 0.1}\n" for i in range(1, 6)))
    assert main(["gev", str(path), "--out", str(tmp_path / "gev")]) == 1
    err = capsys.readouterr().err
    assert "column 'total_s': 'durations' must hold at least 10 values, got 5" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        ["gev", "x.csv", "--out", "d", "--bogus"],
        ["gev", "x.csv"],
        [],
        ["gev", "x.csv", "--out", "d", "--level", "2"],
    ],
    ids=["unknown-subcommand", "unknown-option", "missing-out", "no-subcommand", "bad-level"],
)
def test_bad_invocations_exit_2_with_a_message_on_stderr(argv, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "terrain-analysis" in captured.err and "error:" in captured.err
    assert captured.out == ""


def test_help_lists_every_subcommand(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for subcommand in SUBCOMMANDS:
        assert subcommand.name in out and subcommand.summary in out


def test_subcommand_help_describes_its_options(capsys):
    assert main(["gev", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--column" in out and "--out" in out and "fit.json" in out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"terrain-analysis {__version__}"


def test_console_script_is_declared_for_main():
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "terrain-analysis"]
    assert script.load() is main


def test_real_process_succeeds_and_fails_with_the_right_status(tmp_path, durations_csv):
    ok = subprocess.run(
        [sys.executable, "-m", "terrain_analysis", "gev", str(durations_csv), "--out", str(tmp_path / "gev")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "gev" / "fit.json").exists()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "terrain_analysis",
            "gev",
            str(durations_csv),
            "--column",
            "nope",
            "--out",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1
    assert "error: 'column' must name a column" in bad.stderr


def test_gev_on_a_sample_without_a_maximum_is_an_error_that_says_why(tmp_path, data_dir, capsys):
    out = tmp_path / "gev"
    assert main(["gev", str(data_dir / "bounded_small.csv"), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("terrain-analysis: error: ")
    assert "the GEV fit failed: it did not converge" in captured.err
    assert "keeps increasing towards shape = -1" in captured.err
    assert "its standard errors are not finite" in captured.err
    assert len(captured.err.splitlines()) == 1
    assert not out.exists()


def test_gev_on_a_nearly_constant_sample_is_an_error_without_numpy_warnings(tmp_path):
    # 12 x 0.5 and one 0.6: before, 104 numpy overflow warnings, a 1000-run return level of 2e11 s, exit 0
    source = tmp_path / "durations.csv"
    source.write_text("run,total_s\n" + "".join(f"{run},0.5\n" for run in range(1, 13)) + "13,0.6\n")
    out = tmp_path / "gev"
    done = subprocess.run(
        [sys.executable, "-m", "terrain_analysis", "gev", str(source), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"terrain-analysis: error: {source} column 'total_s': the GEV fit failed: ")
    assert "12 of 13 durations equal 0.5: the sample is nearly constant" in lines[0]
    assert "its standard errors are not finite" in lines[0]
    assert "encountered" not in done.stderr
    assert not out.exists()


def test_report_refuses_to_overwrite_an_input_of_the_run(run_directory, capsys):
    manifest = (run_directory / "manifest.json").read_text()
    for target in (run_directory / "manifest.json", run_directory / "latency.json"):
        assert main(["report", str(run_directory), "--out", str(target)]) == 1
        assert capsys.readouterr().err == (
            f"terrain-analysis: error: --out {target} is an input of the run {run_directory}: give another file\n"
        )
    assert (run_directory / "manifest.json").read_text() == manifest
