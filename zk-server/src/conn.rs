//! One client connection: the handshake or a four-letter word, then a reader that decodes requests
//! for the driver and a writer that batches the driver's frames onto the socket.

use crate::core::ConnId;
use crate::driver::{DriverMsg, Out};
use crate::fourlw;
use crate::settings::Settings;
use crate::stats::ConnStats;
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

/// Serves one accepted connection until either side closes it.
pub async fn serve(
    stream: TcpStream,
    remote: SocketAddr,
    id: ConnId,
    driver: mpsc::Sender<DriverMsg>,
    settings: Arc<Settings>,
    permits: Arc<Semaphore>,
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
    let capacity = settings.global_outstanding_limit as usize + OUTBOX_EVENTS;
    let (out_tx, out_rx) = mpsc::channel(capacity);
    let (ready_tx, ready_rx) = oneshot::channel();
    let writer = tokio::spawn(write_loop(wr, out_rx, permits.clone(), stats.clone()));
    // Weak, so that the outbox closes (and the writer ends) when the driver drops its sender.
    let room = out_tx.downgrade();
    let msg =
        DriverMsg::Connect { conn: id, remote, req, out: out_tx, stats: stats.clone(), ready: ready_tx };
    if driver.send(msg).await.is_err() {
        return;
    }
    // Requests are read only once the session exists: a client may pipeline them behind its handshake.
    if ready_rx.await.is_err() {
        let _ = writer.await;
        return;
    }

    let cx = ReaderCtx { id, driver: &driver, permits: &permits, stats: &stats, room: &room };
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
}

async fn read_loop(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    buf: &mut BytesMut,
    decoder: FrameDecoder,
    cx: ReaderCtx<'_>,
) -> String {
    let ReaderCtx { id, driver, permits, stats, room } = cx;
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
            // Wait while this connection's outbox is nearly full of frames the client has not read.
            let Some(outbox) = room.upgrade() else {
                return "connection closed by the server".into();
            };
            match outbox.reserve_many(OUTBOX_ROOM_FOR_NEXT).await {
                Ok(slots) => drop(slots),
                Err(_) => return "connection closed by the server".into(),
            }
            drop(outbox);
            // Every request holds one permit of the global outstanding limit until its reply is
            // written, so a flood of requests waits here instead of piling up in memory.
            match permits.acquire().await {
                Ok(p) => p.forget(),
                Err(_) => return "server shutting down".into(),
            }
            let msg = DriverMsg::Request { conn: id, xid: hdr.xid, op: hdr.op, body, raw, received };
            if driver.send(msg).await.is_err() {
                return "server shutting down".into();
            }
        }
        match rd.read_buf(buf).await {
            Ok(0) => return "closed by client".into(),
            Ok(_) => {}
            Err(e) => return format!("read error: {e}"),
        }
    }
}

async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Out>,
    permits: Arc<Semaphore>,
    stats: Arc<ConnStats>,
) {
    let mut batch = BytesMut::with_capacity(64 * 1024);
    let mut closing = false;
    while !closing {
        let Some(first) = rx.recv().await else { break };
        let mut replies = 0usize;
        let mut frames = 0u64;
        let mut take = |out: Out, batch: &mut BytesMut| match out {
            Out::Reply(b) => {
                replies += 1;
                frames += 1;
                batch.extend_from_slice(&b);
                false
            }
            Out::Frame(b) => {
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
        let res = write_all(&mut wr, &mut batch).await;
        permits.add_permits(replies);
        stats.sent.fetch_add(frames, Relaxed);
        if res.is_err() {
            break;
        }
    }
    // Replies that will never be written still hold permits.
    rx.close();
    while let Ok(out) = rx.try_recv() {
        if matches!(out, Out::Reply(_)) {
            permits.add_permits(1);
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
