//! The txn digest across implementations (loopback ports, Apache ZooKeeper 3.8 from Debian).
//!
//! A leader stamps each proposal with the tree digest it predicts for the tree once the txn
//! applies; every learner compares that with its own tree's digest after applying it and counts
//! a difference in `zk_digest_mismatches_count`. So a zkrs leader's predictions are checked by
//! Apache's own digest code on its followers, and an Apache leader's by zkrs followers: each
//! test runs every kind of write (creates of every mode, sequential names, ephemerals closed and
//! expired, containers reaped, TTL nodes, setData and setACL, the root's own data, deletes,
//! multis that commit and multis that fail) and then reads every member's count, and the
//! learners' logs to see that the digests were there to compare.
#![allow(clippy::disallowed_methods)]

mod support;

use bytes::Bytes;
use std::time::{Duration, Instant};
use support::client::{open_acl, RawClient};
use support::ensemble::*;
use zk_proto::*;

/// TTL nodes allowed, and containers reaped quickly (zkrs reads the key; Apache reads the system
/// property, see [`configure`]).
const EXTRA: &str = "extendedTypesEnabled=true\nznode.container.checkIntervalMs=500\n";

fn configure(kinds: &[Kind]) -> Ensemble {
    let e = Ensemble::configure_with_extra(kinds, &[], EXTRA);
    for m in e.members.iter().filter(|m| m.kind == Kind::Apache) {
        std::fs::write(m.dir.join("jvmflags"), "-Dznode.container.checkIntervalMs=500\n").expect("jvmflags");
    }
    e
}

/// Members of `kinds`, server 3 leading and both followers synced.
fn led_by_server_3(kinds: &[Kind]) -> Ensemble {
    let mut e = configure(kinds);
    e.launch_led_by_server_3();
    e
}

fn wait_until(e: &Ensemble, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "waited too long for {what}\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ok(r: support::client::Reply, what: &str) {
    assert_eq!(r.err(), ErrorCode::Ok, "{what}");
}

fn create_req(path: &str, data: &[u8], mode: CreateMode) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl: open_acl(),
        flags: mode.code(),
    }
}

/// Every kind of write, through clients of every member (writes on learners are forwarded).
fn every_kind_of_write(e: &Ensemble, leader: usize) {
    let mut c: Vec<RawClient> = (0..3).map(|i| e.client(i)).collect();
    ok(c[0].create("/d", b"top", CreateMode::Persistent), "create /d");
    for (i, client) in c.iter_mut().enumerate() {
        ok(client.create("/d/seq-", b"s", CreateMode::PersistentSequential), "sequential");
        ok(client.create(&format!("/d/n{i}"), &[i as u8; 40], CreateMode::Persistent), "create");
    }
    // The root's own data and ACL: Apache digests the root under the path "" both ways.
    ok(c[1].set_data("/", b"root data", -1), "setData /");
    ok(c[2].set_data("/d", b"second", 0), "setData /d");
    ok(
        c[0].call(Request::SetAcl(SetAclRequest {
            path: "/d/n1".into(),
            acl: vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }],
            version: 0,
        })),
        "setACL",
    );
    // A container with a child: deleting the child leaves it empty, and the leader reaps it.
    ok(c[1].call(Request::CreateContainer(create_req("/box", b"", CreateMode::Container))), "container");
    ok(c[1].create("/box/item", b"x", CreateMode::Persistent), "container child");
    ok(c[2].delete("/box/item", -1), "delete the container's child");
    // A TTL node.
    ok(
        c[0].call(Request::CreateTtl(CreateTtlRequest {
            path: "/ttl".into(),
            data: Some(Bytes::from_static(b"t")),
            acl: open_acl(),
            flags: CreateMode::PersistentWithTtl.code(),
            ttl: 3_600_000,
        })),
        "createTTL",
    );
    // A multi that commits and one that fails (its txn is an error multi).
    let good = Request::Multi(vec![
        Request::Create(create_req("/d/m1", b"m", CreateMode::Persistent)),
        Request::SetData(SetDataRequest {
            path: "/d/m1".into(),
            data: Some(Bytes::from_static(b"mm")),
            version: 0,
        }),
        Request::Check(CheckVersionRequest { path: "/d".into(), version: 1 }),
        Request::Delete(DeleteRequest { path: "/d/n0".into(), version: 0 }),
    ]);
    ok(c[1].call(good), "multi");
    let bad = Request::Multi(vec![
        Request::Create(create_req("/d/never", b"", CreateMode::Persistent)),
        Request::Check(CheckVersionRequest { path: "/d".into(), version: 99 }),
    ]);
    assert_eq!(c[2].call(bad).err(), ErrorCode::Ok, "a failed multi answers OK with error results");
    // Ephemerals of a session that closes, and of one that expires.
    let mut closing = e.client(0);
    ok(closing.create("/d/eph-closed", b"e", CreateMode::Ephemeral), "ephemeral");
    ok(closing.create("/eph-top", b"e", CreateMode::EphemeralSequential), "ephemeral sequential");
    closing.close();
    let mut expiring = RawClient::connect(e.members[1].client, 1000);
    ok(expiring.create("/d/eph-expired", b"e", CreateMode::Ephemeral), "ephemeral");
    drop(expiring);
    let mut watcher = e.client(leader);
    wait_until(e, "the expired session's ephemeral to go", || {
        watcher.exists("/d/eph-expired", false).err() == ErrorCode::NoNode
    });
    wait_until(e, "the empty container to be reaped", || {
        watcher.exists("/box", false).err() == ErrorCode::NoNode
    });
    // Plain deletes, and a last write that every member must apply.
    ok(c[0].delete("/d/n2", -1), "delete");
    ok(c[leader].create("/done", b"", CreateMode::Persistent), "last");
    wait_until(e, "every member to apply everything", || {
        let z: Vec<Option<i64>> = (0..3).map(|i| e.zxid(i)).collect();
        z[0].is_some() && z.iter().all(|x| *x == z[0])
    });
}

fn mismatches(e: &Ensemble, i: usize) -> i64 {
    support::load::digest_mismatches(e, i)
        .unwrap_or_else(|| panic!("member {} has no zk_digest_mismatches_count in mntr\n{}", i + 1, e.logs()))
}

/// The txns in Apache member `i`'s log since zxid `from`, each with whether it carried a digest.
fn apache_digests(e: &Ensemble, i: usize, from: i64) -> Vec<(i64, bool)> {
    let dir = e.data_dir(i).join("version-2");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("Apache's log directory")
        .flatten()
        .map(|f| f.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("log.")))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let mut log = zk_log::apache::ApacheLog::open(&f).expect("Apache log");
        while let Some((hdr, _, digest)) = log.next_digested().expect("readable Apache log") {
            if hdr.zxid >= from {
                out.push((hdr.zxid, digest.is_some()));
            }
        }
    }
    out
}

#[test]
fn apache_followers_find_a_zkrs_leaders_digests_right() {
    let e = led_by_server_3(&[Kind::Apache, Kind::Apache, Kind::Zkrs]);
    let epoch_start = e.zxid(2).expect("srvr") & !0xffff_ffff;
    every_kind_of_write(&e, 2);
    for i in 0..2 {
        let txns = apache_digests(&e, i, epoch_start);
        assert!(txns.len() >= 30, "member {}: {} txns logged", i + 1, txns.len());
        let bare: Vec<i64> = txns.iter().filter(|(_, d)| !d).map(|(z, _)| *z).collect();
        assert!(bare.is_empty(), "member {} logged txns without a digest: {bare:x?}", i + 1);
        assert_eq!(mismatches(&e, i), 0, "Apache member {} found digests wrong\n{}", i + 1, e.logs());
    }
    assert_eq!(mismatches(&e, 2), 0, "the zkrs leader's own check\n{}", e.logs());
}

#[test]
fn zkrs_followers_find_an_apache_leaders_digests_right() {
    let e = led_by_server_3(&[Kind::Zkrs, Kind::Zkrs, Kind::Apache]);
    every_kind_of_write(&e, 2);
    for i in 0..2 {
        let mut out = Vec::new();
        zk_server::tools::dump_log(&e.data_dir(i).join(zk_log::LOG_DIR_NAME), &mut out).expect("dump");
        let text = String::from_utf8_lossy(&out);
        let digested = text.lines().filter(|l| l.contains(" digest 2:")).count();
        assert!(digested >= 30, "member {}: {digested} txns with a digest in its log\n{text}", i + 1);
        assert_eq!(mismatches(&e, i), 0, "zkrs member {} found digests wrong\n{}", i + 1, e.logs());
    }
    assert_eq!(mismatches(&e, 2), 0, "the Apache leader's own check\n{}", e.logs());
}
