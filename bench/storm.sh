#!/usr/bin/env bash
# A reconnect storm on a 3-server ensemble, zkrs and Apache ZooKeeper 3.8 side by side: SESSIONS
# sessions spread over the servers, kill -9 of the leader, then how long until every session is
# back, how many the servers expired (the goal: none), and a writer's latency meanwhile. Each
# session reconnects as the Java client does (a random pause of up to 1 s, then the next server,
# with its session id and the last zxid it saw). See bench/storm.py for what is measured.
#
#   bench/storm.sh                          # 20,000 sessions, 30 s timeout, both servers
#   SESSIONS=5000 IMPLS=zkrs bench/storm.sh
#   STORM_CLIENT=python bench/storm.sh      # the sessions held by bench/storm.py's own workers
#
# The client needs one socket a session, spread over worker processes of 9,000 sessions each;
# the servers hold theirs (up to two thirds of SESSIONS each once the leader is gone), which must
# stay below this VM's open-file limit (20,000 here).
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-20000}
TIMEOUT_MS=${TIMEOUT_MS:-30000}
IMPLS=${IMPLS:-zkrs apache}
WORK=$(mktemp -d /tmp/zkrs-storm.XXXXXX)
trap 'pkill -9 -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
[[ " $IMPLS " != *" apache "* ]] || [ -f /usr/share/java/zookeeper.jar ] ||
  { echo "Apache ZooKeeper is not installed (apt-get install zookeeper)" >&2; exit 1; }
cargo build --release -q -p zk-server --bin zkrs-server
# The sessions are held by zk-client's storm_client example (Rust, a thread per 2,500), so that
# the storm measures the servers: the Python workers (STORM_CLIENT=python) used six times the
# servers' CPU on a 2-core VM. The writer is Python either way.
if [ "${STORM_CLIENT:-rust}" = rust ]; then
  cargo build --release -q -p zk-client --example storm_client
  export STORM_CLIENT_BIN="$PWD/target/release/examples/storm_client"
fi
ulimit -n "$(ulimit -Hn)"
python3 bench/storm.py "$WORK" "${ZKRS:-$PWD/target/release/zkrs-server}" \
  /etc/zookeeper/conf:/usr/share/java/zookeeper.jar "$SESSIONS" "$TIMEOUT_MS" "$IMPLS"
