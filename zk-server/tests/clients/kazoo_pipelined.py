"""A kazoo client pipelining sequential creates under /pipe, 32 at a time, while the test moves
the leadership (argv: connect string, tried in its order; ready marker; stop marker). It
creates the ready marker once 200 creates are answered, and stops at the stop marker. Prints one
JSON line: creates acknowledged, the errors seen by exception name, the connection states kazoo
reported, /pipe's children, and the first state changes and errors with their times."""
import json
import os
import sys
import time

from kazoo.client import KazooClient

hosts, ready, stop = sys.argv[1:4]
states = []
zk = KazooClient(hosts=hosts, timeout=10, randomize_hosts=False)
zk.add_listener(lambda s: states.append(str(s)))
events = []
zk.add_listener(lambda s: events.append("%.3f %s" % (time.time(), s)))
zk.start(timeout=30)
zk.ensure_path("/pipe")
acked, errors = 0, {}
deadline = time.time() + 300
while not os.path.exists(stop) and time.time() < deadline:
    futures = [zk.create_async("/pipe/n-", b"x", sequence=True) for _ in range(32)]
    for f in futures:
        try:
            f.get(timeout=20)
            acked += 1
        except Exception as e:  # every failure is counted and reported
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
            if len(events) < 40:
                events.append("%.3f error %s" % (time.time(), type(e).__name__))
    if acked >= 200 and not os.path.exists(ready):
        open(ready, "w").close()
children = len(zk.get_children("/pipe"))
seen = list(states)
zk.stop()
print(json.dumps({"acked": acked, "errors": errors, "states": seen, "children": children, "events": events[:40]}))
