//! Faults injected into replicated zkrs ensembles of real processes (loopback ports): kill -9 of
//! the leader under pipelined load, a leader frozen by SIGSTOP and thawed, stale followers caught
//! up by each of the three sync modes (DIFF, TRUNC, SNAP, read from the leader's log), and a
//! rolling restart of every server under load with sessions that must live through it.
//!
//! Ensembles use ports below the kernel's ephemeral range ([`stable_port`]), so that a server
//! restarted on its ports never finds one taken by an outgoing connection meanwhile.
//!
//! Writes come from client threads that record which writes were acknowledged; an acknowledged
//! write must end up on every server. Waits are polling loops with generous deadlines: the
//! outcomes never depend on how fast the machine is.
#![allow(clippy::disallowed_methods)]

mod support;

use bytes::Bytes;
use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::ensemble::*;
use zk_proto::*;

/// How long any one wait may take before the test fails (the machine may be loaded).
const PATIENCE: Duration = Duration::from_secs(60);
/// The session timeout the writers ask for (the ensembles' maximum: 20 ticks of 500 ms).
const SESSION_MS: i32 = 10_000;

/// Polls `done` until it holds; fails after [`PATIENCE`] with the servers' logs.
fn wait_until(e: &Ensemble, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What one writer thread does.
#[derive(Clone)]
struct WriterSpec {
    /// Its name: its writes are `/load/<name>-<n>`, its ephemeral `/eph/<name>`.
    name: String,
    /// The servers it may use, tried in turn from the first whenever its connection is lost.
    servers: Vec<SocketAddr>,
    /// Writes in flight at once.
    depth: usize,
    /// Resume the same session on reconnection (else a new session each time).
    keep_session: bool,
    /// Create the ephemeral `/eph/<name>` on the first connection.
    ephemeral: bool,
}

impl WriterSpec {
    fn new(name: &str, servers: Vec<SocketAddr>) -> WriterSpec {
        WriterSpec { name: name.into(), servers, depth: 16, keep_session: false, ephemeral: false }
    }
}

/// What one writer saw.
struct Outcome {
    name: String,
    /// The (last) session.
    session: i64,
    /// Writes the ensemble acknowledged (the reply said Ok).
    acked: Vec<String>,
    /// Writes whose fate the writer never learnt (the connection broke first).
    unknown: Vec<String>,
    /// Writes refused with an error.
    refused: Vec<(String, ErrorCode)>,
    /// Successful handshakes.
    connections: usize,
    /// A handshake resuming the session was answered with another session or a zero timeout.
    expired: bool,
    /// No server took the writer back for [`PATIENCE`].
    gave_up: bool,
    /// Its connection at the end, session still open.
    client: Option<RawClient>,
}

/// What the writers share with the test.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Writes acknowledged, all writers together.
    acked: AtomicUsize,
    /// Writes sent, all writers together.
    sent: AtomicUsize,
    /// Writes the writers may send in all: the test raises it as it waits for more. The amount of
    /// data written then depends on the test's steps, not on how fast the machine runs.
    budget: AtomicUsize,
}

impl Shared {
    /// Takes one write from the budget.
    fn take(&self) -> bool {
        let budget = self.budget.load(Ordering::SeqCst);
        self.sent.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < budget).then_some(n + 1)).is_ok()
    }
}

/// Writer threads running until [`Load::finish`].
struct Load {
    shared: Arc<Shared>,
    /// How many writes beyond the number awaited the writers may send: what keeps them writing
    /// while the test injects its next fault.
    slack: usize,
    writers: Vec<JoinHandle<Outcome>>,
}

impl Load {
    fn start(specs: Vec<WriterSpec>, slack: usize) -> Load {
        let shared = Arc::new(Shared::default());
        let writers = specs
            .into_iter()
            .map(|spec| {
                let shared = shared.clone();
                std::thread::spawn(move || write_loop(spec, &shared))
            })
            .collect();
        Load { shared, slack, writers }
    }

    /// Writes acknowledged so far, all writers together.
    fn acked(&self) -> usize {
        self.shared.acked.load(Ordering::SeqCst)
    }

    /// Lets the writers send up to `n` plus the slack writes in all, and waits until `n` were
    /// acknowledged.
    fn wait_acked(&self, e: &Ensemble, n: usize) {
        self.shared.budget.fetch_max(n + self.slack, Ordering::SeqCst);
        wait_until(e, &format!("{n} acknowledged writes (have {})", self.acked()), || {
            assert!(
                self.acked() >= n || self.writers.iter().any(|w| !w.is_finished()),
                "every writer stopped after {} acknowledged writes, short of {n}\n{}",
                self.acked(),
                e.logs()
            );
            self.acked() >= n
        });
    }

    /// Stops the writers and collects what they saw; each must have stayed connectable.
    fn finish(self) -> Vec<Outcome> {
        self.shared.stop.store(true, Ordering::SeqCst);
        let outs: Vec<Outcome> = self.writers.into_iter().map(|w| w.join().expect("writer thread")).collect();
        for o in &outs {
            assert!(!o.gave_up, "writer {} found no server to take it back", o.name);
            assert!(!o.expired, "writer {}'s session 0x{:x} did not survive", o.name, o.session);
            eprintln!(
                "writer {}: {} acknowledged, {} unknown, {} refused {:?}, {} connections",
                o.name,
                o.acked.len(),
                o.unknown.len(),
                o.refused.len(),
                o.refused.first(),
                o.connections
            );
        }
        outs
    }
}

fn write_loop(spec: WriterSpec, shared: &Shared) -> Outcome {
    let mut out = Outcome {
        name: spec.name.clone(),
        session: 0,
        acked: Vec::new(),
        unknown: Vec::new(),
        refused: Vec::new(),
        connections: 0,
        expired: false,
        gave_up: false,
        client: None,
    };
    let mut passwd = Bytes::new();
    let mut last_zxid = 0i64;
    let mut conn: Option<RawClient> = None;
    let mut in_flight: VecDeque<(i32, String)> = VecDeque::new();
    let (mut next, mut turn) = (0usize, 0usize);
    let mut lost_at = Instant::now();
    loop {
        let stopping = shared.stop.load(Ordering::SeqCst);
        let Some(c) = conn.as_mut() else {
            if stopping {
                break;
            }
            if lost_at.elapsed() > PATIENCE {
                out.gave_up = true;
                break;
            }
            let addr = spec.servers[turn % spec.servers.len()];
            turn += 1;
            let resume = spec.keep_session && out.session != 0;
            let req = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: last_zxid,
                time_out: SESSION_MS,
                session_id: if resume { out.session } else { 0 },
                passwd: if resume { passwd.clone() } else { Bytes::from(vec![0u8; 16]) },
                read_only: Some(false),
            };
            match RawClient::try_connect_with(addr, req) {
                Some(c) if c.session.time_out > 0 && (!resume || c.session.session_id == out.session) => {
                    out.session = c.session.session_id;
                    passwd = c.session.passwd.clone();
                    out.connections += 1;
                    conn = Some(c);
                    if spec.ephemeral && out.connections == 1 {
                        let c = conn.as_mut().expect("just connected");
                        let r = c.create(&format!("/eph/{}", spec.name), b"", CreateMode::Ephemeral);
                        assert_eq!(r.err(), ErrorCode::Ok, "writer {}'s ephemeral", spec.name);
                    }
                }
                Some(_) => {
                    out.expired = resume;
                    if resume {
                        break;
                    }
                }
                // Down, starting, not synced yet, or refusing us: try the next one.
                None => std::thread::sleep(Duration::from_millis(50)),
            }
            continue;
        };
        let mut broken = false;
        while !stopping && in_flight.len() < spec.depth && shared.take() {
            let path = format!("/load/{}-{next:05}", spec.name);
            next += 1;
            match c.try_send_request(&create_req(&path)) {
                Some(xid) => in_flight.push_back((xid, path)),
                None => {
                    out.unknown.push(path);
                    broken = true;
                    break;
                }
            }
        }
        let Some((xid, path)) = in_flight.pop_front() else {
            if stopping {
                break;
            }
            // Out of budget: a read now and then keeps the session alive until there is more.
            let alive = !broken
                && c.try_send_request(&Request::Exists(ExistsRequest { path: "/".into(), watch: false }))
                    .and_then(|xid| c.recv(xid))
                    .is_some();
            if !alive {
                conn = None;
                lost_at = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        match c.recv(xid) {
            Some(r) => {
                last_zxid = last_zxid.max(r.header.zxid);
                if r.err() == ErrorCode::Ok {
                    out.acked.push(path);
                    shared.acked.fetch_add(1, Ordering::SeqCst);
                } else {
                    out.refused.push((path, r.err()));
                }
            }
            None => {
                out.unknown.push(path);
                out.unknown.extend(in_flight.drain(..).map(|(_, p)| p));
                conn = None;
                lost_at = Instant::now();
            }
        }
    }
    out.client = conn;
    out
}

/// Every write any writer had acknowledged.
fn all_acked(outs: &[Outcome]) -> BTreeSet<String> {
    outs.iter().flat_map(|o| o.acked.iter().cloned()).collect()
}

/// Fails unless every path in `acked` is a znode of `tree`.
fn assert_has_all(tree: &[Znode], acked: &BTreeSet<String>, who: &str) {
    let have: BTreeSet<&str> = tree.iter().map(|z| z.path.as_str()).collect();
    let missing: Vec<&String> = acked.iter().filter(|p| !have.contains(p.as_str())).collect();
    assert!(missing.is_empty(), "{who} lost {} acknowledged writes: {missing:?}", missing.len());
}

/// Dumps the tree of every member in `members`, fails unless they are all equal, and returns it.
fn equal_trees(e: &Ensemble, members: &[usize]) -> Vec<Znode> {
    let trees: Vec<Vec<Znode>> = members.iter().map(|&i| dump_tree(&mut e.client(i), "/")).collect();
    for (k, t) in trees.iter().enumerate().skip(1) {
        if *t != trees[0] {
            let only_a: Vec<&Znode> = trees[0].iter().filter(|z| !t.contains(z)).take(5).collect();
            let only_b: Vec<&Znode> = t.iter().filter(|z| !trees[0].contains(z)).take(5).collect();
            panic!(
                "servers {} and {} differ ({} and {} znodes)\nonly on the first: {only_a:?}\nonly on the \
                 second: {only_b:?}\n{}",
                members[0] + 1,
                members[k] + 1,
                trees[0].len(),
                t.len(),
                e.logs()
            );
        }
    }
    trees.into_iter().next().expect("at least one member")
}

fn create(c: &mut RawClient, path: &str) {
    assert_eq!(c.create(path, b"", CreateMode::Persistent).err(), ErrorCode::Ok, "create {path}");
}

/// Waits until member `i`'s transaction log (as `zkrs-server dump-log` prints it) contains
/// `needle`: the record is written (it survives a SIGKILL).
fn wait_logged(e: &Ensemble, i: usize, needle: &str) {
    let log_dir = e.data_dir(i).join(zk_log::LOG_DIR_NAME);
    wait_until(e, &format!("server {} to log {needle}", i + 1), || {
        let mut out = Vec::new();
        zk_server::tools::dump_log(&log_dir, &mut out).is_ok()
            && String::from_utf8_lossy(&out).contains(needle)
    });
}

/// Waits for a leader with every follower synced; returns it.
fn settled(e: &Ensemble) -> usize {
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", &(e.members.len() - 1).to_string());
    leader
}

/// Waits until the leader `leader` logged a new sync of the learner `i` (beyond `seen` earlier
/// ones) and returns the mode it chose.
fn next_sync_mode(e: &Ensemble, leader: usize, i: usize, seen: usize) -> String {
    let mut modes = Vec::new();
    wait_until(e, &format!("the leader (server {}) to sync server {}", leader + 1, i + 1), || {
        modes = e.sync_modes(leader, i + 1);
        modes.len() > seen
    });
    modes[seen].clone()
}

/// Five servers, a writer on each follower pipelining creates: the leader is killed with
/// SIGKILL mid-stream. Every write acknowledged (before or after) is on every survivor, the new
/// ensemble takes writes again, and the killed server comes back, catches up, and ends equal.
#[test]
fn five_servers_keep_every_acknowledged_write_when_the_leader_is_killed_under_pipelined_load() {
    let mut e = Ensemble::start_with_extra(5, "");
    let leader = settled(&e);
    let followers: Vec<usize> = (0..5).filter(|&i| i != leader).collect();
    create(&mut e.client(followers[0]), "/load");
    let load = Load::start(
        followers
            .iter()
            .map(|&f| WriterSpec::new(&format!("s{}", f + 1), vec![e.members[f].client]))
            .collect(),
        600,
    );
    load.wait_acked(&e, 300);
    e.kill(leader);
    let at_kill = load.acked();
    let new_leader = e.wait_for_leader_among(&followers);
    load.wait_acked(&e, at_kill + 300);
    let outs = load.finish();
    let acked = all_acked(&outs);
    assert!(outs.iter().any(|o| o.connections > 1), "no writer lost its connection to the kill");
    eprintln!("{} writes acknowledged, {at_kill} of them before the kill", acked.len());
    for &i in &followers {
        assert_has_all(&dump_tree(&mut e.client(i), "/"), &acked, &format!("survivor {}", i + 1));
    }

    let seen = e.sync_modes(new_leader, leader + 1).len();
    e.launch(leader);
    let mode = next_sync_mode(&e, new_leader, leader, seen);
    eprintln!("the killed leader caught up by {mode}");
    assert_eq!(settled(&e), new_leader);
    let tree = equal_trees(&e, &[0, 1, 2, 3, 4]);
    assert_has_all(&tree, &acked, "the ensemble");
}

/// A leader frozen by SIGSTOP (alive, sockets open, silent) while followers take writes: they
/// give up on it within syncLimit, elect a new leader among themselves and carry on. A write sent
/// to the frozen leader is never acknowledged and never applied anywhere. Thawed (SIGCONT), the
/// old leader finds its followers gone, steps down, rejoins as a follower and catches up.
#[test]
fn a_frozen_leader_is_replaced_and_rejoins_as_a_follower_when_thawed() {
    let e = Ensemble::start_with_extra(3, "");
    let leader = settled(&e);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    create(&mut e.client(leader), "/load");
    // Clients of the leader: one will write while it is frozen, one will read.
    let mut stale_writer = e.client(leader);
    let mut stale_reader = e.client(leader);
    let load = Load::start(
        followers
            .iter()
            .map(|&f| WriterSpec::new(&format!("s{}", f + 1), vec![e.members[f].client]))
            .collect(),
        600,
    );
    load.wait_acked(&e, 200);
    e.stop(leader);
    // Queued in the frozen process's socket: it sees it only once thawed.
    let stale_xid = stale_writer.send(&create_req("/frozen-write"));
    let read_xid =
        stale_reader.send(&Request::GetChildren(GetChildrenRequest { path: "/".into(), watch: false }));
    let new_leader = e.wait_for_leader_among(&followers);
    // Writes go on while the old leader is still frozen.
    let at_new = load.acked();
    load.wait_acked(&e, at_new + 200);
    let seen = e.sync_modes(new_leader, leader + 1).len();
    e.cont(leader);

    // What the old leader did with its clients' requests once thawed: the write is never
    // acknowledged (it has no quorum), the read answers from committed state or not at all.
    match stale_writer.recv(stale_xid) {
        None => {}
        Some(r) => assert_ne!(r.err(), ErrorCode::Ok, "the frozen leader acknowledged a write"),
    }
    let stale_view = stale_reader.recv(read_xid);
    let mode = next_sync_mode(&e, new_leader, leader, seen);
    eprintln!("the thawed leader caught up by {mode}; its read while thawing: {stale_view:?}");
    wait_until(&e, "the old leader to follow", || e.mode(leader).as_deref() == Some("follower"));
    assert_eq!(settled(&e), new_leader);
    let rejoined = load.acked();
    load.wait_acked(&e, rejoined + 100);
    let outs = load.finish();
    let acked = all_acked(&outs);

    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_has_all(&tree, &acked, "the ensemble");
    assert!(
        tree.iter().all(|z| z.path != "/frozen-write"),
        "the write sent to the frozen leader was applied"
    );
    if let Some(r) = stale_view.filter(|r| r.err() == ErrorCode::Ok) {
        let names: Vec<String> = r.decode();
        assert!(
            !names.contains(&"frozen-write".to_string()),
            "the old leader served its own write: {names:?}"
        );
        for n in names.iter().filter(|n| *n != "zookeeper") {
            let path = format!("/{n}");
            assert!(tree.iter().any(|z| z.path == path), "the old leader served {path}, never committed");
        }
    }
}

/// A follower stopped while a few writes are made is synced by DIFF when it comes back (its
/// last zxid is in the leader's recent history) and has the writes.
#[test]
fn a_follower_back_after_a_few_writes_is_synced_by_diff() {
    let mut e = Ensemble::start_with_extra(3, "");
    let leader = settled(&e);
    let f = (0..3).find(|&i| i != leader).expect("a follower");
    let mut c = e.client(leader);
    create(&mut c, "/d");
    // The follower must have /d in its log: with an empty log it would be synced by SNAP.
    wait_logged(&e, f, "\"/d\"");
    e.kill(f);
    for n in 0..20 {
        create(&mut c, &format!("/d/while-away-{n:02}"));
    }
    let seen = e.sync_modes(leader, f + 1).len();
    e.launch(f);
    assert_eq!(next_sync_mode(&e, leader, f, seen), "Diff", "{}", e.logs());
    assert_eq!(settled(&e), leader);
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_eq!(tree.iter().filter(|z| z.path.starts_with("/d/while-away-")).count(), 20);
}

/// A leader whose log has a proposal nobody else saw. Both followers are frozen, a write goes
/// to the leader (it logs its proposal but can never commit it), and the leader is killed. The
/// followers are then killed too and restarted: they elect a new leader among themselves and take
/// more writes. The old leader, restarted, must be told TRUNC back to the last common zxid; the
/// write that was never acknowledged is nowhere in the end, and all trees are equal.
///
/// Why the frozen followers are killed rather than thawed: the proposal sits, unread, in their
/// sockets' receive buffers. Thawed, they would read it before noticing the leader's death, log
/// it, and the new leader would commit it in its epoch (Zab may keep a write it never
/// acknowledged). Killed, the buffered proposal dies with them, which gives the divergent tail
/// deterministically. syncLimit is raised so that the leader, its followers frozen, still leads
/// (and logs the proposal) well before it would give up on them.
#[test]
fn a_leader_with_an_uncommitted_proposal_is_synced_by_trunc_when_it_comes_back() {
    let mut e = Ensemble::start_with_extra(3, "syncLimit=20\n");
    let leader = settled(&e);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let mut c = e.client(leader);
    create(&mut c, "/t");
    create(&mut c, "/t/committed");
    for &f in &followers {
        e.stop(f);
    }
    let xid = c.send(&create_req("/t/never-acknowledged"));
    wait_logged(&e, leader, "/t/never-acknowledged");
    e.kill(leader);
    assert!(c.recv(xid).is_none_or(|r| r.err() != ErrorCode::Ok), "a write with no quorum acknowledged");
    for &f in &followers {
        e.kill(f);
        e.launch(f);
    }
    let new_leader = e.wait_for_leader_among(&followers);
    let mut n = e.client(new_leader);
    create(&mut n, "/t/after");
    let seen = e.sync_modes(new_leader, leader + 1).len();
    e.launch(leader);
    assert_eq!(next_sync_mode(&e, new_leader, leader, seen), "Trunc", "{}", e.logs());
    assert_eq!(settled(&e), new_leader);
    let tree = equal_trees(&e, &[0, 1, 2]);
    let paths: Vec<&str> = tree.iter().map(|z| z.path.as_str()).collect();
    assert!(paths.contains(&"/t/committed") && paths.contains(&"/t/after"), "{paths:?}");
    assert!(!paths.contains(&"/t/never-acknowledged"), "the uncommitted proposal survived: {paths:?}");
}

/// A follower whose data directory was lost (only myid left) has nothing in common with the
/// leader's log: it is synced by SNAP and then has everything.
///
/// (A follower merely far behind would need the leader's log purged past it; zkrs purges whole
/// log segments, which roll at 64 MiB with no zoo.cfg key to shrink them, so a small test cannot
/// reach that case.)
#[test]
fn a_follower_that_lost_its_data_is_synced_by_snap() {
    let mut e = Ensemble::start_with_extra(3, "");
    let leader = settled(&e);
    let f = (0..3).find(|&i| i != leader).expect("a follower");
    let mut c = e.client(leader);
    create(&mut c, "/s");
    for n in 0..30 {
        create(&mut c, &format!("/s/before-{n:02}"));
    }
    e.kill(f);
    for n in 0..30 {
        create(&mut c, &format!("/s/while-away-{n:02}"));
    }
    e.wipe_data(f);
    let seen = e.sync_modes(leader, f + 1).len();
    e.launch(f);
    assert_eq!(next_sync_mode(&e, leader, f, seen), "Snap", "{}", e.logs());
    assert_eq!(settled(&e), leader);
    create(&mut e.client(f), "/s/through-the-new-follower");
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_eq!(tree.iter().filter(|z| z.path.starts_with("/s/")).count(), 61);
}

/// A follower far behind a leader whose log no longer reaches back to it is synced by SNAP.
/// The leader's log is made short the way zkrs shortens a log for real: that server was itself
/// synced by SNAP (its log restarts at the snapshot), after the stale follower went away.
/// Servers A (stale), B and the first leader L: A stops; more writes; B loses its data and is
/// synced by SNAP; more writes (B logs them); L dies and A returns: B, with the higher zxid,
/// leads, and its log starts above A's last zxid, so neither its in-memory window nor its log
/// can DIFF A. A ends with everything; L comes back; all equal.
#[test]
fn a_follower_behind_the_leaders_log_is_synced_by_snap() {
    let mut e = Ensemble::start_with_extra(3, "");
    let first = settled(&e);
    let others: Vec<usize> = (0..3).filter(|&i| i != first).collect();
    let (a, b) = (others[0], others[1]);
    let mut c = e.client(first);
    create(&mut c, "/f");
    for n in 0..20 {
        create(&mut c, &format!("/f/early-{n:02}"));
    }
    wait_logged(&e, a, "/f/early-19");
    e.kill(a);
    for n in 0..20 {
        create(&mut c, &format!("/f/middle-{n:02}"));
    }
    e.kill(b);
    e.wipe_data(b);
    let seen = e.sync_modes(first, b + 1).len();
    e.launch(b);
    assert_eq!(next_sync_mode(&e, first, b, seen), "Snap", "{}", e.logs());
    e.wait_mntr(first, "zk_synced_followers", "1");
    let mut c = e.client(first);
    for n in 0..20 {
        create(&mut c, &format!("/f/late-{n:02}"));
    }
    wait_logged(&e, b, "/f/late-19");
    e.kill(first);
    e.launch(a);
    let leader = e.wait_for_leader_among(&[a, b]);
    assert_eq!(leader, b, "the server with the longest history leads\n{}", e.logs());
    assert_eq!(e.sync_modes(b, a + 1), ["Snap"], "{}", e.logs());
    for line in e.log(b).lines().filter(|l| l.contains("syncing learner")) {
        eprintln!("server {}: {line}", b + 1);
    }
    e.launch(first);
    assert_eq!(settled(&e), b);
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_eq!(tree.iter().filter(|z| z.path.starts_with("/f/")).count(), 60);
}

/// Every server of a three-server ensemble restarted in turn (SIGKILL, then started again),
/// followers first and the leader last, while clients with the three-server connect string write
/// throughout, each with a session and an ephemeral. Each server is back in sync before the next
/// goes. No acknowledged write is lost, each client kept its session (same id, its ephemeral
/// still there), and the trees are equal.
#[test]
fn a_rolling_restart_under_load_loses_nothing_and_keeps_the_sessions() {
    let mut e = Ensemble::start_with_extra(3, "");
    let first_leader = settled(&e);
    let mut c = e.client(first_leader);
    create(&mut c, "/load");
    create(&mut c, "/eph");
    drop(c.close());
    let addrs: Vec<SocketAddr> = e.members.iter().map(|m| m.client).collect();
    let specs: Vec<WriterSpec> = (0..3)
        .map(|k| {
            // Each writer starts on a different server.
            let mut servers = addrs.clone();
            servers.rotate_left(k);
            WriterSpec {
                depth: 4,
                keep_session: true,
                ephemeral: true,
                ..WriterSpec::new(&format!("w{k}"), servers)
            }
        })
        .collect();
    let load = Load::start(specs, 1000);
    load.wait_acked(&e, 100);
    let mut order: Vec<usize> = (0..3).filter(|&i| i != first_leader).collect();
    order.push(first_leader);
    for &i in &order {
        let before = load.acked();
        e.kill(i);
        e.launch(i);
        let leader = settled(&e);
        wait_until(&e, &format!("server {} to serve", i + 1), || {
            matches!(e.mode(i).as_deref(), Some("leader" | "follower"))
        });
        eprintln!("server {} restarted; the leader is server {}", i + 1, leader + 1);
        load.wait_acked(&e, before + 100);
    }
    let outs = load.finish();
    for o in &outs {
        assert!(o.connections > 1, "writer {} never had to reconnect: every server restarted", o.name);
        assert!(o.client.is_some(), "writer {} ended without a connection", o.name);
    }
    // The sessions are alive: each ephemeral is there, owned by the session its writer began with.
    for i in 0..3 {
        let tree = dump_tree(&mut e.client(i), "/eph");
        for o in &outs {
            let path = format!("/eph/{}", o.name);
            let z = tree.iter().find(|z| z.path == path);
            assert_eq!(
                z.map(|z| z.stat.ephemeral_owner),
                Some(o.session),
                "server {}: {path} of session 0x{:x}",
                i + 1,
                o.session
            );
        }
    }
    let acked = all_acked(&outs);
    for o in outs {
        let reply = o.client.expect("connected").close();
        assert_eq!(reply.map(|r| r.err()), Some(ErrorCode::Ok), "closing writer {}'s session", o.name);
    }
    let tree = equal_trees(&e, &[0, 1, 2]);
    assert_has_all(&tree, &acked, "the ensemble");
    assert!(tree.iter().all(|z| !z.path.starts_with("/eph/")), "closed sessions left ephemerals");
}
