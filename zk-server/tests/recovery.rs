//! Forced recovery on real processes (ClickHouse Keeper's `rcvr`): two of three members are
//! killed for good, and the survivor, asked over the client port (`rcvr`, with its token) or the
//! AdminServer (`force_recovery?confirm=`), leads alone, keeps doing so across a restart, and
//! takes a member back, from an empty data directory, with a reconfig.
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::ensemble::*;
use support::http::{exchange, request, Answer};
use zk_proto::*;

/// `super:secret` (reconfiguring takes the super user) and the lines recovery needs.
const KEYS: &str = "DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4=\n\
                    reconfigEnabled=true\nstandaloneEnabled=false\n";

/// Three members with client addresses in their server lines, `rcvr` named in the whitelist
/// (`*` leaves it out), and an AdminServer each; not launched. The AdminServers' addresses, and
/// the members' server lines (their zoo.cfg loses them to a dynamic file once they run).
fn three_members() -> (Ensemble, Vec<SocketAddr>, Vec<String>) {
    let e = Ensemble::configure_with_extra(&[Kind::Zkrs; 3], &[], KEYS);
    let lines = (0..3)
        .map(|i| {
            let (q, el) = e.quorum_ports(i);
            format!("server.{}=127.0.0.1:{q}:{el}:participant;{}", i + 1, e.members[i].client)
        })
        .collect();
    e.put_client_addresses_in_server_lines();
    let mut admins = Vec::new();
    for m in &e.members {
        let port = stable_port();
        let path = m.dir.join("zoo.cfg");
        let text = std::fs::read_to_string(&path).expect("zoo.cfg");
        let text = text.replace("4lw.commands.whitelist=*\n", "4lw.commands.whitelist=*, rcvr\n").replace(
            "admin.enableServer=false\n",
            &format!("admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n"),
        );
        std::fs::write(&path, text).expect("zoo.cfg");
        admins.push(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    (e, admins, lines)
}

/// `word` and what follows it, sent on a connection of its own; the whole answer.
fn say(addr: SocketAddr, text: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    s.write_all(text.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The token an unconfirmed answer gives (its last word).
fn token_in(answer: &str) -> String {
    assert!(answer.contains("not confirmed"), "{answer}");
    answer.split_whitespace().last().expect("a token").to_string()
}

/// Waits until member `i` answers `srvr` as not serving.
fn wait_not_serving(e: &Ensemble, i: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while e.mode(i).is_some() {
        assert!(Instant::now() < deadline, "member {} serves on\n{}", i + 1, e.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn admin_get(admin: SocketAddr, path: &str, auth: Option<&str>) -> Answer {
    let headers: Vec<(&str, String)> = auth.map(|a| ("Authorization", a.to_string())).into_iter().collect();
    exchange(admin, &request("GET", path, &headers, None))
}

/// Each time, a serving quorum refuses, the survivor describes its plan without the token, and
/// recovers with it.
fn lose_two_and_recover(over_admin: bool) {
    let (mut e, admins, lines) = three_members();
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    write_children(&e, leader, 0, 100);
    let survivor = (0..3).find(|&i| i != leader).expect("a follower");
    for i in 0..3 {
        assert_eq!(children(&mut e.client(i), "/h").len(), 100);
    }
    // While the quorum serves, rcvr refuses, token or not.
    let answer = say(e.members[leader].client, "rcvr\n");
    assert!(answer.contains("refused: this server leads"), "{answer}");

    for i in (0..3).filter(|&i| i != survivor) {
        e.kill(i);
    }
    wait_not_serving(&e, survivor);
    let client = e.members[survivor].client;
    if over_admin {
        let a = admin_get(admins[survivor], "/commands/force_recovery", None);
        assert_eq!(a.status, 401, "{}", a.text());
    }
    // Right after losing its leader, the survivor may still be trying to reach it (it then
    // refuses, and elects again), and for a minute after it last heard another voter it refuses.
    let deadline = Instant::now() + Duration::from_secs(90);
    let answer = loop {
        let answer = if over_admin {
            let a = admin_get(admins[survivor], "/commands/force_recovery", Some("digest super:secret"));
            assert_eq!(a.status, 200, "{}", a.text());
            a.json()["answer"].as_str().expect("an answer").to_string()
        } else {
            say(client, "rcvr\n")
        };
        if !(answer.contains("try again") || answer.contains("ask again")) || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let token = token_in(&answer);
    assert!(token.starts_with(&format!("{}-", survivor + 1)), "{answer}");
    let wrong = say(client, "rcvr 9-1\n");
    assert!(wrong.contains("not confirmed"), "{wrong}");
    let answer = if over_admin {
        let path = format!("/commands/rcvr?confirm={token}");
        let a = admin_get(admins[survivor], &path, Some("digest super:secret"));
        a.json()["answer"].as_str().expect("an answer").to_string()
    } else {
        say(client, &format!("rcvr {token}\n"))
    };
    assert!(answer.starts_with("recovering:"), "{answer}");
    let asked = Instant::now();
    e.wait_mode(survivor, "leader");
    eprintln!("member {} leads alone {:?} after the recovery was confirmed", survivor + 1, asked.elapsed());
    assert_eq!(children(&mut e.client(survivor), "/h").len(), 100, "{}", e.logs());
    write_children(&e, survivor, 100, 20);
    // The new configuration is on disk: a restart leads alone again, with every write.
    let cfg = std::fs::read_to_string(e.members[survivor].dir.join("zoo.cfg")).expect("zoo.cfg");
    assert!(cfg.contains("dynamicConfigFile="), "{cfg}");
    e.kill(survivor);
    e.launch(survivor);
    e.wait_mode(survivor, "leader");
    assert_eq!(children(&mut e.client(survivor), "/h").len(), 120, "{}", e.logs());

    // A lost member comes back from an empty data directory (its zoo.cfg as it was): it takes
    // the new configuration from the survivor, follows as a non-voting member, and a reconfig
    // makes it a voter again.
    let back = (0..3).find(|&i| i != survivor).expect("a lost member");
    let data = e.members[back].dir.join("data");
    std::fs::remove_dir_all(&data).expect("wipe");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("myid"), format!("{}\n", back + 1)).expect("myid");
    e.launch(back);
    e.wait_mode(back, "follower");
    let mut admin = e.client(survivor);
    assert_eq!(admin.add_auth("digest", b"super:secret"), Some(ErrorCode::Ok));
    let r = admin.call(Request::Reconfig(ReconfigRequest {
        joining_servers: Some(lines[back].clone()),
        leaving_servers: None,
        new_members: None,
        cur_config_id: -1,
    }));
    assert_eq!(r.err(), ErrorCode::Ok, "{}", e.logs());
    write_children(&e, back, 120, 10);
    for i in [survivor, back] {
        assert_eq!(children(&mut e.client(i), "/h").len(), 130, "member {}\n{}", i + 1, e.logs());
    }
    // Two voters now: losing the one that came back stops the survivor (a quorum of two).
    e.kill(back);
    wait_not_serving(&e, survivor);
}

#[test]
fn rcvr_over_the_client_port_lets_a_survivor_lead_alone() {
    lose_two_and_recover(false);
}

#[test]
fn force_recovery_over_the_admin_server_lets_a_survivor_lead_alone() {
    lose_two_and_recover(true);
}

/// `4lw.commands.whitelist=*` leaves `rcvr` out: only a whitelist that names it enables it.
#[test]
fn rcvr_is_not_enabled_by_the_star() {
    let mut e = Ensemble::configure_with_extra(&[Kind::Zkrs; 3], &[], KEYS);
    for i in 0..3 {
        e.launch(i);
    }
    let l = e.wait_for_leader();
    let answer = say(e.members[l].client, "rcvr\n");
    assert_eq!(answer, "rcvr is not executed because it is not in the whitelist.\n");
}
