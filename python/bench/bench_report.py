"""Benchmark: the HTML report of a run directory — its size and the time to build it.

Run from the repository root, after ``make demo``::

    .venv/bin/python python/bench/bench_report.py [RUN_DIR]

RUN_DIR defaults to the newest ``runs/*/`` whose manifest is a demo run's. The script
runs ``terrain-analysis report RUN_DIR --out TMP`` ``--repeats`` times as a separate
process (what ``terrain report`` and ``make demo`` do) and, side by side in the same
loop, the baseline ``python -c "import terrain_analysis.report"`` (interpreter start-up
and imports: numpy, scipy, matplotlib), then times ``build_report`` in this process
(imports done), and prints the median of each and the size of the page. Goals: the
page built in at most 10 s (``build_report``: start-up and imports depend on the
machine's load, not on the report; both are printed), at most 5 MB. Exits 1 if a goal
is missed; without any run directory it says so on stderr and exits 0 (``make bench``
does not run the demo).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from terrain_analysis import __version__
from terrain_analysis.report import build_report

GOAL_SECONDS = 10.0
GOAL_BYTES = 5 * 1024 * 1024


def _newest_demo_run(runs: Path) -> Path | None:
    candidates = []
    for manifest in runs.glob("*/manifest.json"):
        try:
            if json.loads(manifest.read_text()).get("kind") == "demo":
                candidates.append(manifest.parent)
        except (OSError, ValueError):
            continue
    return max(candidates, default=None, key=lambda p: p.name)


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path, help="run directory (default: the newest demo run in runs/)")
    parser.add_argument("--repeats", type=int, default=5, help="timed builds (default 5)")
    arguments = parser.parse_args(argv)
    run = arguments.run or _newest_demo_run(Path("runs"))
    if run is None:
        print("bench_report: no demo run directory in runs/ ('make demo' writes one); skipped", file=sys.stderr)
        return 0
    analysis = str(Path(sys.executable).with_name("terrain-analysis"))
    with tempfile.TemporaryDirectory(prefix="terrain-bench-report-") as scratch:
        out = Path(scratch) / "report.html"
        builds, baselines = [], []
        for _ in range(arguments.repeats):
            baselines.append(_seconds([sys.executable, "-c", "import terrain_analysis.report"]))
            builds.append(_seconds([analysis, "report", str(run), "--out", str(out)]))
        size = out.stat().st_size
    in_process = []
    for _ in range(arguments.repeats):
        start = time.perf_counter()
        build_report([run])
        in_process.append(time.perf_counter() - start)
    build, baseline, rendering = statistics.median(builds), statistics.median(baselines), statistics.median(in_process)
    load = os.getloadavg()
    print(f"report of {run} ({__version__}, python {platform.python_version()}, load average {load[0]:.1f})")
    print(f"  terrain-analysis report process, median of {arguments.repeats}: {build:.2f} s")
    print(f"  baseline in the same loop: python start-up and imports:   {baseline:.2f} s")
    print(f"  build_report in this process (imports done), median:      {rendering:.2f} s  (goal <= 10 s)")
    print(f"  size: {size} bytes = {size / 1024 / 1024:.2f} MiB  (goal <= 5 MiB)")
    ok = rendering <= GOAL_SECONDS and size <= GOAL_BYTES
    if not ok:
        print("bench_report: goal missed", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
