//! The quorum port: the leader's connections to its learners, and a learner's to its leader.
//!
//! Quorum packets are back to back on the stream with no outer framing. Right after a SNAP packet
//! the leader sends its database as a raw stream (Apache's snapshot serialization), which the
//! reading side hands to a [`SnapshotSink`] until the sink says the stream ended; packets follow
//! again after it. Each connection has a bounded outbox: a peer that does not read what it is sent
//! is cut off rather than let the outbox grow.

use super::peer_tls::PeerStream;
use bytes::{Bytes, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::debug;
use zk_quorum::wire::{PacketType, QuorumPacket, QuorumPacketDecoder};

pub use crate::node::PeerConn;

/// Packets (and snapshot bytes) a connection's outbox holds before the peer is cut off.
pub const OUTBOX_PACKETS: usize = 16 * 1024;

/// What goes out on a connection.
#[derive(Debug)]
pub enum Outgoing {
    /// A packet.
    Packet(QuorumPacket),
    /// Raw bytes of a snapshot stream (after a SNAP packet).
    Raw(Bytes),
}

/// What a connection's reader reports.
#[derive(Debug)]
pub enum PeerEvent {
    /// A packet arrived.
    Packet(PeerConn, QuorumPacket),
    /// A snapshot stream that followed SNAP was taken in whole by the sink: what it made of it.
    SnapshotReceived(PeerConn, Result<Box<zk_tree::Database>, String>),
    /// Everything queued for the connection was written, after [`PeerOutbox::watch_drain`].
    Drained(PeerConn),
    /// The connection ended (closed, broken, or a malformed stream), with why.
    Closed(PeerConn, String),
}

/// A connection's outbox: the bounded queue its writer takes from, and the flag that asks the
/// writer to report when it has written everything queued.
#[derive(Debug, Clone)]
pub struct PeerOutbox {
    /// What to send, in order.
    pub tx: mpsc::Sender<Outgoing>,
    drain_wanted: Arc<AtomicBool>,
}

impl PeerOutbox {
    /// Asks for one [`PeerEvent::Drained`] once the queue is empty and written.
    pub fn watch_drain(&self) {
        self.drain_wanted.store(true, Ordering::Release);
        // An empty queue gets a wake-up so that the writer looks at the flag.
        let _ = self.tx.try_send(Outgoing::Raw(Bytes::new()));
    }
}

/// Room for reads on a quorum connection: many packets per read under load.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// A connection set up and ready for packets: its stream, and what was read from it during set-up
/// (quorum SASL) that belongs to the first packets.
#[derive(Debug)]
pub struct Established {
    /// The stream.
    pub stream: PeerStream,
    /// Bytes already read past the set-up.
    pub read_ahead: BytesMut,
}

impl Established {
    /// A connection nothing has been read from.
    pub fn new(stream: PeerStream) -> Established {
        Established { stream, read_ahead: BytesMut::new() }
    }
}

/// Takes the raw snapshot stream that follows a SNAP packet, in whatever pieces the socket gives.
pub trait SnapshotSink: Send {
    /// Consumes a prefix of `bytes`; returns how many were consumed and whether the stream ended.
    ///
    /// Errors: the stream is malformed (the connection is closed).
    fn feed(&mut self, bytes: &[u8]) -> Result<(usize, bool), String>;
    /// The stream ended: the database it held, or why it does not make one.
    fn finish(self: Box<Self>) -> Result<Box<zk_tree::Database>, String>;
}

/// Makes a sink for the snapshot that follows a SNAP packet of this zxid.
pub type SnapshotSinkFactory = Box<dyn FnMut(i64) -> Box<dyn SnapshotSink> + Send>;

/// Starts the reader and writer of an established quorum-port connection. Returns the outbox.
/// `sinks` is given on a learner's connection, which may receive SNAP.
pub fn spawn(
    conn: PeerConn,
    established: Established,
    max_packet: usize,
    events: mpsc::Sender<PeerEvent>,
    sinks: Option<SnapshotSinkFactory>,
) -> PeerOutbox {
    let Established { stream, read_ahead } = established;
    let (rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel(OUTBOX_PACKETS);
    let drain_wanted = Arc::new(AtomicBool::new(false));
    tokio::spawn(write_loop(conn, wr, rx, drain_wanted.clone(), events.clone()));
    tokio::spawn(async move {
        let why = read_loop(conn, rd, read_ahead, max_packet, &events, sinks).await;
        let _ = events.send(PeerEvent::Closed(conn, why)).await;
    });
    PeerOutbox { tx, drain_wanted }
}

/// Connects to `addr` within `timeout`.
///
/// Errors: the connection failed or timed out.
pub async fn connect(addr: SocketAddr, timeout: std::time::Duration) -> std::io::Result<TcpStream> {
    match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

async fn write_loop(
    conn: PeerConn,
    mut wr: WriteHalf<PeerStream>,
    mut rx: mpsc::Receiver<Outgoing>,
    drain_wanted: Arc<AtomicBool>,
    events: mpsc::Sender<PeerEvent>,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        // Gather what is queued into one write.
        while let Some(out) = next.take() {
            match out {
                Outgoing::Packet(p) => p.encode(&mut buf),
                Outgoing::Raw(b) => buf.extend_from_slice(&b),
            }
            if buf.len() < 256 * 1024 {
                next = rx.try_recv().ok();
            }
        }
        // A TLS stream holds written records until flushed.
        if !buf.is_empty() && (wr.write_all(&buf).await.is_err() || wr.flush().await.is_err()) {
            return;
        }
        buf.clear();
        if rx.is_empty()
            && drain_wanted.swap(false, Ordering::AcqRel)
            && events.send(PeerEvent::Drained(conn)).await.is_err()
        {
            return;
        }
    }
    let _ = wr.shutdown().await;
}

async fn read_loop(
    conn: PeerConn,
    mut rd: ReadHalf<PeerStream>,
    read_ahead: BytesMut,
    max_packet: usize,
    events: &mpsc::Sender<PeerEvent>,
    mut sinks: Option<SnapshotSinkFactory>,
) -> String {
    let decoder = QuorumPacketDecoder::new(max_packet);
    // A buffer made with its capacity: BytesMut remembers the capacity it was made with and grows
    // back to it when reads use up the spare room. One made empty (as the set-up's read-ahead is)
    // grows by what each read asks, 64 bytes at a time, and then a busy follower made several
    // reads and allocations per PROPOSAL (11 us more server CPU per ensemble create).
    let mut buf = BytesMut::with_capacity(READ_BUFFER_BYTES.max(read_ahead.len()));
    buf.extend_from_slice(&read_ahead);
    drop(read_ahead);
    let mut sink: Option<Box<dyn SnapshotSink>> = None;
    loop {
        loop {
            if let Some(s) = sink.as_mut() {
                if buf.is_empty() {
                    break;
                }
                match s.feed(&buf) {
                    Ok((used, done)) => {
                        let _ = buf.split_to(used.min(buf.len()));
                        if done {
                            let loaded = match sink.take() {
                                Some(s) => s.finish(),
                                None => Err("no snapshot sink".into()),
                            };
                            if events.send(PeerEvent::SnapshotReceived(conn, loaded)).await.is_err() {
                                return "the server stopped".into();
                            }
                        } else if used == 0 {
                            break;
                        }
                        continue;
                    }
                    Err(e) => return format!("bad snapshot stream: {e}"),
                }
            }
            match decoder.decode(&mut buf) {
                Ok(Some(p)) => {
                    if p.packet_type == PacketType::Snap.to_wire() {
                        match sinks.as_mut() {
                            Some(make) => sink = Some(make(p.zxid)),
                            None => return "SNAP on a connection that cannot take one".into(),
                        }
                    }
                    if events.send(PeerEvent::Packet(conn, p)).await.is_err() {
                        return "the server stopped".into();
                    }
                }
                Ok(None) => break,
                Err(e) => return format!("bad packet: {e}"),
            }
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => return "closed by the peer".into(),
            Ok(_) => {}
            Err(e) => {
                debug!("quorum connection {conn}: {e}");
                return format!("read: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes a fixed number of bytes as "the snapshot".
    struct Fixed(usize);
    impl SnapshotSink for Fixed {
        fn feed(&mut self, bytes: &[u8]) -> Result<(usize, bool), String> {
            let n = self.0.min(bytes.len());
            self.0 -= n;
            Ok((n, self.0 == 0))
        }
        fn finish(self: Box<Self>) -> Result<Box<zk_tree::Database>, String> {
            Ok(Box::new(zk_tree::Database::new(Default::default())))
        }
    }

    /// Packets around a raw snapshot stream arrive whole and in order, the stream taken by the sink.
    #[tokio::test]
    async fn packets_and_a_snapshot_stream_share_one_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (etx, mut erx) = mpsc::channel(16);
        let client = tokio::spawn(async move {
            let s = connect(addr, std::time::Duration::from_secs(5)).await.expect("connect");
            let out = spawn(1, Established::new(PeerStream::Plain(s)), 1 << 20, etx, None);
            out.tx
                .send(Outgoing::Packet(QuorumPacket::new(PacketType::Snap, 0x100000005, None)))
                .await
                .expect("send");
            out.tx.send(Outgoing::Raw(Bytes::from(vec![7u8; 100_000]))).await.expect("send");
            out.tx
                .send(Outgoing::Packet(QuorumPacket::new(PacketType::NewLeader, 0x200000000, None)))
                .await
                .expect("send");
            // Keep the writer alive until the other side has read everything.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        });
        let (stream, _) = listener.accept().await.expect("accept");
        let (tx, mut rx) = mpsc::channel(16);
        let _out = spawn(
            2,
            Established::new(PeerStream::Plain(stream)),
            1 << 20,
            tx,
            Some(Box::new(|_zxid| Box::new(Fixed(100_000)) as Box<dyn SnapshotSink>)),
        );
        let mut got = Vec::new();
        while got.len() < 3 {
            match tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await.expect("in time") {
                Some(PeerEvent::Packet(_, p)) => got.push(format!("packet {} 0x{:x}", p.packet_type, p.zxid)),
                Some(PeerEvent::SnapshotReceived(..)) => got.push("snapshot".into()),
                Some(PeerEvent::Drained(_)) => {}
                Some(PeerEvent::Closed(_, why)) => panic!("closed: {why}"),
                None => panic!("events ended"),
            }
        }
        assert_eq!(got, ["packet 15 0x100000005", "snapshot", "packet 10 0x200000000"]);
        let _ = erx.try_recv();
        client.await.expect("client");
    }
}
