#!/usr/bin/env bash
# Does a snapshot show in write latency? Starts zkrs-server with a tree of ZNODES znodes and runs
# setData (100-byte values) for DURATION seconds under two loads: closed loop (4 connections x 200
# in flight, as fast as the server goes) and open loop (RATE setData a second, sent on schedule,
# latency counted from when each was due). Each load runs with snapshots as configured by default
# and with snapshots off, in that order, REPEAT times.
#
# zkrs-bench writes one line per second (ops, p50, p99); the server's log says when each snapshot
# started and when its file was written. Each row shows the whole run, then the seconds that
# overlapped a snapshot against the seconds that did not (median of their per-second p99, and
# the worst second): a snapshot that shows in latency shows there, within one run, whatever the
# machine was doing in another.
#
#   bench/snapshot-p99.sh                      # defaults: ZNODES=1000000 DURATION=20 RATE=60000
#   ZNODES=200000 DURATION=10 REPEAT=2 bench/snapshot-p99.sh
#   EXTRA_CFG='snapshot.writeMBPerSecond=0\n' bench/snapshot-p99.sh    # snapshots unpaced
#   DATA_DIR=/mnt/other bench/snapshot-p99.sh   # snapshots under /mnt/other (another device than the log)
#   LOADS=open MODES=on ZKRS=/tmp/other/zkrs-server bench/snapshot-p99.sh   # one load, snapshots
#                                               # on only, another build of the server
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-20}
ZNODES=${ZNODES:-1000000}
RATE=${RATE:-60000}
REPEAT=${REPEAT:-1}
EXTRA_CFG=${EXTRA_CFG:-}
LOADS=${LOADS:-closed open}
MODES=${MODES:-on off}
WORK=$(mktemp -d /tmp/zkrs-snapp99.XXXXXX)
# Snapshots go to a directory of their own, under DATA_DIR when given.
SNAPS=$(mktemp -d "${DATA_DIR:-$WORK}/zkrs-snapp99-data.XXXXXX")
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK" "$SNAPS"' EXIT

echo "== building (release)" >&2
cargo build --release -q -p zk-server --bins
BENCH=target/release/zkrs-bench
ZKRS=${ZKRS:-target/release/zkrs-server}

port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_serving() { # port
  for _ in $(seq 1 600); do
    out=$( (exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && cat <&3) 2>/dev/null || true)
    [[ $out == Zookeeper* ]] && return 0
    sleep 0.1
  done
  echo "server on port $1 did not come up" >&2; return 1
}

run_one() { # label load(closed|open) extra-cfg-lines
  local dir="$WORK/$1" port; port=$(port_free)
  local data="$SNAPS/$1"
  rm -rf "$data"; mkdir -p "$dir/log" "$data"
  printf 'tickTime=2000\ndataDir=%s\ndataLogDir=%s/log\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n%b%b' \
    "$data" "$dir" "$port" "$EXTRA_CFG" "$3" > "$dir/zoo.cfg"
  RUST_LOG=info "$ZKRS" "$dir/zoo.cfg" > "$dir/server.log" 2>&1 &
  local pid=$!
  wait_serving "$port"
  echo "== $1: populating $ZNODES znodes" >&2
  "$BENCH" --server "127.0.0.1:$port" --workload populate --count "$ZNODES" --conns 4 --inflight 500 \
    --value-size 100 >/dev/null 2>&1
  sleep 3 # let a snapshot started by the populate finish
  local load=(--conns 4 --inflight 200)
  [[ $2 == open ]] && load+=(--rate "$RATE")
  echo "== $1: set ${load[*]}, ${DURATION}s" >&2
  "$BENCH" --server "127.0.0.1:$port" --workload set "${load[@]}" --duration "$DURATION" \
    --value-size 100 --timeline "$dir/timeline.csv" --json 2> "$dir/progress" > "$dir/result.json"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 - "$1" "$dir" <<'PY'
import datetime, json, re, statistics, sys
label, d = sys.argv[1], sys.argv[2]
r = json.loads(open(f"{d}/result.json").read().strip().splitlines()[-1])
def at_ms(line):
    t = datetime.datetime.fromisoformat(line.split()[0].rstrip("Z"))
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000
# Snapshot windows: from "taking a snapshot" to "snapshot ... written".
windows, began = [], None
for line in open(f"{d}/server.log"):
    if "taking a snapshot at zxid" in line:
        began = at_ms(line)
    elif re.search(r"snapshot \S+ written", line) and began is not None:
        windows.append((began, at_ms(line)))
        began = None
if began is not None:
    windows.append((began, float("inf")))
rows = [l.strip().split(",") for l in open(f"{d}/timeline.csv").readlines()[1:]]
inside, outside, taken = [], [], 0
# The first and last seconds are partial.
for row in rows[1:-1]:
    end = int(row[0]); p99 = int(row[3])
    hit = [w for w in windows if w[0] < end and w[1] > end - 1000]
    (inside if hit else outside).append(p99)
taken = sum(1 for w in windows if w[1] > int(rows[0][0]) - 1000 and w[0] < int(rows[-1][0]))
med = lambda xs: f"{statistics.median(xs) / 1000:.1f}" if xs else "-"
worst = lambda xs: f"{max(xs) / 1000:.1f}" if xs else "-"
print(f"| {label} | {taken} | {r['ops_per_sec']:.0f} | {r['p50_us'] / 1000:.2f} | {r['p99_us'] / 1000:.1f} | "
      f"{r['p999_us'] / 1000:.1f} | {len(inside)}: {med(inside)} / {worst(inside)} | "
      f"{len(outside)}: {med(outside)} / {worst(outside)} |")
PY
}

echo "| run | snapshots during the load | set ops/s | p50 ms | p99 ms | p99.9 ms | seconds in a snapshot: median p99 / worst p99, ms | other seconds: median p99 / worst p99, ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for i in $(seq 1 "$REPEAT"); do
  for load in $LOADS; do
    for mode in $MODES; do
      if [ "$mode" = on ]; then
        run_one "$load-on-$i" "$load" ""
      else
        run_one "$load-off-$i" "$load" "snapCount=2147483647\nsnapSizeLimitInKb=0\n"
      fi
    done
  done
done
