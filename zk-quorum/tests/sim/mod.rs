//! Deterministic whole-ensemble simulation of Zab (the `zab` leader and learner machines).
//!
//! One seed drives everything: message delays (per-connection FIFO, reordering only across
//! connections), crashes (unsynced log records lost, or a random prefix of them kept with the rest
//! torn away), restarts, partitions (TCP does not drop: traffic across one waits, and connections
//! end by timeouts), log purges and client writes. Time is simulated in 10 ms steps.
//!
//! Elections: either the crate's Fast Leader Election machines over a simulated election network,
//! or a deterministic stand-in (the live looking voters of one side of the network that form a
//! quorum pick the best (currentEpoch, lastLoggedZxid, sid) among them; a looking server that can
//! reach a leader joins it). Zab's safety must not depend on which leader is picked.
//!
//! The server model around each machine: a log (a snapshot base plus records, each record durable
//! only once a sync op completed), epoch files written atomically and synced apart from the log,
//! a database that is the list of applied transactions (reloaded from the log at every role
//! change, as Apache does after an election), disk work flushed when a role ends, and at the
//! leader a tiny proposer that commits in zxid order on a quorum of ACKs (its own after its log
//! sync).
//!
//! Checkers:
//! - at most one leader is established per epoch;
//! - the committed chain (every write acknowledged to a client, and each new epoch's initial
//!   history) only grows: every established leader's history starts with it (no acknowledged write
//!   lost), every commit extends it consistently;
//! - a learner's database is a prefix-consistent copy of the chain whenever it is up to date and at
//!   each commit after that; commits and log appends come in zxid order;
//! - a restarted server's epochs are consistent with its log (acceptedEpoch covers every record;
//!   a currentEpoch below the last record's epoch, which Apache refuses, is counted);
//! - once healed and quiet, one leader is established, every server is synced, and all logs and
//!   databases equal the committed chain (this also checks liveness).
//!
//! `ZAB_SEEDS=N` runs N seeds per configuration (default 200 each) and prints each failing seed;
//! `ZAB_SEED=S` replays one with a trace; `ZAB_VERBOSE=1` traces the named scenarios.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_quorum::election::{
    ElectionAction, ElectionConfig, ElectionTimings, FastLeaderElection, PeerData, Vote,
};
use zk_quorum::quorum::QuorumVerifier;
use zk_quorum::wire::packet::JUTE_MAXBUFFER_DEFAULT;
use zk_quorum::wire::{Notification, PeerState, QuorumPacket, QuorumPacketDecoder};
use zk_quorum::zab::{
    epoch_of, make_zxid, ConnId, Leader, LeaderAction, Learner, LearnerAction, LocalState, ZabConfig,
};

type Hist = Vec<(i64, Bytes)>;

const STEP_MS: u64 = 10;

#[derive(Debug, Clone)]
struct Params {
    voters: Vec<i64>,
    observers: Vec<i64>,
    fault_ms: u64,
    quiet_ms: u64,
    crash_p: f64,
    partition_p: f64,
    propose_p: f64,
    purge_p: f64,
    window: usize,
    max_delay_ms: u64,
    min_disk_ms: u64,
    max_disk_ms: u64,
    /// Elect with the Fast Leader Election machines (else the deterministic stand-in).
    fle: bool,
}

impl Params {
    fn three() -> Params {
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
        }
    }

    /// Slow disks and frequent crashes: wide windows between "logged" and "durable".
    fn crashy() -> Params {
        Params { crash_p: 0.008, max_disk_ms: 150, propose_p: 0.2, fault_ms: 5_000, ..Params::three() }
    }

    fn five() -> Params {
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
    Install(i64, Hist),
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
    outstanding: BTreeMap<i64, (Bytes, BTreeSet<i64>)>,
}

struct Server {
    sid: i64,
    observer: bool,
    accepted: u32,
    current: u32,
    /// Durable snapshot: the history through its last zxid.
    base: Hist,
    /// Log records after the base; `synced` of them are durable.
    log: Hist,
    synced: usize,
    db: Hist,
    /// Log operations (appends' syncs, truncation, snapshot install), in order.
    disk: VecDeque<(u64, u64, DiskOp)>,
    /// Epoch file writes: other files, synced independently of the log.
    meta: VecDeque<(u64, u64, DiskOp)>,
    role: Role,
    gen: u64,
    since_ms: u64,
    inbox: VecDeque<Msg>,
    snap: Option<(i64, Vec<u8>)>,
    installing: bool,
    up_to_date: bool,
    proposer: Proposer,
    /// The election machine (FLE mode), alive while the server is up.
    fle: Option<FastLeaderElection>,
    /// FLE decided to follow this vote, since then: connect once its leader leads with it.
    wants: Option<(Vote, u64)>,
}

impl Server {
    fn last_zxid(&self) -> i64 {
        self.log.last().or(self.base.last()).map_or(0, |r| r.0)
    }

    fn history(&self) -> Hist {
        self.base.iter().chain(self.log.iter()).cloned().collect()
    }

    fn local(&self) -> LocalState {
        LocalState {
            accepted_epoch: self.accepted,
            current_epoch: self.current,
            last_logged_zxid: self.last_zxid(),
            first_logged_zxid: self.log.first().map(|r| r.0),
        }
    }

    fn is_up(&self) -> bool {
        !matches!(self.role, Role::Down)
    }
}

struct Sim {
    rng: StdRng,
    now: u64,
    p: Params,
    verifier: QuorumVerifier,
    servers: BTreeMap<i64, Server>,
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
    stats: Stats,
    /// Election notifications in flight: (deliver at, from, to, notification).
    election_net: Vec<(u64, i64, i64, Notification)>,
    /// Last delivery time per (from, to): one TCP connection per pair keeps order.
    election_last: BTreeMap<(i64, i64), u64>,
}

#[derive(Debug, Default, Clone)]
struct Stats {
    established: u64,
    commits: u64,
    crashes: u64,
    partitions: u64,
    diffs: u64,
    truncs: u64,
    snaps: u64,
    log_reads: u64,
    epoch_behind_log: u64,
}

type R = Result<(), String>;

impl Sim {
    fn new(seed: u64, p: Params, verbose: bool) -> Sim {
        let verifier = QuorumVerifier::majority(p.voters.clone(), p.observers.clone());
        let mut servers = BTreeMap::new();
        for sid in p.voters.iter().chain(p.observers.iter()) {
            servers.insert(
                *sid,
                Server {
                    sid: *sid,
                    observer: p.observers.contains(sid),
                    accepted: 0,
                    current: 0,
                    base: vec![],
                    log: vec![],
                    synced: 0,
                    db: vec![],
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
        }
    }

    fn peer_data(&self, sid: i64) -> PeerData {
        let s = &self.servers[&sid];
        PeerData { last_logged_zxid: s.last_zxid(), current_epoch: i64::from(s.current) }
    }

    /// A role ended: back to LOOKING (a new election round in FLE mode).
    fn looking(&mut self, sid: i64) -> R {
        self.drop_role(sid);
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
        let s = self.servers.get_mut(&sid).unwrap();
        s.wants = None;
        match &mut s.fle {
            Some(f) => f.start_election(data, now),
            None => s.fle = Some(FastLeaderElection::new(fle_cfg, data, now)),
        }
        self.drain_election(sid)
    }

    fn drain_election(&mut self, sid: i64) -> R {
        loop {
            let Some(a) = self.servers.get_mut(&sid).unwrap().fle.as_mut().and_then(|f| f.poll_action())
            else {
                return Ok(());
            };
            match a {
                ElectionAction::Send { to, notification } => {
                    let d = self.rng.gen_range(1..=self.p.max_delay_ms);
                    let last = self.election_last.entry((sid, to)).or_insert(0);
                    let at = (*last).max(self.now + d);
                    *last = at;
                    self.election_net.push((at, sid, to, notification));
                }
                ElectionAction::Decided { leader, state, vote } => {
                    if !matches!(self.servers[&sid].role, Role::Looking) {
                        continue;
                    }
                    self.log(|| format!("{sid} decides {state:?} for {leader}"));
                    if state == PeerState::Leading {
                        self.lead(sid)?;
                    } else {
                        self.servers.get_mut(&sid).unwrap().wants = Some((vote, self.now));
                    }
                }
            }
        }
    }

    /// FLE mode: notifications, election timeouts, and learners connecting to their leader.
    fn elect_fle(&mut self) -> R {
        let now = self.now;
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.election_net.len() {
            if self.election_net[i].0 <= now {
                due.push(self.election_net.remove(i));
            } else {
                i += 1;
            }
        }
        for (_, from, to, n) in due {
            if !reachable(&self.partition, from, to) || !self.servers[&to].is_up() {
                continue;
            }
            if let Some(f) = self.servers.get_mut(&to).unwrap().fle.as_mut() {
                f.handle_notification(from, n, now);
            }
            self.drain_election(to)?;
        }
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids.iter().copied() {
            let s = self.servers.get_mut(&sid).unwrap();
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
                self.servers.get_mut(&sid).unwrap().wants = None;
                self.follow(sid, leader)?;
            } else if now >= since + init_ms {
                self.log(|| format!("{sid} gives up on leader {leader}"));
                self.looking(sid)?;
            }
        }
        Ok(())
    }

    fn cfg(&self, sid: i64) -> ZabConfig {
        let mut c = ZabConfig::new(sid, self.verifier.clone(), 100, 10, 5);
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

    fn run(&mut self) -> R {
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
                return self.check_converged();
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
            self.propose()?;
        }
        Ok(())
    }

    fn faults(&mut self) -> R {
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids {
            if self.servers[&sid].is_up() && self.rng.gen_bool(self.p.crash_p) {
                self.crash(sid);
            }
            if self.rng.gen_bool(self.p.purge_p) {
                self.purge(sid);
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

    /// A snapshot is taken and the log before it purged: only synced records move.
    fn purge(&mut self, sid: i64) {
        let s = self.servers.get_mut(&sid).unwrap();
        if s.synced > 3 {
            let k = s.synced - 3;
            let moved: Vec<(i64, Bytes)> = s.log.drain(..k).collect();
            s.base.extend(moved);
            s.synced -= k;
        }
    }

    fn crash(&mut self, sid: i64) {
        let keep = {
            let s = &self.servers[&sid];
            let unsynced = s.log.len() - s.synced;
            s.synced + self.rng.gen_range(0..=unsynced)
        };
        let down_for = self.rng.gen_range(100..1_500);
        self.crash_keeping(sid, keep, down_for);
    }

    /// Crashes `sid` keeping the first `keep` log records (at least the synced ones).
    fn crash_keeping(&mut self, sid: i64, keep: usize, down_for: u64) {
        self.stats.crashes += 1;
        let keep = keep.max(self.servers[&sid].synced).min(self.servers[&sid].log.len());
        self.log(|| format!("crash {sid} (keeps {keep} log records), down for {down_for}"));
        let s = self.servers.get_mut(&sid).unwrap();
        s.disk.clear();
        s.meta.clear();
        self.drop_role(sid);
        let s = self.servers.get_mut(&sid).unwrap();
        s.log.truncate(keep);
        s.synced = keep;
        s.db.clear();
        s.role = Role::Down;
        s.fle = None;
        s.wants = None;
        self.down_until.insert(sid, self.now + down_for);
    }

    fn restart(&mut self, sid: i64) -> R {
        self.down_until.remove(&sid);
        let s = self.servers.get_mut(&sid).unwrap();
        if !matches!(s.role, Role::Down) {
            return Ok(());
        }
        let last_epoch = epoch_of(s.last_zxid());
        if s.accepted < last_epoch || s.accepted < s.current {
            return Err(format!(
                "server {sid} cannot start: acceptedEpoch {} currentEpoch {} last zxid {:#x}",
                s.accepted,
                s.current,
                s.last_zxid()
            ));
        }
        if s.current < last_epoch {
            // A crash after the synced records were durable but before currentEpoch was written
            // (the order ZK-4643 requires), when the sync carried records of an epoch the server
            // never joined. Apache 3.8 refuses to start here; starting with the lower epoch only
            // ranks the server lower in elections, which is safe.
            self.stats.epoch_behind_log += 1;
        }
        s.db = s.history();
        s.role = Role::Looking;
        s.since_ms = self.now;
        self.log(|| format!("restart {sid}"));
        self.looking(sid)
    }

    /// Ends the server's current role: its connections close (the peer hears it when reachable).
    fn drop_role(&mut self, sid: i64) {
        let ids: Vec<ConnId> =
            self.conns.iter().filter(|(_, c)| c.leader == sid || c.learner == sid).map(|(i, _)| *i).collect();
        for id in ids {
            self.close_side(id, sid);
        }
        let gen = self.next_gen;
        self.next_gen += 1;
        let now = self.now;
        let s = self.servers.get_mut(&sid).unwrap();
        // A server leaving a role finishes its disk work first (ZK-4541, -4712: flush on every
        // shutdown), so that the next role starts from what is really on disk.
        loop {
            let log_at = s.disk.front().map_or(u64::MAX, |o| o.0);
            let meta_at = s.meta.front().map_or(u64::MAX, |o| o.0);
            let lane = if meta_at < log_at { &mut s.meta } else { &mut s.disk };
            let Some((_, _, op)) = lane.pop_front() else { break };
            apply_op(s, op, false, now);
        }
        s.synced = s.log.len();
        s.gen = gen;
        // As Apache after an election: the database is reloaded from the log, so it holds every
        // logged record (a DIFF sync takes the log, not the applied state, as the learner's history).
        s.db = s.history();
        s.role = Role::Looking;
        s.since_ms = self.now;
        s.inbox.clear();
        s.snap = None;
        s.installing = false;
        s.up_to_date = false;
        s.proposer = Proposer::default();
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
                    let (_, msg) = pipe.queue.pop_front().unwrap();
                    let gen = if to_leader { c.leader_gen } else { c.learner_gen };
                    let target = if to_leader { a } else { b };
                    if gen == 0 || self.servers[&target].gen != gen {
                        continue;
                    }
                    if to_leader {
                        self.at_leader(target, id, msg)?;
                    } else {
                        self.servers.get_mut(&target).unwrap().inbox.push_back(msg);
                        self.pump(target)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn at_leader(&mut self, sid: i64, id: ConnId, msg: Msg) -> R {
        let now = self.now;
        let closed = matches!(msg, Msg::Closed);
        {
            let Role::Leading(l) = &mut self.servers.get_mut(&sid).unwrap().role else { return Ok(()) };
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
            let s = self.servers.get_mut(&sid).unwrap();
            // Only reading the raw stream stops the packet flow: packets that follow it are fed
            // in while the snapshot installs, and the learner machine must hold them.
            let Some(msg) = s.inbox.pop_front() else { return Ok(()) };
            if let Some((zxid, buf)) = &mut s.snap {
                let zxid = *zxid;
                match msg {
                    Msg::Raw(b) => buf.extend_from_slice(&b),
                    Msg::Closed => {
                        self.looking(sid)?;
                        return Ok(());
                    }
                    Msg::Packet(p) => return Err(format!("packet {p:?} inside a snapshot stream")),
                }
                if let Some(hist) = decode_snapshot(buf) {
                    if hist.last().map_or(0, |r| r.0) != zxid {
                        return Err(format!("snapshot of {zxid:#x} holds {:?}", hist.last().map(|r| r.0)));
                    }
                    s.snap = None;
                    s.installing = true;
                    let gen = s.gen;
                    let at = self.disk_time(sid);
                    self.servers.get_mut(&sid).unwrap().disk.push_back((
                        at,
                        gen,
                        DiskOp::Install(zxid, hist),
                    ));
                }
                continue;
            }
            match msg {
                Msg::Packet(p) => {
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
            let s = self.servers.get_mut(&sid).unwrap();
            let at = s.meta.back().map_or(0, |o| o.0).max(self.now + d);
            s.meta.push_back((at, s.gen, op));
            return;
        }
        let at = self.disk_time(sid);
        let s = self.servers.get_mut(&sid).unwrap();
        let gen = s.gen;
        s.disk.push_back((at, gen, op));
    }

    fn disk(&mut self) -> R {
        let sids: Vec<i64> = self.servers.keys().copied().collect();
        for sid in sids {
            loop {
                let now = self.now;
                let s = self.servers.get_mut(&sid).unwrap();
                let log_at = s.disk.front().map_or(u64::MAX, |o| o.0);
                let meta_at = s.meta.front().map_or(u64::MAX, |o| o.0);
                if log_at.min(meta_at) > now {
                    break;
                }
                let lane = if meta_at < log_at { &mut s.meta } else { &mut s.disk };
                let (_, gen, op) = lane.pop_front().unwrap();
                let live = gen == s.gen;
                apply_op(s, op, live, now);
                if live {
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
            match &mut self.servers.get_mut(&sid).unwrap().role {
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
                    let best = voters
                        .iter()
                        .copied()
                        .max_by_key(|s| {
                            let sv = &self.servers[s];
                            (sv.current, sv.last_zxid(), *s)
                        })
                        .unwrap();
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
        self.drop_role(sid);
        let cfg = self.cfg(sid);
        let now = self.now;
        let s = self.servers.get_mut(&sid).unwrap();
        let local = s.local();
        let skip = s.log.len().saturating_sub(self.p.window);
        let recent: Hist = s.log[skip..].to_vec();
        s.db = s.history();
        s.role = Role::Leading(Box::new(Leader::new(cfg, local, recent, now)));
        self.log(|| format!("{sid} leads with {local:?}"));
        self.drain(sid)
    }

    fn follow(&mut self, sid: i64, leader: i64) -> R {
        self.drop_role(sid);
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
        let s = self.servers.get_mut(&sid).unwrap();
        let local = s.local();
        let mut learner = Learner::new(cfg, leader, s.observer, local, now);
        learner.connected(now);
        s.role = Role::Following(Box::new(learner), id);
        self.log(|| format!("{sid} follows {leader} on conn {id} with {local:?}"));
        if let Role::Leading(l) = &mut self.servers.get_mut(&leader).unwrap().role {
            l.learner_connected(id, now);
        }
        self.drain(leader)?;
        self.drain(sid)
    }

    fn propose(&mut self) -> R {
        let leaders: Vec<i64> = self
            .servers
            .iter()
            .filter(|(_, s)| {
                s.proposer.established.is_some() && matches!(&s.role, Role::Leading(l) if l.is_established())
            })
            .map(|(k, _)| *k)
            .collect();
        for sid in leaders {
            let now = self.now;
            let s = self.servers.get_mut(&sid).unwrap();
            let epoch = s.proposer.established.unwrap();
            s.proposer.next_counter += 1;
            let zxid = make_zxid(epoch, s.proposer.next_counter);
            let payload = Bytes::from(format!("w{sid}.{epoch}.{}", s.proposer.next_counter));
            s.log.push((zxid, payload.clone()));
            s.proposer.outstanding.insert(zxid, (payload.clone(), BTreeSet::new()));
            if let Role::Leading(l) = &mut s.role {
                l.propose(zxid, payload, now);
            }
            self.push_disk(sid, DiskOp::Sync(zxid));
            self.drain(sid)?;
        }
        Ok(())
    }

    fn drain(&mut self, sid: i64) -> R {
        loop {
            let mut leader_actions = Vec::new();
            let mut learner_actions = Vec::new();
            match &mut self.servers.get_mut(&sid).unwrap().role {
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
                self.learner_action(sid, id, a)?;
                if !matches!(self.servers[&sid].role, Role::Following(..)) {
                    return Ok(());
                }
            }
        }
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
                self.log(|| format!("{sid} closes conn {conn}: {reason}"));
                self.close_side(conn, sid);
            }
            LeaderAction::PersistAcceptedEpoch(e) => self.push_disk(sid, DiskOp::Accepted(e)),
            LeaderAction::PersistCurrentEpoch(e) => self.push_disk(sid, DiskOp::Current(e)),
            LeaderAction::ReadLog { req, from_zxid, through_zxid } => {
                self.stats.log_reads += 1;
                let s = self.servers.get_mut(&sid).unwrap();
                let Role::Leading(l) = &mut s.role else { return Ok(()) };
                let anchor = s.log.iter().rposition(|r| r.0 <= from_zxid);
                match anchor {
                    None => l.log_read_failed(req, now),
                    Some(i) => {
                        let entries: Hist =
                            s.log[i..].iter().filter(|r| r.0 <= through_zxid).cloned().collect();
                        l.log_read(req, entries, now);
                    }
                }
            }
            LeaderAction::SerializeSnapshot { req, zxid } => {
                let s = self.servers.get_mut(&sid).unwrap();
                if s.db.last().map_or(0, |r| r.0) != zxid {
                    return Err(format!(
                        "{sid}: snapshot of {zxid:#x} asked with the database at {:?}",
                        s.db.last()
                    ));
                }
                let bytes = encode_snapshot(&s.db);
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
                let s = self.servers.get_mut(&sid).unwrap();
                s.proposer.established = Some(epoch);
                s.proposer.next_counter = 0;
                let db = s.db.clone();
                self.log(|| format!("{sid} established epoch {epoch} with {} txns", db.len()));
                if db.len() < self.chain.len() || db[..self.chain.len()] != self.chain[..] {
                    return Err(format!(
                        "leader {sid} of epoch {epoch} lost committed txns: chain ends {:?}, its history {:?}",
                        self.chain.last(),
                        db.iter().map(|r| r.0).collect::<Vec<_>>()
                    ));
                }
                self.chain = db;
            }
            LeaderAction::Ack { sid: from, zxid } => {
                let s = self.servers.get_mut(&sid).unwrap();
                if let Some((_, acks)) = s.proposer.outstanding.get_mut(&zxid) {
                    acks.insert(from);
                }
                self.try_commit(sid)?;
            }
            LeaderAction::Forwarded { .. } | LeaderAction::Touch { .. } | LeaderAction::Revalidate { .. } => {
            }
            LeaderAction::StepDown { reason } => {
                self.log(|| format!("{sid} steps down: {reason}"));
                self.looking(sid)?;
            }
        }
        Ok(())
    }

    fn try_commit(&mut self, sid: i64) -> R {
        loop {
            let now = self.now;
            let s = self.servers.get_mut(&sid).unwrap();
            let Some((&zxid, (_, acks))) = s.proposer.outstanding.iter().next() else { return Ok(()) };
            if !self.verifier.contains_quorum(acks.iter().copied()) {
                return Ok(());
            }
            let (payload, _) = s.proposer.outstanding.remove(&zxid).unwrap();
            s.db.push((zxid, payload.clone()));
            let n = s.db.len();
            if let Role::Leading(l) = &mut s.role {
                l.committed(zxid, now);
            }
            self.stats.commits += 1;
            if n != self.chain.len() + 1 || self.chain[..] != self.servers[&sid].db[..n - 1] {
                return Err(format!(
                    "leader {sid} commits {zxid:#x} on a history that is not the committed chain"
                ));
            }
            self.chain.push((zxid, payload));
        }
    }

    fn learner_action(&mut self, sid: i64, conn: ConnId, a: LearnerAction) -> R {
        match a {
            LearnerAction::Send(p) => self.send(conn, true, Msg::Packet(p)),
            LearnerAction::PersistAcceptedEpoch(e) => self.push_disk(sid, DiskOp::Accepted(e)),
            LearnerAction::PersistCurrentEpoch(e) => self.push_disk(sid, DiskOp::Current(e)),
            LearnerAction::Truncate { after_zxid } => self.push_disk(sid, DiskOp::Truncate(after_zxid)),
            LearnerAction::ReceiveSnapshot { zxid } => {
                self.servers.get_mut(&sid).unwrap().snap = Some((zxid, Vec::new()));
            }
            LearnerAction::Log { zxid, payload } => {
                let s = self.servers.get_mut(&sid).unwrap();
                if zxid <= s.last_zxid() {
                    return Err(format!("{sid}: Log {zxid:#x} after {:#x}", s.last_zxid()));
                }
                s.log.push((zxid, payload));
                self.push_disk(sid, DiskOp::Sync(zxid));
            }
            LearnerAction::Commit { zxid, payload } => {
                let s = self.servers.get_mut(&sid).unwrap();
                if s.db.last().is_some_and(|r| r.0 >= zxid) {
                    return Err(format!("{sid}: Commit {zxid:#x} after {:?}", s.db.last()));
                }
                s.db.push((zxid, payload));
                if s.up_to_date {
                    let i = s.db.len() - 1;
                    if i < self.chain.len() && self.chain[i] != s.db[i] {
                        return Err(format!(
                            "{sid}: committed {zxid:#x} at {i}, the chain has {:?}",
                            self.chain[i]
                        ));
                    }
                }
            }
            LearnerAction::UpToDate => {
                let s = self.servers.get_mut(&sid).unwrap();
                s.up_to_date = true;
                let n = s.db.len().min(self.chain.len());
                if s.db[..n] != self.chain[..n] {
                    return Err(format!("{sid}: up to date with a database that diverges from the chain"));
                }
            }
            LearnerAction::SyncDone | LearnerAction::Revalidated { .. } => {}
            LearnerAction::Disconnect { reason } => {
                self.log(|| format!("{sid} disconnects: {reason}"));
                self.looking(sid)?;
            }
        }
        Ok(())
    }

    fn converged(&self) -> bool {
        let leaders: Vec<&Server> = self
            .servers
            .values()
            .filter(|s| matches!(&s.role, Role::Leading(l) if l.is_established()))
            .collect();
        if leaders.len() != 1 {
            return false;
        }
        let leader = leaders[0];
        if !leader.proposer.outstanding.is_empty() || leader.synced != leader.log.len() {
            return false;
        }
        self.servers.values().all(|s| {
            s.sid == leader.sid
                || (s.up_to_date
                    && s.db.len() == leader.db.len()
                    && s.synced == s.log.len()
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
                    format!("{}: {role} db {} log {}", s.sid, s.db.len(), s.history().len())
                })
                .collect();
            return Err(format!("no convergence after the quiet period: {states:?}"));
        }
        for s in self.servers.values() {
            if s.history() != self.chain {
                return Err(format!(
                    "{}: log {:?} differs from the chain {:?}",
                    s.sid,
                    s.history().iter().map(|r| r.0).collect::<Vec<_>>(),
                    self.chain.iter().map(|r| r.0).collect::<Vec<_>>()
                ));
            }
            if s.db != self.chain {
                return Err(format!("{}: database differs from the chain", s.sid));
            }
        }
        Ok(())
    }
}

/// Scripted runs (the §5 scenarios) drive the same simulator without random faults.
impl Sim {
    /// Gives `sid` a durable state before the run: epochs and a history, in the log or (purged)
    /// all in the snapshot base.
    fn preload(&mut self, sid: i64, accepted: u32, current: u32, hist: Hist, purged: bool) {
        let s = self.servers.get_mut(&sid).unwrap();
        s.accepted = accepted;
        s.current = current;
        if purged {
            s.base = hist;
        } else {
            s.synced = hist.len();
            s.log = hist;
        }
        s.db = s.history();
    }

    fn established_leader(&self) -> Option<i64> {
        self.servers
            .values()
            .find(|s| matches!(&s.role, Role::Leading(l) if l.is_established()))
            .map(|s| s.sid)
    }

    fn run_until(&mut self, max_ms: u64, what: &str, cond: impl Fn(&Sim) -> bool) -> R {
        let end = self.now + max_ms;
        while self.now < end {
            self.step(false)?;
            if cond(self) {
                return Ok(());
            }
        }
        Err(format!("t={}: no {what} within {max_ms} ms", self.now))
    }

    /// Restarts everyone, waits for quiet, checks that all logs equal the committed chain.
    fn finish(&mut self) -> R {
        let down: Vec<i64> = self.down_until.keys().copied().collect();
        for sid in down {
            self.restart(sid)?;
        }
        let _ = self.run_until(self.p.quiet_ms, "convergence", |s| s.converged());
        self.check_converged()
    }
}

const FOREVER: u64 = u64::MAX / 4;

fn hist(epoch: u32, from: u32, to: u32, tag: &str) -> Hist {
    (from..=to).map(|c| (make_zxid(epoch, c), Bytes::from(format!("{tag}{epoch}.{c}")))).collect()
}

fn scenario(name: &str, p: Params, script: impl FnOnce(&mut Sim) -> R) {
    let verbose = std::env::var("ZAB_VERBOSE").is_ok();
    let mut sim = Sim::new(7, p, verbose);
    if let Err(e) = script(&mut sim) {
        panic!("{name}: {e} (ZAB_VERBOSE=1 to trace)");
    }
}

fn slow_disks() -> Params {
    Params { min_disk_ms: 200, max_disk_ms: 200, ..Params::three() }
}

/// ZK-3911, -4646, -4785: the NEWLEADER ACK of a follower synced by DIFF counts towards the new
/// epoch's quorum, so the DIFF txns must be durable before it. Here the leader and that follower
/// crash the moment the epoch is established, losing every unsynced record; the follower then
/// leads, and must still hold the whole initial history.
#[test]
fn zk_3911_newleader_ack_waits_for_durable_diff_txns() {
    scenario("ZK-3911", slow_disks(), |sim| {
        let h = hist(1, 1, 5, "t");
        sim.preload(1, 1, 1, h.clone(), false);
        sim.preload(2, 1, 1, h[..2].to_vec(), false);
        sim.crash_keeping(3, 0, FOREVER);
        sim.run_until(3_000, "leader", |s| s.established_leader().is_some())?;
        sim.crash_keeping(1, 0, FOREVER);
        sim.crash_keeping(2, 0, FOREVER);
        sim.restart(2)?;
        sim.restart(3)?;
        sim.run_until(3_000, "new leader", |s| s.established_leader() == Some(2))?;
        sim.finish()
    });
}

/// ZK-3642: a snapshot received by SNAP is durable before the NEWLEADER ACK, so the same crash
/// right after establishment loses nothing.
#[test]
fn zk_3642_snap_is_durable_before_the_newleader_ack() {
    scenario("ZK-3642", slow_disks(), |sim| {
        sim.preload(1, 1, 1, hist(1, 1, 5, "t"), true);
        sim.crash_keeping(3, 0, FOREVER);
        sim.run_until(3_000, "leader", |s| s.established_leader().is_some())?;
        if sim.stats.snaps == 0 {
            return Err("no SNAP sync happened".into());
        }
        sim.crash_keeping(1, 0, FOREVER);
        sim.crash_keeping(2, 0, FOREVER);
        sim.restart(2)?;
        sim.restart(3)?;
        sim.run_until(3_000, "new leader", |s| s.established_leader() == Some(2))?;
        sim.finish()
    });
}

/// ZK-2832: a learner with an uncommitted txn above the leader's SNAP zxid must not keep it (nor
/// replay it after a restart): the snapshot resets its log.
#[test]
fn zk_2832_no_stale_txn_survives_a_snap() {
    scenario("ZK-2832", Params::three(), |sim| {
        let committed = hist(1, 1, 3, "t");
        let mut leader = committed.clone();
        leader.extend(hist(2, 1, 2, "t"));
        let mut stale = committed.clone();
        stale.extend(hist(1, 4, 4, "stale"));
        sim.preload(1, 2, 2, leader, true);
        sim.preload(2, 1, 1, stale, false);
        sim.crash_keeping(3, 0, FOREVER);
        sim.run_until(3_000, "leader", |s| s.established_leader().is_some())?;
        if sim.stats.snaps == 0 {
            return Err("no SNAP sync happened".into());
        }
        sim.crash_keeping(2, usize::MAX, 100);
        sim.crash_keeping(1, 0, FOREVER);
        sim.restart(2)?;
        sim.restart(3)?;
        sim.run_until(3_000, "new leader", |s| s.established_leader() == Some(2))?;
        sim.finish()
    });
}

/// ZK-2355 (and the learner side of ZK-3023): a follower crashing in the middle of a DIFF sync,
/// with part of it logged and part torn, resyncs from what its log really holds.
#[test]
fn zk_2355_crash_in_the_middle_of_a_diff_sync() {
    let mut p = slow_disks();
    p.min_disk_ms = 30;
    p.max_disk_ms = 60;
    scenario("ZK-2355", p, |sim| {
        let h = hist(1, 1, 40, "t");
        sim.preload(1, 1, 1, h.clone(), false);
        sim.preload(2, 1, 1, h[..30].to_vec(), false);
        sim.crash_keeping(3, 0, FOREVER);
        sim.run_until(3_000, "half a sync", |s| {
            let f = &s.servers[&2];
            f.synced > 32 && f.log.len() > f.synced
        })?;
        if sim.established_leader().is_some() {
            return Err("established before the crash".into());
        }
        let keep = sim.servers[&2].synced + 1;
        sim.crash_keeping(2, keep, 300);
        sim.finish()
    });
}

/// Applies a completed disk operation; `live` when the role that asked for it still runs (then
/// it hears back).
fn apply_op(s: &mut Server, op: DiskOp, live: bool, now: u64) {
    match op {
        DiskOp::Sync(upto) => {
            let n = s.log.iter().take_while(|r| r.0 <= upto).count();
            s.synced = s.synced.max(n);
            if live {
                match &mut s.role {
                    Role::Leading(l) => l.local_durable(upto, now),
                    Role::Following(l, _) => l.durable(upto, now),
                    _ => {}
                }
            }
        }
        DiskOp::Accepted(e) => {
            s.accepted = e;
            if live {
                epoch_persisted(&mut s.role, now);
            }
        }
        DiskOp::Current(e) => {
            s.current = e;
            if live {
                epoch_persisted(&mut s.role, now);
            }
        }
        DiskOp::Truncate(z) => {
            s.base.retain(|r| r.0 <= z);
            s.log.retain(|r| r.0 <= z);
            s.synced = s.log.len();
            s.db = s.history();
            if live {
                if let Role::Following(l, _) = &mut s.role {
                    l.truncated(z, now);
                }
            }
        }
        DiskOp::Install(z, hist) => {
            s.base = hist.clone();
            s.log.clear();
            s.synced = 0;
            if live {
                s.db = hist;
                s.installing = false;
                if let Role::Following(l, _) = &mut s.role {
                    l.snapshot_loaded(z, now);
                }
            }
        }
    }
}

fn reachable(partition: &Option<(BTreeSet<i64>, u64)>, a: i64, b: i64) -> bool {
    match partition {
        None => true,
        Some((side, _)) => side.contains(&a) == side.contains(&b),
    }
}

fn epoch_persisted(role: &mut Role, now: u64) {
    match role {
        Role::Leading(l) => l.epoch_persisted(now),
        Role::Following(l, _) => l.epoch_persisted(now),
        _ => {}
    }
}

/// The sim's snapshot stream: u32 total length, then (i64 zxid, u32 len, bytes) records.
fn encode_snapshot(h: &Hist) -> Bytes {
    let mut out = vec![0u8; 4];
    for (z, p) in h {
        out.extend_from_slice(&z.to_be_bytes());
        out.extend_from_slice(&(p.len() as u32).to_be_bytes());
        out.extend_from_slice(p);
    }
    let n = out.len() as u32;
    out[..4].copy_from_slice(&n.to_be_bytes());
    Bytes::from(out)
}

fn decode_snapshot(buf: &[u8]) -> Option<Hist> {
    let n = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    if buf.len() < n {
        return None;
    }
    let mut h = Vec::new();
    let mut pos = 4;
    while pos < n {
        let z = i64::from_be_bytes(buf[pos..pos + 8].try_into().ok()?);
        let len = u32::from_be_bytes(buf[pos + 8..pos + 12].try_into().ok()?) as usize;
        h.push((z, Bytes::copy_from_slice(&buf[pos + 12..pos + 12 + len])));
        pos += 12 + len;
    }
    Some(h)
}

fn run_seed(seed: u64, p: Params, verbose: bool) -> Result<Stats, String> {
    let mut sim = Sim::new(seed, p, verbose);
    sim.run().map(|_| sim.stats.clone()).map_err(|e| format!("t={} {e}", sim.now))
}

fn seeds(default: u64) -> u64 {
    std::env::var("ZAB_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn run_many(name: &str, p: Params, n: u64, base: u64) {
    if let Some(seed) = std::env::var("ZAB_SEED").ok().and_then(|s| s.parse::<u64>().ok()) {
        let r = run_seed(seed, p, true);
        println!("{name} seed {seed}: {r:?}");
        assert!(r.is_ok());
        return;
    }
    let mut total = Stats::default();
    let mut failures = Vec::new();
    for seed in base..base + n {
        match run_seed(seed, p.clone(), false) {
            Ok(s) => {
                total.established += s.established;
                total.commits += s.commits;
                total.crashes += s.crashes;
                total.partitions += s.partitions;
                total.diffs += s.diffs;
                total.truncs += s.truncs;
                total.snaps += s.snaps;
                total.log_reads += s.log_reads;
                total.epoch_behind_log += s.epoch_behind_log;
            }
            Err(e) => {
                println!("{name}: seed {seed} failed (ZAB_SEED={seed} to replay): {e}");
                failures.push(seed);
            }
        }
    }
    println!("{name}: {n} seeds, {total:?}");
    assert!(failures.is_empty(), "{name}: failing seeds {failures:?}");
    assert!(total.commits > 0 && total.established > 0);
}

#[test]
fn three_voters() {
    run_many("three voters", Params::three(), seeds(200), 0);
}

#[test]
fn three_voters_crashing_on_slow_disks() {
    run_many("three voters, slow disks", Params::crashy(), seeds(200), 20_000);
}

#[test]
fn three_voters_electing_with_fle() {
    run_many("three voters, FLE", Params { fle: true, ..Params::three() }, seeds(200), 30_000);
}

#[test]
fn five_voters_and_an_observer_electing_with_fle() {
    run_many("five voters + observer, FLE", Params { fle: true, ..Params::five() }, seeds(200), 40_000);
}

#[test]
fn five_voters_and_an_observer() {
    run_many("five voters + observer", Params::five(), seeds(200), 10_000);
}
