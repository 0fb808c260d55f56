#!/bin/bash
# A timed session on a cluster of many VMs (docs/BENCHMARKS.md, "256 VMs"): up, status, attrs, choose,
# time-task over all nodes, the full mesh made from one node (scale_mesh.escript), spawn_on and place_tree over
# all nodes, down; the VMs' total resident (RSS) and proportional (PSS) memory after each step (scale_mem.py).
# usage: examples/scale_session.sh SPEC [terrain up options...]
#   env: STATE_DIR (default /tmp/terrain_scale/state), OUT_DIR (/tmp/terrain_scale), PREFIX (scale_)
# specs: python3 examples/scale_spec.py 256 > /tmp/flat256.cluster
SPEC=$1; shift
ST=${STATE_DIR:-/tmp/terrain_scale/state}
OUT=${OUT_DIR:-/tmp/terrain_scale}
mkdir -p $OUT
cd "$(dirname "$0")/.."
T=bin/terrain
exec 3>&2
t() { local s=$(date +%s.%N); "$@"; local rc=$?; local e=$(date +%s.%N); printf "%-10s rc=%d wall %.2f s\n" "$STEP" $rc $(echo "$e - $s" | bc) >&3; return $rc; }
mem() { python3 examples/scale_mem.py "$ST"; free -m | sed -n 2p; }
uptime
free -m | sed -n 2p
STEP=up t $T up $SPEC --prefix ${PREFIX:-scale_} --state-dir $ST "$@" > $OUT/up.out 2>$OUT/up.err || { cat $OUT/up.err; exit 1; }; tail -2 $OUT/up.err
mem
STEP=status t $T status --state-dir $ST > $OUT/status.out 2>&1; grep -c "up\b\|running" $OUT/status.out; head -3 $OUT/status.out
STEP=attrs t $T attrs --state-dir $ST vm_schedulers_online > $OUT/attrs.out 2>&1; echo "attrs lines: $(wc -l < $OUT/attrs.out)"; head -2 $OUT/attrs.out; grep -ci "error\|timeout" $OUT/attrs.out
STEP=choose t $T choose --state-dir $ST '{vm_schedulers_online, ge, 1}' > $OUT/choose.out 2>&1; echo "chosen: $(wc -l < $OUT/choose.out)"; head -2 $OUT/choose.out
STEP=time-task t $T time-task --state-dir $ST --rpc-all erlang:node:[] --runs 10 --out $OUT/tt_$$.csv > $OUT/tt.out 2>&1; tail -3 $OUT/tt.out
STEP=mesh t examples/scale_mesh.escript "$ST"
mem
FIRST=$(python3 -c "import json; print(json.load(open('$ST/cluster.json'))['nodes'][0]['node'])")
STEP=spawn+place t erl -noshell -sname scale_ctl$$ -setcookie $(cat $ST/cookie) -eval "
  N = '$FIRST',
  {ok, B} = file:read_file(\"$ST/cluster.json\"),
  Nodes = [binary_to_atom(X) || {match, [X]} <- [re:run(L, <<\"\\\"node\\\": *\\\"([^\\\"]+)\\\"\">>, [{capture, all_but_first, binary}]) || L <- binary:split(B, <<\",\">>, [global])]],
  pong = net_adm:ping(N),
  R1 = erpc:call(N, fun() -> {T, R} = timer:tc(fun() -> terrain:spawn_on([{vm_schedulers_online, ge, 1}], fun() -> receive after 100 -> ok end end, #{pick => least_loaded, candidates => Nodes}) end), {T div 1000, R} end, 30000),
  io:format(\"spawn_on: ~p~n\", [R1]),
  Tree = {vertex, root, [{vertex, {c, I}, [{vertex, {l, I, J}, []} || J <- lists:seq(1, 3)]} || I <- lists:seq(1, 8)]},
  R2 = erpc:call(N, fun() -> {T, R} = timer:tc(fun() -> terrain:place_tree(Tree, #{candidates => Nodes}) end), case R of {ok, #{assignment := A, cost := C}} -> {T div 1000, ms, maps:size(A), vertices, C}; E -> {T div 1000, E} end end, 60000),
  io:format(\"place_tree: ~p~n\", [R2]),
  io:format(\"connections of ~p: ~p~n\", [N, erpc:call(N, erlang, length, [erpc:call(N, erlang, nodes, [])])]),
  halt()."
mem
STEP=down t $T down --state-dir $ST > $OUT/down.out 2>$OUT/down.err; tail -2 $OUT/down.err; grep -vc stopped $OUT/down.out
P=${PREFIX:-scale_}; echo "left: $(ps aux | grep -c "[n]et_kernel:start(${P}s[0-9]") VM processes named ${P}*, $(epmd -names | grep -c "^name ${P}s[0-9]") names in epmd"
free -m | sed -n 2p
uptime
