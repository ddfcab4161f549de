//! The server as its reports see it: a read-only [`View`] of what the core and the driver hold,
//! and the figures taken from it or from the process ([`monitor_values`], [`environment`],
//! [`data_sizes`]).
//!
//! Two renderers read this model and know nothing of each other: the four-letter words
//! (`fourlw`, Apache's text answers) and the operations surface (`admin`, the AdminServer's JSON
//! and the Prometheus text). It names neither.

use crate::settings::Settings;
use crate::stats::{ConnStats, ServerStats};
use crate::summary::Timing;
use std::net::SocketAddr;
use std::sync::Arc;
use zk_quorum::config::QuorumConfig;
use zk_tree::Database;

/// The version string the server reports.
pub fn version() -> String {
    format!("3.8.0-zkrs-{}, built on zkrs", env!("CARGO_PKG_VERSION"))
}

/// One connection as the reports see it.
pub struct ConnView {
    /// Connection id (its watcher id).
    pub id: u64,
    /// Peer address.
    pub remote: SocketAddr,
    /// Its counters.
    pub stats: Arc<ConnStats>,
}

/// A read-only view of the server for rendering.
pub struct View<'a> {
    /// Settings.
    pub settings: &'a Settings,
    /// Where the plain client listener listens: zoo.cfg's address, or the one a reconfiguration
    /// gave this server since (`conf` and the AdminServer report it, as Apache reports its
    /// listener's port).
    pub client_addr: Option<SocketAddr>,
    /// Server counters.
    pub stats: &'a ServerStats,
    /// The database.
    pub db: &'a Database,
    /// Live connections.
    pub conns: Vec<ConnView>,
    /// Requests in flight.
    pub outstanding: usize,
    /// Last applied zxid.
    pub last_zxid: i64,
    /// Time since start.
    pub uptime_ms: i64,
    /// The connection asking a four-letter word: Apache counts it among the connections and
    /// lists it. `None` for the AdminServer, whose HTTP requests are no client connections.
    pub asker: Option<SocketAddr>,
    /// A leader's learners and the syncs it owes them (`mntr`'s leader-only lines).
    pub quorum: Option<QuorumFigures>,
    /// The server's mode as `srvr` and `mntr` print it (`standalone`, `leader`, `follower`,
    /// `observer`), or None while it is not serving (electing or syncing).
    pub mode: Option<&'static str>,
    /// The ensemble as this member sees it (the AdminServer's `leader`, `voting_view`,
    /// `zabstate`); `None` standalone.
    pub ensemble: Option<EnsembleView>,
    /// The wall clock, ms since the Unix epoch.
    pub wall_ms: i64,
    /// Apache's counters that zkrs counts, under Apache's names without `zk_` (`mntr` prints
    /// them, `/metrics` exports them as counters).
    pub counters: Vec<(&'static str, u64)>,
    /// Apache's timing summaries that zkrs measures (`mntr` prints their avg/min/max/cnt/sum and
    /// the advanced ones' percentiles; `/metrics` exports them as summaries).
    pub timings: Vec<Timing>,
    /// The log's and the snapshots' positions (`lgif`), when the driver read them for this view.
    pub log_info: Option<LogInfo>,
    /// What became of an operator's request for a snapshot (`csnp`), when this view answers one.
    pub snapshot_answer: Option<SnapshotAnswer>,
    /// What an operator's request the node acted on did, when this view answers one: handing
    /// the leadership over (`ydld`), taking it (`rqld`), forced recovery (`rcvr`).
    pub node_answer: Option<String>,
    /// How the server's own archiver fares (`zkrs.backup.to`), when it archives by itself.
    pub backup: Option<crate::backup::continuous::BackupFigures>,
}

/// Where this server's log and snapshots stand, as ClickHouse Keeper's `lgif` reports its Raft
/// log: zxids where Keeper gives log indexes, and epochs where it gives terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogInfo {
    /// The oldest transaction the log on disk holds (0: none).
    pub first_log_zxid: i64,
    /// The newest durable transaction in the log (0: none).
    pub last_log_zxid: i64,
    /// The last transaction applied to the tree.
    pub applied_zxid: i64,
    /// The last transaction this server knows committed (a leader's or a standalone server's
    /// own count; a serving learner's last applied); 0 while down or read-only, when the tree
    /// reloaded from the whole log may hold proposals never committed.
    pub committed_zxid: i64,
    /// The start zxid of the newest snapshot on disk (0: none): loading it and replaying the log
    /// after it rebuilds the tree.
    pub last_snapshot_zxid: i64,
}

impl LogInfo {
    /// The `key\tvalue` pairs in ClickHouse Keeper's order and names (its `lgif`): indexes are
    /// zxids, terms the zxids' epochs.
    pub fn pairs(&self) -> [(&'static str, i64); 8] {
        let epoch = |zxid: i64| zxid >> 32;
        [
            ("first_log_idx", self.first_log_zxid),
            ("first_log_term", epoch(self.first_log_zxid)),
            ("last_log_idx", self.last_log_zxid),
            ("last_log_term", epoch(self.last_log_zxid)),
            ("last_committed_log_idx", self.applied_zxid),
            ("leader_committed_log_idx", self.committed_zxid),
            ("target_committed_log_idx", self.committed_zxid),
            ("last_snapshot_idx", self.last_snapshot_zxid),
        ]
    }
}

/// What became of an operator's restore (the AdminServer's `restore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreAnswer {
    /// Waiting for the proposals made before it to be durable; clients are turned away.
    Pending,
    /// The tree of the snapshot at `snapshot_zxid` is in place as of `zxid`.
    Restored {
        /// The zxid the snapshot said it was at.
        snapshot_zxid: i64,
        /// The zxid the server carries on from (one past every zxid it used before).
        zxid: i64,
    },
    /// Not restored: why.
    Refused(&'static str),
}

/// What became of an operator's request for a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotAnswer {
    /// A snapshot started now, at this zxid.
    Started(i64),
    /// A snapshot at this zxid was already under way; no second one was started.
    UnderWay(i64),
    /// None could be started: why.
    Refused(&'static str),
    /// The last snapshot started less than `snapshot.minRequestIntervalSeconds` ago: none was
    /// started.
    TooSoon,
}

impl SnapshotAnswer {
    /// Why [`SnapshotAnswer::TooSoon`] started none.
    pub const TOO_SOON: &'static str =
        "a snapshot was started less than snapshot.minRequestIntervalSeconds ago";
}

/// The newest snapshot in the server's snapshot directory: its start zxid and its file's
/// modification time (s since the Unix epoch, -1 if unknown); `None` when there is none.
pub fn newest_snapshot(settings: &Settings) -> Option<(i64, i64)> {
    let dir = settings.snap_root.join(zk_log::snapshot::SNAP_DIR_NAME);
    let entries = std::fs::read_dir(&dir).ok()?;
    let (zxid, path) = entries
        .flatten()
        .filter_map(|e| {
            let zxid = zk_log::snapshot::parse_snapshot_name(&e.file_name().to_string_lossy())?;
            Some((zxid, e.path()))
        })
        .max_by_key(|(zxid, _)| *zxid)?;
    let secs = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(-1, |d| d.as_secs() as i64);
    Some((zxid, secs))
}

impl View<'_> {
    /// The address this server gives as its client address (`voting_view`, `zabstate`): the
    /// plain listener's, else the TLS port's.
    pub fn advertised_client_addr(&self) -> SocketAddr {
        self.client_addr
            .or(self.settings.secure_client_addr)
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Connections, the asking one included.
    pub fn connection_count(&self) -> usize {
        self.conns.len() + usize::from(self.asker.is_some())
    }
}

/// What a leader reports of its learners.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuorumFigures {
    /// Learner connections.
    pub learners: usize,
    /// Followers synced and taking proposals.
    pub synced_followers: usize,
    /// Observers synced.
    pub synced_observers: usize,
    /// Learners' syncs waiting for earlier proposals to commit.
    pub pending_syncs: usize,
}

/// An ensemble member's view of the ensemble, for `leader`, `voting_view` and `zabstate`.
#[derive(Debug, Clone)]
pub struct EnsembleView {
    /// myid.
    pub my_sid: i64,
    /// Whether this server leads an established quorum.
    pub leading: bool,
    /// The leader this server serves under (itself when leading), once known.
    pub leader_sid: Option<i64>,
    /// Whether this server is an observer.
    pub observer: bool,
    /// Apache's ZabState, lower case: `election`, `discovery`, `synchronization`, `broadcast`.
    pub zab_state: &'static str,
    /// The servers.
    pub config: QuorumConfig,
}

/// Formats a float the way Java's `Double.toString` does for these small values.
pub fn java_double(v: f64) -> String {
    let rounded = (v * 10_000.0).round() / 10_000.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.1}")
    } else {
        let s = format!("{rounded:.4}");
        s.trim_end_matches('0').to_string()
    }
}

/// One `mntr` value: a whole number, a fraction or text.
#[derive(Debug, Clone, PartialEq)]
pub enum MntrValue {
    /// A count or size, or a gauge's value.
    Int(i64),
    /// A counter's value: a count of events since start, which `/metrics` exports as a counter.
    Counter(u64),
    /// A mean (avg_latency).
    Float(f64),
    /// Text (version, server_state).
    Text(String),
}

/// The value as `mntr` prints it (a fraction as Java prints a double).
impl std::fmt::Display for MntrValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MntrValue::Int(n) => write!(f, "{n}"),
            MntrValue::Counter(n) => write!(f, "{n}"),
            MntrValue::Float(x) => f.write_str(&java_double(*x)),
            MntrValue::Text(t) => f.write_str(t),
        }
    }
}

/// `mntr`'s keys and values, in its order: the four-letter word prints them, the AdminServer's
/// `monitor` and the Prometheus endpoint serve them. Apache's counters and summaries follow its
/// basic lines, as in Apache's; the ones zkrs does not produce are listed, with why, in
/// docs/metrics.md.
pub fn monitor_values(v: &View<'_>) -> Vec<(String, MntrValue)> {
    use MntrValue::{Float, Int, Text};
    let n = |x: usize| Int(x as i64);
    let u = |x: u64| Int(x.min(i64::MAX as u64) as i64);
    let (min, avg, max) = v.stats.latency_ms();
    let mut lines: Vec<(&'static str, MntrValue)> = vec![
        ("zk_version", Text(version())),
        ("zk_server_state", Text(v.mode.unwrap_or("standalone").into())),
        ("zk_ephemerals_count", n(v.db.ephemerals_count())),
        ("zk_num_alive_connections", n(v.connection_count())),
        ("zk_avg_latency", Float(avg)),
        ("zk_outstanding_requests", n(v.outstanding)),
        ("zk_znode_count", n(v.db.node_count())),
        ("zk_global_sessions", n(v.db.sessions().len())),
        ("zk_local_sessions", Int(0)),
        ("zk_packets_sent", u(v.stats.packets_sent)),
        ("zk_packets_received", u(v.stats.packets_received)),
        ("zk_watch_count", n(v.db.watch_count())),
        ("zk_auth_failed_count", u(v.stats.auth_failed)),
        ("zk_min_latency", u(min)),
        ("zk_max_latency", u(max)),
        ("zk_approximate_data_size", u(v.db.approximate_data_size())),
        ("zk_open_file_descriptor_count", n(open_fds())),
        ("zk_max_file_descriptor_count", u(max_fds())),
        ("zk_uptime", Int(v.uptime_ms)),
        ("zk_last_proposal_size", Int(-1)),
        // zkrs's own: the log refuses writes while its disk is full.
        ("zk_log_disk_full", Int(i64::from(v.stats.disk_full))),
        ("zk_writes_refused_disk_full", MntrValue::Counter(v.stats.writes_refused)),
        // zkrs's own: the memory brake (zkrs.treeMemorySoftLimitBytes; limit 0 = off).
        ("zk_memory_brake", Int(i64::from(v.db.memory_brake_on()))),
        ("zk_tree_memory_bytes", u(v.db.tree_memory_bytes())),
        ("zk_tree_memory_soft_limit_bytes", u(v.db.memory_soft_limit_bytes())),
        ("zk_writes_refused_memory_brake", MntrValue::Counter(v.stats.writes_refused_memory)),
    ];
    if let Some(b) = v.backup {
        // zkrs's own: the server archiving by itself (zkrs.backup.to).
        lines.push(("zk_backup_lag_txns", Int(b.lag_txns)));
        lines.push(("zk_backup_archived_zxid", Int(b.archived_zxid)));
        lines.push(("zk_backup_last_success_ms", Int(b.last_success_ms)));
        lines.push(("zk_backup_errors", MntrValue::Counter(b.errors)));
        lines.push(("zk_backup_archived_bytes", MntrValue::Counter(b.archived_bytes)));
        lines.push(("zk_backup_archived_files", MntrValue::Counter(b.archived_files)));
        lines.push(("zk_backup_held_bytes", u(b.held_bytes)));
        lines.push(("zk_backup_purges_forced", MntrValue::Counter(b.purges_forced)));
        lines.push(("zk_backup_closed", Int(i64::from(b.closed))));
    }
    if let Some(q) = v.quorum {
        lines.push(("zk_learners", n(q.learners)));
        lines.push(("zk_synced_followers", n(q.synced_followers)));
        lines.push(("zk_synced_non_voting_followers", Int(0)));
        lines.push(("zk_synced_observers", n(q.synced_observers)));
        lines.push(("zk_pending_syncs", n(q.pending_syncs)));
    }
    let mut lines: Vec<(String, MntrValue)> = lines.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    for (name, count) in &v.counters {
        lines.push((format!("zk_{name}"), MntrValue::Counter(*count)));
    }
    // Apache prints a summary's whole milliseconds, its mean as a fraction.
    let ms = |x: f64| Int(x as i64);
    for t in &v.timings {
        let r = &t.reading;
        lines.push((format!("zk_avg_{}", t.name), Float(r.avg_ms())));
        lines.push((format!("zk_min_{}", t.name), ms(r.min_ms)));
        lines.push((format!("zk_max_{}", t.name), ms(r.max_ms)));
        lines.push((format!("zk_cnt_{}", t.name), u(r.count)));
        lines.push((format!("zk_sum_{}", t.name), ms(r.sum_ms)));
        for (infix, q) in t.detail.mntr_percentiles() {
            lines.push((format!("zk_{infix}_{}", t.name), ms(r.quantile(*q).unwrap_or(0.0))));
        }
    }
    lines
}

/// `envi`'s entries: the ones of Apache's list that a process without a JVM has.
pub fn environment() -> Vec<(String, String)> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let osrel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let dir = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
    vec![
        ("zookeeper.version".into(), version()),
        ("host.name".into(), host.trim().to_string()),
        ("os.name".into(), std::env::consts::OS.to_string()),
        ("os.arch".into(), std::env::consts::ARCH.to_string()),
        ("os.version".into(), osrel.trim().to_string()),
        ("user.name".into(), std::env::var("USER").unwrap_or_default()),
        ("user.home".into(), std::env::var("HOME").unwrap_or_default()),
        ("user.dir".into(), dir),
    ]
}

/// Bytes of the files under `path`, recursively (`dirs`).
pub fn dir_size(path: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(path) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The bytes of zkrs's snapshots (under dataDir) and of its transaction log (under dataLogDir):
/// what Apache reports of its version-2 directories.
pub fn data_sizes(settings: &Settings) -> (u64, u64) {
    (
        dir_size(&settings.snap_root.join(zk_log::snapshot::SNAP_DIR_NAME)),
        dir_size(&settings.log_root.join(zk_log::LOG_DIR_NAME)),
    )
}

/// Open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// The open-file limit of this process.
pub fn max_fds() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mntr_values_print_as_apaches() {
        assert_eq!(MntrValue::Float(0.5).to_string(), "0.5");
        assert_eq!(MntrValue::Float(2.0).to_string(), "2.0");
        assert_eq!(MntrValue::Float(1.23456).to_string(), "1.2346");
        assert_eq!(MntrValue::Counter(7).to_string(), "7");
        assert_eq!(MntrValue::Text("leader".into()).to_string(), "leader");
    }
}
