"""Tests for terrain_analysis.topology and topology_plots: latency.json, the α algorithm,
automatic α, outlier repair, the plots and the ``terrain-analysis topology`` command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.spatial.distance import squareform

from terrain_analysis.cli import main
from terrain_analysis.topology import (
    Cluster,
    Latency,
    adjusted_rand_index,
    alpha_tree,
    auto_alpha,
    bottom_partition,
    discover,
    distance_matrix,
    read_latency,
    read_topology,
    repair_outliers,
    topology_document,
)
from terrain_analysis.topology_plots import heatmap_figure, write_topology_plots

SIX = np.array(
    [
        [0, 1.0, 1.2, 10, 10, 10],
        [1.0, 0, 1.1, 10, 10, 10],
        [1.2, 1.1, 0, 10, 10, 10],
        [10, 10, 10, 0, 1.0, 1.25],
        [10, 10, 10, 1.0, 0, 1.3],
        [10, 10, 10, 1.25, 1.3, 0],
    ]
)


def shape(tree):
    """Nested lists of leaves, each level ordered by its smallest leaf."""
    if isinstance(tree, int):
        return tree
    return sorted((shape(c) for c in tree.children), key=_smallest)


def _smallest(s):
    return s if isinstance(s, int) else min(_smallest(x) for x in s)


def hierarchy(shape_, heights, rng, jitter=0.1, inflate=0.0):
    """Round trip = height of the lowest common group × lognormal jitter; a fraction of pairs ×5."""
    n = int(np.prod(shape_))
    sizes = [int(np.prod(shape_[k + 1 :])) for k in range(len(shape_))]
    idx = np.arange(n)
    level = np.full((n, n), heights[-1], dtype=float)
    labels = []
    for size, height in reversed(list(zip(sizes, heights, strict=True))):
        apart = (idx[:, None] // size) != (idx[None, :] // size)
        level = np.where(apart, np.maximum(level, height), level)
    for size in sizes[:-1]:
        labels.append(idx // size)
    upper = np.triu(level * rng.lognormal(0.0, jitter, (n, n)), 1)
    if inflate:
        upper = np.where(np.triu(rng.random((n, n)) < inflate, 1), upper * 5, upper)
    d = upper + upper.T
    return Latency(nodes=[f"n{i:04d}" for i in range(n)], stats={"median": d, "min": d}), labels


def level_labels(tree: Cluster, depth: int, n: int) -> np.ndarray:
    """Each leaf's ancestor at ``depth`` (a leaf above it keeps its own label)."""
    labels = np.full(n, -1)
    counter = [n]

    def walk(node, d):
        if isinstance(node, int):
            if labels[node] < 0:
                labels[node] = node
            return
        if d == depth:
            label = counter[0]
            counter[0] += 1
            for leaf in node.leaves():
                labels[leaf] = label
            return
        for child in node.children:
            walk(child, d + 1)

    walk(tree, 0)
    return labels


# --------------------------------------------------------------------------------------------------
# latency.json


@pytest.fixture
def latency_file(tmp_path):
    path = tmp_path / "latency.json"
    rows = [[0, 100, 900, 950], [110, 0, 920, 940], [None, 905, 0, 120], [960, 930, 115, 0]]
    path.write_text(
        json.dumps(
            {
                "format": "terrain.latency/1",
                "nodes": ["a@h", "b@h", "c@h", "d@h"],
                "unit": "us",
                "strategy": "concurrent",
                "batches": 10,
                "messages": 10,
                "payload_bytes": 0,
                "started_at": "2026-11-21T16:00:00Z",
                "stats": {"median": rows, "min": rows},
            }
        )
    )
    return path


def test_read_latency_and_symmetrise(latency_file):
    latency = read_latency(latency_file)
    assert latency.nodes == ["a@h", "b@h", "c@h", "d@h"]
    assert latency.metadata["strategy"] == "concurrent"
    d = distance_matrix(latency)
    assert d[0, 1] == d[1, 0] == 100  # min(100, 110)
    assert d[0, 2] == d[2, 0] == 900  # c -> a is null: a -> c
    assert distance_matrix(latency, symmetrise="max")[2, 3] == 120
    assert distance_matrix(latency, symmetrise="mean")[0, 1] == 105


def test_read_latency_rejects_other_formats(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "terrain.gev/1"}))
    with pytest.raises(ValueError, match="'path' .*x.json.* is not a latency matrix: format 'terrain.gev/1'"):
        read_latency(path)


def test_distance_matrix_errors_name_the_argument(latency_file):
    latency = read_latency(latency_file)
    with pytest.raises(ValueError, match="'statistic' must be one of min, median, mean, p95, got 'max'"):
        distance_matrix(latency, statistic="max")
    with pytest.raises(ValueError, match="'symmetrise' must be one of min, mean, max, got 'avg'"):
        distance_matrix(latency, symmetrise="avg")
    with pytest.raises(ValueError, match="'statistic' 'p95' is not in the latency matrix"):
        distance_matrix(latency, statistic="p95")
    missing = Latency(["a", "b"], {"min": np.array([[0, np.nan], [np.nan, 0]])})
    with pytest.raises(ValueError, match="no round trip between a and b in either direction"):
        distance_matrix(missing)


# --------------------------------------------------------------------------------------------------
# The α algorithm


def test_alpha_one_reproduces_the_binary_dendrogram():
    tree = alpha_tree(SIX, 1.0)
    assert shape(tree) == [[[0, 1], 2], [[3, 4], 5]]
    assert tree.height == 10.0


def test_alpha_above_the_spread_makes_flat_clusters_with_diameters():
    tree = alpha_tree(SIX, 1.3)
    assert shape(tree) == [[0, 1, 2], [3, 4, 5]]
    assert sorted(c.height for c in tree.children) == [1.2, 1.3]


def test_large_alpha_makes_one_cluster():
    assert shape(alpha_tree(SIX, 10.0)) == [0, 1, 2, 3, 4, 5]


def test_expansion_remeasures_the_diameter():
    d = np.array(
        [[0, 1, 1.5, 2.2, 9], [1, 0, 1.5, 2.2, 9], [1.5, 1.5, 0, 2.2, 9], [2.2, 2.2, 2.2, 0, 9], [9, 9, 9, 9, 0]]
    )
    assert shape(alpha_tree(d, 1.5)) == [[0, 1, 2, 3], 4]
    assert shape(alpha_tree(d, 1.4)) == [[[[0, 1], 2], 3], 4]


def test_alpha_tree_errors_name_the_argument():
    with pytest.raises(ValueError, match="'alpha' must be >= 1, got 0.5"):
        alpha_tree(SIX, 0.5)
    with pytest.raises(ValueError, match="'linkage' must be one of complete, average, single, got 'ward'"):
        alpha_tree(SIX, 1.0, "ward")
    with pytest.raises(ValueError, match="'distances' must be symmetric"):
        alpha_tree(np.array([[0, 1], [2, 0]]), 1.0)


def test_bottom_partition():
    assert bottom_partition(alpha_tree(SIX, 1.0)) == [[0, 1], [2], [3, 4], [5]]


@given(
    st.integers(2, 12),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["complete", "average", "single"]),
    st.floats(1.0, 4.0),
)
def test_alpha_tree_heights_never_grow_downwards(n, seed, linkage, alpha):
    d = squareform(np.random.default_rng(seed).random(n * (n - 1) // 2))
    tree = alpha_tree(d, alpha, linkage)
    assert sorted(tree.leaves()) == list(range(n))
    for cluster in tree.clusters():
        for child in cluster.children:
            if isinstance(child, Cluster):
                assert child.height <= cluster.height


def test_per_level_alpha_where_no_single_alpha_fits():
    def dist(i, j):
        ri, rj = i // 4, j // 4
        if ri == rj:
            return 10 + ((min(i, j) * 7 + max(i, j) * 3 + ri * 5) % 13)
        return 100 if ri // 2 == rj // 2 else 150

    d = np.array([[0 if i == j else dist(i, j) for j in range(16)] for i in range(16)], dtype=float)
    expected = [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13, 14, 15]]]
    tree, levels = auto_alpha(d)
    assert shape(tree) == expected
    assert [lv.clusters for lv in levels] == [4, 2, 1]
    assert levels[0].alpha >= 1.7 and levels[1].alpha < 1.5
    assert all(shape(alpha_tree(d, 1 + k / 20)) != expected for k in range(81))


# --------------------------------------------------------------------------------------------------
# Synthetic 1,000 nodes: 5 × 10 × 20, 10% lognormal jitter (issue 6's accuracy checks)


@pytest.mark.parametrize("inflate, floor", [(0.0, 1.0), (0.01, 0.95)])
def test_synthetic_1000_nodes_per_level_ari(inflate, floor):
    latency, truth = hierarchy([5, 10, 20], [8000.0, 1000.0, 100.0], np.random.default_rng(2026), inflate=inflate)
    found = discover(latency)
    aris = [
        adjusted_rand_index(level_labels(found.tree, depth, 1000), labels)
        for depth, labels in enumerate(truth, start=1)
    ]
    assert all(a >= floor for a in aris), aris
    if inflate:
        assert 4000 < found.repaired < 6000


def test_repair_outliers_replaces_only_far_values():
    d = np.array([[0, 10, 50, 100], [10, 0, 10, 100], [50, 10, 0, 100], [100, 100, 100, 0]], dtype=float)
    tree = Cluster(100.0, (Cluster(10.0, (0, 1, 2)), 3))
    repaired, count = repair_outliers(d, tree, 3.0)
    assert count == 1
    assert repaired[0, 2] == repaired[2, 0] == 10
    assert d[0, 2] == 50


def test_adjusted_rand_index():
    assert adjusted_rand_index([0, 0, 1, 1], [5, 5, 7, 7]) == 1.0
    assert adjusted_rand_index([0, 1, 2], [0, 1, 2]) == 1.0
    assert abs(adjusted_rand_index([0, 0, 1, 1], [0, 0, 1, 2]) - 0.5714285714285715) < 1e-12
    with pytest.raises(ValueError, match="'labels_a' and 'labels_b' must have the same length, got 2 and 3"):
        adjusted_rand_index([0, 1], [0, 1, 2])


# --------------------------------------------------------------------------------------------------
# Plots, topology files, the command


def test_heatmap_is_ordered_by_the_tree(latency_file):
    found = discover(read_latency(latency_file))
    figure = heatmap_figure(found)
    image = figure.axes[0].images[0].get_array()
    order = found.tree.leaves()
    np.testing.assert_array_equal(np.asarray(image), found.distances[np.ix_(order, order)])


def test_write_topology_plots(tmp_path, latency_file):
    paths = write_topology_plots(discover(read_latency(latency_file)), tmp_path)
    assert sorted(p.name for p in paths) == [
        "topology_dendrogram.png",
        "topology_dendrogram.svg",
        "topology_heatmap.png",
        "topology_heatmap.svg",
        "topology_tree.png",
        "topology_tree.svg",
    ]
    for path in paths:
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert ElementTree.parse(path).getroot().tag.endswith("svg")


def test_topology_document_round_trips(tmp_path, latency_file):
    latency = read_latency(latency_file)
    found = discover(latency)
    document = topology_document(found)
    assert document["format"] == "terrain.topology/1"
    assert document["tree"]["name"] == "c" and document["tree"]["height"] == 950.0
    path = tmp_path / "t.json"
    path.write_text(json.dumps(document))
    assert read_topology(path, latency.nodes) == found.tree


def test_cli_topology(tmp_path, latency_file, capsys):
    out = tmp_path / "plots"
    assert main(["topology", str(latency_file), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 nodes, 3 clusters (2 at the lowest level), root height 950.0 us" in printed
    assert (out / "topology.json").exists() and (out / "topology_tree.svg").exists()
    # a tree found elsewhere (terrain topology --format json) is drawn as given
    flat = tmp_path / "flat.json"
    flat.write_text(
        json.dumps(
            {
                "format": "terrain.topology/1",
                "tree": {"name": "c", "height": 950.0, "children": [{"node": n} for n in ["a@h", "b@h", "c@h", "d@h"]]},
            }
        )
    )
    assert main(["topology", str(latency_file), "--out", str(tmp_path / "p2"), "--topology", str(flat)]) == 0
    assert "4 nodes, 1 clusters (1 at the lowest level)" in capsys.readouterr().out


def test_cli_topology_errors(tmp_path, latency_file, capsys):
    assert main(["topology", str(tmp_path / "none.json"), "--out", str(tmp_path)]) == 1
    assert "cannot read" in capsys.readouterr().err
    assert main(["topology", str(latency_file), "--out", str(tmp_path), "--alpha", "0.5"]) == 2
    assert "must be 'auto' or a number >= 1, got '0.5'" in capsys.readouterr().err
