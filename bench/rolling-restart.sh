#!/usr/bin/env bash
# A rolling restart under pipelined writes, as an operator does it: each server in turn, the
# followers first and the leader last, stopped, started again and given time to rejoin (the
# leader counting every follower synced) before the next. Two writers per server, each given the
# whole connect string, pipelining sequential creates (WINDOW=32 in flight, at most RATE=500 a
# second each), write throughout: by default one kazoo client (bench/rolling_writer.py) and one
# zk-client (zk-client/examples/rolling_writer.rs, built here in release) per server; CLIENTS=kazoo
# or CLIENTS=zkrs makes them all of one kind. Each reports the creates that failed (by error), its
# disconnections (kazoo's SUSPENDED, zk-client's Disconnected), expired sessions (LOST, Expired),
# its longest wait for a batch, and /roll against the creates it was told succeeded (fewer
# children is a lost write, LOST; more are creates that failed with ConnectionLoss, whose outcome
# the client cannot know, and were applied); the table has a row per server kind, stop, size and
# client kind.
#
#   bench/rolling-restart.sh                    # zkrs SIGTERM (handover), zkrs kill -9, Apache SIGTERM; 3 and 5 servers
#   SIZES=3 MODES="zkrs:term apache:term" bench/rolling-restart.sh
#   CLIENTS=kazoo bench/rolling-restart.sh      # kazoo writers only (CLIENTS=zkrs: zk-client only)
#   ZKRS=/tmp/zkrs-old bench/rolling-restart.sh # another zkrs-server build
#   RATE=0 WINDOW=64 bench/rolling-restart.sh   # each client as fast as it is answered
#   KEEP=1 ZKRS_LOG=debug bench/rolling-restart.sh  # keep the servers' logs (RUST_LOG for zkrs)
#
# On this 2-core machine the clients take most of the CPU, so the default paces them (RATE=0
# lets each go as fast as it is answered).
#
# Modes: zkrs:term (SIGTERM: a leader hands over first), zkrs:kill (kill -9), zkrs:nokeep
# (SIGTERM with zkrs.keepClientsThroughElection=false: Apache's client behaviour), apache:term.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d /tmp/zkrs-rolling.XXXXXX)
trap 'pkill -9 -f "$WORK" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${ZKRS:-}" ]; then
  cargo build --release -q -p zk-server --bin zkrs-server
  ZKRS=$TARGET/release/zkrs-server
fi
CLIENTS=${CLIENTS:-both}
case "$CLIENTS" in
  kazoo|zkrs|both) ;;
  *) echo "CLIENTS=$CLIENTS: kazoo, zkrs or both" >&2; exit 1 ;;
esac
PY=${PYTHON:-/usr/bin/python3}
if [ "$CLIENTS" != zkrs ]; then
  "$PY" -c "import kazoo" 2>/dev/null || { echo "kazoo is missing: apt-get install python3-kazoo" >&2; exit 1; }
fi
RUST_WRITER=$TARGET/release/examples/rolling_writer
if [ "$CLIENTS" != kazoo ]; then
  cargo build --release -q -p zk-client --example rolling_writer
fi
CP=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar

"$PY" - "$WORK" "$ZKRS" "$CP" "${SIZES:-3 5}" "${MODES:-zkrs:term zkrs:kill apache:term}" "$PWD/bench/rolling_writer.py" \
  "$RUST_WRITER" "$CLIENTS" <<'PY'
import json, os, signal, socket, subprocess, sys, time
work, zkrs, cp, sizes, modes, writer, rust_writer, kinds = sys.argv[1:9]
# Client c's kind: both kinds alternate, so each server's two writers are one of each.
KINDS = {"kazoo": ["kazoo"], "zkrs": ["zk-client"], "both": ["kazoo", "zk-client"]}[kinds]
# The state names each kind reports for a disconnection and for an expired session.
DISCONNECTED, EXPIRED = {"SUSPENDED", "Disconnected"}, {"LOST", "Expired"}

def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def four(port, word):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=0.5); s.settimeout(1)
        s.sendall(word.encode()); out = b""
        while True:
            c = s.recv(4096)
            if not c: break
            out += c
        return out.decode(errors="replace")
    except OSError:
        return ""

def mode(port):
    for l in four(port, "srvr").splitlines():
        if l.startswith("Mode: "): return l[6:]

def mntr(port, key):
    for l in four(port, "mntr").splitlines():
        k, _, v = l.partition("\t")
        if k == key: return v

def run(kind, how, n):
    base = os.path.join(work, f"{kind}-{how}-{n}")
    ports = [(free(), free(), free()) for _ in range(n)]
    lines = "".join(f"server.{i+1}=127.0.0.1:{q}:{e}\n" for i, (_, q, e) in enumerate(ports))
    procs = [None] * n
    def start(i):
        d = os.path.join(base, str(i + 1)); os.makedirs(os.path.join(d, "data"), exist_ok=True)
        with open(os.path.join(d, "data", "myid"), "w") as f: f.write(f"{i+1}\n")
        keep = "zkrs.keepClientsThroughElection=false\n" if how == "nokeep" else ""
        with open(os.path.join(d, "zoo.cfg"), "w") as f:
            f.write(f"tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={d}/data\nclientPort={ports[i][0]}\n"
                    f"clientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\n{keep}{lines}")
        log = open(os.path.join(d, "server.log"), "a")
        if kind == "zkrs":
            cmd = [zkrs, os.path.join(d, "zoo.cfg")]
        else:
            cmd = ["java", "-Xmx512m", "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", os.path.join(d, "zoo.cfg")]
        procs[i] = subprocess.Popen(cmd, stdout=log, stderr=log, cwd=d, env=dict(os.environ, RUST_LOG=os.environ.get("ZKRS_LOG", "info")))
    def settled():
        deadline = time.time() + 120
        while time.time() < deadline:
            ms = [mode(p[0]) for p in ports]
            if ms.count("leader") == 1 and ms.count("follower") == n - 1:
                l = ms.index("leader")
                if mntr(ports[l][0], "zk_synced_followers") == str(n - 1):
                    return l
            time.sleep(0.1)
        raise SystemExit(f"{kind}/{how}/{n}: not settled: {ms}")
    for i in range(n): start(i)
    leader = settled()
    hosts = ",".join(f"127.0.0.1:{p[0]}" for p in ports)
    stop = os.path.join(base, "stop")
    clients = []
    for c in range(2 * n):
        rep = os.path.join(base, f"client{c}.json")
        ck = KINDS[c % len(KINDS)]
        cmd = [sys.executable, writer] if ck == "kazoo" else [rust_writer]
        clients.append((subprocess.Popen(cmd + [hosts, str(c), stop, rep],
                                         stderr=open(os.path.join(base, f"client{c}.err"), "w")), rep, ck))
    time.sleep(5)
    order = [i for i in range(n) if i != leader] + [leader]
    steps = []
    for i in order:
        was = "leader" if i == leader else "follower"
        t0 = time.time()
        procs[i].send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        procs[i].wait()
        stopped = time.time() - t0
        start(i)
        leader = settled()
        steps.append((i + 1, was, stopped, time.time() - t0))
        print(f"{kind}/{how}/{n}: server {i+1} ({was}) stopped in {stopped:.1f} s, ensemble settled "
              f"{time.time() - t0:.1f} s after the signal", file=sys.stderr)
        time.sleep(3)
    open(stop, "w").close()
    reports = []
    for p, rep, ck in clients:
        p.wait(timeout=120)
        reports.append((ck, json.load(open(rep))))
    for p in procs:
        p.send_signal(signal.SIGKILL); p.wait()
    return steps, reports

print("| server | stop | servers | client | creates acked | failed (by error) | clients disconnected (times) | sessions expired | longest batch ms | /roll against acked |")
print("|---|---|---:|---|---:|---|---:|---:|---:|---|")
for n in [int(x) for x in sizes.split()]:
    for m in modes.split():
        kind, how = m.split(":")
        steps, all_reps = run(kind, how, n)
        sig = {"term": "SIGTERM", "kill": "kill -9", "nokeep": "SIGTERM, keepClients=false"}[how]
        for ck in KINDS:
            reps = [r for k, r in all_reps if k == ck]
            acked = sum(r["acked"] for r in reps)
            errs = {}
            for r in reps:
                for k, v in r["errors"].items(): errs[k] = errs.get(k, 0) + v
            susp = sum(1 for r in reps for _, s in r["states"] if s in DISCONNECTED)
            lost = sum(1 for r in reps for _, s in r["states"] if s in EXPIRED)
            worst = max(r["worst_batch_ms"] for r in reps)
            # Fewer children than acknowledged creates is a lost write; more is a create that failed
            # with ConnectionLoss (outcome unknown to the client) and was applied.
            missing = sum(max(0, r["acked"] - r["children"]) for r in reps)
            extra = sum(max(0, r["children"] - r["acked"]) for r in reps)
            roll = "LOST %d" % missing if missing else ("equal" if not extra else f"{extra} failed creates applied")
            failed = ", ".join(f"{v} {k}" for k, v in sorted(errs.items())) or "0"
            print(f"| {kind} | {sig} | {n} | {ck} ({len(reps)}) | {acked} | {failed} | {susp} | {lost} | {worst} | {roll} |", flush=True)
PY
