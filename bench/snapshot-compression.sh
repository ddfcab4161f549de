#!/usr/bin/env bash
# What snapshot.compression=zstd costs and saves: one zkrs-server (release build) is populated
# with ZNODES znodes of 100 bytes, then, ROUNDS times over, with compression off and on in
# alternation (each mode restarts the server with its zoo.cfg): one znode is created (so that each
# snapshot starts at a zxid of its own), a snapshot is asked for with `csnp` and written unpaced
# (snapshot.writeMBPerSecond=0), and the server is killed with SIGKILL and started again, loading
# that snapshot. Each row: the snapshot file's size, the time the server logged writing it
# ("snapshot ... written: N bytes in T": from its first chunk to its rename, the tree serialized
# meanwhile), and the restart: from spawn to answering `srvr`, and the snapshot load the server
# logged ("loaded snapshot ... in T"). The page cache is left alone (the machine is shared): the
# restart reads a file just written, as after a kill -9 on a server whose disk cache survived.
#
#   bench/snapshot-compression.sh                        # ZNODES=1000000 ROUNDS=3 LEVEL=1
#   ZNODES=200000 ROUNDS=2 LEVEL=3 bench/snapshot-compression.sh
#   VALUES=random bench/snapshot-compression.sh          # random values (see below)
#
# zkrs-bench's values are all "x", which compresses as well as anything can; VALUES=random
# populates through bench/tree_client.py instead, with 100 random bytes a znode (/rnd/n<i>), which
# do not compress at all: a real tree's data lies between the two.
#   TARGET_DIR=/path/to/target bench/snapshot-compression.sh   # binaries from another target dir
#   NO_BUILD=1 bench/snapshot-compression.sh             # the release binaries as they are
set -euo pipefail
cd "$(dirname "$0")/.."
ZNODES=${ZNODES:-1000000}
ROUNDS=${ROUNDS:-3}
LEVEL=${LEVEL:-1}
VALUES=${VALUES:-x}
TARGET_DIR=${TARGET_DIR:-${CARGO_TARGET_DIR:-target}}
WORK=$(mktemp -d /tmp/zkrs-snapzstd.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

if [[ -z ${NO_BUILD:-} ]]; then
  echo "== building (release)" >&2
  CARGO_TARGET_DIR=$TARGET_DIR cargo build --release -q -p zk-server --bins
fi
BENCH=$TARGET_DIR/release/zkrs-bench
ZKRS=$TARGET_DIR/release/zkrs-server

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
four() { (exec 3<>/dev/tcp/127.0.0.1/$port && printf '%s' "$1" >&3 && cat <&3) 2>/dev/null || true; }
now_ms() { date +%s%3N; }
wait_serving() {
  for _ in $(seq 1 6000); do
    [[ $(four srvr) == Zookeeper* ]] && return 0
    sleep 0.01
  done
  echo "the server did not come up" >&2; return 1
}
mkdir -p "$WORK/data" "$WORK/log"
config() { # compression
  printf 'tickTime=2000\ndataDir=%s/data\ndataLogDir=%s/log\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\nsnapCount=2147483647\nsnapSizeLimitInKb=0\nsnapshot.idleSeconds=0\nsnapshot.minRequestIntervalSeconds=0\nsnapshot.writeMBPerSecond=0\nsnapshot.compression=%s\nsnapshot.compressionLevel=%s\n' \
    "$WORK" "$WORK" "$port" "$1" "$LEVEL" > "$WORK/zoo.cfg"
}
pid= up_ms=
start() { # sets pid, and up_ms: from spawn to serving
  local t0; t0=$(now_ms)
  RUST_LOG=info "$ZKRS" "$WORK/zoo.cfg" >> "$WORK/server.log" 2>&1 &
  pid=$!
  wait_serving
  up_ms=$(( $(now_ms) - t0 ))
}

config none
start
echo "== populating $ZNODES znodes of 100 bytes ($VALUES)" >&2
if [[ $VALUES == random ]]; then
  python3 bench/tree_client.py populate "$port" "$ZNODES" 100 >&2
else
  "$BENCH" --server "127.0.0.1:$port" --workload populate --count "$ZNODES" --conns 4 --inflight 500 \
    --value-size 100 > /dev/null 2>&1
fi

echo "| round | compression | snapshot file bytes | written in (server log) | restart to serving, ms | snapshot loaded in (server log) |"
echo "|---|---|---:|---:|---:|---:|"
n=0
for round in $(seq 1 "$ROUNDS"); do
  for mode in none zstd; do
    n=$((n + 1))
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    config "$mode"
    start
    # A znode of its own, so the snapshot starts at a new zxid.
    "$BENCH" --server "127.0.0.1:$port" --workload populate-seq --count 1 --conns 1 --inflight 1 \
      --value-size 100 > /dev/null 2>&1
    lines=$(grep -c "snapshot .* written" "$WORK/server.log" || true)
    four csnp > /dev/null
    for _ in $(seq 1 6000); do
      [[ $(grep -c "snapshot .* written" "$WORK/server.log" || true) -gt $lines ]] && break
      sleep 0.05
    done
    written=$(grep "snapshot .* written" "$WORK/server.log" | tail -1)
    name=$(sed -E 's/.*snapshot (snapshot\.[0-9a-f]+) written.*/\1/' <<< "$written")
    bytes=$(sed -E 's/.* written: ([0-9]+) bytes in (.*)$/\1/' <<< "$written")
    took=$(sed -E 's/.* written: ([0-9]+) bytes in (.*)$/\2/' <<< "$written")
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    start
    loaded=$(grep "loaded snapshot $name" "$WORK/server.log" | tail -1 | sed -E 's/.* in (.*)$/\1/')
    echo "| $round | $mode | $bytes | $took | $up_ms | $loaded |"
  done
done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
