#!/usr/bin/python3
"""kazoo's part of capture.py: one session exercising most of the client API through the proxy.

Run by capture.py with Debian's /usr/bin/python3 (which has kazoo) and the proxy's port as the only
argument. To force a reconnect it prints DROP and waits for a line on stdin: capture.py then cuts
the connection, and kazoo reconnects with its session id and re-registers its watches (setWatches).
"""

import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError, NotEmptyError
from kazoo.security import make_digest_acl


def main():
    port = int(sys.argv[1])
    zk = KazooClient(hosts="127.0.0.1:%d" % port, timeout=4.0)
    zk.start(timeout=15)

    zk.create("/k", b"kazoo")
    zk.create("/k/eph", b"e", ephemeral=True)
    zk.create("/k/seq-", b"s", sequence=True)
    zk.create("/k/eseq-", b"", ephemeral=True, sequence=True)
    zk.create("/k/c2", b"two", include_data=True)  # create2
    zk.get("/k")
    zk.set("/k", b"kazoo2")
    zk.exists("/k")
    zk.exists("/k/none")
    zk.get_children("/k")
    zk.get_children("/k", include_data=True)  # getChildren2
    zk.get_acls("/k")
    zk.add_auth("digest", "carol:pw")
    zk.set_acls("/k/c2", [make_digest_acl("carol", "pw", all=True)])
    zk.get_acls("/k/c2")
    zk.sync("/k")

    # Error replies.
    for call, exc in [
        (lambda: zk.get("/k/none"), NoNodeError),
        (lambda: zk.create("/k", b""), NodeExistsError),
        (lambda: zk.delete("/k"), NotEmptyError),
        (lambda: zk.set("/k", b"x", version=99), BadVersionError),
    ]:
        try:
            call()
        except exc:
            pass

    # multi: one that commits, one that fails on its second op.
    t = zk.transaction()
    t.create("/k/t1", b"t")
    t.set_data("/k", b"kazoo3")
    t.check("/k/t1", 0)
    t.delete("/k/seq-0000000001")
    t.commit()
    t = zk.transaction()
    t.create("/k/t2", b"t")
    t.check("/k/t1", 5)
    t.delete("/k/t1")
    t.commit()

    # A watch notification: data watch on /k/w, then change it.
    fired = threading.Event()
    zk.create("/k/w", b"w")
    zk.get("/k/w", watch=lambda e: fired.set())
    zk.set("/k/w", b"w2")
    fired.wait(5)

    # Watches to re-register after reconnect: data, exist and child.
    zk.get("/k/w", watch=lambda e: None)
    zk.exists("/k/later", watch=lambda e: None)
    zk.get_children("/k", watch=lambda e: None)
    print("DROP", flush=True)
    sys.stdin.readline()
    deadline = time.time() + 15
    while time.time() < deadline:
        time.sleep(0.2)
        if zk.connected:
            try:
                zk.exists("/k")
                break
            except Exception:
                continue
    # Stay idle long enough for a ping.
    time.sleep(3)
    zk.delete("/k/w")
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
