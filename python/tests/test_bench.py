"""Tests of terrain_analysis.bench and ``terrain-analysis bench``.

The interval logs are written by terrain's Erlang code (``terrain_bench_hdr``, from the compiled
build ``_build/default/lib/*/ebin``; ``make test`` builds before pytest) and read here with the
``hdrhistogram`` package's own log reader: the counts and percentiles HdrHistogram finds must equal
the ones the Erlang side computed and wrote to ``summary.json``.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from terrain_analysis.bench import (
    SWEEP_COLUMNS,
    merged_log_percentiles,
    read_interval_log,
    read_summary,
    read_sweep,
    sweep_figures,
    write_bench_plots,
)
from terrain_analysis.cli import main

ROOT = Path(__file__).resolve().parents[2]

# Writes one rpc.hlog per node from values.json (three intervals per node) and an empty
# errors.csv, then summary.json through terrain_bench:summarise/4, as a run does.
_ERLANG = r"""
{ok, #{<<"nodes">> := Nodes}} = terrain_json:read_file("values.json"),
Names = [binary_to_atom(N) || N <- maps:keys(Nodes)],
[begin
     Dir = atom_to_list(Name),
     ok = filelib:ensure_dir(filename:join(Dir, "x")),
     Intervals = maps:get(atom_to_binary(Name), Nodes),
     Lines = [terrain_bench_hdr:log_line("rpc", 1000 * I, 1000, terrain_bench_hdr:from_values(V))
              || {I, V} <- lists:zip(lists:seq(0, length(Intervals) - 1), Intervals)],
     ok = file:write_file(filename:join(Dir, "rpc.hlog"),
                          [terrain_bench_hdr:log_header("test", 1795470517589) | Lines]),
     ok = file:write_file(filename:join(Dir, "errors.csv"), "op,kind,count\nrpc,timeout,2\n")
 end || Name <- Names],
{ok, Config} = terrain_bench:validate_config([{duration, 3}, {operations, [{rpc, 1}]}]),
{ok, _} = terrain_bench:summarise(lists:sort(Names), Config, ".", #{}),
halt().
"""


def _ebin() -> list[str]:
    dirs = sorted(str(p) for p in ROOT.glob("_build/default/lib/*/ebin"))
    if not dirs or shutil.which("erl") is None:
        pytest.fail("terrain is not built: run 'make build' (or rebar3 compile) before these tests")
    return dirs


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[list[int]]]]:
    directory = tmp_path_factory.mktemp("bench")
    rng = np.random.default_rng(14)
    nodes = {
        # a fast node with many operations and a slow one with few: skewed, as in DE-Bench's weak point
        "fast@host": [rng.integers(50, 400, 3000).tolist() for _ in range(3)],
        "slow@host": [rng.lognormal(9.0, 1.2, 150).astype(int).tolist() for _ in range(3)],
    }
    (directory / "values.json").write_text(json.dumps({"nodes": nodes}))
    args = ["erl", "-noshell"]
    for ebin in _ebin():
        args += ["-pa", ebin]
    result = subprocess.run(args + ["-eval", _ERLANG], cwd=directory, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return directory, nodes


def test_hdrhistogram_reads_every_interval_erlang_wrote(run_dir):
    directory, nodes = run_dir
    for node, intervals in nodes.items():
        histograms = read_interval_log(directory / node / "rpc.hlog")
        assert [h.get_total_count() for h in histograms] == [len(v) for v in intervals]
        for histogram, values in zip(histograms, intervals, strict=True):
            exact = np.sort(values)
            rank = max(1, int(99 * len(exact) / 100 + 0.5))
            assert histogram.get_value_at_percentile(99) >= exact[rank - 1]
            assert histogram.get_value_at_percentile(99) <= exact[rank - 1] * 1.001 + 1
        # time stamps: StartTime of the header plus each line's offset, in ms
        assert histograms[1].get_start_time_stamp() - histograms[0].get_start_time_stamp() == pytest.approx(1000)


def test_merged_logs_give_summary_percentiles(run_dir):
    directory, _ = run_dir
    summary = read_summary(directory / "summary.json")
    rpc = summary["operations"]["rpc"]
    merged = merged_log_percentiles(sorted(directory.glob("*/rpc.hlog")))
    assert merged["count"] == rpc["count"] == 3 * 3000 + 3 * 150
    for key in ("p50", "p90", "p95", "p99", "p999"):
        assert merged[key] == rpc["latency_us"][key], key
    assert rpc["errors"] == {"timeout": 4}


def test_mean_of_node_percentiles_differs_from_merged(run_dir):
    directory, _ = run_dir
    rpc = read_summary(directory / "summary.json")["operations"]["rpc"]
    merged_p99 = rpc["latency_us"]["p99"]
    mean_p99 = rpc["per_node_percentile_mean"]["p99"]
    # the slow node has 5% of the operations: its percentiles drag the mean far above the cluster's
    assert mean_p99 > 2 * merged_p99
    assert rpc["per_node_percentile_mean"]["p50"] > 10 * rpc["latency_us"]["p50"]


def test_cli_bench_summary_prints_log_percentiles_and_draws(run_dir, tmp_path, capsys):
    directory, _ = run_dir
    assert main(["bench", str(directory / "summary.json"), "--out", str(tmp_path / "plots")]) == 0
    output = capsys.readouterr().out
    rpc = read_summary(directory / "summary.json")["operations"]["rpc"]
    line = next(line for line in output.splitlines() if line.startswith("rpc "))
    assert line.split()[1:4] == [str(rpc["count"]), str(rpc["latency_us"]["p50"]), str(rpc["latency_us"]["p99"])]
    assert (tmp_path / "plots" / "bench_summary.png").stat().st_size > 0


def _write_sweep(path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SWEEP_COLUMNS)
        for nodes in (2, 4, 8):
            for op, base in (("rpc", 100), ("global_register", 2000)):
                writer.writerow([nodes, 10, 10, op, 1000 * nodes, 0, 100.0 * nodes, base, base * 2, base * 3,
                                 base * 4 * nodes, base * 5 * nodes, base * 6 * nodes, base * 4.5 * nodes, 0])


def test_read_sweep_and_figures(tmp_path):
    path = tmp_path / "sweep.csv"
    _write_sweep(path)
    rows = read_sweep(path)
    assert len(rows) == 6
    assert rows[0].nodes == 2 and rows[0].op == "rpc" and rows[0].per_node_p99_mean == pytest.approx(900.0)
    figures = sweep_figures(rows)
    assert set(figures) == {"bench_throughput", "bench_latency"}
    assert len(figures["bench_latency"].axes) == 2
    cluster, per_node = figures["bench_throughput"].axes
    assert [line.get_label() for line in cluster.get_lines()] == ["global_register", "rpc"]
    (line,) = per_node.get_lines()
    # rpc and global_register each do 100 * nodes per second: 200 per node at every size
    assert list(line.get_xdata()) == [2, 4, 8]
    assert list(line.get_ydata()) == pytest.approx([200.0, 200.0, 200.0])
    written = write_bench_plots(path, tmp_path / "plots")
    assert sorted(p.name for p in written) == [
        "bench_latency.png",
        "bench_latency.svg",
        "bench_throughput.png",
        "bench_throughput.svg",
    ]


def test_bad_inputs_name_the_argument(tmp_path):
    bad = tmp_path / "sweep.csv"
    bad.write_text("nodes,op\n1,rpc\n")
    with pytest.raises(ValueError, match="'path'.*must start with the header"):
        read_sweep(bad)
    wrong = tmp_path / "summary.json"
    wrong.write_text(json.dumps({"format": "terrain.latency/1"}))
    with pytest.raises(ValueError, match="summary.json: format 'terrain.latency/1', expected 'terrain.bench/1'"):
        read_summary(wrong)
    with pytest.raises(ValueError, match="'rows' must not be empty"):
        sweep_figures([])
    assert main(["bench", str(tmp_path / "x.txt"), "--out", str(tmp_path / "o")]) == 1
