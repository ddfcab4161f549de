//! Ensembles of real server processes on loopback ports: zkrs, Apache ZooKeeper 3.8, or both
//! mixed, each member in its own directory with zoo.cfg, myid and server.log.

use super::client::RawClient;
use super::free_port;
use super::zkrs_binary;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use zk_proto::*;

/// A free loopback port never handed out before in this process. The tests here run ensembles
/// side by side; two of them given the same port (one test's port released, the next test's
/// probe finding it free before the first server bound it) would have servers of different
/// ensembles talk to each other.
pub fn unique_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let p = free_port();
        if !given.contains(&p) {
            given.push(p);
            return p;
        }
    }
}

/// Which server a member runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// zkrs-server.
    Zkrs,
    /// Apache ZooKeeper 3.8 (Debian).
    Apache,
}

/// One server of an ensemble.
pub struct Member {
    /// Which server it runs.
    pub kind: Kind,
    /// Its directory: zoo.cfg, data/, server.log.
    pub dir: PathBuf,
    /// Its client address.
    pub client: SocketAddr,
    /// The process, while it runs.
    pub child: Option<Child>,
}

/// An ensemble of zkrs processes, killed and removed on drop.
pub struct Ensemble {
    _root: tempfile::TempDir,
    /// The members, myid = index + 1.
    pub members: Vec<Member>,
}

impl Ensemble {
    pub fn start(n: usize) -> Ensemble {
        let mut e = Ensemble::configure(&vec![Kind::Zkrs; n]);
        for i in 0..n {
            e.launch(i);
        }
        e
    }

    /// Writes the members' configurations without starting them.
    pub fn configure(kinds: &[Kind]) -> Ensemble {
        Ensemble::configure_with(kinds, &[])
    }

    /// As [`Self::configure`], the members at `observers` (indexes) being observers.
    pub fn configure_with(kinds: &[Kind], observers: &[usize]) -> Ensemble {
        let n = kinds.len();
        let root = tempfile::tempdir().expect("temp dir");
        let ports: Vec<(u16, u16, u16)> =
            (0..n).map(|_| (unique_port(), unique_port(), unique_port())).collect();
        let lines: String = ports
            .iter()
            .enumerate()
            .map(|(i, (_, q, e))| {
                let kind = if observers.contains(&i) { ":observer" } else { "" };
                format!("server.{}=127.0.0.1:{q}:{e}{kind}\n", i + 1)
            })
            .collect();
        let mut members = Vec::new();
        for (i, (c, _, _)) in ports.iter().enumerate() {
            let dir = root.path().join(format!("s{}", i + 1));
            std::fs::create_dir_all(dir.join("data")).expect("mkdir");
            std::fs::write(dir.join("data/myid"), format!("{}\n", i + 1)).expect("myid");
            let peer_type = if observers.contains(&i) { "peerType=observer\n" } else { "" };
            let cfg = format!(
                "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nclientPort={c}\nclientPortAddress=127.0.0.1\n\
                 4lw.commands.whitelist=*\nadmin.enableServer=false\n{peer_type}{lines}",
                dir.join("data").display()
            );
            std::fs::write(dir.join("zoo.cfg"), cfg).expect("zoo.cfg");
            let client = format!("127.0.0.1:{c}").parse().expect("addr");
            members.push(Member { kind: kinds[i], dir, client, child: None });
        }
        Ensemble { _root: root, members }
    }

    /// Appends `lines` to every member's zoo.cfg (before they are launched).
    pub fn append_config(&self, lines: &str) {
        use std::io::Write;
        for m in &self.members {
            let mut f =
                std::fs::OpenOptions::new().append(true).open(m.dir.join("zoo.cfg")).expect("zoo.cfg");
            f.write_all(lines.as_bytes()).expect("zoo.cfg");
        }
    }

    pub fn launch(&mut self, i: usize) {
        let m = &mut self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(m.dir.join("server.log"))
            .expect("log");
        let mut cmd = match m.kind {
            Kind::Zkrs => {
                let mut c = Command::new(zkrs_binary());
                c.arg(m.dir.join("zoo.cfg")).env("RUST_LOG", "info");
                c
            }
            Kind::Apache => {
                super::assert_apache_installed();
                let mut c = Command::new("java");
                // Apache reads read-only mode from a system property only (a zoo.cfg key becomes
                // "zookeeper.readonlymode.enabled", which nothing reads); zkrs reads the key.
                let cfg = std::fs::read_to_string(m.dir.join("zoo.cfg")).unwrap_or_default();
                if cfg.lines().any(|l| l.trim() == "readonlymode.enabled=true") {
                    c.arg("-Dreadonlymode.enabled=true");
                }
                c.arg("-Xmx256m")
                    .arg("-cp")
                    .arg(super::APACHE_CLASSPATH)
                    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                    .arg(m.dir.join("zoo.cfg"))
                    .current_dir(&m.dir);
                c
            }
        };
        let child = cmd
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start zkrs-server");
        m.child = Some(child);
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn mode(&self, i: usize) -> Option<String> {
        self.members[i].child.as_ref()?;
        let text = srvr(self.members[i].client)?;
        text.lines().find_map(|l| l.strip_prefix("Mode: ").map(str::to_string))
    }

    /// Waits until the live members are one leader and followers; returns the leader's index.
    pub fn wait_for_leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let modes: Vec<Option<String>> = (0..self.members.len()).map(|i| self.mode(i)).collect();
            let live: Vec<&Option<String>> = modes
                .iter()
                .enumerate()
                .filter(|(i, _)| self.members[*i].child.is_some())
                .map(|(_, m)| m)
                .collect();
            let leaders: Vec<usize> =
                (0..modes.len()).filter(|&i| modes[i].as_deref() == Some("leader")).collect();
            if leaders.len() == 1
                && live.iter().all(|m| matches!(m.as_deref(), Some("leader" | "follower" | "observer")))
            {
                return leaders[0];
            }
            assert!(Instant::now() < deadline, "no settled leader: {modes:?}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until `mntr` on member `i` has the line `key\tvalue`.
    pub fn wait_mntr(&self, i: usize, key: &str, value: &str) {
        let want = format!("{key}\t{value}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = four(self.members[i].client, "mntr").unwrap_or_default();
            if text.lines().any(|l| l == want) {
                return;
            }
            assert!(Instant::now() < deadline, "mntr of member {} never had {want:?}:\n{text}", i + 1);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(m.dir.join("server.log")).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(400).collect();
                format!("--- {}\n{}", m.dir.display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn client(&self, i: usize) -> RawClient {
        RawClient::connect(self.members[i].client, 10_000)
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// `srvr`, or None when the server does not answer (down, or starting).
pub fn srvr(addr: SocketAddr) -> Option<String> {
    four(addr, "srvr")
}

/// A four-letter word's answer, or None when the server does not answer.
pub fn four(addr: SocketAddr, word: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(word.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

pub fn children(c: &mut RawClient, path: &str) -> Vec<String> {
    let r = c.call(Request::Sync(SyncRequest { path: path.into() }));
    assert_eq!(r.err(), ErrorCode::Ok);
    let r = c.call(Request::GetChildren(GetChildrenRequest { path: path.into(), watch: false }));
    assert_eq!(r.err(), ErrorCode::Ok);
    let mut v: Vec<String> = r.decode();
    v.sort();
    v
}

pub fn create_req(path: &str) -> Request {
    Request::Create(CreateRequest { path: path.into(), data: None, acl: super::client::open_acl(), flags: 0 })
}
