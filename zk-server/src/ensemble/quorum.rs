//! This server's part in an ensemble: elections, then leading or learning with zk-quorum's Zab
//! machines, around the same server core and log as a standalone server.
//!
//! The driver (`crate::driver`) owns the core and the log; this part owns the election and
//! quorum ports, the epoch files and the Zab machine of the moment. It turns what those say into
//! [`Effect`]s the driver carries out on the core and the log, and takes the core's quorum actions
//! (proposals, commits, forwarded requests, sync answers) and the log's reports in.
//!
//! Every change of role goes through LOOKING: the core stops serving (clients reconnect
//! elsewhere), the database is reloaded from the snapshot and the whole log on disk (a leader's
//! history is everything it logged; a learner's is then put right by DIFF, TRUNC or SNAP), and an
//! election runs.

use super::election_net::{ElectionNet, Received};
use super::peer_auth::{self, PeerSecurity};
use super::peer_net::{self, Established, Outgoing, PeerConn, PeerEvent, SnapshotSink, SnapshotSinkFactory};
use super::peer_tls::{self, PeerTls, SetupError};
use super::settings::resolve;
use crate::admin::metrics::QuorumMetrics;
use crate::core::{Event, Role, VoterSet};
use crate::summary::{Detail, Summary, Timing};
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};
use zk_log::{EpochStore, FileStorage, TxnSource};
use zk_proto::jute::{Jute, Reader};
use zk_proto::{OpCode, Request, Txn, TxnHeader};
use zk_quorum::config::QuorumConfig;
use zk_quorum::election::{ElectionConfig, FastLeaderElection, PeerData};
use zk_quorum::quorum::QuorumVerifier;
use zk_quorum::wire::{ForwardedRequest, PacketType, PeerState};
use zk_quorum::zab::{Leader, LeaderAction, Learner, LearnerAction, LocalState, ZabConfig};
use zk_tree::apache_snap::ApacheSnapLoader;
use zk_tree::{Database, TreeConfig};

/// The most log records a leader reads back for one DIFF before it sends a snapshot instead.
const DIFF_RECORDS_MAX: usize = 1_000_000;

/// Connections accepted on the quorum port and not yet taken by the loop.
const ACCEPT_QUEUE: usize = 64;

/// Connections a learner tries to a leader that refuses them or closes them before its
/// handshake, before it elects again.
const LEARNER_CONNECT_TRIES: u32 = 5;

/// The pause between those tries.
const LEARNER_CONNECT_RETRY: Duration = Duration::from_millis(100);

/// Learners held while this server still elects.
const PARKED_MAX: usize = 64;

/// Sessions, ACL lists or nodes serialized in one step of a SNAP stream.
const SNAP_STEP_ITEMS: usize = 1024;

/// Steps of a SNAP stream that may wait in its connection's outbox.
const SNAP_STEPS_QUEUED: usize = 4;

/// How soon a SNAP stream whose connection is still sending looks again.
const SNAP_RETRY: Duration = Duration::from_millis(2);

/// Whether `conn`'s outbox has (almost) nothing left to send: a snapshot stream takes its next
/// step only then, so that at most a few steps of it wait in memory.
fn outbox_idle(outboxes: &HashMap<PeerConn, mpsc::Sender<Outgoing>>, conn: PeerConn) -> bool {
    outboxes.get(&conn).is_some_and(|tx| tx.capacity() + SNAP_STEPS_QUEUED >= tx.max_capacity())
}

/// A SNAP stream under way: the leader machine's request, the learner's connection, where the
/// serialization stands, and the bytes sent so far.
struct SnapStream {
    req: u64,
    conn: PeerConn,
    cursor: zk_tree::apache_snap::ApacheSnapCursor,
    bytes: u64,
}

/// How long the machine's timer waits when the machine has no deadline.
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// `Quorum::timer_at` once the timer went off: no deadline is this, so the next wait sets it.
const TIMER_FIRED: u64 = u64::MAX;

/// Apache's shortest wait, in ms, between starting to look and serving read-only clients.
const READ_ONLY_DELAY_MS: u64 = 2000;

/// Events from the peer connections not yet handled.
const PEER_EVENTS: usize = 16 * 1024;

/// A follower appends proposals that arrive together to one log batch up to this size.
const PERSIST_MERGE_BYTES: u64 = 1 << 20;

/// How this server is placed in its ensemble.
#[derive(Debug, Clone)]
pub struct EnsembleSettings {
    /// myid.
    pub my_sid: i64,
    /// The servers, as the notifications and NEWLEADER carry them.
    pub config: QuorumConfig,
    /// Whether this server is an observer.
    pub observer: bool,
    /// tickTime, ms.
    pub tick_ms: u64,
    /// initLimit, ticks.
    pub init_limit: u64,
    /// syncLimit, ticks.
    pub sync_limit: u64,
    /// Where this server's election port listens.
    pub election_listen: SocketAddr,
    /// Every other server's election address.
    pub election_peers: HashMap<i64, SocketAddr>,
    /// Where this server's quorum port listens (it accepts learners while it leads).
    pub quorum_listen: SocketAddr,
    /// Every server's quorum address.
    pub quorum_addrs: HashMap<i64, SocketAddr>,
    /// The largest quorum packet accepted.
    pub max_packet: usize,
    /// How a database received by SNAP is set up.
    pub tree_cfg: TreeConfig,
    /// `cnxTimeout`: the longest an election connection may take to open and shake hands.
    pub cnx_timeout: Duration,
    /// `commitLogCount`: committed proposals a leader keeps in memory to sync learners by DIFF.
    pub committed_log_max: usize,
    /// `readonlymode.enabled`: serve read-only clients while cut off from the quorum.
    pub read_only_mode: bool,
    /// `reconfigEnabled`: dynamic reconfiguration.
    pub reconfig_enabled: bool,
    /// `standaloneEnabled`.
    pub standalone_enabled: bool,
    /// The zoo.cfg this server started from: an activated configuration is written beside it
    /// (`zoo.cfg.dynamic.<version>`) and zoo.cfg then names that file, as Apache does.
    pub config_file: Option<std::path::PathBuf>,
    /// TLS between members (`sslQuorum`, `portUnification`); None: plain only.
    pub tls: Option<Arc<PeerTls>>,
    /// SASL between members (`quorum.auth.enableSasl`); None: off.
    pub sasl: Option<Arc<crate::sasl_config::QuorumSasl>>,
}

/// What the driver does for this part.
#[derive(Debug)]
pub enum Effect {
    /// Hand the core this event.
    Core(Event),
    /// Change the core's role (and its database, when given).
    SetRole(Role, VoterSet, Option<Box<Database>>),
    /// Append these records (a learner logging its leader's proposals).
    Persist(zk_log::RecordBatch),
    /// Cut the log after this zxid (TRUNC); report back with [`Quorum::truncated`].
    Truncate(i64),
    /// Drop the whole log: it continues above this zxid (SNAP); report back with
    /// [`Quorum::reset_done`].
    Reset(i64),
    /// A TRUNC below where this log starts (its start is a snapshot received from a leader whose
    /// epoch never became established): remove the snapshots past this zxid, reset the log to the
    /// newest snapshot left, and report back with [`Quorum::reset_done`]; this server then syncs
    /// again from that older state.
    ResyncBelow(i64),
    /// The configuration in force gives this server this client address (its `;host:port`
    /// part). The server listens there from now on if it listens elsewhere, as Apache's
    /// members move their client listener at a reconfiguration; connections already open stay.
    ClientAddress(SocketAddr),
}

/// What woke the loop up.
#[derive(Debug)]
pub enum Input {
    /// A notification on the election port.
    Election(Received),
    /// Something on a quorum connection.
    Peer(PeerEvent),
    /// A learner connected to the quorum port.
    Accepted(Established),
    /// A machine's timer is due.
    Timer,
    /// The set of peers known to be down changed.
    PeersDown,
    /// A snapshot stream to a learner may take its next step.
    SnapshotStep,
}

enum State {
    Looking(Box<FastLeaderElection>),
    Leading(Box<Leader>),
    Learning { learner: Box<Learner>, conn: PeerConn, attempt: u32 },
}

/// Reloads the database from disk: the newest snapshot and the log after it. Given the zxid the
/// log was just cut after, snapshots past it are discarded first.
pub type Reload = Box<dyn Fn(&dyn TxnSource, Option<i64>) -> Result<Database, String> + Send>;

/// A snapshot received by SNAP, loaded by the connection's reader.
type SnapshotSlot = Arc<Mutex<Option<Database>>>;

/// This server's part in the ensemble. See the module docs.
pub struct Quorum {
    s: EnsembleSettings,
    verifier: QuorumVerifier,
    origin: Instant,
    net: ElectionNet,
    election_rx: mpsc::Receiver<Received>,
    down_rx: tokio::sync::watch::Receiver<std::collections::BTreeSet<i64>>,
    epochs: EpochStore<FileStorage>,
    source: Box<dyn TxnSource>,
    /// Reloads the database from disk (the newest snapshot plus the log after it).
    reload: Reload,
    state: State,
    accepted_rx: mpsc::Receiver<Established>,
    peer_tx: mpsc::Sender<PeerEvent>,
    peer_rx: mpsc::Receiver<PeerEvent>,
    outboxes: HashMap<PeerConn, mpsc::Sender<Outgoing>>,
    next_conn: PeerConn,
    /// The snapshot the current learner connection received.
    received: SnapshotSlot,
    /// A peer's connection event taken while gathering a batch of packets: handled on its own,
    /// first, by the next [`Quorum::next`].
    held: Option<PeerEvent>,
    /// An election's decision, carried out once the log has made durable every record handed to
    /// it (`requested`).
    decision: Option<(i64, PeerState)>,
    /// The last zxid handed to the log (a learner's logged proposal, or the leader's own).
    requested: i64,
    /// Learners that connected while this server was still electing: a learner may decide
    /// before its leader does. They are handed to the leader if this server leads, and dropped
    /// otherwise, or when older than initLimit.
    parked: Vec<(Established, u64)>,
    /// With `readonlymode.enabled`: when this server, still looking, starts serving read-only
    /// clients.
    read_only_at: Option<u64>,
    /// SNAP streams under way (leader): each serialized a step at a time between events, from
    /// the core's live database, so that the leader keeps serving while a large tree streams.
    snap_streams: Vec<SnapStream>,
    /// The machine's timer, moved only when its deadline (ms since `origin`) moves: a new timer
    /// for every wait read the clock and touched the timer wheel at every packet.
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// What `timer` is set for; [`TIMER_FIRED`] once it went off, so that it is set again.
    timer_at: Option<u64>,
    effects: Vec<Effect>,
    /// Apache's ensemble metrics, as this server counts them.
    metrics: QuorumMetrics,
    /// From entering LOOKING to the decision, for each election this server then led or followed
    /// in (`election_time`; observers' are not counted, as in Apache).
    election_time: Summary,
    /// When the current election started (ms since `origin`), for `election_time`.
    looking_since: u64,
    /// When this server started leading (ms since `origin`), while it leads.
    leading_since: Option<u64>,
    /// Leader: the synced followers last told to the core.
    synced_told: std::collections::BTreeSet<i64>,
    /// A configuration newer than the one in force, found in this server's own log (a
    /// reconfiguration proposed, not known to be committed): elections and a new leader's
    /// quorums need both until a leader establishes it.
    pending: Option<QuorumConfig>,
    /// Leader: a committed reconfiguration to activate once the COMMITANDACTIVATE packets are
    /// out.
    activation: Option<(i64, Bytes, i64)>,
}

impl Quorum {
    /// Binds the election and quorum ports and starts looking for a leader.
    ///
    /// Errors: a port cannot be bound.
    /// `db` is the database the server starts from: a reconfiguration in its log newer than
    /// the configuration in force is pending.
    pub async fn start(
        s: EnsembleSettings,
        epochs: EpochStore<FileStorage>,
        source: Box<dyn TxnSource>,
        reload: Reload,
        origin: Instant,
        db: &Database,
    ) -> std::io::Result<Quorum> {
        let my_addr = zk_quorum::wire::HostPort {
            host: s.election_listen.ip().to_string(),
            port: s.election_listen.port(),
        };
        let (net, election_rx) = ElectionNet::start(
            s.my_sid,
            s.election_listen,
            my_addr,
            s.election_peers.clone(),
            s.cnx_timeout,
            PeerSecurity { tls: s.tls.clone(), sasl: s.sasl.clone() },
            s.reconfig_enabled,
        )
        .await?;
        let listener = TcpListener::bind(s.quorum_listen).await?;
        let (acc_tx, accepted_rx) = mpsc::channel(ACCEPT_QUEUE);
        let tls = s.tls.clone();
        let sasl = s.sasl.clone();
        if let Some(t) = tls.clone().filter(|t| t.reload_wanted()) {
            // For the life of the process, as the ports.
            drop(crate::tls::poll_stores(move || t.reload_if_changed()));
        }
        // Apache's leader gives a learner initLimit ticks to connect and sync.
        let handshake_limit = Duration::from_millis(s.tick_ms * s.init_limit.max(1));
        tokio::spawn(async move {
            let pending = Arc::new(tokio::sync::Semaphore::new(peer_tls::MAX_PENDING_SETUPS));
            loop {
                let Ok(permit) = pending.clone().acquire_owned().await else { return };
                match listener.accept().await {
                    Ok((stream, remote)) => {
                        // Each handshake in its own task: a slow peer holds up no other.
                        let (tls, sasl, acc_tx) = (tls.clone(), sasl.clone(), acc_tx.clone());
                        tokio::spawn(async move {
                            // Held until the connection is handed over: the hand-over queue
                            // is bounded too.
                            let _setup = permit;
                            let set_up = async {
                                let mut s = peer_tls::accept(tls.as_deref(), stream, handshake_limit).await?;
                                let mut read_ahead = BytesMut::new();
                                let remote = remote.to_string();
                                peer_auth::check_peer(
                                    sasl.as_deref(),
                                    &mut s,
                                    &mut read_ahead,
                                    &remote,
                                    handshake_limit,
                                )
                                .await?;
                                Ok(Established { stream: s, read_ahead })
                            };
                            match set_up.await {
                                Ok(s) => {
                                    let _ = acc_tx.send(s).await;
                                }
                                Err(SetupError::Gone(why)) => {
                                    debug!("quorum connection from {remote} closed: {why}")
                                }
                                Err(SetupError::Refused(why)) => {
                                    warn!("quorum connection from {remote} refused: {why}")
                                }
                            }
                        });
                    }
                    Err(e) => {
                        warn!("quorum port accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        });
        info!("quorum port listening on {}", s.quorum_listen);
        let verifier = QuorumVerifier::from_config(&s.config);
        let (peer_tx, peer_rx) = mpsc::channel(PEER_EVENTS);
        let mut q = Quorum {
            state: State::Looking(Box::new(FastLeaderElection::new(
                ElectionConfig::new(s.my_sid, &s.config),
                PeerData { last_logged_zxid: 0, current_epoch: 0 },
                0,
            ))),
            down_rx: net.peers_down(),
            s,
            verifier,
            origin,
            net,
            election_rx,
            epochs,
            source,
            reload,
            accepted_rx,
            peer_tx,
            peer_rx,
            outboxes: HashMap::new(),
            next_conn: 1,
            received: Arc::new(Mutex::new(None)),
            held: None,
            decision: None,
            requested: 0,
            parked: Vec::new(),
            read_only_at: None,
            snap_streams: Vec::new(),
            timer: Box::pin(tokio::time::sleep(IDLE_WAIT)),
            timer_at: None,
            effects: Vec::new(),
            metrics: QuorumMetrics::default(),
            election_time: Summary::default(),
            looking_since: 0,
            leading_since: None,
            synced_told: std::collections::BTreeSet::new(),
            pending: None,
            activation: None,
        };
        q.note_logged_config(db);
        q.look("starting");
        Ok(q)
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// The effects produced so far, for the driver to carry out in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Apache's ensemble metrics now; the gauges (`quorum_size`, `leader_uptime`) only while
    /// this server is `serving` clients, as Apache registers them with a running server.
    pub fn metrics(&self, serving: bool) -> QuorumMetrics {
        let mut m = self.metrics.clone();
        if serving {
            m.quorum_size = Some(self.verifier.voters().len() as u64);
            m.leader_uptime_ms = self.leading_since.map(|since| self.now_ms().saturating_sub(since));
        }
        m
    }

    /// Zeroes the counters and the election summary (`srst`, as Apache's reset of its metrics).
    pub fn reset_metrics(&mut self) {
        self.metrics = QuorumMetrics::default();
        self.election_time = Summary::default();
    }

    /// Apache's `election_time` summary as of now.
    pub fn election_timing(&self) -> Timing {
        Timing::read("election_time", Detail::Basic, &self.election_time, self.now_ms())
    }

    /// The role Apache's `srvr` would print.
    pub fn mode(&self) -> &'static str {
        match &self.state {
            _ if !self.in_broadcast() => "looking",
            State::Leading(_) => "leader",
            _ if self.s.observer => "observer",
            _ => "follower",
        }
    }

    /// The ensemble as the AdminServer shows it (`leader`, `voting_view`, `zabstate`).
    pub fn admin_view(&self) -> crate::admin::EnsembleView {
        let (leading, leader_sid, zab_state) = match &self.state {
            State::Looking(_) => (false, None, "election"),
            State::Leading(l) if l.is_established() => (true, Some(self.s.my_sid), "broadcast"),
            State::Leading(l) if l.epoch().is_some() => (false, None, "synchronization"),
            State::Leading(_) => (false, None, "discovery"),
            State::Learning { learner, .. } if learner.is_up_to_date() => {
                (false, Some(learner.leader_sid()), "broadcast")
            }
            State::Learning { learner, .. } if learner.epoch().is_some() => (false, None, "synchronization"),
            State::Learning { .. } => (false, None, "discovery"),
        };
        crate::admin::EnsembleView {
            my_sid: self.s.my_sid,
            leading,
            leader_sid,
            observer: self.s.observer,
            zab_state,
            config: self.s.config.clone(),
        }
    }

    /// The leader's learner counts, when this server leads.
    pub fn learner_counts(&self) -> Option<zk_quorum::zab::LearnerCounts> {
        match &self.state {
            State::Leading(l) if l.is_established() => Some(l.learner_counts()),
            _ => None,
        }
    }

    /// A peer's packet already waiting, if any, while this server leads an established epoch
    /// or follows one it is up to date with: the driver takes the packets that arrived together
    /// before it steps the core, as it does with clients' messages. Anything else (an election,
    /// a sync, a connection that ended or a snapshot received) keeps a step per event, so that
    /// the effects of one (a role change, the log writes an election waits on) are carried out
    /// before the next is read: an ended connection found here is held for the next
    /// [`Quorum::next`].
    pub fn try_next_peer(&mut self) -> Option<Input> {
        if self.held.is_some() || !self.in_broadcast() {
            return None;
        }
        match self.peer_rx.try_recv().ok()? {
            e @ PeerEvent::Packet(..) => Some(Input::Peer(e)),
            e => {
                self.held = Some(e);
                None
            }
        }
    }

    /// Whether this server leads an established epoch, or follows a leader it is up to date with.
    fn in_broadcast(&self) -> bool {
        match &self.state {
            State::Leading(l) => l.is_established(),
            State::Learning { learner, .. } => learner.is_up_to_date(),
            State::Looking(_) => false,
        }
    }

    /// Waits for the next input.
    pub async fn next(&mut self) -> Input {
        if let Some(e) = self.held.take() {
            return Input::Peer(e);
        }
        let deadline = match &self.state {
            State::Looking(f) => match (f.poll_timeout(), self.read_only_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            State::Leading(l) => l.poll_timeout(),
            State::Learning { learner, .. } => learner.poll_timeout(),
        };
        if deadline != self.timer_at {
            let at = match deadline {
                Some(t) => self.origin + Duration::from_millis(t),
                None => Instant::now() + IDLE_WAIT,
            };
            self.timer.as_mut().reset(tokio::time::Instant::from_std(at));
            self.timer_at = deadline;
        }
        // A stream whose connection has room steps at once (after any event already waiting);
        // one whose connection is still sending looks again shortly.
        let snap_wait = (!self.snap_streams.is_empty()).then(|| {
            if self.snap_streams.iter().any(|s| outbox_idle(&self.outboxes, s.conn)) {
                Duration::ZERO
            } else {
                SNAP_RETRY
            }
        });
        tokio::select! {
            biased;
            Some(e) = self.peer_rx.recv() => Input::Peer(e),
            Some(r) = self.election_rx.recv() => Input::Election(r),
            Some(s) = self.accepted_rx.recv() => Input::Accepted(s),
            Ok(()) = self.down_rx.changed() => Input::PeersDown,
            _ = tokio::time::sleep(snap_wait.unwrap_or_default()), if snap_wait.is_some() => Input::SnapshotStep,
            _ = &mut self.timer => {
                self.timer_at = Some(TIMER_FIRED);
                Input::Timer
            }
        }
    }

    /// Handles an input; then call [`Self::take_effects`].
    pub async fn on_input(&mut self, input: Input, core_db: &Database) {
        let now = self.now_ms();
        match input {
            Input::Election(r)
                if matches!(self.state, State::Looking(_)) && self.newer_config(&r.1).is_some() =>
            {
                // As Apache's members with reconfiguration on: a peer's newer configuration is
                // adopted (a server that was away during a reconfiguration learns it here), and
                // the election starts over under it.
                if let Some(c) = self.newer_config(&r.1) {
                    info!("server {} has configuration version {:#x}: adopting it", r.0, c.version);
                    self.install(c);
                    self.look("newer configuration");
                }
            }
            Input::Election(r) => match &mut self.state {
                State::Looking(f) if tracing::enabled!(tracing::Level::TRACE) => {
                    tracing::trace!("notification from {}: {:?}", r.0, r.1);
                    f.handle_notification(r.0, r.1, now)
                }
                State::Looking(f) => f.handle_notification(r.0, r.1, now),
                // Leaders and learners answer a looking peer with their vote: a fresh election
                // machine settled on the current leader would; Apache answers from its vote.
                _ => self.answer_looking_peer(r),
            },
            Input::Accepted(stream) => match &self.state {
                State::Leading(_) => self.admit_learner(stream, now),
                State::Looking(_) if self.parked.len() < PARKED_MAX => {
                    debug!("a learner connected before the election here ended; holding it");
                    self.parked.push((stream, now));
                }
                _ => debug!("quorum connection refused: not leading"),
            },
            Input::Peer(PeerEvent::Packet(conn, pkt)) => match &mut self.state {
                State::Leading(l) => l.handle_packet(conn, pkt, now),
                State::Learning { learner, conn: c, .. } if *c == conn => learner.handle_packet(pkt, now),
                _ => {}
            },
            Input::Peer(PeerEvent::SnapshotReceived(conn)) => self.snapshot_received(conn),
            Input::Peer(PeerEvent::Closed(conn, why)) => {
                self.outboxes.remove(&conn);
                match &mut self.state {
                    State::Leading(l) => {
                        info!("learner connection {conn} closed: {why}");
                        l.learner_disconnected(conn, now);
                    }
                    State::Learning { conn: c, learner, attempt } if *c == conn => {
                        let (leader, attempt) = (learner.leader_sid(), *attempt);
                        if learner.epoch().is_none() && attempt < LEARNER_CONNECT_TRIES {
                            debug!("leader {leader} closed before its handshake ({why}); trying again");
                            tokio::time::sleep(LEARNER_CONNECT_RETRY).await;
                            self.follow(leader, self.s.observer, attempt + 1).await;
                        } else {
                            warn!("connection to the leader closed: {why}");
                            self.look("lost the leader");
                        }
                    }
                    _ => {}
                }
            }
            Input::PeersDown => {
                let down = self.down_rx.borrow_and_update().clone();
                if let State::Looking(f) = &mut self.state {
                    f.set_peers_down(down);
                }
            }
            Input::SnapshotStep => self.step_snapshots(core_db, now),
            Input::Timer => match &mut self.state {
                State::Looking(f) => {
                    f.handle_timeout(now);
                    if self.read_only_at.is_some_and(|t| t <= now) {
                        self.read_only_at = None;
                        info!("no quorum yet: serving read-only clients");
                        let me = self.s.my_sid;
                        self.effects.push(Effect::SetRole(Role::ReadOnly, VoterSet::solo(me), None));
                    }
                }
                State::Leading(l) => l.handle_timeout(now),
                State::Learning { learner, .. } => learner.handle_timeout(now),
            },
        }
        self.drain(core_db).await;
    }

    fn admit_learner(&mut self, stream: Established, now: u64) {
        let State::Leading(l) = &mut self.state else { return };
        let conn = self.next_conn;
        self.next_conn += 1;
        let out = peer_net::spawn(conn, stream, self.s.max_packet, self.peer_tx.clone(), None);
        self.outboxes.insert(conn, out);
        l.learner_connected(conn, now);
    }

    fn answer_looking_peer(&mut self, r: Received) {
        let (from, n) = r;
        if n.state != PeerState::Looking {
            return;
        }

        let (leader, epoch, state) = match &self.state {
            State::Leading(l) => (self.s.my_sid, l.epoch().unwrap_or(0), PeerState::Leading),
            State::Learning { learner, .. } => (
                learner.leader_sid(),
                learner.epoch().unwrap_or(0),
                if self.s.observer { PeerState::Observing } else { PeerState::Following },
            ),
            State::Looking(_) => return,
        };
        let reply = zk_quorum::wire::Notification {
            state,
            leader,
            zxid: self.source.durable_zxid(),
            election_epoch: n.election_epoch,
            peer_epoch: i64::from(epoch),
            version: zk_quorum::wire::notification::NOTIFICATION_VERSION,
            config: Some(Bytes::from(self.s.config.to_config_string())),
        };
        self.net.send(from, &reply);
    }

    /// Back to LOOKING: the core stops serving, and a new election starts.
    fn look(&mut self, why: &str) {
        info!("looking for a leader ({why})");
        self.snap_streams.clear();
        for (_, out) in self.outboxes.drain() {
            drop(out);
        }
        let me = self.s.my_sid;
        self.effects.push(Effect::SetRole(Role::Down, VoterSet::solo(me), None));
        let data =
            PeerData { last_logged_zxid: self.source.durable_zxid(), current_epoch: self.epochs.current() };
        let now = self.now_ms();
        self.metrics.looking_count += 1;
        self.looking_since = now;
        self.leading_since = None;
        let mut ecfg = ElectionConfig::new(me, &self.s.config);
        ecfg.pending_verifier = self.pending.as_ref().map(QuorumVerifier::from_config);
        let mut fle = FastLeaderElection::new(ecfg, data, now);
        fle.start_election(data, now);
        fle.set_peers_down(self.down_rx.borrow().clone());
        self.decision = None;
        // As Apache: read-only service starts once the election took max(2 s, a tick).
        self.read_only_at = self.s.read_only_mode.then(|| now + self.s.tick_ms.max(READ_ONLY_DELAY_MS));
        self.state = State::Looking(Box::new(fle));
    }

    fn local_state(&self) -> LocalState {
        let base = self.source.base_zxid();
        let last = self.source.durable_zxid();
        LocalState {
            accepted_epoch: self.epochs.accepted() as u32,
            current_epoch: self.epochs.current() as u32,
            last_logged_zxid: last,
            first_logged_zxid: (last > base).then_some(base + 1),
        }
    }

    fn zab_config(&self) -> ZabConfig {
        let mut cfg = ZabConfig::new(
            self.s.my_sid,
            self.verifier.clone(),
            self.s.tick_ms,
            self.s.init_limit,
            self.s.sync_limit,
        );
        cfg.config_string = Bytes::from(self.s.config.to_config_string());
        cfg.committed_log_max = self.s.committed_log_max;
        cfg.reconfig_enabled = self.s.reconfig_enabled;
        if let Some(p) = &self.pending {
            cfg.pending_verifier = Some(QuorumVerifier::from_config(p));
            cfg.config_string = Bytes::from(p.to_config_string());
        }
        cfg
    }

    /// Reloads the database from disk and hands it to the core (still down); `cut` as for
    /// [`Reload`].
    fn reload_database(&mut self, cut: Option<i64>) -> bool {
        match (self.reload)(self.source.as_ref(), cut) {
            Ok(db) => {
                self.note_logged_config(&db);
                let me = self.s.my_sid;
                self.effects.push(Effect::SetRole(Role::Down, VoterSet::solo(me), Some(Box::new(db))));
                self.effects.push(Effect::Core(Event::Membership(self.membership())));
                true
            }
            Err(e) => {
                error!("cannot reload the database from disk: {e}");
                false
            }
        }
    }

    /// Carries out what the machine of the moment asks, until it has nothing more.
    async fn drain(&mut self, core_db: &Database) {
        // The clock is read once, and again only after waiting on something.
        let mut now = self.now_ms();
        loop {
            let progressed = match &mut self.state {
                State::Looking(f) => match f.poll_action() {
                    Some(zk_quorum::election::ElectionAction::Send { to, notification }) => {
                        self.net.send(to, &notification);
                        true
                    }
                    Some(zk_quorum::election::ElectionAction::Decided { leader, state, .. }) => {
                        // The database is reloaded from the log, and the log's last zxid is what
                        // the leader (or this server, leading) syncs from: both must be the same
                        // zxid, so appends still queued from the last term finish first.
                        self.decision = Some((leader, state));
                        true
                    }
                    None => {
                        if self.decision.is_some() && self.source.durable_zxid() >= self.requested {
                            if let Some((leader, state)) = self.decision.take() {
                                self.decided(leader, state).await;
                                now = self.now_ms();
                                true
                            } else {
                                false
                            }
                        } else {
                            false
                        }
                    }
                },
                State::Leading(l) => match l.poll_action() {
                    Some(a) => {
                        // Reading the log back for a DIFF may take a while.
                        let slow = matches!(a, LeaderAction::ReadLog { .. });
                        self.leader_action(a, core_db, now);
                        if slow {
                            now = self.now_ms();
                        }
                        true
                    }
                    None => false,
                },
                State::Learning { learner, .. } => match learner.poll_action() {
                    Some(a) => {
                        self.learner_action(a, now);
                        true
                    }
                    None => false,
                },
            };
            if !progressed {
                return;
            }
        }
    }

    async fn decided(&mut self, leader: i64, state: PeerState) {
        info!("election: leader {leader}, this server {state:?}");
        self.read_only_at = None;
        self.snap_streams.clear();
        if !self.reload_database(None) {
            self.look("reload failed");
            return;
        }
        let now = self.now_ms();
        // As Apache: the election's time is counted by the servers that then lead or follow.
        if matches!(state, PeerState::Leading | PeerState::Following) {
            self.election_time.observe(now.saturating_sub(self.looking_since) * 1_000, now);
        }
        match state {
            PeerState::Leading => {
                self.leading_since = Some(now);
                let local = self.local_state();
                let recent = self.recent_history(local.last_logged_zxid);
                self.state = State::Leading(Box::new(Leader::new(self.zab_config(), local, recent, now)));
                let limit = self.s.tick_ms * self.s.init_limit.max(1);
                for (stream, at) in std::mem::take(&mut self.parked) {
                    if now.saturating_sub(at) <= limit {
                        self.admit_learner(stream, now);
                    }
                }
            }
            PeerState::Following | PeerState::Observing => {
                self.parked.clear();
                // A server outside the configuration decides like an observer (it has no vote)
                // but follows as the participant it is, a non-voting follower, as Apache's do.
                self.follow(leader, self.s.observer, 0).await;
            }
            PeerState::Looking => self.look("undecided"),
        }
    }

    /// Connects to `leader`'s quorum port and starts learning from it. `attempt` counts the
    /// connections the leader closed before it said anything: a learner may decide before its
    /// leader does, so it tries a few times (as Apache's learners do) before electing again.
    async fn follow(&mut self, leader: i64, observer: bool, attempt: u32) {
        let now = self.now_ms();
        let Some(&addr) = self.s.quorum_addrs.get(&leader) else {
            self.look("the leader has no quorum address");
            return;
        };
        let limit = Duration::from_millis(self.s.tick_ms * self.s.init_limit.max(1));
        // A leader just elected may not listen yet (an Apache leader waits out its election's
        // finalize time first): a refused connection is tried again a few times, as Apache's
        // learners do, before electing again. Electing again at once would start a new round
        // every few milliseconds, and each new round restarts the election on Apache's servers,
        // so their leader would never get to listen.
        let mut attempt = attempt;
        let tcp = loop {
            match peer_net::connect(addr, limit).await {
                Ok(s) => break s,
                Err(e) if attempt + 1 < LEARNER_CONNECT_TRIES => {
                    debug!("cannot reach leader {leader} at {addr} yet: {e}");
                    attempt += 1;
                    tokio::time::sleep(LEARNER_CONNECT_RETRY).await;
                }
                Err(e) => {
                    warn!("cannot reach leader {leader} at {addr}: {e}");
                    self.look("leader unreachable");
                    return;
                }
            }
        };
        let set_up = async {
            let mut s = peer_tls::connect(self.s.tls.as_deref(), tcp, leader, limit).await?;
            let mut read_ahead = BytesMut::new();
            peer_auth::authenticate_to(self.s.sasl.as_deref(), &mut s, &mut read_ahead, leader, limit)
                .await?;
            Ok::<_, SetupError>(Established { stream: s, read_ahead })
        };
        let stream = match set_up.await {
            Ok(s) => s,
            Err(e) => {
                warn!("cannot set up the connection to leader {leader} at {addr}: {e}");
                self.look("no secure or authenticated connection to the leader");
                return;
            }
        };
        let conn = self.next_conn;
        self.next_conn += 1;
        let slot = self.received.clone();
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let cfg = self.s.tree_cfg.clone();
        let sinks: SnapshotSinkFactory = Box::new(move |zxid| {
            Box::new(SnapSink::new(cfg.clone(), zxid, slot.clone())) as Box<dyn SnapshotSink>
        });
        let out = peer_net::spawn(conn, stream, self.s.max_packet, self.peer_tx.clone(), Some(sinks));
        self.outboxes.insert(conn, out);
        let mut learner = Learner::new(self.zab_config(), leader, observer, self.local_state(), now);
        learner.connected(now);
        self.state = State::Learning { learner: Box::new(learner), conn, attempt };
    }

    /// The last committed proposals of the log, for the leader's DIFF window.
    fn recent_history(&self, last: i64) -> Vec<(i64, Bytes)> {
        let window = zk_quorum::zab::DEFAULT_COMMITTED_LOG_MAX as i64;
        let from = (last - window + 1).max(self.source.base_zxid() + 1);
        match self.source.read_range(from, last, zk_quorum::zab::DEFAULT_COMMITTED_LOG_MAX) {
            Ok(entries) => entries.into_iter().map(|e| (e.header.zxid, payload(&e.header, &e.txn))).collect(),
            Err(e) => {
                debug!("no recent history for DIFF: {e}");
                Vec::new()
            }
        }
    }

    /// One step of every snapshot stream whose connection has room.
    fn step_snapshots(&mut self, core_db: &Database, now: u64) {
        let State::Leading(l) = &mut self.state else {
            self.snap_streams.clear();
            return;
        };
        let mut i = 0;
        while i < self.snap_streams.len() {
            let s = &mut self.snap_streams[i];
            if l.snapshot_conn(s.req) != Some(s.conn) {
                // The learner left, or failed its sync: nobody waits for the rest.
                self.snap_streams.remove(i);
                continue;
            }
            if !outbox_idle(&self.outboxes, s.conn) {
                i += 1;
                continue;
            }
            let mut out = Vec::with_capacity(64 * 1024);
            let done = core_db.apache_snap_step(&mut s.cursor, &mut out, SNAP_STEP_ITEMS);
            s.bytes += out.len() as u64;
            let (req, conn, bytes) = (s.req, s.conn, s.bytes);
            l.snapshot_bytes(req, Bytes::from(out), done, now);
            if done {
                debug!("SNAP to connection {conn} streamed: {bytes} bytes");
                self.snap_streams.remove(i);
            } else {
                i += 1;
            }
        }
    }

    fn send(&mut self, conn: PeerConn, out: Outgoing) {
        let Some(tx) = self.outboxes.get(&conn) else { return };
        if tx.try_send(out).is_err() {
            warn!("quorum connection {conn} is not reading what it is sent; closing it");
            self.outboxes.remove(&conn);
        }
    }

    fn leader_action(&mut self, a: LeaderAction, core_db: &Database, now: u64) {
        match a {
            LeaderAction::Send { conn, packet } => {
                // A learner's sync opens with one of these: Apache counts SNAP apart from the rest.
                match packet.packet_type {
                    t if t == PacketType::Snap as i32 => self.metrics.snap_count += 1,
                    t if t == PacketType::Diff as i32 || t == PacketType::Trunc as i32 => {
                        self.metrics.diff_count += 1
                    }
                    _ => {}
                }
                self.send(conn, Outgoing::Packet(packet))
            }
            LeaderAction::SendRaw { conn, bytes } => self.send(conn, Outgoing::Raw(bytes)),
            LeaderAction::Close { conn, reason } => {
                info!("closing learner connection {conn}: {reason}");
                self.outboxes.remove(&conn);
            }
            LeaderAction::PersistAcceptedEpoch(e) => {
                if let Err(err) = self.epochs.set_accepted(i64::from(e)) {
                    error!("cannot write acceptedEpoch: {err}");
                    return self.look("epoch file failed");
                }
                if let State::Leading(l) = &mut self.state {
                    l.epoch_persisted(now);
                }
            }
            LeaderAction::PersistCurrentEpoch(e) => {
                if let Err(err) = self.epochs.set_current(i64::from(e)) {
                    error!("cannot write currentEpoch: {err}");
                    return self.look("epoch file failed");
                }
                if let State::Leading(l) = &mut self.state {
                    l.epoch_persisted(now);
                }
            }
            LeaderAction::ReadLog { req, from_zxid, through_zxid } => {
                let got = read_anchored(self.source.as_ref(), from_zxid, through_zxid);
                if let State::Leading(l) = &mut self.state {
                    match got {
                        Some(v) => l.log_read(req, v, now),
                        None => l.log_read_failed(req, now),
                    }
                }
            }
            LeaderAction::SerializeSnapshot { req, zxid } => {
                // From the core's live state (at least `zxid`), a step at a time while writes go
                // on: the learner replays the proposals after `zxid` idempotently, as it does
                // Apache's fuzzy snapshots. The leader holds those proposals until it ends.
                let conn = match &self.state {
                    State::Leading(l) => l.snapshot_conn(req),
                    _ => None,
                };
                if let Some(conn) = conn {
                    let cursor = core_db.apache_snap_begin();
                    debug!(
                        "SNAP at 0x{zxid:x} to connection {conn}: streaming from 0x{:x}",
                        cursor.begin_zxid()
                    );
                    self.snap_streams.push(SnapStream { req, conn, cursor, bytes: 0 });
                }
            }
            LeaderAction::Established { epoch } => {
                info!("leading epoch {epoch}: serving");
                // With reconfiguration on, a version-0 configuration was stamped with the epoch
                // (NEWLEADER carried it); a quorum acknowledged it, so it is in force now.
                let stamped = match &self.state {
                    State::Leading(l) => l.config_string().clone(),
                    _ => Bytes::new(),
                };
                // A pending configuration (from this leader's log) was carried by NEWLEADER and
                // acknowledged by a quorum of both: it is in force now too.
                self.pending = None;
                if self.s.reconfig_enabled {
                    if let Some(c) = parse_config(&stamped).filter(|c| c.version > self.s.config.version) {
                        self.install(c);
                    }
                }
                let voters = VoterSet::with_verifier(self.s.my_sid, self.verifier.clone());
                self.effects.push(Effect::SetRole(Role::Leader { epoch }, voters, None));
                // The core learns the configuration (again, when `install` told it already).
                self.effects.push(Effect::Core(Event::Membership(self.membership())));
                self.synced_told.clear();
            }
            LeaderAction::Ack { sid, zxid } => self.effects.push(Effect::Core(Event::Ack { sid, zxid })),
            LeaderAction::Forwarded { conn, request, authinfo, .. } => {
                self.effects.push(Effect::Core(forwarded_event(conn, request, authinfo)))
            }
            LeaderAction::Touch { sessions } => self.effects.push(Effect::Core(Event::Touch {
                sessions: sessions.into_iter().map(|t| (t.session_id, t.timeout_ms)).collect(),
            })),
            LeaderAction::Revalidate { conn, session, .. } => {
                let valid = core_db.sessions().contains(session) && !core_db.expiry().is_closing(session);
                if valid {
                    self.effects.push(Effect::Core(Event::SessionOwner { session, from: conn }));
                }
                if let State::Leading(l) = &mut self.state {
                    l.revalidate_reply(conn, session, valid);
                }
            }
            LeaderAction::StepDown { reason } => {
                warn!("stepping down: {reason}");
                self.look("stepped down");
            }
        }
    }

    fn learner_action(&mut self, a: LearnerAction, now: u64) {
        let conn = match &self.state {
            State::Learning { conn, .. } => *conn,
            _ => return,
        };
        match a {
            LearnerAction::Send(p) => self.send(conn, Outgoing::Packet(p)),
            LearnerAction::PersistAcceptedEpoch(e) | LearnerAction::PersistCurrentEpoch(e) => {
                let res = if matches!(a, LearnerAction::PersistAcceptedEpoch(_)) {
                    self.epochs.set_accepted(i64::from(e))
                } else {
                    self.epochs.set_current(i64::from(e))
                };
                if let Err(err) = res {
                    error!("cannot write an epoch file: {err}");
                    return self.look("epoch file failed");
                }
                if let State::Learning { learner, .. } = &mut self.state {
                    learner.epoch_persisted(now);
                }
            }
            LearnerAction::Truncate { after_zxid } if after_zxid < self.source.base_zxid() => {
                warn!(
                    "told to truncate after 0x{after_zxid:x}, below the start of this log (0x{:x}, a \
                     snapshot from an epoch that failed): dropping what is past it and syncing again",
                    self.source.base_zxid()
                );
                self.effects.push(Effect::ResyncBelow(after_zxid));
                self.look("truncation below the log's start");
            }
            LearnerAction::Truncate { after_zxid } => self.effects.push(Effect::Truncate(after_zxid)),
            // The connection's reader is loading it already; see `snapshot_received`.
            LearnerAction::ReceiveSnapshot { zxid } => debug!("receiving a snapshot at 0x{zxid:x}"),
            LearnerAction::Log { zxid, payload } => {
                // Logged as it came: decoded only when it commits.
                if zk_log::format::payload_zxid(&payload) != Some(zxid) {
                    warn!("proposal 0x{zxid:x} carries a txn header of another zxid");
                    return self.look("malformed proposal");
                }
                // Proposals that arrived together go to the log as one batch.
                if let Some(Effect::Persist(b)) = self.effects.last_mut() {
                    if b.bytes() < PERSIST_MERGE_BYTES && b.push_payload(&payload).is_ok() {
                        self.requested = self.requested.max(zxid);
                        return;
                    }
                }
                let mut b = zk_log::RecordBatch::new();
                match b.push_payload(&payload) {
                    Ok(()) => {
                        self.requested = self.requested.max(zxid);
                        self.effects.push(Effect::Persist(b))
                    }
                    Err(e) => {
                        error!("cannot log proposal 0x{zxid:x}: {e}");
                        self.look("log failed");
                    }
                }
            }
            LearnerAction::Commit { payload, .. } => match decode_payload(&payload) {
                Some((hdr, txn, digest)) => {
                    self.effects.push(Effect::Core(Event::Committed { hdr, txn, digest }))
                }
                None => self.look("undecodable commit"),
            },
            LearnerAction::SyncDone => self.effects.push(Effect::Core(Event::SyncDone)),
            LearnerAction::Revalidated { session, valid } => {
                debug!("session 0x{session:x} revalidated: {valid}");
                self.effects.push(Effect::Core(Event::Revalidated { session, valid }));
            }
            LearnerAction::Activate { zxid, config, designated } => self.activate(zxid, &config, designated),
            LearnerAction::UpToDate => {
                // The leader's NEWLEADER said which configuration is in force (activated just
                // before): what this server's own log had pending is settled either way.
                self.pending = None;
                info!("up to date with leader: serving");
                let voters = VoterSet::with_verifier(self.s.my_sid, self.verifier.clone());
                self.effects.push(Effect::SetRole(Role::Learner { observer: self.s.observer }, voters, None));
            }
            LearnerAction::Disconnect { reason } => {
                warn!("leaving the leader: {reason}");
                self.look("disconnected");
            }
        }
    }

    fn snapshot_received(&mut self, conn: PeerConn) {
        let db = self.received.lock().unwrap_or_else(|e| e.into_inner()).take();
        let State::Learning { conn: c, .. } = &self.state else { return };
        if *c != conn {
            return;
        }
        match db {
            Some(db) => {
                let zxid = db.last_applied_zxid();
                let me = self.s.my_sid;
                self.effects.push(Effect::SetRole(Role::Down, VoterSet::solo(me), Some(Box::new(db))));
                self.effects.push(Effect::Reset(zxid));
            }
            None => self.look("the snapshot did not load"),
        }
    }

    /// The log was cut after `zxid` (TRUNC): the database is reloaded from disk.
    pub fn truncated(&mut self, zxid: i64) {
        self.requested = self.requested.min(zxid);
        if !self.reload_database(Some(zxid)) {
            return self.look("reload failed");
        }
        let now = self.now_ms();
        if let State::Learning { learner, .. } = &mut self.state {
            learner.truncated(zxid, now);
        }
    }

    /// The log was reset to a received snapshot's zxid (SNAP).
    pub fn reset_done(&mut self, zxid: i64) {
        self.requested = zxid;
        let now = self.now_ms();
        if let State::Learning { learner, .. } = &mut self.state {
            learner.snapshot_loaded(zxid, now);
        }
    }

    /// The log refused records (a full disk): they will never be durable, so an election's
    /// decision waits no longer for them.
    pub fn log_refused(&mut self) {
        self.requested = self.source.durable_zxid();
    }

    /// The core left its role because its log cannot take writes (a full disk): elect again.
    pub fn step_down(&mut self, reason: &str) {
        if !matches!(self.state, State::Looking(_)) {
            warn!("stepping down: {reason}");
            self.look("the transaction log cannot take writes");
        }
    }

    /// The log has everything through `zxid` durable.
    pub fn durable(&mut self, zxid: i64) {
        let now = self.now_ms();
        match &mut self.state {
            State::Leading(l) => l.local_durable(zxid, now),
            State::Learning { learner, .. } => learner.durable(zxid, now),
            State::Looking(_) => {}
        }
    }

    /// The core proposed these (leader), each as its encoded payload: to the learners.
    pub fn propose(&mut self, payloads: Vec<(i64, Bytes)>) {
        let now = self.now_ms();
        for (zxid, payload) in payloads {
            // The core hands it to the log as well.
            self.requested = self.requested.max(zxid);
            if let State::Leading(l) = &mut self.state {
                l.propose(zxid, payload, now);
                self.metrics.proposal_count += 1;
            }
        }
    }

    /// The core committed a reconfiguration (leader): COMMITANDACTIVATE and INFORMANDACTIVATE,
    /// then the configuration comes into force here.
    pub fn committed_and_activate(&mut self, zxid: i64, designated: i64, config: &Bytes) {
        let now = self.now_ms();
        if let State::Leading(l) = &mut self.state {
            l.committed_and_activate(zxid, designated, now);
            self.metrics.commit_count += 1;
            // Once the machine's packets (COMMITANDACTIVATE among them) are in the outboxes: a
            // leader handing over leaves its role, and its machine with them.
            self.activation = Some((zxid, config.clone(), designated));
        }
    }

    /// The core committed this (leader): COMMIT and INFORM.
    pub fn committed(&mut self, zxid: i64) {
        let now = self.now_ms();
        if let State::Leading(l) = &mut self.state {
            l.committed(zxid, now);
            self.metrics.commit_count += 1;
        }
    }

    /// A learner's sync may be answered.
    pub fn sync_ready(&mut self, to: u64) {
        let now = self.now_ms();
        if let State::Leading(l) = &mut self.state {
            l.sync_ready(to, now);
        }
    }

    /// The core forwards a client's request (learner).
    pub fn forward(&mut self, session: i64, cxid: i32, op: i32, body: Bytes, auth: Vec<zk_proto::Id>) {
        if let State::Learning { learner, .. } = &mut self.state {
            learner.forward_with_auth(ForwardedRequest { session_id: session, cxid, op, body }, auth);
        }
    }

    /// A client resumed `session` here (learner): the leader makes this server its owner.
    pub fn revalidate(&mut self, session: i64, timeout_ms: i32) {
        if let State::Learning { learner, .. } = &mut self.state {
            learner.revalidate(session, timeout_ms);
        }
    }

    /// Sessions the core's clients touched (learner), for the next PING answer.
    pub fn touch(&mut self, touched: Vec<(i64, i32)>) {
        if let State::Learning { learner, .. } = &mut self.state {
            for (s, t) in touched {
                learner.touch(s, t);
            }
        }
    }

    /// Runs whatever the calls above queued in the machine.
    pub async fn settle(&mut self, core_db: &Database) {
        self.drain(core_db).await;
        if let Some((zxid, config, designated)) = self.activation.take() {
            self.activate(zxid, &config, Some(designated));
            self.drain(core_db).await;
        }
        // The core prepares reconfigurations against the followers synced with this leader.
        if let State::Leading(l) = &self.state {
            if l.is_established() && !l.synced_followers_are(&self.synced_told) {
                let synced = l.synced_followers();
                if synced != self.synced_told {
                    self.synced_told = synced.clone();
                    self.effects.push(Effect::Core(Event::SyncedFollowers(synced)));
                }
            }
        }
    }

    /// The configuration as the core needs it.
    fn membership(&self) -> crate::core::Membership {
        crate::core::Membership {
            config: self.s.config.clone(),
            reconfig_enabled: self.s.reconfig_enabled,
            standalone_enabled: self.s.standalone_enabled,
        }
    }

    /// A configuration to activate (committed by a reconfiguration, or carried by NEWLEADER):
    /// if newer than this server's, it comes into force, is written beside zoo.cfg, and this
    /// server leaves its leader (or its leadership) when Apache's members would: it changes
    /// between observer and participant, or the configuration is led by another server.
    fn activate(&mut self, zxid: i64, config: &Bytes, designated: Option<i64>) {
        if !self.s.reconfig_enabled {
            return;
        }
        let Some(next) = parse_config(config) else {
            warn!("configuration activated at {zxid:#x} does not parse; ignored");
            return;
        };
        if next.version <= self.s.config.version {
            return;
        }
        let me = self.s.my_sid;
        let was_observer = self.s.observer;
        let leader = match &self.state {
            State::Leading(_) => Some(me),
            State::Learning { learner, .. } => Some(learner.leader_sid()),
            State::Looking(_) => None,
        };
        let prev = self.s.config.clone();
        self.install(next.clone());
        let role_change = was_observer != self.s.observer;
        let leader_change = match (designated, leader) {
            (Some(d), Some(l)) => d != l,
            (None, Some(l)) => {
                let addr = |c: &QuorumConfig| {
                    c.servers.get(&l).and_then(|s| s.addresses.first()).map(|a| a.quorum_addr())
                };
                !self.verifier.is_voter(l) || addr(&prev) != addr(&next)
            }
            (_, None) => false,
        };
        if role_change || leader_change {
            info!(
                "configuration {:#x} changes this server's place (observer: {}, leader: {designated:?})",
                next.version, self.s.observer
            );
            self.look("reconfiguration");
            // As Apache's members: the designated leader leads at once and the others follow it,
            // without an election (one runs if it cannot be reached). Without a designated leader
            // (a NEWLEADER configuration), an election decides.
            if let Some(d) = designated.filter(|d| self.verifier.is_voter(*d)) {
                let state = if d == me {
                    PeerState::Leading
                } else if self.s.observer {
                    PeerState::Observing
                } else {
                    PeerState::Following
                };
                self.decision = Some((d, state));
            }
        }
    }

    /// A reconfiguration in the log of `db` newer than the configuration in force becomes the
    /// pending one (or none, when there is none).
    fn note_logged_config(&mut self, db: &Database) {
        self.pending = self
            .s
            .reconfig_enabled
            .then(|| config_in(db))
            .flatten()
            .filter(|c| c.version > self.s.config.version);
        if let Some(c) = &self.pending {
            info!(
                "configuration version {:#x} found in the log, not known to be committed: pending",
                c.version
            );
        }
    }

    /// The configuration a notification carries, when reconfiguration is on and it is newer
    /// than this server's.
    fn newer_config(&self, n: &zk_quorum::wire::Notification) -> Option<QuorumConfig> {
        if !self.s.reconfig_enabled {
            return None;
        }
        parse_config(n.config.as_deref()?).filter(|c| c.version > self.s.config.version)
    }

    /// Puts `next` in force here: the verifier (the leader machine's too, which then counts the
    /// new configuration alone), the peers' addresses, this server's kind, the files
    /// (`zoo.cfg.dynamic.<version>`, zoo.cfg pointing at it), and the core's view of it.
    fn install(&mut self, next: QuorumConfig) {
        info!(
            "configuration version {:#x} in force: {}",
            next.version,
            next.to_config_string().replace('\n', ", ")
        );
        self.verifier = QuorumVerifier::from_config(&next);
        let mut election_peers = HashMap::new();
        for spec in next.servers.values() {
            let Some(a) = spec.addresses.first() else { continue };
            let what = format!("server.{}", spec.sid);
            match (resolve(&a.host, a.quorum_port, &what), resolve(&a.host, a.election_port, &what)) {
                (Ok(q), Ok(e)) => {
                    self.s.quorum_addrs.insert(spec.sid, q);
                    if spec.sid != self.s.my_sid {
                        election_peers.insert(spec.sid, e);
                    }
                }
                (Err(e), _) | (_, Err(e)) => warn!("{e}"),
            }
        }
        self.net.set_peers(&election_peers);
        self.s.election_peers = election_peers;
        if let Some(c) = next.servers.get(&self.s.my_sid).and_then(|s| s.client.as_ref()) {
            match resolve(&c.host, c.port, &format!("server.{}'s client address", self.s.my_sid)) {
                Ok(addr) => self.effects.push(Effect::ClientAddress(addr)),
                Err(e) => warn!("{e}; clients stay on the present address"),
            }
        }
        self.s.observer =
            zk_quorum::reconfig::placement(&next, self.s.my_sid) == zk_quorum::reconfig::Placement::Observer;
        if let Some(file) = self.s.config_file.clone() {
            if let Err(e) = write_dynamic_config(&file, &next, self.s.my_sid) {
                error!("cannot write the configuration beside {}: {e}", file.display());
            }
        }
        if let State::Leading(l) = &mut self.state {
            l.set_configuration(self.verifier.clone(), Bytes::from(next.to_config_string()));
        }
        self.s.config = next;
        self.effects.push(Effect::Core(Event::Membership(self.membership())));
    }
}

/// The records a DIFF needs: the anchor (the last record at or before `from`, the learner's
/// last zxid) and every record after it through `through`; None when the log no longer reaches
/// back that far, or the range is too long for a DIFF (the leader then sends a snapshot).
fn read_anchored(src: &dyn TxnSource, from: i64, through: i64) -> Option<Vec<(i64, Bytes)>> {
    let to_payloads = |v: Vec<zk_log::LogEntry>| {
        v.into_iter().map(|e| (e.header.zxid, payload(&e.header, &e.txn))).collect()
    };
    let mut v: Vec<(i64, Bytes)> = to_payloads(src.read_range(from, through, DIFF_RECORDS_MAX).ok()?);
    if v.len() >= DIFF_RECORDS_MAX {
        return None;
    }
    if v.first().map(|e| e.0) == Some(from) {
        return Some(v);
    }
    // The learner's last zxid is not in our log: the anchor is the last record before it, in
    // its epoch or an earlier one (zxids are dense within an epoch, not across epochs).
    let mut epoch = from >> 32;
    while epoch >= 0 {
        let start = (epoch << 32).max(src.base_zxid() + 1);
        if start <= from {
            let before = src.read_range(start, from, DIFF_RECORDS_MAX).ok()?;
            if let Some(last) = before.into_iter().filter(|e| e.header.zxid <= from).last() {
                v.insert(0, (last.header.zxid, payload(&last.header, &last.txn)));
                return Some(v);
            }
        }
        if start <= src.base_zxid() + 1 {
            break;
        }
        epoch -= 1;
    }
    // Nothing at or before `from` is left in the log (purged, or `from` precedes it).
    None
}

/// The PROPOSAL data of a transaction: its jute header and body.
pub fn payload(hdr: &TxnHeader, txn: &Txn) -> Bytes {
    let mut b = BytesMut::with_capacity(128);
    hdr.write(&mut b);
    txn.encode(&mut b);
    b.freeze()
}

fn decode_payload(p: &Bytes) -> Option<(TxnHeader, Txn, Option<zk_proto::TxnDigest>)> {
    zk_log::format::decode_payload_digest(p.clone()).ok()
}

/// A learner's REQUEST as the core takes it.
fn forwarded_event(conn: PeerConn, r: ForwardedRequest, auth: Vec<zk_proto::Id>) -> Event {
    if r.op == OpCode::CreateSession.code() {
        let timeout_ms = if r.body.len() >= 4 {
            i32::from_be_bytes([r.body[0], r.body[1], r.body[2], r.body[3]])
        } else {
            0
        };
        return Event::ForwardedCreateSession { session: r.session_id, cxid: r.cxid, timeout_ms };
    }
    let mut rd = Reader::new(r.body.clone());
    let body = Request::decode(r.op, &mut rd);
    Event::Forwarded { from: conn, session: r.session_id, cxid: r.cxid, op: r.op, body, auth }
}

/// Loads the snapshot stream after SNAP into a database, in the reader's task.
struct SnapSink {
    loader: Option<ApacheSnapLoader>,
    slot: SnapshotSlot,
}

impl SnapSink {
    fn new(cfg: TreeConfig, zxid: i64, slot: SnapshotSlot) -> SnapSink {
        SnapSink { loader: Some(ApacheSnapLoader::new(cfg, zxid)), slot }
    }
}

impl SnapshotSink for SnapSink {
    fn feed(&mut self, bytes: &[u8]) -> Result<(usize, bool), String> {
        let Some(loader) = self.loader.as_mut() else { return Ok((0, true)) };
        let fed = loader.feed(bytes).map_err(|e| e.to_string())?;
        if fed.done {
            if let Some(l) = self.loader.take() {
                let db = l.finish().map_err(|e| e.to_string())?;
                *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(db);
            }
        }
        Ok((fed.consumed, fed.done))
    }
}

/// A configuration string from the wire or a znode.
fn parse_config(bytes: &[u8]) -> Option<QuorumConfig> {
    QuorumConfig::parse(std::str::from_utf8(bytes).ok()?).ok().filter(|c| !c.servers.is_empty())
}

/// The configuration a database's /zookeeper/config holds.
fn config_in(db: &Database) -> Option<QuorumConfig> {
    parse_config(db.tree().get("/zookeeper/config")?.data()?)
}

/// Writes `config` as Apache's members do when one comes into force: its server, group and
/// weight lines (sorted, no version) to `<zoo.cfg>.dynamic.<hex version>`, then zoo.cfg without
/// its membership lines (and without clientPort/clientPortAddress when the server line gives
/// this server its client address), naming that file in `dynamicConfigFile`. Each file is
/// written to a temporary name, synced and renamed.
fn write_dynamic_config(
    static_file: &std::path::Path,
    config: &QuorumConfig,
    me: i64,
) -> std::io::Result<()> {
    let mut name = static_file.as_os_str().to_owned();
    name.push(format!(".dynamic.{:x}", config.version as u64));
    let dynamic = std::path::PathBuf::from(name);
    let mut lines: Vec<String> =
        config.to_config_string().lines().filter(|l| !l.starts_with("version=")).map(str::to_owned).collect();
    lines.sort();
    atomic_write(&dynamic, lines.join("\n").as_bytes())?;
    let erase_client = config.servers.get(&me).is_some_and(|s| s.client.is_some());
    let text = std::fs::read_to_string(static_file)?;
    let mut out = String::new();
    for line in text.lines() {
        let key = line.split(['=', ':']).next().unwrap_or("").trim();
        let membership = key.starts_with("server.")
            || key.starts_with("group")
            || key.starts_with("weight")
            || key.starts_with("dynamicConfigFile")
            || key.starts_with("peerType");
        let client = erase_client && (key == "clientPort" || key == "clientPortAddress");
        if !membership && !client {
            out.push_str(line);
            out.push('\n');
        }
    }
    let path = std::fs::canonicalize(&dynamic)?;
    out.push_str(&format!("dynamicConfigFile={}\n", path.display()));
    atomic_write(static_file, out.as_bytes())
}

fn atomic_write(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
