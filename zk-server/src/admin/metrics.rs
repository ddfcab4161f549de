//! The Prometheus exposition of the server's figures, in the text format (version 0.0.4) that
//! Apache ZooKeeper 3.8's PrometheusMetricsProvider serves, so that its dashboards and alerts
//! find the same series:
//! - `mntr`'s values under Apache's names (the `mntr` key without `zk_`), as gauges, as Apache
//!   exports them;
//! - Apache's counters under their bare names (`commit_count`, not `commit_count_total`) and its
//!   timing summaries as `<name>_count` and `<name>_sum` in milliseconds (`fsynctime`,
//!   `snapshottime`, `election_time`): only those zkrs measures, each counting the same event
//!   Apache counts. Apache's quantile lines are not written: zkrs keeps no sample window;
//! - zkrs's own figures under their own names (`log_disk_full`, `writes_refused_disk_full`, and
//!   the histograms `zkrs_log_persist_seconds` and `zkrs_snapshot_seconds`).
//!
//! OpenMetrics (what the prometheus-client crate writes) cannot carry these: it names a counter's
//! sample `<name>_total` and has no summary, so the series Apache's dashboards query would not
//! exist. The text format is small enough to write here; tests/admin_server.rs checks it with the
//! Prometheus project's own parser.

use crate::fourlw::MntrValue;
use crate::stats::ConnCounters;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use zk_log::SyncTimes;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `mntr` keys that are counters (zkrs's own).
const COUNTERS: &[&str] = &["writes_refused_disk_full"];

/// `mntr` keys not exported: text, and figures zkrs reports only as Apache's "none" value.
const SKIPPED: &[&str] = &["version", "server_state", "last_proposal_size"];

/// A timing as Apache's summaries export it: how many, and their sum in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DurationSum {
    /// Observations.
    pub count: u64,
    /// Their sum, ms.
    pub sum_ms: f64,
}

impl DurationSum {
    /// Adds one observation.
    pub fn record(&mut self, d: Duration) {
        self.count += 1;
        self.sum_ms += d.as_secs_f64() * 1_000.0;
    }
}

/// A histogram over fixed bucket bounds (seconds), for zkrs's own timings.
#[derive(Debug, Clone)]
pub struct Histogram {
    /// Upper bounds, ascending; `+Inf` is implied.
    bounds: Vec<f64>,
    /// Observations per bucket (not cumulative); one more than `bounds`, the last for `+Inf`.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    /// Buckets `start`, `start * factor`, ... (`n` bounds).
    fn exponential(start: f64, factor: f64, n: usize) -> Histogram {
        let bounds: Vec<f64> = std::iter::successors(Some(start), |b| Some(b * factor)).take(n).collect();
        Histogram { counts: vec![0; bounds.len() + 1], bounds, sum: 0.0 }
    }

    /// Adds one observation of `v` seconds.
    fn observe(&mut self, v: f64) {
        let i = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[i] += 1;
        self.sum += v;
    }

    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// An ensemble member's figures under Apache's names (zero, and the gauges absent, standalone).
#[derive(Debug, Clone, Default)]
pub struct QuorumMetrics {
    /// Elections started (`looking_count`: each entry into LOOKING).
    pub looking_count: u64,
    /// From entering LOOKING to the decision, for each election this server then led or followed
    /// in (`election_time`; observers' are not counted, as in Apache).
    pub election_time: DurationSum,
    /// Proposals sent as leader (`proposal_count`).
    pub proposal_count: u64,
    /// Commits sent as leader (`commit_count`).
    pub commit_count: u64,
    /// Learners synchronized by a snapshot (`snap_count`) ...
    pub snap_count: u64,
    /// ... and by DIFF or TRUNC (`diff_count`), as leader.
    pub diff_count: u64,
    /// Voting members, while serving in an ensemble (`quorum_size`).
    pub quorum_size: Option<u64>,
    /// Time since this server started leading, ms, while it leads (`leader_uptime`).
    pub leader_uptime_ms: Option<u64>,
}

/// What the driver keeps for `/metrics` beyond `mntr`'s values, handed to the HTTP task as a copy
/// (the shared parts are read at the copy's rendering).
#[derive(Debug, Clone)]
pub struct Figures {
    /// From a batch of transactions handed to the log to its durability report (queueing, append
    /// and sync), seconds.
    log_persist: Histogram,
    /// From a snapshot's start to its end (written at `snapshot.writeMBPerSecond`), seconds.
    snapshot: Histogram,
    /// The same snapshots as Apache's `snapshottime`.
    snapshot_ms: DurationSum,
    /// The log's syncs (Apache's `fsynctime`), once the server has its log.
    sync: Option<Arc<SyncTimes>>,
    /// Connections refused and dropped (`connection_rejected`, `connection_drop_count`).
    connections: Arc<ConnCounters>,
    /// The ensemble's figures.
    pub quorum: QuorumMetrics,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            // 50 µs to about 3.3 s.
            log_persist: Histogram::exponential(0.000_05, 2.0, 17),
            // 10 ms to about 10 min.
            snapshot: Histogram::exponential(0.01, 2.0, 17),
            snapshot_ms: DurationSum::default(),
            sync: None,
            connections: Arc::default(),
            quorum: QuorumMetrics::default(),
        }
    }
}

impl Figures {
    /// Figures that read the log's sync times and the listener's connection counts.
    pub fn with_sources(sync: Arc<SyncTimes>, connections: Arc<ConnCounters>) -> Figures {
        Figures { sync: Some(sync), connections, ..Figures::default() }
    }

    /// Records one batch made durable after `d`.
    pub fn log_persisted(&mut self, d: Duration) {
        self.log_persist.observe(d.as_secs_f64());
    }

    /// Records one snapshot written in `d`.
    pub fn snapshot_taken(&mut self, d: Duration) {
        self.snapshot.observe(d.as_secs_f64());
        self.snapshot_ms.record(d);
    }
}

/// Writes families in the text format.
struct Exposition {
    out: String,
}

impl Exposition {
    fn head(&mut self, name: &str, help: &str, kind: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: f64) {
        let _ = writeln!(self.out, "{name}{labels} {}", number(value));
    }

    fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.head(name, help, "gauge");
        self.sample(name, "", value);
    }

    fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.head(name, help, "counter");
        self.sample(name, "", value as f64);
    }

    fn summary(&mut self, name: &str, help: &str, s: DurationSum) {
        self.head(name, help, "summary");
        self.sample(&format!("{name}_count"), "", s.count as f64);
        self.sample(&format!("{name}_sum"), "", s.sum_ms);
    }

    fn histogram(&mut self, name: &str, help: &str, h: &Histogram) {
        self.head(name, help, "histogram");
        let mut below = 0;
        for (bound, n) in h.bounds.iter().zip(&h.counts) {
            below += n;
            self.sample(&format!("{name}_bucket"), &format!("{{le=\"{}\"}}", number(*bound)), below as f64);
        }
        self.sample(&format!("{name}_bucket"), "{le=\"+Inf\"}", h.count() as f64);
        self.sample(&format!("{name}_sum"), "", h.sum);
        self.sample(&format!("{name}_count"), "", h.count() as f64);
    }
}

/// A sample value as the text format writes it.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn help(name: &str) -> String {
    match name {
        "log_disk_full" => "zkrs: 1 while the transaction log refuses writes because its disk is full".into(),
        "writes_refused_disk_full" => {
            "zkrs: writes answered with an error because the log's disk was full".into()
        }
        _ => format!("ZooKeeper {name} (as mntr reports it)"),
    }
}

/// The exposition text of `values` (from [`crate::fourlw::monitor_values`]) and `figures`.
pub fn render(values: Vec<(&'static str, MntrValue)>, figures: &Figures) -> String {
    let mut x = Exposition { out: String::new() };
    for (key, value) in values {
        let name = key.strip_prefix("zk_").unwrap_or(key);
        if SKIPPED.contains(&name) {
            continue;
        }
        match value {
            MntrValue::Int(n) if COUNTERS.contains(&name) => x.counter(name, &help(name), n.max(0) as u64),
            MntrValue::Int(n) => x.gauge(name, &help(name), n as f64),
            MntrValue::Float(v) => x.gauge(name, &help(name), v),
            MntrValue::Text(_) => {}
        }
    }
    let q = &figures.quorum;
    if let Some(n) = q.quorum_size {
        x.gauge("quorum_size", "ZooKeeper quorum_size: voting members of the ensemble", n as f64);
    }
    if let Some(ms) = q.leader_uptime_ms {
        x.gauge("leader_uptime", "ZooKeeper leader_uptime: ms since this server started leading", ms as f64);
    }
    let counters = [
        ("looking_count", "elections started (entries into LOOKING)", q.looking_count),
        ("proposal_count", "proposals sent as leader", q.proposal_count),
        ("commit_count", "commits sent as leader", q.commit_count),
        ("snap_count", "learners synchronized with a snapshot", q.snap_count),
        ("diff_count", "learners synchronized with DIFF or TRUNC", q.diff_count),
        (
            "connection_rejected",
            "client connections refused (maxClientCnxns, accept errors)",
            figures.connections.rejected(),
        ),
        (
            "connection_drop_count",
            "client connections the client closed or broke",
            figures.connections.dropped(),
        ),
    ];
    for (name, what, value) in counters {
        x.counter(name, &format!("ZooKeeper {name}: {what}"), value);
    }
    if let Some(sync) = &figures.sync {
        let s = DurationSum { count: sync.count(), sum_ms: sync.total().as_secs_f64() * 1_000.0 };
        x.summary("fsynctime", "ZooKeeper fsynctime: transaction log syncs, ms", s);
    }
    x.summary("snapshottime", "ZooKeeper snapshottime: snapshots written, ms", figures.snapshot_ms);
    x.summary("election_time", "ZooKeeper election_time: LOOKING to a decision, ms", q.election_time);
    x.histogram(
        "zkrs_log_persist_seconds",
        "zkrs: time from a batch of transactions handed to the log to its durability (queue, append, sync)",
        &figures.log_persist,
    );
    x.histogram(
        "zkrs_snapshot_seconds",
        "zkrs: time to write a snapshot, paced by snapshot.writeMBPerSecond",
        &figures.snapshot,
    );
    x.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_counters_summaries_histograms_and_skipped() {
        let sync = Arc::new(SyncTimes::default());
        sync.record(Duration::from_micros(1_500));
        let mut figures = Figures::with_sources(sync, Arc::default());
        figures.log_persisted(Duration::from_micros(120));
        figures.snapshot_taken(Duration::from_millis(30));
        figures.quorum.commit_count = 3;
        let text = render(
            vec![
                ("zk_version", MntrValue::Text("3.8.0".into())),
                ("zk_znode_count", MntrValue::Int(5)),
                ("zk_avg_latency", MntrValue::Float(0.5)),
                ("zk_writes_refused_disk_full", MntrValue::Int(2)),
                ("zk_last_proposal_size", MntrValue::Int(-1)),
            ],
            &figures,
        );
        assert!(text.contains("# TYPE znode_count gauge\nznode_count 5\n"), "{text}");
        assert!(text.contains("# TYPE avg_latency gauge\navg_latency 0.5\n"), "{text}");
        assert!(
            text.contains("# TYPE writes_refused_disk_full counter\nwrites_refused_disk_full 2\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE commit_count counter\ncommit_count 3\n"), "{text}");
        assert!(text.contains("# TYPE fsynctime summary\nfsynctime_count 1\nfsynctime_sum 1.5\n"), "{text}");
        assert!(text.contains("snapshottime_count 1\nsnapshottime_sum 30\n"), "{text}");
        assert!(text.contains("election_time_count 0\n"), "{text}");
        assert!(text.contains("zkrs_log_persist_seconds_bucket{le=\"0.00005\"} 0\n"), "{text}");
        assert!(text.contains("zkrs_log_persist_seconds_bucket{le=\"0.0002\"} 1\n"), "{text}");
        assert!(text.contains("zkrs_log_persist_seconds_bucket{le=\"+Inf\"} 1\n"), "{text}");
        assert!(text.contains("zkrs_snapshot_seconds_count 1\n"), "{text}");
        assert!(!text.contains("quorum_size") && !text.contains("leader_uptime"), "standalone: {text}");
        assert!(!text.contains("version") && !text.contains("last_proposal_size"), "{text}");
    }
}
