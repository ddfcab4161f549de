//! Simulated clients: each keeps a session and runs one operation at a time through a random
//! serving server: create, conditional setData, getData, sync + getData on a few keys (the
//! linearizability histories), plus ephemeral and sequential creates and session closes. A
//! learner forwards writes and syncs to its leader, as zk-server does; the answer comes from the
//! server the client talks to, when that server commits the transaction (or its sync returns).
//! An operation whose server crashes or changes role, or that takes too long, ends unknown.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use rand::Rng;
use zk_proto::{Acl, CreateRequest, Id, Jute, OpCode, SetDataRequest};
use zk_quorum::wire::ForwardedRequest;

use super::linear::{self, Event, Op as LinOp, Ret};
use super::{Server, Sim, Stats, Store, R};

/// Keys whose histories are checked for linearizability.
const KEYS: usize = 3;
/// Operations recorded per key, to keep every check fast.
const OPS_PER_KEY_MAX: usize = 40;
/// A client gives up on an operation after this long (its outcome is then unknown).
const OP_TIMEOUT_MS: u64 = 2_000;
/// Session timeout the clients ask for.
const SESSION_TIMEOUT_MS: i32 = 4_000;

/// A server's answer, as the simulation reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A create succeeded.
    Created,
    /// A setData succeeded: the new version.
    Set(i32),
    /// getData: the value (parsed from the data) and version.
    Data(u64, i32),
    /// A session was created or closed.
    Session,
    /// An error code.
    Error(i32),
}

/// The answer a committed transaction carries for the client that sent it.
#[derive(Debug, Clone)]
pub struct Done {
    /// The session that sent it.
    pub session: i64,
    /// Its xid.
    pub cxid: i32,
    /// The answer.
    pub reply: Reply,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    CreateSession(i64),
    CloseSession,
    Create(usize, u64),
    Set(usize, u64, i32),
    Get(usize),
    SyncGet(usize),
    Ephemeral(u32),
    Sequential,
}

#[derive(Debug)]
struct Pending {
    server: i64,
    op: Op,
    session: i64,
    cxid: i32,
    invoked: u64,
    /// Index of its event in the key's history.
    event: Option<(usize, usize)>,
}

#[derive(Debug, Default)]
struct Client {
    session: Option<i64>,
    next_cxid: i32,
    pending: Option<Pending>,
    idle_until: u64,
    versions: [i32; KEYS],
    ephemerals: u32,
}

/// Every client, their histories, and the writes acknowledged to them.
#[derive(Debug, Default)]
pub struct Clients {
    list: Vec<Client>,
    histories: Vec<Vec<Event>>,
    acked: Vec<(i64, Bytes)>,
    next_value: u64,
    /// Session ids each server hands out next (from its wall clock when it started).
    next_session: BTreeMap<i64, i64>,
    /// The simulated time, updated every step.
    now_hint: u64,
}

/// The path of checked key `k`.
pub fn key_path(k: usize) -> String {
    format!("/k{k}")
}

pub fn open_acl() -> Vec<Acl> {
    vec![Acl { perms: zk_proto::perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

fn create_req(session: i64, cxid: i32, path: String, data: Bytes, flags: i32) -> ForwardedRequest {
    let mut b = BytesMut::new();
    CreateRequest { path, data: Some(data), acl: open_acl(), flags }.write(&mut b);
    ForwardedRequest { session_id: session, cxid, op: OpCode::Create.code(), body: b.freeze() }
}

/// The background write of leader `sid` (its `n`th): a create of a node of its own.
pub fn background_write(sid: i64, n: u32) -> ForwardedRequest {
    create_req(0, n as i32, format!("/b{sid}.{n}"), Bytes::from(format!("b{n}")), 0)
}

impl Clients {
    /// `n` clients without sessions.
    pub fn new(n: usize) -> Clients {
        Clients {
            list: (0..n).map(|_| Client::default()).collect(),
            histories: vec![Vec::new(); KEYS],
            ..Clients::default()
        }
    }

    /// No operation in flight.
    pub fn idle(&self) -> bool {
        self.list.iter().all(|c| c.pending.is_none())
    }

    fn finish(&mut self, c: usize, done: Option<(u64, Reply)>, stats: &mut Stats) {
        let Some(p) = self.list[c].pending.take() else { return };
        let client = &mut self.list[c];
        match &done {
            None => {
                stats.client_unknown += 1;
                if matches!(p.op, Op::CreateSession(_) | Op::CloseSession) {
                    client.session = None;
                }
            }
            Some((_, reply)) => {
                match (p.op, reply) {
                    (Op::CreateSession(id), Reply::Session) => client.session = Some(id),
                    (Op::CloseSession, _) => client.session = None,
                    (Op::Set(k, ..), Reply::Set(v)) | (Op::Get(k) | Op::SyncGet(k), Reply::Data(_, v)) => {
                        client.versions[k] = *v
                    }
                    (Op::Create(k, _), Reply::Created) => client.versions[k] = 0,
                    _ => {}
                }
                if matches!(p.op, Op::Get(_) | Op::SyncGet(_)) {
                    stats.client_reads += 1;
                }
            }
        }
        let Some((k, i)) = p.event else { return };
        match done {
            Some((at, reply)) => {
                let ret = match reply {
                    Reply::Created => Ret::Created,
                    Reply::Set(v) => Ret::Set(v),
                    Reply::Data(x, v) => Ret::Value(x, v),
                    Reply::Error(e) if e == zk_proto::ErrorCode::NoNode.code() => Ret::NoNode,
                    Reply::Error(e) if e == zk_proto::ErrorCode::NodeExists.code() => Ret::Exists,
                    Reply::Error(e) if e == zk_proto::ErrorCode::BadVersion.code() => Ret::BadVersion,
                    // Anything else would be a bug in this driver: keep it visible.
                    other => panic!("unexpected answer {other:?} to {:?}", p.op),
                };
                self.histories[k][i].done = Some((at, ret));
            }
            // A read that did not return had no effect: it leaves the history.
            None if matches!(p.op, Op::SyncGet(_)) => {
                self.histories[k][i].op = LinOp::Get;
                self.histories[k][i].call = u64::MAX;
            }
            None => {}
        }
    }

    /// `sid` crashed or changed role: what its clients wait for is unknown now.
    pub fn server_lost(&mut self, sid: i64, stats: &mut Stats) {
        for c in 0..self.list.len() {
            if self.list[c].pending.as_ref().is_some_and(|p| p.server == sid) {
                self.finish(c, None, stats);
            }
        }
    }

    /// `sid` committed the transaction at `zxid` carrying `done`: the client waiting for it there
    /// gets its answer.
    pub fn completed(&mut self, sid: i64, zxid: i64, payload: &Bytes, done: Done, stats: &mut Stats) {
        let Some(c) = self.list.iter().position(|c| {
            c.pending
                .as_ref()
                .is_some_and(|p| p.server == sid && p.session == done.session && p.cxid == done.cxid)
        }) else {
            return;
        };
        stats.client_acked += 1;
        self.acked.push((zxid, payload.clone()));
        self.finish_now(c, done.reply, stats);
    }

    fn finish_now(&mut self, c: usize, reply: Reply, stats: &mut Stats) {
        let at = self.now_hint;
        self.finish(c, Some((at, reply)), stats);
    }

    /// A learner's sync returned: its oldest client waiting for one reads.
    pub(super) fn sync_done<S: Store>(
        &mut self,
        sid: i64,
        servers: &mut BTreeMap<i64, Server<S>>,
        stats: &mut Stats,
    ) {
        // Syncs are answered in the order they were sent (FIFO on the learner's connection).
        let Some(c) = (0..self.list.len())
            .filter(|&c| {
                self.list[c]
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.server == sid && matches!(p.op, Op::SyncGet(_)))
            })
            .min_by_key(|&c| self.list[c].pending.as_ref().map_or(u64::MAX, |p| p.invoked))
        else {
            return;
        };
        let Some(Op::SyncGet(k)) = self.list[c].pending.as_ref().map(|p| p.op) else { return };
        if let Some(reply) = servers.get_mut(&sid).and_then(|s| s.store.read(&key_path(k))) {
            self.finish_now(c, reply, stats);
        }
    }
}

impl<S: Store> Sim<S> {
    /// Clients time out, and (while faults run) start new operations.
    pub(super) fn drive_clients(&mut self, issue: bool) -> R {
        let now = self.now;
        self.clients.now_hint = now;
        for c in 0..self.clients.list.len() {
            if self.clients.list[c].pending.as_ref().is_some_and(|p| p.invoked + OP_TIMEOUT_MS <= now) {
                self.clients.finish(c, None, &mut self.stats);
                self.clients.list[c].idle_until = now + 100;
            }
            let client = &self.clients.list[c];
            if !issue || client.pending.is_some() || client.idle_until > now {
                continue;
            }
            let serving: Vec<i64> = self.servers.values().filter(|s| s.serving()).map(|s| s.sid).collect();
            if serving.is_empty() {
                continue;
            }
            let sid = serving[self.rng.gen_range(0..serving.len())];
            self.issue(c, sid)?;
        }
        Ok(())
    }

    fn issue(&mut self, c: usize, sid: i64) -> R {
        let now = self.now;
        self.clients.list[c].idle_until = now + self.rng.gen_range(20..200);
        let key = self.rng.gen_range(0..KEYS);
        let op = match self.clients.list[c].session {
            None => {
                let wall = self.wall_ms(sid);
                let next = self
                    .clients
                    .next_session
                    .entry(sid)
                    .or_insert_with(|| zk_tree::first_session_id(sid as u8, wall));
                let id = *next;
                *next += 1;
                Op::CreateSession(id)
            }
            Some(_) => {
                self.clients.next_value += 1;
                let v = self.clients.next_value;
                match self.rng.gen_range(0..100) {
                    0..=24 => {
                        let known = self.clients.list[c].versions[key];
                        let expected = if self.rng.gen_bool(0.1) { -1 } else { known };
                        Op::Set(key, v, expected)
                    }
                    25..=44 => Op::Create(key, v),
                    45..=69 => Op::SyncGet(key),
                    70..=84 => Op::Get(key),
                    85..=91 => {
                        self.clients.list[c].ephemerals += 1;
                        Op::Ephemeral(self.clients.list[c].ephemerals)
                    }
                    92..=96 => Op::Sequential,
                    _ => Op::CloseSession,
                }
            }
        };
        let session = match op {
            Op::CreateSession(id) => id,
            _ => self.clients.list[c].session.unwrap_or(0),
        };
        let client = &mut self.clients.list[c];
        client.next_cxid += 1;
        let cxid = client.next_cxid;
        let lin = match op {
            Op::Create(k, v) => Some((k, LinOp::Create(v))),
            Op::Set(k, v, e) => Some((k, LinOp::Set(v, e))),
            Op::SyncGet(k) => Some((k, LinOp::Get)),
            _ => None,
        };
        let event = match lin {
            Some((k, lop)) if self.clients.histories[k].len() < OPS_PER_KEY_MAX => {
                self.clients.histories[k].push(Event { op: lop, call: now, done: None });
                Some((k, self.clients.histories[k].len() - 1))
            }
            // The key's history is full: nothing more is recorded about it (reads wait for next
            // run; writes still run, unrecorded, only on keys not checked).
            Some(_) => return Ok(()),
            None => None,
        };
        self.stats.client_ops += 1;
        self.clients.list[c].pending = Some(Pending { server: sid, op, session, cxid, invoked: now, event });
        let data = |v: u64| Bytes::from(v.to_string());
        let req = match op {
            Op::Get(k) => {
                if let Some(reply) = self.server(sid).store.read(&key_path(k)) {
                    self.clients.finish(c, Some((now, reply)), &mut self.stats);
                }
                return Ok(());
            }
            Op::CreateSession(id) => {
                let mut b = BytesMut::new();
                b.put_i32(SESSION_TIMEOUT_MS);
                ForwardedRequest { session_id: id, cxid, op: OpCode::CreateSession.code(), body: b.freeze() }
            }
            Op::CloseSession => ForwardedRequest {
                session_id: session,
                cxid,
                op: OpCode::CloseSession.code(),
                body: Bytes::new(),
            },
            Op::Create(k, v) => create_req(session, cxid, key_path(k), data(v), 0),
            Op::Ephemeral(n) => create_req(session, cxid, format!("/e{c}-{n}"), data(0), 1),
            Op::Sequential => create_req(session, cxid, "/s-".into(), data(0), 2),
            Op::Set(k, v, e) => {
                let mut b = BytesMut::new();
                SetDataRequest { path: key_path(k), data: Some(data(v)), version: e }.write(&mut b);
                ForwardedRequest { session_id: session, cxid, op: OpCode::SetData.code(), body: b.freeze() }
            }
            Op::SyncGet(k) => {
                let mut b = BytesMut::new();
                zk_proto::SyncRequest { path: key_path(k) }.write(&mut b);
                ForwardedRequest { session_id: session, cxid, op: OpCode::Sync.code(), body: b.freeze() }
            }
        };
        let s = self.server(sid);
        if s.is_leading() {
            if req.op == OpCode::Sync.code() {
                // The leader's own sync: answered once what it proposed so far is applied.
                let through = s.proposer.outstanding.keys().next_back().copied().unwrap_or(0);
                s.proposer.local_syncs.push(through);
                return self.answer_syncs(sid);
            }
            return self.propose(sid, req);
        }
        if let super::Role::Following(l, _) = &mut s.role {
            l.forward(req);
        }
        self.drain(sid)
    }

    /// A learner forwarded a request to the leader `sid`.
    pub(super) fn forwarded(&mut self, sid: i64, conn: zk_quorum::zab::ConnId, req: ForwardedRequest) -> R {
        let s = self.server(sid);
        if !s.serving() {
            return Ok(());
        }
        if req.op == OpCode::Sync.code() {
            let through = s.proposer.outstanding.keys().next_back().copied().unwrap_or(0);
            s.proposer.syncs.push((conn, through));
            return self.answer_syncs(sid);
        }
        self.propose(sid, req)
    }

    /// Answers the syncs whose proposals are all committed.
    pub(super) fn answer_syncs(&mut self, sid: i64) -> R {
        let now = self.now;
        let s = self.server(sid);
        let applied = s.store.applied_zxid();
        let (ready, waiting): (Vec<_>, Vec<_>) = s.proposer.syncs.drain(..).partition(|(_, z)| *z <= applied);
        s.proposer.syncs = waiting;
        if let super::Role::Leading(l) = &mut s.role {
            for (conn, _) in ready {
                l.sync_ready(conn, now);
            }
        }
        let local_ready = s.proposer.local_syncs.iter().filter(|z| **z <= applied).count();
        s.proposer.local_syncs.retain(|z| *z > applied);
        for _ in 0..local_ready {
            self.clients.sync_done(sid, &mut self.servers, &mut self.stats);
        }
        self.drain(sid)
    }

    /// Every acknowledged write is in the committed chain; every key's history is
    /// linearizable.
    pub(super) fn check_clients(&self) -> R {
        let chain: BTreeMap<i64, &Bytes> = self.chain.iter().map(|r| (r.0, &r.1)).collect();
        for (zxid, payload) in &self.clients.acked {
            if chain.get(zxid) != Some(&payload) {
                return Err(format!("acknowledged write {zxid:#x} is not in the committed chain"));
            }
        }
        for (k, h) in self.clients.histories.iter().enumerate() {
            let h: Vec<Event> = h.iter().copied().filter(|e| e.call != u64::MAX).collect();
            linear::check(&h).map_err(|e| format!("key {}: {e}", key_path(k)))?;
        }
        Ok(())
    }
}
