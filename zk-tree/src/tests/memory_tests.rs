//! The memory brake ([`crate::memory`]): growing writes refused past the limit, everything else
//! served, in-flight growth counted, and writes taken again once deletes free enough.

use super::support::*;
use crate::memory::{MEMORY_BRAKE_ERROR, NODE_OVERHEAD_BYTES};
use crate::{Outcome, TreeConfig};
use zk_proto::*;

/// A harness whose tree has room for `room` more bytes than it holds at the start.
fn braked(room: u64) -> Harness {
    let fresh = Harness::new().db.tree_memory_bytes();
    Harness::with(TreeConfig {
        extended_types_enabled: true,
        memory_soft_limit_bytes: fresh + room,
        ..TreeConfig::default()
    })
}

fn create(h: &mut Harness, path: &str, data: &[u8]) -> Outcome {
    h.outcome(S1, Request::Create(creq(path, data, 0)))
}

#[test]
fn growing_writes_refused_past_the_limit_and_taken_again_after_deletes() {
    // Room for exactly four nodes of a 3-byte path and 100 bytes of data.
    let mut h = braked(4 * (3 + 100 + NODE_OVERHEAD_BYTES));
    let mut created = Vec::new();
    loop {
        let path = format!("/n{}", created.len());
        match create(&mut h, &path, &[7; 100]) {
            Outcome::Created { .. } => created.push(path),
            Outcome::Error(e) => {
                assert_eq!(e, MEMORY_BRAKE_ERROR);
                break;
            }
            other => panic!("{other:?}"),
        }
        assert!(created.len() < 100, "the brake never came on");
    }
    assert!(h.db.memory_brake_on());
    assert_eq!(created.len(), 5, "overshoots by one write at most");
    assert_eq!(h.db.memory_refusals(), 1);
    let over = h.db.tree_memory_bytes();

    // Every growing write is refused: a setData with longer data, sequential and ephemeral
    // creates, a multi holding a create; nothing of them is applied.
    assert_eq!(h.set_data("/n0", &[1; 101], -1), Outcome::Error(MEMORY_BRAKE_ERROR));
    assert_eq!(h.create("/s-", 2), Outcome::Error(MEMORY_BRAKE_ERROR));
    assert_eq!(h.create("/e", 1), Outcome::Error(MEMORY_BRAKE_ERROR));
    let multi = Request::Multi(vec![
        Request::Check(CheckVersionRequest { path: "/n0".into(), version: 0 }),
        Request::Create(creq("/m", b"", 0)),
    ]);
    let Outcome::Multi(results) = h.outcome(S1, multi) else { panic!("a multi result") };
    assert_eq!(results[1], OpResult::Error(MEMORY_BRAKE_ERROR));
    assert_eq!(h.db.tree_memory_bytes(), over, "no refused write grew the tree");
    assert_eq!(h.db.memory_refusals(), 5);

    // What does not grow the tree goes on: reads, a setData of the same or shorter length, a
    // setACL, writes under /zookeeper/.
    let auth = h.auth.clone();
    assert!(h.db.get_data("/n0", &auth, None).is_ok());
    assert!(matches!(h.set_data("/n0", &[2; 100], -1), Outcome::SetData { .. }));
    assert!(matches!(h.set_data("/n1", &[2; 10], -1), Outcome::SetData { .. }));
    let set_acl = Request::SetAcl(SetAclRequest { path: "/n2".into(), acl: world(), version: -1 });
    assert!(matches!(h.outcome(S1, set_acl), Outcome::SetAcl { .. }));
    assert!(matches!(create(&mut h, "/zookeeper/quota/x", b""), Outcome::Created { .. }));
    assert_eq!(h.db.memory_refusals(), 5);

    // Deletes free the tree; below the limit a create is taken again.
    for p in &created[2..] {
        assert_eq!(h.delete(p, -1), Outcome::Deleted);
    }
    assert!(!h.db.memory_brake_on());
    assert!(matches!(create(&mut h, "/again", &[7; 100]), Outcome::Created { .. }));
}

#[test]
fn writes_in_flight_count_before_they_apply() {
    let mut h = braked(3 * (3 + 100 + NODE_OVERHEAD_BYTES));
    // Prepped, not applied: each counts at once, so the fifth is refused before any applies.
    let mut prepped = Vec::new();
    for i in 0..5 {
        prepped.push(h.prep(S1, &Request::Create(creq(&format!("/f{i}"), &[0; 100], 0))));
    }
    let refused: Vec<bool> = prepped.iter().map(|(_, t)| matches!(t, Txn::Error(_))).collect();
    assert_eq!(refused, [false, false, false, false, true]);
    // Taken back (a full log's refusal), their growth no longer counts.
    let first = prepped[0].0.zxid;
    h.db.abandon_after(first - 1);
    assert!(!h.db.memory_brake_on());
    // A failed multi takes back the growth of its earlier ops.
    let before = h.db.tree_memory_bytes();
    let multi = Request::Multi(vec![
        Request::Create(creq("/g", &[0; 50], 0)),
        Request::Delete(DeleteRequest { path: "/missing".into(), version: -1 }),
    ]);
    let _ = h.prep(S1, &multi);
    assert_eq!(h.db.tree_memory_bytes(), before);
}

#[test]
fn no_limit_no_brake() {
    let mut h = Harness::new();
    for i in 0..50 {
        assert!(matches!(create(&mut h, &format!("/n{i}"), &[0; 1000]), Outcome::Created { .. }));
    }
    assert!(!h.db.memory_brake_on());
    assert_eq!(h.db.memory_refusals(), 0);
}

#[test]
fn followers_apply_what_the_leader_prepped_whatever_their_size() {
    // A learner's database never preps: applying a committed create past the limit works.
    let mut leader = Harness::new();
    let (hdr, txn) = leader.prep(S1, &Request::Create(creq("/big", &[0; 4000], 0)));
    let mut follower = braked(0);
    follower.db.apply(&hdr, &txn);
    assert!(follower.db.tree().get("/big").is_some());
    assert!(follower.db.memory_brake_on());
}
