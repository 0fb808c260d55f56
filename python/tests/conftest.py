"""Shared fixtures for the terrain-analysis tests."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

DATA = Path(__file__).parent / "data"

# Deterministic property tests: the same examples on every run and machine, no deadline
# (CI machines are shared and slow; timing goals live in python/bench).
settings.register_profile("terrain", derandomize=True, deadline=None, max_examples=40)
settings.load_profile("terrain")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The directory of committed test data."""
    return DATA


@pytest.fixture(scope="session")
def fgev_reference() -> dict[str, Any]:
    """R evd::fgev estimates written by tests/data/fgev_reference.R."""
    return json.loads((DATA / "fgev_reference.json").read_text())


@pytest.fixture(scope="session")
def read_durations_file() -> Callable[[str], np.ndarray]:
    """Read the total_s column of a CSV file in tests/data without the package under test."""

    def read(name: str) -> np.ndarray:
        return np.loadtxt(DATA / name, delimiter=",", skiprows=1, usecols=1)

    return read


@pytest.fixture(scope="session")
def read_sample(read_durations_file) -> Callable[[str], np.ndarray]:
    """Read one of the samples fitted by tests/data/fgev_reference.R: gev_<name>.csv."""

    def read(name: str) -> np.ndarray:
        return read_durations_file(f"gev_{name}.csv")

    return read


# --------------------------------------------------------------------------------------------------
# A small run directory for the report's tests, generated with the package's own code


def _png(path: Path, title: str) -> None:
    """A small labelled PNG figure, as a tool would write one."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(3, 2))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.plot([1, 2, 4, 8], [1.0, 1.9, 3.7, 7.1])
    ax.set_title(title)
    ax.set_xlabel("nodes")
    ax.set_ylabel("throughput (ops/s)")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=50)


def make_run_directory(directory: Path) -> Path:
    """Write a run directory with one output of every registered kind (spec/formats.json), and one it does not know.

    The cluster, attributes, latency, topology, durations and GEV outputs follow the formats terrain
    writes today (the GEV fit and its plots are made by ``terrain-analysis gev`` itself); the bench,
    collective, events, EMAS and experiment outputs follow the formats of their issues.
    """
    from terrain_analysis.cli import main
    from terrain_analysis.topology import Latency, discover, topology_document

    directory.mkdir(parents=True, exist_ok=True)
    racks = {"a1": "s1/r1", "a2": "s1/r1", "b1": "s1/r2", "b2": "s1/r2", "c1": "s2/r3", "c2": "s2/r3"}
    names = list(racks)
    nodes = [f"t_{n}@host" for n in names]

    def write(name: str, document: Any) -> None:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=1))

    write(
        "cluster.json",
        {
            "format": "terrain.cluster/1",
            "cluster": "fixture",
            "spec": "examples/fixture.cluster",
            "startup_ms": 900,
            "levels": [
                {"level": "cluster", "latency_us": 20000, "jitter_us": None, "bandwidth_bytes_per_s": None},
                {"level": "s1/r1", "latency_us": 300, "jitter_us": 20, "bandwidth_bytes_per_s": None},
            ],
            "nodes": [
                {"name": n, "node": f"t_{n}@host", "group_path": racks[n].split("/"), "schedulers": 1 + k % 2}
                for k, n in enumerate(names)
            ],
        },
    )
    write(
        "attributes.json",
        {
            "format": "terrain.attributes/1",
            "names": ["vm_schedulers_online", "gpu", "vm_num_processors", "cpu_model_name"],
            "timeout_ms": 3000,
            "nodes": [
                {"node": node, "attributes": {"vm_schedulers_online": 2, "gpu": None, "vm_num_processors": 2,
                                              "cpu_model_name": "Test CPU"}}
                for node in nodes[:-1]
            ]
            + [{"node": nodes[-1], "error": "timeout"}],
        },
    )
    rng = np.random.default_rng(20261123)
    level = {0: 40.0, 1: 600.0, 2: 8000.0}
    n = len(names)
    matrix = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                pi, pj = racks[names[i]].split("/"), racks[names[j]].split("/")
                common = 2 if pi == pj else 1 if pi[0] == pj[0] else 0
                matrix[i, j] = {2: level[0], 1: level[1], 0: level[2]}[common] * (1 + 0.1 * rng.random())
    stats = {s: matrix.tolist() for s in ("min", "median", "mean", "p95")}
    stats["stddev"] = (0.1 * matrix).tolist()
    write(
        "latency.json",
        {"format": "terrain.latency/1", "nodes": nodes, "unit": "us", "strategy": "sequential", "batches": 3,
         "messages": 5, "warmup": 5, "payload_bytes": 0, "stats": stats, "duration_ms": 1200, "failed": []},
    )
    found = discover(Latency(nodes, {k: np.array(v) for k, v in stats.items()}))
    write("topology.json", topology_document(found))
    write(
        "topology_comparison.json",
        {"format": "terrain.topology_comparison/1", "found": "topology.json", "truth": "examples/fixture.cluster",
         "levels": [{"level": 1, "truth_clusters": 2, "found_clusters": 2, "ari": 1.0},
                    {"level": 2, "truth_clusters": 3, "found_clusters": 3, "ari": 1.0}],
         "clade_recall": 1.0, "clade_precision": 1.0, "truth_clades": 5, "found_clades": 5, "common_clades": 5,
         "nodes": n},
    )
    durations = 0.040 + 0.002 * rng.gumbel(size=60)
    rows = ["run,total_s,slowest_node,slowest_s,nodes,failed,status"]
    rows += [f"{k + 1},{d:.6f},{nodes[k % n]},{d:.6f},{n},0,ok" for k, d in enumerate(durations)]
    (directory / "durations.csv").write_text("\n".join(rows) + "\n")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["gev", str(directory / "durations.csv"), "--out", str(directory / "gev")]) == 0
    write(
        "bench/summary.json",
        {"format": "terrain.bench/1", "nodes": 4, "duration_s": 30,
         "operations": {
             "rpc": {"count": 12000, "errors": 3, "throughput": 400.0,
                     "latency_us": {"p50": 210, "p90": 480, "p95": 610, "p99": 1900, "p999": 5100, "max": 9000},
                     "per_node_percentile_mean": {"p99": 1200}},
             "spawn": {"count": 8000, "errors": 0, "throughput": 266.7}},
         "failed_nodes": []},
    )
    (directory / "bench" / "sweep.csv").write_text(
        "nodes,argument_size,compute_us,op,count,errors,throughput,p50,p90,p95,p99,p999,max,per_node_p99_mean,"
        "failed_instances\n"
        "2,64,0,rpc,12000,0,400.0,210,480,610,1900,5100,9000,1200.0,0\n"
        "4,64,0,rpc,21000,2,700.0,230,520,680,2400,6000,9900,1500.0,0\n"
    )
    _png(directory / "bench" / "throughput.png", "Throughput vs nodes")
    write(
        "collective/collective.json",
        {"format": "terrain.collective/1", "spec": "examples/paths.cluster",
         "results": [{"algorithm": "hierarchical", "size_bytes": 8, "rank_order": "random", "median_us": 45000,
                      "p95_us": 47000, "lower_bound_us": 44800},
                     {"algorithm": "binomial", "size_bytes": 8, "rank_order": "random", "median_us": 120000,
                      "p95_us": 140000}]},
    )
    write(
        "events/trace.json",
        {"traceEvents": [{"name": "compute", "ph": "X", "ts": 1000 * k, "dur": 800, "pid": 1, "tid": k % 4,
                          "args": {"step": k // 4}} for k in range(16)]},
    )
    _png(directory / "events" / "timeline.png", "Per-worker timeline")
    write(
        "emas/summary.json",
        {"format": "terrain.emas/1", "model": "hybrid", "initial_best_fitness": -180000.5, "best_fitness": -950.25,
         "reproductions_per_s": 51000.0, "utilisation": 0.93},
    )
    (directory / "emas" / "emas.csv").write_text(
        "second,island,reproductions,fights,deaths,migrations,best_fitness\n1,1,5000,9000,40,1,-5000.5\n"
    )
    write(
        "experiment/summary.json",
        {"format": "terrain.experiment/1", "experiment": "attributes",
         "ratios": [{"ants": 1, "with_s": 1.0, "without_s": 1.1, "ratio": 1.1},
                    {"ants": 8, "with_s": 1.2, "without_s": 4.0, "ratio": 3.3}]},
    )
    (directory / "experiment" / "attributes.csv").write_text(
        "ants,run,placement,seconds\n1,1,attributes,1.0\n1,1,random,1.1\n8,1,attributes,1.2\n8,1,random,4.0\n"
    )
    (directory / "experiment" / "placement_attributes.dot").write_text("graph placement { a -- b; }\n")
    (directory / "experiment" / "discovered.term").write_text("{network, c, #{height => 1}, [{node, a@h}, {node, b@h}]}.\n")
    rows = ["source,target,min_us"] + [f"{a},{b},{matrix[i, j]:.1f}" for i, a in enumerate(nodes)
                                      for j, b in enumerate(nodes) if i != j]
    (directory / "latency.csv").write_text("\n".join(rows) + "\n")
    write("bench/points/1/summary.json", {"format": "terrain.bench/1", "nodes": 2, "operations": {}})
    (directory / "bench" / "nodes" / "t_a1@host").mkdir(parents=True)
    (directory / "bench" / "nodes" / "t_a1@host" / "rpc.hlog").write_text("#[StartTime: 0]\n")
    (directory / "hosts.txt").write_text("host-a\nhost-b\n")
    outputs = [
        {"kind": "cluster", "file": "cluster.json", "parameters": {"command": "terrain demo --spec fixture"}},
        {"kind": "attributes", "file": "attributes.json", "parameters": {}},
        {"kind": "latency", "file": "latency.json", "parameters": {"command": "terrain probe"}},
        {"kind": "topology", "file": "topology.json", "parameters": {}},
        {"kind": "topology_comparison", "file": "topology_comparison.json", "parameters": {}},
        {"kind": "durations", "file": "durations.csv", "parameters": {"runs": 60}},
        {"kind": "gev_fit", "file": "gev/fit.json", "parameters": {"command": "terrain-analysis gev durations.csv"}},
        {"kind": "bench", "file": "bench/summary.json", "parameters": {"figures": ["throughput.png"]}},
        {"kind": "bench", "file": "bench/sweep.csv", "parameters": {}},
        {"kind": "collective", "file": "collective/collective.json", "parameters": {}},
        {"kind": "events", "file": "events/trace.json", "parameters": {"figures": ["events/timeline.png"]}},
        {"kind": "emas", "file": "emas/summary.json", "parameters": {}},
        {"kind": "emas", "file": "emas/emas.csv", "parameters": {}},
        {"kind": "experiment", "file": "experiment/summary.json", "parameters": {}},
        {"kind": "summary", "file": "experiment/summary.json", "parameters": {}},
        {"kind": "attributes_times", "file": "experiment/attributes.csv", "parameters": {}},
        {"kind": "placement_dot", "file": "experiment/placement_attributes.dot", "parameters": {}},
        {"kind": "topology_term", "file": "experiment/discovered.term", "parameters": {}},
        {"kind": "latency_csv", "file": "latency.csv", "parameters": {}},
        {"kind": "bench_point", "file": "bench/points/1/summary.json", "parameters": {}},
        {"kind": "bench_node_files", "file": "bench/nodes/t_a1@host", "parameters": {}},
        {"kind": "hostlist", "file": "hosts.txt", "parameters": {}},
    ]
    write(
        "manifest.json",
        {"format": "terrain.manifest/1", "kind": "fixture", "created_at": "2026-11-23T21:00:00Z",
         "terrain_version": "0.1.0", "outputs": outputs},
    )
    return directory


@pytest.fixture(scope="session")
def run_directory(tmp_path_factory) -> Path:
    """A generated run directory with every kind the report knows and one it does not (shared: do not modify)."""
    return make_run_directory(tmp_path_factory.mktemp("run") / "20261123T210000Z")


@pytest.fixture()
def make_run() -> Callable[[Path], Path]:
    """Write a fresh run directory (as :func:`run_directory`) at a given path, for tests that change it."""
    return make_run_directory
