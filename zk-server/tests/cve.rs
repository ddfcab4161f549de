//! The invariant behind each Apache ZooKeeper CVE listed in OPS-FACTS.md (section 6), one test
//! each, as Apache 3.9 holds it once fixed. Where Debian's Apache 3.8.0 answers the same way the
//! scenario runs against it too; where 3.8.0 still has the hole, the test says so (and asserts
//! Apache's answer where that answer is deterministic), while zkrs must hold the fixed behaviour.
//!
//! Not here: CVE-2016-5017 (a buffer overflow in Apache's C shell, which zkrs does not ship: its
//! C library's decoders are fuzzed instead, fuzz/README.md) and CVE-2023-44981 (quorum SASL that
//! cannot be skipped: `zk-server/tests/quorum_sasl.rs`, which pokes a zkrs and an Apache leader
//! requiring it as an unauthenticated member; the Kerberos part the CVE fixed, a learner principal
//! without a host part such as `eve@REALM` skipping the host check, is refused by zk-quorum's
//! `auth::authorize_host_principal` (its unit tests) and a learner of another host is refused on
//! real processes in `zk-server/tests/quorum_kerberos.rs`).
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::client::RawClient;
use support::{Target, BOTH};
use zk_proto::*;

fn digest_acl(perms: i32, user_password: &str) -> Acl {
    let id = zk_tree::digest_id(user_password).expect("user:password");
    Acl { perms, id: Id { scheme: "digest".into(), id } }
}

fn world(perms: i32) -> Acl {
    Acl { perms, id: Id { scheme: "world".into(), id: "anyone".into() } }
}

fn create_with(c: &mut RawClient, path: &str, acl: Vec<Acl>) -> ErrorCode {
    c.call(Request::Create(CreateRequest {
        path: path.into(),
        data: Some(b"v".to_vec().into()),
        acl,
        flags: 0,
    }))
    .err()
}

/// getACL's answer: the error, or the ACL as "scheme:id/perms" strings.
fn get_acl(c: &mut RawClient, path: &str) -> Result<Vec<String>, ErrorCode> {
    let r = c.call(Request::GetAcl(GetAclRequest { path: path.into() }));
    if r.err() != ErrorCode::Ok {
        return Err(r.err());
    }
    let a: GetAclResponse = r.decode();
    Ok(a.acl.iter().map(|a| format!("{}:{}/{}", a.id.scheme, a.id.id, a.perms)).collect())
}

/// CVE-2019-0201: getACL needs READ or ADMIN on the node; a caller without ADMIN sees digest ids
/// as `user:x`, never the password hash. Apache 3.8.0 has the fix: both servers must answer alike.
#[test]
fn cve_2019_0201_get_acl_needs_read_or_admin_and_masks_digests() {
    let alice = zk_tree::digest_id("alice:secret").unwrap();
    let bob = zk_tree::digest_id("bob:pw").unwrap();
    let mut seen = Vec::new();
    for target in BOTH {
        let srv = support::start(target, "");
        let mut owner = RawClient::connect(srv.addr(), 30000);
        assert_eq!(owner.add_auth("digest", b"alice:secret"), Some(ErrorCode::Ok));
        let mut anon = RawClient::connect(srv.addr(), 30000);
        let read_only = vec![world(perms::READ), digest_acl(perms::ALL, "alice:secret")];
        assert_eq!(create_with(&mut owner, "/read", read_only), ErrorCode::Ok);
        assert_eq!(
            create_with(&mut owner, "/private", vec![digest_acl(perms::ALL, "alice:secret")]),
            ErrorCode::Ok
        );
        let admin_only = vec![world(perms::ADMIN), digest_acl(perms::READ, "bob:pw")];
        assert_eq!(create_with(&mut owner, "/admin", admin_only), ErrorCode::Ok);

        let answers = vec![
            get_acl(&mut anon, "/read"),
            get_acl(&mut owner, "/read"),
            get_acl(&mut anon, "/private"),
            get_acl(&mut owner, "/private"),
            get_acl(&mut anon, "/admin"),
        ];
        // READ without ADMIN: the digest is masked.
        assert_eq!(
            answers[0],
            Ok(vec!["world:anyone/1".to_string(), "digest:alice:x/31".to_string()]),
            "{target:?}"
        );
        // ADMIN: shown in full.
        assert_eq!(
            answers[1],
            Ok(vec!["world:anyone/1".to_string(), format!("digest:{alice}/31")]),
            "{target:?}"
        );
        // Neither READ nor ADMIN: refused.
        assert_eq!(answers[2], Err(ErrorCode::NoAuth), "{target:?}");
        assert_eq!(answers[3], Ok(vec![format!("digest:{alice}/31")]), "{target:?}");
        // ADMIN without READ is enough, and shows ids in full.
        assert_eq!(
            answers[4],
            Ok(vec!["world:anyone/16".to_string(), format!("digest:{bob}/1")]),
            "{target:?}"
        );
        seen.push(answers);
    }
    assert_eq!(seen[0], seen[1], "Apache and zkrs differ");
}

/// CVE-2024-23944: no watch, persistent, recursive or one-shot, delivers an event about a node
/// its session cannot READ (creation, data change, deletion, of the node or of a child below a
/// recursive watch). Events are delivered in zxid order, so the first event the watcher gets
/// being the one for a readable node created last shows that none came for the hidden ones.
/// Debian's 3.8.0 package carries the fix (a backport), so both servers run the scenario.
#[test]
fn cve_2024_23944_watches_never_deliver_events_about_unreadable_nodes() {
    for target in BOTH {
        let srv = support::start(target, "");
        let mut owner = RawClient::connect(srv.addr(), 30000);
        assert_eq!(owner.add_auth("digest", b"alice:secret"), Some(ErrorCode::Ok));
        assert_eq!(owner.create("/w", b"", CreateMode::Persistent).err(), ErrorCode::Ok);

        let mut watcher = RawClient::connect(srv.addr(), 30000);
        for (path, mode) in [("/w", AddWatchMode::PersistentRecursive), ("/w/p", AddWatchMode::Persistent)] {
            let r = watcher.call(Request::AddWatch(AddWatchRequest { path: path.into(), mode: mode.code() }));
            assert_eq!(r.err(), ErrorCode::Ok, "{target:?} addWatch {path}");
        }
        // One-shot: an exists watch on a node not there yet.
        assert_eq!(watcher.exists("/w/once", true).err(), ErrorCode::NoNode, "{target:?}");

        let hidden = || vec![digest_acl(perms::ALL, "alice:secret")];
        for path in ["/w/p", "/w/once", "/w/secret", "/w/secret/kid"] {
            assert_eq!(create_with(&mut owner, path, hidden()), ErrorCode::Ok, "{target:?} {path}");
        }
        for path in ["/w/p", "/w/secret/kid"] {
            assert_eq!(owner.set_data(path, b"changed", -1).err(), ErrorCode::Ok, "{target:?} {path}");
        }
        for path in ["/w/secret/kid", "/w/secret", "/w/p"] {
            assert_eq!(owner.delete(path, -1).err(), ErrorCode::Ok, "{target:?} {path}");
        }
        assert_eq!(owner.create("/w/open", b"", CreateMode::Persistent).err(), ErrorCode::Ok);

        let first = watcher.next_event().expect("an event");
        assert_eq!(
            (first.event_type, first.path.as_str()),
            (EventType::NodeCreated.code(), "/w/open"),
            "{target:?} told the watcher about a node it cannot read"
        );
    }
}

/// CVE-2017-5637: four-letter words other than `srvr` are off unless `4lw.commands.whitelist`
/// names them, and a refused word gets Apache's one-line answer without doing anything.
#[test]
fn cve_2017_5637_four_letter_words_default_to_srvr_only() {
    let mut seen = Vec::new();
    for target in BOTH {
        let srv = support::start_with_default_words(target, "");
        assert!(srv.four_letter("srvr").starts_with("Zookeeper version:"), "{target:?}");
        let mut answers = Vec::new();
        for word in ["stat", "cons", "dump", "wchp", "envi", "conf", "mntr", "ruok", "crst", "srst"] {
            let text = srv.four_letter(word);
            assert_eq!(
                text,
                format!("{word} is not executed because it is not in the whitelist.\n"),
                "{target:?}"
            );
            answers.push(text);
        }
        seen.push(answers);
    }
    assert_eq!(seen[0], seen[1]);
}

/// CVE-2026-24281: no name is ever looked up from an address. An `ip` ACL names addresses or
/// networks only, so a host name is an invalid ACL rather than something resolved (on both
/// servers); an `ip` id matches the TCP peer's own address. (The quorum's certificate check, the
/// other place a reverse look-up could creep in, has its unit test beside it in
/// zk-server/src/ensemble/peer_tls.rs.)
#[test]
fn cve_2026_24281_ip_acls_name_addresses_never_resolved_names() {
    for target in BOTH {
        let srv = support::start(target, "");
        let mut c = RawClient::connect(srv.addr(), 30000);
        let by_name = vec![Acl { perms: perms::ALL, id: Id { scheme: "ip".into(), id: "localhost".into() } }];
        assert_eq!(create_with(&mut c, "/named", by_name), ErrorCode::InvalidAcl, "{target:?}");
        let other = vec![Acl { perms: perms::ALL, id: Id { scheme: "ip".into(), id: "127.0.0.2".into() } }];
        assert_eq!(create_with(&mut c, "/other", other), ErrorCode::Ok, "{target:?}");
        // This client is 127.0.0.1: the node's only id is another address.
        assert_eq!(c.get_data("/other", false).err(), ErrorCode::NoAuth, "{target:?}");
    }
}

/// One HTTP/1.1 GET with extra header lines: the status code and the body.
fn http_get(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    http_send(addr, "GET", path, headers, b"")
}

fn http_send(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &[u8]) -> (u16, String) {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to the AdminServer");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let length = if body.is_empty() { String::new() } else { format!("Content-Length: {}\r\n", body.len()) };
    write!(s, "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{headers}{length}Connection: close\r\n\r\n")
        .unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), body.to_string())
}

fn admin_extra(port: u16) -> String {
    format!("admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n")
}

/// CVE-2024-51504 and CVE-2025-58457: in Apache 3.9 only `snapshot` and `restore` ask for auth
/// (an `Authorization` header checked against the root's ACL, bit by bit, the `ip` scheme taking
/// the TCP peer unless `IPAuthenticationProvider.usexforwardedfor=true`). zkrs serves both: an
/// `X-Forwarded-For` naming the address the root's ACL grants is not believed, and ids holding
/// every bit of ALL but one are refused (Apache before 3.9.4 asked whether any entry granted any
/// bit). The root's data is in no answer to a refused caller, and a refused restore changes
/// nothing; the others answer alike with and without claims.
#[test]
fn cve_2024_51504_and_2025_58457_no_admin_command_trusts_claimed_identities() {
    let admin = support::free_port();
    let srv = support::start(Target::Zkrs, &admin_extra(admin));
    let mut c = RawClient::connect(srv.addr(), 30000);
    assert_eq!(c.set_data("/", b"root-data-0201", -1).err(), ErrorCode::Ok);
    let digest =
        |user_password: &str| Id { scheme: "digest".into(), id: zk_tree::digest_id(user_password).unwrap() };
    let root_acl = vec![
        Acl { perms: perms::ALL, id: Id { scheme: "ip".into(), id: "10.0.0.1".into() } },
        Acl { perms: perms::ALL & !perms::ADMIN, id: digest("reader:pw") },
        Acl { perms: perms::ADMIN, id: digest("admin:pw") },
    ];
    let r = c.call(Request::SetAcl(SetAclRequest { path: "/".into(), acl: root_acl, version: -1 }));
    assert_eq!(r.err(), ErrorCode::Ok);
    let addr = SocketAddr::from(([127, 0, 0, 1], admin));
    let claims = [
        ("", 401),
        ("Authorization: ip\r\nX-Forwarded-For: 10.0.0.1\r\n", 403),
        ("Authorization: digest root:root\r\n", 403),
        ("Authorization: digest reader:pw\r\n", 403),
        ("Authorization: digest admin:pw\r\n", 403),
        ("Authorization: x509\r\nX-Forwarded-For: 10.0.0.1, 127.0.0.1\r\n", 401),
    ];
    for cmd in ["snapshot", "snap"] {
        for (claim, status) in claims {
            let (got, body) = http_get(addr, &format!("/commands/{cmd}?streaming=true"), claim);
            assert_eq!(got, status, "{cmd} {claim:?}: {body}");
            let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            assert_eq!(v["command"], cmd, "{cmd} {claim:?}: named as asked, as Apache does");
            assert!(!body.contains("root-data-0201"));
        }
    }
    // `restore` is refused alike; the tree it would have replaced is untouched.
    for cmd in ["restore", "rest"] {
        for (claim, status) in claims {
            let (got, body) = http_send(addr, "POST", &format!("/commands/{cmd}"), claim, b"not a snapshot");
            assert_eq!(got, status, "{cmd} {claim:?}: {body}");
            let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            assert_eq!(v["command"], cmd, "{cmd} {claim:?}: named as asked, as Apache does");
        }
    }
    let root = c.exists("/", false).decode::<ExistsResponse>().stat;
    assert_eq!(root.data_length, b"root-data-0201".len() as i32, "the root as it was");
    // The commands that need no auth answer alike with and without claims.
    for cmd in ["ruok", "is_read_only", "get_trace_mask"] {
        let plain = http_get(addr, &format!("/commands/{cmd}"), "");
        for (claim, _) in claims {
            assert_eq!(http_get(addr, &format!("/commands/{cmd}"), claim), plain, "{cmd} {claim:?}");
        }
    }
}

/// CVE-2026-24308: a password given in zoo.cfg (the `ssl.*` and `ssl.quorum.*` stores', or any key
/// ending in "password", the rule of Apache's fix) never shows: not in the log, not in a
/// four-letter word's answer, not in any AdminServer answer. Apache 3.9 still hands the zoo.cfg
/// out verbatim in `initial_configuration`; zkrs redacts it there too.
#[test]
fn cve_2026_24308_config_passwords_never_show() {
    let admin = support::free_port();
    let secrets = ["KsPw-24308", "TsPw-24308", "QKsPw-24308", "QTsPw-24308", "OtherPw-24308"];
    let extra = format!(
        "{}ssl.keyStore.password={}\nssl.trustStore.password={}\nssl.quorum.keyStore.password={}\n\
         ssl.quorum.trustStore.password={}\nsome.component.password={}\n",
        admin_extra(admin),
        secrets[0],
        secrets[1],
        secrets[2],
        secrets[3],
        secrets[4]
    );
    let srv = support::start(Target::Zkrs, &extra);
    let mut c = RawClient::connect(srv.addr(), 30000);
    assert_eq!(c.create("/x", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let addr = SocketAddr::from(([127, 0, 0, 1], admin));
    let mut answers = Vec::new();
    for word in zk_server::fourlw::WORDS.iter().filter(|w| **w != "stmk") {
        answers.push((word.to_string(), srv.four_letter(word)));
    }
    // `GET /commands` lists every command as a link, as Apache's page does.
    let (_, list) = http_get(addr, "/commands", "");
    let names: Vec<String> = list
        .split("</a>")
        .filter_map(|part| part.rsplit_once('>').map(|(_, name)| name.trim().to_string()))
        .filter(|name| !name.is_empty() && !name.contains('<'))
        .collect();
    assert!(names.iter().any(|n| n == "initial_configuration"), "{list}");
    for name in &names {
        answers.push((name.clone(), http_get(addr, &format!("/commands/{name}"), "").1));
    }
    let icfg = &answers.iter().find(|(n, _)| n == "initial_configuration").expect("icfg").1;
    assert!(icfg.contains("ssl.keyStore.password=***"), "{icfg}");
    answers.push(("log".into(), support::server_log(srv.dir.path())));
    for (what, text) in &answers {
        for s in secrets {
            assert!(!text.contains(s), "{what} shows a password:\n{text}");
        }
    }
}

/// CVE-2018-8012: Apache's fix for the quorum is SASL between servers (not in zkrs yet, see the
/// module comment). What holds without it: a member's election port talks only to the server ids
/// of its configuration. An unknown id is cut off at its handshake with nothing said to it, where
/// a configured id is answered with the member's vote. (Apache answers any id with its vote, as
/// FastLeaderElection replies to non-voters; without quorum SASL it authenticates nobody.) The
/// quorum port's side, a leader syncing only the learners its configuration lists where Apache
/// syncs any id, is zk-quorum's `learners_outside_the_configuration_are_refused`.
#[test]
fn cve_2018_8012_election_port_talks_only_to_configured_servers() {
    use support::ensemble::{Ensemble, Kind};
    use zk_quorum::wire::handshake::{encode_election_frame, ElectionHandshake};
    use zk_quorum::wire::notification::{Notification, PeerState};

    let mut e = Ensemble::configure(&[Kind::Zkrs, Kind::Zkrs, Kind::Zkrs]);
    e.launch(0);
    let cfg = std::fs::read_to_string(e.members[0].dir.join("zoo.cfg")).unwrap();
    let line = cfg.lines().find(|l| l.starts_with("server.1=")).expect("server.1");
    let election: u16 = line.rsplit(':').next().unwrap().parse().expect("election port");
    let election = SocketAddr::from(([127, 0, 0, 1], election));

    // Dial as `sid` (above 1, so that member 1 keeps the connection rather than dialling back),
    // say we are looking, and return what comes back before the member closes or goes quiet.
    let talk = |sid: i64| -> Vec<u8> {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut s = loop {
            match TcpStream::connect_timeout(&election, Duration::from_secs(2)) {
                Ok(s) => break s,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                Err(e) => panic!("election port: {e}"),
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let me = HostPort { host: "127.0.0.1".into(), port: 1 };
        let mut out = ElectionHandshake::v1(sid, me).encode().expect("handshake");
        let vote = Notification {
            state: PeerState::Looking,
            leader: sid,
            zxid: 0,
            election_epoch: 1,
            peer_epoch: 0,
            version: 2,
            config: None,
        };
        encode_election_frame(&vote.encode(), &mut out).expect("frame");
        let _ = s.write_all(&out);
        let mut got = vec![0u8; 4];
        match s.read_exact(&mut got) {
            Ok(()) => got,
            Err(_) => Vec::new(),
        }
    };
    assert_eq!(talk(99), Vec::<u8>::new(), "an unknown server id was answered");
    assert_eq!(talk(3).len(), 4, "a configured server id got no vote");
    assert!(e.log(0).contains("server id 99 is not in the configuration"), "{}", e.log(0));
}
