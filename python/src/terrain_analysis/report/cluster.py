"""Sections of the cluster: ``cluster`` (nodes, groups, the group tree) and ``attributes`` (one row per node)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure as MplFigure

from terrain_analysis.formats import KINDS
from terrain_analysis.report.model import (
    Block,
    Entry,
    Run,
    Section,
    Table,
    Text,
    figure_from_matplotlib,
    new_figure,
    read_json,
    report_command,
    table_cell,
)


def _host(node: str) -> str:
    return node.split("@", 1)[1] if "@" in node else "?"


def render_cluster(entry: Entry, run: Run) -> Section:
    """``cluster``: ``cluster.json`` (``terrain.cluster/1``) — nodes, groups, schedulers, CPU, hosts; the tree."""
    document = read_json(run, entry, KINDS["cluster"].formats)
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
                command=f"{report_command(run)} (from {entry.file}, made by {run.command(entry)})",
            )
        )
    return Section("Cluster", blocks)


def _group_tree_figure(document: Mapping[str, Any]) -> MplFigure:
    nodes = document.get("nodes") or []
    latency = {
        str(lv.get("level")): lv.get("latency_us") for lv in document.get("levels") or [] if isinstance(lv, dict)
    }
    depth = max((len(n.get("group_path") or []) for n in nodes), default=0) + 1
    figure, ax = new_figure(max(6.0, min(16.0, 0.55 * len(nodes))), 3.8)
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
        document = read_json(run, entry, KINDS["attributes"].formats)
    except (OSError, ValueError):
        return {}  # the attributes section reports the problem
    result = {}
    for row in document.get("nodes") or []:
        values = row.get("attributes") or {}
        result[str(row.get("node"))] = {name: values.get(name) for name in names}
    return result


def render_attributes(entry: Entry, run: Run) -> Section:
    """``attributes``: ``attributes.json`` (``terrain.attributes/1``) — one row per node, one column per name."""
    document = read_json(run, entry, KINDS["attributes"].formats)
    names = [str(n) for n in document.get("names") or []]
    rows = []
    for row in document.get("nodes") or []:
        values = row.get("attributes")
        if isinstance(values, dict):
            rows.append([row.get("node")] + [table_cell(values.get(name)) for name in names])
        else:
            rows.append([row.get("node")] + [f"({row.get('error', 'no answer')})"] + [""] * (len(names) - 1))
    timeout = document.get("timeout_ms")
    return Section(
        "Attributes",
        [
            Table(
                ["node"] + names,
                rows,
                "Asked of all nodes at once with terrain:attrs/3"
                + (f" under one deadline of {timeout} ms" if timeout is not None else "")
                + f" by {run.command(entry)}; 'undefined' where a node has no value.",
            )
        ],
    )
