//! Property tests: random request sequences, prepped in batches (so prep works against
//! outstanding changes) and then applied, never panic, keep the tree's indexes consistent, and a
//! txn that prep accepted always applies cleanly.

use crate::node::{owner_kind, OwnerKind};
use crate::{AuthIds, Database, Outcome, RequestCtx, TreeConfig};
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use zk_proto::*;

fn path_strategy() -> impl Strategy<Value = String> {
    let seg = prop::sample::select(vec!["a", "b", "c", "", ".", "zookeeper"]);
    let quota = prop::sample::select(vec!["zookeeper_limits", "zookeeper_stats"]);
    prop_oneof![
        4 => prop::collection::vec(seg.clone(), 1..4).prop_map(|segs| format!("/{}", segs.join("/"))),
        1 => (prop::collection::vec(seg, 0..2), quota)
            .prop_map(|(segs, q)| format!("/zookeeper/quota/{}{q}", segs.iter().map(|s| format!("{s}/")).collect::<String>())),
    ]
}

fn acl_strategy() -> impl Strategy<Value = Vec<Acl>> {
    let id = |s: &str, i: &str| Id { scheme: s.into(), id: i.into() };
    prop::sample::select(vec![
        vec![Acl { perms: perms::ALL, id: id("world", "anyone") }],
        vec![Acl { perms: perms::READ, id: id("world", "anyone") }],
        vec![Acl { perms: perms::ALL & !perms::DELETE, id: id("world", "anyone") }],
        vec![],
        vec![Acl { perms: perms::ALL, id: id("auth", "") }],
        vec![Acl { perms: perms::ALL, id: id("digest", "u:h") }],
        vec![Acl { perms: perms::ALL, id: id("ip", "127.0.0.0/8") }],
    ])
}

fn data_strategy() -> impl Strategy<Value = Option<Bytes>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..4).prop_map(Bytes::from))
}

fn write_strategy() -> impl Strategy<Value = Request> {
    let create = (path_strategy(), data_strategy(), acl_strategy(), -1..8i32, 0..4u8).prop_map(
        |(path, data, acl, flags, kind)| {
            let r = CreateRequest { path, data, acl, flags };
            match kind {
                0 => Request::Create(r),
                1 => Request::Create2(r),
                2 => Request::CreateContainer(r),
                _ => Request::CreateTtl(CreateTtlRequest {
                    path: r.path,
                    data: r.data,
                    acl: r.acl,
                    flags: r.flags,
                    ttl: 100,
                }),
            }
        },
    );
    prop_oneof![
        4 => create,
        2 => (path_strategy(), -1..3i32).prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version })),
        1 => path_strategy().prop_map(|path| Request::DeleteContainer(DeleteRequest { path, version: -1 })),
        2 => (path_strategy(), data_strategy(), -1..3i32)
            .prop_map(|(path, data, version)| Request::SetData(SetDataRequest { path, data, version })),
        1 => (path_strategy(), acl_strategy(), -1..2i32)
            .prop_map(|(path, acl, version)| Request::SetAcl(SetAclRequest { path, acl, version })),
        1 => (path_strategy(), -1..2i32).prop_map(|(path, version)| Request::Check(CheckVersionRequest { path, version })),
    ]
}

#[derive(Debug, Clone)]
pub(super) enum Step {
    Write(i64, Request),
    Multi(i64, Vec<Request>),
    Close(i64),
    Open(i64),
    Watch(u64, String, u8),
    DropWatcher(u64),
    Reap(i64),
}

pub(super) fn step_strategy() -> impl Strategy<Value = Step> {
    let session = 1..4i64;
    prop_oneof![
        8 => (session.clone(), write_strategy()).prop_map(|(s, r)| Step::Write(s, r)),
        2 => (session.clone(), prop::collection::vec(write_strategy(), 0..4)).prop_map(|(s, r)| Step::Multi(s, r)),
        1 => session.clone().prop_map(Step::Close),
        1 => session.prop_map(Step::Open),
        2 => (0..3u64, path_strategy(), 0..5u8).prop_map(|(w, p, k)| Step::Watch(w, p, k)),
        1 => (0..3u64).prop_map(Step::DropWatcher),
        1 => (0..1000i64).prop_map(Step::Reap),
    ]
}

pub(super) fn check_invariants(db: &Database) {
    let tree = db.tree();
    let ext = tree.extended_types();
    let mut size = 0u64;
    let mut eph: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    let mut containers = BTreeSet::new();
    let mut ttls = BTreeSet::new();
    for (path, node) in tree.iter() {
        size += path.encode_utf16().count() as u64 + node.data().map_or(0, |d| d.len() as u64);
        let stat = node.client_stat(ext, tree.num_children(node));
        let names = tree.child_names(node);
        assert_eq!(stat.num_children as usize, names.len());
        for c in names {
            let child = if path == "/" { format!("/{c}") } else { format!("{path}/{c}") };
            assert!(tree.get(&child).is_some(), "{child} listed but missing");
        }
        if path != "/" {
            let parent = crate::tree::parent_of(path).unwrap();
            let name = &path[path.rfind('/').unwrap() + 1..];
            assert!(
                tree.get(parent).is_some_and(|p| tree.child_names(p).iter().any(|c| c == name)),
                "{path} not linked"
            );
            assert!(zk_proto::path::validate_path(path).is_ok(), "{path}");
        }
        match owner_kind(node.owner(), ext) {
            OwnerKind::Normal => {
                eph.entry(node.owner()).or_default().insert(path.to_string());
                assert_eq!(tree.num_children(node), 0, "ephemeral {path} has children");
            }
            OwnerKind::Container => {
                containers.insert(path.to_string());
            }
            OwnerKind::Ttl => {
                ttls.insert(path.to_string());
            }
            OwnerKind::Void => {}
        }
    }
    assert_eq!(size, db.approximate_data_size());
    let indexed: BTreeMap<i64, BTreeSet<String>> =
        db.ephemerals_by_session().into_iter().map(|(s, v)| (s, v.into_iter().collect())).collect();
    assert_eq!(indexed, eph);
    let c: BTreeSet<String> = tree.containers().iter().map(|p| p.to_string()).collect();
    let t: BTreeSet<String> = tree.ttls().iter().map(|p| p.to_string()).collect();
    assert_eq!(c, containers);
    assert_eq!(t, ttls);
    assert_eq!(db.node_count(), tree.len() + 1);
    if let Some(d) = db.tree_digest() {
        assert_eq!(d, tree.sum_digests(), "the kept digest drifted from the nodes'");
    }
}

fn accepted_cleanly(txn: &Txn, outcome: &Outcome) {
    match (txn, outcome) {
        (Txn::Error(_), Outcome::Error(_)) => {}
        (Txn::Error(e), o) => panic!("error txn {e:?} gave {o:?}"),
        (Txn::Multi(subs), Outcome::Multi(res)) => {
            assert_eq!(subs.len(), res.len());
            let failed = subs.iter().any(|(_, t)| matches!(t, Txn::Error(_)));
            if !failed {
                assert!(res.iter().all(|r| !matches!(r, OpResult::Error(_))), "{subs:?} -> {res:?}");
            } else {
                assert!(res.iter().all(|r| matches!(r, OpResult::Error(_))), "{res:?}");
            }
        }
        (t, Outcome::Error(e)) => panic!("accepted {t:?} failed to apply: {e:?}"),
        _ => {}
    }
}

fn run(steps: Vec<Step>, batch: usize) {
    let cfg =
        TreeConfig { extended_types_enabled: true, tick_ms: 100, tree_digest: true, ..TreeConfig::default() };
    let mut db = Database::new(cfg);
    let auth = AuthIds {
        ids: vec![
            Id { scheme: "ip".into(), id: "127.0.0.1".into() },
            Id { scheme: "digest".into(), id: "u:h".into() },
        ],
        is_super: false,
    };
    let mut zxid = 0i64;
    let mut now = 1_000i64;
    // Each prepped txn with the digest prep predicted for the tree once it applies.
    let mut pending: Vec<(TxnHeader, Txn, Option<i64>)> = Vec::new();
    let flush = |db: &mut Database, pending: &mut Vec<(TxnHeader, Txn, Option<i64>)>| {
        for (h, t, predicted) in pending.drain(..) {
            let a = db.apply(&h, &t);
            accepted_cleanly(&t, &a.outcome);
            assert_eq!(db.tree_digest(), predicted, "digest after {t:?}");
            check_invariants(db);
        }
        assert_eq!(db.outstanding_count(), 0);
    };
    for s in 1..4 {
        zxid += 1;
        let t = db.prep_create_session(s, 1000);
        let h = TxnHeader { client_id: s, cxid: 0, zxid, time: now, txn_type: OpCode::CreateSession.code() };
        db.apply(&h, &t);
    }
    for step in steps {
        now += 7;
        let (session, req) = match step {
            Step::Write(s, r) => (s, r),
            Step::Multi(s, ops) => (s, Request::Multi(ops)),
            Step::Close(s) => (s, Request::CloseSession),
            Step::Open(s) => {
                flush(&mut db, &mut pending);
                zxid += 1;
                let t = db.prep_create_session(s, 1000);
                let h = TxnHeader {
                    client_id: s,
                    cxid: 0,
                    zxid,
                    time: now,
                    txn_type: OpCode::CreateSession.code(),
                };
                db.apply(&h, &t);
                continue;
            }
            Step::Watch(w, p, k) => {
                let _ = match k {
                    0 => db.get_data(&p, &auth, Some(w)).map(|_| ()),
                    1 => db.exists(&p, &auth, Some(w)).map(|_| ()),
                    2 => db.get_children(&p, &auth, Some(w)).map(|_| ()),
                    3 => db.add_watch(&p, AddWatchMode::PersistentRecursive, w, &auth),
                    _ => db.remove_watches(&p, WatcherType::Any, w),
                };
                continue;
            }
            Step::DropWatcher(w) => {
                db.remove_watcher(w);
                continue;
            }
            Step::Reap(dt) => {
                flush(&mut db, &mut pending);
                for p in db.reapable(now + dt, 5) {
                    zxid += 1;
                    let req = Request::DeleteContainer(DeleteRequest { path: p, version: -1 });
                    let ctx = RequestCtx { session: 0, cxid: 0, auth: &auth };
                    let t = db.prep(&ctx, &req, zxid, now);
                    assert!(matches!(t, Txn::DeleteContainer(_)), "{t:?}");
                    let h = TxnHeader { client_id: 0, cxid: 0, zxid, time: now, txn_type: 20 };
                    pending.push((h, t, db.pending_digest()));
                }
                flush(&mut db, &mut pending);
                continue;
            }
        };
        zxid += 1;
        let ctx = RequestCtx { session, cxid: 0, auth: &auth };
        let t = db.prep(&ctx, &req, zxid, now);
        let h = TxnHeader {
            client_id: session,
            cxid: 0,
            zxid,
            time: now,
            txn_type: crate::txn_type(req.op(), &t).code(),
        };
        pending.push((h, t, db.pending_digest()));
        if pending.len() >= batch {
            flush(&mut db, &mut pending);
        }
    }
    flush(&mut db, &mut pending);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_invariants(steps in prop::collection::vec(step_strategy(), 1..80), batch in 1..6usize) {
        run(steps, batch);
    }
}
