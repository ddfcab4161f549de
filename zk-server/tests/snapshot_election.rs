//! F1 of the replication review on real processes: a background snapshot under way when the
//! server's database is replaced (an election's reload, a TRUNC, a SNAP) must not be finished
//! over the new database.
//!
//! A snapshot is written a step at a time from the live tree, by slot number; a database built
//! anew (every election reloads it from the newest snapshot and the log; a SNAP loads the
//! leader's stream) has another slot layout when the live tree has holes (deleted nodes). Before
//! the fix the cursor carried over: the file, with good checksums, lacked thousands of nodes,
//! became the newest snapshot, and a restart served it.
//!
//! Each scenario starts the same: three zkrs servers led by server 3, a tree of 48,000 znodes
//! under /a/b<i>/c<j> built through the leader (every third child deleted again: holes),
//! `snapCount=2000`, `snapshot.writeMBPerSecond=1`, and writes going on (1 KB creates under /w).
//! The checks at the end are the same too: every server serves the same tree, stat for stat,
//! and the same `zk_znode_count`, with every node built and every write acknowledged; no server
//! counted or logged a tree digest mismatch; and every snapshot file on any disk begun after
//! the tree was built holds every node of it (the SNAP variant's lost nodes are in a file no
//! restart loads: only reading the files shows them).
//!
//! - leader re-elected (the review's reproduction): the followers are frozen (SIGSTOP) in the
//!   middle of the leader's snapshot until it steps down, then thawed; it is elected again
//!   (longest log, highest id), then killed (SIGKILL) and restarted.
//! - TRUNC: the followers are frozen in the middle of the leader's snapshot and it logs writes
//!   it cannot commit; once it stepped down it is frozen, the followers are killed, restarted
//!   and elect one of themselves; the old leader, thawed, follows and is told to TRUNC.
//! - SNAP: a follower restarted (a paced snapshot begins as soon as it follows) is frozen in the
//!   middle of that snapshot while about 80 MB of writes make the leader purge the log it would need;
//!   thawed, it is brought back by SNAP.
//!
//! On real processes every TRUNC and SNAP comes after an election, whose reload replaces the
//! database first (and no snapshot steps while a server is down): the variants check what the
//! server ends with, not which replacement abandoned the snapshot.
//!
//! How the snapshot under way is made to happen, whatever the machine's speed: after the tree is
//! built, a quiet period (`snapshot.idleSeconds`, 5 s by default) has the leader take a snapshot
//! of it (compact: a reload from it has no holes). Then the writer, paced at about 400 writes of
//! 1 KB a second, grows the log; the next snapshot is due once the log has grown by half the last
//! snapshot (and `snapCount` transactions), and its pace is the floor of 1 MB/s because the log
//! grew more slowly than half that. The test waits for the "taking a snapshot" line and acts at
//! once; the leader steps down after `syncLimit` ticks (2 s), long before a tree of 5 MB is
//! written at 1 MB/s. Should a slow machine let the snapshot finish first, the test says so and
//! fails (no retry hides it). The tests take about a minute each and run one at a time.
//!
//! `ZKRS_BIN=/path/to/zkrs-server` runs them against another build (support/mod.rs). Against the
//! build before the fix (commit e9124b7) every one fails: the re-elected leader, restarted,
//! serves about 15,000 znodes fewer than the other two (its snapshot lacks them); the truncated
//! leader about 14,000 fewer; the follower synced by SNAP keeps a snapshot file lacking about
//! 11,000 of the nodes built (and logs digest mismatches after the SNAP).
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::client::{open_acl, RawClient};
use support::ensemble::*;
use support::load::{digest_mismatches, in_step, next_sync_mode, wait_until};
use zk_log::format::parse_segment_name;
use zk_log::snapshot::{parse_snapshot_name, read_snapshot_bytes, SNAP_DIR_NAME};
use zk_proto::*;
use zk_tree::snapshot::{ContentParser, ContentRecord};

/// Parents under /a.
const PARENTS: usize = 120;
/// Children created under each parent (every third is deleted again).
const CHILDREN: usize = 600;
/// zoo.cfg lines for every member: snapshots due every 2,000 transactions at most (and once the
/// log has grown by half the last snapshot), written at 1 MB/s unless the log grows faster.
const SNAPSHOTS: &str = "snapCount=2000\nsnapshot.writeMBPerSecond=1\n";

fn child(i: usize, j: usize) -> String {
    format!("/a/b{i}/c{j}")
}

/// The children the test deletes: every third.
fn deleted(j: usize) -> bool {
    j % 3 == 1
}

/// Sends `reqs` pipelined, a bounded batch at a time, and fails unless every answer is Ok;
/// returns the zxid of the last answer.
fn pipeline(c: &mut RawClient, reqs: impl IntoIterator<Item = Request>) -> i64 {
    let mut last = 0;
    let mut batch = Vec::new();
    let mut reqs = reqs.into_iter().peekable();
    while reqs.peek().is_some() {
        batch.clear();
        for req in reqs.by_ref().take(500) {
            let what = format!("{req:?}");
            batch.push((c.send(&req), what));
        }
        for (xid, what) in batch.drain(..) {
            let r = c.recv(xid).expect("the server closed the connection");
            assert_eq!(r.err(), ErrorCode::Ok, "{what}");
            last = r.header.zxid;
        }
    }
    last
}

fn create(path: String, data: &[u8]) -> Request {
    Request::Create(CreateRequest {
        path,
        data: Some(bytes::Bytes::copy_from_slice(data)),
        acl: open_acl(),
        flags: CreateMode::Persistent.code(),
    })
}

/// Builds /a/b<i>/c<j> through member `via`, child after child, then deletes every third child:
/// the live tree's slab has a hole for every deleted node. Returns the zxid of the last delete.
fn build_tree(e: &Ensemble, via: usize) -> i64 {
    let mut c = e.client(via);
    let t0 = Instant::now();
    pipeline(&mut c, std::iter::once(create("/a".into(), b"")));
    pipeline(&mut c, (0..PARENTS).map(|i| create(format!("/a/b{i}"), b"")));
    pipeline(&mut c, (0..PARENTS).flat_map(|i| (0..CHILDREN).map(move |j| create(child(i, j), b"x"))));
    let last = pipeline(
        &mut c,
        (0..PARENTS).flat_map(|i| {
            (0..CHILDREN)
                .filter(|&j| deleted(j))
                .map(move |j| Request::Delete(DeleteRequest { path: child(i, j), version: -1 }))
        }),
    );
    eprintln!("built {} znodes under /a in {:.1?}", PARENTS * CHILDREN * 2 / 3, t0.elapsed());
    last
}

/// Every znode [`build_tree`] leaves.
fn built_paths() -> BTreeSet<String> {
    let mut want: BTreeSet<String> = (0..PARENTS).map(|i| format!("/a/b{i}")).collect();
    want.insert("/a".into());
    for i in 0..PARENTS {
        want.extend((0..CHILDREN).filter(|&j| !deleted(j)).map(|j| child(i, j)));
    }
    want
}

/// A client creating `<prefix>/<n>` nodes with 1 KB of data, one at a time and at most one per
/// `every`, through the servers in turn (the next whenever its connection breaks), until stopped;
/// it can be paused.
struct Writer {
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    thread: JoinHandle<Vec<String>>,
}

impl Writer {
    fn start(servers: Vec<SocketAddr>, prefix: &'static str, every: Duration) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let (stop2, paused2, acked2) = (stop.clone(), paused.clone(), acked.clone());
        let thread = std::thread::spawn(move || {
            let mut done = Vec::new();
            let data = vec![b'w'; 1000];
            let req = ConnectRequest { time_out: 10_000, read_only: Some(false), ..Default::default() };
            let (mut n, mut turn) = (0u32, 0usize);
            let mut conn: Option<RawClient> = None;
            // Bounded: a few minutes of turns at the very most.
            for _ in 0..1_000_000 {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                if paused2.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                let Some(c) = conn.as_mut() else {
                    conn = RawClient::try_connect_with(servers[turn % servers.len()], req.clone())
                        .filter(|c| c.session.time_out > 0);
                    turn += 1;
                    if conn.is_none() {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    continue;
                };
                let began = Instant::now();
                let path = format!("{prefix}/{n:07}");
                n += 1;
                match c.try_send_request(&create(path.clone(), &data)).and_then(|xid| c.recv(xid)) {
                    Some(r) if r.err() == ErrorCode::Ok => {
                        done.push(path);
                        acked2.fetch_add(1, Ordering::SeqCst);
                    }
                    // Refused (the server lost its leader meanwhile): its fate is known, not made.
                    Some(_) => {}
                    None => conn = None,
                }
                if let Some(wait) = every.checked_sub(began.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            done
        });
        Writer { stop, paused, acked, thread }
    }

    fn acked(&self) -> usize {
        self.acked.load(Ordering::SeqCst)
    }

    /// Pauses the writes (or lets them go on), from its next write on.
    fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("writer thread")
    }
}

/// Zxids in `log` after `prefix` (a hex number, "0x" and all), in the order logged.
fn zxids_after(log: &str, prefix: &str) -> Vec<i64> {
    log.lines()
        .filter_map(|l| l.split(prefix).nth(1))
        .filter_map(|rest| {
            let hex = rest.trim_start_matches("0x");
            let end = hex.find(|ch: char| !ch.is_ascii_hexdigit()).unwrap_or(hex.len());
            i64::from_str_radix(&hex[..end], 16).ok()
        })
        .collect()
}

/// Start zxids of the snapshots member `i` began, oldest first.
fn snapshots_begun(e: &Ensemble, i: usize) -> Vec<i64> {
    zxids_after(&e.log(i), "taking a snapshot at zxid ")
}

/// Start zxids of the snapshot files member `i` finished, oldest first.
fn snapshots_written(e: &Ensemble, i: usize) -> Vec<i64> {
    e.log(i)
        .lines()
        .filter(|l| l.contains(" written: "))
        .filter_map(|l| l.split("snapshot snapshot.").nth(1))
        .filter_map(|rest| i64::from_str_radix(rest.get(..16)?, 16).ok())
        .collect()
}

/// A snapshot a member began: the how-many-th it began (0 = its first, counting every start the
/// test's log holds, restarts included) and its start zxid. The ordinal tells apart two
/// snapshots at one zxid: a server with no writes since begins again at the zxid it was at.
#[derive(Debug, Clone, Copy)]
struct Begun {
    nth: usize,
    zxid: i64,
}

/// Member `i`'s log from the line where it began snapshot `s` on.
fn log_since(e: &Ensemble, i: usize, s: Begun) -> String {
    let mut starts = 0;
    let mut out = String::new();
    for line in e.log(i).lines() {
        if line.contains("taking a snapshot at zxid ") {
            starts += 1;
        }
        if starts > s.nth {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// What became of member `i`'s snapshot `s`: "written" (the file exists), "abandoned", or None
/// while neither.
fn fate(e: &Ensemble, i: usize, s: Begun) -> Option<&'static str> {
    let log = log_since(e, i, s);
    let written = format!("snapshot snapshot.{:016x} written: ", s.zxid);
    let abandoned = format!("snapshot snapshot.{:016x} abandoned", s.zxid);
    if log.contains(&written) {
        Some("written")
    } else {
        log.contains(&abandoned).then_some("abandoned")
    }
}

/// The `mntr` value `key` of member `i`.
fn mntr(e: &Ensemble, i: usize, key: &str) -> Option<String> {
    let text = four(e.members[i].client, "mntr")?;
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('\t').map(str::to_string))
}

/// The node paths of the snapshot file at `path`, read with zk-tree's own parser (a content of
/// either version); None when the file is gone (retention removed it meanwhile).
fn snapshot_paths(path: &Path) -> Option<BTreeSet<String>> {
    let data = std::fs::read(path).ok()?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    let mut parser = ContentParser::new();
    let mut paths = BTreeSet::new();
    read_snapshot_bytes(&name, &data, &mut |chunk| {
        parser
            .feed(chunk, &mut |r| {
                if let ContentRecord::Node(n) = r {
                    paths.insert(n.path.to_string());
                }
                Ok(())
            })
            .map_err(|e| e.to_string())
    })
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(paths)
}

/// Every snapshot file on every member that began at or after `since` (when the tree the test
/// built was complete, and which it never touches again) must hold every znode in `built`: a
/// file that lacks some is what a restart, or a reload after the next election, would serve.
/// Returns what is wrong.
fn snapshot_files_whole(e: &Ensemble, since: i64, built: &BTreeSet<String>) -> Vec<String> {
    let (mut checked, mut problems) = (Vec::new(), Vec::new());
    for i in 0..e.members.len() {
        let dir = e.data_dir(i).join(SNAP_DIR_NAME);
        let mut names: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(&dir)
            .expect("snapshot directory")
            .flatten()
            .filter_map(|f| Some((parse_snapshot_name(f.file_name().to_str()?)?, f.path())))
            .filter(|(z, _)| *z >= since)
            .collect();
        names.sort();
        for (zxid, path) in names {
            let Some(paths) = snapshot_paths(&path) else { continue };
            let missing = built.iter().filter(|p| !paths.contains(*p)).count();
            if missing > 0 {
                problems.push(format!(
                    "member {}'s snapshot at 0x{zxid:x} lacks {missing} of the {} znodes built before \
                     it began ({} nodes in it)",
                    i + 1,
                    built.len(),
                    paths.len()
                ));
            }
            checked.push(format!("s{}:{zxid:x}", i + 1));
        }
    }
    eprintln!("snapshot files read: {checked:?}");
    problems
}

/// Every member's tree (`dump_tree`, the members dumped side by side).
fn trees(e: &Ensemble) -> Vec<Vec<Znode>> {
    std::thread::scope(|s| {
        let dumps: Vec<_> =
            (0..e.members.len()).map(|i| s.spawn(move || dump_tree(&mut e.client(i), "/"))).collect();
        dumps.into_iter().map(|d| d.join().expect("dump")).collect()
    })
}

/// The final checks: every member serves the same tree (stat for stat) and the same znode count,
/// holding every znode in `want`; none counted or logged a tree digest mismatch; every snapshot
/// file begun since `built_at` holds the whole tree that was built by then. Every failed check
/// is reported at once.
fn same_trees_everywhere(e: &Ensemble, want: &BTreeSet<String>, built_at: i64) {
    let mut problems = Vec::new();
    let counts: Vec<Option<String>> = (0..e.members.len()).map(|i| mntr(e, i, "zk_znode_count")).collect();
    eprintln!("znode counts: {counts:?}");
    if counts.iter().any(|c| *c != counts[0]) {
        problems.push(format!("znode counts differ: {counts:?}"));
    }
    let t0 = Instant::now();
    let trees = trees(e);
    eprintln!("trees dumped in {:.1?}", t0.elapsed());
    for (i, tree) in trees.iter().enumerate() {
        if i > 0 && *tree != trees[0] {
            let only_a: Vec<&str> =
                trees[0].iter().filter(|z| !tree.contains(z)).take(3).map(|z| z.path.as_str()).collect();
            let only_b: Vec<&str> =
                tree.iter().filter(|z| !trees[0].contains(z)).take(3).map(|z| z.path.as_str()).collect();
            problems.push(format!(
                "servers 1 and {} differ ({} and {} znodes; only on 1: {only_a:?}...; only on {}: \
                 {only_b:?}...)",
                i + 1,
                trees[0].len(),
                tree.len(),
                i + 1
            ));
        }
        let have: BTreeSet<&str> = tree.iter().map(|z| z.path.as_str()).collect();
        let missing: Vec<&String> = want.iter().filter(|p| !have.contains(p.as_str())).collect();
        if !missing.is_empty() {
            problems.push(format!(
                "server {} lacks {} znodes it must have: {:?}...",
                i + 1,
                missing.len(),
                &missing[..missing.len().min(3)]
            ));
        }
    }
    for i in 0..e.members.len() {
        let counted = digest_mismatches(e, i);
        let logged = e.log(i).lines().filter(|l| l.contains("tree digest mismatch")).count();
        if counted != Some(0) || logged > 0 {
            problems.push(format!(
                "server {} counts {counted:?} digest mismatches since its start, logged {logged}",
                i + 1
            ));
        }
    }
    let t0 = Instant::now();
    problems.extend(snapshot_files_whole(e, built_at, &built_paths()));
    eprintln!("snapshot files read in {:.1?}", t0.elapsed());
    assert!(problems.is_empty(), "{}\n{}", problems.join("\n"), e.logs());
}

/// The tests here run one at a time: each needs its snapshot to be slower than an election, which
/// three ensembles building trees side by side on a small machine could upset.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What every scenario starts from.
struct Setup {
    e: Ensemble,
    /// Member 3, the leader.
    leader: usize,
    /// The zxid of the build's last delete.
    built_at: i64,
    /// Paced writes of 1 KB under /w through the leader (then the others in turn).
    writer: Writer,
    t0: Instant,
}

/// Three zkrs servers led by server 3, the tree built through it and a snapshot of it taken
/// (compact), then a writer paced at about 0.4 MB of log a second: the leader's next snapshot
/// is written at the floor pace.
fn setup(extra: &str) -> Setup {
    let t0 = Instant::now();
    let mut e = Ensemble::configure_with_extra(&[Kind::Zkrs; 3], &[], &format!("{SNAPSHOTS}{extra}"));
    e.launch_led_by_server_3();
    let leader = 2;
    let built_at = build_tree(&e, leader);

    // Past the deletes, a tenth of snapCount more transactions (with enough log bytes), then quiet:
    // the leader snapshots the tree with its holes (a compact file, which every reload starts from).
    let mut c = e.client(leader);
    pipeline(&mut c, std::iter::once(create("/pad".into(), b"")));
    pipeline(&mut c, (0..250).map(|k| create(format!("/pad/{k}"), &[b'p'; 2000])));
    pipeline(&mut c, ["/w", "/big"].map(|p| create(p.into(), b"")));
    drop(c);
    wait_until(&e, "the leader to write a snapshot of the whole tree", || {
        let begun = snapshots_begun(&e, leader);
        let written = snapshots_written(&e, leader);
        written.iter().any(|&z| z >= built_at) && begun.iter().all(|z| written.contains(z))
    });
    eprintln!("{:.1?}: the tree is in a snapshot; paced writes begin", t0.elapsed());
    let servers: Vec<SocketAddr> = [2, 0, 1].iter().map(|&i| e.members[i].client).collect();
    let writer = Writer::start(servers, "/w", Duration::from_micros(2500));
    Setup { e, leader, built_at, writer, t0 }
}

/// Waits until member `i` logs beginning a snapshot beyond the `seen` it had begun; returns it.
/// Polls often: the test acts on it at once.
fn next_snapshot(e: &Ensemble, i: usize, seen: usize) -> Begun {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(&zxid) = snapshots_begun(e, i).get(seen) {
            return Begun { nth: seen, zxid };
        }
        assert!(Instant::now() < deadline, "member {} began no snapshot\n{}", i + 1, e.logs());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until member `i` leaves its role (its log's "-> Down" line) after it began snapshot
/// `s`; fails unless that snapshot was still being serialized then (no stepping happens while a
/// server is down, before the fix or after it).
fn leaves_role_mid_snapshot(e: &Ensemble, i: usize, s: Begun) {
    let done = format!("snapshot at zxid 0x{:x} serialized", s.zxid);
    let mut order = None;
    wait_until(e, &format!("member {} to leave its role", i + 1), || {
        let log = log_since(e, i, s);
        let lines: Vec<&str> = log.lines().collect();
        let down = lines.iter().position(|l| l.contains(" -> Down"));
        order = down.map(|d| (d, lines.iter().position(|l| l.contains(&done))));
        order.is_some()
    });
    let (down, done_at) = order.expect("waited for");
    assert!(
        done_at.is_none_or(|at| at > down),
        "the machine was too slow for the scenario: member {}'s snapshot at 0x{:x} was all \
         serialized before it left its role\n{}",
        i + 1,
        s.zxid,
        e.logs()
    );
}

/// Waits until member `i`'s snapshot `s` is written or abandoned; returns which.
fn settled_fate(e: &Ensemble, i: usize, s: Begun) -> &'static str {
    let mut what = None;
    wait_until(e, "the snapshot under way to be written or abandoned", || {
        what = fate(e, i, s);
        what.is_some()
    });
    what.unwrap_or_default()
}

/// Member `i` is killed with SIGKILL and restarted (it starts from its newest snapshot); once
/// the ensemble is settled again and the writer had more writes acknowledged, the writer stops
/// and every member catches up. Returns the writes acknowledged.
fn restart_and_settle(s: Setup, i: usize) -> (Ensemble, Vec<String>, i64, Instant) {
    let Setup { mut e, writer, built_at, t0, .. } = s;
    let others: Vec<usize> = (0..3).filter(|&k| k != i).collect();
    e.kill(i);
    let leader = e.wait_for_leader_among(&others);
    e.launch(i);
    assert_eq!(e.wait_for_leader(), leader, "{}", e.logs());
    let acked = writer.acked();
    wait_until(&e, "writes after the restart", || writer.acked() > acked + 50);
    let acked = writer.finish();
    in_step(&e, leader);
    eprintln!("{:.1?}: {} paced writes acknowledged; comparing trees", t0.elapsed(), acked.len());
    (e, acked, built_at, t0)
}

fn final_checks(e: &Ensemble, acked: Vec<String>, built_at: i64, t0: Instant) {
    let mut want = built_paths();
    want.extend(acked);
    same_trees_everywhere(e, &want, built_at);
    eprintln!("{:.1?}: every server has the same tree", t0.elapsed());
}

/// The review's reproduction: the leader loses its quorum in the middle of its snapshot (its
/// followers frozen until it steps down), is elected again (thawed, they vote for it: it has the
/// longest log, or an equal one and the highest id), and is then killed and restarted.
#[test]
fn leader_reelected_during_its_snapshot_keeps_every_znode() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = setup("");
    let (e, leader, t0) = (&s.e, s.leader, s.t0);
    let followers = [0, 1];
    let snap = next_snapshot(e, leader, snapshots_begun(e, leader).len());
    let zxid = snap.zxid;
    for &f in &followers {
        e.stop(f);
    }
    eprintln!("{:.1?}: followers frozen; the leader's snapshot at 0x{zxid:x} under way", t0.elapsed());
    leaves_role_mid_snapshot(e, leader, snap);
    for &f in &followers {
        e.cont(f);
    }
    assert_eq!(e.wait_for_leader(), leader, "the leader is elected again\n{}", e.logs());
    let fate = settled_fate(e, leader, snap);
    eprintln!("{:.1?}: re-elected; the snapshot at 0x{zxid:x} was {fate}", t0.elapsed());
    let (e, acked, built_at, t0) = restart_and_settle(s, leader);
    final_checks(&e, acked, built_at, t0);
}

/// The TRUNC variant: in the middle of the leader's snapshot both followers are frozen, and the
/// leader takes writes it logs but can never commit. Once it has stepped down it is frozen too
/// (so that its votes, which its longer log makes the best, reach nobody), the followers are
/// killed (SIGKILL: thawed, they would find the leader's last proposals in their sockets and log
/// them; a leader whose learners' connections close steps down at once, so killing them sooner
/// would leave it no time to take the writes) and restarted, and elect one of themselves; the
/// old leader, thawed, follows and is told to TRUNC its uncommitted tail. Then it is killed and
/// restarted.
#[test]
fn leader_truncated_as_a_follower_during_its_snapshot_keeps_every_znode() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut s = setup("");
    let (leader, t0) = (s.leader, s.t0);
    let followers = [0, 1];
    // A session opened beforehand: opening one needs a commit.
    let mut side = s.e.client(leader);
    let snap = next_snapshot(&s.e, leader, snapshots_begun(&s.e, leader).len());
    let zxid = snap.zxid;
    for &f in &followers {
        s.e.stop(f);
    }
    for k in 0..20 {
        side.send(&create(format!("/w/uncommitted-{k}"), b""));
    }
    wait_logged(&s.e, leader, "/w/uncommitted-19");
    leaves_role_mid_snapshot(&s.e, leader, snap);
    s.e.stop(leader);
    eprintln!("{:.1?}: the leader logged a tail alone and stepped down; frozen", t0.elapsed());
    for &f in &followers {
        s.e.kill(f);
        s.e.launch(f);
    }
    let e = &s.e;
    let new_leader = e.wait_for_leader_among(&followers);
    let seen = e.sync_modes(new_leader, leader + 1).len();
    e.cont(leader);
    assert_eq!(e.wait_for_leader(), new_leader, "{}", e.logs());
    let mode = next_sync_mode(e, new_leader, leader, seen);
    assert_eq!(mode, "Trunc", "the old leader's uncommitted tail is truncated\n{}", e.logs());
    let fate = settled_fate(e, leader, snap);
    eprintln!("{:.1?}: told to TRUNC; the snapshot at 0x{zxid:x} was {fate}", t0.elapsed());
    drop(side);
    let (e, acked, built_at, t0) = restart_and_settle(s, leader);
    final_checks(&e, acked, built_at, t0);
}

/// Waits until member `i`'s transaction log (as `zkrs-server dump-log` prints it) holds `needle`.
fn wait_logged(e: &Ensemble, i: usize, needle: &str) {
    /// Output that only remembers whether a line held the needle.
    struct Finds<'a>(&'a [u8], bool);
    impl std::io::Write for Finds<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.1 |= buf.windows(self.0.len()).any(|w| w == self.0);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let dir = e.data_dir(i).join(zk_log::LOG_DIR_NAME);
    wait_until(e, &format!("member {} to log {needle}", i + 1), || {
        let mut out = Finds(needle.as_bytes(), false);
        zk_server::tools::dump_log(&dir, &mut out).is_ok() && out.1
    });
}

/// The first zxid of member `i`'s oldest log segment.
fn oldest_logged(e: &Ensemble, i: usize) -> Option<i64> {
    std::fs::read_dir(e.data_dir(i).join(zk_log::LOG_DIR_NAME))
        .ok()?
        .flatten()
        .filter_map(|f| parse_segment_name(f.file_name().to_str()?))
        .min()
}

/// The SNAP variant: a follower restarted (it replayed its log, so it begins a snapshot as soon
/// as it follows, at the floor pace; or, with nothing replayed, one is due after more writes)
/// is frozen in the middle of that snapshot; writes of 40 KB, paced,
/// go on until the leader's log no longer holds what the follower lacks (a log segment is
/// 64 MiB, and the leader purges what precedes its third-newest snapshot: `snapSizeLimitInKb`
/// makes those come every few megabytes); thawed, the follower is brought back by SNAP. Then
/// it is killed and restarted. The snapshot it had under way would be older than the one the
/// SNAP gave it, so a restart does not load it: the check that catches it reads every snapshot
/// file.
#[test]
fn follower_synced_by_snap_during_its_snapshot_keeps_every_znode() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut s = setup("snapSizeLimitInKb=8192\n");
    let (leader, t0, f) = (s.leader, s.t0, 0);
    // No writes while the follower restarts: with nothing to catch up it is synced by an empty
    // DIFF, so the tree it snapshots is the one it rebuilt from its own disk.
    s.writer.pause(true);
    in_step(&s.e, leader);
    let seen = snapshots_begun(&s.e, f).len();
    s.e.kill(f);
    s.e.launch(f);
    s.e.wait_mode(f, "follower");
    s.writer.pause(false);
    let e = &s.e;
    let snap = next_snapshot(e, f, seen);
    let zxid = snap.zxid;
    e.stop(f);
    let behind = e.zxid(leader).expect("the leader's zxid");
    eprintln!("{:.1?}: follower frozen; its snapshot at 0x{zxid:x} under way", t0.elapsed());
    let mut c = e.client(leader);
    let big = bytes::Bytes::from(vec![b'b'; 40_000]);
    let set =
        || Request::SetData(SetDataRequest { path: "/big".into(), data: Some(big.clone()), version: -1 });
    // Written at a steady pace rather than in one burst: while writes come, a snapshot is
    // written at the floor pace (several seconds for this tree), the next one waits for it, and
    // the purge needs three of them past the segment that holds what the follower lacks.
    let (mut rounds, deadline) = (0, Instant::now() + Duration::from_secs(180));
    while oldest_logged(e, leader).is_none_or(|z| z <= behind) {
        assert!(
            Instant::now() < deadline,
            "the leader kept its log from 0x{behind:x} on after {} MB\n{}",
            rounds * 2,
            e.logs()
        );
        pipeline(&mut c, (0..50).map(|_| set()));
        rounds += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(c);
    eprintln!("{:.1?}: {} MB written; the leader's log starts after the follower", t0.elapsed(), rounds * 2);
    let synced = e.sync_modes(leader, f + 1).len();
    e.cont(f);
    leaves_role_mid_snapshot(e, f, snap);
    let mode = next_sync_mode(e, leader, f, synced);
    assert_eq!(mode, "Snap", "the follower is brought back by SNAP\n{}", e.logs());
    assert_eq!(e.wait_for_leader(), leader, "{}", e.logs());
    let fate = settled_fate(e, f, snap);
    eprintln!("{:.1?}: synced by SNAP; the snapshot at 0x{zxid:x} was {fate}", t0.elapsed());
    let (e, acked, built_at, t0) = restart_and_settle(s, f);
    final_checks(&e, acked, built_at, t0);
}
