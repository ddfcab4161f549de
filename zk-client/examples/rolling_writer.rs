//! The zk-client writer of `bench/rolling-restart.sh`, doing what its kazoo writer
//! (`bench/rolling_writer.py`) does: pipelines sequential creates of `/roll/c<index>-` (WINDOW in
//! flight, default 32, then waits for them all; at most RATE a second, default 500, 0 for as fast
//! as the server answers) until the stop marker file exists, and writes a JSON report: creates
//! acknowledged, failures by error, session state changes (Disconnected is a disconnection,
//! Expired an expired session, after which it starts a new session as kazoo does), the longest
//! wait for one batch (ms), and how many children of `/roll` carry its prefix at the end.
//!
//! ```text
//! cargo build --release -p zk-client --example rolling_writer
//! WINDOW=32 RATE=500 target/release/examples/rolling_writer \
//!     127.0.0.1:2181,127.0.0.1:2182 0 /tmp/stop /tmp/client0.json
//! ```

// A load generator reads the clock and spawns tasks; the sans-IO rules are for the session core.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::task::JoinSet;
use zk_client::{acl, Client, CreateMode, Error, SessionState};

/// The session timeout asked for (kazoo's `timeout=10` in the Python writer).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one create may take before it is counted as failed ("Timeout").
const CREATE_WAIT: Duration = Duration::from_secs(30);
/// How long the first connection and `/roll` may take.
const START_WAIT: Duration = Duration::from_secs(60);
/// The largest reply taken: the final getChildren of `/roll` lists every writer's creates
/// (about 17 bytes each), past the default 1 MiB after some 60,000 of them.
const MAX_REPLY: u32 = 256 << 20;

/// Seconds since the epoch, to the millisecond, as the Python writer stamps its states.
fn stamp() -> f64 {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (t.as_millis() as f64) / 1000.0
}

type States = Arc<Mutex<Vec<(f64, SessionState)>>>;

/// A new session, its state changes recorded in `states` from the moment it is connected.
async fn connect(hosts: &str, states: &States) -> Result<Client, Error> {
    let deadline = Instant::now() + START_WAIT;
    let client = loop {
        match Client::builder(hosts)
            .session_timeout(SESSION_TIMEOUT)
            .reconnect_delay_max(Duration::from_millis(500))
            .max_frame(MAX_REPLY)
            .connect()
            .await
        {
            Ok(c) => break c,
            Err(Error::ConnectionLoss) if Instant::now() < deadline => continue,
            Err(e) => return Err(e),
        }
    };
    states.lock().unwrap_or_else(|e| e.into_inner()).push((stamp(), client.state()));
    let mut events = client.state_events();
    let sink = states.clone();
    tokio::spawn(async move {
        while let Some(s) = events.next().await {
            sink.lock().unwrap_or_else(|e| e.into_inner()).push((stamp(), s));
        }
    });
    Ok(client)
}

/// Creates `/roll` unless it exists, retrying a lost connection until START_WAIT has passed.
async fn ensure_roll(client: &Client) -> Result<(), Error> {
    let deadline = Instant::now() + START_WAIT;
    loop {
        match client.create("/roll", b"", &acl::open_unsafe(), CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists) => return Ok(()),
            Err(Error::ConnectionLoss) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => return Err(e),
        }
    }
}

fn env_num(name: &str, default: f64) -> Result<f64, String> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().map_err(|_| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

/// A JSON string (the names written here are plain, but quote what needs it anyway).
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [hosts, idx, stop, report] = args.as_slice() else {
        eprintln!("usage: rolling_writer <connect string> <client index> <stop marker> <report path>");
        std::process::exit(2);
    };
    let window = env_num("WINDOW", 32.0)?;
    if !(1.0..=100_000.0).contains(&window) || window.fract() != 0.0 {
        return Err(format!("WINDOW={window} is not a whole number from 1 to 100000").into());
    }
    let window = window as usize;
    let rate = env_num("RATE", 500.0)?;
    if !rate.is_finite() || rate < 0.0 {
        return Err(format!("RATE={rate} is not a number of creates a second (0: unpaced)").into());
    }
    let prefix = format!("c{idx}-");
    let path = format!("/roll/{prefix}");

    let states: States = Arc::default();
    let mut client = connect(hosts, &states).await?;
    ensure_roll(&client).await?;
    let (mut acked, mut worst) = (0u64, Duration::ZERO);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut first_error: Option<(f64, String)> = None;
    let stop = std::path::Path::new(stop);
    while !stop.exists() {
        if client.state() == SessionState::Expired {
            // kazoo starts a new session after LOST; so does this writer.
            client = connect(hosts, &states).await?;
        }
        let t0 = Instant::now();
        let mut batch = JoinSet::new();
        for _ in 0..window {
            let (c, p) = (client.clone(), path.clone());
            batch.spawn(async move {
                let open = acl::open_unsafe();
                let create = c.create(&p, b"x", &open, CreateMode::PersistentSequential);
                match tokio::time::timeout(CREATE_WAIT, create).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(format!("{e:?}")),
                    Err(_) => Err("Timeout".to_owned()),
                }
            });
        }
        while let Some(done) = batch.join_next().await {
            let outcome = done.unwrap_or_else(|e| Err(format!("task failed: {e}")));
            match outcome {
                Ok(()) => acked += 1,
                Err(kind) => {
                    first_error.get_or_insert_with(|| (stamp(), kind.clone()));
                    *errors.entry(kind).or_default() += 1;
                }
            }
        }
        let took = t0.elapsed();
        worst = worst.max(took);
        if rate > 0.0 {
            let per_batch = Duration::from_secs_f64(window as f64 / rate);
            if took < per_batch {
                tokio::time::sleep(per_batch - took).await;
            }
        }
    }

    if client.state() == SessionState::Expired {
        client = connect(hosts, &states).await?;
    }
    let mut mine = 0usize;
    for _ in 0..100 {
        match client.get_children("/roll").await {
            Ok(children) => {
                mine = children.iter().filter(|c| c.starts_with(&prefix)).count();
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let seen: Vec<(f64, SessionState)> = states.lock().unwrap_or_else(|e| e.into_inner()).clone();
    client.close().await?;

    let errors_json: Vec<String> = errors.iter().map(|(k, v)| format!("{}: {v}", json_str(k))).collect();
    let states_json: Vec<String> =
        seen.iter().map(|(t, s)| format!("[{t:.3}, {}]", json_str(&format!("{s:?}")))).collect();
    let first_json = match &first_error {
        Some((t, k)) => format!("[{t:.3}, {}]", json_str(k)),
        None => "null".to_owned(),
    };
    let json = format!(
        "{{\"acked\": {acked}, \"errors\": {{{}}}, \"states\": [{}], \"worst_batch_ms\": {}, \
         \"children\": {mine}, \"first_error\": {first_json}}}",
        errors_json.join(", "),
        states_json.join(", "),
        worst.as_millis(),
    );
    std::fs::write(report, json)?;
    Ok(())
}
