//! The thin driver around the server core: it owns the clock, the channels, the connections'
//! outboxes, the log writer and the snapshot thread's queue, feeds the core events with the time,
//! and carries out the actions the core returns. Every decision is the core's
//! (`crate::core::ServerCore`); what is here only moves bytes and reads clocks.

use crate::core::{Action, ConnId, Event, Now, SnapJob};
use crate::ensemble::peers::PeerIo;
use crate::fourlw;
use crate::log::TxnSink;
use crate::node::{EpochFile, Input, LogPosition, Node, Output};
use crate::settings::Settings;
use crate::snapshots::SnapshotReport;
use crate::stats::{ConnCounters, ConnStats};
use crate::summary::{Detail, Summary, Timing};
use bytes::Bytes;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::TrySendError;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};
use tracing::{debug, error, info, warn};
use zk_log::WriterReport;
use zk_proto::{ConnectRequest, Request, RequestError};

/// What the driver sends a connection's writer.
#[derive(Debug)]
pub enum Out {
    /// A reply to a request (its outstanding-request permit was freed when it was queued).
    Reply(Bytes),
    /// A frame that answers no request (watch events, the handshake answer).
    Frame(Bytes),
    /// Flush what is queued, then close.
    Close,
    /// Close behind what is queued if the connection is quiet: its task has handed over no
    /// more than this many requests, holds none, and no bytes wait in its socket
    /// ([`crate::core::Action::CloseWhenQuiet`]); otherwise nothing.
    CloseWhenQuiet(u64),
}

/// A connection's outbox: the queue of frames for its writer, and the count of their bytes.
#[derive(Debug, Clone)]
pub struct Outbox {
    /// Frames for the writer, in order.
    pub tx: crate::frame_queue::FrameSender<Out>,
    /// Bytes queued and not yet written to the socket.
    pub backlog: Arc<Backlog>,
}

/// Bytes queued for one connection and not yet written: the reader takes no new request while
/// there are too many, so a client that does not read its replies stops being read from, without
/// holding anything another connection needs.
#[derive(Debug, Default)]
pub struct Backlog {
    bytes: AtomicUsize,
    drained: Notify,
    closed: AtomicBool,
    /// The connection's task while its write waits on the client: woken by [`Backlog::close`].
    closing: std::sync::Mutex<Option<std::task::Waker>>,
}

impl Backlog {
    /// Counts `n` more bytes queued.
    pub fn queued(&self, n: usize) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` bytes written (or dropped) and wakes a reader waiting for room.
    pub fn written(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        self.drained.notify_waiters();
    }

    /// Bytes queued now.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Waits until at most `limit` bytes are queued, or the driver has closed the connection.
    pub async fn room(&self, limit: usize) {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            // Registered before the check, so a drain between the check and the wait is not missed.
            drained.as_mut().enable();
            if self.bytes() <= limit || self.is_closed() {
                return;
            }
            drained.await;
        }
    }

    /// The driver is done with the connection: what is queued gets a short time to be written.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let waker = self.closing.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
        self.drained.notify_waiters();
    }

    /// Whether [`Backlog::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// `Ready` once [`Backlog::close`] has been called; otherwise `cx`'s task is woken by it.
    pub fn poll_closed(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.is_closed() {
            return std::task::Poll::Ready(());
        }
        let mut slot = self.closing.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Some(cx.waker().clone());
        drop(slot);
        // Checked again after the waker is in place: a close in between is not missed.
        if self.is_closed() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

/// Messages into the driver from connections and the snapshot thread.
#[derive(Debug)]
pub enum DriverMsg {
    /// A handshake arrived on a new connection.
    Connect {
        /// The connection.
        conn: ConnId,
        /// Peer address.
        remote: SocketAddr,
        /// The decoded handshake.
        req: ConnectRequest,
        /// Identities the transport proved (a verified client certificate's `x509` id).
        ids: Vec<zk_proto::Id>,
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
        /// The body's bytes as the client sent them (a learner forwards them as they are).
        raw: bytes::Bytes,
        /// When it was read.
        received: Instant,
    },
    /// The connection is gone.
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// A client failed the TLS handshake (no trusted certificate, say): counted in
    /// `auth_failed_count`, as Apache counts a failed handshake.
    TlsFailed,
    /// A four-letter word to answer.
    FourLetter {
        /// The word.
        cmd: String,
        /// Who asks (Apache counts and lists the asking connection too).
        asker: SocketAddr,
        /// What followed the word, for the one word that reads more (`rcvr`'s token).
        arg: Option<String>,
        /// Where the text goes.
        reply: oneshot::Sender<String>,
    },
    /// An AdminServer command, `/ready` or `/metrics` to answer.
    Admin {
        /// What is asked.
        ask: crate::admin::AdminAsk,
        /// Where the answer goes.
        reply: oneshot::Sender<crate::admin::AdminReply>,
    },
    /// A report from the snapshot thread.
    Snapshot(SnapshotReport),
    /// The server's archiver (an ensemble member's) asks how far it may archive: the zxid the
    /// server has applied while it serves, or why it may not
    /// ([`crate::backup::continuous::committed_answer`]).
    ArchiveCap {
        /// Where the answer goes.
        reply: std::sync::mpsc::SyncSender<Result<i64, String>>,
    },
    /// Stop: the process is shutting down.
    Shutdown,
}

/// Messages handled per wake-up before timers and the log get a turn.
const BATCH_MAX: usize = 1024;

/// Batches whose persist time is measured at once; past this a new batch goes unmeasured.
const PERSIST_TIMES_MAX: usize = 4096;

/// How long shutdown waits for the log to make what it was handed durable.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);

/// How long a leader asked to stop waits for its handover to end (the node's two bounded
/// waits, and a second for the last packets) before it stops anyway.
const SHUTDOWN_HANDOVER: Duration = Duration::from_millis(2 * crate::node::replica::HANDOVER_WAIT_MS + 1_000);

/// How long a member asked to stop gives its clients to be moved away, each closed once it is
/// quiet (`core/drain.rs`); the ones still busy then are closed.
const SHUTDOWN_DRAIN_CLIENTS: Duration = Duration::from_secs(2);

/// Where a stop stands.
#[derive(Debug, Clone, Copy)]
enum Stopping {
    /// Moving the clients to the other members, until this instant at most.
    Draining(tokio::time::Instant),
    /// A leader handing over, until this instant at most.
    HandingOver(tokio::time::Instant),
}

/// How often the driver looks whether the server has gone quiet (see [`IdleTrim`]).
const IDLE_CHECK: Duration = Duration::from_secs(1);
/// A check period with fewer inputs than this is quiet: connected clients' pings and an
/// ensemble's own heartbeats stay below it, any load is far above it.
const IDLE_QUIET_INPUTS: u64 = 64;
/// Inputs handled since the last trim before a quiet period trims again: a load's worth of
/// work, not the trickle of pings an idle server sees (64 a second would take minutes to reach
/// it).
const IDLE_TRIM_AFTER_INPUTS: u64 = 10_000;

/// When to give the allocator's free pages back to the OS. mimalloc keeps the pages a load freed
/// (request, reply, batch and connection buffers: 30-50 MB after a million creates) until its
/// purge delay runs, which it checks only when the program allocates again: a server that goes
/// idle after a load would keep them for good. The driver counts its inputs; the first quiet
/// check period after enough work trims once, so an idle period trims at most once and a loaded
/// server (never quiet for a whole period) never does.
#[derive(Debug)]
struct IdleTrim {
    /// Inputs (messages, log reports, quorum inputs) since the last check.
    window: u64,
    /// Inputs since the last trim, the current window excluded.
    since_trim: u64,
}

impl Default for IdleTrim {
    fn default() -> Self {
        // The start-up load (a snapshot read, a log replayed) is work too: trim once it is over.
        IdleTrim { window: 0, since_trim: IDLE_TRIM_AFTER_INPUTS }
    }
}

impl IdleTrim {
    /// Counts `n` inputs.
    fn inputs(&mut self, n: u64) {
        self.window += n;
    }

    /// Counts a piece of work as a load's worth (a snapshot written): the next quiet check trims.
    fn work_done(&mut self) {
        self.since_trim = self.since_trim.max(IDLE_TRIM_AFTER_INPUTS);
    }

    /// At a check: whether to trim now.
    fn check(&mut self) -> bool {
        let quiet = self.window < IDLE_QUIET_INPUTS;
        self.since_trim = self.since_trim.saturating_add(self.window);
        self.window = 0;
        if quiet && self.since_trim >= IDLE_TRIM_AFTER_INPUTS {
            self.since_trim = 0;
            return true;
        }
        false
    }
}

/// Gives the allocator's free memory back to the OS now: mimalloc's `mi_collect(true)` frees
/// the calling thread's empty pages and purges every free range of its arenas (process-wide)
/// without waiting for the purge delay. Where mimalloc is not the global allocator (a test
/// linking this library) it has nothing to free.
#[allow(unsafe_code)] // a C function of the allocator, which no safe crate wraps
fn release_free_memory() {
    // SAFETY: mi_collect takes no arguments to get wrong, may be called from any thread at any
    // time, and only frees or decommits memory holding no live allocation.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// How the server loaded its database at start-up, for the metrics.
#[derive(Debug, Clone, Copy)]
pub struct StartupLoad {
    /// Reading the newest snapshot.
    pub snapshot: Duration,
    /// Opening the log and replaying its transactions past the snapshot.
    pub txns: Duration,
    /// Transactions replayed.
    pub txns_loaded: u64,
}

/// What the driver keeps for an ensemble member beyond the sockets: the disk the node's
/// replica asks about (epoch files, snapshots to rebuild from or write, the log to read back).
pub struct EnsembleDisk {
    /// The epoch files.
    pub epochs: zk_log::EpochStore<zk_log::FileStorage>,
    /// The snapshot directory.
    pub snapshots: zk_log::FileStorage,
    /// Shared with the snapshot thread: every cut of the log runs under it, so that no snapshot
    /// begun before a cut lands after it.
    pub fence: Arc<crate::snapshots::SnapshotFence>,
    /// Reads the log's durable records while its writer runs.
    pub source: Box<dyn zk_log::TxnSource>,
    /// How a rebuilt database is set up.
    pub tree_cfg: zk_tree::TreeConfig,
    /// With reconfiguration off, /zookeeper/config holds the configuration zoo.cfg gives (its
    /// text and version), in every rebuilt database too.
    pub config_node: Option<(String, i64)>,
}

/// The driver. See the module docs.
pub struct Driver {
    node: Node,
    /// Asked to stop: moving the clients away, then (a leader) handing over, and when each
    /// step ends regardless.
    stopping: Option<Stopping>,
    origin: Instant,
    settings: Arc<Settings>,
    outboxes: hashbrown::HashMap<ConnId, Outbox>,
    ready: hashbrown::HashMap<ConnId, oneshot::Sender<()>>,
    log: Box<dyn TxnSink>,
    /// Batches the log's queue had no room for, in order: submitted after its next report.
    log_backlog: VecDeque<zk_log::RecordBatch>,
    snapshot_jobs: Option<crate::snapshots::SnapshotQueue>,
    /// The snapshot directory and the tree's settings ([`Driver::with_snapshot_disk`]).
    snapshot_disk: Option<(zk_log::FileStorage, zk_tree::TreeConfig)>,
    /// How the snapshots written on this thread are stored (snapshot.compression): a learner's
    /// received one and a restored tree alike ([`Driver::with_snapshot_disk`]).
    snapshot_compression: zk_log::snapshot::Compression,
    /// The fence every cut of the log runs under, shared with the snapshot thread.
    snapshot_fence: Option<Arc<crate::snapshots::SnapshotFence>>,
    permits: Arc<Semaphore>,
    /// Connections whose outbox failed during this pump: the core hears they are gone.
    dead: Vec<ConnId>,
    /// What `/metrics` exports beyond `mntr`'s values.
    metrics: crate::admin::metrics::Figures,
    /// The log's syncs, counted and timed on the log's thread, once the server has its log.
    sync_times: Option<Arc<zk_log::SyncTimes>>,
    /// The same syncs' distribution (Apache's `fsynctime`), taken from `sync_times` as the log
    /// reports progress.
    fsync_time: Summary,
    /// Snapshots written (Apache's `snapshottime`).
    snapshot_time: Summary,
    /// Client connections refused and dropped, counted by the listener and the connections.
    connections: Arc<ConnCounters>,
    /// The start-up load's summaries (Apache's `dbinittime`, `startup_snap_load_time`,
    /// `startup_txns_load_time`, µs, and `startup_txns_loaded`, a count), once known.
    startup: Option<[Summary; 4]>,
    /// The last zxid of each batch handed to the log and not yet durable, with when it was
    /// handed over (for the log persist time), oldest first; at most [`PERSIST_TIMES_MAX`].
    persist_started: VecDeque<(i64, Instant)>,
    /// When the snapshot being written began.
    snapshot_started: Option<Instant>,
    stop: Option<String>,
    /// A snapshot received from the leader (`Output::InstallSnapshot`) at this zxid: the
    /// snapshots past it are removed once the log's reset to it is durable. A crash before that
    /// restarts from the newest of them, the state before the SNAP, whole.
    discard_after_reset: Option<i64>,
    /// The ensemble's sockets, when this server is one of several.
    peers: Option<PeerIo>,
    /// The ensemble member's disk, beside the log.
    disk: Option<EnsembleDisk>,
    /// When to give free memory back to the OS.
    idle_trim: IdleTrim,
    /// Where the plain client listener listens (or is to listen): zoo.cfg's address, until the
    /// configuration in force gives this server another.
    client_addr: Option<SocketAddr>,
    /// Tells the listener to move to a new client address (the server's accept loop holds the
    /// receiving side).
    client_listener: Option<tokio::sync::watch::Sender<Option<SocketAddr>>>,
    /// The archive the server archives into by itself (`zkrs.backup.to`), for the reports.
    archive: Option<Arc<crate::backup::continuous::ArchiveProgress>>,
    /// What the archive had taken when retention last ran again for it ([`Event::ArchiveMoved`]).
    retained_for: Option<crate::backup::continuous::Taken>,
}

fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl Driver {
    /// A driver for `node`, whose times count from `origin`.
    pub fn new(
        node: Node,
        origin: Instant,
        settings: Arc<Settings>,
        log: Box<dyn TxnSink>,
        snapshot_jobs: Option<crate::snapshots::SnapshotQueue>,
        permits: Arc<Semaphore>,
    ) -> Driver {
        let client_addr = settings.client_addr;
        Driver {
            node,
            origin,
            settings,
            outboxes: hashbrown::HashMap::new(),
            ready: hashbrown::HashMap::new(),
            log,
            log_backlog: VecDeque::new(),
            snapshot_jobs,
            snapshot_disk: None,
            snapshot_compression: zk_log::snapshot::Compression::None,
            snapshot_fence: None,
            permits,
            dead: Vec::new(),
            metrics: Default::default(),
            sync_times: None,
            fsync_time: Summary::default(),
            snapshot_time: Summary::default(),
            connections: Arc::default(),
            startup: None,
            persist_started: VecDeque::new(),
            snapshot_started: None,
            stop: None,
            stopping: None,
            discard_after_reset: None,
            peers: None,
            disk: None,
            idle_trim: IdleTrim::default(),
            client_addr,
            client_listener: None,
            archive: None,
            retained_for: None,
        }
    }

    /// Has the reports (`mntr`, the AdminServer's `monitor`, `/metrics`) show how the server's
    /// own archiver fares (`zkrs.backup.to`).
    pub fn with_archive(mut self, progress: Arc<crate::backup::continuous::ArchiveProgress>) -> Driver {
        self.archive = Some(progress);
        self
    }

    /// Has the driver move the client listener through `listener` when the configuration in
    /// force gives this server another client address (`Effect::ClientAddress`).
    pub fn with_client_listener(
        mut self,
        listener: tokio::sync::watch::Sender<Option<SocketAddr>>,
    ) -> Driver {
        self.client_listener = Some(listener);
        self
    }

    /// Has `/metrics` read the log's sync times and the listener's connection counts.
    pub fn with_metric_sources(
        mut self,
        sync: Arc<zk_log::SyncTimes>,
        connections: Arc<ConnCounters>,
    ) -> Driver {
        self.sync_times = Some(sync);
        self.connections = connections;
        self
    }

    /// Has the metrics report how the database was loaded at start-up.
    pub fn with_startup_load(mut self, load: StartupLoad) -> Driver {
        let at = Self::now(self.origin).mono_ms();
        let us = |d: Duration| d.as_micros() as u64;
        let mut s: [Summary; 4] = Default::default();
        s[0].observe(us(load.snapshot + load.txns), at);
        s[1].observe(us(load.snapshot), at);
        // As Apache's: the replay is counted when there were transactions to replay.
        if load.txns_loaded > 0 {
            s[2].observe(us(load.txns), at);
            s[3].observe(load.txns_loaded, at);
        }
        self.startup = Some(s);
        self
    }

    /// The snapshot directory, the tree's settings and the snapshot thread's fence: for the
    /// AdminServer's `snapshot`, which rebuilds a copy of the tree from them, and for the
    /// snapshots written whole on this thread (a learner's received one, a restored tree), which
    /// are stored as `compression` says, as the snapshot thread's are.
    pub fn with_snapshot_disk(
        mut self,
        storage: zk_log::FileStorage,
        tree_cfg: zk_tree::TreeConfig,
        compression: zk_log::snapshot::Compression,
        fence: Arc<crate::snapshots::SnapshotFence>,
    ) -> Driver {
        self.snapshot_disk = Some((storage, tree_cfg));
        self.snapshot_compression = compression;
        self.snapshot_fence = Some(fence);
        self
    }

    /// Makes this server a member of an ensemble (its node has a replica): `peers` are its
    /// sockets, `disk` what the replica asks of its disk.
    pub fn with_ensemble(mut self, peers: PeerIo, disk: EnsembleDisk) -> Driver {
        self.peers = Some(peers);
        self.disk = Some(disk);
        self
    }

    async fn peer_input(p: &mut Option<PeerIo>) -> Input {
        match p {
            Some(p) => p.next().await,
            None => std::future::pending().await,
        }
    }

    /// The time now, as the core takes it.
    pub fn now(origin: Instant) -> Now {
        Now { mono_us: origin.elapsed().as_micros() as u64, wall_ms: wall_ms() }
    }

    fn mono_us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_micros() as u64
    }

    /// Runs until shutdown. Messages are handled in batches: everything that is ready is taken,
    /// the transactions it produced go to the log together (group commit).
    ///
    /// Errors: the core stopped the server (a log failure other than a full disk); the text says
    /// why.
    pub async fn run(
        mut self,
        mut inbox: mpsc::Receiver<DriverMsg>,
        mut durable: mpsc::Receiver<WriterReport>,
    ) -> Result<(), String> {
        // The first election's outputs (the core stops serving until it has a role).
        self.pump();
        // One timer, moved only when the core's next deadline moves (re-arming a timer on every
        // wake-up showed in profiles of small requests).
        let far = || tokio::time::Instant::now() + Duration::from_secs(3600);
        let sleep = tokio::time::sleep_until(far());
        tokio::pin!(sleep);
        let mut armed: Option<u64> = None;
        let mut idle_check = tokio::time::interval(IDLE_CHECK);
        idle_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = self.node.poll_timeout();
            // Due already (a snapshot being stepped): no timer, a branch that is ready at once
            // (re-arming the timer on every wake-up while a snapshot ran cost multi-op writes
            // several per cent).
            let due_now = next.is_some_and(|ms| ms <= self.origin.elapsed().as_millis() as u64);
            let next = if due_now { None } else { next };
            if next != armed {
                armed = next;
                let at = next.map_or_else(far, |ms| (self.origin + Duration::from_millis(ms)).into());
                sleep.as_mut().reset(at);
            }
            tokio::select! {
                biased;
                // One reading of the clocks for everything that arrived together.
                report = durable.recv() => {
                    let now = Self::now(self.origin);
                    self.on_log_report(report, now);
                    self.idle_trim.inputs(1);
                    while let Ok(more) = durable.try_recv() {
                        self.on_log_report(Some(more), now);
                        self.idle_trim.inputs(1);
                    }
                }
                msg = inbox.recv() => {
                    let Some(msg) = msg else { break };
                    let now = Self::now(self.origin);
                    if self.on_msg(msg, now) && !self.begin_stop(now) {
                        break;
                    }
                    let mut handled = 1;
                    for _ in 1..BATCH_MAX {
                        let Ok(m) = inbox.try_recv() else { break };
                        if self.on_msg(m, now) && !self.begin_stop(now) {
                            return self.shutdown(&mut durable).await;
                        }
                        handled += 1;
                    }
                    self.idle_trim.inputs(handled);
                }
                input = Self::peer_input(&mut self.peers) => {
                    let now = Self::now(self.origin);
                    self.node.handle(now, input);
                    let mut handled = 1u64;
                    while handled < BATCH_MAX as u64 {
                        let batching = self.node.in_broadcast();
                        let Some(more) = self.peers.as_mut().and_then(|p| p.try_next_packet(batching)) else { break };
                        self.node.handle(now, more);
                        handled += 1;
                    }
                    self.idle_trim.inputs(handled);
                }
                _ = &mut sleep, if armed.is_some() => {
                    // Fired: re-arm after the timers ran, even if the deadline reads the same.
                    armed = None;
                }
                _ = std::future::ready(()), if due_now => {}
                _ = idle_check.tick() => {
                    if self.idle_trim.check() {
                        let started = Instant::now();
                        release_free_memory();
                        debug!("server idle: free memory given back in {:?}", started.elapsed());
                    }
                }
            }
            self.node.handle_timeout(Self::now(self.origin));
            self.pump();
            if let Some(reason) = self.stop.take() {
                return Err(reason);
            }
            match self.stopping {
                Some(Stopping::Draining(by)) => {
                    let left = self.node.core().client_connections();
                    if left == 0 || tokio::time::Instant::now() >= by {
                        info!("clients moved away ({left} connections left)");
                        if !self.hand_over_before_stopping(Self::now(self.origin)) {
                            break;
                        }
                    }
                }
                Some(Stopping::HandingOver(by)) => {
                    if !self.node.handover_under_way() {
                        info!("handover over: stopping");
                        break;
                    }
                    if tokio::time::Instant::now() >= by {
                        warn!("the handover did not end within {SHUTDOWN_HANDOVER:?}: stopping anyway");
                        break;
                    }
                }
                None => {}
            }
        }
        self.shutdown(&mut durable).await
    }

    /// Asked to stop (SIGTERM, SIGINT): a member of an ensemble first moves its clients to the
    /// other members, closing each connection once it is quiet (`core/drain.rs`, at most
    /// [`SHUTDOWN_DRAIN_CLIENTS`]), then a leader hands its leadership over. True if the stop
    /// waits for either.
    fn begin_stop(&mut self, now: Now) -> bool {
        if self.stopping.is_some() {
            return true;
        }
        let within = SHUTDOWN_DRAIN_CLIENTS.as_millis() as u64;
        if self.node.core_mut().drain_clients(now, within) {
            self.pump();
            // A moment more than the core's own deadline, for its last closes to go out.
            self.stopping = Some(Stopping::Draining(
                tokio::time::Instant::now() + SHUTDOWN_DRAIN_CLIENTS + Duration::from_millis(100),
            ));
            return true;
        }
        self.hand_over_before_stopping(now)
    }

    /// A leader stopping hands its leadership over (the node decides whether it can, and runs
    /// it); the loop goes on until that ends or [`SHUTDOWN_HANDOVER`] passes. True if the stop
    /// waits for a handover.
    fn hand_over_before_stopping(&mut self, now: Now) -> bool {
        if matches!(self.stopping, Some(Stopping::HandingOver(_))) {
            return true;
        }
        self.stopping = None;
        // The node decides (a follower, a standalone server or a leader with no follower to
        // hand over to answers so, and nothing waits).
        let answer = self.node.hand_over(now, None);
        self.pump();
        if !self.node.handover_under_way() {
            return false;
        }
        info!("asked to stop while leading: {answer}");
        self.stopping = Some(Stopping::HandingOver(tokio::time::Instant::now() + SHUTDOWN_HANDOVER));
        true
    }

    /// At shutdown: waits (bounded) until what was handed to the log is durable, and commits it,
    /// so clients that are still connected get their answers.
    async fn shutdown(&mut self, durable: &mut mpsc::Receiver<WriterReport>) -> Result<(), String> {
        self.pump();
        let deadline = tokio::time::Instant::now() + SHUTDOWN_DRAIN;
        while self.node.core().in_flight() > 0 && self.stop.is_none() {
            match tokio::time::timeout_at(deadline, durable.recv()).await {
                Ok(Some(report)) => self.on_log_report(Some(report), Self::now(self.origin)),
                Ok(None) | Err(_) => break,
            }
            self.pump();
        }
        info!("core stopped at zxid 0x{:x}", self.node.database().last_applied_zxid());
        match self.stop.take() {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }

    fn on_log_report(&mut self, report: Option<WriterReport>, now: Now) {
        let input = match report {
            Some(WriterReport::Durable(zxid)) => {
                self.take_sync_times(now);
                let at = Instant::now();
                while let Some(&(last, started)) = self.persist_started.front() {
                    if last > zxid {
                        break;
                    }
                    self.metrics.log_persisted(at.saturating_duration_since(started));
                    self.persist_started.pop_front();
                }
                Input::Durable { zxid }
            }
            Some(WriterReport::Truncated(zxid)) => {
                self.persist_started.clear();
                Input::LogTruncated { zxid }
            }
            Some(WriterReport::Reset(zxid)) => {
                self.persist_started.clear();
                if let Some(cut) = self.discard_after_reset.take() {
                    // On failure the node is not told of the reset: it would rebuild from a
                    // snapshot past the cut. The server stops instead.
                    if !self.discard_snapshots_after(cut, true) {
                        return;
                    }
                }
                Input::LogReset { zxid }
            }
            Some(WriterReport::Failed(error)) => {
                self.persist_started.clear();
                if error.is_storage_full() && self.log.is_stopped() {
                    // A truncation or reset refused for a full disk stops the writer (the log is
                    // half-way through it): no resume comes, and the node would wait for the
                    // barrier's report for good. Stop, as for any other failure that ends the log.
                    let reason = format!("transaction log stopped: {error} during a truncation or reset");
                    error!("stopping: {reason}");
                    self.stop = Some(reason);
                    return;
                }
                if error.is_storage_full() {
                    // Every proposal not yet durable is taken back by the core, these included.
                    self.log_backlog.clear();
                }
                Input::LogFailed { error }
            }
            None => Input::LogFailed { error: zk_log::LogError::WriterStopped },
        };
        self.node.handle(now, input);
        self.submit_backlog();
    }

    /// Handles one message; true to shut down.
    fn on_msg(&mut self, msg: DriverMsg, now: Now) -> bool {
        let ev = match msg {
            DriverMsg::Shutdown => return true,
            DriverMsg::Connect { conn, remote, req, ids, out, stats, ready } => {
                self.outboxes.insert(conn, out);
                self.ready.insert(conn, ready);
                Event::Connect { conn, remote, req, ids, stats }
            }
            DriverMsg::Request { conn, xid, op, body, raw, received } => {
                Event::Request { conn, xid, op, body, raw, received_us: self.mono_us(received) }
            }
            DriverMsg::TlsFailed => Event::AuthFailed,
            DriverMsg::Closed { conn } => {
                if let Some(out) = self.outboxes.remove(&conn) {
                    out.backlog.close();
                }
                self.ready.remove(&conn);
                Event::Closed { conn }
            }
            DriverMsg::FourLetter { cmd, asker, arg, reply } => {
                self.take_sync_times(now);
                let answer = (cmd == "csnp").then(|| self.snapshot_now(now));
                let log_info = (cmd == "lgif").then(|| self.log_info());
                let handover = match cmd.as_str() {
                    "ydld" => Some(self.node.hand_over(now, None).to_string()),
                    "rqld" => Some(self.node.request_leadership(now).to_string()),
                    "rcvr" => Some(self.node.recover(now, arg.as_deref()).to_string()),
                    _ => None,
                };
                let mut view = if cmd == "mntr" {
                    self.view_with_metrics(Some(asker), now)
                } else {
                    self.view(Some(asker), now)
                };
                view.snapshot_answer = answer;
                view.log_info = log_info;
                view.node_answer = handover;
                let text = fourlw::render(&cmd, &view);
                self.reset_counters(&cmd);
                let _ = reply.send(text);
                return false;
            }
            DriverMsg::Admin { ask, reply } => {
                let answer = self.admin(ask, now);
                let _ = reply.send(answer);
                return false;
            }
            DriverMsg::Snapshot(SnapshotReport::ChunkDone(buffer)) => Event::SnapshotChunkDone { buffer },
            DriverMsg::Snapshot(SnapshotReport::Done { ok, purge_logs_before }) => {
                // Its buffers are free now: given back at the next quiet check.
                self.idle_trim.work_done();
                if let Some(started) = self.snapshot_started.take() {
                    if ok {
                        let d = started.elapsed();
                        self.metrics.snapshot_taken(d);
                        self.snapshot_time.observe(d.as_micros() as u64, now.mono_ms());
                    }
                }
                Event::SnapshotDone { ok, purge_logs_before }
            }
            DriverMsg::Snapshot(SnapshotReport::Retained { purge_logs_before }) => {
                Event::Retained { purge_logs_before }
            }
            DriverMsg::ArchiveCap { reply } => {
                let applied = self.view(None, now).last_zxid;
                let _ = reply
                    .try_send(crate::backup::continuous::committed_answer(self.node.core().role(), applied));
                // Each pass asks first: if retention kept files for the archive and the archive
                // has taken more since, or the disk is short of space, retention runs again and
                // lets them go.
                let Some(p) = self.archive.as_ref() else { return false };
                let taken = p.taken();
                let moved = taken.is_some() && taken != self.retained_for;
                if p.held_bytes() == 0 || !(moved || p.space_short_now()) {
                    return false;
                }
                self.retained_for = taken;
                Event::ArchiveMoved
            }
        };
        self.node.handle(now, Input::Core(ev));
        false
    }

    /// The view the four-letter words and the AdminServer render: the core's, with the ensemble
    /// part's figures.
    fn view(&self, asker: Option<SocketAddr>, now: Now) -> crate::view::View<'_> {
        let limit = self.settings.global_outstanding_limit as usize;
        let outstanding = limit - self.permits.available_permits().min(limit);
        let mut view = self.node.core().view(asker, outstanding, now);
        if let Some(c) = self.node.replica().and_then(|r| r.learner_counts()) {
            view.quorum = Some(crate::view::QuorumFigures {
                learners: c.learners,
                synced_followers: c.synced_followers,
                synced_observers: c.synced_observers,
                pending_syncs: self.node.core().pending_syncs(),
            });
        }
        view.ensemble = self.node.replica().map(|r| r.view());
        view.client_addr = self.client_addr;
        view.backup = self.archive.as_ref().map(|a| a.figures(view.last_zxid));
        view
    }

    /// [`Self::view`] with Apache's counters and summaries, for `mntr`, the AdminServer and
    /// `/metrics` (reading the summaries' windows costs more than the other words need).
    fn view_with_metrics(&self, asker: Option<SocketAddr>, now: Now) -> crate::view::View<'_> {
        let mut view = self.view(asker, now);
        let at = now.mono_ms();
        let stats = view.stats;
        let q = self.node.replica().map(|r| r.counters().clone()).unwrap_or_default();
        view.counters = vec![
            ("stale_sessions_expired", stats.sessions_expired),
            ("proposal_count", q.proposal_count),
            ("connection_rejected", self.connections.rejected()),
            ("looking_count", q.looking_count),
            ("connection_drop_count", self.connections.dropped()),
            ("insecure_admin_count", self.connections.insecure_admin()),
            ("diff_count", q.diff_count),
            ("snap_count", q.snap_count),
            ("commit_count", q.commit_count),
        ];
        if self.node.replica().is_some() {
            // Only an ensemble member keeps the digest (a standalone server has no proposals
            // carrying one): no made-up zero elsewhere.
            view.counters.push(("digest_mismatches_count", stats.digest_mismatches));
        }
        view.timings = vec![
            Timing::read("readlatency", Detail::Advanced, &stats.read_latency, at),
            Timing::read("updatelatency", Detail::Advanced, &stats.update_latency, at),
        ];
        if self.sync_times.is_some() {
            view.timings.push(Timing::read("fsynctime", Detail::Basic, &self.fsync_time, at));
        }
        view.timings.push(Timing::read("snapshottime", Detail::Basic, &self.snapshot_time, at));
        if let Some(s) = &self.startup {
            view.timings.extend([
                Timing::read("dbinittime", Detail::Basic, &s[0], at),
                Timing::read("startup_snap_load_time", Detail::Basic, &s[1], at),
                Timing::read("startup_txns_load_time", Detail::Basic, &s[2], at),
                Timing::read_in("startup_txns_loaded", Detail::Basic, &s[3], at, 1.0),
            ]);
        }
        view.timings.push(match self.node.replica() {
            Some(r) => r.election_timing(now),
            // A server that never elects: none, by construction.
            None => Timing::read("election_time", Detail::Basic, &Summary::default(), at),
        });
        view
    }

    /// Resets what `crst` or `srst` resets: `srst` zeroes every counter and summary Apache's
    /// metrics hold (Apache's reset of all its metrics), here and in the core and the ensemble
    /// part; zkrs's own histograms are not Apache's and keep counting.
    fn reset_counters(&mut self, word: &str) {
        self.node.core_mut().reset_counters(word);
        if word == "srst" {
            self.fsync_time = Summary::default();
            self.snapshot_time = Summary::default();
            self.connections.reset();
            if let Some(s) = &mut self.startup {
                *s = Default::default();
            }
            if let Some(r) = self.node.replica_mut() {
                r.reset_counters();
            }
        }
    }

    /// Moves the log's latest sync times into `fsync_time`.
    fn take_sync_times(&mut self, now: Now) {
        if let Some(sync) = &self.sync_times {
            for us in sync.take_recent() {
                self.fsync_time.observe(us, now.mono_ms());
            }
        }
    }

    /// Answers an AdminServer or metrics request.
    fn admin(&mut self, ask: crate::admin::AdminAsk, now: Now) -> crate::admin::AdminReply {
        use crate::admin::{commands, AdminAsk, AdminReply, Readiness};
        self.take_sync_times(now);
        match ask {
            AdminAsk::Command { name, args } => {
                let primary = commands::primary_name(&name);
                let answer = (primary == Some("create_snapshot")).then(|| self.snapshot_now(now));
                let log_info = (primary == Some("log_info")).then(|| self.log_info());
                let handover = match primary {
                    Some(commands::YIELD_LEADERSHIP) => {
                        match args.iter().find(|(k, _)| k == "server").map(|(_, v)| v.parse::<i64>()) {
                            None => Some(self.node.hand_over(now, None).to_string()),
                            Some(Ok(to)) => Some(self.node.hand_over(now, Some(to)).to_string()),
                            Some(Err(_)) => Some("server= takes a server id".to_string()),
                        }
                    }
                    Some(commands::REQUEST_LEADERSHIP) => Some(self.node.request_leadership(now).to_string()),
                    Some(commands::FORCE_RECOVERY) => {
                        let token = args.iter().find(|(k, _)| k == "confirm").map(|(_, v)| v.as_str());
                        Some(self.node.recover(now, token).to_string())
                    }
                    _ => None,
                };
                let mut view = self.view_with_metrics(None, now);
                view.snapshot_answer = answer;
                view.log_info = log_info;
                view.node_answer = handover;
                let json = commands::run(&name, &args, &view);
                if let Some(word) = commands::reset_word(&name) {
                    if json.get("error").is_some_and(serde_json::Value::is_null) {
                        self.reset_counters(word);
                    }
                }
                AdminReply::Json(json)
            }
            AdminAsk::Metrics => {
                let view = self.view_with_metrics(None, now);
                let values = crate::view::monitor_values(&view);
                let serving = view.mode.is_some();
                let mut figures = Box::new(self.metrics.clone());
                if let Some(r) = self.node.replica() {
                    figures.quorum = quorum_metrics(r, serving, now);
                }
                figures.timings = view.timings.clone();
                AdminReply::Metrics(values, figures)
            }
            AdminAsk::Ready => {
                let view = self.view(None, now);
                // A leader with leaderServes=no takes no clients: a leader, but not ready for them.
                let leading = view.ensemble.as_ref().is_some_and(|e| e.leading);
                let role = view.mode.unwrap_or(if leading { "leader" } else { "looking" });
                let serving = view.mode.is_some_and(|m| m != "read-only");
                let has_leader = match &view.ensemble {
                    Some(e) => e.leader_sid.is_some(),
                    None => serving,
                };
                AdminReply::Ready(Readiness { serving, role, has_leader })
            }
            AdminAsk::Ensemble => {
                AdminReply::Ensemble(Box::new(crate::admin::members::plan(&self.view(None, now))))
            }
            AdminAsk::Sessions(page) => {
                let facts = crate::admin::session_list::Facts::of(&self.view(None, now));
                AdminReply::Json(crate::admin::session_list::render(facts, page))
            }
            AdminAsk::Authorize { credentials, perm, even_not_serving } => {
                AdminReply::Authorization(self.authorize(credentials, perm, even_not_serving))
            }
            AdminAsk::SnapshotNow => {
                let answer = self.snapshot_now(now);
                AdminReply::Snapshot(answer, self.node.core().serving_generation())
            }
            AdminAsk::CopyFits => AdminReply::CopyFits(self.node.core().tree_copy_fits()),
            AdminAsk::RestoreConfig => AdminReply::RestoreConfig(
                self.snapshot_disk.as_ref().map(|(_, cfg)| cfg.clone()),
                self.node.core().tree_copy_fits(),
            ),
            // A second restore while one is under way is refused here, so that the answer the
            // first one's asker waits for stays the core's.
            AdminAsk::Restore { .. } if self.node.core().restore_pending() => {
                crate::admin::AdminReply::Restore(Some(crate::view::RestoreAnswer::Refused(
                    "a restore is under way",
                )))
            }
            AdminAsk::Restore { db } => {
                self.node.handle(now, Input::Core(Event::Restore { db }));
                self.restore_status()
            }
            AdminAsk::RestoreStatus => self.restore_status(),
            AdminAsk::SnapshotStatus => AdminReply::SnapshotStatus(self.node.core().snapshot_status()),
            AdminAsk::SnapshotSource { generation } => {
                AdminReply::SnapshotSource(self.snapshot_source(generation))
            }
        }
    }

    /// What the AdminServer's `snapshot` rebuilds its copy of the tree from, for a snapshot
    /// started in serving term `generation`: refused unless the server still serves in that term
    /// ([`crate::core::ServerCore::snapshot_source_through`]). The log's cut fence goes with it,
    /// so that the copy is refused if a cut (a TRUNC or a SNAP's reset) ran while it was read.
    /// Refused under the memory brake too: the copy doubles the tree's memory.
    fn snapshot_source(
        &self,
        generation: u64,
    ) -> Result<Box<crate::admin::snapshot::ConsistentSource>, crate::admin::snapshot::SourceRefused> {
        use crate::admin::snapshot::SourceRefused;
        let disk =
            self.snapshot_disk.as_ref().ok_or(SourceRefused::Other("this server keeps no snapshots"))?;
        let log = self.log.source();
        let core = self.node.core();
        let through =
            core.snapshot_source_through(generation, log.durable_zxid()).map_err(SourceRefused::Other)?;
        if !core.tree_copy_fits() {
            return Err(SourceRefused::Memory);
        }
        let fence = self.snapshot_fence.as_ref().map(|f| (f.clone(), f.generation()));
        Ok(Box::new(crate::admin::snapshot::ConsistentSource {
            storage: disk.0.clone(),
            tree_cfg: disk.1.clone(),
            log,
            through,
            fence,
        }))
    }

    /// An operator's request for a snapshot (`csnp`, the AdminServer's `create_snapshot` and
    /// `snapshot`), handed to the node as any input (the simulator can send it too), and what
    /// the core decided and recorded.
    /// Where the last restore stands: the core's answer.
    fn restore_status(&mut self) -> crate::admin::AdminReply {
        crate::admin::AdminReply::Restore(self.node.core_mut().take_restore_answer())
    }

    fn snapshot_now(&mut self, now: Now) -> crate::view::SnapshotAnswer {
        self.node.handle(now, Input::Core(Event::SnapshotNow));
        self.node
            .core_mut()
            .take_snapshot_answer()
            .unwrap_or(crate::view::SnapshotAnswer::Refused("the server is stopping"))
    }

    /// Where the log and the snapshots stand (`lgif`): the log's positions from what it has
    /// published, without reading it on this thread.
    fn log_info(&self) -> crate::view::LogInfo {
        let source = self.log.source();
        let durable = source.durable_zxid();
        let first = source.first_zxid();
        let core = self.node.core();
        crate::view::LogInfo {
            first_log_zxid: first.unwrap_or(0),
            last_log_zxid: if first.is_some() { durable } else { 0 },
            applied_zxid: core.applied_zxid(),
            committed_zxid: core.committed_zxid().unwrap_or(0),
            last_snapshot_zxid: crate::view::newest_snapshot(&self.settings).map_or(0, |(zxid, _)| zxid),
        }
    }

    /// Whether `credentials` hold every bit of `perm` on `/`, each bit checked on its own (Apache
    /// 3.9's check for its `snapshot` and `restore` commands since CVE-2025-58457).
    fn authorize(
        &self,
        credentials: Option<crate::admin::snapshot::Credentials>,
        perm: i32,
        even_not_serving: bool,
    ) -> crate::admin::snapshot::Authorization {
        use crate::admin::snapshot::{Authorization, Credentials};
        let core = self.node.core();
        if !even_not_serving && core.view(None, 0, Self::now(self.origin)).mode.is_none() {
            return Authorization::NotServing;
        }
        let db = core.database();
        let cfg = db.config();
        let auth = match credentials {
            None => return Authorization::NotAuthenticated,
            // The id was hashed by the HTTP task: the driver's thread compares strings only.
            Some(Credentials::Digest(_)) if !cfg.digest_enabled => return Authorization::NotAuthenticated,
            Some(Credentials::Digest(id)) => {
                let is_super = cfg.super_digest.as_deref() == Some(id.as_str());
                zk_tree::AuthIds { ids: vec![zk_proto::Id { scheme: "digest".into(), id }], is_super }
            }
            Some(Credentials::Ip(addr)) => zk_tree::AuthIds { ids: vec![ip_id(addr)], is_super: false },
            // Apache has the x509 provider only with TLS served to clients or the provider
            // named in zoo.cfg; without it the scheme proves nothing.
            Some(Credentials::X509(_)) if !cfg.x509_enabled => return Authorization::NotAuthenticated,
            Some(Credentials::X509(ids)) => zk_tree::AuthIds { ids, is_super: false },
        };
        let superuser = zk_tree::AuthIds { ids: Vec::new(), is_super: true };
        let Ok((acl, _)) = db.get_acl("/", &superuser) else { return Authorization::Denied };
        root_grants(cfg, &acl, perm, &auth)
    }

    /// The configuration gives this server the client address `addr`: if the listener is
    /// elsewhere, it moves (the accept loop binds `addr` and closes the old socket; connections
    /// already open stay), and `conf`, `configuration` and `zabstate` report `addr` from now on.
    fn move_client_listener(&mut self, addr: SocketAddr) {
        if self.client_addr == Some(addr) {
            return;
        }
        info!(
            "the configuration in force moves the client address to {addr} (was {})",
            self.client_addr.map_or_else(|| "none".to_owned(), |a| a.to_string())
        );
        self.client_addr = Some(addr);
        if let Some(l) = &self.client_listener {
            l.send_replace(Some(addr));
        }
    }

    /// Carries out every output of the node, including those that carrying one out produces,
    /// and hands the node the result of each that has one.
    fn pump(&mut self) {
        loop {
            let now = Self::now(self.origin);
            while let Some(o) = self.node.poll_action(now) {
                self.output(o, now);
            }
            if self.dead.is_empty() {
                return;
            }
            let now = Self::now(self.origin);
            for conn in std::mem::take(&mut self.dead) {
                self.node.handle(now, Input::Core(Event::Closed { conn }));
            }
        }
    }

    fn output(&mut self, o: Output, now: Now) {
        // Most outputs are the core's (replies to clients): straight to them.
        let o = match o {
            Output::Core(a) => return self.act(a),
            o => o,
        };
        let o = match self.peers.as_mut() {
            Some(p) => match p.act(o) {
                Some(o) => o,
                None => return,
            },
            None => o,
        };
        match o {
            Output::Core(a) => self.act(a),
            Output::InstallConfig(config) => {
                let client = self.peers.as_mut().and_then(|p| p.install(&config));
                if let Some(addr) = client {
                    self.move_client_listener(addr);
                }
                let me = self.node.replica().map_or(0, |r| r.my_sid());
                if let Some(file) = self.peers.as_ref().and_then(|p| p.config_file()).map(|f| f.to_path_buf())
                {
                    if let Err(e) = crate::ensemble::peers::write_dynamic_config(&file, &config, me) {
                        error!("cannot write the configuration beside {}: {e}", file.display());
                    }
                }
            }
            Output::PersistEpoch { file, epoch } => {
                let Some(disk) = self.disk.as_mut() else { return };
                let result = match file {
                    EpochFile::Accepted => disk.epochs.set_accepted(i64::from(epoch)),
                    EpochFile::Current => disk.epochs.set_current(i64::from(epoch)),
                }
                .map_err(|e| e.to_string());
                self.node.handle(now, Input::EpochWritten { file, result });
            }
            Output::Reload { window } => {
                let Some(disk) = self.disk.as_ref() else { return };
                let started = Instant::now();
                let result =
                    crate::snapshots::rebuild(&disk.snapshots, disk.tree_cfg.clone(), disk.source.as_ref())
                        .map(|mut db| {
                            if let Some((text, version)) = &disk.config_node {
                                db.set_config_node(text, *version, now.wall_ms);
                            }
                            Box::new(db)
                        });
                let log = LogPosition { base: disk.source.base_zxid(), durable: disk.source.durable_zxid() };
                let recent = crate::node::replica::recent_history(disk.source.as_ref(), window);
                debug!("database rebuilt from disk in {:.1?}", started.elapsed());
                self.node.handle(Self::now(self.origin), Input::Reloaded { result, log, recent });
            }
            Output::ReadLog { req, from, through, max_records, max_bytes } => {
                let Some(disk) = self.disk.as_ref() else { return };
                let read = crate::node::replica::read_anchored(
                    disk.source.as_ref(),
                    from,
                    through,
                    max_records,
                    max_bytes,
                );
                self.node.handle(Self::now(self.origin), Input::LogRead { req, read });
            }
            Output::TruncateLog { after } => {
                if self.disk.is_none() {
                    return;
                }
                // Snapshots past the cut go first, durably: a crash between the two must not
                // bring a cut transaction back from a snapshot.
                if !self.discard_snapshots_after(after, false) {
                    return;
                }
                if let Err(error) = self.log.truncate_after(after) {
                    self.node.handle(now, Input::LogFailed { error });
                }
            }
            Output::InstallSnapshot { zxid } => {
                self.install_snapshot(now, zxid, "received from the leader");
            }
            other => debug!("an ensemble output with no ensemble: {other:?}"),
        }
    }

    /// Removes (durably) the snapshots taken past `cut`, their files deleted later off this
    /// thread; false, with the server stopping, if they cannot be removed. True without a disk.
    /// `ends_reset`: the last step of installing a snapshot received from the leader, whose
    /// snapshot retention kept meanwhile ([`crate::snapshots::SnapshotFence::cut_for_reset`]).
    fn discard_snapshots_after(&mut self, cut: i64, ends_reset: bool) -> bool {
        let (Some((storage, _)), Some(fence)) = (self.snapshot_disk.as_ref(), self.snapshot_fence.as_ref())
        else {
            return true;
        };
        let discard = || crate::snapshots::discard_after(storage, cut);
        let discarded = if ends_reset { fence.reset_done(discard) } else { fence.cut(discard) };
        match discarded {
            Ok(trash) => {
                remove_trash_later(storage, trash);
                true
            }
            Err(e) => {
                self.stop = Some(format!("cannot remove snapshots past 0x{cut:x}: {e}"));
                false
            }
        }
    }

    /// Makes the node's database, as of `zxid`, the state on disk: written whole as the
    /// snapshot at `zxid`, then the log reset to start after it (a learner's received snapshot,
    /// `what` it is in the log line; a restored tree). False, with the server stopping or the
    /// log's failure handed to the node, if that could not be done.
    ///
    /// The snapshot is durable before the log forgets what it covers (ZOOKEEPER-3642): a crash
    /// between the two restarts from the snapshot. Under the fence: a snapshot of the old
    /// database still finishing must not land beside it. Retention then waits until the
    /// snapshots past this one are gone (`on_log_report`), so that it never counts them among
    /// the newest and takes this one away.
    fn install_snapshot(&mut self, now: Now, zxid: i64, what: &str) -> bool {
        let written = match self.snapshot_fence.clone() {
            Some(fence) => fence.cut_for_reset(|| self.write_snapshot(what).map(|()| zxid)),
            None => Ok(zxid),
        };
        if written.is_ok() && self.snapshot_fence.is_some() {
            self.discard_after_reset = Some(zxid);
        }
        if let Err(e) = written {
            self.stop = Some(format!("cannot write the snapshot {what}: {e}"));
            return false;
        }
        if let Err(error) = self.log.reset_to(zxid) {
            self.node.handle(now, Input::LogFailed { error });
            return false;
        }
        true
    }

    /// Writes the node's database as a snapshot file, whole, on this thread (a learner that
    /// received a snapshot, or a server that restored one, serves nobody until it is written),
    /// stored as this server's own setting says (snapshot.compression), whatever the source.
    fn write_snapshot(&self, what: &str) -> Result<(), zk_log::LogError> {
        let Some((storage, _)) = self.snapshot_disk.as_ref() else { return Ok(()) };
        let info = crate::snapshots::write_whole(
            storage,
            self.node.database(),
            crate::core::NODES_PER_STEP,
            self.snapshot_compression,
        )?;
        info!("wrote snapshot {} {what}", info.name);
        Ok(())
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Reply { conn, frame } => self.send(conn, Out::Reply(frame), true),
            Action::Frame { conn, frame } => self.send(conn, Out::Frame(frame), false),
            Action::SessionReady { conn } => {
                if let Some(ready) = self.ready.remove(&conn) {
                    let _ = ready.send(());
                }
            }
            Action::Close { conn } => {
                self.ready.remove(&conn);
                if let Some(out) = self.outboxes.remove(&conn) {
                    let _ = out.tx.try_send(Out::Close);
                    out.backlog.close();
                }
            }
            Action::CloseWhenQuiet { conn, requests } => {
                self.send(conn, Out::CloseWhenQuiet(requests), false)
            }
            Action::ReleasePermit => self.permits.add_permits(1),
            Action::Persist { records, inline } => self.persist(records, inline),
            Action::ResumeLog => self.log.resume(),
            Action::PurgeLogBefore { zxid } => self.log.purge_before(zxid),
            Action::Snapshot(job) => self.snapshot_job(job),
            Action::InstallRestored { zxid } => {
                let now = Self::now(self.origin);
                self.install_snapshot(now, zxid, "restored by the AdminServer's restore");
            }
            Action::Stop { reason } => {
                error!("stopping: {reason}");
                self.stop = Some(reason);
            }
            // The node hands these to its replica; only a bug brings one here.
            a @ (Action::Propose { .. }
            | Action::Commit { .. }
            | Action::CommitAndActivate { .. }
            | Action::Forward { .. }
            | Action::Revalidate { .. }
            | Action::SyncReady { .. }
            | Action::StepDown { .. }) => {
                debug_assert!(false, "a quorum action reached the driver: {a:?}");
                error!("a quorum action reached the driver: {a:?}");
            }
        }
    }

    /// Queues `out` for `conn`; a full outbox means the client stopped reading: close it. A reply
    /// frees its request's outstanding permit here: the request is done with, and what waits to be
    /// written is bounded by the connection's backlog, not by the permits every connection shares.
    fn send(&mut self, conn: ConnId, out: Out, is_reply: bool) {
        if is_reply {
            self.permits.add_permits(1);
        }
        let Some(outbox) = self.outboxes.get(&conn) else {
            return;
        };
        let len = match &out {
            Out::Reply(b) | Out::Frame(b) => b.len(),
            Out::Close | Out::CloseWhenQuiet(_) => 0,
        };
        outbox.backlog.queued(len);
        if let Err(e) = outbox.tx.try_send(out) {
            outbox.backlog.written(len);
            if matches!(e, crate::frame_queue::TrySendError::Full(_)) {
                warn!("closing connection {conn}: it is not reading what it is sent");
            } else {
                debug!("connection {conn} already closed");
            }
            // Dropping the sender closes the outbox; the writer sees it and ends.
            if let Some(out) = self.outboxes.remove(&conn) {
                out.backlog.close();
            }
            self.dead.push(conn);
        }
    }

    fn persist(&mut self, records: zk_log::RecordBatch, inline: bool) {
        // Between a received snapshot's log reset and the removal of the snapshots past it, a
        // record logged would sit beside those snapshots, and a restart would replay it onto the
        // newest of them: the learner logs nothing until told of the reset (review of issue
        // 29, helper-26, finding 3).
        debug_assert!(self.discard_after_reset.is_none(), "records logged before a SNAP's reset is reported");
        let started = Instant::now();
        if inline && self.log_backlog.is_empty() {
            if let Some(res) = self.log.commit_inline(&records) {
                if res.is_ok() {
                    self.metrics.log_persisted(started.elapsed());
                }
                let now = Self::now(self.origin);
                self.take_sync_times(now);
                match res {
                    Ok(zxid) => self.node.handle(now, Input::Durable { zxid }),
                    Err(error) => self.node.handle(now, Input::LogFailed { error }),
                }
                return;
            }
        }
        if let Some(last) = records.last_zxid() {
            if self.persist_started.len() < PERSIST_TIMES_MAX {
                self.persist_started.push_back((last, started));
            }
        }
        self.log_backlog.push_back(records);
        self.submit_backlog();
    }

    fn submit_backlog(&mut self) {
        while let Some(batch) = self.log_backlog.pop_front() {
            match self.log.try_submit(batch) {
                Ok(()) => {}
                // The log's queue is full: the rest go after its next report.
                Err(zk_log::SubmitError::Full(b)) => {
                    self.log_backlog.push_front(b);
                    return;
                }
                Err(zk_log::SubmitError::Stopped(_)) => {
                    self.log_backlog.clear();
                    let now = Self::now(self.origin);
                    self.node.handle(now, Input::LogFailed { error: zk_log::LogError::WriterStopped });
                    return;
                }
            }
        }
    }

    fn snapshot_job(&mut self, job: SnapJob) {
        let Some(tx) = self.snapshot_jobs.as_ref() else { return };
        if matches!(job, SnapJob::Begin { .. }) {
            self.snapshot_started = Some(Instant::now());
        }
        // The core keeps within the thread's queue (chunk credits), so Full is a bug, but for a
        // change of pace (one per quiet period's start and end can queue behind a stalled
        // thread): that is timing only, and is dropped.
        match tx.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(SnapJob::Pace(pace))) => {
                warn!("the snapshot thread's queue is full; its pace stays as it was instead of {pace} bytes a second");
            }
            Err(TrySendError::Full(_)) => {
                error!("the snapshot thread's queue is full; dropping this snapshot");
                self.snapshot_jobs = None;
                self.node.handle(Self::now(self.origin), Input::Core(Event::SnapshotThreadGone));
            }
            Err(TrySendError::Disconnected(_)) => {
                self.snapshot_jobs = None;
                self.node.handle(Self::now(self.origin), Input::Core(Event::SnapshotThreadGone));
            }
        }
    }
}

/// Deletes snapshots moved to the trash on a thread of their own (the next start removes
/// whatever this does not get to).
fn remove_trash_later(storage: &zk_log::FileStorage, trash: Vec<String>) {
    if trash.is_empty() {
        return;
    }
    let storage = storage.clone();
    let spawned = std::thread::Builder::new()
        .name("zk-snap-trash".into())
        .spawn(move || crate::snapshots::remove_trash(&storage, &trash));
    if let Err(e) = spawned {
        warn!("cannot start a thread to remove snapshot trash ({e}); the next start removes it");
    }
}

/// Apache's ensemble metrics, from the replica's counters and gauges.
fn quorum_metrics(
    r: &crate::node::replica::Replica,
    serving: bool,
    now: Now,
) -> crate::admin::metrics::QuorumMetrics {
    let c = r.counters();
    let g = r.gauges(serving, now);
    crate::admin::metrics::QuorumMetrics {
        looking_count: c.looking_count,
        proposal_count: c.proposal_count,
        commit_count: c.commit_count,
        snap_count: c.snap_count,
        diff_count: c.diff_count,
        quorum_size: g.quorum_size,
        leader_uptime_ms: g.leader_uptime_ms,
    }
}

/// The `ip` id of a caller at `addr`, as the client port names it: an IPv4 caller reaching an
/// IPv6 listener (`::ffff:a.b.c.d`) is `a.b.c.d`, so that `ip:` ACLs written for IPv4 match it.
fn ip_id(addr: std::net::IpAddr) -> zk_proto::Id {
    zk_proto::Id { scheme: "ip".into(), id: addr.to_canonical().to_string() }
}

/// Whether the root's `acl` grants `auth` every bit of `perm`, each bit checked on its own
/// (Apache 3.9's check since CVE-2025-58457), where, stricter than Apache, an entry for
/// `world:anyone` (the root's ACL until someone sets it) or an empty ACL proves nothing: these
/// commands hand out every node, whatever its own ACL, so only an id the caller authenticated
/// as (or a super user) passes.
fn root_grants(
    cfg: &zk_tree::TreeConfig,
    acl: &[zk_proto::Acl],
    perm: i32,
    auth: &zk_tree::AuthIds,
) -> crate::admin::snapshot::Authorization {
    use crate::admin::snapshot::Authorization;
    let superuser = auth.is_super || auth.ids.iter().any(|i| i.scheme == "super");
    let named: Vec<zk_proto::Acl> =
        acl.iter().filter(|a| !(a.id.scheme == "world" && a.id.id == "anyone")).cloned().collect();
    if named.is_empty() && !superuser {
        return Authorization::Denied;
    }
    let every_bit = (0..i32::BITS).map(|b| 1i32 << b).filter(|bit| perm & bit != 0);
    for bit in every_bit {
        if zk_tree::acl::check_acl(cfg, &named, bit, auth).is_err() {
            return Authorization::Denied;
        }
    }
    Authorization::Granted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review finding 6: with `admin.serverAddress=::`, an IPv4 caller arrives as an IPv4-mapped
    /// address; its `ip` id is the IPv4 one, as on the client port.
    #[test]
    fn an_ipv4_caller_on_an_ipv6_listener_has_its_ipv4_id() {
        let mapped: std::net::IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(ip_id(mapped).id, "10.0.0.7");
        let v6: std::net::IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(ip_id(v6).id, "2001:db8::1");
        let cfg = zk_tree::TreeConfig::default();
        let acl = [zk_proto::Acl {
            perms: zk_proto::perms::ALL,
            id: zk_proto::Id { scheme: "ip".into(), id: "10.0.0.0/8".into() },
        }];
        let caller = zk_tree::AuthIds { ids: vec![ip_id(mapped)], is_super: false };
        assert_eq!(
            root_grants(&cfg, &acl, zk_proto::perms::ALL, &caller),
            crate::admin::snapshot::Authorization::Granted
        );
    }

    /// Review finding 5: with the root open to `world:anyone`, a caller proving any id (even
    /// `ip`, which needs no secret) got every node; that entry, or an empty ACL, proves nothing
    /// here. An id named on the root with ALL, or a super user, still passes.
    #[test]
    fn world_anyone_on_the_root_grants_no_snapshot() {
        use crate::admin::snapshot::Authorization;
        use zk_proto::{perms, Acl, Id};
        let cfg = zk_tree::TreeConfig::default();
        let id = |scheme: &str, id: &str| Id { scheme: scheme.into(), id: id.into() };
        let caller = zk_tree::AuthIds { ids: vec![id("ip", "10.0.0.7")], is_super: false };
        let anyone = Acl { perms: perms::ALL, id: id("world", "anyone") };
        assert_eq!(
            root_grants(&cfg, std::slice::from_ref(&anyone), perms::ALL, &caller),
            Authorization::Denied
        );
        assert_eq!(
            root_grants(&cfg, &[], perms::ALL, &caller),
            Authorization::Denied,
            "an empty ACL neither"
        );
        let ip = Acl { perms: perms::ALL, id: id("ip", "10.0.0.0/8") };
        assert_eq!(
            root_grants(&cfg, &[anyone.clone(), ip.clone()], perms::ALL, &caller),
            Authorization::Granted
        );
        let partial = Acl { perms: perms::ALL & !perms::ADMIN, ..ip };
        assert_eq!(
            root_grants(&cfg, &[anyone.clone(), partial], perms::ALL, &caller),
            Authorization::Denied,
            "world:anyone does not supply the missing bit"
        );
        let superuser = zk_tree::AuthIds { ids: Vec::new(), is_super: true };
        assert_eq!(root_grants(&cfg, &[anyone], perms::ALL, &superuser), Authorization::Granted);
    }

    #[test]
    fn idle_trim_once_per_quiet_period_after_work() {
        let mut t = IdleTrim::default();
        // After start-up: the first quiet check trims, the next ones do not.
        assert!(t.check());
        assert!(!t.check());
        // A load: never while it runs, once at the first quiet check after it.
        for _ in 0..5 {
            t.inputs(50_000);
            assert!(!t.check());
        }
        assert!(t.check());
        assert!(!t.check());
        // A snapshot written: once more.
        t.work_done();
        assert!(t.check());
        assert!(!t.check());
        // A trickle of pings below the quiet bound: a trim only after a load's worth of them.
        let checks = (1..10_000).find(|_| {
            t.inputs(IDLE_QUIET_INPUTS - 1);
            t.check()
        });
        assert_eq!(checks, Some(IDLE_TRIM_AFTER_INPUTS.div_ceil(IDLE_QUIET_INPUTS - 1) as usize));
    }
}
