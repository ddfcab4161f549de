//! A three-server Apache ZooKeeper 3.8 ensemble on loopback ports with read-only mode enabled, whose
//! third member can be cut off from the other two for good (the pattern of zk-server's
//! tests/support/ensemble.rs, reduced to this). Self-contained: zk-ffi's tests use it too.
//!
//! Apache reads `readonlymode.enabled` as a JVM system property, not from zoo.cfg, and a read-only
//! Apache server only creates sessions when `localSessionsEnabled=true` (a new global session is a
//! write it refuses with NOTREADONLY), so the members run with both.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One member: its directory (zoo.cfg, data/, server.log), client address and process.
pub struct Member {
    dir: PathBuf,
    /// The client address.
    pub client: SocketAddr,
    child: Option<Child>,
}

/// Three Apache servers, killed on drop.
pub struct RoEnsemble {
    _root: tempfile::TempDir,
    /// The members, myid = index + 1.
    pub members: Vec<Member>,
    /// Each member's (quorum, election) ports.
    peer_ports: Vec<(u16, u16)>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl RoEnsemble {
    /// Configures and starts the three servers and waits until they serve clients.
    pub fn start() -> RoEnsemble {
        assert!(
            std::path::Path::new("/usr/share/java/zookeeper.jar").exists(),
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
        let mut e = RoEnsemble { _root: root, members, peer_ports };
        for i in 0..3 {
            e.write_config(i, false);
            e.launch(i);
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        for i in 0..3 {
            while !four(e.members[i].client, "srvr").is_some_and(|t| t.starts_with("Zookeeper version:")) {
                assert!(Instant::now() < deadline, "member {} never served\n{}", i + 1, e.logs());
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
             4lw.commands.whitelist=*\nadmin.enableServer=false\nlocalSessionsEnabled=true\n{lines}",
            m.dir.join("data").display(),
            m.client.port()
        );
        std::fs::write(m.dir.join("zoo.cfg"), cfg).unwrap();
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

    /// Starts member `i` (index) with read-only mode enabled.
    pub fn launch(&mut self, i: usize) {
        let m = &mut self.members[i];
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(m.dir.join("server.log")).unwrap();
        let child = Command::new("java")
            .arg("-Dreadonlymode.enabled=true")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg("/etc/zookeeper/conf:/usr/share/java/zookeeper.jar")
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(m.dir.join("zoo.cfg"))
            .current_dir(&m.dir)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start java");
        m.child = Some(child);
    }

    /// Kills member `i` (index).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Member `i`'s answer to `isro` ("ro", "rw"), or None when it does not answer.
    pub fn isro(&self, i: usize) -> Option<String> {
        four(self.members[i].client, "isro").map(|t| t.trim().to_string())
    }

    /// Waits (90 s at most) until member `i` answers `isro` with `want`.
    pub fn wait_isro(&self, i: usize, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while self.isro(i).as_deref() != Some(want) {
            assert!(Instant::now() < deadline, "member {} never answered {want}\n{}", i + 1, self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The tail of every member's output, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(m.dir.join("server.log")).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(60).collect();
                format!("--- {}\n{}", m.dir.display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// "host:port,host:port,host:port" of the members' client ports.
    pub fn connect_string(&self) -> String {
        self.members.iter().map(|m| m.client.to_string()).collect::<Vec<_>>().join(",")
    }
}

/// A four-letter word's answer, or None when the server does not answer.
fn four(addr: SocketAddr, word: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(word.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

impl Drop for RoEnsemble {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
