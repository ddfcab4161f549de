//! Import of a data directory written by the real Apache ZooKeeper 3.8: make changes (nested
//! nodes, ACLs, null data, an ephemeral of a live session, sequential nodes, deletes) with a
//! snapshot taken part way, record what Apache serves for every node, kill it, import, and
//! compare the imported tree node by node. Then dump the written snapshot.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

mod support;

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use support::client::RawClient;
use support::Target;
use zk_proto::*;
use zk_server::tools;

struct Served {
    data: Option<Bytes>,
    stat: Stat,
    acl: Vec<Acl>,
    children: BTreeSet<String>,
}

fn child(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

fn walk(c: &mut RawClient) -> BTreeMap<String, Served> {
    let mut out = BTreeMap::new();
    let mut stack = vec!["/".to_string()];
    while let Some(p) = stack.pop() {
        let d: GetDataResponse = c.get_data(&p, false).decode();
        let a: GetAclResponse = c.call(Request::GetAcl(GetAclRequest { path: p.clone() })).decode();
        let ch: GetChildren2Response = c.children2(&p, false).decode();
        for n in &ch.children {
            stack.push(child(&p, n));
        }
        out.insert(
            p,
            Served { data: d.data, stat: d.stat, acl: a.acl, children: ch.children.into_iter().collect() },
        );
    }
    out
}

#[test]
fn imports_what_apache_served() {
    support::assert_apache_installed();
    let mut apache = support::start(Target::Apache, "snapCount=16\n");
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
    for i in 0..24 {
        create(
            &mut c,
            &format!("/a/n{i}"),
            Some(format!("v{i}").as_bytes()),
            open.clone(),
            CreateMode::Persistent,
        );
    }
    for i in (0..24).step_by(5) {
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
    let served = walk(&mut c);
    let session = c.session.session_id;
    // Kill -9 with the session alive: its ephemerals and the session itself must come along.
    apache.kill();
    let data = apache.dir.path().join("data");

    let dest = tempfile::tempdir().expect("dest");
    let mut progress = Vec::new();
    let cfg = zk_tree::TreeConfig::default();
    let report = tools::import_apache(&data, &data, dest.path(), cfg.clone(), &mut progress)
        .unwrap_or_else(|e| panic!("import: {e}\n{}", String::from_utf8_lossy(&progress)));
    let progress = String::from_utf8_lossy(&progress).to_string();
    eprintln!("{progress}");
    // Started from a snapshot that holds some of the changes (not just the empty snapshot.0).
    assert!(report.snapshot_nodes > 4, "{progress}");
    assert!(report.txns_replayed > 0, "the logs after the snapshot were replayed: {report:?}");
    assert!(progress.contains("import: done"), "{progress}");

    // Load what was written, exactly as the server will.
    let snap = dest.path().join("zkrs-snap").join(&report.written.name);
    let bytes = std::fs::read(&snap).expect("snapshot written");
    let mut loader = zk_tree::SnapshotLoader::new(cfg);
    zk_log::snapshot::read_snapshot_bytes(&report.written.name, &bytes, &mut |chunk| {
        loader.feed(chunk).map_err(|e| e.to_string())
    })
    .expect("verifies");
    let db = zk_tree::Recovery::new(loader.finish().expect("loads")).finish(0);
    assert_eq!(db.last_applied_zxid(), report.last_zxid);
    assert!(db.sessions().contains(session), "live session imported");
    assert_eq!(db.ephemerals_by_session().get(&session).map(|v| v.len()), Some(2));

    let tree = db.tree();
    assert_eq!(tree.len(), served.len(), "node count");
    for (path, want) in &served {
        let n = tree.get(path).unwrap_or_else(|| panic!("{path} missing after import"));
        assert_eq!(n.data(), want.data.as_deref(), "data of {path}");
        assert_eq!(n.client_stat(false, tree.num_children(n)), want.stat, "stat of {path}");
        assert_eq!(*n.acl, want.acl, "acl of {path}");
        let kids: BTreeSet<String> = tree.child_names(n).into_iter().collect();
        assert_eq!(kids, want.children, "children of {path}");
    }

    // The dump tool prints it and finds it sound.
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
