//! One client connection: TLS first on the secure port (or when port unification sees a TLS
//! record), then the handshake or a four-letter word, then a reader that decodes requests for the
//! driver and a writer that batches the driver's frames onto the socket. Past TLS, plain and
//! secure connections run the same code over the two halves of their stream.

use crate::core::ConnId;
use crate::driver::{Backlog, DriverMsg, Out, Outbox};
use crate::fourlw;
use crate::frame_queue::{frame_queue, Closed, FrameReceiver, WeakFrameSender};
use crate::settings::Settings;
use crate::stats::{ConnCounters, ConnStats};
use bytes::{Buf, Bytes, BytesMut};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore, TryAcquireError};
use tracing::{debug, info, warn};
use zk_proto::jute::{self, Jute, Reader};
use zk_proto::{ConnectRequest, FrameDecoder, Id, Request, RequestHeader};

/// The first byte of a TLS record carrying a handshake message (a ClientHello): what port
/// unification tells TLS by. A ZooKeeper handshake starts with its length's high byte (0 for any
/// frame under 16 MiB) and a four-letter word with a letter.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Where a connection arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The plain client port (clientPort), which also takes TLS with `client.portUnification`.
    Plain,
    /// The TLS client port (secureClientPort).
    Secure,
}

/// Serves one accepted TCP connection until either side closes it: TLS first when it arrived on
/// the secure port or, with port unification, when its first byte starts a TLS record.
#[allow(clippy::too_many_arguments)]
pub async fn serve_tcp(
    stream: TcpStream,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
    counters: Arc<ConnCounters>,
) {
    let _ = stream.set_nodelay(true);
    let tls = match (&settings.tls, port) {
        (Some(tls), Port::Secure) => Some(tls.clone()),
        (Some(tls), Port::Plain) if settings.port_unification => {
            let mut first = [0u8; 1];
            match tokio::time::timeout(tls.detection_timeout(), stream.peek(&mut first)).await {
                Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => Some(tls.clone()),
                Ok(Ok(1)) => None,
                _ => return,
            }
        }
        _ => None,
    };
    let Some(tls) = tls else {
        let (rd, wr) = stream.into_split();
        serve(rd, wr, port, remote, id, Vec::new(), driver, settings, permits, counters).await;
        return;
    };
    // Boxed: the TLS handshake's state would otherwise be part of every connection's task, TLS
    // or not, for as long as it lives (it doubled a plain connection's task).
    Box::pin(serve_tls(stream, tls, port, remote, id, driver, settings, permits, counters)).await;
}

/// [`serve_tcp`] for a connection that speaks TLS: the handshake, the client certificate's ids,
/// then [`serve`] over the two halves of the TLS stream.
#[allow(clippy::too_many_arguments)]
async fn serve_tls(
    stream: TcpStream,
    tls: Arc<crate::tls::ServerTls>,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
    counters: Arc<ConnCounters>,
) {
    let wait = handshake_wait(&settings);
    let accepted = match tokio::time::timeout(wait, tls.acceptor().accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            // webpki verifies X.509 v3 certificates only; openssl 3.0's `x509 -req` without
            // extensions makes v1 ones, which Java accepts: say what to do about it.
            let hint = if e.to_string().contains("UnsupportedCertVersion") {
                " (an X.509 v1 certificate: zkrs accepts v3 ones; reissue it with extensions, e.g. \
                 openssl x509 -req ... -extfile <(echo basicConstraints=CA:FALSE))"
            } else {
                ""
            };
            info!("closing {remote}: TLS handshake failed: {e}{hint}");
            let _ = driver.try_send(DriverMsg::TlsFailed);
            return;
        }
        Err(_) => {
            info!("closing {remote}: no TLS handshake within {} ms", wait.as_millis());
            return;
        }
    };
    let ids = match tls.peer_ids(accepted.get_ref().1.peer_certificates()) {
        Ok(ids) => ids,
        Err(e) => {
            warn!("closing {remote}: client certificate: {e}");
            return;
        }
    };
    if let Some(x509) = ids.iter().find(|i| i.scheme == "x509") {
        info!("authenticated {remote} by its certificate as x509:{}", x509.id);
    }
    let (rd, wr) = tokio::io::split(accepted);
    serve(rd, wr, port, remote, id, ids, driver, settings, permits, counters).await;
}

/// How long a client may take over its TLS handshake (the ZooKeeper handshake after it has
/// `nio.sessionlessCnxnTimeout`).
fn handshake_wait(settings: &Settings) -> Duration {
    Duration::from_millis(settings.max_session_timeout_ms.max(1000) as u64)
}

/// Frames a connection's outbox holds beyond its replies (which the outstanding limit bounds):
/// room for bursts of watch events. A client that lets more pile up is not reading and is closed.
const OUTBOX_EVENTS: usize = 16 * 1024;

/// Free outbox slots the reader waits for before it takes the next request. A client whose own
/// writes trigger more watch events than it reads (Debian's load_gen does) is slowed down this way,
/// as Apache throttles it, instead of its outbox overflowing.
const OUTBOX_ROOM_FOR_NEXT: usize = 1024;

/// Bytes the writer gathers into one socket write.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// The writer's gathering buffer when several frames are waiting (it grows to
/// [`WRITE_BATCH_BYTES`] and a frame more). It is released when the outbox is empty and the
/// connection idle ([`IDLE_AFTER`]).
const WRITE_BUF_BYTES: usize = 64 * 1024;

/// A connection that waited this long for its last request (or, its writer, for its last
/// frame) is idle: it gives its buffer back before it waits again. A busy one keeps it, since
/// a fresh buffer for every request cost a client sending one request at a time about 14% more
/// server CPU per request (bench/cpu-per-op.sh, `get`, 1 in flight).
const IDLE_AFTER: Duration = Duration::from_millis(500);

/// The reader's receive buffer while bytes are coming in. Frames cut at its end move to a new
/// buffer of the same size (see [`read_loop`]); an idle plain connection with nothing to read
/// holds none ([`ConnReader`], [`IDLE_AFTER`]).
const RECV_BUF_BYTES: usize = 16 * 1024;

/// Unwritten bytes above which the reader takes no new request from the connection. With the
/// requests already in the server (the global outstanding limit bounds them), this bounds the
/// memory a client that does not read its replies can hold.
const BACKLOG_READ_PAUSE: usize = 1024 * 1024;

/// How long what is queued for a connection the server has closed may take to be written.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// Serves one connection, given the two halves of its (plain or TLS) stream, until either side
/// closes it. `port` is where it arrived; `ids` are the identities its transport proved (a client
/// certificate's).
#[allow(clippy::too_many_arguments)]
pub async fn serve<R, W>(
    mut rd: R,
    wr: W,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    ids: Vec<Id>,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
    counters: Arc<ConnCounters>,
) where
    R: ConnReader,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut buf = BytesMut::with_capacity(RECV_BUF_BYTES);
    // Boxed, so that its state (the handshake's frames and the waits for the driver) is freed
    // once the session exists instead of sizing the task for as long as the connection lives.
    let opened =
        Box::pin(open_session(&mut rd, &mut buf, wr, port, remote, id, ids, &driver, &settings)).await;
    let Some(Opened { writer, room, backlog, stats, decoder }) = opened else {
        return;
    };
    let room_for_next =
        (settings.global_outstanding_limit as usize + OUTBOX_ROOM_FOR_NEXT).min(room.capacity());
    let cx = ReaderCtx {
        id,
        driver: &driver,
        permits: &permits,
        stats: &stats,
        room: &room,
        room_for_next,
        backlog: &backlog,
        counters: &counters,
    };
    let reason = read_loop(&mut rd, &mut buf, decoder, cx).await;
    drop(room);
    debug!("connection {remote} reader stopped: {reason}");
    // Boxed as the handshake is: a wait for room in the driver's queue, at the end only.
    let _ = Box::pin(driver.send(DriverMsg::Closed { conn: id })).await;
    let _ = writer.await;
}

/// What a connection has once its session exists.
struct Opened {
    writer: tokio::task::JoinHandle<()>,
    room: WeakFrameSender<Out>,
    backlog: Arc<Backlog>,
    stats: Arc<ConnStats>,
    decoder: FrameDecoder,
}

/// Reads the first bytes: answers a four-letter word, or takes the handshake, starts the
/// writer and has the driver open (or resume) the session. `None` when the connection is done.
#[allow(clippy::too_many_arguments)]
async fn open_session<R, W>(
    rd: &mut R,
    buf: &mut BytesMut,
    wr: W,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    ids: Vec<Id>,
    driver: &mpsc::Sender<DriverMsg>,
    settings: &Settings,
) -> Option<Opened>
where
    R: ConnReader,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // One deadline for everything before the session, however the bytes trickle in: a client
    // sending a byte now and then must not hold its connection (and its maxClientCnxns slot).
    let deadline = tokio::time::Instant::now() + settings.sessionless_cnxn_timeout;

    // The first four bytes are either a four-letter word or the handshake's length.
    if !matches!(tokio::time::timeout_at(deadline, read_at_least(rd, buf, 4)).await, Ok(Ok(true))) {
        debug!("closing {remote}: nothing within {} ms", settings.sessionless_cnxn_timeout.as_millis());
        return None;
    }
    if let Ok(word) = std::str::from_utf8(&buf[..4]) {
        if fourlw::WORDS.contains(&word) {
            let word = word.to_string();
            answer_four_letter(wr, &word, driver, settings, remote).await;
            return None;
        }
    }
    let decoder = FrameDecoder::new(settings.max_frame);
    let frame = loop {
        match decoder.decode(buf) {
            Ok(Some(f)) => break f,
            Ok(None) => match tokio::time::timeout_at(deadline, rd.read_buf(buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => return None,
                Err(_) => {
                    info!(
                        "closing {remote}: no complete handshake within {} ms (nio.sessionlessCnxnTimeout)",
                        settings.sessionless_cnxn_timeout.as_millis()
                    );
                    return None;
                }
            },
            Err(e) => {
                info!("closing {remote}: handshake {e}");
                return None;
            }
        }
    };
    let req: ConnectRequest = match jute::from_bytes(frame) {
        Ok(r) => r,
        Err(e) => {
            info!("closing {remote}: bad handshake: {e}");
            return None;
        }
    };

    let stats = Arc::new(if port == Port::Secure { ConnStats::on_secure_port() } else { ConnStats::new() });
    stats.received.fetch_add(1, Relaxed);
    // Replies: at most one for each request in the server; events: the rest.
    let capacity = settings.global_outstanding_limit as usize + OUTBOX_EVENTS;
    let (out_tx, out_rx) = frame_queue(capacity);
    let backlog = Arc::new(Backlog::default());
    let (ready_tx, ready_rx) = oneshot::channel();
    let writer = tokio::spawn(write_loop(wr, out_rx, backlog.clone(), stats.clone()));
    // Weak, so that the outbox closes (and the writer ends) when the driver drops its sender.
    let room = out_tx.downgrade();
    let out = Outbox { tx: out_tx, backlog: backlog.clone() };
    let msg = DriverMsg::Connect { conn: id, remote, req, ids, out, stats: stats.clone(), ready: ready_tx };
    if driver.send(msg).await.is_err() {
        return None;
    }
    // Requests are read only once the session exists: a client may pipeline them behind its handshake.
    if ready_rx.await.is_err() {
        let _ = writer.await;
        return None;
    }
    Some(Opened { writer, room, backlog, stats, decoder })
}

async fn read_at_least<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut BytesMut,
    n: usize,
) -> std::io::Result<bool> {
    while buf.len() < n {
        if rd.read_buf(buf).await? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn answer_four_letter<W: AsyncWrite + Unpin>(
    mut wr: W,
    word: &str,
    driver: &mpsc::Sender<DriverMsg>,
    settings: &Settings,
    remote: SocketAddr,
) {
    let text = if !settings.four_letter_allowed(word) {
        info!("four-letter word {word} from {remote} refused: not in 4lw.commands.whitelist");
        format!("{word} is not executed because it is not in the whitelist.\n")
    } else if word == "ruok" {
        "imok".to_string()
    } else {
        let (tx, rx) = oneshot::channel();
        if driver
            .send(DriverMsg::FourLetter { cmd: word.to_string(), asker: remote, reply: tx })
            .await
            .is_err()
        {
            return;
        }
        rx.await.unwrap_or_default()
    };
    let _ = wr.write_all(text.as_bytes()).await;
    let _ = wr.shutdown().await;
}

/// What the reader needs besides the socket.
struct ReaderCtx<'a> {
    id: ConnId,
    driver: &'a mpsc::Sender<DriverMsg>,
    permits: &'a Arc<Semaphore>,
    stats: &'a ConnStats,
    /// The connection's own outbox, used only to wait for room in it; weak so it never keeps the
    /// outbox open by itself.
    room: &'a WeakFrameSender<Out>,
    /// Free outbox slots wanted before the next request: room for a reply to every request the
    /// server may still hold, and for a burst of events.
    room_for_next: usize,
    /// Bytes queued for the connection and not yet written.
    backlog: &'a Backlog,
    /// Where a drop by the client is counted.
    counters: &'a ConnCounters,
}

/// The reading half of a client connection. An idle session waits here for its next request,
/// most of its life: a half that can wait for bytes without a buffer lets an idle connection
/// hold none meanwhile. With the receive buffer held, the writer's buffer kept and the TLS
/// handshake's state in every task, an idle session cost 15.8 KB of resident memory; without
/// them, about 6 KB (bench/idle-sessions.sh, bench/RESULTS.md).
pub trait ConnReader: AsyncRead + Unpin + Send {
    /// Reads what has arrived into `buf` without waiting: `Some(Err(WouldBlock))` when nothing
    /// has; `None` when this half cannot read without waiting (it then keeps its buffer).
    fn try_read_now(&mut self, _buf: &mut BytesMut) -> Option<io::Result<usize>> {
        None
    }

    /// Waits until a read would find bytes (or the end of the stream), holding no buffer.
    /// Called only after [`Self::try_read_now`] found nothing.
    fn ready(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        std::future::ready(Ok(()))
    }
}

/// Plain TCP: tokio tells readiness without a read.
impl ConnReader for OwnedReadHalf {
    fn try_read_now(&mut self, buf: &mut BytesMut) -> Option<io::Result<usize>> {
        Some(self.try_read_buf(buf))
    }

    fn ready(&mut self) -> impl Future<Output = io::Result<()>> + Send {
        self.readable()
    }
}

/// TLS: rustls reads records into the reader's buffer as they come; it keeps its buffer.
impl<S: AsyncRead + AsyncWrite + Unpin + Send> ConnReader for tokio::io::ReadHalf<S> {}

async fn read_loop<R: ConnReader>(
    rd: &mut R,
    buf: &mut BytesMut,
    decoder: FrameDecoder,
    cx: ReaderCtx<'_>,
) -> String {
    let ReaderCtx { id, stats, backlog, counters, .. } = cx;
    // Whether the last wait for bytes lasted IDLE_AFTER or more.
    let mut idle = false;
    loop {
        loop {
            let frame = match decoder.decode(buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return format!("{e}"),
            };
            stats.received.fetch_add(1, Relaxed);
            let received = Instant::now();
            let mut r = Reader::new(frame.clone());
            let Ok(hdr) = RequestHeader::read(&mut r) else {
                return "request shorter than its header".into();
            };
            let raw = frame.slice(frame.len() - r.remaining()..);
            let body = Request::decode(hdr.op, &mut r);
            let msg = DriverMsg::Request { conn: id, xid: hdr.xid, op: hdr.op, body, raw, received };
            // Most requests wait for nothing and are handed over here; one that must wait does
            // so in a boxed future, so that the state of those waits (the request among it) does
            // not size the task of every connection, idle ones included.
            let waiting = match dispatch_now(&cx, msg) {
                Dispatch::Done => continue,
                Dispatch::Stopped(reason) => return reason.into(),
                Dispatch::Wait(w) => w,
            };
            if let Err(reason) = Box::pin(dispatch_waiting(&cx, waiting)).await {
                return reason.into();
            }
        }
        let read = match rd.try_read_now(buf) {
            Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                // Nothing to read: an idle connection waits without a receive buffer, unless a
                // frame is half here (frames already taken keep their part of the old one alive
                // as long as they need it).
                if idle && buf.is_empty() {
                    *buf = BytesMut::new();
                }
                let waiting = Instant::now();
                let ready = rd.ready().await;
                idle = waiting.elapsed() >= IDLE_AFTER;
                match ready {
                    Ok(()) => {
                        if buf.capacity() == 0 {
                            *buf = BytesMut::with_capacity(RECV_BUF_BYTES);
                        }
                        continue;
                    }
                    Err(e) => Err(e),
                }
            }
            Some(read) => read,
            None => rd.read_buf(buf).await,
        };
        let reason = match read {
            Ok(0) => "closed by client".to_string(),
            Ok(_) => continue,
            Err(e) => format!("read error: {e}"),
        };
        // The server closes a connection by closing its outbox (after closeSession, say): only
        // an end the client chose while it was still served is a drop.
        if !backlog.is_closed() {
            counters.drop_one();
        }
        return reason;
    }
}

/// What [`dispatch_now`] did with a request.
enum Dispatch {
    /// Handed to the driver.
    Done,
    /// The connection is done with, for this reason.
    Stopped(&'static str),
    /// It must wait (for the client to read, a permit, or room in the driver's queue).
    Wait(Waiting),
}

/// A request that must wait before the driver takes it.
struct Waiting {
    msg: DriverMsg,
    /// It holds its outstanding permit already.
    permit_taken: bool,
}

/// Hands `msg` to the driver if nothing needs waiting for: the client has read what it was
/// sent, a permit of the global outstanding limit is free, and the driver's queue has room.
fn dispatch_now(cx: &ReaderCtx<'_>, msg: DriverMsg) -> Dispatch {
    const CLOSED: &str = "connection closed by the server";
    if cx.backlog.is_closed() {
        return Dispatch::Stopped(CLOSED);
    }
    let client_keeps_up = cx.backlog.bytes() <= BACKLOG_READ_PAUSE
        && match cx.room.has_room(cx.room_for_next) {
            Ok(room) => room,
            Err(Closed) => return Dispatch::Stopped(CLOSED),
        };
    if !client_keeps_up {
        return Dispatch::Wait(Waiting { msg, permit_taken: false });
    }
    match cx.permits.try_acquire() {
        Ok(p) => p.forget(),
        Err(TryAcquireError::Closed) => return Dispatch::Stopped("server shutting down"),
        Err(TryAcquireError::NoPermits) => return Dispatch::Wait(Waiting { msg, permit_taken: false }),
    }
    match cx.driver.try_send(msg) {
        Ok(()) => Dispatch::Done,
        Err(mpsc::error::TrySendError::Full(msg)) => Dispatch::Wait(Waiting { msg, permit_taken: true }),
        Err(mpsc::error::TrySendError::Closed(_)) => Dispatch::Stopped("server shutting down"),
    }
}

/// [`dispatch_now`]'s waiting path: waits while the client has not read what it was sent (too
/// many bytes, or an outbox nearly full of frames), for a permit of the global outstanding
/// limit (every request holds one until its reply is queued, so a flood of requests waits here
/// instead of piling up in memory), and for room in the driver's queue.
async fn dispatch_waiting(cx: &ReaderCtx<'_>, waiting: Waiting) -> Result<(), &'static str> {
    let Waiting { msg, permit_taken } = waiting;
    if !permit_taken {
        cx.backlog.room(BACKLOG_READ_PAUSE).await;
        if cx.backlog.is_closed() || cx.room.room(cx.room_for_next).await.is_err() {
            return Err("connection closed by the server");
        }
        match cx.permits.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => return Err("server shutting down"),
        }
    }
    cx.driver.send(msg).await.map_err(|_| "server shutting down")
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: FrameReceiver<Out>,
    backlog: Arc<Backlog>,
    stats: Arc<ConnStats>,
) {
    // Frames gathered for one write; no buffer while an idle connection's outbox is empty, and
    // none for a lone frame, which is written as it is.
    let mut batch = BytesMut::new();
    // Whether the last wait for a frame lasted IDLE_AFTER or more.
    let mut idle = false;
    let mut closing = false;
    // Once the driver has closed the connection, what is left gets CLOSE_FLUSH to be written: a
    // client that does not read is not waited for.
    let mut deadline: Option<tokio::time::Instant> = None;
    while !closing {
        let first = match rx.try_recv() {
            Some(out) => out,
            None => {
                if idle {
                    batch = BytesMut::new();
                    rx.release_idle();
                }
                let waiting = Instant::now();
                let Some(out) = rx.recv().await else { break };
                idle = waiting.elapsed() >= IDLE_AFTER;
                out
            }
        };
        let mut frames = 0u64;
        let mut lone: Option<Bytes> = None;
        let mut take = |out: Out, lone: &mut Option<Bytes>, batch: &mut BytesMut| match out {
            Out::Reply(b) | Out::Frame(b) => {
                frames += 1;
                match lone.take() {
                    None if batch.is_empty() => *lone = Some(b),
                    earlier => {
                        if let Some(earlier) = earlier {
                            batch.reserve(WRITE_BUF_BYTES.max(earlier.len() + b.len()));
                            batch.extend_from_slice(&earlier);
                        }
                        batch.extend_from_slice(&b);
                    }
                }
                false
            }
            Out::Close => true,
        };
        closing = take(first, &mut lone, &mut batch);
        while !closing && batch.len() < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Some(out) => closing = take(out, &mut lone, &mut batch),
                None => break,
            }
        }
        let mut lone = lone.unwrap_or_default();
        let len = batch.len() + lone.len();
        let res = loop {
            let write = async {
                write_all(&mut wr, &mut lone).await?;
                write_all(&mut wr, &mut batch).await
            };
            if let Some(at) = deadline {
                break match tokio::time::timeout_at(at, write).await {
                    Ok(res) => res,
                    Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
                };
            }
            tokio::select! {
                res = write => break res,
                () = backlog.closed() => deadline = Some(tokio::time::Instant::now() + CLOSE_FLUSH),
            }
        };
        batch.clear();
        backlog.written(len);
        stats.sent.fetch_add(frames, Relaxed);
        if res.is_err() {
            break;
        }
    }
    rx.close();
    while let Some(out) = rx.try_recv() {
        if let Out::Reply(b) | Out::Frame(b) = out {
            backlog.written(b.len());
        }
    }
    let _ = wr.shutdown().await;
}

/// Writes what `bytes` holds (nothing for an empty one), taking it from the front as the
/// socket takes it, so that a write cut short by the close deadline leaves the rest.
async fn write_all<W: AsyncWrite + Unpin, B: Buf>(wr: &mut W, bytes: &mut B) -> std::io::Result<()> {
    if !bytes.has_remaining() {
        return Ok(());
    }
    while bytes.has_remaining() {
        let n = wr.write(bytes.chunk()).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        bytes.advance(n);
    }
    // TLS keeps what the socket did not take in its own buffer until flushed (a no-op on TCP).
    wr.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle connection's memory is mostly its two tasks, each as large as the largest state
    /// of its future: the handshake, the waits a request may need and the close are boxed so
    /// that they do not size them (1,568 bytes for a plain connection's task before, 976 after;
    /// a TLS handshake's state in every task once doubled it). This catches a change that makes
    /// every connection's task grow again.
    #[test]
    fn connection_tasks_stay_small() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (driver, _rx) = mpsc::channel(1);
            let dir = tempfile::tempdir().unwrap();
            let settings = Arc::new(
                Settings::from_config(&crate::config::ServerConfig::standalone_default(dir.path())).unwrap(),
            );
            let stream = TcpStream::connect(addr).await.unwrap();
            let task = serve_tcp(
                stream,
                Port::Plain,
                addr,
                1,
                driver,
                settings,
                Arc::new(Semaphore::new(1)),
                Arc::new(ConnCounters::default()),
            );
            let size = std::mem::size_of_val(&task);
            assert!(size <= 1200, "a connection's reading task is {size} bytes");
            let (_tx, rx) = frame_queue::<Out>(10);
            let (_, wr) = TcpStream::connect(addr).await.unwrap().into_split();
            let writer = write_loop(wr, rx, Arc::new(Backlog::default()), Arc::new(ConnStats::new()));
            let size = std::mem::size_of_val(&writer);
            assert!(size <= 600, "a connection's writing task is {size} bytes");
        });
    }
}
