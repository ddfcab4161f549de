//! zkrs-cli with SASL DIGEST-MD5, configured as Apache's Java client is: a JAAS file with a
//! `Client` section named by `-Djava.security.auth.login.config` in CLIENT_JVMFLAGS. `whoami`
//! shows `sasl: bob` on Apache ZooKeeper and on zkrs-server; a wrong password is refused.
#[macro_use]
mod support;

use std::process::Command;
use support::{Target, TestServer};

const JAAS: &str = "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
                    user_bob=\"bobpw\";\n};\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule \
                    required\n  username=\"bob\"\n  password=\"PASSWORD\";\n};\n";

#[test]
fn zkrs_cli_with_a_jaas_client_section() {
    for target in [Target::Apache, Target::Zkrs] {
        let dir = tempfile::tempdir().unwrap();
        let srv = TestServer::start_with_jaas(target, dir.path(), &JAAS.replace("PASSWORD", "bobpw"));
        let jaas = dir.path().join("jaas.conf");
        let whoami = |jaas: &std::path::Path| {
            let out = Command::new(env!("CARGO_BIN_EXE_zkrs-cli"))
                .env_remove("JVMFLAGS")
                .env(
                    "CLIENT_JVMFLAGS",
                    format!("-Xmx64m -Djava.security.auth.login.config={}", jaas.display()),
                )
                .args(["-server", &srv.addr, "-timeout", "5000", "whoami"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
        };
        let out = whoami(&jaas);
        assert!(out.contains("sasl: bob") && out.contains("ip: 127.0.0.1"), "{target:?}: {out}");
        let wrong = dir.path().join("wrong.conf");
        std::fs::write(&wrong, JAAS.replace("PASSWORD", "nope")).unwrap();
        let out = whoami(&wrong);
        assert!(!out.contains("sasl: bob"), "{target:?}: {out}");
    }
}
