"""Topology discovery from a latency matrix: RELEASE D3.5's non-binary α clustering.

This is the Python twin of terrain's Erlang implementation (``terrain_discovery``,
``terrain_alpha``; see ``docs/TOPOLOGY_DISCOVERY.md``), so that plots can be drawn
from ``latency.json`` alone. Both follow the same definitions step for step and the
test suite checks that they give the same trees.

Pipeline (RELEASE D3.5, §4.3–4.5):

1. **Statistic**: one per-pair matrix of ``latency.json`` (``min`` by default: delays
   only add, so the fastest exchange estimates the path).
2. **Symmetrisation**: d(a, b) combines the two directions (``min`` by default; a
   missing value takes the other direction's).
3. **Outliers** (``repair``): a first pass with average linkage and automatic α;
   in its tree the distances whose lowest common cluster is C form one population,
   and a distance more than ``outlier_factor`` times its median is set to it (only
   upwards: delays only add, and a low value is structure the first pass missed).
4. **The α algorithm**: every point its own cluster; merge the two closest clusters
   into K; δ = diam(K); add to K every cluster x with d(x, K) ≤ αδ, closest first,
   re-measuring δ and d; repeat until one cluster is left. :func:`discover` uses
   average linkage by default (complete as in RELEASE D3.5 on request) and reports each
   cluster's diameter as its height.
5. **Automatic α**, level by level: over a geometric grid of α in [1, 4], the
   *bottom partition* (clusters whose children are all points) of each run; the
   widest run of equal non-trivial partitions at least ×1.2 wide wins and α is its
   middle; its clusters become the points of the next level. No such run: the
   points join under the root.

**Partial matrices.** A probe that measures only some pairs (``terrain probe
--strategy tree``, a budget that ran out) writes ``null`` for the others. A pair with
no value in either direction is *missing* (NaN in :func:`distance_matrix`) and every
step uses the measured pairs only: the distance between two clusters is the
linkage over the pairs measured between them (the average of the measured pairs for
average linkage), two clusters with no measured pair between them are never merged
by the α rule, and clusters left with no measured pair between them join under the
root. A tree built this way still *claims* that siblings are apart; where two
siblings have no measured pair between them the data cannot tell whether they
belong together, so :func:`undetermined` names those nodes (the smaller sibling's,
or both when they are equal in size) instead of presenting the guess as a finding.

Examples
--------
>>> import numpy as np
>>> d = np.array([[0, 1, 9, 9], [1, 0, 9, 9], [9, 9, 0, 2], [9, 9, 2, 0]], dtype=float)
>>> tree = alpha_tree(d, 1.0)
>>> tree.leaves()
[0, 1, 2, 3]
>>> [child.height for child in tree.children if isinstance(child, Cluster)]
[1.0, 2.0]
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from terrain_analysis.formats import read_document, tag

__all__ = [
    "LATENCY_FORMAT",
    "TOPOLOGY_FORMAT",
    "Cluster",
    "Discovery",
    "Latency",
    "Level",
    "Undetermined",
    "adjusted_rand_index",
    "alpha_tree",
    "auto_alpha",
    "binary_linkage",
    "bottom_partition",
    "cluster_names",
    "diameters",
    "discover",
    "distance_matrix",
    "read_latency",
    "read_topology",
    "repair_outliers",
    "topology_document",
    "undetermined",
]

LATENCY_FORMAT = tag("latency")
"""The ``format`` of ``latency.json``."""

TOPOLOGY_FORMAT = tag("topology")
"""The ``format`` of a topology JSON file."""

Linkage = Literal["complete", "average", "single"]
Statistic = Literal["min", "median", "mean", "p95"]
Symmetrise = Literal["min", "mean", "max"]

LINKAGES: tuple[str, ...] = ("complete", "average", "single")
STATISTICS: tuple[str, ...] = ("min", "median", "mean", "p95")
SYMMETRISATIONS: tuple[str, ...] = ("min", "mean", "max")

_SAMPLE = 50000

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Cluster:
    """A cluster of the α tree.

    Attributes
    ----------
    height : float
        δ of the cluster in µs: with complete linkage its diameter.
    children : tuple of Cluster or int
        Sub-clusters and points (indices into the matrix), in the order of their
        smallest point.
    """

    height: float
    children: tuple[Cluster | int, ...]

    def leaves(self) -> list[int]:
        """The points of the cluster, left to right."""
        return [leaf for child in self.children for leaf in _leaves(child)]

    def clusters(self) -> list[Cluster]:
        """This cluster and every cluster below it, depth first."""
        return [self] + [c for child in self.children if isinstance(child, Cluster) for c in child.clusters()]


def _leaves(node: Cluster | int) -> list[int]:
    return [node] if isinstance(node, int) else node.leaves()


@dataclass(frozen=True)
class Latency:
    """A latency matrix as ``terrain probe`` writes it.

    Attributes
    ----------
    nodes : list of str
        Node names, in the order of the rows.
    stats : dict of str to ndarray
        Per statistic (``min``, ``median``, ``mean``, ``p95``, ``stddev``) an n × n
        matrix of round trips in µs, NaN where there is no measurement.
    metadata : dict
        The other fields of the file (strategy, batches, messages, ...).
    """

    nodes: list[str]
    stats: dict[str, FloatArray]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def pairs_total(self) -> int:
        """Ordered pairs of distinct nodes, n·(n − 1)."""
        return len(self.nodes) * (len(self.nodes) - 1)

    @property
    def pairs_measured(self) -> int:
        """Ordered pairs with a round trip: the file's ``pairs_measured`` if it has one,
        else the off-diagonal values of its ``min`` matrix (or its first matrix)."""
        declared = self.metadata.get("pairs_measured")
        if isinstance(declared, int) and not isinstance(declared, bool):
            return declared
        if not self.stats:
            return 0
        matrix = self.stats.get("min", next(iter(self.stats.values())))
        return int(np.isfinite(matrix).sum() - np.isfinite(np.diag(matrix)).sum())


@dataclass(frozen=True)
class Level:
    """One level of automatic α.

    Attributes
    ----------
    points : int
        Points clustered at this level.
    clusters : int
        Blocks of the chosen partition (1: the root).
    alpha : float or None
        α chosen (None for the root).
    plateau : tuple of float or None
        Grid α at the two ends of the plateau (for the root: from where the plain
        algorithm joins the points in one block).
    """

    points: int
    clusters: int
    alpha: float | None
    plateau: tuple[float, float] | None


@dataclass(frozen=True)
class Discovery:
    """The result of :func:`discover`.

    Attributes
    ----------
    tree : Cluster
        The α tree over matrix indices.
    nodes : list of str
        Node names.
    distances : ndarray
        The symmetric matrix that was clustered (after repair).
    levels : list of Level
        Automatic α's levels, bottom up (empty with a fixed α).
    repaired : int
        Distances changed by the outlier repair.
    options : dict
        The options used.
    missing : int
        Node pairs (unordered) with no round trip in either direction: NaN in
        ``distances``.
    """

    tree: Cluster
    nodes: list[str]
    distances: FloatArray
    levels: list[Level]
    repaired: int
    options: dict[str, Any]
    missing: int = 0

    def undetermined(self) -> list[Undetermined]:
        """Where the measured pairs do not determine :attr:`tree` (see :func:`undetermined`)."""
        return undetermined(self.tree, self.distances)


@dataclass(frozen=True)
class Undetermined:
    """Nodes whose place below one cluster the measured pairs do not determine.

    Attributes
    ----------
    cluster : str
        The cluster's name as in ``topology.json`` (``c``, ``c_2``, ``c_2_1``, ...).
    height : float
        Its height (µs).
    nodes : tuple of int
        Matrix indices of the nodes: the leaves of each child of the cluster that has
        no measured pair with a larger (or equally large) sibling.
    """

    cluster: str
    height: float
    nodes: tuple[int, ...]


# --------------------------------------------------------------------------------------------------
# Reading


def read_latency(path: str | os.PathLike[str]) -> Latency:
    """Read ``latency.json`` (format ``terrain.latency/1``).

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    Latency

    Raises
    ------
    ValueError
        If the file is not a latency matrix.
    OSError
        If it cannot be read.
    """
    document = read_document(path, LATENCY_FORMAT)
    nodes = document.get("nodes")
    stats = document.get("stats")
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes) or not isinstance(stats, dict):
        raise ValueError(f"'path' {str(path)!r}: 'nodes' must be a list of names and 'stats' an object of matrices")
    n = len(nodes)
    matrices: dict[str, FloatArray] = {}
    for name, rows in stats.items():
        matrix = np.array([[math.nan if v is None else v for v in row] for row in rows], dtype=np.float64)
        if matrix.shape != (n, n):
            raise ValueError(f"'path' {str(path)!r}: stats {name!r} has shape {matrix.shape}, expected ({n}, {n})")
        matrices[name] = matrix
    metadata = {k: v for k, v in document.items() if k not in ("nodes", "stats")}
    return Latency(nodes=list(nodes), stats=matrices, metadata=metadata)


def distance_matrix(latency: Latency, statistic: str = "min", symmetrise: str = "min") -> FloatArray:
    """The symmetric matrix to cluster: one statistic, the two directions combined.

    Parameters
    ----------
    latency : Latency
        The measurements.
    statistic : {'min', 'median', 'mean', 'p95'}
        Which per-pair matrix.
    symmetrise : {'min', 'mean', 'max'}
        How d(a, b) combines a→b and b→a; NaN takes the other direction.

    Returns
    -------
    ndarray
        n × n, symmetric, zero diagonal; NaN for a pair with no value in either
        direction (a missing pair).

    Raises
    ------
    ValueError
        For an unknown statistic or symmetrisation, or a negative or infinite value.
    """
    if statistic not in STATISTICS:
        raise ValueError(f"'statistic' must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    if symmetrise not in SYMMETRISATIONS:
        raise ValueError(f"'symmetrise' must be one of {', '.join(SYMMETRISATIONS)}, got {symmetrise!r}")
    if statistic not in latency.stats:
        raise ValueError(f"'statistic' {statistic!r} is not in the latency matrix (has {sorted(latency.stats)})")
    m = latency.stats[statistic].copy()
    np.fill_diagonal(m, 0.0)
    bad = (m < 0) | np.isinf(m)
    if np.any(bad):
        i, j = np.argwhere(bad)[0]
        raise ValueError(
            f"round trip {latency.nodes[i]} -> {latency.nodes[j]} is {m[i, j]}: expected a non-negative number of "
            "microseconds or null"
        )
    a, b = m, m.T
    a = np.where(np.isnan(a), b, a)
    b = np.where(np.isnan(b), a, b)
    if symmetrise == "min":
        d = np.minimum(a, b)
    elif symmetrise == "max":
        d = np.maximum(a, b)
    else:
        d = (a + b) / 2
    return np.asarray(d, dtype=np.float64)


# --------------------------------------------------------------------------------------------------
# The α algorithm


def _check_square(distances: npt.ArrayLike) -> FloatArray:
    d = np.array(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"'distances' must be a square matrix, got shape {d.shape}")
    if np.any(np.isinf(d)) or np.any(d < 0):
        raise ValueError("'distances' must be finite and non-negative (NaN for a missing pair)")
    if not np.array_equal(d, d.T, equal_nan=True):
        raise ValueError("'distances' must be symmetric")
    return d


def _measured(d: FloatArray) -> npt.NDArray[np.bool_]:
    """Off-diagonal pairs with a distance."""
    measured = ~np.isnan(d)
    np.fill_diagonal(measured, False)
    return measured


def _partial_linkage(linkage: str, dk: FloatArray, dx: FloatArray, pk: FloatArray, px: FloatArray) -> FloatArray:
    """The linkage of k ∪ x to every cluster over the measured pairs only (``pk``, ``px``: their counts)."""
    known_k, known_x = pk > 0, px > 0
    if linkage == "complete":
        both = np.maximum(dk, dx)
    elif linkage == "single":
        both = np.minimum(dk, dx)
    else:
        with np.errstate(invalid="ignore"):
            both = (pk * dk + px * dx) / (pk + px)
    new = np.where(known_k & known_x, both, np.where(known_k, dk, np.where(known_x, dx, np.inf)))
    return np.asarray(new, dtype=np.float64)


def _lance_williams(linkage: str, dk: FloatArray, dx: FloatArray, nk: float, nx: float) -> FloatArray:
    if linkage == "complete":
        return np.maximum(dk, dx)
    if linkage == "single":
        return np.minimum(dk, dx)
    with np.errstate(invalid="ignore"):
        return np.asarray((nk * dk + nx * dx) / (nk + nx), dtype=np.float64)


def alpha_tree(
    distances: npt.ArrayLike,
    alpha: float,
    linkage: str = "complete",
    *,
    heights: Sequence[float] | None = None,
    sizes: Sequence[float] | None = None,
    counts: npt.ArrayLike | None = None,
) -> Cluster:
    """RELEASE D3.5's α tree (see the module docstring).

    Parameters
    ----------
    distances : array_like
        Symmetric n × n matrix of non-negative distances, n ≥ 2; NaN for a missing pair.
    alpha : float
        The threshold, ≥ 1.
    linkage : {'complete', 'average', 'single'}
        How far apart two clusters are.
    heights, sizes : sequence of float, optional
        Initial height and size (weight for average linkage) of each point.
    counts : array_like, optional
        Measured pairs of leaves between two points (the weights of average linkage
        over a partial matrix); by default the product of the sizes where a distance
        is given, 0 where it is NaN.

    Returns
    -------
    Cluster
        The root.

    Raises
    ------
    ValueError
        For α < 1, an unknown linkage or a bad matrix.
    """
    if not alpha >= 1:
        raise ValueError(f"'alpha' must be >= 1, got {alpha!r}")
    if linkage not in LINKAGES:
        raise ValueError(f"'linkage' must be one of {', '.join(LINKAGES)}, got {linkage!r}")
    d = _check_square(distances)
    n = d.shape[0]
    if n < 2:
        raise ValueError(f"'distances' must have at least 2 points, got {n}")
    height = np.zeros(n) if heights is None else np.array(heights, dtype=np.float64)
    size = np.ones(n) if sizes is None else np.array(sizes, dtype=np.float64)
    measured = _measured(d)
    partial = counts is not None or not measured.all(where=~np.eye(n, dtype=bool))
    pairs = (
        np.array(counts, dtype=np.float64) if counts is not None else np.outer(size, size) * measured
    ) * measured
    d[~measured] = np.inf
    active = np.ones(n, dtype=bool)
    trees: list[Cluster | int] = list(range(n))
    nn = d.argmin(axis=1)
    nd = d[np.arange(n), nn]

    def merge(k: int, x: int) -> None:
        if partial:
            new = _partial_linkage(linkage, d[k], d[x], pairs[k], pairs[x])
            together = pairs[k] + pairs[x]
            together[k] = together[x] = 0.0
            together[~active] = 0.0
            pairs[k, :] = together
            pairs[:, k] = together
            pairs[x, :] = 0.0
            pairs[:, x] = 0.0
        else:
            new = _lance_williams(linkage, d[k], d[x], size[k], size[x])
        new[k] = np.inf
        new[~active] = np.inf
        new[x] = np.inf
        d[k, :] = new
        d[:, k] = new
        d[x, :] = np.inf
        d[:, x] = np.inf
        size[k] += size[x]
        active[x] = False

    while active.sum() > 1:
        a = int(np.argmin(np.where(active, nd, np.inf)))
        if not math.isfinite(float(nd[a])):
            # No measured pair between any two of the clusters left: they join under the root.
            left = np.flatnonzero(active)
            return Cluster(
                float(height[left].max()), tuple(sorted((trees[int(i)] for i in left), key=_first_leaf))
            )
        b = int(nn[a])
        k, x = min(a, b), max(a, b)
        delta = max(float(d[k, x]), float(height[k]), float(height[x]))
        children = [trees[k], trees[x]]
        removed = [x]
        merge(k, x)
        while True:
            y = int(np.argmin(d[k]))
            dy = float(d[k, y])
            if math.isfinite(dy) and dy <= alpha * delta:
                delta = max(delta, dy, float(height[y]))
                children.append(trees[y])
                removed.append(y)
                merge(k, y)
            else:
                nn[k], nd[k] = y, dy
                break
        trees[k] = Cluster(delta, tuple(sorted(children, key=_first_leaf)))
        height[k] = delta
        stale = active & np.isin(nn, removed + [k])
        stale[k] = False
        for z in np.flatnonzero(stale):
            nn[z] = int(np.argmin(d[z]))
            nd[z] = d[z, nn[z]]
    root = trees[int(np.flatnonzero(active)[0])]
    assert isinstance(root, Cluster)
    return root


def _first_leaf(node: Cluster | int) -> int:
    return node if isinstance(node, int) else min(_first_leaf(c) for c in node.children)


def bottom_partition(tree: Cluster) -> list[list[int]]:
    """The clusters whose children are all points, and every other point alone.

    Parameters
    ----------
    tree : Cluster

    Returns
    -------
    list of list of int
        Sorted blocks, sorted.
    """
    blocks, loose = _bottom(tree)
    return sorted([sorted(b) for b, _ in blocks] + [[p] for p in loose])


def _bottom(tree: Cluster) -> tuple[list[tuple[list[int], float]], list[int]]:
    points = [c for c in tree.children if isinstance(c, int)]
    if len(points) == len(tree.children):
        return [(points, tree.height)], []
    blocks: list[tuple[list[int], float]] = []
    loose = list(points)
    for child in tree.children:
        if isinstance(child, Cluster):
            b, lo = _bottom(child)
            blocks += b
            loose += lo
    return blocks, loose


def auto_alpha(
    distances: npt.ArrayLike,
    linkage: str = "complete",
    *,
    alpha_range: tuple[float, float] = (1.0, 4.0),
    steps: int = 31,
    min_plateau: float = 1.2,
) -> tuple[Cluster, list[Level]]:
    """The α tree with α chosen per level (see the module docstring).

    Parameters
    ----------
    distances : array_like
        Symmetric matrix, n ≥ 2.
    linkage : {'complete', 'average', 'single'}
    alpha_range : tuple of float
        The grid's ends, 1 ≤ lo < hi.
    steps : int
        Grid values, geometric, ends included; ≥ 2.
    min_plateau : float
        A level's partition must hold while α grows by this factor; > 1 (default 1.2).

    Returns
    -------
    tree : Cluster
    levels : list of Level
        Bottom up.
    """
    lo, hi = alpha_range
    if not (1 <= lo < hi):
        raise ValueError(f"'alpha_range' must satisfy 1 <= lo < hi, got {alpha_range!r}")
    if steps < 2:
        raise ValueError(f"'steps' must be >= 2, got {steps!r}")
    if not min_plateau > 1:
        raise ValueError(f"'min_plateau' must be > 1, got {min_plateau!r}")
    d = _check_square(distances)
    n = d.shape[0]
    if n < 2:
        raise ValueError(f"'distances' must have at least 2 points, got {n}")
    ratio = (hi / lo) ** (1 / (steps - 1))
    grid = [lo * ratio**k for k in range(steps - 1)] + [float(hi)]
    points: list[tuple[Cluster | int, float, float]] = [(i, 0.0, 1.0) for i in range(n)]
    levels: list[Level] = []
    measured = _measured(d)
    counts = None if measured.all(where=~np.eye(n, dtype=bool)) else measured.astype(np.float64)
    while True:
        m = len(points)
        heights = [h for _, h, _ in points]
        sizes = [s for _, _, s in points]
        results = []
        for alpha in grid:
            tree = alpha_tree(d, alpha, linkage, heights=heights, sizes=sizes, counts=counts)
            blocks, loose = _bottom(tree)
            signature = sorted(sorted(b) for b, _ in blocks)
            results.append((signature, [(sorted(b), h) for b, h in blocks], loose))
        runs: list[list[Any]] = []
        for index, ((signature, _, _), alpha) in enumerate(zip(results, grid, strict=True)):
            if runs and runs[-1][4] == signature:
                runs[-1][1], runs[-1][3] = index, alpha
            else:
                runs.append([index, index, alpha, alpha, signature])
        everything = [list(range(m))]
        candidates = [r for r in runs if r[4] != everything and r[3] / r[2] >= min_plateau]
        if not candidates:
            one_block = [r[2] for r in runs if r[4] == everything]
            upper = d[np.triu_indices(m, 1)]
            upper = upper[~np.isnan(upper)]
            root_height = max(float(upper.max()) if upper.size else 0.0, max(heights))
            root = Cluster(root_height, tuple(sorted((t for t, _, _ in points), key=_first_leaf)))
            levels.append(Level(m, 1, None, (one_block[0], grid[-1]) if one_block else None))
            return root, levels
        best = candidates[0]
        for run in candidates[1:]:
            if run[3] / run[2] > best[3] / best[2]:
                best = run
        middle = (best[0] + best[1]) // 2
        _, blocks, loose = results[middle]
        levels.append(Level(m, len(blocks) + len(loose), grid[middle], (best[2], best[3])))
        groups = sorted([(b, h) for b, h in blocks] + [([p], None) for p in loose], key=lambda g: g[0])
        new_points: list[tuple[Cluster | int, float, float]] = []
        for members, h in groups:
            if h is None:
                new_points.append(points[members[0]])
            else:
                trees = tuple(sorted((points[p][0] for p in members), key=_first_leaf))
                new_points.append((Cluster(h, trees), h, sum(points[p][2] for p in members)))
        if counts is None:
            d = _contract(d, [g[0] for g in groups], np.array(sizes), linkage)
        else:
            d, counts = _contract_partial(d, counts, [g[0] for g in groups], linkage)
        points = new_points
        if len(points) == 1:
            last = points[0][0]
            assert isinstance(last, Cluster)
            return last, levels


def _contract(d: FloatArray, groups: list[list[int]], sizes: FloatArray, linkage: str) -> FloatArray:
    g = len(groups)
    out = np.zeros((g, g))
    for a in range(g):
        for b in range(a + 1, g):
            block = d[np.ix_(groups[a], groups[b])]
            if linkage == "complete":
                value = block.max()
            elif linkage == "single":
                value = block.min()
            else:
                weights = np.outer(sizes[groups[a]], sizes[groups[b]])
                value = (block * weights).sum() / (sizes[groups[a]].sum() * sizes[groups[b]].sum())
            out[a, b] = out[b, a] = value
    return out


def _contract_partial(
    d: FloatArray, counts: FloatArray, groups: list[list[int]], linkage: str
) -> tuple[FloatArray, FloatArray]:
    """:func:`_contract` over the measured pairs: ``counts`` holds the measured leaf pairs between points."""
    g = len(groups)
    out = np.full((g, g), np.nan)
    np.fill_diagonal(out, 0.0)
    pairs = np.zeros((g, g))
    for a in range(g):
        for b in range(a + 1, g):
            block = d[np.ix_(groups[a], groups[b])]
            weights = counts[np.ix_(groups[a], groups[b])]
            known = weights > 0
            if not known.any():
                continue
            if linkage == "complete":
                value = block[known].max()
            elif linkage == "single":
                value = block[known].min()
            else:
                value = (block[known] * weights[known]).sum() / weights[known].sum()
            out[a, b] = out[b, a] = value
            pairs[a, b] = pairs[b, a] = weights[known].sum()
    return out, pairs


# --------------------------------------------------------------------------------------------------
# Outliers and the whole pipeline


def repair_outliers(distances: npt.ArrayLike, tree: Cluster, factor: float = 3.0) -> tuple[FloatArray, int]:
    """Replace distances far from their level's median by the median.

    For every cluster of ``tree``, the distances whose lowest common cluster it is
    form one population; one more than ``factor`` times the population's median is
    set to the median. Values below the median are kept: delays only add, so a low
    value is structure the tree missed, not noise. Populations over 50,000 pairs
    take their median from the pairs (i, j), i < j, with (i n + j) mod s = 0.

    Parameters
    ----------
    distances : array_like
        Symmetric matrix.
    tree : Cluster
        A tree over its points.
    factor : float
        > 1.

    Returns
    -------
    repaired : ndarray
    count : int
        Distances changed (pairs).
    """
    if not factor > 1:
        raise ValueError(f"'factor' must be > 1, got {factor!r}")
    d = _check_square(distances).copy()
    n = d.shape[0]
    count = 0
    for cluster in tree.clusters():
        sets = [np.array(_leaves(child)) for child in cluster.children]
        rows: list[npt.NDArray[np.int64]] = []
        cols: list[npt.NDArray[np.int64]] = []
        for a in range(len(sets)):
            rest = np.concatenate(sets[a + 1 :]) if a + 1 < len(sets) else np.array([], dtype=np.int64)
            if rest.size:
                i, j = np.meshgrid(sets[a], rest, indexing="ij")
                rows.append(np.minimum(i, j).ravel())
                cols.append(np.maximum(i, j).ravel())
        if not rows:
            continue
        i = np.concatenate(rows)
        j = np.concatenate(cols)
        known = ~np.isnan(d[i, j])
        i, j = i[known], j[known]
        values = d[i, j]
        stride = max(1, -(-values.size // _SAMPLE))
        sample = values[(i * n + j) % stride == 0]
        median = float(np.median(sample)) if sample.size else 0.0
        far = values > factor * median
        count += int(far.sum())
        d[i[far], j[far]] = median
        d[j[far], i[far]] = median
    return d, count


def discover(
    latency: Latency,
    *,
    statistic: str = "min",
    symmetrise: str = "min",
    linkage: str = "average",
    alpha: float | Literal["auto"] = "auto",
    outliers: str = "repair",
    outlier_factor: float = 3.0,
) -> Discovery:
    """The whole pipeline, with terrain's defaults.

    Parameters
    ----------
    latency : Latency
    statistic : {'min', 'median', 'mean', 'p95'}
    symmetrise : {'min', 'mean', 'max'}
    linkage : {'complete', 'average', 'single'}
    alpha : float or 'auto'
    outliers : {'repair', 'keep'}
    outlier_factor : float

    Returns
    -------
    Discovery
    """
    if linkage not in LINKAGES:
        raise ValueError(f"'linkage' must be one of {', '.join(LINKAGES)}, got {linkage!r}")
    if outliers not in ("repair", "keep"):
        raise ValueError(f"'outliers' must be 'repair' or 'keep', got {outliers!r}")
    if alpha != "auto" and not (isinstance(alpha, int | float) and alpha >= 1):
        raise ValueError(f"'alpha' must be 'auto' or a number >= 1, got {alpha!r}")
    d = distance_matrix(latency, statistic, symmetrise)
    n = d.shape[0]
    options = dict(
        statistic=statistic,
        symmetrise=symmetrise,
        linkage=linkage,
        alpha=alpha,
        outliers=outliers,
        outlier_factor=outlier_factor,
    )
    missing = int(np.isnan(d[np.triu_indices(n, 1)]).sum())
    if n == 1:
        return Discovery(Cluster(0.0, (0,)), list(latency.nodes), d, [], 0, options)
    repaired = 0
    if outliers == "repair" and n > 2:
        first, _ = auto_alpha(d, "average")
        d, repaired = repair_outliers(d, first, outlier_factor)
    if alpha == "auto":
        tree, levels = auto_alpha(d, linkage)
    else:
        tree, levels = alpha_tree(d, float(alpha), linkage), []
    return Discovery(diameters(tree, d), list(latency.nodes), d, levels, repaired, options, missing)


def diameters(tree: Cluster, distances: npt.ArrayLike) -> Cluster:
    """The same tree with every height replaced by the cluster's diameter.

    Parameters
    ----------
    tree : Cluster
    distances : array_like
        The matrix the tree is over.

    Returns
    -------
    Cluster
        Heights: the largest distance between two points of each cluster (of the
        measured ones: NaN is a missing pair).
    """
    d = np.asarray(distances, dtype=np.float64)

    def walk(node: Cluster | int) -> Cluster | int:
        if isinstance(node, int):
            return node
        points = node.leaves()
        block = d[np.ix_(points, points)] if len(points) > 1 else np.zeros(1)
        height = float(np.nanmax(block)) if not np.isnan(block).all() else 0.0
        return Cluster(height, tuple(walk(child) for child in node.children))

    result = walk(tree)
    assert isinstance(result, Cluster)
    return result


def undetermined(tree: Cluster, distances: npt.ArrayLike) -> list[Undetermined]:
    """Where the measured pairs do not determine the tree.

    A cluster's children are apart in the tree; that is a finding only where some
    pair between them was measured. For every two children of a cluster with no
    measured pair between them, one of them a cluster, the smaller one's nodes (both
    children's when they are equal in size) are undetermined below that cluster: a
    node might belong inside the sibling cluster, two clusters might be one. (Two
    points with no pair measured are left alone: a tighter cluster of the two would
    be structure no measurement shows.)

    Parameters
    ----------
    tree : Cluster
        A tree over the points of ``distances``.
    distances : array_like
        Symmetric matrix; NaN for a missing pair.

    Returns
    -------
    list of Undetermined
        One per cluster with undetermined nodes, from the root down (empty when the
        matrix is complete).

    Examples
    --------
    >>> nan = float("nan")
    >>> d = [[0, 1, 9, nan], [1, 0, 9, nan], [9, 9, 0, 2], [nan, nan, 2, 0]]
    >>> [u.nodes for u in undetermined(Cluster(9.0, (Cluster(1.0, (0, 1)), Cluster(2.0, (2, 3)))), d)]
    []
    >>> d = [[0, 1, 9, nan], [1, 0, 9, nan], [9, 9, 0, nan], [nan, nan, nan, 0]]
    >>> [u.nodes for u in undetermined(Cluster(9.0, (Cluster(1.0, (0, 1)), 2, 3)), d)]
    [(3,)]
    """
    d = np.asarray(distances, dtype=np.float64)
    known = ~np.isnan(d)
    found = []
    for name, cluster in cluster_names(tree):
        members = [np.array(_leaves(child)) for child in cluster.children]
        blamed: set[int] = set()
        points = [isinstance(child, int) for child in cluster.children]
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                if (points[a] and points[b]) or known[np.ix_(members[a], members[b])].any():
                    continue
                if members[a].size <= members[b].size:
                    blamed.add(a)
                if members[b].size <= members[a].size:
                    blamed.add(b)
        if blamed:
            nodes = sorted(int(p) for k in blamed for p in members[k])
            found.append(Undetermined(name, cluster.height, tuple(nodes)))
    return found


def cluster_names(tree: Cluster) -> list[tuple[str, Cluster]]:
    """Every cluster with its name in ``topology.json``: ``c`` the root, ``c1``, ``c2``, ...
    its children, ``c1_1``, ... theirs; depth first.

    Parameters
    ----------
    tree : Cluster

    Returns
    -------
    list of (str, Cluster)
    """
    named = []

    def walk(node: Cluster, name: str) -> None:
        named.append((name, node))
        for k, child in enumerate(node.children, 1):
            if isinstance(child, Cluster):
                walk(child, _child_name(name, k))

    walk(tree, "c")
    return named


def _child_name(name: str, k: int) -> str:
    return ("c" if name == "c" else name + "_") + str(k)


def binary_linkage(distances: npt.ArrayLike) -> FloatArray:
    """The complete-linkage dendrogram of a matrix with missing pairs, as a scipy linkage matrix.

    scipy's ``linkage`` needs every pair. Over a partial matrix the α tree with α = 1
    and complete linkage is the complete-linkage dendrogram over the measured pairs
    (clusters with no measured pair between them join at the top); equal heights give
    a cluster with more than two children, which is written as successive merges at
    that height.

    Parameters
    ----------
    distances : array_like
        Symmetric n × n matrix, n ≥ 2; NaN for a missing pair.

    Returns
    -------
    ndarray
        (n − 1) × 4, as ``scipy.cluster.hierarchy.linkage`` returns.
    """
    d = _check_square(distances)
    n = d.shape[0]
    tree = diameters(alpha_tree(d, 1.0, "complete"), d)
    rows: list[list[float]] = []

    def emit(node: Cluster | int) -> tuple[int, int]:
        if isinstance(node, int):
            return node, 1
        parts = [emit(child) for child in node.children]
        current, size = parts[0]
        for other, other_size in parts[1:]:
            size += other_size
            rows.append([float(current), float(other), node.height, float(size)])
            current = n + len(rows) - 1
        return current, size

    emit(tree)
    return np.array(rows, dtype=np.float64)


# --------------------------------------------------------------------------------------------------
# Topology files and comparison


def topology_document(discovery: Discovery) -> dict[str, Any]:
    """The ``terrain.topology/1`` JSON document of a discovery (as ``terrain topology --format json``).

    Parameters
    ----------
    discovery : Discovery

    Returns
    -------
    dict
    """

    def node(tree: Cluster | int, name: str) -> dict[str, Any]:
        if isinstance(tree, int):
            return {"node": discovery.nodes[tree]}
        children = [node(child, _child_name(name, k)) for k, child in enumerate(tree.children, 1)]
        return {"name": name, "height": tree.height, "children": children}

    return {
        "format": TOPOLOGY_FORMAT,
        "metric": "measured",
        "tree": node(discovery.tree, "c"),
        "discovery": {
            **{k: v for k, v in discovery.options.items()},
            "repaired": discovery.repaired,
            "pairs_missing": discovery.missing,
            "undetermined": [
                {"cluster": u.cluster, "nodes": [discovery.nodes[i] for i in u.nodes]} for u in discovery.undetermined()
            ],
            "levels": [
                {
                    "points": lv.points,
                    "clusters": lv.clusters,
                    "alpha": lv.alpha,
                    "plateau": list(lv.plateau) if lv.plateau else None,
                }
                for lv in discovery.levels
            ],
            "source": "terrain-analysis",
        },
    }


def read_topology(path: str | os.PathLike[str], nodes: Sequence[str]) -> Cluster:
    """Read a ``terrain.topology/1`` JSON file as a tree over the indices of ``nodes``.

    Parameters
    ----------
    path : str or path-like
        The file (``terrain topology --format json``).
    nodes : sequence of str
        Node names in matrix order; the tree must hold exactly these.

    Returns
    -------
    Cluster

    Raises
    ------
    ValueError
        If the file is not a topology or its nodes differ from ``nodes``.
    """
    document = read_document(path, TOPOLOGY_FORMAT)
    index = {name: i for i, name in enumerate(nodes)}

    def build(entry: dict[str, Any]) -> Cluster | int:
        if "node" in entry:
            if entry["node"] not in index:
                raise ValueError(f"'path' {str(path)!r}: node {entry['node']!r} is not in the latency matrix")
            return index[entry["node"]]
        return Cluster(float(entry.get("height", 0.0)), tuple(build(c) for c in entry["children"]))

    tree = build(document["tree"])
    if isinstance(tree, int) or sorted(tree.leaves()) != list(range(len(nodes))):
        raise ValueError(f"'path' {str(path)!r}: the tree's nodes are not the latency matrix's nodes")
    return tree


def adjusted_rand_index(labels_a: Sequence[int], labels_b: Sequence[int]) -> float:
    """The adjusted Rand index of two labellings of the same items (Hubert and Arabie).

    Parameters
    ----------
    labels_a, labels_b : sequence of int

    Returns
    -------
    float
        1.0 for equal partitions (also when the index is undefined).

    Examples
    --------
    >>> round(adjusted_rand_index([0, 0, 1, 1], [0, 0, 1, 2]), 6)
    0.571429
    """
    a = np.asarray(labels_a)
    b = np.asarray(labels_b)
    if a.shape != b.shape:
        raise ValueError(f"'labels_a' and 'labels_b' must have the same length, got {a.size} and {b.size}")
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.zeros((ai.max() + 1, bi.max() + 1), dtype=np.int64)
    np.add.at(table, (ai, bi), 1)

    def pairs(x: npt.NDArray[np.int64]) -> float:
        return float((x * (x - 1) // 2).sum())

    index = pairs(table)
    row = pairs(table.sum(axis=1))
    col = pairs(table.sum(axis=0))
    total = a.size * (a.size - 1) / 2
    expected = row * col / total if total else 0.0
    maximum = (row + col) / 2
    if maximum == expected:
        return 1.0 if index == maximum else 0.0
    return (index - expected) / (maximum - expected)
