#!/usr/bin/env bash
# Resident memory an idle session costs zkrs-server: opens SESSIONS sessions with a lean raw-wire
# client (Python, one socket each: the handshake, then a ping each, and another 1 s later, as an
# idle client pings every third of its timeout), waits IDLE seconds, and reads the server's VmRSS from
# /proc/PID/status before the sessions and after; prints the difference per session. The
# sessions stay open (and keep pinging) while measured; nothing else runs against the server.
#
#   bench/idle-sessions.sh                          # 10,000 sessions, target/release/zkrs-server
#   SESSIONS=5000 IDLE=3 bench/idle-sessions.sh /tmp/zkrs-before target/release/zkrs-server
#
# Several binaries are measured one after the other, each on a fresh data directory. The
# open-file limit is raised to the hard limit (the client and the server each hold SESSIONS
# sockets); SESSIONS must stay below it.
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-10000}
IDLE=${IDLE:-3}
[ $# -gt 0 ] || set -- target/release/zkrs-server
ulimit -n "$(ulimit -Hn)"
if [ "$SESSIONS" -ge "$(ulimit -n)" ]; then
  echo "SESSIONS=$SESSIONS needs more open files than the limit, $(ulimit -n)" >&2; exit 1
fi

. bench/lib.sh

echo "$SESSIONS idle sessions, RSS measured ${IDLE} s after they are open"
echo "| binary | RSS before MB | RSS with the sessions MB | bytes per session |"
echo "|---|---:|---:|---:|"
for BIN in "$@"; do
  WORK=$(mktemp -d)
  PORT=$(port_free)
  write_cfg "$WORK" "$PORT"
  PID=$(start_zkrs_cfg "$BIN" "$WORK")
  wait_serving "$PORT"
  sleep 1
  BEFORE=$(rss_kb $PID)
  coproc CLIENTS { python3 bench/idle_client.py "$PORT" "$SESSIONS"; }
  read -r READY _ <&"${CLIENTS[0]}"
  [ "$READY" = ready ] || { echo "the client failed" >&2; kill -9 $PID; exit 1; }
  sleep "$IDLE"
  AFTER=$(rss_kb $PID)
  echo "| $BIN | $((BEFORE / 1024)) | $((AFTER / 1024)) | $(( (AFTER - BEFORE) * 1024 / SESSIONS )) |"
  exec {CLIENTS[1]}>&-
  wait "$CLIENTS_PID" 2>/dev/null || true
  kill_wait $PID
  rm -rf "$WORK"
done
