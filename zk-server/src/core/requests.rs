//! Client requests after the handshake: writes into the write path (or to the leader, on a
//! learner), reads in session order, auth; replies and watch events as frames.

use super::*;

impl ServerCore {
    // The fields of `Event::Request`, as they come.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_request(
        &mut self,
        now: Now,
        conn: ConnId,
        xid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        raw: Bytes,
        received_us: u64,
    ) {
        if self.role == Role::Down && self.is_kept(conn) {
            // Counted when it runs.
            return self.hold(kept::HeldRequest { conn, xid, op, body, raw, received_us });
        }
        self.stats.packets_received += 1;
        let Some(sid) = self.conns.get(conn).and_then(|c| c.session).filter(|_| self.role != Role::Down)
        else {
            // A request before the session exists or after the connection went: nothing to answer.
            self.actions.push_back(Action::ReleasePermit);
            return;
        };
        let learner = matches!(self.role, Role::Learner { .. });
        if let Some(c) = self.conns.get_mut(conn) {
            c.last_request_ms = now.mono_ms();
            if learner {
                // The leader decides expiry: it hears of this session in the next PING reply.
                self.touched.insert(sid, c.timeout_ms);
            }
        }
        if !self.db.expiry_mut().touch(sid, now.mono_ms()) && !self.session_known(sid) {
            // Apache drops requests of sessions it no longer knows; the client times out.
            debug!("dropping request for unknown session 0x{sid:x}");
            self.actions.push_back(Action::ReleasePermit);
            return;
        }
        // A closing session's reads still get answers, in order (SESSIONEXPIRED); its writes never
        // reach the log. (Apache does either, depending on a race between its threads.)
        if self.db.expiry().is_closing(sid) && is_write_op(op) {
            debug!("dropping write (op {op}) of closing session 0x{sid:x}");
            self.actions.push_back(Action::ReleasePermit);
            return;
        }
        // A client may send createSession after its handshake: Apache preps it as a write whose
        // body does not decode (MARSHALLINGERROR, a zxid used); zk-proto refuses the opcode.
        let body = match body {
            Err(RequestError::Unknown(o)) if o == OpCode::CreateSession.code() => {
                Err(RequestError::Decode(DecodeError::InvalidValue {
                    what: "createSession request",
                    value: o as i64,
                }))
            }
            b => b,
        };
        if op == OpCode::Sasl.code() {
            let token = match &body {
                Ok(Request::Sasl(r)) => Some(r.token.clone()),
                _ => None,
            };
            return self.on_sasl(conn, sid, xid, token);
        }
        if op != OpCode::Auth.code() && !self.enforce_auth(conn, sid, xid) {
            return;
        }
        match &body {
            Err(RequestError::Unknown(_)) => {
                warn!("session 0x{sid:x} sent unknown opcode {op}; closing");
                self.reply(
                    conn,
                    ReplyHeader { xid, zxid: -1, err: ErrorCode::Unimplemented.code() },
                    &Body::Empty,
                );
                self.actions.push_back(Action::Close { conn });
                return;
            }
            Ok(Request::Auth(packet)) => {
                let packet = packet.clone();
                self.on_auth(conn, xid, packet);
                return;
            }
            _ => {}
        }
        if self.role == Role::ReadOnly && (is_write_op(op) || op == OpCode::Sync.code()) {
            return self.refuse_read_only(conn, sid, xid, op);
        }
        if learner && (is_write_op(op) || op == OpCode::Sync.code()) {
            return self.forward(conn, sid, xid, op, body, raw, received_us);
        }
        if is_write_op(op) {
            let req = kept::HeldRequest { conn, xid, op, body, raw, received_us };
            let w = handover::HeldWrite { sid, req };
            if self.writes_held {
                return self.hold_write(w);
            }
            self.propose_client_write(now, w, false);
        } else {
            let r = PendingRead { conn, xid, op, body, received_us };
            if self.queues.is_idle(sid) {
                self.execute_read(now, r);
            } else {
                self.queues.push_read(sid, r);
            }
        }
    }

    /// Preps and proposes a write of this server's own client, and queues it for its commit
    /// unless it is `queued` already (held for a handover, [`Self::hold_write`]).
    pub(super) fn propose_client_write(&mut self, now: Now, w: handover::HeldWrite, queued: bool) {
        let handover::HeldWrite { sid, req: kept::HeldRequest { conn, xid, op, body, raw: _, received_us } } =
            w;
        {
            let Some(zxid) = self.next_zxid(now) else {
                if !queued {
                    self.actions.push_back(Action::ReleasePermit);
                }
                return;
            };
            let opcode = OpCode::from_i32(op).unwrap_or(OpCode::Error);
            let txn = match &body {
                // Apache reads a client's deleteContainer path from the whole request buffer, so
                // it is never a valid path: BADARGUMENTS, logged as a failed write.
                _ if opcode == OpCode::DeleteContainer => {
                    Txn::Error(ErrorTxn { err: ErrorCode::BadArguments.code() })
                }
                _ if opcode != OpCode::CloseSession && !self.owned_by(sid, None) => {
                    Txn::Error(ErrorTxn { err: ErrorCode::SessionMoved.code() })
                }
                Ok(req) => {
                    if opcode == OpCode::CloseSession {
                        self.db.expiry_mut().set_closing(sid);
                    }
                    let auth = self.conns.get(conn).map(|c| c.auth.clone()).unwrap_or_default();
                    let ctx = RequestCtx { session: sid, cxid: xid, auth: &auth };
                    self.prep_write(&ctx, req, zxid, now)
                }
                Err(e) => {
                    info!("session 0x{sid:x}: undecodable {opcode:?} request: {e}");
                    Txn::Error(ErrorTxn { err: ErrorCode::MarshallingError.code() })
                }
            };
            let txn_type = zk_tree::txn_type(opcode, &txn).code();
            let hdr = TxnHeader { client_id: sid, cxid: xid, zxid, time: now.wall_ms, txn_type };
            self.propose(Proposal::new(hdr, txn, false));
            if !queued {
                self.queues.push_write(sid, PendingWrite::own(conn, xid, opcode, received_us));
            }
        }
    }

    /// Read-only: a write or a sync gets NOTREADONLY (as of the last applied zxid); a
    /// closeSession ends the session here, the only server that knows it.
    fn refuse_read_only(&mut self, conn: ConnId, sid: SessionId, xid: i32, op: i32) {
        let last = self.db.last_applied_zxid();
        if op == OpCode::CloseSession.code() {
            self.reply(conn, ReplyHeader { xid, zxid: last, err: 0 }, &Body::Empty);
            self.end_read_only_session(sid);
            return;
        }
        let err = ErrorCode::NotReadOnly.code();
        self.reply(conn, ReplyHeader { xid, zxid: last, err }, &Body::Empty);
    }

    /// Learner: a write (or sync) of a local client goes to the leader; its place in the
    /// session's queue holds later requests back until the commit (or the leader's SYNC) arrives.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward(
        &mut self,
        conn: ConnId,
        sid: SessionId,
        xid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        raw: Bytes,
        received_us: u64,
    ) {
        let opcode = OpCode::from_i32(op).unwrap_or(OpCode::Error);
        // A request that decoded goes to the leader as the client sent it; one that did not goes
        // empty (the leader finds it undecodable too, and logs the failed write as Apache does).
        if opcode == OpCode::Sync {
            // Every sync forwarded is answered by one SYNC, in order, whether its body decoded
            // or not (an undecodable one is answered with an empty path): the answers are matched
            // by their place in this queue.
            self.syncs_forwarded.push_back((sid, xid));
            if let Ok(Request::Sync(r)) = &body {
                self.sync_paths.insert((sid, xid), r.path.clone());
            }
        }
        let sent = if body.is_ok() { raw.clone() } else { Bytes::new() };
        let (auth, auth_len) =
            self.conns.get(conn).map(|c| (c.auth.ids.clone(), c.auth_len())).unwrap_or_default();
        // The body is kept (a slice of the bytes received, no copy) until the commit comes, in
        // case the leader hands over without proposing it (`kept.rs`).
        self.queues.push_write(sid, PendingWrite { conn, cxid: xid, op: opcode, received_us, raw, auth_len });
        self.actions.push_back(Action::Forward { session: sid, cxid: xid, op, body: sent, auth });
    }

    /// A commit (or a learner's sync answer) of (`sid`, `cxid`): takes the write its session's
    /// queue waits on first, if it is that one. One that is not, while the session has requests
    /// queued, means the queue no longer says what was committed: the session is marked
    /// (`queue_desync`), and `kept.rs` forwards nothing of it again.
    pub(super) fn complete_queued_write(&mut self, sid: SessionId, cxid: i32) -> Option<PendingWrite> {
        let answered = self.queues.complete_write(sid, cxid);
        if answered.is_none() && !self.queues.is_idle(sid) {
            self.queue_desync.insert(sid);
        }
        answered
    }

    /// Learner: the leader answered a forwarded sync: answer the client, in its session's order.
    pub(super) fn complete_sync(&mut self, now: Now, sid: SessionId, cxid: i32) {
        let path = self.sync_paths.remove(&(sid, cxid)).unwrap_or_default();
        if let Some(w) = self.complete_queued_write(sid, cxid) {
            let last = self.db.last_applied_zxid();
            self.reply(w.conn, ReplyHeader { xid: cxid, zxid: last, err: 0 }, &Body::Path(path));
            self.run_ready_reads(now, sid);
        }
    }

    pub(super) fn on_auth(&mut self, conn: ConnId, xid: i32, packet: AuthPacket) {
        let Some(c) = self.conns.get(conn) else { return };
        // addauth x509 re-checks the connection's certificate (Apache): it succeeds when the
        // connection has one (its ids are there since the TLS handshake) and fails otherwise.
        if packet.scheme == "x509" && c.auth.ids.iter().any(|i| i.scheme == "x509") {
            self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &Body::Empty);
            return;
        }
        let remote = c.remote.ip().to_canonical().to_string();
        match zk_tree::authenticate_conn(&packet.scheme, &packet.auth, self.db.config(), &remote) {
            Ok(entry) => {
                let Some(c) = self.conns.get_mut(conn) else { return };
                // Kept in insertion order; whoAmI lists them in Apache's set order.
                let mut added = Vec::with_capacity(2);
                if entry.is_super {
                    added.push(Id { scheme: "super".into(), id: String::new() });
                }
                added.push(entry.id);
                c.auth.is_super |= entry.is_super;
                for id in added {
                    if !c.auth.ids.contains(&id) {
                        c.auth.ids.push(id);
                    }
                }
                info!("auth success for scheme {} from {}", packet.scheme, c.remote);
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: 0 }, &Body::Empty);
            }
            Err(code) => {
                self.stats.auth_failed += 1;
                warn!("auth failed for scheme {}", packet.scheme);
                self.reply(conn, ReplyHeader { xid, zxid: 0, err: code.code() }, &Body::Empty);
                self.actions.push_back(Action::Close { conn });
            }
        }
    }

    pub(super) fn execute_read(&mut self, now: Now, r: PendingRead) {
        let PendingRead { conn, xid, op, body, received_us } = r;
        let Some(c) = self.conns.get(conn) else {
            self.actions.push_back(Action::ReleasePermit);
            return;
        };
        let auth = c.auth.clone();
        let sid = c.session.unwrap_or(0);
        let last = self.db.last_applied_zxid();
        if self.db.expiry().is_closing(sid) || !self.session_known(sid) {
            let err = ErrorCode::SessionExpired.code();
            self.reply(conn, ReplyHeader { xid, zxid: last, err }, &Body::Empty);
            return;
        }
        let req = match body {
            Ok(r) => r,
            Err(e) => {
                info!("session 0x{sid:x}: undecodable request (op {op}): {e}");
                let err = ErrorCode::MarshallingError.code();
                self.reply(conn, ReplyHeader { xid, zxid: last, err }, &Body::Empty);
                return;
            }
        };
        if let Request::Ping = req {
            self.reply(conn, ReplyHeader { xid: xid::PING, zxid: last, err: 0 }, &Body::Empty);
            return;
        }
        let answer = reads::read(&mut self.db, conn, sid, &auth, req);
        for ev in &answer.events {
            self.deliver_event(conn, ev, None);
        }
        let op_code = OpCode::from_i32(op).unwrap_or(OpCode::Error);
        let latency = Duration::from_micros(now.mono_us.saturating_sub(received_us));
        self.note_answered(conn, op_code, xid, last, latency, now);
        let (err, body) = match answer.result {
            Ok(b) => (0, b),
            Err(e) => (e.code(), Body::Empty),
        };
        self.reply(conn, ReplyHeader { xid, zxid: last, err }, &body);
    }

    /// Runs the reads of `sid` that no longer wait for a write.
    pub(super) fn run_ready_reads(&mut self, now: Now, sid: SessionId) {
        for r in self.queues.take_ready_reads(sid) {
            self.execute_read(now, r);
        }
    }

    pub(super) fn deliver_event(&mut self, watcher: WatcherId, event: &WatcherEvent, acl: Option<&[Acl]>) {
        let Some(c) = self.conns.get(watcher) else { return };
        if let Some(acl) = acl {
            if zk_tree::acl::check_acl(self.db.config(), acl, perms::READ, &c.auth).is_err() {
                return;
            }
        }
        write_frame(&mut self.buf, |b| {
            ReplyHeader { xid: xid::NOTIFICATION, zxid: -1, err: 0 }.write(b);
            event.write(b);
        });
        let frame = self.buf.split().freeze();
        self.stats.packets_sent += 1;
        self.actions.push_back(Action::Frame { conn: watcher, frame });
    }

    /// Queues a reply. One to a connection that is gone is dropped by the driver, which frees its
    /// permit then.
    /// Counts a request answered `latency` after it arrived, in the server's and its connection's
    /// figures, and logs it when it took `slowRequestThresholdMs` or more.
    pub(super) fn note_answered(
        &mut self,
        conn: ConnId,
        op: OpCode,
        cxid: i32,
        zxid: i64,
        latency: Duration,
        now: Now,
    ) {
        self.stats.record_latency(latency, op.is_write(), now.mono_ms());
        let Some(c) = self.conns.get(conn) else { return };
        c.stats.record(op, cxid, zxid, latency, now.wall_ms);
        if self.settings.slow_request.is_some_and(|t| latency >= t) {
            warn!(
                "slow request: {} ({:?}) from {} session 0x{:x} cxid 0x{cxid:x} zxid 0x{zxid:x} answered after {} ms",
                crate::stats::op_abbrev(op),
                op,
                c.remote,
                c.stats.session.load(std::sync::atomic::Ordering::Relaxed),
                latency.as_millis()
            );
        }
    }

    pub(super) fn reply(&mut self, conn: ConnId, hdr: ReplyHeader, body: &Body) {
        if hdr.err == ErrorCode::SessionMoved.code() {
            // The session lives on another server now: Apache answers nothing and closes this
            // connection (the client reconnects to where its session went).
            self.actions.push_back(Action::ReleasePermit);
            self.actions.push_back(Action::Close { conn });
            return;
        }
        write_frame(&mut self.buf, |b| {
            hdr.write(b);
            if hdr.err == 0 {
                body.encode(b);
            }
        });
        let frame = self.buf.split().freeze();
        self.stats.packets_sent += 1;
        self.actions.push_back(Action::Reply { conn, frame });
        if self.drain_until.is_some() {
            self.drain_answered.push(conn);
        }
    }
}
