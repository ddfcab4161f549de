//! Faults injected into replicated zkrs ensembles of real processes (loopback ports): kill -9 of
//! the leader under pipelined load, a leader frozen by SIGSTOP and thawed, stale followers caught
//! up by each of the three sync modes (DIFF, TRUNC, SNAP, read from the leader's log), and a
//! rolling restart of every server under load with sessions that must live through it.
//!
//! Ensembles use ports below the kernel's ephemeral range ([`stable_port`]), so that a server
//! restarted on its ports never finds one taken by an outgoing connection meanwhile.
//!
//! Writes come from client threads that record which writes were acknowledged; an acknowledged
//! write must end up on every server. Waits are polling loops with generous deadlines: the
//! outcomes never depend on how fast the machine is.
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::SocketAddr;
use support::client::RawClient;
use support::ensemble::*;
use support::load::*;
use zk_proto::*;

fn create(c: &mut RawClient, path: &str) {
    assert_eq!(c.create(path, b"", CreateMode::Persistent).err(), ErrorCode::Ok, "create {path}");
}

/// Waits until member `i`'s transaction log (as `zkrs-server dump-log` prints it) contains
/// `needle`: the record is written (it survives a SIGKILL).
fn wait_logged(e: &Ensemble, i: usize, needle: &str) {
    let log_dir = e.data_dir(i).join(zk_log::LOG_DIR_NAME);
    wait_until(e, &format!("server {} to log {needle}", i + 1), || {
        let mut out = Vec::new();
        zk_server::tools::dump_log(&log_dir, &mut out).is_ok()
            && String::from_utf8_lossy(&out).contains(needle)
    });
}

/// Waits for a leader with every follower synced; returns it.
fn settled(e: &Ensemble) -> usize {
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", &(e.members.len() - 1).to_string());
    leader
}

/// Five servers, a writer on each follower pipelining creates: the leader is killed with
/// SIGKILL mid-stream. Every write acknowledged (before or after) is on every survivor, the new
/// ensemble takes writes again, and the killed server comes back, catches up, and ends equal.
#[test]
fn five_servers_keep_every_acknowledged_write_when_the_leader_is_killed_under_pipelined_load() {
    let mut e = Ensemble::start_with_extra(5, "");
    let leader = settled(&e);
    let run = leader_killed_under_load(&mut e, leader);
    assert_eq!(settled(&e), run.new_leader);
}

/// A leader frozen by SIGSTOP (alive, sockets open, silent) while followers take writes: they
/// give up on it within syncLimit, elect a new leader among themselves and carry on. A write sent
/// to the frozen leader is never acknowledged and never applied anywhere. Thawed (SIGCONT), the
/// old leader finds its followers gone, steps down, rejoins as a follower and catches up.
#[test]
fn a_frozen_leader_is_replaced_and_rejoins_as_a_follower_when_thawed() {
    let e = Ensemble::start_with_extra(3, "");
    let leader = settled(&e);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    create(&mut e.client(leader), "/load");
    let old_epoch = e.client(leader).exists("/load", false).decode::<Stat>().czxid >> 32;
    // Clients of the leader: one will write while it is frozen, one will read.
    let mut stale_writer = e.client(leader);
    let mut stale_reader = e.client(leader);
    let load = Load::one_on_each(&e, &followers, 600);
    load.wait_acked(&e, 200);
    e.stop(leader);
    // Queued in the frozen process's socket: it sees it only once thawed.
    let stale_xid = stale_writer.send(&create_req("/frozen-write"));
    let read_xid =
        stale_reader.send(&Request::GetChildren(GetChildrenRequest { path: "/".into(), watch: false }));
    let new_leader = e.wait_for_leader_among(&followers);
    // Writes go on while the old leader is still frozen.
    let at_new = load.acked();
    load.wait_acked(&e, at_new + 200);
    let seen = e.sync_modes(new_leader, leader + 1).len();
    e.cont(leader);

    // What the old leader did with its clients' requests once thawed: it never acknowledges the
    // write in its own epoch (it has no quorum), and the read answers from committed state or not
    // at all. A zkrs leader that steps down keeps its idle clients (their requests held): the
    // write read once thawed may then be proposed by the new leader, once, and acknowledged; it
    // must then be in the ensemble's tree, created in an epoch after the frozen leader's.
    match stale_writer.recv(stale_xid) {
        Some(r) if r.err() == ErrorCode::Ok => {
            let st = e.client(new_leader).exists("/frozen-write", false);
            assert_eq!(st.err(), ErrorCode::Ok, "an acknowledged write is missing from the new leader");
            let czxid = st.decode::<Stat>().czxid;
            assert!(czxid >> 32 > old_epoch, "acknowledged in the frozen leader's epoch: {czxid:#x}");
        }
        _ => {}
    }
    let stale_view = stale_reader.recv(read_xid);
    let mode = next_sync_mode(&e, new_leader, leader, seen);
    eprintln!("the thawed leader caught up by {mode}; its read while thawing: {stale_view:?}");
    wait_until(&e, "the old leader to follow", || e.mode(leader).as_deref() == Some("follower"));
    assert_eq!(settled(&e), new_leader);
    let rejoined = load.acked();
    load.wait_acked(&e, rejoined + 100);
    let outs = load.finish();
    let acked = all_acked(&outs);

    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_has_all(&e, &tree, &acked, "the ensemble");
    // Never applied by the frozen leader: if at all, once, by the new leader (the old one kept
    // its idle client and held the write while it elected, then forwarded it).
    for z in tree.iter().filter(|z| z.path == "/frozen-write") {
        assert!(
            z.stat.czxid >> 32 > old_epoch,
            "the write sent to the frozen leader was applied in its epoch: {:#x}",
            z.stat.czxid
        );
    }
    if let Some(r) = stale_view.filter(|r| r.err() == ErrorCode::Ok) {
        let names: Vec<String> = r.decode();
        assert!(
            !names.contains(&"frozen-write".to_string()),
            "the old leader served its own write: {names:?}"
        );
        for n in names.iter().filter(|n| *n != "zookeeper") {
            let path = format!("/{n}");
            assert!(tree.iter().any(|z| z.path == path), "the old leader served {path}, never committed");
        }
    }
}

/// A follower stopped while a few writes are made is synced by DIFF when it comes back (its
/// last zxid is in the leader's recent history) and has the writes.
#[test]
fn a_follower_back_after_a_few_writes_is_synced_by_diff() {
    let mut e = Ensemble::start_with_extra(3, "");
    let leader = settled(&e);
    let f = (0..3).find(|&i| i != leader).expect("a follower");
    let mut c = e.client(leader);
    create(&mut c, "/d");
    // The follower must have /d in its log: with an empty log it would be synced by SNAP.
    wait_logged(&e, f, "\"/d\"");
    e.kill(f);
    for n in 0..20 {
        create(&mut c, &format!("/d/while-away-{n:02}"));
    }
    let seen = e.sync_modes(leader, f + 1).len();
    e.launch(f);
    assert_eq!(next_sync_mode(&e, leader, f, seen), "Diff", "{}", e.logs());
    assert_eq!(settled(&e), leader);
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_eq!(tree.iter().filter(|z| z.path.starts_with("/d/while-away-")).count(), 20);
}

/// A leader whose log has a proposal nobody else saw. Both followers are frozen, a write goes
/// to the leader (it logs its proposal but can never commit it), and the leader is killed. The
/// followers are then killed too and restarted: they elect a new leader among themselves and take
/// more writes. The old leader, restarted, must be told TRUNC back to the last common zxid; the
/// write that was never acknowledged is nowhere in the end, and all trees are equal.
///
/// Why the frozen followers are killed rather than thawed: the proposal sits, unread, in their
/// sockets' receive buffers. Thawed, they would read it before noticing the leader's death, log
/// it, and the new leader would commit it in its epoch (Zab may keep a write it never
/// acknowledged). Killed, the buffered proposal dies with them, which gives the divergent tail
/// deterministically. syncLimit is raised so that the leader, its followers frozen, still leads
/// (and logs the proposal) well before it would give up on them.
#[test]
fn a_leader_with_an_uncommitted_proposal_is_synced_by_trunc_when_it_comes_back() {
    let mut e = Ensemble::start_with_extra(3, "syncLimit=20\n");
    let leader = settled(&e);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let mut c = e.client(leader);
    create(&mut c, "/t");
    create(&mut c, "/t/committed");
    for &f in &followers {
        e.stop(f);
    }
    let xid = c.send(&create_req("/t/never-acknowledged"));
    wait_logged(&e, leader, "/t/never-acknowledged");
    e.kill(leader);
    assert!(c.recv(xid).is_none_or(|r| r.err() != ErrorCode::Ok), "a write with no quorum acknowledged");
    for &f in &followers {
        e.kill(f);
        e.launch(f);
    }
    let new_leader = e.wait_for_leader_among(&followers);
    let mut n = e.client(new_leader);
    create(&mut n, "/t/after");
    let seen = e.sync_modes(new_leader, leader + 1).len();
    e.launch(leader);
    assert_eq!(next_sync_mode(&e, new_leader, leader, seen), "Trunc", "{}", e.logs());
    assert_eq!(settled(&e), new_leader);
    let tree = equal_trees(&e, &[0, 1, 2]);
    let paths: Vec<&str> = tree.iter().map(|z| z.path.as_str()).collect();
    assert!(paths.contains(&"/t/committed") && paths.contains(&"/t/after"), "{paths:?}");
    assert!(!paths.contains(&"/t/never-acknowledged"), "the uncommitted proposal survived: {paths:?}");
}

/// A follower whose data directory was lost (only myid left) has nothing in common with the
/// leader's log: it is synced by SNAP and then has everything.
///
/// (A follower merely far behind would need the leader's log purged past it; zkrs purges whole
/// log segments, which roll at 64 MiB with no zoo.cfg key to shrink them, so a small test cannot
/// reach that case.)
#[test]
fn a_follower_that_lost_its_data_is_synced_by_snap() {
    let mut e = Ensemble::start_with_extra(3, "");
    let leader = settled(&e);
    let f = (0..3).find(|&i| i != leader).expect("a follower");
    let mut c = e.client(leader);
    create(&mut c, "/s");
    for n in 0..30 {
        create(&mut c, &format!("/s/before-{n:02}"));
    }
    e.kill(f);
    for n in 0..30 {
        create(&mut c, &format!("/s/while-away-{n:02}"));
    }
    e.wipe_data(f);
    let seen = e.sync_modes(leader, f + 1).len();
    e.launch(f);
    assert_eq!(next_sync_mode(&e, leader, f, seen), "Snap", "{}", e.logs());
    assert_eq!(settled(&e), leader);
    create(&mut e.client(f), "/s/through-the-new-follower");
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_eq!(tree.iter().filter(|z| z.path.starts_with("/s/")).count(), 61);
}

/// A follower far behind a leader whose log no longer reaches back to it is synced by SNAP.
/// The leader's log is made short the way zkrs shortens a log for real: that server was itself
/// synced by SNAP (its log restarts at the snapshot), after the stale follower went away.
/// Servers A (stale), B and the first leader L: A stops; more writes; B loses its data and is
/// synced by SNAP; more writes (B logs them); L dies and A returns: B, with the higher zxid,
/// leads, and its log starts above A's last zxid, so neither its in-memory window nor its log
/// can DIFF A. A ends with everything; L comes back; all equal.
#[test]
fn a_follower_behind_the_leaders_log_is_synced_by_snap() {
    let mut e = Ensemble::start_with_extra(3, "");
    let first = settled(&e);
    let others: Vec<usize> = (0..3).filter(|&i| i != first).collect();
    let (a, b) = (others[0], others[1]);
    let mut c = e.client(first);
    create(&mut c, "/f");
    for n in 0..20 {
        create(&mut c, &format!("/f/early-{n:02}"));
    }
    wait_logged(&e, a, "/f/early-19");
    e.kill(a);
    for n in 0..20 {
        create(&mut c, &format!("/f/middle-{n:02}"));
    }
    e.kill(b);
    e.wipe_data(b);
    let seen = e.sync_modes(first, b + 1).len();
    e.launch(b);
    assert_eq!(next_sync_mode(&e, first, b, seen), "Snap", "{}", e.logs());
    e.wait_mntr(first, "zk_synced_followers", "1");
    let mut c = e.client(first);
    for n in 0..20 {
        create(&mut c, &format!("/f/late-{n:02}"));
    }
    wait_logged(&e, b, "/f/late-19");
    e.kill(first);
    e.launch(a);
    let leader = e.wait_for_leader_among(&[a, b]);
    assert_eq!(leader, b, "the server with the longest history leads\n{}", e.logs());
    assert_eq!(e.sync_modes(b, a + 1), ["Snap"], "{}", e.logs());
    for line in e.log(b).lines().filter(|l| l.contains("syncing learner")) {
        eprintln!("server {}: {line}", b + 1);
    }
    e.launch(first);
    assert_eq!(settled(&e), b);
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_eq!(tree.iter().filter(|z| z.path.starts_with("/f/")).count(), 60);
}

/// Every server of a three-server ensemble restarted in turn (SIGKILL, then started again),
/// followers first and the leader last, while clients with the three-server connect string write
/// throughout, each with a session and an ephemeral. Each server is back in sync before the next
/// goes. No acknowledged write is lost, each client kept its session (same id, its ephemeral
/// still there), and the trees are equal.
#[test]
fn a_rolling_restart_under_load_loses_nothing_and_keeps_the_sessions() {
    let mut e = Ensemble::start_with_extra(3, "");
    let first_leader = settled(&e);
    let mut c = e.client(first_leader);
    create(&mut c, "/load");
    create(&mut c, "/eph");
    drop(c.close());
    let addrs: Vec<SocketAddr> = e.members.iter().map(|m| m.client).collect();
    let specs: Vec<WriterSpec> = (0..3)
        .map(|k| {
            // Each writer starts on a different server.
            let mut servers = addrs.clone();
            servers.rotate_left(k);
            WriterSpec {
                depth: 4,
                keep_session: true,
                ephemeral: true,
                ..WriterSpec::new(&format!("w{k}"), servers)
            }
        })
        .collect();
    let load = Load::start(specs, 1000);
    load.wait_acked(&e, 100);
    let mut order: Vec<usize> = (0..3).filter(|&i| i != first_leader).collect();
    order.push(first_leader);
    for &i in &order {
        let before = load.acked();
        e.kill(i);
        e.launch(i);
        let leader = settled(&e);
        wait_until(&e, &format!("server {} to serve", i + 1), || {
            matches!(e.mode(i).as_deref(), Some("leader" | "follower"))
        });
        eprintln!("server {} restarted; the leader is server {}", i + 1, leader + 1);
        load.wait_acked(&e, before + 100);
    }
    let outs = load.finish();
    for o in &outs {
        assert!(o.connections > 1, "writer {} never had to reconnect: every server restarted", o.name);
        assert!(o.client.is_some(), "writer {} ended without a connection", o.name);
    }
    // The sessions are alive: each ephemeral is there, owned by the session its writer began with.
    for i in 0..3 {
        let tree = dump_tree(&mut e.client(i), "/eph");
        for o in &outs {
            let path = format!("/eph/{}", o.name);
            let z = tree.iter().find(|z| z.path == path);
            assert_eq!(
                z.map(|z| z.stat.ephemeral_owner),
                Some(o.session),
                "server {}: {path} of session 0x{:x}",
                i + 1,
                o.session
            );
        }
    }
    let acked = all_acked(&outs);
    for o in outs {
        let reply = o.client.expect("connected").close();
        assert_eq!(reply.map(|r| r.err()), Some(ErrorCode::Ok), "closing writer {}'s session", o.name);
    }
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_has_all(&e, &tree, &acked, "the ensemble");
    assert!(tree.iter().all(|z| !z.path.starts_with("/eph/")), "closed sessions left ephemerals");
}
