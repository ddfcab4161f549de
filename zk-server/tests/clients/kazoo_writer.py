"""A kazoo client writing sequential znodes under /mig-kazoo while servers are replaced under it
(argv: connect string, then four marker paths: the file it appends each acknowledged name to,
stop, pause, and paused, which it creates while it honours a pause). A write whose connection is
lost has an unknown outcome and is not recorded; kazoo reconnects by itself. Prints "ok" at the
end; exits non-zero on any other error."""
import os
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

hosts, acked_path, stop, pause, paused = sys.argv[1:6]
zk = KazooClient(hosts=hosts, timeout=10, connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5})
zk.start(timeout=30)
zk.ensure_path("/mig-kazoo")
deadline = time.time() + 600
with open(acked_path, "a") as acked:
    while not os.path.exists(stop) and time.time() < deadline:
        if os.path.exists(pause):
            open(paused, "w").close()
            time.sleep(0.02)
            continue
        if os.path.exists(paused):
            os.remove(paused)
        try:
            name = zk.create("/mig-kazoo/w-", b"k", sequence=True)
            acked.write(name + "\n")
            acked.flush()
        except (ConnectionLoss, OperationTimeoutError, SessionExpiredError):
            time.sleep(0.05)
        time.sleep(0.005)
zk.stop()
print("ok")
