//! Test servers for zk-client's integration tests.
//!
//! Every test runs twice, against Apache ZooKeeper 3.8 (Debian's package) and against zkrs-server
//! ([`Target`]; the [`both!`] macro writes the two `#[tokio::test]`s). Each run starts its server on
//! a free loopback port with a fresh data directory. `ZKRS_TEST_SERVER=host:port` points every test
//! at one running server instead (tests that must kill and restart the server are skipped then). A
//! small TCP proxy that can cut and refuse connections stands in for network failures.
#![allow(dead_code, unused_macros)]
// Real servers and sockets on real time: deadlines read the clock, the proxy runs on threads.
#![allow(clippy::disallowed_methods)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const CLASSPATH: &str = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar";

/// Which server implementation a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Apache ZooKeeper 3.8 from Debian's package, run with the JVM.
    Apache,
    /// Our zkrs-server binary.
    Zkrs,
}

/// For each named `async fn name(Target)`, writes a module `name` with two `#[tokio::test]`s,
/// `apache` and `zkrs`, so `cargo test name::zkrs` runs one.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn apache() {
                    super::$name(super::support::Target::Apache).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn zkrs() {
                    super::$name(super::support::Target::Zkrs).await
                }
            }
        )*
    };
}

/// A server the tests talk to: one we started, or the one ZKRS_TEST_SERVER names.
pub struct TestServer {
    /// "host:port".
    pub addr: String,
    /// The implementation (for an external server: the one the test asked for).
    pub target: Target,
    managed: Option<Managed>,
}

struct Managed {
    target: Target,
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// zoo.cfg lines added to the defaults.
    extra: String,
    /// `SERVER_JVMFLAGS`: Apache's JVM gets them on its command line, zkrs-server in its
    /// environment.
    jvm_flags: String,
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The zkrs-server binary: `ZKRS_SERVER_BIN`, or the workspace's own, brought up to date with
/// `cargo build` once per test process (cargo releases its build lock before running tests, so
/// this does not deadlock; it waits while another cargo command holds the lock).
pub fn zkrs_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("ZKRS_SERVER_BIN") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/<test exe> -> target/<profile>/zkrs-server
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf();
        let bin = profile_dir.join("zkrs-server");
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", "zk-server", "--bin", "zkrs-server"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if release {
            cmd.arg("--release");
        }
        let ok = cmd.status().map(|s| s.success()).unwrap_or(false);
        assert!(ok || bin.exists(), "could not build zkrs-server (cargo build -p zk-server)");
        bin
    })
    .clone()
}

impl TestServer {
    /// Starts `target` (tickTime 500 ms so sessions may be short, TTL nodes enabled, containers
    /// reaped every 500 ms), or uses ZKRS_TEST_SERVER.
    pub fn start(target: Target) -> TestServer {
        if let Ok(addr) = std::env::var("ZKRS_TEST_SERVER") {
            return TestServer { addr, target, managed: None };
        }
        Self::start_with(target, "")
    }

    /// Starts `target` as [`TestServer::start`] does, with `extra` zoo.cfg lines (never an
    /// external server: the lines matter).
    pub fn start_with(target: Target, extra: &str) -> TestServer {
        Self::start_with_jvm_flags(target, extra, "")
    }

    /// Starts `target` as [`TestServer::start_with`] does, with `SERVER_JVMFLAGS` set to
    /// `jvm_flags` as zkServer.sh takes them (split at white space for Apache's JVM).
    pub fn start_with_jvm_flags(target: Target, extra: &str, jvm_flags: &str) -> TestServer {
        let dir = tempfile::Builder::new().prefix("zk-client-test-").tempdir().unwrap();
        let port = free_port();
        let mut m = Managed {
            target,
            port,
            dir,
            child: None,
            extra: extra.to_string(),
            jvm_flags: jvm_flags.to_string(),
        };
        m.spawn();
        TestServer { addr: format!("127.0.0.1:{port}"), target, managed: Some(m) }
    }

    /// Starts `target` with Apache's SASL provider and the JAAS file `jaas` (written to
    /// `dir/jaas.conf`; zkrs reads its name from zoo.cfg, Apache from its JVM flags).
    pub fn start_with_jaas(target: Target, dir: &std::path::Path, jaas: &str) -> TestServer {
        let path = dir.join("jaas.conf");
        std::fs::write(&path, jaas).unwrap();
        Self::start_with(
            target,
            &format!(
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
                 java.security.auth.login.config={}\n",
                path.display()
            ),
        )
    }

    /// Whether this test run controls the server process.
    pub fn is_managed(&self) -> bool {
        self.managed.is_some()
    }

    /// Kills the server with SIGKILL (managed servers only).
    pub fn kill(&mut self) {
        if let Some(m) = &mut self.managed {
            m.kill();
        }
    }

    /// Starts the server again on the same port and data directory.
    pub fn restart(&mut self) {
        if let Some(m) = &mut self.managed {
            m.kill();
            m.spawn();
        }
    }

    /// Starts the server again on the same port and data directory with `jvm_flags` in place of
    /// the ones it had (managed servers only).
    pub fn restart_with_jvm_flags(&mut self, jvm_flags: &str) {
        if let Some(m) = &mut self.managed {
            m.kill();
            m.jvm_flags = jvm_flags.to_string();
            m.spawn();
        }
    }

    /// The server's `dataDir` (managed servers only).
    pub fn data_dir(&self) -> Option<PathBuf> {
        self.managed.as_ref().map(|m| m.dir.path().join("data"))
    }

    /// The server log, for failure messages.
    pub fn log(&self) -> String {
        match &self.managed {
            Some(m) => std::fs::read_to_string(m.dir.path().join("server.log")).unwrap_or_default(),
            None => String::new(),
        }
    }
}

impl Managed {
    fn spawn(&mut self) {
        let data = self.dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let cfg = format!(
            "tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=30000\ndataDir={}\n\
             clientPort={}\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\n\
             admin.enableServer=false\nextendedTypesEnabled=true\n{}{}",
            data.display(),
            self.port,
            self.extra,
            // A JVM property for Apache (below), a zoo.cfg key for zkrs.
            if self.target == Target::Zkrs { "znode.container.checkIntervalMs=500\n" } else { "" },
        );
        let cfg_path = self.dir.path().join("zoo.cfg");
        std::fs::write(&cfg_path, cfg).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("server.log"))
            .unwrap();
        let child = match self.target {
            Target::Apache => {
                assert!(
                    std::path::Path::new("/usr/share/java/zookeeper.jar").exists(),
                    "Debian's zookeeper package is needed (see test.sh)"
                );
                // zkrs reads the JAAS file's name from zoo.cfg too; Apache only from its JVM flags.
                let jaas: Vec<String> = self
                    .extra
                    .lines()
                    .filter(|l| l.starts_with("java.security.auth.login.config="))
                    .map(|l| format!("-D{l}"))
                    .collect();
                Command::new("java")
                    .args(jaas)
                    .arg(format!("-Dzookeeper.log.dir={}", self.dir.path().display()))
                    .arg("-Dzookeeper.root.logger=INFO,CONSOLE")
                    .arg("-Dznode.container.checkIntervalMs=500")
                    .arg("-Xmx256m")
                    .args(self.jvm_flags.split_whitespace())
                    .arg("-cp")
                    .arg(CLASSPATH)
                    .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
                    .arg(&cfg_path)
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("start java")
            }
            Target::Zkrs => Command::new(zkrs_binary())
                .arg(&cfg_path)
                .env("RUST_LOG", "info")
                .env("SERVER_JVMFLAGS", &self.jvm_flags)
                .env_remove("JVMFLAGS")
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .stdin(Stdio::null())
                .spawn()
                .expect("start zkrs-server"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if serving(addr) {
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("{:?} server exited ({st})", self.target);
            }
            assert!(Instant::now() < deadline, "{:?} server did not start", self.target);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `srvr` reports statistics only once the server accepts sessions (`ruok` answers earlier on
/// Apache, before its database is loaded).
fn serving(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"srvr").is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("Zookeeper version:")
}

/// A loopback TCP proxy in front of a server that can drop every connection and refuse new ones,
/// to simulate a network partition without touching the server.
pub struct Proxy {
    /// "127.0.0.1:port" of the proxy.
    pub addr: String,
    blocked: Arc<AtomicBool>,
    generation: Arc<AtomicU64>,
}

impl Proxy {
    /// Starts a proxy to `upstream` ("host:port") on the current tokio runtime.
    pub async fn start(upstream: &str) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let blocked = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let (b, g, up) = (blocked.clone(), generation.clone(), upstream.to_owned());
        tokio::spawn(async move {
            loop {
                let Ok((mut down, _)) = listener.accept().await else { return };
                if b.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection close at once
                }
                let gen = g.load(Ordering::SeqCst);
                let g2 = g.clone();
                let up = up.clone();
                tokio::spawn(async move {
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(&up).await else { return };
                    let copy = tokio::io::copy_bidirectional(&mut down, &mut upstream);
                    let cut = async {
                        while g2.load(Ordering::SeqCst) == gen {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    };
                    tokio::select! { _ = copy => {}, _ = cut => {} }
                });
            }
        });
        Proxy { addr, blocked, generation }
    }

    /// Drops every open connection.
    pub fn kick(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Drops every open connection and refuses new ones until `unblock`.
    pub fn block(&self) {
        self.blocked.store(true, Ordering::SeqCst);
        self.kick();
    }

    /// Lets connections through again.
    pub fn unblock(&self) {
        self.blocked.store(false, Ordering::SeqCst);
    }
}

/// A path prefix no other test uses, so tests can share an external server.
pub fn unique(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("/zkc-{name}-{}-{nanos}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}
