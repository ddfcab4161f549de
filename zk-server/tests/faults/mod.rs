//! A real-process fault harness in the manner of Jepsen: a 3- or 5-server ensemble (zkrs, or
//! Apache ZooKeeper for comparison), each server in its own network namespace; clients recording
//! every operation; a seeded schedule of partitions, slow links, kill -9, SIGSTOP, a full log
//! disk and wall-clock jumps; then healing, and checks over the histories and the trees; a report
//! and a timeline per run.

pub mod check;
pub mod cluster;
pub mod net;
pub mod report;
pub mod workload;

use crate::support::ensemble::Kind;
use check::Verdict;
use cluster::{Cluster, FAKETIME_LIB};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::{Rng, Shared, SESSION_TIMEOUT};
use zk_client::Client;

/// One fault as applied.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    /// From (µs since the run began).
    pub from: u64,
    /// To (µs).
    pub to: u64,
    /// What it was ("partition: {1} | {2,3}", ...).
    pub what: String,
}

/// Which servers a run has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// zkrs only.
    Zkrs,
    /// Apache ZooKeeper 3.8 only.
    Apache,
    /// Both: odd-numbered servers Apache, even-numbered zkrs (so either may lead).
    Mixed,
}

impl Target {
    /// Its name in reports and FAULT_TARGET.
    pub fn name(self) -> &'static str {
        match self {
            Target::Zkrs => "zkrs",
            Target::Apache => "apache",
            Target::Mixed => "mixed",
        }
    }

    fn kinds(self, n: usize) -> Vec<Kind> {
        (0..n)
            .map(|i| match self {
                Target::Zkrs => Kind::Zkrs,
                Target::Apache => Kind::Apache,
                Target::Mixed if i % 2 == 0 => Kind::Apache,
                Target::Mixed => Kind::Zkrs,
            })
            .collect()
    }
}

/// A run's settings.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Which servers.
    pub target: Target,
    /// How many (3 or 5).
    pub servers: usize,
    /// Seconds of traffic under faults.
    pub seconds: u64,
    /// The seed of the fault schedule and the clients' choices.
    pub seed: u64,
    /// Where the run's directory (report, timeline, logs) goes.
    pub out: PathBuf,
}

/// What a run found.
pub struct RunOutcome {
    /// Every check's verdict.
    pub verdicts: Vec<Verdict>,
    /// The report's directory.
    pub dir: PathBuf,
    /// Client operations recorded.
    pub ops: usize,
    /// Faults applied.
    pub faults: usize,
}

const REGISTER_WORKERS: usize = 5;
const LOCK_WORKERS: usize = 2;

/// Runs one seeded schedule. Errors: the harness itself could not do its work (no root, a
/// command failed); what the servers did wrong is in the verdicts.
pub fn run(cfg: &RunConfig) -> Result<RunOutcome, String> {
    let target = cfg.target.name();
    let dir = cfg.out.join(format!("{target}-n{}-seed{}", cfg.servers, cfg.seed));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // FAULT_FAKETIME=0 leaves libfaketime out even where it is installed (Apache's servers never
    // run under it: see Cluster::create).
    let faketime =
        std::path::Path::new(FAKETIME_LIB).exists() && std::env::var("FAULT_FAKETIME").as_deref() != Ok("0");
    let mut cluster = Cluster::create(&cfg.target.kinds(cfg.servers), faketime)?;
    let faketime = !cluster.clock_servers().is_empty();
    let n = cluster.len();
    for i in 0..n {
        cluster.launch(i)?;
    }
    let result = drive(cfg, &mut cluster, faketime);
    cluster.save_logs(&dir);
    let (shared, faults, verdicts) = result?;
    if verdicts.iter().any(|v| !v.passed) {
        cluster.save_data(&dir);
    }
    let history = shared.history.lock().unwrap();
    let info = report::RunInfo {
        seed: cfg.seed,
        target,
        servers: n,
        seconds: cfg.seconds,
        shaper: match cluster.net.shaper {
            net::Shaper::Netem => "netem (delay, loss)",
            net::Shaper::TokenBucket => {
                "a token bucket (no netem in this kernel: low rate, drops on overflow)"
            }
        },
        clock_jumps: faketime,
        members: (0..n)
            .map(|i| format!("{} {}", i + 1, if cluster.kind(i) == Kind::Apache { "apache" } else { "zkrs" }))
            .collect::<Vec<_>>()
            .join(", "),
    };
    report::write(&dir, &info, &faults, &history, &verdicts).map_err(|e| e.to_string())?;
    Ok(RunOutcome { verdicts, dir, ops: history.ops.len(), faults: faults.len() })
}

type Driven = (Arc<Shared>, Vec<FaultRecord>, Vec<Verdict>);

fn drive(cfg: &RunConfig, cluster: &mut Cluster, faketime: bool) -> Result<Driven, String> {
    let n = cluster.len();
    let boot = if cluster.has_apache() { 120 } else { 60 };
    cluster.wait_all_serving(Duration::from_secs(boot))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let all: Vec<usize> = (0..n).collect();
    rt.block_on(workload::prepare(&cluster.connect_string(&all)))?;
    let shared = Shared::new((0..n).map(|i| cluster.client_addr(i).to_string()).collect());
    let mut rng = Rng::new(cfg.seed);
    let mut register = Vec::new();
    for lane in 0..REGISTER_WORKERS {
        let order = shuffled(&mut rng, n);
        let cs = cluster.connect_string(&order);
        register.push(rt.spawn(workload::register_worker(shared.clone(), lane, cs, rng.next())));
    }
    let mut others = Vec::new();
    for k in 0..LOCK_WORKERS {
        let cs = cluster.connect_string(&shuffled(&mut rng, n));
        others.push(rt.spawn(workload::lock_worker(shared.clone(), REGISTER_WORKERS + k, cs, rng.next())));
    }
    let addrs: Vec<_> = (0..n).map(|i| cluster.client_addr(i)).collect();
    others.push(rt.spawn(workload::abandoner(
        shared.clone(),
        REGISTER_WORKERS + LOCK_WORKERS,
        addrs,
        rng.next(),
    )));

    // The faults.
    let mut faults = Vec::new();
    let until = Instant::now() + Duration::from_secs(cfg.seconds);
    let nemesis = nemesis(cluster, &mut rng, &shared, until, faketime, &mut faults);
    let healed = heal_all(cluster);
    let healed_at = Instant::now();
    nemesis?;
    healed?;
    let mut verdicts = Vec::new();
    let serving = cluster.wait_all_serving(Duration::from_secs(90));
    verdicts.push(Verdict {
        name: "every server serves again after healing",
        passed: serving.is_ok(),
        summary: format!(
            "within 90 s of healing: {}",
            serving.as_ref().map_or_else(|e| e.clone(), |l| format!("leader {}", l + 1))
        ),
        anomalies: serving.err().into_iter().collect(),
        spans: Vec::new(),
    });
    // Traffic goes on for a moment on the healed ensemble, then stops.
    std::thread::sleep(Duration::from_secs(2));
    shared.stop.store(true, Ordering::Relaxed);
    let live: Vec<Client> = rt.block_on(async {
        let mut live = Vec::new();
        for h in register {
            if let Ok(Ok(Some(c))) = tokio::time::timeout(Duration::from_secs(30), h).await {
                live.push(c);
            }
        }
        for h in others {
            let _ = tokio::time::timeout(Duration::from_secs(30), h).await;
        }
        live
    });

    // Final reads of every key: an acknowledged write lost anywhere shows here.
    let cs = cluster.connect_string(&all);
    rt.block_on(final_reads(&shared, &cs))?;

    // Sessions abandoned or ended must have expired by now (the leader restarts every session's
    // clock when it takes over, so the wait counts from the healing too).
    let last_abandon = shared.t0 + Duration::from_micros(shared.history.lock().unwrap().last_abandon);
    let expire_by = last_abandon.max(healed_at) + SESSION_TIMEOUT * 2 + Duration::from_secs(2);
    if let Some(wait) = expire_by.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    converge(cluster, Duration::from_secs(30));
    // Each server read through a session of its own; a failed attempt is tried again (twice),
    // and every failure is reported.
    let mut read_failures = Vec::new();
    let dumps: Vec<(usize, BTreeMap<String, String>)> = rt.block_on(async {
        let mut out = Vec::new();
        for i in 0..n {
            for attempt in 1..=3 {
                match dump(&cluster.connect_string(&[i])).await {
                    Ok(d) => {
                        out.push((i, d));
                        break;
                    }
                    Err(e) => read_failures.push(format!("server {}, attempt {attempt}: {e}", i + 1)),
                }
            }
        }
        out
    });
    let dumped = dumps.len();
    let children = |prefix: &str| -> Vec<String> {
        dumps.first().map_or_else(Vec::new, |(_, d)| {
            d.keys()
                .filter_map(|p| p.strip_prefix(prefix))
                .filter(|rest| !rest.contains('/'))
                .map(str::to_string)
                .collect()
        })
    };
    let (seq, eph) = (children("/seq/"), children("/eph/"));
    {
        let history = shared.history.lock().unwrap();
        verdicts.push(check::linearizable(&history));
        verdicts.push(check::session_order(&history));
        verdicts.push(check::sequential(&history, &seq));
        verdicts.push(check::mutual_exclusion(&history.holds));
        verdicts.push(check::ephemerals(&history, &eph));
    }
    let mut equal = check::trees_equal(&dumps);
    if dumped < n {
        equal.passed = false;
        equal
            .anomalies
            .push(format!("only {dumped} of {n} servers could be read: {}", read_failures.join("; ")));
    } else if !read_failures.is_empty() {
        equal.summary.push_str(&format!(" (reads tried again: {})", read_failures.join("; ")));
    }
    verdicts.push(equal);
    rt.block_on(async {
        for c in live {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
        }
    });
    Ok((shared, faults, verdicts))
}

fn shuffled(rng: &mut Rng, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
    v
}

/// Faults of the network: one of these at a time.
const NET_FAULTS: [&str; 4] = ["partition", "isolate-leader", "bridge", "slow"];
/// Faults of one server's process, disk or clock.
const SERVER_FAULTS: [&str; 6] =
    ["kill", "kill-leader", "freeze", "freeze-leader", "disk-full", "clock-jump"];

/// A fault in force, and what undoes it.
struct Applied {
    kind: &'static str,
    pick: usize,
    what: String,
}

/// The faults until `until`: one at a time, or (one pass in four) a network fault and a server
/// fault together.
fn nemesis(
    cluster: &mut Cluster,
    rng: &mut Rng,
    shared: &Shared,
    until: Instant,
    faketime: bool,
    faults: &mut Vec<FaultRecord>,
) -> Result<(), String> {
    let server_faults: Vec<&'static str> =
        SERVER_FAULTS.iter().copied().filter(|k| faketime || *k != "clock-jump").collect();
    // Bounded: one pass at a time, each at least a second.
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(800 + rng.below(1200)));
        if Instant::now() >= until {
            break;
        }
        let net = NET_FAULTS[rng.below(NET_FAULTS.len() as u64) as usize];
        let server = server_faults[rng.below(server_faults.len() as u64) as usize];
        let kinds: Vec<&'static str> = match rng.below(8) {
            0 | 1 => vec![net, server],
            2..=4 => vec![net],
            _ => vec![server],
        };
        let from = shared.now();
        let mut applied = Vec::new();
        for kind in kinds {
            applied.push(apply(cluster, rng, kind)?);
        }
        std::thread::sleep(Duration::from_millis(1500 + rng.below(3000)));
        for a in applied.iter().rev() {
            undo(cluster, a)?;
        }
        let what = applied.iter().map(|a| a.what.as_str()).collect::<Vec<_>>().join(" + ");
        faults.push(FaultRecord { from, to: shared.now(), what });
    }
    Ok(())
}

fn apply(cluster: &mut Cluster, rng: &mut Rng, kind: &'static str) -> Result<Applied, String> {
    let n = cluster.len();
    let leader = if kind.ends_with("leader") || kind == "disk-full" { cluster.leader() } else { None };
    let pick = leader.unwrap_or_else(|| rng.below(n as u64) as usize);
    let what = match kind {
        "partition" => {
            let order = shuffled(rng, n);
            let minority = 1 + rng.below(((n - 1) / 2) as u64) as usize;
            let (a, b) = order.split_at(minority);
            cluster.net.split(&[a.to_vec(), b.to_vec()])?;
            format!("partition: {} | {}", names(a), names(b))
        }
        "isolate-leader" => {
            let rest: Vec<usize> = (0..n).filter(|&i| i != pick).collect();
            cluster.net.split(&[vec![pick], rest.clone()])?;
            format!("isolate-leader: {} | {}", names(&[pick]), names(&rest))
        }
        "bridge" => {
            let o = shuffled(rng, n);
            let half = n / 2;
            let (a, b) = (o[..=half].to_vec(), o[half..].to_vec());
            cluster.net.split(&[a.clone(), b.clone()])?;
            format!("bridge: {} | {} (server {} in both)", names(&a), names(&b), o[half] + 1)
        }
        "slow" => {
            let count = 1 + rng.below(n as u64) as usize;
            let chosen = &shuffled(rng, n)[..count];
            for &i in chosen {
                cluster.net.slow(i)?;
            }
            format!("slow: links of {}", names(chosen))
        }
        "kill" | "kill-leader" => {
            cluster.kill(pick);
            format!("{kind}: kill -9 of server {}", pick + 1)
        }
        "freeze" | "freeze-leader" => {
            if !cluster.running(pick) {
                return Ok(Applied {
                    kind: "none",
                    pick,
                    what: format!("{kind}: server {} is down", pick + 1),
                });
            }
            cluster.freeze(pick)?;
            format!("{kind}: SIGSTOP of server {}", pick + 1)
        }
        "disk-full" => {
            let bytes = cluster.fill_disk(pick)?;
            format!("disk-full: log disk of server {} filled ({} KiB of ballast)", pick + 1, bytes / 1024)
        }
        _ => {
            let clocks = cluster.clock_servers();
            if clocks.is_empty() {
                return Ok(Applied {
                    kind: "none",
                    pick,
                    what: "clock-jump: no server under libfaketime".into(),
                });
            }
            let pick = clocks[rng.below(clocks.len() as u64) as usize];
            let secs = (60 + rng.below(3600)) as i64 * if rng.below(2) == 0 { 1 } else { -1 };
            cluster.jump_clock(pick, secs)?;
            format!("clock-jump: server {}'s wall clock moved {secs:+} s", pick + 1)
        }
    };
    Ok(Applied { kind, pick, what })
}

fn undo(cluster: &mut Cluster, a: &Applied) -> Result<(), String> {
    match a.kind {
        "kill" | "kill-leader" => cluster.launch(a.pick),
        "freeze" | "freeze-leader" => cluster.thaw(a.pick),
        "disk-full" => {
            cluster.free_disk(a.pick);
            Ok(())
        }
        "slow" => cluster.net.unslow(),
        "clock-jump" => {
            cluster.reset_clocks();
            Ok(())
        }
        "none" => Ok(()),
        _ => cluster.net.heal(),
    }
}

fn names(ids: &[usize]) -> String {
    let v: Vec<String> = ids.iter().map(|i| (i + 1).to_string()).collect();
    format!("{{{}}}", v.join(","))
}

/// Every fault undone, every server running.
fn heal_all(cluster: &mut Cluster) -> Result<(), String> {
    cluster.net.heal()?;
    cluster.net.unslow()?;
    cluster.reset_clocks();
    for i in 0..cluster.len() {
        cluster.thaw(i)?;
        cluster.free_disk(i);
        cluster.launch(i)?;
    }
    Ok(())
}

/// Waits (bounded) until every server reports the same last zxid.
fn converge(cluster: &Cluster, within: Duration) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let zxids: Vec<Option<String>> = (0..cluster.len()).map(|i| cluster.zxid(i)).collect();
        if zxids[0].is_some() && zxids.iter().all(|z| *z == zxids[0]) {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

async fn final_reads(shared: &Shared, connect_to: &str) -> Result<(), String> {
    let c = Client::builder(connect_to)
        .session_timeout(SESSION_TIMEOUT)
        .connect()
        .await
        .map_err(|e| format!("final reads: connect: {e}"))?;
    let keys: Vec<String> = shared.history.lock().unwrap().keys.keys().cloned().collect();
    for key in keys {
        let call = shared.now();
        c.sync(&key).await.map_err(|e| format!("final sync {key}: {e}"))?;
        let ret = match c.get_data(&key).await {
            Ok((data, stat)) => {
                let v = u64::from_be_bytes(
                    data.as_ref().try_into().map_err(|_| format!("{key}: {} bytes", data.len()))?,
                );
                crate::linear::Ret::Value(v, stat.version)
            }
            Err(zk_client::Error::NoNode) => crate::linear::Ret::NoNode,
            Err(e) => return Err(format!("final read {key}: {e}")),
        };
        let done = shared.now();
        let ev = crate::linear::Event { op: crate::linear::Op::Get, call, done: Some((done, ret)) };
        shared.history.lock().unwrap().keys.get_mut(&key).expect("key").push(ev);
    }
    let _ = c.close().await;
    Ok(())
}

/// Every znode a server has (but /zookeeper), path -> data and stat, read after a sync through
/// a session on that server alone. The error names the step that failed.
async fn dump(connect_to: &str) -> Result<BTreeMap<String, String>, String> {
    let step = |what: &'static str| move |e: zk_client::Error| format!("{what}: {e}");
    let c = tokio::time::timeout(
        SESSION_TIMEOUT * 2,
        Client::builder(connect_to).session_timeout(SESSION_TIMEOUT).connect(),
    )
    .await
    .map_err(|_| "connect: timed out".to_string())?
    .map_err(step("connect"))?;
    let res = async {
        tokio::time::timeout(workload::OP_TIMEOUT, c.sync("/"))
            .await
            .map_err(|_| "sync: timed out".to_string())?
            .map_err(step("sync"))?;
        let mut out = BTreeMap::new();
        let mut todo = vec!["/".to_string()];
        // Bounded by the tree: every path is visited once.
        while let Some(p) = todo.pop() {
            let (data, stat) = c.get_data(&p).await.map_err(step("getData"))?;
            out.insert(p.clone(), format!("{data:?} {stat:?}"));
            for kid in c.get_children(&p).await.map_err(step("getChildren"))? {
                let child = if p == "/" { format!("/{kid}") } else { format!("{p}/{kid}") };
                if child != "/zookeeper" {
                    todo.push(child);
                }
            }
        }
        Ok(out)
    }
    .await;
    let _ = c.close().await;
    res
}
