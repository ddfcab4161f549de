//! The sans-IO session core: everything a ZooKeeper client session does, with no sockets, no tasks
//! and no clock reads.
//!
//! A driver (the tokio [`crate::Client`], or zk-ffi's threads) owns the socket and the clock and
//! runs this loop:
//! 1. `poll_connect(now)`: when it returns a server, dial it; report `handle_connected(now)` or
//!    `handle_connection_lost(now)`.
//! 2. Feed every received chunk to `handle_bytes(now, ..)`; call `handle_timeout(now)` when
//!    `poll_timeout()` passes; submit user operations with `submit(op, now)`.
//! 3. After each of those calls: write every `poll_transmit()` frame in order, close the socket if
//!    `poll_close()` says so, and deliver every `poll_event()`.
//! 4. While connected to a read-only server: when `poll_probe(now)` returns an [`RwProbe`], open a
//!    separate TCP connection to its server, send [`RW_PROBE_REQUEST`], read the answer until the
//!    server closes (at most [`RW_PROBE_MAX_ANSWER`] bytes, within [`RW_PROBE_TIMEOUT`]) and report
//!    it with `handle_probe_answer(now, id, ..)` (`None` when the probe failed). When a server
//!    answers that it serves writes, the core drops the read-only connection (`poll_close`) and
//!    its next `poll_connect` names that server.
//!
//! The core owns the handshake (resuming with session id, password and last zxid seen), xid
//! assignment and in-order reply matching, pings at a third of the negotiated timeout, the read
//! timeout (two thirds without hearing anything), rotation through the connect string's servers
//! (shuffled once), the chroot, the watch registry with Apache's trigger rules, SetWatches and auth
//! replay after a reconnect, the terminal states (expired, auth failed, closed), which are
//! reported and never retried away, and, like Apache's clients, the search for a read-write server
//! while connected read-only: probes with `isro` at intervals doubling from `rw_probe_min` up to
//! `rw_probe_max`, rotating through the other servers. A session created by a read-only server
//! is only valid there, so until a read-write server has accepted the session (or credentials were
//! given to resume one) the handshake asks for a new session (id 0), as Apache's clients do.
//!
//! Like Apache's client, an operation in flight or queued when the connection drops completes with
//! CONNECTIONLOSS (it may or may not have been applied); the session is only known expired when a
//! server says so on reconnect.

pub mod gssapi;
pub mod op;
pub mod watches;

use bytes::{Bytes, BytesMut};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use zk_proto::jute::Jute;
use zk_proto::{
    AddWatchMode, ConnectRequest, ConnectResponse, ErrorCode, EventType, FrameDecoder, KeeperState, OpCode,
    Reader, ReplyHeader, WatcherEvent,
};

use op::{Chroot, Prepared};
pub use op::{MultiOp, Op, ReadOp, Response, CONFIG_NODE};
pub use watches::WatcherId;
use watches::{WatchKind, WatchRegistry};

/// Identifies a submitted operation; also the id of any watcher the operation registers.
pub type OpId = u64;

/// Apache's client never lets more than this pass between pings, whatever the timeout.
const MAX_PING_INTERVAL: Duration = Duration::from_secs(10);
/// The four-letter word a read-write probe sends; a server answers `rw` or `ro`.
pub const RW_PROBE_REQUEST: &[u8] = b"isro";
/// How long a driver may spend on one probe (connecting, then reading the answer): Apache's
/// clients give the probe's socket one second.
pub const RW_PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest probe answer a driver needs to read ("rw" or "ro", perhaps with a newline).
pub const RW_PROBE_MAX_ANSWER: usize = 16;

/// Apache's client splits SetWatches so no packet carries more than this many bytes of paths.
const SET_WATCHES_MAX_BYTES: usize = 128 * 1024;

/// A server from the connect string.
pub use zk_proto::HostPort;

/// A session to resume: what a previous client's `session_id()` and `session_password()` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCredentials {
    /// The session id.
    pub id: i64,
    /// The 16-byte session password.
    pub password: Bytes,
}

/// SASL DIGEST-MD5 credentials: the session authenticates with them on every connection, right
/// after the handshake and before anything else it sends, as Apache's Java client and kazoo do.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// The user name (the server's ACL id becomes `sasl:<username>`).
    pub username: String,
    /// The password.
    pub password: String,
    /// Key of the generator the client nonces come from; `SaslCredentials::new` (outside the
    /// core, which draws no randomness of its own) takes it from the operating system's CSPRNG.
    pub nonce_key: [u8; 32],
}

impl std::fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password (or the nonce key): a Debug-printed config must not leak them.
        f.debug_struct("SaslCredentials").field("username", &self.username).finish_non_exhaustive()
    }
}

/// How a session is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Servers to try, in connect-string order (the core shuffles them once). Must not be empty.
    pub hosts: Vec<HostPort>,
    /// Every path is taken relative to this node ("/app"); `None` for the root.
    pub chroot: Option<String>,
    /// Requested session timeout; the server clamps it to its [min, max].
    pub session_timeout: Duration,
    /// Accept read-only servers (partitioned ensemble members).
    pub can_be_read_only: bool,
    /// Resume this session instead of creating one.
    pub session: Option<SessionCredentials>,
    /// Operations queued or awaiting replies at most; `submit` refuses beyond it.
    pub max_pending: usize,
    /// Largest reply frame accepted (jute.maxbuffer).
    pub max_frame: u32,
    /// Upper bound of the random pause before redialling after a failure (Apache uses 1 s).
    pub reconnect_delay_max: Duration,
    /// While connected read-only, the first probe for a read-write server comes this long after
    /// the connection; each probe doubles the pause before the next one (Apache's Java client
    /// starts at 100 ms, its C client at 200 ms).
    pub rw_probe_min: Duration,
    /// The longest pause between two probes for a read-write server (60 s in Apache's clients).
    pub rw_probe_max: Duration,
    /// Authenticate each connection with SASL DIGEST-MD5 before anything else.
    pub sasl: Option<SaslCredentials>,
    /// Authenticate each connection with SASL GSSAPI (Kerberos) before anything else; taken
    /// over `sasl` when both are set.
    pub gssapi: Option<gssapi::Gssapi>,
}

impl Config {
    /// A configuration with Apache's defaults for everything but the servers and the timeout.
    pub fn new(hosts: Vec<HostPort>, session_timeout: Duration) -> Config {
        Config {
            hosts,
            chroot: None,
            session_timeout,
            can_be_read_only: false,
            session: None,
            max_pending: 10_000,
            max_frame: zk_proto::DEFAULT_MAX_FRAME,
            reconnect_delay_max: Duration::from_secs(1),
            rw_probe_min: Duration::from_millis(100),
            rw_probe_max: Duration::from_secs(60),
            sasl: None,
            gssapi: None,
        }
    }
}

/// Where the session stands, as the application sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Not connected yet (first connection being made).
    Connecting,
    /// Connected to a read-write server.
    Connected,
    /// Connected to a read-only server: writes fail with NOTREADONLY.
    ConnectedReadOnly,
    /// Connection lost; the core is reconnecting and the session may still be alive.
    Disconnected,
    /// A server said the session expired. Terminal.
    Expired,
    /// A server refused the credentials given to addAuth or the SASL exchange. Terminal.
    AuthFailed,
    /// The application closed the session. Terminal.
    Closed,
}

impl SessionState {
    /// Whether the session is over for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Expired | SessionState::AuthFailed | SessionState::Closed)
    }

    /// The wire KeeperState closest to this state.
    pub fn keeper_state(self) -> KeeperState {
        match self {
            SessionState::Connecting | SessionState::Disconnected => KeeperState::Disconnected,
            SessionState::Connected => KeeperState::SyncConnected,
            SessionState::ConnectedReadOnly => KeeperState::ConnectedReadOnly,
            SessionState::Expired => KeeperState::Expired,
            SessionState::AuthFailed => KeeperState::AuthFailed,
            SessionState::Closed => KeeperState::Closed,
        }
    }
}

/// A watch notification as delivered to one watcher. `path` is a client path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    /// What happened (None for a session state change).
    pub event_type: EventType,
    /// The session state at the time.
    pub state: KeeperState,
    /// The node, chroot stripped; empty for state changes.
    pub path: String,
}

/// Something the driver must pass on to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An operation finished. `watch_registered` says whether the watcher it asked for (id = `id`)
    /// is now in the registry and will later get [`Event::Watch`]es.
    Completed {
        /// The operation.
        id: OpId,
        /// Its result or ZooKeeper error code.
        result: Result<Response, ErrorCode>,
        /// Whether a watcher with id `id` was registered.
        watch_registered: bool,
    },
    /// A watcher fired. `retained` is false when this is the watcher's last event (one-shot
    /// watchers, removed watchers, and every watcher when the session ends).
    Watch {
        /// The watcher.
        watcher: WatcherId,
        /// The event.
        event: WatchedEvent,
        /// Whether the watcher stays registered.
        retained: bool,
    },
    /// The session state changed.
    State(SessionState),
}

/// A question for the driver while the session is connected read-only: does `host` serve writes?
/// See the module docs (step 4) for how to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwProbe {
    /// Names this probe in `handle_probe_answer`; answers to older probes are ignored.
    pub id: u64,
    /// The server to ask.
    pub host: HostPort,
}

/// A probe the driver is running.
#[derive(Debug, Clone)]
struct ProbeInFlight {
    id: u64,
    host: HostPort,
    /// Past this the probe counts as failed (the driver lost it).
    deadline: Instant,
}

/// The search for a read-write server while connected read-only.
#[derive(Debug, Clone)]
struct RwSearch {
    /// The pause before the next probe; doubled at each probe up to `rw_probe_max`.
    interval: Duration,
    /// When the next probe is due.
    next_at: Instant,
    in_flight: Option<ProbeInFlight>,
}

/// Why `submit` refused an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many operations pending ({0})")]
pub struct TooManyPending(pub usize);

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No connection; dial again at `retry_at`.
    Idle { retry_at: Instant },
    /// The driver is dialling; give up at `deadline`.
    Dialing { deadline: Instant },
    /// ConnectRequest sent; the ConnectResponse must come by `deadline`.
    Handshake { deadline: Instant },
    /// Session established on this connection.
    Open { last_send: Instant, last_recv: Instant },
    /// Expired, auth failed or closed.
    Terminal,
}

#[derive(Debug)]
struct InFlight {
    xid: i32,
    id: OpId,
    op: Op,
    watch_path: Option<String>,
}

#[derive(Debug)]
struct Queued {
    id: OpId,
    op: Op,
    prepared: Prepared,
}

#[derive(Debug)]
struct AuthEntry {
    scheme: String,
    auth: Bytes,
    /// The addAuth call still waiting for this entry's first reply.
    waiter: Option<OpId>,
}

/// One ZooKeeper session, driven from outside. See the module docs for the driving loop.
#[derive(Debug)]
pub struct Session {
    cfg: Config,
    chroot: Chroot,
    hosts: Vec<HostPort>,
    next_host: usize,
    session_id: i64,
    password: Bytes,
    negotiated: Duration,
    last_zxid: i64,
    phase: Phase,
    state: SessionState,
    closing: bool,
    next_op: OpId,
    next_xid: i32,
    queued: VecDeque<Queued>,
    in_flight: VecDeque<InFlight>,
    auths: Vec<AuthEntry>,
    auth_waiters: VecDeque<Option<OpId>>,
    watches: WatchRegistry,
    transmit: VecDeque<Bytes>,
    events: VecDeque<Event>,
    recv: BytesMut,
    decoder: FrameDecoder,
    close_requested: bool,
    rng: StdRng,
    /// The server of the current dial or connection (for `set_hosts`).
    current: Option<HostPort>,
    /// Try servers in connect-string order (`set_keep_host_order`).
    keep_order: bool,
    /// Whether the session id is one a read-write server accepted (or the application gave), so
    /// reconnecting resumes it; a read-only server's session is valid on that server only.
    seen_rw: bool,
    /// Looking for a read-write server (connected read-only, more than one server listed).
    rw_search: Option<RwSearch>,
    /// A server that answered `rw`: the next dial goes there.
    rw_target: Option<HostPort>,
    next_probe_id: u64,
    /// The SASL exchange under way on this connection, the xid of its request in flight and the
    /// state the session enters once it is over; nothing else is sent (and the application is
    /// not told of the connection) until then.
    sasl: Option<(i32, SaslExchange, SessionState)>,
    /// Why the last SASL exchange failed (the session is then AUTHFAILED).
    sasl_failure: Option<String>,
    /// Client nonces: a ChaCha stream keyed with [`SaslCredentials::nonce_key`].
    sasl_rng: StdRng,
}

/// A SASL exchange under way: DIGEST-MD5 (zk-proto's) or GSSAPI ([`gssapi::GssExchange`]).
#[derive(Debug)]
enum SaslExchange {
    DigestMd5(zk_proto::digest_md5::ClientExchange),
    Gssapi(gssapi::GssExchange),
}

impl SaslExchange {
    /// The next token to send, or `None` once the server has accepted the exchange.
    fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self {
            SaslExchange::DigestMd5(x) => match x.step(token).map_err(|e| e.to_string())? {
                zk_proto::digest_md5::ClientStep::Send(t) => Ok(Some(t)),
                zk_proto::digest_md5::ClientStep::Done => Ok(None),
            },
            SaslExchange::Gssapi(x) => match x.step(token)? {
                gssapi::GssStep::Send(t) => Ok(Some(t)),
                gssapi::GssStep::Done => Ok(None),
            },
        }
    }

    fn mechanism(&self) -> &'static str {
        match self {
            SaslExchange::DigestMd5(_) => "DIGEST-MD5",
            SaslExchange::Gssapi(_) => "GSSAPI",
        }
    }
}

impl Session {
    /// A session that will connect on the first `poll_connect`. `seed` drives the server shuffle and
    /// the reconnect jitter, so a run is reproducible from it.
    ///
    /// An empty host list leaves the session with nothing to dial: it stays `Connecting` forever.
    /// A chroot of "/" is the same as none.
    pub fn new(cfg: Config, seed: u64, now: Instant) -> Session {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut hosts = cfg.hosts.clone();
        hosts.shuffle(&mut rng);
        let chroot = Chroot(cfg.chroot.clone().filter(|c| c != "/"));
        let (session_id, password) = match &cfg.session {
            Some(s) => (s.id, s.password.clone()),
            None => (0, Bytes::from_static(&[0; 16])),
        };
        let decoder = FrameDecoder::new(cfg.max_frame);
        let seen_rw = cfg.session.is_some();
        let cfg_sasl_key = cfg.sasl.as_ref().map_or([0; 32], |c| c.nonce_key);
        Session {
            negotiated: cfg.session_timeout,
            decoder,
            cfg,
            chroot,
            hosts,
            next_host: 0,
            session_id,
            password,
            last_zxid: 0,
            phase: Phase::Idle { retry_at: now },
            state: SessionState::Connecting,
            closing: false,
            next_op: 1,
            next_xid: 1,
            queued: VecDeque::new(),
            in_flight: VecDeque::new(),
            auths: Vec::new(),
            auth_waiters: VecDeque::new(),
            watches: WatchRegistry::default(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            recv: BytesMut::new(),
            close_requested: false,
            rng,
            current: None,
            keep_order: false,
            seen_rw,
            rw_search: None,
            rw_target: None,
            next_probe_id: 1,
            sasl: None,
            sasl_failure: None,
            sasl_rng: StdRng::from_seed(cfg_sasl_key),
        }
    }

    /// With `keep` set, servers are tried in the order given (connect string or `set_hosts`)
    /// instead of a shuffled one, as Apache's `zoo_deterministic_conn_order` asks; the next dial
    /// starts from the first server. Clearing it shuffles again.
    pub fn set_keep_host_order(&mut self, keep: bool) {
        self.keep_order = keep;
        self.hosts = self.cfg.hosts.clone();
        if !keep {
            self.hosts.shuffle(&mut self.rng);
        }
        self.next_host = 0;
    }

    /// The servers the session dials, in the order it tries them.
    pub fn hosts(&self) -> &[HostPort] {
        &self.hosts
    }

    /// Replaces the server list (Apache's `zoo_set_servers`). Returns false, changing nothing,
    /// for an empty list. Otherwise the new list is used from the next dial on (shuffled unless
    /// `set_keep_host_order`). A connection to a server no longer listed is dropped (operations
    /// in flight complete with CONNECTIONLOSS, the session reconnects to a listed server). When
    /// the list grows, the connection is also moved with probability 1 - old/new so load spreads
    /// over the new servers, as Apache's client does; otherwise it stays.
    pub fn set_hosts(&mut self, hosts: Vec<HostPort>, now: Instant) -> bool {
        if hosts.is_empty() {
            return false;
        }
        let old_count = self.hosts.len();
        let same = {
            let mut a = self.cfg.hosts.clone();
            let mut b = hosts.clone();
            a.sort_by(|x, y| (&x.host, x.port).cmp(&(&y.host, y.port)));
            b.sort_by(|x, y| (&x.host, x.port).cmp(&(&y.host, y.port)));
            a == b
        };
        if same {
            return true;
        }
        let found_current = self.current.as_ref().is_some_and(|c| hosts.contains(c));
        let move_away = if !found_current {
            true
        } else if hosts.len() > old_count {
            self.rng.gen_bool(1.0 - old_count as f64 / hosts.len() as f64)
        } else {
            false
        };
        self.cfg.hosts = hosts;
        self.hosts = self.cfg.hosts.clone();
        if !self.keep_order {
            self.hosts.shuffle(&mut self.rng);
        }
        self.next_host = 0;
        if move_away {
            // Avoid redialling the server being left when the new list still holds it.
            if let Some(c) = &self.current {
                if self.hosts.len() > 1 && self.hosts[0] == *c {
                    self.next_host = 1;
                }
            }
            if matches!(self.phase, Phase::Dialing { .. } | Phase::Handshake { .. } | Phase::Open { .. }) {
                self.lose_connection(now, true);
                // Moving for load is not a failure: redial at once.
                self.phase = Phase::Idle { retry_at: now };
            }
        }
        true
    }

    /// The session id (0 until the first connection is established).
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// The session password (16 zero bytes until established).
    pub fn session_password(&self) -> &Bytes {
        &self.password
    }

    /// The timeout the server granted (the requested one until then).
    pub fn negotiated_timeout(&self) -> Duration {
        self.negotiated
    }

    /// The session state.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// The highest zxid seen in a reply.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// How long the driver may spend dialling one server (and the handshake): the session timeout
    /// shared among the servers, as Apache's client does.
    pub fn connect_timeout(&self) -> Duration {
        let n = self.hosts.len().max(1) as u32;
        self.negotiated / n
    }

    /// Whether `submit` would accept another operation.
    pub fn has_capacity(&self) -> bool {
        self.queued.len() + self.in_flight.len() < self.cfg.max_pending
    }

    fn read_timeout(&self) -> Duration {
        self.negotiated * 2 / 3
    }

    fn ping_interval(&self) -> Duration {
        (self.negotiated / 3).min(MAX_PING_INTERVAL)
    }

    /// The server to dial now, if one is due. The driver must then report `handle_connected` or
    /// `handle_connection_lost`; dialling past [`Session::connect_timeout`] counts as lost (the core
    /// times the attempt out itself via `handle_timeout`).
    pub fn poll_connect(&mut self, now: Instant) -> Option<HostPort> {
        match self.phase {
            Phase::Idle { retry_at } if now >= retry_at && !self.hosts.is_empty() => {
                let host = match self.rw_target.take() {
                    Some(h) => h,
                    None => {
                        let h = self.hosts[self.next_host].clone();
                        self.next_host = (self.next_host + 1) % self.hosts.len();
                        h
                    }
                };
                self.current = Some(host.clone());
                self.phase = Phase::Dialing { deadline: now + self.connect_timeout() };
                self.close_requested = false;
                Some(host)
            }
            _ => None,
        }
    }

    /// The dialled connection is up: the core queues the ConnectRequest.
    pub fn handle_connected(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Dialing { .. }) {
            return;
        }
        self.recv.clear();
        self.transmit.clear();
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            time_out: self.cfg.session_timeout.as_millis().min(i32::MAX as u128) as i32,
            session_id: if self.seen_rw { self.session_id } else { 0 },
            passwd: self.password.clone(),
            read_only: Some(self.cfg.can_be_read_only),
        };
        let mut out = BytesMut::new();
        zk_proto::frame::write_frame(&mut out, |o| req.write(o));
        self.transmit.push_back(out.freeze());
        self.phase = Phase::Handshake { deadline: now + self.connect_timeout() };
    }

    /// The connection (or the dial) failed or was closed by the peer.
    pub fn handle_connection_lost(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Dialing { .. } | Phase::Handshake { .. } | Phase::Open { .. }) {
            self.lose_connection(now, false);
        }
    }

    /// Bytes read from the connection. A malformed or unexpected frame drops the connection (the
    /// driver sees `poll_close`), and the core reconnects.
    pub fn handle_bytes(&mut self, now: Instant, data: &[u8]) {
        if !matches!(self.phase, Phase::Handshake { .. } | Phase::Open { .. }) {
            return;
        }
        self.recv.extend_from_slice(data);
        if let Phase::Open { last_recv, .. } = &mut self.phase {
            *last_recv = now;
        }
        loop {
            let frame = match self.decoder.decode(&mut self.recv) {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("dropping connection: {e}");
                    self.lose_connection(now, true);
                    return;
                }
            };
            let ok = match self.phase {
                Phase::Handshake { .. } => self.on_connect_response(now, frame),
                Phase::Open { .. } => self.on_reply(now, frame),
                _ => return,
            };
            if let Err(why) = ok {
                tracing::warn!("dropping connection: {why}");
                self.lose_connection(now, true);
                return;
            }
            if !matches!(self.phase, Phase::Handshake { .. } | Phase::Open { .. }) {
                return;
            }
        }
    }

    /// Time has passed: sends a ping when the connection has been idle a third of the timeout,
    /// drops a connection silent for two thirds of it, and gives up a dial or handshake past the
    /// connect timeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(search) = &mut self.rw_search {
            if search.in_flight.as_ref().is_some_and(|p| now >= p.deadline) {
                tracing::debug!("read-write probe got no answer in time");
                search.in_flight = None;
            }
        }
        match self.phase {
            Phase::Dialing { deadline } | Phase::Handshake { deadline } if now >= deadline => {
                tracing::debug!("connect attempt timed out");
                self.lose_connection(now, true);
            }
            Phase::Open { last_send, last_recv } => {
                if now >= last_recv + self.read_timeout() {
                    tracing::info!("no reply from server in {:?}, reconnecting", self.read_timeout());
                    self.lose_connection(now, true);
                } else if now >= last_send + self.ping_interval() {
                    self.send(now, zk_proto::xid::PING, OpCode::Ping, &[]);
                }
            }
            _ => {}
        }
    }

    /// When `handle_timeout` (or `poll_connect`) next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.phase {
            Phase::Idle { retry_at } => Some(retry_at),
            Phase::Dialing { deadline } | Phase::Handshake { deadline } => Some(deadline),
            Phase::Open { last_send, last_recv } => {
                let t = (last_recv + self.read_timeout()).min(last_send + self.ping_interval());
                let probe = self.rw_search.as_ref().map(|s| match &s.in_flight {
                    Some(p) => p.deadline,
                    None => s.next_at,
                });
                Some(probe.map_or(t, |p| t.min(p)))
            }
            Phase::Terminal => None,
        }
    }

    /// A read-write probe to run now, if one is due: only while connected read-only, one at a time,
    /// at intervals doubling from `rw_probe_min` to `rw_probe_max`, each to the next server in the
    /// rotation other than the one connected to. Report the answer with `handle_probe_answer`.
    pub fn poll_probe(&mut self, now: Instant) -> Option<RwProbe> {
        if self.state != SessionState::ConnectedReadOnly || self.closing {
            return None;
        }
        let search = self.rw_search.as_mut()?;
        if search.in_flight.is_some() || now < search.next_at {
            return None;
        }
        search.interval = (search.interval * 2).min(self.cfg.rw_probe_max);
        search.next_at = now + search.interval;
        // The next server in the rotation that is not the one already known to be read-only.
        let n = self.hosts.len();
        let host = (0..n)
            .map(|i| &self.hosts[(self.next_host + i) % n])
            .position(|h| Some(h) != self.current.as_ref());
        let i = (self.next_host + host?) % n;
        self.next_host = (i + 1) % n;
        let host = self.hosts[i].clone();
        let id = self.next_probe_id;
        self.next_probe_id += 1;
        tracing::info!("checking {host} for being read-write (next check in {:?})", search.interval);
        // Generous: the driver's own limit is RW_PROBE_TIMEOUT, for connecting and for reading.
        search.in_flight =
            Some(ProbeInFlight { id, host: host.clone(), deadline: now + RW_PROBE_TIMEOUT * 3 });
        Some(RwProbe { id, host })
    }

    /// The answer to probe `id`: what the server sent before closing, or `None` when the probe
    /// failed (refused, timed out, reset). A server answering `rw` makes the core leave the
    /// read-only server for it: operations in flight complete with CONNECTIONLOSS, the state goes
    /// to Disconnected, `poll_close` asks for the connection to be closed and `poll_connect` names
    /// that server at once. Any other answer keeps the search going. Answers to probes the core no
    /// longer waits for (the connection changed meanwhile) are ignored.
    pub fn handle_probe_answer(&mut self, now: Instant, id: u64, answer: Option<&[u8]>) {
        let Some(search) = &mut self.rw_search else { return };
        if search.in_flight.as_ref().is_none_or(|p| p.id != id) {
            return;
        }
        let Some(probe) = search.in_flight.take() else { return };
        let read_write = answer.is_some_and(|a| a.trim_ascii() == b"rw");
        if !read_write || self.state != SessionState::ConnectedReadOnly || !self.hosts.contains(&probe.host) {
            tracing::debug!(
                "{} is not a read-write server ({:?})",
                probe.host,
                answer.map(String::from_utf8_lossy)
            );
            return;
        }
        tracing::info!("read-write server found at {}, leaving the read-only server", probe.host);
        self.lose_connection(now, true);
        self.rw_target = Some(probe.host);
        // Not a failure: dial the read-write server at once.
        if matches!(self.phase, Phase::Idle { .. }) {
            self.phase = Phase::Idle { retry_at: now };
        }
    }

    /// The next frame to write, in order.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.transmit.pop_front()
    }

    /// Whether the driver must close the current connection (returns true once per closure).
    pub fn poll_close(&mut self) -> bool {
        std::mem::take(&mut self.close_requested)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Submits an operation. Its result comes later as [`Event::Completed`] with the returned id,
    /// possibly before any I/O (bad arguments: BADARGUMENTS / INVALIDACL; no local watcher for
    /// removeWatches: NOWATCHER; an ended session: SESSIONEXPIRED or AUTHFAILED; a close already
    /// requested: CONNECTIONLOSS). Operations submitted while disconnected wait for the next
    /// connection and fail with CONNECTIONLOSS if it cannot be made.
    ///
    /// Errors with [`TooManyPending`] when `max_pending` operations are already queued or in flight.
    pub fn submit(&mut self, op: Op, now: Instant) -> Result<OpId, TooManyPending> {
        if !self.has_capacity() {
            return Err(TooManyPending(self.cfg.max_pending));
        }
        let id = self.next_op;
        self.next_op += 1;
        match self.state {
            SessionState::Expired | SessionState::Closed => {
                return Ok(self.fail_now(id, ErrorCode::SessionExpired))
            }
            SessionState::AuthFailed => return Ok(self.fail_now(id, ErrorCode::AuthFailed)),
            _ => {}
        }
        if self.closing {
            return Ok(self.fail_now(id, ErrorCode::ConnectionLoss));
        }
        let prepared = match op::prepare(&op, &self.chroot) {
            Ok(p) => p,
            Err(code) => return Ok(self.fail_now(id, code)),
        };
        match &op {
            Op::RemoveWatches { path, kind } | Op::CheckWatches { path, kind }
                if !self.watches.contains(*kind, path) =>
            {
                return Ok(self.fail_now(id, ErrorCode::NoWatcher));
            }
            Op::AddAuth { scheme, auth } => {
                self.add_auth(id, scheme, auth, &prepared, now);
                return Ok(id);
            }
            Op::Close => {
                self.closing = true;
                if !matches!(self.phase, Phase::Open { .. }) {
                    self.complete(id, Ok(Response::Done), false);
                    self.terminate(ErrorCode::SessionExpired, SessionState::Closed);
                    return Ok(id);
                }
            }
            _ => {}
        }
        if self.ready() {
            self.send_op(now, id, op, prepared);
        } else {
            self.queued.push_back(Queued { id, op, prepared });
        }
        Ok(id)
    }

    /// Forgets a watcher whose consumer went away, so it gets no more events. The server keeps its
    /// side until the watch fires or the session ends (Apache behaves the same for dropped
    /// watchers); persistent ones should be removed with `Op::RemoveWatches` instead.
    pub fn forget_watcher(&mut self, id: WatcherId) {
        self.watches.forget(id);
    }

    fn fail_now(&mut self, id: OpId, code: ErrorCode) -> OpId {
        self.complete(id, Err(code), false);
        id
    }

    fn complete(&mut self, id: OpId, result: Result<Response, ErrorCode>, watch_registered: bool) {
        self.events.push_back(Event::Completed { id, result, watch_registered });
    }

    fn set_state(&mut self, s: SessionState) {
        if self.state != s {
            self.state = s;
            self.events.push_back(Event::State(s));
        }
    }

    fn add_auth(&mut self, id: OpId, scheme: &str, auth: &Bytes, prepared: &Prepared, now: Instant) {
        // The same credentials twice are kept once, as Apache keeps them in a set.
        let idx = match self.auths.iter().position(|a| a.scheme == scheme && a.auth == *auth) {
            Some(i) => i,
            None => {
                self.auths.push(AuthEntry { scheme: scheme.to_owned(), auth: auth.clone(), waiter: None });
                self.auths.len() - 1
            }
        };
        if self.ready() {
            self.auth_waiters.push_back(Some(id));
            self.send(now, zk_proto::xid::AUTH, OpCode::Auth, &prepared.body);
        } else if let Some(old) = self.auths[idx].waiter.replace(id) {
            // An identical addAuth is already waiting for the replay; both end the same way.
            self.complete(old, Ok(Response::Done), false);
        }
    }

    fn send(&mut self, now: Instant, xid: i32, opcode: OpCode, body: &[u8]) {
        self.transmit.push_back(op::frame_request(xid, opcode, body));
        if let Phase::Open { last_send, .. } = &mut self.phase {
            *last_send = now;
        }
    }

    fn send_op(&mut self, now: Instant, id: OpId, op: Op, prepared: Prepared) {
        let xid = self.next_xid;
        // Positive xids only: negative ones are reserved for pings, auth, notifications.
        self.next_xid = if self.next_xid == i32::MAX { 1 } else { self.next_xid + 1 };
        self.send(now, xid, prepared.opcode, &prepared.body);
        self.in_flight.push_back(InFlight { xid, id, op, watch_path: prepared.watch_path });
    }

    fn on_connect_response(&mut self, now: Instant, frame: Bytes) -> Result<(), String> {
        let resp = ConnectResponse::read(&mut Reader::new(frame))
            .map_err(|e| format!("bad ConnectResponse: {e}"))?;
        if resp.time_out <= 0 {
            tracing::warn!("session 0x{:x} expired", self.session_id);
            self.terminate(ErrorCode::SessionExpired, SessionState::Expired);
            return Ok(());
        }
        self.negotiated = Duration::from_millis(resp.time_out as u64);
        self.session_id = resp.session_id;
        self.password = resp.passwd;
        self.phase = Phase::Open { last_send: now, last_recv: now };
        let read_only = resp.read_only == Some(true);
        self.seen_rw |= !read_only;
        self.rw_search = (read_only && self.hosts.len() > 1).then(|| RwSearch {
            interval: self.cfg.rw_probe_min,
            next_at: now + self.cfg.rw_probe_min,
            in_flight: None,
        });
        let connected = if read_only { SessionState::ConnectedReadOnly } else { SessionState::Connected };
        if let Some(mech) = &self.cfg.gssapi {
            let host = self.current.as_ref().map(|h| h.host.clone()).unwrap_or_default();
            match mech.0.start(&host).and_then(gssapi::GssExchange::start) {
                Ok((exchange, token)) => {
                    let xid = self.send_sasl(now, &token);
                    self.sasl = Some((xid, SaslExchange::Gssapi(exchange), connected));
                }
                Err(e) => self.sasl_failed(format!("GSSAPI for {}: {e}", mech.0.describe())),
            }
            return Ok(());
        }
        if let Some(creds) = &self.cfg.sasl {
            let mut cnonce = [0u8; 16];
            self.sasl_rng.fill(&mut cnonce);
            let mut exchange =
                zk_proto::digest_md5::ClientExchange::new(&creds.username, &creds.password, &cnonce);
            let token = exchange.initial();
            let xid = self.send_sasl(now, &token);
            self.sasl = Some((xid, SaslExchange::DigestMd5(exchange), connected));
            return Ok(());
        }
        self.after_authentication(now, connected);
        Ok(())
    }

    /// Sends a SASL token with the next xid, returning the xid.
    fn send_sasl(&mut self, now: Instant, token: &[u8]) -> i32 {
        let xid = self.next_xid;
        self.next_xid = if self.next_xid == i32::MAX { 1 } else { self.next_xid + 1 };
        let body =
            zk_proto::jute::to_bytes(&zk_proto::GetSaslRequest { token: Bytes::copy_from_slice(token) });
        self.send(now, xid, OpCode::Sasl, &body);
        xid
    }

    /// The server's answer to a SASL token: the next token to send, the end of the exchange
    /// (then the rest is sent), or AUTHFAILED, which ends the session as Apache's clients do.
    fn on_sasl_reply(&mut self, now: Instant, hdr: ReplyHeader, r: &mut Reader) {
        let Some((_, mut exchange, connected)) = self.sasl.take() else { return };
        let step = if hdr.err != 0 {
            Err(format!("the server answered {}", error_code(hdr.err)))
        } else {
            zk_proto::SetSaslResponse::read(r)
                .map_err(|e| format!("bad SASL reply: {e}"))
                .and_then(|resp| exchange.step(&resp.token))
        };
        match step {
            Ok(Some(token)) => {
                let xid = self.send_sasl(now, &token);
                self.sasl = Some((xid, exchange, connected));
            }
            Ok(None) => {
                tracing::info!(
                    "session 0x{:x}: SASL {} authentication done",
                    self.session_id,
                    exchange.mechanism()
                );
                self.after_authentication(now, connected);
            }
            Err(e) => self.sasl_failed(format!("SASL {}: {e}", exchange.mechanism())),
        }
    }

    /// A SASL exchange failed: the session ends AUTHFAILED, as Apache's clients end a refused one
    /// (a Kerberos login that fails before any token is sent ends it too, where Apache's Java
    /// client goes on without SASL).
    fn sasl_failed(&mut self, why: String) {
        tracing::warn!("session 0x{:x}: SASL authentication failed: {why}", self.session_id);
        self.sasl_failure = Some(why);
        self.terminate(ErrorCode::AuthFailed, SessionState::AuthFailed);
    }

    /// Why the SASL exchange failed, once the session is AUTHFAILED because of it: the
    /// library's or the server's reason (no ticket, an unknown service principal, the server's
    /// refusal).
    pub fn sasl_failure(&self) -> Option<&str> {
        self.sasl_failure.as_deref()
    }

    /// Whether requests go out now: the session is open and no SASL exchange holds them back.
    fn ready(&self) -> bool {
        matches!(self.phase, Phase::Open { .. }) && self.sasl.is_none()
    }

    /// Once the connection is authenticated (or needs no SASL): the session is `connected`;
    /// addauth credentials, watches and what the user queued go out, in Apache's order.
    fn after_authentication(&mut self, now: Instant, connected: SessionState) {
        self.set_state(connected);
        for i in 0..self.auths.len() {
            let body = zk_proto::jute::to_bytes(&zk_proto::AuthPacket {
                auth_type: 0,
                scheme: self.auths[i].scheme.clone(),
                auth: self.auths[i].auth.clone(),
            });
            let waiter = self.auths[i].waiter.take();
            self.auth_waiters.push_back(waiter);
            self.send(now, zk_proto::xid::AUTH, OpCode::Auth, &body);
        }
        self.send_set_watches(now);
        while let Some(q) = self.queued.pop_front() {
            self.send_op(now, q.id, q.op, q.prepared);
        }
    }

    fn send_set_watches(&mut self, now: Instant) {
        if self.watches.is_empty() {
            return;
        }
        let [data, exist, child, persistent, recursive] = self.watches.paths();
        let tagged = data
            .into_iter()
            .map(|p| (0, p))
            .chain(exist.into_iter().map(|p| (1, p)))
            .chain(child.into_iter().map(|p| (2, p)))
            .chain(persistent.into_iter().map(|p| (3, p)))
            .chain(recursive.into_iter().map(|p| (4, p)));
        let mut batch: [Vec<String>; 5] = Default::default();
        let mut bytes = 0;
        let mut batches = Vec::new();
        for (kind, path) in tagged {
            let server = self.chroot.add(&path);
            if bytes + server.len() > SET_WATCHES_MAX_BYTES && bytes > 0 {
                batches.push(std::mem::take(&mut batch));
                bytes = 0;
            }
            bytes += server.len();
            batch[kind].push(server);
        }
        batches.push(batch);
        for [d, e, c, p, r] in batches {
            // The older SetWatches record when no persistent watch is involved, so servers
            // before 3.6 keep working, as Apache's client does.
            let (opcode, body) = if p.is_empty() && r.is_empty() {
                let rec = zk_proto::SetWatches {
                    relative_zxid: self.last_zxid,
                    data_watches: d,
                    exist_watches: e,
                    child_watches: c,
                };
                (OpCode::SetWatches, zk_proto::jute::to_bytes(&rec))
            } else {
                let rec = zk_proto::SetWatches2 {
                    relative_zxid: self.last_zxid,
                    data_watches: d,
                    exist_watches: e,
                    child_watches: c,
                    persistent_watches: p,
                    persistent_recursive_watches: r,
                };
                (OpCode::SetWatches2, zk_proto::jute::to_bytes(&rec))
            };
            self.send(now, zk_proto::xid::SET_WATCHES, opcode, &body);
        }
    }

    fn on_reply(&mut self, now: Instant, frame: Bytes) -> Result<(), String> {
        let mut r = Reader::new(frame);
        let hdr = ReplyHeader::read(&mut r).map_err(|e| format!("bad reply header: {e}"))?;
        if self.sasl.as_ref().is_some_and(|(xid, _, _)| *xid == hdr.xid) {
            self.on_sasl_reply(now, hdr, &mut r);
            return Ok(());
        }
        match hdr.xid {
            zk_proto::xid::PING => return Ok(()),
            zk_proto::xid::NOTIFICATION => {
                let ev = WatcherEvent::read(&mut r).map_err(|e| format!("bad notification: {e}"))?;
                self.on_notification(ev);
                return Ok(());
            }
            zk_proto::xid::AUTH => {
                let waiter = self.auth_waiters.pop_front().flatten();
                if hdr.err == ErrorCode::AuthFailed.code() {
                    if let Some(id) = waiter {
                        self.complete(id, Err(ErrorCode::AuthFailed), false);
                    }
                    self.terminate(ErrorCode::AuthFailed, SessionState::AuthFailed);
                } else if let Some(id) = waiter {
                    let res = if hdr.err == 0 { Ok(Response::Done) } else { Err(error_code(hdr.err)) };
                    self.complete(id, res, false);
                }
                return Ok(());
            }
            zk_proto::xid::SET_WATCHES => {
                if hdr.err != 0 {
                    tracing::warn!("setWatches failed with {}", error_code(hdr.err));
                }
                return Ok(());
            }
            _ => {}
        }
        let Some(front) = self.in_flight.front() else {
            return Err(format!("reply for xid {} with nothing outstanding", hdr.xid));
        };
        if front.xid != hdr.xid {
            return Err(format!("reply xid {} out of order, expected {}", hdr.xid, front.xid));
        }
        let Some(f) = self.in_flight.pop_front() else { return Ok(()) };
        if hdr.zxid > 0 {
            self.last_zxid = self.last_zxid.max(hdr.zxid);
        }
        let result = if hdr.err == 0 {
            match op::decode_response(&f.op, &mut r, &self.chroot) {
                Ok(resp) => Ok(resp),
                Err(e) => {
                    // The op's fate is known to the server but not to us; report it like a lost
                    // connection and reconnect, which is what the frame corruption calls for.
                    self.complete(f.id, Err(ErrorCode::MarshallingError), false);
                    return Err(format!("bad reply to {:?}: {e}", f.op));
                }
            }
        } else if matches!(f.op, Op::Exists { .. }) && hdr.err == ErrorCode::NoNode.code() {
            Ok(Response::Exists(None))
        } else {
            Err(error_code(hdr.err))
        };
        let registered = self.register_watch(&f, &result);
        let closed = matches!(f.op, Op::Close);
        self.complete(f.id, result, registered);
        if closed {
            self.terminate(ErrorCode::SessionExpired, SessionState::Closed);
        }
        let _ = now;
        Ok(())
    }

    fn register_watch(&mut self, f: &InFlight, result: &Result<Response, ErrorCode>) -> bool {
        let Some(path) = &f.watch_path else { return false };
        let ok = result.is_ok();
        let kind = match &f.op {
            Op::Exists { .. } => match result {
                Ok(Response::Exists(Some(_))) => WatchKind::Data,
                Ok(Response::Exists(None)) => WatchKind::Exist,
                _ => return false,
            },
            Op::GetData { .. } | Op::GetDataNullable { .. } | Op::GetConfig { .. } if ok => WatchKind::Data,
            Op::GetChildren { .. } if ok => WatchKind::Child,
            Op::AddWatch { mode: AddWatchMode::Persistent, .. } if ok => WatchKind::Persistent,
            Op::AddWatch { mode: AddWatchMode::PersistentRecursive, .. } if ok => {
                WatchKind::PersistentRecursive
            }
            Op::RemoveWatches { kind, .. } if ok => {
                for (id, ev) in self.watches.remove(*kind, path) {
                    let event = WatchedEvent {
                        event_type: ev,
                        state: KeeperState::SyncConnected,
                        path: path.clone(),
                    };
                    self.events.push_back(Event::Watch { watcher: id, event, retained: false });
                }
                return false;
            }
            _ => return false,
        };
        self.watches.add(kind, path, f.id);
        true
    }

    fn on_notification(&mut self, ev: WatcherEvent) {
        let Some(event_type) = EventType::from_i32(ev.event_type) else {
            tracing::warn!("ignoring notification with unknown type {}", ev.event_type);
            return;
        };
        let path = self.chroot.strip(&ev.path);
        let state = KeeperState::from_i32(ev.state).unwrap_or(KeeperState::SyncConnected);
        for (watcher, retained) in self.watches.trigger(event_type, &path) {
            let event = WatchedEvent { event_type, state, path: path.clone() };
            self.events.push_back(Event::Watch { watcher, event, retained });
        }
    }

    fn fail_outstanding(&mut self, code: ErrorCode) {
        let ids: Vec<OpId> = self
            .in_flight
            .drain(..)
            .map(|f| f.id)
            .chain(self.queued.drain(..).map(|q| q.id))
            .chain(self.auth_waiters.drain(..).flatten())
            .chain(self.auths.iter_mut().filter_map(|a| a.waiter.take()))
            .collect();
        for id in ids {
            self.complete(id, Err(code), false);
        }
    }

    fn lose_connection(&mut self, now: Instant, close: bool) {
        let was_open = matches!(self.phase, Phase::Open { .. });
        let jitter_ms = self.cfg.reconnect_delay_max.as_millis().min(u64::MAX as u128) as u64;
        let delay = Duration::from_millis(if jitter_ms == 0 { 0 } else { self.rng.gen_range(0..jitter_ms) });
        self.phase = Phase::Idle { retry_at: now + delay };
        self.rw_search = None;
        self.sasl = None;
        self.close_requested |= close;
        self.recv.clear();
        self.transmit.clear();
        self.fail_outstanding(ErrorCode::ConnectionLoss);
        if self.closing {
            // A close that lost its connection is done as far as the application is concerned;
            // the server expires the session.
            self.terminate(ErrorCode::SessionExpired, SessionState::Closed);
            return;
        }
        if was_open {
            self.set_state(SessionState::Disconnected);
        }
    }

    fn terminate(&mut self, code: ErrorCode, state: SessionState) {
        self.phase = Phase::Terminal;
        self.sasl = None;
        self.rw_search = None;
        self.close_requested = true;
        self.transmit.clear();
        self.fail_outstanding(code);
        for watcher in self.watches.drain() {
            let event = WatchedEvent {
                event_type: EventType::None,
                state: state.keeper_state(),
                path: String::new(),
            };
            self.events.push_back(Event::Watch { watcher, event, retained: false });
        }
        self.set_state(state);
    }
}

/// Maps a wire error code; a code this client does not know becomes SYSTEMERROR.
fn error_code(code: i32) -> ErrorCode {
    ErrorCode::from_i32(code).unwrap_or_else(|| {
        tracing::warn!("unknown error code {code} from server");
        ErrorCode::SystemError
    })
}

#[cfg(test)]
mod tests;
