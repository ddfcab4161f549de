#!/usr/bin/python3
"""Kazoo scenario for the real-client tests (zk-server/tests/real_clients.rs).

Usage: kazoo_scenario.py HOST:PORT

Runs one fixed scenario with kazoo (Debian's python3-kazoo, unchanged) and prints a deterministic
transcript on stdout: one line per observation, no timestamps or session ids. The Rust test runs it
against Apache ZooKeeper and zkrs-server and compares the transcripts. Every wait has a timeout so
a wrong server yields a "TIMEOUT ..." line rather than a hang; the exit status is 0 only when the
scenario ran to its end.
"""

import queue
import socket
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState

HOSTS = sys.argv[1]
# Long enough for a slow JVM under a parallel cargo build, short enough that a broken server fails fast.
WAIT_S = 10.0


def out(*parts):
    print(" ".join(str(p) for p in parts), flush=True)


def err_name(fn):
    """Runs fn and names the kazoo exception it raised, or "ok"."""
    try:
        fn()
        return "ok"
    except KazooException as e:
        return type(e).__name__


def stat_line(stat):
    # Times and session ids differ between runs; everything else is determined by the scenario.
    return (f"czxid={stat.czxid:#x} mzxid={stat.mzxid:#x} pzxid={stat.pzxid:#x} version={stat.version} "
            f"cversion={stat.cversion} aversion={stat.aversion} dataLength={stat.dataLength} "
            f"numChildren={stat.numChildren}")


def event_line(ev):
    return f"event type={ev.type} state={ev.state} path={ev.path}"


def take(q, what):
    """Waits for the next item a callback queued; a missing one is reported, not waited on forever."""
    try:
        return q.get(timeout=WAIT_S)
    except queue.Empty:
        out("TIMEOUT waiting for", what)
        sys.exit(2)


def new_client():
    c = KazooClient(hosts=HOSTS, timeout=10.0)
    c.start(timeout=WAIT_S)
    return c


def basics(c1):
    out("== create")
    out("makepath", c1.create("/k/a/b", b"x", makepath=True))
    out("seq", c1.create("/k/seq-", b"", sequence=True))
    out("seq", c1.create("/k/seq-", b"", sequence=True))
    out("eph", c1.create("/k/eph", b"e", ephemeral=True))
    out("ephseq", c1.create("/k/eseq-", b"", ephemeral=True, sequence=True))
    stat = c1.exists("/k/eph")
    out("eph owner is session", stat.ephemeralOwner == c1.client_id[0], "dataLength", stat.dataLength)
    out("exists missing", c1.exists("/k/missing"))
    out("create existing", err_name(lambda: c1.create("/k/a/b", b"")))
    out("create no parent", err_name(lambda: c1.create("/k/none/x", b"")))
    out("create under ephemeral", err_name(lambda: c1.create("/k/eph/x", b"")))

    out("== get/set")
    data, stat = c1.get("/k/a/b")
    out("get", data, stat_line(stat))
    stat = c1.set("/k/a/b", b"y", version=0)
    out("set v0", stat_line(stat))
    out("set stale", err_name(lambda: c1.set("/k/a/b", b"z", version=0)))
    stat = c1.set("/k/a/b", b"yy")
    out("set any", stat_line(stat))
    out("delete stale", err_name(lambda: c1.delete("/k/a/b", version=0)))
    out("delete missing", err_name(lambda: c1.delete("/k/missing")))
    out("delete non-empty", err_name(lambda: c1.delete("/k/a")))
    out("get missing", err_name(lambda: c1.get("/k/missing")))
    out("children", sorted(c1.get_children("/k")))
    children, stat = c1.get_children("/k", include_data=True)
    out("children stat", sorted(children), stat_line(stat))
    data, stat = c1.get("/")
    out("root", data, "numChildren", stat.numChildren)


def watches(c1):
    out("== get_children watch")
    q = queue.Queue()
    c1.ensure_path("/k/w")
    out("children", c1.get_children("/k/w", watch=q.put))
    c1.create("/k/w/c1", b"")
    out(event_line(take(q, "child watch")))
    # One-shot: a second change does not fire again.
    c1.create("/k/w/c2", b"")
    data, _ = c1.get("/k/w/c2", watch=q.put)
    c1.set("/k/w/c2", b"new")
    out(event_line(take(q, "data watch")))
    out("queue empty after one-shot", q.empty())
    c1.exists("/k/w/c3", watch=q.put)
    c1.create("/k/w/c3", b"")
    out(event_line(take(q, "exists watch")))
    c1.get("/k/w/c3", watch=q.put)
    c1.delete("/k/w/c3")
    out(event_line(take(q, "delete watch")))

    out("== DataWatch")
    dq = queue.Queue()

    @c1.DataWatch("/k/dw")
    def on_data(data, stat, event=None):
        dq.put((data, stat.version if stat else None, event.type if event else None))

    out("dw", take(dq, "DataWatch initial"))
    c1.create("/k/dw", b"one")
    out("dw", take(dq, "DataWatch create"))
    c1.set("/k/dw", b"two")
    out("dw", take(dq, "DataWatch set"))
    c1.delete("/k/dw")
    out("dw", take(dq, "DataWatch delete"))

    out("== ChildrenWatch")
    cq = queue.Queue()
    c1.ensure_path("/k/cw")

    @c1.ChildrenWatch("/k/cw")
    def on_children(children):
        cq.put(sorted(children))

    out("cw", take(cq, "ChildrenWatch initial"))
    c1.create("/k/cw/x", b"")
    out("cw", take(cq, "ChildrenWatch create x"))
    c1.create("/k/cw/y", b"")
    out("cw", take(cq, "ChildrenWatch create y"))
    c1.delete("/k/cw/x")
    out("cw", take(cq, "ChildrenWatch delete x"))


def transactions(c1):
    out("== transaction")
    t = c1.transaction()
    t.create("/k/t1", b"1")
    t.check("/k/a/b", 2)
    t.set_data("/k/a/b", b"txn")
    t.delete("/k/seq-0000000001")
    res = t.commit()
    out("commit", [r if isinstance(r, (str, bool)) else type(r).__name__ for r in res])
    out("after", c1.get("/k/a/b")[0], c1.exists("/k/seq-0000000001"), c1.exists("/k/t1") is not None)
    t = c1.transaction()
    t.create("/k/t2", b"2")
    t.check("/k/a/b", 99)
    t.delete("/k/t1")
    res = t.commit()
    out("failed commit", [r if isinstance(r, (str, bool)) else type(r).__name__ for r in res])
    out("rolled back", c1.exists("/k/t2"), c1.exists("/k/t1") is not None)


def lock(c1, c2):
    out("== Lock")
    l1 = c1.Lock("/k/lock", "one")
    l2 = c2.Lock("/k/lock", "two")
    out("one acquired", l1.acquire(timeout=WAIT_S))
    got = threading.Event()

    def second():
        if l2.acquire(timeout=WAIT_S):
            got.set()

    th = threading.Thread(target=second)
    th.start()
    # Wait until the second contender has queued its node, then make sure it really waits.
    deadline = time.time() + WAIT_S
    while len(l1.contenders()) < 2 and time.time() < deadline:
        time.sleep(0.02)
    out("contenders", l1.contenders())
    time.sleep(0.3)
    out("two waiting", not got.is_set())
    l1.release()
    out("two acquired after release", got.wait(WAIT_S))
    th.join()
    out("contenders", l2.contenders())
    l2.release()
    out("lock children", c1.get_children("/k/lock"))


def election(c1, c2):
    out("== Election")
    e1 = c1.Election("/k/elect", "c1")
    e2 = c2.Election("/k/elect", "c2")
    led = queue.Queue()
    stop1 = threading.Event()

    def lead1():
        led.put("c1 leads")
        stop1.wait(WAIT_S)

    def lead2():
        led.put("c2 leads")

    t1 = threading.Thread(target=e1.run, args=(lead1,))
    t1.start()
    out(take(led, "c1 leadership"))
    t2 = threading.Thread(target=e2.run, args=(lead2,))
    t2.start()
    deadline = time.time() + WAIT_S
    while len(e1.contenders()) < 2 and time.time() < deadline:
        time.sleep(0.02)
    out("contenders", e1.contenders())
    out("c2 not yet leading", led.empty())
    stop1.set()
    t1.join()
    out(take(led, "c2 leadership"))
    t2.join()
    out("elect children", c1.get_children("/k/elect"))


def counter(c1, c2):
    out("== Counter")
    n1 = c1.Counter("/k/cnt")
    n1 += 5
    n1 -= 2
    out("c1 value", n1.value)
    n2 = c2.Counter("/k/cnt")
    n2 += 10
    out("c2 value", n2.value, "c1 sees", n1.value)


def reconnect(c1, c2):
    out("== reconnect")
    states = queue.Queue()
    c2.add_listener(states.put)
    sid = c2.client_id[0]
    c2.create("/k/e2", b"", ephemeral=True)
    c2.create("/k/rw", b"0")
    c2.create("/k/rwc", b"")
    dq = queue.Queue()
    cq = queue.Queue()
    raw = queue.Queue()

    @c2.DataWatch("/k/rw")
    def on_data(data, stat, event=None):
        dq.put((data, stat.version if stat else None, event.type if event else None))

    @c2.ChildrenWatch("/k/rwc")
    def on_children(children):
        cq.put(sorted(children))

    out("dw", take(dq, "DataWatch initial"))
    out("cw", take(cq, "ChildrenWatch initial"))
    c2.get("/k/rw", watch=raw.put)
    # Drop the TCP connection under kazoo's feet. Kazoo reconnects with the same session; it does
    # not replay plain watches (it fires them with a NONE event instead), while its DataWatch and
    # ChildrenWatch recipes re-read and re-arm on reconnect.
    c2._connection._socket.shutdown(socket.SHUT_RDWR)
    out("state", take(states, "SUSPENDED"))
    out("state", take(states, "CONNECTED again"))
    out("raw watch", event_line(take(raw, "NONE event for the dropped watch")))
    out("same session", c2.client_id[0] == sid)
    out("ephemeral survived", c1.exists("/k/e2") is not None)
    # The recipes re-arm from a spawned task; wait until the server acknowledged both watches.
    deadline = time.time() + WAIT_S
    while time.time() < deadline and not ("/k/rw" in c2._data_watchers and "/k/rwc" in c2._child_watchers):
        time.sleep(0.02)
    c1.set("/k/rw", b"1")
    # The new value arrives either as the re-armed watch's CHANGED event or, when the recipe's
    # re-read after the reconnect runs after the set, from that re-read (event None): kazoo's
    # DataWatch spawns the re-read and offers no way to wait for it. Both are right.
    data, version, _event = take(dq, "DataWatch after reconnect")
    out("dw", (data, version))
    c1.create("/k/rwc/kid", b"")
    out("cw", take(cq, "ChildrenWatch after reconnect"))
    c2.remove_listener(states.put)


def session_close(c1, c2):
    out("== session close")
    q = queue.Queue()
    c1.exists("/k/e2", watch=q.put)
    c2.stop()
    c2.close()
    out(event_line(take(q, "ephemeral deletion")))
    out("e2 after close", c1.exists("/k/e2"))
    out("children", sorted(c1.get_children("/k")))


def main():
    c1 = new_client()
    out("connected", c1.state)
    basics(c1)
    watches(c1)
    transactions(c1)
    c2 = new_client()
    lock(c1, c2)
    election(c1, c2)
    counter(c1, c2)
    reconnect(c1, c2)
    session_close(c1, c2)
    c1.delete("/k", recursive=True)
    out("cleaned", c1.exists("/k"))
    c1.stop()
    c1.close()
    out("== done")


if __name__ == "__main__":
    main()
