//! Snapshots: a fuzzy snapshot taken in steps interleaved with applies, loaded and followed by
//! an idempotent replay of every txn above its start zxid, gives exactly the state of the
//! database that applied everything; and a quiet snapshot round-trips every detail (child and
//! ephemeral order included).

use super::prop_tests::{check_invariants, step_strategy, Step};
use crate::snapshot::{
    load_snapshot, ContentBuilder, ContentParser, ContentRecord, Decoded, EndState, RecordRun, RecordRuns,
    Recovery, SnapshotCheck, SnapshotDecoder, SnapshotError, SnapshotLoader, Unverifiable, MAX_RECORD_BYTES,
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
    /// Snapshots done: start zxid, the end state recorded, content.
    snaps: Vec<(i64, EndState, Vec<u8>)>,
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
                let end = cur.end_state().expect("recorded at the end");
                self.snaps.push((cur.start_zxid(), end, out));
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
        r.snaps.push((cur.start_zxid(), cur.end_state().expect("recorded at the end"), out));
    }
    // What a restart must give: everything applied.
    let want = r.db;
    assert!(!r.snaps.is_empty());
    for (start, end, content) in &r.snaps {
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
        // Loaded and replayed through its end zxid, every snapshot gives the digest it recorded
        // (the log goes on past it: the verdict is made there).
        assert!(end.zxid >= *start);
        let digest = end.digest.expect("the tree keeps a digest");
        assert_eq!(rec.snapshot_check(), SnapshotCheck::Verified { zxid: end.zxid, digest });
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

/// Loads `content` as the server does on several cores: fed in pieces of `piece` bytes to a
/// [`RecordRuns`], whose runs two sibling decoders decode in an order of their own (the later
/// of each pair first, by the other decoder) before they are fed to the loader in order.
fn load_in_runs(content: &[u8], piece: usize) -> Result<Database, SnapshotError> {
    let mut runs = RecordRuns::new();
    let mut cut: Vec<RecordRun> = Vec::new();
    for c in content.chunks(piece) {
        cut.push(runs.cut(c, Vec::new())?);
    }
    // Every byte of whole records is in exactly one run, in order.
    assert!(cut.iter().map(RecordRun::len).sum::<usize>() <= content.len());
    let mut a = SnapshotDecoder::with_digest(true);
    let mut b = a.sibling();
    let mut decoded: Vec<Option<Decoded>> = cut.iter().map(|_| None).collect();
    for i in (0..cut.len()).step_by(2).rev() {
        if i + 1 < cut.len() {
            decoded[i + 1] = Some(b.decode_run(&cut[i + 1], Default::default())?);
        }
        decoded[i] = Some(a.decode_run(&cut[i], Default::default())?);
    }
    let mut loader = SnapshotLoader::new(cfg());
    for d in decoded {
        loader.feed_decoded(d.expect("decoded"))?;
    }
    loader.finish()
}

/// Content cut into runs of whole records and decoded apart loads what the one-call load gives,
/// for pieces that cut records anywhere: a quiet snapshot, and a fuzzy one (nodes recorded twice,
/// where the later record must win) with its log replayed after it.
#[test]
fn content_decoded_in_runs_loads_the_same() {
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    let want = Recovery::new(load_snapshot(cfg(), &content).expect("load")).finish(0);
    for piece in [1, 7, 64, 4099, content.len()] {
        let got = Recovery::new(load_in_runs(&content, piece).expect("runs load")).finish(0);
        check_invariants(&got);
        assert_same(&got, &want);
    }
    let (content, _, log, want) = fuzzy_snapshot(cfg());
    for piece in [1, 5, 6, 33, 500, content.len()] {
        let mut rec = Recovery::new(load_in_runs(&content, piece).expect("runs load"));
        for (h, t) in &log {
            rec.replay(h, t);
        }
        let got = rec.finish(0);
        check_invariants(&got);
        assert_same(&got, &want);
    }
}

/// The ACL lists the cutter reads reach every decoder: content with a list per node, spread over
/// many runs, loads as the one-call load does, each node sharing its list's one reference; a node
/// that names a list before that list's record is refused by both, even though the cutter has
/// read the list by the time a decoder decodes the node.
#[test]
fn runs_share_the_acl_lists_and_refuse_a_list_named_early() {
    use super::support::acl;
    let mut b = ContentBuilder::new(7, 0);
    let stat = StatPersisted::default();
    b.node("/", Some(b""), &super::support::world(), &stat);
    for i in 0..200 {
        let list = [
            acl(zk_proto::perms::READ, "digest", &format!("u{i}:x")),
            acl(zk_proto::perms::ALL, "ip", "10.0.0.1"),
        ];
        b.node(&format!("/n{i}"), Some(b"v"), &list, &stat);
    }
    let content = b.finish();
    let want = Recovery::new(load_snapshot(cfg(), &content).expect("load")).finish(0);
    for piece in [3, 40, 1000] {
        let got = Recovery::new(load_in_runs(&content, piece).expect("runs load")).finish(0);
        assert_same(&got, &want);
        for i in 0..200 {
            let list = got.tree().acl_of(&format!("/n{i}")).expect("node");
            assert_eq!(list[0].id.id, format!("u{i}:x"));
        }
    }
    // The record of list 1 (the first node's own) moved after the node that names it: records
    // are the header, list 0, "/", list 1, "/n0", ...
    let mut recs = records(&content);
    let acl1 = 3;
    assert_eq!(recs[acl1].0, recs[1].0, "an ACL record");
    recs.swap(acl1, acl1 + 1);
    let early = assemble(&recs);
    assert!(load_snapshot(cfg(), &early).is_err(), "one-call load");
    for piece in [3, 40, early.len()] {
        assert!(load_in_runs(&early, piece).is_err(), "runs of {piece}");
    }
}

/// Content cut short, or ending with part of a record after its end record, is refused, as the
/// one-call load refuses it; a record head naming a length over the limit fails the cut, whole
/// or split across pieces.
#[test]
fn runs_refuse_cut_content_and_overlong_records() {
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    let recs = records(&content);
    let middle = assemble(&recs[recs.len() / 2..recs.len() / 2 + 1]);
    let mut trailing_head = content.clone();
    trailing_head.extend_from_slice(&middle[..3]);
    let mut trailing_node = content.clone();
    trailing_node.extend_from_slice(&middle[..middle.len() - 1]);
    for bad in [&content[..content.len() - 3], &trailing_head[..], &trailing_node[..]] {
        assert!(load_snapshot(cfg(), bad).is_err(), "one-call load");
        for piece in [1, 3, 64, bad.len()] {
            assert!(load_in_runs(bad, piece).is_err(), "runs of {piece}");
        }
    }
    let mut bad = content.clone();
    bad[1..5].copy_from_slice(&(MAX_RECORD_BYTES + 1).to_le_bytes());
    assert!(matches!(RecordRuns::new().cut(&bad, Vec::new()), Err(SnapshotError::Malformed { .. })));
    let mut runs = RecordRuns::new();
    let first = runs.cut(&bad[..3], Vec::new()).expect("a head not yet whole");
    assert!(first.is_empty());
    assert!(matches!(runs.cut(&bad[3..], Vec::new()), Err(SnapshotError::Malformed { .. })));
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
    newer[5..9].copy_from_slice(&3u32.to_le_bytes());
    assert_eq!(load_snapshot(cfg(), &newer).unwrap_err(), crate::SnapshotError::UnsupportedVersion(3));
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

// ---------------------------------------------------------------------------------------------
// A snapshot records the digest it must reproduce

/// The content's records as (tag, body), for surgery on them.
fn records(content: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut v = Vec::new();
    let mut at = 0;
    while at < content.len() {
        let len = u32::from_le_bytes(content[at + 1..at + 5].try_into().expect("4 bytes")) as usize;
        v.push((content[at], content[at + 5..at + 5 + len].to_vec()));
        at += 5 + len;
    }
    v
}

fn assemble(records: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (tag, body) in records {
        out.push(*tag);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body);
    }
    out
}

/// The path of a node record's body (`u8 flags | u32 length | path ...`).
fn node_path(body: &[u8]) -> &str {
    let len = u32::from_le_bytes(body[1..5].try_into().expect("4 bytes")) as usize;
    std::str::from_utf8(&body[5..5 + len]).expect("UTF-8")
}

/// The content without the record of the node at `path`, its end record's node count made to
/// match, so that it loads cleanly: what a snapshot finished over another database looked like
/// (F1), nodes missing and nothing to tell.
fn without_node(content: &[u8], path: &str) -> Vec<u8> {
    let mut recs = records(content);
    let before = recs.len();
    recs.retain(|(tag, body)| *tag != 4 || node_path(body) != path);
    assert_eq!(recs.len(), before - 1, "{path} was written once");
    let (tag, end) = recs.last_mut().expect("end record");
    assert_eq!(*tag, 9);
    let nodes = u64::from_le_bytes(end[0..8].try_into().expect("8 bytes"));
    end[0..8].copy_from_slice(&(nodes - 1).to_le_bytes());
    assemble(&recs)
}

/// The same content as version 1 wrote it: header version 1, and an end record of counts only.
fn as_version_1(content: &[u8]) -> Vec<u8> {
    let mut recs = records(content);
    assert_eq!(recs[0].0, 1);
    recs[0].1[0..4].copy_from_slice(&1u32.to_le_bytes());
    let (tag, end) = recs.last_mut().expect("end record");
    assert_eq!((*tag, end.len()), (9, 33));
    end.truncate(16);
    assemble(&recs)
}

/// A snapshot taken while writes go on: a tree with /keep (never written after the snapshot
/// begins) and /w, written throughout, a node or two stepped between writes, and more writes
/// after the end. Returns the content, the end state the cursor recorded, every txn from the
/// begin on, and the database that applied them all.
fn fuzzy_snapshot(cfg: TreeConfig) -> (Vec<u8>, EndState, Vec<(TxnHeader, Txn)>, Database) {
    use super::support::{creq, Harness, S1};
    let mut h = Harness::with(cfg);
    for p in ["/keep", "/keep/x", "/keep/y", "/w"] {
        h.mkdir(p);
    }
    for i in 0..10 {
        h.mkdir(&format!("/w/n{i}"));
    }
    let mut log = Vec::new();
    let mut write = |h: &mut Harness, req: Request| {
        let (hdr, txn) = h.prep(S1, &req);
        h.db.apply(&hdr, &txn);
        log.push((hdr, txn));
    };
    let mut cur = h.db.snapshot_begin();
    let mut content = Vec::new();
    for i in 0..12 {
        write(&mut h, Request::Create2(creq(&format!("/w/m{i}"), b"m", 0)));
        let data = Some(bytes::Bytes::from(format!("v{i}")));
        write(
            &mut h,
            Request::SetData(SetDataRequest { path: format!("/w/n{}", i % 10), data, version: -1 }),
        );
        if i % 3 == 0 {
            write(&mut h, Request::Delete(DeleteRequest { path: format!("/w/n{}", i / 3), version: -1 }));
            write(&mut h, Request::Create(creq("/w/s-", b"", 2)));
        }
        h.db.snapshot_step(&mut cur, &mut content, 1);
    }
    while !h.db.snapshot_step(&mut cur, &mut content, 1) {}
    let end = cur.end_state().expect("recorded");
    assert!(end.zxid > cur.start_zxid(), "writes went on while it was taken");
    assert_eq!(end.zxid, h.db.last_applied_zxid());
    assert_eq!(end.digest, h.db.tree_digest());
    for i in 0..3 {
        write(&mut h, Request::Create2(creq(&format!("/w/after{i}"), b"a", 0)));
    }
    (content, end, log, h.db)
}

/// Loads `content` and replays `log` through [`Recovery`]; the verdict and the database.
fn load_and_replay(cfg: TreeConfig, content: &[u8], log: &[(TxnHeader, Txn)]) -> (SnapshotCheck, Database) {
    let mut rec = Recovery::new(load_snapshot(cfg, content).expect("loads cleanly"));
    for (h, t) in log {
        rec.replay(h, t);
    }
    (rec.snapshot_check(), rec.finish(0))
}

#[test]
fn end_record_layout_is_pinned() {
    // An ensemble's tree: end zxid and digest recorded (flags 3).
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    assert_eq!(&content[0..9], &[1, 28, 0, 0, 0, 2, 0, 0, 0], "header record, content version 2");
    let mut want = vec![9u8, 33, 0, 0, 0];
    want.extend_from_slice(&(db.tree().len() as u64).to_le_bytes());
    want.extend_from_slice(&(db.tree().acl_count() as u32).to_le_bytes());
    want.extend_from_slice(&(db.sessions().len() as u32).to_le_bytes());
    want.push(3);
    want.extend_from_slice(&db.last_applied_zxid().to_le_bytes());
    want.extend_from_slice(&db.tree_digest().expect("kept").to_le_bytes());
    assert_eq!(&content[content.len() - 38..], &want[..]);
    let mut parser = ContentParser::new();
    parser.feed(&content, &mut |_| Ok(())).expect("parse");
    let recorded = EndState { zxid: db.last_applied_zxid(), digest: db.tree_digest() };
    assert_eq!(parser.end_state(), Some(recorded));
    // The loader says the same once it has read the end record, and nothing before.
    let mut loader = SnapshotLoader::new(TreeConfig::default());
    loader.feed(&content[..content.len() - 38]).expect("feed");
    assert_eq!(loader.end_state(), None);
    loader.feed(&content[content.len() - 38..]).expect("feed");
    assert_eq!(loader.end_state(), Some(recorded));

    // A standalone tree keeps no digest: the end zxid alone (flags 1, digest field 0).
    let mut h = super::support::Harness::new();
    h.mkdir("/a");
    let (_, content) = h.db.snapshot_to_vec();
    let end = &content[content.len() - 17..];
    assert_eq!(end[0], 1);
    assert_eq!(end[1..9], h.db.last_applied_zxid().to_le_bytes());
    assert_eq!(end[9..17], [0; 8]);

    // Built content records neither (flags 0, both fields 0).
    let mut b = ContentBuilder::new(7, 0);
    b.node("/", Some(b""), &super::support::world(), &StatPersisted::default());
    let content = b.finish();
    assert_eq!(content[content.len() - 17..], [0; 17]);
    let mut parser = ContentParser::new();
    parser.feed(&content, &mut |_| Ok(())).expect("parse");
    assert_eq!(parser.end_state(), None);
}

#[test]
fn quiet_snapshot_verifies_without_a_replay() {
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    let (check, _) = load_and_replay(cfg(), &content, &[]);
    let digest = db.tree_digest().expect("kept");
    assert_eq!(check, SnapshotCheck::Verified { zxid: db.last_applied_zxid(), digest });
    // A loader that keeps no digest (the configuration changed) sums one for the check.
    let (check, _) = load_and_replay(TreeConfig { tree_digest: false, ..cfg() }, &content, &[]);
    assert_eq!(check, SnapshotCheck::Verified { zxid: db.last_applied_zxid(), digest });
}

#[test]
fn fuzzy_snapshot_verifies_at_its_end_zxid() {
    let (content, end, log, want) = fuzzy_snapshot(cfg());
    let digest = end.digest.expect("kept");
    // Part of the log: not yet at the end zxid.
    let short: Vec<_> = log.iter().filter(|(h, _)| h.zxid < end.zxid).cloned().collect();
    let last_zxid = short.last().map(|(h, _)| h.zxid).expect("txns before the end");
    let (check, _) = load_and_replay(cfg(), &content, &short);
    assert_eq!(
        check,
        SnapshotCheck::Unverifiable { why: Unverifiable::LogEndsBefore { end_zxid: end.zxid, last_zxid } }
    );
    // Exactly through the end zxid.
    let through: Vec<_> = log.iter().filter(|(h, _)| h.zxid <= end.zxid).cloned().collect();
    let (check, _) = load_and_replay(cfg(), &content, &through);
    assert_eq!(check, SnapshotCheck::Verified { zxid: end.zxid, digest });
    // The whole log: the verdict is the one made at the end zxid, and the tree is the writer's.
    let (check, got) = load_and_replay(cfg(), &content, &log);
    assert_eq!(check, SnapshotCheck::Verified { zxid: end.zxid, digest });
    assert_same(&got, &want);
}

#[test]
fn a_snapshot_that_lost_a_node_is_a_mismatch() {
    // Fuzzy: loaded and replayed through its end zxid, the tree lacks /keep/x.
    let (content, end, log, _) = fuzzy_snapshot(cfg());
    let lossy = without_node(&content, "/keep/x");
    let (check, got) = load_and_replay(cfg(), &lossy, &log);
    assert!(got.tree().get("/keep/x").is_none());
    let want = end.digest.expect("kept");
    match check {
        SnapshotCheck::Mismatch { zxid, want: w, got: g } => {
            assert_eq!((zxid, w), (end.zxid, want));
            assert_ne!(g, want);
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    // Losing a parent loses its subtree on load too.
    let (check, got) = load_and_replay(cfg(), &without_node(&content, "/keep"), &log);
    assert!(got.tree().get("/keep/y").is_none());
    assert!(matches!(check, SnapshotCheck::Mismatch { .. }), "{check:?}");

    // Quiet (end zxid = start zxid): found at once, with nothing to replay.
    let db = harness_db();
    let (_, content) = db.snapshot_to_vec();
    let (check, _) = load_and_replay(cfg(), &without_node(&content, "/a/n1"), &[]);
    assert!(
        matches!(check, SnapshotCheck::Mismatch { zxid, .. } if zxid == db.last_applied_zxid()),
        "{check:?}"
    );
}

#[test]
fn version_1_content_loads_as_before_and_is_unverifiable() {
    let (content, _, log, want) = fuzzy_snapshot(cfg());
    let v1 = as_version_1(&content);
    let mut parser = ContentParser::new();
    let mut header_version = 0;
    parser
        .feed(&v1, &mut |r| {
            if let ContentRecord::Header(h) = r {
                header_version = h.version;
            }
            Ok(())
        })
        .expect("parse");
    assert_eq!((header_version, parser.end_state()), (1, None));
    let (check, got) = load_and_replay(cfg(), &v1, &log);
    assert_eq!(check, SnapshotCheck::Unverifiable { why: Unverifiable::NoEndState { version: 1 } });
    check_invariants(&got);
    assert_same(&got, &want);
    // Loaded as version 1 and as version 2, the same tree.
    let (a, b) = (load_snapshot(cfg(), &v1).expect("v1"), load_snapshot(cfg(), &content).expect("v2"));
    assert_same(&a, &b);
}

#[test]
fn unverifiable_cases_say_why() {
    let (content, end, log, _) = fuzzy_snapshot(cfg());
    // No snapshot at all.
    let rec = Recovery::new(Database::new(cfg()));
    assert_eq!(rec.snapshot_check(), SnapshotCheck::Unverifiable { why: Unverifiable::NoSnapshot });
    // A loaded database that applied a txn since: it no longer stands at the content's start.
    let mut db = load_snapshot(cfg(), &content).expect("load");
    let (h, t) = log.iter().find(|(h, _)| h.zxid > db.last_applied_zxid()).expect("a txn after the start");
    db.apply(h, t);
    let rec = Recovery::new(db);
    assert_eq!(rec.snapshot_check(), SnapshotCheck::Unverifiable { why: Unverifiable::NoSnapshot });
    // Built content (an import).
    let mut b = ContentBuilder::new(7, 0);
    b.node("/", Some(b""), &super::support::world(), &StatPersisted::default());
    let (check, _) = load_and_replay(cfg(), &b.finish(), &[]);
    assert_eq!(check, SnapshotCheck::Unverifiable { why: Unverifiable::NoEndState { version: 2 } });
    // Written by a standalone tree: no digest to compare.
    let standalone = TreeConfig { tree_digest: false, ..cfg() };
    let (plain, plain_end, plain_log, _) = fuzzy_snapshot(standalone.clone());
    assert_eq!(plain_end.digest, None);
    let (check, _) = load_and_replay(standalone, &plain, &plain_log);
    let why = Unverifiable::NoDigest { end_zxid: plain_end.zxid };
    assert_eq!(check, SnapshotCheck::Unverifiable { why });
    // A log without the txn at the end zxid jumps over it: the state there never existed.
    let holed: Vec<_> = log.iter().filter(|(h, _)| h.zxid != end.zxid).cloned().collect();
    let before = holed.iter().map(|(h, _)| h.zxid).filter(|&z| z < end.zxid).max().expect("before");
    let after = holed.iter().map(|(h, _)| h.zxid).find(|&z| z > end.zxid).expect("after");
    let (check, _) = load_and_replay(cfg(), &content, &holed);
    let why = Unverifiable::EndZxidMissing { end_zxid: end.zxid, before, after };
    assert_eq!(check, SnapshotCheck::Unverifiable { why });
    assert!(check.to_string().contains("without the snapshot's end zxid"), "{check}");
}

#[test]
fn bad_end_records_are_refused() {
    let db = harness_db();
    let (start, content) = db.snapshot_to_vec();
    let with_end = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut recs = records(&content);
        f(&mut recs.last_mut().expect("end").1);
        load_snapshot(cfg(), &assemble(&recs)).map(|_| ())
    };
    let refused = |r: Result<(), crate::SnapshotError>, what: &str| {
        assert!(matches!(r, Err(crate::SnapshotError::Malformed { .. })), "{what}: {r:?}");
    };
    assert_eq!(with_end(&|_| {}), Ok(()));
    refused(with_end(&|e| e[16] = 7), "unknown flag");
    refused(with_end(&|e| e[16] = 2), "a digest without its end zxid");
    refused(with_end(&|e| e[16] = 1), "a digest field not recorded");
    refused(
        with_end(&|e| {
            e[16] = 0;
            e[25..33].copy_from_slice(&[0; 8]);
        }),
        "an end zxid field not recorded",
    );
    refused(with_end(&|e| e[17..25].copy_from_slice(&(start - 1).to_le_bytes())), "end below start");
    refused(with_end(&|e| e.truncate(16)), "a version-1 end in version-2 content");
    let v1 = as_version_1(&content);
    let mut recs = records(&v1);
    recs.last_mut().expect("end").1.extend_from_slice(&[1; 17]);
    refused(load_snapshot(cfg(), &assemble(&recs)).map(|_| ()), "a version-2 end in version-1 content");
}

/// A tree past the sizes at which the loader fills its tables in bucket order (the path index,
/// and a child set of more than 65,536 children), deep and wide, with ephemerals of two
/// sessions, sequential nodes, containers, TTL nodes, changed data and several ACL lists.
fn large_harness() -> super::support::Harness {
    use super::support::{acl, creq, Harness, S1};
    let mut h = Harness::with(cfg());
    h.open_session(8, 6000);
    h.mkdir("/wide");
    for i in 0..80_000 {
        h.create(&format!("/wide/n{i}"), 0);
    }
    // Gaps in the ranks, and a set whose largest size is above its size.
    for i in (0..80_000).step_by(7) {
        h.delete(&format!("/wide/n{i}"), -1);
    }
    let mut path = String::new();
    for d in 0..60 {
        path.push_str(&format!("/d{d}"));
        h.mkdir(&path);
        for j in 0..5 {
            h.create(&format!("{path}/leaf{j}"), 0);
        }
    }
    for m in 0..150 {
        h.mkdir(&format!("/m{m}"));
        for j in 0..30 {
            h.create(&format!("/m{m}/c{j}"), if j % 5 == 0 { 2 } else { 0 });
        }
    }
    h.mkdir("/eph");
    for i in 0..400 {
        let (session, flags) = if i % 3 == 0 { (8, 3) } else { (S1, 1) };
        h.outcome(session, Request::Create(creq(&format!("/eph/e{i}-"), b"e", flags)));
    }
    for i in 0..40 {
        h.create(&format!("/cont{i}"), 4);
        h.create(&format!("/cont{i}/in"), 0);
        let req = CreateTtlRequest {
            path: format!("/ttl{i}"),
            data: Some(bytes::Bytes::from_static(b"t")),
            acl: super::support::world(),
            flags: 5,
            ttl: 1000 + i,
        };
        h.outcome(S1, Request::CreateTtl(req));
    }
    for i in (0..80_000).step_by(101) {
        if i % 7 != 0 {
            h.set_data(&format!("/wide/n{i}"), format!("value {i}").as_bytes(), -1);
        }
    }
    for m in 0..10 {
        let req = SetAclRequest {
            path: format!("/m{m}"),
            acl: vec![acl(31, "world", "anyone"), acl(1, "ip", &format!("10.0.0.{m}"))],
            version: -1,
        };
        h.outcome(S1, Request::SetAcl(req));
    }
    h
}

/// Everything a load must reproduce of the tree that wrote a quiet snapshot: what
/// `assert_same` compares, and every child list's order and every session's ephemeral order.
fn assert_same_in_order(got: &Database, want: &Database) {
    assert_same(got, want);
    for (path, n) in want.tree().iter() {
        let m = got.tree().get(path).expect("present");
        assert_eq!(got.tree().child_names(m), want.tree().child_names(n), "child order of {path}");
    }
    assert_eq!(got.tree().ephemerals().len(), want.tree().ephemerals().len());
    for (s, set) in want.tree().ephemerals() {
        let loaded = got.tree().ephemerals_of(*s).expect("session's set");
        assert_eq!(loaded.copy_order(), set.copy_order(), "ephemeral order of session {s}");
    }
}

/// A large quiet snapshot loads exactly as the tree that wrote it, whichever way it is fed: at
/// once; decoded apart in pieces (with digests from the decoder, or left to the loader); and
/// from a decoder whose paths hash another way than the table the loader adopted first.
#[test]
fn large_snapshot_loads_every_detail() {
    let db = large_harness().db;
    let wide = db.tree().get("/wide").expect("wide");
    assert!(db.tree().num_children(wide) > 65_536 && db.tree().len() > 70_000);
    let (_, content) = db.snapshot_to_vec();
    let loaded = Recovery::new(load_snapshot(cfg(), &content).expect("load")).finish(0);
    assert_same_in_order(&loaded, &db);

    for (piece, digest) in [(1 << 16, true), (4099, false)] {
        let mut decoder = SnapshotDecoder::with_digest(digest);
        let mut loader = SnapshotLoader::new(cfg());
        for chunk in content.chunks(piece) {
            loader.feed_decoded(decoder.decode(chunk).expect("decode")).expect("feed");
        }
        let got = Recovery::new(loader.finish().expect("finish")).finish(0);
        assert_same_in_order(&got, &db);
    }

    // The header from one decoder (whose hash function the empty table adopts), the rest from
    // another: the loader hashes those paths again, its table's way.
    let header_len = 33;
    let mut first = SnapshotDecoder::new();
    let mut rest = SnapshotDecoder::new();
    let mut loader = SnapshotLoader::new(cfg());
    loader.feed_decoded(first.decode(&content[..header_len]).expect("decode")).expect("feed");
    rest.decode(&content[..header_len]).expect("decode");
    loader.feed_decoded(rest.decode(&content[header_len..]).expect("decode")).expect("feed");
    let got = Recovery::new(loader.finish().expect("finish")).finish(0);
    assert_same_in_order(&got, &db);

    // A standalone server's tree keeps no digest: loaded without one, the rest the same.
    let standalone = TreeConfig { tree_digest: false, ..cfg() };
    let got = load_snapshot(standalone, &content).expect("load");
    assert_eq!(got.tree_digest(), None);
    assert_eq!(got.approximate_data_size(), db.approximate_data_size());
    assert_eq!(got.tree().len(), db.tree().len());
}

/// A large fuzzy snapshot, taken while nodes of the wide parent are deleted and created again
/// in other slots (so the content holds some twice), subtrees are removed (so it holds orphans)
/// and data changes, loads and replays to the state of the database that applied everything.
#[test]
fn large_fuzzy_snapshot_plus_replay_equals_straight_apply() {
    use super::support::{creq, Harness, S1};
    let mut h = large_harness();
    let mut log = Vec::new();
    let mut write = |h: &mut Harness, req: Request| {
        let (hdr, txn) = h.prep(S1, &req);
        h.db.apply(&hdr, &txn);
        log.push((hdr, txn));
    };
    let delete = |path: String| Request::Delete(DeleteRequest { path, version: -1 });
    // Parents whose child sits in a lower slot (freed slots are taken last freed first): a
    // snapshot that passes the child, then the parent once both are deleted, holds an orphan.
    let pairs: Vec<u32> = (1..20_000).filter(|k| k % 7 != 0).take(20).collect();
    for &k in &pairs {
        write(&mut h, delete(format!("/wide/n{k}")));
        write(&mut h, delete(format!("/wide/n{}", 60_000 + k)));
        write(&mut h, Request::Create(creq(&format!("/p{k}"), b"p", 0)));
        write(&mut h, Request::Create(creq(&format!("/p{k}/c"), b"c", 0)));
    }
    let mut cur = h.db.snapshot_begin();
    let mut content = Vec::new();
    let mut i = 0u32;
    while !h.db.snapshot_step(&mut cur, &mut content, 997) {
        for k in 0..5 {
            let n = (i * 131 + k * 7919) % 80_000;
            let p = format!("/wide/n{n}");
            if h.db.tree().get(&p).is_some() {
                // The freed slot goes to another node, the path to a later slot.
                write(&mut h, delete(p.clone()));
                write(&mut h, Request::Create(creq(&format!("/wide/t{i}-{k}"), b"t", 0)));
            }
            write(&mut h, Request::Create(creq(&p, b"again", 0)));
        }
        if i == 30 {
            for &k in &pairs {
                write(&mut h, delete(format!("/p{k}/c")));
                write(&mut h, delete(format!("/p{k}")));
            }
        }
        let data = Some(bytes::Bytes::from(format!("v{i}")));
        let path = format!("/wide/n{}", 1 + i % 6);
        write(&mut h, Request::SetData(SetDataRequest { path, data, version: -1 }));
        i += 1;
    }
    // The content does hold paths twice, and nodes without their parent.
    let mut paths = Vec::new();
    ContentParser::new()
        .feed(&content, &mut |r| {
            if let ContentRecord::Node(n) = r {
                paths.push(n.path.to_string());
            }
            Ok(())
        })
        .expect("parse");
    let distinct: BTreeSet<&str> = paths.iter().map(String::as_str).collect();
    assert!(distinct.len() < paths.len(), "some node written twice");
    let orphaned = |k: &u32| {
        distinct.contains(format!("/p{k}/c").as_str()) && !distinct.contains(format!("/p{k}").as_str())
    };
    assert!(pairs.iter().any(orphaned), "some child written without its parent");

    let start = cur.start_zxid();
    let mut rec = Recovery::new(load_snapshot(cfg(), &content).expect("loads"));
    let mut scratch = crate::WarmScratch::default();
    for chunk in log.chunks(32) {
        rec.warm(chunk.iter().map(|(_, t)| t), &mut scratch);
        for (hdr, txn) in chunk {
            rec.replay(hdr, txn);
        }
    }
    assert!(rec.replayed() > 0 && log.iter().any(|(hd, _)| hd.zxid > start));
    assert!(matches!(rec.snapshot_check(), SnapshotCheck::Verified { .. }), "{}", rec.snapshot_check());
    let got = rec.finish(0);
    assert_same(&got, &h.db);
}

/// A SNAP stream stepped with a byte bound: each step appends at least one item and ends once
/// it reached the bound (so at most one node past it), whatever its item count, and the steps
/// together are the same stream as unbounded steps (review of the leader's sync deadline: a
/// step of 1,024 large nodes was one write a learner had to take within initLimit).
#[test]
fn snap_stream_steps_bounded_in_bytes_make_the_same_stream() {
    let mut h = super::support::Harness::with(cfg());
    h.open_session(7, 4000);
    let big = vec![0x5a_u8; 10_000];
    for i in 0..30 {
        h.create(&format!("/n{i}"), 0);
        h.set_data(&format!("/n{i}"), &big, -1);
    }
    let db = h.db;
    let whole = db.apache_snap_to_vec();
    let mut cur = db.apache_snap_begin();
    let mut out = Vec::new();
    let mut steps = 0;
    loop {
        let before = out.len();
        let done = db.apache_snap_step_bytes(&mut cur, &mut out, 1_024, 25_000);
        steps += 1;
        let added = out.len() - before;
        assert!(added < 25_000 + big.len() + 256, "step {steps} appended {added} bytes");
        if done {
            break;
        }
        assert!(added > 0, "a step that is not the last appends something");
    }
    assert_eq!(out, whole);
    assert!(steps >= whole.len() / (25_000 + big.len() + 256), "{steps} steps for {} bytes", whole.len());
    // Unbounded in bytes, the same item count takes it in one step.
    let mut cur = db.apache_snap_begin();
    let mut one = Vec::new();
    assert!(db.apache_snap_step(&mut cur, &mut one, 1_024));
}
