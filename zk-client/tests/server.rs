//! zk-client against a real server: each test runs against Apache ZooKeeper 3.8 and zkrs-server
//! (or against ZKRS_TEST_SERVER).

#[macro_use]
mod support;

use std::time::Duration;
use support::{unique, Proxy, Target, TestServer};
use tokio::time::timeout;
use zk_client::{
    acl, multi_error, AddWatchMode, Client, CreateMode, Error, EventType, MultiOp, OpResult, ReadOp,
    SessionState, WatcherType,
};

const T: Duration = Duration::from_secs(10);

async fn client(addr: &str) -> Client {
    Client::builder(addr)
        .session_timeout(T)
        .reconnect_delay_max(Duration::from_millis(50))
        .connect()
        .await
        .unwrap()
}

async fn next_state(ev: &mut zk_client::StateEvents, want: SessionState, within: Duration) {
    let r = timeout(within, async {
        loop {
            match ev.next().await {
                Some(s) if s == want => return,
                Some(_) => continue,
                None => panic!("state stream ended before {want:?}"),
            }
        }
    })
    .await;
    assert!(r.is_ok(), "no {want:?} within {within:?}");
}

async fn every_operation_and_its_errors(target: Target) {
    let srv = TestServer::start(target);
    let c = client(&srv.addr).await;
    let open = acl::open_unsafe();
    let base = unique("ops");
    assert_eq!(c.create(&base, b"root", &open, CreateMode::Persistent).await.unwrap(), base);
    assert_eq!(c.create(&base, b"", &open, CreateMode::Persistent).await, Err(Error::NodeExists));
    assert_eq!(
        c.create(&format!("{base}/a/b"), b"", &open, CreateMode::Persistent).await,
        Err(Error::NoNode)
    );
    assert_eq!(c.create("bad", b"", &open, CreateMode::Persistent).await, Err(Error::BadArguments));
    assert_eq!(
        c.create(&format!("{base}/x"), b"", &[], CreateMode::Persistent).await,
        Err(Error::InvalidAcl)
    );

    // Every create mode.
    let (p, st) = c.create2(&format!("{base}/p"), b"data", &open, CreateMode::Persistent).await.unwrap();
    assert_eq!((p.as_str(), st.data_length, st.ephemeral_owner), (format!("{base}/p").as_str(), 4, 0));
    let e = c.create(&format!("{base}/e"), b"", &open, CreateMode::Ephemeral).await.unwrap();
    assert_eq!(c.exists(&e).await.unwrap().unwrap().ephemeral_owner, c.session_id());
    assert_eq!(
        c.create(&format!("{e}/child"), b"", &open, CreateMode::Persistent).await,
        Err(Error::NoChildrenForEphemerals)
    );
    let s1 = c.create(&format!("{base}/s-"), b"", &open, CreateMode::PersistentSequential).await.unwrap();
    let s2 = c.create(&format!("{base}/s-"), b"", &open, CreateMode::EphemeralSequential).await.unwrap();
    assert!(s1 < s2 && s1.len() == format!("{base}/s-").len() + 10, "{s1} {s2}");
    let (cont, _) = c.create2(&format!("{base}/cont"), b"", &open, CreateMode::Container).await.unwrap();
    let (ttl, st) = c
        .create_ttl(
            &format!("{base}/ttl"),
            b"",
            &open,
            CreateMode::PersistentWithTtl,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert_eq!(st.ephemeral_owner, 0);
    let (ttls, _) = c
        .create_ttl(
            &format!("{base}/ttls-"),
            b"",
            &open,
            CreateMode::PersistentSequentialWithTtl,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert!(ttls.starts_with(&format!("{base}/ttls-")));
    assert_eq!(
        c.create_ttl(&format!("{base}/t0"), b"", &open, CreateMode::PersistentWithTtl, Duration::ZERO).await,
        Err(Error::BadArguments)
    );
    assert!(c.exists(&cont).await.unwrap().is_some() && c.exists(&ttl).await.unwrap().is_some());

    // Reads and writes.
    let p = format!("{base}/p");
    let (data, st) = c.get_data(&p).await.unwrap();
    assert_eq!((&data[..], st.version), (&b"data"[..], 0));
    let st = c.set_data(&p, b"v2", 0).await.unwrap();
    assert_eq!(st.version, 1);
    assert_eq!(c.set_data(&p, b"v3", 0).await, Err(Error::BadVersion));
    assert_eq!(c.get_data(&format!("{base}/none")).await, Err(Error::NoNode));
    assert_eq!(c.exists(&format!("{base}/none")).await, Ok(None));
    let (a, st) = c.get_acl(&p).await.unwrap();
    assert_eq!((a, st.aversion), (open.clone(), 0));
    assert_eq!(c.set_acl(&p, &acl::read_unsafe(), 0).await.unwrap().aversion, 1);
    assert_eq!(c.set_data(&p, b"x", -1).await, Err(Error::NoAuth));
    assert_eq!(c.set_acl(&p, &open, 0).await, Err(Error::NoAuth), "no ADMIN now");
    let mut kids = c.get_children(&base).await.unwrap();
    kids.sort();
    assert_eq!(kids.len(), 7, "{kids:?}");
    let (_, st) = c.get_children2(&base).await.unwrap();
    assert_eq!(st.num_children, 7);
    assert_eq!(c.get_all_children_number(&base).await.unwrap(), 7);
    assert_eq!(c.sync(&base).await.unwrap(), base);
    let mut eph = c.get_ephemerals(&base).await.unwrap();
    eph.sort();
    assert_eq!(eph, [e.clone(), s2.clone()]);
    let who = c.who_am_i().await.unwrap();
    assert_eq!(who[0].auth_scheme, "ip");
    assert_eq!(c.delete(&base, -1).await, Err(Error::NotEmpty));
    assert_eq!(c.delete(&s1, 5).await, Err(Error::BadVersion));
    c.delete(&s1, 0).await.unwrap();
    assert_eq!(c.delete(&s1, -1).await, Err(Error::NoNode));

    // multi: all or nothing, results per op.
    let m = format!("{base}/m");
    let ok = c
        .multi(vec![
            MultiOp::Create {
                path: m.clone(),
                data: "1".into(),
                acl: open.clone(),
                mode: CreateMode::Persistent,
                ttl: None,
            },
            MultiOp::SetData { path: m.clone(), data: "2".into(), version: 0 },
            MultiOp::Check { path: m.clone(), version: 1 },
            MultiOp::Create {
                path: format!("{m}/c"),
                data: "".into(),
                acl: open.clone(),
                mode: CreateMode::Container,
                ttl: None,
            },
            MultiOp::Delete { path: format!("{m}/c"), version: -1 },
        ])
        .await
        .unwrap();
    assert_eq!(ok[0], OpResult::Create(m.clone()));
    assert!(matches!(ok[1], OpResult::SetData(ref s) if s.version == 1));
    assert_eq!(ok[2], OpResult::Check);
    assert!(matches!(ok[3], OpResult::Create2(ref p, _) if *p == format!("{m}/c")));
    assert_eq!(multi_error(&ok), None);
    let bad = c
        .multi(vec![
            MultiOp::SetData { path: m.clone(), data: "3".into(), version: -1 },
            MultiOp::Check { path: m.clone(), version: 0 },
            MultiOp::Delete { path: m.clone(), version: -1 },
        ])
        .await
        .unwrap();
    assert_eq!(multi_error(&bad), Some(Error::BadVersion));
    assert_eq!(bad[2], OpResult::Error(zk_proto::ErrorCode::RuntimeInconsistency));
    assert_eq!(&c.get_data(&m).await.unwrap().0[..], b"2", "nothing applied");
    let reads = c
        .multi_read(vec![
            ReadOp::GetData(m.clone()),
            ReadOp::GetChildren(base.clone()),
            ReadOp::GetData(format!("{base}/none")),
        ])
        .await
        .unwrap();
    assert!(matches!(&reads[0], OpResult::GetData(d) if d.data.as_deref() == Some(&b"2"[..])));
    assert!(matches!(&reads[1], OpResult::GetChildren(k) if k.len() == 7));
    assert_eq!(reads[2], OpResult::Error(zk_proto::ErrorCode::NoNode));

    // Config (standalone: the node exists, reconfig is disabled by default).
    let (_, st) = c.get_config().await.unwrap();
    assert!(st.czxid >= 0);
    assert_eq!(c.reconfig(None, Some("9"), None, -1).await.unwrap_err(), Error::ReconfigDisabled);

    // Auth: digest identity, then creator ACLs.
    c.add_auth("digest", b"alice:secret").await.unwrap();
    assert!(c.who_am_i().await.unwrap().iter().any(|i| i.auth_scheme == "digest" && i.user == "alice"));
    let secret = format!("{base}/secret");
    c.create(&secret, b"s", &acl::creator_all(), CreateMode::Persistent).await.unwrap();
    let other = client(&srv.addr).await;
    assert_eq!(other.get_data(&secret).await, Err(Error::NoAuth));
    assert_eq!(
        other.create(&format!("{base}/y"), b"", &acl::creator_all(), CreateMode::Persistent).await,
        Err(Error::InvalidAcl)
    );

    // Ephemerals vanish with the session; the closed client reports SESSIONEXPIRED.
    c.close().await.unwrap();
    assert_eq!(c.state(), SessionState::Closed);
    assert_eq!(c.get_data(&p).await, Err(Error::SessionExpired));
    assert_eq!(other.exists(&e).await, Ok(None));
}

async fn watches_of_every_kind_and_chroot(target: Target) {
    let srv = TestServer::start(target);
    let open = acl::open_unsafe();
    let c = client(&srv.addr).await;
    let base = unique("watch");
    c.create(&base, b"", &open, CreateMode::Persistent).await.unwrap();
    let n = format!("{base}/n");

    // exists on a missing node -> NodeCreated; getData -> NodeDataChanged; getChildren ->
    // NodeChildrenChanged; delete reaches data and child watches.
    let (none, created) = c.exists_w(&n).await.unwrap();
    assert!(none.is_none());
    let (_, kids_changed) = c.get_children_w(&base).await.unwrap();
    c.create(&n, b"1", &open, CreateMode::Persistent).await.unwrap();
    let ev = timeout(T, created).await.unwrap().unwrap();
    assert_eq!((ev.event_type, ev.path.as_str()), (EventType::NodeCreated, n.as_str()));
    let ev = timeout(T, kids_changed).await.unwrap().unwrap();
    assert_eq!((ev.event_type, ev.path.as_str()), (EventType::NodeChildrenChanged, base.as_str()));
    let (_, _, changed) = c.get_data_w(&n).await.unwrap();
    c.set_data(&n, b"2", -1).await.unwrap();
    assert_eq!(timeout(T, changed).await.unwrap().unwrap().event_type, EventType::NodeDataChanged);
    let (_, _, deleted_d) = c.get_data_w(&n).await.unwrap();
    let (_, _, deleted_c) = c.get_children2_w(&n).await.unwrap();
    let (_, deleted_e) = c.exists_w(&n).await.unwrap();
    c.delete(&n, -1).await.unwrap();
    for w in [deleted_d, deleted_c, deleted_e] {
        assert_eq!(timeout(T, w).await.unwrap().unwrap().event_type, EventType::NodeDeleted);
    }
    // A failed getData leaves no watch.
    assert_eq!(c.get_data_w(&n).await.unwrap_err(), Error::NoNode);

    // Persistent: stays, sees data and child changes of its node only. (On the same path, one
    // session's later addWatch replaces the earlier mode on the server, so the two kinds sit on
    // different paths here.)
    let mut pw = c.add_watch(&n, AddWatchMode::Persistent).await.unwrap();
    // Recursive: every node below, never NodeChildrenChanged.
    let mut rw = c.add_watch(&base, AddWatchMode::PersistentRecursive).await.unwrap();
    let deep = format!("{n}/deep");
    c.create(&n, b"", &open, CreateMode::Persistent).await.unwrap();
    c.create(&deep, b"", &open, CreateMode::Persistent).await.unwrap();
    c.set_data(&base, b"x", -1).await.unwrap();
    c.set_data(&deep, b"x", -1).await.unwrap();
    c.set_data(&n, b"x", -1).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let e = timeout(T, pw.next()).await.unwrap().unwrap();
        got.push((e.event_type, e.path));
    }
    assert_eq!(
        got,
        [
            (EventType::NodeCreated, n.clone()),
            (EventType::NodeChildrenChanged, n.clone()),
            (EventType::NodeDataChanged, n.clone())
        ]
    );
    let mut got = Vec::new();
    // The NodeChildrenChanged the server sends for the persistent watch on n also reaches the
    // recursive watcher client-side: Apache's client matches recursive watchers by path alone.
    for _ in 0..6 {
        let e = timeout(T, rw.next()).await.unwrap().unwrap();
        got.push((e.event_type, e.path));
    }
    assert_eq!(
        got,
        [
            (EventType::NodeCreated, n.clone()),
            (EventType::NodeCreated, deep.clone()),
            (EventType::NodeChildrenChanged, n.clone()),
            (EventType::NodeDataChanged, base.clone()),
            (EventType::NodeDataChanged, deep.clone()),
            (EventType::NodeDataChanged, n.clone()),
        ]
    );
    // removeWatches: NOWATCHER locally, then removal events (and the end of the streams).
    assert_eq!(c.remove_watches(&format!("{base}/zz"), WatcherType::Any).await, Err(Error::NoWatcher));
    let (_, one_shot) = c.get_children_w(&deep).await.unwrap();
    c.remove_watches(&deep, WatcherType::Children).await.unwrap();
    assert_eq!(timeout(T, one_shot).await.unwrap().unwrap().event_type, EventType::ChildWatchRemoved);
    c.remove_watches(&n, WatcherType::Any).await.unwrap();
    assert_eq!(timeout(T, pw.next()).await.unwrap().unwrap().event_type, EventType::PersistentWatchRemoved);
    assert_eq!(timeout(T, pw.next()).await.unwrap(), None);
    c.remove_watches(&base, WatcherType::Any).await.unwrap();
    assert_eq!(timeout(T, rw.next()).await.unwrap().unwrap().event_type, EventType::PersistentWatchRemoved);
    c.delete(&deep, -1).await.unwrap();

    // Chroot: paths in and out are relative, watch events too.
    let ch = Client::builder(&format!("{}{base}", srv.addr)).session_timeout(T).connect().await.unwrap();
    assert_eq!(ch.create("/n/k", b"", &open, CreateMode::Persistent).await.unwrap(), "/n/k");
    let seq = ch.create("/q-", b"", &open, CreateMode::PersistentSequential).await.unwrap();
    assert!(seq.starts_with("/q-") && seq.len() == 13, "{seq}");
    let mut kids = ch.get_children("/").await.unwrap();
    kids.sort();
    assert_eq!(kids[0], "n");
    let (_, w) = ch.get_children_w("/n").await.unwrap();
    let mut rec = ch.add_watch("/", AddWatchMode::PersistentRecursive).await.unwrap();
    c.delete(&format!("{n}/k"), -1).await.unwrap();
    let ev = timeout(T, w).await.unwrap().unwrap();
    assert_eq!((ev.event_type, ev.path.as_str()), (EventType::NodeChildrenChanged, "/n"));
    let ev = timeout(T, rec.next()).await.unwrap().unwrap();
    assert_eq!((ev.event_type, ev.path.as_str()), (EventType::NodeDeleted, "/n/k"));
    let r = ch
        .multi(vec![MultiOp::Create {
            path: "/mc".into(),
            data: "".into(),
            acl: open.clone(),
            mode: CreateMode::Persistent,
            ttl: None,
        }])
        .await
        .unwrap();
    assert_eq!(r, [OpResult::Create("/mc".into())]);
    assert_eq!(ch.sync("/n").await.unwrap(), "/n");
    assert!(c.exists(&format!("{base}/mc")).await.unwrap().is_some());
}

async fn reconnect_after_server_restart_keeps_session_and_watches(target: Target) {
    let mut srv = TestServer::start(target);
    if !srv.is_managed() {
        eprintln!("skipped: ZKRS_TEST_SERVER is set; the server cannot be restarted from here");
        return;
    }
    let open = acl::open_unsafe();
    let c = client(&srv.addr).await;
    let mut states = c.state_events();
    let base = unique("restart");
    c.create(&base, b"", &open, CreateMode::Persistent).await.unwrap();
    let eph = c.create(&format!("{base}/e"), b"", &open, CreateMode::Ephemeral).await.unwrap();
    let (_, _, data_w) = c.get_data_w(&base).await.unwrap();
    let (_, exist_w) = c.exists_w(&format!("{base}/later")).await.unwrap();
    let mut pw = c.add_watch(&base, AddWatchMode::PersistentRecursive).await.unwrap();
    let id = c.session_id();
    assert_eq!(c.connection(), Some((srv.addr.clone(), 1)), "the first connection, to the server");

    srv.kill();
    next_state(&mut states, SessionState::Disconnected, T).await;
    assert_eq!(c.get_data(&base).await, Err(Error::ConnectionLoss), "no server to answer");
    srv.restart();
    next_state(&mut states, SessionState::Connected, Duration::from_secs(20)).await;
    assert_eq!(c.session_id(), id, "same session");
    let (server, number) = c.connection().expect("connected");
    assert!(server == srv.addr && number >= 2, "a later connection: {server} #{number}");
    assert!(c.exists(&eph).await.unwrap().is_some(), "ephemeral survived");

    // Changes made by another session after the restart reach the re-registered watches.
    let other = client(&srv.addr).await;
    other.set_data(&base, b"x", -1).await.unwrap();
    other.create(&format!("{base}/later"), b"", &open, CreateMode::Persistent).await.unwrap();
    assert_eq!(timeout(T, data_w).await.unwrap().unwrap().event_type, EventType::NodeDataChanged);
    assert_eq!(timeout(T, exist_w).await.unwrap().unwrap().event_type, EventType::NodeCreated);
    let e = timeout(T, pw.next()).await.unwrap().unwrap();
    assert_eq!((e.event_type, e.path), (EventType::NodeDataChanged, base.clone()));
    let e = timeout(T, pw.next()).await.unwrap().unwrap();
    assert_eq!(e.event_type, EventType::NodeCreated);
    if c.state() != SessionState::Connected {
        panic!("state {:?}\n{}", c.state(), srv.log());
    }
}

async fn session_expiry_is_reported_and_ops_fail(target: Target) {
    let srv = TestServer::start(target);
    let proxy = Proxy::start(&srv.addr).await;
    let c = Client::builder(&proxy.addr)
        .session_timeout(Duration::from_millis(2000))
        .reconnect_delay_max(Duration::from_millis(50))
        .connect()
        .await
        .unwrap();
    let mut states = c.state_events();
    let open = acl::open_unsafe();
    let base = unique("expiry");
    c.create(&base, b"", &open, CreateMode::Persistent).await.unwrap();
    let eph = c.create(&format!("{base}/e"), b"", &open, CreateMode::Ephemeral).await.unwrap();
    let (_, _, w) = c.get_data_w(&base).await.unwrap();
    proxy.block();
    next_state(&mut states, SessionState::Disconnected, T).await;
    // Unreachable for well past the timeout: the server expires the session meanwhile.
    tokio::time::sleep(Duration::from_millis(5000)).await;
    proxy.unblock();
    next_state(&mut states, SessionState::Expired, T).await;
    assert_eq!(timeout(T, w).await.unwrap(), Err(Error::SessionExpired));
    assert_eq!(c.get_data(&base).await, Err(Error::SessionExpired));
    assert_eq!(
        c.create(&format!("{base}/x"), b"", &open, CreateMode::Persistent).await,
        Err(Error::SessionExpired)
    );
    let other = client(&srv.addr).await;
    assert_eq!(other.exists(&eph).await, Ok(None), "ephemeral gone with the session");
    // Resuming the dead session is refused the same way.
    let again = Client::builder(&srv.addr).session(c.credentials()).session_timeout(T).connect().await;
    assert_eq!(again.unwrap_err(), Error::SessionExpired);
}

async fn auth_replayed_after_reconnect_and_session_resumable(target: Target) {
    let srv = TestServer::start(target);
    let proxy = Proxy::start(&srv.addr).await;
    let c = client(&proxy.addr).await;
    let mut states = c.state_events();
    let base = unique("auth");
    c.add_auth("digest", b"bob:pw").await.unwrap();
    c.create(&base, b"mine", &acl::creator_all(), CreateMode::Persistent).await.unwrap();
    proxy.kick();
    next_state(&mut states, SessionState::Disconnected, T).await;
    next_state(&mut states, SessionState::Connected, T).await;
    assert!(c.who_am_i().await.unwrap().iter().any(|i| i.auth_scheme == "digest" && i.user == "bob"));
    assert_eq!(&c.get_data(&base).await.unwrap().0[..], b"mine");

    // Another client resumes this session with its id and password (auth is per connection).
    // The first client is kept away meanwhile: reconnecting, it would take the session back and
    // the server would close the resumed connection.
    proxy.block();
    next_state(&mut states, SessionState::Disconnected, T).await;
    let resumed =
        Client::builder(&srv.addr).session(c.credentials()).session_timeout(T).connect().await.unwrap();
    assert_eq!(resumed.session_id(), c.session_id());
    assert_eq!(resumed.get_data(&base).await, Err(Error::NoAuth));

    // Bad credentials end the session with AUTHFAILED.
    let bad = client(&srv.addr).await;
    let mut bs = bad.state_events();
    assert_eq!(bad.add_auth("nosuchscheme", b"x").await, Err(Error::AuthFailed));
    next_state(&mut bs, SessionState::AuthFailed, T).await;
    assert_eq!(bad.exists("/").await, Err(Error::AuthFailed));
}

/// SASL DIGEST-MD5 with users from a JAAS file: bob's `sasl` ACL, an anonymous client refused,
/// a wrong password failing the connect with AUTHFAILED.
async fn sasl_digest_md5(target: Target) {
    let dir = tempfile::tempdir().unwrap();
    let jaas =
        "Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_bob=\"bobpw\"; };\n";
    let srv = TestServer::start_with_jaas(target, dir.path(), jaas);
    let sasl = |user: &str, pw: &str| {
        Client::builder(&srv.addr).session_timeout(T).sasl_digest_md5(user, pw).connect()
    };
    let bob = sasl("bob", "bobpw").await.unwrap();
    let only_bob =
        vec![zk_client::Acl { perms: 31, id: zk_client::Id { scheme: "sasl".into(), id: "bob".into() } }];
    let path = unique("sasl");
    bob.create(&path, b"secret", &only_bob, CreateMode::Persistent).await.unwrap();
    assert_eq!(&bob.get_data(&path).await.unwrap().0[..], b"secret");
    let anon = client(&srv.addr).await;
    assert_eq!(anon.get_data(&path).await, Err(Error::NoAuth));
    assert_eq!(sasl("bob", "wrong").await.err(), Some(Error::AuthFailed));
}

/// A reply longer than 0xfffff bytes (a multiRead of three 400 KB nodes) drops the connection
/// with the default limit, the request failing with CONNECTIONLOSS and the session going on; a
/// client built with a larger `max_frame` takes it.
async fn replies_past_the_default_frame_limit(target: Target) {
    let srv = TestServer::start(target);
    let c = client(&srv.addr).await;
    let open = acl::open_unsafe();
    let base = unique("frame");
    c.create(&base, b"", &open, CreateMode::Persistent).await.unwrap();
    let big = vec![7u8; 400_000];
    let mut reads = Vec::new();
    for i in 0..3 {
        let p = format!("{base}/n{i}");
        c.create(&p, &big, &open, CreateMode::Persistent).await.unwrap();
        reads.push(ReadOp::GetData(p));
    }
    assert_eq!(c.multi_read(reads.clone()).await, Err(Error::ConnectionLoss));
    // The session survives the dropped connection.
    assert_eq!(timeout(T, c.get_data(&base)).await.unwrap().unwrap().0.len(), 0);
    let wide = Client::builder(&srv.addr).session_timeout(T).max_frame(4 << 20).connect().await.unwrap();
    let got = wide.multi_read(reads).await.unwrap();
    assert_eq!(got.len(), 3);
    for r in got {
        match r {
            OpResult::GetData(d) => assert_eq!(d.data.map(|b| b.len()), Some(big.len())),
            other => panic!("not a getData result: {other:?}"),
        }
    }
}

both!(
    replies_past_the_default_frame_limit,
    sasl_digest_md5,
    every_operation_and_its_errors,
    watches_of_every_kind_and_chroot,
    reconnect_after_server_restart_keeps_session_and_watches,
    session_expiry_is_reported_and_ops_fail,
    auth_replayed_after_reconnect_and_session_resumable
);
