#!/bin/bash
# Lab VMs' memory under extra VM flags, side by side in one run (docs/CLI.md, "Lean VMs"; docs/BENCHMARKS.md,
# "256 VMs"): for every flag set, N one-scheduler VMs (scale_spec.py, the flags as every node's `args', after the
# lab's own) are started, their total RSS and PSS read idle, the full mesh made (scale_mesh.escript) and read again,
# and the VMs stopped. Prints one row per flag set: MB per VM idle and meshed, kB per connection and side.
# usage: examples/scale_flags.sh N "FLAGS" ["FLAGS" ...]     ("" is the lab's flags alone)
#   env: STATE_DIR (default /tmp/terrain_flags/state), PREFIX (flags_)
N=$1; shift
ST=${STATE_DIR:-/tmp/terrain_flags/state}
cd "$(dirname "$0")/.."
SPEC=$(mktemp /tmp/scale_flags.XXXXXX.cluster)
printf "%-40s %6s %8s %8s %8s %8s %9s %7s %7s %7s\n" FLAGS VMS "RSS/VM" "PSS/VM" "RSS/VM" "PSS/VM" "kB/CONN" "UP s" "MESH s" "DOWN s"
printf "%-40s %6s %8s %8s %8s %8s %9s\n" "" "" "idle MB" "idle MB" "mesh MB" "mesh MB" "RSS"
for FLAGS in "$@"; do
  python3 examples/scale_spec.py $N ${FLAGS:+--args "$FLAGS"} > $SPEC
  s=$(date +%s.%N)
  bin/terrain up $SPEC --prefix ${PREFIX:-flags_} --state-dir $ST > /dev/null 2>/tmp/scale_flags_up.err || { cat /tmp/scale_flags_up.err; exit 1; }
  up=$(echo "$(date +%s.%N) - $s" | bc)
  sleep 2
  idle=$(python3 examples/scale_mem.py $ST --json)
  s=$(date +%s.%N)
  examples/scale_mesh.escript $ST > /tmp/scale_flags_mesh.out
  mesh=$(echo "$(date +%s.%N) - $s" | bc)
  sleep 2
  meshed=$(python3 examples/scale_mem.py $ST --json)
  s=$(date +%s.%N)
  bin/terrain down --state-dir $ST > /dev/null 2>&1
  down=$(echo "$(date +%s.%N) - $s" | bc)
  IDLE="$idle" MESHED="$meshed" python3 - "${FLAGS:-(lab flags only)}" $N $up $mesh $down <<'PY'
import json, os, sys
i, m = json.loads(os.environ["IDLE"]), json.loads(os.environ["MESHED"])
flags, n, up, mesh, down = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
per_conn = (m["rss_mb_per_vm"] - i["rss_mb_per_vm"]) * 1024 / (n - 1)
print("%-40s %6d %8.1f %8.1f %8.1f %8.1f %9.1f %7.1f %7.1f %7.1f" % (flags, i["alive"], i["rss_mb_per_vm"],
      i["pss_mb_per_vm"], m["rss_mb_per_vm"], m["pss_mb_per_vm"], per_conn, up, mesh, down))
PY
  grep -o "min [0-9]* max [0-9]*" /tmp/scale_flags_mesh.out | sed 's/^/    connections per node: /' >&2
done
rm -f $SPEC
