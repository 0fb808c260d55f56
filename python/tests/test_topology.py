"""Tests for terrain_analysis.topology and topology_plots: latency.json, the α algorithm,
automatic α, outlier repair, the plots and the ``terrain-analysis topology`` command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import matplotlib.colors
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
    binary_linkage,
    bottom_partition,
    discover,
    distance_matrix,
    read_latency,
    read_topology,
    repair_outliers,
    topology_document,
    undetermined,
)
from terrain_analysis.topology_plots import (
    MISSING_COLOUR,
    UNDETERMINED_COLOUR,
    dendrogram_figure,
    heatmap_figure,
    tree_figure,
    write_topology_plots,
)

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
    with pytest.raises(ValueError, match="x.json: format 'terrain.gev/1', expected 'terrain.latency/1'"):
        read_latency(path)


def test_distance_matrix_errors_name_the_argument(latency_file):
    latency = read_latency(latency_file)
    with pytest.raises(ValueError, match="'statistic' must be one of min, median, mean, p95, got 'max'"):
        distance_matrix(latency, statistic="max")
    with pytest.raises(ValueError, match="'symmetrise' must be one of min, mean, max, got 'avg'"):
        distance_matrix(latency, symmetrise="avg")
    with pytest.raises(ValueError, match="'statistic' 'p95' is not in the latency matrix"):
        distance_matrix(latency, statistic="p95")
    negative = Latency(["a", "b"], {"min": np.array([[0, -5.0], [3.0, 0]])})
    with pytest.raises(ValueError, match="round trip a -> b is -5.0: expected a non-negative number"):
        distance_matrix(negative)


def test_distance_matrix_keeps_a_pair_missing_in_both_directions_as_nan():
    missing = Latency(["a", "b", "c"], {"min": np.array([[0, np.nan, 4.0], [np.nan, 0, 5.0], [np.nan, 6.0, 0]])})
    d = distance_matrix(missing)
    assert np.isnan(d[0, 1]) and np.isnan(d[1, 0])
    assert d[0, 2] == d[2, 0] == 4.0 and d[1, 2] == 5.0


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


# --------------------------------------------------------------------------------------------------
# Partial matrices (null pairs: a tree-guided probe, a budget that ran out)


def _clades(tree: Cluster, without: frozenset[int] = frozenset()) -> set[frozenset[int]]:
    return {frozenset(c.leaves()) - without for c in tree.clusters()} - {frozenset()}


def _true_clades(shape_: list[int], without: frozenset[int] = frozenset()) -> set[frozenset[int]]:
    n = int(np.prod(shape_))
    found = {frozenset(range(n)) - without}
    for size in [int(np.prod(shape_[k + 1 :])) for k in range(len(shape_) - 1)]:
        found |= {frozenset(range(start, start + size)) - without for start in range(0, n, size)}
    return found - {frozenset()}


def _drop_pairs(latency: Latency, fraction: float, rng: np.random.Generator) -> Latency:
    """Remove ``fraction`` of the node pairs at random, both directions (the harder case)."""
    d = latency.stats["min"].copy()
    n = d.shape[0]
    i, j = np.triu_indices(n, 1)
    drop = rng.random(i.size) < fraction
    d[i[drop], j[drop]] = d[j[drop], i[drop]] = np.nan
    return Latency(latency.nodes, {"min": d}, {"pairs_measured": int(np.isfinite(d).sum() - n)})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_256_nodes_half_the_pairs_missing_is_exact(seed):
    rng = np.random.default_rng(seed)
    full, _ = hierarchy([4, 4, 16], [8000.0, 1000.0, 100.0], rng)
    latency = _drop_pairs(full, 0.5, rng)
    kept = np.isfinite(latency.stats["min"]).sum(axis=1) - 1
    assert kept.min() >= 10
    assert 0.48 < 1 - latency.pairs_measured / latency.pairs_total < 0.52
    found = discover(latency)
    assert 0.48 < found.missing / (256 * 255 / 2) < 0.52
    assert _clades(found.tree) == _true_clades([4, 4, 16])
    assert found.undetermined() == []


def test_nodes_without_a_measured_rack_mate_are_named_undetermined():
    # 4 × 8 × 8: with half the pairs gone some nodes keep none of their 7 rack-mates; the measured pairs
    # then cannot place them in a rack. They are named, and the rest of the tree is exact.
    rng = np.random.default_rng(0)
    full, _ = hierarchy([4, 8, 8], [8000.0, 1000.0, 100.0], rng)
    latency = _drop_pairs(full, 0.5, rng)
    d = latency.stats["min"]
    alone = {i for i in range(256) if not np.isfinite(np.delete(d[i, i // 8 * 8 : i // 8 * 8 + 8], i % 8)).any()}
    assert alone, "the seed must leave some node without a rack-mate for this test to mean anything"
    found = discover(latency)
    named = frozenset(i for u in found.undetermined() for i in u.nodes)
    assert named == alone
    assert _clades(found.tree, named) == _true_clades([4, 8, 8], named)


def test_a_node_never_measured_joins_the_root_and_is_undetermined():
    d = SIX.copy()
    d[5, :] = d[:, 5] = np.nan
    found = discover(Latency([f"n{i}" for i in range(6)], {"min": d}))
    assert shape(found.tree) == [[[0, 1, 2], [3, 4]], 5]
    assert [(u.cluster, u.nodes) for u in found.undetermined()] == [("c", (5,))]
    assert found.missing == 5


def test_two_racks_never_measured_against_each_other_are_both_undetermined():
    d = SIX.copy()
    d[np.ix_([0, 1, 2], [3, 4, 5])] = np.nan
    d[np.ix_([3, 4, 5], [0, 1, 2])] = np.nan
    tree = alpha_tree(d, 1.5, "average")
    assert shape(tree) == [[0, 1, 2], [3, 4, 5]]
    assert [u.nodes for u in undetermined(tree, d)] == [(0, 1, 2, 3, 4, 5)]


def test_partial_average_linkage_averages_the_measured_pairs():
    # 0 and 1 join first; 2 is measured against 0 only: the linkage of {0, 1} to 2 is d(0, 2), not a
    # mean that counts the missing pair as 0 or as infinity.
    nan = np.nan
    d = np.array([[0, 1, 4, 10], [1, 0, nan, 10], [4, nan, 0, 10], [10, 10, 10, 0]])
    tree = alpha_tree(d, 1.0, "average")
    assert shape(tree) == [[[0, 1], 2], 3]
    assert tree.children[0].height == 4.0


def test_counts_over_a_full_matrix_give_the_same_tree():
    # A complete matrix takes the plain Lance-Williams update (the Erlang twin's); the update over measured
    # pairs (counts given) must agree with it up to rounding.
    rng = np.random.default_rng(7)
    full, _ = hierarchy([3, 4, 5], [8000.0, 1000.0, 100.0], rng)
    d = full.stats["min"]
    plain = alpha_tree(d, 1.3, "average")
    counted = alpha_tree(d, 1.3, "average", counts=np.ones(d.shape))
    assert shape(plain) == shape(counted)
    np.testing.assert_allclose([c.height for c in plain.clusters()], [c.height for c in counted.clusters()])


def test_binary_linkage_equals_scipy_on_a_full_matrix_and_is_valid_on_a_partial_one():
    from scipy.cluster.hierarchy import cophenet, is_valid_linkage, linkage
    from scipy.spatial.distance import squareform

    rng = np.random.default_rng(3)
    full, _ = hierarchy([2, 3, 4], [800.0, 100.0, 10.0], rng)
    d = full.stats["min"]
    ours = binary_linkage(d)
    theirs = linkage(squareform(d, checks=False), method="complete")
    np.testing.assert_allclose(cophenet(ours), cophenet(theirs))
    partial = _drop_pairs(full, 0.3, rng).stats["min"]
    symmetric = np.fmin(partial, partial.T)
    z = binary_linkage(symmetric)
    assert is_valid_linkage(z) and z.shape == (23, 4)


def test_heatmap_draws_missing_pairs_in_their_own_colour_with_a_legend():
    rng = np.random.default_rng(0)
    full, _ = hierarchy([2, 2, 4], [800.0, 100.0, 10.0], rng)
    found = discover(_drop_pairs(full, 0.3, rng))
    figure = heatmap_figure(found)
    ax = figure.axes[0]
    image = ax.images[0]
    data = image.get_array()
    assert np.ma.count_masked(data) == 2 * found.missing
    assert matplotlib.colors.same_color(image.get_cmap().get_bad(), MISSING_COLOUR)
    legend = ax.get_legend()
    assert legend is not None
    assert legend.get_texts()[0].get_text() == f"not measured: {found.missing} of 120 node pairs"
    extent = legend.get_window_extent(figure.canvas.get_renderer())
    assert extent.y0 >= 0 and extent.x0 >= 0, "the legend must lie inside the figure"
    # the full matrix has no legend and no masked cell
    complete = heatmap_figure(discover(full))
    assert complete.axes[0].get_legend() is None
    assert np.ma.count_masked(complete.axes[0].images[0].get_array()) == 0


def test_undetermined_labels_are_coloured():
    d = SIX.copy()
    d[5, :] = d[:, 5] = np.nan
    found = discover(Latency([f"n{i}" for i in range(6)], {"min": d}))
    for figure in (heatmap_figure(found), tree_figure(found), dendrogram_figure(found)):
        ax = figure.axes[0]
        coloured = {t.get_text() for t in ax.get_xticklabels() if t.get_color() == UNDETERMINED_COLOUR}
        assert coloured == {"n5"}
        assert "1 nodes placed without a measured pair to decide" in ax.get_title()


def test_cli_topology_on_a_partial_matrix(tmp_path, capsys):
    rng = np.random.default_rng(0)
    full, _ = hierarchy([4, 8, 8], [8000.0, 1000.0, 100.0], rng)
    latency = _drop_pairs(full, 0.5, rng)
    path = tmp_path / "latency.json"
    stats = [[None if not np.isfinite(v) else float(v) for v in row] for row in latency.stats["min"]]
    path.write_text(
        json.dumps(
            {
                "format": "terrain.latency/1",
                "nodes": latency.nodes,
                "pairs_measured": latency.pairs_measured,
                "stats": {"min": stats},
            }
        )
    )
    found = discover(latency)
    assert main(["topology", str(path), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    pairs = f"pairs: {latency.pairs_measured} of 65280 ordered pairs measured; {found.missing} of 32640 node pairs"
    assert pairs in printed
    for place in found.undetermined():
        assert f"undetermined: {len(place.nodes)} nodes below cluster {place.cluster} " in printed
    document = json.loads((tmp_path / "out" / "topology.json").read_text())
    assert document["discovery"]["pairs_missing"] == found.missing
    assert document["discovery"]["undetermined"] == [
        {"cluster": u.cluster, "nodes": [latency.nodes[i] for i in u.nodes]} for u in found.undetermined()
    ]


def test_a_tree_guided_probes_sparse_matrix_gives_the_exact_tree():
    # As 'terrain probe --strategy tree' measures: nodes inserted in random order, each measured against one
    # representative of every subtree on its way down (top-down, level by level) and two random confirmations;
    # one direction only. About 9% of the ordered pairs of 4 x 4 x 8 nodes.
    rng = np.random.default_rng(1)
    shape_ = [4, 4, 8]
    full, _ = hierarchy(shape_, [8000.0, 1000.0, 100.0], rng)
    d = full.stats["min"]
    n = d.shape[0]
    sizes = [n, 32, 8, 1]
    m = np.full((n, n), np.nan)
    np.fill_diagonal(m, 0.0)
    placed: list[int] = []
    for x in rng.permutation(n):
        for level in range(3):
            block = [p for p in placed if p // sizes[level] == x // sizes[level]]
            for child in sorted({p // sizes[level + 1] for p in block}):
                members = [p for p in block if p // sizes[level + 1] == child]
                r = members[rng.integers(len(members))]
                m[x, r] = d[x, r]
        for r in rng.choice(placed, size=min(2, len(placed)), replace=False) if placed else []:
            m[x, r] = d[x, r]
        placed.append(int(x))
    latency = Latency(full.nodes, {"min": m})
    assert latency.pairs_measured / latency.pairs_total < 0.10
    found = discover(latency)
    assert _clades(found.tree) == _true_clades(shape_)
    assert found.undetermined() == []
