//! zkrs-cli over TLS, configured as Apache's Java client is: a `-client-configuration` file or
//! `-D` flags in CLIENT_JVMFLAGS with `zookeeper.client.secure=true` and PEM stores, against a
//! zkrs-server's TLS port (certificates made here with rcgen). `whoami` shows the certificate's
//! x509 id.
#[macro_use]
mod support;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair};
use std::process::Command;
use support::{free_port, Target, TestServer};

#[test]
fn zkrs_cli_with_the_java_clients_tls_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    for (name, cn, sans) in [("server", "server", vec!["127.0.0.1".to_string()]), ("alice", "alice", vec![])]
    {
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::OrganizationName, "Example");
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        // Apache's PEM key store: the key and the chain in one file.
        std::fs::write(path(&format!("{name}.pem")), format!("{}{}", key.serialize_pem(), cert.pem()))
            .unwrap();
    }
    let secure = free_port();
    let _server = TestServer::start_with(
        Target::Zkrs,
        &format!(
            "secureClientPort={secure}\nsecureClientPortAddress=127.0.0.1\nssl.keyStore.location={}\n\
             ssl.trustStore.location={}\n",
            path("server.pem"),
            path("ca.pem")
        ),
    );
    let settings = format!(
        "zookeeper.client.secure=true\nzookeeper.ssl.keyStore.location={}\nzookeeper.ssl.keyStore.type=PEM\n\
         zookeeper.ssl.trustStore.location={}\nzookeeper.ssl.trustStore.type=PEM\n",
        path("alice.pem"),
        path("ca.pem")
    );
    std::fs::write(path("client.properties"), &settings).unwrap();
    let server = format!("127.0.0.1:{secure}");
    let cli = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_zkrs-cli"));
        c.env_remove("CLIENT_JVMFLAGS").env_remove("JVMFLAGS");
        c
    };
    let out = cli()
        .args(["-server", &server, "-client-configuration", &path("client.properties"), "whoami"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("x509: CN=alice,O=Example"), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // The same settings as zkCli.sh users pass them to the JVM.
    let flags: Vec<String> = settings.lines().map(|l| format!("-D{l}")).collect();
    let out =
        cli().env("CLIENT_JVMFLAGS", flags.join(" ")).args(["-server", &server, "whoami"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("x509: CN=alice,O=Example"));
    // The server's certificate names 127.0.0.1 only: as localhost it is refused, unless host
    // names are not checked (zookeeper.ssl.hostnameVerification=false).
    let by_name = format!("localhost:{secure}");
    let whoami = |props: &str| {
        let out = cli()
            .args(["-server", &by_name, "-timeout", "3000", "-client-configuration", props, "whoami"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("x509: CN=alice,O=Example")
    };
    assert!(!whoami(&path("client.properties")));
    std::fs::write(
        path("any-name.properties"),
        format!("{settings}zookeeper.ssl.hostnameVerification=false\n"),
    )
    .unwrap();
    assert!(whoami(&path("any-name.properties")));
    // Secure without a trust store: refused before connecting.
    std::fs::write(path("bad.properties"), "zookeeper.client.secure=true\n").unwrap();
    let out = cli()
        .args(["-server", &server, "-client-configuration", &path("bad.properties"), "ls", "/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("zookeeper.ssl.trustStore.location"));
}
