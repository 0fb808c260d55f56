"""``terrain dashboard`` in headless Chromium (marked ``browser``; run alone: ``pytest -m browser``).

The live test starts a live cluster of 8 VMs (examples/live.cluster, a prefix and a state
directory of its own), opens the page the dashboard serves and asserts the DOM after a
join (``terrain up --add``), a leave (``terrain down --nodes``) and a ``kill -9`` of a VM.
The 256-node tests serve a synthetic snapshot (4 sites x 8 racks x 8 nodes, a probe
matrix, placed groups, attributes) with ``terrain dashboard --replay``: the same server
and page, without 256 VMs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import random
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from terrain_analysis.browser import open_page, page_problems

ROOT = Path(__file__).resolve().parents[2]
TERRAIN = ROOT / "bin" / "terrain"
READY = "document.body.dataset.ready === '1'"


def terrain(*arguments: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the terrain escript; fail the test with its stderr when it fails."""
    if not TERRAIN.exists():
        pytest.fail("terrain is not built: run 'make build' before these tests")
    done = subprocess.run([str(TERRAIN), *arguments], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, f"terrain {' '.join(arguments)} exited {done.returncode}: {done.stderr}"
    return done


@contextlib.contextmanager
def dashboard(*arguments: str) -> Iterator[str]:
    """``terrain dashboard --port 0 ARGUMENTS``; yields the URL it printed; SIGTERM at the end."""
    with subprocess.Popen(
        [str(TERRAIN), "dashboard", "--port", "0", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as process:
        try:
            assert process.stdout is not None and process.stderr is not None
            ready, _, _ = select.select([process.stdout], [], [], 30)
            assert ready, "terrain dashboard printed no URL within 30 s"
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), f"not a URL: {url!r}"
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)


def wait_for(page: Any, expression: str, seconds: float) -> float:
    """Seconds until ``expression`` is true in the page, polled every 50 ms; fails after ``seconds``."""
    start = time.monotonic()
    page.wait_until(expression, seconds)
    return time.monotonic() - start


def state_of(node: str) -> str:
    return f"(document.querySelector('button[data-node=\"{node}\"]') || {{dataset: {{}}}}).dataset.state"


def only_same_origin(page: Any) -> list[str]:
    """Console errors, and requests that left the page's origin (there must be none)."""
    errors, requests = page_problems(page)
    origin = page.url.rstrip("/")
    return errors + [r for r in requests if not r.startswith(origin + "/")]


# --------------------------------------------------------------------------------------------
# A live cluster


@pytest.fixture(scope="module")
def live_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state = tmp_path_factory.mktemp("dash-state")
    prefix = f"dt{os.getpid()}_"
    terrain("up", "examples/live.cluster", "--live", "--live-grace", "5000", "--prefix", prefix,
            "--state-dir", str(state))
    try:
        yield {"state": state, "prefix": prefix}
    finally:
        subprocess.run([str(TERRAIN), "down", "--state-dir", str(state), "--force"], capture_output=True, cwd=ROOT,
                       timeout=120)


def recorded(state: Path) -> dict[str, dict[str, Any]]:
    """The recorded nodes by spec name (``s1r1n1``)."""
    nodes = json.loads((state / "cluster.json").read_text())["nodes"]
    return {n["name"]: n for n in nodes}


@pytest.mark.browser
def test_join_leave_and_kill_show_on_the_page_within_2_s(live_cluster: dict[str, Any], tmp_path: Path) -> None:
    state: Path = live_cluster["state"]
    nodes = recorded(state)
    host = nodes["s1r1n1"]["node"].split("@")[1]
    joined = f"{live_cluster['prefix']}s1r2n3@{host}"
    left, killed = nodes["s2r1n1"]["node"], nodes["s1r1n2"]
    with dashboard("--state-dir", str(state)) as url, open_page(url, width=1400, height=1000, timeout=600) as page:
        page.wait_until(READY, 10)
        assert page.evaluate("document.querySelectorAll('#tree button.node').length") == 8
        page.wait_until("[...document.querySelectorAll('#tree button.node')].every(b => b.dataset.state === 'up')", 10)

        terrain("up", "--add", "examples/live_add.cluster", "--state-dir", str(state))
        seconds = wait_for(page, f"!!document.querySelector('button[data-node=\"{joined}\"]')", 2)
        print(f"join: {joined} on the page {seconds:.2f} s after 'terrain up --add' returned")
        # the sequencer places it by measurement: then it is in the tree, up, and the log says how
        in_tree = f"!!document.querySelector('#tree button[data-node=\"{joined}\"]')"
        page.wait_until(f"{in_tree} && {state_of(joined)} === 'up'", 60)
        join_row = f"document.querySelector('#change-rows tr[data-kind=join][data-node=\"{joined}\"]')"
        row = page.wait_until(f"(r => r && r.textContent)({join_row})", 5)
        assert "pairs measured" in row and "joined next to" in row

        terrain("down", "--nodes", "s2r1n1", "--state-dir", str(state))
        seconds = wait_for(page, f"{state_of(left)} === 'leaving'", 2)
        print(f"leave: {left} leaving on the page {seconds:.2f} s after 'terrain down --nodes' returned")

        os.kill(int(killed["os_pid"]), signal.SIGKILL)
        seconds = wait_for(page, f"{state_of(killed['node'])} === 'suspect'", 2)
        print(f"kill -9: {killed['node']} suspect on the page {seconds:.2f} s after the signal")

        # after the grace period the sequencer removes both: a leave row each, and they leave the tree
        page.wait_until(f"!document.querySelector('#tree button[data-node=\"{left}\"]')", 30)
        assert page.evaluate(f"!!document.querySelector('#change-rows tr[data-kind=leave][data-node=\"{left}\"]')")
        page.screenshot(tmp_path / "dashboard-live.png")
        assert only_same_origin(page) == []


# --------------------------------------------------------------------------------------------
# 256 nodes from a recorded (synthetic) snapshot


def synthetic_snapshot(sites: int = 4, racks: int = 8, per_rack: int = 8, seed: int = 1) -> dict[str, Any]:
    """A ``terrain.dashboard/1`` snapshot of sites x racks x per_rack nodes, as the live view makes it."""
    rng = random.Random(seed)
    one_way = {"cluster": 25000, "site": 2500, "rack": 250}
    levels = [{"level": "cluster", "latency_us": one_way["cluster"]}]
    sites_json, nodes, paths = [], [], {}
    for s in range(1, sites + 1):
        levels.append({"level": f"s{s}", "latency_us": one_way["site"]})
        racks_json = []
        for r in range(1, racks + 1):
            levels.append({"level": f"s{s}/s{s}r{r}", "latency_us": one_way["rack"]})
            members = [f"syn_s{s}r{r}n{n}@vm" for n in range(1, per_rack + 1)]
            for m in members:
                paths[m] = [f"s{s}", f"s{s}r{r}"]
                nodes.append({"node": m, "state": "up", "group_path": paths[m]})
            racks_json.append({"name": f"s{s}r{r}", "height": 2 * one_way["rack"],
                               "children": [{"node": m} for m in members]})
        sites_json.append({"name": f"s{s}", "height": 2 * one_way["site"], "children": racks_json})
    names = [n["node"] for n in nodes]
    nodes[3]["state"], nodes[70]["state"], nodes[200]["state"] = "suspect", "leaving", "joining"

    def rtt(a: str, b: str) -> float:
        pa, pb = paths[a], paths[b]
        level = "rack" if pa == pb else "site" if pa[0] == pb[0] else "cluster"
        return 2 * one_way[level] * rng.uniform(1.0, 1.3)

    median = [[None if a == b else round(rtt(a, b), 1) for b in names] for a in names]
    attributes = {
        n: {"vm_schedulers_online": "1", "loadavg5": f"{rng.uniform(0, 2):.2f}",
            "mem_free": str(rng.randrange(1 << 30)), "otp_release": '"25"',
            "cpu_topology": "[{processor,[{core,{logical,0}}]}]"}
        for n in names
    }
    groups = [{"name": "workers", "owner": names[0], "count": 8, "restarted": 1, "replaced": 2,
               "members": [{"node": names[i], "domain": paths[names[i]][1], "pid": f"<0.{100 + i}.0>"}
                           for i in range(0, 256, 32)]}]
    changes = [{"kind": "join", "node": names[i], "version": i, "siblings": names[i - 1 : i], "pairs": 7,
                "at": "2026-11-27T16:00:00Z"} for i in range(255, 200, -1)]
    return {
        "format": "terrain.dashboard/1", "cluster": "synthetic", "version": 255, "sequencer": names[0], "live": True,
        "tree": {"name": "synthetic", "height": 2 * one_way["cluster"], "children": sites_json},
        "levels": levels, "nodes": nodes, "attributes": attributes, "groups": groups, "changes": changes,
        "probe": {"file": "runs/synthetic/latency.json", "nodes": names, **heatmap(median)},
    }


def heatmap(matrix: list[list[float | None]]) -> dict[str, Any]:
    """A probe's medians as the view sends them: one byte a cell, 0 unknown, else 1 + 254 log steps from min to max."""
    values = [v for row in matrix for v in row if v]
    low, high = min(values), max(values)
    span = max(math.log(high) - math.log(low), 1e-9)
    cells = bytes(1 + round(254 * (math.log(v) - math.log(low)) / span) if v else 0 for row in matrix for v in row)
    return {"min_us": low, "max_us": high, "cells": base64.b64encode(cells).decode()}


@pytest.fixture(scope="module")
def replay_256(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    file = tmp_path_factory.mktemp("dash-256") / "state.json"
    file.write_text(json.dumps(synthetic_snapshot()))
    with dashboard("--replay", str(file)) as url:
        yield url


@pytest.mark.browser
def test_the_tree_renders_256_nodes_and_search_narrows_it(replay_256: str, tmp_path: Path) -> None:
    with open_page(replay_256, width=1400, height=1000) as page:
        page.wait_until(READY, 10)
        assert page.evaluate("document.querySelectorAll('#tree button.node').length") == 256
        assert page.evaluate("document.querySelectorAll('#tree details').length") == 1 + 4 + 32
        assert page.evaluate("document.querySelector('button[data-node=\"syn_s1r1n4@vm\"]').dataset.state") == "suspect"
        assert page.evaluate("document.querySelectorAll('#change-rows tr').length") == 55
        assert page.evaluate("document.getElementById('probe-map').width") == 256
        assert page.evaluate("document.getElementById('chaos-section').hidden")  # not a chaos run
        page.screenshot(tmp_path / "dashboard-256.png")
        page.evaluate("(i => { i.value = 's3r5'; i.dispatchEvent(new Event('input')); })"
                      "(document.getElementById('search'))")
        visible = (
            "[...document.querySelectorAll('#tree button.node')]"
            ".filter(b => !b.closest('[hidden]') && !b.closest('details:not([open])')).map(b => b.dataset.node)"
        )
        shown = page.evaluate(visible)
        assert sorted(shown) == [f"syn_s3r5n{n}@vm" for n in range(1, 9)]
        assert page.evaluate("document.getElementById('matches').textContent").startswith("8 nodes match")
        page.evaluate("document.getElementById('collapse').click()")
        assert page.evaluate(visible) == []
        assert only_same_origin(page) == []


@pytest.mark.browser
def test_keyboard_reaches_search_tree_and_nodes_and_everything_is_labelled(replay_256: str) -> None:
    with open_page(replay_256, width=1400, height=1000) as page:
        page.wait_until(READY, 10)
        focused = "(e => e.id || e.dataset.node || e.dataset.key || e.tagName)(document.activeElement)"
        seen = []
        for _ in range(8):
            page.key("Tab", "Tab", 9)
            seen.append(page.evaluate(focused))
        assert seen[:4] == ["search", "expand", "collapse", "SUMMARY"], seen
        assert "syn_s1r1n1@vm" in seen  # the first node's button, after its site and rack
        # Enter on the focused node chooses it: its attributes are shown
        while page.evaluate(focused) != "syn_s1r1n1@vm":
            page.key("Tab", "Tab", 9)
        page.key("Enter", "Enter", 13, "\r")
        page.wait_until("document.getElementById('attrs-node').textContent === 'syn_s1r1n1@vm'", 2)
        assert page.evaluate("document.querySelectorAll('#attrs tbody tr').length") == 5
        chosen = "document.querySelector('button[data-node=\"syn_s1r1n1@vm\"]')"
        assert page.evaluate(f"{chosen}.getAttribute('aria-pressed')") == "true"
        # every control and region has a name
        unnamed = page.evaluate(
            "[...document.querySelectorAll('button, input, summary, canvas, nav, .scroll')]"
            ".filter(e => !(e.getAttribute('aria-label') || e.textContent.trim()"
            " || (e.id && document.querySelector(`label[for=${e.id}]`))))"
            ".map(e => e.outerHTML.slice(0, 80))"
        )
        assert unnamed == []
        # the sections shown (the chaos run's stays hidden: no chaos run here)
        assert page.evaluate("[...document.querySelectorAll('h2')].filter(h => !h.closest('[hidden]'))"
                             ".map(h => h.textContent.split(' ')[0])") == [
            "Live", "Attributes", "Placed", "Change", "Latency"]
        # Enter on a summary collapses its network
        page.evaluate("document.querySelector('#tree details details summary').focus()")
        page.key("Enter", "Enter", 13, "\r")
        assert page.evaluate("document.querySelector('#tree details details').open") is False


# --------------------------------------------------------------------------------------------
# A chaos run's timeline (terrain chaos; docs/DASHBOARD.md, "A chaos run")


@pytest.mark.browser
def test_a_chaos_run_shows_its_timeline_of_faults_and_versions(tmp_path: Path) -> None:
    snapshot = synthetic_snapshot()
    snapshot["chaos"] = [
        {"t": 5000, "op": "burst_start", "burst": 1},
        {"t": 5100, "op": "kill", "node": "syn_s1r1n1@vm", "result": "ok", "burst": 1},
        {"t": 5200, "op": "join", "node": None, "result": "network emulation failed", "burst": 1},
        {"t": 5300, "op": "partition", "node": None, "result": "ok", "burst": 1},
        {"t": 6500, "op": "heal", "node": None, "result": "ok", "burst": 1},
        {"t": 7000, "op": "burst_end", "burst": 1},
        {"t": 7100, "op": "versions", "version": 5, "pairs": 2},
        {"t": 9000, "op": "versions", "version": 6, "pairs": 1},
    ]
    file = tmp_path / "state.json"
    file.write_text(json.dumps(snapshot))
    with dashboard("--replay", str(file)) as url, open_page(url, width=1400, height=1000) as page:
        page.wait_until(READY, 10)
        assert not page.evaluate("document.getElementById('chaos-section').hidden")
        # one burst band and a mark for each fault or end (kill, the failed join, partition, heal)
        assert page.evaluate("document.querySelectorAll('#chaos-svg rect').length") == 5
        assert page.evaluate("document.querySelectorAll('#chaos-svg circle').length") == 1  # two version/tree pairs
        assert page.evaluate("document.querySelectorAll('#chaos-rows tbody tr').length") == 6
        assert page.evaluate("document.getElementById('chaos-sum').textContent").startswith(
            "2 faults injected in 1 bursts; version 6, one version and tree on every node")
        page.screenshot(tmp_path / "dashboard-chaos.png")
        assert only_same_origin(page) == []
