//! Leadership handover on real processes: ClickHouse Keeper's `ydld` and `rqld` over the client
//! port, and SIGTERM on a leader. Each time another server leads a later epoch and every server
//! holds every write. In a mixed ensemble a zkrs leader hands over to an Apache follower, and a
//! zkrs follower's `rqld` leaves an Apache leader serving.
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::ensemble::*;
use support::http::{exchange, request, Answer};
use zk_proto::*;

/// The epoch of member `i`'s last zxid, as `srvr` reports it.
fn epoch(e: &Ensemble, i: usize) -> i64 {
    e.zxid(i).unwrap_or_else(|| panic!("member {} answers srvr\n{}", i + 1, e.logs())) >> 32
}

/// Waits until a member other than `old` leads, every live member settled; its index.
fn wait_for_new_leader(e: &Ensemble, old: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let l = e.wait_for_leader();
        if l != old {
            return l;
        }
        assert!(Instant::now() < deadline, "member {} still leads\n{}", old + 1, e.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every member holds exactly `/h/c0000` .. `/h/c{n-1}`.
fn all_hold(e: &Ensemble, n: usize) {
    let want: Vec<String> = (0..n).map(|k| format!("c{k:04}")).collect();
    for i in 0..e.members.len() {
        if e.members[i].child.is_none() {
            continue;
        }
        let mut c = e.client(i);
        assert_eq!(children(&mut c, "/h"), want, "member {}\n{}", i + 1, e.logs());
    }
}

#[test]
fn ydld_and_rqld_move_the_leadership_to_a_later_epoch_and_lose_nothing() {
    let e = Ensemble::start(3);
    let leader = e.wait_for_leader();
    let follower = (0..3).find(|&i| i != leader).expect("a follower");
    write_children(&e, follower, 0, 200);
    let before = epoch(&e, leader);

    // On a follower, ydld refuses and names the leader.
    let answer = four(e.members[follower].client, "ydld").expect("ydld answered");
    assert_eq!(answer.trim(), format!("not the leader: server {} leads", leader + 1));

    // On the leader: it names its successor, which then leads a later epoch. A client of the
    // old leader keeps its connection (kept through the change of leader) and is served by it
    // as a follower.
    let mut kept = e.client(leader);
    assert_eq!(kept.create("/before", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let answer = four(e.members[leader].client, "ydld").expect("ydld answered");
    let to: usize = answer
        .trim()
        .strip_prefix("handing over to server ")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("ydld answered {answer:?}\n{}", e.logs()));
    let new = wait_for_new_leader(&e, leader);
    assert_eq!(new + 1, to, "the successor named leads\n{}", e.logs());
    let after = epoch(&e, new);
    assert!(after > before, "epoch {after} after {before}");
    all_hold(&e, 200);
    assert!(e.log(leader).contains("acknowledged"), "the old leader logged the handover\n{}", e.log(leader));
    assert_eq!(kept.create("/after", b"", CreateMode::Persistent).err(), ErrorCode::Ok, "{}", e.logs());

    // rqld on a follower: its leader hands over to it.
    write_children(&e, new, 200, 50);
    let asker = (0..3).find(|&i| i != new).expect("a follower");
    let answer = four(e.members[asker].client, "rqld").expect("rqld answered");
    assert_eq!(answer.trim(), format!("asked leader {} to hand over to this server", new + 1));
    let third = wait_for_new_leader(&e, new);
    assert_eq!(third, asker, "the asker leads\n{}", e.logs());
    assert!(epoch(&e, third) > after);
    // rqld on the leader itself.
    let answer = four(e.members[third].client, "rqld").expect("rqld answered");
    assert_eq!(answer.trim(), "this server is the leader");
    write_children(&e, (third + 1) % 3, 250, 10);
    all_hold(&e, 260);
}

#[test]
fn sigterm_on_the_leader_hands_over_before_it_exits() {
    let e = Ensemble::start(3);
    let leader = e.wait_for_leader();
    write_children(&e, leader, 0, 100);
    let before = epoch(&e, leader);
    let pid = e.pid(leader).expect("the leader runs");
    let asked = Instant::now();
    e.signal(leader, "TERM");
    // The process ends by itself (a zombie until reaped), having handed over.
    let stat = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&stat).unwrap_or_default();
        if text.is_empty() || text.rsplit_once(") ").and_then(|(_, r)| r.chars().next()) == Some('Z') {
            break;
        }
        assert!(Instant::now() < deadline, "the leader did not exit after SIGTERM\n{}", e.log(leader));
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = e.log(leader);
    assert!(log.contains("asked to stop while leading: handing over to server"), "{log}");
    assert!(log.contains("handover over: stopping"), "{log}");
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let new = e.wait_for_leader_among(&others);
    eprintln!(
        "leader {} stopped and server {} leads {:?} after SIGTERM",
        leader + 1,
        new + 1,
        asked.elapsed()
    );
    assert!(epoch(&e, new) > before);
    for &i in &others {
        let mut c = e.client(i);
        assert_eq!(children(&mut c, "/h").len(), 100, "member {}\n{}", i + 1, e.logs());
    }
}

/// A zkrs leader hands over to Apache ZooKeeper 3.8 followers (they apply the handover's error
/// transaction as any failed write and elect the successor by its zxid), and a zkrs follower's
/// `rqld` to an Apache leader, which logs the packet it does not know and ignores it, leaves it
/// serving.
#[test]
fn a_zkrs_leader_hands_over_to_apache_followers_and_an_apache_leader_ignores_rqld() {
    let mut e = Ensemble::configure(&[Kind::Apache, Kind::Apache, Kind::Zkrs]);
    e.launch(2);
    e.launch(0);
    e.wait_mode(2, "leader");
    e.launch(1);
    assert_eq!(e.wait_for_leader(), 2, "the zkrs server (id 3) leads\n{}", e.logs());
    write_children(&e, 0, 0, 100);
    let before = epoch(&e, 2);
    let answer = four(e.members[2].client, "ydld").expect("ydld answered");
    assert!(answer.starts_with("handing over to server "), "{answer}");
    let new = wait_for_new_leader(&e, 2);
    assert!(new < 2, "an Apache server leads\n{}", e.logs());
    assert!(epoch(&e, new) > before);
    all_hold(&e, 100);
    assert_eq!(e.mode(2).as_deref(), Some("follower"));

    // The zkrs follower asks the Apache leader for the leadership: nothing changes, and the
    // ensemble keeps serving writes through every member.
    let answer = four(e.members[2].client, "rqld").expect("rqld answered");
    assert_eq!(answer.trim(), format!("asked leader {} to hand over to this server", new + 1));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(e.wait_for_leader(), new, "the Apache leader still leads\n{}", e.logs());
    write_children(&e, 2, 100, 20);
    write_children(&e, (new + 1) % 2, 120, 20);
    all_hold(&e, 140);
}

/// `GET path` on an AdminServer, with an `Authorization` header when `auth` is given.
fn get(admin: SocketAddr, path: &str, auth: Option<&str>) -> Answer {
    let headers: Vec<(&str, String)> = auth.map(|a| ("Authorization", a.to_string())).into_iter().collect();
    exchange(admin, &request("GET", path, &headers, None))
}

/// The AdminServer's `yield_leadership` and `request_leadership` need what `snapshot` needs: an
/// id holding ALL on `/` (`world:anyone`, the root's ACL until someone sets it, grants nothing);
/// then `yield_leadership?server=N` hands over to the server named, and `request_leadership` on
/// a follower makes its leader hand over to it.
#[test]
fn the_admin_server_commands_need_all_on_the_root_and_name_the_successor() {
    let (e, ports) = Ensemble::start_with_admin(3, "");
    let admin = |i: usize| SocketAddr::from(([127, 0, 0, 1], ports[i]));
    let leader = e.wait_for_leader();
    write_children(&e, leader, 0, 20);
    let mut c = e.client(leader);
    assert_eq!(c.add_auth("digest", b"admin:pw"), Some(ErrorCode::Ok));
    let json = |a: &Answer| -> serde_json::Value {
        serde_json::from_slice(&a.body).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&a.body)))
    };
    // The root's ACL is world:anyone: nobody may.
    let a = get(admin(leader), "/commands/yield_leadership", None);
    assert_eq!(a.status, 401, "{}", String::from_utf8_lossy(&a.body));
    let a = get(admin(leader), "/commands/ydld", Some("digest admin:pw"));
    assert_eq!(a.status, 403, "{}", String::from_utf8_lossy(&a.body));
    let all = Acl {
        perms: perms::ALL,
        id: Id { scheme: "digest".into(), id: zk_tree::digest_id("admin:pw").expect("digest id") },
    };
    let r = c.call(Request::SetAcl(SetAclRequest { path: "/".into(), acl: vec![all], version: -1 }));
    assert_eq!(r.err(), ErrorCode::Ok);
    // Named successor.
    let to = (0..3).find(|&i| i != leader).expect("a follower");
    let path = format!("/commands/yield_leadership?server={}", to + 1);
    let a = get(admin(leader), &path, Some("digest admin:pw"));
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = json(&a);
    assert_eq!(v["answer"], format!("handing over to server {}", to + 1), "{v}");
    assert!(v["error"].is_null(), "{v}");
    assert_eq!(wait_for_new_leader(&e, leader), to, "{}", e.logs());
    // request_leadership on a follower.
    let asker = (0..3).find(|&i| i != to).expect("a follower");
    e.wait_mode(asker, "follower");
    let a = get(admin(asker), "/commands/rqld", Some("digest admin:pw"));
    assert_eq!(json(&a)["answer"], format!("asked leader {} to hand over to this server", to + 1));
    assert_eq!(wait_for_new_leader(&e, to), asker, "{}", e.logs());
    all_hold(&e, 20);
}

/// A kazoo client (tests/clients/kazoo_pipelined.py) pipelining sequential creates under /pipe,
/// 32 at a time: started by [`PipelinedKazoo::start`] once 200 are answered, its report read
/// by [`PipelinedKazoo::finish`].
struct PipelinedKazoo {
    child: std::process::Child,
    stop: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl PipelinedKazoo {
    /// Starts the client on `hosts` (tried in their order), pausing `pause_s` seconds between
    /// batches, and waits until it has 200 creates answered.
    fn start(e: &Ensemble, hosts: &str, pause_s: &str) -> PipelinedKazoo {
        const PYTHON: &str = "/usr/bin/python3";
        let probe =
            std::process::Command::new(PYTHON).args(["-c", "import kazoo"]).output().expect("run python3");
        assert!(
            probe.status.success(),
            "kazoo is missing: install Debian's python3-kazoo (the README's test command does)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let (ready, stop) = (dir.path().join("ready"), dir.path().join("stop"));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/kazoo_pipelined.py");
        let mut child = std::process::Command::new(PYTHON)
            .arg(script)
            .arg(hosts)
            .arg(&ready)
            .arg(&stop)
            .arg(pause_s)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start kazoo");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready.exists() {
            assert!(
                Instant::now() < deadline,
                "the kazoo client never got 200 creates answered\n{}",
                e.logs()
            );
            assert!(child.try_wait().expect("kazoo runs").is_none(), "kazoo exited early\n{}", e.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
        PipelinedKazoo { child, stop, _dir: dir }
    }

    /// Stops the client and returns its report: creates acknowledged, errors by name, the
    /// connection states it saw, /pipe's children.
    fn finish(self) -> serde_json::Value {
        std::fs::write(&self.stop, "").expect("stop marker");
        let out = self.child.wait_with_output().expect("kazoo output");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("kazoo said {text}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// Three handovers while a kazoo client on a follower pipelines sequential creates (32 in
/// flight): the client sees no error and no disconnection. Its follower keeps the connection
/// through each change of leader, and the creates it forwarded while the leader held them (never
/// proposed, as the leader tells its learners when it leaves) go again to the new leader, each
/// applied once: /pipe ends with exactly as many children as creates acknowledged. Without the
/// leader's word, each of those creates would fail with ConnectionLoss.
#[test]
fn a_pipelined_kazoo_client_on_a_follower_sees_no_error_across_handovers() {
    let e = Ensemble::start(3);
    let mut leader = e.wait_for_leader();
    let follower = (0..3).find(|&i| i != leader).expect("a follower");
    let kazoo = PipelinedKazoo::start(&e, &e.members[follower].client.to_string(), "0");
    for _ in 0..3 {
        let answer = four(e.members[leader].client, "ydld").expect("ydld answered");
        assert!(answer.starts_with("handing over to server"), "ydld answered {answer:?}\n{}", e.logs());
        leader = wait_for_new_leader(&e, leader);
        std::thread::sleep(Duration::from_millis(1_000));
    }
    let report = kazoo.finish();
    eprintln!("kazoo on member {}: {report}", follower + 1);
    assert_eq!(report["errors"], serde_json::json!({}), "{report}\n{}", e.logs());
    assert_eq!(report["states"], serde_json::json!(["CONNECTED"]), "{report}\n{}", e.logs());
    assert_eq!(report["children"], report["acked"], "each create applied once\n{report}");
    assert!(
        e.logs().contains("requests the old leader never proposed to forward again"),
        "a follower kept its clients\n{}",
        e.logs()
    );
}

/// A follower stopped with SIGTERM moves its clients away without failing a request
/// (`core/drain.rs`): a kazoo client pipelining batches of 32 creates with a pause between them,
/// connected to that follower, is closed at a quiet moment, reconnects to the next member with
/// its session, and sees no error; /pipe has exactly the creates acknowledged. The close is
/// decided by the connection's task, which declines while a batch it read (or that waits in the
/// socket) has not reached the core, so the test holds however late the server looks.
#[test]
fn a_follower_stopped_with_sigterm_fails_no_request_of_a_pipelining_client() {
    let mut e = Ensemble::start(3);
    let leader = e.wait_for_leader();
    let follower = (0..3).find(|&i| i != leader).expect("a follower");
    let other = (0..3).find(|&i| i != leader && i != follower).expect("another follower");
    let hosts =
        format!("{},{},{}", e.members[follower].client, e.members[other].client, e.members[leader].client);
    let kazoo = PipelinedKazoo::start(&e, &hosts, "0.05");
    e.signal(follower, "TERM");
    let exited = Instant::now() + Duration::from_secs(30);
    while e.members[follower].child.as_mut().is_some_and(|c| c.try_wait().expect("wait").is_none()) {
        assert!(Instant::now() < exited, "member {} did not exit\n{}", follower + 1, e.logs());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Writes go on through the member it moved to.
    std::thread::sleep(Duration::from_millis(1_500));
    let report = kazoo.finish();
    eprintln!("kazoo on member {}, stopped: {report}", follower + 1);
    assert_eq!(report["errors"], serde_json::json!({}), "{report}\n{}", e.logs());
    assert_eq!(report["children"], report["acked"], "each create applied once\n{report}");
    assert!(
        report["states"].as_array().is_some_and(|s| s.iter().any(|s| s == "SUSPENDED")),
        "the client was moved (it saw its connection go): {report}"
    );
    assert!(!report["states"].as_array().is_some_and(|s| s.iter().any(|s| s == "LOST")), "{report}");
    assert!(e.logs().contains("moving 1 client connections"), "the member drained\n{}", e.logs());
}
