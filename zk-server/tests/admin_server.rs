//! The AdminServer answers every command with the JSON Apache ZooKeeper 3.8's AdminServer gives:
//! the same field names with the same JSON types, compared on live servers of both (Debian's
//! Apache runs its AdminServer once the servlet API jar is on its class path). `/ready` flips when
//! the server stops serving, and `/metrics` parses as Prometheus text with Apache's names and
//! types.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::client::RawClient;
use support::*;
use zk_proto::*;

/// Every command name asked of both servers (primary names and aliases).
const COMMANDS: &[&str] = &[
    "ruok",
    "connection_stat_reset",
    "crst",
    "stat_reset",
    "srst",
    "observer_connection_stat_reset",
    "orst",
    "configuration",
    "conf",
    "config",
    "connections",
    "cons",
    "server_stats",
    "srvr",
    "stats",
    "stat",
    "watch_summary",
    "wchs",
    "watches",
    "wchc",
    "watches_by_path",
    "wchp",
    "dump",
    "is_read_only",
    "isro",
    "dirs",
    "hash",
    "leader",
    "lead",
    "voting_view",
    "observers",
    "obsr",
    "last_snapshot",
    "lsnp",
    "zabstate",
    "initial_configuration",
    "icfg",
    "get_trace_mask",
    "gtmk",
    "set_trace_mask?traceMask=0",
    "stmk",
    "no_such_command",
];

/// One HTTP/1.1 exchange: the status code, the headers (lower-cased names) and the body.
fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to the HTTP port");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn json_of(addr: SocketAddr, cmd: &str) -> Value {
    let (status, head, body) = http(addr, "GET", &format!("/commands/{cmd}"));
    assert_eq!(status, 200, "{cmd}: {head}\n{body}");
    assert!(head.contains("content-type: application/json"), "{cmd}: {head}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{cmd}: not JSON ({e}):\n{body}"))
}

/// The JSON type of each field, recursively; a non-empty array by its first element; keys that
/// are numbers (session ids, expiry times) as `<number>`.
fn shape(v: &Value) -> Value {
    let key = |k: &String| {
        if !k.is_empty() && k.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()) {
            "<number>".to_string()
        } else {
            k.clone()
        }
    };
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (key(k), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) if n.is_f64() => "float".into(),
        Value::Number(_) => "integer".into(),
        Value::String(_) => "string".into(),
        Value::Null => "null".into(),
    }
}

/// Apache's class path with the servlet API added, so that its AdminServer (Jetty) starts.
const SERVLET_JAR: &str = "/usr/share/java/servlet-api.jar";

#[test]
fn every_command_has_apaches_fields_and_types() {
    assert_apache_installed();
    assert!(
        std::path::Path::new(SERVLET_JAR).exists(),
        "{SERVLET_JAR} is missing: install Debian's libservlet-api-java (./test.sh does)"
    );
    let (ap, zp) = (free_port(), free_port());
    let admin = |port: u16| {
        format!("admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}")
    };
    let apache = start(Target::Apache, &admin(ap));
    let zkrs = start(Target::Zkrs, &admin(zp));
    let mut clients = Vec::new();
    for s in [&apache, &zkrs] {
        let mut c = RawClient::connect(s.addr(), 30_000);
        assert_eq!(c.create("/w", b"abc", CreateMode::Persistent).err(), ErrorCode::Ok);
        assert_eq!(c.create("/w/e", b"", CreateMode::Ephemeral).err(), ErrorCode::Ok);
        assert_eq!(c.get_data("/w", true).err(), ErrorCode::Ok);
        clients.push(c); // keeps the session, its ephemeral node and its watch
    }
    let (a_addr, z_addr) = (SocketAddr::from(([127, 0, 0, 1], ap)), SocketAddr::from(([127, 0, 0, 1], zp)));
    for cmd in COMMANDS {
        let (a, z) = (json_of(a_addr, cmd), json_of(z_addr, cmd));
        let name = cmd.split('?').next().unwrap_or(cmd);
        assert_eq!(z["command"], a["command"], "{name}: command\napache {a}\nzkrs {z}");
        assert_eq!(z["error"], a["error"], "{name}: error\napache {a}\nzkrs {z}");
        assert!(z.get("command").is_some() && z.get("error").is_some(), "{name}: {z}");
        let (sa, sz) = (shape(&a), shape(&z));
        match name {
            // Apache's metrics beyond what zkrs keeps: every one zkrs has is there with Apache's
            // type, and zkrs's own are the only others.
            "mntr" => {}
            _ => assert_eq!(sz, sa, "{name}: fields and types\napache {a:#}\nzkrs {z:#}"),
        }
    }
    // monitor: zkrs's keys are Apache's (same types) plus zkrs's own.
    let (a, z) = (json_of(a_addr, "monitor"), json_of(z_addr, "monitor"));
    let zkrs_own = support::ZKRS_ONLY_METRICS;
    for (k, v) in z.as_object().unwrap() {
        match a.get(k) {
            Some(av) => assert_eq!(shape(v), shape(av), "monitor {k}"),
            None => assert!(zkrs_own.contains(&k.as_str()), "monitor {k} is neither Apache's nor zkrs's own"),
        }
    }
    for k in ["znode_count", "watch_count", "ephemerals_count", "num_alive_connections", "global_sessions"] {
        assert_eq!(z[k], a[k], "monitor {k}: same state, same value");
    }
    // environment and system_properties: the entries a process without a JVM has, by Apache's
    // names.
    for cmd in ["environment", "system_properties"] {
        let (a, z) = (json_of(a_addr, cmd), json_of(z_addr, cmd));
        for (k, v) in z.as_object().unwrap() {
            if cmd == "system_properties" && (k == "zookeeper.version" || k == "host.name") {
                continue; // Apache's are environment entries, not JVM properties
            }
            assert!(a.get(k).is_some(), "{cmd}: {k} is not Apache's");
            assert!(v.is_string() || v.is_null(), "{cmd}: {k} {v}");
        }
    }
    // The same state shows the same values.
    for (cmd, field) in [
        ("dump", "session_id_to_ephemeral_paths"),
        ("watch_summary", "num_paths"),
        ("watch_summary", "num_total_watches"),
        ("server_stats", "node_count"),
    ] {
        let (a, z) = (json_of(a_addr, cmd), json_of(z_addr, cmd));
        let values = |v: &Value| match &v[field] {
            // Session ids differ between the servers; the paths under them do not.
            Value::Object(m) => m.values().cloned().collect::<Vec<_>>(),
            other => vec![other.clone()],
        };
        assert_eq!(values(&z), values(&a), "{cmd} {field}");
    }
    // dirs and srvr measure where zkrs keeps its log (a preallocated segment by now).
    let dirs = json_of(z_addr, "dirs");
    assert!(dirs["logdir_size"].as_u64() > Some(0), "{dirs}");
    let srvr = json_of(z_addr, "srvr");
    assert!(srvr["server_stats"]["log_dir_size"].as_u64() > Some(0), "{srvr}");
    // crst above reset the connection's last operation ("NA" then, as Apache): one more read.
    assert_eq!(clients[1].get_data("/w", false).err(), ErrorCode::Ok);
    let z = json_of(z_addr, "connections");
    let conn = &z["connections"][0];
    assert_eq!(
        conn["session_id"].as_i64(),
        Some(clients[1].session.session_id),
        "cons: the session's id, decimal"
    );
    assert_eq!(conn["last_operation"], "GETD");

    // The command URL lists the primary names as Apache does; TRACE is refused.
    let (status, _, a_list) = http(a_addr, "GET", "/commands");
    assert_eq!(status, 200);
    let (status, head, mut z_list) = http(z_addr, "GET", "/commands");
    assert_eq!(status, 200);
    assert!(head.contains("text/html"), "{head}");
    // zkrs's additions: Apache 3.9's `snapshot` and `restore`, ClickHouse Keeper's `csnp`,
    // `lgif`, `ydld`, `rqld` and `rcvr`.
    for name in [
        "create_snapshot",
        "force_recovery",
        "log_info",
        "request_leadership",
        "snapshot",
        "restore",
        "yield_leadership",
    ] {
        let link = format!("<a href=\"/commands/{name}\">{name}</a>\n<br/>\n");
        assert!(z_list.contains(&link), "{name} listed: {z_list}");
        z_list = z_list.replace(&link, "");
    }
    assert_eq!(z_list, a_list, "the command listing");
    assert_eq!(http(z_addr, "TRACE", "/commands/ruok").0, 403);
    assert_eq!(http(z_addr, "GET", "/nowhere").0, 404);
    let (status, _, body) = http(z_addr, "HEAD", "/commands/ruok");
    assert_eq!((status, body.as_str()), (200, ""));
    drop(clients);
}

#[test]
fn ready_standalone_and_while_electing() {
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let peers = format!(
        "initLimit=5\nsyncLimit=2\nserver.1=127.0.0.1:{p1}:{p2}\nserver.2=127.0.0.1:{p3}:{}",
        free_port()
    );
    // Standalone: serving at once.
    let admin_port = free_port();
    let standalone = start(Target::Zkrs, &format!("admin.enableServer=true\nadmin.serverPort={admin_port}"));
    let addr = SocketAddr::from(([127, 0, 0, 1], admin_port));
    let (status, _, body) = http(addr, "GET", "/ready");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["details"]["role"], "standalone");
    assert_eq!(v["details"]["hasLeader"], true);
    drop(standalone);

    // One member of a two-server ensemble whose peer never starts: it elects forever, so it is
    // not ready, and the commands that need a serving server say so.
    let dir = tempfile::Builder::new().prefix("zkrs-test-").tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/myid"), "1").unwrap();
    let port = free_port();
    let admin_port = free_port();
    let cfg = format!(
        "tickTime=200\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
         admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin_port}\n{peers}\n",
        dir.path().join("data").display()
    );
    let cfg_path = dir.path().join("zoo.cfg");
    std::fs::write(&cfg_path, cfg).unwrap();
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let mut child = std::process::Command::new(zkrs_binary())
        .arg(&cfg_path)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], admin_port));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (status, body) = loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            let (status, _, body) = http(addr, "GET", "/ready");
            break (status, body);
        }
        assert!(std::time::Instant::now() < deadline, "{}", server_log(dir.path()));
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "fail");
    assert_eq!(v["details"]["role"], "looking");
    let srvr = json_of(addr, "srvr");
    assert_eq!(srvr["error"], "This ZooKeeper instance is not currently serving requests", "{srvr}");
    assert_eq!(srvr["command"], "srvr");
    let zab = json_of(addr, "zabstate");
    assert_eq!(zab["zabstate"], "election", "{zab}");
    assert_eq!(zab["myid"], 1);
    let _ = child.kill();
    let _ = child.wait();
}

/// The non-JVM series the Grafana dashboard published for Apache ZooKeeper's Prometheus provider
/// (grafana.com dashboard 10465, as catalogued from its panels) queries, with the type Apache's
/// provider gives each (ServerMetrics: counters and summaries; the rest are gauges). The quorum
/// ones are checked on an ensemble ([`metrics_of_an_ensemble_member`]), `digest_mismatches_count`
/// among them (a standalone server keeps no digest); the dashboard's JVM panels (`jvm_*`) and
/// `unrecoverable_error_count` (a zkrs server stops on such an error) stay empty.
const DASHBOARD: &[(&str, &str)] = &[
    ("num_alive_connections", "gauge"),
    ("open_file_descriptor_count", "gauge"),
    ("outstanding_requests", "gauge"),
    ("max_latency", "gauge"),
    ("avg_latency", "gauge"),
    ("min_latency", "gauge"),
    ("global_sessions", "gauge"),
    ("local_sessions", "gauge"),
    ("znode_count", "gauge"),
    ("ephemerals_count", "gauge"),
    ("approximate_data_size", "gauge"),
    ("watch_count", "gauge"),
    ("packets_received", "gauge"),
    ("packets_sent", "gauge"),
    ("connection_rejected", "counter"),
    ("connection_drop_count", "counter"),
    ("election_time", "summary"),
    ("commit_count", "counter"),
    ("snap_count", "counter"),
    ("proposal_count", "counter"),
    ("fsynctime", "summary"),
    ("snapshottime", "summary"),
];

/// `/metrics` parsed by the Prometheus project's own Python client (Debian's
/// python3-prometheus-client, its parser of the text format Apache's provider serves): family
/// name -> [type, {sample name and labels (`fsynctime{quantile="0.5"}`): value, "NaN" for NaN}].
fn parsed_metrics(addr: SocketAddr) -> (Value, String) {
    let (status, head, text) = http(addr, "GET", "/metrics");
    assert_eq!(status, 200, "{head}\n{text}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    let script = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families as parse\n\
        def label(s):\n    kvs = ','.join('%s=\"%s\"' % kv for kv in sorted(s.labels.items()))\n    \
        return '{' + kvs + '}' if kvs else ''\n\
        out = {}\n\
        for f in parse(sys.stdin.read()):\n    \
        out[f.name] = [f.type, {s.name + label(s): s.value if s.value == s.value else 'NaN' for s in f.samples}]\n\
        print(json.dumps(out))\n";
    let mut py = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (./test.sh installs python3-prometheus-client)");
    py.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = py.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the parser refused the text:\n{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), text)
}

/// A sample's value in [`parsed_metrics`]' families, -1 when absent. The parser keeps counters
/// as `<name>_total` in its own model whatever the text says; the text itself is checked for the
/// bare series names by [`assert_bare_counters`].
fn sample_value(families: &Value, family: &str, sample: &str) -> f64 {
    let samples = &families[family][1];
    samples[sample].as_f64().or_else(|| samples[format!("{sample}_total")].as_f64()).unwrap_or(-1.0)
}

/// Every counter the dashboard queries is written under its bare name, as Apache's provider
/// writes it (`commit_count 3`, not `commit_count_total 3`): the series its queries select.
fn assert_bare_counters(text: &str) {
    for (name, _) in DASHBOARD.iter().filter(|(_, kind)| *kind == "counter") {
        assert!(
            text.lines().any(|l| l.strip_prefix(name).is_some_and(|v| v.starts_with(' '))),
            "{name}:\n{text}"
        );
        assert!(!text.contains(&format!("{name}_total")), "{name}:\n{text}");
    }
}

#[test]
fn metrics_parse_with_apaches_names_and_types() {
    let (admin_port, metrics_port) = (free_port(), free_port());
    let zkrs = start(
        Target::Zkrs,
        &format!(
            "admin.enableServer=true\nadmin.serverPort={admin_port}\n\
             metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
             metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={metrics_port}\nsnapCount=2\n\
             maxClientCnxns=2"
        ),
    );
    let mut c = RawClient::connect(zkrs.addr(), 30_000);
    assert_eq!(c.create("/m", b"x", CreateMode::Persistent).err(), ErrorCode::Ok);
    assert_eq!(c.get_data("/m", false).err(), ErrorCode::Ok);
    let metrics_addr = SocketAddr::from(([127, 0, 0, 1], metrics_port));
    // snapCount=2: a snapshot follows within a few transactions.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    let snapshots_timed = |text: &str| {
        text.lines().any(|l| l.starts_with("snapshottime_count ") && l != "snapshottime_count 0")
    };
    while !snapshots_timed(&http(metrics_addr, "GET", "/metrics").2) {
        assert!(std::time::Instant::now() < deadline, "no snapshot timed");
        assert_eq!(c.set_data("/m", b"y", -1).err(), ErrorCode::Ok);
        n += 1;
        std::thread::sleep(Duration::from_millis(20 * n.min(10)));
    }
    // With maxClientCnxns=2, a third connection from this address is refused at once.
    let second = TcpStream::connect(zkrs.addr()).unwrap();
    let mut third = TcpStream::connect(zkrs.addr()).unwrap();
    third.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let asked = std::time::Instant::now();
    assert_eq!(third.read(&mut [0; 1]).unwrap_or(1), 0, "the third connection is closed");
    assert!(asked.elapsed() < Duration::from_secs(2), "closed at once, not at the handshake's timeout");
    drop((second, third));
    // A client that goes away without closing its session is a drop. (The second connection's
    // slot is free once the server saw it close.)
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let request = ConnectRequest { time_out: 30_000, read_only: Some(false), ..Default::default() };
    // Each try made before the server saw the second connection close is refused too.
    let mut refused_tries = 0.0;
    let dropped = loop {
        if let Some(client) = RawClient::connect_with(zkrs.addr(), request.clone()) {
            break client;
        }
        refused_tries += 1.0;
        assert!(std::time::Instant::now() < deadline, "no connection slot came free");
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(dropped);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (families, text) = loop {
        let (f, text) = parsed_metrics(metrics_addr);
        if f["connection_drop_count"][1]["connection_drop_count"].as_f64() >= Some(1.0)
            || std::time::Instant::now() > deadline
        {
            break (f, text);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for (name, kind) in DASHBOARD {
        assert_eq!(families[name][0], *kind, "{name} in:\n{text}");
    }
    assert_bare_counters(&text);
    // Apache's other gauges (ZooKeeperServer's registerGauge).
    for name in ["uptime", "max_file_descriptor_count", "auth_failed_count"] {
        assert_eq!(families[name][0], "gauge", "{name} in:\n{text}");
    }
    let value = |family: &str, sample: &str| sample_value(&families, family, sample);
    assert_eq!(value("znode_count", "znode_count"), 6.0, "/, /zookeeper, its config and quota, /m");
    assert_eq!(value("num_alive_connections", "num_alive_connections"), 1.0, "{text}");
    // Measured, not filled in: every write was synced, each snapshot timed; a standalone server
    // elects, proposes and commits nothing.
    assert!(value("fsynctime", "fsynctime_count") >= 2.0, "{text}");
    assert!(value("fsynctime", "fsynctime_sum") > 0.0, "{text}");
    assert!(value("snapshottime", "snapshottime_count") >= 1.0, "{text}");
    assert_eq!(value("election_time", "election_time_count"), 0.0, "{text}");
    // Quantiles over the recent window, as Apache's: the median of the basic summaries, 0.5,
    // 0.9 and 0.99 of the request latencies; none while nothing was observed (NaN).
    let fsync_median = value("fsynctime", "fsynctime{quantile=\"0.5\"}");
    assert!(fsync_median > 0.0 && fsync_median <= value("fsynctime", "fsynctime_sum"), "{text}");
    assert!(value("snapshottime", "snapshottime{quantile=\"0.5\"}") > 0.0, "{text}");
    assert_eq!(families["election_time"][1]["election_time{quantile=\"0.5\"}"], "NaN", "{text}");
    for name in ["readlatency", "updatelatency"] {
        assert_eq!(families[name][0], "summary", "{name}:\n{text}");
        let q = |at: &str| value(name, &format!("{name}{{quantile=\"{at}\"}}"));
        assert!(0.0 <= q("0.5") && q("0.5") <= q("0.9") && q("0.9") <= q("0.99"), "{name}:\n{text}");
        assert!(value(name, &format!("{name}_count")) >= 1.0, "{name}:\n{text}");
    }
    assert!(
        !text.contains("avg_fsynctime") && !text.contains("p99_readlatency"),
        "mntr's lines of a summary:\n{text}"
    );
    assert_eq!(value("commit_count", "commit_count"), 0.0, "{text}");
    assert_eq!(value("connection_drop_count", "connection_drop_count"), 1.0, "{text}");
    let rejected = value("connection_rejected", "connection_rejected");
    assert!((1.0..=1.0 + refused_tries).contains(&rejected), "{refused_tries} refused tries:\n{text}");
    for absent in
        ["quorum_size", "leader_uptime", "learners", "unrecoverable_error_count", "digest_mismatches_count"]
    {
        assert!(families.get(absent).is_none(), "{absent} standalone:\n{text}");
    }
    // zkrs's own.
    assert_eq!(families["log_disk_full"][0], "gauge");
    assert_eq!(families["writes_refused_disk_full"][0], "counter");
    assert_eq!(value("writes_refused_disk_full", "writes_refused_disk_full"), 0.0);
    assert_eq!(families["zkrs_snapshot_seconds"][0], "histogram");
    assert_eq!(families["zkrs_log_persist_seconds"][0], "histogram", "{text}");
    // The session's creation and the create, each made durable before its answer.
    assert!(value("zkrs_log_persist_seconds", "zkrs_log_persist_seconds_count") >= 2.0, "{text}");
    assert!(value("zkrs_log_persist_seconds", "zkrs_log_persist_seconds_sum") > 0.0, "{text}");
    assert_eq!(http(metrics_addr, "GET", "/other").0, 404);
    drop(c);
}

/// Gives member `i` its own AdminServer port.
fn admin_on(e: &support::ensemble::Ensemble, i: usize) -> SocketAddr {
    use std::io::Write as _;
    let port = support::ensemble::stable_port();
    let mut f = std::fs::OpenOptions::new().append(true).open(e.members[i].dir.join("zoo.cfg")).unwrap();
    write!(f, "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n").unwrap();
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[test]
fn ensemble_commands_match_an_apache_member_and_ready_flips() {
    use support::ensemble::{Ensemble, Kind};
    assert_apache_installed();
    let mut e = Ensemble::configure(&[Kind::Apache, Kind::Zkrs, Kind::Zkrs]);
    let admin: Vec<SocketAddr> = (0..3).map(|i| admin_on(&e, i)).collect();
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    // /ready is zkrs's (Apache has none).
    for (i, &addr) in admin.iter().enumerate().skip(1) {
        let (status, _, body) = http(addr, "GET", "/ready");
        assert_eq!(status, 200, "member {i}: {body}");
        let ready: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(ready["details"]["hasLeader"], true, "member {i}: {body}");
    }
    // A zkrs follower, compared with Apache's member: a follower too, or the leader (whose srvr
    // adds the leader-only proposal_stats).
    let zkrs = if leader == 1 { 2 } else { 1 };
    for cmd in ["leader", "voting_view", "zabstate", "observers", "server_stats", "stats", "configuration"] {
        let (mut a, z) = (json_of(admin[0], cmd), json_of(admin[zkrs], cmd));
        if leader == 0 {
            a.as_object_mut().unwrap().remove("proposal_stats");
        }
        assert_eq!(shape(&z), shape(&a), "{cmd}: fields and types\napache {a:#}\nzkrs {z:#}");
    }
    assert!(json_of(admin[leader], "server_stats").get("proposal_stats").is_some(), "the leader's srvr");
    for (i, &addr) in admin.iter().enumerate() {
        let l = json_of(addr, "leader");
        assert_eq!(l["leader_id"], leader as i64 + 1, "member {i}: {l}");
        assert_eq!(l["is_leader"], i == leader, "member {i}: {l}");
        let z = json_of(addr, "zabstate");
        assert_eq!(z["zabstate"], "broadcast", "member {i}: {z}");
        assert_eq!(z["myid"], i as i64 + 1, "member {i}: {z}");
    }
    // The same view, each server filling in its own client address.
    let mut views = Vec::new();
    for i in [0, zkrs] {
        let mut v = json_of(admin[i], "voting_view");
        let own = &mut v["current_config"][(i + 1).to_string()]["client_address"];
        assert_eq!(*own, e.members[i].client.to_string(), "member {i}'s own client address");
        *own = "".into();
        views.push(v["current_config"].clone());
    }
    assert_eq!(views[1], views[0], "voting_view");

    // Left alone, a zkrs member stops serving: not ready.
    let others: Vec<usize> = (0..3).filter(|&i| i != zkrs).collect();
    for i in others {
        e.kill(i);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _, body) = http(admin[zkrs], "GET", "/ready");
        if status == 503 {
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["status"], "fail");
            assert_eq!(v["details"]["hasLeader"], false);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still ready alone: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ready_is_503_on_a_leader_that_takes_no_clients() {
    use support::ensemble::{Ensemble, Kind};
    let mut e = Ensemble::configure(&[Kind::Zkrs; 3]);
    e.append_config("leaderServes=no\n");
    let admin: Vec<SocketAddr> = (0..3).map(|i| admin_on(&e, i)).collect();
    for i in 0..3 {
        e.launch(i);
    }
    // The leader answers srvr as not serving: it is the one that is not a follower.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let leader = loop {
        let modes: Vec<Option<String>> = (0..3).map(|i| e.mode(i)).collect();
        let followers: Vec<usize> = (0..3).filter(|&i| modes[i].as_deref() == Some("follower")).collect();
        if followers.len() == 2 {
            break (0..3).find(|i| !followers.contains(i)).unwrap();
        }
        assert!(std::time::Instant::now() < deadline, "no two followers: {modes:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for (i, &addr) in admin.iter().enumerate() {
        let (status, _, body) = http(addr, "GET", "/ready");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["details"]["hasLeader"], true, "member {i}: {body}");
        if i == leader {
            assert_eq!((status, v["details"]["role"].as_str()), (503, Some("leader")), "{body}");
        } else {
            assert_eq!((status, v["details"]["role"].as_str()), (200, Some("follower")), "{body}");
        }
    }
}

/// Gives member `i` its own Prometheus port.
fn metrics_on(e: &support::ensemble::Ensemble, i: usize) -> SocketAddr {
    use std::io::Write as _;
    let port = support::ensemble::stable_port();
    let mut f = std::fs::OpenOptions::new().append(true).open(e.members[i].dir.join("zoo.cfg")).unwrap();
    write!(
        f,
        "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
         metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={port}\n"
    )
    .unwrap();
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The dashboard's quorum series on a three-server ensemble, counted as Apache counts them: the
/// leader proposes and commits every write and synced each follower once; every member elected
/// once and knows the quorum's size; only the leader has an uptime as leader.
#[test]
fn metrics_of_an_ensemble_member() {
    use support::ensemble::{Ensemble, Kind};
    let mut e = Ensemble::configure(&[Kind::Zkrs; 3]);
    let metrics: Vec<SocketAddr> = (0..3).map(|i| metrics_on(&e, i)).collect();
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    let mut c = RawClient::connect(e.members[leader].client, 30_000);
    for i in 0..5 {
        assert_eq!(c.create(&format!("/q{i}"), b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    let value = sample_value;
    // Under load a follower may still be syncing when the leader is found: wait for both.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (lf, text) = loop {
        let (f, text) = parsed_metrics(metrics[leader]);
        if value(&f, "learners", "learners") == 2.0 && value(&f, "commit_count", "commit_count") >= 6.0 {
            break (f, text);
        }
        assert!(std::time::Instant::now() < deadline, "the leader never had both learners:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for (name, kind) in DASHBOARD.iter().chain(&[("quorum_size", "gauge"), ("leader_uptime", "gauge")]) {
        assert_eq!(lf[name][0], *kind, "{name} on the leader:\n{text}");
    }
    for name in ["learners", "synced_observers"] {
        assert_eq!(lf[name][0], "gauge", "{name} on the leader:\n{text}");
    }
    assert_bare_counters(&text);
    assert_eq!(value(&lf, "quorum_size", "quorum_size"), 3.0, "{text}");
    assert!(value(&lf, "leader_uptime", "leader_uptime") >= 0.0, "{text}");
    assert_eq!(value(&lf, "learners", "learners"), 2.0, "{text}");
    // The session and the five creates at least (the followers' syncs may add none).
    assert!(value(&lf, "proposal_count", "proposal_count") >= 6.0, "{text}");
    assert!(value(&lf, "commit_count", "commit_count") >= 6.0, "{text}");
    let syncs = value(&lf, "snap_count", "snap_count") + value(&lf, "diff_count", "diff_count");
    assert!(syncs >= 2.0, "each follower synced: {text}");
    assert!(value(&lf, "looking_count", "looking_count") >= 1.0, "{text}");
    assert!(value(&lf, "election_time", "election_time_count") >= 1.0, "{text}");
    assert_eq!(lf["digest_mismatches_count"][0], "counter", "{text}");
    assert_eq!(value(&lf, "digest_mismatches_count", "digest_mismatches_count"), 0.0, "{text}");
    for i in (0..3).filter(|&i| i != leader) {
        let (f, text) = loop {
            let (f, text) = parsed_metrics(metrics[i]);
            if f.get("quorum_size").is_some() {
                break (f, text);
            }
            assert!(std::time::Instant::now() < deadline, "member {i} never served:\n{text}");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(value(&f, "quorum_size", "quorum_size"), 3.0, "member {i}: {text}");
        assert!(f.get("leader_uptime").is_none(), "member {i} does not lead: {text}");
        assert_eq!(value(&f, "commit_count", "commit_count"), 0.0, "member {i} sends no COMMIT: {text}");
        assert!(value(&f, "election_time", "election_time_count") >= 1.0, "member {i}: {text}");
        assert!(value(&f, "fsynctime", "fsynctime_count") >= 1.0, "member {i} logs proposals: {text}");
        let mismatches = value(&f, "digest_mismatches_count", "digest_mismatches_count");
        assert_eq!(mismatches, 0.0, "member {i} checked its leader's digests: {text}");
    }
    drop(c);
}
