"""kazoo against a three-server ensemble whose leader is killed mid-way (argv: connect string,
then the marker file it writes its session id into when it is ready for the kill, then the one the
test writes "leader" or "follower" into, whether the session was on the leader, once it is dead).

The client keeps one session across the leader's death: its lock, its election candidacy, its
ephemeral and its watch all carry on after it reconnects to a survivor. Prints one line per check;
exits non-zero on the first failure."""
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from leader_death import await_kill, watch_for

hosts, kill_marker, killed_marker = sys.argv[1], sys.argv[2], sys.argv[3]
zk = KazooClient(hosts=hosts, timeout=15)
states = []
zk.add_listener(lambda s: states.append(s))
zk.start(timeout=15)
session = zk.client_id[0]

zk.ensure_path("/app")
lock = zk.Lock("/app/lock", "me")
assert lock.acquire(timeout=10), "lock"
zk.create("/app/member", b"alive", ephemeral=True)
seen, changes = watch_for(zk, "/app/config", b"after")
zk.create("/app/config", b"before")
election = zk.Election("/app/election", "me")
leading = threading.Event()
done = threading.Event()


def lead():
    # Leadership lasts while this runs.
    leading.set()
    done.wait(60)


threading.Thread(target=lambda: election.run(lead), daemon=True).start()
assert leading.wait(10), "election"
print("before: lock held, member, leading, watching")

# Ask the test to kill the leader; wait until it did.
before = len(states)
on_leader = await_kill(session, kill_marker, killed_marker) == "leader"

# Writes succeed once the client is connected to a survivor; the session is the same.
deadline = time.time() + 30
while True:
    try:
        zk.set("/app/config", b"after")
        break
    except Exception as e:  # connection loss while the ensemble elects
        assert time.time() < deadline, f"no write after failover: {e!r}"
        time.sleep(0.1)
assert zk.client_id[0] == session, "the session survived"
# Connected to the leader (the test says so in its marker), the client lost its connection and
# found a survivor; connected to a zkrs follower, it was kept through the election and saw no
# change of state at all.
later = states[before:]
if on_leader:
    assert KazooState.SUSPENDED in later and states[-1] == KazooState.CONNECTED, states
else:
    assert later == [], states
assert seen.wait(10), f"the watch fired after the failover: {changes}"
assert zk.exists("/app/member") is not None, "the ephemeral survived"
assert lock.is_acquired and zk.get_children("/app/lock"), "the lock is still held"
assert election.lock.is_acquired, "still the leader of the election"
print("after: same session, lock held, member, leading, watch fired")
done.set()
lock.release()
zk.stop()
print("ok")
