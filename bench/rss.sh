#!/usr/bin/env bash
# zkrs-server's resident memory with ZNODES znodes of VALUE bytes: right after zkrs-bench's
# populate, IDLE seconds later, then after a kill -9 and a restart from the data directory (when
# it serves again, and IDLE seconds later). Reads VmRSS, RssAnon and RssFile from /proc/PID/status.
#
# ZNODES=1000000 VALUE=100 IDLE=5 EXTRA='snapCount=100000000' bench/rss.sh [zkrs-server binary]
# EXTRA: zoo.cfg lines to add (separated by ';'), e.g. 'snapCount=100000000;snapSizeLimitInKb=-1'
# so that no snapshot is being written while measuring; empty for the default configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
ZNODES=${ZNODES:-1000000}
VALUE=${VALUE:-100}
IDLE=${IDLE:-5}
EXTRA=${EXTRA:-}
ZKRS=${1:-target/release/zkrs-server}
BENCH=target/release/zkrs-bench
WORK=$(mktemp -d)
trap 'kill -9 $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT

port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
srvr() { ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && timeout 2 cat <&3 ) 2>/dev/null || true; }
wait_serving() {
  for _ in $(seq 1 6000); do [[ $(srvr "$1") == Zookeeper* ]] && return 0; sleep 0.05; done
  echo "server on port $1 did not come up" >&2; return 1
}
mem() { # label pid
  awk -v l="$1" '/^VmRSS/ {r=$2} /^RssAnon/ {a=$2} /^RssFile/ {f=$2}
    END {printf "| %s | %.0f | %.0f | %.0f |\n", l, r/1024, a/1024, f/1024}' /proc/$2/status
}
PORT=$(port_free)
mkdir -p "$WORK/data"
printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\nglobalOutstandingLimit=100000\n' "$WORK" "$PORT" > "$WORK/zoo.cfg"
[ -n "$EXTRA" ] && tr ';' '\n' <<< "$EXTRA" >> "$WORK/zoo.cfg"
RUST_LOG=warn "$ZKRS" "$WORK/zoo.cfg" > "$WORK/server.log" 2>&1 & PID=$!
wait_serving "$PORT"
echo "$ZNODES znodes of $VALUE bytes, $ZKRS, extra zoo.cfg: '${EXTRA}'"
echo "| when | VmRSS MB | RssAnon MB | RssFile MB |"
echo "|---|---:|---:|---:|"
mem "started" $PID
"$BENCH" --server 127.0.0.1:$PORT --workload populate --count "$ZNODES" --conns 4 --inflight 500 --value-size "$VALUE" >/dev/null 2>&1
mem "after load" $PID
sleep "$IDLE"; mem "after load + ${IDLE} s" $PID
kill -9 $PID; while kill -0 $PID 2>/dev/null; do sleep 0.02; done
RUST_LOG=warn "$ZKRS" "$WORK/zoo.cfg" >> "$WORK/server.log" 2>&1 & PID=$!
wait_serving "$PORT"
mem "restarted, serving" $PID
sleep "$IDLE"; mem "restarted + ${IDLE} s" $PID
echo "node count after restart: $(srvr "$PORT" | awk '/Node count/ {print $3}')"
