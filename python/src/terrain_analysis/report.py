"""One self-contained HTML page for one or more run directories (``terrain report``).

A run directory (``runs/<UTC stamp>/``) holds a ``manifest.json`` (format
``terrain.manifest/1``) that lists every file the run produced, each with a
*kind* (``cluster``, ``latency``, ``gev_fit``, ...) and the parameters it was made
with. :func:`build_report` reads the manifest alone and renders one section per
kind, in the order of :data:`RENDERERS`; kinds it does not know are listed with
their files. With several run directories every section shows the runs side by
side, one column each.

The page needs nothing else: CSS is inline, every figure is an ``<img>`` whose
source is a ``data:`` URI (SVG or PNG), there is no JavaScript and no reference
to any other file or server.

Adding a kind
-------------
A renderer is a function ``(entry, run) -> Section``: ``entry`` is the manifest's
output (:class:`Entry`: kind, file, parameters) and ``run`` the run directory
(:class:`Run`: paths, the manifest, the other entries). It returns a
:class:`Section` of blocks — :class:`Text`, :class:`Table`, :class:`Figure`.
Register it in :data:`RENDERERS` under its kind; that is all. A renderer raises
``OSError`` or ``ValueError`` (naming the file) when its input is unreadable; the
report then shows the error in place of the section and the command exits 1.

Examples
--------
Shell::

    terrain-analysis report runs/20261123T214048Z                      # -> runs/20261123T214048Z/report.html
    terrain-analysis report runs/A runs/B --out compare.html            # two runs side by side

Python::

    >>> from terrain_analysis.report import build_report
    >>> html = build_report(["runs/20261123T214048Z"])  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from terrain_analysis import __version__
from terrain_analysis.topology import Discovery, discover, read_latency, read_topology
from terrain_analysis.topology_plots import dendrogram_figure, heatmap_figure, tree_figure

__all__ = [
    "MANIFEST_FORMAT",
    "RENDERERS",
    "Block",
    "Entry",
    "Figure",
    "Renderer",
    "Run",
    "Section",
    "Table",
    "Text",
    "build_report",
    "figure_from_matplotlib",
    "figure_from_file",
    "read_run",
    "summary_renderer",
    "write_report",
]

MANIFEST_FORMAT = "terrain.manifest/1"
"""The format of ``manifest.json`` this module reads."""

_TABLE_ROW_LIMIT = 40  # rows of a CSV file or JSON list shown; the rest are counted
_IMAGE_TYPES = {".svg": "image/svg+xml", ".png": "image/png"}


# --------------------------------------------------------------------------------------------------
# The model: runs, entries, sections and their blocks
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One output listed in a manifest.

    Attributes
    ----------
    kind : str
        What the file holds (``cluster``, ``latency``, ...).
    file : str
        The file, relative to the run directory.
    parameters : dict
        How it was produced; ``command`` (when the writer knew it) is the command that made it.
    """

    kind: str
    file: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """A run directory and its manifest.

    Attributes
    ----------
    directory : Path
        The run directory.
    manifest : dict
        ``manifest.json`` as read.
    entries : list of Entry
        Its outputs, in manifest order.
    cache : dict
        Results shared between renderers of the same run (e.g. one topology discovery for the
        latency and topology sections).
    """

    directory: Path
    manifest: dict[str, Any]
    entries: list[Entry]
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The run directory's own name (its UTC stamp)."""
        return self.directory.resolve().name

    def path(self, entry_or_file: Entry | str) -> Path:
        """The path of a file of the run; raises ``ValueError`` for one outside the directory."""
        file = entry_or_file.file if isinstance(entry_or_file, Entry) else entry_or_file
        path = (self.directory / file).resolve()
        if not path.is_relative_to(self.directory.resolve()):
            raise ValueError(f"'file' {file!r} in {self.directory / 'manifest.json'} lies outside the run directory")
        return path

    def command(self, entry: Entry) -> str:
        """The command that made ``entry``: its ``command`` parameter, else ``terrain <manifest kind>``."""
        command = entry.parameters.get("command")
        if isinstance(command, str) and command:
            return command
        return f"terrain {self.manifest.get('kind', '?')}"

    def first(self, kind: str) -> Entry | None:
        """The first entry of ``kind`` in the manifest, if any."""
        return next((e for e in self.entries if e.kind == kind), None)


@dataclass(frozen=True)
class Text:
    """A paragraph (plain text; escaped when rendered)."""

    text: str


@dataclass(frozen=True)
class Pre:
    """Preformatted text, a command's output as it printed it (escaped when rendered)."""

    text: str
    caption: str = ""


@dataclass(frozen=True)
class Table:
    """A table of values; ``None`` shows as a dash, floats with 4 significant digits.

    Attributes
    ----------
    columns : list of str
    rows : list of list
    caption : str
        What the table shows (may be empty).
    """

    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    """An image embedded in the page.

    Attributes
    ----------
    title : str
        Shown above the image (the image carries its own title and axis labels).
    data : bytes
        The image file's bytes.
    media_type : str
        ``image/svg+xml`` or ``image/png``.
    caption : str
        What the figure shows.
    command : str
        The command that made it.
    """

    title: str
    data: bytes
    media_type: str
    caption: str
    command: str


Block = Text | Pre | Table | Figure
"""What a section is made of."""


@dataclass(frozen=True)
class Section:
    """What a renderer returns for one manifest entry.

    Attributes
    ----------
    title : str
        The heading of the kind's section (``Cluster``, ``Latency``, ...).
    blocks : list of Block
    """

    title: str
    blocks: list[Block]


Renderer = Callable[[Entry, Run], Section]
"""A function from a manifest entry and its run to a section."""


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


def read_run(directory: str | os.PathLike[str]) -> Run:
    """Read a run directory's ``manifest.json``.

    Parameters
    ----------
    directory : str or path-like
        A run directory (``runs/<stamp>``).

    Returns
    -------
    Run

    Raises
    ------
    OSError
        If the manifest cannot be read.
    ValueError
        If it is not a ``terrain.manifest/1`` document or an output lacks ``kind`` or ``file``.
    """
    directory = Path(directory)
    path = directory / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"'directory' {str(directory)!r}: manifest.json is not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ValueError(
            f"'directory' {str(directory)!r}: manifest.json has format {found!r}, expected {MANIFEST_FORMAT!r}"
        )
    outputs = manifest.get("outputs", [])
    if not isinstance(outputs, list):
        raise ValueError(f"'directory' {str(directory)!r}: manifest.json 'outputs' must be a list, got {outputs!r}")
    entries = []
    for k, output in enumerate(outputs):
        if not (
            isinstance(output, dict) and isinstance(output.get("kind"), str) and isinstance(output.get("file"), str)
        ):
            raise ValueError(
                f"'directory' {str(directory)!r}: manifest.json output {k} must have a 'kind' and a 'file', "
                f"got {output!r}"
            )
        parameters = output.get("parameters") or {}
        entries.append(Entry(output["kind"], output["file"], parameters if isinstance(parameters, dict) else {}))
    return Run(directory, manifest, entries)


def _read_json(run: Run, entry: Entry, formats: Sequence[str]) -> dict[str, Any]:
    """Read an entry's JSON file and check its ``format`` starts with one of ``formats``."""
    path = run.path(entry)
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{entry.file}: not JSON ({error})") from None
    found = document.get("format") if isinstance(document, dict) else None
    if not isinstance(found, str) or not any(found.startswith(f) for f in formats):
        raise ValueError(f"{entry.file}: format {found!r}, expected {' or '.join(repr(f) for f in formats)}")
    assert isinstance(document, dict)
    return document


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def figure_from_matplotlib(figure: MplFigure, *, title: str, caption: str, command: str) -> Figure:
    """Render a matplotlib figure to SVG for the page.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        With its own title and axis labels.
    title, caption, command : str
        See :class:`Figure`.

    Returns
    -------
    Figure
    """
    buffer = io.BytesIO()
    # Text as paths: the page shows exactly the fonts matplotlib laid the figure out with.
    with matplotlib.rc_context({"svg.hashsalt": "terrain", "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return Figure(title, buffer.getvalue(), "image/svg+xml", caption, command)


def figure_from_file(run: Run, file: str, *, title: str, caption: str, command: str) -> Figure:
    """Embed an image file of the run (``.svg`` or ``.png``).

    Parameters
    ----------
    run : Run
    file : str
        Relative to the run directory.
    title, caption, command : str
        See :class:`Figure`.

    Returns
    -------
    Figure

    Raises
    ------
    ValueError
        If the file is neither SVG nor PNG, or is not what its extension says.
    OSError
        If it cannot be read.
    """
    path = run.path(file)
    media_type = _IMAGE_TYPES.get(path.suffix.lower())
    if media_type is None:
        raise ValueError(f"'file' {file!r} is not an image the report embeds (.svg or .png)")
    data = path.read_bytes()
    if media_type == "image/png" and not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"'file' {file!r} is not a PNG file")
    if media_type == "image/svg+xml" and b"<svg" not in data[:4096]:
        raise ValueError(f"'file' {file!r} is not an SVG file")
    return Figure(title, data, media_type, caption, command)


def _preferred_images(files: Sequence[str]) -> list[str]:
    """One file per stem, in the order given: the PNG where both PNG and SVG exist (a tool's SVG may
    leave its text to the browser's fonts, which need not match the ones it was laid out with)."""
    stems: dict[str, str] = {}
    for file in files:
        stem, suffix = os.path.splitext(file)
        if suffix.lower() not in _IMAGE_TYPES:
            continue
        if stem not in stems or suffix.lower() == ".png":
            stems[stem] = file
    return list(stems.values())


def _new_figure(width: float, height: float) -> tuple[MplFigure, Any]:
    figure = MplFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def _report_command(run: Run) -> str:
    return f"terrain report {run.directory}"


# --------------------------------------------------------------------------------------------------
# Renderers of the kinds terrain writes today
# --------------------------------------------------------------------------------------------------


def _host(node: str) -> str:
    return node.split("@", 1)[1] if "@" in node else "?"


def render_cluster(entry: Entry, run: Run) -> Section:
    """``cluster``: ``cluster.json`` (``terrain.cluster/1``) — nodes, groups, schedulers, CPU, hosts; the tree."""
    document = _read_json(run, entry, ["terrain.cluster/"])
    nodes = document.get("nodes") or []
    cpu_of = _attribute_values(run, ["vm_num_processors", "cpu_model_name"])
    hosts = sorted({_host(str(n.get("node", ""))) for n in nodes})
    groups = sorted({"/".join(n.get("group_path") or []) for n in nodes})
    schedulers = sum(int(n.get("schedulers") or 0) for n in nodes)
    blocks: list[Block] = [
        Text(
            f"Cluster {document.get('cluster', '?')} from {document.get('spec', '?')}: {len(nodes)} nodes in "
            f"{len(groups)} lowest groups on {len(hosts)} host{'s' if len(hosts) != 1 else ''} "
            f"({', '.join(hosts)}), {schedulers} schedulers in all"
            + (f"; all nodes running after {document['startup_ms'] / 1000:.1f} s" if "startup_ms" in document else "")
            + "."
        )
    ]
    rows = []
    for n in nodes:
        node = str(n.get("node", "?"))
        attributes = cpu_of.get(node, {})
        rows.append(
            [
                n.get("name"),
                node,
                "/".join(n.get("group_path") or []),
                n.get("schedulers"),
                "unlimited" if n.get("cpu") is None else n["cpu"],
                attributes.get("vm_num_processors"),
                attributes.get("cpu_model_name"),
                _host(node),
            ]
        )
    blocks.append(
        Table(
            ["name", "node", "group path", "schedulers", "CPU quota (cores)", "logical CPUs", "CPU model", "host"],
            rows,
            "One row per node. Logical CPUs and the CPU model come from the run's attributes file when it has one.",
        )
    )
    levels = document.get("levels")
    if isinstance(levels, list) and levels:
        blocks.append(
            Table(
                ["level", "one-way latency (µs)", "jitter (µs)", "bandwidth (B/s)"],
                [
                    [lv.get("level"), lv.get("latency_us"), lv.get("jitter_us"), lv.get("bandwidth_bytes_per_s")]
                    for lv in levels
                ],
                "Emulated links of the spec: between two nodes the level of their lowest common group applies.",
            )
        )
    if nodes:
        blocks.append(
            figure_from_matplotlib(
                _group_tree_figure(document),
                title="The cluster's group tree",
                caption=(
                    "The spec's groups from the cluster (top) down to the nodes (bottom); each node labelled with its "
                    "scheduler count, each group with its emulated one-way latency where the spec sets one."
                ),
                command=f"{_report_command(run)} (from {entry.file}, made by {run.command(entry)})",
            )
        )
    return Section("Cluster", blocks)


def _group_tree_figure(document: Mapping[str, Any]) -> MplFigure:
    nodes = document.get("nodes") or []
    latency = {
        str(lv.get("level")): lv.get("latency_us") for lv in document.get("levels") or [] if isinstance(lv, dict)
    }
    depth = max((len(n.get("group_path") or []) for n in nodes), default=0) + 1
    figure, ax = _new_figure(max(6.0, min(16.0, 0.55 * len(nodes))), 3.8)
    x_of: dict[tuple[str, ...], list[float]] = {}
    for k, n in enumerate(nodes):
        path = tuple(n.get("group_path") or [])
        for level in range(len(path) + 1):
            x_of.setdefault(path[:level], []).append(float(k))
        ax.plot([k, k], [0, 1], color="grey", linewidth=0.8)
        ax.plot([k], [0], "o", color="tab:red", markersize=5)
        ax.annotate(
            f"{n.get('name')}\n{n.get('schedulers')} sch.", (k, 0), textcoords="offset points", xytext=(0, -22),
            ha="center", fontsize=7,
        )
    for path, xs in x_of.items():
        y = depth - len(path)
        x = float(np.mean(xs))
        children = {p: v for p, v in x_of.items() if len(p) == len(path) + 1 and p[: len(path)] == path}
        for child_xs in children.values():
            cx = float(np.mean(child_xs))
            ax.plot([x, cx], [y, y - 1], color="black", linewidth=0.9)
        label = path[-1] if path else str(document.get("cluster", "cluster"))
        key = "/".join(path) if path else "cluster"
        if key in latency and latency[key] is not None:
            label += f"\n{latency[key]} µs"
        ax.plot([x], [y], "s", color="tab:blue", markersize=6)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, 2), fontsize=7)
    ax.set_ylim(-0.9, depth + 0.4)
    ax.set_xlim(-0.8, len(nodes) - 0.2)
    ax.set_yticks(range(depth + 1), ["node"] + [f"level {depth - 1 - k}" for k in range(depth)])
    ax.set_xticks([])
    ax.set_xlabel("nodes, in spec order (labels: name, schedulers)")
    ax.set_ylabel("depth in the group tree (levels)")
    ax.set_title(f"Group tree of cluster {document.get('cluster', '?')} ({len(nodes)} nodes)")
    return figure


def _attribute_values(run: Run, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per node, the values of ``names`` in the run's first ``attributes`` entry (empty when none)."""
    entry = run.first("attributes")
    if entry is None:
        return {}
    try:
        document = _read_json(run, entry, ["terrain.attributes/"])
    except (OSError, ValueError):
        return {}  # the attributes section reports the problem
    result = {}
    for row in document.get("nodes") or []:
        values = row.get("attributes") or {}
        result[str(row.get("node"))] = {name: values.get(name) for name in names}
    return result


def render_attributes(entry: Entry, run: Run) -> Section:
    """``attributes``: ``attributes.json`` (``terrain.attributes/1``) — one row per node, one column per name."""
    document = _read_json(run, entry, ["terrain.attributes/"])
    names = [str(n) for n in document.get("names") or []]
    rows = []
    for row in document.get("nodes") or []:
        values = row.get("attributes")
        if isinstance(values, dict):
            rows.append([row.get("node")] + [_cell(values.get(name)) for name in names])
        else:
            rows.append([row.get("node")] + [f"({row.get('error', 'no answer')})"] + [""] * (len(names) - 1))
    timeout = document.get("timeout_ms")
    return Section(
        "Attributes",
        [
            Table(
                ["node"] + names,
                rows,
                f"Asked of all nodes at once with terrain:attrs/3"
                + (f" under one deadline of {timeout} ms" if timeout is not None else "")
                + f" by {run.command(entry)}; 'undefined' where a node has no value.",
            )
        ],
    )


def _cell(value: Any) -> Any:
    if value is None:
        return "undefined"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def _discovery(run: Run, entry: Entry) -> Discovery:
    """The run's latency matrix clustered with terrain's defaults (once per run and file)."""
    key = f"discovery:{entry.file}"
    if key not in run.cache:
        run.cache[key] = discover(read_latency(run.path(entry)))
    found: Discovery = run.cache[key]
    return found


def render_latency(entry: Entry, run: Run) -> Section:
    """``latency``: ``latency.json`` (``terrain.latency/1``) — the matrix ordered by the tree, the dendrogram."""
    latency = read_latency(run.path(entry))
    found = _discovery(run, entry)
    topology = run.first("topology")
    ordered_by = "the topology terrain-analysis discovers from it (average linkage, automatic α)"
    if topology is not None:
        try:
            tree = read_topology(run.path(topology), found.nodes)
            found = Discovery(tree, found.nodes, found.distances, found.levels, found.repaired, found.options)
            ordered_by = f"the topology the run discovered ({topology.file})"
        except (OSError, ValueError):
            pass  # the topology section reports it; order by the tree found here
    meta = latency.metadata
    finite = latency.stats.get("min", np.zeros((1, 1)))
    off_diagonal = finite[~np.eye(len(latency.nodes), dtype=bool)] if len(latency.nodes) > 1 else np.array([])
    off_diagonal = off_diagonal[np.isfinite(off_diagonal)]
    failed = meta.get("failed") or []
    rows = [
        ["nodes", len(latency.nodes)],
        ["strategy", meta.get("strategy")],
        ["batches × messages per pair", f"{meta.get('batches')} × {meta.get('messages')}"],
        ["payload (bytes)", meta.get("payload_bytes")],
        ["measured in (ms)", meta.get("duration_ms")],
        ["fastest pair, min round trip (µs)", float(off_diagonal.min()) if off_diagonal.size else None],
        ["slowest pair, min round trip (µs)", float(off_diagonal.max()) if off_diagonal.size else None],
        ["failed pairs", len(failed)],
    ]
    command = run.command(entry)
    made = f"{_report_command(run)} (from {entry.file}, measured by {command})"
    statistic = str(found.options.get("statistic", "min"))
    return Section(
        "Latency",
        [
            Table(["", "value"], rows, "The probe's parameters and extremes (round trips, µs)."),
            figure_from_matplotlib(
                _labelled_heatmap(found, statistic),
                title="Round trips ordered by the tree",
                caption=(
                    f"The {statistic} round trip of every ordered pair of nodes (µs, row: source, column: target), "
                    "the "
                    f"two directions combined by {found.options.get('symmetrise', 'min')}, rows and columns in the "
                    f"leaf order of {ordered_by}; red is fast, white slow; blue squares outline the lowest clusters "
                    "(as RELEASE D3.5's Figure 16 of the Athos cluster)."
                ),
                command=made,
            ),
            figure_from_matplotlib(
                _labelled_dendrogram(found),
                title="Complete-linkage dendrogram",
                caption=(
                    "The binary complete-linkage dendrogram of the same matrix: two nodes join at the height of "
                    "the largest round trip between their clusters (µs)."
                ),
                command=made,
            ),
        ],
    )


def _labelled_heatmap(found: Discovery, statistic: str) -> MplFigure:
    figure = heatmap_figure(found, f"{statistic} round trip")
    ax = figure.axes[0]
    ax.set_xlabel("target node (tree order)")
    ax.set_ylabel("source node (tree order)")
    figure.tight_layout()
    return figure


def _labelled_dendrogram(found: Discovery) -> MplFigure:
    figure = dendrogram_figure(found)
    figure.axes[0].set_xlabel("node")
    figure.tight_layout()
    return figure


def render_topology(entry: Entry, run: Run) -> Section:
    """``topology``: ``topology.json`` (``terrain.topology/1``) over the run's ``latency`` matrix — the α tree."""
    document = _read_json(run, entry, ["terrain.topology/"])
    blocks: list[Block] = []
    clusters: list[list[Any]] = []

    def walk(node: Mapping[str, Any], depth: int) -> None:
        if "node" in node:
            return
        leaves = _topology_leaves(node)
        clusters.append([node.get("name"), depth, len(leaves), node.get("height"), " ".join(leaves)])
        for child in node.get("children") or []:
            walk(child, depth + 1)

    walk(document.get("tree") or {}, 0)
    blocks.append(
        Table(
            ["cluster", "depth", "nodes", "diameter (µs)", "members"],
            clusters,
            f"The clusters of the discovered tree, from the root down; made by {run.command(entry)}.",
        )
    )
    latency = run.first("latency")
    try:
        found = _discovery(run, latency) if latency is not None else None
    except (OSError, ValueError):
        found = None  # the latency section says why
        blocks.append(Text(f"Not drawn: the run's latency matrix ({latency.file}) could not be read."))
    if latency is not None and found is not None:
        tree = read_topology(run.path(entry), found.nodes)
        drawn = Discovery(tree, found.nodes, found.distances, [], found.repaired, {"alpha": "as found by the run"})
        figure = tree_figure(drawn)
        figure.axes[0].set_xlabel("node (tree order)")
        figure.axes[0].set_title(
            "Discovered non-binary α tree; labels: nodes / diameter µs", fontsize=9
        )
        figure.tight_layout()
        blocks.append(
            figure_from_matplotlib(
                figure,
                title="The discovered topology",
                caption=(
                    f"The non-binary tree in {entry.file} drawn over the {latency.file} matrix: each cluster at its "
                    "diameter (the largest round trip inside it, µs) above its children; red dots are the lowest "
                    "clusters."
                ),
                command=f"{_report_command(run)} (tree made by {run.command(entry)})",
            )
        )
    return Section("Discovered topology", blocks)


def _topology_leaves(node: Mapping[str, Any]) -> list[str]:
    if "node" in node:
        return [str(node["node"])]
    return [leaf for child in node.get("children") or [] for leaf in _topology_leaves(child)]


def render_topology_comparison(entry: Entry, run: Run) -> Section:
    """``topology_comparison``: ``terrain.topology_comparison/1`` — per-level ARI and clade recall vs the spec."""
    document = _read_json(run, entry, ["terrain.topology_comparison/"])
    levels = document.get("levels") or []
    summary = [
        ["true tree", document.get("truth")],
        ["found tree", document.get("found")],
        ["nodes", document.get("nodes")],
        ["clade recall", document.get("clade_recall")],
        ["clade precision", document.get("clade_precision")],
        ["clades: true / found / common", f"{document.get('truth_clades')} / {document.get('found_clades')} / "
                                          f"{document.get('common_clades')}"],
    ]
    return Section(
        "Discovered topology against the spec",
        [
            Table(
                ["level", "true clusters", "found clusters", "adjusted Rand index"],
                [[lv.get("level"), lv.get("truth_clusters"), lv.get("found_clusters"), lv.get("ari")] for lv in levels],
                "Per level of the true tree (1: below the root), the adjusted Rand index of the two partitions at that "
                "depth (1.0: the same).",
            ),
            Table(["", "value"], summary, f"Clades (clusters as sets of nodes) found; made by {run.command(entry)}."),
        ],
    )


def render_durations(entry: Entry, run: Run) -> Section:
    """``durations``: a durations CSV (``run, total_s, ..., status``) — the runs over time, a summary."""
    path = run.path(entry)
    columns, rows = _read_csv(path)
    column = str(entry.parameters.get("column", "total_s"))
    if column not in columns:
        raise ValueError(f"{entry.file}: no column {column!r} (columns: {', '.join(columns)})")
    values = np.array([float(r[column]) for r in rows if r.get("status", "ok") == "ok" and r.get(column)])
    failed = sum(1 for r in rows if r.get("status", "ok") != "ok")
    blocks: list[Block] = []
    described = ", ".join(f"{k} {v}" for k, v in entry.parameters.items() if k not in ("command",))
    if values.size:
        summary = [
            ["runs ok / failed", f"{values.size} / {failed}"],
            ["min (ms)", 1000 * float(values.min())],
            ["median (ms)", 1000 * float(np.median(values))],
            ["95th percentile (ms)", 1000 * float(np.percentile(values, 95))],
            ["max (ms)", 1000 * float(values.max())],
        ]
        blocks.append(Table(["", "value"], summary, f"{entry.file}, column {column}: {described}."))
        figure, ax = _new_figure(7.0, 3.2)
        ok_runs = [int(r["run"]) if r.get("run", "").isdigit() else k + 1 for k, r in enumerate(rows)
                   if r.get("status", "ok") == "ok" and r.get(column)]
        ax.plot(ok_runs, 1000 * values, "o-", markersize=3, linewidth=0.8, color="tab:blue")
        ax.axhline(1000 * float(np.median(values)), color="grey", linestyle="--", linewidth=0.8, label="median")
        ax.set_xlabel("run")
        ax.set_ylabel(f"{column} (ms)")
        ax.set_title(f"Duration of each run ({values.size} runs)")
        ax.legend(loc="upper right", frameon=False, fontsize="small")
        blocks.append(
            figure_from_matplotlib(
                figure,
                title="Durations run by run",
                caption=(
                    f"The {column} of every successful run in the order they ran (ms); slow outliers are the upper "
                    "tail the GEV fit below describes."
                ),
                command=f"{_report_command(run)} (from {entry.file}, made by {run.command(entry)})",
            )
        )
    else:
        blocks.append(Text(f"{entry.file}: no successful runs ({failed} failed)."))
    return Section("Durations", blocks)


def render_gev_fit(entry: Entry, run: Run) -> Section:
    """``gev_fit``: ``fit.json`` (``terrain.gev/1``) — estimates, tests, return levels, the diagnostics plots."""
    document = _read_json(run, entry, ["terrain.gev/"])
    se = document.get("se") or {}
    interval = document.get("shape_interval") or {}
    test = document.get("gumbel_test") or {}
    estimates = [
        ["location μ (s)", document.get("location"), se.get("location")],
        ["scale σ (s)", document.get("scale"), se.get("scale")],
        ["shape ξ", document.get("shape"), se.get("shape")],
    ]
    source = document.get("source") or {}
    blocks: list[Block] = [
        Text(
            f"GEV fit of {document.get('n')} durations ({source.get('file', '?')}, "
            f"column {source.get('column', '?')}); "
            f"converged: {document.get('converged')}. Shape ξ > 0: Fréchet type (heavy upper tail), ξ < 0: Weibull "
            f"type (bounded); {_percent(interval.get('level'))} profile interval for ξ "
            f"[{_number(interval.get('lower'))}, {_number(interval.get('upper'))}]. Gumbel (ξ = 0) likelihood-ratio "
            f"test: statistic {_number(test.get('statistic'))}, p = {_number(test.get('p_value'))}."
        ),
        Table(["parameter", "estimate", "standard error"], estimates, "Maximum-likelihood estimates (Henwood et al.)."),
    ]
    models = document.get("models") or []
    if models:
        blocks.append(
            Table(
                ["model", "parameters", "nll", "AIC", "ΔAIC"],
                [
                    [m.get("name"), m.get("n_parameters"), m.get("nll"), m.get("aic"), m.get("delta_aic")]
                    for m in models
                ],
                "Models fitted to the same durations, lowest AIC first.",
            )
        )
    levels = document.get("return_levels") or []
    if levels:
        confidence = _percent(document.get("return_level_confidence"))
        blocks.append(
            Table(
                [
                    "period (runs)",
                    "return level (ms)",
                    "se (ms)",
                    f"{confidence} lower (ms)",
                    f"{confidence} upper (ms)",
                ],
                [
                    [lv.get("period")] + [_milli(lv.get(k)) for k in ("level", "se", "lower", "upper")]
                    for lv in levels
                ],
                "The duration exceeded by one run in T on average, with delta-method limits.",
            )
        )
    fit_directory = os.path.dirname(entry.file)
    command = run.command(entry)
    captions = {
        "gev_diagnostics": (
            "GEV diagnostics",
            "Probability plot (empirical against fitted probability), quantile plot (observed duration against the "
            "fitted quantile, s, with the pointwise band; red points lie outside it) and histogram with the fitted "
            "density — "
            "Henwood et al.'s Figure 2.",
        ),
        "gev_return_levels": (
            "Return levels",
            "Return level (s) against return period (runs, log scale) with delta-method limits and the observed "
            "durations at their plotting positions.",
        ),
    }
    plots = [str(p) for p in document.get("plots") or []]
    for file in _preferred_images([os.path.join(fit_directory, p) for p in plots]):
        stem = os.path.splitext(os.path.basename(file))[0]
        title, caption = captions.get(stem, (stem, f"{os.path.basename(file)}, written with the fit."))
        blocks.append(figure_from_file(run, file, title=title, caption=caption, command=command))
    return Section("GEV fit of the durations", blocks)


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _percent(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "?"


def _milli(value: Any) -> float | None:
    return 1000 * value if isinstance(value, int | float) else None


# --------------------------------------------------------------------------------------------------
# Renderers of the kinds other tools write (formats from their issues; see docs/REPORT.md)
# --------------------------------------------------------------------------------------------------


def _summary_tables(document: Mapping[str, Any], *, skip: Sequence[str] = ("format",)) -> list[Block]:
    """A JSON summary as tables: scalars as one key/value table, each list of objects and each object
    of objects as a table of its own (nested objects flattened to dotted columns)."""
    scalars: list[list[Any]] = []
    blocks: list[Block] = []
    for key, value in document.items():
        if key in skip:
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            blocks.append(_records_table([_flatten(v) for v in value], f"{key} ({len(value)})"))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            records = [{"": name, **_flatten(v)} for name, v in value.items()]
            blocks.append(_records_table(records, f"{key} ({len(value)})"))
        elif isinstance(value, dict):
            scalars.extend([f"{key}.{k}", _cell(v)] for k, v in _flatten(value).items())
        else:
            scalars.append([key, _cell(value)])
    if scalars:
        blocks.insert(0, Table(["", "value"], scalars, ""))
    return blocks


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            flat.update(_flatten(item, name + "."))
        else:
            flat[name] = item
    return flat


def _records_table(records: Sequence[Mapping[str, Any]], caption: str) -> Table:
    columns: list[str] = []
    for record in records:
        columns.extend(k for k in record if k not in columns)
    rows = [[_cell(r.get(c)) if c in r else None for c in columns] for r in records[:_TABLE_ROW_LIMIT]]
    if len(records) > _TABLE_ROW_LIMIT:
        caption += f"; the first {_TABLE_ROW_LIMIT} rows of {len(records)}"
    return Table(columns, rows, caption)


def _csv_table(run: Run, entry: Entry) -> Table:
    columns, rows = _read_csv(run.path(entry))
    shown = [[row.get(c) for c in columns] for row in rows[:_TABLE_ROW_LIMIT]]
    note = f"; the first {_TABLE_ROW_LIMIT} of {len(rows)} rows" if len(rows) > _TABLE_ROW_LIMIT else ""
    return Table(columns, shown, f"{entry.file}{note}, made by {run.command(entry)}.")


def _listed_figures(entry: Entry, run: Run) -> list[Figure]:
    """Figures of an entry: the entry's file itself when it is an image, and the files in its
    ``figures`` or ``plots`` parameter (relative to the run directory, or to the entry's directory)."""
    files: list[str] = []
    if os.path.splitext(entry.file)[1].lower() in _IMAGE_TYPES:
        files.append(entry.file)
    for key in ("figures", "plots"):
        listed = entry.parameters.get(key)
        if isinstance(listed, list):
            for item in listed:
                item = str(item)
                beside = os.path.join(os.path.dirname(entry.file), item)
                files.append(item if (run.directory / item).exists() or not os.path.dirname(entry.file) else beside)
    captions = entry.parameters.get("captions") if isinstance(entry.parameters.get("captions"), dict) else {}
    figures = []
    for file in _preferred_images(files):
        stem = os.path.splitext(os.path.basename(file))[0]
        caption = str(captions.get(stem) or entry.parameters.get("caption") or f"{os.path.basename(file)}.")
        title = str(entry.parameters.get("title") or stem.replace("_", " "))
        figures.append(figure_from_file(run, file, title=title, caption=caption, command=run.command(entry)))
    return figures


def summary_renderer(title: str, formats: Sequence[str]) -> Renderer:
    """A renderer for a tool's outputs: JSON summaries (``format`` starting with one of ``formats``)
    as tables, CSV files as tables, images as figures.

    Parameters
    ----------
    title : str
        The section heading.
    formats : sequence of str
        Accepted ``format`` prefixes of JSON files, e.g. ``["terrain.bench/"]``.

    Returns
    -------
    Renderer
    """

    def render(entry: Entry, run: Run) -> Section:
        suffix = os.path.splitext(entry.file)[1].lower()
        blocks: list[Block] = []
        if suffix == ".json":
            document = _read_json(run, entry, formats)
            blocks.append(Text(f"{entry.file} ({document.get('format')}), made by {run.command(entry)}."))
            blocks.extend(_summary_tables(document))
        elif suffix == ".csv":
            blocks.append(_csv_table(run, entry))
        elif suffix not in _IMAGE_TYPES:
            blocks.append(Text(f"{entry.file} (not rendered: neither JSON, CSV nor an image)."))
        blocks.extend(_listed_figures(entry, run))
        return Section(title, blocks)

    render.__doc__ = f"{title}: JSON ({', '.join(formats)}), CSV and image files of the kind."
    return render


def render_events(entry: Entry, run: Run) -> Section:
    """``events``: ``trace.json`` (Chrome trace-event format) summarised; timeline figures embedded."""
    suffix = os.path.splitext(entry.file)[1].lower()
    blocks: list[Block] = []
    if suffix == ".json":
        try:
            document = json.loads(run.path(entry).read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{entry.file}: not JSON ({error})") from None
        events = document.get("traceEvents") if isinstance(document, dict) else document
        if not isinstance(events, list):
            raise ValueError(f"{entry.file}: neither a list of trace events nor an object with 'traceEvents'")
        timed = [e for e in events if isinstance(e, dict) and isinstance(e.get("ts"), int | float)]
        tracks = {(e.get("pid"), e.get("tid")) for e in timed}
        names: dict[str, int] = {}
        for e in timed:
            names[str(e.get("name"))] = names.get(str(e.get("name")), 0) + 1
        span = (max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed)) if timed else 0
        blocks.append(
            Table(
                ["", "value"],
                [["events", len(events)], ["tracks (pid, tid)", len(tracks)], ["time span (ms)", span / 1000]],
                f"{entry.file} in the Chrome trace-event format (open it in ui.perfetto.dev); made by "
                f"{run.command(entry)}.",
            )
        )
        blocks.append(
            Table(
                ["event name", "count"],
                sorted(([k, v] for k, v in names.items()), key=lambda kv: -kv[1])[:_TABLE_ROW_LIMIT],
                "Events by name, most frequent first.",
            )
        )
    elif suffix == ".jsonl":
        lines = [line for line in run.path(entry).read_text().splitlines() if line.strip()]
        try:
            records = [json.loads(line) for line in lines]
        except json.JSONDecodeError as error:
            raise ValueError(f"{entry.file}: a line is not JSON ({error})") from None
        header = records[0] if records and isinstance(records[0], dict) and "format" in records[0] else {}
        events = records[1:] if header else records
        names: dict[str, int] = {}
        for event in events:
            name = str(event.get("name")) if isinstance(event, dict) else "?"
            names[name] = names.get(name, 0) + 1
        blocks.append(
            Table(
                ["", "value"],
                [["format", header.get("format")], ["events", len(events)], ["names", len(names)]],
                f"{entry.file}: raw events, one JSON object a line; made by {run.command(entry)}.",
            )
        )
        blocks.append(
            Table(
                ["event name", "count"],
                sorted(([k, v] for k, v in names.items()), key=lambda kv: -kv[1])[:_TABLE_ROW_LIMIT],
                "Events by name, most frequent first.",
            )
        )
    elif suffix == ".csv":
        blocks.append(_csv_table(run, entry))
    blocks.extend(_listed_figures(entry, run))
    return Section("Events", blocks)


# --------------------------------------------------------------------------------------------------
# The SLURM pipeline (examples/slurm/pipeline.sbatch, RELEASE D3.5 §4.6; docs/TESTBED.md)
# --------------------------------------------------------------------------------------------------

_PIPELINE_LINES = 80  # lines of a step's output shown; the rest is in its file


def render_pipeline(entry: Entry, run: Run) -> Section:
    """``pipeline``: ``terrain.pipeline/1`` — the batch job's steps, their times and their outputs."""
    document = _read_json(run, entry, ["terrain.pipeline/"])
    steps = document.get("steps") or []
    blocks: list[Block] = [
        Table(
            ["", "value"],
            [
                ["SLURM job", document.get("job")],
                ["allocated nodes", document.get("nodelist")],
                ["probe strategy", document.get("strategy")],
                ["statistic", document.get("statistic")],
                ["payload (bytes)", document.get("payload_bytes")],
                ["wall time (s)", document.get("seconds")],
            ],
            f"The batch job; made by {run.command(entry)}.",
        ),
        Table(
            ["step", "started at (s)", "took (s)", "output"],
            [[s.get("title"), s.get("started_s"), s.get("seconds"), s.get("output")] for s in steps],
            "Every step of the job, in order, with its start (seconds after the job's start) and duration.",
        ),
    ]
    for step in steps:
        output = step.get("output")
        if not output:
            continue
        lines = run.path(str(output)).read_text(errors="replace").splitlines()
        shown = lines[:_PIPELINE_LINES]
        if len(lines) > len(shown):
            shown.append(f"... {len(lines) - len(shown)} more lines in {output}")
        blocks.append(Pre("\n".join(shown), f"{step.get('title')} ({output})"))
    return Section("Pipeline steps", blocks)


def render_slurm_topology(entry: Entry, run: Run) -> Section:
    """``slurm_topology``: ``terrain.topology/1`` of SLURM's switches (``terrain topology import slurm``)."""
    document = _read_json(run, entry, ["terrain.topology/"])
    clusters: list[list[Any]] = []

    def walk(node: Mapping[str, Any], depth: int) -> None:
        if "node" in node:
            return
        leaves = _topology_leaves(node)
        clusters.append([node.get("name"), depth, len(leaves), " ".join(leaves)])
        for child in node.get("children") or []:
            walk(child, depth + 1)

    walk(document.get("tree") or {}, 0)
    return Section(
        "SLURM topology",
        [
            Table(
                ["switch", "depth", "hosts", "hosts below it"],
                clusters,
                f"SLURM's switches (topology.conf), from the top down; made by {run.command(entry)}.",
            )
        ],
    )


def _read_json_lines(run: Run, entry: Entry) -> list[dict[str, Any]]:
    path = run.path(entry)
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{entry.file}: line {number} is not JSON ({error})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{entry.file}: line {number} is not a JSON object")
        records.append(record)
    return records


def render_aco_placement(entry: Entry, run: Run) -> Section:
    """``aco_placement``: ``terrain aco --json`` lines — ML-ACO placed by distance against random."""
    records = _read_json_lines(run, entry)
    rows = [[r.get("placement"), r.get("seed"), r.get("main_s"), r.get("setup_s"), r.get("best_cost"),
             r.get("colonies"), r.get("nodes")] for r in records]
    by: dict[str, list[float]] = {}
    for r in records:
        if isinstance(r.get("main_s"), (int, float)):
            by.setdefault(str(r.get("placement")), []).append(float(r["main_s"]))
    means = {p: float(np.mean(v)) for p, v in by.items()}
    summary = [[p, len(by[p]), means[p], float(np.min(by[p])), float(np.max(by[p]))] for p in sorted(by)]
    blocks: list[Block] = [
        Table(
            ["placement", "runs", "mean main loop (s)", "fastest (s)", "slowest (s)"],
            summary,
            "Main-loop time of ML-ACO per placement of its colonies.",
        )
    ]
    if means.get("distance"):
        blocks.append(Text(f"random / distance: {means.get('random', float('nan')) / means['distance']:.2f} "
                           "(above 1: placing by distance on the discovered tree was faster)."))
    blocks.append(Table(["placement", "seed", "main loop (s)", "set-up (s)", "best cost", "colonies", "nodes"], rows,
                        f"Every run; made by {run.command(entry)}."))
    if by:
        figure, axes = _new_figure(5.5, 2.6)
        names = sorted(by)
        for k, name in enumerate(names):
            values = by[name]
            axes.plot([k] * len(values), [v * 1000 for v in values], "o", alpha=0.7)
            axes.plot([k - 0.2, k + 0.2], [means[name] * 1000] * 2, "-", color="black")
        axes.set_xticks(range(len(names)), names)
        axes.set_xlim(-0.6, len(names) - 0.4)
        axes.set_ylabel("main loop (ms)")
        axes.set_title("ML-ACO main loop per run; bar: mean", fontsize=9)
        blocks.append(
            figure_from_matplotlib(
                figure,
                title="ML-ACO placed by distance against random",
                caption="Each dot one run (one seed); the bar is the mean of the placement's runs.",
                command=f"{_report_command(run)} (runs made by {run.command(entry)})",
            )
        )
    return Section("ML-ACO: distance against random placement", blocks)


# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------

RENDERERS: dict[str, Renderer] = {
    "cluster": render_cluster,
    "attributes": render_attributes,
    "latency": render_latency,
    "topology": render_topology,
    "topology_comparison": render_topology_comparison,
    "durations": render_durations,
    "gev_fit": render_gev_fit,
    "bench": summary_renderer("DE-Bench", ["terrain.bench/"]),
    "collective": summary_renderer("Collective operations", ["terrain.collective/", "terrain.collective_rules/"]),
    "events": render_events,
    "emas": summary_renderer("EMAS", ["terrain.emas/", "terrain.emas_scaling/"]),
    "experiment": summary_renderer("Experiments", ["terrain.experiment/"]),
    # The kinds terrain bench records on main at the time of writing (docs/REPORT.md) ...
    "bench_summary": summary_renderer("DE-Bench summary", ["terrain.bench/"]),
    "bench_sweep": summary_renderer("DE-Bench sweep", ["terrain.bench/"]),
    "plot": summary_renderer("Plots", []),
    # ... and those terrain emas and terrain events record there.
    "emas_summary": summary_renderer("EMAS summary", ["terrain.emas/"]),
    "emas_scaling": summary_renderer("EMAS scaling", ["terrain.emas_scaling/"]),
    "trace_events": render_events,
    "events_timeline": summary_renderer("Event timelines", []),
    "events_reads": summary_renderer("Read times", []),
    "event_findings": summary_renderer("Monitors' findings", ["terrain.event_findings/"]),
    # ... and what examples/slurm/pipeline.sbatch records (docs/TESTBED.md).
    "slurm_topology": render_slurm_topology,
    "aco_placement": render_aco_placement,
    "pipeline": render_pipeline,
}
"""Kind → renderer, in the order the sections appear. A tool adds its kind here."""


# --------------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------------

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d2327;
       margin: 0; background: #f6f7f8; }
pre { background: #f1f3f5; padding: .6em .9em; overflow-x: auto; font-size: .82em; line-height: 1.3; }
p.pre-caption { margin: .9em 0 .2em; font-weight: 600; }
header { background: #24313a; color: #fff; padding: 1.2em 2em; }
header h1 { margin: 0 0 .3em; font-size: 1.6em; }
header p { margin: .2em 0; color: #d5dde2; }
header code { background: #33434e; color: #e8eef2; }
nav { padding: .6em 2em; background: #e9edf0; border-bottom: 1px solid #cfd6db; }
nav a { margin-right: 1.2em; color: #1f5c8a; text-decoration: none; }
main { padding: 0 2em 2em; }
section.kind { background: #fff; margin: 1.4em 0; padding: .8em 1.4em 1.2em; border: 1px solid #dde2e6;
               border-radius: 6px; }
section.kind > h2 { margin: .2em 0 .6em; font-size: 1.35em; border-bottom: 2px solid #3d7ab8; padding-bottom: .2em; }
.runs { display: grid; grid-template-columns: repeat(var(--runs), minmax(0, 1fr)); gap: 1.6em; }
.run > h3 { margin: .4em 0; font-size: 1em; color: #555; }
.entry > h4 { margin: .8em 0 .3em; font-size: .95em; font-family: ui-monospace, monospace; color: #444; }
div.table { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .85em; }
th, td { border: 1px solid #d7dce0; padding: .2em .55em; text-align: left; vertical-align: top; }
th { background: #eef2f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
caption { caption-side: bottom; text-align: left; color: #555; font-size: .92em; padding-top: .3em; }
figure { margin: 1em 0 1.4em; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e6e9; background: #fff; }
figcaption { color: #444; font-size: .9em; max-width: 60em; }
figcaption .command, code { font-family: ui-monospace, monospace; font-size: .92em; background: #f0f2f4;
                            padding: 0 .25em; }
.error { color: #9b1c1c; background: #fdecec; border: 1px solid #f3b9b9; padding: .5em .8em; }
.missing { color: #777; font-style: italic; }
footer { color: #777; font-size: .85em; padding: 1em 2em 2em; }
"""


def _escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _format_cell(value: Any) -> tuple[str, bool]:
    if value is None:
        return "–", False
    if isinstance(value, bool):
        return str(value).lower(), False
    if isinstance(value, int):
        return f"{value}", True
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value), True
        if abs(value) >= 1e7 or (0 < abs(value) < 1e-4):
            return f"{value:.4e}", True
        return (f"{value:.1f}" if abs(value) >= 1000 else f"{value:.4g}"), True
    return str(value), False


def _html_block(block: Block, number: list[int]) -> str:
    if isinstance(block, Text):
        return f"<p>{_escape(block.text)}</p>"
    if isinstance(block, Pre):
        caption = f'<p class="pre-caption">{_escape(block.caption)}</p>' if block.caption else ""
        return f"{caption}<pre>{_escape(block.text)}</pre>"
    if isinstance(block, Table):
        head = "".join(f"<th>{_escape(c)}</th>" for c in block.columns)
        body = []
        for row in block.rows:
            cells = []
            for value in row:
                text, numeric = _format_cell(value)
                cells.append(f'<td class="num">{_escape(text)}</td>' if numeric else f"<td>{_escape(text)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        caption = f"<caption>{_escape(block.caption)}</caption>" if block.caption else ""
        return (
            f'<div class="table"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            "</table></div>"
        )
    number[0] += 1
    encoded = base64.b64encode(block.data).decode("ascii")
    return (
        f'<figure><img src="data:{block.media_type};base64,{encoded}" alt="{_escape(block.title)}">'
        f"<figcaption><b>Figure {number[0]}. {_escape(block.title)}.</b> {_escape(block.caption)} "
        f'Made by <span class="command">{_escape(block.command)}</span>.</figcaption></figure>'
    )


@dataclass(frozen=True)
class _Rendered:
    run: Run
    entry: Entry
    section: Section | None
    error: str | None


def _render(run: Run, entry: Entry) -> _Rendered:
    renderer = RENDERERS[entry.kind]
    try:
        return _Rendered(run, entry, renderer(entry, run), None)
    except OSError as error:
        where = os.path.relpath(error.filename, run.directory) if error.filename else entry.file
        return _Rendered(run, entry, None, f"{where}: {error.strerror or error}")
    except (ValueError, KeyError, TypeError) as error:  # ValueErrors name their file; the others are bad data
        text = str(error)
        detail = text if entry.file in text else f"{entry.file}: {type(error).__name__} {text}"
        return _Rendered(run, entry, None, detail)


def build_report(directories: Sequence[str | os.PathLike[str]]) -> tuple[str, list[str]]:
    """The HTML page for run directories, and the errors of sections that could not be rendered.

    Parameters
    ----------
    directories : sequence of str or path-like
        One or more run directories; several are shown side by side.

    Returns
    -------
    html : str
        The page.
    errors : list of str
        One line per entry whose renderer failed (the page shows it in place of the section).

    Raises
    ------
    ValueError
        If ``directories`` is empty or a manifest is not valid.
    OSError
        If a manifest cannot be read.
    """
    if not directories:
        raise ValueError("'directories' must name at least one run directory, got none")
    runs = [read_run(d) for d in directories]
    kinds = [k for k in RENDERERS if any(run.first(k) for run in runs)]
    unknown = sorted({e.kind for run in runs for e in run.entries if e.kind not in RENDERERS})
    errors: list[str] = []
    figure_number = [0]
    sections = []
    headings: list[tuple[str, str]] = []
    for kind in kinds:
        columns = []
        title = None
        for run in runs:
            parts = []
            for entry in (e for e in run.entries if e.kind == kind):
                rendered = _render(run, entry)
                heading = f"<h4>{_escape(entry.file)}</h4>"
                if rendered.section is not None:
                    title = title or rendered.section.title
                    body = "".join(_html_block(b, figure_number) for b in rendered.section.blocks)
                else:
                    errors.append(f"{run.directory}: {rendered.error}")
                    body = f'<p class="error">Could not render this output: {_escape(rendered.error)}</p>'
                parts.append(f'<div class="entry">{heading}{body}</div>')
            if not parts:
                parts.append('<p class="missing">Not in this run.</p>')
            columns.append(_run_column(run, runs, "".join(parts)))
        headings.append((kind, title or kind))
        sections.append(_section(kind, title or kind, columns, len(runs)))
    if unknown:
        columns = []
        for run in runs:
            rows = [
                f"<tr><td>{_escape(e.kind)}</td><td><code>{_escape(e.file)}</code></td>"
                f"<td class=\"num\">{_escape(_size(run, e))}</td><td>{_escape(run.command(e))}</td></tr>"
                for e in run.entries
                if e.kind not in RENDERERS
            ]
            body = (
                "<table><caption>Outputs of kinds this report does not render yet, with their files (in the run "
                "directory).</caption><thead><tr><th>kind</th><th>file</th><th>bytes</th><th>made by</th></tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>"
                if rows
                else '<p class="missing">None in this run.</p>'
            )
            columns.append(_run_column(run, runs, body))
        headings.append(("other", "Other outputs"))
        sections.append(_section("other", "Other outputs", columns, len(runs)))
    return _page(runs, headings, "".join(sections)), errors


def _size(run: Run, entry: Entry) -> str:
    try:
        return str(run.path(entry).stat().st_size)
    except (OSError, ValueError):
        return "missing"


def _run_column(run: Run, runs: Sequence[Run], body: str) -> str:
    heading = f"<h3>{_escape(run.name)}</h3>" if len(runs) > 1 else ""
    return f'<div class="run">{heading}{body}</div>'


def _section(kind: str, title: str, columns: Sequence[str], count: int) -> str:
    return (
        f'<section class="kind" id="kind-{_escape(kind)}"><h2>{_escape(title)}</h2>'
        f'<div class="runs" style="--runs: {count}">{"".join(columns)}</div></section>'
    )


def _page(runs: Sequence[Run], headings: Sequence[tuple[str, str]], sections: str) -> str:
    if len(runs) == 1:
        title = f"terrain run {runs[0].name}"
    else:
        title = f"terrain runs {', '.join(r.name for r in runs)}"
    described = "".join(
        f"<p><b>{_escape(r.name)}</b>: {_escape(r.manifest.get('kind', '?'))} run, created "
        f"{_escape(r.manifest.get('created_at', '?'))} with terrain {_escape(r.manifest.get('terrain_version', '?'))}, "
        f"{len(r.entries)} outputs — <code>{_escape(r.directory)}</code></p>"
        for r in runs
    )
    links = [f'<a href="#kind-{_escape(kind)}">{_escape(heading)}</a>' for kind, heading in headings]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_escape(title)}</h1>{described}</header>"
        f"<nav>{''.join(links)}</nav><main>{sections}</main>"
        f"<footer>Written by terrain-analysis {__version__} report from the manifests alone; one file, no requests, "
        "no scripts.</footer></body></html>\n"
    )


def write_report(
    directories: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None
) -> tuple[Path, list[str]]:
    """Build the report and write it.

    Parameters
    ----------
    directories : sequence of str or path-like
        Run directories.
    out : str or path-like, optional
        The file to write; default ``report.html`` in the first run directory.

    Returns
    -------
    path : Path
        The file written.
    errors : list of str
        As for :func:`build_report`.
    """
    page, errors = build_report(directories)
    path = Path(out) if out is not None else Path(directories[0]) / "report.html"
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(page, encoding="utf-8")
    temporary.replace(path)
    return path, errors
