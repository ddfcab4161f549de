//! SASL DIGEST-MD5: the same scenarios on Apache ZooKeeper 3.8 and zkrs-server, with users from a
//! JAAS file named by `-Djava.security.auth.login.config` in `SERVER_JVMFLAGS`: the raw exchange
//! (zxid 0, the challenge's shape, rspauth, the failure reply and close), kazoo's `sasl_options`,
//! Apache's Java client with a JAAS `Client` section, `sasl:` ACLs, `superUser`, and
//! `enforce.auth.*` / `sessionRequireClientSASLAuth` refusing sessions that did not authenticate.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use bytes::Bytes;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::client::RawClient;
use support::*;
use zk_proto::digest_md5::{ClientExchange, ClientStep};
use zk_proto::*;

/// Debian's python, which has python3-kazoo; the `python3` on PATH may be another one.
const PYTHON: &str = "/usr/bin/python3";

const PROVIDER: &str = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";

/// A JAAS file with the server's users (bob, and admin, the super user in these tests) and a
/// `Client` section for the Java client (bob).
fn jaas(dir: &Path) -> String {
    let path = dir.join("jaas.conf");
    std::fs::write(
        &path,
        "// zkrs SASL test users\nServer {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
         user_bob=\"bobpw\"\n    user_admin=\"adminpw\";\n};\n\nClient {\n    \
         org.apache.zookeeper.server.auth.DigestLoginModule required\n    username=\"bob\"\n    \
         password=\"bobpw\";\n};\n",
    )
    .unwrap();
    path.display().to_string()
}

/// A server of `target` with the JAAS users, the SASL provider and `extra` zoo.cfg lines.
fn sasl_server(target: Target, extra: &str) -> (ServerProc, tempfile::TempDir) {
    let dir = tempfile::Builder::new().prefix("zkrs-sasl-").tempdir().unwrap();
    let flags = format!("-Djava.security.auth.login.config={} -Dzookeeper.superUser=admin", jaas(dir.path()));
    (start_with_jvm_flags(target, &format!("{PROVIDER}{extra}"), &flags), dir)
}

fn sasl(c: &mut RawClient, token: &[u8]) -> Option<client::Reply> {
    let xid = c.send(&Request::Sasl(GetSaslRequest { token: Bytes::copy_from_slice(token) }));
    c.recv(xid)
}

/// Runs DIGEST-MD5 as bob with `password` on a raw connection; returns the last reply.
fn authenticate(c: &mut RawClient, user: &str, password: &str) -> client::Reply {
    let mut ex = ClientExchange::new(user, password, &[0x5a; 16]);
    let first = sasl(c, &ex.initial()).expect("challenge");
    assert_eq!((first.header.zxid, first.err()), (0, ErrorCode::Ok));
    let challenge: SetSaslResponse = first.decode();
    let text = String::from_utf8(challenge.token.to_vec()).unwrap();
    assert!(
        text.starts_with("realm=\"zk-sasl-md5\",nonce=\"")
            && text.ends_with("\",charset=utf-8,algorithm=md5-sess"),
        "{text}"
    );
    let ClientStep::Send(response) = ex.step(&challenge.token).unwrap() else { panic!("a response") };
    let last = sasl(c, &response).expect("an answer to the response");
    // A success carries rspauth; a failure kept open by allowSaslFailedClients a null token.
    if last.err() == ErrorCode::Ok && last.body[..] != [0xff; 4] {
        let proof: SetSaslResponse = last.decode();
        assert_eq!(
            ex.step(&proof.token),
            Ok(ClientStep::Done),
            "rspauth proves the server knows the password"
        );
    }
    last
}

fn whoami(c: &mut RawClient) -> Vec<(String, String)> {
    let infos: Vec<ClientInfo> = c.call(Request::WhoAmI).decode();
    infos.into_iter().map(|i| (i.auth_scheme, i.user)).collect()
}

#[test]
fn raw_exchange_is_the_same_on_both_servers() {
    for target in BOTH {
        let (server, _jaas) = sasl_server(target, "");
        let mut c = RawClient::connect(server.addr(), 10_000);
        let last = authenticate(&mut c, "bob", "bobpw");
        assert_eq!((last.header.zxid, last.err()), (0, ErrorCode::Ok), "{target:?}");
        assert!(last.decode::<SetSaslResponse>().token.starts_with(b"rspauth="), "{target:?}");
        let ids = whoami(&mut c);
        assert!(ids.contains(&("sasl".into(), "bob".into())), "{target:?}: {ids:?}");
        // bob's node is his alone.
        let acl = vec![Acl { perms: perms::ALL, id: Id { scheme: "sasl".into(), id: "bob".into() } }];
        let create = Request::Create(CreateRequest { path: "/bob".into(), data: None, acl, flags: 0 });
        assert_eq!(c.call(create).err(), ErrorCode::Ok, "{target:?}");
        let mut anon = RawClient::connect(server.addr(), 10_000);
        assert_eq!(anon.get_data("/bob", false).err(), ErrorCode::NoAuth, "{target:?}");
        // The super user reads anything.
        let mut admin = RawClient::connect(server.addr(), 10_000);
        assert_eq!(authenticate(&mut admin, "admin", "adminpw").err(), ErrorCode::Ok);
        assert_eq!(admin.get_data("/bob", false).err(), ErrorCode::Ok, "{target:?}");

        // A wrong password: AUTHFAILED (zxid 0, a null token after the header), then the close.
        let mut wrong = RawClient::connect(server.addr(), 10_000);
        let last = authenticate(&mut wrong, "bob", "nope");
        assert_eq!((last.header.zxid, last.err()), (0, ErrorCode::AuthFailed), "{target:?}");
        assert_eq!(&last.body[..], &[0xff; 4], "{target:?}");
        assert!(wrong.is_closed_within(Duration::from_secs(10)), "{target:?}");
        // An unknown user with the password of the user tried last: refused by zkrs. Apache 3.8.0
        // lets eve in (ZOOKEEPER-4839, fixed in later releases: its password look-up used the
        // name of the exchange before when the user was unknown).
        let mut stranger = RawClient::connect(server.addr(), 10_000);
        let expected = if target == Target::Apache { ErrorCode::Ok } else { ErrorCode::AuthFailed };
        assert_eq!(authenticate(&mut stranger, "eve", "bobpw").err(), expected, "{target:?}");
        // A first token that is not empty is ignored: the challenge comes back.
        let mut eager = RawClient::connect(server.addr(), 10_000);
        let r = sasl(&mut eager, b"username=\"bob\"").expect("an answer");
        assert_eq!(r.err(), ErrorCode::Ok, "{target:?}");
        let challenge: SetSaslResponse = r.decode();
        assert!(challenge.token.starts_with(b"realm=\"zk-sasl-md5\",nonce="), "{target:?}");
    }
}

/// `allowSaslFailedClients=true` (Apache's `zookeeper.allowSaslFailedClients`, set from zoo.cfg):
/// a failed exchange is answered with a null token and the connection stays, unauthenticated.
#[test]
fn allow_sasl_failed_clients_keeps_the_connection() {
    for target in BOTH {
        let (server, _jaas) = sasl_server(target, "allowSaslFailedClients=true\n");
        let mut wrong = RawClient::connect(server.addr(), 10_000);
        let last = authenticate(&mut wrong, "bob", "nope");
        assert_eq!(
            (last.header.zxid, last.err(), &last.body[..]),
            (0, ErrorCode::Ok, &[0xff; 4][..]),
            "{target:?}"
        );
        assert_eq!(whoami(&mut wrong), vec![("ip".to_string(), "127.0.0.1".to_string())], "{target:?}");
    }
}

/// Without a JAAS file a SASL token gets a null token back and nothing changes.
#[test]
fn without_jaas_sasl_answers_a_null_token() {
    for target in BOTH {
        let server = start_with_jvm_flags(target, PROVIDER, "");
        let mut c = RawClient::connect(server.addr(), 10_000);
        let r = sasl(&mut c, b"").expect("an answer");
        assert_eq!((r.header.zxid, r.err(), &r.body[..]), (0, ErrorCode::Ok, &[0xff; 4][..]), "{target:?}");
        assert_eq!(whoami(&mut c), vec![("ip".to_string(), "127.0.0.1".to_string())], "{target:?}");
    }
}

/// A SASL request whose body does not decode (a header alone, a token length past the frame):
/// the connection is closed without an answer, with or without JAAS users.
#[test]
fn undecodable_sasl_requests_close_the_connection() {
    for target in BOTH {
        for jaas in [true, false] {
            let (server, _dir) = if jaas {
                sasl_server(target, "")
            } else {
                (start_with_jvm_flags(target, PROVIDER, ""), tempfile::tempdir().unwrap())
            };
            for body in [&[][..], &[0, 0, 0, 9, b'x'][..]] {
                let mut c = RawClient::connect(server.addr(), 10_000);
                let mut payload = Vec::new();
                RequestHeader { xid: 1, op: OpCode::Sasl.code() }.write(&mut payload);
                payload.extend_from_slice(body);
                c.send_frame(&payload);
                assert!(c.read_frame().is_none(), "{target:?} jaas={jaas} body={body:?}: no answer, closed");
            }
        }
    }
}

#[test]
fn enforce_auth_closes_unauthenticated_sessions() {
    let configs =
        ["enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n", "sessionRequireClientSASLAuth=true\n"];
    for extra in configs {
        for target in BOTH {
            let (server, _jaas) = sasl_server(target, extra);
            // Any request before authenticating: SESSIONCLOSEDREQUIRESASLAUTH, zxid 0, closed.
            let mut anon = RawClient::connect(server.addr(), 10_000);
            let r = anon.exists("/", false);
            assert_eq!(
                (r.header.zxid, r.err()),
                (0, ErrorCode::SessionClosedRequireSaslAuth),
                "{target:?} {extra}"
            );
            assert!(r.body.is_empty());
            assert!(anon.is_closed_within(Duration::from_secs(10)), "{target:?}");
            // A ping too.
            let mut pinger = RawClient::connect(server.addr(), 10_000);
            pinger.send_with_xid(xid::PING, OpCode::Ping.code(), &Request::Ping);
            let r = pinger.recv(xid::PING).expect("an answer to the ping");
            assert_eq!(r.err(), ErrorCode::SessionClosedRequireSaslAuth, "{target:?}");
            // addauth digest does not count when only sasl is enforced.
            let mut digest = RawClient::connect(server.addr(), 10_000);
            assert_eq!(digest.add_auth("digest", b"bob:bobpw"), Some(ErrorCode::Ok));
            assert_eq!(
                digest.exists("/", false).err(),
                ErrorCode::SessionClosedRequireSaslAuth,
                "{target:?}"
            );
            // SASL first, then everything works.
            let mut bob = RawClient::connect(server.addr(), 10_000);
            assert_eq!(authenticate(&mut bob, "bob", "bobpw").err(), ErrorCode::Ok);
            assert_eq!(bob.exists("/", false).err(), ErrorCode::Ok, "{target:?}");
            // A wrong password is SESSIONCLOSEDREQUIRESASLAUTH when SASL is required.
            let mut wrong = RawClient::connect(server.addr(), 10_000);
            let r = authenticate(&mut wrong, "bob", "nope");
            assert_eq!(r.err(), ErrorCode::SessionClosedRequireSaslAuth, "{target:?}");
            assert!(wrong.is_closed_within(Duration::from_secs(10)), "{target:?}");
        }
    }
}

/// `enforce.auth.schemes=digest`: addauth digest is enough, SASL is not required.
#[test]
fn enforce_auth_with_the_digest_scheme() {
    for target in BOTH {
        let (server, _jaas) = sasl_server(target, "enforce.auth.enabled=true\nenforce.auth.schemes=digest\n");
        let mut digest = RawClient::connect(server.addr(), 10_000);
        assert_eq!(digest.add_auth("digest", b"bob:bobpw"), Some(ErrorCode::Ok));
        assert_eq!(digest.exists("/", false).err(), ErrorCode::Ok, "{target:?}");
        let mut bob = RawClient::connect(server.addr(), 10_000);
        assert_eq!(authenticate(&mut bob, "bob", "bobpw").err(), ErrorCode::Ok);
        assert_eq!(bob.exists("/", false).err(), ErrorCode::SessionClosedRequireSaslAuth, "{target:?}");
        // A failed SASL exchange is AUTHFAILED here: SASL is not what is required.
        let mut wrong = RawClient::connect(server.addr(), 10_000);
        assert_eq!(authenticate(&mut wrong, "bob", "nope").err(), ErrorCode::AuthFailed, "{target:?}");
    }
}

fn kazoo_present() {
    let probe = Command::new(PYTHON).args(["-c", "import kazoo"]).output().expect("run python3");
    assert!(
        probe.status.success(),
        "kazoo is missing: install Debian's python3-kazoo (the README's test command does)"
    );
}

/// kazoo with `sasl_options` DIGEST-MD5: bob's `sasl` ACL, `auth` expanded to `sasl:bob`, the
/// super user, a wrong password (kazoo logs AUTH_FAILED and stops reconnecting: its next request
/// fails), and a client without SASL.
const KAZOO_SCENARIO: &str = r#"
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions
port = sys.argv[1]
def connect(user, pw):
    opts = None if user is None else {"mechanism": "DIGEST-MD5", "username": user, "password": pw}
    zk = KazooClient(hosts="127.0.0.1:" + port, sasl_options=opts, timeout=5)
    zk.start(timeout=20)
    return zk
def read(name, zk, path):
    try:
        print(name, "reads", zk.get(path)[0].decode())
    except NoAuthError:
        print(name, "NOAUTH")
    except Exception as e:
        print(name, type(e).__name__)
bob = connect("bob", "bobpw")
bob.create("/s", b"v", acl=[ACL(Permissions.ALL, Id("sasl", "bob"))])
read("bob", bob, "/s")
bob.create("/a", b"", acl=[ACL(Permissions.READ, Id("auth", ""))])
acl = bob.get_acls("/a")[0][0]
print("auth acl", acl.perms, acl.id.scheme, acl.id.id)
admin = connect("admin", "adminpw")
read("admin", admin, "/s")
anon = connect(None, None)
read("anon", anon, "/s")
for zk in (bob, admin, anon):
    zk.stop()
"#;

/// A wrong password with kazoo: the server's AUTHFAILED reaches kazoo's log.
const KAZOO_WRONG: &str = r#"
import sys, logging
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
from kazoo.client import KazooClient
zk = KazooClient(hosts="127.0.0.1:" + sys.argv[1], timeout=5,
                 sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": "nope"})
zk.start(timeout=20)
zk.stop()
"#;

fn python(script: &str, port: u16) -> (String, String) {
    let child = Command::new(PYTHON)
        .args(["-c", script, &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(child, Duration::from_secs(90));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn kazoo_digest_md5_on_both_servers() {
    kazoo_present();
    for target in BOTH {
        let (server, _jaas) = sasl_server(target, "");
        let (out, err) = python(KAZOO_SCENARIO, server.port);
        assert_eq!(
            out, "bob reads v\nauth acl 1 sasl bob\nadmin reads v\nanon NOAUTH\n",
            "kazoo against {target:?}: {err}"
        );
        let (out, err) = python(KAZOO_WRONG, server.port);
        assert!(
            out.contains("AUTH_FAILED closing"),
            "kazoo with a wrong password against {target:?}: {out}{err}"
        );
    }
}

/// kazoo without SASL under `sessionRequireClientSASLAuth`: its first request fails and the
/// connection is closed; with SASL it works.
const KAZOO_ENFORCED: &str = r#"
import sys
from kazoo.client import KazooClient
port = sys.argv[1]
bob = KazooClient(hosts="127.0.0.1:" + port, timeout=5,
                  sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": "bobpw"})
bob.start(timeout=20)
print("bob exists", bob.exists("/") is not None)
bob.stop()
anon = KazooClient(hosts="127.0.0.1:" + port, timeout=5)
anon.start(timeout=20)
try:
    anon.exists_async("/").get(timeout=10)
    print("anon exists")
except Exception as e:
    print("anon", type(e).__name__)
anon.stop()
"#;

#[test]
fn kazoo_under_enforced_sasl_on_both_servers() {
    kazoo_present();
    let mut results = Vec::new();
    for target in BOTH {
        let (server, _jaas) = sasl_server(target, "sessionRequireClientSASLAuth=true\n");
        let (out, err) = python(KAZOO_ENFORCED, server.port);
        assert!(out.starts_with("bob exists True\nanon "), "kazoo against {target:?}: {out}{err}");
        assert!(!out.contains("anon exists"), "kazoo against {target:?}: {out}{err}");
        results.push(out);
    }
    assert_eq!(results[0], results[1], "kazoo sees the same on Apache and zkrs");
}

/// Apache's Java client (zkCli.sh's class) with `-Djava.security.auth.login.config` naming a
/// JAAS `Client` section: `whoami` shows `sasl: bob` on both servers.
#[test]
fn java_client_with_a_jaas_client_section_on_both_servers() {
    assert_apache_installed();
    for target in BOTH {
        let (server, jaas_dir) = sasl_server(target, "");
        let login =
            format!("-Djava.security.auth.login.config={}", jaas_dir.path().join("jaas.conf").display());
        let (stdout, stderr) = java_cli(&[login], &server.connect_string(), "whoami");
        let ids: Vec<&str> = stdout.lines().filter(|l| *l == "sasl: bob" || *l == "ip: 127.0.0.1").collect();
        assert_eq!(ids, ["sasl: bob", "ip: 127.0.0.1"], "zkCli whoami against {target:?}:\n{stdout}{stderr}");
    }
}

fn zkrs_start_error(cfg_extra: &str, jvm_flags: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={}\n{cfg_extra}",
            dir.path().join("d").display(),
            free_port()
        ),
    )
    .unwrap();
    let out = Command::new(zkrs_binary())
        .arg(&cfg)
        .env("SERVER_JVMFLAGS", jvm_flags)
        .env_remove("JVMFLAGS")
        .output()
        .unwrap();
    assert!(!out.status.success(), "zkrs-server started with {cfg_extra} / {jvm_flags}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn configuration_errors_name_the_key_file_and_line() {
    let err = zkrs_start_error("enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n", "");
    assert!(
        err.contains("enforce.auth.schemes (zoo.cfg line 5)") && err.contains("\"sasl\" is not available"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.conf");
    std::fs::write(
        &bad,
        "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_bob=;\n};\n",
    )
    .unwrap();
    let err = zkrs_start_error("", &format!("-Xmx1g -Djava.security.auth.login.config={}", bad.display()));
    assert!(err.contains(&format!("JAAS file {} line 3", bad.display())), "{err}");
    assert!(err.contains("in SERVER_JVMFLAGS"), "{err}");
    // A file that cannot be read is an error naming the zoo.cfg line; one without a Server
    // section is not (Apache then serves without client SASL, as zkrs does).
    let missing = dir.path().join("missing.conf");
    let err = zkrs_start_error(&format!("java.security.auth.login.config={}\n", missing.display()), "");
    assert!(err.contains("zoo.cfg line 4") && err.contains("missing.conf"), "{err}");
}
