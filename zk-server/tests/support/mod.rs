//! Test support shared by the integration tests: start Apache ZooKeeper (Debian's `zookeeper`
//! package) or zkrs-server on a free loopback port, and talk to either with a small blocking
//! client built on zk-proto.
#![allow(dead_code)]

#[path = "../../../zk-client/tests/support/ports.rs"]
mod ports;

pub use ports::free_port;
pub mod client;
pub mod disk;
pub mod ensemble;
pub mod http;
pub mod interactive;
pub mod load;
pub mod pki;
pub mod transcript;
pub mod tree;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which server implementation a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Apache ZooKeeper 3.8 from Debian's package, run with the JVM.
    Apache,
    /// Our zkrs-server binary.
    Zkrs,
}

/// The Java class path of Debian's ZooKeeper; the jar's manifest names its dependencies. The
/// servlet API (Debian's libservlet-api-java) is added so that Apache's AdminServer can start
/// where a test enables it, and Netty's codec and resolver (Debian's libnetty-java, a dependency
/// of the zookeeper package) so that its TLS port and TLS client work (the stock class path lacks
/// all three).
pub const APACHE_CLASSPATH: &str =
    "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/servlet-api.jar:\
     /usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar";

/// A running server process, killed and its directory removed on drop.
pub struct ServerProc {
    /// Which implementation.
    pub target: Target,
    /// Client port on 127.0.0.1.
    pub port: u16,
    /// Its data directory and config live here.
    pub dir: tempfile::TempDir,
    child: Child,
    /// `SERVER_JVMFLAGS` it runs with (see [`start_with_jvm_flags`]).
    jvm_flags: String,
}

impl ServerProc {
    /// The client address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// "127.0.0.1:port", as connect strings want it.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends a four-letter word and returns the whole answer.
    pub fn four_letter(&self, cmd: &str) -> String {
        four_letter(self.addr(), cmd)
    }

    /// The value of `key` in the server's `mntr` output; panics naming the key when it is absent.
    pub fn mntr_value(&self, key: &str) -> String {
        mntr_value(self.addr(), key)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the server with SIGKILL and starts it again on the same port, config and data; waits
    /// until it serves.
    pub fn restart(&mut self) {
        self.kill();
        self.child = spawn_server(self.target, &self.config_path(), self.dir.path(), &self.jvm_flags);
        wait_ready(self);
    }

    /// Path of the config file the server was started with.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("zoo.cfg")
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The monitoring keys zkrs reports that Apache 3.8 does not (its own), and one Apache reports on
/// a leader only (`last_proposal_size`): `mntr` and the AdminServer's `monitor` tests allow them.
pub const ZKRS_ONLY_METRICS: [&str; 7] = [
    "log_disk_full",
    "writes_refused_disk_full",
    "memory_brake",
    "tree_memory_bytes",
    "tree_memory_soft_limit_bytes",
    "writes_refused_memory_brake",
    "last_proposal_size",
];

/// The server ids a configuration string (`server.N=...` lines) lists, each with its kind: `1p`
/// for a participant, `4o` for an observer.
pub fn members_of(config: &str) -> Vec<String> {
    config
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            let sid = k.strip_prefix("server.")?;
            let kind = if v.contains(":observer") { "o" } else { "p" };
            Some(format!("{sid}{kind}"))
        })
        .collect()
}

/// The value of `key` in the `mntr` output of the server at `addr`; panics naming the server and
/// the key when it is absent.
pub fn mntr_value(addr: SocketAddr, key: &str) -> String {
    let text = four_letter(addr, "mntr");
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('\t')))
        .unwrap_or_else(|| panic!("{addr}: no {key} in mntr:\n{text}"))
        .to_string()
}

/// Sends a four-letter word to `addr` and reads until the server closes.
pub fn four_letter(addr: SocketAddr, cmd: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect for 4lw");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(cmd.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Path of the zkrs-server binary the tests run: the one Cargo built for this test run, or the
/// one `ZKRS_BIN` names (to run a test against another build, an older commit's say, and see it
/// fail there).
pub fn zkrs_binary() -> PathBuf {
    match std::env::var_os("ZKRS_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_zkrs-server")),
    }
}

/// Starts `target` standalone with `tickTime=2000`, all four-letter words allowed, and `extra` zoo.cfg
/// lines appended. Waits until it serves (answers `srvr` with statistics).
pub fn start(target: Target, extra: &str) -> ServerProc {
    let dir = tempfile::Builder::new().prefix("zkrs-test-").tempdir().unwrap();
    start_in(target, dir, extra)
}

/// Like [`start`], in a directory the caller prepared (for restarts over the same data).
pub fn start_in(target: Target, dir: tempfile::TempDir, extra: &str) -> ServerProc {
    start_full(target, dir, &format!("4lw.commands.whitelist=*\n{extra}"), "")
}

/// Like [`start`] but leaves `4lw.commands.whitelist` out, so that the server's default applies.
pub fn start_with_default_words(target: Target, extra: &str) -> ServerProc {
    let dir = tempfile::Builder::new().prefix("zkrs-test-").tempdir().unwrap();
    start_full(target, dir, extra, "")
}

/// Like [`start`], with `SERVER_JVMFLAGS` set to `jvm_flags`, as zkServer.sh takes them: Apache's
/// JVM gets them on its command line (split at white space, as zkServer.sh's unquoted
/// `$SERVER_JVMFLAGS` is), zkrs-server finds them in its environment.
pub fn start_with_jvm_flags(target: Target, extra: &str, jvm_flags: &str) -> ServerProc {
    let dir = tempfile::Builder::new().prefix("zkrs-test-").tempdir().unwrap();
    start_full(target, dir, &format!("4lw.commands.whitelist=*\n{extra}"), jvm_flags)
}

fn start_full(target: Target, dir: tempfile::TempDir, extra: &str, jvm_flags: &str) -> ServerProc {
    let port = free_port();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let cfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
         admin.enableServer=false\n{extra}\n",
        data.display()
    );
    let cfg_path = dir.path().join("zoo.cfg");
    std::fs::write(&cfg_path, cfg).unwrap();
    let child = spawn_server(target, &cfg_path, dir.path(), jvm_flags);
    let mut proc = ServerProc { target, port, dir, child, jvm_flags: jvm_flags.to_string() };
    wait_ready(&mut proc);
    proc
}

fn spawn_server(target: Target, cfg_path: &Path, dir: &Path, jvm_flags: &str) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log")).unwrap();
    match target {
        Target::Apache => {
            assert_apache_installed();
            Command::new("java")
                .arg(format!("-Dzookeeper.log.dir={}", dir.display()))
                .arg("-Dzookeeper.root.logger=INFO,CONSOLE")
                // Reap containers and TTL nodes quickly, as tests configure zkrs to.
                .arg("-Dznode.container.checkIntervalMs=500")
                .arg("-Xmx512m")
                .args(jvm_flags.split_whitespace())
                .arg("-cp")
                .arg(APACHE_CLASSPATH)
                .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
                .arg(cfg_path)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .stdin(Stdio::null())
                .spawn()
                .expect("start java")
        }
        Target::Zkrs => Command::new(zkrs_binary())
            .arg(cfg_path)
            .env("RUST_LOG", "info")
            .env("SERVER_JVMFLAGS", jvm_flags)
            .env_remove("JVMFLAGS")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start zkrs-server"),
    }
}

fn wait_ready(p: &mut ServerProc) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("{:?} server exited early ({status}); log:\n{}", p.target, server_log(p.dir.path()));
        }
        if let Ok(mut s) = TcpStream::connect_timeout(&p.addr(), Duration::from_millis(200)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            // `ruok` answers before Apache ZooKeeper has loaded its database; `srvr` reports
            // statistics only once the server accepts sessions.
            if s.write_all(b"srvr").is_ok() {
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                if out.starts_with("Zookeeper version:") {
                    return;
                }
            }
        }
        if Instant::now() > deadline {
            panic!("{:?} server did not come up; log:\n{}", p.target, server_log(p.dir.path()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The server's log so far, for failure messages.
pub fn server_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

/// Fails with a clear message when Debian's ZooKeeper is missing (the README's test command installs it).
pub fn assert_apache_installed() {
    assert!(
        Path::new("/usr/share/java/zookeeper.jar").exists(),
        "Apache ZooKeeper is not installed: run the README's test command (it installs Debian's \
         zookeeper, zookeeper-bin, libzookeeper-mt-dev and python3-kazoo)"
    );
}

/// Waits for `child` (its output piped) to end, killing it after `limit`, and collects its output.
pub fn wait_output(mut child: Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Starts zkrs-server on the zoo.cfg `cfg` (written into `dir`), expecting it to refuse to start;
/// returns what it printed.
pub fn refused(dir: &Path, cfg: &str) -> String {
    let path = dir.join("zoo.cfg");
    std::fs::write(&path, cfg).unwrap();
    let child =
        Command::new(zkrs_binary()).arg(&path).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = wait_output(child, Duration::from_secs(20));
    assert!(!out.status.success(), "started with {cfg}");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Runs Apache's Java shell (zkCli.sh's class, `ZooKeeperMain`) with the JVM options `jvm_args`
/// against `server` (a connect string) for one `command`; returns its stdout and stderr.
pub fn java_cli(jvm_args: &[String], server: &str, command: &str) -> (String, String) {
    assert_apache_installed();
    let child = Command::new("java")
        .arg("-cp")
        .arg(APACHE_CLASSPATH)
        .args(jvm_args)
        .args(["org.apache.zookeeper.ZooKeeperMain", "-server", server, command])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run java");
    let out = wait_output(child, Duration::from_secs(90));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The targets a differential test runs against.
pub const BOTH: [Target; 2] = [Target::Apache, Target::Zkrs];
