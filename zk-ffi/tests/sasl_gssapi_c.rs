//! zookeeper_init_sasl with GSSAPI from C: a program built against Apache's header, run on
//! libzkrs (built with its `kerberos` feature), against Apache ZooKeeper 3.8 and zkrs-server in a
//! throw-away MIT realm (zk-client's `support/kdc.rs`): alice from her ticket cache, bob from his
//! client keytab (KRB5_CLIENT_KTNAME), `sasl:` ACLs enforced on their principals, an unknown
//! service principal and a client with no credentials ending in ZOO_AUTH_FAILED_STATE while
//! alice is still served.
#[path = "../../zk-client/tests/support/kdc.rs"]
mod kdc;
mod support;

use std::time::{Duration, Instant};
use support::*;

#[test]
fn zookeeper_init_sasl_gssapi_on_both_servers() {
    let Some(kdc) = kdc::realm() else { return };
    let started = Instant::now();
    let exe = compile_c("sasl_gssapi_test.c", true);
    let alice_cache = kdc.path("alice.ccache");
    let (ok, out) = kdc.kinit(&alice_cache, "alice", "alice", None);
    assert!(ok, "kinit alice: {out}");
    let jaas = kdc.jaas("server.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
    let krb5_conf = kdc.path("krb5.conf").display().to_string();
    let alice_cache = format!("FILE:{}", alice_cache.display());
    let bob_keytab = kdc.path("bob.keytab").display().to_string();
    for target in [Target::Zkrs, Target::Apache] {
        let server = start_with_jvm_flags(
            target,
            &format!(
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
                 java.security.auth.login.config={}\n",
                jaas.display()
            ),
            &kdc.jvm_flags(&jaas),
        );
        let empty = kdc.path(&format!("empty-{target:?}")).display().to_string();
        let (ok, out) = run_on_libzkrs_with_env(
            &exe,
            &[&server.connect_string(), "localhost", kdc::REALM, &bob_keytab, &empty],
            &[("KRB5_CONFIG", &krb5_conf), ("KRB5CCNAME", &alice_cache)],
            None,
            Duration::from_secs(90),
        );
        assert!(ok && out.contains("DONE"), "sasl_gssapi_test against {target:?}:\n{out}");
        eprintln!("sasl_gssapi_test against {target:?}:\n{out}");
    }
    eprintln!("C GSSAPI scenarios: {:?}", started.elapsed());
}
