//! The client side of `bench/storm.sh`'s reconnect storm: holds COUNT sessions over raw
//! wire-protocol connections on a few threads, so that the storm measures the servers rather
//! than a client too busy to read its sockets (the Python workers of `bench/storm.py` used six
//! times the servers' CPU on a 2-core VM, their event loops a second late).
//!
//! Session `i` starts on the server `(FIRST + i) % n` of PORTS. Each pings every third of its
//! timeout, takes a connection it heard nothing on for two thirds of it as lost, and on a lost
//! connection comes back as the Java client does: a random pause of up to 1 s, then the next
//! server in turn, with its session id, password and the last zxid it saw.
//!
//! ```text
//! cargo build --release -p zk-client --example storm_client
//! target/release/examples/storm_client 2181,2182,2183 0 2500 30000
//! ```
//!
//! It prints `ready N` once its sessions are open, then reads commands on stdin: `status`
//! answers `down K` (sessions without a connection), `stop` prints one JSON line and exits:
//! `{"log": [[what, lost, back, tries, tried, connected], ...], "lags": [[at, lag], ...]}`, a
//! log entry per lost connection (`what` one of `back`, `expired`, `gave up`; times in seconds
//! since the Unix epoch: when the loss was seen, when the session was back, when its last
//! attempt started and when that attempt's TCP connection was made) and, every 50 ms, how late
//! the runtime ran a timer.

// A load generator reads the clock and spawns tasks; the sans-IO rules are for the session core.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// The largest frame this client reads (replies and notifications here are tiny).
const MAX_FRAME: usize = 1 << 20;
/// The ping's xid and opcode.
const PING_XID: i32 = -2;
const OP_PING: i32 = 11;
/// A lost session stops trying after this long.
const GIVE_UP: Duration = Duration::from_secs(120);

/// Seconds since the Unix epoch, as the Python side's `time.time()`.
fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// One entry of the log: what became of a lost connection.
struct Entry {
    what: &'static str,
    lost: f64,
    back: f64,
    tries: u32,
    tried: f64,
    connected: f64,
}

/// One session: where it connects next, and what it resumes with.
struct Session {
    ports: Arc<Vec<u16>>,
    next: usize,
    sid: i64,
    passwd: [u8; 16],
    timeout_ms: i32,
    last_zxid: i64,
    /// When the last attempt's TCP connection was made.
    connected: f64,
}

/// What a connection attempt came to.
enum Attempt {
    Up(TcpStream),
    Expired,
    Failed,
}

async fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let len = s.read_i32().await?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame length {len}")))?;
    let mut buf = vec![0; len];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}

impl Session {
    /// Connects to the next server in turn and resumes (or starts) the session.
    async fn connect(&mut self) -> Attempt {
        let port = self.ports[self.next % self.ports.len()];
        self.next += 1;
        let attempt = async {
            let mut s = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(("127.0.0.1", port)))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
            self.connected = now();
            s.set_nodelay(true)?;
            let mut hello = Vec::with_capacity(49);
            hello.extend_from_slice(&45i32.to_be_bytes());
            hello.extend_from_slice(&0i32.to_be_bytes());
            hello.extend_from_slice(&self.last_zxid.to_be_bytes());
            hello.extend_from_slice(&self.timeout_ms.to_be_bytes());
            hello.extend_from_slice(&self.sid.to_be_bytes());
            hello.extend_from_slice(&16i32.to_be_bytes());
            hello.extend_from_slice(&self.passwd);
            hello.push(0);
            s.write_all(&hello).await?;
            let r = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut s))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
            Ok::<_, std::io::Error>((s, r))
        };
        let Ok((s, r)) = attempt.await else { return Attempt::Failed };
        if r.len() < 36 {
            return Attempt::Failed;
        }
        let timeout = i32::from_be_bytes(r[4..8].try_into().expect("4 bytes"));
        let sid = i64::from_be_bytes(r[8..16].try_into().expect("8 bytes"));
        if timeout <= 0 {
            return if self.sid != 0 { Attempt::Expired } else { Attempt::Failed };
        }
        self.sid = sid;
        self.passwd.copy_from_slice(&r[20..36]);
        self.timeout_ms = timeout;
        Attempt::Up(s)
    }

    /// Comes back as the Java client does; logs how.
    async fn reconnect(&mut self, log: &Mutex<Vec<Entry>>, down: &AtomicUsize) -> Option<TcpStream> {
        let lost = now();
        let started = Instant::now();
        down.fetch_add(1, Ordering::Relaxed);
        let mut tries = 0;
        let result = loop {
            tokio::time::sleep(Duration::from_secs_f64(rand::random::<f64>())).await;
            let tried = now();
            let attempt = self.connect().await;
            tries += 1;
            let entry = |what| Entry { what, lost, back: now(), tries, tried, connected: self.connected };
            match attempt {
                Attempt::Up(s) => {
                    log.lock().expect("log").push(entry("back"));
                    break Some(s);
                }
                Attempt::Expired => {
                    log.lock().expect("log").push(entry("expired"));
                    break None;
                }
                Attempt::Failed if started.elapsed() > GIVE_UP => {
                    log.lock().expect("log").push(entry("gave up"));
                    break None;
                }
                Attempt::Failed => {}
            }
        };
        down.fetch_sub(1, Ordering::Relaxed);
        result
    }

    /// Keeps the session until `stop`: reads what the server sends, pings every third of the
    /// timeout, and reconnects when the connection is lost.
    async fn keep(mut self, mut s: TcpStream, log: Arc<Mutex<Vec<Entry>>>, down: Arc<AtomicUsize>) {
        loop {
            let third = Duration::from_millis(self.timeout_ms as u64 / 3);
            let mut last_heard = Instant::now();
            let mut next_ping = last_heard + third;
            let lost = loop {
                match tokio::time::timeout_at(next_ping.into(), read_frame(&mut s)).await {
                    Ok(Ok(f)) => {
                        last_heard = Instant::now();
                        if f.len() >= 12 {
                            let zxid = i64::from_be_bytes(f[4..12].try_into().expect("8 bytes"));
                            self.last_zxid = self.last_zxid.max(zxid);
                        }
                    }
                    Ok(Err(_)) => break true,
                    Err(_) if last_heard.elapsed() > third * 2 => break true,
                    Err(_) => {
                        let mut ping = [0u8; 12];
                        ping[..4].copy_from_slice(&8i32.to_be_bytes());
                        ping[4..8].copy_from_slice(&PING_XID.to_be_bytes());
                        ping[8..].copy_from_slice(&OP_PING.to_be_bytes());
                        if s.write_all(&ping).await.is_err() {
                            break true;
                        }
                        next_ping = Instant::now() + third;
                    }
                }
            };
            debug_assert!(lost);
            drop(s);
            match self.reconnect(&log, &down).await {
                Some(again) => s = again,
                None => return,
            }
        }
    }
}

fn usage() -> ! {
    eprintln!("usage: storm_client PORT,PORT,... FIRST COUNT TIMEOUT_MS");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        usage();
    }
    let ports: Vec<u16> = args[0].split(',').map(|p| p.parse().unwrap_or_else(|_| usage())).collect();
    let first: usize = args[1].parse().unwrap_or_else(|_| usage());
    let count: usize = args[2].parse().unwrap_or_else(|_| usage());
    let timeout_ms: i32 = args[3].parse().unwrap_or_else(|_| usage());
    if ports.is_empty() {
        usage();
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(run(Arc::new(ports), first, count, timeout_ms));
}

async fn run(ports: Arc<Vec<u16>>, first: usize, count: usize, timeout_ms: i32) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let down = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..count {
        let mut session = Session {
            ports: ports.clone(),
            next: first + i,
            sid: 0,
            passwd: [0; 16],
            timeout_ms,
            last_zxid: 0,
            connected: 0.0,
        };
        let mut opened = None;
        for _ in 0..ports.len() {
            if let Attempt::Up(s) = session.connect().await {
                opened = Some(s);
                break;
            }
        }
        let Some(s) = opened else {
            eprintln!("storm_client: session {} could not be opened", first + i);
            std::process::exit(1);
        };
        tasks.spawn(session.keep(s, log.clone(), down.clone()));
    }
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let lags = Arc::new(Mutex::new(Vec::new()));
    let lag_log = lags.clone();
    tokio::spawn(async move {
        loop {
            let (at, t) = (now(), Instant::now());
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = stop_rx.changed() => return,
            }
            let late = t.elapsed().as_secs_f64() - 0.05;
            lag_log.lock().expect("lags").push((at, late.max(0.0)));
        }
    });
    // Commands come from a thread of their own (the runtime has no stdin support here).
    let (cmd_tx, mut cmds) = tokio::sync::mpsc::channel::<String>(8);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if cmd_tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    say(&format!("ready {count}"));
    while let Some(cmd) = cmds.recv().await {
        match cmd.trim() {
            "status" => say(&format!("down {}", down.load(Ordering::Relaxed))),
            "stop" => break,
            other => eprintln!("storm_client: unknown command {other:?}"),
        }
    }
    let _ = stop_tx.send(true);
    tasks.abort_all();
    let mut json = String::from("{\"log\": [");
    for (i, e) in log.lock().expect("log").iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            "[\"{}\",{:.6},{:.6},{},{:.6},{:.6}]",
            e.what, e.lost, e.back, e.tries, e.tried, e.connected
        ));
    }
    json.push_str("], \"lags\": [");
    for (i, (at, lag)) in lags.lock().expect("lags").iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!("[{at:.6},{lag:.6}]"));
    }
    json.push_str("]}");
    say(&json);
}
