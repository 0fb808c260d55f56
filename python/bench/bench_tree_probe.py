"""Benchmark: tree-guided probing (``terrain probe --strategy tree``) at scale, simulated.

Run from the repository root after ``make build``::

    .venv/bin/python python/bench/bench_tree_probe.py

Every point is one ``bin/terrain topology simulate --json`` run: the same insertion and
repair code as the probe, against a latency model (docs/TOPOLOGY_DISCOVERY.md,
"Simulation"). It draws two figures into docs/figures/ and writes their data to
docs/bench/tree_probe.json:

* ``tree_probe_pairs.png`` -- ordered pairs measured against the number of nodes,
  16 ... 10,000 (noise 0.1, outliers 0.01), log-log, with n log2 n and n(n-1) (all
  pairs) for reference;
* ``tree_probe_exactness.png`` -- clade recall and precision of 1,000 nodes
  (10x10x10) against the noise (outliers 0.01) and against the outlier rate
  (noise 0.1), three seeds each (mean, and the worst seed as the lower end).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TERRAIN = ROOT / "bin" / "terrain"

SCALING = ["2x2x4", "4x4x4", "4x8x8", "10x10x10", "8x8x8x8", "10x10x10x10"]
NOISES = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5]
OUTLIERS = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2]
SEEDS = [1, 2, 3]


def simulate(shape: str, noise: float, outliers: float, seed: int) -> dict:
    """One ``terrain topology simulate`` run, its JSON object."""
    out = subprocess.run(
        [str(TERRAIN), "topology", "simulate", "--shape", shape, "--noise", str(noise),
         "--outliers", str(outliers), "--seed", str(seed), "--json"],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument("--data", type=Path, default=ROOT / "docs" / "bench" / "tree_probe.json")
    args = parser.parse_args(argv)

    scaling = []
    for shape in SCALING:
        r = simulate(shape, 0.1, 0.01, 1)
        print(f"{shape:>12}: n={r['nodes']:6d} pairs {r['pairs_measured']:8d} of {r['pairs_total']:10d} "
              f"({100 * r['fraction_measured']:.3f}%) recall {r['clade_recall']:.3f} "
              f"precision {r['clade_precision']:.3f} {r['seconds']:.1f} s", flush=True)
        scaling.append(r)
    by_noise = {x: [simulate("10x10x10", x, 0.01, s) for s in SEEDS] for x in NOISES}
    by_outliers = {x: [simulate("10x10x10", 0.1, x, s) for s in SEEDS] for x in OUTLIERS}
    for name, table in (("noise", by_noise), ("outliers", by_outliers)):
        for x, runs in table.items():
            print(f"{name} {x:5.2f}: recall " + " ".join(f"{r['clade_recall']:.3f}" for r in runs)
                  + "  precision " + " ".join(f"{r['clade_precision']:.3f}" for r in runs), flush=True)

    args.data.parent.mkdir(parents=True, exist_ok=True)
    args.data.write_text(json.dumps({"scaling": scaling,
                                     "by_noise": {str(k): v for k, v in by_noise.items()},
                                     "by_outliers": {str(k): v for k, v in by_outliers.items()}},
                                    indent=1) + "\n")

    args.out.mkdir(parents=True, exist_ok=True)
    n = np.array([r["nodes"] for r in scaling], dtype=float)
    pairs = np.array([r["pairs_measured"] for r in scaling], dtype=float)
    grid = np.geomspace(n.min(), n.max(), 100)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    ax.loglog(grid, grid * (grid - 1), "k--", lw=1, label="all pairs n(n-1)")
    ax.loglog(grid, grid * np.log2(grid), "k:", lw=1, label="n log2 n")
    ax.loglog(n, pairs, "o-", color="C0", label="tree probe (noise 0.1, outliers 0.01)")
    for r, x, y in zip(scaling, n, pairs):
        ax.annotate(r["model"].split(",")[0].replace("shape ", ""), (x, y), textcoords="offset points",
                    xytext=(4, -12), fontsize=7)
    ax.set_xlabel("nodes n")
    ax.set_ylabel("ordered pairs measured")
    ax.set_title("Tree-guided probing: pairs measured (simulated)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "tree_probe_pairs.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.0), sharey=True)
    for ax, (label, table) in zip(axes, (("noise sigma (outliers 0.01)", by_noise),
                                         ("outlier rate (noise 0.1)", by_outliers))):
        xs = list(table)
        for key, colour in (("clade_recall", "C0"), ("clade_precision", "C1")):
            mean = [np.mean([r[key] for r in table[x]]) for x in xs]
            worst = [min(r[key] for r in table[x]) for x in xs]
            ax.plot(xs, mean, "o-", color=colour, label=key.replace("_", " ") + " (mean of 3 seeds)")
            ax.plot(xs, worst, "v:", color=colour, alpha=0.6, label=key.replace("_", " ") + " (worst seed)")
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("against the model's tree")
    axes[0].set_ylim(-0.02, 1.05)
    axes[0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Tree-guided probing: exactness, 1,000 nodes (10x10x10, simulated)")
    fig.tight_layout()
    fig.savefig(args.out / "tree_probe_exactness.png", dpi=120)
    plt.close(fig)
    print(f"wrote {args.out / 'tree_probe_pairs.png'}, {args.out / 'tree_probe_exactness.png'}, {args.data}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
