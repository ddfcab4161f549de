//! Roles in an ensemble: switching between them, the leader's side of learners (forwarded
//! requests and syncs), and what a learner reports to its leader.

use super::*;

impl ServerCore {
    /// Changes the role. Leaving a leader's or learner's role for Down keeps the client
    /// connections with nothing in flight, holding their requests, and closes the others
    /// (`core/kept.rs`); the kept ones are served again when the server is a learner or
    /// leader again. Any other change closes every client connection, as Apache's servers do
    /// when their ensemble changes: clients reconnect and carry on with their sessions
    /// elsewhere. `db` replaces the database when given (a server
    /// reloads its state from disk before it leads or syncs); a new leader's proposer starts at
    /// its epoch's first zxid with `voters` counting ACKs, and every session gets a fresh
    /// timeout on this server's clock.
    pub fn set_role(&mut self, role: Role, voters: VoterSet, db: Option<Database>, now: Now) {
        let was = self.role;
        let contact = self.leader_contact_ms.take();
        let unproposed = self.unproposed.take();
        if role != was {
            info!("role: {:?} -> {role:?}", self.role);
            // A handover that went through: the requests its own clients sent meanwhile (never
            // proposed) go to the kept connections' held requests, to run once this server
            // serves again (`handover.rs`).
            let carried = if self.writes_held { self.take_held_for_kept() } else { Vec::new() };
            self.end_hold();
            let serving = matches!(was, Role::Leader { .. } | Role::Learner { .. });
            if role == Role::Down && serving && self.settings.keep_clients {
                self.keep_clients(now, contact, unproposed);
            } else if !(was == Role::Down && self.kept.is_some() && self.serves_kept(role)) {
                self.drop_kept();
                self.drop_clients();
            }
            self.carry_into_kept(carried);
            self.queue_desync.clear();
            // A read-only term's sessions end with it.
            for (sid, _) in self.ro_sessions.drain() {
                self.db.expiry_mut().remove(sid);
            }
        }
        if let Some(db) = db {
            // A snapshot under way reads from the database being replaced: its cursor is a
            // position in that tree, and stepping it over another would write a file that
            // silently lacks nodes (it would still check out, and become the newest snapshot).
            if let Some(s) = self.snapshots.as_mut() {
                if s.abandon() {
                    info!("the database is replaced: the snapshot under way is abandoned");
                    self.actions.push_back(Action::Snapshot(SnapJob::Abort));
                }
            }
            self.db = db;
            self.log_durable = self.db.last_applied_zxid();
            self.sync_digest = None;
        }
        let synced = matches!(role, Role::Learner { .. }) && self.role == Role::Down;
        self.role = role;
        self.role_generation = self.role_generation.wrapping_add(1);
        self.reset_reconfig();
        self.syncs_waiting.clear();
        self.syncs_forwarded.clear();
        self.sync_paths.clear();
        self.touched.clear();
        self.owners.clear();
        self.owner_moves.clear();
        match role {
            Role::Leader { epoch } => {
                // Counter 0 (or `testingonly.initialZxid`'s, for tests, as Apache's leader
                // takes it), unless the database is already past it in this epoch.
                let counter = self.settings.initial_zxid_counter;
                let start = Zxid { epoch, counter }.to_i64().max(self.db.last_applied_zxid());
                self.proposer = Proposer::new(start, voters, CounterRule::StopAtEpochEnd);
                self.db.start_leading(now.mono_ms());
            }
            Role::Standalone => {
                self.proposer = Proposer::new(self.db.last_applied_zxid(), voters, CounterRule::Wrap);
                self.db.start_leading(now.mono_ms());
            }
            Role::Down | Role::Learner { .. } => {
                self.proposer =
                    Proposer::new(self.db.last_applied_zxid(), voters, CounterRule::StopAtEpochEnd);
            }
            Role::ReadOnly => {
                self.proposer =
                    Proposer::new(self.db.last_applied_zxid(), voters, CounterRule::StopAtEpochEnd);
                // Only the sessions this role makes are tracked (and expire) here.
                self.db.expiry_mut().restart_all(std::iter::empty(), now.mono_ms());
            }
        }
        if synced {
            self.check_sync_digest(now);
        } else if role != Role::Down {
            self.sync_digest = None;
        }
        // The sync's digest check may have left the role again (and closed the clients).
        if was == Role::Down && self.role == role && self.serves_kept(role) {
            self.resume_kept(now);
        }
    }

    /// A learner is about to leave its role ([`Self::set_role`] to Down comes next): it last
    /// heard from its leader at `mono_ms`. A kept connection's third of its session's timeout
    /// counts from then, not from the moment the silence was noticed (syncLimit later): a
    /// leader that carries on without this server expires sessions on its own clock.
    pub fn note_leader_contact(&mut self, mono_ms: u64) {
        self.leader_contact_ms = Some(mono_ms);
    }

    /// Whether `role` serves the ensemble's sessions kept while down: a learner, or a leader
    /// that takes client connections.
    fn serves_kept(&self, role: Role) -> bool {
        match role {
            Role::Learner { .. } => true,
            Role::Leader { .. } => self.settings.leader_serves,
            Role::Standalone | Role::Down | Role::ReadOnly => false,
        }
    }

    /// Read-only: ends the sessions of its own whose time ran out (nothing to propose: no other
    /// server knows them).
    pub(super) fn expire_read_only_sessions(&mut self, now_ms: u64) {
        if self.db.expiry().next_expiry().is_none_or(|t| t > now_ms) {
            return;
        }
        for sid in self.db.expiry_mut().expired(now_ms) {
            if self.ro_sessions.contains_key(&sid) {
                info!("read-only session 0x{sid:x} expired");
                self.end_read_only_session(sid);
            } else {
                self.db.expiry_mut().remove(sid);
            }
        }
    }

    /// Read-only: forgets session `sid` and closes its connection.
    pub(super) fn end_read_only_session(&mut self, sid: SessionId) {
        self.ro_sessions.remove(&sid);
        self.db.expiry_mut().remove(sid);
        if let Some(conn) = self.conns.unbind_session(sid) {
            self.actions.push_back(Action::Close { conn });
        }
    }

    /// Whether client connections are taken: not while down, nor while leading with
    /// `leaderServes=no`, nor while a restore waits, a leader hands over or a member stopping
    /// moves its clients away.
    pub(super) fn serves_clients(&self) -> bool {
        if self.restore_pending() || self.writes_held || self.drain_until.is_some() {
            return false;
        }
        match self.role {
            Role::Down => false,
            Role::Leader { .. } => self.settings.leader_serves,
            Role::Standalone | Role::Learner { .. } | Role::ReadOnly => true,
        }
    }

    /// Whether `sid` is a session this server serves: a replicated one, or one of its read-only
    /// role.
    pub(super) fn session_known(&self, sid: SessionId) -> bool {
        self.db.sessions().contains(sid) || self.ro_sessions.contains_key(&sid)
    }

    /// Closes every client connection and forgets what they had queued (their permits freed).
    pub(super) fn drop_clients(&mut self) {
        // In id order, so that the actions are the same on every run.
        let mut conns: Vec<ConnId> = self.conns.iter().map(|(id, _)| id).collect();
        conns.sort_unstable();
        for conn in conns {
            self.close_client(conn);
        }
        self.forget_client_queues();
    }

    /// Closes client connection `conn`: its watches go, and the driver is told.
    pub(super) fn close_client(&mut self, conn: ConnId) {
        self.db.remove_watcher(conn);
        if self.conns.remove(conn).is_some() {
            self.actions.push_back(Action::Close { conn });
        }
    }

    /// Forgets every session's queued requests (their connections closed), freeing their
    /// permits (a write's place in its queue holds no permit beyond the request's own), and the
    /// handshakes waiting for the leader.
    pub(super) fn forget_client_queues(&mut self) {
        for _ in 0..self.queues.len() {
            self.actions.push_back(Action::ReleasePermit);
        }
        self.queues = SessionQueues::default();
        self.connecting.clear();
        self.revalidating.clear();
    }

    /// Learner: hands `f` each session with requests since the last call, with its timeout,
    /// for the leader (PING replies). No allocation: a follower calls it for every input.
    pub fn drain_touched(&mut self, mut f: impl FnMut(SessionId, i32)) {
        // Draining clears every control byte of the table, however few entries it holds: an
        // empty map (most calls) is left as it is.
        if self.touched.is_empty() {
            return;
        }
        for (session, timeout) in self.touched.drain() {
            f(session, timeout);
        }
    }

    /// Leader: a learner's client request. Preps and proposes it as the leader's own clients'
    /// requests are, in the order the learner sent them; the learner answers its client when it
    /// applies the commit. A sync is answered once everything proposed before it is committed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_forwarded(
        &mut self,
        now: Now,
        from: u64,
        session: SessionId,
        cxid: i32,
        op: i32,
        body: Result<Request, RequestError>,
        auth: Vec<Id>,
    ) {
        if !matches!(self.role, Role::Leader { .. }) {
            debug!("a forwarded request reached a server that does not lead; dropped");
            return;
        }
        tracing::trace!("learner conn {from} forwarded session 0x{session:x} cxid {cxid} op {op}");
        if op == OpCode::Sync.code() {
            let after = self.proposer.last_zxid().to_i64();
            if after <= self.proposer.committed() {
                self.actions.push_back(Action::SyncReady { to: from });
            } else {
                self.syncs_waiting.push_back((after, from));
            }
            return;
        }
        if !is_write_op(op) {
            debug!("learner {from} forwarded a read (op {op}); dropped");
            return;
        }
        let Some(zxid) = self.next_zxid(now) else { return };
        let opcode = OpCode::from_i32(op).unwrap_or(OpCode::Error);
        let ids = AuthIds { is_super: auth.iter().any(|id| id.scheme == "super"), ids: auth };
        let txn = match &body {
            // A closing session's write is still proposed, as an error, as Apache's leader does:
            // an Apache learner answers its forwarded writes strictly in order, at commit, and a
            // write that never commits would hold back every write it forwards after it.
            _ if self.db.expiry().is_closing(session) && opcode != OpCode::CloseSession => {
                Txn::Error(ErrorTxn { err: ErrorCode::SessionExpired.code() })
            }
            _ if opcode == OpCode::DeleteContainer => {
                Txn::Error(ErrorTxn { err: ErrorCode::BadArguments.code() })
            }
            _ if opcode != OpCode::CloseSession && !self.owned_by(session, Some(from)) => {
                Txn::Error(ErrorTxn { err: ErrorCode::SessionMoved.code() })
            }
            Ok(req) => {
                if opcode == OpCode::CloseSession {
                    self.db.expiry_mut().set_closing(session);
                }
                let ctx = RequestCtx { session, cxid, auth: &ids };
                self.prep_write(&ctx, req, zxid, now)
            }
            Err(e) => {
                info!("session 0x{session:x}: undecodable forwarded {opcode:?} request: {e}");
                Txn::Error(ErrorTxn { err: ErrorCode::MarshallingError.code() })
            }
        };
        let txn_type = zk_tree::txn_type(opcode, &txn).code();
        let hdr = TxnHeader { client_id: session, cxid, zxid, time: now.wall_ms, txn_type };
        // Nobody here waits for it: the learner that forwarded it answers.
        self.propose(Proposal::new(hdr, txn, true));
    }

    /// Leader: whether a write of `session` arriving from `from` (`None`: this server's own
    /// client) comes from the server the session is connected to. A session with no known owner
    /// (new, or from before this leader) gets `from` as its owner. closeSession is never checked,
    /// as in Apache (whose expiry closes sessions wherever they are).
    pub(super) fn owned_by(&mut self, session: SessionId, from: Option<u64>) -> bool {
        if !matches!(self.role, Role::Leader { .. }) {
            return true;
        }
        *self.owners.entry(session).or_insert(from) == from
    }

    /// Leader: a learner's client asked for a new session (its id carries the learner's server
    /// id). Proposed like the leader's own; the learner answers the client at commit.
    pub(super) fn on_forwarded_create_session(
        &mut self,
        now: Now,
        session: SessionId,
        cxid: i32,
        timeout_ms: i32,
    ) {
        if !matches!(self.role, Role::Leader { .. }) {
            debug!("a forwarded createSession reached a server that does not lead; dropped");
            return;
        }
        let Some(zxid) = self.next_zxid(now) else { return };
        let (txn, txn_type) = if self.db.sessions().contains(session) {
            // A createSession sent by a client after its handshake (its session exists): as the
            // leader's own clients' is, a write whose body does not decode (Apache logs it as a
            // failed write); the learner answers it in its session's order.
            (Txn::Error(ErrorTxn { err: ErrorCode::MarshallingError.code() }), OpCode::Error)
        } else {
            (self.db.prep_create_session(session, timeout_ms), OpCode::CreateSession)
        };
        let hdr = TxnHeader { client_id: session, cxid, zxid, time: now.wall_ms, txn_type: txn_type.code() };
        self.propose(Proposal::new(hdr, txn, true));
    }
}
