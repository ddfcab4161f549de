//! Import of a data directory written by the real Apache ZooKeeper 3.8: make changes (nested
//! nodes, ACLs, null data, large data, an ephemeral of a live session, sequential nodes,
//! deletes) with a snapshot taken part way, record what Apache serves for every node, kill it,
//! import, and compare the imported tree node by node. Then dump the written snapshot. The same
//! with Apache writing gzip and snappy snapshots (`zookeeper.snapshot.compression.method`), and
//! with the newest of those torn.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

mod support;

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use support::client::RawClient;
use support::tree::{walk, Served};
use support::Target;
use zk_proto::*;
use zk_server::apache_snap_stream::{self, SnapStreamKind};
use zk_server::tools;

/// 150,000 bytes that do not compress (xorshift32).
fn noise() -> Vec<u8> {
    let mut x: u32 = 0x2468_ace1;
    (0..150_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// `content` compressed as Apache writes `kind`: a gzip stream, or snappy-java's header and
/// blocks of 32 KiB of content each.
fn compress(kind: SnapStreamKind, content: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match kind {
        SnapStreamKind::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(content).expect("gzip");
            e.finish().expect("gzip")
        }
        SnapStreamKind::Snappy => apache_snap_stream::snappy_java_stream(content),
        SnapStreamKind::Plain => content.to_vec(),
    }
}

/// A copy of `data`'s version-2 directory as `data/version-2` in a new temporary directory, laid
/// out as [`support::start_in`] wants it, so that Apache can be started on the copy too.
fn copy_apache_dir(data: &Path) -> (tempfile::TempDir, PathBuf) {
    let copy = tempfile::Builder::new().prefix("zkrs-test-").tempdir().expect("copy");
    let v2 = copy.path().join("data").join("version-2");
    std::fs::create_dir_all(&v2).expect("version-2");
    for e in std::fs::read_dir(data.join("version-2")).expect("read version-2") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), v2.join(e.file_name())).expect("copy");
    }
    let data = copy.path().join("data");
    (copy, data)
}

/// Starts Apache (without the compression property: it reads each snapshot by its name) on a
/// copy made by [`copy_apache_dir`] and checks that it too gets past the damaged newest
/// snapshot (the class path's slf4j has no binding, so its log cannot say how) and serves what
/// it served before the kill.
fn apache_serves_the_same(copy: tempfile::TempDir, w: &Workload) {
    let apache = support::start_in(Target::Apache, copy, "snapCount=100000\n");
    let mut c = RawClient::connect(apache.addr(), 30000);
    // As the first walk: Apache shows a digest ACL's hash only to a holder of ADMIN on the node.
    assert_eq!(c.add_auth("digest", b"u:p"), Some(ErrorCode::Ok));
    let now = walk(&mut c);
    let brief = |x: Option<&Served>| {
        x.map(|x| {
            format!("{:?} {:?} {:?}, {:?} bytes", x.stat, x.acl, x.children, x.data.as_ref().map(|d| d.len()))
        })
    };
    for p in now.keys().chain(w.served.keys()).collect::<BTreeSet<_>>() {
        let (a, b) = (now.get(p), w.served.get(p));
        assert!(a == b, "Apache restarted on the copy serves {p} as {:?}, before {:?}", brief(a), brief(b));
    }
}

/// What Apache served at the end of [`apache_workload`], and the live session.
struct Workload {
    apache: support::ServerProc,
    served: BTreeMap<String, Served>,
    session: i64,
}

/// Starts Apache with `jvm_flags`, makes the changes (about half of them after its first
/// snapshot past the initial one, with `snapCount=16`), records what it serves, and kills it
/// with the session alive.
fn apache_workload(jvm_flags: &str) -> Workload {
    support::assert_apache_installed();
    let mut apache = support::start_with_jvm_flags(Target::Apache, "snapCount=16\n", jvm_flags);
    let mut c = RawClient::connect(apache.addr(), 30000);
    assert_eq!(c.add_auth("digest", b"u:p"), Some(ErrorCode::Ok));
    let digest = zk_tree::digest_id("u:p").expect("digest");
    let world_read = Acl { perms: perms::READ, id: Id { scheme: "world".into(), id: "anyone".into() } };
    let mine = Acl { perms: perms::ALL, id: Id { scheme: "digest".into(), id: digest } };
    let create = |c: &mut RawClient, path: &str, data: Option<&[u8]>, acl: Vec<Acl>, mode: CreateMode| {
        let r = c.call(Request::Create(CreateRequest {
            path: path.into(),
            data: data.map(Bytes::copy_from_slice),
            acl,
            flags: mode.code(),
        }));
        assert_eq!(r.err(), ErrorCode::Ok, "create {path}");
    };
    let open = support::client::open_acl();
    create(&mut c, "/a", Some(b"top"), open.clone(), CreateMode::Persistent);
    create(&mut c, "/a/b", Some(b""), open.clone(), CreateMode::Persistent);
    create(&mut c, "/a/b/c", None, open.clone(), CreateMode::Persistent);
    create(&mut c, "/secret", Some(b"s"), vec![mine.clone(), world_read.clone()], CreateMode::Persistent);
    // Large data, some of it incompressible: a compressed snapshot then spans many of
    // snappy-java's 32 KiB blocks and gzip's deflate blocks, not one.
    create(&mut c, "/big-noise", Some(&noise()), open.clone(), CreateMode::Persistent);
    create(
        &mut c,
        "/big-text",
        Some("zkrs ".repeat(40_000).as_bytes()),
        open.clone(),
        CreateMode::Persistent,
    );
    for i in 0..40 {
        create(
            &mut c,
            &format!("/a/n{i}"),
            Some(format!("v{i}").as_bytes()),
            open.clone(),
            CreateMode::Persistent,
        );
    }
    for i in (0..40).step_by(5) {
        assert_eq!(c.delete(&format!("/a/n{i}"), -1).err(), ErrorCode::Ok);
    }
    // After the first snapshot (snapCount 16): changes that only the logs hold.
    assert_eq!(c.set_data("/a", b"top2", 0).err(), ErrorCode::Ok);
    let r = c.call(Request::SetAcl(SetAclRequest {
        path: "/a/b".into(),
        acl: vec![world_read.clone()],
        version: 0,
    }));
    assert_eq!(r.err(), ErrorCode::Ok);
    for _ in 0..3 {
        create(&mut c, "/a/seq-", Some(b"q"), open.clone(), CreateMode::PersistentSequential);
    }
    create(&mut c, "/eph", Some(b"e"), open.clone(), CreateMode::Ephemeral);
    create(&mut c, "/a/eseq-", None, open.clone(), CreateMode::EphemeralSequential);
    // Apache writes snapshots on a thread of their own, and not atomically: let the last one
    // finish (the files' sizes stay the same for a while) so that the newest is whole.
    let sizes = || -> Vec<(PathBuf, u64)> {
        apache_snapshots(&apache.dir.path().join("data"))
            .into_iter()
            .map(|p| (p.clone(), std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0)))
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut last = sizes();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(400));
        let now = sizes();
        if now == last || std::time::Instant::now() > deadline {
            break;
        }
        last = now;
    }
    // Apache starts a snapshot after a random count of transactions: when its newest one took
    // the last transaction, one more write leaves the log something to replay after it (no
    // snapshot can follow so soon: the next needs more than snapCount / 2 transactions).
    let newest_zxid = apache_snapshots(&apache.dir.path().join("data"))
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.strip_prefix("snapshot.")?.to_string();
            i64::from_str_radix(name.split('.').next()?, 16).ok()
        })
        .max()
        .unwrap_or(0);
    let last_zxid = c.exists("/a", false).header.zxid;
    if newest_zxid >= last_zxid {
        assert_eq!(c.set_data("/a/b/c", b"after the snapshot", -1).err(), ErrorCode::Ok);
    }
    let served = walk(&mut c);
    let session = c.session.session_id;
    // Kill -9 with the session alive: its ephemerals and the session itself must come along.
    apache.kill();
    Workload { apache, served, session }
}

/// Imports `data` (dataDir and dataLogDir alike) into `dest`, loads the zkrs snapshot written
/// exactly as the server will, and checks it against what Apache served, node by node.
fn import_and_compare(data: &Path, dest: &Path, w: &Workload) -> (tools::ImportReport, String) {
    let mut progress = Vec::new();
    let cfg = zk_tree::TreeConfig::default();
    let report = tools::import_apache(data, data, dest, cfg.clone(), &mut progress)
        .unwrap_or_else(|e| panic!("import: {e}\n{}", String::from_utf8_lossy(&progress)));
    let progress = String::from_utf8_lossy(&progress).to_string();
    eprintln!("{progress}");
    assert!(report.apache_snapshot.is_some(), "started from a snapshot: {progress}");
    assert!(report.txns_replayed > 0, "the logs after the snapshot were replayed: {report:?}");
    assert!(progress.contains("import: done"), "{progress}");

    let snap = dest.join("zkrs-snap").join(&report.written.name);
    let bytes = std::fs::read(&snap).expect("snapshot written");
    let mut loader = zk_tree::SnapshotLoader::new(cfg);
    zk_log::snapshot::read_snapshot_bytes(&report.written.name, &bytes, &mut |chunk| {
        loader.feed(chunk).map_err(|e| e.to_string())
    })
    .expect("verifies");
    let db = zk_tree::Recovery::new(loader.finish().expect("loads")).finish(0);
    assert_eq!(db.last_applied_zxid(), report.last_zxid);
    assert!(db.sessions().contains(w.session), "live session imported");
    assert_eq!(db.ephemerals_by_session().get(&w.session).map(|v| v.len()), Some(2));

    let tree = db.tree();
    assert_eq!(tree.len(), w.served.len(), "node count");
    for (path, want) in &w.served {
        let n = tree.get(path).unwrap_or_else(|| panic!("{path} missing after import"));
        assert_eq!(n.data(), want.data.as_deref(), "data of {path}");
        assert_eq!(n.client_stat(false, tree.num_children(n)), want.stat, "stat of {path}");
        assert_eq!(*n.acl, want.acl, "acl of {path}");
        let kids: BTreeSet<String> = tree.child_names(n).into_iter().collect();
        assert_eq!(kids, want.children, "children of {path}");
    }
    (report, progress)
}

/// Apache's snapshot files in `data`'s version-2, oldest first.
fn apache_snapshots(data: &Path) -> Vec<PathBuf> {
    let dir = data.join("version-2");
    let mut v: Vec<(i64, PathBuf)> = std::fs::read_dir(&dir)
        .expect("version-2")
        .filter_map(|e| {
            let e = e.expect("entry");
            let name = e.file_name().into_string().ok()?;
            Some((zk_log::apache::zxid_from_apache_name(&name, "snapshot")?, e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

#[test]
fn imports_what_apache_served() {
    let w = apache_workload("");
    let data = w.apache.dir.path().join("data");
    let dest = tempfile::tempdir().expect("dest");
    let (report, progress) = import_and_compare(&data, dest.path(), &w);
    // Started from a snapshot that holds some of the changes (not just the empty snapshot.0).
    assert!(report.snapshot_nodes > 4, "{progress}");
    let from = report.apache_snapshot.as_ref().expect("started from a snapshot");
    assert_eq!(SnapStreamKind::of_file_name(&from.display().to_string()), SnapStreamKind::Plain, "{from:?}");

    // The dump tool prints it and finds it sound.
    let snap = dest.path().join("zkrs-snap").join(&report.written.name);
    let mut out = Vec::new();
    let info = tools::dump_snapshot(&snap, &mut out).expect("dump");
    let text = String::from_utf8_lossy(&out);
    assert_eq!(info.start_zxid, report.last_zxid);
    assert!(text.contains("/secret") && text.contains("all checksums good"), "{text}");
    // A second import into the same place is refused.
    let again =
        tools::import_apache(&data, &data, dest.path(), zk_tree::TreeConfig::default(), &mut Vec::new());
    assert!(matches!(again, Err(tools::ToolError::Refused(_))), "{again:?}");
}

/// Apache writing `kind` snapshots: every snapshot it wrote is of that kind; the import starts
/// from the newest and gives what Apache served. Then, on a copy with that newest snapshot torn
/// (cut in half), the import names it, skips it, starts from the one before and still gives
/// what Apache served.
fn imports_compressed(kind: SnapStreamKind) {
    let method = kind.method_name();
    let w = apache_workload(&format!("-Dzookeeper.snapshot.compression.method={method}"));
    let data = w.apache.dir.path().join("data");
    let snaps = apache_snapshots(&data);
    assert!(snaps.len() >= 3, "Apache wrote two snapshots after the initial one: {snaps:?}");
    let suffix = format!(".{method}");
    for s in &snaps {
        assert!(s.display().to_string().ends_with(&suffix), "Apache wrote {s:?} under {method}");
        assert_eq!(SnapStreamKind::of_file_name(&s.display().to_string()), kind);
    }
    let newest = snaps.last().expect("newest").clone();

    let dest = tempfile::tempdir().expect("dest");
    let (report, progress) = import_and_compare(&data, dest.path(), &w);
    assert_eq!(report.apache_snapshot.as_ref(), Some(&newest), "{progress}");
    assert!(report.snapshot_nodes > 4, "{progress}");
    assert!(!progress.contains("skipping"), "{progress}");

    // The newest snapshot torn, on a copy of Apache's files.
    let (copy, copy_data) = copy_apache_dir(&data);
    let v2 = copy_data.join("version-2");
    let torn = v2.join(newest.file_name().expect("name"));
    let len = std::fs::metadata(&torn).expect("torn").len();
    std::fs::OpenOptions::new().write(true).open(&torn).expect("open").set_len(len / 2).expect("cut");
    let dest = tempfile::tempdir().expect("dest");
    let (report, progress) = import_and_compare(&copy_data, dest.path(), &w);
    let skipped = format!("import: skipping {}: {}", torn.display(), torn.display());
    assert!(progress.contains(&skipped), "the torn file is named: {progress}");
    let before = v2.join(snaps[snaps.len() - 2].file_name().expect("name"));
    assert_eq!(report.apache_snapshot.as_ref(), Some(&before), "{progress}");
    apache_serves_the_same(copy, &w);

    // The newest snapshot's content changed by one byte inside /big-noise's data and compressed
    // again: the container is sound, the Adler32 seal over the uncompressed content is not.
    let (copy, copy_data) = copy_apache_dir(&data);
    let v2 = copy_data.join("version-2");
    let changed = v2.join(newest.file_name().expect("name"));
    let bytes = Bytes::from(std::fs::read(&changed).expect("read newest"));
    let mut content =
        apache_snap_stream::snapshot_content("newest", kind, bytes, u64::MAX).expect("decompresses").to_vec();
    let n = noise();
    let at = content.windows(64).position(|w| w == &n[70_000..70_064]).expect("noise in the snapshot");
    content[at] ^= 0x20;
    std::fs::write(&changed, compress(kind, &content)).expect("write");
    let dest = tempfile::tempdir().expect("dest");
    let (report, progress) = import_and_compare(&copy_data, dest.path(), &w);
    let skipped = format!(
        "import: skipping {}: {} (decompressed {method}) at offset",
        changed.display(),
        changed.display()
    );
    assert!(progress.contains(&skipped) && progress.contains("checksum (Adler32) mismatch"), "{progress}");
    let before = v2.join(snaps[snaps.len() - 2].file_name().expect("name"));
    assert_eq!(report.apache_snapshot.as_ref(), Some(&before), "{progress}");
    apache_serves_the_same(copy, &w);
}

#[test]
fn imports_gzip_snapshots_apache_wrote() {
    imports_compressed(SnapStreamKind::Gzip);
}

#[test]
fn imports_snappy_snapshots_apache_wrote() {
    imports_compressed(SnapStreamKind::Snappy);
}

/// Snapshots that all fail to read, and no log: refused, each file named with what is wrong,
/// rather than an empty tree imported.
#[test]
fn nothing_readable_is_refused_with_each_file_named() {
    let apache = tempfile::tempdir().expect("apache");
    let v2 = apache.path().join("version-2");
    std::fs::create_dir(&v2).expect("version-2");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../zk-log/tests/testdata/apache_snap_stream");
    // A sound gzip stream whose content is not a snapshot, and a truncated snappy-java stream.
    std::fs::copy(fixtures.join("content.gz"), v2.join("snapshot.7.gz")).expect("copy");
    let snappy = std::fs::read(fixtures.join("blocks.snappy")).expect("read");
    std::fs::write(v2.join("snapshot.3.snappy"), &snappy[..100]).expect("write");
    let dest = tempfile::tempdir().expect("dest");
    let mut progress = Vec::new();
    let r =
        tools::import_apache(apache.path(), apache.path(), dest.path(), Default::default(), &mut progress);
    let progress = String::from_utf8_lossy(&progress);
    let Err(tools::ToolError::Refused(why)) = r else { panic!("{r:?}\n{progress}") };
    assert!(why.contains("nothing to import: none of the 2 snapshots"), "{why}");
    let gz = v2.join("snapshot.7.gz").display().to_string();
    assert!(
        progress.contains(&format!("skipping {gz}: {gz} (decompressed gz) at offset 0: magic")),
        "{progress}"
    );
    let sn = v2.join("snapshot.3.snappy").display().to_string();
    assert!(
        progress.contains(&format!("skipping {sn}: {sn} at offset 16: block of 263 bytes")),
        "{progress}"
    );
    assert!(progress.contains("truncated"), "{progress}");
}

#[test]
fn dump_log_prints_a_zkrs_segment() {
    use zk_log::{FileStorage, LogOptions, SegmentLog};
    let dir = tempfile::tempdir().expect("dir");
    let storage = FileStorage::open_dir(dir.path()).expect("storage");
    let mut log =
        SegmentLog::open(storage, LogOptions { prealloc_bytes: 1 << 16, segment_bytes_max: 1 << 20 })
            .expect("log");
    let txns: Vec<(TxnHeader, Txn)> = (1..=5).map(|z| zk_log::conformance::sample_txn(z, 40)).collect();
    let batch: Vec<(&TxnHeader, &Txn)> = txns.iter().map(|(h, t)| (h, t)).collect();
    log.commit(&batch).expect("commit");
    drop(log);
    let mut out = Vec::new();
    let n = tools::dump_log(dir.path(), &mut out).expect("dump");
    let text = String::from_utf8_lossy(&out);
    assert_eq!(n, 5, "{text}");
    assert!(text.contains("zxid 0x5") && text.contains("preallocated zeros"), "{text}");
}
