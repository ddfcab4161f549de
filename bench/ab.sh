#!/usr/bin/env bash
# Compares two zkrs-server builds on the same workloads in one run: each workload runs on build A,
# then on build B, REPEAT times (alternating, so drift in the machine hits both alike), each
# server fresh and the other one stopped. Prints the median ops/s and p50/p99 latency per build.
#
#   bench/ab.sh OLD_BINARY NEW_BINARY            # e.g. a build of main before a change, and now
#   REPEAT=5 DURATION=5 bench/ab.sh A B
#
# To build a past commit:  git worktree add /tmp/zkrs-old <commit> &&
#   (cd /tmp/zkrs-old && cargo build --release -p zk-server --bins)
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/ab.sh A_BINARY B_BINARY}
B=${2:?usage: bench/ab.sh A_BINARY B_BINARY}
DURATION=${DURATION:-5}
REPEAT=${REPEAT:-3}
VALUE=${VALUE:-100}
LOADS=${LOADS:-"get 4 200|set 4 200|create 4 200|mixed 4 200|get 1 1|set 1 1|watch 32 1|churn 4 1|multi 4 50"}
WORK=$(mktemp -d /tmp/zkrs-ab.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
cargo build --release -q -p zk-server --bin zkrs-bench
BENCH=target/release/zkrs-bench

port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
srvr() { ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && cat <&3 ) 2>/dev/null || true; }
wait_serving() {
  for _ in $(seq 1 600); do [[ $(srvr "$1") == Zookeeper* ]] && return 0; sleep 0.05; done
  echo "server on port $1 did not come up" >&2; return 1
}
start() { # binary dir port
  mkdir -p "$2/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n' "$2" "$3" > "$2/zoo.cfg"
  RUST_LOG=warn "$1" "$2/zoo.cfg" > "$2/server.log" 2>&1 & echo $!
}
RESULTS="$WORK/results.jsonl"
IFS='|' read -ra loads <<< "$LOADS"
for load in "${loads[@]}"; do
  set -- $load
  for r in $(seq 1 "$REPEAT"); do
    for side in A B; do
      bin=$A; [ "$side" = B ] && bin=$B
      dir="$WORK/$side-$1-$2-$3-$r"; port=$(port_free)
      pid=$(start "$bin" "$dir" "$port"); wait_serving "$port"
      echo "== $side: $1, $2 x $3, round $r" >&2
      "$BENCH" --server 127.0.0.1:$port --workload "$1" --conns "$2" --inflight "$3" --duration "$DURATION" \
        --value-size "$VALUE" --json 2>/dev/null | sed "s/^{/{\"side\":\"$side\",/" >> "$RESULTS"
      kill -9 "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$dir"
    done
  done
done
python3 - "$RESULTS" "$A" "$B" "$DURATION" "$REPEAT" <<'PY'
import json, sys, statistics, datetime, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"Run {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores; {sys.argv[4]} s per run, "
      f"median of {sys.argv[5]} alternating runs.\nA = {sys.argv[2]}\nB = {sys.argv[3]}\n")
print("| workload | conns x inflight | A ops/s | B ops/s | B/A | A p50/p99 us | B p50/p99 us |")
print("|---|---|---:|---:|---:|---:|---:|")
by = {}
for r in rows:
    by.setdefault((r["workload"], r["conns"], r["inflight"]), {}).setdefault(r["side"], []).append(r)
med = lambda rs, k: statistics.median(x[k] for x in rs)
for (w, c, i), d in by.items():
    a, b = d.get("A", []), d.get("B", [])
    if not (a and b): continue
    oa, ob = med(a, "ops_per_sec"), med(b, "ops_per_sec")
    print(f"| {w} | {c} x {i} | {oa:.0f} | {ob:.0f} | {ob/oa:.2f}x | {med(a,'p50_us'):.0f}/{med(a,'p99_us'):.0f} | {med(b,'p50_us'):.0f}/{med(b,'p99_us'):.0f} |")
PY
