//! zkrs-bench: a pipelined, multi-connection ZooKeeper load generator speaking the wire protocol
//! directly, so that the client is never the bottleneck. Works against zkrs-server and Apache
//! ZooKeeper alike.
//!
//! Each connection keeps `--inflight` requests outstanding; latency is measured per request from send
//! to reply. Three workloads measure something other than one request: `watch` (from a setData being
//! sent to each watcher's notification), `churn` (a whole session's life) and `multi` (one multi of
//! several setData). Prints progress every second on stderr, then a result table (or JSON with
//! `--json`). Replies carrying an error code are counted in `errors`, never dropped.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::io::Write;
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
[--rate OPS] [--timeline FILE]

workloads (W), each connection keeping --inflight requests outstanding unless said otherwise:
  get       getData on random keys of --keys (default)
  set       setData on random keys
  create    persistent-sequential creates
  delete    deletes of znodes each connection creates first (20000 per connection)
  mixed     get or set on random keys, --read-percent reads
  populate  creates --count znodes, then stops
  populate-seq
            creates --count persistent-sequential znodes under /zkrs-bench/seq, then stops
  ping      pings: the loopback round trip plus framing
  watch     --conns watcher sessions each hold a one-shot data watch (getData, watch=true) on one
            znode; one more session does setData on it once all are armed; latency is from the
            setData being sent to each watcher's notification; counted in events/s; watchers
            re-arm after every event (--inflight is not used)
  churn     --conns workers each loop: connect and handshake, create an ephemeral znode,
            closeSession, close the socket; one cycle is one op, counted in cycles/s
            (--inflight is not used)
  multi     pipelined multi requests (opcode 14), each K setData (--multi-ops, default 4) on K
            distinct keys; counted in multis/s; a multi whose result holds an error is one error

--rate OPS   open loop, for get, set, mixed, create, ping and multi: OPS requests a second in all,
             spread evenly over the connections and sent on schedule whether or not replies came
             back (at most --inflight outstanding per connection; past that, sending waits). Latency
             counts from when each request was due, so a stall shows in full however few requests
             were sent during it. Without --rate, each connection keeps --inflight outstanding.
--timeline FILE
             one CSV line per second: unix time in ms at the second's end, ops, p50, p99 and max
             latency in us of the ops completed in it (to line up with a server's log)";

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
    /// Creates `--count` persistent-sequential znodes under one parent and stops: for the cost
    /// of a parent with many children.
    PopulateSeq,
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

    /// Whether the workload creates `--count` znodes and stops, whatever `--duration` says.
    fn populates(self) -> bool {
        matches!(self, Workload::Populate | Workload::PopulateSeq)
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
    /// Open loop: requests per second over all connections.
    rate: Option<u64>,
    timeline: Option<String>,
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
        rate: None,
        timeline: None,
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
                    "populate-seq" => Workload::PopulateSeq,
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
            "--value-size" => o.value_size = num(val()?)?.min(16 << 20) as usize,
            "--keys" => o.keys = num(val()?)?.max(1) as usize,
            "--read-percent" => o.read_percent = num(val()?)?.min(100) as u32,
            "--json" => o.json = true,
            "--count" => o.count = num(val()?)?,
            "--multi-ops" => o.multi_ops = num(val()?)?.clamp(1, 1000) as usize,
            "--rate" => o.rate = Some(num(val()?)?.clamp(1, 10_000_000)),
            "--timeline" => o.timeline = Some(val()?),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
        i += 1;
    }
    if o.workload == Workload::Multi && o.multi_ops > o.keys {
        return Err(format!("--multi-ops {} needs at least as many --keys (has {})", o.multi_ops, o.keys));
    }
    if o.rate.is_some()
        && !matches!(
            o.workload,
            Workload::Get
                | Workload::Set
                | Workload::Mixed
                | Workload::Create
                | Workload::Ping
                | Workload::Multi
        )
    {
        return Err(format!(
            "--rate works with get, set, mixed, create, ping and multi, not {:?}",
            o.workload
        ));
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

    /// The length of the frame at the front of the read buffer, once all of it is there.
    fn whole_frame(&self) -> Option<usize> {
        let len = u32::from_be_bytes(self.rbuf.get(..4)?.try_into().ok()?) as usize;
        (self.rbuf.len() - 4 >= len).then_some(len)
    }

    async fn read_frame(&mut self) -> std::io::Result<Bytes> {
        loop {
            if let Some(len) = self.whole_frame() {
                let _ = self.rbuf.split_to(4);
                return Ok(self.rbuf.split_to(len).freeze());
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

/// Records one latency in a task's own histogram and in the shared one-second window.
fn record_us(hist: &mut Histogram<u64>, window: &Window, d: Duration) {
    let us = (d.as_micros() as u64).max(1);
    // Saturates at the upper bound instead of failing: one stalled op must not drop its sample.
    hist.saturating_record(us);
    window.record(us);
}

/// Latencies of the current second, shared by every task without a lock: counts in log-linear
/// buckets (exact below 32 us, then 16 buckets per power of two, so within 1/16 of the value),
/// taken and cleared once a second by the progress loop.
struct Window {
    buckets: Box<[AtomicU64]>,
}

/// Enough buckets for any u64 value.
const WINDOW_BUCKETS: usize = 32 + 60 * 16;

impl Window {
    fn new() -> Window {
        Window { buckets: (0..WINDOW_BUCKETS).map(|_| AtomicU64::new(0)).collect() }
    }

    fn bucket(us: u64) -> usize {
        if us < 32 {
            return us as usize;
        }
        let e = 63 - us.leading_zeros() as usize; // >= 5
        32 + (e - 5) * 16 + ((us >> (e - 4)) & 15) as usize
    }

    /// The largest value bucket `i` holds.
    fn upper(i: usize) -> u64 {
        if i < 32 {
            return i as u64;
        }
        let (e, sub) = ((i - 32) / 16 + 5, ((i - 32) % 16) as u64);
        ((16 + sub + 1) << (e - 4)) - 1
    }

    fn record(&self, us: u64) {
        // The histograms' upper bound, which also keeps every bucket's bound within u64.
        self.buckets[Self::bucket(us.min(60_000_000))].fetch_add(1, Relaxed);
    }

    /// Takes the counts so far, leaving the window empty: (count, p50, p99, max), in us.
    fn take(&self) -> (u64, u64, u64, u64) {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.swap(0, Relaxed)).collect();
        let n: u64 = counts.iter().sum();
        let at = |q: f64| {
            let want = ((n as f64 * q).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= want {
                    return Self::upper(i);
                }
            }
            0
        };
        let max = counts.iter().rposition(|&c| c > 0).map_or(0, Self::upper);
        if n == 0 {
            (0, 0, 0, 0)
        } else {
            (n, at(0.5), at(0.99), max)
        }
    }
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
    window: Window,
}

/// The requests one load connection sends, for every workload but watch and churn.
struct Maker {
    o: Arc<Opts>,
    data: Bytes,
    rng: u64,
    /// Prefix of this connection's sequential and delete-workload znodes.
    prefix: String,
    id: usize,
    /// Znodes left for the delete workload.
    delete_pool: VecDeque<String>,
    /// populate: creates left in this connection's share of --count.
    to_create: u64,
}

impl Maker {
    fn new(o: Arc<Opts>, id: usize, data: Bytes) -> Maker {
        let to_create = if o.workload.populates() {
            o.count / o.conns as u64 + u64::from((id as u64) < o.count % o.conns as u64)
        } else {
            0
        };
        Maker {
            o,
            data,
            rng: (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            prefix: format!("/zkrs-bench/seq/c{id}-"),
            id,
            delete_pool: VecDeque::new(),
            to_create,
        }
    }

    /// A pseudo-random number below `n` (xorshift: cheap, and the same sequence every run).
    fn below(&mut self, n: usize) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % n as u64) as usize
    }

    fn key(&mut self) -> String {
        format!("/zkrs-bench/keys/k{}", self.below(self.o.keys))
    }

    fn set(&self, path: String) -> Request {
        Request::SetData(SetDataRequest { path, data: Some(self.data.clone()), version: -1 })
    }

    /// The next request, or None when the workload has nothing more to send.
    fn next(&mut self) -> Option<Request> {
        let (keys, read_percent, multi_ops) = (self.o.keys, self.o.read_percent, self.o.multi_ops);
        Some(match self.o.workload {
            Workload::Get => Request::GetData(GetDataRequest { path: self.key(), watch: false }),
            Workload::Set => {
                let path = self.key();
                self.set(path)
            }
            Workload::Create => {
                create_req(self.prefix.clone(), &self.data, CreateMode::PersistentSequential.code())
            }
            Workload::Delete => {
                Request::Delete(DeleteRequest { path: self.delete_pool.pop_front()?, version: -1 })
            }
            Workload::Ping => Request::Ping,
            Workload::Populate => {
                if self.to_create == 0 {
                    return None;
                }
                self.to_create -= 1;
                create_req(format!("/zkrs-bench/pop-c{}-{}", self.id, self.to_create), &self.data, 0)
            }
            Workload::PopulateSeq => {
                if self.to_create == 0 {
                    return None;
                }
                self.to_create -= 1;
                create_req(self.prefix.clone(), &self.data, CreateMode::PersistentSequential.code())
            }
            Workload::Mixed => {
                let path = self.key();
                if (self.below(100) as u32) < read_percent {
                    Request::GetData(GetDataRequest { path, watch: false })
                } else {
                    self.set(path)
                }
            }
            Workload::Multi => {
                // Consecutive keys from a random start: distinct, since parse_args made K <= --keys.
                let first = self.below(keys);
                Request::Multi(
                    (0..multi_ops)
                        .map(|j| self.set(format!("/zkrs-bench/keys/k{}", (first + j) % keys)))
                        .collect(),
                )
            }
            // Driven by run_watcher / run_watch_writer and run_churn, never by a load connection.
            Workload::Watch | Workload::Churn => return None,
        })
    }
}

/// Whether a reply counts as an error: a failed multi still has err 0 in its header; the failure
/// is in its results.
fn reply_failed(o: &Opts, h: &ReplyHeader, body: &mut Reader) -> std::io::Result<bool> {
    Ok(h.err != 0
        || (o.workload == Workload::Multi
            && decode_multi_response(body).map_err(invalid)?.iter().any(|r| matches!(r, OpResult::Error(_)))))
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
    let mut maker = Maker::new(o.clone(), id, data.clone());
    if o.workload == Workload::Delete {
        let n = 20_000usize;
        for chunk_start in (0..n).step_by(500) {
            let count = 500.min(n - chunk_start);
            for i in 0..count {
                s.queue(i as i32 + 1, &create_req(format!("{}{}", maker.prefix, chunk_start + i), &data, 0));
            }
            s.flush().await?;
            for _ in 0..count {
                s.read_reply().await?;
            }
        }
        maker.delete_pool.extend((0..n).map(|i| format!("{}{i}", maker.prefix)));
    }
    let mut sent_at: VecDeque<Instant> = VecDeque::with_capacity(o.inflight);
    let mut xid: i32 = 1;
    let mut exhausted = false;
    loop {
        while !exhausted && sent_at.len() < o.inflight && !shared.done.load(Relaxed) {
            match maker.next() {
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
        // One reply (waiting for it), then every reply already received, before the requests
        // that replace them go out in one write: a write per reply cost this load more CPU than
        // a fast server spends on the request, on a machine the two share.
        loop {
            let (h, mut body) = s.read_reply().await?;
            let t0 = sent_at.pop_front().expect("a request in flight");
            record_us(&mut hist, &shared.window, t0.elapsed());
            shared.completed.fetch_add(1, Relaxed);
            if reply_failed(&o, &h, &mut body)? {
                shared.errors.fetch_add(1, Relaxed);
            }
            if sent_at.is_empty() || s.whole_frame().is_none() {
                break;
            }
        }
    }
    s.close(xid).await;
    Ok(hist)
}

/// One open-loop connection (`--rate`): connects, then hands the socket to two threads, since
/// tokio's timer wakes no finer than a millisecond. A sender sends each request when it is due; this
/// side reads the replies. Between them a queue of the due times of the requests in flight, bounded
/// by --inflight: when it is full, sending waits, and the wait counts in the latency of every
/// request held back.
async fn run_paced_conn(
    o: Arc<Opts>,
    id: usize,
    data: Bytes,
    shared: Arc<Shared>,
) -> std::io::Result<Histogram<u64>> {
    let s = Session::connect(&o.server).await?;
    let stream = s.stream.into_std()?;
    stream.set_nonblocking(false)?;
    tokio::task::spawn_blocking(move || paced(o, id, data, shared, stream))
        .await
        .map_err(|e| std::io::Error::other(format!("paced connection: {e}")))?
}

/// Largest reply frame the paced reader accepts (replies here are small).
const MAX_REPLY: usize = 16 << 20;

fn paced(
    o: Arc<Opts>,
    id: usize,
    data: Bytes,
    shared: Arc<Shared>,
    stream: std::net::TcpStream,
) -> std::io::Result<Histogram<u64>> {
    use std::io::Read;
    use std::sync::mpsc::{sync_channel, TrySendError};
    let rate = o.rate.unwrap_or(1).max(1);
    // Nanoseconds between one connection's requests.
    let interval_ns = (o.conns as u64).saturating_mul(1_000_000_000) / rate;
    let (due_tx, due_rx) = sync_channel::<Instant>(o.inflight);
    let mut w = stream.try_clone()?;
    let sender_shared = shared.clone();
    let sender_o = o.clone();
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let shared = sender_shared;
        let mut maker = Maker::new(sender_o, id, data);
        let mut wbuf = BytesMut::with_capacity(1 << 16);
        let begin = Instant::now();
        let due = |k: u64| begin + Duration::from_nanos(interval_ns.saturating_mul(k));
        let mut k = 0u64;
        let mut xid: i32 = 1;
        'run: while !shared.done.load(Relaxed) {
            let now = Instant::now();
            while due(k) <= now && wbuf.len() < 1 << 16 {
                let Some(req) = maker.next() else { break 'run };
                match due_tx.try_send(due(k)) {
                    Ok(()) => {}
                    Err(TrySendError::Full(d)) => {
                        // --inflight reached: send what is queued, then wait for a reply.
                        w.write_all(&wbuf)?;
                        wbuf.clear();
                        if due_tx.send(d).is_err() {
                            break 'run;
                        }
                    }
                    Err(TrySendError::Disconnected(_)) => break 'run,
                }
                write_frame(&mut wbuf, |b| {
                    RequestHeader { xid, op: req.op().code() }.write(b);
                    req.encode(b);
                });
                xid = xid.wrapping_add(1).max(1);
                k += 1;
            }
            w.write_all(&wbuf)?;
            wbuf.clear();
            let wait = due(k).saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait.min(DONE_POLL));
            }
        }
        // Not awaited: the run is over. The reader stops once the queue is drained.
        drop(due_tx);
        write_frame(&mut wbuf, |b| RequestHeader { xid, op: Request::CloseSession.op().code() }.write(b));
        let _ = w.write_all(&wbuf);
        Ok(())
    });
    let mut hist = new_hist();
    let mut r = std::io::BufReader::with_capacity(1 << 16, stream);
    let mut read = || -> std::io::Result<()> {
        while let Ok(due) = due_rx.recv() {
            let (h, mut body) = loop {
                let mut len = [0u8; 4];
                r.read_exact(&mut len)?;
                let len = u32::from_be_bytes(len) as usize;
                if len > MAX_REPLY {
                    return Err(invalid(format!("reply frame of {len} bytes")));
                }
                let mut frame = vec![0u8; len];
                r.read_exact(&mut frame)?;
                let mut body = Reader::new(Bytes::from(frame));
                let h = ReplyHeader::read(&mut body).map_err(invalid)?;
                if h.xid != xid::NOTIFICATION {
                    break (h, body);
                }
            };
            record_us(&mut hist, &shared.window, due.elapsed());
            shared.completed.fetch_add(1, Relaxed);
            if reply_failed(&o, &h, &mut body)? {
                shared.errors.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    };
    let result = read();
    // On a read error, dropping the queue's end stops the sender.
    drop(due_rx);
    let sent = sender.join().map_err(|_| std::io::Error::other("paced sender panicked"))?;
    result?;
    sent?;
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
            record_us(&mut hist, &shared.window, since_send);
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
        record_us(&mut hist, &shared.window, t0.elapsed());
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
        window: Window::new(),
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
        _ if o.rate.is_some() => (0..o.conns)
            .map(|i| tokio::spawn(run_paced_conn(o.clone(), i, data.clone(), shared.clone())))
            .collect(),
        _ => {
            (0..o.conns).map(|i| tokio::spawn(run_conn(o.clone(), i, data.clone(), shared.clone()))).collect()
        }
    };
    let unit = o.workload.unit();
    // Progress once a second while the timed phase runs.
    let mut timeline = match o.timeline.as_deref().map(std::fs::File::create).transpose() {
        Ok(f) => f.map(std::io::BufWriter::new),
        Err(e) => {
            eprintln!("zkrs-bench: --timeline: {e}");
            std::process::exit(2);
        }
    };
    if let Some(t) = timeline.as_mut() {
        let _ = writeln!(t, "unix_ms,ops,p50_us,p99_us,max_us");
    }
    let mut last = 0u64;
    let populating = o.workload.populates();
    while populating || start.elapsed() < o.duration {
        if populating && tasks.iter().all(|t| t.is_finished()) {
            break;
        }
        let left =
            if populating { Duration::from_secs(1) } else { o.duration.saturating_sub(start.elapsed()) };
        tokio::time::sleep(Duration::from_secs(1).min(left)).await;
        let now = shared.completed.load(Relaxed);
        let (_, p50, p99, max) = shared.window.take();
        eprintln!(
            "[{:>4.1}s] {:>9} {unit}/s, p99 {p99} us, {} done",
            start.elapsed().as_secs_f64(),
            now - last,
            now
        );
        if let Some(t) = timeline.as_mut() {
            let unix_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            if let Err(e) = writeln!(t, "{unix_ms},{},{p50},{p99},{max}", now - last) {
                eprintln!("zkrs-bench: writing the timeline: {e}");
                std::process::exit(1);
            }
        }
        last = now;
    }
    shared.done.store(true, Relaxed);
    let elapsed = start.elapsed();
    if let Some(mut t) = timeline.take() {
        if let Err(e) = t.flush() {
            eprintln!("zkrs-bench: writing the timeline: {e}");
            std::process::exit(1);
        }
    }
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
        let mut per_multi = if o.workload == Workload::Multi {
            format!(",\"ops_per_multi\":{}", o.multi_ops)
        } else {
            String::new()
        };
        if let Some(r) = o.rate {
            per_multi.push_str(&format!(",\"rate\":{r}"));
        }
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
