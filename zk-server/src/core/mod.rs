//! The server core: a deterministic state machine that owns the database and runs the write path.
//!
//! Events go in ([`ServerCore::handle`], [`ServerCore::handle_timeout`]) with the time as an
//! argument ([`Now`]); actions come out ([`ServerCore::poll_action`]): frames for connections,
//! batches for the log, jobs for the snapshot thread, proposals and commits for the quorum layer.
//! The core never reads a clock, draws from the OS's randomness, touches a socket or a file, or
//! spawns anything; the driver (`crate::driver`) does all of that around it, and tests drive it
//! with scripts of events (`zk-server/tests/core_scripts.rs`).
//!
//! Every state change follows one path, standalone or replicated: a write is prepped into a
//! transaction and given a zxid by the [`Proposer`], handed to the log, committed once a quorum of
//! voters has it durable (a standalone server is a voter set of one: its own log's report is the
//! quorum), applied in zxid order, and answered. Reads run against applied state after every
//! earlier request of the same session ([`SessionQueues`]).
//!
//! Parts, by the state each owns: [`ConnRegistry`] (connections and their sessions),
//! [`SessionQueues`] (FIFO per session, writes keyed by session and cxid), [`Proposer`] (zxids,
//! proposals in flight, ACK counting), [`reads`] (a function of the database and the request),
//! [`SnapshotPolicy`] (when and how fast to snapshot, the snapshot being taken).
#![deny(clippy::disallowed_methods)]

pub mod conns;
pub mod drain;
pub mod handover;
mod kept;
pub mod proposer;
pub mod queues;
pub mod reads;
pub mod reconfig;
pub mod reply;
mod requests;
mod restore;
mod roles;
mod sasl;
mod sessions;
pub mod snapshot_policy;
mod write_path;
pub mod zxid;

pub use conns::{ConnId, ConnRegistry, ConnState};
pub use proposer::{AckLedger, CounterRule, Proposal, Proposer, ServerId, VoterSet};
pub use queues::{Pending, PendingRead, PendingWrite, SessionQueues};
pub use reconfig::Membership;
pub use snapshot_policy::{
    Requested, SnapJob, SnapshotPolicy, SnapshotSettings, SnapshotStatus, CHUNK_CREDITS, NODES_PER_STEP,
};
pub use zxid::Zxid;

use crate::settings::Settings;
use crate::stats::{ConnStats, ServerStats};
use bytes::{Bytes, BytesMut};
use rand::rngs::StdRng;
use rand::SeedableRng;
use reply::{write_reply, Body};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, error, info, warn};
use zk_proto::frame::write_frame;
use zk_proto::jute::Jute;
use zk_proto::*;
use zk_tree::{AuthIds, Database, Outcome, RequestCtx, SessionId, WatcherId};

/// Batches of at most this many transactions are written on the driver's thread when nothing
/// else is in flight (a lone client's write).
pub const INLINE_RECORDS_MAX: usize = 4;

/// The time, as the driver read it just before handing an event in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Monotonic microseconds since any fixed origin (the driver's start).
    pub mono_us: u64,
    /// Wall clock, ms since the Unix epoch: what transaction headers carry (znode ctime/mtime).
    pub wall_ms: i64,
}

impl Now {
    /// Monotonic milliseconds.
    pub fn mono_ms(&self) -> u64 {
        self.mono_us / 1000
    }
}

/// The part this server plays in its ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Alone: a voter set of one that preps, proposes and commits every write itself.
    Standalone,
    /// Not serving clients: electing a leader, or syncing with one. Connections are refused.
    Down,
    /// The established leader of `epoch`: preps and proposes every write (its clients' and the
    /// learners' forwarded ones); a proposal commits once a quorum of voters has it durable.
    Leader {
        /// The epoch it leads.
        epoch: u32,
    },
    /// A follower (votes) or an observer (does not): forwards writes to the leader and applies
    /// what the leader commits; serves reads from its own applied state.
    Learner {
        /// Whether it is an observer.
        observer: bool,
    },
    /// Cut off from its quorum with `readonlymode.enabled`: serves clients that accept a
    /// read-only server from its applied state, in sessions of its own that nothing else knows
    /// and that end with this role; writes and syncs get NOTREADONLY; nothing is logged.
    ReadOnly,
}

/// What the core is told.
#[derive(Debug)]
pub enum Event {
    /// A handshake arrived on a new connection.
    Connect {
        /// The connection.
        conn: ConnId,
        /// Peer address (for ip ACLs and `cons`).
        remote: SocketAddr,
        /// The decoded handshake.
        req: ConnectRequest,
        /// Identities the transport proved: a verified client certificate's `x509:<subject>`
        /// (and `super:<subject>` for the configured super user); empty on plain connections.
        ids: Vec<Id>,
        /// Counters the connection task keeps.
        stats: Arc<ConnStats>,
    },
    /// A request after the handshake (it holds one outstanding-request permit).
    Request {
        /// The connection.
        conn: ConnId,
        /// Header xid.
        xid: i32,
        /// Header opcode.
        op: i32,
        /// The decoded body, or why it did not decode.
        body: Result<Request, RequestError>,
        /// The body's bytes as the client sent them: a learner forwards a write as it came,
        /// without encoding it again.
        raw: Bytes,
        /// When it was read, µs on the same clock as [`Now::mono_us`].
        received_us: u64,
    },
    /// The connection is gone (closed by the client, or its outbox overflowed).
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// A client's authentication failed before it had a connection here (its TLS handshake):
    /// counted with the failed addauths.
    AuthFailed,
    /// This server's log has every transaction through `zxid` durable.
    Durable {
        /// The zxid.
        zxid: i64,
    },
    /// The log could not make a batch durable.
    LogFailed {
        /// Why.
        error: zk_log::LogError,
    },
    /// Leader: follower `sid` started a sync and holds durably nothing past `to` any more: its
    /// ACK is lowered to that (zk-quorum's `LeaderAction::AckReset`).
    AckReset {
        /// The follower.
        sid: ServerId,
        /// The most it can still hold durably.
        to: i64,
    },
    /// Voter `sid` has every proposal through `zxid` durable (a follower's ACK).
    Ack {
        /// The voter.
        sid: ServerId,
        /// The zxid.
        zxid: i64,
    },
    /// The snapshot thread wrote a chunk; its buffer comes back for reuse.
    SnapshotChunkDone {
        /// The chunk's buffer.
        buffer: Vec<u8>,
    },
    /// The snapshot thread finished (or abandoned) a snapshot.
    SnapshotDone {
        /// Whether it was written.
        ok: bool,
        /// Log records before this zxid are covered by the snapshots kept.
        purge_logs_before: Option<i64>,
    },
    /// A retention pass (autopurge.purgeInterval) finished.
    Retained {
        /// Log records before this zxid are covered by the snapshots kept.
        purge_logs_before: Option<i64>,
    },
    /// The snapshot thread is gone: no more snapshots.
    SnapshotThreadGone,
    /// An operator asks for a snapshot now (`csnp`, the AdminServer's `snapshot`): one starts
    /// at once unless one is under way, which then stands for it. None starts while the server
    /// is down or read-only (as for the snapshots the thresholds start), on a leader that serves
    /// no clients, within `snapshot.minRequestIntervalSeconds` of the last snapshot's start, or
    /// without a snapshot thread; [`ServerCore::take_snapshot_answer`] tells the asker what
    /// happened.
    SnapshotNow,
    /// The server's archive (`zkrs.backup.to`) took files that retention kept for it: retention
    /// runs again now, so that they go without waiting for the next snapshot (none comes while
    /// nothing is written) or the autopurge timer.
    ArchiveMoved,
    /// An operator restores this standalone server's tree from a snapshot (the AdminServer's
    /// `restore`): every client connection is closed and none is taken until it is done; once
    /// every proposal made before it is durable, `db` takes the old tree's place as of the first
    /// zxid never used ([`Action::InstallRestored`] makes it durable, [`Event::LogReset`] ends
    /// it). Refused in an ensemble, or with another restore under way;
    /// [`ServerCore::take_restore_answer`] tells the asker what happened.
    Restore {
        /// The tree to put in place, as the snapshot held it.
        db: Box<Database>,
    },
    /// Standalone: the log was reset to start after `zxid`, durably (a restore's
    /// [`Action::InstallRestored`]).
    LogReset {
        /// The zxid the log starts after.
        zxid: i64,
    },
    /// Leader: a learner forwarded a client's request (REQUEST).
    Forwarded {
        /// The learner's quorum connection (a forwarded sync is answered on it).
        from: u64,
        /// The client's session.
        session: SessionId,
        /// The client's xid.
        cxid: i32,
        /// The opcode.
        op: i32,
        /// The request body (createSession: the negotiated timeout), or why it did not decode.
        body: Result<Request, RequestError>,
        /// The client's identities, as its server knows them.
        auth: Vec<Id>,
    },
    /// Leader: a learner's client asked for a new session (REQUEST of createSession, whose body
    /// is the timeout).
    ForwardedCreateSession {
        /// The session id the learner chose (its server id in the top byte).
        session: SessionId,
        /// The request's xid.
        cxid: i32,
        /// The negotiated timeout.
        timeout_ms: i32,
    },
    /// Leader: a learner's client resumed this session there (REVALIDATE): it owns it now.
    SessionOwner {
        /// The session.
        session: SessionId,
        /// The learner's quorum connection.
        from: u64,
    },
    /// Leader: the learner that owned sessions through quorum connection `from` (closed) now
    /// speaks through `to`: it came back (a learner keeps its clients' sessions across its own
    /// reconnection, `zkrs.keepClientsThroughElection`). What `from` owned, `to` owns: the
    /// learner's next writes of those sessions are its own, and any other learner's stale one
    /// is still refused (SESSIONMOVED).
    LearnerReconnected {
        /// The closed connection.
        from: u64,
        /// The new one.
        to: u64,
    },
    /// Learner: the leader's answer to a [`Action::Revalidate`].
    Revalidated {
        /// The session.
        session: SessionId,
        /// Whether it may carry on here.
        valid: bool,
    },
    /// Leader: learners report these sessions alive (their PING replies).
    Touch {
        /// Session ids and timeouts.
        sessions: Vec<(SessionId, i32)>,
    },
    /// Learner: the leader committed this transaction; apply it (they come in zxid order).
    Committed {
        /// Its header.
        hdr: TxnHeader,
        /// The transaction.
        txn: Txn,
        /// The tree digest the leader expects once it applies, when its proposal carried one.
        digest: Option<TxnDigest>,
    },
    /// Learner: the leader answered the oldest forwarded sync.
    SyncDone,
    /// Learner: the leader handed its leadership over and proposed nothing this learner
    /// forwarded that has not been committed by now (it committed through `through`). When the
    /// learner leaves its role, connections waiting only on such requests are kept and the
    /// requests forwarded again to the next leader (`kept.rs`).
    Unproposed {
        /// The last zxid the leader committed.
        through: i64,
        /// The sessions the leader saw move to another server: their connections here are
        /// closed rather than kept, and their requests not forwarded again.
        moved: zk_quorum::wire::MovedSessions,
    },
    /// The ensemble's configuration in force (at each role change and each activation).
    Membership(Membership),
    /// Leader: the followers synced with it now.
    SyncedFollowers(std::collections::BTreeSet<i64>),
    /// The server cannot go on (its disk no longer rebuilds a state it can vouch for): stop
    /// with an error, as at a failed start.
    Fatal {
        /// Why, for the log.
        reason: String,
    },
}

/// What the core asks the driver to do, in order.
#[derive(Debug)]
pub enum Action {
    /// Send a reply to a request; its outstanding-request permit is freed once written.
    Reply {
        /// The connection.
        conn: ConnId,
        /// The whole frame.
        frame: Bytes,
    },
    /// Send a frame that answers no request (watch events, the handshake's answer).
    Frame {
        /// The connection.
        conn: ConnId,
        /// The whole frame.
        frame: Bytes,
    },
    /// The connection's session is bound: start reading its requests.
    SessionReady {
        /// The connection.
        conn: ConnId,
    },
    /// Flush what was queued for the connection, then close it.
    Close {
        /// The connection.
        conn: ConnId,
    },
    /// A member stopping (`core/drain.rs`): close the connection behind what was queued for it,
    /// but only if it is quiet where the core cannot see: its task has handed over no more than
    /// `requests` requests, holds no request or part of one, and finds no bytes waiting in the
    /// socket. Otherwise nothing happens, and the core hears of the requests as usual (the
    /// core decides when a connection looks quiet; only its task knows what it has read since).
    /// The connection, once closed, is reported closed like one its client closed.
    CloseWhenQuiet {
        /// The connection.
        conn: ConnId,
        /// Requests the core was handed from it.
        requests: u64,
    },
    /// A request will get no reply: free its outstanding-request permit.
    ReleasePermit,
    /// Make these transactions durable in the log, after every batch before them, and report
    /// [`Event::Durable`] (or [`Event::LogFailed`]).
    Persist {
        /// The encoded records.
        records: zk_log::RecordBatch,
        /// Nothing else is in flight and this server is the only voter: the driver may write and
        /// sync on its own thread (saving two thread hand-offs) instead of queueing.
        inline: bool,
    },
    /// Send these proposals to the other voters and the observers (ensemble leader only).
    Propose {
        /// Each proposal's zxid and PROPOSAL data (its jute TxnHeader and txn), in zxid order:
        /// the bytes of the log batch handed over just before, not encoded a second time.
        payloads: Vec<(i64, Bytes)>,
    },
    /// `zxid` is committed: tell the followers (ensemble leader only).
    Commit {
        /// The zxid.
        zxid: i64,
    },
    /// A reconfiguration is committed (ensemble leader only): tell the followers to activate
    /// it (COMMITANDACTIVATE; INFORMANDACTIVATE to observers), then activate it here.
    CommitAndActivate {
        /// The reconfiguration's zxid.
        zxid: i64,
        /// The server that leads the new configuration (this one, unless it leaves the voters).
        designated: i64,
        /// The new configuration string.
        config: Bytes,
    },
    /// Learner: send this request to the leader (REQUEST).
    Forward {
        /// The client's session.
        session: SessionId,
        /// The client's xid.
        cxid: i32,
        /// The opcode.
        op: i32,
        /// The request record without its header (createSession: the timeout, 4 bytes).
        body: Bytes,
        /// The client's identities.
        auth: Vec<Id>,
    },
    /// Learner: a client resumed this session here: tell the leader (REVALIDATE), which makes
    /// this server the session's owner.
    Revalidate {
        /// The session.
        session: SessionId,
        /// Its negotiated timeout.
        timeout_ms: i32,
    },
    /// Leader: everything proposed before a learner's forwarded sync is committed: send it SYNC.
    SyncReady {
        /// The learner's quorum connection.
        to: u64,
    },
    /// After a full-disk refusal the core took back every uncommitted proposal: the log may
    /// accept batches again.
    ResumeLog,
    /// Ensemble only: this server's log cannot take what its role needs (a full disk), so it
    /// leaves the role (the core is down already) and elects again, as Apache's servers do when
    /// their log fails (ZOOKEEPER-2247). The next role starts from what is on disk.
    StepDown {
        /// Why, for the log.
        reason: String,
        /// The server's tree disagreed with the digest the ensemble's proposals carried: the
        /// replica rebuilds it from disk, and asks its leader for a SNAP if it disagrees again.
        diverged: bool,
    },
    /// Log records before `zxid` are covered by the snapshots kept: remove them.
    PurgeLogBefore {
        /// The zxid.
        zxid: i64,
    },
    /// Work for the snapshot thread.
    Snapshot(SnapJob),
    /// A restore put its tree in place as of `zxid`: write that database whole as the snapshot
    /// at `zxid` and reset the log to start after it, before anything else is logged (as for a
    /// snapshot a learner receives).
    InstallRestored {
        /// The restored tree's zxid.
        zxid: i64,
    },
    /// The server cannot go on (a log failure other than a full disk): stop with an error.
    Stop {
        /// Why, for the log.
        reason: String,
    },
}

/// How the core is set up.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Resolved settings.
    pub settings: Arc<Settings>,
    /// This server's id: the top byte of the session ids it hands out (0 standalone).
    pub server_id: u8,
    /// Whose ACKs count.
    pub voters: VoterSet,
    /// How zxids move past an epoch's last counter.
    pub counter_rule: CounterRule,
    /// Snapshots, when a snapshot thread exists.
    pub snapshots: Option<SnapshotSettings>,
    /// Take a snapshot right away (after a start that replayed the log).
    pub snapshot_now: bool,
    /// Seed for the core's randomness that needs no secrecy (snapshot thresholds).
    pub seed: u64,
    /// Key for the SASL nonces' generator (a ChaCha stream): the driver draws it from the
    /// operating system's CSPRNG.
    pub sasl_seed: [u8; 32],
}

/// The server core. See the module docs.
#[derive(Debug)]
pub struct ServerCore {
    role: Role,
    /// Counts [`Self::set_role`] calls: a snapshot served to an operator is rebuilt from what
    /// this server held in one serving term, never across a role change
    /// ([`Self::snapshot_source_through`]).
    role_generation: u64,
    settings: Arc<Settings>,
    db: Database,
    conns: ConnRegistry,
    queues: SessionQueues,
    proposer: Proposer,
    /// Sessions being created, by id: the connection waiting and its timeout.
    connecting: HashMap<SessionId, (ConnId, i32)>,
    /// Learner: resumed sessions whose handshake waits for the leader's REVALIDATE answer, and
    /// the connection that asked.
    revalidating: HashMap<SessionId, ConnId>,
    snapshots: Option<SnapshotPolicy>,
    /// What became of the last operator's request for a snapshot, until the asker takes it.
    snapshot_answer: Option<crate::view::SnapshotAnswer>,
    /// A restore under way ([`Event::Restore`]): no client is served and nothing is proposed
    /// meanwhile.
    restoring: Option<restore::Restoring>,
    /// What became of the last restore, until the asker takes it.
    restore_answer: Option<crate::view::RestoreAnswer>,
    stats: ServerStats,
    actions: VecDeque<Action>,
    buf: BytesMut,
    rng: StdRng,
    /// SASL nonces: a CSPRNG keyed with [`CoreConfig::sasl_seed`].
    sasl_rng: StdRng,
    next_session: i64,
    /// Read-only role: the sessions it made (id to timeout), known to no other server.
    ro_sessions: HashMap<SessionId, i32>,
    started_ms: u64,
    /// Everything through this zxid is durable in this server's log (as its reports said; reset
    /// to the database's last applied zxid when the database is replaced).
    log_durable: i64,
    /// A learner still syncing (Role::Down): the digest the last applied pair carried, checked
    /// once the sync is done (the pairs after a fuzzy SNAP leave intermediate trees no leader
    /// ever had, so only the end of the sync is comparable).
    sync_digest: Option<(i64, TxnDigest)>,
    /// When the server last left its role for a divergence (within the window counted).
    divergences: VecDeque<u64>,
    /// Set while the log refuses writes for a full disk (since the first refusal, mono ms).
    disk_full_since_ms: Option<u64>,
    /// The memory brake's log line: when it was last written (mono ms) and the refusals since.
    memory_brake_log: (Option<u64>, u64),
    next_reap_ms: u64,
    next_purge_ms: Option<u64>,
    retain_in_flight: bool,
    stopped: bool,
    /// Leader: learners' syncs waiting for everything proposed before them to commit.
    syncs_waiting: VecDeque<(i64, u64)>,
    /// Learner: the local sessions whose syncs were forwarded, oldest first.
    syncs_forwarded: VecDeque<(SessionId, i32)>,
    /// Learner: the paths of forwarded syncs, for their replies.
    sync_paths: HashMap<(SessionId, i32), String>,
    /// Learner: sessions with requests since the leader last heard of them.
    touched: HashMap<SessionId, i32>,
    /// Leader: which server each session is connected to (`None`: this one; `Some`: the
    /// learner on that quorum connection), as Apache's session owners: a write arriving from
    /// elsewhere comes from a connection the session has left (SESSIONMOVED).
    owners: HashMap<SessionId, Option<u64>>,
    /// Leader handing over: the sessions whose owner changed while writes were held (see
    /// [`Self::moved_away`]).
    owner_moves: std::collections::HashSet<SessionId>,
    /// The ensemble's configuration and a reconfiguration in flight.
    reconfig: reconfig::ReconfigState,
    /// Leader handing over: nothing is proposed (see `handover.rs`).
    writes_held: bool,
    /// ... and its own clients' writes and learners' forwarded requests wait here, in arrival
    /// order.
    held: VecDeque<handover::Held>,
    /// ... of which learners' forwarded requests.
    held_forwards: usize,
    /// Down after serving: the client connections kept meanwhile and their held requests
    /// ([`kept`]).
    kept: Option<kept::Kept>,
    /// A learner about to leave its role: when it last heard from its leader (mono ms), the
    /// start of its kept connections' time ([`Self::note_leader_contact`]).
    leader_contact_ms: Option<u64>,
    /// A learner whose leader handed over: the last zxid that leader committed; every request
    /// still queued once this server applied it was never proposed ([`Event::Unproposed`]).
    unproposed: Option<(i64, zk_quorum::wire::MovedSessions)>,
    /// Learner: sessions one of whose commits (or sync answers) did not match the request their
    /// queue waited on first; their queues are never forwarded again ([`Event::Unproposed`]).
    /// Cleared at each role change.
    queue_desync: std::collections::HashSet<SessionId>,
    /// A member asked to stop: when its last client connections are closed (mono ms;
    /// `drain.rs`).
    drain_until: Option<u64>,
    /// ... and when it next looks for quiet connections (mono ms).
    drain_next_ms: u64,
    /// While draining: connections answered during the event being handled, looked at once it is
    /// (`drain.rs`: one whose session has nothing left waiting is closed right behind its answer).
    drain_answered: Vec<ConnId>,
}

/// Opcodes whose requests become transactions.
fn is_write_op(op: i32) -> bool {
    OpCode::from_i32(op).is_some_and(|o| o.is_write())
}

impl ServerCore {
    /// A core over `db` (recovered, with [`Database::start_leading`] done), started at `now`.
    pub fn new(cfg: CoreConfig, db: Database, now: Now) -> ServerCore {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let now_ms = now.mono_ms();
        let snapshots = cfg.snapshots.map(|s| SnapshotPolicy::new(s, cfg.snapshot_now, now_ms, &mut rng));
        let purge_hours = u64::from(cfg.settings.purge_interval_hours);
        ServerCore {
            role: Role::Standalone,
            role_generation: 0,
            syncs_waiting: VecDeque::new(),
            syncs_forwarded: VecDeque::new(),
            sync_paths: HashMap::new(),
            touched: HashMap::new(),
            owners: HashMap::new(),
            owner_moves: std::collections::HashSet::new(),
            reconfig: reconfig::ReconfigState::default(),
            writes_held: false,
            held: VecDeque::new(),
            held_forwards: 0,
            kept: None,
            leader_contact_ms: None,
            unproposed: None,
            queue_desync: std::collections::HashSet::new(),
            drain_until: None,
            drain_next_ms: 0,
            drain_answered: Vec::new(),
            proposer: Proposer::new(db.last_applied_zxid(), cfg.voters, cfg.counter_rule),
            // After recovery the log holds at least what the database applied.
            log_durable: db.last_applied_zxid(),
            next_session: zk_tree::first_session_id(cfg.server_id, now.wall_ms),
            ro_sessions: HashMap::new(),
            next_reap_ms: now_ms + cfg.settings.container_check_interval_ms.max(10),
            next_purge_ms: (purge_hours > 0).then(|| now_ms + purge_hours * 3_600_000),
            settings: cfg.settings,
            db,
            conns: ConnRegistry::default(),
            queues: SessionQueues::default(),
            connecting: HashMap::new(),
            revalidating: HashMap::new(),
            snapshots,
            snapshot_answer: None,
            restoring: None,
            restore_answer: None,
            stats: ServerStats::new(),
            actions: VecDeque::new(),
            buf: BytesMut::with_capacity(64 * 1024),
            rng,
            sasl_rng: StdRng::from_seed(cfg.sasl_seed),
            started_ms: now_ms,
            disk_full_since_ms: None,
            memory_brake_log: (None, 0),
            sync_digest: None,
            divergences: VecDeque::new(),
            retain_in_flight: false,
            stopped: false,
        }
    }

    /// The database (read-only).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Proposals not yet committed.
    pub fn in_flight(&self) -> usize {
        self.proposer.in_flight()
    }

    /// The last zxid assigned (or, after a role change, the last applied).
    pub fn last_zxid(&self) -> i64 {
        self.proposer.last_zxid().to_i64()
    }

    /// The role in force.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Handles one event.
    pub fn handle(&mut self, now: Now, ev: Event) {
        if self.stopped {
            if let Event::Request { .. } = ev {
                self.actions.push_back(Action::ReleasePermit);
            }
            return;
        }
        if self.writes_held && matches!(ev, Event::Forwarded { .. } | Event::ForwardedCreateSession { .. }) {
            return self.hold_forwarded(ev);
        }
        match ev {
            Event::Connect { conn, remote, req, ids, stats } => {
                self.on_connect(now, conn, remote, req, ids, stats)
            }
            Event::Request { conn, xid, op, body, raw, received_us } => {
                self.on_request(now, conn, xid, op, body, raw, received_us)
            }
            Event::Closed { conn } => self.on_closed(conn),
            Event::AuthFailed => self.stats.auth_failed += 1,
            Event::Durable { zxid } => self.on_durable(now, zxid),
            Event::LogFailed { error } => {
                if !self.restore_failed(&error.to_string()) {
                    self.on_log_failed(now, error)
                }
            }
            Event::AckReset { sid, to } => self.proposer.reset_ack(sid, to),
            Event::Ack { sid, zxid } => {
                if self.proposer.ack(sid, zxid).is_some() {
                    self.commit_ready(now);
                }
            }
            Event::SnapshotChunkDone { buffer } => {
                if let Some(s) = self.snapshots.as_mut() {
                    s.chunk_done(buffer);
                }
            }
            Event::SnapshotDone { ok, purge_logs_before } => {
                if let Some(s) = self.snapshots.as_mut() {
                    s.done(ok);
                }
                if let Some(zxid) = purge_logs_before {
                    self.actions.push_back(Action::PurgeLogBefore { zxid });
                }
            }
            Event::Retained { purge_logs_before } => {
                self.retain_in_flight = false;
                if let Some(zxid) = purge_logs_before {
                    self.actions.push_back(Action::PurgeLogBefore { zxid });
                }
            }
            Event::SnapshotThreadGone => {
                warn!("the snapshot thread stopped; no more snapshots");
                self.snapshots = None;
            }
            Event::SnapshotNow => self.on_snapshot_now(now),
            Event::ArchiveMoved => {
                if self.snapshots.is_some() && !self.retain_in_flight {
                    info!("the archive took what retention kept for it: applying retention");
                    self.retain_in_flight = true;
                    self.actions.push_back(Action::Snapshot(SnapJob::Retain));
                }
            }
            Event::Restore { db } => self.on_restore(now, db),
            Event::LogReset { zxid } => self.on_log_reset(now, zxid),
            Event::Forwarded { from, session, cxid, op, body, auth } => {
                self.on_forwarded(now, from, session, cxid, op, body, auth)
            }
            Event::ForwardedCreateSession { session, cxid, timeout_ms } => {
                self.on_forwarded_create_session(now, session, cxid, timeout_ms)
            }
            Event::SessionOwner { session, from } => {
                if matches!(self.role, Role::Leader { .. }) {
                    self.set_owner(session, Some(from));
                }
            }
            Event::LearnerReconnected { from, to } => {
                if matches!(self.role, Role::Leader { .. }) {
                    for owner in self.owners.values_mut() {
                        if *owner == Some(from) {
                            *owner = Some(to);
                        }
                    }
                }
            }
            Event::Revalidated { session, valid } => self.on_revalidated(now, session, valid),
            Event::Touch { sessions } => {
                for (sid, _) in sessions {
                    self.db.expiry_mut().touch(sid, now.mono_ms());
                }
            }
            Event::Committed { hdr, txn, digest } => {
                // A learner applies its leader's commits, and so does one still syncing (Down):
                // the DIFF it receives is committed history.
                if matches!(self.role, Role::Learner { .. } | Role::Down) {
                    self.apply(now, Proposal { digest, ..Proposal::new(hdr, txn, false) });
                } else {
                    warn!("a commit from a leader reached a server that is not a learner; ignored");
                }
            }
            Event::Unproposed { through, moved } => {
                if matches!(self.role, Role::Learner { .. }) {
                    self.unproposed = Some((through, moved));
                }
            }
            Event::SyncDone => {
                if let Some((sid, cxid)) = self.syncs_forwarded.pop_front() {
                    self.complete_sync(now, sid, cxid);
                }
            }
            Event::Membership(m) => self.on_membership(m, now),
            Event::SyncedFollowers(s) => self.on_synced_followers(s),
            Event::Fatal { reason } => self.stop(reason),
        }
        if self.restoring.is_some() {
            self.finish_restore(now);
        }
        if !self.drain_answered.is_empty() {
            self.close_answered(now.mono_ms());
        }
    }

    /// Runs what is due at `now`: session expiry, container reaping, the retention timer, and
    /// one step of a snapshot being taken (or the start of one that is due). The driver calls it
    /// after every batch of events and when [`Self::poll_timeout`] passes.
    pub fn handle_timeout(&mut self, now: Now) {
        if self.stopped {
            return;
        }
        let ms = now.mono_ms();
        if !self.drain_answered.is_empty() {
            self.close_answered(ms);
        }
        if self.drain_until.is_some() && ms >= self.drain_next_ms {
            self.step_drain(ms);
        }
        // A restore under way proposes nothing: no session expires and no container is reaped
        // until it is done (the sessions' timers start again then), and no snapshot is stepped
        // (the driver writes the restored tree itself).
        let restoring = self.restore_pending();
        let decides =
            matches!(self.role, Role::Standalone | Role::Leader { .. }) && !restoring && !self.writes_held;
        if decides && self.db.expiry().next_expiry().is_some_and(|t| t <= ms) {
            for sid in self.db.expiry_mut().expired(ms) {
                info!("session 0x{sid:x} expired");
                self.stats.sessions_expired += 1;
                self.propose_close_session(now, sid);
            }
        }
        if decides && ms >= self.next_reap_ms {
            self.next_reap_ms = ms + self.settings.container_check_interval_ms.max(10);
            self.reap_containers(now);
        }
        if let Some(t) = self.next_purge_ms {
            if ms >= t {
                let hours = u64::from(self.settings.purge_interval_hours);
                self.next_purge_ms = Some(ms + hours * 3_600_000);
                if self.snapshots.is_some() && !self.retain_in_flight {
                    info!("autopurge: applying retention (every {hours} h)");
                    self.retain_in_flight = true;
                    self.actions.push_back(Action::Snapshot(SnapJob::Retain));
                }
            }
        }
        // No snapshot while down: the database may be about to be replaced (a learner's TRUNC or
        // SNAP), and a snapshot of it could outlive what it held.
        if self.role == Role::Down {
            self.expire_kept(now);
        }
        if self.role == Role::ReadOnly {
            self.expire_read_only_sessions(ms);
        } else if self.role != Role::Down && !restoring {
            self.snapshot_step(now);
        }
    }

    /// When [`Self::handle_timeout`] is next due, in monotonic ms (now or earlier: at once).
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.stopped {
            return None;
        }
        let mut t = u64::MAX;
        // A leader handing over expires and reaps nothing (see `handle_timeout`): no deadline.
        if matches!(self.role, Role::Standalone | Role::Leader { .. }) && !self.writes_held {
            t = self.next_reap_ms;
            if let Some(e) = self.db.expiry().next_expiry() {
                t = t.min(e);
            }
        }
        if self.role == Role::ReadOnly {
            if let Some(e) = self.db.expiry().next_expiry() {
                t = t.min(e);
            }
        }
        if let Some(p) = self.next_purge_ms {
            t = t.min(p);
        }
        if self.role == Role::Down {
            if let Some(k) = self.kept_deadline() {
                t = t.min(k);
            }
        }
        if let Some(d) = self.drain_deadline() {
            t = t.min(d);
        }
        // No snapshot is started or stepped while down or read-only (see `handle_timeout`): one
        // due then must not read as a deadline already passed, or the driver would spin on it
        // until the role changes, starving the tasks that would change it (a learner's sync).
        let snapshots_step = !matches!(self.role, Role::Down | Role::ReadOnly);
        if let Some(s) = self.snapshots.as_ref().filter(|_| snapshots_step) {
            if s.can_step() || s.due() {
                t = 0;
            } else if let Some(idle) = s.idle_deadline() {
                t = t.min(idle);
            }
        }
        (t != u64::MAX).then_some(t)
    }

    /// The next action. Proposals made since the last poll go to the log as one batch (group
    /// commit) once the actions before them are taken.
    pub fn poll_action(&mut self) -> Option<Action> {
        if self.actions.is_empty() && !self.stopped {
            self.flush();
        }
        self.actions.pop_front()
    }

    fn stop(&mut self, reason: String) {
        error!("{reason}");
        self.stopped = true;
        self.actions.push_back(Action::Stop { reason });
    }

    /// Starts a snapshot when one is due, and steps a running one by a bounded number of nodes
    /// when the snapshot thread has room.
    fn snapshot_step(&mut self, now: Now) {
        let Some(s) = self.snapshots.as_mut() else { return };
        let quiet = s.idle_deadline().is_some_and(|at| at <= now.mono_ms());
        if quiet && s.busy {
            s.unpaced_idle = true;
            info!("no writes for a while: the snapshot under way is written unpaced (snapshot.idleSeconds)");
            self.actions.push_back(Action::Snapshot(SnapJob::Pace(0)));
        }
        let due = s.due();
        let idle = quiet && !s.busy && !due;
        if due || idle {
            let cur = self.db.snapshot_begin();
            let zxid = cur.start_zxid();
            let pace = s.started(cur, now.mono_ms(), idle, &mut self.rng);
            if idle {
                info!("taking a snapshot at zxid 0x{zxid:x}: no writes for a while (snapshot.idleSeconds)");
            } else if pace == 0 {
                info!("taking a snapshot at zxid 0x{zxid:x}");
            } else {
                info!("taking a snapshot at zxid 0x{zxid:x}, written at up to {:.1} MB/s", pace as f64 / 1e6);
            }
            self.actions.push_back(Action::Snapshot(SnapJob::Begin { zxid, pace }));
        }
        if !s.can_step() {
            return;
        }
        if let Some(pace) = s.repace(now.mono_ms()) {
            debug!(
                "the log's rate moved: the snapshot under way is written at up to {:.1} MB/s",
                pace as f64 / 1e6
            );
            self.actions.push_back(Action::Snapshot(SnapJob::Pace(pace)));
        }
        let per_step = s.nodes_per_step();
        let Some(cur) = s.cursor.as_mut() else { return };
        let mut buf = s.buffers.pop().unwrap_or_else(|| Vec::with_capacity(256 * 1024));
        buf.clear();
        let done = self.db.snapshot_step(cur, &mut buf, per_step);
        s.taking_bytes += buf.len() as u64;
        self.actions.push_back(Action::Snapshot(SnapJob::Chunk(buf)));
        if done {
            info!(
                "snapshot at zxid 0x{:x} serialized: {} nodes, {} bytes",
                cur.start_zxid(),
                cur.nodes_written(),
                s.taking_bytes
            );
            // The file is finished (and may be loaded) only once the log holds everything its
            // content reflects: a follower applies a commit before its own copy of the proposal
            // is durable, and a leader may commit on its followers' ACKs before its own, so the
            // tree can be ahead of the log. A snapshot ahead of its log, after a power loss,
            // would describe history this server could not show record by record.
            s.finish_after = Some(self.db.last_applied_zxid());
            s.cursor = None;
            s.last_bytes = std::mem::take(&mut s.taking_bytes);
        }
        s.chunk_sent();
        self.maybe_finish_snapshot();
    }

    /// Finishes the snapshot whose content is serialized once the log has caught up with it.
    pub(super) fn maybe_finish_snapshot(&mut self) {
        let durable = self.log_durable;
        let Some(s) = self.snapshots.as_mut() else { return };
        if s.finish_after.is_some_and(|end| end <= durable) {
            s.finish_after = None;
            self.actions.push_back(Action::Snapshot(SnapJob::Finish));
        }
    }

    /// What the four-letter words report, as seen by `asker`, with `outstanding` requests in
    /// flight (the driver counts them).
    pub fn view(&self, asker: Option<SocketAddr>, outstanding: usize, now: Now) -> crate::view::View<'_> {
        crate::view::View {
            settings: &self.settings,
            client_addr: self.settings.client_addr,
            stats: &self.stats,
            db: &self.db,
            conns: self
                .conns
                .iter()
                .map(|(id, c)| crate::view::ConnView { id, remote: c.remote, stats: c.stats.clone() })
                .collect(),
            outstanding,
            last_zxid: self.reported_zxid(),
            uptime_ms: now.mono_ms().saturating_sub(self.started_ms) as i64,
            asker,
            quorum: None,
            ensemble: None,
            wall_ms: now.wall_ms,
            counters: Vec::new(),
            timings: Vec::new(),
            log_info: None,
            snapshot_answer: None,
            node_answer: None,
            backup: None,
            mode: match self.role {
                Role::Standalone => Some("standalone"),
                Role::Leader { .. } if !self.settings.leader_serves => None,
                Role::Leader { .. } => Some("leader"),
                Role::Learner { observer: false } => Some("follower"),
                Role::Learner { observer: true } => Some("observer"),
                Role::ReadOnly => Some("read-only"),
                Role::Down => None,
            },
        }
    }

    /// An operator asks for a snapshot now: what became of it is kept for
    /// [`Self::take_snapshot_answer`].
    fn on_snapshot_now(&mut self, now: Now) {
        use crate::view::SnapshotAnswer;
        let min_interval = self.settings.snapshot_min_request_interval_ms;
        // As the commands see it: a leader with leaderServes=no serves no clients, and answers
        // "not currently serving"; it starts no snapshot behind that answer.
        let leader_aside = matches!(self.role, Role::Leader { .. }) && !self.settings.leader_serves;
        let serving = self.serving_generation().is_some() && !leader_aside && !self.restore_pending();
        let answer = match self.snapshots.as_mut() {
            None => SnapshotAnswer::Refused("this server takes no snapshots"),
            Some(_) if !serving => {
                info!("a snapshot was asked for, but none is taken while the server does not serve");
                SnapshotAnswer::Refused("the server is not serving")
            }
            Some(s) => match s.request(now.mono_ms(), min_interval) {
                Requested::UnderWay(zxid) => SnapshotAnswer::UnderWay(zxid),
                Requested::TooSoon => {
                    info!("a snapshot was asked for within snapshot.minRequestIntervalSeconds of the last; none started");
                    SnapshotAnswer::TooSoon
                }
                Requested::Accepted => {
                    self.snapshot_step(now);
                    match self.snapshot_status().and_then(|s| s.under_way) {
                        Some(zxid) => SnapshotAnswer::Started(zxid),
                        None => SnapshotAnswer::Refused("the snapshot could not start"),
                    }
                }
            },
        };
        self.snapshot_answer = Some(answer);
    }

    /// What became of the last [`Event::SnapshotNow`], once.
    pub fn take_snapshot_answer(&mut self) -> Option<crate::view::SnapshotAnswer> {
        self.snapshot_answer.take()
    }

    /// The snapshot under way and the last one written, or `None` without a snapshot thread.
    pub fn snapshot_status(&self) -> Option<SnapshotStatus> {
        self.snapshots.as_ref().map(SnapshotPolicy::status)
    }

    /// The zxid of the last transaction applied to the tree.
    pub fn applied_zxid(&self) -> i64 {
        self.db.last_applied_zxid()
    }

    /// The zxid this server knows committed: the proposer's on a server that decides, the last
    /// applied on a serving learner (it applies each commit as it hears it). `None` while down
    /// or read-only: the database is then reloaded from the snapshots and the whole log, which
    /// may end in proposals no quorum ever acknowledged.
    pub fn committed_zxid(&self) -> Option<i64> {
        match self.role {
            Role::Standalone | Role::Leader { .. } => {
                Some(self.proposer.committed().max(self.applied_zxid()))
            }
            Role::Learner { .. } => Some(self.applied_zxid()),
            Role::Down | Role::ReadOnly => None,
        }
    }

    /// The serving term this server is in: `Some` while it serves from committed history
    /// (standalone, an established leader, a learner its leader told UPTODATE), a number that
    /// changes with every role change; `None` while down or read-only. An operator's snapshot
    /// request takes it when the snapshot starts ([`Self::snapshot_source_through`]).
    pub fn serving_generation(&self) -> Option<u64> {
        match self.role {
            Role::Standalone | Role::Leader { .. } | Role::Learner { .. } => Some(self.role_generation),
            Role::Down | Role::ReadOnly => None,
        }
    }

    /// The zxid a copy of the tree served to an operator is rebuilt through, for a request whose
    /// snapshot started in serving term `generation` ([`Self::serving_generation`]), with this
    /// server's log durable through `log_durable`: committed, applied and durable here. A
    /// follower applies a commit before its own copy of the proposal is durable, and a leader
    /// may commit on its followers' ACKs before its own.
    ///
    /// Errors: the server is not serving, or left that term since (a role change reloads the
    /// database from the whole log, which may hold proposals never committed, and a later sync
    /// may rewrite the log the copy would read).
    pub fn snapshot_source_through(&self, generation: u64, log_durable: i64) -> Result<i64, &'static str> {
        match self.serving_generation() {
            None => Err("the server is not serving"),
            Some(g) if g != generation => Err("the server changed its role while the snapshot was taken"),
            Some(_) => {
                let committed = self.committed_zxid().unwrap_or(i64::MIN);
                Ok(committed.min(self.applied_zxid()).min(log_durable))
            }
        }
    }

    /// Whether a copy of the tree (the AdminServer's `snapshot` rebuilds one beside the
    /// server's own) fits under the memory brake: the brake is off, and the tree's accounted
    /// bytes twice over stay under `zkrs.treeMemorySoftLimitBytes` (no limit: always).
    pub fn tree_copy_fits(&self) -> bool {
        let limit = self.db.memory_soft_limit_bytes();
        limit == 0 || (!self.db.memory_brake_on() && self.db.tree_memory_bytes().saturating_mul(2) <= limit)
    }

    /// Leader: learners' syncs waiting for earlier proposals to commit.
    pub fn pending_syncs(&self) -> usize {
        self.syncs_waiting.len()
    }

    /// The zxid `srvr`, `stat` and `mntr` report: the last applied, except that an established
    /// leader reports at least its epoch's zxid 0 (an Apache leader sets its tree's last processed
    /// zxid so once its quorum has synced, so a fresh leader shows 0x100000000, not 0).
    fn reported_zxid(&self) -> i64 {
        let applied = self.db.last_applied_zxid();
        match self.role {
            Role::Leader { epoch } => applied.max(i64::from(epoch) << 32),
            _ => applied,
        }
    }

    /// Resets the counters `crst` (connections') or `srst` (the server's) resets.
    pub fn reset_counters(&mut self, word: &str) {
        match word {
            "crst" => {
                for (_, c) in self.conns.iter() {
                    c.stats.reset();
                }
            }
            "srst" => self.stats.reset(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Now {
        Now { mono_us: ms * 1000, wall_ms: 1_700_000_000_000 + ms as i64 }
    }

    /// A standalone core with a snapshot thread, configured by `extra` zoo.cfg lines.
    pub(super) fn core(extra: &str) -> ServerCore {
        let text = format!("tickTime=2000\ndataDir=/nonexistent\nclientPort=2181\n{extra}");
        let cfg = crate::config::ServerConfig::parse(&text, None).expect("zoo.cfg");
        let settings = Arc::new(Settings::from_config(&cfg).expect("settings"));
        let cfg = CoreConfig {
            settings: settings.clone(),
            server_id: 1,
            voters: VoterSet::solo(1),
            counter_rule: CounterRule::Wrap,
            snapshots: Some(SnapshotSettings {
                snap_count: settings.snap_count,
                snap_size_bytes: 0,
                pace_floor: 0,
                idle_ms: 0,
                nodes_per_step: NODES_PER_STEP,
            }),
            snapshot_now: false,
            seed: 1,
            sasl_seed: [1; 32],
        };
        let mut db = Database::new(zk_tree::TreeConfig { tick_ms: settings.tick_ms, ..Default::default() });
        db.start_leading(0);
        ServerCore::new(cfg, db, at(0))
    }

    /// Review of the snapshot command, finding 9: an operator's request goes through the node's
    /// allow-list (the simulator can send it as the driver does), and the core records what it
    /// decided.
    #[test]
    fn a_snapshot_request_goes_through_the_node() {
        let mut node = crate::node::Node::standalone(core(""));
        node.handle(at(10), crate::node::Input::Core(Event::SnapshotNow));
        let answer = node.core_mut().take_snapshot_answer();
        assert!(matches!(answer, Some(crate::view::SnapshotAnswer::Started(_))), "{answer:?}");
        assert_eq!(node.core_mut().take_snapshot_answer(), None, "taken once");
        node.handle(at(20), crate::node::Input::Core(Event::SnapshotNow));
        let answer = node.core_mut().take_snapshot_answer();
        assert!(matches!(answer, Some(crate::view::SnapshotAnswer::UnderWay(_))), "{answer:?}");
    }

    /// Review of the snapshot command, finding 7: a leader with leaderServes=no answers the
    /// commands "not currently serving", and starts no snapshot behind that answer.
    #[test]
    fn a_leader_that_serves_no_clients_takes_no_requested_snapshot() {
        let mut c = core("leaderServes=no\n");
        c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, at(10));
        c.handle(at(20), Event::SnapshotNow);
        assert_eq!(
            c.take_snapshot_answer(),
            Some(crate::view::SnapshotAnswer::Refused("the server is not serving"))
        );
        assert_eq!(c.snapshot_status().and_then(|s| s.under_way), None, "none started");
        let mut c = core("");
        c.set_role(Role::Leader { epoch: 1 }, VoterSet::solo(1), None, at(10));
        c.handle(at(20), Event::SnapshotNow);
        assert!(matches!(c.take_snapshot_answer(), Some(crate::view::SnapshotAnswer::Started(_))));
    }

    /// Review of the snapshot command, finding 1: a snapshot an operator asked for is served
    /// only from the serving term it started in; a role change between (through Down, which
    /// reloads the database from the whole log, uncommitted proposals included) refuses it, and
    /// nothing is known committed while down.
    #[test]
    fn a_snapshot_is_served_only_from_the_term_it_started_in() {
        let mut c = core("");
        let g = c.serving_generation().expect("standalone serves");
        assert_eq!(c.snapshot_source_through(g, 0), Ok(0));
        assert_eq!(c.committed_zxid(), Some(0));
        c.set_role(Role::Down, VoterSet::solo(1), None, at(10));
        assert_eq!(c.serving_generation(), None);
        assert_eq!(c.committed_zxid(), None, "nothing known committed while down");
        assert_eq!(c.snapshot_source_through(g, 0), Err("the server is not serving"));
        c.set_role(Role::Leader { epoch: 2 }, VoterSet::solo(1), None, at(20));
        let g2 = c.serving_generation().expect("an established leader serves");
        assert_ne!(g, g2);
        assert!(c.snapshot_source_through(g, 0).is_err(), "a later term does not serve the earlier request");
        assert!(c.snapshot_source_through(g2, 0).is_ok());
        c.set_role(Role::ReadOnly, VoterSet::solo(1), None, at(30));
        assert_eq!(c.serving_generation(), None);
        assert_eq!(c.committed_zxid(), None);
        assert!(c.snapshot_source_through(g2, 0).is_err());
    }
}
