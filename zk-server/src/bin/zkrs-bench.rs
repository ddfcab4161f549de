//! zkrs-bench: a pipelined, multi-connection ZooKeeper load generator speaking the wire protocol
//! directly, so that the client is never the bottleneck. Works against zkrs-server and Apache
//! ZooKeeper alike.
//!
//! Each connection keeps `--inflight` requests outstanding; latency is measured per request from send
//! to reply. Three workloads measure something other than one request: `watch` (from a setData being
//! sent to each watcher's notification), `churn` (a whole session's life) and `multi` (one multi of
//! several setData). Prints progress every second on stderr, then a result table (or JSON with
//! `--json`). Replies carrying an error code are counted in `errors`, never dropped.

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use zk_proto::frame::write_frame;
use zk_proto::jute::{self, Jute, Reader};
use zk_proto::response::decode_multi_response;
use zk_proto::*;

const USAGE: &str = "usage: zkrs-bench [--server HOST:PORT] [--workload W] [--conns N] [--inflight N] \
[--duration SECS] [--value-size BYTES] [--keys N] [--read-percent P] [--count N] [--multi-ops K] [--json]

workloads (W), each connection keeping --inflight requests outstanding unless said otherwise:
  get       getData on random keys of --keys (default)
  set       setData on random keys
  create    persistent-sequential creates
  delete    deletes of znodes each connection creates first (20000 per connection)
  mixed     get or set on random keys, --read-percent reads
  populate  creates --count znodes, then stops
  ping      pings: the loopback round trip plus framing
  watch     --conns watcher sessions each hold a one-shot data watch (getData, watch=true) on one
            znode; one more session does setData on it once all are armed; latency is from the
            setData being sent to each watcher's notification; counted in events/s; watchers
            re-arm after every event (--inflight is not used)
  churn     --conns workers each loop: connect and handshake, create an ephemeral znode,
            closeSession, close the socket; one cycle is one op, counted in cycles/s
            (--inflight is not used)
  multi     pipelined multi requests (opcode 14), each K setData (--multi-ops, default 4) on K
            distinct keys; counted in multis/s; a multi whose result holds an error is one error";

/// Where the watch workload's watchers watch and its writer writes.
const WATCH_PATH: &str = "/zkrs-bench/watch";
/// Parent of the churn workload's ephemerals.
const CHURN_PATH: &str = "/zkrs-bench/churn";
/// How often a task blocked on the server checks whether the run is over.
const DONE_POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    Get,
    Set,
    Create,
    Delete,
    Mixed,
    /// Creates `--count` znodes and stops: for memory and restart measurements.
    Populate,
    /// Pings: the server does no work, so this is the loopback round trip plus framing.
    Ping,
    /// Watch fan-out: one setData, `--conns` notifications.
    Watch,
    /// Session churn: connect, create an ephemeral, closeSession.
    Churn,
    /// Multi requests of `--multi-ops` setData each.
    Multi,
}

impl Workload {
    /// What one counted op is, for the rate's unit.
    fn unit(self) -> &'static str {
        match self {
            Workload::Watch => "events",
            Workload::Churn => "cycles",
            Workload::Multi => "multis",
            _ => "ops",
        }
    }
}

#[derive(Debug, Clone)]
struct Opts {
    server: String,
    workload: Workload,
    conns: usize,
    inflight: usize,
    duration: Duration,
    value_size: usize,
    keys: usize,
    read_percent: u32,
    json: bool,
    count: u64,
    multi_ops: usize,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        server: "127.0.0.1:2181".into(),
        workload: Workload::Get,
        conns: 4,
        inflight: 200,
        duration: Duration::from_secs(10),
        value_size: 100,
        keys: 1000,
        read_percent: 90,
        json: false,
        count: 1_000_000,
        multi_ops: 4,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        let mut val = || -> Result<String, String> {
            i += 1;
            args.get(i).cloned().ok_or_else(|| format!("{flag} needs a value"))
        };
        let num = |s: String| s.parse::<u64>().map_err(|_| format!("{flag}: not a number: {s}"));
        match flag {
            "--server" => o.server = val()?,
            "--workload" => {
                o.workload = match val()?.as_str() {
                    "get" => Workload::Get,
                    "set" => Workload::Set,
                    "create" => Workload::Create,
                    "delete" => Workload::Delete,
                    "mixed" => Workload::Mixed,
                    "populate" => Workload::Populate,
                    "ping" => Workload::Ping,
                    "watch" => Workload::Watch,
                    "churn" => Workload::Churn,
                    "multi" => Workload::Multi,
                    w => return Err(format!("--workload: unknown workload {w}")),
                }
            }
            "--conns" => o.conns = num(val()?)?.max(1) as usize,
            "--inflight" => o.inflight = num(val()?)?.clamp(1, 100_000) as usize,
            "--duration" => o.duration = Duration::from_secs(num(val()?)?.max(1)),
            "--value-size" => o.value_size = num(val()?)?.min(1_000_000) as usize,
            "--keys" => o.keys = num(val()?)?.max(1) as usize,
            "--read-percent" => o.read_percent = num(val()?)?.min(100) as u32,
            "--json" => o.json = true,
            "--count" => o.count = num(val()?)?,
            "--multi-ops" => o.multi_ops = num(val()?)?.clamp(1, 1000) as usize,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
        i += 1;
    }
    if o.workload == Workload::Multi && o.multi_ops > o.keys {
        return Err(format!("--multi-ops {} needs at least as many --keys (has {})", o.multi_ops, o.keys));
    }
    Ok(o)
}

/// One raw session used by a load connection.
struct Session {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

impl Session {
    async fn connect(addr: &str) -> std::io::Result<Session> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut s = Session {
            stream,
            rbuf: BytesMut::with_capacity(1 << 16),
            wbuf: BytesMut::with_capacity(1 << 16),
        };
        let req = ConnectRequest { time_out: 30_000, read_only: Some(false), ..Default::default() };
        write_frame(&mut s.wbuf, |b| req.write(b));
        s.flush().await?;
        let f = s.read_frame().await?;
        let resp: ConnectResponse = jute::from_bytes(f)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        if resp.session_id == 0 {
            return Err(std::io::Error::other("session refused"));
        }
        Ok(s)
    }

    fn queue(&mut self, xid: i32, req: &Request) {
        write_frame(&mut self.wbuf, |b| {
            RequestHeader { xid, op: req.op().code() }.write(b);
            req.encode(b);
        });
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        self.stream.write_all(&self.wbuf).await?;
        self.wbuf.clear();
        Ok(())
    }

    async fn read_frame(&mut self) -> std::io::Result<Bytes> {
        loop {
            if self.rbuf.len() >= 4 {
                let len = u32::from_be_bytes(self.rbuf[..4].try_into().expect("4 bytes")) as usize;
                if self.rbuf.len() >= 4 + len {
                    let _ = self.rbuf.split_to(4);
                    return Ok(self.rbuf.split_to(len).freeze());
                }
            }
            if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Reads one frame and its reply header; the reader is left at the body.
    async fn read_header(&mut self) -> std::io::Result<(ReplyHeader, Reader)> {
        let mut r = Reader::new(self.read_frame().await?);
        let h = ReplyHeader::read(&mut r).map_err(invalid)?;
        Ok((h, r))
    }

    /// Reads frames until a reply (skipping notifications); returns its header and body.
    async fn read_reply(&mut self) -> std::io::Result<(ReplyHeader, Reader)> {
        loop {
            let (h, r) = self.read_header().await?;
            if h.xid != xid::NOTIFICATION {
                return Ok((h, r));
            }
        }
    }

    /// Like [`Session::read_header`], but gives up with `None` once `done` is set: for a task
    /// waiting on something the end of the run may stop from ever arriving.
    async fn read_header_until(
        &mut self,
        done: &AtomicBool,
    ) -> std::io::Result<Option<(ReplyHeader, Reader)>> {
        loop {
            // read_frame keeps partial input in rbuf, so abandoning it on timeout loses nothing.
            match tokio::time::timeout(DONE_POLL, self.read_header()).await {
                Ok(r) => return r.map(Some),
                Err(_) if done.load(Relaxed) => return Ok(None),
                Err(_) => {}
            }
        }
    }

    /// Sends closeSession without waiting for the reply (the run is over).
    async fn close(mut self, xid: i32) {
        self.queue(xid, &Request::CloseSession);
        let _ = self.flush().await;
    }
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

fn new_hist() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

fn record_us(hist: &mut Histogram<u64>, d: Duration) {
    // Saturates at the upper bound instead of failing: one stalled op must not drop its sample.
    hist.saturating_record((d.as_micros() as u64).max(1));
}

fn open_acl() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

fn create_req(path: String, data: &Bytes, flags: i32) -> Request {
    Request::Create(CreateRequest { path, data: Some(data.clone()), acl: open_acl(), flags })
}

/// Creates the key space the workload reads and writes, in pipelined batches.
async fn setup(o: &Opts, data: &Bytes) -> std::io::Result<()> {
    let mut s = Session::connect(&o.server).await?;
    let mut paths = vec!["/zkrs-bench".to_string(), "/zkrs-bench/keys".into(), "/zkrs-bench/seq".into()];
    paths.extend([WATCH_PATH.to_string(), CHURN_PATH.to_string()]);
    paths.extend((0..o.keys).map(|k| format!("/zkrs-bench/keys/k{k}")));
    for chunk in paths.chunks(500) {
        for (i, p) in chunk.iter().enumerate() {
            s.queue(i as i32 + 1, &create_req(p.clone(), data, 0));
        }
        s.flush().await?;
        for _ in chunk {
            let (h, _) = s.read_reply().await?;
            if h.err != 0 && h.err != ErrorCode::NodeExists.code() {
                return Err(std::io::Error::other(format!("setup create failed: error {}", h.err)));
            }
        }
    }
    Ok(())
}

struct Shared {
    done: AtomicBool,
    completed: AtomicU64,
    errors: AtomicU64,
}

/// One pipelined load connection, for every workload but watch and churn.
///
/// Deletes need nodes to delete: each connection first creates its own, then the timed phase deletes
/// them (and stops early if it runs out).
async fn run_conn(
    o: Arc<Opts>,
    id: usize,
    data: Bytes,
    shared: Arc<Shared>,
) -> std::io::Result<Histogram<u64>> {
    let mut hist = new_hist();
    let mut s = Session::connect(&o.server).await?;
    let mut rng = id as u64 * 0x9E37_79B9_7F4A_7C15 + 1;
    let mut next = |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let prefix = format!("/zkrs-bench/seq/c{id}-");
    let mut delete_pool: VecDeque<String> = VecDeque::new();
    // populate: this connection's share of --count.
    let mut to_create = if o.workload == Workload::Populate {
        o.count / o.conns as u64 + u64::from((id as u64) < o.count % o.conns as u64)
    } else {
        0
    };
    if o.workload == Workload::Delete {
        let n = 20_000usize;
        for chunk_start in (0..n).step_by(500) {
            let count = 500.min(n - chunk_start);
            for i in 0..count {
                s.queue(i as i32 + 1, &create_req(format!("{prefix}{}", chunk_start + i), &data, 0));
            }
            s.flush().await?;
            for _ in 0..count {
                s.read_reply().await?;
            }
        }
        delete_pool.extend((0..n).map(|i| format!("{prefix}{i}")));
    }
    let mut make = |next: &mut dyn FnMut(usize) -> usize| -> Option<Request> {
        Some(match o.workload {
            Workload::Get => Request::GetData(GetDataRequest {
                path: format!("/zkrs-bench/keys/k{}", next(o.keys)),
                watch: false,
            }),
            Workload::Set => Request::SetData(SetDataRequest {
                path: format!("/zkrs-bench/keys/k{}", next(o.keys)),
                data: Some(data.clone()),
                version: -1,
            }),
            Workload::Create => create_req(prefix.clone(), &data, CreateMode::PersistentSequential.code()),
            Workload::Delete => {
                Request::Delete(DeleteRequest { path: delete_pool.pop_front()?, version: -1 })
            }
            Workload::Ping => Request::Ping,
            Workload::Populate => {
                if to_create == 0 {
                    return None;
                }
                to_create -= 1;
                create_req(format!("/zkrs-bench/pop-c{id}-{to_create}"), &data, 0)
            }
            Workload::Mixed => {
                let path = format!("/zkrs-bench/keys/k{}", next(o.keys));
                if (next(100) as u32) < o.read_percent {
                    Request::GetData(GetDataRequest { path, watch: false })
                } else {
                    Request::SetData(SetDataRequest { path, data: Some(data.clone()), version: -1 })
                }
            }
            Workload::Multi => {
                // Consecutive keys from a random start: distinct, since parse_args made K <= --keys.
                let first = next(o.keys);
                Request::Multi(
                    (0..o.multi_ops)
                        .map(|j| {
                            Request::SetData(SetDataRequest {
                                path: format!("/zkrs-bench/keys/k{}", (first + j) % o.keys),
                                data: Some(data.clone()),
                                version: -1,
                            })
                        })
                        .collect(),
                )
            }
            // Driven by run_watcher / run_watch_writer and run_churn, never by a pipelined connection.
            Workload::Watch | Workload::Churn => return None,
        })
    };
    let mut sent_at: VecDeque<Instant> = VecDeque::with_capacity(o.inflight);
    let mut xid: i32 = 1;
    let mut exhausted = false;
    loop {
        while !exhausted && sent_at.len() < o.inflight && !shared.done.load(Relaxed) {
            match make(&mut next) {
                Some(req) => {
                    s.queue(xid, &req);
                    xid = xid.wrapping_add(1).max(1);
                    sent_at.push_back(Instant::now());
                }
                None => exhausted = true,
            }
        }
        if sent_at.is_empty() {
            break;
        }
        s.flush().await?;
        let (h, mut body) = s.read_reply().await?;
        let t0 = sent_at.pop_front().expect("a request in flight");
        record_us(&mut hist, t0.elapsed());
        shared.completed.fetch_add(1, Relaxed);
        // A failed multi still has err 0 in its header; the failure is in its results.
        let failed = h.err != 0
            || (o.workload == Workload::Multi
                && decode_multi_response(&mut body)
                    .map_err(invalid)?
                    .iter()
                    .any(|r| matches!(r, OpResult::Error(_))));
        if failed {
            shared.errors.fetch_add(1, Relaxed);
        }
    }
    s.close(xid).await;
    Ok(hist)
}

/// The watch workload's meeting point between the watchers and the writer.
struct WatchRound {
    /// Watchers whose watch is set for the next setData; the writer waits until all are.
    armed: AtomicUsize,
    /// Poked by each watcher after it arms.
    armed_changed: Notify,
    /// When the current round's setData was sent, in nanoseconds since `base`.
    sent_ns: AtomicU64,
    base: Instant,
}

/// A watch workload watcher: sets a data watch with getData, waits for its notification, records the
/// time since the writer sent the setData, and again until the run ends.
async fn run_watcher(
    o: Arc<Opts>,
    round: Arc<WatchRound>,
    shared: Arc<Shared>,
) -> std::io::Result<Histogram<u64>> {
    let mut hist = new_hist();
    let mut s = Session::connect(&o.server).await?;
    let mut xid: i32 = 1;
    while !shared.done.load(Relaxed) {
        s.queue(xid, &Request::GetData(GetDataRequest { path: WATCH_PATH.into(), watch: true }));
        s.flush().await?;
        // No watch is set, so nothing but the reply can come.
        let (h, _) = s.read_header().await?;
        if h.xid != xid {
            return Err(invalid(format!("watch: reply xid {} to getData xid {xid}", h.xid)));
        }
        xid = xid.wrapping_add(1).max(1);
        if h.err != 0 {
            // No watch was set, so no event will come: count it and sit the run out. The writer waits
            // for every watcher, so the run shows this as errors and (almost) no events.
            shared.errors.fetch_add(1, Relaxed);
            while !shared.done.load(Relaxed) {
                tokio::time::sleep(DONE_POLL).await;
            }
            break;
        }
        round.armed.fetch_add(1, AcqRel);
        round.armed_changed.notify_one();
        let (h, mut body) = match s.read_header_until(&shared.done).await? {
            Some((h, body)) if h.xid == xid::NOTIFICATION => (h, body),
            Some((h, _)) => {
                return Err(invalid(format!("watch: unexpected reply xid {} awaiting an event", h.xid)))
            }
            None => break,
        };
        let since_send = Duration::from_nanos(
            (round.base.elapsed().as_nanos() as u64).saturating_sub(round.sent_ns.load(Acquire)),
        );
        let ev = WatcherEvent::read(&mut body).map_err(invalid)?;
        shared.completed.fetch_add(1, Relaxed);
        if h.err != 0 || ev.event_type != EventType::NodeDataChanged.code() || ev.path != WATCH_PATH {
            shared.errors.fetch_add(1, Relaxed);
        } else {
            record_us(&mut hist, since_send);
        }
    }
    s.close(xid).await;
    Ok(hist)
}

/// The watch workload's writer: once all watchers are armed, notes the time and sends one setData.
async fn run_watch_writer(
    o: Arc<Opts>,
    round: Arc<WatchRound>,
    data: Bytes,
    shared: Arc<Shared>,
) -> std::io::Result<Histogram<u64>> {
    let mut s = Session::connect(&o.server).await?;
    let mut xid: i32 = 1;
    'run: while !shared.done.load(Relaxed) {
        while round.armed.load(Acquire) < o.conns {
            if shared.done.load(Relaxed) {
                break 'run;
            }
            // notify_one leaves a permit when nobody waits, so a poke between the load and here is kept.
            let _ = tokio::time::timeout(DONE_POLL, round.armed_changed.notified()).await;
        }
        // Watchers arm again only after this setData's event, so nobody is counted twice.
        round.armed.fetch_sub(o.conns, AcqRel);
        round.sent_ns.store(round.base.elapsed().as_nanos() as u64, Release);
        let req = SetDataRequest { path: WATCH_PATH.into(), data: Some(data.clone()), version: -1 };
        s.queue(xid, &Request::SetData(req));
        s.flush().await?;
        let (h, _) = s.read_reply().await?;
        if h.err != 0 {
            shared.errors.fetch_add(1, Relaxed);
        }
        xid = xid.wrapping_add(1).max(1);
    }
    s.close(xid).await;
    // Its setData round trips are not what this workload measures.
    Ok(new_hist())
}

/// A churn worker: each cycle is a new TCP connection and session, one ephemeral create, and a
/// closeSession awaited before the socket is dropped.
async fn run_churn(
    o: Arc<Opts>,
    id: usize,
    data: Bytes,
    shared: Arc<Shared>,
) -> std::io::Result<Histogram<u64>> {
    let mut hist = new_hist();
    // Unique across concurrent and earlier runs, whose sessions may not have expired yet.
    let prefix = format!("{CHURN_PATH}/p{}-w{id}-", std::process::id());
    let mut cycle = 0u64;
    while !shared.done.load(Relaxed) {
        let t0 = Instant::now();
        let mut s = Session::connect(&o.server).await?;
        let mut errors = 0;
        // One at a time, as a client would: close only once the create is known to have happened.
        let ephemeral = create_req(format!("{prefix}{cycle}"), &data, CreateMode::Ephemeral.code());
        for (xid, req) in [(1, ephemeral), (2, Request::CloseSession)] {
            s.queue(xid, &req);
            s.flush().await?;
            let (h, _) = s.read_reply().await?;
            errors += u64::from(h.err != 0);
        }
        drop(s);
        record_us(&mut hist, t0.elapsed());
        shared.completed.fetch_add(1, Relaxed);
        shared.errors.fetch_add(errors, Relaxed);
        cycle += 1;
    }
    Ok(hist)
}

#[tokio::main]
async fn main() {
    let o = match parse_args() {
        Ok(o) => Arc::new(o),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let data = Bytes::from(vec![b'x'; o.value_size]);
    if let Err(e) = setup(&o, &data).await {
        eprintln!("zkrs-bench: setup against {} failed: {e}", o.server);
        std::process::exit(1);
    }
    let shared = Arc::new(Shared {
        done: AtomicBool::new(false),
        completed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    });
    let start = Instant::now();
    let tasks: Vec<_> = match o.workload {
        Workload::Watch => {
            let round = Arc::new(WatchRound {
                armed: AtomicUsize::new(0),
                armed_changed: Notify::new(),
                sent_ns: AtomicU64::new(0),
                base: Instant::now(),
            });
            let mut tasks: Vec<_> = (0..o.conns)
                .map(|_| tokio::spawn(run_watcher(o.clone(), round.clone(), shared.clone())))
                .collect();
            tasks.push(tokio::spawn(run_watch_writer(o.clone(), round, data.clone(), shared.clone())));
            tasks
        }
        Workload::Churn => (0..o.conns)
            .map(|i| tokio::spawn(run_churn(o.clone(), i, data.clone(), shared.clone())))
            .collect(),
        _ => {
            (0..o.conns).map(|i| tokio::spawn(run_conn(o.clone(), i, data.clone(), shared.clone()))).collect()
        }
    };
    let unit = o.workload.unit();
    // Progress once a second while the timed phase runs.
    let mut last = 0u64;
    let populating = o.workload == Workload::Populate;
    while populating || start.elapsed() < o.duration {
        if populating && tasks.iter().all(|t| t.is_finished()) {
            break;
        }
        let left =
            if populating { Duration::from_secs(1) } else { o.duration.saturating_sub(start.elapsed()) };
        tokio::time::sleep(Duration::from_secs(1).min(left)).await;
        let now = shared.completed.load(Relaxed);
        eprintln!("[{:>4.1}s] {:>9} {unit}/s, {} done", start.elapsed().as_secs_f64(), now - last, now);
        last = now;
    }
    shared.done.store(true, Relaxed);
    let elapsed = start.elapsed();
    let mut hist = new_hist();
    for t in tasks {
        match t.await {
            Ok(Ok(h)) => hist.add(&h).expect("same bounds"),
            Ok(Err(e)) => {
                eprintln!("zkrs-bench: a connection failed: {e}");
                std::process::exit(1);
            }
            Err(e) => {
                eprintln!("zkrs-bench: a connection panicked: {e}");
                std::process::exit(1);
            }
        }
    }
    let n = shared.completed.load(Relaxed);
    let ops = n as f64 / elapsed.as_secs_f64();
    let (p50, p99, p999, max) = (
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
        hist.max(),
    );
    let errors = shared.errors.load(Relaxed);
    let w = format!("{:?}", o.workload).to_lowercase();
    // Watchers and churn workers each have one thing outstanding at a time, whatever --inflight says.
    let inflight = if matches!(o.workload, Workload::Watch | Workload::Churn) { 1 } else { o.inflight };
    if o.json {
        // "ops" and "ops_per_sec" count the workload's unit (events, cycles, multis) so that one
        // reader handles every workload; "unit" says which.
        let per_multi = if o.workload == Workload::Multi {
            format!(",\"ops_per_multi\":{}", o.multi_ops)
        } else {
            String::new()
        };
        println!(
            "{{\"server\":\"{}\",\"workload\":\"{w}\",\"unit\":\"{unit}\",\"conns\":{},\"inflight\":{inflight}{per_multi},\"value_size\":{},\"ops\":{n},\"errors\":{errors},\"seconds\":{:.3},\"ops_per_sec\":{ops:.0},\"p50_us\":{p50},\"p99_us\":{p99},\"p999_us\":{p999},\"max_us\":{max}}}",
            o.server, o.conns, o.value_size, elapsed.as_secs_f64()
        );
    } else {
        println!(
            "{:<8} {:>6} {:>8} {:>12} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "workload",
            "conns",
            "inflight",
            format!("{unit}/s"),
            "p50 us",
            "p99 us",
            "p999 us",
            "max us",
            "errors"
        );
        println!(
            "{w:<8} {:>6} {inflight:>8} {ops:>12.0} {p50:>9} {p99:>9} {p999:>9} {max:>9} {errors:>7}",
            o.conns
        );
    }
}
