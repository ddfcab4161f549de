//! The election port: one TCP connection per peer carrying Apache's election messages, kept the
//! way Apache's connection manager keeps them.
//!
//! - Only a connection initiated by the larger server id survives. A server dials every peer it
//!   has something to say to; to a larger peer it sends the handshake and closes (the peer dials
//!   back); an accepted connection from a smaller peer is closed and dialled back.
//! - Each peer has a one-message outbox holding the newest notification for it: an election only
//!   cares about the latest vote, and a peer that reconnects gets it again.
//! - Every message is framed (i32 length, at most [`MAX_ELECTION_MESSAGE_LEN`]); a bad frame or an
//!   undecodable notification closes that connection with one log line, and the others carry on.
//!
//! The election itself (zk_quorum::election) sees only `(sid, Notification)` pairs in and out.

use super::peer_auth::{self, PeerSecurity};
use super::peer_tls::{self, PeerStream, PeerTls, SetupError, MAX_PENDING_SETUPS};
use crate::sasl_config::QuorumSasl;
use bytes::BytesMut;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info, warn};
use zk_quorum::election::{keeps_initiated_connection, on_accepted_connection, AcceptedConnection};
use zk_quorum::wire::handshake::{MAX_ELECTION_MESSAGE_LEN, MAX_HANDSHAKE_ADDR_LEN};
use zk_quorum::wire::{
    decode_election_frame, decode_handshake, encode_election_frame, ElectionHandshake, HostPort, Notification,
};

/// How long a connect or a handshake may take unless zoo.cfg says otherwise (Apache's
/// `cnxTimeout` default).
pub const DEFAULT_CNX_TIMEOUT: Duration = Duration::from_millis(5000);

/// Pause between two attempts to reach a peer that is down.
const REDIAL_PAUSE: Duration = Duration::from_millis(500);

/// Notifications received and not yet taken by the election: enough for every peer's latest
/// several times over; a reader waits when it is full.
const INBOX: usize = 1024;

/// Why an accepted election connection ended.
#[derive(Debug)]
enum Ended {
    /// The ordinary way: the peer closed, a read failed, a newer connection replaced it (logged
    /// at debug).
    Closed(String),
    /// Input no server sends: a bad handshake or frame, an unknown id (one warning each).
    Refused(String),
}

fn ended(e: SetupError) -> Ended {
    match e {
        SetupError::Gone(why) => Ended::Closed(why),
        SetupError::Refused(why) => Ended::Refused(why),
    }
}

/// A received notification.
pub type Received = (i64, Notification);

/// The election port's connections.
#[derive(Clone)]
pub struct ElectionNet {
    inner: Arc<Inner>,
}

/// The newest encoded message for a peer (None: nothing to say yet).
type Outbox = watch::Sender<Option<Arc<Vec<u8>>>>;

struct Inner {
    my_sid: i64,
    my_addr: HostPort,
    /// `cnxTimeout`: the longest a connect or a handshake may take.
    cnx_timeout: Duration,
    /// TLS between members (`sslQuorum`, `portUnification`); None: plain only.
    tls: Option<Arc<PeerTls>>,
    /// SASL between members (`quorum.auth.*`); None: off.
    sasl: Option<Arc<QuorumSasl>>,
    /// The peers and their election addresses; they change with reconfigurations.
    peers: Mutex<HashMap<i64, SocketAddr>>,
    /// The newest message for each peer (None: nothing to say yet).
    outboxes: Mutex<HashMap<i64, Outbox>>,
    /// `reconfigEnabled`: a server not in the configuration that connects (one about to be
    /// added) becomes a peer, reached back at the address its handshake gives.
    accept_unknown: bool,
    /// Per peer: the generation of its newest connection (a newer one replaces the older), and
    /// whether that connection is up.
    connections: Mutex<HashMap<i64, (u64, bool)>>,
    inbox: mpsc::Sender<Received>,
    /// Peers whose election port refused our last connection attempt (and that have no live
    /// connection to us): the election may decide without waiting for them.
    down: watch::Sender<std::collections::BTreeSet<i64>>,
}

impl ElectionNet {
    /// Listens on `listen` (this server's election address) and keeps connections to `peers`
    /// (their election addresses), secured as `security` says. Returns the network and the stream of received notifications.
    ///
    /// Errors: the election port cannot be bound.
    pub async fn start(
        my_sid: i64,
        listen: SocketAddr,
        my_addr: HostPort,
        peers: HashMap<i64, SocketAddr>,
        cnx_timeout: Duration,
        security: PeerSecurity,
        accept_unknown: bool,
    ) -> std::io::Result<(ElectionNet, mpsc::Receiver<Received>)> {
        let listener = TcpListener::bind(listen).await?;
        let (tx, rx) = mpsc::channel(INBOX);
        let mut outboxes = HashMap::new();
        let mut receivers = Vec::new();
        for &sid in peers.keys() {
            let (otx, orx) = watch::channel(None);
            outboxes.insert(sid, otx);
            receivers.push((sid, orx));
        }
        let net = ElectionNet {
            inner: Arc::new(Inner {
                my_sid,
                my_addr,
                cnx_timeout,
                tls: security.tls,
                sasl: security.sasl,
                peers: Mutex::new(peers),
                outboxes: Mutex::new(outboxes),
                accept_unknown,
                connections: Mutex::new(HashMap::new()),
                inbox: tx,
                down: watch::channel(std::collections::BTreeSet::new()).0,
            }),
        };
        // One dialer per peer: it (re)connects whenever there is something to say and no
        // connection the rule keeps.
        for (sid, orx) in receivers {
            tokio::spawn(net.clone().dial_loop(sid, orx));
        }
        tokio::spawn(net.clone().accept_loop(listener));
        info!("election port listening on {listen}");
        Ok((net, rx))
    }

    /// The peers known to be down, and a way to wait for that to change.
    pub fn peers_down(&self) -> watch::Receiver<std::collections::BTreeSet<i64>> {
        self.inner.down.subscribe()
    }

    fn mark(&self, sid: i64, down: bool) {
        self.inner.down.send_if_modified(|set| if down { set.insert(sid) } else { set.remove(&sid) });
    }

    /// The outbox of peer `sid`, if it is one.
    fn outbox(&self, sid: i64) -> Option<Outbox> {
        self.inner.outboxes.lock().unwrap_or_else(|e| e.into_inner()).get(&sid).cloned()
    }

    fn peer_addr(&self, sid: i64) -> Option<SocketAddr> {
        self.inner.peers.lock().unwrap_or_else(|e| e.into_inner()).get(&sid).copied()
    }

    /// Takes the peers of a new configuration (a reconfiguration): new ones are dialled when
    /// there is something to tell them, a moved one at its new address. Peers the configuration
    /// no longer lists stay reachable, as a server outside the configuration that connects is
    /// (Apache answers such servers' notifications): the election only writes to them to answer
    /// them.
    pub fn set_peers(&self, peers: &HashMap<i64, SocketAddr>) {
        for (&sid, &addr) in peers {
            self.add_peer(sid, addr);
        }
    }

    /// Adds peer `sid` at `addr` (or moves it there).
    fn add_peer(&self, sid: i64, addr: SocketAddr) {
        if sid == self.inner.my_sid {
            return;
        }
        let old = self.inner.peers.lock().unwrap_or_else(|e| e.into_inner()).insert(sid, addr);
        if old.is_none() {
            let (otx, orx) = watch::channel(None);
            self.inner.outboxes.lock().unwrap_or_else(|e| e.into_inner()).insert(sid, otx);
            tokio::spawn(self.clone().dial_loop(sid, orx));
            info!("election peer {sid} at {addr} added");
        }
    }

    /// Makes `n` the message for `to` (replacing any not yet sent). Unknown peers are ignored.
    pub fn send(&self, to: i64, n: &Notification) {
        let Some(tx) = self.outbox(to) else {
            debug!("no election peer {to}");
            return;
        };
        let mut frame = Vec::new();
        if let Err(e) = encode_election_frame(&n.encode(), &mut frame) {
            warn!("notification for {to} not sent: {e}");
            return;
        }
        tx.send_replace(Some(Arc::new(frame)));
    }

    async fn accept_loop(self, listener: TcpListener) {
        // With quorum SASL, `quorum.cnxn.threads.size` bounds the set-ups under way, as it bounds
        // Apache's pool of threads setting up (and authenticating) election connections; past it
        // the port waits to accept rather than refusing.
        let bound = self.inner.sasl.as_ref().map_or(MAX_PENDING_SETUPS, |s| s.cnxn_threads as usize);
        let pending = Arc::new(Semaphore::new(bound));
        loop {
            let Ok(permit) = pending.clone().acquire_owned().await else { return };
            let (stream, remote) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    warn!("election port accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let net = self.clone();
            tokio::spawn(async move {
                match net.on_accepted(stream, permit).await {
                    Ok(()) => {}
                    Err(Ended::Closed(why)) => debug!("election connection from {remote} closed: {why}"),
                    Err(Ended::Refused(why)) => warn!("election connection from {remote} dropped: {why}"),
                }
            });
        }
    }

    /// Sets up an accepted connection and reads the election handshake, holding `setup` (one of
    /// the port's [`MAX_PENDING_SETUPS`]) until then.
    async fn on_accepted(self, tcp: TcpStream, setup: OwnedSemaphorePermit) -> Result<(), Ended> {
        let mut stream =
            peer_tls::accept(self.inner.tls.as_deref(), tcp, self.inner.cnx_timeout).await.map_err(ended)?;
        let mut buf = BytesMut::with_capacity(512);
        let hs = tokio::time::timeout(self.inner.cnx_timeout, async {
            loop {
                match decode_handshake(&buf) {
                    Ok(Some((hs, used))) => {
                        bytes::Buf::advance(&mut buf, used);
                        return Ok(hs);
                    }
                    Ok(None) => {}
                    Err(e) => return Err(Ended::Refused(format!("bad handshake: {e}"))),
                }
                if buf.len() > 16 + MAX_HANDSHAKE_ADDR_LEN {
                    return Err(Ended::Refused("handshake too long".into()));
                }
                match stream.read_buf(&mut buf).await {
                    Ok(0) => return Err(Ended::Closed("closed during the handshake".into())),
                    Ok(_) => {}
                    Err(e) => return Err(Ended::Closed(format!("read: {e}"))),
                }
            }
        })
        .await
        .map_err(|_| Ended::Closed("handshake timed out".to_string()))??;
        let sid = hs.sid;
        // Quorum SASL comes right after the handshake, before any notification.
        let remote = format!("server {sid}");
        peer_auth::check_peer(
            self.inner.sasl.as_deref(),
            &mut stream,
            &mut buf,
            &remote,
            self.inner.cnx_timeout,
        )
        .await
        .map_err(ended)?;
        drop(setup);
        if self.peer_addr(sid).is_none() {
            let addr = hs.addresses.first().and_then(|a| {
                use std::net::ToSocketAddrs;
                (a.host.as_str(), a.port).to_socket_addrs().ok()?.next()
            });
            match addr.filter(|_| self.inner.accept_unknown) {
                Some(addr) => self.add_peer(sid, addr),
                None => return Err(Ended::Refused(format!("server id {sid} is not in the configuration"))),
            }
        }
        match on_accepted_connection(self.inner.my_sid, sid) {
            AcceptedConnection::Keep => self.run_connection(sid, stream, buf).await,
            AcceptedConnection::CloseAndDialBack => {
                // Our dialer reaches it: its outbox wakes it when we have something to say, and
                // the election resends our vote to a peer that speaks up.
                drop(stream);
                if let Some(tx) = self.outbox(sid) {
                    tx.send_modify(|_| {});
                }
                Ok(())
            }
            AcceptedConnection::Close => Err(Ended::Refused(format!("a peer claims our own id {sid}"))),
        }
    }

    async fn dial_loop(self, sid: i64, mut outbox: watch::Receiver<Option<Arc<Vec<u8>>>>) {
        loop {
            // Wait for something to say.
            if outbox.borrow_and_update().is_none() && outbox.changed().await.is_err() {
                return;
            }
            // Read each time: a reconfiguration may move the peer, or remove it.
            let Some(addr) = self.peer_addr(sid) else { return };
            let stream = match tokio::time::timeout(self.inner.cnx_timeout, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    debug!("election peer {sid} at {addr}: {e}");
                    if !self.is_up(sid) {
                        self.mark(sid, true);
                    }
                    tokio::time::sleep(REDIAL_PAUSE).await;
                    continue;
                }
                Err(_) => {
                    debug!("election peer {sid} at {addr}: connect timed out");
                    continue;
                }
            };
            self.mark(sid, false);
            let mut stream =
                match peer_tls::connect(self.inner.tls.as_deref(), stream, sid, self.inner.cnx_timeout).await
                {
                    Ok(s) => s,
                    Err(e) => {
                        match e {
                            SetupError::Gone(why) => debug!("election connection to {sid}: {why}"),
                            SetupError::Refused(why) => warn!("election connection to {sid} refused: {why}"),
                        }
                        tokio::time::sleep(REDIAL_PAUSE).await;
                        continue;
                    }
                };
            let hs = match ElectionHandshake::v1(self.inner.my_sid, self.inner.my_addr.clone()).encode() {
                Ok(h) => h,
                Err(e) => {
                    warn!("cannot encode the election handshake: {e}");
                    return;
                }
            };
            if stream.write_all(&hs).await.is_err() || stream.flush().await.is_err() {
                tokio::time::sleep(REDIAL_PAUSE).await;
                continue;
            }
            // Authenticated even when the connection is about to be closed: the larger peer
            // dials back only after it has checked us.
            let mut read_ahead = BytesMut::new();
            let auth = peer_auth::authenticate_to(
                self.inner.sasl.as_deref(),
                &mut stream,
                &mut read_ahead,
                sid,
                self.inner.cnx_timeout,
            )
            .await;
            if let Err(e) = auth {
                match e {
                    SetupError::Gone(why) => debug!("election connection to {sid}: {why}"),
                    SetupError::Refused(why) => warn!("election connection to {sid} refused: {why}"),
                }
                tokio::time::sleep(REDIAL_PAUSE).await;
                continue;
            }
            if keeps_initiated_connection(self.inner.my_sid, sid) {
                let began = std::time::Instant::now();
                match self.clone().run_connection(sid, stream, read_ahead).await {
                    Ok(()) => {}
                    Err(Ended::Closed(why)) => debug!("election connection to {sid} closed: {why}"),
                    Err(Ended::Refused(why)) => warn!("election connection to {sid} dropped: {why}"),
                }
                // Dial again at once: a peer that died refuses at once, and the election may
                // decide without it. A connection that failed straight away (a dying peer's
                // port can still take one) is tried again after a short pause.
                if began.elapsed() < REDIAL_PAUSE / 5 {
                    tokio::time::sleep(REDIAL_PAUSE / 20).await;
                }
            } else {
                // The larger peer dials back. Wait (a pause at most) for it to; while its
                // connection is up, wait; once one it made is lost, prompt it again at once.
                drop(stream);
                let prompted = self.generation(sid);
                let deadline = tokio::time::Instant::now() + REDIAL_PAUSE;
                while !self.is_up(sid) && self.generation(sid) == prompted {
                    match tokio::time::timeout_at(deadline, outbox.changed()).await {
                        Err(_) => break,
                        Ok(Err(_)) => return,
                        Ok(Ok(())) => {}
                    }
                }
                while self.is_up(sid) {
                    if outbox.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// How many connections the peer has had (each new one replaces the last).
    fn generation(&self, sid: i64) -> u64 {
        self.inner.connections.lock().unwrap_or_else(|e| e.into_inner()).get(&sid).map_or(0, |c| c.0)
    }

    fn is_up(&self, sid: i64) -> bool {
        self.inner.connections.lock().unwrap_or_else(|e| e.into_inner()).get(&sid).is_some_and(|c| c.1)
    }

    fn is_current(inner: &Inner, sid: i64, generation: u64) -> bool {
        inner
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sid)
            .is_some_and(|c| c.0 == generation)
    }

    /// Carries messages both ways on a kept connection until it fails or a newer one replaces it.
    async fn run_connection(&self, sid: i64, stream: PeerStream, buf: BytesMut) -> Result<(), Ended> {
        let generation = {
            let mut g = self.inner.connections.lock().unwrap_or_else(|e| e.into_inner());
            let e = g.entry(sid).or_insert((0, false));
            e.0 += 1;
            e.1 = true;
            e.0
        };
        self.mark(sid, false);
        let result = self.carry(sid, generation, stream, buf).await;
        {
            let mut g = self.inner.connections.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = g.get_mut(&sid) {
                if e.0 == generation {
                    e.1 = false;
                }
            }
        }
        // Wake the peer's dialer, and probe the peer's port once right away: a peer that died
        // refuses at once and is marked down, so the election need not wait for it.
        if let Some(tx) = self.outbox(sid) {
            tx.send_modify(|_| {});
        }
        if !self.is_up(sid) {
            if let Some(addr) = self.peer_addr(sid) {
                let net = self.clone();
                tokio::spawn(async move {
                    // A dying peer's port may still complete a connection for a few
                    // milliseconds: probe a few times before concluding anything.
                    for _ in 0..20 {
                        if net.is_up(sid) {
                            return;
                        }
                        let probe = tokio::time::timeout(REDIAL_PAUSE, TcpStream::connect(addr)).await;
                        if matches!(probe, Ok(Err(_))) {
                            debug!("election peer {sid} refuses connections: down");
                            net.mark(sid, true);
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                });
            }
        }
        result
    }

    async fn carry(
        &self,
        sid: i64,
        generation: u64,
        stream: PeerStream,
        mut buf: BytesMut,
    ) -> Result<(), Ended> {
        debug!("election connection with {sid} up");
        let Some(sender) = self.outbox(sid) else {
            return Err(Ended::Refused("unknown peer".into()));
        };
        let mut outbox = sender.subscribe();
        drop(sender);
        let (mut rd, mut wr) = tokio::io::split(stream);
        let inner = self.inner.clone();
        let writer = tokio::spawn(async move {
            // The newest message first (a peer that reconnects gets our vote again), then each new one.
            loop {
                let msg = outbox.borrow_and_update().clone();
                if let Some(frame) = msg {
                    if wr.write_all(&frame).await.is_err() || wr.flush().await.is_err() {
                        return;
                    }
                }
                if outbox.changed().await.is_err() {
                    return;
                }
                if !ElectionNet::is_current(&inner, sid, generation) {
                    return;
                }
            }
        });
        let result = loop {
            loop {
                match decode_election_frame(&mut buf) {
                    Ok(Some(payload)) => match Notification::decode(&payload) {
                        Ok(n) => {
                            if self.inner.inbox.send((sid, n)).await.is_err() {
                                writer.abort();
                                return Ok(());
                            }
                        }
                        Err(e) => {
                            writer.abort();
                            return Err(Ended::Refused(format!(
                                "server {sid}: undecodable notification: {e}"
                            )));
                        }
                    },
                    Ok(None) => break,
                    Err(e) => {
                        writer.abort();
                        return Err(Ended::Refused(format!("server {sid}: bad frame: {e}")));
                    }
                }
            }
            if buf.len() > MAX_ELECTION_MESSAGE_LEN + 4 {
                break Err(Ended::Refused(format!("server {sid}: frame too long")));
            }
            match rd.read_buf(&mut buf).await {
                Ok(0) => break Err(Ended::Closed("closed by the peer".to_string())),
                Ok(_) => {}
                Err(e) => break Err(Ended::Closed(format!("read: {e}"))),
            }
            if !ElectionNet::is_current(&self.inner, sid, generation) {
                break Err(Ended::Closed("replaced by a newer connection".to_string()));
            }
        };
        writer.abort();
        result
    }
}
