//! The leader of a mixed ensemble of Apache ZooKeeper 3.8 and zkrs servers (loopback ports) killed
//! with SIGKILL under pipelined load, in both directions: an Apache leader with zkrs followers,
//! and a zkrs leader with Apache followers. A writer on each follower pipelines creates; the
//! survivors (of the followers' kind) elect a new leader and acknowledge more writes; every
//! acknowledged write is on every survivor; the killed server comes back under a leader of the
//! other kind, catches up, and every tree is the same, stat for stat. The scenario is
//! `ensemble_faults.rs`'s (`support::load::leader_killed_under_load`).
#![allow(clippy::disallowed_methods)]

mod support;

use support::ensemble::*;
use support::load::*;

/// Three servers, server 3 of kind `leader` and servers 1 and 2 of the other. Server 3 is made
/// to lead (it starts with server 1 only: with equal histories the largest id leads), then killed
/// under load.
fn leader_of_kind_killed_under_load(leader: Kind) {
    let other = if leader == Kind::Zkrs { Kind::Apache } else { Kind::Zkrs };
    let mut e = Ensemble::configure_with_extra(&[other, other, leader], &[], "");
    for m in &mut e.members {
        // Apache's own log, for the failure messages.
        m.apache_log = m.kind == Kind::Apache;
    }
    e.launch(2);
    e.launch(0);
    e.wait_mode(2, "leader");
    e.launch(1);
    assert_eq!(e.wait_for_leader(), 2, "{}", e.logs());
    let run = leader_killed_under_load(&mut e, 2);
    assert_ne!(run.new_leader, 2);
    eprintln!(
        "{leader:?} leader killed: {} writes acknowledged; it came back by {:?}",
        run.acked.len(),
        run.mode
    );
}

/// An Apache 3.8 leader with two zkrs followers is killed under load: the zkrs servers elect one
/// of them and go on, and the Apache server comes back as a zkrs leader's follower.
#[test]
fn an_apache_leader_killed_under_pipelined_load_loses_no_acknowledged_write_of_its_zkrs_followers() {
    leader_of_kind_killed_under_load(Kind::Apache);
}

/// A zkrs leader with two Apache 3.8 followers is killed under load: the Apache servers elect one
/// of them and go on, and the zkrs server comes back as an Apache leader's follower.
#[test]
fn a_zkrs_leader_killed_under_pipelined_load_loses_no_acknowledged_write_of_its_apache_followers() {
    leader_of_kind_killed_under_load(Kind::Zkrs);
}
