//! Snapshots on the real process: taken every snapCount transactions without stopping writes,
//! only the newest autopurge.snapRetainCount kept, the log they cover purged, and a restart (also
//! after kill -9 in the middle of a snapshot) serving exactly what was acknowledged.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::*;
use zk_proto::*;

fn files(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| n.starts_with(prefix) && !n.ends_with(".tmp"));
    v.sort();
    v
}

#[test]
fn snapshots_bound_disk_and_restarts_load_them() {
    // Small segments so that purging has whole segments to remove.
    let mut server = start(Target::Zkrs, "snapCount=200\nautopurge.snapRetainCount=3\npreAllocSize=64");
    let data = server.dir.path().join("data");
    let snaps = data.join("zkrs-snap");
    let logs = data.join("zkrs-log");
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/s", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let mut acked = Vec::new();
    for round in 0..12 {
        for i in 0..150 {
            let path = format!("/s/r{round}-{i}");
            let r = c.create(&path, format!("{round}:{i}").as_bytes(), CreateMode::Persistent);
            assert_eq!(r.err(), ErrorCode::Ok);
            acked.push(path);
        }
        // Some updates and deletes too, so replay has more than creates to converge on.
        assert_eq!(c.set_data(&format!("/s/r{round}-0"), b"updated", 0).err(), ErrorCode::Ok);
        assert_eq!(c.delete(&format!("/s/r{round}-1"), -1).err(), ErrorCode::Ok);
        acked.retain(|p| p != &format!("/s/r{round}-1"));
    }
    // Snapshots are written in the background; wait for retention to settle.
    let deadline = Instant::now() + Duration::from_secs(20);
    while files(&snaps, "snapshot.").len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let kept = files(&snaps, "snapshot.");
    assert!(!kept.is_empty() && kept.len() <= 3, "retention keeps at most 3 snapshots: {kept:?}");

    server.restart();
    let log = server_log(server.dir.path());
    assert!(log.contains("loaded snapshot"), "restart loads the newest snapshot:\n{log}");
    let mut c = RawClient::connect(server.addr(), 30_000);
    for p in &acked {
        assert_eq!(c.exists(p, false).err(), ErrorCode::Ok, "{p} lost");
    }
    for round in 0..12 {
        let d: GetDataResponse = c.get_data(&format!("/s/r{round}-0"), false).decode();
        assert_eq!(d.data.as_deref(), Some(&b"updated"[..]));
        assert_eq!(d.stat.version, 1);
        assert_eq!(c.exists(&format!("/s/r{round}-1"), false).err(), ErrorCode::NoNode);
    }
    let kids: GetChildren2Response = c.children2("/s", false).decode();
    assert_eq!(kids.children.len(), acked.len());
    assert_eq!(kids.stat.num_children as usize, acked.len());
    // 12 * 152 + 1 creates/sets/deletes: the log must not hold them all any more.
    assert!(!files(&logs, "log.").is_empty());
}

/// Once no transaction has come for snapshot.idleSeconds, a snapshot of everything is taken (the
/// log since the last one holding at least a tenth of snapCount transactions), so that a restart
/// after kill -9 loads it and replays nothing.
#[test]
fn a_quiet_period_takes_a_snapshot_and_the_restart_replays_nothing() {
    let mut server = start(Target::Zkrs, "snapCount=1000\nsnapshot.idleSeconds=1");
    let snaps = server.dir.path().join("data").join("zkrs-snap");
    let mut c = RawClient::connect(server.addr(), 30_000);
    for i in 0..150 {
        assert_eq!(c.create(&format!("/q{i}"), b"x", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    // snapCount is far (a draw in 501..=1000), so only the quiet period can take one.
    let deadline = Instant::now() + Duration::from_secs(15);
    while files(&snaps, "snapshot.").is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    // The session's creation and the 150 creates: zxids 1 to 0x97.
    assert_eq!(files(&snaps, "snapshot."), vec!["snapshot.0000000000000097".to_string()]);
    server.restart();
    let log = server_log(server.dir.path());
    assert!(log.contains("loaded snapshot snapshot.0000000000000097"), "{log}");
    assert!(!log.contains("replayed "), "nothing to replay after the snapshot:\n{log}");
    let mut c = RawClient::connect(server.addr(), 30_000);
    for i in 0..150 {
        assert_eq!(c.exists(&format!("/q{i}"), false).err(), ErrorCode::Ok, "/q{i} lost");
    }
}

/// Runs 200 writes of 8 KiB (about 1.6 MiB of log, in 20 nodes) on a fresh server with snapCount
/// far away and the given snapSizeLimitInKb; returns the snapshots there are once `want` exist or
/// `wait` has passed.
fn snapshots_after_big_writes(size_limit_kb: i64, want: usize, wait: Duration) -> Vec<String> {
    let cfg = format!("snapCount=1000000\nsnapSizeLimitInKb={size_limit_kb}\npreAllocSize=64");
    let server = start(Target::Zkrs, &cfg);
    let snaps = server.dir.path().join("data").join("zkrs-snap");
    let mut c = RawClient::connect(server.addr(), 30_000);
    let value = vec![b'v'; 8 * 1024];
    assert_eq!(c.create("/big", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    for i in 0..200 {
        let path = format!("/big/n{}", i % 20);
        let r = if i < 20 {
            c.create(&path, &value, CreateMode::Persistent)
        } else {
            c.set_data(&path, &value, -1)
        };
        assert_eq!(r.err(), ErrorCode::Ok);
    }
    let deadline = Instant::now() + wait;
    while files(&snaps, "snapshot.").len() < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    files(&snaps, "snapshot.")
}

/// snapSizeLimitInKb triggers snapshots by log size when snapCount is far away: a few large
/// writes (well under snapCount transactions) still produce snapshots; with the limit off (0) the
/// same load takes none.
#[test]
fn snapshots_by_log_size() {
    let taken = snapshots_after_big_writes(256, 2, Duration::from_secs(20));
    assert!(taken.len() >= 2, "log size triggered snapshots: {taken:?}");
    let none = snapshots_after_big_writes(0, 1, Duration::from_millis(500));
    assert_eq!(none, Vec::<String>::new(), "no size trigger when off");
}

/// A newest snapshot damaged late in the file (so loading has built part of the tree from it
/// when the checksum fails) is skipped with a warning; the older snapshot plus the log serve
/// every acknowledged write.
#[test]
fn damaged_newest_snapshot_falls_back_to_the_older_one() {
    let mut server = start(Target::Zkrs, "snapCount=300\nautopurge.snapRetainCount=3");
    let snaps = server.dir.path().join("data").join("zkrs-snap");
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/d", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let value = vec![b'x'; 4000];
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    // Two snapshots, the newest several 1 MiB chunks long.
    let newest_len = |snaps: &std::path::Path| {
        files(snaps, "snapshot.")
            .last()
            .and_then(|f| std::fs::metadata(snaps.join(f)).ok())
            .map_or(0, |m| m.len())
    };
    while files(&snaps, "snapshot.").len() < 2 || newest_len(&snaps) < 3 << 20 {
        assert_eq!(c.create(&format!("/d/n{n}"), &value, CreateMode::Persistent).err(), ErrorCode::Ok);
        n += 1;
        assert!(Instant::now() < deadline, "two snapshots were never written");
    }
    // A few more, only in the log.
    for _ in 0..50 {
        assert_eq!(c.create(&format!("/d/n{n}"), &value, CreateMode::Persistent).err(), ErrorCode::Ok);
        n += 1;
    }
    drop(c);
    server.kill();
    let newest = snaps.join(files(&snaps, "snapshot.").pop().expect("a snapshot"));
    let mut bytes = std::fs::read(&newest).unwrap();
    let at = bytes.len() * 3 / 4;
    for b in &mut bytes[at..at + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&newest, bytes).unwrap();

    server.restart();
    let log = server_log(server.dir.path());
    assert!(log.contains("skipping snapshot"), "the damaged snapshot is reported:\n{log}");
    let mut c = RawClient::connect(server.addr(), 30_000);
    let kids: GetChildren2Response = c.children2("/d", false).decode();
    assert_eq!(kids.children.len(), n, "every acknowledged create is served");
}

#[test]
fn kill_9_during_snapshots_loses_nothing_acknowledged() {
    // In each of the log's append modes.
    for mode in ["pwrite", "mmap"] {
        kill_9_during_snapshots_in(mode);
    }
}

fn kill_9_during_snapshots_in(mode: &str) {
    let mut server = start(Target::Zkrs, &format!("snapCount=50\ntxnLog.appendMode={mode}"));
    let mut acked: Vec<(String, Vec<u8>)> = Vec::new();
    for round in 0..5 {
        let mut c = RawClient::connect(server.addr(), 30_000);
        let mut sent = Vec::new();
        for i in 0..400 {
            let path = format!("/k{round}-{i}");
            let data = format!("{round}/{i}").into_bytes();
            let req = Request::Create(CreateRequest {
                path: path.clone(),
                data: Some(bytes::Bytes::from(data.clone())),
                acl: support::client::open_acl(),
                flags: 0,
            });
            sent.push((c.send(&req), path, data));
        }
        for (n, (xid, path, data)) in sent.into_iter().enumerate() {
            if n == 150 + round * 40 {
                server.kill();
            }
            match c.recv(xid) {
                Some(r) => {
                    assert_eq!(r.err(), ErrorCode::Ok);
                    acked.push((path, data));
                }
                None => break,
            }
        }
        server.restart();
        let mut c = RawClient::connect(server.addr(), 30_000);
        for (p, d) in &acked {
            let r = c.get_data(p, false);
            assert_eq!(r.err(), ErrorCode::Ok, "round {round}: acknowledged {p} lost");
            assert_eq!(r.decode::<GetDataResponse>().data.as_deref(), Some(&d[..]));
        }
    }
}

/// `zkrs-server purge DATA_DIR DATA_LOG_DIR -n 3` on a stopped server keeps the newest 3
/// snapshots and everything acknowledged; on a running server it is refused (the directories are
/// locked), and fewer than 3 is refused as Apache's zkCleanup.sh refuses it.
#[test]
fn purge_command_keeps_newest_and_refuses_a_running_server() {
    let mut server = start(Target::Zkrs, "snapCount=100\nautopurge.snapRetainCount=50");
    let data = server.dir.path().join("data");
    let mut c = RawClient::connect(server.addr(), 30_000);
    for i in 0..1200 {
        assert_eq!(c.create(&format!("/p{i}"), b"v", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while files(&data.join("zkrs-snap"), "snapshot.").len() < 6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(files(&data.join("zkrs-snap"), "snapshot.").len() >= 6);
    let purge = |keep: &str| {
        std::process::Command::new(zkrs_binary())
            .args(["purge", data.to_str().unwrap(), data.to_str().unwrap(), "-n", keep])
            .output()
            .unwrap()
    };
    let running = purge("3");
    assert!(!running.status.success(), "purge must refuse while the server holds the directories");
    assert!(!purge("2").status.success(), "fewer than 3 snapshots is refused");

    server.kill();
    // Listed after the kill: a snapshot may have been finishing until then.
    let before = files(&data.join("zkrs-snap"), "snapshot.");
    let out = purge("3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = files(&data.join("zkrs-snap"), "snapshot.");
    assert_eq!(after, before[before.len() - 3..].to_vec(), "the newest three are kept");

    server.restart();
    let mut c = RawClient::connect(server.addr(), 30_000);
    for i in (0..1200).step_by(37) {
        assert_eq!(c.exists(&format!("/p{i}"), false).err(), ErrorCode::Ok, "/p{i} lost");
    }
}
