//! A throw-away MIT KDC for the Kerberos tests (zk-server's, zk-client's, zk-ffi's; included
//! with `#[path]`): Debian's krb5kdc in the realm ZKRS.TEST on a free loopback port, its
//! configuration, database and keytabs in a temporary directory, and JAAS files and JVM flags
//! naming them.
#![allow(dead_code)]
// Processes and clocks are the tests' to use.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// The test crates that include this file may load ports.rs for their servers too: two copies of
// one small function.
#[allow(clippy::duplicate_mod)]
#[path = "ports.rs"]
mod ports;
use ports::free_port;

pub const REALM: &str = "ZKRS.TEST";
/// The server's principal: the Java client asks for `zookeeper/<host>`; the tests name it.
pub const SERVICE: &str = "zookeeper/localhost@ZKRS.TEST";

/// A KDC of the realm ZKRS.TEST on a free loopback port, with its configuration and keytabs in
/// a temporary directory; killed when dropped.
pub struct Kdc {
    dir: tempfile::TempDir,
    child: Child,
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Kdc {
    /// Starts the KDC, or `None` (with a message) when Debian's KDC is not installed.
    pub fn start() -> Option<Kdc> {
        if !Path::new("/usr/sbin/krb5kdc").exists() || !Path::new("/usr/sbin/kadmin.local").exists() {
            eprintln!(
                "SKIPPED: the MIT KDC is not installed (Debian's krb5-kdc, krb5-admin-server and \
                 krb5-user; test.sh installs them)"
            );
            return None;
        }
        let dir = tempfile::Builder::new().prefix("zkrs-kdc-").tempdir().unwrap();
        let d = dir.path();
        let port = free_port();
        std::fs::write(
            d.join("krb5.conf"),
            format!(
                "[libdefaults]\n default_realm = {REALM}\n dns_lookup_kdc = false\n dns_lookup_realm = false\n \
                 rdns = false\n dns_canonicalize_hostname = false\n udp_preference_limit = 1\n \
                 ticket_lifetime = 1h\n\n[realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{port}\n }}\n"
            ),
        )
        .unwrap();
        std::fs::write(
            d.join("kdc.conf"),
            format!(
                "[kdcdefaults]\n kdc_ports = {port}\n kdc_tcp_ports = {port}\n\n[realms]\n {REALM} = {{\n  \
                 database_name = {db}\n  key_stash_file = {d}/stash\n  acl_file = {d}/kadm5.acl\n  \
                 max_life = 1h\n  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n \
                 }}\n\n[logging]\n kdc = FILE:{d}/kdc.log\n",
                db = d.join("principal").display(),
                d = d.display()
            ),
        )
        .unwrap();
        let kdc = Kdc { child: Command::new("true").spawn().unwrap(), dir };
        kdc.run("/usr/sbin/kdb5_util", &["-r", REALM, "create", "-s", "-P", "throwaway-master"]);
        let mut kdc = kdc;
        kdc.child = kdc
            .command("/usr/sbin/krb5kdc")
            .args(["-n", "-r", REALM])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start krb5kdc");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "krb5kdc did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(kdc)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A command with the realm's configuration in its environment.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("KRB5_CONFIG", self.path("krb5.conf"))
            .env("KRB5_KDC_PROFILE", self.path("kdc.conf"))
            .env("KRB5CCNAME", format!("FILE:{}", self.path("ccache").display()))
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self.command(program).args(args).output().unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{program} {args:?}: {text}");
        text
    }

    /// `kadmin.local -q QUERY`.
    pub fn admin(&self, query: &str) {
        let out = self.run("/usr/sbin/kadmin.local", &["-r", REALM, "-q", query]);
        assert!(!out.contains("rror"), "kadmin.local {query}: {out}");
    }

    /// A principal with a random key, exported to `<file>.keytab`; returns the keytab's path.
    pub fn principal(&self, name: &str, file: &str) -> PathBuf {
        self.admin(&format!("addprinc -randkey {name}"));
        self.keytab(name, file)
    }

    /// Exports (and so renews) `name`'s key to `<file>.keytab`.
    pub fn keytab(&self, name: &str, file: &str) -> PathBuf {
        let path = self.path(&format!("{file}.keytab"));
        self.admin(&format!("ktadd -k {} {name}", path.display()));
        path
    }

    /// A JAAS file with the server's section (keytab `server_keytab`) and a client section
    /// logging in as `client` with `client_keytab`.
    pub fn jaas(&self, file: &str, server_keytab: &Path, client: &str, client_keytab: &Path) -> PathBuf {
        self.jaas_with(file, server_keytab, "", client, client_keytab)
    }

    /// Like [`Kdc::jaas`], with `server_options` added to the server's section.
    pub fn jaas_with(
        &self,
        file: &str,
        server_keytab: &Path,
        server_options: &str,
        client: &str,
        client_keytab: &Path,
    ) -> PathBuf {
        let path = self.path(file);
        std::fs::write(
            &path,
            format!(
                "Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true\n  \
                 keyTab=\"{}\"\n  storeKey=true\n  useTicketCache=false\n  {server_options}\n  principal=\"{SERVICE}\";\n}};\n\n\
                 Client {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true\n  \
                 keyTab=\"{}\"\n  storeKey=true\n  useTicketCache=false\n  doNotPrompt=true\n  \
                 principal=\"{client}\";\n}};\n",
                server_keytab.display(),
                client_keytab.display()
            ),
        )
        .unwrap();
        path
    }

    /// A JAAS file with the server's section and a client section that logs in from the ticket
    /// cache `ccache` only (no keytab, no prompt), as a user after `kinit` does.
    pub fn jaas_from_cache(&self, file: &str, ccache: &Path) -> PathBuf {
        let path = self.path(file);
        std::fs::write(
            &path,
            format!(
                "Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true\n  \
                 keyTab=\"{}\"\n  storeKey=true\n  principal=\"{SERVICE}\";\n}};\n\n\
                 Client {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=false\n  \
                 useTicketCache=true\n  ticketCache=\"{}\"\n  doNotPrompt=true;\n}};\n",
                self.path("server.keytab").display(),
                ccache.display()
            ),
        )
        .unwrap();
        path
    }

    /// `kinit` into the ticket cache `ccache` as `principal` with its keytab `<file>.keytab`,
    /// `lifetime` long (kinit's `-l`) when given; the output, and whether it succeeded.
    pub fn kinit(
        &self,
        ccache: &Path,
        principal: &str,
        file: &str,
        lifetime: Option<&str>,
    ) -> (bool, String) {
        let keytab = self.path(&format!("{file}.keytab"));
        let mut c = self.command("/usr/bin/kinit");
        c.env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
        if let Some(l) = lifetime {
            c.args(["-l", l]);
        }
        let out = c.args(["-k", "-t", keytab.to_str().unwrap(), principal]).output().unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    /// The JVM flags of a server or shell using `jaas` in this realm.
    pub fn jvm_flags(&self, jaas: &Path) -> String {
        format!(
            "-Djava.security.auth.login.config={} -Djava.security.krb5.conf={} \
             -Dzookeeper.server.principal={SERVICE}",
            jaas.display(),
            self.path("krb5.conf").display()
        )
    }
}

/// The realm's usual principals: the service (`server.keytab`), alice, bob, and a client with a
/// host part, `zkcli/localhost` (`zkcli.keytab`).
pub fn realm() -> Option<Kdc> {
    let kdc = Kdc::start()?;
    kdc.principal(SERVICE, "server");
    kdc.principal("alice", "alice");
    kdc.principal("bob", "bob");
    kdc.principal("zkcli/localhost", "zkcli");
    Some(kdc)
}
