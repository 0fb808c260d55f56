#!/bin/bash
# Every scale figure of issue 36 at N emulated VMs, in one command (docs/BENCHMARKS.md, "Scale figures in one
# command"). The spec is `scale_spec.py N --latency 20000,2000,200` (sites x racks x nodes, one way 20 ms / 2 ms /
# 200 us). Two parts, each short enough for one hold of the heavy lock at 256 VMs; `all` runs both:
#   cluster: `terrain up --live` (time, RSS/PSS of the VMs), the levels against the spec (netem_at_scale.erl: the
#            mesh, idle CPU, round trips per level, +-10% + 100 us), `probe --strategy tree` and `topology
#            compare` with the spec, DE-Bench (`terrain bench examples/bench/demo.config`), a VM killed with
#            kill -9 and the error a probe then gives (cause and log path), `down`, and what is left after it:
#            VMs, epmd names, LISTEN sockets on the nodes' addresses, extra addresses, namespaces.
#   runs:    `terrain collective bench` of the issue twice back to back (binomial and hierarchical, random order),
#            bench_live (join, leave and heal on the live cluster of the same spec) and bench_live_delta (the bytes
#            of one join's message at 256 nodes).
# Prints one table on stdout: step, exit status, wall time, 1-minute load at start and end, the peaks of ESTAB and
# TIME-WAIT sockets during the step (`ss -tan` every 2 s), the machine's CPU busy and CPU pressure during the step
# (% of all cores' time; % of the time some runnable task waited for a core, /proc/pressure/cpu), the VMs' summed
# RSS and PSS after the step (cluster part), and the step's result. Every step's stdout and stderr are kept in OUT.
# usage: examples/scale_figures.sh N [cluster|runs|all]
#   env: OUT (default /tmp/scale_figures_N_PID), PREFIX (sf_), LAT (20000,2000,200), GRACE (live grace, ms: 3000),
#        SETTLE_BUSY (%: 50), SETTLE_MAX (s: 300): before the levels, wait until the machine is idle again
# heavy (> 40 VMs): flock /work/wt/heavy.lock examples/scale_figures.sh 256 cluster
set -u
N=${1:?usage: scale_figures.sh N [cluster|runs|all]}
PART=${2:-all}
case $PART in
  cluster|runs|all) ;;
  *) echo "scale_figures.sh: unknown part '$PART' (cluster, runs or all)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/scale_figures_${N}_$$}; PREFIX=${PREFIX:-sf_}; LAT=${LAT:-20000,2000,200}; GRACE=${GRACE:-3000}
T=bin/terrain
ST=$OUT/state
mkdir -p "$OUT" || exit 1
SPEC=$OUT/d$N.cluster
python3 examples/scale_spec.py "$N" --latency "$LAT" > "$SPEC" || exit 1
TABLE=$OUT/table.txt
: > "$TABLE"

# every 2 s: epoch, ESTAB and TIME-WAIT sockets, the machine's busy and total CPU jiffies (/proc/stat), and the
# microseconds some task waited for a CPU (/proc/pressure/cpu, 0 without PSI)
SOCKS=$OUT/sockets.txt
( while :; do
    cpu=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat)
    psi=$(sed -n 's/^some .*total=//p' /proc/pressure/cpu 2>/dev/null)
    ss -tan | awk -v t="$(date +%s)" -v cpu="$cpu" -v psi="$psi" \
      'NR > 1 {c[$1]++} END {print t, c["ESTAB"] + 0, c["TIME-WAIT"] + 0, cpu, psi + 0}'
    sleep 2; done ) >> "$SOCKS" 2>/dev/null &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT

load1() { cut -d' ' -f1 /proc/loadavg; }
# step NAME CMD...: runs CMD with its output in OUT/NAME.out and .err; sets RC, WALL, L0, L1, S0, S1
step() {
  local name=$1; shift
  L0=$(load1); S0=$(date +%s); local s=$(date +%s.%N)
  "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; RC=$?
  WALL=$(echo "$(date +%s.%N) - $s" | bc); S1=$(date +%s); L1=$(load1)
  printf "%s %s rc=%d %.1f s\n" "$(date -u +%T)" "$name" "$RC" "$WALL" >&2
}
# the step's peaks of ESTAB and TIME-WAIT, its CPU busy (% of the machine) and CPU pressure (% of the time some
# runnable task waited)
peaks() { sleep 2; awk -v a="$S0" -v b="$S1" '$1 >= a - 2 && $1 <= b + 2 {if ($2 > e) e = $2; if ($3 > w) w = $3
    if (!t0) {t0 = $1; b0 = $4; a0 = $5; p0 = $6}
    t1 = $1; b1 = $4; a1 = $5; p1 = $6}
  END {printf "%d %d %s %s", e, w, (a1 > a0 ? sprintf("%.0f", 100 * (b1 - b0) / (a1 - a0)) : "-"),
       (t1 > t0 && p1 > 0 ? sprintf("%.0f", (p1 - p0) / 1e4 / (t1 - t0)) : "-")}' "$SOCKS"; }
mem() { python3 examples/scale_mem.py "$ST" --json 2>/dev/null \
          | python3 -c 'import json, sys; m = json.load(sys.stdin); print("%.2f %.2f" % (m["rss_gb"], m["pss_gb"]))' \
          || echo "- -"; }
# row NAME RESULT [MEM]: one line of the table for the last step
row() {
  local p; p=($(peaks))
  printf "%-14s %3d %8.1f %13s %8s %9s %7s %11s %s\n" "$1" "$RC" "$WALL" "$L0->$L1" ${p[0]} ${p[1]} "${p[2]}/${p[3]}" \
    "${3:--/-}" "$2" >> "$TABLE"
}

busy_over() {  # the machine's CPU busy (%) over the next $1 seconds
  local a b; a=($(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat))
  sleep "$1"; b=($(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat))
  echo $(( 100 * (b[0] - a[0]) / (b[1] - a[1]) ))
}
settle() {
  local t0 busy; t0=$(date +%s)
  while busy=$(busy_over 10); [ "$busy" -ge "${SETTLE_BUSY:-50}" ] && [ $(( $(date +%s) - t0 )) -lt "${SETTLE_MAX:-300}" ]
  do :; done
  echo "CPU busy ${busy}% over 10 s after $(( $(date +%s) - t0 )) s (goal < ${SETTLE_BUSY:-50}%, at most ${SETTLE_MAX:-300} s)"
}

cluster_part() {
  step up $T up "$SPEC" --live --live-grace "$GRACE" --prefix "$PREFIX" --state-dir "$ST"
  local m; m=$(mem)
  row up "$(grep '^live: .*meshed, one version' "$OUT/up.err" | tail -1 | cut -c1-90)" "${m/ //}"
  [ $RC -eq 0 ] || { $T down --state-dir "$ST" > /dev/null 2>&1; return 1; }
  $T status --state-dir "$ST" --json > "$OUT/status.json" 2>/dev/null
  python3 -c 'import json, sys; print("\n".join(n["address"] for n in json.load(open(sys.argv[1]))["nodes"]
              if n.get("address")))' "$OUT/status.json" > "$OUT/addresses.txt"
  # the levels are judged on an idle machine: after `up`, wait until the VMs' start-up work is over (the machine's
  # CPU busy under SETTLE_BUSY % over 10 s; at most SETTLE_MAX s)
  step settle settle; row settle "$(cat "$OUT/settle.out")"
  erlc -o "$OUT" examples/netem_at_scale.erl &&
    step levels erl -noshell -hidden -sname "${PREFIX}levels$$" -pa _build/default/lib/*/ebin -pa "$OUT" \
      -eval "netem_at_scale:main([\"$ST\", \"300\", \"$LAT\"])"
  row levels "$(grep -o '^level [a-z]* .*' "$OUT/levels.out" | sed 's/ spec .*round trips[^:]*: / /' |
                tr '\n' ';' | cut -c1-150)" "$(mem | tr ' ' /)"
  step probe $T probe --strategy tree --state-dir "$ST" --runs-dir "$OUT/runs" --budget 600
  local topo; topo=$(ls -d "$OUT"/runs/*/topology.json 2>/dev/null | head -1)
  [ -n "$topo" ] && $T topology compare --prefix "$PREFIX" "$topo" "$SPEC" > "$OUT/compare.out" 2>&1
  row probe "$(cat "$OUT/probe.err" "$OUT/probe.out" | grep -io '[0-9,]* of [0-9,]* ordered pairs[^;]*' | head -1);\
 $(grep -i 'ari\|recall' "$OUT/compare.out" 2>/dev/null | tr -s ' \n' ' ' | cut -c1-110)" "$(mem | tr ' ' /)"
  step debench $T bench examples/bench/demo.config --state-dir "$ST" --out "$OUT/debench"
  row debench "$(awk '$1 == "total" {printf "%d operations, %d errors; ", $2, $3} / nodes; / {print $1, "nodes"}' \
                 "$OUT/debench.out")" "$(mem | tr ' ' /)"
  # a VM killed with kill -9 (the 3rd node of the spec), then what a probe says
  local victim vpid; read -r victim vpid < <(python3 -c 'import json, sys; n = json.load(open(sys.argv[1]))["nodes"][2]
print(n["name"], n["os_pid"])' "$OUT/status.json")
  kill -9 "$vpid"
  step killed $T probe --strategy tree --state-dir "$ST" --runs-dir "$OUT/runs_killed" --budget 60
  row killed "kill -9 of $victim: $(grep -m1 -o "the VM of node $victim.*" "$OUT/killed.err" | cut -c1-120)"
  step down $T down --state-dir "$ST"
  row down "$(tail -1 "$OUT/down.err" | cut -c1-100)"
  sleep 2
  local vms epmdn listen addrs netns
  vms=$(pgrep -fc "${PREFIX}s[0-9]+r[0-9]+n[0-9]+")
  epmdn=$(epmd -names 2>/dev/null | grep -c "^name ${PREFIX}")
  listen=$(ss -tlnH | awk '{print $4}' | sed 's/:[0-9]*$//' | grep -cxFf "$OUT/addresses.txt")
  addrs=$(ip -o -4 addr show | awk '{print $4}' | grep -c '^127\.' )
  netns=$(ip netns list 2>/dev/null | grep -c "^${PREFIX}")
  RC=0; WALL=0; L0=$(load1); L1=$L0; S0=$(date +%s); S1=$S0
  local naddr; naddr=$(wc -l < "$OUT/addresses.txt")
  row leftovers "VMs $vms, epmd names $epmdn, LISTEN on the nodes' addresses $listen (of $naddr\
 addresses), 127.x addresses on interfaces $addrs (127.0.0.1 only: 1), namespaces $netns"
}

runs_part() {
  local i
  for i in 1 2; do
    step collective$i $T collective bench --spec "$SPEC" --algorithms binomial,hierarchical --sizes 8 --rounds 5 \
      --rank-order random --seeds 1 --out "$OUT/coll$i"
    row collective$i "$(awk '$1 == "binomial" {b = $4} $1 == "hierarchical" {h = $4; o = $3; bd = $6}
      END {if (h) printf "binomial %.1f ms, hierarchical (%s) %.1f ms, bound %.1f ms: %.1fx faster, %.2fx its bound",
           b / 1000, o, h / 1000, bd / 1000, b / h, h / bd}' "$OUT/collective$i.out")"
  done
  rebar3 as test compile > "$OUT/compile.out" 2>&1 || { echo "rebar3 as test compile failed" >&2; return 1; }
  step live erl -noshell -sname "${PREFIX}live$$" -kernel prevent_overlapping_partitions false \
    -pa _build/test/lib/*/ebin _build/test/lib/*/test -eval "bench_live:run([\"$SPEC\", \"$GRACE\"]), halt()."
  row live "$(grep -o '^\(join\|leave\): [^;]*\|running again [^,]*' "$OUT/live.out" | cut -c1-80 | tr '\n' ';')"
  step joinmsg erl -noshell -pa _build/test/lib/*/ebin _build/test/lib/*/test -eval 'bench_live_delta:run(), halt().'
  row joinmsg "$(grep -m1 'join message' "$OUT/joinmsg.out")"
}

echo "$(date -u +%FT%TZ) scale_figures $N $PART: branch $(git rev-parse --abbrev-ref HEAD), commit \
$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)'); $(nproc) cores; \
load $(cut -d' ' -f1-3 /proc/loadavg); OUT $OUT" | tee "$OUT/header.txt"
case $PART in
  cluster) cluster_part ;;
  runs) runs_part ;;
  all) cluster_part; runs_part ;;
esac
sleep 3
printf "%-14s %3s %8s %13s %8s %9s %7s %11s %s\n" STEP RC WALL_S LOAD ESTAB TIME-WAIT CPU/PSI RSS/PSS_GB RESULT
cat "$TABLE"
echo "sockets now: $(tail -1 "$SOCKS" | awk '{print $2 " ESTAB, " $3 " TIME-WAIT"}');\
 load $(cut -d' ' -f1-3 /proc/loadavg)"
