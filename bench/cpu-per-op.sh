#!/usr/bin/env bash
# Server CPU per operation of a 3-server zkrs ensemble on loopback: the CPU time the three
# server processes use (utime + stime from /proc) per operation acknowledged, while three
# zkrs-bench processes (one per server, 2 connections x 100 in flight each) run a workload.
# Throughput on a shared machine moves with whatever else runs; CPU per operation moves much
# less, so this is the measure for paired before/after comparisons of the server's own cost.
#
#   bench/cpu-per-op.sh                               # create, the current build, 3 rounds
#   WORKLOAD=set ROUNDS=5 bench/cpu-per-op.sh
#   bench/cpu-per-op.sh /tmp/zkrs-before target/release/zkrs-server   # A/B, rounds alternate
set -euo pipefail
cd "$(dirname "$0")/.."
WORKLOAD=${WORKLOAD:-create} ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-6} INFLIGHT=${INFLIGHT:-100}
cargo build --release -q -p zk-server --bins
BENCH=$PWD/target/release/zkrs-bench
[ $# -gt 0 ] || set -- "$PWD/target/release/zkrs-server"
. bench/lib.sh
mode() { ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && cat <&3 ) 2>/dev/null | awk '/^Mode:/ {print $2}'; }

one_round() { # server binary -> "ops/s cpu_us_per_op cores"
  local bin=$1 work lines="" pids=() benches=() i
  work=$(mktemp -d /tmp/zkrs-cpuop.XXXXXX)
  local -a cport
  local -a p
  read -r -a p <<< "$(ports_free 9)"
  for i in 1 2 3; do lines+="server.$i=127.0.0.1:${p[3*i-3]}:${p[3*i-2]}"$'\n'; cport[$i]=${p[3*i-1]}; done
  for i in 1 2 3; do
    mkdir -p "$work/$i/data"; echo $i > "$work/$i/data/myid"
    printf 'tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n%s' \
      "$work/$i/data" "${cport[$i]}" "$lines" > "$work/$i/zoo.cfg"
    RUST_LOG=warn "$bin" "$work/$i/zoo.cfg" > "$work/$i/server.log" 2>&1 &
    pids+=($!)
  done
  local settled=""
  for _ in $(seq 1 300); do
    local n=0; for i in 1 2 3; do case $(mode "${cport[$i]}") in leader|follower) n=$((n+1));; esac; done
    [ $n = 3 ] && { settled=1; break; }; sleep 0.1
  done
  if [ -z "$settled" ]; then kill -9 "${pids[@]}" 2>/dev/null; echo "ensemble did not settle; logs in $work" >&2; return 1; fi
  cpu() { local t=0 p f; for p in "${pids[@]}"; do read -r -a f < /proc/$p/stat; t=$((t + f[13] + f[14])); done; echo $t; }
  for i in 1 2 3; do
    "$BENCH" --server 127.0.0.1:${cport[$i]} --workload "$WORKLOAD" --conns 2 --inflight "$INFLIGHT" \
      --duration "$DURATION" --json > "$work/out.$i" 2>/dev/null &
    benches+=($!)
  done
  # The middle of the run: past the connects, before the end.
  sleep 1; local c0 t0 c1 t1; c0=$(cpu); t0=$(date +%s.%N)
  sleep $((DURATION - 2)); c1=$(cpu); t1=$(date +%s.%N)
  wait "${benches[@]}" || true
  kill -9 "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null || true
  python3 - "$work" "$c0" "$c1" "$t0" "$t1" <<'PY'
import json, os, sys
w, c0, c1, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
ops = sum(json.load(open(f"{w}/out.{i}"))["ops_per_sec"] for i in (1, 2, 3))
cores = (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0)
print(f"{ops:.0f} {cores / ops * 1e6:.1f} {cores:.2f}")
PY
  rm -rf "$work"
}

declare -A RES
for r in $(seq 1 "$ROUNDS"); do
  for bin in "$@"; do
    out=$(one_round "$bin")
    echo "round $r  $bin: ops/s, server CPU us/op, server cores: $out" >&2
    RES[$bin]+="$out"$'\n'
  done
done
echo "$WORKLOAD, 3-server ensemble, 3 x 2 connections x $INFLIGHT in flight, $ROUNDS rounds of $DURATION s:"
for bin in "$@"; do
  printf '%s' "${RES[$bin]}" | python3 -c '
import sys, statistics
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
ops = [r[0] for r in rows]; us = [r[1] for r in rows]
print(f"  {sys.argv[1]}: server CPU per op median {statistics.median(us):.1f} us (min {min(us):.1f}, max {max(us):.1f}); ops/s median {statistics.median(ops):.0f}")
' "$bin"
done
