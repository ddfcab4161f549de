//! Snapshots: a fuzzy snapshot taken in steps interleaved with applies, loaded and followed by
//! an idempotent replay of every txn above its start zxid, gives exactly the state of the
//! database that applied everything; and a quiet snapshot round-trips every detail (child and
//! ephemeral order included).

use super::prop_tests::{check_invariants, step_strategy, Step};
use crate::snapshot::{
    load_snapshot, ContentParser, ContentRecord, Recovery, SnapshotDecoder, SnapshotLoader,
};
use crate::{AuthIds, Database, RequestCtx, TreeConfig};
use proptest::prelude::*;
use std::collections::BTreeSet;
use zk_proto::*;

fn cfg() -> TreeConfig {
    TreeConfig { extended_types_enabled: true, tick_ms: 100, tree_digest: true, ..TreeConfig::default() }
}

/// A quota stats node, whose data is a recount after recovery (see `quota_stats_recounted`).
fn is_stats(path: &str) -> bool {
    path.starts_with("/zookeeper/quota/") && path.ends_with("/zookeeper_stats")
}

/// Bytes of the tree outside the stats nodes.
fn size_without_stats(db: &Database) -> u64 {
    let stats: u64 = db
        .tree()
        .iter()
        .filter(|(p, _)| is_stats(p))
        .map(|(p, n)| p.len() as u64 + n.data().map_or(0, |d| d.len() as u64))
        .sum();
    db.approximate_data_size() - stats
}

/// Every observable part of the state, compared field by field (children and ephemerals as
/// sets: their listing order is only promised to survive a quiet snapshot). The data of quota
/// stats nodes is left out: random writes make it drift from the true count (clients may set it,
/// a stats node may come before its limits node, a quota may count its own stats node), and
/// recovery recounts it as Apache's load does; `quota_stats_recounted` checks the normal case.
fn assert_same(got: &Database, want: &Database) {
    let (g, w) = (got.tree(), want.tree());
    assert_eq!(g.len(), w.len(), "node count");
    // Stats nodes are under /zookeeper/, outside the digest, so their drift does not matter here.
    assert_eq!(got.tree_digest(), want.tree_digest(), "tree digest");
    assert_eq!(got.tree_digest(), Some(g.sum_digests()), "tree digest against the nodes'");
    for (path, wn) in w.iter() {
        let gn = g.get(path).unwrap_or_else(|| panic!("{path} missing after load + replay"));
        if !is_stats(path) {
            assert_eq!(gn.data(), wn.data(), "data of {path}");
        }
        assert_eq!(gn.stat_persisted(), wn.stat_persisted(), "stat of {path}");
        assert_eq!(*gn.acl, *wn.acl, "acl of {path}");
        let gc: BTreeSet<String> = g.child_names(gn).into_iter().collect();
        let wc: BTreeSet<String> = w.child_names(wn).into_iter().collect();
        assert_eq!(gc, wc, "children of {path}");
        let (mut gs, mut ws) =
            (gn.client_stat(true, g.num_children(gn)), wn.client_stat(true, w.num_children(wn)));
        if is_stats(path) {
            (gs.data_length, ws.data_length) = (0, 0);
        }
        assert_eq!(gs, ws, "client stat of {path}");
    }
    assert_eq!(got.ephemerals_by_session(), want.ephemerals_by_session());
    assert_eq!(g.containers(), w.containers());
    assert_eq!(g.ttls(), w.ttls());
    assert_eq!(size_without_stats(got), size_without_stats(want));
    assert_eq!(got.last_applied_zxid(), want.last_applied_zxid());
    assert_eq!(got.sessions().iter().collect::<Vec<_>>(), want.sessions().iter().collect::<Vec<_>>());
}

struct Run {
    db: Database,
    log: Vec<(TxnHeader, Txn)>,
    /// Snapshot in progress: (cursor, content so far).
    snap: Option<(crate::SnapshotCursor, Vec<u8>)>,
    snaps: Vec<(i64, Vec<u8>)>,
    /// How many nodes each step writes, and how many applies go between steps, cycled.
    knobs: Vec<(u8, u8)>,
    tick: usize,
}

impl Run {
    fn apply(&mut self, h: TxnHeader, t: Txn) {
        self.db.apply(&h, &t);
        self.log.push((h, t));
        self.tick += 1;
        let (per_step, every) = self.knobs[self.tick % self.knobs.len()];
        if !self.tick.is_multiple_of(every as usize + 1) {
            return;
        }
        if let Some((cur, out)) = self.snap.as_mut() {
            if self.db.snapshot_step(cur, out, per_step as usize + 1) {
                let (cur, out) = self.snap.take().expect("in progress");
                self.snaps.push((cur.start_zxid(), out));
            }
        } else if per_step % 3 == 0 {
            self.snap = Some((self.db.snapshot_begin(), Vec::new()));
        }
    }
}

fn run(steps: Vec<Step>, batch: usize, knobs: Vec<(u8, u8)>) {
    let mut r =
        Run { db: Database::new(cfg()), log: Vec::new(), snap: None, snaps: Vec::new(), knobs, tick: 0 };
    // A snapshot of the empty database, begun before anything happened.
    r.snap = Some((r.db.snapshot_begin(), Vec::new()));
    let auth = AuthIds {
        ids: vec![
            Id { scheme: "ip".into(), id: "127.0.0.1".into() },
            Id { scheme: "digest".into(), id: "u:h".into() },
        ],
        is_super: false,
    };
    let mut zxid = 0i64;
    let mut now = 1_000i64;
    let mut pending: Vec<(TxnHeader, Txn)> = Vec::new();
    for s in 1..4 {
        zxid += 1;
        let t = r.db.prep_create_session(s, 1000);
        let h = TxnHeader { client_id: s, cxid: 0, zxid, time: now, txn_type: OpCode::CreateSession.code() };
        r.apply(h, t);
    }
    for step in steps {
        now += 7;
        let (session, req) = match step {
            Step::Write(s, q) => (s, q),
            Step::Multi(s, ops) => (s, Request::Multi(ops)),
            Step::Close(s) => (s, Request::CloseSession),
            Step::Open(s) => {
                for (h, t) in pending.drain(..) {
                    r.apply(h, t);
                }
                zxid += 1;
                let t = r.db.prep_create_session(s, 1000 + s as i32);
                let h = TxnHeader {
                    client_id: s,
                    cxid: 0,
                    zxid,
                    time: now,
                    txn_type: OpCode::CreateSession.code(),
                };
                r.apply(h, t);
                continue;
            }
            Step::Reap(dt) => {
                for (h, t) in pending.drain(..) {
                    r.apply(h, t);
                }
                for p in r.db.reapable(now + dt, 5) {
                    zxid += 1;
                    let q = Request::DeleteContainer(DeleteRequest { path: p, version: -1 });
                    let ctx = RequestCtx { session: 0, cxid: 0, auth: &auth };
                    let t = r.db.prep(&ctx, &q, zxid, now);
                    pending.push((TxnHeader { client_id: 0, cxid: 0, zxid, time: now, txn_type: 20 }, t));
                }
                for (h, t) in pending.drain(..) {
                    r.apply(h, t);
                }
                continue;
            }
            Step::Watch(..) | Step::DropWatcher(_) => continue,
        };
        zxid += 1;
        let ctx = RequestCtx { session, cxid: 0, auth: &auth };
        let t = r.db.prep(&ctx, &req, zxid, now);
        let h = TxnHeader {
            client_id: session,
            cxid: 0,
            zxid,
            time: now,
            txn_type: crate::txn_type(req.op(), &t).code(),
        };
        pending.push((h, t));
        if pending.len() >= batch {
            for (h, t) in pending.drain(..) {
                r.apply(h, t);
            }
        }
    }
    for (h, t) in pending.drain(..) {
        r.apply(h, t);
    }
    if let Some((mut cur, mut out)) = r.snap.take() {
        while !r.db.snapshot_step(&mut cur, &mut out, 3) {}
        r.snaps.push((cur.start_zxid(), out));
    }
    // What a restart must give: everything applied.
    let want = r.db;
    assert!(!r.snaps.is_empty());
    for (start, content) in &r.snaps {
        let mut loader = SnapshotLoader::new(cfg());
        // Fed in awkward pieces, as chunks arrive.
        for piece in content.chunks(37) {
            loader.feed(piece).expect("feed");
        }
        let loaded = loader.finish().expect("load");
        check_invariants(&loaded);
        assert_eq!(loaded.last_applied_zxid(), *start);
        let mut rec = Recovery::new(loaded);
        for (h, t) in &r.log {
            rec.replay(h, t);
        }
        let got = rec.finish(now as u64);
        check_invariants(&got);
        assert_same(&got, &want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn fuzzy_snapshot_plus_replay_equals_straight_apply(
        steps in prop::collection::vec(step_strategy(), 1..120),
        batch in 1..6usize,
        knobs in prop::collection::vec((0..6u8, 0..4u8), 1..8),
    ) {
        run(steps, batch, knobs);
    }
}

fn harness_db() -> Database {
    let mut h = super::support::Harness::with(cfg());
    h.open_session(7, 4000);
    h.mkdir("/a");
    for i in 0..40 {
        h.create(&format!("/a/n{i}"), 0);
    }
    for i in (0..40).step_by(3) {
        h.delete(&format!("/a/n{i}"), -1);
    }
    for i in 0..12 {
        h.create(&format!("/e{i}"), 1);
    }
    h.create("/s-", 2);
    h.create("/c", 4);
    h.set_data("/a", b"", -1);
    h.db
}

#[test]
fn quiet_snapshot_round_trips_every_detail() {
    let db = harness_db();
    let (start, content) = db.snapshot_to_vec();
    assert_eq!(start, db.last_applied_zxid());
    let loaded = load_snapshot(cfg(), &content).expect("load");
    let loaded = Recovery::new(loaded).finish(0);
    assert_same(&loaded, &db);
    for (path, n) in db.tree().iter() {
        let m = loaded.tree().get(path).expect("present");
        assert_eq!(loaded.tree().child_names(m), db.tree().child_names(n), "child order of {path}");
    }
    for (s, set) in db.tree().ephemerals() {
        let got = loaded.tree().ephemerals_of(*s).expect("session's set");
        assert_eq!(got.copy_order(), set.copy_order());
    }
    // A second generation is byte for byte the same.
    assert_eq!(loaded.snapshot_to_vec().1.len(), content.len());
}

/// Decoding on one side and building on the other (as the server's two loading threads do), in
/// pieces that cut records anywhere, gives what the one-call load gives; a cut-short content is
/// refused as such.
#[test]
fn content_decoded_apart_loads_the_same() {
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    let want = Recovery::new(load_snapshot(cfg(), &content).expect("load")).finish(0);
    for piece in [1, 7, 64, content.len()] {
        let mut decoder = SnapshotDecoder::new();
        let mut loader = SnapshotLoader::new(cfg());
        for chunk in content.chunks(piece) {
            loader.feed_decoded(decoder.decode(chunk).expect("decode")).expect("feed");
        }
        let got = Recovery::new(loader.finish().expect("finish")).finish(0);
        check_invariants(&got);
        assert_same(&got, &want);
    }
    let mut decoder = SnapshotDecoder::new();
    let mut loader = SnapshotLoader::new(cfg());
    loader.feed_decoded(decoder.decode(&content[..content.len() - 3]).expect("decode")).expect("feed");
    assert!(loader.finish().is_err(), "content cut inside its last record");
}

#[test]
fn null_and_empty_data_stay_apart() {
    let mut h = super::support::Harness::with(cfg());
    h.open_session(1, 4000);
    let mut r = super::support::creq("/null", b"", 0);
    r.data = None;
    h.outcome(1, Request::Create(r));
    h.outcome(1, Request::Create(super::support::creq("/empty", b"", 0)));
    let (_, content) = h.db.snapshot_to_vec();
    let db = load_snapshot(cfg(), &content).expect("load");
    assert_eq!(db.tree().get("/null").expect("null").data(), None);
    assert_eq!(db.tree().get("/empty").expect("empty").data(), Some(&b""[..]));
}

#[test]
fn damaged_content_is_refused() {
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    // Cut short anywhere: never a database.
    for cut in [0, 1, 5, content.len() / 2, content.len() - 1] {
        assert!(load_snapshot(cfg(), &content[..cut]).is_err(), "cut at {cut}");
    }
    // A newer content version is refused by version.
    let mut newer = content.clone();
    newer[5..9].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(load_snapshot(cfg(), &newer).unwrap_err(), crate::SnapshotError::UnsupportedVersion(2));
    // A bad tag, an absurd length.
    let mut bad = content.clone();
    bad[0] = 77;
    assert!(load_snapshot(cfg(), &bad).is_err());
    let mut long = content;
    long[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(load_snapshot(cfg(), &long).is_err());
}

#[test]
fn parser_lists_records() {
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    let mut p = ContentParser::new();
    let (mut nodes, mut sessions, mut end) = (0u64, 0, false);
    p.feed(&content, &mut |r| {
        match r {
            ContentRecord::Node(_) => nodes += 1,
            ContentRecord::Session { id, timeout_ms } => {
                assert_eq!(db.sessions().timeout_ms(id), Some(timeout_ms));
                sessions += 1;
            }
            ContentRecord::End { nodes: n, .. } => {
                assert_eq!(n, nodes);
                end = true;
            }
            _ => {}
        }
        Ok(())
    })
    .expect("parse");
    assert!(end && p.at_boundary());
    assert_eq!((nodes, sessions), (db.tree().len() as u64, db.sessions().len()));
}

#[test]
fn quota_stats_recounted() {
    let mut h = super::support::Harness::with(cfg());
    h.mkdir("/zookeeper/quota/q");
    h.outcome(
        super::support::S1,
        Request::Create(super::support::creq("/zookeeper/quota/q/zookeeper_limits", b"count=-1,bytes=-1", 0)),
    );
    h.mkdir("/q");
    h.outcome(
        super::support::S1,
        Request::Create(super::support::creq("/zookeeper/quota/q/zookeeper_stats", b"", 0)),
    );
    let mut log = Vec::new();
    let mut cur = h.db.snapshot_begin();
    let mut content = Vec::new();
    for i in 0..30 {
        let path = format!("/q/n{i}");
        let (hdr, txn) = h.prep(super::support::S1, &Request::Create(super::support::creq(&path, b"xyz", 0)));
        h.db.apply(&hdr, &txn);
        log.push((hdr, txn));
        if i % 4 == 0 {
            let (hdr, txn) = h.prep(
                super::support::S1,
                &Request::SetData(SetDataRequest { path, data: None, version: -1 }),
            );
            h.db.apply(&hdr, &txn);
            log.push((hdr, txn));
        }
        h.db.snapshot_step(&mut cur, &mut content, 1);
    }
    while !h.db.snapshot_step(&mut cur, &mut content, 1) {}
    let mut rec = Recovery::new(load_snapshot(cfg(), &content).expect("load"));
    for (hdr, txn) in &log {
        rec.replay(hdr, txn);
    }
    let got = rec.finish(0);
    let stats =
        |db: &Database| db.tree().get("/zookeeper/quota/q/zookeeper_stats").and_then(|n| n.data_bytes());
    assert_eq!(stats(&got), stats(&h.db));
    assert!(stats(&got).is_some_and(|d| d.starts_with(b"count=31,")), "{:?}", stats(&got));
    assert_same(&got, &h.db);
    assert_eq!(got.approximate_data_size(), h.db.approximate_data_size());
}

// ---------------------------------------------------------------------------------------------
// A cursor belongs to its database (the review's F1)

#[test]
fn every_built_database_has_an_identity_of_its_own() {
    let a = harness_db();
    let b = Database::new(cfg());
    assert_ne!(a.id(), b.id());
    let (_, content) = a.snapshot_to_vec();
    let loaded = load_snapshot(cfg(), &content).expect("load");
    assert_ne!(loaded.id(), a.id(), "a snapshot load builds another database");
    let loading = loaded.id();
    let rec = Recovery::new(loaded);
    assert_eq!(rec.database().id(), loading, "recovering keeps it");
    let recovered = rec.finish(0);
    assert_ne!(recovered.id(), loading, "the recovered database is another one");
    let stream = a.apache_snap_to_vec();
    let (received, _) =
        crate::apache_snap::load_apache_snap(cfg(), a.last_applied_zxid(), &stream).expect("SNAP");
    assert_ne!(received.id(), a.id(), "a SNAP load builds another database");
    let ids: std::collections::HashSet<_> = [a.id(), b.id(), loading, recovered.id(), received.id()].into();
    assert_eq!(ids.len(), 5);

    // Moving a database keeps it, and its cursors with it.
    let id = a.id();
    let mut cur = a.snapshot_begin();
    let mut snap = a.apache_snap_begin();
    let (mut out, mut stream_out) = (Vec::new(), Vec::new());
    a.snapshot_step(&mut cur, &mut out, 3);
    a.apache_snap_step(&mut snap, &mut stream_out, 3);
    let moved = [Box::new(a)];
    assert_eq!(moved[0].id(), id);
    assert_eq!((cur.database_id(), snap.database_id()), (id, id));
    assert!(cur.belongs_to(&moved[0]) && snap.belongs_to(&moved[0]));
    assert!(!cur.belongs_to(&b) && !snap.belongs_to(&recovered));
    while !moved[0].snapshot_step(&mut cur, &mut out, 3) {}
    while !moved[0].apache_snap_step(&mut snap, &mut stream_out, 3) {}
    assert_eq!(out, content);
    assert_eq!(stream_out, stream);
}

/// F1: a snapshot under way when the server reloads its database (every election does) went
/// on over the reloaded tree from the old slot position, and wrote a file missing nodes.
#[test]
#[should_panic(expected = "a cursor belongs to the database that began it")]
fn snapshot_cursor_over_a_reloaded_database_panics() {
    let db = harness_db();
    let mut cur = db.snapshot_begin();
    let mut out = Vec::new();
    assert!(!db.snapshot_step(&mut cur, &mut out, 5));
    // The reload: the same tree, compacted into other slots.
    let reloaded = Recovery::new(load_snapshot(cfg(), &db.snapshot_to_vec().1).expect("load")).finish(0);
    drop(db);
    reloaded.snapshot_step(&mut cur, &mut out, 5);
}

/// The same for a SNAP stream, over a database received from another leader.
#[test]
#[should_panic(expected = "a cursor belongs to the database that began it")]
fn snap_stream_cursor_over_a_received_database_panics() {
    let db = harness_db();
    let mut cur = db.apache_snap_begin();
    let mut out = Vec::new();
    assert!(!db.apache_snap_step(&mut cur, &mut out, 5));
    let stream = db.apache_snap_to_vec();
    let (received, _) =
        crate::apache_snap::load_apache_snap(cfg(), db.last_applied_zxid(), &stream).expect("SNAP");
    received.apache_snap_step(&mut cur, &mut out, 5);
}

/// A cursor begun on a database still being recovered does not step the recovered one.
#[test]
#[should_panic(expected = "a cursor belongs to the database that began it")]
fn cursor_begun_during_recovery_does_not_step_the_recovered_database() {
    let (_, content) = harness_db().snapshot_to_vec();
    let rec = Recovery::new(load_snapshot(cfg(), &content).expect("load"));
    let mut cur = rec.database().snapshot_begin();
    let db = rec.finish(0);
    db.snapshot_step(&mut cur, &mut Vec::new(), 5);
}
