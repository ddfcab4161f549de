//! Clients kept through a change of leader.
//!
//! Apache's servers close every client connection when they leave a serving role (a leader
//! lost, an election, a sync): every client then reconnects somewhere, which after a leader's
//! loss is a storm of reconnections, each resending its watches. A zkrs server that was
//! serving as leader or learner keeps the connections that have nothing in flight instead:
//!
//! - A connection with a write, a sync or a session creation in flight is closed, as before:
//!   whether the old leader committed it is known only to the new history, and the client
//!   (ConnectionLoss) decides whether to retry, as with Apache. One exception, for writes and
//!   syncs only: a learner whose leader handed over and said it proposed nothing more
//!   ([`Event::Unproposed`]) and that has applied everything that leader committed knows what it
//!   still waits on was never proposed; such a connection is kept and its requests run again,
//!   forwarded to the next leader (see [`ServerCore::keep_clients`] for when it is not). A
//!   connection still in its handshake is closed too, and so is one with a persistent or
//!   recursive watch (setWatches could put those back but not say what changed meanwhile, and
//!   they promise every change).
//! - A kept connection's requests, pings included, are held in arrival order while the server
//!   is down: the client hears nothing until the server serves again, so its own timers still
//!   tell it when it has been cut off for too long. Each connection is kept at most a third of
//!   its session's timeout (the interval at which an idle client pings); past it the connection
//!   is closed and the client moves on as it would have at once with Apache.
//! - Its one-shot watches are taken out of the tree when the server goes down
//!   ([`zk_tree::Database::detach_watches`]), since the tree may be replaced (a reload from disk,
//!   a TRUNC or a SNAP) before the server serves again, and put back when it serves again with
//!   setWatches' rules relative to the last zxid the server had applied when it went down, the
//!   last its clients can have seen: a watch on a node that changed meanwhile fires then, as it
//!   would for a client reconnecting with that zxid.
//! - Serving again, as a learner of the new leader or as the leader itself, a kept session the
//!   new history has closed has its connection closed (the client learns of the expiry when it
//!   reconnects); the others get their watches back, then their held requests run, in order,
//!   through the ordinary path (a held write is forwarded to, or proposed by, the new leader:
//!   it was never sent before, so nothing about it is ambiguous).
//!
//! - A new connection's handshake that arrives meanwhile is held too (Apache closes the
//!   connection, and the client pauses and tries its next server: after a leader's loss, that is
//!   how its clients meet the members still electing) and answered once the server serves
//!   again, as if it had just arrived; it is closed unanswered after a third of the session
//!   timeout it asks for. A member that keeps no clients (just started, or
//!   `zkrs.keepClientsThroughElection=false`) closes it at once.
//!
//! A change to a role that serves no ensemble session (read-only, or a leader with
//! `leaderServes=no`) closes every kept connection and held handshake, as does a divergence of
//! the tree (the clients' view came from a tree the ensemble did not agree on).

use super::*;
use std::collections::BTreeMap;

/// A connection kept while the server is down.
#[derive(Debug)]
pub(super) struct KeptConn {
    /// When it is closed if the server does not serve again first (mono ms).
    pub deadline_ms: u64,
    /// Its watches, taken out of the tree.
    pub watches: SetWatches2,
}

/// A client request as [`Event::Request`] carries it, held to run later: one that arrived on a
/// kept connection while the server was down, or one a leader held while handing over.
#[derive(Debug)]
pub(super) struct HeldRequest {
    pub(super) conn: ConnId,
    pub(super) xid: i32,
    pub(super) op: i32,
    pub(super) body: Result<Request, RequestError>,
    pub(super) raw: Bytes,
    pub(super) received_us: u64,
}

impl HeldRequest {
    /// A read queued behind a write of its session, to run later.
    pub(super) fn from_read(r: PendingRead) -> HeldRequest {
        let mut raw = BytesMut::new();
        if let Ok(req) = &r.body {
            req.encode(&mut raw);
        }
        HeldRequest {
            conn: r.conn,
            xid: r.xid,
            op: r.op,
            body: r.body,
            raw: raw.freeze(),
            received_us: r.received_us,
        }
    }

    /// A learner's forwarded request that its leader never proposed, to forward again: its body
    /// decoded again from the bytes the client sent (as the connection decoded it).
    fn from_unproposed(w: PendingWrite) -> HeldRequest {
        let op = w.op.code();
        let body = Request::decode(op, &mut zk_proto::Reader::new(w.raw.clone()));
        HeldRequest { conn: w.conn, xid: w.cxid, op, body, raw: w.raw, received_us: w.received_us }
    }
}

/// The most handshakes held at once while the server is down; past it a new connection is
/// closed at once, as Apache closes it. A held handshake is a few hundred bytes.
pub const HELD_HANDSHAKES_MAX: usize = 32_768;

/// A client's handshake that arrived while the server was down, held until it serves again
/// (see the module docs).
#[derive(Debug)]
pub(super) struct HeldHandshake {
    pub(super) conn: ConnId,
    pub(super) remote: SocketAddr,
    pub(super) req: ConnectRequest,
    pub(super) ids: Vec<Id>,
    pub(super) stats: Arc<ConnStats>,
    /// When it is closed unanswered if the server does not serve again first (mono ms): a third
    /// of the session timeout it would negotiate ([`third_of`]).
    pub(super) deadline_ms: u64,
}

/// A third of a session timeout, in ms: how long a kept connection or a held handshake waits
/// for the server to serve again (an idle client pings at that interval).
pub(super) fn third_of(timeout_ms: i32) -> u64 {
    u64::try_from(timeout_ms.max(0) / 3).unwrap_or(0)
}

/// The clients kept since the server went down. Bounded: one entry per connection, every
/// held request holds a permit of the global outstanding-request limit, and at most
/// [`HELD_HANDSHAKES_MAX`] handshakes wait.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// The last zxid applied when the server went down: the latest its clients can have seen.
    pub seen_zxid: i64,
    /// The kept connections, by id.
    pub conns: BTreeMap<ConnId, KeptConn>,
    /// Requests that arrived meanwhile, oldest first.
    held: VecDeque<HeldRequest>,
    /// Handshakes of connections opened meanwhile, oldest first.
    handshakes: VecDeque<HeldHandshake>,
}

impl Kept {
    /// Drops the requests `conn` had held; returns how many (each held a permit).
    fn drop_held_of(&mut self, conn: ConnId) -> usize {
        let before = self.held.len();
        self.held.retain(|h| h.conn != conn);
        before - self.held.len()
    }
}

impl ServerCore {
    /// Leaving a serving role for Down: keeps the connections that can be kept (see the module
    /// docs) and closes the others.
    /// `contact`: when a learner last heard from its leader (the kept time counts from then).
    /// `unproposed`: the learner's leader handed over, having committed through this zxid and
    /// proposed nothing else this learner forwarded ([`Event::Unproposed`]). Once this server
    /// applied that zxid, every request still queued was never proposed: its connection is kept
    /// too, and its queue (the forwarded requests and the reads behind them) runs again, in
    /// order, when the server serves again. Not a session whose queue stopped matching its
    /// commits (`queue_desync`: then some of it may have been applied), nor one whose connection
    /// gained an identity since it sent a queued write (the write would go again with
    /// identities it did not have): those are closed, as without the word. Nor a session the
    /// leader saw move to another server (the word's [`zk_quorum::wire::MovedSessions`]): that leader would have
    /// refused its requests from here, and the next one would not know to, so its connection
    /// (one the client has left) is closed; if the word could not list them all, no request is
    /// forwarded again.
    pub(super) fn keep_clients(
        &mut self,
        now: Now,
        contact: Option<u64>,
        unproposed: Option<(i64, zk_quorum::wire::MovedSessions)>,
    ) {
        use zk_quorum::wire::MovedSessions;
        let since = contact.unwrap_or(now.mono_ms()).min(now.mono_ms());
        let applied = self.db.last_applied_zxid();
        let mut kept = Kept { seen_zxid: applied, ..Kept::default() };
        let (resend, moved) = match unproposed {
            Some((z, MovedSessions::Listed(m))) if applied >= z => {
                (true, m.into_iter().collect::<std::collections::HashSet<SessionId>>())
            }
            Some((z, moved)) => {
                info!(
                    "the leader handed over through 0x{z:x}, applied here through 0x{applied:x}{}: requests \
                     in flight are not forwarded again",
                    if moved == MovedSessions::Unlisted {
                        ", too many sessions moved to list"
                    } else {
                        " only"
                    }
                );
                (false, Default::default())
            }
            None => (false, Default::default()),
        };
        let mut resent = 0usize;
        let mut ids: Vec<ConnId> = self.conns.iter().map(|(id, _)| id).collect();
        ids.sort_unstable();
        let waiting = self.conns_waiting_for_leader();
        for conn in ids {
            let Some(c) = self.conns.get(conn) else { continue };
            let deadline_ms = since + third_of(c.timeout_ms);
            // A connection whose session is no longer bound to it is already being closed (its
            // session ended, or moved to another connection); one whose time is up already (the
            // leader was silent that long) is closed as Apache closes it.
            let session = c.session;
            let keepable = session.is_some_and(|sid| {
                self.conns.conn_of(sid) == Some(conn)
                    && !waiting.contains(&conn)
                    && !moved.contains(&sid)
                    && (self.queues.is_idle(sid)
                        || (resend
                            && !self.queue_desync.contains(&sid)
                            && self.queues.writes_sent_with(sid, c.auth_len())))
                    && c.sasl.is_none()
            }) && deadline_ms > now.mono_ms();
            match keepable.then(|| self.db.detach_watches(conn)).flatten() {
                Some(watches) => {
                    kept.conns.insert(conn, KeptConn { deadline_ms, watches });
                    for p in session.map(|sid| self.queues.take_session(sid)).unwrap_or_default() {
                        kept.held.push_back(match p {
                            Pending::Write(w) => {
                                resent += 1;
                                HeldRequest::from_unproposed(w)
                            }
                            Pending::Read(r) => HeldRequest::from_read(r),
                        });
                        // Counted again when it runs.
                        self.stats.packets_received = self.stats.packets_received.saturating_sub(1);
                    }
                }
                None => self.close_client(conn),
            }
        }
        // Whatever was queued belonged to the connections just closed (a kept one's is empty).
        self.forget_client_queues();
        if !kept.conns.is_empty() {
            info!(
                "keeping {} client connections while the server is down (as of zxid 0x{:x}; {resent} \
                 requests the old leader never proposed to forward again)",
                kept.conns.len(),
                kept.seen_zxid
            );
        }
        self.kept = Some(kept);
    }

    /// Whether a handshake on a new connection is held ([`Self::hold_handshake`]) rather than
    /// answered or refused now: the server is down with clients kept (it was serving and means to
    /// serve again), no restore or stop is under way, and fewer than [`HELD_HANDSHAKES_MAX`] wait.
    pub(super) fn holds_handshakes(&self) -> bool {
        self.role == Role::Down
            && self.drain_until.is_none()
            && !self.restore_pending()
            && self.kept.as_ref().is_some_and(|k| k.handshakes.len() < HELD_HANDSHAKES_MAX)
    }

    /// Holds a handshake until the server serves again or its deadline, instead of closing it
    /// at once. Only when [`Self::holds_handshakes`].
    pub(super) fn hold_handshake(&mut self, h: HeldHandshake) {
        debug_assert!(self.holds_handshakes(), "a handshake held while none is");
        let Some(k) = self.kept.as_mut() else { return };
        debug!("holding the handshake of {} until the server serves again", h.remote);
        k.handshakes.push_back(h);
    }

    /// Whether `conn` is kept while the server is down.
    pub(super) fn is_kept(&self, conn: ConnId) -> bool {
        self.kept.as_ref().is_some_and(|k| k.conns.contains_key(&conn))
    }

    /// A request on a kept connection while the server is down: held until it serves again.
    pub(super) fn hold(&mut self, h: HeldRequest) {
        let Some(k) = self.kept.as_mut() else {
            debug_assert!(false, "a request held with no kept clients");
            self.actions.push_back(Action::ReleasePermit);
            return;
        };
        k.held.push_back(h);
    }

    /// The connections whose handshake (a new session, or a session resumed here) waits for the
    /// leader's answer.
    pub(super) fn conns_waiting_for_leader(&self) -> std::collections::HashSet<ConnId> {
        self.connecting.values().map(|(c, _)| *c).chain(self.revalidating.values().copied()).collect()
    }

    /// Closes kept connection `conn` (its time ran out, or its session is gone), handing back
    /// the permits of what it had held; any other connection is closed as usual.
    pub(super) fn close_kept(&mut self, conn: ConnId) {
        self.forget_kept(conn);
        self.close_client(conn);
    }

    /// Forgets kept connection `conn` (closed by its client or by the core), handing back the
    /// permits of what it had held.
    pub(super) fn forget_kept(&mut self, conn: ConnId) {
        let Some(k) = self.kept.as_mut() else { return };
        k.handshakes.retain(|h| h.conn != conn);
        if k.conns.remove(&conn).is_none() {
            return;
        }
        for _ in 0..k.drop_held_of(conn) {
            self.actions.push_back(Action::ReleasePermit);
        }
    }

    /// Down: closes the kept connections and held handshakes whose time is up.
    pub(super) fn expire_kept(&mut self, now: Now) {
        let Some(k) = self.kept.as_mut() else { return };
        let ms = now.mono_ms();
        let mut closed = Vec::new();
        k.handshakes.retain(|h| {
            let due = h.deadline_ms <= ms;
            if due {
                closed.push(h.conn);
            }
            !due
        });
        if !closed.is_empty() {
            info!(
                "{} handshakes held for a third of their session's timeout while down: closed",
                closed.len()
            );
        }
        let due: Vec<ConnId> =
            k.conns.iter().filter(|(_, c)| c.deadline_ms <= ms).map(|(&id, _)| id).collect();
        for conn in closed {
            self.actions.push_back(Action::Close { conn });
        }
        for conn in due {
            info!("connection {conn} kept for a third of its session's timeout while down: closed");
            self.close_kept(conn);
        }
    }

    /// The earliest deadline of a kept connection or held handshake, while down.
    pub(super) fn kept_deadline(&self) -> Option<u64> {
        let k = self.kept.as_ref()?;
        k.conns.values().map(|c| c.deadline_ms).chain(k.handshakes.iter().map(|h| h.deadline_ms)).min()
    }

    /// Closes every kept connection (a role that cannot serve them, or a diverged tree).
    pub(super) fn drop_kept(&mut self) {
        let Some(k) = self.kept.take() else { return };
        for _ in &k.held {
            self.actions.push_back(Action::ReleasePermit);
        }
        for h in k.handshakes {
            self.actions.push_back(Action::Close { conn: h.conn });
        }
        for conn in k.conns.into_keys() {
            self.close_client(conn);
        }
    }

    /// Serving again: the kept connections whose sessions the new history still holds get
    /// their watches back (firing for what changed since the server went down), then their held
    /// requests run in order; the others are closed.
    pub(super) fn resume_kept(&mut self, now: Now) {
        let Some(mut k) = self.kept.take() else { return };
        let learner = matches!(self.role, Role::Learner { .. });
        let mut resumed = 0usize;
        for (conn, kc) in std::mem::take(&mut k.conns) {
            let Some(c) = self.conns.get(conn) else { continue };
            let Some(sid) = c.session else { continue };
            if !self.db.sessions().contains(sid) || self.db.expiry().is_closing(sid) {
                info!("session 0x{sid:x} ended while the server was down: its kept connection is closed");
                for _ in 0..k.drop_held_of(conn) {
                    self.actions.push_back(Action::ReleasePermit);
                }
                self.close_client(conn);
                continue;
            }
            if learner {
                self.touched.insert(sid, c.timeout_ms);
            }
            self.db.expiry_mut().touch(sid, now.mono_ms());
            let auth = c.auth.clone();
            let sw = SetWatches2 { relative_zxid: k.seen_zxid, ..kc.watches };
            for ev in self.db.set_watches(conn, &auth, &sw) {
                self.deliver_event(conn, &ev, None);
            }
            resumed += 1;
        }
        if resumed > 0 {
            info!("{resumed} kept client connections served again ({} requests held)", k.held.len());
        }
        for h in k.held {
            self.on_request(now, h.conn, h.xid, h.op, h.body, h.raw, h.received_us);
        }
        if !k.handshakes.is_empty() {
            info!("{} handshakes held while the server was down are answered", k.handshakes.len());
        }
        for h in k.handshakes {
            self.on_connect(now, h.conn, h.remote, h.req, h.ids, h.stats);
        }
    }
}
