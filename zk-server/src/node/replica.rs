//! This server's part in an ensemble, as a deterministic state machine: elections, then leading
//! or learning with zk-quorum's Zab machines, around the same server core and log as a
//! standalone server.
//!
//! Every decision lives here: when an election's outcome is acted on (once every record handed
//! to the log is durable and no truncation or reset is pending, so that the database and the
//! last zxid reported describe the same log), when the database is reloaded, whom to dial and
//! how often, which learners are held while this server still elects, when a configuration comes
//! into force, when read-only service starts, how a SNAP stream is paced. What it needs done
//! leaves as [`Output`]s, and their results come back as [`Input`]s.
//!
//! Every change of role goes through LOOKING: the core stops serving (clients reconnect
//! elsewhere), the database is reloaded from the snapshot and the whole log on disk (a leader's
//! history is everything it logged; a learner's is then put right by DIFF, TRUNC or SNAP), and an
//! election runs. Elections are rounds of one machine that lives as long as the process, so its
//! logical clock grows from one election to the next, as Apache's does: a vote cast in an earlier
//! election can never be taken for a fresh one.

use super::{EpochFile, Input, LogRead, Output, PeerConn};
use crate::core::{Action, Event, Membership, Now, Role, ServerCore, VoterSet};
use crate::summary::{Detail, Summary, Timing};
use bytes::{Bytes, BytesMut};
use std::collections::{BTreeSet, VecDeque};
use tracing::{debug, error, info, warn};
use zk_proto::jute::{Jute, Reader};
use zk_proto::{OpCode, Request, Txn, TxnHeader};
use zk_quorum::config::QuorumConfig;
use zk_quorum::election::{ElectionAction, ElectionConfig, FastLeaderElection, PeerData};
use zk_quorum::quorum::QuorumVerifier;
use zk_quorum::wire::{ForwardedRequest, Notification, PacketType, PeerState};
use zk_quorum::zab::{Leader, LeaderAction, Learner, LearnerAction, LocalState, ZabConfig};
use zk_tree::Database;

mod recovery;
pub use recovery::RecoveryAnswer;

/// The most log records a leader reads back for one DIFF before it sends a snapshot instead.
pub const DIFF_RECORDS_MAX: usize = 1_000_000;

/// Connections a learner tries to a leader that refuses them or closes them before its
/// handshake, before it elects again.
const LEARNER_CONNECT_TRIES: u32 = 5;

/// The pause between those tries, ms.
const LEARNER_CONNECT_RETRY_MS: u64 = 100;

/// Learners held while this server still elects.
const PARKED_MAX: usize = 64;

/// Sessions, ACL lists or nodes serialized in one step of a SNAP stream.
pub const SNAP_STEP_ITEMS: usize = 1024;

/// Apache's shortest wait, in ms, between starting to look and serving read-only clients.
const READ_ONLY_DELAY_MS: u64 = 2000;

/// How long a divergence is remembered: another within it makes the next sync a SNAP, ms.
const DIVERGENCE_MEMORY_MS: u64 = 10 * 60_000;

/// A follower appends proposals that arrive together to one log batch up to this size.
const PERSIST_MERGE_BYTES: u64 = 1 << 20;

/// How long a leader handing over waits for its successor to hold every proposal (then gives
/// the handover up and serves on), and then for it to acknowledge the handover's proposal (then
/// leaves its role anyway), ms.
pub const HANDOVER_WAIT_MS: u64 = 5_000;

/// The error code of the handover's proposal, an error transaction of no session: it changes
/// nothing where it is applied (zkrs's and Apache's servers apply an error transaction as its
/// code alone, as they do every failed write's).
const HANDOVER_TXN_ERR: i32 = 0;

/// What became of a request that this leader hand its leadership over (`ydld`, SIGTERM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoverAnswer {
    /// Handing over to this server (it is caught up, or is being waited for).
    HandingOver(i64),
    /// A handover to this server is under way already.
    UnderWay(i64),
    /// This server does not lead an established epoch (it follows this leader, if known).
    NotLeader(Option<i64>),
    /// No voting follower is synced with this leader.
    NoFollower,
    /// The server asked for is not a voting follower synced with this leader.
    NotCandidate(i64),
    /// A standalone server has no ensemble to hand over to.
    Standalone,
}

impl std::fmt::Display for HandoverAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandoverAnswer::HandingOver(to) => write!(f, "handing over to server {to}"),
            HandoverAnswer::UnderWay(to) => write!(f, "a handover to server {to} is under way"),
            HandoverAnswer::NotLeader(Some(l)) => write!(f, "not the leader: server {l} leads"),
            HandoverAnswer::NotLeader(None) => write!(f, "not the leader: no leader now"),
            HandoverAnswer::NoFollower => write!(f, "no follower is synced to take over"),
            HandoverAnswer::NotCandidate(s) => {
                write!(f, "server {s} is not a voting follower synced with this leader")
            }
            HandoverAnswer::Standalone => write!(f, "standalone: no ensemble to hand over to"),
        }
    }
}

/// What a request for the leadership (`rqld`) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadershipAnswer {
    /// This server leads already.
    Leading,
    /// Asked the leader (this id) to hand over to this server; it decides (see its log).
    Asked(i64),
    /// This server follows no leader now (electing, syncing, or an observer).
    NoLeader,
    /// An observer cannot lead.
    Observer,
    /// A standalone server.
    Standalone,
}

impl std::fmt::Display for LeadershipAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeadershipAnswer::Leading => write!(f, "this server is the leader"),
            LeadershipAnswer::Asked(l) => write!(f, "asked leader {l} to hand over to this server"),
            LeadershipAnswer::NoLeader => write!(f, "not following a leader now; try again"),
            LeadershipAnswer::Observer => write!(f, "an observer cannot lead"),
            LeadershipAnswer::Standalone => write!(f, "standalone: no ensemble to lead"),
        }
    }
}

/// A handover under way on this leader.
#[derive(Debug, Clone, Copy)]
struct Handover {
    /// The successor.
    to: i64,
    /// When the wait of the moment ends, ms.
    deadline_ms: u64,
    /// The handover's proposal, once sent to the successor alone.
    proposed: Option<i64>,
}

/// How this server is placed in its ensemble: the part of zoo.cfg the replica decides with
/// (addresses, TLS and SASL are the driver's).
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
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
    /// `commitLogCount`: committed proposals a leader keeps in memory to sync learners by DIFF.
    pub committed_log_max: usize,
    /// `readonlymode.enabled`: serve read-only clients while cut off from the quorum.
    pub read_only_mode: bool,
    /// `reconfigEnabled`: dynamic reconfiguration.
    pub reconfig_enabled: bool,
    /// `standaloneEnabled`.
    pub standalone_enabled: bool,
    /// Sessions, ACL lists or nodes serialized in one step of a SNAP stream
    /// ([`SNAP_STEP_ITEMS`] unless a test wants small trees streamed in many steps).
    pub snap_step_items: usize,
    /// A learner's sync traffic handed to its connection before the leader waits for it to
    /// drain, bytes (zk-quorum's default unless a test wants many pieces).
    pub sync_piece_bytes: u64,
    /// ... and packets (zk-quorum's default unless a test wants pieces bounded by their count).
    pub sync_piece_packets: usize,
}

/// Where the log stands, as the node knows it: what it starts at and what is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogPosition {
    /// Records above this zxid are in the log (the snapshot or reset it starts from).
    pub base: i64,
    /// Every record through this zxid is durable.
    pub durable: i64,
}

/// Apache's ensemble counters, as this server counts them.
#[derive(Debug, Clone, Default)]
pub struct ReplicaCounters {
    /// Elections started (`looking_count`: each entry into LOOKING).
    pub looking_count: u64,
    /// Proposals sent as leader (`proposal_count`).
    pub proposal_count: u64,
    /// Commits sent as leader (`commit_count`).
    pub commit_count: u64,
    /// Learners synchronized by a snapshot (`snap_count`) ...
    pub snap_count: u64,
    /// ... and by DIFF or TRUNC (`diff_count`), as leader.
    pub diff_count: u64,
}

/// The gauges that exist while the server serves in an ensemble.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplicaGauges {
    /// Voting members (`quorum_size`).
    pub quorum_size: Option<u64>,
    /// Time since this server started leading, ms, while it leads (`leader_uptime`).
    pub leader_uptime_ms: Option<u64>,
}

/// A SNAP stream under way: the leader machine's request, the learner's connection, where the
/// serialization stands, and the bytes sent so far.
#[derive(Debug)]
struct SnapStream {
    req: u64,
    conn: PeerConn,
    cursor: zk_tree::apache_snap::ApacheSnapCursor,
    bytes: u64,
}

/// What to do once the database is reloaded.
#[derive(Debug, Clone, Copy)]
enum AfterReload {
    /// An election decided.
    Decided { leader: i64, state: PeerState },
    /// A learner's TRUNC is durable.
    Truncated(i64),
    /// Read-only service starts (from what is on disk: a tree the server left its role for is
    /// not served).
    ReadOnly,
    /// A snapshot received from the leader reset the log after this server left that leader
    /// (it elects now): the pending configuration is the one that snapshot holds, and the
    /// election starts again under it.
    Reset,
}

/// The role of the moment.
#[derive(Debug)]
enum State {
    /// Electing (the machine is [`Replica::fle`]); a decision may wait for the log and a reload.
    Looking,
    /// Leading.
    Leading(Box<Leader>),
    /// Decided to follow `leader`: connecting, or waiting `retry_at` to try again.
    Connecting { leader: i64, conn: Option<PeerConn>, attempt: u32, retry_at: Option<u64> },
    /// Learning from the leader on `conn`.
    Learning { learner: Box<Learner>, conn: PeerConn, attempt: u32 },
}

/// This server's part in the ensemble. See the module docs.
#[derive(Debug)]
pub struct Replica {
    cfg: ReplicaConfig,
    verifier: QuorumVerifier,
    /// (acceptedEpoch, currentEpoch) as on disk.
    epochs: (i64, i64),
    /// Epoch file writes asked for and not yet answered, in order, with their value and the
    /// Zab machine that asked ([`Replica::machine`]): a write outlives the role that asked for
    /// it, and its answer then only updates what is on disk.
    epoch_writes: VecDeque<(EpochFile, u32, u64)>,
    /// Numbers the Zab machines (a leader's or a learner's), so that an answer for one that is
    /// gone is not taken by its successor.
    machine: u64,
    log: LogPosition,
    /// The last zxid handed to the log (a learner's logged proposal, or the leader's own).
    requested: i64,
    /// Truncations and resets asked of the log and not yet reported.
    log_jobs: u32,
    /// The election machine: one for the life of the process, so its round grows.
    fle: Box<FastLeaderElection>,
    state: State,
    next_conn: PeerConn,
    /// An election's decision, carried out once the log has made durable every record handed
    /// to it (`requested`) and has no truncation or reset pending.
    decision: Option<(i64, PeerState)>,
    /// A reload asked for, and what follows it.
    reloading: Option<AfterReload>,
    /// Learners that connected while this server was still electing (a learner may decide
    /// before its leader does): admitted if this server leads, closed otherwise, or when older
    /// than initLimit.
    parked: Vec<(PeerConn, u64)>,
    /// Open quorum connections (admitted learners, the leader's), to close when the role ends.
    conns: BTreeSet<PeerConn>,
    /// Peers whose election port refuses connections.
    peers_down: BTreeSet<i64>,
    /// With `readonlymode.enabled`: when this server, still looking, starts serving read-only
    /// clients.
    read_only_at: Option<u64>,
    /// SNAP streams under way (leader): each serialized a few steps at a time from the core's
    /// live database, paced by its connection draining.
    snap_streams: Vec<SnapStream>,
    /// Leader: learner connections asked to report when they drain (a sync waits for room).
    watching: BTreeSet<PeerConn>,
    /// A learner's proposals that arrived together, for the log as one batch.
    learner_batch: Option<zk_log::RecordBatch>,
    counters: ReplicaCounters,
    /// From entering LOOKING to the decision, for each election this server then led or followed
    /// in (`election_time`; observers' are not counted, as in Apache).
    election_time: Summary,
    /// When the current election started, ms.
    looking_since: u64,
    /// When this server started leading, ms, while it leads.
    leading_since: Option<u64>,
    /// Leader: the synced followers last told to the core.
    synced_told: BTreeSet<i64>,
    /// A configuration newer than the one in force, found in this server's own log (a
    /// reconfiguration proposed, not known to be committed): elections and a new leader's
    /// quorums need both until a leader establishes it.
    pending: Option<QuorumConfig>,
    /// Leader: a committed reconfiguration to activate once the COMMITANDACTIVATE packets are
    /// out.
    activation: Option<(i64, Bytes, i64)>,
    /// Events for the core, handed over when the node settles.
    for_core: VecDeque<CoreChange>,
    /// The next learner connection asks its leader for a SNAP (the tree diverged again).
    snap_next: bool,
    /// When the tree last diverged from the ensemble's digests, ms.
    last_divergence_ms: Option<u64>,
    /// Leader: a handover of its leadership under way.
    handover: Option<Handover>,
    /// A confirmed forced recovery waiting for its epoch files.
    recovery: Option<recovery::Recovery>,
    /// Leader: the quorum connection each learner last spoke through.
    learner_conns: std::collections::BTreeMap<i64, PeerConn>,
    /// When each peer's notification was last heard, ms (a forced recovery is refused while a
    /// voter answers).
    voters_heard: std::collections::BTreeMap<i64, u64>,
    out: VecDeque<Output>,
}

/// A change the replica makes to the core.
#[derive(Debug)]
enum CoreChange {
    Role(Role, VoterSet, Option<Box<Database>>),
    /// Leaving a learner's role: when it last heard from its leader.
    LeaderContact(u64),
    Event(Event),
}

impl Replica {
    /// Starts looking for a leader. `db` is the database the server starts from: a
    /// reconfiguration in its log newer than the configuration in force is pending.
    pub(super) fn start(
        cfg: ReplicaConfig,
        epochs: (i64, i64),
        log: LogPosition,
        db: &Database,
        now: Now,
    ) -> Replica {
        let verifier = QuorumVerifier::from_config(&cfg.config);
        let data = PeerData { last_logged_zxid: log.durable, current_epoch: epochs.1 };
        let fle = Box::new(FastLeaderElection::new(
            ElectionConfig::new(cfg.my_sid, &cfg.config),
            data,
            now.mono_ms(),
        ));
        let mut r = Replica {
            verifier,
            epochs,
            epoch_writes: VecDeque::new(),
            machine: 0,
            log,
            requested: log.durable,
            log_jobs: 0,
            fle,
            state: State::Looking,
            next_conn: 1,
            decision: None,
            reloading: None,
            parked: Vec::new(),
            conns: BTreeSet::new(),
            peers_down: BTreeSet::new(),
            read_only_at: None,
            snap_streams: Vec::new(),
            watching: BTreeSet::new(),
            learner_batch: None,
            counters: ReplicaCounters::default(),
            election_time: Summary::default(),
            looking_since: 0,
            leading_since: None,
            synced_told: BTreeSet::new(),
            pending: None,
            activation: None,
            for_core: VecDeque::new(),
            snap_next: false,
            last_divergence_ms: None,
            handover: None,
            recovery: None,
            voters_heard: std::collections::BTreeMap::new(),
            learner_conns: std::collections::BTreeMap::new(),
            out: VecDeque::new(),
            cfg,
        };
        r.note_logged_config(db);
        r.look("starting", now, true);
        r
    }

    // ---------------------------------------------------------------------------------------
    // What the driver and the admin side read.

    /// This server's id.
    pub fn my_sid(&self) -> i64 {
        self.cfg.my_sid
    }

    /// The configuration in force.
    pub fn config(&self) -> &QuorumConfig {
        &self.cfg.config
    }

    /// Apache's ensemble counters.
    pub fn counters(&self) -> &ReplicaCounters {
        &self.counters
    }

    /// The gauges, while this server is `serving` clients (Apache registers them with a running
    /// server only).
    pub fn gauges(&self, serving: bool, now: Now) -> ReplicaGauges {
        if !serving {
            return ReplicaGauges::default();
        }
        ReplicaGauges {
            quorum_size: Some(self.verifier.voters().len() as u64),
            leader_uptime_ms: self.leading_since.map(|since| now.mono_ms().saturating_sub(since)),
        }
    }

    /// Zeroes the counters and the election summary (`srst`).
    pub fn reset_counters(&mut self) {
        self.counters = ReplicaCounters::default();
        self.election_time = Summary::default();
    }

    /// Apache's `election_time` summary as of `now`.
    pub fn election_timing(&self, now: Now) -> Timing {
        Timing::read("election_time", Detail::Basic, &self.election_time, now.mono_ms())
    }

    /// Whether this server leads, its epoch established or not ([`Self::view`] says leading
    /// only once it is).
    pub fn is_leading(&self) -> bool {
        matches!(self.state, State::Leading(_))
    }

    /// The ensemble as the AdminServer shows it (`leader`, `voting_view`, `zabstate`).
    pub fn view(&self) -> crate::view::EnsembleView {
        let (leading, leader_sid, zab_state) = match &self.state {
            State::Looking | State::Connecting { .. } => (false, None, "election"),
            State::Leading(l) if l.is_established() => (true, Some(self.cfg.my_sid), "broadcast"),
            State::Leading(l) if l.epoch().is_some() => (false, None, "synchronization"),
            State::Leading(_) => (false, None, "discovery"),
            State::Learning { learner, .. } if learner.is_up_to_date() => {
                (false, Some(learner.leader_sid()), "broadcast")
            }
            State::Learning { learner, .. } if learner.epoch().is_some() => (false, None, "synchronization"),
            State::Learning { .. } => (false, None, "discovery"),
        };
        crate::view::EnsembleView {
            my_sid: self.cfg.my_sid,
            leading,
            leader_sid,
            observer: self.cfg.observer,
            zab_state,
            config: self.cfg.config.clone(),
        }
    }

    /// The leader's learner counts, when this server leads an established epoch.
    pub fn learner_counts(&self) -> Option<zk_quorum::zab::LearnerCounts> {
        match &self.state {
            State::Leading(l) if l.is_established() => Some(l.learner_counts()),
            _ => None,
        }
    }

    /// Whether this server leads an established epoch, or follows a leader it is up to date with.
    pub fn in_broadcast(&self) -> bool {
        match &self.state {
            State::Leading(l) => l.is_established(),
            State::Learning { learner, .. } => learner.is_up_to_date(),
            State::Looking | State::Connecting { .. } => false,
        }
    }

    /// The election's logical clock (its round).
    pub fn election_round(&self) -> i64 {
        self.fle.logical_clock()
    }

    /// When the replica's timers are next due, ms (what it adds to the core's), for tests
    /// that look for a timer that never stops being due.
    pub fn debug_timeout(&self) -> Option<u64> {
        self.poll_timeout()
    }

    // ---------------------------------------------------------------------------------------
    // Inputs.

    pub(super) fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`Self::handle_timeout`] is next due, ms.
    pub(super) fn poll_timeout(&self) -> Option<u64> {
        let mut t = match &self.state {
            State::Looking => self.fle.poll_timeout(),
            State::Leading(l) => l.poll_timeout(),
            State::Connecting { retry_at, .. } => *retry_at,
            State::Learning { learner, .. } => learner.poll_timeout(),
        };
        let mut add = |x: Option<u64>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        if matches!(self.state, State::Looking) && self.read_only_may_start() {
            add(self.read_only_at);
        }
        add(self.parked.iter().map(|(_, at)| at.saturating_add(self.init_ms())).min());
        add(self.handover.map(|h| h.deadline_ms));
        t
    }

    /// Whether read-only mode may begin now (its reload): no election decision or reload under
    /// way, and no truncation or reset pending, whose snapshots past a cut a reload could
    /// otherwise load and serve. The next input that clears them lets the timer fire.
    fn read_only_may_start(&self) -> bool {
        self.decision.is_none() && self.reloading.is_none() && self.log_jobs == 0
    }

    pub(super) fn handle_timeout(&mut self, now: Now, core: &mut ServerCore) {
        let ms = now.mono_ms();
        let limit = self.init_ms();
        let (keep, expired): (Vec<_>, Vec<_>) =
            self.parked.drain(..).partition(|(_, at)| ms.saturating_sub(*at) < limit);
        self.parked = keep;
        for (conn, _) in expired {
            debug!("held learner connection {conn} waited initLimit; closing it");
            self.out.push_back(Output::ClosePeer { conn });
        }
        match &mut self.state {
            State::Looking => {
                self.fle.handle_timeout(ms);
                if self.read_only_at.is_some_and(|t| t <= ms) && self.read_only_may_start() {
                    self.read_only_at = None;
                    self.reload(AfterReload::ReadOnly);
                }
            }
            State::Leading(l) => l.handle_timeout(ms),
            State::Learning { learner, .. } => learner.handle_timeout(ms),
            State::Connecting { leader, conn: None, attempt, retry_at: Some(at) } if *at <= ms => {
                let (leader, attempt) = (*leader, *attempt);
                self.dial(leader, attempt);
            }
            State::Connecting { .. } => {}
        }
        self.drain(now, core);
    }

    /// A learner takes the sessions its clients used since the last call, for its next PING
    /// reply. At the start of every input of the replica, the only place a PING is answered: a
    /// core input is not followed by a settle of its own (see [`super::Node::handle`]), so the
    /// sessions touched by then must be taken before the reply is made. Touches of a server not
    /// learning wait in the core for its next leader.
    fn absorb_touched(&mut self, core: &mut ServerCore) {
        if let State::Learning { learner, .. } = &mut self.state {
            core.drain_touched(|session, timeout| learner.touch(session, timeout));
        }
    }

    pub(super) fn handle(&mut self, now: Now, input: Input, core: &mut ServerCore) {
        self.absorb_touched(core);
        let ms = now.mono_ms();
        match input {
            Input::Core(_) | Input::Durable { .. } | Input::LogFailed { .. } => {
                unreachable!("the node routes core and log inputs itself")
            }
            Input::LogTruncated { zxid } => {
                self.log_jobs = self.log_jobs.saturating_sub(1);
                self.requested = self.requested.min(zxid);
                self.log.durable = self.log.durable.min(zxid);
                self.reload(AfterReload::Truncated(zxid));
                self.revote(now);
            }
            Input::LogReset { zxid } => {
                self.log_jobs = self.log_jobs.saturating_sub(1);
                self.requested = zxid;
                // A snapshot of the leader's replaced this server's: whatever asked for one (a
                // tree that disagreed, a TRUNC below the log's start) has it (helper-26, F2).
                self.snap_next = false;
                self.log = LogPosition { base: zxid, durable: zxid };
                match &mut self.state {
                    State::Learning { learner, .. } => learner.snapshot_loaded(zxid, ms),
                    // A SNAP's install that outlived its learner (the connection went while the
                    // snapshot was written): the vote still names the log as it was; it must
                    // name what this server has now, at once. The pending configuration, and so
                    // the quorums the election asks, must be the installed snapshot's too: a
                    // reload reads it, and the election starts again under its configuration
                    // (helper-20 found an election asking the quorum of a dropped snapshot's
                    // reconfiguration; the scenario `a_snap_after_a_trunc_below_replaces_the_
                    // pending_configuration_of_a_failed_epoch`). A decision already taken
                    // reloads anyway.
                    _ => {
                        self.revote(now);
                        if self.decision.is_none() {
                            // Every reload is issued with no log job outstanding, and leaving
                            // the learner's role dropped any reload it had under way.
                            debug_assert!(self.reloading.is_none(), "a reload under way across a log reset");
                            self.reload(AfterReload::Reset);
                        }
                    }
                }
            }
            Input::Reloaded { result, log, recent } => self.reloaded(now, result, log, recent),
            Input::EpochWritten { file, result } => self.epoch_written(now, file, result),
            Input::LogRead { req, read } => {
                if let State::Leading(l) = &mut self.state {
                    match read {
                        LogRead::Records(v) => l.log_read(req, v, ms),
                        LogRead::TooBig => l.log_read_too_big(req, ms),
                        LogRead::Missing => l.log_read_failed(req, ms),
                    }
                }
            }
            Input::Notification { from, notification } => self.notification(now, from, notification),
            Input::PeersDown(down) => {
                self.peers_down = down;
                self.fle.set_peers_down(self.peers_down.clone());
            }
            Input::LearnerConnected { conn } => match &mut self.state {
                State::Leading(l) => {
                    self.conns.insert(conn);
                    self.out.push_back(Output::AdmitLearner { conn });
                    l.learner_connected(conn, ms);
                }
                State::Looking if self.parked.len() < PARKED_MAX => {
                    debug!("a learner connected before the election here ended; holding it");
                    self.parked.push((conn, ms));
                }
                _ => {
                    debug!("quorum connection {conn} refused: not leading");
                    self.out.push_back(Output::ClosePeer { conn });
                }
            },
            Input::Dialed { conn, result } => self.dialed(now, conn, result),
            Input::Packet { conn, packet } => match &mut self.state {
                State::Leading(l) => l.handle_packet(conn, packet, ms),
                State::Learning { learner, conn: c, .. } if *c == conn => learner.handle_packet(packet, ms),
                _ => {}
            },
            Input::SnapshotReceived { conn, result } => self.snapshot_received(now, conn, result),
            Input::PeerClosed { conn, why } => self.peer_closed(now, conn, &why),
            Input::PeerDrained { conn } => {
                self.watching.remove(&conn);
                if let State::Leading(l) = &mut self.state {
                    l.conn_drained(conn, ms);
                }
            }
        }
        self.drain(now, core);
    }

    /// The log is durable through `zxid` (the core has counted it as this server's ACK).
    pub(super) fn durable(&mut self, zxid: i64, now: Now) {
        self.log.durable = self.log.durable.max(zxid);
        let ms = now.mono_ms();
        match &mut self.state {
            // A leader's own durability is counted by the core's ledger, once.
            State::Leading(_) => {}
            State::Learning { learner, .. } => learner.durable(zxid, ms),
            State::Looking | State::Connecting { .. } => {}
        }
    }

    /// The log refused records (a full disk): they will never be durable, so an election's
    /// decision waits no longer for them.
    pub(super) fn log_failed(&mut self, error: &zk_log::LogError) {
        if error.is_storage_full() {
            self.requested = self.log.durable;
        }
    }

    /// A core action: the quorum ones are carried out here; the rest are returned for the
    /// driver.
    pub(super) fn core_action(&mut self, now: Now, action: Action, core: &mut ServerCore) -> Option<Action> {
        let ms = now.mono_ms();
        match action {
            Action::Propose { payloads } => {
                for (zxid, payload) in payloads {
                    self.requested = self.requested.max(zxid);
                    if let State::Leading(l) = &mut self.state {
                        l.propose(zxid, payload, ms);
                        self.counters.proposal_count += 1;
                    }
                }
            }
            Action::Commit { zxid } => {
                if let State::Leading(l) = &mut self.state {
                    l.committed(zxid, ms);
                    self.counters.commit_count += 1;
                }
            }
            Action::CommitAndActivate { zxid, designated, config } => {
                if let State::Leading(l) = &mut self.state {
                    l.committed_and_activate(zxid, designated, ms);
                    self.counters.commit_count += 1;
                    // Once the machine's packets (COMMITANDACTIVATE among them) are out: a
                    // leader handing over leaves its role, and its machine with it.
                    self.activation = Some((zxid, config, designated));
                }
            }
            Action::Forward { session, cxid, op, body, auth } => {
                if let State::Learning { learner, .. } = &mut self.state {
                    learner.forward_with_auth(ForwardedRequest { session_id: session, cxid, op, body }, auth);
                }
            }
            Action::Revalidate { session, timeout_ms } => {
                if let State::Learning { learner, .. } = &mut self.state {
                    learner.revalidate(session, timeout_ms);
                }
            }
            Action::SyncReady { to } => {
                if let State::Leading(l) = &mut self.state {
                    l.sync_ready(to, ms);
                }
            }
            Action::StepDown { reason, diverged } => {
                if diverged {
                    // The first divergence in a while is rebuilt from disk (a lossy snapshot is
                    // set aside there); one that comes back means the disk's state disagrees
                    // too, and only a snapshot of the leader's replaces it whole.
                    let ms = now.mono_ms();
                    let recent =
                        self.last_divergence_ms.is_some_and(|t| ms.saturating_sub(t) < DIVERGENCE_MEMORY_MS);
                    // Kept if set: a TRUNC below the log's start asked for one too.
                    self.snap_next |= recent;
                    self.last_divergence_ms = Some(ms);
                    if recent {
                        warn!("the tree disagreed again: the next sync asks the leader for a SNAP");
                    }
                }
                if !matches!(self.state, State::Looking) || self.decision.is_some() {
                    warn!("stepping down: {reason}");
                    self.look(&reason, now, false);
                }
            }
            Action::Persist { records, inline } => {
                debug_assert!(!inline, "an ensemble member's core never commits inline");
                if let Some(z) = records.last_zxid() {
                    self.requested = self.requested.max(z);
                }
                return Some(Action::Persist { records, inline });
            }
            other => return Some(other),
        }
        self.drain(now, core);
        None
    }

    /// After every input: the replica's changes to the core, in order; the core's touched
    /// sessions for the leader; the synced followers for reconfiguration; what the Zab machine
    /// asks.
    pub(super) fn settle(&mut self, now: Now, core: &mut ServerCore) {
        loop {
            while let Some(c) = self.for_core.pop_front() {
                match c {
                    CoreChange::Role(role, voters, db) => core.set_role(role, voters, db.map(|b| *b), now),
                    CoreChange::LeaderContact(ms) => core.note_leader_contact(ms),
                    CoreChange::Event(ev) => core.handle(now, ev),
                }
            }
            if let Some((zxid, config, designated)) = self.activation.take() {
                self.activate(zxid, &config, Some(designated), now);
            }
            // The core prepares reconfigurations against the followers synced with this leader.
            if let State::Leading(l) = &mut self.state {
                l.set_database_bytes(snapshot_bytes_estimate(core.database()));
                if l.is_established() && !l.synced_followers_are(&self.synced_told) {
                    let synced = l.synced_followers();
                    if synced != self.synced_told {
                        self.synced_told = synced.clone();
                        self.for_core.push_back(CoreChange::Event(Event::SyncedFollowers(synced)));
                    }
                }
            }
            self.drain(now, core);
            if self.for_core.is_empty() {
                break;
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Elections.

    fn init_ms(&self) -> u64 {
        self.cfg.tick_ms * self.cfg.init_limit.max(1)
    }

    fn election_config(&self) -> ElectionConfig {
        let mut ecfg = ElectionConfig::new(self.cfg.my_sid, &self.cfg.config);
        ecfg.pending_verifier = self.pending.as_ref().map(QuorumVerifier::from_config);
        ecfg
    }

    /// Back to LOOKING: the core stops serving, and a new election round starts.
    fn look(&mut self, why: &str, now: Now, first: bool) {
        self.look_voting(why, now, first, None);
    }

    /// [`Self::look`], this round's first vote for `candidate` (leader, zxid, epoch) rather than
    /// this server: a leader that handed over names its successor (one round only).
    fn look_voting(&mut self, why: &str, now: Now, first: bool, candidate: Option<(i64, i64, i64)>) {
        self.handover = None;
        self.learner_conns.clear();
        info!("looking for a leader ({why})");
        self.snap_streams.clear();
        self.flush_parked();
        for conn in std::mem::take(&mut self.conns) {
            self.out.push_back(Output::ClosePeer { conn });
        }
        let me = self.cfg.my_sid;
        // A learner may have lost its leader by the leader's silence, noticed only after
        // syncLimit: the connections its core keeps count their time from the last word heard
        // (a leader that carries on without this server expires sessions on its own clock).
        if let State::Learning { learner, .. } = &self.state {
            self.for_core.push_back(CoreChange::LeaderContact(learner.last_heard_ms().min(now.mono_ms())));
        }
        self.for_core.push_back(CoreChange::Role(Role::Down, VoterSet::solo(me), None));
        let data = PeerData { last_logged_zxid: self.log.durable, current_epoch: self.epochs.1 };
        let ms = now.mono_ms();
        self.counters.looking_count += 1;
        self.looking_since = ms;
        self.leading_since = None;
        if !first {
            // The same machine, under the configuration in force: its round only grows.
            let ecfg = self.election_config();
            self.fle.set_config(ecfg);
            match candidate {
                Some(c) => self.fle.start_election_for(data, c, ms),
                None => self.fle.start_election(data, ms),
            }
        }
        self.fle.set_peers_down(self.peers_down.clone());
        self.decision = None;
        self.reloading = None;
        self.machine += 1;
        self.state = State::Looking;
        // As Apache: read-only service starts once the election took max(2 s, a tick).
        self.read_only_at = self.cfg.read_only_mode.then(|| ms + self.cfg.tick_ms.max(READ_ONLY_DELAY_MS));
    }

    fn notification(&mut self, now: Now, from: i64, n: Notification) {
        if self.voters_heard.len() < PARKED_MAX || self.voters_heard.contains_key(&from) {
            self.voters_heard.insert(from, now.mono_ms());
        }
        let looking =
            matches!(self.state, State::Looking) && self.decision.is_none() && self.reloading.is_none();
        if looking {
            if let Some(c) = self.newer_config(&n) {
                // As Apache's members with reconfiguration on: a peer's newer configuration is
                // adopted (a server that was away during a reconfiguration learns it here), and
                // the election starts over under it.
                info!("server {from} has configuration version {:#x}: adopting it", c.version);
                self.install(c);
                self.look("newer configuration", now, false);
                return;
            }
        }
        if tracing::enabled!(tracing::Level::TRACE) {
            tracing::trace!("notification from {from}: {n:?}");
        }
        // Settled, the machine answers a looking peer with the vote it decided and its own
        // round (Apache's receiver does the same).
        self.fle.handle_notification(from, n, now.mono_ms());
    }

    /// The log moved while this server elects (a truncation or reset finished): an election
    /// under way starts again with the vote naming the log as it is now, so this server never
    /// wins on history it no longer has.
    fn revote(&mut self, now: Now) {
        if matches!(self.state, State::Looking)
            && self.decision.is_none()
            && self.fle.state() == PeerState::Looking
        {
            let data = PeerData { last_logged_zxid: self.log.durable, current_epoch: self.epochs.1 };
            self.fle.start_election(data, now.mono_ms());
        }
    }

    fn maybe_act_on_decision(&mut self) {
        // The next role starts from what is on disk: every record handed to the log durable,
        // no truncation or reset pending, and no epoch file write of the last role still under
        // way (its promise must be in the epochs the next machine starts from).
        if self.reloading.is_some()
            || self.log_jobs > 0
            || self.log.durable < self.requested
            || !self.epoch_writes.is_empty()
        {
            return;
        }
        if let Some((leader, state)) = self.decision.take() {
            info!("election: leader {leader}, this server {state:?}");
            self.read_only_at = None;
            self.reload(AfterReload::Decided { leader, state });
        }
    }

    fn reload(&mut self, after: AfterReload) {
        self.reloading = Some(after);
        self.out.push_back(Output::Reload { window: zk_quorum::zab::DEFAULT_COMMITTED_LOG_MAX });
    }

    fn reloaded(
        &mut self,
        now: Now,
        result: Result<Box<Database>, String>,
        log: LogPosition,
        recent: Vec<(i64, Bytes)>,
    ) {
        let Some(after) = self.reloading.take() else {
            debug!("a reload nobody waits for; dropped");
            return;
        };
        let db = match result {
            Ok(db) => db,
            Err(e) => {
                // The disk no longer rebuilds a state this server can vouch for: as at start-up,
                // it stops rather than serve or vote with a hole in its history.
                error!("cannot reload the database from disk: {e}");
                self.for_core.push_back(CoreChange::Event(Event::Fatal {
                    reason: format!("cannot reload the database from disk: {e}"),
                }));
                return;
            }
        };
        self.log = log;
        // The decision waited for every record handed to the log (a TRUNC blocks the learner):
        // what the log holds now is all there is.
        self.requested = log.durable;
        self.note_logged_config(&db);
        let db_bytes = snapshot_bytes_estimate(&db);
        let me = self.cfg.my_sid;
        self.for_core.push_back(CoreChange::Role(Role::Down, VoterSet::solo(me), Some(db)));
        self.for_core.push_back(CoreChange::Event(Event::Membership(self.membership())));
        let ms = now.mono_ms();
        match after {
            AfterReload::Reset => self.revote(now),
            AfterReload::Truncated(zxid) => {
                if let State::Learning { learner, .. } = &mut self.state {
                    learner.truncated(zxid, ms);
                }
            }
            AfterReload::ReadOnly => {
                if matches!(self.state, State::Looking) && self.decision.is_none() {
                    info!("no quorum yet: serving read-only clients");
                    self.for_core.push_back(CoreChange::Role(Role::ReadOnly, VoterSet::solo(me), None));
                } else {
                    self.maybe_act_on_decision();
                }
            }
            AfterReload::Decided { leader, state } => {
                // As Apache: the election's time is counted by the servers that then lead or follow.
                if matches!(state, PeerState::Leading | PeerState::Following) {
                    self.election_time.observe(ms.saturating_sub(self.looking_since) * 1_000, ms);
                }
                match state {
                    PeerState::Leading => self.lead(now, recent, db_bytes),
                    PeerState::Following | PeerState::Observing => {
                        self.flush_parked();
                        // A server outside the configuration decides like an observer (it has
                        // no vote) but follows as the participant it is, a non-voting follower,
                        // as Apache's do.
                        self.state = State::Connecting { leader, conn: None, attempt: 0, retry_at: None };
                        self.dial(leader, 0);
                    }
                    PeerState::Looking => self.look("undecided", now, false),
                }
            }
        }
    }

    fn local_state(&self) -> LocalState {
        let last = self.log.durable;
        LocalState {
            accepted_epoch: self.epochs.0 as u32,
            current_epoch: self.epochs.1 as u32,
            last_logged_zxid: last,
            first_logged_zxid: (last > self.log.base).then_some(self.log.base + 1),
        }
    }

    fn zab_config(&self) -> ZabConfig {
        let mut cfg = ZabConfig::new(
            self.cfg.my_sid,
            self.verifier.clone(),
            self.cfg.tick_ms,
            self.cfg.init_limit,
            self.cfg.sync_limit,
        );
        cfg.config_string = Bytes::from(self.cfg.config.to_config_string());
        cfg.committed_log_max = self.cfg.committed_log_max;
        cfg.sync_piece_bytes = self.cfg.sync_piece_bytes.max(1);
        // A PROPOSAL and its COMMIT at least.
        cfg.sync_piece_packets = self.cfg.sync_piece_packets.max(2);
        cfg.reconfig_enabled = self.cfg.reconfig_enabled;
        if let Some(p) = &self.pending {
            cfg.pending_verifier = Some(QuorumVerifier::from_config(p));
            cfg.config_string = Bytes::from(p.to_config_string());
        }
        cfg
    }

    fn lead(&mut self, now: Now, recent: Vec<(i64, Bytes)>, db_bytes: u64) {
        // The decision waited for the log and the epoch files: the leader starts from what is
        // on disk, and its machine from the epochs the files hold.
        assert!(
            self.log_jobs == 0 && self.epoch_writes.is_empty() && self.log.durable >= self.requested,
            "a leader starts from a settled disk (log jobs {}, epoch writes {}, durable 0x{:x} of 0x{:x})",
            self.log_jobs,
            self.epoch_writes.len(),
            self.log.durable,
            self.requested
        );
        let ms = now.mono_ms();
        self.leading_since = Some(ms);
        let local = self.local_state();
        self.machine += 1;
        let mut leader = Leader::new(self.zab_config(), local, recent, ms);
        // DIFFs from the log are bounded by a share of what a snapshot would be.
        leader.set_database_bytes(db_bytes);
        self.state = State::Leading(Box::new(leader));
        // Leading, its history is the ensemble's: no snapshot of another's is wanted.
        self.snap_next = false;
        let limit = self.init_ms();
        for (conn, at) in std::mem::take(&mut self.parked) {
            if ms.saturating_sub(at) <= limit {
                self.conns.insert(conn);
                self.out.push_back(Output::AdmitLearner { conn });
                if let State::Leading(l) = &mut self.state {
                    l.learner_connected(conn, ms);
                }
            } else {
                self.out.push_back(Output::ClosePeer { conn });
            }
        }
    }

    fn flush_parked(&mut self) {
        for (conn, _) in std::mem::take(&mut self.parked) {
            self.out.push_back(Output::ClosePeer { conn });
        }
    }

    /// Connects to `leader`'s quorum port; `attempt` counts the tries so far.
    fn dial(&mut self, leader: i64, attempt: u32) {
        let conn = self.next_conn;
        self.next_conn += 1;
        self.state = State::Connecting { leader, conn: Some(conn), attempt, retry_at: None };
        self.out.push_back(Output::Dial { conn, leader });
    }

    fn dialed(&mut self, now: Now, conn: PeerConn, result: Result<(), String>) {
        let State::Connecting { leader, conn: Some(c), attempt, .. } = self.state else {
            if result.is_ok() {
                self.out.push_back(Output::ClosePeer { conn });
            }
            return;
        };
        if c != conn {
            if result.is_ok() {
                self.out.push_back(Output::ClosePeer { conn });
            }
            return;
        }
        let ms = now.mono_ms();
        match result {
            Ok(()) => {
                self.conns.insert(conn);
                self.machine += 1;
                let mut learner =
                    Learner::new(self.zab_config(), leader, self.cfg.observer, self.local_state(), ms);
                if self.snap_next {
                    learner.request_snapshot();
                }
                learner.connected(ms);
                self.state = State::Learning { learner: Box::new(learner), conn, attempt };
            }
            // A leader just elected may not listen yet (an Apache leader waits out its
            // election's finalize time first): a refused connection is tried again a few times,
            // as Apache's learners do, before electing again. Electing again at once would start
            // a new round every few milliseconds, and each new round restarts the election on
            // Apache's servers, so their leader would never get to listen.
            Err(e) if attempt + 1 < LEARNER_CONNECT_TRIES => {
                debug!("cannot reach leader {leader} yet: {e}");
                self.retry_later(leader, attempt + 1, ms);
            }
            Err(e) => {
                warn!("cannot reach leader {leader}: {e}");
                self.look("leader unreachable", now, false);
            }
        }
    }

    fn retry_later(&mut self, leader: i64, attempt: u32, ms: u64) {
        self.state =
            State::Connecting { leader, conn: None, attempt, retry_at: Some(ms + LEARNER_CONNECT_RETRY_MS) };
    }

    fn peer_closed(&mut self, now: Now, conn: PeerConn, why: &str) {
        self.conns.remove(&conn);
        self.watching.remove(&conn);
        self.parked.retain(|(c, _)| *c != conn);
        let ms = now.mono_ms();
        match &mut self.state {
            State::Leading(l) => {
                info!("learner connection {conn} closed: {why}");
                l.learner_disconnected(conn, ms);
            }
            State::Learning { conn: c, learner, attempt } if *c == conn => {
                let (leader, attempt) = (learner.leader_sid(), *attempt);
                if learner.epoch().is_none() && attempt + 1 < LEARNER_CONNECT_TRIES {
                    debug!("leader {leader} closed before its handshake ({why}); trying again");
                    self.retry_later(leader, attempt + 1, ms);
                } else {
                    warn!("connection to the leader closed: {why}");
                    self.look("lost the leader", now, false);
                }
            }
            State::Connecting { conn: Some(c), .. } if *c == conn => {
                self.dialed(now, conn, Err(why.to_owned()))
            }
            _ => {}
        }
    }

    fn epoch_written(&mut self, now: Now, file: EpochFile, result: Result<(), String>) {
        let Some((asked, epoch, machine)) = self.epoch_writes.pop_front() else {
            debug!("an epoch file write nobody asked for; ignored");
            return;
        };
        assert_eq!(asked, file, "the driver answers the epoch file writes in the order asked");
        if machine == recovery::RECOVERY_WRITES {
            match &result {
                Ok(()) if file == EpochFile::Accepted => self.epochs.0 = i64::from(epoch),
                Ok(()) => self.epochs.1 = i64::from(epoch),
                Err(e) => error!("cannot write an epoch file: {e}"),
            }
            self.recovery_epoch_written(now, result.is_ok());
            if matches!(self.state, State::Looking) && self.decision.is_some() {
                self.maybe_act_on_decision();
            }
            return;
        }
        if let Err(e) = result {
            error!("cannot write an epoch file: {e}");
            return self.look("epoch file failed", now, false);
        }
        match file {
            EpochFile::Accepted => self.epochs.0 = i64::from(epoch),
            EpochFile::Current => self.epochs.1 = i64::from(epoch),
        }
        if machine != self.machine {
            // Asked by a machine that is gone: the file is what it is; a decision may have
            // waited for it.
            if matches!(self.state, State::Looking) && self.decision.is_some() {
                self.maybe_act_on_decision();
            }
            return;
        }
        let ms = now.mono_ms();
        match &mut self.state {
            State::Leading(l) => l.epoch_persisted(ms),
            State::Learning { learner, .. } => learner.epoch_persisted(ms),
            _ => {}
        }
    }

    fn persist_epoch(&mut self, file: EpochFile, epoch: u32) {
        debug_assert!(
            self.epoch_writes.iter().all(|w| w.2 != self.machine),
            "a Zab machine waits for each epoch write before the next"
        );
        self.epoch_writes.push_back((file, epoch, self.machine));
        self.out.push_back(Output::PersistEpoch { file, epoch });
    }

    // ---------------------------------------------------------------------------------------
    // The Zab machines.

    /// Carries out what the election machine and the Zab machine of the moment ask, until
    /// neither has more.
    fn drain(&mut self, now: Now, core: &mut ServerCore) {
        loop {
            let mut progressed = false;
            while let Some(a) = self.fle.poll_action() {
                progressed = true;
                match a {
                    ElectionAction::Send { to, notification } => {
                        self.out.push_back(Output::SendNotification { to, notification })
                    }
                    ElectionAction::Decided { leader, state, vote } => {
                        if state == PeerState::Observing && !self.cfg.observer {
                            // A server outside the configuration decides like an observer (it
                            // has no vote) but follows as the participant it is.
                            self.fle.set_serving(PeerState::Following, leader, vote.peer_epoch);
                        }
                        if matches!(self.state, State::Looking) {
                            // The database is reloaded from the log, and the log's last zxid is
                            // what the leader (or this server, leading) syncs from: both must
                            // be the same zxid, so appends still queued finish first.
                            self.decision = Some((leader, state));
                        }
                    }
                }
            }
            if matches!(self.state, State::Looking) && self.decision.is_some() {
                self.maybe_act_on_decision();
            }
            loop {
                let action = match &mut self.state {
                    State::Leading(l) => l.poll_action().map(Either::Leader),
                    State::Learning { learner, .. } => learner.poll_action().map(Either::Learner),
                    _ => None,
                };
                match action {
                    Some(Either::Leader(a)) => self.leader_action(a, now, core),
                    Some(Either::Learner(a)) => self.learner_action(a, now, core),
                    None => break,
                }
                progressed = true;
            }
            if self.step_snapshots(now, core) {
                progressed = true;
            }
            if self.step_handover(now, core) {
                progressed = true;
            }
            if !progressed {
                return;
            }
        }
    }

    fn leader_action(&mut self, a: LeaderAction, now: Now, core: &mut ServerCore) {
        match a {
            LeaderAction::Send { conn, packet } => {
                // A learner's sync opens with one of these: Apache counts SNAP apart from the rest.
                match packet.packet_type {
                    t if t == PacketType::Snap as i32 => self.counters.snap_count += 1,
                    t if t == PacketType::Diff as i32 || t == PacketType::Trunc as i32 => {
                        self.counters.diff_count += 1
                    }
                    _ => {}
                }
                self.out.push_back(Output::SendPacket { conn, packet })
            }
            LeaderAction::SendRaw { conn, bytes } => self.out.push_back(Output::SendRaw { conn, bytes }),
            LeaderAction::Close { conn, reason } => {
                info!("closing learner connection {conn}: {reason}");
                self.conns.remove(&conn);
                self.watching.remove(&conn);
                self.out.push_back(Output::ClosePeer { conn });
            }
            LeaderAction::PersistAcceptedEpoch(e) => self.persist_epoch(EpochFile::Accepted, e),
            LeaderAction::PersistCurrentEpoch(e) => self.persist_epoch(EpochFile::Current, e),
            LeaderAction::ReadLog { req, from_zxid, through_zxid, max_bytes } => {
                self.out.push_back(Output::ReadLog {
                    req,
                    from: from_zxid,
                    through: through_zxid,
                    max_records: DIFF_RECORDS_MAX,
                    max_bytes,
                })
            }
            LeaderAction::AckReset { sid, to } => {
                self.for_core.push_back(CoreChange::Event(Event::AckReset { sid, to }))
            }
            LeaderAction::SerializeSnapshot { req, zxid } => {
                // From the core's live state (at least `zxid`), a few steps at a time while writes
                // go on: the learner replays the proposals after `zxid` idempotently, as it does
                // Apache's fuzzy snapshots. The leader holds those proposals until it ends.
                let conn = match &self.state {
                    State::Leading(l) => l.snapshot_conn(req),
                    _ => None,
                };
                if let Some(conn) = conn {
                    let cursor = core.database().apache_snap_begin();
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
                if self.cfg.reconfig_enabled {
                    if let Some(c) = parse_config(&stamped).filter(|c| c.version > self.cfg.config.version) {
                        self.install(c);
                    }
                }
                self.fle.set_serving(PeerState::Leading, self.cfg.my_sid, i64::from(epoch));
                let voters = VoterSet::with_verifier(self.cfg.my_sid, self.verifier.clone());
                self.for_core.push_back(CoreChange::Role(Role::Leader { epoch }, voters, None));
                // The core learns the configuration (again, when `install` told it already).
                self.for_core.push_back(CoreChange::Event(Event::Membership(self.membership())));
                self.synced_told.clear();
            }
            // The leader's own durability is counted once, by the core's report of its log.
            LeaderAction::Ack { sid, .. } if sid == self.cfg.my_sid => {}
            LeaderAction::Ack { sid, zxid } => {
                self.for_core.push_back(CoreChange::Event(Event::Ack { sid, zxid }))
            }
            LeaderAction::Forwarded { sid, conn, request, authinfo } => {
                self.note_learner_conn(sid, conn);
                self.for_core.push_back(CoreChange::Event(forwarded_event(conn, request, authinfo)))
            }
            LeaderAction::Touch { sessions } => self.for_core.push_back(CoreChange::Event(Event::Touch {
                sessions: sessions.into_iter().map(|t| (t.session_id, t.timeout_ms)).collect(),
            })),
            LeaderAction::Revalidate { conn, session, .. } => {
                let sid = match &self.state {
                    State::Leading(l) => l.learner_sid(conn),
                    _ => None,
                };
                if let Some(sid) = sid {
                    self.note_learner_conn(sid, conn);
                }
                let db = core.database();
                let valid = db.sessions().contains(session) && !db.expiry().is_closing(session);
                if valid {
                    self.for_core.push_back(CoreChange::Event(Event::SessionOwner { session, from: conn }));
                }
                if let State::Leading(l) = &mut self.state {
                    l.revalidate_reply(conn, session, valid);
                }
            }
            LeaderAction::StepDown { reason } => {
                warn!("stepping down: {reason}");
                self.look("stepped down", now, false);
            }
            LeaderAction::HandoverAcked { sid, zxid } => self.handover_acked(sid, zxid, now, core),
            LeaderAction::LeadershipRequested { sid } => {
                let answer = self.hand_over(now, Some(sid), core);
                info!("server {sid} asked for the leadership: {answer}");
            }
        }
    }

    fn learner_action(&mut self, a: LearnerAction, now: Now, core: &mut ServerCore) {
        let conn = match &self.state {
            State::Learning { conn, .. } => *conn,
            _ => return,
        };
        match a {
            LearnerAction::Send(packet) => self.out.push_back(Output::SendPacket { conn, packet }),
            LearnerAction::PersistAcceptedEpoch(e) => self.persist_epoch(EpochFile::Accepted, e),
            LearnerAction::PersistCurrentEpoch(e) => self.persist_epoch(EpochFile::Current, e),
            LearnerAction::Truncate { after_zxid } if after_zxid < self.log.base => {
                self.truncation_below(after_zxid, conn, now);
            }
            LearnerAction::Truncate { after_zxid } => {
                self.no_learner_batch("a truncation");
                self.log_jobs += 1;
                self.out.push_back(Output::TruncateLog { after: after_zxid });
            }
            // The connection's reader is loading it already; see `snapshot_received`.
            LearnerAction::ReceiveSnapshot { zxid } => debug!("receiving a snapshot at 0x{zxid:x}"),
            LearnerAction::Log { zxid, payload } => {
                // Logged as it came: decoded only when it commits.
                if zk_log::format::payload_zxid(&payload) != Some(zxid) {
                    warn!("proposal 0x{zxid:x} carries a txn header of another zxid");
                    return self.look("malformed proposal", now, false);
                }
                // Proposals that arrived together go to the log as one batch.
                if let Some(b) = self.learner_batch.as_mut() {
                    if b.bytes() < PERSIST_MERGE_BYTES && b.push_payload(&payload).is_ok() {
                        self.requested = self.requested.max(zxid);
                        return;
                    }
                }
                self.flush_learner_batch(core);
                let mut b = zk_log::RecordBatch::new();
                match b.push_payload(&payload) {
                    Ok(()) => {
                        self.requested = self.requested.max(zxid);
                        self.learner_batch = Some(b);
                    }
                    Err(e) => {
                        error!("cannot log proposal 0x{zxid:x}: {e}");
                        self.look("log failed", now, false);
                    }
                }
            }
            LearnerAction::Commit { payload, .. } => match decode_payload(&payload) {
                Some((hdr, txn, digest)) => {
                    self.for_core.push_back(CoreChange::Event(Event::Committed { hdr, txn, digest }))
                }
                None => self.look("undecodable commit", now, false),
            },
            LearnerAction::SyncDone => self.for_core.push_back(CoreChange::Event(Event::SyncDone)),
            LearnerAction::Unproposed { through, moved } => {
                self.for_core.push_back(CoreChange::Event(Event::Unproposed { through, moved }))
            }
            LearnerAction::Revalidated { session, valid } => {
                debug!("session 0x{session:x} revalidated: {valid}");
                self.for_core.push_back(CoreChange::Event(Event::Revalidated { session, valid }));
            }
            LearnerAction::Activate { zxid, config, designated } => {
                self.activate(zxid, &config, designated, now)
            }
            LearnerAction::UpToDate => {
                // The leader's NEWLEADER said which configuration is in force (activated just
                // before): what this server's own log had pending is settled either way.
                self.pending = None;
                self.snap_next = false;
                info!("up to date with leader: serving");
                let (leader, epoch) = match &self.state {
                    State::Learning { learner, .. } => (learner.leader_sid(), learner.epoch().unwrap_or(0)),
                    _ => (0, 0),
                };
                let kind = if self.cfg.observer { PeerState::Observing } else { PeerState::Following };
                self.fle.set_serving(kind, leader, i64::from(epoch));
                let voters = VoterSet::with_verifier(self.cfg.my_sid, self.verifier.clone());
                self.for_core.push_back(CoreChange::Role(
                    Role::Learner { observer: self.cfg.observer },
                    voters,
                    None,
                ));
            }
            LearnerAction::Disconnect { reason } => {
                warn!("leaving the leader: {reason}");
                self.look("disconnected", now, false);
            }
        }
    }

    /// A TRUNC below where this server's log starts: the start is a snapshot received from a
    /// leader whose epoch never became established, and a log cannot be cut inside a snapshot.
    ///
    /// Nothing on disk changes. Dropping that snapshot for an older one would forget
    /// transactions this server holds that are committed (they are below the cut, in the
    /// leader's history too), while its currentEpoch, from the failed epoch, still ranks its vote
    /// high: in a five-server ensemble it could then win an election over servers of an earlier
    /// epoch and lead without them (review of issue 29, helper-23, finding 1; the scenario
    /// `a_trunc_below_keeps_the_snapshot_until_the_leaders_replaces_it`). Instead the server
    /// connects again asking this leader for a SNAP, which replaces the snapshot whole, and the
    /// snapshots past it go once that is durable (Output::InstallSnapshot). A zkrs leader
    /// honours the request. An Apache leader ignores it and sends the same TRUNC: the server then
    /// keeps what it has and asks again after initLimit, for as long as that leader leads
    /// (Apache's own server cannot go on either: it exits, "Not able to truncate the log", or,
    /// with no log file to cut, elects again and is told the same). The scenario
    /// `a_leader_that_ignores_the_snap_request_never_makes_the_learner_forget` runs it.
    fn truncation_below(&mut self, after_zxid: i64, conn: PeerConn, now: Now) {
        self.no_learner_batch("a truncation below the log's start");
        let State::Learning { learner, .. } = &self.state else { unreachable!("a learner's TRUNC") };
        let leader = learner.leader_sid();
        self.conns.remove(&conn);
        self.out.push_back(Output::ClosePeer { conn });
        if self.snap_next {
            error!(
                "leader {leader} sent TRUNC 0x{after_zxid:x}, below the start of this log (0x{:x}), \
                 though this server asked it for a snapshot (an Apache leader does not take the \
                 request): keeping this server's data, and asking again in {} ms",
                self.log.base,
                self.init_ms()
            );
            let at = now.mono_ms() + self.init_ms();
            self.state = State::Connecting { leader, conn: None, attempt: 0, retry_at: Some(at) };
        } else {
            warn!(
                "leader {leader} sent TRUNC 0x{after_zxid:x}, below the start of this log (0x{:x}, \
                 a snapshot from an epoch that failed): keeping it, and asking the leader for a \
                 snapshot to replace it",
                self.log.base
            );
            self.snap_next = true;
            self.dial(leader, 0);
        }
    }

    /// A TRUNC comes before any proposal of its sync, and
    /// the decision that made this learner waited until every earlier proposal was durable: no
    /// gathered batch can be waiting. (Its records would reach the log after the truncation,
    /// which goes out first.)
    fn no_learner_batch(&self, before: &str) {
        assert!(self.learner_batch.is_none(), "proposals gathered before {before} of the log");
    }

    /// Hands the learner's gathered proposals to the log (through the core, which counts them
    /// towards its next snapshot). The node calls it once its other outputs are taken, so the
    /// proposals of every packet handled before the driver polls (all that arrived together) go
    /// to the log as one batch: a batch per packet let the log's thread sync the first alone.
    /// True when there was a batch.
    pub(super) fn flush_learner_batch(&mut self, core: &mut ServerCore) -> bool {
        match self.learner_batch.take() {
            Some(b) => {
                core.persist_replicated(b);
                true
            }
            None => false,
        }
    }

    fn snapshot_received(&mut self, now: Now, conn: PeerConn, result: Result<Box<Database>, String>) {
        let State::Learning { conn: c, .. } = &self.state else { return };
        if *c != conn {
            return;
        }
        match result {
            Ok(db) => {
                let zxid = db.last_applied_zxid();
                let me = self.cfg.my_sid;
                // The received database replaces this one; a snapshot of the old one under way is
                // abandoned by the core.
                self.for_core.push_back(CoreChange::Role(Role::Down, VoterSet::solo(me), Some(db)));
                self.log_jobs += 1;
                self.out.push_back(Output::InstallSnapshot { zxid });
            }
            Err(e) => {
                warn!("the snapshot from the leader did not load: {e}");
                self.look("the snapshot did not load", now, false);
            }
        }
    }

    /// Steps every snapshot stream whose connection may take more, and asks for a report when
    /// a connection the leader machine is waiting on drains; true if anything stepped.
    fn step_snapshots(&mut self, now: Now, core: &ServerCore) -> bool {
        let State::Leading(l) = &mut self.state else {
            self.snap_streams.clear();
            self.watching.clear();
            return false;
        };
        let ms = now.mono_ms();
        let mut stepped = false;
        let mut i = 0;
        while i < self.snap_streams.len() {
            let s = &mut self.snap_streams[i];
            if l.snapshot_conn(s.req) != Some(s.conn) {
                // The learner left, or failed its sync: nobody waits for the rest.
                self.snap_streams.remove(i);
                continue;
            }
            let mut done = false;
            while l.may_send(s.conn) {
                stepped = true;
                let mut out = Vec::with_capacity(64 * 1024);
                // Bounded in bytes too: a step of large nodes is one write the learner must
                // take within initLimit (its drain report re-arms the leader's deadline).
                done = core.database().apache_snap_step_bytes(
                    &mut s.cursor,
                    &mut out,
                    self.cfg.snap_step_items.max(1),
                    usize::try_from(self.cfg.sync_piece_bytes).unwrap_or(usize::MAX).max(1),
                );
                s.bytes += out.len() as u64;
                l.snapshot_bytes(s.req, Bytes::from(out), done, ms);
                if done {
                    break;
                }
            }
            if done {
                debug!("SNAP to connection {} streamed: {} bytes", s.conn, s.bytes);
                self.snap_streams.remove(i);
            } else {
                i += 1;
            }
        }
        for &conn in &self.conns {
            if !l.may_send(conn) && self.watching.insert(conn) {
                self.out.push_back(Output::WatchDrain { conn });
            }
        }
        stepped
    }

    /// Leader: learner `sid` speaks through `conn`. If it spoke through another connection
    /// before (it came back), the core moves that connection's sessions to this one, before
    /// this request is handed over (review of R4: owners keyed by a closed connection refused the
    /// learner's kept sessions SESSIONMOVED).
    fn note_learner_conn(&mut self, sid: i64, conn: PeerConn) {
        if self.learner_conns.len() >= PARKED_MAX && !self.learner_conns.contains_key(&sid) {
            return;
        }
        if let Some(from) = self.learner_conns.insert(sid, conn).filter(|c| *c != conn) {
            debug!("learner {sid} is back on connection {conn} (was {from}): its sessions move with it");
            self.for_core.push_back(CoreChange::Event(Event::LearnerReconnected { from, to: conn }));
        }
    }

    // ---------------------------------------------------------------------------------------
    // Handing the leadership over.

    /// An operator (`ydld`, the AdminServer, SIGTERM) asks this leader to hand its leadership
    /// over: to `to`, or to the most caught-up voting follower. The leader proposes nothing
    /// more (the core holds its clients' writes), waits until the successor holds every proposal
    /// and all are committed, sends it alone one harmless proposal (an error transaction of no
    /// session) so that it alone holds the highest zxid, and once it is acknowledged leaves its
    /// role, its first vote for the successor; the others' ordinary election then elects it, in
    /// a new epoch. Each wait is bounded ([`HANDOVER_WAIT_MS`]): a successor that does not catch
    /// up makes the leader give up and serve on (the held writes proposed then); one that does
    /// not acknowledge the last proposal makes it leave anyway, voting as usual.
    pub(super) fn hand_over(&mut self, now: Now, to: Option<i64>, core: &mut ServerCore) -> HandoverAnswer {
        let leader = match &self.state {
            State::Leading(l) if l.is_established() => l,
            State::Learning { learner, .. } => return HandoverAnswer::NotLeader(Some(learner.leader_sid())),
            _ => return HandoverAnswer::NotLeader(None),
        };
        if let Some(h) = self.handover {
            return HandoverAnswer::UnderWay(h.to);
        }
        let candidates = leader.handover_candidates();
        let to = match to {
            Some(t) if candidates.iter().any(|(s, _)| *s == t) => t,
            Some(t) => return HandoverAnswer::NotCandidate(t),
            // The most caught up; of equals, the highest id (as an election would rank them).
            None => match candidates.iter().max_by_key(|(s, acked)| (*acked, *s)) {
                Some((s, _)) => *s,
                None => return HandoverAnswer::NoFollower,
            },
        };
        info!("handing the leadership over to server {to}: holding new writes until it holds every proposal");
        self.handover = Some(Handover {
            to,
            deadline_ms: now.mono_ms().saturating_add(HANDOVER_WAIT_MS),
            proposed: None,
        });
        core.hold_writes();
        self.drain(now, core);
        HandoverAnswer::HandingOver(to)
    }

    /// An operator asks this server to lead (`rqld`): a synced follower asks its leader to hand
    /// over to it (zkrs's packet; a zkrs leader decides as for `ydld` with this server named, an
    /// Apache leader ignores it).
    pub(super) fn request_leadership(&mut self, now: Now, core: &mut ServerCore) -> LeadershipAnswer {
        if self.cfg.observer {
            return LeadershipAnswer::Observer;
        }
        let answer = match &mut self.state {
            State::Leading(l) if l.is_established() => return LeadershipAnswer::Leading,
            State::Learning { learner, .. } => {
                if !learner.request_leadership() {
                    return LeadershipAnswer::NoLeader;
                }
                LeadershipAnswer::Asked(learner.leader_sid())
            }
            _ => return LeadershipAnswer::NoLeader,
        };
        info!("{answer}");
        self.drain(now, core);
        answer
    }

    /// Whether a handover of this leader's leadership is under way.
    pub fn handover_under_way(&self) -> bool {
        self.handover.is_some()
    }

    /// Moves a handover on: the successor caught up (send it the last proposal), or a wait ran
    /// out. True if anything was done.
    fn step_handover(&mut self, now: Now, core: &mut ServerCore) -> bool {
        let Some(mut h) = self.handover else { return false };
        let ms = now.mono_ms();
        let State::Leading(l) = &mut self.state else {
            // The role ended otherwise (a step down): nothing is left to hand over.
            self.handover = None;
            return false;
        };
        if h.proposed.is_some() {
            if ms >= h.deadline_ms {
                warn!(
                    "handover: server {} did not acknowledge the handover's proposal; leaving anyway",
                    h.to
                );
                self.tell_unproposed(core);
                self.look("handover unacknowledged", now, false);
                return true;
            }
            return false;
        }
        if core.hold_full() {
            warn!(
                "handover given up: learners forwarded {} requests while it waited; serving on",
                crate::core::handover::HELD_FORWARDS_MAX
            );
            self.handover = None;
            core.release_writes(now);
            return true;
        }
        let successor = l.handover_candidates().into_iter().find(|(s, _)| *s == h.to);
        let Some((_, acked)) = successor else {
            warn!("handover given up: server {} is no longer a synced follower; serving on", h.to);
            self.handover = None;
            core.release_writes(now);
            return true;
        };
        // Everything the core proposed reached this machine and is committed, and the successor
        // holds all of it.
        let settled = core.in_flight() == 0 && l.all_committed();
        if settled && acked >= l.last_committed() {
            let after = core.last_zxid();
            let wall_ms = now.wall_ms;
            let made = l.propose_handover(h.to, after, |zxid| handover_payload(zxid, wall_ms));
            match made {
                Some(zxid) => {
                    info!("handover: server {} holds every proposal; sent it 0x{zxid:x} alone", h.to);
                    h.proposed = Some(zxid);
                    h.deadline_ms = ms.saturating_add(HANDOVER_WAIT_MS);
                    self.handover = Some(h);
                }
                None => {
                    warn!(
                        "handover given up: no proposal could be made to server {} (epoch exhausted?)",
                        h.to
                    );
                    self.handover = None;
                    core.release_writes(now);
                }
            }
            return true;
        }
        if ms >= h.deadline_ms {
            warn!(
                "handover given up: server {} did not catch up within {HANDOVER_WAIT_MS} ms (holds 0x{acked:x} of \
                 0x{:x}); serving on",
                h.to,
                l.last_committed()
            );
            self.handover = None;
            core.release_writes(now);
            return true;
        }
        false
    }

    /// A leader leaving after its handover's proposal: tells its learners that what they
    /// forwarded and have not seen committed was never proposed (the core drops the requests it
    /// held), so that they forward it again to the next leader. The packets go out before the
    /// connections close (each connection's writer sends what it was given first).
    fn tell_unproposed(&mut self, core: &ServerCore) {
        // Revalidations decided here and requests forwarded that the core has not taken yet
        // count too.
        let pending: Vec<&Event> = self
            .for_core
            .iter()
            .filter_map(|c| match c {
                CoreChange::Event(ev @ (Event::SessionOwner { .. } | Event::Forwarded { .. })) => Some(ev),
                _ => None,
            })
            .collect();
        let State::Leading(l) = &mut self.state else { return };
        let told = l.tell_unproposed(|conn| core.moved_away(conn, &pending));
        let mut sends = Vec::new();
        while let Some(a) = l.poll_action() {
            sends.push(a);
        }
        for a in sends {
            match a {
                LeaderAction::Send { conn, packet } => {
                    self.out.push_back(Output::SendPacket { conn, packet })
                }
                other => debug!("leaving the leadership: {other:?} not carried out"),
            }
        }
        if told > 0 {
            info!("handover: told {told} learners to forward again what they sent while it was held");
        }
    }

    /// The successor logged the handover's proposal: it alone holds the highest zxid. This
    /// server leaves its role and votes for it in the election that follows.
    fn handover_acked(&mut self, sid: i64, zxid: i64, now: Now, core: &ServerCore) {
        let Some(h) = self.handover.filter(|h| h.to == sid && h.proposed == Some(zxid)) else { return };
        info!("handover: server {} acknowledged 0x{zxid:x}; leaving the leadership to it", h.to);
        self.tell_unproposed(core);
        let epoch = self.epochs.1;
        self.look_voting("handed over", now, false, Some((sid, zxid, epoch)));
    }

    // ---------------------------------------------------------------------------------------
    // Configurations.

    /// The configuration as the core needs it.
    fn membership(&self) -> Membership {
        Membership {
            config: self.cfg.config.clone(),
            reconfig_enabled: self.cfg.reconfig_enabled,
            standalone_enabled: self.cfg.standalone_enabled,
        }
    }

    /// A configuration to activate (committed by a reconfiguration, or carried by NEWLEADER):
    /// if newer than this server's, it comes into force, and this server leaves its leader (or
    /// its leadership) when Apache's members would: it changes between observer and
    /// participant, or the configuration is led by another server.
    fn activate(&mut self, zxid: i64, config: &Bytes, designated: Option<i64>, now: Now) {
        if !self.cfg.reconfig_enabled {
            return;
        }
        let Some(next) = parse_config(config) else {
            warn!("configuration activated at {zxid:#x} does not parse; ignored");
            return;
        };
        if next.version <= self.cfg.config.version {
            return;
        }
        let me = self.cfg.my_sid;
        let was_observer = self.cfg.observer;
        let leader = match &self.state {
            State::Leading(_) => Some(me),
            State::Learning { learner, .. } => Some(learner.leader_sid()),
            State::Looking | State::Connecting { .. } => None,
        };
        let prev = self.cfg.config.clone();
        self.install(next.clone());
        let role_change = was_observer != self.cfg.observer;
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
                next.version, self.cfg.observer
            );
            self.look("reconfiguration", now, false);
            // As Apache's members: the designated leader leads at once and the others follow it,
            // without an election (one runs if it cannot be reached). Without a designated leader
            // (a NEWLEADER configuration), an election decides.
            if let Some(d) = designated.filter(|d| self.verifier.is_voter(*d)) {
                let state = if d == me {
                    PeerState::Leading
                } else if self.cfg.observer {
                    PeerState::Observing
                } else {
                    PeerState::Following
                };
                // The election just started ends here, without a decision of its own.
                self.fle.set_serving(state, d, self.epochs.1);
                self.decision = Some((d, state));
            }
        }
    }

    /// A reconfiguration in the log of `db` newer than the configuration in force becomes the
    /// pending one (or none, when there is none), for the election under way too: a TRUNC that
    /// cut the reconfiguration from the log, then a reload, left the election asking a quorum of
    /// a configuration no longer pending (node_sim seed 180514 of `reconfig`: a voter looked for
    /// a leader forever, its answers a quorum of the configuration in force but not of that one),
    /// and the first election after a start did not ask the pending one's.
    fn note_logged_config(&mut self, db: &Database) {
        self.pending = self
            .cfg
            .reconfig_enabled
            .then(|| config_in(db))
            .flatten()
            .filter(|c| c.version > self.cfg.config.version);
        if let Some(c) = &self.pending {
            info!(
                "configuration version {:#x} found in the log, not known to be committed: pending",
                c.version
            );
        }
        let ecfg = self.election_config();
        self.fle.set_config(ecfg);
    }

    /// The configuration a notification carries, when reconfiguration is on and it is newer
    /// than this server's.
    fn newer_config(&self, n: &Notification) -> Option<QuorumConfig> {
        if !self.cfg.reconfig_enabled {
            return None;
        }
        parse_config(n.config.as_deref()?).filter(|c| c.version > self.cfg.config.version)
    }

    /// Puts `next` in force here: the verifier (the leader machine's too, which then counts the
    /// new configuration alone), this server's kind, the driver's addresses and files, and the
    /// core's view of it.
    fn install(&mut self, next: QuorumConfig) {
        info!(
            "configuration version {:#x} in force: {}",
            next.version,
            next.to_config_string().replace('\n', ", ")
        );
        self.verifier = QuorumVerifier::from_config(&next);
        self.cfg.observer = zk_quorum::reconfig::placement(&next, self.cfg.my_sid)
            == zk_quorum::reconfig::Placement::Observer;
        if let State::Leading(l) = &mut self.state {
            l.set_configuration(self.verifier.clone(), Bytes::from(next.to_config_string()));
        }
        self.out.push_back(Output::InstallConfig(Box::new(next.clone())));
        // A pending configuration no newer than this one is settled: it is this one, or an
        // earlier one (committed before it, or never committed and superseded). Apache keeps one
        // last seen configuration, which a newer one replaces. Kept, its voters would go on
        // being asked for a quorum of every election and NEWLEADER here, though they may have
        // become observers or left.
        if self.pending.as_ref().is_some_and(|p| p.version <= next.version) {
            info!(
                "pending configuration {:#x} settled by {:#x}",
                self.pending.as_ref().map_or(0, |p| p.version),
                next.version
            );
            self.pending = None;
        }
        self.cfg.config = next;
        let ecfg = self.election_config();
        self.fle.set_config(ecfg);
        self.for_core.push_back(CoreChange::Event(Event::Membership(self.membership())));
    }
}

enum Either {
    Leader(LeaderAction),
    Learner(LearnerAction),
}

/// The records a DIFF needs: the anchor (the last record at or before `from`, the learner's
/// last zxid) and every record after it through `through`. [`LogRead::Missing`] when the log no
/// longer reaches back that far; [`LogRead::TooBig`] when the range holds more than
/// `max_records`, or its records after the anchor more than `max_bytes` (the leader then sends
/// a snapshot). The driver and the simulator both answer [`Output::ReadLog`] with it.
pub fn read_anchored(
    src: &dyn zk_log::TxnSource,
    from: i64,
    through: i64,
    max_records: usize,
    max_bytes: Option<u64>,
) -> LogRead {
    // Read in slices, so that a range far past the byte budget stops early.
    const SLICE: usize = 4096;
    let mut v: Vec<(i64, Bytes)> = Vec::new();
    let mut bytes = 0u64;
    let mut next = from;
    while next <= through {
        let Ok(entries) = src.read_range(next, through, SLICE) else { return LogRead::Missing };
        let Some(last) = entries.last().map(|e| e.header.zxid) else { break };
        for e in entries {
            let p = payload(&e.header, &e.txn);
            if e.header.zxid > from {
                bytes = bytes.saturating_add(p.len() as u64);
            }
            v.push((e.header.zxid, p));
        }
        if v.len() >= max_records || max_bytes.is_some_and(|m| bytes > m) {
            return LogRead::TooBig;
        }
        next = last + 1;
    }
    if v.first().map(|e| e.0) == Some(from) {
        return LogRead::Records(v);
    }
    // The learner's last zxid is not in our log: the anchor is the last record before it, in
    // its epoch or an earlier one (zxids are dense within an epoch, not across epochs).
    let mut epoch = from >> 32;
    while epoch >= 0 {
        let start = (epoch << 32).max(src.base_zxid() + 1);
        if start <= from {
            let Ok(before) = src.read_range(start, from, max_records) else { return LogRead::Missing };
            if let Some(last) = before.into_iter().filter(|e| e.header.zxid <= from).last() {
                v.insert(0, (last.header.zxid, payload(&last.header, &last.txn)));
                return LogRead::Records(v);
            }
        }
        if start <= src.base_zxid() + 1 {
            break;
        }
        epoch -= 1;
    }
    // Nothing at or before `from` is left in the log (purged, or `from` precedes it).
    LogRead::Missing
}

/// The newest `window` records of the log (the leader's DIFF window), as PROPOSAL data.
pub fn recent_history(src: &dyn zk_log::TxnSource, window: usize) -> Vec<(i64, Bytes)> {
    let last = src.durable_zxid();
    let from = (last - window as i64 + 1).max(src.base_zxid() + 1);
    match src.read_range(from, last, window) {
        Ok(entries) => entries.into_iter().map(|e| (e.header.zxid, payload(&e.header, &e.txn))).collect(),
        Err(e) => {
            debug!("no recent history for DIFF: {e}");
            Vec::new()
        }
    }
}

/// The handover's proposal: an error transaction of no session, changing nothing.
fn handover_payload(zxid: i64, wall_ms: i64) -> Bytes {
    let hdr = TxnHeader { client_id: 0, cxid: 0, zxid, time: wall_ms, txn_type: OpCode::Error.code() };
    payload(&hdr, &Txn::Error(zk_proto::ErrorTxn { err: HANDOVER_TXN_ERR }))
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

/// A configuration string from the wire or a znode.
pub fn parse_config(bytes: &[u8]) -> Option<QuorumConfig> {
    QuorumConfig::parse(std::str::from_utf8(bytes).ok()?).ok().filter(|c| !c.servers.is_empty())
}

/// The configuration a database's /zookeeper/config holds.
fn config_in(db: &Database) -> Option<QuorumConfig> {
    parse_config(db.tree().get("/zookeeper/config")?.data()?)
}

/// About what `db` takes as a snapshot: its data, and per node its path, stat and framing.
fn snapshot_bytes_estimate(db: &Database) -> u64 {
    db.approximate_data_size().saturating_add(db.node_count() as u64 * 120)
}
