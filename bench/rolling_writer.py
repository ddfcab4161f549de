"""One kazoo client of bench/rolling-restart.sh: pipelines sequential creates (WINDOW in flight,
then waits for them all; at most RATE a second) until the stop marker appears, and writes a JSON report: creates
acknowledged, failures by exception name, connection states (SUSPENDED is a disconnection,
LOST an expired session), the longest wait for one batch (ms), and /roll's children at the end
(argv: connect string, client index, stop marker, report path)."""
import json
import os
import sys
import time

from kazoo.client import KazooClient

hosts, idx, stop, report = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
WINDOW = int(os.environ.get("WINDOW", "32"))
# Creates per second at most (0: as fast as the server answers), paced per batch.
RATE = float(os.environ.get("RATE", "500"))
states = []
zk = KazooClient(hosts=hosts, timeout=10, connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5})
zk.add_listener(lambda s: states.append([round(time.time(), 3), str(s)]))
zk.start(timeout=60)
zk.ensure_path("/roll")
acked, errors, worst = 0, {}, 0.0
first_error = None
while not os.path.exists(stop):
    t0 = time.time()
    futures = [zk.create_async(f"/roll/c{idx}-", b"x", sequence=True) for _ in range(WINDOW)]
    for f in futures:
        try:
            f.get(timeout=30)
            acked += 1
        except Exception as e:  # every failure is counted and reported
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
            first_error = first_error or [round(time.time(), 3), type(e).__name__]
    took = time.time() - t0
    worst = max(worst, took * 1000)
    if RATE > 0 and took < WINDOW / RATE:
        time.sleep(WINDOW / RATE - took)
mine = 0
for _ in range(100):
    try:
        mine = sum(1 for c in zk.get_children("/roll") if c.startswith(f"c{idx}-"))
        break
    except Exception:
        time.sleep(0.2)
seen = list(states)
zk.stop()
with open(report, "w") as f:
    json.dump({"acked": acked, "errors": errors, "states": seen, "worst_batch_ms": round(worst),
               "children": mine, "first_error": first_error}, f)
