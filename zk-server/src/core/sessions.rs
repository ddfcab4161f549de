//! Connections and sessions: handshakes (new sessions proposed, resumed ones checked), binding a
//! session to its connection, connections going away.

use super::*;

impl ServerCore {
    pub(super) fn on_connect(
        &mut self,
        now: Now,
        conn: ConnId,
        remote: SocketAddr,
        req: ConnectRequest,
        transport_ids: Vec<Id>,
        stats: Arc<ConnStats>,
    ) {
        let timeout_ms = self.settings.negotiate_timeout(req.time_out);
        if self.holds_handshakes() {
            let deadline_ms = now.mono_ms() + kept::third_of(timeout_ms);
            let h = kept::HeldHandshake { conn, remote, req, ids: transport_ids, stats, deadline_ms };
            return self.hold_handshake(h);
        }
        let mut ids = vec![Id { scheme: "ip".into(), id: remote.ip().to_canonical().to_string() }];
        let is_super = transport_ids.iter().any(|i| i.scheme == "super");
        ids.extend(transport_ids);
        let auth = AuthIds { ids, is_super };
        if !self.serves_clients() {
            // Not serving (electing or syncing, or a leader with leaderServes=no), and the
            // handshake not held (`kept.rs`): Apache closes the socket; the client tries the next
            // server of its list.
            debug!("refusing a connection from {remote}: not serving");
            self.actions.push_back(Action::Close { conn });
            return;
        }
        if self.role == Role::ReadOnly && req.read_only != Some(true) {
            info!(
                "refusing a session from {remote}: this server is read-only and the client did not allow it"
            );
            self.actions.push_back(Action::Close { conn });
            return;
        }
        self.conns.open(
            conn,
            ConnState {
                remote,
                session: None,
                auth,
                read_only_byte: req.read_only.is_some(),
                stats,
                timeout_ms,
                sasl: None,
                last_request_ms: now.mono_ms(),
                requests: 0,
                close_asked_ms: None,
            },
        );
        if req.last_zxid_seen > self.db.last_applied_zxid() {
            info!(
                "refusing session from {remote}: client has seen zxid 0x{:x}, ours is 0x{:x}",
                req.last_zxid_seen,
                self.db.last_applied_zxid()
            );
            self.actions.push_back(Action::Close { conn });
            return;
        }
        if req.session_id == 0 && self.role == Role::ReadOnly {
            // A session of this read-only term only: nothing to propose, nothing logged.
            let sid = self.next_session;
            self.next_session += 1;
            self.ro_sessions.insert(sid, timeout_ms);
            self.db.expiry_mut().track(sid, timeout_ms);
            self.serve_session(now, conn, sid, timeout_ms);
            info!("read-only session 0x{sid:x} for {remote}");
            return;
        }
        if req.session_id == 0 {
            let sid = self.next_session;
            self.next_session += 1;
            if let Role::Learner { .. } = self.role {
                // Sessions are global: the leader proposes the createSession; the answer goes out
                // when its commit is applied here.
                self.connecting.insert(sid, (conn, timeout_ms));
                let body = Bytes::copy_from_slice(&timeout_ms.to_be_bytes());
                let op = OpCode::CreateSession.code();
                self.actions.push_back(Action::Forward { session: sid, cxid: 0, op, body, auth: Vec::new() });
                return;
            }
            let Some(zxid) = self.next_zxid(now) else { return };
            let txn = self.db.prep_create_session(sid, timeout_ms);
            let hdr = TxnHeader {
                client_id: sid,
                cxid: 0,
                zxid,
                time: now.wall_ms,
                txn_type: OpCode::CreateSession.code(),
            };
            self.connecting.insert(sid, (conn, timeout_ms));
            self.propose(Proposal::new(hdr, txn, false));
            return;
        }
        let sid = req.session_id;
        if self.role == Role::ReadOnly && self.db.sessions().contains(sid) {
            // A session of the ensemble cannot be renewed here: nothing this server does for it
            // would reach the leader. Apache closes the socket; the client tries elsewhere.
            info!("refusing session 0x{sid:x} from {remote}: a global session, and this server is read-only");
            self.conns.remove(conn);
            self.actions.push_back(Action::Close { conn });
            return;
        }
        let valid = req.passwd.as_ref() == zk_tree::session_password(sid)
            && self.session_known(sid)
            && !self.db.expiry().is_closing(sid);
        if !valid {
            info!("refusing session 0x{sid:x} from {remote}: expired, closing or wrong password");
            self.send_connect_response(conn, 0, 0, Bytes::from_static(&[0; 16]));
            self.actions.push_back(Action::Close { conn });
            return;
        }
        match self.role {
            Role::Leader { .. } => {
                self.set_owner(sid, None);
            }
            Role::Learner { .. } => {
                // As Apache's followers: the handshake is answered once the leader has made this
                // server the session's owner, so that no write of the session through the
                // server it left can be taken after that.
                if let Some(old) = self.revalidating.insert(sid, conn) {
                    self.actions.push_back(Action::Close { conn: old });
                }
                self.actions.push_back(Action::Revalidate { session: sid, timeout_ms });
                return;
            }
            _ => {}
        }
        self.resume(now, conn, sid, timeout_ms);
    }

    /// Learner: the leader answered whether a resumed session may carry on here.
    pub(super) fn on_revalidated(&mut self, now: Now, sid: SessionId, valid: bool) {
        let Some(conn) = self.revalidating.remove(&sid) else { return };
        let Some(timeout_ms) = self.conns.get(conn).map(|c| c.timeout_ms) else { return };
        if valid {
            self.resume(now, conn, sid, timeout_ms);
        } else {
            info!("refusing session 0x{sid:x}: the leader does not know it");
            self.send_connect_response(conn, 0, 0, Bytes::from_static(&[0; 16]));
            self.actions.push_back(Action::Close { conn });
        }
    }

    /// Binds a resumed session to `conn` and answers its handshake.
    fn resume(&mut self, now: Now, conn: ConnId, sid: SessionId, timeout_ms: i32) {
        self.serve_session(now, conn, sid, timeout_ms);
        debug!("session 0x{sid:x} resumed on connection {conn}");
    }

    /// Binds a live session to `conn` and answers the handshake.
    fn serve_session(&mut self, now: Now, conn: ConnId, sid: SessionId, timeout_ms: i32) {
        self.db.expiry_mut().touch(sid, now.mono_ms());
        self.bind(conn, sid);
        let passwd = Bytes::copy_from_slice(&zk_tree::session_password(sid));
        self.send_connect_response(conn, timeout_ms, sid, passwd);
    }

    pub(super) fn bind(&mut self, conn: ConnId, sid: SessionId) {
        if let Some(old) = self.conns.bind(conn, sid) {
            debug!("session 0x{sid:x} moved to a new connection; closing the old one");
            self.db.remove_watcher(old);
            self.conns.remove(old);
            self.actions.push_back(Action::Close { conn: old });
        }
        self.actions.push_back(Action::SessionReady { conn });
    }

    pub(super) fn send_connect_response(&mut self, conn: ConnId, timeout_ms: i32, sid: i64, passwd: Bytes) {
        let Some(c) = self.conns.get(conn) else { return };
        let resp = ConnectResponse {
            protocol_version: 0,
            time_out: timeout_ms,
            session_id: sid,
            passwd,
            read_only: c.read_only_byte.then_some(self.role == Role::ReadOnly),
        };
        write_frame(&mut self.buf, |b| resp.write(b));
        let frame = self.buf.split().freeze();
        self.stats.packets_sent += 1;
        self.actions.push_back(Action::Frame { conn, frame });
    }

    pub(super) fn on_closed(&mut self, conn: ConnId) {
        self.forget_kept(conn);
        if self.conns.remove(conn).is_some() {
            self.db.remove_watcher(conn);
        }
    }
}
