//! A leader handing its leadership over (`ydld`, `rqld`, SIGTERM): while the replica waits for
//! its successor to catch up, the core proposes nothing.
//!
//! - The leader's own clients' writes are held: each keeps its place in its session's queue
//!   (so the session's later requests wait behind it, in order) and waits here.
//! - Learners' forwarded requests (writes, syncs, createSessions) wait here too, in the same
//!   arrival order: a sync answered before a write its learner forwarded earlier would reach
//!   the learner ahead of that write's commit, and a write dropped would leave its session
//!   waiting for an answer that never comes if the handover is given up.
//! - No session expires and no container is reaped; no new client connection is taken.
//!
//! If the handover is given up, everything held runs in the order it came
//! ([`ServerCore::release_writes`]). If it goes through, the role changes: the learners' requests
//! are dropped (never proposed: the replica tells the learners so as it leaves, and each forwards
//! them again to the next leader, [`Event::Unproposed`]), and the own clients' requests (each held write and what its session
//! queued behind it) become the kept connections' held requests (`kept.rs`), which run, in
//! order, once this server serves again (forwarded to the new leader as a learner's are: they
//! were never proposed, so nothing about them is ambiguous); without kept connections
//! (`zkrs.keepClientsThroughElection=false`) their connections are closed. The replica decides when this starts and ends ([`ServerCore::hold_writes`]),
//! and gives the handover up once [`ServerCore::hold_full`] says the learners' requests held
//! reach [`HELD_FORWARDS_MAX`] (the leader's own clients' are bounded by the permits they hold).

use super::kept::HeldRequest;
use super::*;
use zk_quorum::wire::{MovedSessions, MOVED_SESSIONS_MAX};

/// Learners' forwarded requests a leader handing over holds before the handover is given up.
pub const HELD_FORWARDS_MAX: usize = 16_384;

/// A leader's client write held while it hands over: the request (its bytes as they came are
/// forwarded as they are if it runs on a learner) and its session.
#[derive(Debug)]
pub(super) struct HeldWrite {
    pub(super) sid: SessionId,
    pub(super) req: HeldRequest,
}

/// What a leader handing over holds, in arrival order.
#[derive(Debug)]
pub(super) enum Held {
    /// One of its own clients' writes (queued in its session already).
    Write(HeldWrite),
    /// A learner's forwarded request ([`Event::Forwarded`], [`Event::ForwardedCreateSession`]).
    Forwarded(Event),
}

impl ServerCore {
    /// A leader starts handing over: nothing is proposed until [`Self::release_writes`] or a
    /// role change (see the module docs). Ignored unless leading.
    pub fn hold_writes(&mut self) {
        if matches!(self.role, Role::Leader { .. }) && !self.writes_held {
            info!("handing over: holding new writes ({} proposals in flight)", self.proposer.in_flight());
            self.writes_held = true;
        }
    }

    /// The handover was given up: what was held runs in the order it came (writes proposed,
    /// learners' requests handled), and writes flow again.
    pub fn release_writes(&mut self, now: Now) {
        if !self.writes_held {
            return;
        }
        self.writes_held = false;
        self.held_forwards = 0;
        let held = std::mem::take(&mut self.held);
        info!("handover given up: running the {} requests held meanwhile", held.len());
        for h in held {
            match h {
                Held::Write(w) => self.propose_client_write(now, w, true),
                Held::Forwarded(ev) => self.handle(now, ev),
            }
        }
    }

    /// Whether new writes are held for a handover.
    pub fn writes_held(&self) -> bool {
        self.writes_held
    }

    /// Whether the learners' requests held reached [`HELD_FORWARDS_MAX`]: the handover must be
    /// given up.
    pub fn hold_full(&self) -> bool {
        self.held_forwards >= HELD_FORWARDS_MAX
    }

    /// Holds a leader's client write (its place in the session's queue is taken now).
    pub(super) fn hold_write(&mut self, w: HeldWrite) {
        let r = &w.req;
        let opcode = OpCode::from_i32(r.op).unwrap_or(OpCode::Error);
        self.queues.push_write(w.sid, PendingWrite::own(r.conn, r.xid, opcode, r.received_us));
        self.held.push_back(Held::Write(w));
    }

    /// Holds a learner's forwarded request.
    pub(super) fn hold_forwarded(&mut self, ev: Event) {
        self.held_forwards += 1;
        self.held.push_back(Held::Forwarded(ev));
    }

    /// A handover went through (the role changes): takes the own clients' held requests out of
    /// their sessions' queues, in order (each session's held writes and what it queued behind
    /// them), for [`Self::carry_into_kept`]. A session whose queue holds a write that was
    /// proposed (none once a handover went through: every proposal was committed first) keeps
    /// its queue, and so its connection is closed as any with a write in flight.
    pub(super) fn take_held_for_kept(&mut self) -> Vec<HeldRequest> {
        // Each session's held writes in arrival order: its queue has their places in the same
        // order (a client may reuse an xid, so they are matched by position, not by xid).
        let mut writes: HashMap<SessionId, VecDeque<HeldWrite>> = HashMap::new();
        let mut sessions: Vec<SessionId> = Vec::new();
        for h in std::mem::take(&mut self.held) {
            if let Held::Write(w) = h {
                if !sessions.contains(&w.sid) {
                    sessions.push(w.sid);
                }
                writes.entry(w.sid).or_default().push_back(w);
            }
        }
        let mut out = Vec::new();
        for sid in sessions {
            let q = self.queues.take_session(sid);
            let mut mine = writes.remove(&sid).unwrap_or_default();
            let queued: Vec<i32> = q
                .iter()
                .filter_map(|p| match p {
                    Pending::Write(pw) => Some(pw.cxid),
                    Pending::Read(_) => None,
                })
                .collect();
            let all_held =
                queued.len() == mine.len() && queued.iter().zip(&mine).all(|(c, w)| *c == w.req.xid);
            // A session that moved to a learner while its writes were held here: this leader
            // would have refused them (SESSIONMOVED), and the next one has no owner to refuse
            // them with, so its connection (one the client has left) is closed as any with a
            // write in flight, not kept.
            let moved = matches!(self.owners.get(&sid), Some(Some(_)));
            if !all_held || moved {
                self.queues.put_session(sid, q);
                continue;
            }
            for p in q {
                let c = match p {
                    Pending::Write(_) => {
                        let Some(w) = mine.pop_front() else {
                            debug_assert!(false, "a held write's place without its write");
                            self.actions.push_back(Action::ReleasePermit);
                            continue;
                        };
                        w.req
                    }
                    Pending::Read(r) => HeldRequest::from_read(r),
                };
                // Counted again when it runs.
                self.stats.packets_received = self.stats.packets_received.saturating_sub(1);
                out.push(c);
            }
        }
        out
    }

    /// Hands the requests [`Self::take_held_for_kept`] took to the kept connections' held
    /// requests; one whose connection was not kept has its permit freed (the connection is
    /// closed).
    pub(super) fn carry_into_kept(&mut self, carried: Vec<HeldRequest>) {
        if !carried.is_empty() {
            info!(
                "handover done: {} requests of this server's clients wait to run under the new leader",
                carried.len()
            );
        }
        for c in carried {
            if self.is_kept(c.conn) {
                self.hold(c);
            } else {
                self.actions.push_back(Action::ReleasePermit);
            }
        }
    }

    /// A role change ends a handover's hold: the held writes' queue entries went with the
    /// clients (their permits freed there), and the learners' requests with their leader.
    pub(super) fn end_hold(&mut self) {
        self.writes_held = false;
        self.held.clear();
        self.held_forwards = 0;
        self.owner_moves.clear();
    }

    /// Leader: `session`'s connection is now on `owner` (`None`: this server; `Some`: the
    /// learner on that quorum connection), as a revalidation says. While writes are held the
    /// change is remembered for [`Self::moved_away`].
    pub(super) fn set_owner(&mut self, session: SessionId, owner: Option<u64>) {
        if self.owners.insert(session, owner) != Some(owner) && self.writes_held {
            self.owner_moves.insert(session);
        }
    }

    /// Leader leaving after a handover: the sessions the learner on quorum connection
    /// `learner` may forward requests of again (those it forwarded and this leader held, and
    /// those whose owner changed while writes were held) that are now owned elsewhere: this
    /// leader would have refused their requests from `learner` (SESSIONMOVED), and the next one
    /// starts with no owners, so the learner closes their connections instead of forwarding
    /// them again. `pending`: events the replica queued that have not reached the core yet, in
    /// order: owner changes it decided ([`Event::SessionOwner`]) and requests learners forwarded
    /// ([`Event::Forwarded`]). More than [`MOVED_SESSIONS_MAX`] gives
    /// [`MovedSessions::Unlisted`].
    pub fn moved_away(&self, learner: u64, pending: &[&Event]) -> MovedSessions {
        let mut candidates: std::collections::BTreeSet<SessionId> =
            self.owner_moves.iter().copied().collect();
        for h in &self.held {
            if let Held::Forwarded(Event::Forwarded { from, session, .. }) = h {
                if *from == learner {
                    candidates.insert(*session);
                }
            }
        }
        let mut owner: HashMap<SessionId, Option<u64>> = HashMap::new();
        for ev in pending {
            match ev {
                Event::Forwarded { from, session, .. } if *from == learner => {
                    candidates.insert(*session);
                }
                Event::SessionOwner { session, from } => {
                    owner.insert(*session, Some(*from));
                    candidates.insert(*session);
                }
                _ => {}
            }
        }
        let moved: Vec<SessionId> = candidates
            .into_iter()
            .filter(|sid| {
                let now_on = owner.get(sid).copied().or_else(|| self.owners.get(sid).copied());
                now_on.is_some_and(|o| o != Some(learner))
            })
            .collect();
        if moved.len() > MOVED_SESSIONS_MAX {
            MovedSessions::Unlisted
        } else {
            MovedSessions::Listed(moved)
        }
    }
}
