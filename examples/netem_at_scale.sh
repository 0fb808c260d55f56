#!/bin/bash
# Emulated links at scale, both proxies in the same run (docs/NETEM.md, "At scale"): for each size N, a
# 3-level spec (python3 examples/scale_spec.py N --latency $LAT), then for each proxy `terrain up` with
# TERRAIN_NETEM_PROXY=<proxy>, examples/netem_at_scale.erl (mesh, idle CPU, round trips per level against the
# goal), `terrain down`. Load average before and after each cluster.
# usage: examples/netem_at_scale.sh N [N...]
#   env: PROXIES (default "erlang native"), LAT (one way TOP,SITE,RACK in us, default 20000,2000,200),
#        MESH_S (deadline for the full mesh, default 300), OUT (default /tmp/netem_at_scale), PREFIX (nas_)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/netem_at_scale}; LAT=${LAT:-20000,2000,200}; PREFIX=${PREFIX:-nas_}
mkdir -p "$OUT"
erlc -o "$OUT" examples/netem_at_scale.erl || exit 1
for N in "$@"; do
  python3 examples/scale_spec.py "$N" --latency "$LAT" > "$OUT/scale$N.cluster" || exit 1
  for P in ${PROXIES:-erlang native}; do
    ST="$OUT/state_${N}_$P"
    echo "== $N VMs, $P proxies; before: $(uptime)"
    s=$(date +%s.%N)
    TERRAIN_NETEM_PROXY=$P bin/terrain up --prefix "$PREFIX" --state-dir "$ST" "$OUT/scale$N.cluster" >/dev/null \
      2> >(grep -v "^started\|^up:" >&2) || { echo "up failed"; bin/terrain down --state-dir "$ST" >/dev/null; continue; }
    echo "up in $(echo "$(date +%s.%N) - $s" | bc) s"
    erl -noshell -hidden -sname "${PREFIX}probe" -pa _build/default/lib/*/ebin -pa "$OUT" \
        -eval "netem_at_scale:main([\"$ST\", \"${MESH_S:-300}\", \"$LAT\"])"
    bin/terrain down --state-dir "$ST" >/dev/null 2>&1
    echo "after: $(uptime)"
  done
done
