//! The servers of a run, each in its own namespace: zoo.cfg and myid written the same way for zkrs
//! and Apache ZooKeeper, the transaction log on a small tmpfs of its own (so that the disk can be
//! filled), and, where libfaketime is installed, a wall clock the harness can jump.

use super::net::{run, Net};
use crate::support::{
    self,
    ensemble::{four, Kind},
};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's libfaketime puts the library.
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// Size of each server's log tmpfs.
const LOG_DISK_MIB: u32 = 48;

/// One server.
pub struct Node {
    dir: PathBuf,
    log_disk: PathBuf,
    child: Option<Child>,
    frozen: bool,
    /// Which server it runs.
    kind: Kind,
    /// Whether it runs under libfaketime (zkrs servers, where it is installed).
    faketime: bool,
    /// The wall-clock offset given to libfaketime, seconds.
    clock_offset: i64,
}

/// The servers, their network, their directories.
pub struct Cluster {
    /// The network the servers are in.
    pub net: Net,
    nodes: Vec<Node>,
    _root: tempfile::TempDir,
}

/// The client port every server listens on, in its own namespace.
pub const CLIENT_PORT: u16 = 2181;

impl Cluster {
    /// Makes the network, writes each server's configuration and mounts its log disk; starts
    /// nothing. `kinds`: each server's implementation. `faketime`: run the zkrs servers under
    /// libfaketime (wall-clock jumps; Apache's JVM is never run under it: its clock reads through
    /// the library made it about thirty times slower here, which would measure the library).
    pub fn create(kinds: &[Kind], faketime: bool) -> Result<Cluster, String> {
        let n = kinds.len();
        let net = Net::create(n)?;
        sweep_stale_disks();
        let root = tempfile::Builder::new().prefix("zkrs-faults-").tempdir().map_err(|e| e.to_string())?;
        // Whose run this is, for the sweep of a later run if this one is killed before its cleanup.
        std::fs::write(root.path().join("pid"), std::process::id().to_string()).map_err(|e| e.to_string())?;
        let servers: String =
            (0..n).map(|i| format!("server.{}={}:2888:3888;{CLIENT_PORT}\n", i + 1, net.addr(i))).collect();
        let mut nodes = Vec::new();
        for (i, &kind) in kinds.iter().enumerate() {
            let dir = root.path().join(format!("s{}", i + 1));
            let data = dir.join("data");
            let log_disk = dir.join("log");
            std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
            std::fs::create_dir_all(&log_disk).map_err(|e| e.to_string())?;
            std::fs::write(data.join("myid"), format!("{}\n", i + 1)).map_err(|e| e.to_string())?;
            if let Err(e) = run(
                "mount",
                &["-t", "tmpfs", "-o", &format!("size={LOG_DISK_MIB}m"), "tmpfs", path(&log_disk)],
            ) {
                for n in &nodes {
                    let n: &Node = n;
                    let _ = run("umount", &["-l", path(&n.log_disk)]);
                }
                return Err(e);
            }
            let cfg = format!(
                "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\ndataLogDir={}\n\
                 clientPort={CLIENT_PORT}\n4lw.commands.whitelist=*\nadmin.enableServer=false\n\
                 snapCount=4000\npreAllocSize=2048\nmaxClientCnxns=0\n{servers}",
                data.display(),
                log_disk.join("txn").display(),
            );
            std::fs::write(dir.join("zoo.cfg"), cfg).map_err(|e| e.to_string())?;
            std::fs::write(dir.join("clock"), "+0\n").map_err(|e| e.to_string())?;
            let faketime = faketime && kind == Kind::Zkrs;
            nodes.push(Node { dir, log_disk, child: None, frozen: false, kind, faketime, clock_offset: 0 });
        }
        Ok(Cluster { net, nodes, _root: root })
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The connect string naming every server, in the order `order`.
    pub fn connect_string(&self, order: &[usize]) -> String {
        order.iter().map(|&i| format!("{}:{CLIENT_PORT}", self.net.addr(i))).collect::<Vec<_>>().join(",")
    }

    /// Server `i`'s client address.
    pub fn client_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.net.addr(i).into(), CLIENT_PORT)
    }

    /// Starts server `i` in its namespace.
    pub fn launch(&mut self, i: usize) -> Result<(), String> {
        let ns = self.net.ns(i);
        let node = &mut self.nodes[i];
        if node.child.is_some() {
            return Ok(());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.dir.join("server.log"))
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &ns]);
        match node.kind {
            Kind::Zkrs => {
                // FAULT_ZKRS_LOG: a RUST_LOG directive for a closer look at a run (default info).
                let level = std::env::var("FAULT_ZKRS_LOG").unwrap_or_else(|_| "info".into());
                cmd.arg(support::zkrs_binary()).arg(node.dir.join("zoo.cfg")).env("RUST_LOG", level);
            }
            Kind::Apache => {
                support::assert_apache_installed();
                // slf4j's simple binding (Debian's libslf4j-java, a dependency of the zookeeper
                // package): Apache's log lines in server.log, with times, for reading a run.
                let classpath = format!("{}:/usr/share/java/slf4j-simple.jar", support::APACHE_CLASSPATH);
                cmd.args(["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.showDateTime=true"])
                    .arg("-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ");
                // FAULT_APACHE_DEBUG: Apache classes to log at debug level, comma-separated
                // (e.g. org.apache.zookeeper.server.quorum.CommitProcessor), for a closer look.
                for class in std::env::var("FAULT_APACHE_DEBUG").unwrap_or_default().split(',') {
                    let class = class.trim();
                    if !class.is_empty() {
                        cmd.arg(format!("-Dorg.slf4j.simpleLogger.log.{class}=debug"));
                    }
                }
                cmd.args(["-cp", &classpath])
                    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                    .arg(node.dir.join("zoo.cfg"));
            }
        }
        if node.faketime {
            // Only the wall clock moves: a monotonic clock never jumps back, and a forward jump of
            // it is what a frozen process already sees.
            cmd.env("LD_PRELOAD", FAKETIME_LIB)
                .env("FAKETIME_TIMESTAMP_FILE", node.dir.join("clock"))
                .env("FAKETIME_CACHE_DURATION", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let child = cmd
            .current_dir(&node.dir)
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("start server {}: {e}", i + 1))?;
        node.child = Some(child);
        node.frozen = false;
        Ok(())
    }

    /// Whether server `i` runs (it may be frozen).
    pub fn running(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// Whether server `i` is frozen.
    pub fn frozen(&self, i: usize) -> bool {
        self.nodes[i].frozen
    }

    /// kill -9 of server `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.nodes[i].frozen = false;
    }

    fn signal(&self, i: usize, sig: &str) -> Result<(), String> {
        let pid =
            self.nodes[i].child.as_ref().ok_or_else(|| format!("server {} is not running", i + 1))?.id();
        run("kill", &[&format!("-{sig}"), &pid.to_string()])
    }

    /// SIGSTOP of server `i`.
    pub fn freeze(&mut self, i: usize) -> Result<(), String> {
        self.signal(i, "STOP")?;
        self.nodes[i].frozen = true;
        Ok(())
    }

    /// SIGCONT of server `i`.
    pub fn thaw(&mut self, i: usize) -> Result<(), String> {
        if self.nodes[i].frozen {
            self.signal(i, "CONT")?;
            self.nodes[i].frozen = false;
        }
        Ok(())
    }

    /// Fills server `i`'s log disk to the last byte.
    pub fn fill_disk(&self, i: usize) -> Result<u64, String> {
        let ballast = self.nodes[i].log_disk.join("ballast");
        let mut f = std::fs::File::create(&ballast).map_err(|e| e.to_string())?;
        let chunk = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        // Bounded by the disk's size: ENOSPC ends it.
        for _ in 0..(LOG_DISK_MIB as usize * 16 + 16) {
            match f.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n as u64,
            }
        }
        // Then the last partial bytes.
        for _ in 0..65_536 {
            if !matches!(f.write(&chunk[..1]), Ok(1)) {
                break;
            }
            total += 1;
        }
        Ok(total)
    }

    /// Frees what [`Self::fill_disk`] took.
    pub fn free_disk(&self, i: usize) {
        let _ = std::fs::remove_file(self.nodes[i].log_disk.join("ballast"));
    }

    /// Moves server `i`'s wall clock by `secs` (libfaketime re-reads the offset within a second).
    pub fn jump_clock(&mut self, i: usize, secs: i64) -> Result<(), String> {
        let node = &mut self.nodes[i];
        if !node.faketime {
            return Err(format!("server {} does not run under libfaketime", i + 1));
        }
        node.clock_offset += secs;
        let spec = if node.clock_offset >= 0 {
            format!("+{}\n", node.clock_offset)
        } else {
            format!("{}\n", node.clock_offset)
        };
        std::fs::write(node.dir.join("clock"), spec).map_err(|e| e.to_string())
    }

    /// The servers whose wall clock can be jumped.
    pub fn clock_servers(&self) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].faketime).collect()
    }

    /// Whether any server is Apache ZooKeeper.
    pub fn has_apache(&self) -> bool {
        self.nodes.iter().any(|n| n.kind == Kind::Apache)
    }

    /// Server `i`'s implementation.
    pub fn kind(&self, i: usize) -> Kind {
        self.nodes[i].kind
    }

    /// Puts every wall clock back.
    pub fn reset_clocks(&mut self) {
        for node in &mut self.nodes {
            node.clock_offset = 0;
            let _ = std::fs::write(node.dir.join("clock"), "+0\n");
        }
    }

    /// `srvr`'s Mode line of server `i` ("leader", "follower", ...), None when it does not answer
    /// or does not serve.
    pub fn mode(&self, i: usize) -> Option<String> {
        if !self.running(i) || self.frozen(i) {
            return None;
        }
        let text = four(self.client_addr(i), "srvr")?;
        text.lines().find_map(|l| l.strip_prefix("Mode: ").map(str::to_string))
    }

    /// `srvr`'s Zxid of server `i`.
    pub fn zxid(&self, i: usize) -> Option<String> {
        let text = four(self.client_addr(i), "srvr")?;
        text.lines().find_map(|l| l.strip_prefix("Zxid: ").map(str::to_string))
    }

    /// The server that says it leads, if exactly one does.
    pub fn leader(&self) -> Option<usize> {
        let leaders: Vec<usize> =
            (0..self.len()).filter(|&i| self.mode(i).as_deref() == Some("leader")).collect();
        (leaders.len() == 1).then(|| leaders[0])
    }

    /// Waits until every server serves, one of them leading.
    pub fn wait_all_serving(&self, within: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + within;
        loop {
            let modes: Vec<Option<String>> = (0..self.len()).map(|i| self.mode(i)).collect();
            let leaders = modes.iter().filter(|m| m.as_deref() == Some("leader")).count();
            if leaders == 1 && modes.iter().all(|m| matches!(m.as_deref(), Some("leader" | "follower"))) {
                return Ok(modes.iter().position(|m| m.as_deref() == Some("leader")).unwrap_or(0));
            }
            if Instant::now() > deadline {
                return Err(format!("the servers did not all serve within {within:?}: {modes:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Copies every server's data and transaction log directories into `out` (kept for a run
    /// with anomalies: `zkrs-server dump-log` and Apache's tools read them).
    pub fn save_data(&self, out: &Path) {
        for (i, n) in self.nodes.iter().enumerate() {
            let to = out.join(format!("server{}-data", i + 1));
            let _ = std::fs::create_dir_all(&to);
            for from in [n.dir.join("data"), n.log_disk.join("txn")] {
                let _ = run("cp", &["-a", path(&from), path(&to)]);
            }
        }
    }

    /// Copies every server's log into `out`.
    pub fn save_logs(&self, out: &Path) {
        for (i, n) in self.nodes.iter().enumerate() {
            let _ = std::fs::copy(n.dir.join("server.log"), out.join(format!("server{}.log", i + 1)));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            let _ = self.thaw(i);
            self.kill(i);
        }
        for n in &self.nodes {
            let _ = run("umount", &["-l", path(&n.log_disk)]);
        }
    }
}

/// Unmounts and removes the log disks of runs whose process is gone.
fn sweep_stale_disks() {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for mount in mounts.lines().filter_map(|l| l.split_whitespace().nth(1)) {
        if !mount.contains("/zkrs-faults-") || !mount.ends_with("/log") {
            continue;
        }
        let Some(root) = Path::new(mount).parent().and_then(Path::parent) else { continue };
        let owner = std::fs::read_to_string(root.join("pid")).unwrap_or_default();
        let alive = owner.trim().parse::<u32>().is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = run("umount", &["-l", mount]);
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}
