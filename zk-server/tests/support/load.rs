//! Pipelined write load on an ensemble, and the checks after a fault: writer threads that
//! record which writes were acknowledged ([`Load`]), and every acknowledged write on every server
//! with every tree equal ([`assert_has_all`], [`equal_trees`]). Waits are polling loops with
//! generous deadlines: the outcomes never depend on how fast the machine is.

use super::client::RawClient;
use super::ensemble::*;
use bytes::Bytes;
use std::collections::{BTreeSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use zk_proto::*;

/// How long any one wait may take before the test fails (the machine may be loaded).
pub const PATIENCE: Duration = Duration::from_secs(60);
/// The session timeout the writers ask for (the ensembles' maximum: 20 ticks of 500 ms).
pub const SESSION_MS: i32 = 10_000;

/// Polls `done` until it holds; fails after [`PATIENCE`] with the servers' logs.
pub fn wait_until(e: &Ensemble, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What one writer thread does.
#[derive(Clone)]
pub struct WriterSpec {
    /// Its name: its writes are `/load/<name>-<n>`, its ephemeral `/eph/<name>`.
    pub name: String,
    /// The servers it may use, tried in turn from the first whenever its connection is lost.
    pub servers: Vec<SocketAddr>,
    /// Writes in flight at once.
    pub depth: usize,
    /// Resume the same session on reconnection (else a new session each time).
    pub keep_session: bool,
    /// Create the ephemeral `/eph/<name>` on the first connection.
    pub ephemeral: bool,
}

impl WriterSpec {
    pub fn new(name: &str, servers: Vec<SocketAddr>) -> WriterSpec {
        WriterSpec { name: name.into(), servers, depth: 16, keep_session: false, ephemeral: false }
    }
}

/// What one writer saw.
pub struct Outcome {
    pub name: String,
    /// The (last) session.
    pub session: i64,
    /// Writes the ensemble acknowledged (the reply said Ok).
    pub acked: Vec<String>,
    /// Writes whose fate the writer never learnt (the connection broke first).
    pub unknown: Vec<String>,
    /// Writes refused with an error.
    pub refused: Vec<(String, ErrorCode)>,
    /// Successful handshakes.
    pub connections: usize,
    /// A handshake resuming the session was answered with another session or a zero timeout.
    pub expired: bool,
    /// No server took the writer back for [`PATIENCE`].
    pub gave_up: bool,
    /// Its connection at the end, session still open.
    pub client: Option<RawClient>,
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
pub struct Load {
    shared: Arc<Shared>,
    /// How many writes beyond the number awaited the writers may send: what keeps them writing
    /// while the test injects its next fault.
    slack: usize,
    writers: Vec<JoinHandle<Outcome>>,
}

impl Load {
    pub fn start(specs: Vec<WriterSpec>, slack: usize) -> Load {
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

    /// A writer of [`WriterSpec::new`] on each member of `e` in `on`, named `s<myid>`, keeping to
    /// that member.
    pub fn one_on_each(e: &Ensemble, on: &[usize], slack: usize) -> Load {
        let specs =
            on.iter().map(|&i| WriterSpec::new(&format!("s{}", i + 1), vec![e.members[i].client])).collect();
        Load::start(specs, slack)
    }

    /// Writes acknowledged so far, all writers together.
    pub fn acked(&self) -> usize {
        self.shared.acked.load(Ordering::SeqCst)
    }

    /// Lets the writers send up to `n` plus the slack writes in all, and waits until `n` were
    /// acknowledged.
    pub fn wait_acked(&self, e: &Ensemble, n: usize) {
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
    pub fn finish(self) -> Vec<Outcome> {
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
pub fn all_acked(outs: &[Outcome]) -> BTreeSet<String> {
    outs.iter().flat_map(|o| o.acked.iter().cloned()).collect()
}

/// Fails unless every path in `acked` is a znode of `tree` (of a member of `e`).
pub fn assert_has_all(e: &Ensemble, tree: &[Znode], acked: &BTreeSet<String>, who: &str) {
    let have: BTreeSet<&str> = tree.iter().map(|z| z.path.as_str()).collect();
    let missing: Vec<&String> = acked.iter().filter(|p| !have.contains(p.as_str())).collect();
    assert!(
        missing.is_empty(),
        "{who} lost {} acknowledged writes: {missing:?}\n{}",
        missing.len(),
        e.logs()
    );
}

/// Dumps the tree of every member in `members`, fails unless they are all equal, and returns it.
pub fn equal_trees(e: &Ensemble, members: &[usize]) -> Vec<Znode> {
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

/// The sync modes ("Diff", "Trunc", "Snap") the leader `leader` gave member `i` so far, oldest
/// first, as a zkrs server logs them: the leader's log when it is zkrs, else the learner's; None
/// when both are Apache servers (which log neither).
pub fn sync_modes_given(e: &Ensemble, leader: usize, i: usize) -> Option<Vec<String>> {
    match (e.members[leader].kind, e.members[i].kind) {
        (Kind::Zkrs, _) => Some(e.sync_modes(leader, i + 1)),
        (Kind::Apache, Kind::Zkrs) => Some(e.received_sync_modes(i)),
        (Kind::Apache, Kind::Apache) => None,
    }
}

/// Waits until the leader `leader` synced member `i` again (beyond `seen` earlier syncs) and
/// returns the mode; one of them must be zkrs ([`sync_modes_given`]).
pub fn next_sync_mode(e: &Ensemble, leader: usize, i: usize, seen: usize) -> String {
    let mut modes = Vec::new();
    wait_until(e, &format!("the leader (server {}) to sync server {}", leader + 1, i + 1), || {
        modes = sync_modes_given(e, leader, i).expect("a zkrs leader or learner");
        modes.len() > seen
    });
    modes[seen].clone()
}

/// Waits until every running member has applied all the leader `leader` has (the same zxid).
pub fn in_step(e: &Ensemble, leader: usize) {
    let what = format!("every member to reach the zxid of the leader, server {}", leader + 1);
    wait_until(e, &what, || {
        let at = e.zxid(leader);
        at.is_some() && (0..e.members.len()).all(|i| e.members[i].child.is_none() || e.zxid(i) == at)
    });
}

/// What [`leader_killed_under_load`] saw.
pub struct KillRun {
    /// The leader the survivors elected.
    pub new_leader: usize,
    /// How it synced the killed leader when that came back (None when neither logs it).
    pub mode: Option<String>,
    /// Every write acknowledged, before the kill and after.
    pub acked: BTreeSet<String>,
}

/// Kills the leader `leader` of `e` (every member running) with SIGKILL while a
/// writer on each follower pipelines creates under `/load`; the survivors elect a new leader and
/// acknowledge more writes. Fails unless a writer lost its connection to the kill, writes of the
/// old epoch and of a later one were acknowledged, every acknowledged write is on every survivor,
/// and, the killed server restarted and caught up, every member's tree is the same (stat for
/// stat) and has them all.
pub fn leader_killed_under_load(e: &mut Ensemble, leader: usize) -> KillRun {
    let members: Vec<usize> = (0..e.members.len()).collect();
    let followers: Vec<usize> = members.iter().copied().filter(|&i| i != leader).collect();
    let made = e.client(followers[0]).create("/load", b"", CreateMode::Persistent);
    assert_eq!(made.err(), ErrorCode::Ok, "create /load\n{}", e.logs());
    in_step(e, leader);
    let load = Load::one_on_each(e, &followers, 600);
    load.wait_acked(e, 300);
    let old_epoch = e.zxid(leader).expect("the leader's zxid") >> 32;
    e.kill(leader);
    let at_kill = load.acked();
    let new_leader = e.wait_for_leader_among(&followers);
    load.wait_acked(e, at_kill + 300);
    let outs = load.finish();
    let acked = all_acked(&outs);
    assert!(
        outs.iter().any(|o| o.connections > 1),
        "no writer lost its connection to the kill\n{}",
        e.logs()
    );
    eprintln!("{} writes acknowledged, {at_kill} of them before the kill", acked.len());
    for &i in &followers {
        assert_has_all(e, &dump_tree(&mut e.client(i), "/"), &acked, &format!("survivor {}", i + 1));
    }

    let seen = sync_modes_given(e, new_leader, leader).map(|m| m.len());
    e.launch(leader);
    let mode = seen.map(|seen| next_sync_mode(e, new_leader, leader, seen));
    eprintln!("the killed leader (server {}) caught up by {mode:?}", leader + 1);
    assert_eq!(e.wait_for_leader(), new_leader, "{}", e.logs());
    in_step(e, new_leader);
    let tree = equal_trees(e, &members);
    assert_has_all(e, &tree, &acked, "the ensemble");
    let epochs: Vec<i64> =
        tree.iter().filter(|z| acked.contains(&z.path)).map(|z| z.stat.czxid >> 32).collect();
    let before = epochs.iter().filter(|&&x| x == old_epoch).count();
    let after = epochs.iter().filter(|&&x| x > old_epoch).count();
    assert!(
        before > 0 && after > 0 && before + after == acked.len(),
        "acknowledged writes: {before} of epoch {old_epoch:#x}, {after} of later ones, {} in all",
        acked.len()
    );
    for &i in &members {
        assert_eq!(digest_mismatches(e, i), Some(0), "member {}'s txn digests\n{}", i + 1, e.logs());
    }
    KillRun { new_leader, mode, acked }
}

/// `zk_digest_mismatches_count` from member `i`'s mntr: txns after which its tree's digest was
/// not the one the proposal carried (zkrs and Apache both count them).
pub fn digest_mismatches(e: &Ensemble, i: usize) -> Option<i64> {
    let text = four(e.members[i].client, "mntr")?;
    text.lines()
        .find_map(|l| l.strip_prefix("zk_digest_mismatches_count"))
        .and_then(|v| v.trim().parse().ok())
}
