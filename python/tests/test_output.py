"""Tests for terrain_analysis.output and the commands' output failures: a full disk (a 64 KiB tmpfs) and a
read-only directory (a read-only tmpfs) leave no temporary file, keep what was there, and the error names the
output file; a closed stdout ends the command with status 141 and no traceback."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from terrain_analysis.cli import CLOSED_STDOUT, main
from terrain_analysis.output import OutputError, make_directory, write_atomically


def _mount(directory: Path, options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.decode().strip()}")


@contextlib.contextmanager
def _mounted(directory: Path, options: str):
    _mount(directory, options)
    try:
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=True)


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs, nearly full: a 60 KiB file already there (unmounted after the test)."""
    with _mounted(tmp_path / f"full-{uuid.uuid4().hex[:6]}", "size=64k") as directory:
        (directory / "filler").write_bytes(b"x" * 48 * 1024)
        yield directory


@pytest.fixture
def read_only(tmp_path):
    """A read-only tmpfs holding one file, old.html (root ignores directory permissions; a mount does not)."""
    directory = tmp_path / f"ro-{uuid.uuid4().hex[:6]}"
    with _mounted(directory, "size=64k"):
        (directory / "old.html").write_text("the old page\n")
        subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
        yield directory


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.name.endswith(".tmp"))


def test_write_atomically_replaces_whole_files_and_keeps_no_temporary(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    write_atomically(path, "new")
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_atomically_on_a_full_disk_keeps_the_old_file_and_no_temporary(full_disk):
    path = full_disk / "page.html"
    path.write_text("the old page\n")
    with pytest.raises(OutputError) as raised:
        write_atomically(path, "x" * 100_000)
    assert raised.value.filename == str(path) and raised.value.strerror == "No space left on device"
    assert path.read_text() == "the old page\n"
    assert _leftovers(full_disk) == []


def test_write_atomically_in_a_read_only_directory_names_the_file(read_only):
    with pytest.raises(OutputError) as raised:
        write_atomically(read_only / "old.html", "new")
    assert raised.value.filename == str(read_only / "old.html")
    assert raised.value.strerror == "Read-only file system"
    assert (read_only / "old.html").read_text() == "the old page\n"
    with pytest.raises(OutputError, match="Read-only file system") as raised:
        make_directory(read_only / "plots")
    assert raised.value.filename == str(read_only / "plots")


def test_report_on_a_full_disk_names_the_output_not_the_run(run_directory, full_disk, capsys):
    out = full_disk / "r.html"
    assert main(["report", str(run_directory), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"terrain-analysis: error: cannot write {out}: No space left on device\n"
    assert _leftovers(full_disk) == [] and not out.exists()


def test_report_into_a_read_only_directory_names_the_output(run_directory, read_only, capsys):
    out = read_only / "old.html"
    assert main(["report", str(run_directory), "--out", str(out)]) == 1
    assert capsys.readouterr().err == f"terrain-analysis: error: cannot write {out}: Read-only file system\n"
    assert out.read_text() == "the old page\n"


@pytest.mark.parametrize("where", ["full_disk", "read_only"])
def test_gev_and_topology_outputs_fail_cleanly(where, request, run_directory, capsys):
    directory = request.getfixturevalue(where)
    for argv in (
        ["gev", str(run_directory / "durations.csv"), "--out", str(directory / "gev")],
        ["topology", str(run_directory / "latency.json"), "--out", str(directory / "topology")],
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"terrain-analysis: error: cannot write {directory}/"), err
        assert str(run_directory) not in err
        assert _leftovers(directory) == []


# --------------------------------------------------------------------------------------------------
# A closed stdout


def _command(run_directory: Path, out: Path) -> dict[str, list[str]]:
    events = out / "events"
    events.mkdir(parents=True, exist_ok=True)
    (events / "events.jsonl").write_text(
        '{"format": "terrain.events/1", "nodes": ["a@h"], "workers": 1, "steps": 1}\n'
        '{"time_us": 1000, "name": "windtunnel.compute", "measurements": {"duration_us": 400}, '
        '"metadata": {"worker": 0, "step": 1}}\n'
        '{"time_us": 1100, "name": "windtunnel.read", "measurements": {"duration_us": 50}, '
        '"metadata": {"worker": 0, "step": 1, "from": "above"}}\n'
    )
    experiment = out / "experiment"
    experiment.mkdir()
    (experiment / "summary.json").write_text(
        '{"format": "terrain.experiment/1", "experiment": "attributes", "parameters": {}, '
        '"ratios": [{"ants": 1, "with_s": 1.0, "without_s": 1.1, "ratio": 1.1}]}'
    )
    (experiment / "attributes.csv").write_text("ants,run,placement,seconds\n1,1,attributes,1.0\n1,1,random,1.1\n")
    return {
        "collective": ["collective", str(run_directory / "collective/collective.json"), "--out", str(out / "c")],
        "events": ["events", str(events)],
        "experiment": ["experiment", str(experiment)],
        "report": ["report", str(run_directory), "--out", str(out / "r.html")],
    }


@pytest.mark.parametrize("command", ["collective", "events", "experiment", "report"])
@pytest.mark.parametrize("closed", ["reader gone (| head -0)", "closed (>&-)", "full (>/dev/full)"])
def test_a_closed_stdout_exits_141_without_a_traceback(run_directory, tmp_path, command, closed):
    argv = [sys.executable, "-m", "terrain_analysis", *_command(run_directory, tmp_path)[command]]
    if closed.startswith("reader"):
        read, write = os.pipe()
        os.close(read)
        done = subprocess.run(argv, stdout=write, stderr=subprocess.PIPE, timeout=300)
        os.close(write)
    elif closed.startswith("closed"):
        done = subprocess.run(argv, stderr=subprocess.PIPE, timeout=300, preexec_fn=lambda: os.close(1))
    else:
        with open("/dev/full", "w") as full:
            done = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, timeout=300)
    assert done.returncode == CLOSED_STDOUT, done.stderr.decode()
    assert done.stderr == b""


def test_an_open_stdout_still_gets_the_results(run_directory, tmp_path):
    argv = [sys.executable, "-m", "terrain_analysis", *_command(run_directory, tmp_path)["collective"]]
    done = subprocess.run(argv, capture_output=True, timeout=300)
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout.decode().splitlines() == [
        str(tmp_path / "c" / "collective_time_vs_size.png"),
        str(tmp_path / "c" / "collective_time_vs_size.svg"),
    ]
