#!/usr/bin/env python3
"""Opens N idle ZooKeeper sessions with a lean raw-wire client, for memory measurements.

Usage: idle_client.py PORT N

One socket a session, opened one after another: the handshake (a 30 s session), the sessions
already open pinged every 5 s while the rest open, then a ping on each, and another 1 s later, as
an idle client pings every third of its timeout. Then prints
"ready SECONDS" (SECONDS: the time the N handshakes took, from the first connect to the last
answer) and keeps the sessions open, pinging every 10 s, until its standard input closes.
Standard library only; works against zkrs-server and Apache ZooKeeper alike.
"""

import select
import socket
import struct
import sys
import time

from tree_client import frame  # the same framing as the scale bench's other raw-wire client


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    # ConnectRequest: protocolVersion, lastZxidSeen, timeOut (30 s), sessionId, passwd, readOnly.
    hello = struct.pack(">iqiqi16s?", 0, 0, 30000, 0, 16, b"\0" * 16, False)
    ping = struct.pack(">iii", 8, -2, 11)
    socks = []

    def ping_all():
        for s in socks:
            s.sendall(ping)
        for s in socks:
            frame(s)

    started = time.monotonic()
    last = started
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(struct.pack(">i", len(hello)) + hello)
        frame(s)
        socks.append(s)
        # Opening many takes longer than a session's timeout: the open ones ping meanwhile.
        if time.monotonic() - last >= 5:
            ping_all()
            last = time.monotonic()
    took = time.monotonic() - started

    ping_all()
    time.sleep(1)
    ping_all()
    print(f"ready {took:.3f}", flush=True)
    last = time.monotonic()
    while not select.select([sys.stdin], [], [], 1.0)[0]:
        if time.monotonic() - last >= 10:
            ping_all()
            last = time.monotonic()


if __name__ == "__main__":
    main()
