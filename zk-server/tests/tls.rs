//! The TLS client port: certificates made here with rcgen (an authority, a server certificate for
//! localhost and 127.0.0.1, client certificates for alice, bob and an admin, and a stranger's from
//! another authority), a zkrs-server with `secureClientPort` and PEM stores, and clients of every
//! kind: zk-client, kazoo (`use_ssl=True`), Apache's Java client, `openssl s_client`. The kazoo and
//! Java scenarios run against Apache ZooKeeper too (its Netty connection factory), with the same
//! results. Checks `ssl.clientAuth`, the x509
//! ACL ids (Apache's subject format), `X509AuthenticationProvider.superUser`,
//! `client.portUnification`, `client.certReload` and start-up errors for unreadable stores.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::pki::Pki;
use support::*;
use zk_client::{Acl, Client, ClientTls, CreateMode, Error, Id};

/// Debian's python, which has python3-kazoo; the `python3` on PATH may be another one.
const PYTHON: &str = "/usr/bin/python3";

/// alice's subject as Apache's X509AuthenticationProvider names it (RFC 2253, most specific
/// first): the `x509` ACL id a certificate made with C=US, O=Example, OU=Eng, CN=alice gets.
const ALICE: &str = "CN=alice,OU=Eng,O=Example,C=US";
const BOB: &str = "CN=bob,OU=Eng,O=Example,C=US";
const ADMIN: &str = "CN=admin,O=Example";

impl Pki {
    /// zoo.cfg lines for a secure client port on `port` with these stores.
    fn server_lines(&self, port: u16, client_auth: &str) -> String {
        format!(
            "secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n\
             serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
             ssl.keyStore.location={}\nssl.keyStore.type=PEM\nssl.trustStore.location={}\n\
             ssl.trustStore.type=PEM\nssl.clientAuth={client_auth}\n",
            self.p("server.pem"),
            self.p("ca.pem")
        )
    }

    /// zk-client TLS trusting `ca.pem`, as `who` (`None`: no certificate).
    fn client_tls(&self, who: Option<&str>) -> ClientTls {
        let (crt, key) =
            who.map(|w| (self.path(&format!("{w}.crt")), self.path(&format!("{w}.key")))).unzip();
        let identity = crt.as_deref().zip(key.as_deref());
        ClientTls::from_pem_files(&self.path("ca.pem"), identity).unwrap()
    }
}

/// A zkrs server with a secure client port (and its plain port, which the harness waits on).
fn secure_server(pki: &Pki, client_auth: &str, extra: &str) -> (ServerProc, u16) {
    let port = free_port();
    let server = start(Target::Zkrs, &format!("{}{extra}", pki.server_lines(port, client_auth)));
    (server, port)
}

async fn tls_client(port: u16, tls: ClientTls) -> Result<Client, Error> {
    Client::builder(&format!("127.0.0.1:{port}"))
        .session_timeout(Duration::from_secs(4))
        .reconnect_delay_max(Duration::from_millis(50))
        .tls(tls)
        .connect()
        .await
}

fn x509(perms: i32, dn: &str) -> Acl {
    Acl { perms, id: Id { scheme: "x509".into(), id: dn.into() } }
}

#[tokio::test]
async fn zk_client_over_tls_with_x509_acls() {
    let pki = Pki::new();
    let admin_port = free_port();
    let (server, port) = secure_server(
        &pki,
        "need",
        &format!(
            "X509AuthenticationProvider.superUser={ADMIN}\nadmin.enableServer=true\nadmin.serverAddress=127.0.0.1\n\
             admin.serverPort={admin_port}\n"
        ),
    );
    let alice = tls_client(port, pki.client_tls(Some("alice"))).await.expect("alice over TLS");
    let bob = tls_client(port, pki.client_tls(Some("bob"))).await.expect("bob over TLS");

    alice.create("/alice", b"hers", &[x509(31, ALICE)], CreateMode::Persistent).await.unwrap();
    assert_eq!(&alice.get_data("/alice").await.unwrap().0[..], b"hers");
    assert_eq!(bob.get_data("/alice").await, Err(Error::NoAuth));
    assert_eq!(bob.set_data("/alice", b"mine", -1).await, Err(Error::NoAuth));
    // The ACL as stored: the subject string, exactly.
    assert_eq!(alice.get_acl("/alice").await.unwrap().0, vec![x509(31, ALICE)]);

    // `auth` expands to the certificate's id.
    let auth = Acl { perms: 31, id: Id { scheme: "auth".into(), id: String::new() } };
    bob.create("/bob", b"", &[auth], CreateMode::Persistent).await.unwrap();
    assert_eq!(bob.get_acl("/bob").await.unwrap().0, vec![x509(31, BOB)]);
    assert_eq!(alice.get_data("/bob").await, Err(Error::NoAuth));

    // A malformed name is not an x509 id.
    assert_eq!(
        alice.create("/bad", b"", &[x509(31, "alice")], CreateMode::Persistent).await,
        Err(Error::InvalidAcl)
    );

    // The super user's certificate opens everything.
    let admin = tls_client(port, pki.client_tls(Some("admin"))).await.expect("admin over TLS");
    assert_eq!(&admin.get_data("/alice").await.unwrap().0[..], b"hers");
    admin.set_data("/bob", b"admin was here", -1).await.unwrap();

    // A plain connection has no certificate, so no x509 id.
    let plain = Client::builder(&server.connect_string())
        .session_timeout(Duration::from_secs(4))
        .connect()
        .await
        .unwrap();
    assert_eq!(plain.get_data("/alice").await, Err(Error::NoAuth));
    // Four-letter words work over TLS too; the plain port still answers them.
    assert!(server.four_letter("srvr").contains("Zookeeper version"));
    // The AdminServer lists the TLS port's connections apart, as Apache lists its secure factory's.
    let cons = admin_get(admin_port, "/commands/connections");
    let count = |key: &str| cons[key].as_array().map_or(0, Vec::len);
    assert_eq!((count("connections"), count("secure_connections")), (1, 3), "{cons}");
    for c in [alice, bob, admin, plain] {
        c.close().await.unwrap();
    }
}

/// GET `path` from the AdminServer on 127.0.0.1:`port`: the JSON body.
fn admin_get(port: u16, path: &str) -> serde_json::Value {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn clients_without_a_trusted_certificate_are_refused_when_need() {
    let pki = Pki::new();
    let (server, port) = secure_server(&pki, "need", "");
    assert_eq!(tls_client(port, pki.client_tls(None)).await.err(), Some(Error::ConnectionLoss));
    // Same subject as alice, but from an authority the server does not trust.
    assert_eq!(tls_client(port, pki.client_tls(Some("stranger"))).await.err(), Some(Error::ConnectionLoss));
    // A client that does not trust the server's authority gives up too.
    let wrong_ca = ClientTls::from_pem_files(&pki.path("ca2.pem"), None).unwrap();
    assert_eq!(tls_client(port, wrong_ca).await.err(), Some(Error::ConnectionLoss));
    // And a plain client on the TLS port gets nothing.
    let plain =
        Client::builder(&format!("127.0.0.1:{port}")).session_timeout(Duration::from_secs(2)).connect().await;
    assert_eq!(plain.err(), Some(Error::ConnectionLoss));
    tls_client(port, pki.client_tls(Some("alice")))
        .await
        .expect("alice still gets in")
        .close()
        .await
        .unwrap();
    // Each failed handshake counts as a failed authentication, as in Apache.
    let mntr = server.four_letter("mntr");
    let failed: u64 = mntr
        .lines()
        .find_map(|l| l.strip_prefix("zk_auth_failed_count\t"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_auth_failed_count in {mntr}"));
    assert!(failed >= 3, "{mntr}");
}

#[tokio::test]
async fn want_serves_clients_without_certificates_and_port_unification_shares_the_plain_port() {
    let pki = Pki::new();
    // No secure port: TLS on the plain port, told apart by its first byte.
    let extra = format!(
        "client.portUnification=true\nssl.keyStore.location={}\nssl.trustStore.location={}\nssl.clientAuth=want\n",
        pki.p("server.pem"),
        pki.p("ca.pem")
    );
    let server = start(Target::Zkrs, &extra);
    let anonymous = tls_client(server.port, pki.client_tls(None)).await.expect("TLS without a certificate");
    let alice = tls_client(server.port, pki.client_tls(Some("alice"))).await.expect("alice over TLS");
    let plain = Client::builder(&server.connect_string())
        .session_timeout(Duration::from_secs(4))
        .connect()
        .await
        .unwrap();
    alice.create("/w", b"x", &[x509(31, ALICE)], CreateMode::Persistent).await.unwrap();
    assert_eq!(anonymous.get_data("/w").await, Err(Error::NoAuth));
    assert_eq!(plain.get_data("/w").await, Err(Error::NoAuth));
    assert_eq!(&alice.get_data("/w").await.unwrap().0[..], b"x");
    assert!(server.four_letter("ruok").contains("imok"));
    // A four-letter word in TLS on the shared port, with and without a certificate (want).
    let ca = ["-CAfile".to_string(), pki.p("ca.pem")];
    assert_eq!(s_client(server.port, &ca).0, "imok");
    // An untrusted certificate is still refused under want.
    assert_eq!(
        tls_client(server.port, pki.client_tls(Some("stranger"))).await.err(),
        Some(Error::ConnectionLoss)
    );
}

/// Runs `openssl s_client` against 127.0.0.1:`port`, sends `ruok` and returns what it printed.
fn s_client(port: u16, args: &[String]) -> (String, String) {
    let mut child = Command::new("openssl")
        .arg("s_client")
        .arg("-connect")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-quiet")
        .arg("-verify_return_error")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl is missing: install Debian's openssl (the README's test command does)");
    child.stdin.take().unwrap().write_all(b"ruok").unwrap();
    let out = wait_output(child, Duration::from_secs(20));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn openssl_s_client_handshakes() {
    let pki = Pki::new();
    let (_server, port) = secure_server(&pki, "need", "ssl.enabledProtocols=TLSv1.2\n");
    let ca = ["-CAfile".to_string(), pki.p("ca.pem")];
    let alice = ["-cert".to_string(), pki.p("alice.crt"), "-key".to_string(), pki.p("alice.key")];
    let with_cert: Vec<String> = ca.iter().chain(&alice).cloned().collect();
    let (out, err) = s_client(port, &with_cert);
    assert_eq!(out, "imok", "s_client with a certificate: {err}");
    // Only TLS 1.2 is enabled: a TLS 1.3-only client gets no answer.
    let (out, _) = s_client(port, &[with_cert.clone(), vec!["-tls1_3".into()]].concat());
    assert_eq!(out, "");
    let (out, err) = s_client(port, &[with_cert, vec!["-tls1_2".into()]].concat());
    assert_eq!(out, "imok", "{err}");
    // Without a certificate the server ends the handshake.
    let (out, _) = s_client(port, &ca);
    assert_eq!(out, "");
}

/// One scenario with kazoo (`use_ssl=True`) against a server with a TLS port: alice's x509 ACL,
/// bob refused, the super user let in, `auth` expanded to bob's certificate's id.
const KAZOO_SCENARIO: &str = r#"
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions
port, ca, d, alice_dn = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def connect(who):
    zk = KazooClient(hosts="127.0.0.1:" + port, use_ssl=True, verify_certs=True, ca=ca,
                     certfile=d + "/" + who + ".crt", keyfile=d + "/" + who + ".key", timeout=5)
    zk.start(timeout=20)
    return zk
alice, bob, admin = connect("alice"), connect("bob"), connect("admin")
alice.create("/k", b"v", acl=[ACL(Permissions.ALL, Id("x509", alice_dn))])
print("alice reads", alice.get("/k")[0].decode())
for name, zk in (("bob", bob), ("admin", admin)):
    try:
        print(name, "reads", zk.get("/k")[0].decode())
    except NoAuthError:
        print(name, "NOAUTH")
acl = alice.get_acls("/k")[0][0]
print("acl", acl.perms, acl.id.scheme, acl.id.id)
bob.create("/b", b"", acl=[ACL(Permissions.READ, Id("auth", ""))])
acl = bob.get_acls("/b")[0][0]
print("auth acl", acl.perms, acl.id.scheme, acl.id.id)
for zk in (alice, bob, admin):
    zk.stop()
"#;

#[test]
fn kazoo_over_tls_on_both_servers() {
    let probe = Command::new(PYTHON).args(["-c", "import kazoo"]).output().expect("run python3");
    assert!(
        probe.status.success(),
        "kazoo is missing: install Debian's python3-kazoo (the README's test command does)"
    );
    for target in BOTH {
        let pki = Pki::new();
        let port = free_port();
        let extra =
            format!("{}X509AuthenticationProvider.superUser={ADMIN}\n", pki.server_lines(port, "need"));
        let _server = start(target, &extra);
        let dir = pki.dir.path().display().to_string();
        let child = Command::new(PYTHON)
            .args(["-c", KAZOO_SCENARIO, &port.to_string(), &pki.p("ca.pem"), &dir, ALICE])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_output(child, Duration::from_secs(90));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("alice reads v\nbob NOAUTH\nadmin reads v\nacl 31 x509 {ALICE}\nauth acl 1 x509 {BOB}\n"),
            "kazoo against {target:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Apache's Java client (zkCli.sh's class) over TLS with alice's certificate: `whoami` lists the
/// same identities on both servers.
#[test]
fn java_client_over_tls_on_both_servers() {
    assert_apache_installed();
    for target in BOTH {
        let pki = Pki::new();
        pki.write(
            "alice.pem",
            &format!(
                "{}{}",
                std::fs::read_to_string(pki.path("alice.key")).unwrap(),
                std::fs::read_to_string(pki.path("alice.crt")).unwrap()
            ),
        );
        let port = free_port();
        let _server = start(target, &pki.server_lines(port, "need"));
        let jvm_args = [
            "-Dzookeeper.client.secure=true".to_string(),
            "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty".to_string(),
            format!("-Dzookeeper.ssl.keyStore.location={}", pki.p("alice.pem")),
            "-Dzookeeper.ssl.keyStore.type=PEM".to_string(),
            format!("-Dzookeeper.ssl.trustStore.location={}", pki.p("ca.pem")),
            "-Dzookeeper.ssl.trustStore.type=PEM".to_string(),
        ];
        let (stdout, stderr) = java_cli(&jvm_args, &format!("127.0.0.1:{port}"), "whoami");
        // whoami's lines are `scheme: id` after its header; the watcher's "SyncConnected" lines
        // may land among them (another thread prints them).
        let ids: Vec<&str> = stdout
            .lines()
            .skip_while(|l| *l != "Auth scheme: User")
            .skip(1)
            .filter(|l| {
                l.split_once(": ").is_some_and(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                })
            })
            .collect();
        assert_eq!(
            ids,
            [format!("x509: {ALICE}").as_str(), "ip: 127.0.0.1"],
            "zkCli whoami against {target:?}:\n{stdout}{stderr}"
        );
    }
}

#[tokio::test]
async fn certificates_are_read_again_when_their_files_change() {
    let pki = Pki::new();
    // The server starts with the certificate from the authority clients do not trust.
    std::fs::copy(pki.path("server.pem"), pki.path("good.pem")).unwrap();
    std::fs::copy(pki.path("server2.pem"), pki.path("server.pem")).unwrap();
    let (_server, port) = secure_server(&pki, "need", "client.certReload=true\n");
    assert_eq!(tls_client(port, pki.client_tls(Some("alice"))).await.err(), Some(Error::ConnectionLoss));
    // Swapped in place (a rename, as tools that replace certificates do).
    std::fs::copy(pki.path("good.pem"), pki.path("next.pem")).unwrap();
    std::fs::rename(pki.path("next.pem"), pki.path("server.pem")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match tls_client(port, pki.client_tls(Some("alice"))).await {
            Ok(c) => {
                c.close().await.unwrap();
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "still refused after the reload: {e:?}"),
        }
    }
}

/// A zkrs-server process started by hand, killed on drop.
struct Spawned(std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_server_with_only_the_tls_port() {
    let pki = Pki::new();
    let port = free_port();
    let data = pki.path("data");
    let cfg = format!(
        "tickTime=2000\ndataDir={}\nadmin.enableServer=false\n{}",
        data.display(),
        pki.server_lines(port, "need")
    );
    std::fs::write(pki.path("zoo.cfg"), cfg).unwrap();
    let log = std::fs::File::create(pki.path("server.log")).unwrap();
    let _server = Spawned(
        Command::new(zkrs_binary())
            .arg(pki.path("zoo.cfg"))
            .stderr(log)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let alice = loop {
        match tls_client(port, pki.client_tls(Some("alice"))).await {
            Ok(c) => break c,
            Err(e) => assert!(Instant::now() < deadline, "no TLS session: {e:?}"),
        }
    };
    alice.create("/only-tls", b"", &[x509(31, ALICE)], CreateMode::Persistent).await.unwrap();
    alice.close().await.unwrap();
}

/// `pki`'s server key store with its key encrypted (PBES2, AES-256-CBC) under `password`, by
/// openssl, as `ssl.keyStore.password` expects it: the file's path.
fn encrypted_key_store(pki: &Pki, password: &str) -> String {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl (the README's test command installs it)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let server = pki.p("server.pem");
    let pass = format!("pass:{password}");
    let key = run(&["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", &server, "-passout", &pass]);
    assert!(key.contains("ENCRYPTED PRIVATE KEY"));
    let cert = run(&["x509", "-in", &server]);
    pki.write("encrypted.pem", &format!("{key}{cert}"));
    pki.p("encrypted.pem")
}

#[tokio::test]
async fn encrypted_keys_with_their_password() {
    let pki = Pki::new();
    let store = encrypted_key_store(&pki, "s3cret");
    pki.write("password.txt", "s3cret\n");
    for how in [
        "ssl.keyStore.password=s3cret\n".to_string(),
        format!("ssl.keyStore.passwordPath={}\n", pki.p("password.txt")),
    ] {
        let port = free_port();
        let lines = pki.server_lines(port, "need").replace(&pki.p("server.pem"), &store);
        let _server = start(Target::Zkrs, &format!("{lines}{how}"));
        let alice =
            tls_client(port, pki.client_tls(Some("alice"))).await.unwrap_or_else(|e| panic!("{how}: {e:?}"));
        alice.close().await.unwrap();
    }
    let base = format!(
        "tickTime=2000\ndataDir={}\nclientPort={}\nsecureClientPort={}\nssl.keyStore.location={store}\n\
         ssl.trustStore.location={}\n",
        pki.path("data").display(),
        free_port(),
        free_port(),
        pki.p("ca.pem")
    );
    let out = refused(pki.dir.path(), &format!("{base}ssl.keyStore.password=n0tThat\n"));
    assert!(
        out.contains("line 7") && out.contains("ssl.keyStore.password") && out.contains("decrypt"),
        "{out}"
    );
    assert!(!out.contains("n0tThat"), "the password is never printed: {out}");
    let out = refused(pki.dir.path(), &base);
    assert!(out.contains("encrypted") && out.contains("ssl.keyStore.passwordPath"), "{out}");
}

#[test]
fn bad_stores_are_start_up_errors_naming_the_key_and_line() {
    let pki = Pki::new();
    let data = pki.path("data");
    let base = format!(
        "tickTime=2000\ndataDir={}\nclientPort={}\nsecureClientPort={}\n",
        data.display(),
        free_port(),
        free_port()
    );
    let out = refused(pki.dir.path(), &format!("{base}ssl.keyStore.location=/etc/zk/keystore.jks\n"));
    assert!(out.contains("line 5") && out.contains("ssl.keyStore.location") && out.contains("PEM"), "{out}");
    let out = refused(
        pki.dir.path(),
        &format!("{base}ssl.keyStore.location={}\nssl.keyStore.type=PKCS12\n", pki.p("server.pem")),
    );
    assert!(out.contains("line 6") && out.contains("ssl.keyStore.type"), "{out}");
    let out = refused(
        pki.dir.path(),
        &format!(
            "{base}ssl.keyStore.location={}\nssl.trustStore.location={}\n",
            pki.p("nothere.pem"),
            pki.p("ca.pem")
        ),
    );
    assert!(out.contains("line 5") && out.contains("nothere.pem"), "{out}");
    // A certificate file without its key.
    let out = refused(
        pki.dir.path(),
        &format!(
            "{base}ssl.keyStore.location={}\nssl.trustStore.location={}\n",
            pki.p("ca.pem"),
            pki.p("ca.pem")
        ),
    );
    assert!(out.contains("ssl.keyStore.location") && out.contains("private key"), "{out}");
    // need (the default) without a trust store.
    let out = refused(pki.dir.path(), &format!("{base}ssl.keyStore.location={}\n", pki.p("server.pem")));
    assert!(out.contains("ssl.trustStore.location"), "{out}");
}
