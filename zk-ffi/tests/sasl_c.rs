//! zookeeper_init_sasl from C: a program built against Apache's header, run on libzkrs, with
//! Cyrus-style callbacks (zoo_sasl_make_basic_callbacks' and its own), against zkrs-server and
//! Apache ZooKeeper with SASL DIGEST-MD5 users from a JAAS file; `sasl:` ACLs enforced, a wrong
//! password refused.
mod support;

use std::time::Duration;
use support::*;

#[test]
fn zookeeper_init_sasl_on_both_servers() {
    let exe = compile_c("sasl_test.c", true);
    for target in [Target::Zkrs, Target::Apache] {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).display().to_string();
        std::fs::write(
            path("jaas.conf"),
            "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_bob=\"bobpw\";\n};\n",
        )
        .unwrap();
        std::fs::write(path("good"), "bobpw\n").unwrap();
        std::fs::write(path("bad"), "nope\n").unwrap();
        let server = start_with(
            target,
            &format!(
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
                 java.security.auth.login.config={}\n",
                path("jaas.conf")
            ),
        );
        let (ok, out) = run_on_libzkrs(
            &exe,
            &[&server.connect_string(), &path("good"), &path("bad")],
            None,
            Duration::from_secs(90),
        );
        assert!(ok && out.contains("DONE"), "sasl_test against {target:?}:\n{out}");
    }
}
