"""Benchmark: terrain's Erlang linkage beside scipy's on the same matrices, and the Python α pipeline.

Run from the repository root after ``make build``::

    .venv/bin/python python/bench/bench_topology.py

For n = 1,000 and n = 5,000 it draws a condensed matrix of uniform random distances
from ``np.random.default_rng(--seed)``, times ``scipy.cluster.hierarchy.linkage`` for
complete, average and single linkage, writes the matrix as little-endian doubles and
times ``terrain_linkage:linkage/2`` on exactly those bytes in one ``erl -noshell``
(timing inside the BEAM, so VM start-up is not counted), and checks that the merge
heights agree. Goals for terrain: n = 1,000 in ≤ 1 s, n = 5,000 in ≤ 30 s. Then it
times :func:`terrain_analysis.topology.discover` (outlier repair and automatic α) on
the synthetic 5 × 10 × 20 hierarchy with 1% of the pairs ×5.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy
from scipy.cluster.hierarchy import linkage

from terrain_analysis.topology import Latency, discover

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("complete", "average", "single")

_ERLANG = r"""
{ok, Cases} = terrain_json:read_file("cases.json"),
Out = [begin
           {ok, B} = file:read_file(F),
           M = terrain_linkage:from_binary(N, B),
           erlang:garbage_collect(),
           {Us, Z} = timer:tc(terrain_linkage, linkage, [M, binary_to_atom(Me)]),
           #{micros => Us, heights => [H || {_, _, H, _} <- Z]}
       end || #{<<"n">> := N, <<"file">> := F, <<"method">> := Me} <- Cases],
ok = terrain_json:write_file("out.json", Out),
halt().
"""


def _erlang(directory: Path, cases: list[dict[str, object]]) -> list[dict[str, object]]:
    ebin = sorted(str(p) for p in ROOT.glob("_build/default/lib/*/ebin"))
    if not ebin or shutil.which("erl") is None:
        sys.exit("terrain is not built: run 'make build' first")
    (directory / "cases.json").write_text(json.dumps(cases))
    args = ["erl", "-noshell"] + [arg for path in ebin for arg in ("-pa", path)] + ["-eval", _ERLANG]
    subprocess.run(args, cwd=directory, check=True, timeout=3600)
    result: list[dict[str, object]] = json.loads((directory / "out.json").read_text())
    return result


def _hierarchy(rng: np.random.Generator) -> Latency:
    n = 1000
    idx = np.arange(n)
    level = np.full((n, n), 100.0)
    level = np.where(idx[:, None] // 20 != idx[None, :] // 20, 1000.0, level)
    level = np.where(idx[:, None] // 200 != idx[None, :] // 200, 8000.0, level)
    upper = np.triu(level * rng.lognormal(0.0, 0.1, (n, n)), 1)
    upper = np.where(np.triu(rng.random((n, n)) < 0.01, 1), upper * 5, upper)
    d = upper + upper.T
    return Latency([f"n{i}" for i in range(n)], {"min": d})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,5000", help="matrix sizes (default 1000,5000)")
    parser.add_argument("--seed", type=int, default=2026, help="seed of np.random.default_rng")
    arguments = parser.parse_args(argv)
    sizes = [int(s) for s in arguments.sizes.split(",")]
    rng = np.random.default_rng(arguments.seed)
    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        cases, scipy_rows = [], []
        for n in sizes:
            y = rng.random(n * (n - 1) // 2)
            path = directory / f"y{n}.bin"
            y.astype("<f8").tofile(path)
            for method in METHODS:
                start = time.perf_counter()
                z = linkage(y, method=method)
                scipy_rows.append((n, method, time.perf_counter() - start, z[:, 2]))
                cases.append({"n": n, "file": str(path), "method": method})
        answers = _erlang(directory, cases)
    print(f"{'n':>6} {'method':<9} {'terrain (Erlang)':>17} {'scipy':>10}  heights equal")
    for (n, method, scipy_s, heights), answer in zip(scipy_rows, answers, strict=True):
        terrain_s = float(answer["micros"]) / 1e6  # type: ignore[arg-type]
        equal = np.allclose(np.asarray(answer["heights"]), heights, rtol=1e-12, atol=0)
        print(f"{n:>6} {method:<9} {terrain_s:>15.3f} s {scipy_s:>8.3f} s  {equal}")
    latency = _hierarchy(np.random.default_rng(arguments.seed))
    start = time.perf_counter()
    found = discover(latency)
    elapsed = time.perf_counter() - start
    print(
        f"terrain_analysis.topology.discover, 5 x 10 x 20 with 1% of pairs x5: {elapsed:.2f} s, "
        f"{found.repaired} round trips repaired, levels {[lv.clusters for lv in found.levels]}"
    )


if __name__ == "__main__":
    main()
