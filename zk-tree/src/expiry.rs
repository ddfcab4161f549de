//! Session expiry, as Apache's leader tracks it (SessionTrackerImpl and ExpiryQueue): each live
//! session sits in the bucket of its expiry time rounded up to the next tick boundary, and a
//! bucket expires as a whole once the clock reaches it.
//!
//! This is leader-only state, on the leader's monotonic clock: touches (requests and pings, the
//! follower's forwarded through the leader) are its input, and nothing here is replicated or
//! written to a snapshot. A wall-clock step therefore never expires every session at once, and a
//! server never buckets sessions by another machine's clock. A server that starts leading (or a
//! standalone server that starts) gives every replicated session a fresh timeout
//! ([`SessionExpiry::restart_all`]), as Apache's session tracker does.
//!
//! Times are milliseconds on any monotonic clock the caller chooses (`now_ms`), never read here.

use crate::SessionId;
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, Clone)]
struct Entry {
    timeout_ms: i32,
    closing: bool,
    /// Bucket (expiry time, ms) it sits in; None until first touched.
    bucket: Option<u64>,
}

/// Live sessions' expiry buckets and closing flags (the leader's).
#[derive(Debug, Clone)]
pub struct SessionExpiry {
    tick_ms: u64,
    sessions: HashMap<SessionId, Entry>,
    buckets: BTreeMap<u64, BTreeSet<SessionId>>,
}

impl SessionExpiry {
    /// No sessions; buckets `tick_ms` wide (values below 1 are taken as 1).
    pub fn new(tick_ms: u64) -> Self {
        SessionExpiry { tick_ms: tick_ms.max(1), sessions: HashMap::new(), buckets: BTreeMap::new() }
    }

    /// The bucket width, ms.
    pub fn tick_ms(&self) -> u64 {
        self.tick_ms
    }

    /// `roundToNextInterval`: the next multiple of the tick strictly after `t`.
    fn round_up(&self, t: u64) -> u64 {
        (t / self.tick_ms).saturating_add(1).saturating_mul(self.tick_ms)
    }

    /// Tracks a session with `timeout_ms`, not yet in any bucket: it expires only once touched.
    /// The caller touches it when the session's creation commits. An existing session keeps its
    /// timeout and bucket.
    pub fn track(&mut self, s: SessionId, timeout_ms: i32) {
        self.sessions.entry(s).or_insert(Entry { timeout_ms, closing: false, bucket: None });
    }

    fn rebucket(&mut self, s: SessionId, expire_in_ms: i32, now_ms: u64) {
        let new = self.round_up(now_ms.saturating_add(expire_in_ms.max(0) as u64));
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

    /// Whether the session is tracked (closing ones included).
    pub fn contains(&self, s: SessionId) -> bool {
        self.sessions.contains_key(&s)
    }

    /// Pushes the session's expiry to `now_ms + timeout`. False if unknown or closing.
    pub fn touch(&mut self, s: SessionId, now_ms: u64) -> bool {
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
    pub fn reopen(&mut self, s: SessionId, expire_in_ms: i32, now_ms: u64) -> bool {
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
    /// bucket, then id) and marked closing. They stay tracked until removed.
    pub fn expired(&mut self, now_ms: u64) -> Vec<SessionId> {
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
    pub fn next_expiry(&self) -> Option<u64> {
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

    /// Starts tracking exactly `sessions` (the replicated set), every one live and expiring its
    /// timeout after `now_ms`: what a server does when it starts, or starts leading.
    pub fn restart_all(&mut self, sessions: impl Iterator<Item = (SessionId, i32)>, now_ms: u64) {
        self.sessions.clear();
        self.buckets.clear();
        for (s, t) in sessions {
            self.track(s, t);
            self.rebucket(s, t, now_ms);
        }
    }

    /// Number of sessions tracked.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is tracked.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_rounds_up_to_next_tick() {
        let mut t = SessionExpiry::new(2000);
        t.track(1, 4000);
        t.track(2, 4000);
        assert_eq!(t.next_expiry(), None, "untouched sessions sit in no bucket");
        t.touch(1, 1000); // 5000 -> bucket 6000
        t.touch(2, 2000); // 6000 is a boundary -> 8000
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
        let mut t = SessionExpiry::new(1000);
        t.track(7, 3000);
        t.touch(7, 0);
        assert!(t.touch(7, 2500)); // 5500 -> 6000
        assert!(t.expired(4000).is_empty());
        assert_eq!(t.expired(6000), vec![7]);
        assert!(!t.touch(99, 0));
        assert_eq!(t.check(99), Err(zk_proto::ErrorCode::UnknownSession));
        assert_eq!(t.check(7), Err(zk_proto::ErrorCode::SessionExpired));
    }

    #[test]
    fn reopened_session_is_live_and_expires_again() {
        let mut t = SessionExpiry::new(1000);
        t.track(1, 5000);
        t.set_closing(1);
        assert!(t.is_closing(1));
        assert!(t.reopen(1, 5000, 100));
        assert!(!t.is_closing(1));
        assert!(t.expired(1000).is_empty());
        assert_eq!(t.expired(8000), vec![1]);
        assert!(!t.reopen(0xdead, 5000, 100), "unknown session");
    }

    #[test]
    fn restart_gives_every_session_a_fresh_timeout() {
        let mut t = SessionExpiry::new(1000);
        t.track(9, 1000);
        t.set_closing(9);
        t.restart_all([(1, 4000), (2, 10_000)].into_iter(), 50_000);
        assert!(!t.contains(9), "only the replicated set is tracked");
        assert!(!t.is_closing(1));
        assert!(t.expired(54_000).is_empty());
        assert_eq!(t.expired(55_000), vec![1]);
        assert_eq!(t.expired(61_000), vec![2]);
    }
}
