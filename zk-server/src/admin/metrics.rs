//! The Prometheus exposition of the server's figures, in the text format (version 0.0.4) that
//! Apache ZooKeeper 3.8's PrometheusMetricsProvider serves, so that its dashboards and alerts
//! find the same series:
//! - `mntr`'s gauges under Apache's names (the `mntr` key without `zk_`), as Apache exports them;
//! - Apache's counters under their bare names (`commit_count`, not `commit_count_total`);
//! - Apache's timing summaries (`fsynctime`, `snapshottime`, `election_time`, `readlatency`,
//!   `updatelatency`) in milliseconds: `{quantile="0.5"}` (and 0.9, 0.99 for the ones Apache
//!   registers at its advanced level) over the last 10 minutes, `<name>_count` and `<name>_sum`
//!   ([`crate::summary`]); `mntr`'s avg/min/max/cnt/sum lines of these are not exported twice;
//! - zkrs's own figures under their own names (`log_disk_full`, `writes_refused_disk_full`, the
//!   memory brake's `memory_brake`, `tree_memory_bytes`, `tree_memory_soft_limit_bytes` and
//!   `writes_refused_memory_brake`, the server's own archiver's `backup_*` when it archives by
//!   itself, and
//!   the histograms `zkrs_log_persist_seconds` and `zkrs_snapshot_seconds`).
//!
//! Only what zkrs measures is exported, each counting the same event Apache counts; docs/metrics.md
//! lists Apache's series zkrs does not produce, and why.
//!
//! OpenMetrics (what the prometheus-client crate writes) cannot carry these: it names a counter's
//! sample `<name>_total` and has no summary, so the series Apache's dashboards query would not
//! exist. The text format is small enough to write here; tests/admin_server.rs checks it with the
//! Prometheus project's own parser.

use crate::summary::Timing;
use crate::view::MntrValue;
use std::fmt::Write as _;
use std::time::Duration;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `mntr` keys not exported: text, and figures zkrs reports only as Apache's "none" value.
const SKIPPED: &[&str] = &["version", "server_state", "last_proposal_size"];

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

/// What `/metrics` exports beyond `mntr`'s values, handed to the HTTP task as a copy.
#[derive(Debug, Clone)]
pub struct Figures {
    /// From a batch of transactions handed to the log to its durability report (queueing, append
    /// and sync), seconds.
    log_persist: Histogram,
    /// From a snapshot's start to its end (written at `snapshot.writeMBPerSecond`), seconds.
    snapshot: Histogram,
    /// The ensemble's gauges.
    pub quorum: QuorumMetrics,
    /// Apache's timing summaries, read when the copy was made (those `mntr` prints too).
    pub timings: Vec<Timing>,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            // 50 µs to about 3.3 s.
            log_persist: Histogram::exponential(0.000_05, 2.0, 17),
            // 10 ms to about 10 min.
            snapshot: Histogram::exponential(0.01, 2.0, 17),
            quorum: QuorumMetrics::default(),
            timings: Vec::new(),
        }
    }
}

impl Figures {
    /// Records one batch made durable after `d`.
    pub fn log_persisted(&mut self, d: Duration) {
        self.log_persist.observe(d.as_secs_f64());
    }

    /// Records one snapshot written in `d`.
    pub fn snapshot_taken(&mut self, d: Duration) {
        self.snapshot.observe(d.as_secs_f64());
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

    fn summary(&mut self, name: &str, help: &str, t: &Timing) {
        self.head(name, help, "summary");
        for q in t.detail.prometheus_quantiles() {
            let v = t.reading.quantile(*q).unwrap_or(f64::NAN);
            self.sample(name, &format!("{{quantile=\"{q}\"}}"), v);
        }
        self.sample(&format!("{name}_count"), "", t.reading.count as f64);
        self.sample(&format!("{name}_sum"), "", t.reading.sum_ms);
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
        "memory_brake" => {
            "zkrs: 1 while the tree is over zkrs.treeMemorySoftLimitBytes and writes that grow it \
             are refused"
                .into()
        }
        "tree_memory_bytes" => {
            "zkrs: the tree's memory as the memory brake counts it (paths, data, a per-node \
             overhead, writes in flight)"
                .into()
        }
        "tree_memory_soft_limit_bytes" => "zkrs: zkrs.treeMemorySoftLimitBytes (0 = no limit)".into(),
        "writes_refused_memory_brake" => {
            "zkrs: writes answered SYSTEMERROR because the tree was over zkrs.treeMemorySoftLimitBytes".into()
        }
        "backup_lag_txns" => {
            "zkrs: transactions applied that the server's archive (zkrs.backup.to) lacks (-1: not known yet)"
                .into()
        }
        "backup_archived_zxid" => "zkrs: the newest zxid the server's archive holds (-1: none)".into(),
        "backup_last_success_ms" => {
            "zkrs: when the server's archiver last passed without error, ms since the epoch (0: not yet)"
                .into()
        }
        "backup_errors" => "zkrs: archiver passes into zkrs.backup.to that failed".into(),
        "backup_archived_bytes" => "zkrs: bytes the server archived into zkrs.backup.to".into(),
        "backup_archived_files" => "zkrs: files the server archived into zkrs.backup.to".into(),
        "backup_held_bytes" => {
            "zkrs: bytes of snapshots and log segments the last purge kept because the archive lacks them"
                .into()
        }
        "backup_purges_forced" => {
            "zkrs: purges that removed files the archive lacked, past zkrs.backup.holdMaxBytes or short of disk space"
                .into()
        }
        "backup_closed" => "zkrs: 1 when the archive takes nothing more and a new one must be started".into(),
        _ => format!("ZooKeeper {name} (as mntr reports it)"),
    }
}

/// What each summary measures, for its HELP line.
fn timing_help(name: &str) -> &'static str {
    match name {
        "fsynctime" => "transaction log syncs",
        "snapshottime" => "snapshots written",
        "election_time" => "LOOKING to a decision",
        "readlatency" => "reads, receipt to reply",
        "updatelatency" => "writes, receipt to reply",
        "dbinittime" => "loading the database at start-up",
        "startup_snap_load_time" => "reading the snapshot at start-up",
        "startup_txns_load_time" => "replaying the log at start-up",
        "startup_txns_loaded" => "transactions replayed at start-up (a count, not ms)",
        _ => "timings",
    }
}

/// The exposition text of `values` (from [`crate::view::monitor_values`]) and `figures`.
pub fn render(values: Vec<(String, MntrValue)>, figures: &Figures) -> String {
    let mut x = Exposition { out: String::new() };
    // mntr's lines of a summary (`zk_avg_fsynctime`, ...) are the summary, exported as one.
    let of_timing = |name: &str| {
        figures.timings.iter().any(|t| {
            name.strip_suffix(t.name).and_then(|p| p.strip_suffix('_')).is_some_and(|stat| {
                ["avg", "min", "max", "cnt", "sum", "p50", "p95", "p99", "p999"].contains(&stat)
            })
        })
    };
    for (key, value) in values {
        let name = key.strip_prefix("zk_").unwrap_or(&key);
        if SKIPPED.contains(&name) || of_timing(name) {
            continue;
        }
        match value {
            MntrValue::Counter(n) => x.counter(name, &help(name), n),
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
    for t in &figures.timings {
        let unit = if t.name == "startup_txns_loaded" { "" } else { ", ms" };
        let help = format!("ZooKeeper {}: {}{unit}", t.name, timing_help(t.name));
        x.summary(t.name, &help, t);
    }
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
    use crate::summary::{Detail, Summary};

    #[test]
    fn gauges_counters_summaries_histograms_and_skipped() {
        let mut figures = Figures::default();
        figures.log_persisted(Duration::from_micros(120));
        figures.snapshot_taken(Duration::from_millis(30));
        let mut fsync = Summary::default();
        fsync.observe(1_500, 0);
        let mut reads = Summary::default();
        for ms in 1..=100 {
            reads.observe(ms * 1_000, 0);
        }
        figures.timings = vec![
            Timing::read("fsynctime", Detail::Basic, &fsync, 0),
            Timing::read("election_time", Detail::Basic, &Summary::default(), 0),
            Timing::read("readlatency", Detail::Advanced, &reads, 0),
        ];
        let values = [
            ("zk_version", MntrValue::Text("3.8.0".into())),
            ("zk_znode_count", MntrValue::Int(5)),
            ("zk_avg_latency", MntrValue::Float(0.5)),
            ("zk_writes_refused_disk_full", MntrValue::Counter(2)),
            ("zk_commit_count", MntrValue::Counter(3)),
            ("zk_last_proposal_size", MntrValue::Int(-1)),
            ("zk_avg_fsynctime", MntrValue::Float(1.5)),
            ("zk_p99_readlatency", MntrValue::Int(99)),
        ];
        let text = render(values.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &figures);
        assert!(text.contains("# TYPE znode_count gauge\nznode_count 5\n"), "{text}");
        assert!(text.contains("# TYPE avg_latency gauge\navg_latency 0.5\n"), "{text}");
        assert!(
            text.contains("# TYPE writes_refused_disk_full counter\nwrites_refused_disk_full 2\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE commit_count counter\ncommit_count 3\n"), "{text}");
        // A sample's value, which must be within 1% of `want`.
        let near = |sample: &str, want: f64| {
            let line =
                text.lines().find(|l| l.starts_with(sample)).unwrap_or_else(|| panic!("{sample}: {text}"));
            let v: f64 = line[sample.len()..].trim().parse().unwrap();
            assert!((v - want).abs() <= want * 0.01, "{line} for {want}");
        };
        assert!(text.contains("# TYPE fsynctime summary\nfsynctime{quantile=\"0.5\"} "), "{text}");
        near("fsynctime{quantile=\"0.5\"}", 1.5);
        assert!(text.contains("\nfsynctime_count 1\nfsynctime_sum 1.5\n"), "{text}");
        assert!(text.contains("election_time{quantile=\"0.5\"} NaN\nelection_time_count 0\n"), "{text}");
        near("readlatency{quantile=\"0.5\"}", 50.0);
        near("readlatency{quantile=\"0.9\"}", 90.0);
        near("readlatency{quantile=\"0.99\"}", 99.0);
        assert!(text.contains("\nreadlatency_count 100\nreadlatency_sum 5050\n"), "{text}");
        assert!(!text.contains("avg_fsynctime") && !text.contains("p99_readlatency"), "{text}");
        assert!(text.contains("zkrs_log_persist_seconds_bucket{le=\"0.00005\"} 0\n"), "{text}");
        assert!(text.contains("zkrs_log_persist_seconds_bucket{le=\"0.0002\"} 1\n"), "{text}");
        assert!(text.contains("zkrs_log_persist_seconds_bucket{le=\"+Inf\"} 1\n"), "{text}");
        assert!(text.contains("zkrs_snapshot_seconds_count 1\n"), "{text}");
        assert!(!text.contains("quorum_size") && !text.contains("leader_uptime"), "standalone: {text}");
        assert!(!text.contains("version") && !text.contains("last_proposal_size"), "{text}");
    }
}
