//! Regression: a core that replayed its log at start wants a snapshot at once, but takes none
//! while its role is Down (an ensemble member electing or syncing with its leader). Its timer
//! must not report that snapshot as due meanwhile: the driver wakes whenever the timer is due,
//! so a deadline that never moves made it spin, and the spinning task starved the connection
//! task that would have synced the learner (a restarted follower never rejoined).

use std::sync::Arc;
use zk_server::config::ServerConfig;
use zk_server::core::{CoreConfig, CounterRule, Now, Role, ServerCore, SnapshotSettings, VoterSet};
use zk_server::settings::Settings;

fn core(snapshot_now: bool, now: Now) -> ServerCore {
    let text = "tickTime=2000\ndataDir=/nonexistent\nclientPort=2181\n";
    let cfg = ServerConfig::parse(text, None).expect("zoo.cfg");
    let settings = Arc::new(Settings::from_config(&cfg).expect("settings"));
    let cfg = CoreConfig {
        settings: settings.clone(),
        server_id: 1,
        voters: VoterSet::new(1, [1, 2, 3]),
        counter_rule: CounterRule::StopAtEpochEnd,
        snapshots: Some(SnapshotSettings {
            snap_count: settings.snap_count,
            snap_size_bytes: settings.snap_size_bytes,
            pace_floor: 0,
            idle_ms: 0,
            nodes_per_step: zk_server::core::NODES_PER_STEP,
        }),
        snapshot_now,
        seed: 1,
        sasl_seed: [1; 32],
    };
    let tree = zk_tree::TreeConfig { tick_ms: settings.tick_ms, ..Default::default() };
    let mut db = zk_tree::Database::new(tree);
    db.start_leading(now.mono_ms());
    ServerCore::new(cfg, db, now)
}

#[test]
fn a_snapshot_due_while_down_is_no_deadline_until_the_core_serves_again() {
    let now = Now { mono_us: 5_000_000, wall_ms: 1_700_000_000_000 };
    let mut c = core(true, now);
    c.set_role(Role::Down, VoterSet::new(1, [1, 2, 3]), None, now);
    c.handle_timeout(now);
    let due = c.poll_timeout();
    assert!(
        due.is_none_or(|ms| ms > now.mono_ms()),
        "down, the core reports a deadline already passed ({due:?} at {} ms): the driver would spin",
        now.mono_ms()
    );
    // Serving again, the snapshot it owes is due at once.
    c.set_role(Role::Learner { observer: false }, VoterSet::new(1, [1, 2, 3]), None, now);
    assert_eq!(c.poll_timeout(), Some(0), "the snapshot owed since the start is due once serving");
}
