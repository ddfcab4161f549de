//! The clients of a run: zk-client sessions doing what ZooKeeper users do, each operation
//! recorded with the time it was invoked and the time and way it completed (ok, failed, or
//! unknown: timed out or lost with its connection, so it may or may not have happened).
//!
//! - Register workers: create, conditional setData, sync + getData on keys under /reg (each key
//!   used for a bounded number of operations, so that every history stays small enough to
//!   check), plain getData (checked for the session's own order: never older than what the
//!   session saw), sequential creates under /seq, one ephemeral node per session under /eph.
//! - Lock workers: the zk-client Lock recipe on /lock, recording when each believes it holds it.
//! - An abandoner: sessions that create an ephemeral node and vanish without closing, as a
//!   crashed client does.

use crate::linear::{Event, Op, Ret};
use crate::support::client::RawClient;
use bytes::Bytes;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zk_client::{acl, Client, CreateMode, Error, SessionState};

/// Session timeout every client asks for.
pub const SESSION_TIMEOUT: Duration = Duration::from_millis(4000);
/// An operation not answered within this is unknown.
pub const OP_TIMEOUT: Duration = Duration::from_millis(3000);
/// Keys in use at once.
pub const SLOTS: u64 = 4;
/// Operations on one key before its slot moves to a fresh key.
pub const OPS_PER_KEY: u64 = 50;

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done, with the answer recorded.
    Ok,
    /// Failed without effect (or a read, whose effect does not matter).
    Failed,
    /// Unknown: it may or may not have taken effect.
    Unknown,
}

/// One operation, for the report and the timeline.
#[derive(Debug, Clone)]
pub struct OpRecord {
    /// Worker lane.
    pub lane: usize,
    /// What it was ("create /reg/k3 = 17", ...).
    pub what: String,
    /// Invocation, µs since the run began.
    pub call: u64,
    /// Completion, µs.
    pub done: u64,
    /// How it ended.
    pub outcome: Outcome,
}

/// A time a lock worker held the lock, in its own view.
#[derive(Debug, Clone, Copy)]
pub struct Hold {
    /// Worker lane.
    pub lane: usize,
    /// From (µs): acquire returned and the session was connected.
    pub from: u64,
    /// To (µs): just before release, or when the worker saw its connection go.
    pub to: u64,
}

/// An ephemeral node and what should become of it.
#[derive(Debug, Clone)]
pub struct Ephemeral {
    /// Its path.
    pub path: String,
    /// Whether its create was acknowledged.
    pub acked: bool,
    /// Its session ended (expired, or abandoned): the node must be gone.
    pub gone: bool,
}

/// Everything the clients recorded.
#[derive(Default)]
pub struct History {
    /// Each key's register history.
    pub keys: HashMap<String, Vec<Event>>,
    /// Every operation, for the timeline.
    pub ops: Vec<OpRecord>,
    /// Session-order violations seen by plain reads.
    pub order_violations: Vec<String>,
    /// Names of acknowledged sequential creates.
    pub seq_acked: Vec<String>,
    /// Sequential creates of unknown outcome.
    pub seq_unknown: usize,
    /// Lock holds.
    pub holds: Vec<Hold>,
    /// Ephemeral nodes made.
    pub ephemerals: Vec<Ephemeral>,
    /// When the last abandoned session vanished (µs).
    pub last_abandon: u64,
    /// Who did each register operation, by key and invocation time (µs): "lane L", and
    /// ", server S" when one connection carried the whole operation, so S answered it.
    pub answered: HashMap<(String, u64), String>,
}

/// What the workers share.
pub struct Shared {
    /// Start of the run.
    pub t0: Instant,
    /// The record.
    pub history: Mutex<History>,
    /// Set to stop the workers.
    pub stop: AtomicBool,
    slot_ops: [AtomicU64; SLOTS as usize],
    /// Each server's client address ("ip:port"), server i + 1 at index i.
    servers: Vec<String>,
}

impl Shared {
    /// A record starting now, of clients of the servers at `servers` (client addresses).
    pub fn new(servers: Vec<String>) -> Arc<Shared> {
        Arc::new(Shared {
            t0: Instant::now(),
            history: Mutex::new(History::default()),
            stop: AtomicBool::new(false),
            slot_ops: Default::default(),
            servers,
        })
    }

    /// The server (1-based) that answered everything between two readings of a client's
    /// connection: known only when both name the same connection.
    fn answered_by(&self, before: &Option<(String, u64)>, after: &Option<(String, u64)>) -> Option<usize> {
        match (before, after) {
            (Some((addr, n)), Some((_, m))) if n == m => {
                self.servers.iter().position(|s| s == addr).map(|i| i + 1)
            }
            _ => None,
        }
    }

    /// µs since the run began.
    pub fn now(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }

    fn key(&self, slot: u64) -> String {
        let n = self.slot_ops[slot as usize].fetch_add(1, Ordering::Relaxed);
        format!("/reg/s{slot}g{}", n / OPS_PER_KEY)
    }

    fn record(&self, lane: usize, what: String, call: u64, outcome: Outcome) {
        let done = self.now();
        self.history.lock().unwrap().ops.push(OpRecord { lane, what, call, done, outcome });
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A small deterministic generator (xorshift64*), one per worker.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded; 0 is replaced.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

async fn timed<T>(f: impl std::future::Future<Output = Result<T, Error>>) -> Result<T, Error> {
    match tokio::time::timeout(OP_TIMEOUT, f).await {
        Ok(r) => r,
        Err(_) => Err(Error::OperationTimeout),
    }
}

/// Connects a session through `connect`, retrying until the run stops.
async fn connect(shared: &Shared, connect: &str) -> Option<Client> {
    while !shared.stopped() {
        let c = Client::builder(connect).session_timeout(SESSION_TIMEOUT).connect();
        if let Ok(Ok(c)) = tokio::time::timeout(SESSION_TIMEOUT * 2, c).await {
            return Some(c);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Creates what every workload needs (the parents), through `connect`.
pub async fn prepare(connect_to: &str) -> Result<(), String> {
    let c = Client::builder(connect_to)
        .session_timeout(SESSION_TIMEOUT)
        .connect()
        .await
        .map_err(|e| format!("connect {connect_to}: {e}"))?;
    for p in ["/reg", "/seq", "/eph", "/lock"] {
        match c.create(p, b"", &acl::open_unsafe(), CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists) => {}
            Err(e) => return Err(format!("create {p}: {e}")),
        }
    }
    let _ = c.close().await;
    Ok(())
}

fn value_of(data: &Bytes) -> Option<u64> {
    Some(u64::from_be_bytes(data.as_ref().try_into().ok()?))
}

/// One register worker on lane `lane`, until the run stops; returns its session if it lives (its
/// ephemeral node must then still be there).
pub async fn register_worker(
    shared: Arc<Shared>,
    lane: usize,
    connect_to: String,
    seed: u64,
) -> Option<Client> {
    let mut rng = Rng::new(seed);
    let mut counter = 0u64;
    'session: while !shared.stopped() {
        let client = connect(&shared, &connect_to).await?;
        // This session's view: the newest version it has seen of each key.
        let mut seen: HashMap<String, i32> = HashMap::new();
        let eph = format!("/eph/w{lane}-{:x}", client.session_id());
        let call = shared.now();
        let r = timed(client.create(&eph, b"", &acl::open_unsafe(), CreateMode::Ephemeral)).await;
        let acked = r.is_ok();
        let outcome = match r {
            Ok(_) => Outcome::Ok,
            Err(Error::ConnectionLoss | Error::OperationTimeout | Error::SessionExpired) => Outcome::Unknown,
            Err(_) => Outcome::Failed,
        };
        shared.record(lane, format!("create {eph} (ephemeral)"), call, outcome);
        let eph_index = {
            let mut h = shared.history.lock().unwrap();
            h.ephemerals.push(Ephemeral { path: eph.clone(), acked, gone: false });
            h.ephemerals.len() - 1
        };
        while !shared.stopped() {
            if client.state().is_terminal() {
                shared.history.lock().unwrap().ephemerals[eph_index].gone = true;
                continue 'session;
            }
            tokio::time::sleep(Duration::from_millis(rng.below(15))).await;
            let key = shared.key(rng.below(SLOTS));
            counter += 1;
            let value = ((lane as u64) << 40) | counter;
            let roll = rng.below(100);
            let connection = client.connection();
            let call = shared.now();
            let (op, result, what) = if roll < 12 {
                let r = timed(client.create(
                    &key,
                    &value.to_be_bytes(),
                    &acl::open_unsafe(),
                    CreateMode::Persistent,
                ))
                .await;
                let ret = match r {
                    Ok(_) => {
                        seen.insert(key.clone(), 0);
                        Ok(Ret::Created)
                    }
                    Err(Error::NodeExists) => Ok(Ret::Exists),
                    Err(Error::NoNode) => Ok(Ret::NoNode),
                    Err(e) => Err(e),
                };
                (Some(Op::Create(value)), ret, format!("create {key} = {value:x}"))
            } else if roll < 45 {
                let version = if rng.below(4) == 0 { -1 } else { seen.get(&key).copied().unwrap_or(0) };
                let r = timed(client.set_data(&key, &value.to_be_bytes(), version)).await;
                let ret = match r {
                    Ok(stat) => {
                        seen.insert(key.clone(), stat.version);
                        Ok(Ret::Set(stat.version))
                    }
                    Err(Error::NoNode) => Ok(Ret::NoNode),
                    Err(Error::BadVersion) => Ok(Ret::BadVersion),
                    Err(e) => Err(e),
                };
                (Some(Op::Set(value, version)), ret, format!("set {key} = {value:x} @v{version}"))
            } else if roll < 75 {
                let r = async {
                    timed(client.sync(&key)).await?;
                    timed(client.get_data(&key)).await
                }
                .await;
                let ret = match r {
                    Ok((data, stat)) => match value_of(&data) {
                        Some(v) => Ok(Ret::Value(v, stat.version)),
                        None => Err(Error::MarshallingError),
                    },
                    Err(Error::NoNode) => Ok(Ret::NoNode),
                    Err(e) => Err(e),
                };
                (Some(Op::Get), ret, format!("sync+get {key}"))
            } else if roll < 90 {
                // A plain read: sequentially consistent only, so checked against the session's
                // own order (never older than what it saw), not for linearizability.
                let r = timed(client.get_data(&key)).await;
                let before = seen.get(&key).copied();
                let ok = match &r {
                    Ok((_, stat)) => {
                        if before.is_some_and(|v| stat.version < v) {
                            shared.history.lock().unwrap().order_violations.push(format!(
                                "lane {lane} session {:x}: get {key} gave version {} after the session saw {}",
                                client.session_id(),
                                stat.version,
                                before.unwrap_or(0)
                            ));
                        }
                        let v = seen.entry(key.clone()).or_insert(stat.version);
                        *v = (*v).max(stat.version);
                        Outcome::Ok
                    }
                    Err(Error::NoNode) => {
                        if let Some(v) = before {
                            shared.history.lock().unwrap().order_violations.push(format!(
                                "lane {lane} session {:x}: get {key} gave NONODE after the session saw version {v}",
                                client.session_id()
                            ));
                        }
                        Outcome::Ok
                    }
                    Err(_) => Outcome::Failed,
                };
                shared.record(lane, format!("get {key}"), call, ok);
                (None, Ok(Ret::NoNode), String::new())
            } else {
                let r = timed(client.create(
                    "/seq/n-",
                    b"",
                    &acl::open_unsafe(),
                    CreateMode::PersistentSequential,
                ))
                .await;
                let outcome = match r {
                    Ok(name) => {
                        shared.history.lock().unwrap().seq_acked.push(name);
                        Outcome::Ok
                    }
                    Err(_) => {
                        shared.history.lock().unwrap().seq_unknown += 1;
                        Outcome::Unknown
                    }
                };
                shared.record(lane, "create /seq/n- (sequential)".into(), call, outcome);
                (None, Ok(Ret::NoNode), String::new())
            };
            let Some(op) = op else { continue };
            let done = shared.now();
            let server = shared.answered_by(&connection, &client.connection());
            let who = match server {
                Some(s) => format!("lane {lane}, server {s}"),
                None => format!("lane {lane}"),
            };
            let what = match server {
                Some(s) => format!("{what} [server {s}]"),
                None => what,
            };
            let (record, outcome) = match result {
                Ok(ret) => (Event { op, call, done: Some((done, ret)) }, Outcome::Ok),
                // A read that failed had no effect; a write that failed with an error other than
                // its own (connection loss, timeout, session gone) may have happened.
                Err(_) => (
                    Event { op, call, done: None },
                    if op == Op::Get { Outcome::Failed } else { Outcome::Unknown },
                ),
            };
            let mut h = shared.history.lock().unwrap();
            h.answered.insert((key.clone(), call), who);
            h.keys.entry(key.clone()).or_default().push(record);
            h.ops.push(OpRecord { lane, what, call, done, outcome });
        }
        // The run is over: the session (and its node) stays until the end's checks.
        return Some(client);
    }
    None
}

/// One lock worker on lane `lane`.
pub async fn lock_worker(shared: Arc<Shared>, lane: usize, connect_to: String, seed: u64) {
    let mut rng = Rng::new(seed);
    while !shared.stopped() {
        let Some(client) = connect(&shared, &connect_to).await else { return };
        while !shared.stopped() && !client.state().is_terminal() {
            let mut lock = zk_client::recipes::Lock::new(&client, "/lock");
            let call = shared.now();
            let got = tokio::time::timeout(OP_TIMEOUT * 2, lock.acquire()).await;
            if !matches!(got, Ok(Ok(()))) || client.state() != SessionState::Connected {
                shared.record(lane, "lock acquire".into(), call, Outcome::Unknown);
                // Whatever node it may have left goes with the session.
                let _ = client.close().await;
                break;
            }
            let from = shared.now();
            shared.record(lane, "lock acquire".into(), call, Outcome::Ok);
            let hold_for = Duration::from_millis(5 + rng.below(60));
            let end = Instant::now() + hold_for;
            let mut lost = false;
            while Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(2)).await;
                if client.state() != SessionState::Connected {
                    lost = true;
                    break;
                }
            }
            let to = shared.now();
            shared.history.lock().unwrap().holds.push(Hold { lane, from, to });
            let call = shared.now();
            let released = timed(lock.release()).await;
            shared.record(
                lane,
                "lock release".into(),
                call,
                if released.is_ok() { Outcome::Ok } else { Outcome::Unknown },
            );
            if lost || released.is_err() {
                let _ = client.close().await;
                break;
            }
            tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
        }
    }
}

/// Every so often, a session on one server that makes an ephemeral node and vanishes without
/// closing (blocking sockets, on a blocking thread).
pub async fn abandoner(shared: Arc<Shared>, lane: usize, servers: Vec<SocketAddr>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut n = 0u32;
    while !shared.stopped() {
        tokio::time::sleep(Duration::from_millis(1500 + rng.below(1500))).await;
        if shared.stopped() {
            break;
        }
        let addr = servers[rng.below(servers.len() as u64) as usize];
        n += 1;
        let path = format!("/eph/abandoned-{lane}-{n}");
        let call = shared.now();
        let p = path.clone();
        let acked = tokio::task::spawn_blocking(move || {
            let req = zk_proto::ConnectRequest {
                time_out: SESSION_TIMEOUT.as_millis() as i32,
                read_only: Some(false),
                ..Default::default()
            };
            // RawClient gives up loudly on a refused connection: look first.
            drop(std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?);
            let mut c = RawClient::connect_with(addr, req)?;
            c.stream.set_read_timeout(Some(OP_TIMEOUT)).ok()?;
            let xid = c.send(&zk_proto::Request::Create(zk_proto::CreateRequest {
                path: p,
                data: None,
                acl: crate::support::client::open_acl(),
                flags: zk_proto::CreateMode::Ephemeral.code(),
            }));
            let reply = c.recv(xid)?;
            // Dropped without closeSession: only expiry removes the node.
            Some(reply.err() == zk_proto::ErrorCode::Ok)
        })
        .await
        .ok()
        .flatten();
        let outcome = match acked {
            Some(true) => Outcome::Ok,
            Some(false) => Outcome::Failed,
            None => Outcome::Unknown,
        };
        shared.record(lane, format!("create {path} (ephemeral, then abandoned)"), call, outcome);
        let mut h = shared.history.lock().unwrap();
        h.ephemerals.push(Ephemeral { path, acked: acked == Some(true), gone: true });
        h.last_abandon = shared.now();
    }
}
