//! A three-server ensemble (Apache ZooKeeper 3.8 or zkrs) on loopback ports with read-only mode
//! enabled, whose third member can be cut off from the other two for good (the pattern of
//! zk-server's tests/support/ensemble.rs, reduced to this). Self-contained: zk-ffi's tests use it
//! too.
//!
//! Apache reads `readonlymode.enabled` as a JVM system property, not from zoo.cfg, and a read-only
//! Apache server only creates sessions when `localSessionsEnabled=true` (a new global session is a
//! write it refuses with NOTREADONLY), so the members run with both; zkrs reads the key from
//! zoo.cfg.

#[path = "ports.rs"]
mod ports;

use ports::free_port;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One member: its directory (zoo.cfg, data/), client address and process.
pub struct Member {
    dir: PathBuf,
    /// The client address.
    pub client: SocketAddr,
    child: Option<Child>,
}

/// Which server the members run.
#[derive(Debug, Clone)]
pub enum RoServer {
    /// Apache ZooKeeper 3.8 (Debian's package).
    Apache,
    /// zkrs-server, this binary.
    Zkrs(PathBuf),
}

/// Three servers, killed on drop.
pub struct RoEnsemble {
    server: RoServer,
    /// zoo.cfg lines every member gets besides the read-only ones.
    extra: String,
    _root: tempfile::TempDir,
    /// The members, myid = index + 1.
    pub members: Vec<Member>,
    /// Each member's (quorum, election) ports.
    peer_ports: Vec<(u16, u16)>,
}

impl RoEnsemble {
    /// Configures and starts the three servers and waits until they serve clients.
    pub fn start(server: RoServer) -> RoEnsemble {
        RoEnsemble::start_with(server, "")
    }

    /// As [`Self::start`], with `extra` zoo.cfg lines on every member.
    pub fn start_with(server: RoServer, extra: &str) -> RoEnsemble {
        assert!(
            !matches!(server, RoServer::Apache)
                || std::path::Path::new("/usr/share/java/zookeeper.jar").exists(),
            "Debian's zookeeper package is needed"
        );
        let root = tempfile::Builder::new().prefix("zk-ro-ensemble-").tempdir().unwrap();
        let peer_ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let mut members = Vec::new();
        for i in 0..3 {
            let dir = root.path().join(format!("s{}", i + 1));
            std::fs::create_dir_all(dir.join("data")).unwrap();
            std::fs::write(dir.join("data/myid"), format!("{}\n", i + 1)).unwrap();
            let client = SocketAddr::from(([127, 0, 0, 1], free_port()));
            members.push(Member { dir, client, child: None });
        }
        let mut e = RoEnsemble { server, extra: extra.to_owned(), _root: root, members, peer_ports };
        for i in 0..3 {
            e.write_config(i, false);
            e.launch(i);
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        for i in 0..3 {
            while !four(e.members[i].client, "srvr").is_some_and(|t| t.starts_with("Zookeeper version:")) {
                assert!(Instant::now() < deadline, "member {} never served", i + 1);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        e
    }

    /// Member `i`'s zoo.cfg; with `cut`, member 3 and the other two name each other at ports
    /// nothing listens on, so they never meet again.
    fn write_config(&self, i: usize, cut: bool) {
        let lines: String = (0..3)
            .map(|j| {
                let (q, el) = if cut && i != j && (i == 2 || j == 2) {
                    (free_port(), free_port())
                } else {
                    self.peer_ports[j]
                };
                format!("server.{}=127.0.0.1:{q}:{el}\n", j + 1)
            })
            .collect();
        let m = &self.members[i];
        let cfg = format!(
            "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=*\nadmin.enableServer=false\nlocalSessionsEnabled=true\n\
             readonlymode.enabled=true\n{lines}{}",
            m.dir.join("data").display(),
            m.client.port(),
            self.extra
        );
        std::fs::write(m.dir.join("zoo.cfg"), cfg).unwrap();
    }

    /// Member `i`'s entry for a reconfig's joining list: `server.N=host:quorum:election:participant;host:client`.
    pub fn joining_spec(&self, i: usize) -> String {
        let (q, e) = self.peer_ports[i];
        format!("server.{}=127.0.0.1:{q}:{e}:participant;{}", i + 1, self.members[i].client)
    }

    /// Stops every member and rewrites the configurations so that, started again, member 3 and
    /// the other two never reach each other: member 3 alone goes read-only with the data it has,
    /// members 1 and 2 together make a read-write quorum.
    pub fn cut_off_member_3(&mut self) {
        for i in 0..3 {
            self.kill(i);
            self.write_config(i, true);
        }
    }

    /// Starts member `i` (index) with read-only mode enabled. Debian's classpath gives Apache no
    /// logger binding, so its output is dropped; zkrs logs to `server.log` in its directory.
    pub fn launch(&mut self, i: usize) {
        let m = &mut self.members[i];
        let cfg = m.dir.join("zoo.cfg");
        let mut cmd = match &self.server {
            RoServer::Apache => {
                let args = [
                    "-Dreadonlymode.enabled=true",
                    "-Xmx256m",
                    "-cp",
                    "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar",
                ];
                let mut cmd = Command::new("java");
                cmd.args(args).arg("org.apache.zookeeper.server.quorum.QuorumPeerMain").arg(cfg);
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
                cmd
            }
            RoServer::Zkrs(bin) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(m.dir.join("server.log"))
                    .expect("server.log");
                let mut cmd = Command::new(bin);
                cmd.arg(cfg).env("RUST_LOG", "info");
                cmd.stdout(log.try_clone().expect("server.log")).stderr(log);
                cmd
            }
        };
        cmd.current_dir(&m.dir).stdin(Stdio::null());
        m.child = Some(cmd.spawn().expect("start java"));
    }

    /// Every zkrs member's `server.log` so far (Apache's output is dropped), for a failure's
    /// message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, m) in self.members.iter().enumerate() {
            let log = std::fs::read_to_string(m.dir.join("server.log")).unwrap_or_default();
            out.push_str(&format!("--- member {}\n{log}", i + 1));
        }
        out
    }

    /// Kills member `i` (index) and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(c) = self.members[i].child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.members[i].child = None;
    }

    /// Member `i`'s answer to `isro` ("ro", "rw"), or None when it does not answer.
    pub fn isro(&self, i: usize) -> Option<String> {
        four(self.members[i].client, "isro").map(|t| t.trim().to_string())
    }

    /// Waits (90 s at most) until member `i` answers `isro` with `want`.
    pub fn wait_isro(&self, i: usize, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while self.isro(i).as_deref() != Some(want) {
            assert!(Instant::now() < deadline, "member {} never answered {want}", i + 1);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// "host:port,host:port,host:port" of the members' client ports.
    pub fn connect_string(&self) -> String {
        self.members.iter().map(|m| m.client.to_string()).collect::<Vec<_>>().join(",")
    }
}

/// What the server at `addr` answers to a four-letter word (at most 4 KiB of it), or None when it
/// does not answer within a couple of seconds.
fn four(addr: SocketAddr, word: &str) -> Option<String> {
    use std::io::{Read, Write};
    let limit = Duration::from_secs(2);
    let mut conn = std::net::TcpStream::connect_timeout(&addr, limit).ok()?;
    conn.set_read_timeout(Some(limit)).ok()?;
    conn.write_all(word.as_bytes()).ok()?;
    let mut answer = Vec::new();
    conn.take(4096).read_to_end(&mut answer).ok()?;
    String::from_utf8(answer).ok()
}

impl Drop for RoEnsemble {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
