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
pub mod proposer;
pub mod queues;
pub mod reads;
pub mod reply;
pub mod snapshot_policy;
pub mod zxid;

pub use conns::{ConnId, ConnRegistry, ConnState};
pub use proposer::{CounterRule, Proposal, Proposer, ServerId, VoterSet};
pub use queues::{PendingRead, PendingWrite, SessionQueues};
pub use snapshot_policy::{SnapshotPolicy, SnapshotSettings, CHUNK_CREDITS, NODES_PER_STEP};
pub use zxid::Zxid;

use crate::fourlw;
use crate::settings::Settings;
use crate::snapshots::SnapJob;
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
        /// When it was read, µs on the same clock as [`Now::mono_us`].
        received_us: u64,
    },
    /// The connection is gone (closed by the client, or its outbox overflowed).
    Closed {
        /// The connection.
        conn: ConnId,
    },
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
    },
    /// Learner: the leader answered the oldest forwarded sync.
    SyncDone,
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
    /// Send this proposal to the other voters and the observers (ensemble leader only).
    Propose {
        /// The proposal (boxed: the other actions are much smaller, and every action is moved
        /// through the queue).
        proposal: Box<Proposal>,
    },
    /// `zxid` is committed: tell the followers (ensemble leader only).
    Commit {
        /// The zxid.
        zxid: i64,
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
    /// Leader: everything proposed before a learner's forwarded sync is committed: send it SYNC.
    SyncReady {
        /// The learner's quorum connection.
        to: u64,
    },
    /// After a full-disk refusal the core took back every uncommitted proposal: the log may
    /// accept batches again.
    ResumeLog,
    /// Log records before `zxid` are covered by the snapshots kept: remove them.
    PurgeLogBefore {
        /// The zxid.
        zxid: i64,
    },
    /// Work for the snapshot thread.
    Snapshot(SnapJob),
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
    /// Seed for the core's only randomness (snapshot thresholds).
    pub seed: u64,
}

/// The server core. See the module docs.
#[derive(Debug)]
pub struct ServerCore {
    role: Role,
    settings: Arc<Settings>,
    db: Database,
    conns: ConnRegistry,
    queues: SessionQueues,
    proposer: Proposer,
    /// Sessions being created, by id: the connection waiting and its timeout.
    connecting: HashMap<SessionId, (ConnId, i32)>,
    snapshots: Option<SnapshotPolicy>,
    stats: ServerStats,
    actions: VecDeque<Action>,
    buf: BytesMut,
    rng: StdRng,
    next_session: i64,
    started_ms: u64,
    /// Set while the log refuses writes for a full disk (since the first refusal, mono ms).
    disk_full_since_ms: Option<u64>,
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
            syncs_waiting: VecDeque::new(),
            syncs_forwarded: VecDeque::new(),
            sync_paths: HashMap::new(),
            touched: HashMap::new(),
            proposer: Proposer::new(db.last_applied_zxid(), cfg.voters, cfg.counter_rule),
            next_session: zk_tree::first_session_id(cfg.server_id, now.wall_ms),
            next_reap_ms: now_ms + cfg.settings.container_check_interval_ms.max(10),
            next_purge_ms: (purge_hours > 0).then(|| now_ms + purge_hours * 3_600_000),
            settings: cfg.settings,
            db,
            conns: ConnRegistry::default(),
            queues: SessionQueues::default(),
            connecting: HashMap::new(),
            snapshots,
            stats: ServerStats::new(),
            actions: VecDeque::new(),
            buf: BytesMut::with_capacity(64 * 1024),
            rng,
            started_ms: now_ms,
            disk_full_since_ms: None,
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

    /// The role in force.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Changes the role. Leaving a serving role (or changing leaders) closes every client
    /// connection, as Apache's servers do when their ensemble changes: clients reconnect and
    /// carry on with their sessions elsewhere. `db` replaces the database when given (a server
    /// reloads its state from disk before it leads or syncs); a new leader's proposer starts at
    /// its epoch's first zxid with `voters` counting ACKs, and every session gets a fresh
    /// timeout on this server's clock.
    pub fn set_role(&mut self, role: Role, voters: VoterSet, db: Option<Database>, now: Now) {
        if role != self.role {
            info!("role: {:?} -> {role:?}", self.role);
            self.drop_clients();
        }
        if let Some(db) = db {
            self.db = db;
        }
        self.role = role;
        self.syncs_waiting.clear();
        self.syncs_forwarded.clear();
        self.sync_paths.clear();
        self.touched.clear();
        match role {
            Role::Leader { epoch } => {
                let start = Zxid { epoch, counter: 0 }.to_i64().max(self.db.last_applied_zxid());
                self.proposer = Proposer::new(start, voters, CounterRule::StopAtEpochEnd);
                self.db.start_leading(now.mono_ms());
            }
            Role::Standalone => {
                self.proposer = Proposer::new(self.db.last_applied_zxid(), voters, CounterRule::Wrap);
                self.db.start_leading(now.mono_ms());
            }
            Role::Down | Role::Learner { .. } => {
                self.proposer =
                    Proposer::new(self.db.last_applied_zxid(), voters, CounterRule::StopAtEpochEnd);
            }
        }
    }

    /// Closes every client connection and forgets what they had queued (their permits freed).
    fn drop_clients(&mut self) {
        let conns: Vec<ConnId> = self.conns.iter().map(|(id, _)| id).collect();
        for conn in conns {
            self.db.remove_watcher(conn);
            self.conns.remove(conn);
            self.actions.push_back(Action::Close { conn });
        }
        for _ in 0..self.queues.len() {
            self.actions.push_back(Action::ReleasePermit);
        }
        self.queues = SessionQueues::default();
        self.connecting.clear();
    }

    /// Learner: the sessions with requests since the last call, for the leader (PING replies).
    pub fn take_touched(&mut self) -> Vec<(SessionId, i32)> {
        self.touched.drain().collect()
    }

    /// Whether the core asked to stop ([`Action::Stop`]); it handles nothing after that.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Handles one event.
    pub fn handle(&mut self, now: Now, ev: Event) {
        if self.stopped {
            if let Event::Request { .. } = ev {
                self.actions.push_back(Action::ReleasePermit);
            }
            return;
        }
        match ev {
            Event::Connect { conn, remote, req, stats } => self.on_connect(now, conn, remote, req, stats),
            Event::Request { conn, xid, op, body, received_us } => {
                self.on_request(now, conn, xid, op, body, received_us)
            }
            Event::Closed { conn } => self.on_closed(conn),
            Event::Durable { zxid } => self.on_durable(now, zxid),
            Event::LogFailed { error } => self.on_log_failed(now, error),
            Event::Ack { sid, zxid } => {
                if self.proposer.ack(sid, zxid).is_some() {
                    self.commit_ready(now);
                }
            }
            Event::SnapshotChunkDone { buffer } => {
                if let Some(s) = self.snapshots.as_mut() {
                    s.chunks_out = s.chunks_out.saturating_sub(1);
                    if s.buffers.len() < CHUNK_CREDITS {
                        s.buffers.push(buffer);
                    }
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
            Event::Forwarded { from, session, cxid, op, body, auth } => {
                self.on_forwarded(now, from, session, cxid, op, body, auth)
            }
            Event::ForwardedCreateSession { session, cxid, timeout_ms } => {
                self.on_forwarded_create_session(now, session, cxid, timeout_ms)
            }
            Event::Touch { sessions } => {
                for (sid, _) in sessions {
                    self.db.expiry_mut().touch(sid, now.mono_ms());
                }
            }
            Event::Committed { hdr, txn } => {
                if matches!(self.role, Role::Learner { .. }) {
                    self.apply(now, Proposal { hdr, txn, internal: false });
                } else {
                    warn!("a commit from a leader reached a server that is not a learner; ignored");
                }
            }
            Event::SyncDone => {
                if let Some((sid, cxid)) = self.syncs_forwarded.pop_front() {
                    self.complete_sync(now, sid, cxid);
                }
            }
        }
    }

    /// Leader: a learner's client request. Preps and proposes it as the leader's own clients'
    /// requests are, in the order the learner sent them; the learner answers its client when it
    /// applies the commit. A sync is answered once everything proposed before it is committed.
    #[allow(clippy::too_many_arguments)]
    fn on_forwarded(
        &mut self,
        now: Now,
        from: u64,
        session: SessionId,
        cxid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        auth: Vec<Id>,
    ) {
        if !matches!(self.role, Role::Leader { .. }) {
            debug!("a forwarded request reached a server that does not lead; dropped");
            return;
        }
        if op == OpCode::Sync.code() {
            let after = self.proposer.last_zxid().to_i64();
            if after <= self.proposer.committed() {
                self.actions.push_back(Action::SyncReady { to: from });
            } else {
                self.syncs_waiting.push_back((after, from));
            }
            return;
        }
        if !is_write_op(op) {
            debug!("learner {from} forwarded a read (op {op}); dropped");
            return;
        }
        if self.db.expiry().is_closing(session) && op != OpCode::CloseSession.code() {
            // As for the leader's own clients: a closing session's writes never reach the log.
            return;
        }
        let Some(zxid) = self.next_zxid() else { return };
        let opcode = OpCode::from_i32(op).unwrap_or(OpCode::Error);
        let ids = AuthIds { is_super: auth.iter().any(|id| id.scheme == "super"), ids: auth };
        let txn = match &body {
            _ if opcode == OpCode::DeleteContainer => {
                Txn::Error(ErrorTxn { err: ErrorCode::BadArguments.code() })
            }
            Ok(req) => {
                if opcode == OpCode::CloseSession {
                    self.db.expiry_mut().set_closing(session);
                }
                let ctx = RequestCtx { session, cxid, auth: &ids };
                self.db.prep(&ctx, req, zxid, now.wall_ms)
            }
            Err(e) => {
                info!("session 0x{session:x}: undecodable forwarded {opcode:?} request: {e}");
                Txn::Error(ErrorTxn { err: ErrorCode::MarshallingError.code() })
            }
        };
        let txn_type = zk_tree::txn_type(opcode, &txn).code();
        let hdr = TxnHeader { client_id: session, cxid, zxid, time: now.wall_ms, txn_type };
        // Nobody here waits for it: the learner that forwarded it answers.
        self.propose(Proposal { hdr, txn, internal: true });
    }

    /// Leader: a learner's client asked for a new session (its id carries the learner's server
    /// id). Proposed like the leader's own; the learner answers the client at commit.
    fn on_forwarded_create_session(&mut self, now: Now, session: SessionId, cxid: i32, timeout_ms: i32) {
        if !matches!(self.role, Role::Leader { .. }) {
            debug!("a forwarded createSession reached a server that does not lead; dropped");
            return;
        }
        let Some(zxid) = self.next_zxid() else { return };
        let txn = self.db.prep_create_session(session, timeout_ms);
        let hdr = TxnHeader {
            client_id: session,
            cxid,
            zxid,
            time: now.wall_ms,
            txn_type: OpCode::CreateSession.code(),
        };
        self.propose(Proposal { hdr, txn, internal: true });
    }

    /// Runs what is due at `now`: session expiry, container reaping, the retention timer, and
    /// one step of a snapshot being taken (or the start of one that is due). The driver calls it
    /// after every batch of events and when [`Self::poll_timeout`] passes.
    pub fn handle_timeout(&mut self, now: Now) {
        if self.stopped {
            return;
        }
        let ms = now.mono_ms();
        let decides = matches!(self.role, Role::Standalone | Role::Leader { .. });
        if decides && self.db.expiry().next_expiry().is_some_and(|t| t <= ms) {
            for sid in self.db.expiry_mut().expired(ms) {
                info!("session 0x{sid:x} expired");
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
        self.snapshot_step(now);
    }

    /// When [`Self::handle_timeout`] is next due, in monotonic ms (now or earlier: at once).
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.stopped {
            return None;
        }
        let mut t = u64::MAX;
        if matches!(self.role, Role::Standalone | Role::Leader { .. }) {
            t = self.next_reap_ms;
            if let Some(e) = self.db.expiry().next_expiry() {
                t = t.min(e);
            }
        }
        if let Some(p) = self.next_purge_ms {
            t = t.min(p);
        }
        if let Some(s) = &self.snapshots {
            if s.can_step() || s.due() {
                t = 0;
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

    // ---------------------------------------------------------------- sessions and connections

    fn on_connect(
        &mut self,
        now: Now,
        conn: ConnId,
        remote: SocketAddr,
        req: ConnectRequest,
        stats: Arc<ConnStats>,
    ) {
        let auth = AuthIds {
            ids: vec![Id { scheme: "ip".into(), id: remote.ip().to_canonical().to_string() }],
            is_super: false,
        };
        let timeout_ms = self.settings.negotiate_timeout(req.time_out);
        if self.role == Role::Down {
            // Not serving (electing or syncing): Apache closes the socket; the client tries the
            // next server of its list.
            debug!("refusing a connection from {remote}: not serving");
            self.actions.push_back(Action::Close { conn });
            return;
        }
        self.conns.open(
            conn,
            ConnState {
                remote,
                session: None,
                auth,
                read_only_byte: req.read_only.is_some(),
                stats,
                timeout_ms,
            },
        );
        if req.last_zxid_seen > self.db.last_applied_zxid() {
            info!(
                "refusing session from {remote}: client has seen zxid 0x{:x}, ours is 0x{:x}",
                req.last_zxid_seen,
                self.db.last_applied_zxid()
            );
            self.actions.push_back(Action::Close { conn });
            return;
        }
        if req.session_id == 0 {
            let sid = self.next_session;
            self.next_session += 1;
            if let Role::Learner { .. } = self.role {
                // Sessions are global: the leader proposes the createSession; the answer goes out
                // when its commit is applied here.
                self.connecting.insert(sid, (conn, timeout_ms));
                let body = Bytes::copy_from_slice(&timeout_ms.to_be_bytes());
                let op = OpCode::CreateSession.code();
                self.actions.push_back(Action::Forward { session: sid, cxid: 0, op, body, auth: Vec::new() });
                return;
            }
            let Some(zxid) = self.next_zxid() else { return };
            let txn = self.db.prep_create_session(sid, timeout_ms);
            let hdr = TxnHeader {
                client_id: sid,
                cxid: 0,
                zxid,
                time: now.wall_ms,
                txn_type: OpCode::CreateSession.code(),
            };
            self.connecting.insert(sid, (conn, timeout_ms));
            self.propose(Proposal { hdr, txn, internal: false });
            return;
        }
        let sid = req.session_id;
        let valid = req.passwd.as_ref() == zk_tree::session_password(sid)
            && self.db.sessions().contains(sid)
            && !self.db.expiry().is_closing(sid);
        if !valid {
            info!("refusing session 0x{sid:x} from {remote}: expired, closing or wrong password");
            self.send_connect_response(conn, 0, 0, Bytes::from_static(&[0; 16]));
            self.actions.push_back(Action::Close { conn });
            return;
        }
        self.db.expiry_mut().touch(sid, now.mono_ms());
        self.bind(conn, sid);
        self.send_connect_response(
            conn,
            timeout_ms,
            sid,
            Bytes::copy_from_slice(&zk_tree::session_password(sid)),
        );
        debug!("session 0x{sid:x} resumed from {remote}");
    }

    fn bind(&mut self, conn: ConnId, sid: SessionId) {
        if let Some(old) = self.conns.bind(conn, sid) {
            debug!("session 0x{sid:x} moved to a new connection; closing the old one");
            self.db.remove_watcher(old);
            self.conns.remove(old);
            self.actions.push_back(Action::Close { conn: old });
        }
        self.actions.push_back(Action::SessionReady { conn });
    }

    fn send_connect_response(&mut self, conn: ConnId, timeout_ms: i32, sid: i64, passwd: Bytes) {
        let Some(c) = self.conns.get(conn) else { return };
        let resp = ConnectResponse {
            protocol_version: 0,
            time_out: timeout_ms,
            session_id: sid,
            passwd,
            read_only: c.read_only_byte.then_some(false),
        };
        write_frame(&mut self.buf, |b| resp.write(b));
        let frame = self.buf.split().freeze();
        self.stats.packets_sent += 1;
        self.actions.push_back(Action::Frame { conn, frame });
    }

    fn on_closed(&mut self, conn: ConnId) {
        if self.conns.remove(conn).is_some() {
            self.db.remove_watcher(conn);
        }
    }

    fn propose_close_session(&mut self, now: Now, sid: SessionId) {
        self.db.expiry_mut().set_closing(sid);
        self.propose_internal(now, sid, &Request::CloseSession);
    }

    fn reap_containers(&mut self, now: Now) {
        let per_tick = (self.settings.container_max_per_minute as u64
            * self.settings.container_check_interval_ms
            / 60_000)
            .max(1) as usize;
        // Container and TTL ages are against znode mtimes, which are wall-clock times.
        for path in self.db.reapable(now.wall_ms, per_tick) {
            debug!("reaping {path}");
            let req = Request::DeleteContainer(DeleteRequest { path, version: -1 });
            self.propose_internal(now, 0, &req);
        }
    }

    /// Preps and proposes a request the server issues itself (session expiry, reaping): cxid 0,
    /// with the super identity, as Apache's own requests carry no ACL restrictions.
    fn propose_internal(&mut self, now: Now, session: SessionId, req: &Request) {
        let Some(zxid) = self.next_zxid() else { return };
        let auth = AuthIds { ids: vec![], is_super: true };
        let ctx = RequestCtx { session, cxid: 0, auth: &auth };
        let txn = self.db.prep(&ctx, req, zxid, now.wall_ms);
        let txn_type = zk_tree::txn_type(req.op(), &txn).code();
        let hdr = TxnHeader { client_id: session, cxid: 0, zxid, time: now.wall_ms, txn_type };
        self.propose(Proposal { hdr, txn, internal: true });
    }

    // ---------------------------------------------------------------- requests

    fn on_request(
        &mut self,
        now: Now,
        conn: ConnId,
        xid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        received_us: u64,
    ) {
        self.stats.packets_received += 1;
        let Some(sid) = self.conns.get(conn).and_then(|c| c.session).filter(|_| self.role != Role::Down)
        else {
            // A request before the session exists or after the connection went: nothing to answer.
            self.actions.push_back(Action::ReleasePermit);
            return;
        };
        let learner = matches!(self.role, Role::Learner { .. });
        if learner {
            // The leader decides expiry: it hears of this session in the next PING reply.
            if let Some(c) = self.conns.get(conn) {
                self.touched.insert(sid, c.timeout_ms);
            }
        }
        if !self.db.expiry_mut().touch(sid, now.mono_ms()) && !self.db.sessions().contains(sid) {
            // Apache drops requests of sessions it no longer knows; the client times out.
            debug!("dropping request for unknown session 0x{sid:x}");
            self.actions.push_back(Action::ReleasePermit);
            return;
        }
        // A closing session's reads still get answers, in order (SESSIONEXPIRED); its writes never
        // reach the log. (Apache does either, depending on a race between its threads.)
        if self.db.expiry().is_closing(sid) && is_write_op(op) {
            debug!("dropping write (op {op}) of closing session 0x{sid:x}");
            self.actions.push_back(Action::ReleasePermit);
            return;
        }
        // A client may send createSession after its handshake: Apache preps it as a write whose
        // body does not decode (MARSHALLINGERROR, a zxid used); zk-proto refuses the opcode.
        let body = match body {
            Err(RequestError::Unknown(o)) if o == OpCode::CreateSession.code() => {
                Err(RequestError::Decode(DecodeError::InvalidValue {
                    what: "createSession request",
                    value: o as i64,
                }))
            }
            b => b,
        };
        match &body {
            Err(RequestError::Unknown(_)) => {
                warn!("session 0x{sid:x} sent unknown opcode {op}; closing");
                self.reply(
                    conn,
                    ReplyHeader { xid, zxid: -1, err: ErrorCode::Unimplemented.code() },
                    &Body::Empty,
                );
                self.actions.push_back(Action::Close { conn });
                return;
            }
            Ok(Request::Auth(packet)) => {
                let packet = packet.clone();
                self.on_auth(conn, xid, packet);
                return;
            }
            _ => {}
        }
        if learner && (is_write_op(op) || op == OpCode::Sync.code()) {
            return self.forward(conn, sid, xid, op, body, received_us);
        }
        if is_write_op(op) {
            let Some(zxid) = self.next_zxid() else {
                self.actions.push_back(Action::ReleasePermit);
                return;
            };
            let opcode = OpCode::from_i32(op).unwrap_or(OpCode::Error);
            let txn = match &body {
                // Apache reads a client's deleteContainer path from the whole request buffer, so
                // it is never a valid path: BADARGUMENTS, logged as a failed write.
                _ if opcode == OpCode::DeleteContainer => {
                    Txn::Error(ErrorTxn { err: ErrorCode::BadArguments.code() })
                }
                Ok(req) => {
                    if opcode == OpCode::CloseSession {
                        self.db.expiry_mut().set_closing(sid);
                    }
                    let auth = self.conns.get(conn).map(|c| c.auth.clone()).unwrap_or_default();
                    let ctx = RequestCtx { session: sid, cxid: xid, auth: &auth };
                    self.db.prep(&ctx, req, zxid, now.wall_ms)
                }
                Err(e) => {
                    info!("session 0x{sid:x}: undecodable {opcode:?} request: {e}");
                    Txn::Error(ErrorTxn { err: ErrorCode::MarshallingError.code() })
                }
            };
            let txn_type = zk_tree::txn_type(opcode, &txn).code();
            let hdr = TxnHeader { client_id: sid, cxid: xid, zxid, time: now.wall_ms, txn_type };
            self.propose(Proposal { hdr, txn, internal: false });
            self.queues.push_write(sid, PendingWrite { conn, cxid: xid, op: opcode, received_us });
        } else {
            let r = PendingRead { conn, xid, op, body, received_us };
            if self.queues.is_idle(sid) {
                self.execute_read(now, r);
            } else {
                self.queues.push_read(sid, r);
            }
        }
    }

    /// Learner: a write (or sync) of a local client goes to the leader; its place in the
    /// session's queue holds later requests back until the commit (or the leader's SYNC) arrives.
    fn forward(
        &mut self,
        conn: ConnId,
        sid: SessionId,
        xid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        received_us: u64,
    ) {
        let opcode = OpCode::from_i32(op).unwrap_or(OpCode::Error);
        let mut bytes = BytesMut::new();
        match &body {
            Ok(Request::Sync(r)) => {
                r.write(&mut bytes);
                self.syncs_forwarded.push_back((sid, xid));
                self.sync_paths.insert((sid, xid), r.path.clone());
            }
            Ok(r) => r.encode(&mut bytes),
            // The leader finds it undecodable too, and logs the failed write as Apache does.
            Err(_) => {}
        }
        let auth = self.conns.get(conn).map(|c| c.auth.ids.clone()).unwrap_or_default();
        self.queues.push_write(sid, PendingWrite { conn, cxid: xid, op: opcode, received_us });
        self.actions.push_back(Action::Forward { session: sid, cxid: xid, op, body: bytes.freeze(), auth });
    }

    /// Learner: the leader answered a forwarded sync: answer the client, in its session's order.
    fn complete_sync(&mut self, now: Now, sid: SessionId, cxid: i32) {
        let path = self.sync_paths.remove(&(sid, cxid)).unwrap_or_default();
        if let Some(w) = self.queues.complete_write(sid, cxid) {
            let last = self.db.last_applied_zxid();
            self.reply(w.conn, ReplyHeader { xid: cxid, zxid: last, err: 0 }, &Body::Path(path));
            self.run_ready_reads(now, sid);
        }
    }

    fn on_auth(&mut self, conn: ConnId, xid: i32, packet: AuthPacket) {
        let Some(c) = self.conns.get(conn) else { return };
        let remote = c.remote.ip().to_canonical().to_string();
        match zk_tree::authenticate_conn(&packet.scheme, &packet.auth, self.db.config(), &remote) {
            Ok(entry) => {
                let Some(c) = self.conns.get_mut(conn) else { return };
                // Kept in insertion order; whoAmI lists them in Apache's set order.
                let mut added = Vec::with_capacity(2);
                if entry.is_super {
                    added.push(Id { scheme: "super".into(), id: String::new() });
                }
                added.push(entry.id);
                c.auth.is_super |= entry.is_super;
                for id in added {
                    if !c.auth.ids.contains(&id) {
                        c.auth.ids.push(id);
                    }
                }
                info!("auth success for scheme {} from {}", packet.scheme, c.remote);
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &Body::Empty);
            }
            Err(code) => {
                self.stats.auth_failed += 1;
                warn!("auth failed for scheme {}", packet.scheme);
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: code.code() }, &Body::Empty);
                self.actions.push_back(Action::Close { conn });
            }
        }
    }

    /// The next zxid, or None when the epoch is exhausted (the core then stops: an ensemble
    /// needs a new election to pick a new epoch).
    fn next_zxid(&mut self) -> Option<i64> {
        match self.proposer.next_zxid() {
            Ok(z) => Some(z.to_i64()),
            Err(e) => {
                self.stop(format!(
                    "zxid counter exhausted in epoch {} (last zxid {}); a new epoch is needed",
                    e.0.epoch, e.0
                ));
                None
            }
        }
    }

    fn propose(&mut self, p: Proposal) {
        if !self.proposer.voters().is_solo() {
            self.actions.push_back(Action::Propose { proposal: Box::new(p.clone()) });
        }
        self.proposer.propose(p);
    }

    /// Hands the proposals made since the last call to the log as one batch. They are committed
    /// once a quorum has them durable ([`Event::Durable`] for this server, [`Event::Ack`] for the
    /// others).
    fn flush(&mut self) {
        let n = self.proposer.unhanded().count();
        if n == 0 {
            return;
        }
        let batch: Vec<(&TxnHeader, &Txn)> = self.proposer.unhanded().map(|p| (&p.hdr, &p.txn)).collect();
        let records = match zk_log::RecordBatch::encode(&batch) {
            Ok(r) => r,
            Err(e) => {
                self.stop(format!("transaction log failed: {e}"));
                return;
            }
        };
        // A few writes with nothing else in flight (a lone client's write) may be written and
        // synced on the driver's thread, which saves the two thread hand-offs of the queue. Only
        // valid when this server's durability alone is the quorum.
        let inline =
            self.proposer.handed() == 0 && n <= INLINE_RECORDS_MAX && self.proposer.voters().is_solo();
        self.proposer.mark_all_handed();
        if let Some(s) = self.snapshots.as_mut() {
            s.bytes_since = s.bytes_since.saturating_add(records.bytes());
        }
        self.actions.push_back(Action::Persist { records, inline });
    }

    /// Everything through `zxid` is durable here: it counts as this server's ACK.
    fn on_durable(&mut self, now: Now, zxid: i64) {
        if let Some(since) = self.disk_full_since_ms.take() {
            self.stats.disk_full = false;
            info!(
                "transaction log has space again: writes accepted (refused for {:.1?})",
                Duration::from_millis(now.mono_ms().saturating_sub(since))
            );
        }
        let me = self.proposer.voters().me();
        if self.proposer.ack(me, zxid).is_some() {
            self.commit_ready(now);
        }
    }

    fn on_log_failed(&mut self, now: Now, e: zk_log::LogError) {
        if e.is_storage_full() {
            return self.refuse_proposals(now, e);
        }
        self.stop(format!(
            "transaction log failed: {e}; stopping with {} unacknowledged transactions",
            self.proposer.in_flight()
        ));
    }

    fn stop(&mut self, reason: String) {
        error!("{reason}");
        self.stopped = true;
        self.actions.push_back(Action::Stop { reason });
    }

    /// The log refused a batch for a full disk. Everything durable before it was committed already,
    /// so every proposal still uncommitted is taken back: its changes leave prep's view, the zxid
    /// counter returns to the last committed zxid, the clients get SYSTEMERROR (the write was not
    /// applied; a session being created is closed, a refused closeSession leaves the session
    /// open), and the log takes batches again. The next write tries the disk again, so the server
    /// recovers by itself when space returns.
    fn refuse_proposals(&mut self, now: Now, e: zk_log::LogError) {
        let base = self.db.last_applied_zxid();
        let refused = self.proposer.take_back_uncommitted();
        self.db.abandon_after(base);
        self.stats.writes_refused += refused.len() as u64;
        if self.disk_full_since_ms.is_none() {
            self.disk_full_since_ms = Some(now.mono_ms());
            self.stats.disk_full = true;
            error!(
                "transaction log is out of space ({e}): refusing writes until space is freed \
                 (last durable zxid 0x{base:x}; {} pending writes refused)",
                refused.len()
            );
        } else {
            debug!("transaction log still out of space: {} writes refused", refused.len());
        }
        let err = ErrorCode::SystemError.code();
        for p in refused {
            let sid = p.hdr.client_id;
            if p.hdr.txn_type == OpCode::CreateSession.code() {
                // The session was never created: the client sees the connection drop and tries
                // again.
                if let Some((conn, _)) = self.connecting.remove(&sid) {
                    self.actions.push_back(Action::Close { conn });
                }
            } else if p.internal {
                if p.hdr.txn_type == OpCode::CloseSession.code() {
                    // An expiry: try again after one tick.
                    self.db.expiry_mut().reopen(sid, 0, now.mono_ms());
                }
            } else if let Some(w) = self.queues.complete_write(sid, p.hdr.cxid) {
                if w.op == OpCode::CloseSession {
                    let t = self.db.sessions().timeout_ms(sid).unwrap_or(0);
                    self.db.expiry_mut().reopen(sid, t, now.mono_ms());
                }
                self.reply(w.conn, ReplyHeader { xid: w.cxid, zxid: base, err }, &Body::Empty);
                self.run_ready_reads(now, sid);
            }
        }
        self.actions.push_back(Action::ResumeLog);
    }

    fn commit_ready(&mut self, now: Now) {
        let tell_followers = !self.proposer.voters().is_solo();
        while let Some(p) = self.proposer.pop_committed() {
            if tell_followers {
                self.actions.push_back(Action::Commit { zxid: p.hdr.zxid });
            }
            self.apply(now, p);
        }
        let committed = self.proposer.committed();
        while self.syncs_waiting.front().is_some_and(|&(after, _)| after <= committed) {
            if let Some((_, to)) = self.syncs_waiting.pop_front() {
                self.actions.push_back(Action::SyncReady { to });
            }
        }
    }

    /// Applies a committed transaction: watch events first, then the reply.
    fn apply(&mut self, now: Now, p: Proposal) {
        let applied = self.db.apply(&p.hdr, &p.txn);
        if let Some(s) = self.snapshots.as_mut() {
            s.since += 1;
        }
        for d in applied.events {
            self.deliver_event(d.watcher, &d.event, d.acl.as_deref().map(|v| v.as_slice()));
        }
        let zxid = self.db.last_applied_zxid();
        let sid = p.hdr.client_id;
        if let Outcome::SessionCreated = applied.outcome {
            // Its expiry starts now, on this server's clock.
            self.db.expiry_mut().touch(sid, now.mono_ms());
            if let Some((conn, timeout_ms)) = self.connecting.remove(&sid) {
                if self.conns.contains(conn) {
                    self.bind(conn, sid);
                    let pw = Bytes::copy_from_slice(&zk_tree::session_password(sid));
                    self.send_connect_response(conn, timeout_ms, sid, pw);
                    debug!("session 0x{sid:x} established");
                }
            }
            return;
        }
        let closed = matches!(applied.outcome, Outcome::SessionClosed);
        if !p.internal {
            if let Some(w) = self.queues.complete_write(sid, p.hdr.cxid) {
                let (err, body) = write_reply(w.op, &applied.outcome);
                let latency = Duration::from_micros(now.mono_us.saturating_sub(w.received_us));
                self.stats.record_latency(latency);
                if let Some(c) = self.conns.get(w.conn) {
                    c.stats.record(w.op, w.cxid, zxid, latency, now.wall_ms);
                }
                self.reply(w.conn, ReplyHeader { xid: w.cxid, zxid, err: err.code() }, &body);
            }
        }
        if closed {
            self.session_gone(now, sid);
        } else if !p.internal {
            self.run_ready_reads(now, sid);
        }
    }

    /// The session's closeSession was applied: requests still queued behind it are answered
    /// SESSIONEXPIRED (as Apache answers a closing session), then its connection is closed.
    fn session_gone(&mut self, _now: Now, sid: SessionId) {
        let last = self.db.last_applied_zxid();
        for r in self.queues.remove_session(sid) {
            let err = ErrorCode::SessionExpired.code();
            self.reply(r.conn, ReplyHeader { xid: r.xid, zxid: last, err }, &Body::Empty);
        }
        if let Some(conn) = self.conns.unbind_session(sid) {
            self.actions.push_back(Action::Close { conn });
        }
    }

    /// Runs the reads of `sid` that no longer wait for a write.
    fn run_ready_reads(&mut self, now: Now, sid: SessionId) {
        for r in self.queues.take_ready_reads(sid) {
            self.execute_read(now, r);
        }
    }

    fn deliver_event(&mut self, watcher: WatcherId, event: &WatcherEvent, acl: Option<&[Acl]>) {
        let Some(c) = self.conns.get(watcher) else { return };
        if let Some(acl) = acl {
            if zk_tree::acl::check_acl(self.db.config(), acl, perms::READ, &c.auth).is_err() {
                return;
            }
        }
        write_frame(&mut self.buf, |b| {
            ReplyHeader { xid: xid::NOTIFICATION, zxid: -1, err: 0 }.write(b);
            event.write(b);
        });
        let frame = self.buf.split().freeze();
        self.stats.packets_sent += 1;
        self.actions.push_back(Action::Frame { conn: watcher, frame });
    }

    /// Queues a reply. One to a connection that is gone is dropped by the driver, which frees its
    /// permit then.
    fn reply(&mut self, conn: ConnId, hdr: ReplyHeader, body: &Body) {
        write_frame(&mut self.buf, |b| {
            hdr.write(b);
            if hdr.err == 0 {
                body.encode(b);
            }
        });
        let frame = self.buf.split().freeze();
        self.stats.packets_sent += 1;
        self.actions.push_back(Action::Reply { conn, frame });
    }

    fn execute_read(&mut self, now: Now, r: PendingRead) {
        let PendingRead { conn, xid, op, body, received_us } = r;
        let Some(c) = self.conns.get(conn) else {
            self.actions.push_back(Action::ReleasePermit);
            return;
        };
        let auth = c.auth.clone();
        let sid = c.session.unwrap_or(0);
        let last = self.db.last_applied_zxid();
        if self.db.expiry().is_closing(sid) || !self.db.sessions().contains(sid) {
            let err = ErrorCode::SessionExpired.code();
            self.reply(conn, ReplyHeader { xid, zxid: last, err }, &Body::Empty);
            return;
        }
        let req = match body {
            Ok(r) => r,
            Err(e) => {
                info!("session 0x{sid:x}: undecodable request (op {op}): {e}");
                let err = ErrorCode::MarshallingError.code();
                self.reply(conn, ReplyHeader { xid, zxid: last, err }, &Body::Empty);
                return;
            }
        };
        match req {
            Request::Ping => {
                self.reply(conn, ReplyHeader { xid: xid::PING, zxid: last, err: 0 }, &Body::Empty);
                return;
            }
            Request::Sasl(_) => {
                // No SASL mechanism is configured: like Apache, answer with a null token.
                info!("session 0x{sid:x} sent a SASL token; SASL is not configured");
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &Body::NullBuffer);
                return;
            }
            _ => {}
        }
        let answer = reads::read(&mut self.db, conn, sid, &auth, req);
        for ev in &answer.events {
            self.deliver_event(conn, ev, None);
        }
        let op_code = OpCode::from_i32(op).unwrap_or(OpCode::Error);
        let latency = Duration::from_micros(now.mono_us.saturating_sub(received_us));
        self.stats.record_latency(latency);
        if let Some(c) = self.conns.get(conn) {
            c.stats.record(op_code, xid, last, latency, now.wall_ms);
        }
        let (err, body) = match answer.result {
            Ok(b) => (0, b),
            Err(e) => (e.code(), Body::Empty),
        };
        self.reply(conn, ReplyHeader { xid, zxid: last, err }, &body);
    }

    // ---------------------------------------------------------------- snapshots

    /// Starts a snapshot when one is due, and steps a running one by a bounded number of nodes
    /// when the snapshot thread has room.
    fn snapshot_step(&mut self, now: Now) {
        let Some(s) = self.snapshots.as_mut() else { return };
        if s.due() {
            let cur = self.db.snapshot_begin();
            let zxid = cur.start_zxid();
            let pace = s.started(cur, now.mono_ms(), &mut self.rng);
            if pace == 0 {
                info!("taking a snapshot at zxid 0x{zxid:x}");
            } else {
                info!("taking a snapshot at zxid 0x{zxid:x}, written at up to {:.1} MB/s", pace as f64 / 1e6);
            }
            self.actions.push_back(Action::Snapshot(SnapJob::Begin { zxid, pace }));
        }
        if !s.can_step() {
            return;
        }
        let Some(cur) = s.cursor.as_mut() else { return };
        let mut buf = s.buffers.pop().unwrap_or_else(|| Vec::with_capacity(256 * 1024));
        buf.clear();
        let done = self.db.snapshot_step(cur, &mut buf, NODES_PER_STEP);
        s.taking_bytes += buf.len() as u64;
        s.chunks_out += 1;
        self.actions.push_back(Action::Snapshot(SnapJob::Chunk(buf)));
        if done {
            info!(
                "snapshot at zxid 0x{:x} serialized: {} nodes, {} bytes",
                cur.start_zxid(),
                cur.nodes_written(),
                s.taking_bytes
            );
            s.cursor = None;
            s.last_bytes = std::mem::take(&mut s.taking_bytes);
            self.actions.push_back(Action::Snapshot(SnapJob::Finish));
        }
    }

    // ---------------------------------------------------------------- four-letter words

    /// What the four-letter words report, as seen by `asker`, with `outstanding` requests in
    /// flight (the driver counts them).
    pub fn view(&self, asker: SocketAddr, outstanding: usize, now: Now) -> fourlw::View<'_> {
        fourlw::View {
            settings: &self.settings,
            stats: &self.stats,
            db: &self.db,
            conns: self
                .conns
                .iter()
                .map(|(id, c)| fourlw::ConnView { id, remote: c.remote, stats: c.stats.clone() })
                .collect(),
            outstanding,
            last_zxid: self.db.last_applied_zxid(),
            uptime_ms: now.mono_ms().saturating_sub(self.started_ms) as i64,
            asker,
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
