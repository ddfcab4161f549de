//! One client connection: the handshake or a four-letter word, then a reader that decodes requests
//! for the driver and a writer that batches the driver's frames onto the socket.

use crate::core::ConnId;
use crate::driver::{Backlog, DriverMsg, Out, Outbox};
use crate::fourlw;
use crate::settings::Settings;
use crate::stats::{ConnCounters, ConnStats};
use bytes::{Buf, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tracing::{debug, info};
use zk_proto::jute::{self, Jute, Reader};
use zk_proto::{ConnectRequest, FrameDecoder, Request, RequestHeader};

/// Frames a connection's outbox holds beyond its replies (which the outstanding limit bounds):
/// room for bursts of watch events. A client that lets more pile up is not reading and is closed.
const OUTBOX_EVENTS: usize = 16 * 1024;

/// Free outbox slots the reader waits for before it takes the next request. A client whose own
/// writes trigger more watch events than it reads (Debian's load_gen does) is slowed down this way,
/// as Apache throttles it, instead of its outbox overflowing.
const OUTBOX_ROOM_FOR_NEXT: usize = 1024;

/// Bytes the writer gathers into one socket write.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// Unwritten bytes above which the reader takes no new request from the connection. With the
/// requests already in the server (the global outstanding limit bounds them), this bounds the
/// memory a client that does not read its replies can hold.
const BACKLOG_READ_PAUSE: usize = 1024 * 1024;

/// How long what is queued for a connection the server has closed may take to be written.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);

/// Serves one accepted connection until either side closes it.
pub async fn serve(
    stream: TcpStream,
    remote: SocketAddr,
    id: ConnId,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
    counters: Arc<ConnCounters>,
) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let handshake_wait = Duration::from_millis(settings.max_session_timeout_ms.max(1000) as u64);

    // The first four bytes are either a four-letter word or the handshake's length.
    if !matches!(
        tokio::time::timeout(handshake_wait, read_at_least(&mut rd, &mut buf, 4)).await,
        Ok(Ok(true))
    ) {
        return;
    }
    if let Ok(word) = std::str::from_utf8(&buf[..4]) {
        if fourlw::WORDS.contains(&word) {
            let word = word.to_string();
            answer_four_letter(wr, &word, &driver, &settings, remote).await;
            return;
        }
    }
    let decoder = FrameDecoder::new(settings.max_frame);
    let frame = loop {
        match decoder.decode(&mut buf) {
            Ok(Some(f)) => break f,
            Ok(None) => match tokio::time::timeout(handshake_wait, rd.read_buf(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            },
            Err(e) => {
                info!("closing {remote}: handshake {e}");
                return;
            }
        }
    };
    let req: ConnectRequest = match jute::from_bytes(frame) {
        Ok(r) => r,
        Err(e) => {
            info!("closing {remote}: bad handshake: {e}");
            return;
        }
    };

    let stats = Arc::new(ConnStats::new());
    stats.received.fetch_add(1, Relaxed);
    // Replies: at most one for each request in the server; events: the rest.
    let capacity = settings.global_outstanding_limit as usize + OUTBOX_EVENTS;
    let (out_tx, out_rx) = mpsc::channel(capacity);
    let backlog = Arc::new(Backlog::default());
    let (ready_tx, ready_rx) = oneshot::channel();
    let writer = tokio::spawn(write_loop(wr, out_rx, backlog.clone(), stats.clone()));
    // Weak, so that the outbox closes (and the writer ends) when the driver drops its sender.
    let room = out_tx.downgrade();
    let out = Outbox { tx: out_tx, backlog: backlog.clone() };
    let msg = DriverMsg::Connect { conn: id, remote, req, out, stats: stats.clone(), ready: ready_tx };
    if driver.send(msg).await.is_err() {
        return;
    }
    // Requests are read only once the session exists: a client may pipeline them behind its handshake.
    if ready_rx.await.is_err() {
        let _ = writer.await;
        return;
    }

    let room_for_next = (settings.global_outstanding_limit as usize + OUTBOX_ROOM_FOR_NEXT).min(capacity);
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
    let _ = driver.send(DriverMsg::Closed { conn: id }).await;
    let _ = writer.await;
}

async fn read_at_least(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
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

async fn answer_four_letter(
    mut wr: OwnedWriteHalf,
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
    room: &'a mpsc::WeakSender<Out>,
    /// Free outbox slots wanted before the next request: room for a reply to every request the
    /// server may still hold, and for a burst of events.
    room_for_next: usize,
    /// Bytes queued for the connection and not yet written.
    backlog: &'a Backlog,
    /// Where a drop by the client is counted.
    counters: &'a ConnCounters,
}

async fn read_loop(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    buf: &mut BytesMut,
    decoder: FrameDecoder,
    cx: ReaderCtx<'_>,
) -> String {
    let ReaderCtx { id, driver, permits, stats, room, room_for_next, backlog, counters } = cx;
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
            // Wait while the client has not read what it was sent: too many bytes, or an outbox
            // nearly full of frames.
            backlog.room(BACKLOG_READ_PAUSE).await;
            let Some(outbox) = room.upgrade() else {
                return "connection closed by the server".into();
            };
            if backlog.is_closed() {
                return "connection closed by the server".into();
            }
            match outbox.reserve_many(room_for_next).await {
                Ok(slots) => drop(slots),
                Err(_) => return "connection closed by the server".into(),
            }
            drop(outbox);
            // Every request holds one permit of the global outstanding limit until its reply is
            // queued, so a flood of requests waits here instead of piling up in memory.
            match permits.acquire().await {
                Ok(p) => p.forget(),
                Err(_) => return "server shutting down".into(),
            }
            let msg = DriverMsg::Request { conn: id, xid: hdr.xid, op: hdr.op, body, raw, received };
            if driver.send(msg).await.is_err() {
                return "server shutting down".into();
            }
        }
        let reason = match rd.read_buf(buf).await {
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

async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Out>,
    backlog: Arc<Backlog>,
    stats: Arc<ConnStats>,
) {
    let mut batch = BytesMut::with_capacity(64 * 1024);
    let mut closing = false;
    // Once the driver has closed the connection, what is left gets CLOSE_FLUSH to be written: a
    // client that does not read is not waited for.
    let mut deadline: Option<tokio::time::Instant> = None;
    while !closing {
        let Some(first) = rx.recv().await else { break };
        let mut frames = 0u64;
        let mut take = |out: Out, batch: &mut BytesMut| match out {
            Out::Reply(b) | Out::Frame(b) => {
                frames += 1;
                batch.extend_from_slice(&b);
                false
            }
            Out::Close => true,
        };
        closing = take(first, &mut batch);
        while !closing && batch.len() < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(out) => closing = take(out, &mut batch),
                Err(_) => break,
            }
        }
        let len = batch.len();
        let res = loop {
            if let Some(at) = deadline {
                break match tokio::time::timeout_at(at, write_all(&mut wr, &mut batch)).await {
                    Ok(res) => res,
                    Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
                };
            }
            tokio::select! {
                res = write_all(&mut wr, &mut batch) => break res,
                () = backlog.closed() => deadline = Some(tokio::time::Instant::now() + CLOSE_FLUSH),
            }
        };
        backlog.written(len);
        stats.sent.fetch_add(frames, Relaxed);
        if res.is_err() {
            break;
        }
    }
    rx.close();
    while let Ok(out) = rx.try_recv() {
        if let Out::Reply(b) | Out::Frame(b) = out {
            backlog.written(b.len());
        }
    }
    let _ = wr.shutdown().await;
}

async fn write_all(wr: &mut OwnedWriteHalf, batch: &mut BytesMut) -> std::io::Result<()> {
    while batch.has_remaining() {
        let n = wr.write(batch).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        batch.advance(n);
    }
    batch.clear();
    Ok(())
}
