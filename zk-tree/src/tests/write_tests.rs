//! Writes: Stat bookkeeping, every prep error path in Apache's order, outstanding changes.

use super::support::*;
use crate::{AuthIds, Outcome, TreeConfig};
use bytes::Bytes;
use zk_proto::*;

#[test]
fn fresh_tree_matches_apache() {
    // Values read from Apache ZooKeeper 3.8.0 with kazoo.
    let mut h = Harness::new();
    let root = h.stat("/");
    assert_eq!((root.cversion, root.num_children, root.pzxid, root.aversion), (-1, 1, 0, 0));
    assert_eq!(h.stat("/zookeeper").cversion, -2);
    assert_eq!(h.stat("/zookeeper/config").aversion, -1);
    let (acl, _) = h.db.get_acl("/zookeeper/config", &ip_auth("1.2.3.4")).unwrap();
    assert_eq!(acl, vec![acl_read()]);
    assert_eq!(h.db.node_count(), 5);
    assert_eq!(h.db.approximate_data_size(), 1 + 10 + 16 + 17);
    let (data, _) = h.db.get_data("/", &h.auth.clone(), None).unwrap();
    assert_eq!(data, Some(Bytes::new()));
}

fn acl_read() -> Acl {
    acl(perms::READ, "world", "anyone")
}

#[test]
fn create_and_delete_move_parent_stat() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let a0 = h.stat("/a");
    assert_eq!(a0.czxid, h.zxid);
    assert_eq!(a0.mzxid, h.zxid);
    assert_eq!(a0.pzxid, h.zxid);
    assert_eq!(a0.ctime, h.now);
    assert_eq!(a0.data_length, 1);
    let root = h.stat("/");
    assert_eq!(root.pzxid, h.zxid);
    assert_eq!(root.cversion, 0); // stored 1, two children
    h.mkdir("/a/b");
    let create_zxid = h.zxid;
    h.mkdir("/a/c");
    let a = h.stat("/a");
    assert_eq!((a.cversion, a.num_children, a.pzxid), (2, 2, h.zxid));
    assert!(h.stat("/a/b").pzxid == create_zxid);
    assert_eq!(h.delete("/a/b", -1), Outcome::Deleted);
    let a = h.stat("/a");
    // Delete moves pzxid; the client cversion rises because numChildren fell.
    assert_eq!((a.cversion, a.num_children, a.pzxid), (3, 1, h.zxid));
    assert_eq!(a.mzxid, a0.mzxid);
}

#[test]
fn sequential_suffix_uses_stored_cversion() {
    let mut h = Harness::new();
    h.mkdir("/s");
    let mut names = vec![];
    for _ in 0..3 {
        match h.create("/s/x", CreateMode::PersistentSequential.code()) {
            Outcome::Created { path, .. } => names.push(path),
            o => panic!("{o:?}"),
        }
    }
    assert_eq!(names, ["/s/x0000000000", "/s/x0000000001", "/s/x0000000002"]);
    h.delete("/s/x0000000001", -1);
    // Same as Apache: the next suffix is 3 and the client cversion 5.
    match h.create("/s/x", 2) {
        Outcome::Created { path, .. } => assert_eq!(path, "/s/x0000000003"),
        o => panic!("{o:?}"),
    }
    assert_eq!(h.stat("/s").cversion, 5);
    // A trailing slash is allowed for sequential names.
    match h.create("/s/", 2) {
        Outcome::Created { path, .. } => assert_eq!(path, "/s/0000000004"),
        o => panic!("{o:?}"),
    }
}

#[test]
fn sequential_suffix_goes_negative_on_overflow() {
    let mut h = Harness::new();
    h.mkdir("/p");
    // Bring the parent's stored cversion to i32::MAX by applying a txn that says so.
    let t = Txn::Create(CreateTxn {
        path: "/p/big".into(),
        data: None,
        acl: world(),
        ephemeral: false,
        parent_cversion: i32::MAX,
    });
    h.commit(S1, OpCode::Create, &t);
    // Prepped back to back, the second sees the wrapped cversion of the first's record.
    let (h1, t1) = h.prep(S1, &Request::Create(creq("/p/n", b"", 2)));
    let (h2, t2) = h.prep(S1, &Request::Create(creq("/p/n", b"", 2)));
    let name = |t: &Txn| match t {
        Txn::Create(c) => c.path.clone(),
        o => panic!("{o:?}"),
    };
    assert_eq!(name(&t1), "/p/n2147483647");
    assert_eq!(name(&t2), "/p/n-2147483648");
    h.db.apply(&h1, &t1);
    h.db.apply(&h2, &t2);
    // Apply only raises a cversion, so the stored one stays at i32::MAX and the next sequential
    // create collides, as in Apache.
    assert_eq!(h.db.tree().get("/p").unwrap().stat.cversion, i32::MAX);
    assert_eq!(h.create("/p/n", 2), Outcome::Error(ErrorCode::NodeExists));
}

#[test]
fn null_data_is_not_empty_data() {
    let mut h = Harness::new();
    let req = CreateRequest { path: "/n".into(), data: None, acl: world(), flags: 0 };
    h.outcome(S1, Request::Create(req));
    h.outcome(S1, Request::Create(creq("/e", b"", 0)));
    let auth = h.auth.clone();
    let (d, s) = h.db.get_data("/n", &auth, None).unwrap();
    assert_eq!((d, s.data_length), (None, 0));
    let (d, s) = h.db.get_data("/e", &auth, None).unwrap();
    assert_eq!((d, s.data_length), (Some(Bytes::new()), 0));
}

#[test]
fn create_errors_in_apache_order() {
    let mut h = Harness::with(TreeConfig::default()); // extended types off
    h.mkdir("/a");
    let c = |path: &str, flags: i32, acl: Vec<Acl>| {
        Request::Create(CreateRequest { path: path.into(), data: None, acl, flags })
    };
    assert_eq!(h.err(S1, c("/a/x", 7, world())), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, c("/a/x", -1, world())), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, c("/a/x", 5, world())), ErrorCode::Unimplemented);
    let ttl = |flags, ttl| {
        Request::CreateTtl(CreateTtlRequest { path: "/a/t".into(), data: None, acl: world(), flags, ttl })
    };
    assert_eq!(h.err(S1, ttl(5, 100)), ErrorCode::Unimplemented);
    // Session checks come after the mode checks.
    assert_eq!(h.err(0x999, c("/a/x", 0, world())), ErrorCode::UnknownSession);
    assert_eq!(h.err(0x999, c("/a/x", 1, world())), ErrorCode::SessionExpired);
    // Path: only '/' and NUL before the ACL fixup, full validation after.
    assert_eq!(h.err(S1, c("a", 0, world())), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, c("/a\0", 0, vec![])), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, c("/a/", 0, vec![])), ErrorCode::InvalidAcl);
    assert_eq!(h.err(S1, c("/nope/x", 0, vec![])), ErrorCode::InvalidAcl);
    assert_eq!(h.err(S1, c("/nope/x", 0, world())), ErrorCode::NoNode);
    assert_eq!(h.err(S1, c("/a/", 0, world())), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, c("/a/./b", 0, world())), ErrorCode::NoNode);
    assert_eq!(h.err(S1, c("/a/.", 0, world())), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, c("/a", 0, world())), ErrorCode::NodeExists);
    assert_eq!(h.err(S1, c("/", 0, world())), ErrorCode::NodeExists);
    h.create("/eph", 1);
    assert_eq!(h.err(S1, c("/eph/x", 0, world())), ErrorCode::NoChildrenForEphemerals);
    // NOAUTH on the parent's CREATE permission comes before NODEEXISTS.
    let ro = vec![acl(perms::READ | perms::WRITE, "world", "anyone")];
    h.outcome(S1, Request::Create(CreateRequest { path: "/ro".into(), data: None, acl: ro, flags: 0 }));
    assert_eq!(h.err(S1, c("/ro/x", 0, world())), ErrorCode::NoAuth);
    h.auth.is_super = true;
    assert!(matches!(h.outcome(S1, c("/ro/x", 0, world())), Outcome::Created { .. }));
    assert_eq!(h.err(S1, c("/ro/x", 0, world())), ErrorCode::NodeExists);
    h.auth.is_super = false;
    assert_eq!(h.err(S1, c("/ro/x", 0, world())), ErrorCode::NoAuth);
}

#[test]
fn ttl_and_container_creates() {
    let mut h = Harness::new();
    let ttl = |flags, ttl| {
        Request::CreateTtl(CreateTtlRequest { path: "/t".into(), data: None, acl: world(), flags, ttl })
    };
    assert_eq!(h.err(S1, ttl(5, 0)), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, ttl(5, 0x100_0000_0000)), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, ttl(0, 100)), ErrorCode::BadArguments);
    assert_eq!(h.err(S1, ttl(0, -1)), ErrorCode::BadArguments);
    // A TTL mode through plain create has ttl -1: out of range.
    assert_eq!(h.err(S1, Request::Create(creq("/t", b"", 5))), ErrorCode::BadArguments);
    match h.outcome(S1, ttl(6, 0xff_ffff_ffff)) {
        Outcome::Created { path, stat } => {
            assert_eq!(path, "/t0000000000");
            assert_eq!(stat.ephemeral_owner, 0);
        }
        o => panic!("{o:?}"),
    }
    match h.outcome(S1, Request::CreateContainer(creq("/c", b"", 4))) {
        Outcome::Created { stat, .. } => assert_eq!(stat.ephemeral_owner, 0),
        o => panic!("{o:?}"),
    }
    let n = h.db.tree().get("/c").unwrap();
    assert_eq!(n.owner(), i64::MIN);
    assert_eq!(
        h.db.tree().get("/t0000000000").unwrap().owner(),
        (0xff00_0000_0000_0000u64 as i64) | 0xff_ffff_ffff
    );
    // Ephemeral stat shows the owner.
    match h.create("/e", 1) {
        Outcome::Created { stat, .. } => assert_eq!(stat.ephemeral_owner, S1),
        o => panic!("{o:?}"),
    }
}

#[test]
fn delete_errors() {
    let mut h = Harness::new();
    h.mkdir("/a");
    h.mkdir("/a/b");
    for p in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config", "x", "/a\0"] {
        assert_eq!(
            h.err(S1, Request::Delete(DeleteRequest { path: p.into(), version: -1 })),
            ErrorCode::BadArguments,
            "{p}"
        );
    }
    assert_eq!(h.delete("/a", -1), Outcome::Error(ErrorCode::NotEmpty));
    assert_eq!(h.delete("/a/b", 3), Outcome::Error(ErrorCode::BadVersion));
    assert_eq!(h.delete("/a/zz", -1), Outcome::Error(ErrorCode::NoNode));
    assert_eq!(h.delete("/q/zz", -1), Outcome::Error(ErrorCode::NoNode));
    assert_eq!(h.delete("/a/b/", -1), Outcome::Error(ErrorCode::NoNode));
    assert_eq!(h.delete("/a/b", 0), Outcome::Deleted);
    let nodel = vec![acl(perms::ALL & !perms::DELETE, "world", "anyone")];
    h.outcome(S1, Request::Create(CreateRequest { path: "/nd".into(), data: None, acl: nodel, flags: 0 }));
    h.auth.is_super = true;
    h.mkdir("/nd/x");
    h.auth.is_super = false;
    // NOAUTH (parent) comes before NONODE (node).
    assert_eq!(h.delete("/nd/nothing", -1), Outcome::Error(ErrorCode::NoAuth));
    assert_eq!(
        h.err(0x999, Request::Delete(DeleteRequest { path: "/".into(), version: -1 })),
        ErrorCode::UnknownSession
    );
}

#[test]
fn set_data_and_versions() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let created = h.stat("/a");
    match h.set_data("/a", b"hello", 0) {
        Outcome::SetData { stat } => {
            assert_eq!((stat.version, stat.data_length, stat.mzxid, stat.mtime), (1, 5, h.zxid, h.now));
            assert_eq!(stat.czxid, created.czxid);
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(h.set_data("/a", b"x", 0), Outcome::Error(ErrorCode::BadVersion));
    assert!(matches!(h.set_data("/a", b"x", -1), Outcome::SetData { stat } if stat.version == 2));
    assert_eq!(h.set_data("/b", b"x", -1), Outcome::Error(ErrorCode::NoNode));
    assert_eq!(h.set_data("/b/", b"x", -1), Outcome::Error(ErrorCode::BadArguments));
    let ro = vec![acl(perms::READ, "world", "anyone")];
    h.outcome(S1, Request::Create(CreateRequest { path: "/ro".into(), data: None, acl: ro, flags: 0 }));
    assert_eq!(h.set_data("/ro", b"x", 99), Outcome::Error(ErrorCode::NoAuth));
    assert_eq!(h.db.approximate_data_size(), 44 + 2 + 1 + 3);
}

#[test]
fn set_acl_and_get_acl_masking() {
    let mut h = Harness::new();
    h.mkdir("/a");
    let set = |acl: Vec<Acl>, version| Request::SetAcl(SetAclRequest { path: "/a".into(), acl, version });
    assert_eq!(h.err(S1, set(vec![], -1)), ErrorCode::InvalidAcl);
    assert_eq!(h.err(S1, set(world(), 5)), ErrorCode::BadVersion);
    let bob = acl(perms::READ, "digest", "bob:hash");
    let lan = acl(perms::ADMIN, "ip", "10.0.0.0/8");
    match h.outcome(S1, set(vec![bob.clone(), lan.clone()], 0)) {
        Outcome::SetAcl { stat } => assert_eq!(stat.aversion, 1),
        o => panic!("{o:?}"),
    }
    // setACL fires no watch and leaves mzxid alone.
    assert_ne!(h.stat("/a").mzxid, h.zxid);
    let bob_ids =
        AuthIds { ids: vec![Id { scheme: "digest".into(), id: "bob:hash".into() }], is_super: false };
    let (seen, _) = h.db.get_acl("/a", &bob_ids).unwrap();
    assert_eq!(seen[0].id.id, "bob:x");
    let (seen, _) = h.db.get_acl("/a", &ip_auth("10.1.1.1")).unwrap();
    assert_eq!(seen, vec![bob, lan]);
    assert_eq!(h.db.get_acl("/a", &ip_auth("11.1.1.1")), Err(ErrorCode::NoAuth));
    assert_eq!(h.db.get_acl("/zz", &ip_auth("11.1.1.1")), Err(ErrorCode::NoNode));
    // Our ip is 127.0.0.1: no ADMIN any more.
    assert_eq!(h.err(S1, set(world(), -1)), ErrorCode::NoAuth);
    // `auth` needs an authenticated id.
    h.auth.is_super = true;
    assert_eq!(h.err(S1, set(vec![acl(31, "auth", "")], -1)), ErrorCode::InvalidAcl);
}

#[test]
fn reads_check_acls() {
    let mut h = Harness::new();
    let secret = vec![acl(perms::WRITE, "world", "anyone")];
    h.outcome(S1, Request::Create(CreateRequest { path: "/s".into(), data: None, acl: secret, flags: 0 }));
    let a = ip_auth("1.1.1.1");
    assert_eq!(h.db.get_data("/s", &a, Some(7)), Err(ErrorCode::NoAuth));
    assert_eq!(h.db.get_children("/s", &a, Some(7)).map(|_| ()), Err(ErrorCode::NoAuth));
    assert_eq!(h.db.get_all_children_number("/s", &a), Err(ErrorCode::NoAuth));
    assert_eq!(h.db.watch_count(), 0);
    // Apache 3.8.0's exists checks nothing (observed on the real server).
    assert!(h.db.exists("/s", &a, None).is_ok());
    assert_eq!(h.db.exists("/s\0", &a, None), Err(ErrorCode::BadArguments));
    let mut strict = Harness::with(TreeConfig { exists_requires_read: true, ..TreeConfig::default() });
    strict.outcome(
        S1,
        Request::Create(CreateRequest {
            path: "/s".into(),
            data: None,
            acl: vec![acl(perms::WRITE, "world", "anyone")],
            flags: 0,
        }),
    );
    assert_eq!(strict.db.exists("/s", &a, None), Err(ErrorCode::NoAuth));
    assert_eq!(strict.db.exists("/none", &a, Some(1)), Err(ErrorCode::NoNode));
    assert_eq!(strict.db.watch_count(), 1);
}

#[test]
fn all_children_number_and_ephemerals() {
    let mut h = Harness::new();
    h.mkdir("/a");
    h.mkdir("/a/b");
    h.mkdir("/a/b/c");
    let auth = h.auth.clone();
    assert_eq!(h.db.get_all_children_number("/a", &auth), Ok(2));
    assert_eq!(h.db.get_all_children_number("/", &auth), Ok(6));
    assert_eq!(h.db.get_all_children_number("/x", &auth), Err(ErrorCode::NoNode));
    for i in 0..5 {
        h.create(&format!("/eph{i}"), 1);
    }
    h.create("/a/eph", 1);
    // HashSet order printed by the JVM for /eph0../eph4.
    let all = h.db.get_ephemerals(S1, "/");
    let want = ["/eph3", "/eph2", "/eph4", "/eph1", "/eph0"];
    assert_eq!(all.iter().filter(|p| p.starts_with("/eph")).cloned().collect::<Vec<_>>(), want);
    assert_eq!(all.len(), 6);
    assert_eq!(h.db.get_ephemerals(S1, " "), all);
    assert_eq!(h.db.get_ephemerals(S1, "/a"), vec!["/a/eph".to_string()]);
    assert!(h.db.get_ephemerals(S2, "").is_empty());
    assert_eq!(h.db.ephemerals_count(), 6);
    assert_eq!(h.db.ephemerals_by_session()[&S1].len(), 6);
}

#[test]
fn outstanding_changes_are_seen_by_prep() {
    let mut h = Harness::new();
    let (h1, t1) = h.prep(S1, &Request::Create(creq("/a", b"", 0)));
    let (h2, t2) = h.prep(S1, &Request::Create(creq("/a/b", b"", 0)));
    assert!(matches!(t2, Txn::Create(_)), "{t2:?}");
    let (h3, t3) = h.prep(S1, &Request::Delete(DeleteRequest { path: "/a".into(), version: -1 }));
    assert_eq!(t3, Txn::Error(ErrorTxn { err: ErrorCode::NotEmpty.code() }));
    let (h4, t4) = h.prep(S1, &Request::Create(creq("/a/s", b"", 2)));
    let (h5, t5) = h.prep(S1, &Request::Create(creq("/a/s", b"", 2)));
    let path = |t: &Txn| match t {
        Txn::Create(c) => (c.path.clone(), c.parent_cversion),
        o => panic!("{o:?}"),
    };
    assert_eq!(path(&t4), ("/a/s0000000001".to_string(), 2));
    assert_eq!(path(&t5), ("/a/s0000000002".to_string(), 3));
    let (h6, t6) =
        h.prep(S1, &Request::SetData(SetDataRequest { path: "/a/b".into(), data: None, version: 0 }));
    let (h7, t7) =
        h.prep(S1, &Request::SetData(SetDataRequest { path: "/a/b".into(), data: None, version: 1 }));
    assert!(matches!(&t7, Txn::SetData(s) if s.version == 2), "{t7:?}");
    let (h8, t8) = h.prep(S1, &Request::Delete(DeleteRequest { path: "/a/b".into(), version: 1 }));
    assert_eq!(t8, Txn::Error(ErrorTxn { err: ErrorCode::BadVersion.code() }));
    assert!(h.db.outstanding_count() > 0);
    for (hd, t) in [(h1, t1), (h2, t2), (h3, t3), (h4, t4), (h5, t5), (h6, t6), (h7, t7), (h8, t8)] {
        h.db.apply(&hd, &t);
    }
    assert_eq!(h.db.outstanding_count(), 0);
    assert_eq!(h.stat("/a/b").version, 2);
    assert_eq!(h.db.last_applied_zxid(), h.zxid);
}

#[test]
fn reconfig_and_unsupported_requests() {
    let mut h = Harness::new();
    let r = ReconfigRequest {
        joining_servers: None,
        leaving_servers: None,
        new_members: None,
        cur_config_id: -1,
    };
    assert_eq!(h.err(S1, Request::Reconfig(r)), ErrorCode::ReconfigDisabled);
    // A check on its own is prepped as inside a multi: BADVERSION / NONODE, or a Check txn that
    // changes nothing and answers with the node's stat.
    let chk = |path: &str, version| Request::Check(CheckVersionRequest { path: path.into(), version });
    assert_eq!(h.err(S1, chk("/", 1)), ErrorCode::BadVersion);
    assert_eq!(h.err(S1, chk("/none", 0)), ErrorCode::NoNode);
    match h.outcome(S1, chk("/", 0)) {
        Outcome::SetData { stat } => assert_eq!(stat.version, 0),
        other => panic!("a passing check answers with the stat, got {other:?}"),
    }
    assert_eq!(h.err(S1, Request::Ping), ErrorCode::Unimplemented);
}

#[test]
fn delete_container_prep() {
    let mut h = Harness::new();
    h.outcome(S1, Request::CreateContainer(creq("/c", b"", 4)));
    h.mkdir("/c/x");
    let dc = |p: &str| Request::DeleteContainer(DeleteRequest { path: p.into(), version: -1 });
    assert_eq!(h.err(0, dc("/c")), ErrorCode::NotEmpty);
    assert_eq!(h.err(0, dc("/zz")), ErrorCode::NoNode);
    assert_eq!(h.err(0, dc("/zookeeper")), ErrorCode::BadArguments);
    h.create("/e", 1);
    assert_eq!(h.err(0, dc("/e")), ErrorCode::BadVersion);
    h.delete("/c/x", -1);
    assert_eq!(h.db.reapable(h.now, 10), vec!["/c".to_string()]);
    assert_eq!(h.outcome(0, dc("/c")), Outcome::Deleted);
    // Apache lets the reaper's request delete a plain persistent node too.
    h.mkdir("/p");
    assert_eq!(h.outcome(0, dc("/p")), Outcome::Deleted);
}

#[test]
fn reapable_containers_and_ttls() {
    let mut h = Harness::new();
    h.outcome(S1, Request::CreateContainer(creq("/fresh", b"", 4)));
    let ttl = Request::CreateTtl(CreateTtlRequest {
        path: "/t".into(),
        data: None,
        acl: world(),
        flags: 5,
        ttl: 100,
    });
    h.outcome(S1, ttl);
    let mtime = h.stat("/t").mtime;
    assert!(h.db.reapable(mtime + 100, 10).is_empty());
    assert_eq!(h.db.reapable(mtime + 101, 10), vec!["/t".to_string()]);
    assert!(h.db.reapable(mtime + 101, 0).is_empty());
    let mut h2 = Harness::with(TreeConfig {
        extended_types_enabled: true,
        container_max_never_used_ms: 50,
        ..TreeConfig::default()
    });
    h2.outcome(S1, Request::CreateContainer(creq("/fresh", b"", 4)));
    let m = h2.stat("/fresh").mtime;
    assert!(h2.db.reapable(m + 50, 10).is_empty());
    assert_eq!(h2.db.reapable(m + 51, 10), vec!["/fresh".to_string()]);
}

#[test]
fn children_listed_in_apache_order() {
    // Orders returned by Apache 3.8.0 (kazoo) and printed by a JVM for `new HashSet<>(8)`.
    let mut h = Harness::new();
    h.mkdir("/o");
    for c in ["zookeeper", "a", "b", "c", "foo", "bar", "x1"] {
        h.mkdir(&format!("/o/{c}"));
    }
    let auth = h.auth.clone();
    assert_eq!(
        h.db.get_children("/o", &auth, None).unwrap().0.to_vec(),
        ["a", "b", "bar", "c", "zookeeper", "foo", "x1"]
    );
    h.mkdir("/m");
    for i in 0..20 {
        h.mkdir(&format!("/m/n{i}"));
    }
    let want: Vec<String> = "n0 n1 n2 n3 n4 n5 n6 n7 n8 n9 n10 n12 n11 n14 n13 n16 n15 n18 n17 n19"
        .split(' ')
        .map(String::from)
        .collect();
    assert_eq!(h.db.get_children("/m", &auth, None).unwrap().0.to_vec(), want);
}

/// Large child sets take the radix path of `child_names::ordered`; its order must be the one the
/// definition gives: ascending (Java bucket, insertion rank), checked here against `java::hash_order`
/// over every child's name and rank, through deletes (freed slots reused out of rank order),
/// sequential and non-ASCII names and a table that grew past its size, on sets below and above
/// the radix threshold.
#[test]
fn large_child_lists_keep_apache_order() {
    let mut h = Harness::new();
    let auth = h.auth.clone();
    for (parent, count) in [("/small", 300usize), ("/large", 5000)] {
        h.mkdir(parent);
        // The names this test made, kept apart from the tree, so that a list that lost one name
        // and doubled another fails too.
        let mut made = std::collections::BTreeSet::new();
        for i in 0..count {
            let name = match i % 4 {
                0 => format!("n{i}"),
                1 => format!("\u{e9}t\u{e9}-{i}\u{4e2d}"),
                _ => String::new(),
            };
            if name.is_empty() {
                match h.outcome(S1, Request::Create(creq(&format!("{parent}/c0-"), b"v", 2))) {
                    Outcome::Created { path, .. } => made.insert(path[parent.len() + 1..].to_string()),
                    other => panic!("sequential create: {other:?}"),
                };
            } else {
                h.mkdir(&format!("{parent}/{name}"));
                made.insert(name);
            }
            // Delete every eighth so slots are freed and reused by later children (of this
            // parent and of the next), out of rank order.
            if i % 8 == 4 {
                assert!(matches!(h.delete(&format!("{parent}/n{}", i - 4), -1), Outcome::Deleted));
                made.remove(&format!("n{}", i - 4));
            }
        }
        let tree = h.db.tree();
        let node = tree.get(parent).unwrap();
        let mut want: Vec<(String, u64)> = made
            .into_iter()
            .map(|c| {
                let rank = tree.get(&format!("{parent}/{c}")).unwrap().stat.rank;
                (c, u64::from(rank))
            })
            .collect();
        let cap = tree.nodes.children_of(node).unwrap().java_capacity();
        crate::java::hash_order(&mut want, cap);
        let want: Vec<String> = want.into_iter().map(|(c, _)| c).collect();
        let (got, stat) = h.db.get_children(parent, &auth, None).unwrap();
        assert_eq!(got.len(), stat.num_children as usize);
        assert_eq!(got.to_vec(), want, "children of {parent}");
        let mut jute = bytes::BytesMut::new();
        zk_proto::jute::Jute::write(&want, &mut jute);
        assert_eq!(got.jute(), &jute[..], "the jute list of {parent}");
    }
}

#[test]
fn quota_stats_follow_apache() {
    // The same steps against Apache 3.8.0 (kazoo) gave these stats texts.
    let mut h = Harness::new();
    let mk = |h: &mut Harness, p: &str, d: &[u8]| {
        let o = h.outcome(S1, Request::Create(creq(p, d, 0)));
        assert!(matches!(o, Outcome::Created { .. }), "{p}: {o:?}");
    };
    let stats = |h: &mut Harness| {
        let auth = h.auth.clone();
        let (d, s) = h.db.get_data("/zookeeper/quota/qa/zookeeper_stats", &auth, None).unwrap();
        let d = d.unwrap();
        assert_eq!(s.data_length as usize, d.len());
        String::from_utf8(d.to_vec()).unwrap()
    };
    mk(&mut h, "/qa", b"12345");
    mk(&mut h, "/qa/x", b"ab");
    mk(&mut h, "/zookeeper/quota/qa", b"");
    mk(&mut h, "/zookeeper/quota/qa/zookeeper_limits", b"count=-1,bytes=-1;countHardLimit=4");
    mk(&mut h, "/zookeeper/quota/qa/zookeeper_stats", b"whatever");
    assert_eq!(stats(&mut h), "count=2,bytes=7");
    mk(&mut h, "/qa/y", b"abc");
    h.set_data("/qa/x", b"abcdef", -1);
    h.delete("/qa/y", -1);
    assert_eq!(stats(&mut h), "count=2,bytes=11");
    h.set_data("/zookeeper/quota/qa/zookeeper_stats", b"count=1,bytes=1;foo=3", -1);
    mk(&mut h, "/qa/z", b"");
    assert_eq!(stats(&mut h), "count=2,bytes=1=;foo=3");
    h.delete("/zookeeper/quota/qa/zookeeper_limits", -1);
    mk(&mut h, "/qa/w", b"");
    assert_eq!(stats(&mut h), "count=2,bytes=1=;foo=3");
}

#[test]
fn quota_enforced_only_when_configured() {
    let mut h = Harness::with(TreeConfig { enforce_quota: true, ..TreeConfig::default() });
    h.mkdir("/q");
    h.mkdir("/zookeeper/quota/q");
    let lim = Request::Create(creq(
        "/zookeeper/quota/q/zookeeper_limits",
        b"count=-1,bytes=-1;countHardLimit=2;byteHardLimit=3",
        0,
    ));
    h.outcome(S1, lim);
    h.outcome(S1, Request::Create(creq("/zookeeper/quota/q/zookeeper_stats", b"", 0)));
    h.mkdir("/q/a"); // count 2 now (/q and /q/a), 2 bytes
    assert_eq!(h.create("/q/b", 0), Outcome::Error(ErrorCode::QuotaExceeded));
    assert_eq!(h.set_data("/q/a", b"xxx", -1), Outcome::Error(ErrorCode::QuotaExceeded));
    assert!(matches!(h.set_data("/q/a", b"xx", -1), Outcome::SetData { .. }));
    assert!(matches!(h.set_data("/q/a", b"x", -1), Outcome::SetData { .. }));
    let mut lax = Harness::new();
    lax.mkdir("/q");
    lax.mkdir("/zookeeper/quota/q");
    lax.outcome(
        S1,
        Request::Create(creq(
            "/zookeeper/quota/q/zookeeper_limits",
            b"count=-1,bytes=-1;countHardLimit=1",
            0,
        )),
    );
    lax.outcome(S1, Request::Create(creq("/zookeeper/quota/q/zookeeper_stats", b"", 0)));
    lax.mkdir("/q/a");
}

/// Proposals taken back (a full log refused them): prep sees the applied state again, so the same
/// requests prep to the same txns with the same zxids, and a sequential name is not skipped.
#[test]
fn abandoned_proposals_leave_no_trace_in_prep() {
    let mut h = Harness::new();
    h.mkdir("/s");
    let base = h.zxid;
    let seq = Request::Create(creq("/s/x", b"", CreateMode::PersistentSequential.code()));
    let plain = Request::Create(creq("/s/p", b"", 0));
    let del = Request::Delete(DeleteRequest { path: "/s".into(), version: -1 });
    let first: Vec<(TxnHeader, Txn)> = [&seq, &plain, &del].iter().map(|r| h.prep(S1, r)).collect();
    // Against the outstanding changes: /s has children to be, so the delete fails.
    assert!(matches!(first[2].1, Txn::Error(ErrorTxn { err }) if err == ErrorCode::NotEmpty.code()));
    h.db.abandon_after(base);
    assert_eq!(h.db.outstanding_count(), 0);
    h.zxid = base;
    let again: Vec<(TxnHeader, Txn)> = [&seq, &plain, &del].iter().map(|r| h.prep(S1, r)).collect();
    let txns = |v: &[(TxnHeader, Txn)]| v.iter().map(|(hdr, t)| (hdr.zxid, t.clone())).collect::<Vec<_>>();
    assert_eq!(txns(&first), txns(&again));
    for (hdr, t) in &again {
        h.db.apply(hdr, t);
    }
    assert!(h.db.tree().get("/s/x0000000000").is_some());
    // Taking back only the newest of several keeps the older ones.
    let a = h.prep(S1, &Request::Create(creq("/s/a", b"", 0)));
    let _b = h.prep(S1, &Request::Create(creq("/s/b", b"", 0)));
    h.db.abandon_after(a.0.zxid);
    assert_eq!(h.db.outstanding_count(), 2, "the parent's and /s/a's records of the first stay");
}

/// A refused closeSession is taken back: the session is live again and expires later.
#[test]
fn reopened_session_is_live_and_expires_again() {
    let mut h = Harness::new();
    let now = 5_000_u64;
    h.db.expiry_mut().set_closing(S1);
    assert!(h.db.expiry().is_closing(S1));
    let (_, t) = h.prep(S1, &Request::Create(creq("/x", b"", 0)));
    assert_eq!(t, Txn::Error(ErrorTxn { err: ErrorCode::SessionExpired.code() }), "closing: refused");
    assert!(h.db.expiry_mut().reopen(S1, 5000, now));
    assert!(!h.db.expiry().is_closing(S1));
    let (_, t) = h.prep(S1, &Request::Create(creq("/x", b"", 0)));
    assert!(matches!(t, Txn::Create(_)), "live again: {t:?}");
    assert!(h.db.expiry_mut().expired(now + 1000).is_empty());
    assert_eq!(h.db.expiry_mut().expired(now + 8000), vec![S1]);
    assert!(!h.db.expiry_mut().reopen(0xdead, 5000, now), "unknown session");
}
