#!/usr/bin/env python3
"""A reconnect storm, zkrs-server and Apache ZooKeeper 3.8 side by side (bench/storm.sh runs it).

A 3-server ensemble holds SESSIONS sessions spread evenly over its servers, each pinging every
third of its timeout as the Java client does. The leader is killed with SIGKILL. Every session
whose connection drops comes back as the Java client would: after a random pause of up to 1 s,
to the next server of its list, with its session id, password and the last zxid it saw. Meanwhile
one more session on a survivor writes (setData every 20 ms, one at a time).

Measured: the time from the kill to a new leader (a survivor answering srvr as leader), to the
last session back, each session's time without a connection, the sessions the servers declared
expired (the goal is none), and the writer's latency and errors from the kill on.

Clients run in worker processes of at most 9,000 sessions each (asyncio), so that no process
needs more open files than the VM's limit; the script raises its own limit to the hard limit.
Standard library only.

  storm.py WORK ZKRS_SERVER CLASSPATH SESSIONS TIMEOUT_MS "zkrs apache"
"""

import asyncio
import json
import multiprocessing as mp
import os
import random
import resource
import socket
import statistics
import struct
import subprocess
import sys
import time

PER_WORKER = 2500
PING_XID, OP_PING, OP_SET = -2, 11, 5
WRITE_PATH = "/storm"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def srvr_mode(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.settimeout(1)
            s.sendall(b"srvr")
            out = b""
            while True:
                c = s.recv(4096)
                if not c:
                    break
                out += c
        for line in out.decode(errors="replace").splitlines():
            if line.startswith("Mode: "):
                return line[6:]
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    """User and system CPU time a process has used, seconds (debug output)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def jstr(text):
    b = text.encode()
    return struct.pack(">i", len(b)) + b


async def read_frame(reader):
    (n,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(n)


class Session:
    """One client session: its id and password once established, the last zxid it saw."""

    def __init__(self, ports, first, timeout_ms):
        self.ports, self.next, self.timeout_ms = ports, first, timeout_ms
        self.sid, self.passwd, self.last_zxid = 0, b"\0" * 16, 0
        self.reader = self.writer = None
        # When the last connection attempt's TCP connection was made (debug output).
        self.connected = 0.0

    async def connect(self):
        """Connects to the next server in turn; False if refused, closed or expired (then
        self.expired is set)."""
        port = self.ports[self.next % len(self.ports)]
        self.next += 1
        try:
            self.reader, self.writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port), 2)
            self.connected = time.time()
            hello = struct.pack(">iqiq", 0, self.last_zxid, self.timeout_ms, self.sid) + \
                struct.pack(">i", 16) + self.passwd + b"\0"
            self.writer.write(struct.pack(">i", len(hello)) + hello)
            r = await asyncio.wait_for(read_frame(self.reader), 5)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            self.close()
            return False
        _proto, timeout, sid = struct.unpack(">iiq", r[:16])
        if timeout <= 0:
            self.close()
            return "expired" if self.sid else False
        self.sid, self.passwd, self.timeout_ms = sid, r[20:36], timeout
        return True

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, xid, op, body):
        """Sends one request and returns its reply's error code, skipping notifications."""
        self.writer.write(struct.pack(">iii", 8 + len(body), xid, op) + body)
        while True:
            f = await asyncio.wait_for(read_frame(self.reader), self.timeout_ms / 1000 * 2 / 3)
            rxid, zxid, err = struct.unpack(">iqi", f[:16])
            if zxid > 0:
                self.last_zxid = max(self.last_zxid, zxid)
            if rxid == xid:
                return err


DOWN = [0]  # sessions of this worker without a connection, for the main process's polls


async def reconnect(sess, log):
    """Comes back as the Java client does; logs the time without a connection or the expiry."""
    lost = time.time()
    DOWN[0] += 1
    try:
        return await reconnect_(sess, log, lost)
    finally:
        DOWN[0] -= 1


async def reconnect_(sess, log, lost):
    tries = 0
    while True:
        await asyncio.sleep(random.random())
        tried = time.time()
        r = await sess.connect()
        tries += 1
        if r == "expired":
            log.append(("expired", lost, time.time(), tries, tried, sess.connected))
            return False
        if r:
            log.append(("back", lost, time.time(), tries, tried, sess.connected))
            return True
        if time.time() - lost > 120:
            log.append(("gave up", lost, time.time(), tries, tried, sess.connected))
            return False


async def keep(sess, log, stop):
    """Reads what the server sends (so a dropped connection is seen at once, as the Java
    client's reader sees it), pings every third of the timeout, takes a connection silent for
    two thirds of it as lost, and reconnects."""
    last_heard = next_ping = 0.0

    def reset():
        nonlocal last_heard, next_ping
        last_heard = time.time()
        next_ping = last_heard + sess.timeout_ms / 3000

    reset()
    while not stop.is_set():
        try:
            f = await asyncio.wait_for(read_frame(sess.reader), max(0.01, next_ping - time.time()))
            last_heard = time.time()
            (zxid,) = struct.unpack(">q", f[4:12])
            sess.last_zxid = max(sess.last_zxid, zxid)
            continue
        except asyncio.TimeoutError:
            if time.time() - last_heard <= sess.timeout_ms / 1000 * 2 / 3:
                sess.writer.write(struct.pack(">iii", 8, PING_XID, OP_PING))
                next_ping = time.time() + sess.timeout_ms / 3000
                continue
        except (OSError, asyncio.IncompleteReadError):
            pass
        sess.close()
        if not await reconnect(sess, log):
            return
        reset()


async def write_loop(sess, writes, writer_log, stop):
    """setData every 20 ms, one at a time: (due, latency or None for an error)."""
    xid, due = 0, time.time()
    while not stop.is_set():
        due += 0.02
        await asyncio.sleep(max(0.0, due - time.time()))
        xid += 1
        try:
            err = await sess.request(xid, OP_SET, jstr(WRITE_PATH) + struct.pack(">i", 8) + b"stormstm" +
                                     struct.pack(">i", -1))
            writes.append((due, time.time() - due if err == 0 else None))
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            writes.append((due, None))
            sess.close()
            if not await reconnect(sess, writer_log):
                return
            due = time.time()


def worker(ports, first, count, timeout_ms, writer_port, conn):
    """Opens `count` sessions (session i on ports[(first + i) % 3]) and, with `writer_port`, the
    writer's session; reports "ready", then keeps them, answering "status" with the sessions
    without a connection, until told to "stop", and sends back what happened."""
    async def main():
        stop = asyncio.Event()
        log, writes, tasks = [], [], []
        for i in range(count):
            s = Session(ports, first + i, timeout_ms)
            for _ in range(len(ports)):
                if await s.connect() is True:
                    break
            else:
                conn.send(("failed", i))
                return
            # Pinging from the start: opening thousands takes a while.
            tasks.append(asyncio.ensure_future(keep(s, log, stop)))
        if writer_port is not None:
            w = Session([writer_port] + [p for p in ports if p != writer_port], 0, timeout_ms)
            if await w.connect() is not True:
                conn.send(("failed", "writer"))
                return
            tasks.append(asyncio.ensure_future(write_loop(w, writes, [], stop)))
        conn.send(("ready", count))
        lags = []

        async def lag_monitor():
            # How late this worker's event loop runs a 50 ms timer (debug output): a client
            # too busy to read its sockets makes a server look slow.
            while not stop.is_set():
                t = time.time()
                await asyncio.sleep(0.05)
                lags.append((t, time.time() - t - 0.05))
        tasks.append(asyncio.ensure_future(lag_monitor()))
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, conn.recv) == "status":
            conn.send(DOWN[0])
        stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        conn.send(("done", log, writes, lags))
    asyncio.run(main())


class RustWorker:
    """A share of the sessions held by zk-client's storm_client example (STORM_CLIENT_BIN),
    spoken to as the Python workers are: "status" answers the sessions without a connection,
    "stop" the log."""

    def __init__(self, binary, ports, first, count, timeout_ms):
        self.proc = subprocess.Popen(
            [binary, ",".join(map(str, ports)), str(first), str(count), str(timeout_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.pid = self.proc.pid
        self.stopping = False

    def send(self, cmd):
        self.stopping = cmd == "stop"
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def recv(self):
        line = self.proc.stdout.readline()
        if not line:
            return ("failed", "storm_client ended")
        if line.startswith("ready "):
            return ("ready", int(line.split()[1]))
        if line.startswith("down "):
            return int(line.split()[1])
        r = json.loads(line)
        return ("done", [tuple(e) for e in r["log"]], [], [tuple(x) for x in r["lags"]])

    def join(self):
        self.proc.stdin.close()
        self.proc.wait()


def run(kind, work, zkrs, cp, sessions, timeout_ms):
    base = os.path.join(work, kind)
    ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
    lines = "".join(f"server.{i+1}=127.0.0.1:{q}:{e}\n" for i, (_, q, e) in enumerate(ports))
    procs = []
    for i in range(3):
        d = os.path.join(base, str(i + 1))
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        with open(os.path.join(d, "data", "myid"), "w") as f:
            f.write(f"{i+1}\n")
        with open(os.path.join(d, "zoo.cfg"), "w") as f:
            f.write(f"tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={d}/data\nclientPort={ports[i][0]}\n"
                    f"clientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\n"
                    f"maxClientCnxns=0\nmaxSessionTimeout=60000\n{lines}")
        log = open(os.path.join(d, "server.log"), "a")
        cmd = [zkrs, os.path.join(d, "zoo.cfg")] if kind == "zkrs" else \
            ["java", "-Xmx4g", "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain",
             os.path.join(d, "zoo.cfg")]
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, cwd=d,
                                      env=dict(os.environ, RUST_LOG="warn")))
    try:
        return storm(kind, ports, procs, sessions, timeout_ms)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def storm(kind, ports, procs, sessions, timeout_ms):
    client = [p[0] for p in ports]
    deadline = time.time() + 120
    while True:
        modes = [srvr_mode(p) for p in client]
        if modes.count("leader") == 1 and modes.count("follower") == 2:
            break
        if time.time() > deadline:
            raise SystemExit(f"{kind}: no leader: {modes}")
        time.sleep(0.1)
    leader = modes.index("leader")
    survivor = client[(leader + 1) % 3]
    # The writer's znode.
    asyncio.run(create_write_path(survivor))
    print(f"{kind}: opening {sessions} sessions over 3 servers", file=sys.stderr)
    t0 = time.time()
    workers = []
    # The writer has a worker of its own, so that its latency is not the client's.
    shares = [(first, min(PER_WORKER, sessions - first), None) for first in range(0, sessions, PER_WORKER)]
    rust = os.environ.get("STORM_CLIENT_BIN")
    for first, count, writer in shares + [(0, 0, survivor)]:
        if rust and writer is None:
            w = RustWorker(rust, client, first, count, timeout_ms)
            workers.append((w, w))
            continue
        a, b = mp.Pipe()
        p = mp.Process(target=worker, args=(client, first, count, timeout_ms, writer, b))
        p.start()
        workers.append((p, a))
    for p, a in workers:
        msg = a.recv()
        if msg[0] != "ready":
            raise SystemExit(f"{kind}: a worker failed to open its sessions: {msg}")
    opened = time.time() - t0
    print(f"{kind}: {sessions} sessions open in {opened:.1f} s; killing the leader, server {leader + 1}",
          file=sys.stderr)
    time.sleep(3)
    cpu_at_kill = {p.pid: cpu_seconds(p.pid) for p in procs if p is not procs[leader]}
    cpu_at_kill.update({p.pid: cpu_seconds(p.pid) for p, _ in workers})
    kill = time.time()
    procs[leader].kill()
    procs[leader].wait()
    elected = None
    others = [c for i, c in enumerate(client) if i != leader]
    while time.time() - kill < 60:
        if any(srvr_mode(p) == "leader" for p in others):
            elected = time.time()
            break
        time.sleep(0.02)
    # Until every session has its connection again (or 120 s): the clients say how many are
    # down; a first second lets every lost connection be noticed.
    time.sleep(1)
    settled = None
    while time.time() - kill < 120:
        down = 0
        for _, a in workers:
            a.send("status")
            down += a.recv()
        if down == 0:
            settled = time.time()
            break
        time.sleep(0.2)
    cpu_used = {pid: cpu_seconds(pid) - t for pid, t in cpu_at_kill.items()}
    time.sleep(2)
    log, writes, lags = [], [], []
    for p, a in workers:
        a.send("stop")
    for p, a in workers:
        msg = a.recv()
        log += msg[1]
        writes += msg[2]
        lags.append(msg[3])
        p.join()
    losses = sorted(round(e[1] - kill, 1) for e in log)

    def pct(xs, q):
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")
    if os.environ.get("STORM_DEBUG"):
        hist = {}
        for t in losses:
            hist[int(t * 2) / 2] = hist.get(int(t * 2) / 2, 0) + 1
        print(f"{kind}: connections lost, per half second after the kill: {sorted(hist.items())}",
              file=sys.stderr)
        backs = {}
        for what, _, t1, *_ in log:
            if what == "back":
                k = int((t1 - kill) * 4) / 4
                backs[k] = backs.get(k, 0) + 1
        print(f"{kind}: sessions back, per quarter second after the kill (elected at "
              f"{(elected or kill) - kill:.2f} s): {sorted(backs.items())}", file=sys.stderr)
        tries = {}
        for e in log:
            tries[e[3]] = tries.get(e[3], 0) + 1
        print(f"{kind}: connection attempts per reconnection: {sorted(tries.items())}", file=sys.stderr)

        def spread(xs):
            xs = sorted(xs)
            return "n/a" if not xs else "p50 %.0f / p90 %.0f / p99 %.0f / max %.0f ms" % (
                pct(xs, 0.5), pct(xs, 0.9), pct(xs, 0.99), xs[-1] * 1000)
        backs_ = [e for e in log if e[0] == "back"]
        print(f"{kind}: last attempt started after the election: "
              f"{spread([max(0.0, e[4] - (elected or kill)) for e in backs_])}", file=sys.stderr)
        print(f"{kind}: TCP connect of the last attempt: {spread([e[5] - e[4] for e in backs_])}",
              file=sys.stderr)
        print(f"{kind}: handshake (connected to session back): {spread([e[2] - e[5] for e in backs_])}",
              file=sys.stderr)
        span = (settled or time.time()) - kill
        servers_cpu = sum(cpu_used[p.pid] for p in procs if p.pid in cpu_used and p is not procs[leader])
        clients_cpu = sum(cpu_used[p.pid] for p, _ in workers)
        print(f"{kind}: CPU from the kill until every session was back ({span:.1f} s): servers "
              f"{servers_cpu:.1f} s, client workers {clients_cpu:.1f} s", file=sys.stderr)
        for i, w in enumerate(lags):
            during = [lag for t, lag in w if kill <= t <= (settled or kill + 10)]
            print(f"{kind}: worker {i} event loop lag during the storm: {spread(during)}", file=sys.stderr)
    if settled is None:
        print(f"{kind}: sessions still without a connection 120 s after the kill", file=sys.stderr)
    back = [t1 - t0_ for what, t0_, t1, *_ in log if what == "back"]
    expired = sum(1 for e in log if e[0] == "expired")
    gave_up = sum(1 for e in log if e[0] == "gave up")
    last_back = max((e[2] for e in log if e[0] == "back"), default=kill)
    after = [(due, lat) for due, lat in writes if due >= kill]
    lats = sorted(lat for _, lat in after if lat is not None)
    errors = sum(1 for _, lat in after if lat is None)
    return {
        "kind": kind, "sessions": sessions, "open_s": opened,
        "elected_ms": (elected - kill) * 1000 if elected else float("nan"),
        "reconnected": len(back), "expired": expired, "gave_up": gave_up,
        # Sessions whose connection never dropped (a zkrs follower keeps its idle clients).
        "kept": sessions - len(log),
        "all_back_after_election_ms": (last_back - elected) * 1000 if elected and back else float("nan"),
        "gap_p50_ms": statistics.median(back) * 1000 if back else float("nan"),
        "gap_p99_ms": pct(sorted(back), 0.99), "gap_max_ms": max(back) * 1000 if back else float("nan"),
        "writes": len(after), "write_errors": errors, "write_p99_ms": pct(lats, 0.99),
        "write_max_ms": lats[-1] * 1000 if lats else float("nan"),
    }


async def create_write_path(port):
    s = Session([port], 0, 30000)
    if await s.connect() is not True:
        raise SystemExit("cannot connect to create the writer's znode")
    acl = struct.pack(">i", 1) + struct.pack(">i", 31) + jstr("world") + jstr("anyone")
    await s.request(1, 1, jstr(WRITE_PATH) + struct.pack(">i", 0) + acl + struct.pack(">i", 0))
    s.close()


def main():
    work, zkrs, cp = sys.argv[1], sys.argv[2], sys.argv[3]
    sessions, timeout_ms, kinds = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6].split()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = [run(k, work, zkrs, cp, sessions, timeout_ms) for k in kinds]
    print(f"Reconnect storm: {sessions} sessions ({timeout_ms} ms timeout) over a 3-server ensemble, "
          "kill -9 of the leader; sessions come back as the Java client does (random pause up to 1 s, "
          "next server). A writer on a survivor sets a znode every 20 ms.\n")
    print("| server | leader elected ms | sessions kept connected | sessions reconnected | expired | gave up | last back after the "
          "election ms | time without a connection p50 / p99 / max ms | writes after the kill | "
          "write errors | write p99 / max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['kind']} | {r['elected_ms']:.0f} | {r['kept']} | {r['reconnected']} | {r['expired']} | {r['gave_up']} | "
              f"{r['all_back_after_election_ms']:.0f} | {r['gap_p50_ms']:.0f} / {r['gap_p99_ms']:.0f} / "
              f"{r['gap_max_ms']:.0f} | {r['writes']} | {r['write_errors']} | "
              f"{r['write_p99_ms']:.0f} / {r['write_max_ms']:.0f} |")


if __name__ == "__main__":
    main()
