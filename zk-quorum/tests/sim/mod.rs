//! Deterministic whole-ensemble simulation of Zab: zk-quorum's leader, learner and election
//! machines driven by one seed, over a simulated network and simulated disks, with each
//! server's disk and state behind the [`Store`] trait, here [`model::ModelStore`]: the log is a
//! list of records, the database the list of applied transactions, snapshots a toy encoding.
//! Fast: it runs many seeds.
//!
//! This tests the Zab machines against a model of the server around them. The server itself
//! (zk-server's node: its core and replica, over zk-log and zk-tree on fault-injecting disks,
//! with clients) is simulated by `zk-server/tests/node_sim`, which also holds the named
//! regression scenarios run on the real code.
//!
//! One seed drives everything: message delays (per-connection FIFO, reordering only across
//! connections), connection drops, crashes (unsynced writes lost or torn), restarts, partitions
//! (TCP does not drop: traffic across one waits, and connections end by timeouts), log purges,
//! wall-clock jumps (only the wall time jumps; every timeout runs on the monotonic clock),
//! lost and duplicated election notifications, and background writes at each established
//! leader. Time is simulated in 10 ms steps.
//!
//! Elections: either the crate's Fast Leader Election machines over a simulated election network,
//! or a deterministic stand-in (the live looking voters of one side of the network that form a
//! quorum pick the best (currentEpoch, lastLoggedZxid, sid) among them; a looking server that can
//! reach a leader joins it). Zab's safety must not depend on which leader is picked.
//!
//! Around each machine: disk operations complete after a simulated delay (log syncs in order,
//! epoch files apart), disk work is flushed when a role ends (ZK-4541, -4712), the database is
//! reloaded from disk at every role change, and the leader commits in zxid order on a quorum of
//! ACKs (its own after its log sync), counted by zk-quorum's `AckLedger`, the rule the server uses,
//! which clamps a follower's ACK when its sync starts (`LeaderAction::AckReset`).
//!
//! Checkers:
//! - at most one leader is established per epoch;
//! - the committed chain (every write acknowledged, and each new epoch's initial history) only
//!   grows: every established leader's history starts with it (no acknowledged write lost), every
//!   commit extends it consistently; a learner commits in zxid order and, once up to date, the
//!   chain's transaction at each zxid (same bytes);
//! - a restarted server's epochs are consistent with its log;
//! - once healed and quiet: one leader is established, every server is synced, every log holds
//!   the chain's records (zxid and bytes) above its snapshot base, and every database equals the
//!   one the chain builds (this also checks liveness).
//!
//! `ZAB_SEEDS=N` runs N seeds per configuration and prints each failing seed as a replay
//! command; `ZAB_SEED=S` replays one with a trace; `ZAB_VERBOSE=1` traces the named scenarios.

pub mod model;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_proto::{Acl, CreateRequest, Id, Jute, OpCode};
use zk_quorum::election::{
    ElectionAction, ElectionConfig, ElectionTimings, FastLeaderElection, PeerData, Vote,
};
use zk_quorum::quorum::{AckLedger, QuorumVerifier, VoterSet};
use zk_quorum::wire::packet::JUTE_MAXBUFFER_DEFAULT;
use zk_quorum::wire::{ForwardedRequest, Notification, PeerState, QuorumPacket, QuorumPacketDecoder};
use zk_quorum::zab::{
    counter_of, epoch_of, make_zxid, ConnId, Leader, LeaderAction, Learner, LearnerAction, LocalState,
    ZabConfig,
};

/// The background write of leader `sid` (its `n`th): a create of a node of its own.
pub fn background_write(sid: i64, n: u32) -> ForwardedRequest {
    let acl =
        vec![Acl { perms: zk_proto::perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }];
    let mut b = bytes::BytesMut::new();
    CreateRequest { path: format!("/b{sid}.{n}"), data: Some(Bytes::from(format!("b{n}"))), acl, flags: 0 }
        .write(&mut b);
    ForwardedRequest { session_id: 0, cxid: n as i32, op: OpCode::Create.code(), body: b.freeze() }
}

/// A history: (zxid, PROPOSAL data) in zxid order.
pub type Hist = Vec<(i64, Bytes)>;

/// A checker's verdict: Err names the violation.
pub type R = Result<(), String>;

const STEP_MS: u64 = 10;

/// What a crash keeps of the writes that were not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Only what was synced.
    Durable,
    /// Everything written (as if synced just before).
    All,
    /// A random in-order part, possibly torn (drawn from the seed).
    Random,
    /// Some but not all of what was not synced, the last of it torn where the backend can.
    Part,
}

/// One server's disk and state machine: everything the simulation does not share.
///
/// Disk operations are called when their simulated delay has passed; whatever they make durable
/// must survive [`Store::crash`]; the rest may not.
pub trait Store: Sized {
    /// A fresh, empty server; `seed` draws its disk faults.
    fn open(sid: i64, seed: u64) -> Self;
    /// (acceptedEpoch, currentEpoch) as on disk.
    fn epochs(&self) -> (u32, u32);
    /// The last logged zxid (the snapshot's when the log holds nothing after it).
    fn last_zxid(&self) -> i64;
    /// The zxid through which the log is durable.
    fn durable_zxid(&self) -> i64;
    /// The records the log holds (after its snapshot base), as PROPOSAL data.
    fn logged(&self) -> Hist;
    /// The longest suffix of its history the server can show record by record: its log, or
    /// more where the snapshot keeps records.
    fn history(&self) -> Hist {
        self.logged()
    }
    /// Appends a record (not durable until [`Store::sync`]).
    fn append(&mut self, zxid: i64, payload: Bytes) -> R;
    /// Makes every appended record durable.
    fn sync(&mut self) -> R;
    /// Writes acceptedEpoch (`accepted`) or currentEpoch, durably.
    fn set_epoch(&mut self, accepted: bool, epoch: u32) -> R;
    /// TRUNC: removes every record above `zxid` durably and reloads the database. Returns
    /// false when the server could only go further back (its records up to `zxid` were only
    /// in a snapshot that holds more): it must then sync again from what it has.
    fn truncate(&mut self, zxid: i64, now_ms: u64) -> Result<bool, String>;
    /// SNAP at `zxid` announced: the next bytes fed are its stream.
    fn receive(&mut self, zxid: i64);
    /// Feeds snapshot stream bytes; true once the whole snapshot arrived.
    fn feed(&mut self, bytes: &[u8]) -> Result<bool, String>;
    /// Makes the received snapshot durable and resets the log to it; with `live`, it becomes
    /// the database.
    fn install(&mut self, zxid: i64, live: bool) -> R;
    /// The database serialized for a SNAP, which must be at `zxid`.
    fn snapshot(&self, zxid: i64) -> Result<Bytes, String>;
    /// Applies a committed transaction.
    fn commit(&mut self, zxid: i64, payload: &Bytes) -> R;
    /// The zxid of the last transaction the database applied.
    fn applied_zxid(&self) -> i64;
    /// Reloads the database from disk (snapshot and log).
    fn reload(&mut self, now_ms: u64) -> R;
    /// Power loss: `keep` says what of the unsynced writes survives.
    fn crash(&mut self, keep: Keep, rng: &mut StdRng);
    /// Start after a crash: reopens (recovers) the disk; true when the epoch files were behind
    /// the log and had to be repaired (see `Stats::epoch_behind_log`).
    fn restart(&mut self, now_ms: u64) -> Result<bool, String>;
    /// Takes a snapshot of the database and purges the log before it.
    fn purge(&mut self) -> R;
    /// The leader prepares a write for zxid `zxid` at wall time `wall_ms`.
    fn prep(&mut self, zxid: i64, wall_ms: i64, req: &ForwardedRequest) -> Result<Bytes, String>;
    /// A canonical dump of the database.
    fn dump(&self) -> String;
    /// The dump of the database the chain builds.
    fn reference_dump(chain: &Hist) -> String;
    /// Transactions for preloaded histories: one per (zxid, tag), valid in sequence.
    fn make_hist(recs: &[(i64, String)]) -> Hist;
    /// Gives a fresh server a durable state: epochs and a history, in the log or (`purged`) all
    /// in a snapshot.
    fn preload(&mut self, accepted: u32, current: u32, hist: &Hist, purged: bool) -> R;
    /// Checks the database against the committed chain when a learner becomes up to date.
    fn check_applied(&self, chain: &Hist) -> R;
}

/// One configuration of the simulation.
#[derive(Debug, Clone)]
pub struct Params {
    /// Voting members.
    pub voters: Vec<i64>,
    /// Observers.
    pub observers: Vec<i64>,
    /// Faults happen during the first `fault_ms`.
    pub fault_ms: u64,
    /// Then the network heals, everyone restarts, and the ensemble must converge within this.
    pub quiet_ms: u64,
    /// Per server and step.
    pub crash_p: f64,
    /// Per step.
    pub partition_p: f64,
    /// Background write per step (each established leader).
    pub propose_p: f64,
    /// Snapshot and log purge, per server and step.
    pub purge_p: f64,
    /// The leader's committed-log window (DIFF reach).
    pub window: usize,
    /// Network delay bound.
    pub max_delay_ms: u64,
    /// Disk delay bounds.
    pub min_disk_ms: u64,
    /// Disk delay bounds.
    pub max_disk_ms: u64,
    /// Elect with the Fast Leader Election machines (else the deterministic stand-in).
    pub fle: bool,
    /// Election notification lost / delivered twice, each.
    pub elect_loss_p: f64,
    /// Election notification delivered twice.
    pub elect_dup_p: f64,
    /// A quorum connection drops, per connection and step.
    pub conn_drop_p: f64,
    /// A server's wall clock jumps (by up to an hour either way), per server and step.
    pub clock_jump_p: f64,
    /// Chance that a learner's NEWLEADER ACK reaches the wire behind the proposal ACK that
    /// follows it, as Apache learners before 3.8.5 send them (ZK-4685): the leader must count
    /// the proposal and keep waiting for the NEWLEADER ACK.
    pub early_proposal_ack_p: f64,
    /// The most messages a connection's outbox holds towards a learner: past it the leader's
    /// server closes the connection, as zk-server does when a peer's outbox is full.
    pub outbox_max: usize,
    /// `zookeeper.snapshotSizeFactor` (the database's size is its history's PROPOSAL bytes).
    pub snapshot_size_factor: f64,
    /// initLimit, in ticks of 100 ms.
    pub init_limit: u64,
}

impl Params {
    /// Three voters, the stand-in election.
    pub fn three() -> Params {
        Params {
            voters: vec![1, 2, 3],
            observers: vec![],
            fault_ms: 6_000,
            quiet_ms: 8_000,
            crash_p: 0.004,
            partition_p: 0.002,
            propose_p: 0.3,
            purge_p: 0.01,
            window: 6,
            max_delay_ms: 25,
            min_disk_ms: 1,
            max_disk_ms: 20,
            fle: false,
            elect_loss_p: 0.0,
            elect_dup_p: 0.0,
            conn_drop_p: 0.0,
            clock_jump_p: 0.0,
            early_proposal_ack_p: 0.0,
            outbox_max: usize::MAX,
            snapshot_size_factor: zk_quorum::zab::DEFAULT_SNAPSHOT_SIZE_FACTOR,
            init_limit: 10,
        }
    }

    /// Slow disks and frequent crashes: wide windows between "logged" and "durable".
    pub fn crashy() -> Params {
        Params { crash_p: 0.008, max_disk_ms: 150, propose_p: 0.2, fault_ms: 5_000, ..Params::three() }
    }

    /// Five voters and an observer.
    pub fn five() -> Params {
        Params { voters: vec![1, 2, 3, 4, 5], observers: vec![6], ..Params::three() }
    }
}

#[derive(Debug)]
enum Msg {
    Packet(QuorumPacket),
    Raw(Bytes),
    Closed,
}

#[derive(Debug, Default)]
struct Pipe {
    queue: VecDeque<(u64, Msg)>,
    last_at: u64,
}

#[derive(Debug)]
struct Conn {
    leader: i64,
    learner: i64,
    leader_gen: u64,
    learner_gen: u64,
    to_learner: Pipe,
    to_leader: Pipe,
}

#[derive(Debug)]
enum DiskOp {
    Sync(i64),
    Accepted(u32),
    Current(u32),
    Truncate(i64),
    Install(i64),
}

enum Role {
    Down,
    Looking,
    Leading(Box<Leader>),
    Following(Box<Learner>, ConnId),
}

#[derive(Default)]
struct Proposer {
    established: Option<u32>,
    next_counter: u32,
    outstanding: BTreeMap<i64, Bytes>,
    /// The commit rule the server uses (zk-quorum's): each voter's cumulative ACK, the leader's
    /// own from its log syncs; one per leadership, from its establishment.
    ledger: Option<AckLedger>,
}

struct Server<S: Store> {
    sid: i64,
    observer: bool,
    store: S,
    /// Log operations (appends' syncs, truncation, snapshot install), in order.
    disk: VecDeque<(u64, u64, DiskOp)>,
    /// Epoch file writes: other files, synced independently of the log.
    meta: VecDeque<(u64, u64, DiskOp)>,
    role: Role,
    gen: u64,
    since_ms: u64,
    inbox: VecDeque<Msg>,
    /// Receiving a snapshot at this zxid.
    snap: Option<i64>,
    installing: bool,
    up_to_date: bool,
    proposer: Proposer,
    /// The election machine (FLE mode), alive while the server is up.
    fle: Option<FastLeaderElection>,
    /// FLE decided to follow this vote, since then: connect once its leader leads with it.
    wants: Option<(Vote, u64)>,
    /// Wall clock = monotonic time + this (it jumps).
    wall_offset_ms: i64,
    /// A NEWLEADER arrived (its zxid, and the last zxid logged then) and is not ACKed yet.
    newleader: Option<(i64, i64)>,
    /// This role ACKed a NEWLEADER.
    acked_newleader: bool,
}

impl<S: Store> Server<S> {
    fn local(&self) -> LocalState {
        let (accepted, current) = self.store.epochs();
        LocalState {
            accepted_epoch: accepted,
            current_epoch: current,
            last_logged_zxid: self.store.last_zxid(),
            first_logged_zxid: self.store.logged().first().map(|r| r.0),
        }
    }

    fn is_up(&self) -> bool {
        !matches!(self.role, Role::Down)
    }

    /// Serving clients: an established leader, or a learner up to date.
    fn serving(&self) -> bool {
        match &self.role {
            Role::Leading(l) => l.is_established() && self.proposer.established.is_some(),
            Role::Following(..) => self.up_to_date,
            _ => false,
        }
    }
}

/// The simulation of one ensemble.
pub struct Sim<S: Store> {
    rng: StdRng,
    now: u64,
    p: Params,
    verifier: QuorumVerifier,
    servers: BTreeMap<i64, Server<S>>,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: ConnId,
    next_gen: u64,
    /// One side of the current partition, and when it heals.
    partition: Option<(BTreeSet<i64>, u64)>,
    down_until: BTreeMap<i64, u64>,
    /// The committed chain.
    chain: Hist,
    epoch_leader: BTreeMap<u32, i64>,
    verbose: bool,
    /// What happened, summed over a run.
    pub stats: Stats,
    /// Election notifications in flight: (deliver at, from, to, notification).
    election_net: Vec<(u64, i64, i64, Notification)>,
    /// Last delivery time per (from, to): one TCP connection per pair keeps order.
    election_last: BTreeMap<(i64, i64), u64>,
    /// A NEWLEADER ACK held back during one learner's drain (`Params::early_proposal_ack_p`).
    held_newleader_ack: Option<(ConnId, QuorumPacket)>,
    /// Every proposal: zxid -> (the proposer's previous zxid, data). One leader per epoch
    /// makes a zxid name one proposal.
    proposals: BTreeMap<i64, (i64, Bytes)>,
}

/// What happened in runs (summed over seeds by [`run_many`]).
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Epochs established.
    pub established: u64,
    /// Proposals committed.
    pub commits: u64,
    /// Crashes.
    pub crashes: u64,
    /// Partitions.
    pub partitions: u64,
    /// DIFF syncs.
    pub diffs: u64,
    /// TRUNC syncs.
    pub truncs: u64,
    /// SNAP syncs.
    pub snaps: u64,
    /// DIFFs read from the leader's log.
    pub log_reads: u64,
    /// Restarts with currentEpoch below the last record's epoch.
    pub epoch_behind_log: u64,
    /// Quorum connections dropped.
    pub conn_drops: u64,
    /// Wall-clock jumps.
    pub clock_jumps: u64,
    /// Election notifications lost.
    pub elect_lost: u64,
    /// Election notifications delivered twice.
    pub elect_dup: u64,
    /// NEWLEADER ACKs sent behind a proposal ACK (`Params::early_proposal_ack_p`).
    pub early_proposal_acks: u64,
    /// Learner connections a leader closed.
    pub leader_closes: u64,
    /// DIFFs from the log past `snapshotSizeFactor` of the database: sent as SNAP.
    pub diffs_too_big: u64,
    /// Connections closed because their outbox was full (`Params::outbox_max`).
    pub outbox_overflows: u64,
}

impl Stats {
    fn add(&mut self, s: &Stats) {
        self.established += s.established;
        self.commits += s.commits;
        self.crashes += s.crashes;
        self.partitions += s.partitions;
        self.diffs += s.diffs;
        self.truncs += s.truncs;
        self.snaps += s.snaps;
        self.log_reads += s.log_reads;
        self.epoch_behind_log += s.epoch_behind_log;
        self.conn_drops += s.conn_drops;
        self.clock_jumps += s.clock_jumps;
        self.early_proposal_acks += s.early_proposal_acks;
        self.leader_closes += s.leader_closes;
        self.diffs_too_big += s.diffs_too_big;
        self.outbox_overflows += s.outbox_overflows;
        self.elect_lost += s.elect_lost;
        self.elect_dup += s.elect_dup;
    }
}

/// Wall clocks start here (2023-11-14), ms since the Unix epoch.
const WALL_ORIGIN_MS: i64 = 1_700_000_000_000;

impl<S: Store> Sim<S> {
    /// A new ensemble; every disk fault and delay is drawn from `seed`.
    pub fn new(seed: u64, p: Params, verbose: bool) -> Sim<S> {
        let verifier = QuorumVerifier::majority(p.voters.clone(), p.observers.clone());
        let mut servers = BTreeMap::new();
        for sid in p.voters.iter().chain(p.observers.iter()) {
            servers.insert(
                *sid,
                Server {
                    sid: *sid,
                    observer: p.observers.contains(sid),
                    store: S::open(*sid, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (*sid as u64)),
                    disk: VecDeque::new(),
                    meta: VecDeque::new(),
                    role: Role::Looking,
                    gen: 0,
                    since_ms: 0,
                    inbox: VecDeque::new(),
                    snap: None,
                    installing: false,
                    up_to_date: false,
                    proposer: Proposer::default(),
                    fle: None,
                    wants: None,
                    wall_offset_ms: 0,
                    newleader: None,
                    acked_newleader: false,
                },
            );
        }
        Sim {
            rng: StdRng::seed_from_u64(seed),
            now: 0,
            p,
            verifier,
            servers,
            conns: BTreeMap::new(),
            next_conn: 1,
            next_gen: 1,
            partition: None,
            down_until: BTreeMap::new(),
            chain: vec![],
            epoch_leader: BTreeMap::new(),
            verbose,
            stats: Stats::default(),
            election_net: Vec::new(),
            election_last: BTreeMap::new(),
            held_newleader_ack: None,
            proposals: BTreeMap::new(),
        }
    }

    fn server(&mut self, sid: i64) -> &mut Server<S> {
        self.servers.get_mut(&sid).expect("a configured server")
    }

    /// The wall clock of `sid`, which may have jumped.
    fn wall_ms(&self, sid: i64) -> i64 {
        WALL_ORIGIN_MS + self.now as i64 + self.servers[&sid].wall_offset_ms
    }

    fn peer_data(&self, sid: i64) -> PeerData {
        let s = &self.servers[&sid];
        PeerData { last_logged_zxid: s.store.last_zxid(), current_epoch: i64::from(s.store.epochs().1) }
    }

    /// A role ended: back to LOOKING (a new election round in FLE mode).
    fn looking(&mut self, sid: i64) -> R {
        self.drop_role(sid)?;
        if !self.p.fle {
            return Ok(());
        }
        let data = self.peer_data(sid);
        let now = self.now;
        let fle_cfg = ElectionConfig {
            my_sid: sid,
            verifier: self.verifier.clone(),
            pending_verifier: None,
            config_string: Bytes::from_static(b"version=0"),
            timings: ElectionTimings::default(),
            decide_early_when_unanimous: true,
        };
        let s = self.server(sid);
        s.wants = None;
        match &mut s.fle {
            Some(f) => f.start_election(data, now),
            None => s.fle = Some(FastLeaderElection::new(fle_cfg, data, now)),
        }
        self.drain_election(sid)
    }

    fn drain_election(&mut self, sid: i64) -> R {
        // Bounded: a machine emits a bounded number of actions per input.
        for _ in 0..10_000 {
            let Some(a) = self.server(sid).fle.as_mut().and_then(|f| f.poll_action()) else {
                return Ok(());
            };
            match a {
                ElectionAction::Send { to, notification } => {
                    // Notifications ride connections that drop and are re-dialled: one may be
                    // lost, or re-sent (the newest per peer is sent again on reconnect).
                    // Only while faults run: healed means no loss.
                    let faulty = self.now < self.p.fault_ms;
                    if faulty && self.rng.gen_bool(self.p.elect_loss_p) {
                        self.stats.elect_lost += 1;
                        continue;
                    }
                    let copies = if faulty && self.rng.gen_bool(self.p.elect_dup_p) { 2 } else { 1 };
                    self.stats.elect_dup += copies - 1;
                    for _ in 0..copies {
                        let d = self.rng.gen_range(1..=self.p.max_delay_ms);
                        let last = self.election_last.entry((sid, to)).or_insert(0);
                        let at = (*last).max(self.now + d);
                        *last = at;
                        self.election_net.push((at, sid, to, notification.clone()));
                    }
                }
                ElectionAction::Decided { leader, state, vote } => {
                    if !matches!(self.servers[&sid].role, Role::Looking) {
                        continue;
                    }
                    self.log(|| format!("{sid} decides {state:?} for {leader}"));
                    if state == PeerState::Leading {
                        self.lead(sid)?;
                    } else {
                        let now = self.now;
                        self.server(sid).wants = Some((vote, now));
                    }
                }
            }
        }
        Err(format!("{sid}: the election machine does not stop emitting actions"))
    }

    /// FLE mode: notifications, election timeouts, and learners connecting to their leader.
    fn elect_fle(&mut self) -> R {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.election_net).into_iter().partition(|m| m.0 <= now);
        self.election_net = later;
        for (_, from, to, n) in due {
            if !reachable(&self.partition, from, to) || !self.servers[&to].is_up() {
                continue;
            }
            if let Some(f) = self.server(to).fle.as_mut() {
                f.handle_notification(from, n, now);
            }
            self.drain_election(to)?;
        }
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids.iter().copied() {
            let s = self.server(sid);
            if let Some(f) = s.fle.as_mut() {
                if f.poll_timeout().is_some_and(|t| t <= now) {
                    f.handle_timeout(now);
                    self.drain_election(sid)?;
                }
            }
        }
        let init_ms = self.cfg(0).init_ms();
        for sid in sids {
            let s = &self.servers[&sid];
            let Some((vote, since)) = s.wants else { continue };
            if !matches!(s.role, Role::Looking) {
                continue;
            }
            let leader = vote.leader;
            // Only the leadership this election chose: were we to join a later one, our vote
            // (what we answer newcomers with) would disagree with the leader's and no newcomer
            // could ever see a quorum agree on it.
            let l = &self.servers[&leader];
            let same = l.fle.as_ref().is_some_and(|f| {
                let v = f.current_vote();
                v.leader == vote.leader
                    && v.peer_epoch == vote.peer_epoch
                    && v.election_epoch == vote.election_epoch
            });
            let leads = same && matches!(&l.role, Role::Leading(l) if !l.is_stopped());
            if leads && reachable(&self.partition, sid, leader) {
                self.server(sid).wants = None;
                self.follow(sid, leader)?;
            } else if now >= since + init_ms {
                self.log(|| format!("{sid} gives up on leader {leader}"));
                self.looking(sid)?;
            }
        }
        Ok(())
    }

    fn cfg(&self, sid: i64) -> ZabConfig {
        let mut c = ZabConfig::new(sid, self.verifier.clone(), 100, self.p.init_limit, 5);
        c.snapshot_size_factor = self.p.snapshot_size_factor;
        c.committed_log_max = self.p.window;
        c.config_string = Bytes::from_static(b"version=0");
        c
    }

    fn log(&self, what: impl FnOnce() -> String) {
        if self.verbose {
            println!("{:>6} {}", self.now, what());
        }
    }

    /// Every server starts looking.
    fn start(&mut self) -> R {
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids {
            if self.servers[&sid].is_up() {
                self.looking(sid)?;
            }
        }
        Ok(())
    }

    /// One whole run: faults, then healing and quiet, then the final checks.
    pub fn run(&mut self) -> R {
        self.start()?;
        let end_faults = self.p.fault_ms;
        while self.now < end_faults {
            self.step(true)?;
        }
        self.partition = None;
        let down: Vec<i64> = self.down_until.keys().copied().collect();
        for sid in down {
            self.restart(sid)?;
        }
        let end = end_faults + self.p.quiet_ms;
        while self.now < end {
            self.step(false)?;
            if self.converged() {
                break;
            }
        }
        self.check_converged()
    }

    fn step(&mut self, faults: bool) -> R {
        self.now += STEP_MS;
        if faults {
            self.faults()?;
        }
        let due: Vec<i64> =
            self.down_until.iter().filter(|(_, t)| **t <= self.now).map(|(s, _)| *s).collect();
        for sid in due {
            self.restart(sid)?;
        }
        if let Some((_, until)) = &self.partition {
            if *until <= self.now {
                self.log(|| "partition heals".into());
                self.partition = None;
            }
        }
        self.deliver()?;
        self.disk()?;
        self.timeouts()?;
        self.elect()?;
        if faults && self.rng.gen_bool(self.p.propose_p) {
            self.propose_background()?;
        }
        Ok(())
    }

    fn faults(&mut self) -> R {
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids {
            if self.servers[&sid].is_up() && self.rng.gen_bool(self.p.crash_p) {
                let down_for = self.rng.gen_range(100..1_500);
                self.crash(sid, Keep::Random, down_for)?;
            }
            if self.servers[&sid].snap.is_none() && self.rng.gen_bool(self.p.purge_p) {
                self.server(sid).store.purge()?;
            }
            if self.rng.gen_bool(self.p.clock_jump_p) {
                let jump = self.rng.gen_range(-3_600_000..=3_600_000);
                self.log(|| format!("{sid}: wall clock jumps {jump} ms"));
                self.stats.clock_jumps += 1;
                self.server(sid).wall_offset_ms += jump;
            }
        }
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            if self.rng.gen_bool(self.p.conn_drop_p) {
                // A TCP connection breaks: both ends see it end; the learner looks for a leader
                // again and the leader hears the close.
                let learner = self.conns[&id].learner;
                if matches!(self.servers[&learner].role, Role::Following(_, c) if c == id) {
                    self.log(|| format!("connection {id} drops"));
                    self.stats.conn_drops += 1;
                    self.looking(learner)?;
                }
            }
        }
        if self.partition.is_none() && self.rng.gen_bool(self.p.partition_p) {
            let side: BTreeSet<i64> =
                self.servers.keys().copied().filter(|_| self.rng.gen_bool(0.5)).collect();
            let until = self.now + self.rng.gen_range(200..2_000);
            self.log(|| format!("partition {side:?} until {until}"));
            self.stats.partitions += 1;
            self.partition = Some((side, until));
        }
        Ok(())
    }

    /// Crashes `sid`: its disk keeps what `keep` says of the unsynced writes; back after
    /// `down_for` ms.
    pub fn crash(&mut self, sid: i64, keep: Keep, down_for: u64) -> R {
        self.stats.crashes += 1;
        self.log(|| format!("crash {sid} (keeps {keep:?}), down for {down_for}"));
        let gen = self.end_role(sid);
        let s = self.servers.get_mut(&sid).expect("a configured server");
        s.disk.clear();
        s.meta.clear();
        s.store.crash(keep, &mut self.rng);
        s.reset_role(gen);
        s.role = Role::Down;
        s.fle = None;
        s.wants = None;
        self.down_until.insert(sid, self.now + down_for);
        Ok(())
    }

    /// Starts a crashed server: its disk is recovered and its database reloaded.
    pub fn restart(&mut self, sid: i64) -> R {
        self.down_until.remove(&sid);
        let now = self.now;
        let s = self.server(sid);
        if !matches!(s.role, Role::Down) {
            return Ok(());
        }
        if s.store.restart(now).map_err(|e| format!("server {sid} cannot start: {e}"))? {
            // A crash after the synced records were durable but before currentEpoch was written
            // (the order ZK-4643 requires), when the sync carried records of an epoch the server
            // never joined. Apache 3.8 refuses to start here; see the backends for what they do.
            self.stats.epoch_behind_log += 1;
        }
        let s = self.server(sid);
        let (accepted, current) = s.store.epochs();
        let last = s.store.last_zxid();
        if accepted < epoch_of(last) || accepted < current {
            return Err(format!(
                "server {sid} cannot start: acceptedEpoch {accepted} currentEpoch {current} last zxid {last:#x}"
            ));
        }
        s.store.reload(now)?;
        s.role = Role::Looking;
        s.since_ms = now;
        self.log(|| format!("restart {sid}"));
        self.looking(sid)
    }

    /// Ends the server's current role: its connections close (the peer hears it when reachable).
    fn drop_role(&mut self, sid: i64) -> R {
        let gen = self.end_role(sid);
        let now = self.now;
        let s = self.server(sid);
        // A server leaving a role finishes its disk work first (ZK-4541, -4712: flush on every
        // shutdown), so that the next role starts from what is really on disk.
        while let Some((_, _, op)) = {
            let log_at = s.disk.front().map_or(u64::MAX, |o| o.0);
            let meta_at = s.meta.front().map_or(u64::MAX, |o| o.0);
            let lane = if meta_at < log_at { &mut s.meta } else { &mut s.disk };
            lane.pop_front()
        } {
            apply_op(s, op, false, now)?;
        }
        s.store.sync()?;
        // As Apache after an election: the database is reloaded from disk, so it holds every
        // logged record (a DIFF sync takes the log, not the applied state, as the learner's
        // history).
        s.store.reload(now)?;
        s.reset_role(gen);
        s.role = Role::Looking;
        s.since_ms = now;
        Ok(())
    }

    /// A role ends (crash or not): its connections close, and it gets a new generation
    /// (returned), so that late disk completions and packets of the old role are not taken for
    /// the new one's.
    fn end_role(&mut self, sid: i64) -> u64 {
        let ids: Vec<ConnId> =
            self.conns.iter().filter(|(_, c)| c.leader == sid || c.learner == sid).map(|(i, _)| *i).collect();
        for id in ids {
            self.close_side(id, sid);
        }
        let gen = self.next_gen;
        self.next_gen += 1;
        gen
    }

    /// `sid` closes its end of `id`: the other end gets a close after what is in flight.
    fn close_side(&mut self, id: ConnId, sid: i64) {
        let now = self.now;
        if let Some(c) = self.conns.get_mut(&id) {
            if c.leader == sid {
                c.to_leader.queue.clear();
                c.leader_gen = 0;
                let at = c.to_learner.last_at.max(now + 1);
                c.to_learner.queue.push_back((at, Msg::Closed));
            } else {
                c.to_learner.queue.clear();
                c.learner_gen = 0;
                let at = c.to_leader.last_at.max(now + 1);
                c.to_leader.queue.push_back((at, Msg::Closed));
            }
            if c.leader_gen == 0 && c.learner_gen == 0 {
                self.conns.remove(&id);
            }
        }
    }

    fn send(&mut self, id: ConnId, to_leader: bool, msg: Msg) {
        // Every packet crosses the wire as Apache's bytes and is decoded back.
        let msg = match msg {
            Msg::Packet(p) => {
                let mut buf = bytes::BytesMut::from(&p.to_vec()[..]);
                let decoded = QuorumPacketDecoder::new(JUTE_MAXBUFFER_DEFAULT).decode(&mut buf);
                assert!(buf.is_empty(), "packet {p:?} left bytes behind");
                assert_eq!(decoded, Ok(Some(p.clone())), "packet does not round-trip");
                Msg::Packet(p)
            }
            other => other,
        };
        let delay = self.rng.gen_range(1..=self.p.max_delay_ms);
        let now = self.now;
        if let Some(c) = self.conns.get_mut(&id) {
            let (pipe, open) = if to_leader {
                (&mut c.to_leader, c.leader_gen != 0)
            } else {
                (&mut c.to_learner, c.learner_gen != 0)
            };
            if open && !to_leader && pipe.queue.len() >= self.p.outbox_max {
                // The leader's outbox towards this learner is full: its server closes the
                // connection (zk-server's `send`).
                self.stats.outbox_overflows += 1;
                let leader = c.leader;
                self.log(|| format!("conn {id}: outbox full; {leader} closes it"));
                if let Role::Leading(l) = &mut self.server(leader).role {
                    l.learner_disconnected(id, now);
                }
                self.close_side(id, leader);
                return;
            }
            if open {
                let at = pipe.last_at.max(now + delay);
                pipe.last_at = at;
                pipe.queue.push_back((at, msg));
            }
        }
    }

    fn deliver(&mut self) -> R {
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            for to_leader in [true, false] {
                while let Some(c) = self.conns.get_mut(&id) {
                    let (a, b) = (c.leader, c.learner);
                    let pipe = if to_leader { &mut c.to_leader } else { &mut c.to_learner };
                    if pipe.queue.front().is_none_or(|(at, _)| *at > self.now) {
                        break;
                    }
                    if !reachable(&self.partition, a, b) {
                        break;
                    }
                    let Some((_, msg)) = pipe.queue.pop_front() else { break };
                    let gen = if to_leader { c.leader_gen } else { c.learner_gen };
                    let target = if to_leader { a } else { b };
                    if gen == 0 || self.servers[&target].gen != gen {
                        continue;
                    }
                    if to_leader {
                        self.at_leader(target, id, msg)?;
                    } else {
                        self.server(target).inbox.push_back(msg);
                        self.pump(target)?;
                    }
                }
            }
            // The leader's outbox towards the learner has room again: its sync's next piece.
            let drained = self.conns.get(&id).filter(|c| c.to_learner.queue.is_empty() && c.leader_gen != 0);
            if let Some(leader) = drained.map(|c| c.leader) {
                let now = self.now;
                if let Role::Leading(l) = &mut self.server(leader).role {
                    l.conn_drained(id, now);
                }
                self.drain(leader)?;
            }
        }
        Ok(())
    }

    fn at_leader(&mut self, sid: i64, id: ConnId, msg: Msg) -> R {
        let now = self.now;
        let closed = matches!(msg, Msg::Closed);
        {
            let Role::Leading(l) = &mut self.server(sid).role else { return Ok(()) };
            match msg {
                Msg::Packet(p) => l.handle_packet(id, p, now),
                Msg::Closed => l.learner_disconnected(id, now),
                Msg::Raw(_) => return Err("raw bytes sent to a leader".into()),
            }
        }
        if closed {
            if let Some(c) = self.conns.get_mut(&id) {
                c.leader_gen = 0;
            }
            self.conns.remove(&id);
        }
        self.drain(sid)
    }

    /// Feeds a learner what arrived; raw bytes go to the snapshot being read.
    fn pump(&mut self, sid: i64) -> R {
        loop {
            let now = self.now;
            let s = self.server(sid);
            // Only reading the raw stream stops the packet flow: packets that follow it are fed
            // in while the snapshot installs, and the learner machine must hold them.
            let Some(msg) = s.inbox.pop_front() else { return Ok(()) };
            if let Some(zxid) = s.snap {
                let done = match msg {
                    Msg::Raw(b) => s.store.feed(&b).map_err(|e| format!("{sid}: snapshot: {e}"))?,
                    Msg::Closed => {
                        self.looking(sid)?;
                        return Ok(());
                    }
                    Msg::Packet(p) => return Err(format!("packet {p:?} inside a snapshot stream")),
                };
                if done {
                    s.snap = None;
                    s.installing = true;
                    self.push_disk(sid, DiskOp::Install(zxid));
                }
                continue;
            }
            match msg {
                Msg::Packet(p) => {
                    if p.kind() == Ok(zk_quorum::wire::PacketType::NewLeader) {
                        s.newleader = Some((p.zxid, s.store.last_zxid()));
                    }
                    let Role::Following(l, _) = &mut s.role else { return Ok(()) };
                    l.handle_packet(p, now);
                    self.drain(sid)?;
                }
                Msg::Raw(_) => return Err("raw bytes outside a snapshot".into()),
                Msg::Closed => {
                    self.log(|| format!("{sid}: leader closed the connection"));
                    self.looking(sid)?;
                    return Ok(());
                }
            }
        }
    }

    fn disk_time(&mut self, sid: i64) -> u64 {
        let d = self.rng.gen_range(self.p.min_disk_ms..=self.p.max_disk_ms);
        let last = self.servers[&sid].disk.back().map_or(0, |o| o.0);
        last.max(self.now + d)
    }

    fn push_disk(&mut self, sid: i64, op: DiskOp) {
        if matches!(op, DiskOp::Accepted(_) | DiskOp::Current(_)) {
            let d = self.rng.gen_range(1..=5);
            let now = self.now;
            let s = self.server(sid);
            let at = s.meta.back().map_or(0, |o| o.0).max(now + d);
            s.meta.push_back((at, s.gen, op));
            return;
        }
        let at = self.disk_time(sid);
        let s = self.server(sid);
        let gen = s.gen;
        s.disk.push_back((at, gen, op));
    }

    fn disk(&mut self) -> R {
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids {
            loop {
                let now = self.now;
                let s = self.server(sid);
                let log_at = s.disk.front().map_or(u64::MAX, |o| o.0);
                let meta_at = s.meta.front().map_or(u64::MAX, |o| o.0);
                if log_at.min(meta_at) > now {
                    break;
                }
                let lane = if meta_at < log_at { &mut s.meta } else { &mut s.disk };
                let Some((_, gen, op)) = lane.pop_front() else { break };
                let live = gen == s.gen;
                if !apply_op(s, op, live, now)? {
                    if live {
                        self.log(|| format!("{sid}: truncation reached into a snapshot; syncing again"));
                        self.looking(sid)?;
                    }
                    continue;
                }
                if live {
                    if self.servers[&sid].is_leading() {
                        self.try_commit(sid)?;
                    }
                    self.drain(sid)?;
                    self.pump(sid)?;
                }
            }
        }
        Ok(())
    }

    fn timeouts(&mut self) -> R {
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids {
            let now = self.now;
            match &mut self.server(sid).role {
                Role::Leading(l) if l.poll_timeout().is_some_and(|t| t <= now) => l.handle_timeout(now),
                Role::Following(l, _) if l.poll_timeout().is_some_and(|t| t <= now) => l.handle_timeout(now),
                _ => continue,
            }
            self.drain(sid)?;
        }
        Ok(())
    }

    fn elect(&mut self) -> R {
        if self.p.fle {
            return self.elect_fle();
        }
        let sides: Vec<BTreeSet<i64>> = match &self.partition {
            None => vec![self.servers.keys().copied().collect()],
            Some((side, _)) => {
                let other = self.servers.keys().copied().filter(|s| !side.contains(s)).collect();
                vec![side.clone(), other]
            }
        };
        for side in sides {
            let lookers: Vec<i64> = side
                .iter()
                .copied()
                .filter(|s| {
                    let sv = &self.servers[s];
                    matches!(sv.role, Role::Looking) && sv.since_ms + 50 <= self.now
                })
                .collect();
            if lookers.is_empty() {
                continue;
            }
            let leader = side
                .iter()
                .copied()
                .filter(|s| matches!(&self.servers[s].role, Role::Leading(l) if !l.is_stopped()))
                .max_by_key(|s| match &self.servers[s].role {
                    Role::Leading(l) => l.epoch().unwrap_or(0),
                    _ => 0,
                });
            let leader = match leader {
                Some(l) => l,
                None => {
                    let voters: Vec<i64> =
                        lookers.iter().copied().filter(|s| self.verifier.is_voter(*s)).collect();
                    if !self.verifier.contains_quorum(voters.iter().copied()) {
                        continue;
                    }
                    let Some(best) = voters.iter().copied().max_by_key(|s| {
                        let sv = &self.servers[s];
                        (sv.store.epochs().1, sv.store.last_zxid(), *s)
                    }) else {
                        continue;
                    };
                    self.lead(best)?;
                    best
                }
            };
            for s in lookers {
                if s != leader {
                    self.follow(s, leader)?;
                }
            }
        }
        Ok(())
    }

    fn lead(&mut self, sid: i64) -> R {
        self.drop_role(sid)?;
        let cfg = self.cfg(sid);
        let now = self.now;
        let window = self.p.window;
        let s = self.server(sid);
        let local = s.local();
        let logged = s.store.logged();
        let recent: Hist = logged[logged.len().saturating_sub(window)..].to_vec();
        let mut leader = Leader::new(cfg, local, recent, now);
        leader.set_database_bytes(logged.iter().map(|r| r.1.len() as u64).sum());
        s.role = Role::Leading(Box::new(leader));
        self.log(|| format!("{sid} leads with {local:?}"));
        self.drain(sid)
    }

    fn follow(&mut self, sid: i64, leader: i64) -> R {
        self.drop_role(sid)?;
        let cfg = self.cfg(sid);
        let now = self.now;
        let id = self.next_conn;
        self.next_conn += 1;
        let (leader_gen, learner_gen) = (self.servers[&leader].gen, self.servers[&sid].gen);
        self.conns.insert(
            id,
            Conn {
                leader,
                learner: sid,
                leader_gen,
                learner_gen,
                to_learner: Pipe::default(),
                to_leader: Pipe::default(),
            },
        );
        let s = self.server(sid);
        let local = s.local();
        let mut learner = Learner::new(cfg, leader, s.observer, local, now);
        learner.connected(now);
        s.role = Role::Following(Box::new(learner), id);
        self.log(|| format!("{sid} follows {leader} on conn {id} with {local:?}"));
        if let Role::Leading(l) = &mut self.server(leader).role {
            l.learner_connected(id, now);
        }
        self.drain(leader)?;
        self.drain(sid)
    }

    /// A write nobody waits for, at every established leader.
    fn propose_background(&mut self) -> R {
        let leaders: Vec<i64> =
            self.servers.iter().filter(|(_, s)| s.serving() && s.is_leading()).map(|(k, _)| *k).collect();
        for sid in leaders {
            let n = self.servers[&sid].proposer.next_counter + 1;
            let req = background_write(sid, n);
            self.propose(sid, req)?;
        }
        Ok(())
    }

    /// The leader `sid` prepares, logs and proposes a write.
    fn propose(&mut self, sid: i64, req: ForwardedRequest) -> R {
        let now = self.now;
        let wall = self.wall_ms(sid);
        let s = self.server(sid);
        let Some(epoch) = s.proposer.established else { return Ok(()) };
        s.proposer.next_counter += 1;
        let zxid = make_zxid(epoch, s.proposer.next_counter);
        let payload = s.store.prep(zxid, wall, &req)?;
        let prev = s.store.last_zxid();
        s.store.append(zxid, payload.clone())?;
        if self.proposals.insert(zxid, (prev, payload.clone())).is_some() {
            return Err(format!("{zxid:#x} proposed twice"));
        }
        let s = self.server(sid);
        s.proposer.outstanding.insert(zxid, payload.clone());
        if let Role::Leading(l) = &mut s.role {
            l.propose(zxid, payload, now);
        }
        self.push_disk(sid, DiskOp::Sync(zxid));
        self.drain(sid)
    }

    fn drain(&mut self, sid: i64) -> R {
        // Bounded: each round consumes actions the machine emitted for finite input.
        for _ in 0..100_000 {
            let mut leader_actions = Vec::new();
            let mut learner_actions = Vec::new();
            match &mut self.server(sid).role {
                Role::Leading(l) => {
                    while let Some(a) = l.poll_action() {
                        leader_actions.push(a);
                    }
                }
                Role::Following(l, id) => {
                    let id = *id;
                    while let Some(a) = l.poll_action() {
                        learner_actions.push((id, a));
                    }
                }
                _ => return Ok(()),
            }
            if leader_actions.is_empty() && learner_actions.is_empty() {
                return Ok(());
            }
            for a in leader_actions {
                self.leader_action(sid, a)?;
                if !matches!(self.servers[&sid].role, Role::Leading(_)) {
                    return Ok(());
                }
            }
            for (id, a) in learner_actions {
                let r = self.learner_action(sid, id, a);
                if r.is_err() || !matches!(self.servers[&sid].role, Role::Following(..)) {
                    self.held_newleader_ack = None;
                    return r;
                }
            }
            // No proposal ACK followed in this batch: the held NEWLEADER ACK goes now.
            if let Some((conn, p)) = self.held_newleader_ack.take() {
                self.send(conn, true, Msg::Packet(p));
            }
        }
        Err(format!("{sid}: the Zab machine does not stop emitting actions"))
    }

    fn leader_action(&mut self, sid: i64, a: LeaderAction) -> R {
        let now = self.now;
        match a {
            LeaderAction::Send { conn, packet } => {
                match packet.kind() {
                    Ok(zk_quorum::wire::PacketType::Diff) => self.stats.diffs += 1,
                    Ok(zk_quorum::wire::PacketType::Trunc) => self.stats.truncs += 1,
                    Ok(zk_quorum::wire::PacketType::Snap) => self.stats.snaps += 1,
                    _ => {}
                }
                self.send(conn, false, Msg::Packet(packet))
            }
            LeaderAction::SendRaw { conn, bytes } => self.send(conn, false, Msg::Raw(bytes)),
            LeaderAction::Close { conn, reason } => {
                self.stats.leader_closes += 1;
                self.log(|| format!("{sid} closes conn {conn}: {reason}"));
                self.close_side(conn, sid);
            }
            LeaderAction::PersistAcceptedEpoch(e) => self.push_disk(sid, DiskOp::Accepted(e)),
            LeaderAction::PersistCurrentEpoch(e) => self.push_disk(sid, DiskOp::Current(e)),
            LeaderAction::ReadLog { req, from_zxid, through_zxid, max_bytes } => {
                self.stats.log_reads += 1;
                let s = self.server(sid);
                let logged = s.store.logged();
                let Role::Leading(l) = &mut s.role else { return Ok(()) };
                match logged.iter().rposition(|r| r.0 <= from_zxid) {
                    None => l.log_read_failed(req, now),
                    Some(i) => {
                        let entries: Hist =
                            logged[i..].iter().filter(|r| r.0 <= through_zxid).cloned().collect();
                        let bytes: u64 = entries.iter().skip(1).map(|r| r.1.len() as u64).sum();
                        if max_bytes.is_some_and(|m| bytes > m) {
                            l.log_read_too_big(req, now);
                            self.stats.diffs_too_big += 1;
                        } else {
                            l.log_read(req, entries, now);
                        }
                    }
                }
            }
            LeaderAction::SerializeSnapshot { req, zxid } => {
                let s = self.server(sid);
                let bytes = s.store.snapshot(zxid).map_err(|e| format!("{sid}: {e}"))?;
                let half = bytes.len() / 2;
                let Role::Leading(l) = &mut s.role else { return Ok(()) };
                l.snapshot_bytes(req, bytes.slice(..half), false, now);
                l.snapshot_bytes(req, bytes.slice(half..), true, now);
            }
            LeaderAction::Established { epoch } => {
                self.stats.established += 1;
                if let Some(other) = self.epoch_leader.insert(epoch, sid) {
                    return Err(format!("epoch {epoch} established by {other} and {sid}"));
                }
                let voters = VoterSet::with_verifier(sid, self.verifier.clone());
                let s = self.server(sid);
                s.proposer.established = Some(epoch);
                s.proposer.next_counter = 0;
                s.proposer.ledger = Some(AckLedger::new(voters));
                let logged = s.store.history();
                self.log(|| format!("{sid} established epoch {epoch} with {} logged txns", logged.len()));
                self.new_epoch_history(sid, epoch, logged)?;
            }
            LeaderAction::Ack { sid: from, zxid } => {
                if let Some(ledger) = self.server(sid).proposer.ledger.as_mut() {
                    ledger.ack(from, zxid);
                }
                self.try_commit(sid)?;
            }
            LeaderAction::AckReset { sid: from, to } => {
                if let Some(ledger) = self.server(sid).proposer.ledger.as_mut() {
                    ledger.reset(from, to);
                }
            }
            // Only clients forward requests, and the simulation has none: background writes are
            // the leaders' own.
            LeaderAction::Forwarded { .. } | LeaderAction::Touch { .. } | LeaderAction::Revalidate { .. } => {
            }
            // This simulation makes no handover (node_sim runs them on the real node).
            LeaderAction::HandoverAcked { .. } | LeaderAction::LeadershipRequested { .. } => {}
            LeaderAction::StepDown { reason } => {
                self.log(|| format!("{sid} steps down: {reason}"));
                self.looking(sid)?;
            }
        }
        Ok(())
    }

    /// A new epoch is established with the leader's log: its history must extend the committed
    /// chain (no acknowledged write lost), and becomes the chain.
    fn new_epoch_history(&mut self, sid: i64, epoch: u32, logged: Hist) -> R {
        let history = self.history_of(sid, &logged)?;
        if history.len() < self.chain.len() || history[..self.chain.len()] != self.chain[..] {
            return Err(format!(
                "leader {sid} of epoch {epoch} lost committed txns: chain ends {:?}, its history {:?}",
                self.chain.last().map(|r| r.0),
                history.iter().map(|r| r.0).collect::<Vec<_>>()
            ));
        }
        self.chain = history;
        Ok(())
    }

    /// The whole history of `sid`, whose log (or model history) is `logged`: the records it
    /// shows, preceded by those its snapshot covers, found through the proposals' predecessor
    /// links (the snapshot's content is checked against them by the database comparison).
    fn history_of(&self, sid: i64, logged: &Hist) -> Result<Hist, String> {
        let last = self.servers[&sid].store.last_zxid();
        let mut full = Vec::new();
        let mut z = last;
        // Bounded: predecessor links strictly decrease.
        while z != 0 {
            let Some((prev, payload)) = self.proposals.get(&z) else {
                return Err(format!("{sid}: holds {z:#x}, which nobody proposed"));
            };
            full.push((z, payload.clone()));
            if *prev >= z {
                return Err(format!("{sid}: predecessor of {z:#x} is {prev:#x}"));
            }
            z = *prev;
        }
        full.reverse();
        let tail = &full[full.len().saturating_sub(logged.len())..];
        if tail != &logged[..] {
            return Err(format!(
                "{sid}: log {:?} is not the history its last zxid {last:#x} names",
                logged.iter().map(|r| r.0).collect::<Vec<_>>()
            ));
        }
        Ok(full)
    }

    fn try_commit(&mut self, sid: i64) -> R {
        // Bounded by the outstanding proposals.
        loop {
            let now = self.now;
            let s = &self.servers[&sid];
            let Some(ledger) = s.proposer.ledger.as_ref() else { break };
            let Some(&zxid) = s.proposer.outstanding.keys().next() else { break };
            if ledger.committable([zxid]).is_none() {
                break;
            }
            let s = self.server(sid);
            let Some(payload) = s.proposer.outstanding.remove(&zxid) else { break };
            if s.store.applied_zxid() >= zxid {
                return Err(format!("leader {sid} commits {zxid:#x} after {:#x}", s.store.applied_zxid()));
            }
            s.store.commit(zxid, &payload)?;
            if let Role::Leading(l) = &mut s.role {
                l.committed(zxid, now);
            }
            self.stats.commits += 1;
            if self.chain.last().is_some_and(|r| r.0 >= zxid) {
                return Err(format!("leader {sid} commits {zxid:#x} behind the chain's end"));
            }
            self.chain.push((zxid, payload.clone()));
        }
        self.drain(sid)
    }

    fn learner_action(&mut self, sid: i64, conn: ConnId, a: LearnerAction) -> R {
        match a {
            LearnerAction::Send(p) => {
                let is_ack = p.kind() == Ok(zk_quorum::wire::PacketType::Ack);
                let newleader_ack = is_ack && self.servers[&sid].newleader.is_some_and(|(z, _)| z == p.zxid);
                self.check_newleader_ack(sid, &p)?;
                if newleader_ack
                    && self.p.early_proposal_ack_p > 0.0
                    && self.rng.gen_bool(self.p.early_proposal_ack_p)
                {
                    self.held_newleader_ack = Some((conn, p));
                    return Ok(());
                }
                if is_ack && counter_of(p.zxid) != 0 {
                    if let Some((held_conn, held)) = self.held_newleader_ack.take() {
                        // ZK-4685 as Apache 3.8.0 learners do it: the proposal's ACK first.
                        self.stats.early_proposal_acks += 1;
                        self.send(conn, true, Msg::Packet(p));
                        self.send(held_conn, true, Msg::Packet(held));
                        return Ok(());
                    }
                }
                if let Some((held_conn, held)) = self.held_newleader_ack.take() {
                    self.send(held_conn, true, Msg::Packet(held));
                }
                self.send(conn, true, Msg::Packet(p))
            }
            LearnerAction::PersistAcceptedEpoch(e) => self.push_disk(sid, DiskOp::Accepted(e)),
            LearnerAction::PersistCurrentEpoch(e) => {
                // ZK-4643: the synced transactions it committed are durable before currentEpoch
                // is written (outstanding proposals of the sync may follow: the NEWLEADER ACK
                // waits for them, see `check_newleader_ack`).
                let s = &self.servers[&sid];
                if let Some((_, logged)) = s.newleader {
                    let logged = logged.min(s.store.applied_zxid());
                    if s.store.durable_zxid() < logged {
                        return Err(format!(
                            "{sid}: currentEpoch {e} written with the log durable only through {:#x} of {logged:#x} (ZK-4643)",
                            s.store.durable_zxid()
                        ));
                    }
                }
                self.push_disk(sid, DiskOp::Current(e))
            }
            LearnerAction::Truncate { after_zxid } => self.push_disk(sid, DiskOp::Truncate(after_zxid)),
            LearnerAction::ReceiveSnapshot { zxid } => {
                let s = self.server(sid);
                s.snap = Some(zxid);
                s.store.receive(zxid);
            }
            LearnerAction::Log { zxid, payload } => {
                let s = self.server(sid);
                let last = s.store.last_zxid();
                if zxid <= last {
                    return Err(format!("{sid}: Log {zxid:#x} after {last:#x}"));
                }
                // ZK-4925: no holes. Zxids are dense within an epoch, and an epoch's first
                // transaction has counter 1.
                let follows =
                    if epoch_of(zxid) == epoch_of(last) { zxid == last + 1 } else { zxid & 0xffff_ffff == 1 };
                if !follows {
                    return Err(format!("{sid}: Log {zxid:#x} after {last:#x} leaves a hole (ZK-4925)"));
                }
                s.store.append(zxid, payload)?;
                self.push_disk(sid, DiskOp::Sync(zxid));
            }
            LearnerAction::Commit { zxid, payload } => {
                let s = self.server(sid);
                if s.store.applied_zxid() >= zxid {
                    return Err(format!("{sid}: Commit {zxid:#x} after {:#x}", s.store.applied_zxid()));
                }
                s.store.commit(zxid, &payload)?;
                if s.up_to_date {
                    if let Some(r) = self.chain.iter().find(|r| r.0 == zxid) {
                        if r.1 != payload {
                            return Err(format!("{sid}: committed {zxid:#x} differs from the chain's"));
                        }
                    } else if self.chain.last().is_some_and(|r| r.0 > zxid) {
                        return Err(format!("{sid}: committed {zxid:#x}, which the chain skips"));
                    }
                }
            }
            LearnerAction::UpToDate => {
                let s = self.servers.get_mut(&sid).expect("a configured server");
                s.up_to_date = true;
                s.store.check_applied(&self.chain).map_err(|e| format!("{sid}: up to date, but {e}"))?;
            }
            // No clients: no syncs to answer. Reconfiguration is off: nothing is activated.
            LearnerAction::SyncDone
            | LearnerAction::Revalidated { .. }
            | LearnerAction::Activate { .. }
            | LearnerAction::Unproposed { .. } => {}
            LearnerAction::Disconnect { reason } => {
                self.log(|| format!("{sid} disconnects: {reason}"));
                self.looking(sid)?;
            }
        }
        Ok(())
    }

    /// Whether the ensemble is quiet: one leader established, nothing outstanding, every
    /// server synced with the same applied zxid.
    pub fn converged(&self) -> bool {
        let leaders: Vec<&Server<S>> = self
            .servers
            .values()
            .filter(|s| matches!(&s.role, Role::Leading(l) if l.is_established()))
            .collect();
        if leaders.len() != 1 {
            return false;
        }
        let leader = leaders[0];
        if !leader.proposer.outstanding.is_empty() || leader.store.durable_zxid() != leader.store.last_zxid()
        {
            return false;
        }
        self.servers.values().all(|s| {
            s.sid == leader.sid
                || (s.up_to_date
                    && s.store.applied_zxid() == leader.store.applied_zxid()
                    && s.store.durable_zxid() == s.store.last_zxid()
                    && s.disk.is_empty()
                    && s.meta.is_empty())
        })
    }

    fn check_converged(&self) -> R {
        if self.verbose {
            for s in self.servers.values() {
                if let Some(f) = &s.fle {
                    println!(
                        "{}: election {:?} vote {:?} round {}",
                        s.sid,
                        f.state(),
                        f.current_vote(),
                        f.logical_clock()
                    );
                }
            }
        }
        if !self.converged() {
            let states: Vec<String> = self
                .servers
                .values()
                .map(|s| {
                    let role = match &s.role {
                        Role::Down => "down".to_string(),
                        Role::Looking => "looking".into(),
                        Role::Leading(l) => format!("leading(est={})", l.is_established()),
                        Role::Following(l, _) => {
                            format!("following {} (up={})", l.leader_sid(), l.is_up_to_date())
                        }
                    };
                    format!(
                        "{}: {role} applied {:#x} log {:#x}",
                        s.sid,
                        s.store.applied_zxid(),
                        s.store.last_zxid()
                    )
                })
                .collect();
            return Err(format!("no convergence after the quiet period: {states:?}"));
        }
        let reference = S::reference_dump(&self.chain);
        for s in self.servers.values() {
            let logged = s.store.history();
            if self.history_of(s.sid, &logged)? != self.chain {
                return Err(format!(
                    "{}: log {:?} (last {:#x}) differs from the chain {:?}",
                    s.sid,
                    logged.iter().map(|r| r.0).collect::<Vec<_>>(),
                    s.store.last_zxid(),
                    self.chain.iter().map(|r| r.0).collect::<Vec<_>>()
                ));
            }
            let dump = s.store.dump();
            if dump != reference {
                return Err(format!(
                    "{}: database differs from the chain's:\n{}",
                    s.sid,
                    first_difference(&dump, &reference)
                ));
            }
        }
        Ok(())
    }
}

impl<S: Store> Server<S> {
    /// Forgets the state of the role that ended; `gen` is the next role's.
    fn reset_role(&mut self, gen: u64) {
        self.gen = gen;
        self.inbox.clear();
        self.snap = None;
        self.installing = false;
        self.up_to_date = false;
        self.newleader = None;
        self.acked_newleader = false;
        self.proposer = Proposer::default();
    }

    fn is_leading(&self) -> bool {
        matches!(self.role, Role::Leading(_))
    }
}

impl<S: Store> Sim<S> {
    /// ZK-4685, -3911, -4646: the first ACK a learner sends after NEWLEADER acknowledges it, and
    /// by then what the sync logged is durable and currentEpoch is the new epoch.
    fn check_newleader_ack(&mut self, sid: i64, p: &QuorumPacket) -> R {
        if p.kind() != Ok(zk_quorum::wire::PacketType::Ack) {
            return Ok(());
        }
        let s = self.server(sid);
        let Some((zxid, logged)) = s.newleader.take() else { return Ok(()) };
        // What the sync committed (applied by now, ZK-4394); outstanding proposals it carried
        // are ACKed one by one once durable.
        let logged = logged.min(s.store.applied_zxid());
        if p.zxid != zxid {
            return Err(format!("{sid}: first ACK after NEWLEADER {zxid:#x} is for {:#x} (ZK-4685)", p.zxid));
        }
        if s.store.durable_zxid() < logged {
            return Err(format!(
                "{sid}: NEWLEADER ACKed with the log durable through {:#x} of {logged:#x} (ZK-3911)",
                s.store.durable_zxid()
            ));
        }
        if i64::from(s.store.epochs().1) != epoch_of(zxid) as i64 {
            return Err(format!(
                "{sid}: NEWLEADER ACKed before currentEpoch {} was written (ZK-4643)",
                epoch_of(zxid)
            ));
        }
        s.acked_newleader = true;
        Ok(())
    }
}

/// The first line where two dumps differ, for failure messages.
fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {i}: {x:?} vs the chain's {y:?}");
        }
    }
    format!("{} lines vs the chain's {}", a.lines().count(), b.lines().count())
}

/// A server as a scripted run sees it.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// (acceptedEpoch, currentEpoch) on disk; (0, 0) while down.
    pub epochs: (u32, u32),
    /// Looking for a leader.
    pub looking: bool,
    /// A learner up to date with its leader.
    pub up_to_date: bool,
    /// This role ACKed a NEWLEADER.
    pub acked_newleader: bool,
}

/// Scripted runs (the named scenarios) drive the same simulator without random faults.
impl<S: Store> Sim<S> {
    /// Gives `sid` a durable state before the run: epochs and a history, in the log or (purged)
    /// all in a snapshot.
    pub fn preload(&mut self, sid: i64, accepted: u32, current: u32, hist: &Hist, purged: bool) -> R {
        let mut prev = 0;
        for (z, p) in hist {
            if let Some((_, q)) = self.proposals.insert(*z, (prev, p.clone())) {
                if q != *p {
                    return Err(format!("{z:#x} preloaded with two payloads"));
                }
            }
            prev = *z;
        }
        let s = self.server(sid);
        s.store.preload(accepted, current, hist, purged)?;
        s.store.reload(0)
    }

    /// The established leader, if any.
    pub fn established_leader(&self) -> Option<i64> {
        self.servers
            .values()
            .find(|s| matches!(&s.role, Role::Leading(l) if l.is_established()))
            .map(|s| s.sid)
    }

    /// What a scripted run looks at in a server.
    pub fn view(&self, sid: i64) -> View {
        let s = &self.servers[&sid];
        View {
            epochs: if s.is_up() { s.store.epochs() } else { (0, 0) },
            looking: matches!(s.role, Role::Looking),
            up_to_date: s.up_to_date,
            acked_newleader: s.acked_newleader,
        }
    }

    /// The leader `sid` proposes a write nobody waits for.
    pub fn write(&mut self, sid: i64) -> R {
        let n = self.servers[&sid].proposer.next_counter + 1;
        self.propose(sid, background_write(sid, n))
    }

    /// (durable zxid, last logged zxid) of `sid`.
    pub fn log_state(&self, sid: i64) -> (i64, i64) {
        let s = &self.servers[&sid].store;
        (s.durable_zxid(), s.last_zxid())
    }

    /// Steps (without random faults) for `ms`.
    pub fn run_for(&mut self, ms: u64) -> R {
        let end = self.now + ms;
        while self.now < end {
            self.step(false)?;
        }
        Ok(())
    }

    /// Steps (without random faults) until `cond` holds, at most `max_ms`.
    pub fn run_until(&mut self, max_ms: u64, what: &str, cond: impl Fn(&Sim<S>) -> bool) -> R {
        let end = self.now + max_ms;
        while self.now < end {
            self.step(false)?;
            if cond(self) {
                return Ok(());
            }
        }
        Err(format!("t={}: no {what} within {max_ms} ms", self.now))
    }

    /// Restarts everyone, waits for quiet, checks that every server holds the committed chain.
    pub fn finish(&mut self) -> R {
        let down: Vec<i64> = self.down_until.keys().copied().collect();
        for sid in down {
            self.restart(sid)?;
        }
        let _ = self.run_until(self.p.quiet_ms, "convergence", |s| s.converged());
        self.check_converged()
    }
}

/// Applies a completed disk operation; `live` when the role that asked for it still runs (then
/// it hears back).
/// Returns false when the role must end (a truncation that could not stop at its zxid).
fn apply_op<S: Store>(s: &mut Server<S>, op: DiskOp, live: bool, now: u64) -> Result<bool, String> {
    match op {
        DiskOp::Sync(upto) => {
            s.store.sync()?;
            if live {
                match &mut s.role {
                    // The leader's own durability is its ACK, counted once, in its ledger (as
                    // the server's core counts it).
                    Role::Leading(_) => {
                        if let Some(ledger) = s.proposer.ledger.as_mut() {
                            ledger.ack(s.sid, upto);
                        }
                    }
                    Role::Following(l, _) => l.durable(upto, now),
                    _ => {}
                }
            }
        }
        DiskOp::Accepted(e) | DiskOp::Current(e) => {
            s.store.set_epoch(matches!(op, DiskOp::Accepted(_)), e)?;
            if live {
                match &mut s.role {
                    Role::Leading(l) => l.epoch_persisted(now),
                    Role::Following(l, _) => l.epoch_persisted(now),
                    _ => {}
                }
            }
        }
        DiskOp::Truncate(z) => {
            if !s.store.truncate(z, now)? {
                return Ok(false);
            }
            if live {
                if let Role::Following(l, _) = &mut s.role {
                    l.truncated(z, now);
                }
            }
        }
        DiskOp::Install(z) => {
            s.store.install(z, live)?;
            if live {
                s.installing = false;
                if let Role::Following(l, _) = &mut s.role {
                    l.snapshot_loaded(z, now);
                }
            }
        }
    }
    Ok(true)
}

fn reachable(partition: &Option<(BTreeSet<i64>, u64)>, a: i64, b: i64) -> bool {
    match partition {
        None => true,
        Some((side, _)) => side.contains(&a) == side.contains(&b),
    }
}

/// A history for preloading: one record per counter `from..=to` of `epoch`, tagged.
pub fn hist<S: Store>(recs: &[(u32, u32, u32, &str)]) -> Hist {
    let mut v = Vec::new();
    for (epoch, from, to, tag) in recs {
        for c in *from..=*to {
            v.push((make_zxid(*epoch, c), format!("{tag}{epoch}.{c}")));
        }
    }
    S::make_hist(&v)
}

/// Runs one scenario script; panics with its error.
pub fn scenario<S: Store>(name: &str, p: Params, script: impl FnOnce(&mut Sim<S>) -> R) {
    let verbose = std::env::var("ZAB_VERBOSE").is_ok();
    let mut sim = Sim::<S>::new(7, p, verbose);
    if let Err(e) = script(&mut sim) {
        panic!("{name}: {e} (ZAB_VERBOSE=1 to trace)");
    }
}

fn run_seed<S: Store>(seed: u64, p: Params, verbose: bool) -> Result<Stats, String> {
    let mut sim = Sim::<S>::new(seed, p, verbose);
    sim.run().map(|_| sim.stats.clone()).map_err(|e| format!("t={} {e}", sim.now))
}

/// Seeds per configuration: `ZAB_SEEDS`, else `default`.
pub fn seeds(default: u64) -> u64 {
    std::env::var("ZAB_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Runs `n` seeds from `base` (or the one `ZAB_SEED` names, traced); prints each failing seed
/// with the command that replays it, then fails.
pub fn run_many<S: Store>(test: &str, name: &str, p: Params, n: u64, base: u64) -> Stats {
    if let Some(seed) = std::env::var("ZAB_SEED").ok().and_then(|s| s.parse::<u64>().ok()) {
        let r = run_seed::<S>(seed, p, true);
        println!("{name} seed {seed}: {r:?}");
        assert!(r.is_ok());
        return r.unwrap_or_default();
    }
    let mut total = Stats::default();
    let mut failures = Vec::new();
    for seed in base..base + n {
        match run_seed::<S>(seed, p.clone(), false) {
            Ok(s) => total.add(&s),
            Err(e) => {
                println!(
                    "{name}: seed {seed} failed; replay: ZAB_SEED={seed} cargo test -p zk-quorum --test zab_sim {test} -- --nocapture\n  {e}"
                );
                failures.push(seed);
            }
        }
    }
    println!("{name}: {n} seeds from {base}, {} failed, {total:?}", failures.len());
    assert!(failures.is_empty(), "{name}: failing seeds {failures:?}");
    assert!(total.commits > 0 && total.established > 0);
    total
}
