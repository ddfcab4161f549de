#!/usr/bin/env bash
# Does a snapshot show in write latency? Starts zkrs-server with a tree of ZNODES znodes and runs
# `set` (4 connections x 200 in flight, 100-byte values) for DURATION seconds, twice: once with
# snapshots as configured by default (snapCount 100000), once with snapshots off. Prints, for each,
# the throughput, p50/p99/p99.9, the slowest one-second rate, and how many snapshots were written
# while the load ran.
#
#   bench/snapshot-p99.sh                      # defaults: ZNODES=1000000 DURATION=20
#   ZNODES=200000 DURATION=10 bench/snapshot-p99.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-20}
ZNODES=${ZNODES:-1000000}
WORK=$(mktemp -d /tmp/zkrs-snapp99.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

echo "== building (release)" >&2
cargo build --release -q -p zk-server --bins
BENCH=target/release/zkrs-bench
ZKRS=target/release/zkrs-server

port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_serving() { # port
  for _ in $(seq 1 600); do
    out=$( (exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && cat <&3) 2>/dev/null || true)
    [[ $out == Zookeeper* ]] && return 0
    sleep 0.1
  done
  echo "server on port $1 did not come up" >&2; return 1
}
snapshots_written() { grep -c "snapshot .* written" "$1" || true; }

run_one() { # label extra-cfg-lines
  local dir="$WORK/$1" port; port=$(port_free)
  mkdir -p "$dir/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n%b' \
    "$dir" "$port" "$2" > "$dir/zoo.cfg"
  RUST_LOG=info "$ZKRS" "$dir/zoo.cfg" > "$dir/server.log" 2>&1 &
  local pid=$!
  wait_serving "$port"
  echo "== $1: populating $ZNODES znodes" >&2
  "$BENCH" --server "127.0.0.1:$port" --workload populate --count "$ZNODES" --conns 4 --inflight 500 \
    --value-size 100 >/dev/null 2>&1
  sleep 3 # let a snapshot started by the populate finish
  local before; before=$(snapshots_written "$dir/server.log")
  echo "== $1: set, 4 x 200, ${DURATION}s" >&2
  "$BENCH" --server "127.0.0.1:$port" --workload set --conns 4 --inflight 200 --duration "$DURATION" \
    --value-size 100 --json 2> "$dir/progress" > "$dir/result.json"
  local after; after=$(snapshots_written "$dir/server.log")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 - "$1" "$dir/result.json" "$dir/progress" "$((after - before))" <<'PY'
import json, re, sys
label, result, progress, snaps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
r = json.loads(open(result).read().strip().splitlines()[-1])
rates = [int(m.group(1)) for m in re.finditer(r"\]\s+(\d+) ops/s", open(progress).read())]
# The first and last seconds are partial.
slowest = min(rates[1:-1]) if len(rates) > 2 else (min(rates) if rates else 0)
print(f"| {label} | {snaps} | {r['ops_per_sec']:.0f} | {slowest} | {r['p50_us']} | {r['p99_us']} | {r['p999_us']} | {r['max_us']} |")
PY
}

echo "| zkrs-server | snapshots written during the run | set ops/s | slowest second, ops/s | p50 µs | p99 µs | p99.9 µs | max µs |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
run_one "snapshots on (default snapCount)" ""
run_one "snapshots off" "snapCount=2147483647\nsnapSizeLimitInKb=0\n"
