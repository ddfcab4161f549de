//! A three-server Apache ZooKeeper 3.8 ensemble on loopback ports with read-only mode enabled, the
//! third member's quorum and election traffic going through [`Proxy`]s so a test can cut it off
//! from the other two (the pattern of zk-server's tests/support/ensemble.rs, reduced to this).
//!
//! Apache reads `readonlymode.enabled` as a JVM system property, not from zoo.cfg, and a read-only
//! Apache server only creates sessions when `localSessionsEnabled=true` (a new global session is a
//! write it refuses with NOTREADONLY), so the members run with both.

use super::{free_port, serving, Proxy, CLASSPATH};
use std::net::SocketAddr;
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

/// Three Apache servers, killed on drop. Member 3 (index 2) reaches the others, and they reach
/// it, only through `partition`'s proxies.
pub struct RoEnsemble {
    _root: tempfile::TempDir,
    /// The members, myid = index + 1.
    pub members: Vec<Member>,
    /// Every quorum and election link between member 3 and the others.
    pub partition: Vec<Proxy>,
}

impl RoEnsemble {
    /// Writes the configurations and starts the three servers.
    pub async fn start() -> RoEnsemble {
        assert!(
            std::path::Path::new("/usr/share/java/zookeeper.jar").exists(),
            "Debian's zookeeper package is needed"
        );
        let root = tempfile::Builder::new().prefix("zk-client-ro-").tempdir().unwrap();
        let ports: Vec<[u16; 3]> = (0..3).map(|_| [free_port(), free_port(), free_port()]).collect();
        // proxied[j] = (quorum, election) proxies in front of member j, for the other side to use.
        let mut partition = Vec::new();
        let mut proxied = Vec::new();
        for p in &ports {
            let q = Proxy::start(&format!("127.0.0.1:{}", p[1])).await;
            let e = Proxy::start(&format!("127.0.0.1:{}", p[2])).await;
            proxied.push((q.addr.clone(), e.addr.clone()));
            partition.push(q);
            partition.push(e);
        }
        let mut members = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let lines: String = (0..3)
                .map(|j| {
                    // Links between member 3 and another member go through the proxies.
                    if i != j && (i == 2 || j == 2) {
                        format!("server.{}={}:{}\n", j + 1, proxied[j].0, port_of(&proxied[j].1))
                    } else {
                        format!("server.{}=127.0.0.1:{}:{}\n", j + 1, ports[j][1], ports[j][2])
                    }
                })
                .collect();
            let dir = root.path().join(format!("s{}", i + 1));
            std::fs::create_dir_all(dir.join("data")).unwrap();
            std::fs::write(dir.join("data/myid"), format!("{}\n", i + 1)).unwrap();
            let cfg = format!(
                "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
                 4lw.commands.whitelist=*\nadmin.enableServer=false\nlocalSessionsEnabled=true\n{lines}",
                dir.join("data").display(),
                p[0]
            );
            std::fs::write(dir.join("zoo.cfg"), cfg).unwrap();
            let client = SocketAddr::from(([127, 0, 0, 1], p[0]));
            members.push(Member { dir, client, child: None });
        }
        let mut e = RoEnsemble { _root: root, members, partition };
        for i in 0..3 {
            e.launch(i);
        }
        e
    }

    /// Starts member `i` (index) with read-only mode enabled.
    pub fn launch(&mut self, i: usize) {
        let m = &mut self.members[i];
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(m.dir.join("server.log")).unwrap();
        let child = Command::new("java")
            .arg("-Dreadonlymode.enabled=true")
            .arg(format!("-Dzookeeper.log.dir={}", m.dir.display()))
            .arg("-Dzookeeper.root.logger=INFO,CONSOLE")
            .arg("-Xmx256m")
            .arg("-cp")
            .arg(CLASSPATH)
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

    /// Waits (60 s at most) until every running member serves clients.
    pub fn wait_serving(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        for (i, m) in self.members.iter().enumerate() {
            while m.child.is_some() && !serving(m.client) {
                assert!(Instant::now() < deadline, "member {} never served\n{}", i + 1, self.logs());
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// Member `i`'s answer to `isro` ("ro", "rw"), or None when it does not answer.
    pub fn isro(&self, i: usize) -> Option<String> {
        use std::io::{Read, Write};
        let mut s =
            std::net::TcpStream::connect_timeout(&self.members[i].client, Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(b"isro").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out.trim().to_string())
    }

    /// Waits (90 s at most) until member `i` answers `isro` with `want`.
    pub fn wait_isro(&self, i: usize, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while self.isro(i).as_deref() != Some(want) {
            assert!(Instant::now() < deadline, "member {} never answered {want}\n{}", i + 1, self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The tail of every member's log, for failure messages.
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

fn port_of(addr: &str) -> &str {
    addr.rsplit(':').next().unwrap_or(addr)
}

impl Drop for RoEnsemble {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
