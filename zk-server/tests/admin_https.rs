//! HTTPS on the AdminServer (`admin.forceHttps`, `admin.portUnification`, `admin.needClientAuth`)
//! with the `ssl.quorum.*` key and trust stores, as Apache's JettyAdminServer takes them;
//! certificates made here with rcgen. A rustls client (and curl, when the machine has it) asks
//! for `ruok` over HTTPS, of zkrs and of Apache 3.8's own AdminServer (Debian's, Jetty 9.4); plain HTTP is refused or served as the keys say; a stalled handshake
//! holds up no other connection; bad stores are start-up errors naming the key and line.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};
use support::http;
use support::pki::Pki;
use support::*;

/// What an HTTP exchange gave: the status (0 when no HTTP response came), the head (lower-cased)
/// and the body.
type Answer = (u16, String, String);

fn tuple(a: http::Answer) -> Answer {
    let body = a.text();
    (a.status, a.head, body)
}

fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}

/// `GET path` in plain HTTP. A connection the server drops gives status 0.
fn plain_get(addr: SocketAddr, path: &str) -> Answer {
    tuple(http::exchange(addr, request(path).as_bytes()))
}

/// `GET path` over TLS, trusting the authorities in `ca` and showing `who`'s certificate
/// (`alice`, `stranger`: the `.crt`/`.key` files of `pki`), or none.
///
/// Errors: the handshake failed or no HTTP response came.
fn https_get(pki: &Pki, addr: SocketAddr, path: &str, ca: &str, who: Option<&str>) -> Result<Answer, String> {
    http::tls_exchange(http::tls_config(pki, ca, who), addr, request(path).as_bytes()).map(tuple)
}

/// zoo.cfg lines for the AdminServer on `port` with the `ssl.quorum.*` stores of `pki`, and `keys`.
fn admin_lines(pki: &Pki, port: u16, keys: &str) -> String {
    format!(
        "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n\
         ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.type=PEM\n\
         ssl.quorum.trustStore.location={}\nssl.quorum.trustStore.type=PEM\n{keys}",
        pki.p("server.pem"),
        pki.p("ca.pem")
    )
}

fn admin_server(pki: &Pki, keys: &str) -> (ServerProc, SocketAddr) {
    let port = free_port();
    let server = start(Target::Zkrs, &admin_lines(pki, port, keys));
    (server, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// `ruok`'s JSON and the HSTS header Jetty's SecureRequestCustomizer adds on TLS.
fn assert_ruok_over_tls(answer: &Answer) {
    let (status, head, body) = answer;
    assert_eq!(*status, 200, "{head}\n{body}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(head.contains("strict-transport-security: max-age=86400; includesubdomains"), "{head}");
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v, serde_json::json!({"command": "ruok", "error": null}));
}

#[test]
fn force_https_serves_tls_only() {
    let pki = Pki::new();
    // forceHttps alone, and with portUnification too (forceHttps wins, as in Apache).
    for keys in ["admin.forceHttps=true\n", "admin.portUnification=true\nadmin.forceHttps=true\n"] {
        let metrics_port = free_port();
        let (server, addr) = admin_server(
            &pki,
            &format!(
                "{keys}metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
                 metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={metrics_port}\n"
            ),
        );
        let answer =
            https_get(&pki, addr, "/commands/ruok", "ca.pem", None).unwrap_or_else(|e| panic!("{keys}: {e}"));
        assert_ruok_over_tls(&answer);
        let (status, _, body) = https_get(&pki, addr, "/ready", "ca.pem", None).unwrap();
        assert_eq!(status, 200, "{body}");
        // The server's certificate is the key store's: a client trusting another authority refuses it.
        let e = https_get(&pki, addr, "/commands/ruok", "ca2.pem", None).unwrap_err();
        assert!(e.contains("handshake") || e.contains("certificate"), "{e}");
        // Plain HTTP gets no HTTP answer.
        let (status, head, _) = plain_get(addr, "/commands/ruok");
        assert_eq!(status, 0, "{keys}: plain HTTP answered: {head}");
        // The Prometheus endpoint stays plain.
        let (status, _, body) = plain_get(SocketAddr::from(([127, 0, 0, 1], metrics_port)), "/metrics");
        assert_eq!(status, 200, "{body}");
        assert!(server_log(server.dir.path()).contains("AdminServer on https://"));
    }
}

/// What a client sees of an AdminServer with `keys`: `ruok` over TLS (status, whether HSTS is
/// sent, the JSON) and over plain HTTP (status, 0 for no HTTP answer), and then `mntr`'s
/// `insecure_admin_count` line.
fn observed(target: Target, pki: &Pki, keys: &str) -> (u16, bool, serde_json::Value, u16, String) {
    let port = free_port();
    let server = start(target, &admin_lines(pki, port, keys));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // Apache's AdminServer can start after its client port answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (status, head, body) = loop {
        match https_get(pki, addr, "/commands/ruok", "ca.pem", None) {
            Ok(a) => break a,
            Err(e) => assert!(Instant::now() < deadline, "{target:?} {keys}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{target:?}: {e}: {body}"));
    let hsts = head.contains("strict-transport-security: max-age=86400; includesubdomains");
    let plain = plain_get(addr, "/commands/ruok").0;
    let mntr = server.four_letter("mntr");
    let insecure =
        mntr.lines().find(|l| l.starts_with("zk_insecure_admin_count")).unwrap_or("none").to_string();
    (status, hsts, json, plain, insecure)
}

#[test]
fn https_as_apaches_admin_server_serves_it() {
    let pki = Pki::new();
    for keys in ["admin.forceHttps=true\n", "admin.portUnification=true\n"] {
        let apache = observed(Target::Apache, &pki, keys);
        let zkrs = observed(Target::Zkrs, &pki, keys);
        assert_eq!(zkrs, apache, "{keys}");
        assert_eq!(zkrs.0, 200, "{keys}");
    }
}

#[test]
fn curl_with_the_authority_gets_ruok() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("curl is not installed: skipped");
        return;
    }
    let pki = Pki::new();
    let (_server, addr) = admin_server(&pki, "admin.forceHttps=true\n");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-D", "-", "--cacert", &pki.p("ca.pem")])
        .arg(format!("https://127.0.0.1:{}/commands/ruok", addr.port()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"command\" : \"ruok\""), "{text}");
    // And without the authority curl refuses the server.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .arg(format!("https://127.0.0.1:{}/commands/ruok", addr.port()))
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn port_unification_serves_both_on_one_port() {
    let pki = Pki::new();
    let (server, addr) = admin_server(&pki, "admin.portUnification=true\n");
    assert_ruok_over_tls(&https_get(&pki, addr, "/commands/ruok", "ca.pem", None).unwrap());
    let (status, head, body) = plain_get(addr, "/commands/ruok");
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(!head.contains("strict-transport-security"), "{head}");
    assert!(body.contains("\"command\" : \"ruok\""), "{body}");
    // Both again, on fresh connections, in the other order.
    assert_eq!(plain_get(addr, "/commands/conf").0, 200);
    assert_eq!(https_get(&pki, addr, "/commands/conf", "ca.pem", None).unwrap().0, 200);
    assert!(server_log(server.dir.path()).contains("AdminServer on http and https://"));
    // Each plain connection counts in Apache's insecure_admin_count; TLS ones do not.
    let mntr = server.four_letter("mntr");
    assert!(mntr.contains("zk_insecure_admin_count\t2\n"), "{mntr}");
}

#[test]
fn need_client_auth_requires_a_trusted_certificate() {
    let pki = Pki::new();
    // Without admin.needClientAuth no certificate is asked for: none, or one the trust store
    // does not vouch for, is served alike.
    let (_server, addr) = admin_server(&pki, "admin.forceHttps=true\n");
    assert_ruok_over_tls(&https_get(&pki, addr, "/commands/ruok", "ca.pem", Some("stranger")).unwrap());

    let (_server, addr) = admin_server(&pki, "admin.forceHttps=true\nadmin.needClientAuth=true\n");
    assert_ruok_over_tls(&https_get(&pki, addr, "/commands/ruok", "ca.pem", Some("alice")).unwrap());
    let e = https_get(&pki, addr, "/commands/ruok", "ca.pem", None).unwrap_err();
    assert!(!e.is_empty());
    let e = https_get(&pki, addr, "/commands/ruok", "ca.pem", Some("stranger")).unwrap_err();
    assert!(!e.is_empty());

    // With port unification, plain HTTP has no certificate to show and is still served, as in
    // Apache (its unified port hands plain connections straight to HTTP).
    let (_server, addr) = admin_server(&pki, "admin.portUnification=true\nadmin.needClientAuth=true\n");
    assert!(https_get(&pki, addr, "/commands/ruok", "ca.pem", None).is_err());
    assert_ruok_over_tls(&https_get(&pki, addr, "/commands/ruok", "ca.pem", Some("alice")).unwrap());
    assert_eq!(plain_get(addr, "/commands/ruok").0, 200);
}

#[test]
fn stalled_handshakes_hold_up_no_one_and_time_out() {
    let pki = Pki::new();
    let (_server, addr) = admin_server(&pki, "admin.portUnification=true\nadmin.idleTimeout=4000\n");
    // One connection sends nothing, one the first byte of a TLS record and no more, one a
    // ClientHello's record header.
    let mut silent = TcpStream::connect(addr).unwrap();
    let mut one_byte = TcpStream::connect(addr).unwrap();
    one_byte.write_all(&[0x16]).unwrap();
    let mut header = TcpStream::connect(addr).unwrap();
    header.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    assert_ruok_over_tls(&https_get(&pki, addr, "/commands/ruok", "ca.pem", None).unwrap());
    assert_eq!(plain_get(addr, "/commands/ruok").0, 200);
    assert!(t.elapsed() < Duration::from_secs(3), "served after {:?}", t.elapsed());
    // Each stalled one is closed once admin.idleTimeout has passed.
    for s in [&mut silent, &mut one_byte, &mut header] {
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = [0u8; 64];
        let t = Instant::now();
        let ended = matches!(s.read(&mut buf), Ok(0) | Err(_)) && t.elapsed() < Duration::from_secs(14);
        assert!(ended, "a stalled connection was not closed");
    }
    // Garbage after a TLS record's first byte fails the handshake and the port still serves.
    let mut junk = TcpStream::connect(addr).unwrap();
    junk.write_all(&[0x16; 512]).unwrap();
    assert_eq!(https_get(&pki, addr, "/commands/ruok", "ca.pem", None).unwrap().0, 200);
}

#[test]
fn https_stores_are_start_up_errors_naming_the_key_and_line() {
    let pki = Pki::new();
    let base = format!(
        "tickTime=2000\ndataDir={}\nclientPort={}\nadmin.serverPort={}\n",
        pki.path("data").display(),
        free_port(),
        free_port()
    );
    // No key store: its key, and the admin key with its line.
    let out = refused(pki.dir.path(), &format!("{base}admin.forceHttps=true\n"));
    assert!(
        out.contains("ssl.quorum.keyStore.location") && out.contains("admin.forceHttps at line 5"),
        "{out}"
    );
    let out = refused(
        pki.dir.path(),
        &format!("{base}admin.portUnification=true\nssl.quorum.keyStore.location={}\n", pki.p("server.pem")),
    );
    assert!(
        out.contains("ssl.quorum.trustStore.location") && out.contains("admin.portUnification at line 5"),
        "{out}"
    );
    // Java's store types, files that are not there or hold the wrong thing: the key and its line.
    let (ca, server, alice_key) = (pki.p("ca.pem"), pki.p("server.pem"), pki.p("alice.key"));
    for (key_store, trust_store, says) in [
        ("/etc/zk/keystore.jks", ca.as_str(), ["line 6", "ssl.quorum.keyStore.location", "PEM"]),
        (&pki.p("nothere.pem"), ca.as_str(), ["line 6", "ssl.quorum.keyStore.location", "nothere.pem"]),
        (server.as_str(), alice_key.as_str(), ["line 7", "ssl.quorum.trustStore.location", "alice.key"]),
    ] {
        let out = refused(
            pki.dir.path(),
            &format!(
                "{base}admin.forceHttps=true\nssl.quorum.keyStore.location={key_store}\n\
                 ssl.quorum.trustStore.location={trust_store}\n"
            ),
        );
        assert!(says.iter().all(|s| out.contains(s)), "{says:?}: {out}");
    }
    // A disabled AdminServer needs none of it.
    let server = start(Target::Zkrs, "admin.enableServer=false\nadmin.forceHttps=true\n");
    drop(server);
}

#[test]
fn stores_are_read_again_with_ssl_quorum_reload_cert_files() {
    let pki = Pki::new();
    let (_server, addr) = admin_server(&pki, "admin.forceHttps=true\nsslQuorumReloadCertFiles=true\n");
    assert_ruok_over_tls(&https_get(&pki, addr, "/commands/ruok", "ca.pem", None).unwrap());
    // The other authority's server certificate replaces the key store.
    std::fs::copy(pki.path("server2.pem"), pki.path("server.pem")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while https_get(&pki, addr, "/commands/ruok", "ca2.pem", None).is_err() {
        assert!(Instant::now() < deadline, "the new key store was not taken up");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(https_get(&pki, addr, "/commands/ruok", "ca.pem", None).is_err());
}

/// Apache 3.9's `snapshot` over HTTPS with `Authorization: x509`: the id is the client
/// certificate's subject, which must hold ALL on `/`; the scheme exists only with the x509
/// provider (TLS on the client port, or the provider named in zoo.cfg).
#[test]
fn snapshot_takes_the_client_certificate_as_its_x509_id() {
    use zk_proto::{perms, Acl, ErrorCode, Id, Request, SetAclRequest};
    let pki = Pki::new();
    let x509 = |cn: &str, perms: i32| Acl {
        perms,
        id: Id { scheme: "x509".into(), id: format!("CN={cn},OU=Eng,O=Example,C=US") },
    };
    let keys = "admin.forceHttps=true\nadmin.needClientAuth=true\n";
    let provider = "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n";
    for with_provider in [true, false] {
        let (server, addr) =
            admin_server(&pki, &format!("{keys}{}", if with_provider { provider } else { "" }));
        // Without the provider an x509 ACL is invalid: the root stays world:anyone ALL (which
        // proves nothing to this command), and x509 proves no id.
        if with_provider {
            let mut c = support::client::RawClient::connect(server.addr(), 30_000);
            let acl = vec![x509("alice", perms::ALL), x509("bob", perms::READ)];
            let r = c.call(Request::SetAcl(SetAclRequest { path: "/".into(), acl, version: -1 }));
            assert_eq!(r.err(), ErrorCode::Ok);
        }
        let snapshot = |who: &str, auth: &str| {
            let raw =
                http::request("GET", "/commands/snapshot", &[("Authorization", auth.to_string())], None);
            http::tls_exchange(http::tls_config(&pki, "ca.pem", Some(who)), addr, &raw).unwrap()
        };
        if !with_provider {
            assert_eq!(snapshot("alice", "x509").status, 401, "no x509 provider: nothing proved");
            continue;
        }
        let a = snapshot("alice", "x509");
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(a.header("snapshot_size").and_then(|s| s.parse().ok()), Some(a.body.len()));
        assert_eq!(snapshot("bob", "x509").status, 403, "READ alone");
        assert_eq!(snapshot("alice", "ip").status, 403, "the certificate counts only under x509");
    }
}
