//! The simulated world: servers running the real node, the network between them, clients, time,
//! and the faults one seed draws. Events are kept in a queue ordered by (time, sequence); the
//! nodes' own timers (`Node::poll_timeout`) are woken when due. Everything is drawn from one
//! seeded generator, so a seed replays the same run exactly.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_log::{AppendMode, CrashModel, FaultStorage};
use zk_proto::Request;
use zk_quorum::config::QuorumConfig;
use zk_quorum::quorum::QuorumVerifier;
use zk_quorum::reconfig::Placement;
use zk_quorum::wire::PacketType;
use zk_server::core::zxid::Zxid;
use zk_server::core::{Action, Event, Role, NODES_PER_STEP};
use zk_server::ensemble::peers::SnapshotIntake;
use zk_server::node::replica::{read_anchored, recent_history};
use zk_server::node::{EpochFile, Input, LogPosition, Output, PeerConn, ReplicaConfig};
use zk_server::snapshots::{self, SnapshotReport};
use zk_server::stats::ConnStats;

use super::client::{self, Client, Link as ClientLink, Record, OP_TIMEOUT_MS, SESSION_TIMEOUT_MS};
use super::linear;
use super::net::{End, Msg, Net};
use super::server::{self, HistTxn, LogJob, Server, ServerSpec};

/// What a crash keeps of what was not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Power loss keeping only what was synced.
    Durable,
    /// Power loss keeping what the disk's crash model draws (any subset of the unsynced pages).
    Random,
    /// Power loss keeping some of the log's unsynced pages, out of order (every other one):
    /// what was being written is there in part, with holes.
    Part,
    /// kill -9: the process ends, the page cache keeps everything written.
    All,
}

/// A moment of a run a scenario can stop at ([`World::run_until_moment`]).
#[derive(Debug)]
pub enum Moment<'a> {
    /// Server `.0`'s node asks for `.1`: it is carried out, then the run stops (nothing else
    /// any node asks for is carried out until the run goes on).
    Output(i64, &'a Output),
    /// Server `.0`'s node is handed `.1`: it handles it, then the run stops before carrying out
    /// what that asks for.
    Input(i64, &'a Input),
    /// An event or a node's timer was handled, with everything it led to.
    Step,
}

type StopAt = Box<dyn FnMut(&World, &Moment<'_>) -> bool>;

/// A server as a scenario sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct View {
    /// Running.
    pub up: bool,
    /// (acceptedEpoch, currentEpoch) as its process knows them ((0, 0) while down).
    pub epochs: (i64, i64),
    /// Electing (or connecting to the leader it elected).
    pub looking: bool,
    /// A learner up to date with its leader (in broadcast).
    pub up_to_date: bool,
    /// Its learner connection of the moment sent its leader the NEWLEADER ACK.
    pub acked_newleader: bool,
    /// Leading, established or not.
    pub leading: bool,
}

/// Packets a connection's pipe holds before the sender is cut off, as zk-server's outbox.
const OUTBOX_PACKETS: usize = zk_server::ensemble::peer_net::OUTBOX_PACKETS;

/// Accepted connections are numbered from here (the node numbers its dials from 1).
const ACCEPTED_BASE: PeerConn = 1 << 48;

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct Params {
    /// Voters (server ids 1..=voters).
    pub voters: usize,
    /// Observers (the next ids).
    pub observers: usize,
    /// How long faults and clients run, ms.
    pub run_ms: u64,
    /// Whether faults are drawn.
    pub faults: bool,
    /// Clients.
    pub clients: usize,
    /// zoo.cfg's snapCount.
    pub snap_count: u64,
    /// Snapshot chunks take up to this long to write, ms (slow snapshots meet elections).
    pub snapshot_chunk_ms: u64,
    /// tickTime, initLimit, syncLimit.
    pub tick_ms: u64,
    pub init_limit: u64,
    pub sync_limit: u64,
    /// How long the healed ensemble gets to converge, ms.
    pub settle_ms: u64,
    /// How long the log's thread takes for a job (a group's sync, a truncation, a reset), ms:
    /// drawn in `lo..hi`, times the server's disk slowness.
    pub log_ms: (u64, u64),
    /// `commitLogCount`: the committed proposals a leader keeps to sync learners by DIFF.
    pub committed_log_max: usize,
    /// Learners' NEWLEADER ACKs reach the wire behind the proposal ACK that follows them, as
    /// Apache's learners before 3.8.5 send them (ZK-4685): the leader must count the proposal
    /// and keep waiting for the NEWLEADER ACK.
    pub early_proposal_acks: bool,
    /// `reconfigEnabled=true`, client addresses in the configuration, and (with `faults`)
    /// reconfig requests among the faults ([`World::reconfig_fault`]).
    pub reconfig: bool,
    /// `testingonly.initialZxid`: each new epoch's counter starts here, so that runs reach the
    /// end of an epoch (2^32 zxids) and the leader must hand over to a new one.
    pub initial_zxid: Option<u32>,
    /// Operators' leadership requests among the faults ([`World::handover_fault`]): `ydld` on
    /// the leader (or another server), `rqld` on a follower.
    pub handovers: bool,
}

impl Params {
    /// Three voters.
    pub fn three() -> Params {
        Params {
            voters: 3,
            observers: 0,
            run_ms: 20_000,
            faults: true,
            clients: 4,
            snap_count: 60,
            snapshot_chunk_ms: 20,
            tick_ms: 100,
            init_limit: 10,
            sync_limit: 5,
            settle_ms: 40_000,
            log_ms: (1, 8),
            committed_log_max: 20,
            early_proposal_acks: false,
            reconfig: false,
            initial_zxid: None,
            handovers: false,
        }
    }

    /// Five voters.
    pub fn five() -> Params {
        Params { voters: 5, ..Params::three() }
    }

    /// Three voters and an observer.
    pub fn with_observer() -> Params {
        Params { observers: 1, ..Params::three() }
    }

    /// One voter and two observers (standaloneEnabled=false).
    pub fn single_voter() -> Params {
        Params { voters: 1, observers: 2, ..Params::three() }
    }

    /// Three voters and two observers with dynamic reconfiguration: reconfig requests among the
    /// faults remove voters (the leader too) and observers, add removed servers back, promote
    /// observers and demote voters, so that runs pass through single-voter configurations,
    /// observers and non-voting followers.
    pub fn reconfig() -> Params {
        Params { observers: 2, reconfig: true, ..Params::three() }
    }

    /// Three voters and an observer whose epochs end after a few hundred zxids: each leader
    /// exhausts its epoch's counter and steps down, and the next election starts a new epoch
    /// (F9: an exhausted counter is a handover, not a process exit).
    pub fn short_epochs() -> Params {
        Params { observers: 1, initial_zxid: Some(u32::MAX - 400), ..Params::three() }
    }

    /// Three voters and an observer, with operators moving the leadership among the faults:
    /// `ydld` on the leader (now and then on another server, which refuses it) and `rqld` on a
    /// follower, so handovers meet crashes, partitions, slow disks and each other.
    pub fn handovers() -> Params {
        Params { observers: 1, handovers: true, ..Params::three() }
    }
}

#[derive(Debug)]
enum Ev {
    /// The head of a connection's pipe arrives.
    Pipe { link: u64, dir: usize },
    /// An election mailbox delivers.
    Mail { from: i64, to: i64 },
    /// The last notification delivered from `from` to `to` arrives again.
    MailAgain { from: i64, to: i64 },
    /// The log's thread finished the group under way.
    LogDone { sid: i64, gen: u64 },
    /// The log's report of a reset to a received snapshot reaches the driver (which then
    /// removes the snapshots past `cut` and tells the node): a power loss before it finds the
    /// log reset and those snapshots still there.
    ResetReported { sid: i64, gen: u64, zxid: i64, cut: i64 },
    /// The snapshot thread finished its job.
    SnapDone { sid: i64, gen: u64 },
    /// An epoch file write finished.
    EpochDone { sid: i64, gen: u64, file: EpochFile, epoch: u32 },
    /// A dial resolves.
    Dial { sid: i64, gen: u64, conn: PeerConn, leader: i64 },
    /// The set of peers known down reaches a server.
    PeersDown { sid: i64, gen: u64 },
    /// A client acts, if the token is still its live tick's.
    Client(usize, u64),
    /// The next fault.
    Fault,
    /// A server comes back.
    Restart(i64),
    /// A partition heals.
    Heal,
}

/// An event in the queue, ordered by its time and then by when it was scheduled.
struct Queued {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The world. See the module docs.
pub struct World {
    pub t: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Queued>>,
    rng: StdRng,
    pub servers: Vec<Server>,
    net: Net,
    clients: Vec<Client>,
    pub rec: Record,
    p: Params,
    /// Established leaders by epoch.
    leaders: BTreeMap<u32, i64>,
    /// Epochs whose leader proposed the last zxid an epoch has.
    epochs_run_out: BTreeSet<u32>,
    /// Who was seen leading which epoch last (to check each leadership once).
    leading_seen: BTreeMap<i64, u32>,
    /// Client connections: (sid, gen, conn) -> client.
    client_conns: BTreeMap<(i64, u64, u64), usize>,
    /// Snapshot streams being received, per (link, dir).
    intakes: BTreeMap<(u64, usize), SnapshotIntake>,
    /// Per server, the next accepted connection number.
    next_accepted: BTreeMap<i64, PeerConn>,
    /// Servers down (crashed, not yet restarted).
    down: BTreeSet<i64>,
    /// The last notification delivered per (from, to).
    last_mail: BTreeMap<(i64, i64), (zk_quorum::wire::Notification, u64)>,
    /// Disk latency multiplier per server (a slow disk).
    slow: BTreeMap<i64, u64>,
    /// Servers that read no zkrs extension of a FOLLOWERINFO, as an Apache leader: its flags
    /// are stripped on the way in ([`World::ignore_zkrs_flags`]).
    flags_ignored: BTreeSet<i64>,
    /// When each server's epoch file writer is free.
    epoch_free: BTreeMap<i64, u64>,
    /// Violations found.
    pub failures: Vec<String>,
    pub trace: bool,
    faults_on: bool,
    /// Counts for the report.
    pub stats: BTreeMap<&'static str, u64>,
    /// The paths of preloaded histories.
    preloaded: BTreeSet<String>,
    /// Paths an established leader held (of preloaded histories and clients' unique creates,
    /// which nothing deletes): NEWLEADER made them committed, with the epoch that did.
    committed: BTreeMap<String, u32>,
    /// Learner connections (server, process, connection) that were handed a NEWLEADER and have
    /// not ACKed it: its zxid, and where the log would end with every job then queued done.
    newleader: BTreeMap<(i64, u64, PeerConn), (i64, i64)>,
    /// The learner connection whose NEWLEADER ACK was the last packet sent (in this step).
    just_acked_newleader: Option<(i64, u64, PeerConn)>,
    /// Learner connections between their NEWLEADER and their UPTODATE.
    after_newleader: BTreeSet<(i64, u64, PeerConn)>,
    /// The learner connection that last ACKed a NEWLEADER, per server: (process, connection).
    acked_newleader: BTreeMap<i64, (u64, PeerConn)>,
    /// NEWLEADER ACKs held back behind the next packet (`Params::early_proposal_acks`).
    held_acks: BTreeMap<(i64, u64, PeerConn), zk_quorum::wire::QuorumPacket>,
    /// Syncs (DIFF, TRUNC or SNAP) each server was sent.
    syncs_of: BTreeMap<i64, u64>,
    /// A scenario's stop (see [`World::run_until_moment`]), and whether it struck.
    stop_at: Option<StopAt>,
    halted: bool,
    /// Versions of the configurations some server put in force (`Output::InstallConfig`).
    pub installed: BTreeSet<i64>,
}

impl World {
    /// A world of fresh servers for `seed`.
    pub fn new(seed: u64, p: Params, trace: bool) -> World {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = p.voters + p.observers;
        let mut lines = Vec::new();
        for sid in 1..=n as i64 {
            let kind = if sid as usize <= p.voters { "participant" } else { "observer" };
            lines.push(server_line(sid, kind, p.reconfig));
        }
        lines.push("version=0".into());
        let config = QuorumConfig::parse(&lines.join("\n")).expect("the simulation's ensemble parses");
        let mut extra =
            format!("snapCount={}\nsnapshot.idleSeconds=2\nautopurge.snapRetainCount=3\n", p.snap_count);
        if let Some(z) = p.initial_zxid {
            extra.push_str(&format!("testingonly.initialZxid={z}\n"));
        }
        if p.reconfig {
            extra.push_str(&format!(
                "reconfigEnabled=true\nDigestAuthenticationProvider.superDigest={}\n",
                client::SUPER_DIGEST
            ));
        }
        let mut servers = Vec::new();
        for sid in 1..=n as i64 {
            let replica = ReplicaConfig {
                my_sid: sid,
                config: config.clone(),
                observer: sid as usize > p.voters,
                tick_ms: p.tick_ms,
                init_limit: p.init_limit,
                sync_limit: p.sync_limit,
                committed_log_max: p.committed_log_max,
                read_only_mode: false,
                reconfig_enabled: p.reconfig,
                standalone_enabled: false,
                // Small trees streamed in many steps and pieces, so a SNAP is fuzzy; a DIFF's
                // pieces bounded by their bytes or (two seeds in three) by their packets.
                snap_step_items: 8,
                sync_piece_bytes: 2048,
                sync_piece_packets: [6, 16, 1024][(seed % 3) as usize],
            };
            let spec = ServerSpec { extra_cfg: extra.clone(), replica };
            let mut s = Server::new(sid, spec, rng.gen());
            // Each disk its own append mode, and out-of-order page writeback at a power loss.
            let mode = if rng.gen_bool(0.5) { AppendMode::Pwrite } else { AppendMode::Mapped };
            s.log_disk = FaultStorage::with_models(rng.gen(), mode, CrashModel::Subset);
            s.snap_disk = FaultStorage::with_models(rng.gen(), AppendMode::Pwrite, CrashModel::Subset);
            servers.push(s);
        }
        let clients = (0..p.clients).map(Client::new).collect();
        World {
            t: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            rng,
            servers,
            net: Net::default(),
            clients,
            rec: Record::new(),
            p,
            leaders: BTreeMap::new(),
            epochs_run_out: BTreeSet::new(),
            leading_seen: BTreeMap::new(),
            client_conns: BTreeMap::new(),
            intakes: BTreeMap::new(),
            next_accepted: BTreeMap::new(),
            down: BTreeSet::new(),
            last_mail: BTreeMap::new(),
            slow: BTreeMap::new(),
            flags_ignored: BTreeSet::new(),
            epoch_free: BTreeMap::new(),
            failures: Vec::new(),
            trace,
            faults_on: false,
            stats: BTreeMap::new(),
            preloaded: BTreeSet::new(),
            committed: BTreeMap::new(),
            newleader: BTreeMap::new(),
            just_acked_newleader: None,
            after_newleader: BTreeSet::new(),
            acked_newleader: BTreeMap::new(),
            held_acks: BTreeMap::new(),
            syncs_of: BTreeMap::new(),
            stop_at: None,
            halted: false,
            installed: BTreeSet::new(),
        }
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.trace {
            let line = format!("{:>7} {}\n", self.t, what());
            eprint!("{line}");
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_insert(0) += 1;
    }

    fn at(&mut self, dt: u64, ev: Ev) {
        let seq = self.seq;
        self.seq += 1;
        self.queue.push(Reverse(Queued { at: self.t + dt, seq, ev }));
    }

    fn server(&mut self, sid: i64) -> &mut Server {
        &mut self.servers[(sid - 1) as usize]
    }

    fn gen_of(&self, sid: i64) -> Option<u64> {
        let s = &self.servers[(sid - 1) as usize];
        s.proc.as_ref().map(|_| s.gen)
    }

    // -----------------------------------------------------------------------------------------
    // Running.

    /// Starts every server and the clients; faults start if the parameters say so.
    pub fn start(&mut self) {
        self.start_without(&[]);
    }

    /// [`Self::start`], but the servers in `down` stay down (as after a crash) until restarted.
    pub fn start_without(&mut self, down: &[i64]) {
        for sid in 1..=self.servers.len() as i64 {
            if down.contains(&sid) {
                self.down.insert(sid);
            } else {
                self.boot(sid);
            }
        }
        for c in 0..self.clients.len() {
            let dt = self.rng.gen_range(10..200);
            self.tick_client(c, dt);
        }
        if self.p.faults {
            self.faults_on = true;
            let dt = self.rng.gen_range(500..2000);
            self.at(dt, Ev::Fault);
        }
    }

    fn boot(&mut self, sid: i64) {
        if self.p.reconfig && !self.servers[(sid - 1) as usize].spec.replica.config.servers.contains_key(&sid)
        {
            // zkrs-server refuses to start from a configuration that does not list it (exit
            // status 1, `ServerConfig::not_in_peer_list`), as Apache's members do after a
            // reconfiguration removed them. The operator starts it again as Apache's
            // documentation prescribes for a joiner: the newest configuration a member has,
            // with this server listed as an observer, unversioned. It adopts the ensemble's
            // configuration from its peers and follows as a non-voting member until added back.
            self.count("starts refused: not in the configuration");
            let mut joiner = self.newest_config();
            joiner.version = 0;
            let line = server_line(sid, "observer", true);
            let spec = QuorumConfig::parse(&line)
                .expect("a joiner's line parses")
                .servers
                .remove(&sid)
                .expect("it names the joiner");
            joiner.servers.insert(sid, spec);
            self.note(|| format!("server {sid} is not in its configuration: started again as a joiner"));
            let r = &mut self.server(sid).spec.replica;
            r.config = joiner;
            r.observer = true;
        }
        let t = self.t;
        let seed = self.rng.gen();
        let offset = 0;
        let s = self.server(sid);
        if let Err(e) = s.start(t, offset, seed) {
            self.failures.push(format!("t={t}: server {sid} could not start: {e}"));
            self.down.insert(sid);
            return;
        }
        self.down.remove(&sid);
        self.note(|| format!("server {sid} started"));
        self.tell_down_all();
        self.pump(sid);
    }

    /// Runs until sim time `end`.
    pub fn run_until(&mut self, end: u64) {
        self.resume();
        let mut same_t = 0u32;
        let mut last_t = u64::MAX;
        while self.failures.is_empty() && !self.halted {
            let next_ev = self.queue.peek().map(|r| r.0.at);
            let next_timer = self.next_timer();
            let t = match (next_ev, next_timer) {
                (Some(a), Some((b, _))) => a.min(b),
                (a, b) => match a.or(b.map(|x| x.0)) {
                    Some(t) => t,
                    None => break,
                },
            };
            if t > end {
                self.t = self.t.max(end);
                break;
            }
            self.t = self.t.max(t);
            if self.t == last_t {
                same_t += 1;
                if same_t > 200_000 {
                    let timer = self.next_timer();
                    let detail = timer.and_then(|(_, sid)| {
                        let p = self.servers[(sid - 1) as usize].proc.as_ref()?;
                        Some(format!(
                            "server {sid}: core due at {:?}, replica due at {:?}",
                            p.node.core().poll_timeout(),
                            p.node.replica().and_then(|r| r.debug_timeout())
                        ))
                    });
                    self.failures.push(format!(
                        "t={}: no progress of time (a timer always due: {detail:?})\n{}",
                        self.t,
                        self.describe()
                    ));
                    return;
                }
            } else {
                same_t = 0;
                last_t = self.t;
            }
            if next_ev.is_some_and(|e| e <= self.t) {
                let Reverse(Queued { ev, .. }) = self.queue.pop().expect("peeked");
                self.event(ev);
            } else if let Some((_, sid)) = next_timer {
                let _span = tracing::debug_span!("server", sid, t = self.t).entered();
                let now = self.servers[(sid - 1) as usize].now(self.t);
                if let Some(p) = self.server(sid).proc.as_mut() {
                    p.node.handle_timeout(now);
                }
                self.pump(sid);
            }
            if self.stop_at.is_some() && self.at_moment(&Moment::Step) {
                self.halted = true;
            }
        }
    }

    /// Whether a scenario's stop strikes at `m` (it then is spent).
    fn at_moment(&mut self, m: &Moment<'_>) -> bool {
        let Some(mut stop) = self.stop_at.take() else { return false };
        if stop(self, m) {
            return true;
        }
        self.stop_at = Some(stop);
        false
    }

    /// After a stop: what the nodes asked for meanwhile is carried out now.
    fn resume(&mut self) {
        if !self.halted {
            return;
        }
        self.halted = false;
        for sid in 1..=self.servers.len() as i64 {
            self.pump(sid);
        }
    }

    /// The earliest due node timer (sim ms, server), from each process's cached deadline.
    fn next_timer(&self) -> Option<(u64, i64)> {
        let mut best: Option<(u64, i64)> = None;
        for s in &self.servers {
            let Some(at) = s.proc.as_ref().and_then(|p| p.timer) else { continue };
            let at = at.max(self.t);
            if best.is_none_or(|b| at < b.0) {
                best = Some((at, s.sid));
            }
        }
        best
    }

    fn event(&mut self, ev: Ev) {
        match ev {
            Ev::Pipe { link, dir } => self.deliver(link, dir),
            Ev::Mail { from, to } => self.deliver_mail(from, to),
            Ev::MailAgain { from, to } => {
                if let Some((n, gen)) = self.last_mail.get(&(from, to)).cloned() {
                    if self.gen_of(from) == Some(gen)
                        && self.gen_of(to).is_some()
                        && self.net.reachable(from, to)
                    {
                        self.count("stale notifications");
                        self.input(to, Input::Notification { from, notification: n });
                    }
                }
            }
            Ev::LogDone { sid, gen } => self.log_done(sid, gen),
            Ev::ResetReported { sid, gen, zxid, cut } => {
                if self.gen_of(sid) != Some(gen) {
                    return;
                }
                self.server(sid).proc.as_mut().expect("up").reset_reported = false;
                if !self.discard_snapshots_after(sid, cut, true) {
                    return;
                }
                self.input(sid, Input::LogReset { zxid });
                if self.gen_of(sid) == Some(gen) {
                    self.server(sid).proc.as_mut().expect("up").log_busy = false;
                    self.kick_log(sid);
                }
            }
            Ev::SnapDone { sid, gen } => self.snap_done(sid, gen),
            Ev::EpochDone { sid, gen, file, epoch } => {
                if self.gen_of(sid) != Some(gen) {
                    return;
                }
                let p = self.server(sid).proc.as_mut().expect("up");
                let result = match file {
                    EpochFile::Accepted => p.epochs.set_accepted(i64::from(epoch)),
                    EpochFile::Current => p.epochs.set_current(i64::from(epoch)),
                }
                .map_err(|e| e.to_string());
                self.input(sid, Input::EpochWritten { file, result });
            }
            Ev::Dial { sid, gen, conn, leader } => self.dial_done(sid, gen, conn, leader),
            Ev::PeersDown { sid, gen } => {
                if self.gen_of(sid) == Some(gen) {
                    let down = self.down.clone();
                    self.input(sid, Input::PeersDown(down));
                }
            }
            Ev::Client(c, token) => {
                if self.clients[c].tick == token {
                    self.client_tick(c)
                }
            }
            Ev::Fault => self.fault(),
            Ev::Restart(sid) => {
                if self.server(sid).proc.is_none() {
                    self.boot(sid);
                }
            }
            Ev::Heal => {
                self.net.side = None;
                self.note(|| "partition healed".into());
            }
        }
    }

    /// Hands `input` to server `sid`'s node and carries out what it asks.
    fn input(&mut self, sid: i64, input: Input) {
        if self.input_unpumped(sid, input) {
            self.pump(sid);
        }
    }

    /// Hands `sid`'s node an input without carrying out its outputs; false if it is down.
    fn input_unpumped(&mut self, sid: i64, input: Input) -> bool {
        if self.server(sid).proc.is_none() {
            return false;
        }
        let _span = tracing::debug_span!("server", sid, t = self.t).entered();
        let now = self.servers[(sid - 1) as usize].now(self.t);
        let stop = self.stop_at.is_some() && self.at_moment(&Moment::Input(sid, &input));
        let Some(p) = self.server(sid).proc.as_mut() else { return false };
        p.node.handle(now, input);
        if stop {
            self.halted = true;
        }
        true
    }

    /// Carries out every output of `sid`'s node (none while a scenario's stop holds the run).
    fn pump(&mut self, sid: i64) {
        let _span = tracing::debug_span!("server", sid, t = self.t).entered();
        loop {
            if self.server(sid).proc.is_none() {
                return;
            }
            if self.halted {
                break;
            }
            let now = self.servers[(sid - 1) as usize].now(self.t);
            let Some(o) = self.server(sid).proc.as_mut().and_then(|p| p.node.poll_action(now)) else { break };
            let stop = self.stop_at.is_some() && self.at_moment(&Moment::Output(sid, &o));
            self.output(sid, o);
            if stop {
                self.halted = true;
            }
        }
        if !self.halted {
            self.release_held_acks(sid);
            self.just_acked_newleader = None;
        }
        // A node's deadline moves only when it handles something: cache it until then.
        if let Some(p) = self.server(sid).proc.as_mut() {
            p.timer = p.node.poll_timeout().map(|ms| p.started_ms + ms);
        }
        self.check_leader(sid);
    }

    // -----------------------------------------------------------------------------------------
    // Outputs.

    fn output(&mut self, sid: i64, o: Output) {
        let gen = self.servers[(sid - 1) as usize].gen;
        match o {
            Output::Core(a) => self.action(sid, a),
            Output::SendNotification { to, notification } => {
                if to as usize > self.servers.len() || to < 1 {
                    return;
                }
                self.net.mail.insert((sid, to), (notification, gen));
                if self.net.mail_scheduled.insert((sid, to)) {
                    let dt = self.rng.gen_range(1..4);
                    self.at(dt, Ev::Mail { from: sid, to });
                }
                // A late duplicate now and then, as a re-dialled election connection re-sends
                // the newest message it had (by then perhaps an old one).
                if self.faults_on && self.rng.gen_bool(0.01) {
                    let dt = self.rng.gen_range(20..400);
                    self.at(dt, Ev::MailAgain { from: sid, to });
                }
            }
            Output::SendPacket { conn, packet } => {
                match PacketType::from_wire(packet.packet_type) {
                    Ok(PacketType::Snap) => self.count("syncs by SNAP"),
                    Ok(PacketType::Diff) => self.count("syncs by DIFF"),
                    Ok(PacketType::Trunc) => self.count("syncs by TRUNC"),
                    Ok(PacketType::Proposal | PacketType::Inform)
                        if packet.zxid & 0xffff_ffff == i64::from(Zxid::LAST_COUNTER)
                            && self.epochs_run_out.insert((packet.zxid >> 32) as u32) =>
                    {
                        self.count("epochs run to their last zxid");
                    }
                    _ => {}
                }
                let key = (sid, gen, conn);
                let proposal_ack =
                    packet.packet_type == PacketType::Ack.to_wire() && packet.zxid & 0xffff_ffff != 0;
                if proposal_ack && self.just_acked_newleader.take() == Some(key) {
                    self.count("proposal ACKs right behind a NEWLEADER ACK");
                }
                let newleader_ack = self.check_learner_ack(key, &packet);
                if newleader_ack {
                    self.just_acked_newleader = Some(key);
                }
                if newleader_ack && self.p.early_proposal_acks {
                    // Held until the next packet this learner sends (see `release_held_acks`).
                    self.held_acks.insert(key, packet);
                    return;
                }
                if let Some(held) = self.held_acks.remove(&key) {
                    if proposal_ack {
                        // ZK-4685 as Apache's learners before 3.8.5 send it: the ACK of a
                        // proposal of the sync first, the NEWLEADER ACK behind it.
                        self.count("early proposal acks");
                        self.send(sid, gen, conn, Msg::Packet(packet));
                        self.send(sid, gen, conn, Msg::Packet(held));
                        return;
                    }
                    self.send(sid, gen, conn, Msg::Packet(held));
                }
                self.send(sid, gen, conn, Msg::Packet(packet))
            }
            Output::SendRaw { conn, bytes } => {
                self.count("SNAP stream pieces");
                self.send(sid, gen, conn, Msg::Raw(bytes))
            }
            Output::WatchDrain { conn } => {
                if let Some((id, i)) = self.net.find(sid, gen, conn) {
                    let l = self.net.links.get_mut(&id).expect("found");
                    if l.pipes[i].is_empty() {
                        self.input(sid, Input::PeerDrained { conn });
                    } else {
                        l.drain_watch[i] = true;
                    }
                }
            }
            Output::AdmitLearner { conn } => {
                if let Some((id, _)) = self.net.find(sid, gen, conn) {
                    self.net.links.get_mut(&id).expect("found").admitted = true;
                    self.schedule_pipe(id, 0);
                } else {
                    self.input(sid, Input::PeerClosed { conn, why: "gone before it was admitted".into() });
                }
            }
            Output::ClosePeer { conn } => {
                let leading = self.servers[(sid - 1) as usize]
                    .proc
                    .as_ref()
                    .and_then(|p| p.node.replica())
                    .is_some_and(|r| r.learner_counts().is_some());
                if leading {
                    self.count("learner connections a leader closed");
                }
                if let Some((id, i)) = self.net.find(sid, gen, conn) {
                    self.close_end(id, i, "closed by the peer");
                }
            }
            Output::Dial { conn, leader } => {
                let reachable = self.net.reachable(sid, leader) && self.gen_of(leader).is_some();
                let up = self.gen_of(leader).is_some();
                // A refused connection answers at once; one into a partition waits out the
                // connect timeout (initLimit).
                let dt = if reachable {
                    self.rng.gen_range(1..4)
                } else if up {
                    self.p.tick_ms * self.p.init_limit
                } else {
                    1
                };
                self.at(dt, Ev::Dial { sid, gen, conn, leader });
            }
            Output::PersistEpoch { file, epoch } => {
                if file == EpochFile::Current {
                    self.check_current_epoch(sid, gen, epoch);
                }
                // The driver writes epoch files one after another, in the order asked.
                let dt = self.disk_ms(sid, 1, 5);
                let at = self.epoch_free.get(&sid).copied().unwrap_or(0).max(self.t) + dt;
                self.epoch_free.insert(sid, at);
                self.at(at - self.t, Ev::EpochDone { sid, gen, file, epoch });
            }
            Output::Reload { window } => {
                self.check_reload(sid);
                let s = &mut self.servers[(sid - 1) as usize];
                let settings = s.settings();
                let tree_cfg = s.tree_config(&settings);
                let p = s.proc.as_mut().expect("up");
                let reader = p.log.reader();
                let result = snapshots::rebuild(&s.snap_disk, tree_cfg, &reader).map(Box::new);
                let log = LogPosition { base: p.log.base_zxid(), durable: p.log.durable_zxid() };
                let recent = recent_history(&reader, window);
                self.count("reloads");
                self.input(sid, Input::Reloaded { result, log, recent });
            }
            Output::ReadLog { req, from, through, max_records, max_bytes } => {
                self.count("DIFFs read from the log");
                let p = self.server(sid).proc.as_mut().expect("up");
                let reader = p.log.reader();
                let read = read_anchored(&reader, from, through, max_records, max_bytes);
                self.input(sid, Input::LogRead { req, read });
            }
            Output::TruncateLog { after } => {
                if !self.discard_snapshots_after(sid, after, false) {
                    return;
                }
                self.log_job(sid, LogJob::Truncate(after));
            }
            Output::InstallSnapshot { zxid } => {
                let s = &self.servers[(sid - 1) as usize];
                let p = s.proc.as_ref().expect("up");
                // As the driver: written under the fence, retention held until the snapshots
                // past it go, once the log's reset to it is done (`log_done`).
                let written = p.fence.cut_for_reset(|| {
                    snapshots::write_whole(&s.snap_disk, p.node.database(), NODES_PER_STEP, s.compression())
                        .map(|_| zxid)
                });
                if let Err(e) = written {
                    self.failures.push(format!("t={}: server {sid}: snapshot write: {e}", self.t));
                    return;
                }
                self.server(sid).proc.as_mut().expect("up").discard_after_reset = Some(zxid);
                self.log_job(sid, LogJob::Reset(zxid));
            }
            // The driver writes it beside zoo.cfg durably before it goes on (and zoo.cfg names
            // it): a restart starts from it.
            Output::InstallConfig(config) => {
                self.count("configurations installed");
                self.installed.insert(config.version);
                self.note(|| {
                    format!("server {sid} installs {:#x}: {}", config.version, config_summary(&config))
                });
                let r = &mut self.server(sid).spec.replica;
                r.observer = zk_quorum::reconfig::placement(&config, sid) == Placement::Observer;
                r.config = *config;
            }
        }
    }

    fn action(&mut self, sid: i64, a: Action) {
        let gen = self.servers[(sid - 1) as usize].gen;
        match a {
            Action::Reply { conn, frame } | Action::Frame { conn, frame } => {
                self.deliver_to_client(sid, gen, conn, frame)
            }
            Action::Close { conn } => {
                if let Some(c) = self.client_conns.remove(&(sid, gen, conn)) {
                    self.client_dropped(c);
                }
            }
            Action::SessionReady { .. } | Action::ReleasePermit | Action::ResumeLog => {}
            Action::Persist { records, .. } => self.log_job(sid, LogJob::Append(records)),
            Action::PurgeLogBefore { zxid } => {
                let p = self.server(sid).proc.as_mut().expect("up");
                let _ = p.log.purge_before(zxid);
            }
            Action::Snapshot(job) => {
                if matches!(job, zk_server::core::SnapJob::Abort) {
                    self.count("snapshots abandoned");
                }
                let p = self.server(sid).proc.as_mut().expect("up");
                // Stamped as the driver's queue stamps it, when handed over (a Begin's only).
                let generation = if matches!(job, zk_server::core::SnapJob::Begin { .. }) {
                    p.fence.generation()
                } else {
                    0
                };
                p.snap_jobs.push_back((job, generation));
                self.kick_snap(sid);
            }
            Action::Stop { reason } => {
                self.failures.push(format!("t={}: server {sid} stopped: {reason}", self.t));
                self.server(sid).stopped = Some(reason);
                self.process_ends(sid);
            }
            other => self
                .failures
                .push(format!("t={}: server {sid}: a quorum action left the node: {other:?}", self.t)),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Disks.

    fn disk_ms(&mut self, sid: i64, lo: u64, hi: u64) -> u64 {
        let k = self.slow.get(&sid).copied().unwrap_or(1);
        self.rng.gen_range(lo..hi) * k
    }

    fn log_job(&mut self, sid: i64, job: LogJob) {
        let p = self.server(sid).proc.as_mut().expect("up");
        p.log_jobs.push_back(job);
        self.kick_log(sid);
    }

    /// Starts the log thread's next job: a group of appends is written now (not yet durable)
    /// and synced when the job completes, as zk-log's writer does; appends that come meanwhile
    /// make the next group.
    fn kick_log(&mut self, sid: i64) {
        let gen = self.servers[(sid - 1) as usize].gen;
        let epoch_first = i64::from(self.p.initial_zxid.unwrap_or(0)) + 1;
        let p = self.server(sid).proc.as_mut().expect("up");
        if p.log_busy || p.log_jobs.is_empty() {
            return;
        }
        p.log_busy = true;
        if matches!(p.log_jobs.front(), Some(LogJob::Append(_))) {
            let mut failed = None;
            let mut hole = None;
            while let Some(LogJob::Append(_)) = p.log_jobs.front() {
                let Some(LogJob::Append(b)) = p.log_jobs.pop_front() else { unreachable!("checked") };
                // ZK-4925: no holes. Zxids are dense within an epoch, and an epoch's first
                // transaction has counter 1 (or the one after `testingonly.initialZxid`).
                let (last, first) = (p.log.last_zxid(), b.first_zxid().unwrap_or(0));
                let dense = if first >> 32 == last >> 32 {
                    first == last + 1
                } else {
                    first & 0xffff_ffff == epoch_first
                };
                if first != 0 && !dense && hole.is_none() {
                    hole = Some((last, first));
                }
                if let Err(e) = p.log.append(&b) {
                    failed = Some(e);
                    break;
                }
            }
            p.log_jobs.push_front(LogJob::Sync);
            if let Some((last, first)) = hole {
                let t = self.t;
                self.failures.push(format!(
                    "t={t}: server {sid} logs 0x{first:x} after 0x{last:x}: a hole in its log (ZK-4925)"
                ));
            }
            let p = self.server(sid).proc.as_mut().expect("up");
            if let Some(error) = failed {
                p.log_jobs.pop_front();
                p.log_busy = false;
                self.input(sid, Input::LogFailed { error });
                return;
            }
        }
        let (lo, hi) = self.p.log_ms;
        let dt = self.disk_ms(sid, lo, hi);
        self.at(dt, Ev::LogDone { sid, gen });
    }

    /// Removes server `sid`'s snapshots past `cut` as the driver does (`ends_reset`: the last
    /// step of installing a snapshot received from the leader); false (a failure of the run)
    /// if that fails.
    fn discard_snapshots_after(&mut self, sid: i64, cut: i64, ends_reset: bool) -> bool {
        let disk = self.server(sid).snap_disk.clone();
        let fence = self.server(sid).proc.as_ref().expect("up").fence.clone();
        let discard = || snapshots::discard_after(&disk, cut);
        let discarded = if ends_reset { fence.reset_done(discard) } else { fence.cut(discard) };
        match discarded {
            Ok(trash) => {
                snapshots::remove_trash(&disk, &trash);
                true
            }
            Err(e) => {
                self.failures.push(format!("t={}: server {sid}: discard_after: {e}", self.t));
                false
            }
        }
    }

    fn log_done(&mut self, sid: i64, gen: u64) {
        if self.gen_of(sid) != Some(gen) {
            return;
        }
        let p = self.server(sid).proc.as_mut().expect("up");
        p.log_busy = false;
        let Some(job) = p.log_jobs.pop_front() else { return };
        let input = match job {
            LogJob::Sync => match p.log.sync() {
                Ok(()) => Input::Durable { zxid: p.log.durable_zxid() },
                Err(error) => Input::LogFailed { error },
            },
            LogJob::Append(_) => unreachable!("appends are written when their group starts"),
            LogJob::Truncate(z) => match p.log.truncate_after(z) {
                Ok(()) => Input::LogTruncated { zxid: z },
                Err(error) => Input::LogFailed { error },
            },
            LogJob::Reset(z) => match p.log.reset_to(z) {
                Ok(()) => {
                    if let Some(cut) = p.discard_after_reset.take() {
                        // The writer's report reaches the driver a moment later (up to 2 ms): a
                        // window a power loss can strike. The log stays busy until the report is
                        // handled, as the writer's reports arrive in order.
                        p.log_busy = true;
                        p.reset_reported = true;
                        let report_ms = self.rng.gen_range(0..3);
                        self.at(report_ms, Ev::ResetReported { sid, gen, zxid: z, cut });
                        return;
                    }
                    Input::LogReset { zxid: z }
                }
                Err(error) => Input::LogFailed { error },
            },
        };
        self.input(sid, input);
        if self.gen_of(sid) == Some(gen) {
            self.kick_log(sid);
        }
    }

    fn kick_snap(&mut self, sid: i64) {
        let gen = self.servers[(sid - 1) as usize].gen;
        let chunk_ms = self.p.snapshot_chunk_ms.max(1);
        let dt = self.rng.gen_range(0..chunk_ms) + 1;
        let p = self.server(sid).proc.as_mut().expect("up");
        if p.snap_busy || p.snap_jobs.is_empty() {
            return;
        }
        p.snap_busy = true;
        self.at(dt, Ev::SnapDone { sid, gen });
    }

    fn snap_done(&mut self, sid: i64, gen: u64) {
        if self.gen_of(sid) != Some(gen) {
            return;
        }
        let p = self.server(sid).proc.as_mut().expect("up");
        p.snap_busy = false;
        let Some((job, generation)) = p.snap_jobs.pop_front() else { return };
        let report = p.snaps.run(job, generation);
        match report {
            Some(SnapshotReport::ChunkDone(buffer)) => {
                self.input(sid, Input::Core(Event::SnapshotChunkDone { buffer }))
            }
            Some(SnapshotReport::Done { ok, purge_logs_before }) => {
                if ok {
                    self.server(sid).snapshots_written += 1;
                    self.count("snapshots");
                }
                self.input(sid, Input::Core(Event::SnapshotDone { ok, purge_logs_before }));
            }
            Some(SnapshotReport::Retained { purge_logs_before }) => {
                self.input(sid, Input::Core(Event::Retained { purge_logs_before }))
            }
            None => {}
        }
        if self.gen_of(sid) == Some(gen) {
            self.kick_snap(sid);
        }
    }

    // -----------------------------------------------------------------------------------------
    // The network.

    fn deliver_mail(&mut self, from: i64, to: i64) {
        self.net.mail_scheduled.remove(&(from, to));
        let Some((n, gen)) = self.net.mail.get(&(from, to)).cloned() else { return };
        if self.gen_of(from) != Some(gen) {
            // The sender's process is gone, and its outbox with it.
            self.net.mail.remove(&(from, to));
            return;
        }
        if self.gen_of(to).is_none() || !self.net.reachable(from, to) {
            // Kept: the sender's connection manager delivers it once the peer can be reached.
            if self.net.mail_scheduled.insert((from, to)) {
                self.at(50, Ev::Mail { from, to });
            }
            return;
        }
        self.net.mail.remove(&(from, to));
        self.last_mail.insert((from, to), (n.clone(), gen));
        if self.faults_on && self.rng.gen_bool(0.005) {
            return; // lost with a connection that dropped
        }
        self.input(to, Input::Notification { from, notification: n });
    }

    fn send(&mut self, sid: i64, gen: u64, conn: PeerConn, m: Msg) {
        let Some((id, i)) = self.net.find(sid, gen, conn) else { return };
        let l = self.net.links.get_mut(&id).expect("found");
        if !l.open[1 - i] && l.pipes[i].is_empty() {
            // The other end is gone: writes fail silently until the reader's close arrives.
            return;
        }
        l.pipes[i].push_back(m);
        if l.pipes[i].len() > OUTBOX_PACKETS {
            self.count("outbox overflows");
            self.close_end(id, i, "its outbox overflowed");
            self.input(sid, Input::PeerClosed { conn, why: "its outbox overflowed".into() });
            return;
        }
        self.schedule_pipe(id, i);
    }

    fn schedule_pipe(&mut self, id: u64, dir: usize) {
        let Some(l) = self.net.links.get_mut(&id) else { return };
        if l.scheduled[dir] || l.pipes[dir].is_empty() {
            return;
        }
        l.scheduled[dir] = true;
        let dt = self.rng.gen_range(0..3);
        self.at(dt, Ev::Pipe { link: id, dir });
    }

    /// End `i` of link `id` closes: it reads no more, and the other end sees the close after what
    /// was queued for it.
    fn close_end(&mut self, id: u64, i: usize, why: &str) {
        let Some(l) = self.net.links.get_mut(&id) else { return };
        if !l.open[i] {
            return;
        }
        l.open[i] = false;
        l.pipes[1 - i].clear();
        l.pipes[i].push_back(Msg::Close(why.to_owned()));
        self.intakes.remove(&(id, 1 - i));
        self.schedule_pipe(id, i);
    }

    fn deliver(&mut self, id: u64, dir: usize) {
        let Some(l) = self.net.links.get(&id) else { return };
        let (from, to, admitted, reader_open) = (l.ends[dir], l.ends[1 - dir], l.admitted, l.open[1 - dir]);
        let reachable = self.net.reachable(from.sid, to.sid);
        let reader_alive = self.gen_of(to.sid) == Some(to.gen);
        let l = self.net.links.get_mut(&id).expect("present");
        l.scheduled[dir] = false;
        if !reader_open || !reader_alive {
            // The reader is gone (closed, or its process ended).
            l.pipes[dir].clear();
            l.open[1 - dir] = false;
            return;
        }
        // The acceptor reads nothing before its node admits the connection; nothing crosses a
        // partition (TCP holds it).
        if (dir == 0 && !admitted) || !reachable {
            l.scheduled[dir] = true;
            self.at(5, Ev::Pipe { link: id, dir });
            return;
        }
        let Some(m) = l.pipes[dir].pop_front() else { return };
        let drained = l.pipes[dir].is_empty() && l.drain_watch[dir];
        if drained {
            l.drain_watch[dir] = false;
        }
        let more = !l.pipes[dir].is_empty();
        match m {
            Msg::Packet(mut packet) => {
                if self.flags_ignored.contains(&to.sid) {
                    strip_zkrs_flags(&mut packet);
                }
                let snap = packet.packet_type == PacketType::Snap.to_wire();
                let newleader = packet.packet_type == PacketType::NewLeader.to_wire();
                if matches!(
                    PacketType::from_wire(packet.packet_type),
                    Ok(PacketType::Snap | PacketType::Diff | PacketType::Trunc)
                ) {
                    *self.syncs_of.entry(to.sid).or_insert(0) += 1;
                }
                let key = (to.sid, to.gen, to.conn);
                match PacketType::from_wire(packet.packet_type) {
                    Ok(PacketType::NewLeader) => {
                        self.after_newleader.insert(key);
                    }
                    Ok(PacketType::UpToDate) => {
                        self.after_newleader.remove(&key);
                    }
                    Ok(PacketType::Commit) if self.after_newleader.contains(&key) => {
                        self.count("COMMITs between NEWLEADER and UPTODATE")
                    }
                    _ => {}
                }
                let zxid = packet.zxid;
                // As the driver: a node that leads an established epoch or follows a leader it
                // is up to date with takes every packet already read before its outputs are
                // carried out (a follower logs their proposals as one batch); otherwise each
                // packet is a step of its own.
                let batching = self.gen_of(to.sid) == Some(to.gen)
                    && self.server(to.sid).proc.as_ref().is_some_and(|p| p.node.in_broadcast());
                if batching {
                    self.input_unpumped(to.sid, Input::Packet { conn: to.conn, packet });
                    self.more_packets(id, dir, to);
                    self.pump(to.sid);
                } else {
                    self.input(to.sid, Input::Packet { conn: to.conn, packet });
                }
                if newleader && self.gen_of(to.sid) == Some(to.gen) {
                    // What the sync handed the log so far must be durable before the NEWLEADER
                    // ACK (ZK-3911, -4646, -4785, -3023) and before currentEpoch (ZK-4643).
                    let end = self.log_end(to.sid);
                    self.newleader.retain(|k, _| (k.0, k.1) != (to.sid, to.gen));
                    self.newleader.insert((to.sid, to.gen, to.conn), (zxid, end));
                }
                if snap && self.gen_of(to.sid) == Some(to.gen) {
                    let s = &self.servers[(to.sid - 1) as usize];
                    let cfg = s.tree_config(&s.settings());
                    self.intakes.insert((id, dir), SnapshotIntake::new(cfg, zxid));
                }
            }
            Msg::Raw(bytes) => self.raw(id, dir, to, bytes),
            Msg::Close(why) => {
                if let Some(l) = self.net.links.get_mut(&id) {
                    l.open[1 - dir] = false;
                }
                self.intakes.remove(&(id, dir));
                self.input(to.sid, Input::PeerClosed { conn: to.conn, why });
            }
        }
        // Packets taken in a batch emptied the pipe too.
        let (drained, more) = match self.net.links.get_mut(&id) {
            Some(l) if more && l.pipes[dir].is_empty() => {
                let watched = l.drain_watch[dir];
                l.drain_watch[dir] = false;
                (drained || watched, false)
            }
            _ => (drained, more),
        };
        if drained && self.gen_of(from.sid) == Some(from.gen) {
            self.input(from.sid, Input::PeerDrained { conn: from.conn });
        }
        if more {
            self.schedule_pipe(id, dir);
        }
    }

    /// The packets queued behind the one just handled on link `id`, direction `dir`, taken
    /// while the reader stays in broadcast (the driver's `try_next_packet`), each handled without
    /// carrying out the node's outputs in between. Bounded by the driver's batch size.
    fn more_packets(&mut self, id: u64, dir: usize, to: End) {
        for _ in 1..1024 {
            if self.halted || self.gen_of(to.sid) != Some(to.gen) {
                return;
            }
            if !self.server(to.sid).proc.as_ref().is_some_and(|p| p.node.in_broadcast()) {
                return;
            }
            let Some(l) = self.net.links.get_mut(&id) else { return };
            if !l.open[1 - dir] || !matches!(l.pipes[dir].front(), Some(Msg::Packet(_))) {
                return;
            }
            let Some(Msg::Packet(packet)) = l.pipes[dir].pop_front() else { return };
            let key = (to.sid, to.gen, to.conn);
            if packet.packet_type == PacketType::Commit.to_wire() && self.after_newleader.contains(&key) {
                self.count("COMMITs between NEWLEADER and UPTODATE");
            }
            self.count("packets taken in a batch");
            self.input_unpumped(to.sid, Input::Packet { conn: to.conn, packet });
        }
    }

    /// Snapshot stream bytes, fed to the connection's intake as the reader task feeds its sink.
    fn raw(&mut self, id: u64, dir: usize, to: End, bytes: Bytes) {
        let Some(intake) = self.intakes.get_mut(&(id, dir)) else {
            self.failures.push(format!("t={}: raw bytes with no SNAP before them on link {id}", self.t));
            return;
        };
        let mut rest: &[u8] = &bytes;
        while !rest.is_empty() {
            match zk_server::ensemble::peer_net::SnapshotSink::feed(intake, rest) {
                Ok((used, done)) => {
                    rest = &rest[used.min(rest.len())..];
                    if done {
                        let intake = self.intakes.remove(&(id, dir)).expect("present");
                        let result = zk_server::ensemble::peer_net::SnapshotSink::finish(Box::new(intake));
                        if !rest.is_empty() {
                            self.failures
                                .push(format!("t={}: bytes after a snapshot stream on link {id}", self.t));
                        }
                        self.input(to.sid, Input::SnapshotReceived { conn: to.conn, result });
                        return;
                    }
                    if used == 0 {
                        break;
                    }
                }
                Err(e) => {
                    self.intakes.remove(&(id, dir));
                    self.close_end(id, 1 - dir, "bad snapshot stream");
                    self.input(
                        to.sid,
                        Input::PeerClosed { conn: to.conn, why: format!("bad snapshot stream: {e}") },
                    );
                    return;
                }
            }
        }
    }

    fn dial_done(&mut self, sid: i64, gen: u64, conn: PeerConn, leader: i64) {
        if self.gen_of(sid) != Some(gen) {
            return;
        }
        let target = self.gen_of(leader);
        match target {
            Some(lgen) if self.net.reachable(sid, leader) => {
                let acc = self.next_accepted.entry(leader).or_insert(ACCEPTED_BASE);
                let aconn = *acc;
                *acc += 1;
                let id =
                    self.net.connect(End { sid, gen, conn }, End { sid: leader, gen: lgen, conn: aconn });
                let _ = id;
                self.input(sid, Input::Dialed { conn, result: Ok(()) });
                self.input(leader, Input::LearnerConnected { conn: aconn });
            }
            _ => {
                self.input(sid, Input::Dialed { conn, result: Err("connection refused or timed out".into()) })
            }
        }
    }

    /// Tells every running server which servers are down (their election ports refuse).
    fn tell_down_all(&mut self) {
        for sid in 1..=self.servers.len() as i64 {
            if let Some(gen) = self.gen_of(sid) {
                let dt = self.rng.gen_range(1..30);
                self.at(dt, Ev::PeersDown { sid, gen });
            }
        }
    }

    /// A server's process is gone (a crash, a kill, a stop): its connections end.
    fn process_ends(&mut self, sid: i64) {
        let gen = self.servers[(sid - 1) as usize].gen;
        self.newleader.retain(|k, _| k.0 != sid);
        self.held_acks.retain(|k, _| k.0 != sid);
        self.after_newleader.retain(|k| k.0 != sid);
        self.server(sid).proc = None;
        self.down.insert(sid);
        for (id, i) in self.net.ends_of(sid, gen) {
            self.close_end(id, i, "connection reset");
        }
        let gone: Vec<(i64, u64, u64)> = self.client_conns.keys().filter(|k| k.0 == sid).copied().collect();
        for k in gone {
            if let Some(c) = self.client_conns.remove(&k) {
                self.client_dropped(c);
            }
        }
        self.tell_down_all();
        self.net.gc();
    }

    // -----------------------------------------------------------------------------------------
    // Clients.

    fn deliver_to_client(&mut self, sid: i64, gen: u64, conn: u64, frame: Bytes) {
        let Some(&c) = self.client_conns.get(&(sid, gen, conn)) else { return };
        let t = self.t;
        let cl = &mut self.clients[c];
        match cl.link.clone() {
            ClientLink::Connecting { .. } => {
                let resuming = cl.session.is_some();
                if cl.connected(&frame) {
                    cl.link = ClientLink::Connected { sid, gen, conn };
                    cl.next_op_ms = t;
                    self.tick_client(c, 1);
                } else {
                    if resuming && self.clients[c].session.is_none() {
                        self.count("sessions found expired");
                    }
                    self.client_conns.remove(&(sid, gen, conn));
                    self.close_client_conn(sid, gen, conn);
                    self.clients[c].link = ClientLink::Idle { retry_at: t + 10 };
                }
            }
            ClientLink::Connected { .. } => {
                if cl.reply(&frame, t, &mut self.rec) {
                    let think = self.rng.gen_range(0..30);
                    self.clients[c].next_op_ms = t + think;
                    self.tick_client(c, think + 1);
                }
            }
            ClientLink::Idle { .. } => {}
        }
    }

    fn client_dropped(&mut self, c: usize) {
        self.clients[c].abandon(&mut self.rec);
        let retry = self.t + self.rng.gen_range(10..300);
        self.clients[c].link = ClientLink::Idle { retry_at: retry };
    }

    fn close_client_conn(&mut self, sid: i64, gen: u64, conn: u64) {
        if self.gen_of(sid) == Some(gen) {
            self.input(sid, Input::Core(Event::Closed { conn }));
        }
    }

    fn client_tick(&mut self, c: usize) {
        let token = self.clients[c].tick;
        let t = self.t;
        let running = self.faults_on || t < self.p.run_ms;
        match self.clients[c].link.clone() {
            ClientLink::Idle { retry_at } => {
                if t >= retry_at && running {
                    let up: Vec<i64> =
                        (1..=self.servers.len() as i64).filter(|s| self.gen_of(*s).is_some()).collect();
                    if !up.is_empty() {
                        let sid = up[self.rng.gen_range(0..up.len())];
                        let gen = self.gen_of(sid).expect("up");
                        let p = self.server(sid).proc.as_mut().expect("up");
                        let conn = p.next_client_conn;
                        p.next_client_conn += 1;
                        let req = self.clients[c].connect_request();
                        self.clients[c].link = ClientLink::Connecting { sid, gen, conn, since: t };
                        self.client_conns.insert((sid, gen, conn), c);
                        let remote = format!("10.0.0.{}:5000", c + 1).parse().expect("an address");
                        let ev = Event::Connect {
                            conn,
                            remote,
                            req,
                            ids: Vec::new(),
                            stats: Arc::new(ConnStats::new()),
                        };
                        self.input(sid, Input::Core(ev));
                    }
                }
            }
            ClientLink::Connecting { sid, gen, conn, since } => {
                if t >= since + OP_TIMEOUT_MS {
                    self.client_conns.remove(&(sid, gen, conn));
                    self.close_client_conn(sid, gen, conn);
                    self.client_dropped(c);
                }
            }
            ClientLink::Connected { sid, gen, conn } => {
                let timed_out =
                    self.clients[c].pending.as_ref().is_some_and(|p| t >= p.sent_ms + OP_TIMEOUT_MS);
                if timed_out {
                    self.client_conns.remove(&(sid, gen, conn));
                    self.close_client_conn(sid, gen, conn);
                    self.client_dropped(c);
                } else if self.clients[c].pending.is_none() && t >= self.clients[c].next_op_ms && running {
                    let reqs = self.clients[c].next_op(&mut self.rng, t, &mut self.rec);
                    for (xid, op, req) in reqs {
                        self.request(sid, gen, conn, xid, op, req);
                    }
                } else if self.clients[c].pending.is_none()
                    && t >= self.clients[c].last_sent_ms + SESSION_TIMEOUT_MS as u64 / 3
                {
                    self.clients[c].last_sent_ms = t;
                    self.request(
                        sid,
                        gen,
                        conn,
                        zk_proto::xid::PING,
                        zk_proto::OpCode::Ping.code(),
                        Request::Ping,
                    );
                }
            }
        }
        let dt = self.rng.gen_range(5..40);
        // An answer that arrived meanwhile (a read served within the same step, a refused
        // connect) scheduled its own tick: it stands.
        if (running || self.clients[c].pending.is_some()) && self.clients[c].tick == token {
            self.tick_client(c, dt);
        }
    }

    /// Client `c` acts in `dt` ms: this tick replaces any other it had scheduled.
    fn tick_client(&mut self, c: usize, dt: u64) {
        self.clients[c].tick += 1;
        let token = self.clients[c].tick;
        self.at(dt, Ev::Client(c, token));
    }

    fn request(&mut self, sid: i64, gen: u64, conn: u64, xid: i32, op: i32, req: Request) {
        if self.gen_of(sid) != Some(gen) {
            return;
        }
        let raw = client::encode(&req);
        let now = self.servers[(sid - 1) as usize].now(self.t);
        let ev = Event::Request { conn, xid, op, body: Ok(req), raw, received_us: now.mono_us };
        self.input(sid, Input::Core(ev));
    }

    // -----------------------------------------------------------------------------------------
    // Faults.

    fn fault(&mut self) {
        if !self.faults_on {
            return;
        }
        let n = self.servers.len() as i64;
        let roll = self.rng.gen_range(0..100);
        match roll {
            // Power loss: what was not synced lands in part, out of order.
            0..=24 => {
                let sid = self.rng.gen_range(1..=n);
                if self.gen_of(sid).is_some() && self.down.len() < (n as usize).div_ceil(2) {
                    let keep = if self.rng.gen_bool(0.7) { Keep::Random } else { Keep::Durable };
                    self.note(|| format!("power loss on server {sid} ({keep:?})"));
                    self.count("power losses");
                    self.process_ends(sid);
                    self.server(sid).crash(keep);
                    let dt = self.rng.gen_range(50..3000);
                    self.at(dt, Ev::Restart(sid));
                }
            }
            // kill -9: the process ends, the page cache keeps what it wrote.
            25..=39 => {
                let sid = self.rng.gen_range(1..=n);
                if self.gen_of(sid).is_some() && self.down.len() < (n as usize).div_ceil(2) {
                    self.note(|| format!("kill -9 of server {sid}"));
                    self.count("kills");
                    self.process_ends(sid);
                    let dt = self.rng.gen_range(50..3000);
                    self.at(dt, Ev::Restart(sid));
                }
            }
            // A partition, healed later.
            40..=59 if self.net.side.is_none() => {
                let side: BTreeSet<i64> = (1..=n).filter(|_| self.rng.gen_bool(0.5)).collect();
                self.note(|| format!("partition {side:?} | rest"));
                self.count("partitions");
                self.net.side = Some(side);
                let dt = self.rng.gen_range(300..6000);
                self.at(dt, Ev::Heal);
            }
            // A slow disk for a while.
            60..=69 => {
                let sid = self.rng.gen_range(1..=n);
                let k = [1, 5, 30, 100][self.rng.gen_range(0..4)];
                self.slow.insert(sid, k);
                self.note(|| format!("server {sid}'s disk {k}x slower"));
            }
            // A wall-clock jump (only the wall clock: timeouts run on the monotonic one).
            70..=74 => {
                let sid = self.rng.gen_range(1..=n);
                let jump = self.rng.gen_range(-600_000..600_000);
                if let Some(p) = self.server(sid).proc.as_mut() {
                    p.wall_offset_ms += jump;
                }
                self.note(|| format!("server {sid}'s wall clock jumps {jump} ms"));
            }
            // A quorum connection drops.
            75..=84 => {
                let ids: Vec<u64> = self.net.links.keys().copied().collect();
                if !ids.is_empty() {
                    let id = ids[self.rng.gen_range(0..ids.len())];
                    let i = self.rng.gen_range(0..2);
                    self.note(|| format!("link {id} drops"));
                    self.close_end(id, i, "connection reset");
                    if let Some(l) = self.net.links.get(&id) {
                        let e = l.ends[i];
                        if self.gen_of(e.sid) == Some(e.gen) {
                            self.input(
                                e.sid,
                                Input::PeerClosed { conn: e.conn, why: "connection reset".into() },
                            );
                        }
                    }
                }
            }
            // An administrator's reconfig request; now and then two at once, from two clients
            // (the second may meet the first in flight: RECONFIGINPROGRESS).
            85..=99 if self.p.handovers => self.handover_fault(),
            85..=99 if self.p.reconfig => {
                self.reconfig_fault();
                if self.rng.gen_bool(0.2) {
                    self.reconfig_fault();
                }
            }
            _ => {}
        }
        if self.t < self.p.run_ms {
            let dt = self.rng.gen_range(100..1500);
            self.at(dt, Ev::Fault);
        }
    }

    /// An operator moves the leadership: `ydld` on the leader (two times in three), on another
    /// server (refused there), or `rqld` on a server.
    fn handover_fault(&mut self) {
        let n = self.servers.len() as i64;
        let sid = match (self.leader(), self.rng.gen_range(0..3)) {
            (Some(l), 0 | 1) => l,
            _ => self.rng.gen_range(1..=n),
        };
        if self.rng.gen_bool(0.7) {
            if let Some(a) = self.hand_over(sid, None) {
                self.note(|| format!("ydld on server {sid}: {a}"));
                self.count(match a {
                    zk_server::node::HandoverAnswer::HandingOver(_) => "handovers started",
                    _ => "handovers refused",
                });
            }
        } else if let Some(a) = self.request_leadership(sid) {
            self.note(|| format!("rqld on server {sid}: {a}"));
            self.count(match a {
                zk_server::node::LeadershipAnswer::Asked(_) => "leaderships requested",
                _ => "leadership requests refused",
            });
        }
    }

    /// A reconfig request, drawn against the newest configuration a member has: remove a voter
    /// (the leader, a third of the time), remove an observer, add a server the configuration
    /// lacks (as a voter or an observer), promote an observer, demote a voter. One client sends
    /// it to the server it is connected to (the request may be stale, or refused: NEWCONFIGNOQUORUM,
    /// RECONFIGINPROGRESS, BADARGUMENTS are answers like any other).
    fn reconfig_fault(&mut self) {
        let config = self.newest_config();
        let n = self.servers.len() as i64;
        let of = |p: Placement| -> Vec<i64> {
            (1..=n).filter(|s| zk_quorum::reconfig::placement(&config, *s) == p).collect()
        };
        let (voters, observers, outside) =
            (of(Placement::Participant), of(Placement::Observer), of(Placement::NonVoting));
        let pick = |rng: &mut StdRng, v: &[i64]| v[rng.gen_range(0..v.len())];
        let mut kinds: Vec<&'static str> = vec!["remove a voter", "demote a voter"];
        if !observers.is_empty() {
            kinds.extend(["remove an observer", "promote an observer"]);
        }
        if !outside.is_empty() {
            kinds.extend(["add a voter", "add an observer"]);
        }
        let kind = kinds[self.rng.gen_range(0..kinds.len())];
        let (joining, leaving) = match kind {
            "remove a voter" => {
                let leader = self.leader().filter(|l| voters.contains(l));
                let sid = match leader {
                    Some(l) if self.rng.gen_bool(0.33) => l,
                    _ => pick(&mut self.rng, &voters),
                };
                (None, Some(sid))
            }
            "demote a voter" => (Some((pick(&mut self.rng, &voters), "observer")), None),
            "remove an observer" => (None, Some(pick(&mut self.rng, &observers))),
            "promote an observer" => (Some((pick(&mut self.rng, &observers), "participant")), None),
            "add a voter" => (Some((pick(&mut self.rng, &outside), "participant")), None),
            _ => (Some((pick(&mut self.rng, &outside), "observer")), None),
        };
        if self.request_reconfig(joining, leaving) {
            self.count(kind);
            self.note(|| format!("reconfig requested: {kind} ({joining:?}, leaving {leaving:?})"));
        } else {
            self.count("reconfigs not sent: no client connected");
        }
    }

    /// Has a connected client (one at random) send a reconfig request as its next operation:
    /// `joining` the server with that role, `leaving` the server. Returns whether a client was
    /// connected to take it.
    pub fn request_reconfig(&mut self, joining: Option<(i64, &str)>, leaving: Option<i64>) -> bool {
        let idle: Vec<usize> = (0..self.clients.len())
            .filter(|&c| matches!(self.clients[c].link, ClientLink::Connected { .. }))
            .filter(|&c| self.clients[c].admin.is_none())
            .collect();
        if idle.is_empty() {
            return false;
        }
        let c = idle[self.rng.gen_range(0..idle.len())];
        self.clients[c].admin = Some(zk_proto::ReconfigRequest {
            joining_servers: joining.map(|(sid, kind)| server_line(sid, kind, true)),
            leaving_servers: leaving.map(|sid| sid.to_string()),
            new_members: None,
            cur_config_id: -1,
        });
        true
    }

    /// The newest configuration a server holds (in force there, or in its files while down).
    pub fn newest_config(&self) -> QuorumConfig {
        self.servers
            .iter()
            .map(|s| {
                s.proc.as_ref().and_then(|p| p.node.replica()).map_or(&s.spec.replica.config, |r| r.config())
            })
            .max_by_key(|c| c.version)
            .expect("servers")
            .clone()
    }

    /// Stops the faults, heals the network, restarts every server and lets the ensemble
    /// settle; then checks everything.
    pub fn finish(&mut self) -> Result<(), String> {
        self.run_until(self.p.run_ms);
        self.faults_on = false;
        self.net.side = None;
        self.slow.clear();
        for sid in 1..=self.servers.len() as i64 {
            if self.server(sid).proc.is_none() {
                self.boot(sid);
            }
        }
        let deadline = self.t + self.p.settle_ms;
        while self.t < deadline && self.failures.is_empty() {
            let to = self.t + 500;
            self.run_until(to);
            if self.converged() {
                break;
            }
        }
        if !self.failures.is_empty() {
            return Err(self.failures.join("\n"));
        }
        if !self.converged() {
            return Err(format!("t={}: the healed ensemble did not converge\n{}", self.t, self.describe()));
        }
        self.check_end()
    }

    /// [`Self::finish`] from now on: the clients stop here (not at `Params::run_ms`).
    pub fn finish_now(&mut self) -> Result<(), String> {
        self.p.run_ms = self.p.run_ms.min(self.t);
        self.finish()
    }

    /// One leader established, every other server up to date with it, all at the same zxid
    /// (and, with reconfiguration, the same configuration in force: the members of the final
    /// configuration, and the servers it removed as non-voting followers).
    pub fn converged(&self) -> bool {
        let mut leader = None;
        let mut zxids = BTreeSet::new();
        let mut versions = BTreeSet::new();
        for s in &self.servers {
            let Some(p) = s.proc.as_ref() else { return false };
            let Some(r) = p.node.replica() else { return false };
            if !r.in_broadcast() {
                return false;
            }
            let v = r.view();
            if v.leading {
                if leader.is_some() {
                    return false;
                }
                leader = Some(s.sid);
            }
            zxids.insert(p.node.database().last_applied_zxid());
            versions.insert(r.config().version);
        }
        leader.is_some()
            && zxids.len() == 1
            && versions.len() == 1
            && self.clients.iter().all(|c| c.pending.is_none())
    }

    pub fn describe(&self) -> String {
        let mut out = String::new();
        for s in &self.servers {
            match s.proc.as_ref() {
                None => {
                    let _ = writeln!(out, "server {}: down ({:?})", s.sid, s.stopped);
                }
                Some(p) => {
                    let r = p.node.replica().expect("an ensemble node");
                    let v = r.view();
                    let _ = writeln!(
                        out,
                        "server {}: {:?} zab={} leader={:?} applied=0x{:x} durable=0x{:x} round={}",
                        s.sid,
                        p.node.core().role(),
                        v.zab_state,
                        v.leader_sid,
                        p.node.database().last_applied_zxid(),
                        p.log.durable_zxid(),
                        r.election_round()
                    );
                }
            }
        }
        out
    }

    // -----------------------------------------------------------------------------------------
    // Checks.

    /// At most one leader per epoch; a new leadership holds every acknowledged write.
    fn check_leader(&mut self, sid: i64) {
        let Some(p) = self.servers[(sid - 1) as usize].proc.as_ref() else { return };
        let Role::Leader { epoch } = p.node.core().role() else { return };
        if self.leading_seen.get(&sid) == Some(&epoch) {
            return;
        }
        self.leading_seen.insert(sid, epoch);
        match self.leaders.get(&epoch) {
            Some(&other) if other != sid => {
                self.failures.push(format!("t={}: servers {other} and {sid} both led epoch {epoch}", self.t));
                return;
            }
            _ => {
                self.leaders.insert(epoch, sid);
            }
        }
        let db = p.node.database();
        let missing: Vec<&String> =
            self.rec.acked.keys().filter(|path| db.tree().get(path).is_none()).collect();
        if let Some(m) = missing.first() {
            self.failures.push(format!(
                "t={}: server {sid} established epoch {epoch} without {} acknowledged write(s), {m} among them",
                self.t,
                missing.len()
            ));
        }
        let in_force = p.node.replica().map_or(0, |r| r.config().version);
        if let Some(acked) = self.rec.reconfigs_acked.iter().map(|c| c.version).max() {
            if acked > in_force {
                self.failures.push(format!(
                    "t={}: server {sid} established epoch {epoch} with configuration {in_force:#x} in force, older than acknowledged reconfiguration {acked:#x}",
                    self.t
                ));
            }
        }
        let lost: Vec<(&String, &u32)> =
            self.committed.iter().filter(|(path, _)| db.tree().get(path).is_none()).collect();
        if let Some((m, e)) = lost.first() {
            self.failures.push(format!(
                "t={}: server {sid} established epoch {epoch} without {} committed txn(s), {m} (committed by epoch {e}) among them",
                self.t,
                lost.len()
            ));
        }
        // A quorum acknowledged this leader's history at NEWLEADER: it is committed. Paths that
        // nothing deletes (preloaded histories, clients' unique creates) stand for it.
        let held: Vec<String> = db
            .tree()
            .iter()
            .map(|(path, _)| path)
            .filter(|path| self.preloaded.contains(*path) || path.starts_with("/u"))
            .map(str::to_owned)
            .collect();
        for path in held {
            self.committed.entry(path).or_insert(epoch);
        }
        self.count("leaderships");
    }

    /// Where `sid`'s log will end once every job queued for its thread is done.
    fn log_end(&self, sid: i64) -> i64 {
        let Some(p) = self.servers[(sid - 1) as usize].proc.as_ref() else { return 0 };
        let mut end = p.log.last_zxid();
        for job in &p.log_jobs {
            match job {
                LogJob::Append(b) => end = b.last_zxid().unwrap_or(end),
                LogJob::Truncate(z) => end = end.min(*z),
                LogJob::Reset(z) => end = *z,
                LogJob::Sync => {}
            }
        }
        end
    }

    /// A learner's packet to its leader: the first ACK after a NEWLEADER acknowledges it
    /// (ZK-4685), with every record the sync handed the log durable (ZK-3911, -4646, -4785,
    /// -3023, -3642: a SNAP's reset included) and currentEpoch the new epoch (ZK-4643). Returns
    /// whether it is that NEWLEADER ACK.
    fn check_learner_ack(
        &mut self,
        key: (i64, u64, PeerConn),
        packet: &zk_quorum::wire::QuorumPacket,
    ) -> bool {
        if packet.packet_type != PacketType::Ack.to_wire() {
            return false;
        }
        let Some((zxid, needs)) = self.newleader.remove(&key) else { return false };
        let sid = key.0;
        let t = self.t;
        if packet.zxid != zxid {
            self.failures.push(format!(
                "t={t}: server {sid}'s first ACK after NEWLEADER 0x{zxid:x} is for 0x{:x} (ZK-4685)",
                packet.zxid
            ));
            return false;
        }
        let p = self.servers[(sid - 1) as usize].proc.as_ref().expect("it sends");
        let (durable, current) = (p.log.durable_zxid(), p.epochs.current());
        if durable < needs {
            self.failures.push(format!(
                "t={t}: server {sid} ACKed NEWLEADER 0x{zxid:x} with its log durable through 0x{durable:x} of 0x{needs:x} (ZK-3911)"
            ));
        }
        if current != zxid >> 32 {
            self.failures.push(format!(
                "t={t}: server {sid} ACKed NEWLEADER 0x{zxid:x} with currentEpoch {current} (ZK-4643)"
            ));
        }
        self.acked_newleader.insert(sid, (key.1, key.2));
        self.count("NEWLEADER ACKs");
        true
    }

    /// A learner writes currentEpoch only once what its sync logged is durable (ZK-4643).
    fn check_current_epoch(&mut self, sid: i64, gen: u64, epoch: u32) {
        let pending = self.newleader.iter().rfind(|(k, _)| k.0 == sid && k.1 == gen).map(|(_, v)| *v);
        let Some((zxid, needs)) = pending else { return };
        let p = self.servers[(sid - 1) as usize].proc.as_ref().expect("it asks");
        let durable = p.log.durable_zxid();
        if zxid >> 32 == i64::from(epoch) && durable < needs {
            self.failures.push(format!(
                "t={}: server {sid} writes currentEpoch {epoch} with its log durable through 0x{durable:x} of 0x{needs:x} (ZK-4643)",
                self.t
            ));
        }
    }

    /// A reload (a role's start, or after a TRUNC) reads what is on disk: every record handed to
    /// the log is durable and no truncation or reset is under way, so that the database and
    /// the log position the server then reports are one (ZK-4541, -4712: flush on every
    /// shutdown; ZK-2678).
    fn check_reload(&mut self, sid: i64) {
        let p = self.servers[(sid - 1) as usize].proc.as_ref().expect("it asks");
        let busy = p.log_jobs.iter().any(|j| !matches!(j, LogJob::Sync));
        let (durable, last) = (p.log.durable_zxid(), p.log.last_zxid());
        if busy || durable < last {
            self.failures.push(format!(
                "t={}: server {sid} reloads with its log durable through 0x{durable:x} of 0x{last:x}{} (ZK-4541)",
                self.t,
                if busy { ", jobs queued" } else { "" }
            ));
        }
    }

    /// NEWLEADER ACKs held back for a proposal ACK that did not come in the same step go now.
    fn release_held_acks(&mut self, sid: i64) {
        if self.held_acks.is_empty() {
            return;
        }
        let keys: Vec<(i64, u64, PeerConn)> = self.held_acks.keys().filter(|k| k.0 == sid).copied().collect();
        for key in keys {
            if let Some(held) = self.held_acks.remove(&key) {
                self.send(key.0, key.1, key.2, Msg::Packet(held));
            }
        }
    }

    fn check_end(&mut self) -> Result<(), String> {
        let mut errors = Vec::new();
        let mut dumps = Vec::new();
        for s in &self.servers {
            let p = s.proc.as_ref().expect("converged: every server is up");
            let db = p.node.database();
            for path in self.rec.acked.keys() {
                if db.tree().get(path).is_none() {
                    errors.push(format!("server {} lacks acknowledged {path}", s.sid));
                    break;
                }
            }
            // A snapshot set aside for not reproducing its digest was written lossy: a bug,
            // caught before it was served.
            let names = zk_log::Storage::list(&s.snap_disk).unwrap_or_default();
            if let Some(bad) = names.iter().find(|n| n.ends_with(snapshots::MISMATCH_SUFFIX)) {
                errors.push(format!("server {} set a snapshot aside: {bad}", s.sid));
            }
            let view = p.node.core().view(None, 0, s.now(self.t));
            if view.stats.digest_mismatches > 0 {
                errors.push(format!(
                    "server {} counted {} digest mismatches",
                    s.sid, view.stats.digest_mismatches
                ));
            }
            for (path, epoch) in &self.committed {
                if db.tree().get(path).is_none() {
                    errors.push(format!("server {} lacks {path}, committed by epoch {epoch}", s.sid));
                    break;
                }
            }
            dumps.push((s.sid, canonical(db), db.tree_digest()));
        }
        for w in dumps.windows(2) {
            if w[0].1 != w[1].1 || w[0].2 != w[1].2 {
                errors.push(format!(
                    "servers {} and {} differ: {}",
                    w[0].0,
                    w[1].0,
                    first_difference(&w[0].1.to_text(), &w[1].1.to_text())
                ));
            }
        }
        if self.p.reconfig {
            self.check_configs(&mut errors);
        }
        for (k, h) in self.rec.histories.iter().enumerate() {
            if let Err(e) = linear::check(h) {
                errors.push(format!("/k{k}: {e}"));
            }
        }
        if let Some(n) = &self.rec.duplicate_sequential {
            errors.push(format!("sequential name {n} acknowledged twice"));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }

    /// With reconfiguration, once converged: every server has the leader's configuration in
    /// force and holds it in /zookeeper/config; each serves as that configuration places it (a
    /// voter leads or follows, an observer observes, a server it lacks follows without a vote,
    /// as Apache's removed servers do); the leader votes in it; every acknowledged reconfig
    /// came into force and is no newer than it.
    fn check_configs(&mut self, errors: &mut Vec<String>) {
        let Some(leader) = self.leader() else {
            errors.push("no leader".into());
            return;
        };
        let final_config = self.servers[(leader - 1) as usize]
            .proc
            .as_ref()
            .and_then(|p| p.node.replica())
            .expect("the leader runs")
            .config()
            .clone();
        let text = final_config.to_config_string();
        if zk_quorum::reconfig::placement(&final_config, leader) != Placement::Participant {
            errors.push(format!("leader {leader} does not vote in {}", config_summary(&final_config)));
        }
        for s in &self.servers {
            let p = s.proc.as_ref().expect("converged: every server is up");
            let r = p.node.replica().expect("an ensemble node");
            if r.config().to_config_string() != text {
                errors.push(format!(
                    "server {} has {:#x} in force ({}), the leader {:#x} ({})",
                    s.sid,
                    r.config().version,
                    config_summary(r.config()),
                    final_config.version,
                    config_summary(&final_config)
                ));
            }
            if s.spec.replica.config.to_config_string() != text {
                errors.push(format!("server {}'s configuration file is not the one in force", s.sid));
            }
            let node =
                p.node.database().tree().get("/zookeeper/config").map(|n| n.data_bytes().unwrap_or_default());
            if node.as_deref() != Some(text.as_bytes()) {
                errors.push(format!(
                    "server {}'s /zookeeper/config is {:?}, the configuration in force {text:?}",
                    s.sid,
                    node.map(|b| String::from_utf8_lossy(&b).into_owned())
                ));
            }
            let role = p.node.core().role();
            let placed = zk_quorum::reconfig::placement(&final_config, s.sid);
            let fits = match (placed, role) {
                (Placement::Participant, Role::Leader { .. }) => true,
                (Placement::Participant | Placement::NonVoting, Role::Learner { observer }) => !observer,
                (Placement::Observer, Role::Learner { observer }) => observer,
                _ => false,
            };
            if !fits {
                errors.push(format!("server {} serves as {role:?}, placed {placed:?}", s.sid));
            }
        }
        for acked in &self.rec.reconfigs_acked {
            if acked.version > final_config.version || !self.installed.contains(&acked.version) {
                errors.push(format!(
                    "acknowledged reconfiguration {:#x} ({}) never came into force (in force: {:#x})",
                    acked.version,
                    config_summary(acked),
                    final_config.version
                ));
            }
        }
        self.stats.insert("reconfigs acknowledged", self.rec.reconfigs_acked.len() as u64);
        self.stats.insert("reconfig outcomes unknown", self.rec.reconfig_unknown);
        for (&code, &n) in &self.rec.reconfig_errors {
            let name = match code {
                -13 => "reconfigs answered NEWCONFIGNOQUORUM",
                -14 => "reconfigs answered RECONFIGINPROGRESS",
                -8 => "reconfigs answered BADARGUMENTS",
                -103 => "reconfigs answered BADVERSION",
                _ => "reconfigs answered another error",
            };
            *self.stats.entry(name).or_insert(0) += n;
        }
        if let Some(other) = self.rec.reconfig_errors.keys().find(|c| ![-13, -14, -8, -103].contains(*c)) {
            errors.push(format!("a reconfig was answered {other}, not an error Apache's leader gives"));
        }
        let voters = QuorumVerifier::from_config(&final_config).voters().len();
        self.stats.insert("final voters (sum over seeds)", voters as u64);
        if voters == 1 {
            self.count("runs ending with a single voter");
        }
        let outside = (1..=self.servers.len() as i64)
            .filter(|s| zk_quorum::reconfig::placement(&final_config, *s) == Placement::NonVoting)
            .count();
        if outside > 0 {
            self.count("runs ending with non-voting followers");
        }
    }

    /// The epochs that had an established leader, in order.
    pub fn epochs(&self) -> Vec<u32> {
        self.leaders.keys().copied().collect()
    }

    /// The established leader, if exactly one serves.
    pub fn leader(&self) -> Option<i64> {
        let l: Vec<i64> = self
            .servers
            .iter()
            .filter(|s| s.proc.as_ref().is_some_and(|p| matches!(p.node.core().role(), Role::Leader { .. })))
            .map(|s| s.sid)
            .collect();
        (l.len() == 1).then(|| l[0])
    }

    /// Crashes `sid` now (a power loss keeping what `keep` says, or with [`Keep::All`] a kill -9),
    /// back after `down_ms` (never, if 0: see [`Self::restart`]).
    pub fn power_loss(&mut self, sid: i64, keep: Keep, down_ms: u64) {
        self.process_ends(sid);
        self.server(sid).crash(keep);
        if down_ms > 0 {
            self.at(down_ms, Ev::Restart(sid));
        }
    }

    /// Cuts `side` off from the rest for `ms`.
    pub fn partition(&mut self, side: BTreeSet<i64>, ms: u64) {
        self.net.side = Some(side);
        self.at(ms, Ev::Heal);
    }

    /// Runs `ms` more.
    pub fn run_for(&mut self, ms: u64) {
        let end = self.t + ms;
        self.run_until(end);
    }

    /// Runs until `cond` holds or `max_ms` pass.
    pub fn run_until_cond(
        &mut self,
        max_ms: u64,
        what: &str,
        cond: impl Fn(&World) -> bool,
    ) -> Result<(), String> {
        let end = self.t + max_ms;
        while self.t < end && self.failures.is_empty() {
            if cond(self) {
                return Ok(());
            }
            let to = (self.t + 10).min(end);
            self.run_until(to);
        }
        if !self.failures.is_empty() {
            return Err(self.failures.join("\n"));
        }
        if cond(self) {
            Ok(())
        } else {
            Err(format!("t={}: {what} did not happen within {max_ms} ms\n{}", self.t, self.describe()))
        }
    }
}

/// Scenario primitives: a durable state before the first start, precise stops, and what a
/// scenario looks at.
impl World {
    /// A history of real transactions to preload (see [`server::history`]).
    pub fn history(&self, recs: &[(u32, u32, u32, &str)]) -> Vec<HistTxn> {
        let s = &self.servers[0];
        server::history(s.tree_config(&s.settings()), recs)
    }

    /// Gives `sid`, before it first starts, epoch files and a history: in its log, or
    /// (`in_snapshot`) all in one snapshot with the log reset past it.
    pub fn preload(&mut self, sid: i64, accepted: u32, current: u32, hist: &[HistTxn], in_snapshot: bool) {
        for t in hist {
            if let zk_proto::Txn::Create(c) = &t.txn {
                self.preloaded.insert(c.path.clone());
            }
        }
        self.server(sid)
            .preload(accepted, current, hist, in_snapshot)
            .unwrap_or_else(|e| panic!("preloading server {sid}: {e}"));
    }

    /// An operator's `ydld` on `sid` (to `to`, or the node's choice), with what the node asks
    /// then carried out; None while `sid` is down.
    pub fn hand_over(&mut self, sid: i64, to: Option<i64>) -> Option<zk_server::node::HandoverAnswer> {
        self.resume();
        self.server(sid).proc.as_ref()?;
        let now = self.servers[(sid - 1) as usize].now(self.t);
        let _span = tracing::debug_span!("server", sid, t = self.t).entered();
        let answer = self.server(sid).proc.as_mut()?.node.hand_over(now, to);
        drop(_span);
        self.pump(sid);
        Some(answer)
    }

    /// An operator's `rqld` on `sid`; None while `sid` is down.
    pub fn request_leadership(&mut self, sid: i64) -> Option<zk_server::node::LeadershipAnswer> {
        self.resume();
        self.server(sid).proc.as_ref()?;
        let now = self.servers[(sid - 1) as usize].now(self.t);
        let _span = tracing::debug_span!("server", sid, t = self.t).entered();
        let answer = self.server(sid).proc.as_mut()?.node.request_leadership(now);
        drop(_span);
        self.pump(sid);
        Some(answer)
    }

    /// An operator's forced recovery (`rcvr`) on `sid`, with `token`, with what the node asks
    /// then carried out; None while `sid` is down.
    pub fn recover(&mut self, sid: i64, token: Option<&str>) -> Option<zk_server::node::RecoveryAnswer> {
        self.resume();
        self.server(sid).proc.as_ref()?;
        let now = self.servers[(sid - 1) as usize].now(self.t);
        let _span = tracing::debug_span!("server", sid, t = self.t).entered();
        let answer = self.server(sid).proc.as_mut()?.node.recover(now, token);
        drop(_span);
        self.pump(sid);
        Some(answer)
    }

    /// Clients start no operation from now on (those in flight end), until
    /// [`Self::resume_clients`].
    pub fn pause_clients(&mut self) {
        self.p.run_ms = self.p.run_ms.min(self.t);
    }

    /// Clients go on for `ms` more.
    pub fn resume_clients(&mut self, ms: u64) {
        self.p.run_ms = self.t + ms;
        for c in 0..self.clients.len() {
            self.tick_client(c, 1);
        }
    }

    /// Whether `sid`'s node has a handover of its leadership under way.
    pub fn handover_under_way(&self, sid: i64) -> bool {
        self.servers[(sid - 1) as usize].proc.as_ref().is_some_and(|p| p.node.handover_under_way())
    }

    /// Starts `sid` now if it is down.
    pub fn restart(&mut self, sid: i64) {
        self.resume();
        if self.server(sid).proc.is_none() {
            self.boot(sid);
        }
    }

    /// `sid`'s disk becomes `k` times slower (1: as it was).
    pub fn slow_disk(&mut self, sid: i64, k: u64) {
        self.slow.insert(sid, k);
    }

    /// Whether `sid`, leading, reads the zkrs extension of a learner's FOLLOWERINFO (its
    /// request for a SNAP) or, as an Apache leader, does not.
    pub fn ignore_zkrs_flags(&mut self, sid: i64, ignore: bool) {
        if ignore {
            self.flags_ignored.insert(sid);
        } else {
            self.flags_ignored.remove(&sid);
        }
    }

    /// Runs until `stop` strikes (see [`Moment`]) or `max_ms` pass; the run then stands still
    /// at that moment (whatever the nodes ask for meanwhile is carried out when it goes on), so
    /// a crash lands exactly there.
    pub fn run_until_moment(
        &mut self,
        max_ms: u64,
        what: &str,
        stop: impl FnMut(&World, &Moment<'_>) -> bool + 'static,
    ) -> Result<(), String> {
        self.resume();
        self.stop_at = Some(Box::new(stop));
        let end = self.t + max_ms;
        self.run_until(end);
        let struck = self.halted;
        self.stop_at = None;
        if !self.failures.is_empty() {
            return Err(self.failures.join("\n"));
        }
        if struck {
            self.note(|| format!("stopped at: {what}"));
            Ok(())
        } else {
            Err(format!("t={}: {what} did not happen within {max_ms} ms\n{}", self.t, self.describe()))
        }
    }

    /// Whether `sid`'s log has reset to a received snapshot and the driver has not yet heard of
    /// it (the snapshots past it are still on disk).
    pub fn reset_report_pending(&self, sid: i64) -> bool {
        let s = &self.servers[(sid - 1) as usize];
        s.proc.as_ref().is_some_and(|p| p.reset_reported)
    }

    /// What a scenario sees of `sid`.
    pub fn view(&self, sid: i64) -> View {
        let s = &self.servers[(sid - 1) as usize];
        let Some(p) = s.proc.as_ref() else { return View::default() };
        let r = p.node.replica().expect("an ensemble node");
        let v = r.view();
        let acked = self.acked_newleader.get(&sid).is_some_and(|&(gen, conn)| {
            gen == s.gen && self.net.find(sid, gen, conn).is_some() && v.zab_state != "election"
        });
        View {
            up: true,
            epochs: (p.epochs.accepted(), p.epochs.current()),
            looking: v.zab_state == "election",
            up_to_date: r.in_broadcast() && !v.leading,
            acked_newleader: acked,
            leading: r.is_leading(),
        }
    }

    /// (durable zxid, last logged zxid) of `sid`'s log ((0, 0) while down).
    pub fn log_state(&self, sid: i64) -> (i64, i64) {
        self.servers[(sid - 1) as usize]
            .proc
            .as_ref()
            .map_or((0, 0), |p| (p.log.durable_zxid(), p.log.last_zxid()))
    }

    /// The epoch files on `sid`'s disk as they are now, unrepaired.
    pub fn epoch_files(&self, sid: i64) -> (Option<i64>, Option<i64>) {
        self.servers[(sid - 1) as usize].epoch_files()
    }

    /// Whether `sid`, running, holds `path`.
    pub fn holds(&self, sid: i64, path: &str) -> bool {
        self.servers[(sid - 1) as usize]
            .proc
            .as_ref()
            .is_some_and(|p| p.node.database().tree().get(path).is_some())
    }

    /// A count of the report (0 if it never happened).
    pub fn stat(&self, name: &str) -> u64 {
        self.stats.get(name).copied().unwrap_or(0)
    }

    /// Syncs (DIFF, TRUNC or SNAP) `sid` was sent.
    pub fn syncs_of(&self, sid: i64) -> u64 {
        self.syncs_of.get(&sid).copied().unwrap_or(0)
    }

    /// The configuration in force at `sid` (None while it is down).
    pub fn config_of(&self, sid: i64) -> Option<QuorumConfig> {
        let p = self.servers[(sid - 1) as usize].proc.as_ref()?;
        Some(p.node.replica()?.config().clone())
    }

    /// Where the configuration in force at `sid` places `who` (None while `sid` is down).
    pub fn placement(&self, sid: i64, who: i64) -> Option<Placement> {
        self.config_of(sid).map(|c| zk_quorum::reconfig::placement(&c, who))
    }

    /// `sid`'s role as its core has it (None while it is down).
    pub fn role(&self, sid: i64) -> Option<Role> {
        Some(self.servers[(sid - 1) as usize].proc.as_ref()?.node.core().role())
    }

    /// Has a client send a reconfig request (see [`Self::request_reconfig`]) and runs until it
    /// is answered: the configuration it installed, or the error code. Errors: no client was
    /// connected, or no answer within `max_ms`.
    pub fn reconfig(
        &mut self,
        joining: Option<(i64, &str)>,
        leaving: Option<i64>,
        max_ms: u64,
    ) -> Result<Result<QuorumConfig, i32>, String> {
        self.run_until_cond(max_ms, "a client connected", |w| {
            w.clients.iter().any(|c| matches!(c.link, ClientLink::Connected { .. }) && c.admin.is_none())
        })?;
        let answered =
            |w: &World| w.rec.reconfigs_acked.len() + w.rec.reconfig_errors.values().sum::<u64>() as usize;
        let before = (answered(self), self.rec.reconfig_errors.clone());
        if !self.request_reconfig(joining, leaving) {
            return Err("no client connected to send the reconfig".into());
        }
        self.run_until_cond(max_ms, "the reconfig answered", |w| answered(w) > before.0)?;
        if let Some(c) = self.rec.reconfigs_acked.last().filter(|_| self.rec.reconfig_errors == before.1) {
            return Ok(Ok(c.clone()));
        }
        let code = self
            .rec
            .reconfig_errors
            .iter()
            .find(|(k, v)| before.1.get(k) != Some(v))
            .map(|(k, _)| *k)
            .expect("an error was counted");
        Ok(Err(code))
    }
}

/// Server `sid`'s line in a configuration, of `kind` (participant or observer); with its client
/// address when `client` (a reconfig request's joining servers need one).
pub fn server_line(sid: i64, kind: &str, client: bool) -> String {
    let mut line = format!("server.{sid}=127.0.0.1:{}:{}:{kind}", 2000 + sid, 3000 + sid);
    if client {
        line.push_str(&format!(";127.0.0.1:{}", 4000 + sid));
    }
    line
}

/// A configuration in a few words: its voters and observers.
pub fn config_summary(c: &QuorumConfig) -> String {
    let of = |p: Placement| -> Vec<i64> {
        c.servers.keys().copied().filter(|s| zk_quorum::reconfig::placement(c, *s) == p).collect()
    };
    format!("voters {:?}, observers {:?}", of(Placement::Participant), of(Placement::Observer))
}

/// A database as the end checks compare it: every node with its data and stat, in path order,
/// and the sessions. Compared as values; printed only to show a difference.
#[derive(PartialEq)]
pub struct Canonical {
    nodes: Vec<(String, Option<Bytes>, zk_proto::Stat)>,
    sessions: Vec<(i64, i32)>,
}

impl Canonical {
    /// One line a node, then one a session.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (path, data, stat) in &self.nodes {
            let _ = writeln!(out, "{path} {data:?} {stat:?}");
        }
        for (s, t) in &self.sessions {
            let _ = writeln!(out, "session {s:#x} {t}");
        }
        out
    }
}

/// The canonical form of a database (see [`Canonical`]).
pub fn canonical(db: &zk_tree::Database) -> Canonical {
    let mut nodes: Vec<(String, Option<Bytes>, zk_proto::Stat)> = db
        .tree()
        .iter()
        .map(|(path, n)| {
            let mut stat = n.client_stat(false, db.tree().num_children(n));
            if path == "/zookeeper/config" {
                // Each member writes a configuration that did not come with a transaction (the
                // first leader's stamp of version 0, a NEWLEADER's) on its own clock, as
                // Apache's do: its modification time is the member's own.
                stat.mtime = 0;
            }
            (path.to_string(), n.data_bytes(), stat)
        })
        .collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    let sessions = db.sessions().iter().collect();
    Canonical { nodes, sessions }
}

fn first_difference(a: &str, b: &str) -> String {
    for (x, y) in a.lines().zip(b.lines()) {
        if x != y {
            return format!("\n  {x}\n  {y}");
        }
    }
    format!("one has {} lines, the other {}", a.lines().count(), b.lines().count())
}

/// A FOLLOWERINFO or OBSERVERINFO as an Apache leader reads it: without zkrs's flags.
fn strip_zkrs_flags(packet: &mut zk_quorum::wire::QuorumPacket) {
    use zk_quorum::wire::payload::LearnerInfo;
    if !matches!(
        PacketType::from_wire(packet.packet_type),
        Ok(PacketType::FollowerInfo | PacketType::ObserverInfo)
    ) {
        return;
    }
    let Some(info) = packet.data.as_ref().and_then(|d| LearnerInfo::decode(d).ok()) else { return };
    if info.zkrs_flags.is_some() {
        packet.data = Some(LearnerInfo { zkrs_flags: Some(0), ..info }.encode());
    }
}
