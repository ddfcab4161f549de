//! Per-session request queues: FIFO order per session across writes and reads.
//!
//! A session's write waits for its commit, and every later request of the session waits behind
//! it, reads included (ZooKeeper's FIFO client order). Writes are keyed by (session, cxid), not
//! by zxid: a request forwarded to a leader has no zxid until the leader proposes it, and the
//! commit that comes back is matched by the session and cxid its header carries, as Apache's
//! commit processor matches them.
//!
//! Bounded: every queued request holds one permit of the global outstanding-request limit
//! (taken by the connection reader before the request reaches the core).

use super::conns::ConnId;
use bytes::Bytes;
use hashbrown::HashMap;
use std::collections::VecDeque;
use zk_proto::{OpCode, Request, RequestError};
use zk_tree::SessionId;

/// A write waiting for its commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWrite {
    /// The connection to answer.
    pub conn: ConnId,
    /// The request's xid (the txn header's cxid).
    pub cxid: i32,
    /// Its opcode: the reply's shape depends on it.
    pub op: OpCode,
    /// When it was received, µs on the driver's monotonic clock.
    pub received_us: u64,
    /// A learner's forwarded request: its body as the client sent it, to forward it again to
    /// the next leader if its leader hands over without proposing it. Empty on a leader.
    pub raw: Bytes,
    /// A learner's forwarded request: how many identities its connection had when it was sent
    /// (they only grow, by addauth or SASL): one added since means it cannot be sent again as it
    /// was.
    pub auth_len: u32,
}

impl PendingWrite {
    /// A write of this server's own client (proposed here, never forwarded again).
    pub fn own(conn: ConnId, cxid: i32, op: OpCode, received_us: u64) -> PendingWrite {
        PendingWrite { conn, cxid, op, received_us, raw: Bytes::new(), auth_len: 0 }
    }
}

/// A read waiting for an earlier write of its session.
#[derive(Debug)]
pub struct PendingRead {
    /// The connection to answer.
    pub conn: ConnId,
    /// Its xid.
    pub xid: i32,
    /// Its opcode as sent.
    pub op: i32,
    /// The decoded body, or why it did not decode.
    pub body: Result<Request, RequestError>,
    /// When it was received, µs on the driver's monotonic clock.
    pub received_us: u64,
}

/// A request queued in a session.
#[derive(Debug)]
pub enum Pending {
    /// A write waiting for its commit.
    Write(PendingWrite),
    /// A read waiting for an earlier write.
    Read(PendingRead),
}

/// The queues of every session with a request in flight.
#[derive(Debug, Default)]
pub struct SessionQueues {
    queues: HashMap<SessionId, VecDeque<Pending>>,
}

impl SessionQueues {
    /// Whether nothing of the session is waiting (a read can run at once).
    pub fn is_idle(&self, sid: SessionId) -> bool {
        !self.queues.contains_key(&sid)
    }

    /// Queues a write of the session.
    pub fn push_write(&mut self, sid: SessionId, w: PendingWrite) {
        self.queues.entry(sid).or_default().push_back(Pending::Write(w));
    }

    /// Queues a read behind the session's earlier requests.
    pub fn push_read(&mut self, sid: SessionId, r: PendingRead) {
        self.queues.entry(sid).or_default().push_back(Pending::Read(r));
    }

    /// The commit of (`sid`, `cxid`) arrived: takes the write it answers, if it is the one at
    /// the head of the session's queue. A commit matching nothing (another server's client, or
    /// a txn the server issued itself) returns None.
    pub fn complete_write(&mut self, sid: SessionId, cxid: i32) -> Option<PendingWrite> {
        let q = self.queues.get_mut(&sid)?;
        match q.front() {
            Some(Pending::Write(w)) if w.cxid == cxid => match q.pop_front() {
                Some(Pending::Write(w)) => Some(w),
                _ => None,
            },
            _ => None,
        }
    }

    /// Takes the reads at the head of the session's queue, up to its next write: they can run
    /// now. Forgets the session's queue once it is empty.
    pub fn take_ready_reads(&mut self, sid: SessionId) -> Vec<PendingRead> {
        let Some(q) = self.queues.get_mut(&sid) else { return Vec::new() };
        let mut out = Vec::new();
        while matches!(q.front(), Some(Pending::Read(_))) {
            if let Some(Pending::Read(r)) = q.pop_front() {
                out.push(r);
            }
        }
        if q.is_empty() {
            self.queues.remove(&sid);
        }
        out
    }

    /// Drops the session's queue (it closed): returns the reads that were waiting, in order;
    /// its waiting writes will never be answered.
    pub fn remove_session(&mut self, sid: SessionId) -> Vec<PendingRead> {
        let Some(q) = self.queues.remove(&sid) else { return Vec::new() };
        q.into_iter()
            .filter_map(|p| match p {
                Pending::Read(r) => Some(r),
                Pending::Write(_) => None,
            })
            .collect()
    }

    /// Takes the session's whole queue, in order (a leader's handover hands its clients'
    /// held requests over to the kept connections).
    pub fn take_session(&mut self, sid: SessionId) -> Vec<Pending> {
        self.queues.remove(&sid).map_or_else(Vec::new, Vec::from)
    }

    /// Whether every write queued for the session was sent while its connection had `auth_len`
    /// identities.
    pub fn writes_sent_with(&self, sid: SessionId, auth_len: u32) -> bool {
        self.queues.get(&sid).is_none_or(|q| {
            q.iter().all(|p| match p {
                Pending::Write(w) => w.auth_len == auth_len,
                Pending::Read(_) => true,
            })
        })
    }

    /// Puts back a queue [`Self::take_session`] took.
    pub fn put_session(&mut self, sid: SessionId, q: Vec<Pending>) {
        if !q.is_empty() {
            self.queues.insert(sid, q.into());
        }
    }

    /// Requests queued across all sessions.
    pub fn len(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }

    /// Whether no session has anything queued.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(cxid: i32) -> PendingWrite {
        PendingWrite::own(1, cxid, OpCode::SetData, 0)
    }
    fn r(xid: i32) -> PendingRead {
        PendingRead { conn: 1, xid, op: OpCode::GetData.code(), body: Ok(Request::Ping), received_us: 0 }
    }

    #[test]
    fn reads_wait_for_the_write_before_them() {
        let mut q = SessionQueues::default();
        assert!(q.is_idle(7));
        q.push_write(7, w(1));
        q.push_read(7, r(2));
        q.push_write(7, w(3));
        q.push_read(7, r(4));
        assert!(q.take_ready_reads(7).is_empty(), "a write is at the head");
        assert_eq!(q.complete_write(7, 3), None, "commits match the head only");
        assert_eq!(q.complete_write(8, 1), None, "another session's commit");
        assert_eq!(q.complete_write(7, 1), Some(w(1)));
        assert_eq!(q.take_ready_reads(7).iter().map(|r| r.xid).collect::<Vec<_>>(), [2]);
        assert_eq!(q.complete_write(7, 3), Some(w(3)));
        assert_eq!(q.take_ready_reads(7).iter().map(|r| r.xid).collect::<Vec<_>>(), [4]);
        assert!(q.is_idle(7) && q.is_empty());
    }

    #[test]
    fn a_closed_session_hands_back_its_reads() {
        let mut q = SessionQueues::default();
        q.push_write(7, w(1));
        q.push_read(7, r(2));
        q.push_read(7, r(3));
        assert_eq!(q.len(), 3);
        assert_eq!(q.remove_session(7).iter().map(|r| r.xid).collect::<Vec<_>>(), [2, 3]);
        assert!(q.is_idle(7));
    }
}
