//! Dynamic reconfiguration on real processes (loopback ports), the same scenario against an
//! Apache ZooKeeper 3.8 ensemble and a zkrs one, with the same answers expected from both:
//! three servers with `reconfigEnabled=true`; a fourth starts with a configuration naming the
//! three and itself, joins as a non-voting follower and is added by an incremental reconfig; a
//! follower and then the leader itself are removed; each step is checked on every server's
//! /zookeeper/config, writes go on through all of it, and the errors Apache gives (no
//! authority, wrong version, malformed member, no quorum for the new configuration, too few
//! voters) come back the same. A reconfiguration that gives a server another client port moves
//! its client listener (connections already open stay); a server removed by a reconfiguration and
//! restarted stops at start-up, its id not in the peer list, with Apache's exit status.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::ensemble::*;
use zk_proto::jute::{Jute, Reader};
use zk_proto::*;

/// `super:secret`, as `DigestAuthenticationProvider.superDigest` takes it: reconfiguring takes
/// write access to /zookeeper/config, which only the super user has.
const SUPER: &str = "DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4=\n";

fn reconfig(c: &mut RawClient, joining: Option<&str>, leaving: Option<&str>, id: i64) -> (ErrorCode, String) {
    send_reconfig(c, incremental(joining, leaving, id))
}

/// An incremental reconfig: servers joining and leaving (entries separated by commas).
fn incremental(joining: Option<&str>, leaving: Option<&str>, id: i64) -> ReconfigRequest {
    ReconfigRequest {
        joining_servers: joining.map(str::to_owned),
        leaving_servers: leaving.map(str::to_owned),
        new_members: None,
        cur_config_id: id,
    }
}

/// A reconfig with a whole new member list (entries separated by commas).
fn reconfig_members(c: &mut RawClient, members: &str) -> (ErrorCode, String) {
    send_reconfig(
        c,
        ReconfigRequest {
            joining_servers: None,
            leaving_servers: None,
            new_members: Some(members.to_owned()),
            cur_config_id: -1,
        },
    )
}

fn send_reconfig(c: &mut RawClient, req: ReconfigRequest) -> (ErrorCode, String) {
    reconfig_reply(c.call(Request::Reconfig(req)))
}

/// The outcome a reconfig's reply tells: its error, or the configuration it installed.
fn reconfig_reply(r: support::client::Reply) -> (ErrorCode, String) {
    if r.err() != ErrorCode::Ok {
        return (r.err(), String::new());
    }
    let resp = GetDataResponse::read(&mut Reader::new(r.body.clone())).expect("GetDataResponse");
    assert_eq!(resp.stat.version, -1, "a reconfiguration stores its node with version -1");
    (ErrorCode::Ok, String::from_utf8_lossy(resp.data.as_deref().unwrap_or_default()).into_owned())
}

/// The config string a server's /zookeeper/config holds.
fn config_of(e: &Ensemble, i: usize) -> String {
    let mut c = e.client(i);
    let r = c.get_data("/zookeeper/config", false);
    assert_eq!(r.err(), ErrorCode::Ok);
    let resp = GetDataResponse::read(&mut Reader::new(r.body.clone())).expect("GetDataResponse");
    String::from_utf8_lossy(resp.data.as_deref().unwrap_or_default()).into_owned()
}

fn version_of(config: &str) -> i64 {
    let v = config.lines().find_map(|l| l.strip_prefix("version=")).expect("a version line");
    i64::from_str_radix(v, 16).expect("hex version")
}

/// Waits until every server in `among` holds a /zookeeper/config of version `version`.
fn wait_config(e: &Ensemble, among: &[usize], version: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for &i in among {
        loop {
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| version_of(&config_of(e, i))));
            if got.as_ref().is_ok_and(|v| *v == version) {
                break;
            }
            assert!(Instant::now() < deadline, "server {} holds config {got:?}, want {version:#x}", i + 1);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Four servers of `kinds` with reconfiguration on (`observers` by index). Without observers,
/// servers 1-3 know only each other and server 4 knows them and itself. Returns them, not
/// started, and server 4's spec as a reconfig's joining entry, as a participant.
fn three_and_a_joiner(kinds: [Kind; 4], observers: &[usize]) -> (Ensemble, String) {
    let e = Ensemble::configure_with_extra(&kinds, observers, &format!("reconfigEnabled=true\n{SUPER}"));
    let s4 = std::fs::read_to_string(e.members[3].dir.join("zoo.cfg"))
        .expect("zoo.cfg")
        .lines()
        .find(|l| l.starts_with("server.4="))
        .expect("server.4")
        .trim_end_matches(":observer")
        .to_owned();
    let joiner = format!("{s4}:participant;127.0.0.1:{}", e.members[3].client.port());
    if observers.is_empty() {
        for i in 0..3 {
            let path = e.members[i].dir.join("zoo.cfg");
            let text = std::fs::read_to_string(&path).expect("zoo.cfg");
            let kept: String =
                text.lines().filter(|l| !l.starts_with("server.4=")).map(|l| format!("{l}\n")).collect();
            std::fs::write(&path, kept).expect("zoo.cfg");
        }
    }
    (e, joiner)
}

/// A client writing `/w-NNNNNN` nodes one after another through `addr` until `stop`,
/// reconnecting (a new session) whenever its server drops it; returns the acknowledged paths.
fn writer(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut acked = Vec::new();
        let mut n = 0u32;
        let req = ConnectRequest { time_out: 10_000, read_only: Some(false), ..Default::default() };
        while !stop.load(Ordering::SeqCst) && n < 1_000_000 {
            let Some(mut c) = RawClient::try_connect_with(addr, req.clone()) else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            while !stop.load(Ordering::SeqCst) {
                let path = format!("/w-{n:06}");
                n += 1;
                let create = Request::Create(CreateRequest {
                    path: path.clone(),
                    data: None,
                    acl: support::client::open_acl(),
                    flags: CreateMode::Persistent as i32,
                });
                match c.try_send_request(&create).and_then(|xid| c.recv(xid)) {
                    Some(r) if r.err() == ErrorCode::Ok => acked.push(path),
                    Some(r) => panic!("{path}: {:?}", r.err()),
                    None => break,
                }
            }
        }
        acked
    })
}

/// The scenario's answers, for comparing the two implementations.
#[derive(Debug, PartialEq, Eq)]
struct Transcript(Vec<String>);

/// Runs `scenario` on zkrs and checks its transcript is `want`, then on Apache and on each of the
/// `mixed` ensembles, which must answer the same.
fn same_everywhere<const N: usize>(
    scenario: fn([Kind; N]) -> Transcript,
    want: &[&str],
    mixed: &[[Kind; N]],
) {
    let zkrs = scenario([Kind::Zkrs; N]);
    assert_eq!(zkrs.0, want);
    assert_eq!(scenario([Kind::Apache; N]), zkrs, "Apache ZooKeeper answers the same");
    for kinds in mixed {
        assert_eq!(scenario(*kinds), zkrs, "the mixed ensemble {kinds:?} answers the same");
    }
}

fn scenario(kinds: [Kind; 4]) -> Transcript {
    let mut t = Vec::new();
    let (mut e, joiner) = three_and_a_joiner(kinds, &[]);
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1, 2]);
    eprintln!("{kinds:?}: server {} leads", leader + 1);
    // The first leader stamps the zoo.cfg configuration with its epoch's first zxid.
    let first = config_of(&e, leader);
    let v0 = version_of(&first);
    t.push(format!("initial members {:?}, version counter {}", support::members_of(&first), v0 as u32));
    wait_config(&e, &[0, 1, 2], v0);

    let mut admin = e.client(leader);
    let unauthorised = reconfig(&mut admin, Some(&joiner), None, -1).0;
    t.push(format!("without auth: {unauthorised:?}"));
    assert_eq!(admin.add_auth("digest", b"super:secret"), Some(ErrorCode::Ok));
    t.push(format!("wrong version: {:?}", reconfig(&mut admin, Some(&joiner), None, v0 + 1).0));
    t.push(format!("malformed joiner: {:?}", reconfig(&mut admin, Some("server.4=127.0.0.1"), None, -1).0));
    t.push(format!("one voter left: {:?}", reconfig(&mut admin, None, Some("1,2"), -1).0));

    // Server 4 joins as a non-voting follower, then is added.
    e.launch(3);
    e.wait_mode(3, "follower");
    let (code, added) = reconfig(&mut admin, Some(&joiner), None, v0);
    t.push(format!("add 4: {code:?} members {:?}", support::members_of(&added)));
    let v1 = version_of(&added);
    assert!(v1 > v0, "the new version is the reconfiguration's zxid");
    wait_config(&e, &[0, 1, 2, 3], v1);
    assert_eq!(config_of(&e, 3), added, "server 4 holds the configuration the client got");
    // Four voters, one of them (5, 6, 7, 8) unknown: no quorum of the new configuration is synced.
    let ghosts: String = (5..=8)
        .map(|n| format!("server.{n}=127.0.0.1:{}:{};{}", stable_port(), stable_port(), stable_port()))
        .collect::<Vec<_>>()
        .join(",");
    t.push(format!("add four absent servers: {:?}", reconfig(&mut admin, Some(&ghosts), None, -1).0));

    // Every member wrote the configuration beside its zoo.cfg, and zoo.cfg names that file: a
    // restart comes back with it.
    for i in 0..4 {
        let dir = &e.members[i].dir;
        let name = format!("zoo.cfg.dynamic.{v1:x}");
        let text = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        let names_it = std::fs::read_to_string(dir.join("zoo.cfg"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with("dynamicConfigFile=") && l.ends_with(&name));
        t.push(format!("server {} files: {:?}, named {names_it}", i + 1, support::members_of(&text)));
    }
    e.kill(3);
    e.launch(3);
    e.wait_mode(3, "follower");
    t.push(format!("server 4 restarted with version {}", version_of(&config_of(&e, 3)) == v1));

    // From here on a client writes through server 4 (never removed) while servers are removed,
    // the leader included.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = writer(e.members[3].client, stop.clone());

    // A write through the new member, seen everywhere.
    let mut c4 = e.client(3);
    assert_eq!(c4.create("/after-add", b"x", CreateMode::Persistent).err(), ErrorCode::Ok);

    // Remove a follower other than 4, then the leader itself.
    let follower = (0..3).find(|&i| i != leader).expect("a follower");
    let (code, removed) = reconfig(&mut admin, None, Some(&(follower + 1).to_string()), -1);
    t.push(format!("remove a follower: {code:?} members {}", support::members_of(&removed).len()));
    let v2 = version_of(&removed);
    let rest: Vec<usize> = (0..4).filter(|&i| i != follower).collect();
    wait_config(&e, &rest, v2);
    // A leader that removes itself hands over once the change commits, and an Apache one may
    // close its client connections before the reply goes out (under load, about one run in ten
    // here): the client sees a connection loss, as Apache's own client would, and the outcome is
    // read back from a remaining member once it has a leader.
    let remaining: Vec<usize> = rest.iter().copied().filter(|&i| i != leader).collect();
    let req = Request::Reconfig(incremental(None, Some(&(leader + 1).to_string()), -1));
    let reply = admin.try_send_request(&req).and_then(|xid| admin.recv(xid));
    let (code, without_leader) = match reply {
        Some(r) => reconfig_reply(r),
        None => {
            eprintln!("{kinds:?}: the leader closed the connection before replying to its removal");
            e.wait_for_leader_among(&remaining);
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let config = config_of(&e, remaining[0]);
                if support::members_of(&config).len() == 2 {
                    break (ErrorCode::Ok, config);
                }
                assert!(Instant::now() < deadline, "the leader's removal never took effect: {config}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    t.push(format!("remove the leader: {code:?} members {}", support::members_of(&without_leader).len()));
    let v3 = version_of(&without_leader);
    let new_leader = e.wait_for_leader_among(&remaining);
    t.push(format!("new leader among the remaining: {}", remaining.contains(&new_leader)));
    // zkrs members hand over as Apache's do: each remaining one got the commit with the
    // designated leader (COMMITANDACTIVATE) and went to it directly.
    for &i in &remaining {
        if e.members[i].kind == Kind::Zkrs {
            e.wait_log(i, &format!("configuration {v3:#x} changes this server's place"));
        }
    }
    wait_config(&e, &remaining, v3);
    let mut c = e.client(remaining[0]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let req = Request::Create(CreateRequest {
            path: "/after-leader-left".into(),
            data: Some(bytes::Bytes::from_static(b"y")),
            acl: support::client::open_acl(),
            flags: CreateMode::Persistent as i32,
        });
        let answer = c.try_send_request(&req).and_then(|xid| c.recv(xid)).map(|r| r.err());
        if matches!(answer, Some(ErrorCode::Ok | ErrorCode::NodeExists)) {
            break;
        }
        assert!(Instant::now() < deadline, "no write accepted after the leader left");
        std::thread::sleep(Duration::from_millis(200));
        c = e.client(remaining[0]);
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    let acked = writes.join().expect("writer");
    assert!(acked.len() > 10, "only {} writes acknowledged during the reconfigurations", acked.len());
    eprintln!("{kinds:?}: {} writes acknowledged through the reconfigurations", acked.len());
    for &i in &remaining {
        let mut c = e.client(i);
        c.call(Request::Sync(SyncRequest { path: "/".into() }));
        for p in ["/after-add", "/after-leader-left"] {
            assert_eq!(c.exists(p, false).err(), ErrorCode::Ok, "{p} on server {}", i + 1);
        }
        let r = c.call(Request::GetChildren(GetChildrenRequest { path: "/".into(), watch: false }));
        let have: std::collections::HashSet<String> =
            GetChildrenResponse::read(&mut Reader::new(r.body.clone()))
                .expect("children")
                .children
                .into_iter()
                .collect();
        let lost: Vec<&String> = acked.iter().filter(|p| !have.contains(&p[1..])).collect();
        assert!(lost.is_empty(), "server {} lost acknowledged writes {lost:?}", i + 1);
    }
    t.push("no acknowledged write lost".into());
    eprintln!("{kinds:?} transcript: {t:#?}");
    Transcript(t)
}

#[test]
fn reconfig_adds_and_removes_servers_as_apache_does() {
    let want = [
        "initial members [\"1p\", \"2p\", \"3p\"], version counter 0",
        "without auth: NoAuth",
        "wrong version: BadVersion",
        "malformed joiner: BadArguments",
        "one voter left: BadArguments",
        "add 4: Ok members [\"1p\", \"2p\", \"3p\", \"4p\"]",
        "add four absent servers: NewConfigNoQuorum",
        "server 1 files: [\"1p\", \"2p\", \"3p\", \"4p\"], named true",
        "server 2 files: [\"1p\", \"2p\", \"3p\", \"4p\"], named true",
        "server 3 files: [\"1p\", \"2p\", \"3p\", \"4p\"], named true",
        "server 4 files: [\"1p\", \"2p\", \"3p\", \"4p\"], named true",
        "server 4 restarted with version true",
        "remove a follower: Ok members 3",
        "remove the leader: Ok members 2",
        "new leader among the remaining: true",
        "no acknowledged write lost",
    ];
    use Kind::{Apache, Zkrs};
    // Server 3 (the highest id of the first three) leads: an Apache leader with a zkrs follower
    // and a zkrs joiner, then a zkrs leader with Apache followers and an Apache joiner.
    same_everywhere(scenario, &want, &[[Apache, Zkrs, Apache, Zkrs], [Apache, Apache, Zkrs, Apache]]);
}

fn observer_scenario(kinds: [Kind; 4]) -> Transcript {
    let mut t = Vec::new();
    let (mut e, participant) = three_and_a_joiner(kinds, &[3]);
    for i in 0..4 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1, 2, 3]);
    e.wait_mode(3, "observer");
    // A data watch on /zookeeper/config (getConfig's) fires when a reconfiguration commits.
    let mut watcher = e.client(0);
    assert_eq!(watcher.get_data("/zookeeper/config", true).err(), ErrorCode::Ok);
    let mut admin = e.client(leader);
    assert_eq!(admin.add_auth("digest", b"super:secret"), Some(ErrorCode::Ok));
    let (code, promoted) = reconfig(&mut admin, Some(&participant), None, -1);
    t.push(format!("promote 4: {code:?} {:?}", support::members_of(&promoted)));
    let event = watcher.next_event().expect("a watch event");
    t.push(format!("watch: {:?} {}", EventType::from_i32(event.event_type), event.path));
    e.wait_mode(3, "follower");
    t.push("4 follows".into());
    let mut c4 = e.client(3);
    assert_eq!(c4.create("/promoted", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let leader = e.wait_for_leader_among(&[0, 1, 2, 3]);
    let mut admin = e.client(leader);
    assert_eq!(admin.add_auth("digest", b"super:secret"), Some(ErrorCode::Ok));
    // Back to an observer, this time by a whole member list.
    let members: Vec<String> =
        promoted
            .lines()
            .filter(|l| l.starts_with("server."))
            .map(|l| {
                if l.starts_with("server.4=") {
                    l.replace(":participant;", ":observer;")
                } else {
                    l.to_owned()
                }
            })
            .collect();
    let (code, demoted) = reconfig_members(&mut admin, &members.join(","));
    t.push(format!("demote 4: {code:?} {:?}", support::members_of(&demoted)));
    e.wait_mode(3, "observer");
    t.push("4 observes".into());
    wait_config(&e, &[0, 1, 2, 3], version_of(&demoted));
    let mut c4 = e.client(3);
    assert_eq!(c4.create("/demoted", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    eprintln!("{kinds:?} transcript: {t:#?}");
    Transcript(t)
}

#[test]
fn reconfig_promotes_an_observer_and_demotes_it_again_as_apache_does() {
    let want = [
        "promote 4: Ok [\"1p\", \"2p\", \"3p\", \"4p\"]",
        "watch: Some(NodeDataChanged) /zookeeper/config",
        "4 follows",
        "demote 4: Ok [\"1p\", \"2p\", \"3p\", \"4o\"]",
        "4 observes",
    ];
    use Kind::{Apache, Zkrs};
    same_everywhere(observer_scenario, &want, &[[Zkrs, Apache, Zkrs, Apache]]);
}

/// zkCli.sh (Apache's own shell) reconfigures a zkrs ensemble: `reconfig -add` and `-remove`
/// answer "Committed new configuration:" with the new membership, and `config` shows it.
#[test]
fn zkcli_reconfigures_a_zkrs_ensemble() {
    const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
    support::assert_apache_installed();
    let (mut e, joiner) = three_and_a_joiner([Kind::Zkrs; 4], &[]);
    // Server 4 first: its election connections to the others are up before they settle on
    // their first configuration (version 0 stamped by the leader), which does not list it; the
    // others must still answer it afterwards.
    for i in [3, 0, 1, 2] {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1, 2]);
    e.wait_mode(3, "follower");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = std::process::Command::new(ZKCLI);
    cmd.arg("-server").arg(e.members[leader].client.to_string()).env("ZOO_LOG_DIR", dir.path());
    let mut cli = support::interactive::Interactive::start(cmd, dir.path(), "zkcli.out");
    let step = Duration::from_secs(30);
    assert!(cli.wait_for(step, |o| o.contains("SyncConnected")), "{}", cli.output());
    cli.send("addauth digest super:secret");
    cli.send(&format!("reconfig -add {joiner}"));
    assert!(cli.wait_count("Committed new configuration:", 1, step), "{}", cli.output());
    cli.send("reconfig -remove 4");
    assert!(cli.wait_count("Committed new configuration:", 2, step), "{}", cli.output());
    cli.send("config");
    cli.send("quit");
    let out = cli.finish(step).output;
    let blocks: Vec<&str> = out.split("Committed new configuration:").skip(1).collect();
    assert_eq!(blocks.len(), 2, "{out}");
    assert!(blocks[0].contains("server.4="), "the first answer lists server 4:\n{out}");
    let after_remove = blocks[1];
    let tail = after_remove.split("version=").nth(2).unwrap_or_default();
    assert!(!tail.contains("server.4="), "`config` after the removal still lists server 4:\n{out}");
    assert!(!config_of(&e, 3).is_empty());
    let members = support::members_of(&config_of(&e, leader));
    assert_eq!(members, ["1p", "2p", "3p"], "{out}");
}

/// Whether a new TCP connection to `addr` is refused (nothing listens there).
fn refused(addr: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err()
}

/// Waits until `srvr` on `addr` reports `mode`; false if it never does within 30 s.
fn serves_as(addr: std::net::SocketAddr, mode: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if srvr(addr).is_some_and(|t| t.lines().any(|l| l == format!("Mode: {mode}"))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// `conf`'s clientPort line on `addr`.
fn conf_client_port(addr: std::net::SocketAddr) -> String {
    four(addr, "conf")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("clientPort="))
        .unwrap_or("")
        .to_owned()
}

/// Three servers of `kinds` with reconfiguration on, running; returns them, the leader's index,
/// a follower's, and a client of the leader authenticated as the super user.
fn three_running(kinds: [Kind; 3]) -> (Ensemble, usize, usize, RawClient) {
    let mut e = Ensemble::configure_with_extra(&kinds, &[], &format!("reconfigEnabled=true\n{SUPER}"));
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    let follower = (0..3).find(|&i| i != leader).expect("a follower");
    let mut admin = e.client(leader);
    assert_eq!(admin.add_auth("digest", b"super:secret"), Some(ErrorCode::Ok));
    (e, leader, follower, admin)
}

/// Server `sid`'s entry in the config string `config`, with the client address
/// `127.0.0.1:port`.
fn with_client_port(config: &str, sid: usize, port: u16) -> String {
    let line = config.lines().find(|l| l.starts_with(&format!("server.{sid}="))).expect("the server's line");
    format!("{};127.0.0.1:{port}", line.split(';').next().unwrap_or(line))
}

/// A reconfiguration gives a follower, then the leader, another client port: first by an
/// incremental `-add` of the follower's own entry, then by a whole member list. Each moves its
/// client listener: the new port serves, the old one refuses new connections, a connection made
/// before the move is still served, `conf` reports the new port, zoo.cfg drops clientPort, and a
/// restart comes back on the new port.
fn client_port_scenario(kinds: [Kind; 3]) -> Transcript {
    let mut t = Vec::new();
    let (mut e, leader, moved, mut admin) = three_running(kinds);
    eprintln!("{kinds:?}: server {} leads, server {} moves first", leader + 1, moved + 1);

    // The follower, by an incremental reconfig of its own entry.
    let old = e.members[moved].client;
    let mut before = e.client(moved);
    assert_eq!(before.create("/before-move", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let port = stable_port();
    let entry = with_client_port(&config_of(&e, leader), moved + 1, port);
    let (code, config) = reconfig(&mut admin, Some(&entry), None, -1);
    t.push(format!(
        "move a follower: {code:?}, the configuration lists it so: {}",
        config.lines().any(|l| l == entry)
    ));
    let new: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    t.push(format!("follower serves on the new port: {}", serves_as(new, "follower")));
    t.push(format!("follower's old port refuses new connections: {}", refused(old)));
    t.push(format!("a connection made before the move: {:?}", before.exists("/before-move", false).err()));
    t.push(format!("conf: {}", conf_client_port(new).replace(&port.to_string(), "<new>")));
    e.members[moved].client = new;
    let static_cfg = std::fs::read_to_string(e.members[moved].dir.join("zoo.cfg")).expect("zoo.cfg");
    t.push(format!("zoo.cfg keeps clientPort: {}", static_cfg.lines().any(|l| l.starts_with("clientPort"))));
    let mut c = e.client(moved);
    assert_eq!(c.create("/via-new-port", b"", CreateMode::Persistent).err(), ErrorCode::Ok);

    // The leader, by a whole member list; the client that asks is connected to the leader's old
    // port.
    let old = e.members[leader].client;
    let port = stable_port();
    let leader_entry = with_client_port(&config, leader + 1, port);
    let members: Vec<String> = config
        .lines()
        .filter(|l| l.starts_with("server."))
        .map(|l| {
            if l.starts_with(&format!("server.{}=", leader + 1)) {
                leader_entry.clone()
            } else {
                l.to_owned()
            }
        })
        .collect();
    let (code, _) = reconfig_members(&mut admin, &members.join(","));
    t.push(format!("move the leader: {code:?}"));
    let new: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    t.push(format!("leader serves on the new port: {}", serves_as(new, "leader")));
    t.push(format!("leader's old port refuses new connections: {}", refused(old)));
    t.push(format!("the asking connection: {:?}", admin.exists("/via-new-port", false).err()));
    t.push(format!("conf: {}", conf_client_port(new).replace(&port.to_string(), "<new>")));
    e.members[leader].client = new;
    e.write_and_read(leader, "/via-the-leaders-new-port", &[0, 1, 2]);

    // A restart comes back on the new port (zoo.cfg names the dynamic file that gives it).
    e.kill(moved);
    e.launch(moved);
    t.push(format!(
        "restarted follower serves on its new port: {}",
        serves_as(e.members[moved].client, "follower")
    ));
    eprintln!("{kinds:?} transcript: {t:#?}");
    Transcript(t)
}

#[test]
fn reconfig_moves_a_servers_client_port_as_apache_does() {
    let want = [
        "move a follower: Ok, the configuration lists it so: true",
        "follower serves on the new port: true",
        "follower's old port refuses new connections: true",
        "a connection made before the move: Ok",
        "conf: clientPort=<new>",
        "zoo.cfg keeps clientPort: false",
        "move the leader: Ok",
        "leader serves on the new port: true",
        "leader's old port refuses new connections: true",
        "the asking connection: Ok",
        "conf: clientPort=<new>",
        "restarted follower serves on its new port: true",
    ];
    use Kind::{Apache, Zkrs};
    // Server 3 leads: a zkrs leader moved after an Apache follower, then the reverse.
    same_everywhere(client_port_scenario, &want, &[[Apache, Apache, Zkrs], [Zkrs, Zkrs, Apache]]);
}

/// Waits (60 s at most) for member `i`'s process to end; its exit status.
fn exit_status(e: &mut Ensemble, i: usize) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let child = e.members[i].child.as_mut()?;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            e.members[i].child = None;
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// A follower removed by a reconfiguration, then restarted: its zoo.cfg names the dynamic file
/// of the configuration without it. Apache's member stops at start-up then (its id is not in the
/// peer list) with exit status 1; zkrs's does the same, and the others serve on.
fn removed_restart_scenario(kinds: [Kind; 3]) -> Transcript {
    let mut t = Vec::new();
    let (mut e, leader, removed, mut admin) = three_running(kinds);
    eprintln!("{kinds:?}: server {} leads, server {} is removed", leader + 1, removed + 1);
    let rest: Vec<usize> = (0..3).filter(|&i| i != removed).collect();
    let (code, config) = reconfig(&mut admin, None, Some(&(removed + 1).to_string()), -1);
    t.push(format!("remove a follower: {code:?} members {}", support::members_of(&config).len()));
    // The removed member got the commit too and wrote the configuration without itself.
    let name = format!("zoo.cfg.dynamic.{:x}", version_of(&config));
    let dir = e.members[removed].dir.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    let written = loop {
        let named = std::fs::read_to_string(dir.join("zoo.cfg")).unwrap_or_default().contains(&name);
        if named || Instant::now() > deadline {
            break named;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let own = format!("server.{}=", removed + 1);
    let lists_itself = std::fs::read_to_string(dir.join(&name)).unwrap_or_default().contains(&own);
    t.push(format!("its zoo.cfg names the new file: {written}, which lists it: {lists_itself}"));
    e.kill(removed);
    // Apache's reason is in its log only: give it a logger.
    e.members[removed].apache_log = true;
    e.launch(removed);
    let status = exit_status(&mut e, removed);
    t.push(format!("restarted, it exits with status {status:?}"));
    let log = e.log(removed);
    let said = log.lines().find(|l| l.contains("not in the peer list"));
    match said {
        Some(line) => eprintln!("{kinds:?}: server {} says: {line}", removed + 1),
        None => eprintln!("{kinds:?}: server {}'s log:\n{log}", removed + 1),
    }
    let said = said.is_some();
    t.push(format!("it says its id is not in the peer list: {said}"));
    e.write_and_read(rest[0], "/after-the-removed-one-left", &rest);
    t.push("the others serve".into());
    eprintln!("{kinds:?} transcript: {t:#?}");
    Transcript(t)
}

#[test]
fn a_removed_server_restarted_stops_as_apache_does() {
    let want = [
        "remove a follower: Ok members 2",
        "its zoo.cfg names the new file: true, which lists it: false",
        "restarted, it exits with status Some(1)",
        "it says its id is not in the peer list: true",
        "the others serve",
    ];
    use Kind::{Apache, Zkrs};
    // A zkrs follower removed under an Apache leader.
    same_everywhere(removed_restart_scenario, &want, &[[Zkrs, Apache, Apache]]);
}
