//! One client connection: TLS first on the secure port (or when port unification sees a TLS
//! record), then the handshake or a four-letter word, then one task that decodes requests for the
//! driver and batches the driver's frames onto the socket, polling both sides (`Conn`). Past
//! TLS, plain and secure connections run the same code over the two halves of their stream.

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
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
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
///
/// The future is what an idle plain connection costs for as long as it lives: everything up to
/// the session (and a TLS connection's whole life) runs in a boxed future it drops once done,
/// and then it is the connection's `Conn` alone, not an `async fn`'s state (which keeps its
/// arguments besides).
#[allow(clippy::too_many_arguments)]
pub fn serve_tcp(
    stream: TcpStream,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
    counters: Arc<ConnCounters>,
) -> impl Future<Output = ()> + Send + Unpin {
    ConnTask::Opening(Box::pin(open_tcp(stream, port, remote, id, driver, settings, permits, counters)))
}

/// Everything up to a connection's session, boxed: its state is freed once the session exists.
type Opening<R, W> = Pin<Box<dyn Future<Output = Option<Conn<R, W>>> + Send>>;

/// A plain TCP connection's future: opening it (boxed), then serving it.
// The large variant is the point: it is the connection for as long as it lives (boxing it would
// add an allocation and a pointer); the small one is what sets it up.
#[allow(clippy::large_enum_variant)]
enum ConnTask<R, W> {
    Opening(Opening<R, W>),
    Serving(Conn<R, W>),
    Done,
}

impl<R: ConnReader, W: AsyncWrite + Unpin> Future for ConnTask<R, W> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            match this {
                ConnTask::Opening(open) => match ready!(open.as_mut().poll(cx)) {
                    Some(conn) => *this = ConnTask::Serving(conn),
                    None => *this = ConnTask::Done,
                },
                ConnTask::Serving(conn) => {
                    ready!(conn.poll(cx));
                    *this = ConnTask::Done;
                }
                ConnTask::Done => return Poll::Ready(()),
            }
        }
    }
}

/// [`serve_tcp`] up to the session: a TLS connection is served here to its end (`None`), a
/// plain one is returned once its session exists (or its handshake went to the driver).
#[allow(clippy::too_many_arguments)]
async fn open_tcp(
    stream: TcpStream,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
    counters: Arc<ConnCounters>,
) -> Option<Conn<OwnedReadHalf, OwnedWriteHalf>> {
    let _ = stream.set_nodelay(true);
    let tls = match (&settings.tls, port) {
        (Some(tls), Port::Secure) => Some(tls.clone()),
        (Some(tls), Port::Plain) if settings.port_unification => {
            let mut first = [0u8; 1];
            match tokio::time::timeout(tls.detection_timeout(), stream.peek(&mut first)).await {
                Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => Some(tls.clone()),
                Ok(Ok(1)) => None,
                _ => return None,
            }
        }
        _ => None,
    };
    let Some(tls) = tls else {
        let (rd, wr) = stream.into_split();
        return open(rd, wr, port, remote, id, Vec::new(), driver, settings, permits, counters).await;
    };
    serve_tls(stream, tls, port, remote, id, driver, settings, permits, counters).await;
    None
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
/// buffer of the same size (see [`Conn`]); an idle plain connection with nothing to read
/// holds none ([`ConnReader`], [`IDLE_AFTER`]).
const RECV_BUF_BYTES: usize = 16 * 1024;

/// Bytes a connection that holds no receive buffer reads onto the stack first
/// ([`Conn::read_unbuffered`]): an idle session's ping (12 bytes) or lone request then costs a
/// buffer of its own size, not [`RECV_BUF_BYTES`].
const SMALL_READ_BYTES: usize = 512;

/// The receive buffer a connection starts with, for its handshake or four-letter word.
const HANDSHAKE_BUF_BYTES: usize = 128;

/// Unwritten bytes above which the reader takes no new request from the connection. With the
/// requests already in the server (the global outstanding limit bounds them), this bounds the
/// memory a client that does not read its replies can hold.
const BACKLOG_READ_PAUSE: usize = 1024 * 1024;

/// How long what is queued for a connection the server has closed may take to be written.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// How long after a member stopping asks a connection's task to close it when quiet
/// ([`Out::CloseWhenQuiet`]) the task looks: the ask often comes right behind the answer that
/// left the session with nothing waiting, and a client that sends its next batch as soon as it
/// reads that answer would otherwise meet the close with the batch on the wire (3 creates of a
/// kazoo writer failed so in one of four five-server rolling restarts). Longer than a client's
/// turn from an answer to its next request, short beside a drain.
const QUIET_LOOK_AFTER: Duration = Duration::from_millis(5);

/// Serves one connection, given the two halves of its (plain or TLS) stream, until either side
/// closes it. `port` is where it arrived; `ids` are the identities its transport proved (a client
/// certificate's). Once the session exists, one task reads requests and writes frames: a
/// `Conn` polled for both, so a write waiting on the client never holds up reading its pings.
#[allow(clippy::too_many_arguments)]
pub async fn serve<R, W>(
    rd: R,
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
    if let Some(mut conn) = open(rd, wr, port, remote, id, ids, driver, settings, permits, counters).await {
        std::future::poll_fn(|cx| conn.poll(cx)).await;
    }
}

/// [`serve`] up to the session: the connection, once its handshake went to the driver.
#[allow(clippy::too_many_arguments)]
async fn open<R, W>(
    mut rd: R,
    mut wr: W,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    ids: Vec<Id>,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
    counters: Arc<ConnCounters>,
) -> Option<Conn<R, W>>
where
    R: ConnReader,
    W: AsyncWrite + Unpin,
{
    // Room for a handshake (a ConnectRequest is under 60 bytes) or a four-letter word: the
    // decoder makes room for a larger frame if one comes.
    let mut buf = BytesMut::with_capacity(HANDSHAKE_BUF_BYTES);
    // Boxed, so that its state (the handshake's frames and the waits for the driver) is freed
    // once the session exists instead of sizing the task for as long as the connection lives.
    let opened =
        Box::pin(open_session(&mut rd, &mut buf, &mut wr, port, remote, id, ids, &driver, &settings)).await;
    let (Opened { rx, room, backlog, stats, decoder }, serving) = opened?;
    if buf.is_empty() {
        // Nothing pipelined behind the handshake: the connection holds no receive buffer until
        // bytes come (see `Conn::read_unbuffered`).
        buf = BytesMut::new();
    }
    let room_for_next =
        (settings.global_outstanding_limit as usize + OUTBOX_ROOM_FOR_NEXT).min(room.capacity());
    drop(settings);
    Some(Conn {
        rd,
        wr,
        buf,
        decoder,
        id,
        driver,
        permits,
        counters,
        stats,
        backlog,
        rx,
        room,
        room_for_next,
        // A session that was refused is not read from: what the driver queued is written, then
        // the connection ends.
        read: if serving { ReadSide::Reading } else { ReadSide::Done },
        read_wait: None,
        read_idle: false,
        dispatched: 0,
        quiet_look: None,
        w: WriteSide::default(),
    })
}

/// What a connection has once its handshake went to the driver.
struct Opened {
    rx: FrameReceiver<Out>,
    room: WeakFrameSender<Out>,
    backlog: Arc<Backlog>,
    stats: Arc<ConnStats>,
    decoder: FrameDecoder,
}

/// Reads the first bytes: answers a four-letter word, or takes the handshake, makes the outbox
/// and has the driver open (or resume) the session. `None` when the connection is done; with the
/// outbox, whether the session is served (if not, only what the driver queued is to be written).
#[allow(clippy::too_many_arguments)]
async fn open_session<R, W>(
    rd: &mut R,
    buf: &mut BytesMut,
    wr: &mut W,
    port: Port,
    remote: SocketAddr,
    id: ConnId,
    ids: Vec<Id>,
    driver: &mpsc::Sender<DriverMsg>,
    settings: &Settings,
) -> Option<(Opened, bool)>
where
    R: ConnReader,
    W: AsyncWrite + Unpin,
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
            let arg = if word == "rcvr" {
                // Its token follows (`rcvr 1-100000000`), up to a newline, the end of the
                // stream or RCVR_TOKEN_MAX bytes, within a second (and the connection's one
                // deadline): a bare `rcvr` that sends nothing more is answered then.
                buf.advance(4);
                let until = deadline.min(tokio::time::Instant::now() + std::time::Duration::from_secs(1));
                while buf.len() < fourlw::RCVR_TOKEN_MAX && !buf.contains(&b'\n') {
                    match tokio::time::timeout_at(until, rd.read_buf(buf)).await {
                        Ok(Ok(n)) if n > 0 => {}
                        _ => break,
                    }
                }
                fourlw::rcvr_token(&buf[..buf.len().min(fourlw::RCVR_TOKEN_MAX)])
            } else {
                None
            };
            answer_four_letter(wr, &word, arg, driver, settings, remote).await;
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
    // Weak, so that the outbox closes (and the writer ends) when the driver drops its sender.
    let room = out_tx.downgrade();
    let out = Outbox { tx: out_tx, backlog: backlog.clone() };
    let msg = DriverMsg::Connect { conn: id, remote, req, ids, out, stats: stats.clone(), ready: ready_tx };
    if driver.send(msg).await.is_err() {
        return None;
    }
    // Requests are read only once the session exists: a client may pipeline them behind its
    // handshake. Frames the driver queues meanwhile are written once this returns.
    let serving = ready_rx.await.is_ok();
    Some((Opened { rx: out_rx, room, backlog, stats, decoder }, serving))
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
    wr: &mut W,
    word: &str,
    arg: Option<String>,
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
            .send(DriverMsg::FourLetter { cmd: word.to_string(), asker: remote, arg, reply: tx })
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

    /// [`Self::try_read_now`] into a slice: `None` when this half cannot read without waiting.
    fn try_read_into(&mut self, _buf: &mut [u8]) -> Option<io::Result<usize>> {
        None
    }

    /// `Ready` once a read would find bytes (or the end of the stream), holding no buffer;
    /// otherwise `cx`'s task is woken then. Called only after [`Self::try_read_now`] found
    /// nothing.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Whether bytes have arrived that were not read yet, looked at without reading them or
    /// waiting; false where this half cannot look.
    fn bytes_waiting(&self) -> bool {
        false
    }
}

/// Plain TCP: tokio tells readiness without a read.
impl ConnReader for OwnedReadHalf {
    fn try_read_now(&mut self, buf: &mut BytesMut) -> Option<io::Result<usize>> {
        Some(self.try_read_buf(buf))
    }

    fn try_read_into(&mut self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        Some(self.try_read(buf))
    }

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsRef::<TcpStream>::as_ref(self).poll_read_ready(cx)
    }

    /// A peek of one byte on the non-blocking socket: it leaves the socket's readiness as it
    /// was (nothing is read), so the task's wait for bytes is not disturbed. The end of the
    /// stream or an error is nothing waiting.
    fn bytes_waiting(&self) -> bool {
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        matches!(socket2::SockRef::from(AsRef::<TcpStream>::as_ref(self)).peek(&mut byte), Ok(n) if n > 0)
    }
}

/// TLS: rustls reads records into the reader's buffer as they come; it keeps its buffer.
impl<S: AsyncRead + AsyncWrite + Unpin + Send> ConnReader for tokio::io::ReadHalf<S> {}

/// The reading side's state.
enum ReadSide {
    /// Decoding requests and reading bytes.
    Reading,
    /// A request waits (for the client to read, a permit, or room in the driver's queue) before
    /// the driver takes it: boxed, so that the state of those waits (the request among it) does
    /// not size every connection, idle ones included.
    Waiting(Pin<Box<dyn Future<Output = Result<(), &'static str>> + Send>>),
    /// Reading is over; the driver is being told, in a boxed wait for room in its queue.
    Closing(Pin<Box<dyn Future<Output = ()> + Send>>),
    /// Reading is over and the driver told (or never to be told: a session it refused).
    Done,
}

/// Where the writing side is.
#[derive(Default, PartialEq, Eq)]
enum WritePhase {
    /// Writing frames as the outbox gives them.
    #[default]
    Open,
    /// The outbox ended (or a write failed): shutting the socket's sending side.
    ShuttingDown,
    /// Nothing more to write.
    Done,
}

/// The writing side's state: the frames of one socket write, while it is under way.
#[derive(Default)]
struct WriteSide {
    phase: WritePhase,
    /// A lone frame, written as it is: no buffer for the common case of one reply at a time.
    lone: Bytes,
    /// Frames gathered for one write; no buffer while an idle connection's outbox is empty.
    batch: BytesMut,
    /// Bytes and frames of the write under way (counted as written once it is).
    len: usize,
    frames: u64,
    /// A write is under way.
    active: bool,
    /// The outbox said to close: the connection's writing ends after this write.
    closing: bool,
    /// Once the driver has closed the connection, what is left gets [`CLOSE_FLUSH`] to be
    /// written: a client that does not read is not waited for.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When the current wait for a frame began.
    wait: Option<Instant>,
    /// Whether the last wait for a frame lasted [`IDLE_AFTER`] or more.
    idle: bool,
}

/// One connection once its handshake went to the driver: the socket's two halves, the outbox,
/// and what reading and writing need, polled in one task (an idle session's task was two, about
/// 1 KB and 0.6 KB of futures, before).
struct Conn<R, W> {
    rd: R,
    wr: W,
    /// The receive buffer; none while an idle plain connection waits for bytes.
    buf: BytesMut,
    decoder: FrameDecoder,
    id: ConnId,
    driver: mpsc::Sender<DriverMsg>,
    permits: Arc<Semaphore>,
    /// Where a drop by the client is counted.
    counters: Arc<ConnCounters>,
    stats: Arc<ConnStats>,
    /// Bytes queued for the connection and not yet written.
    backlog: Arc<Backlog>,
    /// The outbox.
    rx: FrameReceiver<Out>,
    /// The outbox again, used only to wait for room in it; weak so it never keeps it open.
    room: WeakFrameSender<Out>,
    /// Free outbox slots wanted before the next request: room for a reply to every request the
    /// server may still hold, and for a burst of events.
    room_for_next: usize,
    read: ReadSide,
    /// When the current wait for bytes began.
    read_wait: Option<Instant>,
    /// Whether the last wait for bytes lasted [`IDLE_AFTER`] or more.
    read_idle: bool,
    /// Requests handed to the driver: a member stopping closes the connection only if the core
    /// has seen them all ([`Out::CloseWhenQuiet`]).
    dispatched: u64,
    /// A member stopping asked to close the connection if quiet, having seen this many requests:
    /// the task looks when the timer ends ([`QUIET_LOOK_AFTER`]).
    quiet_look: Option<(u64, Pin<Box<tokio::time::Sleep>>)>,
    w: WriteSide,
}

/// What one step of reading came to.
enum ReadStep {
    /// Waiting for bytes.
    Pending,
    /// A request must wait before the driver takes it.
    Wait(Waiting),
    /// Reading is over, for this reason.
    End(String),
}

impl<R: ConnReader, W: AsyncWrite + Unpin> Conn<R, W> {
    /// Writes what the outbox gives and reads requests; `Ready` once both are over.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // Writing first: what it frees (outbox slots, backlog bytes) is what a waiting request
        // may need.
        let mut written = self.poll_write_side(cx);
        if self.poll_quiet_look(cx) {
            written = self.poll_write_side(cx);
        }
        let read = self.poll_read_side(cx);
        if written.is_ready() && read.is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn poll_read_side(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match &mut self.read {
                ReadSide::Done => return Poll::Ready(()),
                ReadSide::Closing(tell) => {
                    ready!(tell.as_mut().poll(cx));
                    self.read = ReadSide::Done;
                }
                ReadSide::Waiting(wait) => match ready!(wait.as_mut().poll(cx)) {
                    Ok(()) => {
                        self.dispatched += 1;
                        self.read = ReadSide::Reading;
                    }
                    Err(reason) => self.end_reading(reason.into()),
                },
                ReadSide::Reading => match self.read_step(cx) {
                    ReadStep::Pending => return Poll::Pending,
                    ReadStep::Wait(waiting) => {
                        let waiter = Waiter {
                            driver: self.driver.clone(),
                            permits: self.permits.clone(),
                            room: self.room.clone(),
                            room_for_next: self.room_for_next,
                            backlog: self.backlog.clone(),
                        };
                        self.read = ReadSide::Waiting(Box::pin(dispatch_waiting(waiter, waiting)));
                    }
                    ReadStep::End(reason) => self.end_reading(reason),
                },
            }
        }
    }

    /// Reading is over: the driver hears the connection is gone (the writing side goes on until
    /// the driver drops the outbox).
    fn end_reading(&mut self, reason: String) {
        debug!("connection {} reader stopped: {reason}", self.id);
        self.read = match self.driver.try_send(DriverMsg::Closed { conn: self.id }) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => ReadSide::Done,
            Err(mpsc::error::TrySendError::Full(msg)) => {
                let driver = self.driver.clone();
                ReadSide::Closing(Box::pin(async move {
                    let _ = driver.send(msg).await;
                }))
            }
        };
    }

    /// Hands every whole request in the buffer to the driver, then reads more bytes.
    fn read_step(&mut self, cx: &mut Context<'_>) -> ReadStep {
        loop {
            loop {
                let frame = match self.decoder.decode(&mut self.buf) {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => return ReadStep::End(format!("{e}")),
                };
                self.stats.received.fetch_add(1, Relaxed);
                let received = Instant::now();
                let mut r = Reader::new(frame.clone());
                let Ok(hdr) = RequestHeader::read(&mut r) else {
                    return ReadStep::End("request shorter than its header".into());
                };
                let raw = frame.slice(frame.len() - r.remaining()..);
                let body = Request::decode(hdr.op, &mut r);
                let msg = DriverMsg::Request { conn: self.id, xid: hdr.xid, op: hdr.op, body, raw, received };
                match self.dispatch_now(msg) {
                    Dispatch::Done => self.dispatched += 1,
                    Dispatch::Stopped(reason) => return ReadStep::End(reason.into()),
                    Dispatch::Wait(w) => return ReadStep::Wait(w),
                }
            }
            if let Some(waiting) = self.read_wait {
                // Found nothing last time: bytes are read once readiness says so, as the wait's
                // length tells whether the connection is idle (a wake for the writing side
                // must not read past this and leave that unknown).
                let Poll::Ready(ready) = self.rd.poll_ready(cx) else { return ReadStep::Pending };
                self.read_idle = waiting.elapsed() >= IDLE_AFTER;
                self.read_wait = None;
                if let Err(e) = ready {
                    return self.read_ended(Err(e));
                }
            }
            let attempt = match self.read_unbuffered() {
                Some(read) => Some(read),
                None => {
                    if self.buf.capacity() == self.buf.len() {
                        // No room to read into (a few bytes of a frame's length, or none held
                        // where reads go through a buffer): a receive buffer for what comes.
                        self.buf.reserve(RECV_BUF_BYTES);
                    }
                    self.rd.try_read_now(&mut self.buf)
                }
            };
            let read = match attempt {
                Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Nothing to read: an idle connection waits without a receive buffer,
                    // unless a frame is half here (frames already taken keep their part of the
                    // old one alive as long as they need it).
                    // A buffer read up to its end holds no room but still its allocation (and
                    // the frames' shared count): it goes too.
                    if self.buf.is_empty() && (self.read_idle || self.buf.capacity() == 0) {
                        self.buf = BytesMut::new();
                    }
                    self.read_wait = Some(Instant::now());
                    continue;
                }
                Some(read) => read,
                None => {
                    // A read polled once: it reads nothing until it is ready, so dropping it
                    // when it is not loses nothing.
                    let read = std::pin::pin!(self.rd.read_buf(&mut self.buf));
                    let Poll::Ready(read) = read.poll(cx) else { return ReadStep::Pending };
                    read
                }
            };
            if let Ok(n) = read {
                if n > 0 {
                    continue;
                }
            }
            return self.read_ended(read);
        }
    }

    /// Reads what has arrived onto the stack when the connection holds no receive buffer (an
    /// idle one gave it back, or read it up to its end), and keeps it in a buffer: one of its
    /// exact size when the connection was idle and the read took less than the stack's room (a
    /// ping, a lone request), so that an idle session's occasional frame never costs a
    /// [`RECV_BUF_BYTES`] buffer (whose first page would stay resident in the allocator once
    /// freed); otherwise a full receive buffer, as bytes keep coming. `None` when the
    /// connection holds a buffer, or its reader cannot read without waiting.
    fn read_unbuffered(&mut self) -> Option<io::Result<usize>> {
        if self.buf.capacity() != 0 {
            return None;
        }
        let mut small = [0u8; SMALL_READ_BYTES];
        let n = match self.rd.try_read_into(&mut small)? {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        let got = &small[..n];
        if self.read_idle && n < SMALL_READ_BYTES {
            // A frame cut at its end gets a buffer for the rest from the decoder (or, a length
            // cut short, from `read_step`).
            self.buf = BytesMut::from(got);
        } else {
            self.buf = BytesMut::with_capacity(RECV_BUF_BYTES);
            self.buf.extend_from_slice(got);
        }
        Some(Ok(n))
    }

    /// A read found the end of the stream (`Ok(0)`) or failed.
    fn read_ended(&self, read: io::Result<usize>) -> ReadStep {
        let reason = match read {
            Ok(_) => "closed by client".to_string(),
            Err(e) => format!("read error: {e}"),
        };
        // The server closes a connection by closing its outbox (after closeSession, say): only
        // an end the client chose while it was still served is a drop.
        if !self.backlog.is_closed() {
            self.counters.drop_one();
        }
        ReadStep::End(reason)
    }

    /// Hands `msg` to the driver if nothing needs waiting for: the client has read what it was
    /// sent, a permit of the global outstanding limit is free, and the driver's queue has room.
    fn dispatch_now(&self, msg: DriverMsg) -> Dispatch {
        const CLOSED: &str = "connection closed by the server";
        if self.backlog.is_closed() {
            return Dispatch::Stopped(CLOSED);
        }
        let client_keeps_up = self.backlog.bytes() <= BACKLOG_READ_PAUSE
            && match self.room.has_room(self.room_for_next) {
                Ok(room) => room,
                Err(Closed) => return Dispatch::Stopped(CLOSED),
            };
        if !client_keeps_up {
            return Dispatch::Wait(Waiting { msg, permit_taken: false });
        }
        match self.permits.try_acquire() {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => return Dispatch::Stopped("server shutting down"),
            Err(TryAcquireError::NoPermits) => return Dispatch::Wait(Waiting { msg, permit_taken: false }),
        }
        match self.driver.try_send(msg) {
            Ok(()) => Dispatch::Done,
            Err(mpsc::error::TrySendError::Full(msg)) => Dispatch::Wait(Waiting { msg, permit_taken: true }),
            Err(mpsc::error::TrySendError::Closed(_)) => Dispatch::Stopped("server shutting down"),
        }
    }

    /// Writes what the outbox gives, gathering what is queued into one write; `Ready` once the
    /// outbox ended (or a write failed) and the socket's sending side is shut.
    fn poll_write_side(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match self.w.phase {
                WritePhase::Done => return Poll::Ready(()),
                WritePhase::ShuttingDown => {
                    let _ = ready!(Pin::new(&mut self.wr).poll_shutdown(cx));
                    self.w.phase = WritePhase::Done;
                    return Poll::Ready(());
                }
                WritePhase::Open => {}
            }
            if self.w.active {
                let res = match self.poll_write_out(cx) {
                    Poll::Ready(res) => res,
                    Poll::Pending => {
                        if self.w.deadline.is_none() && self.backlog.poll_closed(cx).is_ready() {
                            self.w.deadline = Some(Box::pin(tokio::time::sleep(CLOSE_FLUSH)));
                        }
                        let timed_out = match &mut self.w.deadline {
                            Some(at) => at.as_mut().poll(cx).is_ready(),
                            None => false,
                        };
                        if !timed_out {
                            return Poll::Pending;
                        }
                        Err(io::ErrorKind::TimedOut.into())
                    }
                };
                self.w.batch.clear();
                // Written or not, the frame goes: even empty, it would keep the buffer it was cut
                // from alive (the core's, shared by many connections' frames).
                self.w.lone = Bytes::new();
                self.w.active = false;
                self.backlog.written(std::mem::take(&mut self.w.len));
                self.stats.sent.fetch_add(std::mem::take(&mut self.w.frames), Relaxed);
                if res.is_err() || self.w.closing {
                    self.end_writing();
                }
                continue;
            }
            let first = match self.rx.poll_recv(cx) {
                Poll::Ready(Some(out)) => {
                    if let Some(waiting) = self.w.wait.take() {
                        self.w.idle = waiting.elapsed() >= IDLE_AFTER;
                    }
                    out
                }
                Poll::Ready(None) => {
                    self.end_writing();
                    continue;
                }
                Poll::Pending => {
                    if self.w.wait.is_none() {
                        self.w.wait = Some(Instant::now());
                        if self.w.idle {
                            self.w.batch = BytesMut::new();
                            self.rx.release_idle();
                        }
                    }
                    return Poll::Pending;
                }
            };
            self.take(first);
            while !self.w.closing && self.w.batch.len() < WRITE_BATCH_BYTES {
                match self.rx.try_recv() {
                    Some(out) => self.take(out),
                    None => break,
                }
            }
            self.w.len = self.w.batch.len() + self.w.lone.len();
            self.w.active = true;
        }
    }

    /// Adds a frame from the outbox to the write being gathered.
    fn take(&mut self, out: Out) {
        let w = &mut self.w;
        match out {
            Out::Reply(b) | Out::Frame(b) => {
                w.frames += 1;
                if w.lone.is_empty() && w.batch.is_empty() {
                    w.lone = b;
                } else {
                    if !w.lone.is_empty() {
                        let earlier = std::mem::take(&mut w.lone);
                        w.batch.reserve(WRITE_BUF_BYTES.max(earlier.len() + b.len()));
                        w.batch.extend_from_slice(&earlier);
                    }
                    w.batch.extend_from_slice(&b);
                }
            }
            Out::Close => w.closing = true,
            // A later ask replaces an earlier one (it counts at least as many requests).
            Out::CloseWhenQuiet(seen) => {
                self.quiet_look = Some((seen, Box::pin(tokio::time::sleep(QUIET_LOOK_AFTER))));
            }
        }
    }

    /// When the look a member stopping asked for is due: closes the connection if it is quiet
    /// ([`Self::quiet`]); true if it did, and the writing side must be polled again to end.
    /// Before the reading side is polled, so that bytes that came meanwhile are seen in the
    /// socket, not read past.
    fn poll_quiet_look(&mut self, cx: &mut Context<'_>) -> bool {
        let Some((seen, at)) = &mut self.quiet_look else { return false };
        if at.as_mut().poll(cx).is_pending() {
            return false;
        }
        let seen = *seen;
        self.quiet_look = None;
        if !self.quiet(seen) {
            return false;
        }
        debug!("connection {} closed while the server stops: quiet", self.id);
        self.w.closing = true;
        self.backlog.close();
        self.end_reading("closed while the server stops".into());
        if !self.w.active && self.w.phase == WritePhase::Open {
            // Waiting for frames: what the outbox still holds (a watch event queued since the
            // ask) goes with the close, as with any close.
            self.end_writing();
        }
        true
    }

    /// Whether the connection is quiet as far as this task can tell, for a member stopping
    /// whose core has seen `seen` requests from it: every request read was handed over and seen,
    /// none waits to be handed over, no part of one is buffered, and no bytes wait in the socket
    /// (where the reader can look without reading: plain TCP; under TLS the bytes rustls holds
    /// are not looked at). A client's bytes that arrive after this look meet the close, as they
    /// would any close: the window is this call's few microseconds, where the core alone saw
    /// only what had reached it through the driver's queue.
    fn quiet(&mut self, seen: u64) -> bool {
        matches!(self.read, ReadSide::Reading)
            && self.dispatched == seen
            && self.buf.is_empty()
            && !self.rd.bytes_waiting()
    }

    /// Writes the lone frame and the batch, taking them from the front as the socket takes
    /// them (a write cut short by the close deadline leaves the rest), then flushes (TLS keeps
    /// what the socket did not take in its own buffer until then; a no-op on TCP).
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let w = &mut self.w;
        while w.lone.has_remaining() {
            let n = ready!(Pin::new(&mut self.wr).poll_write(cx, w.lone.chunk()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            w.lone.advance(n);
        }
        while w.batch.has_remaining() {
            let n = ready!(Pin::new(&mut self.wr).poll_write(cx, w.batch.chunk()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            w.batch.advance(n);
        }
        Pin::new(&mut self.wr).poll_flush(cx)
    }

    /// Writing is over: the outbox takes nothing more, what it still holds is counted as gone,
    /// and the socket's sending side is shut next.
    fn end_writing(&mut self) {
        self.rx.close();
        while let Some(out) = self.rx.try_recv() {
            if let Out::Reply(b) | Out::Frame(b) = out {
                self.backlog.written(b.len());
            }
        }
        self.w.batch = BytesMut::new();
        self.w.lone = Bytes::new();
        self.w.deadline = None;
        self.w.phase = WritePhase::ShuttingDown;
    }
}

/// What a request that must wait needs of its connection (its own handles, so that the wait
/// can be boxed apart from the connection).
struct Waiter {
    driver: mpsc::Sender<DriverMsg>,
    permits: Arc<Semaphore>,
    room: WeakFrameSender<Out>,
    room_for_next: usize,
    backlog: Arc<Backlog>,
}

/// What [`Conn::dispatch_now`] did with a request.
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

/// [`Conn::dispatch_now`]'s waiting path: waits while the client has not read what it was sent
/// (too many bytes, or an outbox nearly full of frames), for a permit of the global outstanding
/// limit (every request holds one until its reply is queued, so a flood of requests waits here
/// instead of piling up in memory), and for room in the driver's queue. The connection's writing
/// goes on meanwhile: its task polls both.
async fn dispatch_waiting(cx: Waiter, waiting: Waiting) -> Result<(), &'static str> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `body` as a frame: its length, then itself.
    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    /// An exists request with `xid`, as a frame.
    fn exists(xid: i32) -> Vec<u8> {
        let mut body = jute::to_bytes(&RequestHeader { xid, op: zk_proto::OpCode::Exists.code() });
        body.extend(jute::to_bytes(&zk_proto::ExistsRequest { path: "/".into(), watch: false }));
        frame(&body)
    }

    /// The next message the connection sends the driver, within a second.
    async fn next_msg(rx: &mut mpsc::Receiver<DriverMsg>) -> DriverMsg {
        tokio::time::timeout(Duration::from_secs(1), rx.recv()).await.expect("a message").expect("open")
    }

    /// Queues `body` as a reply frame, counted in the backlog as the driver counts it.
    fn reply(out: &Outbox, body: &'static [u8]) {
        let f = Bytes::from(frame(body));
        out.backlog.queued(f.len());
        out.tx.try_send(Out::Reply(f)).unwrap();
    }

    /// Whether the connection's task sends the driver nothing for a moment.
    async fn nothing_for_a_moment(rx: &mut mpsc::Receiver<DriverMsg>) -> bool {
        tokio::time::timeout(Duration::from_millis(50), rx.recv()).await.is_err()
    }

    /// A member stopping asks a connection's task to close it if quiet (`Out::CloseWhenQuiet`):
    /// the task declines while a request it handed over is not among those the core counted,
    /// while bytes of a request wait in the socket unread, and while it holds part of one; it
    /// closes (writing what was queued first, and telling the driver) once none of these holds.
    /// The socket and the task are real; this runtime runs one task at a time, so the client's
    /// bytes are in the socket before the task looks.
    #[test]
    fn a_stopping_members_close_waits_for_what_the_task_read() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (driver, mut rx) = mpsc::channel(16);
            let dir = tempfile::tempdir().unwrap();
            let settings = Arc::new(
                Settings::from_config(&crate::config::ServerConfig::standalone_default(dir.path())).unwrap(),
            );
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (stream, remote) = listener.accept().await.unwrap();
            tokio::spawn(serve_tcp(
                stream,
                Port::Plain,
                remote,
                7,
                driver,
                settings,
                Arc::new(Semaphore::new(100)),
                Arc::new(ConnCounters::default()),
            ));
            let req = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 0,
                time_out: 30_000,
                session_id: 0,
                passwd: Bytes::from_static(&[0; 16]),
                read_only: Some(false),
            };
            client.write_all(&frame(&jute::to_bytes(&req))).await.unwrap();
            let DriverMsg::Connect { out, ready, .. } = next_msg(&mut rx).await else {
                panic!("a handshake")
            };
            ready.send(()).unwrap();
            client.write_all(&exists(1)).await.unwrap();
            assert!(matches!(next_msg(&mut rx).await, DriverMsg::Request { xid: 1, .. }));

            // The core counted none: the request it has not seen yet keeps the connection.
            out.tx.try_send(Out::CloseWhenQuiet(0)).unwrap();
            assert!(nothing_for_a_moment(&mut rx).await, "not closed");
            // A request in the socket, unread when the task looks: kept, then read. (The task
            // takes the ask; the request comes while this thread, the runtime's only one, sleeps
            // past the look's time, so the task looks before it reads.)
            out.tx.try_send(Out::CloseWhenQuiet(1)).unwrap();
            tokio::task::yield_now().await;
            client.write_all(&exists(2)).await.unwrap();
            std::thread::sleep(QUIET_LOOK_AFTER * 4);
            assert!(matches!(next_msg(&mut rx).await, DriverMsg::Request { xid: 2, .. }), "kept and read");
            // Half a request read: kept; the rest comes.
            let third = exists(3);
            client.write_all(&third[..5]).await.unwrap();
            assert!(nothing_for_a_moment(&mut rx).await);
            out.tx.try_send(Out::CloseWhenQuiet(2)).unwrap();
            assert!(nothing_for_a_moment(&mut rx).await, "not closed while part of a request is held");
            client.write_all(&third[5..]).await.unwrap();
            assert!(matches!(next_msg(&mut rx).await, DriverMsg::Request { xid: 3, .. }));

            // Asked right behind an answer: a client that sends its next request as soon as it
            // reads the answer is not closed with that request on the wire.
            reply(&out, b"first");
            out.tx.try_send(Out::CloseWhenQuiet(3)).unwrap();
            let mut first = vec![0u8; frame(b"first").len()];
            tokio::time::timeout(Duration::from_secs(1), client.read_exact(&mut first))
                .await
                .unwrap()
                .unwrap();
            client.write_all(&exists(4)).await.unwrap();
            assert!(matches!(next_msg(&mut rx).await, DriverMsg::Request { xid: 4, .. }), "kept and read");
            assert!(nothing_for_a_moment(&mut rx).await, "not closed after it either");

            // Quiet: the reply queued before the ask is written, then the close.
            reply(&out, b"answer");
            out.tx.try_send(Out::CloseWhenQuiet(4)).unwrap();
            assert!(matches!(next_msg(&mut rx).await, DriverMsg::Closed { conn: 7 }));
            let mut got = Vec::new();
            tokio::time::timeout(Duration::from_secs(1), client.read_to_end(&mut got))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(got, frame(b"answer"), "the answer, then the end of the stream");
        });
    }

    /// An idle connection's memory is mostly its task, as large as the largest state of its
    /// future: the handshake, the waits a request may need and the close are boxed so that they
    /// do not size it, and reading and writing share it (two tasks of 976 and 560 bytes before).
    /// This catches a change that makes every connection's task grow again.
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
            assert!(size <= 320, "a connection's task is {size} bytes");
        });
    }
}
