#!/usr/bin/env bash
# Re-run of the 65 defect rows of the wave-3 hands-on test (issue 33, deliver item 5).
# Usage (as root, from the repository, after `make build`):  tools/handson-rerun.sh [ROW...]
# Prints one line per command: `#N rc=.. t=..s rss=..MB | stderr head`, plus `#N check:` lines for the
# state a row is about (files, VMs, namespaces left). Everything runs in a scratch dir ($W, kept for reading)
# with testbed prefixes rq* and node prefixes rr_/rs_/rt_/rx_; the EXIT trap stops all of it.
# Never touches /dev/null, /tmp itself or $HOME: row 5 uses a device node made in $W.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
T="$REPO/bin/terrain"
W=$(mktemp -d /tmp/rerun.XXXXXX)
export TERRAIN_STATE_DIR=$W/st1 TERRAIN_LOG_DIR=$W/tlog ERL_CRASH_DUMP=$W/erl_crash.dump LANG=C.UTF-8
mkdir -p "$W/in" "$W/log" "$W/tlog"
ROWS=" ${*:-all} "
want() { [[ $ROWS == " all " || $ROWS == *" $1 "* ]]; }
MYPIDS=()
TESTBEDS=()   # "prefix|dir" pairs to take down at the end
CLUSTERS=("$W/st1")
say() { echo "$*" | sed "s#$W#\$W#g"; }

# ---- running one command --------------------------------------------------------------------------------------
# run ID TIMEOUT [cap] CMD...   : rc, wall time, max RSS (GNU time), stderr head
run() {
    local id=$1 tmo=$2; shift 2
    local cap=()
    if [[ ${1:-} == cap ]]; then cap=(prlimit --as=3500000000); shift; fi
    local t0 t1 rc rss
    t0=$(date +%s.%N)
    /usr/bin/time -f '%M' -o "$W/log/$id.rss" "${cap[@]}" timeout -k 5 "$tmo" "$@" \
        >"$W/log/$id.out" 2>"$W/log/$id.err"
    rc=$?
    t1=$(date +%s.%N)
    rss=$(tail -1 "$W/log/$id.rss" 2>/dev/null)
    [[ $rss =~ ^[0-9]+$ ]] && rss=$((rss / 1024)) || rss='?'
    LAST_RC=$rc
    say "#$id rc=$rc t=$(printf %.1f "$(echo "$t1 - $t0" | bc)")s rss=${rss}MB | $(head -c 300 "$W/log/$id.err" \
        | tr '\n' ' ')$( [[ -s $W/log/$id.out ]] && echo " || stdout: $(head -c 120 "$W/log/$id.out" | tr '\n' ' ')")"
}
# sig ID DELAY SIGNAL CMD... : start CMD in its own process group (set -m), signal the process after DELAY
sig() {
    local id=$1 delay=$2 s=$3; shift 3
    local t0 rc pid
    t0=$(date +%s.%N)
    set -m
    # env --default-signal: SIGINT reaches the command even when this script was started with SIGINT ignored
    env --default-signal=INT "$@" >"$W/log/$id.out" 2>"$W/log/$id.err" &
    pid=$!
    set +m
    MYPIDS+=("$pid")
    sleep "$delay"
    kill -"$s" "$pid" 2>/dev/null
    local i; for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null     # not gone 60 s after the signal
    wait "$pid" 2>/dev/null; rc=$?
    LAST_RC=$rc
    say "#$id rc=$rc t=$(printf %.1f "$(echo "$(date +%s.%N) - $t0" | bc)")s rss=-MB (SIG$s after ${delay}s) | $(head -c 300 \
        "$W/log/$id.err" | tr '\n' ' ')"
}
check() { local id=$1; shift; say "#$id check: $*"; }
vms() { pgrep -f -- "net_kernel:start\\($1" | tr '\n' ' '; }   # BEAM VMs whose node name starts with $1
nsof() { ip netns list | awk '{print $1}' | grep -E "^$1[0-9]+$" | tr '\n' ' '; }
tb() { TESTBEDS+=("$1|${2:-}"); }
tbdown() {
    local p=${1%%|*} d=${1#*|}
    if [[ -n $d ]]; then "$T" testbed down --prefix "$p" --dir "$d" >/dev/null 2>&1
    else "$T" testbed down --prefix "$p" >/dev/null 2>&1; fi
}

cleanup() {
    [[ $BASHPID == "$MAIN" ]] || return 0     # never in a subshell that inherited the trap
    set +e
    for e in "${TESTBEDS[@]}"; do tbdown "$e"; done
    for s in "${CLUSTERS[@]}"; do [[ -d $s ]] && "$T" down --state-dir "$s" >/dev/null 2>&1; done
    for p in "${MYPIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    ip link del tbrrqb 2>/dev/null
    for n in rqz1 rqh1; do ip netns del "$n" 2>/dev/null; done
    mountpoint -q "$W/full" && umount "$W/full"
    local left
    left=$(pgrep -f -- "net_kernel:start\\((r[rstx]_|rq)" | tr '\n' ' ')
    [[ -n $left ]] && say "cleanup: VMs still running (pids $left): killing them" && kill -KILL $left 2>/dev/null
    left=$(ip netns list | awk '{print $1}' | grep -E '^rq' | tr '\n' ' ')
    [[ -n $left ]] && say "cleanup: namespaces still there: $left"
    echo "scratch dir kept: $W"
}
MAIN=$BASHPID
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- inputs (the report's "Inputs") ----------------------------------------------------------------------------
cd "$W/in" || exit 1
printf 'SwitchName=s1 Switches=s2 Nodes=h1\nSwitchName=s2 Switches=s1 Nodes=h2\n' > loop.conf
printf 'SwitchName=root Switches=s1,sX\nSwitchName=s1 Nodes=h1,h2\n' > unknown.conf
printf 'SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h2,h3\nSwitchName=s1 Nodes=h9\nSwitchName=root Switches=s1,s2\n' \
    > dup.conf
printf 'SwitchName=s\xe9 Nodes=h1\n' > latin1.conf
printf 'SwitchName=s1 Nodes=h1,h2\nSwitchName=s2 Nodes=h3,h4\nSwitchName=root Switches=s1,s2\n' > good4.conf
python3 -c "open('longname.conf','w').write('SwitchName='+'L'*300+' Nodes=h1,h2\n')"
python3 -c "open('bigline2.conf','w').write('SwitchName='+'x'*1000000+' Nodes=h1\n')"
python3 -c "open('bigline.conf','w').write('SwitchName=s1 Nodes=h1,h2 #'+'a'*1000000+'\nSwitchName=s2 Nodes='+','.join('h%d'%i for i in range(3,120000))+'\n')"
for n in 7 10 14; do
    python3 -c "n=$n;open('clique$n.conf','w').write(''.join('SwitchName=s%d Switches=s[1-%d] Nodes=h%d\n'%(i,n,i) for i in range(1,n+1)))"
done
python3 -c "open('manyatoms.conf','w').write(''.join('SwitchName=sw%d Nodes=nd%d\n'%(i,i) for i in range(1,1100000)))"
echo 'SwitchName=s1 Nodes=h[1-2000000]' > hugehl.conf
echo '42.' > t42.term
echo '{network, root, [{network, a, [{node, s1r1n1}, {node, s1r1n2}]}, {network, b, [{node, s2r1n1}]}]}.' > tgood.term
echo '{network, root, [{node, a}, {node, a}]}.' > tdupe.term
echo '{network, root, []}.' > tempty.term
python3 -c "open('tjson_deep.json','w').write('{\"format\":\"terrain.topology/1\",\"tree\":'+'{\"name\":\"r\",\"children\":['*20000+'{\"node\":\"a\"}'+']}'*20000+'}\n')"
python3 -c "open('tterm_deep.term','w').write('{network, r, ['*100000+'{node, a}'+']}'*100000+'.\n')"
# small.cluster: examples/live.cluster with racks s1r2 and s2r2 holding one node each (6 nodes)
sed -e 's/\[{node, s1r2n1, #{schedulers => 1}}, {node, s1r2n2, #{schedulers => 1}}\]/[{node, s1r2n1, #{schedulers => 1}}]/' \
          -e 's/\[{node, s2r2n1, #{schedulers => 1}}, {node, s2r2n2, #{schedulers => 1}}\]/[{node, s2r2n1, #{schedulers => 1}}]/' \
    "$REPO/examples/live.cluster" > small.cluster
echo '{group, s1, #{}, [{group, s1r2, #{}, [{node, s1r2n3, #{schedulers => 1}}]}]}.' > add_one.cluster
echo '{group, s2, #{}, [{group, s2r2, #{}, [{node, s2r2n7, #{schedulers => 1}}]}]}.' > add_two.cluster
echo '{group, s1, #{}, [{group, s1r1, #{}, [{node, s1r1n1, #{schedulers => 1}}]}]}.' > add_existing.cluster
echo '{group, s2, #{}, [{group, s2r2, #{}, [{node, s2r2n1, #{schedulers => 1}}]}]}.' > add_back.cluster
echo '{group, s1, #{}, [{group, s1r2, #{}, [{node, qterm1, #{schedulers => 1}}, {node, qterm2, #{schedulers => 1}}, {node, qterm3, #{schedulers => 1}}]}]}.' > add_qterm.cluster
sed 's/qterm/qint/g' add_qterm.cluster > add_qint.cluster
python3 -c "open('add_longname.cluster','w').write('{group, s1, #{}, [{group, s1r2, #{}, [{node, %s, #{schedulers => 1}}]}]}.\n' % ('n'*250))"
python3 -c "open('add_many.cluster','w').write('{group, s1, #{}, [{group, s1r2, #{}, [%s]}]}.\n' % ', '.join('{node, m%d, #{schedulers => 1}}' % i for i in range(1000000)))"
say "inputs: $(ls | wc -l) files; small.cluster has $(grep -o '{node,' small.cluster | wc -l) nodes"

# ---- rows without a cluster --------------------------------------------------------------------------------------
if want 1; then
    echo data > $W/precious.txt
    run 1 30 "$T" testbed up --hosts 1 --prefix rqf --dir $W/precious.txt; tb rqf $W/precious.txt
    check 1 "precious.txt: $(cat $W/precious.txt 2>&1)"
fi
if want 2; then
    mkdir -p $W/mydata/sub; echo important > $W/mydata/notes.txt; chmod 1777 $W/mydata
    run 2a 60 "$T" testbed up --hosts 1 --prefix rqd --dir $W/mydata
    check 2 "after up: mode $(stat -c %a $W/mydata)"
    run 2b 60 "$T" testbed down --prefix rqd --dir $W/mydata
    check 2 "after down: notes.txt: $(cat $W/mydata/notes.txt 2>&1); sub: $(ls -d $W/mydata/sub 2>&1)"
fi
if want 3; then
    mkdir -p ow; cp good4.conf ow/g.conf; cp tgood.term ow/t.term; cp tgood.term ow/t2.term
    run 3a 30 "$T" topology import slurm ow/g.conf --out ow/g.conf
    run 3b 30 "$T" topology show ow/t.term --out ow/t.term --format json
    run 3c 30 "$T" topology compare ow/t2.term tgood.term --out ow/t2.term
    check 3 "g.conf unchanged: $(cmp -s ow/g.conf good4.conf && echo yes || echo NO); t.term: $(cmp -s ow/t.term \
tgood.term && echo yes || echo NO); t2.term: $(cmp -s ow/t2.term tgood.term && echo yes || echo NO)"
fi
if want 5; then
    mknod -m 666 $W/nulldev c 1 3
    run 5 30 "$T" testbed up --hosts 1 --prefix rqn --dir $W/nulldev; tb rqn $W/nulldev
    check 5 "nulldev: $(stat -c %F $W/nulldev 2>&1)"
fi
if want 6; then
    ip link add tbrrqb type bridge; mkdir $W/bdir; echo keep > $W/bdir/keep.txt
    run 6 60 "$T" testbed up --hosts 1 --prefix rqb --dir $W/bdir
    check 6 "bridge tbrrqb: $(ip -br link show tbrrqb 2>&1 | head -c 60); keep.txt: $(cat $W/bdir/keep.txt 2>&1)"
    ip link del tbrrqb 2>/dev/null
fi
if want 7; then
    ( timeout 90 "$T" testbed up --hosts 2 --prefix rqc >$W/log/7a.out 2>$W/log/7a.err; echo $? > $W/log/7a.rc ) &
    ( timeout 90 "$T" testbed up --hosts 2 --prefix rqc --dir $W/tbrace2 >$W/log/7b.out 2>$W/log/7b.err
      echo $? > $W/log/7b.rc ) &
    wait
    say "#7a rc=$(cat $W/log/7a.rc) | $(head -c 200 $W/log/7a.err | tr '\n' ' ')"
    say "#7b rc=$(cat $W/log/7b.rc) | $(head -c 200 $W/log/7b.err | tr '\n' ' ')"
    run 7s 30 "$T" testbed status --prefix rqc
    check 7 "namespaces rqc: $(nsof rqc); status rc=$LAST_RC"
    tbdown "rqc|"; tbdown "rqc|$W/tbrace2"
fi
if want 8; then
    run 8a 60 cap "$T" topology import slurm clique10.conf
    run 8b 60 cap "$T" topology import slurm clique14.conf
fi
if want 9; then
    run 9a 30 cap "$T" topology import slurm /dev/zero
    run 9b 30 cap "$T" topology show /dev/zero
    run 9c 30 cap "$T" topology compare /dev/zero tgood.term
    run 9d 30 cap "$T" topology simulate --spec /dev/zero
fi
want 10 && run 10 30 cap "$T" topology simulate --shape 100000x100000
want 11 && run 11 60 cap "$T" topology simulate --shape 1100000
if want 12; then
    run 12a 30 cap "$T" topology show tjson_deep.json
    run 12b 30 cap "$T" topology show tterm_deep.term
fi
if want 14; then
    run 14a 30 cap "$T" testbed up --topology 100000x100000 --prefix rqq; tb rqq
    run 14b 30 cap "$T" testbed up --topology 1000000 --prefix rqz; tb rqz
fi
if want 15; then
    ip netns add rqz1
    run 15a 30 "$T" testbed up --topology 251 --prefix rqz; tb rqz
    ip netns del rqz1 2>/dev/null
    ip netns add rqh1
    run 15b 60 cap "$T" testbed up --topology bigline.conf --prefix rqh; tb rqh
    ip netns del rqh1 2>/dev/null
fi
if want 19; then
    for s in TERM:0.45 TERM:0.6 INT:0.3 KILL:0.3; do
        sig "19-${s%%:*}-${s#*:}" "${s#*:}" "${s%%:*}" "$T" testbed up --hosts 4 --slurm --topology 2x2 --prefix rqk
        check 19 "left: ns=[$(nsof rqk)] slurm=[$(pgrep -f 'terrain-testbed-rqk' | wc -l) procs] \
run=[$(ls -d /run/terrain-testbed-rqk 2>/dev/null)] tmp=[$(ls -d /tmp/terrain-testbed-rqk 2>/dev/null)]"
        run 19d 60 "$T" testbed down --prefix rqk
        check 19 "after down: ns=[$(nsof rqk)] procs=$(pgrep -f 'terrain-testbed-rqk' | wc -l)"
    done
fi
if want 20; then
    run 20 60 "$T" testbed up --hosts 1 --prefix rqv --dir "$W/é"; tb rqv "$W/é"
    check 20 "left: ns=[$(nsof rqv)] bridge=[$(ip -br link show tbrrqv 2>/dev/null | cut -c1-20)] dir=[$(ls -d "$W/é" 2>/dev/null)]"
    tbdown "rqv|$W/é"
fi
if want 21 || want 46; then
    mkdir -p $W/full && mount -t tmpfs -o size=64k tmpfs $W/full
    dd if=/dev/zero of=$W/full/fill bs=4k count=14 2>/dev/null
    check 21 "tmpfs free: $(df -k --output=avail $W/full | tail -1) kB"
fi
if want 22; then
    run 22a 60 "$T" testbed up --hosts 2 --slurm --prefix rqt; tb rqt
    P22=$(ip netns pids rqt2 2>/dev/null | tr '\n' ' ')
    ip netns del rqt2
    run 22b 60 "$T" testbed down --prefix rqt
    L22=""; for p in $P22; do kill -0 "$p" 2>/dev/null && L22+="$p($(cat /proc/$p/comm)) "; done
    check 22 "rqt2's processes before down: [$P22] still running: [$L22] veth: $(ip -br link show tvrqt2 2>/dev/null | cut -c1-20)"
    for p in $L22; do kill "${p%%(*}" 2>/dev/null; done
    ip link del tvrqt2 2>/dev/null
fi
if want 24; then run 24 30 "$T" topology import slurm loop.conf; fi
if want 25; then
    run 25a 30 "$T" topology import slurm latin1.conf
    run 25b 30 "$T" testbed up --topology latin1.conf --prefix rqh; tb rqh
fi
if want 26; then
    run 26a 30 "$T" topology import slurm longname.conf
    run 26b 30 "$T" topology import slurm bigline2.conf
    check 26 "bigline2 stderr bytes: $(stat -c %s $W/log/26b.err)"
fi
if want 27; then
    run 27a 30 "$T" topology compare tgood.term t42.term
    run 27b 30 "$T" topology compare t42.term tgood.term
fi
want 28 && run 28 30 "$T" topology simulate --shape "$(python3 -c 'print("x".join(["1"]*200+["2"]))')"
want 29 && run 29 30 "$T" topology simulate --shape 2 --latencies 1.0e308
if want 30; then
    run 30a 30 "$T" topology simulate --shape 4x4 --noise 1000
    run 30b 30 "$T" topology simulate --shape 4x4 --noise 1.0e308
fi
want 39 && run 39 90 cap "$T" topology import slurm manyatoms.conf
if want 44; then
    run 44a 60 "$T" testbed up --topology loop.conf --prefix rqh; tb rqh; tbdown "rqh|"
    run 44b 60 "$T" testbed up --topology clique7.conf --prefix rqh; tbdown "rqh|"
    run 44c 30 "$T" topology import slurm unknown.conf
    run 44d 30 "$T" topology import slurm dup.conf
fi
if want 45; then run 45 60 "$T" testbed up --hosts 1 --prefix rqs --dir "$W/a b"; tb rqs "$W/a b"; fi
if want 46; then
    run 46 60 "$T" testbed up --hosts 1 --prefix rqr --dir $W/full/tb; tb rqr $W/full/tb
    check 46 "left on the tmpfs: $(ls -A $W/full | tr '\n' ' '); ns: [$(nsof rqr)]"
fi
want 47 && run 47 30 "$T" testbed up --hosts 2 --topology 300000 --prefix rqz && :
want 47 && check 47 "stderr bytes: $(stat -c %s $W/log/47.err)"
if want 48; then
    run 48a 30 "$T" testbed up --topology /tmp --prefix rqq
    run 48b 30 "$T" testbed up --topology missing.conf --prefix rqq
fi
want 52 && run 52 30 "$T" topology import slurm hugehl.conf
if want 53; then
    run 53a 30 "$T" topology compare tgood.term tdupe.term
    run 53b 30 "$T" topology compare tgood.term tempty.term
fi
if want 60; then
    run 60a 30 "$T" testbed up --hosts 1 --rates '' --prefix rqr; tbdown "rqr|"
    run 60b 30 "$T" testbed up --hosts 1 --rates ',,' --prefix rqr; tbdown "rqr|"
fi
if want 61; then run 61 60 "$T" testbed up --hosts 1 --rates 99999999999999999999 --prefix rqr; tbdown "rqr|"; fi
want 62 && run 62 30 "$T" testbed status --prefix 'A B'
if want 63; then
    run 63a 30 "$T" topology simulate --spec small.cluster --latencies 1,2
    CLUSTERS+=("$W/st3")
    run 63b 120 "$T" up small.cluster --live-grace 5000 --prefix rt_ --state-dir $W/st3
    "$T" down --state-dir $W/st3 >/dev/null 2>&1
fi
if want 65; then
    run 65a 30 "$T" topology simulate --shape 2 --latencies 1e3
    run 65b 30 "$T" topology simulate --shape 4x4 --outliers 1e-3
fi
if want 38; then
    CLUSTERS+=("$W/st2")
    run 38 120 "$T" up small.cluster --live --live-grace 99999999999999999999 --live-remeasure 99999999999999999999 \
        --prefix rs_ --state-dir $W/st2
    check 38 "VMs rs_: [$(vms rs_)]"
    "$T" down --state-dir $W/st2 >/dev/null 2>&1
fi
if want 43; then
    CLUSTERS+=("$W/exp/x1/state")
    run 43 180 "$T" experiment scale --max-nodes 16 --out $W/exp/x1 --latency 99999999999999999999999,1,1 --prefix rx_
    "$T" down --state-dir $W/exp/x1/state >/dev/null 2>&1
fi
if want 50; then
    for p in 'ü' 'a b' 'A.B'; do
        run "50-$p" 90 "$T" experiment scale --max-nodes 16 --out "$W/exp/p50$RANDOM" --prefix "$p"
    done
fi
if want 16 || want 64; then
    for s in TERM INT KILL; do
        CLUSTERS+=("$W/exp/k$s/state")
        sig "16-$s" 8 $s "$T" experiment scale --max-nodes 16 --latency 2000,200,20 --probe-budget 30 \
            --out $W/exp/k$s --prefix rqk${s,,}_
        sleep 2
        check 16 "$s: VMs left: $(vms rqk${s,,}_ | wc -w); state: $(ls $W/exp/k$s/state 2>/dev/null | tr '\n' ' ')"
        if [[ $s != TERM && -n $(vms rqk${s,,}_) ]]; then     # do they halt by themselves (connection dropped)?
            sleep 70; check 16 "$s: VMs left 72 s after the signal: $(vms rqk${s,,}_ | wc -w)"
        fi
        if [[ $s == TERM ]] && want 64; then
            check 64 "OUT: $(ls $W/exp/k$s | tr '\n' ' '); scale.json partial: $(grep -o '"partial": *[a-z]*' $W/exp/k$s/scale.json)"
            # terrain report runs terrain-analysis: this worktree's .venv, else REPORT_VENV (another checkout's .venv/bin)
            PATH=${REPORT_VENV:-$REPO/.venv/bin}:$PATH run 64 60 "$T" report $W/exp/k$s
        fi
        run "16-$s-down" 60 "$T" down --state-dir $W/exp/k$s/state
        check 16 "$s: VMs left after down: $(vms rqk${s,,}_ | wc -w); state: $(ls $W/exp/k$s/state 2>/dev/null | tr '\n' ' ')"
    done
fi

# ---- rows on the small live cluster ------------------------------------------------------------------------------
need_cluster() {
    [[ -f $W/st1/cluster.json ]] && return 0
    run up 180 "$T" up small.cluster --live --prefix rr_ --live-remeasure 5000 --live-grace 3000 --state-dir $W/st1
}
C=(4 9 13 17 18 21 23 31 32 33 34 35 36 37 40 41 42 49 51 54 55 56 57 58 59 63)
any=0; for r in "${C[@]}"; do want $r && any=1; done
if [[ $any == 1 ]]; then need_cluster; sleep 5; fi
want 9 && run 9e 40 cap "$T" up --add /dev/zero
want 13 && run 13 60 cap "$T" up --add add_many.cluster
if want 4; then
    for d in 4 14; do
        sig "4-INT-$d" $d INT "$T" probe --strategy tree --messages 200 --budget 60 --runs-dir $W/runsk$d
        check 4 "after ${d}s: $(find $W/runsk$d -type f -printf '%f ' 2>/dev/null) partial: \
$(grep -l '"partial": *true' -r $W/runsk$d 2>/dev/null | wc -l) files"
    done
fi
if want 21; then
    run 21 60 "$T" probe --strategy tree --budget 10 --runs-dir $W/full/runs
    check 21 "left in runs dir: $(find $W/full/runs -type f -printf '%f ' 2>/dev/null)"
fi
want 31 && run 31 30 "$T" up --add add_longname.cluster
want 32 && run 32 30 "$T" netem move s1r1 s2r1
want 33 && run 33 30 "$T" netem move foo@bar s2r1
want 34 && run 34 30 "$T" netem move s1r1n1 "$(python3 -c 'print("g"*300)')"
want 35 && run 35 60 "$T" probe --strategy tree --budget 99999999999999999999 --runs-dir $W/runs35
if want 36; then
    run 36a 60 "$T" probe --strategy tree --timeout 5000000000 --budget 10 --runs-dir $W/runs36
    run 36b 60 "$T" probe --batches 1 --messages 1 --timeout 5000000000 --runs-dir $W/runs36
fi
want 37 && run 37 90 "$T" probe --strategy tree --messages 1000000000 --budget 5 --runs-dir $W/runs37
if want 40; then run 40 30 "$T" choose --count 3 --spread depth:1 '{vm_schedulers_online, ge, 1}'; fi
if want 49; then
    run 49a 30 "$T" topology load t42.term
    run 49b 30 "$T" topology load tdupe.term
fi
want 54 && run 54 30 "$T" up --add add_existing.cluster
if want 55; then
    run 55a 30 "$T" down --nodes ''
    run 55b 30 "$T" down --nodes ',,,'
fi
want 56 && run 56 30 "$T" down --nodes foo@bar
want 57 && run 57 30 "$T" netem move
if want 58; then
    run 58a 30 "$T" topology show a b
    run 58b 30 "$T" topology show
    run 58c 30 "$T" topology compare a
    run 58d 30 "$T" topology simulate extra
    run 58e 30 "$T" topology load a b
fi
if want 59; then
    run 59a 30 "$T" choose --at s1r1n1 --count 3 --spread ok '{vm_schedulers_online, ge, 1}'
    run 59b 30 "$T" choose --at s1r1n1 --count 3 --spread anywhere '{vm_schedulers_online, ge, 1}'
    run 59c 30 "$T" choose --at s1r1n1 --count 3 --spread same_node '{vm_schedulers_online, ge, 1}'
fi
if want 63; then
    run 63c 90 "$T" probe --strategy sequential --statistic median --runs-dir $W/runs63
    run 63d 90 "$T" probe --strategy concurrent --wave 3 --runs-dir $W/runs63
    run 63e 30 "$T" choose --count 2 --pick first '{vm_schedulers_online, ge, 1}'
fi
if want 42; then
    run 42 30 "$T" topology load tgood.term
    sleep 8
    run 42s 30 "$T" status
    check 42 "nodes '(not in the tree)' in status: $(grep -c 'not in the tree' $W/log/42s.out)"
    run 42c 30 "$T" choose --at s1r1n1 --count 3 --spread depth:1 '{vm_schedulers_online, ge, 1}'
fi
if want 41; then
    run 41a 60 "$T" down --nodes s2r2n1
    run 41b 120 "$T" up --add add_back.cluster
fi
if want 51; then
    set -m; erl -noshell -sname rr_s1r2n3 -setcookie rerun_stale >/dev/null 2>&1 & STALE=$!; set +m
    MYPIDS+=("$STALE"); sleep 3
    run 51 120 "$T" up --add add_one.cluster
    kill "$STALE" 2>/dev/null; wait "$STALE" 2>/dev/null; sleep 1
    # if the add went through, take the node out again so that row 18 starts from the same place
    grep -q s1r2n3 $W/st1/cluster.json 2>/dev/null && "$T" down --nodes s1r2n3 >/dev/null 2>&1
fi
if want 17; then
    for s in TERM INT; do
        sig "17-$s" 0.45 $s "$T" up --add add_q${s,,}.cluster
        sleep 3
        check 17 "$s: VMs q${s,,}: $(vms rr_q${s,,} | wc -w); in cluster.json: \
$(grep -o "q${s,,}[0-9]" $W/st1/cluster.json 2>/dev/null | sort -u | tr '\n' ' ')"
    done
fi
if want 18; then
    ( timeout 120 "$T" up --add add_one.cluster >$W/log/18a.out 2>$W/log/18a.err; echo $? > $W/log/18a.rc ) &
    ( timeout 120 "$T" up --add add_two.cluster >$W/log/18b.out 2>$W/log/18b.err; echo $? > $W/log/18b.rc ) &
    wait
    say "#18a rc=$(cat $W/log/18a.rc) | $(head -c 200 $W/log/18a.err | tr '\n' ' ')"
    say "#18b rc=$(cat $W/log/18b.rc) | $(head -c 200 $W/log/18b.err | tr '\n' ' ')"
    check 18 "cluster.json: s1r2n3=$(grep -c s1r2n3 $W/st1/cluster.json) s2r2n7=$(grep -c s2r2n7 $W/st1/cluster.json); \
spec: s1r2n3=$(grep -c s1r2n3 $W/st1/spec.cluster 2>/dev/null) s2r2n7=$(grep -c s2r2n7 $W/st1/spec.cluster 2>/dev/null)"
    run 18m 60 "$T" netem move s1r1n1 s2r1
fi
if want 23 || want 17 || want 18; then
    run down 90 "$T" down --state-dir $W/st1
    sleep 3
    check 17/18/23 "after down: rr_ VMs left: [$(vms rr_)]; state dir: [$(ls -A $W/st1 2>/dev/null | tr '\n' ' ')]"
fi
exit 0
