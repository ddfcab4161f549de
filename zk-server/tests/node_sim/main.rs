//! Deterministic simulation of whole ensembles of the real server node.
//!
//! Each simulated server runs `zk_server::node::Node` (the server core and its replica, the
//! code `zkrs-server` runs) over zk-log's log, snapshot files and epoch files on `FaultStorage`
//! disks, started from them as `zkrs-server` starts. Nothing of the server is re-implemented
//! here: the simulation only carries out the node's outputs, as the driver does, against
//! simulated disks (delayed, slowed, losing unsynced pages out of order at a power loss), a
//! simulated network (delays, partitions, dropped connections, stale election notifications)
//! and clients that speak the client protocol to the node. One seed draws everything.
//!
//! Checks, as it runs: at most one leader per epoch; every new leader holds every acknowledged
//! write and everything an earlier epoch committed (the history a quorum acknowledged at
//! NEWLEADER); a learner's first ACK after NEWLEADER acknowledges it, with every record its sync
//! handed the log durable and currentEpoch written, and currentEpoch is written only once that
//! sync is durable; a reload for a role reads a log with nothing pending; no log gets a hole.
//! Once healed: the ensemble converges (one leader, everyone in broadcast at the same zxid),
//! every tree is equal node for node and digest for digest and holds every acknowledged and
//! committed write, no digest mismatch was counted, the shared keys' histories are
//! linearizable, no sequential name was handed out twice, and no server stopped or failed to
//! start.
//!
//! `ZAB_SEEDS=N cargo test --release -p zk-server --test node_sim seeds_` runs N seeds per
//! configuration (a few by default); a failing seed prints the command that replays it with a
//! trace: `ZAB_SEED=S ZAB_CONFIG=name cargo test ... replay` (`ZAB_LOG=1` adds the nodes' log
//! lines). The debug build (the workspace tests, and so CI) runs 10 seeds of each of the seven
//! configurations.
//!
//! The `reconfig` configuration (three voters, two observers, reconfigEnabled) adds reconfig
//! requests to the faults, sent by a client as an administrator sends them; its end checks
//! demand that every server, members and removed non-voting followers alike, has the final
//! configuration in force and in /zookeeper/config and serves as it places it, and that every
//! acknowledged reconfig came into force.
//!
//! Named scenarios (`scenarios.rs`: the replication bugs of Apache ZooKeeper that lost data and
//! the findings of earlier simulations) script the same world: disks preloaded before the first
//! start, runs stopped at a precise input or output of a node, crashes keeping only what was
//! synced, partitions and slow disks, under the same checks. The leadership handover's
//! (`handover.rs`: `ydld` and `rqld` under write load, with the successor dying at each step,
//! asked of a non-leader, given up) run each over many seeds, and the `handover` configuration
//! adds operators' handovers to the random faults. Forced recovery's (`recovery.rs`, `rcvr_`)
//! run a survivor leading alone, stale members of the lost quorum coming back, and refusals.
#![allow(clippy::disallowed_methods)]

// The allocator zkrs-server runs on (zk-server's main.rs), so the node allocates here as it
// does there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod client;
mod handover;
mod linear;
mod net;
mod recovery;
mod scenarios;
mod server;
mod world;

use world::{Keep, Params, World};

/// Seeds per configuration: `ZAB_SEEDS`, or `default` in a release build. A debug build (the
/// workspace tests, CI) runs 10 a configuration: its zk-* crates are built at opt-level 1 (see
/// the workspace Cargo.toml), about half a second a seed on one core.
fn seeds(default: u64) -> u64 {
    let default = if cfg!(debug_assertions) { 10 } else { default };
    std::env::var("ZAB_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The first seed: `ZAB_SEED_BASE`, or 0.
fn seed_base() -> u64 {
    std::env::var("ZAB_SEED_BASE").ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn config(name: &str) -> Params {
    match name {
        "three" => Params::three(),
        "five" => Params::five(),
        "observer" => Params::with_observer(),
        "single" => Params::single_voter(),
        "reconfig" => Params::reconfig(),
        "epochs" => Params::short_epochs(),
        "handover" => Params::handovers(),
        other => {
            panic!(
                "unknown configuration {other} (three, five, observer, single, reconfig, epochs, handover)"
            )
        }
    }
}

fn run_seed(name: &str, seed: u64, trace: bool) -> Result<World, String> {
    let mut w = World::new(seed, config(name), trace);
    w.start();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.finish()));
    match result {
        Ok(Ok(())) => Ok(w),
        Ok(Err(e)) => Err(e),
        Err(panic) => Err(format!(
            "panicked: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

fn run_many(name: &str, n: u64) -> std::collections::BTreeMap<&'static str, u64> {
    let base = seed_base();
    let mut failed = Vec::new();
    let mut totals: std::collections::BTreeMap<&'static str, u64> = Default::default();
    let (mut answered, mut unknown) = (0, 0);
    for seed in base..base + n {
        match run_seed(name, seed, false) {
            Ok(w) => {
                for (k, v) in &w.stats {
                    *totals.entry(k).or_insert(0) += v;
                }
                answered += w.rec.answered;
                unknown += w.rec.unknown;
            }
            Err(e) => {
                eprintln!("seed {seed} ({name}) failed: {e}");
                eprintln!("replay: ZAB_SEED={seed} ZAB_CONFIG={name} cargo test --release -p zk-server --test node_sim replay -- --nocapture");
                failed.push(seed);
            }
        }
    }
    eprintln!("{name}: {n} seeds from {base}, {} failed; {answered} operations answered, {unknown} unknown; {totals:?}", failed.len());
    assert!(failed.is_empty(), "{name}: seeds {failed:?} failed");
    totals
}

#[test]
fn seeds_three() {
    run_many("three", seeds(4));
}

#[test]
fn seeds_five() {
    run_many("five", seeds(2));
}

#[test]
fn seeds_observer() {
    run_many("observer", seeds(2));
}

#[test]
fn seeds_single_voter() {
    run_many("single", seeds(2));
}

#[test]
fn seeds_reconfig() {
    run_many("reconfig", seeds(2));
}

#[test]
fn seeds_short_epochs() {
    let n = seeds(2);
    let totals = run_many("epochs", n);
    // Leaders do run out of zxids under the faults (about a third of the epochs, in release
    // runs).
    if n >= 10 {
        assert!(totals.get("epochs run to their last zxid").copied().unwrap_or(0) > 0, "{totals:?}");
    }
}

#[test]
fn seeds_handover() {
    let n = seeds(2);
    let totals = run_many("handover", n);
    if n >= 10 {
        assert!(totals.get("handovers started").copied().unwrap_or(0) > 0, "{totals:?}");
        assert!(totals.get("leaderships requested").copied().unwrap_or(0) > 0, "{totals:?}");
    }
}

/// Replays `ZAB_SEED` of `ZAB_CONFIG` with a trace (`ZAB_LOG=1`: and the nodes' log lines).
#[test]
fn replay() {
    let Ok(seed) = std::env::var("ZAB_SEED") else { return };
    if std::env::var("ZAB_LOG").is_ok() {
        // The node's own log lines, each in its server's span (server id, sim time).
        let _ = tracing_subscriber::fmt()
            .with_max_level(if std::env::var("ZAB_LOG").as_deref() == Ok("trace") {
                tracing::Level::TRACE
            } else {
                tracing::Level::DEBUG
            })
            .without_time()
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .try_init();
    }
    let seed: u64 = seed.parse().expect("ZAB_SEED is a number");
    let name = std::env::var("ZAB_CONFIG").unwrap_or_else(|_| "three".into());
    if let Err(e) = run_seed(&name, seed, true) {
        panic!("seed {seed} ({name}): {e}");
    }
}

/// F9: a leader whose epoch's zxid counter runs out steps down, and the next election starts a
/// new epoch: with no fault at all, every epoch after the first is such a handover. No server
/// stops, and every acknowledged write survives each one (the end checks).
#[test]
fn an_exhausted_epoch_hands_over_to_a_new_epoch() {
    let mut p = Params::three();
    p.faults = false;
    p.run_ms = 10_000;
    p.clients = 6;
    p.initial_zxid = Some(u32::MAX - 150);
    let mut w = World::new(5, p, false);
    w.start();
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    let epochs = w.epochs();
    eprintln!("epochs {epochs:?}, {} answers, {:?}", w.rec.answered, w.stats);
    assert!(epochs.len() >= 4, "epochs with a leader: {epochs:?}");
    // Each handover came from an epoch run to its last zxid (0x...fffffffe): nothing else
    // changes leaders in a run without faults.
    let run_out = w.stats.get("epochs run to their last zxid").copied().unwrap_or(0);
    assert!(run_out as usize >= epochs.len() - 1, "epochs run out: {run_out}, epochs {epochs:?}");
    assert!(w.rec.acked.len() > 500, "writes went on: {} acknowledged", w.rec.acked.len());
}

/// F2: a leader whose voter set is itself alone (one participant and observers, with
/// standaloneEnabled=false) proposes and commits to its learners: the observers reach its
/// zxid and their clients' writes and synced reads are served.
#[test]
fn single_voter_leader_replicates_to_its_observers() {
    let mut p = Params::single_voter();
    p.faults = false;
    p.run_ms = 5_000;
    let mut w = World::new(1, p, false);
    w.start();
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    assert!(w.rec.answered > 50, "the clients were served: {} answers", w.rec.answered);
    assert!(!w.rec.acked.is_empty());
}

/// Sessions used through followers stay alive: a learner hands the sessions its clients used
/// to the leader in its PING replies, so with no faults no client finds its session expired
/// when it reconnects. A follower that kept them from the leader lets it expire sessions whose
/// clients are busy. (A touch sent one PING late would not fail this: a tick is far below the
/// session timeout; the learner takes the touched sessions before it handles any packet.)
#[test]
fn sessions_used_through_followers_do_not_expire() {
    let mut p = Params::three();
    p.faults = false;
    p.run_ms = 6 * client::SESSION_TIMEOUT_MS as u64;
    p.clients = 6;
    let mut w = World::new(3, p, false);
    w.start();
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    assert!(w.rec.answered > 1_000, "the clients were served: {} answers", w.rec.answered);
    assert_eq!(w.stat("sessions found expired"), 0, "{:?}", w.stats);
}

/// Followers take snapshots again and again, as the leader does: the log-bytes trigger counts
/// what a learner logs of its leader's proposals too (it grew only on the leader's write path,
/// so a follower stopped after its first snapshot and never purged its log).
#[test]
fn followers_snapshot_again_and_again() {
    let mut p = Params::three();
    p.faults = false;
    p.run_ms = 20_000;
    p.clients = 6;
    p.snap_count = 40;
    let mut w = World::new(2, p, false);
    w.start();
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    let leader = w.leader().expect("a leader");
    for s in &w.servers {
        assert!(
            s.snapshots_written >= 3,
            "server {} (leader {leader}) wrote {} snapshots",
            s.sid,
            s.snapshots_written
        );
    }
}

/// F1: an election while a slow snapshot is under way. The database is replaced (reloaded)
/// with the snapshot half written; the snapshot must be abandoned, not finished over the new
/// tree, so that a restart from the newest snapshot loses nothing. Then every server loses its
/// power, and the restarted ensemble must still hold every acknowledged write.
#[test]
fn a_snapshot_under_way_when_the_database_is_replaced_is_abandoned() {
    let mut p = Params::three();
    p.faults = false;
    p.run_ms = 3_000;
    p.snap_count = 30;
    p.snapshot_chunk_ms = 400;
    p.clients = 6;
    let mut w = World::new(3, p, false);
    w.start();
    w.run_until_cond(20_000, "a leader", |w| w.leader().is_some()).unwrap_or_else(|e| panic!("{e}"));
    for round in 0..6 {
        w.run_for(1_500);
        // The leader loses its quorum for a moment: it reloads and elects again, with its
        // snapshot (slow) under way.
        let leader = w.leader().unwrap_or(1);
        w.partition([leader].into_iter().collect(), 800);
        w.run_for(2_000);
        if round % 2 == 1 {
            for sid in 1..=3 {
                w.power_loss(sid, Keep::Durable, 100 + 50 * sid as u64);
            }
        }
    }
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{:?}", w.stats);
    assert!(w.stats.get("snapshots").copied().unwrap_or(0) > 0, "snapshots were written: {:?}", w.stats);
    assert!(
        w.stats.get("snapshots abandoned").copied().unwrap_or(0) > 0,
        "the window was hit: {:?}",
        w.stats
    );
}

/// A follower far behind is synced by a SNAP streamed in many pieces while the leader goes on
/// committing (a fuzzy snapshot, as Apache's are); the proposals after it bring the follower's
/// tree to the leader's, and the intermediate trees are never compared (review N1: each pair
/// mismatched the digest and sent the learner back to elect, over and over).
#[test]
fn a_learner_synced_by_a_fuzzy_snap_under_writes_converges() {
    let mut p = Params::three();
    p.faults = false;
    p.run_ms = 25_000;
    p.clients = 6;
    p.snap_count = 20;
    let mut w = World::new(4, p, false);
    w.start();
    w.run_until_cond(20_000, "a leader", |w| w.leader().is_some()).unwrap_or_else(|e| panic!("{e}"));
    let leader = w.leader().expect("a leader");
    let behind = if leader == 3 { 2 } else { 3 };
    // Cut one follower off while the others write and snapshot (and purge the log it needs).
    w.partition([behind].into_iter().collect(), 12_000);
    w.run_for(14_000);
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    let snaps = w.stats.get("syncs by SNAP").copied().unwrap_or(0);
    let pieces = w.stats.get("SNAP stream pieces").copied().unwrap_or(0);
    assert!(snaps > 0 && pieces > snaps, "a SNAP streamed in pieces: {:?}", w.stats);
}
