//! Kerberos (SASL GSSAPI) for clients against a real MIT KDC: each test starts Debian's
//! krb5kdc in a throw-away realm (ZKRS.TEST) in a temporary directory, with keytabs made there,
//! then runs the same scenarios on Apache ZooKeeper 3.8 and zkrs-server, both configured the
//! same way (a JAAS `Server` section with `Krb5LoginModule` named by
//! `-Djava.security.auth.login.config` in `SERVER_JVMFLAGS`): Apache's Java shell and kazoo
//! authenticate with keytabs or a ticket cache, and the ids, ACL decisions and failures are
//! compared. Built only with the `kerberos` feature (test.sh turns it on).
// Clocks, threads and processes are the tests' to use.
#![allow(clippy::disallowed_methods)]
mod support;

use bytes::Bytes;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::*;
use zk_proto::*;

#[path = "../../zk-client/tests/support/kdc.rs"]
mod kdc;
use kdc::{realm, Kdc, REALM, SERVICE};

const PROVIDER: &str = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";
/// Debian's python, which has python3-kazoo and python3-kerberos.
const PYTHON: &str = "/usr/bin/python3";
/// Debian's libfaketime (the single-threaded library: enough for a short python process).
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// `n` first GSSAPI tokens for `zookeeper@localhost`, each of its own context (so none is a
/// replay of another), made by python3-kerberos (as pure-sasl makes them) from the ticket cache
/// `ccache`, with the wall clock moved by `clock_offset` (libfaketime's `FAKETIME`, such as
/// `+10m`) when given.
fn tokens(kdc: &Kdc, ccache: &Path, clock_offset: Option<&str>, n: usize) -> Vec<Vec<u8>> {
    let script = "import kerberos, sys\n\
                  for _ in range(int(sys.argv[1])):\n\
                  \x20   _, ctx = kerberos.authGSSClientInit('zookeeper@localhost')\n\
                  \x20   kerberos.authGSSClientStep(ctx, '')\n\
                  \x20   print(kerberos.authGSSClientResponse(ctx))\n";
    let mut c = kdc.command(PYTHON);
    c.env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
    if let Some(offset) = clock_offset {
        assert!(Path::new(FAKETIME_LIB).exists(), "libfaketime is not installed (test.sh installs it)");
        c.env("LD_PRELOAD", FAKETIME_LIB).env("FAKETIME", offset);
    }
    let out = c.args(["-c", script, &n.to_string()]).output().unwrap();
    assert!(out.status.success(), "python3-kerberos: {}", String::from_utf8_lossy(&out.stderr));
    use base64::Engine;
    let tokens: Vec<Vec<u8>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| base64::engine::general_purpose::STANDARD.decode(l.trim()).expect("a base64 token"))
        .collect();
    assert_eq!(tokens.len(), n);
    tokens
}

/// Apache's shell (zkCli.sh's class) with `flags` running `command` (its words split at white
/// space, as zkCli.sh takes them); its stdout and stderr.
fn cli(flags: &str, server: &ServerProc, command: &str) -> String {
    assert_apache_installed();
    let child = Command::new("java")
        .arg("-cp")
        .arg(APACHE_CLASSPATH)
        .args(flags.split_whitespace())
        .args(["org.apache.zookeeper.ZooKeeperMain", "-server", &server.connect_string()])
        .args(command.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run java");
    let out = wait_output(child, Duration::from_secs(60));
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The `whoami` lines of a shell's output (`scheme: id`), sorted.
fn ids(output: &str) -> Vec<String> {
    let mut ids: Vec<String> = output
        .lines()
        .filter(|l| ["sasl: ", "ip: ", "super: "].iter().any(|p| l.starts_with(p)))
        .map(str::to_string)
        .collect();
    ids.sort();
    ids
}

/// Apache's shell (Java GSSAPI with keytabs): `whoami`, a node only alice may use, bob refused,
/// the super user let in; the same outcome on Apache's server and zkrs.
#[test]
fn java_shell_ids_and_acls_match_apache() {
    let Some(kdc) = realm() else { return };
    let started = Instant::now();
    let mut seen = Vec::new();
    for target in BOTH {
        let server_jaas =
            kdc.jaas("server.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
        let flags = format!("{} -Dzookeeper.superUser=zkcli/localhost@{REALM}", kdc.jvm_flags(&server_jaas));
        let server = start_with_jvm_flags(target, PROVIDER, &flags);
        let alice = kdc.jvm_flags(&server_jaas);
        let bob =
            kdc.jvm_flags(&kdc.jaas("bob.jaas", &kdc.path("server.keytab"), "bob", &kdc.path("bob.keytab")));
        let zkcli = kdc.jvm_flags(&kdc.jaas(
            "zkcli.jaas",
            &kdc.path("server.keytab"),
            &format!("zkcli/localhost@{REALM}"),
            &kdc.path("zkcli.keytab"),
        ));
        let who = cli(&alice, &server, "whoami");
        assert_eq!(ids(&who), ["ip: 127.0.0.1", "sasl: alice@ZKRS.TEST"], "{target:?}: {who}");
        let out = cli(&alice, &server, "create /alice secret sasl:alice@ZKRS.TEST:cdrwa");
        assert!(out.contains("Created /alice"), "{target:?}: {out}");
        let alice_get = cli(&alice, &server, "get /alice");
        assert!(alice_get.lines().any(|l| l == "secret"), "{target:?}: {alice_get}");
        let bob_get = cli(&bob, &server, "get /alice");
        assert!(bob_get.contains("Insufficient permission : /alice"), "{target:?}: {bob_get}");
        let super_get = cli(&zkcli, &server, "get /alice");
        assert!(super_get.lines().any(|l| l == "secret"), "{target:?}: {super_get}");
        let acl = cli(&alice, &server, "getAcl /alice");
        assert!(acl.contains("'sasl,'alice@ZKRS.TEST\n: cdrwa"), "{target:?}: {acl}");
        seen.push((ids(&who), ids(&cli(&bob, &server, "whoami")), ids(&cli(&zkcli, &server, "whoami"))));
    }
    assert_eq!(seen[0], seen[1], "Apache and zkrs give the same ids");
    assert_eq!(seen[1].2, ["ip: 127.0.0.1", "sasl: zkcli/localhost@ZKRS.TEST", "super: "].map(String::from));
    eprintln!("java shell scenarios: {:?}", started.elapsed());
}

/// `kerberos.removeHostFromPrincipal` and `kerberos.removeRealmFromPrincipal`, as Apache's
/// JVM properties (SERVER_JVMFLAGS) and as zoo.cfg lines: the ids are shortened the same way.
#[test]
fn principals_shortened_as_apache_does() {
    let Some(kdc) = realm() else { return };
    for (how, cfg, props) in [
        ("properties", String::new(), "-Dzookeeper.kerberos.removeHostFromPrincipal=true -Dzookeeper.kerberos.removeRealmFromPrincipal=true"),
        ("zoo.cfg", "kerberos.removeHostFromPrincipal=true\nkerberos.removeRealmFromPrincipal=true\n".to_string(), ""),
    ] {
        let mut seen = Vec::new();
        for target in BOTH {
            let jaas = kdc.jaas("s.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
            let server = start_with_jvm_flags(target, &format!("{PROVIDER}{cfg}"), &format!("{} {props}", kdc.jvm_flags(&jaas)));
            let alice = ids(&cli(&kdc.jvm_flags(&jaas), &server, "whoami"));
            let host = kdc.jaas("h.jaas", &kdc.path("server.keytab"), &format!("zkcli/localhost@{REALM}"), &kdc.path("zkcli.keytab"));
            let host = ids(&cli(&kdc.jvm_flags(&host), &server, "whoami"));
            assert_eq!(alice, ["ip: 127.0.0.1", "sasl: alice"], "{how} {target:?}");
            seen.push((alice, host));
        }
        assert_eq!(seen[0], seen[1], "{how}: Apache and zkrs shorten alike");
        assert_eq!(seen[1].1, ["ip: 127.0.0.1", "sasl: zkcli"], "{how}");
    }
}

/// kazoo (pure-sasl's GSSAPI over python3-kerberos, with alice's ticket cache from kinit):
/// alice's node, readable by her only.
const KAZOO: &str = r#"
import sys
from kazoo.client import KazooClient
from kazoo.security import make_acl
from kazoo.exceptions import NoAuthError
port = sys.argv[1]
zk = KazooClient(hosts="localhost:" + port, timeout=5,
                 sasl_options={"mechanism": "GSSAPI", "service": "zookeeper"})
zk.start(timeout=20)
zk.create("/kz", b"k", acl=[make_acl("sasl", "alice@ZKRS.TEST", all=True)])
print("alice reads", zk.get("/kz")[0].decode())
print("acl", zk.get_acls("/kz")[0])
zk.stop()
anon = KazooClient(hosts="localhost:" + port, timeout=5)
anon.start(timeout=20)
try:
    anon.get("/kz")
    print("anon reads")
except NoAuthError:
    print("anon refused")
anon.stop()
"#;

#[test]
fn kazoo_gssapi_on_both_servers() {
    let Some(kdc) = realm() else { return };
    kdc.run("/usr/bin/kinit", &["-k", "-t", kdc.path("alice.keytab").to_str().unwrap(), "alice"]);
    let mut seen = Vec::new();
    for target in BOTH {
        let jaas = kdc.jaas("s.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
        let server = start_with_jvm_flags(target, PROVIDER, &kdc.jvm_flags(&jaas));
        let child = kdc
            .command(PYTHON)
            .args(["-c", KAZOO, &server.port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_output(child, Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            text.starts_with("alice reads k\nacl [ACL(perms=31, acl_list=['ALL'], id=Id(scheme='sasl', id='alice@ZKRS.TEST'))]\nanon refused"),
            "kazoo against {target:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        seen.push(text);
    }
    assert_eq!(seen[0], seen[1]);
}

fn sasl(c: &mut RawClient, token: &[u8]) -> Option<client::Reply> {
    let xid = c.send(&Request::Sasl(GetSaslRequest { token: Bytes::copy_from_slice(token) }));
    c.recv(xid)
}

/// A first GSSAPI token for `zookeeper@localhost` from alice's ticket cache (kinit with her
/// keytab), made by python3-kerberos, as pure-sasl makes it.
fn ap_req(kdc: &Kdc) -> Vec<u8> {
    kdc.run("/usr/bin/kinit", &["-k", "-t", kdc.path("alice.keytab").to_str().unwrap(), "alice"]);
    let script = "import kerberos, sys\n\
                  _, ctx = kerberos.authGSSClientInit('zookeeper@localhost')\n\
                  kerberos.authGSSClientStep(ctx, '')\n\
                  sys.stdout.write(kerberos.authGSSClientResponse(ctx))\n";
    let out = kdc.run(PYTHON, &["-c", script]);
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(out.trim()).expect("a base64 token")
}

/// Bad input: a server whose keytab holds an old key (the client's ticket does not decrypt),
/// a token that is no Kerberos token, a client gone right after its first token (a junk one, and
/// a real one), a replayed ticket. AUTHFAILED and the close as Apache, zkrs's auth-failed
/// counter, and the server serving others all along.
#[test]
fn failures_as_apache_and_others_served() {
    let Some(kdc) = realm() else { return };
    // The service's key as first exported, then renewed: the old keytab no longer matches.
    std::fs::copy(kdc.path("server.keytab"), kdc.path("stale.keytab")).unwrap();
    kdc.keytab(SERVICE, "server");
    for target in BOTH {
        let good = kdc.jaas("good.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
        // isInitiator=false: Apache's server then does not log in to the KDC at start-up (with
        // the default, true, it refuses to start with this keytab; zkrs never asks the KDC).
        let stale = kdc.jaas_with(
            "stale.jaas",
            &kdc.path("stale.keytab"),
            "isInitiator=false",
            "alice",
            &kdc.path("alice.keytab"),
        );
        let server = start_with_jvm_flags(target, PROVIDER, &kdc.jvm_flags(&stale));
        let out = cli(&kdc.jvm_flags(&good), &server, "whoami");
        assert!(out.contains("AuthFailed"), "{target:?} with a stale keytab: {out}");
        assert!(!ids(&out).iter().any(|l| l.starts_with("sasl:")), "{target:?}: {out}");
        // zkrs counts failed SASL exchanges in zk_auth_failed_count (as it does for DIGEST-MD5);
        // Apache 3.8 counts only failed TLS handshakes there.
        let counted = |n: u32| if target == Target::Apache { 0 } else { n }.to_string();
        assert_eq!(server.mntr_value("zk_auth_failed_count"), counted(1), "{target:?}");

        let server = start_with_jvm_flags(target, PROVIDER, &kdc.jvm_flags(&good));
        // Not a Kerberos token: AUTHFAILED, a null token, then the close.
        let mut junk = RawClient::connect(server.addr(), 10_000);
        let r = sasl(&mut junk, b"\x60\x05not-a-token").expect("an answer");
        assert_eq!(
            (r.header.zxid, r.err(), &r.body[..]),
            (0, ErrorCode::AuthFailed, &[0xff; 4][..]),
            "{target:?}"
        );
        assert!(junk.is_closed_within(Duration::from_secs(10)), "{target:?}");
        // Gone mid-exchange: a SASL request, then the connection dropped unread.
        let mut gone = RawClient::connect(server.addr(), 10_000);
        gone.send(&Request::Sasl(GetSaslRequest { token: Bytes::from_static(b"\x60\x03abc") }));
        drop(gone);
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.mntr_value("zk_auth_failed_count") != counted(2) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(server.mntr_value("zk_auth_failed_count"), counted(2), "{target:?}");
        // A real first token (alice's ticket from her ticket cache, through python3-kerberos):
        // answered with the server's context token; then the client is gone mid-exchange.
        let token = ap_req(&kdc);
        let mut half = RawClient::connect(server.addr(), 10_000);
        let r = sasl(&mut half, &token).expect("an answer");
        assert_eq!((r.header.zxid, r.err()), (0, ErrorCode::Ok), "{target:?}");
        assert!(r.decode::<SetSaslResponse>().token.len() > 4, "{target:?}: mutual authentication's token");
        drop(half);
        // The same token again on another connection: a replay, refused.
        let mut replay = RawClient::connect(server.addr(), 10_000);
        let r = sasl(&mut replay, &token).expect("an answer");
        assert_eq!((r.header.zxid, r.err()), (0, ErrorCode::AuthFailed), "{target:?}: a replayed ticket");
        assert!(replay.is_closed_within(Duration::from_secs(10)), "{target:?}");
        assert_eq!(server.mntr_value("zk_auth_failed_count"), counted(3), "{target:?}");
        // Others are served: alice authenticates.
        let who = cli(&kdc.jvm_flags(&good), &server, "whoami");
        assert_eq!(ids(&who), ["ip: 127.0.0.1", "sasl: alice@ZKRS.TEST"], "{target:?}: {who}");
    }
}

/// zkrs refuses to start, naming what is wrong, when its Kerberos login cannot work: a
/// principal the keytab has no key for, a keytab that does not exist, a missing option.
#[test]
fn zkrs_refuses_a_kerberos_login_that_cannot_work() {
    let Some(kdc) = realm() else { return };
    let write = |name: &str, body: &str| {
        let p = kdc.path(name);
        std::fs::write(
            &p,
            format!("Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n{body};\n}};\n"),
        )
        .unwrap();
        p
    };
    let keytab = kdc.path("server.keytab").display().to_string();
    for (jaas, expected) in [
        (
            write("unknown.jaas", &format!("  useKeyTab=true storeKey=true keyTab=\"{keytab}\" principal=\"nobody/localhost@{REALM}\"")),
            "cannot take the key of nobody/localhost@ZKRS.TEST",
        ),
        (
            write("nofile.jaas", &format!("  useKeyTab=true keyTab=\"{keytab}.missing\" principal=\"{SERVICE}\"")),
            "server.keytab.missing",
        ),
        (write("nokeytab.jaas", &format!("  useKeyTab=true principal=\"{SERVICE}\"")), "no keyTab option"),
        (write("nouse.jaas", &format!("  keyTab=\"{keytab}\" principal=\"{SERVICE}\"")), "needs useKeyTab=true"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("zoo.cfg");
        std::fs::write(&cfg, format!("tickTime=2000\ndataDir={}\nclientPort={}\n{PROVIDER}", dir.path().join("d").display(), free_port()))
            .unwrap();
        let out = Command::new(zkrs_binary())
            .arg(&cfg)
            .env("SERVER_JVMFLAGS", kdc.jvm_flags(&jaas))
            .env_remove("JVMFLAGS")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started with {}", jaas.display());
        assert!(err.contains(expected) && err.contains("Server"), "{}: {err}", jaas.display());
    }
}

/// Both servers started with the realm's service keytab, Apache's first.
fn both_servers(kdc: &Kdc, extra: &str, flags: &str) -> Vec<ServerProc> {
    let jaas = kdc.jaas("both.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
    BOTH.iter()
        .map(|&t| {
            start_with_jvm_flags(
                t,
                &format!("{PROVIDER}{extra}"),
                &format!("{} {flags}", kdc.jvm_flags(&jaas)),
            )
        })
        .collect()
}

/// What the server answers a connection's first GSSAPI token with: the error code, whether a
/// context token came back, and whether the server closed the connection within 10 s (only
/// looked at after a failure: a live exchange is left open).
fn first_step(server: &ServerProc, token: &[u8]) -> (ErrorCode, bool, bool) {
    let mut c = RawClient::connect(server.addr(), 10_000);
    let r = sasl(&mut c, token).expect("an answer");
    let err = r.err();
    let answered = err == ErrorCode::Ok && r.decode::<SetSaslResponse>().token.len() > 4;
    let closed = err != ErrorCode::Ok && c.is_closed_within(Duration::from_secs(10));
    (err, answered, closed)
}

/// Alice still authenticates (Apache's shell with her keytab): the server serves others.
fn alice_served(kdc: &Kdc, server: &ServerProc) {
    let jaas = kdc.jaas("alice.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
    let who = cli(&kdc.jvm_flags(&jaas), server, "whoami");
    assert_eq!(ids(&who), ["ip: 127.0.0.1", "sasl: alice@ZKRS.TEST"], "{:?}: {who}", server.target);
}

/// zkrs's failed-authentication count (Apache 3.8 counts only TLS handshakes there: 0).
fn failed_count(server: &ServerProc) -> String {
    server.mntr_value("zk_auth_failed_count")
}

/// The zkrs count expected after `n` failed exchanges (Apache's stays 0).
fn counted(server: &ServerProc, n: u32) -> String {
    if server.target == Target::Apache { 0 } else { n }.to_string()
}

/// An expired ticket. A ticket cache that has run out (kinit -l 5s, then 7 s later): Apache's
/// shell cannot log in with it, says AuthFailed and goes on without SASL (its only id `ip`), and
/// the server never sees a token. A token made while the ticket was good and sent once it had
/// expired (a client slow to send it) is still taken, within the clock allowance, by both. The
/// server serves alice after.
#[test]
fn expired_ticket_as_apache() {
    let Some(kdc) = realm() else { return };
    let servers = both_servers(&kdc, "", "");
    let ccache = kdc.path("short.ccache");
    let (ok, out) = kdc.kinit(&ccache, "alice", "alice", Some("5s"));
    assert!(ok, "kinit -l 5s: {out}");
    let made = Instant::now();
    let tokens = tokens(&kdc, &ccache, None, BOTH.len());
    // The KDC's times are whole seconds: past 5 s with a margin.
    std::thread::sleep((made + Duration::from_secs(7)).saturating_duration_since(Instant::now()));
    let klist = kdc
        .command("/usr/bin/klist")
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()))
        .arg("-s")
        .status()
        .unwrap();
    assert!(!klist.success(), "the ticket cache should have expired");
    let from_cache = kdc.jvm_flags(&kdc.jaas_from_cache("cache.jaas", &ccache));
    let mut seen = Vec::new();
    for (server, token) in servers.iter().zip(&tokens) {
        let target = server.target;
        let out = cli(&from_cache, server, "whoami");
        let shell = (out.contains("AuthFailed"), ids(&out));
        assert_eq!(failed_count(server), "0", "{target:?}: the shell sent no token");
        assert_eq!(shell, (true, vec!["ip: 127.0.0.1".to_string()]), "{target:?}: {out}");
        // Expired 2 s before, within Kerberos's 5-minute clock allowance: both servers' libraries
        // (Java's and MIT's) still take the ticket and answer with their context token.
        let step = first_step(server, token);
        assert_eq!(step, (ErrorCode::Ok, true, false), "{target:?}: a token of a just-expired ticket");
        seen.push((shell, step));
        alice_served(&kdc, server);
    }
    assert_eq!(seen[0], seen[1], "Apache and zkrs alike");
}

/// Clock skew: tokens made by a client whose clock is ahead (libfaketime on python3-kerberos;
/// the service ticket fetched first at the true time, or the KDC would refuse the skewed client
/// itself). 3 minutes ahead is within Kerberos's 5-minute allowance; 10 minutes is not. The
/// verdicts, zkrs's count and the server serving alice after, compared on both servers.
#[test]
fn clock_skew_as_apache() {
    let Some(kdc) = realm() else { return };
    let servers = both_servers(&kdc, "", "");
    let ccache = kdc.path("skew.ccache");
    let (ok, out) = kdc.kinit(&ccache, "alice", "alice", None);
    assert!(ok, "kinit: {out}");
    let kvno = kdc
        .command("/usr/bin/kvno")
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()))
        .arg(SERVICE)
        .output()
        .unwrap();
    assert!(kvno.status.success(), "kvno: {}", String::from_utf8_lossy(&kvno.stderr));
    let within = tokens(&kdc, &ccache, Some("+3m"), BOTH.len());
    let beyond = tokens(&kdc, &ccache, Some("+10m"), BOTH.len());
    let mut seen = Vec::new();
    for (i, server) in servers.iter().enumerate() {
        let target = server.target;
        let far = first_step(server, &beyond[i]);
        assert_eq!(far, (ErrorCode::AuthFailed, false, true), "{target:?}: 10 minutes ahead");
        assert_eq!(failed_count(server), counted(server, 1), "{target:?}");
        let near = first_step(server, &within[i]);
        assert_eq!(near, (ErrorCode::Ok, true, false), "{target:?}: 3 minutes ahead");
        seen.push((far, near));
        alice_served(&kdc, server);
    }
    assert_eq!(seen[0], seen[1], "Apache and zkrs alike");
}

/// An unknown principal: a keytab whose principal the KDC no longer has. kinit says "not found in
/// Kerberos database"; Apache's shell cannot get a ticket either, says AuthFailed and goes on
/// without SASL (its only id `ip`); the
/// server sees no token. A ticket issued before the principal was deleted still authenticates
/// (the server never asks the KDC), on both.
#[test]
fn unknown_principal_as_apache() {
    let Some(kdc) = realm() else { return };
    kdc.principal("ghost", "ghost");
    let ccache = kdc.path("ghost.ccache");
    let (ok, out) = kdc.kinit(&ccache, "ghost", "ghost", None);
    assert!(ok, "kinit ghost: {out}");
    let early = tokens(&kdc, &ccache, None, BOTH.len());
    kdc.admin("delprinc -force ghost");
    let (ok, out) = kdc.kinit(&kdc.path("ghost2.ccache"), "ghost", "ghost", None);
    assert!(!ok && out.contains("not found in Kerberos database"), "kinit of a deleted principal: {out}");
    let servers = both_servers(&kdc, "", "");
    let ghost = kdc.jvm_flags(&kdc.jaas(
        "ghost.jaas",
        &kdc.path("server.keytab"),
        "ghost",
        &kdc.path("ghost.keytab"),
    ));
    let mut seen = Vec::new();
    for (server, token) in servers.iter().zip(&early) {
        let target = server.target;
        let out = cli(&ghost, server, "whoami");
        let shell = (out.contains("AuthFailed"), ids(&out));
        assert_eq!(shell, (true, vec!["ip: 127.0.0.1".to_string()]), "{target:?}: {out}");
        assert_eq!(failed_count(server), "0", "{target:?}: the shell sent no token");
        let step = first_step(server, token);
        assert_eq!(step, (ErrorCode::Ok, true, false), "{target:?}: a ticket issued before the deletion");
        seen.push(shell);
        alice_served(&kdc, server);
    }
    assert_eq!(seen[0], seen[1], "Apache and zkrs alike");
}

/// `security.auth_to_local` rules beyond DEFAULT, as a zoo.cfg line and as Apache's JVM property
/// in SERVER_JVMFLAGS: alice mapped to `admin` by one rule, the two-component `zkcli/localhost`
/// renamed by another (its host and realm then appended, as Apache's server appends them), bob
/// left to DEFAULT. The ids are compared on both servers.
#[test]
fn auth_to_local_rules_map_as_apache_does() {
    let Some(kdc) = realm() else { return };
    let rules =
        r"RULE:[1:$1@$0](alice@ZKRS\.TEST)s/.*/admin/ RULE:[2:$1;$2](zkcli;.*)s/zkcli;.*/cli/ DEFAULT";
    // SERVER_JVMFLAGS is split at white space: the same rules written without any.
    let property = r"-Dzookeeper.security.auth_to_local=RULE:[1:$1@$0](alice@ZKRS.TEST)s/.*/admin/RULE:[2:$1;$2](zkcli;.*)s/zkcli;.*/cli/DEFAULT";
    for (how, cfg, props) in
        [("zoo.cfg", format!("security.auth_to_local={rules}\n"), ""), ("property", String::new(), property)]
    {
        let mut seen = Vec::new();
        for target in BOTH {
            let jaas = kdc.jaas("s.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
            let server = start_with_jvm_flags(
                target,
                &format!("{PROVIDER}{cfg}"),
                &format!("{} {props}", kdc.jvm_flags(&jaas)),
            );
            let alice = ids(&cli(&kdc.jvm_flags(&jaas), &server, "whoami"));
            let bob = kdc.jaas("b.jaas", &kdc.path("server.keytab"), "bob", &kdc.path("bob.keytab"));
            let bob = ids(&cli(&kdc.jvm_flags(&bob), &server, "whoami"));
            let host = kdc.jaas(
                "h.jaas",
                &kdc.path("server.keytab"),
                &format!("zkcli/localhost@{REALM}"),
                &kdc.path("zkcli.keytab"),
            );
            let host = ids(&cli(&kdc.jvm_flags(&host), &server, "whoami"));
            seen.push((alice, bob, host));
        }
        assert_eq!(seen[0], seen[1], "{how}: Apache and zkrs map alike");
        let expected = |id: &str| vec!["ip: 127.0.0.1".to_string(), format!("sasl: {id}")];
        assert_eq!(
            seen[1],
            (expected("admin@ZKRS.TEST"), expected("bob@ZKRS.TEST"), expected("cli/localhost@ZKRS.TEST")),
            "{how}"
        );
    }
}

/// Rules zkrs cannot use are refused at start-up, naming the key and what is wrong (Apache's
/// server starts, and fails every GSSAPI client when the first one comes): Hadoop's `/L` flag, a
/// parameter the rule's principals lack, a regular expression that does not compile.
#[test]
fn zkrs_refuses_bad_auth_to_local_rules() {
    let Some(kdc) = realm() else { return };
    let jaas = kdc.jaas("s.jaas", &kdc.path("server.keytab"), "alice", &kdc.path("alice.keytab"));
    for (rules, expected) in [
        (r"RULE:[1:$1@$0](.*@ZKRS\.TEST)s/@.*//L DEFAULT", "/L (lower-case) flag"),
        (r"RULE:[1:$2] DEFAULT", "$0 to $1"),
        (r"RULE:[1:$1](a(b) DEFAULT", "regular expression"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("zoo.cfg");
        std::fs::write(
            &cfg,
            format!(
                "tickTime=2000\ndataDir={}\nclientPort={}\n{PROVIDER}security.auth_to_local={rules}\n",
                dir.path().join("d").display(),
                free_port()
            ),
        )
        .unwrap();
        let child = Command::new(zkrs_binary())
            .arg(&cfg)
            .env("SERVER_JVMFLAGS", kdc.jvm_flags(&jaas))
            .env_remove("JVMFLAGS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_output(child, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started with {rules}");
        assert!(
            err.contains("security.auth_to_local (zoo.cfg line 5)") && err.contains(expected),
            "{rules}: {err}"
        );
    }
}
