#!/usr/bin/env python3
"""Raw-wire helpers for bench/scale.sh's watch and children axes. Standard library only; the same
requests against zkrs-server and Apache ZooKeeper.

  tree_client.py watches PORT SESSIONS PATHS PREFIX [KIND]
      Opens SESSIONS sessions and prints "open SECONDS"; then, after a line on its standard input,
      each session sets a watch on PREFIX0 .. PREFIX<PATHS-1> (the paths need not exist: an
      exists watch on a missing path is kept as well), pipelined 1,000 at a time: an exists watch,
      or with KIND "recursive" a persistent recursive one (addWatch), and it prints
      "ready SECONDS WATCHES" (the time the watches took). It holds every session and watch,
      pinging every 5 s, until its standard input closes, then prints "events N": the
      notifications that writes fired meanwhile. The two steps let a caller measure the server's
      memory with the sessions alone and with their watches.
  tree_client.py children PORT PATH
      One getChildren of PATH (no watch); prints "children COUNT REPLY_BYTES SECONDS".
  tree_client.py populate PORT COUNT SIZE
      Creates /rnd and COUNT znodes /rnd/n<i> under it, each with SIZE random bytes (os.urandom:
      content that does not compress, where zkrs-bench's values are all "x"), pipelined 1,000 at
      a time; prints "populate COUNT SECONDS". For bench/snapshot-compression.sh's VALUES=random.
"""

import select
import socket
import struct
import sys
import time

OP_EXISTS = 3
OP_ADD_WATCH = 106
PERSISTENT_RECURSIVE = 1
OP_GET_CHILDREN = 8
OP_CREATE = 1
OP_PING = 11
NOTIFICATION_XID = -1
PING_XID = -2
BATCH = 1000


def read_exact(s, k):
    chunks = []
    while k:
        c = s.recv(min(k, 1 << 20))
        if not c:
            raise SystemExit("the server closed a session")
        chunks.append(c)
        k -= len(c)
    return b"".join(chunks)


def frame(s):
    (length,) = struct.unpack(">i", read_exact(s, 4))
    return read_exact(s, length)


def send(s, payload):
    s.sendall(struct.pack(">i", len(payload)) + payload)


def zk_string(text):
    b = text.encode()
    return struct.pack(">i", len(b)) + b


def connect(port, timeout_ms=30000):
    # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
    s = socket.create_connection(("127.0.0.1", port))
    send(s, struct.pack(">iqiqi16s?", 0, 0, timeout_ms, 0, 16, b"\0" * 16, False))
    frame(s)
    return s


def ping(s):
    send(s, struct.pack(">ii", PING_XID, OP_PING))


class Session:
    """One session, with the notifications it has seen counted."""

    def __init__(self, port):
        self.sock = connect(port)
        self.xid = 0
        self.events = 0
        # poll, not select: thousands of sessions have descriptors past select's 1,024.
        self.poller = select.poll()
        self.poller.register(self.sock, select.POLLIN)

    def request(self, op, body):
        self.xid += 1
        send(self.sock, struct.pack(">ii", self.xid, op) + body)

    def reply(self):
        """The next reply's (xid, err, body), counting notifications and skipping pings."""
        while True:
            f = frame(self.sock)
            xid, _zxid, err = struct.unpack(">iqi", f[:16])
            if xid == NOTIFICATION_XID:
                self.events += 1
            elif xid != PING_XID:
                return xid, err, f[16:]

    def drain(self):
        """Reads whatever has arrived (notifications, ping replies) without blocking."""
        while self.poller.poll(0):
            f = frame(self.sock)
            if struct.unpack(">i", f[:4])[0] == NOTIFICATION_XID:
                self.events += 1


def keep_alive(open_, last_ping):
    """Pings every session when 5 s have passed since `last_ping`; returns the new time."""
    if time.monotonic() - last_ping < 5:
        return last_ping
    for o in open_:
        ping(o.sock)
        o.drain()
    return time.monotonic()


def watches(port, sessions, paths, prefix, kind="exists"):
    started = time.monotonic()
    last_ping = started
    open_ = []
    for _ in range(sessions):
        open_.append(Session(port))
        last_ping = keep_alive(open_, last_ping)
    print(f"open {time.monotonic() - started:.3f}", flush=True)
    while not select.select([sys.stdin], [], [], 1.0)[0]:
        last_ping = keep_alive(open_, last_ping)
    sys.stdin.readline()
    started = time.monotonic()
    for sess in open_:
        for first in range(0, paths, BATCH):
            n = min(BATCH, paths - first)
            for i in range(first, first + n):
                if kind == "recursive":
                    sess.request(OP_ADD_WATCH, zk_string(f"{prefix}{i}") + struct.pack(">i", PERSISTENT_RECURSIVE))
                else:
                    sess.request(OP_EXISTS, zk_string(f"{prefix}{i}") + b"\x01")
            for _ in range(n):
                _, err, _ = sess.reply()
                if err not in (0, -101):  # OK, or NONODE: the watch is set either way
                    raise SystemExit(f"exists answered error {err}")
        last_ping = keep_alive(open_, last_ping)
    print(f"ready {time.monotonic() - started:.3f} {sessions * paths}", flush=True)
    while not select.select([sys.stdin], [], [], 1.0)[0]:
        last_ping = keep_alive(open_, last_ping)
    for o in open_:
        o.drain()
    print(f"events {sum(o.events for o in open_)}", flush=True)


def children(port, path):
    sess = Session(port)
    t0 = time.monotonic()
    sess.request(OP_GET_CHILDREN, zk_string(path) + b"\x00")
    _, err, body = sess.reply()
    took = time.monotonic() - t0
    if err != 0:
        raise SystemExit(f"getChildren answered error {err}")
    (count,) = struct.unpack(">i", body[:4])
    print(f"children {count} {len(body) + 16} {took:.3f}", flush=True)


def populate(port, count, size):
    import os

    sess = Session(port)
    # ACL list: one entry, world:anyone with every permission.
    acl = struct.pack(">ii", 1, 31) + zk_string("world") + zk_string("anyone")

    def create(path, data):
        body = zk_string(path) + struct.pack(">i", len(data)) + data + acl + struct.pack(">i", 0)
        sess.request(OP_CREATE, body)

    t0 = time.monotonic()
    create("/rnd", b"")
    if sess.reply()[1] != 0:
        raise SystemExit("cannot create /rnd")
    for start in range(0, count, BATCH):
        n = min(BATCH, count - start)
        values = os.urandom(n * size)
        for k in range(n):
            create(f"/rnd/n{start + k}", values[k * size:(k + 1) * size])
        for _ in range(n):
            _, err, _ = sess.reply()
            if err != 0:
                raise SystemExit(f"create answered error {err}")
    print(f"populate {count} {time.monotonic() - t0:.1f}", flush=True)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "watches" and len(sys.argv) in (6, 7):
        kind = sys.argv[6] if len(sys.argv) == 7 else "exists"
        if kind not in ("exists", "recursive"):
            raise SystemExit(__doc__)
        watches(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], kind)
    elif len(sys.argv) >= 2 and sys.argv[1] == "children" and len(sys.argv) == 4:
        children(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) >= 2 and sys.argv[1] == "populate" and len(sys.argv) == 5:
        populate(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
