//! Real peer check: two Apache ZooKeeper 3.8 servers and our election machine elect a leader together.
//!
//! Our third peer is `FastLeaderElection` driven by a small std-thread/TCP transport that speaks the
//! election port's handshake and framing. Scenarios:
//! - our peer has the highest sid (all fresh): both Apache servers vote for it, it decides LEADING;
//! - our peer has the lowest sid but a newer epoch: Apache must still elect it (vote order);
//! - as a pre-3.5 peer (bare-sid handshake, 40-byte notifications): Apache takes its legacy path;
//! - our peer has the lowest sid and meets an established Apache leader: it decides FOLLOWING the
//!   right leader (Apache's `srvr` modes agree), then does the learner handshake on the leader's
//!   quorum port with this crate's packet codec, through SNAP, NEWLEADER and UPTODATE.
//!
//! Everything Apache sends is checked to decode and re-encode identically; with `ZKQ_CAPTURE_DIR` set
//! the first bytes are also written there (this is how `tests/golden/` was made). Apache's logs are
//! printed when a check fails. Every wait is bounded; the Java processes are killed and their
//! directories removed on every path (a drop guard).
//!
//! Skips (with a message, not a failure) only when /usr/share/java/zookeeper.jar is missing.
// This file is the I/O edge (threads, sockets, a clock), which the library itself must never touch.
#![allow(clippy::disallowed_methods)]

#[path = "../../zk-client/tests/support/ports.rs"]
mod ports;

use ports::free_port;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use zk_quorum::config::{LearnerType, QuorumConfig, ServerAddress, ServerSpec};
use zk_quorum::election::{
    keeps_initiated_connection, on_accepted_connection, AcceptedConnection, ElectionAction, ElectionConfig,
    FastLeaderElection, PeerData,
};
use zk_quorum::wire::packet::JUTE_MAXBUFFER_DEFAULT;
use zk_quorum::wire::payload::LEARNER_PROTOCOL_VERSION;
use zk_quorum::wire::{
    decode_election_frame, decode_handshake, encode_election_frame, AckEpoch, ElectionHandshake,
    HandshakeVersion, HostPort, LeaderInfo, LearnerInfo, Notification, PacketType, PeerState, QuorumPacket,
    QuorumPacketDecoder,
};

mod support;
use support::parse_snapshot_stream;

const JAR: &str = "/usr/share/java/zookeeper.jar";
const CLASSPATH: &str = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar";
/// Every wait in this file is bounded by this, per scenario.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);

fn jar_present() -> bool {
    // Apache may still be installing (apt in the background): give it a little while to appear.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if Path::new(JAR).exists() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(500));
    }
}

struct Ports {
    quorum: u16,
    election: u16,
    client: u16,
}

/// One Apache server process; killed and its directory removed on drop, on every path.
struct ApacheServer {
    sid: i64,
    client_port: u16,
    child: Child,
    dir: tempfile::TempDir,
}

impl ApacheServer {
    fn start(sid: i64, ports: &BTreeMap<i64, Ports>) -> ApacheServer {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("myid"), format!("{sid}\n")).unwrap();
        let mut cfg = format!(
            "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={}\nadmin.enableServer=false\n\
             4lw.commands.whitelist=*\n",
            data.display(),
            ports[&sid].client
        );
        for (s, p) in ports {
            cfg.push_str(&format!("server.{s}=127.0.0.1:{}:{}\n", p.quorum, p.election));
        }
        let cfg_path = dir.path().join("zoo.cfg");
        std::fs::write(&cfg_path, cfg).unwrap();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = Command::new("java")
            .arg(format!("-Dzookeeper.log.dir={}", dir.path().display()))
            .arg("-Dzookeeper.root.logger=INFO,CONSOLE")
            .arg("-Xmx128m")
            .arg("-cp")
            .arg(CLASSPATH)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&cfg_path)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start java");
        ApacheServer { sid, client_port: ports[&sid].client, child, dir }
    }

    /// The `Mode:` line of `srvr`, if the server answers.
    fn mode(&self) -> Option<String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.client_port));
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        s.write_all(b"srvr").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.lines().find_map(|l| l.strip_prefix("Mode: ").map(str::to_owned))
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for ApacheServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Event {
    /// A connection that survived the connection rule, with the handshake bytes the peer sent if it
    /// initiated it.
    Connected { sid: i64, stream: TcpStream, handshake: Option<Vec<u8>>, leftover: Vec<u8> },
    /// A smaller-sid peer dialled us: we must dial it back. Its handshake bytes are kept.
    DialBack { sid: i64, handshake: Vec<u8> },
    /// One election message payload.
    Message { from: i64, payload: Bytes },
}

/// Stops the transport's threads when dropped.
struct StopFlag(Arc<AtomicBool>);

impl Drop for StopFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A port that accepts connections (up to 16) and holds them open without a word until dropped:
/// a leader's quorum port as a follower first meets it.
struct SilentPort(#[allow(dead_code)] StopFlag);

impl SilentPort {
    fn bind(port: u16) -> SilentPort {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) if held.len() < 16 => held.push(stream),
                    Ok(_) => {}
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        SilentPort(StopFlag(flag))
    }
}

/// Reads a handshake from a freshly accepted connection: the handshake, its raw bytes, and whatever
/// followed it in the same reads (the start of the first frame). `None` on a closed or slow one.
fn read_handshake(stream: &mut TcpStream) -> Option<(ElectionHandshake, Vec<u8>, Vec<u8>)> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        match decode_handshake(&buf) {
            Ok(Some((hs, used))) => {
                let leftover = buf.split_off(used);
                return Some((hs, buf, leftover));
            }
            Ok(None) => {}
            Err(e) => panic!("Apache sent a handshake we refuse: {e}: {buf:02x?}"),
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn spawn_listener(my_sid: i64, listener: TcpListener, events: Sender<Event>, stop: Arc<AtomicBool>) {
    listener.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let mut stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(_) => {
                    thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            stream.set_nonblocking(false).unwrap();
            let Some((hs, raw, leftover)) = read_handshake(&mut stream) else { continue };
            assert_eq!(hs.version, HandshakeVersion::V1, "Apache 3.8 sends V1 without multiAddress");
            let event = match on_accepted_connection(my_sid, hs.sid) {
                AcceptedConnection::Keep => {
                    Event::Connected { sid: hs.sid, stream, handshake: Some(raw), leftover }
                }
                AcceptedConnection::CloseAndDialBack => {
                    let _ = stream.shutdown(Shutdown::Both);
                    Event::DialBack { sid: hs.sid, handshake: raw }
                }
                AcceptedConnection::Close => continue,
            };
            if events.send(event).is_err() {
                return;
            }
        }
    });
}

fn spawn_reader(
    from: i64,
    mut stream: TcpStream,
    leftover: Vec<u8>,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
) {
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    thread::spawn(move || {
        let mut buf = BytesMut::from(&leftover[..]);
        let mut chunk = [0u8; 4096];
        while !stop.load(Ordering::SeqCst) {
            // Frames may already be buffered (bytes that came with the handshake).
            while let Some(payload) =
                decode_election_frame(&mut buf).expect("Apache sent a bad election frame")
            {
                if events.send(Event::Message { from, payload }).is_err() {
                    return;
                }
            }
            match stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    continue
                }
                Err(_) => return,
            }
        }
    });
}

/// What our peer saw.
#[derive(Default)]
struct Observed {
    decided: Option<(i64, PeerState)>,
    handshakes: BTreeMap<i64, Vec<u8>>,
    first_payloads: BTreeMap<i64, Bytes>,
    /// Every notification received, by sender.
    notifications: BTreeMap<i64, Vec<Notification>>,
}

/// Our peer: the election machine, its connections, and Apache's rules for who dials whom.
struct OurPeer {
    my_sid: i64,
    my_election: HostPort,
    peer_election: BTreeMap<i64, SocketAddr>,
    fle: FastLeaderElection,
    conns: BTreeMap<i64, TcpStream>,
    /// The newest frame per peer (Apache keeps only the newest), sent on (re)connect.
    last_frame: BTreeMap<i64, Vec<u8>>,
    last_dial: BTreeMap<i64, Instant>,
    events_tx: Sender<Event>,
    events_rx: Receiver<Event>,
    stop: Arc<AtomicBool>,
    _stop_on_drop: StopFlag,
    start: Instant,
    seen: Observed,
    /// Speak as a pre-3.5 peer: a bare-sid handshake and 40-byte notifications.
    legacy: bool,
}

impl OurPeer {
    fn start(my_sid: i64, data: PeerData, config: &QuorumConfig, ports: &BTreeMap<i64, Ports>) -> OurPeer {
        let start = Instant::now();
        let (events_tx, events_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let listener = TcpListener::bind(("127.0.0.1", ports[&my_sid].election)).unwrap();
        spawn_listener(my_sid, listener, events_tx.clone(), stop.clone());
        let fle = FastLeaderElection::new(ElectionConfig::new(my_sid, config), data, 0);
        let peer_election = ports
            .iter()
            .filter(|(s, _)| **s != my_sid)
            .map(|(s, p)| (*s, SocketAddr::from(([127, 0, 0, 1], p.election))))
            .collect();
        OurPeer {
            my_sid,
            my_election: HostPort { host: "127.0.0.1".into(), port: ports[&my_sid].election },
            peer_election,
            fle,
            conns: BTreeMap::new(),
            last_frame: BTreeMap::new(),
            last_dial: BTreeMap::new(),
            events_tx,
            events_rx,
            stop: stop.clone(),
            _stop_on_drop: StopFlag(stop),
            start,
            seen: Observed::default(),
            legacy: false,
        }
    }

    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Dials `sid`, sends our handshake, and keeps the connection only if our sid is the larger
    /// (otherwise the peer dials us back).
    fn dial(&mut self, sid: i64) {
        self.last_dial.insert(sid, Instant::now());
        let Ok(mut stream) = TcpStream::connect_timeout(&self.peer_election[&sid], Duration::from_secs(1))
        else {
            return;
        };
        let hs = if self.legacy {
            ElectionHandshake { version: HandshakeVersion::Legacy, sid: self.my_sid, addresses: Vec::new() }
        } else {
            ElectionHandshake::v1(self.my_sid, self.my_election.clone())
        };
        let hs = hs.encode().unwrap();
        if stream.write_all(&hs).is_err() {
            return;
        }
        if keeps_initiated_connection(self.my_sid, sid) {
            self.connected(sid, stream, Vec::new());
        } else {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn connected(&mut self, sid: i64, stream: TcpStream, leftover: Vec<u8>) {
        spawn_reader(sid, stream.try_clone().unwrap(), leftover, self.events_tx.clone(), self.stop.clone());
        self.conns.insert(sid, stream);
        if let Some(frame) = self.last_frame.get(&sid).cloned() {
            self.write(sid, &frame);
        }
    }

    fn write(&mut self, sid: i64, frame: &[u8]) {
        if let Some(conn) = self.conns.get_mut(&sid) {
            if conn.write_all(frame).is_err() {
                self.conns.remove(&sid);
            }
        }
    }

    /// Runs the machine for up to `for_at_most`, or until `done` says so.
    fn run(&mut self, for_at_most: Duration, mut done: impl FnMut(&Observed) -> bool) -> bool {
        let deadline = Instant::now() + for_at_most;
        loop {
            while let Some(action) = self.fle.poll_action() {
                match action {
                    ElectionAction::Send { to, notification } => {
                        let mut frame = Vec::new();
                        let mut payload = notification.encode();
                        if self.legacy {
                            // The 40-byte form: Apache reads the peer epoch and ignores the last 4 bytes.
                            payload.truncate(40);
                        }
                        encode_election_frame(&payload, &mut frame).unwrap();
                        self.last_frame.insert(to, frame.clone());
                        if self.conns.contains_key(&to) {
                            self.write(to, &frame);
                        }
                    }
                    ElectionAction::Decided { leader, state, .. } => {
                        eprintln!("our peer {} decided: leader {leader}, {state:?}", self.my_sid);
                        self.seen.decided = Some((leader, state));
                    }
                }
            }
            if done(&self.seen) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            // Apache dials peers it has a message for; so do we, at most twice a second per peer.
            let to_dial: Vec<i64> = self
                .last_frame
                .keys()
                .filter(|s| !self.conns.contains_key(s))
                .filter(|s| self.last_dial.get(s).is_none_or(|t| t.elapsed() > Duration::from_millis(500)))
                .copied()
                .collect();
            for sid in to_dial {
                self.dial(sid);
            }
            let wait_ms = self.fle.poll_timeout().map_or(50, |t| t.saturating_sub(self.now_ms())).min(50);
            match self.events_rx.recv_timeout(Duration::from_millis(wait_ms)) {
                Ok(Event::Connected { sid, stream, handshake, leftover }) => {
                    if let Some(raw) = handshake {
                        self.seen.handshakes.entry(sid).or_insert(raw);
                    }
                    self.connected(sid, stream, leftover);
                }
                Ok(Event::DialBack { sid, handshake }) => {
                    self.seen.handshakes.entry(sid).or_insert(handshake);
                    self.dial(sid);
                }
                Ok(Event::Message { from, payload }) => {
                    self.seen.first_payloads.entry(from).or_insert_with(|| payload.clone());
                    let n = Notification::decode(&payload).unwrap_or_else(|e| {
                        panic!("cannot decode Apache's notification {payload:02x?}: {e}")
                    });
                    self.seen.notifications.entry(from).or_default().push(n.clone());
                    let now = self.now_ms();
                    self.fle.handle_notification(from, n, now);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("we hold a sender"),
            }
            let now = self.now_ms();
            self.fle.handle_timeout(now);
        }
    }
}

fn ports_for(sids: &[i64]) -> BTreeMap<i64, Ports> {
    sids.iter()
        .map(|s| (*s, Ports { quorum: free_port(), election: free_port(), client: free_port() }))
        .collect()
}

fn quorum_config(ports: &BTreeMap<i64, Ports>) -> QuorumConfig {
    QuorumConfig::majority(ports.iter().map(|(sid, p)| ServerSpec {
        sid: *sid,
        addresses: vec![ServerAddress {
            host: "127.0.0.1".into(),
            quorum_port: p.quorum,
            election_port: p.election,
        }],
        learner_type: LearnerType::Participant,
        client: None,
    }))
}

/// Checks the first bytes each Apache server sent decode and re-encode identically, and saves them
/// when `ZKQ_CAPTURE_DIR` is set.
fn check_and_capture(seen: &Observed, config: &QuorumConfig, label: &str) {
    for (sid, raw) in &seen.handshakes {
        let (hs, used) = decode_handshake(raw).unwrap().unwrap();
        assert_eq!((hs.sid, used), (*sid, raw.len()));
        assert_eq!(&hs.encode().unwrap(), raw, "handshake of {sid} re-encodes differently");
    }
    for (sid, payload) in &seen.first_payloads {
        let n = Notification::decode(payload).unwrap();
        assert_eq!(n.version, 2);
        assert_eq!(&n.encode()[..], &payload[..], "notification of {sid} re-encodes differently");
        // Apache's config string is exactly what we format for the same ensemble.
        assert_eq!(n.config.as_deref(), Some(config.to_config_string().as_bytes()));
    }
    if let Ok(dir) = std::env::var("ZKQ_CAPTURE_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        for (sid, raw) in &seen.handshakes {
            std::fs::write(Path::new(&dir).join(format!("{label}-handshake-sid{sid}.bin")), raw).unwrap();
        }
        for (sid, payload) in &seen.first_payloads {
            std::fs::write(Path::new(&dir).join(format!("{label}-notification-sid{sid}.bin")), payload)
                .unwrap();
        }
        std::fs::write(Path::new(&dir).join(format!("{label}-config.txt")), config.to_config_string())
            .unwrap();
    }
}

fn dump_logs(servers: &[ApacheServer]) -> String {
    servers.iter().map(|s| format!("--- Apache server {} ---\n{}", s.sid, s.log_tail())).collect()
}

/// A server that has never logged anything, as the Apache servers here are.
const FRESH: PeerData = PeerData { last_logged_zxid: 0, current_epoch: 0 };

/// Starts our peer as `my_sid` with `data`, then Apache as the two other sids, and checks that both
/// Apache servers come to vote for our peer and that our machine decides LEADING. Apache then waits for
/// us to lead on the quorum port, which this crate does not serve yet; the vote is what is checked.
fn apache_elects_our_peer(my_sid: i64, data: PeerData, legacy: bool, label: &str) {
    if !jar_present() {
        eprintln!("SKIPPED: {JAR} is missing (Debian package `zookeeper`)");
        return;
    }
    let ports = ports_for(&[1, 2, 3]);
    let config = quorum_config(&ports);
    // Our peer listens before Apache starts, so Apache hears from it while still looking.
    let mut ours = OurPeer::start(my_sid, data, &config, &ports);
    // An Apache server that has decided to follow our peer connects to its quorum port. Refused,
    // it gave up within seconds and began a new election, and on a loaded machine (a JVM slow to
    // start) the two Apache servers then sometimes elected each other before both had named our
    // peer. Held open, it waits initLimit ticks (20 s) for the leader's first packet instead.
    let _quorum_port = SilentPort::bind(ports[&my_sid].quorum);
    ours.legacy = legacy;
    let apache_sids: Vec<i64> = [1, 2, 3].into_iter().filter(|s| *s != my_sid).collect();
    let servers = [ApacheServer::start(apache_sids[0], &ports), ApacheServer::start(apache_sids[1], &ports)];
    let names_us = |seen: &Observed, sid: i64| {
        seen.notifications.get(&sid).is_some_and(|ns| {
            ns.iter().any(|n| {
                (n.leader, n.zxid, n.peer_epoch) == (my_sid, data.last_logged_zxid, data.current_epoch)
            })
        })
    };
    let ok = ours.run(SCENARIO_TIMEOUT, |seen| {
        seen.decided.is_some()
            && apache_sids.iter().all(|s| names_us(seen, *s))
            && seen.first_payloads.len() == 2
    });
    assert!(
        ok,
        "no agreement on our peer: decided {:?}, received {:?}\n{}",
        ours.seen.decided,
        ours.seen.notifications,
        dump_logs(&servers)
    );
    assert_eq!(ours.seen.decided, Some((my_sid, PeerState::Leading)));
    if legacy {
        // Apache took the legacy path for our messages, not merely tolerated them.
        for server in &servers {
            // Apache logs from its own threads: give the line a moment to reach the file.
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut log = String::new();
            while Instant::now() < deadline {
                log = std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default();
                if log.contains("Backward compatibility mode (36 bits)") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(
                log.contains("Backward compatibility mode (36 bits)"),
                "Apache {}:\n{}",
                server.sid,
                server.log_tail()
            );
        }
    }
    check_and_capture(&ours.seen, &config, label);
}

#[test]
fn apache_servers_elect_our_peer_when_it_has_the_highest_sid() {
    apache_elects_our_peer(3, FRESH, false, "leader3");
}

#[test]
fn apache_servers_elect_our_peer_with_the_lowest_sid_when_its_epoch_is_newer() {
    // Apache's servers are fresh (epoch 0, zxid 0): a higher peer epoch must beat their higher sids,
    // which checks that Apache reads our zxid and peer epoch fields as we mean them.
    apache_elects_our_peer(
        1,
        PeerData { last_logged_zxid: (1 << 32) | 2, current_epoch: 1 },
        false,
        "leader1",
    );
}

#[test]
fn apache_accepts_a_pre_3_5_peer_and_its_40_byte_notifications() {
    // As the highest sid, every connection our peer keeps is one it dialled with a bare sid.
    apache_elects_our_peer(3, PeerData { last_logged_zxid: 7, current_epoch: 0 }, true, "legacy3");
}

#[test]
fn our_peer_follows_the_apache_leader_when_it_has_the_lowest_sid() {
    if !jar_present() {
        eprintln!("SKIPPED: {JAR} is missing (Debian package `zookeeper`)");
        return;
    }
    let ports = ports_for(&[1, 2, 3]);
    let config = quorum_config(&ports);
    // Apache 2 and 3 first elect 3 between themselves (they need each other for a quorum), so that
    // our peer meets an established leader: had our peer voted while 3 was still starting, it and
    // Apache 2 would rightly have elected 2. Our machine must then join through the votes of servers
    // past the election (FOLLOWING from 2, LEADING from 3).
    let servers = [ApacheServer::start(2, &ports), ApacheServer::start(3, &ports)];
    let deadline = Instant::now() + SCENARIO_TIMEOUT;
    let mut modes = (None, None);
    while modes != (Some("follower".to_owned()), Some("leader".to_owned())) {
        assert!(Instant::now() < deadline, "Apache modes {modes:?}\n{}", dump_logs(&servers));
        thread::sleep(Duration::from_millis(100));
        modes = (servers[0].mode(), servers[1].mode());
    }
    let mut ours = OurPeer::start(1, FRESH, &config, &ports);
    // Apache answers our LOOKING vote with its settled one (FOLLOWING from 2, LEADING from 3). On
    // connecting it may first re-send the last vote it queued for us during its own election (a stale
    // LOOKING one): the machine may decide on either; the outcome must be the same.
    let sent_state = |seen: &Observed, sid: i64, state: PeerState| {
        seen.notifications.get(&sid).is_some_and(|ns| ns.iter().any(|n| n.state == state && n.leader == 3))
    };
    let decided = ours.run(SCENARIO_TIMEOUT, |seen| {
        seen.decided.is_some()
            && sent_state(seen, 2, PeerState::Following)
            && sent_state(seen, 3, PeerState::Leading)
    });
    assert!(
        decided,
        "decided {:?}, received {:?}\n{}",
        ours.seen.decided,
        ours.seen.notifications,
        dump_logs(&servers)
    );
    assert_eq!(ours.seen.decided, Some((3, PeerState::Following)));
    // Both Apache servers have larger sids, so the connections that survive are the ones they dial.
    assert_eq!(ours.seen.handshakes.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    check_and_capture(&ours.seen, &config, "follower1");

    // Having decided to follow 3, our peer does the learner's side of discovery and synchronisation
    // on Apache 3's quorum port with this crate's packet codec, up to UPTODATE.
    let leader_quorum = SocketAddr::from(([127, 0, 0, 1], ports[&3].quorum));
    let sync = follow_apache_leader(leader_quorum, 1, &config)
        .unwrap_or_else(|e| panic!("{e}\n{}", dump_logs(&servers)));
    let kinds: Vec<PacketType> = sync.packets.iter().map(|(p, _)| p.kind().unwrap()).collect();
    // The leader is established (its lastProcessedZxid is newEpoch << 32) and our log is empty: SNAP.
    assert_eq!(kinds[..2], [PacketType::LeaderInfo, PacketType::Snap], "{kinds:?}");
    assert_eq!(kinds.last(), Some(&PacketType::UpToDate), "{kinds:?}");
    let (paths, _) = sync.snapshot.as_ref().expect("a SNAP is followed by the snapshot");
    assert!(paths.iter().any(|p| p == "/zookeeper/config"), "{paths:?}");
    if let Ok(dir) = std::env::var("ZKQ_CAPTURE_DIR") {
        for (i, (packet, raw)) in sync.packets.iter().enumerate() {
            let name = format!("follower1-quorum-{i}-type{}.bin", packet.packet_type);
            std::fs::write(Path::new(&dir).join(name), raw).unwrap();
        }
        if let Some((_, raw)) = &sync.snapshot {
            std::fs::write(Path::new(&dir).join("follower1-quorum-snapshot.bin"), raw).unwrap();
        }
    }
}

/// What an Apache leader sent our learner.
struct LearnerSync {
    /// Every packet, with its bytes.
    packets: Vec<(QuorumPacket, Vec<u8>)>,
    /// After a SNAP: the node paths of the snapshot stream, and its bytes.
    snapshot: Option<(Vec<String>, Vec<u8>)>,
}

fn read_more(stream: &mut TcpStream, buf: &mut BytesMut) -> Result<(), String> {
    let mut chunk = [0u8; 4096];
    match stream.read(&mut chunk) {
        Ok(0) => Err("the leader closed the connection".into()),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Ok(()),
        Err(e) => Err(format!("read: {e}")),
    }
}

/// Reads one packet (and its raw bytes) with a deadline; checks it re-encodes to the same bytes.
fn read_packet(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    deadline: Instant,
) -> Result<(QuorumPacket, Vec<u8>), String> {
    let decoder = QuorumPacketDecoder::new(JUTE_MAXBUFFER_DEFAULT);
    loop {
        let before = buf.clone();
        if let Some(packet) =
            decoder.decode(buf).map_err(|e| format!("Apache sent a packet we refuse: {e}"))?
        {
            let raw = before[..before.len() - buf.len()].to_vec();
            assert_eq!(packet.to_vec(), raw, "packet re-encodes differently");
            return Ok((packet, raw));
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for a quorum packet; have {:02x?}", &buf[..]));
        }
        read_more(stream, buf)?;
    }
}

/// The learner's handshake with an Apache leader, as a fresh follower (accepted and current epoch 0,
/// empty log): FOLLOWERINFO, LEADERINFO, ACKEPOCH, then the leader's sync traffic up to NEWLEADER,
/// ACK, UPTODATE. Returns everything the leader sent, checking each step.
fn follow_apache_leader(
    leader: SocketAddr,
    my_sid: i64,
    config: &QuorumConfig,
) -> Result<LearnerSync, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stream =
        TcpStream::connect_timeout(&leader, Duration::from_secs(5)).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut buf = BytesMut::new();
    let mut packets = Vec::new();
    let mut snapshot = None;
    let send = |stream: &mut TcpStream, p: QuorumPacket| {
        stream.write_all(&p.to_vec()).map_err(|e| format!("write: {e}"))
    };

    let info = LearnerInfo::new(my_sid, config.version);
    send(&mut stream, QuorumPacket::new(PacketType::FollowerInfo, 0, Some(info.encode())))?;
    let (leader_info, raw) = read_packet(&mut stream, &mut buf, deadline)?;
    assert_eq!(leader_info.kind(), Ok(PacketType::LeaderInfo), "{leader_info:?}");
    let new_epoch = leader_info.zxid >> 32;
    assert!(new_epoch >= 1 && leader_info.zxid & 0xffff_ffff == 0, "{leader_info:?}");
    let li = LeaderInfo::decode(leader_info.data.as_deref().unwrap_or_default()).unwrap();
    assert_eq!(li.protocol_version, LEARNER_PROTOCOL_VERSION);
    assert_eq!(leader_info.authinfo, None, "Apache sends a null authinfo");
    packets.push((leader_info, raw));

    // newEpoch > our acceptedEpoch (0): ACKEPOCH carries our current epoch and last zxid.
    send(
        &mut stream,
        QuorumPacket::new(PacketType::AckEpoch, 0, Some(AckEpoch { current_epoch: 0 }.encode())),
    )?;
    loop {
        let (p, raw) = read_packet(&mut stream, &mut buf, deadline)?;
        let kind = p.kind().unwrap();
        packets.push((p.clone(), raw));
        match kind {
            PacketType::Snap => loop {
                // The snapshot follows unframed; walk it, reading more until it is whole.
                match parse_snapshot_stream(buf.clone().freeze()) {
                    Ok((paths, len)) => {
                        snapshot = Some((paths, buf.split_to(len).to_vec()));
                        break;
                    }
                    Err(e) if Instant::now() > deadline => return Err(format!("snapshot stream: {e}")),
                    Err(_) => read_more(&mut stream, &mut buf)?,
                }
            },
            PacketType::NewLeader => {
                assert_eq!(p.zxid, new_epoch << 32);
                assert_eq!(p.data.as_deref(), Some(config.to_config_string().as_bytes()));
                break;
            }
            _ => {}
        }
    }
    send(&mut stream, QuorumPacket::new(PacketType::Ack, new_epoch << 32, None))?;
    loop {
        let (p, raw) = read_packet(&mut stream, &mut buf, deadline)?;
        let kind = p.kind().unwrap();
        packets.push((p, raw));
        if kind == PacketType::UpToDate {
            break;
        }
    }
    Ok(LearnerSync { packets, snapshot })
}
