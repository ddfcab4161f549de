//! Simulated clients. Each keeps a ZooKeeper session and speaks the client protocol to one
//! server's node at a time (the handshake, requests and replies as frames, exactly what a
//! connection hands the core), one operation at a time:
//! - creates of paths unique to the client (an acknowledged one must survive everything);
//! - create, conditional setData and sync+getData on a few shared keys, whose histories are
//!   checked for linearizability ([`super::linear`]);
//! - sequential creates under one parent (acknowledged names must be unique);
//! - ephemerals, and now and then a closeSession;
//! - when the fault model asks one for it (`World::reconfig_fault`), a reconfig request as an
//!   administrator sends it: `addauth digest` as the super user, then the incremental reconfig
//!   (op code 16), whose answer (the new configuration, or Apache's error) is recorded.
//!
//! An operation whose connection closes, whose server crashes, or that takes too long ends
//! unknown (it may or may not have taken effect). A client whose connection ends tries another
//! server with its session (a reconnect), as ZooKeeper clients do.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Bytes, BytesMut};
use rand::rngs::StdRng;
use rand::Rng;
use zk_proto::jute::{Jute, Reader};
use zk_proto::{
    Acl, ConnectRequest, ConnectResponse, CreateRequest, GetDataRequest, GetDataResponse, Id, OpCode,
    ReconfigRequest, ReplyHeader, Request, SetDataRequest, Stat, SyncRequest,
};
use zk_quorum::config::QuorumConfig;
use zk_server::node::replica::parse_config;

use super::linear::{Event as LinEvent, Op as LinOp, Ret};

/// Shared keys whose histories are checked.
pub const KEYS: usize = 3;
/// Operations recorded per shared key, to keep every check quick.
const OPS_PER_KEY_MAX: usize = 40;
/// A client gives up on an operation after this long (its outcome is then unknown).
pub const OP_TIMEOUT_MS: u64 = 3_000;
/// Session timeout the clients ask for.
pub const SESSION_TIMEOUT_MS: i32 = 6_000;
/// The super user's `addauth digest` credentials; the servers' zoo.cfg holds its digest
/// ([`SUPER_DIGEST`]). Reconfiguring takes write access to /zookeeper/config, which only the
/// super user has.
pub const SUPER_AUTH: &[u8] = b"super:secret";
/// `DigestAuthenticationProvider.superDigest` for [`SUPER_AUTH`].
pub const SUPER_DIGEST: &str = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=";

/// What a client is waiting for.
#[derive(Debug, Clone)]
pub enum Op {
    /// create of a path unique to the client.
    Unique(String),
    /// create of shared key k with a value.
    LinCreate(usize, u64),
    /// setData of shared key k with a value, if the version matches (-1 any).
    LinSet(usize, u64, i32),
    /// sync then getData of shared key k (two requests, the answer is the second's).
    LinSyncGet(usize),
    /// A sequential create under /seq.
    Sequential,
    /// An ephemeral create.
    Ephemeral,
    /// A create of a scratch path, deleted again later (deletes leave holes in the node slab,
    /// which a snapshot cursor must not be confused by).
    Scratch(String),
    /// A delete of a scratch path.
    Delete,
    /// closeSession.
    Close,
    /// A reconfig request (after `addauth` as the super user).
    Reconfig,
}

/// An operation in flight.
#[derive(Debug, Clone)]
pub struct Pending {
    pub op: Op,
    pub xid: i32,
    pub sent_ms: u64,
    /// Its event in its key's history.
    pub event: Option<(usize, usize)>,
}

/// Where a client stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Not connected; try again at this time.
    Idle { retry_at: u64 },
    /// Handshake sent to `sid` (process `gen`) on its connection `conn`.
    Connecting { sid: i64, gen: u64, conn: u64, since: u64 },
    /// Connected to `sid` on `conn`.
    Connected { sid: i64, gen: u64, conn: u64 },
}

/// One client.
#[derive(Debug)]
pub struct Client {
    pub id: usize,
    pub link: Link,
    pub session: Option<(i64, Bytes)>,
    pub last_zxid: i64,
    pub next_xid: i32,
    pub pending: Option<Pending>,
    /// The client's next unique path number.
    pub next_unique: u64,
    /// When it next acts while connected and idle.
    pub next_op_ms: u64,
    /// When it last sent anything (pings keep the session alive).
    pub last_sent_ms: u64,
    /// Scratch paths it created and has not deleted.
    pub scratch: Vec<String>,
    /// A reconfig request to send as its next operation.
    pub admin: Option<ReconfigRequest>,
    /// The token of its one live tick: a tick scheduled since replaces the one before, whose
    /// event is then ignored (without this every reply started another perpetual tick chain,
    /// and the event queue grew with every answered operation).
    pub tick: u64,
}

/// Everything the clients learned, for the checks.
#[derive(Debug, Default)]
pub struct Record {
    /// Acknowledged unique creates: path -> the zxid of the reply.
    pub acked: BTreeMap<String, i64>,
    /// When each was acknowledged (sim ms).
    pub acked_at: BTreeMap<String, u64>,
    /// Each shared key's history.
    pub histories: Vec<Vec<LinEvent>>,
    /// Acknowledged sequential names.
    pub sequential: BTreeSet<String>,
    /// A sequential name acknowledged twice (to different creates).
    pub duplicate_sequential: Option<String>,
    /// Operations answered, and ended unknown.
    pub answered: u64,
    pub unknown: u64,
    /// Reconfig requests acknowledged: the configuration each answered with.
    pub reconfigs_acked: Vec<QuorumConfig>,
    /// Reconfig requests answered with an error, by error code.
    pub reconfig_errors: BTreeMap<i32, u64>,
    /// Reconfig requests whose outcome stayed unknown.
    pub reconfig_unknown: u64,
}

impl Record {
    pub fn new() -> Record {
        Record { histories: vec![Vec::new(); KEYS], ..Record::default() }
    }
}

impl Client {
    pub fn new(id: usize) -> Client {
        Client {
            id,
            link: Link::Idle { retry_at: 0 },
            session: None,
            last_zxid: 0,
            next_xid: 1,
            pending: None,
            next_unique: 0,
            next_op_ms: 0,
            last_sent_ms: 0,
            tick: 0,
            scratch: Vec::new(),
            admin: None,
        }
    }

    /// The handshake for a connection: a new session, or this client's to resume.
    pub fn connect_request(&self) -> ConnectRequest {
        let (session_id, passwd) = self.session.clone().unwrap_or((0, Bytes::from_static(&[0u8; 16])));
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            time_out: SESSION_TIMEOUT_MS,
            session_id,
            passwd,
            read_only: Some(false),
        }
    }

    /// The handshake's answer: whether the session lives.
    pub fn connected(&mut self, frame: &Bytes) -> bool {
        let Some(body) = frame.get(4..) else { return false };
        let Ok(resp) = ConnectResponse::read(&mut Reader::new(Bytes::copy_from_slice(body))) else {
            return false;
        };
        if resp.time_out <= 0 || resp.session_id == 0 {
            // The session expired: the next connection starts a new one.
            self.session = None;
            return false;
        }
        self.session = Some((resp.session_id, resp.passwd));
        true
    }

    /// Picks the next operation; returns the requests to send (xid, op code, body).
    pub fn next_op(&mut self, rng: &mut StdRng, now: u64, rec: &mut Record) -> Vec<(i32, i32, Request)> {
        debug_assert!(self.pending.is_none());
        let roll = rng.gen_range(0..100);
        let k = rng.gen_range(0..KEYS);
        let acl = vec![Acl { perms: 31, id: Id { scheme: "world".into(), id: "anyone".into() } }];
        let first = self.id == 0 && self.next_unique == 0;
        // A key whose history is full takes no more operations: an unrecorded write would be
        // seen by the recorded reads, and the check would see a value nobody wrote.
        let roll =
            if (35..=84).contains(&roll) && rec.histories[k].len() >= OPS_PER_KEY_MAX { 0 } else { roll };
        let (op, reqs): (Op, Vec<(i32, Request)>) = match roll {
            // An administrator's reconfig: as the super user (addauth), then the request.
            _ if self.admin.is_some() => {
                let r = self.admin.take().expect("checked");
                let auth = Request::Auth(zk_proto::AuthPacket {
                    auth_type: 0,
                    scheme: "digest".into(),
                    auth: Bytes::from_static(SUPER_AUTH),
                });
                (
                    Op::Reconfig,
                    vec![(OpCode::Auth.code(), auth), (OpCode::Reconfig.code(), Request::Reconfig(r))],
                )
            }
            // The parent of the sequential creates, made once.
            _ if first => {
                self.next_unique += 1;
                let r = Request::Create(CreateRequest { path: "/seq".into(), data: None, acl, flags: 0 });
                (Op::Unique("/seq".into()), vec![(OpCode::Create.code(), r)])
            }
            25..=34 if self.scratch.len() > 2 && rng.gen_bool(0.5) => {
                let path = self.scratch.swap_remove(rng.gen_range(0..self.scratch.len()));
                let r = Request::Delete(zk_proto::DeleteRequest { path, version: -1 });
                (Op::Delete, vec![(OpCode::Delete.code(), r)])
            }
            25..=34 => {
                let path = format!("/t{}-{}", self.id, self.next_unique);
                self.next_unique += 1;
                let r = Request::Create(CreateRequest {
                    path: path.clone(),
                    data: Some(Bytes::from_static(b"scratch")),
                    acl,
                    flags: 0,
                });
                (Op::Scratch(path), vec![(OpCode::Create.code(), r)])
            }
            0..=24 => {
                let path = format!("/u{}-{}", self.id, self.next_unique);
                self.next_unique += 1;
                let r = Request::Create(CreateRequest {
                    path: path.clone(),
                    data: Some(Bytes::from(format!("c{}", self.id))),
                    acl,
                    flags: 0,
                });
                (Op::Unique(path), vec![(OpCode::Create.code(), r)])
            }
            35..=44 => {
                let v = rng.gen_range(1..1_000_000u64);
                let r = Request::Create(CreateRequest {
                    path: format!("/k{k}"),
                    data: Some(Bytes::from(v.to_string())),
                    acl,
                    flags: 0,
                });
                (Op::LinCreate(k, v), vec![(OpCode::Create.code(), r)])
            }
            45..=64 => {
                let v = rng.gen_range(1..1_000_000u64);
                let version = if rng.gen_bool(0.3) { -1 } else { rng.gen_range(0..4) };
                let r = Request::SetData(SetDataRequest {
                    path: format!("/k{k}"),
                    data: Some(Bytes::from(v.to_string())),
                    version,
                });
                (Op::LinSet(k, v, version), vec![(OpCode::SetData.code(), r)])
            }
            65..=84 => {
                let sync = Request::Sync(SyncRequest { path: format!("/k{k}") });
                let get = Request::GetData(GetDataRequest { path: format!("/k{k}"), watch: false });
                (Op::LinSyncGet(k), vec![(OpCode::Sync.code(), sync), (OpCode::GetData.code(), get)])
            }
            85..=92 => {
                let r = Request::Create(CreateRequest {
                    path: "/seq/n-".into(),
                    data: None,
                    acl,
                    flags: 2, // sequential
                });
                (Op::Sequential, vec![(OpCode::Create.code(), r)])
            }
            93..=98 => {
                let path = format!("/e{}-{}", self.id, self.next_unique);
                self.next_unique += 1;
                let r = Request::Create(CreateRequest { path: path.clone(), data: None, acl, flags: 1 });
                (Op::Ephemeral, vec![(OpCode::Create.code(), r)])
            }
            _ => (Op::Close, vec![(OpCode::CloseSession.code(), Request::CloseSession)]),
        };
        let lin = match op {
            Op::LinCreate(k, v) => Some((k, LinOp::Create(v))),
            Op::LinSet(k, v, e) => Some((k, LinOp::Set(v, e))),
            Op::LinSyncGet(k) => Some((k, LinOp::Get)),
            _ => None,
        };
        let event = lin.map(|(k, o)| {
            let h = &mut rec.histories[k];
            debug_assert!(h.len() < OPS_PER_KEY_MAX, "a full history takes no more operations");
            h.push(LinEvent { op: o, call: now, done: None });
            (k, h.len() - 1)
        });
        let mut out = Vec::new();
        for (code, req) in reqs {
            let xid = if code == OpCode::Auth.code() {
                zk_proto::xid::AUTH
            } else {
                self.next_xid += 1;
                self.next_xid - 1
            };
            out.push((xid, code, req));
        }
        let last_xid = out.last().map_or(0, |r| r.0);
        self.pending = Some(Pending { op, xid: last_xid, sent_ms: now, event });
        self.last_sent_ms = now;
        out
    }

    /// A reply frame on this client's connection. Returns true when it ended the operation.
    pub fn reply(&mut self, frame: &Bytes, now: u64, rec: &mut Record) -> bool {
        let Some(body) = frame.get(4..) else { return false };
        let mut r = Reader::new(Bytes::copy_from_slice(body));
        let Ok(h) = ReplyHeader::read(&mut r) else { return false };
        if h.xid < 0 {
            // A watch event or a ping's answer.
            return false;
        }
        if h.zxid > 0 {
            self.last_zxid = self.last_zxid.max(h.zxid);
        }
        let Some(p) = self.pending.clone() else { return false };
        if h.xid != p.xid {
            // The sync before a getData: its answer is not the operation's.
            return false;
        }
        self.pending = None;
        rec.answered += 1;
        let ok = h.err == 0;
        let ret = |err: i32, r: &mut Reader| -> Option<Ret> {
            match zk_proto::ErrorCode::from_i32(err) {
                Some(zk_proto::ErrorCode::Ok) => None,
                Some(zk_proto::ErrorCode::NoNode) => Some(Ret::NoNode),
                Some(zk_proto::ErrorCode::NodeExists) => Some(Ret::Exists),
                Some(zk_proto::ErrorCode::BadVersion) => Some(Ret::BadVersion),
                _ => {
                    let _ = r;
                    None
                }
            }
        };
        let answer: Option<Ret> = match &p.op {
            Op::Unique(path) => {
                if ok {
                    rec.acked.insert(path.clone(), h.zxid);
                    rec.acked_at.insert(path.clone(), now);
                }
                None
            }
            Op::Sequential => {
                if ok {
                    if let Ok(name) = String::read(&mut r) {
                        if !rec.sequential.insert(name.clone()) {
                            rec.duplicate_sequential = Some(name);
                        }
                    }
                }
                None
            }
            Op::Ephemeral => None,
            Op::Scratch(path) => {
                if ok {
                    self.scratch.push(path.clone());
                }
                None
            }
            Op::Delete => None,
            Op::Close => {
                if ok {
                    self.session = None;
                }
                None
            }
            Op::Reconfig => {
                if ok {
                    match GetDataResponse::read(&mut r).ok().and_then(|g| parse_config(g.data.as_deref()?)) {
                        Some(c) => rec.reconfigs_acked.push(c),
                        None => *rec.reconfig_errors.entry(i32::MIN).or_insert(0) += 1,
                    }
                } else {
                    *rec.reconfig_errors.entry(h.err).or_insert(0) += 1;
                }
                None
            }
            Op::LinCreate(..) => {
                if ok {
                    Some(Ret::Created)
                } else {
                    ret(h.err, &mut r)
                }
            }
            Op::LinSet(..) => {
                if ok {
                    Stat::read(&mut r).ok().map(|s| Ret::Set(s.version))
                } else {
                    ret(h.err, &mut r)
                }
            }
            Op::LinSyncGet(_) => {
                if ok {
                    GetDataResponse::read(&mut r).ok().and_then(|g| {
                        let v: u64 = std::str::from_utf8(g.data.as_deref()?).ok()?.parse().ok()?;
                        Some(Ret::Value(v, g.stat.version))
                    })
                } else {
                    ret(h.err, &mut r)
                }
            }
        };
        if let (Some((k, i)), Some(a)) = (p.event, answer) {
            rec.histories[k][i].done = Some((now, a));
        }
        true
    }

    /// The operation in flight ends without an answer (its outcome stays unknown).
    pub fn abandon(&mut self, rec: &mut Record) {
        if let Some(p) = self.pending.take() {
            rec.unknown += 1;
            if matches!(p.op, Op::Reconfig) {
                rec.reconfig_unknown += 1;
            }
        }
    }
}

/// Encodes a request body as a connection hands it to the core.
pub fn encode(req: &Request) -> Bytes {
    let mut b = BytesMut::new();
    req.encode(&mut b);
    b.freeze()
}
