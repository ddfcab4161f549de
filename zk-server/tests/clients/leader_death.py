"""What the kazoo scripts that live through a leader's death share: the handshake with the test
that kills the leader, and a data watch waiting for a value."""
import os
import threading
import time


def await_kill(session, kill_marker, killed_marker):
    """Tells the test this client (its session id, in hex) is ready for the kill, waits until the
    test reports the leader dead, and returns what the test wrote in its marker ("leader" or
    "follower": where this client's session was)."""
    with open(kill_marker + ".tmp", "w") as f:
        f.write(f"{session:x}")
    os.rename(kill_marker + ".tmp", kill_marker)
    deadline = time.time() + 30
    while True:
        # The test writes the marker in one call, not atomically: wait for its words too.
        if os.path.exists(killed_marker):
            with open(killed_marker) as f:
                said = f.read()
            if said:
                return said
        assert time.time() < deadline, "the test did not kill the leader"
        time.sleep(0.05)


def watch_for(zk, path, value):
    """A data watch on `path`: returns an event set once the node holds `value`, and the list of
    every value the watch saw."""
    seen = threading.Event()
    changes = []

    @zk.DataWatch(path)
    def on_change(data, stat):
        changes.append(data)
        if data == value:
            seen.set()

    return seen, changes
