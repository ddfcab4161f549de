//! The Prometheus exposition of the server's figures: `mntr`'s values under Apache's metric names
//! (the `mntr` key without `zk_`), as gauges where Apache's PrometheusMetricsProvider exports
//! gauges, and zkrs's own figures under their own names.

use crate::fourlw::MntrValue;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// zkrs's own timings, kept by the driver across scrapes (each histogram is shared: a clone
/// observes into the same buckets).
#[derive(Debug, Clone)]
pub struct Timings {
    /// From a batch of transactions handed to the log to its durability report (queueing, append
    /// and sync), seconds.
    pub log_persist: Histogram,
    /// From a snapshot's start to its end (written at `snapshot.writeMBPerSecond`), seconds.
    pub snapshot: Histogram,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            // 50 µs to about 3.3 s.
            log_persist: Histogram::new(exponential_buckets(0.000_05, 2.0, 17)),
            // 10 ms to about 10 min.
            snapshot: Histogram::new(exponential_buckets(0.01, 2.0, 17)),
        }
    }
}

impl Timings {
    /// Records one batch made durable after `d`.
    pub fn log_persisted(&self, d: Duration) {
        self.log_persist.observe(d.as_secs_f64());
    }

    /// Records one snapshot written in `d`.
    pub fn snapshot_taken(&self, d: Duration) {
        self.snapshot.observe(d.as_secs_f64());
    }
}

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `mntr` keys that are counters (zkrs's own): exported with the `_total` suffix counters carry.
const COUNTERS: &[&str] = &["writes_refused_disk_full"];

/// `mntr` keys not exported: text, and figures zkrs reports only as Apache's "none" value.
const SKIPPED: &[&str] = &["version", "server_state", "last_proposal_size"];

fn help(name: &str) -> String {
    match name {
        "log_disk_full" => "zkrs: 1 while the transaction log refuses writes because its disk is full".into(),
        "writes_refused_disk_full" => {
            "zkrs: writes answered with an error because the log's disk was full".into()
        }
        _ => format!("ZooKeeper {name} (as mntr reports it)"),
    }
}

/// The exposition text of `values` (from [`crate::fourlw::monitor_values`]) and `timings`.
pub fn render(values: Vec<(&'static str, MntrValue)>, timings: &Timings) -> String {
    let mut registry = Registry::default();
    registry.register(
        "zkrs_log_persist_seconds",
        "zkrs: time from a batch of transactions handed to the log to its durability (queue, append, sync)",
        timings.log_persist.clone(),
    );
    registry.register(
        "zkrs_snapshot_seconds",
        "zkrs: time to write a snapshot, paced by snapshot.writeMBPerSecond",
        timings.snapshot.clone(),
    );
    for (key, value) in values {
        let name = key.strip_prefix("zk_").unwrap_or(key);
        if SKIPPED.contains(&name) {
            continue;
        }
        match value {
            MntrValue::Int(n) if COUNTERS.contains(&name) => {
                let c: Counter = Counter::default();
                c.inc_by(n.max(0) as u64);
                registry.register(name, help(name), c);
            }
            MntrValue::Int(n) => {
                let g: Gauge = Gauge::default();
                g.set(n);
                registry.register(name, help(name), g);
            }
            MntrValue::Float(x) => {
                let g: Gauge<f64, AtomicU64> = Gauge::default();
                g.set(x);
                registry.register(name, help(name), g);
            }
            MntrValue::Text(_) => {}
        }
    }
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_counters_and_skipped() {
        let timings = Timings::default();
        timings.log_persisted(Duration::from_micros(120));
        let text = render(
            vec![
                ("zk_version", MntrValue::Text("3.8.0".into())),
                ("zk_znode_count", MntrValue::Int(5)),
                ("zk_avg_latency", MntrValue::Float(0.5)),
                ("zk_writes_refused_disk_full", MntrValue::Int(2)),
                ("zk_last_proposal_size", MntrValue::Int(-1)),
            ],
            &timings,
        );
        assert!(text.contains("# TYPE zkrs_log_persist_seconds histogram\n"), "{text}");
        assert!(text.contains("zkrs_log_persist_seconds_count 1\n"), "{text}");
        assert!(text.contains("zkrs_snapshot_seconds_count 0\n"), "{text}");
        assert!(text.contains("# TYPE znode_count gauge\nznode_count 5\n"), "{text}");
        assert!(text.contains("# TYPE avg_latency gauge\navg_latency 0.5\n"), "{text}");
        assert!(
            text.contains("# TYPE writes_refused_disk_full counter\nwrites_refused_disk_full_total 2\n"),
            "{text}"
        );
        assert!(!text.contains("version") && !text.contains("last_proposal_size"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
