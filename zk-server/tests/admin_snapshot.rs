//! Snapshots on an operator's request, on live zkrs-server processes: ClickHouse Keeper's `csnp`
//! and `lgif` (four-letter words and AdminServer commands), and Apache 3.9's AdminServer
//! `snapshot` command: its authorization matrix (no credentials, credentials without ALL on `/`,
//! with it; each bit checked, CVE-2025-58457), `admin.snapshot.enabled`, the rate limit, and the
//! snapshot it serves, taken under writes, checked to be the tree at exactly its `last_zxid`,
//! imported with `zkrs-server import` and loaded by Apache 3.8 (Debian's), each serving the tree
//! the live server served; every member of an ensemble serves the same tree, with Apache's
//! digest, which Apache 3.8 checks when it loads the file (and counts a mismatch when the digest
//! is changed). Apache 3.8 itself has no `snapshot` command: what it answers is checked too.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

mod support;

use bytes::Bytes;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::http::{exchange, request, Answer};
use support::tree::walk;
use support::{free_port, ServerProc, Target};
use zk_proto::*;

/// A zkrs server with its AdminServer on a free loopback port, and that port's address.
fn zkrs_with_admin(extra: &str) -> (ServerProc, SocketAddr) {
    let port = free_port();
    let srv = support::start(
        Target::Zkrs,
        &format!("admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n{extra}"),
    );
    (srv, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// `GET path` with an `Authorization` header when `auth` is given.
fn get(admin: SocketAddr, path: &str, auth: Option<&str>) -> Answer {
    let headers: Vec<(&str, String)> = auth.map(|a| ("Authorization", a.to_string())).into_iter().collect();
    exchange(admin, &request("GET", path, &headers, None))
}

/// `POST path` with `body`, and an `Authorization` header when `auth` is given.
fn post(admin: SocketAddr, path: &str, auth: Option<&str>, body: &[u8]) -> Answer {
    let mut headers: Vec<(&str, String)> =
        auth.map(|a| ("Authorization", a.to_string())).into_iter().collect();
    headers.push(("Content-Type", "application/octet-stream".into()));
    exchange(admin, &request("POST", path, &headers, Some(body)))
}

/// A client authenticated as `admin:pw` (who sees the root's digest ACL unmasked).
fn admin_client(srv: &ServerProc) -> RawClient {
    let mut c = RawClient::connect(srv.addr(), 30_000);
    assert_eq!(c.add_auth("digest", b"admin:pw"), Some(ErrorCode::Ok));
    c
}

/// `lgif`'s lines as a map.
fn lgif(srv: &ServerProc) -> BTreeMap<String, i64> {
    let text = srv.four_letter("lgif");
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap_or_else(|| panic!("not key\\tvalue: {l:?} in {text}"));
            (k.to_string(), v.parse().unwrap_or_else(|_| panic!("{l:?}")))
        })
        .collect()
}

fn digest_acl(perms: i32, user_password: &str) -> Acl {
    Acl { perms, id: Id { scheme: "digest".into(), id: zk_tree::digest_id(user_password).unwrap() } }
}

/// Gives `admin:pw` ALL on the root, and `world:anyone` READ alone (which proves nothing to the
/// `snapshot` command either, review finding 5); `c` is authenticated as `admin:pw` from then on.
fn root_for_admin(c: &mut RawClient) {
    let world_read = Acl { perms: perms::READ, id: Id { scheme: "world".into(), id: "anyone".into() } };
    admin_sets_root_acl(c, vec![digest_acl(perms::ALL, "admin:pw"), world_read]);
}

/// Authenticates `c` as `admin:pw` and sets the root's ACL to `acl`.
fn admin_sets_root_acl(c: &mut RawClient, acl: Vec<Acl>) {
    assert_eq!(c.add_auth("digest", b"admin:pw"), Some(ErrorCode::Ok));
    let r = c.call(Request::SetAcl(SetAclRequest { path: "/".into(), acl, version: -1 }));
    assert_eq!(r.err(), ErrorCode::Ok);
}

fn create(c: &mut RawClient, path: &str, data: &[u8], mode: CreateMode) {
    let r = c.create(path, data, mode);
    assert_eq!(r.err(), ErrorCode::Ok, "create {path}");
}

#[test]
fn csnp_takes_a_snapshot_and_lgif_shows_it() {
    let (srv, admin) = zkrs_with_admin("snapshot.minRequestIntervalSeconds=0\n");
    let mut c = RawClient::connect(srv.addr(), 30_000);
    for i in 0..20 {
        create(&mut c, &format!("/n{i}"), b"v", CreateMode::Persistent);
    }
    let before = lgif(&srv);
    let keys: Vec<&str> = before.keys().map(String::as_str).collect();
    let mut want = vec![
        "first_log_idx",
        "first_log_term",
        "last_log_idx",
        "last_log_term",
        "last_committed_log_idx",
        "leader_committed_log_idx",
        "target_committed_log_idx",
        "last_snapshot_idx",
    ];
    want.sort_unstable();
    assert_eq!(keys, want, "ClickHouse Keeper's keys");
    let last = before["last_committed_log_idx"];
    assert!(before["first_log_idx"] >= 1 && before["first_log_idx"] <= last, "{before:?}");
    assert_eq!(before["last_log_idx"], last, "standalone: applied once durable: {before:?}");
    assert_eq!(before["leader_committed_log_idx"], last);
    assert_eq!(before["last_log_term"], last >> 32, "terms are the zxids' epochs");
    assert!(before["last_snapshot_idx"] < last, "no snapshot of the 20 creates yet: {before:?}");

    // csnp answers the zxid it snapshots at, as Keeper answers the log index.
    let answer = srv.four_letter("csnp");
    let zxid: i64 =
        answer.lines().next().and_then(|l| l.parse().ok()).unwrap_or_else(|| panic!("{answer:?}"));
    assert_eq!(zxid, last, "{answer}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while lgif(&srv)["last_snapshot_idx"] != zxid {
        assert!(Instant::now() < deadline, "lgif never showed the snapshot at {zxid}: {:?}", lgif(&srv));
        std::thread::sleep(Duration::from_millis(50));
    }
    let names: Vec<String> =
        std::fs::read_dir(srv.dir.path().join("data").join(zk_log::snapshot::SNAP_DIR_NAME))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    assert!(names.contains(&zk_log::snapshot::snapshot_name(zxid)), "{names:?}");

    // The AdminServer's forms: JSON with the same figures, for a caller holding ALL on `/`
    // (review finding 2: a GET anyone can send, or a browser be made to, wrote a snapshot).
    create(&mut c, "/after", b"", CreateMode::Persistent);
    for path in ["/commands/csnp", "/commands/create_snapshot"] {
        let a = get(admin, path, None);
        assert_eq!(a.status, 401, "{path}: {a:?}");
    }
    admin_sets_root_acl(&mut c, vec![digest_acl(perms::ALL, "admin:pw")]);
    let a = get(admin, "/commands/csnp", Some("digest admin:pw"));
    assert_eq!(a.status, 200, "{a:?}");
    let j = a.json();
    assert_eq!(j["command"], "create_snapshot");
    assert_eq!(j["error"], serde_json::Value::Null);
    let z = j["last_committed_log_idx"].as_i64().expect("zxid");
    assert_eq!(j["zxid"], format!("0x{z:x}"));
    assert!(z > zxid, "{j}");
    let info = get(admin, "/commands/log_info", None).json();
    assert_eq!(info["command"], "log_info");
    assert_eq!(info["last_committed_log_idx"].as_i64(), Some(z), "{info}");
    let alias = get(admin, "/commands/lgif", None).json();
    assert_eq!(alias["command"], "log_info");

    // Gated by the whitelist like every other word.
    let default_words = support::start_with_default_words(Target::Zkrs, "");
    for word in ["csnp", "lgif"] {
        let text = default_words.four_letter(word);
        assert!(text.contains("is not executed because it is not in the whitelist"), "{word}: {text}");
    }
}

/// Review finding 2: requests in a loop start at most one snapshot per
/// `snapshot.minRequestIntervalSeconds` (default 60), and create_snapshot over HTTP shares the
/// `snapshot` command's limiter.
#[test]
fn requests_start_at_most_one_snapshot_per_interval() {
    let (srv, admin) = zkrs_with_admin("admin.rateLimiterIntervalInMS=60000\n");
    let mut c = RawClient::connect(srv.addr(), 30_000);
    create(&mut c, "/n", b"v", CreateMode::Persistent);
    let first = srv.four_letter("csnp");
    let zxid: i64 = first.trim().parse().unwrap_or_else(|_| panic!("a zxid alone: {first:?}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while lgif(&srv)["last_snapshot_idx"] != zxid {
        assert!(Instant::now() < deadline, "never written: {:?}", lgif(&srv));
        std::thread::sleep(Duration::from_millis(50));
    }
    create(&mut c, "/m", b"v", CreateMode::Persistent);
    let second = srv.four_letter("csnp");
    assert_eq!(
        second,
        "Failed to schedule snapshot creation task.\n\
         a snapshot was started less than snapshot.minRequestIntervalSeconds ago\n"
    );
    admin_sets_root_acl(&mut c, vec![digest_acl(perms::ALL, "admin:pw")]);
    let a = get(admin, "/commands/create_snapshot", Some("digest admin:pw"));
    assert_eq!(a.status, 200, "{a:?}");
    let err = a.json()["error"].as_str().map(str::to_owned).unwrap_or_default();
    assert!(err.contains("minRequestIntervalSeconds"), "{a:?}");
    let again = get(admin, "/commands/csnp", Some("digest admin:pw"));
    assert_eq!(again.status, 429, "one per admin.rateLimiterIntervalInMS: {again:?}");
    assert_eq!(again.json(), serde_json::json!({"command": "create_snapshot", "error": null}));
    let log = support::server_log(srv.dir.path());
    assert_eq!(log.matches("taking a snapshot at zxid").count(), 1, "{log}");
}

#[test]
fn csnp_during_a_snapshot_answers_that_one_and_starts_none() {
    // Written at 1 MB/s, or twice the log's rate since the start: about 4 MB/s here, so the
    // snapshot of 9 MB takes a couple of seconds. No snapshot on a quiet period.
    let srv = support::start(Target::Zkrs, "snapshot.writeMBPerSecond=1\nsnapshot.idleSeconds=0\n");
    let mut c = RawClient::connect(srv.addr(), 30_000);
    let big = vec![b'x'; 900_000];
    for i in 0..10 {
        create(&mut c, &format!("/big{i}"), &big, CreateMode::Persistent);
    }
    std::thread::sleep(Duration::from_secs(4));
    let first = srv.four_letter("csnp");
    let second = srv.four_letter("csnp");
    let zxid: i64 = first.trim().parse().unwrap_or_else(|_| panic!("a zxid alone: {first:?}"));
    let mut lines = second.lines();
    assert_eq!(lines.next(), Some(zxid.to_string().as_str()), "{second}");
    assert_eq!(
        lines.next(),
        Some(format!("A snapshot at zxid 0x{zxid:x} is already under way; no other was started.").as_str())
    );
    assert!(lgif(&srv)["last_snapshot_idx"] < zxid, "still being written: the test shows nothing otherwise");
    let deadline = Instant::now() + Duration::from_secs(30);
    while lgif(&srv)["last_snapshot_idx"] != zxid {
        assert!(Instant::now() < deadline, "never written: {:?}", lgif(&srv));
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = support::server_log(srv.dir.path());
    assert_eq!(log.matches(&format!("taking a snapshot at zxid 0x{zxid:x}")).count(), 1, "{log}");
}

#[test]
fn every_member_of_an_ensemble_serves_the_same_snapshot_and_restores_none() {
    let (e, ports) = support::ensemble::Ensemble::start_with_admin(3, "");
    let leader = e.wait_for_leader();
    // Every session first: a session's creation is a transaction too.
    let mut members: Vec<RawClient> = (0..ports.len()).map(|i| e.client(i)).collect();
    let c = &mut members[leader];
    root_for_admin(c);
    create(c, "/app", b"cfg", CreateMode::Persistent);
    for i in 0..50 {
        create(c, &format!("/app/n{i}"), format!("{i}").as_bytes(), CreateMode::Persistent);
    }
    let last = c.exists("/app/n49", false).decode::<ExistsResponse>().stat.mzxid;
    let mut served = Vec::new();
    let mut leader_file = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let m = &mut members[i];
        let deadline = Instant::now() + Duration::from_secs(20);
        while m.exists("/app/n49", false).err() != ErrorCode::Ok {
            assert!(Instant::now() < deadline, "member {i} never saw the writes");
            std::thread::sleep(Duration::from_millis(20));
        }
        let admin = SocketAddr::from(([127, 0, 0, 1], *port));
        let info = get(admin, "/commands/lgif", None).json();
        assert!(info["last_committed_log_idx"].as_i64() >= Some(last), "member {i}: {info}");
        let a = get(admin, "/commands/snapshot", Some("digest admin:pw"));
        assert_eq!(a.status, 200, "member {i}: {a:?}");
        let zxid = i64::from_str_radix(a.header("last_zxid").unwrap().trim_start_matches("0x"), 16).unwrap();
        assert!(zxid >= last, "member {i} at 0x{zxid:x}, the writes end at 0x{last:x}");
        served.push((zxid, nodes_of(&a.body)));
        if i == leader {
            leader_file = a.body.clone();
        }
    }
    for (i, s) in served.iter().enumerate().skip(1) {
        assert_eq!(s.0, served[0].0, "member {i}'s zxid");
        for (path, node) in &served[0].1 {
            let theirs = s.1.get(path);
            if path == "/zookeeper/config" {
                // Each member writes it from its own configuration at start (reconfig off), as
                // Apache's do: the same text, its own mtime.
                assert_eq!(theirs.map(|n| &n.0), Some(&node.0), "member {i}'s {path}");
                continue;
            }
            assert_eq!(theirs, Some(node), "member {i}'s {path}, beside member 0's");
        }
        assert_eq!(s.1.len(), served[0].1.len(), "member {i}'s node count");
    }
    assert_eq!(served[0].1.keys().filter(|p| p.starts_with("/app/")).count(), 50);

    // No member restores one (a deliberate difference: one member's tree replaced under its
    // peers would diverge from theirs); the tree stays as it was.
    for (i, port) in ports.iter().enumerate() {
        let admin = SocketAddr::from(([127, 0, 0, 1], *port));
        let a = post(admin, "/commands/restore", Some("digest admin:pw"), &leader_file);
        assert_eq!(a.status, 500, "member {i}: {a:?}");
        assert!(a.json()["error"].as_str().is_some_and(|e| e.contains("standalone")), "member {i}: {a:?}");
    }
    let c = &mut members[leader];
    assert_eq!(c.exists("/app/n49", false).err(), ErrorCode::Ok, "the leader's clients are still served");

    // An ensemble's tree keeps Apache's digest, and the file carries it: Apache 3.8 loads the
    // leader's snapshot and finds the digest it computes equal to the recorded one.
    support::assert_apache_installed();
    let apache = support::start_in(Target::Apache, apache_dir_with(&leader_file, served[0].0), "");
    assert_eq!(apache.mntr_value("zk_digest_mismatches_count"), "0");
    let log = support::server_log(apache.dir.path());
    assert!(!log.to_ascii_lowercase().contains("digest mismatch"), "{log}");
    let mut ac = RawClient::connect(apache.addr(), 30_000);
    let got = walk(&mut ac);
    assert_eq!(got.keys().filter(|p| p.starts_with("/app/")).count(), 50);
    assert_eq!(got["/app/n7"].data.as_deref(), Some(&b"7"[..]));

    // And it does compare: the same file with another digest (its seals made again) counts a
    // mismatch.
    let apache =
        support::start_in(Target::Apache, apache_dir_with(&with_other_digest(&leader_file), served[0].0), "");
    assert_eq!(apache.mntr_value("zk_digest_mismatches_count"), "1");
}

/// `file` (an Apache snapshot ending digest, seal, last zxid, seal) with its digest changed and
/// the two seals after it computed again.
fn with_other_digest(file: &[u8]) -> Vec<u8> {
    const SEAL: usize = 8 + 4 + 1;
    let mut f = file.to_vec();
    let last_seal = f.len() - SEAL;
    let digest_seal = last_seal - 8 - SEAL;
    f[digest_seal - 1] ^= 0x01;
    for at in [digest_seal, last_seal] {
        let sum = i64::from(zk_log::apache::Adler32::of(&f[..at]));
        f[at..at + 8].copy_from_slice(&sum.to_be_bytes());
    }
    f
}

#[test]
fn snapshot_needs_all_on_the_root_and_is_rate_limited() {
    let (srv, admin) = zkrs_with_admin("admin.rateLimiterIntervalInMS=1500\n");
    let mut c = RawClient::connect(srv.addr(), 30_000);
    assert_eq!(c.add_auth("digest", b"admin:pw"), Some(ErrorCode::Ok));
    create(&mut c, "/a", b"x", CreateMode::Persistent);
    // The root: ALL for admin; every bit but ADMIN for reader; nothing for the rest.
    let root_acl = vec![
        digest_acl(perms::ALL, "admin:pw"),
        digest_acl(perms::READ | perms::WRITE | perms::CREATE | perms::DELETE, "reader:pw"),
    ];
    let r = c.call(Request::SetAcl(SetAclRequest { path: "/".into(), acl: root_acl, version: -1 }));
    assert_eq!(r.err(), ErrorCode::Ok);

    let refused = |auth: Option<&str>, status: u16, error: &str| {
        let a = get(admin, "/commands/snapshot", auth);
        assert_eq!(a.status, status, "{auth:?}: {a:?}");
        assert!(a.head.contains("content-type: application/json"), "{auth:?}: {}", a.head);
        let j = a.json();
        assert_eq!((j["command"].as_str(), j["error"].as_str()), (Some("snapshot"), Some(error)), "{auth:?}");
        assert!(a.header("last_zxid").is_none());
    };
    refused(None, 401, "Auth info is missing for the command");
    refused(Some("Basic YWRtaW46cHc="), 401, "Not authenticated");
    refused(Some("digest"), 401, "Not authenticated");
    refused(Some("x509"), 401, "Not authenticated");
    refused(Some("digest reader:pw"), 403, "Not authorized");
    refused(Some("digest nobody:pw"), 403, "Not authorized");
    refused(Some("ip"), 403, "Not authorized");

    let a = get(admin, "/commands/snapshot", Some("digest admin:pw"));
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.head.contains("content-type: application/octet-stream"), "{}", a.head);
    let size: usize = a.header("snapshot_size").and_then(|s| s.parse().ok()).expect("snapshot_size");
    assert_eq!(size, a.body.len());
    let last_zxid = a.header("last_zxid").expect("last_zxid");
    let zxid = i64::from_str_radix(last_zxid.trim_start_matches("0x"), 16).expect("hex");
    let mut paths = Vec::new();
    let snap = zk_log::apache::read_snapshot_bytes("served".into(), Bytes::from(a.body.clone()), |n| {
        assert!(n.stat.mzxid <= zxid && n.stat.czxid <= zxid, "{} after 0x{zxid:x}", n.path);
        paths.push(n.path);
    })
    .expect("Apache's snapshot format");
    assert!(paths.contains(&"/a".to_string()), "{paths:?}");
    assert!(
        snap.acls.iter().any(|(_, list)| list.iter().any(|acl| acl.perms == perms::ALL)),
        "{:?}",
        snap.acls
    );

    // Once per interval, then again; `snap` is its alias, streaming=false answers the headers.
    let again = get(admin, "/commands/snapshot", Some("digest admin:pw"));
    assert_eq!(again.status, 429, "{again:?}");
    assert_eq!(again.json(), serde_json::json!({"command": "snapshot", "error": null}));
    std::thread::sleep(Duration::from_millis(1600));
    let headers_only = get(admin, "/commands/snap?streaming=false", Some("digest admin:pw"));
    assert_eq!(headers_only.status, 200, "{headers_only:?}");
    assert_eq!(headers_only.json(), serde_json::json!({"command": "snapshot", "error": null}));
    assert!(headers_only.header("snapshot_size").is_some() && headers_only.header("last_zxid").is_some());
    // A refused caller does not use up the interval's one request.
    std::thread::sleep(Duration::from_millis(1600));
    refused(Some("digest reader:pw"), 403, "Not authorized");
    assert_eq!(get(admin, "/commands/snapshot?streaming=false", Some("digest admin:pw")).status, 200);

    // The `ip` scheme: the TCP peer's address, granted ALL on the root.
    let loopback = Acl { perms: perms::ALL, id: Id { scheme: "ip".into(), id: "127.0.0.1".into() } };
    let acl = vec![digest_acl(perms::ALL, "admin:pw"), loopback];
    let r = c.call(Request::SetAcl(SetAclRequest { path: "/".into(), acl, version: -1 }));
    assert_eq!(r.err(), ErrorCode::Ok);
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(get(admin, "/commands/snapshot?streaming=false", Some("ip")).status, 200);

    // Only a wrong password counts towards a peer's failed authorizations: requests without
    // credentials (a web page can make an operator's browser send them) lock nobody out.
    std::thread::sleep(Duration::from_millis(1600));
    for _ in 0..25 {
        assert_eq!(get(admin, "/commands/snapshot", None).status, 401);
    }
    assert_eq!(get(admin, "/commands/snapshot?streaming=false", Some("digest admin:pw")).status, 200);
    // Three wrong digests above (reader twice, nobody once) already count in this window.
    for _ in 0..17 {
        assert_eq!(get(admin, "/commands/snapshot", Some("digest admin:guess")).status, 403);
    }
    let blocked = get(admin, "/commands/snapshot?streaming=false", Some("digest admin:pw"));
    assert_eq!(blocked.status, 429, "{blocked:?}");
    assert_eq!(blocked.json()["error"].as_str(), Some("Too many failed authorizations"));
}

/// Review finding 3: the copy of the tree the command rebuilds doubles the tree's memory; under
/// the memory brake (or when twice the tree would pass its limit) it answers 503.
#[test]
fn no_copy_of_the_tree_under_the_memory_brake() {
    let (srv, admin) =
        zkrs_with_admin("zkrs.treeMemorySoftLimitBytes=64k\nadmin.rateLimiterIntervalInMS=0\n");
    let mut c = RawClient::connect(srv.addr(), 30_000);
    admin_sets_root_acl(&mut c, vec![digest_acl(perms::ALL, "admin:pw")]);
    let a = get(admin, "/commands/snapshot?streaming=false", Some("digest admin:pw"));
    assert_eq!(a.status, 200, "an empty tree fits twice: {a:?}");
    let value = vec![b'v'; 1000];
    let mut n = 0;
    while c.create(&format!("/n{n}"), &value, CreateMode::Persistent).err() == ErrorCode::Ok {
        n += 1;
        assert!(n < 1000, "the brake never came on");
    }
    assert_eq!(srv.mntr_value("zk_memory_brake"), "1");
    let a = get(admin, "/commands/snapshot", Some("digest admin:pw"));
    assert_eq!(a.status, 503, "{a:?}");
    let j = a.json();
    assert_eq!(j["command"], "snapshot");
    assert!(j["error"].as_str().is_some_and(|e| e.contains("zkrs.treeMemorySoftLimitBytes")), "{j}");
    assert!(a.header("last_zxid").is_none());
}

#[test]
fn a_disabled_snapshot_command_is_unavailable_after_authentication() {
    let (srv, admin) = zkrs_with_admin("admin.snapshot.enabled=false\n");
    let a = get(admin, "/commands/snapshot", None);
    assert_eq!(a.status, 401, "authentication comes first, as in Apache: {a:?}");
    // The root is world:anyone ALL, which Apache takes as ALL for any authenticated caller (even
    // `ip`, which needs no secret); zkrs does not (review finding 5).
    for auth in ["digest someone:pw", "ip"] {
        let a = get(admin, "/commands/snapshot", Some(auth));
        assert_eq!(a.status, 403, "{auth}: {a:?}");
    }
    let mut c = RawClient::connect(srv.addr(), 30_000);
    root_for_admin(&mut c);
    let a = get(admin, "/commands/snapshot", Some("digest admin:pw"));
    assert_eq!(a.status, 503, "{a:?}");
    assert_eq!(a.json(), serde_json::json!({"command": "snapshot", "error": null}));
}

/// Apache 3.9's `restore`: the tree a `snapshot` served is put back in place of a tree changed
/// since, node for node and stat for stat, with sequential names carrying on where they were;
/// every client connection is closed; writes carry on above every zxid used before (the next
/// epoch); and the restored tree is durable before the answer: a kill -9 right after it brings
/// back the restored tree and the writes made since, not the tree from before.
#[test]
fn a_restored_tree_is_the_snapshots_and_outlives_a_kill() {
    let (mut srv, admin) = zkrs_with_admin(
        "admin.rateLimiterIntervalInMS=0
snapshot.minRequestIntervalSeconds=0
",
    );
    let mut c = RawClient::connect(srv.addr(), 30_000);
    root_for_admin(&mut c);
    create(&mut c, "/a", b"one", CreateMode::Persistent);
    create(&mut c, "/a/b", b"two", CreateMode::Persistent);
    create(&mut c, "/q", b"", CreateMode::Persistent);
    for _ in 0..3 {
        create(&mut c, "/q/seq-", b"s", CreateMode::PersistentSequential);
    }
    let before = walk(&mut c);
    let snap = get(admin, "/commands/snapshot", Some("digest admin:pw"));
    assert_eq!(snap.status, 200, "{snap:?}");
    let snap_zxid =
        i64::from_str_radix(snap.header("last_zxid").unwrap().trim_start_matches("0x"), 16).unwrap();

    // The tree moves on.
    assert_eq!(c.set_data("/a", b"changed", -1).err(), ErrorCode::Ok);
    assert_eq!(
        c.call(Request::Delete(DeleteRequest { path: "/a/b".into(), version: -1 })).err(),
        ErrorCode::Ok
    );
    create(&mut c, "/x", b"", CreateMode::Persistent);
    create(&mut c, "/q/seq-", b"s", CreateMode::PersistentSequential);
    let newest = c.exists("/q", false).decode::<ExistsResponse>().stat.pzxid;
    assert_ne!(walk(&mut c), before);

    let r = post(admin, "/commands/restore", Some("digest admin:pw"), &snap.body);
    assert_eq!(r.status, 200, "{r:?}");
    let j = r.json();
    assert_eq!(j["command"], "restore");
    assert_eq!(j["error"], serde_json::Value::Null);
    assert_eq!(j["last_zxid"].as_i64(), Some(snap_zxid), "{j}");
    let after_zxid = j["zxid_after_restore"].as_i64().expect("zxid_after_restore");
    assert!(after_zxid > newest, "{after_zxid:#x}: past every zxid used, {newest:#x}");
    assert_eq!(after_zxid >> 32, newest >> 32, "the same epoch");
    assert!(c.is_closed_within(Duration::from_secs(5)), "every client connection is closed");

    let mut c2 = admin_client(&srv);
    assert_eq!(walk(&mut c2), before, "the tree the snapshot holds");
    // Sequential names carry on from the restored parent's counter.
    let made = c2.create("/q/seq-", b"s", CreateMode::PersistentSequential);
    assert_eq!(made.err(), ErrorCode::Ok);
    assert_eq!(made.decode::<CreateResponse>().path, "/q/seq-0000000003");
    create(&mut c2, "/after", b"new", CreateMode::Persistent);
    let st = c2.exists("/after", false).decode::<ExistsResponse>().stat;
    assert!(st.czxid > after_zxid, "{:#x} after {after_zxid:#x}", st.czxid);

    srv.restart();
    let mut c3 = admin_client(&srv);
    let got = walk(&mut c3);
    assert_eq!(got["/a"].data.as_deref(), Some(&b"one"[..]), "the restored data, not the changed");
    assert!(got.contains_key("/a/b") && got.contains_key("/q/seq-0000000003") && got.contains_key("/after"));
    assert!(!got.contains_key("/x"), "a node made after the snapshot, before the restore, is gone");
}

/// What a `restore` is refused with, in Apache's order, and that a refused one changes nothing:
/// GET (405), no credentials (401), credentials without ALL on `/` (403), an empty body (400),
/// one past `admin.restore.maxBytes` (413), a damaged snapshot (500, the tree unchanged); with
/// Apache's default interval a second restore within it (429); `admin.restore.enabled=false`
/// (503 once authorized).
#[test]
fn a_restore_is_refused_in_apaches_order_and_changes_nothing() {
    let (srv, admin) = zkrs_with_admin(
        "admin.rateLimiterIntervalInMS=0
snapshot.minRequestIntervalSeconds=0
admin.restore.maxBytes=64k
",
    );
    let mut c = RawClient::connect(srv.addr(), 30_000);
    root_for_admin(&mut c);
    create(&mut c, "/keep", b"k", CreateMode::Persistent);
    let snap = get(admin, "/commands/snapshot", Some("digest admin:pw"));
    assert_eq!(snap.status, 200, "{snap:?}");
    create(&mut c, "/later", b"l", CreateMode::Persistent);
    let before = walk(&mut c);

    let g = get(admin, "/commands/restore", Some("digest admin:pw"));
    assert_eq!(g.status, 405, "{g:?}");
    let a = post(admin, "/commands/restore", None, &snap.body);
    assert_eq!(a.status, 401, "{a:?}");
    assert_eq!(a.json()["error"].as_str(), Some("Auth info is missing for the command"));
    let a = post(admin, "/commands/rest", Some("digest someone:pw"), &snap.body);
    assert_eq!(a.status, 403, "{a:?}");
    assert_eq!(a.json(), serde_json::json!({"command": "rest", "error": "Not authorized"}));
    let a = post(admin, "/commands/restore", Some("digest admin:pw"), b"");
    assert_eq!(a.status, 400, "{a:?}");
    let a = post(admin, "/commands/restore", Some("digest admin:pw"), &vec![0u8; 100_000]);
    assert_eq!(a.status, 413, "{a:?}");
    assert!(a.json()["error"].as_str().is_some_and(|e| e.contains("admin.restore.maxBytes")), "{a:?}");
    let mut damaged = snap.body.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 0x20;
    let a = post(admin, "/commands/restore", Some("digest admin:pw"), &damaged);
    assert_eq!(a.status, 500, "{a:?}");
    assert!(a.json()["error"].as_str().is_some(), "{a:?}");
    let a = post(admin, "/commands/restore", Some("digest admin:pw"), b"not a snapshot at all");
    assert_eq!(a.status, 500, "{a:?}");
    assert!(!c.is_closed_within(Duration::from_millis(200)), "nothing was restored: no client was closed");
    assert_eq!(walk(&mut c), before, "refused restores change nothing");

    // Apache's default interval: one restore per five minutes.
    let (srv2, admin2) = zkrs_with_admin(
        "snapshot.minRequestIntervalSeconds=0
",
    );
    let mut c2 = RawClient::connect(srv2.addr(), 30_000);
    root_for_admin(&mut c2);
    let a = post(admin2, "/commands/restore", Some("digest admin:pw"), &snap.body);
    assert_eq!(a.status, 200, "{a:?}");
    let a = post(admin2, "/commands/restore", Some("digest admin:pw"), &snap.body);
    assert_eq!(a.status, 429, "{a:?}");
    assert_eq!(a.json(), serde_json::json!({"command": "restore", "error": null}));

    let (srv3, admin3) = zkrs_with_admin(
        "admin.restore.enabled=false
",
    );
    let a = post(admin3, "/commands/restore", Some("digest admin:pw"), &snap.body);
    assert_eq!(a.status, 403, "authorization comes first: {a:?}");
    let mut c3 = RawClient::connect(srv3.addr(), 30_000);
    root_for_admin(&mut c3);
    let a = post(admin3, "/commands/restore", Some("digest admin:pw"), &snap.body);
    assert_eq!(a.status, 503, "{a:?}");
    assert_eq!(a.json(), serde_json::json!({"command": "restore", "error": null}));
}

/// The served snapshot's nodes: path to (data, stat).
fn nodes_of(file: &[u8]) -> BTreeMap<String, (Option<Bytes>, StatPersisted)> {
    let mut out = BTreeMap::new();
    zk_log::apache::read_snapshot_bytes("served".into(), Bytes::copy_from_slice(file), |n| {
        out.insert(n.path, (n.data, n.stat));
    })
    .expect("Apache's snapshot format");
    out
}

/// A data directory holding `file` as Apache's `version-2/snapshot.<zxid>`.
fn apache_dir_with(file: &[u8], zxid: i64) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("zkrs-snapcmd-").tempdir().unwrap();
    let v2 = dir.path().join("data").join("version-2");
    std::fs::create_dir_all(&v2).unwrap();
    std::fs::write(v2.join(format!("snapshot.{zxid:x}")), file).unwrap();
    dir
}

fn import(apache_data: &Path, dest: &Path) {
    let out = std::process::Command::new(support::zkrs_binary())
        .arg("import")
        .arg(apache_data)
        .arg(apache_data)
        .arg(dest)
        .output()
        .expect("run zkrs-server import");
    assert!(
        out.status.success(),
        "import failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_served_snapshot_is_the_tree_at_its_zxid_and_loads_in_zkrs_and_apache() {
    let (srv, admin) = zkrs_with_admin("admin.rateLimiterIntervalInMS=0\n");
    let mut c = RawClient::connect(srv.addr(), 30_000);
    // ALL on the root for loopback callers (`ip`): every server the file is loaded into then
    // shows the walks below the same root ACL, unmasked.
    let loopback = Acl { perms: perms::ALL, id: Id { scheme: "ip".into(), id: "127.0.0.1".into() } };
    let r = c.call(Request::SetAcl(SetAclRequest { path: "/".into(), acl: vec![loopback], version: -1 }));
    assert_eq!(r.err(), ErrorCode::Ok);
    create(&mut c, "/a", b"top", CreateMode::Persistent);
    let world_read = Acl { perms: perms::READ, id: Id { scheme: "world".into(), id: "anyone".into() } };
    assert_eq!(c.create_with_acl("/a/b", b"ro", vec![world_read]).err(), ErrorCode::Ok);
    create(&mut c, "/x", b"", CreateMode::Persistent);
    create(&mut c, "/x/y", b"", CreateMode::Persistent);
    create(&mut c, "/x/y/z", &vec![7u8; 200_000], CreateMode::Persistent);
    for _ in 0..3 {
        create(&mut c, "/a/seq-", b"q", CreateMode::PersistentSequential);
    }
    assert_eq!(c.set_data("/a", b"top2", 0).err(), ErrorCode::Ok);
    create(&mut c, "/eph", b"e", CreateMode::Ephemeral);
    create(&mut c, "/load", b"", CreateMode::Persistent);

    // Creates under /load while the snapshot is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, made, addr) = (stop.clone(), made.clone(), srv.addr());
        std::thread::spawn(move || {
            let mut w = RawClient::connect(addr, 30_000);
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(w.create("/load/n-", b"w", CreateMode::PersistentSequential).err(), ErrorCode::Ok);
                made.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    while made.load(Ordering::Relaxed) < 200 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let a = get(admin, "/commands/snapshot", Some("ip"));
    let during = made.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    let zxid = i64::from_str_radix(a.header("last_zxid").unwrap().trim_start_matches("0x"), 16).unwrap();

    // Exactly the tree at `zxid`: nothing later, and /load's children are the first creates,
    // every one, numbered without a gap and counted by its cversion.
    let nodes = nodes_of(&a.body);
    for (path, (_, stat)) in &nodes {
        assert!(
            stat.czxid <= zxid && stat.mzxid <= zxid && stat.pzxid <= zxid,
            "{path}: {stat:?} after 0x{zxid:x}"
        );
    }
    let kids: Vec<&String> = nodes.keys().filter(|p| p.starts_with("/load/")).collect();
    let load = &nodes["/load"].1;
    assert_eq!(load.cversion as usize, kids.len(), "/load's cversion counts its children");
    for (i, k) in kids.iter().enumerate() {
        assert_eq!(**k, format!("/load/n-{i:010}"), "children numbered without a gap");
    }
    let newest = kids.iter().map(|k| nodes[*k].1.czxid).max().unwrap_or(0);
    assert_eq!(load.pzxid, newest.max(load.czxid), "/load's pzxid is its newest child's");
    assert!(kids.len() as u64 >= 200 && kids.len() as u64 <= during, "{} of {during}", kids.len());
    assert!(nodes.contains_key("/eph") && nodes["/x/y/z"].0.as_ref().map(|d| d.len()) == Some(200_000));
    eprintln!(
        "snapshot at 0x{zxid:x} under writes: {} nodes, {} of the {} creates under /load acknowledged by the time it was served",
        nodes.len(),
        kids.len(),
        during
    );

    // With the writes stopped, a second snapshot is the tree the server serves.
    let served = walk(&mut c);
    let a = get(admin, "/commands/snapshot", Some("ip"));
    assert_eq!(a.status, 200, "{a:?}");
    let zxid = i64::from_str_radix(a.header("last_zxid").unwrap().trim_start_matches("0x"), 16).unwrap();

    // zkrs-server import, then a zkrs server on what it wrote.
    let from = apache_dir_with(&a.body, zxid);
    let dest = tempfile::Builder::new().prefix("zkrs-snapcmd-imported-").tempdir().unwrap();
    import(&from.path().join("data"), &dest.path().join("data"));
    let imported = support::start_in(Target::Zkrs, dest, "");
    let mut ic = RawClient::connect(imported.addr(), 30_000);
    let got = walk(&mut ic);
    assert_same(&served, &got, "zkrs after import");

    // Apache 3.8 loads the same file as its own snapshot.
    support::assert_apache_installed();
    let apache = support::start_in(Target::Apache, apache_dir_with(&a.body, zxid), "");
    let mut ac = RawClient::connect(apache.addr(), 30_000);
    let got = walk(&mut ac);
    assert_same(&served, &got, "Apache 3.8 on the served snapshot");
    eprintln!("{} nodes served alike by the live server, zkrs after import and Apache 3.8", served.len());
    drop(c);
}

fn assert_same(
    want: &BTreeMap<String, support::tree::Served>,
    got: &BTreeMap<String, support::tree::Served>,
    who: &str,
) {
    let paths: std::collections::BTreeSet<&String> = want.keys().chain(got.keys()).collect();
    for p in paths {
        assert_eq!(got.get(p), want.get(p), "{who}: {p}");
    }
}

#[test]
fn apache_38_has_no_snapshot_command() {
    support::assert_apache_installed();
    let port = free_port();
    let _apache = support::start(
        Target::Apache,
        &format!("admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n"),
    );
    let admin = SocketAddr::from(([127, 0, 0, 1], port));
    for auth in [None, Some("digest admin:pw")] {
        let a = get(admin, "/commands/snapshot", auth);
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(
            a.json(),
            serde_json::json!({"command": "snapshot", "error": "Unknown command: snapshot"}),
            "{auth:?}"
        );
    }
    let listing = get(admin, "/commands", None).text();
    assert!(!listing.contains("/commands/snapshot"), "{listing}");
    // Nor Keeper's words.
    let text = support::four_letter(SocketAddr::from(([127, 0, 0, 1], _apache.port)), "lgif");
    assert!(!text.contains("last_log_idx"), "{text}");
}
