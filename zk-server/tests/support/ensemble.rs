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

/// A free loopback port below the kernel's ephemeral port range, never handed out before in this
/// process. The kernel gives outgoing connections ports from that range only, so a port from here
/// that a test server releases (killed, to be restarted) stays free for it; a [`unique_port`] may
/// be taken meanwhile by any connection on the machine. Falls back to [`unique_port`] when the
/// range leaves no room below it.
pub fn stable_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (from, to) = (10_000u32, low.min(65_536));
    if to < from + 1000 {
        return unique_port();
    }
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(given.len());
        let p = (from + (h.finish() % u64::from(to - from)) as u32) as u16;
        if !given.contains(&p) && std::net::TcpListener::bind(("127.0.0.1", p)).is_ok() {
            given.push(p);
            return p;
        }
    }
    drop(given);
    unique_port()
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
    /// Apache members only: log to server.log through slf4j's simple binding (Debian's
    /// libslf4j-java, which the zookeeper package depends on). Off by default: the class path
    /// then has no binding and Apache logs nothing.
    pub apache_log: bool,
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
        Ensemble::configure_with_extra(kinds, observers, "")
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
        // JVM flags for the member (a JAAS file for SASL): Apache's java takes them, zkrs-server
        // finds them in SERVER_JVMFLAGS as zkServer.sh would pass them.
        let jvm_flags = std::fs::read_to_string(m.dir.join("jvmflags")).unwrap_or_default();
        let mut cmd = match m.kind {
            Kind::Zkrs => {
                let mut c = Command::new(zkrs_binary());
                c.arg(m.dir.join("zoo.cfg")).env("RUST_LOG", "info").env("SERVER_JVMFLAGS", jvm_flags.trim());
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
                c.args(jvm_flags.split_whitespace());
                let mut classpath = super::APACHE_CLASSPATH.to_owned();
                if m.apache_log {
                    classpath.push_str(":/usr/share/java/slf4j-simple.jar");
                }
                c.arg("-Xmx256m")
                    .arg("-cp")
                    .arg(classpath)
                    .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                    .arg(m.dir.join("zoo.cfg"))
                    .current_dir(&m.dir);
                c
            }
        };
        // Environment for the member (`KEY=VALUE` lines of its `env` file; the Kerberos tests
        // name their realm's krb5.conf there for zkrs-server's GSSAPI library).
        let env = std::fs::read_to_string(m.dir.join("env")).unwrap_or_default();
        cmd.envs(env.lines().filter_map(|l| l.split_once('=')));
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

    /// Waits (a minute at most) until member `i` reports `mode` (`leader`, `follower`, ...).
    pub fn wait_mode(&self, i: usize, mode: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.mode(i).as_deref() != Some(mode) {
            assert!(Instant::now() < deadline, "member {} never became {mode}\n{}", i + 1, self.logs());
            std::thread::sleep(Duration::from_millis(50));
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

    /// As [`Self::configure_with`], with `extra` (zoo.cfg lines) appended to every member's
    /// zoo.cfg, and every port a [`stable_port`]: a member restarted on its ports never finds one
    /// taken by an outgoing connection that the kernel gave it while the member was down.
    pub fn configure_with_extra(kinds: &[Kind], observers: &[usize], extra: &str) -> Ensemble {
        let n = kinds.len();
        let root = tempfile::tempdir().expect("temp dir");
        let ports: Vec<(u16, u16, u16)> =
            (0..n).map(|_| (stable_port(), stable_port(), stable_port())).collect();
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
            let mut cfg = format!(
                "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nclientPort={c}\nclientPortAddress=127.0.0.1\n\
                 4lw.commands.whitelist=*\nadmin.enableServer=false\n{peer_type}{lines}{extra}",
                dir.join("data").display()
            );
            if !cfg.ends_with('\n') {
                cfg.push('\n');
            }
            std::fs::write(dir.join("zoo.cfg"), cfg).expect("zoo.cfg");
            let client = format!("127.0.0.1:{c}").parse().expect("addr");
            members.push(Member { kind: kinds[i], dir, client, child: None, apache_log: false });
        }
        Ensemble { _root: root, members }
    }

    /// `n` zkrs servers configured by [`Self::configure_with_extra`] (`extra` zoo.cfg lines), all
    /// started.
    pub fn start_with_extra(n: usize, extra: &str) -> Ensemble {
        let mut e = Ensemble::configure_with_extra(&vec![Kind::Zkrs; n], &[], extra);
        for i in 0..n {
            e.launch(i);
        }
        e
    }

    /// Gives every member's server lines their client addresses (`;127.0.0.1:port`, as a
    /// dynamic configuration writes them), so members can find each other's client ports.
    pub fn put_client_addresses_in_server_lines(&self) {
        for m in &self.members {
            let path = m.dir.join("zoo.cfg");
            let text = std::fs::read_to_string(&path).expect("zoo.cfg");
            let lines: Vec<String> = text
                .lines()
                .map(|l| match l.strip_prefix("server.").and_then(|r| r.split_once('=')) {
                    Some((n, _)) if !l.contains(';') => {
                        let i: usize = n.parse().expect("server id");
                        format!("{l};{}", self.members[i - 1].client)
                    }
                    _ => l.to_string(),
                })
                .collect();
            std::fs::write(&path, lines.join("\n") + "\n").expect("zoo.cfg");
        }
    }

    /// `n` zkrs servers, each with its AdminServer on 127.0.0.1 on a port of its own and `keys`
    /// (zoo.cfg lines) added, all started; the AdminServers' ports, by member.
    pub fn start_with_admin(n: usize, keys: &str) -> (Ensemble, Vec<u16>) {
        Ensemble::start_with_admin_as(n, keys, false)
    }

    /// As [`Self::start_with_admin`]; with `client_addresses`, the server lines carry the
    /// members' client addresses ([`Self::put_client_addresses_in_server_lines`]).
    pub fn start_with_admin_as(n: usize, keys: &str, client_addresses: bool) -> (Ensemble, Vec<u16>) {
        let ports: Vec<u16> = (0..n).map(|_| stable_port()).collect();
        let mut e = Ensemble::configure(&vec![Kind::Zkrs; n]);
        if client_addresses {
            e.put_client_addresses_in_server_lines();
        }
        for (m, port) in e.members.iter().zip(&ports) {
            use std::io::Write;
            let mut f =
                std::fs::OpenOptions::new().append(true).open(m.dir.join("zoo.cfg")).expect("zoo.cfg");
            write!(
                f,
                "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n{keys}"
            )
            .expect("zoo.cfg");
        }
        for i in 0..n {
            e.launch(i);
        }
        (e, ports)
    }

    /// The process id of member `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].child.as_ref().map(Child::id)
    }

    /// Sends the signal named `signal` ("STOP", "CONT", "TERM", ...) to member `i`'s process,
    /// with kill(1).
    pub fn signal(&self, i: usize, signal: &str) {
        let pid = self.pid(i).expect("the member runs");
        let status =
            Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().expect("run kill");
        assert!(status.success(), "kill -{signal} {pid}: {status}");
    }

    /// Freezes member `i` (SIGSTOP): alive, its sockets open, answering nothing. Returns once
    /// the kernel reports it stopped.
    pub fn stop(&self, i: usize) {
        self.signal(i, "STOP");
        let stat = format!("/proc/{}/stat", self.pid(i).expect("the member runs"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // The state is the field after the parenthesised command name.
            let text = std::fs::read_to_string(&stat).unwrap_or_default();
            let state = text.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
            if state == Some('T') {
                return;
            }
            assert!(Instant::now() < deadline, "member {} did not stop: {text}", i + 1);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Thaws a member frozen by [`Self::stop`] (SIGCONT).
    pub fn cont(&self, i: usize) {
        self.signal(i, "CONT");
    }

    /// As [`Self::wait_for_leader`], looking only at the members `among` (the others may be
    /// frozen, or cut off); returns the leader's index.
    pub fn wait_for_leader_among(&self, among: &[usize]) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let modes: Vec<(usize, Option<String>)> = among.iter().map(|&i| (i, self.mode(i))).collect();
            let leaders: Vec<usize> =
                modes.iter().filter(|(_, m)| m.as_deref() == Some("leader")).map(|(i, _)| *i).collect();
            if leaders.len() == 1
                && modes.iter().all(|(_, m)| matches!(m.as_deref(), Some("leader" | "follower" | "observer")))
            {
                return leaders[0];
            }
            assert!(
                Instant::now() < deadline,
                "no settled leader among {among:?}: {modes:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Writes `/path` through member `through` and checks every member in `on` sees it.
    pub fn write_and_read(&self, through: usize, path: &str, on: &[usize]) {
        let mut c = self.client(through);
        assert_eq!(c.create(path, b"v", CreateMode::Persistent).err(), ErrorCode::Ok, "{}", self.logs());
        let name = path.trim_start_matches('/').to_string();
        for &i in on {
            let mut c = self.client(i);
            assert!(children(&mut c, "/").contains(&name), "server {} lacks {path}\n{}", i + 1, self.logs());
        }
    }

    /// Member `i` runs (it answers `ruok`) but serves no client for `wait`: it never found a
    /// leader.
    pub fn stays_out(&self, i: usize, wait: Duration) {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            assert_eq!(self.mode(i), None, "server {} joined\n{}", i + 1, self.logs());
            std::thread::sleep(Duration::from_millis(200));
        }
        let alive = four(self.members[i].client, "ruok");
        assert_eq!(alive.as_deref(), Some("imok"), "server {} is not running\n{}", i + 1, self.logs());
    }

    /// Member `i`'s quorum and election ports, from its zoo.cfg.
    pub fn quorum_ports(&self, i: usize) -> (u16, u16) {
        let text = std::fs::read_to_string(self.members[i].dir.join("zoo.cfg")).expect("zoo.cfg");
        let line = text.lines().find(|l| l.starts_with(&format!("server.{}=", i + 1))).expect("server line");
        let ports: Vec<u16> = line.split(':').skip(1).take(2).map(|p| p.parse().expect("port")).collect();
        (ports[0], ports[1])
    }

    /// Kills `leader`; the others elect a new one, which takes a write of `path`; the old leader
    /// comes back and follows. Returns the root's children as the old leader then serves them.
    pub fn leader_dies_and_rejoins(&mut self, leader: usize, path: &str) -> Vec<String> {
        let others: Vec<usize> = (0..self.members.len()).filter(|&i| i != leader).collect();
        self.kill(leader);
        let new_leader = self.wait_for_leader_among(&others);
        assert_ne!(new_leader, leader);
        self.write_and_read(new_leader, path, &others);
        self.launch(leader);
        self.wait_for_leader();
        let mut c = self.client(leader);
        children(&mut c, "/")
    }

    /// Apache servers 1 and 2 with zkrs server 3, configured: zkrs leads Apache's followers (it
    /// starts with server 1, and with equal histories the largest id leads), then, once it is
    /// killed, an Apache server leads and zkrs comes back as its follower. `while_zkrs_leads`
    /// checks what the test is about once zkrs leads both; writes through each kind must reach
    /// every member throughout.
    pub fn zkrs_leads_then_follows_apache(&mut self, while_zkrs_leads: impl Fn(&Ensemble)) {
        self.launch_led_by_server_3();
        while_zkrs_leads(self);
        self.write_and_read(0, "/via-apache", &[0, 1, 2]);
        self.write_and_read(2, "/via-zkrs", &[0, 1, 2]);
        self.kill(2);
        let leader = self.wait_for_leader_among(&[0, 1]);
        self.write_and_read(leader, "/while-away", &[0, 1]);
        self.launch(2);
        self.wait_for_leader();
        assert_eq!(self.mode(2).as_deref(), Some("follower"), "{}", self.logs());
        let mut c = self.client(2);
        assert_eq!(
            children(&mut c, "/"),
            ["via-apache", "via-zkrs", "while-away", "zookeeper"],
            "{}",
            self.logs()
        );
    }

    /// Starts three members with server 3 leading: it starts with server 1 only (the larger id
    /// of the two leads, whichever kind starts faster), then server 2 joins; returns once both
    /// follow it, synced.
    pub fn launch_led_by_server_3(&mut self) {
        self.launch(2);
        self.launch(0);
        self.wait_mode(2, "leader");
        self.launch(1);
        assert_eq!(self.wait_for_leader(), 2, "server 3 leads\n{}", self.logs());
        self.wait_mntr(2, "zk_synced_followers", "2");
    }

    /// Member `i`'s whole server.log so far.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.members[i].dir.join("server.log")).unwrap_or_default()
    }

    /// Waits until member `i`'s server.log has a line containing `needle`; returns that line.
    pub fn wait_log(&self, i: usize, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(line) = self.log(i).lines().find(|l| l.contains(needle)) {
                return line.to_string();
            }
            assert!(Instant::now() < deadline, "member {} never logged {needle:?}\n{}", i + 1, self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The sync modes ("Diff", "Trunc", "Snap") member `i`, as leader, logged choosing for the
    /// learner with myid `sid`, oldest first (zk-quorum's "syncing learner by ..." info line).
    pub fn sync_modes(&self, i: usize, sid: usize) -> Vec<String> {
        let learner = format!("learner=Some({sid})");
        self.log(i)
            .lines()
            .filter(|l| l.contains(&learner))
            .filter_map(|l| l.split("syncing learner by ").nth(1))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_string)
            .collect()
    }

    /// The sync modes ("Diff", "Trunc", "Snap") zkrs member `i`, as learner, logged receiving
    /// from its leader, oldest first (zk-quorum's "synced by the leader with ..." info line): how a
    /// test sees what an Apache leader chose.
    pub fn received_sync_modes(&self, i: usize) -> Vec<String> {
        self.log(i)
            .lines()
            .filter_map(|l| l.split("synced by the leader with ").nth(1))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_string)
            .collect()
    }

    /// Member `i`'s last zxid, as `srvr` reports it.
    pub fn zxid(&self, i: usize) -> Option<i64> {
        let text = srvr(self.members[i].client)?;
        let hex = text.lines().find_map(|l| l.strip_prefix("Zxid: "))?;
        i64::from_str_radix(hex.trim().trim_start_matches("0x"), 16).ok()
    }

    /// Whether Apache member `i`'s transaction log files (dataDir/version-2/log.*) contain
    /// `needle`: the record is on its disk.
    pub fn apache_logged(&self, i: usize, needle: &str) -> bool {
        let Ok(dir) = std::fs::read_dir(self.data_dir(i).join("version-2")) else { return false };
        dir.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("log."))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .any(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
    }

    /// Empties member `i`'s data directory but for myid: a server that lost its disk.
    pub fn wipe_data(&self, i: usize) {
        for entry in std::fs::read_dir(self.data_dir(i)).expect("data dir") {
            let path = entry.expect("entry").path();
            if path.file_name().is_some_and(|n| n != "myid") {
                if path.is_dir() {
                    std::fs::remove_dir_all(&path).expect("rm -r");
                } else {
                    std::fs::remove_file(&path).expect("rm");
                }
            }
        }
    }

    /// Member `i`'s data directory (myid, snapshots, the log).
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.members[i].dir.join("data")
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

/// `/h` with `n` children, written through member `via`.
pub fn write_children(e: &Ensemble, via: usize, from: usize, n: usize) {
    let mut c = e.client(via);
    if from == 0 {
        assert_eq!(c.create("/h", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    for k in from..from + n {
        assert_eq!(c.create(&format!("/h/c{k:04}"), b"x", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
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

/// One znode as [`dump_tree`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Znode {
    /// Its path.
    pub path: String,
    /// Its data.
    pub data: Option<bytes::Bytes>,
    /// Its stat: zxids, times (the leader's), versions, owner, child count.
    pub stat: Stat,
}

/// Every znode under `root` (itself included; `/zookeeper` left out), after a sync, in path
/// order: two servers' dumps are equal when their trees are. Requests are pipelined a level at a
/// time, in bounded batches.
pub fn dump_tree(c: &mut RawClient, root: &str) -> Vec<Znode> {
    let r = c.call(Request::Sync(SyncRequest { path: root.into() }));
    assert_eq!(r.err(), ErrorCode::Ok);
    let mut out = Vec::new();
    let mut level = vec![root.to_string()];
    while !level.is_empty() {
        let mut next = Vec::new();
        for batch in level.chunks(200) {
            let xids: Vec<(i32, i32)> = batch
                .iter()
                .map(|p| {
                    let d = c.send(&Request::GetData(GetDataRequest { path: p.clone(), watch: false }));
                    let k =
                        c.send(&Request::GetChildren(GetChildrenRequest { path: p.clone(), watch: false }));
                    (d, k)
                })
                .collect();
            for (p, (d, k)) in batch.iter().zip(xids) {
                let d = c.recv(d).expect("server closed the connection");
                let k = c.recv(k).expect("server closed the connection");
                assert_eq!((d.err(), k.err()), (ErrorCode::Ok, ErrorCode::Ok), "{p}");
                let body: GetDataResponse = d.decode();
                let mut kids: Vec<String> = k.decode();
                kids.sort();
                for kid in kids {
                    let child = if p == "/" { format!("/{kid}") } else { format!("{p}/{kid}") };
                    if child != "/zookeeper" {
                        next.push(child);
                    }
                }
                out.push(Znode { path: p.clone(), data: body.data, stat: body.stat });
            }
        }
        level = next;
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}
