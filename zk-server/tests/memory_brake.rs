//! The memory brake on the real process (`zkrs.treeMemorySoftLimitBytes`, zk-tree's `memory`):
//! with a limit of a few dozen kilobytes, creates fill the tree until growing writes are refused
//! with SYSTEMERROR; reads, deletes and shrinking setData go on, other sessions keep working,
//! `mntr` and `/metrics` show it, the log names the key (once, not once a refusal), kazoo sees
//! `SystemZookeeperError`; once deletes bring the tree back under the limit, creates work again.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use bytes::Bytes;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use support::client::RawClient;
use support::*;
use zk_proto::*;

/// Debian's python, which has python3-kazoo.
const PYTHON: &str = "/usr/bin/python3";

const LIMIT: u64 = 64 * 1024;

fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to /metrics");
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn multi(c: &mut RawClient, ops: Vec<Request>) -> Vec<OpResult> {
    let r = c.call(Request::Multi(ops));
    assert_eq!(r.err(), ErrorCode::Ok, "a multi's header carries no error");
    zk_proto::response::decode_multi_response(&mut Reader::new(r.body.clone())).expect("multi reply")
}

/// kazoo, as an application would use it: a create and a transaction on a braked server, then
/// a read on the same connection. Prints what each gave.
const KAZOO_SCRIPT: &str = r#"
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=10)
zk.start(timeout=10)
try:
    zk.create("/kazoo-node", b"x" * 100)
    print("create: ok")
except Exception as e:
    print("create:", type(e).__name__)
t = zk.transaction()
t.create("/kazoo-txn", b"y")
print("transaction:", [type(r).__name__ for r in t.commit()])
print("read:", zk.get("/b/n0")[1].version)
zk.stop()
zk.close()
"#;

#[test]
fn growing_writes_refused_past_the_limit_others_go_on() {
    let metrics_port = free_port();
    let extra = format!(
        "zkrs.treeMemorySoftLimitBytes={}k\n\
         metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
         metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={metrics_port}\n",
        LIMIT / 1024
    );
    let server = start(Target::Zkrs, &extra);
    let addr = server.addr();
    assert_eq!(server.mntr_value("zk_tree_memory_soft_limit_bytes"), LIMIT.to_string());
    assert_eq!(server.mntr_value("zk_memory_brake"), "0");

    let mut a = RawClient::connect(addr, 30_000);
    let mut b = RawClient::connect(addr, 30_000);
    assert_eq!(a.create("/b", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let value = vec![b'v'; 1000];
    let mut created = Vec::new();
    loop {
        let path = format!("/b/n{}", created.len());
        match a.create(&path, &value, CreateMode::Persistent).err() {
            ErrorCode::Ok => created.push(path),
            ErrorCode::SystemError => break,
            other => panic!("create {path}: {other:?}"),
        }
        assert!(created.len() < 1000, "the brake never came on");
    }
    // About 1,130 accounted bytes a node: the limit holds some 57 of them.
    assert!((40..=64).contains(&created.len()), "{} nodes fit under {LIMIT} bytes", created.len());
    assert_eq!(server.mntr_value("zk_memory_brake"), "1");
    let used: u64 = server.mntr_value("zk_tree_memory_bytes").parse().unwrap();
    assert!(used > LIMIT, "{used}");

    // Growing writes are refused, from any session: a longer value, an ephemeral, a multi
    // holding a create (its earlier ops pass, the create fails, the rest roll back).
    assert_eq!(a.set_data("/b/n0", &[b'w'; 1001], -1).err(), ErrorCode::SystemError);
    assert_eq!(b.create("/e", b"", CreateMode::Ephemeral).err(), ErrorCode::SystemError);
    let results = multi(
        &mut b,
        vec![
            Request::Check(CheckVersionRequest { path: "/b/n0".into(), version: 0 }),
            Request::Create(CreateRequest {
                path: "/m".into(),
                data: None,
                acl: support::client::open_acl(),
                flags: 0,
            }),
        ],
    );
    assert_eq!(results, [OpResult::Error(ErrorCode::Ok), OpResult::Error(ErrorCode::SystemError)]);
    assert_eq!(b.exists("/m", false).err(), ErrorCode::NoNode);

    // kazoo sees an exception it knows, and its connection stays up.
    let probe = Command::new(PYTHON).args(["-c", "import kazoo"]).output().expect("run python3");
    assert!(probe.status.success(), "kazoo is missing for {PYTHON}: install Debian's python3-kazoo");
    let out = Command::new(PYTHON)
        .args(["-c", KAZOO_SCRIPT, &addr.to_string()])
        .output()
        .expect("run the kazoo script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kazoo: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        stdout,
        "create: SystemZookeeperError\ntransaction: ['SystemZookeeperError']\nread: 0\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // mntr counts every refusal; /metrics exports the same figures.
    let refused: u64 = server.mntr_value("zk_writes_refused_memory_brake").parse().unwrap();
    assert_eq!(refused, 6, "the create, setData, ephemeral, multi and kazoo's create and transaction");
    let text = http_get(SocketAddr::from(([127, 0, 0, 1], metrics_port)), "/metrics");
    assert!(text.contains("# TYPE memory_brake gauge\nmemory_brake 1\n"), "{text}");
    assert!(text.contains("writes_refused_memory_brake 6\n"), "{text}");
    assert!(text.contains(&format!("tree_memory_soft_limit_bytes {LIMIT}\n")), "{text}");

    // One log line names the key, however many writes were refused (they came within 10 s).
    let log = server_log(server.dir.path());
    let lines = log.lines().filter(|l| l.contains("zkrs.treeMemorySoftLimitBytes=")).count();
    assert_eq!(lines, 1, "{log}");

    // Everything else goes on, on both sessions: reads, a setData of the same length or
    // shorter (which frees bytes), deletes; and the sessions are still there.
    let r = a.get_data("/b/n0", false);
    assert_eq!(r.err(), ErrorCode::Ok);
    assert_eq!(b.children2("/b", false).err(), ErrorCode::Ok);
    assert_eq!(a.set_data("/b/n0", &[b'w'; 1000], -1).err(), ErrorCode::Ok);
    assert_eq!(b.set_data("/b/n1", b"short", -1).err(), ErrorCode::Ok);
    let mut c = RawClient::connect(addr, 30_000);
    assert_eq!(c.exists("/b/n2", false).err(), ErrorCode::Ok);

    // Deletes bring the tree back under the limit: creates work again, from every session.
    for p in &created[created.len() / 2..] {
        assert_eq!(b.delete(p, -1).err(), ErrorCode::Ok);
    }
    assert_eq!(server.mntr_value("zk_memory_brake"), "0");
    assert_eq!(a.create("/b/again", &value, CreateMode::Persistent).err(), ErrorCode::Ok);
    assert_eq!(c.create("/e", b"", CreateMode::Ephemeral).err(), ErrorCode::Ok);
    let grown = a.set_data("/b/n1", &Bytes::from(vec![b'z'; 2000]), -1);
    assert_eq!(grown.err(), ErrorCode::Ok);
}

/// In a 3-server ensemble the leader alone decides (it preps every write): a create sent to a
/// follower past the limit is refused with SYSTEMERROR, the refusal is a transaction every
/// member applies alike (equal trees, equal accounted bytes), reads and deletes go on through
/// every member, and once deletes bring the tree under the limit, writes through a follower
/// succeed again.
#[test]
fn in_an_ensemble_the_leader_refuses_for_everyone() {
    use support::ensemble::Ensemble;
    let e = Ensemble::start_with_extra(3, &format!("zkrs.treeMemorySoftLimitBytes={}k\n", LIMIT / 1024));
    let leader = e.wait_for_leader();
    let follower = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let mut f = e.client(follower);
    let mut o = e.client(other);
    assert_eq!(f.create("/b", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let value = vec![b'v'; 1000];
    let mut created = Vec::new();
    loop {
        let path = format!("/b/n{}", created.len());
        match f.create(&path, &value, CreateMode::Persistent).err() {
            ErrorCode::Ok => created.push(path),
            ErrorCode::SystemError => break,
            other => panic!("create {path} through a follower: {other:?}"),
        }
        assert!(created.len() < 1000, "the brake never came on");
    }
    assert!((40..=64).contains(&created.len()), "{} nodes fit under {LIMIT} bytes", created.len());
    // Through the other follower and through the leader alike.
    assert_eq!(o.create("/x", b"", CreateMode::Persistent).err(), ErrorCode::SystemError);
    let mut l = e.client(leader);
    assert_eq!(l.set_data("/b/n0", &[b'w'; 1001], -1).err(), ErrorCode::SystemError);
    // The leader counted the refusals it decided; every member holds the same tree.
    assert_eq!(mntr_value(e.members[leader].client, "zk_memory_brake"), "1");
    assert_eq!(mntr_value(e.members[leader].client, "zk_writes_refused_memory_brake"), "3");
    for c in [&mut o, &mut f] {
        assert_eq!(c.call(Request::Sync(SyncRequest { path: "/".into() })).err(), ErrorCode::Ok);
    }
    let bytes: Vec<String> =
        (0..3).map(|i| mntr_value(e.members[i].client, "zk_tree_memory_bytes")).collect();
    assert!(bytes.iter().all(|b| b == &bytes[0]), "accounted bytes differ: {bytes:?}");
    let counts: Vec<String> = (0..3).map(|i| mntr_value(e.members[i].client, "zk_znode_count")).collect();
    assert!(counts.iter().all(|c| c == &counts[0]), "znode counts differ: {counts:?}");

    // Reads and deletes through the followers go on; the tree comes back under the limit.
    assert_eq!(o.get_data("/b/n1", false).err(), ErrorCode::Ok);
    for p in &created[created.len() / 2..] {
        assert_eq!(o.delete(p, -1).err(), ErrorCode::Ok);
    }
    assert_eq!(mntr_value(e.members[leader].client, "zk_memory_brake"), "0");
    assert_eq!(f.create("/b/again", &value, CreateMode::Persistent).err(), ErrorCode::Ok);
    assert_eq!(o.call(Request::Sync(SyncRequest { path: "/".into() })).err(), ErrorCode::Ok);
    assert_eq!(o.exists("/b/again", false).err(), ErrorCode::Ok, "the other follower has it once synced");
}
