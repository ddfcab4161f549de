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

port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
srvr() { ( exec 3<>/dev/tcp/127.0.0.1/$1 && printf srvr >&3 && timeout 2 cat <&3 ) 2>/dev/null || true; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# Opens $2 sessions to port $1, pings each twice 1 s apart, then prints "ready" and keeps them
# open (pinging every 10 s) until its stdin closes.
CLIENT=$(cat <<'EOF'
import select, socket, struct, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
def read_exact(s, k):
    b = b""
    while len(b) < k:
        c = s.recv(k - len(b))
        if not c:
            raise SystemExit("server closed a session")
        b += c
    return b
def frame(s):
    (length,) = struct.unpack(">i", read_exact(s, 4))
    return read_exact(s, length)
# ConnectRequest: protocolVersion, lastZxidSeen, timeOut (30 s), sessionId, passwd, readOnly.
hello = struct.pack(">iqiqi16s?", 0, 0, 30000, 0, 16, b"\0" * 16, False)
ping = struct.pack(">iii", 8, -2, 11)
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack(">i", len(hello)) + hello)
    frame(s)
    socks.append(s)
def ping_all():
    for s in socks:
        s.sendall(ping)
    for s in socks:
        frame(s)
ping_all()
time.sleep(1)
ping_all()
print("ready", flush=True)
last = time.monotonic()
while not select.select([sys.stdin], [], [], 1.0)[0]:
    if time.monotonic() - last >= 10:
        ping_all()
        last = time.monotonic()
EOF
)

echo "$SESSIONS idle sessions, RSS measured ${IDLE} s after they are open"
echo "| binary | RSS before MB | RSS with the sessions MB | bytes per session |"
echo "|---|---:|---:|---:|"
for BIN in "$@"; do
  WORK=$(mktemp -d)
  PORT=$(port_free)
  mkdir -p "$WORK/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n' \
    "$WORK" "$PORT" > "$WORK/zoo.cfg"
  RUST_LOG=warn "$BIN" "$WORK/zoo.cfg" > "$WORK/server.log" 2>&1 & PID=$!
  for _ in $(seq 1 600); do [[ $(srvr "$PORT") == Zookeeper* ]] && break; sleep 0.05; done
  sleep 1
  BEFORE=$(rss_kb $PID)
  coproc CLIENTS { python3 -c "$CLIENT" "$PORT" "$SESSIONS"; }
  read -r READY <&"${CLIENTS[0]}"
  [ "$READY" = ready ] || { echo "the client failed" >&2; kill -9 $PID; exit 1; }
  sleep "$IDLE"
  AFTER=$(rss_kb $PID)
  echo "| $BIN | $((BEFORE / 1024)) | $((AFTER / 1024)) | $(( (AFTER - BEFORE) * 1024 / SESSIONS )) |"
  exec {CLIENTS[1]}>&-
  wait "$CLIENTS_PID" 2>/dev/null || true
  kill -9 $PID 2>/dev/null || true
  wait $PID 2>/dev/null || true
  rm -rf "$WORK"
done
