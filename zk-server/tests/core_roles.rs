//! Named scenarios of the server core's ensemble roles, one per finding of the replication
//! review that lives in the core (the whole-ensemble ones are in `tests/node_sim`): each drives
//! `ServerCore` with events, no sockets or clocks, and checks the exact actions that matter.
#![allow(clippy::disallowed_methods)]
mod core_support;

use bytes::Bytes;
use core_support::{connect, drain, now, WALL};
use std::sync::Arc;
use zk_proto::*;
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
    let mut c = core(100_000);
    c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, now(0));
    connect(&mut c, 1);
    c.handle(now(2), Event::Durable { zxid: 0x1_0000_0001 });
    drain(&mut c);
    c.hold_writes();
    c
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
