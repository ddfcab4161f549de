//! A member of an ensemble asked to stop (SIGTERM) moves its clients to the other members before
//! it goes, so that a rolling restart fails none of their requests.
//!
//! ZooKeeper's client protocol has no word for "go elsewhere": a client learns it when its
//! connection closes, and every request it had sent that was not answered then fails
//! (ConnectionLoss). A client with nothing outstanding only reconnects, to another member of
//! its connect string, keeping its session and watches. So the member takes no new connection and
//! closes each one at the first moment it is quiet: the session has nothing queued or in flight
//! here (its answers are written before the close) and no request has come from it for
//! [`DRAIN_QUIET_MS`], closed right behind the answer that left it so when that comes later,
//! or by a timer set for the moment the quiet time is up. A client that pipelines a batch and
//! then pauses is closed at the start of its pause, so it reads the close with its last answers,
//! before it sends more; a close found by a coarser poll later in the pause can meet its next
//! batch already on the wire, unseen here (a kazoo writer pausing about 50 ms between batches
//! lost a batch that way in about one drain in five of a five-server rolling restart, with a
//! poll every 20 ms).
//!
//! The core sees a connection's requests only once its task has read them and the driver has
//! passed them on, so it does not close: it asks the task to close if the connection is quiet
//! there too ([`Action::CloseWhenQuiet`], with the count of requests the core saw from it). The
//! task looks a few milliseconds later (the ask often comes right behind an answer, which a
//! client may answer with its next batch at once), and closes only if it handed over no more
//! than that, holds no part of a request, and finds no bytes waiting in the socket; otherwise
//! the requests reach the core, which answers them and asks again at the next quiet moment (or
//! a moment later, should part of a request never come whole). The connection goes when the
//! task reports it closed. Whatever is still open at the deadline is closed then (a client that never pauses loses what it had
//! sent, as with Apache's servers, which close everything at once). The driver waits for this
//! before a leader hands its leadership over (`handover.rs`) and before the process exits.
//! A standalone server does not drain: there is nowhere else for its clients to go.

use super::*;

/// How long a connection must have sent nothing, with nothing of its session waiting here,
/// before a member that is stopping closes it: longer than the gaps between the requests of one
/// batch a client writes (so it is not cut in the middle of one), short beside the pauses
/// between batches.
pub const DRAIN_QUIET_MS: u64 = 10;

impl ServerCore {
    /// Starts moving the clients away (see the module docs): no new connection is taken, and
    /// each is closed once quiet, the rest at `now + within_ms`. Only while leading or following
    /// with clients connected; returns whether it started (or was under way).
    pub fn drain_clients(&mut self, now: Now, within_ms: u64) -> bool {
        if self.drain_until.is_some() {
            return true;
        }
        if !matches!(self.role, Role::Leader { .. } | Role::Learner { .. }) || self.conns.is_empty() {
            return false;
        }
        info!(
            "stopping: moving {} client connections to the other members (each closed once quiet, \
             within {within_ms} ms)",
            self.conns.len()
        );
        self.drain_until = Some(now.mono_ms().saturating_add(within_ms));
        self.step_drain(now.mono_ms());
        true
    }

    /// Client connections open.
    pub fn client_connections(&self) -> usize {
        self.conns.len()
    }

    /// Asks the connections that look quiet to close, or closes all of them once the time is up.
    pub(super) fn step_drain(&mut self, ms: u64) {
        let Some(until) = self.drain_until else { return };
        let all = ms >= until;
        let waiting = self.conns_waiting_for_leader();
        let mut due: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(id, c)| all || self.drain_quiet(*id, c, ms, &waiting))
            .map(|(id, _)| id)
            .collect();
        due.sort_unstable();
        if all && !due.is_empty() {
            info!("stopping: {} client connections still busy are closed", due.len());
        }
        for conn in due {
            if all {
                self.close_kept(conn);
            } else {
                self.ask_close(conn, ms);
            }
        }
        if all {
            self.forget_client_queues();
        }
        // The next look: when the first connection left may be asked (quiet long enough, and
        // not asked within that time), or, for one that may be asked already but is still
        // waiting for an answer, a moment from now.
        let next = self
            .conns
            .iter()
            .map(|(_, c)| {
                let may_ask = may_ask_at(c);
                if may_ask > ms {
                    may_ask
                } else {
                    ms.saturating_add(DRAIN_QUIET_MS)
                }
            })
            .min();
        // None left: nothing more to do (no new connection is taken).
        self.drain_next_ms = next.map_or(u64::MAX, |n| n.min(until));
    }

    /// Asks connection `conn`'s task to close it if it is quiet there too (it may have read
    /// requests the core has not seen yet): [`Action::CloseWhenQuiet`]. The connection stays
    /// until its task reports it closed; a request from it means the task found it busy.
    fn ask_close(&mut self, conn: ConnId, ms: u64) {
        let Some(c) = self.conns.get_mut(conn) else { return };
        c.close_asked_ms = Some(ms);
        let requests = c.requests;
        self.actions.push_back(Action::CloseWhenQuiet { conn, requests });
    }

    /// After an event, while draining: each connection it answered whose session now has nothing
    /// waiting (and no handshake with the leader under way), quiet for [`DRAIN_QUIET_MS`], is
    /// asked to close right behind its answers.
    pub(super) fn close_answered(&mut self, ms: u64) {
        let mut answered = std::mem::take(&mut self.drain_answered);
        answered.sort_unstable();
        answered.dedup();
        if self.drain_until.is_none() {
            return;
        }
        let waiting = self.conns_waiting_for_leader();
        for conn in answered {
            let quiet = self.conns.get(conn).is_some_and(|c| {
                self.drain_quiet(conn, c, ms, &waiting)
                    && c.session.is_some_and(|sid| self.conns.conn_of(sid) == Some(conn))
            });
            if quiet {
                debug!("stopping: connection {conn} asked to close behind its last answer");
                self.ask_close(conn, ms);
            }
        }
    }

    /// Whether a member that is stopping may ask connection `conn` (state `c`) to close now: its
    /// session has nothing waiting here, nor a handshake with the leader (`waiting`), it is not
    /// kept, it sent nothing for [`DRAIN_QUIET_MS`], and it was not asked within that time (a
    /// task that found bytes or part of a request waiting is asked again later, should the
    /// request the core then expects not come).
    fn drain_quiet(
        &self,
        conn: ConnId,
        c: &ConnState,
        ms: u64,
        waiting: &std::collections::HashSet<ConnId>,
    ) -> bool {
        c.session.is_some_and(|sid| self.queues.is_idle(sid))
            && !waiting.contains(&conn)
            && !self.is_kept(conn)
            && ms >= may_ask_at(c)
    }

    /// When [`Self::step_drain`] next has something to do.
    pub(super) fn drain_deadline(&self) -> Option<u64> {
        self.drain_until.map(|_| self.drain_next_ms)
    }
}

/// The first moment a member stopping may ask connection `c` to close: [`DRAIN_QUIET_MS`] after
/// its last request and after the last ask.
fn may_ask_at(c: &ConnState) -> u64 {
    c.last_request_ms.max(c.close_asked_ms.unwrap_or(0)).saturating_add(DRAIN_QUIET_MS)
}
