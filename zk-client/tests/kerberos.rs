//! zk-client and zkrs-cli with SASL GSSAPI against a real MIT KDC (the shared throw-away realm of
//! `support/kdc.rs`), on Apache ZooKeeper 3.8 and zkrs-server, both configured with a JAAS
//! `Server` section using `Krb5LoginModule`: the authenticated ids (`whoami`), a node only alice
//! may read, logins from a keytab and from a ticket cache, and the failures (no ticket, a keytab
//! without the principal's key, an unknown service principal, a ticket for another service that
//! the server refuses) ending the session AUTHFAILED with their reasons while the server goes on
//! serving alice. Built only with the `kerberos` and `cli` features (test.sh
//! turns them on).
//!
//! One test: the system's Kerberos library reads its configuration from `KRB5_CONFIG`, which the
//! test sets for its process before any thread of its own runs.
// Real servers, processes and clocks.
#![allow(clippy::disallowed_methods)]
#[path = "support/kdc.rs"]
mod kdc;
mod support;

use kdc::{Kdc, REALM};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Target, TestServer};
use zk_client::gssapi::{Credentials, Kerberos, KerberosOptions};
use zk_client::{Acl, Client, ConnectFailure, CreateMode, Error, Id};

const PROVIDER: &str = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";

/// Every permission for alice alone.
fn alice_only() -> Vec<Acl> {
    vec![Acl { perms: zk_proto::perms::ALL, id: Id { scheme: "sasl".into(), id: format!("alice@{REALM}") } }]
}

/// A session authenticated by `opts`, or the error `connect_explained` gave.
async fn connect(server: &TestServer, opts: KerberosOptions) -> Result<Client, ConnectFailure> {
    Client::builder(&server.addr)
        .session_timeout(Duration::from_secs(10))
        .sasl_gssapi(Kerberos::new(opts).into_config())
        .connect_explained()
        .await
}

/// The `scheme: id` pairs a session has, sorted.
async fn ids(c: &Client) -> Vec<String> {
    let mut v: Vec<String> =
        c.who_am_i().await.unwrap().into_iter().map(|i| format!("{}: {}", i.auth_scheme, i.user)).collect();
    v.sort();
    v
}

fn keytab(kdc: &Kdc, principal: &str, file: &str) -> KerberosOptions {
    KerberosOptions::new(Credentials::Keytab {
        principal: principal.into(),
        keytab: kdc.path(&format!("{file}.keytab")),
    })
}

/// What one server shows: alice's ids (keytab), alice's read of her node (ticket cache), bob's
/// ids and his refused read, and the four failures' errors.
#[derive(Debug, PartialEq)]
struct Seen {
    alice: Vec<String>,
    alice_from_cache: Vec<String>,
    bob: Vec<String>,
    bob_read: Result<Vec<u8>, Error>,
    failures: Vec<Error>,
}

/// The failure's error, its reason checked to contain `expected`.
fn refused(r: Result<Client, ConnectFailure>, expected: &str) -> Error {
    let f = r.expect_err("refused");
    let reason = f.reason.clone().unwrap_or_default();
    assert!(reason.contains(expected), "{f}: expected {expected:?}");
    f.error
}

async fn scenario(kdc: &Kdc, server: &TestServer) -> Seen {
    let target = server.target;
    let alice = connect(server, keytab(kdc, "alice", "alice")).await.expect("alice with her keytab");
    let alice_ids = ids(&alice).await;
    alice.create("/alice", b"secret", &alice_only(), CreateMode::Persistent).await.unwrap();
    alice.close().await.unwrap();

    let cache = kdc.path("alice.ccache");
    let from_cache = KerberosOptions::new(Credentials::TicketCache {
        cache: format!("FILE:{}", cache.display()),
        principal: None,
    });
    let alice2 = connect(server, from_cache).await.expect("alice from her ticket cache");
    let alice_from_cache = ids(&alice2).await;
    assert_eq!(&alice2.get_data("/alice").await.unwrap().0[..], b"secret", "{target:?}");
    alice2.close().await.unwrap();

    let bob = connect(server, keytab(kdc, "bob", "bob")).await.expect("bob with his keytab");
    let bob_ids = ids(&bob).await;
    let bob_read = bob.get_data("/alice").await.map(|(d, _)| d.to_vec());
    eprintln!("{target:?}: alice {alice_ids:?}, bob {bob_ids:?}, bob reads /alice: {bob_read:?}");
    bob.close().await.unwrap();

    let mut failures = Vec::new();
    // No ticket: an empty ticket cache.
    let started = Instant::now();
    std::fs::write(kdc.path("empty.ccache"), b"").unwrap();
    let empty = KerberosOptions::new(Credentials::TicketCache {
        cache: format!("FILE:{}", kdc.path("empty.ccache").display()),
        principal: None,
    });
    failures.push(refused(connect(server, empty).await, "no credentials in ticket cache"));
    // A keytab without the principal's key (bob's name, alice's keytab).
    failures.push(refused(connect(server, keytab(kdc, "bob", "alice")).await, "bob"));
    // A service principal the KDC does not know.
    let mut unknown = keytab(kdc, "alice", "alice");
    unknown.server_principal = Some(format!("zookeeper/nowhere.invalid@{REALM}"));
    failures.push(refused(connect(server, unknown).await, "not found in Kerberos database"));
    // A ticket for another service of the realm: the server cannot take it and refuses.
    let mut other = keytab(kdc, "alice", "alice");
    other.server_principal = Some(format!("zkcli/localhost@{REALM}"));
    failures.push(refused(connect(server, other).await, "the server answered AuthFailed"));
    assert!(started.elapsed() < Duration::from_secs(20), "{target:?}: failures took {:?}", started.elapsed());

    // The server still serves alice.
    let again = connect(server, keytab(kdc, "alice", "alice")).await.expect("alice after the failures");
    assert_eq!(ids(&again).await, alice_ids, "{target:?}");
    again.close().await.unwrap();
    Seen { alice: alice_ids, alice_from_cache, bob: bob_ids, bob_read, failures }
}

/// A value of the server's `mntr` answer.
fn mntr(server: &TestServer, key: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"mntr").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('\t').map(str::to_string)).unwrap_or_default()
}

/// zkrs-cli with a JAAS `Client` section (`Krb5LoginModule`, alice's keytab) in CLIENT_JVMFLAGS,
/// the realm's krb5.conf named by `-Djava.security.krb5.conf`: its `whoami` output.
fn cli_whoami(kdc: &Kdc, server: &TestServer, principal: &str, file: &str) -> String {
    let jaas = kdc.jaas(
        &format!("cli-{file}.jaas"),
        &kdc.path("server.keytab"),
        principal,
        &kdc.path(&format!("{file}.keytab")),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_zkrs-cli"))
        .env_remove("JVMFLAGS")
        .env_remove("KRB5_CONFIG")
        .env("CLIENT_JVMFLAGS", kdc.jvm_flags(&jaas))
        .args(["-server", &server.addr, "-timeout", "5000", "whoami"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn gssapi_clients_on_both_servers() {
    let Some(kdc) = kdc::realm() else { return };
    let started = Instant::now();
    // Before the runtime's threads: the library's configuration, and a default ticket cache that
    // is not the user's.
    std::env::set_var("KRB5_CONFIG", kdc.path("krb5.conf"));
    std::env::set_var("KRB5CCNAME", format!("FILE:{}", kdc.path("default.ccache").display()));
    let (ok, out) = kdc.kinit(&kdc.path("alice.ccache"), "alice", "alice", None);
    assert!(ok, "kinit alice: {out}");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server_jaas = kdc.jaas("server.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
    let mut seen = Vec::new();
    for target in [Target::Apache, Target::Zkrs] {
        let server = TestServer::start_with_jvm_flags(target, PROVIDER, &kdc.jvm_flags(&server_jaas));
        let s = rt.block_on(scenario(&kdc, &server));
        let who = |s: &str| vec!["ip: 127.0.0.1".to_string(), format!("sasl: {s}@{REALM}")];
        assert_eq!(s.alice, who("alice"), "{target:?}");
        assert_eq!(s.alice_from_cache, who("alice"), "{target:?}");
        assert_eq!(s.bob, who("bob"), "{target:?}");
        assert_eq!(s.bob_read, Err(Error::NoAuth), "{target:?}");
        assert_eq!(s.failures, [Error::AuthFailed; 4], "{target:?}");
        // Only the refused ticket reached the server: zkrs counts it (Apache 3.8 counts only
        // failed TLS handshakes there).
        let counted = if target == Target::Zkrs { "1" } else { "0" };
        assert_eq!(mntr(&server, "zk_auth_failed_count"), counted, "{target:?}");
        let cli = cli_whoami(&kdc, &server, &format!("alice@{REALM}"), "alice");
        assert!(
            cli.contains(&format!("sasl: alice@{REALM}")) && cli.contains("ip: 127.0.0.1"),
            "{target:?}: {cli}"
        );
        let cli = cli_whoami(&kdc, &server, "bob", "alice");
        assert!(
            cli.contains("AuthFailed")
                && cli.contains("SASL authentication failed")
                && !cli.contains("sasl: bob"),
            "{target:?}: wrong keytab: {cli}"
        );
        seen.push(s);
    }
    assert_eq!(seen[0], seen[1], "Apache and zkrs alike");
    eprintln!("zk-client GSSAPI scenarios: {:?}", started.elapsed());
}
