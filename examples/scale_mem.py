#!/usr/bin/env python3
"""Sums the resident (RSS) and proportional (PSS) memory of a cluster's VMs (docs/BENCHMARKS.md, "256 VMs").

usage: scale_mem.py STATE_DIR [--json]
Reads the nodes' OS pids from STATE_DIR/cluster.json and their /proc/PID/smaps_rollup.
"""
import json
import sys


def measure(state_dir):
    with open(state_dir + "/cluster.json") as f:
        nodes = json.load(f)["nodes"]
    rss = pss = alive = 0
    for pid in (n["os_pid"] for n in nodes if n.get("os_pid")):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
            alive += 1
        except OSError:
            pass
    per = max(alive, 1)
    return {"alive": alive, "rss_gb": rss / 1048576, "rss_mb_per_vm": rss / 1024 / per,
            "pss_gb": pss / 1048576, "pss_mb_per_vm": pss / 1024 / per}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        raise SystemExit(0 if len(sys.argv) > 1 else 2)
    m = measure(sys.argv[1])
    if "--json" in sys.argv:
        print(json.dumps(m))
    else:
        print("VMs %(alive)d alive; total RSS %(rss_gb).2f GB (%(rss_mb_per_vm).1f MB per VM), "
              "total PSS %(pss_gb).2f GB (%(pss_mb_per_vm).1f MB per VM)" % m)
