#!/usr/bin/env bash
# The unloaded write (set, 1 connection x 1 in flight) in each of the log's append modes
# (txnLog.appendMode: pwrite, mmap), on fresh zkrs servers, alternating, ROUNDS times; then the
# yardsticks: the loopback round trip (ping p50) and one 150-byte pwrite + fdatasync on the data
# disk. Prints each mode's p50 per round and the medians against round trip + fdatasync + 40 us.
# bench/compare.sh runs the same comparison (MODE_ROUNDS) beside Apache; this is the quick one.
#
#   ROUNDS=5 DURATION=5 bench/append-modes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d /tmp/zkrs-modes.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
cargo build --release -q -p zk-server --bins
BENCH=target/release/zkrs-bench
ZKRS=target/release/zkrs-server
port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
srvr() { ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && timeout 2 cat <&3 ) 2>/dev/null || true; }
wait_serving() {
  for _ in $(seq 1 600); do [[ $(srvr "$1") == Zookeeper* ]] && return 0; sleep 0.05; done
  echo "server on port $1 did not come up" >&2; return 1
}
start() { # dir port mode
  mkdir -p "$1/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\ntxnLog.appendMode=%s\n' "$1" "$2" "$3" > "$1/zoo.cfg"
  RUST_LOG=warn "$ZKRS" "$1/zoo.cfg" > "$1/server.log" 2>&1 & echo $!
}
RESULTS="$WORK/results.jsonl"
for r in $(seq 1 "$ROUNDS"); do
  for mode in pwrite mmap; do
    dir="$WORK/$mode-$r"; port=$(port_free)
    pid=$(start "$dir" "$port" "$mode"); wait_serving "$port"
    echo "== $mode, round $r" >&2
    "$BENCH" --server 127.0.0.1:$port --workload set --conns 1 --inflight 1 --duration "$DURATION" --json 2>/dev/null \
      | sed "s/^{/{\"mode\":\"$mode\",/" >> "$RESULTS"
    if [ "$r" = 1 ] && [ "$mode" = pwrite ]; then
      "$BENCH" --server 127.0.0.1:$port --workload ping --conns 1 --inflight 1 --duration 3 --json 2>/dev/null \
        | sed 's/^{/{"mode":"ping",/' >> "$RESULTS"
    fi
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    if [ "$r" = 1 ] && [ "$mode" = pwrite ]; then
      echo "{\"mode\":\"fdatasync\",\"value\":$(python3 bench/fdatasync-probe.py "$dir/data")}" >> "$RESULTS"
    fi
    rm -rf "$dir"
  done
done
python3 - "$RESULTS" <<'PY'
import json, sys, statistics, datetime
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rtt = next(r["p50_us"] for r in rows if r["mode"] == "ping")
fs = next(r["value"] for r in rows if r["mode"] == "fdatasync")
print(f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC. Round trip (ping p50) {rtt} us, fdatasync (median) {fs} us: target {rtt + fs + 40} us.\n")
print("| txnLog.appendMode | p50 us, each round | median p50 us | median p99 us | median ops/s |")
print("|---|---|---:|---:|---:|")
for mode in ("pwrite", "mmap"):
    rs = [r for r in rows if r["mode"] == mode]
    print(f"| {mode} | {', '.join(str(r['p50_us']) for r in rs)} | {statistics.median(r['p50_us'] for r in rs):.0f} | "
          f"{statistics.median(r['p99_us'] for r in rs):.0f} | {statistics.median(r['ops_per_sec'] for r in rs):.0f} |")
PY
