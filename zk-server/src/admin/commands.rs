//! The AdminServer's commands: the JSON answers Apache ZooKeeper 3.8's AdminServer gives, with its
//! command names, aliases, field names and value types, rendered from the server's read model
//! ([`View`], [`crate::view`]), the one the four-letter words read.
//!
//! Every answer is a JSON object: the command's fields, then `"command"` (the primary name) and
//! `"error"` (null, or why the command could not run), as Apache's `CommandResponse` has them.

use crate::view::{self, EnsembleView, MntrValue, SnapshotAnswer, View};
use serde_json::{json, Map, Value};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use zk_quorum::config::{LearnerType, ServerAddress};

/// One command: its primary name first, then its aliases, and whether it needs a serving server
/// (Apache answers "not currently serving" for those while it elects or syncs).
struct Spec {
    names: &'static [&'static str],
    server_required: bool,
}

const SPECS: &[Spec] = &[
    Spec { names: &["connection_stat_reset", "crst"], server_required: true },
    Spec { names: &["configuration", "conf", "config"], server_required: true },
    Spec { names: &["connections", "cons"], server_required: true },
    Spec { names: &["hash"], server_required: true },
    Spec { names: &["dirs"], server_required: true },
    Spec { names: &["dump"], server_required: true },
    Spec { names: &["environment", "env", "envi"], server_required: false },
    Spec { names: &["get_trace_mask", "gtmk"], server_required: false },
    Spec { names: &["initial_configuration", "icfg"], server_required: true },
    Spec { names: &["is_read_only", "isro"], server_required: true },
    Spec { names: &["last_snapshot", "lsnp"], server_required: true },
    Spec { names: &["leader", "lead"], server_required: true },
    Spec { names: &["monitor", "mntr"], server_required: false },
    Spec { names: &["observer_connection_stat_reset", "orst"], server_required: true },
    Spec { names: &["ruok"], server_required: true },
    Spec { names: &["set_trace_mask", "stmk"], server_required: false },
    Spec { names: &["server_stats", "srvr"], server_required: true },
    Spec { names: &["stats", "stat"], server_required: true },
    Spec { names: &["stat_reset", "srst"], server_required: true },
    Spec { names: &["observers", "obsr"], server_required: true },
    Spec { names: &["system_properties", "sysp"], server_required: false },
    Spec { names: &["voting_view"], server_required: true },
    Spec { names: &["watches", "wchc"], server_required: true },
    Spec { names: &["watches_by_path", "wchp"], server_required: true },
    Spec { names: &["watch_summary", "wchs"], server_required: true },
    Spec { names: &["zabstate"], server_required: false },
    // ClickHouse Keeper's four-letter words, as commands (zkrs's names; the words are aliases).
    Spec { names: &["create_snapshot", "csnp"], server_required: true },
    Spec { names: &["log_info", "lgif"], server_required: true },
    // ... and its leadership words: gated as `snapshot` is (ALL on `/`), by `super::http`.
    Spec { names: &[YIELD_LEADERSHIP, "ydld"], server_required: false },
    Spec { names: &[REQUEST_LEADERSHIP, "rqld"], server_required: false },
    // ... and its forced recovery, gated so too but answered while the server serves nobody
    // (which is when it is needed), with a confirmation token (`?confirm=`).
    Spec { names: &[FORCE_RECOVERY, "rcvr"], server_required: false },
    // Apache 3.9's, answered by `super::snapshot` (an octet stream, not JSON); listed here for
    // its names and the command listing.
    Spec { names: &[SNAPSHOT, "snap"], server_required: true },
    // Apache 3.9's POST command, answered by `super::restore`.
    Spec { names: &[RESTORE, "rest"], server_required: true },
];

/// The primary name of ClickHouse Keeper's `ydld` as a command: a leader hands its leadership
/// over (to `?server=N`, or its most caught-up voting follower).
pub const YIELD_LEADERSHIP: &str = "yield_leadership";

/// The primary name of ClickHouse Keeper's `rqld` as a command: a follower asks its leader for
/// the leadership.
pub const REQUEST_LEADERSHIP: &str = "request_leadership";

/// The primary name of ClickHouse Keeper's `rcvr` as a command: forced recovery of an ensemble
/// whose quorum is lost for good. Without `?confirm=TOKEN` (or with another token) it describes
/// what it would do and gives the token; with it, this server leads alone.
pub const FORCE_RECOVERY: &str = "force_recovery";

/// The primary name of Apache 3.9's `restore` command.
pub const RESTORE: &str = "restore";

/// The primary name of Apache 3.9's `snapshot` command.
pub const SNAPSHOT: &str = "snapshot";

fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.names.contains(&name))
}

/// The primary name `name` stands for, if it names a command.
pub fn primary_name(name: &str) -> Option<&'static str> {
    spec(name).map(|s| s.names[0])
}

/// Every command's primary name, sorted (the listing at the command URL).
pub fn primary_names() -> Vec<&'static str> {
    let mut v: Vec<_> = SPECS.iter().map(|s| s.names[0]).collect();
    v.sort_unstable();
    v
}

/// The counters a command asks the core to reset after answering: `crst` the connections',
/// `srst` the server's (the four-letter words' names).
pub fn reset_word(name: &str) -> Option<&'static str> {
    match primary_name(name)? {
        "connection_stat_reset" => Some("crst"),
        "stat_reset" => Some("srst"),
        _ => None,
    }
}

/// An answer carrying only `"command"` and `"error"`: an unknown command, or one that cannot run.
pub fn error_response(command: &str, error: &str) -> Value {
    json!({ "command": command, "error": error })
}

/// Runs the command `name` (a primary name or an alias) with the query's `args`.
pub fn run(name: &str, args: &[(String, String)], v: &View<'_>) -> Value {
    let Some(spec) = spec(name) else {
        return error_response(name, &format!("Unknown command: {name}"));
    };
    if spec.server_required && v.mode.is_none() {
        return error_response(name, "This ZooKeeper instance is not currently serving requests");
    }
    let primary = spec.names[0];
    let mut m = Map::new();
    let mut error: Option<String> = None;
    match primary {
        "ruok" | "connection_stat_reset" | "observer_connection_stat_reset" | "stat_reset" => {}
        "configuration" => configuration(&mut m, v),
        "connections" => {
            m.insert("connections".into(), connections(v, false, false));
            m.insert("secure_connections".into(), connections(v, false, true));
        }
        "hash" => {
            // zkrs keeps no digest log (Apache's digest.enabled feature), so there are none to list.
            m.insert("digests".into(), json!([]));
        }
        "dirs" => {
            let (data, log) = view::data_sizes(v.settings);
            m.insert("datadir_size".into(), json!(data));
            m.insert("logdir_size".into(), json!(log));
        }
        "dump" => dump(&mut m, v),
        "environment" | "system_properties" => {
            for (k, val) in view::environment() {
                m.insert(k, json!(val));
            }
        }
        "get_trace_mask" => {
            m.insert("tracemask".into(), json!(0));
        }
        "set_trace_mask" => match args.iter().find(|(k, _)| k == "traceMask") {
            None => error = Some("setTraceMask requires long traceMask argument".into()),
            Some((_, raw)) => match raw.parse::<i64>() {
                // zkrs has no trace levels: the mask reads back as 0, as `gtmk` says.
                Ok(_) => {
                    m.insert("tracemask".into(), json!(0));
                }
                Err(_) => error = Some(format!("setTraceMask requires long traceMask argument, got {raw}")),
            },
        },
        "initial_configuration" => {
            m.insert("initial_configuration".into(), json!(v.settings.initial_config));
        }
        "is_read_only" => {
            m.insert("read_only".into(), json!(v.mode == Some("read-only")));
        }
        "last_snapshot" => {
            let (zxid, timestamp) = last_snapshot(v);
            m.insert("zxid".into(), json!(format!("{:x}", zxid)));
            m.insert("timestamp".into(), json!(timestamp));
        }
        "leader" => match &v.ensemble {
            Some(e) => {
                m.insert("is_leader".into(), json!(e.leading));
                m.insert("leader_id".into(), json!(e.leader_sid.unwrap_or(-1)));
                let ip = e.leader_sid.and_then(|sid| leader_host(e, sid)).unwrap_or_default();
                m.insert("leader_ip".into(), json!(ip));
            }
            None => error = Some("server is not initialized".into()),
        },
        "monitor" => monitor(&mut m, v),
        "create_snapshot" => match v.snapshot_answer {
            Some(SnapshotAnswer::Started(zxid)) | Some(SnapshotAnswer::UnderWay(zxid)) => {
                m.insert("zxid".into(), json!(format!("0x{zxid:x}")));
                m.insert("last_committed_log_idx".into(), json!(zxid));
                m.insert(
                    "already_under_way".into(),
                    json!(matches!(v.snapshot_answer, Some(SnapshotAnswer::UnderWay(_)))),
                );
            }
            Some(SnapshotAnswer::Refused(why)) => {
                error = Some(format!("Failed to schedule snapshot creation task: {why}"))
            }
            Some(SnapshotAnswer::TooSoon) => {
                error =
                    Some(format!("Failed to schedule snapshot creation task: {}", SnapshotAnswer::TOO_SOON))
            }
            None => error = Some("Failed to schedule snapshot creation task.".into()),
        },
        YIELD_LEADERSHIP | REQUEST_LEADERSHIP | FORCE_RECOVERY => {
            m.insert("answer".into(), json!(v.node_answer.as_deref().unwrap_or("not answered")));
        }
        "log_info" => match &v.log_info {
            Some(info) => {
                for (k, val) in info.pairs() {
                    m.insert(k.into(), json!(val));
                }
            }
            None => error = Some("log information is not available".into()),
        },
        // Served as a stream by `super::snapshot` before it gets here.
        SNAPSHOT => error = Some("the snapshot command is served by the AdminServer's HTTP layer".into()),
        RESTORE => {
            error = Some("the restore command is served by the AdminServer's HTTP layer, as a POST".into())
        }
        "server_stats" => server_stats(&mut m, v),
        "stats" => {
            server_stats(&mut m, v);
            m.insert("connections".into(), connections(v, true, false));
            m.insert("secure_connections".into(), connections(v, true, true));
        }
        "observers" => {
            let synced = v.quorum.map_or(0, |q| q.synced_observers);
            m.insert("synced_observers".into(), json!(synced));
            m.insert("observers".into(), json!([]));
        }
        "voting_view" => {
            let voters =
                v.ensemble.as_ref().map(|e| voting_view(e, v.advertised_client_addr())).unwrap_or_default();
            m.insert("current_config".into(), Value::Object(voters));
        }
        "watches" => {
            let out: Map<String, Value> = watches_by_session(v)
                .into_iter()
                .map(|(sid, paths)| (sid.to_string(), json!(paths)))
                .collect();
            m.insert("session_id_to_watched_paths".into(), Value::Object(out));
        }
        "watches_by_path" => {
            let mut out = Map::new();
            for (path, watchers) in v.db.watches_by_path() {
                let sids: Vec<i64> = watchers.into_iter().map(|w| session_of(v, w)).collect();
                out.insert(path, json!(sids));
            }
            m.insert("path_to_session_ids".into(), Value::Object(out));
        }
        "watch_summary" => {
            m.insert("num_connections".into(), json!(v.db.watches_by_watcher().len()));
            m.insert("num_paths".into(), json!(v.db.watched_path_count()));
            m.insert("num_total_watches".into(), json!(v.db.data_watch_count()));
        }
        "zabstate" => zabstate(&mut m, v),
        _ => {}
    }
    m.insert("command".into(), json!(primary));
    m.insert("error".into(), error.map_or(Value::Null, Value::String));
    Value::Object(m)
}

/// `wchc`'s answer: the paths each session watches on this server (its connections' data
/// watches), by session id (0 for connections without a session).
pub fn watches_by_session(v: &View<'_>) -> std::collections::BTreeMap<i64, Vec<String>> {
    let mut out: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    for (watcher, paths) in v.db.watches_by_watcher() {
        let entry = out.entry(session_of(v, watcher)).or_default();
        entry.extend(paths);
    }
    // Two connections of one key (those without a session) may watch the same path.
    for paths in out.values_mut() {
        paths.sort_unstable();
        paths.dedup();
    }
    out
}

/// The session a watcher (connection) is bound to; 0 for one without a session.
fn session_of(v: &View<'_>, watcher: u64) -> i64 {
    v.conns.iter().find(|c| c.id == watcher).map_or(0, |c| c.stats.session.load(Relaxed))
}

fn configuration(m: &mut Map<String, Value>, v: &View<'_>) {
    let s = v.settings;
    m.insert("client_port".into(), json!(v.client_addr.map_or(-1, |a| i32::from(a.port()))));
    m.insert("data_dir".into(), json!(s.data_dir.display().to_string()));
    m.insert("data_log_dir".into(), json!(s.data_log_dir.display().to_string()));
    m.insert("tick_time".into(), json!(s.tick_ms));
    m.insert("max_client_cnxns".into(), json!(s.max_client_cnxns));
    m.insert("min_session_timeout".into(), json!(s.min_session_timeout_ms));
    m.insert("max_session_timeout".into(), json!(s.max_session_timeout_ms));
    m.insert("server_id".into(), json!(v.ensemble.as_ref().map_or(0, |e| e.my_sid)));
    // As configured (-1: not set), as Apache reports it.
    m.insert("client_port_listen_backlog".into(), json!(s.client_port_listen_backlog));
}

/// The client connections of one port (the TLS one when `secure`), as Apache's
/// `getConnectionInfo(brief)` lists its factory's.
fn connections(v: &View<'_>, brief: bool, secure: bool) -> Value {
    let list: Vec<Value> = v
        .conns
        .iter()
        .filter(|c| c.stats.secure_port == secure)
        .map(|c| {
            let st = &c.stats;
            let mut info = Map::new();
            info.insert("remote_socket_address".into(), json!(c.remote.to_string()));
            // SelectionKey.OP_READ: every zkrs connection reads.
            info.insert("interest_ops".into(), json!(1));
            info.insert("outstanding_requests".into(), json!(0));
            info.insert("packets_received".into(), json!(st.received.load(Relaxed)));
            info.insert("packets_sent".into(), json!(st.sent.load(Relaxed)));
            if !brief {
                let last = st.last_request();
                info.insert("session_id".into(), json!(st.session.load(Relaxed)));
                info.insert("last_operation".into(), json!(last.map_or("NA", |l| l.op)));
                info.insert("established".into(), json!(st.established_ms));
                info.insert("session_timeout".into(), json!(st.timeout_ms.load(Relaxed)));
                info.insert("last_cxid".into(), json!(last.map_or(-1, |l| i64::from(l.cxid))));
                info.insert("last_zxid".into(), json!(last.map_or(-1, |l| l.zxid)));
                info.insert("last_response_time".into(), json!(last.map_or(0, |l| l.at_wall_ms)));
                info.insert("last_latency".into(), json!(last.map_or(0, |l| l.latency_ms)));
                info.insert("min_latency".into(), json!(last.map_or(0, |l| l.min_ms)));
                info.insert("avg_latency".into(), json!(last.map_or(0, |l| l.avg_ms)));
                info.insert("max_latency".into(), json!(last.map_or(0, |l| l.max_ms)));
            }
            Value::Object(info)
        })
        .collect();
    Value::Array(list)
}

fn dump(m: &mut Map<String, Value>, v: &View<'_>) {
    // Apache keys each session by the tick its expiry falls in. zkrs's expiry tracker does not
    // list its deadlines, so a session is keyed by the latest its deadline can be: now plus its
    // timeout, rounded up to the tick.
    let tick = v.settings.tick_ms.max(1);
    let mut by_expiry: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for (sid, timeout) in v.db.sessions().iter() {
        let at = v.wall_ms.saturating_add(i64::from(timeout));
        let bucket = (at / tick + 1).saturating_mul(tick);
        by_expiry.entry(bucket).or_default().push(sid);
    }
    let expiry: Map<String, Value> =
        by_expiry.into_iter().map(|(k, sids)| (k.to_string(), json!(sids))).collect();
    let eph: Map<String, Value> =
        v.db.ephemerals_by_session()
            .into_iter()
            .map(|(sid, paths)| (sid.to_string(), json!(paths)))
            .collect();
    m.insert("expiry_time_to_session_ids".into(), Value::Object(expiry));
    m.insert("session_id_to_ephemeral_paths".into(), Value::Object(eph));
}

/// The newest snapshot's zxid and modification time (seconds), or -1 and -1 when there is none.
fn last_snapshot(v: &View<'_>) -> (i64, i64) {
    view::newest_snapshot(v.settings).unwrap_or((-1, -1))
}

/// `mntr` as JSON: the same figures as the four-letter word, named without its `zk_` prefix, with
/// numbers as numbers.
fn monitor(m: &mut Map<String, Value>, v: &View<'_>) {
    for (key, value) in view::monitor_values(v) {
        let key = key.strip_prefix("zk_").unwrap_or(&key).to_string();
        m.insert(key, mntr_json(value));
    }
}

/// An `mntr` value as the AdminServer's JSON carries it.
fn mntr_json(value: MntrValue) -> Value {
    match value {
        MntrValue::Int(n) => n.into(),
        MntrValue::Counter(n) => n.into(),
        MntrValue::Float(x) => x.into(),
        MntrValue::Text(t) => t.into(),
    }
}

fn server_stats(m: &mut Map<String, Value>, v: &View<'_>) {
    let (min, avg, max) = v.stats.latency_ms();
    let (data_size, log_size) = view::data_sizes(v.settings);
    m.insert("version".into(), json!(view::version()));
    m.insert("read_only".into(), json!(v.mode == Some("read-only")));
    let stats = json!({
        "packets_sent": v.stats.packets_sent,
        "packets_received": v.stats.packets_received,
        "fsync_threshold_exceed_count": 0,
        "client_response_stats": { "last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1 },
        "data_dir_size": data_size,
        "log_dir_size": log_size,
        "server_state": v.mode.unwrap_or("standalone"),
        "last_processed_zxid": v.last_zxid,
        "outstanding_requests": v.outstanding,
        "avg_latency": avg,
        "max_latency": max,
        "min_latency": min,
        "num_alive_client_connections": v.conns.len(),
        "auth_failed_count": v.stats.auth_failed,
        "non_mtlsremote_conn_count": 0,
        "non_mtlslocal_conn_count": 0,
        "provider_null": false,
        "uptime": v.uptime_ms,
    });
    m.insert("server_stats".into(), stats);
    m.insert(
        "client_response".into(),
        json!({ "last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1 }),
    );
    if v.quorum.is_some() {
        // A leader's proposal sizes: zkrs does not track them (mntr's last_proposal_size is -1
        // too), and -1 is what Apache reports before the first.
        m.insert(
            "proposal_stats".into(),
            json!({ "last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1 }),
        );
    }
    m.insert("node_count".into(), json!(v.db.node_count()));
}

fn zabstate(m: &mut Map<String, Value>, v: &View<'_>) {
    match &v.ensemble {
        Some(e) => {
            m.insert("myid".into(), json!(e.my_sid));
            m.insert("is_leader".into(), json!(e.leading));
            m.insert("quorum_address".into(), addresses(e, |a| a.quorum_port));
            m.insert("election_address".into(), addresses(e, |a| a.election_port));
            m.insert("client_address".into(), json!(v.advertised_client_addr().to_string()));
            m.insert("voting".into(), json!(!e.observer));
            let zxid = v.last_zxid;
            m.insert("last_zxid".into(), json!(format!("0x{zxid:x}")));
            m.insert("zab_epoch".into(), json!(zxid >> 32));
            m.insert("zab_counter".into(), json!(zxid & 0xffff_ffff));
            m.insert("zabstate".into(), json!(e.zab_state));
        }
        None => {
            m.insert("voting".into(), json!(false));
            m.insert("zabstate".into(), json!(""));
        }
    }
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `leader`'s `leader_ip`: server `sid`'s first quorum address.
fn leader_host(e: &EnsembleView, sid: i64) -> Option<String> {
    let spec = e.config.servers.get(&sid)?;
    spec.addresses.first().map(|a| host_port(&a.host, a.quorum_port))
}

/// `voting_view`'s `current_config`: every voter by sid. A server line without a client address
/// shows none, except this server's own, which is where it listens (`own_client`), as in Apache.
fn voting_view(e: &EnsembleView, own_client: SocketAddr) -> Map<String, Value> {
    e.config
        .servers
        .values()
        .filter(|s| s.learner_type == LearnerType::Participant)
        .map(|s| {
            let view = json!({
                "server_addresses":
                    s.addresses.iter().map(|a| host_port(&a.host, a.quorum_port)).collect::<Vec<_>>(),
                "election_addresses":
                    s.addresses.iter().map(|a| host_port(&a.host, a.election_port)).collect::<Vec<_>>(),
                "client_address": match &s.client {
                    Some(c) => host_port(&c.host, c.port),
                    None if s.sid == e.my_sid => host_port(&own_client.ip().to_string(), own_client.port()),
                    None => String::new(),
                },
                "learner_type": "participant",
            });
            (s.sid.to_string(), view)
        })
        .collect()
}

/// `zabstate`'s `quorum_address` or `election_address` (`port` picks which): this server's
/// addresses as Apache serializes its MultipleAddresses object.
fn addresses(e: &EnsembleView, port: impl Fn(&ServerAddress) -> u16) -> Value {
    let addrs = e.config.servers.get(&e.my_sid).map(|s| s.addresses.as_slice()).unwrap_or_default();
    let all: Vec<String> = addrs.iter().map(|a| host_port(&a.host, port(a))).collect();
    let one = all.first().cloned().unwrap_or_default();
    // Apache's MultipleAddresses as Jackson writes it. A server's own addresses count as
    // reachable (Apache probes them; they are this process's).
    json!({
        "empty": addrs.is_empty(),
        "all_addresses": all,
        "all_reachable_addresses": all,
        "one": one,
        "reachable_address": one,
        "wildcard_addresses": addrs.iter().map(|a| host_port("0.0.0.0", port(a))).collect::<Vec<_>>(),
        "all_ports": addrs.iter().map(&port).collect::<Vec<_>>(),
        "all_host_strings": addrs.iter().map(|a| a.host.clone()).collect::<Vec<_>>(),
        "all_reachable_addresses_or_all": all,
        "reachable_or_one": one,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases() {
        assert_eq!(primary_name("mntr"), Some("monitor"));
        assert_eq!(primary_name("conf"), Some("configuration"));
        assert_eq!(primary_name("config"), Some("configuration"));
        assert_eq!(primary_name("obsr"), Some("observers"));
        assert_eq!(primary_name("nope"), None);
        assert_eq!(reset_word("crst"), Some("crst"));
        assert_eq!(reset_word("stat_reset"), Some("srst"));
        assert_eq!(reset_word("stats"), None);
        let names = primary_names();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted and distinct: {names:?}");
    }

    #[test]
    fn unknown_command_is_apaches_error() {
        let v = error_response("x", "Unknown command: x");
        assert_eq!(v.to_string(), r#"{"command":"x","error":"Unknown command: x"}"#);
    }
}
