//! The ensemble's sockets, for the driver: the election port, the quorum port's listener, the
//! quorum connections (dialled and accepted) and their outboxes. It carries out the node's peer
//! outputs and turns what arrives into the node's inputs; it decides nothing (whom to dial,
//! whether to admit a learner, when to give up: the node's replica does).

use super::election_net::{ElectionNet, Received};
use super::peer_auth::{self, PeerSecurity};
use super::peer_net::{
    self, Established, Outgoing, PeerEvent, PeerOutbox, SnapshotSink, SnapshotSinkFactory,
};
use super::peer_tls::{self, PeerTls, SetupError};
use super::settings::{init_limit, resolve, EnsembleSettings};
use crate::node::{Input, Output, PeerConn};
use bytes::BytesMut;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};
use zk_quorum::config::QuorumConfig;
use zk_tree::apache_snap::ApacheSnapLoader;
use zk_tree::{Database, TreeConfig};

/// Connections accepted on the quorum port and not yet taken by the loop.
const ACCEPT_QUEUE: usize = 64;

/// Events from the peer connections not yet handled.
const PEER_EVENTS: usize = 16 * 1024;

/// Numbers of accepted connections start here; the node numbers the ones it dials from 1.
const ACCEPTED_BASE: PeerConn = 1 << 48;

/// Dials under way at once (the node has at most one: this bounds a misbehaving caller).
const DIALS_MAX: usize = 8;

/// The ensemble's sockets. See the module docs.
pub struct PeerIo {
    s: EnsembleSettings,
    net: ElectionNet,
    election_rx: mpsc::Receiver<Received>,
    down_rx: tokio::sync::watch::Receiver<BTreeSet<i64>>,
    accepted_rx: mpsc::Receiver<Established>,
    next_accepted: PeerConn,
    /// Accepted connections the node has not admitted or closed yet.
    held: HashMap<PeerConn, Established>,
    peer_tx: mpsc::Sender<PeerEvent>,
    peer_rx: mpsc::Receiver<PeerEvent>,
    dial_tx: mpsc::Sender<(PeerConn, Result<Established, String>)>,
    dial_rx: mpsc::Receiver<(PeerConn, Result<Established, String>)>,
    dials: usize,
    outboxes: HashMap<PeerConn, PeerOutbox>,
    /// A peer event taken while gathering a batch of packets, for the next [`Self::next`].
    held_event: Option<PeerEvent>,
    /// Inputs made here (a connection closed because its outbox overflowed), before anything
    /// else.
    local: VecDeque<Input>,
}

impl PeerIo {
    /// Binds the election and quorum ports.
    ///
    /// Errors: a port cannot be bound.
    pub async fn start(s: EnsembleSettings) -> std::io::Result<PeerIo> {
        let my_addr = zk_quorum::wire::HostPort {
            host: s.election_listen.ip().to_string(),
            port: s.election_listen.port(),
        };
        let (net, election_rx) = ElectionNet::start(
            s.my_sid,
            s.election_listen,
            my_addr,
            s.election_peers.clone(),
            s.cnx_timeout,
            PeerSecurity { tls: s.tls.clone(), sasl: s.sasl.clone() },
            s.replica.reconfig_enabled,
        )
        .await?;
        let listener = TcpListener::bind(s.quorum_listen).await?;
        let (acc_tx, accepted_rx) = mpsc::channel(ACCEPT_QUEUE);
        if let Some(t) = s.tls.clone().filter(|t| t.reload_wanted()) {
            // For the life of the process, as the ports.
            drop(crate::tls::poll_stores(move || t.reload_if_changed()));
        }
        spawn_accept_loop(listener, acc_tx, s.tls.clone(), s.sasl.clone(), init_limit(&s));
        info!("quorum port listening on {}", s.quorum_listen);
        let (peer_tx, peer_rx) = mpsc::channel(PEER_EVENTS);
        let (dial_tx, dial_rx) = mpsc::channel(DIALS_MAX);
        Ok(PeerIo {
            down_rx: net.peers_down(),
            s,
            net,
            election_rx,
            accepted_rx,
            next_accepted: ACCEPTED_BASE,
            held: HashMap::new(),
            peer_tx,
            peer_rx,
            dial_tx,
            dial_rx,
            dials: 0,
            outboxes: HashMap::new(),
            held_event: None,
            local: VecDeque::new(),
        })
    }

    /// Waits for the next input.
    pub async fn next(&mut self) -> Input {
        if let Some(i) = self.local.pop_front() {
            return i;
        }
        if let Some(e) = self.held_event.take() {
            return self.peer_input(e);
        }
        tokio::select! {
            biased;
            Some(e) = self.peer_rx.recv() => self.peer_input(e),
            Some((from, notification)) = self.election_rx.recv() => Input::Notification { from, notification },
            Some(stream) = self.accepted_rx.recv() => {
                let conn = self.next_accepted;
                self.next_accepted += 1;
                self.held.insert(conn, stream);
                Input::LearnerConnected { conn }
            }
            Some((conn, result)) = self.dial_rx.recv() => {
                self.dials = self.dials.saturating_sub(1);
                self.dialed(conn, result)
            }
            Ok(()) = self.down_rx.changed() => Input::PeersDown(self.down_rx.borrow_and_update().clone()),
        }
    }

    /// A peer's packet already waiting, when `batching` (the node is in broadcast): the driver
    /// takes the packets that arrived together before it steps the node. Anything else is held
    /// for the next [`Self::next`], in its own step.
    pub fn try_next_packet(&mut self, batching: bool) -> Option<Input> {
        if !batching || self.held_event.is_some() || !self.local.is_empty() {
            return None;
        }
        match self.peer_rx.try_recv().ok()? {
            PeerEvent::Packet(conn, packet) => Some(Input::Packet { conn, packet }),
            e => {
                self.held_event = Some(e);
                None
            }
        }
    }

    fn peer_input(&mut self, e: PeerEvent) -> Input {
        match e {
            PeerEvent::Packet(conn, packet) => Input::Packet { conn, packet },
            PeerEvent::SnapshotReceived(conn, result) => Input::SnapshotReceived { conn, result },
            PeerEvent::Drained(conn) => Input::PeerDrained { conn },
            PeerEvent::Closed(conn, why) => {
                self.outboxes.remove(&conn);
                Input::PeerClosed { conn, why }
            }
        }
    }

    fn dialed(&mut self, conn: PeerConn, result: Result<Established, String>) -> Input {
        match result {
            Ok(stream) => {
                let cfg = self.s.tree_cfg.clone();
                let sinks: SnapshotSinkFactory = Box::new(move |zxid| {
                    Box::new(SnapshotIntake::new(cfg.clone(), zxid)) as Box<dyn SnapshotSink>
                });
                let out = peer_net::spawn(conn, stream, self.s.max_packet, self.peer_tx.clone(), Some(sinks));
                self.outboxes.insert(conn, out);
                Input::Dialed { conn, result: Ok(()) }
            }
            Err(e) => Input::Dialed { conn, result: Err(e) },
        }
    }

    /// Carries out a peer output of the node. Returns the output back when it is not a peer one.
    pub fn act(&mut self, o: Output) -> Option<Output> {
        match o {
            Output::SendNotification { to, notification } => self.net.send(to, &notification),
            Output::SendPacket { conn, packet } => self.send(conn, Outgoing::Packet(packet)),
            Output::SendRaw { conn, bytes } => self.send(conn, Outgoing::Raw(bytes)),
            Output::WatchDrain { conn } => {
                if let Some(o) = self.outboxes.get(&conn) {
                    o.watch_drain();
                }
            }
            Output::AdmitLearner { conn } => match self.held.remove(&conn) {
                Some(stream) => {
                    let out = peer_net::spawn(conn, stream, self.s.max_packet, self.peer_tx.clone(), None);
                    self.outboxes.insert(conn, out);
                }
                None => self
                    .local
                    .push_back(Input::PeerClosed { conn, why: "gone before it was admitted".into() }),
            },
            Output::ClosePeer { conn } => {
                self.held.remove(&conn);
                // Dropping the sender ends the writer, which shuts the socket down.
                self.outboxes.remove(&conn);
            }
            Output::Dial { conn, leader } => self.dial(conn, leader),
            other => return Some(other),
        }
        None
    }

    fn send(&mut self, conn: PeerConn, out: Outgoing) {
        let Some(o) = self.outboxes.get(&conn) else { return };
        if o.tx.try_send(out).is_err() {
            warn!("quorum connection {conn} is not reading what it is sent; closing it");
            self.outboxes.remove(&conn);
            self.local.push_back(Input::PeerClosed { conn, why: "its outbox overflowed".into() });
        }
    }

    fn dial(&mut self, conn: PeerConn, leader: i64) {
        let Some(&addr) = self.s.quorum_addrs.get(&leader) else {
            self.local.push_back(Input::Dialed {
                conn,
                result: Err(format!("server {leader} has no quorum address")),
            });
            return;
        };
        if self.dials >= DIALS_MAX {
            self.local.push_back(Input::Dialed { conn, result: Err("too many dials under way".into()) });
            return;
        }
        self.dials += 1;
        let limit = Duration::from_millis(init_limit(&self.s));
        let (tls, sasl, tx) = (self.s.tls.clone(), self.s.sasl.clone(), self.dial_tx.clone());
        tokio::spawn(async move {
            let set_up = async {
                let tcp = peer_net::connect(addr, limit).await.map_err(|e| format!("{addr}: {e}"))?;
                let mut s =
                    peer_tls::connect(tls.as_deref(), tcp, leader, limit).await.map_err(|e| e.to_string())?;
                let mut read_ahead = BytesMut::new();
                peer_auth::authenticate_to(sasl.as_deref(), &mut s, &mut read_ahead, leader, limit)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(Established { stream: s, read_ahead })
            };
            let _ = tx.send((conn, set_up.await)).await;
        });
    }

    /// A configuration came into force: the election port's peers and the quorum addresses
    /// follow it. Returns the client address it gives this server, if any.
    pub fn install(&mut self, next: &QuorumConfig) -> Option<SocketAddr> {
        let mut election_peers = HashMap::new();
        for spec in next.servers.values() {
            let Some(a) = spec.addresses.first() else { continue };
            let what = format!("server.{}", spec.sid);
            match (resolve(&a.host, a.quorum_port, &what), resolve(&a.host, a.election_port, &what)) {
                (Ok(q), Ok(e)) => {
                    self.s.quorum_addrs.insert(spec.sid, q);
                    if spec.sid != self.s.my_sid {
                        election_peers.insert(spec.sid, e);
                    }
                }
                (Err(e), _) | (_, Err(e)) => warn!("{e}"),
            }
        }
        self.net.set_peers(&election_peers);
        self.s.election_peers = election_peers;
        let me = self.s.my_sid;
        let c = next.servers.get(&me).and_then(|s| s.client.as_ref())?;
        match resolve(&c.host, c.port, &format!("server.{me}'s client address")) {
            Ok(addr) => Some(addr),
            Err(e) => {
                warn!("{e}; clients stay on the present address");
                None
            }
        }
    }

    /// The zoo.cfg this server started from, if any.
    pub fn config_file(&self) -> Option<&std::path::Path> {
        self.s.config_file.as_deref()
    }
}

/// Accepts learners on the quorum port, each set up (TLS, SASL) in a task of its own: a slow
/// peer holds up no other. Apache's leader gives a learner initLimit ticks to connect and sync.
fn spawn_accept_loop(
    listener: TcpListener,
    acc_tx: mpsc::Sender<Established>,
    tls: Option<Arc<PeerTls>>,
    sasl: Option<Arc<crate::sasl_config::QuorumSasl>>,
    limit_ms: u64,
) {
    let handshake_limit = Duration::from_millis(limit_ms);
    tokio::spawn(async move {
        let pending = Arc::new(tokio::sync::Semaphore::new(peer_tls::MAX_PENDING_SETUPS));
        loop {
            let Ok(permit) = pending.clone().acquire_owned().await else { return };
            match listener.accept().await {
                Ok((stream, remote)) => {
                    let (tls, sasl, acc_tx) = (tls.clone(), sasl.clone(), acc_tx.clone());
                    tokio::spawn(async move {
                        // Held until the connection is handed over: the hand-over queue is
                        // bounded too.
                        let _setup = permit;
                        let set_up = async {
                            let mut s = peer_tls::accept(tls.as_deref(), stream, handshake_limit).await?;
                            let mut read_ahead = BytesMut::new();
                            let remote = remote.to_string();
                            peer_auth::check_peer(
                                sasl.as_deref(),
                                &mut s,
                                &mut read_ahead,
                                &remote,
                                handshake_limit,
                            )
                            .await?;
                            Ok(Established { stream: s, read_ahead })
                        };
                        match set_up.await {
                            Ok(s) => {
                                let _ = acc_tx.send(s).await;
                            }
                            Err(SetupError::Gone(why)) => {
                                debug!("quorum connection from {remote} closed: {why}")
                            }
                            Err(SetupError::Refused(why)) => {
                                warn!("quorum connection from {remote} refused: {why}")
                            }
                        }
                    });
                }
                Err(e) => {
                    warn!("quorum port accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
}

/// Loads the snapshot stream after SNAP into a database, in the connection reader's task (the
/// node simulation feeds it the same way).
pub struct SnapshotIntake {
    loader: Option<ApacheSnapLoader>,
    done: Option<Result<Database, String>>,
}

impl SnapshotIntake {
    /// An intake for the snapshot at `zxid` that a SNAP announced, loaded into a database set up
    /// as `cfg` says.
    pub fn new(cfg: TreeConfig, zxid: i64) -> SnapshotIntake {
        SnapshotIntake { loader: Some(ApacheSnapLoader::new(cfg, zxid)), done: None }
    }
}

impl SnapshotSink for SnapshotIntake {
    fn feed(&mut self, bytes: &[u8]) -> Result<(usize, bool), String> {
        let Some(loader) = self.loader.as_mut() else { return Ok((0, true)) };
        let fed = loader.feed(bytes).map_err(|e| e.to_string())?;
        if fed.done {
            if let Some(l) = self.loader.take() {
                self.done = Some(l.finish().map_err(|e| e.to_string()));
            }
        }
        Ok((fed.consumed, fed.done))
    }

    fn finish(self: Box<Self>) -> Result<Box<Database>, String> {
        match self.done {
            Some(r) => r.map(Box::new),
            None => Err("the snapshot stream ended early".into()),
        }
    }
}

/// Writes `config` as Apache's members do when one comes into force: its server, group and
/// weight lines (sorted, no version) to `<zoo.cfg>.dynamic.<hex version>`, then zoo.cfg without
/// its membership lines (and without clientPort/clientPortAddress when the server line gives
/// this server its client address), naming that file in `dynamicConfigFile`. Each file is
/// written to a temporary name, synced and renamed.
///
/// Errors: a file cannot be read, written or renamed.
pub fn write_dynamic_config(
    static_file: &std::path::Path,
    config: &QuorumConfig,
    me: i64,
) -> std::io::Result<()> {
    let mut name = static_file.as_os_str().to_owned();
    name.push(format!(".dynamic.{:x}", config.version as u64));
    let dynamic = std::path::PathBuf::from(name);
    let mut lines: Vec<String> =
        config.to_config_string().lines().filter(|l| !l.starts_with("version=")).map(str::to_owned).collect();
    lines.sort();
    atomic_write(&dynamic, lines.join("\n").as_bytes())?;
    let erase_client = config.servers.get(&me).is_some_and(|s| s.client.is_some());
    let text = std::fs::read_to_string(static_file)?;
    let mut out = String::new();
    for line in text.lines() {
        let key = line.split(['=', ':']).next().unwrap_or("").trim();
        let membership = key.starts_with("server.")
            || key.starts_with("group")
            || key.starts_with("weight")
            || key.starts_with("dynamicConfigFile")
            || key.starts_with("peerType");
        let client = erase_client && (key == "clientPort" || key == "clientPortAddress");
        if !membership && !client {
            out.push_str(line);
            out.push('\n');
        }
    }
    let path = std::fs::canonicalize(&dynamic)?;
    out.push_str(&format!("dynamicConfigFile={}\n", path.display()));
    atomic_write(static_file, out.as_bytes())
}

fn atomic_write(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
