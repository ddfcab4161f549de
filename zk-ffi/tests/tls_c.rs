//! zookeeper_init_ssl from C: a program built against Apache's header, run on libzkrs, talks to a
//! zkrs-server's TLS client port with client certificates made here (rcgen); the certificates'
//! subjects are the x509 ACL ids the server enforces.
mod support;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair};
use std::net::TcpListener;
use std::time::Duration;
use support::*;

/// A certificate for `cn` (with O=Example), signed by `ca`: (certificate PEM, PKCS#8 key PEM).
fn issue(ca: &CertifiedIssuer<'static, KeyPair>, cn: &str, sans: Vec<String>) -> (String, String) {
    let mut params = CertificateParams::new(sans).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::OrganizationName, "Example");
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    (params.signed_by(&key, ca).unwrap().pem(), key.serialize_pem())
}

#[test]
fn zookeeper_init_ssl_with_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    // The server's certificate names localhost only: the C client does not check names, so
    // reaching it as 127.0.0.1 works, as with Apache's C client.
    let (cert, key) = issue(&ca, "server", vec!["localhost".into()]);
    std::fs::write(path("server.pem"), format!("{key}{cert}")).unwrap();
    for who in ["alice", "bob"] {
        let (cert, key) = issue(&ca, who, vec![]);
        std::fs::write(path(&format!("{who}.crt")), cert).unwrap();
        std::fs::write(path(&format!("{who}.key")), key).unwrap();
    }
    let secure = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _server = start_with(
        Target::Zkrs,
        &format!(
            "secureClientPort={secure}\nsecureClientPortAddress=127.0.0.1\nssl.keyStore.location={}\n\
             ssl.trustStore.location={}\n",
            path("server.pem"),
            path("ca.pem")
        ),
    );
    // bob's key is encrypted: the certificate string's passwd opens it.
    let out = std::process::Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", &path("bob.key"), "-passout", "pass:bobpw"])
        .output()
        .expect("openssl (the README's test command installs it)");
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ENCRYPTED PRIVATE KEY"));
    std::fs::write(path("bob.key"), &out.stdout).unwrap();
    let spec = |who: &str, passwd: &str| {
        format!("{},{},{},{passwd}", path("ca.pem"), path(&format!("{who}.crt")), path(&format!("{who}.key")))
    };
    let exe = compile_c("tls_test.c", true);
    let host = format!("127.0.0.1:{secure}");
    let (ok, out) = run_on_libzkrs(
        &exe,
        &[&host, &spec("alice", ""), &spec("bob", "bobpw"), "CN=alice,O=Example"],
        None,
        Duration::from_secs(60),
    );
    assert!(ok && out.contains("DONE"), "tls_test:\n{out}");
}
