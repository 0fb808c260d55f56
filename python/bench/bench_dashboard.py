"""Benchmark: ``terrain dashboard`` (docs/DASHBOARD.md; goals in docs/BENCHMARKS.md).

Run from the repository root after ``make build``::

    .venv/bin/python python/bench/bench_dashboard.py [--load-seconds 60] [--idle-seconds 30]

Measures, and prints one line each (``--json FILE`` also writes them):

* **page ready at 256 nodes**: ``performance.mark('terrain-ready')`` (the snapshot rendered)
  in headless Chromium, from navigation start, median of 5 loads of a synthetic 256-node
  snapshot served by ``terrain dashboard --replay`` (the same server and page);
* **page weight**: what one load transfers at 256 nodes: the page, the ``snapshot`` event, and the
  attributes of the node shown first;
* **update delay**: on a live cluster of 8 VMs (examples/live.cluster), for each change
  message of a join (``up --add``) and a leave (``down --nodes``), the page's clock when
  it showed the row minus the view's clock when the subscription message arrived;
* **idle CPU**: the dashboard VM's user + system CPU time (/proc/PID/stat) over
  ``--idle-seconds`` with one page open and nothing changing, as a share of one core;
* **load**: 100 concurrent clients on loopback for ``--load-seconds`` (80 loop on ``/`` and
  ``/state.json``, 20 hold ``/events`` streams); errors counted; the cluster unaffected
  (every node up, one live version, before and after).
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TERRAIN = ROOT / "bin" / "terrain"
sys.path.insert(0, str(ROOT / "python" / "src"))
from terrain_analysis.browser import open_page  # noqa: E402


def synthetic_snapshot() -> dict[str, Any]:
    """The 256-node snapshot of the browser tests (one definition, in python/tests/test_dashboard.py)."""
    spec = importlib.util.spec_from_file_location("test_dashboard", ROOT / "python" / "tests" / "test_dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    snapshot: dict[str, Any] = module.synthetic_snapshot()
    return snapshot


def start_dashboard(*arguments: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([str(TERRAIN), "dashboard", "--port", "0", *arguments], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 30)
    if not ready:
        raise SystemExit("terrain dashboard printed no URL within 30 s")
    return process, process.stdout.readline().strip()


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=10)
    if process.stdout:
        process.stdout.close()


def terrain(*arguments: str) -> str:
    return subprocess.run([str(TERRAIN), *arguments], check=True, capture_output=True, text=True, cwd=ROOT).stdout


def get(url: str, path: str) -> bytes:
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status}")
    return body


def page_ready_256(work: Path) -> dict[str, Any]:
    file = work / "state256.json"
    file.write_text(json.dumps(synthetic_snapshot()))
    process, url = start_dashboard("--replay", str(file))
    try:
        times = []
        for _ in range(5):
            with open_page(url, width=1400, height=1000) as page:
                page.wait_until("document.body.dataset.ready === '1'", 10)
                times.append(page.evaluate("performance.getEntriesByName('terrain-ready')[0].startTime"))
        page_bytes, snapshot_bytes = len(get(url, "/")), len(first_event(url))
        attributes_bytes = len(get(url, "/attributes?node=syn_s1r1n1%40vm"))
    finally:
        stop(process)
    return {"page_ready_ms_256": [round(t) for t in times], "page_ready_ms_256_median": round(statistics.median(times)),
            "page_bytes": page_bytes, "snapshot_event_bytes_256": snapshot_bytes, "attributes_bytes": attributes_bytes,
            "page_weight_bytes_256": page_bytes + snapshot_bytes + attributes_bytes}


def first_event(url: str) -> bytes:
    """The ``snapshot`` event the page gets first on /events."""
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", "/events")
    response = connection.getresponse()
    event = b""
    while not event.endswith(b"\n\n") or b"event: snapshot" not in event:
        event += response.fp.readline()
    connection.close()
    return event[event.index(b"event: snapshot"):]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def live_status(state: Path) -> list[tuple[str, Any]]:
    nodes = json.loads(terrain("status", "--json", "--state-dir", str(state)))["nodes"]
    return sorted((n["node"], (n["state"], n.get("live_version"))) for n in nodes)


def load(url: str, seconds: float) -> dict[str, Any]:
    """100 clients at once: 80 request loops, 20 event streams; every failure counted."""
    until = time.monotonic() + seconds
    counts = {"requests": 0, "errors": 0, "streams": 0, "stream_errors": 0}
    errors: list[str] = []
    lock = threading.Lock()

    def loop(k: int) -> None:
        while time.monotonic() < until:
            try:
                get(url, "/" if k % 2 else "/state.json")
                with lock:
                    counts["requests"] += 1
            except Exception as why:  # noqa: BLE001 - every failure is counted and reported
                with lock:
                    counts["errors"] += 1
                    errors.append(repr(why))

    def stream() -> None:
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        try:
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            connection.request("GET", "/events")
            response = connection.getresponse()
            assert response.status == 200
            first = response.readline()
            while time.monotonic() < until and first:
                first = response.fp.readline() if time.monotonic() < until else b""
            with lock:
                counts["streams"] += 1
            connection.close()
        except Exception as why:  # noqa: BLE001 - counted and reported
            with lock:
                counts["stream_errors"] += 1
                errors.append(repr(why))

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(80)]
    threads += [threading.Thread(target=stream) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return {**counts, "first_errors": errors[:5]}


def live(work: Path, idle_seconds: float, load_seconds: float) -> dict[str, Any]:
    state = work / "state"
    prefix = f"db{os.getpid()}_"
    terrain("up", "examples/live.cluster", "--live", "--live-grace", "3000", "--prefix", prefix,
            "--state-dir", str(state))
    try:
        process, url = start_dashboard("--state-dir", str(state), "--runs-dir", str(work / "runs"))
        try:
            with open_page(url, width=1400, height=1000, timeout=idle_seconds + 300) as page:
                page.wait_until("document.body.dataset.ready === '1'", 10)
                time.sleep(6)  # the first attribute and group polls are done
                before = cpu_seconds(process.pid)
                time.sleep(idle_seconds)
                idle = (cpu_seconds(process.pid) - before) / idle_seconds
                terrain("up", "--add", "examples/live_add.cluster", "--state-dir", str(state))
                page.wait_until("!!document.querySelector('#change-rows tr[data-kind=join]')", 60)
                terrain("down", "--nodes", "s2r1n1", "--state-dir", str(state))
                page.wait_until("!!document.querySelector('#change-rows tr[data-kind=leave]')", 60)
                delays = page.evaluate(
                    "[...document.querySelectorAll("
                    "'#change-rows tr[data-kind=join], #change-rows tr[data-kind=leave]')]"
                    ".map(r => ({kind: r.dataset.kind, delay: r.dataset.appliedMs - r.dataset.receivedMs}))")
            before_load = live_status(state)
            loaded = load(url, load_seconds)
            after_load = live_status(state)
        finally:
            stop(process)
    finally:
        subprocess.run([str(TERRAIN), "down", "--state-dir", str(state), "--force"], capture_output=True, cwd=ROOT)
    return {"idle_cpu_share_of_a_core": round(idle, 4), "update_delays_ms": delays, "load": loaded,
            "cluster_unaffected": before_load == after_load, "cluster_before": before_load, "cluster_after": after_load}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load-seconds", type=float, default=60)
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="terrain-bench-dashboard-") as directory:
        work = Path(directory)
        result = {"load_average_at_start": os.getloadavg()[0]}
        result |= page_ready_256(work) | live(work, args.idle_seconds, args.load_seconds)
        result["load_average_at_end"] = os.getloadavg()[0]
    for key, value in result.items():
        print(f"{key}: {json.dumps(value)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
