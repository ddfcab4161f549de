//! Reads log and snapshot files written by the real Apache ZooKeeper (the Debian package): start
//! it on a temp directory with a small snapCount, make changes with zkCli.sh, stop it, and read
//! every file it wrote. Skipped (with a message) where Java or the package is missing.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zk_log::apache::{read_snapshot, zxid_from_apache_name, ApacheLog};
use zk_proto::{OpCode, Txn};

const JAR: &str = "/usr/share/java/zookeeper.jar";

fn port_free() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn wait_port(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn sorted_files(dir: &Path, prefix: &str) -> Vec<(i64, std::path::PathBuf)> {
    let mut v: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            Some((zxid_from_apache_name(&name, prefix)?, e.path()))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn reads_files_written_by_apache_zookeeper() {
    if !Path::new(JAR).exists()
        || !Command::new("/usr/bin/python3").args(["-c", "import kazoo"]).status().is_ok_and(|s| s.success())
        || Command::new("java").arg("-version").output().is_err()
    {
        eprintln!("skipping: Apache ZooKeeper, java or kazoo not installed (./test.sh installs them)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let port = port_free();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={d}/data\ndataLogDir={d}/log\nclientPort={port}\nadmin.enableServer=false\nsnapCount=20\n",
            d = dir.path().display()
        ),
    )
    .expect("write cfg");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Kill(
        Command::new("java")
            .args([
                "-cp",
                &format!("/etc/zookeeper/conf:{JAR}"),
                "org.apache.zookeeper.server.ZooKeeperServerMain",
            ])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Apache ZooKeeper"),
    );
    assert!(wait_port(port, Duration::from_secs(30)), "Apache ZooKeeper did not start");
    // Written with kazoo, which waits for its session before the first request (zkCli.sh fed
    // through a pipe may run the first command before it is connected, and lose it).
    let script = format!(
        "from kazoo.client import KazooClient\n\
         from kazoo.security import ACL, Id\n\
         zk = KazooClient(hosts='127.0.0.1:{port}', timeout=30)\n\
         zk.start(timeout=30)\n\
         zk.create('/a', b'hello')\n\
         zk.create('/a/b', b'world')\n\
         zk.create('/eph', b'e', ephemeral=True)\n\
         zk.create('/seq-', b's', sequence=True)\n\
         zk.set('/a', b'hello2')\n\
         zk.create('/acl', b'x')\n\
         zk.set_acls('/acl', [ACL(3, Id('digest', 'u:cGFzcw=='))])\n\
         zk.create('/c', b'x')\n\
         zk.delete('/c')\n\
         for i in range(1, 31):\n    zk.create('/n%d' % i, b'data%d' % i)\n\
         zk.stop()\n\
         zk.close()\n"
    );
    let status = Command::new("timeout")
        .args(["60", "/usr/bin/python3", "-c", &script])
        .stdin(Stdio::null())
        .status()
        .expect("run the kazoo script");
    assert!(status.success(), "the kazoo script failed: {status}");
    // Stop it with SIGTERM so that a snapshot being written in the background is finished.
    let _ = Command::new("kill").arg(server.0.id().to_string()).status();
    let start = Instant::now();
    while server.0.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(server);

    // Logs: every transaction decodes and checks out, zxids contiguous across files.
    let logs = sorted_files(&dir.path().join("log/version-2"), "log");
    assert!(!logs.is_empty(), "no log files");
    let mut txns = Vec::new();
    for (_, p) in &logs {
        let mut log = ApacheLog::open(p).unwrap_or_else(|e| panic!("{e}"));
        for t in log.by_ref() {
            txns.push(t.unwrap_or_else(|e| panic!("{e}")));
        }
        assert!(!log.ended_torn(), "{} ended torn", p.display());
    }
    for w in txns.windows(2) {
        assert_eq!(w[1].0.zxid, w[0].0.zxid + 1, "zxids contiguous");
    }
    let types: Vec<i32> = txns.iter().map(|(h, _)| h.txn_type).collect();
    assert_eq!(types.first(), Some(&OpCode::CreateSession.code()), "{types:?}");
    assert_eq!(types.last(), Some(&OpCode::CloseSession.code()), "{types:?}");
    let find = |want: &dyn Fn(&Txn) -> bool| txns.iter().any(|(_, t)| want(t));
    assert!(find(
        &|t| matches!(t, Txn::Create(c) if c.path == "/a" && c.data.as_deref() == Some(&b"hello"[..]))
    ));
    assert!(find(
        &|t| matches!(t, Txn::SetData(s) if s.path == "/a" && s.data.as_deref() == Some(&b"hello2"[..]))
    ));
    assert!(find(&|t| matches!(t, Txn::SetAcl(s) if s.path == "/acl" && s.acl[0].perms == 3)));
    assert!(find(&|t| matches!(t, Txn::Delete(d) if d.path == "/c")));
    assert!(find(&|t| matches!(t, Txn::Create(c) if c.path == "/n30")));
    // 1 session + 9 commands + 30 creates + close.
    assert_eq!(txns.len(), 41, "{types:?}");

    // Snapshots: all read, the checksum seals hold; the newest has the early changes.
    let snaps = sorted_files(&dir.path().join("data/version-2"), "snapshot");
    assert!(snaps.len() >= 2, "expected several snapshots with snapCount=20: {snaps:?}");
    for (_, p) in &snaps {
        let mut nodes = Vec::new();
        let info = read_snapshot(p, |n| nodes.push(n)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(nodes.first().map(|n| n.path.as_str()), Some("/"), "{}", p.display());
        assert!(nodes.iter().any(|n| n.path == "/zookeeper"), "{}", p.display());
        assert_eq!(info.nodes as usize, nodes.len());
        for n in &nodes {
            assert!(
                n.acl_key == -1 || info.acls.iter().any(|(k, _)| *k == n.acl_key),
                "acl key of {}",
                n.path
            );
        }
    }
    let (zxid, newest) = snaps.last().expect("snapshots");
    let mut nodes = Vec::new();
    let info = read_snapshot(newest, |n| nodes.push(n)).expect("newest snapshot");
    assert!(*zxid >= 0x0a, "newest snapshot at {zxid:#x}");
    let get = |p: &str| nodes.iter().find(|n| n.path == p).unwrap_or_else(|| panic!("{p} missing"));
    assert_eq!(get("/a/b").data.as_deref(), Some(&b"world"[..]));
    assert_eq!(get("/a").data.as_deref(), Some(&b"hello2"[..]));
    assert_eq!(get("/a").stat.version, 1);
    let acl = get("/acl").acl_key;
    let list = &info.acls.iter().find(|(k, _)| *k == acl).expect("acl in cache").1;
    assert_eq!((list[0].perms, list[0].id.scheme.as_str()), (3, "digest"));
    assert!(nodes.iter().all(|n| n.path != "/c"));
}
