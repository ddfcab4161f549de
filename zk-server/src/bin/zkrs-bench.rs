//! zkrs-bench: a pipelined, multi-connection ZooKeeper load generator speaking the wire protocol
//! directly, so that the client is never the bottleneck. Works against zkrs-server and Apache
//! ZooKeeper alike.
//!
//! Each connection keeps `--inflight` requests outstanding; latency is measured per request from send
//! to reply. Prints progress every second on stderr, then a result table (or JSON with `--json`).

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zk_proto::frame::write_frame;
use zk_proto::jute::{self, Jute, Reader};
use zk_proto::*;

const USAGE: &str = "usage: zkrs-bench [--server HOST:PORT] [--workload get|set|create|delete|mixed|populate|ping] \
[--conns N] [--inflight N] [--duration SECS] [--value-size BYTES] [--keys N] [--read-percent P] [--count N (populate)] [--json]";

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
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
        i += 1;
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

    /// Reads frames until a reply (skipping notifications); returns its header.
    async fn read_reply(&mut self) -> std::io::Result<ReplyHeader> {
        loop {
            let f = self.read_frame().await?;
            let h = ReplyHeader::read(&mut Reader::new(f))
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
            if h.xid != xid::NOTIFICATION {
                return Ok(h);
            }
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
    paths.extend((0..o.keys).map(|k| format!("/zkrs-bench/keys/k{k}")));
    for chunk in paths.chunks(500) {
        for (i, p) in chunk.iter().enumerate() {
            s.queue(i as i32 + 1, &create_req(p.clone(), data, 0));
        }
        s.flush().await?;
        for _ in chunk {
            let h = s.read_reply().await?;
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

/// Deletes need nodes to delete: each connection first creates its own, then the timed phase deletes
/// them (and stops early if it runs out).
async fn run_conn(
    o: Arc<Opts>,
    id: usize,
    data: Bytes,
    shared: Arc<Shared>,
) -> std::io::Result<Histogram<u64>> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
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
        let h = s.read_reply().await?;
        let t0 = sent_at.pop_front().expect("a request in flight");
        let us = t0.elapsed().as_micros() as u64;
        let _ = hist.record(us.max(1));
        shared.completed.fetch_add(1, Relaxed);
        if h.err != 0 {
            shared.errors.fetch_add(1, Relaxed);
        }
    }
    let close = Request::CloseSession;
    s.queue(xid, &close);
    let _ = s.flush().await;
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
    let tasks: Vec<_> =
        (0..o.conns).map(|i| tokio::spawn(run_conn(o.clone(), i, data.clone(), shared.clone()))).collect();
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
        eprintln!("[{:>4.1}s] {:>9} ops/s, {} done", start.elapsed().as_secs_f64(), now - last, now);
        last = now;
    }
    shared.done.store(true, Relaxed);
    let elapsed = start.elapsed();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
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
    if o.json {
        println!(
            "{{\"server\":\"{}\",\"workload\":\"{w}\",\"conns\":{},\"inflight\":{},\"value_size\":{},\"ops\":{n},\"errors\":{errors},\"seconds\":{:.3},\"ops_per_sec\":{ops:.0},\"p50_us\":{p50},\"p99_us\":{p99},\"p999_us\":{p999},\"max_us\":{max}}}",
            o.server, o.conns, o.inflight, o.value_size, elapsed.as_secs_f64()
        );
    } else {
        println!(
            "{:<8} {:>6} {:>8} {:>12} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "workload", "conns", "inflight", "ops/s", "p50 us", "p99 us", "p999 us", "max us", "errors"
        );
        println!(
            "{w:<8} {:>6} {:>8} {ops:>12.0} {p50:>9} {p99:>9} {p999:>9} {max:>9} {errors:>7}",
            o.conns, o.inflight
        );
    }
}
