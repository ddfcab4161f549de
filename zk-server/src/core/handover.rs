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
//! ([`ServerCore::release_writes`]); if it goes through, the role changes and it is dropped
//! (never proposed, never answered: clients and learners see a connection loss, as with any
//! leader loss). The replica decides when this starts and ends ([`ServerCore::hold_writes`]),
//! and gives the handover up once [`ServerCore::hold_full`] says the learners' requests held
//! reach [`HELD_FORWARDS_MAX`] (the leader's own clients' are bounded by the permits they hold).

use super::*;

/// Learners' forwarded requests a leader handing over holds before the handover is given up.
pub const HELD_FORWARDS_MAX: usize = 16_384;

/// A leader's client write held while it hands over.
#[derive(Debug)]
pub(super) struct HeldWrite {
    pub(super) conn: ConnId,
    pub(super) sid: SessionId,
    pub(super) xid: i32,
    pub(super) op: i32,
    pub(super) body: Result<Request, RequestError>,
    pub(super) received_us: u64,
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
        let opcode = OpCode::from_i32(w.op).unwrap_or(OpCode::Error);
        self.queues.push_write(
            w.sid,
            PendingWrite { conn: w.conn, cxid: w.xid, op: opcode, received_us: w.received_us },
        );
        self.held.push_back(Held::Write(w));
    }

    /// Holds a learner's forwarded request.
    pub(super) fn hold_forwarded(&mut self, ev: Event) {
        self.held_forwards += 1;
        self.held.push_back(Held::Forwarded(ev));
    }

    /// A role change ends a handover's hold: the held writes' queue entries went with the
    /// clients (their permits freed there), and the learners' requests with their leader.
    pub(super) fn end_hold(&mut self) {
        self.writes_held = false;
        self.held.clear();
        self.held_forwards = 0;
    }
}
