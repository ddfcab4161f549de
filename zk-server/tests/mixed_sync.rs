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

/// The sync modes server 1 was given so far: read from its own log when it is zkrs, from its
/// leader's (`leader`, zkrs then) when it is Apache.
fn modes(e: &Ensemble, learner: Kind, leader: usize) -> Vec<String> {
    match learner {
        Kind::Zkrs => e.received_sync_modes(0),
        Kind::Apache => e.sync_modes(leader, 1),
    }
}

/// The next mode server 1 is given, beyond the `seen` before.
fn next_mode(e: &Ensemble, learner: Kind, leader: usize, seen: usize) -> String {
    let mut got = Vec::new();
    wait_until(e, "server 1 to be synced", || {
        got = modes(e, learner, leader);
        got.len() > seen
    });
    got[seen].clone()
}

/// Whether server 1 (of kind `kind`) has `needle` in its transaction log.
fn logged(e: &Ensemble, kind: Kind, needle: &str) -> bool {
    match kind {
        Kind::Apache => e.apache_logged(0, needle),
        Kind::Zkrs => {
            let mut out = Vec::new();
            zk_server::tools::dump_log(&e.data_dir(0).join(zk_log::LOG_DIR_NAME), &mut out).is_ok()
                && String::from_utf8_lossy(&out).contains(needle)
        }
    }
}

/// Server 1 is of kind `learner`, servers 2 and 3 of the other. Server 3 (the largest id) leads
/// a fresh ensemble; server 1 is brought back by DIFF, then (its disk lost) by SNAP. Then TRUNC:
/// server 1 is made to lead, logs a proposal its frozen followers never see, and dies; servers 2
/// and 3 elect one of them, and server 1 comes back to be truncated.
fn syncs_by_diff_snap_and_trunc(learner: Kind) {
    let other = if learner == Kind::Zkrs { Kind::Apache } else { Kind::Zkrs };
    let mut e = Ensemble::configure_with_extra(&[learner, other, other], &[], "syncLimit=20\n");
    // Servers 2 and 3 first: with all three started at once, a slow JVM start of server 3 lets
    // servers 1 and 2 form a quorum under 2, as Apache would too.
    e.launch(1);
    e.launch(2);
    let leader = e.wait_for_leader_among(&[1, 2]);
    assert_eq!(leader, 2, "the largest id leads\n{}", e.logs());
    e.launch(0);
    let mut c = e.client(leader);
    create(&mut c, "/d");
    caught_up(&e, leader, 0);

    // DIFF: a few writes while server 1 is away.
    e.kill(0);
    for n in 0..20 {
        create(&mut c, &format!("/d/while-away-{n:02}"));
    }
    let seen = modes(&e, learner, leader).len();
    e.launch(0);
    assert_eq!(next_mode(&e, learner, leader, seen), "Diff", "{}", e.logs());
    caught_up(&e, leader, 0);
    create(&mut e.client(0), "/d/through-server-1");

    // SNAP: server 1 lost its disk.
    e.kill(0);
    create(&mut c, "/d/while-wiped");
    e.wipe_data(0);
    let seen = modes(&e, learner, leader).len();
    e.launch(0);
    assert_eq!(next_mode(&e, learner, leader, seen), "Snap", "{}", e.logs());
    caught_up(&e, leader, 0);
    let paths = equal_trees(&e);
    assert_eq!(paths.iter().filter(|p| p.starts_with("/d/")).count(), 22);

    // TRUNC. Server 1 is made to lead by being ahead: a write committed by the leader and
    // server 1 while server 2 is frozen (then killed, the proposal unread in its socket), then
    // the leader goes too; server 1's longer history wins the election.
    e.stop(1);
    create(&mut c, "/d/past-server-2");
    e.kill(1);
    e.kill(2);
    e.launch(1);
    wait_until(&e, "server 1 to lead", || e.mode(0).as_deref() == Some("leader"));
    e.launch(2);
    e.wait_for_leader();
    let mut first = e.client(0);
    create(&mut first, "/t");
    caught_up(&e, 0, 1);
    caught_up(&e, 0, 2);
    e.stop(1);
    e.stop(2);
    let xid = first.send(&create_req("/t/never-acknowledged"));
    wait_until(&e, "server 1 to log its proposal", || logged(&e, learner, "/t/never-acknowledged"));
    e.kill(0);
    assert!(first.recv(xid).is_none_or(|r| r.err() != ErrorCode::Ok), "acknowledged without a quorum");
    // Killed, not thawed: the proposal in their sockets' buffers dies with them.
    for i in [1, 2] {
        e.kill(i);
        e.launch(i);
    }
    let new_leader = e.wait_for_leader_among(&[1, 2]);
    // Apache's leader never sends a TRUNC whose next proposal is of a later epoch (it sends a
    // SNAP then), so server 1 comes back to it before the new epoch has a write; a zkrs leader is
    // given one first, so its TRUNC to the Apache learner is followed by the new epoch's DIFF.
    if learner == Kind::Apache {
        create(&mut e.client(new_leader), "/t/after");
    }
    let seen = modes(&e, learner, new_leader).len();
    e.launch(0);
    assert_eq!(next_mode(&e, learner, new_leader, seen), "Trunc", "{}", e.logs());
    if learner == Kind::Zkrs {
        create(&mut e.client(new_leader), "/t/after");
    }
    caught_up(&e, new_leader, 0);
    let paths = equal_trees(&e);
    assert!(paths.iter().any(|p| p == "/t/after"), "{paths:?}");
    assert!(!paths.iter().any(|p| p == "/t/never-acknowledged"), "the unacknowledged proposal survived");
    // Every txn's digest matched on every member, across all three kinds of sync.
    for i in 0..3 {
        let count = support::load::digest_mismatches(&e, i);
        assert_eq!(count, Some(0), "member {}'s zk_digest_mismatches_count\n{}", i + 1, e.logs());
    }
}

/// An Apache 3.8 leader brings a zkrs follower back by DIFF, SNAP and TRUNC.
#[test]
fn an_apache_leader_syncs_a_zkrs_follower_by_diff_snap_and_trunc() {
    syncs_by_diff_snap_and_trunc(Kind::Zkrs);
}

/// A zkrs leader brings an Apache 3.8 follower back by DIFF, SNAP (Apache's snapshot stream,
/// written by zkrs) and TRUNC.
#[test]
fn a_zkrs_leader_syncs_an_apache_follower_by_diff_snap_and_trunc() {
    syncs_by_diff_snap_and_trunc(Kind::Apache);
}

/// Syncs through an Apache follower under a zkrs leader while writes go on: every one is
/// answered (the leader answers a learner's forwarded sync once what it proposed before is
/// committed), and the read after it sees the writes acknowledged before the sync.
#[test]
fn syncs_through_an_apache_follower_under_a_zkrs_leader_are_answered() {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::sync::Arc;
    let mut e = Ensemble::configure_with_extra(&[Kind::Apache, Kind::Zkrs, Kind::Zkrs], &[], "");
    e.launch(1);
    e.launch(2);
    assert_eq!(e.wait_for_leader_among(&[1, 2]), 2, "{}", e.logs());
    e.launch(0);
    assert_eq!(e.wait_for_leader(), 2, "{}", e.logs());
    let mut w = e.client(2);
    create(&mut w, "/s");
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicI64::new(0));
    let writer = {
        let (stop, acked, addr) = (stop.clone(), acked.clone(), e.members[2].client);
        std::thread::spawn(move || {
            let mut w = RawClient::connect(addr, 10_000);
            let mut n = 0i64;
            // Bounded by the stop flag.
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                assert_eq!(w.set_data("/s", &n.to_be_bytes(), -1).err(), ErrorCode::Ok);
                acked.store(n, Ordering::Relaxed);
            }
        })
    };
    let mut r = e.client(0);
    for i in 0..2000 {
        let before = acked.load(Ordering::Relaxed);
        let s = r.call(Request::Sync(SyncRequest { path: "/s".into() }));
        assert_eq!(s.err(), ErrorCode::Ok, "sync {i}");
        let g = r.get_data("/s", false);
        let d: GetDataResponse = g.decode();
        let v = d.data.map(|b| i64::from_be_bytes(b.as_ref().try_into().unwrap_or([0; 8]))).unwrap_or(0);
        assert!(v >= before, "sync {i}: read {v} after {before} was acknowledged");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
}

/// A session on an Apache follower under a zkrs leader lives as long as its client pings: the
/// follower reports the session's activity in its answers to the leader's pings, and the zkrs
/// leader, which expires sessions, counts it.
#[test]
fn a_session_on_an_apache_follower_under_a_zkrs_leader_does_not_expire_while_it_pings() {
    let mut e = Ensemble::configure_with_extra(&[Kind::Apache, Kind::Zkrs, Kind::Zkrs], &[], "");
    e.launch(1);
    e.launch(2);
    assert_eq!(e.wait_for_leader_among(&[1, 2]), 2, "{}", e.logs());
    e.launch(0);
    assert_eq!(e.wait_for_leader(), 2, "{}", e.logs());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let addr = e.members[0].client.to_string();
        let c = zk_client::Client::connect(&addr, Duration::from_millis(4000)).await.expect("connect");
        let sid = c.session_id();
        c.create("/mine", b"", &zk_client::acl::open_unsafe(), zk_client::CreateMode::Ephemeral)
            .await
            .expect("create");
        // Three session timeouts of pings and nothing else.
        tokio::time::sleep(Duration::from_secs(12)).await;
        let stat = c.exists("/mine").await.expect("the session is alive");
        assert_eq!(stat.map(|s| s.ephemeral_owner), Some(sid), "{}", e.logs());
        let _ = c.close().await;
    });
}
