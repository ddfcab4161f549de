//! Replicated ensembles on real processes (loopback ports): three zkrs servers elect a leader,
//! replicate writes made through any of them, survive kill -9 of the leader without losing an
//! acknowledged write, and take a restarted server back in (it catches up from the leader).
#![allow(clippy::disallowed_methods)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::ensemble::*;
use zk_proto::*;

#[test]
fn three_servers_replicate_and_lose_no_acknowledged_write_when_the_leader_dies() {
    let mut e = Ensemble::start(3);
    let leader = e.wait_for_leader();
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    // The leader reports its quorum as Apache's mntr does.
    e.wait_mntr(leader, "zk_server_state", "leader");
    e.wait_mntr(leader, "zk_synced_followers", "2");
    e.wait_mntr(followers[0], "zk_server_state", "follower");
    // Before any write, srvr on the leader shows its epoch's zxid 0, as Apache's leader does.
    assert_eq!(e.zxid(leader), Some(0x1_0000_0000), "{}", e.logs());

    // Writes through a follower are seen on every server after sync.
    let mut a = e.client(followers[0]);
    assert_eq!(a.create("/k", b"root", CreateMode::Persistent).err(), ErrorCode::Ok);
    for i in 0..3 {
        let mut c = e.client(i);
        assert_eq!(children(&mut c, "/"), ["k", "zookeeper"], "server {}", i + 1);
    }

    // Pipelined writes through a follower while the leader is killed: every acknowledged one
    // must be on both survivors.
    let mut xids = Vec::new();
    for n in 0..400 {
        xids.push((n, a.send(&create_req(&format!("/k/n{n:04}")))));
    }
    let mut acked = Vec::new();
    for (k, (n, xid)) in xids.into_iter().enumerate() {
        if k == 150 {
            e.kill(leader);
        }
        match a.recv(xid) {
            Some(r) if r.err() == ErrorCode::Ok => acked.push(format!("n{n:04}")),
            Some(r) => panic!("write {n}: {:?}", r.err()),
            // The follower closed its clients when it lost the leader: the rest is unknown.
            None => break,
        }
    }
    assert!(acked.len() >= 150, "only {} writes acknowledged before the kill", acked.len());
    eprintln!("{} of 400 pipelined writes acknowledged across the leader's death", acked.len());
    let new_leader = e.wait_for_leader();
    assert_ne!(new_leader, leader);
    for &i in &followers {
        let mut c = e.client(i);
        let have = children(&mut c, "/k");
        let missing: Vec<&String> = acked.iter().filter(|p| !have.contains(p)).collect();
        assert!(missing.is_empty(), "server {} lost acknowledged writes {missing:?}", i + 1);
    }

    // The new ensemble takes writes, and the old leader rejoins and catches up.
    let mut b = e.client(followers[1]);
    assert_eq!(b.create("/after", b"x", CreateMode::Persistent).err(), ErrorCode::Ok);
    e.launch(leader);
    e.wait_for_leader();
    let trees: Vec<(Vec<String>, Vec<String>)> = (0..3)
        .map(|i| {
            let mut c = e.client(i);
            (children(&mut c, "/"), children(&mut c, "/k"))
        })
        .collect();
    assert!(trees[0].0.contains(&"after".to_string()), "{:?}", trees[0].0);
    assert_eq!(trees[0], trees[1], "servers 1 and 2 differ\n{}", e.logs());
    assert_eq!(trees[1], trees[2], "servers 2 and 3 differ\n{}", e.logs());
}

fn set_data(c: &mut RawClient, path: &str, data: &[u8]) -> ErrorCode {
    c.set_data(path, data, -1).err()
}

/// A mixed ensemble: Apache ZooKeeper 3.8 followers under a zkrs leader, then, with the zkrs
/// server killed, an Apache leader with the zkrs server back as its follower. Writes made through
/// every member are on every member.
#[test]
fn zkrs_and_apache_servers_replicate_to_each_other() {
    let mut e = Ensemble::configure(&[Kind::Apache, Kind::Apache, Kind::Zkrs]);
    // zkrs and Apache's server 1 first: with equal histories the largest id (3, zkrs) is the
    // leader Apache's rules pick; then Apache's server 2 joins the established ensemble.
    e.launch(2);
    e.launch(0);
    e.wait_mode(2, "leader");
    e.launch(1);
    let leader = e.wait_for_leader();
    assert_eq!(leader, 2, "the zkrs server (id 3) leads\n{}", e.logs());
    let mut a1 = e.client(0);
    assert_eq!(a1.create("/mix", b"via apache 1", CreateMode::Persistent).err(), ErrorCode::Ok);
    let mut a2 = e.client(1);
    assert_eq!(a2.create("/mix/a2", b"", CreateMode::EphemeralSequential).err(), ErrorCode::Ok);
    let mut z = e.client(2);
    assert_eq!(set_data(&mut z, "/mix", b"via zkrs"), ErrorCode::Ok);
    for i in 0..3 {
        let mut c = e.client(i);
        assert_eq!(children(&mut c, "/mix"), ["a20000000000"], "member {}", i + 1);
    }
    // The ephemeral goes with its session, everywhere.
    drop(a2.close());
    for i in 0..3 {
        let mut c = e.client(i);
        assert!(children(&mut c, "/mix").is_empty(), "member {}", i + 1);
    }

    // The zkrs leader dies: Apache 2 leads; zkrs comes back as its follower and catches up.
    e.kill(2);
    let leader = e.wait_for_leader();
    assert_eq!(leader, 1, "Apache's server 2 takes over\n{}", e.logs());
    // Apache's follower closed its clients when it lost its leader, as zkrs's do.
    let mut a1 = e.client(0);
    assert_eq!(a1.create("/mix/while-away", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    e.launch(2);
    e.wait_for_leader();
    assert_eq!(e.mode(2).as_deref(), Some("follower"));
    let mut z = e.client(2);
    assert_eq!(z.create("/mix/via-zkrs-follower", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let trees: Vec<Vec<String>> = (0..3).map(|i| children(&mut e.client(i), "/mix")).collect();
    assert_eq!(trees[0], ["via-zkrs-follower", "while-away"]);
    assert!(trees.iter().all(|t| *t == trees[0]), "{trees:?}\n{}", e.logs());
}

/// kazoo with a three-server connect string keeps its session, lock, election candidacy,
/// ephemeral and watch across the death of the leader: connected to the leader, through a
/// suspension and a reconnection; connected to a follower, kept through the election with no
/// change of state.
#[test]
fn kazoo_carries_on_across_the_leaders_death() {
    kazoo_through_the_leaders_death("kazoo_failover.py", |e, _| {
        e.members.iter().map(|m| m.client.to_string()).collect::<Vec<_>>().join(",")
    });
}

/// A client of a follower with nothing in flight is kept through the leader's death (Apache's
/// followers close every client connection): kazoo, connected to that follower alone, sees no
/// change of state, its first request after the kill is answered without an error (held while
/// the follower elects), and its watch fires for the change.
#[test]
fn a_followers_idle_kazoo_client_sees_no_disconnection_when_the_leader_dies() {
    kazoo_through_the_leaders_death("kazoo_kept.py", |e, leader| {
        e.members[(leader + 1) % 3].client.to_string()
    });
}

/// Runs kazoo script `script` (tests/clients/) against a fresh three-server ensemble, with the
/// connect string `hosts` gives for it and its leader, and kills the leader when the script is
/// ready: the script writes its session's id (hex) into its first marker file; the test answers
/// in the second whether that session was on the leader ("leader" or "follower"), once the
/// leader is dead. The script must end with a line "ok".
fn kazoo_through_the_leaders_death(script: &str, hosts: impl Fn(&Ensemble, usize) -> String) {
    const PYTHON: &str = "/usr/bin/python3";
    let probe = Command::new(PYTHON).args(["-c", "import kazoo"]).output().expect("run python3");
    assert!(
        probe.status.success(),
        "kazoo is missing: install Debian's python3-kazoo (the README's test command does)"
    );
    let mut e = Ensemble::start(3);
    let leader = e.wait_for_leader();
    let dir = tempfile::tempdir().expect("temp dir");
    let (kill, killed) = (dir.path().join("kill"), dir.path().join("killed"));
    let script = format!("{}/tests/clients/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(PYTHON)
        .arg(script)
        .arg(hosts(&e, leader))
        .arg(&kill)
        .arg(&killed)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kazoo");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kill.exists() {
        assert!(Instant::now() < deadline, "the kazoo script never got ready");
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().expect("output");
            panic!(
                "kazoo exited early ({status}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let session = std::fs::read_to_string(&kill).expect("kill marker");
    assert!(!session.trim().is_empty(), "the script wrote no session id into its marker");
    let on_leader = support::ensemble::four(e.members[leader].client, "cons")
        .is_some_and(|cons| cons.contains(&format!("sid=0x{}", session.trim())));
    e.kill(leader);
    std::fs::write(&killed, if on_leader { "leader" } else { "follower" }).expect("marker");
    let out = child.wait_with_output().expect("kazoo output");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.lines().any(|l| l == "ok"), "kazoo failed:\n{text}\n{}", e.logs());
}

/// An observer learns the committed history without voting: writes through it reach the
/// ensemble, reads on it see the ensemble's writes after sync, its sessions' ephemerals go with
/// them, and the leader's commits reach it (INFORM).
#[test]
fn an_observer_serves_reads_and_forwards_writes() {
    let mut e = Ensemble::configure_with(&[Kind::Zkrs; 4], &[3]);
    for i in 0..4 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    assert_eq!(e.mode(3).as_deref(), Some("observer"));
    e.wait_mntr(leader, "zk_synced_observers", "1");
    e.wait_mntr(leader, "zk_synced_followers", "2");
    let mut obs = e.client(3);
    assert_eq!(obs.create("/via-observer", b"x", CreateMode::Persistent).err(), ErrorCode::Ok);
    assert_eq!(obs.create("/obs-eph", b"", CreateMode::Ephemeral).err(), ErrorCode::Ok);
    let mut voter = e.client(0);
    assert_eq!(children(&mut voter, "/"), ["obs-eph", "via-observer", "zookeeper"]);
    assert_eq!(set_data(&mut voter, "/via-observer", b"y"), ErrorCode::Ok);
    let r = obs.call(Request::Sync(SyncRequest { path: "/via-observer".into() }));
    assert_eq!(r.err(), ErrorCode::Ok);
    let r = obs.get_data("/via-observer", false);
    assert_eq!(r.err(), ErrorCode::Ok);
    let data: Option<bytes::Bytes> = r.decode();
    assert_eq!(data.as_deref(), Some(&b"y"[..]));
    drop(obs.close());
    assert_eq!(children(&mut voter, "/"), ["via-observer", "zookeeper"]);
}

/// How a server answers a handshake: "closed" (no answer), or the response's fields.
fn handshake_outcome(addr: std::net::SocketAddr, read_only: Option<bool>) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let req = zk_proto::jute::to_bytes(&ConnectRequest { time_out: 10_000, read_only, ..Default::default() });
    let mut out = (req.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&req);
    if s.write_all(&out).is_err() {
        return "closed".into();
    }
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    if got.len() < 4 {
        return format!("closed after {} bytes", got.len());
    }
    match zk_proto::jute::from_bytes::<ConnectResponse>(bytes::Bytes::copy_from_slice(&got[4..])) {
        Ok(r) => format!("session {} timeout {} read-only {:?}", r.session_id != 0, r.time_out, r.read_only),
        Err(_) => format!("{} bytes {:02x?}", got.len(), got),
    }
}

/// What a read-only server did in [`read_only_scenario`], as comparable lines.
fn read_only_scenario(kind: Kind) -> Vec<String> {
    let mut e = Ensemble::configure(&[kind; 3]);
    // Apache 3.8's read-only server makes local sessions only: without them it answers a
    // read-only client's handshake with a NOTREADONLY reply header instead of a session.
    e.append_config("readonlymode.enabled=true\nlocalSessionsEnabled=true\n");
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    let mut c = e.client(leader);
    assert_eq!(c.create("/ro", b"v", CreateMode::Persistent).err(), ErrorCode::Ok);
    drop(c);
    // The survivor: a follower; the other two stop once it has applied /ro (the create was
    // acknowledged when the leader and either follower had it, so it may not have yet).
    let s = (0..3).find(|&i| i != leader).unwrap();
    let mut f = e.client(s);
    assert_eq!(f.call(Request::Sync(SyncRequest { path: "/ro".into() })).err(), ErrorCode::Ok);
    assert_eq!(f.get_data("/ro", false).err(), ErrorCode::Ok);
    drop(f);
    for i in (0..3).filter(|&i| i != s) {
        e.kill(i);
    }
    let addr = e.members[s].client;
    let deadline = Instant::now() + Duration::from_secs(60);
    while four(addr, "isro").as_deref() != Some("ro") {
        assert!(Instant::now() < deadline, "never read-only:\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut seen = Vec::new();
    let mode = srvr(addr).unwrap_or_default();
    seen.push(mode.lines().find(|l| l.starts_with("Mode:")).unwrap_or("no mode").to_string());
    // A client that does not accept a read-only server is refused.
    seen.push(format!("read-write client: {}", handshake_outcome(addr, Some(false))));
    seen.push(format!("read-only client: {}", handshake_outcome(addr, Some(true))));
    let mut c = RawClient::connect_with(
        addr,
        ConnectRequest { time_out: 10_000, read_only: Some(true), ..Default::default() },
    )
    .expect("read-only session");
    seen.push(format!("session flagged read-only: {:?}", c.session.read_only));
    let r = c.get_data("/ro", false);
    let data = if r.err() == ErrorCode::Ok { r.decode::<GetDataResponse>().data } else { None };
    seen.push(format!("get /ro: {:?} {:?}", r.err(), data));
    seen.push(format!("exists /none: {:?}", c.exists("/none", false).err()));
    seen.push(format!("create: {:?}", c.create("/w", b"", CreateMode::Persistent).err()));
    seen.push(format!("setData: {:?}", c.set_data("/ro", b"x", -1).err()));
    seen.push(format!("delete: {:?}", c.delete("/ro", -1).err()));
    let r = c.call(Request::Sync(SyncRequest { path: "/ro".into() }));
    seen.push(format!("sync: {:?}", r.err()));
    let r = c.call(Request::GetChildren(GetChildrenRequest { path: "/".into(), watch: false }));
    let mut kids: Vec<String> = if r.err() == ErrorCode::Ok { r.decode() } else { Vec::new() };
    kids.sort();
    seen.push(format!("children of /: {kids:?}"));
    // The quorum comes back: the survivor serves read-write again, and has what it had.
    for i in (0..3).filter(|&i| i != s) {
        e.launch(i);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while four(addr, "isro").as_deref() != Some("rw") {
        assert!(Instant::now() < deadline, "never read-write again:\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    e.wait_for_leader();
    let mut c = e.client(s);
    let r = c.get_data("/ro", false);
    seen.push(format!("after: get /ro {:?}", r.err()));
    seen.push(format!("after: create {:?}", c.create("/w", b"", CreateMode::Persistent).err()));
    seen
}

#[test]
fn a_server_cut_off_from_its_quorum_serves_read_only_clients_as_apache_does() {
    let apache = read_only_scenario(Kind::Apache);
    let zkrs = read_only_scenario(Kind::Zkrs);
    let differ: Vec<String> = zkrs
        .iter()
        .zip(apache.iter())
        .filter(|(z, a)| z != a)
        .map(|(z, a)| format!("zkrs {z:?} / apache {a:?}"))
        .collect();
    assert!(
        differ.is_empty() && zkrs.len() == apache.len(),
        "{differ:#?}\nzkrs {zkrs:#?}\napache {apache:#?}"
    );
    // Not equal by accident (both empty, both failing the same way).
    assert!(zkrs.contains(&"create: NotReadOnly".to_string()), "{zkrs:#?}");
    assert!(zkrs.contains(&"after: create Ok".to_string()), "{zkrs:#?}");
}

/// What an ensemble with `leaderServes=no` does, as comparable lines.
fn leader_serves_no_scenario(kind: Kind) -> Vec<String> {
    let mut e = Ensemble::configure(&[kind; 3]);
    e.append_config("leaderServes=no\n");
    for i in 0..3 {
        e.launch(i);
    }
    // The leader answers srvr as not serving, so find it by elimination.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (leader, followers) = loop {
        let modes: Vec<Option<String>> = (0..3).map(|i| e.mode(i)).collect();
        let followers: Vec<usize> = (0..3).filter(|&i| modes[i].as_deref() == Some("follower")).collect();
        if followers.len() == 2 {
            break ((0..3).find(|i| !followers.contains(i)).unwrap(), followers);
        }
        assert!(Instant::now() < deadline, "no two followers: {modes:?}\n{}", e.logs());
        std::thread::sleep(Duration::from_millis(100));
    };
    let addr = e.members[leader].client;
    let mut seen = vec![
        format!("leader srvr: {}", srvr(addr).unwrap_or_default().lines().next().unwrap_or("")),
        format!("leader isro: {}", four(addr, "isro").unwrap_or_default()),
        format!("leader handshake: {}", handshake_outcome(addr, Some(false))),
    ];
    let mut a = e.client(followers[0]);
    seen.push(format!("create via follower: {:?}", a.create("/ls", b"1", CreateMode::Persistent).err()));
    let mut b = e.client(followers[1]);
    let r = b.call(Request::Sync(SyncRequest { path: "/ls".into() }));
    seen.push(format!("sync on the other: {:?}", r.err()));
    seen.push(format!("read on the other: {:?}", b.get_data("/ls", false).err()));
    seen
}

#[test]
fn a_leader_with_leader_serves_no_takes_no_clients_as_apache_does() {
    let zkrs = leader_serves_no_scenario(Kind::Zkrs);
    let apache = leader_serves_no_scenario(Kind::Apache);
    assert_eq!(zkrs, apache);
    assert!(zkrs.contains(&"create via follower: Ok".to_string()), "{zkrs:#?}");
    assert!(zkrs[0].contains("not currently serving"), "{zkrs:#?}");
}

/// Member `i`'s quorum and election ports, from its zoo.cfg.
fn peer_ports(e: &Ensemble, i: usize) -> (u16, u16) {
    let cfg = std::fs::read_to_string(e.members[i].dir.join("zoo.cfg")).expect("zoo.cfg");
    let line = cfg.lines().find(|l| l.starts_with(&format!("server.{}=", i + 1))).expect("server line");
    let mut parts = line.split('=').nth(1).expect("value").split(':').skip(1);
    let q = parts.next().and_then(|p| p.parse().ok()).expect("quorum port");
    let e = parts.next().and_then(|p| p.split([':', ';']).next()?.parse().ok()).expect("port");
    (q, e)
}

/// Opens a connection to `port`, writes `bytes`, and lingers briefly for the server to read them.
fn send_raw(port: u16, bytes: &[u8]) {
    use std::io::Write;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return };
    let _ = s.write_all(bytes);
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 4096];
    let _ = std::io::Read::read(&mut s, &mut sink);
}

#[test]
fn hostile_quorum_and_election_traffic_changes_nothing() {
    use zk_quorum::wire::handshake::{ElectionHandshake, HostPort, PROTOCOL_VERSION_V1};
    use zk_quorum::wire::payload::LearnerInfo;
    use zk_quorum::wire::{PacketType, QuorumPacket};
    let e = Ensemble::start(3);
    let leader = e.wait_for_leader();
    let mut noise = Vec::with_capacity(4096);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.push(x as u8);
    }
    let handshake = |sid: i64| {
        ElectionHandshake::v1(sid, HostPort { host: "127.0.0.1".into(), port: 1 })
            .encode()
            .expect("handshake")
    };
    for i in 0..3 {
        let (_, election) = peer_ports(&e, i);
        // Noise; an address length far past any limit; an unknown server; a known one whose
        // election frame is garbage, or whose frame length is absurd.
        send_raw(election, &noise);
        let mut huge = PROTOCOL_VERSION_V1.to_be_bytes().to_vec();
        huge.extend_from_slice(&7i64.to_be_bytes());
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        send_raw(election, &huge);
        let mut unknown = handshake(99);
        unknown.extend_from_slice(&[0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
        send_raw(election, &unknown);
        let other = ((i + 1) % 3 + 1) as i64;
        let mut garbage_frame = handshake(other);
        garbage_frame.extend_from_slice(&[0, 0, 0, 5, 9, 9, 9, 9, 9]);
        send_raw(election, &garbage_frame);
        let mut absurd = handshake(other);
        absurd.extend_from_slice(&i32::MAX.to_be_bytes());
        send_raw(election, &absurd);
    }
    let (quorum, _) = peer_ports(&e, leader);
    send_raw(quorum, &noise);
    let mut unknown_type = QuorumPacket::new(PacketType::Ping, 0, None);
    unknown_type.packet_type = 77;
    send_raw(quorum, &unknown_type.to_vec());
    let stranger = QuorumPacket::new(PacketType::FollowerInfo, 0, Some(LearnerInfo::new(99, 0).encode()));
    send_raw(quorum, &stranger.to_vec());
    let mut bad_len = PacketType::FollowerInfo.to_wire().to_be_bytes().to_vec();
    bad_len.extend_from_slice(&0i64.to_be_bytes());
    bad_len.extend_from_slice(&i32::MAX.to_be_bytes());
    send_raw(quorum, &bad_len);
    // Nothing changed: the same leader, every server serving, writes through each follower.
    assert_eq!(e.wait_for_leader(), leader, "{}", e.logs());
    for i in (0..3).filter(|&i| i != leader) {
        let mut c = e.client(i);
        assert_eq!(c.create(&format!("/after-{i}"), b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    let mut c = e.client(leader);
    assert_eq!(children(&mut c, "/").len(), 3, "{}", e.logs());
    assert!(!e.logs().contains("panicked"), "{}", e.logs());
}

#[test]
fn a_learner_with_nothing_gets_a_large_tree_streamed_while_writes_go_on() {
    let mut e = Ensemble::start(3);
    let leader = e.wait_for_leader();
    let late = (0..3).find(|&i| i != leader).unwrap();
    let other = (0..3).find(|&i| i != leader && i != late).unwrap();
    e.kill(late);
    std::fs::remove_dir_all(e.members[late].dir.join("data/zkrs-log")).ok();
    std::fs::remove_dir_all(e.members[late].dir.join("data/zkrs-snap")).ok();
    // A tree of many steps of the stream (a step is 1,024 nodes).
    let mut c = e.client(leader);
    assert_eq!(c.create("/big", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let n = 12_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let xids: Vec<i32> = chunk.iter().map(|k| c.send(&create_req(&format!("/big/n{k:05}")))).collect();
        for x in xids {
            assert_eq!(c.recv(x).expect("reply").err(), ErrorCode::Ok);
        }
    }
    // The empty learner comes back while a client keeps writing through the other follower.
    e.launch(late);
    let mut w = e.client(other);
    let mut written = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while e.mode(late).as_deref() != Some("follower") {
        assert!(Instant::now() < deadline, "never synced:\n{}", e.logs());
        assert_eq!(
            w.create(&format!("/big/w{written:05}"), b"", CreateMode::Persistent).err(),
            ErrorCode::Ok
        );
        written += 1;
    }
    for k in 0..50 {
        assert_eq!(w.create(&format!("/big/x{k:05}"), b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    let want = n + written + 50;
    for i in 0..3 {
        let mut c = e.client(i);
        assert_eq!(children(&mut c, "/big").len(), want, "member {}\n{}", i + 1, e.logs());
    }
    let log = std::fs::read_to_string(e.members[leader].dir.join("server.log")).unwrap_or_default();
    assert!(log.contains("syncing learner by Snap"), "{log}");
}
