//! A full transaction-log disk on the real process: writes fail back to their clients with
//! SYSTEMERROR and leave no trace, reads and sessions keep working, and writes succeed again by
//! themselves once space is freed; acknowledged writes survive kill -9 afterwards.
//!
//! The log goes on a small tmpfs mounted for the test, so the disk really fills (fallocate fails
//! with ENOSPC). Mounting needs root (as on the CI machines); elsewhere the test says it cannot
//! run and returns.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::disk::{fill, Tmpfs};
use support::*;
use zk_proto::*;

#[test]
fn full_log_disk_refuses_writes_and_recovers() {
    let Some(fs) = Tmpfs::mount(4 << 20) else { return };
    let log_dir = fs.path().join("log");
    std::fs::create_dir_all(&log_dir).unwrap();
    let extra = format!("dataLogDir={}\npreAllocSize=64\nsnapCount=1000000\n", log_dir.display());
    let mut server = start(Target::Zkrs, &extra);
    let addr = server.addr();

    let mut c = RawClient::connect(addr, 30_000);
    assert_eq!(c.create("/t", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    assert_eq!(c.create("/t/n0", b"v0", CreateMode::Persistent).err(), ErrorCode::Ok);
    // A session that will expire while the disk is full, owning an ephemeral node.
    let mut e = RawClient::connect(addr, 4_000);
    assert_eq!(e.create("/eph", b"", CreateMode::Ephemeral).err(), ErrorCode::Ok);

    let filler = fill(fs.path(), 200 * 1024);
    let value = vec![b'x'; 1000];
    let mut acked = vec!["/t/n0".to_string()];
    let mut last_ok_zxid = 0;
    let refused_at = loop {
        let path = format!("/t/n{}", acked.len());
        let r = c.create(&path, &value, CreateMode::Persistent);
        match r.err() {
            ErrorCode::Ok => {
                last_ok_zxid = r.header.zxid;
                acked.push(path);
            }
            ErrorCode::SystemError => break path,
            other => panic!("create {path}: unexpected {other:?}"),
        }
        assert!(acked.len() < 5_000, "the log disk never filled");
    };
    assert!(acked.len() > 10, "some writes fit before the disk filled: {}", acked.len());
    // The log's last reserved block may still hold small records: use it up with the smallest
    // there is (a failed delete logs an error txn), so every later write needs new space.
    let mut small = 0;
    loop {
        let r = c.delete("/no/such/node", -1);
        match r.err() {
            ErrorCode::NoNode => last_ok_zxid = r.header.zxid,
            ErrorCode::SystemError => break,
            other => panic!("delete: unexpected {other:?}"),
        }
        small += 1;
        assert!(small < 5_000, "the last block never filled");
    }
    drop(e); // its session now times out while nothing can be written

    // While full: every write is refused, in order, and none is applied.
    let mut xids = Vec::new();
    for i in 0..50 {
        let req = Request::Create(CreateRequest {
            path: format!("/t/p{i}"),
            data: Some(bytes::Bytes::from_static(b"p")),
            acl: support::client::open_acl(),
            flags: CreateMode::PersistentSequential.code(),
        });
        xids.push(c.send(&req));
    }
    for xid in xids {
        let r = c.recv(xid).expect("reply");
        assert_eq!(r.err(), ErrorCode::SystemError);
        assert_eq!(r.header.zxid, last_ok_zxid, "a refused write reports the last applied zxid");
    }
    assert_eq!(c.set_data("/t/n0", b"new", 0).err(), ErrorCode::SystemError);
    assert_eq!(c.delete("/t/n0", 0).err(), ErrorCode::SystemError);
    // Reads are served from the state as it was, and the session stays open.
    let d: GetDataResponse = c.get_data("/t/n0", false).decode();
    assert_eq!((d.data.as_deref(), d.stat.version), (Some(&b"v0"[..]), 0));
    assert_eq!(c.exists(&refused_at, false).err(), ErrorCode::NoNode);
    let kids: GetChildren2Response = c.children2("/t", false).decode();
    assert_eq!(kids.children.len(), acked.len(), "no refused create left a node");
    // A new session cannot be created (that is a write too): the connection is closed.
    let refused_session = RawClient::connect_with(
        addr,
        ConnectRequest { time_out: 30_000, read_only: Some(false), ..Default::default() },
    );
    assert!(refused_session.is_none(), "session creation needs the log");
    assert_eq!(server.mntr_value("zk_log_disk_full"), "1");
    assert!(server.mntr_value("zk_writes_refused_disk_full").parse::<u64>().unwrap() >= 53);

    // The expired session's closeSession is refused too: its ephemeral stays while the disk is full.
    std::thread::sleep(Duration::from_secs(7));
    assert_eq!(c.exists("/eph", false).err(), ErrorCode::Ok, "the expiry could not be logged");

    // Space comes back: writes work again with the next zxid (refusals used none).
    std::fs::remove_file(&filler).unwrap();
    let r = c.create(&refused_at, &value, CreateMode::Persistent);
    assert_eq!(r.err(), ErrorCode::Ok, "writes work again once space is freed");
    assert_eq!(r.header.zxid, last_ok_zxid + 1, "refused writes took no zxids");
    acked.push(refused_at);
    assert_eq!(c.set_data("/t/n0", b"new", 0).err(), ErrorCode::Ok, "the refused set left the version");
    assert_eq!(server.mntr_value("zk_log_disk_full"), "0");
    // The pending expiry goes through now.
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.exists("/eph", false).err() == ErrorCode::Ok {
        assert!(Instant::now() < deadline, "the expired session was never closed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut fresh = RawClient::connect(addr, 30_000);
    assert_eq!(fresh.create("/after", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    drop(fresh);
    drop(c);

    // Everything acknowledged survives kill -9; nothing refused was logged.
    server.restart();
    let mut c = RawClient::connect(addr, 30_000);
    let kids: GetChildren2Response = c.children2("/t", false).decode();
    let mut got = kids.children.clone();
    got.sort();
    let mut want: Vec<String> = acked.iter().map(|p| p.trim_start_matches("/t/").to_string()).collect();
    want.sort();
    assert_eq!(got, want);
    let d: GetDataResponse = c.get_data("/t/n0", false).decode();
    assert_eq!((d.data.as_deref(), d.stat.version), (Some(&b"new"[..]), 1));
    assert_eq!(c.exists("/after", false).err(), ErrorCode::Ok);
    assert_eq!(c.exists("/eph", false).err(), ErrorCode::NoNode);
    let log = server_log(server.dir.path());
    assert!(log.contains("out of space"), "the refusal is logged:\n{log}");
    assert!(log.contains("has space again"), "the recovery is logged:\n{log}");
}
