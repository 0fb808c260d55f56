"""Cross-checks of terrain's Erlang clustering against scipy and against terrain_analysis.topology.

The Erlang code runs from the compiled build (``_build/default/lib/*/ebin``, made by
``make build``; ``make test`` builds before it runs pytest) in one ``erl -noshell`` per
test, on inputs written to a temporary directory:

* ``terrain_linkage:linkage/2`` against ``scipy.cluster.hierarchy.linkage`` for complete,
  average and single linkage: the whole linkage matrix (merged clusters, heights, sizes)
  on random matrices, also with many equal distances;
* ``terrain_alpha:run/3`` against :func:`terrain_analysis.topology.alpha_tree`;
* ``terrain_discovery:discover/2`` (automatic α, outlier repair) against
  :func:`terrain_analysis.topology.discover` on synthetic hierarchies.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform

from terrain_analysis.topology import Cluster, Latency, alpha_tree, discover

ROOT = Path(__file__).resolve().parents[2]

# Runs every case of cases.json and writes the answers to out.json.
_ERLANG = r"""
{ok, Cases} = terrain_json:read_file("cases.json"),
Tree = fun T({point, P}) -> P;
           T({cluster, H, Cs}) -> #{height => H, children => [T(C) || C <- Cs]} end,
Matrix = fun(#{<<"n">> := N, <<"file">> := F}) -> {ok, B} = file:read_file(F), terrain_linkage:from_binary(N, B) end,
Out = [case C of
           #{<<"kind">> := <<"linkage">>, <<"method">> := Me} ->
               [[A, B, H, S] || {A, B, H, S} <- terrain_linkage:linkage(Matrix(C), binary_to_atom(Me))];
           #{<<"kind">> := <<"alpha">>, <<"method">> := Me, <<"alpha">> := Al} ->
               Tree(terrain_alpha:run(Matrix(C), binary_to_atom(Me), Al));
           #{<<"kind">> := <<"discover">>, <<"file">> := F, <<"linkage">> := Me} ->
               {ok, L} = terrain_discovery:read_latency(binary_to_list(F)),
               {ok, R} = terrain_discovery:discover(L, #{linkage => binary_to_atom(Me)}),
               {ok, Doc} = terrain_json:decode(terrain_discovery:render(R, json)),
               Doc
       end || C <- Cases],
ok = terrain_json:write_file("out.json", Out),
halt().
"""


def _ebin() -> list[str]:
    dirs = sorted(str(p) for p in ROOT.glob("_build/default/lib/*/ebin"))
    if not dirs or shutil.which("erl") is None:
        pytest.fail("terrain is not built: run 'make build' (or rebar3 compile) before these tests")
    return dirs


def _run_erlang(directory: Path, cases: list[dict[str, Any]]) -> list[Any]:
    (directory / "cases.json").write_text(json.dumps(cases))
    args = ["erl", "-noshell"]
    for ebin in _ebin():
        args += ["-pa", ebin]
    result = subprocess.run(args + ["-eval", _ERLANG], cwd=directory, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    answers: list[Any] = json.loads((directory / "out.json").read_text())
    return answers


def _write_condensed(directory: Path, name: str, distances: np.ndarray) -> dict[str, Any]:
    condensed = squareform(distances, checks=False)
    path = directory / name
    condensed.astype("<f8").tofile(path)
    return {"n": distances.shape[0], "file": str(path)}


def _random_matrices(rng: np.random.Generator) -> list[np.ndarray]:
    matrices = []
    for n in [2, 3, 5, 8, 13, 21, 40, 77, 150, 300]:
        y = rng.random(n * (n - 1) // 2)
        matrices.append(squareform(y))
        matrices.append(squareform(rng.lognormal(3.0, 1.5, n * (n - 1) // 2)))
    for n in [6, 17, 50]:  # many equal distances
        matrices.append(squareform(rng.integers(1, 5, n * (n - 1) // 2).astype(float)))
    return matrices


def test_linkage_equals_scipy(tmp_path):
    rng = np.random.default_rng(20261121)
    matrices = _random_matrices(rng)
    cases = []
    for k, d in enumerate(matrices):
        entry = _write_condensed(tmp_path, f"y{k}.bin", d)
        cases += [{"kind": "linkage", "method": m, **entry} for m in ("complete", "average", "single")]
    answers = _run_erlang(tmp_path, cases)
    checked = 0
    for case, answer in zip(cases, answers, strict=True):
        d = matrices[int(Path(case["file"]).stem[1:])]
        expected = linkage(squareform(d, checks=False), method=case["method"])
        got = np.array(answer, dtype=float).reshape(-1, 4)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got[:, 2], expected[:, 2], rtol=1e-12, atol=0)
        condensed = squareform(d, checks=False)
        if case["method"] != "single" or len(np.unique(condensed)) == condensed.size:
            # scipy's single linkage is a minimum spanning tree: with equal distances
            # it may pair different clusters at the same heights
            np.testing.assert_array_equal(got[:, [0, 1, 3]], expected[:, [0, 1, 3]])
        checked += 1
    assert checked == 3 * len(matrices)


def _canonical(tree: Any) -> Any:
    if isinstance(tree, int):
        return (tree,)
    if isinstance(tree, Cluster):
        kids = sorted(_canonical(c) for c in tree.children)
        return (round(tree.height, 9), tuple(kids))
    kids = sorted(_canonical(c) for c in tree["children"])
    return (round(tree["height"], 9), tuple(kids))


def test_alpha_tree_equals_erlang(tmp_path):
    rng = np.random.default_rng(7)
    cases, expected = [], []
    for k, n in enumerate([2, 4, 9, 16, 30, 60]):
        d = squareform(rng.lognormal(2.0, 0.6, n * (n - 1) // 2))
        entry = _write_condensed(tmp_path, f"a{k}.bin", d)
        for method in ("complete", "average", "single"):
            for alpha in (1.0, 1.3, 1.7, 2.5):
                cases.append({"kind": "alpha", "method": method, "alpha": alpha, **entry})
                expected.append(_canonical(alpha_tree(d, alpha, method)))
    answers = _run_erlang(tmp_path, cases)
    for case, answer, python in zip(cases, answers, expected, strict=True):
        assert _canonical(answer) == python, case


def _hierarchy(shape: list[int], heights: list[float], rng: np.random.Generator, inflate: float = 0.0):
    """A latency matrix with a known hierarchy: round trip = height of the lowest common group × jitter."""
    n = int(np.prod(shape))
    sizes = [int(np.prod(shape[k + 1 :])) for k in range(len(shape))]
    idx = np.arange(n)
    level = np.full((n, n), heights[-1], dtype=float)
    for size, height in reversed(list(zip(sizes, heights, strict=True))):
        apart = (idx[:, None] // size) != (idx[None, :] // size)
        level = np.where(apart, np.maximum(level, height), level)
    upper = np.triu(level * rng.lognormal(0.0, 0.1, (n, n)), 1)
    if inflate:
        upper = np.where(np.triu(rng.random((n, n)) < inflate, 1), upper * 5, upper)
    d = upper + upper.T
    names = [f"n{i:03d}@host" for i in range(n)]
    return Latency(nodes=names, stats={"median": d, "min": d}), d


def _indexed(entry: dict[str, Any], index: dict[str, int]) -> Any:
    """A terrain.topology/1 tree with node names replaced by matrix indices."""
    if "node" in entry:
        return index[entry["node"]]
    return {"height": entry["height"], "children": [_indexed(c, index) for c in entry["children"]]}


def test_discovery_equals_erlang_on_hierarchies(tmp_path):
    rng = np.random.default_rng(11)
    cases, expected = [], []
    for k, (shape, heights, inflate) in enumerate(
        [
            ([2, 2, 3], [8000.0, 1000.0, 60.0], 0.0),
            ([3, 4, 6], [8000.0, 1000.0, 100.0], 0.02),
            ([4, 10], [900.0, 100.0], 0.01),
        ]
    ):
        latency, d = _hierarchy(shape, heights, rng, inflate)
        path = tmp_path / f"latency{k}.json"
        rows = d.tolist()
        path.write_text(
            json.dumps(
                {
                    "format": "terrain.latency/1",
                    "nodes": latency.nodes,
                    "unit": "us",
                    "stats": {"median": rows, "min": rows},
                }
            )
        )
        for method in ("complete", "average"):
            cases.append({"kind": "discover", "file": str(path), "linkage": method})
            expected.append(discover(latency, linkage=method))
    answers = _run_erlang(tmp_path, cases)
    for case, answer, python in zip(cases, answers, expected, strict=True):
        index = {name: i for i, name in enumerate(python.nodes)}
        assert _canonical(_indexed(answer["tree"], index)) == _canonical(python.tree), case
        assert answer["discovery"]["outliers"]["repaired"] == python.repaired
        assert [lv["clusters"] for lv in answer["discovery"]["levels"]] == [lv.clusters for lv in python.levels]
