//! Four-letter words answer as Apache ZooKeeper 3.8 answers them: the same lines in the same
//! order, with values that differ only where the servers' states do (versions, ports, timings).
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use support::client::RawClient;
use support::*;
use zk_proto::*;

/// The label of each line ("Latency min/avg/max", "zk_znode_count", ...), for comparing shapes.
fn labels(text: &str, sep: char) -> Vec<String> {
    text.lines().map(|l| l.split(sep).next().unwrap_or("").to_string()).collect()
}

fn value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim_start_matches([':', '\t', ' ']))
        .unwrap_or_else(|| panic!("{key} missing in:\n{text}"))
}

#[test]
fn words_match_apache() {
    let apache = start(Target::Apache, "");
    let zkrs = start(Target::Zkrs, "");
    for s in [&apache, &zkrs] {
        let mut c = RawClient::connect(s.addr(), 30_000);
        assert_eq!(c.create("/w", b"abc", CreateMode::Persistent).err(), ErrorCode::Ok);
        assert_eq!(c.create("/w/e", b"", CreateMode::Ephemeral).err(), ErrorCode::Ok);
        assert_eq!(c.get_data("/w", true).err(), ErrorCode::Ok);
        assert_eq!(c.children2("/w", true).err(), ErrorCode::Ok);
        std::mem::forget(c); // keep the session and its watches while the words are asked
    }
    assert_eq!(zkrs.four_letter("ruok"), apache.four_letter("ruok"));
    assert_eq!(zkrs.four_letter("isro"), apache.four_letter("isro"));

    let (a, z) = (apache.four_letter("srvr"), zkrs.four_letter("srvr"));
    assert_eq!(labels(&z, ':'), labels(&a, ':'), "srvr lines\napache:\n{a}\nzkrs:\n{z}");
    for key in ["Zxid", "Mode", "Node count", "Connections"] {
        assert_eq!(value(&z, key), value(&a, key), "srvr {key}");
    }

    let (a, z) = (apache.four_letter("stat"), zkrs.four_letter("stat"));
    assert_eq!(value(&z, "Node count"), value(&a, "Node count"));
    assert!(z.contains("Clients:\n /127.0.0.1:"), "{z}");

    let (a, z) = (apache.four_letter("wchs"), zkrs.four_letter("wchs"));
    assert_eq!(z, a, "wchs");
    let (a, z) = (apache.four_letter("wchp"), zkrs.four_letter("wchp"));
    assert_eq!(labels(&z, '\t'), labels(&a, '\t'), "wchp paths\napache:\n{a}\nzkrs:\n{z}");

    let (a, z) = (apache.four_letter("mntr"), zkrs.four_letter("mntr"));
    for key in
        ["zk_server_state", "zk_znode_count", "zk_ephemerals_count", "zk_watch_count", "zk_global_sessions"]
    {
        assert_eq!(value(&z, key), value(&a, key), "mntr {key}\napache:\n{a}\nzkrs:\n{z}");
    }
    assert_eq!(value(&z, "zk_approximate_data_size"), value(&a, "zk_approximate_data_size"));

    // conf: the same keys in the same order (paths and ports differ).
    let (a, z) = (apache.four_letter("conf"), zkrs.four_letter("conf"));
    assert_eq!(labels(&z, '='), labels(&a, '='), "conf keys\napache:\n{a}\nzkrs:\n{z}");

    assert_eq!(zkrs.four_letter("crst"), apache.four_letter("crst"));
    assert_eq!(zkrs.four_letter("srst"), apache.four_letter("srst"));
}

#[test]
fn whitelist_refusal_matches_apache() {
    // Without 4lw.commands.whitelist only srvr is allowed.
    let cfg = |t| {
        let s = start(t, "");
        // The harness allows every word; restart with the default whitelist.
        let text =
            std::fs::read_to_string(s.config_path()).unwrap().replace("4lw.commands.whitelist=*\n", "");
        std::fs::write(s.config_path(), text).unwrap();
        s
    };
    let mut apache = cfg(Target::Apache);
    apache.restart();
    let mut zkrs = cfg(Target::Zkrs);
    zkrs.restart();
    for word in ["ruok", "stat", "mntr", "conf"] {
        assert_eq!(zkrs.four_letter(word), apache.four_letter(word), "{word}");
    }
    assert!(zkrs.four_letter("srvr").starts_with("Zookeeper version:"));
}

/// Apache's metric names zkrs does not produce, from docs/metrics.md's "Not produced" table:
/// (name, kind).
fn not_produced() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md")).unwrap();
    let section = doc.split("## Not produced").nth(1).expect("docs/metrics.md has its Not produced section");
    let mut out = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (names, kind) = (cells[1], cells[2]);
        assert!(["counter", "gauge", "summary", "summary set"].contains(&kind), "{row}");
        for name in names.split(',') {
            out.push((name.trim().trim_matches('`').to_string(), kind.to_string()));
        }
    }
    out
}

/// The `mntr` keys (without `zk_`) of a standalone server.
fn mntr_keys(s: &ServerProc) -> std::collections::BTreeSet<String> {
    let text = s.four_letter("mntr");
    text.lines().map(|l| l.split('\t').next().unwrap().trim_start_matches("zk_").to_string()).collect()
}

#[test]
fn mntr_names_are_apaches() {
    let apache = start(Target::Apache, "minSessionTimeout=1000");
    let zkrs = start(Target::Zkrs, "minSessionTimeout=1000");
    for s in [&apache, &zkrs] {
        let mut c = RawClient::connect(s.addr(), 30_000);
        assert_eq!(c.create("/n", b"x", CreateMode::Persistent).err(), ErrorCode::Ok);
        assert_eq!(c.get_data("/n", false).err(), ErrorCode::Ok);
        // A session left to expire (its connection closed, never the session).
        drop(RawClient::connect(s.addr(), 1_000));
    }
    // Both expire it (within a tick or two) and count it.
    for s in [&apache, &zkrs] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let text = s.four_letter("mntr");
            if value(&text, "zk_stale_sessions_expired") == "1" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no session expired:\n{text}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    let (a, z) = (mntr_keys(&apache), mntr_keys(&zkrs));
    // zkrs's own lines, and one Apache prints on a leader only.
    let zkrs_only = support::ZKRS_ONLY_METRICS;
    let extra: Vec<&String> =
        z.iter().filter(|k| !a.contains(*k) && !zkrs_only.contains(&k.as_str())).collect();
    assert!(extra.is_empty(), "zkrs prints names Apache does not: {extra:?}");
    let listed = not_produced();
    // The lines a listed name stands for.
    const STATS: [&str; 9] = ["avg", "min", "max", "cnt", "sum", "p50", "p95", "p99", "p999"];
    let lines_of = |name: &str, kind: &str| -> Vec<String> {
        match kind {
            "summary" => {
                STATS.iter().map(|stat| format!("{stat}_{name}")).filter(|k| a.contains(k)).collect()
            }
            // `<stat>_<key>_<name>`, for each key Apache saw.
            "summary set" => a
                .iter()
                .filter(|k| {
                    k.strip_suffix(&format!("_{name}"))
                        .and_then(|rest| rest.split_once('_'))
                        .is_some_and(|(stat, key)| STATS.contains(&stat) && !key.is_empty())
                })
                .cloned()
                .collect(),
            _ => vec![name.to_string()],
        }
    };
    let mut covered = std::collections::BTreeSet::new();
    for (name, kind) in &listed {
        let lines = lines_of(name, kind);
        assert!(
            !lines.is_empty() && lines.iter().all(|k| a.contains(k)),
            "{name} ({kind}): not in Apache's mntr"
        );
        assert!(
            lines.iter().all(|k| !z.contains(k)),
            "{name} ({kind}) is listed as not produced, but zkrs prints it"
        );
        covered.extend(lines);
    }
    let missing: Vec<&String> = a.iter().filter(|k| !z.contains(*k) && !covered.contains(*k)).collect();
    assert!(missing.is_empty(), "Apache's mntr names zkrs lacks, not listed in docs/metrics.md: {missing:?}");
    // What zkrs prints of Apache's summaries carries the same lines, percentiles included.
    for base in [
        "fsynctime",
        "snapshottime",
        "election_time",
        "readlatency",
        "updatelatency",
        "dbinittime",
        "startup_snap_load_time",
        "startup_txns_load_time",
        "startup_txns_loaded",
    ] {
        let of = |keys: &std::collections::BTreeSet<String>| -> Vec<String> {
            keys.iter().filter(|k| k.ends_with(&format!("_{base}"))).cloned().collect()
        };
        assert_eq!(of(&z), of(&a), "{base}");
    }
    // A fresh data directory: loaded once, nothing replayed, on both.
    for key in ["zk_cnt_dbinittime", "zk_cnt_startup_snap_load_time", "zk_cnt_startup_txns_loaded"] {
        let (a, z) = (apache.four_letter("mntr"), zkrs.four_letter("mntr"));
        assert_eq!(value(&z, key), value(&a, key), "{key}\napache:\n{a}\nzkrs:\n{z}");
    }
    // Measured: the create was a transaction, the get a read.
    let text = zkrs.four_letter("mntr");
    let cnt = |key: &str| value(&text, key).parse::<u64>().unwrap();
    assert!(cnt("zk_cnt_updatelatency") >= 1, "the create:\n{text}");
    assert!(cnt("zk_cnt_readlatency") >= 1, "{text}");
    assert!(cnt("zk_cnt_fsynctime") >= 1, "{text}");
    // srst zeroes the metrics as Apache's does, counters and summaries alike.
    for s in [&apache, &zkrs] {
        s.four_letter("srst");
        let text = s.four_letter("mntr");
        for key in
            ["zk_stale_sessions_expired", "zk_cnt_fsynctime", "zk_cnt_updatelatency", "zk_cnt_readlatency"]
        {
            assert_eq!(value(&text, key), "0", "{key} after srst on {:?}:\n{text}", s.target);
        }
    }
}

/// A restart that replays logged transactions counts the replay, on both servers alike.
#[test]
fn startup_replay_is_counted_as_apache_counts() {
    let mut apache = start(Target::Apache, "");
    let mut zkrs = start(Target::Zkrs, "");
    for s in [&mut apache, &mut zkrs] {
        let mut c = RawClient::connect(s.addr(), 30_000);
        for i in 0..3 {
            assert_eq!(c.create(&format!("/r{i}"), b"", CreateMode::Persistent).err(), ErrorCode::Ok);
        }
        drop(c);
        s.restart();
        let text = s.four_letter("mntr");
        assert_eq!(value(&text, "zk_cnt_dbinittime"), "1", "{:?}:\n{text}", s.target);
        assert_eq!(value(&text, "zk_cnt_startup_txns_loaded"), "1", "{:?}:\n{text}", s.target);
        assert_eq!(value(&text, "zk_cnt_startup_txns_load_time"), "1", "{:?}:\n{text}", s.target);
        // The session, the three creates, and whatever closed the session before the kill.
        let loaded: u64 = value(&text, "zk_sum_startup_txns_loaded").parse().unwrap();
        assert!(loaded >= 4, "{:?} replayed {loaded}:\n{text}", s.target);
    }
}
