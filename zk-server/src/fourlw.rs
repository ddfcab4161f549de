//! Four-letter words: the text answers Apache ZooKeeper gives to `ruok`, `srvr`, `stat`, `mntr` and
//! the rest, with the same line formats so that existing monitoring keeps working.

use crate::settings::Settings;
use crate::stats::{ConnStats, ServerStats};
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use zk_tree::Database;

/// The words this server knows. Anything else in the first four bytes is read as a frame length.
pub const WORDS: [&str; 17] = [
    "ruok", "srvr", "stat", "conf", "cons", "mntr", "wchs", "wchc", "wchp", "dump", "envi", "isro", "dirs",
    "crst", "srst", "gtmk", "stmk",
];

/// The version string the server reports.
pub fn version() -> String {
    format!("3.8.0-zkrs-{}, built on zkrs", env!("CARGO_PKG_VERSION"))
}

/// One connection as the words see it.
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
    pub ensemble: Option<crate::admin::EnsembleView>,
    /// The wall clock, ms since the Unix epoch.
    pub wall_ms: i64,
    /// Apache's counters that zkrs counts, under Apache's names without `zk_` (`mntr` prints
    /// them, `/metrics` exports them as counters).
    pub counters: Vec<(&'static str, u64)>,
    /// Apache's timing summaries that zkrs measures (`mntr` prints their avg/min/max/cnt/sum and
    /// the advanced ones' percentiles; `/metrics` exports them as summaries).
    pub timings: Vec<crate::summary::Timing>,
}

impl View<'_> {
    /// The address this server gives as its client address (`voting_view`, `zabstate`): the
    /// plain listener's, else the TLS port's.
    pub fn advertised_client_addr(&self) -> SocketAddr {
        self.client_addr
            .or(self.settings.secure_client_addr)
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// `conf`'s text: zoo.cfg's, with the client port where the listener is now.
    fn conf_text(&self) -> String {
        with_client_port(&self.settings.conf_text, self.client_addr)
    }

    /// Connections, the asking one included.
    fn connection_count(&self) -> usize {
        self.conns.len() + usize::from(self.asker.is_some())
    }

    /// The asking connection's line in `stat` and `cons`: it has sent one frame (the word).
    fn asker_line(&self, out: &mut String) {
        if let Some(asker) = self.asker {
            let _ = writeln!(out, " /{asker}[0](queued=0,recved=1,sent=0)");
        }
    }
}

/// Formats a float the way Java's `Double.toString` does for these small values.
fn java_double(v: f64) -> String {
    let rounded = (v * 10_000.0).round() / 10_000.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.1}")
    } else {
        let s = format!("{rounded:.4}");
        s.trim_end_matches('0').to_string()
    }
}

fn conn_line(out: &mut String, c: &ConnView, with_details: bool) {
    let st = &c.stats;
    let sid = st.session.load(Relaxed);
    let _ = write!(
        out,
        " /{}[{}](queued=0,recved={},sent={}",
        c.remote,
        u8::from(sid != 0),
        st.received.load(Relaxed),
        st.sent.load(Relaxed)
    );
    if with_details {
        if let Some(d) = st.details() {
            out.push_str(&d);
        }
    }
    out.push_str(")\n");
}

fn summary(out: &mut String, v: &View<'_>) {
    let (min, avg, max) = v.stats.latency_ms();
    let _ = writeln!(out, "Latency min/avg/max: {min}/{}/{max}", java_double(avg));
    let _ = writeln!(out, "Received: {}", v.stats.packets_received);
    let _ = writeln!(out, "Sent: {}", v.stats.packets_sent);
    let _ = writeln!(out, "Connections: {}", v.connection_count());
    let _ = writeln!(out, "Outstanding: {}", v.outstanding);
    let _ = writeln!(out, "Zxid: 0x{:x}", v.last_zxid);
    let _ = writeln!(out, "Mode: {}", v.mode.unwrap_or("standalone"));
    let _ = writeln!(out, "Node count: {}", v.db.node_count());
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

/// The answer to `cmd` (already checked against the whitelist).
pub fn render(cmd: &str, v: &View<'_>) -> String {
    let mut out = String::new();
    if v.mode.is_none() && !matches!(cmd, "ruok" | "conf" | "envi" | "dirs" | "isro" | "gtmk" | "stmk") {
        // As Apache answers while it elects or syncs.
        return "This ZooKeeper instance is not currently serving requests\n".into();
    }
    match cmd {
        "ruok" => out.push_str("imok"),
        // Apache: "null" with no server running, "ro" from its read-only server, "rw" otherwise.
        "isro" => out.push_str(match v.mode {
            None => "null",
            Some("read-only") => "ro",
            Some(_) => "rw",
        }),
        "srvr" => {
            let _ = writeln!(out, "Zookeeper version: {}", version());
            summary(&mut out, v);
        }
        "stat" => {
            let _ = writeln!(out, "Zookeeper version: {}", version());
            out.push_str("Clients:\n");
            for c in &v.conns {
                conn_line(&mut out, c, false);
            }
            v.asker_line(&mut out);
            out.push('\n');
            summary(&mut out, v);
        }
        "cons" => {
            for c in &v.conns {
                conn_line(&mut out, c, true);
            }
            v.asker_line(&mut out);
            out.push('\n');
        }
        "conf" => out.push_str(&v.conf_text()),
        "crst" => out.push_str("Connection stats reset.\n"),
        "srst" => out.push_str("Server stats reset.\n"),
        "gtmk" | "stmk" => out.push('0'),
        "dirs" => {
            let (data, log) = data_sizes(v.settings);
            let _ = writeln!(out, "datadir_size: {data}");
            let _ = writeln!(out, "logdir_size: {log}");
        }
        "wchs" => {
            let by_watcher = v.db.watches_by_watcher();
            let _ = writeln!(
                out,
                "{} connections watching {} paths\nTotal watches:{}",
                by_watcher.len(),
                v.db.watched_path_count(),
                v.db.data_watch_count()
            );
        }
        "wchc" => {
            for (watcher, paths) in v.db.watches_by_watcher() {
                let _ = writeln!(out, "0x{}", watcher_label(v, watcher));
                for p in paths {
                    let _ = writeln!(out, "\t{p}");
                }
            }
            out.push('\n');
        }
        "wchp" => {
            for (path, watchers) in v.db.watches_by_path() {
                let _ = writeln!(out, "{path}");
                for w in watchers {
                    let _ = writeln!(out, "\t0x{}", watcher_label(v, w));
                }
            }
            out.push('\n');
        }
        "dump" => {
            out.push_str("SessionTracker dump:\n");
            let sessions: Vec<(i64, i32)> = v.db.sessions().iter().collect();
            let _ = writeln!(out, "Session Sets ({})/({}):", sessions.len(), sessions.len());
            for (sid, timeout) in &sessions {
                let _ = writeln!(out, "\t0x{sid:x} timeout={timeout}");
            }
            out.push_str("ephemeral nodes dump:\n");
            let eph = v.db.ephemerals_by_session();
            let _ = writeln!(out, "Sessions with Ephemerals ({}):", eph.len());
            for (sid, paths) in eph {
                let _ = writeln!(out, "0x{sid:x}:");
                for p in paths {
                    let _ = writeln!(out, "\t{p}");
                }
            }
            out.push_str("Connections dump:\n");
            let _ = writeln!(out, "Connections Sets (1)/({}):", v.conns.len());
            for c in &v.conns {
                let _ = writeln!(out, "\tip: /{} sessionId: 0x{:x}", c.remote, c.stats.session.load(Relaxed));
            }
        }
        "envi" => {
            out.push_str("Environment:\n");
            for (k, val) in environment() {
                let _ = writeln!(out, "{k}={val}");
            }
        }
        "mntr" => {
            for (k, val) in monitor_values(v) {
                let _ = writeln!(out, "{k}\t{val}");
            }
        }
        _ => {}
    }
    out
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

impl MntrValue {
    /// The value as the AdminServer's JSON carries it.
    pub fn into_json(self) -> serde_json::Value {
        match self {
            MntrValue::Int(n) => n.into(),
            MntrValue::Counter(n) => n.into(),
            MntrValue::Float(x) => x.into(),
            MntrValue::Text(t) => t.into(),
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
    ];
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

/// Watches are kept per connection; Apache prints the connection's session id.
fn watcher_label(v: &View<'_>, watcher: u64) -> String {
    let sid = v.conns.iter().find(|c| c.id == watcher).map(|c| c.stats.session.load(Relaxed)).unwrap_or(0);
    format!("{sid:x}")
}

/// `conf`'s text `text` (zoo.cfg's, first line `clientPort=`) with the port of `listening`, the
/// plain listener's address now (-1 without one, as Apache prints then).
fn with_client_port(text: &str, listening: Option<SocketAddr>) -> String {
    let port = listening.map_or(-1, |a| i32::from(a.port()));
    match text.split_once('\n') {
        Some((first, rest)) if first.starts_with("clientPort=") => format!("clientPort={port}\n{rest}"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_reports_the_port_the_listener_moved_to() {
        let text = "clientPort=2181\nsecureClientPort=-1\nserverId=0\n";
        let moved = Some(SocketAddr::from(([127, 0, 0, 1], 2191)));
        assert_eq!(with_client_port(text, moved), "clientPort=2191\nsecureClientPort=-1\nserverId=0\n");
        assert_eq!(with_client_port(text, None), "clientPort=-1\nsecureClientPort=-1\nserverId=0\n");
        assert_eq!(with_client_port("other\n", moved), "other\n");
    }
}
