//! examples-c/: built with its Makefile against include/ and libzkrs, each program run against
//! zkrs-server and its output checked.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::*;

struct Examples {
    dir: tempfile::TempDir,
    hosts: String,
    _server: Server,
}

impl Examples {
    fn exe(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn spawn(&self, name: &str, args: &[&str]) -> Child {
        Command::new(self.exe(name))
            .arg(&self.hosts)
            .args(args)
            .env_remove("LD_LIBRARY_PATH")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn example")
    }

    /// Runs to completion; panics unless it succeeds. Returns stdout+stderr.
    fn run(&self, name: &str, args: &[&str]) -> String {
        let (ok, out) = wait_output(self.spawn(name, args), Duration::from_secs(60));
        assert!(ok, "{name} {args:?} failed:\n{out}");
        out
    }
}

fn setup() -> Examples {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let o = Command::new("make")
        .arg("-C")
        .arg(root.join("examples-c"))
        .arg(format!("LIBDIR={}", libzkrs().parent().unwrap().display()))
        .arg(format!("OUT={}", dir.path().display()))
        .output()
        .expect("make");
    assert!(
        o.status.success(),
        "make:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let server = start(Target::Zkrs);
    Examples { dir, hosts: server.connect_string(), _server: server }
}

/// The programs load libzkrs (through the soname link the Makefile puts next to them), never a
/// system copy of Apache's library.
#[test]
fn examples_build_and_load_libzkrs() {
    let ex = setup();
    let out = Command::new("ldd").arg(ex.exe("group")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("libzookeeper_mt.so.2")).expect("needs libzookeeper_mt.so.2");
    assert!(line.contains(&ex.dir.path().display().to_string()), "{line}");
}

#[test]
fn group_create_join_list_delete() {
    let ex = setup();
    assert!(ex.run("group", &["create", "g"]).contains("created /g"));
    let a = ex.spawn("group", &["join", "g", "alice", "3"]);
    let b = ex.spawn("group", &["join", "g", "bob", "3"]);
    std::thread::sleep(Duration::from_millis(1500));
    let list = ex.run("group", &["list", "g"]);
    assert_eq!(list.lines().collect::<Vec<_>>(), ["alice", "bob"], "{list}");
    let (ok_a, out_a) = wait_output(a, Duration::from_secs(30));
    let (ok_b, _) = wait_output(b, Duration::from_secs(30));
    assert!(ok_a && ok_b && out_a.contains("joined /g/alice"), "{out_a}");
    // Members leave with their sessions.
    assert!(ex.run("group", &["list", "g"]).contains("no members in /g"));
    assert!(ex.run("group", &["delete", "g"]).contains("deleted /g"));
    let (ok, out) = wait_output(ex.spawn("group", &["list", "g"]), Duration::from_secs(30));
    assert!(!ok && out.contains("no node"), "{out}");
}

#[test]
fn config_updater_and_watcher() {
    let ex = setup();
    let watcher = ex.spawn("config", &["watch", "/cfg", "3"]);
    std::thread::sleep(Duration::from_millis(800));
    for v in ["v1", "v2", "v3"] {
        assert!(ex.run("config", &["set", "/cfg", v]).contains(&format!("set /cfg = {v}")));
        std::thread::sleep(Duration::from_millis(400));
    }
    let (ok, out) = wait_output(watcher, Duration::from_secs(30));
    assert!(ok, "{out}");
    let seen: Vec<&str> = out.lines().filter(|l| l.starts_with("/cfg = ")).collect();
    assert_eq!(seen, ["/cfg = v1", "/cfg = v2", "/cfg = v3"], "{out}");
}

/// Timestamps of acquire/release lines would need clocks; instead each contender holds the lock for
/// a while and the combined output must show acquire/release pairs never interleaved.
#[test]
fn lock_is_exclusive() {
    let ex = setup();
    let (tx, rx) = std::sync::mpsc::channel();
    let children: Vec<Child> =
        ["a", "b", "c", "d"].iter().map(|l| ex.spawn("lock", &["/lk", "300", l])).collect();
    // Collect line by line as they appear, across processes, in arrival order.
    let mut readers = Vec::new();
    for mut c in children {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            use std::io::BufRead;
            let out = c.stdout.take().unwrap();
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((std::time::Instant::now(), line));
            }
            c.wait().unwrap().success()
        }));
    }
    drop(tx);
    for r in readers {
        assert!(r.join().unwrap());
    }
    let mut lines: Vec<(std::time::Instant, String)> = rx.iter().collect();
    lines.sort_by_key(|(t, _)| *t);
    let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(text.len(), 8, "{text:?}");
    for pair in text.chunks(2) {
        let who = pair[0].strip_suffix(" acquired").expect("acquire first");
        assert_eq!(pair[1], format!("{who} released"), "{text:?}");
    }
}

/// Lines from several children, in the order they arrived.
fn interleaved(children: Vec<Child>) -> Vec<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut readers = Vec::new();
    for mut c in children {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            use std::io::BufRead;
            let out = c.stdout.take().unwrap();
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((std::time::Instant::now(), line));
            }
            c.wait().unwrap().success()
        }));
    }
    drop(tx);
    for r in readers {
        assert!(r.join().unwrap());
    }
    let mut lines: Vec<(std::time::Instant, String)> = rx.iter().collect();
    lines.sort_by_key(|(t, _)| *t);
    lines.into_iter().map(|(_, l)| l).collect()
}

/// Every candidate leads exactly once, one at a time (a leader steps down before the next one
/// says it leads), in the order they stood (sequence numbers).
#[test]
fn leader_election_one_at_a_time_in_order() {
    let ex = setup();
    let kids: Vec<Child> = ["x", "y", "z"].iter().map(|n| ex.spawn("leader", &["/el", n, "400"])).collect();
    let lines = interleaved(kids);
    let mut stood: Vec<(String, String)> = lines
        .iter()
        .filter_map(|l| l.split_once(" standing as "))
        .map(|(name, node)| (node.to_owned(), name.to_owned()))
        .collect();
    stood.sort();
    let turns: Vec<&String> = lines.iter().filter(|l| !l.contains(" standing as ")).collect();
    assert_eq!(turns.len(), 6, "{lines:?}");
    for (pair, (_, name)) in turns.chunks(2).zip(&stood) {
        assert_eq!(*pair[0], format!("{name} is leader"), "{lines:?}");
        assert_eq!(*pair[1], format!("{name} steps down"), "{lines:?}");
    }
}

#[test]
fn sequence_ids_are_unique_across_clients() {
    let ex = setup();
    let a = ex.spawn("seqid", &["/ids", "20"]);
    let b = ex.spawn("seqid", &["/ids", "20"]);
    let mut ids = Vec::new();
    for c in [a, b] {
        let (ok, out) = wait_output(c, Duration::from_secs(60));
        assert!(ok, "{out}");
        let mine: Vec<i64> =
            out.lines().filter_map(|l| l.strip_prefix("id ")).map(|n| n.parse().unwrap()).collect();
        assert_eq!(mine.len(), 20);
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "increasing per client: {mine:?}");
        ids.extend(mine);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40, "all unique");
}
