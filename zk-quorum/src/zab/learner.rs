//! The learner's side of Zab (a follower or an observer of one leader).

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use zk_proto::Id;

use super::{counter_of, epoch_of, make_zxid, LocalState, ZabConfig, MAX_LEARNER_QUEUE};
use crate::wire::{
    AckEpoch, ForwardedRequest, LeaderInfo, LearnerInfo, MovedSessions, PacketType, QuorumPacket,
    RevalidateReply, RevalidateRequest, SessionTouch,
};

/// What the server must do for the learner, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnerAction {
    /// Write this packet to the leader.
    Send(QuorumPacket),
    /// Write the `acceptedEpoch` file durably, then call [`Learner::epoch_persisted`].
    PersistAcceptedEpoch(u32),
    /// Write the `currentEpoch` file durably, then call [`Learner::epoch_persisted`].
    PersistCurrentEpoch(u32),
    /// Cut the log durably after `after_zxid`, reload the database from disk, then call
    /// [`Learner::truncated`].
    Truncate {
        /// The last zxid to keep.
        after_zxid: i64,
    },
    /// The next bytes on the socket are a snapshot stream of state `zxid`: load it, make it durable
    /// (snapshot file written and synced, log reset so that no older record survives), then call
    /// [`Learner::snapshot_loaded`] and go on decoding packets.
    ReceiveSnapshot {
        /// The snapshot's zxid.
        zxid: i64,
    },
    /// Append this transaction to the log; report with [`Learner::durable`] once synced.
    Log {
        /// Its zxid.
        zxid: i64,
        /// The PROPOSAL data (TxnHeader + txn).
        payload: Bytes,
    },
    /// Apply this transaction now (they come in zxid order).
    Commit {
        /// Its zxid.
        zxid: i64,
        /// The PROPOSAL data (TxnHeader + txn).
        payload: Bytes,
    },
    /// A configuration to activate, after the [`LearnerAction::Commit`] of `zxid` when it came
    /// with one: a committed reconfiguration (COMMITANDACTIVATE, INFORMANDACTIVATE), with the
    /// server the leader designated to lead it; or, just before [`LearnerAction::UpToDate`], the
    /// configuration NEWLEADER carried (`designated` None, `zxid` the NEWLEADER's). The server
    /// activates it only if its version is newer than its own, as Apache's members do.
    Activate {
        /// The reconfiguration's zxid, or NEWLEADER's.
        zxid: i64,
        /// The configuration string.
        config: Bytes,
        /// The leader of the new configuration, for a committed reconfiguration.
        designated: Option<i64>,
    },
    /// The leader answered the oldest forwarded SYNC: answer that client's sync (FIFO).
    SyncDone,
    /// The leader's verdict on a [`Learner::revalidate`].
    Revalidated {
        /// Session id.
        session: i64,
        /// Whether it lives on.
        valid: bool,
    },
    /// Synced with a quorum: serve clients.
    UpToDate,
    /// The leader handed its leadership over ([`crate::wire::packet::ZKRS_UNPROPOSED`]): every
    /// request this learner forwarded whose commit has not come by now (all commits through
    /// `through` came before this) was never proposed, and may be forwarded again to the next
    /// leader. A [`LearnerAction::Disconnect`] follows.
    Unproposed {
        /// The last zxid the leader committed.
        through: i64,
        /// The sessions the leader saw move to another server: their requests are not
        /// forwarded again (their connections here are left behind).
        moved: MovedSessions,
    },
    /// Leave this leader and go back to LOOKING (silence, protocol violation, lower epoch). The
    /// machine is inert afterwards.
    Disconnect {
        /// Why, for the log.
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before [`Learner::connected`].
    Idle,
    /// FOLLOWERINFO/OBSERVERINFO sent.
    AwaitLeaderInfo,
    /// A higher epoch came: `acceptedEpoch` is being written before ACKEPOCH.
    PersistingAccepted,
    /// ACKEPOCH sent; DIFF, TRUNC or SNAP expected.
    AwaitSyncMode,
    /// Receiving the sync stream, until NEWLEADER.
    Syncing,
    /// NEWLEADER in: waiting for every synced record to be durable, then for `currentEpoch`.
    NewLeaderPending,
    /// NEWLEADER acknowledged; UPTODATE expected.
    AwaitUpToDate,
    /// Up to date: broadcast.
    Broadcast,
    /// Disconnected; every input is ignored.
    Stopped,
}

/// A server operation the sync stream must wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blocked {
    Truncate(i64),
    Snapshot(i64),
}

/// A follower's or observer's Zab state machine for one connection to one leader.
///
/// The order at NEWLEADER is what keeps acknowledged data (ZAB-FACTS §5): every record of the sync
/// is durable ([`LearnerAction::Log`] then [`Learner::durable`]; ZK-3911, -4646, -4785), a snapshot
/// received by SNAP is loaded and durable and a TRUNC is done ([`Learner::snapshot_loaded`],
/// [`Learner::truncated`]; ZK-3642, -2832), then `currentEpoch` is written (ZK-4643), and only then
/// the NEWLEADER ACK goes out, as the first packet after NEWLEADER (ZK-4685). Proposals are
/// acknowledged one by one, in order, once durable and after that ACK; observers never ACK.
#[derive(Debug)]
pub struct Learner {
    cfg: ZabConfig,
    leader_sid: i64,
    observer: bool,
    local: LocalState,
    phase: Phase,
    new_epoch: u32,
    /// The last zxid handed to the log (or there at start).
    last_logged: i64,
    /// The log is durable through here.
    durable_through: i64,
    /// At NEWLEADER, the last record of the sync: it must be durable before the ACK.
    new_leader_needs: i64,
    persisting_current: bool,
    new_leader_acked: bool,
    blocked: Option<Blocked>,
    /// Packets that arrived while a truncation was under way.
    held: VecDeque<QuorumPacket>,
    /// Proposals logged and not yet committed, ascending.
    pending: VecDeque<(i64, Bytes)>,
    /// Proposals to acknowledge once durable, ascending.
    to_ack: VecDeque<i64>,
    /// Sessions touched since the last PING reply.
    touches: BTreeMap<i64, i32>,
    /// Requests made before we were up to date.
    queued_out: VecDeque<QuorumPacket>,
    /// The configuration NEWLEADER carried, activated at UPTODATE.
    new_leader_config: Option<(i64, Bytes)>,
    /// Ask the leader for a SNAP (a zkrs leader honours it; an Apache one ignores it).
    wants_snap: bool,
    last_heard_ms: u64,
    actions: VecDeque<LearnerAction>,
}

impl Learner {
    /// A learner of `leader_sid`; the server connects to its quorum port, then calls
    /// [`Self::connected`].
    pub fn new(cfg: ZabConfig, leader_sid: i64, observer: bool, local: LocalState, now_ms: u64) -> Learner {
        Learner {
            cfg,
            leader_sid,
            observer,
            phase: Phase::Idle,
            new_epoch: 0,
            last_logged: local.last_logged_zxid,
            durable_through: local.last_logged_zxid,
            new_leader_needs: 0,
            persisting_current: false,
            new_leader_acked: false,
            blocked: None,
            held: VecDeque::new(),
            pending: VecDeque::new(),
            to_ack: VecDeque::new(),
            touches: BTreeMap::new(),
            queued_out: VecDeque::new(),
            new_leader_config: None,
            wants_snap: false,
            last_heard_ms: now_ms,
            actions: VecDeque::new(),
            local,
        }
    }

    /// The leader this machine follows.
    pub fn leader_sid(&self) -> i64 {
        self.leader_sid
    }

    /// Whether UPTODATE came (and the machine has not disconnected).
    pub fn is_up_to_date(&self) -> bool {
        self.phase == Phase::Broadcast
    }

    /// Whether the machine disconnected.
    pub fn is_stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// The epoch of the leader, once LEADERINFO came.
    pub fn epoch(&self) -> Option<u32> {
        (self.new_epoch != 0).then_some(self.new_epoch)
    }

    /// Asks the leader to sync this learner by SNAP (call before [`Self::connected`]): its tree
    /// disagreed with the digests the ensemble's proposals carried, and its own disk may hold
    /// the disagreement, so a DIFF would not heal it. The request rides in zkrs's extension of
    /// FOLLOWERINFO, which a zkrs leader honours and an Apache leader ignores.
    pub fn request_snapshot(&mut self) {
        self.wants_snap = true;
    }

    /// The connection to the leader is up: introduce ourselves.
    pub fn connected(&mut self, now_ms: u64) {
        if self.phase != Phase::Idle {
            return;
        }
        let kind = if self.observer { PacketType::ObserverInfo } else { PacketType::FollowerInfo };
        let mut info = LearnerInfo::new(self.cfg.my_sid, self.cfg.verifier.version());
        // Always sent, so that every mixed ensemble shows Apache's leader taking the extension.
        let snap = if self.wants_snap { crate::wire::payload::LEARNER_WANTS_SNAP } else { 0 };
        info.zkrs_flags = Some(snap | crate::wire::payload::LEARNER_TAKES_UNPROPOSED);
        let info = info.encode();
        self.send(QuorumPacket::new(kind, make_zxid(self.local.accepted_epoch, 0), Some(info)));
        self.phase = Phase::AwaitLeaderInfo;
        self.last_heard_ms = now_ms;
    }

    /// A packet from the leader. Anything malformed or out of phase disconnects.
    pub fn handle_packet(&mut self, pkt: QuorumPacket, now_ms: u64) {
        if matches!(self.phase, Phase::Stopped | Phase::Idle) {
            return;
        }
        self.last_heard_ms = now_ms;
        if self.blocked.is_some() {
            if self.held.len() >= MAX_LEARNER_QUEUE {
                return self.disconnect("too many packets during a truncation".into());
            }
            self.held.push_back(pkt);
            return;
        }
        self.process(pkt);
    }

    /// The snapshot announced by [`LearnerAction::ReceiveSnapshot`] is loaded and durable.
    pub fn snapshot_loaded(&mut self, zxid: i64, _now_ms: u64) {
        if self.blocked != Some(Blocked::Snapshot(zxid)) {
            return self.disconnect(format!("snapshot_loaded({zxid:#x}) not asked for"));
        }
        self.last_logged = zxid;
        self.durable_through = zxid;
        self.reset_after_cut();
    }

    /// The truncation asked for by [`LearnerAction::Truncate`] is durable.
    pub fn truncated(&mut self, zxid: i64, _now_ms: u64) {
        if self.blocked != Some(Blocked::Truncate(zxid)) {
            return self.disconnect(format!("truncated({zxid:#x}) not asked for"));
        }
        self.last_logged = zxid;
        self.durable_through = self.durable_through.min(zxid);
        self.reset_after_cut();
    }

    /// The `acceptedEpoch` or `currentEpoch` write asked for is durable.
    pub fn epoch_persisted(&mut self, _now_ms: u64) {
        match self.phase {
            Phase::PersistingAccepted => {
                self.local.accepted_epoch = self.new_epoch;
                self.send_ack_epoch(i64::from(self.local.current_epoch) as i32);
            }
            Phase::NewLeaderPending if self.persisting_current => {
                self.local.current_epoch = self.new_epoch;
                self.persisting_current = false;
                self.phase = Phase::AwaitUpToDate;
                self.new_leader_acked = true;
                // ZK-4685: this ACK is the first packet after NEWLEADER; proposal ACKs follow it.
                self.send(QuorumPacket::new(PacketType::Ack, make_zxid(self.new_epoch, 0), None));
                self.flush_acks();
                self.process_held();
            }
            _ => {
                tracing::warn!(sid = self.cfg.my_sid, phase = ?self.phase, "epoch_persisted with no epoch write pending")
            }
        }
    }

    /// The log is durable through `zxid`.
    pub fn durable(&mut self, zxid: i64, _now_ms: u64) {
        if self.phase == Phase::Stopped || zxid <= self.durable_through {
            return;
        }
        self.durable_through = zxid.min(self.last_logged);
        self.maybe_ack_new_leader();
        self.flush_acks();
    }

    /// A local client's request or ping: reported to the leader in the next PING reply.
    pub fn touch(&mut self, session: i64, timeout: i32) {
        if self.touches.len() < MAX_LEARNER_QUEUE || self.touches.contains_key(&session) {
            self.touches.insert(session, timeout);
        }
    }

    /// Sends a client request to the leader (queued until up to date).
    pub fn forward(&mut self, req: ForwardedRequest) {
        self.forward_with_auth(req, Vec::new());
    }

    /// [`Self::forward`] with the client's identities (the packet's authinfo).
    pub fn forward_with_auth(&mut self, req: ForwardedRequest, authinfo: Vec<Id>) {
        let mut pkt = QuorumPacket::new(PacketType::Request, -1, Some(req.encode()));
        if !authinfo.is_empty() {
            pkt.authinfo = Some(authinfo);
        }
        self.send_when_up(pkt);
    }

    /// Asks the leader to hand its leadership over to this follower (zkrs's `rqld`, a packet
    /// Apache's leader logs and ignores). Sent only once up to date, by a follower; false (nothing
    /// sent) otherwise.
    pub fn request_leadership(&mut self) -> bool {
        if self.phase != Phase::Broadcast || self.observer {
            return false;
        }
        self.send(QuorumPacket {
            packet_type: crate::wire::packet::ZKRS_REQUEST_LEADERSHIP,
            zxid: -1,
            data: None,
            authinfo: None,
        });
        true
    }

    /// Asks the leader whether `session` may live on (answered by [`LearnerAction::Revalidated`]).
    pub fn revalidate(&mut self, session: i64, timeout: i32) {
        let data = RevalidateRequest { session_id: session, timeout_ms: timeout }.encode();
        self.send_when_up(QuorumPacket::new(PacketType::Revalidate, -1, Some(data)));
    }

    /// Disconnects when the leader has been silent for initLimit (before UPTODATE) or syncLimit.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if let Some(deadline) = self.poll_timeout() {
            if now_ms >= deadline {
                self.disconnect(format!("leader {} silent", self.leader_sid));
            }
        }
    }

    /// When this learner last heard from its leader (ms on the clock it is given).
    pub fn last_heard_ms(&self) -> u64 {
        self.last_heard_ms
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<u64> {
        let limit = match self.phase {
            Phase::Idle | Phase::Stopped => return None,
            Phase::Broadcast => self.cfg.sync_ms(),
            _ => self.cfg.init_ms(),
        };
        Some(self.last_heard_ms.saturating_add(limit))
    }

    /// The next thing to do, in order.
    pub fn poll_action(&mut self) -> Option<LearnerAction> {
        self.actions.pop_front()
    }

    fn send(&mut self, pkt: QuorumPacket) {
        self.actions.push_back(LearnerAction::Send(pkt));
    }

    fn send_when_up(&mut self, pkt: QuorumPacket) {
        match self.phase {
            Phase::Broadcast => self.send(pkt),
            Phase::Stopped => {}
            _ if self.queued_out.len() >= MAX_LEARNER_QUEUE => {
                self.disconnect("too many requests before UPTODATE".into())
            }
            _ => self.queued_out.push_back(pkt),
        }
    }

    fn disconnect(&mut self, reason: String) {
        if self.phase == Phase::Stopped {
            return;
        }
        tracing::warn!(sid = self.cfg.my_sid, leader = self.leader_sid, %reason, "leaving the leader");
        self.phase = Phase::Stopped;
        self.held.clear();
        self.queued_out.clear();
        self.actions.push_back(LearnerAction::Disconnect { reason });
    }

    fn send_ack_epoch(&mut self, current_epoch: i32) {
        let data = AckEpoch { current_epoch }.encode();
        self.send(QuorumPacket::new(PacketType::AckEpoch, self.last_logged, Some(data)));
        self.phase = Phase::AwaitSyncMode;
    }

    /// After a TRUNC or SNAP: nothing logged before survives in memory either (ZK-2832), and the
    /// packets held meanwhile are processed.
    fn reset_after_cut(&mut self) {
        self.blocked = None;
        self.pending.clear();
        self.to_ack.clear();
        self.process_held();
    }

    /// Packets held during a truncation or before the NEWLEADER ACK, in arrival order, until
    /// something blocks again.
    fn process_held(&mut self) {
        while self.blocked.is_none() && !matches!(self.phase, Phase::Stopped | Phase::NewLeaderPending) {
            let Some(pkt) = self.held.pop_front() else { break };
            self.process(pkt);
        }
    }

    fn process(&mut self, pkt: QuorumPacket) {
        if pkt.packet_type == crate::wire::packet::ZKRS_UNPROPOSED {
            // Only a leader that is leaving sends it, after its last COMMIT: the forwarded
            // requests not committed by now never will be, by this leader.
            if matches!(self.phase, Phase::AwaitUpToDate | Phase::Broadcast) {
                let moved =
                    MovedSessions::decode(pkt.data.as_deref().unwrap_or_default()).unwrap_or_else(|e| {
                        tracing::warn!(
                            "the leader's handover word did not decode ({e}): nothing is forwarded again"
                        );
                        MovedSessions::Unlisted
                    });
                self.actions.push_back(LearnerAction::Unproposed { through: pkt.zxid, moved });
            }
            return self.disconnect(format!("the leader handed over (committed through {:#x})", pkt.zxid));
        }
        let kind = match pkt.kind() {
            Ok(k) => k,
            Err(e) => return self.disconnect(e.to_string()),
        };
        if self.phase == Phase::AwaitSyncMode
            && matches!(kind, PacketType::Diff | PacketType::Trunc | PacketType::Snap)
        {
            // One line per sync, as the leader logs its side: with a leader of another
            // implementation (Apache's logs nothing by default), this is where the mode shows.
            tracing::info!(
                sid = self.cfg.my_sid,
                leader = self.leader_sid,
                zxid = format_args!("{:#x}", pkt.zxid),
                "synced by the leader with {kind:?}"
            );
        }
        match (self.phase, kind) {
            (Phase::AwaitLeaderInfo, PacketType::LeaderInfo) => self.on_leader_info(&pkt),
            (Phase::AwaitSyncMode, PacketType::Diff) => self.phase = Phase::Syncing,
            (Phase::AwaitSyncMode, PacketType::Trunc) => {
                if pkt.zxid > self.last_logged || pkt.zxid < 0 {
                    return self.disconnect(format!("TRUNC to {:#x} beyond our log", pkt.zxid));
                }
                self.phase = Phase::Syncing;
                self.blocked = Some(Blocked::Truncate(pkt.zxid));
                self.actions.push_back(LearnerAction::Truncate { after_zxid: pkt.zxid });
            }
            (Phase::AwaitSyncMode, PacketType::Snap) => {
                if pkt.zxid < 0 {
                    return self.disconnect(format!("SNAP of zxid {:#x}", pkt.zxid));
                }
                self.phase = Phase::Syncing;
                self.blocked = Some(Blocked::Snapshot(pkt.zxid));
                self.actions.push_back(LearnerAction::ReceiveSnapshot { zxid: pkt.zxid });
            }
            (Phase::Syncing, PacketType::Proposal) => self.on_proposal(pkt, true),
            (Phase::Syncing, PacketType::Commit) => {
                self.to_ack.retain(|z| *z != pkt.zxid);
                self.on_commit(pkt.zxid)
            }
            (Phase::Syncing, PacketType::CommitAndActivate) => {
                self.to_ack.retain(|z| *z != pkt.zxid);
                self.on_commit_and_activate(&pkt)
            }
            (Phase::Syncing, PacketType::NewLeader) => self.on_new_leader(&pkt),
            (Phase::Syncing | Phase::NewLeaderPending, PacketType::Ping) => {
                // Not answered before the NEWLEADER ACK: that ACK must be our next packet.
            }
            (Phase::NewLeaderPending, _) => {
                // Live traffic waits for our NEWLEADER ACK: a proposal of the new epoch must not
                // reach the log before `currentEpoch` does (a restart would find a log newer than its
                // epoch), and its ACK must follow the NEWLEADER ACK (ZK-4685).
                if self.held.len() >= MAX_LEARNER_QUEUE {
                    return self.disconnect("too many packets before the NEWLEADER ACK".into());
                }
                self.held.push_back(pkt);
            }
            (Phase::AwaitUpToDate | Phase::Broadcast, k) => self.on_live(k, pkt),
            (phase, kind) => self.disconnect(format!("unexpected {kind:?} in phase {phase:?}")),
        }
    }

    fn on_leader_info(&mut self, pkt: &QuorumPacket) {
        if let Err(e) = LeaderInfo::decode(pkt.data.as_deref().unwrap_or(&[])) {
            return self.disconnect(e.to_string());
        }
        let epoch = epoch_of(pkt.zxid);
        if pkt.zxid < 0 || counter_of(pkt.zxid) != 0 || epoch == 0 {
            return self.disconnect(format!("LEADERINFO with zxid {:#x}", pkt.zxid));
        }
        self.new_epoch = epoch;
        match epoch.cmp(&self.local.accepted_epoch) {
            std::cmp::Ordering::Greater => {
                self.phase = Phase::PersistingAccepted;
                self.actions.push_back(LearnerAction::PersistAcceptedEpoch(epoch));
            }
            std::cmp::Ordering::Equal => self.send_ack_epoch(-1),
            std::cmp::Ordering::Less => self.disconnect(format!(
                "leader epoch {epoch} is below our accepted epoch {}",
                self.local.accepted_epoch
            )),
        }
    }

    fn on_proposal(&mut self, pkt: QuorumPacket, syncing: bool) {
        if self.observer && !syncing {
            return self.disconnect("PROPOSAL sent to an observer".into());
        }
        if pkt.zxid <= self.last_logged {
            return self.disconnect(format!("PROPOSAL {:#x} not after {:#x}", pkt.zxid, self.last_logged));
        }
        if !syncing && epoch_of(pkt.zxid) != self.new_epoch {
            return self.disconnect(format!("PROPOSAL {:#x} outside epoch {}", pkt.zxid, self.new_epoch));
        }
        if self.pending.len() >= MAX_LEARNER_QUEUE {
            return self.disconnect("too many uncommitted proposals".into());
        }
        let payload = pkt.data.unwrap_or_default();
        self.last_logged = pkt.zxid;
        self.pending.push_back((pkt.zxid, payload.clone()));
        if !self.observer {
            self.to_ack.push_back(pkt.zxid);
        }
        self.actions.push_back(LearnerAction::Log { zxid: pkt.zxid, payload });
        self.flush_acks();
    }

    fn on_commit(&mut self, zxid: i64) {
        match self.pending.front() {
            Some((z, _)) if *z == zxid => {
                if let Some((zxid, payload)) = self.pending.pop_front() {
                    self.actions.push_back(LearnerAction::Commit { zxid, payload });
                }
            }
            next => {
                let next = next.map(|(z, _)| *z);
                self.disconnect(format!("COMMIT {zxid:#x} but the next pending proposal is {next:?}"))
            }
        }
    }

    /// COMMITANDACTIVATE: the commit of a reconfiguration (its data the designated leader).
    fn on_commit_and_activate(&mut self, pkt: &QuorumPacket) {
        let Some(designated) = designated_leader(pkt.data.as_deref().unwrap_or(&[])) else {
            return self.disconnect(format!("COMMITANDACTIVATE {:#x} without a leader id", pkt.zxid));
        };
        let config = match self.pending.front() {
            Some((z, payload)) if *z == pkt.zxid => super::reconfig_data(payload),
            _ => None,
        };
        self.on_commit(pkt.zxid);
        match config {
            Some(_) if !self.cfg.reconfig_enabled => {}
            Some(config) => self.actions.push_back(LearnerAction::Activate {
                zxid: pkt.zxid,
                config,
                designated: Some(designated),
            }),
            None if self.phase != Phase::Stopped => self.disconnect(format!(
                "COMMITANDACTIVATE {:#x} of a proposal that is no reconfiguration",
                pkt.zxid
            )),
            None => {}
        }
    }

    fn on_new_leader(&mut self, pkt: &QuorumPacket) {
        if epoch_of(pkt.zxid) != self.new_epoch || counter_of(pkt.zxid) != 0 {
            return self
                .disconnect(format!("NEWLEADER {:#x} for another epoch than {}", pkt.zxid, self.new_epoch));
        }
        // Apache sends its config string (a single byte or nothing means none).
        // With reconfiguration off the configuration is the server's own, as Apache's members
        // keep theirs.
        self.new_leader_config =
            pkt.data.clone().filter(|d| d.len() > 1 && self.cfg.reconfig_enabled).map(|d| (pkt.zxid, d));
        self.phase = Phase::NewLeaderPending;
        self.new_leader_needs = self.last_logged;
        self.maybe_ack_new_leader();
    }

    /// NEWLEADER came: once every synced record is durable, write `currentEpoch` (the ACK follows).
    fn maybe_ack_new_leader(&mut self) {
        if self.phase == Phase::NewLeaderPending
            && !self.persisting_current
            && self.blocked.is_none()
            && self.durable_through >= self.new_leader_needs
        {
            self.persisting_current = true;
            self.actions.push_back(LearnerAction::PersistCurrentEpoch(self.new_epoch));
        }
    }

    /// ACKs for durable proposals, in order, never before the NEWLEADER ACK.
    fn flush_acks(&mut self) {
        if !self.new_leader_acked || self.observer {
            return;
        }
        while let Some(z) = self.to_ack.front().copied() {
            if z > self.durable_through {
                break;
            }
            self.to_ack.pop_front();
            self.send(QuorumPacket::new(PacketType::Ack, z, None));
        }
    }

    /// Packets after NEWLEADER: live proposals, commits, pings, answers.
    fn on_live(&mut self, kind: PacketType, pkt: QuorumPacket) {
        let up = self.phase == Phase::Broadcast;
        match kind {
            PacketType::Proposal => self.on_proposal(pkt, false),
            PacketType::Commit if !self.observer => self.on_commit(pkt.zxid),
            PacketType::CommitAndActivate if !self.observer => self.on_commit_and_activate(&pkt),
            PacketType::Inform | PacketType::InformAndActivate if self.observer => {
                let zxid = pkt.zxid;
                if zxid <= self.last_logged || epoch_of(zxid) != self.new_epoch {
                    return self.disconnect(format!("{kind:?} {zxid:#x} out of order"));
                }
                let mut payload = pkt.data.unwrap_or_default();
                let mut designated = None;
                if kind == PacketType::InformAndActivate {
                    let Some(d) = designated_leader(&payload) else {
                        return self.disconnect(format!("INFORMANDACTIVATE {zxid:#x} without a leader id"));
                    };
                    designated = Some(d);
                    payload = payload.slice(8..);
                }
                let config = designated.and_then(|_| super::reconfig_data(&payload));
                if designated.is_some() && config.is_none() {
                    return self.disconnect(format!("INFORMANDACTIVATE {zxid:#x} of no reconfiguration"));
                }
                self.last_logged = zxid;
                self.actions.push_back(LearnerAction::Log { zxid, payload: payload.clone() });
                self.actions.push_back(LearnerAction::Commit { zxid, payload });
                if let Some(config) = config.filter(|_| self.cfg.reconfig_enabled) {
                    self.actions.push_back(LearnerAction::Activate { zxid, config, designated });
                }
            }
            PacketType::UpToDate if self.phase == Phase::AwaitUpToDate => {
                self.phase = Phase::Broadcast;
                if let Some((zxid, config)) = self.new_leader_config.take() {
                    self.actions.push_back(LearnerAction::Activate { zxid, config, designated: None });
                }
                self.actions.push_back(LearnerAction::UpToDate);
                // Apache's learner acknowledges UPTODATE with the epoch's zero zxid; the leader
                // ignores it, but a peer may expect it.
                self.send(QuorumPacket::new(PacketType::Ack, make_zxid(self.new_epoch, 0), None));
                while let Some(p) = self.queued_out.pop_front() {
                    self.send(p);
                }
            }
            PacketType::Ping if self.new_leader_acked => {
                let touches: Vec<SessionTouch> = std::mem::take(&mut self.touches)
                    .into_iter()
                    .map(|(session_id, timeout_ms)| SessionTouch { session_id, timeout_ms })
                    .collect();
                let data = SessionTouch::encode_list(&touches);
                self.send(QuorumPacket::new(PacketType::Ping, pkt.zxid, Some(data)));
            }
            PacketType::Ping => {}
            PacketType::Sync if up => self.actions.push_back(LearnerAction::SyncDone),
            PacketType::Revalidate if up => match RevalidateReply::decode(pkt.data.as_deref().unwrap_or(&[]))
            {
                Ok(r) => self
                    .actions
                    .push_back(LearnerAction::Revalidated { session: r.session_id, valid: r.valid }),
                Err(e) => self.disconnect(e.to_string()),
            },
            other => self.disconnect(format!("unexpected {other:?} in phase {:?}", self.phase)),
        }
    }
}

/// The leader id at the start of a COMMITANDACTIVATE's or INFORMANDACTIVATE's data.
fn designated_leader(data: &[u8]) -> Option<i64> {
    data.get(..8).and_then(|b| b.try_into().ok()).map(i64::from_be_bytes)
}
