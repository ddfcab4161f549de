//! `snapshot.compression=zstd` on real processes: the snapshots are written compressed (format
//! 2), a server killed with SIGKILL restarts from one and serves every acknowledged znode, and a
//! switch back to `none` reads the compressed snapshots left on disk while writing format 1
//! again. In a three-server ensemble with compression, a follower that lost its data is brought
//! back by SNAP and stores what it received compressed, restarts from it; an Apache follower of
//! the same zkrs leader is brought back by SNAP too (the leader serializes its tree in Apache's
//! format for the wire, whatever its files hold).
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::client::{open_acl, RawClient};
use support::ensemble::*;
use support::load::*;
use support::*;
use zk_log::snapshot::{read_snapshot_bytes, Codec, SnapshotInfo, SNAP_DIR_NAME};
use zk_proto::*;

/// The snapshot files in `dir` (no temp files), oldest first.
fn snapshot_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    v.retain(|p| {
        p.file_name().and_then(|n| n.to_str()).and_then(zk_log::snapshot::parse_snapshot_name).is_some()
    });
    v.sort();
    v
}

/// A snapshot file read and checked whole, as the server would read it.
fn read_file(path: &Path) -> SnapshotInfo {
    let data = std::fs::read(path).expect("snapshot file");
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    read_snapshot_bytes(name, &data, &mut |_| Ok(())).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The container format a snapshot file's header names.
fn format_version(path: &Path) -> u32 {
    let data = std::fs::read(path).expect("snapshot file");
    u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"))
}

/// The name of the snapshot the last start loaded, from its log line.
fn loaded_snapshot(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .find_map(|l| l.split("loaded snapshot ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string)
}

/// Data that compresses somewhat, different for each znode, up to 300 bytes.
fn value(i: usize) -> Vec<u8> {
    format!("value {i} ").repeat(i % 30).into_bytes()
}

fn create(path: &str, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(bytes::Bytes::copy_from_slice(data)),
        acl: open_acl(),
        flags: 0,
    })
}

/// Creates `/z/n<i>` for `range` pipelined, every one acknowledged; records them in `want`.
fn create_all(c: &mut RawClient, range: std::ops::Range<usize>, want: &mut BTreeMap<String, Vec<u8>>) {
    let batch: Vec<usize> = range.collect();
    for piece in batch.chunks(500) {
        let sent: Vec<(i32, usize)> =
            piece.iter().map(|&i| (c.send(&create(&format!("/z/n{i:05}"), &value(i))), i)).collect();
        for (xid, i) in sent {
            let r = c.recv(xid).expect("reply");
            assert_eq!(r.err(), ErrorCode::Ok, "/z/n{i:05}");
            want.insert(format!("/z/n{i:05}"), value(i));
        }
    }
}

/// Waits until `dir` holds a snapshot taken past the `txns`th transaction of an epoch (the zxid's
/// low 32 bits), and a moment more for retention to settle; returns it. When none has come after
/// a few seconds, `ask` asks for one (every two seconds): the thresholds alone may take none past
/// `txns`, since a snapshot is due only once the log since the last holds half its size, and
/// one begun just before `txns` can leave too little log after it.
fn wait_snapshot_past(dir: &Path, txns: i64, ask: impl Fn()) -> PathBuf {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    let mut asked = start;
    loop {
        let newest = snapshot_files(dir).into_iter().rev().find(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            zk_log::snapshot::parse_snapshot_name(name).is_some_and(|z| z & 0xffff_ffff > txns)
        });
        if let Some(p) = newest {
            std::thread::sleep(Duration::from_millis(500));
            return p;
        }
        assert!(Instant::now() < deadline, "no snapshot past transaction {txns} in {}", dir.display());
        if start.elapsed() > Duration::from_secs(3) && asked.elapsed() > Duration::from_secs(2) {
            ask();
            asked = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every znode of `want` is there with its data, and `/z` has no child besides them and the
/// `maybe` ones (sent, not acknowledged: they may or may not have been made durable).
fn check_every_znode(c: &mut RawClient, want: &BTreeMap<String, Vec<u8>>, maybe: &[String]) {
    for (p, d) in want {
        let r = c.get_data(p, false);
        assert_eq!(r.err(), ErrorCode::Ok, "acknowledged {p} lost");
        assert_eq!(r.decode::<GetDataResponse>().data.as_deref().unwrap_or_default(), &d[..], "{p}");
    }
    let kids: GetChildren2Response = c.children2("/z", false).decode();
    let kids = kids.children;
    for k in &kids {
        let p = format!("/z/{k}");
        assert!(want.contains_key(&p) || maybe.contains(&p), "{p} was never created");
    }
    assert!(kids.len() >= want.len() - 1, "/z has {} children, {} acknowledged", kids.len(), want.len());
}

#[test]
fn a_compressed_snapshot_survives_kill_9_and_loads_every_znode() {
    let mut server = start(
        Target::Zkrs,
        "snapshot.compression=zstd\nsnapshot.compressionLevel=3\nsnapCount=1000\nsnapshot.idleSeconds=0\n\
         snapshot.minRequestIntervalSeconds=0",
    );
    let snaps = server.dir.path().join("data").join(SNAP_DIR_NAME);
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/z", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let mut want = BTreeMap::new();
    want.insert("/z".to_string(), Vec::new());
    create_all(&mut c, 0..4000, &mut want);
    // Updates and deletes, so the snapshot and the replay after it have more than creates.
    for i in (0..4000).step_by(7) {
        let p = format!("/z/n{i:05}");
        assert_eq!(c.set_data(&p, b"updated", 0).err(), ErrorCode::Ok);
        want.insert(p, b"updated".to_vec());
    }
    for i in (3..4000).step_by(11) {
        let p = format!("/z/n{i:05}");
        assert_eq!(c.delete(&p, -1).err(), ErrorCode::Ok);
        want.remove(&p);
    }
    let newest = wait_snapshot_past(&snaps, 3000, || {
        server.four_letter("csnp");
    });
    // Every snapshot written is in the compressed format, reads whole, and (once there is a tree
    // in it) is well smaller than its content.
    for p in snapshot_files(&snaps) {
        assert_eq!(format_version(&p), 2, "{}", p.display());
        let info = read_file(&p);
        assert_eq!(info.codec, Codec::Zstd);
        if info.content_bytes > 100_000 {
            assert!(info.file_bytes < info.content_bytes * 3 / 4, "{info:?}");
        }
    }
    // dump-snapshot reads it and says so.
    let mut out = Vec::new();
    zk_server::tools::dump_snapshot(&newest, &mut out).expect("dump-snapshot");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.lines().last().is_some_and(|l| l.contains("(zstd compressed)")),
        "{}",
        text.lines().last().unwrap_or("")
    );

    // Pipelined creates, the server killed part way through their replies.
    let sent: Vec<(i32, String)> = (4000..4600)
        .map(|i| {
            let p = format!("/z/n{i:05}");
            (c.send(&create(&p, &value(i))), p)
        })
        .collect();
    let mut maybe = Vec::new();
    for (n, (xid, p)) in sent.into_iter().enumerate() {
        if n == 250 {
            server.kill();
        }
        match c.recv(xid) {
            Some(r) => {
                assert_eq!(r.err(), ErrorCode::Ok, "{p}");
                let i: usize = p["/z/n".len()..].parse().expect("number");
                want.insert(p, value(i));
            }
            None => maybe.push(p),
        }
    }
    server.restart();
    let log = server_log(server.dir.path());
    let loaded = loaded_snapshot(&log).unwrap_or_else(|| panic!("no snapshot loaded:\n{log}"));
    assert_eq!(format_version(&snaps.join(&loaded)), 2, "{loaded} is a compressed snapshot");
    let mut c = RawClient::connect(server.addr(), 30_000);
    check_every_znode(&mut c, &want, &maybe);

    // Back to none: the compressed snapshots still load, and the next ones are format 1.
    let cfg = std::fs::read_to_string(server.config_path()).expect("zoo.cfg");
    std::fs::write(
        server.config_path(),
        cfg.replace("snapshot.compression=zstd", "snapshot.compression=none"),
    )
    .expect("zoo.cfg");
    server.restart();
    let mut c = RawClient::connect(server.addr(), 30_000);
    check_every_znode(&mut c, &want, &maybe);
    let before = snapshot_files(&snaps);
    create_all(&mut c, 5000..5500, &mut want);
    // Asked for (or one under way already): whether snapCount or the log's size calls for one
    // yet does not matter here.
    let asked = server.four_letter("csnp");
    let zxid = asked.lines().next().and_then(|l| l.trim().parse::<i64>().ok());
    assert!(zxid.is_some(), "csnp answered {asked:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let plain = loop {
        let new: Vec<PathBuf> = snapshot_files(&snaps).into_iter().filter(|p| !before.contains(p)).collect();
        if let Some(p) = new.last() {
            std::thread::sleep(Duration::from_millis(500));
            break p.clone();
        }
        assert!(Instant::now() < deadline, "no snapshot after the switch back to none");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(format_version(&plain), 1, "{}", plain.display());
    assert_eq!(read_file(&plain).codec, Codec::None);
    server.restart();
    let mut c = RawClient::connect(server.addr(), 30_000);
    check_every_znode(&mut c, &want, &maybe);
}

fn create_empty(c: &mut RawClient, path: &str) {
    assert_eq!(c.create(path, b"", CreateMode::Persistent).err(), ErrorCode::Ok, "create {path}");
}

/// Waits for a leader with every running follower synced; returns it.
fn settled(e: &Ensemble, followers: usize) -> usize {
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", &followers.to_string());
    leader
}

/// Server 1 is Apache 3.8, servers 2 and 3 zkrs with `snapshot.compression=zstd`; server 3
/// leads. Server 2 loses its data and is brought back by SNAP: the snapshot it writes of what it
/// received is compressed, and it restarts from it (SIGKILL) with the leader's tree. Then the
/// Apache server loses its data: the zkrs leader brings it back by SNAP too, in Apache's stream
/// format, and all three trees are equal.
#[test]
fn a_follower_brought_back_by_snap_stores_it_compressed_and_an_apache_follower_still_syncs() {
    let extra = "snapshot.compression=zstd\nsnapCount=400\nsnapshot.idleSeconds=0\nsyncLimit=20\n";
    let mut e = Ensemble::configure_with_extra(&[Kind::Apache, Kind::Zkrs, Kind::Zkrs], &[], extra);
    e.launch(1);
    e.launch(2);
    let leader = e.wait_for_leader_among(&[1, 2]);
    assert_eq!(leader, 2, "the largest id leads\n{}", e.logs());
    e.launch(0);
    settled(&e, 2);
    let mut c = e.client(leader);
    create_empty(&mut c, "/s");
    let mut want = BTreeMap::new();
    let mut write = |c: &mut RawClient, what: &str, n: usize| {
        let p = format!("/s/{what}-{n:04}");
        assert_eq!(c.create(&p, &value(n), CreateMode::Persistent).err(), ErrorCode::Ok, "{p}");
        want.insert(p, value(n));
    };
    for n in 0..1000 {
        write(&mut c, "before", n);
    }
    // The leader's own snapshots are compressed.
    let first = wait_snapshot_past(&e.data_dir(leader).join(SNAP_DIR_NAME), 0, || {});
    assert_eq!(format_version(&first), 2, "{}", first.display());

    // Server 2 loses its data: SNAP.
    e.kill(1);
    for n in 0..200 {
        write(&mut c, "while-2-away", n);
    }
    e.wipe_data(1);
    let seen = e.sync_modes(leader, 2).len();
    e.launch(1);
    assert_eq!(next_sync_mode(&e, leader, 1, seen), "Snap", "{}", e.logs());
    settled(&e, 2);
    let received = e.data_dir(1).join(SNAP_DIR_NAME);
    let files = snapshot_files(&received);
    assert!(!files.is_empty(), "server 2 wrote no snapshot of what it received\n{}", e.log(1));
    for p in &files {
        assert_eq!(format_version(p), 2, "{}", p.display());
        assert_eq!(read_file(p).codec, Codec::Zstd);
    }
    // Restarted from it.
    e.kill(1);
    e.launch(1);
    settled(&e, 2);
    let log = e.log(1);
    let loaded = loaded_snapshot(&log).unwrap_or_else(|| panic!("server 2 loaded no snapshot:\n{log}"));
    assert_eq!(format_version(&received.join(&loaded)), 2, "{loaded}");
    write(&mut e.client(1), "through-server", 2);

    // The Apache server loses its data: SNAP from the zkrs leader, in Apache's format.
    e.kill(0);
    for n in 0..100 {
        write(&mut c, "while-1-away", n);
    }
    e.wipe_data(0);
    let seen = e.sync_modes(leader, 1).len();
    e.launch(0);
    assert_eq!(next_sync_mode(&e, leader, 0, seen), "Snap", "{}", e.logs());
    settled(&e, 2);
    write(&mut e.client(0), "through-server", 1);
    let tree = equal_trees(&e, &[0, 1, 2]);
    let got: BTreeMap<String, Vec<u8>> = tree
        .iter()
        .filter(|z| z.path.starts_with("/s/"))
        .map(|z| (z.path.clone(), z.data.as_deref().unwrap_or_default().to_vec()))
        .collect();
    assert_eq!(got, want);
    for i in 0..3 {
        assert_eq!(digest_mismatches(&e, i), Some(0), "member {}\n{}", i + 1, e.logs());
    }
}
