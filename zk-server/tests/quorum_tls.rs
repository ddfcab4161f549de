//! TLS between ensemble members (`sslQuorum`, `ssl.quorum.*`, `portUnification`) on real
//! processes and loopback ports, with certificates made here by rcgen: an authority, one
//! certificate per server (naming localhost and 127.0.0.1, good for both ends of a connection), and
//! one from another authority. Three zkrs servers with sslQuorum elect, replicate and survive their
//! leader's death; a server with an untrusted certificate, or without sslQuorum, stays out while the
//! others serve; port unification lets TLS and plain members form one ensemble while it switches.
//! Where Apache ZooKeeper 3.8 is installed, it joins a zkrs ensemble over TLS.
#![allow(clippy::disallowed_methods)]

mod support;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair,
};
use std::path::PathBuf;
use std::time::Duration;
use support::ensemble::*;

/// An authority, and the certificates and keys it issued, as PEM files in one directory.
struct Pki {
    dir: tempfile::TempDir,
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

/// A server's key store (PKCS#8 key then certificate, Apache's PEM key store), for `sans`: it
/// serves both ends of a quorum connection, so it is good for server and client authentication.
fn key_store(ca: &CertifiedIssuer<'static, KeyPair>, cn: &str, sans: &[&str]) -> String {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("params");
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, ca).expect("sign");
    format!("{}{}", key.serialize_pem(), cert.pem())
}

impl Pki {
    /// `ca.pem`; `s1.pem` .. `s4.pem` from it (localhost, 127.0.0.1); `rogue.pem` from another
    /// authority; `noip.pem` from the right authority naming only another host.
    fn new() -> Pki {
        let dir = tempfile::Builder::new().prefix("zkrs-qtls-").tempdir().expect("dir");
        let pki = Pki { dir };
        let ca = authority("zkrs quorum CA");
        let other = authority("someone else's CA");
        pki.write("ca.pem", &ca.pem());
        for i in 1..=4 {
            pki.write(
                &format!("s{i}.pem"),
                &key_store(&ca, &format!("server{i}"), &["localhost", "127.0.0.1"]),
            );
        }
        pki.write("rogue.pem", &key_store(&other, "server3", &["localhost", "127.0.0.1"]));
        pki.write("noip.pem", &key_store(&ca, "server3", &["elsewhere.example"]));
        pki
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).expect("write");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// zoo.cfg lines for quorum TLS with key store `key_store`.
    fn lines(&self, key_store: &str) -> String {
        format!(
            "ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.type=PEM\n\
             ssl.quorum.trustStore.location={}\nssl.quorum.trustStore.type=PEM\n",
            self.path(key_store).display(),
            self.path("ca.pem").display()
        )
    }
}

/// An ensemble of `kinds` configured for quorum TLS, each member with its own certificate
/// (`s<id>.pem`): `sslQuorum=true` for the members at `dialling_tls`, and `portUnification=true`
/// for all when `unified`. Nothing is launched.
fn tls_ensemble(pki: &Pki, kinds: &[Kind], dialling_tls: &[usize], unified: bool) -> Ensemble {
    let e = Ensemble::configure(kinds);
    for i in 0..kinds.len() {
        let ssl = if dialling_tls.contains(&i) { "sslQuorum=true\n" } else { "" };
        let unification = if unified { "portUnification=true\n" } else { "" };
        append(&e, i, &format!("{unification}{ssl}{}", pki.lines(&format!("s{}.pem", i + 1))));
    }
    e
}

/// Appends `lines` to member `i`'s zoo.cfg.
fn append(e: &Ensemble, i: usize, lines: &str) {
    use std::io::Write;
    let mut f =
        std::fs::OpenOptions::new().append(true).open(e.members[i].dir.join("zoo.cfg")).expect("zoo.cfg");
    f.write_all(lines.as_bytes()).expect("zoo.cfg");
}

/// Replaces member `i`'s quorum TLS lines (everything from the first `sslQuorum`/`ssl.quorum`/
/// `portUnification` line on) with `lines`.
fn set_tls(e: &Ensemble, i: usize, lines: &str) {
    let path = e.members[i].dir.join("zoo.cfg");
    let text = std::fs::read_to_string(&path).expect("zoo.cfg");
    let kept: String = text
        .lines()
        .filter(|l| {
            !l.starts_with("sslQuorum") && !l.starts_with("ssl.quorum") && !l.starts_with("portUnification")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, format!("{kept}{lines}")).expect("zoo.cfg");
}

#[test]
fn three_servers_with_ssl_quorum_replicate_and_survive_the_leader() {
    let pki = Pki::new();
    let mut e = tls_ensemble(&pki, &[Kind::Zkrs; 3], &[0, 1, 2], false);
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", "2");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    e.write_and_read(followers[0], "/a", &[0, 1, 2]);

    // The quorum and election ports take TLS only: a plain connection gets nothing and is cut.
    let (quorum, election) = e.quorum_ports(leader);
    for port in [quorum, election] {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        use std::io::{Read, Write};
        // A learner's FOLLOWERINFO would begin so; the election handshake with 0xff.
        let _ = s.write_all(&[0, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        // rustls answers plain bytes with an alert record (0x15) at most, never a packet.
        assert!(n == 0 || buf[0] == 0x15, "a plain peer got {:?}", &buf[..n]);
    }

    let back = e.leader_dies_and_rejoins(leader, "/b");
    assert_eq!(back, ["a", "b", "zookeeper"], "{}", e.logs());
}

#[test]
fn a_server_without_a_trusted_certificate_or_without_tls_stays_out() {
    let pki = Pki::new();
    let mut e = tls_ensemble(&pki, &[Kind::Zkrs; 3], &[0, 1, 2], false);
    // Server 3 first shows a certificate from another authority.
    set_tls(&e, 2, &format!("sslQuorum=true\n{}", pki.lines("rogue.pem")));
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1]);
    e.write_and_read(leader, "/one", &[0, 1]);
    e.stays_out(2, Duration::from_secs(4));
    let log = e.log(0) + &e.log(1);
    assert!(log.contains("TLS handshake failed"), "{}", e.logs());

    // Then the right authority's certificate naming another host only (hostname verification).
    e.kill(2);
    set_tls(&e, 2, &format!("sslQuorum=true\n{}", pki.lines("noip.pem")));
    e.launch(2);
    e.stays_out(2, Duration::from_secs(4));
    assert!(e.log(0).contains("does not name 127.0.0.1") || e.log(1).contains("does not name 127.0.0.1"));

    // Then plain: the others take TLS only.
    e.kill(2);
    set_tls(&e, 2, "");
    e.launch(2);
    e.stays_out(2, Duration::from_secs(4));
    e.write_and_read(1 - leader, "/two", &[0, 1]);

    // With its own certificate it joins and catches up.
    e.kill(2);
    set_tls(&e, 2, &format!("sslQuorum=true\n{}", pki.lines("s3.pem")));
    e.launch(2);
    e.wait_for_leader();
    let mut c = e.client(2);
    assert_eq!(children(&mut c, "/"), ["one", "two", "zookeeper"], "{}", e.logs());
}

#[test]
fn port_unification_lets_tls_and_plain_members_switch_one_at_a_time() {
    let pki = Pki::new();
    // Mid-switch: servers 1 and 2 dial with TLS, server 3 still plain; all take both.
    let mut e = tls_ensemble(&pki, &[Kind::Zkrs; 3], &[0, 1], true);
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", "2");
    e.write_and_read(2, "/mixed", &[0, 1, 2]);

    // The leader restarted plain-dialling still leads or follows in the same ensemble.
    e.kill(leader);
    e.wait_for_leader_among(&(0..3).filter(|&i| i != leader).collect::<Vec<_>>());
    e.launch(leader);
    e.wait_for_leader();
    e.write_and_read(leader, "/after", &[0, 1, 2]);
}

#[test]
fn ssl_quorum_without_a_key_store_is_a_start_up_error_naming_the_key() {
    let e = Ensemble::configure(&[Kind::Zkrs; 3]);
    append(&e, 0, "sslQuorum=true\n");
    let out = std::process::Command::new(support::zkrs_binary())
        .arg(e.members[0].dir.join("zoo.cfg"))
        .output()
        .expect("run");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ssl.quorum.keyStore.location"), "{text}");
    let pki = Pki::new();
    set_tls(
        &e,
        0,
        &format!("sslQuorum=true\nssl.quorum.keyStore.location={}\n", pki.path("s1.jks").display()),
    );
    let out = std::process::Command::new(support::zkrs_binary())
        .arg(e.members[0].dir.join("zoo.cfg"))
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && text.contains("ssl.quorum.keyStore.location") && text.contains("line"),
        "{text}"
    );
}

#[test]
fn apache_and_zkrs_servers_form_one_ensemble_over_tls() {
    let pki = Pki::new();
    let mut e = tls_ensemble(&pki, &[Kind::Apache, Kind::Apache, Kind::Zkrs], &[0, 1, 2], false);
    // zkrs takes TLS only (no portUnification), so Apache's learners come in over TLS, and zkrs
    // follows Apache's leader over TLS.
    e.zkrs_leads_then_follows_apache(|e| {
        assert!(e.log(2).contains("TLS handshake complete with 127.0.0.1"), "{}", e.logs());
    });
}

#[test]
fn apache_and_zkrs_switch_to_tls_together_under_port_unification() {
    let pki = Pki::new();
    // Mid-switch: the zkrs servers dial with TLS, Apache's still plain; all take both.
    let mut e = tls_ensemble(&pki, &[Kind::Zkrs, Kind::Zkrs, Kind::Apache], &[0, 1], true);
    // Apache (id 3) leads: zkrs learners reach its unified quorum port with TLS.
    e.launch(2);
    e.launch(0);
    e.wait_mode(2, "leader");
    e.launch(1);
    assert_eq!(e.wait_for_leader(), 2, "{}", e.logs());
    e.write_and_read(0, "/one", &[0, 1, 2]);
    assert!(e.log(0).contains("TLS handshake complete with 127.0.0.1"), "{}", e.logs());

    // Apache dies and a zkrs server leads; Apache comes back and follows it, dialling plain.
    e.kill(2);
    let leader = e.wait_for_leader_among(&[0, 1]);
    e.write_and_read(leader, "/two", &[0, 1]);
    e.launch(2);
    e.wait_for_leader();
    assert_eq!(e.mode(2).as_deref(), Some("follower"), "{}", e.logs());
    let mut c = e.client(2);
    assert_eq!(children(&mut c, "/"), ["one", "two", "zookeeper"], "{}", e.logs());
}

#[test]
fn ssl_quorum_reload_cert_files_lets_a_server_in_once_its_certificate_is_replaced() {
    let pki = Pki::new();
    let mut e = tls_ensemble(&pki, &[Kind::Zkrs; 3], &[0, 1, 2], false);
    set_tls(&e, 2, &format!("sslQuorum=true\nsslQuorumReloadCertFiles=true\n{}", pki.lines("rogue.pem")));
    for i in 0..3 {
        e.launch(i);
    }
    e.wait_for_leader_among(&[0, 1]);
    e.stays_out(2, Duration::from_secs(3));
    // The file it reads is replaced with a certificate of the right authority: no restart.
    pki.write("rogue.pem", &std::fs::read_to_string(pki.path("s3.pem")).expect("s3.pem"));
    e.wait_for_leader();
    assert!(e.log(2).contains("quorum TLS key and trust stores read again"), "{}", e.logs());
}

#[test]
fn an_apache_server_with_an_untrusted_certificate_stays_out_of_a_zkrs_ensemble() {
    let pki = Pki::new();
    let mut e = tls_ensemble(&pki, &[Kind::Zkrs, Kind::Zkrs, Kind::Apache], &[0, 1, 2], false);
    set_tls(&e, 2, &format!("sslQuorum=true\n{}", pki.lines("rogue.pem")));
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1]);
    e.write_and_read(leader, "/zkrs-only", &[0, 1]);
    e.stays_out(2, Duration::from_secs(4));
    assert!((e.log(0) + &e.log(1)).contains("TLS handshake failed"), "{}", e.logs());
}
