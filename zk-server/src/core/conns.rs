//! The connection registry: what the core knows of each client connection (its session, its
//! identities, its counters) and which connection each session is on.

use crate::stats::ConnStats;
use hashbrown::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use zk_tree::{AuthIds, SessionId, WatcherId};

/// Connection id, unique for the server's lifetime; also the connection's watcher id.
pub type ConnId = WatcherId;

/// One connection as the core sees it.
#[derive(Debug)]
pub struct ConnState {
    /// Peer address (ip ACLs, `cons`).
    pub remote: SocketAddr,
    /// The session, once bound.
    pub session: Option<SessionId>,
    /// Identities: `ip:<addr>` plus whatever addauth added.
    pub auth: AuthIds,
    /// Whether the handshake carried the readOnly byte (the answer mirrors it).
    pub read_only_byte: bool,
    /// Counters the connection task keeps too.
    pub stats: Arc<ConnStats>,
    /// Negotiated session timeout.
    pub timeout_ms: i32,
    /// The connection's SASL exchange, from its first SASL token on.
    pub sasl: Option<SaslExchange>,
    /// When its last request (or its handshake) arrived, mono ms: a member stopping closes a
    /// connection once it has been quiet a moment (`core/drain.rs`).
    pub last_request_ms: u64,
}

impl ConnState {
    /// How many identities the connection holds (they only grow, by addauth or SASL): what a
    /// learner's queued write records ([`super::PendingWrite::auth_len`]).
    pub fn auth_len(&self) -> u32 {
        u32::try_from(self.auth.ids.len()).unwrap_or(u32::MAX)
    }
}

/// A connection's SASL exchange: the mechanism is the server's (DIGEST-MD5 with users in the
/// JAAS server section, GSSAPI with a Kerberos login there).
#[derive(Debug)]
pub enum SaslExchange {
    /// DIGEST-MD5 (RFC 2831).
    Digest(Box<zk_proto::digest_md5::ServerExchange>),
    /// GSSAPI (RFC 4752).
    Gssapi(Box<crate::kerberos::GssapiExchange>),
}

/// Every live connection, and the connection each session is bound to.
#[derive(Debug, Default)]
pub struct ConnRegistry {
    conns: HashMap<ConnId, ConnState>,
    by_session: HashMap<SessionId, ConnId>,
}

impl ConnRegistry {
    /// Registers a connection (not yet bound to a session).
    pub fn open(&mut self, conn: ConnId, state: ConnState) {
        self.conns.insert(conn, state);
    }

    /// The connection's state.
    pub fn get(&self, conn: ConnId) -> Option<&ConnState> {
        self.conns.get(&conn)
    }

    /// The connection's state, to change.
    pub fn get_mut(&mut self, conn: ConnId) -> Option<&mut ConnState> {
        self.conns.get_mut(&conn)
    }

    /// Whether the connection is registered.
    pub fn contains(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn)
    }

    /// Forgets the connection (and its session's binding, if the session is still on it).
    pub fn remove(&mut self, conn: ConnId) -> Option<ConnState> {
        let c = self.conns.remove(&conn)?;
        if let Some(sid) = c.session {
            if self.by_session.get(&sid) == Some(&conn) {
                self.by_session.remove(&sid);
            }
        }
        Some(c)
    }

    /// Binds `sid` to `conn`. Returns the connection the session was on before, if another: a
    /// client that reconnected; the caller closes the old one.
    pub fn bind(&mut self, conn: ConnId, sid: SessionId) -> Option<ConnId> {
        let old = self.by_session.insert(sid, conn).filter(|&old| old != conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(sid);
            c.stats.set_session(sid, c.timeout_ms);
        }
        old
    }

    /// The connection `sid` is bound to, if any.
    pub fn conn_of(&self, sid: SessionId) -> Option<ConnId> {
        self.by_session.get(&sid).copied()
    }

    /// Forgets the session's binding (it closed); returns the connection it was on.
    pub fn unbind_session(&mut self, sid: SessionId) -> Option<ConnId> {
        self.by_session.remove(&sid)
    }

    /// Every connection.
    pub fn iter(&self) -> impl Iterator<Item = (ConnId, &ConnState)> {
        self.conns.iter().map(|(id, c)| (*id, c))
    }

    /// Number of connections.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }
}
