"""Full discovery on random subsets of the real matrices (apps/terrain/test/data/real):
how well the top level holds when a table has other regions than the ones the rule
was built on (issue 35: "build for data you have not seen").

    python/bench/bench_discovery_subsets.py [--subsets 40] [--cpus 10] [--seed 1] [--json OUT]

For every wide-area table, `--subsets` subsets that each drop a random 10-20% of the
nodes; the city mesh also cut down to random tables of 20-50 cities (the size of a
cloud provider's region list); every CPU matrix, `--cpus` (10) subsets dropping 10-20% of the
CPUs. Each subset is discovered with terrain:discover/2 at its defaults and scored
against the truth restricted to its nodes: the top-level ARI (the continents; for a
CPU, the clade recall and precision). Prints one line per dataset: min, 10th
percentile, median of the ARI and the share of subsets at or above the goal.
Runs the Erlang code of the build in _build/default in one VM.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "apps/terrain/test/data/real"

ERL = r"""
Keep = fun Keep({node, N} = T, Set) -> case maps:is_key(N, Set) of true -> [T]; false -> [] end;
           Keep(Net, Set) ->
               Kids = element(tuple_size(Net), Net),
               case lists:append([Keep(K, Set) || K <- Kids]) of
                   [] -> [];
                   Kept -> [setelement(tuple_size(Net), Net, Kept)]
               end
       end,
Run = fun(Name, Count, Pick) ->
    {ok, #{nodes := Nodes, stats := #{min := Rows}}} = terrain:read_latency(Name ++ ".latency.json"),
    {ok, J} = file:read_file(Name ++ ".truth.json"),
    {ok, Truth, _} = terrain_topology:from_json(J),
    N = length(Nodes),
    [begin
         K = Pick(N),
         Idx = lists:sort(lists:sublist([I || {_, I} <- lists:sort([{rand:uniform(), I} || I <- lists:seq(1, N)])], K)),
         Sub = [lists:nth(I, Nodes) || I <- Idx],
         SubRows = [[lists:nth(C, lists:nth(R, Rows)) || C <- Idx] || R <- Idx],
         {ok, #{topology := Found}} = terrain:discover(#{nodes => Sub, stats => #{min => SubRows}}, #{}),
         [T] = Keep(Truth, maps:from_keys(Sub, true)),
         {ok, Score} = terrain:compare_topologies(Found, T),
         Ari = case maps:get(levels, Score) of [#{ari := A} | _] -> A; [] -> null end,
         #{nodes => K, ari => Ari, recall => maps:get(clade_recall, Score),
           precision => maps:get(clade_precision, Score)}
     end || _ <- lists:seq(1, Count)]
end,
rand:seed(exsss, SEED),
Drop = fun(N) -> N - round(N * (0.1 + 0.1 * rand:uniform())) end,
Small = fun(_) -> 19 + rand:uniform(31) end,
Dir = "DIR/",
Wide = [{"aws-regions", Drop}, {"azure-regions", Drop}, {"gcp-regions", Drop}, {"ripe-countries", Drop},
        {"wonderproxy-cities", Drop}],
Out = [#{name => list_to_binary(Label), runs => Run(Dir ++ Name, SUBSETS, P)}
       || {Label, Name, P} <- [{N, N, P} || {N, P} <- Wide]
                              ++ [{"wonderproxy-cities 20-50", "wonderproxy-cities", Small}]]
      ++ [#{name => list_to_binary(filename:basename(F, ".latency.json")),
            runs => Run(filename:rootname(F, ".latency.json"), CPUS, Drop)}
          || F <- lists:sort(filelib:wildcard(Dir ++ "cpu-*.latency.json"))],
io:format("~s~n", [terrain_json:encode(Out)]),
halt().
"""


def run(subsets, cpus, seed):
    code = ERL.replace("DIR", str(DATA)).replace("SUBSETS", str(subsets)).replace("SEED", str(seed))
    code = code.replace("CPUS", str(cpus))
    ebins = [str(p) for p in (ROOT / "_build/default/lib").glob("*/ebin")]
    args = ["erl", "-noshell"] + sum((["-pa", e] for e in ebins), []) + ["-eval", code]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def summary(dataset):
    runs = dataset["runs"]
    name = dataset["name"]
    if name.startswith("cpu-"):
        exact = sum(1 for r in runs if r["recall"] == 1.0 and r["precision"] == 1.0)
        worst = min(min(r["recall"], r["precision"]) for r in runs)
        return f"{name:28s} {len(runs):3d} subsets: exact {exact}/{len(runs)}, worst recall/precision {worst:.3f}"
    aris = [r["ari"] if r["ari"] is not None else 0.0 for r in runs]
    goal = 0.7 if name.startswith("wonderproxy-cities") else 0.8
    share = sum(1 for a in aris if a >= goal) / len(aris)
    sizes = sorted(r["nodes"] for r in runs)
    return (f"{name:28s} {len(runs):3d} subsets of {sizes[0]}-{sizes[-1]} nodes: top ARI min {min(aris):.3f}, "
            f"p10 {percentile(aris, 0.1):.3f}, median {percentile(aris, 0.5):.3f}; >= {goal}: {share:.0%}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subsets", type=int, default=40)
    p.add_argument("--cpus", type=int, default=10, help="subsets per CPU matrix (0: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="write every subset's scores here")
    a = p.parse_args()
    rows = run(a.subsets, a.cpus, a.seed)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    for d in rows:
        print(summary(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
