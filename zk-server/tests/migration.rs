//! Rolling migration between Apache ZooKeeper 3.8 and zkrs, on real processes (loopback ports):
//! a three-server Apache ensemble holding data, a session with an ephemeral node and a
//! persistent watch, and a client writing throughout, has its servers replaced one at a time by
//! zkrs (same myid, same zoo.cfg, an empty data directory: the newcomer syncs from the leader),
//! followers first and the leader last, as docs/migration.md tells an operator; then back to
//! Apache the same way, with a kazoo client writing too. Nothing acknowledged is lost, the
//! session and its ephemeral survive, the watch keeps firing, and every server's tree is the same
//! after each step.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::ensemble::*;
use zk_client::{acl, AddWatchMode, Client, CreateMode, Error};

/// Stops member `i` as an operator would (SIGTERM), and waits for it to exit.
fn stop_gracefully(e: &mut Ensemble, i: usize) {
    e.signal(i, "TERM");
    let mut child = e.members[i].child.take().expect("the member runs");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until every member serves and reports the same last zxid (the writer is paused).
fn wait_in_step(e: &Ensemble) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let zxids: Vec<Option<i64>> = (0..3).map(|i| e.zxid(i)).collect();
        let serving = (0..3).all(|i| matches!(e.mode(i).as_deref(), Some("leader" | "follower")));
        if serving && zxids[0].is_some() && zxids.iter().all(|z| *z == zxids[0]) {
            return;
        }
        assert!(Instant::now() < deadline, "the members did not converge: {zxids:?}\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the writer has had acknowledged, and whether it should pause.
struct Writer {
    acked: Mutex<Vec<String>>,
    pause: AtomicBool,
    paused: AtomicBool,
    stop: AtomicBool,
}

async fn write_until_stopped(client: Client, w: Arc<Writer>) {
    // Bounded by the stop flag, which the test sets.
    while !w.stop.load(Ordering::Relaxed) {
        if w.pause.load(Ordering::Relaxed) {
            w.paused.store(true, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        w.paused.store(false, Ordering::Relaxed);
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            client.create("/mig/w-", b"x", &acl::open_unsafe(), CreateMode::PersistentSequential),
        )
        .await;
        match r {
            Ok(Ok(name)) => w.acked.lock().unwrap().push(name),
            // A reconnect: unknown outcome, and the next one goes to another server.
            Ok(Err(Error::ConnectionLoss)) | Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(Err(e)) => panic!("the writer got {e}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn pause_writer(w: &Writer, k: &Kazoo) {
    w.pause.store(true, Ordering::Relaxed);
    pause_kazoo(w, k, true);
}

/// Pauses the kazoo writer, and waits for the zk-client one too unless it has stopped.
fn pause_kazoo(w: &Writer, k: &Kazoo, client_too: bool) {
    std::fs::write(k.marker("pause"), b"").expect("pause marker");
    let deadline = Instant::now() + Duration::from_secs(30);
    while (client_too && !w.paused.load(Ordering::Relaxed)) || !k.marker("paused").exists() {
        assert!(
            Instant::now() < deadline,
            "the writers did not pause (zk-client paused: {}); kazoo said:\n{}",
            w.paused.load(Ordering::Relaxed),
            k.output()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn resume_writer(w: &Writer, k: &Kazoo) {
    w.pause.store(false, Ordering::Relaxed);
    let _ = std::fs::remove_file(k.marker("pause"));
}

/// The kazoo writer (tests/clients/kazoo_writer.py) and its marker files.
struct Kazoo {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Kazoo {
    fn start(connect: &str) -> Kazoo {
        const PYTHON: &str = "/usr/bin/python3";
        let probe =
            std::process::Command::new(PYTHON).args(["-c", "import kazoo"]).output().expect("python3");
        assert!(probe.status.success(), "kazoo is missing: install Debian's python3-kazoo (./test.sh does)");
        let dir = tempfile::tempdir().expect("temp dir");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/kazoo_writer.py");
        let m = |n: &str| dir.path().join(n);
        let child = std::process::Command::new(PYTHON)
            .arg(script)
            .arg(connect)
            .args([m("acked"), m("stop"), m("pause"), m("paused")])
            .stdout(std::fs::File::create(m("out")).expect("out"))
            .stderr(std::fs::File::create(m("err")).expect("err"))
            .spawn()
            .expect("start kazoo");
        Kazoo { child, dir }
    }

    fn marker(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// What it printed so far.
    fn output(&self) -> String {
        let out = std::fs::read_to_string(self.marker("out")).unwrap_or_default();
        out + &std::fs::read_to_string(self.marker("err")).unwrap_or_default()
    }

    /// The names kazoo had acknowledged so far.
    fn acked(&self) -> Vec<String> {
        std::fs::read_to_string(self.marker("acked")).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    /// Stops it; panics unless it ended cleanly.
    fn finish(mut self) -> usize {
        std::fs::write(self.marker("stop"), b"").expect("stop marker");
        let status = self.child.wait().expect("kazoo");
        let out = self.output();
        assert!(status.success() && out.lines().any(|l| l == "ok"), "kazoo writer failed ({status}):\n{out}");
        self.acked().len()
    }
}

/// Every member's tree the same, and every acknowledged write (both writers') in it.
fn check_step(e: &Ensemble, w: &Writer, k: &Kazoo, step: &str) {
    wait_in_step(e);
    let dumps: Vec<Vec<Znode>> = (0..3).map(|i| dump_tree(&mut e.client(i), "/")).collect();
    for i in 1..3 {
        if dumps[i] != dumps[0] {
            let diff = dumps[0].iter().zip(&dumps[i]).find(|(a, b)| a != b);
            panic!(
                "{step}: member {} differs from member 1 ({} against {} znodes): {diff:?}\n{}",
                i + 1,
                dumps[i].len(),
                dumps[0].len(),
                e.logs()
            );
        }
    }
    let paths: std::collections::HashSet<&str> = dumps[0].iter().map(|z| z.path.as_str()).collect();
    for name in w.acked.lock().unwrap().iter().chain(k.acked().iter()) {
        assert!(paths.contains(name.as_str()), "{step}: acknowledged {name} is missing");
    }
}

#[test]
fn rolling_migration_from_apache_to_zkrs_and_back() {
    let mut e = Ensemble::configure(&[Kind::Apache; 3]);
    for i in 0..3 {
        e.launch(i);
    }
    e.wait_for_leader();
    let connect: String = e.members.iter().map(|m| m.client.to_string()).collect::<Vec<_>>().join(",");
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");

    // Data, a session with an ephemeral node and a persistent watch, and a writer.
    let (session, mut watch, writer_client) = rt.block_on(async {
        let setup = Client::connect(&connect, Duration::from_secs(30)).await.expect("connect");
        setup.create("/mig", b"", &acl::open_unsafe(), CreateMode::Persistent).await.expect("create /mig");
        for i in 0..200 {
            let data = format!("value {i}");
            setup
                .create(
                    &format!("/data-{i:03}"),
                    data.as_bytes(),
                    &acl::open_unsafe(),
                    CreateMode::Persistent,
                )
                .await
                .expect("create");
        }
        setup.close().await.expect("close");
        let session = Client::connect(&connect, Duration::from_secs(30)).await.expect("connect");
        session.create("/owner", b"", &acl::open_unsafe(), CreateMode::Ephemeral).await.expect("ephemeral");
        let watch = session.add_watch("/mig", AddWatchMode::PersistentRecursive).await.expect("watch");
        let writer = Client::connect(&connect, Duration::from_secs(30)).await.expect("connect");
        (session, watch, writer)
    });
    let session_id = session.session_id();
    let w = Arc::new(Writer {
        acked: Mutex::new(Vec::new()),
        pause: AtomicBool::new(false),
        paused: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    });
    let writing = rt.spawn(write_until_stopped(writer_client, w.clone()));
    let kazoo = Kazoo::start(&connect);
    std::thread::sleep(Duration::from_millis(500));

    for (to, label) in [(Kind::Zkrs, "zkrs"), (Kind::Apache, "Apache")] {
        // Followers first, the leader last: one election in all.
        let leader = e.wait_for_leader();
        let order: Vec<usize> = (0..3).filter(|&i| i != leader).chain([leader]).collect();
        for i in order {
            let step = format!("server {} replaced by {label}", i + 1);
            stop_gracefully(&mut e, i);
            e.wipe_data(i);
            e.members[i].kind = to;
            e.launch(i);
            // Writes go on while it syncs; then a pause to compare the trees.
            std::thread::sleep(Duration::from_millis(1500));
            pause_writer(&w, &kazoo);
            check_step(&e, &w, &kazoo, &step);
            // The member really is the other implementation now (zkrs's version says so).
            let version = srvr(e.members[i].client).unwrap_or_default();
            assert_eq!(version.contains("zkrs"), to == Kind::Zkrs, "{step}: {version}");
            // The watch fires for writes made during the step.
            let fired = rt.block_on(async {
                let mut n = 0;
                while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), watch.next()).await {
                    n += 1;
                }
                n
            });
            assert!(fired > 0, "{step}: the persistent watch stopped firing");
            assert_eq!(session.session_id(), session_id);
            resume_writer(&w, &kazoo);
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    w.stop.store(true, Ordering::Relaxed);
    rt.block_on(writing).expect("writer");
    pause_kazoo(&w, &kazoo, false);
    let kazoo_acked = kazoo.acked().len();
    check_step(&e, &w, &kazoo, "the end");
    let acked = w.acked.lock().unwrap().len();
    assert!(kazoo.finish() >= kazoo_acked);
    println!("{acked} writes (zk-client) and {kazoo_acked} (kazoo) acknowledged across six replacements");
    assert!(acked > 50, "the writer made too few writes to mean anything: {acked}");
    assert!(kazoo_acked > 50, "kazoo made too few writes to mean anything: {kazoo_acked}");
    // The session lived through six server replacements, with its ephemeral node.
    let owner = rt.block_on(session.exists("/owner")).expect("exists");
    assert_eq!(owner.map(|s| s.ephemeral_owner), Some(session_id), "the session's ephemeral is gone");
    rt.block_on(async {
        let _ = session.close().await;
    });
}
