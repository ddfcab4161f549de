//! Named scenarios of the server core's ensemble roles, one per finding of the replication
//! review that lives in the core (the whole-ensemble ones are in `tests/node_sim`): each drives
//! `ServerCore` with events, no sockets or clocks, and checks the exact actions that matter.
#![allow(clippy::disallowed_methods)]
mod core_support;

use bytes::Bytes;
use core_support::{connect, drain, now, WALL};
use std::sync::Arc;
use zk_proto::*;
use zk_quorum::wire::MovedSessions;
use zk_server::config::ServerConfig;
use zk_server::core::{
    Action, CoreConfig, CounterRule, Event, Role, ServerCore, SnapJob, SnapshotSettings, VoterSet,
};
use zk_server::settings::Settings;

fn core(snap_count: u64) -> ServerCore {
    let text = format!("tickTime=2000\ndataDir=/nonexistent\nclientPort=2181\nsnapCount={snap_count}\n");
    let cfg = ServerConfig::parse(&text, None).expect("zoo.cfg");
    let settings = Arc::new(Settings::from_config(&cfg).expect("settings"));
    let cfg = CoreConfig {
        settings: settings.clone(),
        server_id: 1,
        voters: VoterSet::solo(1),
        counter_rule: CounterRule::StopAtEpochEnd,
        snapshots: Some(SnapshotSettings {
            snap_count: settings.snap_count,
            snap_size_bytes: 0,
            pace_floor: 0,
            idle_ms: 0,
            nodes_per_step: zk_server::core::NODES_PER_STEP,
        }),
        snapshot_now: false,
        seed: 1,
        sasl_seed: [1; 32],
    };
    let tree = zk_tree::TreeConfig { tick_ms: settings.tick_ms, tree_digest: true, ..Default::default() };
    let mut db = zk_tree::Database::new(tree);
    db.start_leading(0);
    ServerCore::new(cfg, db, now(0))
}

/// A create of `path` under the root, as a leader would have prepped it for a tree whose root
/// has `parent_cversion - 1` as its cversion.
fn create_hdr(zxid: i64, path: &str, db: &zk_tree::Database) -> (TxnHeader, Txn) {
    let root = db.tree().get("/").map_or(0, |n| n.stat_persisted().cversion);
    let txn = Txn::Create(CreateTxn {
        path: path.into(),
        data: Some(Bytes::from_static(b"d")),
        acl: vec![Acl { perms: 31, id: Id { scheme: "world".into(), id: "anyone".into() } }],
        ephemeral: false,
        parent_cversion: root + 1,
    });
    (TxnHeader { client_id: 0, cxid: 0, zxid, time: WALL, txn_type: OpCode::Create.code() }, txn)
}

/// F2: a leader whose voter set is itself alone (one participant with observers, or the first
/// server of an ensemble bootstrapped by reconfiguration) still proposes every write to its
/// learners and tells them every commit; only a standalone server commits inline.
#[test]
fn a_single_voter_leader_proposes_and_commits_to_its_learners() {
    let mut c = core(100_000);
    c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, now(0));
    let actions = connect(&mut c, 1);
    assert!(actions.iter().any(|a| matches!(a, Action::Propose { .. })), "proposed: {actions:?}");
    let persisted = actions.iter().any(|a| matches!(a, Action::Persist { inline: false, .. }));
    assert!(persisted, "handed to the log through the queue, never inline: {actions:?}");
    c.handle(now(2), Event::Durable { zxid: 0x1_0000_0001 });
    let actions = drain(&mut c);
    assert!(
        actions.iter().any(|a| matches!(a, Action::Commit { zxid: 0x1_0000_0001 })),
        "its own durability is the quorum, and the learners hear the commit: {actions:?}"
    );
    // Standalone, the same write commits inline and tells nobody.
    let mut s = core(100_000);
    let actions = connect(&mut s, 1);
    assert!(actions.iter().any(|a| matches!(a, Action::Persist { inline: true, .. })), "{actions:?}");
    assert!(!actions.iter().any(|a| matches!(a, Action::Propose { .. })), "{actions:?}");
}

/// F9: a leader whose epoch's counter runs out leaves its role (StepDown: the replica elects
/// again and the next leader starts a new epoch); the process does not stop.
#[test]
fn an_exhausted_epoch_steps_the_leader_down_without_stopping() {
    let mut c = core(100_000);
    // As a learner, the core applies a commit near the end of epoch 1.
    c.set_role(Role::Learner { observer: false }, VoterSet::new(1, [2, 3]), None, now(0));
    let (hdr, txn) = create_hdr(0x1_ffff_fffd, "/near-the-end", c.database());
    c.handle(now(1), Event::Committed { hdr, txn, digest: None });
    drain(&mut c);
    assert_eq!(c.database().last_applied_zxid(), 0x1_ffff_fffd);
    c.set_role(Role::Leader { epoch: 1 }, VoterSet::new(1, [2, 3]), None, now(2));
    let actions = connect(&mut c, 3);
    assert!(
        actions.iter().any(|a| matches!(a, Action::Propose { .. })),
        "the last zxid of the epoch: {actions:?}"
    );
    // The next writes need zxids the epoch does not have.
    let mut actions = Vec::new();
    for cxid in 0..3 {
        let body = Request::Create(CreateRequest {
            path: format!("/n{cxid}"),
            data: None,
            acl: vec![Acl { perms: 31, id: Id { scheme: "world".into(), id: "anyone".into() } }],
            flags: 0,
        });
        // A learner's forwarded create: proposed as the leader's own clients' writes are.
        c.handle(
            now(4),
            Event::Forwarded {
                from: 7,
                session: 0x77,
                cxid,
                op: OpCode::Create.code(),
                body: Ok(body),
                auth: vec![],
            },
        );
        actions.extend(drain(&mut c));
    }
    assert!(
        actions.iter().any(
            |a| matches!(a, Action::StepDown { reason, diverged: false } if reason.contains("exhausted"))
        ),
        "the leader steps down: {actions:?}"
    );
    assert!(!actions.iter().any(|a| matches!(a, Action::Stop { .. })), "no stop: {actions:?}");
    assert_eq!(c.role(), Role::Down, "the core stops serving until the next role");
}

/// F1: a snapshot under way when the database is replaced (an election's reload, a TRUNC, a
/// SNAP) is abandoned: the thread is told to drop the file, and nothing more of it is
/// stepped over the new database. The next snapshot starts from the new one.
#[test]
fn a_snapshot_under_way_is_abandoned_when_the_database_is_replaced() {
    let mut c = core(2);
    c.set_role(Role::Learner { observer: false }, VoterSet::new(1, [2, 3]), None, now(0));
    let mut zxid = 0x1_0000_0000;
    for i in 0..5000 {
        zxid += 1;
        let (hdr, txn) = create_hdr(zxid, &format!("/n{i}"), c.database());
        c.handle(now(1), Event::Committed { hdr, txn, digest: None });
    }
    drain(&mut c);
    c.handle_timeout(now(2));
    let actions = drain(&mut c);
    assert!(actions.iter().any(|a| matches!(a, Action::Snapshot(SnapJob::Begin { .. }))), "{actions:?}");
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Snapshot(SnapJob::Finish))),
        "a large tree takes steps: {} nodes, {:?}",
        c.database().node_count(),
        actions.iter().map(|a| format!("{a:?}").chars().take(60).collect::<String>()).collect::<Vec<_>>()
    );
    // The database is replaced (an election reloads it from disk).
    let fresh = zk_tree::Database::new(c.database().config().clone());
    c.set_role(Role::Down, VoterSet::solo(1), Some(fresh), now(3));
    let actions = drain(&mut c);
    assert!(actions.iter().any(|a| matches!(a, Action::Snapshot(SnapJob::Abort))), "abandoned: {actions:?}");
    // Serving again, nothing of the old snapshot is stepped (that would panic: the cursor
    // belongs to the old database); chunks come back, the thread reports it done, and a new
    // snapshot may start.
    c.set_role(Role::Learner { observer: false }, VoterSet::new(1, [2, 3]), None, now(4));
    for _ in 0..8 {
        c.handle(now(5), Event::SnapshotChunkDone { buffer: Vec::new() });
        c.handle_timeout(now(5));
    }
    let actions = drain(&mut c);
    assert!(!actions.iter().any(|a| matches!(a, Action::Snapshot(SnapJob::Chunk(_)))), "{actions:?}");
    c.handle(now(6), Event::SnapshotDone { ok: false, purge_logs_before: None });
    drain(&mut c);
}

/// Followers snapshot again: the log bytes a learner hands to its log count towards the next
/// snapshot, as the leader's own do (they did not, so after its first snapshot a follower's
/// size condition never held again, and its log was never purged).
#[test]
fn a_learners_logged_proposals_count_towards_its_next_snapshot() {
    let mut c = core(10);
    c.set_role(Role::Learner { observer: false }, VoterSet::new(1, [2, 3]), None, now(0));
    let mut zxid = 0x1_0000_0000;
    let mut begun = 0;
    for round in 0..4 {
        for i in 0..40 {
            zxid += 1;
            let (hdr, txn) = create_hdr(zxid, &format!("/r{round}-{i}"), c.database());
            let mut batch = zk_log::RecordBatch::new();
            batch.push_digested(&hdr, &txn, None).expect("encodes");
            c.persist_replicated(batch);
            c.handle(now(1), Event::Durable { zxid });
            c.handle(now(1), Event::Committed { hdr, txn, digest: None });
        }
        for _ in 0..100 {
            c.handle_timeout(now(2));
            for a in drain(&mut c) {
                match a {
                    Action::Snapshot(SnapJob::Begin { .. }) => begun += 1,
                    Action::Snapshot(SnapJob::Chunk(buffer)) => {
                        c.handle(now(2), Event::SnapshotChunkDone { buffer })
                    }
                    Action::Snapshot(SnapJob::Finish) => {
                        c.handle(now(2), Event::SnapshotDone { ok: true, purge_logs_before: None })
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(begun >= 3, "a learner took {begun} snapshots in four rounds of writes");
}

fn enospc() -> zk_log::LogError {
    zk_log::LogError::Io { op: "append", file: "log".into(), source: std::io::Error::from_raw_os_error(28) }
}

/// Review N2: a learner still syncing (Down) whose log refuses a batch for a full disk leaves
/// the sync (StepDown) instead of taking the proposals back as a standalone server does: the
/// refused records would be a hole in its log that a later batch's durability covers up.
#[test]
fn a_full_disk_while_syncing_steps_down() {
    let mut c = core(100_000);
    c.set_role(Role::Down, VoterSet::solo(1), None, now(0));
    let (hdr, txn) = create_hdr(0x1_0000_0001, "/a", c.database());
    let mut batch = zk_log::RecordBatch::new();
    batch.push_digested(&hdr, &txn, None).expect("encodes");
    c.persist_replicated(batch);
    drain(&mut c);
    c.handle(now(1), Event::LogFailed { error: enospc() });
    let actions = drain(&mut c);
    assert!(actions.iter().any(|a| matches!(a, Action::StepDown { diverged: false, .. })), "{actions:?}");
}

/// Review N1: while a learner syncs, the pairs after a fuzzy SNAP pass through trees the leader
/// never had, so their digests are not compared one by one; the tree is compared with the last
/// pair's digest once the sync ends (UPTODATE), and a difference then is a divergence.
#[test]
fn a_syncing_learner_compares_its_tree_once_the_sync_ends() {
    for honest in [true, false] {
        let mut c = core(100_000);
        c.set_role(Role::Down, VoterSet::solo(1), None, now(0));
        let (hdr, txn) = create_hdr(0x1_0000_0001, "/a", c.database());
        // The digest the leader predicted: right, or wrong in its low bit.
        let mut probe = zk_tree::Database::new(c.database().config().clone());
        probe.apply(&hdr, &txn);
        let right = probe.tree_digest().expect("a digest");
        let want = if honest { right } else { right ^ 1 };
        let digest = Some(TxnDigest { version: zk_tree::digest::DIGEST_VERSION, tree_digest: want });
        // Mid-sync, a pair whose digest does not match sends nobody away.
        c.handle(now(1), Event::Committed { hdr, txn, digest });
        let actions = drain(&mut c);
        assert!(!actions.iter().any(|a| matches!(a, Action::StepDown { .. })), "mid-sync: {actions:?}");
        c.set_role(Role::Learner { observer: false }, VoterSet::new(1, [2, 3]), None, now(2));
        let actions = drain(&mut c);
        let stepped = actions.iter().any(|a| matches!(a, Action::StepDown { diverged: true, .. }));
        assert_eq!(stepped, !honest, "at the end of the sync: {actions:?}");
    }
}

/// Review N1's variant: a snapshot's content may run ahead of the log (a follower applies a
/// commit before its own copy of the proposal is durable); it is finished only once the log
/// holds everything it reflects, so a power loss never leaves a snapshot ahead of its log.
#[test]
fn a_snapshot_is_finished_once_the_log_holds_what_it_reflects() {
    let mut c = core(2);
    c.set_role(Role::Learner { observer: false }, VoterSet::new(1, [2, 3]), None, now(0));
    for (i, zxid) in (0x1_0000_0001..0x1_0000_0005).enumerate() {
        let (hdr, txn) = create_hdr(zxid, &format!("/n{i}"), c.database());
        c.handle(now(1), Event::Committed { hdr, txn, digest: None });
    }
    // The log has only the first two durable.
    c.handle(now(1), Event::Durable { zxid: 0x1_0000_0002 });
    drain(&mut c);
    let mut finished = false;
    for _ in 0..20 {
        c.handle_timeout(now(2));
        for a in drain(&mut c) {
            match a {
                Action::Snapshot(SnapJob::Chunk(buffer)) => {
                    c.handle(now(2), Event::SnapshotChunkDone { buffer })
                }
                Action::Snapshot(SnapJob::Finish) => finished = true,
                _ => {}
            }
        }
    }
    assert!(!finished, "finished while the log lags the snapshot's content");
    c.handle(now(3), Event::Durable { zxid: 0x1_0000_0004 });
    let actions = drain(&mut c);
    assert!(actions.iter().any(|a| matches!(a, Action::Snapshot(SnapJob::Finish))), "{actions:?}");
}

/// A leader handing its leadership over proposes nothing: its own clients' writes are held
/// (a session's read waits behind its held write), and so are learners' forwarded writes and
/// createSessions, all in arrival order; no session expires and no client connects. Given up,
/// what was held is proposed in the order it came, and the client's writes are answered, then
/// its read.
#[test]
fn a_leader_handing_over_holds_its_writes_and_proposes_them_in_order_if_given_up() {
    let mut c = leader_holding_writes();
    assert!(c.writes_held());
    let req = |xid: i32, op: OpCode, body: Request| Event::Request {
        conn: 1,
        xid,
        op: op.code(),
        body: Ok(body),
        raw: Bytes::new(),
        received_us: 3000,
    };
    c.handle(now(3), req(1, OpCode::Create, create("/a")));
    c.handle(
        now(3),
        req(2, OpCode::GetData, Request::GetData(GetDataRequest { path: "/a".into(), watch: false })),
    );
    c.handle(now(3), req(3, OpCode::Create, create("/b")));
    c.handle(
        now(4),
        Event::Forwarded {
            from: 7,
            session: 0x0200_0000_0000_0001,
            cxid: 1,
            op: OpCode::Create.code(),
            body: Ok(create("/f")),
            auth: vec![],
        },
    );
    c.handle(
        now(4),
        Event::ForwardedCreateSession { session: 0x0200_0000_0000_0002, cxid: 0, timeout_ms: 6000 },
    );
    // A new client is not taken, and nothing expires, however late it is.
    let req2 = ConnectRequest { time_out: 30_000, ..Default::default() };
    let remote = "127.0.0.1:5001".parse().expect("address");
    c.handle(
        now(5),
        Event::Connect {
            conn: 2,
            remote,
            req: req2,
            ids: vec![],
            stats: Arc::new(zk_server::stats::ConnStats::new()),
        },
    );
    c.handle_timeout(now(10_000_000));
    let held = drain(&mut c);
    assert!(
        !held
            .iter()
            .any(|a| matches!(a, Action::Propose { .. } | Action::Persist { .. } | Action::Reply { .. })),
        "{held:?}"
    );
    assert!(held.iter().any(|a| matches!(a, Action::Close { conn: 2 })), "{held:?}");
    assert_eq!(c.poll_timeout().filter(|t| *t <= 10_000_000), None, "no deadline due while held");
    assert_eq!(c.in_flight(), 0);
    assert!(!c.hold_full());
    // Given up: the held creates, the learner's create and its createSession, in order.
    c.release_writes(now(10_000_001));
    assert!(!c.writes_held());
    let proposed: Vec<i64> = drain(&mut c)
        .into_iter()
        .filter_map(|a| match a {
            Action::Propose { payloads } => Some(payloads.into_iter().map(|(z, _)| z).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(proposed, vec![0x1_0000_0002, 0x1_0000_0003, 0x1_0000_0004, 0x1_0000_0005]);
    c.handle(now(10_000_002), Event::Durable { zxid: 0x1_0000_0005 });
    let xids: Vec<i32> = drain(&mut c)
        .into_iter()
        .filter_map(|a| match a {
            Action::Reply { frame, .. } => {
                let mut r = zk_proto::jute::Reader::new(frame.slice(4..));
                Some(ReplyHeader::read(&mut r).expect("header").xid)
            }
            _ => None,
        })
        .collect();
    assert_eq!(xids, vec![1, 2, 3], "the writes and the read behind the first, in order");
}

/// A handover that goes through: the leader's clients' requests held meanwhile (a write and the
/// read queued behind it) are not lost with the role: the connection is kept while the server
/// is down, and once it follows the new leader they run in order, the write forwarded to it.
#[test]
fn a_handover_that_goes_through_hands_its_held_requests_to_the_kept_connections() {
    let mut c = leader_holding_writes();
    let write = create("/a");
    let mut raw = bytes::BytesMut::new();
    write.encode(&mut raw);
    let raw = raw.freeze();
    c.handle(
        now(3),
        Event::Request {
            conn: 1,
            xid: 1,
            op: OpCode::Create.code(),
            body: Ok(write),
            raw: raw.clone(),
            received_us: 3000,
        },
    );
    let get = Request::GetData(GetDataRequest { path: "/a".into(), watch: false });
    c.handle(
        now(3),
        Event::Request {
            conn: 1,
            xid: 2,
            op: OpCode::GetData.code(),
            body: Ok(get),
            raw: Bytes::new(),
            received_us: 3000,
        },
    );
    drain(&mut c);
    // The leader leaves its role: the connection is kept, and nothing is proposed or answered.
    c.set_role(Role::Down, VoterSet::solo(1), None, now(4));
    assert!(!c.writes_held());
    let down = drain(&mut c);
    assert!(
        !down
            .iter()
            .any(|a| matches!(a, Action::Close { conn: 1 } | Action::Propose { .. } | Action::Reply { .. })),
        "{down:?}"
    );
    // Following the new leader: the write goes to it as the client sent it, the read waits.
    c.set_role(Role::Learner { observer: false }, VoterSet::solo(1), None, now(5));
    let serving = drain(&mut c);
    let forwarded: Vec<(i32, Bytes)> = serving
        .iter()
        .filter_map(|a| match a {
            Action::Forward { cxid, body, .. } => Some((*cxid, body.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(forwarded, vec![(1, raw)], "{serving:?}");
    assert!(
        !serving.iter().any(|a| matches!(a, Action::Reply { .. } | Action::Close { conn: 1 })),
        "{serving:?}"
    );
}

/// Two held writes of one session with the same xid (a client may reuse one), the handover going
/// through: both are carried to the kept connection, and when it closes both permits come back
/// (matched by xid, the second was neither carried nor released: handover review, finding 1).
#[test]
fn held_writes_with_one_xid_are_all_carried_and_their_permits_come_back() {
    let mut c = leader_holding_writes();
    for p in ["/x", "/y"] {
        let body = Ok(create(p));
        c.handle(
            now(3),
            Event::Request {
                conn: 1,
                xid: 7,
                op: OpCode::Create.code(),
                body,
                raw: Bytes::new(),
                received_us: 3000,
            },
        );
    }
    let permits = |a: &[Action]| a.iter().filter(|a| matches!(a, Action::ReleasePermit)).count();
    let mut released = permits(&drain(&mut c));
    c.set_role(Role::Down, VoterSet::solo(1), None, now(4));
    released += permits(&drain(&mut c));
    c.handle(now(5), Event::Closed { conn: 1 });
    released += permits(&drain(&mut c));
    assert_eq!(released, 2, "two requests, two permits");
}

/// A leader of epoch 1 with one client session (connection 1), holding writes as one handing
/// over does.
fn leader_holding_writes() -> ServerCore {
    let (mut c, _) = leader_with_a_session();
    c.hold_writes();
    c
}

/// A leader of epoch 1 with one client session (connection 1), made durable; and its id.
fn leader_with_a_session() -> (ServerCore, i64) {
    let mut c = core(100_000);
    c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, now(0));
    connect(&mut c, 1);
    c.handle(now(2), Event::Durable { zxid: 0x1_0000_0001 });
    drain(&mut c);
    let sid = c.database().sessions().iter().next().map(|(s, _)| s).expect("a session");
    (c, sid)
}

/// A create of `path` with data "d", open to anyone.
fn create(path: &str) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"d")),
        acl: vec![Acl { perms: 31, id: Id { scheme: "world".into(), id: "anyone".into() } }],
        flags: 0,
    })
}

/// A learner's client with a write forwarded and a read behind it when its leader hands over:
/// told that nothing it forwarded since the last commit was proposed ([`Event::Unproposed`]),
/// it keeps the connection through the election and forwards the write again, as the client
/// sent it, to the next leader; the read still waits behind it. Not told (a leader lost), or
/// told before it applied the leader's last commit, it closes the connection as before: the
/// write's fate is unknown.
#[test]
fn a_learner_forwards_again_what_a_leader_that_handed_over_never_proposed() {
    // (told, its last commit applied): is the connection kept, the write forwarded again?
    for (told, through_applied) in [(true, true), (false, true), (true, false)] {
        let (mut c, raw) = learner_with_a_write_forwarded();
        if told {
            let last = c.database().last_applied_zxid();
            let through = if through_applied { last } else { last + 1 };
            c.handle(now(6), Event::Unproposed { through, moved: MovedSessions::Listed(vec![]) });
        }
        c.set_role(Role::Down, VoterSet::solo(1), None, now(7));
        let down = drain(&mut c);
        let closed = down.iter().any(|a| matches!(a, Action::Close { conn: 1 }));
        let resends = told && through_applied;
        assert_eq!(closed, !resends, "told {told}, applied {through_applied}: {down:?}");
        assert!(!down.iter().any(|a| matches!(a, Action::Reply { .. } | Action::Forward { .. })), "{down:?}");
        c.set_role(Role::Learner { observer: false }, VoterSet::solo(1), None, now(8));
        let serving = drain(&mut c);
        let forwarded: Vec<(i32, Bytes)> = forwards(&serving).into_iter().map(|(x, b, _)| (x, b)).collect();
        let want = if resends { vec![(1, raw.clone())] } else { vec![] };
        assert_eq!(forwarded, want, "told {told}, applied {through_applied}: {serving:?}");
        assert!(!serving.iter().any(|a| matches!(a, Action::Reply { .. })), "{serving:?}");
    }
}

/// A learner whose client (connection 1, a session made while it led) has a create of /a
/// forwarded and a getData of /a queued behind it; the create's body as sent.
fn learner_with_a_write_forwarded() -> (ServerCore, Bytes) {
    let (mut c, _) = learner_with_a_session();
    let write = create("/a");
    let raw = encoded(&write);
    let op = OpCode::Create.code();
    c.handle(
        now(5),
        Event::Request { conn: 1, xid: 1, op, body: Ok(write), raw: raw.clone(), received_us: 5000 },
    );
    let get = Request::GetData(GetDataRequest { path: "/a".into(), watch: false });
    let op = OpCode::GetData.code();
    c.handle(
        now(5),
        Event::Request { conn: 1, xid: 2, op, body: Ok(get), raw: Bytes::new(), received_us: 5000 },
    );
    let sent = drain(&mut c);
    assert!(sent.iter().any(|a| matches!(a, Action::Forward { cxid: 1, .. })), "{sent:?}");
    (c, raw)
}

/// Review finding R4 (the learner's side): a session the leader that handed over saw move to
/// another server (the client left this connection, perhaps half-open, and revalidated
/// elsewhere) is not kept and its write not forwarded again: that leader would have refused the
/// write (SESSIONMOVED), and the next one starts with no owners to refuse it with. A word that
/// could not list every moved session forwards nothing again. Sessions not named are kept as
/// before.
#[test]
fn a_learner_forwards_nothing_again_for_a_session_the_leader_saw_move() {
    let cases = [
        (MovedSessions::Listed(vec![]), true),
        (MovedSessions::Unlisted, false),
        (MovedSessions::Listed(vec![0x7777]), true),
    ];
    for (moved, resends) in cases {
        let (mut c, raw) = learner_with_a_write_forwarded();
        let z = c.database().last_applied_zxid();
        let served = told_with_moved_then_following(&mut c, z, moved.clone());
        let again: Vec<Bytes> = forwards(&served).into_iter().map(|(_, b, _)| b).collect();
        assert_eq!(again, if resends { vec![raw.clone()] } else { vec![] }, "{moved:?}: {served:?}");
    }
    let (mut c, _) = learner_with_a_write_forwarded();
    let sid = c.database().sessions().iter().next().map(|(s, _)| s).expect("a session");
    let z = c.database().last_applied_zxid();
    c.handle(now(7), Event::Unproposed { through: z, moved: MovedSessions::Listed(vec![sid]) });
    c.set_role(Role::Down, VoterSet::solo(1), None, now(7));
    let down = drain(&mut c);
    assert!(down.iter().any(|a| matches!(a, Action::Close { conn: 1 })), "moved: not kept: {down:?}");
    c.set_role(Role::Learner { observer: false }, VoterSet::solo(1), None, now(8));
    let served = drain(&mut c);
    assert!(forwards(&served).is_empty(), "moved session's write forwarded again: {served:?}");
}

/// Review finding R4 (the leader's side): a leader handing over names, to each learner, the
/// sessions whose forwarded requests it held or whose owner changed while it held, that are now
/// owned elsewhere; owner changes the replica decided that the core has not taken yet count.
#[test]
fn a_leader_handing_over_names_the_sessions_that_moved_away_from_each_learner() {
    let (mut c, sid) = leader_with_a_session();
    // Learner on quorum connection 7 owns the session; writes are held; 7 forwards a write.
    c.handle(now(3), Event::SessionOwner { session: sid, from: 7 });
    c.hold_writes();
    let write = create("/w");
    let forwarded = |from| Event::Forwarded {
        from,
        session: sid,
        cxid: 1,
        op: OpCode::Create.code(),
        body: Ok(write.clone()),
        auth: vec![],
    };
    c.handle(now(4), forwarded(7));
    assert_eq!(c.moved_away(7, &[]), MovedSessions::Listed(vec![]), "still 7's");
    // The client revalidates through learner 9 while the write is held.
    c.handle(now(5), Event::SessionOwner { session: sid, from: 9 });
    assert_eq!(c.moved_away(7, &[]), MovedSessions::Listed(vec![sid]));
    assert_eq!(c.moved_away(9, &[]), MovedSessions::Listed(vec![]), "9 owns it now");
    assert_eq!(c.moved_away(8, &[]), MovedSessions::Listed(vec![sid]), "moved while held");
    // Not yet in the core: back to 7, as the replica decided.
    let back = Event::SessionOwner { session: sid, from: 7 };
    assert_eq!(c.moved_away(7, &[&back]), MovedSessions::Listed(vec![]));
    assert_eq!(c.moved_away(9, &[&back]), MovedSessions::Listed(vec![sid]));
    // A change before the hold, with nothing held from the learner, is not named.
    let (mut c2, sid2) = leader_with_a_session();
    assert_eq!(sid2, sid, "sessions are numbered alike");
    c2.handle(now(3), Event::SessionOwner { session: sid, from: 9 });
    c2.hold_writes();
    assert_eq!(c2.moved_away(7, &[]), MovedSessions::Listed(vec![]));
    // ... but it is once 7's write for it is held, or queued for the core (review of R4).
    let queued = forwarded(7);
    assert_eq!(c2.moved_away(7, &[&queued]), MovedSessions::Listed(vec![sid]));
    assert_eq!(c2.moved_away(8, &[&queued]), MovedSessions::Listed(vec![]), "8 forwarded nothing");
    c2.handle(now(4), forwarded(7));
    assert_eq!(c2.moved_away(7, &[]), MovedSessions::Listed(vec![sid]));
}

/// A learner back on a new quorum connection keeps its clients' sessions: the leader moves what
/// the old connection owned to the new one, so the learner's next write of such a session is not
/// refused as coming from elsewhere (SESSIONMOVED), while another learner's stale write of it
/// still is (review helper-98, MAJOR 11, of a version that forgot the owners instead).
#[test]
fn a_learner_back_on_a_new_connection_keeps_its_sessions() {
    let (mut c, sid) = leader_with_a_session();
    c.handle(now(3), Event::SessionOwner { session: sid, from: 7 });
    let forwarded = |from, cxid, path: &str| Event::Forwarded {
        from,
        session: sid,
        cxid,
        op: OpCode::Create.code(),
        body: Ok(create(path)),
        auth: vec![],
    };
    // Learner 9's stale write (the client left it for 7) is refused before and after.
    c.handle(now(4), forwarded(9, 1, "/stale-before"));
    c.handle(now(4), Event::Durable { zxid: 0x1_0000_0002 });
    c.handle(now(5), Event::LearnerReconnected { from: 7, to: 8 });
    c.handle(now(6), forwarded(8, 2, "/back"));
    c.handle(now(6), Event::Durable { zxid: 0x1_0000_0003 });
    c.handle(now(7), forwarded(9, 3, "/stale-after"));
    c.handle(now(7), forwarded(7, 4, "/old-connection"));
    c.handle(now(7), Event::Durable { zxid: 0x1_0000_0005 });
    drain(&mut c);
    let tree = c.database().tree();
    assert!(tree.get("/back").is_some(), "the learner back on connection 8 writes");
    for stale in ["/stale-before", "/stale-after", "/old-connection"] {
        assert!(tree.get(stale).is_none(), "{stale} applied");
    }
}

/// Review of R4, finding 1: the leader's own client's write held while it hands over, the
/// client having revalidated through a learner meanwhile (the old connection half-open): the
/// write is not carried into the kept connection (the next leader, with no owners, would apply
/// it); the connection is closed as one with a write in flight. A session still the leader's
/// own is carried as before.
#[test]
fn a_leaders_own_held_write_of_a_session_that_moved_is_not_carried() {
    for moves in [true, false] {
        let mut c = leader_holding_writes();
        let sid = c.database().sessions().iter().next().map(|(s, _)| s).expect("a session");
        let write = create("/own");
        let raw = encoded(&write);
        let op = OpCode::Create.code();
        c.handle(now(3), Event::Request { conn: 1, xid: 1, op, body: Ok(write), raw, received_us: 3000 });
        drain(&mut c);
        if moves {
            c.handle(now(4), Event::SessionOwner { session: sid, from: 9 });
        }
        c.set_role(Role::Down, VoterSet::solo(1), None, now(5));
        let down = drain(&mut c);
        let closed = down.iter().any(|a| matches!(a, Action::Close { conn: 1 }));
        assert_eq!(closed, moves, "moved {moves}: {down:?}");
        c.set_role(Role::Learner { observer: false }, VoterSet::solo(1), None, now(6));
        let again = forwards(&drain(&mut c)).len();
        assert_eq!(again, usize::from(!moves), "moved {moves}: forwarded again {again}");
    }
}

/// A member asked to stop moves its clients away (`core/drain.rs`): no new connection is taken,
/// a connection is closed only once its session has nothing waiting and it has sent nothing for
/// a moment (its answers go out first), and whatever is left is closed at the deadline. A
/// standalone server does not drain.
#[test]
fn a_member_stopping_closes_each_client_connection_once_it_is_quiet() {
    let mut standalone = core(100_000);
    connect(&mut standalone, 1);
    assert!(!standalone.drain_clients(now(10), 2_000), "a standalone server has nowhere to send them");

    let (mut c, _) = learner_with_a_write_forwarded();
    // The write is in flight at 5 ms: not closed while it waits, however long it has been.
    assert!(c.drain_clients(now(100), 2_000));
    c.handle_timeout(now(100 + 1_999));
    let a = drain(&mut c);
    assert!(!a.iter().any(|a| matches!(a, Action::Close { .. })), "{a:?}");
    assert_eq!(c.client_connections(), 1);
    // At the deadline the busy one is closed too.
    c.handle_timeout(now(100 + 2_000));
    let a = drain(&mut c);
    assert!(a.iter().any(|a| matches!(a, Action::Close { conn: 1 })), "{a:?}");
    assert_eq!(c.client_connections(), 0);
    assert!(c.poll_timeout().is_none_or(|t| t > 100 + 2_000), "no busy loop once none is left");
}

/// An idle client on a follower: its task is asked to close it as soon as it has been quiet for
/// the moment, not before, with the count of requests the core saw; a request resets its moment
/// (and tells the core that the task found it busy); a task that found part of a request and no
/// request follows is asked again a moment later; the connection goes once its task closes it.
#[test]
fn a_quiet_client_is_closed_after_the_moment_and_a_request_restarts_it() {
    use zk_server::core::drain::DRAIN_QUIET_MS;
    let mut c = core(100_000);
    c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, now(0));
    connect(&mut c, 1);
    c.handle(now(2), Event::Durable { zxid: 0x1_0000_0001 });
    drain(&mut c);
    let t = 1_000;
    let get = Request::Exists(ExistsRequest { path: "/".into(), watch: false });
    let op = OpCode::Exists.code();
    c.handle(
        now(t),
        Event::Request { conn: 1, xid: 1, op, body: Ok(get), raw: Bytes::new(), received_us: t * 1000 },
    );
    assert!(c.drain_clients(now(t + 1), 2_000));
    assert_eq!(c.poll_timeout(), Some(t + DRAIN_QUIET_MS));
    c.handle_timeout(now(t + DRAIN_QUIET_MS - 1));
    let a = drain(&mut c);
    assert!(a.iter().any(|a| matches!(a, Action::Reply { .. })), "the read is answered: {a:?}");
    assert!(!a.iter().any(|a| matches!(a, Action::Close { .. })), "{a:?}");
    // A new connection is refused while draining.
    let remote = "127.0.0.1:5001".parse().expect("address");
    let req = core_support::new_session_request();
    let stats = Arc::new(zk_server::stats::ConnStats::new());
    c.handle(now(t + 5), Event::Connect { conn: 2, remote, req, ids: vec![], stats });
    assert!(drain(&mut c).iter().any(|a| matches!(a, Action::Close { conn: 2 })));
    c.handle_timeout(now(t + DRAIN_QUIET_MS));
    let a = drain(&mut c);
    assert!(a.iter().any(|a| matches!(a, Action::CloseWhenQuiet { conn: 1, requests: 1 })), "{a:?}");
    assert!(!a.iter().any(|a| matches!(a, Action::Close { conn: 1 })), "its task decides: {a:?}");
    assert_eq!(c.client_connections(), 1);
    // The task had read a second request the core had not seen: it stays open, the request is
    // answered, and the next ask counts it.
    let t2 = t + DRAIN_QUIET_MS + 1;
    let get = Request::Exists(ExistsRequest { path: "/".into(), watch: false });
    c.handle(
        now(t2),
        Event::Request { conn: 1, xid: 2, op, body: Ok(get), raw: Bytes::new(), received_us: t2 * 1000 },
    );
    let a = drain(&mut c);
    assert!(a.iter().any(|a| matches!(a, Action::Reply { conn: 1, .. })), "{a:?}");
    assert!(!a.iter().any(|a| matches!(a, Action::CloseWhenQuiet { .. })), "not quiet yet: {a:?}");
    assert!(c.poll_timeout().is_some_and(|at| at <= t2 + DRAIN_QUIET_MS));
    c.handle_timeout(now(t2 + DRAIN_QUIET_MS - 1));
    assert!(!drain(&mut c).iter().any(|a| matches!(a, Action::CloseWhenQuiet { .. })));
    assert_eq!(c.poll_timeout(), Some(t2 + DRAIN_QUIET_MS));
    c.handle_timeout(now(t2 + DRAIN_QUIET_MS));
    let a = drain(&mut c);
    assert!(a.iter().any(|a| matches!(a, Action::CloseWhenQuiet { conn: 1, requests: 2 })), "{a:?}");
    // The task held part of a request that never came whole: asked again a moment later, not
    // at every look before.
    c.handle_timeout(now(t2 + DRAIN_QUIET_MS + 1));
    assert!(!drain(&mut c).iter().any(|a| matches!(a, Action::CloseWhenQuiet { .. })));
    assert_eq!(c.poll_timeout(), Some(t2 + 2 * DRAIN_QUIET_MS));
    c.handle_timeout(now(t2 + 2 * DRAIN_QUIET_MS));
    let a = drain(&mut c);
    assert!(a.iter().any(|a| matches!(a, Action::CloseWhenQuiet { conn: 1, requests: 2 })), "{a:?}");
    // The task closed it: reported as a client's close.
    c.handle(now(t2 + 2 * DRAIN_QUIET_MS + 1), Event::Closed { conn: 1 });
    assert_eq!(c.client_connections(), 0);
}

/// A handshake on connection `conn` (a new session of 30 s) at `at` ms; the actions.
fn handshake(c: &mut ServerCore, conn: u64, at: u64) -> Vec<Action> {
    let remote = "127.0.0.1:5002".parse().expect("address");
    let req = core_support::new_session_request();
    let stats = Arc::new(zk_server::stats::ConnStats::new());
    c.handle(now(at), Event::Connect { conn, remote, req, ids: vec![], stats });
    drain(c)
}

fn touches(actions: &[Action], conn: u64) -> bool {
    actions.iter().any(|a| match a {
        Action::Close { conn: c } | Action::Frame { conn: c, .. } => *c == conn,
        Action::Forward { .. } => true,
        _ => false,
    })
}

/// A member that went down from serving (an election after its leader's loss) holds the
/// handshakes of new connections until it serves again, instead of closing them as Apache does:
/// in a reconnect storm the clients of a lost leader that reach a member still electing are
/// served when it serves, not sent to pause and try again. A held handshake is closed after a
/// third of its session's timeout, or forgotten when its client goes; a member that never served
/// (just started) or that keeps no clients (`zkrs.keepClientsThroughElection=false`) closes at
/// once.
#[test]
fn a_member_down_from_serving_holds_new_handshakes_until_it_serves_again() {
    let (mut c, _) = learner_with_a_session();
    c.set_role(Role::Down, VoterSet::solo(1), None, now(10));
    drain(&mut c);
    for conn in [2, 3] {
        let a = handshake(&mut c, conn, 11);
        assert!(!touches(&a, conn), "held: {a:?}");
    }
    c.handle(now(12), Event::Closed { conn: 3 });
    assert!(c.poll_timeout().is_some_and(|t| t <= 11 + 10_000), "its deadline is a timer");
    c.set_role(Role::Learner { observer: false }, VoterSet::solo(1), None, now(20));
    let a = drain(&mut c);
    let create = OpCode::CreateSession.code();
    let forwarded: Vec<i64> = a
        .iter()
        .filter_map(|a| match a {
            Action::Forward { session, op, .. } if *op == create => Some(*session),
            _ => None,
        })
        .collect();
    assert_eq!(forwarded.len(), 1, "the held new session goes to the leader, once: {a:?}");
    assert!(!a.iter().any(|a| matches!(a, Action::Close { conn: 2 | 3 })), "{a:?}");

    // Down again: one held past a third of 30 s is closed unanswered.
    c.set_role(Role::Down, VoterSet::solo(1), None, now(30));
    drain(&mut c);
    assert!(!touches(&handshake(&mut c, 4, 31), 4));
    c.handle_timeout(now(31 + 9_999));
    assert!(!touches(&drain(&mut c), 4));
    c.handle_timeout(now(31 + 10_000));
    assert!(drain(&mut c).iter().any(|a| matches!(a, Action::Close { conn: 4 })));
    // Held, then a role that cannot serve the ensemble's sessions: closed.
    assert!(!touches(&handshake(&mut c, 5, 10_040), 5));
    c.set_role(Role::ReadOnly, VoterSet::solo(1), None, now(10_041));
    assert!(drain(&mut c).iter().any(|a| matches!(a, Action::Close { conn: 5 })));

    // Never served: closed at once.
    let mut fresh = core(100_000);
    fresh.set_role(Role::Down, VoterSet::new(1, [2, 3]), None, now(0));
    drain(&mut fresh);
    assert!(handshake(&mut fresh, 2, 1).iter().any(|a| matches!(a, Action::Close { conn: 2 })));
}

/// A client that pipelines and pauses is asked to close at the first moment it is quiet: right
/// behind the answer that leaves its session with nothing waiting once it has sent nothing for
/// DRAIN_QUIET_MS, or when that time is up, not at a moment of a coarser poll later in its
/// pause, which can meet its next batch on the wire (a kazoo writer lost a batch of 31 creates so
/// in a five-server rolling restart, 2026-11-30).
#[test]
fn a_member_stopping_closes_a_connection_at_the_first_quiet_moment() {
    use zk_server::core::drain::DRAIN_QUIET_MS;
    // (answered at, closed by that answer's event or by the timer at t + DRAIN_QUIET_MS)
    let t = 1_000;
    for (last_answer, behind) in [(t + DRAIN_QUIET_MS + 2, true), (t + 3, false)] {
        let mut c = core(100_000);
        c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, now(0));
        connect(&mut c, 1);
        c.handle(now(2), Event::Durable { zxid: 0x1_0000_0001 });
        drain(&mut c);
        // Two creates in flight when the drain starts: nothing is closed while they wait.
        for xid in 1..=2 {
            let op = OpCode::Create.code();
            let body = Ok(create(&format!("/p{xid}")));
            c.handle(
                now(t),
                Event::Request { conn: 1, xid, op, body, raw: Bytes::new(), received_us: t * 1000 },
            );
        }
        drain(&mut c);
        assert!(c.drain_clients(now(t + 1), 2_000));
        assert!(!drain(&mut c).iter().any(|a| matches!(a, Action::Close { .. })));
        // The first is answered: one still waits, the connection stays.
        c.handle(now(t + 2), Event::Durable { zxid: 0x1_0000_0002 });
        let a = drain(&mut c);
        assert!(a.iter().any(|a| matches!(a, Action::Reply { conn: 1, .. })), "{a:?}");
        assert!(!a.iter().any(|a| matches!(a, Action::Close { .. })), "{a:?}");
        c.handle(now(last_answer), Event::Durable { zxid: 0x1_0000_0003 });
        let a = drain(&mut c);
        let reply = a.iter().position(|a| matches!(a, Action::Reply { conn: 1, .. }));
        let close = a.iter().position(|a| matches!(a, Action::CloseWhenQuiet { conn: 1, requests: 2 }));
        assert!(reply.is_some(), "{a:?}");
        if behind {
            assert!(close.is_some() && reply < close, "asked to close right behind the answer: {a:?}");
        } else {
            assert!(close.is_none(), "not yet quiet: {a:?}");
            assert_eq!(c.poll_timeout(), Some(t + DRAIN_QUIET_MS));
            c.handle_timeout(now(t + DRAIN_QUIET_MS));
            let a = drain(&mut c);
            assert!(a.iter().any(|a| matches!(a, Action::CloseWhenQuiet { conn: 1, requests: 2 })), "{a:?}");
        }
        c.handle(now(t + 100), Event::Closed { conn: 1 });
        assert_eq!(c.client_connections(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Review of e6346a8 (the re-forwarding at a handover): its findings, each a test.

/// A learner with a session on connection 1 (made while it led); returns the core and the
/// session id.
fn learner_with_a_session() -> (ServerCore, i64) {
    let mut c = core(100_000);
    c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, now(0));
    connect(&mut c, 1);
    c.handle(now(2), Event::Durable { zxid: 0x1_0000_0001 });
    c.set_role(Role::Down, VoterSet::solo(1), None, now(3));
    c.set_role(Role::Learner { observer: false }, VoterSet::solo(1), None, now(4));
    drain(&mut c);
    // The one session the tree holds.
    let sid = c.database().sessions().iter().next().map(|(s, _)| s).expect("a session");
    (c, sid)
}

/// A client request on connection 1 at 5 ms.
fn request_on_1(c: &mut ServerCore, xid: i32, op: i32, body: Result<Request, RequestError>, raw: Bytes) {
    c.handle(now(5), Event::Request { conn: 1, xid, op, body, raw, received_us: 5000 });
}

/// A request's body as a client sends it.
fn encoded(r: &Request) -> Bytes {
    let mut raw = bytes::BytesMut::new();
    r.encode(&mut raw);
    raw.freeze()
}

/// Review finding R1: a learner's undecodable sync, answered by the leader's SYNC, then a create
/// committed behind it. The sync's answer is matched (every forwarded sync is counted, whatever
/// its body), the create answered, and after the old leader's word nothing committed is
/// forwarded again (before the fix the sync was never matched, the create stayed queued although
/// applied, and went to the next leader again: applied twice).
#[test]
fn a_committed_write_behind_an_undecodable_sync_is_never_forwarded_again() {
    let (mut c, sid) = learner_with_a_session();
    // xid 1: a sync whose body does not decode (forwarded, with an empty body).
    let bad = Request::decode(OpCode::Sync.code(), &mut zk_proto::Reader::new(Bytes::from_static(&[0, 0])));
    assert!(bad.is_err());
    request_on_1(&mut c, 1, OpCode::Sync.code(), bad, Bytes::from_static(&[0, 0]));
    // xid 2: create /b.
    let b = create("/b");
    let raw = encoded(&b);
    request_on_1(&mut c, 2, OpCode::Create.code(), Ok(b), raw.clone());
    let sent = drain(&mut c);
    assert_eq!(sent.iter().filter(|a| matches!(a, Action::Forward { .. })).count(), 2, "{sent:?}");
    // The leader answers the sync (SYNC) and commits the create.
    c.handle(now(6), Event::SyncDone);
    let z = c.database().last_applied_zxid() + 1;
    let (mut hdr, txn) = create_hdr(z, "/b", c.database());
    hdr.client_id = sid;
    hdr.cxid = 2;
    c.handle(now(6), Event::Committed { hdr, txn, digest: None });
    let answered = drain(&mut c);
    assert!(c.database().tree().get("/b").is_some(), "applied");
    assert!(
        answered.iter().any(|a| matches!(a, Action::Reply { .. })),
        "the sync and the create are answered: {answered:?}"
    );
    // The leader hands over and says so; the learner leaves, keeps, and serves the next leader.
    let served = told_then_following(&mut c, z);
    let again: Vec<i32> = forwards(&served).into_iter().map(|(cxid, _, _)| cxid).collect();
    assert!(!again.contains(&2), "create /b, committed and applied at 0x{z:x}, forwarded again: {again:?}");
}

/// Review finding R1 (second trigger): a commit the learner cannot match to its session's queue
/// (here the createSession txn an older leader made of a createSession sent after the
/// handshake), then a create committed behind it: the session's queue no longer says what was
/// committed, so it is closed at the leader's word, never forwarded again.
#[test]
fn a_committed_write_behind_a_queue_that_stopped_matching_is_never_forwarded_again() {
    let (mut c, sid) = learner_with_a_session();
    let op = OpCode::CreateSession.code();
    let raw1 = Bytes::from_static(&[0, 0, 0x75, 0x30]);
    let body = Request::decode(op, &mut zk_proto::Reader::new(raw1.clone()));
    request_on_1(&mut c, 1, op, body, raw1);
    let b = create("/b");
    let raw = encoded(&b);
    request_on_1(&mut c, 2, OpCode::Create.code(), Ok(b), raw);
    let sent = drain(&mut c);
    assert_eq!(sent.iter().filter(|a| matches!(a, Action::Forward { .. })).count(), 2, "{sent:?}");
    // What the leader commits for it (replica's forwarded_event: ForwardedCreateSession).
    let z1 = c.database().last_applied_zxid() + 1;
    let hdr = TxnHeader { client_id: sid, cxid: 1, zxid: z1, time: WALL, txn_type: op };
    c.handle(
        now(6),
        Event::Committed { hdr, txn: Txn::CreateSession(CreateSessionTxn { time_out: 0 }), digest: None },
    );
    let (mut hdr, txn) = create_hdr(z1 + 1, "/b", c.database());
    hdr.client_id = sid;
    hdr.cxid = 2;
    c.handle(now(6), Event::Committed { hdr, txn, digest: None });
    drain(&mut c);
    assert!(c.database().tree().get("/b").is_some(), "applied");
    let served = told_then_following(&mut c, z1 + 1);
    let again: Vec<i32> = forwards(&served).into_iter().map(|(cxid, _, _)| cxid).collect();
    assert!(!again.contains(&2), "create /b, committed and applied, forwarded again: {again:?}");
}

/// Review finding R3: a write whose connection gained an identity (addauth) after it was
/// forwarded is not forwarded again (it would carry an identity it did not have): the
/// connection is closed at the leader's word, as without it.
#[test]
fn a_write_is_not_forwarded_again_with_identities_added_after_it() {
    let (mut c, _sid) = learner_with_a_session();
    let a = create("/a");
    let raw = encoded(&a);
    request_on_1(&mut c, 1, OpCode::Create.code(), Ok(a), raw);
    let auth =
        Request::Auth(AuthPacket { auth_type: 0, scheme: "digest".into(), auth: Bytes::from_static(b"u:p") });
    let raw = encoded(&auth);
    request_on_1(&mut c, 2, OpCode::Auth.code(), Ok(auth), raw);
    let first: Vec<Vec<Id>> = forwards(&drain(&mut c)).into_iter().map(|(_, _, auth)| auth).collect();
    let z = c.database().last_applied_zxid();
    let served = told_then_following(&mut c, z);
    let again: Vec<Vec<Id>> = forwards(&served).into_iter().map(|(_, _, auth)| auth).collect();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(again.is_empty(), "forwarded again with the identities of a later addauth: {again:?}");
}

/// Review finding R1 (the leader's side): a learner's client sending createSession after its
/// handshake (its session exists) gets a failed write, as the leader's own client does, not a
/// second createSession of its session.
#[test]
fn a_forwarded_create_session_of_an_existing_session_is_a_failed_write() {
    let (mut c, sid) = leader_with_a_session();
    c.handle(now(3), Event::ForwardedCreateSession { session: sid, cxid: 1, timeout_ms: 0 });
    let payloads: Vec<Bytes> = drain(&mut c)
        .into_iter()
        .filter_map(|a| match a {
            Action::Propose { payloads } => Some(payloads),
            _ => None,
        })
        .flatten()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(payloads.len(), 1, "one proposal");
    let hdr = TxnHeader::read(&mut zk_proto::Reader::new(payloads[0].clone())).expect("header");
    assert_eq!((hdr.client_id, hdr.cxid, hdr.txn_type), (sid, 1, OpCode::Error.code()));
}

/// A learner told by its leader that nothing after `through` was proposed, through the election
/// to following the next leader: what it does then.
fn told_then_following(c: &mut ServerCore, through: i64) -> Vec<Action> {
    told_with_moved_then_following(c, through, MovedSessions::Listed(vec![]))
}

/// [`told_then_following`], the leader's word naming the sessions `moved` away.
fn told_with_moved_then_following(c: &mut ServerCore, through: i64, moved: MovedSessions) -> Vec<Action> {
    c.handle(now(7), Event::Unproposed { through, moved });
    c.set_role(Role::Down, VoterSet::solo(1), None, now(7));
    drain(c);
    c.set_role(Role::Learner { observer: false }, VoterSet::solo(1), None, now(8));
    drain(c)
}

/// The requests `actions` forward to the leader: xid, body and identities.
fn forwards(actions: &[Action]) -> Vec<(i32, Bytes, Vec<Id>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Forward { cxid, body, auth, .. } => Some((*cxid, body.clone(), auth.clone())),
            _ => None,
        })
        .collect()
}
