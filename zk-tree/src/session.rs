//! The replicated session set: which sessions exist and their negotiated timeouts. Every server
//! holds the same set once it has applied the same createSession and closeSession txns; it is
//! what a snapshot records. When a session expires is not replicated state: the leader decides it
//! on its own monotonic clock ([`crate::expiry::SessionExpiry`]).

use crate::java::JavaRandom;
use crate::SessionId;
use std::collections::HashMap;

/// Secret mixed into the session id to derive its password (Apache's `superSecret`).
const PASSWORD_SECRET: i64 = 0xB341_5C00;

/// The 16-byte password Apache gives a session: `new Random(id ^ 0xB3415C00).nextBytes(16)`.
/// Any server can recompute it, so it is never stored.
pub fn session_password(session: SessionId) -> [u8; 16] {
    let mut out = [0u8; 16];
    JavaRandom::new(session ^ PASSWORD_SECRET).next_bytes(&mut out);
    out
}

/// The first session id a server hands out, as Apache lays ids out: the server id in the top
/// byte, then the low 40 bits of the wall clock in milliseconds at start, then a 16-bit counter
/// (the caller adds to it). Ids thus differ across servers and across restarts of one server.
pub fn first_session_id(server_id: u8, wall_ms: i64) -> SessionId {
    let time_part = ((wall_ms << 24) as u64 >> 8) as i64;
    time_part | (i64::from(server_id) << 56)
}

/// Live sessions and their timeouts (the replicated part of Apache's session tracking).
#[derive(Debug, Clone, Default)]
pub struct SessionTable {
    sessions: HashMap<SessionId, i32>,
}

impl SessionTable {
    /// An empty table.
    pub fn new() -> Self {
        SessionTable::default()
    }

    /// Registers a session with `timeout_ms`. An existing session keeps its timeout, as
    /// Apache's trackSession does.
    pub fn add(&mut self, s: SessionId, timeout_ms: i32) {
        self.sessions.entry(s).or_insert(timeout_ms);
    }

    /// Whether the session exists.
    pub fn contains(&self, s: SessionId) -> bool {
        self.sessions.contains_key(&s)
    }

    /// The session's timeout.
    pub fn timeout_ms(&self, s: SessionId) -> Option<i32> {
        self.sessions.get(&s).copied()
    }

    /// Forgets the session.
    pub fn remove(&mut self, s: SessionId) {
        self.sessions.remove(&s);
    }

    /// Every session with its timeout, ascending by id.
    pub fn iter(&self) -> impl Iterator<Item = (SessionId, i32)> + '_ {
        let mut v: Vec<(SessionId, i32)> = self.sessions.iter().map(|(s, t)| (*s, *t)).collect();
        v.sort_unstable();
        v.into_iter()
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are no sessions.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_matches_java_random() {
        // Bytes printed by `new java.util.Random(id ^ 0xB3415C00L).nextBytes(new byte[16])`.
        assert_eq!(
            session_password(0x0100_0000_0000_0001),
            [5, 76, 199, 74, 55, 50, 125, 178, 21, 231, 2, 226, 12, 115, 240, 5]
        );
        assert_eq!(
            session_password(0),
            [242, 42, 205, 74, 151, 230, 157, 109, 32, 164, 155, 182, 56, 234, 219, 56]
        );
        assert_eq!(
            session_password(-1),
            [32, 246, 44, 181, 100, 141, 194, 215, 113, 71, 28, 138, 36, 134, 169, 238]
        );
        assert_eq!(
            session_password(0x1234_5678_90ab_cdef),
            [247, 114, 27, 56, 63, 213, 131, 186, 116, 210, 32, 237, 227, 159, 123, 67]
        );
    }

    #[test]
    fn add_keeps_existing_timeout() {
        let mut t = SessionTable::new();
        t.add(1, 5000);
        t.add(1, 9000);
        assert_eq!(t.timeout_ms(1), Some(5000));
        assert_eq!(t.iter().collect::<Vec<_>>(), vec![(1, 5000)]);
        t.remove(1);
        assert!(!t.contains(1));
        assert!(t.is_empty());
    }

    #[test]
    fn session_ids_carry_the_server_id() {
        // 2026-11-24T00:00:00Z in ms; server 3.
        let id = first_session_id(3, 1_795_478_400_000);
        assert_eq!(id >> 56, 3);
        assert_eq!(id & 0xffff, 0, "the low 16 bits count sessions");
        assert_eq!((id >> 16) & 0xff_ffff_ffff, 1_795_478_400_000 & 0xff_ffff_ffff);
        assert_eq!(first_session_id(0, 1_795_478_400_000) >> 56, 0, "standalone: server id 0");
        assert_ne!(first_session_id(1, 1000), first_session_id(2, 1000));
    }
}
