//! A small blocking ZooKeeper client on zk-proto, for tests that need exact control of what goes on
//! the wire (raw frames, xids, bad input) and exact replies (header zxid and err, every Stat field).

use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use zk_proto::jute::{self, Jute, Reader};
use zk_proto::*;

/// One decoded reply: header plus the body bytes (empty unless err == 0 or multi).
#[derive(Debug, Clone)]
pub struct Reply {
    /// The reply header.
    pub header: ReplyHeader,
    /// The body after the header.
    pub body: Bytes,
}

impl Reply {
    /// The error code.
    pub fn err(&self) -> ErrorCode {
        ErrorCode::from_i32(self.header.err).expect("known error code")
    }
    /// Decodes the body as `T`.
    pub fn decode<T: Jute>(&self) -> T {
        jute::from_bytes(self.body.clone()).expect("decode reply body")
    }
}

/// A raw session: connect handshake done, requests sent one by one or pipelined.
pub struct RawClient {
    /// The socket.
    pub stream: TcpStream,
    /// The handshake answer.
    pub session: ConnectResponse,
    next_xid: i32,
    /// Watch notifications received while waiting for replies, in arrival order.
    pub events: VecDeque<(ReplyHeader, WatcherEvent)>,
    buf: BytesMut,
}

impl RawClient {
    /// Opens a new session with the given requested timeout.
    pub fn connect(addr: SocketAddr, timeout_ms: i32) -> RawClient {
        Self::connect_with(
            addr,
            ConnectRequest { time_out: timeout_ms, read_only: Some(false), ..Default::default() },
        )
        .expect("handshake")
    }

    /// Opens a new session on a socket whose receive buffer is `recv_buffer` bytes (set before
    /// it connects, so the kernel never grows it): a client that stops reading then fills its
    /// side after a known amount, whatever the machine's `tcp_rmem` allows.
    pub fn connect_with_recv_buffer(addr: SocketAddr, timeout_ms: i32, recv_buffer: u32) -> RawClient {
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("runtime");
        let stream = rt
            .block_on(async {
                let socket = if addr.is_ipv4() {
                    tokio::net::TcpSocket::new_v4()
                } else {
                    tokio::net::TcpSocket::new_v6()
                }?;
                socket.set_recv_buffer_size(recv_buffer)?;
                socket.connect(addr).await?.into_std()
            })
            .expect("connect");
        stream.set_nonblocking(false).expect("blocking socket");
        stream.set_read_timeout(Some(Duration::from_secs(15))).expect("read timeout");
        stream.set_nodelay(true).expect("nodelay");
        let req = ConnectRequest { time_out: timeout_ms, read_only: Some(false), ..Default::default() };
        let (mut c, resp) = Self::handshake(stream, &req).expect("handshake");
        c.session = resp.expect("connect response");
        c
    }

    /// Sends `req` as the handshake; `None` when the server closed without answering.
    pub fn connect_with(addr: SocketAddr, req: ConnectRequest) -> Option<RawClient> {
        let (mut c, resp) = Self::handshake(Self::open(addr).expect("connect"), &req)?;
        c.session = resp.expect("connect response");
        Some(c)
    }

    fn open(addr: SocketAddr) -> std::io::Result<TcpStream> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(15)))?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// Sends the handshake; `None` when the connection closed before an answer came.
    fn handshake(
        stream: TcpStream,
        req: &ConnectRequest,
    ) -> Option<(RawClient, Result<ConnectResponse, DecodeError>)> {
        let mut c = RawClient {
            stream,
            session: Default::default(),
            next_xid: 1,
            events: VecDeque::new(),
            buf: BytesMut::new(),
        };
        c.try_send_frame(&jute::to_bytes(req))?;
        let frame = c.read_frame()?;
        let resp = jute::from_bytes(frame);
        Some((c, resp))
    }

    /// Opens a session over `stream`, a connection the caller made (from a chosen source address,
    /// say); `None` when the server closed it without answering the handshake.
    pub fn connect_over(stream: TcpStream, timeout_ms: i32) -> Option<RawClient> {
        stream.set_read_timeout(Some(Duration::from_secs(15))).ok()?;
        stream.set_nodelay(true).ok()?;
        let req = ConnectRequest { time_out: timeout_ms, read_only: Some(false), ..Default::default() };
        let (mut c, resp) = Self::handshake(stream, &req)?;
        c.session = resp.ok()?;
        Some(c)
    }

    /// As [`Self::connect_with`], but `None` instead of a panic when the server cannot be reached
    /// or the connection breaks during the handshake (a server that is down, starting or being
    /// killed), for clients that fail over.
    pub fn try_connect_with(addr: SocketAddr, req: ConnectRequest) -> Option<RawClient> {
        let (mut c, resp) = Self::handshake(Self::open(addr).ok()?, &req)?;
        c.session = resp.ok()?;
        Some(c)
    }

    /// Sends `req` with the next xid and returns that xid; `None` when the connection is broken
    /// (instead of the panic of [`Self::send`]).
    pub fn try_send_request(&mut self, req: &Request) -> Option<i32> {
        let xid = self.next_xid;
        self.next_xid += 1;
        let mut payload = Vec::new();
        RequestHeader { xid, op: req.op().code() }.write(&mut payload);
        req.encode(&mut payload);
        self.try_send_frame(&payload)?;
        Some(xid)
    }

    /// As [`Self::send_frame`]; `None` when the connection is broken.
    pub fn try_send_frame(&mut self, payload: &[u8]) -> Option<()> {
        let mut out = (payload.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        self.stream.write_all(&out).ok()
    }

    /// Writes one length-prefixed frame.
    pub fn send_frame(&mut self, payload: &[u8]) {
        let mut out = (payload.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        self.stream.write_all(&out).expect("write frame");
    }

    /// Writes raw bytes with no framing (for malformed-input tests).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write raw");
    }

    /// Reads one frame; `None` on EOF or reset.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let _ = self.buf.split_to(4);
                    return Some(self.buf.split_to(len).freeze());
                }
            }
            let mut tmp = [0u8; 65536];
            match self.stream.read(&mut tmp) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
            }
        }
    }

    /// Sends a request with the next xid and returns that xid.
    pub fn send(&mut self, req: &Request) -> i32 {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.send_with_xid(xid, req.op().code(), req);
        xid
    }

    /// Sends a request under an explicit xid and opcode.
    pub fn send_with_xid(&mut self, xid: i32, op: i32, req: &Request) {
        let mut payload = Vec::new();
        RequestHeader { xid, op }.write(&mut payload);
        req.encode(&mut payload);
        self.send_frame(&payload);
    }

    /// Reads frames until the reply for `xid`, queueing notifications. `None` if the server closed.
    pub fn recv(&mut self, xid: i32) -> Option<Reply> {
        loop {
            let frame = self.read_frame()?;
            let mut r = Reader::new(frame);
            let header = ReplyHeader::read(&mut r).expect("reply header");
            if header.xid == xid::NOTIFICATION {
                let ev = WatcherEvent::read(&mut r).expect("watcher event");
                self.events.push_back((header, ev));
                continue;
            }
            assert_eq!(header.xid, xid, "replies must come in request order");
            return Some(Reply { header, body: r.rest().clone() });
        }
    }

    /// Sends `req` and waits for its reply; panics if the server closed.
    pub fn call(&mut self, req: Request) -> Reply {
        let xid = self.send(&req);
        self.recv(xid).expect("server closed the connection")
    }

    /// Waits for the next watch notification (up to the read timeout).
    pub fn next_event(&mut self) -> Option<WatcherEvent> {
        if let Some((_, e)) = self.events.pop_front() {
            return Some(e);
        }
        let frame = self.read_frame()?;
        let mut r = Reader::new(frame);
        let header = ReplyHeader::read(&mut r).ok()?;
        assert_eq!(header.xid, xid::NOTIFICATION, "unexpected reply while waiting for an event");
        WatcherEvent::read(&mut r).ok()
    }

    /// Whether the server has closed the connection (reads EOF within `wait`).
    pub fn is_closed_within(&mut self, wait: Duration) -> bool {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut tmp = [0u8; 1024];
        let closed = loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break false
                }
                Err(_) => break true,
            }
        };
        self.stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        closed
    }

    /// Adds digest (or other) credentials; returns the error code of the auth reply.
    pub fn add_auth(&mut self, scheme: &str, auth: &[u8]) -> Option<ErrorCode> {
        let req = Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.into(),
            auth: Bytes::copy_from_slice(auth),
        });
        self.send_with_xid(xid::AUTH, OpCode::Auth.code(), &req);
        self.recv(xid::AUTH).map(|r| r.err())
    }

    /// Sends closeSession and waits for the reply.
    pub fn close(mut self) -> Option<Reply> {
        let xid = self.send(&Request::CloseSession);
        self.recv(xid)
    }

    // Convenience wrappers used by many scenarios.

    /// create with world:anyone ALL.
    pub fn create(&mut self, path: &str, data: &[u8], mode: CreateMode) -> Reply {
        self.call(Request::Create(CreateRequest {
            path: path.into(),
            data: Some(Bytes::copy_from_slice(data)),
            acl: open_acl(),
            flags: mode.code(),
        }))
    }

    /// create of a persistent node with `acl`.
    pub fn create_with_acl(&mut self, path: &str, data: &[u8], acl: Vec<Acl>) -> Reply {
        self.call(Request::Create(CreateRequest {
            path: path.into(),
            data: Some(Bytes::copy_from_slice(data)),
            acl,
            flags: CreateMode::Persistent.code(),
        }))
    }

    /// getData.
    pub fn get_data(&mut self, path: &str, watch: bool) -> Reply {
        self.call(Request::GetData(GetDataRequest { path: path.into(), watch }))
    }

    /// setData.
    pub fn set_data(&mut self, path: &str, data: &[u8], version: i32) -> Reply {
        self.call(Request::SetData(SetDataRequest {
            path: path.into(),
            data: Some(Bytes::copy_from_slice(data)),
            version,
        }))
    }

    /// delete.
    pub fn delete(&mut self, path: &str, version: i32) -> Reply {
        self.call(Request::Delete(DeleteRequest { path: path.into(), version }))
    }

    /// exists.
    pub fn exists(&mut self, path: &str, watch: bool) -> Reply {
        self.call(Request::Exists(ExistsRequest { path: path.into(), watch }))
    }

    /// getChildren2.
    pub fn children2(&mut self, path: &str, watch: bool) -> Reply {
        self.call(Request::GetChildren2(GetChildren2Request { path: path.into(), watch }))
    }
}

/// world:anyone with all permissions.
pub fn open_acl() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}
