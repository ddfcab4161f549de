//! The SNAP stream against Apache ZooKeeper 3.8 itself.
//!
//! `golden_apache_snap_stream` (runs in `cargo test`) reads `tests/data/apache-3.8-snap.bin`:
//! every byte an Apache 3.8.0 leader sent a fresh learner, from LEADERINFO through NEWLEADER.
//! The stream after the SNAP packet must load into the tree the capture wrote (below), end
//! exactly where NEWLEADER starts, and written back from the loaded tree give the same bytes.
//!
//! `capture_apache_snap_stream` (ignored: it starts two JVMs, about a minute) makes that file:
//! 1. two Apache servers (server.1, server.2; server.3 is this test) on free 127.0.0.1 ports, in
//!    a temporary directory, with `extendedTypesEnabled=true` (for the TTL node) and
//!    `-Dzookeeper.snapshotSizeFactor=-1`. That property turns off syncing a learner from the
//!    txn log files: an empty learner is below the leader's in-memory committed log, so the
//!    leader must choose between a DIFF from its log files and a SNAP, and with it off it always
//!    sends SNAP (without it, 3.8.0 already chose SNAP here, as its preallocated 64 MB log file
//!    counts as larger than a third of the snapshot; the property makes that independent of
//!    file sizes);
//! 2. waits (bounded) for one of them to say `Mode: leader` to `srvr`;
//! 3. writes `WRITES` through two raw client sessions on the leader's client port (each reply
//!    checked);
//! 4. acts as learner 3 on the leader's quorum port: FOLLOWERINFO {zxid 0, LearnerInfo{sid 3,
//!    protocol 0x10000, config version 0}}, reads LEADERINFO, sends ACKEPOCH {zxid 0, current
//!    epoch 0}, reads the SNAP packet, the stream (its end found by `ApacheSnapLoader`) and the
//!    NEWLEADER packet after it;
//! 5. checks it as the golden test does, and with `ZKRS_WRITE_GOLDEN=1` saves it over the file.
//!
//! `apache_loads_a_zkrs_stream` (ignored: it starts a JVM) goes the other way. Apache's
//! snapshot files hold the same serialization, so a stream zkrs writes, wrapped as
//! `snapshot.<zxid>` (FileHeader, the stream up to the signature, the Adler-32 seal), is put in
//! a standalone Apache's dataDir; Apache must load it and serve every node with the data, Stat,
//! ACL and child list (in order) that zkrs's own learner side loads from the same stream. That
//! is Apache's DataTree reader, the code an Apache learner runs on a SNAP.
//!
//! The Java processes are killed and the directories removed on every path (a Drop guard), and
//! every wait is bounded.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use zk_proto::{perms, Acl, Id};
use zk_tree::apache_snap::ApacheSnapLoader;
use zk_tree::{Database, TreeConfig};

const GOLDEN: &str = "tests/data/apache-3.8-snap.bin";

/// QuorumPacket types seen (ZK-FACTS.md).
const LEADERINFO: i32 = 17;
const SNAP: i32 = 15;
const NEWLEADER: i32 = 10;
const FOLLOWERINFO: i32 = 11;
const ACKEPOCH: i32 = 18;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Acls {
    Open,
    Read,
    DigestIp,
}

fn acl_list(a: Acls) -> Vec<Acl> {
    let acl = |perms, scheme: &str, id: &str| Acl { perms, id: Id { scheme: scheme.into(), id: id.into() } };
    match a {
        Acls::Open => vec![acl(perms::ALL, "world", "anyone")],
        Acls::Read => vec![acl(perms::READ, "world", "anyone")],
        Acls::DigestIp => vec![acl(perms::ALL, "digest", "bob:abc="), acl(perms::READ, "ip", "127.0.0.1")],
    }
}

/// What the capture does, in order, through client session 1 (`Create` on session 2 where said).
#[derive(Clone, Copy, Debug)]
enum Op {
    /// path, data, ACL, CreateMode flags, session (1 or 2).
    Create(&'static str, Option<&'static [u8]>, Acls, i32, u8),
    Delete(&'static str),
    SetData(&'static str, &'static [u8]),
    SetAcl(&'static str, Acls),
}

const TTL_MS: i64 = 100_000;
const LIMITS: &[u8] = b"count=100,bytes=-1";

const WRITES: &[Op] = &[
    Op::Create("/a", Some(b"hello"), Acls::Open, 0, 1),
    Op::Create("/a/b", None, Acls::Open, 0, 1),
    Op::Create("/a/b/c", Some(b""), Acls::Read, 0, 1),
    Op::Create("/d", Some(&[b'x'; 300]), Acls::DigestIp, 0, 1),
    Op::Create("/a/s-", Some(b"seq"), Acls::Open, 2, 1),
    Op::Create("/e", Some(b"eph"), Acls::Open, 1, 1),
    Op::Create("/e2", None, Acls::Read, 1, 2),
    Op::Create("/cont", Some(b""), Acls::Open, 4, 1),
    Op::Create("/ttl", Some(b"t"), Acls::Open, 5, 1),
    Op::Create("/\u{fc}n\u{ef}", Some(b"u"), Acls::Open, 0, 1),
    Op::Create("/zookeeper/quota/a", None, Acls::Open, 0, 1),
    Op::Create("/zookeeper/quota/a/zookeeper_limits", Some(LIMITS), Acls::Open, 0, 1),
    Op::Create("/zookeeper/quota/a/zookeeper_stats", Some(b"count=0,bytes=0"), Acls::Open, 0, 1),
    Op::Create("/a/gone", Some(b"g"), Acls::Open, 0, 1),
    Op::Create("/a/n0", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n1", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n2", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n3", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n4", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n5", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n6", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n7", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n8", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n9", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n10", Some(b"n"), Acls::Open, 0, 1),
    Op::Create("/a/n11", Some(b"n"), Acls::Open, 0, 1),
    Op::Delete("/a/gone"),
    Op::SetData("/a", b"hello2"),
    Op::SetAcl("/a/b", Acls::Read),
    Op::Create("/last", Some(b"z"), Acls::Open, 0, 1),
];

/// The final path of a create (sequential nodes get their suffix: /a had one child then).
fn final_path(p: &str, flags: i32) -> String {
    if flags == 2 {
        format!("{p}0000000001")
    } else {
        p.to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the transcript

/// A QuorumPacket: type, zxid, data (authinfo must be null or empty).
fn read_packet(b: &[u8], at: &mut usize) -> (i32, i64, Option<Vec<u8>>) {
    let i32_at = |at: &mut usize| {
        let v = i32::from_be_bytes(b[*at..*at + 4].try_into().expect("4 bytes"));
        *at += 4;
        v
    };
    let ty = i32_at(at);
    let zxid = i64::from_be_bytes(b[*at..*at + 8].try_into().expect("8 bytes"));
    *at += 8;
    let len = i32_at(at);
    let data = (len >= 0).then(|| {
        let d = b[*at..*at + len as usize].to_vec();
        *at += len as usize;
        d
    });
    let auth = i32_at(at);
    assert!(auth <= 0, "authinfo with {auth} ids");
    (ty, zxid, data)
}

fn cfg() -> TreeConfig {
    TreeConfig { extended_types_enabled: true, ..TreeConfig::default() }
}

/// Checks a transcript (LEADERINFO, SNAP, stream, NEWLEADER): returns the loaded database.
fn check_transcript(t: &[u8]) -> Database {
    let mut at = 0;
    let (ty, epoch_zxid, data) = read_packet(t, &mut at);
    assert_eq!(ty, LEADERINFO);
    assert_eq!(
        data.as_deref(),
        Some(&0x10000i32.to_be_bytes()[..]),
        "LEADERINFO carries the protocol version"
    );
    let (ty, snap_zxid, data) = read_packet(t, &mut at);
    assert_eq!(ty, SNAP);
    assert_eq!(data, None, "SNAP has no data");
    assert_eq!(snap_zxid >> 32, epoch_zxid >> 32, "the SNAP zxid is in the new epoch");
    let stream_start = at;
    // Fed in uneven pieces, with NEWLEADER right behind: the loader stops at the signature.
    let mut l = ApacheSnapLoader::new(cfg(), snap_zxid);
    let mut consumed = 0;
    for chunk in t[stream_start..].chunks(97) {
        let fed = l.feed(chunk).expect("Apache's stream loads");
        consumed += fed.consumed;
        if fed.done {
            break;
        }
    }
    assert!(l.is_done());
    let stream = &t[stream_start..stream_start + consumed];
    let stats = l.stats();
    assert_eq!((stats.nodes_left_out, stats.acl_placeholders), (0, 0));
    let db = l.finish().expect("finish");
    at = stream_start + consumed;
    let (ty, zxid, config) = read_packet(t, &mut at);
    assert_eq!(ty, NEWLEADER, "NEWLEADER follows the signature at once");
    assert_eq!(zxid, epoch_zxid);
    assert!(String::from_utf8(config.expect("config")).expect("utf-8").starts_with("server.1="));
    check_tree(&db, snap_zxid, stream);
    db
}

/// The tree holds what `WRITES` made, as Apache sent it; written back it gives `stream`.
fn check_tree(db: &Database, snap_zxid: i64, stream: &[u8]) {
    let tree = db.tree();
    assert_eq!(db.last_applied_zxid(), snap_zxid);
    let sessions: Vec<(i64, i32)> = db.sessions().iter().collect();
    assert_eq!(sessions.len(), 2, "both client sessions are in the stream");
    let mut last_czxid = 0;
    let mut expected: Vec<String> =
        ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"].map(String::from).to_vec();
    for w in WRITES {
        match *w {
            Op::Create(p, data, acl, flags, session) => {
                let path = final_path(p, flags);
                if path == "/a/gone" {
                    assert!(tree.get(&path).is_none(), "deleted node sent");
                    continue;
                }
                expected.push(path.clone());
                let n = tree.get(&path).unwrap_or_else(|| panic!("{path} missing"));
                let want_data = if path == "/a" { Some(&b"hello2"[..]) } else { data };
                if !path.ends_with("zookeeper_stats") {
                    assert_eq!(n.data(), want_data, "data of {path}");
                }
                let want_acl = if path == "/a/b" { Acls::Read } else { acl };
                assert_eq!(*n.acl, acl_list(want_acl), "acl of {path}");
                assert!(n.stat.czxid > last_czxid, "creates in order");
                last_czxid = n.stat.czxid;
                let owner = n.owner();
                match flags {
                    1 => {
                        let s = sessions.iter().map(|s| s.0).collect::<Vec<_>>();
                        assert!(s.contains(&owner), "{path} owned by a session in the stream");
                        // Session 1 was opened first: Apache numbers sessions up from its base.
                        assert_eq!(owner == s.iter().copied().min().unwrap_or(0), session == 1);
                    }
                    4 => assert_eq!(owner, i64::MIN, "container owner"),
                    5 => assert_eq!(owner, (0xffu64 << 56) as i64 | TTL_MS, "TTL owner"),
                    _ => assert_eq!(owner, 0, "owner of {path}"),
                }
            }
            Op::Delete(_) | Op::SetData(..) | Op::SetAcl(..) => {}
        }
    }
    let mut got: Vec<String> = tree.iter().map(|(p, _)| p.to_string()).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    let a = tree.get("/a").expect("/a");
    assert_eq!((a.version(), tree.num_children(a)), (1, 14));
    assert_eq!(tree.get("/a/b").map(|n| n.stat.aversion), Some(1));
    assert_eq!(tree.get("/last").map(|n| n.stat.czxid), Some(snap_zxid), "the SNAP zxid is the last txn");
    // /a lost /a/gone: its pzxid is the delete's, above every create under it.
    assert!(a.stat.pzxid > tree.get("/a/n11").expect("n11").stat.czxid);
    // Apache's own nodes: /zookeeper/config is read-only for all, set with version -1.
    let config = tree.get("/zookeeper/config").expect("config");
    assert_eq!(*config.acl, acl_list(Acls::Read));
    assert_eq!((config.version(), config.stat.aversion), (-1, -1));
    assert!(config.data().is_some_and(|d| d.starts_with(b"server.1=")));
    assert_eq!(db.ephemerals_count(), 2);
    assert_eq!(tree.containers().len(), 1);
    assert_eq!(tree.ttls().len(), 1);
    // The quota stats node counts /a's subtree (recomputed on load, as Apache's learner does).
    let stats = tree.get("/zookeeper/quota/a/zookeeper_stats").expect("stats");
    assert!(stats.data().is_some_and(|d| d.starts_with(b"count=16,")), "{:?}", stats.data());
    // Two sessions come first.
    assert_eq!(&stream[..4], &2i32.to_be_bytes());
    // Written back from the loaded tree: the same bytes (child order, ACL keys, session order).
    let ours = db.apache_snap_to_vec();
    assert_eq!(ours.len(), stream.len(), "same length");
    if ours != stream {
        let at = ours.iter().zip(stream).position(|(a, b)| a != b).unwrap_or(0);
        panic!("first difference at byte {at}: ours {:?} vs Apache {:?}", &ours[at..], &stream[at..]);
    }
}

#[test]
fn golden_apache_snap_stream() {
    let t = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN)).expect("golden file");
    check_transcript(&t);
}

// ---------------------------------------------------------------------------------------------
// Capturing

/// Kills the servers and removes their directory however the capture ends.
struct Ensemble {
    dir: PathBuf,
    servers: Vec<Child>,
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Ensemble {
    fn logs(&self) -> String {
        let mut out = String::new();
        for i in 1..=self.servers.len() {
            let log = std::fs::read_to_string(self.dir.join(format!("s{i}/out.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            out +=
                &format!("--- server {i} ---\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        out
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port()
}

fn put_i32(o: &mut Vec<u8>, v: i32) {
    o.extend_from_slice(&v.to_be_bytes());
}
fn put_i64(o: &mut Vec<u8>, v: i64) {
    o.extend_from_slice(&v.to_be_bytes());
}
fn put_buf(o: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            put_i32(o, b.len() as i32);
            o.extend_from_slice(b);
        }
        None => put_i32(o, -1),
    }
}
fn put_acls(o: &mut Vec<u8>, a: Acls) {
    let list = acl_list(a);
    put_i32(o, list.len() as i32);
    for a in list {
        put_i32(o, a.perms);
        put_buf(o, Some(a.id.scheme.as_bytes()));
        put_buf(o, Some(a.id.id.as_bytes()));
    }
}

fn read_exact(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).expect("read (bounded by the socket timeout)");
    b
}

/// A raw client session on Apache's client port.
struct Client {
    s: TcpStream,
    xid: i32,
}

impl Client {
    fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("client connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut body = Vec::new();
        put_i32(&mut body, 0);
        put_i64(&mut body, 0);
        put_i32(&mut body, 30_000);
        put_i64(&mut body, 0);
        put_buf(&mut body, Some(&[0u8; 16]));
        body.push(0);
        let mut c = Client { s, xid: 0 };
        c.send_frame(&body);
        let reply = c.read_frame();
        assert!(reply.len() >= 36, "ConnectResponse");
        c
    }

    fn send_frame(&mut self, body: &[u8]) {
        let mut f = Vec::new();
        put_i32(&mut f, body.len() as i32);
        f.extend_from_slice(body);
        self.s.write_all(&f).expect("send");
    }

    fn read_frame(&mut self) -> Vec<u8> {
        let n = i32::from_be_bytes(read_exact(&mut self.s, 4).try_into().expect("4 bytes"));
        assert!((0..1 << 20).contains(&n), "frame length {n}");
        read_exact(&mut self.s, n as usize)
    }

    /// Sends a request; panics unless the reply's err is 0. Returns the reply's body.
    fn call(&mut self, op: i32, body: &[u8], what: &str) -> Vec<u8> {
        self.xid += 1;
        let mut f = Vec::new();
        put_i32(&mut f, self.xid);
        put_i32(&mut f, op);
        f.extend_from_slice(body);
        self.send_frame(&f);
        let r = self.read_frame();
        let err = i32::from_be_bytes(r[12..16].try_into().expect("4 bytes"));
        assert_eq!(err, 0, "{what} failed");
        r[16..].to_vec()
    }

    fn write(&mut self, w: &Op) {
        let mut b = Vec::new();
        match *w {
            Op::Create(path, data, acl, flags, _) => {
                put_buf(&mut b, Some(path.as_bytes()));
                put_buf(&mut b, data);
                put_acls(&mut b, acl);
                put_i32(&mut b, flags);
                let op = match flags {
                    4 => 19,
                    5 | 6 => {
                        put_i64(&mut b, TTL_MS);
                        21
                    }
                    _ => 1,
                };
                self.call(op, &b, path);
            }
            Op::Delete(path) => {
                put_buf(&mut b, Some(path.as_bytes()));
                put_i32(&mut b, -1);
                self.call(2, &b, path);
            }
            Op::SetData(path, data) => {
                put_buf(&mut b, Some(path.as_bytes()));
                put_buf(&mut b, Some(data));
                put_i32(&mut b, -1);
                self.call(5, &b, path);
            }
            Op::SetAcl(path, acl) => {
                put_buf(&mut b, Some(path.as_bytes()));
                put_acls(&mut b, acl);
                put_i32(&mut b, -1);
                self.call(7, &b, path);
            }
        }
    }
}

fn quorum_packet(ty: i32, zxid: i64, data: Option<&[u8]>) -> Vec<u8> {
    let mut o = Vec::new();
    put_i32(&mut o, ty);
    put_i64(&mut o, zxid);
    put_buf(&mut o, data);
    put_i32(&mut o, -1);
    o
}

/// Reads one QuorumPacket off the socket, returning its bytes as sent.
fn recv_packet(s: &mut TcpStream) -> Vec<u8> {
    let mut b = read_exact(s, 16);
    let len = i32::from_be_bytes(b[12..16].try_into().expect("4 bytes"));
    assert!(len < 1 << 20, "packet data length {len}");
    if len > 0 {
        b.extend(read_exact(s, len as usize));
    }
    b.extend(read_exact(s, 4));
    let auth = i32::from_be_bytes(b[b.len() - 4..].try_into().expect("4 bytes"));
    assert!(auth <= 0, "authinfo from the leader");
    b
}

const JAR: &str = "/usr/share/java/zookeeper.jar";

/// Starts an Apache server on `dir/zoo.cfg`, its output in `dir/out.log`.
fn start_java(dir: &Path, props: &[&str]) -> Child {
    let log = std::fs::File::create(dir.join("out.log")).expect("log");
    Command::new("java")
        .arg("-Xmx256m")
        .args(props)
        .args([
            "-cp",
            &format!("/etc/zookeeper/conf:{JAR}"),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        ])
        .arg(dir.join("zoo.cfg"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start java")
}

fn srvr(port: u16) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(b"srvr");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
#[ignore = "needs Apache ZooKeeper installed; starts two JVMs; run with --ignored"]
// The capture runs real processes: its waits are bounded by the wall clock.
#[allow(clippy::disallowed_methods)]
fn capture_apache_snap_stream() {
    assert!(Path::new(JAR).exists(), "Apache ZooKeeper is not installed ({JAR})");
    let dir = std::env::temp_dir().join(format!("zkrs-snapcap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut ens = Ensemble { dir: dir.clone(), servers: Vec::new() };
    let client: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let quorum: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let election: Vec<u16> = (0..3).map(|_| free_port()).collect();
    for i in 1..=2usize {
        let sdir = dir.join(format!("s{i}"));
        std::fs::create_dir_all(sdir.join("data")).expect("mkdir");
        std::fs::write(sdir.join("data/myid"), i.to_string()).expect("myid");
        let mut cfg = format!(
            "tickTime=500\ninitLimit=20\nsyncLimit=10\ndataDir={}\nclientPort={}\n\
             admin.enableServer=false\n4lw.commands.whitelist=*\nextendedTypesEnabled=true\n",
            sdir.join("data").display(),
            client[i - 1]
        );
        for j in 0..3 {
            cfg += &format!("server.{}=127.0.0.1:{}:{}\n", j + 1, quorum[j], election[j]);
        }
        std::fs::write(sdir.join("zoo.cfg"), cfg).expect("zoo.cfg");
        let child = start_java(&sdir, &["-Dzookeeper.snapshotSizeFactor=-1"]);
        ens.servers.push(child);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let leader = loop {
        if let Some(i) = (0..2).find(|&i| srvr(client[i]).contains("Mode: leader")) {
            break i;
        }
        assert!(std::time::Instant::now() < deadline, "no leader within 180 s\n{}", ens.logs());
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut c1 = Client::connect(client[leader]);
    let mut c2 = Client::connect(client[leader]);
    for w in WRITES {
        match w {
            Op::Create(.., 2) => c2.write(w),
            _ => c1.write(w),
        }
    }
    // Learner 3 on the leader's quorum port.
    let mut q = TcpStream::connect(("127.0.0.1", quorum[leader])).expect("quorum connect");
    q.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut info = Vec::new();
    put_i64(&mut info, 3);
    put_i32(&mut info, 0x10000);
    put_i64(&mut info, 0);
    q.write_all(&quorum_packet(FOLLOWERINFO, 0, Some(&info))).expect("FOLLOWERINFO");
    let mut transcript = recv_packet(&mut q);
    q.write_all(&quorum_packet(ACKEPOCH, 0, Some(&0i32.to_be_bytes()))).expect("ACKEPOCH");
    let snap = recv_packet(&mut q);
    assert_eq!(
        i32::from_be_bytes(snap[..4].try_into().expect("4")),
        SNAP,
        "leader chose SNAP\n{}",
        ens.logs()
    );
    let snap_zxid = i64::from_be_bytes(snap[4..12].try_into().expect("8"));
    transcript.extend(&snap);
    let mut l = ApacheSnapLoader::new(cfg(), snap_zxid);
    let mut buf = [0u8; 4096];
    let after = loop {
        let n = q.read(&mut buf).expect("stream (bounded by the socket timeout)");
        assert!(n > 0, "leader closed the stream\n{}", ens.logs());
        let fed = l.feed(&buf[..n]).expect("stream loads");
        transcript.extend(&buf[..fed.consumed]);
        if fed.done {
            break buf[fed.consumed..n].to_vec();
        }
    };
    // NEWLEADER may have arrived with the stream's tail; read the rest of it off the socket.
    let mut rest = after;
    loop {
        let mut at = 0;
        if rest.len() >= 16 {
            let len = i32::from_be_bytes(rest[12..16].try_into().expect("4")).max(0) as usize;
            if rest.len() >= 16 + len + 4 {
                at = 16 + len + 4;
            }
        }
        if at > 0 {
            transcript.extend(&rest[..at]);
            break;
        }
        let n = q.read(&mut buf).expect("NEWLEADER (bounded by the socket timeout)");
        assert!(n > 0, "leader closed before NEWLEADER");
        rest.extend(&buf[..n]);
    }
    drop(q);
    drop((c1, c2));
    check_transcript(&transcript);
    if std::env::var_os("ZKRS_WRITE_GOLDEN").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(&path, &transcript).expect("write golden");
    }
}

// ---------------------------------------------------------------------------------------------
// The other way: Apache reads what zkrs writes

/// Adler-32, as the seal of Apache's snapshot files.
fn adler32(b: &[u8]) -> u32 {
    let (mut a, mut s) = (1u32, 0u32);
    for &x in b {
        a = (a + x as u32) % 65521;
        s = (s + a) % 65521;
    }
    (s << 16) | a
}

/// A zkrs tree with every kind of node, built through prep and apply.
fn zkrs_tree() -> Database {
    use zk_proto::{CreateRequest, CreateTtlRequest, OpCode, Request, SetAclRequest, Txn, TxnHeader};
    let mut db = Database::new(cfg());
    let auth =
        zk_tree::AuthIds { ids: vec![Id { scheme: "ip".into(), id: "127.0.0.1".into() }], is_super: false };
    let session = 0x0100_0000_0000_0001;
    let mut zxid = 0x5_0000_0000i64;
    let apply = |db: &mut Database, op: OpCode, txn: Txn, zxid: i64| {
        let time = 1_700_000_000_000 + zxid;
        let txn_type = zk_tree::txn_type(op, &txn).code();
        db.apply(&TxnHeader { client_id: session, cxid: 1, zxid, time, txn_type }, &txn);
    };
    zxid += 1;
    let txn = db.prep_create_session(session, 60_000);
    apply(&mut db, OpCode::CreateSession, txn, zxid);
    let mut run = |db: &mut Database, req: Request| {
        zxid += 1;
        let ctx = zk_tree::RequestCtx { session, cxid: 1, auth: &auth };
        let txn = db.prep(&ctx, &req, zxid, 1_700_000_000_000 + zxid);
        apply(db, req.op(), txn, zxid);
    };
    let create = |path: &str, data: Option<&'static [u8]>, acl: Acls, flags: i32| {
        let data = data.map(bytes::Bytes::from_static);
        let acl = acl_list(acl);
        match flags {
            4 => Request::CreateContainer(CreateRequest { path: path.into(), data, acl, flags }),
            5 => Request::CreateTtl(CreateTtlRequest { path: path.into(), data, acl, flags, ttl: TTL_MS }),
            _ => Request::Create(CreateRequest { path: path.into(), data, acl, flags }),
        }
    };
    for (p, d, a, f) in [
        ("/a", Some(&b"hello"[..]), Acls::Open, 0),
        ("/a/b", None, Acls::Open, 0),
        ("/a/b/c", Some(&b""[..]), Acls::DigestIp, 0),
        ("/a/s-", Some(&b"seq"[..]), Acls::Open, 2),
        ("/e", Some(&b"eph"[..]), Acls::Open, 1),
        ("/cont", None, Acls::Open, 4),
        ("/ttl", Some(&b"t"[..]), Acls::Open, 5),
        ("/\u{fc}n\u{ef}", Some(&b"u"[..]), Acls::Read, 0),
    ] {
        run(&mut db, create(p, d, a, f));
    }
    for i in 0..20 {
        run(&mut db, create(&format!("/a/n{i}"), Some(b"n"), Acls::Open, 0));
    }
    run(
        &mut db,
        Request::SetAcl(SetAclRequest { path: "/a".into(), acl: acl_list(Acls::Read), version: -1 }),
    );
    assert_eq!(db.tree().len(), 4 + 8 + 20, "every create applied");
    db
}

/// Paths of the tree, parents first.
fn all_paths(db: &Database) -> Vec<String> {
    let mut v: Vec<String> = db.tree().iter().map(|(p, _)| p.to_string()).collect();
    v.sort();
    v
}

#[test]
#[ignore = "needs Apache ZooKeeper installed; starts a JVM; run with --ignored"]
// Real processes: waits are bounded by the wall clock.
#[allow(clippy::disallowed_methods)]
fn apache_loads_a_zkrs_stream() {
    use zk_proto::{GetAclResponse, GetChildrenResponse, GetDataResponse};
    assert!(Path::new(JAR).exists(), "Apache ZooKeeper is not installed ({JAR})");
    let db = zkrs_tree();
    let stream = db.apache_snap_to_vec();
    // Apache's snapshot file holds the same serialization: FileHeader{"ZKSN", 2, dbid -1}, the
    // sessions and tree without the signature, then the seal (Adler-32 as a long, and "/").
    let body = &stream[..stream.len() - (4 + "BenWasHere".len())];
    let mut file = Vec::new();
    put_i32(&mut file, i32::from_be_bytes(*b"ZKSN"));
    put_i32(&mut file, 2);
    put_i64(&mut file, -1);
    file.extend_from_slice(body);
    let seal = adler32(&file) as i64;
    put_i64(&mut file, seal);
    put_buf(&mut file, Some(b"/"));
    let dir = std::env::temp_dir().join(format!("zkrs-snapload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut ens = Ensemble { dir: dir.clone(), servers: Vec::new() };
    let sdir = dir.join("s1");
    std::fs::create_dir_all(sdir.join("data/version-2")).expect("mkdir");
    let snap_name = format!("snapshot.{:x}", db.last_applied_zxid());
    std::fs::write(sdir.join("data/version-2").join(snap_name), &file).expect("snapshot");
    let port = free_port();
    let zoo_cfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nadmin.enableServer=false\n\
         4lw.commands.whitelist=*\nextendedTypesEnabled=true\n",
        sdir.join("data").display()
    );
    std::fs::write(sdir.join("zoo.cfg"), zoo_cfg).expect("zoo.cfg");
    ens.servers.push(start_java(&sdir, &[]));
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !srvr(port).contains("Mode: standalone") {
        assert!(std::time::Instant::now() < deadline, "Apache did not start\n{}", ens.logs());
        std::thread::sleep(Duration::from_millis(300));
    }
    // What Apache serves must be what zkrs holds: the tree as loaded back from the same stream
    // (a learner's child order is the stream's, so this one is compared in order).
    let (want, _) =
        zk_tree::apache_snap::load_apache_snap(cfg(), db.last_applied_zxid(), &stream).expect("load");
    let mut c = Client::connect(port);
    for path in all_paths(&want) {
        let n = want.tree().get(&path).expect("node");
        let mut req = Vec::new();
        put_buf(&mut req, Some(path.as_bytes()));
        req.push(0);
        let r: GetDataResponse = zk_proto::jute::from_bytes(c.call(4, &req, &path)).expect("getData reply");
        assert_eq!(r.data.as_deref(), n.data(), "data of {path}");
        assert_eq!(
            r.stat,
            n.client_stat(true, want.tree().num_children(n)),
            "stat of {path}\n{}",
            ens.logs()
        );
        let mut req = Vec::new();
        put_buf(&mut req, Some(path.as_bytes()));
        let r: GetAclResponse = zk_proto::jute::from_bytes(c.call(6, &req, &path)).expect("getACL reply");
        // This client has no ADMIN where a digest id appears, so Apache masks it, as zkrs does.
        assert_eq!(r.acl, zk_tree::acl::mask_digests(&n.acl), "acl of {path}");
        let mut req = Vec::new();
        put_buf(&mut req, Some(path.as_bytes()));
        req.push(0);
        let r: GetChildrenResponse =
            zk_proto::jute::from_bytes(c.call(8, &req, &path)).expect("getChildren reply");
        assert_eq!(r.children, want.tree().child_names(n), "children of {path}");
    }
}
