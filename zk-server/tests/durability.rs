//! Durability of the real process: every acknowledged write survives kill -9 and restart, on zkrs
//! and (the same scenario, as a reference) on Apache ZooKeeper.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::*;
use zk_proto::*;

/// Acknowledged creates, sets and deletes — including ones still being pipelined when the process
/// dies — are all present after kill -9; nothing unacknowledged is half-applied; zxids continue.
fn acknowledged_writes_survive_kill_9(target: Target, extra: &str) {
    let mut server = start(target, extra);
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/d", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    for i in 0..50 {
        assert_eq!(
            c.create(&format!("/d/n{i}"), format!("v{i}").as_bytes(), CreateMode::Persistent).err(),
            ErrorCode::Ok
        );
    }
    assert_eq!(c.set_data("/d/n0", b"changed", 0).err(), ErrorCode::Ok);
    assert_eq!(c.delete("/d/n1", 0).err(), ErrorCode::Ok);
    let eph = c.create("/d/eph", b"", CreateMode::Ephemeral);
    assert_eq!(eph.err(), ErrorCode::Ok);
    let last_acked = c.set_data("/d/n2", b"last", 0).header.zxid;

    // Pipeline many more writes and kill the server while they are in flight; record which were
    // acknowledged before the connection died.
    let mut xids = Vec::new();
    for i in 0..2000 {
        let req = Request::Create(CreateRequest {
            path: format!("/d/p{i}"),
            data: Some(bytes::Bytes::from_static(b"x")),
            acl: support::client::open_acl(),
            flags: 0,
        });
        xids.push((c.send(&req), i));
    }
    let mut acked = Vec::new();
    for (n, (xid, i)) in xids.iter().enumerate() {
        if n == 300 {
            server.kill();
        }
        match c.recv(*xid) {
            Some(r) if r.err() == ErrorCode::Ok => acked.push(*i),
            Some(r) => panic!("create /d/p{i} failed: {:?}", r.err()),
            None => break,
        }
    }
    assert!(acked.len() >= 300, "at least the replies read before the kill were acknowledged");
    drop(c);

    server.restart();
    let mut c = RawClient::connect(server.addr(), 30_000);
    let d: GetDataResponse = c.get_data("/d/n0", false).decode();
    assert_eq!(d.data.as_deref(), Some(&b"changed"[..]));
    assert_eq!(d.stat.version, 1);
    assert_eq!(c.exists("/d/n1", false).err(), ErrorCode::NoNode);
    let d: GetDataResponse = c.get_data("/d/n2", false).decode();
    assert_eq!(d.stat.mzxid, last_acked);
    for i in 3..50 {
        let r = c.get_data(&format!("/d/n{i}"), false);
        assert_eq!(r.err(), ErrorCode::Ok, "/d/n{i} lost");
        assert_eq!(r.decode::<GetDataResponse>().data.as_deref(), Some(format!("v{i}").as_bytes()));
    }
    for i in &acked {
        assert_eq!(c.exists(&format!("/d/p{i}"), false).err(), ErrorCode::Ok, "acknowledged /d/p{i} lost");
    }
    // Unacknowledged creates may or may not be there, but the tree is consistent: the parent's
    // child count matches its children.
    let r = c.children2("/d", false);
    let kids: GetChildren2Response = r.decode();
    assert_eq!(kids.stat.num_children as usize, kids.children.len());
    // The session that owned the ephemeral was restored, so its node is still there until it
    // expires; a new write continues the zxid sequence.
    let next = c.create("/after", b"", CreateMode::Persistent);
    assert_eq!(next.err(), ErrorCode::Ok);
    assert!(next.header.zxid > last_acked);
}

/// zoo.cfg lines selecting each of the log's append modes (zk-log's `AppendMode`).
const APPEND_MODES: [&str; 2] = ["txnLog.appendMode=pwrite", "txnLog.appendMode=mmap"];

#[test]
fn zkrs_acknowledged_writes_survive_kill_9() {
    for mode in APPEND_MODES {
        acknowledged_writes_survive_kill_9(Target::Zkrs, mode);
    }
}

#[test]
fn apache_acknowledged_writes_survive_kill_9() {
    acknowledged_writes_survive_kill_9(Target::Apache, "");
}

/// Repeated kill -9 under load, bounded in count and time: after each restart every write
/// acknowledged so far is present and the zxids never go backwards.
#[test]
fn zkrs_repeated_crashes_lose_nothing_acknowledged() {
    for mode in APPEND_MODES {
        repeated_crashes_lose_nothing_acknowledged(mode);
    }
}

fn repeated_crashes_lose_nothing_acknowledged(extra: &str) {
    let mut server = start(Target::Zkrs, extra);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut acked: Vec<String> = Vec::new();
    let mut last_zxid = 0;
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for round in 0..8 {
        if Instant::now() > deadline {
            break;
        }
        let mut c = RawClient::connect(server.addr(), 30_000);
        // Everything acknowledged in earlier rounds is still there.
        for p in &acked {
            assert_eq!(c.exists(p, false).err(), ErrorCode::Ok, "round {round}: acknowledged {p} lost");
        }
        let mut sent = Vec::new();
        for i in 0..500 {
            let path = format!("/r{round}-{i}");
            let req = Request::Create(CreateRequest {
                path: path.clone(),
                data: None,
                acl: support::client::open_acl(),
                flags: 0,
            });
            sent.push((c.send(&req), path));
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let kill_at = (seed % 500) as usize;
        for (n, (xid, path)) in sent.iter().enumerate() {
            if n == kill_at {
                server.kill();
            }
            match c.recv(*xid) {
                Some(r) => {
                    assert_eq!(r.err(), ErrorCode::Ok);
                    assert!(r.header.zxid > last_zxid, "zxids must increase across restarts");
                    last_zxid = r.header.zxid;
                    acked.push(path.clone());
                }
                None => break,
            }
        }
        drop(c);
        server.restart();
    }
    let mut c = RawClient::connect(server.addr(), 30_000);
    for p in &acked {
        assert_eq!(c.exists(p, false).err(), ErrorCode::Ok, "acknowledged {p} lost");
    }
}
