"""Recall and fraction of pairs of the tree probe replayed on the real matrices
(apps/terrain/test/data/real), for fixed gaps against the automatic level model.

    python/bench/bench_real_matrices.py [--out docs/figures/real_matrices.png]

Runs the Erlang replay (terrain_lab_replay) in one VM from the build in _build/default,
writes real_matrices.json beside the figure, and draws two panels per dataset; a third
panel shows full discovery (terrain:discover/2 at its defaults) on the same matrices:
its top-level ARI against the truth (continents for places; 1.0 when both trees are
flat), written to real_matrices.discovery.json.
"""
import argparse
import json
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "apps/terrain/test/data/real"
SETTINGS = [("gap 10", {"gap": 10}), ("gap 4", {"gap": 4}), ("gap 2", {"gap": 2}), ("automatic", {})]

ERL = r"""
Run = fun(Name, Insert) ->
    {ok, M} = terrain_lab_replay:read(Name ++ ".latency.json"),
    {ok, J} = file:read_file(Name ++ ".truth.json"),
    {ok, T, _} = terrain_topology:from_json(J),
    {ok, R} = terrain_lab_replay:run(#{matrix => M, truth => T, insert => Insert}),
    maps:with([nodes, fraction_measured, clade_recall, clade_precision], R)
end,
Names = [filename:rootname(filename:rootname(F)) || F <- filelib:wildcard("DIR/*.latency.json")],
Settings = SETTINGS,
Out = [#{name => list_to_binary(filename:basename(N)), label => list_to_binary(L), result => Run(N, I)}
       || N <- Names, {L, I} <- Settings],
io:format("~s~n", [terrain_json:encode(Out)]),
halt().
"""


DISCOVERY_ERL = r"""
Score = fun(Name) ->
    {ok, L} = terrain:read_latency(Name ++ ".latency.json"),
    {ok, #{topology := Found}} = terrain:discover(L, #{}),
    {ok, J} = file:read_file(Name ++ ".truth.json"),
    {ok, T, _} = terrain_topology:from_json(J),
    {ok, R} = terrain:compare_topologies(Found, T),
    Top = case maps:get(levels, R) of [#{ari := A} | _] -> A; [] -> 1.0 end,
    #{top_ari => Top, clade_recall => maps:get(clade_recall, R), clade_precision => maps:get(clade_precision, R)}
end,
Names = [filename:rootname(filename:rootname(F)) || F <- filelib:wildcard("DIR/*.latency.json")],
Out = [#{name => list_to_binary(filename:basename(N)), result => Score(N)} || N <- Names],
io:format("~s~n", [terrain_json:encode(Out)]),
halt().
"""


def erl(code):
    ebins = [str(p) for p in (ROOT / "_build/default/lib").glob("*/ebin")]
    args = ["erl", "-noshell"] + sum((["-pa", e] for e in ebins), []) + ["-eval", code]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def run_discovery():
    return erl(DISCOVERY_ERL.replace("DIR", str(DATA)))


def run():
    settings = "[" + ",".join('{"%s", #{%s}}' % (label, ",".join(f"{k} => {v}" for k, v in opts.items()))
                              for label, opts in SETTINGS) + "]"
    return erl(ERL.replace("DIR", str(DATA)).replace("SETTINGS", settings))


def draw(rows, discovery, out):
    names = sorted({r["name"] for r in rows})
    fig, axes = plt.subplots(3, 1, figsize=(13, 10), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2]})
    width = 0.8 / len(SETTINGS)
    for k, (label, _) in enumerate(SETTINGS):
        by = {r["name"]: r["result"] for r in rows if r["label"] == label}
        xs = [i + (k - (len(SETTINGS) - 1) / 2) * width for i in range(len(names))]
        axes[0].bar(xs, [by[n]["clade_recall"] for n in names], width, label=label)
        axes[1].bar(xs, [by[n]["fraction_measured"] for n in names], width, label=label)
    axes[0].set_ylabel("clade recall")
    axes[0].axhline(0.95, color="grey", lw=0.8, ls="--")
    # above the panel: inside it the legend hid the low bars of the first datasets
    axes[0].legend(ncol=4, fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 1.0))
    axes[1].set_ylabel("fraction of ordered pairs")
    axes[1].axhline(0.30, color="grey", lw=0.8, ls="--")
    axes[1].axhline(0.20, color="grey", lw=0.8, ls=":")
    top = {d["name"]: d["result"]["top_ari"] for d in discovery}
    axes[2].bar(range(len(names)), [top[n] for n in names], 0.5, color="black")
    axes[2].set_ylabel("full discovery:\ntop-level ARI")
    axes[2].set_ylim(0, 1.05)
    axes[2].axhline(0.8, color="grey", lw=0.8, ls="--")
    axes[2].axhline(0.7, color="grey", lw=0.8, ls=":")
    axes[2].set_xticks(range(len(names)))
    axes[2].set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    axes[0].set_title("Tree probe replayed on real matrices: fixed gaps against the automatic level model",
                      loc="left", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=str(ROOT / "docs/figures/real_matrices.png"))
    a = p.parse_args()
    rows = run()
    Path(a.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    discovery = run_discovery()
    Path(a.out).with_suffix(".discovery.json").write_text(json.dumps(discovery, indent=1) + "\n")
    draw(rows, discovery, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
