//! Mixed ensembles of Apache ZooKeeper 3.8 and zkrs servers (loopback ports): each of the three
//! sync modes in both directions. An Apache leader brings a stale zkrs follower back by DIFF, a
//! zkrs server that lost its disk by SNAP, and a zkrs server with a proposal nobody else logged
//! by TRUNC; a zkrs leader does the same to Apache followers. After each, every server's tree is
//! the same (data and stat), and the proposal that was never acknowledged is nowhere.
//!
//! The mode an Apache leader chose is read from the zkrs learner's log ("synced by the leader
//! with ..."); the mode a zkrs leader chose, from its own ("syncing learner by ...").
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};
use support::client::RawClient;
use support::ensemble::*;
use zk_proto::*;

fn wait_until(e: &Ensemble, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !done() {
        assert!(Instant::now() < deadline, "waited too long for {what}\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn create(c: &mut RawClient, path: &str) {
    assert_eq!(c.create(path, b"", CreateMode::Persistent).err(), ErrorCode::Ok, "create {path}");
}

/// Every member's tree, which must all be equal; returns the paths.
fn equal_trees(e: &Ensemble) -> Vec<String> {
    let trees: Vec<Vec<Znode>> = (0..3).map(|i| dump_tree(&mut e.client(i), "/")).collect();
    for i in 1..3 {
        let diff = trees[0].iter().zip(&trees[i]).find(|(a, b)| a != b);
        assert!(
            trees[i] == trees[0],
            "members 1 and {} differ ({} and {} znodes): {diff:?}\n{}",
            i + 1,
            trees[0].len(),
            trees[i].len(),
            e.logs()
        );
    }
    trees[0].iter().map(|z| z.path.clone()).collect()
}

/// Waits until member `i` has applied everything the leader has.
fn caught_up(e: &Ensemble, leader: usize, i: usize) {
    wait_until(
        e,
        &format!("server {} to catch up", i + 1),
        || matches!((e.zxid(i), e.zxid(leader)), (Some(a), Some(b)) if a == b),
    );
}

/// The mode the zkrs server `i` is synced with next, beyond the `seen` it logged before.
fn next_received(e: &Ensemble, i: usize, seen: usize) -> String {
    let mut modes = Vec::new();
    wait_until(e, &format!("server {} to be synced", i + 1), || {
        modes = e.received_sync_modes(i);
        modes.len() > seen
    });
    modes[seen].clone()
}

/// The mode the zkrs leader `leader` chooses next for the learner `i`.
fn next_chosen(e: &Ensemble, leader: usize, i: usize, seen: usize) -> String {
    let mut modes = Vec::new();
    wait_until(e, &format!("server {} to sync server {}", leader + 1, i + 1), || {
        modes = e.sync_modes(leader, i + 1);
        modes.len() > seen
    });
    modes[seen].clone()
}

/// Server 3 (the largest id: it leads a fresh ensemble) is Apache; server 1, zkrs, is its
/// follower, brought back by DIFF, then SNAP. Then TRUNC: server 1 is made to lead (servers 2 and 3
/// restarted after it), logs a proposal its frozen followers never see, dies; the Apache servers
/// elect one of them, take a write, and the zkrs server comes back to be truncated.
#[test]
fn an_apache_leader_syncs_a_zkrs_follower_by_diff_snap_and_trunc() {
    let mut e =
        Ensemble::configure_with_extra(&[Kind::Zkrs, Kind::Apache, Kind::Apache], &[], "syncLimit=20\n");
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    assert_eq!(leader, 2, "the largest id leads\n{}", e.logs());
    let z = 0;
    let mut c = e.client(leader);
    create(&mut c, "/d");
    caught_up(&e, leader, z);

    // DIFF: a few writes while the zkrs follower is away.
    e.kill(z);
    for n in 0..20 {
        create(&mut c, &format!("/d/while-away-{n:02}"));
    }
    let seen = e.received_sync_modes(z).len();
    e.launch(z);
    assert_eq!(next_received(&e, z, seen), "Diff", "{}", e.logs());
    caught_up(&e, leader, z);
    create(&mut e.client(z), "/d/through-zkrs");

    // SNAP: the zkrs follower lost its disk.
    e.kill(z);
    create(&mut c, "/d/while-wiped");
    e.wipe_data(z);
    let seen = e.received_sync_modes(z).len();
    e.launch(z);
    assert_eq!(next_received(&e, z, seen), "Snap", "{}", e.logs());
    caught_up(&e, leader, z);
    let paths = equal_trees(&e);
    assert_eq!(paths.iter().filter(|p| p.starts_with("/d/")).count(), 22);

    // TRUNC: the zkrs server leads with a proposal nobody else logs, and dies.
    // Server 1 is made to lead by being ahead: a write committed by the leader and server 1
    // while server 2 is frozen (and then killed, the proposal unread in its socket), then the
    // leader goes too; server 1's longer history wins the election.
    e.stop(1);
    create(&mut c, "/d/past-server-2");
    e.kill(1);
    e.kill(2);
    e.launch(1);
    wait_until(&e, "the zkrs server to lead", || e.mode(z).as_deref() == Some("leader"));
    e.launch(2);
    e.wait_for_leader();
    let mut zc = e.client(z);
    create(&mut zc, "/t");
    caught_up(&e, z, 1);
    caught_up(&e, z, 2);
    e.stop(1);
    e.stop(2);
    let xid = zc.send(&create_req("/t/never-acknowledged"));
    let log_dir = e.data_dir(z).join(zk_log::LOG_DIR_NAME);
    wait_until(&e, "the zkrs leader to log its proposal", || {
        let mut out = Vec::new();
        zk_server::tools::dump_log(&log_dir, &mut out).is_ok()
            && String::from_utf8_lossy(&out).contains("/t/never-acknowledged")
    });
    e.kill(z);
    assert!(zc.recv(xid).is_none_or(|r| r.err() != ErrorCode::Ok), "acknowledged without a quorum");
    // Killed, not thawed: the proposal in their sockets' buffers dies with them.
    for i in [1, 2] {
        e.kill(i);
        e.launch(i);
    }
    let apache_leader = e.wait_for_leader_among(&[1, 2]);
    // Back before the new epoch has a write: with one, Apache sends a SNAP instead (it never
    // sends a TRUNC whose next proposal is of another epoch).
    let seen = e.received_sync_modes(z).len();
    e.launch(z);
    assert_eq!(next_received(&e, z, seen), "Trunc", "{}", e.logs());
    create(&mut e.client(apache_leader), "/t/after");
    caught_up(&e, apache_leader, z);
    let paths = equal_trees(&e);
    assert!(paths.iter().any(|p| p == "/t/after"), "{paths:?}");
    assert!(!paths.iter().any(|p| p == "/t/never-acknowledged"), "the unacknowledged proposal survived");
}

/// The mirror image: server 3, zkrs, leads; server 1, Apache, is its follower, brought back by
/// DIFF, then SNAP (zkrs writes Apache's snapshot stream). Then TRUNC: Apache's server 1 is made to
/// lead, logs a proposal nobody else sees, dies; the zkrs servers elect one of them, which
/// truncates the Apache server when it comes back.
#[test]
fn a_zkrs_leader_syncs_an_apache_follower_by_diff_snap_and_trunc() {
    let mut e =
        Ensemble::configure_with_extra(&[Kind::Apache, Kind::Zkrs, Kind::Zkrs], &[], "syncLimit=20\n");
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    assert_eq!(leader, 2, "the largest id leads\n{}", e.logs());
    let a = 0;
    let mut c = e.client(leader);
    create(&mut c, "/d");
    caught_up(&e, leader, a);

    e.kill(a);
    for n in 0..20 {
        create(&mut c, &format!("/d/while-away-{n:02}"));
    }
    let seen = e.sync_modes(leader, a + 1).len();
    e.launch(a);
    assert_eq!(next_chosen(&e, leader, a, seen), "Diff", "{}", e.logs());
    caught_up(&e, leader, a);
    create(&mut e.client(a), "/d/through-apache");

    e.kill(a);
    create(&mut c, "/d/while-wiped");
    e.wipe_data(a);
    let seen = e.sync_modes(leader, a + 1).len();
    e.launch(a);
    assert_eq!(next_chosen(&e, leader, a, seen), "Snap", "{}", e.logs());
    caught_up(&e, leader, a);
    let paths = equal_trees(&e);
    assert_eq!(paths.iter().filter(|p| p.starts_with("/d/")).count(), 22);

    // TRUNC: the Apache server leads with a proposal nobody else logs, and dies.
    // Server 1 is made to lead by being ahead: a write committed by the leader and server 1
    // while server 2 is frozen (and then killed, the proposal unread in its socket), then the
    // leader goes too; server 1's longer history wins the election.
    e.stop(1);
    create(&mut c, "/d/past-server-2");
    e.kill(1);
    e.kill(2);
    e.launch(1);
    wait_until(&e, "the Apache server to lead", || e.mode(a).as_deref() == Some("leader"));
    e.launch(2);
    e.wait_for_leader();
    let mut ac = e.client(a);
    create(&mut ac, "/t");
    caught_up(&e, a, 1);
    caught_up(&e, a, 2);
    e.stop(1);
    e.stop(2);
    let xid = ac.send(&create_req("/t/never-acknowledged"));
    wait_until(&e, "the Apache leader to log its proposal", || e.apache_logged(a, "/t/never-acknowledged"));
    e.kill(a);
    assert!(ac.recv(xid).is_none_or(|r| r.err() != ErrorCode::Ok), "acknowledged without a quorum");
    for i in [1, 2] {
        e.kill(i);
        e.launch(i);
    }
    let zkrs_leader = e.wait_for_leader_among(&[1, 2]);
    create(&mut e.client(zkrs_leader), "/t/after");
    let seen = e.sync_modes(zkrs_leader, a + 1).len();
    e.launch(a);
    assert_eq!(next_chosen(&e, zkrs_leader, a, seen), "Trunc", "{}", e.logs());
    caught_up(&e, zkrs_leader, a);
    let paths = equal_trees(&e);
    assert!(paths.iter().any(|p| p == "/t/after"), "{paths:?}");
    assert!(!paths.iter().any(|p| p == "/t/never-acknowledged"), "the unacknowledged proposal survived");
}
