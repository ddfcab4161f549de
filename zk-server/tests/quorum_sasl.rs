//! SASL between ensemble members (`quorum.auth.enableSasl`, DIGEST-MD5 with the JAAS sections
//! `QuorumServer` and `QuorumLearner`) on real processes and loopback ports: three zkrs servers
//! that require it elect, replicate and survive their leader's death; a server with a wrong
//! password stays out; Apache ZooKeeper 3.8 and zkrs authenticate each other both ways (zkrs
//! leading Apache learners, then following an Apache leader); start-up errors name the key.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::time::Duration;
use support::ensemble::*;

const REQUIRE_ALL: &str =
    "quorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true\nquorum.auth.serverRequireSasl=true\n";

/// Gives member `i` a JAAS file whose learner section logs in as `user`/`password`, and whose
/// server section lists `peer`/`secret` (every member's identity), named in its JVM flags.
fn jaas(e: &Ensemble, i: usize, user: &str, password: &str) {
    let dir = &e.members[i].dir;
    let path = dir.join("jaas.conf");
    std::fs::write(
        &path,
        format!(
            "QuorumServer {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
             user_peer=\"secret\";\n}};\nQuorumLearner {{\n  \
             org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=\"{user}\"\n  \
             password=\"{password}\";\n}};\n"
        ),
    )
    .expect("jaas");
    std::fs::write(dir.join("jvmflags"), format!("-Djava.security.auth.login.config={}", path.display()))
        .expect("jvmflags");
}

fn sasl_ensemble(kinds: &[Kind]) -> Ensemble {
    let e = Ensemble::configure(kinds);
    e.append_config(REQUIRE_ALL);
    for i in 0..kinds.len() {
        jaas(&e, i, "peer", "secret");
    }
    e
}

/// Sends `bytes` to `port` and returns what comes back before the peer closes (or 5 s pass).
fn poke(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// FOLLOWERINFO from server `sid` (a LearnerInfo with protocol 0x10000, config version 0).
fn follower_info(sid: i64) -> Vec<u8> {
    let mut data = Vec::new();
    data.extend_from_slice(&sid.to_be_bytes());
    data.extend_from_slice(&0x10000i32.to_be_bytes());
    data.extend_from_slice(&0i64.to_be_bytes());
    let mut p = Vec::new();
    p.extend_from_slice(&11i32.to_be_bytes());
    p.extend_from_slice(&0i64.to_be_bytes());
    p.extend_from_slice(&(data.len() as i32).to_be_bytes());
    p.extend_from_slice(&data);
    p.extend_from_slice(&(-1i32).to_be_bytes());
    p
}

/// An election handshake (protocol version 1) from server `sid` at 127.0.0.1:1, then its
/// LOOKING notification (a vote for itself, version 2, no config): a member answers with its
/// own vote.
fn election_hello(sid: i64) -> Vec<u8> {
    let addr = b"127.0.0.1:1";
    let mut h = Vec::new();
    h.extend_from_slice(&(-65536i64).to_be_bytes());
    h.extend_from_slice(&sid.to_be_bytes());
    h.extend_from_slice(&(addr.len() as i32).to_be_bytes());
    h.extend_from_slice(addr);
    let mut n = Vec::new();
    n.extend_from_slice(&0i32.to_be_bytes()); // LOOKING
    n.extend_from_slice(&sid.to_be_bytes()); // proposed leader
    n.extend_from_slice(&0i64.to_be_bytes()); // zxid
    n.extend_from_slice(&1i64.to_be_bytes()); // election epoch
    n.extend_from_slice(&0i64.to_be_bytes()); // peer epoch
    n.extend_from_slice(&2i32.to_be_bytes()); // version
    n.extend_from_slice(&0i32.to_be_bytes()); // no config
    h.extend_from_slice(&(n.len() as i32).to_be_bytes());
    h.extend_from_slice(&n);
    h
}

/// What the leader's quorum port and election port send back to server 4 (configured, never
/// started, larger than every running member so its connections are kept) when it skips SASL.
fn answers_to_an_unauthenticated_peer(e: &Ensemble, leader: usize) -> (Vec<u8>, Vec<u8>) {
    let (quorum, election) = e.quorum_ports(leader);
    (poke(quorum, &follower_info(4)), poke(election, &election_hello(4)))
}

/// Three of four configured members, started (server 4 is the one tests impersonate).
fn three_of_four(kinds: &[Kind], sasl: bool) -> (Ensemble, usize) {
    let mut e = if sasl { sasl_ensemble(kinds) } else { Ensemble::configure(kinds) };
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1, 2]);
    e.write_and_read(leader, "/x", &[0, 1, 2]);
    (e, leader)
}

/// CVE-2023-44981's invariant on real ports: with SASL required, a configured peer that does not
/// authenticate gets nothing on either port (no LEADERINFO, no vote) and is cut off. The same
/// pokes without quorum SASL get answers, so the check can see a leak.
#[test]
fn unauthenticated_peers_get_nothing_where_sasl_is_required() {
    let (e, leader) = three_of_four(&[Kind::Zkrs; 4], false);
    let (q, v) = answers_to_an_unauthenticated_peer(&e, leader);
    assert!(!q.is_empty() && !v.is_empty(), "no answers without SASL: {q:?} {v:?}\n{}", e.logs());
    drop(e);
    let (e, leader) = three_of_four(&[Kind::Zkrs; 4], true);
    let (q, v) = answers_to_an_unauthenticated_peer(&e, leader);
    assert!(q.is_empty() && v.is_empty(), "a peer that skipped SASL got {q:?} {v:?}\n{}", e.logs());
    assert!(e.log(leader).contains("did not authenticate"), "{}", e.logs());
}

#[test]
fn three_servers_requiring_quorum_sasl_replicate_and_survive_the_leader() {
    let mut e = sasl_ensemble(&[Kind::Zkrs; 3]);
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", "2");
    assert!(e.log(leader).contains("authenticated as \"peer\" (quorum SASL)"), "{}", e.logs());
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    e.write_and_read(followers[0], "/a", &[0, 1, 2]);

    let back = e.leader_dies_and_rejoins(leader, "/b");
    assert_eq!(back, ["a", "b", "zookeeper"], "{}", e.logs());
}

#[test]
fn a_server_with_a_wrong_password_stays_out() {
    let e = wrong_password_stays_out(&[Kind::Zkrs; 3]);
    assert!(e.log(2).contains("refused our credentials"), "{}", e.logs());
    let refusals = e.log(0) + &e.log(1);
    assert!(refusals.contains("quorum SASL failed"), "{}", e.logs());
}

#[test]
fn apache_and_zkrs_authenticate_each_other_both_ways() {
    let mut e = sasl_ensemble(&[Kind::Apache, Kind::Apache, Kind::Zkrs]);
    // Every member requires SASL, so Apache's learners authenticated to the zkrs leader, and zkrs
    // to Apache's leader (Apache's log has no binding here to say so).
    e.zkrs_leads_then_follows_apache(|e| {
        assert!(e.log(2).contains("authenticated as \"peer\" (quorum SASL)"), "{}", e.logs());
    });
}

/// Member 3 (of `kinds`) has a wrong password: the others form the ensemble without it.
fn wrong_password_stays_out(kinds: &[Kind]) -> Ensemble {
    let mut e = sasl_ensemble(kinds);
    jaas(&e, 2, "peer", "guessed");
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1]);
    e.write_and_read(leader, "/one", &[0, 1]);
    e.stays_out(2, Duration::from_secs(6));
    e
}

#[test]
fn an_apache_server_with_a_wrong_password_stays_out_of_a_zkrs_ensemble() {
    let e = wrong_password_stays_out(&[Kind::Zkrs, Kind::Zkrs, Kind::Apache]);
    let refusals = e.log(0) + &e.log(1);
    assert!(refusals.contains("quorum SASL failed"), "{}", e.logs());
}

#[test]
fn zkrs_with_a_wrong_password_stays_out_of_an_apache_ensemble() {
    let e = wrong_password_stays_out(&[Kind::Apache, Kind::Apache, Kind::Zkrs]);
    assert!(e.log(2).contains("refused our credentials"), "{}", e.logs());
}

/// zkrs-server's start-up error for `extra` zoo.cfg lines (and `jvm_flags`), run as a member of a
/// configured ensemble.
fn start_up_error(extra: &str, jvm_flags: Option<&str>) -> String {
    let e = Ensemble::configure(&[Kind::Zkrs; 3]);
    e.append_config(extra);
    let mut cmd = std::process::Command::new(support::zkrs_binary());
    cmd.arg(e.members[0].dir.join("zoo.cfg")).env("SERVER_JVMFLAGS", jvm_flags.unwrap_or(""));
    let out = cmd.output().expect("run zkrs-server");
    assert!(!out.status.success(), "zkrs-server started with {extra:?}");
    String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout)
}

#[test]
fn quorum_sasl_mistakes_are_start_up_errors_naming_the_key() {
    let e = start_up_error("quorum.auth.serverRequireSasl=true\n", None);
    assert!(
        e.contains("quorum.auth.serverRequireSasl") && e.contains("quorum.auth.enableSasl is disabled"),
        "{e}"
    );
    let e = start_up_error("quorum.auth.enableSasl=true\nquorum.auth.serverRequireSasl=true\n", None);
    assert!(e.contains("quorum.auth.learnerRequireSasl is disabled"), "{e}");
    let e = start_up_error("quorum.auth.enableSasl=yes\n", None);
    assert!(e.contains("quorum.auth.enableSasl") && e.contains("'true' or 'false'"), "{e}");
    let e = start_up_error(REQUIRE_ALL, None);
    assert!(e.contains("needs a JAAS file"), "{e}");
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("jaas.conf");
    std::fs::write(
        &path,
        "QuorumServer { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };\n\
         QuorumLearner { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };\n",
    )
    .expect("jaas");
    let flags = format!("-Djava.security.auth.login.config={}", path.display());
    let e = start_up_error(REQUIRE_ALL, Some(&flags));
    // Kerberos between members needs the login's keytab (and principal), as Apache's login does.
    assert!(e.contains("Krb5LoginModule") && e.contains("no keyTab option"), "{e}");
    std::fs::write(
        &path,
        "QuorumServer { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"b\"; };\n",
    )
    .expect("jaas");
    let e = start_up_error(REQUIRE_ALL, Some(&flags));
    assert!(e.contains("no 'QuorumLearner' section"), "{e}");
}

/// The same refusals on Apache's own ensemble: a peer skipping SASL gets nothing from an Apache
/// leader requiring it either, so zkrs's refusal is Apache's behaviour.
#[test]
fn apache_requiring_quorum_sasl_gives_unauthenticated_peers_nothing_too() {
    let (e, leader) = three_of_four(&[Kind::Apache; 4], true);
    let (q, v) = answers_to_an_unauthenticated_peer(&e, leader);
    assert!(
        q.is_empty() && v.is_empty(),
        "Apache answered a peer that skipped SASL: {q:?} {v:?}\n{}",
        e.logs()
    );
}

/// Replaces member `i`'s `quorum.auth.*` lines with `lines`.
fn set_quorum_auth(e: &Ensemble, i: usize, lines: &str) {
    let path = e.members[i].dir.join("zoo.cfg");
    let text = std::fs::read_to_string(&path).expect("zoo.cfg");
    let kept: String =
        text.lines().filter(|l| !l.starts_with("quorum.auth.")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, format!("{kept}{lines}")).expect("zoo.cfg");
}

/// The rolling way to switch quorum SASL on without downtime, one server at a time in three
/// rounds (Apache's documented order): `enableSasl`, then `learnerRequireSasl`, then
/// `serverRequireSasl`. Members of neighbouring rounds talk to each other, so the ensemble
/// serves writes after every restart.
#[test]
fn quorum_sasl_is_switched_on_one_server_at_a_time() {
    let mut e = Ensemble::configure(&[Kind::Zkrs; 3]);
    for i in 0..3 {
        jaas(&e, i, "peer", "secret");
        e.launch(i);
    }
    e.wait_for_leader();
    let rounds = [
        "quorum.auth.enableSasl=true\n",
        "quorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true\n",
        REQUIRE_ALL,
    ];
    for (r, lines) in rounds.iter().enumerate() {
        for i in 0..3 {
            e.kill(i);
            set_quorum_auth(&e, i, lines);
            e.launch(i);
            e.wait_for_leader();
            e.write_and_read(i, &format!("/round{r}-server{}", i + 1), &[0, 1, 2]);
        }
    }
    let leader = e.wait_for_leader();
    assert!(e.log(leader).contains("authenticated as \"peer\" (quorum SASL)"), "{}", e.logs());
}
