//! Four-letter words: the text answers Apache ZooKeeper gives to `ruok`, `srvr`, `stat`, `mntr` and
//! the rest, with the same line formats so that existing monitoring keeps working. They render the
//! server's read model ([`crate::view`]), as the AdminServer does in JSON.

use crate::view::{
    data_sizes, environment, java_double, monitor_values, version, ConnView, SnapshotAnswer, View,
};
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;

/// The words this server knows: Apache's, and ClickHouse Keeper's `csnp` (take a snapshot now),
/// `lgif` (the log's and the snapshots' positions), `ydld` (a leader hands its leadership over)
/// and `rqld` (a follower asks its leader for the leadership), and `rcvr` (forced recovery, which
/// reads a confirmation token after the word: [`RCVR_TOKEN_MAX`]). Anything else in the first four
/// bytes is read as a frame length.
pub const WORDS: [&str; 22] = [
    "ruok", "srvr", "stat", "conf", "cons", "mntr", "wchs", "wchc", "wchp", "dump", "envi", "isro", "dirs",
    "crst", "srst", "gtmk", "stmk", "csnp", "lgif", "rqld", "ydld", "rcvr",
];

/// The most bytes read after `rcvr` for its token (up to a newline or the end of the stream).
pub const RCVR_TOKEN_MAX: usize = 64;

/// The token an `rcvr` request carries: the text after the word, trimmed (`rcvr 1-100000000`);
/// `None` when there is none, or it is not printable ASCII.
pub fn rcvr_token(after_word: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(after_word).ok()?;
    let text = text.split('\n').next().unwrap_or("").trim();
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic())).then(|| text.to_string())
}

/// ClickHouse Keeper's answer to `csnp` when no snapshot could be scheduled.
pub const CSNP_FAILED: &str = "Failed to schedule snapshot creation task.";

/// `conf`'s text: zoo.cfg's, with the client port where the listener is now.
fn conf_text(v: &View<'_>) -> String {
    with_client_port(&v.settings.conf_text, v.client_addr)
}

/// The asking connection's line in `stat` and `cons`: it has sent one frame (the word).
fn asker_line(out: &mut String, v: &View<'_>) {
    if let Some(asker) = v.asker {
        let _ = writeln!(out, " /{asker}[0](queued=0,recved=1,sent=0)");
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

/// The answer to `cmd` (already checked against the whitelist).
pub fn render(cmd: &str, v: &View<'_>) -> String {
    let mut out = String::new();
    // ydld, rqld and rcvr carry the node's own answer (it acted on them already): a leader with
    // leaderServes=no, which reports no mode, hands over too, and a server recovers while it
    // serves nobody.
    let node_answers = matches!(cmd, "ydld" | "rqld" | "rcvr");
    if v.mode.is_none()
        && !node_answers
        && !matches!(cmd, "ruok" | "conf" | "envi" | "dirs" | "isro" | "gtmk" | "stmk")
    {
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
            asker_line(&mut out, v);
            out.push('\n');
            summary(&mut out, v);
        }
        "cons" => {
            for c in &v.conns {
                conn_line(&mut out, c, true);
            }
            asker_line(&mut out, v);
            out.push('\n');
        }
        "conf" => out.push_str(&conf_text(v)),
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
        // Keeper answers the snapshot's log index; here the zxid the snapshot starts at, in
        // decimal as Keeper prints its indexes, so scripts reading the first line's number work
        // with either.
        "csnp" => match v.snapshot_answer {
            Some(SnapshotAnswer::Started(zxid)) => {
                let _ = writeln!(out, "{zxid}");
            }
            Some(SnapshotAnswer::UnderWay(zxid)) => {
                let _ = writeln!(out, "{zxid}");
                let _ = writeln!(
                    out,
                    "A snapshot at zxid 0x{zxid:x} is already under way; no other was started."
                );
            }
            Some(SnapshotAnswer::Refused(why)) => {
                let _ = writeln!(out, "{CSNP_FAILED}");
                let _ = writeln!(out, "{why}");
            }
            Some(SnapshotAnswer::TooSoon) => {
                let _ = writeln!(out, "{CSNP_FAILED}");
                let _ = writeln!(out, "{}", SnapshotAnswer::TOO_SOON);
            }
            None => {
                let _ = writeln!(out, "{CSNP_FAILED}");
            }
        },
        "lgif" => {
            for (k, val) in v.log_info.unwrap_or_default().pairs() {
                let _ = writeln!(out, "{k}\t{val}");
            }
        }
        // The node's answer, as the driver had it (see `crate::node::Node::hand_over` and
        // `crate::node::Node::recover`).
        "ydld" | "rqld" | "rcvr" => {
            let _ = writeln!(out, "{}", v.node_answer.as_deref().unwrap_or("not answered"));
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
