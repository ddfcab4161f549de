//! The leader's side of Zab: discovery, synchronisation of each learner, and broadcast.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use zk_proto::Id;

use super::{counter_of, epoch_of, make_zxid, ConnId, LocalState, ZabConfig, MAX_EPOCH};
use crate::quorum::QuorumVerifier;
use crate::wire::packet::{ZKRS_REQUEST_LEADERSHIP, ZKRS_UNPROPOSED};
use crate::wire::payload::{MovedSessions, LEARNER_PROTOCOL_VERSION};
use crate::wire::{
    AckEpoch, ForwardedRequest, LeaderInfo, LearnerInfo, PacketType, QuorumPacket, RevalidateReply,
    RevalidateRequest, SessionTouch,
};

/// The most bytes of committed proposals the leader holds past `committed_log_max` for learners
/// being synced (a log read, a snapshot, or a stream under way); past it a learner whose log read
/// ends is sent a snapshot instead, and one whose snapshot or stream needs what was dropped is
/// closed (it syncs again).
pub const SYNC_WINDOW_BYTES_MAX: usize = 64 << 20;

/// The sid of a connection whose FOLLOWERINFO or OBSERVERINFO has not arrived.
const UNKNOWN_SID: i64 = i64::MIN;

/// A learner's sid once it said one.
fn known(sid: i64) -> Option<i64> {
    (sid != UNKNOWN_SID).then_some(sid)
}

/// What the server must do for the leader, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderAction {
    /// Write `packet` on connection `conn`.
    Send {
        /// The connection.
        conn: ConnId,
        /// The packet.
        packet: QuorumPacket,
    },
    /// Write `bytes` as they are on `conn`: the snapshot stream that follows a SNAP packet.
    SendRaw {
        /// The connection.
        conn: ConnId,
        /// A piece of the snapshot stream.
        bytes: Bytes,
    },
    /// Close `conn`; the machine has forgotten it already.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why, for the log.
        reason: String,
    },
    /// Write the `acceptedEpoch` file durably, then call [`Leader::epoch_persisted`].
    PersistAcceptedEpoch(u32),
    /// Write the `currentEpoch` file durably, then call [`Leader::epoch_persisted`].
    PersistCurrentEpoch(u32),
    /// Read the log and answer with [`Leader::log_read`]: the last record at or before `from_zxid`
    /// (the anchor, which tells whether the learner's last zxid is in our history), then every
    /// record after it through `through_zxid`, in order. [`Leader::log_read_failed`] when the log
    /// no longer reaches back to `from_zxid`; [`Leader::log_read_too_big`] as soon as the records
    /// after the anchor pass `max_bytes` of PROPOSAL data (stop reading there: the learner gets a
    /// snapshot, as Apache's leader does past `zookeeper.snapshotSizeFactor` of the snapshot).
    /// The records are sent in pieces, each once the learner's connection has room
    /// ([`Leader::conn_drained`]).
    ReadLog {
        /// Request id, echoed in the answer.
        req: u64,
        /// The learner's last zxid.
        from_zxid: i64,
        /// The last committed zxid to include.
        through_zxid: i64,
        /// The most PROPOSAL data bytes after the anchor worth a DIFF; None: no bound.
        max_bytes: Option<u64>,
    },
    /// Serialise the database exactly as of `zxid` (everything committed through it applied,
    /// nothing later) in Apache's snapshot stream format and pass it through
    /// [`Leader::snapshot_bytes`].
    SerializeSnapshot {
        /// Request id, echoed in the answer.
        req: u64,
        /// The state the stream must hold (the SNAP packet's zxid).
        zxid: i64,
    },
    /// A quorum acknowledged NEWLEADER: serve writes with zxids of this epoch (counter from 1).
    Established {
        /// The new epoch.
        epoch: u32,
    },
    /// A follower logged the proposal `zxid` durably: the server's ACK ledger
    /// ([`crate::quorum::AckLedger`]) counts it and commits on a quorum, in zxid order, then calls
    /// [`Leader::committed`]. The machine never commits by itself. The leader's own log is not
    /// reported here: the server counts its own durability in its ledger directly, once.
    Ack {
        /// Who acknowledged.
        sid: i64,
        /// The proposal.
        zxid: i64,
    },
    /// A learner's REQUEST for the server to prepare (writes, sync, createSession, closeSession).
    Forwarded {
        /// The learner's sid.
        sid: i64,
        /// Its connection (where a SYNC answer goes, via [`Leader::sync_ready`]).
        conn: ConnId,
        /// The request.
        request: ForwardedRequest,
        /// The client's identities, from the packet's authinfo.
        authinfo: Vec<Id>,
    },
    /// Sessions a learner saw activity on since its previous PING reply.
    Touch {
        /// Session ids and timeouts.
        sessions: Vec<SessionTouch>,
    },
    /// A learner asks whether a session may live on; answer with [`Leader::revalidate_reply`].
    Revalidate {
        /// The connection to answer on.
        conn: ConnId,
        /// Session id.
        session: i64,
        /// Timeout the client asked for, in milliseconds.
        timeout: i32,
    },
    /// Follower `sid` may hold durably from this leader's epoch nothing past `to` any more: its
    /// sync starts, which every connection of a follower to an established leader goes through
    /// (DIFF: its last zxid; TRUNC: the cut; SNAP: the snapshot's zxid); it comes before the
    /// sync's first packet. The server clamps that voter's ACK to `to` ([`crate::quorum::AckLedger::reset`]), so that no
    /// proposal commits counting a follower that truncated it (review F3); the follower ACKs the
    /// proposals re-sent at its sync again once they are durable. Followers only.
    AckReset {
        /// The follower.
        sid: i64,
        /// The most it can still hold durably.
        to: i64,
    },
    /// The follower `sid` logged durably the proposal made to it alone by
    /// [`Leader::propose_handover`]: it now holds the highest zxid of the ensemble, and this
    /// leader may leave its role for it. Never counted towards a commit.
    HandoverAcked {
        /// The successor.
        sid: i64,
        /// The handover proposal's zxid.
        zxid: i64,
    },
    /// The synced voting follower `sid` asks to take this leadership over (zkrs's `rqld`,
    /// [`crate::wire::packet::ZKRS_REQUEST_LEADERSHIP`]); the server decides whether to hand
    /// over.
    LeadershipRequested {
        /// The follower asking.
        sid: i64,
    },
    /// Stop leading and go back to LOOKING: the followers heard from within syncLimit no longer
    /// make a quorum with us, or discovery/sync did not finish within initLimit. The machine is
    /// inert afterwards.
    StepDown {
        /// Why, for the log.
        reason: String,
    },
}

/// Where the leader itself is.
/// How many learners a leader has, for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LearnerCounts {
    /// Connections from learners, in any phase.
    pub learners: usize,
    /// Followers synced and taking proposals.
    pub synced_followers: usize,
    /// Observers synced and taking INFORMs.
    pub synced_observers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Collecting FOLLOWERINFOs until a quorum (us included) fixes the new epoch.
    Discovery,
    /// The new epoch is fixed; `acceptedEpoch` is being written.
    PersistingAccepted,
    /// LEADERINFO sent; collecting ACKEPOCHs.
    AwaitAckEpochs,
    /// A quorum acknowledged the epoch; `currentEpoch` is being written.
    PersistingCurrent,
    /// Learners are being synced; collecting NEWLEADER acknowledgements.
    AwaitNewLeaderAcks,
    /// Serving.
    Established,
    /// Stepped down; every input is ignored.
    Stopped,
}

/// Where one learner connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LearnerPhase {
    /// Connected; FOLLOWERINFO/OBSERVERINFO expected.
    AwaitInfo,
    /// Its info is in; waiting for the epoch to be fixed and persisted.
    AwaitEpoch,
    /// LEADERINFO sent; ACKEPOCH expected.
    AwaitAckEpoch,
    /// ACKEPOCH in; waiting for the epoch quorum and our `currentEpoch`.
    AwaitSyncStart,
    /// Waiting for the server's [`Leader::log_read`].
    ReadingLog { req: u64, through: i64 },
    /// Its sync head is sent; the records after `sent_through` go out a piece at a time, each once
    /// its connection has room ([`Leader::conn_drained`]); NEWLEADER once it caught up.
    Streaming { sent_through: i64 },
    /// Streaming a snapshot of state `zxid`.
    Snapshotting { req: u64, zxid: i64 },
    /// Sync stream and NEWLEADER queued; its ACK expected.
    AwaitNewLeaderAck,
    /// NEWLEADER acknowledged; UPTODATE follows once we are established.
    AwaitUpToDate,
    /// UPTODATE sent: broadcast.
    Active,
}

#[derive(Debug, Clone)]
struct LearnerConn {
    sid: i64,
    observer: bool,
    phase: LearnerPhase,
    /// The learner's last zxid (from ACKEPOCH).
    peer_zxid: i64,
    /// When we last received anything.
    last_heard_ms: u64,
    /// While we wait on the learner before it is active (its answer, or while it syncs, its
    /// connection taking what it was sent: a learner that takes nothing for initLimit is
    /// dropped, as Apache's initLimit bounds a sync): when we give up.
    deadline_ms: Option<u64>,
    /// A follower's oldest proposal not acknowledged yet, and since when we wait: more than
    /// syncLimit and it is dropped (Apache's `SyncLimitCheck`).
    ack_due: Option<(i64, u64)>,
    /// When its sync stream was queued (it gets the outstanding proposals then).
    attached_ms: u64,
    /// Records of a DIFF read from the log, not sent yet (ascending; the window follows them).
    backlog: VecDeque<(i64, Bytes)>,
    /// Sync bytes handed to the connection since it last had room: a piece at most.
    unacked_bytes: u64,
    /// ... and sync packets, since then (a piece is bounded by both: small records reach its
    /// packet count long before its bytes).
    unacked_packets: usize,
    /// The learner asked for a SNAP (zkrs's FOLLOWERINFO extension).
    wants_snap: bool,
    /// The learner takes [`crate::wire::packet::ZKRS_UNPROPOSED`] (zkrs's FOLLOWERINFO extension).
    takes_unproposed: bool,
    /// The last committed record its sync carried (what its NEWLEADER ACK vouches for).
    synced_through: i64,
    /// The highest zxid it holds durably as far as this leader knows: its sync once it
    /// acknowledged NEWLEADER, then every proposal ACK (a handover's successor must hold all).
    acked_through: i64,
}

impl LearnerConn {
    /// Receives live proposals, commits and informs: its sync stream is queued.
    fn attached(&self) -> bool {
        matches!(
            self.phase,
            LearnerPhase::AwaitNewLeaderAck | LearnerPhase::AwaitUpToDate | LearnerPhase::Active
        )
    }

    /// Acknowledged NEWLEADER: a follower counts for the leader's quorum from then on.
    fn synced(&self) -> bool {
        matches!(self.phase, LearnerPhase::AwaitUpToDate | LearnerPhase::Active)
    }
}

/// How a learner is brought up to date.
enum SyncPlan {
    /// DIFF: the learner's history is a prefix of ours; send what follows.
    Diff,
    /// TRUNC(zxid): the learner has records we do not; cut them, then send what follows zxid.
    Trunc(i64),
    /// SNAP: the learner's history cannot be reconciled record by record.
    Snap,
}

/// The leader's Zab state machine (discovery, sync, broadcast), one per leadership.
///
/// Persist before send: LEADERINFO goes out only after `acceptedEpoch` is durable
/// ([`LeaderAction::PersistAcceptedEpoch`], then [`Leader::epoch_persisted`]), and syncing starts
/// only after `currentEpoch` is. The leader's own log is assumed durable at start (it was read from
/// disk); its new proposals count for it once its log makes them durable, which the server records
/// in its ACK ledger itself (the machine has no use for it).
///
/// Per learner the order on the wire is: LEADERINFO; DIFF, TRUNC or SNAP (+ snapshot stream); the
/// PROPOSAL+COMMIT pairs it misses; the proposals still outstanding (followers only); NEWLEADER last
/// (ZK-3104); then live traffic; UPTODATE once a quorum acknowledged NEWLEADER.
#[derive(Debug)]
pub struct Leader {
    cfg: ZabConfig,
    local: LocalState,
    phase: Phase,
    /// The new epoch, once fixed.
    epoch: Option<u32>,
    /// Highest acceptedEpoch seen so far (ours included), while the epoch is open.
    max_accepted: u32,
    /// Voters that sent FOLLOWERINFO (and us).
    epoch_set: BTreeSet<i64>,
    /// Voters whose ACKEPOCH counted (and us).
    ack_epoch_set: BTreeSet<i64>,
    /// Voters that acknowledged NEWLEADER (and us).
    new_leader_set: BTreeSet<i64>,
    /// When the current discovery/sync wait gives up.
    phase_deadline_ms: Option<u64>,
    learners: BTreeMap<ConnId, LearnerConn>,
    /// The latest committed proposals, ascending: at most `committed_log_max`, or more while a
    /// learner's log read, snapshot or stream still needs them (up to [`SYNC_WINDOW_BYTES_MAX`]).
    /// Always every committed record after `window_floor`, with no gap.
    window: VecDeque<(i64, Bytes)>,
    /// Payload bytes in `window`.
    window_bytes: usize,
    /// Every committed record after this zxid is in `window`: the last record dropped from its
    /// front; at the start, one below the window's first record (a zxid that may name no
    /// record), or the last logged zxid when the window starts empty.
    window_floor: i64,
    /// Proposals made and not yet committed, ascending, with when they were made.
    outstanding: VecDeque<(i64, Bytes, u64)>,
    last_committed: i64,
    last_proposed: i64,
    next_req: u64,
    next_ping_ms: Option<u64>,
    /// The size of the database as the server last said ([`Leader::set_database_bytes`]).
    database_bytes: u64,
    /// A handover's proposal to its successor alone ([`Leader::propose_handover`]): its zxid
    /// and the successor.
    handover: Option<(i64, i64)>,
    actions: VecDeque<LeaderAction>,
}

impl Leader {
    /// A leader freshly out of the election. `recent` is the tail of its log (ascending, ending at
    /// `local.last_logged_zxid`), the DIFF window; everything in the log becomes the new epoch's
    /// initial history. With a single voter the epoch is fixed at once.
    pub fn new(cfg: ZabConfig, local: LocalState, recent: Vec<(i64, Bytes)>, now_ms: u64) -> Leader {
        let mut window: VecDeque<(i64, Bytes)> = recent.into();
        let ascending = window.iter().zip(window.iter().skip(1)).all(|(a, b)| a.0 < b.0);
        let ends_right = window.back().is_none_or(|last| last.0 == local.last_logged_zxid);
        if !ascending || !ends_right {
            tracing::warn!(
                sid = cfg.my_sid,
                last_logged = local.last_logged_zxid,
                "recent log tail is not ascending or does not end at the last logged zxid; syncing from the log instead"
            );
            window.clear();
        }
        while window.len() > cfg.committed_log_max {
            window.pop_front();
        }
        // The record before the window's first is not known here, and one zxid below that first
        // record names no other: every committed record after it is in the window.
        let window_floor = window.front().map_or(local.last_logged_zxid, |(f, _)| f.saturating_sub(1));
        let window_bytes = window.iter().map(|(_, p)| p.len()).sum();
        let mut epoch_set = BTreeSet::new();
        epoch_set.insert(cfg.my_sid);
        let mut leader = Leader {
            max_accepted: local.accepted_epoch,
            local,
            phase: Phase::Discovery,
            epoch: None,
            epoch_set,
            ack_epoch_set: BTreeSet::new(),
            new_leader_set: BTreeSet::new(),
            phase_deadline_ms: Some(now_ms.saturating_add(cfg.init_ms())),
            learners: BTreeMap::new(),
            window,
            window_bytes,
            window_floor,
            outstanding: VecDeque::new(),
            last_committed: local.last_logged_zxid,
            last_proposed: local.last_logged_zxid,
            next_req: 1,
            next_ping_ms: None,
            database_bytes: 0,
            handover: None,
            actions: VecDeque::new(),
            cfg,
        };
        tracing::info!(sid = leader.cfg.my_sid, "leading: discovery");
        leader.maybe_fix_epoch();
        leader
    }

    /// The new epoch, once fixed.
    pub fn epoch(&self) -> Option<u32> {
        self.epoch
    }

    /// Whether a quorum acknowledged NEWLEADER (and the machine has not stepped down).
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established
    }

    /// Whether the machine stepped down.
    pub fn is_stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// The last zxid proposed (or logged before the epoch began).
    pub fn last_proposed(&self) -> i64 {
        self.last_proposed
    }

    /// The last zxid committed (or logged before the epoch began).
    pub fn last_committed(&self) -> i64 {
        self.last_committed
    }

    /// Whether every proposal made is committed.
    pub fn all_committed(&self) -> bool {
        self.outstanding.is_empty()
    }

    /// The server id of the learner on `conn`, once its FOLLOWERINFO (or OBSERVERINFO) named it.
    pub fn learner_sid(&self, conn: ConnId) -> Option<i64> {
        self.learners.get(&conn).and_then(|l| known(l.sid))
    }

    /// The followers that could take over this leadership: connected, synced and taking
    /// proposals, voters of the configuration in force (and of a pending one, if any), each with
    /// the highest zxid it holds durably as far as this leader knows.
    pub fn handover_candidates(&self) -> Vec<(i64, i64)> {
        let mut v: Vec<(i64, i64)> = self
            .learners
            .values()
            .filter(|l| {
                !l.observer
                    && l.phase == LearnerPhase::Active
                    && self.cfg.verifier.is_voter(l.sid)
                    && self.cfg.pending_verifier.as_ref().is_none_or(|p| p.is_voter(l.sid))
            })
            .map(|l| (l.sid, l.acked_through))
            .collect();
        v.sort_unstable();
        v.dedup_by_key(|(sid, _)| *sid);
        v
    }

    /// A handover's last proposal: a harmless transaction (`payload`, whose header must carry
    /// the zxid returned) sent to the follower `sid` alone, so that it alone holds the highest
    /// zxid and the next election, by its ordinary rule, elects it. The zxid is the next of this
    /// epoch; it is never committed here, and the machine proposes nothing after it (the server
    /// leaves its role once [`LeaderAction::HandoverAcked`] comes, or gives up and leaves anyway).
    /// The zxid is past `after` too (the server's last zxid); the payload is made by `make(zxid)`. None (nothing sent) when not established, when `sid`
    /// is no candidate ([`Self::handover_candidates`]), when proposals are outstanding, when a
    /// handover proposal was made already, or when the epoch has no zxid left (Apache's leader
    /// never proposes counter 0xffffffff).
    pub fn propose_handover(&mut self, sid: i64, after: i64, make: impl FnOnce(i64) -> Bytes) -> Option<i64> {
        if self.phase != Phase::Established || self.handover.is_some() || !self.outstanding.is_empty() {
            return None;
        }
        if !self.handover_candidates().iter().any(|(s, _)| *s == sid) {
            return None;
        }
        let epoch = self.epoch?;
        let last = self.last_proposed.max(make_zxid(epoch, 0)).max(after);
        if epoch_of(last) != epoch {
            return None;
        }
        if counter_of(last) >= 0xffff_fffe {
            return None;
        }
        let zxid = last + 1;
        let conn = self
            .learners
            .iter()
            .find(|(_, l)| l.sid == sid && l.phase == LearnerPhase::Active && !l.observer)
            .map(|(c, _)| *c)?;
        self.last_proposed = zxid;
        self.handover = Some((zxid, sid));
        tracing::info!(
            sid = self.cfg.my_sid,
            to = sid,
            zxid = format_args!("{zxid:#x}"),
            "handover: proposing to the successor alone"
        );
        self.send(conn, QuorumPacket::new(PacketType::Proposal, zxid, Some(make(zxid))));
        Some(zxid)
    }

    /// A handover is done and this machine proposes nothing more: tells each learner taking part
    /// in broadcast that understands it ([`crate::wire::packet::ZKRS_UNPROPOSED`], after
    /// everything sent it so far) that the requests it forwarded and has not seen committed were
    /// never proposed. Only while a handover's proposal is out and every other proposal is
    /// committed (then nothing a learner forwarded is in flight: it was committed or never
    /// proposed); returns how many learners were told. `moved` names, for a learner's
    /// connection, the sessions that moved away from it ([`MovedSessions`]), sent with the word.
    pub fn tell_unproposed(&mut self, moved: impl Fn(ConnId) -> MovedSessions) -> usize {
        if self.handover.is_none() || !self.outstanding.is_empty() {
            return 0;
        }
        let through = self.last_committed;
        let to: Vec<ConnId> = self
            .learners
            .iter()
            .filter(|(_, l)| l.takes_unproposed && l.phase == LearnerPhase::Active && l.backlog.is_empty())
            .map(|(c, _)| *c)
            .collect();
        for &conn in &to {
            let data = Some(moved(conn).encode());
            let packet = QuorumPacket { packet_type: ZKRS_UNPROPOSED, zxid: through, data, authinfo: None };
            self.send(conn, packet);
        }
        to.len()
    }

    /// Learners connected, and of them the followers and the observers taking part in broadcast
    /// (what Apache's `mntr` reports as learners, synced_followers and synced_observers).
    pub fn learner_counts(&self) -> LearnerCounts {
        let active = |observer: bool| {
            self.learners
                .values()
                .filter(|l| l.observer == observer && l.phase == LearnerPhase::Active)
                .count()
        };
        LearnerCounts {
            learners: self.learners.len(),
            synced_followers: active(false),
            synced_observers: active(true),
        }
    }

    /// A learner connected to our quorum port. It has initLimit to introduce itself.
    pub fn learner_connected(&mut self, conn: ConnId, now_ms: u64) {
        if self.phase == Phase::Stopped {
            return;
        }
        if self.learners.contains_key(&conn) {
            self.reject(conn, "connection id reused".into());
            return;
        }
        self.learners.insert(
            conn,
            LearnerConn {
                sid: UNKNOWN_SID,
                observer: false,
                phase: LearnerPhase::AwaitInfo,
                peer_zxid: 0,
                last_heard_ms: now_ms,
                deadline_ms: Some(now_ms.saturating_add(self.cfg.init_ms())),
                ack_due: None,
                attached_ms: now_ms,
                backlog: VecDeque::new(),
                unacked_bytes: 0,
                unacked_packets: 0,
                wants_snap: false,
                takes_unproposed: false,
                synced_through: i64::MIN,
                acked_through: i64::MIN,
            },
        );
    }

    /// A learner's connection closed (or failed). Its pending log read or snapshot is forgotten.
    ///
    /// Before this leader is established, the learner's NEWLEADER ACK no longer counts once it
    /// has no connection left that gave one (zkrs; Apache keeps it): a leader is established
    /// only with a quorum that still follows it. Otherwise a leader whose own quorum's last ACK
    /// came late (a slow disk) counted one from a follower that had left meanwhile and led a
    /// later epoch with writes acknowledged, and began serving, as the leader of the older epoch,
    /// a history without them (node simulation, seed 700123 of `five`).
    pub fn learner_disconnected(&mut self, conn: ConnId, _now_ms: u64) {
        let Some(l) = self.learners.remove(&conn) else { return };
        tracing::debug!(sid = self.cfg.my_sid, learner = ?known(l.sid), conn, "learner disconnected");
        self.forget_new_leader_ack_of_gone(l.sid);
    }

    /// Before establishment, a learner's NEWLEADER ACK counts only while a connection that
    /// gave one is left (seed 700123 of node_sim's `five`): one that left may have gone on to
    /// a later epoch with writes this leader's history lacks. Called once one of `sid`'s
    /// connections is gone (closed by it, or replaced by a new one of its).
    fn forget_new_leader_ack_of_gone(&mut self, sid: i64) {
        if self.phase == Phase::AwaitNewLeaderAcks
            && sid != self.cfg.my_sid
            && !self.learners.values().any(|o| {
                o.sid == sid && matches!(o.phase, LearnerPhase::AwaitUpToDate | LearnerPhase::Active)
            })
        {
            self.new_leader_set.remove(&sid);
        }
    }

    /// A packet arrived on `conn`. Malformed or out-of-phase packets close the connection.
    pub fn handle_packet(&mut self, conn: ConnId, pkt: QuorumPacket, now_ms: u64) {
        if self.phase == Phase::Stopped {
            return;
        }
        let Some(l) = self.learners.get_mut(&conn) else {
            // Closed already (by us): whatever was in flight is moot.
            return;
        };
        l.last_heard_ms = now_ms;
        let phase = l.phase;
        if pkt.packet_type == ZKRS_REQUEST_LEADERSHIP {
            // zkrs's `rqld`: acted on from a synced voting follower, ignored from anyone else
            // (as Apache's leader ignores a type it does not know).
            let (sid, observer) = (l.sid, l.observer);
            if phase == LearnerPhase::Active && !observer {
                self.actions.push_back(LeaderAction::LeadershipRequested { sid });
            } else {
                tracing::debug!(
                    sid = self.cfg.my_sid,
                    conn,
                    "leadership request from a learner not synced; ignored"
                );
            }
            return;
        }
        let kind = match pkt.kind() {
            Ok(k) => k,
            Err(e) => return self.reject(conn, e.to_string()),
        };
        match (phase, kind) {
            (LearnerPhase::AwaitInfo, PacketType::FollowerInfo | PacketType::ObserverInfo) => {
                self.on_learner_info(conn, kind == PacketType::ObserverInfo, &pkt, now_ms)
            }
            (LearnerPhase::AwaitAckEpoch, PacketType::AckEpoch) => self.on_ack_epoch(conn, &pkt, now_ms),
            (LearnerPhase::AwaitNewLeaderAck, PacketType::Ack) => {
                self.on_new_leader_ack(conn, pkt.zxid, now_ms)
            }
            (LearnerPhase::AwaitUpToDate | LearnerPhase::Active, _) => {
                self.on_broadcast_packet(conn, kind, pkt)
            }
            (phase, kind) => self.reject(conn, format!("unexpected {kind:?} in phase {phase:?}")),
        }
    }

    /// The `acceptedEpoch` or `currentEpoch` write asked for is durable.
    pub fn epoch_persisted(&mut self, now_ms: u64) {
        match self.phase {
            Phase::PersistingAccepted => {
                let epoch = self.epoch.unwrap_or(0);
                self.local.accepted_epoch = epoch;
                self.phase = Phase::AwaitAckEpochs;
                self.phase_deadline_ms = Some(now_ms.saturating_add(self.cfg.init_ms()));
                self.ack_epoch_set.insert(self.cfg.my_sid);
                let waiting: Vec<ConnId> = self.conns_in(LearnerPhase::AwaitEpoch);
                for conn in waiting {
                    self.send_leader_info(conn, now_ms);
                }
                self.maybe_epoch_acked();
            }
            Phase::PersistingCurrent => {
                let epoch = self.epoch.unwrap_or(0);
                self.local.current_epoch = epoch;
                self.phase = Phase::AwaitNewLeaderAcks;
                self.phase_deadline_ms = Some(now_ms.saturating_add(self.cfg.init_ms()));
                self.new_leader_set.insert(self.cfg.my_sid);
                for conn in self.conns_in(LearnerPhase::AwaitSyncStart) {
                    self.start_sync(conn, now_ms);
                }
                self.maybe_established(now_ms);
            }
            _ => {
                tracing::warn!(sid = self.cfg.my_sid, phase = ?self.phase, "epoch_persisted with no epoch write pending")
            }
        }
    }

    /// Answers [`LeaderAction::ReadLog`]: the anchor record (the last at or before `from_zxid`),
    /// then every record after it through `through_zxid`.
    pub fn log_read(&mut self, req: u64, entries: Vec<(i64, Bytes)>, now_ms: u64) {
        let Some((conn, through)) = self.learners.iter().find_map(|(c, l)| match l.phase {
            LearnerPhase::ReadingLog { req: r, through } if r == req => Some((*c, through)),
            _ => None,
        }) else {
            return;
        };
        let peer = self.learners[&conn].peer_zxid;
        let ascending = entries.iter().zip(entries.iter().skip(1)).all(|(a, b)| a.0 < b.0);
        let anchor = match entries.first() {
            Some(first) if ascending && first.0 <= peer && entries.last().is_some_and(|l| l.0 == through) => {
                first.0
            }
            _ => {
                tracing::info!(
                    sid = self.cfg.my_sid,
                    conn,
                    peer,
                    "log does not cover the learner's history; SNAP"
                );
                return self.send_snap(conn, now_ms);
            }
        };
        let head = if anchor == peer {
            QuorumPacket::new(PacketType::Diff, self.last_committed, None)
        } else if epoch_of(anchor) == epoch_of(peer) {
            QuorumPacket::new(PacketType::Trunc, anchor, None)
        } else {
            return self.send_snap(conn, now_ms);
        };
        if !self.window_covers_after(through) {
            // More than the window was committed while the server read: start over from a snapshot.
            return self.send_snap(conn, now_ms);
        }
        let bytes: u64 = entries.iter().skip(1).map(|(_, p)| p.len() as u64).sum();
        if self.diff_max_bytes().is_some_and(|max| bytes > max) {
            return self.log_read_too_big(req, now_ms);
        }
        let mode =
            if head.packet_type == PacketType::Diff as i32 { PacketType::Diff } else { PacketType::Trunc };
        self.log_sync(conn, mode, head.zxid, entries.len().saturating_sub(1));
        self.reset_acks(conn, if mode == PacketType::Diff { peer } else { anchor });
        self.send(conn, head);
        if let Some(l) = self.learners.get_mut(&conn) {
            l.backlog = entries.into_iter().skip(1).collect();
        }
        self.finish_sync(conn, anchor, now_ms);
    }

    /// The records [`LeaderAction::ReadLog`] asked for pass its `max_bytes`: sync by snapshot.
    pub fn log_read_too_big(&mut self, req: u64, now_ms: u64) {
        let conn = self.learners.iter().find_map(|(c, l)| match l.phase {
            LearnerPhase::ReadingLog { req: r, .. } if r == req => Some(*c),
            _ => None,
        });
        if let Some(conn) = conn {
            tracing::info!(sid = self.cfg.my_sid, conn, "DIFF from the log too big; SNAP");
            self.send_snap(conn, now_ms);
        }
    }

    /// The log no longer holds what [`LeaderAction::ReadLog`] asked for: sync by snapshot.
    pub fn log_read_failed(&mut self, req: u64, now_ms: u64) {
        let conn = self.learners.iter().find_map(|(c, l)| match l.phase {
            LearnerPhase::ReadingLog { req: r, .. } if r == req => Some(*c),
            _ => None,
        });
        if let Some(conn) = conn {
            self.send_snap(conn, now_ms);
        }
    }

    /// A piece of the snapshot stream asked for by [`LeaderAction::SerializeSnapshot`]; `last` ends
    /// it, after which the learner gets what was committed since and NEWLEADER.
    pub fn snapshot_bytes(&mut self, req: u64, chunk: Bytes, last: bool, now_ms: u64) {
        let Some((conn, zxid)) = self.learners.iter().find_map(|(c, l)| match l.phase {
            LearnerPhase::Snapshotting { req: r, zxid } if r == req => Some((*c, zxid)),
            _ => None,
        }) else {
            return;
        };
        if !chunk.is_empty() {
            if let Some(l) = self.learners.get_mut(&conn) {
                l.unacked_bytes = l.unacked_bytes.saturating_add(chunk.len() as u64);
            }
            self.actions.push_back(LeaderAction::SendRaw { conn, bytes: chunk });
        }
        if last {
            self.finish_sync(conn, zxid, now_ms);
        }
    }

    /// Our own new proposal (only once established): logged by the server, sent to every attached
    /// follower. `zxid` must be of our epoch and above the last proposal.
    pub fn propose(&mut self, zxid: i64, payload: Bytes, now_ms: u64) {
        if self.phase != Phase::Established {
            tracing::warn!(sid = self.cfg.my_sid, zxid, "proposal while not established ignored");
            return;
        }
        if self.handover.is_some() {
            tracing::warn!(sid = self.cfg.my_sid, zxid, "proposal after a handover's ignored");
            return;
        }
        if Some(epoch_of(zxid)) != self.epoch || zxid <= self.last_proposed || counter_of(zxid) == 0 {
            tracing::warn!(
                sid = self.cfg.my_sid,
                zxid,
                last = self.last_proposed,
                "out-of-order proposal ignored"
            );
            return;
        }
        self.last_proposed = zxid;
        self.outstanding.push_back((zxid, payload.clone(), now_ms));
        let followers: Vec<ConnId> =
            self.learners.iter().filter(|(_, l)| l.attached() && !l.observer).map(|(c, _)| *c).collect();
        for conn in followers {
            if let Some(l) = self.learners.get_mut(&conn) {
                l.ack_due.get_or_insert((zxid, now_ms));
            }
            self.send(conn, QuorumPacket::new(PacketType::Proposal, zxid, Some(payload.clone())));
        }
    }

    /// The server committed every proposal through `zxid` (in order): COMMIT to attached followers,
    /// INFORM (with the payload) to attached observers.
    pub fn committed(&mut self, zxid: i64, now_ms: u64) {
        self.commit_through(zxid, None, now_ms);
    }

    /// The server committed every proposal through `zxid`, the last of them a reconfiguration
    /// whose new configuration is led by `designated`: as [`Self::committed`], but that one goes
    /// out as COMMITANDACTIVATE to followers and INFORMANDACTIVATE to observers, each carrying
    /// `designated` (a follower whose leader changes leaves for the designated one).
    pub fn committed_and_activate(&mut self, zxid: i64, designated: i64, now_ms: u64) {
        self.commit_through(zxid, Some(designated), now_ms);
    }

    fn commit_through(&mut self, zxid: i64, designated: Option<i64>, _now_ms: u64) {
        while let Some((z, _, _)) = self.outstanding.front() {
            if *z > zxid {
                break;
            }
            let Some((z, payload, _)) = self.outstanding.pop_front() else { break };
            self.last_committed = z;
            let targets: Vec<(ConnId, bool)> =
                self.learners.iter().filter(|(_, l)| l.attached()).map(|(c, l)| (*c, l.observer)).collect();
            let activate = designated.filter(|_| z == zxid);
            for (conn, observer) in targets {
                let packet = match (activate, observer) {
                    (None, true) => QuorumPacket::new(PacketType::Inform, z, Some(payload.clone())),
                    (None, false) => QuorumPacket::new(PacketType::Commit, z, None),
                    (Some(d), true) => {
                        let mut data = Vec::with_capacity(8 + payload.len());
                        data.extend_from_slice(&d.to_be_bytes());
                        data.extend_from_slice(&payload);
                        QuorumPacket::new(PacketType::InformAndActivate, z, Some(Bytes::from(data)))
                    }
                    (Some(d), false) => QuorumPacket::new(
                        PacketType::CommitAndActivate,
                        z,
                        Some(Bytes::copy_from_slice(&d.to_be_bytes())),
                    ),
                };
                self.send(conn, packet);
            }
            self.window_bytes += payload.len();
            self.window.push_back((z, payload));
            self.trim_window();
        }
    }

    /// Drops the oldest committed proposals beyond `committed_log_max`, except those a learner
    /// being synced from a log read, a snapshot or a stream will need (as Apache queues the
    /// proposals for a learner it streams a snapshot to), within [`SYNC_WINDOW_BYTES_MAX`]. A
    /// learner whose point the window already dropped past (the byte bound) holds nothing back:
    /// it will not be streamed from the window.
    fn trim_window(&mut self) {
        // Each syncing learner's point, ascending: it needs every record after it.
        let mut points: Vec<i64> = self
            .learners
            .values()
            .filter_map(|l| match l.phase {
                LearnerPhase::ReadingLog { through, .. } => Some(through),
                LearnerPhase::Snapshotting { zxid, .. } => Some(zxid),
                LearnerPhase::Streaming { sent_through } => {
                    Some(l.backlog.back().map_or(sent_through, |(z, _)| *z))
                }
                _ => None,
            })
            .collect();
        points.sort_unstable();
        while self.window.len() > self.cfg.committed_log_max {
            let Some(&(front, _)) = self.window.front() else { break };
            // The earliest point the window still covers.
            let needed_after = points.iter().find(|z| **z >= self.window_floor);
            if needed_after.is_some_and(|z| front > *z) && self.window_bytes <= SYNC_WINDOW_BYTES_MAX {
                break;
            }
            if let Some((z, p)) = self.window.pop_front() {
                self.window_bytes -= p.len();
                self.window_floor = z;
            }
        }
    }

    /// Records in the window of committed proposals (tests).
    #[cfg(test)]
    pub(super) fn window_len(&self) -> usize {
        self.window.len()
    }

    /// A configuration came into force: from now on its voters alone make the quorums (pings,
    /// and the config string of NEWLEADER for learners that connect later).
    pub fn set_configuration(&mut self, verifier: QuorumVerifier, config_string: Bytes) {
        self.cfg.verifier = verifier;
        self.cfg.pending_verifier = None;
        self.cfg.config_string = config_string;
    }

    /// Whether `set` holds a quorum of the configuration in force, ignoring a pending one: what
    /// the new epoch and its acknowledgement need, as in Apache (`getEpochToPropose`,
    /// `waitForEpochAck`). A pending configuration's quorum is asked of NEWLEADER, which carries
    /// it, and of commits; asking it of the epoch too left a leader whose pending configuration
    /// needs a learner ahead of it (refused at ACKEPOCH until the epoch is set) unable to set one.
    fn has_current_quorum(&self, set: &BTreeSet<i64>) -> bool {
        self.cfg.verifier.contains_quorum(set.iter().copied())
    }

    /// Whether `set` holds a quorum of the configuration, and of the pending one if there is.
    fn has_quorum(&self, set: &BTreeSet<i64>) -> bool {
        self.cfg.verifier.contains_quorum(set.iter().copied())
            && self.cfg.pending_verifier.as_ref().is_none_or(|p| p.contains_quorum(set.iter().copied()))
    }

    /// The configuration string NEWLEADER carries (its version stamped, see
    /// [`ZabConfig::reconfig_enabled`]).
    pub fn config_string(&self) -> &Bytes {
        &self.cfg.config_string
    }

    /// Followers synced with this leader (they acknowledged NEWLEADER) and connected: what a
    /// reconfiguration may count on.
    pub fn synced_followers(&self) -> BTreeSet<i64> {
        self.synced_follower_sids().collect()
    }

    /// Whether the followers synced with this leader are exactly `sids`: the check a driver
    /// makes after every step, without building the set.
    pub fn synced_followers_are(&self, sids: &BTreeSet<i64>) -> bool {
        let mut n = 0;
        self.synced_follower_sids().all(|sid| {
            n += 1;
            sids.contains(&sid)
        }) && n == sids.len()
    }

    fn synced_follower_sids(&self) -> impl Iterator<Item = i64> + '_ {
        self.learners.values().filter(|l| !l.observer && l.synced()).map(|l| l.sid)
    }

    /// The connection a snapshot stream asked for by [`LeaderAction::SerializeSnapshot`] goes
    /// to, while that learner still waits for it.
    pub fn snapshot_conn(&self, req: u64) -> Option<ConnId> {
        self.learners.iter().find_map(|(c, l)| match l.phase {
            LearnerPhase::Snapshotting { req: r, .. } if r == req => Some(*c),
            _ => None,
        })
    }

    /// Everything proposed before a sync forwarded on `conn` is committed: answer it with SYNC.
    pub fn sync_ready(&mut self, conn: ConnId, _now_ms: u64) {
        if self.learners.get(&conn).is_some_and(|l| l.attached()) {
            self.send(conn, QuorumPacket::new(PacketType::Sync, 0, None));
        }
    }

    /// The server's verdict on a [`LeaderAction::Revalidate`].
    pub fn revalidate_reply(&mut self, conn: ConnId, session: i64, valid: bool) {
        if self.learners.contains_key(&conn) {
            let data = RevalidateReply { session_id: session, valid }.encode();
            self.send(conn, QuorumPacket::new(PacketType::Revalidate, -1, Some(data)));
        }
    }

    /// Acts on every deadline passed: discovery/sync waits (initLimit), learners silent too long,
    /// pings every tickTime/2 and the quorum check that goes with them.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.phase == Phase::Stopped {
            return;
        }
        if let Some(deadline) = self.phase_deadline_ms {
            if now_ms >= deadline && self.phase != Phase::Established {
                let reason = format!("no quorum within initLimit in {:?}", self.phase);
                return self.step_down(reason);
            }
        }
        let sync_ms = self.cfg.sync_ms();
        let expired: Vec<(ConnId, String)> = self
            .learners
            .iter()
            .filter_map(|(c, l)| {
                if l.phase == LearnerPhase::Active {
                    if now_ms >= l.last_heard_ms.saturating_add(sync_ms) {
                        Some((*c, format!("learner {} silent for syncLimit", l.sid)))
                    } else {
                        l.ack_due.filter(|(_, t)| now_ms >= t.saturating_add(sync_ms)).map(|(z, _)| {
                            (*c, format!("learner {} has not ACKed {z:#x} within syncLimit", l.sid))
                        })
                    }
                } else {
                    l.deadline_ms.filter(|d| now_ms >= *d).map(|_| {
                        (*c, format!("learner {} made no progress within initLimit ({:?})", l.sid, l.phase))
                    })
                }
            })
            .collect();
        for (conn, reason) in expired {
            self.reject(conn, reason);
        }
        if self.phase == Phase::Established {
            if let Some(ping) = self.next_ping_ms {
                if now_ms >= ping {
                    self.next_ping_ms = Some(now_ms.saturating_add(self.ping_interval_ms()));
                    let mut alive = BTreeSet::from([self.cfg.my_sid]);
                    for l in self.learners.values() {
                        if l.synced() && !l.observer && now_ms < l.last_heard_ms.saturating_add(sync_ms) {
                            alive.insert(l.sid);
                        }
                    }
                    if !self.has_quorum(&alive) {
                        return self.step_down(format!("only {alive:?} heard within syncLimit: no quorum"));
                    }
                    let active: Vec<ConnId> = self.conns_in(LearnerPhase::Active);
                    for conn in active {
                        self.send(conn, QuorumPacket::new(PacketType::Ping, self.last_proposed, None));
                    }
                }
            }
        }
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.phase == Phase::Stopped {
            return None;
        }
        let sync_ms = self.cfg.sync_ms();
        let learner = self
            .learners
            .values()
            .filter_map(|l| {
                if l.phase == LearnerPhase::Active {
                    let silent = l.last_heard_ms.saturating_add(sync_ms);
                    Some(l.ack_due.map_or(silent, |(_, t)| silent.min(t.saturating_add(sync_ms))))
                } else {
                    l.deadline_ms
                }
            })
            .min();
        let phase = if self.phase == Phase::Established { None } else { self.phase_deadline_ms };
        [learner, phase, self.next_ping_ms].into_iter().flatten().min()
    }

    /// The next thing to do, in order.
    pub fn poll_action(&mut self) -> Option<LeaderAction> {
        self.actions.pop_front()
    }

    fn ping_interval_ms(&self) -> u64 {
        (self.cfg.tick_ms / 2).max(1)
    }

    fn conns_in(&self, phase: LearnerPhase) -> Vec<ConnId> {
        self.learners.iter().filter(|(_, l)| l.phase == phase).map(|(c, _)| *c).collect()
    }

    fn send(&mut self, conn: ConnId, packet: QuorumPacket) {
        self.actions.push_back(LeaderAction::Send { conn, packet });
    }

    fn send_pair(&mut self, conn: ConnId, zxid: i64, payload: Bytes) {
        self.send(conn, QuorumPacket::new(PacketType::Proposal, zxid, Some(payload)));
        self.send(conn, QuorumPacket::new(PacketType::Commit, zxid, None));
    }

    /// Closes a connection for bad or untimely input; the leader keeps leading. A NEWLEADER ACK
    /// the learner gave on it stops counting, as when a connection closes by itself (review of
    /// issue 29, helper-28: a learner that acknowledged NEWLEADER and then sent a packet the
    /// leader refuses kept its ACK).
    fn reject(&mut self, conn: ConnId, reason: String) {
        let sid = self.learners.remove(&conn).and_then(|l| known(l.sid));
        tracing::warn!(me = self.cfg.my_sid, conn, learner = ?sid, %reason, "closing learner connection");
        self.actions.push_back(LeaderAction::Close { conn, reason });
        if let Some(sid) = sid {
            self.forget_new_leader_ack_of_gone(sid);
        }
    }

    fn step_down(&mut self, reason: String) {
        tracing::warn!(sid = self.cfg.my_sid, %reason, "stepping down");
        self.phase = Phase::Stopped;
        self.learners.clear();
        self.actions.push_back(LeaderAction::StepDown { reason });
    }

    fn on_learner_info(&mut self, conn: ConnId, observer: bool, pkt: &QuorumPacket, now_ms: u64) {
        let info = match LearnerInfo::decode(pkt.data.as_deref().unwrap_or(&[])) {
            Ok(i) => i,
            Err(e) => return self.reject(conn, e.to_string()),
        };
        let sid = info.sid;
        if sid == self.cfg.my_sid {
            return self.reject(conn, format!("learner claims our own sid {sid}"));
        }
        if !observer && !self.cfg.verifier.is_voter(sid) && !self.cfg.reconfig_enabled {
            return self.reject(conn, format!("FOLLOWERINFO from {sid}, not a voter"));
        }
        // Apache serves a learner whatever id it claims (logging it as "not in the current
        // config") and, without quorum SASL, hands it the whole tree (CVE-2018-8012). zkrs syncs
        // only the servers its configuration lists, unless reconfiguration is on: then a server
        // about to be added joins first as a non-voting learner, as on Apache.
        if observer
            && !self.cfg.reconfig_enabled
            && !self.cfg.verifier.is_voter(sid)
            && !self.cfg.verifier.observers().contains(&sid)
        {
            return self.reject(conn, format!("OBSERVERINFO from {sid}, not in the configuration"));
        }
        if info.config_version.is_some_and(|v| v > self.cfg.verifier.version()) {
            return self.reject(conn, format!("learner {sid} has a newer config"));
        }
        // A reconnecting learner replaces its old connection (which may not have timed out yet).
        // Its NEWLEADER ACK goes with it (`reject`): the new connection has given none yet
        // (review of issue 29, helper-26, finding 6: the replaced one's ACK outlived it).
        let old: Vec<ConnId> =
            self.learners.iter().filter(|(c, l)| **c != conn && l.sid == sid).map(|(c, _)| *c).collect();
        for c in old {
            self.reject(c, format!("learner {sid} reconnected"));
        }
        let accepted = epoch_of(pkt.zxid);
        if let Some(epoch) = self.epoch.filter(|e| accepted > *e) {
            // It accepted a later epoch from a leader attempt that failed, and would refuse ours
            // forever (Apache loops here: the learner re-elects us and is refused again). zkrs steps
            // down instead, so that the next discovery includes its epoch; each retry raises the
            // epoch, so this ends.
            return self.step_down(format!("learner {sid} accepted epoch {accepted}, above ours {epoch}"));
        }
        if let Some(l) = self.learners.get_mut(&conn) {
            l.sid = sid;
            l.observer = observer;
            l.wants_snap = info.zkrs_flags.is_some_and(|f| f & crate::wire::payload::LEARNER_WANTS_SNAP != 0);
            l.takes_unproposed =
                info.zkrs_flags.is_some_and(|f| f & crate::wire::payload::LEARNER_TAKES_UNPROPOSED != 0);
            l.phase = LearnerPhase::AwaitEpoch;
            l.deadline_ms = None;
        }
        if self.phase == Phase::Discovery {
            // Observers do not count for the quorum, but their epoch still raises the new one, so
            // that they never see a LEADERINFO below what they accepted.
            self.max_accepted = self.max_accepted.max(accepted);
            if !observer {
                self.epoch_set.insert(sid);
            }
            self.maybe_fix_epoch();
        } else if !matches!(self.phase, Phase::PersistingAccepted) {
            self.send_leader_info(conn, now_ms);
        }
    }

    fn maybe_fix_epoch(&mut self) {
        if self.phase != Phase::Discovery || !self.has_current_quorum(&self.epoch_set) {
            return;
        }
        if self.max_accepted >= MAX_EPOCH {
            return self.step_down("epoch space exhausted".into());
        }
        let epoch = self.max_accepted + 1;
        tracing::info!(sid = self.cfg.my_sid, epoch, voters = ?self.epoch_set, "new epoch fixed");
        self.epoch = Some(epoch);
        if self.cfg.reconfig_enabled
            && self.cfg.verifier.version() == 0
            && self.cfg.pending_verifier.is_none()
        {
            // As Apache's leaders with reconfiguration on: a configuration never established
            // (version 0, as every zoo.cfg starts) gets the new epoch's first zxid as its
            // version, carried by NEWLEADER and activated once a quorum acknowledges it, so that
            // it outranks the partial configuration a joining server starts with.
            let text = String::from_utf8_lossy(&self.cfg.config_string).into_owned();
            if let Ok(mut c) = crate::config::QuorumConfig::parse(&text) {
                c.version = make_zxid(epoch, 0);
                self.cfg.verifier = QuorumVerifier::from_config(&c);
                self.cfg.config_string = Bytes::from(c.to_config_string());
            }
        }
        self.phase = Phase::PersistingAccepted;
        self.actions.push_back(LeaderAction::PersistAcceptedEpoch(epoch));
    }

    fn send_leader_info(&mut self, conn: ConnId, now_ms: u64) {
        let epoch = self.epoch.unwrap_or(0);
        let data = LeaderInfo { protocol_version: LEARNER_PROTOCOL_VERSION }.encode();
        self.send(conn, QuorumPacket::new(PacketType::LeaderInfo, make_zxid(epoch, 0), Some(data)));
        if let Some(l) = self.learners.get_mut(&conn) {
            l.phase = LearnerPhase::AwaitAckEpoch;
            l.deadline_ms = Some(now_ms.saturating_add(self.cfg.init_ms()));
        }
    }

    fn on_ack_epoch(&mut self, conn: ConnId, pkt: &QuorumPacket, now_ms: u64) {
        let ack = match AckEpoch::decode(pkt.data.as_deref().unwrap_or(&[])) {
            Ok(a) => a,
            Err(e) => return self.reject(conn, e.to_string()),
        };
        let peer_zxid = pkt.zxid;
        if peer_zxid < 0 {
            return self.reject(conn, format!("ACKEPOCH with negative zxid {peer_zxid:#x}"));
        }
        let (sid, observer) = {
            let l = &self.learners[&conn];
            (l.sid, l.observer)
        };
        // Only while the epoch is being acknowledged: once a quorum has, a learner ahead of us
        // holds nothing committed that we lack, and the sync cuts it back (TRUNC).
        if ack.current_epoch != -1 && self.phase == Phase::AwaitAckEpochs {
            let ours = (i64::from(self.local.current_epoch), self.local.last_logged_zxid);
            if (i64::from(ack.current_epoch), peer_zxid) > ours {
                return self.reject(
                    conn,
                    format!("learner {sid} is ahead of us: epoch {} zxid {peer_zxid:#x}", ack.current_epoch),
                );
            }
        }
        if let Some(l) = self.learners.get_mut(&conn) {
            l.peer_zxid = peer_zxid;
            l.phase = LearnerPhase::AwaitSyncStart;
            l.deadline_ms = None;
        }
        match self.phase {
            Phase::AwaitAckEpochs => {
                // A learner that had already accepted this epoch answers -1 and is not counted.
                if ack.current_epoch != -1 && !observer {
                    self.ack_epoch_set.insert(sid);
                }
                self.maybe_epoch_acked();
            }
            Phase::AwaitNewLeaderAcks | Phase::Established => self.start_sync(conn, now_ms),
            _ => {}
        }
    }

    fn maybe_epoch_acked(&mut self) {
        if self.phase == Phase::AwaitAckEpochs && self.has_current_quorum(&self.ack_epoch_set) {
            let epoch = self.epoch.unwrap_or(0);
            self.phase = Phase::PersistingCurrent;
            self.actions.push_back(LeaderAction::PersistCurrentEpoch(epoch));
        }
    }

    /// Window holds every committed record after `zxid`. A learner streamed through `zxid` needs
    /// no record at or before it, so the window may have dropped it (trimmed while the learner
    /// synced: under load, a snapshot's or piece's time commits more than `committed_log_max`).
    fn window_covers_after(&self, zxid: i64) -> bool {
        zxid >= self.last_committed || zxid >= self.window_floor
    }

    /// Chooses DIFF, TRUNC, a log read or SNAP for a learner whose ACKEPOCH said `peer_zxid`.
    fn start_sync(&mut self, conn: ConnId, now_ms: u64) {
        let peer = self.learners[&conn].peer_zxid;
        let last = self.last_committed;
        let plan = if self.learners[&conn].wants_snap {
            // A zkrs learner whose tree disagreed with the ensemble's digests: only a snapshot
            // of ours replaces it whole.
            SyncPlan::Snap
        } else if peer == last {
            SyncPlan::Diff
        } else if counter_of(peer) == 0 && peer != 0 {
            // An epoch-start zxid names no record: we cannot tell what precedes it on the learner.
            SyncPlan::Snap
        } else if peer > last {
            SyncPlan::Trunc(last)
        } else if self.window.front().is_some_and(|(f, _)| *f <= peer) {
            match self.window.binary_search_by_key(&peer, |(z, _)| *z) {
                Ok(_) => SyncPlan::Diff,
                Err(i) => {
                    // The learner has a zxid we never committed. Truncating to the record before it
                    // is safe only within one epoch: both histories came from that epoch's leader.
                    let prev = self.window[i - 1].0;
                    if epoch_of(prev) == epoch_of(peer) {
                        SyncPlan::Trunc(prev)
                    } else {
                        SyncPlan::Snap
                    }
                }
            }
        } else if peer != 0
            && self.cfg.snapshot_size_factor >= 0.0
            && self.local.first_logged_zxid.is_some_and(|f| f <= peer)
        {
            let req = self.take_req();
            let max_bytes = self.diff_max_bytes();
            self.actions.push_back(LeaderAction::ReadLog {
                req,
                from_zxid: peer,
                through_zxid: last,
                max_bytes,
            });
            if let Some(l) = self.learners.get_mut(&conn) {
                l.phase = LearnerPhase::ReadingLog { req, through: last };
            }
            return;
        } else {
            SyncPlan::Snap
        };
        let from = match plan {
            SyncPlan::Diff => {
                self.log_sync(conn, PacketType::Diff, last, 0);
                self.reset_acks(conn, peer);
                self.send(conn, QuorumPacket::new(PacketType::Diff, last, None));
                peer
            }
            SyncPlan::Trunc(z) => {
                self.log_sync(conn, PacketType::Trunc, z, 0);
                self.reset_acks(conn, z);
                self.send(conn, QuorumPacket::new(PacketType::Trunc, z, None));
                z
            }
            SyncPlan::Snap => return self.send_snap(conn, now_ms),
        };
        self.finish_sync(conn, from.min(last), now_ms);
    }

    /// Apache's bound on a DIFF from the log: `zookeeper.snapshotSizeFactor` (above 1: the default
    /// 0.33) times the size of the database; None when either is 0 (no bound, as Apache's size
    /// limit of 0). A negative factor turns DIFFs from the log off altogether (handled by the
    /// caller).
    fn diff_max_bytes(&self) -> Option<u64> {
        let factor = self.cfg.snapshot_size_factor;
        let factor = if factor > 1.0 { super::DEFAULT_SNAPSHOT_SIZE_FACTOR } else { factor };
        let max = (self.database_bytes as f64 * factor) as u64;
        (max > 0).then_some(max)
    }

    /// The size the server's database would have as a snapshot, in bytes (Apache takes its
    /// newest snapshot file's): DIFFs from the log are bounded by a share of it
    /// ([`ZabConfig::snapshot_size_factor`]). Until told, 0: no bound.
    pub fn set_database_bytes(&mut self, bytes: u64) {
        self.database_bytes = bytes;
    }

    /// The server's outbox for `conn` has room again: everything the machine handed it for that
    /// connection's sync before has left, or nearly (call it when the outbox drains below a
    /// piece). A learner being synced gets its next piece.
    pub fn conn_drained(&mut self, conn: ConnId, now_ms: u64) {
        let init_ms = self.cfg.init_ms();
        if let Some(l) = self.learners.get_mut(&conn) {
            l.unacked_bytes = 0;
            l.unacked_packets = 0;
            // The learner took what it was sent: its sync moves, so it has another initLimit.
            if matches!(l.phase, LearnerPhase::Snapshotting { .. } | LearnerPhase::Streaming { .. }) {
                l.deadline_ms = Some(now_ms.saturating_add(init_ms));
            }
        }
        self.pump(conn, now_ms);
    }

    /// Whether the connection may take more sync traffic now (the server steps a snapshot stream
    /// only then, and otherwise asks for [`Self::conn_drained`]): less than a piece, in bytes
    /// and in packets, handed to it since it last had room.
    pub fn may_send(&self, conn: ConnId) -> bool {
        self.learners.get(&conn).is_some_and(|l| {
            l.unacked_bytes < self.cfg.sync_piece_bytes && l.unacked_packets < self.cfg.sync_piece_packets
        })
    }

    /// One line per sync, naming the mode: operators (and the real-process tests) read it.
    fn log_sync(&self, conn: ConnId, mode: PacketType, zxid: i64, txns: usize) {
        let learner = self.learners.get(&conn).and_then(|l| known(l.sid));
        tracing::info!(
            sid = self.cfg.my_sid,
            conn,
            learner = ?learner,
            zxid = format_args!("{zxid:#x}"),
            txns,
            "syncing learner by {mode:?}"
        );
    }

    /// [`LeaderAction::AckReset`] for the follower on `conn` (observers never ACK). Only once
    /// established: before, nothing is proposed and no ACK is counted.
    fn reset_acks(&mut self, conn: ConnId, to: i64) {
        if self.phase != Phase::Established {
            return;
        }
        if let Some(l) = self.learners.get(&conn).filter(|l| !l.observer && known(l.sid).is_some()) {
            self.actions.push_back(LeaderAction::AckReset { sid: l.sid, to });
        }
    }

    fn take_req(&mut self) -> u64 {
        let r = self.next_req;
        self.next_req = self.next_req.wrapping_add(1);
        r
    }

    fn send_snap(&mut self, conn: ConnId, now_ms: u64) {
        let req = self.take_req();
        let zxid = self.last_committed;
        self.log_sync(conn, PacketType::Snap, zxid, 0);
        self.reset_acks(conn, zxid);
        self.send(conn, QuorumPacket::new(PacketType::Snap, zxid, None));
        self.actions.push_back(LeaderAction::SerializeSnapshot { req, zxid });
        let init_ms = self.cfg.init_ms();
        if let Some(l) = self.learners.get_mut(&conn) {
            l.phase = LearnerPhase::Snapshotting { req, zxid };
            l.deadline_ms = Some(now_ms.saturating_add(init_ms));
        }
    }

    /// After the DIFF/TRUNC/SNAP head (and the snapshot): the learner holds everything through
    /// `from`; the rest (the log read's records, then the window's) follows a piece at a time.
    fn finish_sync(&mut self, conn: ConnId, from: i64, now_ms: u64) {
        let init_ms = self.cfg.init_ms();
        if let Some(l) = self.learners.get_mut(&conn) {
            l.phase = LearnerPhase::Streaming { sent_through: from };
            l.deadline_ms = Some(now_ms.saturating_add(init_ms));
        }
        self.pump(conn, now_ms);
    }

    /// Sends the learner on `conn` its next piece of the sync: records of the log read, then of
    /// the window (committed meanwhile), while the piece has room; once none is left, the
    /// outstanding proposals (followers) and NEWLEADER.
    fn pump(&mut self, conn: ConnId, now_ms: u64) {
        let (piece_bytes, piece_packets) = (self.cfg.sync_piece_bytes, self.cfg.sync_piece_packets);
        loop {
            let Some(l) = self.learners.get_mut(&conn) else { return };
            let LearnerPhase::Streaming { sent_through } = l.phase else { return };
            // A piece is out: the next once the connection drains (the server asks, as
            // `may_send` now says no; counting packets here alone, it said yes and nobody asked).
            if l.unacked_bytes >= piece_bytes || l.unacked_packets >= piece_packets {
                return;
            }
            let next = match l.backlog.pop_front() {
                Some(r) => Some(r),
                None => {
                    if !self.window_covers_after(sent_through) {
                        return self.reject(conn, "too much committed while the learner synced".into());
                    }
                    self.window.iter().find(|(z, _)| *z > sent_through).cloned()
                }
            };
            let Some((zxid, payload)) = next else { break };
            if let Some(l) = self.learners.get_mut(&conn) {
                l.unacked_bytes = l.unacked_bytes.saturating_add(payload.len() as u64);
                l.unacked_packets = l.unacked_packets.saturating_add(2);
                l.phase = LearnerPhase::Streaming { sent_through: zxid };
            }
            self.send_pair(conn, zxid, payload);
        }
        if let Some(l) = self.learners.get_mut(&conn) {
            if let LearnerPhase::Streaming { sent_through } = l.phase {
                l.synced_through = sent_through;
            }
        }
        let observer = self.learners.get(&conn).is_some_and(|l| l.observer);
        if !observer {
            let proposals: Vec<(i64, Bytes)> =
                self.outstanding.iter().map(|(z, p, _)| (*z, p.clone())).collect();
            if let (Some(l), Some((first, _))) = (self.learners.get_mut(&conn), proposals.first()) {
                l.ack_due = Some((*first, now_ms));
            }
            for (zxid, payload) in proposals {
                self.send(conn, QuorumPacket::new(PacketType::Proposal, zxid, Some(payload)));
            }
        }
        let epoch = self.epoch.unwrap_or(0);
        let config = self.cfg.config_string.clone();
        self.send(conn, QuorumPacket::new(PacketType::NewLeader, make_zxid(epoch, 0), Some(config)));
        if let Some(l) = self.learners.get_mut(&conn) {
            l.attached_ms = now_ms;
            l.phase = LearnerPhase::AwaitNewLeaderAck;
            l.deadline_ms = Some(now_ms.saturating_add(self.cfg.init_ms()));
        }
    }

    fn on_new_leader_ack(&mut self, conn: ConnId, zxid: i64, now_ms: u64) {
        let epoch = self.epoch.unwrap_or(0);
        if zxid != make_zxid(epoch, 0) {
            return self.on_early_proposal_ack(conn, zxid);
        }
        let (sid, observer) = {
            let Some(l) = self.learners.get_mut(&conn) else { return };
            l.phase = LearnerPhase::AwaitUpToDate;
            l.deadline_ms = None;
            l.acked_through = l.acked_through.max(l.synced_through);
            (l.sid, l.observer)
        };
        if self.phase == Phase::Established {
            return self.send_up_to_date(conn);
        }
        // An observer's ACK counts where the pending configuration makes it a voter (the quorum
        // checks count only the voters of each configuration), as Apache counts NEWLEADER ACKs
        // by id in each. Without it, a pending configuration whose quorum needs such a server
        // never got one: the server comes back as the observer its committed configuration
        // says, and only becomes a follower once it activates the pending configuration, at
        // UPTODATE, which needs the leader established. An observer that the configuration in
        // force makes a voter is misconfigured (its reconfiguration off, or its own
        // configuration another): it never acknowledges a proposal, so it is not counted.
        if !observer || !self.cfg.verifier.is_voter(sid) {
            self.new_leader_set.insert(sid);
        }
        self.maybe_established(now_ms);
    }

    /// An ACK other than the NEWLEADER ACK while that one is due. zkrs learners send the NEWLEADER
    /// ACK first, but Apache learners before 3.8.5 / 3.9.2 may acknowledge a proposal sent during
    /// the sync first (ZK-4685: their log thread races the NEWLEADER ACK). The proposal is durable
    /// on the learner, so it counts like any proposal ACK, and the NEWLEADER ACK is still waited
    /// for (initLimit). Apache's own leader logs such an ACK and ignores it; counting it costs
    /// nothing and closing the connection, as we did, only made the learner sync again, forever.
    /// Anything else (an unproposed zxid, an epoch's zero, an observer's ACK) closes the connection.
    fn on_early_proposal_ack(&mut self, conn: ConnId, zxid: i64) {
        let Some(l) = self.learners.get(&conn) else { return };
        let (sid, observer) = (l.sid, l.observer);
        if observer || counter_of(zxid) == 0 || zxid > self.last_proposed {
            return self.reject(conn, format!("ACK {zxid:#x} where the NEWLEADER ACK was due"));
        }
        tracing::debug!(
            sid = self.cfg.my_sid,
            learner = sid,
            zxid = format_args!("{zxid:#x}"),
            "proposal ACK before the NEWLEADER ACK (ZK-4685): counted, still waiting for the NEWLEADER ACK"
        );
        self.count_proposal_ack(conn, sid, zxid);
    }

    /// A follower's ACK of proposal `zxid` (checked: proposed, not an observer's).
    fn count_proposal_ack(&mut self, conn: ConnId, sid: i64, zxid: i64) {
        if let Some(l) = self.learners.get_mut(&conn) {
            l.acked_through = l.acked_through.max(zxid);
        }
        if let Some((z, to)) = self.handover {
            if zxid >= z {
                // Only the successor was sent it; it is never committed here.
                if sid == to && zxid == z {
                    self.actions.push_back(LeaderAction::HandoverAcked { sid, zxid });
                }
                return;
            }
        }
        let next_due = self.outstanding.iter().find(|(z, _, _)| *z > zxid).map(|(z, _, t)| (*z, *t));
        if let Some(l) = self.learners.get_mut(&conn) {
            if l.ack_due.is_some_and(|(z, _)| zxid >= z) {
                // The clock for the next one runs from when it was proposed, or from now if
                // the learner only got it at its sync.
                l.ack_due = next_due.map(|(z, t)| (z, t.max(l.attached_ms)));
            }
        }
        if zxid > self.last_committed {
            self.actions.push_back(LeaderAction::Ack { sid, zxid });
        }
    }

    fn maybe_established(&mut self, now_ms: u64) {
        if self.phase != Phase::AwaitNewLeaderAcks || !self.has_quorum(&self.new_leader_set) {
            return;
        }
        let epoch = self.epoch.unwrap_or(0);
        tracing::info!(sid = self.cfg.my_sid, epoch, quorum = ?self.new_leader_set, "established");
        self.phase = Phase::Established;
        self.phase_deadline_ms = None;
        self.last_proposed = self.last_proposed.max(make_zxid(epoch, 0));
        self.next_ping_ms = Some(now_ms.saturating_add(self.ping_interval_ms()));
        self.actions.push_back(LeaderAction::Established { epoch });
        for conn in self.conns_in(LearnerPhase::AwaitUpToDate) {
            self.send_up_to_date(conn);
        }
    }

    fn send_up_to_date(&mut self, conn: ConnId) {
        self.send(conn, QuorumPacket::new(PacketType::UpToDate, -1, None));
        if let Some(l) = self.learners.get_mut(&conn) {
            l.phase = LearnerPhase::Active;
        }
    }

    fn on_broadcast_packet(&mut self, conn: ConnId, kind: PacketType, pkt: QuorumPacket) {
        let (sid, observer) = {
            let l = &self.learners[&conn];
            (l.sid, l.observer)
        };
        match kind {
            PacketType::Ack => {
                if counter_of(pkt.zxid) == 0 {
                    // The ACK after UPTODATE (or a repeated NEWLEADER ACK): nothing to count.
                    return;
                }
                if observer {
                    return self.reject(conn, "observers do not ACK".into());
                }
                if pkt.zxid > self.last_proposed {
                    return self.reject(conn, format!("ACK of unproposed zxid {:#x}", pkt.zxid));
                }
                self.count_proposal_ack(conn, sid, pkt.zxid);
            }
            PacketType::Ping => match SessionTouch::decode_list(pkt.data.as_deref().unwrap_or(&[])) {
                Ok(sessions) if sessions.is_empty() => {}
                Ok(sessions) => self.actions.push_back(LeaderAction::Touch { sessions }),
                Err(e) => self.reject(conn, e.to_string()),
            },
            PacketType::Request => match ForwardedRequest::decode(&pkt.data.clone().unwrap_or_default()) {
                Ok(request) => self.actions.push_back(LeaderAction::Forwarded {
                    sid,
                    conn,
                    request,
                    authinfo: pkt.authinfo.unwrap_or_default(),
                }),
                Err(e) => self.reject(conn, e.to_string()),
            },
            PacketType::Revalidate => match RevalidateRequest::decode(pkt.data.as_deref().unwrap_or(&[])) {
                Ok(r) => self.actions.push_back(LeaderAction::Revalidate {
                    conn,
                    session: r.session_id,
                    timeout: r.timeout_ms,
                }),
                Err(e) => self.reject(conn, e.to_string()),
            },
            other => self.reject(conn, format!("unexpected {other:?} from a synced learner")),
        }
    }
}
