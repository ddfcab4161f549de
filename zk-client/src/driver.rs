//! The tokio task that runs one [`Session`]: owns the socket and the clock, feeds the core, and
//! routes its events to the futures and streams the [`crate::Client`] handed out.

use crate::core::{
    Event, HostPort, Op, OpId, Response, Session, SessionState, WatchedEvent, WatcherId, RW_PROBE_MAX_ANSWER,
    RW_PROBE_REQUEST, RW_PROBE_TIMEOUT,
};
use crate::error::Error;
use crate::tls::ClientTls;
use bytes::{Buf, Bytes, BytesMut};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The reading half of a connection, plain or TLS.
type ReadHalf = Box<dyn AsyncRead + Unpin + Send>;
/// The writing half of a connection, plain or TLS.
type WriteHalf = Box<dyn AsyncWrite + Unpin + Send>;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// Where a registered watcher's events go.
pub(crate) enum WatchSink {
    /// A one-shot watch: one event, then done.
    Once(oneshot::Sender<WatchedEvent>),
    /// A persistent watch: a bounded stream.
    Stream(mpsc::Sender<WatchedEvent>),
}

/// A request from a client handle.
pub(crate) struct Command {
    pub op: Op,
    pub reply: oneshot::Sender<Result<Response, Error>>,
    pub watch: Option<WatchSink>,
}

/// What the handles read without asking the task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub session_id: i64,
    pub password: Bytes,
    pub timeout: Duration,
    /// The server of the latest connection ("host:port" as in the connect string) and how
    /// many connections the session had made when it was made (1 for the first).
    pub connection: Option<(String, u64)>,
    /// Why the SASL exchange failed, once the session is AUTHFAILED because of it.
    pub sasl_failure: Option<String>,
}

struct PendingOp {
    reply: oneshot::Sender<Result<Response, Error>>,
    watch: Option<WatchSink>,
}

pub(crate) struct Driver {
    pub core: Session,
    pub rx: mpsc::Receiver<Command>,
    pub state_tx: watch::Sender<SessionState>,
    pub events_tx: broadcast::Sender<SessionState>,
    pub shared: Arc<Mutex<Shared>>,
    /// TLS for every connection (and read-write probe), when set.
    pub tls: Option<ClientTls>,
}

const READ_CHUNK: usize = 64 * 1024;

async fn read_some(rd: &mut Option<ReadHalf>, buf: &mut [u8]) -> std::io::Result<usize> {
    match rd {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Writes some of `buf` (returning how much), or, when it is empty, flushes what TLS still holds
/// of earlier writes (returning 0; nothing to do on plain TCP). One poll of either is cancel-safe,
/// unlike a write followed by a flush in one future.
async fn write_some(wr: &mut Option<WriteHalf>, buf: &[u8]) -> std::io::Result<usize> {
    match wr {
        Some(w) if buf.is_empty() => w.flush().await.map(|()| 0),
        Some(w) => w.write(buf).await,
        None => std::future::pending().await,
    }
}

/// A read-write probe running alongside the session: its id and what the server answered.
type ProbeFuture = Pin<Box<dyn Future<Output = (u64, Option<Vec<u8>>)> + Send>>;

/// Connects to `hp`, with TLS when `tls` is set: the two halves of the stream.
async fn dial(hp: &HostPort, tls: Option<&ClientTls>) -> std::io::Result<(ReadHalf, WriteHalf)> {
    let s = TcpStream::connect((hp.host.as_str(), hp.port)).await?;
    let _ = s.set_nodelay(true);
    match tls {
        None => {
            let (r, w) = s.into_split();
            Ok((Box::new(r), Box::new(w)))
        }
        Some(tls) => {
            let (connector, name) = tls.connector_for(&hp.host).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{} is not a TLS server name", hp.host),
                )
            })?;
            let stream = connector.connect(name, s).await?;
            let (r, w) = tokio::io::split(stream);
            Ok((Box::new(r), Box::new(w)))
        }
    }
}

/// Asks `hp` whether it serves writes: connects, sends `isro`, reads until the server closes.
/// `None` when any step fails or takes longer than [`RW_PROBE_TIMEOUT`].
async fn probe(hp: HostPort, tls: Option<ClientTls>) -> Option<Vec<u8>> {
    let (mut rd, mut wr) =
        tokio::time::timeout(RW_PROBE_TIMEOUT, dial(&hp, tls.as_ref())).await.ok()?.ok()?;
    let answer = async {
        wr.write_all(RW_PROBE_REQUEST).await?;
        wr.flush().await?;
        let mut buf = Vec::with_capacity(RW_PROBE_MAX_ANSWER);
        // Bounded: a server sending more than an answer's worth is cut off.
        (&mut rd).take(RW_PROBE_MAX_ANSWER as u64).read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    tokio::time::timeout(RW_PROBE_TIMEOUT, answer).await.ok()?.ok()
}

async fn probe_done(p: &mut Option<ProbeFuture>) -> (u64, Option<Vec<u8>>) {
    match p {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

impl Driver {
    pub async fn run(mut self) {
        let mut rd: Option<ReadHalf> = None;
        let mut wr: Option<WriteHalf> = None;
        let mut wbuf = BytesMut::new();
        let mut rbuf = vec![0u8; READ_CHUNK];
        let mut pending: HashMap<OpId, PendingOp> = HashMap::new();
        let mut watchers: HashMap<WatcherId, WatchSink> = HashMap::new();
        let mut handles_alive = true;
        let mut probing: Option<ProbeFuture> = None;
        // Bytes handed to the connection since its last flush (TLS may still hold some).
        let mut unflushed = false;
        loop {
            // Everything the core produced: frames out, a close, events.
            while let Some(f) = self.core.poll_transmit() {
                wbuf.extend_from_slice(&f);
            }
            if self.core.poll_close() {
                rd = None;
                if let Some(mut w) = wr.take() {
                    // Best effort: the bytes still buffered (a closeSession) are worth a try.
                    if !wbuf.is_empty() {
                        let _ = tokio::time::timeout(Duration::from_millis(100), w.write_all(&wbuf)).await;
                    }
                    let _ = w.shutdown().await;
                }
                wbuf.clear();
            }
            self.dispatch(&mut pending, &mut watchers);
            if self.core.state().is_terminal() && pending.is_empty() {
                return;
            }
            if rd.is_none() {
                let now = Instant::now();
                if let Some(hp) = self.core.poll_connect(now) {
                    let limit = self.core.connect_timeout();
                    match tokio::time::timeout(limit, dial(&hp, self.tls.as_ref())).await {
                        Ok(Ok((r, w))) => {
                            rd = Some(r);
                            wr = Some(w);
                            wbuf.clear();
                            tracing::debug!("connected to {hp}");
                            if let Ok(mut sh) = self.shared.lock() {
                                let n = sh.connection.as_ref().map_or(0, |c| c.1) + 1;
                                let server = if hp.host.contains(':') {
                                    format!("[{}]:{}", hp.host, hp.port)
                                } else {
                                    format!("{}:{}", hp.host, hp.port)
                                };
                                sh.connection = Some((server, n));
                            }
                            self.core.handle_connected(Instant::now());
                        }
                        Ok(Err(e)) => {
                            tracing::debug!("connect to {hp} failed: {e}");
                            self.core.handle_connection_lost(Instant::now());
                        }
                        Err(_) => {
                            tracing::debug!("connect to {hp} timed out");
                            self.core.handle_connection_lost(Instant::now());
                        }
                    }
                    continue;
                }
            }
            if probing.is_none() {
                if let Some(p) = self.core.poll_probe(Instant::now()) {
                    tracing::debug!("probing {} for being read-write", p.host);
                    let id = p.id;
                    let tls = self.tls.clone();
                    probing = Some(Box::pin(async move { (id, probe(p.host, tls).await) }));
                }
            }
            let deadline = self.core.poll_timeout();
            let can_take = handles_alive && self.core.has_capacity();
            tokio::select! {
                r = read_some(&mut rd, &mut rbuf) => {
                    let now = Instant::now();
                    match r {
                        Ok(0) | Err(_) => {
                            rd = None;
                            wr = None;
                            wbuf.clear();
                            self.core.handle_connection_lost(now);
                        }
                        Ok(n) => self.core.handle_bytes(now, &rbuf[..n]),
                    }
                }
                w = write_some(&mut wr, &wbuf), if !wbuf.is_empty() || unflushed => {
                    match w {
                        // A flush: everything is out.
                        Ok(0) if wbuf.is_empty() => unflushed = false,
                        Ok(n) if n > 0 => {
                            wbuf.advance(n);
                            unflushed = true;
                        }
                        // Err, or a socket that takes no more bytes.
                        _ => {
                            rd = None;
                            wr = None;
                            wbuf.clear();
                            self.core.handle_connection_lost(Instant::now());
                        }
                    }
                }
                cmd = self.rx.recv(), if can_take => {
                    let now = Instant::now();
                    match cmd {
                        Some(c) => self.submit(c, now, &mut pending),
                        None => {
                            // Every handle is gone: end the session like close() would.
                            handles_alive = false;
                            if !self.core.state().is_terminal() {
                                let _ = self.core.submit(Op::Close, now);
                            }
                        }
                    }
                }
                (id, answer) = probe_done(&mut probing) => {
                    probing = None;
                    self.core.handle_probe_answer(Instant::now(), id, answer.as_deref());
                }
                _ = sleep_until(deadline) => self.core.handle_timeout(Instant::now()),
            }
        }
    }

    fn submit(&mut self, c: Command, now: Instant, pending: &mut HashMap<OpId, PendingOp>) {
        match self.core.submit(c.op, now) {
            Ok(id) => {
                pending.insert(id, PendingOp { reply: c.reply, watch: c.watch });
            }
            // Cannot happen (commands are only taken with capacity), but a refused op is not lost.
            Err(_) => {
                let _ = c.reply.send(Err(Error::ThrottledOp));
            }
        }
    }

    fn dispatch(
        &mut self,
        pending: &mut HashMap<OpId, PendingOp>,
        watchers: &mut HashMap<WatcherId, WatchSink>,
    ) {
        while let Some(ev) = self.core.poll_event() {
            match ev {
                Event::Completed { id, result, watch_registered } => {
                    let Some(p) = pending.remove(&id) else { continue };
                    if watch_registered {
                        if let Some(sink) = p.watch {
                            watchers.insert(id, sink);
                        }
                    }
                    let _ = p.reply.send(result.map_err(Error::from));
                }
                Event::Watch { watcher, event, retained } => {
                    let keep = match watchers.get(&watcher) {
                        Some(WatchSink::Stream(tx)) => match tx.try_send(event) {
                            Ok(()) => retained,
                            Err(mpsc::error::TrySendError::Full(_)) => {
                                // A consumer this far behind would make the whole session wait
                                // (pings included); its stream ends instead of growing forever.
                                tracing::warn!("persistent watch {watcher} stream full, closing it");
                                false
                            }
                            Err(mpsc::error::TrySendError::Closed(_)) => false,
                        },
                        Some(WatchSink::Once(_)) => {
                            if let Some(WatchSink::Once(tx)) = watchers.remove(&watcher) {
                                let _ = tx.send(event);
                            }
                            false
                        }
                        None => false,
                    };
                    if !keep && watchers.remove(&watcher).is_some() && retained {
                        self.core.forget_watcher(watcher);
                    }
                }
                Event::State(s) => {
                    if let Ok(mut sh) = self.shared.lock() {
                        sh.session_id = self.core.session_id();
                        sh.password = self.core.session_password().clone();
                        sh.timeout = self.core.negotiated_timeout();
                        sh.sasl_failure = self.core.sasl_failure().map(str::to_string);
                    }
                    self.state_tx.send_replace(s);
                    let _ = self.events_tx.send(s);
                }
            }
        }
    }
}
