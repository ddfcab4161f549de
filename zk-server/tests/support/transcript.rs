//! Differential testing: run one scenario against Apache ZooKeeper and against zkrs-server, record
//! everything a client can observe into a transcript, and compare the two transcripts line by line.
//!
//! What is recorded: every handshake answer, every reply (header zxid and error, the decoded body with
//! every Stat field), watch events in arrival order (interleaved with replies exactly as they came on
//! the connection), and connection closes.
//!
//! What is normalised, because it must differ between two servers:
//! - session ids become S1, S2, ... in order of first appearance (also inside ephemeralOwner);
//! - session passwords are recorded only by length and whether they are all zero;
//! - ctime and mtime become relations: `0`, `now` (within ten minutes of the test's clock), and for
//!   mtime either `=ctime` (the node's data was never changed, so both come from one txn) or `>=ctime`;
//! - children lists and getEphemerals lists are sorted (Apache returns them in hash-set order, which
//!   no client may rely on).
//!
//! Environment:
//! - `ZKRS_DIFF_ONLY=apache` (or `zkrs`) runs one half only, for developing scenarios;
//! - `ZKRS_DIFF_PRINT=1` prints each transcript;
//! - `ZKRS_DIFF_DUMP=<dir>` writes each transcript to `<dir>/<scenario>.<target>.txt`.

use super::{start, ServerProc, Target, BOTH};
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use zk_proto::jute::{self, Jute, Reader};
use zk_proto::*;

/// How long a reply may take before the scenario fails; generous, since the JVM can be slow.
const REPLY_WAIT: Duration = Duration::from_secs(15);

/// What one attempt to read a frame produced.
#[derive(Debug)]
pub enum Read1 {
    /// A whole frame (payload without the length prefix).
    Frame(Bytes),
    /// Nothing arrived in time.
    Timeout,
    /// The server closed the connection (EOF or reset).
    Closed,
}

/// One client connection: a socket, a framing buffer and the session it carries.
pub struct Conn {
    /// Name used in transcript lines ("a", "b", ...).
    pub name: String,
    /// The socket.
    pub stream: TcpStream,
    buf: BytesMut,
    next_xid: i32,
    /// The session id the handshake returned (0 if none).
    pub session_id: i64,
    /// The session password the handshake returned.
    pub passwd: Bytes,
    /// Whether the server has been seen closing this connection.
    pub closed: bool,
    /// Pings sent by [`Ctx::ping_quietly`] whose replies have not been skipped yet.
    quiet_pings: usize,
}

impl Conn {
    /// Opens a TCP connection with no handshake.
    pub fn open(name: &str, addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
        stream.set_nodelay(true).unwrap();
        Conn {
            name: name.to_string(),
            stream,
            buf: BytesMut::new(),
            next_xid: 1,
            session_id: 0,
            passwd: Bytes::new(),
            closed: false,
            quiet_pings: 0,
        }
    }

    /// Writes raw bytes; a write error (the server already closed) is remembered, not fatal.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        if self.stream.write_all(bytes).is_err() {
            self.closed = true;
        }
    }

    /// Writes one length-prefixed frame.
    pub fn write_frame(&mut self, payload: &[u8]) {
        let mut out = (payload.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        self.write_raw(&out);
    }

    /// Takes the next xid.
    pub fn next_xid(&mut self) -> i32 {
        let x = self.next_xid;
        self.next_xid += 1;
        x
    }

    /// Sends `req` under `xid` and `op` (which may differ from the request's own opcode).
    pub fn send_as(&mut self, xid: i32, op: i32, req: &Request) {
        let mut payload = Vec::new();
        RequestHeader { xid, op }.write(&mut payload);
        req.encode(&mut payload);
        self.write_frame(&payload);
    }

    /// Reads one frame, waiting at most `wait`.
    pub fn read_frame(&mut self, wait: Duration) -> Read1 {
        let deadline = Instant::now() + wait;
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let _ = self.buf.split_to(4);
                    return Read1::Frame(self.buf.split_to(len).freeze());
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Read1::Timeout;
            }
            self.stream.set_read_timeout(Some(deadline - now)).unwrap();
            let mut tmp = [0u8; 65536];
            match self.stream.read(&mut tmp) {
                Ok(0) => {
                    self.closed = true;
                    return Read1::Closed;
                }
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return Read1::Timeout
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closed = true;
                    return Read1::Closed;
                }
            }
        }
    }
}

/// The state of one scenario run against one server (or one ensemble).
pub struct Ctx {
    /// The client addresses of the servers under test: one for a standalone server, an ensemble's
    /// members otherwise.
    pub servers: Vec<SocketAddr>,
    /// Which of `servers` new connections go to.
    pub at: usize,
    lines: Vec<String>,
    sessions: HashMap<i64, String>,
    now_ms: i64,
    /// When set, the events that arrive before one reply are recorded sorted: for txns that fire
    /// several events in an order Apache takes from a hash set (closeSession deleting several
    /// ephemerals), which no client may rely on.
    pub sort_events: bool,
}

fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Formats an error code by name, or the raw number if unknown.
pub fn err_name(code: i32) -> String {
    match ErrorCode::from_i32(code) {
        Some(e) => format!("{e:?}"),
        None => format!("err{code}"),
    }
}

fn event_name(t: i32) -> String {
    EventType::from_i32(t).map(|e| format!("{e:?}")).unwrap_or_else(|| format!("type{t}"))
}

fn state_name(s: i32) -> String {
    KeeperState::from_i32(s).map(|e| format!("{e:?}")).unwrap_or_else(|| format!("state{s}"))
}

/// Reads a jute ustring and shows it quoted when it is valid UTF-8, else as hex, so that the exact
/// bytes a server echoes back are compared.
fn raw_str(r: &mut Reader) -> Result<String, DecodeError> {
    let b = Option::<Bytes>::read(r)?;
    Ok(match b {
        None => "null".into(),
        Some(b) => match std::str::from_utf8(&b) {
            Ok(s) => q(s),
            Err(_) => format!("bytes:0x{}", hex(&b)),
        },
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A string as Rust would quote it, so control characters stay visible.
pub fn q(s: &str) -> String {
    format!("{s:?}")
}

fn acl_list(acl: &[Acl]) -> String {
    let parts: Vec<String> = acl.iter().map(|a| format!("{}:{}:{}", a.perms, a.id.scheme, a.id.id)).collect();
    format!("[{}]", parts.join(", "))
}

fn data_text(d: &Option<Bytes>) -> String {
    match d {
        None => "null".into(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) if b.len() <= 64 => q(s),
            _ => format!("<{} bytes>", b.len()),
        },
    }
}

/// Describes a request for a transcript line: the operation and every argument.
pub fn describe(req: &Request) -> String {
    let create = |name: &str, r: &CreateRequest| {
        format!(
            "{name} {} data={} acl={} flags={}",
            q(&r.path),
            data_text(&r.data),
            acl_list(&r.acl),
            r.flags
        )
    };
    let list = |v: &[String]| format!("{v:?}");
    match req {
        Request::Create(r) => create("create", r),
        Request::Create2(r) => create("create2", r),
        Request::CreateContainer(r) => create("createContainer", r),
        Request::CreateTtl(r) => format!(
            "createTTL {} data={} acl={} flags={} ttl={}",
            q(&r.path),
            data_text(&r.data),
            acl_list(&r.acl),
            r.flags,
            r.ttl
        ),
        Request::Delete(r) => format!("delete {} v={}", q(&r.path), r.version),
        Request::DeleteContainer(r) => format!("deleteContainer {} v={}", q(&r.path), r.version),
        Request::Exists(r) => format!("exists {} watch={}", q(&r.path), r.watch),
        Request::GetData(r) => format!("getData {} watch={}", q(&r.path), r.watch),
        Request::GetChildren(r) => format!("getChildren {} watch={}", q(&r.path), r.watch),
        Request::GetChildren2(r) => format!("getChildren2 {} watch={}", q(&r.path), r.watch),
        Request::SetData(r) => {
            format!("setData {} data={} v={}", q(&r.path), data_text(&r.data), r.version)
        }
        Request::GetAcl(r) => format!("getACL {}", q(&r.path)),
        Request::SetAcl(r) => format!("setACL {} acl={} v={}", q(&r.path), acl_list(&r.acl), r.version),
        Request::Sync(r) => format!("sync {}", q(&r.path)),
        Request::Check(r) => format!("check {} v={}", q(&r.path), r.version),
        Request::Multi(ops) | Request::MultiRead(ops) => {
            let name = if matches!(req, Request::Multi(_)) { "multi" } else { "multiRead" };
            let parts: Vec<String> = ops.iter().map(describe).collect();
            format!("{name}[{}]", parts.join("; "))
        }
        Request::CheckWatches(r) => format!("checkWatches {} type={}", q(&r.path), r.watcher_type),
        Request::RemoveWatches(r) => {
            format!("removeWatches {} type={}", q(&r.path), r.watcher_type)
        }
        Request::AddWatch(r) => format!("addWatch {} mode={}", q(&r.path), r.mode),
        Request::GetEphemerals(r) => format!("getEphemerals {}", q(&r.prefix_path)),
        Request::GetAllChildrenNumber(r) => format!("getAllChildrenNumber {}", q(&r.path)),
        Request::SetWatches(w) => format!(
            "setWatches rel={} data={} exist={} child={}",
            w.relative_zxid,
            list(&w.data_watches),
            list(&w.exist_watches),
            list(&w.child_watches)
        ),
        Request::SetWatches2(w) => format!(
            "setWatches2 rel={} data={} exist={} child={} persistent={} recursive={}",
            w.relative_zxid,
            list(&w.data_watches),
            list(&w.exist_watches),
            list(&w.child_watches),
            list(&w.persistent_watches),
            list(&w.persistent_recursive_watches)
        ),
        Request::WhoAmI => "whoAmI".into(),
        Request::Ping => "ping".into(),
        Request::CloseSession => "closeSession".into(),
        other => format!("{other:?}"),
    }
}

impl Ctx {
    /// A fresh context for `server`.
    pub fn new(server: &ServerProc) -> Self {
        Self::for_servers(vec![server.addr()])
    }

    /// A fresh context for an ensemble whose members serve clients at `servers`; connections go
    /// to the first until [`Ctx::at`] or [`Ctx::connect_at`] picks another.
    pub fn for_servers(servers: Vec<SocketAddr>) -> Self {
        Ctx {
            servers,
            at: 0,
            lines: Vec::new(),
            sessions: HashMap::new(),
            now_ms: wall_ms(),
            sort_events: false,
        }
    }

    /// The address new connections go to.
    pub fn addr(&self) -> SocketAddr {
        self.servers[self.at]
    }

    /// The transcript, taken out of the context.
    pub fn into_lines(self) -> Vec<String> {
        self.lines
    }

    /// Removes and returns the last line (to record something derived from it instead).
    pub fn take_last_line(&mut self) -> Option<String> {
        self.lines.pop()
    }

    /// Opens a new session on server `i` (an index into [`Ctx::servers`]) and records the answer.
    pub fn connect_at(&mut self, name: &str, i: usize, timeout_ms: i32) -> Conn {
        self.at = i;
        self.connect(name, timeout_ms)
    }

    /// The transcript so far.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Appends a line verbatim (section headings, notes).
    pub fn note(&mut self, text: impl Into<String>) {
        self.lines.push(text.into());
    }

    /// The normalised name of a session id: 0 stays "0", others become S1, S2, ... in order.
    pub fn session_name(&mut self, id: i64) -> String {
        if id == 0 {
            return "0".into();
        }
        let n = self.sessions.len() + 1;
        self.sessions.entry(id).or_insert_with(|| format!("S{n}")).clone()
    }

    fn time_name(&self, t: i64) -> String {
        if t == 0 {
            "0".into()
        } else if (t - self.now_ms).abs() < 600_000 {
            "now".into()
        } else {
            format!("{t}")
        }
    }

    /// Formats a Stat with every field; times as relations, the owner as a session name.
    pub fn stat(&mut self, s: &Stat) -> String {
        let mtime = if s.mzxid == s.czxid {
            if s.mtime == s.ctime {
                "=ctime".to_string()
            } else {
                format!("!=ctime({})", self.time_name(s.mtime))
            }
        } else if s.mtime >= s.ctime {
            ">=ctime".to_string()
        } else {
            format!("<ctime({})", self.time_name(s.mtime))
        };
        let owner = self.session_name(s.ephemeral_owner);
        format!(
            "{{czxid={} mzxid={} ctime={} mtime{} version={} cversion={} aversion={} owner={} \
             dataLength={} numChildren={} pzxid={}}}",
            s.czxid,
            s.mzxid,
            self.time_name(s.ctime),
            mtime,
            s.version,
            s.cversion,
            s.aversion,
            owner,
            s.data_length,
            s.num_children,
            s.pzxid
        )
    }

    fn sorted(v: &[String]) -> String {
        let mut v = v.to_vec();
        v.sort();
        format!("{v:?}")
    }

    /// Decodes a reply body for a request sent under `op`, naming every field.
    pub fn body(&mut self, op: i32, err: i32, body: &Bytes) -> String {
        let mut r = Reader::new(body.clone());
        let is_multi = op == OpCode::Multi.code() || op == OpCode::MultiRead.code();
        if err != 0 && !is_multi {
            return if body.is_empty() { String::new() } else { format!(" body=0x{}", hex(body)) };
        }
        let decoded: Result<String, DecodeError> = (|| {
            Ok(match OpCode::from_i32(op) {
                _ if body.is_empty() && !is_multi => String::new(),
                Some(OpCode::Create) => format!(" path={}", raw_str(&mut r)?),
                Some(OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl) => {
                    let path = raw_str(&mut r)?;
                    let st = Stat::read(&mut r)?;
                    format!(" path={path} stat={}", self.stat(&st))
                }
                Some(OpCode::Exists) => {
                    let st = Stat::read(&mut r)?;
                    format!(" stat={}", self.stat(&st))
                }
                Some(OpCode::GetData) => {
                    let d = GetDataResponse::read(&mut r)?;
                    format!(" data={} stat={}", data_text(&d.data), self.stat(&d.stat))
                }
                Some(OpCode::SetData | OpCode::SetAcl) => {
                    let st = Stat::read(&mut r)?;
                    format!(" stat={}", self.stat(&st))
                }
                Some(OpCode::GetAcl) => {
                    let a = GetAclResponse::read(&mut r)?;
                    format!(" acl={} stat={}", acl_list(&a.acl), self.stat(&a.stat))
                }
                Some(OpCode::GetChildren) => {
                    let c = GetChildrenResponse::read(&mut r)?;
                    format!(" children={}", Self::sorted(&c.children))
                }
                Some(OpCode::GetChildren2) => {
                    let c = GetChildren2Response::read(&mut r)?;
                    format!(" children={} stat={}", Self::sorted(&c.children), self.stat(&c.stat))
                }
                Some(OpCode::Sync) => format!(" path={}", raw_str(&mut r)?),
                Some(OpCode::GetAllChildrenNumber) => format!(" total={}", i32::read(&mut r)?),
                Some(OpCode::GetEphemerals) => {
                    let e = GetEphemeralsResponse::read(&mut r)?;
                    format!(" ephemerals={}", Self::sorted(&e.ephemerals))
                }
                Some(OpCode::WhoAmI) => {
                    let w = WhoAmIResponse::read(&mut r)?;
                    // Apache keeps a connection's identities in a hash set: their order is not
                    // part of the contract.
                    let mut v: Vec<String> =
                        w.client_info.iter().map(|c| format!("{}:{}", c.auth_scheme, c.user)).collect();
                    v.sort();
                    format!(" whoami={v:?}")
                }
                Some(OpCode::Multi | OpCode::MultiRead) if body.is_empty() => " (no body)".into(),
                Some(OpCode::Multi | OpCode::MultiRead) => {
                    format!(" results=[{}]", self.multi_results(&mut r)?)
                }
                Some(OpCode::AddWatch) => format!(" body-err={}", i32::read(&mut r)?),
                _ => {
                    let all = r.bytes(r.remaining())?;
                    format!(" body=0x{}", hex(&all))
                }
            })
        })();
        match decoded {
            Ok(s) if r.remaining() > 0 => format!("{s} trailing=0x{}", hex(r.rest())),
            Ok(s) => s,
            Err(e) => format!(" undecodable({e}) body=0x{}", hex(body)),
        }
    }

    /// Decodes a multi reply body entry by entry, showing each entry's header op code and error
    /// (so a create2 answered in create form, or an error entry, is visible as such).
    fn multi_results(&mut self, r: &mut Reader) -> Result<String, DecodeError> {
        let mut parts = Vec::new();
        loop {
            let h = MultiHeader::read(r)?;
            if h.done {
                if h.op != -1 || h.err != -1 {
                    parts.push(format!("end(op={} err={})", h.op, h.err));
                }
                return Ok(parts.join(", "));
            }
            let body = match OpCode::from_i32(h.op) {
                Some(OpCode::Create) => raw_str(r)?,
                Some(OpCode::Create2 | OpCode::CreateTtl | OpCode::CreateContainer) => {
                    let path = raw_str(r)?;
                    let st = Stat::read(r)?;
                    format!("{path} {}", self.stat(&st))
                }
                Some(OpCode::Delete | OpCode::Check) => String::new(),
                Some(OpCode::SetData) => {
                    let st = Stat::read(r)?;
                    self.stat(&st)
                }
                Some(OpCode::GetChildren) => Self::sorted(&Vec::<String>::read(r)?),
                Some(OpCode::GetData) => {
                    let d = GetDataResponse::read(r)?;
                    format!("{} {}", data_text(&d.data), self.stat(&d.stat))
                }
                Some(OpCode::Error) => err_name(ErrorResponse::read(r)?.err),
                _ => return Err(DecodeError::InvalidValue { what: "multi result op", value: h.op as i64 }),
            };
            let err = if h.err == 0 { String::new() } else { format!(" err={}", err_name(h.err)) };
            parts.push(format!("op{}{err} {body}", h.op).trim_end().to_string());
        }
    }

    fn record_event(&mut self, name: &str, h: &ReplyHeader, body: Bytes) {
        match jute::from_bytes::<WatcherEvent>(body.clone()) {
            Ok(ev) => self.lines.push(format!(
                "{name} <event {} {} {} zxid={} err={}>",
                event_name(ev.event_type),
                state_name(ev.state),
                q(&ev.path),
                h.zxid,
                h.err
            )),
            Err(_) => self.lines.push(format!("{name} <event undecodable 0x{}>", hex(&body))),
        }
    }

    /// Opens a new session (readOnly byte sent, lastZxidSeen 0) and records the answer.
    pub fn connect(&mut self, name: &str, timeout_ms: i32) -> Conn {
        let req = ConnectRequest { time_out: timeout_ms, read_only: Some(false), ..Default::default() };
        let c = self.handshake(name, &req);
        assert!(!c.closed, "{name}: the server refused a plain new session");
        c
    }

    /// Resumes `old`'s session on a new connection with its password.
    pub fn reconnect(&mut self, name: &str, old: &Conn, timeout_ms: i32, last_zxid: i64) -> Conn {
        let req = ConnectRequest {
            time_out: timeout_ms,
            session_id: old.session_id,
            passwd: old.passwd.clone(),
            last_zxid_seen: last_zxid,
            read_only: Some(false),
            ..Default::default()
        };
        self.handshake(name, &req)
    }

    /// A handshake that resumes `c`'s session (its id and password, a long timeout, readOnly byte
    /// sent, lastZxidSeen 0); adjust fields before passing it to [`Ctx::handshake`].
    pub fn reconnect_info(&self, c: &Conn) -> ConnectRequest {
        ConnectRequest {
            time_out: 30_000,
            session_id: c.session_id,
            passwd: c.passwd.clone(),
            read_only: Some(false),
            ..Default::default()
        }
    }

    /// Sends `req` as a handshake and records the answer: the response fields (normalised) or that
    /// the server closed without one.
    pub fn handshake(&mut self, name: &str, req: &ConnectRequest) -> Conn {
        let mut c = Conn::open(name, self.addr());
        c.write_frame(&jute::to_bytes(req));
        self.read_handshake(&mut c);
        c
    }

    /// Reads and records a handshake answer on `c`, then whether the server closes right after.
    pub fn read_handshake(&mut self, c: &mut Conn) {
        match c.read_frame(REPLY_WAIT) {
            Read1::Frame(f) => match jute::from_bytes::<ConnectResponse>(f.clone()) {
                Ok(resp) => {
                    let sess = self.session_name(resp.session_id);
                    let pw = if resp.passwd.iter().all(|b| *b == 0) { "zero" } else { "set" };
                    self.lines.push(format!(
                        "{} connect -> protocolVersion={} timeOut={} session={} passwd={}B/{} \
                         readOnly={:?} frameLen={}",
                        c.name,
                        resp.protocol_version,
                        resp.time_out,
                        sess,
                        resp.passwd.len(),
                        pw,
                        resp.read_only,
                        f.len()
                    ));
                    c.session_id = resp.session_id;
                    c.passwd = resp.passwd;
                    if resp.session_id == 0 {
                        self.expect_closed(c);
                    }
                }
                Err(e) => self.lines.push(format!("{} connect -> undecodable({e}) 0x{}", c.name, hex(&f))),
            },
            Read1::Timeout => self.lines.push(format!("{} connect -> no answer (timeout)", c.name)),
            Read1::Closed => self.lines.push(format!("{} connect -> closed without answer", c.name)),
        }
    }

    /// Sends `req` with the next xid and records the reply and any events that arrive before it.
    pub fn call(&mut self, c: &mut Conn, req: Request) -> Option<(ReplyHeader, Bytes)> {
        let xid = c.next_xid();
        let op = req.op().code();
        self.call_as(c, xid, op, &req)
    }

    /// Like [`Ctx::call`] with an explicit xid and opcode.
    pub fn call_as(
        &mut self,
        c: &mut Conn,
        xid: i32,
        op: i32,
        req: &Request,
    ) -> Option<(ReplyHeader, Bytes)> {
        let label = describe(req);
        c.send_as(xid, op, req);
        self.await_reply(c, xid, op, &label)
    }

    /// Like [`Ctx::call_as`], waiting at most `wait` for the reply (for requests Apache may never
    /// answer).
    pub fn call_as_within(
        &mut self,
        c: &mut Conn,
        xid: i32,
        op: i32,
        req: &Request,
        wait: Duration,
    ) -> Option<(ReplyHeader, Bytes)> {
        let label = describe(req);
        c.send_as(xid, op, req);
        self.await_reply_within(c, xid, op, &label, wait)
    }

    /// Sends a raw payload (header included) as one frame and records the reply to `xid`, decoding
    /// its body as a reply to `op`.
    pub fn call_raw(
        &mut self,
        c: &mut Conn,
        label: &str,
        xid: i32,
        op: i32,
        payload: &[u8],
    ) -> Option<(ReplyHeader, Bytes)> {
        c.write_frame(payload);
        self.await_reply(c, xid, op, label)
    }

    /// Reads frames until the next reply (normally the one for `xid`), recording events on the way
    /// and a close or a timeout if that is what happens instead.
    pub fn await_reply(
        &mut self,
        c: &mut Conn,
        xid: i32,
        op: i32,
        label: &str,
    ) -> Option<(ReplyHeader, Bytes)> {
        self.await_reply_within(c, xid, op, label, REPLY_WAIT)
    }

    /// Like [`Ctx::await_reply`], giving up after `wait`.
    pub fn await_reply_within(
        &mut self,
        c: &mut Conn,
        xid: i32,
        op: i32,
        label: &str,
        wait: Duration,
    ) -> Option<(ReplyHeader, Bytes)> {
        let mark = self.lines.len();
        let out = loop {
            match c.read_frame(wait) {
                Read1::Frame(f) => {
                    let mut r = Reader::new(f);
                    let h = match ReplyHeader::read(&mut r) {
                        Ok(h) => h,
                        Err(_) => {
                            self.lines.push(format!("{} {label} -> short frame", c.name));
                            break None;
                        }
                    };
                    let body = r.rest().clone();
                    if h.xid == xid::NOTIFICATION && xid != xid::NOTIFICATION {
                        let name = c.name.clone();
                        self.record_event(&name, &h, body);
                        continue;
                    }
                    // The late answer to a quiet keep-alive ping is not this request's reply.
                    if h.xid == xid::PING && c.quiet_pings > 0 {
                        c.quiet_pings -= 1;
                        continue;
                    }
                    let b = self.body(op, h.err, &body);
                    // A reply under another xid (Apache answers pings as -2 whatever the
                    // request's xid) is still this request's answer: replies come in order.
                    let xid_note = if h.xid == xid { String::new() } else { format!(" replyXid={}", h.xid) };
                    self.lines.push(format!(
                        "{} {label} -> zxid={} {}{b}{xid_note}",
                        c.name,
                        h.zxid,
                        err_name(h.err)
                    ));
                    break Some((h, body));
                }
                Read1::Timeout => {
                    self.lines.push(format!("{} {label} -> no reply within {}ms", c.name, wait.as_millis()));
                    break None;
                }
                Read1::Closed => {
                    self.lines.push(format!("{} {label} -> closed", c.name));
                    break None;
                }
            }
        };
        if self.sort_events {
            // Events recorded while waiting come before the last line; sort just those.
            let end = self.lines.len() - 1;
            self.lines[mark..end].sort();
        }
        out
    }

    /// Sends all of `reqs` back to back, then records every frame until all replies are in, in
    /// arrival order (shows where events fall between replies).
    pub fn pipeline(&mut self, c: &mut Conn, reqs: Vec<Request>) {
        let mut pending = Vec::new();
        for req in &reqs {
            let xid = c.next_xid();
            c.send_as(xid, req.op().code(), req);
            pending.push((xid, req.op().code(), describe(req)));
        }
        for (xid, op, label) in pending {
            if self.await_reply(c, xid, op, &label).is_none() {
                return;
            }
        }
    }

    /// Waits for exactly `n` events on `c` (each up to `wait`), recording them; records a timeout or
    /// a close if they do not come. Ping replies are skipped.
    pub fn events(&mut self, c: &mut Conn, n: usize, wait: Duration) {
        for _ in 0..n {
            if !self.one_event(c, wait, false) {
                return;
            }
        }
    }

    /// Like [`Ctx::events`] but keeps the session alive with pings while waiting (for long waits
    /// under a short session timeout).
    pub fn events_pinging(&mut self, c: &mut Conn, n: usize, wait: Duration) {
        for _ in 0..n {
            if !self.one_event(c, wait, true) {
                return;
            }
        }
    }

    fn one_event(&mut self, c: &mut Conn, wait: Duration, ping: bool) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.lines.push(format!("{} <no event within {}ms>", c.name, wait.as_millis()));
                return false;
            }
            let slice = if ping { left.min(Duration::from_millis(300)) } else { left };
            match c.read_frame(slice) {
                Read1::Frame(f) => {
                    let mut r = Reader::new(f);
                    let Ok(h) = ReplyHeader::read(&mut r) else {
                        self.lines.push(format!("{} <short frame>", c.name));
                        return false;
                    };
                    if h.xid == xid::PING {
                        c.quiet_pings = c.quiet_pings.saturating_sub(1);
                        continue;
                    }
                    let body = r.rest().clone();
                    if h.xid == xid::NOTIFICATION {
                        let name = c.name.clone();
                        self.record_event(&name, &h, body);
                        return true;
                    }
                    self.lines.push(format!(
                        "{} <unexpected reply xid={} zxid={} {}>",
                        c.name,
                        h.xid,
                        h.zxid,
                        err_name(h.err)
                    ));
                    return false;
                }
                Read1::Timeout if ping => self.ping_quietly(c),
                Read1::Timeout => {}
                Read1::Closed => {
                    self.lines.push(format!("{} <closed>", c.name));
                    return false;
                }
            }
        }
    }

    /// Sends a ping without recording it (its reply is skipped by the event readers).
    pub fn ping_quietly(&mut self, c: &mut Conn) {
        c.quiet_pings += 1;
        c.send_as(xid::PING, OpCode::Ping.code(), &Request::Ping);
    }

    /// Checks that nothing arrives on `c` for `wait`; records what does come instead.
    pub fn no_events(&mut self, c: &mut Conn, wait: Duration) {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.lines.push(format!("{} <quiet>", c.name));
                return;
            }
            match c.read_frame(left) {
                Read1::Frame(f) => {
                    let mut r = Reader::new(f);
                    let Ok(h) = ReplyHeader::read(&mut r) else {
                        self.lines.push(format!("{} <short frame>", c.name));
                        return;
                    };
                    if h.xid == xid::PING {
                        c.quiet_pings = c.quiet_pings.saturating_sub(1);
                        continue;
                    }
                    let body = r.rest().clone();
                    let name = c.name.clone();
                    if h.xid == xid::NOTIFICATION {
                        self.record_event(&name, &h, body);
                    } else {
                        self.lines.push(format!(
                            "{name} <unexpected reply xid={} zxid={} {}>",
                            h.xid,
                            h.zxid,
                            err_name(h.err)
                        ));
                    }
                }
                Read1::Timeout => {
                    self.lines.push(format!("{} <quiet>", c.name));
                    return;
                }
                Read1::Closed => {
                    self.lines.push(format!("{} <closed>", c.name));
                    return;
                }
            }
        }
    }

    /// Records whether the server closes `c` within a few seconds (anything it sends first is
    /// recorded too).
    pub fn expect_closed(&mut self, c: &mut Conn) {
        self.closed_within(c, Duration::from_secs(5));
    }

    /// Records "<closed>" if the server closes `c` within `wait`, else "<open>".
    pub fn closed_within(&mut self, c: &mut Conn, wait: Duration) {
        if c.closed {
            self.lines.push(format!("{} <closed>", c.name));
            return;
        }
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.lines.push(format!("{} <open>", c.name));
                return;
            }
            match c.read_frame(left) {
                Read1::Frame(f) => {
                    self.lines.push(format!("{} <frame 0x{}>", c.name, hex(&f)));
                }
                Read1::Timeout => {
                    self.lines.push(format!("{} <open>", c.name));
                    return;
                }
                Read1::Closed => {
                    self.lines.push(format!("{} <closed>", c.name));
                    return;
                }
            }
        }
    }

    /// Sends an auth packet and records its reply (xid -4).
    pub fn auth(&mut self, c: &mut Conn, scheme: &str, auth: &[u8]) -> Option<i32> {
        let req = Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.into(),
            auth: Bytes::copy_from_slice(auth),
        });
        let label = format!("auth {scheme} {:?}", String::from_utf8_lossy(auth));
        c.send_as(xid::AUTH, OpCode::Auth.code(), &req);
        self.await_reply(c, xid::AUTH, OpCode::Auth.code(), &label).map(|(h, _)| h.err)
    }

    /// Closes `c`'s session with closeSession and records the reply and the close that follows.
    pub fn close_session(&mut self, mut c: Conn) {
        self.call(&mut c, Request::CloseSession);
        self.expect_closed(&mut c);
    }

    /// Records the session's last seen zxid: the zxid in the header of a cheap read.
    pub fn last_zxid(&mut self, c: &mut Conn) -> i64 {
        let req = Request::Exists(ExistsRequest { path: "/".into(), watch: false });
        self.call(c, req).map(|(h, _)| h.zxid).unwrap_or(-1)
    }
}

// Request builders the scenarios use everywhere.

/// world:anyone with all permissions.
pub fn open_acl() -> Vec<Acl> {
    acl(perms::ALL, "world", "anyone")
}

/// A one-entry ACL.
pub fn acl(perms: i32, scheme: &str, id: &str) -> Vec<Acl> {
    vec![Acl { perms, id: Id { scheme: scheme.into(), id: id.into() } }]
}

/// create with an explicit ACL and flags.
pub fn create_acl(path: &str, data: Option<&[u8]>, acl: Vec<Acl>, flags: i32) -> Request {
    Request::Create(CreateRequest { path: path.into(), data: data.map(Bytes::copy_from_slice), acl, flags })
}

/// create with world:anyone ALL.
pub fn create(path: &str, data: &[u8], mode: CreateMode) -> Request {
    create_acl(path, Some(data), open_acl(), mode.code())
}

/// create2 with world:anyone ALL.
pub fn create2(path: &str, data: &[u8], flags: i32) -> Request {
    Request::Create2(CreateRequest {
        path: path.into(),
        data: Some(Bytes::copy_from_slice(data)),
        acl: open_acl(),
        flags,
    })
}

/// createTTL with world:anyone ALL.
pub fn create_ttl(path: &str, flags: i32, ttl: i64) -> Request {
    Request::CreateTtl(CreateTtlRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"t")),
        acl: open_acl(),
        flags,
        ttl,
    })
}

/// createContainer with world:anyone ALL.
pub fn create_container(path: &str) -> Request {
    Request::CreateContainer(CreateRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"c")),
        acl: open_acl(),
        flags: CreateMode::Container.code(),
    })
}

/// delete.
pub fn delete(path: &str, version: i32) -> Request {
    Request::Delete(DeleteRequest { path: path.into(), version })
}

/// exists.
pub fn exists(path: &str, watch: bool) -> Request {
    Request::Exists(ExistsRequest { path: path.into(), watch })
}

/// getData.
pub fn get_data(path: &str, watch: bool) -> Request {
    Request::GetData(GetDataRequest { path: path.into(), watch })
}

/// setData.
pub fn set_data(path: &str, data: &[u8], version: i32) -> Request {
    Request::SetData(SetDataRequest { path: path.into(), data: Some(Bytes::copy_from_slice(data)), version })
}

/// getChildren.
pub fn get_children(path: &str, watch: bool) -> Request {
    Request::GetChildren(GetChildrenRequest { path: path.into(), watch })
}

/// getChildren2.
pub fn get_children2(path: &str, watch: bool) -> Request {
    Request::GetChildren2(GetChildren2Request { path: path.into(), watch })
}

/// getACL.
pub fn get_acl(path: &str) -> Request {
    Request::GetAcl(GetAclRequest { path: path.into() })
}

/// setACL.
pub fn set_acl(path: &str, acl: Vec<Acl>, version: i32) -> Request {
    Request::SetAcl(SetAclRequest { path: path.into(), acl, version })
}

/// check (for multi).
pub fn check(path: &str, version: i32) -> Request {
    Request::Check(CheckVersionRequest { path: path.into(), version })
}

/// addWatch.
pub fn add_watch(path: &str, mode: AddWatchMode) -> Request {
    Request::AddWatch(AddWatchRequest { path: path.into(), mode: mode.code() })
}

/// removeWatches.
pub fn remove_watches(path: &str, t: i32) -> Request {
    Request::RemoveWatches(RemoveWatchesRequest { path: path.into(), watcher_type: t })
}

/// checkWatches.
pub fn check_watches(path: &str, t: i32) -> Request {
    Request::CheckWatches(CheckWatchesRequest { path: path.into(), watcher_type: t })
}

/// Which halves of a differential test run: both, or the one `ZKRS_DIFF_ONLY` names.
pub fn selected(label: &str) -> bool {
    std::env::var("ZKRS_DIFF_ONLY").ok().is_none_or(|o| o == label)
}

/// Prints (`ZKRS_DIFF_PRINT`) and dumps (`ZKRS_DIFF_DUMP`) one transcript as asked.
pub fn report(name: &str, label: &str, lines: &[String]) {
    if std::env::var_os("ZKRS_DIFF_PRINT").is_some() {
        println!("=== {name} on {label} ===\n{}", lines.join("\n"));
    }
    if let Some(dir) = std::env::var_os("ZKRS_DIFF_DUMP") {
        let path = std::path::Path::new(&dir).join(format!("{name}.{label}.txt"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }
}

/// The failure message when zkrs's transcript of scenario `name` differs from Apache's.
pub fn difference(name: &str, apache: &[String], zkrs: &[String]) -> Option<String> {
    (apache != zkrs).then(|| {
        format!(
            "scenario {name}: zkrs differs from Apache ZooKeeper (- apache, + zkrs):\n{}",
            line_diff(apache, zkrs)
        )
    })
}

/// Runs `scenario` against Apache ZooKeeper, then zkrs-server (each a fresh server with
/// `extra_cfg`), and fails with a line diff when the transcripts differ.
pub fn run(name: &str, extra_cfg: &str, scenario: fn(&mut Ctx)) {
    let mut results: Vec<(Target, Vec<String>)> = Vec::new();
    for target in BOTH {
        let label = match target {
            Target::Apache => "apache",
            Target::Zkrs => "zkrs",
        };
        if !selected(label) {
            continue;
        }
        let server = start(target, extra_cfg);
        let mut ctx = Ctx::new(&server);
        scenario(&mut ctx);
        let lines = ctx.into_lines();
        report(name, label, &lines);
        results.push((target, lines));
    }
    if let [(_, a), (_, z)] = &results[..] {
        if let Some(d) = difference(name, a, z) {
            panic!("{d}");
        }
    }
}

/// A readable line diff (longest common subsequence): unchanged lines get two spaces, lines only in
/// `a` get "- ", lines only in `b` get "+ ". Runs of more than three unchanged lines are elided.
pub fn line_diff(a: &[String], b: &[String]) -> String {
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', &a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            ops.push(('+', &b[j]));
            j += 1;
        } else {
            ops.push(('-', &a[i]));
            i += 1;
        }
    }
    let changed: Vec<bool> = ops.iter().map(|(k, _)| *k != ' ').collect();
    let near = |k: usize| {
        let lo = k.saturating_sub(3);
        let hi = (k + 3).min(ops.len() - 1);
        (lo..=hi).any(|x| changed[x])
    };
    let mut out = String::new();
    let mut elided = false;
    for (k, (kind, line)) in ops.iter().enumerate() {
        if near(k) {
            out.push_str(&format!("{kind} {line}\n"));
            elided = false;
        } else if !elided {
            out.push_str("  ...\n");
            elided = true;
        }
    }
    out
}
