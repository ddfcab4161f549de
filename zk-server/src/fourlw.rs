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
    /// The connection asking: Apache counts it among the connections and lists it.
    pub asker: SocketAddr,
    /// A leader's learners and the syncs it owes them (`mntr`'s leader-only lines).
    pub quorum: Option<QuorumFigures>,
    /// The server's mode as `srvr` and `mntr` print it (`standalone`, `leader`, `follower`,
    /// `observer`), or None while it is not serving (electing or syncing).
    pub mode: Option<&'static str>,
}

impl View<'_> {
    /// Connections, the asking one included.
    fn connection_count(&self) -> usize {
        self.conns.len() + 1
    }

    /// The asking connection's line in `stat` and `cons`: it has sent one frame (the word).
    fn asker_line(&self, out: &mut String) {
        let _ = writeln!(out, " /{}[0](queued=0,recved=1,sent=0)", self.asker);
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

fn dir_size(path: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(path) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

fn max_fds() -> u64 {
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
        "conf" => out.push_str(&v.settings.conf_text),
        "crst" => out.push_str("Connection stats reset.\n"),
        "srst" => out.push_str("Server stats reset.\n"),
        "gtmk" | "stmk" => out.push('0'),
        "dirs" => {
            let _ = writeln!(out, "datadir_size: {}", dir_size(&v.settings.data_dir));
            let _ = writeln!(out, "logdir_size: {}", dir_size(&v.settings.data_log_dir));
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
            let _ = writeln!(out, "zookeeper.version={}", version());
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let _ = writeln!(out, "host.name={}", host.trim());
            let _ = writeln!(out, "os.name={}", std::env::consts::OS);
            let _ = writeln!(out, "os.arch={}", std::env::consts::ARCH);
            let osrel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            let _ = writeln!(out, "os.version={}", osrel.trim());
            let _ = writeln!(out, "user.name={}", std::env::var("USER").unwrap_or_default());
            let _ = writeln!(out, "user.home={}", std::env::var("HOME").unwrap_or_default());
            let dir = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
            let _ = writeln!(out, "user.dir={dir}");
        }
        "mntr" => {
            let (min, avg, max) = v.stats.latency_ms();
            let lines: Vec<(&str, String)> = vec![
                ("zk_version", version()),
                ("zk_server_state", v.mode.unwrap_or("standalone").into()),
                ("zk_ephemerals_count", v.db.ephemerals_count().to_string()),
                ("zk_num_alive_connections", v.connection_count().to_string()),
                ("zk_avg_latency", java_double(avg)),
                ("zk_outstanding_requests", v.outstanding.to_string()),
                ("zk_znode_count", v.db.node_count().to_string()),
                ("zk_global_sessions", v.db.sessions().len().to_string()),
                ("zk_local_sessions", "0".into()),
                ("zk_packets_sent", v.stats.packets_sent.to_string()),
                ("zk_packets_received", v.stats.packets_received.to_string()),
                ("zk_watch_count", v.db.watch_count().to_string()),
                ("zk_auth_failed_count", v.stats.auth_failed.to_string()),
                ("zk_min_latency", min.to_string()),
                ("zk_max_latency", max.to_string()),
                ("zk_approximate_data_size", v.db.approximate_data_size().to_string()),
                ("zk_open_file_descriptor_count", open_fds().to_string()),
                ("zk_max_file_descriptor_count", max_fds().to_string()),
                ("zk_uptime", v.uptime_ms.to_string()),
                ("zk_last_proposal_size", "-1".into()),
                // zkrs's own: the log refuses writes while its disk is full.
                ("zk_log_disk_full", u8::from(v.stats.disk_full).to_string()),
                ("zk_writes_refused_disk_full", v.stats.writes_refused.to_string()),
            ];
            let mut lines = lines;
            if let Some(q) = v.quorum {
                lines.push(("zk_learners", q.learners.to_string()));
                lines.push(("zk_synced_followers", q.synced_followers.to_string()));
                lines.push(("zk_synced_non_voting_followers", "0".into()));
                lines.push(("zk_synced_observers", q.synced_observers.to_string()));
                lines.push(("zk_pending_syncs", q.pending_syncs.to_string()));
            }
            for (k, val) in lines {
                let _ = writeln!(out, "{k}\t{val}");
            }
        }
        _ => {}
    }
    out
}

/// Watches are kept per connection; Apache prints the connection's session id.
fn watcher_label(v: &View<'_>, watcher: u64) -> String {
    let sid = v.conns.iter().find(|c| c.id == watcher).map(|c| c.stats.session.load(Relaxed)).unwrap_or(0);
    format!("{sid:x}")
}
