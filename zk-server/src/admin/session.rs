//! The REST data API's client sessions: each is an ordinary ZooKeeper session whose connection
//! is an in-memory pipe instead of a socket. The server's side of the pipe is served by
//! [`conn::serve`], the code every TCP client connection runs, so a REST request is decoded,
//! ordered, ACL-checked, forwarded to the leader (on a follower) and answered exactly as a wire
//! client's would be; the REST side speaks the wire protocol over the other end.
//!
//! Sessions are pooled by who asks ([`SessionKey`]: the HTTP client's address, its Basic
//! credentials, its TLS certificate's ids), at most [`MAX_SESSIONS`] at once; one unused for
//! [`IDLE_CLOSE`] is closed (a closeSession request, as a client's close). A session carries at
//! most [`MAX_PENDING`] requests at once.

use crate::conn::{self, Port};
use crate::driver::DriverMsg;
use crate::settings::Settings;
use crate::stats::ConnCounters;
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info};
use zk_proto::jute::{self, Jute};
use zk_proto::{
    frame::write_frame, xid, AuthPacket, ConnectRequest, ConnectResponse, ErrorCode, FrameDecoder, Id,
    OpCode, ReplyHeader, Request, RequestHeader,
};

/// Internal sessions open at once, over all callers.
pub const MAX_SESSIONS: usize = 32;

/// A session nobody used for this long is closed.
pub const IDLE_CLOSE: Duration = Duration::from_secs(10);

/// Requests one session carries at once; more wait for room (within [`CALL_WAIT`]).
pub const MAX_PENDING: usize = 64;

/// How long a request (or a session's opening) may take, waiting for room included.
pub const CALL_WAIT: Duration = Duration::from_secs(10);

/// The session timeout asked for; the server clamps it to its own bounds.
const SESSION_TIMEOUT_MS: i32 = 30_000;

/// Bytes buffered in each direction of a session's pipe.
const PIPE_BYTES: usize = 256 * 1024;

/// Frames waiting for a session's writer.
const WRITE_QUEUE: usize = 16;

/// The connection ids internal sessions use: above any the client listener gives (it counts from 1).
const CONN_ID_BASE: u64 = 1 << 62;

/// Who a session acts for: requests with the same key share a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The HTTP client's address: the session's `ip` identity, as a wire client from there has.
    pub ip: IpAddr,
    /// `user:password` from HTTP Basic authentication, added as `addauth digest` does.
    pub digest: Option<String>,
    /// The ids the HTTPS client certificate proved (`x509`, and `super` for the configured
    /// super user), as (scheme, id).
    pub cert_ids: Vec<(String, String)>,
}

/// Why a request through an internal session got no reply from the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// [`MAX_SESSIONS`] are open and all in use.
    #[error("all {MAX_SESSIONS} REST sessions are in use; try again")]
    Busy,
    /// The server did not give a session (not serving: no quorum, shutting down, a limit).
    #[error("the server gave no session: {0}")]
    Refused(String),
    /// The digest credentials were refused.
    #[error("authentication failed")]
    AuthFailed,
    /// The session's connection ended before the reply, or no reply came within [`CALL_WAIT`];
    /// a write may or may not have been applied.
    #[error("the connection to the server was lost before its answer")]
    Lost,
}

/// A reply: its error code and, on success, its body.
#[derive(Debug)]
pub struct Reply {
    /// The reply header's error code.
    pub err: ErrorCode,
    /// The body after the header (empty on an error).
    pub body: Bytes,
}

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<Reply>>>>;

/// One internal session.
#[derive(Debug)]
pub struct Session {
    frames: mpsc::Sender<Bytes>,
    pending: Pending,
    room: Arc<Semaphore>,
    next_xid: AtomicI32,
    alive: Arc<AtomicBool>,
    /// The session id, for logs.
    pub id: i64,
    _slot: OwnedSemaphorePermit,
}

impl Session {
    /// Sends `req` and waits for its reply.
    ///
    /// Errors: [`SessionError::Lost`] when the connection ends first or no reply comes within
    /// [`CALL_WAIT`].
    pub async fn call(&self, req: &Request) -> Result<Reply, SessionError> {
        let deadline = tokio::time::Instant::now() + CALL_WAIT;
        let _room = tokio::time::timeout_at(deadline, self.room.clone().acquire_owned())
            .await
            .map_err(|_| SessionError::Lost)?
            .map_err(|_| SessionError::Lost)?;
        // Always positive, after a wrap too: the reader takes xids of 0 and below for pings and
        // notifications.
        let xid = self.next_xid.fetch_add(1, Ordering::Relaxed).rem_euclid(i32::MAX - 1) + 1;
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(xid, tx);
        let mut frame = BytesMut::new();
        write_frame(&mut frame, |out| {
            RequestHeader { xid, op: req.op().code() }.write(out);
            req.encode(out);
        });
        let answer = async {
            self.frames.send(frame.freeze()).await.map_err(|_| SessionError::Lost)?;
            rx.await.map_err(|_| SessionError::Lost)
        };
        let r = tokio::time::timeout_at(deadline, answer).await;
        match r {
            Ok(Ok(reply)) => Ok(reply),
            _ => {
                lock(&self.pending).remove(&xid);
                Err(SessionError::Lost)
            }
        }
    }

    fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the server's side of a pipe needs: what [`conn::serve`] takes for a TCP connection.
#[derive(Debug, Clone)]
pub struct ServerSide {
    /// The driver.
    pub driver: mpsc::Sender<DriverMsg>,
    /// The server's settings.
    pub settings: Arc<Settings>,
    /// The outstanding-request permits every connection shares.
    pub permits: Arc<Semaphore>,
    /// The connection counters.
    pub counters: Arc<ConnCounters>,
}

struct Entry {
    session: Arc<Session>,
    last_used: Instant,
}

/// The internal sessions, by [`SessionKey`].
pub struct SessionPool {
    entries: Mutex<HashMap<SessionKey, Entry>>,
    slots: Arc<Semaphore>,
    next_conn: AtomicU64,
    server: ServerSide,
}

impl std::fmt::Debug for SessionPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionPool").field("open", &lock(&self.entries).len()).finish()
    }
}

impl SessionPool {
    /// An empty pool whose sessions are served by `server`; a task closes idle sessions while
    /// the pool lives.
    pub fn start(server: ServerSide) -> Arc<SessionPool> {
        let pool = Arc::new(SessionPool {
            entries: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(MAX_SESSIONS)),
            next_conn: AtomicU64::new(CONN_ID_BASE),
            server,
        });
        tokio::spawn(reap(Arc::downgrade(&pool)));
        pool
    }

    /// The session for `key`: an open one, or a new one (handshake, then the digest
    /// credentials added).
    ///
    /// Errors: [`SessionError::Busy`] when [`MAX_SESSIONS`] are in use; the errors of opening one.
    pub async fn session(&self, key: &SessionKey) -> Result<Arc<Session>, SessionError> {
        {
            let mut entries = lock(&self.entries);
            if let Some(e) = entries.get_mut(key) {
                if e.session.alive() {
                    e.last_used = Instant::now();
                    return Ok(e.session.clone());
                }
                entries.remove(key);
            }
        }
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(s) => s,
            Err(_) => {
                self.evict_one_unused();
                self.slots.clone().try_acquire_owned().map_err(|_| SessionError::Busy)?
            }
        };
        let conn = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let session =
            Arc::new(tokio::time::timeout(CALL_WAIT, self.open(key, conn, slot)).await.map_err(|_| {
                SessionError::Refused(format!("no session within {} ms", CALL_WAIT.as_millis()))
            })??);
        let mut entries = lock(&self.entries);
        // Another request for the same key may have opened one meanwhile: keep the first.
        let e = entries
            .entry(key.clone())
            .or_insert(Entry { session: session.clone(), last_used: Instant::now() });
        e.last_used = Instant::now();
        Ok(e.session.clone())
    }

    /// Closes the session unused the longest, if one is unused.
    fn evict_one_unused(&self) {
        let mut entries = lock(&self.entries);
        let oldest = entries
            .iter()
            .filter(|(_, e)| Arc::strong_count(&e.session) == 1)
            .min_by_key(|(_, e)| e.last_used)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            entries.remove(&k);
        }
    }

    async fn open(
        &self,
        key: &SessionKey,
        conn: u64,
        slot: OwnedSemaphorePermit,
    ) -> Result<Session, SessionError> {
        let (client, server) = tokio::io::duplex(PIPE_BYTES);
        let (srd, swr) = tokio::io::split(server);
        let s = self.server.clone();
        // The port the caller's address would use; the ip identity is what matters.
        let remote = SocketAddr::new(key.ip, 0);
        let ids =
            key.cert_ids.iter().map(|(scheme, id)| Id { scheme: scheme.clone(), id: id.clone() }).collect();
        tokio::spawn(async move {
            conn::serve(
                srd,
                swr,
                Port::Plain,
                remote,
                conn,
                ids,
                s.driver,
                s.settings,
                s.permits,
                s.counters,
            )
            .await;
        });
        let (mut rd, mut wr) = tokio::io::split(client);
        let decoder = FrameDecoder::new(self.server.settings.max_frame);
        let mut buf = BytesMut::with_capacity(4096);

        let mut hello = BytesMut::new();
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out: SESSION_TIMEOUT_MS,
            session_id: 0,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(true),
        };
        write_frame(&mut hello, |out| req.write(out));
        wr.write_all(&hello).await.map_err(|_| SessionError::Refused("connection closed".into()))?;
        let frame = read_frame(&mut rd, &mut buf, &decoder)
            .await
            .ok_or_else(|| SessionError::Refused("the server closed the connection".into()))?;
        let resp: ConnectResponse = jute::from_bytes(frame)
            .map_err(|e| SessionError::Refused(format!("bad handshake answer: {e}")))?;
        if resp.session_id == 0 {
            return Err(SessionError::Refused("the server refused the session".into()));
        }
        if let Some(cred) = &key.digest {
            let mut f = BytesMut::new();
            write_frame(&mut f, |out| {
                RequestHeader { xid: xid::AUTH, op: OpCode::Auth.code() }.write(out);
                AuthPacket {
                    auth_type: 0,
                    scheme: "digest".into(),
                    auth: Bytes::from(cred.clone().into_bytes()),
                }
                .write(out);
            });
            wr.write_all(&f).await.map_err(|_| SessionError::AuthFailed)?;
            let frame = read_frame(&mut rd, &mut buf, &decoder).await.ok_or(SessionError::AuthFailed)?;
            let h: ReplyHeader = jute::from_bytes(frame).map_err(|_| SessionError::AuthFailed)?;
            if h.xid != xid::AUTH || h.err != 0 {
                return Err(SessionError::AuthFailed);
            }
        }
        let user = key.digest.as_deref().and_then(|c| c.split(':').next()).unwrap_or("-");
        info!("REST session 0x{:x} for {} (digest user {user})", resp.session_id, key.ip);

        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let (frames, frames_rx) = mpsc::channel(WRITE_QUEUE);
        let (closing_tx, closing_rx) = oneshot::channel();
        let ping_every = Duration::from_millis((resp.time_out.max(300) / 3) as u64);
        tokio::spawn(write_loop(wr, frames_rx, ping_every, closing_tx));
        tokio::spawn(read_loop(
            rd,
            buf,
            decoder,
            pending.clone(),
            alive.clone(),
            closing_rx,
            resp.session_id,
        ));
        Ok(Session {
            frames,
            pending,
            room: Arc::new(Semaphore::new(MAX_PENDING)),
            next_xid: AtomicI32::new(1),
            alive,
            id: resp.session_id,
            _slot: slot,
        })
    }
}

/// Every second, closes the sessions unused for [`IDLE_CLOSE`]; ends with the pool.
async fn reap(pool: Weak<SessionPool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Some(pool) = pool.upgrade() else { return };
        let now = Instant::now();
        lock(&pool.entries).retain(|_, e| {
            e.session.alive()
                && (Arc::strong_count(&e.session) > 1 || now.duration_since(e.last_used) < IDLE_CLOSE)
        });
    }
}

async fn read_frame(
    rd: &mut ReadHalf<DuplexStream>,
    buf: &mut BytesMut,
    decoder: &FrameDecoder,
) -> Option<Bytes> {
    loop {
        match decoder.decode(buf) {
            Ok(Some(f)) => return Some(f),
            Ok(None) => {}
            Err(_) => return None,
        }
        match rd.read_buf(buf).await {
            Ok(n) if n > 0 => {}
            _ => return None,
        }
    }
}

/// Writes the callers' frames, a ping when the session has been quiet for `ping_every`, and a
/// closeSession once the session is dropped (then tells the reader, which waits for the end).
async fn write_loop(
    mut wr: WriteHalf<DuplexStream>,
    mut frames: mpsc::Receiver<Bytes>,
    ping_every: Duration,
    closing: oneshot::Sender<()>,
) {
    loop {
        match tokio::time::timeout(ping_every, frames.recv()).await {
            Ok(Some(f)) => {
                if wr.write_all(&f).await.is_err() {
                    return;
                }
            }
            Ok(None) => break,
            Err(_) => {
                let mut f = BytesMut::new();
                write_frame(&mut f, |out| {
                    RequestHeader { xid: xid::PING, op: OpCode::Ping.code() }.write(out)
                });
                if wr.write_all(&f).await.is_err() {
                    return;
                }
            }
        }
    }
    let mut f = BytesMut::new();
    write_frame(&mut f, |out| RequestHeader { xid: 1, op: OpCode::CloseSession.code() }.write(out));
    let _ = wr.write_all(&f).await;
    let _ = closing.send(());
}

/// How long a closed session's reader waits for the server to end the connection.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Hands each reply to its caller until the connection ends (or, once the session is closing,
/// [`CLOSE_WAIT`] has passed); then fails every caller still waiting.
async fn read_loop(
    mut rd: ReadHalf<DuplexStream>,
    mut buf: BytesMut,
    decoder: FrameDecoder,
    pending: Pending,
    alive: Arc<AtomicBool>,
    closing: oneshot::Receiver<()>,
    session: i64,
) {
    let closed = async {
        if closing.await.is_ok() {
            tokio::time::sleep(CLOSE_WAIT).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(closed);
    loop {
        let frame = tokio::select! {
            f = read_frame(&mut rd, &mut buf, &decoder) => f,
            _ = &mut closed => None,
        };
        let Some(mut frame) = frame else { break };
        let Ok(h) = ReplyHeader::read(&mut zk_proto::Reader::new(frame.clone())) else { break };
        // The header is 16 bytes: xid, zxid, err.
        let body = if frame.len() >= 16 { frame.split_off(16) } else { Bytes::new() };
        if h.xid <= 0 {
            // Pings, and notifications (no watch is ever set).
            continue;
        }
        if let Some(tx) = lock(&pending).remove(&h.xid) {
            let err = ErrorCode::from_i32(h.err).unwrap_or(ErrorCode::SystemError);
            let _ = tx.send(Reply { err, body });
        }
    }
    alive.store(false, Ordering::Relaxed);
    lock(&pending).clear();
    debug!("REST session 0x{session:x} ended");
}
