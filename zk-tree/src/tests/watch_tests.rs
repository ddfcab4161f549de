//! Watches fired by applied txns, setWatches, check/removeWatches; sessions closing.

use super::support::*;
use crate::{Applied, Outcome, WatcherId};
use zk_proto::*;

fn evs(a: &Applied) -> Vec<(WatcherId, EventType, String)> {
    a.events
        .iter()
        .map(|d| (d.watcher, EventType::from_i32(d.event.event_type).unwrap(), d.event.path.clone()))
        .collect()
}

use EventType::{NodeChildrenChanged as Ncc, NodeCreated as Nc, NodeDataChanged as Ndc, NodeDeleted as Nd};

#[test]
fn create_fires_node_created_and_parent_children_changed() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let auth = h.auth.clone();
    assert_eq!(h.db.exists("/a/b", &auth, Some(1)), Err(ErrorCode::NoNode));
    h.db.get_children("/a", &auth, Some(2)).unwrap();
    h.db.get_data("/a", &auth, Some(3)).unwrap();
    let (_, a) = h.run(S1, Request::Create(creq("/a/b", b"", 0)));
    assert_eq!(evs(&a), vec![(1, Nc, "/a/b".into()), (2, Ncc, "/a".into())]);
    // The event carries the node's ACL (the parent's for NodeChildrenChanged), for the READ check.
    assert_eq!(a.events[0].acl.as_deref(), Some(&world()));
    assert_eq!(a.events[0].event.state, KeeperState::SyncConnected.code());
    // One-shot: gone now; the data watch on /a (3) is untouched.
    let (_, a) = h.run(S1, Request::Create(creq("/a/c", b"", 0)));
    assert!(a.events.is_empty());
    assert_eq!(h.db.watch_count(), 1);
}

#[test]
fn delete_fires_data_then_child_then_parent() {
    let mut h = Harness::new();
    h.mkdir("/a");
    h.mkdir("/a/b");
    let auth = h.auth.clone();
    h.db.get_data("/a/b", &auth, Some(1)).unwrap();
    h.db.get_children("/a/b", &auth, Some(1)).unwrap();
    h.db.get_children("/a/b", &auth, Some(2)).unwrap();
    h.db.get_children("/a", &auth, Some(3)).unwrap();
    let (_, a) = h.run(S1, Request::Delete(DeleteRequest { path: "/a/b".into(), version: -1 }));
    // Watcher 1 is told once although it watched both tables.
    assert_eq!(evs(&a), vec![(1, Nd, "/a/b".into()), (2, Nd, "/a/b".into()), (3, Ncc, "/a".into())]);
    assert_eq!(h.db.watch_count(), 0);
}

#[test]
fn set_data_fires_data_watches_set_acl_fires_nothing() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let auth = h.auth.clone();
    h.db.exists("/a", &auth, Some(1)).unwrap();
    h.db.get_children("/a", &auth, Some(2)).unwrap();
    let (_, a) = h.run(S1, Request::SetAcl(SetAclRequest { path: "/a".into(), acl: world(), version: -1 }));
    assert!(a.events.is_empty());
    let a = {
        let (_, a) =
            h.run(S1, Request::SetData(SetDataRequest { path: "/a".into(), data: None, version: -1 }));
        a
    };
    assert_eq!(evs(&a), vec![(1, Ndc, "/a".into())]);
    assert_eq!(h.db.watch_count(), 1);
}

#[test]
fn persistent_and_recursive_watches() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let auth = h.auth.clone();
    h.db.add_watch("/a", AddWatchMode::Persistent, 1, &auth).unwrap();
    h.db.add_watch("/a", AddWatchMode::PersistentRecursive, 2, &auth).unwrap();
    let (_, a) = h.run(S1, Request::Create(creq("/a/b", b"", 0)));
    // Persistent: NodeChildrenChanged on /a; recursive: NodeCreated for the descendant only.
    assert_eq!(evs(&a), vec![(2, Nc, "/a/b".into()), (1, Ncc, "/a".into())]);
    let (_, a) = h.run(S1, Request::SetData(SetDataRequest { path: "/a/b".into(), data: None, version: -1 }));
    assert_eq!(evs(&a), vec![(2, Ndc, "/a/b".into())]);
    let (_, a) = h.run(S1, Request::SetData(SetDataRequest { path: "/a".into(), data: None, version: -1 }));
    assert_eq!(evs(&a), vec![(1, Ndc, "/a".into()), (2, Ndc, "/a".into())]);
    let (_, a) = h.run(S1, Request::Delete(DeleteRequest { path: "/a/b".into(), version: -1 }));
    assert_eq!(evs(&a), vec![(2, Nd, "/a/b".into()), (1, Ncc, "/a".into())]);
    let (_, a) = h.run(S1, Request::Delete(DeleteRequest { path: "/a".into(), version: -1 }));
    assert_eq!(evs(&a), vec![(1, Nd, "/a".into()), (2, Nd, "/a".into())]);
    // Persistent watches outlive the node.
    let (_, a) = h.run(S1, Request::Create(creq("/a", b"", 0)));
    assert_eq!(evs(&a), vec![(1, Nc, "/a".into()), (2, Nc, "/a".into())]);
    assert_eq!(h.db.watch_count(), 4);
    assert_eq!(h.db.watches_by_path()["/a"], vec![1, 2]);
    assert_eq!(h.db.watches_by_watcher()[&1], vec!["/a".to_string()]);
    assert_eq!(h.db.watched_path_count(), 1);
    h.db.remove_watcher(1);
    h.db.remove_watcher(2);
    assert_eq!(h.db.watch_count(), 0);
}

#[test]
fn one_event_for_one_shot_plus_persistent() {
    let mut h = Harness::new();
    h.mkdir("/a");
    h.mkdir("/a/b");
    let auth = h.auth.clone();
    h.db.add_watch("/a", AddWatchMode::PersistentRecursive, 1, &auth).unwrap();
    h.db.get_data("/a/b", &auth, Some(1)).unwrap();
    let (_, a) = h.run(S1, Request::SetData(SetDataRequest { path: "/a/b".into(), data: None, version: -1 }));
    assert_eq!(evs(&a), vec![(1, Ndc, "/a/b".into())]);
}

#[test]
fn set_watches_relative_zxid_rules() {
    let mut h = Harness::new();
    h.mkdir("/old");
    h.mkdir("/kids");
    let rel = h.zxid;
    h.mkdir("/kids/new");
    h.mkdir("/changed");
    h.set_data("/old", b"", -1);
    let old_data = h.zxid;
    h.mkdir("/same");
    let req = SetWatches2 {
        relative_zxid: old_data,
        data_watches: vec!["/gone".into(), "/old".into(), "/same".into()],
        exist_watches: vec!["/same".into(), "/absent".into()],
        child_watches: vec!["/gone".into(), "/kids".into(), "/same".into()],
        persistent_watches: vec!["/p".into()],
        persistent_recursive_watches: vec!["/r".into()],
    };
    let _ = rel;
    let auth = h.auth.clone();
    let got: Vec<(EventType, String)> =
        h.db.set_watches(9, &auth, &req)
            .into_iter()
            .map(|e| (EventType::from_i32(e.event_type).unwrap(), e.path))
            .collect();
    assert_eq!(
        got,
        vec![
            (Nd, "/gone".to_string()),
            (Ndc, "/same".into()),
            (Nc, "/same".into()),
            (Nd, "/gone".into()),
            (Ncc, "/same".into())
        ]
    );
    // Re-registered: data on /old, exist on /absent, child on /kids; plus persistent ones.
    assert_eq!(h.db.check_watches("/old", WatcherType::Data, 9), Ok(()));
    assert_eq!(h.db.check_watches("/absent", WatcherType::Data, 9), Ok(()));
    assert_eq!(h.db.check_watches("/kids", WatcherType::Children, 9), Ok(()));
    assert_eq!(h.db.check_watches("/r", WatcherType::Any, 9), Ok(()));
    assert_eq!(h.db.check_watches("/same", WatcherType::Any, 9), Err(ErrorCode::NoWatcher));
}

#[test]
fn detached_watches_come_back_as_set_watches_lists() {
    let mut h = Harness::new();
    h.mkdir("/a");
    h.mkdir("/kids");
    let auth = h.auth.clone();
    h.db.get_data("/a", &auth, Some(4)).unwrap();
    assert_eq!(h.db.exists("/b", &auth, Some(4)), Err(ErrorCode::NoNode));
    h.db.get_children("/kids", &auth, Some(4)).unwrap();
    h.db.get_data("/a", &auth, Some(5)).unwrap();
    let mut sw = h.db.detach_watches(4).expect("only one-shot watches");
    assert_eq!(sw.data_watches, vec!["/a".to_string()]);
    assert_eq!(sw.exist_watches, vec!["/b".to_string()]);
    assert_eq!(sw.child_watches, vec!["/kids".to_string()]);
    // Taken out (Apache's check answers for anyone's watch on the path: /a keeps 5's).
    assert_eq!(h.db.check_watches("/b", WatcherType::Any, 4), Err(ErrorCode::NoWatcher));
    assert_eq!(h.db.check_watches("/kids", WatcherType::Any, 4), Err(ErrorCode::NoWatcher));
    assert_eq!(h.db.check_watches("/a", WatcherType::Data, 5), Ok(()));
    sw.relative_zxid = h.zxid;
    h.mkdir("/kids/c");
    let got: Vec<(EventType, String)> =
        h.db.set_watches(4, &auth, &sw)
            .into_iter()
            .map(|e| (EventType::from_i32(e.event_type).unwrap(), e.path))
            .collect();
    assert_eq!(got, vec![(Ncc, "/kids".to_string())]);
    assert_eq!(h.db.check_watches("/a", WatcherType::Data, 4), Ok(()));
    assert_eq!(h.db.check_watches("/b", WatcherType::Data, 4), Ok(()));
    // A persistent watch cannot be carried: nothing is taken.
    h.db.add_watch("/a", AddWatchMode::Persistent, 6, &auth).unwrap();
    h.db.get_data("/kids", &auth, Some(6)).unwrap();
    assert!(h.db.detach_watches(6).is_none());
    assert_eq!(h.db.check_watches("/kids", WatcherType::Data, 6), Ok(()));
}

#[test]
fn check_and_remove_watches() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let auth = h.auth.clone();
    h.db.get_data("/a", &auth, Some(1)).unwrap();
    assert_eq!(h.db.check_watches("/a", WatcherType::Data, 1), Ok(()));
    assert_eq!(h.db.check_watches("/a", WatcherType::Children, 1), Err(ErrorCode::NoWatcher));
    assert_eq!(h.db.check_watches("/a", WatcherType::Persistent, 1), Err(ErrorCode::NoWatcher));
    assert_eq!(h.db.remove_watches("/a", WatcherType::Children, 1), Err(ErrorCode::NoWatcher));
    assert_eq!(h.db.remove_watches("/a", WatcherType::Data, 2), Err(ErrorCode::NoWatcher));
    assert_eq!(h.db.remove_watches("/a", WatcherType::Any, 1), Ok(()));
    assert_eq!(h.db.remove_watches("/a", WatcherType::Any, 1), Err(ErrorCode::NoWatcher));
    h.db.add_watch("/a", AddWatchMode::Persistent, 1, &auth).unwrap();
    assert_eq!(h.db.remove_watches("/a", WatcherType::Persistent, 1), Err(ErrorCode::NoWatcher));
    assert_eq!(h.db.remove_watches("/a", WatcherType::Data, 1), Ok(()));
    assert_eq!(h.db.remove_watches("/a", WatcherType::Children, 1), Ok(()));
    assert_eq!(h.db.watch_count(), 0);
}

#[test]
fn close_session_deletes_ephemerals_in_apache_order() {
    let mut h = Harness::new();
    for i in 0..5 {
        h.create(&format!("/eph{i}"), 1);
    }
    h.mkdir("/keep");
    let auth = h.auth.clone();
    h.db.get_children("/", &auth, Some(4)).unwrap();
    // An ephemeral prepped but not applied is included; one prepped for deletion is not.
    let (h1, t1) = h.prep(S1, &Request::Create(creq("/late", b"", 1)));
    let (h2, t2) = h.prep(S1, &Request::Delete(DeleteRequest { path: "/eph4".into(), version: -1 }));
    let (h3, t3) = h.prep(S1, &Request::CloseSession);
    let Txn::CloseSession(c) = &t3 else { panic!("{t3:?}") };
    assert_eq!(c.paths2_delete, ["/eph3", "/eph2", "/late", "/eph1", "/eph0"]);
    assert!(h.db.expiry().is_closing(S1));
    // The closing session can no longer write.
    let (_, t4) = h.prep(S1, &Request::Create(creq("/x", b"", 0)));
    assert_eq!(t4, Txn::Error(ErrorTxn { err: ErrorCode::SessionExpired.code() }));
    let a1 = h.db.apply(&h1, &t1);
    assert_eq!(a1.events.len(), 1);
    h.db.apply(&h2, &t2);
    let a3 = h.db.apply(&h3, &t3);
    assert_eq!(a3.outcome, Outcome::SessionClosed);
    assert!(a3.events.is_empty());
    assert!(!h.db.sessions().contains(S1));
    assert_eq!(h.db.ephemerals_count(), 0);
    assert_eq!(h.db.get_children("/", &auth, None).unwrap().0.len(), 2);
    let root = h.stat("/");
    assert_eq!(root.pzxid, h3.zxid);
}

#[test]
fn sessions_are_created_by_apply_and_expire_in_buckets() {
    let mut h = Harness::new();
    let t = h.db.prep_create_session(0x300, 4000);
    assert_eq!(t, Txn::CreateSession(CreateSessionTxn { time_out: 4000 }));
    assert!(!h.db.sessions().contains(0x300));
    let a = h.commit(0x300, OpCode::CreateSession, &t);
    assert_eq!(a.outcome, Outcome::SessionCreated);
    assert_eq!(h.db.sessions().timeout_ms(0x300), Some(4000));
    // Tracked by apply, but expiring only once the server touches it on its own clock.
    assert!(h.db.expiry().contains(0x300));
    assert!(h.db.expiry_mut().expired(u64::MAX).is_empty());
    let now = 1_000_u64;
    assert!(h.db.expiry_mut().touch(0x300, now));
    // tick 2000: now+4000 rounded up to the next multiple of 2000.
    let bucket = ((now + 4000) / 2000 + 1) * 2000;
    assert!(!h.db.expiry_mut().expired(bucket - 1).contains(&0x300));
    assert!(h.db.expiry_mut().expired(bucket).contains(&0x300));
    assert!(h.db.expiry().is_closing(0x300));
    // Applying its closeSession forgets it everywhere.
    let (hdr, t) = h.prep(0x300, &Request::CloseSession);
    h.db.apply(&hdr, &t);
    assert!(!h.db.expiry().contains(0x300));
    assert!(!h.db.sessions().contains(0x300));
}

#[test]
fn close_session_order_after_growth_and_shrink() {
    // Expected lists printed by a JVM doing the same HashSet operations as Apache.
    let mut h = Harness::new();
    for i in 0..40 {
        h.outcome(S2, Request::Create(creq(&format!("/e{i}"), b"", 1)));
    }
    for i in 0..30 {
        h.outcome(S2, Request::Delete(DeleteRequest { path: format!("/e{i}"), version: -1 }));
    }
    let remaining = ["/e33", "/e34", "/e31", "/e32", "/e30", "/e39", "/e37", "/e38", "/e35", "/e36"];
    assert_eq!(h.db.get_ephemerals(S2, "/"), remaining);
    let mut pending = vec![];
    for i in 0..6 {
        pending.push(h.prep(S2, &Request::Create(creq(&format!("/n{i}"), b"", 1))));
    }
    let (_, t) = h.prep(S2, &Request::CloseSession);
    let Txn::CloseSession(c) = &t else { panic!("{t:?}") };
    let mut want: Vec<String> = remaining.iter().map(|s| s.to_string()).collect();
    want.extend((0..6).map(|i| format!("/n{i}")));
    assert_eq!(c.paths2_delete, want);
}
