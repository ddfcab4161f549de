//! The SNAP stream: round trips of every detail, random trees fed in random pieces, fuzzy
//! streams taken while writes go on (loaded and replayed, they equal the straight state), and
//! damaged streams refused with an error, never a panic. Apache's own bytes are checked in
//! `tests/apache_snap_capture.rs`.

use super::*;
use crate::{AuthIds, Recovery, RequestCtx};
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeSet;
use zk_proto::{
    CreateRequest, CreateTtlRequest, DeleteRequest, OpCode, Request, SetAclRequest, SetDataRequest, Txn,
    TxnHeader,
};

fn cfg() -> TreeConfig {
    // With the tree digest, as an ensemble keeps it: a learner's tree is compared digest and all.
    TreeConfig { extended_types_enabled: true, tick_ms: 100, tree_digest: true, ..TreeConfig::default() }
}

fn acl(p: i32, scheme: &str, id: &str) -> Acl {
    Acl { perms: p, id: Id { scheme: scheme.into(), id: id.into() } }
}

/// The ACL lists the tests choose from: open, read-only, a digest pair, and empty.
fn acl_choice(i: u8) -> Vec<Acl> {
    match i % 4 {
        0 => open_acl(),
        1 => vec![acl(perms::READ, "world", "anyone")],
        2 => vec![acl(perms::ALL, "digest", "u:h"), acl(perms::READ, "ip", "127.0.0.1")],
        _ => vec![acl(perms::ALL | perms::ADMIN, "ip", "10.0.0.0/8")],
    }
}

/// Prep then apply with consecutive zxids, keeping the log.
struct Driver {
    db: Database,
    zxid: i64,
    now: i64,
    log: Vec<(TxnHeader, Txn)>,
    auth: AuthIds,
}

impl Driver {
    fn new() -> Self {
        let auth = AuthIds {
            ids: vec![
                Id { scheme: "ip".into(), id: "127.0.0.1".into() },
                Id { scheme: "digest".into(), id: "u:h".into() },
            ],
            is_super: false,
        };
        Driver { db: Database::new(cfg()), zxid: 0, now: 1_000, log: Vec::new(), auth }
    }

    fn commit(&mut self, session: SessionId, op: OpCode, txn: Txn) {
        let hdr = TxnHeader {
            client_id: session,
            cxid: 1,
            zxid: self.zxid,
            time: self.now,
            txn_type: crate::txn_type(op, &txn).code(),
        };
        self.db.apply(&hdr, &txn);
        self.log.push((hdr, txn));
    }

    fn open(&mut self, s: SessionId, timeout: i32) {
        self.zxid += 1;
        self.now += 3;
        let t = self.db.prep_create_session(s, timeout);
        self.commit(s, OpCode::CreateSession, t);
    }

    fn run(&mut self, s: SessionId, req: Request) {
        self.zxid += 1;
        self.now += 3;
        let auth = self.auth.clone();
        let ctx = RequestCtx { session: s, cxid: 1, auth: &auth };
        let t = self.db.prep(&ctx, &req, self.zxid, self.now);
        self.commit(s, req.op(), t);
    }

    /// A create2 (the request most clients send), any mode.
    fn create2(&mut self, s: SessionId, path: &str, flags: i32) {
        let data = Some(Bytes::copy_from_slice(path.as_bytes()));
        self.run(s, Request::Create2(CreateRequest { path: path.into(), data, acl: open_acl(), flags }));
    }

    fn delete(&mut self, path: &str) {
        self.run(1, Request::Delete(DeleteRequest { path: path.into(), version: -1 }));
    }

    fn set_data(&mut self, path: &str, data: &[u8]) {
        let data = Some(Bytes::copy_from_slice(data));
        self.run(1, Request::SetData(SetDataRequest { path: path.into(), data, version: -1 }));
    }

    fn create(&mut self, s: SessionId, path: &str, data: Option<&[u8]>, acl: Vec<Acl>, flags: i32) {
        let data = data.map(Bytes::copy_from_slice);
        let req = if flags == 5 || flags == 6 {
            Request::CreateTtl(CreateTtlRequest { path: path.into(), data, acl, flags, ttl: 60_000 })
        } else if flags == 4 {
            Request::CreateContainer(CreateRequest { path: path.into(), data, acl, flags })
        } else {
            Request::Create(CreateRequest { path: path.into(), data, acl, flags })
        };
        self.run(s, req);
    }
}

/// Every node's path, data, ACL and stat, the child sets, the indexes and the sessions.
fn assert_same(got: &Database, want: &Database) {
    let (g, w) = (got.tree(), want.tree());
    assert_eq!(g.len(), w.len(), "node count");
    for (path, wn) in w.iter() {
        let gn = g.get(path).unwrap_or_else(|| panic!("{path} missing"));
        assert_eq!(gn.data(), wn.data(), "data of {path}");
        assert_eq!(gn.stat_persisted(), wn.stat_persisted(), "stat of {path}");
        assert_eq!(*gn.acl, *wn.acl, "acl of {path}");
        let gc: BTreeSet<String> = g.child_names(gn).into_iter().collect();
        let wc: BTreeSet<String> = w.child_names(wn).into_iter().collect();
        assert_eq!(gc, wc, "children of {path}");
    }
    assert_eq!(got.ephemerals_by_session(), want.ephemerals_by_session());
    assert_eq!(g.containers(), w.containers());
    assert_eq!(g.ttls(), w.ttls());
    assert_eq!(got.approximate_data_size(), want.approximate_data_size());
    assert_eq!(got.last_applied_zxid(), want.last_applied_zxid());
    let sessions = |d: &Database| d.sessions().iter().collect::<BTreeSet<_>>();
    assert_eq!(sessions(got), sessions(want));
}

/// A tree with every kind of node: nested, null and empty data, sequential, ephemerals of two
/// sessions, a container, a TTL node, four ACL lists (one set by setACL), a deleted child.
fn sample() -> Driver {
    let mut d = Driver::new();
    d.open(0x11, 4000);
    d.open(0x22, 6000);
    d.open(0x33, 8000);
    d.create(0x11, "/a", Some(b"hello"), open_acl(), 0);
    d.create(0x11, "/a/b", None, open_acl(), 0);
    d.create(0x11, "/a/b/c", Some(b""), acl_choice(1), 0);
    d.create(0x11, "/d", Some(&[7u8; 300]), acl_choice(2), 0);
    d.create(0x11, "/a/s-", Some(b"seq"), open_acl(), 2);
    d.create(0x11, "/e", Some(b"eph"), open_acl(), 1);
    d.create(0x22, "/a/e2", None, acl_choice(3), 1);
    d.create(0x11, "/cont", Some(b""), open_acl(), 4);
    d.create(0x11, "/ttl", Some(b"t"), open_acl(), 5);
    for i in 0..14 {
        d.create(0x11, &format!("/a/n{i}"), Some(b"n"), open_acl(), 0);
    }
    d.run(0x11, Request::Delete(DeleteRequest { path: "/a/n3".into(), version: -1 }));
    d.run(
        0x11,
        Request::SetData(SetDataRequest {
            path: "/a".into(),
            data: Some(Bytes::from_static(b"hi2")),
            version: -1,
        }),
    );
    d.run(0x11, Request::SetAcl(SetAclRequest { path: "/a/b".into(), acl: acl_choice(1), version: -1 }));
    d
}

/// A stream read back: sessions, the ACL map, (path, ACL key) of each node, and its length.
type Items = (Vec<(i64, i32)>, Vec<(i64, Vec<Acl>)>, Vec<(String, i64)>, usize);

/// Reads the stream's items back (a reference reader for the tests, written plainly).
fn items(b: &[u8]) -> Items {
    let mut p = 0usize;
    let i32_at = |p: &mut usize| {
        let v = i32::from_be_bytes(b[*p..*p + 4].try_into().expect("4 bytes"));
        *p += 4;
        v
    };
    let i64_at = |p: &mut usize| {
        let v = i64::from_be_bytes(b[*p..*p + 8].try_into().expect("8 bytes"));
        *p += 8;
        v
    };
    let buf_at = |p: &mut usize| {
        let n = i32_at(p);
        if n < 0 {
            return None;
        }
        let v = b[*p..*p + n as usize].to_vec();
        *p += n as usize;
        Some(v)
    };
    let str_at = |p: &mut usize| String::from_utf8(buf_at(p).expect("string")).expect("utf-8");
    let sessions = (0..i32_at(&mut p)).map(|_| (i64_at(&mut p), i32_at(&mut p))).collect();
    let mut acls = Vec::new();
    for _ in 0..i32_at(&mut p) {
        let key = i64_at(&mut p);
        let list = (0..i32_at(&mut p))
            .map(|_| Acl { perms: i32_at(&mut p), id: Id { scheme: str_at(&mut p), id: str_at(&mut p) } })
            .collect();
        acls.push((key, list));
    }
    let mut nodes = Vec::new();
    loop {
        let path = str_at(&mut p);
        if path == "/" {
            break;
        }
        buf_at(&mut p);
        let key = i64_at(&mut p);
        p += STAT_BYTES;
        nodes.push((path, key));
    }
    assert_eq!(str_at(&mut p), SIGNATURE);
    (sessions, acls, nodes, p)
}

#[test]
fn round_trip_keeps_every_detail() {
    let d = sample();
    let bytes = d.db.apache_snap_to_vec();
    let (db, used) = load_apache_snap(cfg(), d.db.last_applied_zxid(), &bytes).expect("load");
    assert_eq!(used, bytes.len());
    assert_same(&db, &d.db);
    assert_eq!(db.tree().get("/a/b").map(|n| (*n.acl).clone()), Some(acl_choice(1)));
    assert_eq!(db.ephemerals_count(), 2);
    // Loading again and writing gives the same bytes: keys, child order and sessions depend on
    // the tree alone, not on the order its nodes were stored in.
    assert_eq!(db.apache_snap_to_vec(), bytes);
}

#[test]
fn layout_follows_apache() {
    let d = sample();
    let bytes = d.db.apache_snap_to_vec();
    let (sessions, acls, nodes, end) = items(&bytes);
    assert_eq!(end, bytes.len());
    assert_eq!(sessions.iter().map(|s| s.0).collect::<BTreeSet<_>>(), [0x11, 0x22, 0x33].into());
    // Keys 1.. by first use: /zookeeper/config's read-only list (made with the tree), then the
    // lists in the order of the creates that brought them. Open is not keyed -1 for client
    // nodes, only for the three nodes Apache makes itself.
    let keys: Vec<(i64, Vec<Acl>)> =
        vec![(1, acl_choice(1)), (2, open_acl()), (3, acl_choice(2)), (4, acl_choice(3))];
    assert_eq!(acls, keys);
    assert_eq!(nodes[0], (String::new(), OPEN_ACL_KEY));
    let key = |p: &str| nodes.iter().find(|(q, _)| q == p).map(|n| n.1);
    assert_eq!(key("/zookeeper"), Some(-1));
    assert_eq!(key("/zookeeper/quota"), Some(-1));
    assert_eq!(key("/zookeeper/config"), Some(1));
    assert_eq!(key("/a"), Some(2));
    assert_eq!(key("/a/b"), Some(1));
    assert_eq!(key("/d"), Some(3));
    assert_eq!(key("/a/n3"), None);
    // Pre-order, each node's children in the order getChildren lists them.
    let tree = d.db.tree();
    let mut want = Vec::new();
    fn walk(tree: &crate::tree::DataTree, path: &str, out: &mut Vec<String>) {
        out.push(if path == "/" { String::new() } else { path.to_string() });
        let node = tree.get(path).expect("node");
        for c in tree.child_names(node) {
            let child = if path == "/" { format!("/{c}") } else { format!("{path}/{c}") };
            walk(tree, &child, out);
        }
    }
    walk(tree, "/", &mut want);
    assert_eq!(nodes.into_iter().map(|n| n.0).collect::<Vec<_>>(), want);
}

#[test]
fn sessions_in_java_hashmap_order() {
    let got = apache_session_order(vec![(7, 1), (1, 1), (4, 1), (0x100_0000_0001, 1)]);
    let ids: Vec<i64> = got.iter().map(|s| s.0).collect();
    // 4 entries -> copy capacity 8: buckets 7, 1, 4 and (1 ^ 0x100) & 7 = 1, which sorts after
    // id 1 in the source map's 16 buckets too (bucket 1 vs 1; then by id).
    assert_eq!(ids, vec![1, 0x100_0000_0001, 4, 7]);
}

#[test]
fn feeding_in_pieces_reports_what_was_consumed() {
    let d = sample();
    let bytes = d.db.apache_snap_to_vec();
    let mut with_tail = bytes.clone();
    with_tail.extend_from_slice(b"\x00\x00\x00\x0anext packet");
    for piece in [1usize, 2, 3, 7, 64, 1000] {
        let mut l = ApacheSnapLoader::new(cfg(), d.db.last_applied_zxid());
        let mut total = 0;
        let mut done = false;
        for chunk in with_tail.chunks(piece) {
            let fed = l.feed(chunk).expect("feed");
            total += fed.consumed;
            if fed.done {
                assert!(!done || fed.consumed == 0);
                done = true;
            } else {
                assert_eq!(fed.consumed, chunk.len());
            }
        }
        assert!(done && l.is_done());
        assert_eq!(total, bytes.len(), "piece size {piece}");
        assert_eq!(l.offset(), bytes.len() as u64);
        let db = l.finish().expect("finish");
        assert_same(&db, &d.db);
    }
}

#[test]
fn every_truncation_is_incomplete_never_a_panic() {
    let d = sample();
    let bytes = d.db.apache_snap_to_vec();
    for cut in 0..bytes.len() {
        let mut l = ApacheSnapLoader::new(cfg(), 1);
        let fed = l.feed(&bytes[..cut]).expect("a prefix is fine so far");
        assert!(!fed.done);
        assert_eq!(fed.consumed, cut);
        assert_eq!(l.finish().err(), Some(ApacheSnapError::Incomplete { offset: cut as u64 }));
    }
}

#[test]
fn damaged_streams_are_refused_with_offsets() {
    let d = sample();
    let bytes = d.db.apache_snap_to_vec();
    let load = |b: &[u8]| load_apache_snap(cfg(), d.db.last_applied_zxid(), b).map(|_| ());
    // A wrong signature.
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 1] = b'X';
    let err = load(&bad).expect_err("bad signature");
    assert_eq!(err, malformed((n - 14) as u64, "signature Some(\"BenWasHerX\"), expected \"BenWasHere\""));
    // A negative session count.
    let err = load(&[0xff, 0xff, 0xff, 0xfe]).expect_err("negative count");
    assert!(matches!(err, ApacheSnapError::Malformed { offset: 0, .. }), "{err}");
    // A data length over the limit: refused before a byte of it arrives.
    let mut s = Vec::new();
    put_i32(&mut s, 0);
    put_i32(&mut s, 0);
    put_buf(&mut s, Some(b""));
    put_i32(&mut s, i32::MAX);
    let err = load(&s).expect_err("too long");
    assert_eq!(
        err,
        ApacheSnapError::TooLong {
            offset: 12,
            what: "node data",
            len: i32::MAX as u64,
            limit: DEFAULT_MAX_FIELD_BYTES
        }
    );
    // A child before its parent.
    let mut s = Vec::new();
    put_i32(&mut s, 0);
    put_i32(&mut s, 0);
    for p in ["", "/x/y"] {
        put_buf(&mut s, Some(p.as_bytes()));
        put_buf(&mut s, None);
        put_i64(&mut s, -1);
        put_stat(&mut s, &StatPersisted::default());
    }
    let err = load(&s).expect_err("orphan");
    // The second node starts after the two counts and the root (path, data, key, stat).
    let second = (8 + 4 + 4 + 8 + STAT_BYTES) as u64;
    assert!(matches!(&err, ApacheSnapError::Malformed { offset, .. } if *offset == second), "{err}");
    // A first node that is not the root.
    let mut s = Vec::new();
    put_i32(&mut s, 0);
    put_i32(&mut s, 0);
    put_buf(&mut s, Some(b"/a"));
    put_buf(&mut s, None);
    put_i64(&mut s, -1);
    put_stat(&mut s, &StatPersisted::default());
    assert!(matches!(load(&s), Err(ApacheSnapError::Malformed { offset: 8, .. })));
    // A spent loader keeps its error.
    let mut l = ApacheSnapLoader::new(cfg(), 0);
    let first = l.feed(&[0x80, 0, 0, 0]).expect_err("negative");
    assert_eq!(l.feed(&bytes).expect_err("spent"), first);
}

#[test]
fn unknown_acl_keys_follow_the_fuzzy_rules() {
    // Stream: root, /old (czxid 5, key 9 unknown), /new (czxid 20, key 9) with a child.
    let mut s = Vec::new();
    put_i32(&mut s, 0);
    put_i32(&mut s, 0);
    let node = |s: &mut Vec<u8>, path: &str, key: i64, czxid: i64| {
        put_buf(s, Some(path.as_bytes()));
        put_buf(s, Some(b"d"));
        put_i64(s, key);
        put_stat(s, &StatPersisted { czxid, mzxid: czxid, pzxid: czxid, ..StatPersisted::default() });
    };
    node(&mut s, "", -1, 0);
    node(&mut s, "/old", 9, 5);
    node(&mut s, "/new", 9, 20);
    node(&mut s, "/new/kid", -1, 21);
    node(&mut s, "/z", -1, 3);
    put_buf(&mut s, Some(b"/"));
    put_buf(&mut s, Some(SIGNATURE.as_bytes()));
    let mut l = ApacheSnapLoader::new(cfg(), 10);
    assert!(l.feed(&s).expect("feed").done);
    let stats = l.stats();
    assert_eq!((stats.nodes, stats.nodes_left_out, stats.acl_placeholders), (3, 2, 1));
    let db = l.finish().expect("finish");
    assert_eq!(db.tree().get("/old").map(|n| (*n.acl).clone()), Some(open_acl()));
    assert!(db.tree().get("/new").is_none() && db.tree().get("/new/kid").is_none());
    assert!(db.tree().get("/z").is_some());
    assert_eq!(db.last_applied_zxid(), 10);
}

/// One random write.
#[derive(Debug, Clone)]
enum Op {
    Create { parent: u8, name: u8, data: Option<Vec<u8>>, acl: u8, flags: u8, session: u8 },
    Delete(u8),
    SetData(u8, Vec<u8>),
    SetAcl(u8, u8),
    Close(u8),
    Open(u8),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), 0..12u8, prop::option::of(prop::collection::vec(any::<u8>(), 0..12)), any::<u8>(),
              prop::sample::select(vec![0u8, 0, 1, 2, 3, 4, 5]), 0..3u8)
            .prop_map(|(parent, name, data, acl, flags, session)| Op::Create { parent, name, data, acl, flags, session }),
        2 => any::<u8>().prop_map(Op::Delete),
        2 => (any::<u8>(), prop::collection::vec(any::<u8>(), 0..8)).prop_map(|(p, d)| Op::SetData(p, d)),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(p, a)| Op::SetAcl(p, a)),
        1 => (0..3u8).prop_map(Op::Close),
        1 => (0..3u8).prop_map(Op::Open),
    ]
}

/// Paths a random op may touch: everything outside /zookeeper, sorted (deterministic).
fn user_paths(db: &Database) -> Vec<String> {
    let mut v: Vec<String> =
        db.tree().iter().map(|(p, _)| p.to_string()).filter(|p| !p.starts_with("/zookeeper")).collect();
    v.sort();
    v
}

fn apply_op(d: &mut Driver, op: &Op) {
    let paths = user_paths(&d.db);
    let pick = |i: u8| paths[i as usize % paths.len()].clone();
    let session = |s: u8| 0x1000 + s as i64;
    match op {
        Op::Create { parent, name, data, acl, flags, session: s } => {
            let p = pick(*parent);
            let path = if p == "/" { format!("/n{name}") } else { format!("{p}/n{name}") };
            d.create(session(*s), &path, data.as_deref(), acl_choice(*acl), *flags as i32);
        }
        Op::Delete(p) => d.run(1, Request::Delete(DeleteRequest { path: pick(*p), version: -1 })),
        Op::SetData(p, data) => d.run(
            1,
            Request::SetData(SetDataRequest {
                path: pick(*p),
                data: Some(Bytes::from(data.clone())),
                version: -1,
            }),
        ),
        Op::SetAcl(p, a) => {
            d.run(1, Request::SetAcl(SetAclRequest { path: pick(*p), acl: acl_choice(*a), version: -1 }))
        }
        Op::Close(s) => d.run(session(*s), Request::CloseSession),
        Op::Open(s) => {
            if !d.db.sessions().contains(session(*s)) {
                d.open(session(*s), 5000);
            }
        }
    }
}

fn driver_with(ops: &[Op]) -> Driver {
    let mut d = Driver::new();
    for s in 0..3 {
        d.open(0x1000 + s, 5000);
    }
    for op in ops {
        apply_op(&mut d, op);
    }
    d
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any tree survives the trip, fed in random pieces with the next packet behind it.
    #[test]
    fn random_trees_round_trip(
        ops in prop::collection::vec(op_strategy(), 0..80),
        pieces in prop::collection::vec(1..200usize, 1..20),
    ) {
        let d = driver_with(&ops);
        let bytes = d.db.apache_snap_to_vec();
        let mut input = bytes.clone();
        input.extend_from_slice(&[0, 0, 0, 10, 1, 2, 3]);
        let mut l = ApacheSnapLoader::new(cfg(), d.db.last_applied_zxid());
        let (mut at, mut i, mut consumed) = (0usize, 0usize, 0usize);
        while at < input.len() {
            let n = pieces[i % pieces.len()].min(input.len() - at);
            consumed += l.feed(&input[at..at + n]).expect("feed").consumed;
            at += n;
            i += 1;
        }
        prop_assert_eq!(consumed, bytes.len());
        let db = l.finish().expect("finish");
        assert_same(&db, &d.db);
        // Written again, the stream may list children in another order: a Java HashSet's order
        // depends on the largest size the set ever reached, which the stream does not carry
        // (an Apache learner rebuilds its sets the same way). From then on it is a fixed point.
        let again = db.apache_snap_to_vec();
        let (db2, _) = load_apache_snap(cfg(), db.last_applied_zxid(), &again).expect("reload");
        prop_assert_eq!(db2.apache_snap_to_vec(), again);
    }

    /// A stream taken in small steps while writes go on, loaded at its begin zxid and followed
    /// by an idempotent replay of the log above it, equals the database that applied everything;
    /// and so does a learner that applies the log above it plainly.
    #[test]
    fn fuzzy_stream_plus_replay_equals_straight_apply(
        before in prop::collection::vec(op_strategy(), 0..40),
        during in prop::collection::vec(op_strategy(), 0..60),
        per_step in 1..5usize,
        every in 1..4usize,
    ) {
        let mut d = driver_with(&before);
        let mut cur = d.db.apache_snap_begin();
        let begin = cur.begin_zxid();
        let mut out = Vec::new();
        for (i, op) in during.iter().enumerate() {
            apply_op(&mut d, op);
            if i % every == 0 {
                d.db.apache_snap_step(&mut cur, &mut out, per_step);
            }
        }
        while !d.db.apache_snap_step(&mut cur, &mut out, per_step) {}
        let mut l = ApacheSnapLoader::new(cfg(), begin);
        for piece in out.chunks(29) {
            l.feed(piece).expect("feed");
        }
        prop_assert!(l.is_done());
        let mut rec = Recovery::new(l.finish().expect("finish"));
        for (h, t) in &d.log {
            rec.replay(h, t);
        }
        let got = rec.finish(0);
        assert_same(&got, &d.db);
        assert_same_as_leader(&learner_after_snap(&out, begin, &d.log), &d.db);
    }

    /// Random damage: an error or a database, never a panic, and never more consumed than given.
    #[test]
    fn corrupted_streams_never_panic(
        ops in prop::collection::vec(op_strategy(), 0..30),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        piece in 1..64usize,
    ) {
        let d = driver_with(&ops);
        let mut bytes = d.db.apache_snap_to_vec();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let mut l = ApacheSnapLoader::new(cfg(), d.db.last_applied_zxid());
        let mut consumed = 0;
        for chunk in bytes.chunks(piece) {
            match l.feed(chunk) {
                Ok(f) => {
                    prop_assert!(f.consumed <= chunk.len());
                    consumed += f.consumed;
                }
                Err(_) => break,
            }
        }
        prop_assert!(consumed <= bytes.len());
        let _ = l.finish();
    }
}

#[test]
fn empty_acl_list_gets_a_key_of_its_own() {
    // Clients cannot make one (INVALIDACL), but a tree may hold one (an empty list allows all);
    // it is keyed like any other list, never -1, so it comes back empty.
    let mut d = Driver::new();
    d.zxid += 1;
    let txn = Txn::Create(zk_proto::CreateTxn {
        path: "/bare".into(),
        data: None,
        acl: Vec::new(),
        ephemeral: false,
        parent_cversion: -1,
    });
    d.commit(0, OpCode::Create, txn);
    assert_eq!(d.db.tree().get("/bare").map(|n| n.acl.len()), Some(0));
    let bytes = d.db.apache_snap_to_vec();
    let (_, acls, nodes, _) = items(&bytes);
    let key = nodes.iter().find(|n| n.0 == "/bare").map(|n| n.1).expect("/bare written");
    assert!(acls.contains(&(key, Vec::new())), "{acls:?}");
    let (db, _) = load_apache_snap(cfg(), d.db.last_applied_zxid(), &bytes).expect("load");
    assert_same(&db, &d.db);
}

#[test]
fn steps_are_bounded() {
    let mut d = Driver::new();
    d.open(1, 5000);
    for i in 0..300 {
        d.create(1, &format!("/p{}", i % 7), None, open_acl(), 0);
        d.create(1, &format!("/p{}/c{i}", i % 7), Some(b"12345678"), acl_choice(i as u8), 0);
    }
    let mut cur = d.db.apache_snap_begin();
    let mut out = Vec::new();
    let mut steps = 0;
    loop {
        let (before_len, before_nodes) = (out.len(), cur.nodes_written());
        let done = d.db.apache_snap_step(&mut cur, &mut out, 10);
        steps += 1;
        assert!(cur.nodes_written() - before_nodes <= 10);
        // Ten items of at most a path, eight bytes of data, a key and a stat each, plus the
        // counts and the signature.
        assert!(out.len() - before_len <= 10 * (4 + 16 + 4 + 8 + 8 + STAT_BYTES) + 40);
        if done {
            break;
        }
    }
    // Discovery walks the slots 40 at a time, then sessions, lists and nodes go 10 at a time.
    assert!(steps >= 300 / 10, "{steps} steps");
    assert_eq!(cur.nodes_written(), d.db.tree().len() as u64);
    assert_eq!(out, d.db.apache_snap_to_vec());
}

// ---------------------------------------------------------------------------------------------
// A learner's side of a fuzzy SNAP (the review's F8)

/// A learner as zk-server runs one after SNAP: the stream loaded at its begin zxid, then every
/// committed txn above that zxid applied with [`Database::apply`], as a learner applies its
/// leader's commits. No [`Recovery`] and no replay mode: the stream must be such that plain
/// applies bring the learner to the leader's tree.
fn learner_after_snap(stream: &[u8], begin: i64, log: &[(TxnHeader, Txn)]) -> Database {
    let mut l = ApacheSnapLoader::new(cfg(), begin);
    for piece in stream.chunks(29) {
        l.feed(piece).expect("feed");
    }
    assert!(l.is_done(), "stream ends with the signature");
    let mut db = l.finish().expect("finish");
    for (h, t) in log.iter().filter(|(h, _)| h.zxid > begin) {
        db.apply(h, t);
    }
    db
}

/// [`assert_same`] (every node's data, stat, ACL and children), the client stats (cversion as
/// clients see it, child counts) and the tree digest.
fn assert_same_as_leader(got: &Database, want: &Database) {
    assert_same(got, want);
    let (g, w) = (got.tree(), want.tree());
    for (path, wn) in w.iter() {
        let gn = g.get(path).expect("present");
        assert_eq!(g.client_stat(gn), w.client_stat(wn), "client stat of {path}");
    }
    assert!(want.tree_digest().is_some());
    assert_eq!(got.tree_digest(), want.tree_digest(), "tree digest");
    assert_eq!(got.tree_digest(), Some(g.sum_digests()), "learner's digest against its nodes");
}

/// Whether the stream so far has written the node at `path` (its length-prefixed path).
fn has_written(out: &[u8], path: &str) -> bool {
    let mut item = (path.len() as i32).to_be_bytes().to_vec();
    item.extend_from_slice(path.as_bytes());
    out.windows(item.len()).any(|w| w == item)
}

/// The review's F8 scenario: once /p is written (its children taken), /p/c1 is deleted and a
/// create2 of /p/b takes its freed slot. b was created after /p was written, so /p in the
/// stream does not count it; were b streamed, its replayed create2 would find it present and
/// leave /p's cversion and pzxid behind (until the next create under /p), and the learner's
/// next sequential name under /p would differ from the leader's. The same happens one level
/// up: /q goes with its subtree while the root's children are being written, and /r takes
/// /q's slot. Around them: sequential creates, setData, and an ephemeral in a reused slot.
#[test]
fn snap_slot_reused_by_a_later_sibling_keeps_the_learner_in_step() {
    let mut d = Driver::new();
    d.open(1, 5000);
    d.create2(1, "/p", 0);
    for i in 0..4 {
        d.create2(1, &format!("/p/c{i}"), 0);
    }
    d.create2(1, "/q", 0);
    d.create2(1, "/q/k", 0);
    d.create2(1, "/q/k/leaf", 0);
    let mut cur = d.db.apache_snap_begin();
    let begin = cur.begin_zxid();
    let mut out = Vec::new();
    while !has_written(&out, "/p") {
        assert!(!d.db.apache_snap_step(&mut cur, &mut out, 1), "/p is written before the end");
    }
    assert!(!has_written(&out, "/q"), "the root's children are written /p first");
    d.create2(1, "/p/s-", 2);
    d.create2(1, "/p/e-", 3);
    d.set_data("/p", b"changed");
    let slot = |d: &Driver, path: &str| d.db.tree.nodes.find(path).expect("present");
    let freed = slot(&d, "/p/c1");
    d.delete("/p/c1");
    // The last create under /p: nothing after it would mend /p on the learner.
    d.create2(1, "/p/b", 0);
    assert_eq!(slot(&d, "/p/b"), freed, "b took c1's slot");
    d.db.apache_snap_step(&mut cur, &mut out, 1);
    let freed = slot(&d, "/q");
    for path in ["/q/k/leaf", "/q/k", "/q"] {
        d.delete(path);
    }
    d.create2(1, "/r", 0);
    assert_eq!(slot(&d, "/r"), freed, "/r took /q's slot");
    d.create2(1, "/r/x", 1);
    d.set_data("/p/c2", b"c2 again");
    while !d.db.apache_snap_step(&mut cur, &mut out, 1) {}
    let mut learner = learner_after_snap(&out, begin, &d.log);
    assert_same_as_leader(&learner, &d.db);
    // The learner now leads: its next sequential names under /p and / are the ones the old
    // leader would have given.
    learner.start_leading(0);
    let auth = d.auth.clone();
    let ctx = RequestCtx { session: 1, cxid: 9, auth: &auth };
    let zxid = d.zxid + 1;
    for parent in ["/p/n-", "/n-"] {
        let seq =
            Request::Create2(CreateRequest { path: parent.into(), data: None, acl: open_acl(), flags: 2 });
        let path_of = |t: Txn| match t {
            Txn::Create(c) => c.path,
            other => panic!("not a create: {other:?}"),
        };
        let want = path_of(d.db.prep(&ctx, &seq, zxid, d.now));
        assert_eq!(path_of(learner.prep(&ctx, &seq, zxid, d.now)), want);
        d.db.abandon_after(d.zxid);
        learner.abandon_after(d.zxid);
    }
}

/// A small deterministic generator (splitmix64), so that a failing seed reproduces alone.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn child(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// One seeded run: a tree of a few parents, a SNAP stream stepped a few items at a time while
/// writes go on that free and reuse slots (delete then create2 under the same or another
/// parent), sequential creates, setData, and parents deleted with their subtrees; then the
/// learner's side is compared with the leader's tree.
fn snap_then_learner_run(seed: u64) {
    let mut rng = SplitMix(seed);
    let mut d = Driver::new();
    d.open(1, 5000);
    let mut next_name = 0u32;
    let mut name = |parent: &str| {
        next_name += 1;
        child(parent, &format!("n{next_name}"))
    };
    for p in 0..4 {
        let parent = format!("/p{p}");
        d.create2(1, &parent, 0);
        for _ in 0..rng.below(6) {
            d.create2(1, &name(&parent), rng.below(3) as i32 % 3);
        }
    }
    let mut cur = d.db.apache_snap_begin();
    let begin = cur.begin_zxid();
    let mut out = Vec::new();
    let mut done = false;
    for _ in 0..60 {
        let paths = user_paths(&d.db);
        let pick = |rng: &mut SplitMix| paths[rng.below(paths.len())].clone();
        // A leaf other than a top-level parent, or None.
        let leaves: Vec<String> = paths
            .iter()
            .filter(|p| p.matches('/').count() > 1)
            .filter(|p| d.db.tree().get(p).is_some_and(|n| d.db.tree().num_children(n) == 0))
            .cloned()
            .collect();
        match rng.below(8) {
            0 | 1 => {
                // Free a slot and take it again at once, under the leaf's parent or another.
                if let Some(leaf) = leaves.get(rng.below(leaves.len().max(1))).cloned() {
                    d.delete(&leaf);
                    let parent = if rng.below(2) == 0 {
                        crate::tree::parent_of(&leaf).expect("parent").to_string()
                    } else {
                        pick(&mut rng)
                    };
                    if d.db.tree().get(&parent).is_some_and(|n| n.owner() == 0) {
                        let flags = [0, 0, 2, 4][rng.below(4)];
                        d.create2(1, &name(&parent), flags);
                    }
                }
            }
            2 => {
                let parent = pick(&mut rng);
                if d.db.tree().get(&parent).is_some_and(|n| n.owner() == 0) {
                    d.create2(1, &child(&parent, "s-"), [2, 3][rng.below(2)]);
                }
            }
            3 => {
                let parent = pick(&mut rng);
                if d.db.tree().get(&parent).is_some_and(|n| n.owner() == 0) {
                    // A plain create (op create): the learner fixes its parent on NODEEXISTS.
                    d.create(1, &name(&parent), Some(b"c"), open_acl(), 0);
                }
            }
            4 => d.set_data(&pick(&mut rng), &rng.next().to_be_bytes()),
            5 => {
                // A parent goes with its whole subtree, deepest first.
                let top = pick(&mut rng);
                let mut sub: Vec<String> = user_paths(&d.db)
                    .into_iter()
                    .filter(|p| *p == top || p.starts_with(&format!("{top}/")))
                    .collect();
                sub.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
                for p in sub {
                    d.delete(&p);
                }
            }
            _ => {
                if !done {
                    done = d.db.apache_snap_step(&mut cur, &mut out, 1 + rng.below(3));
                }
            }
        }
    }
    while !done {
        done = d.db.apache_snap_step(&mut cur, &mut out, 2);
    }
    let learner = learner_after_snap(&out, begin, &d.log);
    assert_same_as_leader(&learner, &d.db);
}

/// [`snap_then_learner_run`] over many seeds: random interleavings of stream steps and writes.
#[test]
fn snap_then_learner_apply_matches_the_leader_over_seeds() {
    for seed in 0..256 {
        let r = std::panic::catch_unwind(|| snap_then_learner_run(seed));
        assert!(r.is_ok(), "seed {seed} diverged (reproduce with snap_then_learner_run({seed}))");
    }
}
