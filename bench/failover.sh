#!/usr/bin/env bash
# Failover time of a 3-server ensemble, zkrs and Apache ZooKeeper 3.8 side by side: kill -9 the
# leader, then time until a new session on a survivor has its first write acknowledged (the
# client tries the survivors in turn, a connection refused or closed means "not serving yet").
# The killed server is restarted and the ensemble settles before the next round.
#
#   bench/failover.sh              # 10 rounds each, tickTime=2000 (Apache's default)
#   ROUNDS=20 TICK=500 bench/failover.sh
#   IMPLS=zkrs bench/failover.sh   # one side only
#   ZKRS=/tmp/zkrs-old IMPLS=zkrs bench/failover.sh   # another zkrs-server build
#
# Prints the median, min and max per implementation.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-10}
TICK=${TICK:-2000}
WORK=$(mktemp -d /tmp/zkrs-failover.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; pkill -9 -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
cargo build --release -q -p zk-server --bin zkrs-server
ZKRS=${ZKRS:-$PWD/target/release/zkrs-server}
CP=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar
port_free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

python3 - "$WORK" "$ZKRS" "$CP" "$ROUNDS" "$TICK" "${IMPLS:-zkrs apache}" <<'PY'
import os, socket, struct, subprocess, sys, time, statistics
work, zkrs, cp, rounds, tick = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def frame(b): return struct.pack(">i", len(b)) + b
def jstr(s): b = s.encode(); return struct.pack(">i", len(b)) + b

def recv_frame(s):
    hdr = b""
    while len(hdr) < 4:
        c = s.recv(4 - len(hdr))
        if not c: raise ConnectionError("closed")
        hdr += c
    n = struct.unpack(">i", hdr)[0]; body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c: raise ConnectionError("closed")
        body += c
    return body

def try_write(port, path):
    """One new session on `port` and one create; True when acknowledged."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.settimeout(2)
        s.sendall(frame(struct.pack(">iqiq", 0, 0, 10000, 0) + struct.pack(">i", 16) + b"\0" * 16 + b"\0"))
        r = recv_frame(s)
        if struct.unpack(">q", r[8:16])[0] == 0: return False
        acl = struct.pack(">i", 1) + struct.pack(">i", 31) + jstr("world") + jstr("anyone")
        s.sendall(frame(struct.pack(">ii", 1, 1) + jstr(path) + struct.pack(">i", 0) + acl + struct.pack(">i", 0)))
        rep = recv_frame(s)
        s.close()
        return struct.unpack(">iqi", rep[:16])[2] == 0
    except (OSError, ConnectionError):
        return False

def srvr_mode(port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=0.5); s.settimeout(1)
        s.sendall(b"srvr"); out = b""
        while True:
            c = s.recv(4096)
            if not c: break
            out += c
        for l in out.decode(errors="replace").splitlines():
            if l.startswith("Mode: "): return l[6:]
    except OSError:
        return None

def run(kind):
    base = os.path.join(work, kind)
    ports = [(free(), free(), free()) for _ in range(3)]
    lines = "".join(f"server.{i+1}=127.0.0.1:{q}:{e}\n" for i, (_, q, e) in enumerate(ports))
    procs = [None] * 3
    def start(i):
        d = os.path.join(base, str(i + 1)); os.makedirs(os.path.join(d, "data"), exist_ok=True)
        with open(os.path.join(d, "data", "myid"), "w") as f: f.write(f"{i+1}\n")
        with open(os.path.join(d, "zoo.cfg"), "w") as f:
            f.write(f"tickTime={tick}\ninitLimit=10\nsyncLimit=5\ndataDir={d}/data\nclientPort={ports[i][0]}\n"
                    f"clientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\n{lines}")
        log = open(os.path.join(d, "server.log"), "a")
        if kind == "zkrs":
            cmd = [zkrs, os.path.join(d, "zoo.cfg")]
        else:
            cmd = ["java", "-Xmx512m", "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", os.path.join(d, "zoo.cfg")]
        procs[i] = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=d, env=dict(os.environ, RUST_LOG="warn"))
    def settled():
        deadline = time.time() + 120
        while time.time() < deadline:
            modes = [srvr_mode(p[0]) for p in ports]
            if modes.count("leader") == 1 and modes.count("follower") == 2:
                return modes.index("leader")
            time.sleep(0.1)
        raise SystemExit(f"{kind}: no leader: {modes}")
    for i in range(3): start(i)
    times = []
    for r in range(rounds):
        leader = settled()
        survivors = [ports[i][0] for i in range(3) if i != leader]
        procs[leader].kill(); t0 = time.perf_counter(); procs[leader].wait()
        k = 0
        while not try_write(survivors[k % 2], f"/failover-{r}-{k}"):
            k += 1
            if time.perf_counter() - t0 > 60: raise SystemExit(f"{kind}: no write within 60 s")
        times.append((time.perf_counter() - t0) * 1000)
        print(f"{kind} round {r+1}: {times[-1]:.0f} ms", file=sys.stderr)
        start(leader)
    for p in procs: p.kill()
    return times

res = {k: run(k) for k in sys.argv[6].split()}
print(f"Failover, kill -9 of the leader to the first write acknowledged for a new session on a survivor; "
      f"3 servers, tickTime={tick}, {rounds} rounds:\n")
print("| server | median ms | min ms | max ms |\n|---|---:|---:|---:|")
for k, t in res.items():
    print(f"| {k} | {statistics.median(t):.0f} | {min(t):.0f} | {max(t):.0f} |")
PY
