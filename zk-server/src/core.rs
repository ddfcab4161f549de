//! The server core: the one task that owns the database and runs the write path.
//!
//! Every request of every connection comes here as a message. Writes are prepped into transactions,
//! proposed (a quorum of one in standalone), persisted, committed and applied, in zxid order; reads
//! run against applied state, after every earlier request of the same session (FIFO per session).
//! The core never blocks on a client: replies go to bounded per-connection outboxes with `try_send`,
//! and a connection whose outbox overflows is closed.

use crate::fourlw;
use crate::log::{DurableReport, TxnSink};
use crate::settings::Settings;
use crate::snapshots::SnapJob;
use crate::stats::{ConnStats, ServerStats};
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tracing::{debug, info, warn};
use zk_proto::frame::write_frame;
use zk_proto::response::encode_multi_response;
use zk_proto::*;
use zk_tree::{AuthIds, Database, Outcome, RequestCtx, SessionId, WatcherId};

/// Batches of at most this many transactions are written on the core's thread when the log is idle.
const INLINE_RECORDS_MAX: usize = 4;

/// Connection id, unique for the server's lifetime; also the connection's watcher id.
pub type ConnId = WatcherId;

/// What the core sends a connection's writer.
#[derive(Debug)]
pub enum Out {
    /// A reply to a request: frees one outstanding-request permit once written.
    Reply(Bytes),
    /// A frame that answers no request (watch events, the handshake answer).
    Frame(Bytes),
    /// Flush what is queued, then close.
    Close,
}

/// A connection's outbox.
pub type Outbox = mpsc::Sender<Out>;

/// Messages into the core.
#[derive(Debug)]
pub enum CoreMsg {
    /// A handshake arrived on a new connection.
    Connect {
        /// The connection.
        conn: ConnId,
        /// Peer address (for ip ACLs and `cons`).
        remote: SocketAddr,
        /// The decoded handshake.
        req: ConnectRequest,
        /// Where to send frames for this connection.
        out: Outbox,
        /// Counters the connection task keeps.
        stats: Arc<ConnStats>,
        /// Fired once the session is bound, so the reader starts reading requests.
        ready: oneshot::Sender<()>,
    },
    /// A request after the handshake (the sender holds one outstanding-request permit for it).
    Request {
        /// The connection.
        conn: ConnId,
        /// Header xid.
        xid: i32,
        /// Header opcode.
        op: i32,
        /// The decoded body, or why it did not decode.
        body: Result<Request, RequestError>,
        /// When it was read, for latency statistics.
        received: Instant,
    },
    /// The connection is gone.
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// A four-letter word to answer.
    FourLetter {
        /// The word.
        cmd: String,
        /// Who asks (Apache counts and lists the asking connection too).
        asker: SocketAddr,
        /// Where the text goes.
        reply: oneshot::Sender<String>,
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
    /// Stop: the process is shutting down.
    Shutdown,
}

struct Conn {
    out: Outbox,
    remote: SocketAddr,
    session: Option<SessionId>,
    auth: AuthIds,
    /// Whether the handshake carried the readOnly byte (the answer mirrors it).
    read_only_byte: bool,
    stats: Arc<ConnStats>,
    timeout_ms: i32,
    ready: Option<oneshot::Sender<()>>,
}

enum Origin {
    Client { conn: ConnId, xid: i32, op: OpCode, received: Instant },
    Connect { conn: ConnId, timeout_ms: i32 },
    Internal,
}

struct Proposal {
    hdr: TxnHeader,
    txn: Txn,
    origin: Origin,
}

/// A session's requests that must wait for an earlier write of the same session.
enum Pending {
    Write(i64),
    Read { conn: ConnId, xid: i32, op: i32, body: Result<Request, RequestError>, received: Instant },
}

/// The state the core task owns.
pub struct Core {
    settings: Arc<Settings>,
    db: Database,
    conns: HashMap<ConnId, Conn>,
    session_conn: HashMap<SessionId, ConnId>,
    queues: HashMap<SessionId, VecDeque<Pending>>,
    last_zxid: i64,
    /// Prepped and proposed, not yet committed, in zxid order.
    proposals: VecDeque<Proposal>,
    /// How many of `proposals` (from the front) were handed to the log already.
    handed_to_log: usize,
    log: Box<dyn TxnSink>,
    /// Reports from the log: everything through zxid z is durable.
    durable: Option<mpsc::Receiver<DurableReport>>,
    stats: ServerStats,
    permits: Arc<Semaphore>,
    snapshots: Snapshots,
    /// Set while the log refuses writes for a full disk (since the first refusal).
    disk_full_since: Option<Instant>,
    next_session: i64,
    epoch: Instant,
    buf: BytesMut,
}

fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Opcodes whose requests become transactions.
fn is_write_op(op: i32) -> bool {
    OpCode::from_i32(op).is_some_and(|o| o.is_write())
}

impl Core {
    /// A core over `db`, persisting through `log`. `permits` is the global outstanding-request limit
    /// shared with the connections.
    pub fn new(
        settings: Arc<Settings>,
        db: Database,
        log: Box<dyn TxnSink>,
        durable: mpsc::Receiver<DurableReport>,
        permits: Arc<Semaphore>,
    ) -> Core {
        let last_zxid = db.last_applied_zxid();
        // Session ids: a time-derived high part so that ids differ across restarts, server id 0 in the
        // top byte for standalone, as Apache ZooKeeper lays them out.
        let next_session = ((wall_ms() << 24) as u64 >> 8) as i64;
        Core {
            settings,
            db,
            conns: HashMap::new(),
            session_conn: HashMap::new(),
            queues: HashMap::new(),
            last_zxid,
            proposals: VecDeque::new(),
            handed_to_log: 0,
            log,
            durable: Some(durable),
            stats: ServerStats::new(),
            permits,
            snapshots: Snapshots::default(),
            disk_full_since: None,
            next_session,
            epoch: Instant::now(),
            buf: BytesMut::with_capacity(64 * 1024),
        }
    }

    /// Gives the core its snapshot thread. A snapshot is taken every `snap_count` transactions
    /// (randomised in [snap_count/2+1, snap_count] as Apache does), or once about `snap_size_bytes`
    /// of log were written since the last one (randomised in [size/2, size); 0 = no size
    /// trigger), whichever comes first; and once right away when `now` is set (after a start that
    /// replayed the log, so the next start is fast). Each snapshot is written at the pace
    /// [`Snapshots::pace`] gives for `pace_floor` (bytes a second; 0 = no limit).
    pub fn with_snapshots(
        mut self,
        thread: crate::snapshots::SnapshotThread,
        snap_count: u64,
        snap_size_bytes: u64,
        pace_floor: u64,
        now: bool,
    ) -> Core {
        let s = &mut self.snapshots;
        s.pace_floor = pace_floor;
        s.since_at = Some(Instant::now());
        s.tx = Some(thread.jobs);
        s.buffers = Some(thread.buffers);
        s.snap_count = snap_count.max(2);
        s.snap_size = snap_size_bytes;
        s.threshold = if now { 0 } else { Snapshots::roll(s.snap_count) };
        s.size_threshold = Snapshots::roll_size(s.snap_size);
        self
    }

    /// Monotonic ms since the core started (uptime). Sessions use the wall clock instead, the clock
    /// transaction headers carry, because applying createSession starts a session's expiry from the
    /// header's time.
    fn mono_ms(&self) -> i64 {
        self.epoch.elapsed().as_millis() as i64
    }

    /// Runs until shutdown. Messages are handled in batches: everything that is ready is taken, the
    /// transactions it produced are persisted together (group commit), then committed and applied.
    pub async fn run(mut self, mut inbox: mpsc::Receiver<CoreMsg>) {
        let tick = std::time::Duration::from_millis((self.settings.tick_ms / 2).clamp(10, 1000) as u64);
        let mut expiry = tokio::time::interval(tick);
        expiry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let reap_every = std::time::Duration::from_millis(self.settings.container_check_interval_ms.max(10));
        let mut reaper = tokio::time::interval(reap_every);
        reaper.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // autopurge.purgeInterval: retention also runs on a timer (it always follows a snapshot).
        let purge_hours = u64::from(self.settings.purge_interval_hours);
        let purge_every = std::time::Duration::from_secs(purge_hours.max(1) * 3600);
        let mut purger = tokio::time::interval_at(tokio::time::Instant::now() + purge_every, purge_every);
        purger.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Bounded batch so one busy iteration cannot starve timers.
        const BATCH_MAX: usize = 1024;
        let mut durable = self.durable.take().expect("run once");
        loop {
            tokio::select! {
                report = durable.recv() => match report {
                    Some(Ok(z)) => {
                        self.on_durable(z);
                        while let Ok(more) = durable.try_recv() {
                            match more {
                                Ok(z) => self.on_durable(z),
                                Err(e) => self.log_failed(e),
                            }
                        }
                    }
                    Some(Err(e)) => self.log_failed(e),
                    None => self.log_failed(zk_log::LogError::WriterStopped),
                },
                msg = inbox.recv() => {
                    let Some(msg) = msg else { break };
                    if matches!(msg, CoreMsg::Shutdown) { break; }
                    self.handle(msg);
                    let mut n = 1;
                    while n < BATCH_MAX {
                        match inbox.try_recv() {
                            Ok(CoreMsg::Shutdown) => { self.flush(); self.drain_log(&mut durable).await; return; }
                            Ok(m) => self.handle(m),
                            Err(_) => break,
                        }
                        n += 1;
                    }
                }
                // While a snapshot is being taken, keep stepping it between batches; when its
                // thread is behind, look again shortly rather than spin.
                _ = std::future::ready(()), if self.snapshots.stepping() => {}
                _ = tokio::time::sleep(std::time::Duration::from_millis(2)), if self.snapshots.waiting() => {}
                _ = expiry.tick() => self.expire_sessions(),
                _ = reaper.tick() => self.reap_containers(),
                _ = purger.tick(), if purge_hours > 0 => {
                    info!("autopurge: applying retention (every {purge_hours} h)");
                    self.snapshots.pending.push_back(SnapJob::Retain);
                    self.snapshots.send_pending();
                }
            }
            self.flush();
            self.snapshot_step();
        }
        self.flush();
        self.drain_log(&mut durable).await;
        info!("core stopped at zxid 0x{:x}", self.db.last_applied_zxid());
    }

    /// At shutdown: waits (bounded) until what was handed to the log is durable, and commits it,
    /// so clients that are still connected get their answers.
    async fn drain_log(&mut self, durable: &mut mpsc::Receiver<DurableReport>) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.proposals.is_empty() {
            self.flush();
            match tokio::time::timeout_at(deadline, durable.recv()).await {
                Ok(Some(Ok(z))) => self.on_durable(z),
                Ok(Some(Err(e))) => {
                    tracing::error!("transaction log failed during shutdown: {e}");
                    return;
                }
                Ok(None) | Err(_) => return,
            }
        }
    }

    fn handle(&mut self, msg: CoreMsg) {
        match msg {
            CoreMsg::Connect { conn, remote, req, out, stats, ready } => {
                self.on_connect(conn, remote, req, out, stats, ready)
            }
            CoreMsg::Request { conn, xid, op, body, received } => {
                self.on_request(conn, xid, op, body, received)
            }
            CoreMsg::Closed { conn } => self.on_closed(conn),
            CoreMsg::FourLetter { cmd, asker, reply } => {
                let text = fourlw::render(&cmd, &self.view(asker));
                if cmd == "crst" {
                    for c in self.conns.values() {
                        c.stats.reset();
                    }
                } else if cmd == "srst" {
                    self.stats.reset();
                }
                let _ = reply.send(text);
            }
            CoreMsg::SnapshotDone { ok, purge_logs_before } => {
                self.snapshots.busy = false;
                if !ok {
                    // Try again after another snap_count transactions.
                    self.snapshots.since = 0;
                }
                if let Some(z) = purge_logs_before {
                    self.log.purge_before(z);
                }
            }
            CoreMsg::Retained { purge_logs_before } => {
                if let Some(z) = purge_logs_before {
                    self.log.purge_before(z);
                }
            }
            CoreMsg::Shutdown => {}
        }
    }

    /// Starts a snapshot when enough transactions were applied since the last one, and steps a
    /// running one by a bounded number of nodes. Never waits: when the snapshot thread is behind,
    /// stepping pauses until it catches up.
    fn snapshot_step(&mut self) {
        if self.snapshots.tx.is_none() || !self.snapshots.send_pending() {
            return;
        }
        let s = &mut self.snapshots;
        if s.cursor.is_none() {
            if s.busy || !s.due() {
                return;
            }
            let cur = self.db.snapshot_begin();
            let elapsed = s.since_at.map_or(std::time::Duration::ZERO, |t| t.elapsed());
            let pace = Snapshots::pace(s.pace_floor, s.bytes_since, elapsed);
            if pace == 0 {
                info!("taking a snapshot at zxid 0x{:x}", cur.start_zxid());
            } else {
                info!(
                    "taking a snapshot at zxid 0x{:x}, written at up to {:.1} MB/s",
                    cur.start_zxid(),
                    pace as f64 / 1e6
                );
            }
            s.since_at = Some(Instant::now());
            s.pending.push_back(SnapJob::Begin { zxid: cur.start_zxid(), pace });
            s.cursor = Some(cur);
            s.busy = true;
            s.since = 0;
            s.bytes_since = 0;
            s.threshold = Snapshots::roll(s.snap_count);
            s.size_threshold = Snapshots::roll_size(s.snap_size);
        }
        let Some(cur) = s.cursor.as_mut() else { return };
        let mut buf = match s.buffers.as_ref().and_then(|b| b.try_recv().ok()) {
            Some(mut b) => {
                b.clear();
                b
            }
            None => Vec::with_capacity(256 * 1024),
        };
        let t0 = Instant::now();
        let done = self.db.snapshot_step(cur, &mut buf, crate::snapshots::NODES_PER_STEP);
        s.core_time += t0.elapsed();
        s.taking_bytes += buf.len() as u64;
        if done {
            info!(
                "snapshot at zxid 0x{:x} serialized: {} nodes, {} bytes, {:.1?} of the core's time",
                cur.start_zxid(),
                cur.nodes_written(),
                s.taking_bytes,
                std::mem::take(&mut s.core_time)
            );
            s.cursor = None;
            s.last_bytes = std::mem::take(&mut s.taking_bytes);
            s.pending.push_back(SnapJob::Chunk(buf));
            s.pending.push_back(SnapJob::Finish);
        } else {
            s.pending.push_back(SnapJob::Chunk(buf));
        }
        s.send_pending();
    }

    // ---------------------------------------------------------------- sessions and connections

    fn on_connect(
        &mut self,
        conn: ConnId,
        remote: SocketAddr,
        req: ConnectRequest,
        out: Outbox,
        stats: Arc<ConnStats>,
        ready: oneshot::Sender<()>,
    ) {
        let auth = AuthIds {
            ids: vec![Id { scheme: "ip".into(), id: remote.ip().to_canonical().to_string() }],
            is_super: false,
        };
        let timeout_ms = self.settings.negotiate_timeout(req.time_out);
        self.conns.insert(
            conn,
            Conn {
                out,
                remote,
                session: None,
                auth,
                read_only_byte: req.read_only.is_some(),
                stats,
                timeout_ms,
                ready: Some(ready),
            },
        );
        if req.last_zxid_seen > self.db.last_applied_zxid() {
            info!(
                "refusing session from {remote}: client has seen zxid 0x{:x}, ours is 0x{:x}",
                req.last_zxid_seen,
                self.db.last_applied_zxid()
            );
            self.close_conn(conn);
            return;
        }
        if req.session_id == 0 {
            let sid = self.next_session;
            self.next_session += 1;
            let zxid = self.next_zxid();
            let txn = self.db.prep_create_session(sid, timeout_ms);
            let hdr = TxnHeader {
                client_id: sid,
                cxid: 0,
                zxid,
                time: wall_ms(),
                txn_type: OpCode::CreateSession.code(),
            };
            self.propose(hdr, txn, Origin::Connect { conn, timeout_ms });
            return;
        }
        let sid = req.session_id;
        let valid = req.passwd.as_ref() == zk_tree::session_password(sid)
            && self.db.sessions().contains(sid)
            && !self.db.sessions().is_closing(sid);
        if !valid {
            info!("refusing session 0x{sid:x} from {remote}: expired, closing or wrong password");
            self.send_connect_response(conn, 0, 0, Bytes::from_static(&[0; 16]));
            self.close_conn(conn);
            return;
        }
        let now = wall_ms();
        self.db.sessions_mut().touch(sid, now);
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
        if let Some(old) = self.session_conn.insert(sid, conn) {
            if old != conn {
                debug!("session 0x{sid:x} moved to a new connection; closing the old one");
                self.db.remove_watcher(old);
                self.close_conn(old);
                self.conns.remove(&old);
            }
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(sid);
            c.stats.set_session(sid, c.timeout_ms);
            if let Some(ready) = c.ready.take() {
                let _ = ready.send(());
            }
        }
    }

    fn send_connect_response(&mut self, conn: ConnId, timeout_ms: i32, sid: i64, passwd: Bytes) {
        let Some(c) = self.conns.get(&conn) else { return };
        let resp = ConnectResponse {
            protocol_version: 0,
            time_out: timeout_ms,
            session_id: sid,
            passwd,
            read_only: c.read_only_byte.then_some(false),
        };
        write_frame(&mut self.buf, |b| resp.write(b));
        let frame = self.buf.split().freeze();
        self.send(conn, Out::Frame(frame));
    }

    fn on_closed(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.db.remove_watcher(conn);
            if let Some(sid) = c.session {
                if self.session_conn.get(&sid) == Some(&conn) {
                    self.session_conn.remove(&sid);
                }
            }
        }
    }

    fn close_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get(&conn) {
            let _ = c.out.try_send(Out::Close);
        }
    }

    /// Queues `out` for `conn`; a full outbox means the client stopped reading: close it.
    fn send(&mut self, conn: ConnId, out: Out) {
        let Some(c) = self.conns.get(&conn) else {
            if matches!(out, Out::Reply(_)) {
                self.permits.add_permits(1);
            }
            return;
        };
        let is_reply = matches!(out, Out::Reply(_));
        match c.out.try_send(out) {
            Ok(()) => {
                self.stats.packets_sent += 1;
            }
            Err(e) => {
                if is_reply {
                    self.permits.add_permits(1);
                }
                if matches!(e, mpsc::error::TrySendError::Full(_)) {
                    warn!("closing connection from {}: it is not reading what it is sent", c.remote);
                } else {
                    debug!("connection from {} already closed", c.remote);
                }
                self.db.remove_watcher(conn);
                let c = self.conns.remove(&conn).expect("present");
                // The writer sees the channel close once the core drops its sender.
                drop(c);
            }
        }
    }

    fn expire_sessions(&mut self) {
        let now = wall_ms();
        for sid in self.db.sessions_mut().expired(now) {
            info!("session 0x{sid:x} expired");
            self.propose_close_session(sid);
        }
    }

    fn propose_close_session(&mut self, sid: SessionId) {
        self.db.sessions_mut().set_closing(sid);
        self.propose_internal(sid, &Request::CloseSession);
    }

    fn reap_containers(&mut self) {
        let per_tick = (self.settings.container_max_per_minute as u64
            * self.settings.container_check_interval_ms
            / 60_000)
            .max(1) as usize;
        for path in self.db.reapable(wall_ms(), per_tick) {
            debug!("reaping {path}");
            let req = Request::DeleteContainer(DeleteRequest { path, version: -1 });
            self.propose_internal(0, &req);
        }
    }

    /// Preps and proposes a request the server issues itself (session expiry, reaping): cxid 0,
    /// with the super identity, as Apache's own requests carry no ACL restrictions.
    fn propose_internal(&mut self, session: SessionId, req: &Request) {
        let zxid = self.next_zxid();
        let now = wall_ms();
        let auth = AuthIds { ids: vec![], is_super: true };
        let ctx = RequestCtx { session, cxid: 0, auth: &auth };
        let txn = self.db.prep(&ctx, req, zxid, now);
        let txn_type = zk_tree::txn_type(req.op(), &txn).code();
        let hdr = TxnHeader { client_id: session, cxid: 0, zxid, time: now, txn_type };
        self.propose(hdr, txn, Origin::Internal);
    }

    // ---------------------------------------------------------------- requests

    fn on_request(
        &mut self,
        conn: ConnId,
        xid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        received: Instant,
    ) {
        self.stats.packets_received += 1;
        let Some(sid) = self.conns.get(&conn).and_then(|c| c.session) else {
            // A request before the session exists or after the connection went: nothing to answer.
            self.permits.add_permits(1);
            return;
        };
        let now = wall_ms();
        if !self.db.sessions_mut().touch(sid, now) && !self.db.sessions().contains(sid) {
            // Apache drops requests of sessions it no longer knows; the client times out.
            debug!("dropping request for unknown session 0x{sid:x}");
            self.permits.add_permits(1);
            return;
        }
        // A closing session's reads still get answers, in order (SESSIONEXPIRED); its writes never
        // reach the log. (Apache does either, depending on a race between its threads.)
        if self.db.sessions().is_closing(sid) && is_write_op(op) {
            debug!("dropping write (op {op}) of closing session 0x{sid:x}");
            self.permits.add_permits(1);
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
                self.reply(conn, ReplyHeader { xid, zxid: -1, err: ErrorCode::Unimplemented.code() }, |_| {});
                self.close_conn(conn);
                return;
            }
            Ok(Request::Auth(packet)) => {
                self.on_auth(conn, xid, packet.clone());
                return;
            }
            _ => {}
        }
        if is_write_op(op) {
            let zxid = self.next_zxid();
            let now = wall_ms();
            let opcode = OpCode::from_i32(op).expect("write op");
            let txn = match &body {
                // Apache reads a client's deleteContainer path from the whole request buffer, so
                // it is never a valid path: BADARGUMENTS, logged as a failed write.
                _ if opcode == OpCode::DeleteContainer => {
                    Txn::Error(ErrorTxn { err: ErrorCode::BadArguments.code() })
                }
                Ok(req) => {
                    if opcode == OpCode::CloseSession {
                        self.db.sessions_mut().set_closing(sid);
                    }
                    let auth = self.conns[&conn].auth.clone();
                    let ctx = RequestCtx { session: sid, cxid: xid, auth: &auth };
                    self.db.prep(&ctx, req, zxid, now)
                }
                Err(e) => {
                    info!("session 0x{sid:x}: undecodable {opcode:?} request: {e}");
                    Txn::Error(ErrorTxn { err: ErrorCode::MarshallingError.code() })
                }
            };
            let txn_type = zk_tree::txn_type(opcode, &txn).code();
            let hdr = TxnHeader { client_id: sid, cxid: xid, zxid, time: now, txn_type };
            self.propose(hdr, txn, Origin::Client { conn, xid, op: opcode, received });
            self.queues.entry(sid).or_default().push_back(Pending::Write(zxid));
        } else {
            let q = self.queues.entry(sid).or_default();
            if q.is_empty() {
                self.execute_read(conn, xid, op, body, received);
            } else {
                q.push_back(Pending::Read { conn, xid, op, body, received });
            }
        }
    }

    fn on_auth(&mut self, conn: ConnId, xid: i32, packet: AuthPacket) {
        let remote = self.conns[&conn].remote.ip().to_canonical().to_string();
        match zk_tree::authenticate_conn(&packet.scheme, &packet.auth, self.db.config(), &remote) {
            Ok(entry) => {
                let c = self.conns.get_mut(&conn).expect("present");
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
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, |_| {});
            }
            Err(code) => {
                self.stats.auth_failed += 1;
                warn!("auth failed for scheme {}", packet.scheme);
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: code.code() }, |_| {});
                self.close_conn(conn);
            }
        }
    }

    fn next_zxid(&mut self) -> i64 {
        self.last_zxid += 1;
        self.last_zxid
    }

    fn propose(&mut self, hdr: TxnHeader, txn: Txn, origin: Origin) {
        self.proposals.push_back(Proposal { hdr, txn, origin });
    }

    /// Hands the proposals made since the last call to the log as one batch. They are committed
    /// when the log reports them durable ([`Core::on_durable`]).
    fn flush(&mut self) {
        if self.handed_to_log == self.proposals.len() {
            return;
        }
        let batch: Vec<(&TxnHeader, &Txn)> =
            self.proposals.iter().skip(self.handed_to_log).map(|p| (&p.hdr, &p.txn)).collect();
        let records = match zk_log::RecordBatch::encode(&batch) {
            Ok(r) => r,
            Err(e) => return self.log_failed(e),
        };
        let n = batch.len();
        let bytes = records.bytes();
        // A few writes with nothing else in flight (a lone client's write): write and sync them
        // here, which saves the two thread hand-offs of the queue; the core waits one sync, as
        // the writer thread would have. Under load batches are larger or one is in flight, and
        // they go through the queue so the core keeps working while the log syncs.
        if self.handed_to_log == 0 && n <= INLINE_RECORDS_MAX {
            if let Some(res) = self.log.commit_inline(&records) {
                self.handed_to_log = n;
                self.snapshots.bytes_since = self.snapshots.bytes_since.saturating_add(bytes);
                match res {
                    Ok(z) => self.on_durable(z),
                    Err(e) => self.log_failed(e),
                }
                return;
            }
        }
        match self.log.try_submit(records) {
            Ok(()) => {
                self.handed_to_log += n;
                self.snapshots.bytes_since = self.snapshots.bytes_since.saturating_add(bytes);
            }
            // The log's queue is full: these go with the next batch, after a durability report.
            Err(zk_log::SubmitError::Full(_)) => {}
            Err(zk_log::SubmitError::Stopped(_)) => self.log_failed(zk_log::LogError::WriterStopped),
        }
    }

    /// Everything through `zxid` is durable: commit and apply it, in order.
    fn on_durable(&mut self, zxid: i64) {
        if let Some(since) = self.disk_full_since.take() {
            self.stats.disk_full = false;
            info!("transaction log has space again: writes accepted (refused for {:.1?})", since.elapsed());
        }
        while self.proposals.front().is_some_and(|p| p.hdr.zxid <= zxid) {
            let p = self.proposals.pop_front().expect("front exists");
            self.handed_to_log -= 1;
            self.commit(p);
        }
    }

    /// The log cannot make transactions durable. None of the pending ones was acknowledged. A full
    /// disk refuses them (see [`Core::refuse_proposals`]); any other failure stops the server
    /// rather than serve state it cannot keep.
    fn log_failed(&mut self, e: zk_log::LogError) {
        if e.is_storage_full() {
            return self.refuse_proposals(e);
        }
        tracing::error!(
            "transaction log failed: {e}; stopping with {} unacknowledged transactions",
            self.proposals.len()
        );
        std::process::exit(2);
    }

    /// The log refused a batch for a full disk. Everything durable before it was committed already,
    /// so every proposal still here is taken back: its changes leave prep's view, the zxid counter
    /// returns to the last applied zxid, the clients get SYSTEMERROR (the write was not applied;
    /// a session being created is closed, a refused closeSession leaves the session open), and the
    /// log takes batches again. The next write tries the disk again, so the server recovers by
    /// itself when space returns.
    fn refuse_proposals(&mut self, e: zk_log::LogError) {
        let base = self.db.last_applied_zxid();
        let refused = std::mem::take(&mut self.proposals);
        self.handed_to_log = 0;
        self.db.abandon_after(base);
        self.last_zxid = base;
        self.stats.writes_refused += refused.len() as u64;
        if self.disk_full_since.is_none() {
            self.disk_full_since = Some(Instant::now());
            self.stats.disk_full = true;
            tracing::error!(
                "transaction log is out of space ({e}): refusing writes until space is freed \
                 (last durable zxid 0x{base:x}; {} pending writes refused)",
                refused.len()
            );
        } else {
            debug!("transaction log still out of space: {} writes refused", refused.len());
        }
        let now = wall_ms();
        let err = ErrorCode::SystemError.code();
        for p in refused {
            let sid = p.hdr.client_id;
            match p.origin {
                Origin::Connect { conn, .. } => {
                    // The session was never created: the client sees the connection drop and
                    // tries again.
                    self.close_conn(conn);
                }
                Origin::Internal => {
                    if p.hdr.txn_type == OpCode::CloseSession.code() {
                        // An expiry: try again after one tick.
                        self.db.sessions_mut().reopen(sid, 0, now);
                    }
                }
                Origin::Client { conn, xid, op, .. } => {
                    if op == OpCode::CloseSession {
                        let t = self.db.sessions().timeout_ms(sid).unwrap_or(0);
                        self.db.sessions_mut().reopen(sid, t, now);
                    }
                    self.reply(conn, ReplyHeader { xid, zxid: base, err }, |_| {});
                    self.advance_queue(sid, p.hdr.zxid);
                }
            }
        }
        self.log.resume();
    }

    fn commit(&mut self, p: Proposal) {
        let applied = self.db.apply(&p.hdr, &p.txn);
        self.snapshots.since += 1;
        for d in applied.events {
            self.deliver_event(d.watcher, &d.event, d.acl.as_deref().map(|v| v.as_slice()));
        }
        let zxid = self.db.last_applied_zxid();
        match p.origin {
            Origin::Connect { conn, timeout_ms } => {
                let sid = p.hdr.client_id;
                if self.conns.contains_key(&conn) {
                    self.bind(conn, sid);
                    let pw = Bytes::copy_from_slice(&zk_tree::session_password(sid));
                    self.send_connect_response(conn, timeout_ms, sid, pw);
                    debug!("session 0x{sid:x} established");
                }
            }
            Origin::Internal => {
                if let Outcome::SessionClosed = applied.outcome {
                    self.session_gone(p.hdr.client_id);
                }
            }
            Origin::Client { conn, xid, op, received } => {
                let sid = p.hdr.client_id;
                let (err, body) = write_reply(op, &applied.outcome);
                self.stats.record_latency(received.elapsed());
                if let Some(c) = self.conns.get(&conn) {
                    c.stats.record(op, xid, zxid, received.elapsed());
                }
                self.reply(conn, ReplyHeader { xid, zxid, err: err.code() }, |b| body.encode(b));
                if matches!(applied.outcome, Outcome::SessionClosed) {
                    self.session_gone(sid);
                } else {
                    self.advance_queue(sid, p.hdr.zxid);
                }
            }
        }
    }

    /// The session's closeSession was applied: requests still queued behind it are answered
    /// SESSIONEXPIRED (as Apache answers a closing session), then its connection is closed.
    fn session_gone(&mut self, sid: SessionId) {
        let last = self.db.last_applied_zxid();
        for pending in self.queues.remove(&sid).unwrap_or_default() {
            if let Pending::Read { conn, xid, .. } = pending {
                let err = ErrorCode::SessionExpired.code();
                self.reply(conn, ReplyHeader { xid, zxid: last, err }, |_| {});
            }
        }
        if let Some(conn) = self.session_conn.remove(&sid) {
            self.close_conn(conn);
        }
    }

    /// The write `zxid` of `sid` completed: run the reads that waited for it.
    fn advance_queue(&mut self, sid: SessionId, zxid: i64) {
        let Some(q) = self.queues.get_mut(&sid) else { return };
        if let Some(&Pending::Write(z)) = q.front() {
            if z == zxid {
                q.pop_front();
            }
        }
        while let Some(Pending::Read { .. }) = self.queues.get(&sid).and_then(|q| q.front()) {
            let Some(Pending::Read { conn, xid, op, body, received }) =
                self.queues.get_mut(&sid).and_then(|q| q.pop_front())
            else {
                break;
            };
            self.execute_read(conn, xid, op, body, received);
        }
        if self.queues.get(&sid).is_some_and(|q| q.is_empty()) {
            self.queues.remove(&sid);
        }
    }

    fn deliver_event(&mut self, watcher: WatcherId, event: &WatcherEvent, acl: Option<&[Acl]>) {
        let Some(c) = self.conns.get(&watcher) else { return };
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
        self.send(watcher, Out::Frame(frame));
    }

    fn reply(&mut self, conn: ConnId, hdr: ReplyHeader, body: impl FnOnce(&mut BytesMut)) {
        write_frame(&mut self.buf, |b| {
            hdr.write(b);
            body(b);
        });
        let frame = self.buf.split().freeze();
        self.send(conn, Out::Reply(frame));
    }

    fn execute_read(
        &mut self,
        conn: ConnId,
        xid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        received: Instant,
    ) {
        let Some(c) = self.conns.get(&conn) else {
            self.permits.add_permits(1);
            return;
        };
        let auth = c.auth.clone();
        let sid = c.session.unwrap_or(0);
        let last = self.db.last_applied_zxid();
        if self.db.sessions().is_closing(sid) || !self.db.sessions().contains(sid) {
            let err = ErrorCode::SessionExpired.code();
            self.reply(conn, ReplyHeader { xid, zxid: last, err }, |_| {});
            return;
        }
        let req = match body {
            Ok(r) => r,
            Err(e) => {
                info!("session 0x{sid:x}: undecodable request (op {op}): {e}");
                self.reply(
                    conn,
                    ReplyHeader { xid, zxid: last, err: ErrorCode::MarshallingError.code() },
                    |_| {},
                );
                return;
            }
        };
        let watch = |w: bool| w.then_some(conn);
        let result: Result<Body, ErrorCode> = match req {
            Request::Ping => {
                self.reply(conn, ReplyHeader { xid: xid::PING, zxid: last, err: 0 }, |_| {});
                return;
            }
            Request::Exists(r) => {
                if r.path.contains('\0') {
                    Err(ErrorCode::BadArguments)
                } else {
                    self.db.exists(&r.path, &auth, watch(r.watch)).map(Body::Stat)
                }
            }
            Request::GetData(r) => {
                self.db.get_data(&r.path, &auth, watch(r.watch)).map(|(d, s)| Body::Data(d, s))
            }
            Request::GetChildren(r) => {
                self.db.get_children(&r.path, &auth, watch(r.watch)).map(|(c, _)| Body::Children(c))
            }
            Request::GetChildren2(r) => {
                self.db.get_children(&r.path, &auth, watch(r.watch)).map(|(c, s)| Body::Children2(c, s))
            }
            Request::GetAcl(r) => self.db.get_acl(&r.path, &auth).map(|(a, s)| Body::Acl(a, s)),
            Request::Sync(r) => Ok(Body::Path(r.path)),
            Request::SetWatches(sw) => {
                let sw2 = SetWatches2 {
                    relative_zxid: sw.relative_zxid,
                    data_watches: sw.data_watches,
                    exist_watches: sw.exist_watches,
                    child_watches: sw.child_watches,
                    persistent_watches: vec![],
                    persistent_recursive_watches: vec![],
                };
                self.set_watches(conn, &auth, &sw2);
                Ok(Body::Empty)
            }
            Request::SetWatches2(sw2) => {
                self.set_watches(conn, &auth, &sw2);
                Ok(Body::Empty)
            }
            Request::AddWatch(r) => match AddWatchMode::from_i32(r.mode) {
                None => Err(ErrorCode::MarshallingError),
                Some(mode) => self.db.add_watch(&r.path, mode, conn, &auth).map(|()| Body::Int(0)),
            },
            Request::CheckWatches(r) => match removable_watcher_type(r.watcher_type) {
                None => Err(ErrorCode::MarshallingError),
                Some(t) => self.db.check_watches(&r.path, t, conn).map(|()| Body::Empty),
            },
            Request::RemoveWatches(r) => match removable_watcher_type(r.watcher_type) {
                None => Err(ErrorCode::MarshallingError),
                Some(t) => self.db.remove_watches(&r.path, t, conn).map(|()| Body::Empty),
            },
            Request::GetEphemerals(r) => Ok(Body::Strings(self.db.get_ephemerals(sid, &r.prefix_path))),
            Request::GetAllChildrenNumber(r) => {
                self.db.get_all_children_number(&r.path, &auth).map(Body::Int)
            }
            Request::WhoAmI => Ok(Body::WhoAmI(
                apache_set_order(&auth.ids)
                    .into_iter()
                    .map(|id| ClientInfo {
                        auth_scheme: id.scheme.clone(),
                        user: match id.scheme.as_str() {
                            "digest" => id.id.split(':').next().unwrap_or("").to_string(),
                            "super" => String::new(),
                            _ => id.id.clone(),
                        },
                    })
                    .collect(),
            )),
            Request::MultiRead(ops) => {
                let mut results = Vec::with_capacity(ops.len());
                for o in ops {
                    results.push(match o {
                        Request::GetChildren(r) => match self.db.get_children(&r.path, &auth, watch(r.watch))
                        {
                            Ok((c, _)) => OpResult::GetChildren(c),
                            Err(e) => OpResult::Error(e),
                        },
                        Request::GetData(r) => match self.db.get_data(&r.path, &auth, None) {
                            Ok((data, stat)) => OpResult::GetData(GetDataResponse { data, stat }),
                            Err(e) => OpResult::Error(e),
                        },
                        _ => OpResult::Error(ErrorCode::Unimplemented),
                    });
                }
                Ok(Body::Multi(results))
            }
            Request::Sasl(_) => {
                // No SASL mechanism is configured: like Apache, answer with a null token.
                info!("session 0x{sid:x} sent a SASL token; SASL is not configured");
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, |b| (None::<Bytes>).write(b));
                return;
            }
            other => {
                warn!("session 0x{sid:x}: {:?} reached the read path", other.op());
                Err(ErrorCode::Unimplemented)
            }
        };
        let op_code = OpCode::from_i32(op).unwrap_or(OpCode::Error);
        self.stats.record_latency(received.elapsed());
        if let Some(c) = self.conns.get(&conn) {
            c.stats.record(op_code, xid, last, received.elapsed());
        }
        let (err, body) = match result {
            Ok(b) => (0, b),
            Err(e) => (e.code(), Body::Empty),
        };
        self.reply(conn, ReplyHeader { xid, zxid: last, err }, |b| body.encode(b));
    }

    fn set_watches(&mut self, conn: ConnId, auth: &AuthIds, sw: &SetWatches2) {
        for ev in self.db.set_watches(conn, auth, sw) {
            self.deliver_event(conn, &ev, None);
        }
    }

    fn view(&self, asker: SocketAddr) -> fourlw::View<'_> {
        fourlw::View {
            settings: &self.settings,
            stats: &self.stats,
            db: &self.db,
            conns: self
                .conns
                .iter()
                .map(|(id, c)| fourlw::ConnView { id: *id, remote: c.remote, stats: c.stats.clone() })
                .collect(),
            outstanding: self.settings.global_outstanding_limit as usize
                - self.permits.available_permits().min(self.settings.global_outstanding_limit as usize),
            last_zxid: self.db.last_applied_zxid(),
            uptime_ms: self.mono_ms(),
            asker,
        }
    }
}

/// A connection's identities in the order Apache's `ConcurrentHashMap`-backed set iterates them:
/// by bucket of jute's `Id.hashCode` in a 16-slot table (it holds few ids), then insertion order.
fn apache_set_order(ids: &[Id]) -> Vec<&Id> {
    let hash = |id: &Id| {
        let h = 17i32.wrapping_mul(37).wrapping_add(zk_tree::java::string_hash(&id.scheme));
        h.wrapping_mul(37).wrapping_add(zk_tree::java::string_hash(&id.id))
    };
    let mut capacity = 16usize;
    while ids.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let mut v: Vec<(usize, &Id)> = ids.iter().enumerate().collect();
    v.sort_by_key(|(rank, id)| {
        let h = hash(id) as u32;
        (((h ^ (h >> 16)) & 0x7fff_ffff) as usize & (capacity - 1), *rank)
    });
    v.into_iter().map(|(_, id)| id).collect()
}

/// The watcher types checkWatches and removeWatches accept: Apache 3.8 refuses the persistent ones
/// (MARSHALLINGERROR).
fn removable_watcher_type(t: i32) -> Option<WatcherType> {
    WatcherType::from_i32(t)
        .filter(|t| matches!(t, WatcherType::Children | WatcherType::Data | WatcherType::Any))
}

/// Snapshot state of the core.
#[derive(Default)]
struct Snapshots {
    tx: Option<SyncSender<SnapJob>>,
    /// The snapshot being stepped, if any.
    cursor: Option<zk_tree::SnapshotCursor>,
    /// Jobs the snapshot thread had no room for yet (at most a step's worth: stepping pauses
    /// while any wait).
    pending: VecDeque<SnapJob>,
    /// A snapshot is being taken or written.
    busy: bool,
    /// Transactions applied since the last snapshot started.
    since: u64,
    /// Take the next snapshot after this many transactions.
    threshold: u64,
    snap_count: u64,
    /// Log bytes handed to the log since the last snapshot started.
    bytes_since: u64,
    /// When the last snapshot started (the core's start before the first).
    since_at: Option<Instant>,
    /// Slowest pace a snapshot is written at, bytes a second (snapshot.writeMBPerSecond); 0 = no
    /// limit.
    pace_floor: u64,
    /// Take the next snapshot after this many log bytes (u64::MAX: never by size).
    size_threshold: u64,
    /// snapSizeLimitInKb in bytes; 0 = off.
    snap_size: u64,
    /// Bytes serialized so far for the snapshot being taken.
    taking_bytes: u64,
    /// Size of the last snapshot taken (its content bytes).
    last_bytes: u64,
    /// Time the core has spent serializing the snapshot being taken.
    core_time: std::time::Duration,
    /// Chunk buffers the snapshot thread is done with.
    buffers: Option<std::sync::mpsc::Receiver<Vec<u8>>>,
}

impl Snapshots {
    /// Whether the core should keep stepping (a snapshot is under way and its thread has room).
    fn stepping(&self) -> bool {
        self.tx.is_some() && self.cursor.is_some() && self.pending.is_empty()
    }

    /// Whether jobs wait for room in the snapshot thread's queue.
    fn waiting(&self) -> bool {
        self.tx.is_some() && !self.pending.is_empty()
    }

    /// Hands waiting jobs to the snapshot thread; true when none is left waiting.
    fn send_pending(&mut self) -> bool {
        let Some(tx) = self.tx.as_ref() else { return false };
        while let Some(job) = self.pending.pop_front() {
            match tx.try_send(job) {
                Ok(()) => {}
                Err(std::sync::mpsc::TrySendError::Full(job)) => {
                    self.pending.push_front(job);
                    return false;
                }
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => {
                    warn!("the snapshot thread stopped; no more snapshots");
                    self.tx = None;
                    self.cursor = None;
                    self.pending.clear();
                    return false;
                }
            }
        }
        true
    }

    /// Apache spreads snapshots of an ensemble's servers apart: a count drawn from
    /// [snap_count/2 + 1, snap_count].
    fn roll(snap_count: u64) -> u64 {
        use rand::Rng;
        let half = snap_count / 2;
        half + 1 + rand::thread_rng().gen_range(0..snap_count - half)
    }

    /// The log size that triggers the next snapshot: in [size/2, size), as Apache draws it.
    fn roll_size(size: u64) -> u64 {
        use rand::Rng;
        let half = size / 2;
        if half == 0 {
            return u64::MAX;
        }
        half + rand::thread_rng().gen_range(0..half)
    }

    /// The pace, in bytes a second (0 = no limit), for a snapshot starting after `log_bytes` of
    /// log were written in `elapsed` since the last one began.
    ///
    /// Written fast, a snapshot takes the disk from the log's syncs (and the core's time, which
    /// serializes only as fast as the snapshot thread takes chunks): p99 write latency rose by
    /// a tenth to a half while a million-znode snapshot was written at 40 MB/s, and not visibly at
    /// 10 MB/s (bench/RESULTS.md). Written slowly, it falls behind a busy log: the next snapshot
    /// is due once the log has grown by half a snapshot ([`Self::due`]), so a snapshot written at
    /// twice the log's rate is done about when the next is due. Hence the floor, raised to twice
    /// the log's rate since the last snapshot began.
    fn pace(floor: u64, log_bytes: u64, elapsed: std::time::Duration) -> u64 {
        if floor == 0 {
            return 0;
        }
        let secs = elapsed.as_secs_f64();
        let log_rate = if secs > 0.0 { log_bytes as f64 / secs } else { 0.0 };
        floor.max((2.0 * log_rate).min(u64::MAX as f64) as u64)
    }

    /// Whether enough transactions or log bytes accumulated since the last snapshot. Either
    /// trigger waits, too, until the log written since the last snapshot is at least half that
    /// snapshot's size: with a large tree, snapCount alone would write a whole tree every few
    /// megabytes of log, and that disk traffic is what every commit's sync waits behind. Replay
    /// at start-up then covers at most about half a snapshot's worth of log, which loads in a
    /// fraction of the snapshot's own loading time.
    fn due(&self) -> bool {
        (self.since >= self.threshold || self.bytes_since >= self.size_threshold)
            && self.bytes_since >= self.last_bytes / 2
    }
}

/// A reply body, encoded after the header when the error code is 0.
enum Body {
    Empty,
    Stat(Stat),
    Data(Option<Bytes>, Stat),
    Path(String),
    Path2(String, Stat),
    Children(Vec<String>),
    Children2(Vec<String>, Stat),
    Acl(Vec<Acl>, Stat),
    Multi(Vec<OpResult>),
    Int(i32),
    Strings(Vec<String>),
    WhoAmI(Vec<ClientInfo>),
}

impl Body {
    fn encode(&self, b: &mut BytesMut) {
        match self {
            Body::Empty => {}
            Body::Stat(s) => s.write(b),
            Body::Data(d, s) => {
                d.write(b);
                s.write(b);
            }
            Body::Path(p) => p.write(b),
            Body::Path2(p, s) => {
                p.write(b);
                s.write(b);
            }
            Body::Children(c) | Body::Strings(c) => c.write(b),
            Body::Children2(c, s) => {
                c.write(b);
                s.write(b);
            }
            Body::Acl(a, s) => {
                a.write(b);
                s.write(b);
            }
            Body::Multi(r) => encode_multi_response(r, b),
            Body::Int(n) => n.write(b),
            Body::WhoAmI(v) => v.write(b),
        }
    }
}

/// The error code and body a committed write answers with.
fn write_reply(op: OpCode, outcome: &Outcome) -> (ErrorCode, Body) {
    match outcome {
        Outcome::Error(e) => (*e, Body::Empty),
        Outcome::Created { path, stat } => match op {
            OpCode::Create => (ErrorCode::Ok, Body::Path(path.clone())),
            _ => (ErrorCode::Ok, Body::Path2(path.clone(), stat.clone())),
        },
        Outcome::SetData { stat } | Outcome::SetAcl { stat } => (ErrorCode::Ok, Body::Stat(stat.clone())),
        Outcome::Multi(results) => (ErrorCode::Ok, Body::Multi(results.clone())),
        Outcome::Deleted | Outcome::SessionCreated | Outcome::SessionClosed => (ErrorCode::Ok, Body::Empty),
    }
}

#[cfg(test)]
mod tests {
    use super::Snapshots;
    use std::time::Duration;

    #[test]
    fn snapshot_pace_keeps_up_with_the_log() {
        let floor = 10_000_000;
        // A quiet log: the floor.
        assert_eq!(Snapshots::pace(floor, 1_000_000, Duration::from_secs(10)), floor);
        // 22 MB/s of log: twice that, so the snapshot is done when the next is due.
        assert_eq!(Snapshots::pace(floor, 220_000_000, Duration::from_secs(10)), 44_000_000);
        // No time measured yet: the floor, never a division by zero.
        assert_eq!(Snapshots::pace(floor, 5, Duration::ZERO), floor);
        // 0 is no limit, whatever the log does.
        assert_eq!(Snapshots::pace(0, 220_000_000, Duration::from_secs(1)), 0);
        assert_eq!(Snapshots::pace(floor, u64::MAX, Duration::from_nanos(1)), u64::MAX);
    }
}
