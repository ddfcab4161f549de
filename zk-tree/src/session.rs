//! Sessions and their expiry, as Apache's SessionTrackerImpl and ExpiryQueue keep them: each
//! session sits in the bucket of its expiration time rounded up to the next tick boundary, and a
//! bucket expires as a whole once the clock reaches it. Time is always an argument.

use crate::java::JavaRandom;
use crate::SessionId;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Secret mixed into the session id to derive its password (Apache's `superSecret`).
const PASSWORD_SECRET: i64 = 0xB341_5C00;

/// The 16-byte password Apache gives a session: `new Random(id ^ 0xB3415C00).nextBytes(16)`.
/// Any server can recompute it, so it is never stored.
pub fn session_password(session: SessionId) -> [u8; 16] {
    let mut out = [0u8; 16];
    JavaRandom::new(session ^ PASSWORD_SECRET).next_bytes(&mut out);
    out
}

#[derive(Debug, Clone)]
struct SessionEntry {
    timeout_ms: i32,
    closing: bool,
    /// Bucket (expiry time, ms) it sits in, if any.
    bucket: Option<i64>,
}

/// Live sessions, their timeouts and expiry buckets.
#[derive(Debug, Clone)]
pub struct SessionTable {
    tick_ms: i64,
    sessions: HashMap<SessionId, SessionEntry>,
    buckets: BTreeMap<i64, BTreeSet<SessionId>>,
}

impl SessionTable {
    /// An empty table whose buckets are `tick_ms` wide (values below 1 are taken as 1).
    pub fn new(tick_ms: i64) -> Self {
        SessionTable { tick_ms: tick_ms.max(1), sessions: HashMap::new(), buckets: BTreeMap::new() }
    }

    /// The bucket width, ms.
    pub fn tick_ms(&self) -> i64 {
        self.tick_ms
    }

    /// `roundToNextInterval`: the next multiple of the tick strictly after `t`.
    fn round_up(&self, t: i64) -> i64 {
        (t.div_euclid(self.tick_ms)).saturating_add(1).saturating_mul(self.tick_ms)
    }

    /// Registers (or refreshes) a session with `timeout_ms`, expiring `timeout_ms` after `now_ms`.
    /// An existing session keeps its timeout, as Apache's trackSession does.
    pub fn add(&mut self, s: SessionId, timeout_ms: i32, now_ms: i64) {
        let e = self.sessions.entry(s).or_insert(SessionEntry { timeout_ms, closing: false, bucket: None });
        let t = e.timeout_ms;
        self.rebucket(s, t, now_ms);
    }

    fn rebucket(&mut self, s: SessionId, timeout_ms: i32, now_ms: i64) {
        let new = self.round_up(now_ms.saturating_add(timeout_ms as i64));
        let Some(e) = self.sessions.get_mut(&s) else { return };
        if e.bucket == Some(new) {
            return;
        }
        if let Some(old) = e.bucket.replace(new) {
            if let Some(b) = self.buckets.get_mut(&old) {
                b.remove(&s);
                if b.is_empty() {
                    self.buckets.remove(&old);
                }
            }
        }
        self.buckets.entry(new).or_default().insert(s);
    }

    /// Whether the session is known (closing ones included).
    pub fn contains(&self, s: SessionId) -> bool {
        self.sessions.contains_key(&s)
    }

    /// The session's timeout.
    pub fn timeout_ms(&self, s: SessionId) -> Option<i32> {
        self.sessions.get(&s).map(|e| e.timeout_ms)
    }

    /// Pushes the session's expiry to `now_ms + timeout`. False if unknown or closing.
    pub fn touch(&mut self, s: SessionId, now_ms: i64) -> bool {
        match self.sessions.get(&s) {
            Some(e) if !e.closing => {
                let t = e.timeout_ms;
                self.rebucket(s, t, now_ms);
                true
            }
            _ => false,
        }
    }

    /// Marks the session closing: it accepts no more requests and touches fail.
    pub fn set_closing(&mut self, s: SessionId) {
        if let Some(e) = self.sessions.get_mut(&s) {
            e.closing = true;
        }
    }

    /// Takes back [`Self::set_closing`] (its closeSession was refused): the session is live again
    /// and expires `expire_in_ms` after `now_ms`. False if unknown.
    pub fn reopen(&mut self, s: SessionId, expire_in_ms: i32, now_ms: i64) -> bool {
        let Some(e) = self.sessions.get_mut(&s) else { return false };
        e.closing = false;
        self.rebucket(s, expire_in_ms, now_ms);
        true
    }

    /// Whether the session is closing.
    pub fn is_closing(&self, s: SessionId) -> bool {
        self.sessions.get(&s).is_some_and(|e| e.closing)
    }

    /// Apache's checkSession: UNKNOWNSESSION if unknown, SESSIONEXPIRED if closing.
    pub fn check(&self, s: SessionId) -> Result<(), zk_proto::ErrorCode> {
        match self.sessions.get(&s) {
            None => Err(zk_proto::ErrorCode::UnknownSession),
            Some(e) if e.closing => Err(zk_proto::ErrorCode::SessionExpired),
            Some(_) => Ok(()),
        }
    }

    /// Sessions whose bucket time is at or before `now_ms`, each returned once (ascending by
    /// bucket, then id) and marked closing. They stay in the table until removed.
    pub fn expired(&mut self, now_ms: i64) -> Vec<SessionId> {
        let mut out = Vec::new();
        while let Some((&t, _)) = self.buckets.first_key_value() {
            if t > now_ms {
                break;
            }
            let ids = self.buckets.remove(&t).unwrap_or_default();
            for s in ids {
                if let Some(e) = self.sessions.get_mut(&s) {
                    e.bucket = None;
                    e.closing = true;
                    out.push(s);
                }
            }
        }
        out
    }

    /// The earliest bucket time still pending (for the server's timer).
    pub fn next_expiry(&self) -> Option<i64> {
        self.buckets.keys().next().copied()
    }

    /// Forgets the session.
    pub fn remove(&mut self, s: SessionId) {
        if let Some(e) = self.sessions.remove(&s) {
            if let Some(b) = e.bucket {
                if let Some(set) = self.buckets.get_mut(&b) {
                    set.remove(&s);
                    if set.is_empty() {
                        self.buckets.remove(&b);
                    }
                }
            }
        }
    }

    /// After a restart: every session is live again (none closing) and expires its timeout after
    /// `now_ms`, as Apache's session tracker starts the sessions it loads.
    pub fn restart_all(&mut self, now_ms: i64) {
        self.buckets.clear();
        let ids: Vec<(SessionId, i32)> = self.sessions.iter().map(|(s, e)| (*s, e.timeout_ms)).collect();
        for (s, t) in ids {
            if let Some(e) = self.sessions.get_mut(&s) {
                e.bucket = None;
                e.closing = false;
            }
            self.rebucket(s, t, now_ms);
        }
    }

    /// Every session with its timeout, ascending by id.
    pub fn iter(&self) -> impl Iterator<Item = (SessionId, i32)> + '_ {
        let mut v: Vec<(SessionId, i32)> = self.sessions.iter().map(|(s, e)| (*s, e.timeout_ms)).collect();
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
    fn expiry_rounds_up_to_next_tick() {
        let mut t = SessionTable::new(2000);
        t.add(1, 4000, 1000); // 5000 -> bucket 6000
        t.add(2, 4000, 2000); // 6000 is a boundary -> 8000
        assert_eq!(t.next_expiry(), Some(6000));
        assert!(t.expired(5999).is_empty());
        assert_eq!(t.expired(6000), vec![1]);
        assert!(t.is_closing(1));
        assert!(!t.touch(1, 6000));
        assert_eq!(t.expired(100_000), vec![2]);
        assert!(t.expired(200_000).is_empty());
        assert_eq!(t.len(), 2);
        t.remove(1);
        assert!(!t.contains(1));
    }

    #[test]
    fn touch_moves_bucket() {
        let mut t = SessionTable::new(1000);
        t.add(7, 3000, 0);
        assert!(t.touch(7, 2500)); // 5500 -> 6000
        assert!(t.expired(4000).is_empty());
        assert_eq!(t.expired(6000), vec![7]);
        assert!(!t.touch(99, 0));
        assert_eq!(t.check(99), Err(zk_proto::ErrorCode::UnknownSession));
        assert_eq!(t.check(7), Err(zk_proto::ErrorCode::SessionExpired));
    }

    #[test]
    fn add_keeps_existing_timeout() {
        let mut t = SessionTable::new(1000);
        t.add(1, 5000, 0);
        t.add(1, 9000, 0);
        assert_eq!(t.timeout_ms(1), Some(5000));
        assert_eq!(t.iter().collect::<Vec<_>>(), vec![(1, 5000)]);
    }
}
