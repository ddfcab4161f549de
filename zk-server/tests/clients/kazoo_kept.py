"""kazoo connected to one follower of a three-server ensemble whose leader is killed (argv: the
follower's host:port, then the marker file the script writes its session id into when it is ready
for the kill, then the one the test creates once the leader is dead).

A zkrs follower keeps the connection of a client with nothing in flight through the election
(Apache's closes it): kazoo must see no change of state at all (no SUSPENDED, no reconnection),
keep its session, have its first request after the kill answered without an error (no retry
here: ConnectionLoss fails the script), and get the event of its data watch for a change made
after the election. Prints one line per check; exits non-zero on the first failure."""
import sys
import time

from kazoo.client import KazooClient

from leader_death import await_kill, watch_for

host, kill_marker, killed_marker = sys.argv[1], sys.argv[2], sys.argv[3]
# A 15 s session: the follower keeps the connection for up to 5 s of election.
zk = KazooClient(hosts=host, timeout=15)
states = []
zk.add_listener(lambda s: states.append(s))
zk.start(timeout=15)
session = zk.client_id[0]

zk.ensure_path("/kept")
zk.create("/kept/member", b"alive", ephemeral=True)
zk.create("/kept/config", b"before")
seen, changes = watch_for(zk, "/kept/config", b"after")

print("before: connected to one follower, ephemeral, watching")
before = len(states)
await_kill(session, kill_marker, killed_marker)

# The first request after the kill: held by the follower while it elects, then answered.
t0 = time.time()
stat = zk.set("/kept/config", b"after")
print(f"write answered {time.time() - t0:.2f} s after the kill was reported, version {stat.version}")
assert zk.client_id[0] == session, "the same session"
assert seen.wait(10), f"the watch fired: {changes}"
assert zk.exists("/kept/member") is not None, "the ephemeral survived"
assert states[before:] == [], f"no change of state: {states[before:]}"
print("after: no disconnection, same session, write answered, watch fired")
zk.stop()
print("ok")
