//! Kerberos between ensemble members (quorum SASL with GSSAPI, as Apache ZooKeeper 3.8 runs it)
//! on real processes against a real MIT KDC (Debian's krb5kdc in a throw-away realm, the shared
//! support of the client Kerberos tests): the JAAS sections `QuorumServer` and `QuorumLearner`
//! log in with `Krb5LoginModule` as `zkquorum/localhost@ZKRS.TEST`, the members' `server.N`
//! lines name `localhost` (the host Apache authorizes learner principals by), and every member
//! requires SASL both ways and asks for `zkquorum/_HOST`. Three zkrs members with one stale
//! keytab (that member stays out, the other two serve), then all three; Apache and zkrs members
//! in one ensemble, zkrs leading and then following an Apache leader; a member of either kind
//! whose keytab is missing does not start. Built only with the
//! `kerberos` feature; skipped, saying why, where the KDC is not installed.
// Clocks, threads and processes are the tests' to use.
#![allow(clippy::disallowed_methods)]

mod support;

use std::path::Path;
use std::time::Duration;
use support::ensemble::*;

#[path = "../../zk-client/tests/support/kdc.rs"]
mod kdc;
use kdc::Kdc;

/// Every member's principal (as in Apache's own quorum Kerberos tests, one for all).
const QUORUM_PRINCIPAL: &str = "zkquorum/localhost@ZKRS.TEST";

const REQUIRE_ALL: &str = "quorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true\n\
                           quorum.auth.serverRequireSasl=true\nquorum.auth.kerberos.servicePrincipal=zkquorum/_HOST\n";

/// Gives member `i` a JAAS file whose quorum sections log in as `principal` with the keytab
/// `keytab`, and the realm's configuration (JVM flags for Apache, `KRB5_CONFIG` for zkrs).
fn kerberos_member(kdc: &Kdc, e: &Ensemble, i: usize, keytab: &Path, principal: &str) {
    let dir = &e.members[i].dir;
    let section = |name: &str| {
        format!(
            "{name} {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true\n  \
             keyTab=\"{}\"\n  storeKey=true\n  useTicketCache=false\n  doNotPrompt=true\n  \
             principal=\"{principal}\";\n}};\n",
            keytab.display()
        )
    };
    let jaas = dir.join("jaas.conf");
    std::fs::write(&jaas, section("QuorumServer") + &section("QuorumLearner")).expect("jaas");
    let krb5 = kdc.path("krb5.conf");
    std::fs::write(
        dir.join("jvmflags"),
        format!(
            "-Djava.security.auth.login.config={} -Djava.security.krb5.conf={}",
            jaas.display(),
            krb5.display()
        ),
    )
    .expect("jvmflags");
    std::fs::write(dir.join("env"), format!("KRB5_CONFIG={}\n", krb5.display())).expect("env");
}

/// An ensemble of `kinds` whose server lines name `localhost`, requiring quorum Kerberos; every
/// member's keytab is a copy of `keytab` in its directory (`quorum.keytab`).
fn kerberos_ensemble(kdc: &Kdc, kinds: &[Kind], keytab: &Path) -> Ensemble {
    let e = Ensemble::configure(kinds);
    for m in &e.members {
        let path = m.dir.join("zoo.cfg");
        let text = std::fs::read_to_string(&path).expect("zoo.cfg");
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with("server.") {
                    l.replace("=127.0.0.1:", "=localhost:")
                } else {
                    l.to_string()
                }
            })
            .map(|l| l + "\n")
            .collect();
        std::fs::write(&path, text).expect("zoo.cfg");
    }
    e.append_config(REQUIRE_ALL);
    for i in 0..kinds.len() {
        let mine = e.members[i].dir.join("quorum.keytab");
        std::fs::copy(keytab, &mine).expect("keytab");
        kerberos_member(kdc, &e, i, &mine, QUORUM_PRINCIPAL);
    }
    e
}

/// The realm with the quorum principal: its current key in `quorum.keytab`, an older one (the
/// key before the last export, so refused by the KDC and by every member) in `stale.keytab`.
fn quorum_realm() -> Option<Kdc> {
    let kdc = Kdc::start()?;
    kdc.principal(QUORUM_PRINCIPAL, "stale");
    kdc.keytab(QUORUM_PRINCIPAL, "quorum");
    Some(kdc)
}

fn authenticated(log: &str) -> bool {
    log.contains(&format!("authenticated as \"{QUORUM_PRINCIPAL}\" (quorum SASL)"))
}

#[test]
fn zkrs_members_authenticate_with_kerberos_and_one_with_a_stale_keytab_stays_out() {
    let Some(kdc) = quorum_realm() else { return };
    let mut e = kerberos_ensemble(&kdc, &[Kind::Zkrs; 3], &kdc.path("quorum.keytab"));
    std::fs::copy(kdc.path("stale.keytab"), e.members[2].dir.join("quorum.keytab")).expect("keytab");
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1]);
    e.write_and_read(leader, "/one", &[0, 1]);
    e.stays_out(2, Duration::from_secs(6));
    // Member 3 cannot log in; the others cannot take its tickets for them, nor it theirs.
    assert!(e.log(2).contains("cannot log in as zkquorum/localhost@ZKRS.TEST"), "{}", e.logs());
    let others = e.log(0) + &e.log(1);
    assert!(
        others.contains("quorum SASL (GSSAPI) with server 3") && others.contains("refused our credentials"),
        "{}",
        e.logs()
    );
    assert!(authenticated(&others), "{}", e.logs());

    // With the current key it joins, authenticated both ways, and the ensemble replicates.
    e.kill(2);
    std::fs::copy(kdc.path("quorum.keytab"), e.members[2].dir.join("quorum.keytab")).expect("keytab");
    e.launch(2);
    e.wait_for_leader();
    e.write_and_read(2, "/two", &[0, 1, 2]);
    e.write_and_read(leader, "/three", &[0, 1, 2]);
    assert!(e.log(2).contains("(quorum SASL, GSSAPI)"), "{}", e.logs());
}

/// Apache's authorization: a learner that authenticates as a principal whose host is not one of
/// the `server.N` hosts is refused, and the other two keep serving.
#[test]
fn a_member_whose_principal_names_another_host_is_not_authorized() {
    let Some(kdc) = quorum_realm() else { return };
    let intruder = "zkquorum/intruder@ZKRS.TEST";
    let keytab = kdc.principal(intruder, "intruder");
    let mut e = kerberos_ensemble(&kdc, &[Kind::Zkrs; 3], &kdc.path("quorum.keytab"));
    kerberos_member(&kdc, &e, 2, &keytab, intruder);
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader_among(&[0, 1]);
    e.write_and_read(leader, "/one", &[0, 1]);
    e.stays_out(2, Duration::from_secs(4));
    let others = e.log(0) + &e.log(1);
    assert!(others.contains(&format!("{intruder} is not authorized to join")), "{}", e.logs());
    assert!(e.log(2).contains("refused our credentials"), "{}", e.logs());
}

#[test]
fn apache_and_zkrs_members_authenticate_with_kerberos_either_leading() {
    let Some(kdc) = quorum_realm() else { return };
    let mut e =
        kerberos_ensemble(&kdc, &[Kind::Apache, Kind::Apache, Kind::Zkrs], &kdc.path("quorum.keytab"));
    // zkrs leads: Apache's learners authenticated to it with Java's GSSAPI.
    e.zkrs_leads_then_follows_apache(|e| {
        assert!(authenticated(&e.log(2)), "{}", e.logs());
    });
    // zkrs then followed an Apache leader, having authenticated to it.
    let log = e.log(2);
    assert!(log.contains("authenticated to server") && log.contains("(quorum SASL, GSSAPI)"), "{}", e.logs());
}

/// A member whose quorum keytab is missing does not start: Apache's login at start-up fails
/// ("Unable to obtain password from user"), zkrs checks the keytab at start-up and names the file
/// and the section. The other two form an ensemble and serve.
#[test]
fn a_member_without_its_keytab_does_not_start_on_either_server() {
    let Some(kdc) = quorum_realm() else { return };
    for kind in [Kind::Apache, Kind::Zkrs] {
        let mut e = kerberos_ensemble(&kdc, &[Kind::Zkrs, Kind::Zkrs, kind], &kdc.path("quorum.keytab"));
        e.members[2].apache_log = true;
        let missing = e.members[2].dir.join("quorum.keytab");
        std::fs::remove_file(&missing).expect("keytab");
        for i in 0..3 {
            e.launch(i);
        }
        let child = e.members[2].child.as_mut().expect("launched");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{kind:?} started without its keytab: {}",
                e.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(!status.success(), "{kind:?}: {}", e.logs());
        let log = e.log(2);
        let said = match kind {
            Kind::Apache => log.contains("LoginException: Unable to obtain password"),
            Kind::Zkrs => {
                log.contains("section 'QuorumLearner'") && log.contains(&missing.display().to_string())
            }
        };
        assert!(said, "{kind:?}: {log}");
        let leader = e.wait_for_leader_among(&[0, 1]);
        e.write_and_read(leader, "/without-3", &[0, 1]);
    }
}
